/* gen-analyze-cpu.c: writes the synthetic traces of tests/integration/test-analyze-cpu.sh:
 * CpuSample events (on- and off-CPU, known stacks of raw addresses, so frames are named
 * "0x<addr>") inside polls and loop turns of known lengths, so every CPU number of
 * `d9-analyze summary` is known in advance. Times are us after the anchor (one tick is one ns).
 * usage: gen-analyze-cpu DIR [SAMPLES]. Writes DIR/polls/ (pid 500, two workers), DIR/generic/
 * (pid 600: parks and loop turns, no poll) and, with SAMPLES, DIR/big/: one poll holding SAMPLES
 * samples over 4 stacks (and a QueueSample after every 1000th), then 100000 short polls with
 * one sample each (memory must not grow with samples). The expected numbers are written down
 * in the test script. */
#define GEN_TOOL "gen-analyze-cpu"
#include "gen-common.h"

#define B GEN_ANCHOR
#define US(x) (B + (uint64_t)(x) * 1000)

/* stacks, innermost frame first. S4 recurses: 0xe0 counts once per sample in total_samples. */
static const uint64_t S1[] = { 0xa1, 0xb0, 0xc0 }, S2[] = { 0xa2, 0xb0, 0xc0 },
	S3[] = { 0xd0, 0xc0 }, S4[] = { 0xe0, 0xe0, 0xe0, 0xc0 }, S5[] = { 0xf0 };
enum { NONE, ST1, ST2, ST3, ST4, ST5 }; /* stack ids; 0: no stack */

static void begin(struct gen *g, uint32_t pid, size_t cap)
{
	gen_begin(g, pid, cap);
	d9_def_stack(&g->w, ST1, S1, 3);
	d9_def_stack(&g->w, ST2, S2, 3);
	d9_def_stack(&g->w, ST3, S3, 2);
	d9_def_stack(&g->w, ST4, S4, 4);
	d9_def_stack(&g->w, ST5, S5, 1);
}

/* n samples of one stack at us, us + 1, ... */
static uint64_t samples(struct d9_enc *e, uint64_t us, int n, uint64_t co, uint32_t src,
	uint64_t stack)
{
	for (int i = 0; i < n; i++)
		if (d9_enc_cpu_sample(e, US(us + (uint64_t)i), co, src, stack))
			die("events chunk full");
	return us + (uint64_t)n;
}

/* pid 500. Worker 1 (tid 500):
 *   P1 "slow" [100, 400) us, coroutine 11: S1 on x5, S2 on x2, S5 off x3, S4 on x1, no stack on
 *      x1 (coroutine 0: no mismatch);
 *   P2 "slow" [500, 700), coroutine 12: S4 on x4, S3 on x3 (one names coroutine 99: a
 *      mismatch), S5 off x2;
 *   P3 "fast" [800, 810), coroutine 13: S1 on x1, one sample of unknown source 2 (left out);
 *   outside polls: S5 off x1, S3 on x1.
 * Worker 2 (tid 501): P4 "fast" [100, 150), coroutine 21: S5 off x2, then S2 on x2 (a tie: the
 *   on-CPU stack comes first), while worker 1 is in P1.
 * Totals: on 20 (S1 6, S2 4, S3 4, S4 5, none 1), off 8 (S5). */
static void write_polls(const char *dir)
{
	struct gen g;
	struct d9_enc *e;
	uint64_t t;

	begin(&g, 500, 1u << 20);
	str(&g, 1, "slow");
	str(&g, 2, "fast");
	str(&g, 3, "w1");
	str(&g, 4, "w2");
	d9_def_location(&g.w, 1, 0x1000, 0, 0, 1);
	d9_def_location(&g.w, 2, 0x2000, 0, 0, 2);
	d9_def_thread(&g.w, 500, 3, 1, D9_ROLE_WORKER);
	d9_def_thread(&g.w, 501, 4, 2, D9_ROLE_WORKER);

	e = events(&g, 500, 1);
	d9_enc_poll_start(e, US(100), 11, 1);
	t = samples(e, 110, 5, 11, D9_CPU_ON, ST1);
	t = samples(e, t + 10, 3, 11, D9_CPU_OFF, ST5);
	t = samples(e, t + 10, 2, 11, D9_CPU_ON, ST2);
	t = samples(e, t + 10, 1, 11, D9_CPU_ON, ST4);
	samples(e, t + 10, 1, 0, D9_CPU_ON, NONE);
	d9_enc_poll_end(e, US(400), 11);
	d9_enc_poll_start(e, US(500), 12, 1);
	t = samples(e, 510, 4, 12, D9_CPU_ON, ST4);
	t = samples(e, t + 10, 2, 12, D9_CPU_ON, ST3);
	t = samples(e, t, 1, 99, D9_CPU_ON, ST3);
	samples(e, t + 10, 2, 12, D9_CPU_OFF, ST5);
	d9_enc_poll_end(e, US(700), 12);
	events_end(&g);
	e = events(&g, 500, 1);
	d9_enc_poll_start(e, US(800), 13, 2);
	samples(e, 801, 1, 13, D9_CPU_ON, ST1);
	samples(e, 802, 1, 13, 2, ST2);
	d9_enc_poll_end(e, US(810), 13);
	samples(e, 900, 1, 0, D9_CPU_OFF, ST5);
	samples(e, 901, 1, 0, D9_CPU_ON, ST3);
	events_end(&g);

	e = events(&g, 501, 2);
	d9_enc_poll_start(e, US(100), 21, 2);
	samples(e, 110, 2, 21, D9_CPU_OFF, ST5);
	samples(e, 120, 2, 21, D9_CPU_ON, ST2);
	d9_enc_poll_end(e, US(150), 21);
	events_end(&g);
	write_out(&g, dir, "trace.500.000000.bin");
}

