/* priv-drop.c: a root process that forks a child which gives up root, the way daemons do:
 * setgroups, setgid, then setuid to an unprivileged user. Both wait in epoll_wait (1 ms timeouts:
 * loop turns in generic mode) before and after. "early": the child drops before its first wait
 * (nginx's workers); "late": the child waits until its own segment file is in the trace
 * directory (the agent runs and writes as root), then drops. The parent, once its own segment is
 * in the directory, renames itself with prctl(PR_SET_NAME, "pd-renamed") and waits some more.
 * Prints "child PID turns N" and "parent PID turns N" (waits made); exits 0 when everything the
 * program itself checks held.
 * "busy": parent and child (which drops first) each sleep 20 us at a time for 6 s inside a loop
 * turn (after one epoll_wait: blocking calls with a low D9_BLOCKING_THRESHOLD), the parent ending
 * last.
 * Built and run by test-real-privdrop.sh; usage: priv-drop early|late|busy TRACE_DIR UID GID. */
#include <dirent.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Sleeps 20 us at a time for `ms` milliseconds: a context switch each time. */
static void spin(int ms)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		usleep(20);
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

static int waits(int ep, int n)
{
	struct epoll_event ev;

	for (int i = 0; i < n; i++)
		epoll_wait(ep, &ev, 1, 1);
	return n;
}

/* Whether DIR holds a segment file of this process. */
static int have_segment(const char *dir)
{
	char prefix[64];
	struct dirent *e;
	int found = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	snprintf(prefix, sizeof(prefix), "trace.%d.", (int)getpid());
	while (!found && (e = readdir(d)))
		found = !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return found;
}

int main(int argc, char **argv)
{
	if (argc != 5 || (strcmp(argv[1], "early") && strcmp(argv[1], "late") &&
		strcmp(argv[1], "busy"))) {
		fprintf(stderr, "usage: priv-drop early|late|busy TRACE_DIR UID GID\n");
		return 2;
	}
	int late = !strcmp(argv[1], "late");
	uid_t uid = (uid_t)atoi(argv[3]);
	gid_t gid = (gid_t)atoi(argv[4]);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (!strcmp(argv[1], "busy")) {
		int status;
		prctl(PR_SET_TIMERSLACK, 1UL); /* 20 us sleeps, not 70 (the default 50 us slack) */
		pid_t pid = fork();
		if (pid < 0)
			return 3;
		if (pid == 0) {
			if (setgroups(0, NULL) || setgid(gid) || setuid(uid))
				_exit(5);
			waits(ep, 1);
			spin(6000);
			exit(0);
		}
		waits(ep, 1);
		spin(6000);
		if (waitpid(pid, &status, 0) != pid)
			return 7;
		return WIFEXITED(status) ? WEXITSTATUS(status) : 8;
	}
	int turns = waits(ep, 50);

	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 3;
	if (pid == 0) {
		int n = 0;
		if (late) {
			/* 30 s at most: the writer flushes every D9_FLUSH_INTERVAL */
			for (int i = 0; i < 30000 && !have_segment(argv[2]); i++)
				n += waits(ep, 1);
			if (!have_segment(argv[2])) {
				fprintf(stderr, "child: no segment of its own before the drop\n");
				_exit(4);
			}
		}
		if (setgroups(0, NULL) || setgid(gid) || setuid(uid)) {
			perror("child: dropping privileges");
			_exit(5);
		}
		if (getuid() != uid || geteuid() != uid || setuid(0) == 0) {
			fprintf(stderr, "child: still privileged\n");
			_exit(6);
		}
		n += waits(ep, 100);
		printf("child %d turns %d\n", (int)getpid(), n);
		fflush(stdout);
		exit(0);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return 7;
	for (int i = 0; i < 30000 && !have_segment(argv[2]); i++)
		turns += waits(ep, 1);
	prctl(PR_SET_NAME, "pd-renamed");
	turns += waits(ep, 50);
	printf("parent %d turns %d\n", (int)getpid(), turns);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 8;
}
