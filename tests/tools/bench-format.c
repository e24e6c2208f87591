/* bench-format.c: throughput of the trace format code (format/format.c), run by scripts/bench.sh.
 * Measures (a) the hot-path encoder: the inline d9_enc_* calls writing a worker's poll/park/wake
 * stream into 64 KiB EVENTS chunks, with and without the CRC fill; (b) the decoder:
 * d9_reader_open_mem + d9_reader_next + d9_events_next over the same bytes. Best of several
 * repetitions, CLOCK_MONOTONIC. Prints a table and writes JSON (default build/bench/format.json).
 * A benchmark, not a test: it fails only when the decoder does not give back what was encoded. */
#include "d9-format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK_SIZE (64u << 10) /* the agent's buffer size */
#define SCRIPT_LEN (1u << 16) /* ops in the generated stream; replayed to reach the event count */

/* One event to encode: what an interposer would have at hand. */
struct op {
	uint8_t type; /* enum d9_event_type */
	uint8_t kind; /* wake kind / wait call / fd kind / cpu source */
	uint32_t dt; /* ticks (ns) since the previous event */
	uint64_t a, b; /* coroutine ids, location, counts: per type */
	int64_t c;
};

struct result {
	const char *name;
	double secs; /* best repetition */
	uint64_t events, bytes;
};

static uint64_t sink; /* keeps the decoder's work observable */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t rng_state = 0x9e3779b9u;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state % n;
}

/* A worker's loop as the agent sees it: park in epoll_wait, unpark with a few ready fds, wake
 * and poll each woken coroutine (now and then a blocking call, a spawn, a CPU sample). */
static struct op *make_script(void)
{
	struct op *s = calloc(SCRIPT_LEN, sizeof(*s));
	uint32_t n = 0;
	uint64_t next_co = 2000;

	if (!s)
		return NULL;
#define OP(...) \
	do { \
		if (n < SCRIPT_LEN) \
			s[n++] = (struct op){ __VA_ARGS__ }; \
	} while (0)
	while (n < SCRIPT_LEN) {
		uint32_t ready = 1 + rnd(6);
		uint64_t co[8];

		OP(.type = D9_EV_PARK, .kind = D9_CALL_EPOLL_WAIT, .dt = 300 + rnd(400),
			.c = rnd(4) ? 10000 : -1);
		OP(.type = D9_EV_UNPARK, .dt = 5000 + rnd(200000), .a = ready, .b = 800 + rnd(3000),
			.c = rnd(2000));
		OP(.type = D9_EV_QUEUE_SAMPLE, .dt = 50, .a = ready);
		for (uint32_t k = 0; k < ready; k++) {
			co[k] = 10 + rnd(1000);
			OP(.type = D9_EV_WAKE, .kind = rnd(10) ? D9_WAKE_FD : D9_WAKE_TIMER, .dt = 80 + rnd(100),
				.a = co[k], .c = 5 + rnd(1000));
		}
		for (uint32_t k = 0; k < ready; k++) {
			OP(.type = D9_EV_POLL_START, .dt = 150 + rnd(200), .a = co[k], .b = 1 + co[k] % 7);
			if (rnd(20) == 0)
				OP(.type = D9_EV_BLOCKING_CALL, .kind = D9_FD_FILE, .dt = 2000 + rnd(20000),
					.a = co[k], .b = 3, .c = 1500 + rnd(18000));
			if (rnd(50) == 0) {
				OP(.type = D9_EV_SPAWN, .dt = 300, .a = next_co, .b = co[k], .c = 2);
				OP(.type = D9_EV_WAKE, .kind = D9_WAKE_SPAWN, .dt = 40, .a = next_co, .b = co[k]);
				next_co++;
			}
			if (rnd(100) == 0)
				OP(.type = D9_EV_CPU_SAMPLE, .kind = D9_CPU_ON, .dt = 500, .a = co[k],
					.b = 1 + rnd(200));
			if (rnd(200) == 0)
				OP(.type = D9_EV_COROUTINE_EXIT, .dt = 100, .a = co[k]);
			OP(.type = D9_EV_POLL_END, .dt = 1000 + rnd(30000), .a = co[k]);
		}
	}
#undef OP
	return s;
}

static int encode_one(struct d9_enc *e, const struct op *o, uint64_t t)
{
	switch (o->type) {
	case D9_EV_PARK: return d9_enc_park(e, t, o->kind, o->c);
	case D9_EV_UNPARK: return d9_enc_unpark(e, t, (int64_t)o->a, o->b, (uint64_t)o->c);
	case D9_EV_QUEUE_SAMPLE: return d9_enc_queue_sample(e, t, o->a);
	case D9_EV_WAKE: return d9_enc_wake(e, t, o->a, o->b, o->kind, o->c);
	case D9_EV_POLL_START: return d9_enc_poll_start(e, t, o->a, o->b);
	case D9_EV_POLL_END: return d9_enc_poll_end(e, t, o->a);
	case D9_EV_BLOCKING_CALL:
		return d9_enc_blocking_call(e, t, o->a, o->b, o->kind, (uint64_t)o->c, 0);
	case D9_EV_SPAWN: return d9_enc_spawn(e, t, o->a, o->b, (uint64_t)o->c);
	case D9_EV_CPU_SAMPLE: return d9_enc_cpu_sample(e, t, o->a, o->kind, o->b);
	case D9_EV_COROUTINE_EXIT: return d9_enc_coroutine_exit(e, t, o->a);
	}
	return 0;
}

