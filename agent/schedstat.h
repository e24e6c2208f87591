/* schedstat.h: the parse of /proc/thread-self/schedstat's content (agent/record.c), on its own
 * so that tests/unit/test-schedstat.c checks it directly. */
#ifndef D9_SCHEDSTAT_H
#define D9_SCHEDSTAT_H

#include <stdint.h>
#include <sys/types.h>

/* schedstat's content, exactly: "CPU_NS RUN_DELAY_NS SLICES\n" and nothing else (0), else -1. */
static inline int d9__sched_parse(const char *buf, ssize_t n, uint64_t *cpu_ns, uint64_t *run_delay_ns)
{
	uint64_t v[3];
	const char *p = buf, *end = buf + n;

	/* three decimal numbers, each of at least one digit and at most UINT64_MAX, separated by
	 * one space, then a newline and nothing more (by hand: strtoull took four times as long,
	 * and a reading is taken every 30 ms by every worker) */
	for (int i = 0; i < 3; i++) {
		uint64_t x = 0;
		const char *first = p;
		for (; p < end && *p >= '0' && *p <= '9'; p++)
			if (__builtin_mul_overflow(x, 10, &x) ||
				__builtin_add_overflow(x, (uint64_t)(*p - '0'), &x))
				return -1;
		if (p == first || p == end || *p++ != (i < 2 ? ' ' : '\n'))
			return -1;
		v[i] = x;
	}
	if (p != end)
		return -1;
	*cpu_ns = v[0];
	*run_delay_ns = v[1];
	return 0;
}

#endif
