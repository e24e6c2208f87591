// patch-libco-prog.cc: a small program on Tencent's libco linked statically (libcolib.a), for
// test-preload-patch.sh, which patches every libco function in it to a pass-through stub and
// checks that the program computes the same: coroutines created and resumed, poll() turned into
// coroutine waits by libco's hooks, the epoll event loop until every coroutine is done. Knows
// nothing of d9.
#include "co_routine.h"

#include <poll.h>
#include <stdio.h>

static long total, done;

static void *worker(void *arg)
{
	long n = (long)arg;

	co_enable_hook_sys();
	for (int i = 0; i < 3; i++) {
		poll(NULL, 0, (int)n); // a coroutine wait of n ms (libco's hook)
		total += n;
	}
	done++;
	return NULL;
}

static int tick(void *)
{
	return done == 4 ? -1 : 0; // the loop ends when every worker is done
}

int main()
{
	stCoRoutine_t *co[4];

	for (long i = 0; i < 4; i++) {
		co_create(&co[i], NULL, worker, (void *)(i + 1));
		co_resume(co[i]);
	}
	co_eventloop(co_get_epoll_ct(), tick, NULL);
	printf("total=%ld done=%ld\n", total, done);
	return 0;
}
