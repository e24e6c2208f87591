/* test-format.c: unit tests of the trace format v1 (format/format.c against FORMAT.md): every
 * event and definition round-trips field by field; damaged input (a cut at every byte, broken
 * CRCs and lengths, garbage, unknown types) decodes what is intact and reports the rest; plain
 * and gzip files decode alike; time conversion; encoder bounds; the bytes-per-event budget.
 * Segments are built in memory with the real encoder and fixed numbers: no clock, no randomness
 * beyond a fixed-seed PRNG, so a failure reproduces exactly. */
#include "d9-format.h"
#include "t.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ASan and UBSan exit with status 1 by default, which t.h takes for a test that already printed
 * its FAIL line: a sanitizer report would then print neither PASS nor FAIL. A distinct status
 * makes t.h print "FAIL name: exit status 66". These are the sanitizers' documented hooks, so
 * they are not static. */
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);
const char *__asan_default_options(void)
{
	return "exitcode=66";
}
const char *__ubsan_default_options(void)
{
	return "exitcode=66:print_stacktrace=1";
}

/* Unsigned equality with the values printed in full (T_EQ prints them as signed). */
#define T_EQU(a, b)                                                                      \
	do {                                                                             \
		uint64_t t_x = (uint64_t)(a), t_y = (uint64_t)(b);                       \
		if (t_x != t_y)                                                          \
			T_FAIL("%s == %" PRIu64 " (0x%" PRIx64 "), expected %s == %" PRIu64 \
				" (0x%" PRIx64 ")", #a, t_x, t_x, #b, t_y, t_y);         \
	} while (0)

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Building segments ------------------------------------------------------------------------ */

#define SEG_MAX_CHUNKS 1024

/* A segment under construction, with the offsets of the chunks written so far. */
struct seg {
	uint8_t *buf;
	struct d9_wbuf w;
	size_t nchunks;
	size_t off[SEG_MAX_CHUNKS]; /* file offset of each chunk's first byte; [0] is the header */
	size_t end[SEG_MAX_CHUNKS]; /* offset just past its CRC */
	uint8_t type[SEG_MAX_CHUNKS];
	uint32_t nev[SEG_MAX_CHUNKS]; /* events in EVENTS chunks */
	uint8_t *open; /* chunk opened by seg_open */
};

static size_t seg_len(const struct seg *s)
{
	return (size_t)(s->w.p - s->buf);
}

static void seg_note(struct seg *s, size_t start, uint8_t type, uint32_t nev)
{
	T_ASSERT(s->nchunks < SEG_MAX_CHUNKS);
	s->off[s->nchunks] = start;
	s->end[s->nchunks] = seg_len(s);
	s->type[s->nchunks] = type;
	s->nev[s->nchunks] = nev;
	s->nchunks++;
}

static void seg_init(struct seg *s, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->buf = calloc(1, cap);
	T_ASSERT(s->buf);
	d9_wbuf_init(&s->w, s->buf, cap);
	int n = d9_prefix_encode(s->w.p, cap);
	T_EQ(n, D9_PREFIX_LEN);
	s->w.p += n;
}

static void seg_free(struct seg *s)
{
	free(s->buf);
	s->buf = NULL;
}

static void seg_header(struct seg *s, const struct d9_header *h)
{
	size_t at = seg_len(s);

	T_EQ(d9_header_write(&s->w, h), 0);
	seg_note(s, at, D9_CHUNK_HEADER, 0);
}

static void seg_schema(struct seg *s, unsigned flags)
{
	size_t at = seg_len(s);

	T_EQ(d9_schema_write(&s->w, flags), 0);
	seg_note(s, at, D9_CHUNK_SCHEMA, 0);
}

static void seg_open(struct seg *s, uint8_t type)
{
	s->open = d9_chunk_open(&s->w, type);
	T_EQ(s->w.err, 0);
}

static void seg_close(struct seg *s)
{
	size_t at = (size_t)(s->open - s->buf);

	T_EQ(d9_chunk_close(&s->w, s->open), 0);
	seg_note(s, at, s->open[2], 0);
}

static void seg_trailer(struct seg *s, const struct d9_trailer *t)
{
	size_t at = seg_len(s);

	T_EQ(d9_trailer_write(&s->w, t), 0);
	seg_note(s, at, D9_CHUNK_TRAILER, 0);
}

/* Starts an EVENTS chunk at the end of the segment, at most cap bytes long. */
static void seg_enc_begin(struct seg *s, struct d9_enc *e, uint32_t tid, uint32_t worker,
	uint64_t base_ticks, uint8_t shift, uint8_t flags, size_t cap)
{
	size_t room = (size_t)(s->w.end - s->w.p);

	T_EQ(d9_enc_begin(e, s->w.p, cap < room ? cap : room, tid, worker, base_ticks, shift, flags), 0);
}

static void seg_enc_end(struct seg *s, struct d9_enc *e)
{
	size_t at = seg_len(s);

	s->w.p += d9_enc_end(e, 1);
	seg_note(s, at, D9_CHUNK_EVENTS, e->count);
}

/* Schema chunks written by hand: types whose fields differ from d9's own writer. */
struct tfield { char enc; const char *name; };

static void schema_type(struct d9_wbuf *w, uint32_t code, const char *name, int nf,
	const struct tfield *f)
{
	d9_wbuf_u(w, code);
	d9_wbuf_bytes(w, name, strlen(name));
	d9_wbuf_u(w, (uint64_t)nf);
	for (int i = 0; i < nf; i++) {
		uint8_t enc = (uint8_t)f[i].enc;
		d9_wbuf_raw(w, &enc, 1);
		d9_wbuf_bytes(w, f[i].name, strlen(f[i].name));
	}
}

#define MONO_BASE 5000000000000ull /* 5000 s of uptime: a multiple of 64 */

static const char cmdline_on_disk[] = "/usr/sbin/srv\0-c\0/etc/srv.conf"; /* + its final NUL */

static struct d9_header std_header(void)
{
	struct d9_header h = {
		.pid = 4242, .ppid = 1, .segment_seq = 7,
		.clock_source = D9_CLOCK_MONOTONIC, .time_shift = 6, .ticks_per_sec = 1000000000,
		.anchor_ticks = MONO_BASE, .anchor_mono_ns = MONO_BASE,
		.anchor_realtime_ns = 1700000000123456789ull,
		.start_realtime_ns = 1700000000000000000ull,
		.writer = "d9 0.1.0 test", .process = "srv",
		.cmdline = cmdline_on_disk, .cmdline_len = sizeof(cmdline_on_disk),
		.hostname = "web-07.example.net", .boot_id = "5c1bd3a0-8e8c-4bd1-9f00-3e4e0f6c2a11",
	};
	return h;
}

/* prefix + header + schema(flags) */
static void seg_std(struct seg *s, size_t cap, unsigned flags)
{
	struct d9_header h = std_header();

	seg_init(s, cap);
	seg_header(s, &h);
	seg_schema(s, flags);
}

/* ---- Events as data ------------------------------------------------------------------------- */

/* One event to encode: f[] holds the arguments of its d9_enc_* call in D9_F_* slot order
 * (signed values as int64 bits), which is also what the decoder must give back. */
struct evspec { uint32_t type; uint64_t ticks; uint64_t f[5]; };

static int emit(struct d9_enc *e, const struct evspec *x)
{
	const uint64_t *f = x->f;

	switch (x->type) {
	case D9_EV_POLL_START: return d9_enc_poll_start(e, x->ticks, f[0], f[1]);
	case D9_EV_POLL_END: return d9_enc_poll_end(e, x->ticks, f[0]);
	case D9_EV_PARK: return d9_enc_park(e, x->ticks, (uint32_t)f[0], (int64_t)f[1]);
	case D9_EV_UNPARK: return d9_enc_unpark(e, x->ticks, (int64_t)f[0], f[1], f[2]);
	case D9_EV_WAKE: return d9_enc_wake(e, x->ticks, f[0], f[1], (uint32_t)f[2], (int64_t)f[3]);
	case D9_EV_SPAWN: return d9_enc_spawn(e, x->ticks, f[0], f[1], f[2]);
	case D9_EV_COROUTINE_EXIT: return d9_enc_coroutine_exit(e, x->ticks, f[0]);
	case D9_EV_QUEUE_SAMPLE: return d9_enc_queue_sample(e, x->ticks, f[0]);
	case D9_EV_BLOCKING_CALL:
		return d9_enc_blocking_call(e, x->ticks, f[0], f[1], (uint32_t)f[2], f[3], f[4]);
	case D9_EV_CPU_SAMPLE: return d9_enc_cpu_sample(e, x->ticks, f[0], (uint32_t)f[1], f[2]);
	case D9_EV_DROPPED: return d9_enc_dropped(e, x->ticks, f[0], (uint32_t)f[1]);
	}
	T_FAIL("emit: no encoder for type %u", x->type);
}

/* Fields the v1 decoder reports for a known type written by d9's own encoder. */
static uint32_t known_nfields(uint32_t type, unsigned flags)
{
	static const uint8_t n[D9_EV_KNOWN_MAX + 1] = { 0, 2, 1, 2, 3, 4, 3, 1, 1, 5, 3, 2, 2 };

	/* with D9_SCHEMA_COMPACT_WAITS: 3 when an UnparkStats follows (every_type's Unparks) */
	if (type == D9_EV_UNPARK && !(flags & (D9_SCHEMA_UNPARK_STATS | D9_SCHEMA_UNPARK_INTERVAL |
		D9_SCHEMA_COMPACT_WAITS)))
		return 1;
	return n[type];
}

/* ---- Decoding everything into arrays and a transcript --------------------------------------- */

struct prob { int kind; uint64_t off; char msg[200]; };
struct dev { struct d9_event ev; uint32_t tid, worker; uint64_t chunk; };
struct dchunk { uint8_t type; uint64_t off; uint32_t len, count; };

struct dec {
	int err; /* d9_reader_open_* */
	struct d9_header h; /* strings: copies owned here */
	struct dev *ev;
	size_t nev, cap_ev;
	struct d9_def *def; /* byte fields: copies owned here */
	size_t ndef, cap_def;
	struct dchunk *chunk; /* chunks d9_reader_next returned */
	size_t nchunk, cap_chunk;
	struct d9_trailer trailer;
	int ntrailer, trailer_err;
	struct prob prob[64];
	size_t nprob;
	int ev_errs, def_errs, next_ret;
	struct d9_reader_stats st;
	char *log; /* one line per decoded record: compared across input paths */
	size_t loglen;
	FILE *logf;
};

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 64;
	p = realloc(p, *cap * size);
	T_ASSERT(p);
	return p;
}

static void *dup_bytes(const void *p, size_t n)
{
	uint8_t *q = malloc(n + 1);

	T_ASSERT(q);
	if (n)
		memcpy(q, p, n);
	q[n] = 0;
	return q;
}

static void log_hex(FILE *f, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
}

static void on_prob(void *ctx, int kind, uint64_t off, const char *msg)
{
	struct dec *d = ctx;

	fprintf(d->logf, "problem %d %" PRIu64 " %s\n", kind, off, msg);
	if (d->nprob < NELEM(d->prob)) {
		d->prob[d->nprob].kind = kind;
		d->prob[d->nprob].off = off;
		snprintf(d->prob[d->nprob].msg, sizeof(d->prob[0].msg), "%s", msg);
		d->nprob++;
	}
}

static void dec_def(struct dec *d, const struct d9_def *in, const struct d9_chunk *c)
{
	struct d9_def *o;
	FILE *f = d->logf;

	d->def = grow(d->def, &d->cap_def, d->ndef, sizeof(*d->def));
	o = &d->def[d->ndef++];
	*o = *in;
	fprintf(f, "def %" PRIu64 " %u %" PRIu64, c->offset, in->kind, in->id);
	switch (in->kind) {
	case D9_DEF_STRING:
		o->u.string.s = dup_bytes(in->u.string.s, in->u.string.len);
		fputc(' ', f);
		log_hex(f, (const uint8_t *)in->u.string.s, in->u.string.len);
		break;
	case D9_DEF_STACK:
		for (uint32_t i = 0; i < in->u.stack.nframes; i++)
			fprintf(f, " %" PRIx64, in->u.stack.frames[i]);
		break;
	case D9_DEF_MODULE:
		o->u.module.build_id = dup_bytes(in->u.module.build_id, in->u.module.build_id_len);
		fprintf(f, " %" PRIu64 " %" PRIx64 " %" PRIx64 " %" PRIx64 " ", in->u.module.path,
			in->u.module.start, in->u.module.end, in->u.module.offset);
		log_hex(f, in->u.module.build_id, in->u.module.build_id_len);
		break;
	case D9_DEF_CUSTOM_SCHEMA:
		o->u.custom_schema.fields = dup_bytes(in->u.custom_schema.fields,
			in->u.custom_schema.fields_len);
		fprintf(f, " %" PRIu64 " ", in->u.custom_schema.name);
		log_hex(f, in->u.custom_schema.fields, in->u.custom_schema.fields_len);
		break;
	default: {
		/* the remaining kinds are plain integers: log the union as words */
		const uint64_t *u = (const uint64_t *)(const void *)&in->u;
		for (int i = 0; i < 6; i++)
			fprintf(f, " %" PRIu64, u[i]);
	}
	}
	fputc('\n', f);
}

static void dec_event(struct dec *d, const struct d9_event *ev, const struct d9_chunk *c)
{
	struct dev *o;
	FILE *f = d->logf;

	d->ev = grow(d->ev, &d->cap_ev, d->nev, sizeof(*d->ev));
	o = &d->ev[d->nev++];
	o->ev = *ev;
	o->tid = c->tid;
	o->worker = c->worker;
	o->chunk = c->offset;
	if (ev->data)
		o->ev.data = dup_bytes(ev->data, ev->data_len);
	fprintf(f, "ev %zu %u %u %u %" PRIu64 " %u", ev->offset, c->tid, c->worker, ev->type,
		ev->time, ev->nfields);
	for (int i = 0; i < D9_EV_MAX_FIELDS; i++)
		fprintf(f, " %" PRIu64, ev->f[i]);
	fputc(' ', f);
	if (ev->data)
		log_hex(f, ev->data, ev->data_len);
	fputc('\n', f);
}

static void dec_run(struct dec *d, struct d9_reader *r)
{
	const struct d9_header *h = d9_reader_header(r);
	struct d9_chunk c;
	int v;

	d->h = *h;
	d->h.writer = dup_bytes(h->writer, strlen(h->writer));
	d->h.process = dup_bytes(h->process, strlen(h->process));
	d->h.cmdline = dup_bytes(h->cmdline, h->cmdline_len);
	d->h.hostname = dup_bytes(h->hostname, strlen(h->hostname));
	d->h.boot_id = dup_bytes(h->boot_id, strlen(h->boot_id));
	d9_reader_on_problem(r, on_prob, d);
	while ((v = d9_reader_next(r, &c)) == 1) {
		d->chunk = grow(d->chunk, &d->cap_chunk, d->nchunk, sizeof(*d->chunk));
		d->chunk[d->nchunk++] = (struct dchunk){ c.type, c.offset, c.len, c.count };
		fprintf(d->logf, "chunk %u %" PRIu64 " %u\n", c.type, c.offset, c.len);
		if (c.type == D9_CHUNK_DEFS) {
			struct d9_defs_iter it;
			struct d9_def def;
			int dv;
			d9_defs_init(&it, r, &c);
			while ((dv = d9_defs_next(&it, &def)) == 1)
				dec_def(d, &def, &c);
			if (dv < 0)
				d->def_errs++;
		} else if (c.type == D9_CHUNK_EVENTS) {
			struct d9_events_iter it;
			struct d9_event ev;
			int ev_v;
			d9_events_init(&it, r, &c);
			while ((ev_v = d9_events_next(&it, &ev)) == 1)
				dec_event(d, &ev, &c);
			if (ev_v < 0)
				d->ev_errs++;
		} else if (c.type == D9_CHUNK_TRAILER) {
			d->trailer_err = d9_trailer_decode(&c, &d->trailer);
			d->ntrailer++;
			fprintf(d->logf, "trailer %d %" PRIu64 " %" PRIu64 "\n", d->trailer_err,
				d->trailer.events, d->trailer.chunks);
		}
	}
	d->next_ret = v;
	d->st = *d9_reader_stats(r);
	fprintf(d->logf, "end %d chunks %" PRIu64 " corrupt %" PRIu64 " unknown %" PRIu64
		" skipped %" PRIu64 " bad %" PRIu64 " truncated %d at %" PRIu64 " sealed %d\n", v,
		d->st.chunks, d->st.corrupt_chunks, d->st.unknown_chunks, d->st.skipped_bytes,
		d->st.bad_events, d->st.truncated, d->st.truncated_at, d->st.sealed);
}

static void dec_start(struct dec *d)
{
	memset(d, 0, sizeof(*d));
	d->logf = open_memstream(&d->log, &d->loglen);
	T_ASSERT(d->logf);
}

static void dec_finish(struct dec *d, struct d9_reader *r)
{
	if (r)
		dec_run(d, r);
	else
		fprintf(d->logf, "open error %d\n", d->err);
	d9_reader_close(r);
	fflush(d->logf);
}

/* Decodes a whole in-memory segment. Returns the open error (the arrays are empty then). */
static int dec_mem(struct dec *d, const void *buf, size_t len)
{
	struct d9_reader *r = NULL;

	dec_start(d);
	d->err = d9_reader_open_mem(&r, buf, len);
	if (d->err == 0)
		T_ASSERT(r != NULL);
	else
		T_ASSERT(r == NULL);
	dec_finish(d, r);
	return d->err;
}

static int dec_file(struct dec *d, const char *path)
{
	struct d9_reader *r = NULL;

	dec_start(d);
	d->err = d9_reader_open_file(&r, path);
	dec_finish(d, r);
	return d->err;
}

static void dec_free(struct dec *d)
{
	for (size_t i = 0; i < d->nev; i++)
		free((void *)d->ev[i].ev.data);
	for (size_t i = 0; i < d->ndef; i++) {
		if (d->def[i].kind == D9_DEF_STRING)
			free((void *)d->def[i].u.string.s);
		else if (d->def[i].kind == D9_DEF_MODULE)
			free((void *)d->def[i].u.module.build_id);
		else if (d->def[i].kind == D9_DEF_CUSTOM_SCHEMA)
			free((void *)d->def[i].u.custom_schema.fields);
	}
	if (d->h.writer) {
		free((void *)d->h.writer);
		free((void *)d->h.process);
		free((void *)d->h.cmdline);
		free((void *)d->h.hostname);
		free((void *)d->h.boot_id);
	}
	free(d->ev);
	free(d->def);
	free(d->chunk);
	if (d->logf)
		fclose(d->logf);
	free(d->log);
	memset(d, 0, sizeof(*d));
}

