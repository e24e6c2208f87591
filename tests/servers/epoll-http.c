/*
 * epoll-http.c: a plain epoll HTTP/1.1 test server with no coroutine runtime: one level-triggered
 * loop on the main thread, or (-T N) N named worker threads, each with its own epoll loop on its
 * own SO_REUSEPORT listener. The interposition tests run it under LD_PRELOAD as the "no runtime"
 * baseline; it must never know about d9 and must never install SIGTERM/SIGINT handlers.
 * Endpoints and options are documented in README.md beside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "clocks.h" /* thread_cpu_ns, mono_ns, run_delay_ns */
#include "reqlog.h" /* HTTP_REQUEST_LOG (test-requests.sh) */

#define REQ_MAX     8192                /* request head limit; larger heads get 431 */
#define BODY_MAX    2048                /* reply body limit */
#define OUT_MAX     (64 * 1024)         /* queued replies per connection */
#define REPLY_MAX   (BODY_MAX + 512)    /* one reply, head included */
#define MS_MAX      60000
#define THREADS_MAX 64

enum endpoint { EP_FAST, EP_BURN, EP_BLOCK, EP_STATS, EP_QUIT, EP_OTHER, EP_COUNT };
static const char *const ep_names[EP_COUNT] = { "fast", "burn", "block", "stats", "quit",
	"other" };

struct reply {
	int status;
	const char *type;
	int close;                      /* send Connection: close and end the connection */
	int quit;                       /* exit(0) once the reply is sent */
	size_t len;                     /* bytes used in body, always < BODY_MAX */
	char body[BODY_MAX];
};

struct conn {
	int fd;
	uint32_t events;                /* interest currently registered with epoll */
	int eof;                        /* peer sent FIN: finish queued replies, then close */
	int closing;                    /* a reply said close: flush, then close */
	int quit;                       /* flush, then exit(0) */
	size_t in_len;
	size_t out_off, out_len;        /* unsent output is out[out_off, out_len) */
	char in[REQ_MAX + 1];
	char out[OUT_MAX];
};

struct worker {
	int index;                      /* -1 for the main-thread loop */
	int lfd;
	pthread_t thread;
};

static int opt_port = 8080;
static int opt_threads;
static const char *opt_port_file;
static int opt_seconds;
static int opt_quiet;
static int opt_fixed_ids; /* -F: X-Pid and X-Tid formatted once, 8 wide (bench-cost.sh) */

static int bound_port;
static pid_t my_pid;
static struct timespec deadline;        /* zero: no -t */
static unsigned long req_count[EP_COUNT];       /* updated with __atomic builtins */
static volatile uint64_t burn_sink;

/* The functions tests look for by name in stacks: visible symbols, never inlined. */
uint64_t burn_cpu(unsigned ms) __attribute__((noinline));
void handle_fast(struct reply *r, const char *query) __attribute__((noinline));
void handle_burn(struct reply *r, const char *query) __attribute__((noinline));
void handle_block(struct reply *r, const char *query) __attribute__((noinline));
void handle_stats(struct reply *r, const char *query) __attribute__((noinline));
void handle_quit(struct reply *r, const char *query) __attribute__((noinline));

static void die(const char *what)
{
	fprintf(stderr, "epoll-http: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: epoll-http [-p PORT] [-T THREADS] [-P FILE] [-t SECONDS] [-q] [-F]\n");
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

/* Returns the value of `key` in a query string clamped to [lo, hi], or def. */
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
 * ~30 us). Returns the CPU nanoseconds consumed. */
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

void handle_fast(struct reply *r, const char *query)
{
	(void)query;
	body_printf(r, "ok\n");
}

void handle_burn(struct reply *r, const char *query)
{
	long ms = query_long(query, "ms", 10, 0, MS_MAX);
	uint64_t ns = burn_cpu((unsigned)ms);

	body_printf(r, "burn ms=%ld cpu_ns=%llu\n", ms, (unsigned long long)ns);
}

/* Blocks this loop (the whole server without -T, one worker thread with -T). */
void handle_block(struct reply *r, const char *query)
{
	long ms = query_long(query, "ms", 10, 0, MS_MAX);

	usleep((useconds_t)ms * 1000);
	body_printf(r, "block ms=%ld\n", ms);
}

