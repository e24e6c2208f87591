/* d9-format.h: the d9 trace format v1, shared by the agent (encoder) and the analyzer (decoder).
 * FORMAT.md beside this file is the contract, with byte tables; this header mirrors it. Any change
 * here that changes bytes on disk changes FORMAT.md in the same commit.
 * The encoder half is hot-path code: no allocation, no locks, no syscalls, caller-owned buffers.
 * The decoder half treats every input byte as hostile. */
#ifndef D9_FORMAT_H
#define D9_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The format API is internal to each binary: libd9agent.so exports only its interposers and the
 * public d9_ API, so it is not exported by default. */
#ifndef D9_EXPORT
#define D9_EXPORT
#endif

/* ---- Versions and fixed sizes (on-disk) ---------------------------------------------------- */
#define D9_MAGIC "\x89" "D9T\r\n\x1a\n" /* 8 bytes, PNG-style: catches text-mode mangling */
#define D9_MAGIC_LEN 8
#define D9_FORMAT_MAJOR 1
#define D9_FORMAT_MINOR 3 /* 1.1: the Privileges definition; 1.2: CustomSchema and RecorderState
			    * definitions, CustomEvent, RequestBegin/End (16, 17), Mark and Value (18, 19);
			    * 1.3: Park's timeout_us_delta, UnparkStats (20) */
#define D9_PREFIX_LEN 16 /* magic, u16 major, u16 minor, u32 flags */
#define D9_CHUNK_HDR_LEN 8 /* "D9" sync, u8 type, u8 head check, u32 payload length */
#define D9_CHUNK_CRC_LEN 4
#define D9_CHUNK_OVERHEAD (D9_CHUNK_HDR_LEN + D9_CHUNK_CRC_LEN)
#define D9_CHUNK_MAX_PAYLOAD (16u << 20) /* a larger length field is corruption */
#define D9_SYNC0 0x44 /* 'D' */
#define D9_SYNC1 0x39 /* '9' */
#define D9_EVENTS_HDR_LEN 24 /* u32 tid, u32 worker, u64 base time, u32 count, u32 flags */

/* Errors: 0 or a negative errno, or one of these (below -4095, so never an errno). */
enum {
	D9_ENOTTRACE = -5000, /* no d9 magic: not a trace file */
	D9_EVERSION = -5001, /* a major version this reader does not know */
	D9_ETRUNC = -5002, /* input ends inside a structure */
	D9_ECORRUPT = -5003, /* bad sync, CRC, length or value */
	D9_ENOHEADER = -5004, /* the first chunk is not a usable header */
};
D9_EXPORT const char *d9_strerror(int err);

/* ---- Chunk types (on-disk) ---------------------------------------------------------------- */
enum d9_chunk_type {
	D9_CHUNK_HEADER = 1, /* segment header; always the first chunk */
	D9_CHUNK_SCHEMA = 2, /* event type descriptions */
	D9_CHUNK_DEFS = 3, /* definition records (strings, locations, stacks, ...) */
	D9_CHUNK_EVENTS = 4, /* one thread's events */
	D9_CHUNK_TRAILER = 5, /* totals; present when the segment was sealed */
};

/* ---- Event types (on-disk codes; names are the contract across C, JSON and JS) ------------- */
enum d9_event_type {
	D9_EV_POLL_START = 1,
	D9_EV_POLL_END = 2,
	D9_EV_PARK = 3,
	D9_EV_UNPARK = 4,
	D9_EV_WAKE = 5,
	D9_EV_SPAWN = 6,
	D9_EV_COROUTINE_EXIT = 7,
	D9_EV_QUEUE_SAMPLE = 8,
	D9_EV_BLOCKING_CALL = 9,
	D9_EV_CPU_SAMPLE = 10,
	D9_EV_DROPPED = 11,
	D9_EV_CUSTOM = 12, /* reserved: CustomEvent, payload described by a CustomSchema def */
	D9_EV_ZERO_TIMEOUT_WAITS = 13, /* waits with a zero timeout since the thread's last Park */
	/* 14: SchedDelay, described by the writer's SCHEMA chunk, not built in (positional fields
	 * D9_F_SD_*; FORMAT.md, "SchedDelay"); 15 and up are written in the extended form */
	D9_EV_SCHED_DELAY = 14,
	/* 16, 17: RequestBegin, RequestEnd, described by the writer's SCHEMA chunk (positional
	 * fields D9_F_RB_*, D9_F_RE_*; FORMAT.md, "Requests") */
	D9_EV_REQUEST_BEGIN = 16,
	D9_EV_REQUEST_END = 17,
	D9_EV_KNOWN_MAX = 13,
	D9_EV_EXTENDED = 15, /* in the first byte: the real type follows as a varint */
};
#define D9_EV_TYPE_LIMIT 256 /* decoders keep schemas for codes below this */
#define D9_EV_MAX_FIELDS 8 /* fields a decoder keeps per event; more are skipped */
/* First byte of an event: bits 0-3 type (15: extended), bits 4-6 delta & 7, bit 7 "more": then
 * varint(delta >> 3) follows. */
#define D9_EV_MORE 0x80
#define D9_EV_TYPE_MASK 15
#define D9_EV_DELTA_SHIFT 4

/* Field encodings used by schemas (on-disk, one ASCII byte each). */
#define D9_FIELD_U 'u' /* unsigned LEB128 */
#define D9_FIELD_I 'i' /* signed, zigzag LEB128 */
#define D9_FIELD_C 'c' /* coroutine id: 0 none; 1-4 the chunk's 1st-4th most recent coroutine;
			 * else 5 + zigzag(id - most recent) (FORMAT.md, "Coroutine fields") */
#define D9_MRU 4
#define D9_FIELD_B 'b' /* bytes: LEB128 length + bytes */

/* Field slots of the known event types: a decoder matches schema fields to these by name, so
 * writers may add, drop or reorder fields compatibly (FORMAT.md, "Evolution"). */
enum { D9_F_POLL_COROUTINE = 0, D9_F_POLL_LOCATION = 1 };
enum { D9_F_PARK_CALL = 0, D9_F_PARK_TIMEOUT_US = 1 };
enum { D9_F_UNPARK_READY = 0, D9_F_UNPARK_CPU_NS = 1, D9_F_UNPARK_SCHED_WAIT_NS = 2 };
/* A decoded value that was not recorded (Unpark cpu_ns and sched_wait_ns): never a real count. */
#define D9_UNKNOWN UINT64_MAX
/* Unpark fields `cpu_ns+1` and `sched_wait_ns+1` (value plus one, 0 = unknown): decoders fill
 * the two slots above from them. */
#define D9_SLOT_CPU_NS_P1 (-3)
#define D9_SLOT_SCHED_WAIT_NS_P1 (-4)
/* Park field `timeout_us_delta`: the timeout minus the chunk's previous Park's (-1 before the
 * first): decoders fill D9_F_PARK_TIMEOUT_US from it. */
#define D9_SLOT_TIMEOUT_DELTA (-6)
/* UnparkStats (code 20, schema-described, FORMAT.md "Unpark statistics"): `cpu_ns+1` and
 * `sched_wait_ns+1` of the Unpark just before it. Not an event of its own: counted with its
 * Unpark, and the reference decoder merges it into that Unpark. On disk it begins `0F 14`. */
