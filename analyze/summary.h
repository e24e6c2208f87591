/* summary.h: the accumulator of `summary` (cmd-summary.c), shared with `check` (cmd-check.c),
 * which diagnoses from the same numbers instead of computing them again. One pass over the
 * trace feeds d9__sum_event; the fields are then read as they are. Memory follows coroutines,
 * locations, stacks and functions, never events (cmd-summary.c's head comment). */
#ifndef D9_ANALYZE_SUMMARY_H
#define D9_ANALYZE_SUMMARY_H
#include "d9-format.h"
#include "trace.h"
#include "wakes.h"

#include <stdint.h>

#define NKINDS (D9_WAKE_MAX + 2) /* wake kinds 0..7, then "unknown" */
#define HOT_TOP 20 /* functions listed in each CPU hot-spot table */
#define POLL_STACKS 3 /* hottest stacks kept per long poll */

/* One distinct (stack, source) of a poll's CPU samples. */
struct hot_stack {
	const struct d9__stack *stack; /* NULL: samples without a stack */
	uint64_t samples;
	uint64_t ns; /* the time they stand for (CpuSample weight_ns), of those that carry it */
	uint8_t off; /* 1: off-CPU samples (source 1), 0: on-CPU (source 0) */
};

/* The blocking calls of a poll: how many, their time, and the longest with its stack. */
struct pollblock {
	uint64_t n, ns, max;
	const char *call;
	const struct d9__stack *stack;
	uint64_t fd_kind;
};

/* The CPU samples of a thread's open poll (or loop turn), by (stack, source), and its blocking
 * calls. Emptied when the poll ends, so it holds at most the distinct stacks of one poll. */
struct pollcpu {
	uint64_t on, off, on_ns, off_ns, unweighed; /* unweighed: samples without their time */
	struct d9__map idx; /* key: (stack idx + 1) * 2 + off (0 for no stack) -> entry index + 1 */
	struct hot_stack *e;
	size_t n, cap;
	struct pollblock b;
};

struct long_poll {
	uint64_t dur;
	int64_t start_real;
	const struct d9__loc *loc; /* NULL: unknown, or a loop turn */
	struct d9__thread *th;
	uint64_t co;
	uint64_t cpu_on, cpu_off; /* CpuSamples taken on its thread while it ran */
	uint64_t on_ns, off_ns; /* the time they stand for (of those that carry it) */
	int weighed; /* every sample carries its time: hot stacks are ordered by time */
	struct hot_stack hot[POLL_STACKS]; /* the most frequent (stack, source), most first */
	uint8_t nhot;
	struct pollblock b; /* its blocking calls */
	/* a loop turn's CPU time at most: the schedstat delta of the Unpark after it, when that
	 * covers the turn (the previous Unpark that carried one came before it began); UINT64_MAX
	 * unknown. Preemption and a wait d9 did not see (a blocking accept) are not CPU; wait_max:
	 * the same delta's time runnable off CPU (preempted), at most */
	uint64_t cpu_max, wait_max;
};


/* Per thread (worker or not). */
struct wstat {
	struct d9__thread *th;
	struct d9__hist polls, turns;
	uint64_t busy_ns, turn_ns, parked_ns, parks, ztw, idle_samples;
	/* Unpark's cpu_ns and sched_wait_ns, summed over the Unparks that carry them (stat_unparks;
	 * each covers the time since the thread's previous such Unpark, FORMAT.md) */
	uint64_t park_cpu_ns, sched_wait_ns, stat_unparks;
	int64_t first_ns, last_ns;
	int seen;
	struct d9__open poll, park, turn; /* the open poll, park, loop turn (trace.h) */
	uint64_t poll_co;
	const struct d9__loc *poll_loc;
	uint64_t cpu_on, cpu_off; /* CpuSamples of this thread, on- and off-CPU */
	struct pollcpu poll_cpu, turn_cpu; /* samples of the open poll / loop turn */
	/* the last loop turn to list, kept until the Unpark after it tells its CPU time (cpu_max),
	 * then listed; stat_ns: the last Unpark that carried schedstat (stat_known) */
	struct long_poll pend;
	int has_pend, stat_known;
	int64_t pend_ns, stat_ns; /* the pending turn's start; the last stat Unpark's time */
};

struct locstat {
	struct d9__hist polls, sched;
	uint64_t wakes[NKINDS]; /* wakes followed by a poll at this location, by kind */
};


struct bgroup {
	const char *call;
	const struct d9__stack *stack;
	uint64_t count, total, max;
	uint64_t fd_kind; /* of the group's first call (d9_fd_kind) */
	struct bgroup *next;
};

/* Idle-worker detection, per segment of a process with two workers or more. */
struct interval { struct d9__thread *th; int64_t from, to; };
struct qsample { struct d9__thread *th; int64_t ns; };

