/* gen-pc0.c: writes the synthetic trace of test-analyze-pc0.sh and test-agent-symbols.sh's
 * symbols-pc0: a CPU sample whose stack's frame 0 is the first instruction of a function of a
 * real file, and a blocking call whose stack's frame 0 is that same address. A sample's frame 0
 * is the sampled instruction (FORMAT.md): it must be named as it is, the function that starts
 * there; a blocking call's frames are return addresses, each named by the call before it, in
 * the code before. d9-analyze and the agent's Symbol records once named both as return
 * addresses: a sample at a function's first byte came out as the code before it (3.5% of
 * postgres's leaf frames).
 * usage: gen-pc0 DIR MODULE START END OFFSET ADDR (numbers in hex). Writes
 * DIR/trace.4000001.000000.bin (pid 4000001, a dead process: the next agent on that path adopts
 * the segment), MODULE mapped at [START, END) from file offset OFFSET; one worker that parks,
 * runs a 3 ms loop turn holding the sample (stack {ADDR}) and a 2 ms blocking call (stack {ADDR,
 * ADDR}), and parks again. */
#define GEN_TOOL "gen-pc0"
#include "gen-common.h"

#define US(x) (GEN_ANCHOR + (uint64_t)(x) * 1000)

int main(int argc, char **argv)
{
	struct gen g;

	if (argc != 7) {
		fprintf(stderr, "usage: gen-pc0 DIR MODULE START END OFFSET ADDR\n");
		return 2;
	}
	uint64_t start = strtoull(argv[3], NULL, 16), end = strtoull(argv[4], NULL, 16);
	uint64_t off = strtoull(argv[5], NULL, 16), addr = strtoull(argv[6], NULL, 16);
	const uint64_t s1[] = { addr }, s2[] = { addr, addr };

	gen_begin(&g, 4000001, 1u << 16);
	str(&g, 1, argv[2]);
	str(&g, 2, "read");
	d9_def_module(&g.w, 1, 1, start, end, off, NULL, 0);
	d9_def_stack(&g.w, 1, s1, 1);
	d9_def_stack(&g.w, 2, s2, 2);
	struct d9_enc *e = events(&g, 4000001, 1);
	if (d9_enc_park(e, US(0), D9_CALL_EPOLL_WAIT, 1000) ||
		d9_enc_unpark(e, US(100), 1, D9_UNKNOWN, D9_UNKNOWN) ||
		d9_enc_cpu_sample(e, US(200), 0, D9_CPU_ON, 1) ||
		d9_enc_blocking_call(e, US(3000), 0, 2, D9_FD_FILE, 2000000, 2) ||
		d9_enc_park(e, US(3100), D9_CALL_EPOLL_WAIT, 1000))
		die("events");
	events_end(&g);
	write_out(&g, argv[1], "trace.4000001.000000.bin");
	return 0;
}