enum { D9_EV_UNPARK_STATS = 20 };
#define D9_UNPARK_STATS_NAME "UnparkStats"
enum { D9_F_WAKE_WOKEN = 0, D9_F_WAKE_WAKER = 1, D9_F_WAKE_KIND = 2, D9_F_WAKE_OBJECT = 3 };
/* On disk Wake packs kind and object into one field, kind_object = zigzag(object) << 3 | kind;
 * decoders split it into the two slots above. */
#define D9_SLOT_KIND_OBJECT (-2)
enum { D9_F_SPAWN_COROUTINE = 0, D9_F_SPAWN_PARENT = 1, D9_F_SPAWN_LOCATION = 2 };
enum { D9_F_EXIT_COROUTINE = 0 };
enum { D9_F_QUEUE_RUNNABLE = 0 };
enum { D9_F_BLOCK_COROUTINE = 0, D9_F_BLOCK_CALL = 1, D9_F_BLOCK_FD_KIND = 2,
	D9_F_BLOCK_DURATION_NS = 3, D9_F_BLOCK_STACK = 4 };
enum { D9_F_CPU_COROUTINE = 0, D9_F_CPU_SOURCE = 1, D9_F_CPU_STACK = 2, D9_F_CPU_UNWIND = 3,
	D9_F_CPU_WEIGHT_NS = 4 };
/* CpuSample field `weight_ns+1` (the time the sample stands for, plus one; 0 = unknown): decoders
 * fill D9_F_CPU_WEIGHT_NS from it, D9_UNKNOWN when absent or unknown. */
#define D9_SLOT_WEIGHT_NS_P1 (-5)
enum { D9_F_DROP_COUNT = 0, D9_F_DROP_REASON = 1 };
enum { D9_F_CUSTOM_SCHEMA = 0, D9_F_CUSTOM_DATA = 1 };
enum { D9_F_ZTW_COUNT = 0 };
/* SchedDelay's fields, by position (a schema-described type) */
enum { D9_F_SD_COROUTINE = 0, D9_F_SD_CALL = 1, D9_F_SD_FD_KIND = 2, D9_F_SD_DURATION_NS = 3,
	D9_F_SD_SCHED_WAIT_NS = 4 };
#define D9_SCHED_DELAY_NAME "SchedDelay"
/* RequestBegin's and RequestEnd's fields, by position (schema-described types, FORMAT.md) */
enum { D9_F_RB_ID = 0, D9_F_RB_FD = 1, D9_F_RB_COROUTINE = 2, D9_F_RB_SOURCE = 3,
	D9_F_RB_PREVIEW = 4 };
enum { D9_F_RE_ID = 0, D9_F_RE_SOURCE = 1, D9_F_RE_BYTES_IN = 2, D9_F_RE_BYTES_OUT = 3,
	D9_F_RE_FLAGS = 4, D9_F_RE_COUNT = 5, D9_F_RE_STATUS = 6, D9_F_RE_TAIL_NS = 7 };
#define D9_REQUEST_BEGIN_NAME "RequestBegin"
#define D9_REQUEST_END_NAME "RequestEnd"
enum d9_request_source { D9_REQ_SRC_ZERO_CODE = 0, D9_REQ_SRC_API = 1 };
/* RequestEnd.flags */
#define D9_REQ_AMBIGUOUS 1u /* its bytes held more or less than one request: boundaries unknown */
#define D9_REQ_CLOSED 2u /* ended by the close of its connection */
#define D9_REQ_TURN_END 4u /* ended at the end of the loop turn that wrote its response */
#define D9_REQ_HTTP 8u /* the connection speaks HTTP/1.x */
#define D9_REQ_RESP 16u /* the connection speaks RESP (redis) */
#define D9_REQ_NO_RESPONSE 32u /* ended with nothing written */
#define D9_REQ_UNFINISHED 64u /* still open when the agent stopped recording it */
#define D9_REQ_UNTRACKED 128u /* id 0: a connection the agent could not track (table full) */

/* ---- Application API events (include/d9.h; FORMAT.md "Application events") -------------------
 * Mark (18) and Value (19) are schema-described like SchedDelay (D9_SCHEMA_API), positional;
 * CustomEvent (12) is built in: {schema, data}, data described by a CustomSchema definition. */
enum { D9_EV_MARK = 18, D9_EV_VALUE = 19 };
#define D9_MARK_NAME "Mark"
#define D9_VALUE_NAME "Value"
enum { D9_F_MARK_NAME = 0 }; /* String id */
enum { D9_F_VALUE_NAME = 0, D9_F_VALUE_KIND = 1, D9_F_VALUE_VALUE = 2 };
enum d9_value_kind {
	D9_VALUE_GAUGE = 0, /* value: the gauge's new value (i64) */
	D9_VALUE_COUNTER = 1, /* value: the counter's total after the add (i64, the process's sum) */
	D9_VALUE_GAUGE_F64 = 2, /* value: the IEEE 754 bits of a double, as an i64 */
	D9_VALUE_KIND_MAX = 2,
};
/* CustomSchema field types (one ASCII byte each, on-disk) */
enum d9_custom_type { D9_CT_U64 = 'u', D9_CT_I64 = 'i', D9_CT_F64 = 'f', D9_CT_STR = 's',
	D9_CT_BYTES = 'b' };
#define D9_CUSTOM_MAX_FIELDS 32 /* fields of one CustomSchema; more is damage */
#define D9_CUSTOM_NAME_MAX 64 /* bytes of a field name */
#define D9_CUSTOM_DATA_MAX 4096 /* most payload bytes one CustomEvent can have */
struct d9_custom_field {
	uint8_t type; /* enum d9_custom_type */
	uint8_t name_len;
	const char *name; /* not NUL-terminated; points into the definition */
	uint32_t max_len; /* 's', 'b': the longest value the writer records (the agent's, not on
			   * disk: decoded schemas have 0, any value up to D9_CUSTOM_DATA_MAX) */
};
struct d9_custom_schema {
	uint32_t nfields;
	struct d9_custom_field f[D9_CUSTOM_MAX_FIELDS];
};
/* One decoded field value of a CustomEvent. */
struct d9_custom_value {
	uint8_t type;
	uint64_t u; /* 'u'; 'i' as int64 bits; 'f' as the double's bits */
	const uint8_t *p; /* 's', 'b': the bytes (into the event's data), len of them */
	size_t len;
};

/* Enumerated field values (on-disk). */
enum d9_wait_call {
	D9_CALL_OTHER = 0, D9_CALL_EPOLL_WAIT = 1, D9_CALL_EPOLL_PWAIT = 2, D9_CALL_EPOLL_PWAIT2 = 3,
	D9_CALL_POLL = 4, D9_CALL_PPOLL = 5, D9_CALL_SELECT = 6, D9_CALL_PSELECT = 7,
	D9_CALL_MAX = 7,
};
enum d9_wake_kind {
	D9_WAKE_OTHER = 0, D9_WAKE_FD = 1, D9_WAKE_TIMER = 2, D9_WAKE_COND = 3, D9_WAKE_MUTEX = 4,
	D9_WAKE_JOIN = 5, D9_WAKE_INTERRUPT = 6, D9_WAKE_SPAWN = 7,
	D9_WAKE_MAX = 7,
};
enum d9_fd_kind {
	D9_FD_NONE = 0, D9_FD_FILE = 1, D9_FD_SOCKET = 2, D9_FD_PIPE = 3, D9_FD_CHAR = 4, D9_FD_OTHER = 5,
	D9_FD_MAX = 5,
};
enum d9_cpu_source { D9_CPU_ON = 0, D9_CPU_OFF = 1, D9_CPU_SOURCE_MAX = 1 };
/* CpuSample.unwind (only when the schema lists it, D9_SCHEMA_CPU_UNWIND): the unwinder that made
 * the sample's stack in bits 0-2, flags above. 0 = not recorded (older writers). */
