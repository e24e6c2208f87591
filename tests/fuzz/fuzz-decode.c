/* fuzz-decode.c: libFuzzer target for the d9 v1 decoder (format/format.c, FORMAT.md).
 * Each input is decoded three ways: as given, with every chunk's CRC recomputed (so mutations
 * inside payloads reach the record and event decoders instead of dying at the CRC check), and
 * through the gzip/file reader; the memory and file readers must agree exactly. Every byte the
 * reader hands out is touched so ASan sees any out-of-bounds pointer. Must never leak, print per
 * input (unless D9_FUZZ_SUMMARY is set) or keep state between inputs beyond the scratch file. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "d9-format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the reader API broke: abort so libFuzzer records the input. */
#define CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz-decode: check failed at %s:%d: %s\n", __FILE__, __LINE__, \
				#cond); \
			abort(); \
		} \
	} while (0)

/* What one decode saw; `hash` covers every value and byte handed out, so two readers over the
 * same bytes must produce the same digest. */
struct digest {
	uint64_t hash;
	int open_err;
	uint64_t chunks, events, defs, problems;
	uint64_t bad_iters; /* iterations and decodes that ended in D9_ECORRUPT, bad defs */
};

static int summary; /* D9_FUZZ_SUMMARY set: one line per decode on stderr (corpus test) */
static int scratch_fd = -1; /* memfd the file pass writes each input to */
static char scratch_path[64];

static void mix(struct digest *d, uint64_t v)
{
	d->hash ^= v + 0x9e3779b97f4a7c15ull + (d->hash << 6) + (d->hash >> 2);
}

static void mix_bytes(struct digest *d, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	mix(d, h);
	mix(d, n);
}

static void mix_str(struct digest *d, const char *s)
{
	CHECK(s != NULL);
	mix_bytes(d, s, strlen(s));
}

static void on_problem(void *ctx, int kind, uint64_t offset, const char *msg)
{
	struct digest *d = ctx;
	char line[512];

	CHECK(kind >= D9_PROB_TRUNCATED && kind <= D9_PROB_BAD_EVENT);
	CHECK(msg != NULL);
	int n = snprintf(line, sizeof(line), "problem %d at offset %llu: %s", kind,
		(unsigned long long)offset, msg);
	CHECK(n > 0);
	if (summary)
		fprintf(stderr, "d9-fuzz %s\n", line);
	mix_bytes(d, line, strlen(line));
	d->problems++;
}

/* The pointer range [p, p+n) lies inside the chunk payload. */
static int in_payload(const struct d9_chunk *c, const void *p, size_t n)
{
	const uint8_t *b = p;

	return b >= c->payload && b <= c->payload + c->len && n <= (size_t)(c->payload + c->len - b);
}

static void walk_schema(struct digest *d, struct d9_reader *r)
{
	static const uint32_t far[] = { D9_EV_TYPE_LIMIT, D9_EV_TYPE_LIMIT + 1, 0x7fffffffu,
		0xffffffffu };

	for (uint32_t t = 0; t < D9_EV_TYPE_LIMIT; t++) {
		const struct d9_schema_type *s = d9_reader_schema(r, t);
		if (!s)
			continue;
		CHECK(t != 0 && s->present);
		CHECK(s->nfields <= 16);
		CHECK(memchr(s->name, 0, sizeof(s->name)) != NULL);
		mix(d, t);
		mix_str(d, s->name);
		for (int i = 0; i < s->nfields; i++) {
			const struct d9_schema_field *f = &s->fields[i];
			CHECK(f->enc == D9_FIELD_U || f->enc == D9_FIELD_I || f->enc == D9_FIELD_C ||
				f->enc == D9_FIELD_B);
			CHECK(memchr(f->name, 0, sizeof(f->name)) != NULL);
			mix(d, f->enc);
			mix(d, (uint64_t)(int64_t)f->slot);
			mix_str(d, f->name);
		}
	}
	for (size_t i = 0; i < sizeof(far) / sizeof(far[0]); i++)
		CHECK(d9_reader_schema(r, far[i]) == NULL);
}

