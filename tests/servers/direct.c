/* direct: the calls whose wrappers may enter the kernel themselves (preload/libc-direct.c), for
 * test-preload-direct.sh.
 *   direct sem [thread]   makes each of those calls in success and error cases (bad descriptor,
 *                         wrong kind, bad argument, nothing ready, a signal during the wait with
 *                         and without SA_RESTART, select's remaining time, refused and repeated
 *                         connects) and prints one line per call: name, result (0 for any
 *                         descriptor), errno name, what it read. With "thread" a thread of
 *                         the program's own exists first (the agent goes through the C library).
 *                         The lines must be the same with and without the agent.
 *   direct count N [thread]
 *                         one wait (a park: the agent starts its threads at its first event),
 *                         then N writes and N reads of one byte through a pipe (under callgrind:
 *                         who takes glibc's cancellation path).
 *   direct huge          ppoll, pselect, select and epoll_pwait2 on a ready pipe with the
 *                         largest timeouts their types hold (they return at once): the agent
 *                         converts each to microseconds, saturated (no signed overflow);
 *                         prints the four results.
 *   direct cancel read|thrd
 *                         a thread of the program, started by pthread_create, blocks in read()
 *                         on an empty pipe (read), or one started by thrd_create blocks in
 *                         epoll_wait() (thrd); pthread_cancel must end it: prints "cancelled", or
 *                         "not cancelled within 20 s".
 * Exits 1 when a set-up step fails. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "direct: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void show(const char *name, long r, int err, const char *data, size_t n)
{
	printf("%-28s %ld %s", name, r, r < 0 ? strerrorname_np(err) : "-");
	if (data && r > 0)
		printf(" \"%.*s\"", (int)(n < (size_t)r ? n : (size_t)r), data);
	printf("\n");
}

/* CALL(name, expr): runs expr with errno cleared and prints its result */
#define CALL(name, expr)                                                                 \
	do {                                                                             \
		errno = 0;                                                               \
		long r_ = (long)(expr);                                                  \
		show(name, r_, errno, NULL, 0);                                          \
	} while (0)
#define CALL_READ(name, expr, buf)                                                       \
	do {                                                                             \
		errno = 0;                                                               \
		memset(buf, 0, sizeof buf);                                              \
		long r_ = (long)(expr);                                                  \
		show(name, r_, errno, buf, sizeof buf);                                  \
	} while (0)

/* a call returning a descriptor: 0 for any descriptor */
#define CALL_FD(name, expr)                                                              \
	do {                                                                             \
		errno = 0;                                                               \
		long r_ = (long)(expr);                                                  \
		show(name, r_ < 0 ? r_ : 0, errno, NULL, 0);                             \
	} while (0)

static void on_alarm(int sig)
{
	(void)sig;
}

/* SIGALRM every 20 ms, with or without SA_RESTART, until alarm_off: a signal that comes before
 * the call begins (a loaded machine) is followed by another during it */
