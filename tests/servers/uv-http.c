/*
 * uv-http.c: a small libuv HTTP/1.1 test server (Debian's libuv1): one loop on the main thread,
 * one request per connection (every reply closes it). The libuv adapter's tests run it under
 * LD_PRELOAD; it never knows about d9. Each endpoint exercises one kind of libuv callback:
 *   /fast            replies from the read callback (on_read)
 *   /burn?ms=N       burns N ms of CPU in burn_cpu, called from on_read, then replies
 *   /timer?ms=N      a one-shot uv_timer per request; on_timer replies after N ms
 *   /work?ms=N       uv_queue_work: work_sleep sleeps N ms (usleep) on a pool thread,
 *                    after_work replies on the loop thread
 *   /work?hold=1     the same with work_hold, which blocks in read on a pipe until /release
 *                    (stats: work_holding is 1 once it runs); so a test can queue work behind it
 *   /async           the notifier thread (waiting in poll on a pipe) gets a byte and calls
 *                    uv_async_send; on_async (loop thread) replies to every waiting request
 *   /nested          starts a 0 ms timer, then runs the loop once from inside on_read
 *                    (uv_run UV_RUN_NOWAIT: libuv says not to, programs do), which runs
 *                    on_nested_timer inside on_read; replies "nested fired=1"
 *   /fs              uv_fs_open of /proc/self/stat, then uv_fs_close, both with callbacks
 *                    (on_opened, on_fs_closed), then replies "fs"
 *   /stats           counters as JSON (connections, requests per endpoint, callback runs)
 *   /quit            replies "bye" and exits 0 in the write callback
 * A uv_check handle (on_check) counts loop iterations. Options: -p PORT (0: any), -P FILE (the
 * port is written there once listening), -t SECONDS (exit 2 after that long), -q (quiet).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#define REQ_MAX 4096
#define MS_MAX 60000

enum endpoint { EP_FAST, EP_BURN, EP_TIMER, EP_WORK, EP_ASYNC, EP_FS, EP_NESTED, EP_RELEASE,
	EP_STATS, EP_QUIT, EP_OTHER, EP_COUNT };
static const char *const ep_names[EP_COUNT] = { "fast", "burn", "timer", "work", "async", "fs",
	"nested", "release", "stats", "quit", "other" };

struct conn {
	uv_tcp_t tcp;
	uv_timer_t timer;
	uv_work_t work;
	uv_write_t wr;
	uv_fs_t fs;
	uv_buf_t out;
	char buf[REQ_MAX];
	size_t len;
	int ms, refs, answered, quit, fired;
	struct conn *next_async; /* waiting for on_async */
};

static uv_loop_t *loop;
static uv_tcp_t server;
static uv_async_t async;
static uv_check_t check;
static uv_timer_t deadline;
static int notify_pipe[2], hold_pipe[2];
static struct conn *async_waiting;
static int opt_quiet;
static struct {
	unsigned long connections, requests[EP_COUNT], async_runs, checks, timer_fires, works_done;
	unsigned long async_sends; /* written by the notifier thread */
	int work_holding; /* written by a pool thread */
} stats;

static void conn_unref(struct conn *c)
{
	if (--c->refs == 0)
		free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
	conn_unref(h->data);
}

static void on_timer_closed(uv_handle_t *h)
{
	conn_unref(h->data);
}

static void on_written(uv_write_t *wr, int status)
{
	struct conn *c = wr->data;

	(void)status;
	free(c->out.base);
	if (c->quit)
		exit(0);
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void reply(struct conn *c, int code, const char *body)
{
	char *out = malloc(512 + strlen(body));

	if (!out)
		abort();
	int n = sprintf(out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
		"X-Pid: %d\r\nConnection: close\r\n\r\n%s", code, code == 200 ? "OK" : "Not Found",
		strlen(body), (int)getpid(), body);
	c->answered = 1;
	c->out = uv_buf_init(out, (unsigned)n);
	c->wr.data = c;
	if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &c->out, 1, on_written)) {
		free(out);
		uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
	}
}

static long long cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* N ms of CPU, so profiler samples land here */
static __attribute__((noinline)) long long burn_cpu(int ms)
{
	long long start = cpu_ns(), now;
	volatile unsigned long x = 0;

	do {
		for (int i = 0; i < 20000; i++)
			x += (unsigned long)i * 2654435761u;
		now = cpu_ns();
	} while (now - start < ms * 1000000ll);
	return now - start;
}

