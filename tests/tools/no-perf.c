/* no-perf.c: runs a program with perf_event_open denied, as in a container whose seccomp
 * profile refuses it: a seccomp filter makes that one system call fail with EACCES (or the errno
 * given with -e) and lets everything else through, then execs the program. The filter is
 * installed with a raw system call, as a container's runtime installs its own outside the
 * program: an agent preloaded into no-perf itself does not see it coming (it would say that
 * no-perf's thread records nothing more, which is true and beside the point here).
 * usage: no-perf [-e ERRNO] PROGRAM [ARGS...] */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "raw-seccomp.h"

int main(int argc, char **argv)
{
	int err = EACCES, first = 1;

	if (argc > 2 && !strcmp(argv[1], "-e")) {
		err = atoi(argv[2]);
		first = 3;
	}
	if (first >= argc || err <= 0 || err > 4095) {
		fprintf(stderr, "usage: no-perf [-e ERRNO] PROGRAM [ARGS...]\n");
		return 2;
	}
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { (unsigned short)(sizeof(f) / sizeof(f[0])), f };
	if (raw_seccomp_install(&prog) != 0) {
		perror("no-perf: seccomp");
		return 1;
	}
	execvp(argv[first], argv + first);
	perror("no-perf: exec");
	return 127;
}
