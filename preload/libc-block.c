/* libc-block.c: calls that block the whole worker when a coroutine (or a loop turn: without a
 * runtime, or a runtime's scheduler after its idle wait) makes them: sleeps, file I/O, fsync,
 * connect, DNS, pthread locks and condition waits, semaphores, waitpid, file locks. On a worker
 * inside a coroutine each call costs two timestamps; one that took at least
 * D9_BLOCKING_THRESHOLD becomes a BlockingCall with the call's name, the descriptor's kind, its
 * duration, the coroutine and the caller's stack; not one across which the thread switched
 * coroutines (d9__pl.switches: a runtime's own hook made it a coroutine wait). The stack is never
 * unwound here: the slow path hands the registers and a copy of the top of the stack to the
 * writer, which unwinds them (agent/DESIGN.md, "Blocking-call stacks"). Anywhere else, and with
 * D9_BLOCKING=0, the wrappers are plain pass-throughs. */
#include "preload.h"
#include "requests.h"

#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 1 when a call made now would be timed. */
static inline int timed(void)
{
	if (D9_LIKELY(d9__self.worker)) {
		/* a runtime's coroutine, or its scheduler's own code after an idle wait (libco's
		 * loop callback runs in the scheduler and stalls every coroutine as much as they
		 * do); tested first: a worker's scheduler calls outside both are the common
		 * untimed case */
		if (!d9__pl.coroutine && !d9__pl.in_turn)
			return 0;
	} else if (D9_LIKELY(!d9__self.traced)) {
		return 0;
	}
	/* a worker's coroutine or turn, or a forked child outside any loop (BGSAVE: every call
	 * is the work) */
	return !d9__self.busy && d9__pcfg.blocking && d9__enabled;
}

/* The clock of TIMED: d9__now() with the clock choice read once for both reads. */
#define TIMED_NOW(tsc) (D9_LIKELY(tsc) ? __rdtsc() : d9__now())

static uint32_t fd_kind(int fd)
{
	struct stat st;

	if (fd < 0)
		return D9_FD_NONE;
	if (fstat(fd, &st) != 0)
		return D9_FD_OTHER;
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode))
		return D9_FD_FILE;
	if (S_ISSOCK(st.st_mode))
		return D9_FD_SOCKET;
	if (S_ISFIFO(st.st_mode))
		return D9_FD_PIPE;
	if (S_ISCHR(st.st_mode))
		return D9_FD_CHAR;
	return D9_FD_OTHER;
}

