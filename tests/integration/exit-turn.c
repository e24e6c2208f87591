/* exit-turn.c: test-preload-exit-turn.sh's program: a loop that waits twice in epoll_wait (1 ms:
 * the thread is a worker), then burns MS milliseconds of its CPU time in one loop turn and ends
 * without waiting again, as a PostgreSQL backend does whose client sent its last query and its
 * Terminate at once. HOW: exit (exit(0)), _exit, exec (execl("/bin/true")), return (from main).
 * Prints "burn NS" (the burn's wall-clock ns) before it ends. HOW wait: instead of the burn, a
 * child that sleeps MS ms, waited for with wait() (exim's daemon waits so), then one more wait
 * in epoll_wait, and exit 0. usage: exit-turn HOW MS */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t ns_of(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

volatile uint64_t sink;

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	struct epoll_event ev;
	int ep = epoll_create1(0);
	epoll_wait(ep, &ev, 1, 1);
	epoll_wait(ep, &ev, 1, 1);
	if (!strcmp(argv[1], "wait")) {
		pid_t pid = fork();
		if (pid == 0) {
			usleep((useconds_t)atoi(argv[2]) * 1000);
			_exit(0);
		}
		int st;
		if (pid < 0 || wait(&st) != pid)
			return 4;
		epoll_wait(ep, &ev, 1, 1);
		return 0;
	}
	uint64_t t0 = ns_of(CLOCK_MONOTONIC), c0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	uint64_t want = (uint64_t)atoi(argv[2]) * 1000000u, x = 1;
	while (ns_of(CLOCK_THREAD_CPUTIME_ID) - c0 < want)
		for (int i = 0; i < 20000; i++)
			sink = x = x * 6364136223846793005u + 1442695040888963407u;
	printf("burn %llu\n", (unsigned long long)(ns_of(CLOCK_MONOTONIC) - t0));
	fflush(stdout);
	if (!strcmp(argv[1], "_exit"))
		_exit(0);
	if (!strcmp(argv[1], "exec")) {
		execl("/bin/true", "true", (char *)NULL);
		return 3;
	}
	if (!strcmp(argv[1], "exit"))
		exit(0);
	return 0;
}
