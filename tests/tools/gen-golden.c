/* gen-golden.c: writes the golden sample segments of tests/golden/ with the real encoder:
 * basic.bin (sealed; every chunk, definition and event type, two workers), truncated.bin,
 * corrupt-chunk.bin, unknown-types.bin and basic.bin.gz. Every byte is fixed (pids, times, host
 * names, no clock, no randomness), so regenerating yields identical files: test-golden.sh
 * checks that. tests/golden/README.md says what each file is for; make-golden.sh drives this.
 * Usage: gen-golden OUTDIR */
#include "d9-format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SEG_CAP (256u << 10)
#define BASE_TICKS 5000000000ull /* 5 s of uptime, a multiple of 64 */
#define AT(units) (BASE_TICKS + 64ull * (units))

struct seg {
	uint8_t buf[SEG_CAP];
	struct d9_wbuf w;
	int failed; /* sticky: some chunk did not fit */
	size_t events_off[8], events_end[8]; /* EVENTS chunks, in file order */
	int nevents;
	uint64_t nev, nchunks, first_time, last_time;
	uint64_t type_counts[D9_EV_KNOWN_MAX + 1];
};

static void seg_init(struct seg *s)
{
	memset(s, 0, sizeof(*s));
	d9_wbuf_init(&s->w, s->buf, sizeof(s->buf));
	s->w.p += d9_prefix_encode(s->buf, sizeof(s->buf));
	s->first_time = UINT64_MAX;
}

static void check(struct seg *s, int err)
{
	if (err)
		s->failed = 1;
}

static const char golden_cmdline[] = "golden-srv\0-p\0" "8080"; /* + the final NUL */

static void put_header(struct seg *s, uint32_t seq)
{
	struct d9_header h = {
		.pid = 4242, .ppid = 1, .segment_seq = seq,
		.clock_source = D9_CLOCK_MONOTONIC, .time_shift = 6, .ticks_per_sec = 1000000000,
		.anchor_ticks = BASE_TICKS, .anchor_mono_ns = BASE_TICKS,
		.anchor_realtime_ns = 1700000000000000000ull,
		.start_realtime_ns = 1699999999999000000ull,
		.writer = "d9 golden", .process = "golden-srv",
		.cmdline = golden_cmdline, .cmdline_len = sizeof(golden_cmdline),
		.hostname = "golden.example", .boot_id = "00000000-0000-4000-8000-000000000001",
	};

	check(s, d9_header_write(&s->w, &h));
	s->nchunks++;
}

static void put_schema(struct seg *s, unsigned flags)
{
	check(s, d9_schema_write(&s->w, flags));
	s->nchunks++;
}

