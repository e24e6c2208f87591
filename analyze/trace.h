/* trace.h: the analyzer's core. Reads any mix of segment files and directories, groups the
 * segments by process and orders them by segment_seq, resolves every per-segment id into
 * analyzer-wide objects (interned locations, stacks and strings; processes; threads) and hands
 * each event to a callback with times in CLOCK_MONOTONIC and CLOCK_REALTIME ns.
 * Streaming: memory grows with processes, threads, locations and stacks, never with events.
 * Damaged input is decoded as far as it goes; each damaged file gives one warning. */
#ifndef D9_ANALYZE_TRACE_H
#define D9_ANALYZE_TRACE_H
#include "d9-format.h"
#include "symbols.h"
#include "util.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct d9_event;

/* A spawn location, the same object for the same (name, function, call site) in any segment. */
struct d9__loc {
	const char *name; /* the SpawnLocation's name, else the symbolizer's, else "0x<function>" */
	uint64_t function_addr, callsite_addr;
	uint32_t idx; /* index in d9__trace.locs: callers keep per-location data in arrays */
	struct d9__loc *next; /* intern chain */
	uint64_t hash;
};

/* A stack (innermost frame first), interned by its frames. */
struct d9__stack {
	uint32_t n, idx;
	uint64_t *frames;
	struct d9__proc *proc; /* the first process that defined it: frames are named in its map */
	uint8_t pc0; /* a CPU sample's: frame 0 is the sampled instruction, not a return address */
	struct d9__stack *next;
	uint64_t hash;
};

/* A custom event schema (CustomSchema definition), the same object for the same name and fields
 * in any segment. */
struct d9__cschema {
	const char *name; /* interned; "?" when its String is undefined */
	struct d9_custom_schema cs; /* field names point into desc */
	const char *fields[D9_CUSTOM_MAX_FIELDS]; /* the field names, interned */
	uint8_t *desc; /* the definition's field description (owned) */
	size_t desc_len;
	uint32_t idx; /* index in d9__trace.cschemas */
	uint64_t hash;
};

/* A module mapping as recorded in the trace (Module definitions), for symbolization. */
struct d9__module {
	const char *path;
	uint64_t start, end, offset;
	uint8_t *build_id;
	size_t build_id_len;
};

/* A RecorderState of a process (FORMAT.md section 10): feature and state are D9_REC_* values
 * (unknown ones kept as numbers). */
#define D9__NARROWED_MAX 32
struct d9__narrowing {
	uint32_t feature, state, err; /* err: errno, 0 = none */
	const char *text; /* interned; "" when none */
};

struct d9__proc {
	uint32_t pid, ppid, idx;
	const char *process, *cmdline, *hostname, *boot_id; /* interned */
	uint32_t nsegs;
	uint32_t nworkers; /* threads with a worker id */
	struct d9__map threads; /* tid -> struct d9__thread */
	struct d9__module *modules;
	size_t nmodules;
	struct d9__symtab *symtab; /* symbols.c, created on first use */
	void *user; /* for the caller */
	/* gaps (see "Pairing across gaps" below), kept by trace.c */
	uint64_t wide_gaps; /* gaps of every thread: damage, a missing trailer, a segment_seq gap */
	uint64_t gaps; /* every gap of the process: wide_gaps plus its threads' */
	/* S3 uploads (FORMAT.md section 11): the largest running count among its trailers of
	 * segments uploaded, their bytes, failed attempts, segments given up; d9__trace_s3 sums */
	uint64_t s3[4];
	int64_t gap_ns; /* the latest time a gap reached, CLOCK_MONOTONIC ns */
	int64_t last_ns; /* the latest event time decoded so far */
	uint32_t last_seq; /* segment_seq of the process's previous segment in this pass */
	int seq_seen; /* last_seq is set */
	/* Privileges definitions: the process gave up privileges while recording */
	int priv_dropped;
	uint32_t priv_from_uid, priv_to_uid; /* the first drop's uid before, the last one's after */
	uint32_t priv_flags; /* D9_PRIV_* of every drop */
	/* RecorderState definitions: the recording was narrowed (one per feature and state, in
	 * the order first seen; repeated in every later segment, kept once) */
	struct d9__narrowing narrowed[D9__NARROWED_MAX];
	uint32_t nnarrowed;
};

