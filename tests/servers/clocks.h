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

/* Waits until thread tid of this process is inside system call nr (its /proc syscall file), 10 s
 * at most, 1 ms at a time; 1 when it got there. A helper that wakes a thread after a delay
 * starts the delay only then, so the thread waits the whole delay however late the machine ran
 * it (a helper that slept from its own start could end the wait before it began). */
static __attribute__((unused)) int wait_in_syscall(pid_t tid, long nr)
{
	char path[64], buf[64];
	struct timespec ms = { 0, 1000000 };

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	for (int i = 0; i < 10000; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			long got;
			if (sscanf(buf, "%ld", &got) == 1 && got == nr)
				return 1;
		}
		nanosleep(&ms, NULL);
	}
	return 0;
}

#endif
