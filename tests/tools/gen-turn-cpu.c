/* gen-turn-cpu.c: writes the synthetic trace of test-analyze-turn-cpu.sh: one worker (pid 800,
 * generic mode) with two loop turns of 300 ms each. The Unpark after each carries the thread's
 * schedstat delta since the previous Unpark that carried one, which came before the turn began,
 * so the delta bounds the turn's own CPU time: after turn A 1 ms of CPU (the rest a wait d9
 * does not see, as Apache prefork's blocking accept after a poll that woke every worker), after
 * turn B 295 ms. `check` must find one hog (B), not two: it weighed every turn by the worker's
 * CPU share over the trace. A second worker (tid 801) parks with a 100 ms timeout and comes back
 * 300 ms late (ready 0) with 290 ms of run delay in its Unpark: its lateness is preemption, which
 * `check` blamed on the first worker's hog. usage: gen-turn-cpu DIR: DIR/trace.800.000000.bin.
 * A third worker (tid 802) parks at 500 ms and no Unpark follows: the segment is a flight dump's
 * last, its trailer says the window ended at 700 ms (D9_TRAILER_WINDOW): that worker was parked
 * for those 200 ms (a dump showed such a worker 0% parked). Times in us after the anchor.
 * gen-turn-cpu DIR nostat: pid 810, one worker whose Unparks carry no schedstat (a chroot without
 * /proc) and a 300 ms loop turn without samples: a hog whose CPU time `check` cannot know. */
#define GEN_TOOL "gen-turn-cpu"
#include "gen-common.h"

#define US(x) (GEN_ANCHOR + (uint64_t)(x) * 1000)
#define MS_NS(x) ((uint64_t)(x) * 1000000u)

int main(int argc, char **argv)
{
	struct gen g;

	if (argc == 3 && !strcmp(argv[2], "nostat")) {
		struct d9_header h0;
		gen_header(&h0, 810);
		gen_begin_header_schema(&g, &h0, 1u << 16, D9_SCHEMA_UNPARK_STATS);
		struct d9_enc *e0 = events(&g, 810, 1);
		if (d9_enc_park(e0, US(0), D9_CALL_EPOLL_WAIT, 1000000) ||
			d9_enc_unpark(e0, US(1000), 1, D9_UNKNOWN, D9_UNKNOWN) ||
			d9_enc_park(e0, US(301000), D9_CALL_EPOLL_WAIT, 1000000) ||
			d9_enc_unpark(e0, US(302000), 1, D9_UNKNOWN, D9_UNKNOWN) ||
			d9_enc_park(e0, US(302100), D9_CALL_EPOLL_WAIT, 1000000))
			die("events");
		events_end(&g);
		write_out(&g, argv[1], "trace.810.000000.bin");
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: gen-turn-cpu DIR [nostat]\n");
		return 2;
	}
	struct d9_header h;
	gen_header(&h, 800);
	gen_begin_header_schema(&g, &h, 1u << 16, D9_SCHEMA_UNPARK_STATS);
	struct d9_enc *e = events(&g, 800, 1);
	if (d9_enc_park(e, US(0), D9_CALL_EPOLL_WAIT, 1000000) ||
		d9_enc_unpark(e, US(500), 1, MS_NS(1), 0) || /* the first reading */
		d9_enc_park(e, US(600), D9_CALL_EPOLL_WAIT, 1000000) ||
		d9_enc_unpark(e, US(1000), 1, 0, 0) ||
		/* turn A: 300 ms, 1 ms of it on CPU */
		d9_enc_park(e, US(301000), D9_CALL_EPOLL_WAIT, 1000000) ||
		d9_enc_unpark(e, US(302000), 1, MS_NS(1), 0) ||
		/* turn B: 300 ms, 295 ms on CPU, 2 ms preempted */
		d9_enc_park(e, US(602000), D9_CALL_EPOLL_WAIT, 1000000) ||
		d9_enc_unpark(e, US(603000), 1, MS_NS(295), MS_NS(2)) ||
		d9_enc_park(e, US(603100), D9_CALL_EPOLL_WAIT, 1000000))
		die("events");
	events_end(&g);
	e = events(&g, 801, 2);
	if (d9_enc_park(e, US(0), D9_CALL_EPOLL_WAIT, 1000000) ||
		d9_enc_unpark(e, US(100), 1, 0, 0) || /* the first reading */
		d9_enc_park(e, US(200), D9_CALL_EPOLL_WAIT, 100000) ||
		/* due at 100.2 ms, back at 400.2 ms: 300 ms late, 290 ms of it runnable */
		d9_enc_unpark(e, US(400200), 0, MS_NS(1), MS_NS(290)) ||
		d9_enc_park(e, US(400300), D9_CALL_EPOLL_WAIT, 1000000))
		die("events");
	events_end(&g);
	e = events(&g, 802, 3);
	if (d9_enc_park(e, US(500000), D9_CALL_EPOLL_WAIT, 1000000))
		die("events");
	events_end(&g);
	g.trailer_flags = D9_TRAILER_WINDOW;
	g.end_time = US(700000);
	write_out(&g, argv[1], "trace.800.000000.bin");
	return 0;
}