/* pid 600, worker 1 (tid 600), no poll: loop turns [100, 300) us with S1 on x2 and S5 off x1,
 * then parked [300, 400) with S5 off x1 (in no turn), then the turn [400, 500) with S3 on x1. */
static void write_generic(const char *dir)
{
	struct gen g;
	struct d9_enc *e;

	begin(&g, 600, 1u << 20);
	d9_def_thread(&g.w, 600, 0, 1, D9_ROLE_WORKER);
	e = events(&g, 600, 1);
	d9_enc_park(e, US(0), D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, US(100), 1, 0, 0);
	samples(e, 150, 2, 0, D9_CPU_ON, ST1);
	samples(e, 250, 1, 0, D9_CPU_OFF, ST5);
	d9_enc_park(e, US(300), D9_CALL_EPOLL_WAIT, -1);
	samples(e, 350, 1, 0, D9_CPU_OFF, ST5);
	d9_enc_unpark(e, US(400), 1, 0, 0);
	samples(e, 450, 1, 0, D9_CPU_ON, ST3);
	d9_enc_park(e, US(500), D9_CALL_EPOLL_WAIT, -1);
	events_end(&g);
	write_out(&g, dir, "trace.600.000000.bin");
}

/* pid 700, worker 1: poll "big" [0, n + 10) us with n samples, stacks S1..S4 in turn (and a
 * QueueSample of 0 runnable after every 1000th), then 100000 polls "small" of 5 us with one S5
 * off-CPU sample each. Chunks of about 10000 events. */
static void write_big(const char *dir, long n)
{
	struct gen g;
	struct d9_enc *e;
	uint64_t t = 0;

	begin(&g, 700, (size_t)(n + n / 1000 + 300000) * 24 + (1u << 20));
	str(&g, 1, "big");
	str(&g, 2, "small");
	d9_def_location(&g.w, 1, 0x1000, 0, 0, 1);
	d9_def_location(&g.w, 2, 0x2000, 0, 0, 2);
	d9_def_thread(&g.w, 700, 0, 1, D9_ROLE_WORKER);
	e = events(&g, 700, 1);
	d9_enc_poll_start(e, US(0), 1, 1);
	for (long i = 0; i < n; i++) {
		if (i && i % 10000 == 0) {
			events_end(&g);
			e = events(&g, 700, 1);
		}
		samples(e, (uint64_t)i + 1, 1, 1, D9_CPU_ON, ST1 + (uint64_t)(i % 4));
		/* the reader holds a thread's samples until its next other event (analyze/merge.c):
		 * a QueueSample every 1000 samples keeps that queue short, so the peak RSS shows
		 * the summary's own memory */
		if (i % 1000 == 999 && d9_enc_queue_sample(e, US(i + 1) + 500, 0))
			die("events chunk full");
	}
	t = (uint64_t)n + 10;
	d9_enc_poll_end(e, US(t), 1);
	events_end(&g);
	e = events(&g, 700, 1);
	for (long i = 0; i < 100000; i++) {
		if (i && i % 3000 == 0) {
			events_end(&g);
			e = events(&g, 700, 1);
		}
		uint64_t co = 2 + (uint64_t)i, at = t + 10 + (uint64_t)i * 10;
		d9_enc_poll_start(e, US(at), co, 2);
		samples(e, at + 1, 1, co, D9_CPU_OFF, ST5);
		d9_enc_poll_end(e, US(at + 5), co);
	}
	events_end(&g);
	write_out(&g, dir, "trace.700.000000.bin");
}

int main(int argc, char **argv)
{
	char path[4096];

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: gen-analyze-cpu DIR [SAMPLES]\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/polls", argv[1]);
	write_polls(path);
	snprintf(path, sizeof(path), "%s/generic", argv[1]);
	write_generic(path);
	if (argc == 3) {
		long n = strtol(argv[2], NULL, 10);
		if (n < 1 || n > 100000000)
			die("SAMPLES: want 1 to 100000000");
		snprintf(path, sizeof(path), "%s/big", argv[1]);
		write_big(path, n);
	}
	return 0;
}
