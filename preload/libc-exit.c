/* libc-exit.c: the ways a process ends or replaces its image without exit(): _exit and _Exit
 * (common in signal handlers and forked children), quick_exit, exit_group through syscall(3),
 * and the exec family (the old image seals before the new one starts; a failed exec starts the
 * agent again); around unshare/setns the agent's threads step aside. exit() and return from main are the agent's atexit handler (lifecycle.c).
 * Each wrapper seals through the agent (waiting at most D9_EXIT_TIMEOUT, 100 ms), then calls the
 * real function; nothing here may keep the process from ending. A raw exit_group syscall (inline
 * assembly, a static runtime) cannot be seen: its .active segment is recovered by the next
 * start, and the analyzer reads it as it is. Design: agent/DESIGN.md, "Exit, signals, fork". */
#include "preload.h"

#include <linux/close_range.h>
#include <linux/seccomp.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* Resolved at load: _exit may be called from a signal handler and exec from a vfork child, where
 * dlsym (locks, malloc) must not run. */
typedef int exec_fn(const char *, char *const[], char *const[]);
static void (*real__exit)(int);
static void (*real__Exit)(int);
static void (*real_quick_exit)(int);
static long (*real_syscall)(long, ...);
static exec_fn *real_execve, *real_execvpe;
static int (*real_execv)(const char *, char *const[]);
static int (*real_execvp)(const char *, char *const[]);
static int (*real_fexecve)(int, char *const[], char *const[]);
static int (*real_execveat)(int, const char *, char *const[], char *const[], int);
static int (*real_unshare)(int);
static int (*real_setns)(int, int);
static int (*real_chroot)(const char *);
static char self_name[64]; /* this library's file name (secure execution) */

__attribute__((constructor)) static void exit_resolve(void)
{
	int saved = errno;

	real__exit = (void (*)(int))d9__real("_exit", NULL);
	real__Exit = (void (*)(int))d9__real("_Exit", NULL);
	real_quick_exit = (void (*)(int))d9__real("quick_exit", NULL);
	real_syscall = (long (*)(long, ...))d9__real("syscall", NULL);
	real_execve = (exec_fn *)d9__real("execve", NULL);
	real_execvpe = (exec_fn *)d9__real("execvpe", NULL);
	real_execv = (int (*)(const char *, char *const[]))d9__real("execv", NULL);
	real_execvp = (int (*)(const char *, char *const[]))d9__real("execvp", NULL);
	real_fexecve = (int (*)(int, char *const[], char *const[]))d9__real("fexecve", NULL);
	real_execveat = (int (*)(int, const char *, char *const[], char *const[], int))
		d9__real("execveat", NULL);
	real_unshare = (int (*)(int))d9__real("unshare", NULL);
	real_setns = (int (*)(int, int))d9__real("setns", NULL);
	real_chroot = (int (*)(const char *))d9__real("chroot", NULL);
	Dl_info info;
	if (dladdr((void *)exit_resolve, &info) && info.dli_fname) {
		const char *b = strrchr(info.dli_fname, '/');
		snprintf(self_name, sizeof(self_name), "%s", b ? b + 1 : info.dli_fname);
	}
	errno = saved;
}

/* ---- secure execution ------------------------------------------------------------------------
 * The kernel starts a program in secure-execution mode (AT_SECURE) when its ids change at the
 * exec: the caller's real and effective ids differ (squid's master, real uid proxy and effective
 * root, execs its kid so), or the file is set-user-ID or set-group-ID to another id, or has file
 * capabilities and the caller is not root. The loader then ignores LD_PRELOAD's paths, and an
 * agent that comes another way stays off there (lifecycle.c, d9__init): the program is not
 * traced. When the environment it gets asks for the agent (LD_PRELOAD names this library), the
 * agent says so before the exec and records it in this process's trace
 * (d9_agent_exec_untraced). Read-only calls (ids, stat, an extended attribute), none from a
 * thread under a seccomp filter. */