/* No damage of any kind was met. */
static void expect_clean(const struct dec *d)
{
	if (d->nprob)
		T_FAIL("unexpected problem %d at %" PRIu64 ": %s", d->prob[0].kind, d->prob[0].off,
			d->prob[0].msg);
	T_EQ(d->err, 0);
	T_EQ(d->next_ret, 0);
	T_EQ(d->st.corrupt_chunks, 0);
	T_EQ(d->st.unknown_chunks, 0);
	T_EQ(d->st.bad_events, 0);
	T_EQ(d->st.bad_defs, 0);
	T_EQ(d->st.skipped_bytes, 0);
	T_EQ(d->st.truncated, 0);
	T_EQ(d->ev_errs, 0);
	T_EQ(d->def_errs, 0);
}

static size_t count_probs(const struct dec *d, int kind)
{
	size_t n = 0;

	for (size_t i = 0; i < d->nprob; i++)
		n += d->prob[i].kind == kind;
	return n;
}

static const struct prob *find_prob(const struct dec *d, int kind)
{
	for (size_t i = 0; i < d->nprob; i++)
		if (d->prob[i].kind == kind)
			return &d->prob[i];
	T_FAIL("no problem of kind %d reported (%zu problems)", kind, d->nprob);
}

/* Same event apart from its file offset. */
static void expect_same_event(const struct dev *a, const struct dev *b, size_t i)
{
	if (a->ev.type != b->ev.type || a->ev.time != b->ev.time || a->ev.nfields != b->ev.nfields ||
		a->tid != b->tid || a->worker != b->worker || a->ev.data_len != b->ev.data_len ||
		memcmp(a->ev.f, b->ev.f, sizeof(a->ev.f)) != 0 ||
		(a->ev.data_len && memcmp(a->ev.data, b->ev.data, a->ev.data_len) != 0))
		T_FAIL("event %zu differs: type %u/%u time %" PRIu64 "/%" PRIu64 " f0 %" PRIu64 "/%"
			PRIu64, i, a->ev.type, b->ev.type, a->ev.time, b->ev.time, a->ev.f[0], b->ev.f[0]);
}

/* Checks the decoded events against what was encoded (shift: the chunk's time shift; the time
 * of each event is the clamped running maximum of ticks >> shift, starting at base). */
static void expect_events(const struct dev *got, const struct evspec *want, size_t n,
	uint64_t base_ticks, uint8_t shift, unsigned flags)
{
	uint64_t t = base_ticks >> shift;

	for (size_t i = 0; i < n; i++) {
		const struct d9_event *ev = &got[i].ev;
		uint32_t nf = known_nfields(want[i].type, flags);
		if ((want[i].ticks >> shift) > t)
			t = want[i].ticks >> shift;
		if (ev->type != want[i].type)
			T_FAIL("event %zu: type %u, expected %u", i, ev->type, want[i].type);
		if (ev->time != t)
			T_FAIL("event %zu (%s): time %" PRIu64 ", expected %" PRIu64, i,
				d9_event_name(ev->type), ev->time, t);
		if (ev->nfields != nf)
			T_FAIL("event %zu (%s): %u fields, expected %u", i, d9_event_name(ev->type),
				ev->nfields, nf);
		for (uint32_t k = 0; k < D9_EV_MAX_FIELDS; k++) {
			uint64_t w = k < nf && k < 5 ? want[i].f[k] : 0;
			/* Unpark statistics the schema does not list are unknown, never 0 */
			if (k >= nf && want[i].type == D9_EV_UNPARK &&
				(k == D9_F_UNPARK_CPU_NS || k == D9_F_UNPARK_SCHED_WAIT_NS))
				w = D9_UNKNOWN;
			/* so is a CpuSample's weight */
			if (k >= nf && want[i].type == D9_EV_CPU_SAMPLE && k == D9_F_CPU_WEIGHT_NS)
				w = D9_UNKNOWN;
			if (ev->f[k] != w)
				T_FAIL("event %zu (%s): f[%u] == %" PRIu64 " (0x%" PRIx64 "), expected %"
					PRIu64 " (0x%" PRIx64 ")", i, d9_event_name(ev->type), k, ev->f[k],
					ev->f[k], w, w);
		}
		if (want[i].type != D9_EV_CUSTOM)
			T_ASSERT(ev->data == NULL);
	}
}

/* ---- Round trips ------------------------------------------------------------------------------ */

#define U(x) ((uint64_t)(int64_t)(x))
#define AT(units) (MONO_BASE + 64ull * (units))

/* Every built-in event type with real values; cpu/sched stats are given also where the schema
 * has no room for them, and must then decode as 0. */
static const struct evspec every_type[] = {
	{ D9_EV_POLL_START, AT(3), { 7, 3 } },
	{ D9_EV_POLL_END, AT(10), { 7 } },
	{ D9_EV_PARK, AT(11), { D9_CALL_SELECT, 4000 } },
	{ D9_EV_UNPARK, AT(911), { 2, 123456, 789 } },
	{ D9_EV_WAKE, AT(912), { 7, 0, D9_WAKE_FD, 17 } },
	{ D9_EV_SPAWN, AT(920), { 8, 7, 4 } },
	{ D9_EV_COROUTINE_EXIT, AT(925), { 7 } },
	{ D9_EV_QUEUE_SAMPLE, AT(925), { 3 } },
	{ D9_EV_BLOCKING_CALL, AT(30000), { 8, 12, D9_FD_FILE, 1500000, 5 } },
	{ D9_EV_CPU_SAMPLE, AT(30001), { 8, D9_CPU_OFF, 6 } },
	{ D9_EV_DROPPED, AT(30002), { 1000, D9_DROP_BUFFERS_FULL } },
	{ D9_EV_PARK, AT(30003), { D9_CALL_EPOLL_PWAIT2, U(-1) } },
	{ D9_EV_UNPARK, AT(1000000), { U(-4), 0, 0 } },
	{ D9_EV_BLOCKING_CALL, AT(1000001), { 0, 300, D9_FD_SOCKET, 0, 0 } },
	{ D9_EV_CPU_SAMPLE, AT(1000001), { 0, D9_CPU_ON, 1ull << 40 } },
	{ D9_EV_DROPPED, AT(1000002), { 1ull << 50, D9_DROP_SAMPLES_LOST } },
	{ D9_EV_UNPARK, AT(1000003), { 0, UINT64_MAX, 1 } },
};

static void roundtrip_every_type(unsigned flags)
{
	struct seg s;
	struct dec d;
	struct d9_enc e;
	struct evspec want[NELEM(every_type)];

	memcpy(want, every_type, sizeof(want));
	if (!(flags & (D9_SCHEMA_UNPARK_STATS | D9_SCHEMA_UNPARK_INTERVAL |
		D9_SCHEMA_COMPACT_WAITS))) {
		for (size_t i = 0; i < NELEM(want); i++)
			if (want[i].type == D9_EV_UNPARK)
				want[i].f[1] = want[i].f[2] = 0;
	}
	seg_std(&s, 1 << 16, flags);
	seg_enc_begin(&s, &e, 4243, 1, MONO_BASE, 6, (uint8_t)flags, 4096);
	for (size_t i = 0; i < NELEM(every_type); i++)
		T_EQ(emit(&e, &every_type[i]), 0);
	T_EQ(e.count, NELEM(every_type));
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, NELEM(every_type));
	expect_events(d.ev, want, d.nev, MONO_BASE, 6, flags);
	for (size_t i = 0; i < d.nev; i++) {
		T_EQ(d.ev[i].tid, 4243);
		T_EQ(d.ev[i].worker, 1);
	}
	/* the EVENTS chunk head carries what d9_enc_begin was given */
	T_EQ(d.nchunk, 2);
	T_EQ(d.chunk[1].type, D9_CHUNK_EVENTS);
	T_EQ(d.chunk[1].count, NELEM(every_type));
	T_EQU(d.chunk[1].off, s.off[2]);
	dec_free(&d);
	seg_free(&s);
}

TEST(roundtrip_every_event_type)
{
	roundtrip_every_type(0);
}

TEST(roundtrip_every_event_type_unpark_stats)
{
	roundtrip_every_type(D9_SCHEMA_UNPARK_STATS);
}

/* The writer's layout: value plus one, 0 = unknown; UINT64_MAX (D9_UNKNOWN) stays unknown */
TEST(roundtrip_every_event_type_unpark_interval)
{
	roundtrip_every_type(D9_SCHEMA_UNPARK_INTERVAL);
}

/* Interval layout on disk: `cpu_ns+1` / `sched_wait_ns+1`, one byte for unknown, decoded back to
 * the value, D9_UNKNOWN for unknown, and a measured 0 stays 0. */
TEST(unpark_interval_unknown_and_zero)
{
	struct seg s;
	struct d9_enc e;
	struct dec d;

	seg_std(&s, 4096, D9_SCHEMA_UNPARK_INTERVAL);
	seg_enc_begin(&s, &e, 1, 1, 0, 0, D9_SCHEMA_UNPARK_INTERVAL, 4096);
	uint8_t *before = e.p;
	T_EQ(d9_enc_unpark(&e, 3, 2, D9_UNKNOWN, D9_UNKNOWN), 0);
	T_EQ(e.p - before, 4); /* head, ready, two zero bytes */
	T_EQ(d9_enc_unpark(&e, 4, 2, 0, 0), 0);
	T_EQ(d9_enc_unpark(&e, 5, 2, 200000000, 127), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 3);
	T_EQ(d.ev[0].ev.f[D9_F_UNPARK_CPU_NS], D9_UNKNOWN);
	T_EQ(d.ev[0].ev.f[D9_F_UNPARK_SCHED_WAIT_NS], D9_UNKNOWN);
	T_EQ(d.ev[1].ev.f[D9_F_UNPARK_CPU_NS], 0);
	T_EQ(d.ev[1].ev.f[D9_F_UNPARK_SCHED_WAIT_NS], 0);
	T_EQ(d.ev[2].ev.f[D9_F_UNPARK_CPU_NS], 200000000);
	T_EQ(d.ev[2].ev.f[D9_F_UNPARK_SCHED_WAIT_NS], 127);
	T_EQ(d.ev[2].ev.nfields, 3);
	/* the trailer's counter walks the same layout */
	uint64_t counts[D9_EV_KNOWN_MAX + 1] = { 0 };
	d9_chunk_count_types(e.chunk, D9_SCHEMA_UNPARK_INTERVAL, counts);
	T_EQ(counts[D9_EV_UNPARK], 3);
	dec_free(&d);
	seg_free(&s);
}

/* Format 1.3 (the agent's layout), with every other type around it */
TEST(roundtrip_every_event_type_compact_waits)
{
	roundtrip_every_type(D9_SCHEMA_COMPACT_WAITS);
}

/* Format 1.3's compact waits: Park's timeout as the difference from the chunk's previous Park's
 * (one byte when the same, -1 before the chunk's first), an Unpark's statistics in an
 * UnparkStats after it only when known, merged by the decoder and counted with the Unpark. */
TEST(compact_waits)
{
	const unsigned flags = D9_SCHEMA_COMPACT_WAITS | D9_SCHEMA_SCHED_DELAY;
	struct seg s;
	struct d9_enc e;
	struct dec d;
	uint8_t *before;

	seg_std(&s, 8192, flags);
	seg_enc_begin(&s, &e, 1, 1, 0, 0, (uint8_t)flags, 4096);
	before = e.p;
	T_EQ(d9_enc_park(&e, 1, D9_CALL_EPOLL_WAIT, -1), 0);
	T_EQ(e.p - before, 3); /* head, call, 00: -1 is the chunk's start */
	before = e.p;
	T_EQ(d9_enc_unpark(&e, 2, 1, D9_UNKNOWN, D9_UNKNOWN), 0);
	T_EQ(e.p - before, 2); /* head, ready: no statistics, no bytes */
	T_EQ(d9_enc_park(&e, 3, D9_CALL_EPOLL_WAIT, 7494000), 0);
	before = e.p;
	T_EQ(d9_enc_park(&e, 4, D9_CALL_EPOLL_WAIT, 7494000), 0);
	T_EQ(e.p - before, 3); /* the same timeout again */
	T_EQ(d9_enc_park(&e, 5, D9_CALL_POLL, 6000), 0);
	before = e.p;
	T_EQ(d9_enc_unpark(&e, 6, 0, 200000000, D9_UNKNOWN), 0);
	/* 0F 14, then 200000001 (4 bytes) and 00 */
	T_EQ(e.p[-7], D9_EV_EXTENDED);
	T_EQ(e.p[-6], D9_EV_UNPARK_STATS);
	T_EQ(e.p - before, 2 + 2 + 4 + 1);
	T_EQ(d9_enc_unpark(&e, 7, 3, 0, 0), 0);
	/* a stray UnparkStats (after a SchedDelay): an event of code 20 of its own */
	T_EQ(d9_enc_sched_delay(&e, 8, 0, 5, D9_FD_SOCKET, 60000, D9_UNKNOWN), 0);
	static const uint8_t stats[] = { 0x05, 0x00 };
	T_EQ(d9_enc_raw(&e, 8, D9_EV_UNPARK_STATS, stats, sizeof(stats)), 0);
	T_EQ(d9_enc_park(&e, 9, D9_CALL_POLL, INT64_MAX >> 2), 0);
	T_EQ(d9_enc_park(&e, 10, D9_CALL_POLL, -(INT64_MAX >> 2)), 0);
	uint32_t count = e.count;
	uint64_t counts[D9_EV_KNOWN_MAX + 1] = { 0 };
	seg_enc_end(&s, &e);
	d9_chunk_count_types(e.chunk, flags, counts);
	T_EQ(counts[D9_EV_PARK], 6);
	T_EQ(counts[D9_EV_UNPARK], 3);
	/* a second chunk starts again from -1 */
	seg_enc_begin(&s, &e, 1, 1, 20, 0, (uint8_t)flags, 4096);
	T_EQ(d9_enc_park(&e, 21, D9_CALL_EPOLL_WAIT, 7494000), 0);
	T_EQ(d9_enc_park(&e, 22, D9_CALL_EPOLL_WAIT, -1), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 13);
	T_EQ(count, 11); /* the UnparkStats after an Unpark are not events */
	T_EQ(d.chunk[1].count, 11);
	static const int64_t to[] = { -1, 7494000, 7494000, 6000, INT64_MAX >> 2, -(INT64_MAX >> 2),
		7494000, -1 };
	static const size_t at[] = { 0, 2, 3, 4, 9, 10, 11, 12 };
	for (size_t i = 0; i < NELEM(at); i++) {
		T_EQ(d.ev[at[i]].ev.type, D9_EV_PARK);
		T_EQ((int64_t)d.ev[at[i]].ev.f[D9_F_PARK_TIMEOUT_US], to[i]);
		T_EQ(d.ev[at[i]].ev.nfields, 2);
	}
	T_EQ(d.ev[1].ev.type, D9_EV_UNPARK);
	T_EQ(d.ev[1].ev.nfields, 1);
	T_EQ(d.ev[1].ev.f[D9_F_UNPARK_CPU_NS], D9_UNKNOWN);
	T_EQ(d.ev[1].ev.f[D9_F_UNPARK_SCHED_WAIT_NS], D9_UNKNOWN);
	T_EQ(d.ev[5].ev.type, D9_EV_UNPARK);
	T_EQ(d.ev[5].ev.f[D9_F_UNPARK_READY], 0);
	T_EQ(d.ev[5].ev.f[D9_F_UNPARK_CPU_NS], 200000000);
	T_EQ(d.ev[5].ev.f[D9_F_UNPARK_SCHED_WAIT_NS], D9_UNKNOWN);
	T_EQ(d.ev[5].ev.nfields, 3);
	T_EQ(d.ev[6].ev.type, D9_EV_UNPARK);
	T_EQ(d.ev[6].ev.f[D9_F_UNPARK_READY], 3);
	T_EQ(d.ev[6].ev.f[D9_F_UNPARK_CPU_NS], 0);
	T_EQ(d.ev[6].ev.f[D9_F_UNPARK_SCHED_WAIT_NS], 0);
	T_EQ(d.ev[7].ev.type, D9_EV_SCHED_DELAY);
	T_EQ(d.ev[8].ev.type, D9_EV_UNPARK_STATS);
	T_EQ(d.ev[8].ev.f[0], 5);
	T_EQ(d.ev[8].ev.f[1], 0);
	dec_free(&d);
	seg_free(&s);
}

/* SchedDelay (code 14) is described by the writer's schema when asked for: decoded by position,
 * named by the schema, and walked over (not counted) by the trailer's type counter. */
TEST(sched_delay_schema_roundtrip)
{
	const unsigned flags = D9_SCHEMA_UNPARK_INTERVAL | D9_SCHEMA_SCHED_DELAY;
	struct seg s;
	struct d9_enc e;
	struct dec d;

	seg_std(&s, 4096, flags);
	seg_enc_begin(&s, &e, 1, 1, 0, 0, (uint8_t)flags, 4096);
	T_EQ(d9_enc_sched_delay(&e, 3, 77, 5, D9_FD_SOCKET, 2500000, 2400000), 0);
	T_EQ(d9_enc_unpark(&e, 4, 1, D9_UNKNOWN, D9_UNKNOWN), 0);
	T_EQ(d9_enc_sched_delay(&e, 5, 77, 5, D9_FD_SOCKET, 60000, D9_UNKNOWN), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 3);
	T_EQ(d.ev[0].ev.type, D9_EV_SCHED_DELAY);
	T_EQ(d.ev[0].ev.f[D9_F_SD_COROUTINE], 77);
	T_EQ(d.ev[0].ev.f[D9_F_SD_CALL], 5);
	T_EQ(d.ev[0].ev.f[D9_F_SD_FD_KIND], D9_FD_SOCKET);
	T_EQ(d.ev[0].ev.f[D9_F_SD_DURATION_NS], 2500000);
	T_EQ(d.ev[0].ev.f[D9_F_SD_SCHED_WAIT_NS], 2400000);
	T_EQ(d.ev[1].ev.type, D9_EV_UNPARK);
	T_EQ(d.ev[2].ev.f[D9_F_SD_SCHED_WAIT_NS], D9_UNKNOWN);
	uint64_t counts[D9_EV_KNOWN_MAX + 1] = { 0 };
	d9_chunk_count_types(e.chunk, flags, counts);
	T_EQ(counts[D9_EV_UNPARK], 1);
	struct d9_reader *r;
	struct d9_chunk c;
	T_EQ(d9_reader_open_mem(&r, s.buf, seg_len(&s)), 0);
	T_EQ(d9_reader_next(r, &c), 1);
	const struct d9_schema_type *st = d9_reader_schema(r, D9_EV_SCHED_DELAY);
	T_ASSERT(st != NULL);
	T_ASSERT(!strcmp(st->name, D9_SCHED_DELAY_NAME));
	T_EQ(st->nfields, 5);
	T_ASSERT(!strcmp(st->fields[4].name, "sched_wait_ns"));
	d9_reader_close(r);
	dec_free(&d);
	seg_free(&s);
}

/* RequestBegin (16) and RequestEnd (17), described by the writer's schema with
 * D9_SCHEMA_REQUESTS: extended-form events whose fields come back by position (fd and status
 * signed); d9_chunk_count_types steps over them and counts the built-in events after them. */
