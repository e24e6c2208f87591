/*
 * st-http.c: a small HTTP/1.1 test server on State Threads (libst), one coroutine per connection,
 * with endpoints that burn CPU, park, block the whole scheduler, read or write a file and spawn
 * coroutines. The slow handlers (/burn, /block, /fwrite) time themselves (CLOCK_MONOTONIC) and put
 * that ground truth in X-Wall-Ns (and X-Blocked-Ns, X-Run-Delay-Ns) reply headers for the tests.
 * The interposition tests run it under LD_PRELOAD; it must never know about d9 (no d9 headers, no
 * d9 calls) and must never install SIGTERM/SIGINT handlers (the agent relies on their absence).
 * Endpoints, options and the exact per-request call counts are documented in README.md beside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <st.h>

#include "clocks.h" /* thread_cpu_ns, mono_ns, run_delay_ns */
#include "reqlog.h" /* HTTP_REQUEST_LOG (test-requests.sh) */

#define REQ_MAX        8192              /* request head limit; larger heads get 431 */
#define BODY_MAX       4096              /* reply body limit */
#define CONN_STACK     (128 * 1024)      /* connection coroutine stack (ST's default is 64 KiB) */
#define FILE_SIZE      (4 * 1024 * 1024) /* /file reads this many bytes ... */
#define FILE_CHUNK     (64 * 1024)       /* ... in read() calls of this size: 64 reads + 1 at EOF */
#define FILE_KB_MAX    1024              /* /file?kb=N reads N KiB a call instead, at most this */
#define FANOUT_MAX     1024
#define MS_MAX         60000
#define FWRITE_KB_MAX  (64 * 1024)       /* /fwrite writes at most this many KiB */

enum endpoint { EP_FAST, EP_BURN, EP_SLEEP, EP_BLOCK, EP_FILE, EP_FWRITE, EP_FANOUT, EP_JOIN,
	EP_STATS, EP_QUIT, EP_OTHER, EP_COUNT };
static const char *const ep_names[EP_COUNT] = { "fast", "burn", "sleep", "block", "file",
	"fwrite", "fanout", "join", "stats", "quit", "other" };

/* One reply under construction; handlers fill it, serve_conn sends it with one st_write. */
struct reply {
	int status;
	const char *type;
	int close;                      /* send Connection: close and end the connection */
	int quit;                       /* exit(0) after the reply is written */
	uint64_t wall_ns;               /* the handler's own wall time, 0: not measured */
	uint64_t blocked_ns;            /* its blocking calls' wall time, 0: not measured */
	uint64_t run_delay_ns;          /* runnable but not running during those calls */
	size_t len;                     /* bytes used in body, always < BODY_MAX */
	char body[BODY_MAX];
};

/* Shared between a /fanout handler and its children; lives on the handler's stack, which
 * outlives the children because the handler waits until done == k. */
struct fanout {
	int k;
	int done;
	st_cond_t cond;
};

/* ---- options and per-process state ------------------------------------------------------- */
static int opt_port = 8080;
static int opt_workers;
static int opt_eventsys = ST_EVENTSYS_DEFAULT;
static int opt_switch_cb;
static const char *opt_port_file;
static int opt_seconds;
static int opt_quiet;
static int opt_fixed_ids; /* -F: X-Pid formatted once, 8 wide (bench-cost.sh) */
/* -T: a connection's idle timeout, as servers keep one (st_read's timeout; bench-cost.sh) */
static st_utime_t read_timeout = ST_UTIME_NO_TIMEOUT;

static int listen_fd = -1;
static int bound_port;
static int data_fd = -1;                /* unlinked temp file read by /file */
static int worker_index = -1;           /* -1: single process, else 0..opt_workers-1 */
static pid_t my_pid;