static void alarm_soon(int restart)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 20000 }, { 0, 20000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static void alarm_off(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static void *idle_thread(void *arg)
{
	return arg;
}

static void own_thread(void)
{
	pthread_t th;
	if (pthread_create(&th, NULL, idle_thread, NULL) != 0)
		die("pthread_create");
	pthread_join(th, NULL);
}

static int sem(void)
{
	int p[2], s[2], q[2];
	char buf[16];

	if (pipe(p) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, s) != 0 || pipe(q) != 0)
		die("pipe/socketpair");

	/* read, write, readv, writev */
	CALL("write", write(p[1], "abc", 3));
	CALL_READ("read", read(p[0], buf, sizeof buf), buf);
	CALL("read bad fd", read(-1, buf, 1));
	CALL("write bad fd", write(-1, "x", 1));
	CALL("write to read end", write(p[0], "x", 1));
	void *volatile nowhere = (void *)8;
	CALL("read bad buffer", (write(p[1], "z", 1), read(p[0], nowhere, 1)));
	struct iovec wv[2] = { { "de", 2 }, { "fgh", 3 } };
	CALL("writev", writev(p[1], wv, 2));
	char a[2], b[8];
	memset(b, 0, sizeof b);
	struct iovec rv[2] = { { a, 2 }, { b, sizeof b } };
	errno = 0;
	long r = readv(p[0], rv, 2);
	show("readv", r, errno, b, sizeof b);
	volatile int minus_one = -1;
	CALL("readv bad count", readv(p[0], rv, minus_one));
	CALL("writev bad fd", writev(-1, wv, 2));

	/* recv, recvfrom, recvmsg, send, sendto, sendmsg */
	CALL("send", send(s[0], "hello", 5, 0));
	CALL_READ("recv peek", recv(s[1], buf, sizeof buf, MSG_PEEK), buf);
	CALL_READ("recvfrom", recvfrom(s[1], buf, sizeof buf, 0, NULL, NULL), buf);
	CALL("recv empty dontwait", recv(s[1], buf, sizeof buf, MSG_DONTWAIT));
	CALL("recv not a socket", recv(p[0], buf, sizeof buf, 0));
	CALL("send bad fd", send(-1, "x", 1, 0));
	CALL("sendto", sendto(s[0], "ij", 2, 0, NULL, 0));
	CALL_READ("recv", recv(s[1], buf, sizeof buf, 0), buf);
	struct iovec mv = { "klmn", 4 };
	struct msghdr m = { .msg_iov = &mv, .msg_iovlen = 1 };
	CALL("sendmsg", sendmsg(s[0], &m, 0));
	memset(buf, 0, sizeof buf);
	struct iovec iv = { buf, sizeof buf };
	struct msghdr rm = { .msg_iov = &iv, .msg_iovlen = 1 };
	errno = 0;
	r = recvmsg(s[1], &rm, 0);
	show("recvmsg", r, errno, buf, sizeof buf);
	CALL("recvmsg bad fd", recvmsg(-1, &rm, 0));
	CALL("sendmsg not a socket", sendmsg(p[1], &m, 0));

	/* epoll_wait, epoll_pwait */
	int ep = epoll_create1(0);
	if (ep < 0)
		die("epoll_create1");
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 42 }, got[4];
	CALL("epoll_wait nothing", epoll_wait(ep, got, 4, 0));
	if (epoll_ctl(ep, EPOLL_CTL_ADD, s[1], &ev) != 0)
		die("epoll_ctl");
	send(s[0], "o", 1, 0);
	CALL("epoll_wait ready", epoll_wait(ep, got, 4, -1));
	printf("%-28s %llu\n", "epoll_wait data", (unsigned long long)got[0].data.u64);
	CALL("epoll_wait bad fd", epoll_wait(-1, got, 4, 0));
	CALL("epoll_wait no room", epoll_wait(ep, got, 0, 0));
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	CALL("epoll_pwait ready", epoll_pwait(ep, got, 4, 100, &mask));
	CALL("epoll_pwait no mask", epoll_pwait(ep, got, 4, 0, NULL));
	recv(s[1], buf, sizeof buf, 0);
	CALL("epoll_wait timeout", epoll_wait(ep, got, 4, 10));
	/* failures of waits that park (a timeout): the wrapper's plain path in a worker */
	CALL("epoll_wait bad fd, parked", epoll_wait(-1, got, 4, 10));
	CALL("epoll_wait no room, parked", epoll_wait(ep, got, 0, 10));

	/* poll, select */
	struct pollfd pf = { .fd = s[1], .events = POLLIN };
	CALL("poll nothing", poll(&pf, 1, 0));
	send(s[0], "p", 1, 0);
	CALL("poll ready", poll(&pf, 1, -1));
	printf("%-28s %#x\n", "poll revents", pf.revents);
	struct pollfd bad = { .fd = 1000000, .events = POLLIN };
	CALL("poll closed fd", poll(&bad, 1, 0));
	printf("%-28s %#x\n", "poll revents", bad.revents);
	CALL("poll empty", poll(NULL, 0, 0));
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(s[1], &rd);
	struct timeval tv = { 0, 0 };
	CALL("select ready", select(s[1] + 1, &rd, NULL, NULL, &tv));
	printf("%-28s %d\n", "select set", FD_ISSET(s[1], &rd));
	recv(s[1], buf, sizeof buf, 0);
	FD_ZERO(&rd);
	FD_SET(s[1], &rd);
	tv = (struct timeval){ 0, 20000 };
	CALL("select timeout", select(s[1] + 1, &rd, NULL, NULL, &tv));
	printf("%-28s %ld %ld\n", "select time left", (long)tv.tv_sec, (long)tv.tv_usec);
	send(s[0], "s", 1, 0);
	FD_ZERO(&rd);
	FD_SET(s[1], &rd);
	tv = (struct timeval){ 1, 2500000 }; /* 3.5 s: the microseconds carried into seconds */
	CALL("select carried time", select(s[1] + 1, &rd, NULL, NULL, &tv));
	printf("%-28s %ld\n", "select seconds left", (long)tv.tv_sec);
	recv(s[1], buf, sizeof buf, 0);
	FD_ZERO(&rd);
	FD_SET(s[1], &rd);
	tv = (struct timeval){ -1, 5 };
	CALL("select negative seconds", select(s[1] + 1, &rd, NULL, NULL, &tv));
	tv = (struct timeval){ 0, -1 };
	CALL("select negative time", select(s[1] + 1, &rd, NULL, NULL, &tv));
	CALL("select bad nfds", select(-1, NULL, NULL, NULL, &tv));

	/* a signal during the wait */
	alarm_soon(0);
	CALL("read interrupted", read(q[0], buf, 1));
	alarm_off();
	alarm_soon(1);
	CALL("poll interrupted", poll(&pf, 1, -1));
	alarm_off();
	alarm_soon(1);
	CALL("epoll_wait interrupted", epoll_wait(ep, got, 4, -1));
	alarm_off();
	alarm_soon(1);
	FD_ZERO(&rd);
	FD_SET(q[0], &rd);
	CALL("select interrupted", select(q[0] + 1, &rd, NULL, NULL, NULL));
	alarm_off();
	/* SA_RESTART: the read goes on after the handler, until a child writes */
	fflush(stdout);
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		struct timespec ts = { 0, 60000000 };
		nanosleep(&ts, NULL);
		write(q[1], "r", 1);
		_exit(0);
	}
	alarm_soon(1);
	CALL_READ("read restarted", read(q[0], buf, sizeof buf), buf);
	alarm_off();
	waitpid(child, NULL, 0);

	/* open, openat, pread, pwrite: descriptor numbers differ with the agent's own files open, so
	 * a descriptor shows as 0 */
	char path[64];
	snprintf(path, sizeof path, "/tmp/d9-direct-%d", (int)getpid());
	CALL_FD("open missing", open("/nonexistent/d9", O_RDONLY));
	CALL_FD("open create", open(path, O_RDWR | O_CREAT | O_EXCL, 0600));
	CALL_FD("open exists", open(path, O_RDWR | O_CREAT | O_EXCL, 0600));
	CALL_FD("openat bad dir", openat(-5, "relative", O_RDONLY));
	int f = openat(AT_FDCWD, path, O_RDWR);
	CALL_FD("openat", f);
	CALL("pwrite", pwrite(f, "xyz", 3, 5));
	CALL_READ("pread", pread(f, buf, sizeof buf, 5), buf);
	CALL("pread past end", pread(f, buf, sizeof buf, 100));
	CALL("pread bad fd", pread(-1, buf, 1, 0));
	CALL("pread a pipe", pread(q[0], buf, 1, 0));
	CALL("pwrite negative offset", pwrite(f, "x", 1, -1));
	close(f);
	unlink(path);

	/* accept, accept4, connect */
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t slen = sizeof sin;
	if (l < 0 || bind(l, (struct sockaddr *)&sin, sizeof sin) != 0 ||
		getsockname(l, (struct sockaddr *)&sin, &slen) != 0)
		die("listening socket");
	int c1 = socket(AF_INET, SOCK_STREAM, 0), c2 = socket(AF_INET, SOCK_STREAM, 0);
	CALL("accept not listening", accept(l, NULL, NULL));
	CALL("connect refused", connect(c1, (struct sockaddr *)&sin, sizeof sin));
	if (listen(l, 8) != 0)
		die("listen");
	close(c1);
	c1 = socket(AF_INET, SOCK_STREAM, 0);
	CALL("connect", connect(c1, (struct sockaddr *)&sin, sizeof sin));
	CALL("connect again", connect(c1, (struct sockaddr *)&sin, sizeof sin));
	CALL("connect bad fd", connect(-1, (struct sockaddr *)&sin, sizeof sin));
	CALL("connect 2", connect(c2, (struct sockaddr *)&sin, sizeof sin));
	CALL_FD("accept", accept(l, NULL, NULL));
	CALL_FD("accept4 nonblock", accept4(l, NULL, NULL, SOCK_NONBLOCK));
	CALL_FD("accept4 none waiting", (fcntl(l, F_SETFL, O_NONBLOCK), accept4(l, NULL, NULL, 0)));
	CALL_FD("accept4 bad flags", accept4(l, NULL, NULL, 12345));
	CALL_FD("accept bad fd", accept(-1, NULL, NULL));

	/* close */
	CALL("close", close(p[0]));
	CALL("close again", close(p[0]));
	CALL("close bad fd", close(-1));
	return 0;
}

