/* internal.h: state shared by the recording core's files (agent/ only; preload/ uses d9-agent.h).
 * All of it is one global, d9__g, which a forked child re-creates from scratch rather than
 * trusting locks that another parent thread may have held at fork time. */
#ifndef D9_AGENT_INTERNAL_H
#define D9_AGENT_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "d9-agent.h"

#define D9_WRITER_VERSION "d9 0.1.0"
#define D9_BLOCK_SIZE (64u << 10) /* one thread chunk; blocks are the unit of memory */

/* ---- configuration (config.c) --------------------------------------------------------------- */
struct d9__config {
	char trace_path[2048]; /* D9_TRACE_PATH: base path; files are <dir>/<stem>.<pid>.<seq>.bin */
	char dir[2048], stem[256];
	uint64_t max_file_size, max_total_size, max_memory;
	uint64_t max_files; /* D9_MAX_FILES: segment files of the stem in the directory (budget.c) */
	uint64_t rotation_period_ns; /* 0: no time-based rotation */
	uint64_t flush_interval_ns;
	uint64_t exit_timeout_ns; /* D9_EXIT_TIMEOUT: the most an exit waits for the seal */
	int compress, enabled, toggle_signal; /* compress: D9_COMPRESS_*; toggle_signal 0: none */
	int log_level; /* 0 error, 1 warn, 2 info, 3 debug */
	int clock; /* 0 auto, 1 tsc, 2 monotonic */
	int agent_fds_shared; /* D9_AGENT_FDS: 0 private (a table per agent thread), 1 shared */
	int chroot_follow; /* D9_CHROOT: 0 stop (tracing ends at the program's chroot), 1 follow */
	struct d9_preload_config pre; /* copied to d9__pcfg */
	/* profiling (profile.c) and symbols (symbolize.c) */
	uint32_t cpu_hz; /* D9_CPU_PROFILE: on-CPU samples per second per worker, 0 = off */
	int profile_mode; /* D9_CPU_PROFILE_MODE: D9_PROF_AUTO, D9_PROF_PERF, D9_PROF_CTIMER */
	int sched_events; /* D9_SCHED_EVENTS: off-CPU samples at context switches */
	int stacks; /* D9_STACKS: D9_STACKS_AUTO, D9_STACKS_FP, D9_STACKS_DWARF */
	uint32_t stack_dump; /* D9_STACK_DUMP: bytes of user stack copied per sample (dwarf, auto) */
	int profile_signal; /* D9_PROFILE_SIGNAL: the ctimer mode's signal */
	int symbolize; /* D9_SYMBOLIZE: symbol records in sealed segments */
	uint64_t symbolize_memory; /* D9_SYMBOLIZE_MEMORY: inflated DWARF a libdw session may hold */
	int allow_shared_dir; /* D9_ALLOW_SHARED_DIR: accept a directory others can write to */
	int cmdline; /* D9_CMDLINE: D9_CMDLINE_FULL, _REDACTED, _NAME (what the header records) */
	/* flight recorder (flight.c): D9_MODE=flight keeps the last window in memory and writes
	 * only around a trigger; each trigger threshold 0 = that trigger is off */
	int flight; /* D9_MODE: 0 continuous, 1 flight */
	uint64_t flight_window_ns, flight_after_ns; /* D9_FLIGHT_WINDOW, D9_FLIGHT_AFTER */
	uint64_t trigger_poll_ns, trigger_blocking_ns, trigger_sched_ns; /* D9_TRIGGER_* */
	uint64_t trigger_drops; /* D9_TRIGGER_DROPS: dropped events within one second */
	uint64_t trigger_cooldown_ns; /* D9_TRIGGER_COOLDOWN */
	int dump_signal; /* D9_DUMP_SIGNAL, 0: none */
};
enum { D9_CMDLINE_FULL = 0, D9_CMDLINE_REDACTED = 1, D9_CMDLINE_NAME = 2 };
enum { D9_PROF_AUTO = 0, D9_PROF_PERF = 1, D9_PROF_CTIMER = 2 };
enum { D9_STACKS_AUTO = 0, D9_STACKS_FP = 1, D9_STACKS_DWARF = 2 };

/* Parses D9_* into c. Returns 0, or -EINVAL after printing one line naming the variable. */
int d9__config_load(struct d9__config *c);

/* ---- trace paths (paths.c) ------------------------------------------------------------------- */
/* At load, without creating anything: an existing directory as trace_path becomes c->dir (stem
 * "trace"); a path that is not a file or directory, or runs through a non-directory, or lies in
 * /dev, /proc or /sys, is refused. Returns NULL, or what is wrong (for the config error line). */
const char *d9__path_check(struct d9__config *c);
/* At start: creates c->dir (0700) and checks that it is a directory of the effective user that
 * nobody else can write to (unless c->allow_shared_dir), and writable. Logs the one line about a
 * refusal itself. Returns 0 or a negative errno. */
