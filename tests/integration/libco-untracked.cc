// libco-untracked.cc: libco's counterpart of st-untracked.c, for test-rt-libco.sh. The program
// refuses the agent the memory for a larger coroutine table, so the table cannot grow past a few
// thousand entries. It creates 3,000 coroutines before any of them runs (all in the table at
// once), resumes each (it counts itself and returns), releases them, and prints "ran=N". Under
// the agent the coroutines past the table's last growth are not recorded at all (no poll without
// its Spawn) and each counts as one dropped event, with one warning.
// The agent's tables are its own mappings (agent/mem.c): a table of 4,096 pointers is one
// anonymous mapping of 36 KiB. mmap here refuses anonymous mappings larger than 32 KiB and at most
// 40 KiB; libco's stacks (128 KiB, the C library's own mmap inside malloc, which this does not
// see), the agent's buffers (64 KiB blocks) and everything else are other sizes. Linked with
// -rdynamic, so that the agent's calls of mmap find this one.
#include <co_routine.h>

#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if ((flags & MAP_ANONYMOUS) && len > 32768 && len <= 40960) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

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
