/* libcount-read.so: an interposer of read() and epoll_wait() preloaded after the agent
 * (test-preload-direct.sh): counts the calls that reach it and prints the counts at exit, so
 * that a test sees whether the agent's wrappers still pass every call on to the next library. */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>

static long reads, waits;

ssize_t read(int fd, void *buf, size_t n)
{
	static ssize_t (*next)(int, void *, size_t);
	if (!next)
		next = (ssize_t(*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	__atomic_fetch_add(&reads, 1, __ATOMIC_RELAXED);
	return next(fd, buf, n);
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
	static int (*next)(int, struct epoll_event *, int, int);
	if (!next)
		next = (int (*)(int, struct epoll_event *, int, int))dlsym(RTLD_NEXT, "epoll_wait");
	__atomic_fetch_add(&waits, 1, __ATOMIC_RELAXED);
	return next(ep, ev, max, timeout);
}

__attribute__((destructor)) static void report(void)
{
	fprintf(stderr, "count-read: read %ld epoll_wait %ld\n", reads, waits);
}