static unsigned long req_count[EP_COUNT];
static unsigned long conn_total, conn_open;
static unsigned long switch_in_calls, switch_out_calls;
static unsigned long fanout_children, fanout_signals;
static volatile uint64_t burn_sink;
static char file_buf[FILE_KB_MAX * 1024]; /* static: too big for a coroutine stack, and /file never
					 * yields between reads, so one buffer per process is enough */

/* The functions tests look for by name in stacks: visible symbols, never inlined. */
uint64_t burn_cpu(unsigned ms) __attribute__((noinline));
void handle_fast(struct reply *r, const char *query) __attribute__((noinline));
void handle_burn(struct reply *r, const char *query) __attribute__((noinline));
void handle_sleep(struct reply *r, const char *query) __attribute__((noinline));
void handle_block(struct reply *r, const char *query) __attribute__((noinline));
void handle_file(struct reply *r, const char *query) __attribute__((noinline));
void handle_fwrite(struct reply *r, const char *query) __attribute__((noinline));
void handle_fanout(struct reply *r, const char *query) __attribute__((noinline));
void handle_join(struct reply *r, const char *query) __attribute__((noinline));
void handle_stats(struct reply *r, const char *query) __attribute__((noinline));
void handle_quit(struct reply *r, const char *query) __attribute__((noinline));
void *fanout_child(void *arg) __attribute__((noinline));
void *join_child(void *arg) __attribute__((noinline));

static void die(const char *what)
{
	fprintf(stderr, "st-http: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: st-http [-p PORT] [-w N] [-e select|poll|alt] [-c] [-P FILE] "
		"[-t SECONDS] [-q] [-F] [-T MS]\n");
	exit(2);
}

static void body_printf(struct reply *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void body_printf(struct reply *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(r->body + r->len, sizeof(r->body) - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += (size_t)n < sizeof(r->body) - r->len ? (size_t)n : sizeof(r->body) - r->len - 1;
}

/* Returns the value of `key` in a query string clamped to [lo, hi], or def when absent or not a
 * number. */
static long query_long(const char *query, const char *key, long def, long lo, long hi)
{
	size_t klen = strlen(key);
	const char *p = query;
	char *end;
	long v;

	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
			errno = 0;
			v = strtol(p + klen + 1, &end, 10);
			if (errno || end == p + klen + 1)
				return def;
			return v < lo ? lo : v > hi ? hi : v;
		}
		p = strchr(p, '&');
		if (p)
			p++;
	}
	return def;
}

/* Burns `ms` milliseconds of this thread's CPU time in user code (the clock is read only every
 * ~30 us, so samples land here and not in the kernel). Returns the CPU nanoseconds consumed. */
uint64_t burn_cpu(unsigned ms)
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

/* ---- handlers: each fills *r; query may be "" --------------------------------------------- */
void handle_fast(struct reply *r, const char *query)
{
	(void)query;
	body_printf(r, "ok\n");
}

void handle_burn(struct reply *r, const char *query)
{
	long ms = query_long(query, "ms", 10, 0, MS_MAX);
	uint64_t t0 = mono_ns(), ns = burn_cpu((unsigned)ms);

	r->wall_ns = mono_ns() - t0;
	body_printf(r, "burn ms=%ld cpu_ns=%llu\n", ms, (unsigned long long)ns);
}

void handle_sleep(struct reply *r, const char *query)
{
	long ms = query_long(query, "ms", 10, 0, MS_MAX);

	st_usleep((st_utime_t)ms * 1000);
	body_printf(r, "sleep ms=%ld\n", ms);
}

/* The classic coroutine bug: a blocking libc sleep stalls every coroutine of this process. */
void handle_block(struct reply *r, const char *query)
{
	long ms = query_long(query, "ms", 10, 0, MS_MAX);
	uint64_t t0 = mono_ns(), d0 = run_delay_ns(), t1;

	usleep((useconds_t)ms * 1000);
	t1 = mono_ns();
	r->run_delay_ns = run_delay_ns() - d0;
	r->wall_ns = r->blocked_ns = t1 - t0;
	body_printf(r, "block ms=%ld\n", ms);
}