TEST(request_events_roundtrip)
{
	const unsigned flags = D9_SCHEMA_UNPARK_INTERVAL | D9_SCHEMA_SCHED_DELAY | D9_SCHEMA_REQUESTS;
	struct seg s;
	struct d9_enc e;
	struct dec d;

	seg_std(&s, 4096, flags);
	seg_enc_begin(&s, &e, 1, 1, 0, 0, (uint8_t)flags, 4096);
	T_EQ(d9_enc_poll_start(&e, 1, 9, 0), 0);
	T_EQ(d9_enc_request_begin(&e, 2, 300, 7, 9, D9_REQ_SRC_ZERO_CODE, 4), 0);
	T_EQ(d9_enc_request_begin(&e, 20, 1ull << 40, -1, 9, D9_REQ_SRC_API, 0), 0);
	T_EQ(d9_enc_request_end(&e, 5000, 1ull << 40, D9_REQ_SRC_API, 0, 0, 0, 1, -404, 0), 0);
	T_EQ(d9_enc_request_end(&e, 5001, 300, D9_REQ_SRC_ZERO_CODE, 88, 164,
		D9_REQ_HTTP | D9_REQ_AMBIGUOUS, 2, 0, 123456), 0);
	T_EQ(d9_enc_poll_end(&e, 5002, 9), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 6);
	T_EQ(d.ev[1].ev.type, D9_EV_REQUEST_BEGIN);
	T_EQ(d.ev[1].ev.f[D9_F_RB_ID], 300);
	T_EQ((int64_t)d.ev[1].ev.f[D9_F_RB_FD], 7);
	T_EQ(d.ev[1].ev.f[D9_F_RB_COROUTINE], 9);
	T_EQ(d.ev[1].ev.f[D9_F_RB_PREVIEW], 4);
	T_EQ((int64_t)d.ev[2].ev.f[D9_F_RB_FD], -1);
	T_EQ(d.ev[2].ev.f[D9_F_RB_SOURCE], D9_REQ_SRC_API);
	T_EQ(d.ev[3].ev.type, D9_EV_REQUEST_END);
	T_EQ((int64_t)d.ev[3].ev.f[D9_F_RE_STATUS], -404);
	T_EQ(d.ev[4].ev.f[D9_F_RE_ID], 300);
	T_EQ(d.ev[4].ev.f[D9_F_RE_BYTES_IN], 88);
	T_EQ(d.ev[4].ev.f[D9_F_RE_BYTES_OUT], 164);
	T_EQ(d.ev[4].ev.f[D9_F_RE_FLAGS], D9_REQ_HTTP | D9_REQ_AMBIGUOUS);
	T_EQ(d.ev[4].ev.f[D9_F_RE_COUNT], 2);
	T_EQ(d.ev[4].ev.f[D9_F_RE_TAIL_NS], 123456);
	T_EQ(d.ev[5].ev.type, D9_EV_POLL_END);
	uint64_t counts[D9_EV_KNOWN_MAX + 1] = { 0 };
	d9_chunk_count_types(e.chunk, flags, counts);
	T_EQ(counts[D9_EV_POLL_START], 1);
	T_EQ(counts[D9_EV_POLL_END], 1); /* after the request events: they were stepped over */
	struct d9_reader *r;
	struct d9_chunk c;
	T_EQ(d9_reader_open_mem(&r, s.buf, seg_len(&s)), 0);
	T_EQ(d9_reader_next(r, &c), 1);
	const struct d9_schema_type *st = d9_reader_schema(r, D9_EV_REQUEST_END);
	T_ASSERT(st != NULL);
	T_ASSERT(!strcmp(st->name, D9_REQUEST_END_NAME));
	T_EQ(st->nfields, 8);
	st = d9_reader_schema(r, D9_EV_REQUEST_BEGIN);
	T_ASSERT(st != NULL && !strcmp(st->name, D9_REQUEST_BEGIN_NAME) && st->nfields == 5);
	d9_reader_close(r);
	dec_free(&d);
	seg_free(&s);
}

/* EVENTS chunks before any SCHEMA chunk use the built-in layout, which is what d9's writer
 * writes by default (Unpark with `ready` only): FORMAT.md, "Chunk types". */
TEST(no_schema_chunk_uses_default_layout)
{
	static const struct evspec want[] = {
		{ D9_EV_PARK, AT(1), { D9_CALL_POLL, 2000 } },
		{ D9_EV_UNPARK, AT(40), { 3, 0, 0 } },
		{ D9_EV_WAKE, AT(41), { 9, 0, D9_WAKE_FD, 12 } },
		{ D9_EV_POLL_START, AT(42), { 9, 1 } },
		{ D9_EV_POLL_END, AT(50), { 9 } },
	};
	struct d9_header h = std_header();
	struct seg s;
	struct dec d;
	struct d9_enc e;

	seg_init(&s, 4096);
	seg_header(&s, &h);
	seg_enc_begin(&s, &e, 1, 1, MONO_BASE, 6, 0, 4096);
	for (size_t i = 0; i < NELEM(want); i++)
		T_EQ(emit(&e, &want[i]), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, NELEM(want));
	expect_events(d.ev, want, d.nev, MONO_BASE, 6, 0);
	dec_free(&d);
	seg_free(&s);
}

/* Unpark's schema follows the flags: 1 field without stats, 3 with; the bytes differ too. */
TEST(unpark_schema_and_size_follow_flags)
{
	for (unsigned flags = 0; flags <= D9_SCHEMA_UNPARK_STATS; flags++) {
		struct seg s;
		struct d9_enc e;
		struct d9_reader *r;
		struct d9_chunk c;

		seg_std(&s, 4096, flags);
		seg_enc_begin(&s, &e, 1, 1, 0, 0, (uint8_t)flags, 4096);
		uint8_t *before = e.p;
		T_EQ(d9_enc_unpark(&e, 3, 2, 1000, 300), 0);
		/* head(1) + ready zigzag(2)=4 (1); stats: + 1000 (2 bytes) + 300 (2 bytes) */
		T_EQ(e.p - before, flags ? 6 : 2);
		seg_enc_end(&s, &e);
		T_EQ(d9_reader_open_mem(&r, s.buf, seg_len(&s)), 0);
		T_EQ(d9_reader_next(r, &c), 1);
		T_EQ(c.type, D9_CHUNK_SCHEMA);
		const struct d9_schema_type *st = d9_reader_schema(r, D9_EV_UNPARK);
		T_ASSERT(st != NULL);
		T_ASSERT(!strcmp(st->name, "Unpark"));
		T_EQ(st->nfields, flags ? 3 : 1);
		T_ASSERT(!strcmp(st->fields[0].name, "ready"));
		T_EQ(st->fields[0].enc, D9_FIELD_I);
		{
			struct d9_enc e2;
			struct d9_reader *r2;
			struct seg s2;
			seg_std(&s2, 4096, D9_SCHEMA_UNPARK_INTERVAL);
			seg_enc_begin(&s2, &e2, 1, 1, 0, 0, D9_SCHEMA_UNPARK_INTERVAL, 4096);
			seg_enc_end(&s2, &e2);
			T_EQ(d9_reader_open_mem(&r2, s2.buf, seg_len(&s2)), 0);
			T_EQ(d9_reader_next(r2, &c), 1);
			const struct d9_schema_type *s3 = d9_reader_schema(r2, D9_EV_UNPARK);
			T_ASSERT(s3 != NULL);
			T_EQ(s3->nfields, 3);
			T_ASSERT(!strcmp(s3->fields[1].name, "cpu_ns+1"));
			T_ASSERT(!strcmp(s3->fields[2].name, "sched_wait_ns+1"));
			T_EQ(s3->fields[1].slot, D9_SLOT_CPU_NS_P1);
			T_EQ(s3->fields[2].slot, D9_SLOT_SCHED_WAIT_NS_P1);
			d9_reader_close(r2);
			seg_free(&s2);
		}
		if (flags) {
			T_ASSERT(!strcmp(st->fields[1].name, "cpu_ns"));
			T_ASSERT(!strcmp(st->fields[2].name, "sched_wait_ns"));
			T_EQ(st->fields[2].slot, D9_F_UNPARK_SCHED_WAIT_NS);
		}
		d9_reader_close(r);
		seg_free(&s);
	}
}

/* Wake of every kind, with a fd, timer deadlines on both sides of the event and addresses. */
TEST(roundtrip_wake_every_kind)
{
	static const struct evspec wakes[] = {
		{ D9_EV_WAKE, AT(1), { 40, 0, D9_WAKE_OTHER, 0 } },
		{ D9_EV_WAKE, AT(2), { 41, 0, D9_WAKE_FD, 1023 } },
		{ D9_EV_WAKE, AT(3), { 42, 0, D9_WAKE_TIMER, U(-3) } }, /* deadline passed 3 units ago */
		{ D9_EV_WAKE, AT(4), { 43, 0, D9_WAKE_TIMER, 15625 } }, /* 1 ms ahead */
		{ D9_EV_WAKE, AT(5), { 44, 0, D9_WAKE_TIMER, U(-(1ll << 59)) } }, /* the limit: |object| < 2^60 */
		{ D9_EV_WAKE, AT(6), { 45, 40, D9_WAKE_COND, 0x55d0c0a01e80ull } },
		{ D9_EV_WAKE, AT(7), { 40, 45, D9_WAKE_MUTEX, 0x7f3a1c002a40ull } },
		{ D9_EV_WAKE, AT(8), { 1, 9000, D9_WAKE_JOIN, 0 } },
		{ D9_EV_WAKE, AT(9), { 9000, 1, D9_WAKE_INTERRUPT, 0 } },
		{ D9_EV_WAKE, AT(10), { 9001, 9000, D9_WAKE_SPAWN, U((1ll << 59) - 1) } },
		{ D9_EV_WAKE, AT(11), { 9001, 0, D9_WAKE_FD, 0 } },
	};
	struct seg s;
	struct dec d;
	struct d9_enc e;

	seg_std(&s, 8192, 0);
	seg_enc_begin(&s, &e, 1, 1, MONO_BASE, 6, 0, 4096);
	for (size_t i = 0; i < NELEM(wakes); i++)
		T_EQ(emit(&e, &wakes[i]), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, NELEM(wakes));
	expect_events(d.ev, wakes, d.nev, MONO_BASE, 6, 0);
	T_EQ((int64_t)d.ev[2].ev.f[D9_F_WAKE_OBJECT], -3);
	for (uint32_t k = 0; k <= D9_WAKE_MAX; k++)
		T_ASSERT(strcmp(d9_wake_kind_name(k), "unknown") != 0);
	T_ASSERT(!strcmp(d9_wake_kind_name(D9_WAKE_COND), "cond"));
	dec_free(&d);
	seg_free(&s);
}

/* CustomEvent (code 12) through d9_enc_raw: schema id + a 'b' field holding sync-like bytes. */
TEST(roundtrip_custom_event_raw)
{
	static const uint8_t data[] = { 0x00, 0xff, 0x80, 'D', '9', 0x04, 0x0a, 0x7f };
	uint8_t fields[32];
	uint8_t *p = fields;
	struct seg s;
	struct dec d;
	struct d9_enc e;

	p = d9_put_varint(p, 300); /* CustomSchema id */
	p = d9_put_varint(p, sizeof(data));
	memcpy(p, data, sizeof(data));
	p += sizeof(data);
	seg_std(&s, 8192, 0);
	seg_enc_begin(&s, &e, 9, 2, MONO_BASE, 6, 0, 4096);
	T_EQ(d9_enc_poll_start(&e, AT(1), 5, 1), 0);
	T_EQ(d9_enc_raw(&e, AT(2), D9_EV_CUSTOM, fields, (size_t)(p - fields)), 0);
	T_EQ(d9_enc_raw(&e, AT(200), D9_EV_CUSTOM, "\x01\x00", 2), 0); /* schema 1, empty data */
	T_EQ(d9_enc_poll_end(&e, AT(201), 5), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 4);
	const struct d9_event *ev = &d.ev[1].ev;
	T_EQ(ev->type, D9_EV_CUSTOM);
	T_EQU(ev->time, (MONO_BASE >> 6) + 2);
	T_EQ(ev->nfields, 2);
	T_EQ(ev->f[D9_F_CUSTOM_SCHEMA], 300);
	T_EQ(ev->f[D9_F_CUSTOM_DATA], sizeof(data)); /* a 'b' field's value is its length */
	T_EQ(ev->data_len, sizeof(data));
	T_ASSERT(memcmp(ev->data, data, sizeof(data)) == 0);
	ev = &d.ev[2].ev;
	T_EQ(ev->f[D9_F_CUSTOM_SCHEMA], 1);
	T_EQ(ev->data_len, 0);
	T_EQ(d.ev[3].ev.type, D9_EV_POLL_END);
	T_EQ(d.ev[3].ev.f[0], 5);
	T_EQU(d.ev[3].ev.time, (MONO_BASE >> 6) + 201);
	T_ASSERT(!strcmp(d9_event_name(D9_EV_CUSTOM), "CustomEvent"));
	dec_free(&d);
	seg_free(&s);
}

/* Coroutine ids travel as deltas against the previous non-zero id: small, huge (writers keep
 * them below 2^63), 0 (none), and jumps in both directions must all come back exactly. */
TEST(roundtrip_coroutine_ids)
{
	static const uint64_t ids[] = {
		1, 1, 2, 1000000, 3, 0, 7, (1ull << 63) - 1, 1, (1ull << 63) - 1, 1ull << 62,
		(1ull << 63) - 2, 0x7fffdeadbeefull, 5, 0, 0, 4096, 4095, 0x55d0c0a01e80ull, 128, 64, 63,
	};
	struct evspec want[3 * NELEM(ids)];
	size_t n = 0;
	struct seg s;
	struct dec d;
	struct d9_enc e;

	for (size_t i = 0; i < NELEM(ids); i++) {
		uint64_t prev = i ? ids[i - 1] : 0;
		want[n++] = (struct evspec){ D9_EV_POLL_START, AT(3 * i), { ids[i], i % 5 } };
		want[n++] = (struct evspec){ D9_EV_WAKE, AT(3 * i + 1), { prev, ids[i], D9_WAKE_COND, 0 } };
		want[n++] = (struct evspec){ D9_EV_SPAWN, AT(3 * i + 2), { ids[i], prev, 2 } };
	}
	seg_std(&s, 8192, 0);
	seg_enc_begin(&s, &e, 1, 1, MONO_BASE, 6, 0, 4096);
	for (size_t i = 0; i < n; i++)
		T_EQ(emit(&e, &want[i]), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, n);
	expect_events(d.ev, want, n, MONO_BASE, 6, 0);
	dec_free(&d);
	seg_free(&s);

	/* sizes: the same coroutine again costs 1 byte, none costs 1 byte, a near one 1 byte */
	uint8_t buf[256];
	T_EQ(d9_enc_begin(&e, buf, sizeof(buf), 1, 1, 0, 0, 0), 0);
	uint8_t *p0 = e.p;
	T_EQ(d9_enc_poll_start(&e, 0, 5000, 1), 0); /* head + zigzag(5000)+1 = 10001 (2) + 1 */
	T_EQ(e.p - p0, 4);
	p0 = e.p;
	T_EQ(d9_enc_poll_end(&e, 0, 5000), 0); /* head + 1 */
	T_EQ(e.p - p0, 2);
	p0 = e.p;
	T_EQ(d9_enc_wake(&e, 0, 5030, 0, D9_WAKE_FD, 9), 0); /* head, 1, 1, 1, 1 */
	T_EQ(e.p - p0, 5);
}

/* Time deltas: 0..6 inline in the first byte, 7 and more as a varint; huge ones; backwards
 * steps and events before the chunk's base clamp to the previous time. */
TEST(roundtrip_time_deltas)
{
	static const struct { uint64_t ticks; int size; } steps[] = {
		{ 1000, 2 }, /* delta 0 from base: inline */
		{ 1007, 2 }, /* 7: inline (the low three bits ride in the type byte) */
		{ 1015, 3 }, /* 8: varint(8 >> 3) follows (1 byte) */
		{ 2038, 3 }, /* 1023: varint(127), still 1 byte */
		{ 3062, 4 }, /* 1024: varint(128), 2 bytes */
		{ 3062 + (1ull << 40), 8 }, /* 2^40: varint(2^37), 6 bytes */
		{ 3062 + (1ull << 40) + (1ull << 62), 11 }, /* 2^62: varint(2^59), 9 bytes */
		{ 500, 2 }, /* backwards: clamped, delta 0 */
		{ 3062 + (1ull << 40) + (1ull << 62) + 1, 2 }, /* +1 over the clamped time */
	};
	struct seg s;
	struct dec d;
	struct d9_enc e;
	struct evspec want[NELEM(steps)];

	seg_std(&s, 4096, 0);
	seg_enc_begin(&s, &e, 1, 1, 1000, 0, 0, 4096);
	for (size_t i = 0; i < NELEM(steps); i++) {
		uint8_t *p0 = e.p;
		want[i] = (struct evspec){ D9_EV_POLL_END, steps[i].ticks, { 77 } };
		T_EQ(emit(&e, &want[i]), 0);
		if (e.p - p0 != steps[i].size + (i == 0)) /* the first names coroutine 77: 1 more */
			T_FAIL("step %zu (ticks %" PRIu64 "): %td bytes, expected %d", i, steps[i].ticks,
				e.p - p0, steps[i].size + (i == 0));
	}
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, NELEM(steps));
	expect_events(d.ev, want, d.nev, 1000, 0, 0);
	T_EQU(d.ev[7].ev.time, 3062 + (1ull << 40) + (1ull << 62)); /* the clamped step */
	dec_free(&d);
	seg_free(&s);

	/* shift 6: ticks fold into 64-tick units; a base that is not a multiple of 64 rounds down;
	 * an event before the base clamps to it */
	static const struct evspec s6[] = {
		{ D9_EV_POLL_END, 64000 + 63, { 1 } }, /* unit 1000: delta 0 */
		{ D9_EV_POLL_END, 64000 - 1, { 1 } }, /* unit 999: before the base, clamped to 1000 */
		{ D9_EV_POLL_END, 64064, { 1 } }, /* unit 1001 */
		{ D9_EV_POLL_END, 64064 + 64 * 7, { 1 } }, /* unit 1008 */
	};
	seg_std(&s, 4096, 0);
	seg_enc_begin(&s, &e, 1, 1, 64000 + 5, 6, 0, 4096);
	for (size_t i = 0; i < NELEM(s6); i++)
		T_EQ(emit(&e, &s6[i]), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 4);
	T_EQ(d.ev[0].ev.time, 1000);
	T_EQ(d.ev[1].ev.time, 1000);
	T_EQ(d.ev[2].ev.time, 1001);
	T_EQ(d.ev[3].ev.time, 1008);
	dec_free(&d);
	seg_free(&s);
}