/* 1 when fd is a socket or pipe in non-blocking mode: a call on it never waits for I/O. */
static int nonblocking_stream(int fd, uint32_t kind)
{
	if (fd < 0 || (kind != D9_FD_SOCKET && kind != D9_FD_PIPE))
		return 0;
	/* the kernel's flags, not a hook's: libco's fcntl reports the mode the program asked for
	 * while it keeps its sockets non-blocking underneath */
	long fl = syscall(SYS_fcntl, fd, F_GETFL);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* Whether a call that took [t0, t1] (past the threshold) waited off CPU inside for at least the
 * threshold, or was only running or runnable (preempted). The thread's schedstat is read now
 * (calls past the threshold are the rare case) and compared with its previous reading (an
 * Unpark's, at most D9__SCHED_READ_NS old while the worker parks, or an earlier slow call's).
 * Over [prev, t1] (W ns) the thread spent C ns on CPU and R ns runnable; the rest was off CPU
 * waiting. C comes from the thread CPU clock (one more syscall); an Unpark's reading may lag by
 * the CPU time since the thread last switched in, usually the microseconds since its wait
 * returned. Inside the call of D ns the waiting is at least D - C - R and at most
 * min(D, W - C - R). A sure wait makes a BlockingCall, a sure non-wait does not; a call on a
 * non-blocking socket or pipe never is one (it cannot wait for I/O; on a VM, steal time is missing
 * from the thread's CPU time and looks like waiting), any other call in between is.
 * Without schedstat only that last rule applies. Returns 1 for a BlockingCall; *wait_ns gets
 * min(R, D), the most the call can have been runnable (unchanged when unknown). */
static int waited(uint64_t t0, uint64_t t1, int fd, uint32_t kind, uint64_t *wait_ns)
{
	uint64_t at = d9__pl.ss_at, cpu = d9__pl.ss_cpu, delay = d9__pl.ss_delay;
	uint64_t thr = d9__pcfg.blocking_threshold_ns;
	uint64_t d = d9_agent_ticks_to_ns(t1 - t0);
	struct timespec ts;

	if (d9__pl_schedstat(t1) == 0 && clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
		/* schedstat's CPU time of a running thread lags by up to a scheduler tick (it is
		 * brought up to date at switches and ticks); the thread CPU clock is exact */
		uint64_t now_cpu = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		if (now_cpu > d9__pl.ss_cpu)
			d9__pl.ss_cpu = now_cpu;
	} else {
		at = 0;
	}
	if (at && at <= t0 && d9__pl.ss_cpu >= cpu && d9__pl.ss_delay >= delay) {
		uint64_t w = d9_agent_ticks_to_ns(t1 - at);
		uint64_t used = (d9__pl.ss_cpu - cpu) + (d9__pl.ss_delay - delay);
		*wait_ns = d9__pl.ss_delay - delay < d ? d9__pl.ss_delay - delay : d;
		uint64_t lo = d > used ? d - used : 0;
		uint64_t hi = w > used ? w - used : 0;
		if (hi > d)
			hi = d;
		if (hi < thr)
			return 0;
		/* a sure wait, except on a non-blocking socket or pipe: it cannot wait for I/O,
		 * and what schedstat shows as off CPU there is a VM's steal time (not in the
		 * thread's CPU time) or a brief kernel lock, not the program waiting */
		if (lo >= thr)
			return !nonblocking_stream(fd, kind);
	}
	return !nonblocking_stream(fd, kind);
}

/* The registers the unwinder needs at this point of the calling function, in the PERF_REG order
 * of d9_rec_blocking_call_regs: IP (this very instruction), SP, BP and the callee-saved BX,
 * R12-R15; the others are left 0 (no frame's CFI restores them). A macro: the registers are
 * those of the function it is written in, whose frame the writer's unwind starts from. */
#define CAPTURE_REGS(r)                                                          \
	__asm__ volatile("lea 0(%%rip), %%rax\n\t"                               \
			 "mov %%rax, 64(%0)\n\t"                                  \
			 "mov %%rsp, 56(%0)\n\t"                                  \
			 "mov %%rbp, 48(%0)\n\t"                                  \
			 "mov %%rbx, 8(%0)\n\t"                                   \
			 "mov %%r12, 104(%0)\n\t"                                 \
			 "mov %%r13, 112(%0)\n\t"                                 \
			 "mov %%r14, 120(%0)\n\t"                                 \
			 "mov %%r15, 128(%0)\n\t"                                 \
			 :                                                        \
			 : "r"(r)                                                 \
			 : "rax", "memory")

/* The slow part, for calls past the threshold only. */
static __attribute__((noinline)) void record(uint64_t t0, uint64_t t1, const char *name,
	uint64_t *name_id, int fd, int saved_errno)
{
	uint64_t regs[17] = { 0 };

	if (__atomic_load_n(&d9__no_calls, __ATOMIC_ACQUIRE)) {
		errno = saved_errno; /* a filter on every thread came during the call */
		return;
	}
	d9__self.busy = 1; /* what we call here (locks, fstat, schedstat) is not the host's */
	uint32_t kind = fd_kind(fd);
	uint64_t wait_ns = D9_UNKNOWN;
	int blocked = waited(t0, t1, fd, kind, &wait_ns);
	if (!*name_id)
		*name_id = d9_agent_string(name, strlen(name));
	if (!blocked) {
		/* preempted, not blocked: a SchedDelay inside this poll (its run delay is also in
		 * the next Unpark's sched_wait_ns) */
		d9__self.busy = 0;
		d9_rec_sched_delay(t0, t1, d9__pl.coroutine, *name_id, kind, wait_ns);
		errno = saved_errno;
		return;
	}
	d9__self.busy = 0;
	CAPTURE_REGS(regs);
	/* frames 0 and 1 of the unwind are this function and the wrapper: the stack starts at the
	 * caller of the blocking call */
	d9_rec_blocking_call_regs(t0, d9__pl.coroutine, *name_id, kind, regs, 2);
	errno = saved_errno;
}

/* Times `call` when this thread may record; `fd` names the descriptor (-1: none). */
#define TIMED(name, fd, call) TIMED_IF(1, name, fd, call)

/* TIMED for reads and writes: not on a socket or pipe known to be non-blocking (libc-fds.c),
 * where the call returns at once; it was timed only to tell preemption inside it (a SchedDelay),
 * and the two clock reads cost more than the rest of the wrapper. The descriptor is looked up
 * before timed(): a server's reads and writes are mostly on such sockets, inside a coroutine or a
 * loop turn where timed() would go through all its tests (16 instructions a call). */
#define TIMED_IO(name, fd, call) TIMED_IF(!d9__fd_cannot_wait(fd), name, fd, call)

/* The timing of a call when this thread may record (cond also true): two clock reads, the
 * record of a call past the threshold (record() keeps the call's errno). (A thread
 * waiting here keeps its chunk: offering it to the writer for the wait, as a park does, was
 * tried and taken back: a signal handler that leaves the wait by longjmp, the classic alarm
 * timeout of a sleep, would have left the thread marked for good.) */
#define TIMED_IF(cond, name, fd, call)                                            \
	({                                                                        \
		__typeof__(call) r_;                                              \
		if (!(cond) || D9_LIKELY(!timed())) {                             \
			r_ = (call);                                              \
		} else {                                                          \
			static uint64_t id_;                                      \
			uint32_t sw_ = d9__pl.switches;                           \
			int tsc_ = d9__clock_tsc;                                 \
			uint64_t t0_ = TIMED_NOW(tsc_);                           \
			r_ = (call);                                              \
			uint64_t t1_ = TIMED_NOW(tsc_);                           \
			/* a switch inside: a runtime's hook made it a coroutine \
			 * wait (libco), the thread ran others: not blocked */    \
			if (D9_UNLIKELY(t1_ - t0_ >= __atomic_load_n(              \
				    &d9__pcfg.blocking_threshold_ticks, __ATOMIC_RELAXED)) && \
				sw_ == d9__pl.switches)                           \
				record(t0_, t1_, name, &id_, (fd), errno);        \
		}                                                                 \
		r_;                                                               \
	})

/* ---- sleeps ------------------------------------------------------------------------------------ */

D9_INTERPOSE int nanosleep(const struct timespec *req, struct timespec *rem)
{
	D9_REAL(int, nanosleep, (const struct timespec *, struct timespec *));
	if (!real_nanosleep)
		return (int)syscall(SYS_nanosleep, req, rem);
	return TIMED("nanosleep", -1, real_nanosleep(req, rem));
}

D9_INTERPOSE int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req,
	struct timespec *rem)
{
	D9_REAL(int, clock_nanosleep, (clockid_t, int, const struct timespec *, struct timespec *));
	if (!real_clock_nanosleep)
		return ENOSYS; /* returns the error, like the real one */
	return TIMED("clock_nanosleep", -1, real_clock_nanosleep(clk, flags, req, rem));
}

D9_INTERPOSE int usleep(useconds_t usec)
{
	D9_REAL(int, usleep, (useconds_t));
	if (!real_usleep) {
		errno = ENOSYS;
		return -1;
	}
	return TIMED("usleep", -1, real_usleep(usec));
}

D9_INTERPOSE unsigned int sleep(unsigned int seconds)
{
	D9_REAL(unsigned int, sleep, (unsigned int));
	if (!real_sleep)
		return seconds;
	return TIMED("sleep", -1, real_sleep(seconds));
}

/* ---- descriptors ------------------------------------------------------------------------------- */

/* read, write, readv and writev are on every request's path, nearly always untimed (a
 * non-blocking socket or pipe, or outside a coroutine and a loop turn) and with D9_REQUESTS off:
 * that path is the whole wrapper, the timed call and the requests hook are functions of their
 * own, so that it saves no registers for them. IO_WRAPPER writes the four. Their symbols are
 * "read.timed", "read.slow": a stack that holds one reads "read" (agent/dwsym.c names the
 * agent's frames by the symbol up to its dot). The BlockingCall's stack starts two frames above
 * record() (TIMED_IF): the wrapper reaches fn_timed by a tail call and the slow function
 * (D9_REQUESTS=1, first call) times the call itself, so either way those two frames are the
 * agent's; test-preload-nbfd.sh checks the innermost frame left is the program's, in both modes. */
#define IO_WRAPPER(fn, params, args, nr, hook)                                        \
	static ssize_t(*real_##fn) params;                                           \
	/* the C library's function, or the system call itself (libc-direct.c) */    \
	static inline __attribute__((always_inline)) ssize_t fn##_call params        \
	{                                                                            \
		return D9__SYS(real_##fn args, nr, D9__IO_ARGS args);                \
	}                                                                            \
	static ssize_t fn##_timed params __asm__(#fn ".timed");                      \
	static __attribute__((noinline)) ssize_t fn##_timed params                   \
	{                                                                            \
		return TIMED_IF(1, #fn, fd, fn##_call args);                         \
	}                                                                            \
	/* the first call (the C library's function not found yet) and D9_REQUESTS=1 */ \
	static ssize_t fn##_slow params __asm__(#fn ".slow");                        \
	static __attribute__((noinline)) ssize_t fn##_slow params                    \
	{                                                                            \
		if (!real_##fn && !(real_##fn = (ssize_t(*) params)d9__real(#fn, NULL))) \
			return syscall(nr, D9__IO_ARGS args);                        \
		ssize_t r = TIMED_IO(#fn, fd, fn##_call args);                       \
		D9__REQ_HOOK(hook);                                                  \
		return r;                                                            \
	}                                                                            \
	D9_INTERPOSE ssize_t fn params                                               \
	{                                                                            \
		if (D9_UNLIKELY(!real_##fn || d9__pcfg.requests))                    \
			return fn##_slow args;                                       \
		return d9__fd_cannot_wait(fd) || D9_LIKELY(!timed()) ? fn##_call args \
								     : fn##_timed args; \
	}
#define D9__IO_ARGS(...) __VA_ARGS__

IO_WRAPPER(read, (int fd, void *buf, size_t n), (fd, buf, n), SYS_read,
	d9__req_read(fd, buf, r))
IO_WRAPPER(write, (int fd, const void *buf, size_t n), (fd, buf, n), SYS_write,
	d9__req_wrote(fd, r))

D9_INTERPOSE ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	D9_REAL(ssize_t, pread, (int, void *, size_t, off_t));
	if (!real_pread)
		return syscall(SYS_pread64, fd, buf, n, off);
	return TIMED("pread", fd,
		D9__SYS(real_pread(fd, buf, n, off), SYS_pread64, fd, buf, n, off));
}

/* The 64-bit names are the same functions (off_t is 64 bits here): aliases, not calls through
 * the PLT to the interposer of the other name (open64 was 0.16% of nginx's CPU as a call). */
_Static_assert(sizeof(off_t) == 8, "the *64 names alias the plain ones only where off_t is 64 bits");
D9_INTERPOSE ssize_t pread64(int fd, void *buf, size_t n, off_t off) __attribute__((alias("pread")));

/* The _FORTIFY_SOURCE form (a build that knows the buffer's size): glibc's own check, which ends
 * the program as it would without the agent, then the same timed call. Not interposed, a
 * fortified pread that blocked was in no call's time. */
extern void __chk_fail(void) __attribute__((noreturn));
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
D9_INTERPOSE ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread(fd, buf, n, off);
}
D9_INTERPOSE ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
	__attribute__((alias("__pread_chk")));

D9_INTERPOSE ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	D9_REAL(ssize_t, pwrite, (int, const void *, size_t, off_t));
	if (!real_pwrite)
		return syscall(SYS_pwrite64, fd, buf, n, off);
	return TIMED("pwrite", fd,
		D9__SYS(real_pwrite(fd, buf, n, off), SYS_pwrite64, fd, buf, n, off));
}

D9_INTERPOSE ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
	__attribute__((alias("pwrite")));

IO_WRAPPER(readv, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), SYS_readv,
	d9__req_readv(fd, iov, cnt > 0 ? (size_t)cnt : 0, r))
IO_WRAPPER(writev, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), SYS_writev,
	d9__req_wrote(fd, r))

/* A file an agent thread opens (its own code's, libdw's, zlib's) is the agent's: the program's
 * close of the number waits for, and is never made by, the agent (agent/fdown.c). */
static inline void own_if_agent(int fd)
{
	if (D9_UNLIKELY(d9__self.role == D9_ROLE_AGENT) && fd >= 0)
		d9__fd_mark_new(fd);
}

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

D9_INTERPOSE int open(const char *path, int flags, ...)
{
	D9_REAL(int, open, (const char *, int, ...));
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	int r = !real_open ? (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode) :
		TIMED("open", -1, D9__SYS(real_open(path, flags, mode), SYS_openat, AT_FDCWD, path,
			flags, mode));
	d9__fd_forget(r); /* the number may have been a socket closed unseen */
	own_if_agent(r);
	return r;
}

D9_INTERPOSE int open64(const char *path, int flags, ...) __attribute__((alias("open")));

D9_INTERPOSE int openat(int dirfd, const char *path, int flags, ...)
{
	D9_REAL(int, openat, (int, const char *, int, ...));
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	int r = !real_openat ? (int)syscall(SYS_openat, dirfd, path, flags, mode) :
		TIMED("openat", -1, D9__SYS(real_openat(dirfd, path, flags, mode), SYS_openat, dirfd,
			path, flags, mode));
	d9__fd_forget(r);
	own_if_agent(r);
	return r;
}

D9_INTERPOSE int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

/* A /proc file an agent thread reads with stdio (libdw's /proc/PID/maps at each module report)
 * is read on a descriptor of the agent's, which the C library's fclose would otherwise close
 * unchecked (agent/files.c). Only /proc: other libraries' files (a TLS library's certificates,
 * which may seek or ask for the fileno) keep the C library's stream. */
D9_INTERPOSE FILE *fopen(const char *path, const char *mode)
{
	D9_REAL(FILE *, fopen, (const char *, const char *));
	int rdonly = mode && mode[0] == 'r' && !strchr(mode, '+');
	if (D9_UNLIKELY(d9__self.role == D9_ROLE_AGENT) && rdonly && path &&
		!strncmp(path, "/proc/", 6))
		return d9__file_fopen_read(path);
	if (D9_LIKELY(real_fopen))
		return real_fopen(path, mode);
	/* not found (a lookup under way on this thread): a read-only stream all the same */
	int fd = rdonly ? (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC) : -1;
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!rdonly)
		errno = ENOSYS;
	else if (fd >= 0 && !f)
		close(fd);
	return f;
}

D9_INTERPOSE FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));