/* Definitions of every kind; ids as the events below use them. */
static void put_defs(struct seg *s)
{
	static const uint8_t build_id[20] = { 0x3e, 0x8f, 0x01, 0x5c, 0x9a, 0x77, 0x20, 0xd4, 0x6b,
		0x18, 0xe2, 0x45, 0xa9, 0x0c, 0x53, 0xf1, 0x86, 0x2d, 0xbb, 0x70 };
	static const uint8_t custom_body[] = { 1, 9, 'u', 4, 'c', 'o', 'd', 'e', 'b', 4, 'b', 'o',
		'd', 'y' }; /* id 1, name String 9, then its field description */
	static const char odd[] = "caf\xc3\xa9 \"q\" \\ tab\t nl\n nul\0end \xff";
	uint64_t frames[D9_STACK_MAX_FRAMES];
	static const uint64_t short_stack[3] = { 0x401234, 0x401100, 0x401400 };
	uint8_t *c = d9_chunk_open(&s->w, D9_CHUNK_DEFS);

	for (int i = 0; i < D9_STACK_MAX_FRAMES; i++)
		frames[i] = 0x7f1c2a400000ull + 0x10000ull - (uint64_t)i * 0x1f0 - (uint64_t)(i % 5) * 8;
	d9_def_string(&s->w, 1, "main", 4);
	d9_def_string(&s->w, 2, "worker-1", 8);
	d9_def_string(&s->w, 3, "worker-2", 8);
	d9_def_string(&s->w, 4, "read", 4);
	d9_def_string(&s->w, 5, "/usr/lib/x86_64-linux-gnu/libst.so.1.9", 38);
	d9_def_string(&s->w, 6, "server.c", 8);
	d9_def_string(&s->w, 7, "handle_conn", 11);
	d9_def_string(&s->w, 8, odd, sizeof(odd) - 1);
	d9_def_string(&s->w, 9, "golden.custom", 13);
	d9_def_string(&s->w, 10, "d9-writer", 9);
	d9_def_location(&s->w, 1, 0x401000, 0x401234, 0, 1);
	d9_def_location(&s->w, 2, 0x7f1c2a4100a0ull, 0x7f1c2a41019cull, 1, 7);
	d9_def_stack(&s->w, 1, short_stack, 3);
	d9_def_stack(&s->w, 2, frames, D9_STACK_MAX_FRAMES);
	d9_def_module(&s->w, 1, 5, 0x7f1c2a400000ull, 0x7f1c2a421000ull, 0x2000, build_id,
		sizeof(build_id));
	d9_def_symbol(&s->w, 0x7f1c2a410000ull, 0x1a0, 7, 6, 214, 0);
	d9_def_symbol(&s->w, 0x7f1c2a410040ull, 0x30, 4, 6, 88, 1);
	d9_def_thread(&s->w, 4243, 2, 1, D9_ROLE_WORKER);
	d9_def_thread(&s->w, 4244, 3, 2, D9_ROLE_WORKER);
	d9_def_thread(&s->w, 4250, 10, 0, D9_ROLE_AGENT);
	d9_def_clock_sync(&s->w, BASE_TICKS + 1000000, BASE_TICKS + 1000000,
		1700000000001000000ull);
	d9_def_coroutine(&s->w, 1, 0, 1, D9_COROUTINE_SCHEDULER);
	d9_def_coroutine(&s->w, 2, 1, 1, 0);
	d9_def_coroutine(&s->w, 1000, 0, 1, D9_COROUTINE_SCHEDULER);
	d9_def_raw(&s->w, D9_DEF_CUSTOM_SCHEMA, custom_body, sizeof(custom_body));
	check(s, d9_chunk_close(&s->w, c));
	s->nchunks++;
}

static void count(struct seg *s, struct d9_enc *e, uint32_t type, uint64_t ticks)
{
	uint64_t t = ticks >> e->shift;

	if (t < e->last) /* a backwards step keeps the previous time */
		t = e->last;
	s->nev++;
	if (type <= D9_EV_KNOWN_MAX)
		s->type_counts[type]++;
	if (t < s->first_time)
		s->first_time = t;
	if (t > s->last_time)
		s->last_time = t;
}

#define EMIT(s, e, type, ticks, call)                                             \
	do {                                                                      \
		count(s, e, type, ticks);                                         \
		check(s, call);                                                   \
	} while (0)

static void events_begin(struct seg *s, struct d9_enc *e, uint32_t tid, uint32_t worker,
	uint64_t base, unsigned flags)
{
	s->events_off[s->nevents] = (size_t)(s->w.p - s->buf);
	check(s, d9_enc_begin(e, s->w.p, (size_t)(s->w.end - s->w.p), tid, worker, base, 6,
		(uint8_t)flags));
}

static void events_end(struct seg *s, struct d9_enc *e)
{
	s->w.p += d9_enc_end(e, 1);
	s->events_end[s->nevents++] = (size_t)(s->w.p - s->buf);
	s->nchunks++;
}