int d9__trace_dir_prepare(const struct d9__config *c, int quiet);
/* The reason the last d9__trace_dir_prepare with quiet 2 refused the directory (a change of user
 * before the agent started), or NULL. */
const char *d9__trace_dir_refusal(void);
/* Privilege drops (paths.c). Still privileged, before the effective uid becomes uid: prepares
 * the directory that user will write to (the trace directory for its owner, else the
 * subdirectory d9-uid-<uid>, made 0700 for that user and held open; left root's with an ACL
 * that lets that user alone in when the program kept no CAP_CHOWN, in root's 0700 directory).
 * Returns 0 (call d9__trace_dir_use to switch), 1 (nothing to change) or a negative errno. */
int d9__trace_dir_for_uid(const struct d9__config *c, uid_t uid);
/* Whether the trace directory in use is such a subdirectory left root's, in the ACL form. */
int d9__trace_dir_opened(void);
/* 1 when the directory (fd, or path when fd < 0; st its stat) is in that form for uid: root's,
 * mode 0770, with exactly that ACL. */
int d9__dir_acl_form(int fd, const char *path, const struct stat *st, uid_t uid);
/* Before the program's chroot, on its thread: holds a descriptor of the trace directory, through
 * which a later d9__trace_dir_for_uid works in the new root. 0; the directory's mode when others
 * have any access to it (its descriptor would lead out of the jail); or a negative errno. */
int d9__trace_dir_anchor(const struct d9__config *c);
/* The program's thread, once the agent has stopped for good after a chroot (and in a forked
 * child of a chrooted process): closes the trace directory's descriptors it holds. */
void d9__trace_dir_release(void);
void d9__paths_child(void); /* a forked child: paths.c's lock made anew */
/* An agent thread's start: a root and working directory of its own (unshare(CLONE_FS)), unless
 * under a seccomp filter or its creator's are its own already (d9__self.fs_private). */
void d9__fs_private_begin(int filtered);
/* Makes c->dir the directory prepared last (the writer, or before the agent starts). */
void d9__trace_dir_use(struct d9__config *c);
/* 0, or -ESTALE/-EBADF when c->dir is a subdirectory whose descriptor the program took. */
int d9__trace_dir_check(const struct d9__config *c);
/* The owner of the subdirectory in use when path names a file directly in it, else -1: the
 * agent's files there are that user's even when made before the program's change of user took
 * effect (d9__file_create). */
uid_t d9__trace_dir_owner(const char *path);
/* c->dir for messages: the subdirectory's real path rather than /proc/self/fd/<n>. */
const char *d9__trace_dir_shown(const struct d9__config *c);

/* ---- command line (cmdline.c) ----------------------------------------------------------------- */
/* Reads /proc/self/cmdline into buf (NUL-separated arguments, at most cap bytes) as mode
 * (D9_CMDLINE_*) asks: secrets replaced by "***" in D9_CMDLINE_REDACTED. Returns the length. */
size_t d9__cmdline_read(char *buf, size_t cap, int mode);

/* ---- logging (config.c) ------------------------------------------------------------------------ */
enum { D9_LOG_ERROR = 0, D9_LOG_WARN = 1, D9_LOG_INFO = 2, D9_LOG_DEBUG = 3 };
extern D9_HIDDEN int d9__log_level;
/* One line "d9: ..." on stderr with write(2) (no stdio locks), errno preserved. */
void d9__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Logs at most once per call site: for problems that could repeat. */
#define d9__log_once(level, ...)                                               \
	do {                                                                   \
		static int once_;                                              \
		if (!__atomic_exchange_n(&once_, 1, __ATOMIC_RELAXED))         \
			d9__log(level, __VA_ARGS__);                           \
	} while (0)

/* Said once in the whole tree of processes forked from the one that loaded the agent: lines
 * about what narrowed the recording, which each of a server's children would say again (a
 * prefork worker each, a CGI helper per request: 1,460 lines in one Apache error log) while the
 * trace records each process's (Privileges, RecorderState). The flags are one page mapped shared
 * at load (lifecycle.c), before the program forks; an exec'd image has its own. bit: D9__SAID_*. */
extern D9_HIDDEN uint32_t *d9__tree_said;
enum {
	D9__SAID_PRIV_PERF = 1, D9__SAID_PRIV_KERNEL = 2, D9__SAID_SCHED_DENIED = 4,
	D9__SAID_CPU_FALLBACK = 8, D9__SAID_CPU_OFF = 16, D9__SAID_EXIT_TIMEOUT = 32,
	D9__SAID_EXEC = 64,
};
#define d9__log_tree_once(bit, level, ...)                                     \
	do {                                                                   \
		static int once_;                                              \
		if (!__atomic_exchange_n(&once_, 1, __ATOMIC_RELAXED) &&       \
			!(d9__tree_said && (__atomic_fetch_or(d9__tree_said,   \
			(uint32_t)(bit), __ATOMIC_RELAXED) & (uint32_t)(bit)))) \
			d9__log(level, __VA_ARGS__);                           \
	} while (0)