D9_INTERPOSE int fsync(int fd)
{
	D9_REAL(int, fsync, (int));
	if (!real_fsync)
		return (int)syscall(SYS_fsync, fd);
	return TIMED("fsync", fd, real_fsync(fd));
}

D9_INTERPOSE int fdatasync(int fd)
{
	D9_REAL(int, fdatasync, (int));
	if (!real_fdatasync)
		return (int)syscall(SYS_fdatasync, fd);
	return TIMED("fdatasync", fd, real_fdatasync(fd));
}

D9_INTERPOSE int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	D9_REAL(int, connect, (int, const struct sockaddr *, socklen_t));
	if (!real_connect)
		return (int)syscall(SYS_connect, fd, addr, len);
	return TIMED_IO("connect", fd,
		D9__SYS(real_connect(fd, addr, len), SYS_connect, fd, addr, len));
}

D9_INTERPOSE int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
	struct addrinfo **res)
{
	D9_REAL(int, getaddrinfo, (const char *, const char *, const struct addrinfo *,
		struct addrinfo **));
	if (!real_getaddrinfo)
		return EAI_SYSTEM;
	return TIMED("getaddrinfo", -1, real_getaddrinfo(node, service, hints, res));
}

D9_INTERPOSE int flock(int fd, int op)
{
	D9_REAL(int, flock, (int, int));
	if (!real_flock)
		return (int)syscall(SYS_flock, fd, op);
	if (op & LOCK_NB)
		return real_flock(fd, op);
	return TIMED("flock", fd, real_flock(fd, op));
}