/* Every definition kind, with the extremes each one allows. */
TEST(roundtrip_every_def_kind)
{
	static const char weird[] = "caf\xc3\xa9\0tab\there"; /* UTF-8, an embedded NUL, a tab */
	static const uint8_t build_id[20] = { 0x8a, 0x1e, 0x00, 0x5b, 0xc3, 0x0d, 0x9f, 0x44, 0x12,
		0xa0, 0xee, 0x31, 0x07, 0x68, 0xfa, 0x2c, 0x90, 0x0b, 0x5d, 0x61 };
	static const uint8_t cs_fields[] = { 'u', 5, 'b', 'y', 't', 'e', 's' };
	uint64_t frames[D9_STACK_MAX_FRAMES + 1];
	struct seg s;
	struct dec d;
	uint8_t body[32];

	/* innermost first; addresses fall and jump like a real stack */
	for (int i = 0; i <= D9_STACK_MAX_FRAMES; i++)
		frames[i] = 0x7ffff7a3c000ull - (uint64_t)i * 0x1234 + (i % 3 == 0 ? 0x10000000ull : 0);
	frames[5] = 0x401000; /* main binary, far below the libraries */
	seg_std(&s, 16384, 0);
	seg_open(&s, D9_CHUNK_DEFS);
	d9_def_string(&s.w, 1, "st_read", 7);
	d9_def_string(&s.w, 300, "", 0);
	d9_def_string(&s.w, 1ull << 40, weird, sizeof(weird) - 1);
	d9_def_location(&s.w, 2, 0x55d0c0a01230ull, 0x55d0c0a01288ull, 9, 1);
	d9_def_location(&s.w, 3, 0, 0, 0, 0);
	d9_def_stack(&s.w, 4, frames, D9_STACK_MAX_FRAMES);
	d9_def_stack(&s.w, 5, frames, 1);
	d9_def_stack(&s.w, 6, frames, 0);
	d9_def_stack(&s.w, 7, frames, D9_STACK_MAX_FRAMES + 1); /* capped at 128 by the writer */
	d9_def_module(&s.w, 9, 1, 0x7ffff7a00000ull, 0x7ffff7bff000ull, 0x28000, build_id,
		sizeof(build_id));
	d9_def_module(&s.w, 10, 300, 0x400000, 0x401000, 0, NULL, 0);
	d9_def_symbol(&s.w, 0x7ffff7a3b000ull, 0x1c4, 1, 300, 1234, 2);
	d9_def_thread(&s.w, 4243, 1, 1, D9_ROLE_WORKER);
	d9_def_thread(&s.w, 4250, 300, 0, D9_ROLE_AGENT);
	d9_def_clock_sync(&s.w, 123456789012345ull, 5000000001234ull, 1700000000987654321ull);
	d9_def_coroutine(&s.w, 1, 0, 2, D9_COROUTINE_SCHEDULER);
	d9_def_coroutine(&s.w, 1ull << 33, 1, 3, 0);
	uint8_t *q = d9_put_varint(body, 11); /* CustomSchema: id, name, field bytes */
	q = d9_put_varint(q, 1);
	memcpy(q, cs_fields, sizeof(cs_fields));
	q += sizeof(cs_fields);
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, (size_t)(q - body));
	d9_def_privileges(&s.w, 0, 65534, D9_PRIV_KERNEL_SAMPLES_LOST | D9_PRIV_PERF_DENIED);
	d9_def_recorder(&s.w, D9_REC_CPU_PROFILE, D9_REC_FALLBACK, 13, 300);
	seg_close(&s);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.ndef, 20);
	const struct d9_def *v = d.def;

	T_EQ(v[0].kind, D9_DEF_STRING);
	T_EQ(v[0].id, 1);
	T_EQ(v[0].u.string.len, 7);
	T_ASSERT(!memcmp(v[0].u.string.s, "st_read", 7));
	T_EQ(v[1].id, 300);
	T_EQ(v[1].u.string.len, 0);
	T_EQU(v[2].id, 1ull << 40);
	T_EQ(v[2].u.string.len, sizeof(weird) - 1);
	T_ASSERT(!memcmp(v[2].u.string.s, weird, sizeof(weird) - 1));

	T_EQ(v[3].kind, D9_DEF_LOCATION);
	T_EQ(v[3].id, 2);
	T_EQU(v[3].u.location.function_addr, 0x55d0c0a01230ull);
	T_EQU(v[3].u.location.callsite_addr, 0x55d0c0a01288ull);
	T_EQ(v[3].u.location.module, 9);
	T_EQ(v[3].u.location.name, 1);
	T_EQ(v[4].id, 3);
	T_EQ(v[4].u.location.function_addr, 0);
	T_EQ(v[4].u.location.name, 0);

	T_EQ(v[5].kind, D9_DEF_STACK);
	T_EQ(v[5].id, 4);
	T_EQ(v[5].u.stack.nframes, D9_STACK_MAX_FRAMES);
	for (int i = 0; i < D9_STACK_MAX_FRAMES; i++)
		if (v[5].u.stack.frames[i] != frames[i])
			T_FAIL("frame %d: %" PRIx64 ", expected %" PRIx64, i, v[5].u.stack.frames[i],
				frames[i]);
	T_EQ(v[6].u.stack.nframes, 1);
	T_EQU(v[6].u.stack.frames[0], frames[0]);
	T_EQ(v[7].id, 6);
	T_EQ(v[7].u.stack.nframes, 0);
	T_EQ(v[8].id, 7);
	T_EQ(v[8].u.stack.nframes, D9_STACK_MAX_FRAMES);
	T_EQU(v[8].u.stack.frames[127], frames[127]);

	T_EQ(v[9].kind, D9_DEF_MODULE);
	T_EQ(v[9].id, 9);
	T_EQ(v[9].u.module.path, 1);
	T_EQU(v[9].u.module.start, 0x7ffff7a00000ull);
	T_EQU(v[9].u.module.end, 0x7ffff7bff000ull);
	T_EQU(v[9].u.module.offset, 0x28000);
	T_EQ(v[9].u.module.build_id_len, 20);
	T_ASSERT(!memcmp(v[9].u.module.build_id, build_id, 20));
	T_EQ(v[10].u.module.path, 300);
	T_EQ(v[10].u.module.build_id_len, 0);

	T_EQ(v[11].kind, D9_DEF_SYMBOL);
	T_EQU(v[11].u.symbol.start, 0x7ffff7a3b000ull);
	T_EQ(v[11].u.symbol.len, 0x1c4);
	T_EQ(v[11].u.symbol.function, 1);
	T_EQ(v[11].u.symbol.file, 300);
	T_EQ(v[11].u.symbol.line, 1234);
	T_EQ(v[11].u.symbol.inline_depth, 2);

	T_EQ(v[12].kind, D9_DEF_THREAD);
	T_EQ(v[12].id, 4243);
	T_EQ(v[12].u.thread.name, 1);
	T_EQ(v[12].u.thread.worker, 1);
	T_EQ(v[12].u.thread.role, D9_ROLE_WORKER);
	T_EQ(v[13].id, 4250);
	T_EQ(v[13].u.thread.worker, 0);
	T_EQ(v[13].u.thread.role, D9_ROLE_AGENT);

	T_EQ(v[14].kind, D9_DEF_CLOCK_SYNC);
	T_EQU(v[14].u.clock.ticks, 123456789012345ull);
	T_EQU(v[14].u.clock.mono_ns, 5000000001234ull);
	T_EQU(v[14].u.clock.realtime_ns, 1700000000987654321ull);

	T_EQ(v[15].kind, D9_DEF_COROUTINE);
	T_EQ(v[15].id, 1);
	T_EQ(v[15].u.coroutine.parent, 0);
	T_EQ(v[15].u.coroutine.location, 2);
	T_EQ(v[15].u.coroutine.flags, D9_COROUTINE_SCHEDULER);
	T_EQU(v[16].id, 1ull << 33);
	T_EQ(v[16].u.coroutine.parent, 1);

	T_EQ(v[17].kind, D9_DEF_CUSTOM_SCHEMA);
	T_EQ(v[17].id, 11);
	T_EQ(v[17].u.custom_schema.name, 1);
	T_EQ(v[17].u.custom_schema.fields_len, sizeof(cs_fields));
	T_ASSERT(!memcmp(v[17].u.custom_schema.fields, cs_fields, sizeof(cs_fields)));

	T_EQ(v[18].kind, D9_DEF_PRIVILEGES);
	T_EQ(v[18].u.privileges.from_uid, 0);
	T_EQ(v[18].u.privileges.to_uid, 65534);
	T_EQ(v[18].u.privileges.flags, D9_PRIV_KERNEL_SAMPLES_LOST | D9_PRIV_PERF_DENIED);

	T_EQ(v[19].kind, D9_DEF_RECORDER);
	T_EQ(v[19].u.recorder.feature, D9_REC_CPU_PROFILE);
	T_EQ(v[19].u.recorder.state, D9_REC_FALLBACK);
	T_EQ(v[19].u.recorder.err, 13);
	T_EQ(v[19].u.recorder.text, 300);
	T_ASSERT(!strcmp(d9_rec_feature_name(D9_REC_CPU_PROFILE), "cpu_profile"));
	T_ASSERT(!strcmp(d9_rec_state_name(D9_REC_LIMITED), "limited"));
	T_ASSERT(d9_rec_feature_name(D9_REC_FEATURE_MAX + 1) == NULL);

	static const char *const names[] = { NULL, "String", "SpawnLocation", "Stack", "Module",
		"Symbol", "Thread", "ClockSync", "Coroutine", "CustomSchema", "Privileges",
		"RecorderState" };
	for (uint32_t k = 1; k <= D9_DEF_KNOWN_MAX; k++)
		T_ASSERT(d9_def_name(k) && !strcmp(d9_def_name(k), names[k]));
	T_ASSERT(d9_def_name(D9_DEF_KNOWN_MAX + 1) == NULL);
	dec_free(&d);
	seg_free(&s);
}

/* The directory budget's appended trailer fields: written only when not 0 (a trailer without
 * them has exactly the v1 bytes), decoded when present, read as 0 when absent. */
TEST(trailer_budget_fields)
{
	struct d9_trailer t = { .events = 5, .chunks = 3, .budget_deleted_segments = 437,
		.budget_deleted_bytes = 454992 };
	struct d9_trailer plain = { .events = 5, .chunks = 3 };
	uint8_t a[256], b[256];
	struct d9_wbuf wa, wb;

	d9_wbuf_init(&wa, a, sizeof(a));
	d9_wbuf_init(&wb, b, sizeof(b));
	T_EQ(d9_trailer_write(&wa, &t), 0);
	T_EQ(d9_trailer_write(&wb, &plain), 0);
	/* 437 and 454992 take 2 and 3 varint bytes */
	T_EQ((int)(wa.p - a), (int)(wb.p - b) + 5);

	struct seg s;
	struct dec d;
	struct d9_header h = std_header();
	seg_init(&s, 4096);
	seg_header(&s, &h);
	seg_trailer(&s, &t);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.trailer_err, 0);
	T_EQ(d.trailer.events, 5);
	T_EQU(d.trailer.budget_deleted_segments, 437);
	T_EQU(d.trailer.budget_deleted_bytes, 454992);
	dec_free(&d);
	seg_free(&s);

	seg_init(&s, 4096);
	seg_header(&s, &h);
	seg_trailer(&s, &plain);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.trailer_err, 0);
	T_EQU(d.trailer.budget_deleted_segments, 0);
	T_EQU(d.trailer.budget_deleted_bytes, 0);
	dec_free(&d);
	seg_free(&s);
}

/* Header strings (cmdline with its NUL separators) and every numeric field; trailer totals. */
TEST(roundtrip_header_and_trailer)
{
	struct d9_header h = std_header();
	struct d9_trailer t = {
		.events = 123456789, .chunks = 4321, .first_time = 78125000000ull,
		.last_time = 78125000000ull + 937500000ull, .dropped_events = 12, .dropped_samples = 3,
		.flags = D9_TRAILER_RECOVERED,
	};
	struct seg s;
	struct dec d;

	for (uint32_t i = 1; i <= D9_EV_KNOWN_MAX; i++)
		t.type_counts[i] = i == D9_EV_CUSTOM ? 0 : (uint64_t)i * 1000003; /* one type absent */
	t.type_counts[D9_EV_WAKE] = 1ull << 40;
	seg_init(&s, 4096);
	seg_header(&s, &h);
	seg_trailer(&s, &t);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.h.major, D9_FORMAT_MAJOR);
	T_EQ(d.h.minor, D9_FORMAT_MINOR);
	T_EQ(d.h.pid, 4242);
	T_EQ(d.h.ppid, 1);
	T_EQ(d.h.segment_seq, 7);
	T_EQ(d.h.clock_source, D9_CLOCK_MONOTONIC);
	T_EQ(d.h.time_shift, 6);
	T_EQU(d.h.ticks_per_sec, 1000000000);
	T_EQU(d.h.anchor_ticks, MONO_BASE);
	T_EQU(d.h.anchor_mono_ns, MONO_BASE);
	T_EQU(d.h.anchor_realtime_ns, 1700000000123456789ull);
	T_EQU(d.h.start_realtime_ns, 1700000000000000000ull);
	T_ASSERT(!strcmp(d.h.writer, "d9 0.1.0 test"));
	T_ASSERT(!strcmp(d.h.process, "srv"));
	T_ASSERT(!strcmp(d.h.hostname, "web-07.example.net"));
	T_ASSERT(!strcmp(d.h.boot_id, "5c1bd3a0-8e8c-4bd1-9f00-3e4e0f6c2a11"));
	/* on disk "/usr/sbin/srv\0-c\0/etc/srv.conf\0": joined by spaces, final NUL dropped */
	T_EQ(d.h.cmdline_len, 30);
	T_ASSERT(!memcmp(d.h.cmdline, "/usr/sbin/srv -c /etc/srv.conf", 30));

	T_EQ(d.ntrailer, 1);
	T_EQ(d.trailer_err, 0);
	T_EQ(d.st.sealed, 1);
	T_EQ(d.trailer.events, 123456789);
	T_EQ(d.trailer.chunks, 4321);
	T_EQU(d.trailer.first_time, t.first_time);
	T_EQU(d.trailer.last_time, t.last_time);
	T_EQ(d.trailer.dropped_events, 12);
	T_EQ(d.trailer.dropped_samples, 3);
	T_EQ(d.trailer.flags, D9_TRAILER_RECOVERED);
	T_EQ(d.trailer.ntypes, D9_EV_KNOWN_MAX - 1);
	for (uint32_t i = 0; i <= D9_EV_KNOWN_MAX; i++)
		T_EQU(d.trailer.type_counts[i], t.type_counts[i]);
	dec_free(&d);
	seg_free(&s);

	/* absent strings and an empty cmdline decode as empty strings */
	struct d9_header e = { .pid = 1, .clock_source = D9_CLOCK_TSC, .ticks_per_sec = 2500000000ull,
		.time_shift = 0 };
	seg_init(&s, 4096);
	seg_header(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_ASSERT(!strcmp(d.h.writer, "") && !strcmp(d.h.process, "") && !strcmp(d.h.hostname, ""));
	T_EQ(d.h.cmdline_len, 0);
	T_EQ(d.h.clock_source, D9_CLOCK_TSC);
	T_EQU(d.h.ticks_per_sec, 2500000000ull);
	T_EQ(d.st.sealed, 0);
	dec_free(&d);
	seg_free(&s);
}

/* Event codes from 31 up use the extended first byte; a schema describes them and the decoder
 * reads them generically (fields by position), then goes on with the known types. */
TEST(extended_types_from_schema)
{
	static const struct tfield f31[] = { { 'u', "n" } };
	static const struct tfield f40[] = { { 'i', "delta" }, { 'c', "who" }, { 'b', "blob" },
		{ 'u', "tail" } };
	struct seg s;
	struct dec d;
	struct d9_enc e;
	uint8_t fields[32], *p;

	seg_std(&s, 8192, 0);
	seg_open(&s, D9_CHUNK_SCHEMA);
	d9_wbuf_u(&s.w, 3);
	schema_type(&s.w, 31, "Ext31", 1, f31);
	schema_type(&s.w, 40, "LockContended", 4, f40);
	schema_type(&s.w, 200, "Tick", 0, NULL);
	seg_close(&s);
	seg_enc_begin(&s, &e, 1, 1, MONO_BASE, 6, 0, 4096);
	T_EQ(d9_enc_poll_start(&e, AT(1), 500, 2), 0); /* coroutine register: 500 */
	p = d9_put_varint(fields, 99);
	T_EQ(d9_enc_raw(&e, AT(2), 31, fields, (size_t)(p - fields)), 0);
	p = d9_put_varint(fields, d9_zigzag(-12345));
	p = d9_put_varint(p, d9_zigzag(510 - 500) + 5); /* 'c': not among the last 4: delta + 5 */
	p = d9_put_varint(p, 3);
	memcpy(p, "abc", 3);
	p += 3;
	p = d9_put_varint(p, 1ull << 35);
	uint8_t *h0 = e.p;
	T_EQ(d9_enc_raw(&e, AT(1000), 40, fields, (size_t)(p - fields)), 0);
	/* head: code 15 + delta low bits 998 & 7 + more, varint type 40, varint 998 >> 3 (1 byte) */
	T_EQ(h0[0], D9_EV_EXTENDED | ((998 & 7) << D9_EV_DELTA_SHIFT) | D9_EV_MORE);
	T_EQ(h0[1], 40);
	T_EQ(e.p - h0, 3 + (p - fields));
	/* d9_enc_raw leaves the coroutine list to its caller */
	e.mru[1] = e.mru[0];
	e.mru[0] = 510;
	T_EQ(d9_enc_raw(&e, AT(1001), 200, NULL, 0), 0);
	T_EQ(d9_enc_poll_end(&e, AT(1002), 510), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 5);
	T_EQ(d.ev[1].ev.type, 31);
	T_EQ(d.ev[1].ev.nfields, 1);
	T_EQ(d.ev[1].ev.f[0], 99);
	T_EQU(d.ev[1].ev.time, (MONO_BASE >> 6) + 2);
	const struct d9_event *ev = &d.ev[2].ev;
	T_EQ(ev->type, 40);
	T_EQ(ev->nfields, 4);
	T_EQ((int64_t)ev->f[0], -12345);
	T_EQ(ev->f[1], 510);
	T_EQ(ev->f[2], 3);
	T_EQ(ev->data_len, 3);
	T_ASSERT(!memcmp(ev->data, "abc", 3));
	T_EQU(ev->f[3], 1ull << 35);
	T_EQU(ev->time, (MONO_BASE >> 6) + 1000);
	T_EQ(d.ev[3].ev.type, 200);
	T_EQ(d.ev[3].ev.nfields, 0);
	T_EQ(d.ev[4].ev.type, D9_EV_POLL_END);
	T_EQ(d.ev[4].ev.f[0], 510);
	T_EQU(d.ev[4].ev.time, (MONO_BASE >> 6) + 1002);
	/* the schema the reader holds for them */
	struct d9_reader *r;
	struct d9_chunk c;
	T_EQ(d9_reader_open_mem(&r, s.buf, seg_len(&s)), 0);
	while (d9_reader_next(r, &c) == 1)
		;
	const struct d9_schema_type *st = d9_reader_schema(r, 40);
	T_ASSERT(st && !strcmp(st->name, "LockContended") && st->nfields == 4);
	T_ASSERT(!strcmp(st->fields[2].name, "blob") && st->fields[2].enc == D9_FIELD_B);
	T_ASSERT(d9_reader_schema(r, 41) == NULL);
	T_ASSERT(d9_reader_schema(r, D9_EV_POLL_END) != NULL); /* omitted types keep the built-in */
	T_ASSERT(d9_event_name(40) == NULL);
	d9_reader_close(r);
	dec_free(&d);
	seg_free(&s);
}