struct pstat {
	uint64_t spawned, exited, alive;
	int64_t first_real, last_real;
	int seen;
	struct interval *parks;
	size_t nparks, capparks;
	struct qsample *qs;
	size_t nqs, capqs;
};

/* SchedDelay events (calls past the blocking threshold that were preempted) by call name. */
#define SD_CALLS 32
struct sdgroup {
	const char *call; /* NULL: the calls past the first SD_CALLS names */
	uint64_t count, total, wait, wait_unknown;
};

struct sum {
	uint64_t req_n, req_ambiguous, req_counted, req_api; /* RequestEnds (d9-analyze requests has more) */
	struct sdgroup sd[SD_CALLS + 1];
	size_t nsd;
	struct d9__trace *t;
	int top;
	int64_t min_ns;
	struct wstat **ws; /* by thread idx */
	size_t nws;
	struct pstat **ps; /* by proc idx */
	size_t nps;
	struct locstat *locs; /* [0]: unknown location; [1 + loc idx] */
	size_t nlocs;
	struct d9__hist polls, turns, sched, lateness, queue;
	struct d9__hist kind_sched[NKINDS];
	struct long_poll *lp, *lt; /* min-heaps of the longest polls / loop turns */
	size_t nlp, nlt;
	struct d9__map bmap; /* hash -> chain */
	struct bgroup **bl;
	size_t nbl;
	uint64_t ztw, drops_events, drops_samples, drop_reasons[D9_DROP_REASON_MAX + 2];
	uint64_t idle_samples, queue_busy_samples;
	uint64_t spawned, exited, alive;
	int64_t first_real, last_real;
	uint64_t *stack_on, *stack_off; /* CpuSamples by stack idx + 1 ([0]: no stack) */
	uint64_t *stack_on_ns, *stack_off_ns; /* the time they stand for, by stack idx + 1 */
	uint64_t on_unweighed, off_unweighed; /* samples that carry no time */
	size_t nstack_cnt;
	uint64_t cpu_on, cpu_off, cpu_other; /* other: a source this version does not know */
	uint64_t co_mismatch; /* samples naming a coroutine other than their poll's */
	/* stack quality of the CPU samples: what the writer recorded (CpuSample.unwind, when its
	 * schema has it) and the analyzer's own check of the frames */
	uint64_t st_recorded, st_by[D9_UNWINDER_MAX + 2], st_truncated, st_rejected;
	uint64_t st_invalid; /* set by d9__sum_judge_stacks, after the reading */
	/* of the recorded ones, off-CPU samples (their stack copy is 2 KiB: most truncation there) */
	uint64_t st_recorded_off, st_truncated_off;
	/* pairs with a gap between their ends (trace.h): left out of every duration */
	uint64_t polls_unknown, turns_unknown, parks_unknown, sched_unknown;
	struct d9__wakes wakes; /* wake -> poll pairs and live coroutines, in time order */
	int seen, oom;
};

/* A function's samples of one source. */
struct fnstat {
	const char *name; /* interned */
	uint64_t self, total; /* samples */
	uint64_t self_ns, total_ns; /* the time they stand for (of those that carry it) */
	int by_ns; /* order by time */
	size_t mark; /* the last stack (idx + 1) that counted it: once per stack in total */
	struct fnstat *next; /* hash chain */
};

/* Starts s over trace t, keeping the `top` longest polls (and loop turns) of at least min_ns.
 * Returns 0 or -ENOMEM (then d9__sum_free). */
int d9__sum_init(struct sum *s, struct d9__trace *t, int top, int64_t min_ns);
void d9__sum_free(struct sum *s);
/* The d9__ev_fn of the pass (ctx: the struct sum). */
void d9__sum_event(void *ctx, const struct d9__ev *ev);
/* After the last event: the samples whose stack holds a frame in no module of its process (all
 * the modules the trace defines for it, wherever) or a repeated frame, into s->st_invalid. */
void d9__sum_judge_stacks(struct sum *s);
/* Generic mode: no poll anywhere but loop turns: turns take the place of polls. */
int d9__sum_generic(const struct sum *s);
/* The workers (threads with a worker id and events), in (process, worker) order, into *out
 * (freed by the caller). Returns how many (0, with *out possibly NULL, when out of memory). */
size_t d9__sum_workers(struct sum *s, struct wstat ***out);
/* qsort orders: longest poll first; blocking-call group with the most time first. */
int d9__sum_cmp_long(const void *a, const void *b);
int d9__sum_cmp_blocking(const void *a, const void *b);
/* Functions of the CPU samples of one source (cnt, ns: counts and time by stack idx + 1), by
 * self time (by_ns) or self samples, into *out; d9__sum_functions_free frees them. */
size_t d9__sum_functions(struct sum *s, const uint64_t *cnt, const uint64_t *ns, int by_ns,
	struct fnstat ***out);
void d9__sum_functions_free(struct fnstat **a, size_t n);
#endif
