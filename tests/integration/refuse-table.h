/* refuse-table.h: for st-untracked.c and libco-untracked.cc. The program's mmap refuses the
 * agent the memory for a larger coroutine table: the agent's tables are its own mappings
 * (agent/mem.c), and a table of 4,096 pointers is one anonymous mapping of 36 KiB (32 KiB and the
 * block's 16-byte header, rounded to pages). Anonymous mappings larger than 32 KiB and at most
 * 40 KiB are refused; the runtimes' stacks, the agent's buffers (64 KiB blocks) and everything
 * else are other sizes. The program is linked with -rdynamic, so that the agent's calls of mmap
 * find this one. */
#ifndef D9_REFUSE_TABLE_H
#define D9_REFUSE_TABLE_H

#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C"
#endif
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if ((flags & MAP_ANONYMOUS) && len > 32768 && len <= 40960) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

#endif
