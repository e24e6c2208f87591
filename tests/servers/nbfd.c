/* nbfd: reads the blocking-call wrapper must time, and reads it need not (test-preload-nbfd.sh).
 * The main thread becomes a worker (a poll with a timeout: a park); every phase below runs in a
 * loop turn of its own, between two such parks, in this order:
 *   1. 20 reads of 1 MiB from a non-blocking pipe (pipe2 O_NONBLOCK) holding the data: each
 *      takes tens of microseconds, but on a non-blocking pipe it cannot wait, so it is not timed:
 *      no BlockingCall or SchedDelay at any threshold;
 *   2. the control: the same 20 reads from a blocking pipe, timed as before;
 *   3. then seven reads that wait WAIT_MS for a helper thread to write one byte (WAIT_MS from the
 *      moment the read waits: the helper looks at the main thread's system call first), each on a
 *      descriptor the agent once saw as a non-blocking socket or whose mode changed: a blocking
 *      socketpair; SOCK_NONBLOCK cleared by fcntl F_SETFL; FIONBIO set then cleared by ioctl; a
 *      non-blocking socket closed and its number reused by pipe(); a blocking pipe dup2'ed onto
 *      a non-blocking socket's number; a non-blocking socket closed by syscall(SYS_close) and its
 *      number reused by syscall(SYS_pipe2); a non-blocking socket made blocking through a dup of
 *      it (the mode belongs to the shared open file description). Each is one BlockingCall.
 * Prints its ground truth as one JSON line: {"spans": [[start, end], ...], "waits_ns": [...]}: the
 * nine phases' reads (CLOCK_MONOTONIC ns; phases 1 and 2 from their first read to their last)
 * and the seven waits by the program's clock; exits 1 when a setup step fails, 77 when a pipe
 * cannot be given 1 MiB (fs.pipe-max-size, unprivileged). */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h" /* wait_in_syscall */

#define WAIT_MS 30
#define BIG (1 << 20)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void turn(void)
{
	poll(NULL, 0, 1); /* a park: ends one loop turn and starts the next */
}

static pid_t main_tid;

/* Writes one byte WAIT_MS after the main thread's read began to wait */
static void *late_writer(void *arg)
{
	struct timespec ts = { 0, WAIT_MS * 1000000L };

	wait_in_syscall(main_tid, SYS_read);
	nanosleep(&ts, NULL);
	if (write((int)(intptr_t)arg, "x", 1) != 1)
		exit(1);
	return NULL;
}

static uint64_t span[9][2]; /* each phase's [start, end], CLOCK_MONOTONIC ns */

/* Reads one byte from rd, which a helper writes to wr after WAIT_MS; returns the wait. */
static uint64_t wait_read(int rd, int wr)
{
	pthread_t t;
	char c;

	if (pthread_create(&t, NULL, late_writer, (void *)(intptr_t)wr) != 0)
		exit(1);
	static int i = 2;
	uint64_t t0 = now_ns();
	if (read(rd, &c, 1) != 1)
		exit(1);
	uint64_t t1 = now_ns();
	span[i][0] = t0;
	span[i++][1] = t1;
	pthread_join(t, NULL);
	return t1 - t0;
}

/* 20 reads of BIG bytes from a pipe of mode flags, each after filling it: phase `phase`. */
static void big_reads(int flags, char *buf, int phase)
{
	int p[2];

	if (pipe2(p, flags) != 0)
		exit(1);
	if (fcntl(p[1], F_SETPIPE_SZ, BIG) < BIG)
		exit(77); /* /proc/sys/fs/pipe-max-size below 1 MiB, unprivileged: the test skips */
	for (int i = 0; i < 20; i++) {
		for (ssize_t n = 0; n < BIG;) {
			ssize_t k = write(p[1], buf + n, (size_t)(BIG - n));
			if (k <= 0)
				exit(1);
			n += k;
		}
		turn(); /* the write is not the phase: the reads are */
		if (!span[phase][0])
			span[phase][0] = now_ns();
		for (ssize_t n = 0; n < BIG;) {
			ssize_t k = read(p[0], buf + n, (size_t)(BIG - n));
			if (k <= 0)
				exit(1);
			n += k;
		}
		span[phase][1] = now_ns();
	}
	close(p[0]);
	close(p[1]);
}

static void nb_pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
		exit(1);
}

int main(void)
{
	main_tid = (pid_t)syscall(SYS_gettid);
	char *buf = malloc(BIG);
	uint64_t w[7];
	int sv[2], p[2], on;

	if (!buf)
		return 1;
	memset(buf, 'a', BIG);
	turn();
	big_reads(O_NONBLOCK, buf, 0); /* phase 1 */
	turn();
	big_reads(0, buf, 1); /* phase 2 */
	turn();
	/* a: a blocking socketpair */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	w[0] = wait_read(sv[0], sv[1]);
	close(sv[0]);
	close(sv[1]);
	turn();
	/* b: SOCK_NONBLOCK cleared by F_SETFL */
	nb_pair(sv);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) & ~O_NONBLOCK);
	w[1] = wait_read(sv[0], sv[1]);
	close(sv[0]);
	close(sv[1]);
	turn();
	/* c: FIONBIO on, then off */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	on = 1;
	ioctl(sv[0], FIONBIO, &on);
	on = 0;
	ioctl(sv[0], FIONBIO, &on);
	w[2] = wait_read(sv[0], sv[1]);
	close(sv[0]);
	close(sv[1]);
	turn();
	/* d: a non-blocking socket's number reused by pipe() */
	nb_pair(sv);
	close(sv[0]);
	close(sv[1]);
	if (pipe(p) != 0 || p[0] != sv[0])
		return 1;
	w[3] = wait_read(p[0], p[1]);
	close(p[0]);
	close(p[1]);
	turn();
	/* e: a blocking pipe dup2'ed onto a non-blocking socket's number */
	nb_pair(sv);
	if (pipe(p) != 0 || dup2(p[0], sv[0]) != sv[0])
		return 1;
	w[4] = wait_read(sv[0], p[1]);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	turn();
	/* f: closed by syscall(SYS_close), the number reused by syscall(SYS_pipe2) */
	nb_pair(sv);
	syscall(SYS_close, sv[0]);
	if (syscall(SYS_pipe2, p, 0) != 0 || p[0] != sv[0])
		return 1;
	w[5] = wait_read(p[0], p[1]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	turn();
	/* g: made blocking through a duplicate */
	nb_pair(sv);
	int d = dup(sv[0]);
	if (d < 0)
		return 1;
	fcntl(d, F_SETFL, fcntl(d, F_GETFL) & ~O_NONBLOCK);
	w[6] = wait_read(sv[0], sv[1]);
	close(d);
	close(sv[0]);
	close(sv[1]);
	turn();
	printf("{\"spans\": [");
	for (int i = 0; i < 9; i++)
		printf("%s[%llu, %llu]", i ? ", " : "", (unsigned long long)span[i][0],
			(unsigned long long)span[i][1]);
	printf("], \"waits_ns\": [");
	for (int i = 0; i < 7; i++)
		printf("%s%llu", i ? ", " : "", (unsigned long long)w[i]);
	printf("]}\n");
	free(buf);
	return 0;
}