static int is_wait_lock(int cmd)
{
	return cmd == F_SETLKW || cmd == F_OFD_SETLKW;
}

/* What an fcntl that returned r tells libc-fds.c: F_SETFL sets the mode, a duplicate shares it. */
static void fd_mode_seen(int fd, int cmd, void *arg, int r)
{
	if (cmd == F_SETFL)
		r == 0 ? d9__fd_set_nonblock(fd, ((long)arg & O_NONBLOCK) != 0) : d9__fd_forget(fd);
	else if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
		d9__fd_forget(fd);
		d9__fd_forget(r);
	}
}

/* fcntl and fcntl64 through real (NULL: not found, the system call itself). In line: a
 * BlockingCall's stack starts two frames up, at the interposer's caller. */
static inline __attribute__((always_inline)) int fcntl_via(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	int r;

	if (!real)
		r = (int)syscall(SYS_fcntl, fd, cmd, arg);
	else if (!is_wait_lock(cmd))
		r = real(fd, cmd, arg);
	else
		r = TIMED("fcntl", fd, real(fd, cmd, arg));
	fd_mode_seen(fd, cmd, arg, r);
	return r;
}

D9_INTERPOSE int fcntl(int fd, int cmd, ...)
{
	D9_REAL(int, fcntl, (int, int, ...));
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *); /* every fcntl argument fits a pointer-sized register */
	va_end(ap);
	return fcntl_via(real_fcntl, fd, cmd, arg);
}

