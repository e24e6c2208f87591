/* format.c: encoder and decoder of the d9 trace format v1 (FORMAT.md is the contract).
 * The encoder writes into caller buffers and never allocates. The decoder never trusts a length,
 * an id or a count: every read is bounds-checked against the chunk, problems are reported with
 * their file offset, and decoding goes on after them. */
#include "d9-format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libdeflate.h> /* CRC-32 by carry-less multiplies: about a tenth of zlib's table code */
#include <zlib.h>

/* ---- Names --------------------------------------------------------------------------------- */

const char *d9_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case D9_ENOTTRACE: return "not a d9 trace (bad magic)";
	case D9_EVERSION: return "unsupported format major version";
	case D9_ETRUNC: return "truncated";
	case D9_ECORRUPT: return "corrupt data";
	case D9_ENOHEADER: return "missing or corrupt segment header";
	default: return err < 0 && err > -4096 ? strerror(-err) : "unknown error";
	}
}

static const char *const event_names[D9_EV_KNOWN_MAX + 1] = {
	NULL, "PollStart", "PollEnd", "Park", "Unpark", "Wake", "Spawn", "CoroutineExit",
	"QueueSample", "BlockingCall", "CpuSample", "Dropped", "CustomEvent", "ZeroTimeoutWaits",
};
static const char *const def_names[D9_DEF_KNOWN_MAX + 1] = {
	NULL, "String", "SpawnLocation", "Stack", "Module", "Symbol", "Thread", "ClockSync",
	"Coroutine", "CustomSchema", "Privileges", "RecorderState",
};
static const char *const rec_feature_names[D9_REC_FEATURE_MAX + 1] = {
	NULL, "cpu_profile", "sched_events", "perf_fds", "perf_ring", "blocking_stacks", "unwind",
	"symbols", "maps", "stack_copy", "threads", "exec", "chroot",
};
static const char *const rec_state_names[D9_REC_STATE_MAX + 1] = {
	NULL, "off", "fallback", "limited",
};
static const char *const wake_names[D9_WAKE_MAX + 1] = {
	"other", "fd", "timer", "cond", "mutex", "join", "interrupt", "spawn",
};
static const char *const call_names[D9_CALL_MAX + 1] = {
	"other", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect",
};
static const char *const drop_names[D9_DROP_REASON_MAX + 1] = {
	"other", "buffers_full", "write_error", "samples_lost", "segment_deleted", "api",
};
static const char *const fd_names[D9_FD_MAX + 1] = {
	"none", "file", "socket", "pipe", "char", "other",
};

const char *d9_event_name(uint32_t type)
{
	return type <= D9_EV_KNOWN_MAX ? event_names[type] : NULL;
}

const char *d9_rec_feature_name(uint64_t feature)
{
	return feature <= D9_REC_FEATURE_MAX ? rec_feature_names[feature] : NULL;
}

const char *d9_rec_state_name(uint64_t state)
{
	return state <= D9_REC_STATE_MAX ? rec_state_names[state] : NULL;
}

const char *d9_def_name(uint32_t kind)
{
	return kind <= D9_DEF_KNOWN_MAX ? def_names[kind] : NULL;
}

const char *d9_wake_kind_name(uint64_t kind)
{
	return kind <= D9_WAKE_MAX ? wake_names[kind] : "unknown";
}

const char *d9_wait_call_name(uint64_t call)
{
	return call <= D9_CALL_MAX ? call_names[call] : "unknown";
}

const char *d9_drop_reason_name(uint64_t reason)
{
	return reason <= D9_DROP_REASON_MAX ? drop_names[reason] : "unknown";
}

const char *d9_unwinder_name(uint64_t unwind)
{
	static const char *const names[] = { "none", "fp", "dwarf", "libunwind", "ip" };

	unwind &= D9_UNWINDER_MASK;
	return unwind <= D9_UNWINDER_MAX ? names[unwind] : "unknown";
}

const char *d9_fd_kind_name(uint64_t kind)
{
	return kind <= D9_FD_MAX ? fd_names[kind] : "unknown";
}

/* ---- The built-in v1 schema ------------------------------------------------------------------ */

struct builtin_field { char enc; const char *name; };
struct builtin_type { const char *name; uint8_t nfields; struct builtin_field f[5]; };

/* Field order here is the order on disk for d9's own writer, and the slot order (D9_F_*). */
static const struct builtin_type builtin[D9_EV_KNOWN_MAX + 1] = {
	[D9_EV_POLL_START] = { "PollStart", 2, { { 'c', "coroutine" }, { 'u', "location" } } },
	[D9_EV_POLL_END] = { "PollEnd", 1, { { 'c', "coroutine" } } },
	[D9_EV_PARK] = { "Park", 2, { { 'u', "call" }, { 'i', "timeout_us" } } },
	[D9_EV_UNPARK] = { "Unpark", 3,
		{ { 'i', "ready" }, { 'u', "cpu_ns" }, { 'u', "sched_wait_ns" } } },
	[D9_EV_WAKE] = { "Wake", 3, { { 'c', "woken" }, { 'c', "waker" }, { 'u', "kind_object" } } },
	[D9_EV_SPAWN] = { "Spawn", 3,
		{ { 'c', "coroutine" }, { 'c', "parent" }, { 'u', "location" } } },
	[D9_EV_COROUTINE_EXIT] = { "CoroutineExit", 1, { { 'c', "coroutine" } } },
	[D9_EV_QUEUE_SAMPLE] = { "QueueSample", 1, { { 'u', "runnable" } } },
	[D9_EV_BLOCKING_CALL] = { "BlockingCall", 5,
		{ { 'c', "coroutine" }, { 'u', "call" }, { 'u', "fd_kind" }, { 'u', "duration_ns" },
			{ 'u', "stack" } } },
	[D9_EV_CPU_SAMPLE] = { "CpuSample", 5,
		{ { 'c', "coroutine" }, { 'u', "source" }, { 'u', "stack" }, { 'u', "unwind" },
			{ 'u', "weight_ns+1" } } },
	[D9_EV_DROPPED] = { "Dropped", 2, { { 'u', "count" }, { 'u', "reason" } } },
	[D9_EV_CUSTOM] = { "CustomEvent", 2, { { 'u', "schema" }, { 'b', "data" } } },
	[D9_EV_ZERO_TIMEOUT_WAITS] = { "ZeroTimeoutWaits", 1, { { 'u', "count" } } },
};

/* SchedDelay (code 14): not built in; d9's writer describes it in its SCHEMA chunk. */
static const struct builtin_field sched_delay[5] = { { 'c', "coroutine" }, { 'u', "call" },
	{ 'u', "fd_kind" }, { 'u', "duration_ns" }, { 'u', "sched_wait_ns" } };

/* Mark and Value (codes 18, 19): not built in; listed with D9_SCHEMA_API. */
static const struct builtin_field api_mark[1] = { { 'u', "name" } };
/* UnparkStats (20): D9_SCHEMA_COMPACT_WAITS */
static const struct builtin_field unpark_stats[2] = { { 'u', "cpu_ns+1" },
	{ 'u', "sched_wait_ns+1" } };
static const struct builtin_field api_value[3] = { { 'u', "name" }, { 'u', "kind" },
	{ 'i', "value" } };

const char *d9_value_kind_name(uint64_t kind)
{
	static const char *const names[D9_VALUE_KIND_MAX + 1] = { "gauge", "counter", "gauge" };

	return kind <= D9_VALUE_KIND_MAX ? names[kind] : "unknown";
}

/* RequestBegin (16) and RequestEnd (17): not built in either (D9_SCHEMA_REQUESTS). */
static const struct builtin_field request_begin[5] = { { 'u', "id" }, { 'i', "fd" },
	{ 'c', "coroutine" }, { 'u', "source" }, { 'u', "preview" } };
static const struct builtin_field request_end[8] = { { 'u', "id" }, { 'u', "source" },
	{ 'u', "bytes_in" }, { 'u', "bytes_out" }, { 'u', "flags" }, { 'u', "count" },
	{ 'i', "status" }, { 'u', "tail_ns" } };

static int builtin_fields(uint32_t type, unsigned flags)
{
	if (type == D9_EV_UNPARK && ((flags & D9_SCHEMA_COMPACT_WAITS) ||
		!(flags & (D9_SCHEMA_UNPARK_STATS | D9_SCHEMA_UNPARK_INTERVAL))))
		return 1;
	if (type == D9_EV_CPU_SAMPLE && !(flags & D9_SCHEMA_CPU_UNWIND))
		return 3;
	if (type == D9_EV_CPU_SAMPLE && !(flags & D9_SCHEMA_CPU_WEIGHT))
		return 4;
	return builtin[type].nfields;
}

/* The on-disk name of field i of a built-in type under the writer's schema flags. */
static const char *builtin_field_name(uint32_t type, int i, unsigned flags)
{
	static const char *const interval[3] = { "ready", "cpu_ns+1", "sched_wait_ns+1" };

	if (type == D9_EV_UNPARK && (flags & D9_SCHEMA_UNPARK_INTERVAL))
		return interval[i];
	if (type == D9_EV_PARK && i == D9_F_PARK_TIMEOUT_US && (flags & D9_SCHEMA_COMPACT_WAITS))
		return "timeout_us_delta";
	return builtin[type].f[i].name;
}

