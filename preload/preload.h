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
};

/* libc-wait.c: reads the thread's schedstat into d9__pl (ss_at, ss_cpu, ss_delay) at `now`;
 * returns 0, 1 when no earlier reading of this thread exists (ss_base cleared), or -errno. */
int d9__pl_schedstat(uint64_t now);
extern __thread struct d9__pl d9__pl __attribute__((tls_model("initial-exec")));

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
extern uint64_t d9__fd_stream[D9__FD_BITS / 64], d9__fd_nonblock[D9__FD_BITS / 64];
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

/* runtimes.c: called by the agent at exit (see lifecycle.c). */
void d9__preload_at_exit(void);

#endif