/* Worker 1 (tid 4243): every event type, with the UNPARK_STATS schema. */
static void put_worker1(struct seg *s, struct d9_enc *e)
{
	/* CustomEvents of CustomSchema 1 (code u, body b): code 200, body "hello"; code 0, body 44 39 */
	static const uint8_t custom[] = { 1, 8, 0xc8, 0x01, 5, 'h', 'e', 'l', 'l', 'o' };
	static const uint8_t custom2[] = { 1, 4, 0x00, 0x02, 0x44, 0x39 };

	events_begin(s, e, 4243, 1, BASE_TICKS, D9_SCHEMA_UNPARK_STATS);
	EMIT(s, e, D9_EV_SPAWN, AT(1), d9_enc_spawn(e, AT(1), 2, 1, 1));
	EMIT(s, e, D9_EV_POLL_START, AT(4), d9_enc_poll_start(e, AT(4), 2, 1));
	EMIT(s, e, D9_EV_WAKE, AT(7), d9_enc_wake(e, AT(7), 2, 0, D9_WAKE_FD, 7));
	EMIT(s, e, D9_EV_BLOCKING_CALL, AT(40), d9_enc_blocking_call(e, AT(40), 2, 4, D9_FD_FILE,
		1850000, 1));
	EMIT(s, e, D9_EV_CPU_SAMPLE, AT(41), d9_enc_cpu_sample(e, AT(41), 2, D9_CPU_ON, 2));
	EMIT(s, e, D9_EV_POLL_END, AT(312), d9_enc_poll_end(e, AT(312), 2));
	EMIT(s, e, D9_EV_QUEUE_SAMPLE, AT(313), d9_enc_queue_sample(e, AT(313), 0));
	EMIT(s, e, D9_EV_PARK, AT(314), d9_enc_park(e, AT(314), D9_CALL_SELECT, -1));
	EMIT(s, e, D9_EV_UNPARK, AT(1406), d9_enc_unpark(e, AT(1406), 1, 12000, 3400));
	EMIT(s, e, D9_EV_WAKE, AT(1407), d9_enc_wake(e, AT(1407), 2, 0, D9_WAKE_TIMER, -3));
	EMIT(s, e, D9_EV_POLL_START, AT(1408), d9_enc_poll_start(e, AT(1408), 2, 1));
	EMIT(s, e, D9_EV_WAKE, AT(1409), d9_enc_wake(e, AT(1409), 1000, 2, D9_WAKE_COND,
		0x55d0c0a01e80ll));
	EMIT(s, e, D9_EV_CUSTOM, AT(1410), d9_enc_raw(e, AT(1410), D9_EV_CUSTOM, custom,
		sizeof(custom)));
	EMIT(s, e, D9_EV_COROUTINE_EXIT, AT(1500), d9_enc_coroutine_exit(e, AT(1500), 2));
	EMIT(s, e, D9_EV_POLL_END, AT(1501), d9_enc_poll_end(e, AT(1501), 2));
	EMIT(s, e, D9_EV_CPU_SAMPLE, AT(1502), d9_enc_cpu_sample(e, AT(1502), 0, D9_CPU_OFF, 1));
	EMIT(s, e, D9_EV_DROPPED, AT(1600), d9_enc_dropped(e, AT(1600), 17, D9_DROP_BUFFERS_FULL));
	EMIT(s, e, D9_EV_CUSTOM, AT(1601), d9_enc_raw(e, AT(1601), D9_EV_CUSTOM, custom2,
		sizeof(custom2)));
	EMIT(s, e, D9_EV_PARK, AT(1602), d9_enc_park(e, AT(1602), D9_CALL_POLL, 2500));
	events_end(s, e);
}

/* Worker 2 (tid 4244): its own coroutines, large ids, a backwards clock step. */
static void put_worker2(struct seg *s, struct d9_enc *e)
{
	const uint64_t big = (1ull << 40) + 3;

	events_begin(s, e, 4244, 2, AT(100), D9_SCHEMA_UNPARK_STATS);
	EMIT(s, e, D9_EV_UNPARK, AT(100), d9_enc_unpark(e, AT(100), 2, 800, 0));
	EMIT(s, e, D9_EV_WAKE, AT(101), d9_enc_wake(e, AT(101), big, 0, D9_WAKE_FD, 1023));
	EMIT(s, e, D9_EV_WAKE, AT(102), d9_enc_wake(e, AT(102), big + 5, 0, D9_WAKE_FD, 9));
	EMIT(s, e, D9_EV_POLL_START, AT(103), d9_enc_poll_start(e, AT(103), big, 2));
	EMIT(s, e, D9_EV_SPAWN, AT(110), d9_enc_spawn(e, AT(110), big + 6, big, 2));
	EMIT(s, e, D9_EV_WAKE, AT(111), d9_enc_wake(e, AT(111), big + 6, big, D9_WAKE_SPAWN, 0));
	EMIT(s, e, D9_EV_POLL_END, AT(109), d9_enc_poll_end(e, AT(109), big)); /* clock went back */
	EMIT(s, e, D9_EV_POLL_START, AT(112), d9_enc_poll_start(e, AT(112), big + 5, 2));
	EMIT(s, e, D9_EV_WAKE, AT(113), d9_enc_wake(e, AT(113), big, big + 5, D9_WAKE_MUTEX,
		0x7f1c2a4a2040ll));
	EMIT(s, e, D9_EV_POLL_END, AT(900), d9_enc_poll_end(e, AT(900), big + 5));
	EMIT(s, e, D9_EV_WAKE, AT(901), d9_enc_wake(e, AT(901), big, 0, D9_WAKE_JOIN, 0));
	EMIT(s, e, D9_EV_WAKE, AT(902), d9_enc_wake(e, AT(902), big + 6, big, D9_WAKE_INTERRUPT, 0));
	EMIT(s, e, D9_EV_WAKE, AT(903), d9_enc_wake(e, AT(903), big + 6, 0, D9_WAKE_OTHER, 0));
	EMIT(s, e, D9_EV_BLOCKING_CALL, AT(950), d9_enc_blocking_call(e, AT(950), 0, 4,
		D9_FD_SOCKET, 0, 0));
	EMIT(s, e, D9_EV_DROPPED, AT(951), d9_enc_dropped(e, AT(951), 3, D9_DROP_SAMPLES_LOST));
	EMIT(s, e, D9_EV_PARK, AT(952), d9_enc_park(e, AT(952), D9_CALL_EPOLL_WAIT, 4000));
	EMIT(s, e, D9_EV_UNPARK, AT(20000), d9_enc_unpark(e, AT(20000), 0, 0, 0));
	events_end(s, e);
}