/* Whether the LD_PRELOAD of envp names this library (by path or by name). */
static int env_preloads_us(char *const envp[])
{
	size_t n = strlen(self_name);

	for (; n && envp && *envp; envp++) {
		if (strncmp(*envp, "LD_PRELOAD=", 11))
			continue;
		for (const char *p = *envp + 11; *p;) {
			size_t len = strcspn(p, " :");
			const char *b = p;
			for (const char *q = p; q < p + len; q++)
				if (*q == '/')
					b = q + 1;
			if ((size_t)(p + len - b) == n && !strncmp(b, self_name, n))
				return 1;
			p += len;
			p += strspn(p, " :");
		}
	}
	return 0;
}

/* execvp's search: the first executable file of that name in PATH (glibc's default without
 * one), into buf; file itself when it names a path; NULL when none is found. */
static const char *path_search(const char *file, char *buf, size_t cap)
{
	if (!file || !*file || strchr(file, '/'))
		return file;
	const char *path = getenv("PATH");
	if (!path)
		path = "/bin:/usr/bin";
	for (const char *p = path;; p++) {
		size_t len = strcspn(p, ":");
		if ((size_t)snprintf(buf, cap, "%.*s%s%s", (int)len, p, len ? "/" : "", file) < cap &&
			access(buf, X_OK) == 0)
			return buf;
		p += len;
		if (!*p)
			return NULL;
	}
}

/* Whether the program at (dirfd, path), or open as fd, will start in secure-execution mode (1,
 * with a short text into why), or 0 when it will not or cannot be told; resetids: the ids are
 * reset to the real ones first. */
static int exec_is_secure(int dirfd, const char *path, int fd, int resetids, char *why,
	size_t cap)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	struct stat st;
	struct statvfs vfs;

	if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0)
		return 0;
	if (resetids) { /* posix_spawn's POSIX_SPAWN_RESETIDS: the child's effective ids are the real */
		eu = ru;
		eg = rg;
	}
	if (ru != eu) {
		snprintf(why, cap, "real uid %u, effective uid %u", (unsigned)ru, (unsigned)eu);
		return 1;
	}
	if (rg != eg) {
		snprintf(why, cap, "real gid %u, effective gid %u", (unsigned)rg, (unsigned)eg);
		return 1;
	}
	int ok = fd >= 0 ? fstat(fd, &st) == 0 && fstatvfs(fd, &vfs) == 0 :
		path && fstatat(dirfd, path, &st, 0) == 0 && (dirfd != AT_FDCWD && path[0] != '/' ?
		0 : statvfs(path, &vfs) == 0);
	if (!ok || !S_ISREG(st.st_mode) || (vfs.f_flag & ST_NOSUID))
		return 0; /* a nosuid mount ignores both bits and capabilities */
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
		return 0; /* so does no_new_privs (systemd's NoNewPrivileges=) */
	if ((st.st_mode & S_ISUID) && st.st_uid != eu) {
		snprintf(why, cap, "set-user-ID to uid %u", (unsigned)st.st_uid);
		return 1;
	}
	if ((st.st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) && st.st_gid != eg) {
		snprintf(why, cap, "set-group-ID to gid %u", (unsigned)st.st_gid);
		return 1;
	}
	if (eu != 0 && (fd >= 0 ? fgetxattr(fd, "security.capability", NULL, 0) :
		getxattr(path, "security.capability", NULL, 0)) > 0) {
		snprintf(why, cap, "file capabilities");
		return 1;
	}
	return 0;
}

/* Before an exec or spawn of (dirfd, path) or fd with envp: said and recorded when the program
 * will not be traced for its secure execution. errno kept. */