void handle_stats(struct reply *r, const char *query)
{
	(void)query;
	r->type = "application/json";
	body_printf(r, "{\"pid\":%d,\"threads\":%d,\"requests\":{", (int)my_pid, opt_threads);
	for (int i = 0; i < EP_COUNT; i++)
		body_printf(r, "%s\"%s\":%lu", i ? "," : "", ep_names[i],
			    __atomic_load_n(&req_count[i], __ATOMIC_RELAXED));
	body_printf(r, "}}\n");
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
	{ "/block", EP_BLOCK, handle_block },
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

static size_t head_length(const char *buf, size_t len)
{
	for (size_t i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
			return i + 1;
	return 0;
}

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

static void count(enum endpoint ep)
{
	__atomic_fetch_add(&req_count[ep], 1, __ATOMIC_RELAXED);
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
		count(EP_OTHER);
		body_printf(r, "bad request line\n");
		return;
	}
	*target++ = '\0';
	*version++ = '\0';
	keep_alive = strcmp(version, "HTTP/1.1") == 0;
	*eol = '\r';
	conn = header_value(eol, "Connection");
	if (conn && strcasestr(conn, "close"))
		keep_alive = 0;
	else if (conn && strcasestr(conn, "keep-alive"))
		keep_alive = 1;
	r->close = !keep_alive;
	clen = header_value(eol, "Content-Length");
	if ((clen && strtol(clen, NULL, 10) != 0) || header_value(eol, "Transfer-Encoding")) {
		r->status = 400;
		r->close = 1;
		count(EP_OTHER);
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
		count(routes[i].ep);
		if (strcmp(method, "GET") != 0) {
			r->status = 405;
			body_printf(r, "only GET\n");
			return;
		}
		routes[i].fn(r, query);
		return;
	}
	count(EP_OTHER);
	r->status = 404;
	body_printf(r, "not found\n");
}

static void queue_reply(struct conn *c, const struct reply *r)
{
	int n;

	/* with -F the ids are formatted once per thread and padded: their digits cost instructions
	 * in every reply, so a reply then costs the same whatever the pid and tid (bench-cost.sh
	 * compares runs whose ids have 3 to 5 digits) */
	static __thread char fixed[64];
	char each[64];
	const char *ids = fixed;
	if (!opt_fixed_ids) {
		snprintf(each, sizeof(each), "X-Pid: %d\r\nX-Tid: %d\r\n", (int)my_pid, (int)gettid());
		ids = each;
	} else if (!fixed[0]) {
		snprintf(fixed, sizeof(fixed), "X-Pid: %-8d\r\nX-Tid: %-8d\r\n", (int)my_pid,
			 (int)gettid());
	}
	n = snprintf(c->out + c->out_len, OUT_MAX - c->out_len,
		     "HTTP/1.1 %d %s\r\nServer: epoll-http\r\nContent-Type: %s\r\n"
		     "Content-Length: %zu\r\n%sConnection: %s\r\n\r\n",
		     r->status, status_text(r->status), r->type, r->len, ids,
		     r->close ? "close" : "keep-alive");
	if (n < 0 || (size_t)n + r->len > OUT_MAX - c->out_len) {
		c->closing = 1;         /* cannot happen: callers keep REPLY_MAX free */
		return;
	}
	memcpy(c->out + c->out_len + n, r->body, r->len);
	c->out_len += (size_t)n + r->len;
	if (r->close)
		c->closing = 1;
	if (r->quit)
		c->quit = 1;
}

/* Turns complete buffered requests into queued replies while there is room. */
static void process_requests(struct conn *c)
{
	struct reply r;
	size_t hlen;

	while (!c->closing && OUT_MAX - c->out_len >= REPLY_MAX) {
		hlen = head_length(c->in, c->in_len);
		memset(&r, 0, sizeof(r));
		r.status = 200;
		r.type = "text/plain";
		if (hlen == 0) {
			if (c->in_len < REQ_MAX)
				return;
			r.status = 431;
			r.close = 1;
			count(EP_OTHER);
			body_printf(&r, "request head too large\n");
			queue_reply(c, &r);
			return;
		}
		char target[101];
		uint64_t t_start = mono_ns();
		{
			char saved = c->in[hlen];

			c->in[hlen] = '\0';
			reqlog_target(c->in, target);
			dispatch(c->in, &r);
			c->in[hlen] = saved;
		}
		queue_reply(c, &r);
		reqlog(c->fd, t_start, mono_ns(), target);
		memmove(c->in, c->in + hlen, c->in_len - hlen);
		c->in_len -= hlen;
	}
}

/* Sends queued output. Returns 0 (all sent or would block) or -1 on a send error. */
static int flush_output(struct conn *c)
{
	ssize_t n;

	while (c->out_off < c->out_len) {
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		}
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

static void conn_close(struct conn *c)
{
	close(c->fd);           /* also drops the epoll registration: the fd is never dup'ed */
	free(c);
}

/* Advances one connection after an event: read what is there, answer what is complete, send.
 * Reading stops while replies are queued (backpressure) and resumes once they are sent. */
static void conn_event(int epfd, struct conn *c, uint32_t ev)
{
	struct epoll_event e;
	uint32_t want;
	ssize_t n;

	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		while (!c->eof && c->in_len < REQ_MAX) {
			n = recv(c->fd, c->in + c->in_len, REQ_MAX - c->in_len, 0);
			if (n > 0) {
				c->in_len += (size_t)n;
				continue;
			}
			if (n == 0)
				c->eof = 1;
			else if (errno == EINTR)
				continue;
			else if (errno != EAGAIN && errno != EWOULDBLOCK)
				goto drop;
			break;
		}
	}
	for (;;) {
		process_requests(c);
		if (flush_output(c) < 0)
			goto drop;
		if (c->out_len > 0)
			break;                  /* would block: wait for EPOLLOUT */
		if (c->quit)
			exit(0);
		if (c->closing)
			goto drop;
		if (head_length(c->in, c->in_len) == 0)
			break;                  /* nothing complete left */
	}
	if (c->eof && c->out_len == 0)
		goto drop;
	want = c->out_len > 0 ? EPOLLOUT : EPOLLIN;
	if (want != c->events) {
		e.events = want;
		e.data.ptr = c;
		if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &e) < 0)
			goto drop;
		c->events = want;
	}
	return;
