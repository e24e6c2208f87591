/* gen-analyze-gaps.c: writes the synthetic traces of tests/integration/test-analyze-gaps.sh:
 * polls, parks and wakes whose two ends lie on both sides of a gap in the data (dropped events,
 * a segment without a trailer, a missing segment), next to complete ones, so every pair the
 * analyzer may or may not make is known in advance. Times are ns after the anchor.
 * usage: gen-analyze-gaps DIR [LIVE_PID]. Writes DIR/drop/, DIR/unsealed/, DIR/seqgap/ and, with
 * LIVE_PID, DIR/live/: a trailer-less .active file of process LIVE_PID on this host (its
 * hostname and boot id), which the analyzer reads as live while that process runs. */
#define GEN_TOOL "gen-analyze-gaps"
#include "gen-common.h"

#include <unistd.h>

#define CAP (1u << 20)
#define B GEN_ANCHOR
#define MS(x) (B + (uint64_t)(x) * 1000000)
#define US(x) (B + (uint64_t)(x) * 1000)

/* stacks, innermost frame first */
static const uint64_t S1[] = { 0x11 }, S2[] = { 0x22 }, S3[] = { 0x33 };

/* Like gen_begin, with the segment's seq and, when host is not NULL, its hostname and boot id. */
static void begin(struct gen *g, uint32_t pid, uint32_t seq, const char *host, const char *boot)
{
	struct d9_header h;

	gen_header(&h, pid);
	h.segment_seq = seq;
	if (host) {
		h.hostname = host;
		h.boot_id = boot;
	}
	gen_begin_header(g, &h, CAP);
	str(g, 1, "handler");
	d9_def_location(&g->w, 1, 0x1000, 0, 0, 1);
	d9_def_thread(&g->w, pid, 0, 1, D9_ROLE_WORKER);
	d9_def_thread(&g->w, pid + 1, 0, 2, D9_ROLE_WORKER);
}

/* pid 100, one sealed segment. Worker 1 (tid 100):
 *   coroutine 5: PollStart 1 ms, then Dropped(write_error, 500) at 14.5 s in a chunk of its own,
 *     then a chunk with the PollEnd at 14.4 s: unknown poll (d9's writer records a write
 *     error's drop count when writing works again, before the chunk it then writes, whose
 *     events are older); CPU samples at 2 ms (stack 0x11, inside the poll) and 10 s (0x22,
 *     after the gap: its poll is unknown);
 *   coroutine 6: Wake 20 s, Dropped(buffers_full, 3) 25 s, PollStart 34.3 s, PollEnd +10 us:
 *     unknown scheduling delay, known 10 us poll;
 *   Park 40 s, Dropped(other, 1) 41 s, Unpark 50 s: unknown park; then a loop turn from the
 *     Unpark to the Park at 50.0001 s (known, 100 us) and a park to 50.0002 s (known, 100 us);
 *   coroutine 7: Wake 60 s, PollStart +2 us (known delay), Dropped(samples_lost, 4) +5 us
 *     (loses only samples: no gap), PollEnd +12 us: known 10 us poll.
 * Worker 2 (tid 101): coroutine 8 polls from 2 s to 6 s: known (the drops were worker 1's),
 *   with a CPU sample at 3 s (0x33). */
static void write_drop(const char *dir)
{
	struct gen g;
	struct d9_enc *e;

	begin(&g, 100, 0, NULL, NULL);
	d9_def_stack(&g.w, 1, S1, 1);
	d9_def_stack(&g.w, 2, S2, 1);
	d9_def_stack(&g.w, 3, S3, 1);
	e = events(&g, 100, 1);
	d9_enc_poll_start(e, MS(1), 5, 1);
	d9_enc_cpu_sample(e, MS(2), 5, D9_CPU_ON, 1);
	events_end(&g);
	e = events(&g, 100, 1);
	d9_enc_dropped(e, MS(14500), 500, D9_DROP_WRITE_ERROR);
	events_end(&g);
	e = events(&g, 100, 1);
	d9_enc_cpu_sample(e, MS(10000), 5, D9_CPU_ON, 2);
	d9_enc_poll_end(e, MS(14400), 5);
	d9_enc_wake(e, MS(20000), 6, 0, D9_WAKE_FD, 7);
	d9_enc_dropped(e, MS(25000), 3, D9_DROP_BUFFERS_FULL);
	d9_enc_poll_start(e, MS(34300), 6, 1);
	d9_enc_poll_end(e, MS(34300) + 10000, 6);
	d9_enc_park(e, MS(40000), D9_CALL_EPOLL_WAIT, -1);
	d9_enc_dropped(e, MS(41000), 1, D9_DROP_OTHER);
	d9_enc_unpark(e, MS(50000), 1, 0, 0);
	d9_enc_park(e, MS(50000) + 100000, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, MS(50000) + 200000, 1, 0, 0);
	d9_enc_wake(e, MS(60000), 7, 0, D9_WAKE_FD, 8);
	d9_enc_poll_start(e, MS(60000) + 2000, 7, 1);
	d9_enc_dropped(e, MS(60000) + 5000, 4, D9_DROP_SAMPLES_LOST);
	d9_enc_poll_end(e, MS(60000) + 12000, 7);
	events_end(&g);
	e = events(&g, 101, 2);
	d9_enc_poll_start(e, MS(2000), 8, 1);
	d9_enc_cpu_sample(e, MS(3000), 8, D9_CPU_ON, 3);
	d9_enc_poll_end(e, MS(6000), 8);
	events_end(&g);
	write_out(&g, dir, "trace.100.000000.bin");
}

