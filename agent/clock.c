/* clock.c: the event clock. The TSC (rdtsc, ~10 ns here) when the CPU says it is invariant and
 * the kernel uses it as its clocksource; CLOCK_MONOTONIC (~22 ns) otherwise. TSC ticks are mapped
 * to nanoseconds by a frequency calibrated against CLOCK_MONOTONIC over an ever longer baseline;
 * every segment header carries an anchor (one instant on the three clocks) and that frequency. */
#include "internal.h"

#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

int d9__clock_tsc;
struct d9_preload_config d9__pcfg;
uint8_t d9__shift = 5;

static struct d9__anchor first; /* the calibration baseline */
static uint64_t tps = 1000000000u;

void d9__clock_update_ticks(void);

uint64_t d9__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t d9__realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int tsc_invariant(void)
{
	unsigned a, b, c, d;
	char src[32] = "";

	if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1u << 8)))
		return 0;
	d9__file_read_small("/sys/devices/system/clocksource/clocksource0/current_clocksource", src,
		sizeof(src));
	return !strncmp(src, "tsc", 3);
}

/* Reads the three clocks as close together as possible: the TSC read is bracketed by the
 * monotonic reads and the tightest of a few tries wins. */
void d9__clock_anchor(struct d9__anchor *a)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t m0 = d9__mono_ns();
		uint64_t t = d9__clock_tsc ? __rdtsc() : 0;
		uint64_t m1 = d9__mono_ns();
		if (m1 - m0 < best) {
			best = m1 - m0;
			a->mono_ns = m0 + (m1 - m0) / 2;
			a->ticks = d9__clock_tsc ? t : a->mono_ns;
		}
	}
	a->realtime_ns = d9__realtime_ns();
	/* realtime is read after: correct it by the monotonic time that passed meanwhile */
	a->realtime_ns -= d9__mono_ns() - a->mono_ns;
}

void d9__clock_init(int mode)
{
	d9__clock_tsc = mode == 1 || (mode == 0 && tsc_invariant());
	if (mode == 1 && !tsc_invariant())
		d9__log(D9_LOG_WARN, "D9_CLOCK=tsc on a machine whose TSC the kernel does not trust");
	/* ~100 ns event time units: ample for microsecond scheduling analysis, and what keeps events
	 * near 3.7 bytes (durations that need more, like BlockingCall, carry their own ns) */
	d9__shift = d9__clock_tsc ? 8 : 7;
	d9__clock_anchor(&first);
	tps = 1000000000u; /* the writer calibrates before it writes the first segment header */
}

void d9__clock_calibrate(void)
{
	struct d9__anchor now;

	if (!d9__clock_tsc)
		return;
	d9__clock_anchor(&now);
	uint64_t dm = now.mono_ns - first.mono_ns;
	if (dm < 1000000)
		return;
	tps = (uint64_t)((unsigned __int128)(now.ticks - first.ticks) * 1000000000u / dm);
	d9__clock_update_ticks();
}

/* Derived tick thresholds preload/ compares against without dividing. */
void d9__clock_update_ticks(void)
{
	/* read by the host's threads at any time (relaxed loads: plain moves on x86-64) */
	__atomic_store_n(&d9__pcfg.schedstat_ticks,
		(uint64_t)((unsigned __int128)D9__SCHED_READ_NS * tps / 1000000000u),
		__ATOMIC_RELAXED);
	__atomic_store_n(&d9__pcfg.blocking_threshold_ticks,
		(uint64_t)((unsigned __int128)d9__pcfg.blocking_threshold_ns * tps / 1000000000u),
		__ATOMIC_RELAXED);
	__atomic_store_n(&d9__pcfg.queue_interval_ticks,
		(uint64_t)((unsigned __int128)d9__pcfg.queue_interval_ns * tps / 1000000000u),
		__ATOMIC_RELAXED);
}

/* "cpu MHz" of the first processor, in Hz, or 0. */
static uint64_t cpuinfo_hz(void)
{
	char buf[4096];

	if (!d9__file_read_small("/proc/cpuinfo", buf, sizeof(buf)))
		return 0;
	const char *p = strstr(buf, "cpu MHz");
	if (!p || !(p = strchr(p, ':')))
		return 0;
	double mhz = strtod(p + 1, NULL);
	return mhz > 100 && mhz < 100000 ? (uint64_t)(mhz * 1e6) : 0;
}

/* A first TSC frequency when the agent starts, without stalling the thread that records the
 * first event (a busy wait here shifted State Threads' cached clock): from load time to now when
 * that is long enough, else the processor's nominal rate. The writer refines it within 10 ms. */
void d9__clock_calibrate_start(void)
{
	if (d9__clock_tsc && d9__mono_ns() - first.mono_ns >= 1000000) {
		d9__clock_calibrate();
	} else if (d9__clock_tsc) {
		uint64_t hz = cpuinfo_hz();
		if (hz)
			tps = hz;
	}
	d9__clock_update_ticks();
}

/* How long the calibration baseline is now (ns): from load, or the parent's load in a child. */
uint64_t d9__clock_baseline_ns(void)
{
	return d9__mono_ns() - first.mono_ns;
}

uint64_t d9__clock_tps(void)
{
	return tps;
}

uint64_t d9_agent_ticks_to_ns(uint64_t ticks)
{
	if (!d9__clock_tsc)
		return ticks;
	return (uint64_t)((unsigned __int128)ticks * 1000000000u / tps);
}

uint64_t d9_agent_ns_to_ticks(uint64_t ns)
{
	if (!d9__clock_tsc)
		return ns;
	return (uint64_t)((unsigned __int128)ns * tps / 1000000000u);
}