D9_INTERPOSE int fcntl64(int fd, int cmd, ...)
{
	D9_REAL(int, fcntl64, (int, int, ...));
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_via(real_fcntl64, fd, cmd, arg);
}

/* ---- processes and threads ---------------------------------------------------------------------- */

D9_INTERPOSE pid_t waitpid(pid_t pid, int *status, int options)
{
	D9_REAL(pid_t, waitpid, (pid_t, int *, int));
	if (!real_waitpid)
		return (pid_t)syscall(SYS_wait4, pid, status, options, NULL);
	if (options & WNOHANG)
		return real_waitpid(pid, status, options);
	return TIMED("waitpid", -1, real_waitpid(pid, status, options));
}

/* wait, wait3, wait4 and waitid: the same wait for a child (exim's daemon waits in wait(), and its
 * loop turn around it was a serious "hog" that was asleep) */
D9_INTERPOSE pid_t wait(int *status)
{
	D9_REAL(pid_t, wait, (int *));
	if (!real_wait)
		return (pid_t)syscall(SYS_wait4, -1, status, 0, NULL);
	return TIMED("wait", -1, real_wait(status));
}

D9_INTERPOSE pid_t wait3(int *status, int options, struct rusage *ru)
{
	D9_REAL(pid_t, wait3, (int *, int, struct rusage *));
	if (!real_wait3)
		return (pid_t)syscall(SYS_wait4, -1, status, options, ru);
	if (options & WNOHANG)
		return real_wait3(status, options, ru);
	return TIMED("wait3", -1, real_wait3(status, options, ru));
}

