/* gen-corpus.c: writes the seed corpus of the decoder fuzz target (tests/fuzz/corpus/).
 * Usage: gen-corpus DIR (build/tests/gen-corpus tests/fuzz/corpus after a format change; the
 * fuzz-* files merged from fuzzing runs are not generated and stay). Output is deterministic
 * (no clock, no randomness beyond a fixed LCG): regenerating gives byte-identical files.
 * Seeds: valid-* decode with no problem at all (tests/integration/test-fuzz-corpus.sh checks
 * that), unknown-* carry things a newer writer may add, trunc-*, corrupt-* and bad-* are broken
 * on purpose. The layout written here follows FORMAT.md through the encoder in format.c. */
#include "d9-format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SEG_CAP (256u << 10)

static const char *out_dir;
static int n_written;
static size_t bytes_written;

static void die(const char *what)
{
	fprintf(stderr, "gen-corpus: %s\n", what);
	exit(1);
}

static void write_file(const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out_dir, name);
	f = fopen(path, "wb");
	if (!f || (len && fwrite(buf, 1, len, f) != len) || fclose(f) != 0) {
		fprintf(stderr, "gen-corpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	n_written++;
	bytes_written += len;
}

static void write_wbuf(const char *name, const struct d9_wbuf *w)
{
	if (w->err)
		die(name);
	write_file(name, w->start, (size_t)(w->p - w->start));
}

/* Writes buf gzip-compressed (what the file reader inflates transparently). */
static void write_gz(const char *name, const uint8_t *buf, size_t len)
{
	static uint8_t gz[SEG_CAP];
	z_stream z;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		die("deflateInit2");
	z.next_in = (uint8_t *)buf;
	z.avail_in = (uInt)len;
	z.next_out = gz;
	z.avail_out = sizeof(gz);
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		die("deflate");
	write_file(name, gz, z.total_out);
	deflateEnd(&z);
}

/* ---- segment pieces ------------------------------------------------------------------------- */

static const char cmdline[] = "server\0--port\0008080"; /* NUL-separated, as on disk */

static void base_header(struct d9_header *h)
{
	memset(h, 0, sizeof(*h));
	h->pid = 4242;
	h->ppid = 1;
	h->segment_seq = 3;
	h->clock_source = D9_CLOCK_MONOTONIC;
	h->time_shift = 0;
	h->ticks_per_sec = 1000000000u;
	h->anchor_ticks = 5000000000000ull;
	h->anchor_mono_ns = 5000000000000ull;
	h->anchor_realtime_ns = 1700000000000000000ull;
	h->start_realtime_ns = 1699999999000000000ull;
	h->writer = "d9 0.1 (gen-corpus)";
	h->process = "server";
	h->cmdline = cmdline;
	h->cmdline_len = sizeof(cmdline); /* includes the final NUL */
	h->hostname = "fuzz-host";
	h->boot_id = "2f1e9d4c-0b6a-4d1e-9b7a-5c3d2e1f0a9b";
}

static void seg_begin(struct d9_wbuf *w, void *buf, const struct d9_header *h)
{
	d9_wbuf_init(w, buf, SEG_CAP);
	if (d9_prefix_encode(w->p, SEG_CAP) != D9_PREFIX_LEN)
		die("prefix");
	w->p += D9_PREFIX_LEN;
	if (d9_header_write(w, h))
		die("header");
}

/* Every definition kind; with `future`, also a kind this version does not know. */
static void add_defs(struct d9_wbuf *w, int future_kind)
{
	static const uint64_t frames[] = { 0x55550000a123, 0x55550000a0f0, 0x55550000b400,
		0x7f0000001000, 0x55550000a123 };
	static const uint8_t build_id[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9,
		10, 11, 12, 13, 14, 15, 16 };
	static const uint8_t fields[] = { 'u', 6, 's', 't', 'a', 't', 'u', 's', 'b', 4, 'p', 'a',
		't', 'h' };
	static const uint8_t future[] = { 1, 2, 3, 4, 5 };
	uint8_t *c = d9_chunk_open(w, D9_CHUNK_DEFS);

	d9_def_string(w, 1, "handle_client", 13);
	d9_def_string(w, 2, "/usr/bin/server", 15);
	d9_def_string(w, 3, "read", 4);
	d9_def_string(w, 4, "", 0);
	d9_def_string(w, 5, "worker-1", 8);
	d9_def_string(w, 6, "request_done", 12);
	d9_def_location(w, 1, 0x55550000a100, 0x55550000a2f0, 1, 1);
	d9_def_location(w, 2, 0x55550000b000, 0x55550000b010, 1, 0);
	d9_def_stack(w, 1, frames, 5);
	d9_def_stack(w, 2, frames, 1);
	d9_def_stack(w, 3, frames, 0);
	d9_def_module(w, 1, 2, 0x555500000000, 0x555500020000, 0, build_id, sizeof(build_id));
	d9_def_module(w, 2, 4, 0x7f0000000000, 0x7f0000100000, 0x1000, NULL, 0);
	d9_def_symbol(w, 0x55550000a100, 0x400, 1, 2, 42, 0);
	d9_def_symbol(w, 0x55550000a180, 0x20, 3, 2, 7, 1);
	d9_def_thread(w, 4242, 5, 1, D9_ROLE_WORKER);
	d9_def_thread(w, 4243, 4, 0, D9_ROLE_AGENT);
	d9_def_clock_sync(w, 5000000000000ull, 5000000000000ull, 1700000000000000000ull);
	d9_def_coroutine(w, 1, 0, 0, D9_COROUTINE_SCHEDULER);
	d9_def_coroutine(w, 7, 1, 1, 0);
	{
		uint8_t body[64];
		struct d9_wbuf b;

		d9_wbuf_init(&b, body, sizeof(body));
		d9_wbuf_u(&b, 1); /* custom schema id */
		d9_wbuf_u(&b, 6); /* name: String 6 */
		d9_wbuf_raw(&b, fields, sizeof(fields));
		d9_def_raw(w, D9_DEF_CUSTOM_SCHEMA, body, (size_t)(b.p - b.start));
	}
	if (future_kind)
		d9_def_raw(w, 77, future, sizeof(future)); /* unknown kind: skipped */
	if (d9_chunk_close(w, c))
		die("defs");
}

static uint32_t lcg_state = 12345;

static uint32_t lcg(void)
{
	lcg_state = lcg_state * 1103515245u + 12345u;
	return lcg_state >> 8;
}

/* A worker's loop: park in epoll_wait, wake coroutines, poll them; every known event type. */
static void enc_worker_stream(struct d9_enc *e, uint64_t t, int rounds)
{
	for (int i = 0; i < rounds; i++) {
		uint64_t co = 10 + lcg() % 5;
		d9_enc_park(e, t, D9_CALL_EPOLL_WAIT, i % 3 == 0 ? -1 : 1000);
		t += 20000 + lcg() % 5000;
		d9_enc_unpark(e, t, 1 + i % 2, 1500, 300);
		d9_enc_wake(e, t + 100, co, 0, D9_WAKE_FD, 7);
		d9_enc_wake(e, t + 150, co + 1, co, (uint32_t)(i % (D9_WAKE_MAX + 1)), -(int64_t)i);
		d9_enc_queue_sample(e, t + 160, 2);
		d9_enc_poll_start(e, t + 200, co, 1);
		d9_enc_blocking_call(e, t + 900, co, 3, D9_FD_SOCKET, 650, i % 2 ? 1 : 0);
		d9_enc_cpu_sample(e, t + 950, co, (uint32_t)(i % 2), 2);
		d9_enc_poll_end(e, t + 1000, co);
		t += 1200;
	}
	d9_enc_spawn(e, t, 99, 10, 2);
	d9_enc_poll_start(e, t + 5, 99, 2);
	d9_enc_coroutine_exit(e, t + 9, 99);
	d9_enc_poll_end(e, t + 10, 0);
	d9_enc_dropped(e, t + 11, 17, D9_DROP_BUFFERS_FULL);
	d9_enc_dropped(e, t + 12, 3, D9_DROP_SAMPLES_LOST);
	d9_enc_zero_timeout_waits(e, t + 12, 250);
	d9_enc_park(e, t + 13, D9_CALL_PSELECT, 0);
	d9_enc_unpark(e, t + 100000000, 0, 0, 0); /* a long delta: varint form */
}

static void add_events(struct d9_wbuf *w, uint32_t tid, uint32_t worker, uint64_t base,
	uint8_t shift, uint8_t flags, void (*fill)(struct d9_enc *, uint64_t, int), int rounds)
{
	static uint8_t tmp[64 << 10];
	struct d9_enc e;

	if (d9_enc_begin(&e, tmp, sizeof(tmp), tid, worker, base, shift, flags))
		die("enc_begin");
	fill(&e, base + 1000, rounds);
	size_t n = d9_enc_end(&e, 1);
	d9_wbuf_raw(w, tmp, n);
}

static void add_trailer_end(struct d9_wbuf *w, uint64_t events, uint64_t chunks, uint32_t flags,
	uint64_t end_time)
{
	struct d9_trailer t;

	memset(&t, 0, sizeof(t));
	t.events = events;
	t.chunks = chunks;
	t.first_time = 5000000001000ull;
	t.last_time = 5000200000000ull;
	t.dropped_events = 20;
	t.dropped_samples = 3;
	t.flags = flags;
	t.end_time = end_time;
	t.type_counts[D9_EV_PARK] = 5;
	t.type_counts[D9_EV_UNPARK] = 5;
	t.type_counts[D9_EV_DROPPED] = 2;
	t.type_counts[D9_EV_CUSTOM] = 1;
	t.type_counts[D9_EV_ZERO_TIMEOUT_WAITS] = 1;
	if (d9_trailer_write(w, &t))
		die("trailer");
}

static void add_trailer(struct d9_wbuf *w, uint64_t events, uint64_t chunks, uint32_t flags)
{
	add_trailer_end(w, events, chunks, flags, 0);
}

/* raw 'c' fields below are coded with the encoder's own coroutine coding (d9__enc_coroutine),
 * which keeps its list of recent coroutines in step, as d9_enc_raw asks of its callers. */

/* A SCHEMA chunk by hand: reordered and added fields for a known type, an extended type with
 * every field encoding, a type with the most fields a schema may list. */
static void add_custom_schema(struct d9_wbuf *w)
{
	uint8_t *c = d9_chunk_open(w, D9_CHUNK_SCHEMA);
	char name[8];

	d9_wbuf_u(w, 5);
	/* PollStart: location first, a field v1 does not know, coroutine last */
	d9_wbuf_u(w, D9_EV_POLL_START);
	d9_wbuf_bytes(w, "PollStart", 9);
	d9_wbuf_u(w, 3);
	d9_wbuf_raw(w, "u", 1);
	d9_wbuf_bytes(w, "location", 8);
	d9_wbuf_raw(w, "u", 1);
	d9_wbuf_bytes(w, "budget", 6);
	d9_wbuf_raw(w, "c", 1);
	d9_wbuf_bytes(w, "coroutine", 9);
	/* CustomEvent as v1 defines it */
	d9_wbuf_u(w, D9_EV_CUSTOM);
	d9_wbuf_bytes(w, "CustomEvent", 11);
	d9_wbuf_u(w, 2);
	d9_wbuf_raw(w, "u", 1);
	d9_wbuf_bytes(w, "schema", 6);
	d9_wbuf_raw(w, "b", 1);
	d9_wbuf_bytes(w, "data", 4);
	/* extended type 40: every encoding, two byte fields */
	d9_wbuf_u(w, 40);
	d9_wbuf_bytes(w, "RequestDone", 11);
	d9_wbuf_u(w, 5);
	d9_wbuf_raw(w, "c", 1);
	d9_wbuf_bytes(w, "coroutine", 9);
	d9_wbuf_raw(w, "u", 1);
	d9_wbuf_bytes(w, "status", 6);
	d9_wbuf_raw(w, "i", 1);
	d9_wbuf_bytes(w, "latency_delta", 13);
	d9_wbuf_raw(w, "b", 1);
	d9_wbuf_bytes(w, "path", 4);
	d9_wbuf_raw(w, "b", 1);
	d9_wbuf_bytes(w, "a_field_name_longer_than_thirty_bytes", 37);
	/* type 200: sixteen fields (more than a decoder keeps) */
	d9_wbuf_u(w, 200);
	d9_wbuf_bytes(w, "Wide", 4);
	d9_wbuf_u(w, 16);
	for (int i = 0; i < 16; i++) {
		int n = snprintf(name, sizeof(name), "f%d", i);
		d9_wbuf_raw(w, "u", 1);
		d9_wbuf_bytes(w, name, (size_t)n);
	}
	/* type 300: listed but beyond what a decoder keeps schemas for */
	d9_wbuf_u(w, 300);
	d9_wbuf_bytes(w, "Far", 3);
	d9_wbuf_u(w, 1);
	d9_wbuf_raw(w, "u", 1);
	d9_wbuf_bytes(w, "x", 1);
	if (d9_chunk_close(w, c))
		die("custom schema");
}

static void enc_custom_stream(struct d9_enc *e, uint64_t t, int rounds)
{
	uint8_t f[128];

	for (int i = 0; i < rounds; i++) {
		uint8_t *p = f;
		/* PollStart in the custom layout: location, budget, coroutine */
		p = d9_put_varint(p, 1);
		p = d9_put_varint(p, 64);
		p = d9__enc_coroutine(e, p, 5 + (uint64_t)i);
		d9_enc_raw(e, t, D9_EV_POLL_START, f, (size_t)(p - f));
		/* CustomEvent: schema 1, data = varint status + bytes path */
		p = f;
		p = d9_put_varint(p, 1);
		p = d9_put_varint(p, 7);
		p = d9_put_varint(p, 200);
		*p++ = 4;
		memcpy(p, "/api", 4);
		p += 4;
		d9_enc_raw(e, t + 10, D9_EV_CUSTOM, f, (size_t)(p - f));
		/* RequestDone (extended) */
		p = f;
		p = d9__enc_coroutine(e, p, 3);
		p = d9_put_varint(p, 404);
		p = d9_put_varint(p, d9_zigzag(-1234));
		p = d9_put_varint(p, 5);
		memcpy(p, "/home", 5);
		p += 5;
		p = d9_put_varint(p, 0);
		d9_enc_raw(e, t + 20, 40, f, (size_t)(p - f));
		/* Wide: sixteen varints, growing */
		p = f;
		for (int k = 0; k < 16; k++)
			p = d9_put_varint(p, (uint64_t)1 << (4 * k));
		d9_enc_raw(e, t + 3000, 200, f, (size_t)(p - f));
		d9_enc_poll_end(e, t + 3010, 3);
		t += 100000;
	}
}

static void enc_tsc_stream(struct d9_enc *e, uint64_t t, int rounds)
{
	for (int i = 0; i < rounds; i++) {
		d9_enc_park(e, t, D9_CALL_POLL, 5000);
		d9_enc_unpark(e, t + 3000000, 1, 0, 0);
		d9_enc_poll_start(e, t + 3000100, 2, 1);
		d9_enc_poll_end(e, t + 3000500, 2);
		t += 3001000;
	}
	d9_enc_poll_start(e, t - 100000, 2, 1); /* a backwards step: clamped to delta 0 */
}

/* ---- whole segments ----------------------------------------------------------------------- */

static uint8_t seg[SEG_CAP];

static size_t build_full(struct d9_wbuf *w, unsigned schema_flags)
{
	struct d9_header h;

	base_header(&h);
	seg_begin(w, seg, &h);
	if (d9_schema_write(w, schema_flags))
		die("schema");
	add_defs(w, 0);
	add_events(w, 4242, 1, 5000000000000ull, 0, (uint8_t)schema_flags, enc_worker_stream, 6);
	add_events(w, 4244, 2, 5000000500000ull, 0, (uint8_t)schema_flags, enc_worker_stream, 3);
	add_trailer(w, 150, 6, 0);
	if (w->err)
		die("full");
	return (size_t)(w->p - w->start);
}

static void gen_valid(void)
{
	struct d9_wbuf w;
	struct d9_header h;
	size_t n;

	base_header(&h);
	seg_begin(&w, seg, &h);
	write_wbuf("valid-minimal.d9", &w);

	/* header with empty strings and no cmdline */
	memset(&h, 0, sizeof(h));
	h.ticks_per_sec = 1000000000u;
	seg_begin(&w, seg, &h);
	write_wbuf("valid-empty-header.d9", &w);

	n = build_full(&w, D9_SCHEMA_UNPARK_STATS);
	write_wbuf("valid-full.d9", &w);
	/* the same segment gzip-compressed, as rotation leaves it (.bin.gz) */
	write_gz("valid-full.d9.gz", seg, n);

	/* the agent's layout of Park and Unpark (format 1.3): timeouts as differences, every
	 * Unpark followed by its UnparkStats */
	build_full(&w, D9_SCHEMA_COMPACT_WAITS | D9_SCHEMA_SCHED_DELAY);
	write_wbuf("valid-compact-waits.d9", &w);

	/* no UNPARK_STATS, no trailer: an .active segment still being written */
	base_header(&h);
	seg_begin(&w, seg, &h);
	if (d9_schema_write(&w, 0))
		die("schema");
	add_defs(&w, 0);
	add_events(&w, 4242, 1, 5000000000000ull, 0, 0, enc_worker_stream, 4);
	write_wbuf("valid-nostats-active.d9", &w);

	/* no schema chunk at all: the built-in layout applies (the writer's default, flags 0) */
	seg_begin(&w, seg, &h);
	add_events(&w, 4242, 1, 5000000000000ull, 0, 0, enc_worker_stream, 2);
	write_wbuf("valid-noschema.d9", &w);

	/* custom schema, custom events, extended types */
	seg_begin(&w, seg, &h);
	if (d9_schema_write(&w, D9_SCHEMA_UNPARK_STATS))
		die("schema");
	add_custom_schema(&w);
	add_defs(&w, 0);
	add_events(&w, 4242, 1, 5000000000000ull, 0, D9_SCHEMA_UNPARK_STATS, enc_custom_stream, 3);
	add_trailer(&w, 15, 4, 0);
	write_wbuf("valid-custom-schema.d9", &w);

	/* TSC clock with a time shift, a recovered trailer */
	base_header(&h);
	h.clock_source = D9_CLOCK_TSC;
	h.time_shift = 4;
	h.ticks_per_sec = 2999999999ull;
	h.anchor_ticks = 123456789012345ull;
	seg_begin(&w, seg, &h);
	if (d9_schema_write(&w, 0))
		die("schema");
	add_events(&w, 7, 0, 123456789000000ull, 4, 0, enc_tsc_stream, 4);
	add_trailer(&w, 17, 3, D9_TRAILER_RECOVERED);
	write_wbuf("valid-tsc-shift.d9", &w);

	/* a trailer that says when its process ended (flag bit 1, end_time after the S3 counts) */
	seg_begin(&w, seg, &h);
	if (d9_schema_write(&w, 0))
		die("schema");
	add_events(&w, 7, 0, 123456789000000ull, 4, 0, enc_tsc_stream, 4);
	add_trailer_end(&w, 17, 3, D9_TRAILER_ENDED, 7716049315000ull);
	write_wbuf("valid-ended.d9", &w);

	/* two EVENTS chunks of one thread back to back, then an empty one */
	seg_begin(&w, seg, &h);
	add_events(&w, 7, 0, 123456789000000ull, 4, 0, enc_tsc_stream, 1);
	add_events(&w, 7, 0, 123456799000000ull, 4, 0, enc_tsc_stream, 1);
	add_events(&w, 7, 0, 123456799000000ull, 4, 0, enc_tsc_stream, 0);
	write_wbuf("valid-tsc-chunks.d9", &w);
}

/* Things a newer writer may add: unknown chunk type, unknown def kind, unknown event type. */
static void gen_unknown(void)
{
	struct d9_wbuf w;
	struct d9_header h;
	uint8_t *c;
	uint8_t f[4] = { 1, 2, 3, 4 };

	base_header(&h);
	seg_begin(&w, seg, &h);
	c = d9_chunk_open(&w, 9);
	d9_wbuf_raw(&w, "future chunk payload", 20);
	d9_chunk_close(&w, c);
	c = d9_chunk_open(&w, 9); /* a second one: reported once */
	d9_chunk_close(&w, c);
	c = d9_chunk_open(&w, 255);
	d9_chunk_close(&w, c);
	add_defs(&w, 1);
	if (d9_header_write(&w, &h)) /* a second header chunk: ignored */
		die("header");
	{
		static uint8_t tmp[4096];
		struct d9_enc e;
		d9_enc_begin(&e, tmp, sizeof(tmp), 1, 0, 5000000000000ull, 0, 0);
		d9_enc_poll_start(&e, 5000000001000ull, 3, 1);
		d9_enc_raw(&e, 5000000002000ull, 14, f, sizeof(f)); /* free code, no schema: rest skipped */
		d9_enc_poll_end(&e, 5000000003000ull, 3);
		d9_wbuf_raw(&w, tmp, d9_enc_end(&e, 1));
	}
	{
		static uint8_t tmp[4096];
		struct d9_enc e;
		d9_enc_begin(&e, tmp, sizeof(tmp), 1, 0, 5000000000000ull, 0, 0);
		d9_enc_raw(&e, 5000000002000ull, 1000, f, sizeof(f)); /* extended, no schema */
		d9_wbuf_raw(&w, tmp, d9_enc_end(&e, 1));
		d9_enc_begin(&e, tmp, sizeof(tmp), 1, 0, 5000000000000ull, 0, 0);
		d9_enc_raw(&e, 5000000002000ull, 20, f, sizeof(f)); /* extended, no schema */
		d9_wbuf_raw(&w, tmp, d9_enc_end(&e, 1));
	}
	write_wbuf("unknown-chunks-defs-events.d9", &w);
}

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* Offsets of the chunks of seg[0..n): start of each. */
static int chunk_starts(size_t n, size_t *starts, int max)
{
	size_t pos = D9_PREFIX_LEN;
	int k = 0;

	while (pos + D9_CHUNK_OVERHEAD <= n && k < max) {
		starts[k++] = pos;
		pos += D9_CHUNK_OVERHEAD + get_le32(seg + pos + 4);
	}
	return k;
}

static void gen_truncated_and_corrupt(void)
{
	static uint8_t mod[SEG_CAP];
	struct d9_wbuf w;
	size_t st[16];
	size_t n = build_full(&w, D9_SCHEMA_UNPARK_STATS);
	int nc = chunk_starts(n, st, 16);

	/* chunks: 0 header, 1 schema, 2 defs, 3 events, 4 events, 5 trailer */
	if (nc != 6)
		die("unexpected chunk layout");
	write_file("trunc-0004-magic.d9", seg, 4);
	write_file("trunc-0012-prefix.d9", seg, 12);
	write_file("trunc-0020-header-head.d9", seg, 20);
	write_file("trunc-header-body.d9", seg, st[1] - 5);
	write_file("trunc-schema-head.d9", seg, st[1] + 6);
	write_file("trunc-defs-body.d9", seg, st[2] + 100);
	write_file("trunc-events-body.d9", seg, st[3] + (st[4] - st[3]) / 2);
	write_file("trunc-events-crc.d9", seg, st[4] - 2);
	write_file("trunc-trailer-last-byte.d9", seg, n - 1);

	/* bad CRC in the defs chunk: the reader skips it and resyncs */
	memcpy(mod, seg, n);
	mod[st[2] + 20] ^= 0x40;
	write_file("corrupt-defs-crc.d9", mod, n);

	/* broken sync of the first events chunk */
	memcpy(mod, seg, n);
	mod[st[3]] = 'X';
	write_file("corrupt-events-sync.d9", mod, n);

	/* length fields: beyond the limit, past the end, one short */
	memcpy(mod, seg, n);
	d9_store_le32(mod + st[2] + 4, 0xffffffffu);
	write_file("corrupt-len-huge.d9", mod, n);
	memcpy(mod, seg, n);
	d9_store_le32(mod + st[4] + 4, D9_CHUNK_MAX_PAYLOAD);
	write_file("corrupt-len-past-end.d9", mod, n);
	memcpy(mod, seg, n);
	d9_store_le32(mod + st[3] + 4, get_le32(seg + st[3] + 4) - 1);
	write_file("corrupt-len-short.d9", mod, n);

	/* garbage with fake sync bytes between two chunks */
	{
		size_t g = 0, at = st[3];
		memcpy(mod, seg, at);
		for (int i = 0; i < 96; i++)
			mod[at + g++] = (uint8_t)(i % 7 == 0 ? 'D' : i % 7 == 1 ? '9' : lcg());
		memcpy(mod + at + g, seg + at, n - at);
		write_file("corrupt-garbage-between.d9", mod, n + g);
	}

	/* one chunk duplicated, then the segment cut inside the copy */
	memcpy(mod, seg, st[4]);
	memcpy(mod + st[4], seg + st[3], st[4] - st[3]);
	write_file("corrupt-dup-then-cut.d9", mod, st[4] + (st[4] - st[3]) - 30);

	/* prefix: bad magic, future major, future minor (fine) */
	memcpy(mod, seg, n);
	mod[1] = 'd';
	write_file("corrupt-magic.d9", mod, st[1]);
	memcpy(mod, seg, n);
	mod[8] = 2;
	write_file("corrupt-major-2.d9", mod, st[1]);
	memcpy(mod, seg, n);
	mod[10] = 7;
	write_file("valid-minor-7.d9", mod, st[2]);

	/* header chunk: not first */
	memcpy(mod, seg, D9_PREFIX_LEN);
	memcpy(mod + D9_PREFIX_LEN, seg + st[1], st[2] - st[1]);
	memcpy(mod + D9_PREFIX_LEN + (st[2] - st[1]), seg + st[0], st[1] - st[0]);
	write_file("corrupt-header-not-first.d9", mod, D9_PREFIX_LEN + st[2] - st[0]);
}

/* Structurally bad payloads inside chunks whose CRC is right. */
static void gen_bad_payloads(void)
{
	struct d9_wbuf w;
	struct d9_header h;
	uint8_t *c;

	base_header(&h);
	h.ticks_per_sec = 0;
	seg_begin(&w, seg, &h);
	write_wbuf("bad-header-tps-0.d9", &w);
	base_header(&h);
	h.time_shift = 41;
	seg_begin(&w, seg, &h);
	write_wbuf("bad-header-shift-41.d9", &w);
	base_header(&h);
	h.clock_source = D9_CLOCK_TSC + 1;
	seg_begin(&w, seg, &h);
	write_wbuf("bad-header-clock-source.d9", &w);

	/* header chunk whose strings run past its payload */
	d9_wbuf_init(&w, seg, SEG_CAP);
	w.p += d9_prefix_encode(seg, SEG_CAP);
	c = d9_chunk_open(&w, D9_CHUNK_HEADER);
	for (int i = 0; i < 56; i++)
		d9_wbuf_raw(&w, i == 16 ? "\x01" : "\x00", 1); /* fixed part; ticks_per_sec = 1 */
	d9_wbuf_u(&w, 2);
	d9_wbuf_raw(&w, "d9", 2);
	d9_wbuf_u(&w, 100); /* process: 100 bytes claimed, none there */
	d9_chunk_close(&w, c);
	write_wbuf("bad-header-strings.d9", &w);

	base_header(&h);
	seg_begin(&w, seg, &h);
	size_t after_header = (size_t)(w.p - w.start);

	/* events chunk shorter than its head */
	c = d9_chunk_open(&w, D9_CHUNK_EVENTS);
	d9_wbuf_raw(&w, "0123456789", 10);
	d9_chunk_close(&w, c);
	write_wbuf("bad-events-short-head.d9", &w);

	/* events: hand-made bytes, built from the layout macros of d9-format.h (FORMAT.md, "Events") */
	{
		enum { T_END = D9_EV_POLL_END, T_START = D9_EV_POLL_START, T_Q = D9_EV_QUEUE_SAMPLE,
			X = D9_EV_EXTENDED, M = D9_EV_MORE, D7 = 7 << D9_EV_DELTA_SHIFT };
		static const uint8_t ff9[9] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
		struct { const char *name; uint8_t b[24]; size_t len; } ev[16];
		int n = 0;
#define EV(nm, ...) \
	do { \
		static const uint8_t b_[] = { __VA_ARGS__ }; \
		ev[n].name = nm; \
		memcpy(ev[n].b, b_, sizeof(b_)); \
		ev[n++].len = sizeof(b_); \
	} while (0)
		/* a PollEnd of no coroutine, then type 0 */
		EV("bad-event-type-0.d9", T_END, 0, 0, 2);
		/* a PollStart whose coroutine varint runs off the chunk */
		EV("bad-event-overrun.d9", T_END, 0, T_START, 0x80, 0x80);
		/* extended types: above 32 bits, 0, cut short */
		EV("bad-event-ext-type-33bit.d9", X, 0x80, 0x80, 0x80, 0x80, 0x10, 0);
		EV("bad-event-ext-type-0.d9", X, 0, 2);
		EV("bad-event-ext-truncated.d9", T_END, 0, X, 0xff);
		/* delta continuation cut short; delta above 64 bits */
		EV("bad-event-delta-truncated.d9", T_END | M, 0xff, 0xff);
		EV("bad-event-delta-65bit.d9", T_Q | M, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
			0x20, 1);
		/* a coroutine field naming a recent-coroutine slot nothing filled */
		EV("bad-event-coroutine-empty-slot.d9", T_END, 2);
		/* a bytes field longer than the chunk */
		EV("bad-event-custom-bytes-overrun.d9", D9_EV_CUSTOM, 1, 0x40, 'A', 'B');
#undef EV
		/* varints: 11 bytes, bit 64 set, and the largest valid value; the largest delta */
		ev[n].name = "bad-event-varint-11.d9";
		ev[n].b[0] = T_Q;
		memcpy(ev[n].b + 1, ff9, 9);
		ev[n].b[10] = 0xff;
		ev[n].b[11] = 1;
		ev[n++].len = 12;
		ev[n].name = "bad-event-varint-bit64.d9";
		ev[n].b[0] = T_Q;
		memcpy(ev[n].b + 1, ff9, 9);
		ev[n].b[10] = 2;
		ev[n++].len = 11;
		ev[n].name = "valid-event-varint-max.d9";
		ev[n].b[0] = T_Q;
		memcpy(ev[n].b + 1, ff9, 9);
		ev[n].b[10] = 1;
		ev[n++].len = 11;
		ev[n].name = "valid-event-max-delta.d9"; /* delta 2^64-1: low 3 bits inline, 2^61-1 after */
		ev[n].b[0] = T_Q | M | D7;
		memcpy(ev[n].b + 1, ff9, 8);
		ev[n].b[9] = 0x1f;
		ev[n].b[10] = 5;
		ev[n++].len = 11;
		for (int i = 0; i < n; i++) {
			w.p = w.start + after_header;
			c = d9_chunk_open(&w, D9_CHUNK_EVENTS);
			d9_wbuf_le32(&w, 1);
			d9_wbuf_le32(&w, 0);
			d9_wbuf_le64(&w, 5000000000000ull);
			d9_wbuf_le32(&w, 2);
			d9_wbuf_le32(&w, 0);
			d9_wbuf_raw(&w, ev[i].b, ev[i].len);
			d9_chunk_close(&w, c);
			write_wbuf(ev[i].name, &w);
		}
	}

	/* definitions */
	{
		uint8_t body[2048];
		struct d9_wbuf b;

		w.p = w.start + after_header;
		c = d9_chunk_open(&w, D9_CHUNK_DEFS);
		d9_wbuf_init(&b, body, sizeof(body));
		d9_wbuf_u(&b, 9);
		d9_wbuf_u(&b, D9_STACK_MAX_FRAMES + 1);
		for (int i = 0; i <= D9_STACK_MAX_FRAMES; i++)
			d9_wbuf_u(&b, 1);
		d9_def_raw(&w, D9_DEF_STACK, body, (size_t)(b.p - b.start));
		d9_def_raw(&w, D9_DEF_LOCATION, "\x01\x02", 2); /* fields missing */
		d9_def_raw(&w, D9_DEF_MODULE, "\x01\x02\x03\x04\x05\x09\x01", 7); /* build id overruns */
		d9_def_raw(&w, D9_DEF_STACK, "\x01\x03\x05\x02", 4); /* frames missing */
		d9_def_string(&w, 3, "still read after the bad ones", 29);
		d9_wbuf_raw(&w, "\x01\x7f\x01", 3); /* last record claims 127 bytes */
		d9_chunk_close(&w, c);
		write_wbuf("bad-defs-malformed.d9", &w);

		/* a stack of exactly the limit, frames stepping backwards */
		w.p = w.start + after_header;
		c = d9_chunk_open(&w, D9_CHUNK_DEFS);
		d9_wbuf_init(&b, body, sizeof(body));
		d9_wbuf_u(&b, 9);
		d9_wbuf_u(&b, D9_STACK_MAX_FRAMES);
		d9_wbuf_u(&b, 0x7fffffffffffull);
		for (int i = 1; i < D9_STACK_MAX_FRAMES; i++)
			d9_wbuf_i(&b, -(int64_t)(i * 16));
		d9_def_raw(&w, D9_DEF_STACK, body, (size_t)(b.p - b.start));
		d9_chunk_close(&w, c);
		write_wbuf("valid-stack-128.d9", &w);
	}

	/* schemas that must be rejected as a whole */
	static const struct { const char *name; const uint8_t *body; size_t len; } sc[] = {
		{ "bad-schema-enc.d9", (const uint8_t *)"\x01\x28\x01X\x01x\x01x", 8 },
		{ "bad-schema-17-fields.d9", (const uint8_t *)"\x01\x28\x01X\x11", 5 },
		{ "bad-schema-code-0.d9", (const uint8_t *)"\x01\x00\x01X\x00", 5 },
		{ "bad-schema-count.d9", (const uint8_t *)"\x05\x28\x01X\x00", 5 },
		{ "bad-schema-name-overrun.d9", (const uint8_t *)"\x01\x28\x09X\x00", 5 },
	};
	for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++) {
		w.p = w.start + after_header;
		c = d9_chunk_open(&w, D9_CHUNK_SCHEMA);
		d9_wbuf_raw(&w, sc[i].body, sc[i].len);
		d9_chunk_close(&w, c);
		add_events(&w, 4242, 1, 5000000000000ull, 0, 0, enc_worker_stream, 1);
		write_wbuf(sc[i].name, &w);
	}

	/* trailers: short, and a type list that runs off the end */
	w.p = w.start + after_header;
	c = d9_chunk_open(&w, D9_CHUNK_TRAILER);
	d9_wbuf_le64(&w, 1);
	d9_chunk_close(&w, c);
	write_wbuf("bad-trailer-short.d9", &w);
	w.p = w.start + after_header;
	c = d9_chunk_open(&w, D9_CHUNK_TRAILER);
	for (int i = 0; i < 6; i++)
		d9_wbuf_le64(&w, (uint64_t)i);
	d9_wbuf_le32(&w, 0);
	d9_wbuf_u(&w, 3);
	d9_wbuf_u(&w, 1);
	d9_wbuf_u(&w, 9);
	d9_wbuf_u(&w, 99); /* beyond the known types: ignored */
	d9_wbuf_u(&w, 1);
	d9_chunk_close(&w, c);
	write_wbuf("bad-trailer-types.d9", &w);
}

