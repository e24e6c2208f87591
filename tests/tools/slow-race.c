/* slow-race.c: puts the writer's request for a running thread's chunk (d9__collect clearing
 * enc.end) at the one instant of the recording slow path where it used to lose the event: right
 * after d9__slow published a fresh block, before the event was encoded into it. A hardware write
 * watchpoint (perf_event_open PERF_TYPE_BREAKPOINT with sigtrap) on the thread's d9__self.blk
 * stops the thread just after that store; the SIGTRAP handler runs the writer's pass there, as the
 * writer thread could on another CPU. Linked with libd9core.a: the real hot path and slow path.
 * Usage: slow-race flush|timed N. One worker thread records QueueSample 1..N, each after the first
 * pushed through the slow path with one pass injected: `flush` a flush pass (every running thread is asked),
 * `timed` a timed pass (threads whose chunk started more than 1 ms ago are asked). Prints a
 * d9-driver style result line {"role":"parent",...,"injected":K} for d9-check --driver, or
 * {"skip":"why"} when the machine has no usable watchpoint. Used by test-agent-slow-race.sh. */
#include "d9-agent.h"
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int timed; /* the pass to inject: 0 flush, 1 timed */
static volatile sig_atomic_t armed; /* inject at the next store of a block into d9__self.blk */
static volatile uint64_t injected, traps;

/* SIGTRAP from the watchpoint: the thread has just stored d9__self.blk. A store of NULL is a
 * hand-off; a block is the slow path's fresh one, published, its event not yet encoded. */
static void on_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	traps++;
	if (!armed || !__atomic_load_n(&d9__self.blk, __ATOMIC_RELAXED))
		return;
	armed = 0;
	injected++;
	/* the writer's pass: flush, or the timed pass of a writer whose flush interval is 1 ms */
	d9__collect(timed ? d9__mono_ns() - 1000000u : 0, !timed);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A write watchpoint on d9__self.blk of the calling thread delivering SIGTRAP to it. Returns the
 * perf descriptor, or -errno. */
static int watch_blk(void)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_BREAKPOINT;
	a.size = sizeof(a);
	a.bp_type = HW_BREAKPOINT_W;
	a.bp_addr = (uint64_t)(uintptr_t)&d9__self.blk;
	a.bp_len = HW_BREAKPOINT_LEN_8;
	a.sample_period = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.sigtrap = 1; /* synchronous SIGTRAP to the thread that stored */
	a.remove_on_exec = 1; /* the kernel requires it with sigtrap */
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int main(int argc, char **argv)
{
	char *end = NULL;
	uint64_t n = argc == 3 ? strtoull(argv[2], &end, 10) : 0;

	if (argc != 3 || (strcmp(argv[1], "flush") && strcmp(argv[1], "timed")) || !end || *end ||
		n < 2 || n > 100000) {
		fprintf(stderr, "usage: slow-race flush|timed N\n");
		return 2;
	}
	timed = !strcmp(argv[1], "timed");
	uint32_t worker = d9_agent_become_worker();
	d9_rec_queue_sample(1); /* starts the agent: the first block, registered thread */
	if (!d9_agent_active() || !d9__self.blk) {
		printf("{\"skip\":\"the agent did not start (D9_* configuration)\"}\n");
		return 0;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTRAP, &sa, NULL);
	int fd = watch_blk();
	if (fd < 0) {
		printf("{\"skip\":\"no hardware watchpoint with sigtrap (perf_event_open: %s)\"}\n",
			strerror(-fd));
		return 0;
	}
	/* a store of the same block (disarmed: the handler only counts it) must trap; some VMs
	 * accept the watchpoint and never deliver it (their debug registers are not passed on) */
	__atomic_store_n(&d9__self.blk, __atomic_load_n(&d9__self.blk, __ATOMIC_RELAXED),
		__ATOMIC_RELAXED);
	if (traps == 0) {
		close(fd);
		printf("{\"skip\":\"the hardware watchpoint was accepted but never fired (a VM that "
			"does not deliver debug-register traps)\"}\n");
		return 0;
	}
	uint64_t attempted = 1; /* seq 1 */
	for (uint64_t seq = 2; seq <= n; seq++) {
		if (timed)
			sleep_ms(2); /* the running chunk is then older than the injected pass's 1 ms */
		/* ask for this thread's chunk (as the writer does), so the next event takes the slow
		 * path: it hands the chunk off and takes a fresh block, where the trap injects */
		d9__collect(0, 1);
		armed = 1;
		d9_rec_queue_sample(seq);
		armed = 0;
		attempted++;
	}
	close(fd);
	printf("{\"role\":\"parent\",\"pid\":%d,\"mode\":\"%s\",\"injected\":%" PRIu64 ",\"traps\":%"
		PRIu64 ",\"threads\":[{\"tid\":%u,\"worker\":%u,\"seqs\":%" PRIu64 ",\"attempted\":%"
		PRIu64 "}]}\n", (int)getpid(), argv[1], (uint64_t)injected, (uint64_t)traps,
		d9__self.tid, worker, n, attempted);
	fflush(stdout);
	return 0;
}
