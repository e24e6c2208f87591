/* blockstack-burst.c: many slow blocking calls at the same instant, for test-preload-blockstack.sh.
 * THREADS threads each become a worker (a poll with a timeout is a park in generic mode), meet
 * at a barrier, and make one usleep(3 ms) each inside the same loop turn, ROUNDS times: more
 * calls past the threshold at once than the agent has slots for their stacks. Built by the test
 * with -O2 -fomit-frame-pointer. Prints "ok" and exits 0. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 24
#define ROUNDS 5

static pthread_barrier_t meet;

/* The caller the test looks for at the top of each stack. */
__attribute__((noinline)) void burst_sleep(void)
{
	usleep(3000);
	__asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays on the stack */
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		poll(NULL, 0, 1); /* park, then a loop turn starts */
		pthread_barrier_wait(&meet);
		burst_sleep();
	}
	poll(NULL, 0, 1); /* ends the last turn */
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];

	if (pthread_barrier_init(&meet, NULL, THREADS) != 0)
		return 1;
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, sleeper, NULL) != 0)
			return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("ok\n");
	return 0;
}