static int count(long n)
{
	int p[2];
	char c = 'x';

	if (pipe(p) != 0)
		die("pipe");
	poll(NULL, 0, 1); /* a park: the agent starts (its threads with it) at its first event */
	for (long i = 0; i < n; i++)
		if (write(p[1], &c, 1) != 1 || read(p[0], &c, 1) != 1)
			die("pipe i/o");
	printf("count %ld\n", n);
	return 0;
}

static int pipe_r[2], ready_w[2];

static void tell_tid(void)
{
	pid_t tid = gettid();
	write(ready_w[1], &tid, sizeof tid);
}

static void *reader(void *arg)
{
	char c;
	(void)arg;
	tell_tid();
	read(pipe_r[0], &c, 1); /* nothing is ever written */
	return NULL;
}

static int waiter(void *arg)
{
	struct epoll_event got;
	(void)arg;
	int ep = epoll_create1(0);
	tell_tid();
	epoll_wait(ep, &got, 1, -1); /* nothing is ever ready */
	return 0;
}

/* 1 once thread tid sits in system call nr (/proc/self/task/TID/syscall; where that file
 * cannot be read, its state in stat is sleeping), 0 after 20 s */
static int in_syscall(pid_t tid, long nr)
{
	char path[64], line[256];
	for (int i = 0; i < 20000; i++) {
		snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
		FILE *f = fopen(path, "r");
		long got = -2;
		if (f) {
			if (!fgets(line, sizeof line, f) || sscanf(line, "%ld", &got) != 1)
				got = -2;
			fclose(f);
		}
		if (got == nr)
			return 1;
		if (got == -2) {
			snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
			f = fopen(path, "r");
			char st = 0;
			if (f) {
				if (fgets(line, sizeof line, f) && strrchr(line, ')'))
					st = strrchr(line, ')')[2];
				fclose(f);
			}
			if (st == 'S')
				return 1;
		}
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* with_thrd: the thread is started by thrd_create and waits in epoll_wait, else by
 * pthread_create in read */
static int cancel(int with_thrd)
{
	pthread_t a;
	thrd_t b;

	if (pipe(pipe_r) != 0 || pipe(ready_w) != 0)
		die("pipe");
	if (with_thrd ? thrd_create(&b, waiter, NULL) != thrd_success
		      : pthread_create(&a, NULL, reader, NULL) != 0)
		die("thread");
	if (with_thrd)
		a = (pthread_t)b;
	pid_t tid;
	if (read(ready_w[0], &tid, sizeof tid) != sizeof tid)
		die("read tid");
	if (!in_syscall(tid, with_thrd ? SYS_epoll_wait : SYS_read))
		printf("the thread did not reach its wait within 20 s\n");
	pthread_cancel(a);
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 20;
	void *res;
	if (pthread_timedjoin_np(a, &res, &dl) == 0 && res == PTHREAD_CANCELED)
		printf("cancelled\n");
	else
		printf("not cancelled within 20 s\n");
	fflush(stdout);
	_exit(0); /* a stuck thread must not hold the exit */
}

/* direct huge: waits whose timeouts overflow int64 microseconds, on a descriptor that is ready */
static int huge(void)
{
	int p[2];
	char c = 'x';

	if (pipe(p) != 0 || write(p[1], &c, 1) != 1)
		return 1;
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	struct timespec forever = { .tv_sec = (time_t)((~0ull) >> 1), .tv_nsec = 999999999 };
	printf("ppoll %d\n", ppoll(&pf, 1, &forever, NULL));
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(p[0], &rd);
	struct timeval tv = { .tv_sec = (time_t)((~0ull) >> 1), .tv_usec = 999999 };
	printf("pselect %d\n", pselect(p[0] + 1, &rd, NULL, NULL, &forever, NULL));
	printf("select %d\n", select(p[0] + 1, &rd, NULL, NULL, &tv));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN }, out;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) != 0)
		return 1;
	printf("epoll_pwait2 %d\n", epoll_pwait2(ep, &out, 1, &forever, NULL));
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "sem")) {
		if (argc >= 3 && !strcmp(argv[2], "thread"))
			own_thread();
		return sem();
	}
	if (argc >= 3 && !strcmp(argv[1], "count")) {
		if (argc >= 4 && !strcmp(argv[3], "thread"))
			own_thread();
		return count(atol(argv[2]));
	}
	if (argc >= 3 && !strcmp(argv[1], "cancel"))
		return cancel(!strcmp(argv[2], "thrd"));
	if (argc >= 2 && !strcmp(argv[1], "huge"))
		return huge();
	fprintf(stderr, "usage: direct sem [thread] | count N [thread] | huge | cancel read|thrd\n");
	return 2;
}