static void secure_check(int dirfd, const char *path, int fd, int resetids, int search,
	char *const envp[])
{
	int saved = errno;
	char why[64], found[4096];

	/* the cheap tests first: no call at all from a thread under a seccomp filter, nor while d9
	 * is off; then execvp's PATH search (access calls) for a bare name */
	if (!d9__calls_off() && d9__pl_active() && env_preloads_us(envp) &&
		(!search || (path = path_search(path, found, sizeof(found))) != NULL) &&
		exec_is_secure(dirfd, path, fd, resetids, why, sizeof(why)))
		d9_agent_exec_untraced(fd >= 0 ? "(a descriptor)" : path, why);
	errno = saved;
}

/* The process ends here whatever happens: the real function, else the system call itself. */
__attribute__((noreturn)) static void end_now(void (*real)(int), int status)
{
	if (real)
		real(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

D9_INTERPOSE void _exit(int status)
{
	d9_agent_process_end();
	end_now(real__exit, status);
}

D9_INTERPOSE void _Exit(int status)
{
	d9_agent_process_end();
	end_now(real__Exit ? real__Exit : real__exit, status);
}

D9_INTERPOSE void quick_exit(int status)
{
	/* the at_quick_exit handlers run after the seal: what they record is not kept */
	d9_agent_process_end();
	if (real_quick_exit)
		real_quick_exit(status);
	end_now(real__exit, status);
}

/* An exec from a thread under a seccomp filter (its own, or every thread's): the new image has
 * the filter, and its agent must make no call, not even at its load (lifecycle.c, d9__init):
 * the environment it gets carries D9__NO_CALLS=1 (the program's own malloc: freed if the exec
 * fails). envp as it is otherwise. */
static const char no_calls_var[] = "D9__NO_CALLS=1";

static char **no_calls_env(char *const envp[], int *made, char **buf, size_t cap)
{
	size_t n = 0;

	*made = 0;
	if (!d9__calls_off())
		return (char **)envp;
	for (; envp && envp[n]; n++)
		if (!strcmp(envp[n], no_calls_var))
			return (char **)envp;
	/* the caller's stack when it fits (no malloc in a vfork child or a signal handler, where
	 * an exec may be made), else the program's malloc */
	char **e = n + 2 <= cap ? buf : malloc((n + 2) * sizeof(*e));
	if (!e)
		return (char **)envp;
	for (size_t i = 0; i < n; i++)
		e[i] = envp[i];
	e[n] = (char *)no_calls_var;
	e[n + 1] = NULL;
	*made = e == buf ? 2 : 1;
	return e;
}

/* e: the environment to pass (envp, or a copy with the marker); made: 1 when e must be freed */
#define NO_CALLS_ENV(envp, e, made)                                                    \
	char *e##_buf[256];                                                            \
	int made;                                                                      \
	char **e = no_calls_env((envp), &made, e##_buf, sizeof(e##_buf) / sizeof(e##_buf[0]))

/* syscall(3): exit_group ends the process from any thread, execve replaces it; every other
 * number passes through with its six argument registers as they are. */
/* The C library's syscall(), or before the constructor ran (another library's constructor) the
 * system call directly, with glibc's convention (-1 and errno). */
static long call_real(long number, const long a[6])
{
	if (real_syscall)
		return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	long ret = d9__raw6(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		ret = -1;
	}
	return ret;
}

/* syscall(SYS_execve or SYS_execveat): sealed first, and the no-calls marker in the environment
 * from a filtered thread; a function of its own, so that the marker's 2 KiB buffer is in no
 * other syscall()'s frame (a coroutine's stack may be small) */
static __attribute__((noinline)) long syscall_exec(long number, long a[6])
{
	char *buf[256];
	int made, k = number == SYS_execve ? 2 : 3;

	if (number == SYS_execve)
		secure_check(AT_FDCWD, (const char *)a[0], -1, 0, 0, (char *const *)a[2]);
	else if ((a[4] & AT_EMPTY_PATH) && a[1] && !*(const char *)a[1])
		secure_check(AT_FDCWD, NULL, (int)a[0], 0, 0, (char *const *)a[3]);
	else
		secure_check((int)a[0], (const char *)a[1], -1, 0, 0, (char *const *)a[3]);
	d9_agent_exec_begin();
	char **e = no_calls_env((char *const *)a[k], &made, buf, sizeof(buf) / sizeof(buf[0]));
	a[k] = (long)e;
	long r = call_real(number, a);
	if (made == 1)
		free(e);
	d9_agent_exec_failed();
	return r;
}

D9_INTERPOSE long syscall(long number, ...)
{
	va_list ap;
	long a[6];

	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (number == SYS_exit_group)
		d9_agent_process_end();
	if (number == SYS_execve || number == SYS_execveat)
		return syscall_exec(number, a);
	int root = number == SYS_chroot ? d9_agent_chroot_before() : -1;
	/* a seccomp filter (libseccomp's seccomp_load makes it so). libseccomp's checks of the
	 * kernel install none and must not be taken for one: SECCOMP_SET_MODE_STRICT with flags
	 * (EINVAL), SECCOMP_SET_MODE_FILTER without a program (EFAULT) */
	int sec = number == SYS_seccomp && ((a[0] == SECCOMP_SET_MODE_STRICT && !a[1] && !a[2]) ||
		(a[0] == SECCOMP_SET_MODE_FILTER && a[2])) ?
		d9_agent_seccomp_before(a[0] == SECCOMP_SET_MODE_FILTER &&
			(a[1] & SECCOMP_FILTER_FLAG_TSYNC)) : 0;
	/* numbers the call may take from the agent (agent/fdown.c); the agent's own threads make
	 * theirs directly */
	int take = -1, range = 0;
	if (d9__self.role != D9_ROLE_AGENT) {
		if (number == SYS_close)
			take = (int)a[0];
		else if ((number == SYS_dup2 || number == SYS_dup3) && a[0] != a[1])
			take = (int)a[1];
		else if (number == SYS_close_range &&
			 !(a[2] & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)))
			range = 1;
	}
	if (take >= 0)
		d9__fd_host_take(take);
	if (range)
		d9__fd_host_take_range((unsigned)a[0], (unsigned)a[1]);
	long r = call_real(number, a);
	if (take >= 0)
		d9__fd_host_done(take);
	if (range)
		d9__fd_host_range_done();
	if (root >= 0)
		d9_agent_chroot_after(root, r == 0);
	if (sec)
		d9_agent_seccomp_after(sec, number == SYS_seccomp && a[0] == SECCOMP_SET_MODE_FILTER &&
			(a[1] & SECCOMP_FILTER_FLAG_NEW_LISTENER) ? r >= 0 : r == 0);
	/* descriptors whose number or mode may have changed unseen are timed again (libc-fds.c) */
	if (number == SYS_close || number == SYS_fcntl || number == SYS_ioctl) {
		d9__fd_forget((int)a[0]); /* fcntl: F_SETFL or F_DUPFD, perhaps */
		if (number == SYS_fcntl && (a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC))
			d9__fd_forget((int)r);
	} else if (number == SYS_dup || number == SYS_dup2 || number == SYS_dup3) {
		d9__fd_forget((int)a[0]);
		d9__fd_forget(number == SYS_dup ? (int)r : (int)a[1]);
		if (r == 2 && number != SYS_dup && d9__self.role != D9_ROLE_AGENT)
			d9__stderr_meant();
	} else if (number == SYS_close_range) {
		d9__fd_forget_range((unsigned int)a[0], (unsigned int)a[1]);
	}
	return r;
}

/* ---- namespaces ---------------------------------------------------------------------------------
 * A multi-threaded process may not unshare a new user namespace (nor CLONE_THREAD, CLONE_SIGHAND,
 * CLONE_VM) nor setns into a user or mount namespace (EINVAL). A child forked by a recording
 * thread with profiling on has the agent's writer from the fork on (lifecycle.c), so around these
 * calls the agent seals and its threads end, and it starts again afterwards. */
#define SOLO_FLAGS (CLONE_NEWUSER | CLONE_SIGHAND | CLONE_VM | CLONE_THREAD)

/* After d9_agent_pause: its threads are joined, but a joined thread can still be leaving the
 * kernel's thread group for a moment, and the kernel refuses these calls to a process with two
 * threads (EINVAL). Waits until /proc/self/task holds one thread (its link count is 2 + the
 * threads), 100 ms at most, 1 ms at a time; errno kept. */
static void wait_single_thread(void)
{
	int saved = errno;
	struct stat st;

	for (int i = 0; i < 100 && stat("/proc/self/task", &st) == 0 && st.st_nlink > 3; i++) {
		struct timespec ts = { 0, 1000000 };
		syscall(SYS_nanosleep, &ts, NULL); /* not the wrapped nanosleep */
	}
	errno = saved;
}

D9_INTERPOSE int unshare(int flags)
{
	if (!real_unshare) {
		errno = ENOSYS;
		return -1;
	}
	int paused = (flags & SOLO_FLAGS) && d9_agent_pause();
	if (paused)
		wait_single_thread();
	int r = real_unshare(flags);
	if (paused)
		d9_agent_resume();
	return r;
}

D9_INTERPOSE int setns(int fd, int nstype)
{
	if (!real_setns) {
		errno = ENOSYS;
		return -1;
	}
	/* 0: any type, which may be a user or mount namespace */
	int paused = (nstype == 0 || (nstype & (CLONE_NEWUSER | CLONE_NEWNS))) && d9_agent_pause();
	if (paused)
		wait_single_thread();
	int r = real_setns(fd, nstype);
	if (paused)
		d9_agent_resume();
	return r;
}

/* ---- chroot -------------------------------------------------------------------------------------
 * HAProxy's and bind9's workers make one. Before it the agent seals and stops for good (the
 * default, D9_CHROOT=stop), or with D9_CHROOT=follow starts and holds the trace directory for a
 * privilege drop after it, its threads keeping their own root (agent/lifecycle.c, paths.c). */
D9_INTERPOSE int chroot(const char *path)
{
	if (!real_chroot) {
		errno = ENOSYS;
		return -1;
	}
	int token = d9_agent_chroot_before();
	int r = real_chroot(path);
	d9_agent_chroot_after(token, r == 0);
	return r;
}

/* ---- exec ------------------------------------------------------------------------------------ */

D9_INTERPOSE int execve(const char *path, char *const argv[], char *const envp[])
{
	if (!real_execve) {
		errno = ENOSYS;
		return -1;
	}
	secure_check(AT_FDCWD, path, -1, 0, 0, envp);
	d9_agent_exec_begin();
	NO_CALLS_ENV(envp, e, made);
	int r = real_execve(path, argv, e);
	if (made == 1)
		free(e);
	d9_agent_exec_failed();
	return r;
}

D9_INTERPOSE int execv(const char *path, char *const argv[])
{
	if (!real_execv) {
		errno = ENOSYS;
		return -1;
	}
	secure_check(AT_FDCWD, path, -1, 0, 0, environ);
	d9_agent_exec_begin();
	NO_CALLS_ENV(environ, e, made);
	int r = made && real_execve ? real_execve(path, argv, e) : real_execv(path, argv);
	if (made == 1)
		free(e);
	d9_agent_exec_failed();
	return r;
}

D9_INTERPOSE int execvp(const char *file, char *const argv[])
{
	if (!real_execvp) {
		errno = ENOSYS;
		return -1;
	}
	secure_check(AT_FDCWD, file, -1, 0, 1, environ);
	d9_agent_exec_begin();
	NO_CALLS_ENV(environ, e, made);
	int r = made && real_execvpe ? real_execvpe(file, argv, e) : real_execvp(file, argv);
	if (made == 1)
		free(e);
	d9_agent_exec_failed();
	return r;
}

D9_INTERPOSE int execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (!real_execvpe) {
		errno = ENOSYS;
		return -1;
	}
	secure_check(AT_FDCWD, file, -1, 0, 1, envp);
	d9_agent_exec_begin();
	NO_CALLS_ENV(envp, e, made);
	int r = real_execvpe(file, argv, e);
	if (made == 1)
		free(e);
	d9_agent_exec_failed();
	return r;
}

D9_INTERPOSE int fexecve(int fd, char *const argv[], char *const envp[])
{
	if (!real_fexecve) {
		errno = ENOSYS;
		return -1;
	}
	secure_check(AT_FDCWD, NULL, fd, 0, 0, envp);
	d9_agent_exec_begin();
	NO_CALLS_ENV(envp, e, made);
	int r = real_fexecve(fd, argv, e);
	if (made == 1)
		free(e);
	d9_agent_exec_failed();
	return r;
}

D9_INTERPOSE int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
	int flags)
{
	if (!real_execveat) {
		errno = ENOSYS;
		return -1;
	}
	if ((flags & AT_EMPTY_PATH) && !*path)
		secure_check(AT_FDCWD, NULL, dirfd, 0, 0, envp);
	else
		secure_check(dirfd, path, -1, 0, 0, envp);
	d9_agent_exec_begin();
	NO_CALLS_ENV(envp, e, made);
	int r = real_execveat(dirfd, path, argv, e, flags);
	if (made == 1)
		free(e);
	d9_agent_exec_failed();
	return r;
}