struct d9__thread {
	struct d9__proc *proc;
	uint32_t tid, worker; /* worker 0: not a worker */
	uint32_t idx; /* index in d9__trace.threads */
	const char *name; /* interned; "" when unknown */
	void *user;
	uint64_t gaps; /* this thread's own gaps so far: its Dropped events (trace.c) */
};

/* Pseudo event types delivered after the real ones of a segment / of a process. */
enum { D9__EV_SEGMENT_END = 0x10001, D9__EV_PROCESS_END = 0x10002 };
/* D9__EV_SEGMENT_END's kind: the segment was sealed at its process's end (D9_TRAILER_ENDED),
 * at ns: every pair its threads had open ends there */
enum { D9__END_PROCESS = 1 };
/* ...or a flight dump's window ended there (D9_TRAILER_WINDOW): its threads' open parks last
 * until ns, their other pairs go on unseen */
enum { D9__END_WINDOW = 2 };

struct d9__ev {
	uint32_t type; /* enum d9_event_type, or D9__EV_* */
	int64_t ns; /* CLOCK_MONOTONIC ns (d9_time_to_mono_ns) */
	int64_t real_ns; /* CLOCK_REALTIME ns (d9_time_to_realtime_ns) */
	struct d9__proc *proc;
	struct d9__thread *th; /* NULL for pseudo events */
	uint64_t co; /* the coroutine: PollStart/End, Exit, BlockingCall, CpuSample; Wake: woken;
		      * Spawn: the new one */
	uint64_t co2; /* Wake: waker; Spawn: parent */
	const struct d9__loc *loc; /* PollStart, Spawn: the event's location, else the coroutine's
				    * definition's; NULL when unknown */
	const struct d9__stack *stack; /* BlockingCall, CpuSample; NULL for none */
	const char *call; /* BlockingCall, SchedDelay: the call's name ("?" when undefined) */
	uint64_t kind; /* Wake kind; Park call; BlockingCall fd kind; Dropped reason; CpuSample source */
	int64_t object; /* Wake object */
	int64_t deadline_ns; /* Wake of kind timer: the deadline, CLOCK_MONOTONIC ns */
	uint64_t count; /* QueueSample runnable; Dropped count; ZeroTimeoutWaits count;
			 * BlockingCall, SchedDelay duration_ns */
	int64_t value; /* Unpark ready; Park timeout_us; SchedDelay sched_wait_ns (-1 unknown) */
	uint64_t unwind; /* CpuSample: enum d9_unwinder and D9_UNWIND_* flags; 0 = not recorded */
	uint64_t weight_ns; /* CpuSample: the time it stands for (D9_UNKNOWN: not recorded) */
	/* RequestBegin: count the id, object the fd (-1 none), co the coroutine, kind the source,
	 * call the preview (NULL none); RequestEnd: count the id, kind the source, value the
	 * status, the rest in raw->f (D9_F_RE_*) */
	const struct d9_event *raw;
	/* application API (include/d9.h): Mark, Value: the name ("?" when undefined); Value: kind
	 * (enum d9_value_kind) and value (its raw i64); CustomEvent: the schema and its decoded
	 * values, cschema->cs.nfields of them */
	const char *name;
	const struct d9__cschema *cschema;
	const struct d9_custom_value *cvals;
};

typedef void d9__ev_fn(void *ctx, const struct d9__ev *ev);

/* Pairing across gaps. Events may be missing where the data has a gap: a Dropped event of the
 * thread (any reason but samples_lost, which loses only samples), a damaged chunk or event, the
 * end of a segment without a trailer, a segment whose segment_seq does not follow the previous
 * one's, a segment that could not be read. trace.c counts the gaps as it decodes (on the thread,
 * or process-wide when the thread is unknown), so a command pairs two events by taking a mark at
 * the first and comparing at the second: the two ends of a poll, a park or a loop turn (one
 * thread), a wake and the poll it leads to (any thread of the process). A pair with a gap
 * between its ends is "unknown": what ran in between was not seen, so its duration is not
 * reported (README.md, "Data quality"). One mechanism for every command that pairs events. */