/* Blocking file I/O on the scheduler thread: a fresh open of the temp file (through /proc, so
 * each request has its own offset even across forked workers), read() to EOF, close. */
void handle_file(struct reply *r, const char *query)
{
	size_t chunk = (size_t)query_long(query, "kb", FILE_CHUNK / 1024, 1, FILE_KB_MAX) * 1024;
	char path[64];
	size_t total = 0;
	unsigned reads = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", data_fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r->status = 500;
		body_printf(r, "open: %s\n", strerror(errno));
		return;
	}
	for (;;) {
		n = read(fd, file_buf, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		reads++;
		total += (size_t)n;
	}
	if (n < 0) {
		r->status = 500;
		body_printf(r, "read: %s\n", strerror(errno));
	} else {
		body_printf(r, "file bytes=%zu reads=%u\n", total, reads);
	}
	close(fd);
}

/* A blocking file write on the scheduler thread: a fresh temp file (created and unlinked at
 * once, in $TMPDIR or /tmp), one write() of kb KiB (more only if it comes back short), fsync(),
 * close. How long that takes is what it is (the disk's); blocked_ns is write + fsync. */
void handle_fwrite(struct reply *r, const char *query)
{
	long kb = query_long(query, "kb", 1024, 1, FWRITE_KB_MAX);
	const char *dir = getenv("TMPDIR");
	size_t len = (size_t)kb * 1024, off = 0;
	uint64_t t0 = mono_ns(), b0, b1, d0;
	char path[4096], *buf;
	ssize_t n = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/st-http-fwrite.XXXXXX", dir && *dir ? dir : "/tmp");
	buf = malloc(len);
	fd = buf ? mkstemp(path) : -1;
	if (fd < 0) {
		r->status = 500;
		body_printf(r, "fwrite: %s\n", buf ? strerror(errno) : "out of memory");
		free(buf);
		return;
	}
	unlink(path);
	memset(buf, 'w', len);
	d0 = run_delay_ns();
	b0 = mono_ns();
	while (off < len) {
		n = write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (off == len && fsync(fd) < 0)
		n = -1;
	b1 = mono_ns();
	r->run_delay_ns = run_delay_ns() - d0;
	if (off < len || n < 0) {
		r->status = 500;
		body_printf(r, "fwrite: %s\n", n < 0 ? strerror(errno) : "short write");
	} else {
		body_printf(r, "fwrite kb=%ld\n", kb);
	}
	close(fd);
	free(buf);
	r->blocked_ns = b1 - b0;
	r->wall_ns = mono_ns() - t0;
}

/* Fan-out child: park 1 ms, count itself done; the last one wakes the handler. */
void *fanout_child(void *arg)
{
	struct fanout *f = arg;

	st_usleep(1000);
	f->done++;
	fanout_children++;
	if (f->done == f->k) {
		fanout_signals++;
		st_cond_signal(f->cond);
	}
	return NULL;
}

/* Spawns k detached children and waits on a condition until all are done. st_thread_create
 * does not switch, so the handler is always waiting before any child runs: exactly one
 * st_cond_wait and one st_cond_signal per request with k >= 1. */
void handle_fanout(struct reply *r, const char *query)
{
	int want = (int)query_long(query, "k", 4, 0, FANOUT_MAX), spawned = 0;
	struct fanout f = { .k = want };

	f.cond = st_cond_new();
	if (!f.cond) {
		r->status = 500;
		body_printf(r, "st_cond_new: %s\n", strerror(errno));
		return;
	}
	for (int i = 0; i < f.k; i++) {
		if (!st_thread_create(fanout_child, &f, 0, 0))
			break;
		spawned++;
	}
	f.k = spawned;          /* children not yet run: lowering k keeps the last-one rule exact */
	while (f.done < f.k)
		st_cond_wait(f.cond);
	st_cond_destroy(f.cond);
	if (spawned < want)
		r->status = 500;
	body_printf(r, "fanout k=%d done=%d\n", f.k, f.done);
}

void *join_child(void *arg)
{
	st_usleep(1000);
	return arg;
}

/* Spawns one joinable coroutine (it parks 1 ms) and joins it. */
void handle_join(struct reply *r, const char *query)
{
	static int token;
	void *ret = NULL;
	st_thread_t t;

	(void)query;
	t = st_thread_create(join_child, &token, 1, 0);
	if (!t || st_thread_join(t, &ret) < 0 || ret != &token) {
		r->status = 500;
		body_printf(r, "join failed: %s\n", strerror(errno));
		return;
	}
	body_printf(r, "join ok\n");
}

void handle_stats(struct reply *r, const char *query)
{
	(void)query;
	r->type = "application/json";
	body_printf(r, "{\"pid\":%d,\"worker\":%d,\"eventsys\":\"%s\",\"requests\":{",
		    (int)my_pid, worker_index, st_get_eventsys_name());
	for (int i = 0; i < EP_COUNT; i++)
		body_printf(r, "%s\"%s\":%lu", i ? "," : "", ep_names[i], req_count[i]);
	body_printf(r, "},\"connections_total\":%lu,\"connections_open\":%lu,"
		    "\"switch_cb\":%s,\"switch_in_calls\":%lu,\"switch_out_calls\":%lu,"
		    "\"fanout_children\":%lu,\"fanout_signals\":%lu}\n",
		    conn_total, conn_open, opt_switch_cb ? "true" : "false",
		    switch_in_calls, switch_out_calls, fanout_children, fanout_signals);
}

void handle_quit(struct reply *r, const char *query)
{
	(void)query;
	r->close = 1;
	r->quit = 1;
	body_printf(r, "bye\n");
}

/* ---- HTTP ----------------------------------------------------------------------------------- */
static const struct route {
	const char *path;
	enum endpoint ep;
	void (*fn)(struct reply *r, const char *query);
} routes[] = {
	{ "/fast", EP_FAST, handle_fast },
	{ "/burn", EP_BURN, handle_burn },
	{ "/sleep", EP_SLEEP, handle_sleep },
	{ "/block", EP_BLOCK, handle_block },
	{ "/file", EP_FILE, handle_file },
	{ "/fwrite", EP_FWRITE, handle_fwrite },
	{ "/fanout", EP_FANOUT, handle_fanout },
	{ "/join", EP_JOIN, handle_join },
	{ "/stats", EP_STATS, handle_stats },
	{ "/quit", EP_QUIT, handle_quit },
};

static const char *status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	default: return "Internal Server Error";
	}
}