static int slot_of(uint32_t type, const char *name)
{
	static const char *const wake_slots[] = { "woken", "waker", "kind", "object" };

	if (type == 0 || type > D9_EV_KNOWN_MAX)
		return -1;
	if (type == D9_EV_WAKE) {
		if (!strcmp(name, "kind_object"))
			return D9_SLOT_KIND_OBJECT;
		for (int i = 0; i < 4; i++)
			if (!strcmp(wake_slots[i], name))
				return i;
		return -1;
	}
	if (type == D9_EV_UNPARK) {
		if (!strcmp(name, "cpu_ns+1"))
			return D9_SLOT_CPU_NS_P1;
		if (!strcmp(name, "sched_wait_ns+1"))
			return D9_SLOT_SCHED_WAIT_NS_P1;
	}
	if (type == D9_EV_CPU_SAMPLE && !strcmp(name, "weight_ns+1"))
		return D9_SLOT_WEIGHT_NS_P1;
	if (type == D9_EV_PARK && !strcmp(name, "timeout_us_delta"))
		return D9_SLOT_TIMEOUT_DELTA;
	for (int i = 0; i < builtin[type].nfields; i++)
		if (strcmp(builtin[type].f[i].name, name) == 0)
			return i;
	return -1;
}

static void builtin_schema(struct d9_schema_type *s, uint32_t type)
{
	memset(s, 0, sizeof(*s));
	s->present = 1;
	snprintf(s->name, sizeof(s->name), "%s", builtin[type].name);
	s->nfields = (uint8_t)builtin_fields(type, 0); /* what d9's writer writes by default */
	for (int i = 0; i < s->nfields; i++) {
		s->fields[i].enc = (uint8_t)builtin[type].f[i].enc;
		s->fields[i].slot = (int8_t)slot_of(type, builtin[type].f[i].name);
		snprintf(s->fields[i].name, sizeof(s->fields[i].name), "%s", builtin[type].f[i].name);
	}
}

/* ---- Encoding -------------------------------------------------------------------------------- */

void d9_wbuf_raw(struct d9_wbuf *w, const void *p, size_t n)
{
	if (w->err)
		return;
	if ((size_t)(w->end - w->p) < n) {
		w->err = -ENOSPC;
		return;
	}
	if (n)
		memcpy(w->p, p, n);
	w->p += n;
}

void d9_wbuf_u(struct d9_wbuf *w, uint64_t v)
{
	uint8_t tmp[10];

	d9_wbuf_raw(w, tmp, (size_t)(d9_put_varint(tmp, v) - tmp));
}

void d9_wbuf_i(struct d9_wbuf *w, int64_t v)
{
	d9_wbuf_u(w, d9_zigzag(v));
}

void d9_wbuf_bytes(struct d9_wbuf *w, const void *p, size_t n)
{
	d9_wbuf_u(w, n);
	d9_wbuf_raw(w, p, n);
}

void d9_wbuf_le16(struct d9_wbuf *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	d9_wbuf_raw(w, b, 2);
}

void d9_wbuf_le32(struct d9_wbuf *w, uint32_t v)
{
	uint8_t b[4];

	d9_store_le32(b, v);
	d9_wbuf_raw(w, b, 4);
}

void d9_wbuf_le64(struct d9_wbuf *w, uint64_t v)
{
	uint8_t b[8];

	d9_store_le64(b, v);
	d9_wbuf_raw(w, b, 8);
}

int d9_prefix_encode(void *buf, size_t cap)
{
	struct d9_wbuf w;

	d9_wbuf_init(&w, buf, cap);
	d9_wbuf_raw(&w, D9_MAGIC, D9_MAGIC_LEN);
	d9_wbuf_le16(&w, D9_FORMAT_MAJOR);
	d9_wbuf_le16(&w, D9_FORMAT_MINOR);
	d9_wbuf_le32(&w, 0);
	return w.err ? w.err : D9_PREFIX_LEN;
}

uint8_t *d9_chunk_open(struct d9_wbuf *w, uint8_t type)
{
	uint8_t *start = w->p;
	uint8_t head[D9_CHUNK_HDR_LEN] = { D9_SYNC0, D9_SYNC1, type, 0, 0, 0, 0, 0 };

	d9_wbuf_raw(w, head, sizeof(head));
	return start;
}

/* Byte 3 of a chunk head: the low byte of the CRC-32 of the other seven head bytes. It lets a
 * reader that resyncs after corruption reject false "D9" candidates without a payload CRC. */
static uint8_t head_check(const uint8_t *p)
{
	uint8_t b[7] = { p[0], p[1], p[2], p[4], p[5], p[6], p[7] };

	return (uint8_t)libdeflate_crc32(0, b, 7);
}

void d9_chunk_fill_crc(uint8_t *chunk)
{
	uint32_t len;

	memcpy(&len, chunk + 4, 4);
	chunk[3] = head_check(chunk);
	uint32_t crc = libdeflate_crc32(0, chunk, D9_CHUNK_HDR_LEN + len);
	d9_store_le32(chunk + D9_CHUNK_HDR_LEN + len, crc);
}

int d9_chunk_close(struct d9_wbuf *w, uint8_t *start)
{
	uint8_t crc[4] = { 0 };

	if (w->err)
		return w->err;
	d9_store_le32(start + 4, (uint32_t)(w->p - start - D9_CHUNK_HDR_LEN));
	d9_wbuf_raw(w, crc, 4);
	if (w->err)
		return w->err;
	d9_chunk_fill_crc(start);
	return 0;
}

static void wbuf_str(struct d9_wbuf *w, const char *s, size_t n)
{
	d9_wbuf_bytes(w, s ? s : "", s ? n : 0);
}

int d9_header_write(struct d9_wbuf *w, const struct d9_header *h)
{
	uint8_t *c = d9_chunk_open(w, D9_CHUNK_HEADER);

	d9_wbuf_le32(w, h->pid);
	d9_wbuf_le32(w, h->ppid);
	d9_wbuf_le32(w, h->segment_seq);
	d9_wbuf_raw(w, &h->clock_source, 1);
	d9_wbuf_raw(w, &h->time_shift, 1);
	d9_wbuf_le16(w, 0);
	d9_wbuf_le64(w, h->ticks_per_sec);
	d9_wbuf_le64(w, h->anchor_ticks);
	d9_wbuf_le64(w, h->anchor_mono_ns);
	d9_wbuf_le64(w, h->anchor_realtime_ns);
	d9_wbuf_le64(w, h->start_realtime_ns);
	wbuf_str(w, h->writer, h->writer ? strlen(h->writer) : 0);
	wbuf_str(w, h->process, h->process ? strlen(h->process) : 0);
	wbuf_str(w, h->cmdline, h->cmdline_len);
	wbuf_str(w, h->hostname, h->hostname ? strlen(h->hostname) : 0);
	wbuf_str(w, h->boot_id, h->boot_id ? strlen(h->boot_id) : 0);
	return d9_chunk_close(w, c);
}

static void schema_type(struct d9_wbuf *w, uint32_t code, const char *name,
	const struct builtin_field *f, int n)
{
	d9_wbuf_u(w, code);
	wbuf_str(w, name, strlen(name));
	d9_wbuf_u(w, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		uint8_t enc = (uint8_t)f[i].enc;
		d9_wbuf_raw(w, &enc, 1);
		wbuf_str(w, f[i].name, strlen(f[i].name));
	}
}

/* Mark and Value entries (D9_SCHEMA_API). */
static void schema_api(struct d9_wbuf *w)
{
	schema_type(w, D9_EV_MARK, D9_MARK_NAME, api_mark, 1);
	schema_type(w, D9_EV_VALUE, D9_VALUE_NAME, api_value, 3);
}

int d9_schema_write(struct d9_wbuf *w, unsigned flags)
{
	uint8_t *c = d9_chunk_open(w, D9_CHUNK_SCHEMA);

	d9_wbuf_u(w, D9_EV_KNOWN_MAX + !!(flags & D9_SCHEMA_SCHED_DELAY) +
		2 * !!(flags & D9_SCHEMA_API) + 2 * !!(flags & D9_SCHEMA_REQUESTS) +
		!!(flags & D9_SCHEMA_COMPACT_WAITS));
	for (uint32_t t = 1; t <= D9_EV_KNOWN_MAX; t++) {
		int n = builtin_fields(t, flags);

		d9_wbuf_u(w, t);
		wbuf_str(w, builtin[t].name, strlen(builtin[t].name));
		d9_wbuf_u(w, (uint64_t)n);
		for (int i = 0; i < n; i++) {
			uint8_t enc = (uint8_t)builtin[t].f[i].enc;
			const char *name = builtin_field_name(t, i, flags);

			d9_wbuf_raw(w, &enc, 1);
			wbuf_str(w, name, strlen(name));
		}
	}
	if (flags & D9_SCHEMA_SCHED_DELAY) {
		d9_wbuf_u(w, D9_EV_SCHED_DELAY);
		wbuf_str(w, D9_SCHED_DELAY_NAME, strlen(D9_SCHED_DELAY_NAME));
		d9_wbuf_u(w, 5);
		for (int i = 0; i < 5; i++) {
			uint8_t enc = (uint8_t)sched_delay[i].enc;
			d9_wbuf_raw(w, &enc, 1);
			wbuf_str(w, sched_delay[i].name, strlen(sched_delay[i].name));
		}
	}
	if (flags & D9_SCHEMA_API)
		schema_api(w);
	if (flags & D9_SCHEMA_REQUESTS) {
		schema_type(w, D9_EV_REQUEST_BEGIN, D9_REQUEST_BEGIN_NAME, request_begin, 5);
		schema_type(w, D9_EV_REQUEST_END, D9_REQUEST_END_NAME, request_end, 8);
	}
	if (flags & D9_SCHEMA_COMPACT_WAITS)
		schema_type(w, D9_EV_UNPARK_STATS, D9_UNPARK_STATS_NAME, unpark_stats, 2);
	return d9_chunk_close(w, c);
}

