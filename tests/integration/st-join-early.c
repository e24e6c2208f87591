/*
 * st-join-early.c: a State Threads program for test-preload-st-wakes.sh, where a joinable
 * coroutine returns before anyone joins it and the scheduler then goes idle. libst gives a
 * returning joinable coroutine no out-callback (it becomes a zombie), so the idle wait that
 * follows is the first thing to run after it. During that wait a pipe becomes readable and wakes
 * the reader coroutine: the trace must show an fd Wake for it. The pipe's byte comes from a forked
 * child once the joinable coroutine, which runs after the reader blocked, tells it to (a byte on
 * a second pipe): the byte can never come before the reader waits, however the machine schedules
 * the two processes (a child that wrote after a fixed 20 ms could). The reader, woken, interrupts
 * the primordial coroutine's long sleep, so the program ends as soon as the reader has read.
 * Knows nothing of d9. Prints "reader-fd=N" (the pipe's read end) and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <st.h>

static st_thread_t primordial;
static int go_fd = -1; /* the child writes the reader's byte once this gets one */

static void *reader(void *arg)
{
	char c;

	if (st_read(arg, &c, 1, ST_UTIME_NO_TIMEOUT) != 1)
		exit(3);
	st_thread_interrupt(primordial);
	return NULL;
}

/* Runs after the reader blocked: tells the child to write, then returns (a zombie) */
static void *returns_at_once(void *arg)
{
	if (write(go_fd, "g", 1) != 1)
		exit(4);
	return arg;
}

int main(void)
{
	int pfd[2], go[2];
	pid_t child;
	st_netfd_t rfd;
	st_thread_t joinable;
	char c;

	if (pipe(pfd) != 0 || pipe(go) != 0)
		return 1;
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		close(go[1]);
		_exit(read(go[0], &c, 1) == 1 && write(pfd[1], "x", 1) == 1 ? 0 : 1);
	}
	close(pfd[1]);
	close(go[0]);
	go_fd = go[1];
	if (st_init() != 0 || !(rfd = st_netfd_open(pfd[0])))
		return 2;
	primordial = st_thread_self();
	/* run order after the primordial coroutine sleeps: the reader (blocks on the pipe), then
	 * the joinable one (returns: a zombie), then the idle wait that sees the pipe readable */
	if (!st_thread_create(reader, rfd, 0, 0) ||
	    !(joinable = st_thread_create(returns_at_once, NULL, 1, 0)))
		return 2;
	st_usleep(10000000); /* until the reader, woken, interrupts it (10 s at most) */
	if (st_thread_join(joinable, NULL) != 0)
		return 2;
	waitpid(child, NULL, 0);
	printf("reader-fd=%d\n", pfd[0]);
	return 0;
}
