/* tz-hold.c: a host whose thread holds glibc's time-zone lock for as long as the test wants, for
 * test-s3.sh (run under LD_PRELOAD=libd9agent.so with TZ=":FIFO"; it knows nothing of d9).
 *   tz-hold SECONDS: prints "holder TID", then that thread calls localtime_r, which takes the
 *   time-zone lock and opens the zone file named by TZ: a FIFO blocks the open, with the lock
 *   held, until the test opens the FIFO for writing. Meanwhile the main thread waits in
 *   epoll_wait (5 ms) in a loop for SECONDS, so that the agent records, seals and uploads.
 *   Then it joins the holder and exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static void *hold(void *arg)
{
	struct tm tm;
	time_t now = time(NULL);

	(void)arg;
	printf("holder %d\n", (int)gettid());
	fflush(stdout);
	localtime_r(&now, &tm); /* blocks in the zone file's open, the lock held */
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;
	struct timespec t0, t;
	struct epoll_event ev;
	int ep = epoll_create1(EPOLL_CLOEXEC), secs = argc == 2 ? atoi(argv[1]) : 0;

	if (secs <= 0 || ep < 0) {
		fprintf(stderr, "usage: tz-hold SECONDS\n");
		return 2;
	}
	if (pthread_create(&th, NULL, hold, NULL))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		epoll_wait(ep, &ev, 1, 5);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < secs);
	pthread_join(th, NULL);
	return 0;
}