static void on_timer(uv_timer_t *t)
{
	struct conn *c = t->data;
	char body[64];

	stats.timer_fires++;
	snprintf(body, sizeof(body), "timer ms=%d\n", c->ms);
	reply(c, 200, body);
	uv_close((uv_handle_t *)t, on_timer_closed);
}

static void on_nested_timer(uv_timer_t *t)
{
	struct conn *c = t->data;

	c->fired = 1;
	uv_close((uv_handle_t *)t, on_timer_closed);
}

static void work_sleep(uv_work_t *w)
{
	struct conn *c = w->data;

	usleep((useconds_t)c->ms * 1000);
}

static void work_hold(uv_work_t *w)
{
	char b;

	(void)w;
	__atomic_store_n(&stats.work_holding, 1, __ATOMIC_RELAXED);
	ssize_t r = read(hold_pipe[0], &b, 1);
	(void)r;
}

static void after_work(uv_work_t *w, int status)
{
	struct conn *c = w->data;
	char body[64];

	stats.works_done++;
	snprintf(body, sizeof(body), "work ms=%d status=%d\n", c->ms, status);
	reply(c, 200, body);
}

static void on_async(uv_async_t *a)
{
	(void)a;
	stats.async_runs++;
	while (async_waiting) {
		struct conn *c = async_waiting;
		async_waiting = c->next_async;
		reply(c, 200, "async\n");
	}
}

static void on_fs_closed(uv_fs_t *req)
{
	struct conn *c = req->data;

	uv_fs_req_cleanup(req);
	reply(c, 200, "fs\n");
}

static void on_opened(uv_fs_t *req)
{
	struct conn *c = req->data;
	uv_file fd = (uv_file)req->result;

	uv_fs_req_cleanup(req);
	if (fd < 0) {
		reply(c, 404, "fs open failed\n");
		return;
	}
	c->fs.data = c;
	uv_fs_close(loop, &c->fs, fd, on_fs_closed);
}

static void on_check(uv_check_t *h)
{
	(void)h;
	stats.checks++;
}

/* waits in poll, as an event thread would, then reads the byte */
static void *notifier(void *arg)
{
	struct pollfd pfd = { .fd = notify_pipe[0], .events = POLLIN };
	char b;

	(void)arg;
	while (poll(&pfd, 1, -1) >= 0 && read(notify_pipe[0], &b, 1) == 1) {
		__atomic_add_fetch(&stats.async_sends, 1, __ATOMIC_RELAXED);
		uv_async_send(&async);
	}
	return NULL;
}

static int query_ms(const char *path)
{
	const char *q = strstr(path, "ms=");
	int ms = q ? atoi(q + 3) : 10;

	return ms < 0 ? 0 : ms > MS_MAX ? MS_MAX : ms;
}