enum d9_unwinder {
	D9_UNWIND_NONE = 0, /* not recorded */
	D9_UNWIND_FP = 1, /* the kernel's frame-pointer chain, validated by the agent */
	D9_UNWIND_DWARF = 2, /* the agent's DWARF (.eh_frame) unwind of the copied stack */
	D9_UNWIND_LIBUNWIND = 3, /* libunwind in the signal handler (ctimer mode) */
	D9_UNWIND_IP = 4, /* only the sampled instruction: no unwinder could go further */
	D9_UNWINDER_MAX = 4,
};
#define D9_UNWINDER_MASK 7u
#define D9_UNWIND_TRUNCATED 8u /* the stack stops short of the thread start / coroutine entry */
#define D9_UNWIND_FP_REJECTED 16u /* the frame-pointer chain failed validation (not used as is) */
enum d9_drop_reason {
	D9_DROP_OTHER = 0,
	D9_DROP_BUFFERS_FULL = 1, /* memory cap reached: the writer fell behind */
	D9_DROP_WRITE_ERROR = 2, /* a chunk could not be written (disk full, I/O error) */
	D9_DROP_SAMPLES_LOST = 3, /* profiler samples lost (perf ring overflow) */
	D9_DROP_SEGMENT_DELETED = 4, /* unused by v1 writers; reserved */
	D9_DROP_API = 5, /* an application API call (include/d9.h) the agent rejected: bad arguments */
	D9_DROP_REASON_MAX = 5,
};
enum d9_thread_role { D9_ROLE_THREAD = 0, D9_ROLE_WORKER = 1, D9_ROLE_AGENT = 2, D9_ROLE_MAX = 2 };
enum d9_clock_source { D9_CLOCK_MONOTONIC = 0, D9_CLOCK_TSC = 1 };
#define D9_COROUTINE_SCHEDULER 1u /* Coroutine def flag: the runtime's idle/scheduler coroutine */
#define D9_TRAILER_RECOVERED 1u /* trailer flag: sealed by recovery after a crash */
/* trailer flag: sealed because its process ended (exit, _exit, exec) at end_time: what its threads
 * had open then (a loop turn, a park, a poll) lasted until that time */
#define D9_TRAILER_ENDED 2u
/* trailer flag: a flight dump's last segment, sealed when its window ended at end_time: the
 * threads' parks open then lasted at least until that time (their other pairs go on, unseen) */
#define D9_TRAILER_WINDOW 4u
/* Privileges def flags: what the drop took away from the recording */
#define D9_PRIV_KERNEL_SAMPLES_LOST 1u /* perf samples of threads profiled after it: user space only */
#define D9_PRIV_PERF_DENIED 2u /* perf_event_open denied after it: no perf samples for new threads */
/* RecorderState def (on-disk): which part of the recording was narrowed, and how */
enum d9_rec_feature {
	D9_REC_CPU_PROFILE = 1, /* CPU samples (perf cpu-clock, or the ctimer that replaces it) */
	D9_REC_SCHED_EVENTS = 2, /* off-CPU samples (D9_SCHED_EVENTS, perf context-switches) */
	D9_REC_PERF_FDS = 3, /* perf descriptors: capped by RLIMIT_NOFILE, or EMFILE/ENFILE */
	D9_REC_PERF_RING = 4, /* a perf sample ring could not be mapped (perf_event_mlock_kb) */
	D9_REC_BLOCKING_STACKS = 5, /* stacks of BlockingCalls */
	D9_REC_UNWIND = 6, /* DWARF unwinding (libdw) */
	D9_REC_SYMBOLS = 7, /* Symbol records of sealed segments (libdw) */
	D9_REC_MAPS = 8, /* /proc/self/maps: what validates frame-pointer stacks */
	D9_REC_STACK_COPY = 9, /* ctimer samples copy their stack (process_vm_readv) */
	D9_REC_THREADS = 10, /* threads recording: some stopped (a seccomp filter they installed) */
	D9_REC_EXEC = 11, /* a program this process started runs in secure execution, untraced */
	D9_REC_CHROOT = 12, /* tracing stopped at the program's chroot (D9_CHROOT=stop) */
	D9_REC_FEATURE_MAX = 12,
};
enum d9_rec_state {
	D9_REC_OFF = 1, /* the feature records nothing from now on */
	D9_REC_FALLBACK = 2, /* recorded by a weaker means (ctimer instead of perf) */
	D9_REC_LIMITED = 3, /* recorded for some threads or with less detail */
	D9_REC_STATE_MAX = 3,
};

/* ---- Definition record kinds (on-disk) ---------------------------------------------------- */
enum d9_def_kind {
	D9_DEF_STRING = 1,
	D9_DEF_LOCATION = 2, /* SpawnLocation */
	D9_DEF_STACK = 3,
	D9_DEF_MODULE = 4,
	D9_DEF_SYMBOL = 5,
	D9_DEF_THREAD = 6,
	D9_DEF_CLOCK_SYNC = 7,
	D9_DEF_COROUTINE = 8,
	D9_DEF_CUSTOM_SCHEMA = 9, /* reserved for custom events */
	D9_DEF_PRIVILEGES = 10, /* the process gave up privileges (format 1.1) */
	D9_DEF_RECORDER = 11, /* RecorderState: the recorder was narrowed */
	D9_DEF_KNOWN_MAX = 11,
};
#define D9_STACK_MAX_FRAMES 128

/* ---- Decoded structures -------------------------------------------------------------------- */
struct d9_header {
	uint16_t major, minor;
	uint32_t pid, ppid;
	uint32_t segment_seq; /* number of this segment in its process series, from 0 */
	uint8_t clock_source; /* enum d9_clock_source */
	uint8_t time_shift; /* event time unit = 2^time_shift clock ticks */
	uint64_t ticks_per_sec; /* 1e9 for CLOCK_MONOTONIC, calibrated for TSC */
	uint64_t anchor_ticks, anchor_mono_ns, anchor_realtime_ns; /* one instant, three clocks */
	uint64_t start_realtime_ns;
	const char *writer; /* decoders: NUL-terminated copies owned by the reader */
	const char *process; /* comm */
	const char *cmdline; /* arguments joined by ' ' (NULs on disk) */
	size_t cmdline_len;
	const char *hostname;
	const char *boot_id;
};

struct d9_def {
	uint8_t kind; /* enum d9_def_kind; unknown kinds are skipped by d9_defs_next */
	uint64_t id; /* String, Location, Stack, Module, Coroutine, CustomSchema; tid for Thread */
	union {
		struct { const char *s; size_t len; } string; /* not NUL-terminated */
		struct { uint64_t function_addr, callsite_addr, module, name; } location; /* name: string id or 0 */
		struct { uint32_t nframes; uint64_t frames[D9_STACK_MAX_FRAMES]; } stack; /* innermost first */
		struct { uint64_t path, start, end, offset; const uint8_t *build_id; size_t build_id_len; } module;
		struct { uint64_t start, len, function, file, line, inline_depth; } symbol; /* strings by id */
		struct { uint64_t name, worker, role; } thread; /* worker 0: not a worker */
		struct { uint64_t ticks, mono_ns, realtime_ns; } clock;
		struct { uint64_t parent, location, flags; } coroutine;
		struct { uint64_t name; const uint8_t *fields; size_t fields_len; } custom_schema;
		struct { uint64_t from_uid, to_uid, flags; } privileges; /* flags: D9_PRIV_* */
		struct { uint64_t feature, state, err, text; } recorder; /* D9_REC_*; err: errno or 0; text: string id */
	} u;
};

