/* exit-progs.c: small programs for test-agent-exits.sh, each ending the process one way. Run under
 * LD_PRELOAD=libd9agent.so; each records a few parks (epoll_wait with a timeout, which makes the
 * thread a worker) before it ends, so there is always a segment to seal.
 *   exit-progs sig-_exit         a SIGUSR1 handler calls _exit(3) while main is parked
 *   exit-progs _Exit             _Exit(4) from main
 *   exit-progs exec PROG ARGS    execv(PROG, ARGS) after recording (the old image's segment)
 *   exit-progs exec-fail         execl of a path that does not exist, 50 more parks, exit(6)
 *   exit-progs thread-exit-group a secondary thread ends the process with syscall(SYS_exit_group, 5)
 *   exit-progs abort             abort() (SIGABRT, default action)
 *   exit-progs segv              a write through a null pointer (SIGSEGV, default action)
 *   exit-progs wait-term         parks until a SIGTERM (default action) ends it
 *   exit-progs fork-unshare      forks a child that enters a new user namespace (unshare, which
 *                                a multi-threaded process may not do), parks 20 times and exits;
 *                                exits with the child's status (8: unshare not permitted here)
 *   exit-progs setns-busy        a worker that parks (1 ms) and computes (2 ms) in turn while main
 *                                calls setns(its own net namespace, 0) 5 times (the agent pauses
 *                                around it: "any type" may be a user or mount namespace), then
 *                                stops the worker, prints "worker TID parks N" and exits (9: setns
 *                                not permitted here)
 *   exit-progs fork-block        a blocking call (usleep 20 ms in parent_block) after a park,
 *                                then a fork; the child parks, calls usleep 20 ms in child_block,
 *                                parks and exits; the parent waits for it and exits 0. The
 *                                usleeps are the behaviour under test (calls that block past
 *                                D9_BLOCKING_THRESHOLD, 1 ms by default), not waits for
 *                                anything: a loaded machine only makes them longer
 *   exit-progs storm N           a fork-per-request server: waits in epoll_wait (1 ms), forks a
 *                                child that waits in epoll_wait twice (1 ms) and exits, waits
 *                                for it; N times; prints the wall time in ns */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int ep;

static void park(int n, int ms)
{
	struct epoll_event ev;

	for (int i = 0; i < n; i++)
		epoll_wait(ep, &ev, 1, ms);
}

static void on_usr1(int sig)
{
	(void)sig;
	_exit(3);
}

static volatile int busy_stop;
static long busy_parks, busy_tid;

static void *busy_worker(void *arg)
{
	(void)arg;
	busy_tid = (long)syscall(SYS_gettid);
	while (!busy_stop) {
		park(1, 1);
		busy_parks++;
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) < 2000000);
	}
	return NULL;
}

static void *ender(void *arg)
{
	(void)arg;
	park(20, 1);
	syscall(SYS_exit_group, 5);
	return NULL;
}

/* 20 ms off CPU inside a loop turn: a BlockingCall with this function on its stack */
__attribute__((noinline)) void parent_block(void);
__attribute__((noinline)) void parent_block(void)
{
	usleep(20000);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void child_block(void);
__attribute__((noinline)) void child_block(void)
{
	usleep(20000);
	__asm__ volatile("" ::: "memory");
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || argc < 2)
		return 2;
	const char *mode = argv[1];
	if (!strcmp(mode, "storm")) {
		int n = argc > 2 ? atoi(argv[2]) : 500;
		long long t0 = now_ns();
		for (int i = 0; i < n; i++) {
			park(1, 1); /* the server's own wait, as before accepting a request */
			pid_t p = fork();
			if (p == 0) {
				park(2, 1);
				exit(0);
			}
			if (p < 0)
				return 2;
			int st;
			if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
				return 2;
		}
		printf("%lld\n", now_ns() - t0);
		return 0;
	}
	park(50, 1);
	if (!strcmp(mode, "sig-_exit")) {
		signal(SIGUSR1, on_usr1);
		/* the handler lands while main is parked (between Park and Unpark) */
		struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1 };
		timer_t tm;
		struct itimerspec its = { .it_value = { 0, 20000000 } };
		if (timer_create(CLOCK_MONOTONIC, &sev, &tm) || timer_settime(tm, 0, &its, NULL))
			return 2;
		for (;;)
			park(1, 1000);
	}
	if (!strcmp(mode, "fork-block")) {
		parent_block();
		park(1, 1);
		pid_t p = fork();
		if (p == 0) {
			park(2, 1);
			child_block();
			park(2, 1);
			exit(0);
		}
		int st;
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
			return 2;
		return 0;
	}
	if (!strcmp(mode, "_Exit"))
		_Exit(4);
	if (!strcmp(mode, "exec") && argc > 2) {
		execv(argv[2], argv + 2);
		return 2;
	}
	if (!strcmp(mode, "exec-fail")) {
		execl("/nonexistent/d9-exit-progs", "x", (char *)NULL);
		if (errno != ENOENT)
			return 2;
		park(50, 1);
		exit(6);
	}
	if (!strcmp(mode, "thread-exit-group")) {
		pthread_t th;
		if (pthread_create(&th, NULL, ender, NULL))
			return 2;
		for (;;)
			park(1, 1000);
	}
	if (!strcmp(mode, "setns-busy")) {
		pthread_t th;
		struct timespec gap = { 0, 20000000 };
		if (pthread_create(&th, NULL, busy_worker, NULL))
			return 2;
		nanosleep(&gap, NULL);
		int rc = 0;
		for (int k = 0; k < 5 && !rc; k++) {
			int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
			if (fd < 0 || setns(fd, 0) != 0)
				rc = 9;
			if (fd >= 0)
				close(fd);
			nanosleep(&gap, NULL);
		}
		busy_stop = 1;
		pthread_join(th, NULL);
		printf("worker %ld parks %ld\n", busy_tid, busy_parks);
		exit(rc);
	}
	if (!strcmp(mode, "fork-unshare")) {
		pid_t p = fork();
		if (p == 0) {
			if (unshare(CLONE_NEWUSER) != 0)
				_exit(errno == EPERM || errno == ENOSPC ? 8 : 7);
			park(20, 1);
			exit(0);
		}
		int st;
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st))
			return 2;
		return WEXITSTATUS(st);
	}
	if (!strcmp(mode, "wait-term"))
		for (;;)
			park(1, 1000);
	if (!strcmp(mode, "abort"))
		abort();
	if (!strcmp(mode, "segv")) {
		volatile int *p = NULL;
		*p = 1;
	}
	return 2;
}