drop:
	conn_close(c);
}

static void accept_all(int epfd, int lfd)
{
	struct epoll_event e;
	struct conn *c;
	int fd;

	for (;;) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && !opt_quiet)
				fprintf(stderr, "epoll-http: accept: %s\n", strerror(errno));
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->events = EPOLLIN;
		e.events = EPOLLIN;
		e.data.ptr = c;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
			free(c);
			close(fd);
		}
	}
}

/* Milliseconds until the -t deadline (rounded up), -1 without one; exits at the deadline. */
static int deadline_timeout(void)
{
	struct timespec now;
	int64_t ms;

	if (deadline.tv_sec == 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (int64_t)(deadline.tv_sec - now.tv_sec) * 1000 +
	     (deadline.tv_nsec - now.tv_nsec + 999999) / 1000000;
	if (ms <= 0)
		exit(0);
	return ms > 1000000 ? 1000000 : (int)ms;
}

/* One event loop over one listener. Never returns. */
static void *serve_loop(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[64], e = { .events = EPOLLIN, .data.ptr = NULL };
	int epfd, n;

	if (w->index >= 0) {
		char name[16];

		snprintf(name, sizeof(name), "worker-%d", w->index % 100); /* 16-byte limit */
		pthread_setname_np(pthread_self(), name);
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die("epoll_create1");
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, w->lfd, &e) < 0)
		die("epoll_ctl listener");
	for (;;) {
		n = epoll_wait(epfd, evs, 64, deadline_timeout());
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == NULL)
				accept_all(epfd, w->lfd);
			else
				conn_event(epfd, evs[i].data.ptr, evs[i].events);
		}
	}
	return NULL;
}

/* Binds a loopback listener on `port` (0: any free port). Returns the fd; dies on failure. */
static int open_listener(int port, int reuseport)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	socklen_t salen = sizeof(sa);
	int one = 1, fd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		die("setsockopt SO_REUSEADDR");
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		die("setsockopt SO_REUSEPORT");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	if (listen(fd, 1024) < 0)
		die("listen");
	if (getsockname(fd, (struct sockaddr *)&sa, &salen) < 0)
		die("getsockname");
	bound_port = ntohs(sa.sin_port);
	return fd;
}

static void write_port_file(void)
{
	char tmp[4096];
	FILE *f;

	if (!opt_port_file)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", opt_port_file, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		die("port file");
	fprintf(f, "%d\n", bound_port);
	if (fclose(f) != 0 || rename(tmp, opt_port_file) < 0)
		die("port file");
}

int main(int argc, char **argv)
{
	static struct worker workers[THREADS_MAX];
	struct worker main_loop = { .index = -1 };
	int c, err;

	while ((c = getopt(argc, argv, "p:T:P:t:qF")) != -1) {
		switch (c) {
		case 'p': opt_port = atoi(optarg); break;
		case 'T': opt_threads = atoi(optarg); break;
		case 'P': opt_port_file = optarg; break;
		case 't': opt_seconds = atoi(optarg); break;
		case 'q': opt_quiet = 1; break;
		case 'F': opt_fixed_ids = 1; break;
		default: usage();
		}
	}
	if (optind != argc || opt_port < 0 || opt_port > 65535 || opt_threads < 0 ||
	    opt_threads > THREADS_MAX || opt_seconds < 0)
		usage();

	signal(SIGPIPE, SIG_IGN);       /* belt and braces: sends already use MSG_NOSIGNAL */
	my_pid = getpid();
	if (opt_seconds > 0) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += opt_seconds;
	}
	if (opt_threads == 0) {
		main_loop.lfd = open_listener(opt_port, 0);
	} else {
		/* all listeners exist before any thread runs: the port file means "every worker
		 * can accept"; with -p 0 the first bind picks the port the others share */
		for (int i = 0; i < opt_threads; i++) {
			workers[i].index = i;
			workers[i].lfd = open_listener(i == 0 ? opt_port : bound_port, 1);
		}
	}
	if (!opt_quiet)
		fprintf(stderr, "epoll-http: port=%d pid=%d threads=%d\n", bound_port, (int)my_pid,
			opt_threads);
	if (opt_threads == 0) {
		write_port_file();
		serve_loop(&main_loop);
	}
	for (int i = 0; i < opt_threads; i++) {
		err = pthread_create(&workers[i].thread, NULL, serve_loop, &workers[i]);
		if (err) {
			errno = err;
			die("pthread_create");
		}
	}
	write_port_file();
	for (int i = 0; i < opt_threads; i++)
		pthread_join(workers[i].thread, NULL);
	return 0;
}