int d9_trailer_write(struct d9_wbuf *w, const struct d9_trailer *t)
{
	uint8_t *c = d9_chunk_open(w, D9_CHUNK_TRAILER);
	uint32_t n = 0;

	d9_wbuf_le64(w, t->events);
	d9_wbuf_le64(w, t->chunks);
	d9_wbuf_le64(w, t->first_time);
	d9_wbuf_le64(w, t->last_time);
	d9_wbuf_le64(w, t->dropped_events);
	d9_wbuf_le64(w, t->dropped_samples);
	d9_wbuf_le32(w, t->flags);
	for (uint32_t i = 0; i <= D9_EV_KNOWN_MAX; i++)
		n += t->type_counts[i] != 0;
	d9_wbuf_u(w, n);
	for (uint32_t i = 0; i <= D9_EV_KNOWN_MAX; i++) {
		if (!t->type_counts[i])
			continue;
		d9_wbuf_u(w, i);
		d9_wbuf_u(w, t->type_counts[i]);
	}
	int ended = (t->flags & (D9_TRAILER_ENDED | D9_TRAILER_WINDOW)) != 0;
	int s3 = t->s3_uploaded || t->s3_uploaded_bytes || t->s3_failures || t->s3_evicted || ended;
	if (t->budget_deleted_segments || t->budget_deleted_bytes || s3) {
		/* appended fields (FORMAT.md section 11): only when not 0 (or followed by the S3
		 * counts, which are positional) */
		d9_wbuf_u(w, t->budget_deleted_segments);
		d9_wbuf_u(w, t->budget_deleted_bytes);
	}
	if (s3) {
		d9_wbuf_u(w, t->s3_uploaded);
		d9_wbuf_u(w, t->s3_uploaded_bytes);
		d9_wbuf_u(w, t->s3_failures);
		d9_wbuf_u(w, t->s3_evicted);
	}
	if (ended)
		d9_wbuf_u(w, t->end_time);
	return d9_chunk_close(w, c);
}

/* A definition record: u8 kind, varint body length, body. The body is built in a scratch
 * buffer first because its length precedes it. */
static void def_emit(struct d9_wbuf *w, uint8_t kind, const struct d9_wbuf *body)
{
	if (body->err) {
		w->err = body->err;
		return;
	}
	d9_wbuf_raw(w, &kind, 1);
	d9_wbuf_bytes(w, body->start, (size_t)(body->p - body->start));
}

void d9_def_raw(struct d9_wbuf *w, uint8_t kind, const void *body, size_t len)
{
	d9_wbuf_raw(w, &kind, 1);
	d9_wbuf_bytes(w, body, len);
}

void d9_def_string(struct d9_wbuf *w, uint64_t id, const char *s, size_t len)
{
	uint8_t tmp[10];
	size_t n = (size_t)(d9_put_varint(tmp, id) - tmp);
	uint8_t kind = D9_DEF_STRING;

	d9_wbuf_raw(w, &kind, 1);
	d9_wbuf_u(w, n + len);
	d9_wbuf_raw(w, tmp, n);
	d9_wbuf_raw(w, s, len);
}

void d9_def_location(struct d9_wbuf *w, uint64_t id, uint64_t function_addr, uint64_t callsite_addr,
	uint64_t module, uint64_t name)
{
	uint8_t buf[64];
	struct d9_wbuf b;

	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, id);
	d9_wbuf_u(&b, function_addr);
	d9_wbuf_u(&b, callsite_addr);
	d9_wbuf_u(&b, module);
	d9_wbuf_u(&b, name);
	def_emit(w, D9_DEF_LOCATION, &b);
}

void d9_def_stack(struct d9_wbuf *w, uint64_t id, const uint64_t *frames, uint32_t n)
{
	uint8_t buf[24 + D9_STACK_MAX_FRAMES * 10];
	struct d9_wbuf b;

	if (n > D9_STACK_MAX_FRAMES)
		n = D9_STACK_MAX_FRAMES;
	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, id);
	d9_wbuf_u(&b, n);
	for (uint32_t i = 0; i < n; i++) {
		if (i == 0)
			d9_wbuf_u(&b, frames[0]);
		else
			d9_wbuf_i(&b, (int64_t)(frames[i] - frames[i - 1]));
	}
	def_emit(w, D9_DEF_STACK, &b);
}

void d9_def_module(struct d9_wbuf *w, uint64_t id, uint64_t path, uint64_t start, uint64_t end,
	uint64_t offset, const uint8_t *build_id, size_t build_id_len)
{
	uint8_t buf[128];
	struct d9_wbuf b;

	if (build_id_len > 64)
		build_id_len = 64;
	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, id);
	d9_wbuf_u(&b, path);
	d9_wbuf_u(&b, start);
	d9_wbuf_u(&b, end);
	d9_wbuf_u(&b, offset);
	d9_wbuf_bytes(&b, build_id, build_id_len);
	def_emit(w, D9_DEF_MODULE, &b);
}

void d9_def_symbol(struct d9_wbuf *w, uint64_t start, uint64_t len, uint64_t function, uint64_t file,
	uint64_t line, uint64_t inline_depth)
{
	uint8_t buf[64];
	struct d9_wbuf b;

	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, start);
	d9_wbuf_u(&b, len);
	d9_wbuf_u(&b, function);
	d9_wbuf_u(&b, file);
	d9_wbuf_u(&b, line);
	d9_wbuf_u(&b, inline_depth);
	def_emit(w, D9_DEF_SYMBOL, &b);
}

void d9_def_thread(struct d9_wbuf *w, uint64_t tid, uint64_t name, uint64_t worker, uint64_t role)
{
	uint8_t buf[48];
	struct d9_wbuf b;

	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, tid);
	d9_wbuf_u(&b, name);
	d9_wbuf_u(&b, worker);
	d9_wbuf_u(&b, role);
	def_emit(w, D9_DEF_THREAD, &b);
}

void d9_def_privileges(struct d9_wbuf *w, uint64_t from_uid, uint64_t to_uid, uint64_t flags)
{
	uint8_t buf[32];
	struct d9_wbuf b;

	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, from_uid);
	d9_wbuf_u(&b, to_uid);
	d9_wbuf_u(&b, flags);
	def_emit(w, D9_DEF_PRIVILEGES, &b);
}

/* On-disk: RecorderState (FORMAT.md section 10, kind 11). */
void d9_def_recorder(struct d9_wbuf *w, uint64_t feature, uint64_t state, uint64_t err,
	uint64_t text)
{
	uint8_t buf[48];
	struct d9_wbuf b;

	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, feature);
	d9_wbuf_u(&b, state);
	d9_wbuf_u(&b, err);
	d9_wbuf_u(&b, text);
	def_emit(w, D9_DEF_RECORDER, &b);
}

void d9_def_clock_sync(struct d9_wbuf *w, uint64_t ticks, uint64_t mono_ns, uint64_t realtime_ns)
{
	uint8_t buf[32];
	struct d9_wbuf b;

	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, ticks);
	d9_wbuf_u(&b, mono_ns);
	d9_wbuf_u(&b, realtime_ns);
	def_emit(w, D9_DEF_CLOCK_SYNC, &b);
}

/* CustomSchema body: id, name, then per field to the end of the body: type (u8), name (string)
 * (FORMAT.md, "CustomSchema"). On-disk format. */
void d9_def_custom_schema(struct d9_wbuf *w, uint64_t id, uint64_t name,
	const struct d9_custom_schema *s)
{
	uint8_t tmp[32 + D9_CUSTOM_MAX_FIELDS * (1 + 1 + D9_CUSTOM_NAME_MAX)];
	struct d9_wbuf b;

	d9_wbuf_init(&b, tmp, sizeof(tmp));
	d9_wbuf_u(&b, id);
	d9_wbuf_u(&b, name);
	for (uint32_t i = 0; i < s->nfields && i < D9_CUSTOM_MAX_FIELDS; i++) {
		d9_wbuf_raw(&b, &s->f[i].type, 1);
		d9_wbuf_bytes(&b, s->f[i].name, s->f[i].name_len);
	}
	if (b.err) {
		w->err = b.err;
		return;
	}
	def_emit(w, D9_DEF_CUSTOM_SCHEMA, &b);
}

void d9_def_coroutine(struct d9_wbuf *w, uint64_t id, uint64_t parent, uint64_t location,
	uint64_t flags)
{
	uint8_t buf[48];
	struct d9_wbuf b;

	d9_wbuf_init(&b, buf, sizeof(buf));
	d9_wbuf_u(&b, id);
	d9_wbuf_u(&b, parent);
	d9_wbuf_u(&b, location);
	d9_wbuf_u(&b, flags);
	def_emit(w, D9_DEF_COROUTINE, &b);
}

int d9_enc_begin(struct d9_enc *e, void *buf, size_t cap, uint32_t tid, uint32_t worker,
	uint64_t base_ticks, uint8_t shift, uint8_t flags)
{
	uint8_t *p = buf;

	if (cap < D9_ENC_MIN_BUF)
		return -ENOSPC;
	if (cap > D9_CHUNK_MAX_PAYLOAD)
		cap = D9_CHUNK_MAX_PAYLOAD;
	e->chunk = p;
	memset(e->types, 0, sizeof(e->types));
	p[0] = D9_SYNC0;
	p[1] = D9_SYNC1;
	p[2] = D9_CHUNK_EVENTS;
	p[3] = 0;
	d9_store_le32(p + 8, tid);
	d9_store_le32(p + 12, worker);
	e->shift = shift;
	e->flags = flags;
	e->last = base_ticks >> shift;
	d9_store_le64(p + 16, e->last);
	memset(e->mru, 0, sizeof(e->mru));
	e->park_prev = -1;
	e->count = 0;
	e->p = p + D9_CHUNK_HDR_LEN + D9_EVENTS_HDR_LEN;
	e->end = p + cap - D9_CHUNK_CRC_LEN - D9_ENC_EVENT_MAX + 1; /* p < end: one event fits */
	return 0;
}