/* ---- The sample segment used by the damage tests ---------------------------------------------- */

/* header, schema, defs, 4 EVENTS chunks from 2 threads (6, 5, 7, 4 events), trailer.
 * Chunk index: 0 header, 1 schema, 2 defs, 3..6 events, 7 trailer. */
static void build_sample(struct seg *s)
{
	static const uint32_t nev[4] = { 6, 5, 7, 4 };
	struct d9_trailer t = { .events = 22, .chunks = 8 };
	struct d9_enc e;
	uint64_t ticks = MONO_BASE;

	seg_std(s, 16384, D9_SCHEMA_UNPARK_STATS);
	seg_open(s, D9_CHUNK_DEFS);
	d9_def_string(&s->w, 1, "main", 4);
	d9_def_thread(&s->w, 100, 1, 1, D9_ROLE_WORKER);
	d9_def_location(&s->w, 2, 0x401000, 0x401020, 0, 1);
	seg_close(s);
	for (int c = 0; c < 4; c++) {
		uint32_t tid = 100 + (uint32_t)(c & 1);
		seg_enc_begin(s, &e, tid, tid - 99, ticks, 6, D9_SCHEMA_UNPARK_STATS, 4096);
		for (uint32_t i = 0; i < nev[c]; i++) {
			uint64_t co = 10 + (uint64_t)c * 100 + i;
			ticks += 64 * (1 + i * 37);
			switch (i % 6) {
			case 0: T_EQ(d9_enc_unpark(&e, ticks, (int64_t)i, 1000 + i, 40 * i), 0); break;
			case 1: T_EQ(d9_enc_wake(&e, ticks, co, 0, D9_WAKE_FD, 5 + i), 0); break;
			case 2: T_EQ(d9_enc_poll_start(&e, ticks, co, 2), 0); break;
			case 3: T_EQ(d9_enc_spawn(&e, ticks, co + 1, co, 2), 0); break;
			case 4: T_EQ(d9_enc_poll_end(&e, ticks, co), 0); break;
			default: T_EQ(d9_enc_park(&e, ticks, D9_CALL_SELECT, 2500), 0); break;
			}
		}
		seg_enc_end(s, &e);
	}
	t.type_counts[D9_EV_UNPARK] = 5;
	seg_trailer(s, &t);
	T_EQ(s->nchunks, 8);
}

/* A copy of buf[0..len) with ins[0..n) inserted at offset at. */
static uint8_t *splice_bytes(const uint8_t *buf, size_t len, size_t at, const void *ins, size_t n)
{
	uint8_t *o = malloc(len + n);

	T_ASSERT(o);
	memcpy(o, buf, at);
	memcpy(o + at, ins, n);
	memcpy(o + at + n, buf + at, len - at);
	return o;
}

static size_t events_in_chunks(const struct seg *s, size_t from, size_t to)
{
	size_t n = 0;

	for (size_t i = from; i < to; i++)
		n += s->nev[i];
	return n;
}

TEST(sample_segment_decodes_clean)
{
	struct seg s;
	struct dec d;

	build_sample(&s);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 22);
	T_EQ(d.ndef, 3);
	T_EQ(d.nchunk, 7); /* all but the header */
	for (size_t i = 0; i < d.nchunk; i++) {
		T_EQ(d.chunk[i].type, s.type[i + 1]);
		T_EQU(d.chunk[i].off, s.off[i + 1]);
		T_EQU(d.chunk[i].len + D9_CHUNK_OVERHEAD, s.end[i + 1] - s.off[i + 1]);
	}
	T_EQ(d.st.chunks, 8);
	T_EQ(d.st.sealed, 1);
	T_EQ(d.ev[6].tid, 101);
	T_EQ(d.ev[6].worker, 2);
	/* event offsets point into their chunk */
	T_EQU(d.ev[0].ev.offset, s.off[3] + D9_CHUNK_HDR_LEN + D9_EVENTS_HDR_LEN);
	dec_free(&d);
	seg_free(&s);
}

/* A cut at every byte: never a crash; inside the prefix or header the open fails; later, the
 * complete chunks decode exactly and the incomplete one is reported at its start offset. */
TEST(truncation_at_every_offset)
{
	struct seg s;
	struct dec full, d;

	build_sample(&s);
	size_t len = seg_len(&s);
	T_EQ(dec_mem(&full, s.buf, len), 0);
	expect_clean(&full);
	for (size_t cut = 0; cut <= len; cut++) {
		/* a private copy of exactly cut bytes, so ASan sees any read past the end */
		uint8_t *b = malloc(cut ? cut : 1);
		T_ASSERT(b);
		memcpy(b, s.buf, cut);
		int err = dec_mem(&d, b, cut);
		if (cut < s.end[0]) {
			if (err != D9_ETRUNC)
				T_FAIL("cut %zu (inside prefix/header): open returned %d (%s)", cut, err,
					d9_strerror(err));
			dec_free(&d);
			free(b);
			continue;
		}
		if (err != 0)
			T_FAIL("cut %zu: open returned %d (%s)", cut, err, d9_strerror(err));
		size_t complete = 0; /* chunks after the header that end at or before the cut */
		int on_boundary = 0;
		for (size_t i = 0; i < s.nchunks; i++) {
			if (s.end[i] <= cut && i > 0)
				complete++;
			if (s.end[i] == cut)
				on_boundary = 1;
		}
		if (d.nchunk != complete)
			T_FAIL("cut %zu: %zu chunks decoded, expected %zu", cut, d.nchunk, complete);
		size_t nev = events_in_chunks(&s, 1, 1 + complete);
		if (d.nev != nev)
			T_FAIL("cut %zu: %zu events decoded, expected %zu", cut, d.nev, nev);
		for (size_t i = 0; i < nev; i++) {
			expect_same_event(&d.ev[i], &full.ev[i], i);
			T_EQU(d.ev[i].ev.offset, full.ev[i].ev.offset);
		}
		T_EQ(d.st.corrupt_chunks, 0);
		T_EQ(d.st.bad_events, 0);
		T_EQ(d.ev_errs, 0);
		T_EQ(d.st.sealed, cut == len);
		if (on_boundary) {
			if (d.st.truncated || d.nprob)
				T_FAIL("cut %zu on a chunk boundary: truncated=%d, %zu problems", cut,
					d.st.truncated, d.nprob);
			T_EQ(d.st.skipped_bytes, 0);
		} else {
			size_t at = s.off[1 + complete];
			if (!d.st.truncated || d.st.truncated_at != at)
				T_FAIL("cut %zu: truncated=%d at %" PRIu64 ", expected 1 at %zu", cut,
					d.st.truncated, d.st.truncated_at, at);
			T_EQ(count_probs(&d, D9_PROB_TRUNCATED), 1);
			T_EQ(d.nprob, 1);
			T_EQU(find_prob(&d, D9_PROB_TRUNCATED)->off, at);
			T_EQU(d.st.skipped_bytes, cut - at);
		}
		dec_free(&d);
		free(b);
	}
	dec_free(&full);
	seg_free(&s);
}

/* A flipped payload byte: that chunk alone is lost, reported at its offset. */
TEST(corrupt_crc_skips_one_chunk)
{
	for (size_t victim = 2; victim <= 6; victim++) {
		struct seg s;
		struct dec full, d;

		build_sample(&s);
		size_t len = seg_len(&s);
		T_EQ(dec_mem(&full, s.buf, len), 0);
		s.buf[s.off[victim] + D9_CHUNK_HDR_LEN + (s.end[victim] - s.off[victim]) / 2 - 6] ^= 0x20;
		T_EQ(dec_mem(&d, s.buf, len), 0);
		T_EQ(d.st.corrupt_chunks, 1);
		T_EQ(d.st.truncated, 0);
		T_EQ(d.nchunk, 6);
		T_EQU(d.st.skipped_bytes, s.end[victim] - s.off[victim]);
		T_EQ(count_probs(&d, D9_PROB_CORRUPT), 1);
		T_EQU(find_prob(&d, D9_PROB_CORRUPT)->off, s.off[victim]);
		T_EQ(d.nev, 22 - s.nev[victim]);
		T_EQ(d.ndef, victim == 2 ? 0 : 3);
		for (size_t i = 0, j = 0; i < full.nev; i++) {
			if (full.ev[i].chunk == s.off[victim])
				continue;
			expect_same_event(&d.ev[j], &full.ev[i], i);
			j++;
		}
		T_EQ(d.st.sealed, 1);
		dec_free(&full);
		dec_free(&d);
		seg_free(&s);
	}
}

/* A damaged length field: too long, too short, past the end, over the limit. */
TEST(corrupt_length_field)
{
	static const int64_t deltas[] = { 1, -1, 5000, -16 };
	for (size_t k = 0; k < NELEM(deltas) + 1; k++) {
		struct seg s;
		struct dec d;
		uint32_t len;

		build_sample(&s);
		uint8_t *lenp = s.buf + s.off[4] + 4;
		memcpy(&len, lenp, 4);
		len = k < NELEM(deltas) ? (uint32_t)((int64_t)len + deltas[k]) : 0xffffffffu;
		memcpy(lenp, &len, 4);
		T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
		if (d.st.corrupt_chunks != 1 || d.st.truncated)
			T_FAIL("length %u: corrupt_chunks %" PRIu64 ", truncated %d", len,
				d.st.corrupt_chunks, d.st.truncated);
		T_EQU(find_prob(&d, D9_PROB_CORRUPT)->off, s.off[4]);
		T_EQ(d.nev, 22 - s.nev[4]);
		T_EQ(d.nchunk, 6);
		T_EQ(d.st.sealed, 1);
		T_EQU(d.st.skipped_bytes, s.end[4] - s.off[4]);
		dec_free(&d);
		seg_free(&s);
	}
}

/* Garbage between chunks (with sync bytes and a fake chunk head in it): the reader resyncs on
 * the next valid chunk, counts one corrupt region and loses nothing else. */
TEST(garbage_between_chunks_resyncs)
{
	static const uint8_t junk1[] = "xxD9\x04\x00\x10\x00\x00\x00garbage D9D9 \x44\x39\xff\xff\xff\xff"
		"0123456789";
	static const uint8_t junk2[] = { 'D', '9', 0x04 };
	const struct { const uint8_t *p; size_t n; size_t after; } cases[] = {
		{ junk1, sizeof(junk1) - 1, 4 },
		{ junk2, sizeof(junk2), 3 },
		{ junk1, sizeof(junk1) - 1, 0 }, /* right after the header */
		{ junk1, 1, 6 }, /* one stray byte before the trailer */
	};
	for (size_t k = 0; k < NELEM(cases); k++) {
		struct seg s;
		struct dec full, d;

		build_sample(&s);
		T_EQ(dec_mem(&full, s.buf, seg_len(&s)), 0);
		size_t at = s.end[cases[k].after];
		uint8_t *b = splice_bytes(s.buf, seg_len(&s), at, cases[k].p, cases[k].n);
		T_EQ(dec_mem(&d, b, seg_len(&s) + cases[k].n), 0);
		if (d.st.corrupt_chunks != 1 || d.st.skipped_bytes != cases[k].n)
			T_FAIL("case %zu: corrupt_chunks %" PRIu64 " skipped %" PRIu64 ", expected 1 and %zu",
				k, d.st.corrupt_chunks, d.st.skipped_bytes, cases[k].n);
		T_EQU(find_prob(&d, D9_PROB_CORRUPT)->off, at);
		T_EQ(d.st.truncated, 0);
		T_EQ(d.nchunk, 7);
		T_EQ(d.nev, 22);
		for (size_t i = 0; i < 22; i++)
			expect_same_event(&d.ev[i], &full.ev[i], i);
		T_EQ(d.ndef, 3);
		T_EQ(d.st.sealed, 1);
		free(b);
		dec_free(&full);
		dec_free(&d);
		seg_free(&s);
	}
}

/* Chunk types this version does not know are stepped over, counted, reported once per type. */
TEST(unknown_chunk_type_skipped)
{
	uint8_t ins[256];
	struct d9_wbuf w;
	struct seg s;
	struct dec full, d;
	size_t first;

	d9_wbuf_init(&w, ins, sizeof(ins));
	uint8_t *c = d9_chunk_open(&w, 0x77);
	d9_wbuf_raw(&w, "future stuff", 12);
	T_EQ(d9_chunk_close(&w, c), 0);
	first = (size_t)(w.p - ins);
	c = d9_chunk_open(&w, 0xe0);
	T_EQ(d9_chunk_close(&w, c), 0); /* empty payload */
	c = d9_chunk_open(&w, 0x77);
	d9_wbuf_raw(&w, "more", 4);
	T_EQ(d9_chunk_close(&w, c), 0);
	size_t n = (size_t)(w.p - ins);

	build_sample(&s);
	T_EQ(dec_mem(&full, s.buf, seg_len(&s)), 0);
	size_t at = s.end[4];
	uint8_t *b = splice_bytes(s.buf, seg_len(&s), at, ins, n);
	T_EQ(dec_mem(&d, b, seg_len(&s) + n), 0);
	T_EQ(d.st.unknown_chunks, 3);
	T_EQ(d.st.corrupt_chunks, 0);
	T_EQ(d.st.truncated, 0);
	T_EQ(d.st.chunks, 8 + 3);
	T_EQ(d.nchunk, 7); /* d9_reader_next does not hand them out */
	T_EQ(count_probs(&d, D9_PROB_UNKNOWN_CHUNK), 2);
	T_EQ(d.nprob, 2);
	T_EQU(d.prob[0].off, at);
	T_EQU(d.prob[1].off, at + first);
	T_EQ(d.nev, 22);
	for (size_t i = 0; i < 22; i++)
		expect_same_event(&d.ev[i], &full.ev[i], i);
	T_EQ(d.st.sealed, 1);
	free(b);
	dec_free(&full);
	dec_free(&d);
	seg_free(&s);
}

/* A type unknown to v1 but described by the segment's schema decodes generically and the events
 * after it decode normally. */
TEST(unknown_event_type_in_schema)
{
	static const struct tfield f20[] = { { 'u', "bytes" }, { 'i', "delta" }, { 'b', "tag" } };
	struct seg s;
	struct dec d;
	struct d9_enc e;
	uint8_t fields[16], *p;

	seg_std(&s, 8192, 0);
	seg_open(&s, D9_CHUNK_SCHEMA);
	d9_wbuf_u(&s.w, 1);
	schema_type(&s.w, 20, "Compaction", 3, f20);
	seg_close(&s);
	seg_enc_begin(&s, &e, 1, 1, MONO_BASE, 6, 0, 4096);
	T_EQ(d9_enc_poll_start(&e, AT(1), 33, 2), 0);
	p = d9_put_varint(fields, 65536);
	p = d9_put_varint(p, d9_zigzag(-7));
	p = d9_put_varint(p, 2);
	*p++ = 'o';
	*p++ = 'k';
	T_EQ(d9_enc_raw(&e, AT(2), 20, fields, (size_t)(p - fields)), 0);
	T_EQ(d9_enc_poll_end(&e, AT(9), 33), 0);
	T_EQ(d9_enc_park(&e, AT(10), D9_CALL_POLL, 1000), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 4);
	T_EQ(d.ev[1].ev.type, 20);
	T_EQ(d.ev[1].ev.nfields, 3);
	T_EQ(d.ev[1].ev.f[0], 65536);
	T_EQ((int64_t)d.ev[1].ev.f[1], -7);
	T_EQ(d.ev[1].ev.data_len, 2);
	T_ASSERT(!memcmp(d.ev[1].ev.data, "ok", 2));
	T_EQ(d.ev[2].ev.type, D9_EV_POLL_END);
	T_EQ(d.ev[2].ev.f[0], 33);
	T_EQU(d.ev[2].ev.time, (MONO_BASE >> 6) + 9);
	T_EQ(d.ev[3].ev.type, D9_EV_PARK);
	T_EQ(d.ev[3].ev.f[D9_F_PARK_TIMEOUT_US], 1000);
	dec_free(&d);
	seg_free(&s);
}

/* Several 'b' fields in one event: `data` is the first one, `fdata` holds each by slot and
 * f[] their lengths; an empty one comes back empty. */
TEST(several_bytes_fields)
{
	static const struct tfield f30[] = { { 'b', "key" }, { 'u', "n" }, { 'b', "value" },
		{ 'b', "empty" } };
	struct seg s;
	struct dec d;
	struct d9_enc e;
	struct d9_reader *r;
	struct d9_chunk c;
	struct d9_events_iter it;
	struct d9_event ev;
	uint8_t f[32], *p;

	seg_std(&s, 8192, 0);
	seg_open(&s, D9_CHUNK_SCHEMA);
	d9_wbuf_u(&s.w, 1);
	schema_type(&s.w, 30, "KeyValue", 4, f30);
	seg_close(&s);
	seg_enc_begin(&s, &e, 1, 1, MONO_BASE, 6, 0, 4096);
	p = d9_put_varint(f, 3);
	memcpy(p, "key", 3);
	p += 3;
	p = d9_put_varint(p, 77);
	p = d9_put_varint(p, 5);
	memcpy(p, "value", 5);
	p += 5;
	p = d9_put_varint(p, 0);
	T_EQ(d9_enc_raw(&e, AT(1), 30, f, (size_t)(p - f)), 0);
	seg_enc_end(&s, &e);
	T_EQ(d9_reader_open_mem(&r, s.buf, seg_len(&s)), 0);
	T_EQ(d9_reader_next(r, &c), 1); /* the built-in schema */
	T_EQ(d9_reader_next(r, &c), 1); /* ours */
	T_EQ(d9_reader_next(r, &c), 1);
	T_EQ(c.type, D9_CHUNK_EVENTS);
	d9_events_init(&it, r, &c);
	T_EQ(d9_events_next(&it, &ev), 1);
	T_EQ(ev.type, 30);
	T_EQ(ev.nfields, 4);
	T_EQ(ev.data_len, 3);
	T_ASSERT(!memcmp(ev.data, "key", 3));
	T_EQ(ev.f[0], 3);
	T_EQ(ev.f[1], 77);
	T_EQ(ev.f[2], 5);
	T_EQ(ev.f[3], 0);
	T_ASSERT(ev.fdata[0] == ev.data);
	T_ASSERT(ev.fdata[2] && !memcmp(ev.fdata[2], "value", 5));
	T_EQ(d9_events_next(&it, &ev), 0);
	d9_reader_close(r);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	dec_free(&d);
	seg_free(&s);
}

/* A type nobody described: its size is unknown, so the rest of its chunk is dropped (counted and
 * reported); earlier events and later chunks are intact. */
