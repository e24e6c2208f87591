/* st-untracked.c: a State Threads program that refuses the agent the memory for a larger
 * coroutine table, so the table cannot grow past a few thousand entries. It creates 3,000
 * coroutines before any of them runs (all in the table at once), each counts itself and returns,
 * and prints "ran=N". Under the agent the coroutines past the table's last growth are not
 * recorded at all (no poll without its Spawn) and each counts as one dropped event, with one
 * warning.
 * The refusal is refuse-table.h's mmap (ST's stacks, 16 KiB and two guard pages, are another
 * size). For test-preload-regress.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <st.h>

#include "refuse-table.h"

#define N 3000
static int ran;

static void *count(void *arg)
{
	(void)arg;
	ran++;
	return NULL;
}

int main(void)
{
	if (st_init() < 0)
		return 2;
	for (int i = 0; i < N; i++)
		if (!st_thread_create(count, NULL, 0, 16384))
			return 3;
	for (int i = 0; i < 1000 && ran < N; i++)
		st_usleep(1000);
	printf("ran=%d\n", ran);
	return ran == N ? 0 : 1;
}
