/* st-mutex.c: State Threads mutexes under the adapter (test-preload-regress.sh). main takes m,
 * A waits for it, main gives it up: ST hands it to A (a Wake of A by main, kind mutex). A keeps
 * m until main signals `go`; B waits for m meanwhile, and main's unlock of m, which it does not
 * hold, fails (EPERM: no hand-off, no Wake); A's unlock hands m to B (a Wake of B by A). Then
 * 1000 locks and unlocks of a free mutex (no Wake, no wait), and a lock of a free mutex by a
 * coroutine with an interrupt pending, which ST answers with EINTR. Prints
 * "contended=<A>,<B> eperm=<r>,<errno> free=<failures> intr=<r>,<errno>". */
#include <st.h>
#include <stdio.h>
#include <errno.h>
static st_mutex_t m, m2;
static st_cond_t go;
static int ra = 9, rb = 9;
static void *wa(void *x)
{
	ra = st_mutex_lock(m);
	st_cond_wait(go);
	st_mutex_unlock(m);
	return x;
}
static void *wb(void *x)
{
	rb = st_mutex_lock(m);
	st_mutex_unlock(m);
	return x;
}
int main(void)
{
	st_init();
	m = st_mutex_new();
	m2 = st_mutex_new();
	go = st_cond_new();
	st_mutex_lock(m);
	st_thread_create(wa, NULL, 0, 0);
	st_usleep(1000); /* A waits for m */
	st_mutex_unlock(m); /* ST gives m to A */
	st_usleep(1000); /* A runs and waits for go, holding m */
	st_thread_create(wb, NULL, 0, 0);
	st_usleep(1000); /* B waits for m */
	errno = 0;
	int rp = st_mutex_unlock(m); /* not main's: EPERM */
	int ep = errno;
	st_cond_signal(go); /* A unlocks m: ST gives it to B */
	st_usleep(1000); /* A, then B, run */
	int bad = 0;
	for (int i = 0; i < 1000; i++)
		if (st_mutex_lock(m2) != 0 || st_mutex_unlock(m2) != 0)
			bad++;
	st_thread_interrupt(st_thread_self()); /* pending: the next blocking call answers it */
	errno = 0;
	int ri = st_mutex_lock(m2);
	int ei = errno;
	printf("contended=%d,%d eperm=%d,%d free=%d intr=%d,%d\n", ra, rb, rp, ep, bad, ri,
		ri < 0 ? ei : 0);
	return 0;
}
