/* many-workers.c: a thread-per-connection host for tests/integration/test-agent-hostile.sh. N
 * threads each park twice in poll(NULL, 0, 2) (so each becomes a d9 worker and takes its
 * Unpark readings), then wait; the main thread then opens /dev/null 100 times and counts the
 * opens that fail (EMFILE when the agent holds descriptors per worker). It also counts its open
 * descriptors that name a .../schedstat file: while the threads wait (S, of which SH at numbers
 * of at least 960), in a child forked then, and after every thread was joined. Knows nothing of
 * d9.
 *   many-workers N   prints {"threads":N,"opens":100,"failed":K,"errno":E,"schedstat":S,
 *                     "schedstat_high":SH,"schedstat_child":C,"schedstat_after":A}
 * With --replace FILE, before it forks it closes one such descriptor numbered 960 or up by a raw
 * system call (no libc, as a program may), puts FILE (its own, opened read-write) at that number,
 * and reports whether the child still has FILE there ("replaced_child") and whether it is still
 * there, with the same content, after every thread has ended ("replaced_after"): nothing may
 * close or write a program's file that took a schedstat descriptor's number. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static long raw_close(long fd)
{
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_close), "D"(fd) : "rcx", "r11", "memory");
	return r;
}

/* 1 when descriptor n is open and reads `want` from its start */
static int holds(int n, const char *want)
{
	char buf[64] = "";
	ssize_t k = n >= 0 ? pread(n, buf, sizeof(buf) - 1, 0) : -1;

	return k == (ssize_t)strlen(want) && memcmp(buf, want, (size_t)k) == 0;
}

/* the lowest descriptor numbered 960 or up that names a .../schedstat file, or -1 */
static int high_schedstat(void)
{
	char path[64], link[256];

	for (int fd = 960; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t k = readlink(path, link, sizeof(link) - 1);
		if (k > 10) {
			link[k] = 0;
			if (strcmp(link + k - 10, "/schedstat") == 0)
				return fd;
		}
	}
	return -1;
}

/* this process's descriptors whose link ends in "/schedstat"; *high: those numbered 960 and up */
static int schedstat_fds_high(int *high)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], link[256];
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(path, link, sizeof(link) - 1);
		if (k > 10) {
			link[k] = 0;
			int is = strcmp(link + k - 10, "/schedstat") == 0;
			n += is;
			*high += is && atoi(e->d_name) >= 960;
		}
	}
	closedir(d);
	return n;
}

static int schedstat_fds(void)
{
	int high = 0;

	return schedstat_fds_high(&high);
}

static const char *replace_with; /* --replace FILE */
static int replaced = -1;
static const char host_text[] = "the program's own file\n";

/* the count in a child forked now (the child's only thread is this one); *kept: 1 when the
 * replaced descriptor still holds the program's file there */
static int schedstat_fds_in_child(int *kept)
{
	int p[2], st, got[2] = { -1, 0 };

	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		got[0] = schedstat_fds();
		got[1] = holds(replaced, host_text);
		ssize_t w = write(p[1], got, sizeof(got));
		_exit(w == sizeof(got) ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], got, sizeof(got)) != sizeof(got))
		got[0] = -1;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	*kept = got[1];
	return got[0];
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int parked, release;

static void *worker(void *arg)
{
	(void)arg;
	poll(NULL, 0, 2);
	poll(NULL, 0, 2);
	pthread_mutex_lock(&lock);
	parked++;
	pthread_cond_broadcast(&cond);
	while (!release)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	if (argc > 3 && strcmp(argv[2], "--replace") == 0)
		replace_with = argv[3];
	pthread_t *th = calloc((size_t)(n > 0 ? n : 1), sizeof(*th));
	pthread_attr_t a;
	int started = 0, failed = 0, last_err = 0, fds[100];

	if (n < 1 || !th)
		return 2;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 128 << 10);
	for (; started < n; started++)
		if (pthread_create(&th[started], &a, worker, NULL) != 0)
			break;
	pthread_mutex_lock(&lock);
	while (parked < started)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < 100; i++) {
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			failed++;
			last_err = errno;
		}
	}
	for (int i = 0; i < 100; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	int high = 0, during = schedstat_fds_high(&high), child_kept = 0;
	if (replace_with && (replaced = high_schedstat()) >= 0) {
		int h = open(replace_with, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (h < 0 || write(h, host_text, strlen(host_text)) != (ssize_t)strlen(host_text) ||
			raw_close(replaced) != 0 || fcntl(h, F_DUPFD_CLOEXEC, replaced) != replaced)
			replaced = -2; /* could not set it up */
		if (h >= 0)
			close(h);
	}
	int child = schedstat_fds_in_child(&child_kept);
	pthread_mutex_lock(&lock);
	release = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	printf("{\"threads\":%d,\"opens\":100,\"failed\":%d,\"errno\":%d,\"schedstat\":%d,"
		"\"schedstat_high\":%d,\"schedstat_child\":%d,\"schedstat_after\":%d,\"replaced\":%d,"
		"\"replaced_child\":%d,\"replaced_after\":%d}\n", started, failed, last_err, during,
		high, child, schedstat_fds(), replaced, child_kept, holds(replaced, host_text));
	free(th);
	return 0;
}