/* posix_spawn's attributes reset the child's ids to the real ones (POSIX_SPAWN_RESETIDS). */
static int spawn_resets_ids(const posix_spawnattr_t *at)
{
	short fl = 0;

	return at && posix_spawnattr_getflags(at, &fl) == 0 && (fl & POSIX_SPAWN_RESETIDS);
}

/* posix_spawn and posix_spawnp from a thread under a seccomp filter: the child has it too, and
 * gets the marker as an exec does. (system() and popen() spawn inside the C library, unseen:
 * not covered.) */
D9_INTERPOSE int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
	const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	D9_REAL(int, posix_spawn, (pid_t *, const char *, const posix_spawn_file_actions_t *,
		const posix_spawnattr_t *, char *const[], char *const[]));
	if (!real_posix_spawn)
		return ENOSYS;
	secure_check(AT_FDCWD, path, -1, spawn_resets_ids(at), 0, envp);
	NO_CALLS_ENV(envp, e, made);
	int r = real_posix_spawn(pid, path, fa, at, argv, e);
	if (made == 1)
		free(e);
	return r;
}

D9_INTERPOSE int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
	const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	D9_REAL(int, posix_spawnp, (pid_t *, const char *, const posix_spawn_file_actions_t *,
		const posix_spawnattr_t *, char *const[], char *const[]));
	if (!real_posix_spawnp)
		return ENOSYS;
	secure_check(AT_FDCWD, file, -1, spawn_resets_ids(at), 1, envp);
	NO_CALLS_ENV(envp, e, made);
	int r = real_posix_spawnp(pid, file, fa, at, argv, e);
	if (made == 1)
		free(e);
	return r;
}

/* execl, execlp, execle: the arguments gathered into an array on the stack (as glibc does),
 * then the array form, which seals. */
#define ARGS_FROM_VA(first, ap, argv)                                           \
	size_t n_ = 1;                                                          \
	va_start(ap, first);                                                    \
	while (va_arg(ap, char *))                                              \
		n_++;                                                           \
	va_end(ap);                                                             \
	char **argv = __builtin_alloca((n_ + 1) * sizeof(char *));             \
	argv[0] = (char *)(first);                                              \
	va_start(ap, first);                                                    \
	for (size_t i_ = 1; i_ <= n_; i_++)                                     \
		argv[i_] = va_arg(ap, char *)

D9_INTERPOSE int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	ARGS_FROM_VA(arg, ap, argv);
	va_end(ap);
	return execv(path, argv);
}

D9_INTERPOSE int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	ARGS_FROM_VA(arg, ap, argv);
	va_end(ap);
	return execvp(file, argv);
}

D9_INTERPOSE int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	ARGS_FROM_VA(arg, ap, argv);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}