D9_INTERPOSE pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	D9_REAL(pid_t, wait4, (pid_t, int *, int, struct rusage *));
	if (!real_wait4)
		return (pid_t)syscall(SYS_wait4, pid, status, options, ru);
	if (options & WNOHANG)
		return real_wait4(pid, status, options, ru);
	return TIMED("wait4", -1, real_wait4(pid, status, options, ru));
}

D9_INTERPOSE int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	D9_REAL(int, waitid, (idtype_t, id_t, siginfo_t *, int));
	if (!real_waitid)
		return (int)syscall(SYS_waitid, idtype, id, info, options, NULL);
	if (options & WNOHANG)
		return real_waitid(idtype, id, info, options);
	return TIMED("waitid", -1, real_waitid(idtype, id, info, options));
}

/* The lock after a trylock found it held (or without trylock), a function of its own as
 * read.timed is (and named so, for the stacks): timed when this thread may record, else the C
 * library's lock as it is. */
static int mutex_lock_held(pthread_mutex_t *m) __asm__("pthread_mutex_lock.timed");
static __attribute__((noinline)) int mutex_lock_held(pthread_mutex_t *m)
{
	D9_REAL(int, pthread_mutex_lock, (pthread_mutex_t *));
	if (!real_pthread_mutex_lock)
		return ENOSYS;
	if (!timed())
		return real_pthread_mutex_lock(m);
	return TIMED("pthread_mutex_lock", -1, real_pthread_mutex_lock(m));
}