/* Worker 1 again: a longer chunk (the one truncated.bin is cut inside). */
static void put_worker1_more(struct seg *s, struct d9_enc *e)
{
	events_begin(s, e, 4243, 1, AT(1602), D9_SCHEMA_UNPARK_STATS);
	for (uint64_t i = 0; i < 12; i++) {
		uint64_t t = 3000 + i * 50, co = 3 + i;
		EMIT(s, e, D9_EV_UNPARK, AT(t), d9_enc_unpark(e, AT(t), (int64_t)(i % 3) + 1,
			1000 * i, 10 * i));
		EMIT(s, e, D9_EV_WAKE, AT(t + 1), d9_enc_wake(e, AT(t + 1), co, 0, D9_WAKE_FD,
			(int64_t)(10 + i)));
		EMIT(s, e, D9_EV_POLL_START, AT(t + 2), d9_enc_poll_start(e, AT(t + 2), co, 1));
		EMIT(s, e, D9_EV_POLL_END, AT(t + 9 + i * 3), d9_enc_poll_end(e, AT(t + 9 + i * 3), co));
		EMIT(s, e, D9_EV_PARK, AT(t + 10 + i * 3), d9_enc_park(e, AT(t + 10 + i * 3),
			D9_CALL_SELECT, i % 2 ? -1 : 3000));
	}
	events_end(s, e);
}

static void put_trailer(struct seg *s, uint64_t dropped_events, uint64_t dropped_samples,
	uint32_t flags)
{
	struct d9_trailer t = {
		.events = s->nev, .chunks = s->nchunks + 1, .first_time = s->first_time,
		.last_time = s->last_time, .dropped_events = dropped_events,
		.dropped_samples = dropped_samples, .flags = flags,
	};

	memcpy(t.type_counts, s->type_counts, sizeof(t.type_counts));
	check(s, d9_trailer_write(&s->w, &t));
	s->nchunks++;
}

static void build_basic(struct seg *s)
{
	struct d9_enc e;

	seg_init(s);
	put_header(s, 0);
	put_schema(s, D9_SCHEMA_UNPARK_STATS);
	put_defs(s);
	put_worker1(s, &e);
	put_worker2(s, &e);
	put_worker1_more(s, &e);
	put_trailer(s, 17, 3, 0); /* as the Dropped events say */
}

/* compact-waits.bin: format 1.3's layout of Park and Unpark, as the agent writes it: timeouts as
 * differences from the chunk's previous Park's (repeated, changed, and from -1 again in a second
 * chunk), Unparks with and without an UnparkStats, and one UnparkStats that follows no Unpark
 * (an event of code 20 of its own). */
