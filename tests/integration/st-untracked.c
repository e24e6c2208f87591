/* st-untracked.c: a State Threads program whose allocator refuses large arrays, so the agent's
 * coroutine table cannot grow past a few thousand entries. It creates 3,000 coroutines before
 * any of them runs (all in the table at once), each counts itself and returns, and prints
 * "ran=N". Under the agent the coroutines past the table's last growth are not recorded at all
 * (no poll without its Spawn) and each counts as one dropped event, with one warning.
 * calloc here refuses 4,096 or more pointer-sized members (the table's arrays; ST's own callocs
 * are of one member). For test-preload-regress.sh. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <st.h>

void *__libc_calloc(size_t n, size_t size);

void *calloc(size_t n, size_t size)
{
	if (n >= 4096 && size == sizeof(void *)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_calloc(n, size);
}

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
