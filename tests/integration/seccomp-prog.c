/* seccomp-prog.c: a program that installs a seccomp filter while it runs, as Debian's chronyd
 * does (-F 1, its package's default: libseccomp's seccomp_load on its main thread, after its
 * start), for test-preload-seccomp.sh. It waits 10 times (poll of a pipe nobody writes to, 5 ms),
 * installs a filter that kills the process at any system call it does not list (no getpid,
 * gettid, openat, pread64, perf_event_open: calls the agent makes), then waits 10 times more,
 * starts a thread that waits 10 times, forks a child that waits 10 times and exits, and exits
 * with exit(0) (atexit handlers, destructors). Prints "before", "after", "done" as it goes.
 * Usage: seccomp-prog MODE [hold]: with hold, before "done" it waits until its standard input
 * ends (the test's sign that it has seen what it looks for in the trace)
 *   thread   seccomp(SECCOMP_SET_MODE_FILTER, 0, prog): the calling thread's filter
 *   tsync    seccomp(..., SECCOMP_FILTER_FLAG_TSYNC, prog): every thread's (the agent's too)
 *   prctl    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog)
 *   fsize    as thread, after setting RLIMIT_FSIZE to 0 (as OpenSSH's sandboxed child does: a
 *            write past it into a file raises SIGXFSZ, which ends the process)
 *   parked   tsync, while a second thread waits in poll (200 ms): that wait's end comes after
 *            the filter (an Unpark: its schedstat reading was a call the filter kills at)
 *   exec     thread (the filter also lets an exec and a dynamic loader's calls through, not
 *            getpid), then exec of /bin/true, which exits 0 (the new image's agent must make
 *            no call at its load either)
 *   spawn    as exec, but posix_spawn of /bin/true, waited for (its exit status 0)
 *   timer    thread (the filter also lets timer_create(SIGEV_THREAD) work: its calls, not
 *            prctl), then a timer whose notification thread, started by the C library, waits
 *            5 ms in poll (a new thread's first wait registers it: prctl, gettid)
 *   failed   seccomp(SECCOMP_SET_MODE_FILTER, 0, a program with an invalid instruction):
 *            EINVAL, no filter; then libseccomp's probes (a NULL program: EFAULT; strict mode
 *            with a flag: EINVAL), which the agent must not take for filters; the program goes
 *            on unfiltered */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int pipe_rd;

static void waits(int n)
{
	struct pollfd p = { .fd = pipe_rd, .events = POLLIN };

	for (int i = 0; i < n; i++)
		if (poll(&p, 1, 5) != 0)
			_exit(3);
}

static void *thread_main(void *arg)
{
	(void)arg;
	waits(10);
	return NULL;
}

#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* What this program itself needs after the filter: its waits, writes, a thread (clone3, memory,
 * signal masks, robust lists, rseq), a fork (clone, wait4) and its exit. */
#define HEAD BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),                \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),                         \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define BASE ALLOW(SYS_poll), ALLOW(SYS_ppoll), ALLOW(SYS_write), ALLOW(SYS_exit),        \
	ALLOW(SYS_exit_group), ALLOW(SYS_rt_sigreturn), ALLOW(SYS_restart_syscall),       \
	ALLOW(SYS_futex), ALLOW(SYS_mmap), ALLOW(SYS_munmap), ALLOW(SYS_mprotect),        \
	ALLOW(SYS_brk), ALLOW(SYS_madvise), ALLOW(SYS_rt_sigprocmask), ALLOW(SYS_clone),  \
	ALLOW(SYS_clone3), ALLOW(SYS_set_robust_list), ALLOW(SYS_rseq), ALLOW(SYS_wait4), \
	ALLOW(SYS_newfstatat), ALLOW(SYS_fstat), ALLOW(SYS_rt_sigaction), ALLOW(SYS_read)
#define KILL BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)
static struct sock_filter filter[] = { HEAD, BASE, KILL };

/* The same, and what an exec and the dynamic loader of the new image need (not getpid) */
static struct sock_filter exec_filter[] = { HEAD, BASE, ALLOW(SYS_close), ALLOW(SYS_execve),
	ALLOW(SYS_arch_prctl), ALLOW(SYS_access), ALLOW(SYS_openat), ALLOW(SYS_pread64),
	ALLOW(SYS_set_tid_address), ALLOW(SYS_prlimit64), ALLOW(SYS_getrandom), KILL };

/* The same, and what timer_create(SIGEV_THREAD) needs (its helper thread) */
static struct sock_filter timer_filter[] = { HEAD, BASE, ALLOW(SYS_timer_create),
	ALLOW(SYS_timer_settime), ALLOW(SYS_timer_delete), ALLOW(SYS_rt_sigtimedwait),
	ALLOW(SYS_getpid), ALLOW(SYS_gettid), ALLOW(SYS_tgkill), ALLOW(SYS_sched_getaffinity), KILL };

static int timer_done[2];

