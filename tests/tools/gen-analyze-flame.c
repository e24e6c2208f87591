/* gen-analyze-flame.c: writes the synthetic traces of tests/integration/test-analyze-flame.sh:
 * CpuSample and BlockingCall events with known stacks inside known polls, so every folded line
 * of `d9-analyze flame` is known in advance. Times are us after the anchor (one tick is one ns).
 * usage: gen-analyze-flame DIR. Writes DIR/full/ (pids 100 and 200) and DIR/empty/ (polls, no
 * samples). The expected output of each option is written down in the test script. */
#define GEN_TOOL "gen-analyze-flame"
#include "gen-common.h"

#define CAP (1u << 20)
#define B GEN_ANCHOR
#define US(x) (B + (uint64_t)(x) * 1000)

/* stacks, innermost frame first: folded (outermost first) 0x33;0x22;0x11, 0x33;0x22;0x44, 0x55 */
static const uint64_t S1[] = { 0x11, 0x22, 0x33 }, S2[] = { 0x44, 0x22, 0x33 }, S3[] = { 0x55 };


/* pid 100: worker 1 (tid 100) and worker 2 (tid 101). Polls: A handler [10, 40) us, B ticker
 * [100, 105), E handler from 300 without a PollEnd (the trace ends inside it) on worker 1;
 * C handler [50, 60), F "odd;name" [70, 75) on worker 2. */
static void write_pid100(const char *dir)
{
	struct gen g;
	struct d9_enc *e;

	gen_begin(&g, 100, CAP);
	str(&g, 1, "handler");
	str(&g, 2, "ticker");
	str(&g, 3, "w1");
	str(&g, 4, "w2");
	str(&g, 5, "usleep");
	str(&g, 6, "read");
	str(&g, 7, "odd;name");
	d9_def_location(&g.w, 1, 0x1000, 0, 0, 1);
	d9_def_location(&g.w, 2, 0x3000, 0, 0, 2);
	d9_def_location(&g.w, 3, 0x5000, 0, 0, 7);
	d9_def_thread(&g.w, 100, 3, 1, D9_ROLE_WORKER);
	d9_def_thread(&g.w, 101, 4, 2, D9_ROLE_WORKER);
	d9_def_stack(&g.w, 1, S1, 3);
	d9_def_stack(&g.w, 2, S2, 3);
	d9_def_stack(&g.w, 3, S3, 1);

	e = events(&g, 100, 1);
	d9_enc_poll_start(e, US(10), 5, 1); /* A: 30 us */
	d9_enc_cpu_sample(e, US(12), 5, D9_CPU_ON, 1);
	d9_enc_cpu_sample(e, US(20), 5, D9_CPU_ON, 1);
	d9_enc_blocking_call(e, US(25), 5, 5, D9_FD_NONE, 7400, 2);
	d9_enc_blocking_call(e, US(28), 5, 5, D9_FD_NONE, 2400, 2);
	d9_enc_cpu_sample(e, US(30), 5, D9_CPU_ON, 2);
	d9_enc_cpu_sample(e, US(35), 5, D9_CPU_OFF, 3);
	d9_enc_poll_end(e, US(40), 5);
	d9_enc_poll_start(e, US(100), 6, 2); /* B: 5 us */
	d9_enc_cpu_sample(e, US(101), 6, D9_CPU_ON, 1);
	d9_enc_cpu_sample(e, US(102), 6, D9_CPU_ON, 3);
	d9_enc_poll_end(e, US(105), 6);
	events_end(&g);
	e = events(&g, 100, 1);
	d9_enc_cpu_sample(e, US(200), 0, D9_CPU_ON, 3); /* outside polls */
	d9_enc_cpu_sample(e, US(210), 0, D9_CPU_OFF, 2);
	d9_enc_blocking_call(e, US(220), 0, 6, D9_FD_FILE, 1200, 0);
	d9_enc_poll_start(e, US(300), 8, 1); /* E: at least 30 us, never ends */
	d9_enc_cpu_sample(e, US(301), 8, D9_CPU_ON, 1);
	d9_enc_cpu_sample(e, US(330), 8, D9_CPU_ON, 1);
	events_end(&g);

	e = events(&g, 101, 2);
	d9_enc_poll_start(e, US(50), 7, 1); /* C: 10 us */
	d9_enc_cpu_sample(e, US(55), 7, D9_CPU_ON, 1);
	d9_enc_cpu_sample(e, US(57), 7, D9_CPU_ON, 2);
	d9_enc_blocking_call(e, US(58), 7, 6, D9_FD_SOCKET, 3000, 1);
	d9_enc_poll_end(e, US(60), 7);
	d9_enc_poll_start(e, US(70), 9, 3); /* F: 5 us */
	d9_enc_cpu_sample(e, US(72), 9, D9_CPU_ON, 3);
	d9_enc_poll_end(e, US(75), 9);
	events_end(&g);
	write_out(&g, dir, "trace.100.000000.bin");
}

/* pid 200: worker 1 (tid 200), poll D handler [10, 20) us with one sample of stack 0x55. */
static void write_pid200(const char *dir)
{
	struct gen g;
	struct d9_enc *e;

	gen_begin(&g, 200, CAP);
	str(&g, 1, "handler");
	d9_def_location(&g.w, 1, 0x1000, 0, 0, 1);
	d9_def_thread(&g.w, 200, 0, 1, D9_ROLE_WORKER);
	d9_def_stack(&g.w, 1, S3, 1);
	e = events(&g, 200, 1);
	d9_enc_poll_start(e, US(10), 5, 1);
	d9_enc_cpu_sample(e, US(15), 5, D9_CPU_ON, 1);
	d9_enc_poll_end(e, US(20), 5);
	events_end(&g);
	write_out(&g, dir, "trace.200.000000.bin");
}

/* polls and a park, but no sample and no blocking call */
static void write_empty(const char *dir)
{
	struct gen g;
	struct d9_enc *e;

	gen_begin(&g, 300, CAP);
	str(&g, 1, "handler");
	d9_def_location(&g.w, 1, 0x1000, 0, 0, 1);
	d9_def_thread(&g.w, 300, 0, 1, D9_ROLE_WORKER);
	e = events(&g, 300, 1);
	d9_enc_poll_start(e, US(10), 5, 1);
	d9_enc_poll_end(e, US(20), 5);
	d9_enc_park(e, US(20), D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, US(30), 1, 0, 0);
	events_end(&g);
	write_out(&g, dir, "trace.300.000000.bin");
}

int main(int argc, char **argv)
{
	char full[4096], empty[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: gen-analyze-flame DIR\n");
		return 2;
	}
	snprintf(full, sizeof(full), "%s/full", argv[1]);
	snprintf(empty, sizeof(empty), "%s/empty", argv[1]);
	if ((mkdir(full, 0700) && errno != EEXIST) || (mkdir(empty, 0700) && errno != EEXIST))
		die("mkdir");
	write_pid100(full);
	write_pid200(full);
	write_empty(empty);
	return 0;
}