static void walk_header(struct digest *d, const struct d9_header *h)
{
	mix(d, h->major);
	mix(d, h->minor);
	mix(d, h->pid);
	mix(d, h->ppid);
	mix(d, h->segment_seq);
	mix(d, h->clock_source);
	mix(d, h->time_shift);
	mix(d, h->ticks_per_sec);
	mix(d, h->anchor_ticks);
	mix(d, h->anchor_mono_ns);
	mix(d, h->anchor_realtime_ns);
	mix(d, h->start_realtime_ns);
	mix_str(d, h->writer);
	mix_str(d, h->process);
	mix_str(d, h->hostname);
	mix_str(d, h->boot_id);
	CHECK(h->cmdline != NULL);
	mix_bytes(d, h->cmdline, h->cmdline_len + 1); /* the copy is NUL-terminated */
	CHECK(h->cmdline[h->cmdline_len] == 0 || h->cmdline_len < strlen(h->cmdline) + 1);
	/* the ends of the time range, whatever the header says */
	mix(d, (uint64_t)d9_time_to_mono_ns(h, 0));
	mix(d, (uint64_t)d9_time_to_mono_ns(h, UINT64_MAX));
	mix(d, (uint64_t)d9_time_to_realtime_ns(h, UINT64_MAX));
	mix(d, (uint64_t)d9_time_to_realtime_ns(h, h->anchor_ticks >> (h->time_shift & 63)));
}

static void walk_defs(struct digest *d, struct d9_reader *r, const struct d9_chunk *c)
{
	struct d9_defs_iter it;
	struct d9_def def;
	uint64_t n = 0;
	int v;

	d9_defs_init(&it, r, c);
	while ((v = d9_defs_next(&it, &def)) == 1) {
		CHECK(++n <= (uint64_t)c->len / 2); /* a record is at least kind + length */
		CHECK(def.kind >= 1 && def.kind <= D9_DEF_KNOWN_MAX);
		mix(d, def.kind);
		mix(d, def.id);
		mix_str(d, d9_def_name(def.kind));
		switch (def.kind) {
		case D9_DEF_STRING:
			CHECK(def.u.string.len == 0 || in_payload(c, def.u.string.s, def.u.string.len));
			mix_bytes(d, def.u.string.s, def.u.string.len);
			break;
		case D9_DEF_LOCATION:
			mix(d, def.u.location.function_addr);
			mix(d, def.u.location.callsite_addr);
			mix(d, def.u.location.module);
			mix(d, def.u.location.name);
			break;
		case D9_DEF_STACK:
			CHECK(def.u.stack.nframes <= D9_STACK_MAX_FRAMES);
			mix_bytes(d, def.u.stack.frames, def.u.stack.nframes * sizeof(uint64_t));
			break;
		case D9_DEF_MODULE:
			mix(d, def.u.module.path);
			mix(d, def.u.module.start);
			mix(d, def.u.module.end);
			mix(d, def.u.module.offset);
			CHECK(def.u.module.build_id_len == 0 ||
				in_payload(c, def.u.module.build_id, def.u.module.build_id_len));
			mix_bytes(d, def.u.module.build_id, def.u.module.build_id_len);
			break;
		case D9_DEF_SYMBOL:
			mix(d, def.u.symbol.start);
			mix(d, def.u.symbol.len);
			mix(d, def.u.symbol.function);
			mix(d, def.u.symbol.file);
			mix(d, def.u.symbol.line);
			mix(d, def.u.symbol.inline_depth);
			break;
		case D9_DEF_THREAD:
			mix(d, def.u.thread.name);
			mix(d, def.u.thread.worker);
			mix(d, def.u.thread.role);
			break;
		case D9_DEF_CLOCK_SYNC:
			mix(d, def.u.clock.ticks);
			mix(d, def.u.clock.mono_ns);
			mix(d, def.u.clock.realtime_ns);
			break;
		case D9_DEF_COROUTINE:
			mix(d, def.u.coroutine.parent);
			mix(d, def.u.coroutine.location);
			mix(d, def.u.coroutine.flags);
			break;
		case D9_DEF_CUSTOM_SCHEMA:
			mix(d, def.u.custom_schema.name);
			CHECK(def.u.custom_schema.fields_len == 0 ||
				in_payload(c, def.u.custom_schema.fields, def.u.custom_schema.fields_len));
			mix_bytes(d, def.u.custom_schema.fields, def.u.custom_schema.fields_len);
			break;
		}
	}
	CHECK(v == 0 || v == D9_ECORRUPT);
	d->bad_iters += v != 0;
	CHECK(d9_defs_next(&it, &def) == 0); /* an ended iterator stays ended */
	d->defs += n;
}