TEST(unknown_event_type_not_in_schema)
{
	struct seg s;
	struct dec d;
	struct d9_enc e;

	seg_std(&s, 8192, 0);
	seg_enc_begin(&s, &e, 1, 1, MONO_BASE, 6, 0, 4096);
	T_EQ(d9_enc_poll_start(&e, AT(1), 33, 2), 0);
	T_EQ(d9_enc_poll_end(&e, AT(2), 33), 0);
	size_t bad_off = (size_t)(e.p - s.buf);
	T_EQ(d9_enc_raw(&e, AT(3), 21, "\x05\x06", 2), 0);
	T_EQ(d9_enc_park(&e, AT(4), D9_CALL_POLL, 1000), 0);
	T_EQ(d9_enc_raw(&e, AT(5), 21, "\x05\x06", 2), 0);
	seg_enc_end(&s, &e);
	seg_enc_begin(&s, &e, 2, 2, MONO_BASE, 6, 0, 4096);
	T_EQ(d9_enc_raw(&e, AT(6), 22, "", 0), 0); /* another undescribed type: reported too */
	seg_enc_end(&s, &e);
	seg_enc_begin(&s, &e, 3, 3, MONO_BASE, 6, 0, 4096);
	T_EQ(d9_enc_queue_sample(&e, AT(7), 4), 0);
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	T_EQ(d.nev, 3);
	T_EQ(d.ev[0].ev.type, D9_EV_POLL_START);
	T_EQ(d.ev[1].ev.type, D9_EV_POLL_END);
	T_EQ(d.ev[1].ev.f[0], 33);
	T_EQ(d.ev[2].ev.type, D9_EV_QUEUE_SAMPLE);
	T_EQ(d.ev[2].ev.f[0], 4);
	T_EQ(d.ev[2].tid, 3);
	T_EQ(d.st.bad_events, 2); /* one per chunk: the rest of the chunk went with it */
	T_EQ(d.ev_errs, 2);
	T_EQ(d.st.corrupt_chunks, 0);
	T_EQ(count_probs(&d, D9_PROB_UNKNOWN_EVENT), 2); /* types 21 and 22, once each */
	T_EQU(find_prob(&d, D9_PROB_UNKNOWN_EVENT)->off, bad_off);
	T_EQU(find_prob(&d, D9_PROB_BAD_EVENT)->off, bad_off);
	dec_free(&d);
	seg_free(&s);
}

/* Definition kinds from a newer writer are skipped (reported once); the known ones around them
 * decode. A malformed known record is skipped; a record overrunning its chunk ends the chunk. */
TEST(unknown_and_malformed_defs)
{
	struct seg s;
	struct dec d;
	uint8_t loc_short[2] = { 5, 1 }; /* a Location body with 2 of its 5 fields */

	seg_std(&s, 8192, 0);
	seg_open(&s, D9_CHUNK_DEFS);
	d9_def_string(&s.w, 1, "a", 1);
	size_t unk_off = seg_len(&s);
	d9_def_raw(&s.w, 50, "xyz", 3);
	d9_def_location(&s.w, 2, 0x1000, 0x1010, 0, 1);
	d9_def_raw(&s.w, 51, NULL, 0);
	d9_def_raw(&s.w, 200, "\xff\xff\xff", 3);
	d9_def_thread(&s.w, 77, 1, 3, D9_ROLE_WORKER);
	size_t bad_off = seg_len(&s);
	d9_def_raw(&s.w, D9_DEF_LOCATION, loc_short, sizeof(loc_short));
	d9_def_string(&s.w, 3, "after", 5);
	seg_close(&s);
	/* a second chunk whose last record claims more bytes than the chunk has */
	seg_open(&s, D9_CHUNK_DEFS);
	d9_def_string(&s.w, 4, "ok", 2);
	size_t over_off = seg_len(&s);
	d9_wbuf_raw(&s.w, "\x01\x09\x05", 3); /* String, body length 9, only 1 byte there */
	seg_close(&s);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	T_EQ(d.ndef, 5);
	T_EQ(d.def[0].kind, D9_DEF_STRING);
	T_EQ(d.def[1].kind, D9_DEF_LOCATION);
	T_EQ(d.def[1].u.location.callsite_addr, 0x1010);
	T_EQ(d.def[2].kind, D9_DEF_THREAD);
	T_EQ(d.def[2].id, 77);
	T_EQ(d.def[2].u.thread.worker, 3);
	T_EQ(d.def[3].kind, D9_DEF_STRING);
	T_EQ(d.def[3].id, 3);
	T_EQ(d.def[3].u.string.len, 5);
	T_EQ(d.def[4].id, 4);
	T_EQ(count_probs(&d, D9_PROB_UNKNOWN_DEF), 1);
	T_EQU(find_prob(&d, D9_PROB_UNKNOWN_DEF)->off, unk_off);
	T_EQ(count_probs(&d, D9_PROB_CORRUPT), 2);
	T_EQU(d.prob[1].off, bad_off);
	T_EQU(d.prob[2].off, over_off);
	T_EQ(d.def_errs, 1);
	T_EQ(d.st.bad_defs, 2);
	T_EQ(d.st.corrupt_chunks, 0); /* the chunks themselves are sound */
	dec_free(&d);
	seg_free(&s);
}

/* A schema may reorder, add and drop fields of a known type: the decoder matches them by name,
 * keeps unknown ones out of the known slots, and leaves dropped ones 0. */
TEST(schema_evolution_fields_by_name)
{
	static const struct tfield wake[] = { { 'u', "kind" }, { 'i', "object" }, { 'u', "priority" },
		{ 'c', "woken" } }; /* waker dropped, priority added, order changed */
	static const struct tfield poll_start[] = { { 'u', "location" }, { 'b', "note" },
		{ 'c', "coroutine" } };
	struct seg s;
	struct dec d;
	struct d9_enc e;
	uint8_t f[32], *p;

	seg_std(&s, 8192, 0);
	seg_open(&s, D9_CHUNK_SCHEMA);
	d9_wbuf_u(&s.w, 2);
	schema_type(&s.w, D9_EV_WAKE, "Wake", 4, wake);
	schema_type(&s.w, D9_EV_POLL_START, "PollStart", 3, poll_start);
	seg_close(&s);
	seg_enc_begin(&s, &e, 1, 1, MONO_BASE, 6, 0, 4096);
	p = d9_put_varint(f, D9_WAKE_FD);
	p = d9_put_varint(p, d9_zigzag(-2));
	p = d9_put_varint(p, 9);
	p = d9_put_varint(p, d9_zigzag(700) + 5); /* woken 700 */
	T_EQ(d9_enc_raw(&e, AT(1), D9_EV_WAKE, f, (size_t)(p - f)), 0);
	p = d9_put_varint(f, 4);
	p = d9_put_varint(p, 3);
	memcpy(p, "GET", 3);
	p += 3;
	p = d9_put_varint(p, 1); /* coroutine 700 again: the most recent */
	T_EQ(d9_enc_raw(&e, AT(2), D9_EV_POLL_START, f, (size_t)(p - f)), 0);
	e.mru[0] = 700;
	T_EQ(d9_enc_poll_end(&e, AT(3), 700), 0); /* PollEnd keeps the built-in layout */
	seg_enc_end(&s, &e);
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, 3);
	const struct d9_event *w = &d.ev[0].ev;
	T_EQ(w->type, D9_EV_WAKE);
	T_EQ(w->f[D9_F_WAKE_WOKEN], 700);
	T_EQ(w->f[D9_F_WAKE_WAKER], 0);
	T_EQ(w->f[D9_F_WAKE_KIND], D9_WAKE_FD);
	T_EQ((int64_t)w->f[D9_F_WAKE_OBJECT], -2);
	T_EQ(w->nfields, 4);
	for (int k = 4; k < D9_EV_MAX_FIELDS; k++)
		T_EQ(w->f[k], 0); /* "priority" has no slot: kept out of the known ones */
	const struct d9_event *ps = &d.ev[1].ev;
	T_EQ(ps->f[D9_F_POLL_COROUTINE], 700);
	T_EQ(ps->f[D9_F_POLL_LOCATION], 4);
	T_EQ(ps->nfields, 2);
	T_EQ(ps->data_len, 3); /* the first 'b' field is still handed out */
	T_ASSERT(!memcmp(ps->data, "GET", 3));
	T_EQ(d.ev[2].ev.type, D9_EV_POLL_END);
	T_EQ(d.ev[2].ev.f[0], 700);
	dec_free(&d);
	seg_free(&s);
}

/* ---- Whole-file errors ------------------------------------------------------------------------ */

TEST(version_and_magic)
{
	struct seg s;
	struct dec d;

	build_sample(&s);
	size_t len = seg_len(&s);
	s.buf[8] = 2; /* major 2 */
	T_EQ(dec_mem(&d, s.buf, len), D9_EVERSION);
	dec_free(&d);
	s.buf[8] = 0; /* major 0 */
	T_EQ(dec_mem(&d, s.buf, len), D9_EVERSION);
	dec_free(&d);
	s.buf[8] = 1;
	s.buf[10] = 9; /* minor 9: a newer writer of the same major reads fine */
	T_EQ(dec_mem(&d, s.buf, len), 0);
	T_EQ(d.h.minor, 9);
	T_EQ(d.nev, 22);
	dec_free(&d);
	s.buf[10] = 0;

	static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	T_EQ(dec_mem(&d, http, sizeof(http) - 1), D9_ENOTTRACE);
	dec_free(&d);
	static const uint8_t elf[20] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
	T_EQ(dec_mem(&d, elf, sizeof(elf)), D9_ENOTTRACE);
	dec_free(&d);
	T_EQ(dec_mem(&d, "\x89", 1), D9_ETRUNC); /* a prefix of the magic: truncated */
	dec_free(&d);
	/* text-mode mangling (CRLF -> LF) breaks the magic */
	uint8_t *m = malloc(len);
	memcpy(m, s.buf, 4);
	memcpy(m + 4, s.buf + 5, len - 5);
	T_EQ(dec_mem(&d, m, len - 1), D9_ENOTTRACE);
	dec_free(&d);
	free(m);

	T_EQ(dec_mem(&d, s.buf, 0), D9_ETRUNC); /* empty: FORMAT.md, "File prefix" */
	dec_free(&d);

	/* the first chunk must be a sound header */
	s.buf[s.off[0] + D9_CHUNK_HDR_LEN + 1] ^= 1;
	T_EQ(dec_mem(&d, s.buf, len), D9_ENOHEADER);
	dec_free(&d);
	s.buf[s.off[0] + D9_CHUNK_HDR_LEN + 1] ^= 1;
	s.buf[s.off[0] + 2] = D9_CHUNK_EVENTS;
	d9_chunk_fill_crc(s.buf + s.off[0]);
	T_EQ(dec_mem(&d, s.buf, len), D9_ENOHEADER);
	dec_free(&d);
	seg_free(&s);

	/* header values a v1 reader cannot use: FORMAT.md, "HEADER chunk" */
	for (int k = 0; k < 4; k++) {
		struct d9_header h = std_header();
		if (k == 0)
			h.ticks_per_sec = 0;
		else if (k == 1)
			h.time_shift = 41;
		else if (k == 2)
			h.clock_source = 2;
		else
			h.time_shift = 40; /* the largest valid shift */
		seg_init(&s, 4096);
		seg_header(&s, &h);
		T_EQ(dec_mem(&d, s.buf, seg_len(&s)), k == 3 ? 0 : D9_ENOHEADER);
		dec_free(&d);
		seg_free(&s);
	}

	T_ASSERT(!strcmp(d9_strerror(D9_EVERSION), "unsupported format major version"));
	T_ASSERT(!strcmp(d9_strerror(-ENOENT), strerror(ENOENT)));
}

/* ---- Files: plain and gzip -------------------------------------------------------------------- */

/* A segment big enough to cross the file reader's buffer refills: 2 threads, 16 KiB chunks. */
static void build_big(struct seg *s, size_t nchunks)
{
	struct d9_enc e;
	uint64_t ticks = MONO_BASE, seed = 12345;

	seg_std(s, (nchunks + 4) * 16384, 0);
	seg_open(s, D9_CHUNK_DEFS);
	d9_def_string(&s->w, 1, "worker", 6);
	seg_close(s);
	for (size_t c = 0; c < nchunks; c++) {
		seg_enc_begin(s, &e, 500 + (uint32_t)(c % 2), 1 + (uint32_t)(c % 2), ticks, 6, 0, 16384);
		for (;;) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			ticks += (seed >> 40) % 4000;
			int rc = (seed >> 20) % 3 == 0 ?
				d9_enc_wake(&e, ticks, 1 + (seed >> 33) % 3000, 0, D9_WAKE_FD, (seed >> 50) % 1000) :
				d9_enc_poll_start(&e, ticks, 1 + (seed >> 33) % 3000, 1 + (seed >> 30) % 5);
			if (rc == -ENOSPC)
				break;
			T_EQ(rc, 0);
		}
		seg_enc_end(s, &e);
	}
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	T_ASSERT(f);
	T_EQ(fwrite(p, 1, n, f), n);
	T_EQ(fclose(f), 0);
}

static void write_gz(const char *path, const void *p, size_t n)
{
	gzFile g = gzopen(path, "wb");

	T_ASSERT(g);
	T_EQ(gzwrite(g, p, (unsigned)n), (int)n);
	T_EQ(gzclose(g), Z_OK);
}

static uint8_t *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;

	T_ASSERT(f);
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(*n + 1);
	T_ASSERT(b);
	T_EQ(fread(b, 1, *n, f), *n);
	fclose(f);
	return b;
}

static void tmp_path(char *buf, size_t n, const char *suffix)
{
	snprintf(buf, n, "/tmp/d9-test-format-%d%s", (int)getpid(), suffix);
}

/* Everything d9_reader_open_file reads from a plain file and a gzip copy equals what
 * d9_reader_open_mem reads from the bytes. */
TEST(file_plain_and_gzip_identical)
{
	char plain[128], gz[128];
	struct seg s;
	struct dec m, p, g;

	build_big(&s, 64); /* ~1 MiB: several refills of the reader's 256 KiB buffer */
	tmp_path(plain, sizeof(plain), ".bin");
	tmp_path(gz, sizeof(gz), ".bin.gz");
	write_file(plain, s.buf, seg_len(&s));
	write_gz(gz, s.buf, seg_len(&s));
	T_EQ(dec_mem(&m, s.buf, seg_len(&s)), 0);
	T_EQ(dec_file(&p, plain), 0);
	T_EQ(dec_file(&g, gz), 0);
	unlink(plain);
	unlink(gz);
	expect_clean(&m);
	expect_clean(&p);
	expect_clean(&g);
	T_EQ(m.nchunk, 66);
	T_EQ(m.nev, events_in_chunks(&s, 0, s.nchunks));
	T_ASSERT(m.nev > 5000);
	T_EQ(p.nev, m.nev);
	T_EQ(g.nev, m.nev);
	T_EQ(p.loglen, m.loglen);
	T_ASSERT(!memcmp(p.log, m.log, m.loglen));
	T_EQ(g.loglen, m.loglen);
	T_ASSERT(!memcmp(g.log, m.log, m.loglen));
	T_ASSERT(!strcmp(g.h.hostname, "web-07.example.net"));
	T_EQ(g.h.cmdline_len, 30);
	dec_free(&m);
	dec_free(&p);
	dec_free(&g);
	seg_free(&s);
}

/* How many bytes a truncated gzip file inflates to, by zlib's inflate directly. */
static size_t inflatable(const uint8_t *gz, size_t n, size_t max)
{
	z_stream z;
	uint8_t *out = malloc(max);

	T_ASSERT(out);
	memset(&z, 0, sizeof(z));
	T_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
	z.next_in = (uint8_t *)gz;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)max;
	inflate(&z, Z_SYNC_FLUSH);
	size_t got = z.total_out;
	inflateEnd(&z);
	free(out);
	return got;
}

/* A gzip file cut short (a copy interrupted mid-way) decodes every chunk it holds in full. */
TEST(gzip_truncated_decodes_complete_chunks)
{
	char gz[128], cut[128];
	struct seg s;
	struct dec m, g;
	size_t gzlen;

	build_big(&s, 64);
	tmp_path(gz, sizeof(gz), ".bin.gz");
	tmp_path(cut, sizeof(cut), "-cut.bin.gz");
	write_gz(gz, s.buf, seg_len(&s));
	uint8_t *z = read_file(gz, &gzlen);
	unlink(gz);
	T_EQ(dec_mem(&m, s.buf, seg_len(&s)), 0);
	static const int pct[] = { 3, 37, 55, 90 };
	for (size_t k = 0; k < NELEM(pct); k++) {
		size_t keep = gzlen * (size_t)pct[k] / 100;
		write_file(cut, z, keep);
		size_t avail = inflatable(z, keep, seg_len(&s));
		T_ASSERT(avail > 0 && avail < seg_len(&s));
		size_t complete = 0; /* chunks after the header inside the inflatable part */
		while (1 + complete < s.nchunks && s.end[1 + complete] <= avail)
			complete++;
		T_EQ(dec_file(&g, cut), 0);
		if (g.nchunk != complete)
			T_FAIL("gzip cut at %d%% (%zu of %zu bytes inflate): %zu chunks, expected %zu",
				pct[k], avail, seg_len(&s), g.nchunk, complete);
		size_t nev = events_in_chunks(&s, 1, 1 + complete);
		T_EQ(g.nev, nev);
		for (size_t i = 0; i < nev; i++)
			expect_same_event(&g.ev[i], &m.ev[i], i);
		T_EQ(g.st.truncated, 1);
		T_EQU(g.st.truncated_at, s.off[1 + complete]);
		T_EQ(g.st.corrupt_chunks, 0);
		dec_free(&g);
	}
	unlink(cut);
	free(z);
	dec_free(&m);
	seg_free(&s);
}

/* A gzip file missing only its 8-byte trailer inflates completely, but its end was never
 * verified: the reader reports a D9_PROB_TRUNCATED problem, and its stats must agree, or
 * `d9-analyze dump` calls the segment clean (exit 0) right under a "truncated" problem line. */
TEST(gzip_missing_trailer_counts_as_truncated)
{
	char gz[128];
	struct seg s;
	struct dec g;
	size_t gzlen;

	build_sample(&s);
	tmp_path(gz, sizeof(gz), ".bin.gz");
	write_gz(gz, s.buf, seg_len(&s));
	uint8_t *z = read_file(gz, &gzlen);
	write_file(gz, z, gzlen - 8);
	T_EQ(dec_file(&g, gz), 0);
	unlink(gz);
	T_EQ(g.nev, 22); /* every byte of the segment inflated */
	T_EQ(count_probs(&g, D9_PROB_TRUNCATED), 1);
	if (!g.st.truncated)
		T_FAIL("problem reported: \"%s\", but stats say truncated=0", g.prob[0].msg);
	dec_free(&g);
	free(z);
	seg_free(&s);
}

/* Errors from the file system come back as -errno, not as a format verdict. */
TEST(open_file_errors)
{
	struct d9_reader *r = (struct d9_reader *)1;
	char dir[128];

	T_EQ(d9_reader_open_file(&r, "/nonexistent/d9/segment.bin"), -ENOENT);
	T_ASSERT(r == NULL);
	tmp_path(dir, sizeof(dir), "-dir.bin");
	T_EQ(mkdir(dir, 0700), 0);
	int err = d9_reader_open_file(&r, dir);
	rmdir(dir);
	T_ASSERT(r == NULL);
	if (err != -EISDIR)
		T_FAIL("open of a directory returned %d (%s), expected -EISDIR", err, d9_strerror(err));
}