/* A free mutex cannot block, and most locks a server takes are free (memcached takes 7 per
 * request): a trylock first takes it, before any other test, and only a mutex that is held is
 * timed. Every mutex type answers as the lock itself would: a recursive one its owner holds is
 * taken again, an error-checking one its owner holds and a normal one held by anyone give EBUSY,
 * and then the real lock gives EDEADLK or waits; a robust one whose owner died is taken with
 * EOWNERDEAD either way. A thread that may not record (an agent thread, the agent's own lock,
 * recording off) takes the same trylock first: the same answers, without a clock. */
D9_INTERPOSE int pthread_mutex_lock(pthread_mutex_t *m)
{
	D9_REAL(int, pthread_mutex_trylock, (pthread_mutex_t *));
	if (D9_LIKELY(real_pthread_mutex_trylock)) {
		int r = real_pthread_mutex_trylock(m);
		if (D9_LIKELY(r != EBUSY))
			return r;
	}
	return mutex_lock_held(m);
}

/* Programs bind the GLIBC_2.3.2 condition variables; the older ABI is left alone. */
D9_INTERPOSE int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	D9_REAL_V(int, pthread_cond_wait, "GLIBC_2.3.2", (pthread_cond_t *, pthread_mutex_t *));
	if (!real_pthread_cond_wait)
		return ENOSYS;
	return TIMED("pthread_cond_wait", -1, real_pthread_cond_wait(c, m));
}

D9_INTERPOSE int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
	const struct timespec *abstime)
{
	D9_REAL_V(int, pthread_cond_timedwait, "GLIBC_2.3.2", (pthread_cond_t *, pthread_mutex_t *,
		const struct timespec *));
	if (!real_pthread_cond_timedwait)
		return ENOSYS;
	return TIMED("pthread_cond_timedwait", -1,
		real_pthread_cond_timedwait(c, m, abstime));
}

D9_INTERPOSE int sem_wait(sem_t *s)
{
	D9_REAL(int, sem_wait, (sem_t *));
	if (!real_sem_wait) {
		errno = ENOSYS;
		return -1;
	}
	return TIMED("sem_wait", -1, real_sem_wait(s));
}