/* Event times at the ends of their ranges. d9_time_to_*_ns overflowed on both (found while
 * writing this corpus; format.c, ticks_to_ns): kept under the crash- name as regression seeds. */
static void gen_time_extremes(void)
{
	static uint8_t tmp[4096];
	struct d9_wbuf w;
	struct d9_header h;
	struct d9_enc e;

	/* the largest shift: (time << 40) * 1e9 does not fit in 128 bits */
	base_header(&h);
	h.time_shift = 40;
	h.ticks_per_sec = 1;
	h.anchor_ticks = 0;
	seg_begin(&w, seg, &h);
	d9_enc_begin(&e, tmp, sizeof(tmp), 1, 0, 0xfffffffffffffff0ull, 0, 0);
	d9_enc_queue_sample(&e, 0xfffffffffffffff8ull, 1);
	d9_enc_queue_sample(&e, 0xffffffffffffffffull, 1);
	d9_wbuf_raw(&w, tmp, d9_enc_end(&e, 1));
	write_wbuf("crash-time-mul-overflow.d9", &w);

	/* an ordinary clock, anchors near INT64_MAX: anchor + delta overflows int64 */
	base_header(&h);
	h.anchor_ticks = 0;
	h.anchor_mono_ns = 0x7fffffffffff0000ull;
	h.anchor_realtime_ns = 0x7fffffffffff0000ull;
	seg_begin(&w, seg, &h);
	d9_enc_begin(&e, tmp, sizeof(tmp), 1, 0, 1000000, 0, 0);
	d9_enc_queue_sample(&e, 2000000, 1);
	d9_wbuf_raw(&w, tmp, d9_enc_end(&e, 1));
	write_wbuf("crash-time-add-overflow.d9", &w);
}

