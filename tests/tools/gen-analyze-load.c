/* gen-analyze-load.c: writes a large synthetic trace for measuring `d9-analyze summary` speed
 * and memory: one State Threads worker serving REQUESTS requests on CONNS connections (each
 * request: fd wake, a poll of 5-60 us, a park), a spawn and an exit per connection, a queue
 * sample every 100 requests, rotated into segments of about 64 MiB of events.
 * usage: gen-analyze-load DIR REQUESTS [CONNS]. Deterministic (fixed-seed PRNG). */
#define GEN_TOOL "gen-analyze-load"
#include "gen-common.h"

#define SEG_CAP (80u << 20)
#define CHUNK 65536

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct seg {
	uint8_t *buf;
	struct d9_wbuf w;
	struct d9_enc e;
	int open;
	uint32_t seq;
};

static void seg_begin(struct seg *s)
{
	struct d9_header h;

	d9_wbuf_init(&s->w, s->buf, SEG_CAP);
	s->w.p += d9_prefix_encode(s->w.p, SEG_CAP);
	gen_header(&h, 4242);
	h.segment_seq = s->seq;
	h.time_shift = 7;
	d9_header_write(&s->w, &h);
	d9_schema_write(&s->w, 0);
	uint8_t *c = d9_chunk_open(&s->w, D9_CHUNK_DEFS);
	d9_def_string(&s->w, 1, "serve_conn", 10);
	d9_def_location(&s->w, 1, 0x401000, 0x402000, 0, 1);
	d9_def_thread(&s->w, 4242, 1, 1, D9_ROLE_WORKER);
	d9_chunk_close(&s->w, c);
	s->open = 0;
}

static void seg_end(struct seg *s, const char *dir)
{
	char path[4096];

	struct d9_trailer tr;

	if (s->open)
		s->w.p += d9_enc_end(&s->e, 1);
	/* sealed, as d9's writer leaves a segment (a trailer-less one reads as truncated) */
	memset(&tr, 0, sizeof(tr));
	if (d9_trailer_write(&s->w, &tr)) {
		fprintf(stderr, "gen-analyze-load: trailer does not fit\n");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/trace.4242.%06u.bin", dir, s->seq);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(s->buf, 1, (size_t)(s->w.p - s->buf), f) != (size_t)(s->w.p - s->buf)) {
		perror(path);
		exit(1);
	}
	fclose(f);
	s->seq++;
}

/* Room for one more event: a new chunk, or a new segment past 64 MiB. */
static struct d9_enc *room(struct seg *s, const char *dir, uint64_t t)
{
	if (s->open && d9_enc_room(&s->e))
		return &s->e;
	if (s->open) {
		s->w.p += d9_enc_end(&s->e, 1);
		s->open = 0;
	}
	if ((size_t)(s->w.p - s->buf) > (64u << 20)) {
		seg_end(s, dir);
		seg_begin(s);
	}
	d9_enc_begin(&s->e, s->w.p, CHUNK, 4242, 1, t, 7, 0);
	s->open = 1;
	return &s->e;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: gen-analyze-load DIR REQUESTS [CONNS]\n");
		return 2;
	}
	const char *dir = argv[1];
	uint64_t n = strtoull(argv[2], NULL, 10), conns = argc > 3 ? strtoull(argv[3], NULL, 10) : 64;
	struct seg s;
	uint64_t t = 1000000000, events = 0;

	memset(&s, 0, sizeof(s));
	s.buf = malloc(SEG_CAP);
	if (!s.buf || !conns)
		return 1;
	seg_begin(&s);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t co = 10 + (i % conns) + (i / (conns * 50)) * conns; /* new connections over time */
		if (i % (conns * 50) < conns) {
			d9_enc_spawn(room(&s, dir, t), t, co, 2, 1);
			d9_enc_wake(room(&s, dir, t), t, co, 2, D9_WAKE_SPAWN, 0);
			events += 2;
		}
		d9_enc_unpark(room(&s, dir, t), t, 1, 0, 0);
		d9_enc_wake(room(&s, dir, t), t, co, 0, D9_WAKE_FD, (int64_t)(co % 1000));
		t += 300 + next_rand() % 2000;
		d9_enc_poll_start(room(&s, dir, t), t, co, 1);
		t += 5000 + next_rand() % 55000;
		d9_enc_poll_end(room(&s, dir, t), t, co);
		events += 4;
		if (i % (conns * 50) >= conns * 49) {
			d9_enc_coroutine_exit(room(&s, dir, t), t, co);
			events++;
		}
		if (i % 100 == 0) {
			d9_enc_queue_sample(room(&s, dir, t), t, next_rand() % 4);
			events++;
		}
		d9_enc_park(room(&s, dir, t), t, D9_CALL_EPOLL_WAIT, -1);
		events++;
		t += 1000 + next_rand() % 20000;
	}
	seg_end(&s, dir);
	free(s.buf);
	printf("%llu events in %u segment(s)\n", (unsigned long long)events, s.seq);
	return 0;
}