TEST(empty_file)
{
	char path[128];
	struct dec d;

	tmp_path(path, sizeof(path), "-empty.bin");
	write_file(path, "", 0);
	int err = dec_file(&d, path);
	unlink(path);
	T_EQ(err, D9_ETRUNC);
	dec_free(&d);
}

/* ---- Time conversion -------------------------------------------------------------------------- */

TEST(time_monotonic_shift_0_and_6)
{
	struct d9_header h = {
		.clock_source = D9_CLOCK_MONOTONIC, .time_shift = 0, .ticks_per_sec = 1000000000,
		.anchor_ticks = 1000000000000ull, .anchor_mono_ns = 1000000000000ull,
		.anchor_realtime_ns = 1700000000000000000ull,
	};

	/* shift 0: units are ns */
	T_EQ(d9_time_to_mono_ns(&h, 1000000012345ull), 1000000012345ll);
	T_EQ(d9_time_to_realtime_ns(&h, 1000000012345ull), 1700000000000012345ll);
	T_EQ(d9_time_to_mono_ns(&h, 999999999500ull), 999999999500ll); /* 500 ns before the anchor */
	T_EQ(d9_time_to_realtime_ns(&h, 999999999500ull), 1699999999999999500ll);
	T_EQ(d9_time_to_mono_ns(&h, 0), 0);

	/* shift 6: units of 64 ns; the anchor (1000000000123 ns) is not a multiple of 64 */
	h.time_shift = 6;
	h.anchor_ticks = 1000000000123ull;
	h.anchor_mono_ns = 1000000000123ull;
	h.anchor_realtime_ns = 1700000000000000123ull;
	/* unit 15625000002 = 1000000000128 ns: 5 ns after the anchor */
	T_EQ(d9_time_to_mono_ns(&h, 15625000002ull), 1000000000128ll);
	T_EQ(d9_time_to_realtime_ns(&h, 15625000002ull), 1700000000000000128ll);
	/* unit 15625000001 = 1000000000064 ns: 59 ns before it */
	T_EQ(d9_time_to_mono_ns(&h, 15625000001ull), 1000000000064ll);
	T_EQ(d9_time_to_realtime_ns(&h, 15625000001ull), 1700000000000000064ll);
	/* one hour later: 15625000002 + 56250000000 units = 3600 s + 5 ns */
	T_EQ(d9_time_to_mono_ns(&h, 15625000002ull + 56250000000ull), 4600000000128ll);
	/* the mono/realtime offset is the same at every time */
	for (uint64_t t = 15000000000ull; t < 17000000000ull; t += 99999999)
		T_EQ(d9_time_to_realtime_ns(&h, t) - d9_time_to_mono_ns(&h, t),
			1700000000000000123ll - 1000000000123ll);
}

TEST(time_tsc)
{
	/* a 2.5 GHz TSC that has run for ~58 years' worth of ticks: near 2^62 */
	const uint64_t anchor = (1ull << 62) - 123456789;
	struct d9_header h = {
		.clock_source = D9_CLOCK_TSC, .time_shift = 0, .ticks_per_sec = 2500000000ull,
		.anchor_ticks = anchor, .anchor_mono_ns = 5000000000000ull,
		.anchor_realtime_ns = 1700000000000000000ull,
	};

	T_EQ(d9_time_to_mono_ns(&h, anchor), 5000000000000ll);
	T_EQ(d9_time_to_mono_ns(&h, anchor + 7500000000ull), 5003000000000ll); /* +3 s */
	T_EQ(d9_time_to_realtime_ns(&h, anchor + 7500000000ull), 1700000003000000000ll);
	T_EQ(d9_time_to_mono_ns(&h, anchor + 5), 5000000000002ll); /* 5 ticks = 2 ns */
	T_EQ(d9_time_to_mono_ns(&h, anchor - 17500000000ull), 4993000000000ll); /* 7 s before */
	T_EQ(d9_time_to_mono_ns(&h, anchor - 5), 4999999999998ll);
	T_EQ(d9_time_to_realtime_ns(&h, anchor - 17500000000ull), 1699999993000000000ll);
	/* fractions round toward zero on both sides (FORMAT.md, "Time"): 0.4 -> 0, -0.4 -> 0,
	 * 1.2 -> 1, -1.2 -> -1 */
	T_EQ(d9_time_to_mono_ns(&h, anchor + 1), 5000000000000ll);
	T_EQ(d9_time_to_mono_ns(&h, anchor - 1), 5000000000000ll);
	T_EQ(d9_time_to_mono_ns(&h, anchor + 3), 5000000000001ll);
	T_EQ(d9_time_to_mono_ns(&h, anchor - 3), 4999999999999ll);
	/* 2^62 ticks from an anchor of 1000: (2^62 - 1000) * 0.4 ns = 1844674407370954761.6 ns */
	h.anchor_ticks = 1000;
	h.anchor_mono_ns = 0;
	T_EQ(d9_time_to_mono_ns(&h, 1ull << 62), 1844674407370954761ll);
	/* shift 6 near 2^62 ticks: unit 2^56 = tick 2^62 */
	h.time_shift = 6;
	h.anchor_ticks = (1ull << 62) - 2500000000ull; /* 1 s before tick 2^62 */
	h.anchor_mono_ns = 7000000000000ull;
	T_EQ(d9_time_to_mono_ns(&h, 1ull << 56), 7001000000000ll);
	T_EQ(d9_time_to_mono_ns(&h, (1ull << 56) + 390625), 7001010000000ll); /* +25e6 ticks: +10 ms */
	T_EQ(d9_time_to_mono_ns(&h, (1ull << 56) - 39062500), 7000000000000ll); /* the anchor */
	T_EQ(d9_time_to_mono_ns(&h, (1ull << 56) - 78125000), 6999000000000ll); /* 1 s before it */
}

/* The worked TSC example of FORMAT.md, "Time": time_shift 10 at 3 GHz. */
TEST(time_format_md_example)
{
	struct d9_header h = {
		.clock_source = D9_CLOCK_TSC, .time_shift = 10, .ticks_per_sec = 3000000000ull,
		.anchor_ticks = 1000000000000ull, .anchor_mono_ns = 333333444444ull,
		.anchor_realtime_ns = 1700000000123456789ull,
	};

	T_EQ(d9_time_to_mono_ns(&h, 976562504), 333333445809ll);
	T_EQ(d9_time_to_realtime_ns(&h, 976562504), 1700000000123458154ll);
	T_EQ(d9_time_to_mono_ns(&h, 976562499), 333333444103ll);
	T_EQ(d9_time_to_realtime_ns(&h, 976562499), 1700000000123456448ll);
}

/* A hostile header (a valid one: ticks_per_sec 1, time_shift 40) with a large event time must
 * not overflow inside the conversion: the decoder promises to saturate, and `d9-analyze dump`
 * converts every event's time, so a crafted file would abort the sanitizer build. */
TEST(time_hostile_header_no_overflow)
{
	struct d9_header h = { .clock_source = D9_CLOCK_TSC, .time_shift = 40, .ticks_per_sec = 1 };

	int64_t a = d9_time_to_mono_ns(&h, UINT64_MAX);
	int64_t b = d9_time_to_mono_ns(&h, 1ull << 40);
	T_ASSERT(a > 0 && b > 0 && a >= b); /* saturated towards +inf, monotonic */
	h.anchor_ticks = UINT64_MAX;
	T_ASSERT(d9_time_to_mono_ns(&h, 0) < 0);
}

/* ---- Encoder room ------------------------------------------------------------------------------ */

TEST(enc_begin_rejects_small_buffers)
{
	uint8_t buf[D9_ENC_MIN_BUF + 8];
	struct d9_enc e;

	T_EQ(d9_enc_begin(&e, buf, 0, 1, 1, 0, 0, 0), -ENOSPC);
	T_EQ(d9_enc_begin(&e, buf, 16, 1, 1, 0, 0, 0), -ENOSPC);
	T_EQ(d9_enc_begin(&e, buf, D9_ENC_MIN_BUF - 1, 1, 1, 0, 0, 0), -ENOSPC);
	T_EQ(d9_enc_begin(&e, buf, D9_ENC_MIN_BUF, 1, 1, 0, 0, 0), 0);

	uint8_t small[64];
	struct d9_wbuf w;
	d9_wbuf_init(&w, small, sizeof(small));
	struct d9_header h = std_header();
	T_EQ(d9_header_write(&w, &h), -ENOSPC);
	T_EQ(d9_prefix_encode(small, 15), -ENOSPC);
	d9_wbuf_init(&w, small, sizeof(small));
	T_EQ(d9_schema_write(&w, 0), -ENOSPC);
	d9_wbuf_init(&w, small, 10);
	d9_wbuf_le64(&w, 1);
	d9_wbuf_le32(&w, 1); /* 12 > 10: sticky error, nothing more written */
	T_EQ(w.err, -ENOSPC);
	T_EQ(w.p - small, 8);
	d9_wbuf_u(&w, 1);
	T_EQ(w.p - small, 8);
}

/* d9_enc_begin accepted a D9_ENC_MIN_BUF buffer, so one event must fit in it: the room test is
 * `p >= end` while end already keeps D9_ENC_EVENT_MAX + CRC bytes of slack, so at exactly the
 * minimum no event fits and a writer that starts a fresh chunk on -ENOSPC never makes progress. */
TEST(enc_min_buf_holds_one_event)
{
	uint8_t buf[D9_ENC_MIN_BUF];
	struct d9_enc e;

	T_EQ(d9_enc_begin(&e, buf, sizeof(buf), 1, 1, 0, 0, 0), 0);
	T_EQ(d9_enc_poll_end(&e, 0, 1), 0);
	T_ASSERT(d9_enc_end(&e, 1) <= sizeof(buf));
}

#define GUARD 512

/* An event of `type` with field values that take the most bytes (coroutine ids below 2^63,
 * alternating with 1 so that their deltas are huge too). */
static struct evspec fat_event(uint32_t type, int i, uint64_t ticks)
{
	struct evspec x = { type, ticks, { 0 } };
	/* coroutine ids stay below 2^62 (FORMAT.md): the agent's counters never get near */
	uint64_t big = UINT64_MAX - (uint64_t)i, cbig = (1ull << 62) - 1 - (uint64_t)i;
	uint64_t c = i & 1 ? cbig : 1;

	switch (type) {
	case D9_EV_PARK:
		x.f[0] = UINT32_MAX;
		x.f[1] = U(INT64_MIN);
		break;
	case D9_EV_UNPARK:
		x.f[0] = U(INT64_MIN);
		x.f[1] = x.f[2] = big;
		break;
	case D9_EV_WAKE:
		/* kind and object share one field: kind < 8, |object| < 2^60 (FORMAT.md) */
		x.f[0] = cbig;
		x.f[1] = 1;
		x.f[2] = D9_WAKE_MAX;
		x.f[3] = U(-(1ll << 59));
		break;
	case D9_EV_SPAWN:
		x.f[0] = cbig;
		x.f[1] = 1;
		x.f[2] = big;
		break;
	case D9_EV_BLOCKING_CALL:
		x.f[0] = c;
		x.f[1] = x.f[3] = x.f[4] = big;
		x.f[2] = UINT32_MAX;
		break;
	case D9_EV_CPU_SAMPLE:
		x.f[0] = c;
		x.f[1] = UINT32_MAX;
		x.f[2] = big;
		break;
	case D9_EV_DROPPED:
		x.f[0] = big;
		x.f[1] = UINT32_MAX;
		break;
	case D9_EV_QUEUE_SAMPLE:
		x.f[0] = big;
		break;
	default: /* PollStart, PollEnd, CoroutineExit */
		x.f[0] = c;
		x.f[1] = big;
		break;
	}
	return x;
}

/* Fills chunks of several sizes with the largest events each encoder can write until -ENOSPC,
 * once with all types mixed and once with each type alone (so the largest one also lands right
 * at the room limit): nothing is ever written past the buffer, a refused event changes nothing,
 * and the chunk decodes to exactly `count` events with their values. */
TEST(enc_fill_never_overruns)
{
	static const size_t caps[] = { D9_ENC_MIN_BUF + 1, D9_ENC_MIN_BUF + 61, 200, 1000, 4093, 65536 };
	static const uint8_t fat[40] = { 39, 38 }; /* raw CustomEvent: schema 39, 38 data bytes */

	for (size_t k = 0; k < NELEM(caps) * 13; k++) {
		size_t cap = caps[k / 13];
		int mode = (int)(k % 13); /* 0: mixed; 1..11: that type alone; 12: fat raw events alone */
		uint8_t *mem = malloc(D9_PREFIX_LEN + 4096 + cap + GUARD);
		struct seg s;
		struct d9_enc e;
		struct dec d;
		struct evspec want[8192];
		size_t n = 0;

		seg_std(&s, 4096, D9_SCHEMA_UNPARK_STATS);
		size_t head = seg_len(&s);
		memcpy(mem, s.buf, head);
		memset(mem + head + cap, 0xa5, GUARD);
		T_EQ(d9_enc_begin(&e, mem + head, cap, UINT32_MAX, UINT32_MAX, 0, 0,
			D9_SCHEMA_UNPARK_STATS), 0);
		uint64_t ticks = 0;
		for (int i = 0;; i++) {
			uint32_t type = mode == 0 ? (uint32_t)(i % 11) + 1 :
				mode == 12 ? D9_EV_CUSTOM : (uint32_t)mode;
			struct evspec x = fat_event(type, i, ticks += 1ull << 52); /* 8-byte deltas */
			int raw = mode == 12 || (mode == 0 && i % 7 == 6);
			if (raw)
				x = (struct evspec){ D9_EV_CUSTOM, x.ticks, { 39, 38 } };
			else if (x.type == D9_EV_CUSTOM)
				x.type = D9_EV_QUEUE_SAMPLE;
			uint8_t *p0 = e.p;
			uint32_t c0 = e.count;
			int room = d9_enc_room(&e);
			int rc = raw ? d9_enc_raw(&e, x.ticks, D9_EV_CUSTOM, fat, sizeof(fat)) : emit(&e, &x);
			if (!raw)
				T_EQ(room, rc == 0); /* d9_enc_room predicts the fixed-field encoders */
			if (rc == -ENOSPC) {
				T_ASSERT(e.p == p0 && e.count == c0);
				if (!raw || mode == 12)
					break;
				continue; /* a fat raw event may not fit where a fixed one still does */
			}
			T_EQ(rc, 0);
			T_ASSERT(e.p <= mem + head + cap - D9_CHUNK_CRC_LEN);
			T_ASSERT(n < NELEM(want));
			want[n++] = x;
		}
		size_t size = d9_enc_end(&e, 1);
		T_ASSERT(size <= cap);
		for (size_t i = 0; i < GUARD; i++)
			if (mem[head + cap + i] != 0xa5)
				T_FAIL("cap %zu, mode %d: guard byte %zu overwritten", cap, mode, i);
		T_EQ(e.count, n);
		T_ASSERT(cap < 1000 || n >= cap / 70); /* the 96-byte slack is not the whole chunk */
		T_ASSERT(cap < 1000 || size + D9_ENC_EVENT_MAX + 60 >= cap); /* and the chunk is full */
		T_EQ(dec_mem(&d, mem, head + size), 0);
		expect_clean(&d);
		T_EQ(d.nev, n);
		expect_events(d.ev, want, n, 0, 0, D9_SCHEMA_UNPARK_STATS);
		for (size_t i = 0; i < n; i++)
			if (want[i].type == D9_EV_CUSTOM)
				T_EQ(d.ev[i].ev.data_len, 38);
		dec_free(&d);
		seg_free(&s);
		free(mem);
	}
}

TEST(enum_names)
{
	static const char *const ev[] = { NULL, "PollStart", "PollEnd", "Park", "Unpark", "Wake",
		"Spawn", "CoroutineExit", "QueueSample", "BlockingCall", "CpuSample", "Dropped",
		"CustomEvent", "ZeroTimeoutWaits" };
	T_EQ(NELEM(ev), D9_EV_KNOWN_MAX + 1);
	for (uint32_t t = 1; t <= D9_EV_KNOWN_MAX; t++)
		T_ASSERT(d9_event_name(t) && !strcmp(d9_event_name(t), ev[t]));
	T_ASSERT(d9_event_name(0) == NULL && d9_event_name(14) == NULL && d9_event_name(31) == NULL);
	T_ASSERT(!strcmp(d9_wait_call_name(D9_CALL_SELECT), "select"));
	T_ASSERT(!strcmp(d9_wait_call_name(D9_CALL_MAX + 1), "unknown"));
	T_ASSERT(!strcmp(d9_drop_reason_name(D9_DROP_BUFFERS_FULL), "buffers_full"));
	T_ASSERT(!strcmp(d9_fd_kind_name(D9_FD_SOCKET), "socket"));
	T_ASSERT(!strcmp(d9_fd_kind_name(99), "unknown"));
}

/* ---- Compactness -------------------------------------------------------------------------------- */

/* A synthetic but realistic event stream of one State Threads worker (select mode, so fds stay
 * below FD_SETSIZE 1024; ids handed out at first run, so they grow). Per scheduler round:
 * Park(select) -> Unpark(ready 1..3) -> one Wake(fd) per ready fd -> for each woken coroutine
 * PollStart .. PollEnd, where a request may signal a condition (Wake cond with a waker: the woken
 * one runs in the same round), the listener spawns a connection, and a connection that has served
 * its requests exits. Timer rounds (select returns 0) wake a keep-alive coroutine. Gaps between
 * events, all within 0.2-50 us, by what happens in between:
 *   scheduler steps (Unpark->Wake, Wake->Wake, PollEnd->PollStart, PollEnd->Park): 0.2-1 us uniform
 *   a request's poll (PollStart->PollEnd): 2-50 us log-uniform
 *   a new connection's first poll: 1-5 us log-uniform
 *   the wait in select (Park->Unpark): 1-50 us log-uniform
 * The parameters were fixed from these descriptions before measuring. */

struct prng { uint64_t s; };

static uint64_t prng_next(struct prng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull); /* splitmix64 */

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double prng_unit(struct prng *r)
{
	return (double)(prng_next(r) >> 11) * 0x1.0p-53;
}

static uint64_t prng_below(struct prng *r, uint64_t n)
{
	return prng_next(r) % n;
}

static uint64_t gap_uniform_ns(struct prng *r, double lo_us, double hi_us)
{
	return (uint64_t)(1000.0 * (lo_us + (hi_us - lo_us) * prng_unit(r)));
}

static uint64_t gap_log_ns(struct prng *r, double lo_us, double hi_us)
{
	return (uint64_t)(1000.0 * lo_us * pow(hi_us / lo_us, prng_unit(r)));
}

/* Encodes events into consecutive 64 KiB EVENTS chunks, as the agent would. */
struct sink {
	uint8_t *out;
	size_t len, cap;
	struct d9_enc e;
	uint8_t shift;
	uint64_t tick_num, tick_den; /* ticks = ns * num / den */
	uint64_t chunks, events;
	uint64_t size[D9_EV_KNOWN_MAX + 1], count[D9_EV_KNOWN_MAX + 1];
	struct evspec *log; /* what was encoded, in ticks, for the decode check */
	size_t nlog, cap_log;
};

