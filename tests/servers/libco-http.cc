// libco-http.cc: a small HTTP/1.1 server on Tencent libco, the way libco's own examples and its
// users write one: an accept coroutine that co_creates and co_resumes one coroutine per
// connection, libco's hooks enabled in every coroutine (so read/write/poll on sockets become
// yields to co_eventloop's epoll wait), and the main coroutine running co_eventloop. Built by
// tests/integration/test-rt-libco.sh against libco built from ../shared/third_party/, once with
// libcolib.so and once with libcolib.a. It includes no d9 header and makes no d9 call.
//
// Endpoints (one coroutine per connection, keep-alive, serve_conn):
//   /fast          "ok"
//   /burn?ms=N     N ms of thread CPU in burn_cpu (a unit of work N ms long)
//   /sleep?ms=N    poll(NULL, 0, N): libco's hook makes it a coroutine sleep (a timer wake)
//   /block?ms=N    nanosleep(N ms): not hooked by libco, it blocks the whole thread
//   /fwrite?kb=N   handle_fwrite: a fresh unlinked temp file ($TMPDIR or /tmp), write() of N KiB
//                  (default 1024), fsync(), close: blocks the whole thread as long as the disk takes
//   /loopblock?ms=N  the event loop's next callback (loop_turn, in the main coroutine) makes
//                  that nanosleep instead
//   /wait?ms=N     co_cond_timedwait on the server's one condition for N ms: "wait signalled"
//                  when a /signal woke it, "wait timeout" otherwise
//   /signal        co_cond_signal of that condition (wakes the longest waiter): "signal"
//   /stats         {"requests":R,"connections":C,"connections_open":O,"cond_waiting":W}
//   /quit          "bye", then the event loop ends and the process exits 0 after printing
//                  "loop_turns T requests R connections C" (T: co_eventloop turns, each one
//                  epoll_wait) on stdout
// /burn, /block and /fwrite time themselves (CLOCK_MONOTONIC) and reply X-Wall-Ns: the handler's
// wall time, and X-Blocked-Ns: its blocking calls' (the nanosleep; write + fsync), with
// X-Run-Delay-Ns: how long the thread was runnable but not running (preempted) meanwhile: the
// ground truth of test-rt-libco.sh's duration checks.
// serve_conn, accept_loop, handle and handle_fwrite are extern "C" so tests find them by their
// plain names.
// Options: -p PORT (0: any), -P FILE (write the port there), -t SECONDS (exit after), -q.
#include <co_routine.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h" // thread_cpu_ns, mono_ns, run_delay_ns

// libco's accept that registers the new socket with its hooks (declared by its examples, not its header)
int co_accept(int fd, struct sockaddr *addr, socklen_t *len);

static int opt_port, opt_seconds = 50, opt_quiet;
static const char *opt_port_file;
static int listen_fd = -1, quitting;
static long n_requests, n_connections, n_open, n_turns;
static long cond_waiting, signals_sent, signals_taken, loop_block_ms;
static stCoCond_t *cond;
static volatile uint64_t burn_sink;
static time_t started;
static uint64_t reply_wall_ns, reply_blocked_ns, reply_run_delay_ns; // set by a timed handler, sent as headers

struct conn {
	stCoRoutine_t *co;
	int fd;
	struct conn *next_done;
};
static struct conn *done_list; // ended coroutines, released by the event loop's callback

// Burns `ms` ms of this thread's CPU in user code (the clock is read every ~30 us).
extern "C" __attribute__((noinline)) uint64_t burn_cpu(unsigned ms)
{
	uint64_t start = thread_cpu_ns(), now = start, target = start + (uint64_t)ms * 1000000u;
	uint64_t x = burn_sink | 1;

	while (now < target) {
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005u + 1442695040888963407u;
		burn_sink = x;
		now = thread_cpu_ns();
	}
	return now - start;
}

static long query_ms(const char *q)
{
	const char *p = q ? strstr(q, "ms=") : NULL;
	long v = p ? atol(p + 3) : 10;
	return v < 0 ? 0 : v > 60000 ? 60000 : v;
}

