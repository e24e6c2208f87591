/* libc-pipe.c: keeps libunwind from leaving a pipe in the host for the agent's sake. libunwind
 * (1.6, x86-64) makes a pipe at its first use, to test addresses for readability by write(2)ing
 * from them, and keeps it for the life of the process: two descriptors the host never asked for
 * and README does not list. The agent still runs libunwind on host threads (the stacks of
 * blocking calls, preload/libc-block.c, with d9__self.busy set); there pipe2 fails with EMFILE
 * instead. libunwind then takes the addresses it would have tested for unreadable, which only
 * ends its rare fallback walks (no unwind information) a frame earlier; it tries again at its
 * next test, so a program that uses libunwind itself later gets its pipe then. The agent never
 * makes a pipe of its own; the program's calls pass straight through. */
#include "preload.h"

#include <unistd.h>

D9_INTERPOSE int pipe2(int fds[2], int flags)
{
	D9_REAL(int, pipe2, (int *, int));

	if (d9__self.busy || d9__self.role == D9_ROLE_AGENT) {
		errno = EMFILE;
		return -1;
	}
	if (!real_pipe2) {
		errno = ENOSYS;
		return -1;
	}
	return real_pipe2(fds, flags);
}