/* Finds the end of the request head. Returns its length including the blank line, or 0. */
static size_t head_length(const char *buf, size_t len)
{
	for (size_t i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
			return i + 1;
	return 0;
}

/* Returns the value of header `name` (NUL-terminated at its line end, in place), or NULL. */
static char *header_value(char *head, const char *name)
{
	size_t nlen = strlen(name);
	char *line = strstr(head, "\r\n");

	while (line && line[2] != '\r' && line[2]) {
		line += 2;
		if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
			char *v = line + nlen + 1, *e = strstr(v, "\r\n");

			while (*v == ' ' || *v == '\t')
				v++;
			if (e)
				*e = '\0';
			return v;
		}
		line = strstr(line, "\r\n");
	}
	return NULL;
}

/* Handles one complete request head (NUL-terminated, modified in place) into *r. */
static void dispatch(char *head, struct reply *r)
{
	char *method = head, *target, *version, *query, *eol, *conn, *clen;
	int keep_alive;

	eol = strstr(head, "\r\n");
	*eol = '\0';
	target = strchr(method, ' ');
	version = target ? strchr(target + 1, ' ') : NULL;
	if (!target || !version) {
		r->status = 400;
		r->close = 1;
		req_count[EP_OTHER]++;
		body_printf(r, "bad request line\n");
		return;
	}
	*target++ = '\0';
	*version++ = '\0';
	keep_alive = strcmp(version, "HTTP/1.1") == 0;
	*eol = '\r';            /* restore so header_value can walk the lines */
	conn = header_value(eol, "Connection");
	if (conn && strcasestr(conn, "close"))
		keep_alive = 0;
	else if (conn && strcasestr(conn, "keep-alive"))
		keep_alive = 1;
	r->close = !keep_alive;
	clen = header_value(eol, "Content-Length");
	if ((clen && strtol(clen, NULL, 10) != 0) || header_value(eol, "Transfer-Encoding")) {
		r->status = 400;        /* request bodies are not supported: refuse and close */
		r->close = 1;
		req_count[EP_OTHER]++;
		body_printf(r, "request bodies are not supported\n");
		return;
	}
	query = strchr(target, '?');
	if (query)
		*query++ = '\0';
	else
		query = "";
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (strcmp(target, routes[i].path) != 0)
			continue;
		req_count[routes[i].ep]++;
		if (strcmp(method, "GET") != 0) {
			r->status = 405;
			body_printf(r, "only GET\n");
			return;
		}
		routes[i].fn(r, query);
		return;
	}
	req_count[EP_OTHER]++;
	r->status = 404;
	body_printf(r, "not found\n");
}

