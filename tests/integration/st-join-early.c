/*
 * st-join-early.c: a State Threads program for test-preload-st-wakes.sh, where a joinable
 * coroutine returns before anyone joins it and the scheduler then goes idle. libst gives a
 * returning joinable coroutine no out-callback (it becomes a zombie), so the idle wait that
 * follows is the first thing to run after it. During that wait a pipe becomes readable (a forked
 * child writes after 20 ms) and wakes the reader coroutine: the trace must show an fd Wake for it.
 * Knows nothing of d9. Prints "reader-fd=N" (the pipe's read end) and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <st.h>

static void *reader(void *arg)
{
	char c;

	if (st_read(arg, &c, 1, ST_UTIME_NO_TIMEOUT) != 1)
		exit(3);
	return NULL;
}

static void *returns_at_once(void *arg)
{
	return arg;
}

int main(void)
{
	int pfd[2];
	pid_t child;
	st_netfd_t rfd;
	st_thread_t joinable;

	if (pipe(pfd) != 0)
		return 1;
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		usleep(20000);
		_exit(write(pfd[1], "x", 1) == 1 ? 0 : 1);
	}
	close(pfd[1]);
	if (st_init() != 0 || !(rfd = st_netfd_open(pfd[0])))
		return 2;
	/* run order after the primordial coroutine sleeps: the reader (blocks on the pipe), then
	 * the joinable one (returns: a zombie), then the idle wait that sees the pipe readable */
	if (!st_thread_create(reader, rfd, 0, 0) ||
	    !(joinable = st_thread_create(returns_at_once, NULL, 1, 0)))
		return 2;
	st_usleep(100000);
	if (st_thread_join(joinable, NULL) != 0)
		return 2;
	waitpid(child, NULL, 0);
	printf("reader-fd=%d\n", pfd[0]);
	return 0;
}
