/* d9-agent.h: the recording core's interface, the one header preload/ (and the test driver)
 * include. Recording an event is an inline timestamp plus a few stores into the calling thread's
 * buffer (initial-exec TLS); everything else (buffer hand-off, segments, rotation) happens in
 * d9__slow() once per chunk or in the agent's background threads. Design: agent/DESIGN.md. */
#ifndef D9_AGENT_H
#define D9_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

#include "d9-format.h"

#define D9_LIKELY(x) __builtin_expect(!!(x), 1)
#define D9_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* On the agent's variables that the hot paths read: declared hidden, the compiler reads them
 * with one instruction relative to the code (libd9agent.so is built with -fvisibility=hidden, but
 * an extern declaration without the attribute makes it load the address from the GOT first,
 * which the linker then turns into a second instruction). */
#define D9_HIDDEN __attribute__((visibility("hidden")))

/* Schema flags of every segment the agent writes (format 1.3's compact Park and Unpark: Unpark
 * statistics per interval in an UnparkStats after the Unpark). */
#define D9_AGENT_SCHEMA (D9_SCHEMA_COMPACT_WAITS | D9_SCHEMA_SCHED_DELAY | D9_SCHEMA_CPU_UNWIND | \
	D9_SCHEMA_CPU_WEIGHT | D9_SCHEMA_API | D9_SCHEMA_REQUESTS)

struct d9__block;
struct d9__prof;

/* ---- Raw records ---------------------------------------------------------------------------
 * A recording thread does not encode: it stores each event as a raw record of whole words into
 * its block, and the writer encodes the block when it takes it (agent/raw.c, d9__raw_encode).
 * Word 0 is the time in clock ticks, word 1 the head (D9__RAW_HDR: the event type, the record's
 * length in words, one small field), then the fields, one word each. Each record is at least as
 * long as the most bytes its encoding can take (its D9__RW_* length: unwritten words pad it), so
 * a block's encoding always fits in the block (agent/DESIGN.md, "Raw records"). */
struct d9__raw {
	uint64_t *p, *end; /* write position and end; end == NULL forces the slow path */
	uint32_t count; /* records in the block */
	uint64_t base; /* the chunk's base time (ticks): the block's first delta counts from it */
	uint64_t last; /* time of the thread's last record (ticks) */
};
#define D9__RAW_HDR(type, words, small) \
	((uint64_t)(type) | (uint64_t)(words) << 8 | (uint64_t)(uint32_t)(small) << 32)
#define D9__RAW_TYPE(h) ((uint32_t)((h) & 0xff))
#define D9__RAW_WORDS(h) ((uint32_t)(((h) >> 8) & 0xffffff))
#define D9__RAW_SMALL(h) ((uint32_t)((h) >> 32))
/* Record lengths in words: 2 + the fields, rounded up to the encoding's worst case (head 10
 * bytes, extended head 11, each varint or coroutine field 10, a u32 field 5). */
enum {
	D9__RW_POLL_START = 4, /* co, location: 30 bytes at most */
	D9__RW_POLL_END = 3, /* co: 20 */
	D9__RW_PARK = 4, /* timeout (call in the head): 25 */
	D9__RW_UNPARK = 3, /* ready: 20 */
	D9__RW_UNPARK_STATS = 6, /* ready, cpu, wait: 42 (the Unpark and its UnparkStats) */
	D9__RW_WAKE = 5, /* woken, waker, object (kind in the head): 40 */
	D9__RW_SPAWN = 5, /* co, parent, location: 40 */
	D9__RW_COROUTINE_EXIT = 3, /* co: 20 */
	D9__RW_QUEUE_SAMPLE = 3, /* runnable: 20 */
	D9__RW_CALL = 7, /* co, call, duration, last (fd_kind in the head): 55 */
	D9__RW_REQUEST_BEGIN = 7, /* id, fd, co, preview (source in the head): 56 */
	D9__RW_REQUEST_END = 11, /* id, in, out, flags, count, status, tail (source): 81 */
	D9__RW_DROPPED = 4, /* count (reason in the head): 25 */
	D9__RW_ZERO_WAITS = 3, /* count: 20 */
	D9__RW_MARK = 3, /* name: 21 */
	D9__RW_VALUE = 5, /* name, value (kind in the head): 36 */
	D9__RW_CUSTOM = 4, /* schema, length, then the payload's words: 30 + the payload */
};
/* A block keeps this much room after its records: the encoded chunk's CRC and the encoder's
 * margin at the end of its buffer (D9_ENC_EVENT_MAX); the heads go before the records. */
#define D9__RAW_RESERVE 128u

/* Options preload/ reads (set once by the agent's configuration, D9_* variables). */
/* runtime: D9_RUNTIME_AUTO, D9_RUNTIME_GENERIC, or i + 1 for preload/runtimes.c's d9__runtimes[i] */
enum { D9_RUNTIME_AUTO = 0, D9_RUNTIME_GENERIC = -1 };
/* An Unpark reads /proc/thread-self/schedstat (three syscalls) at most this often per worker
 * (preload/libc-wait.c, "Scheduler statistics"). */
#define D9__SCHED_READ_NS 30000000u