// Writes all of buf (the hooked write polls, a yield, while the socket is full).
static int write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w <= 0) {
			if (w < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			return -1;
		}
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

// The blocking file write of /fwrite into body; sets reply_blocked_ns to write + fsync.
extern "C" __attribute__((noinline)) void handle_fwrite(const char *q, char *body, size_t n)
{
	const char *p = q ? strstr(q, "kb=") : NULL;
	long kb = p ? atol(p + 3) : 1024;
	kb = kb < 1 ? 1 : kb > 65536 ? 65536 : kb;
	const char *dir = getenv("TMPDIR");
	char path[4096];
	size_t len = (size_t)kb * 1024, off = 0;
	ssize_t w = 0;

	snprintf(path, sizeof(path), "%s/libco-http-fwrite.XXXXXX", dir && *dir ? dir : "/tmp");
	char *buf = (char *)malloc(len);
	int fd = buf ? mkstemp(path) : -1;
	if (fd < 0) {
		snprintf(body, n, "fwrite failed: %s\n", buf ? strerror(errno) : "out of memory");
		free(buf);
		return;
	}
	unlink(path);
	memset(buf, 'w', len);
	uint64_t d0 = run_delay_ns(), b0 = mono_ns();
	while (off < len) {
		w = write(fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	if (off == len && fsync(fd) < 0)
		w = -1;
	reply_blocked_ns = mono_ns() - b0;
	reply_run_delay_ns = run_delay_ns() - d0;
	if (off < len || w < 0)
		snprintf(body, n, "fwrite failed: %s\n", w < 0 ? strerror(errno) : "short write");
	else
		snprintf(body, n, "fwrite kb=%ld\n", kb);
	close(fd);
	free(buf);
}

// One request's reply body into body (size n); sets *close_after for /quit.
extern "C" __attribute__((noinline)) void handle(const char *path, char *body, size_t n,
	int *close_after)
{
	const char *q = strchr(path, '?');
	size_t plen = q ? (size_t)(q - path) : strlen(path);
	uint64_t t0 = mono_ns();

	if (plen == 5 && !memcmp(path, "/fast", 5)) {
		snprintf(body, n, "ok\n");
	} else if (plen == 5 && !memcmp(path, "/burn", 5)) {
		long ms = query_ms(q);
		uint64_t ns = burn_cpu((unsigned)ms);
		reply_wall_ns = mono_ns() - t0;
		snprintf(body, n, "burn ms=%ld cpu_ns=%llu\n", ms, (unsigned long long)ns);
	} else if (plen == 6 && !memcmp(path, "/sleep", 6)) {
		long ms = query_ms(q);
		poll(NULL, 0, (int)ms); // libco's hook: a coroutine sleep
		snprintf(body, n, "sleep ms=%ld\n", ms);
	} else if (plen == 6 && !memcmp(path, "/block", 6)) {
		long ms = query_ms(q);
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
		uint64_t d0 = run_delay_ns(), b0 = mono_ns();
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		reply_blocked_ns = mono_ns() - b0;
		reply_run_delay_ns = run_delay_ns() - d0;
		reply_wall_ns = mono_ns() - t0;
		snprintf(body, n, "block ms=%ld\n", ms);
	} else if (plen == 7 && !memcmp(path, "/fwrite", 7)) {
		handle_fwrite(q, body, n);
		reply_wall_ns = mono_ns() - t0;
	} else if (plen == 10 && !memcmp(path, "/loopblock", 10)) {
		loop_block_ms = query_ms(q);
		snprintf(body, n, "loopblock ms=%ld\n", loop_block_ms);
	} else if (plen == 5 && !memcmp(path, "/wait", 5)) {
		long ms = query_ms(q);
		cond_waiting++;
		co_cond_timedwait(cond, (int)ms); // returns 0 either way: the counters tell
		cond_waiting--;
		int woken = signals_sent > signals_taken;
		signals_taken += woken;
		snprintf(body, n, "wait %s\n", woken ? "signalled" : "timeout");
	} else if (plen == 7 && !memcmp(path, "/signal", 7)) {
		if (cond_waiting > 0)
			signals_sent++;
		co_cond_signal(cond);
		snprintf(body, n, "signal\n");
	} else if (plen == 6 && !memcmp(path, "/stats", 6)) {
		snprintf(body, n, "{\"requests\":%ld,\"connections\":%ld,\"connections_open\":%ld,"
			"\"cond_waiting\":%ld}\n", n_requests, n_connections, n_open, cond_waiting);
	} else if (plen == 5 && !memcmp(path, "/quit", 5)) {
		snprintf(body, n, "bye\n");
		*close_after = 1;
		quitting = 1;
	} else {
		snprintf(body, n, "not found\n");
	}
}

extern "C" void *serve_conn(void *arg)
{
	struct conn *c = (struct conn *)arg;
	char buf[8192], body[256], out[512];
	size_t have = 0;

	co_enable_hook_sys();
	// the descriptor's real mode becomes non-blocking under libco's fcntl hook, while the program
	// still sees the blocking mode it asked for: its reads and writes are coroutine waits
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL, 0));
	for (;;) {
		char *end = (char *)memmem(buf, have, "\r\n\r\n", 4);
		if (!end) {
			if (have == sizeof(buf))
				break;
			ssize_t r = read(c->fd, buf + have, sizeof(buf) - have);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue; // libco's read timed out (1 s): an idle keep-alive connection
			if (r <= 0)
				break;
			have += (size_t)r;
			continue;
		}
		size_t len = (size_t)(end + 4 - buf);
		char path[512] = "";
		sscanf(buf, "GET %511s", path);
		*end = 0;
		int close_after = strstr(buf, "Connection: close") || strstr(buf, "HTTP/1.0");
		n_requests++;
		reply_wall_ns = reply_blocked_ns = reply_run_delay_ns = 0;
		handle(path, body, sizeof(body), &close_after);
		char timing[128] = "";
		if (reply_wall_ns)
			snprintf(timing, sizeof(timing), "X-Wall-Ns: %llu\r\n", (unsigned long long)reply_wall_ns);
		if (reply_blocked_ns)
			snprintf(timing + strlen(timing), sizeof(timing) - strlen(timing),
				"X-Blocked-Ns: %llu\r\nX-Run-Delay-Ns: %llu\r\n",
				(unsigned long long)reply_blocked_ns, (unsigned long long)reply_run_delay_ns);
		// one write per reply: a second small write would wait for the client's delayed ACK
		int ol = snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%s%s\r\n%s",
			strlen(body), timing, close_after ? "Connection: close\r\n" : "", body);
		if (write_all(c->fd, out, (size_t)ol) || close_after)
			break;
		memmove(buf, buf + len, have - len);
		have -= len;
	}
	close(c->fd);
	n_open--;
	c->next_done = done_list;
	done_list = c;
	return NULL;
}

