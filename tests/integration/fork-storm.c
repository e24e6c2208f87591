/* fork-storm.c: two server shapes for test-agent-budget.sh (run under LD_PRELOAD=libd9agent.so;
 * it knows nothing of d9).
 *   fork-storm N [P]: a fork-per-request server. The parent waits in epoll_wait twice, then forks
 *     N children, at most P alive at once; each child waits in epoll_wait twice (1 ms, nothing
 *     ready) and exits with exit(0).
 *   fork-storm -w W SECONDS: a pre-forked server (nginx's master and workers). The parent forks
 *     W workers and waits for them; each worker waits in epoll_wait on an always-ready eventfd
 *     as fast as it can for SECONDS (a park and an unpark each time: a busy worker's trace).
 * Prints "child PID" for each child and "parent PID" on stdout; exits 1 if a fork fails or a
 * child does not exit 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void wait_twice(int ep)
{
	struct epoll_event ev;

	epoll_wait(ep, &ev, 1, 1);
	epoll_wait(ep, &ev, 1, 1);
}

static void busy_worker(int seconds)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), ev = eventfd(1, EFD_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN };
	struct timespec t0, t;

	if (ep < 0 || ev < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0)
		exit(1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++)
			epoll_wait(ep, &e, 1, 100);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < seconds);
	exit(0);
}

static int workers(int w, int seconds)
{
	int bad = 0;

	for (int i = 0; i < w; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			busy_worker(seconds);
		printf("child %d\n", (int)pid);
	}
	for (int st; w > 0; w--)
		if (wait(&st) > 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
			bad = 1;
	printf("parent %d\n", (int)getpid());
	return bad;
}

int main(int argc, char **argv)
{
	if (argc > 3 && !strcmp(argv[1], "-w")) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		return workers(atoi(argv[2]), atoi(argv[3]));
	}
	int n = argc > 1 ? atoi(argv[1]) : 500, p = argc > 2 ? atoi(argv[2]) : 4, alive = 0, bad = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || n < 1 || p < 1)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	wait_twice(ep);
	for (int i = 0; i < n; i++) {
		if (alive == p) {
			int st;
			if (wait(&st) > 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
				bad = 1;
			alive--;
		}
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			wait_twice(ep);
			exit(0);
		}
		alive++;
		printf("child %d\n", (int)pid);
	}
	for (int st; alive > 0; alive--)
		if (wait(&st) > 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
			bad = 1;
	printf("parent %d\n", (int)getpid());
	return bad;
}