/* A header, then 2 MiB of fake EVENTS chunk heads every 8 bytes, each with a correct head check
 * and claiming 1 MiB + 4 bytes, so that where each fake chunk would end (2^20 + 16 bytes on, a
 * multiple of 8) there is another good-looking head: every candidate the resync scan in
 * d9_reader_next meets passes the head checks and fits in the input, so it CRCs 1 MiB per 8
 * bytes skipped (quadratic: ~30 s for 2 MiB, hours for a 64 MiB segment). Gzipped: a few KiB. */
static void gen_resync_quadratic(void)
{
	static uint8_t big[(2u << 20) + 4096];
	static uint8_t one[(1u << 20) + 4 + D9_CHUNK_OVERHEAD];
	struct d9_wbuf w;
	struct d9_header h;
	uint8_t head[8];

	/* one real chunk of that length gives the head bytes, check byte included */
	d9_wbuf_init(&w, one, sizeof(one));
	uint8_t *c = d9_chunk_open(&w, D9_CHUNK_EVENTS);
	w.p += (1u << 20) + 4;
	if (d9_chunk_close(&w, c))
		die("resync head");
	memcpy(head, one, 8);

	base_header(&h);
	d9_wbuf_init(&w, big, sizeof(big));
	w.p += d9_prefix_encode(big, sizeof(big));
	if (d9_header_write(&w, &h))
		die("header");
	for (size_t i = 0; i < (2u << 20) / 8; i++)
		d9_wbuf_raw(&w, head, 8);
	if (w.err)
		die("resync");
	write_gz("crash-resync-quadratic.d9.gz", big, (size_t)(w.p - w.start));
}