struct d9__open {
	int open; /* the opening event was seen and no closing one yet */
	uint64_t mark; /* d9__gap_mark of the thread at the opening event */
	int64_t ns, real_ns; /* the opening event's times */
};
enum { D9__PAIR_NONE = 0, D9__PAIR_OK = 1, D9__PAIR_UNKNOWN = 2 };

/* The gaps a thread has met so far: its own and its process's. */
static inline uint64_t d9__gap_mark(const struct d9__thread *th)
{
	return th->gaps + th->proc->wide_gaps;
}
/* Counts a gap at time ns: of thread th, or of every thread of p when th is NULL. trace.c
 * calls it for damage and missing segments, merge.c for Dropped events as it delivers them
 * (after the CPU samples that precede them). */
void d9__gap(struct d9__proc *p, struct d9__thread *th, int64_t ns);
/* Opens o at ev (an open pair is replaced). */
void d9__pair_open(struct d9__open *o, const struct d9__ev *ev);
/* Closes o at ev, a later event of the same thread: D9__PAIR_NONE when o was not open,
 * D9__PAIR_OK when no gap lies between (*dur = ev->ns - o->ns, 0 if negative), else
 * D9__PAIR_UNKNOWN. */
int d9__pair_close(struct d9__open *o, const struct d9__ev *ev, uint64_t *dur);
/* Across threads (wake -> poll): 1 when a gap of process p may lie between the instant
 * since_ns, when mark = p->gaps was taken, and now: a gap was counted since the mark, or one
 * counted before it reached past since_ns (another thread's chunk, written earlier, can hold
 * later events). */
int d9__proc_gap_since(const struct d9__proc *p, uint64_t mark, int64_t since_ns);

struct d9__seg;
struct d9__istr;
struct d9__symtab;

struct d9__trace {
	/* set by the caller before d9__trace_open */
	struct d9__when from, to;
	int quiet; /* no warnings on stderr */
	int stop; /* set by the callback: d9__trace_run returns after the current event */

	/* after d9__trace_open */
	int64_t start_real; /* trace start: the earliest segment's start_realtime_ns */
	int64_t from_real, to_real; /* the window in CLOCK_REALTIME ns, [from, to) */
	struct d9__proc **procs;
	size_t nprocs;
	struct d9__thread **threads;
	size_t nthreads;
	struct d9__loc **locs;
	size_t nlocs;
	struct d9__stack **stacks;
	size_t nstacks;
	struct d9__cschema **cschemas;
	size_t ncschemas;
	char **warnings; /* one per damaged or unreadable input */
	size_t nwarnings;

	/* data quality */
	uint64_t files, readable, unreadable, bad_args, damaged_files;
	uint64_t truncated_segments; /* ended inside a chunk, or without a trailer (not live) */
	uint64_t live_segments; /* .active of a process alive on this host: incomplete, not damaged */
	uint64_t seq_gaps; /* a process's segment followed by one whose segment_seq is not the next */
	uint64_t corrupt_segments, corrupt_chunks, bad_events, bad_defs;
	uint64_t unknown_records; /* unknown chunk, event or definition kinds (newer writer) */
	uint64_t events; /* events delivered (inside the window) */
	uint64_t bytes; /* total size of the readable segment files */
	/* segments deleted by the directory budget: per directory, the largest count a trailer
	 * carries (FORMAT.md section 11); d9__trace_budget sums them */
	struct d9__budget_dir { const char *dir; uint64_t segments, bytes; } *budget_dirs;
	size_t nbudget_dirs;
	struct d9__dump *dumps; /* flight-recorder dumps the input belongs to (dumps.h) */
	size_t ndumps;

	/* progress line on stderr (d9__trace_run), only for large input on a terminal */
	int progress; /* 1: on; set by d9__trace_open */
	int progress_shown; /* a line is on the terminal now */
	int64_t progress_start, progress_last; /* CLOCK_MONOTONIC ns */
	uint64_t progress_done; /* bytes of the segments already read */

	/* private */
	struct d9__seg *segs;
	size_t nsegs;
	struct d9__map istr, iloc, istack; /* hash -> chain head */
};

/* Expands args (files, directories), reads every segment's header and groups the segments.
 * Unreadable inputs are warned about and counted. Returns 0, -EINVAL (bad --from/--to) or
 * -ENOMEM. */
