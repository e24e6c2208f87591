/* wakes.h: pairs each Wake with the poll it leads to, and tracks which coroutines are alive, in
 * TIME order within a process (wakes.c). The input comes in file order: each thread's chunks hold
 * its events in time order, but a thread's chunk can be written after another thread's later
 * events, so a wake from another thread (uv_async_send, a pool's work) can come after the poll it
 * led to. Used by summary and chrome; the rule is in README.md, "Analyzer". */
#ifndef D9_ANALYZE_WAKES_H
#define D9_ANALYZE_WAKES_H
#include "trace.h"

/* A settled PollStart and the wake it followed (or a wake whose poll was already settled). */
struct d9__wake_pair {
	struct d9__proc *proc;
	int result; /* D9__PAIR_NONE: no wake since the coroutine's previous poll; D9__PAIR_OK;
		     * D9__PAIR_UNKNOWN: a gap may hide the real first poll, or a wake came in the
		     * file after the poll it led to had been settled (then poll_tid is 0) */
	uint64_t co;
	uint64_t delay_ns; /* D9__PAIR_OK: poll_ns - wake_ns, 0 if negative */
	/* the wake (result OK or UNKNOWN) */
	uint64_t kind; /* the Wake's kind, as recorded */
	int64_t wake_ns; /* when the coroutine became runnable (timers: the deadline if earlier) */
	int64_t wake_real_ns; /* the Wake event's own time, CLOCK_REALTIME */
	uint32_t wake_tid, wake_th_idx; /* the waker's thread: tid, d9__thread.idx */
	uint8_t wake_tag; /* the caller's tag given with the Wake (chrome: a slice was open) */
	/* the poll */
	int64_t poll_ns, poll_real_ns;
	uint32_t poll_tid;
	const struct d9__loc *loc;
};

typedef void d9__wake_fn(void *ctx, const struct d9__wake_pair *p);

struct d9__wproc;
struct d9__wthread;

struct d9__wakes {
	d9__wake_fn *fn;
	void *ctx;
	struct d9__wproc **procs; /* by d9__proc.idx */
	size_t nprocs;
	struct d9__wthread *front; /* by d9__thread.idx: how far each thread is */
	size_t nfront;
	uint64_t late; /* entries that came after their coroutine's later ones were settled */
	int oom;
};

void d9__wakes_init(struct d9__wakes *w, d9__wake_fn *fn, void *ctx);
/* Feeds one event, as the command receives it (every event, pseudo events included: each one
 * moves its thread's time on). Calls fn for each PollStart it can settle: all of a process's at
 * the latest at its D9__EV_PROCESS_END. tag is kept with a Wake and handed back with its pair. */
void d9__wakes_event(struct d9__wakes *w, const struct d9__ev *ev, uint8_t tag);
/* After the D9__EV_PROCESS_END of p went through d9__wakes_event: the coroutines alive at the
 * end (seen by a Spawn, a Wake or a PollStart and not exited since, in time order). */
uint64_t d9__wakes_alive(const struct d9__wakes *w, const struct d9__proc *p);
void d9__wakes_free(struct d9__wakes *w);
#endif
