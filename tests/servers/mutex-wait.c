/* mutex-wait: pthread_mutex_lock under the blocking-call wrapper (test-preload-mutex.sh). The
 * main thread becomes a worker (a poll with a timeout: a park) and then, inside its loop turn:
 * takes and releases a free mutex 1000 times (never a BlockingCall), takes a recursive mutex
 * twice, asks an error-checking mutex it holds for a second lock (EDEADLK, as without the
 * agent), and finally waits for a mutex another thread holds for HOLD_MS from the moment the
 * main thread waits for it (the one BlockingCall: wait_for_holder on its stack). Prints its ground truth as one JSON line:
 * {"free": 1000, "recursive": R, "errorcheck": E, "waited_ns": W}; R is 0 when both recursive
 * locks succeeded, E the second error-checking lock's result. With an argument, it first copies
 * its /proc/self/maps there (the checker's load base for the PIE). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h" /* wait_in_syscall */

#define HOLD_MS 50

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER, free_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ready_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_c = PTHREAD_COND_INITIALIZER;
static int holding;
static pid_t main_tid;
static int main_locking; /* set right before the main thread's lock of `held` */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *holder(void *arg)
{
	struct timespec ts = { 0, HOLD_MS * 1000000L };

	(void)arg;
	pthread_mutex_lock(&held);
	pthread_mutex_lock(&ready_m);
	holding = 1;
	pthread_cond_signal(&ready_c);
	pthread_mutex_unlock(&ready_m);
	/* the hold starts once the main thread waits for `held` (its futex), not before */
	while (!__atomic_load_n(&main_locking, __ATOMIC_ACQUIRE))
		sched_yield();
	wait_in_syscall(main_tid, SYS_futex);
	nanosleep(&ts, NULL);
	pthread_mutex_unlock(&held);
	return NULL;
}

__attribute__((noinline)) static uint64_t wait_for_holder(void)
{
	uint64_t t0 = now_ns();

	__atomic_store_n(&main_locking, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&held);
	uint64_t t1 = now_ns();
	pthread_mutex_unlock(&held);
	return t1 - t0;
}

int main(int argc, char **argv)
{
	pthread_mutexattr_t a;
	pthread_mutex_t rec, chk;
	pthread_t t;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&rec, &a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&chk, &a);
	main_tid = (pid_t)syscall(SYS_gettid);
	/* the holder takes `held` before the loop turn starts */
	if (pthread_create(&t, NULL, holder, NULL) != 0)
		return 1;
	pthread_mutex_lock(&ready_m);
	while (!holding)
		pthread_cond_wait(&ready_c, &ready_m);
	pthread_mutex_unlock(&ready_m);
	poll(NULL, 0, 1); /* a park: the main thread is a worker, in a loop turn from here */
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&free_m);
		pthread_mutex_unlock(&free_m);
	}
	int r1 = pthread_mutex_lock(&rec), r2 = pthread_mutex_lock(&rec);
	pthread_mutex_unlock(&rec);
	pthread_mutex_unlock(&rec);
	pthread_mutex_lock(&chk);
	int e = pthread_mutex_lock(&chk);
	pthread_mutex_unlock(&chk);
	uint64_t waited = wait_for_holder();
	pthread_join(t, NULL);
	poll(NULL, 0, 1); /* ends the loop turn */
	if (argc > 1) {
		FILE *in = fopen("/proc/self/maps", "r"), *out = fopen(argv[1], "w");
		int ch;
		while (in && out && (ch = getc(in)) != EOF)
			putc(ch, out);
		if (in)
			fclose(in);
		if (out)
			fclose(out);
	}
	printf("{\"free\": 1000, \"recursive\": %d, \"errorcheck\": %d, \"waited_ns\": %llu}\n",
		r1 | r2, e, (unsigned long long)waited);
	return 0;
}
