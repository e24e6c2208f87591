/* preload.h: what the interposers share. Each preload/ file interposes one family of entry points
 * and talks to the recording core only through d9-agent.h. Every interposer keeps errno and the
 * exact return contract of the function it wraps, and passes straight through for the agent's
 * own threads and for calls the agent makes itself (d9__self.busy). */
#ifndef D9_PRELOAD_H
#define D9_PRELOAD_H

#include <errno.h>
#include <stdint.h>

#include "d9-agent.h"

#define D9_INTERPOSE __attribute__((visibility("default")))

/* Per-thread interposition state (initial-exec TLS). */
struct d9__runtime;
struct d9__pl {
	/* Nonzero while this thread's waits need more than libc-wait.c's plain path (wait_plain):
	 * one field per reason, two of them bytes written where the state they mirror is. */
	union {
		struct {
			uint8_t hold_rt; /* rt is set (d9__pl_set_rt) */
			uint8_t hold_nowait; /* nowait > 0 (libc-wait.c, park) */
			/* requests ended by loop turns: how many of this thread's requests wait for
			 * its next wait call (requests.c; at most D9__REQ_PENDING) */
			uint16_t req_npending;
		};
		uint32_t hold;
	};
	const struct d9__runtime *rt; /* the adapter whose scheduler this thread runs (runtime.h) */
	uint64_t coroutine; /* the running coroutine (runtime adapter), 0: none */
	uint64_t nowait; /* zero-timeout waits since the last park */
	uint32_t switches; /* coroutine switches (adapters count them): a call across which this
			    * changed waited as a coroutine inside a runtime's hook, not as the thread */
	uint8_t in_turn; /* the worker is between an Unpark and the next Park (a loop turn) */
	uint8_t resolving; /* inside dlsym: interposers must not recurse into it */
	uint8_t ss_base; /* ss_ucpu/ss_udelay hold the reading of an earlier Unpark */
	/* the thread's last schedstat reading (libc-wait.c, "Scheduler statistics") */
	uint64_t ss_at; /* d9__now() when it was read, 0: never */
	uint64_t ss_cpu, ss_delay; /* cumulative CPU and run-delay ns then */
	uint64_t ss_uat; /* d9__now() of the last Unpark that read schedstat */
	uint64_t ss_ucpu, ss_udelay; /* the reading the last Unpark with statistics ended at */
	int *errnop; /* this thread's errno (__errno_location), 0: not asked yet (d9__sysret) */
};

/* libc-wait.c: reads the thread's schedstat into d9__pl (ss_at, ss_cpu, ss_delay) at `now`;
 * returns 0, 1 when no earlier reading of this thread exists (ss_base cleared), or -errno. */
int d9__pl_schedstat(uint64_t now);
extern D9_HIDDEN __thread struct d9__pl d9__pl __attribute__((tls_model("initial-exec")));

/* Marks the thread as running adapter rt's scheduler. */
static inline void d9__pl_set_rt(const struct d9__runtime *rt)
{
	d9__pl.rt = rt;
	d9__pl.hold_rt = 1;
}

/* The next definition of `name` after libd9agent.so (version: a symbol version or NULL), or NULL
 * while a lookup is already running on this thread. */
void *d9__real(const char *name, const char *version);

