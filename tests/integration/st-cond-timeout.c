/* st-cond-timeout.c: a condition's signal and waiters whose timeouts fell due, as ST decides it:
 * ST times a waiter out only at a refresh of its cached clock (in its idle coroutine), and a
 * signal skips a waiter it has timed out but not yet run.
 *   skip: A waits with a 100 ms timeout, B without one, C sleeps 90 ms; main keeps the CPU for
 *         150 ms, so the next refresh (when main sleeps) finds C's sleep and A's timeout due:
 *         C runs first and signals, ST skips A and wakes B.
 *   wake: A waits with a 200 ms timeout, B without one; main keeps the CPU for 250 ms and then
 *         signals, with no refresh since A began: A's timeout has passed on the clock but ST has
 *         not timed it out, and the signal wakes A.
 *   zero: A waits with a timeout of 0, B without one, C signals as soon as it runs (after A and
 *         B began, before any refresh): due at once, A has not timed out yet, and ST wakes it.
 *   intr: A waits with a 100 ms timeout; main keeps the CPU for 150 ms, sleeps 1 us (due before A
 *         at the refresh, so it runs first) and interrupts A, which ST has timed out: the
 *         interrupt only sets A's flag, and A's wake is its timer's (A's wait still returns
 *         EINTR: ST tests the interrupt flag after the timeout's).
 * Prints what ST did ("A=<r>,<errno> B=<r>", 9: did not return); test-preload-regress.sh checks
 * the trace against it (a machine that holds the program back can change the outcome). */
#include <st.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include "../servers/clocks.h"
static st_cond_t c;
static int skip, zero, intr, ra = 9, ea, rb = 9;
static void *wa(void *x) { ra = st_cond_timedwait(c, zero ? 0 : skip || intr ? 100000 : 200000); ea = errno; return x; }
static void *wb(void *x) { rb = st_cond_timedwait(c, ST_UTIME_NO_TIMEOUT); return x; }
static void *wc(void *x)
{
	if (!zero)
		st_usleep(90000);
	st_cond_signal(c);
	return x;
}
static void keep_cpu(double s)
{
	uint64_t t0 = mono_ns();

	while (mono_ns() - t0 < (uint64_t)(s * 1e9))
		;
}

int main(int argc, char **argv)
{
	skip = argc > 1 && strcmp(argv[1], "skip") == 0;
	zero = argc > 1 && strcmp(argv[1], "zero") == 0;
	intr = argc > 1 && strcmp(argv[1], "intr") == 0;
	st_init();
	c = st_cond_new();
	st_thread_t a = st_thread_create(wa, NULL, intr, 0); /* intr: joined, never freed early */
	if (!intr)
		st_thread_create(wb, NULL, 0, 0);
	if (skip || zero)
		st_thread_create(wc, NULL, 0, 0);
	st_usleep(0); /* the others wait now; ST's next refresh runs main again at once */
	if (intr) {
		keep_cpu(0.15); /* A's timeout falls due */
		st_usleep(1); /* the refresh: main, then A, runnable */
		st_thread_interrupt(a);
		st_thread_join(a, NULL);
	} else if (zero) {
		st_usleep(1000); /* A, B, C run; A returns */
	} else if (skip) {
		keep_cpu(0.15); /* C's sleep and A's timeout fall due meanwhile */
		st_usleep(300000); /* the refresh: C, then A, runnable; C signals */
	} else {
		keep_cpu(0.25); /* A's 200 ms pass, with no refresh of ST's clock */
		st_cond_signal(c);
		st_usleep(1000); /* A runs */
	}
	printf("A=%d,%d B=%d\n", ra, ra < 0 ? ea : 0, rb);
	return 0;
}