static void handle_request(struct conn *c)
{
	char path[256] = "";
	char body[512];

	if (sscanf(c->buf, "GET %255s", path) != 1) {
		reply(c, 404, "bad request\n");
		return;
	}
	size_t plen = strcspn(path, "?");
	enum endpoint ep = EP_OTHER;
	for (int i = 0; i < EP_OTHER; i++)
		if (strlen(ep_names[i]) == plen - 1 && !strncmp(path + 1, ep_names[i], plen - 1))
			ep = (enum endpoint)i;
	stats.requests[ep]++;
	c->ms = query_ms(path);
	switch (ep) {
	case EP_FAST:
		reply(c, 200, "ok\n");
		break;
	case EP_BURN:
		snprintf(body, sizeof(body), "burn ms=%d cpu_ns=%lld\n", c->ms, burn_cpu(c->ms));
		reply(c, 200, body);
		break;
	case EP_TIMER:
		uv_timer_init(loop, &c->timer);
		c->timer.data = c;
		c->refs++;
		uv_timer_start(&c->timer, on_timer, (uint64_t)c->ms, 0);
		break;
	case EP_WORK:
		c->work.data = c;
		uv_queue_work(loop, &c->work, strstr(path, "hold=1") ? work_hold : work_sleep, after_work);
		break;
	case EP_RELEASE: {
		ssize_t w = write(hold_pipe[1], "r", 1);
		reply(c, 200, w == 1 ? "released\n" : "release failed\n");
		break;
	}
	case EP_NESTED:
		uv_timer_init(loop, &c->timer);
		c->timer.data = c;
		c->refs++;
		uv_timer_start(&c->timer, on_nested_timer, 0, 0);
		uv_run(loop, UV_RUN_NOWAIT);
		snprintf(body, sizeof(body), "nested fired=%d\n", c->fired);
		reply(c, 200, body);
		break;
	case EP_FS:
		c->fs.data = c;
		if (uv_fs_open(loop, &c->fs, "/proc/self/stat", O_RDONLY, 0, on_opened))
			reply(c, 404, "fs open failed\n");
		break;
	case EP_ASYNC: {
		c->next_async = async_waiting;
		async_waiting = c;
		ssize_t w = write(notify_pipe[1], "a", 1);
		(void)w;
		break;
	}
	case EP_STATS: {
		int n = snprintf(body, sizeof(body), "{\"connections_total\":%lu,\"requests\":{",
			stats.connections);
		for (int i = 0; i < EP_COUNT; i++)
			n += snprintf(body + n, sizeof(body) - (size_t)n, "%s\"%s\":%lu", i ? "," : "",
				ep_names[i], stats.requests[i]);
		snprintf(body + n, sizeof(body) - (size_t)n, "},\"async_runs\":%lu,\"async_sends\":%lu,"
			"\"checks\":%lu,\"timer_fires\":%lu,\"works_done\":%lu,\"work_holding\":%d}\n",
			stats.async_runs, __atomic_load_n(&stats.async_sends, __ATOMIC_RELAXED), stats.checks,
			stats.timer_fires, stats.works_done,
			__atomic_load_n(&stats.work_holding, __ATOMIC_RELAXED));
		reply(c, 200, body);
		break;
	}
	case EP_QUIT:
		c->quit = 1;
		reply(c, 200, "bye\n");
		break;
	default:
		reply(c, 404, "not found\n");
	}
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct conn *c = h->data;

	(void)hint;
	*buf = uv_buf_init(c->buf + c->len, (unsigned)(REQ_MAX - 1 - c->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct conn *c = s->data;

	(void)buf;
	if (n < 0 || (n == 0 && c->len >= REQ_MAX - 1)) {
		uv_read_stop(s);
		if (!c->answered)
			uv_close((uv_handle_t *)s, on_conn_closed);
		return;
	}
	c->len += (size_t)n;
	c->buf[c->len] = 0;
	if (!c->answered && strstr(c->buf, "\r\n\r\n")) {
		uv_read_stop(s);
		handle_request(c);
	}
}

static void on_connection(uv_stream_t *srv, int status)
{
	if (status < 0)
		return;
	struct conn *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->refs = 1;
	uv_tcp_init(loop, &c->tcp);
	c->tcp.data = c;
	if (uv_accept(srv, (uv_stream_t *)&c->tcp)) {
		uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
		return;
	}
	stats.connections++;
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_deadline(uv_timer_t *t)
{
	(void)t;
	if (!opt_quiet)
		fprintf(stderr, "uv-http: time limit reached\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int port = 8080, seconds = 0, c;
	const char *port_file = NULL;

	while ((c = getopt(argc, argv, "p:P:t:q")) != -1) {
		switch (c) {
		case 'p': port = atoi(optarg); break;
		case 'P': port_file = optarg; break;
		case 't': seconds = atoi(optarg); break;
		case 'q': opt_quiet = 1; break;
		default:
			fprintf(stderr, "usage: uv-http [-p PORT] [-P PORT_FILE] [-t SECONDS] [-q]\n");
			return 64;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	loop = uv_default_loop();
	if (pipe(notify_pipe) || pipe(hold_pipe))
		return 1;
	if (uv_async_init(loop, &async, on_async))
		return 1;
	uv_unref((uv_handle_t *)&async);
	pthread_t th;
	if (pthread_create(&th, NULL, notifier, NULL))
		return 1;
	uv_check_init(loop, &check);
	uv_check_start(&check, on_check);
	uv_unref((uv_handle_t *)&check);
	if (seconds > 0) {
		uv_timer_init(loop, &deadline);
		uv_timer_start(&deadline, on_deadline, (uint64_t)seconds * 1000, 0);
		uv_unref((uv_handle_t *)&deadline);
	}
	struct sockaddr_in addr;
	uv_ip4_addr("127.0.0.1", port, &addr);
	uv_tcp_init(loop, &server);
	int r = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
	if (!r)
		r = uv_listen((uv_stream_t *)&server, 128, on_connection);
	if (r) {
		fprintf(stderr, "uv-http: listen: %s\n", uv_strerror(r));
		return 1;
	}
	struct sockaddr_in bound;
	int blen = sizeof(bound);
	uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &blen);
	if (port_file) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", ntohs(bound.sin_port)) < 0 || fclose(f) || rename(tmp, port_file))
			return 1;
	}
	if (!opt_quiet)
		fprintf(stderr, "uv-http: listening on 127.0.0.1:%d\n", ntohs(bound.sin_port));
	return uv_run(loop, UV_RUN_DEFAULT);
}
