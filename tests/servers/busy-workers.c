/* busy-workers.c: N threads, each an event loop that parks in epoll_wait for 1 ms and then burns
 * CPU in a deep call chain, for SECONDS seconds. Every second it prints how many workers made no
 * progress during that second ("t=S stuck=K"), and exits 0 at the end. Under the agent it is a
 * host with many busy workers: with ctimer sampling, signal handlers land everywhere in it. A
 * test reads the last line (all workers progressed) and that it ended at all (no deadlock).
 * With a third argument `take-urg`, after the first second it installs a SIGURG handler of its
 * own (as a program may, after the agent chose SIGURG for its CPU timer) and prints at the end
 * how many SIGURG it received: "urg=COUNT".
 * usage: busy-workers [N (1..64, default 16)] [SECONDS (default 5)] [take-urg] */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile unsigned long progress[64];
static volatile sig_atomic_t urgs;

static void on_urg(int sig)
{
	(void)sig;
	urgs++;
}

__attribute__((noinline)) static unsigned long deep(int d, unsigned long x)
{
	volatile char pad[64];

	pad[0] = (char)x;
	if (d == 0) {
		for (int i = 0; i < 2000; i++)
			x = x * 6364136223846793005ull + 1;
		return x + (unsigned long)pad[0];
	}
	return deep(d - 1, x + 1) + (unsigned long)pad[0];
}

static void *worker(void *arg)
{
	long id = (long)arg;
	int ep = epoll_create1(0);
	struct epoll_event ev;

	for (;;) {
		epoll_wait(ep, &ev, 1, 1); /* parks: the thread becomes a worker */
		for (int k = 0; k < 50; k++)
			sink += deep(40, (unsigned long)k);
		progress[id]++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 16, secs = argc > 2 ? atoi(argv[2]) : 5;
	unsigned long last[64] = { 0 };
	pthread_t t;

	if (n < 1 || n > 64 || secs < 1) {
		fprintf(stderr, "usage: busy-workers [N (1..64)] [SECONDS]\n");
		return 2;
	}
	for (long i = 0; i < n; i++)
		if (pthread_create(&t, NULL, worker, (void *)i) != 0)
			return 1;
	for (int s = 1; s <= secs; s++) {
		sleep(1);
		int stuck = 0;
		for (int i = 0; i < n; i++) {
			if (progress[i] == last[i])
				stuck++;
			last[i] = progress[i];
		}
		printf("t=%d stuck=%d\n", s, stuck);
		fflush(stdout);
		if (s == 1 && argc > 3 && !strcmp(argv[3], "take-urg")) {
			struct sigaction sa;
			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = on_urg;
			sa.sa_flags = SA_RESTART;
			sigaction(SIGURG, &sa, NULL);
		}
	}
	if (argc > 3)
		printf("urg=%d\n", (int)urgs);
	return 0;
}
