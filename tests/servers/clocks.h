/* clocks.h: the clocks the test servers (st-http.c, epoll-http.c, libco-http.cc) time their
 * handlers with, so that tests compare the trace with the handlers' own measure. C and C++;
 * included by one source file each (also tests/integration/st-cond-timeout.c): its functions are
 * static (and may go unused). */
#ifndef D9_TESTS_CLOCKS_H
#define D9_TESTS_CLOCKS_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* This thread's CPU time in ns. */
static __attribute__((unused)) uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in ns: the clock d9's trace times are on, so the tests compare like with like. */
static __attribute__((unused)) uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* This thread's run delay (ns spent runnable, not running: preempted) from its schedstat, 0 when
 * unreadable. Taken around the blocking calls: a preemption between or after them (in d9's wrapper,
 * say) is in the handler's time but in no call's, and a test must know how much there was. */
static __attribute__((unused)) uint64_t run_delay_ns(void)
{
	char buf[128];
	unsigned long long run = 0, wait = 0;
	ssize_t n;
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? wait : 0;
}

#endif