/* Sends the reply with one st_write. Returns 0 or -1. */
static int send_reply(st_netfd_t nfd, const struct reply *r)
{
	char out[BODY_MAX + 512], timing[128] = "";
	int n;

	/* headers, not body fields: many tests match these bodies exactly */
	if (r->wall_ns)
		snprintf(timing, sizeof(timing), "X-Wall-Ns: %llu\r\n", (unsigned long long)r->wall_ns);
	if (r->blocked_ns)
		snprintf(timing + strlen(timing), sizeof(timing) - strlen(timing),
			 "X-Blocked-Ns: %llu\r\nX-Run-Delay-Ns: %llu\r\n",
			 (unsigned long long)r->blocked_ns, (unsigned long long)r->run_delay_ns);
	/* with -F the pid is formatted once (per worker process) and padded: its digits cost
	 * instructions in every reply, so a reply then costs the same whatever the pid
	 * (bench-cost.sh) */
	static char fixed[16];
	static pid_t fixed_of;
	char each[16];
	const char *pid = fixed;
	if (!opt_fixed_ids) {
		snprintf(each, sizeof(each), "%d", (int)my_pid);
		pid = each;
	} else if (fixed_of != my_pid) {
		snprintf(fixed, sizeof(fixed), "%-8d", (int)my_pid);
		fixed_of = my_pid;
	}
	n = snprintf(out, sizeof(out), "HTTP/1.1 %d %s\r\nServer: st-http\r\nContent-Type: %s\r\n"
		     "Content-Length: %zu\r\nX-Pid: %s\r\n%sConnection: %s\r\n\r\n",
		     r->status, status_text(r->status), r->type, r->len, pid, timing,
		     r->close ? "close" : "keep-alive");
	if (n < 0 || (size_t)n + r->len > sizeof(out))
		return -1;
	memcpy(out + n, r->body, r->len);
	return st_write(nfd, out, (size_t)n + r->len, ST_UTIME_NO_TIMEOUT) < 0 ? -1 : 0;
}