static void walk_events(struct digest *d, struct d9_reader *r, const struct d9_chunk *c)
{
	const struct d9_header *h = d9_reader_header(r);
	struct d9_events_iter it;
	struct d9_event ev;
	uint64_t n = 0;
	int v;

	mix(d, c->tid);
	mix(d, c->worker);
	mix(d, c->count);
	mix(d, c->ev_flags);
	mix(d, c->base_time);
	d9_events_init(&it, r, c);
	while ((v = d9_events_next(&it, &ev)) == 1) {
		CHECK(++n <= c->len); /* an event is at least one byte */
		CHECK(ev.type != 0);
		CHECK(ev.nfields <= D9_EV_MAX_FIELDS);
		CHECK(ev.offset >= c->offset + D9_CHUNK_HDR_LEN + D9_EVENTS_HDR_LEN &&
			ev.offset < c->offset + D9_CHUNK_HDR_LEN + c->len);
		mix(d, ev.type);
		mix(d, ev.time);
		mix(d, ev.offset);
		mix(d, ev.nfields);
		mix_bytes(d, ev.f, sizeof(ev.f));
		if (ev.data) {
			CHECK(in_payload(c, ev.data, ev.data_len));
			mix_bytes(d, ev.data, ev.data_len);
		} else {
			CHECK(ev.data_len == 0);
		}
		/* every 'b' field: bytes by slot, f[slot] holds the length */
		for (int i = 0; i < D9_EV_MAX_FIELDS; i++) {
			if (!ev.fdata[i])
				continue;
			CHECK(ev.f[i] <= c->len && in_payload(c, ev.fdata[i], (size_t)ev.f[i]));
			mix_bytes(d, ev.fdata[i], (size_t)ev.f[i]);
		}
		mix(d, (uint64_t)d9_time_to_mono_ns(h, ev.time));
		mix(d, (uint64_t)d9_time_to_realtime_ns(h, ev.time));
		const char *name = d9_event_name(ev.type);
		if (name)
			mix_str(d, name);
		switch (ev.type) {
		case D9_EV_PARK:
			mix_str(d, d9_wait_call_name(ev.f[D9_F_PARK_CALL]));
			break;
		case D9_EV_WAKE:
			mix_str(d, d9_wake_kind_name(ev.f[D9_F_WAKE_KIND]));
			break;
		case D9_EV_BLOCKING_CALL:
			mix_str(d, d9_fd_kind_name(ev.f[D9_F_BLOCK_FD_KIND]));
			break;
		case D9_EV_DROPPED:
			mix_str(d, d9_drop_reason_name(ev.f[D9_F_DROP_REASON]));
			break;
		}
	}
	CHECK(v == 0 || v == D9_ECORRUPT);
	d->bad_iters += v != 0;
	CHECK(d9_events_next(&it, &ev) == 0);
	d->events += n;
}

static void walk_trailer(struct digest *d, struct d9_reader *r, const struct d9_chunk *c)
{
	const struct d9_header *h = d9_reader_header(r);
	struct d9_trailer t;
	int v = d9_trailer_decode(c, &t);

	CHECK(v == 0 || v == D9_ECORRUPT);
	mix(d, (uint64_t)v);
	d->bad_iters += v != 0;
	CHECK(t.ntypes <= (uint32_t)c->len);
	mix(d, t.events);
	mix(d, t.chunks);
	mix(d, t.first_time);
	mix(d, t.last_time);
	mix(d, t.dropped_events);
	mix(d, t.dropped_samples);
	mix(d, t.flags);
	mix(d, t.ntypes);
	mix_bytes(d, t.type_counts, sizeof(t.type_counts));
	mix(d, (uint64_t)d9_time_to_mono_ns(h, t.first_time));
	mix(d, (uint64_t)d9_time_to_realtime_ns(h, t.last_time));
}

/* Decodes everything reachable from an opened reader into d. `buf`/`len` are the input for the
 * memory reader (payload pointers must point into it), NULL for the file reader. */
static void walk(struct digest *d, struct d9_reader *r, const uint8_t *buf, size_t len)
{
	struct d9_chunk c;
	/* a chunk takes at least its overhead; the file reader may inflate gzip: no bound there */
	uint64_t max_chunks = buf ? len / D9_CHUNK_OVERHEAD + 1 : UINT64_MAX;
	int v;

	walk_header(d, d9_reader_header(r));
	walk_schema(d, r);
	while ((v = d9_reader_next(r, &c)) == 1) {
		CHECK(++d->chunks <= max_chunks);
		if (buf)
			CHECK(c.payload >= buf + D9_PREFIX_LEN + D9_CHUNK_HDR_LEN &&
				c.len + D9_CHUNK_CRC_LEN <= (size_t)(buf + len - c.payload) &&
				c.offset + D9_CHUNK_HDR_LEN == (uint64_t)(c.payload - buf));
		mix(d, c.type);
		mix(d, c.flags);
		mix(d, c.len);
		mix(d, c.offset);
		/* each iterator must yield nothing for the other chunk types */
		walk_defs(d, r, &c);
		walk_events(d, r, &c);
		if (c.type != D9_CHUNK_TRAILER) {
			struct d9_trailer t;
			CHECK(d9_trailer_decode(&c, &t) == -EINVAL);
		}
		switch (c.type) {
		case D9_CHUNK_SCHEMA:
			walk_schema(d, r);
			break;
		case D9_CHUNK_TRAILER:
			walk_trailer(d, r, &c);
			break;
		case D9_CHUNK_DEFS:
		case D9_CHUNK_EVENTS:
			break;
		default:
			CHECK(!"d9_reader_next returned an unknown or header chunk");
		}
	}
	mix(d, (uint64_t)v);
	CHECK(v == 0 || !buf); /* the memory reader has no read errors */
	const struct d9_reader_stats *st = d9_reader_stats(r);
	CHECK(st->chunks >= d->chunks + 1 + st->unknown_chunks); /* + header, + skipped ones */
	if (buf)
		CHECK(st->skipped_bytes <= len);
	mix(d, st->chunks);
	mix(d, st->corrupt_chunks);
	mix(d, st->unknown_chunks);
	mix(d, st->skipped_bytes);
	mix(d, st->bad_events);
	mix(d, st->bad_defs);
	d->bad_iters += st->bad_defs;
	mix(d, (uint64_t)st->truncated);
	mix(d, st->truncated_at);
	mix(d, (uint64_t)st->sealed);
}