struct d9_preload_config {
	int runtime; /* D9_RUNTIME */
	int blocking; /* D9_BLOCKING: wrap blocking calls */
	uint64_t blocking_threshold_ns; /* D9_BLOCKING_THRESHOLD */
	uint64_t blocking_threshold_ticks; /* the same in event clock ticks (after calibration) */
	uint64_t queue_interval_ns; /* D9_QUEUE_INTERVAL: run-queue samples */
	uint64_t queue_interval_ticks;
	int requests; /* D9_REQUESTS: zero-code request detection (preload/requests.c) */
	/* D9__SCHED_READ_NS in event clock ticks: an Unpark reads schedstat at most this often
	 * (preload/libc-wait.c); follows the clock's calibration, never 0 once the agent is set up */
	uint64_t schedstat_ticks;
	int requests_preview; /* D9_REQUESTS_PREVIEW: 0 off, 1 method and path, 2 with the query */
};
extern D9_HIDDEN struct d9_preload_config d9__pcfg;

/* Per-thread recording state; lives in initial-exec TLS. The writer thread reads some fields of
 * other threads' states (under the registry lock) to flush quiet threads: see `park`. */
struct d9__thr {
	struct d9__raw raw; /* raw records into blk (above) */
	struct d9__block *blk; /* current block, or NULL */
	uint32_t tid;
	uint32_t worker; /* 0: not a worker */
	uint8_t role; /* 0 unset, D9_ROLE_THREAD/WORKER: records; D9_ROLE_AGENT: never records */
	uint8_t registered; /* in the writer's registry (and the thread-exit key is set) */
	uint8_t busy; /* inside the agent's slow path: interposers pass straight through */
	uint8_t traced; /* a forked child's thread outside any loop: profiled, its blocking calls
			 * timed, without being a worker (lifecycle.c, fork_child) */
	uint32_t park; /* atomic: D9__RUNNING, D9__PARKED, D9__STEALING, D9__STOLEN */
	uint64_t dropped; /* atomic: events dropped since the last Dropped record (internal.h,
			   * d9__drop_one, d9__drops_take) */
	uint64_t chunk_mono_ns; /* when the current chunk started (coarse; for flush requests) */
	uint64_t block_dropped; /* Dropped counts recorded in the current block */
	uint32_t block_drop_records; /* Dropped records in the current block */
	struct d9__thr *next, *prev; /* registry links (registry lock) */
	struct d9__swlog *swlog; /* profiling on: this worker's recent coroutine switches */
	struct d9__prof *prof; /* profiling on: this worker's sampling state (profile.c) */
	uint64_t dropped_paused; /* atomic: events not recorded while the agent was stopped
				  * for a pause (unshare, setns; record.c, slow): reason other.
				  * Last: the fields the hot path reads keep their places */
	uint8_t fd_private; /* an agent thread with a descriptor table of its own (fdown.c) */
	uint8_t fd_inherited; /* started by an agent thread that had one (d9__spawn_blocked) */
	uint8_t fs_private; /* an agent thread with a root and working directory of its own */
	uint8_t filtered; /* a program thread under a seccomp filter it (or its creator) installed
			   * while the agent ran: busy for good, the agent makes no system call on it
			   * (lifecycle.c, d9_agent_seccomp_before) */
};

/* The switch log of a profiled worker: the last D9__SWLOG_N (time, coroutine) switches, written
 * only by its thread (PollStart: the coroutine, PollEnd: 0). The writer thread reads it to tag
 * each perf sample with the coroutine that ran at the sample's time (profile.c). */
#define D9__SWLOG_N 4096u
struct d9__swlog {
	uint64_t seq; /* entries written; entry i is e[i % D9__SWLOG_N] */
	uint64_t pad_[7];
	struct { uint64_t t, co; } e[D9__SWLOG_N];
};

enum { D9__RUNNING = 0, D9__PARKED = 1, D9__STEALING = 2, D9__STOLEN = 3 };

extern D9_HIDDEN __thread struct d9__thr d9__self __attribute__((tls_model("initial-exec")));
extern D9_HIDDEN int d9__enabled; /* recording on (D9_ENABLED, toggle signal); read on every event */
/* a seccomp filter on every thread is coming or in (lifecycle.c, d9_agent_seccomp_before): the
 * paths that can still run on the program's threads (an Unpark's schedstat, a timed call's
 * record, the ctimer's handler, a thread's exit) make no call */
extern D9_HIDDEN int d9__no_calls;

/* 1 when the agent may make no system call on this thread: it is under a seccomp filter of its
 * own, or one on every thread is coming or in (the test for every path the program's threads
 * reach whatever the agent's state) */
static inline int d9__calls_off(void)
{
	return d9__self.filtered || __atomic_load_n(&d9__no_calls, __ATOMIC_ACQUIRE);
}
extern D9_HIDDEN int d9__clock_tsc; /* event clock: 1 TSC ticks, 0 CLOCK_MONOTONIC ns */

/* Prepares t for one more event: starts the agent, hands off a full or flush-requested chunk,
 * takes a new block. Returns 1 when an event can be encoded now, 0 when it must be dropped
 * (counted) or not recorded at all (agent off, agent thread). retry: how many times the slow
 * path already ran for this event (see D9__REC); from D9__SLOW_TRIES on, the event is counted
 * as dropped instead. */