static void build_compact(struct seg *s)
{
	const unsigned flags = D9_SCHEMA_COMPACT_WAITS | D9_SCHEMA_SCHED_DELAY;
	static const uint8_t stray[] = { 0x05, 0x00 }; /* cpu_ns+1 5, sched_wait_ns+1 unknown */
	struct d9_enc e;

	seg_init(s);
	put_header(s, 0);
	put_schema(s, flags);
	put_defs(s);
	events_begin(s, &e, 4243, 1, BASE_TICKS, flags);
	EMIT(s, &e, D9_EV_PARK, AT(1), d9_enc_park(&e, AT(1), D9_CALL_EPOLL_WAIT, -1));
	EMIT(s, &e, D9_EV_UNPARK, AT(90), d9_enc_unpark(&e, AT(90), 1, D9_UNKNOWN, D9_UNKNOWN));
	EMIT(s, &e, D9_EV_PARK, AT(95), d9_enc_park(&e, AT(95), D9_CALL_EPOLL_WAIT, 7494000));
	EMIT(s, &e, D9_EV_UNPARK, AT(200), d9_enc_unpark(&e, AT(200), 2, 250000, 1200));
	EMIT(s, &e, D9_EV_PARK, AT(204), d9_enc_park(&e, AT(204), D9_CALL_EPOLL_WAIT, 7494000));
	EMIT(s, &e, D9_EV_UNPARK, AT(300), d9_enc_unpark(&e, AT(300), 0, 0, D9_UNKNOWN));
	EMIT(s, &e, D9_EV_PARK, AT(301), d9_enc_park(&e, AT(301), D9_CALL_POLL, 6000));
	EMIT(s, &e, D9_EV_UNPARK, AT(400), d9_enc_unpark(&e, AT(400), -4, D9_UNKNOWN, 7));
	EMIT(s, &e, D9_EV_SCHED_DELAY, AT(410), d9_enc_sched_delay(&e, AT(410), 0, 4, D9_FD_SOCKET,
		2500000, 2400000));
	EMIT(s, &e, D9_EV_UNPARK_STATS, AT(410), d9_enc_raw(&e, AT(410), D9_EV_UNPARK_STATS, stray,
		sizeof(stray)));
	EMIT(s, &e, D9_EV_PARK, AT(420), d9_enc_park(&e, AT(420), D9_CALL_POLL, -1));
	events_end(s, &e);
	events_begin(s, &e, 4243, 1, AT(500), flags);
	EMIT(s, &e, D9_EV_UNPARK, AT(500), d9_enc_unpark(&e, AT(500), 1, D9_UNKNOWN, D9_UNKNOWN));
	EMIT(s, &e, D9_EV_PARK, AT(510), d9_enc_park(&e, AT(510), D9_CALL_EPOLL_WAIT, 7494000));
	events_end(s, &e);
	put_trailer(s, 0, 0, 0);
}

/* A schema entry written by hand (for a type d9 v1 does not know). */
static void schema_type(struct d9_wbuf *w, uint32_t code, const char *name, int nf,
	const char *encs, const char *const *names)
{
	d9_wbuf_u(w, code);
	d9_wbuf_bytes(w, name, strlen(name));
	d9_wbuf_u(w, (uint64_t)nf);
	for (int i = 0; i < nf; i++) {
		d9_wbuf_raw(w, &encs[i], 1);
		d9_wbuf_bytes(w, names[i], strlen(names[i]));
	}
}

/* What a newer writer could produce: a second SCHEMA chunk describing type 40 (LockWait), a
 * definition kind and a chunk type v1 does not know. Everything decodes, nothing is damage. */