#define SINK_CHUNK 65536

static void sink_begin(struct sink *k, uint64_t ticks)
{
	T_ASSERT(k->len + SINK_CHUNK <= k->cap);
	/* the agent's layout of Park and Unpark (format 1.3) */
	T_EQ(d9_enc_begin(&k->e, k->out + k->len, SINK_CHUNK, 4243, 1, ticks, k->shift,
		D9_SCHEMA_COMPACT_WAITS), 0);
}

static void sink_end(struct sink *k)
{
	k->len += d9_enc_end(&k->e, 1);
	k->chunks++;
}

static void sink_emit(struct sink *k, uint32_t type, uint64_t ns, uint64_t f0, uint64_t f1,
	uint64_t f2, uint64_t f3)
{
	struct evspec x = { type, ns * k->tick_num / k->tick_den, { f0, f1, f2, f3 } };
	uint8_t *p0 = k->e.p;
	int rc = emit(&k->e, &x);

	if (rc == -ENOSPC) {
		sink_end(k);
		sink_begin(k, x.ticks);
		p0 = k->e.p;
		rc = emit(&k->e, &x);
	}
	T_EQ(rc, 0);
	k->size[type] += (uint64_t)(k->e.p - p0);
	k->count[type]++;
	k->events++;
	if (k->log) {
		k->log = grow(k->log, &k->cap_log, k->nlog, sizeof(*k->log));
		k->log[k->nlog++] = x;
	}
}

struct conn { uint64_t id, mark; uint32_t fd, left; }; /* mark: last round it was queued in */

#define MAX_CONNS 900 /* select: fds below 1024, minus a few for listeners and logs */
#define LISTENER_ID 2
#define LISTENER_FD 3

static void conn_open(struct conn *c, uint64_t id, uint32_t fd, struct prng *r)
{
	c->id = id;
	c->fd = fd;
	c->mark = 0;
	c->left = 1 + (uint32_t)prng_below(r, 40); /* keep-alive: 1..40 requests, 20.5 on average */
}

/* Runs the worker model until `requests` requests were served. */
static void st_worker_stream(struct sink *k, uint64_t requests, uint32_t population)
{
	static struct conn conns[MAX_CONNS];
	static uint32_t free_fds[1024];
	static const uint64_t conds[4] = { 0x55d0c0a01e80ull, 0x55d0c0a01ec0ull, 0x55d0c0a01f00ull,
		0x55d0c0a02a40ull };
	struct prng r = { 20240601 };
	uint64_t t = 3600ull * 1000000000ull; /* an hour of uptime */
	uint64_t next_id = 3, served = 0;
	uint32_t nconns = 0, nfree = 0;

	for (uint32_t fd = 1023; fd > LISTENER_FD; fd--)
		free_fds[nfree++] = fd;
	/* the connections open when recording started: ids and fds handed out earlier */
	while (nconns < population) {
		conn_open(&conns[nconns], next_id++, free_fds[--nfree], &r);
		nconns++;
	}
	sink_begin(k, t * k->tick_num / k->tick_den);
	for (uint64_t round = 1; served < requests; round++) {
		int64_t run[8]; /* index into conns[], or -1 for the listener */
		uint32_t exits[8];
		int nrun = 0, nexit = 0, listener = 0;

		t += gap_log_ns(&r, 1, 50); /* waiting in select */
		if (nconns && prng_below(&r, 100) < 2) {
			/* select timed out: a keep-alive timer fires */
			uint64_t c = prng_below(&r, nconns);
			sink_emit(k, D9_EV_UNPARK, t, 0, D9_UNKNOWN, D9_UNKNOWN, 0);
			t += gap_uniform_ns(&r, 0.2, 1);
			sink_emit(k, D9_EV_WAKE, t, conns[c].id, 0, D9_WAKE_TIMER,
				U(-(int64_t)prng_below(&r, 4)));
			conns[c].mark = round;
			run[nrun++] = (int64_t)c;
		} else {
			int want = 1 + (int)prng_below(&r, 3);
			for (int i = 0; i < want; i++) {
				/* about one readable fd in 20 is the listener: keeps the population steady */
				if (nconns == 0 || prng_below(&r, 20) == 0) {
					if (!listener)
						run[nrun++] = -1;
					listener = 1;
					continue;
				}
				uint64_t c = prng_below(&r, nconns);
				if (conns[c].mark == round)
					continue;
				conns[c].mark = round;
				run[nrun++] = (int64_t)c;
			}
			sink_emit(k, D9_EV_UNPARK, t, (uint64_t)nrun, D9_UNKNOWN, D9_UNKNOWN, 0);
			for (int i = 0; i < nrun; i++) {
				t += gap_uniform_ns(&r, 0.2, 1);
				if (run[i] < 0)
					sink_emit(k, D9_EV_WAKE, t, LISTENER_ID, 0, D9_WAKE_FD, LISTENER_FD);
				else
					sink_emit(k, D9_EV_WAKE, t, conns[run[i]].id, 0, D9_WAKE_FD,
						conns[run[i]].fd);
			}
		}
		if (round % 16 == 0)
			sink_emit(k, D9_EV_QUEUE_SAMPLE, t, (uint64_t)nrun, 0, 0, 0);
		for (int i = 0; i < nrun; i++) {
			t += gap_uniform_ns(&r, 0.2, 1);
			if (run[i] < 0) {
				/* the listener accepts and spawns the connection's coroutine, which runs next */
				uint64_t id = next_id++;
				sink_emit(k, D9_EV_POLL_START, t, LISTENER_ID, 4, 0, 0);
				t += gap_uniform_ns(&r, 0.2, 1);
				sink_emit(k, D9_EV_SPAWN, t, id, LISTENER_ID, 2, 0);
				t += gap_uniform_ns(&r, 0.2, 1);
				sink_emit(k, D9_EV_POLL_END, t, LISTENER_ID, 0, 0, 0);
				t += gap_uniform_ns(&r, 0.2, 1);
				sink_emit(k, D9_EV_POLL_START, t, id, 5, 0, 0);
				t += gap_log_ns(&r, 1, 5); /* reads nothing yet: waits on its fd */
				sink_emit(k, D9_EV_POLL_END, t, id, 0, 0, 0);
				if (nconns < MAX_CONNS) {
					conn_open(&conns[nconns], id, free_fds[--nfree], &r);
					conns[nconns].mark = round;
					nconns++;
				}
				continue;
			}
			struct conn *c = &conns[run[i]];
			sink_emit(k, D9_EV_POLL_START, t, c->id, prng_below(&r, 10) == 0 ? 2 : 1, 0, 0);
			t += gap_log_ns(&r, 2, 50); /* serves one request */
			if (prng_below(&r, 20) == 0 && nrun < 8) {
				/* it signals a condition another connection waits on: that one runs next */
				uint64_t o = prng_below(&r, nconns);
				if (conns[o].mark != round) {
					conns[o].mark = round;
					sink_emit(k, D9_EV_WAKE, t, conns[o].id, c->id, D9_WAKE_COND,
						conds[prng_below(&r, 4)]);
					run[nrun++] = (int64_t)o;
					t += gap_uniform_ns(&r, 0.2, 1);
				}
			}
			served++;
			if (--c->left == 0) {
				sink_emit(k, D9_EV_COROUTINE_EXIT, t, c->id, 0, 0, 0);
				t += gap_uniform_ns(&r, 0.2, 1);
				exits[nexit++] = (uint32_t)run[i];
			}
			sink_emit(k, D9_EV_POLL_END, t, c->id, 0, 0, 0);
		}
		/* drop the exited connections, highest index first so swaps do not move the others */
		for (int i = 1; i < nexit; i++)
			for (int j = i; j > 0 && exits[j] > exits[j - 1]; j--) {
				uint32_t x = exits[j];
				exits[j] = exits[j - 1];
				exits[j - 1] = x;
			}
		for (int i = 0; i < nexit; i++) {
			free_fds[nfree++] = conns[exits[i]].fd;
			conns[exits[i]] = conns[--nconns];
		}
		t += gap_uniform_ns(&r, 0.2, 1);
		/* timeout: the next keep-alive deadline (a few ms), or none */
		sink_emit(k, D9_EV_PARK, t, D9_CALL_SELECT,
			prng_below(&r, 10) < 7 ? 1000 + prng_below(&r, 4000) : U(-1), 0, 0);
	}
	sink_end(k);
}

static void sink_init(struct sink *k, uint8_t shift, uint64_t num, uint64_t den, int keep_log)
{
	memset(k, 0, sizeof(*k));
	k->cap = 16u << 20;
	k->out = malloc(k->cap);
	T_ASSERT(k->out);
	k->shift = shift;
	k->tick_num = num;
	k->tick_den = den;
	if (keep_log)
		k->log = grow(NULL, &k->cap_log, 0, sizeof(*k->log));
}

TEST(compactness)
{
	static const char *const names[D9_EV_KNOWN_MAX + 1] = { "", "PollStart", "PollEnd", "Park",
		"Unpark", "Wake", "Spawn", "CoroutineExit", "QueueSample", "BlockingCall", "CpuSample",
		"Dropped", "CustomEvent", "ZeroTimeoutWaits" };
	struct sink k;

	/* The issue's "realistic" stream: coroutine and worker ids small (64 keep-alive connections
	 * when recording starts), gaps of microseconds. CLOCK_MONOTONIC with the agent's unit for
	 * it, 2^7 ns (agent/clock.c). */
	sink_init(&k, 7, 1, 1, 1);
	st_worker_stream(&k, 100000, 64);
	double bpe = (double)k.len / (double)k.events;
	printf("# compactness: %.2f bytes/event (%" PRIu64 " events, %zu bytes, %" PRIu64
		" chunks of <= 64 KiB; 64 connections, monotonic clock, 128 ns units)\n", bpe, k.events,
		k.len, k.chunks);
	for (int t = 1; t <= D9_EV_KNOWN_MAX; t++)
		if (k.count[t])
			printf("#   %-14s %8" PRIu64 " events %6.2f bytes/event (%4.1f%% of events, "
				"%4.1f%% of bytes)\n", names[t], k.count[t],
				(double)k.size[t] / (double)k.count[t],
				100.0 * (double)k.count[t] / (double)k.events,
				100.0 * (double)k.size[t] / (double)k.len);
	printf("#   chunk framing  %6.3f bytes/event\n",
		(double)(k.chunks * (D9_CHUNK_OVERHEAD + D9_EVENTS_HDR_LEN)) / (double)k.events);

	/* the stream decodes back exactly: every event, every field, every time */
	struct seg s;
	struct dec d;
	seg_std(&s, k.len + 4096, D9_SCHEMA_COMPACT_WAITS);
	memcpy(s.w.p, k.out, k.len);
	s.w.p += k.len;
	T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
	expect_clean(&d);
	T_EQ(d.nev, k.events);
	T_EQ(d.nchunk, 1 + k.chunks);
	expect_events(d.ev, k.log, k.nlog, k.log[0].ticks, 7, 0); /* 0: Unparks without statistics */
	dec_free(&d);
	seg_free(&s);

	/* for information: the same on a 2.5 GHz TSC (the agent's unit 2^8 ticks, 102 ns), and a busier
	 * worker whose 600 connections spread coroutine ids and fds (not held to the budget) */
	struct sink tsc, wide;
	sink_init(&tsc, 8, 5, 2, 0);
	st_worker_stream(&tsc, 100000, 64);
	printf("# compactness (tsc 2.5 GHz, 256-tick units): %.2f bytes/event (%" PRIu64
		" events, %zu bytes)\n", (double)tsc.len / (double)tsc.events, tsc.events, tsc.len);
	free(tsc.out);
	free(tsc.log);
	sink_init(&wide, 7, 1, 1, 0);
	st_worker_stream(&wide, 100000, 600);
	printf("# compactness (600 connections): %.2f bytes/event (%" PRIu64 " events, %zu bytes)\n",
		(double)wide.len / (double)wide.events, wide.events, wide.len);
	free(wide.out);
	free(wide.log);

	T_ASSERT(k.events > 400000);
	if (bpe > 4.0)
		T_FAIL("%.2f bytes/event, budget 4.0", bpe);
	free(k.out);
	free(k.log);
}

/* CpuSample's unwind field follows D9_SCHEMA_CPU_UNWIND: written and decoded with the flag,
 * absent (decoded as 0, one byte less) without it; trailer counts follow the same flags. */
TEST(cpu_sample_unwind_follows_flags)
{
	for (unsigned flags = 0; flags <= D9_SCHEMA_CPU_UNWIND; flags += D9_SCHEMA_CPU_UNWIND) {
		struct seg s;
		struct d9_enc e;
		struct dec d;
		uint64_t counts[D9_EV_KNOWN_MAX + 1] = { 0 };
		uint32_t how = D9_UNWIND_DWARF | D9_UNWIND_TRUNCATED | D9_UNWIND_FP_REJECTED;

		seg_std(&s, 4096, flags);
		seg_enc_begin(&s, &e, 1, 1, 0, 0, (uint8_t)flags, 4096);
		uint8_t *before = e.p;
		T_EQ(d9_enc_cpu_sample_unwind(&e, 3, 5, D9_CPU_ON, 7, how), 0);
		/* head(1) + coroutine(1) + source(1) + stack(1), + unwind(1) with the flag */
		T_EQ(e.p - before, flags ? 5 : 4);
		T_EQ(d9_enc_cpu_sample(&e, 4, 5, D9_CPU_OFF, 8), 0);
		size_t at = seg_len(&s);
		seg_enc_end(&s, &e);
		d9_chunk_count_types(s.buf + at, flags, counts);
		T_EQU(counts[D9_EV_CPU_SAMPLE], 2);
		T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
		expect_clean(&d);
		T_EQ(d.nev, 2);
		T_EQU(d.ev[0].ev.f[D9_F_CPU_STACK], 7);
		T_EQU(d.ev[0].ev.f[D9_F_CPU_UNWIND], flags ? how : 0);
		T_EQU(d.ev[1].ev.f[D9_F_CPU_SOURCE], D9_CPU_OFF);
		T_EQU(d.ev[1].ev.f[D9_F_CPU_UNWIND], D9_UNWIND_NONE);
		dec_free(&d);
		seg_free(&s);
	}
	T_ASSERT(!strcmp(d9_unwinder_name(D9_UNWIND_FP | D9_UNWIND_TRUNCATED), "fp"));
	T_ASSERT(!strcmp(d9_unwinder_name(D9_UNWIND_DWARF), "dwarf"));
	T_ASSERT(!strcmp(d9_unwinder_name(7), "unknown"));
}

/* The encoder counts each built-in type as it writes (the writer's trailer counts, without
 * decoding the chunk again): the same counts as d9_chunk_count_types; SchedDelay (14) is not
 * among them. */
TEST(enc_counts_types)
{
	unsigned flags = D9_SCHEMA_CPU_UNWIND | D9_SCHEMA_CPU_WEIGHT | D9_SCHEMA_SCHED_DELAY |
		D9_SCHEMA_UNPARK_INTERVAL;
	struct seg s;
	struct d9_enc e;
	uint64_t counts[D9_EV_KNOWN_MAX + 1] = { 0 };

	seg_std(&s, 4096, flags);
	seg_enc_begin(&s, &e, 1, 1, 0, 0, (uint8_t)flags, 4096);
	T_EQ(d9_enc_poll_start(&e, 1, 5, 0), 0);
	T_EQ(d9_enc_poll_end(&e, 2, 5), 0);
	T_EQ(d9_enc_poll_start(&e, 3, 6, 0), 0);
	T_EQ(d9_enc_cpu_sample_w(&e, 4, 6, D9_CPU_OFF, 1, D9_UNWIND_DWARF, 1000), 0);
	T_EQ(d9_enc_sched_delay(&e, 5, 6, 1, D9_FD_SOCKET, 2000000, 1000), 0);
	T_EQ(d9_enc_dropped(&e, 6, 3, D9_DROP_SAMPLES_LOST), 0);
	uint32_t got[D9_EV_KNOWN_MAX + 1];
	memcpy(got, e.types, sizeof(got));
	size_t at = seg_len(&s);
	seg_enc_end(&s, &e);
	d9_chunk_count_types(s.buf + at, flags, counts);
	for (int t = 0; t <= D9_EV_KNOWN_MAX; t++)
		if (got[t] != counts[t])
			T_FAIL("type %d: the encoder counted %u, the chunk holds %" PRIu64, t, got[t],
				counts[t]);
	T_EQU(got[D9_EV_POLL_START], 2);
	T_EQU(got[D9_EV_CPU_SAMPLE], 1);
	seg_free(&s);
}

/* CpuSample's weight_ns+1 follows D9_SCHEMA_CPU_WEIGHT (with D9_SCHEMA_CPU_UNWIND): written as
 * the value plus one, 0 for unknown; decoded back, and unknown (never 0) without the flag. */
TEST(cpu_sample_weight_follows_flags)
{
	static const unsigned fl[3] = { 0, D9_SCHEMA_CPU_UNWIND,
		D9_SCHEMA_CPU_UNWIND | D9_SCHEMA_CPU_WEIGHT };

	for (int i = 0; i < 3; i++) {
		unsigned flags = fl[i];
		struct seg s;
		struct d9_enc e;
		struct dec d;
		uint64_t counts[D9_EV_KNOWN_MAX + 1] = { 0 };

		seg_std(&s, 4096, flags);
		seg_enc_begin(&s, &e, 1, 1, 0, 0, (uint8_t)flags, 4096);
		uint8_t *before = e.p;
		T_EQ(d9_enc_cpu_sample_w(&e, 3, 5, D9_CPU_OFF, 7, D9_UNWIND_DWARF, 300000000), 0);
		/* head, coroutine, source, stack (4), unwind (1), weight 300000001 (5 bytes) */
		T_EQ(e.p - before, i == 0 ? 4 : i == 1 ? 5 : 10);
		T_EQ(d9_enc_cpu_sample_w(&e, 4, 5, D9_CPU_OFF, 8, D9_UNWIND_FP, D9_UNKNOWN), 0);
		T_EQ(d9_enc_cpu_sample_w(&e, 5, 5, D9_CPU_ON, 8, D9_UNWIND_FP, 0), 0);
		size_t at = seg_len(&s);
		seg_enc_end(&s, &e);
		d9_chunk_count_types(s.buf + at, flags, counts);
		T_EQU(counts[D9_EV_CPU_SAMPLE], 3);
		T_EQ(dec_mem(&d, s.buf, seg_len(&s)), 0);
		expect_clean(&d);
		T_EQ(d.nev, 3);
		T_EQU(d.ev[0].ev.f[D9_F_CPU_WEIGHT_NS], i == 2 ? 300000000 : D9_UNKNOWN);
		T_EQU(d.ev[1].ev.f[D9_F_CPU_WEIGHT_NS], D9_UNKNOWN);
		T_EQU(d.ev[2].ev.f[D9_F_CPU_WEIGHT_NS], i == 2 ? 0 : D9_UNKNOWN);
		T_EQU(d.ev[2].ev.f[D9_F_CPU_STACK], 8);
		dec_free(&d);
		seg_free(&s);
	}
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
