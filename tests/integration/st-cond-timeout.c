/* st-cond-timeout.c: A waits on a condition with a 100 ms timeout, B on the same condition
 * without one, C sleeps 90 ms. main then keeps the CPU for 150 ms, so that ST's next clock check
 * (in its idle coroutine, when main sleeps) finds C's sleep and A's timeout both due: C runs
 * first and signals the condition, and ST skips A (timed out, runnable, not yet run) and wakes B.
 * The trace must say C woke B and A's timer woke A. Prints what ST did ("A=<r>,<errno> B=<r>"),
 * so that the test can tell a run where the machine delayed the first check past C's due from a
 * wrong trace. Built and run by test-preload-regress.sh. */
#include <st.h>
#include <stdio.h>
#include <errno.h>
#include <time.h>
static st_cond_t c;
static int ra = 9, ea, rb = 9;
static void *wa(void *x) { ra = st_cond_timedwait(c, 100000); ea = errno; return x; }
static void *wb(void *x) { rb = st_cond_timedwait(c, ST_UTIME_NO_TIMEOUT); return x; }
static void *wc(void *x) { st_usleep(90000); st_cond_signal(c); return x; }
static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
int main(void)
{
	st_init();
	c = st_cond_new();
	st_thread_create(wa, NULL, 0, 0);
	st_thread_create(wb, NULL, 0, 0);
	st_thread_create(wc, NULL, 0, 0);
	st_usleep(0); /* A, B and C wait now; ST's idle check runs main again at once */
	for (double t0 = mono(); mono() - t0 < 0.15;)
		; /* keep the CPU: C's sleep and A's timeout fall due meanwhile */
	st_usleep(300000); /* the idle check: C, then A, runnable; C signals */
	printf("A=%d,%d B=%d\n", ra, ea, rb);
	return 0;
}
