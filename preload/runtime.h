/* runtime.h: the runtime adapter interface. Each coroutine runtime d9 understands has one file,
 * preload/rt-<name>.c, that defines one `struct d9__runtime` and the interposers or patches it
 * needs; preload/runtimes.c lists them. A runtime the table does not know keeps generic mode
 * (parks, loop turns and blocking calls from libc-wait.c and libc-block.c), which never needs an
 * adapter and never produces coroutine events.
 *
 * The life of an adapter:
 *   - attach(), once, from the agent's start (before main when the library is preloaded), when
 *     D9_RUNTIME is auto or names this adapter: look for the runtime in the process (a shared
 *     library's symbols, or the executable's symbol table for a static build) and prepare what
 *     cannot wait (e.g. patch an entry point that has no hook). Returns 1 when the runtime is
 *     there and the adapter took it, 0 when it is absent, -errno when it is there but refused
 *     (then it has said why once, and the process stays in generic mode for it).
 *   - interposers (D9_INTERPOSE functions named as the runtime's) or patched entry points call
 *     d9__rt_wanted(&its_adapter) before doing anything, and pass straight through otherwise;
 *   - the thread that runs the runtime's scheduler is marked with d9__pl.rt = the adapter (and
 *     d9_agent_become_worker()); libc-wait.c then calls the adapter's after_* hook when that
 *     thread's idle wait returns readiness, so the adapter can name the coroutines it wakes, and
 *     libc-block.c counts a call as inside a unit of work while d9__pl.coroutine != 0 (or the
 *     scheduler runs after its idle wait), and never as blocking when d9__pl.switches, which the
 *     adapter increments at every coroutine switch, changed during it (a runtime's hooked call);
 *   - at_exit(), when the agent ends: end the open poll.
 * Everything an adapter records goes through d9-agent.h (d9_rec_poll_start, d9_rec_wake, ...). */
#ifndef D9_RUNTIME_H
#define D9_RUNTIME_H

#include "preload.h"

struct pollfd;
struct epoll_event;

struct d9__runtime {
	const char *name; /* as D9_RUNTIME spells it */
	int (*attach)(void); /* see above; NULL: nothing to do before the first interposed call */
	/* the marked thread's idle wait returned ready > 0 (each optional). They run between the
	 * wait and its caller, with the wait's errno: they only look up and record (the recording
	 * keeps errno), and must call nothing that may set it. `at`: when the wait returned (d9__now():
	 * its Unpark's time when it was a park), the time the Wakes of the descriptors it found
	 * ready take: they were ready then, and read no clock of their own */
	void (*after_poll)(uint64_t at, const struct pollfd *fds, unsigned long n, int ready);
	void (*after_select)(uint64_t at, int nfds, const void *rd, const void *wr, const void *ex,
		int ready);
	void (*after_epoll)(uint64_t at, int epfd, const struct epoll_event *ev, int n);
	/* optional: 1 when the wait `call` (D9_CALL_*) the running coroutine makes now is one the
	 * runtime itself turns into a yield to its scheduler (libco's hooked poll): not a park */
	int (*wait_yields)(uint32_t call);
	void (*at_exit)(void); /* optional */
};

/* runtimes.c: the adapters, NULL-terminated, in the order auto mode tries them. */
extern D9_HIDDEN const struct d9__runtime *const d9__runtimes[];
/* runtimes.c: "auto, generic, st, ..." for the D9_RUNTIME error message. */
extern D9_HIDDEN const char d9__runtime_choices[];

/* D9_RUNTIME's value as d9__pcfg.runtime (d9-agent.h), -2 when no adapter has that name. */
int d9__runtime_parse(const char *v);
/* The agent's start: each adapter D9_RUNTIME allows looks for its runtime (attach). */
void d9__runtimes_attach(void);

/* Locations of coroutine entry points (function, call site), cached per scheduler thread. */
struct d9__loc_cache { struct { uint64_t start, callsite, id; } e[64]; };
/* The location id of a coroutine started at `start` from `callsite`: named after the dynamic
 * symbol that starts exactly at `start`, if any (the analyzer names the rest from the addresses
 * and the module map). 0 when the agent's tables are full. */
uint64_t d9__rt_location(struct d9__loc_cache *c, void *start, void *callsite);

/* A run-queue sample (QueueSample of `runnable`) when D9_QUEUE_INTERVAL has passed since
 * *next_sample was set. Called right after an event was recorded (a PollStart, or the Unpark of
 * the scheduler's idle wait): that event's time, the thread's last record's, saves a clock
 * read. In line: most calls only compare. */
static inline void d9__rt_sample_queue(uint64_t runnable, uint64_t *next_sample)
{
	uint64_t now = d9__self.raw.last;

	if (D9_UNLIKELY(now >= *next_sample)) {
		d9_rec_queue_sample(runnable);
		*next_sample = now +
			__atomic_load_n(&d9__pcfg.queue_interval_ticks, __ATOMIC_RELAXED);
	}
}

/* 1 when D9_RUNTIME allows this adapter and this thread's calls may be recorded. */
int d9__rt_wanted(const struct d9__runtime *rt);

#endif