struct d9_event {
	uint32_t type; /* enum d9_event_type, or any code described by the segment's schema */
	uint32_t nfields; /* fields present in the schema (capped at D9_EV_MAX_FIELDS) */
	uint64_t time; /* absolute, in event time units (see d9_header.time_shift) */
	uint64_t f[D9_EV_MAX_FIELDS]; /* known types: by D9_F_* slot; 'i' fields as int64 bits */
	const uint8_t *data; /* the first 'b' field, if any (f[slot] holds its length) */
	uint32_t data_len;
	const uint8_t *fdata[D9_EV_MAX_FIELDS]; /* every 'b' field's bytes, by slot */
	/* their lengths (valid where fdata is set: a later field of the same slot may overwrite
	 * f[slot], as hostile schemas do) */
	uint32_t flen[D9_EV_MAX_FIELDS];
	uint8_t stats_merged; /* Unparks only (not set for others): the statistics came from an
			       * UnparkStats (format 1.3) */
	size_t offset; /* offset of the event in the file, for messages */
};

struct d9_chunk {
	uint8_t type;
	uint8_t flags; /* always 0 in v1 (byte 3 of the head is its check byte) */
	uint32_t len; /* payload length */
	const uint8_t *payload; /* valid until the next d9_reader_next */
	uint64_t offset; /* file offset of the chunk's first byte */
	/* EVENTS chunks only: */
	uint32_t tid, worker, count, ev_flags;
	uint64_t base_time;
};

struct d9_schema_field { uint8_t enc; int8_t slot; char name[30]; };
struct d9_schema_type {
	uint8_t present, nfields;
	char name[30];
	struct d9_schema_field fields[16];
};

struct d9_trailer {
	uint64_t events, chunks, first_time, last_time, dropped_events, dropped_samples;
	uint32_t flags;
	uint32_t ntypes;
	uint64_t type_counts[D9_EV_KNOWN_MAX + 1]; /* indexed by type code */
	/* optional, after the pairs: the trace directory's running count of segments (and their
	 * bytes) deleted by the directory budget, as the writer last saw it; 0 when absent */
	uint64_t budget_deleted_segments, budget_deleted_bytes;
	/* optional, after those: the writing process's running counts of S3 uploads (agent/s3.c):
	 * segments stored and their bytes, failed attempts, segments given up before upload */
	uint64_t s3_uploaded, s3_uploaded_bytes, s3_failures, s3_evicted;
	/* optional, after those: with D9_TRAILER_ENDED, the time (units) its process ended */
	uint64_t end_time;
};

/* Problems the reader met and stepped over; the reader continues after each. */
enum d9_problem_kind { D9_PROB_TRUNCATED = 1, D9_PROB_CORRUPT = 2, D9_PROB_UNKNOWN_CHUNK = 3,
	D9_PROB_UNKNOWN_EVENT = 4, D9_PROB_UNKNOWN_DEF = 5, D9_PROB_BAD_EVENT = 6 };
typedef void d9_problem_fn(void *ctx, int kind, uint64_t offset, const char *msg);

struct d9_reader_stats {
	uint64_t chunks, corrupt_chunks, unknown_chunks, skipped_bytes, bad_events;
	uint64_t bad_defs; /* malformed definition records (skipped) */
	uint64_t data_start; /* offset just after the header chunk */
	int truncated; /* input ended inside a chunk */
	uint64_t truncated_at; /* offset of the incomplete chunk */
	int sealed; /* a trailer was read */
};

struct d9_reader;

/* Opens a segment: .bin, .active or gzip (.bin.gz) files; reads the prefix and the header chunk.
 * Returns 0 or D9_ENOTTRACE, D9_EVERSION, D9_ENOHEADER, D9_ETRUNC, -errno. */
D9_EXPORT int d9_reader_open_file(struct d9_reader **out, const char *path);
/* Same over an open descriptor, read from its current offset; the reader owns fd (closed by
 * d9_reader_close, or before an error return). */
D9_EXPORT int d9_reader_open_fd(struct d9_reader **out, int fd);
/* Same over a caller's buffer, which must outlive the reader. */
D9_EXPORT int d9_reader_open_mem(struct d9_reader **out, const void *buf, size_t len);
D9_EXPORT void d9_reader_close(struct d9_reader *r);
D9_EXPORT void d9_reader_on_problem(struct d9_reader *r, d9_problem_fn *fn, void *ctx);
D9_EXPORT const struct d9_header *d9_reader_header(const struct d9_reader *r);
D9_EXPORT const struct d9_reader_stats *d9_reader_stats(const struct d9_reader *r);
/* The schema in force for type code t (the segment's, else the built-in v1 schema), or NULL. */
D9_EXPORT const struct d9_schema_type *d9_reader_schema(const struct d9_reader *r, uint32_t t);
/* Next valid chunk after the header. Returns 1 with *c filled, 0 at the end of the input, or
 * -errno on a read error. Corrupt, truncated and unknown chunks are reported through the problem
 * callback and stats and stepped over; SCHEMA chunks are applied before being returned. */
D9_EXPORT int d9_reader_next(struct d9_reader *r, struct d9_chunk *c);

/* Iterates the records of a DEFS chunk: 1 with *d filled, 0 at the end, D9_ECORRUPT (with the
 * problem reported) when a record does not fit; unknown kinds are skipped. */
struct d9_defs_iter { struct d9_reader *r; const uint8_t *p, *end; uint64_t base_off; const uint8_t *start; };
D9_EXPORT void d9_defs_init(struct d9_defs_iter *it, struct d9_reader *r, const struct d9_chunk *c);
D9_EXPORT int d9_defs_next(struct d9_defs_iter *it, struct d9_def *d);

/* Iterates the events of an EVENTS chunk: 1 with *ev filled, 0 at the end, D9_ECORRUPT when the
 * rest of the chunk cannot be decoded (reported once; the iterator then stays at the end). */
struct d9_events_iter {
	struct d9_reader *r;
	const uint8_t *p, *end, *start;
	uint64_t base_off, time;
	uint64_t mru[D9_MRU]; /* most recent coroutine ids of the chunk, [0] newest */
	uint32_t left;
	int64_t park_timeout; /* the chunk's previous Park's timeout_us (-1 before the first) */
};
D9_EXPORT void d9_events_init(struct d9_events_iter *it, struct d9_reader *r, const struct d9_chunk *c);
D9_EXPORT int d9_events_next(struct d9_events_iter *it, struct d9_event *ev);
/* A reader's user found an event damaged beyond what the schema checks (a CustomEvent payload
 * that does not match its CustomSchema): counted in bad_events and reported like the reader's
 * own (problem D9_PROB_BAD_EVENT at offset). */
D9_EXPORT void d9_reader_bad_event(struct d9_reader *r, uint64_t offset, const char *msg);

D9_EXPORT int d9_trailer_decode(const struct d9_chunk *c, struct d9_trailer *t);