/* Against a CRC budget per resync: units of 65 fake heads (head check right, each claiming a
 * length that makes its end fall on another unit's fake head) then one valid empty chunk that
 * ends the resync. Each 532-byte unit makes the reader CRC ~65 MiB, ~10^5 times the input
 * (2 MiB: ~40 s). With nfake 1 it is 20-byte units of one fake head and one valid chunk: the
 * CRC of the fake chunk at the reader's position, before any resync, costs 1 MiB a unit.
 * Gzipped: a few KiB each. */
static void gen_resync_units(const char *name, int nfake)
{
	enum { UNIT = 65 * 8 + D9_CHUNK_OVERHEAD, SPAN = 1971 * UNIT };
	static uint8_t big[(2u << 20) + 4096];
	static uint8_t one[SPAN];
	uint8_t head[8], valid[D9_CHUNK_OVERHEAD];
	struct d9_wbuf w;
	struct d9_header h;
	uint8_t *c;

	/* fake head: a chunk spanning SPAN bytes in all (SPAN is a multiple of UNIT) */
	d9_wbuf_init(&w, one, sizeof(one));
	c = d9_chunk_open(&w, D9_CHUNK_EVENTS);
	w.p += SPAN - D9_CHUNK_OVERHEAD;
	if (d9_chunk_close(&w, c))
		die("budget head");
	memcpy(head, one, 8);
	d9_wbuf_init(&w, valid, sizeof(valid));
	c = d9_chunk_open(&w, D9_CHUNK_DEFS);
	if (d9_chunk_close(&w, c))
		die("budget chunk");

	base_header(&h);
	d9_wbuf_init(&w, big, sizeof(big));
	w.p += d9_prefix_encode(big, sizeof(big));
	if (d9_header_write(&w, &h))
		die("header");
	while ((size_t)(w.end - w.p) >= UNIT) {
		for (int i = 0; i < nfake; i++)
			d9_wbuf_raw(&w, head, 8);
		d9_wbuf_raw(&w, valid, sizeof(valid));
	}
	write_gz(name, big, (size_t)(w.p - w.start));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen-corpus DIR\n");
		return 2;
	}
	out_dir = argv[1];
	gen_valid();
	gen_unknown();
	gen_truncated_and_corrupt();
	gen_bad_payloads();
	gen_time_extremes();
	gen_resync_quadratic();
	gen_resync_units("crash-resync-budget.d9.gz", 65);
	gen_resync_units("crash-fake-head-units.d9.gz", 1);
	printf("gen-corpus: %d files, %zu bytes in %s\n", n_written, bytes_written, out_dir);
	return 0;
}
