/* uctx-sched: a hand-written ucontext coroutine scheduler, a runtime d9 has no adapter for
 * (test-rt-unknown.sh). NCO coroutines (makecontext/swapcontext) each run ROUNDS rounds: burn a
 * little CPU, then sleep SLEEP_MS by yielding to the scheduler with a wake-up time. The
 * scheduler runs every due coroutine, and when none is due it waits in poll(NULL, 0, ms) until
 * the earliest wake-up: those waits are the only ones with a non-zero timeout, so they are the
 * parks d9's generic mode must record, one each. Coroutine 0 also makes one real blocking call
 * in its first round after the scheduler's first wait with a timeout (nanosleep 30 ms, outside
 * any hook: it stalls the whole thread), the only BlockingCall the trace may hold. Not simply its
 * second round: on a loaded machine the first pass can outlast the 3 ms sleeps, the scheduler's
 * first wait then has a zero timeout (no park), and the thread is not yet a worker whose calls
 * generic mode times (a flake: 0 BlockingCalls). At the end it prints one JSON line of ground truth:
 * {"waits": W, "zero_waits": Z, "turns": T, "blocked_ns": B}. With an argument, it first copies
 * its /proc/self/maps there (the checker's load base for the PIE). */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#define NCO 4
#define ROUNDS 25
#define SLEEP_MS 3
#define STACK (64 * 1024)

static ucontext_t sched_ctx, co_ctx[NCO];
static uint64_t wake_at[NCO];
static int done[NCO], cur;
static volatile uint64_t sink;
static uint64_t blocked_ns;
static uint64_t waits, zero_waits, turns; /* the scheduler's, read by coroutine 0 */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void burn(unsigned n)
{
	uint64_t x = sink | 1;

	for (unsigned i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

__attribute__((noinline)) static void block_thread(void)
{
	struct timespec ts = { 0, 30 * 1000000 };
	uint64_t t0 = now_ns();

	nanosleep(&ts, NULL);
	blocked_ns = now_ns() - t0;
}

static void co_main(int id)
{
	for (int r = 0; r < ROUNDS; r++) {
		burn(20000);
		if (id == 0 && r >= 1 && waits > 0 && !blocked_ns)
			block_thread();
		wake_at[id] = now_ns() + SLEEP_MS * 1000000ull;
		swapcontext(&co_ctx[id], &sched_ctx);
	}
	done[id] = 1;
}

/* the scheduler's state lives outside main's frame: swapcontext returns twice, and locals kept
 * in registers would not survive it */
static int i_, left_;
static uint64_t t_, next_;

int main(int argc, char **argv)
{
	for (i_ = 0; i_ < NCO; i_++) {
		getcontext(&co_ctx[i_]);
		co_ctx[i_].uc_stack.ss_sp = malloc(STACK);
		co_ctx[i_].uc_stack.ss_size = STACK;
		co_ctx[i_].uc_link = &sched_ctx;
		if (!co_ctx[i_].uc_stack.ss_sp)
			return 1;
		makecontext(&co_ctx[i_], (void (*)(void))co_main, 1, i_);
	}
	for (;;) {
		left_ = 0;
		t_ = now_ns();
		next_ = UINT64_MAX;
		for (i_ = 0; i_ < NCO; i_++) {
			if (done[i_])
				continue;
			left_ = 1;
			if (wake_at[i_] <= t_) {
				cur = i_;
				turns++;
				swapcontext(&sched_ctx, &co_ctx[i_]);
				t_ = now_ns();
			}
			if (!done[i_] && wake_at[i_] < next_)
				next_ = wake_at[i_];
		}
		if (!left_)
			break;
		if (next_ == UINT64_MAX)
			continue; /* the last ones finished in this pass */
		t_ = now_ns();
		int ms = next_ > t_ ? (int)((next_ - t_ + 999999) / 1000000) : 0;
		if (ms > 0)
			waits++;
		else
			zero_waits++;
		poll(NULL, 0, ms);
	}
	if (argc > 1) {
		FILE *in = fopen("/proc/self/maps", "r"), *out = fopen(argv[1], "w");
		int ch;
		while (in && out && (ch = getc(in)) != EOF)
			putc(ch, out);
		if (in)
			fclose(in);
		if (out)
			fclose(out);
	}
	printf("{\"waits\": %llu, \"zero_waits\": %llu, \"turns\": %llu, \"blocked_ns\": %llu}\n",
		(unsigned long long)waits, (unsigned long long)zero_waits, (unsigned long long)turns,
		(unsigned long long)blocked_ns);
	return 0;
}