/* Connection coroutine: read heads (pipelining allowed), dispatch, reply, until close. */
static void *serve_conn(void *arg)
{
	st_netfd_t nfd = arg;
	char buf[REQ_MAX + 1];
	size_t len = 0, hlen;
	ssize_t n;
	struct reply r;

	conn_total++;
	conn_open++;
	for (;;) {
		while ((hlen = head_length(buf, len)) == 0) {
			if (len == REQ_MAX) {
				memset(&r, 0, sizeof(r));
				r.status = 431;
				r.type = "text/plain";
				r.close = 1;
				req_count[EP_OTHER]++;
				body_printf(&r, "request head too large\n");
				send_reply(nfd, &r);
				goto out;
			}
			n = st_read(nfd, buf + len, REQ_MAX - len, read_timeout);
			if (n <= 0)
				goto out;
			len += (size_t)n;
		}
		memset(&r, 0, sizeof(r));
		r.status = 200;
		r.type = "text/plain";
		char target[101];
		uint64_t t_start = mono_ns();
		{
			char saved = buf[hlen];

			buf[hlen] = '\0';
			reqlog_target(buf, target);
			dispatch(buf, &r);
			buf[hlen] = saved;
		}
		if (send_reply(nfd, &r) < 0)
			goto out;
		reqlog(st_netfd_fileno(nfd), t_start, mono_ns(), target);
		if (r.quit)
			exit(0);
		if (r.close)
			goto out;
		memmove(buf, buf + hlen, len - hlen);
		len -= hlen;
	}
out:
	conn_open--;
	st_netfd_close(nfd);
	return NULL;
}

static void on_switch_in(void)
{
	switch_in_calls++;
}

static void on_switch_out(void)
{
	switch_out_calls++;
}

