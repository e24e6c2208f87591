// libco-threads.cc: libco on two threads at once, for test-rt-libco.sh. Each thread creates three
// coroutines (sleeper) that each sleep 5 ms twenty times (poll(NULL, 0, 5) under libco's hook: a
// coroutine sleep), runs co_eventloop until its three are done, then releases them. libco's state
// is per thread, and so is the adapter's: each thread is a worker with its own coroutines.
#include <co_routine.h>

#include <poll.h>
#include <pthread.h>
#include <stdio.h>

static __thread int done;

extern "C" void *sleeper(void *arg)
{
	(void)arg;
	co_enable_hook_sys();
	for (int i = 0; i < 20; i++)
		poll(NULL, 0, 5);
	done++;
	return NULL;
}

static int loop_turn(void *arg)
{
	(void)arg;
	return done == 3 ? -1 : 0;
}

static void *thread_main(void *arg)
{
	stCoRoutine_t *co[3];

	(void)arg;
	for (int i = 0; i < 3; i++) {
		co_create(&co[i], NULL, sleeper, NULL);
		co_resume(co[i]);
	}
	co_eventloop(co_get_epoll_ct(), loop_turn, NULL);
	for (int i = 0; i < 3; i++)
		co_release(co[i]);
	return NULL;
}

int main(void)
{
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, thread_main, NULL) != 0)
			return 1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	puts("done");
	return 0;
}