static void decode_mem(struct digest *d, const uint8_t *buf, size_t len)
{
	struct d9_reader *r = NULL;

	memset(d, 0, sizeof(*d));
	d->open_err = d9_reader_open_mem(&r, buf, len);
	mix_str(d, d9_strerror(d->open_err));
	if (d->open_err) {
		CHECK(r == NULL);
		return;
	}
	d9_reader_on_problem(r, on_problem, d);
	walk(d, r, buf, len);
	d9_reader_close(r);
}

/* The gzip/file reader over the same bytes: a different buffering path (ensure() streaming). */
static int decode_file(struct digest *d, const uint8_t *buf, size_t len)
{
	struct d9_reader *r = NULL;

	memset(d, 0, sizeof(*d));
	if (scratch_fd < 0 || ftruncate(scratch_fd, 0) != 0 ||
		pwrite(scratch_fd, buf, len, 0) != (ssize_t)len)
		return -1;
	d->open_err = d9_reader_open_file(&r, scratch_path);
	mix_str(d, d9_strerror(d->open_err));
	if (d->open_err) {
		CHECK(r == NULL);
		return 0;
	}
	d9_reader_on_problem(r, on_problem, d);
	walk(d, r, NULL, 0);
	d9_reader_close(r);
	return 0;
}

/* Recomputes the head check and CRC of every chunk found by walking the input chunk by chunk,
 * as a writer would have laid it out (d9_chunk_fill_crc). */
static void fix_crcs(uint8_t *p, size_t n)
{
	size_t pos = D9_PREFIX_LEN;

	if (n < D9_PREFIX_LEN || memcmp(p, D9_MAGIC, D9_MAGIC_LEN) != 0)
		return;
	while (n - pos >= D9_CHUNK_OVERHEAD) {
		uint8_t *c = p + pos;
		uint32_t len;

		memcpy(&len, c + 4, 4);
		if (c[0] != D9_SYNC0 || c[1] != D9_SYNC1 || len > n - pos - D9_CHUNK_OVERHEAD) {
			pos++;
			continue;
		}
		d9_chunk_fill_crc(c);
		pos += D9_CHUNK_OVERHEAD + len;
	}
}

static void print_summary(const char *pass, const struct digest *d)
{
	if (summary)
		fprintf(stderr, "d9-fuzz %s open=%d chunks=%llu events=%llu defs=%llu problems=%llu "
			"bad_iters=%llu hash=%016llx\n", pass, d->open_err,
			(unsigned long long)d->chunks, (unsigned long long)d->events,
			(unsigned long long)d->defs, (unsigned long long)d->problems,
			(unsigned long long)d->bad_iters, (unsigned long long)d->hash);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	summary = getenv("D9_FUZZ_SUMMARY") != NULL;
	scratch_fd = memfd_create("d9-fuzz", 0);
	if (scratch_fd >= 0)
		snprintf(scratch_path, sizeof(scratch_path), "/proc/self/fd/%d", scratch_fd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct digest raw, fixed, file;
	int gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;

	decode_mem(&raw, data, size);
	print_summary("raw", &raw);

	/* exact-size heap copy, so ASan still catches a read one byte past the end */
	uint8_t *copy = malloc(size ? size : 1);
	CHECK(copy != NULL);
	if (size)
		memcpy(copy, data, size);
	fix_crcs(copy, size);
	if (size && memcmp(copy, data, size) != 0) {
		decode_mem(&fixed, copy, size);
		print_summary("fixed", &fixed);
	} else {
		fixed = raw;
	}

	/* gzip input goes to the file reader as is; plain input must decode identically there */
	if (decode_file(&file, gzip ? data : copy, size) == 0) {
		print_summary("file", &file);
		if (!gzip) {
			CHECK(file.open_err == fixed.open_err);
			CHECK(file.hash == fixed.hash);
		}
	}
	free(copy);
	return 0;
}