static void build_unknown_types(struct seg *s)
{
	static const char *const lock_fields[] = { "coroutine", "lock", "wait_ns", "note" };
	struct d9_enc e;
	uint8_t f[32], *p;
	uint8_t *c;

	seg_init(s);
	put_header(s, 1);
	put_schema(s, 0);
	c = d9_chunk_open(&s->w, D9_CHUNK_SCHEMA);
	d9_wbuf_u(&s->w, 1);
	schema_type(&s->w, 40, "LockWait", 4, "cuib", lock_fields);
	check(s, d9_chunk_close(&s->w, c));
	s->nchunks++;

	c = d9_chunk_open(&s->w, D9_CHUNK_DEFS);
	d9_def_string(&s->w, 1, "main", 4);
	d9_def_raw(&s->w, 42, "\x01\x02\x03 future definition", 21);
	d9_def_thread(&s->w, 4243, 1, 1, D9_ROLE_WORKER);
	d9_def_raw(&s->w, 200, NULL, 0);
	d9_def_coroutine(&s->w, 5, 0, 0, 0);
	check(s, d9_chunk_close(&s->w, c));
	s->nchunks++;

	c = d9_chunk_open(&s->w, 0x42); /* an unknown chunk type, twice: reported once */
	d9_wbuf_raw(&s->w, "a chunk type from the future", 28);
	check(s, d9_chunk_close(&s->w, c));
	s->nchunks++;

	events_begin(s, &e, 4243, 1, BASE_TICKS, 0);
	EMIT(s, &e, D9_EV_UNPARK, AT(10), d9_enc_unpark(&e, AT(10), 1, 0, 0));
	EMIT(s, &e, D9_EV_POLL_START, AT(11), d9_enc_poll_start(&e, AT(11), 5, 0));
	p = d9_put_varint(f, 1); /* coroutine 5 again: the most recent one */
	p = d9_put_varint(p, 0x30);
	p = d9_put_varint(p, d9_zigzag(-250));
	p = d9_put_varint(p, 3);
	memcpy(p, "mtx", 3);
	p += 3;
	EMIT(s, &e, 40, AT(12), d9_enc_raw(&e, AT(12), 40, f, (size_t)(p - f)));
	p = d9_put_varint(f, d9_zigzag(7 - 5) + 5); /* coroutine 7: not among the last 4 */
	p = d9_put_varint(p, 0x31);
	p = d9_put_varint(p, d9_zigzag(123456));
	p = d9_put_varint(p, 0);
	EMIT(s, &e, 40, AT(400), d9_enc_raw(&e, AT(400), 40, f, (size_t)(p - f)));
	/* d9_enc_raw leaves the coroutine list to its caller */
	e.mru[1] = e.mru[0];
	e.mru[0] = 7;
	EMIT(s, &e, D9_EV_POLL_END, AT(401), d9_enc_poll_end(&e, AT(401), 5));
	EMIT(s, &e, D9_EV_PARK, AT(402), d9_enc_park(&e, AT(402), D9_CALL_SELECT, -1));
	events_end(s, &e);

	c = d9_chunk_open(&s->w, 0x42);
	check(s, d9_chunk_close(&s->w, c));
	s->nchunks++;
	put_trailer(s, 0, 0, D9_TRAILER_RECOVERED);
}

static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "gen-golden: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int write_gz(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	gzFile g;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	g = gzopen(path, "wb9"); /* zlib writes mtime 0 and no name: the bytes depend on zlib only */
	if (!g || gzwrite(g, p, (unsigned)n) != (int)n || gzclose(g) != Z_OK) {
		fprintf(stderr, "gen-golden: %s: cannot write gzip\n", path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct seg basic, unknown, compact;
	static uint8_t tmp[SEG_CAP];

	if (argc != 2) {
		fprintf(stderr, "usage: gen-golden OUTDIR\n");
		return 2;
	}
	build_basic(&basic);
	build_unknown_types(&unknown);
	build_compact(&compact);
	if (basic.failed || unknown.failed || compact.failed || basic.nevents != 3) {
		fprintf(stderr, "gen-golden: a chunk did not fit its buffer\n");
		return 1;
	}
	size_t len = (size_t)(basic.w.p - basic.buf);
	const char *dir = argv[1];
	int err = write_file(dir, "basic.bin", basic.buf, len);

	/* truncated.bin: cut in the middle of the last EVENTS chunk */
	size_t cut = basic.events_off[2] + (basic.events_end[2] - basic.events_off[2]) / 2;
	err |= write_file(dir, "truncated.bin", basic.buf, cut);

	/* corrupt-chunk.bin: one payload byte of worker 2's EVENTS chunk flipped, so its CRC fails */
	memcpy(tmp, basic.buf, len);
	tmp[basic.events_off[1] + D9_CHUNK_HDR_LEN + D9_EVENTS_HDR_LEN + 5] ^= 0x10;
	err |= write_file(dir, "corrupt-chunk.bin", tmp, len);

	err |= write_file(dir, "unknown-types.bin", unknown.buf, (size_t)(unknown.w.p - unknown.buf));
	err |= write_gz(dir, "basic.bin.gz", basic.buf, len);
	err |= write_file(dir, "compact-waits.bin", compact.buf,
		(size_t)(compact.w.p - compact.buf));
	return err ? 1 : 0;
}