/* Declares and resolves `real_<name>` on first use. */
#define D9_REAL(ret, name, params)                                                  \
	static ret(*real_##name) params;                                            \
	if (D9_UNLIKELY(!real_##name))                                              \
		real_##name = (ret(*) params)d9__real(#name, NULL)

#define D9_REAL_V(ret, name, version, params)                                       \
	static ret(*real_##name) params;                                            \
	if (D9_UNLIKELY(!real_##name))                                              \
		real_##name = (ret(*) params)d9__real(#name, version)

/* 1 when this thread's calls may be recorded at all. */
static inline int d9__pl_active(void)
{
	return d9__enabled && !d9__self.busy && d9__self.role != D9_ROLE_AGENT;
}

/* libc-fds.c: the descriptors known to be sockets or pipes in non-blocking mode, one bit each in
 * two tables (stream, non-blocking) for numbers below D9__FD_BITS; a read or write on them cannot
 * wait, so the blocking-call wrappers do not time it. */
#define D9__FD_BITS 65536
extern D9_HIDDEN uint64_t d9__fd_stream[D9__FD_BITS / 64], d9__fd_nonblock[D9__FD_BITS / 64];
void d9__fd_made(int fd, int stream, int nonblock);
void d9__fd_forget(int fd);
void d9__fd_set_nonblock(int fd, int on);
void d9__fd_forget_range(unsigned int first, unsigned int last);
void d9__fd_forget_all(void);

static inline int d9__fd_cannot_wait(int fd)
{
	if ((unsigned int)fd >= D9__FD_BITS)
		return 0;
	unsigned int w = (unsigned int)fd >> 6;
	return (int)((__atomic_load_n(&d9__fd_stream[w], __ATOMIC_RELAXED) &
		__atomic_load_n(&d9__fd_nonblock[w], __ATOMIC_RELAXED)) >> (fd & 63) & 1);
}

/* libc-direct.c: nonzero while the wrappers of the hottest cancellable calls (its direct_names)
 * may enter the kernel themselves, as glibc does in a process with one thread: the host has
 * started no thread of its own and cancelled none, and each of those names resolves to the C
 * library itself (no other interposer after the agent). Only the agent's own threads would make
 * glibc take its cancellation path there; agent/DESIGN.md, "Direct system calls". */
extern D9_HIDDEN int d9__direct;

static inline int d9__direct_on(void)
{
	return __atomic_load_n(&d9__direct, __ATOMIC_RELAXED);
}

/* d9__direct and D9_REQUESTS off, in one word: the leaf wrappers' (requests.c, PASS) one test
 * on their common path. libc-direct.c keeps it (d9__direct_sync). */
extern D9_HIDDEN int d9__pass_direct;

static inline int d9__pass_direct_on(void)
{
	return __atomic_load_n(&d9__pass_direct, __ATOMIC_RELAXED);
}

/* Makes d9__pass_direct agree with d9__direct and d9__pcfg.requests again (the agent calls it
 * once its configuration is read). */
void d9__direct_sync(void);

#if defined(__x86_64__)
static inline long d9__syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

/* The same for calls of at most three and of four arguments: the registers of the others are
 * not loaded (the kernel does not read them), three or two instructions a call fewer. */
static inline long d9__syscall3(long nr, long a, long b, long c)
{
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}

static inline long d9__syscall4(long nr, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return r;
}

/* libc-direct.c: errno = -r, returns -1, for a thread that has not kept errno's address yet
 * (d9__pl.errnop): once per thread. */
long d9__sys_fail_first(long r) __attribute__((noinline, cold));

/* The kernel's answer the way the C library gives it: -1 with errno for -4095..-1. The error
 * path stays inside the wrapper: a CPU sample there is named as the wrapper (`read`, the call
 * the program made). An out-of-line error function reached by a tail jump, as it was, showed
 * up as the agent's own frame right under the program's caller, the wrapper's frame gone. */
static inline long d9__sysret(long r)
{
	if (D9_UNLIKELY((unsigned long)r > -4096ul)) {
		int *e = d9__pl.errnop;
		if (D9_UNLIKELY(!e))
			return d9__sys_fail_first(r);
		*e = (int)-r;
		return -1;
	}
	return r;
}

/* `call` (the C library's function), or system call `nr` with up to six arguments while
 * d9__direct holds. */
#define D9__SYS_ARGS(a, b, c, d, e, f, ...)                                          \
	(long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f)
#define D9__SYS_ARGS3(a, b, c, ...) (long)(a), (long)(b), (long)(c)
#define D9__SYS_ARGS4(a, b, c, d, ...) (long)(a), (long)(b), (long)(c), (long)(d)
#define D9__NARGS(...) D9__NARGS_(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0)
#define D9__NARGS_(a, b, c, d, e, f, n, ...) n
/* System call `nr` itself, as the C library's function would make it (d9__direct holds); the
 * argument count is a constant, so the choice of d9__syscall3, 4 or 6 folds away. */
#define D9__SYSCALL(nr, ...)                                                         \
	d9__sysret(D9__NARGS(__VA_ARGS__) <= 3 ?                                     \
			d9__syscall3(nr, D9__SYS_ARGS3(__VA_ARGS__, 0, 0, 0)) :         \
		D9__NARGS(__VA_ARGS__) == 4 ?                                        \
			d9__syscall4(nr, D9__SYS_ARGS4(__VA_ARGS__, 0, 0, 0, 0)) :      \
			d9__syscall6(nr, D9__SYS_ARGS(__VA_ARGS__, 0, 0, 0, 0, 0, 0)))
#define D9__SYS(call, nr, ...)                                                       \
	(D9_LIKELY(d9__direct_on()) ? (__typeof__(call))D9__SYSCALL(nr, __VA_ARGS__) : (call))
#else
#define D9__SYSCALL(nr, ...) (errno = ENOSYS, -1L) /* never: d9__direct is x86-64's only */
#define D9__SYS(call, nr, ...) (call)
#endif

/* runtimes.c: called by the agent at exit (see lifecycle.c). */
void d9__preload_at_exit(void);

#endif
