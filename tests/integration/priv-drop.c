/* priv-drop.c: a root process that forks a child which gives up root, the way daemons do:
 * setgroups, setgid, then setuid to an unprivileged user. Both wait in epoll_wait (1 ms timeouts:
 * loop turns in generic mode) before and after. "early": the child drops before its first wait
 * (nginx's workers); "late": the child waits until its own segment file is in the trace
 * directory (the agent runs and writes as root), then drops. The parent, once its own segment is
 * in the directory, renames itself with prctl(PR_SET_NAME, "pd-renamed") and waits some more.
 * Prints "child PID turns N" and "parent PID turns N" (waits made); exits 0 when everything the
 * program itself checks held.
 * "busy": parent and child (which drops first) each make 20 us sleeps inside a loop turn (after
 * one epoll_wait): the sleeps are the workload, blocking calls with a low D9_BLOCKING_THRESHOLD,
 * not a wait. They go on until the directory budget has deleted 4 segments in the tree (the
 * ledgers of the lock files, which root can read; checked every 100 ms), 30 s at most; the parent
 * tells the child to stop through a pipe and ends last. A loaded machine makes fewer sleeps a
 * second: a flat 6 s once wrote too little.
 * "jail" and "jail-late": "early" and "late" with the child changing its root directory first,
 * the way HAProxy's and bind9's workers do: chroot() (jail) or syscall(SYS_chroot) (jail-late)
 * into the empty directory $PD_JAIL, chdir("/"), then the drop.
 * "caps" and "caps-late": "early" and "late" with the child giving up every capability but
 * CAP_SETUID after its setgid and before its setuid, the way dnsmasq does (capset, then
 * PR_SET_KEEPCAPS, setuid, and capset again to none): the agent, at the setuid, can no longer
 * chown a directory to the target user.
 * "busy-caps": "busy" with the child's drop as in "caps".
 * "nocaps": no child; the process waits (the agent starts its threads), gives up every
 * capability on its own thread while staying root, then makes set*id calls the kernel refuses it
 * (EPERM), and calls that need no capability: prints "nocaps ok" when each gave what the kernel
 * gives a single thread (glibc aborts a process whose threads' results differ).
 * "fresh": "early" with no wait of the parent's before the fork: the child changes user before
 * anything in the process recorded (the agent has not started), as squid does.
 * Built and run by test-real-privdrop.sh; usage:
 * priv-drop early|late|busy|jail|jail-late|caps|caps-late|fresh TRACE_DIR UID GID. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
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

/* capset(2) of this thread: effective and permitted `caps` (a mask of the first 32), nothing
 * inheritable. */
static int cap_keep(unsigned caps)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { { caps, caps, 0 }, { 0, 0, 0 } };

	return (int)syscall(SYS_capset, &h, d);
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

/* Segments the directory budget deleted in the tree at dir: the ledgers ("d9 budget 1\n", 4 NULs,
 * then the count as u64 LE) of dir/trace.lock and dir/d9-uid-N/trace.lock. */