/* Encodes `events` events of the script as EVENTS chunks at out[0..); returns the bytes used.
 * Each chunk starts where the previous one ended, as the writer lays them out in a segment. */
static size_t encode(uint8_t *out, size_t cap, const struct op *script, uint64_t events,
	int fill_crc)
{
	struct d9_enc e;
	size_t used = 0;
	uint64_t t = 1000000000;

	if (d9_enc_begin(&e, out, CHUNK_SIZE, 4242, 1, t, 0, D9_SCHEMA_UNPARK_STATS))
		return 0;
	for (uint64_t i = 0; i < events; i++) {
		const struct op *o = &script[i & (SCRIPT_LEN - 1)];
		t += o->dt;
		if (encode_one(&e, o, t) != 0) {
			used += d9_enc_end(&e, fill_crc);
			if (cap - used < CHUNK_SIZE ||
				d9_enc_begin(&e, out + used, CHUNK_SIZE, 4242, 1, t, 0, D9_SCHEMA_UNPARK_STATS))
				return 0;
			if (encode_one(&e, o, t) != 0)
				return 0;
		}
	}
	used += d9_enc_end(&e, fill_crc);
	return used;
}

/* Decodes a segment; returns the events seen, or 0 on any problem. */
static uint64_t decode(const uint8_t *seg, size_t len)
{
	struct d9_reader *r;
	struct d9_chunk c;
	struct d9_event ev;
	uint64_t n = 0, acc = 0;

	if (d9_reader_open_mem(&r, seg, len))
		return 0;
	while (d9_reader_next(r, &c) == 1) {
		struct d9_events_iter it;
		if (c.type != D9_CHUNK_EVENTS)
			continue;
		d9_events_init(&it, r, &c);
		while (d9_events_next(&it, &ev) == 1) {
			acc += ev.time ^ ev.f[0];
			n++;
		}
	}
	const struct d9_reader_stats *st = d9_reader_stats(r);
	if (st->corrupt_chunks || st->bad_events || st->truncated)
		n = 0;
	d9_reader_close(r);
	sink += acc;
	return n;
}

/* Prefix, header and schema, as a writer starts a segment. Returns bytes written or 0. */
static size_t segment_head(uint8_t *buf, size_t cap)
{
	struct d9_header h;
	struct d9_wbuf w;

	memset(&h, 0, sizeof(h));
	h.pid = 4242;
	h.ticks_per_sec = 1000000000u;
	h.anchor_ticks = h.anchor_mono_ns = 1000000000;
	h.anchor_realtime_ns = 1700000000000000000ull;
	h.writer = "bench-format";
	h.process = "bench";
	d9_wbuf_init(&w, buf, cap);
	if (d9_prefix_encode(buf, cap) != D9_PREFIX_LEN)
		return 0;
	w.p += D9_PREFIX_LEN;
	if (d9_header_write(&w, &h) || d9_schema_write(&w, D9_SCHEMA_UNPARK_STATS))
		return 0;
	return (size_t)(w.p - w.start);
}

static void print_row(const struct result *r)
{
	printf("%-34s %10.2f %9.1f %8.2f %9.1f\n", r->name, (double)r->events / r->secs / 1e6,
		(double)r->bytes / r->secs / 1e6, r->secs * 1e9 / (double)r->events, r->secs * 1e3);
}

static void json_row(FILE *f, const struct result *r, const char *key, int last)
{
	fprintf(f, "    \"%s\": {\"events_per_s\": %.0f, \"mb_per_s\": %.1f, \"ns_per_event\": %.3f, "
		"\"best_ms\": %.3f, \"events\": %llu, \"bytes\": %llu}%s\n", key,
		(double)r->events / r->secs, (double)r->bytes / r->secs / 1e6,
		r->secs * 1e9 / (double)r->events, r->secs * 1e3, (unsigned long long)r->events,
		(unsigned long long)r->bytes, last ? "" : ",");
}

static void cpu_model(char *out, size_t n)
{
	char line[256];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(out, n, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':');
		if (strncmp(line, "model name", 10) == 0 && p) {
			p += 1 + (p[1] == ' ');
			p[strcspn(p, "\n")] = 0;
			snprintf(out, n, "%s", p);
			break;
		}
	}
	fclose(f);
}