size_t d9_enc_end(struct d9_enc *e, int fill_crc)
{
	uint8_t *c = e->chunk;
	uint32_t len = (uint32_t)(e->p - c - D9_CHUNK_HDR_LEN);

	d9_store_le32(c + 4, len);
	d9_store_le32(c + 24, e->count);
	d9_store_le32(c + 28, 0);
	if (fill_crc)
		d9_chunk_fill_crc(c);
	else
		d9_store_le32(c + D9_CHUNK_HDR_LEN + len, 0);
	return D9_CHUNK_OVERHEAD + len;
}

uint64_t d9_enc_first_time(const struct d9_enc *e)
{
	const uint8_t *p = e->chunk + D9_CHUNK_HDR_LEN + D9_EVENTS_HDR_LEN;
	uint64_t base;

	memcpy(&base, e->chunk + D9_CHUNK_HDR_LEN + 8, 8);
	if (!e->count)
		return base;
	uint64_t d = (p[0] >> D9_EV_DELTA_SHIFT) & 7;
	if (p[0] & D9_EV_MORE) {
		const uint8_t *q = p + 1;
		if ((p[0] & D9_EV_TYPE_MASK) == D9_EV_EXTENDED)
			while (*q++ & 0x80)
				;
		uint64_t v = 0;
		for (int shift = 0; shift < 64; shift += 7) {
			v |= (uint64_t)(*q & 0x7f) << shift;
			if (!(*q++ & 0x80))
				break;
		}
		d |= v << 3;
	}
	return base + d;
}

void d9_chunk_count_types(const uint8_t *chunk, unsigned flags,
	uint64_t counts[D9_EV_KNOWN_MAX + 1])
{
	uint32_t len;

	memcpy(&len, chunk + 4, 4);
	if (chunk[2] != D9_CHUNK_EVENTS || len < D9_EVENTS_HDR_LEN)
		return;
	const uint8_t *p = chunk + D9_CHUNK_HDR_LEN + D9_EVENTS_HDR_LEN;
	const uint8_t *end = chunk + D9_CHUNK_HDR_LEN + len;
	while (p < end) {
		uint32_t type = *p & D9_EV_TYPE_MASK;
		int more = *p++ & D9_EV_MORE;
		int sd = type == D9_EV_SCHED_DELAY && (flags & D9_SCHEMA_SCHED_DELAY);
		int nreq = 0; /* the code varint, then RequestBegin's 5 or RequestEnd's 8 fields,
			       * Mark's 1 or Value's 3: all varints */
		if (type == D9_EV_EXTENDED && (flags & D9_SCHEMA_REQUESTS) && p < end &&
			(*p == D9_EV_REQUEST_BEGIN || *p == D9_EV_REQUEST_END)) {
			nreq = *p++ == D9_EV_REQUEST_BEGIN ? 5 : 8;
			sd = 1; /* not counted per type either */
		} else if (type == D9_EV_EXTENDED && (flags & D9_SCHEMA_API) && p < end &&
			(*p == D9_EV_MARK || *p == D9_EV_VALUE)) {
			nreq = *p++ == D9_EV_MARK ? 1 : 3;
			sd = 1;
		} else if (type == D9_EV_EXTENDED && (flags & D9_SCHEMA_COMPACT_WAITS) && p < end &&
			*p == D9_EV_UNPARK_STATS) {
			p++;
			nreq = 2; /* counted with its Unpark */
			sd = 1;
		}
		if (!sd && (type == 0 || type > D9_EV_KNOWN_MAX || type == D9_EV_CUSTOM))
			return; /* not written by d9_enc_*: nothing to count reliably */
		int nvar = (more ? 1 : 0) + (nreq ? nreq : sd ? 5 : builtin_fields(type, flags));
		for (int i = 0; i < nvar && p < end; i++)
			while (p < end && (*p++ & 0x80))
				;
		if (!sd)
			counts[type]++; /* the trailer counts built-in types only */
	}
}

int d9_enc_raw(struct d9_enc *e, uint64_t ticks, uint32_t type, const void *fields, size_t len)
{
	uint64_t t = ticks >> e->shift;
	uint64_t d = t > e->last ? t - e->last : 0;
	uint8_t *p = e->p;

	/* e->end leaves D9_ENC_EVENT_MAX of slack for the head: the fields must fit before it */
	if (type == 0 || p >= e->end || (size_t)(e->end - p) < len)
		return -ENOSPC;
	if (t > e->last)
		e->last = t;
	e->count++;
	uint8_t code = type < D9_EV_EXTENDED ? (uint8_t)type : D9_EV_EXTENDED;
	*p++ = (uint8_t)(code | ((d & 7) << D9_EV_DELTA_SHIFT) | (d > 7 ? D9_EV_MORE : 0));
	if (code == D9_EV_EXTENDED)
		p = d9_put_varint(p, type);
	if (d > 7)
		p = d9_put_varint(p, d >> 3);
	if (len)
		memcpy(p, fields, len);
	e->p = p + len;
	return 0;
}

/* ---- Time ------------------------------------------------------------------------------------ */

/* (time << shift) - anchor, in ns, saturated: hostile headers cannot overflow anything. */
static int64_t ticks_to_ns(const struct d9_header *h, uint64_t time)
{
	const __int128 lim = (__int128)1 << 100;
	unsigned shift = h->time_shift & 63;
	uint64_t tps = h->ticks_per_sec ? h->ticks_per_sec : 1000000000u;

	/* Fast path, the same result with 64-bit division: time << shift and the anchor below 2^62
	 * (no clamp below can apply: |dt| < 2^62, |q| < 2^62, |r * 1e9| < 2^63 for tps <= 2^33).
	 * The analyzer converts every event twice; 128-bit division was a third of its time. */
	if (shift < 62 && !(time >> (62 - shift)) && h->anchor_ticks < (1ull << 62) &&
	    tps <= (1ull << 33)) {
		int64_t dt64 = (int64_t)(time << shift) - (int64_t)h->anchor_ticks;
		if (tps == 1000000000u)
			return dt64; /* q * 1e9 + r: within [INT64_MIN / 2, INT64_MAX / 2] */
		int64_t q64 = dt64 / (int64_t)tps, r64 = dt64 % (int64_t)tps;
		__int128 ns = (__int128)q64 * 1000000000 + r64 * 1000000000 / (int64_t)tps;
		if (ns > INT64_MAX / 2)
			ns = INT64_MAX / 2;
		if (ns < INT64_MIN / 2)
			ns = INT64_MIN / 2;
		return (int64_t)ns;
	}
	__int128 dt = (__int128)((unsigned __int128)time << shift) - (__int128)h->anchor_ticks;

	if (dt > lim)
		dt = lim;
	if (dt < -lim)
		dt = -lim;
	/* split so the product stays below 2^128: q * 1e9 + r * 1e9 / tps */
	__int128 q = dt / (__int128)tps, r = dt % (__int128)tps;
	const __int128 qlim = (__int128)1 << 64;
	if (q > qlim)
		q = qlim;
	if (q < -qlim)
		q = -qlim;
	__int128 ns = q * 1000000000 + r * 1000000000 / (__int128)tps;
	if (ns > INT64_MAX / 2)
		ns = INT64_MAX / 2;
	if (ns < INT64_MIN / 2)
		ns = INT64_MIN / 2;
	return (int64_t)ns;
}