/* Event time (units) to CLOCK_MONOTONIC / CLOCK_REALTIME nanoseconds, using the header anchor. */
D9_EXPORT int64_t d9_time_to_mono_ns(const struct d9_header *h, uint64_t time);
D9_EXPORT int64_t d9_time_to_realtime_ns(const struct d9_header *h, uint64_t time);

D9_EXPORT const char *d9_event_name(uint32_t type); /* built-in names; NULL when unknown */
D9_EXPORT const char *d9_def_name(uint32_t kind);
D9_EXPORT const char *d9_wake_kind_name(uint64_t kind);
D9_EXPORT const char *d9_wait_call_name(uint64_t call);
D9_EXPORT const char *d9_drop_reason_name(uint64_t reason);
D9_EXPORT const char *d9_unwinder_name(uint64_t unwind); /* of the low 3 bits */
D9_EXPORT const char *d9_fd_kind_name(uint64_t kind);
D9_EXPORT const char *d9_value_kind_name(uint64_t kind);

/* Parses the field description of a CustomSchema definition (the body after id and name: type
 * and name of each field, to the end). Returns 0, or D9_ECORRUPT when a field does not fit, there
 * are more than D9_CUSTOM_MAX_FIELDS, a type is unknown or a name empty or longer than
 * D9_CUSTOM_NAME_MAX. Names point into p. */
D9_EXPORT int d9_custom_schema_parse(const uint8_t *p, size_t len, struct d9_custom_schema *s);
/* Largest payload a CustomEvent of schema s can have (bytes). */
D9_EXPORT size_t d9_custom_max_data(const struct d9_custom_schema *s);
/* Decodes a CustomEvent payload against its schema into out[0 .. s->nfields). Returns 0, or
 * D9_ECORRUPT when a value does not fit, a string is longer than its bound (max_len, else
 * D9_CUSTOM_DATA_MAX), or bytes are left over. Never reads outside data[0 .. len). */
D9_EXPORT int d9_custom_decode(const struct d9_custom_schema *s, const uint8_t *data, size_t len,
	struct d9_custom_value *out);

/* ---- Encoding -------------------------------------------------------------------------------- */

/* A bounded writer with a sticky error (Redis rio style): every put checks room; once full it
 * writes nothing more and w->err is -ENOSPC. Used for headers, schemas, definitions, trailers. */
struct d9_wbuf { uint8_t *p, *end, *start; int err; };

static inline void d9_wbuf_init(struct d9_wbuf *w, void *buf, size_t cap)
{
	w->start = w->p = (uint8_t *)buf;
	w->end = w->p + cap;
	w->err = 0;
}

/* LEB128 varint into p; caller guarantees 10 bytes of room. Returns the new end. */
static inline uint8_t *d9_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline uint64_t d9_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t d9_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static inline void d9_store_le32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4); /* x86-64 and every target d9 builds for is little-endian (FORMAT.md) */
}

static inline void d9_store_le64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

D9_EXPORT void d9_wbuf_u(struct d9_wbuf *w, uint64_t v); /* varint */
D9_EXPORT void d9_wbuf_i(struct d9_wbuf *w, int64_t v); /* zigzag varint */
D9_EXPORT void d9_wbuf_raw(struct d9_wbuf *w, const void *p, size_t n);
D9_EXPORT void d9_wbuf_bytes(struct d9_wbuf *w, const void *p, size_t n); /* varint length + bytes */
D9_EXPORT void d9_wbuf_le16(struct d9_wbuf *w, uint16_t v);
D9_EXPORT void d9_wbuf_le32(struct d9_wbuf *w, uint32_t v);
D9_EXPORT void d9_wbuf_le64(struct d9_wbuf *w, uint64_t v);

/* The 16-byte file prefix. Returns bytes written or -ENOSPC. */
D9_EXPORT int d9_prefix_encode(void *buf, size_t cap);
/* Opens a chunk of type `type` at w->p (reserves its 8-byte head); returns its start. */
D9_EXPORT uint8_t *d9_chunk_open(struct d9_wbuf *w, uint8_t type);
/* Closes the chunk opened at `start`: writes its length and CRC. Returns 0 or w->err. */
D9_EXPORT int d9_chunk_close(struct d9_wbuf *w, uint8_t *start);
/* Fills the head check and CRC of a complete chunk whose head holds the right length (for chunks
 * built by d9_enc, whose CRC the agent computes off the hot path). */
D9_EXPORT void d9_chunk_fill_crc(uint8_t *chunk);

/* Whole chunks into w. Each returns 0 or -ENOSPC (then w holds a partial chunk: discard it). */
D9_EXPORT int d9_header_write(struct d9_wbuf *w, const struct d9_header *h);
#define D9_SCHEMA_UNPARK_STATS 1u /* Unpark carries cpu_ns and sched_wait_ns (exact values) */
/* Unpark carries `cpu_ns+1` and `sched_wait_ns+1`: the value plus one, 0 = unknown (no reading at
 * this Unpark). d9's writer uses this layout (FORMAT.md, "Unpark statistics"). */
#define D9_SCHEMA_UNPARK_INTERVAL 2u
/* The schema also lists SchedDelay (code 14) for d9_enc_sched_delay. */
#define D9_SCHEMA_SCHED_DELAY 4u
#define D9_SCHEMA_CPU_UNWIND 8u /* CpuSample carries unwind (enum d9_unwinder and flags) */
/* CpuSample also carries `weight_ns+1` (needs D9_SCHEMA_CPU_UNWIND): the time the sample stands for,
 * plus one, 0 = unknown: an on-CPU sample's sampling period (thread CPU time), an off-CPU
 * sample's time from the switch-out until its thread ran again. */
#define D9_SCHEMA_CPU_WEIGHT 16u
/* The schema also lists Mark (18) and Value (19): the application API (include/d9.h). */
#define D9_SCHEMA_API 64u
/* The schema also lists RequestBegin (16) and RequestEnd (17) for d9_enc_request_*. */
#define D9_SCHEMA_REQUESTS 32u
/* Format 1.3's compact waits (what the agent writes): Park lists `timeout_us_delta` instead of
 * `timeout_us`, Unpark lists `ready` only, and the schema lists UnparkStats (20), written after
 * an Unpark that has statistics. */
#define D9_SCHEMA_COMPACT_WAITS 128u
D9_EXPORT int d9_schema_write(struct d9_wbuf *w, unsigned flags);
D9_EXPORT int d9_trailer_write(struct d9_wbuf *w, const struct d9_trailer *t);

/* Definition records, appended to an open DEFS chunk (d9_chunk_open(w, D9_CHUNK_DEFS)).
 * Errors are sticky in w->err. */
D9_EXPORT void d9_def_string(struct d9_wbuf *w, uint64_t id, const char *s, size_t len);
D9_EXPORT void d9_def_location(struct d9_wbuf *w, uint64_t id, uint64_t function_addr,
	uint64_t callsite_addr, uint64_t module, uint64_t name);
D9_EXPORT void d9_def_stack(struct d9_wbuf *w, uint64_t id, const uint64_t *frames, uint32_t n);
D9_EXPORT void d9_def_module(struct d9_wbuf *w, uint64_t id, uint64_t path, uint64_t start,
	uint64_t end, uint64_t offset, const uint8_t *build_id, size_t build_id_len);