static unsigned long long budget_deleted(const char *dir)
{
	char path[4200];
	unsigned long long n = 0;
	struct dirent *e;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, "trace.lock") && strncmp(e->d_name, "d9-uid-", 7))
			continue;
		snprintf(path, sizeof(path), "%s/%s%s", dir, e->d_name,
			strcmp(e->d_name, "trace.lock") ? "/trace.lock" : "");
		unsigned char b[32];
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (read(fd, b, sizeof(b)) == (ssize_t)sizeof(b) && !memcmp(b, "d9 budget 1\n", 12)) {
			unsigned long long v = 0;
			for (int i = 7; i >= 0; i--)
				v = v << 8 | b[16 + i];
			n += v;
		}
		close(fd);
	}
	if (d)
		closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 5 || (strcmp(argv[1], "early") && strcmp(argv[1], "late") &&
		strcmp(argv[1], "busy") && strcmp(argv[1], "jail") && strcmp(argv[1], "jail-late") &&
		strcmp(argv[1], "caps") && strcmp(argv[1], "caps-late") && strcmp(argv[1], "fresh") &&
		strcmp(argv[1], "busy-caps") && strcmp(argv[1], "nocaps"))) {
		fprintf(stderr, "usage: priv-drop early|late|busy|busy-caps|jail|jail-late|caps|"
			"caps-late|fresh|nocaps TRACE_DIR UID GID\n");
		return 2;
	}
	int late = !strcmp(argv[1], "late") || !strcmp(argv[1], "jail-late") ||
		!strcmp(argv[1], "caps-late");
	int caps = !strncmp(argv[1], "caps", 4) || !strcmp(argv[1], "busy-caps");
	int fresh = !strcmp(argv[1], "fresh");
	const char *jail = strncmp(argv[1], "jail", 4) ? NULL : getenv("PD_JAIL");
	if (!strncmp(argv[1], "jail", 4) && !jail) {
		fprintf(stderr, "priv-drop: %s needs PD_JAIL\n", argv[1]);
		return 2;
	}
	uid_t uid = (uid_t)atoi(argv[3]);
	gid_t gid = (gid_t)atoi(argv[4]);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (!strcmp(argv[1], "nocaps")) {
		waits(ep, 20);
		for (int i = 0; i < 30000 && !have_segment(argv[2]); i++)
			waits(ep, 1); /* the agent runs: its threads are the process's */
		if (cap_keep(0))
			return 3;
		gid_t g1 = gid;
		struct {
			const char *what;
			int r;
		} refused[] = {
			{ "setgroups", setgroups(1, &g1) },
			{ "initgroups", initgroups("root", gid) },
			{ "setgid", setgid(gid) },
			{ "setegid", setegid(gid) },
			{ "setregid", setregid(gid, gid) },
			{ "setresgid", setresgid(gid, gid, gid) },
			{ "setuid", setuid(uid) },
			{ "seteuid", seteuid(uid) },
			{ "setreuid", setreuid((uid_t)-1, uid) },
			{ "setresuid", setresuid(uid, uid, uid) },
		};
		for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
			if (refused[i].r != -1) {
				fprintf(stderr, "nocaps: %s returned %d, not -1\n", refused[i].what,
					refused[i].r);
				return 4;
			}
		/* what needs no capability: to the ids it has (-1: unchanged) */
		if (setuid(0) || seteuid(0) || setresuid((uid_t)-1, 0, (uid_t)-1) || setgid(0) ||
			setreuid(0, 0)) {
			perror("nocaps: a change to its own ids");
			return 5;
		}
		if (getuid() != 0 || geteuid() != 0)
			return 6;
		waits(ep, 5);
		printf("nocaps ok\n");
		return 0;
	}
	if (!strncmp(argv[1], "busy", 4)) {
		int status, stop[2];
		prctl(PR_SET_TIMERSLACK, 1UL); /* 20 us sleeps, not 70 (the default 50 us slack) */
		if (pipe2(stop, O_CLOEXEC))
			return 3;
		pid_t pid = fork();
		if (pid < 0)
			return 3;
		if (pid == 0) {
			close(stop[1]);
			if (setgroups(0, NULL) || setgid(gid) ||
				(caps && (cap_keep(1u << CAP_SETUID) || prctl(PR_SET_KEEPCAPS, 1))) ||
				setuid(uid) || (caps && cap_keep(0)))
				_exit(5);
			waits(ep, 1);
			/* until the parent closes its end (EOF), 30 s at most */
			struct pollfd pf = { .fd = stop[0], .events = POLLIN };
			for (int i = 0; i < 300 && poll(&pf, 1, 0) == 0; i++)
				spin(100);
			exit(0);
		}
		close(stop[0]);
		waits(ep, 1);
		for (int i = 0; i < 300 && budget_deleted(argv[2]) < 4; i++)
			spin(100);
		close(stop[1]);
		if (waitpid(pid, &status, 0) != pid)
			return 7;
		return WIFEXITED(status) ? WEXITSTATUS(status) : 8;
	}
	int turns = fresh ? 0 : waits(ep, 50);

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
		if (jail && ((late ? syscall(SYS_chroot, jail) : chroot(jail)) || chdir("/"))) {
			perror("child: chroot");
			_exit(9);
		}
		if (setgroups(0, NULL) || setgid(gid) ||
			(caps && (cap_keep(1u << CAP_SETUID) || prctl(PR_SET_KEEPCAPS, 1))) ||
			setuid(uid) || (caps && cap_keep(0))) {
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
	for (int i = 0; i < 30000 && !fresh && !have_segment(argv[2]); i++)
		turns += waits(ep, 1);
	prctl(PR_SET_NAME, "pd-renamed");
	turns += waits(ep, 50);
	printf("parent %d turns %d\n", (int)getpid(), turns);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 8;
}