/* ---- clock (clock.c) --------------------------------------------------------------------------- */
struct d9__anchor { uint64_t ticks, mono_ns, realtime_ns; };
/* Chooses the event clock (TSC when invariant and the kernel trusts it) and sets d9__shift. */
void d9__clock_init(int mode);
/* One instant on the three clocks. */
void d9__clock_anchor(struct d9__anchor *a);
/* Refines the TSC frequency from the first anchor to now (writer thread). */
void d9__clock_calibrate(void);
void d9__clock_calibrate_start(void);
/* The tick thresholds of d9__pcfg at the clock's current rate. */
void d9__clock_update_ticks(void);
uint64_t d9__clock_tps(void); /* ticks per second */
uint64_t d9__clock_baseline_ns(void); /* the calibration baseline's length so far */
uint64_t d9__mono_ns(void);
uint64_t d9__realtime_ns(void);
/* A time in ns as a struct timespec (the deadlines of timed waits) */
static inline struct timespec d9__timespec(uint64_t ns)
{
	return (struct timespec){ (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
}

/* ---- blocks ----------------------------------------------------------------------------------- */
struct d9__block {
	struct d9__block *next; /* free list or write queue */
	uint32_t tid, worker;
	uint32_t count; /* events in the chunk */
	uint32_t size; /* bytes of the finished chunk (with head and CRC) */
	uint64_t first_time, last_time; /* event time units */
	uint64_t dropped; /* sum of Dropped counts recorded in this chunk */
	uint64_t lost_samples; /* of which samples (reason samples_lost) */
	uint32_t drop_records; /* Dropped records among the chunk's events */
	uint32_t types[D9_EV_KNOWN_MAX + 1]; /* events of each built-in type (the encoder's) */
	uint8_t raw; /* 1: data holds a thread's raw records (size bytes of them from
		      * d9__raw_start, first_time their base ticks) until d9__raw_encode */
	uint8_t pad[3];
	uint8_t data[]; /* the chunk */
};
#define D9_BLOCK_DATA (D9_BLOCK_SIZE - sizeof(struct d9__block))

/* The events a chunk stands for: its records, with each Dropped record standing for the count it
 * carried (what a lost chunk counts as dropped: writer.c, flight.c). */
static inline uint64_t d9__block_events(const struct d9__block *b)
{
	return b->count - b->drop_records + b->dropped;
}

/* Where a block's raw records start: past the room of the chunk's heads, aligned to a word. The
 * writer encodes the records in place, heads first (raw.c): the encoding never catches up with
 * the record it reads. */
static inline uint64_t *d9__raw_start(struct d9__block *b)
{
	return (uint64_t *)(void *)(((uintptr_t)b->data + D9_CHUNK_HDR_LEN + D9_EVENTS_HDR_LEN + 7) &
		~(uintptr_t)7);
}

/* ---- raw records (raw.c) ------------------------------------------------------------------------
 * Encodes a handed-off block's raw records into its chunk, in place (writer thread; before the
 * block is written or kept). A block that is not raw is left as it is. */
void d9__raw_encode(struct d9__block *b);

/* ---- definitions (defs.c) --------------------------------------------------------------------- */
struct d9__deflog {
	uint8_t *buf; /* encoded definition records, appended in order */
	size_t len, cap;
	size_t limit; /* memory cap of the log */
	uint64_t full; /* definitions refused because the log was full */
};

/* ---- agent locks ---------------------------------------------------------------------------
 * pthread_mutex_lock is interposed (libc-block.c) and the agent's own calls reach the wrapper:
 * the thread is marked busy while it waits, so the wrapper passes straight through instead of
 * timing the agent's lock as the host's blocking call (and re-entering the agent). */
static inline void d9__lock(pthread_mutex_t *m)
{
	uint8_t busy = d9__self.busy;

	d9__self.busy = 1;
	pthread_mutex_lock(m);
	d9__self.busy = busy;
}

static inline void d9__unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

/* The loader (lifecycle.c): every dl_iterate_phdr, dlopen and dlclose of the agent goes through
 * this gate, which a fork waits for (glibc leaves the loader's lock held in a child forked while
 * another thread is inside). Never held while taking def_lock's holders' locks in reverse. */
void d9__loader_enter(void);
void d9__loader_leave(void);
void *d9__dlopen(const char *path, int flags);
void d9__dlclose(void *h);
struct dl_phdr_info;
int d9__dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg);

/* ---- descriptors of the agent's own (files.c) ---- */
struct d9__file {
	int fd; /* -1: none; else used only while fstat shows dev/ino below */
	dev_t dev;
	ino_t ino;
};

/* ---- the agent -------------------------------------------------------------------------------- */
enum { D9__OFF = 0, D9__CONFIGURED = 1, D9__RUNNING_ = 2, D9__FAILED = 3, D9__STOPPED = 4 };

struct d9__segment {
	struct d9__file f; /* f.fd -1 when no segment is open */
	uint32_t seq;
	uint64_t size; /* bytes written */
	uint64_t good; /* size after the last complete chunk */
	uint64_t alloc_end; /* blocks are allocated up to here (writer.c, room_for) */
	int no_ahead; /* the disk had no room for blocks ahead: only the exact need */
	int no_reserve; /* opened in the exit's last pass with room for all of it: no fallocate */
	uint64_t opened_real_ns, rotate_at_real_ns;
	char path[4096];
	struct d9_trailer tr;
	uint64_t deflog_written; /* bytes of the definition log written into this segment */
};

struct d9__sealed {
	char path[4200];
	uint64_t size;
	uint32_t seq;
	int compressing; /* the compressor is working on it */
	int doomed; /* deleted for the budget while compressing: the compressor removes its .gz */
	int foreign; /* recovered from another (dead) process: compressed, never counted or deleted */
	uint64_t retry_at_ns; /* compression failed: not tried again before this (monotonic) */
};

struct d9__drop { uint32_t tid, worker; uint64_t count; uint32_t reason; };
#define D9_PENDING_DROPS 256

struct d9__agent {
	int state; /* D9__OFF ... */
	struct d9__config cfg;
	pid_t pid;

	/* blocks: one reservation of max_memory, carved on demand (pool lock) */
	pthread_mutex_t pool_lock;
	uint32_t writer_word; /* futex word: bumped by d9__writer_wake (work for the writer) */
	uint32_t writer_sleeps; /* the writer is (about to be) in its futex wait */
	pthread_cond_t done_cond; /* the writer finished a pass (flush waiters) */
	uint8_t *arena;
	size_t arena_blocks, arena_used;
	struct d9__block *free_list;
	struct d9__block *q_head, *q_tail; /* full chunks waiting for the writer */
	uint32_t q_len; /* blocks in that queue */
	uint32_t flush_waiters; /* d9_agent_flush calls waiting for the writer's passes */
	uint32_t nfree; /* atomic hint: free blocks available (0: starving) */
	uint64_t passes; /* writer passes completed */
	int in_pass; /* the writer is in a pass (it started before a flush asked for one) */
	int flush_req; /* a flush was asked for (d9_agent_flush, a directory switch) */
	struct d9__drop pending[D9_PENDING_DROPS]; /* drops of threads that could not record them */
	size_t npending;
	uint64_t pending_overflow;
	int stop; /* the writer must seal and exit */
	int stop_ended; /* ...because the process ends (not a pause or an exec): set before stop */
	uint64_t end_at; /* when it ended (d9__now), with stop_ended: the last trailer's end_time */
	int writer_private; /* the writer had a descriptor table of its own (fdown.c) */

	/* registry of recording threads (reg lock; lock order reg -> pool) */
	pthread_mutex_t reg_lock;
	struct d9__thr *threads;
	uint32_t nworkers;
	pthread_key_t exit_key;

	/* definitions (def lock) */
	pthread_mutex_t def_lock;
	struct d9__deflog log;
	struct d9__intern *intern;

	/* writer thread state (only the writer touches these) */
	pthread_t writer;
	int writer_started;
	struct d9__segment seg;
	uint64_t next_seq;
	uint64_t first_seq; /* this process's first segment: lower ones of our pid are leftovers */
	uint64_t write_drops[4]; /* events lost to write errors, not yet recorded */
	struct d9__wdrop *wdrops; /* per-thread write-error drop counts */
	int write_failing;
	/* a program started in secure execution was recorded (d9_agent_exec_untraced): the last
	 * seal writes a segment for it even when nothing else was */
	int exec_note;

	/* sealed segments of this series (disk lock; writer and compressor) */
	pthread_mutex_t disk_lock;
	pthread_cond_t disk_cond;
	struct d9__sealed *sealed;
	size_t nsealed, sealed_cap;
	pthread_t compressor;
	int compressor_started;
	int compress_stop;
	int compressor_done; /* the compressor thread has finished (async-signal-safe to read) */
	int compress_abort; /* exit cannot wait longer: the compressor drops its current job */
	uint64_t compress_failures; /* segments that failed to compress (each stays .bin) */
	/* the compressor's temporary file from its creation until its rename (tmp_live 1):
	 * removed by the exit path when the compressor is given up on (async-signal-safe: a flag
	 * and unlink) */
	char compress_tmp[4300];
	int tmp_live;
	int tmp_creating; /* 1 while d9__tmp_create runs: the exit path waits for it to end */

	int exit_done;
	/* d9_agent_pause (unshare, setns): the agent starts again after the call, so the events
	 * still in running threads' blocks are written then, not counted as lost at this seal */
	int pausing;
	int dir_switch; /* privilege drop: the writer seals and moves to the prepared directory */
	int forked; /* a forked child: no recovery, no compressor before its first rotation */
	/* the program changed its root directory (chroot): a thread started from now on by a
	 * program's thread would be in it, so the agent starts no more (paths.c, chroot) */
	int chrooted;
	int fs_shared; /* an agent thread could not have a root of its own (a seccomp filter) */
};

extern D9_HIDDEN struct d9__agent d9__g;

/* record.c */
void d9__record_init(void); /* (re)creates the pool and registry state */
struct d9__block *d9__pool_get(void);
void d9__pool_put(struct d9__block *b);
void d9__queue_push(struct d9__block *b);
/* Work for the writer: wakes it if it sleeps (any thread, also a signal handler) */
void d9__writer_wake(void);
/* The writer's sleep (pool lock held, released meanwhile) until a wake after `seen` or wake_ns */
void d9__writer_sleep(uint32_t seen, uint64_t wake_ns);
/* Finishes the thread's chunk and queues it; t->blk becomes NULL. */
void d9__handoff(struct d9__thr *t);
/* Writer: asks running threads for their chunks and takes parked threads' chunks. */
void d9__collect(uint64_t older_than_mono_ns, int all);
/* t->dropped, the events a thread could not record since its last Dropped record: the thread
 * adds to it, and whoever records the count (the thread at its next block or its exit, the
 * writer at its last pass) takes it, atomically, so that no count is lost or recorded twice. */
static inline void d9__drop_one(struct d9__thr *t)
{
	__atomic_add_fetch(&t->dropped, 1, __ATOMIC_RELAXED);
}

/* An adapter's event it has no memory to record: a drop while recording is on (off, it would
 * not have been recorded either). */
static inline void d9__drop_unrecorded(void)
{
	if (d9__enabled)
		d9__drop_one(&d9__self);
}

static inline uint64_t d9__drops_take(struct d9__thr *t)
{
	return __atomic_exchange_n(&t->dropped, 0, __ATOMIC_RELAXED);
}

/* The events t could not record while the agent was stopped for a pause (record.c, slow). */
static inline uint64_t d9__paused_take(struct d9__thr *t)
{
	return __atomic_exchange_n(&t->dropped_paused, 0, __ATOMIC_RELAXED);
}

/* Hands a thread's unrecorded drop count to the writer, which records it (pool lock). */
void d9__drops_report(uint32_t tid, uint32_t worker, uint64_t count, uint32_t reason);
/* A thread's counts that no block of its own will carry any more (it exits, or starves at the
 * exit): the events it had no block for, and those refused while the agent was stopped. */
void d9__drops_report_all(struct d9__thr *t);
/* At the last seal: calls count for each running thread (or one blocked in a call d9 does not
 * park in) that still holds recorded events in its chunk, which never reach the file (reason
 * other), or a count of events it could not record for want of a free block (buffers full): the
 * trace counts both as dropped. */
void d9__unflushed_report(void (*count)(uint32_t tid, uint32_t worker, uint64_t n,
	uint32_t reason));

/* defs.c */
void d9__defs_init(void);
/* Copies log bytes [from, len) for the writer (def lock). Returns the length copied. */
size_t d9__defs_snapshot(size_t from, uint8_t **out);
/* Defines an executable mapping of a module (interned: written once per segment). */
void d9__defs_module(const char *path, uint64_t start, uint64_t end, uint64_t offset,
	const uint8_t *build_id, size_t build_id_len);
/* modules.c: defines the modules loaded since the last call (writer thread). */
void d9__modules_refresh(void);
/* Appends a Privileges definition (the process gave up privileges) to the log. */
void d9__defs_privileges(uint32_t from_uid, uint32_t to_uid, uint32_t flags);
/* Appends a RecorderState definition (a part of the recording was narrowed: D9_REC_*; err an
 * errno of either sign or 0; text a short detail or NULL), once per feature and process; every
 * later segment carries it. Slow path only (takes the def lock), errno preserved. */
void d9__defs_recorder(uint32_t feature, uint32_t state, int err, const char *text);
/* Appends a CustomSchema definition (api.c) to the log. Returns 0 or -ENOSPC. */
int d9__defs_custom_schema(uint64_t id, uint64_t name, const struct d9_custom_schema *s);
/* Appends a Thread definition to the log. */
void d9__defs_thread(uint32_t tid, const char *name, uint32_t worker, uint32_t role);
/* Writer: defines again every thread whose name (/proc/self/task/TID/comm) changed since its
 * last definition; only after d9_agent_thread_renamed_other() unless always. */
void d9__defs_names_refresh(int always);
/* In a forked child: drops the parent's Thread definitions from the log. */
void d9__defs_child(void);

/* coroutines.c: Coroutine definition records for the writer (a buffer to free, its length) */
size_t d9__coroutines_all(uint8_t **out);
size_t d9__coroutines_fresh(uint8_t **out);
void d9__coroutines_child(void);
void d9__coroutines_prune(uint64_t age_ns);
/* mem.c (d9-agent.h): in a forked child */
void d9__mem_child(void);

/* lifecycle.c, on the writer's periodic pass: the program took the toggle signal over (said) */
void d9__toggle_check(void);
/* writer.c */
int d9__writer_start(void);
void *d9__writer_main(void *arg);
/* Recovers one segment left behind by a dead process of this stem: 1 when it did something. */
int d9__recover_next(void);
/* paths.c: creates the missing directories of dir (mode 0700). Returns 0 or a negative errno. */
int d9__mkdirs(const char *dir);

/* compress.c. D9_COMPRESS: off (.bin stays), on (every sealed segment gzipped), auto (the
 * default: gzipped only while the directory takes more than half of D9_MAX_TOTAL_SIZE, oldest
 * first; a finished .bin is marked with S_ISVTX; DESIGN.md "Compressing for the budget"). */
enum { D9_COMPRESS_OFF = 0, D9_COMPRESS_ON = 1, D9_COMPRESS_AUTO = 2 };
void d9__sealed_add(const char *path, uint64_t size, uint32_t seq, int foreign);
/* The budget deleted path: dropped from the list (a job being worked on is marked doomed). */
void d9__sealed_forget(const char *path);
void d9__compressor_wake(uint64_t deadline); /* after compress_stop: wakes it now */

/* budget.c: the directory budget shared by every process writing the stem there (DESIGN.md,
 * "The directory budget"). Only agent threads call these. */
/* Deletes the oldest sealed segments of the directory (any process of ours) until its files fit
 * D9_MAX_TOTAL_SIZE and D9_MAX_FILES, every file at its size now, except this process's segment
 * being written: at least own_reserve (the room it may grow into). Waits at most wait_ns for the
 * lock. Returns 0, or -ETIMEDOUT (nothing done). */
int d9__budget_enforce(uint64_t wait_ns, uint64_t own_reserve);
/* The directory's running totals of segments (and bytes) the budget deleted, as last seen. */
void d9__budget_deleted(uint64_t *segments, uint64_t *bytes);
/* The directory's total as of the last d9__budget_enforce (this process's), less what the
 * compressor saved since (d9__budget_shrunk); *gen counts the enforcements. */
uint64_t d9__budget_total(uint64_t *gen);
void d9__budget_shrunk(uint64_t bytes);
/* Takes the directory lock (this process's mutex, then the lock file's record lock, tried up to
 * wait_ns). Returns 0 (held), 1 (mutex only: no usable lock file) or -ETIMEDOUT (nothing held).
 * d9__dirlock_give takes what d9__dirlock_take returned. Renames that publish a segment (gzip,
 * symbols) happen under it, so a segment the budget deleted is never brought back. abortable: the
 * wait ends early when the process exits (the compressor's and the uploader's work is the next
 * start's); the writer's budget at exit waits its full wait_ns. */
int d9__dirlock_take(uint64_t wait_ns, int abortable);
void d9__dirlock_give(int taken);
void d9__budget_child(void);
/* Parses "<stem>.<pid>.<seq><suffix>"; returns the suffix or NULL. */
const char *d9__seg_parse(const char *name, long *pid, long *seq);
/* Orders two mtimes, the older first (the budget's age of a segment). */
int d9__mtime_cmp(const struct timespec *a, const struct timespec *b);
void *d9__compressor_main(void *arg);
/* gzip src into src.gz (via a .tmp and rename), then removes src. Returns 0 or -errno. */
int d9__gzip_file(const char *src, uint64_t *out_size);

/* The D9_SCHEMA_* flags of every segment's schema: CpuSample events carry their unwinder. */
#define D9__SCHEMA_FLAGS D9_AGENT_SCHEMA /* the one schema of every segment the agent writes */

/* profile.c: CPU and off-CPU samples of workers */
void d9__profile_init(void);
void d9__profile_thread_start(struct d9__thr *t);
void d9__profile_thread_exit(struct d9__thr *t);
void d9__profile_child(void);
void d9__profile_writer_end(void); /* the writer ends: its unwinder with it (fdown.c) */
/* A forked child's writer: frees the parent's profiling state (not freed in the fork handler). */
void d9__profile_stale_free(void);
/* Writer: drains every worker's samples into chunks (a list of blocks to write, oldest first,
 * before the chunks queued so far). */
struct d9__block *d9__profile_drain(void);
/* How often the writer drains (ns), 0 when profiling is off. */
uint64_t d9__profile_interval_ns(void);
void d9__profile_modules_changed(void);
/* Makes fd, just returned by perf_event_open on this thread, the agent's (fdown.c) and holds it
 * (d9__fd_enter): 0 when it is still that perf event (*st and its event id *id filled; the
 * caller leaves the hold), else -errno with the number left to the program, unmarked (closed
 * only when too high to mark: -EMFILE). */
struct stat;
int d9__perf_adopt(int fd, struct stat *st, uint64_t *id);

/* record.c: a fork waits for the schedstat opens in progress (fork_prepare; 100 ms at most) and
 * the forked child's handler closes the schedstat files of the parent's threads */
void d9__schedstat_fork_prepare(void);
void d9__schedstat_fork_parent(void);
void d9__schedstat_child(void);

/* files.c: descriptors and files of the agent's own (DESIGN.md, "Descriptors and files") */
/* In a forked child's fork handler (its only thread): the descriptor table grown to the agent's
 * high numbers, before a second thread makes the kernel wait for RCU to grow it. */
void d9__fd_table_grow(void);
/* Creates path (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600) with flags. Returns 0 or -errno. */
int d9__file_create(struct d9__file *f, const char *path, int flags);
/* fd, just opened by this thread (any kind of file) from name relative to dirfd, becomes f:
 * marked the agent's, checked to be the file named, moved high, remembered. 0 or -errno; fd is
 * given up on failure (closed when it was still the agent's). */
int d9__file_take(struct d9__file *f, int fd, int dirfd, const char *name);
/* The same, left at its number (a descriptor held for a few system calls). */
int d9__file_take_here(struct d9__file *f, int fd, int dirfd, const char *name);
/* Opens an existing regular file owned by the effective user without following links or waiting
 * on a FIFO. Returns 0, -EPERM for anything else, or -errno. */
int d9__file_open(struct d9__file *f, const char *path, int flags);
/* 0 while f->fd is still the file opened; -EBADF (closed) or -ESTALE (the number now names
 * another file: the host's, never to be touched). */
int d9__file_check(const struct d9__file *f);
/* Around any other call that changes the file through f->fd (fallocate, lseek, fchmod): 0 with
 * the number held (the program's close or dup2 of it waits until d9__file_leave), or -errno of
 * d9__file_check. */
int d9__file_enter(const struct d9__file *f);
void d9__file_leave(const struct d9__file *f);
/* write/ftruncate/close, each inside d9__file_enter/leave; return 0 or -errno. close always
 * forgets the descriptor. */
int d9__file_write(struct d9__file *f, const void *buf, size_t n);
int d9__file_truncate(struct d9__file *f, uint64_t size);
int d9__file_close(struct d9__file *f);
/* Forgets f's descriptor without closing it (its number failed a check: the program's). */
int d9__file_drop(struct d9__file *f);
/* A close-on-exec duplicate of a checked descriptor, at a high number, or -1. */
int d9__file_dup(const struct d9__file *f);
/* A directory the agent scans, marked the agent's and checked to be the directory named (as
 * d9__file_take_here); a link is followed only with `follow` (the configured trace directory,
 * which is a worker's /proc/self/fd/N after a privilege drop; paths.c refuses a link the user
 * names); *st (if any) gets its stat. 0 or -errno. Read with d9__dir_next, closed with d9__file_close. A call
 * relative to f->fd (fstatat, unlinkat) goes inside d9__file_enter/leave: the number is then
 * still the directory. */
struct stat;
int d9__dir_open(struct d9__file *f, int dirfd, const char *name, int follow, struct stat *st);
/* One scan's read state (getdents64's buffer), zeroed before the first d9__dir_next. */
struct d9__dir_read {
	unsigned pos, len;
	int err; /* after NULL: 0 at the end, else why the scan was cut short (-errno) */
	uint64_t buf[256];
};
/* The next entry's name (neither . nor ..; valid until the next call), or NULL at the end, on
 * an error, or once the number is no longer the directory (the program took it): r->err says
 * which. */
const char *d9__dir_next(struct d9__file *f, struct d9__dir_read *r);
/* Reads a small file (/proc, /sys) whole, cap - 1 bytes at most, NUL-terminated, on a descriptor
 * of the agent's (checked to be the file named, closed as the agent's) on any thread. Returns
 * the bytes read, 0 on any failure; errno kept. */
size_t d9__file_read_small(const char *path, char *buf, size_t cap);
int d9__seccomp_filtered(void); /* files.c: the calling thread is under a seccomp filter */
/* files.c: the process started under a seccomp filter (a container's, a systemd unit's
 * SystemCallFilter=, one installed before an exec): read once at the agent's load
 * (d9__seccomp_at_start). Its action for a call it does not list may be to kill the process,
 * so the agent leaves out the calls such filters commonly leave out (systemd's @resources and
 * @debug groups: setpriority, perf_event_open; agent/DESIGN.md, "Seccomp filters") */
extern D9_HIDDEN int d9__filter_inherited;
void d9__seccomp_at_start(void);
/* Under an inherited filter, at load (after the configuration): each call the agent may make
 * that such filters often kill at (setpriority, perf_event_open, mincore) is made once in a
 * child process (files.c, probe). d9__call_survives(nr): 1 without a filter, else that call's
 * verdict (0 for a call not tried). */
void d9__seccomp_probe(void);
int d9__call_survives(long nr);
/* record.c: the calling thread records nothing from now on (its chunk to the writer, out of the
 * registry, busy); d9__thread_unquit: it may again (registered at its next event) */
void d9__thread_quit(void);
void d9__thread_unquit(void);
/* lifecycle.c, on the writer's periodic pass: a thread's seccomp filter that came in since is
 * said in the trace (a RecorderState); 1 when it was */
int d9__seccomp_defs(void);
/* d9__spawn_blocked's argument to an agent thread (d9__agent_thread): what its creator has of
 * its own, and the creator's wait until the thread has its own too (d9__spawn_ready). Shared by
 * the two (refs), freed by the last: a creator that stops waiting leaves it to the thread. */
struct d9__spawn {
	uint8_t fd_private, fs_private;
	int ready; /* a futex word: 1 once the thread has its own table and root */
	int refs;
};
void d9__spawn_ready(struct d9__spawn *sp); /* lifecycle.c */
/* compress.c: the compressor's temporary file, announced for the exit path (d9__tmp_abandon)
 * from its creation until d9__tmp_done. d9__tmp_create makes it (O_EXCL), unless the exit path
 * has already given the compressor up (-ECANCELED). */
int d9__tmp_create(struct d9__file *out, const char *path);
void d9__tmp_done(void);
/* Exit path, the compressor given up on (compress_abort set before): waits until deadline at
 * most for a creation under way, then removes the file (async-signal-safe). */
void d9__tmp_abandon(uint64_t deadline);
/* An unpredictable temporary name: <base><tag><pid>.<random>. */
void d9__tmp_name(char *out, size_t cap, const char *base, const char *tag);

/* flight.c: the flight recorder (D9_MODE=flight; DESIGN.md, "Flight recorder"). Writer thread
 * only, but for the signal handler. */
/* Checks b's triggers; keeps it in the window's ring (1) or leaves it to the writer (0). */
int d9__flight_keep(struct d9__block *b);
/* 1 when the writer may write and open segments: continuous mode, or a dump runs. */
int d9__flight_writing(void);
/* The writer's pass (periodic: a flush interval passed): signal and file requests, the window.
 * Returns 1 when the running dump is due to end (the writer collects, writes and seals, then
 * calls d9__flight_ended). */
int d9__flight_pass(int periodic);
/* How long until the running dump is due to end (0: due now), UINT64_MAX when none runs: the
 * writer's sleep ends then. */
uint64_t d9__flight_due_in_ns(void);
void d9__flight_ended(const char *ended); /* "after" or "exit": writes the manifest */
/* Events dropped (their count) that D9_TRIGGER_DROPS counts. */
void d9__flight_drops(uint64_t count, uint32_t tid, uint32_t worker);
void d9__flight_child(void);
void d9__flight_signal_install(void); /* D9_DUMP_SIGNAL, unless the host handles it */
/* writer.c: writes one chunk now (continuous mode, or a dump) and gives its block back to the
 * pool (d9__write_chunk: keeps it; for flight.c's packed copies), and counts a thread's events as
 * dropped (D9_DROP_BUFFERS_FULL) for the next Dropped records written. */
void d9__write_block(struct d9__block *b);
void d9__write_chunk(struct d9__block *b);
void d9__writer_count_drop(uint32_t tid, uint32_t worker, uint64_t count);

/* A file the agent finished: a segment once compressed (.bin.gz; .bin with D9_COMPRESS=0), or a
 * flight dump's manifest. is_dump: the file belongs to a flight dump. Called by the compressor
 * (or the writer when there is nothing to compress or symbolize) and by flight.c; implemented by
 * the uploader (S3), absent otherwise (weak: callers check it). Must not block for long. */
void d9__sealed_hook(const char *path, int is_dump) __attribute__((weak));
/* s3.c: upload to S3 (DESIGN.md, "S3 upload"); d9__sealed_hook (above) queues a final file. */
/* A segment sealed at path, final only after the compressor: waits for d9__sealed_hook. */
void d9__s3_pending(const char *path);
/* The budget deleted path (a .bin or .bin.gz): no longer waiting for upload (counted). */
void d9__s3_evicted(const char *path);
/* This process's running totals for the trailer: uploaded, their bytes, failures, evicted. */
void d9__s3_counts(uint64_t out[4]);
/* Whether S3 upload is configured (weak: absent without s3.c): D9_COMPRESS=auto then compresses
 * every segment, so that the uploads are gzipped. */
int d9__s3_configured(void) __attribute__((weak));

/* lifecycle.c */
int d9__start(void); /* lazy start on the first event; 0 when running */
uint64_t d9__now_ticks(void);

#endif