D9_EXPORT void d9_def_symbol(struct d9_wbuf *w, uint64_t start, uint64_t len, uint64_t function,
	uint64_t file, uint64_t line, uint64_t inline_depth);
D9_EXPORT void d9_def_thread(struct d9_wbuf *w, uint64_t tid, uint64_t name, uint64_t worker,
	uint64_t role);
D9_EXPORT void d9_def_privileges(struct d9_wbuf *w, uint64_t from_uid, uint64_t to_uid,
	uint64_t flags);
/* A RecorderState (feature: enum d9_rec_feature, state: enum d9_rec_state, err: a positive
 * errno or 0, text: a String id or 0). */
D9_EXPORT void d9_def_recorder(struct d9_wbuf *w, uint64_t feature, uint64_t state, uint64_t err,
	uint64_t text);
/* Names of a RecorderState's feature ("cpu_profile") and state ("fallback"); NULL if unknown. */
D9_EXPORT const char *d9_rec_feature_name(uint64_t feature);
D9_EXPORT const char *d9_rec_state_name(uint64_t state);
D9_EXPORT void d9_def_clock_sync(struct d9_wbuf *w, uint64_t ticks, uint64_t mono_ns,
	uint64_t realtime_ns);
D9_EXPORT void d9_def_coroutine(struct d9_wbuf *w, uint64_t id, uint64_t parent, uint64_t location,
	uint64_t flags);
/* A CustomSchema (id, name: a String id, then the fields of s). */
D9_EXPORT void d9_def_custom_schema(struct d9_wbuf *w, uint64_t id, uint64_t name,
	const struct d9_custom_schema *s);
/* Raw record of any kind (tests use it to write kinds this version does not know). */
D9_EXPORT void d9_def_raw(struct d9_wbuf *w, uint8_t kind, const void *body, size_t len);

/* Event encoder for one EVENTS chunk: the hot path. d9_enc_begin reserves the chunk head and the
 * events head in the caller's buffer; each d9_enc_* call appends one event (no checks beyond one
 * room test, no allocation); d9_enc_end fills the heads. Times are raw clock ticks: the encoder
 * shifts them to units and clamps a backwards step to 0 (FORMAT.md, "Events"). */
struct d9_enc {
	uint8_t *p, *end; /* write position; end already leaves D9_ENC_EVENT_MAX of slack */
	uint8_t *chunk; /* start of the chunk head */
	uint64_t last; /* time of the previous event, in units */
	uint64_t mru[D9_MRU]; /* most recent coroutine ids of the chunk, [0] newest (0: empty) */
	uint32_t count;
	uint32_t types[D9_EV_KNOWN_MAX + 1]; /* events of each built-in type (the trailer's counts):
					       * counted here, one add, instead of decoding again */
	uint8_t shift;
	uint8_t flags; /* D9_SCHEMA_* flags the segment's schema was written with */
	/* Park's timeout as last encoded (a loop waits with the same timeout again and again: its
	 * bytes are copied, not encoded again); kept across chunks, len 0: none yet. With
	 * D9_SCHEMA_COMPACT_WAITS park_prev is the chunk's previous Park's timeout (-1 at start). */
	uint8_t park_len;
	int64_t park_timeout;
	int64_t park_prev;
	uint8_t park_bytes[16];
};
#define D9_ENC_EVENT_MAX 96 /* most bytes one fixed-field event can take */
#define D9_ENC_MIN_BUF (D9_CHUNK_OVERHEAD + D9_EVENTS_HDR_LEN + D9_ENC_EVENT_MAX)

/* Starts a chunk in buf[0..cap). base_ticks is the time the first delta counts from (0 is
 * valid). Returns 0 or -ENOSPC when cap < D9_ENC_MIN_BUF. */
D9_EXPORT int d9_enc_begin(struct d9_enc *e, void *buf, size_t cap, uint32_t tid, uint32_t worker,
	uint64_t base_ticks, uint8_t shift, uint8_t flags);
/* Finishes the chunk (count and length; head check and CRC only when fill_crc). Returns the
 * chunk's size. */
D9_EXPORT size_t d9_enc_end(struct d9_enc *e, int fill_crc);

/* Time of the chunk's first event (its base time when it has none), read back from the bytes:
 * for trailers, off the hot path. */
D9_EXPORT uint64_t d9_enc_first_time(const struct d9_enc *e);

/* Adds the events of a chunk written with the d9_enc_* functions (built-in layout with the
 * schema flags the encoder was given) to counts[type], for trailers. */
D9_EXPORT void d9_chunk_count_types(const uint8_t *chunk, unsigned flags,
	uint64_t counts[D9_EV_KNOWN_MAX + 1]);

/* 1 when one more event fits. */
static inline int d9_enc_room(const struct d9_enc *e)
{
	return e->p < e->end;
}

/* The head byte of an event of `type` d units after the previous one, then the rest of d. */
static inline __attribute__((always_inline)) uint8_t *d9__enc_type_delta(uint8_t *p,
	uint32_t type, uint64_t d)
{
	/* the low three bits of the delta ride in the type byte: lossless; scheduler steps under
	 * 8 units (~1 us) cost nothing more, and one varint byte covers up to 1023 units */
	if (d < 8) {
		*p++ = (uint8_t)(type | (d << D9_EV_DELTA_SHIFT));
	} else {
		*p++ = (uint8_t)(type | ((d & 7) << D9_EV_DELTA_SHIFT) | D9_EV_MORE);
		p = d9_put_varint(p, d >> 3);
	}
	return p;
}

static inline uint8_t *d9__enc_head(struct d9_enc *e, uint32_t type, uint64_t ticks)
{
	uint64_t t = ticks >> e->shift;
	uint64_t d = t > e->last ? t - e->last : 0;

	if (t > e->last)
		e->last = t;
	e->count++;
	if (type <= D9_EV_KNOWN_MAX) /* a constant at every call site: folded */
		e->types[type]++;
	return d9__enc_type_delta(e->p, type, d);
}

/* A coroutine field: a busy worker touches a handful of coroutines at a time (wake, then poll
 * start and end), so the last four are coded in one byte. */
static inline uint8_t *d9__enc_coroutine(struct d9_enc *e, uint8_t *p, uint64_t id)
{
	uint64_t *m = e->mru;

	if (id == 0) {
		*p++ = 0;
	} else if (id == m[0]) {
		*p++ = 1;
	} else if (id == m[1]) {
		m[1] = m[0];
		m[0] = id;
		*p++ = 2;
	} else if (id == m[2]) {
		m[2] = m[1];
		m[1] = m[0];
		m[0] = id;
		*p++ = 3;
	} else if (id == m[3]) {
		m[3] = m[2];
		m[2] = m[1];
		m[1] = m[0];
		m[0] = id;
		*p++ = 4;
	} else {
		p = d9_put_varint(p, d9_zigzag((int64_t)(id - m[0])) + 5);
		m[3] = m[2];
		m[2] = m[1];
		m[1] = m[0];
		m[0] = id;
	}
	return p;
}

/* The fields of the five events a scheduler records most, after their head: d9_enc_* below, and
 * the writer's encoding of raw records (agent/raw.c), which keeps the head's state in registers. */
static inline uint8_t *d9__enc_poll_start_fields(struct d9_enc *e, uint8_t *p, uint64_t coroutine,
	uint64_t location)
{
	p = d9__enc_coroutine(e, p, coroutine);
	return d9_put_varint(p, location);
}

