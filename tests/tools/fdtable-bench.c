/* fdtable-bench.c: what a descriptor table shared with another thread costs a process's
 * descriptor system calls (agent/COST.md sections 12 and 31). The agent's threads share the
 * program's table, and the kernel then takes a file reference at each system call on a
 * descriptor (fdget), which a single-threaded program's calls skip. Mode none: this thread
 * alone; shared: one idle thread that shares the table, as the agent's do; private: one idle
 * thread that gave itself an empty table of its own first (close_range(0, ~0U,
 * CLOSE_RANGE_UNSHARE), Linux 5.9). Two loops of `calls` calls each, through syscall() (no C
 * library, no agent): "dev" reads a byte from /dev/zero and writes it to /dev/null; "file"
 * preads a byte of a regular file and appends one to another (an access log's write; for a
 * regular file a shared table also takes the file's position lock), both unlinked files in
 * the directory given (default /tmp). The best of 5 loops each, in ns per call, as one JSON
 * line. scripts/bench-micro.sh runs the modes alternately. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1u << 1)
#endif

static int ready = -1; /* the idle thread: 0 once it runs (with its own table if asked), 1 refused */

static void *idle_thread(void *priv)
{
	int r = 0;

	if (priv && syscall(SYS_close_range, 0u, ~0u, CLOSE_RANGE_UNSHARE) != 0)
		r = 1;
	__atomic_store_n(&ready, r, __ATOMIC_RELEASE);
	for (;;)
		pause();
	return NULL;
}

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "none") && strcmp(argv[1], "shared") &&
			 strcmp(argv[1], "private"))) {
		fprintf(stderr, "usage: fdtable-bench none|shared|private [calls [dir]]\n");
		return 2;
	}
	long calls = argc > 2 ? atol(argv[2]) : 2000000;
	const char *dir = argc > 3 ? argv[3] : "/tmp";
	int z = open("/dev/zero", O_RDONLY), n = open("/dev/null", O_WRONLY);
	int in = open(dir, O_TMPFILE | O_RDWR, 0600), log = open(dir, O_TMPFILE | O_WRONLY | O_APPEND, 0600);
	if (z < 0 || n < 0 || in < 0 || log < 0 || calls < 2 || pwrite(in, "x", 1, 0) != 1) {
		perror("fdtable-bench: /dev/zero, /dev/null, or a file in the directory");
		return 1;
	}
	if (strcmp(argv[1], "none") != 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, idle_thread,
				   strcmp(argv[1], "private") == 0 ? (void *)1 : NULL) != 0) {
			perror("fdtable-bench: pthread_create");
			return 1;
		}
		while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) == -1)
			sched_yield();
		if (ready != 0) {
			printf("{\"mode\": \"%s\", \"error\": \"close_range(CLOSE_RANGE_UNSHARE) refused\"}\n",
			       argv[1]);
			return 0;
		}
	}
	char c;
	double best[2] = { 0, 0 };
	for (int r = 0; r < 5; r++) {
		for (int k = 0; k < 2; k++) {
			double t0 = now_ns();
			for (long i = 0; i < calls / 2; i++) {
				if (k == 0) {
					syscall(SYS_read, z, &c, 1);
					syscall(SYS_write, n, &c, 1);
				} else {
					syscall(SYS_pread64, in, &c, 1, 0);
					syscall(SYS_write, log, &c, 1);
				}
			}
			double per = (now_ns() - t0) / (double)(calls / 2 * 2);
			if (r == 0 || per < best[k])
				best[k] = per;
		}
		if (ftruncate(log, 0) != 0)
			return 1;
	}
	printf("{\"mode\": \"%s\", \"calls\": %ld, \"dev_ns_per_call\": %.2f, "
	       "\"file_ns_per_call\": %.2f}\n", argv[1], calls, best[0], best[1]);
	return 0;
}