static void on_timer(union sigval v)
{
	struct pollfd p = { .fd = pipe_rd, .events = POLLIN };
	(void)v;
	poll(&p, 1, 5);
	if (write(timer_done[1], "x", 1) != 1)
		_exit(3);
}

static void *parked_main(void *arg)
{
	(void)arg;
	struct pollfd p = { .fd = pipe_rd, .events = POLLIN };
	poll(&p, 1, 200);
	return NULL;
}

/* 1 once thread tid waits in the poll system call (7), 10 s at most */
static int in_poll(pid_t tid)
{
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	for (int i = 0; i < 10000; i++) {
		FILE *f = fopen(path, "r");
		int got = f && fgets(buf, sizeof(buf), f) && atoi(buf) == SYS_poll;
		if (f)
			fclose(f);
		if (got)
			return 1;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

static pid_t parked_tid;
static void *parked_start(void *arg)
{
	__atomic_store_n(&parked_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	return parked_main(arg);
}

int main(int argc, char **argv)
{
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };
	/* a return of an unknown action's opcode: refused by the kernel (EINVAL) */
	struct sock_filter bad_insn[] = { { 0xffff, 0, 0, 0 } };
	struct sock_fprog bad = { 1, bad_insn };
	const char *mode = argc > 1 ? argv[1] : "thread";
	int p[2];
	long r;

	if (pipe(p))
		return 2;
	pipe_rd = p[0];
	waits(10);
	printf("before\n");
	fflush(stdout);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return 2;
	if (!strcmp(mode, "parked")) {
		pthread_t th;
		if (pthread_create(&th, NULL, parked_start, NULL))
			return 2;
		while (!__atomic_load_n(&parked_tid, __ATOMIC_ACQUIRE))
			sched_yield();
		if (!in_poll(parked_tid))
			return 2;
		r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
		if (r != 0)
			return 4;
		pthread_join(th, NULL);
		printf("after\ndone\n");
		fflush(stdout);
		exit(0);
	}
	if (!strcmp(mode, "spawn")) {
		struct sock_fprog ep = { sizeof(exec_filter) / sizeof(exec_filter[0]), exec_filter };
		char *args[] = { "true", NULL };
		pid_t child;
		int st;
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &ep) != 0)
			return 4;
		if (posix_spawn(&child, "/bin/true", NULL, NULL, args, environ) != 0 ||
			waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 8;
		printf("after\ndone\n");
		fflush(stdout);
		exit(0);
	}
	if (!strcmp(mode, "exec")) {
		struct sock_fprog ep = { sizeof(exec_filter) / sizeof(exec_filter[0]), exec_filter };
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &ep) != 0)
			return 4;
		printf("after\ndone\n");
		fflush(stdout);
		execl("/bin/true", "true", (char *)NULL);
		return 9;
	}
	if (!strcmp(mode, "timer")) {
		struct sock_fprog tp = { sizeof(timer_filter) / sizeof(timer_filter[0]), timer_filter };
		timer_t tm;
		struct sigevent ev = { .sigev_notify = SIGEV_THREAD };
		struct itimerspec its = { { 0, 0 }, { 0, 20000000 } };
		if (pipe(timer_done) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &tp) != 0)
			return 4;
		ev.sigev_notify_function = on_timer;
		if (timer_create(CLOCK_MONOTONIC, &ev, &tm) || timer_settime(tm, 0, &its, NULL))
			return 6;
		struct pollfd p = { .fd = timer_done[0], .events = POLLIN };
		if (poll(&p, 1, 10000) != 1)
			return 7;
		printf("after\ndone\n");
		fflush(stdout);
		exit(0);
	}
	if (!strcmp(mode, "fsize")) {
		struct rlimit z = { 0, 0 };
		if (setrlimit(RLIMIT_FSIZE, &z))
			return 2;
	}
	if (!strcmp(mode, "thread") || !strcmp(mode, "fsize"))
		r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
	else if (!strcmp(mode, "tsync"))
		r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
	else if (!strcmp(mode, "prctl"))
		r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
	else if (!strcmp(mode, "failed"))
		r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &bad) == -1 && errno == EINVAL &&
			syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, NULL) == -1 && errno == EFAULT &&
			syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 1, NULL) == -1 && errno == EINVAL ?
			0 : -1;
	else
		return 2;
	if (r != 0)
		return 4;
	waits(10);
	printf("after\n");
	fflush(stdout);
	pthread_t th;
	if (pthread_create(&th, NULL, thread_main, NULL) || pthread_join(th, NULL))
		return 5;
	pid_t c = fork();
	if (c < 0)
		return 6;
	if (c == 0) {
		waits(10);
		exit(0);
	}
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 7;
	if (argc > 2 && !strcmp(argv[2], "hold")) {
		char b[64];
		while (read(0, b, sizeof(b)) > 0)
			;
	}
	printf("done\n");
	exit(0);
}
