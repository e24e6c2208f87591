/* st-cond-interrupt.c: A and B wait on one condition; main interrupts A, then signals the
 * condition. ST skips A (already runnable) and wakes B: the trace must say main woke B. Built and
 * run by test-preload-regress.sh. */
#include <st.h>
#include <stdio.h>
#include <errno.h>
static st_cond_t c;
static void *wa(void *x) { int r = st_cond_timedwait(c, ST_UTIME_NO_TIMEOUT); fprintf(stderr, "A: r=%d errno=%d\n", r, errno); return x; }
static void *wb(void *x) { int r = st_cond_timedwait(c, ST_UTIME_NO_TIMEOUT); fprintf(stderr, "B: r=%d\n", r); return x; }
int main(void)
{
	st_init();
	c = st_cond_new();
	st_thread_t a = st_thread_create(wa, NULL, 0, 0);
	st_thread_create(wb, NULL, 0, 0);
	st_usleep(1000); /* both wait now */
	st_thread_interrupt(a);
	st_cond_signal(c); /* ST skips A (already runnable) and wakes B */
	st_usleep(1000);
	return 0;
}