/* ---- process setup -------------------------------------------------------------------------- */
static void open_listener(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt_port) };
	socklen_t salen = sizeof(sa);
	int one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0)
		die("socket");
	if (setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		die("setsockopt SO_REUSEADDR");
	if (bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	if (listen(listen_fd, 1024) < 0)
		die("listen");
	if (getsockname(listen_fd, (struct sockaddr *)&sa, &salen) < 0)
		die("getsockname");
	bound_port = ntohs(sa.sin_port);
}

/* The file /file reads: created, filled and unlinked at once, so nothing is left behind however
 * the server ends. */
static void make_data_file(void)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	size_t off = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/st-http-data.XXXXXX", dir && *dir ? dir : "/tmp");
	data_fd = mkstemp(path);
	if (data_fd < 0)
		die("mkstemp");
	unlink(path);
	for (size_t i = 0; i < sizeof(file_buf); i++)
		file_buf[i] = (char)('a' + i % 26);
	while (off < FILE_SIZE) {
		n = write(data_fd, file_buf, sizeof(file_buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write data file");
		off += (size_t)n;
	}
}

static void write_port_file(void)
{
	char tmp[4096];
	FILE *f;

	if (!opt_port_file)
		return;
	/* write then rename, so a test polling for the file never reads it half written */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", opt_port_file, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		die("port file");
	fprintf(f, "%d\n", bound_port);
	if (fclose(f) != 0 || rename(tmp, opt_port_file) < 0)
		die("port file");
}

/* Runs one scheduler: st_init, then the accept loop in the primordial coroutine. Never returns. */
static void run_scheduler(void)
{
	st_netfd_t lfd, cfd;
	st_utime_t deadline = 0, now;

	my_pid = getpid();
	if (opt_eventsys != ST_EVENTSYS_DEFAULT && st_set_eventsys(opt_eventsys) < 0)
		die("st_set_eventsys");
	if (st_init() < 0)
		die("st_init");
	if (opt_switch_cb) {
		/* after st_init, which zeroes the scheduler state (callbacks set earlier are lost) */
		st_set_switch_in_cb(on_switch_in);
		st_set_switch_out_cb(on_switch_out);
	}
	lfd = st_netfd_open_socket(listen_fd);
	if (!lfd)
		die("st_netfd_open_socket");
	if (!opt_quiet) {
		if (worker_index < 0)
			fprintf(stderr, "st-http: port=%d pid=%d eventsys=%s\n", bound_port,
				(int)my_pid, st_get_eventsys_name());
		else
			fprintf(stderr, "st-http: worker=%d port=%d pid=%d eventsys=%s\n", worker_index,
				bound_port, (int)my_pid, st_get_eventsys_name());
	}
	if (worker_index < 0)
		write_port_file();
	if (opt_seconds > 0)
		deadline = st_utime() + (st_utime_t)opt_seconds * 1000000;
	for (;;) {
		st_utime_t timeout = ST_UTIME_NO_TIMEOUT;

		if (deadline) {
			now = st_utime();
			if (now >= deadline)
				exit(0);
			timeout = deadline - now;
		}
		cfd = st_accept(lfd, NULL, NULL, timeout);
		if (!cfd) {
			if (errno == ETIME || errno == EINTR || errno == ECONNABORTED)
				continue;
			if (!opt_quiet)
				fprintf(stderr, "st-http: accept: %s\n", strerror(errno));
			st_usleep(10000);       /* EMFILE and friends: back off, keep serving */
			continue;
		}
		if (!st_thread_create(serve_conn, cfd, 0, CONN_STACK)) {
			st_netfd_close(cfd);
			if (!opt_quiet)
				fprintf(stderr, "st-http: st_thread_create failed\n");
		}
	}
}

/* -w: forks the workers and waits. When the first worker exits (/quit, -t, crash) the others get
 * SIGTERM; the parent exits 0 if that first worker exited 0. Workers die with the parent
 * (PR_SET_PDEATHSIG), so a SIGTERM to the parent alone stops the whole server. */
static int run_workers(void)
{
	pid_t pids[256];
	int status, first_status = -1, alive = 0;
	pid_t parent = getpid(), pid;

	for (int i = 0; i < opt_workers; i++) {
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
				_exit(1);
			worker_index = i;
			run_scheduler();
		}
		pids[i] = pid;
		alive++;
	}
	if (!opt_quiet)
		fprintf(stderr, "st-http: port=%d pid=%d workers=%d\n", bound_port, (int)parent,
			opt_workers);
	write_port_file();
	while (alive > 0) {
		pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < opt_workers; i++)
			if (pids[i] == pid)
				pids[i] = 0;
		alive--;
		if (first_status < 0) {
			first_status = status;
			for (int i = 0; i < opt_workers; i++)
				if (pids[i])
					kill(pids[i], SIGTERM);
		}
	}
	return WIFEXITED(first_status) && WEXITSTATUS(first_status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "p:w:e:cP:t:qFT:")) != -1) {
		switch (c) {
		case 'p': opt_port = atoi(optarg); break;
		case 'w': opt_workers = atoi(optarg); break;
		case 'e':
			if (strcmp(optarg, "poll") == 0)
				opt_eventsys = ST_EVENTSYS_POLL;
			else if (strcmp(optarg, "select") == 0)
				opt_eventsys = ST_EVENTSYS_SELECT;
			else if (strcmp(optarg, "alt") == 0)
				opt_eventsys = ST_EVENTSYS_ALT;
			else
				usage();
			break;
		case 'c': opt_switch_cb = 1; break;
		case 'P': opt_port_file = optarg; break;
		case 't': opt_seconds = atoi(optarg); break;
		case 'q': opt_quiet = 1; break;
		case 'F': opt_fixed_ids = 1; break;
		case 'T': read_timeout = (st_utime_t)atoi(optarg) * 1000; break;
		default: usage();
		}
	}
	if (optind != argc || opt_port < 0 || opt_port > 65535 || opt_workers < 0 ||
	    opt_workers > 256 || opt_seconds < 0)
		usage();

	/* a peer that closes early must cost an EPIPE, not the process (not a SIGTERM handler) */
	signal(SIGPIPE, SIG_IGN);
	make_data_file();
	open_listener();
	if (opt_workers > 0)
		return run_workers();
	run_scheduler();
	return 0;
}
