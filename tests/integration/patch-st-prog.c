/* patch-st-prog.c: a small program on SRS's State Threads linked statically (libst.a, as SRS links
 * it), for test-preload-patch.sh, which patches every State Threads function in it to a
 * pass-through stub and checks that the program computes the same: coroutines created, sleeping
 * (the epoll idle loop), joined, a mutex and a condition variable. Knows nothing of d9. */
#include <st.h>
#include <stdio.h>
#include <stdlib.h>

static st_cond_t cond;
static long woken;

static void *sleeper(void *arg)
{
	long n = (long)arg;

	for (int i = 0; i < 3; i++)
		st_usleep(1000 * (n + 1));
	return (void *)(n * n);
}

static void *waiter(void *arg)
{
	(void)arg;
	if (st_cond_timedwait(cond, ST_UTIME_NO_TIMEOUT) == 0)
		woken++;
	return NULL;
}

int main(void)
{
	st_thread_t t[6], w;
	long sum = 0;

	if (st_set_eventsys(ST_EVENTSYS_ALT) < 0 || st_init() < 0) {
		perror("st_init");
		return EXIT_FAILURE;
	}
	cond = st_cond_new();
	w = st_thread_create(waiter, NULL, 1, 0);
	for (long i = 0; i < 6; i++)
		t[i] = st_thread_create(sleeper, (void *)i, 1, 0);
	st_usleep(500);
	st_cond_signal(cond);
	for (int i = 0; i < 6; i++) {
		void *r;
		if (st_thread_join(t[i], &r) == 0)
			sum += (long)r;
	}
	st_thread_join(w, NULL);
	st_mutex_t m = st_mutex_new();
	st_mutex_lock(m);
	st_mutex_unlock(m);
	st_mutex_destroy(m);
	printf("sum=%ld woken=%ld eventsys=%s\n", sum, woken, st_get_eventsys_name());
	return EXIT_SUCCESS;
}
