/* slow-write.c: a preload library for test-agent-hostile.sh's steal-while-writing, loaded after
 * libd9agent.so (LD_PRELOAD="libd9agent.so slow-write.so"), so that the agent's write() reaches
 * this one (another interposer turns the agent's direct system calls off: preload/libc-direct.c).
 * A write by the agent's writer thread (named d9-writer) into a trace .active segment waits
 * 20 ms before it enters the kernel: the window between the agent's check of its descriptor and
 * its write, widened so that a program's dup2 onto that number lands inside it every time. No
 * test hook in the agent: this is what a slow disk or a preempted writer does. */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__attribute__((visibility("default"))) ssize_t write(int fd, const void *buf, size_t n)
{
	char name[16] = "", link[64], target[4096];

	prctl(PR_GET_NAME, name, 0, 0, 0);
	if (!strcmp(name, "d9-writer")) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t k = readlink(link, target, sizeof(target) - 1);
		if (k > 7 && !memcmp(target + k - 7, ".active", 7)) {
			struct timespec ts = { 0, 20000000 };
			syscall(SYS_nanosleep, &ts, NULL);
		}
	}
	return syscall(SYS_write, fd, buf, n);
}