int d9__slow(struct d9__thr *t, unsigned retry);
#define D9__SLOW_TRIES 4

/* A system call by the instruction, outside the C library (whose syscall() and wrappers are this
 * library's interposers, or unusable where there is no TLS): the kernel's return, -errno on
 * failure. */
static inline long d9__raw6(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
#if defined(__x86_64__)
	long r;
	register long r10 __asm__("r10") = a3;
	register long r8 __asm__("r8") = a4;
	register long r9 __asm__("r9") = a5;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(nr), "D"(a0), "S"(a1), "d"(a2), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
#else
#error "d9-agent.h: a direct system call for this architecture"
#endif
}

static inline uint64_t d9__now(void)
{
	if (D9_LIKELY(d9__clock_tsc))
		return __rdtsc();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Converts a tick difference to nanoseconds and back (calibrated TSC, or identity). */
uint64_t d9_agent_ticks_to_ns(uint64_t ticks);
uint64_t d9_agent_ns_to_ticks(uint64_t ns);
/* Ticks per event time unit (2^shift): converts tick differences to the units of Wake objects. */
extern D9_HIDDEN uint8_t d9__shift;

/* ---- Raw record stores: each returns 0, or -ENOSPC when the block has no room (nothing stored) */

/* The record's words with its time stored, or NULL when they do not fit (also when the writer
 * cleared end to ask for the block, or before the thread has one). */
static inline uint64_t *d9__raw_take(struct d9__raw *r, unsigned words, uint64_t now)
{
	uint64_t *p = r->p;

	if (D9_UNLIKELY((uintptr_t)(p + words) > (uintptr_t)r->end))
		return NULL;
	r->p = p + words;
	r->count++;
	r->last = now;
	p[0] = now;
	return p;
}

/* A record of up to four fields, a..d into words 2..5 (the head gives the type, the record's
 * length and its small field); n: how many of them it has. Every store below but RequestEnd's
 * and a CustomEvent's (api.c) is this, folded to its constant n. */
static inline int d9__raw_put(struct d9__raw *r, uint64_t now, uint64_t head, unsigned n,
	uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint64_t *p = d9__raw_take(r, D9__RAW_WORDS(head), now);
	if (!p)
		return -28;
	p[1] = head;
	p[2] = a;
	if (n > 1)
		p[3] = b;
	if (n > 2)
		p[4] = c;
	if (n > 3)
		p[5] = d;
	return 0;
}

/* The events of one field: PollEnd, Park, Dropped, CoroutineExit, QueueSample, ZeroTimeoutWaits,
 * Mark. */
static inline int d9__raw_one(struct d9__raw *r, uint64_t now, uint64_t head, uint64_t v)
{
	return d9__raw_put(r, now, head, 1, v, 0, 0, 0);
}

static inline int d9_raw_poll_start(struct d9__raw *r, uint64_t now, uint64_t co, uint64_t loc)
{
	return d9__raw_put(r, now, D9__RAW_HDR(D9_EV_POLL_START, D9__RW_POLL_START, 0), 2, co, loc,
		0, 0);
}

static inline int d9_raw_poll_end(struct d9__raw *r, uint64_t now, uint64_t co)
{
	return d9__raw_one(r, now, D9__RAW_HDR(D9_EV_POLL_END, D9__RW_POLL_END, 0), co);
}

static inline int d9_raw_park(struct d9__raw *r, uint64_t now, uint32_t call, int64_t timeout_us)
{
	return d9__raw_one(r, now, D9__RAW_HDR(D9_EV_PARK, D9__RW_PARK, call),
		(uint64_t)timeout_us);
}

/* An Unpark without statistics is one word of fields; one with them (at most one per 30 ms
 * per worker) three. */
static inline int d9_raw_unpark(struct d9__raw *r, uint64_t now, int64_t ready, uint64_t cpu_ns,
	uint64_t sched_wait_ns)
{
	if (D9_LIKELY(cpu_ns == D9_UNKNOWN && sched_wait_ns == D9_UNKNOWN))
		return d9__raw_one(r, now, D9__RAW_HDR(D9_EV_UNPARK, D9__RW_UNPARK, 0),
			(uint64_t)ready);
	return d9__raw_put(r, now, D9__RAW_HDR(D9_EV_UNPARK, D9__RW_UNPARK_STATS, 0), 3,
		(uint64_t)ready, cpu_ns, sched_wait_ns, 0);
}

static inline int d9_raw_wake(struct d9__raw *r, uint64_t now, uint64_t woken, uint64_t waker,
	uint32_t kind, int64_t object)
{
	return d9__raw_put(r, now, D9__RAW_HDR(D9_EV_WAKE, D9__RW_WAKE, kind), 3, woken, waker,
		(uint64_t)object, 0);
}

static inline int d9_raw_spawn(struct d9__raw *r, uint64_t now, uint64_t co, uint64_t parent,
	uint64_t loc)
{
	return d9__raw_put(r, now, D9__RAW_HDR(D9_EV_SPAWN, D9__RW_SPAWN, 0), 3, co, parent, loc, 0);
}

/* BlockingCall (last: its Stack id) and SchedDelay (last: sched_wait_ns); `last` is the record's
 * word D9__RAW_CALL_LAST (the blocking-call stacks fill it later: profile.c). */
enum { D9__RAW_CALL_LAST = 5 };
static inline int d9_raw_call(struct d9__raw *r, uint64_t now, uint32_t type, uint64_t co,
	uint64_t call, uint32_t fd_kind, uint64_t duration_ns, uint64_t last)
{
	return d9__raw_put(r, now, D9__RAW_HDR(type, D9__RW_CALL, fd_kind), 4, co, call,
		duration_ns, last);
}

static inline int d9_raw_request_begin(struct d9__raw *r, uint64_t now, uint64_t id, int64_t fd,
	uint64_t co, uint32_t source, uint64_t preview)
{
	return d9__raw_put(r, now, D9__RAW_HDR(D9_EV_REQUEST_BEGIN, D9__RW_REQUEST_BEGIN, source), 4,
		id, (uint64_t)fd, co, preview);
}

static inline int d9_raw_request_end(struct d9__raw *r, uint64_t now, uint64_t id,
	uint32_t source, uint64_t bytes_in, uint64_t bytes_out, uint32_t flags, uint64_t count,
	int64_t status, uint64_t tail_ticks)
{
	uint64_t *p = d9__raw_take(r, D9__RW_REQUEST_END, now);
	if (!p)
		return -28;
	p[1] = D9__RAW_HDR(D9_EV_REQUEST_END, D9__RW_REQUEST_END, source);
	p[2] = id;
	p[3] = bytes_in;
	p[4] = bytes_out;
	p[5] = flags;
	p[6] = count;
	p[7] = (uint64_t)status;
	p[8] = tail_ticks; /* in clock ticks: the writer makes them ns (raw.c) */
	return 0;
}

static inline int d9_raw_dropped(struct d9__raw *r, uint64_t now, uint64_t count, uint32_t reason)
{
	return d9__raw_one(r, now, D9__RAW_HDR(D9_EV_DROPPED, D9__RW_DROPPED, reason), count);
}

static inline int d9_raw_value(struct d9__raw *r, uint64_t now, uint64_t name, uint32_t kind,
	int64_t value)
{
	return d9__raw_put(r, now, D9__RAW_HDR(D9_EV_VALUE, D9__RW_VALUE, kind), 2, name,
		(uint64_t)value, 0, 0);
}

/* The store re-checks room itself and writes nothing when it fails (full, or the writer just
 * cleared raw.end to ask for the chunk): any failure takes the slow path and the event is
 * retried, so an event is never lost without being counted. The retry itself can fail: the
 * writer may clear raw.end of the block the slow path has just taken, before the event is in it
 * (a flush pass asks every running thread for its chunk). So the slow path runs again, handing
 * off the empty block; after D9__SLOW_TRIES rounds the event is counted as dropped. */
#define D9__REC(call)                                                      \
	do {                                                               \
		struct d9__thr *t_ = &d9__self;                            \
		if (!(D9_LIKELY(d9__enabled) && (call) == 0))              \
			for (unsigned r_ = 0; d9__slow(t_, r_) && (call) != 0; r_++) \
				;                                          \
	} while (0)

/* The same with the time read once into `now` (each retry after the slow path reads it again:
 * its new chunk starts later). */
#define D9__REC_AT(now, call)                                                       \
	do {                                                                        \
		struct d9__thr *t_ = &d9__self;                                     \
		uint64_t now = d9__now();                                           \
		if (!(D9_LIKELY(d9__enabled) && (call) == 0))                       \
			for (unsigned r_ = 0; d9__slow(t_, r_) &&                   \
				((now = d9__now()), (call) != 0); r_++)             \
				;                                                   \
		d9__switched(t_, now, co_);                                         \
	} while (0)

/* The time of the calling thread's last record (ticks): right after a d9_rec_* call, that
 * event's own time, unless it could not be recorded (dropped, counted; recording off). */
static inline uint64_t d9_rec_last_time(void)
{
	return d9__self.raw.last;
}

/* Appends a switch to the thread's switch log (profiling only). */
static inline void d9__switched(struct d9__thr *t, uint64_t now, uint64_t coroutine)
{
	struct d9__swlog *l = t->swlog;

	if (D9_UNLIKELY(l != NULL)) {
		uint64_t i = l->seq;
		l->e[i % D9__SWLOG_N].t = now;
		l->e[i % D9__SWLOG_N].co = coroutine;
		__atomic_store_n(&l->seq, i + 1, __ATOMIC_RELEASE);
	}
}

/* ---- Recording (hot path) ---------------------------------------------------------------------
 * Each records one event for the calling thread at the current time.
 * The most frequent ones (poll start and end, wake, park, unpark) try the encoder once inline and
 * leave the retry loop to an out-of-line copy (record.c, d9__rec_*_slow): the loop in line made
 * every caller save and restore registers around the common case (about 20 instructions an
 * event, issue 14). */
void d9__rec_poll_start_slow(uint64_t coroutine, uint64_t location);
void d9__rec_poll_end_slow(uint64_t coroutine);
void d9__rec_wake_slow(uint64_t woken, uint64_t waker, uint32_t kind, int64_t object);

static inline void d9_rec_poll_start(uint64_t coroutine, uint64_t location)
{
	struct d9__thr *t = &d9__self;
	uint64_t now = d9__now();

	if (D9_UNLIKELY(!d9__enabled || d9_raw_poll_start(&t->raw, now, coroutine, location) != 0))
		d9__rec_poll_start_slow(coroutine, location);
	else
		d9__switched(t, now, coroutine);
}

static inline void d9_rec_poll_end(uint64_t coroutine)
{
	struct d9__thr *t = &d9__self;
	uint64_t now = d9__now();

	if (D9_UNLIKELY(!d9__enabled || d9_raw_poll_end(&t->raw, now, coroutine) != 0))
		d9__rec_poll_end_slow(coroutine);
	else
		d9__switched(t, now, 0);
}

/* A Wake at `now` (d9__now(), read by the caller: e.g. the Unpark of the wait that found the
 * descriptor ready); the slow path, in a new chunk, reads the clock again. */
static inline void d9_rec_wake_at(uint64_t now, uint64_t woken, uint64_t waker, uint32_t kind,
	int64_t object)
{
	if (D9_UNLIKELY(!d9__enabled ||
		    d9_raw_wake(&d9__self.raw, now, woken, waker, kind, object) != 0))
		d9__rec_wake_slow(woken, waker, kind, object);
}

static inline void d9_rec_wake(uint64_t woken, uint64_t waker, uint32_t kind, int64_t object)
{
	d9_rec_wake_at(d9__now(), woken, waker, kind, object);
}

static inline void d9_rec_spawn(uint64_t coroutine, uint64_t parent, uint64_t location)
{
	D9__REC(d9_raw_spawn(&t_->raw, d9__now(), coroutine, parent, location));
}

static inline void d9_rec_coroutine_exit(uint64_t coroutine)
{
	D9__REC(d9__raw_one(&t_->raw, d9__now(),
		D9__RAW_HDR(D9_EV_COROUTINE_EXIT, D9__RW_COROUTINE_EXIT, 0), coroutine));
}

static inline void d9_rec_queue_sample(uint64_t runnable)
{
	D9__REC(d9__raw_one(&t_->raw, d9__now(),
		D9__RAW_HDR(D9_EV_QUEUE_SAMPLE, D9__RW_QUEUE_SAMPLE, 0), runnable));
}

/* start: d9__now() when the call began; call: a string id (d9_agent_string). */
static inline void d9_rec_blocking_call(uint64_t start, uint64_t coroutine, uint64_t call,
	uint32_t fd_kind, uint64_t stack)
{
	D9__REC(d9_raw_call(&t_->raw, d9__now(), D9_EV_BLOCKING_CALL, coroutine, call, fd_kind,
		d9_agent_ticks_to_ns(d9__now() - start), stack));
}

/* The same for a call whose stack the writer unwinds (profile.c, "blocking-call stacks"): regs
 * are the caller's registers captured on the slow path (the 17 of D9__UNWIND_REGS_MASK, in
 * PERF_REG_X86 order: AX BX CX DX SI DI BP SP IP R8-R15), with the stack above SP still as it was
 * then; skip: how many innermost frames of that unwind are the agent's. Copies the registers and
 * the top of the stack, never unwinds, opens nothing; without a free slot the call is recorded
 * without a stack. */
void d9_rec_blocking_call_regs(uint64_t start, uint64_t coroutine, uint64_t call,
	uint32_t fd_kind, const uint64_t *regs, uint32_t skip);

/* A call past the threshold that was preempted, not blocked: start and end are d9__now() around
 * it; sched_wait_ns the run delay inside it (at most). */
static inline void d9_rec_sched_delay(uint64_t start, uint64_t end, uint64_t coroutine,
	uint64_t call, uint32_t fd_kind, uint64_t sched_wait_ns)
{
	D9__REC(d9_raw_call(&t_->raw, end, D9_EV_SCHED_DELAY, coroutine, call, fd_kind,
		d9_agent_ticks_to_ns(end - start), sched_wait_ns));
}

/* Requests (preload/requests.c, agent API): begin and end, on the calling thread. */
static inline void d9_rec_request_begin(uint64_t id, int64_t fd, uint64_t coroutine,
	uint32_t source, uint64_t preview)
{
	D9__REC(d9_raw_request_begin(&t_->raw, d9__now(), id, fd, coroutine, source, preview));
}

/* now: d9__now() read by the caller, which timed tail_ticks with it (one clock read, not two):
 * the time from the response's last write to now, in clock ticks. */
static inline void d9_rec_request_end(uint64_t now, uint64_t id, uint32_t source,
	uint64_t bytes_in, uint64_t bytes_out, uint32_t flags, uint64_t count, int64_t status,
	uint64_t tail_ticks)
{
	D9__REC(d9_raw_request_end(&t_->raw, now, id, source, bytes_in, bytes_out, flags, count,
		status, tail_ticks));
}

/* at `now`: d9__now(), read by the caller (its Park takes the same time) */
static inline void d9_rec_zero_timeout_waits(uint64_t now, uint64_t count)
{
	D9__REC(d9__raw_one(&t_->raw, now,
		D9__RAW_HDR(D9_EV_ZERO_TIMEOUT_WAITS, D9__RW_ZERO_WAITS, 0), count));
}

/* Park: the thread is about to block in a wait (call: enum d9_wait_call). While parked, the
 * writer may take the thread's chunk so quiet threads still reach the file every flush interval;
 * d9_rec_unpark takes the thread back (one compare-and-swap each). */
void d9__rec_park_slow(uint32_t call, int64_t timeout_us);
void d9__rec_unpark_slow(int64_t ready, uint64_t cpu_ns, uint64_t sched_wait_ns);
/* Takes back a thread that the writer may be flushing: after this the thread owns its state. */
void d9__unpark(struct d9__thr *t);

/* d9_rec_park for a caller that has just seen d9__enabled set (a toggle in between records one
 * Park more, as one just before the toggle would), at `now` (d9__now(), read just before). */
static inline void d9_rec_park_at(uint64_t now, uint32_t call, int64_t timeout_us)
{
	struct d9__thr *t = &d9__self;

	if (D9_UNLIKELY(d9_raw_park(&t->raw, now, call, timeout_us) != 0)) {
		d9__rec_park_slow(call, timeout_us);
		return;
	}
	if (t->blk)
		__atomic_store_n(&t->park, D9__PARKED, __ATOMIC_RELEASE);
}

/* The same, at now. */
static inline void d9_rec_park_on(uint32_t call, int64_t timeout_us)
{
	d9_rec_park_at(d9__now(), call, timeout_us);
}

static inline void d9_rec_park(uint32_t call, int64_t timeout_us)
{
	if (D9_UNLIKELY(!d9__enabled)) {
		d9__rec_park_slow(call, timeout_us);
		return;
	}
	d9_rec_park_on(call, timeout_us);
}

/* Unpark at `now` (d9__now(), read by the caller just before). */
static inline void d9_rec_unpark_at(uint64_t now, int64_t ready, uint64_t cpu_ns,
	uint64_t sched_wait_ns)
{
	struct d9__thr *t = &d9__self;

	uint32_t expect = D9__PARKED;
	/* parked: take the thread back in line; the writer is taking its chunk: wait for it */
	if (__atomic_load_n(&t->park, __ATOMIC_RELAXED) != D9__RUNNING &&
		!__atomic_compare_exchange_n(&t->park, &expect, D9__RUNNING, 0, __ATOMIC_ACQ_REL,
			__ATOMIC_ACQUIRE))
		d9__unpark(t);
	if (D9_UNLIKELY(!d9__enabled || d9_raw_unpark(&t->raw, now, ready, cpu_ns, sched_wait_ns) != 0))
		d9__rec_unpark_slow(ready, cpu_ns, sched_wait_ns);
}

static inline void d9_rec_unpark(int64_t ready, uint64_t cpu_ns, uint64_t sched_wait_ns)
{
	d9_rec_unpark_at(d9__now(), ready, cpu_ns, sched_wait_ns);
}

/* The calling thread's scheduler statistics so far (/proc/thread-self/schedstat): CPU time and
 * time runnable but waiting for a CPU, ns. Costs one pread for the first 16 workers to read
 * (they keep the file open), five system calls for the others (record.c). Returns 1 for the
 * thread's first reading (also after a fork: values kept from before belong to another
 * thread), 0 for later ones, -EAGAIN when the program was closing the number the file got (no
 * reading this time), or -errno when they cannot be read (said once on stderr; the thread then
 * never tries again: -ECANCELED). */
int d9_agent_schedstat(uint64_t *cpu_ns, uint64_t *run_delay_ns);

/* ---- Threads, definitions, control (slow path) -------------------------------------------- */

/* Makes the calling thread a worker (small ids from 1 in order of appearance) and returns its
 * id; idempotent. Its next chunk carries the worker id. 0 when the agent is off. */
uint32_t d9_agent_become_worker(void);
/* The calling thread changed its name: its definition is written again. */
void d9_agent_thread_renamed(void);
/* Another thread was renamed (pthread_setname_np on it): the writer reads the names again. */
void d9_agent_thread_renamed_other(void);
/* Privilege drops (preload/libc-priv.c). Before a call that may set the effective uid to euid
 * ((uid_t)-1: a group change, euid unchanged), still privileged: prepares the trace directory
 * that user can write to. Returns a token for d9_agent_creds_after. */
int d9_agent_creds_before(unsigned euid);
/* After the call (ok: it succeeded), with the effective uid from before it: records the drop and
 * what it takes away from the recording, or undoes the preparation of a call that failed. */
void d9_agent_creds_after(int token, unsigned from_euid, int ok);
/* Marks the calling thread as the agent's own: it never records. */
/* An agent thread's start, with its argument (a struct d9__spawn of d9__spawn_blocked's): its
 * own descriptor table (fdown.c) and root and working directory (paths.c), then its creator
 * goes on. */
void d9__agent_thread(void *arg);

/* Interned definitions, written into every segment that may use them. Return the id, or 0 when
 * the agent is off or the definition tables are full (counted; the event then names no id). */
uint64_t d9_agent_string(const char *s, size_t len);
uint64_t d9_agent_location(uint64_t function_addr, uint64_t callsite_addr, uint64_t name);
uint64_t d9_agent_stack(const uint64_t *frames, uint32_t n);

/* A runtime adapter names the return address through which its coroutines' entry functions are
 * called (inside the runtime's trampoline, e.g. ST's _st_thread_main): a sampled stack ends at
 * that frame, whatever an unwinder finds beyond it (stale frames of a reused coroutine stack).
 * Cheap when the address is already known (adapters call it at every coroutine start); at most
 * D9_STACK_ROOTS addresses are kept. */
#define D9_STACK_ROOTS 8
void d9_agent_stack_root(uint64_t return_address);
/* The stack address `slot` holds a root return address (above) while the coroutine whose entry
 * function returns through it runs: the unwinder takes that word from here when the kernel's
 * stack copy stops below it (at a page the program never wrote). Slots are never forgotten, so
 * name one only on a stack that is never unmapped or put to other use, and whose every coroutine
 * holds the same word there (ST: stacks are kept on a free list, laid out from the same top).
 * Same cost as above; up to 8192 slots (one per coroutine stack) are kept. */
void d9_agent_stack_root_slot(uint64_t slot, uint64_t return_address);
/* A coroutine exists (flags: D9_COROUTINE_*) / has exited: every segment its events may land in
 * defines it (agent/coroutines.c). */
void d9_agent_coroutine(uint64_t id, uint64_t parent, uint64_t location, uint64_t flags);
/* A new coroutine id, process-wide and never reused: one counter for every runtime adapter, so
 * the ids of two runtimes in one process (State Threads and libuv) never collide. */
uint64_t d9_agent_coroutine_new_id(void);
void d9_agent_coroutine_exit(uint64_t id);

/* Memory for what preload/ keeps on the program's threads (coroutine records, descriptor and
 * pointer tables), mapped, never the program's malloc (agent/mem.c). d9__mem_alloc's memory is
 * zeroed and 16-aligned; d9__mem_realloc keeps the contents and leaves the rest as it finds it,
 * like realloc; NULL on failure. errno is kept. */
void *d9__mem_alloc(size_t n);
void *d9__mem_realloc(void *p, size_t n);
void d9__mem_free(void *p);

/* Flushes every thread's data to the file now and waits up to timeout_ms for it to be written.
 * Returns 0, or -ETIMEDOUT. The calling thread's chunk is flushed too. */
int d9_agent_flush(int timeout_ms);

/* The process ends without exit() (_exit, _Exit, exit_group: preload/libc-exit.c): the agent
 * seals what it wrote, waiting at most 100 ms. Async-signal-safe enough for _exit in a handler. */
void d9_agent_process_end(void);
/* Before exec: sealed the same way (returns 1 when sealed). When the exec returns (it failed),
 * d9_agent_exec_failed starts the agent again. */
int d9_agent_exec_begin(void);
void d9_agent_exec_failed(void);
/* Before an exec or spawn whose program will run in secure-execution mode, where the loader
 * ignores LD_PRELOAD's paths (preload/libc-exit.c tells): said once, and recorded in this
 * process's trace (RecorderState "exec", text: the program's file name and why), which the
 * agent starts to write if it was not recording; what: the program, why: the ids or bits. */
void d9_agent_exec_untraced(const char *what, const char *why);
/* Around unshare/setns that need a single-threaded process: the agent seals and its threads
 * end (1 when it paused); d9_agent_resume starts it again. */
int d9_agent_pause(void);
void d9_agent_resume(void);
/* Around the program's chroot(): before it the agent seals and stops for good (D9_CHROOT=stop,
 * the default), or with D9_CHROOT=follow starts (its threads keep the root they start with) and
 * holds the trace directory, or stops when it cannot follow safely; after it (ok: it succeeded)
 * the agent starts no more, and stops if the new root shows a /proc. The token goes from the
 * first to the second. */
int d9_agent_chroot_before(void);
void d9_agent_chroot_after(int token, int ok);
/* Around the program's installation of a seccomp filter (seccomp(2) SECCOMP_SET_MODE_FILTER or
 * STRICT, prctl(PR_SET_SECCOMP)): a filter may kill the thread at any system call it does not
 * list, the agent's own included. On the calling thread alone (and the threads and processes it
 * starts afterwards, which inherit it) the agent records nothing more and makes no system call;
 * on every thread (tsync) tracing stops for good before the call, as at a chroot. The token goes
 * from the first to the second; ok: the call succeeded. */
int d9_agent_seccomp_before(int tsync);
void d9_agent_seccomp_after(int token, int ok);

/* 1 when the agent is configured and running (or will start on the first event). */
int d9_agent_active(void);

/* ---- The agent's descriptor numbers (fdown.c; agent/DESIGN.md, "Descriptors and files") -----
 * A number the agent holds is marked its own; the program's calls that can take a number (close,
 * dup2, dup3, close_range, closefrom and their syscall() forms) call d9__fd_host_take before and
 * d9__fd_host_done after: a number of the agent's is taken from it once the agent's call in
 * progress on it has returned, so that the agent never writes into or closes the program's file
 * that got the number. Numbers at or above D9__OWN_FDS are never the agent's. */
#define D9__OWN_FDS 65536
extern D9_HIDDEN uint64_t d9__fd_taken; /* numbers of the agent's the program took */
/* Marks fd (just given to this thread by the kernel) the agent's; a number this thread's
 * interposer marked already (d9__fd_mark_new) is not marked twice. Returns 0; -EMFILE (too
 * high), -ESTALE (the program took it meanwhile) or -EAGAIN (a program's call on that number,
 * or another process: not known to be free): then the agent must neither use nor close it. */
int d9__fd_own(int fd);
/* The interposers' mark of a number an agent thread has just made (open, socket, pipe...). */
int d9__fd_mark_new(int fd);
/* Unmarks a number this thread marked that turned out not to be the file it opened. */
void d9__fd_unmark(int fd);
/* At start: the process whose numbers are marked (a vfork child's calls leave them alone). */
void d9__fd_init(void);
/* Around each agent call on its own fd (write, ftruncate, fallocate...): 0, or -ESTALE when
 * the number is not the agent's (nothing to leave then). */
int d9__fd_enter(int fd);
void d9__fd_leave(int fd);
/* Closes the agent's own fd: 0, -ESTALE (not the agent's: left alone) or -errno of close. */
int d9__fd_close(int fd);
/* A holder of the agent's lets go of fd without closing it (the number failed its check: the
 * program's, or another holder's of the agent's). */
void d9__fd_disown(int fd);
/* close() called on one of the agent's threads: an agent number closed as by d9__fd_close, a
 * number the program took from the agent left alone (returns 0), others closed. close()'s
 * contract. */
int d9__fd_agent_close(int fd);
/* config.c: descriptor 2 is now the program's stderr (at start, and after its dup2 or dup3 onto
 * 2): the agent's lines go to it while it stays that file (or a character device). */
void d9__stderr_meant(void);
/* 1 while a line of the agent's may go to descriptor 2 (that file, or a character device). */
int d9__stderr_ours(void);
/* files.c: fopen(path, "r") for an agent thread (its own code's, libdw's /proc/PID/maps): the
 * stream reads, seeks and closes a descriptor of the agent's, checked first (it has no fileno);
 * the C library's own fclose would close the number unseen, after the program may have closed
 * it and opened a file of its own under it. errno kept on success. */
FILE *d9__file_fopen_read(const char *path);
#define D9__FD_OURS 1u /* the agent holds the number */
#define D9__FD_REVOKED 2u /* the agent held it and the program took it (until the holder lets go) */
#define D9__FD_PEND1 (1u << 16) /* one program call that may take the number, in progress */
extern D9_HIDDEN uint32_t d9__fd_words[D9__OWN_FDS];
extern D9_HIDDEN int d9__fd_top;
void d9__fd_take(int fd); /* fdown.c: the agent's number, taken after its call in progress */

/* Inside a hold (d9__fd_enter), before each further call that changes the file: 1 while the
 * number is still the agent's (the program's take gives up waiting after 1 s). */
/* The same for a number in the program's table, whichever thread asks (paths.c: the d9-uid-N
 * directory, opened on a program's thread, checked by the writer). */
static inline int d9__fd_still_host(int fd)
{
	return (unsigned)fd < D9__OWN_FDS && (__atomic_load_n(&d9__fd_words[fd], __ATOMIC_SEQ_CST) & 1u);
}

static inline int d9__fd_still(int fd)
{
	if (D9_UNLIKELY(d9__self.fd_private))
		return fd >= 0; /* its own table: the program cannot take the number */
	return d9__fd_still_host(fd);
}

/* Raises d9__fd_top to fd: a plain load first, a store only for a new highest number. */
static inline void d9__fd_raise_top(int fd)
{
	int t = __atomic_load_n(&d9__fd_top, __ATOMIC_RELAXED);

	while (fd > t && !__atomic_compare_exchange_n(&d9__fd_top, &t, fd, 1, __ATOMIC_RELAXED,
				__ATOMIC_RELAXED))
		;
}

static inline void d9__fd_host_take(int fd)
{
	if ((unsigned)fd >= D9__OWN_FDS || D9_UNLIKELY(d9__self.fd_private))
		return; /* on an agent thread with a table of its own: none of the program's numbers */
	d9__fd_raise_top(fd);
	if (D9_UNLIKELY(__atomic_fetch_add(&d9__fd_words[fd], D9__FD_PEND1, __ATOMIC_SEQ_CST) &
			D9__FD_OURS))
		d9__fd_take(fd);
}

static inline void d9__fd_host_done(int fd)
{
	if ((unsigned)fd < D9__OWN_FDS && !d9__self.fd_private)
		__atomic_fetch_sub(&d9__fd_words[fd], D9__FD_PEND1, __ATOMIC_RELEASE);
}
void d9__fd_host_take_range(unsigned first, unsigned last);
/* An agent thread's start: a descriptor table of its own when the kernel allows (fdown.c). */
void d9__fd_private_begin(int filtered);
extern D9_HIDDEN int d9__fd_private_refused;
void d9__fd_host_range_done(void);
/* A forked child (its only thread): the other threads' calls in progress forgotten. */
void d9__fd_child(void);
/* 0 in a child made without the fork handlers (vfork, _Fork, clone), which may share the
 * parent's memory: it changes nothing of the parent's. */
int d9__fd_same_process(void);

#endif