/* pid 200: segment 0 has no trailer (its writer stopped: a full disk). Worker 1 (tid 200):
 * coroutine 5 PollStart 1 ms and coroutine 6 Wake 10 ms in segment 0; segment 1 (sealed):
 * PollEnd of 5 at 14.4 s, PollStart of 6 at 14.5 s with its PollEnd 10 us later (known), and
 * a complete 20 us poll of coroutine 9 at 15 s. Worker 2 (tid 201) polls coroutine 8 from 1 ms
 * in segment 0 to 14 s in segment 1: unknown too (the gap is every thread's). */
static void write_unsealed(const char *dir)
{
	struct gen g;
	struct d9_enc *e;

	begin(&g, 200, 0, NULL, NULL);
	e = events(&g, 200, 1);
	d9_enc_poll_start(e, MS(1), 5, 1);
	d9_enc_wake(e, MS(10), 6, 0, D9_WAKE_FD, 7);
	events_end(&g);
	e = events(&g, 201, 2);
	d9_enc_poll_start(e, MS(1), 8, 1);
	events_end(&g);
	write_out_as(&g, dir, "trace.200.000000.bin", 0);

	begin(&g, 200, 1, NULL, NULL);
	e = events(&g, 200, 1);
	d9_enc_poll_end(e, MS(14400), 5);
	d9_enc_poll_start(e, MS(14500), 6, 1);
	d9_enc_poll_end(e, MS(14500) + 10000, 6);
	d9_enc_poll_start(e, MS(15000), 9, 1);
	d9_enc_poll_end(e, MS(15000) + 20000, 9);
	events_end(&g);
	e = events(&g, 201, 2);
	d9_enc_poll_end(e, MS(14000), 8);
	events_end(&g);
	write_out(&g, dir, "trace.200.000001.bin");
}

/* pid 300: segments 0 and 2, both sealed; segment 1 is missing. Worker 1 (tid 300): PollStart
 * of coroutine 5 (1 ms) and a Wake of coroutine 6 (10 ms) in segment 0, then in segment 2 the
 * PollEnd of 5 (14.4 s) and the poll of 6 (14.5 s, 10 us). */
static void write_seqgap(const char *dir)
{
	struct gen g;
	struct d9_enc *e;

	begin(&g, 300, 0, NULL, NULL);
	e = events(&g, 300, 1);
	d9_enc_poll_start(e, MS(1), 5, 1);
	d9_enc_wake(e, MS(10), 6, 0, D9_WAKE_FD, 7);
	events_end(&g);
	write_out(&g, dir, "trace.300.000000.bin");

	begin(&g, 300, 2, NULL, NULL);
	e = events(&g, 300, 1);
	d9_enc_poll_end(e, MS(14400), 5);
	d9_enc_poll_start(e, MS(14500), 6, 1);
	d9_enc_poll_end(e, MS(14500) + 10000, 6);
	events_end(&g);
	write_out(&g, dir, "trace.300.000002.bin");
}

/* pid LIVE_PID on this host: one trailer-less .active segment with a complete 10 us poll. */
static void write_live(const char *dir, uint32_t pid)
{
	struct gen g;
	struct d9_enc *e;
	char host[256], boot[64] = "", name[64];
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (gethostname(host, sizeof(host)))
		die("gethostname");
	host[sizeof(host) - 1] = 0;
	if (!f || !fgets(boot, sizeof(boot), f))
		die("/proc/sys/kernel/random/boot_id");
	fclose(f);
	boot[strcspn(boot, "\n")] = 0;
	begin(&g, pid, 0, host, boot);
	e = events(&g, pid, 1);
	d9_enc_poll_start(e, US(10), 5, 1);
	d9_enc_poll_end(e, US(20), 5);
	events_end(&g);
	snprintf(name, sizeof(name), "trace.%u.000000.active", pid);
	write_out_as(&g, dir, name, 0);
}

int main(int argc, char **argv)
{
	char d[4096];

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: gen-analyze-gaps DIR [LIVE_PID]\n");
		return 2;
	}
	if (mkdir(argv[1], 0700) && errno != EEXIST)
		die(argv[1]);
	snprintf(d, sizeof(d), "%s/drop", argv[1]);
	write_drop(d);
	snprintf(d, sizeof(d), "%s/unsealed", argv[1]);
	write_unsealed(d);
	snprintf(d, sizeof(d), "%s/seqgap", argv[1]);
	write_seqgap(d);
	if (argc == 3) {
		char *end;
		unsigned long pid = strtoul(argv[2], &end, 10);
		if (*end || !pid || pid > INT32_MAX)
			die("LIVE_PID: want a process id");
		snprintf(d, sizeof(d), "%s/live", argv[1]);
		write_live(d, (uint32_t)pid);
	}
	return 0;
}
