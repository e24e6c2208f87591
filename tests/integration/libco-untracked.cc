// libco-untracked.cc: libco's counterpart of st-untracked.c, for test-rt-libco.sh. The program
// refuses the agent the memory for a larger coroutine table, so the table cannot grow past a few
// thousand entries. It creates 3,000 coroutines before any of them runs (all in the table at
// once), resumes each (it counts itself and returns), releases them, and prints "ran=N". Under
// the agent the coroutines past the table's last growth are not recorded at all (no poll without
// its Spawn) and each counts as one dropped event, with one warning.
// The refusal is refuse-table.h's mmap (libco's stacks, 128 KiB, are another size, and the C
// library's own mmap inside malloc does not reach it).
#include <co_routine.h>

#include "refuse-table.h"

#include <stdio.h>

#define N 3000
static int ran;
static stCoRoutine_t *co[N];

extern "C" void *count(void *arg)
{
	(void)arg;
	ran++;
	return NULL;
}

int main(void)
{
	for (int i = 0; i < N; i++)
		if (co_create(&co[i], NULL, count, NULL) != 0)
			return 3;
	for (int i = 0; i < N; i++)
		co_resume(co[i]);
	for (int i = 0; i < N; i++)
		co_release(co[i]);
	printf("ran=%d\n", ran);
	return ran == N ? 0 : 1;
}