extern "C" void *accept_loop(void *arg)
{
	(void)arg;
	co_enable_hook_sys();
	while (!quitting) {
		struct pollfd pf = { listen_fd, POLLIN | POLLERR | POLLHUP, 0 };
		poll(&pf, 1, 1000); // hooked: a yield to the event loop
		for (;;) {
			int fd = co_accept(listen_fd, NULL, NULL);
			if (fd < 0)
				break;
			struct conn *c = (struct conn *)calloc(1, sizeof(*c));
			if (!c) {
				close(fd);
				continue;
			}
			c->fd = fd;
			n_connections++;
			n_open++;
			co_create(&c->co, NULL, serve_conn, c);
			co_resume(c->co);
		}
	}
	return NULL;
}

// co_eventloop's callback, once per loop turn (in the main coroutine): frees ended coroutines.
extern "C" __attribute__((noinline)) int loop_turn(void *arg)
{
	(void)arg;
	n_turns++;
	if (loop_block_ms) {
		struct timespec ts = { loop_block_ms / 1000, (loop_block_ms % 1000) * 1000000 };
		loop_block_ms = 0;
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	while (done_list) {
		struct conn *c = done_list;
		done_list = c->next_done;
		co_release(c->co);
		free(c);
	}
	if (quitting || (opt_seconds && time(NULL) - started >= opt_seconds))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	int ch;

	while ((ch = getopt(argc, argv, "p:P:t:q")) != -1) {
		switch (ch) {
		case 'p': opt_port = atoi(optarg); break;
		case 'P': opt_port_file = optarg; break;
		case 't': opt_seconds = atoi(optarg); break;
		case 'q': opt_quiet = 1; break;
		default:
			fprintf(stderr, "usage: libco-http [-p PORT] [-P PORTFILE] [-t SECONDS] [-q]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	started = time(NULL);
	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)opt_port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t sl = sizeof(sa);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(listen_fd, 1024) || getsockname(listen_fd, (struct sockaddr *)&sa, &sl)) {
		perror("libco-http: listen");
		return 1;
	}
	fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL, 0) | O_NONBLOCK);
	if (opt_port_file) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", opt_port_file);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", ntohs(sa.sin_port)) < 0 || fclose(f) || rename(tmp, opt_port_file)) {
			perror("libco-http: port file");
			return 1;
		}
	}
	if (!opt_quiet)
		printf("libco-http listening on 127.0.0.1:%d\n", ntohs(sa.sin_port));
	cond = co_cond_alloc();
	stCoRoutine_t *acc;
	co_create(&acc, NULL, accept_loop, NULL);
	co_resume(acc);
	co_eventloop(co_get_epoll_ct(), loop_turn, NULL);
	// the ground truth of parks: one epoll_wait per turn, then this callback
	printf("loop_turns %ld requests %ld connections %ld\n", n_turns, n_requests, n_connections);
	return 0;
}
