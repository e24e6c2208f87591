/* unit-filter.c: runs a program under a seccomp filter like the ones Debian's systemd units
 * give their services (SystemCallFilter=, whose default action kills the process): redis-server
 * .service allows @system-service without @privileged and @resources, nsd.service and
 * pdns-recursor.service deny @debug and @resources among others. The calls listed here are the
 * ones of those groups that d9's agent could make (setpriority for its threads, perf_event_open
 * for profiling, mincore to test an address, pidfd_getfd, process_vm_writev, setrlimit,
 * sched_setaffinity, ioprio_set, ptrace) plus mincore, which @system-service leaves out: any of
 * them kills the process (SECCOMP_RET_KILL_PROCESS); every other call is allowed. The filter is
 * installed with a raw system call, as systemd installs it before the exec, outside the program.
 * usage: unit-filter PROGRAM [ARGS...] */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "raw-seccomp.h"

#define KILL(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)

int main(int argc, char **argv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		KILL(SYS_setpriority), KILL(SYS_perf_event_open), KILL(SYS_mincore),
		KILL(SYS_pidfd_getfd), KILL(SYS_process_vm_writev), KILL(SYS_setrlimit),
		KILL(SYS_sched_setaffinity), KILL(SYS_ioprio_set), KILL(SYS_ptrace),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { (unsigned short)(sizeof(f) / sizeof(f[0])), f };

	if (argc < 2) {
		fprintf(stderr, "usage: unit-filter PROGRAM [ARGS...]\n");
		return 2;
	}
	if (raw_seccomp_install(&prog) != 0) {
		perror("unit-filter: seccomp");
		return 1;
	}
	execvp(argv[1], argv + 1);
	perror("unit-filter: exec");
	return 127;
}
