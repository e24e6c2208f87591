/* st-untracked.c: a State Threads program that refuses the agent the memory for a larger
 * coroutine table, so the table cannot grow past a few thousand entries. It creates 3,000
 * coroutines before any of them runs (all in the table at once), each counts itself and returns,
 * and prints "ran=N". Under the agent the coroutines past the table's last growth are not
 * recorded at all (no poll without its Spawn) and each counts as one dropped event, with one
 * warning.
 * The agent's tables are its own mappings (agent/mem.c): a table of 4,096 pointers is one
 * anonymous mapping of 36 KiB (32 KiB and the block's 16-byte header, rounded to pages). mmap here
 * refuses anonymous mappings larger than 32 KiB and at most 40 KiB; ST's stacks (16 KiB and two
 * guard pages), the agent's buffers (64 KiB blocks) and everything else are other sizes. Built
 * with -rdynamic, so that the agent's calls of mmap find this one. For test-preload-regress.sh. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <st.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if ((flags & MAP_ANONYMOUS) && len > 32768 && len <= 40960) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
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