static int write_json(const char *path, int quick, int reps, const struct result *res, int nres,
	const char *const *keys, size_t seg_len)
{
	char cpu[128], tmp[4096];
	FILE *f;

	/* create the parent directory (one level, build/bench) if needed */
	snprintf(tmp, sizeof(tmp), "%s", path);
	char *slash = strrchr(tmp, '/');
	if (slash) {
		*slash = 0;
		if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
			return -errno;
	}
	f = fopen(path, "w");
	if (!f)
		return -errno;
	cpu_model(cpu, sizeof(cpu));
	for (char *p = cpu; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = ' ';
	fprintf(f, "{\n  \"bench\": \"format\",\n  \"schema_version\": 1,\n  \"quick\": %s,\n",
		quick ? "true" : "false");
	fprintf(f, "  \"reps\": %d,\n  \"chunk_bytes\": %u,\n  \"events\": %llu,\n", reps, CHUNK_SIZE,
		(unsigned long long)res[0].events);
	fprintf(f, "  \"segment_bytes\": %zu,\n  \"bytes_per_event\": %.3f,\n", seg_len,
		(double)res[0].bytes / (double)res[0].events);
	fprintf(f, "  \"cpu\": \"%s\",\n  \"ncpu\": %ld,\n  \"compiler\": \"%s\",\n", cpu,
		sysconf(_SC_NPROCESSORS_ONLN), __VERSION__);
	fprintf(f, "  \"results\": {\n");
	for (int i = 0; i < nres; i++)
		json_row(f, &res[i], keys[i], i == nres - 1);
	fprintf(f, "  }\n}\n");
	return fclose(f) == 0 ? 0 : -errno;
}

int main(int argc, char **argv)
{
	const char *json = "build/bench/format.json";
	int quick = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			quick = 1;
		} else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
			json = argv[++i];
		} else {
			fprintf(stderr, "usage: bench-format [--quick] [--json PATH]\n");
			return 2;
		}
	}
	const uint64_t events = quick ? 1000000 : 4000000;
	const int reps = quick ? 5 : 9;
	/* worst case ~56 bytes an event; real streams take ~5 */
	const size_t cap = (size_t)events * 16 + 64 * CHUNK_SIZE;
	struct op *script = make_script();
	uint8_t *seg = malloc(cap);

	if (!script || !seg) {
		fprintf(stderr, "bench-format: out of memory\n");
		return 1;
	}
	size_t head = segment_head(seg, cap);
	if (!head) {
		fprintf(stderr, "bench-format: segment head does not fit\n");
		return 1;
	}
	memset(seg + head, 0, cap - head); /* fault the pages in before timing */

	struct result res[4] = {
		{ .name = "encode, CRC filled" },
		{ .name = "encode, no CRC (agent's hot path)" },
		{ .name = "crc32 of the chunks alone" },
		{ .name = "decode (open_mem+next+events)" },
	};
	static const char *const keys[4] = { "encode", "encode_no_crc", "crc32", "decode" };
	size_t body = 0;
	for (int i = 0; i < 4; i++)
		res[i].secs = 1e9;

	for (int rep = 0; rep <= reps; rep++) { /* rep 0 warms up and is not counted */
		double t0 = now();
		size_t b = encode(seg + head, cap - head, script, events, 0);
		double t1 = now();
		size_t b2 = encode(seg + head, cap - head, script, events, 1);
		double t2 = now();
		if (!b || b != b2) {
			fprintf(stderr, "bench-format: encoding failed (buffer too small?)\n");
			return 1;
		}
		body = b;
		uLong crc = 0;
		double t3 = now();
		for (size_t off = 0; off < b;) {
			uint32_t len;
			memcpy(&len, seg + head + off + 4, 4);
			crc = crc32(crc, seg + head + off, D9_CHUNK_HDR_LEN + len);
			off += D9_CHUNK_OVERHEAD + len;
		}
		double t4 = now();
		sink += crc;
		uint64_t n = decode(seg, head + b);
		double t5 = now();
		if (n != events) {
			fprintf(stderr, "bench-format: decoded %llu events of %llu encoded\n",
				(unsigned long long)n, (unsigned long long)events);
			return 1;
		}
		if (rep == 0)
			continue;
		double secs[4] = { t2 - t1, t1 - t0, t4 - t3, t5 - t4 };
		for (int i = 0; i < 4; i++)
			if (secs[i] < res[i].secs)
				res[i].secs = secs[i];
	}
	for (int i = 0; i < 4; i++) {
		res[i].events = events;
		res[i].bytes = i == 3 ? head + body : body;
	}

	printf("d9 format benchmark: %llu events (a worker's poll/park/wake stream), %u-byte chunks,"
		" best of %d%s\n", (unsigned long long)events, CHUNK_SIZE, reps, quick ? " (quick)" : "");
	printf("encoded: %zu bytes, %.2f bytes/event\n\n", head + body,
		(double)body / (double)events);
	printf("%-34s %10s %9s %8s %9s\n", "", "Mevents/s", "MB/s", "ns/event", "best ms");
	for (int i = 0; i < 4; i++)
		print_row(&res[i]);
	int err = write_json(json, quick, reps, res, 4, keys, head + body);
	if (err) {
		fprintf(stderr, "bench-format: %s: %s\n", json, strerror(-err));
		return 1;
	}
	printf("\njson: %s\n", json);
	return sink == 42 ? 3 : 0; /* never: only makes the sink observable */
}