int d9__trace_open(struct d9__trace *t, char **args, int nargs);
/* Decodes every segment, process by process, and calls fn for each event inside the window,
 * then D9__EV_SEGMENT_END after each segment and D9__EV_PROCESS_END after each process.
 * Stops early, with no further event, when fn sets t->stop. Shows a progress line on stderr
 * while it runs when the input is 64 MiB or more, stderr is a terminal and t->quiet is 0.
 * Returns 0 or -ENOMEM. */
int d9__trace_run(struct d9__trace *t, d9__ev_fn *fn, void *ctx);
/* A streaming command's whole run (jsonl, events): opens the inputs, runs fn over every event,
 * flushes stdout and closes t. Returns the command's exit status (d9__trace_exit_code, or why
 * the inputs could not be opened). */
int d9__trace_stream(struct d9__trace *t, char **args, int nargs, d9__ev_fn *fn, void *ctx);
/* A first pass for a command that must know something about the whole trace before its real
 * pass (polls: generic mode or not): runs fn like d9__trace_run, but without warnings or a
 * progress line, and leaves events, the data-quality counters and the warnings as they were.
 * fn may set t->stop. The interned objects it met stay (the real pass finds the same ones).
 * Returns 0 or -ENOMEM. */
int d9__trace_prescan(struct d9__trace *t, d9__ev_fn *fn, void *ctx);
/* A first pass (d9__trace_prescan) telling the trace's mode by summary's rules: 1 when the window
 * holds no complete poll but some complete loop turn (generic mode: loop turns, Unpark to the
 * next Park, stand for polls), 0 when not, -1 when out of memory. Stops at the first poll. */
int d9__trace_generic(struct d9__trace *t);
void d9__trace_close(struct d9__trace *t);
/* Segments (and bytes) the directory budget deleted, summed over the input's directories. */
void d9__trace_budget(const struct d9__trace *t, uint64_t *segments, uint64_t *bytes);
/* What a RecorderState took away, in words, into buf: "CPU samples from ctimer
 * (perf_event_open(cpu-clock): Permission denied)" (summary and check say the same). */
const char *d9__narrowing_text(const struct d9__narrowing *n, char *buf, size_t len);
/* How to get a narrowed feature back, in words ("" when there is nothing to say). */
const char *d9__narrowing_hint(const struct d9__narrowing *n);
/* S3 uploads summed over the processes: uploaded, bytes, failed attempts, given up. */
void d9__trace_s3(const struct d9__trace *t, uint64_t out[4]);
/* The exit status: D9_EXIT_NO_TRACE when no segment was readable, D9_EXIT_DAMAGED when some
 * input was missing, unreadable or damaged, else D9_EXIT_OK. */
int d9__trace_exit_code(const struct d9__trace *t);

struct d9_header;
/* 1 when the segment at path (header h) is an .active file its process still writes: that
 * process runs on this host (the header's hostname and boot id are this machine's) and its pid
 * exists. Such a segment has no trailer yet and may end inside the chunk being written: it is
 * incomplete, not damaged. Every other segment without a trailer is truncated (its writer
 * stopped before sealing it: a crash, a full disk). */
int d9__segment_live(const char *path, const struct d9_header *h);

/* Interned copy of s[0..n) (cut at its first NUL), valid until d9__trace_close. */
const char *d9__trace_intern(struct d9__trace *t, const char *s, size_t n);

/* Name of frame i of a stack (return addresses) into buf: the symbolizer's name
 * (d9__symbolize, symbols.h), else "0x<addr>". */
const char *d9__frame_name(struct d9__trace *t, const struct d9__stack *s, uint32_t i, char *buf,
	size_t n);
/* The names of frame i with its inlined functions expanded, innermost first (at least one; the
 * last is d9__frame_name's); buf holds the "0x<addr>" fallback. Returns how many. */
size_t d9__frame_names(struct d9__trace *t, const struct d9__stack *s, uint32_t i,
	const char **names, size_t max, char *buf, size_t n);
/* The stack as a JSON array of frame names ([] for none): summary and jsonl. */
void d9__json_stack(FILE *f, struct d9__trace *t, const struct d9__stack *st);
#endif
