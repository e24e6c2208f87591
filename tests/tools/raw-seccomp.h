/* raw-seccomp.h: installs a seccomp filter by the system call instruction, as a container's
 * runtime or systemd installs one before the exec, outside the program: an agent preloaded into
 * the launcher itself does not see it coming. For no-perf.c and unit-filter.c. 0, or -1 with
 * errno. */
#ifndef D9_RAW_SECCOMP_H
#define D9_RAW_SECCOMP_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static inline int raw_seccomp_install(struct sock_fprog *prog)
{
	long r;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"((long)SYS_seccomp), "D"((long)SECCOMP_SET_MODE_FILTER), "S"(0L), "d"(prog)
			 : "rcx", "r11", "memory");
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return 0;
}

#endif