/* timeout_us: -1 for an infinite wait. */
static inline uint8_t *d9__enc_park_fields(struct d9_enc *e, uint8_t *p, uint32_t call,
	int64_t timeout_us)
{
	p = d9_put_varint(p, call);
	if (__builtin_expect(timeout_us != e->park_timeout || !e->park_len, 0)) {
		e->park_timeout = timeout_us;
		e->park_len = (uint8_t)(d9_put_varint(e->park_bytes, d9_zigzag(timeout_us)) -
			e->park_bytes);
	}
	/* 16 bytes copied, park_len of them kept: the slack after end holds them */
	memcpy(p, e->park_bytes, 16);
	return p + e->park_len;
}

/* The same with D9_SCHEMA_COMPACT_WAITS: the timeout as `timeout_us_delta`, one byte `00` when
 * it is the chunk's previous Park's. */
static inline uint8_t *d9__enc_park_delta_fields(struct d9_enc *e, uint8_t *p, uint32_t call,
	int64_t timeout_us)
{
	p = d9_put_varint(p, call);
	if (__builtin_expect(timeout_us == e->park_prev, 1)) {
		*p++ = 0;
		return p;
	}
	p = d9_put_varint(p, d9_zigzag((int64_t)((uint64_t)timeout_us - (uint64_t)e->park_prev)));
	e->park_prev = timeout_us;
	return p;
}

/* cpu_ns and sched_wait_ns are written only when the schema has them: as they are with
 * D9_SCHEMA_UNPARK_STATS (D9_UNKNOWN then takes 10 bytes and decodes as D9_UNKNOWN), plus one
 * with D9_SCHEMA_UNPARK_INTERVAL (D9_UNKNOWN is written as 0: one byte). */
static inline uint8_t *d9__enc_unpark_fields(uint8_t *p, unsigned flags, int64_t ready,
	uint64_t cpu_ns, uint64_t sched_wait_ns)
{
	p = d9_put_varint(p, d9_zigzag(ready));
	if (flags & D9_SCHEMA_COMPACT_WAITS) {
		/* an UnparkStats after it, at delta 0, only when a statistic is known */
		if (cpu_ns != D9_UNKNOWN || sched_wait_ns != D9_UNKNOWN) {
			*p++ = D9_EV_EXTENDED;
			*p++ = D9_EV_UNPARK_STATS;
			p = d9_put_varint(p, cpu_ns == D9_UNKNOWN ? 0 : cpu_ns + 1);
			p = d9_put_varint(p, sched_wait_ns == D9_UNKNOWN ? 0 : sched_wait_ns + 1);
		}
	} else if (flags & D9_SCHEMA_UNPARK_INTERVAL) {
		p = d9_put_varint(p, cpu_ns == D9_UNKNOWN ? 0 : cpu_ns + 1);
		p = d9_put_varint(p, sched_wait_ns == D9_UNKNOWN ? 0 : sched_wait_ns + 1);
	} else if (flags & D9_SCHEMA_UNPARK_STATS) {
		p = d9_put_varint(p, cpu_ns);
		p = d9_put_varint(p, sched_wait_ns);
	}
	return p;
}

/* object: the fd for D9_WAKE_FD; for D9_WAKE_TIMER the deadline in units relative to this
 * event's time (negative: the deadline had passed); an address or 0 otherwise. Objects need
 * |object| < 2^60 (kind takes 3 bits of the packed field). */
static inline uint8_t *d9__enc_wake_fields(struct d9_enc *e, uint8_t *p, uint64_t woken,
	uint64_t waker, uint32_t kind, int64_t object)
{
	p = d9__enc_coroutine(e, p, woken);
	p = d9__enc_coroutine(e, p, waker);
	return d9_put_varint(p, d9_zigzag(object) << 3 | (kind & 7));
}

/* Each returns 0, or -ENOSPC when the chunk is full (nothing written). */
static inline int d9_enc_poll_start(struct d9_enc *e, uint64_t ticks, uint64_t coroutine,
	uint64_t location)
{
	if (e->p >= e->end)
		return -28;
	e->p = d9__enc_poll_start_fields(e, d9__enc_head(e, D9_EV_POLL_START, ticks), coroutine,
		location);
	return 0;
}

static inline int d9_enc_poll_end(struct d9_enc *e, uint64_t ticks, uint64_t coroutine)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_POLL_END, ticks);
	e->p = d9__enc_coroutine(e, p, coroutine);
	return 0;
}

static inline int d9_enc_park(struct d9_enc *e, uint64_t ticks, uint32_t call, int64_t timeout_us)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_PARK, ticks);
	e->p = e->flags & D9_SCHEMA_COMPACT_WAITS ? d9__enc_park_delta_fields(e, p, call, timeout_us) :
		d9__enc_park_fields(e, p, call, timeout_us);
	return 0;
}

static inline int d9_enc_unpark(struct d9_enc *e, uint64_t ticks, int64_t ready, uint64_t cpu_ns,
	uint64_t sched_wait_ns)
{
	if (e->p >= e->end)
		return -28;
	e->p = d9__enc_unpark_fields(d9__enc_head(e, D9_EV_UNPARK, ticks), e->flags, ready, cpu_ns,
		sched_wait_ns);
	return 0;
}

static inline int d9_enc_wake(struct d9_enc *e, uint64_t ticks, uint64_t woken, uint64_t waker,
	uint32_t kind, int64_t object)
{
	if (e->p >= e->end)
		return -28;
	e->p = d9__enc_wake_fields(e, d9__enc_head(e, D9_EV_WAKE, ticks), woken, waker, kind,
		object);
	return 0;
}

static inline int d9_enc_spawn(struct d9_enc *e, uint64_t ticks, uint64_t coroutine, uint64_t parent,
	uint64_t location)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_SPAWN, ticks);
	p = d9__enc_coroutine(e, p, coroutine);
	p = d9__enc_coroutine(e, p, parent);
	e->p = d9_put_varint(p, location);
	return 0;
}

static inline int d9_enc_coroutine_exit(struct d9_enc *e, uint64_t ticks, uint64_t coroutine)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_COROUTINE_EXIT, ticks);
	e->p = d9__enc_coroutine(e, p, coroutine);
	return 0;
}

static inline int d9_enc_queue_sample(struct d9_enc *e, uint64_t ticks, uint64_t runnable)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_QUEUE_SAMPLE, ticks);
	e->p = d9_put_varint(p, runnable);
	return 0;
}

/* The fields BlockingCall and SchedDelay share: coroutine, call, fd_kind, duration_ns, and a
 * last one (BlockingCall: stack; SchedDelay: sched_wait_ns). */
static inline int d9__enc_call(struct d9_enc *e, uint32_t type, uint64_t ticks,
	uint64_t coroutine, uint64_t call, uint32_t fd_kind, uint64_t duration_ns, uint64_t last)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, type, ticks);
	p = d9__enc_coroutine(e, p, coroutine);
	p = d9_put_varint(p, call);
	p = d9_put_varint(p, fd_kind);
	p = d9_put_varint(p, duration_ns);
	e->p = d9_put_varint(p, last);
	return 0;
}

/* ticks: when the call returned; call: a String id naming it; stack: a Stack id or 0. */
static inline int d9_enc_blocking_call(struct d9_enc *e, uint64_t ticks, uint64_t coroutine,
	uint64_t call, uint32_t fd_kind, uint64_t duration_ns, uint64_t stack)
{
	return d9__enc_call(e, D9_EV_BLOCKING_CALL, ticks, coroutine, call, fd_kind, duration_ns,
		stack);
}