static int64_t add_sat(uint64_t base, int64_t d)
{
	__int128 v = (__int128)base + d;

	return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

int64_t d9_time_to_mono_ns(const struct d9_header *h, uint64_t time)
{
	return add_sat(h->anchor_mono_ns, ticks_to_ns(h, time));
}

int64_t d9_time_to_realtime_ns(const struct d9_header *h, uint64_t time)
{
	return add_sat(h->anchor_realtime_ns, ticks_to_ns(h, time));
}

/* ---- Decoding: bounded cursor ----------------------------------------------------------------- */

struct cur { const uint8_t *p, *end; int err; };

static uint64_t cur_u_long(struct cur *c)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 70; shift += 7) {
		if (c->p >= c->end) {
			c->err = 1;
			return 0;
		}
		uint8_t b = *c->p++;
		if (shift == 63 && b > 1) {
			c->err = 1; /* more than 64 bits */
			return 0;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	c->err = 1;
	return 0;
}

/* One ULEB128 value; most are one byte, decoded here without the loop (same result). */
static inline uint64_t cur_u(struct cur *c)
{
	if (c->p < c->end && !(*c->p & 0x80))
		return *c->p++;
	return cur_u_long(c);
}

static const uint8_t *cur_take(struct cur *c, size_t n)
{
	if (c->err || (size_t)(c->end - c->p) < n) {
		c->err = 1;
		return NULL;
	}
	const uint8_t *p = c->p;
	c->p += n;
	return p;
}

static const uint8_t *cur_bytes(struct cur *c, size_t *n)
{
	uint64_t len = cur_u(c);

	if (c->err || len > (uint64_t)(c->end - c->p)) {
		c->err = 1;
		*n = 0;
		return NULL;
	}
	*n = (size_t)len;
	return cur_take(c, (size_t)len);
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t cur_le(struct cur *c, int n)
{
	const uint8_t *p = cur_take(c, (size_t)n);

	return p ? le(p, n) : 0;
}

/* ---- Decoding: the reader --------------------------------------------------------------------- */

struct d9_reader {
	/* input: a caller's buffer (mem), a gzFile streamed through buf, or a plain file read
	 * with pread into buf (fd1: its descriptor + 1, 0 for none) */
	gzFile gz;
	int fd1;
	uint8_t *buf; /* owned when gz or fd1 */
	size_t cap, len, pos; /* valid bytes buf[pos..len) */
	uint64_t buf_off; /* file offset of buf[0] */
	int eof;

	struct d9_header h;
	char *strings; /* storage of the header's strings */
	struct d9_schema_type schema[D9_EV_TYPE_LIMIT];
	struct d9_reader_stats st;
	d9_problem_fn *problem;
	void *problem_ctx;
	uint8_t unknown_chunk_seen[256];
	uint64_t crc_spent; /* payload bytes CRC-checked so far (the budget in chunk_valid_at) */
	uint8_t unknown_event_seen[D9_EV_TYPE_LIMIT];
	int unknown_def_seen;
};

static void report(struct d9_reader *r, int kind, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void report(struct d9_reader *r, int kind, uint64_t off, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!r->problem)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->problem(r->problem_ctx, kind, off, msg);
}

/* Makes at least `need` bytes available at buf[pos]; returns how many are (less only at EOF). */
static size_t ensure(struct d9_reader *r, size_t need)
{
	while (r->len - r->pos < need && (r->gz || r->fd1) && !r->eof) {
		if (r->pos > 0) {
			memmove(r->buf, r->buf + r->pos, r->len - r->pos);
			r->len -= r->pos;
			r->buf_off += r->pos;
			r->pos = 0;
		}
		if (r->cap - r->len < 65536 || r->cap < need) {
			size_t ncap = r->cap ? r->cap * 2 : 262144;
			while (ncap < need + 65536)
				ncap *= 2;
			uint8_t *nb = realloc(r->buf, ncap);
			if (!nb) {
				r->eof = 1;
				report(r, D9_PROB_TRUNCATED, r->buf_off + r->len, "out of memory reading input");
				break;
			}
			r->buf = nb;
			r->cap = ncap;
		}
		if (r->fd1) {
			ssize_t k;
			do
				k = pread(r->fd1 - 1, r->buf + r->len, r->cap - r->len,
					(off_t)(r->buf_off + r->len));
			while (k < 0 && errno == EINTR);
			if (k < 0) {
				report(r, D9_PROB_TRUNCATED, r->buf_off + r->len, "read error: %s",
					strerror(errno));
				r->st.truncated = 1;
				r->st.truncated_at = r->buf_off + r->len;
			}
			if (k <= 0) {
				r->eof = 1;
				break;
			}
			r->len += (size_t)k;
			continue;
		}
		int n = gzread(r->gz, r->buf + r->len, (unsigned)(r->cap - r->len));
		if (n <= 0) {
			int zerr = 0;
			const char *msg = gzerror(r->gz, &zerr);
			if (n < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR))
				report(r, D9_PROB_CORRUPT, r->buf_off + r->len, "gzip data error: %s", msg);
			else if (zerr == Z_BUF_ERROR)
				report(r, D9_PROB_TRUNCATED, r->buf_off + r->len, "gzip stream ends early");
			if (n < 0 || zerr != Z_OK) {
				r->st.truncated = 1; /* the decompressed data ends early */
				r->st.truncated_at = r->buf_off + r->len;
			}
			r->eof = 1;
			break;
		}
		r->len += (size_t)n;
	}
	return r->len - r->pos;
}

static uint64_t off_at(const struct d9_reader *r, size_t pos)
{
	return r->buf_off + pos;
}

/* Checks for a complete, valid chunk at buf[pos + rel]. Returns 1 valid, 0 invalid,
 * -1 when it may be valid but the input ends before its end. */
static int chunk_valid_at(struct d9_reader *r, size_t rel)
{
	size_t avail = ensure(r, rel + D9_CHUNK_HDR_LEN);

	if (avail < rel + D9_CHUNK_HDR_LEN)
		return -1;
	const uint8_t *p = r->buf + r->pos + rel;
	if (p[0] != D9_SYNC0 || p[1] != D9_SYNC1 || p[3] != head_check(p))
		return 0;
	uint32_t len = (uint32_t)le(p + 4, 4);
	if (len > D9_CHUNK_MAX_PAYLOAD)
		return 0;
	size_t need = rel + D9_CHUNK_OVERHEAD + len;
	avail = ensure(r, need);
	if (avail < need)
		return -1;
	p = r->buf + r->pos + rel; /* ensure may have moved the buffer */
	/* Crafted input can forge heads (check bytes included) that claim long payloads at every
	 * few bytes: one CRC budget for the whole reader, 64 MiB plus 8 times what was consumed,
	 * keeps the time linear. A real file checks each byte about once and never gets near it;
	 * past it, claimed chunks are rejected unchecked (reported as corrupt). */
	uint64_t allow = (64ull << 20) + 8 * off_at(r, r->pos);
	if (r->crc_spent + len > allow)
		return 0;
	r->crc_spent += len;
	uint32_t crc = libdeflate_crc32(0, p, D9_CHUNK_HDR_LEN + len);
	return crc == (uint32_t)le(p + D9_CHUNK_HDR_LEN + len, 4);
}

/* 1 when a chunk head whose check byte is right stands at buf[pos + rel] (or the input ends
 * within 8 bytes of it). */
static int head_ok_at(struct d9_reader *r, size_t rel)
{
	size_t avail = ensure(r, rel + D9_CHUNK_HDR_LEN);

	if (avail < rel + D9_CHUNK_HDR_LEN)
		return 1; /* the end of the input: a truncated tail */
	const uint8_t *p = r->buf + r->pos + rel;
	return p[0] == D9_SYNC0 && p[1] == D9_SYNC1 && p[3] == head_check(p) &&
		le(p + 4, 4) <= D9_CHUNK_MAX_PAYLOAD;
}

/* Resync after corruption: a candidate counts only when its head is right AND another good
 * head (or the end of the input) follows it, both checked before its payload CRC. This keeps
 * hostile input of many fake heads from costing a CRC each (quadratic time); the price is that a
 * good chunk directly followed by garbage is skipped too (counted with the corrupt bytes). */
static int resync_candidate(struct d9_reader *r, size_t rel)
{
	size_t avail = ensure(r, rel + D9_CHUNK_HDR_LEN);

	if (avail < rel + D9_CHUNK_HDR_LEN)
		return 0;
	const uint8_t *p = r->buf + r->pos + rel;
	if (p[3] != head_check(p))
		return 0;
	uint32_t len = (uint32_t)le(p + 4, 4);
	if (len > D9_CHUNK_MAX_PAYLOAD || !head_ok_at(r, rel + D9_CHUNK_OVERHEAD + len))
		return 0;
	return chunk_valid_at(r, rel) == 1;
}

static void parse_schema(struct d9_reader *r, const struct d9_chunk *c)
{
	struct cur k = { c->payload, c->payload + c->len, 0 };
	struct d9_schema_type *t = calloc(D9_EV_TYPE_LIMIT, sizeof(*t)); /* ~136 KiB: heap, not stack */

	if (!t)
		return;
	uint64_t n = cur_u(&k);
	for (uint64_t i = 0; i < n && !k.err; i++) {
		uint64_t code = cur_u(&k);
		size_t nl;
		const uint8_t *name = cur_bytes(&k, &nl);
		uint64_t nf = cur_u(&k);
		if (k.err || code == 0 || code >= 0xffffffffu || nf > 16) {
			k.err = 1;
			break;
		}
		struct d9_schema_type st = { .present = 1, .nfields = (uint8_t)nf };
		snprintf(st.name, sizeof(st.name), "%.*s", (int)(nl < 29 ? nl : 29), (const char *)name);
		for (uint64_t f = 0; f < nf && !k.err; f++) {
			const uint8_t *enc = cur_take(&k, 1);
			size_t fl;
			const uint8_t *fname = cur_bytes(&k, &fl);
			if (k.err)
				break;
			if (*enc != D9_FIELD_U && *enc != D9_FIELD_I && *enc != D9_FIELD_C &&
				*enc != D9_FIELD_B) {
				k.err = 1;
				break;
			}
			st.fields[f].enc = *enc;
			snprintf(st.fields[f].name, sizeof(st.fields[f].name), "%.*s",
				(int)(fl < 29 ? fl : 29), (const char *)fname);
			st.fields[f].slot = (int8_t)slot_of((uint32_t)code, st.fields[f].name);
		}
		if (!k.err && code < D9_EV_TYPE_LIMIT)
			t[code] = st;
	}
	if (k.err) {
		r->st.corrupt_chunks++;
		report(r, D9_PROB_CORRUPT, c->offset, "schema chunk does not parse; keeping the previous schema");
	} else {
		/* a schema describes the types it lists; types it omits keep the built-in layout */
		for (int i = 1; i < D9_EV_TYPE_LIMIT; i++)
			if (t[i].present)
				r->schema[i] = t[i];
	}
	free(t);
}

int d9_reader_next(struct d9_reader *r, struct d9_chunk *c)
{
	for (;;) {
		size_t avail = ensure(r, D9_CHUNK_HDR_LEN);
		if (avail == 0)
			return 0;
		int v = chunk_valid_at(r, 0);
		if (v != 1) {
			/* Bad or incomplete chunk here: find the next valid one after it. */
			uint64_t bad = off_at(r, r->pos);
			int first = v;
			size_t skip = 1;
			for (;;) {
				avail = ensure(r, skip + D9_CHUNK_HDR_LEN);
				if (avail < skip + D9_CHUNK_HDR_LEN) {
					skip = avail;
					break;
				}
				const uint8_t *p = r->buf + r->pos + skip;
				if (p[0] == D9_SYNC0 && p[1] == D9_SYNC1 && resync_candidate(r, skip))
					break;
				skip++;
			}
			if (skip >= avail && first == -1) {
				r->st.truncated = 1;
				r->st.truncated_at = bad;
				report(r, D9_PROB_TRUNCATED, bad,
					"segment truncated: incomplete chunk at offset %llu (%zu bytes)",
					(unsigned long long)bad, avail);
			} else {
				r->st.corrupt_chunks++;
				report(r, D9_PROB_CORRUPT, bad, "corrupt chunk at offset %llu: skipped %zu bytes",
					(unsigned long long)bad, skip);
			}
			r->st.skipped_bytes += skip;
			r->pos += skip;
			continue;
		}
		const uint8_t *p = r->buf + r->pos;
		memset(c, 0, sizeof(*c));
		c->type = p[2];
		c->flags = 0; /* byte 3 is the head check */
		c->len = (uint32_t)le(p + 4, 4);
		c->payload = p + D9_CHUNK_HDR_LEN;
		c->offset = off_at(r, r->pos);
		r->pos += D9_CHUNK_OVERHEAD + c->len;
		r->st.chunks++;
		switch (c->type) {
		case D9_CHUNK_EVENTS:
			if (c->len < D9_EVENTS_HDR_LEN) {
				r->st.corrupt_chunks++;
				report(r, D9_PROB_CORRUPT, c->offset, "events chunk shorter than its head");
				continue;
			}
			c->tid = (uint32_t)le(c->payload, 4);
			c->worker = (uint32_t)le(c->payload + 4, 4);
			c->base_time = le(c->payload + 8, 8);
			c->count = (uint32_t)le(c->payload + 16, 4);
			c->ev_flags = (uint32_t)le(c->payload + 20, 4);
			return 1;
		case D9_CHUNK_SCHEMA:
			parse_schema(r, c);
			return 1;
		case D9_CHUNK_TRAILER:
			r->st.sealed = 1;
			return 1;
		case D9_CHUNK_DEFS:
			return 1;
		case D9_CHUNK_HEADER:
			report(r, D9_PROB_CORRUPT, c->offset, "second header chunk ignored");
			r->st.corrupt_chunks++;
			continue;
		default:
			r->st.unknown_chunks++;
			if (!r->unknown_chunk_seen[c->type]) {
				r->unknown_chunk_seen[c->type] = 1;
				report(r, D9_PROB_UNKNOWN_CHUNK, c->offset,
					"unknown chunk type %u skipped (written by a newer d9?)", c->type);
			}
			continue;
		}
	}
}

static int parse_header(struct d9_reader *r, const uint8_t *p, uint32_t len)
{
	struct cur k = { p, p + len, 0 };
	struct d9_header *h = &r->h;
	const uint8_t *s[5];
	size_t n[5], total = 0;

	h->pid = (uint32_t)cur_le(&k, 4);
	h->ppid = (uint32_t)cur_le(&k, 4);
	h->segment_seq = (uint32_t)cur_le(&k, 4);
	h->clock_source = (uint8_t)cur_le(&k, 1);
	h->time_shift = (uint8_t)cur_le(&k, 1);
	cur_le(&k, 2);
	h->ticks_per_sec = cur_le(&k, 8);
	h->anchor_ticks = cur_le(&k, 8);
	h->anchor_mono_ns = cur_le(&k, 8);
	h->anchor_realtime_ns = cur_le(&k, 8);
	h->start_realtime_ns = cur_le(&k, 8);
	for (int i = 0; i < 5; i++) {
		s[i] = cur_bytes(&k, &n[i]);
		total += n[i] + 1;
	}
	if (k.err || h->ticks_per_sec == 0 || h->time_shift > 40 || h->clock_source > D9_CLOCK_TSC)
		return D9_ENOHEADER;
	r->strings = malloc(total);
	if (!r->strings)
		return -ENOMEM;
	char *q = r->strings;
	const char **dst[5] = { &h->writer, &h->process, &h->cmdline, &h->hostname, &h->boot_id };
	for (int i = 0; i < 5; i++) {
		if (n[i])
			memcpy(q, s[i], n[i]);
		q[n[i]] = 0;
		*dst[i] = q;
		if (i == 2) {
			/* arguments are NUL-separated on disk; joined by spaces for display */
			for (size_t j = 0; j + 1 < n[i]; j++)
				if (q[j] == 0)
					q[j] = ' ';
			h->cmdline_len = n[i] && q[n[i] - 1] == 0 ? n[i] - 1 : n[i];
		}
		q += n[i] + 1;
	}
	return 0;
}

static int reader_start(struct d9_reader *r)
{
	for (uint32_t t = 1; t <= D9_EV_KNOWN_MAX; t++)
		builtin_schema(&r->schema[t], t);
	size_t avail = ensure(r, D9_PREFIX_LEN);
	if (avail == 0)
		return D9_ETRUNC;
	const uint8_t *p = r->buf + r->pos;
	if (memcmp(p, D9_MAGIC, avail < D9_MAGIC_LEN ? avail : D9_MAGIC_LEN) != 0)
		return D9_ENOTTRACE;
	if (avail < D9_PREFIX_LEN)
		return D9_ETRUNC;
	r->h.major = (uint16_t)le(p + 8, 2);
	r->h.minor = (uint16_t)le(p + 10, 2);
	if (r->h.major != D9_FORMAT_MAJOR)
		return D9_EVERSION;
	r->pos += D9_PREFIX_LEN;
	int v = chunk_valid_at(r, 0);
	if (v == -1)
		return D9_ETRUNC;
	p = r->buf + r->pos;
	if (v == 0 || p[2] != D9_CHUNK_HEADER)
		return D9_ENOHEADER;
	uint32_t len = (uint32_t)le(p + 4, 4);
	int err = parse_header(r, p + D9_CHUNK_HDR_LEN, len);
	if (err)
		return err;
	r->pos += D9_CHUNK_OVERHEAD + len;
	r->st.chunks = 1;
	r->st.data_start = off_at(r, r->pos);
	return 0;
}

int d9_reader_open_mem(struct d9_reader **out, const void *buf, size_t len)
{
	struct d9_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->buf = (uint8_t *)buf;
	r->len = len;
	int err = reader_start(r);
	if (err) {
		d9_reader_close(r);
		return err;
	}
	*out = r;
	return 0;
}

/* A reader over fd (-1: err_open, e.g. -errno of the failed open); takes fd. A plain file is
 * read with pread straight into the reader's buffer; a gzip one (or what pread cannot read, a
 * pipe) through zlib, which reads plain data unchanged too. path (NULL: unknown) is opened
 * again by zlib for a gzip file, so that its messages name it (FORMAT.md section 5). */
static int reader_open_any(struct d9_reader **out, int fd, int err_open, const char *path)
{
	struct d9_reader *r;
	uint8_t magic[2];
	int err;

	*out = NULL;
	if (fd < 0)
		return err_open;
	if (!(r = calloc(1, sizeof(*r)))) {
		close(fd);
		return -ENOMEM;
	}
	ssize_t k;
	do
		k = pread(fd, magic, 2, 0);
	while (k < 0 && errno == EINTR);
	if (k >= 0 && !(k == 2 && magic[0] == 0x1f && magic[1] == 0x8b)) {
		r->fd1 = fd + 1;
	} else if (!(r->gz = path ? gzopen(path, "rbe") : gzdopen(fd, "rb"))) {
		err = path ? (errno ? -errno : -ENOMEM) : -ENOMEM;
		close(fd);
		free(r);
		return err;
	} else {
		if (path)
			close(fd); /* zlib opened the path itself (e: O_CLOEXEC) */
		/* zlib inflates straight into our buffer when asked for at least twice its own
		 * buffer, else through its buffer and a copy: ensure() asks for 64 KiB or more */
		gzbuffer(r->gz, 32768);
	}
	err = reader_start(r);
	if (err) {
		d9_reader_close(r);
		return err;
	}
	*out = r;
	return 0;
}

int d9_reader_open_file(struct d9_reader **out, const char *path)
{
	struct stat st;

	*out = NULL;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return reader_open_any(out, fd, -errno, path);
}

int d9_reader_open_fd(struct d9_reader **out, int fd)
{
	/* owns fd from here on, closed by d9_reader_close */
	return reader_open_any(out, fd, -EBADF, NULL);
}

void d9_reader_close(struct d9_reader *r)
{
	if (!r)
		return;
	if (r->gz) {
		gzclose(r->gz);
		free(r->buf);
	} else if (r->fd1) {
		close(r->fd1 - 1);
		free(r->buf);
	}
	free(r->strings);
	free(r);
}

void d9_reader_on_problem(struct d9_reader *r, d9_problem_fn *fn, void *ctx)
{
	r->problem = fn;
	r->problem_ctx = ctx;
}

const struct d9_header *d9_reader_header(const struct d9_reader *r)
{
	return &r->h;
}

const struct d9_reader_stats *d9_reader_stats(const struct d9_reader *r)
{
	return &r->st;
}

const struct d9_schema_type *d9_reader_schema(const struct d9_reader *r, uint32_t t)
{
	return t < D9_EV_TYPE_LIMIT && r->schema[t].present ? &r->schema[t] : NULL;
}

int d9_trailer_decode(const struct d9_chunk *c, struct d9_trailer *t)
{
	struct cur k = { c->payload, c->payload + c->len, 0 };

	memset(t, 0, sizeof(*t));
	if (c->type != D9_CHUNK_TRAILER)
		return -EINVAL;
	t->events = cur_le(&k, 8);
	t->chunks = cur_le(&k, 8);
	t->first_time = cur_le(&k, 8);
	t->last_time = cur_le(&k, 8);
	t->dropped_events = cur_le(&k, 8);
	t->dropped_samples = cur_le(&k, 8);
	t->flags = (uint32_t)cur_le(&k, 4);
	uint64_t n = cur_u(&k);
	for (uint64_t i = 0; i < n && !k.err; i++) {
		uint64_t type = cur_u(&k), count = cur_u(&k);
		if (!k.err && type <= D9_EV_KNOWN_MAX) {
			t->type_counts[type] = count;
			t->ntypes++;
		}
	}
	if (!k.err && k.p < k.end) {
		t->budget_deleted_segments = cur_u(&k);
		t->budget_deleted_bytes = cur_u(&k);
	}
	if (!k.err && k.p < k.end) {
		t->s3_uploaded = cur_u(&k);
		t->s3_uploaded_bytes = cur_u(&k);
		t->s3_failures = cur_u(&k);
		t->s3_evicted = cur_u(&k);
	}
	if (!k.err && k.p < k.end)
		t->end_time = cur_u(&k);
	return k.err ? D9_ECORRUPT : 0;
}

/* ---- Decoding: definitions ---------------------------------------------------------------------- */

void d9_defs_init(struct d9_defs_iter *it, struct d9_reader *r, const struct d9_chunk *c)
{
	it->r = r;
	it->p = it->start = c->payload;
	it->end = c->type == D9_CHUNK_DEFS ? c->payload + c->len : c->payload;
	it->base_off = c->offset + D9_CHUNK_HDR_LEN;
}

static int def_body(struct d9_def *d, struct cur *k)
{
	switch (d->kind) {
	case D9_DEF_STRING:
		d->id = cur_u(k);
		d->u.string.s = (const char *)k->p;
		d->u.string.len = k->err ? 0 : (size_t)(k->end - k->p);
		break;
	case D9_DEF_LOCATION:
		d->id = cur_u(k);
		d->u.location.function_addr = cur_u(k);
		d->u.location.callsite_addr = cur_u(k);
		d->u.location.module = cur_u(k);
		d->u.location.name = cur_u(k);
		break;
	case D9_DEF_STACK: {
		d->id = cur_u(k);
		uint64_t n = cur_u(k);
		if (n > D9_STACK_MAX_FRAMES)
			return -1;
		d->u.stack.nframes = (uint32_t)n;
		for (uint64_t i = 0; i < n && !k->err; i++)
			d->u.stack.frames[i] = i == 0 ? cur_u(k) :
				d->u.stack.frames[i - 1] + (uint64_t)d9_unzigzag(cur_u(k));
		break;
	}
	case D9_DEF_MODULE:
		d->id = cur_u(k);
		d->u.module.path = cur_u(k);
		d->u.module.start = cur_u(k);
		d->u.module.end = cur_u(k);
		d->u.module.offset = cur_u(k);
		d->u.module.build_id = cur_bytes(k, &d->u.module.build_id_len);
		break;
	case D9_DEF_SYMBOL:
		d->u.symbol.start = cur_u(k);
		d->u.symbol.len = cur_u(k);
		d->u.symbol.function = cur_u(k);
		d->u.symbol.file = cur_u(k);
		d->u.symbol.line = cur_u(k);
		d->u.symbol.inline_depth = cur_u(k);
		break;
	case D9_DEF_THREAD:
		d->id = cur_u(k);
		d->u.thread.name = cur_u(k);
		d->u.thread.worker = cur_u(k);
		d->u.thread.role = cur_u(k);
		break;
	case D9_DEF_CLOCK_SYNC:
		d->u.clock.ticks = cur_u(k);
		d->u.clock.mono_ns = cur_u(k);
		d->u.clock.realtime_ns = cur_u(k);
		break;
	case D9_DEF_COROUTINE:
		d->id = cur_u(k);
		d->u.coroutine.parent = cur_u(k);
		d->u.coroutine.location = cur_u(k);
		d->u.coroutine.flags = cur_u(k);
		break;
	case D9_DEF_PRIVILEGES:
		d->id = 0;
		d->u.privileges.from_uid = cur_u(k);
		d->u.privileges.to_uid = cur_u(k);
		d->u.privileges.flags = cur_u(k);
		break;
	case D9_DEF_RECORDER:
		d->id = 0;
		d->u.recorder.feature = cur_u(k);
		d->u.recorder.state = cur_u(k);
		d->u.recorder.err = cur_u(k);
		d->u.recorder.text = cur_u(k);
		break;
	case D9_DEF_CUSTOM_SCHEMA: {
		d->id = cur_u(k);
		d->u.custom_schema.name = cur_u(k);
		d->u.custom_schema.fields = k->p;
		d->u.custom_schema.fields_len = k->err ? 0 : (size_t)(k->end - k->p);
		/* the field description is checked here, so a damaged one is a malformed record */
		struct d9_custom_schema cs;
		if (!k->err && (d->id == 0 || d9_custom_schema_parse(d->u.custom_schema.fields,
			d->u.custom_schema.fields_len, &cs)))
			return -1;
		break;
	}
	default:
		return 1;
	}
	return k->err ? -1 : 0;
}

int d9_defs_next(struct d9_defs_iter *it, struct d9_def *d)
{
	while (it->p < it->end) {
		struct cur k = { it->p, it->end, 0 };
		uint64_t off = it->base_off + (uint64_t)(it->p - it->start);
		const uint8_t *kind = cur_take(&k, 1);
		size_t blen;
		const uint8_t *body = cur_bytes(&k, &blen);
		if (k.err) {
			it->p = it->end;
			it->r->st.bad_defs++;
			report(it->r, D9_PROB_CORRUPT, off, "definition record overruns its chunk");
			return D9_ECORRUPT;
		}
		it->p = k.p;
		d->kind = *kind;
		d->id = 0;
		memset(&d->u, 0, sizeof(d->u.location));
		struct cur b = { body, body + blen, 0 };
		int v = def_body(d, &b);
		if (v == 1) {
			if (!it->r->unknown_def_seen) {
				it->r->unknown_def_seen = 1;
				report(it->r, D9_PROB_UNKNOWN_DEF, off,
					"unknown definition kind %u skipped", *kind);
			}
			continue;
		}
		if (v < 0) {
			it->r->st.bad_defs++;
			report(it->r, D9_PROB_CORRUPT, off, "malformed %s definition skipped",
				d9_def_name(d->kind));
			continue;
		}
		return 1;
	}
	return 0;
}

/* ---- Decoding: events ------------------------------------------------------------------------- */

void d9_events_init(struct d9_events_iter *it, struct d9_reader *r, const struct d9_chunk *c)
{
	it->r = r;
	it->start = c->payload;
	it->base_off = c->offset + D9_CHUNK_HDR_LEN;
	if (c->type != D9_CHUNK_EVENTS || c->len < D9_EVENTS_HDR_LEN) {
		it->p = it->end = c->payload;
		it->left = 0;
		return;
	}
	it->p = c->payload + D9_EVENTS_HDR_LEN;
	it->end = c->payload + c->len;
	it->time = c->base_time;
	memset(it->mru, 0, sizeof(it->mru));
	it->park_timeout = -1;
	it->left = c->count;
}

static int events_fail(struct d9_events_iter *it, uint64_t off, const char *why)
{
	it->p = it->end;
	it->r->st.bad_events++;
	report(it->r, D9_PROB_BAD_EVENT, off, "%s at offset %llu; rest of chunk skipped", why,
		(unsigned long long)off);
	return D9_ECORRUPT;
}

void d9_reader_bad_event(struct d9_reader *r, uint64_t offset, const char *msg)
{
	r->st.bad_events++;
	report(r, D9_PROB_BAD_EVENT, offset, "%s at offset %llu", msg, (unsigned long long)offset);
}

/* The UnparkStats at it->p, when the schema names code 20 so, into the Unpark just decoded
 * (FORMAT.md, "Unpark statistics"). Damage in it is reported as usual; the Unpark stands. */
static void merge_unpark_stats(struct d9_events_iter *it, struct d9_event *ev)
{
	const struct d9_schema_type *s = &it->r->schema[D9_EV_UNPARK_STATS];
	struct d9_event st;

	if (!s->present || strcmp(s->name, D9_UNPARK_STATS_NAME) != 0 ||
		d9_events_next(it, &st) != 1)
		return;
	/* both statistics are the Unpark's fields now, known or not (a name missing: unknown) */
	ev->nfields = D9_F_UNPARK_SCHED_WAIT_NS + 1;
	ev->stats_merged = 1;
	for (int i = 0; i < s->nfields && i < D9_EV_MAX_FIELDS; i++) {
		int to = !strcmp(s->fields[i].name, "cpu_ns+1") ? D9_F_UNPARK_CPU_NS :
			!strcmp(s->fields[i].name, "sched_wait_ns+1") ? D9_F_UNPARK_SCHED_WAIT_NS : -1;
		if (to >= 0)
			ev->f[to] = st.f[i] ? st.f[i] - 1 : D9_UNKNOWN;
	}
}

int d9_events_next(struct d9_events_iter *it, struct d9_event *ev)
{
	if (it->p >= it->end)
		return 0;
	struct cur k = { it->p, it->end, 0 };
	uint64_t off = it->base_off + (uint64_t)(it->p - it->start);
	uint8_t b0 = *k.p++;
	uint64_t type = b0 & D9_EV_TYPE_MASK, delta = (b0 >> D9_EV_DELTA_SHIFT) & 7;

	if (type == 0)
		return events_fail(it, off, "event type 0");
	if (type == D9_EV_EXTENDED) {
		type = cur_u(&k);
		if (k.err || type > 0xffffffffu)
			return events_fail(it, off, "bad extended event type");
	}
	if (b0 & D9_EV_MORE) {
		uint64_t high = cur_u(&k);
		if (k.err || high >> 61)
			return events_fail(it, off, "bad time delta");
		delta |= high << 3;
	}
	const struct d9_schema_type *s = type < D9_EV_TYPE_LIMIT && it->r->schema[type].present ?
		&it->r->schema[type] : NULL;
	if (!s) {
		if (type < D9_EV_TYPE_LIMIT && !it->r->unknown_event_seen[type]) {
			it->r->unknown_event_seen[type] = 1;
			report(it->r, D9_PROB_UNKNOWN_EVENT, off,
				"event type %llu has no schema", (unsigned long long)type);
		}
		return events_fail(it, off, "undescribed event type");
	}
	/* field by field, not memset: a 168-byte memset compiles to `rep stos`, which cost a
	 * sixth of the analyzer's time */
	ev->type = (uint32_t)type;
	ev->nfields = 0;
	for (int j = 0; j < D9_EV_MAX_FIELDS; j++) {
		ev->f[j] = 0;
		ev->fdata[j] = NULL;
	}
	if (type == D9_EV_UNPARK) {
		ev->stats_merged = 0; /* read for Unparks only */
		/* not listed by the schema, or listed as unknown: never a measured 0 */
		ev->f[D9_F_UNPARK_CPU_NS] = D9_UNKNOWN;
		ev->f[D9_F_UNPARK_SCHED_WAIT_NS] = D9_UNKNOWN;
	} else if (type == D9_EV_CPU_SAMPLE) {
		ev->f[D9_F_CPU_WEIGHT_NS] = D9_UNKNOWN; /* not listed, or unknown: never a measured 0 */
	}
	ev->data = NULL;
	ev->data_len = 0;
	ev->offset = off;
	it->time += delta;
	ev->time = it->time;
	int known = type <= D9_EV_KNOWN_MAX;
	for (int i = 0; i < s->nfields; i++) {
		const struct d9_schema_field *f = &s->fields[i];
		uint64_t v = 0;
		if (f->enc == D9_FIELD_B) {
			size_t n;
			const uint8_t *d = cur_bytes(&k, &n);
			if (!k.err && !ev->data) {
				ev->data = d;
				ev->data_len = (uint32_t)n;
			}
			int bslot = known ? f->slot : i;
			if (!k.err && bslot >= 0 && bslot < D9_EV_MAX_FIELDS) {
				ev->fdata[bslot] = d;
				ev->flen[bslot] = (uint32_t)n;
			}
			v = n;
		} else {
			v = cur_u(&k);
			if (f->enc == D9_FIELD_C && v != 0) {
				uint64_t *m = it->mru;
				uint64_t id;
				if (v <= D9_MRU) {
					id = m[v - 1];
					if (!id) /* a slot no coroutine has filled yet */
						return events_fail(it, off, "coroutine field names an empty slot");
					for (uint64_t j = v - 1; j > 0; j--)
						m[j] = m[j - 1];
				} else {
					id = m[0] + (uint64_t)d9_unzigzag(v - D9_MRU - 1);
					if (!id) /* 0 means "none" and is never coded this way */
						return events_fail(it, off, "coroutine field decodes to id 0");
					for (int j = D9_MRU - 1; j > 0; j--)
						m[j] = m[j - 1];
				}
				m[0] = id;
				v = id;
			} else if (f->enc == D9_FIELD_I) {
				v = (uint64_t)d9_unzigzag(v);
			}
		}
		if (k.err)
			return events_fail(it, off, "event overruns its chunk");
		int slot = known ? f->slot : i;
		if (slot == D9_SLOT_KIND_OBJECT) {
			ev->f[D9_F_WAKE_KIND] = v & 7;
			ev->f[D9_F_WAKE_OBJECT] = (uint64_t)d9_unzigzag(v >> 3);
			if (ev->nfields < 4)
				ev->nfields = 4;
		} else if (slot == D9_SLOT_WEIGHT_NS_P1) {
			ev->f[D9_F_CPU_WEIGHT_NS] = v ? v - 1 : D9_UNKNOWN;
			if (D9_F_CPU_WEIGHT_NS + 1 > (int)ev->nfields)
				ev->nfields = D9_F_CPU_WEIGHT_NS + 1;
		} else if (slot == D9_SLOT_TIMEOUT_DELTA) {
			ev->f[D9_F_PARK_TIMEOUT_US] = (uint64_t)it->park_timeout + v;
			if (D9_F_PARK_TIMEOUT_US + 1 > (int)ev->nfields)
				ev->nfields = D9_F_PARK_TIMEOUT_US + 1;
		} else if (slot == D9_SLOT_CPU_NS_P1 || slot == D9_SLOT_SCHED_WAIT_NS_P1) {
			int to = slot == D9_SLOT_CPU_NS_P1 ? D9_F_UNPARK_CPU_NS : D9_F_UNPARK_SCHED_WAIT_NS;
			ev->f[to] = v ? v - 1 : D9_UNKNOWN;
			if (to + 1 > (int)ev->nfields)
				ev->nfields = (uint32_t)to + 1;
		} else if (slot >= 0 && slot < D9_EV_MAX_FIELDS) {
			ev->f[slot] = v;
			if (slot + 1 > (int)ev->nfields)
				ev->nfields = (uint32_t)slot + 1;
		}
	}
	it->p = k.p;
	if (it->left)
		it->left--;
	if (type == D9_EV_PARK)
		it->park_timeout = (int64_t)ev->f[D9_F_PARK_TIMEOUT_US];
	else if (type == D9_EV_UNPARK && it->end - it->p >= 2 && it->p[0] == D9_EV_EXTENDED &&
		it->p[1] == D9_EV_UNPARK_STATS)
		merge_unpark_stats(it, ev);
	return 1;
}

/* ---- Custom events (FORMAT.md, "CustomSchema" and "CustomEvent") ------------------------------ */

/* Bytes a field's value takes at most in a payload. */
static size_t custom_field_max(const struct d9_custom_field *f)
{
	switch (f->type) {
	case D9_CT_U64:
	case D9_CT_I64:
		return 10;
	case D9_CT_F64:
		return 8;
	default:
		return 2 + (size_t)f->max_len; /* max_len <= 4096: a 2-byte varint */
	}
}

size_t d9_custom_max_data(const struct d9_custom_schema *s)
{
	size_t n = 0;

	for (uint32_t i = 0; i < s->nfields && i < D9_CUSTOM_MAX_FIELDS; i++)
		n += custom_field_max(&s->f[i]);
	return n;
}

int d9_custom_schema_parse(const uint8_t *p, size_t len, struct d9_custom_schema *s)
{
	struct cur k = { p, p + len, 0 };
	uint32_t n = 0;

	s->nfields = 0;
	while (k.p < k.end) {
		struct d9_custom_field *f = &s->f[n];
		if (n == D9_CUSTOM_MAX_FIELDS)
			return D9_ECORRUPT;
		const uint8_t *t = cur_take(&k, 1);
		size_t nlen;
		const uint8_t *name = cur_bytes(&k, &nlen);
		if (k.err || nlen == 0 || nlen > D9_CUSTOM_NAME_MAX)
			return D9_ECORRUPT;
		if (*t != D9_CT_U64 && *t != D9_CT_I64 && *t != D9_CT_F64 && *t != D9_CT_STR &&
			*t != D9_CT_BYTES)
			return D9_ECORRUPT;
		f->type = *t;
		f->name = (const char *)name;
		f->name_len = (uint8_t)nlen;
		f->max_len = 0; /* not on disk: a value is at most D9_CUSTOM_DATA_MAX bytes */
		n++;
	}
	s->nfields = n;
	return 0;
}

int d9_custom_decode(const struct d9_custom_schema *s, const uint8_t *data, size_t len,
	struct d9_custom_value *out)
{
	struct cur k = { data, data + len, 0 };

	if (!data && len)
		return D9_ECORRUPT;
	for (uint32_t i = 0; i < s->nfields && i < D9_CUSTOM_MAX_FIELDS; i++) {
		const struct d9_custom_field *f = &s->f[i];
		struct d9_custom_value *v = &out[i];
		v->type = f->type;
		v->u = 0;
		v->p = NULL;
		v->len = 0;
		switch (f->type) {
		case D9_CT_U64:
			v->u = cur_u(&k);
			break;
		case D9_CT_I64:
			v->u = (uint64_t)d9_unzigzag(cur_u(&k));
			break;
		case D9_CT_F64:
			v->u = cur_le(&k, 8);
			break;
		default:
			v->p = cur_bytes(&k, &v->len);
			if (!k.err && v->len > (f->max_len ? f->max_len : D9_CUSTOM_DATA_MAX))
				return D9_ECORRUPT;
			break;
		}
		if (k.err)
			return D9_ECORRUPT;
	}
	return k.p == k.end ? 0 : D9_ECORRUPT;
}