/* A call past the blocking threshold that did not wait off CPU (preempted): ticks when it
 * returned; duration_ns its wall time; sched_wait_ns the time runnable but not running inside it
 * (at most). Only in segments whose schema lists it (D9_SCHEMA_SCHED_DELAY). */
static inline int d9_enc_sched_delay(struct d9_enc *e, uint64_t ticks, uint64_t coroutine,
	uint64_t call, uint32_t fd_kind, uint64_t duration_ns, uint64_t sched_wait_ns)
{
	return d9__enc_call(e, D9_EV_SCHED_DELAY, ticks, coroutine, call, fd_kind, duration_ns,
		sched_wait_ns);
}

/* unwind (enum d9_unwinder | D9_UNWIND_* flags) is written only when the schema has it
 * (D9_SCHEMA_CPU_UNWIND); weight_ns (the time the sample stands for, D9_UNKNOWN if not known)
 * only with D9_SCHEMA_CPU_WEIGHT. */
static inline int d9_enc_cpu_sample_w(struct d9_enc *e, uint64_t ticks, uint64_t coroutine,
	uint32_t source, uint64_t stack, uint32_t unwind, uint64_t weight_ns)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_CPU_SAMPLE, ticks);
	p = d9__enc_coroutine(e, p, coroutine);
	p = d9_put_varint(p, source);
	p = d9_put_varint(p, stack);
	if (e->flags & D9_SCHEMA_CPU_UNWIND) {
		p = d9_put_varint(p, unwind);
		if (e->flags & D9_SCHEMA_CPU_WEIGHT)
			p = d9_put_varint(p, weight_ns == D9_UNKNOWN ? 0 : weight_ns + 1);
	}
	e->p = p;
	return 0;
}

static inline int d9_enc_cpu_sample_unwind(struct d9_enc *e, uint64_t ticks, uint64_t coroutine,
	uint32_t source, uint64_t stack, uint32_t unwind)
{
	return d9_enc_cpu_sample_w(e, ticks, coroutine, source, stack, unwind, D9_UNKNOWN);
}

static inline int d9_enc_cpu_sample(struct d9_enc *e, uint64_t ticks, uint64_t coroutine,
	uint32_t source, uint64_t stack)
{
	return d9_enc_cpu_sample_unwind(e, ticks, coroutine, source, stack, D9_UNWIND_NONE);
}

/* The head of an event of code >= 15 (extended form): first byte, code, delta's high part. */
static inline uint8_t *d9__enc_head_ext(struct d9_enc *e, uint32_t type, uint64_t ticks)
{
	uint64_t t = ticks >> e->shift;
	uint64_t d = t > e->last ? t - e->last : 0;
	uint8_t *p = e->p;

	if (t > e->last)
		e->last = t;
	e->count++;
	*p++ = (uint8_t)(D9_EV_EXTENDED | ((d & 7) << D9_EV_DELTA_SHIFT) | (d > 7 ? D9_EV_MORE : 0));
	p = d9_put_varint(p, type);
	if (d > 7)
		p = d9_put_varint(p, d >> 3);
	return p;
}

/* A request begins (D9_SCHEMA_REQUESTS): id per process and source; fd -1 when none; preview a
 * String id (method and path) or 0. */
static inline int d9_enc_request_begin(struct d9_enc *e, uint64_t ticks, uint64_t id, int64_t fd,
	uint64_t coroutine, uint32_t source, uint64_t preview)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head_ext(e, D9_EV_REQUEST_BEGIN, ticks);
	p = d9_put_varint(p, id);
	p = d9_put_varint(p, d9_zigzag(fd));
	p = d9__enc_coroutine(e, p, coroutine);
	p = d9_put_varint(p, source);
	e->p = d9_put_varint(p, preview);
	return 0;
}

/* A request ends: flags D9_REQ_*; count the requests its bytes held when the protocol tells
 * (0: unknown); status the application's (API) or 0; tail_ns how long before this event its
 * response was written (the request's real end; it is seen only when the reader comes back). */
static inline int d9_enc_request_end(struct d9_enc *e, uint64_t ticks, uint64_t id, uint32_t source,
	uint64_t bytes_in, uint64_t bytes_out, uint32_t flags, uint64_t count, int64_t status,
	uint64_t tail_ns)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head_ext(e, D9_EV_REQUEST_END, ticks);
	p = d9_put_varint(p, id);
	p = d9_put_varint(p, source);
	p = d9_put_varint(p, bytes_in);
	p = d9_put_varint(p, bytes_out);
	p = d9_put_varint(p, flags);
	p = d9_put_varint(p, count);
	p = d9_put_varint(p, d9_zigzag(status));
	e->p = d9_put_varint(p, tail_ns);
	return 0;
}

static inline int d9_enc_dropped(struct d9_enc *e, uint64_t ticks, uint64_t count, uint32_t reason)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_DROPPED, ticks);
	p = d9_put_varint(p, count);
	e->p = d9_put_varint(p, reason);
	return 0;
}

static inline int d9_enc_zero_timeout_waits(struct d9_enc *e, uint64_t ticks, uint64_t count)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_ZERO_TIMEOUT_WAITS, ticks);
	e->p = d9_put_varint(p, count);
	return 0;
}

/* Any event as raw field bytes already encoded per the schema (tests: unknown types, custom
 * events). The encoder's coroutine list (e->mru) is not updated: raw 'c' fields must be encoded
 * against it by the caller, who then updates it. Returns 0 or -ENOSPC. */
D9_EXPORT int d9_enc_raw(struct d9_enc *e, uint64_t ticks, uint32_t type, const void *fields,
	size_t len);

/* ---- Application API events (agent/api.c): extended heads (d9__enc_head_ext above) ---------- */

/* name: a String id. Only in segments whose schema lists Mark (D9_SCHEMA_API). */
static inline int d9_enc_mark(struct d9_enc *e, uint64_t ticks, uint64_t name)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head_ext(e, D9_EV_MARK, ticks);
	e->p = d9_put_varint(p, name);
	return 0;
}

/* kind: enum d9_value_kind; value as its kind says. Only with D9_SCHEMA_API. */
static inline int d9_enc_value(struct d9_enc *e, uint64_t ticks, uint64_t name, uint32_t kind,
	int64_t value)
{
	if (e->p >= e->end)
		return -28;
	uint8_t *p = d9__enc_head_ext(e, D9_EV_VALUE, ticks);
	p = d9_put_varint(p, name);
	p = d9_put_varint(p, kind);
	e->p = d9_put_varint(p, d9_zigzag(value));
	return 0;
}

/* A CustomEvent: schema (CustomSchema id) and its encoded payload, len <= D9_CUSTOM_DATA_MAX.
 * Returns 0 or -ENOSPC (nothing written) when the chunk has no room for it. */
static inline int d9_enc_custom(struct d9_enc *e, uint64_t ticks, uint64_t schema,
	const void *data, size_t len)
{
	/* the slack after end covers the head and the two varints; the payload must fit before */
	if (e->p >= e->end || (size_t)(e->end - e->p) < len)
		return -28;
	uint8_t *p = d9__enc_head(e, D9_EV_CUSTOM, ticks);
	p = d9_put_varint(p, schema);
	p = d9_put_varint(p, len);
	memcpy(p, data, len);
	e->p = p + len;
	return 0;
}

#endif

