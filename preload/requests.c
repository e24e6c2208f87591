/* requests.c: zero-code requests (D9_REQUESTS=1). From the calls d9 sees on the sockets of
 * accepted connections (accept, read/recv, write/send, close; hooks in libc-block.c and
 * libc-net.c) a per-descriptor state machine finds where each request begins and ends and records
 * RequestBegin/RequestEnd. It never reads a byte the program did not read itself, keeps nothing of
 * the payload but an optional HTTP request line preview, and never guesses: bytes that held more
 * or less than one request make the request "ambiguous". Rules: agent/DESIGN.md, "Requests". */
#include "requests.h"
#include "http-scan.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

void __chk_fail(void) __attribute__((noreturn));
/* glibc's fortified entry points (not in its headers without _FORTIFY_SOURCE) */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
	struct sockaddr *addr, socklen_t *alen);

#include "internal.h" /* d9__log_once */

#define D9__REQ_FD_CAP 65536u /* descriptors tracked at most (the table is reserved, not touched) */
#define D9__REQ_PENDING 256u /* loop-served requests a thread can end at its turn's end */
_Static_assert(D9__REQ_PENDING <= UINT16_MAX, "d9__pl.req_npending is 16 bits");
#define D9__REQ_PREVIEW 64u /* bytes of the request line kept by the preview */

enum { ST_UNTRACKED = 0, ST_IDLE = 1, ST_IN = 2, ST_OUT = 3 };
enum { PROTO_UNKNOWN = 0, PROTO_HTTP = 1, PROTO_RESP = 2, PROTO_OTHER = 3 };
/* RESP parser states: at a message boundary (R_START) or inside one */
enum { R_START = 0, R_NARG, R_DOLLAR, R_BLEN, R_BULK, R_INLINE };

/* One descriptor's request state. Written by the thread that moves its bytes; a connection
 * served by one thread at a time (every server d9 knows) never races on it. */
struct req_fd {
	uint8_t state; /* ST_* */
	uint8_t proto; /* PROTO_*: sniffed at the connection's first read */
	uint8_t pstate; /* RESP parser state, or HTTP: how much of "\r\n\r\n" ended the bytes */
	uint8_t pending; /* in the turn-end list of the thread that answered it */
	uint32_t pleft; /* RESP: bulk strings left in the current command */
	uint64_t pnum; /* RESP: the number being read, or the bytes left in a bulk string */
	uint64_t since; /* HTTP: bytes since the last head's end (0: at a boundary) */
	uint64_t id; /* the open request's id */
	uint64_t co; /* its coroutine, 0: served by a loop (generic mode) */
	uint64_t bytes_in, bytes_out;
	uint64_t count; /* complete requests its bytes held (HTTP, RESP) */
	uint64_t last_write; /* d9__now() after its last write: the response's end */
};

static struct req_fd *table; /* D9__REQ_FD_CAP entries at most, mmap'd at the first accept */
/* entries in table: min(RLIMIT_NOFILE's hard limit, the cap); 0 until the table is ready, then
 * published after it (release), so that one test of a descriptor against it (acquire) says the
 * table is there and holds it, a negative descriptor included (compared unsigned) */
static uint32_t table_n;
static int table_state; /* 0 not yet, 1 being made, 2 ready, 3 failed */
static uint64_t next_id; /* request ids, per process */
/* In a forked child: the requests open at the fork (ids below this) are the parent's, which goes
 * on serving them; the child's copy of their connection is idle to it (a CGI child that closes
 * the client socket it inherited ended the parent's request as closed unanswered, and that
 * record started the child's agent: a segment per CGI request, which then pushed the parent's
 * out of the directory budget). 0 in a process that was not forked. */
static uint64_t own_from;

/* The connection of r holds a request open in the parent at the fork: idle to this child. */
static inline void disown(struct req_fd *r)
{
	if (D9_UNLIKELY(r->id < own_from) && (r->state == ST_IN || r->state == ST_OUT)) {
		r->state = ST_IDLE;
		r->pending = 0;
	}
}

/* pthread_atfork's child handler (the only thread): the parent's requests stay the parent's. */
static void req_fork_child(void)
{
	own_from = next_id + 1;
	d9__pl.req_npending = 0; /* the forking thread's turn-end list: the parent's requests */
}

__attribute__((constructor)) static void req_init(void)
{
	pthread_atfork(NULL, NULL, req_fork_child);
}

#define D9__REQ_PV_CACHE 8 /* previews a thread remembers (their String ids) */
struct pv_cache { uint64_t id; uint8_t len; char s[D9__REQ_PREVIEW]; };
static __thread struct pv_cache pv_cache[D9__REQ_PV_CACHE] __attribute__((tls_model("initial-exec")));
static __thread struct { int fd; uint64_t id; } pending[D9__REQ_PENDING]
	__attribute__((tls_model("initial-exec")));

/* The table, made at the first accepted connection: reserved address space only (pages are
 * touched as descriptors are used), so its size follows the descriptor limit up to the cap. */
static int table_ready(void)
{
	int s = __atomic_load_n(&table_state, __ATOMIC_ACQUIRE);

	if (D9_LIKELY(s == 2))
		return 1;
	if (s != 0 || !__atomic_compare_exchange_n(&table_state, &s, 1, 0, __ATOMIC_ACQ_REL,
			      __ATOMIC_ACQUIRE))
		return __atomic_load_n(&table_state, __ATOMIC_ACQUIRE) == 2;
	struct rlimit rl;
	uint64_t n = D9__REQ_FD_CAP;
	/* the hard limit: servers raise their soft limit after start (redis to maxclients + 32) */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < n)
		n = rl.rlim_max;
	if (n == 0)
		n = 1;
	void *p = mmap(NULL, n * sizeof(struct req_fd), PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		d9__log_once(D9_LOG_WARN, "requests: no memory for the descriptor table: requests "
			"are not recorded");
		__atomic_store_n(&table_state, 3, __ATOMIC_RELEASE);
		return 0;
	}
	table = p;
	__atomic_store_n(&table_n, (uint32_t)n, __ATOMIC_RELEASE);
	__atomic_store_n(&table_state, 2, __ATOMIC_RELEASE);
	return 1;
}

static inline struct req_fd *slot(int fd)
{
	if ((uint32_t)fd >= __atomic_load_n(&table_n, __ATOMIC_ACQUIRE))
		return NULL;
	struct req_fd *r = &table[fd];
	if (r->state == ST_UNTRACKED)
		return NULL;
	disown(r);
	return r;
}

static uint32_t proto_flags(const struct req_fd *r)
{
	return r->proto == PROTO_HTTP ? D9_REQ_HTTP : r->proto == PROTO_RESP ? D9_REQ_RESP : 0;
}

/* Ends r's open request with `flags` at `now` (d9__now()); r becomes idle. The caller has seen
 * d9__pl_active(). */
static void end_request(struct req_fd *r, uint32_t flags, uint64_t now)
{
	flags |= proto_flags(r);
	if (r->state == ST_IN)
		flags |= D9_REQ_NO_RESPONSE;
	if (r->proto == PROTO_HTTP || r->proto == PROTO_RESP) {
		/* more or less than one request in its bytes, or the start of the next one: where
		 * one ended and the next began is not known */
		int boundary = r->proto == PROTO_HTTP ? r->since == 0 : r->pstate == R_START;
		if (r->count != 1 || !boundary)
			flags |= D9_REQ_AMBIGUOUS;
	}
	/* the response ended at its last write; the reader's return only tells it now */
	uint64_t tail = r->state == ST_OUT && now > r->last_write ? now - r->last_write : 0;
	d9_rec_request_end(now, r->id, D9_REQ_SRC_ZERO_CODE, r->bytes_in, r->bytes_out, flags,
		r->proto == PROTO_HTTP || r->proto == PROTO_RESP ? r->count : 0, 0, tail);
	r->state = ST_IDLE;
	r->pending = 0;
}

/* ---- protocols: count whole requests, never keep bytes ----------------------------------------- */

static int is_http(const uint8_t *b, size_t n)
{
	size_t i = 0;

	while (i < n && i < 10 && b[i] >= 'A' && b[i] <= 'Z')
		i++;
	return i >= 3 && i < n && b[i] == ' ';
}

/* HTTP/1.x heads end with an empty line: counts "\r\n\r\n" across reads (http-scan.h). A body
 * is not parsed: its bytes leave `since` non-zero, so a request with a body is ambiguous
 * (documented). */
static void http_scan(struct req_fd *r, const uint8_t *b, size_t n)
{
	d9__http_scan(&r->pstate, &r->count, &r->since, b, n);
}

/* RESP (redis): multibulk commands (*N, then N of $len + bytes) and inline commands (a line). */
static void resp_scan(struct req_fd *r, const uint8_t *b, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = b[i];
		switch (r->pstate) {
		case R_START:
			r->pnum = 0;
			r->pstate = c == '*' ? R_NARG : R_INLINE;
			i += c == '*';
			continue;
		case R_NARG:
		case R_BLEN:
			if (c >= '0' && c <= '9') {
				if (r->pnum < (1ull << 40))
					r->pnum = r->pnum * 10 + (uint64_t)(c - '0');
			} else if (c == '\n') {
				if (r->pstate == R_NARG) {
					r->pleft = r->pnum > UINT32_MAX ? UINT32_MAX : (uint32_t)r->pnum;
					if (r->pleft == 0) {
						r->count++;
						r->pstate = R_START;
					} else {
						r->pstate = R_DOLLAR;
					}
				} else {
					r->pnum += 2; /* the bytes and their CRLF */
					r->pstate = R_BULK;
				}
			} else if (c != '\r' && c != '-') {
				r->proto = PROTO_OTHER; /* not RESP after all: stop counting */
				return;
			}
			break;
		case R_DOLLAR:
			if (c != '$') {
				r->proto = PROTO_OTHER;
				return;
			}
			r->pnum = 0;
			r->pstate = R_BLEN;
			break;
		case R_BULK: {
			size_t k = n - i < r->pnum ? n - i : (size_t)r->pnum;
			i += k;
			r->pnum -= k;
			if (r->pnum == 0 && --r->pleft == 0) {
				r->count++;
				r->pstate = R_START;
			} else if (r->pnum == 0) {
				r->pstate = R_DOLLAR;
			}
			continue;
		}
		case R_INLINE: {
			const uint8_t *nl = memchr(b + i, '\n', n - i);
			if (!nl)
				return;
			i = (size_t)(nl - b);
			r->count++;
			r->pstate = R_START;
			break;
		}
		}
		i++;
	}
}

/* The preview: method and path of the request line at b (query string dropped unless
 * D9_REQUESTS_PREVIEW=query), as a String id; 0 when b is not a request line. */
static uint64_t preview(const uint8_t *b, size_t n)
{
	char s[D9__REQ_PREVIEW];
	size_t k = 0, sp = 0;

	for (size_t i = 0; i < n && k < sizeof(s); i++) {
		uint8_t c = b[i];
		if (c == '\r' || c == '\n' || c < 0x20 || c >= 0x7f)
			break;
		if (c == ' ' && ++sp == 2)
			break;
		if (c == '?' && sp == 1 && d9__pcfg.requests_preview < 2)
			break;
		s[k++] = (char)c;
	}
	if (sp == 0)
		return 0;
	/* a server serves a few paths again and again: the thread's last few previews are looked
	 * up here, without the definition table's process-wide lock */
	unsigned h = 2166136261u;
	for (size_t i = 0; i < k; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	struct pv_cache *c = &pv_cache[h % D9__REQ_PV_CACHE];
	if (c->id && c->len == k && !memcmp(c->s, s, k))
		return c->id;
	int saved = errno; /* the hooks' callers' errno: malloc may set it */
	d9__self.busy = 1; /* the definition table's lock and memory are the agent's */
	uint64_t id = d9_agent_string(s, k);
	d9__self.busy = 0;
	errno = saved;
	if (id) {
		memcpy(c->s, s, k);
		c->len = (uint8_t)k;
		c->id = id;
	}
	return id;
}

/* ---- the state machine ---------------------------------------------------------------------- */

void d9__req_accepted(int fd)
{
	int saved = errno;

	if (fd < 0 || !table_ready())
		goto out;
	if ((uint32_t)fd >= table_n) {
		d9__log_once(D9_LOG_WARN, "requests: descriptor %d is past the %u the table holds: "
			"its connection's requests are not recorded (counted)", fd, table_n);
		/* counted in the trace: a RequestEnd of id 0 stands for a connection not tracked */
		if (d9__pl_active())
			d9_rec_request_end(d9__now(), 0, D9_REQ_SRC_ZERO_CODE, 0, 0, D9_REQ_UNTRACKED,
				0, 0, 0);
		goto out;
	}
	memset(&table[fd], 0, sizeof(table[fd]));
	table[fd].state = ST_IDLE;
out:
	errno = saved;
}

/* n > 0 bytes of b[0..n) arrived on r (one piece of a scatter read: first says whether it is the
 * read's first piece). */
static inline __attribute__((always_inline)) void req_bytes(int fd, struct req_fd *r,
	const uint8_t *b, size_t n, int first)
{
	if (first) {
		if (r->state == ST_OUT)
			/* the reader came back and the next request is there */
			end_request(r, 0, d9__now());
		if (r->proto == PROTO_UNKNOWN)
			r->proto = b[0] == '*' ? PROTO_RESP : is_http(b, n) ? PROTO_HTTP : PROTO_OTHER;
		if (r->state == ST_IDLE) {
			int at_start = r->proto == PROTO_HTTP ? r->since == 0 && r->pstate == 0 :
				r->pstate == R_START;
			uint64_t pv = r->proto == PROTO_HTTP && at_start && d9__pcfg.requests_preview ?
				preview(b, n) : 0;
			r->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
			r->co = d9__pl.coroutine;
			r->bytes_in = r->bytes_out = 0;
			r->count = 0;
			r->state = ST_IN;
			d9_rec_request_begin(r->id, fd, r->co, D9_REQ_SRC_ZERO_CODE, pv);
		}
	}
	r->bytes_in += n;
	if (r->proto == PROTO_HTTP)
		http_scan(r, b, n);
	else if (r->proto == PROTO_RESP)
		resp_scan(r, b, n);
}

/* d9__req_read, inline in this file's own socket calls (recv, recvfrom: a call and its frame
 * less on every read of an HTTP or RESP server) */
static inline __attribute__((always_inline)) void req_read(int fd, const void *buf, ssize_t n)
{
	struct req_fd *r = slot(fd);

	if (!r)
		return;
	if (n > 0) {
		if (d9__pl_active())
			req_bytes(fd, r, buf, (size_t)n, 1);
	} else if ((r->state == ST_OUT || (n == 0 && r->state == ST_IN)) && d9__pl_active()) {
		/* the reader came back for the next request (nothing yet), or the peer closed */
		end_request(r, n == 0 ? D9_REQ_CLOSED : 0, d9__now());
	}
}

void d9__req_read(int fd, const void *buf, ssize_t n)
{
	req_read(fd, buf, n);
}

void d9__req_readv(int fd, const struct iovec *iov, size_t cnt, ssize_t n)
{
	struct req_fd *r = slot(fd);

	if (!r || !d9__pl_active())
		return;
	if (n <= 0) {
		req_read(fd, NULL, n);
		return;
	}
	size_t left = (size_t)n;
	for (size_t i = 0, first = 1; i < cnt && left; i++) {
		size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
		if (!k)
			continue;
		req_bytes(fd, r, iov[i].iov_base, k, (int)first);
		first = 0;
		left -= k;
	}
}

void d9__req_wrote(int fd, ssize_t n)
{
	struct req_fd *r = slot(fd);

	if (!r || n <= 0 || (r->state != ST_IN && r->state != ST_OUT))
		return; /* bytes the server sends on its own (a greeting, a push) are no request's */
	r->bytes_out += (uint64_t)n;
	r->state = ST_OUT;
	r->last_write = d9__now();
	/* a request a loop served (no coroutine) ends with the loop turn that wrote its response */
	if (r->co == 0 && !r->pending) {
		if (D9_UNLIKELY(d9__pl.req_npending == D9__REQ_PENDING)) {
			/* more answered requests in one turn than the list holds: this one ends at
			 * its first write (later writes of its response are no request's) rather than
			 * at the peer's next request, which would add the client's think time */
			if (d9__pl_active()) {
				int saved = errno;
				end_request(r, D9_REQ_TURN_END, d9__now());
				errno = saved;
			}
			return;
		}
		pending[d9__pl.req_npending].fd = fd;
		pending[d9__pl.req_npending].id = r->id;
		d9__pl.req_npending++;
		r->pending = 1;
	}
}

void d9__req_close(int fd)
{
	if ((uint32_t)fd >= __atomic_load_n(&table_n, __ATOMIC_ACQUIRE))
		return;
	struct req_fd *r = &table[fd];
	if (r->state == ST_UNTRACKED)
		return;
	int saved = errno;
	disown(r);
	if ((r->state == ST_IN || r->state == ST_OUT) && d9__pl_active())
		end_request(r, D9_REQ_CLOSED, d9__now());
	r->state = ST_UNTRACKED; /* the number may next name anything: a file, a client socket */
	errno = saved;
}

uint64_t d9__req_turn_end(void)
{
	unsigned n = d9__pl.req_npending;

	d9__pl.req_npending = 0;
	if (!d9__pl_active())
		return 0;
	uint64_t now = d9__now();
	for (unsigned i = 0; i < n; i++) {
		struct req_fd *r = slot(pending[i].fd);
		if (r && r->state == ST_OUT && r->id == pending[i].id && r->pending)
			end_request(r, D9_REQ_TURN_END, now);
	}
	return now;
}

/* ---- the application API --------------------------------------------------------------------- */

void d9__api_request_begin(uint64_t id)
{
	if (!d9__pl_active())
		return;
	int saved = errno;
	d9_rec_request_begin(id, -1, d9__pl.coroutine, D9_REQ_SRC_API, 0);
	errno = saved;
}

void d9__api_request_end(uint64_t id, int status)
{
	if (!d9__pl_active())
		return;
	int saved = errno;
	d9_rec_request_end(d9__now(), id, D9_REQ_SRC_API, 0, 0, 0, 1, status, 0);
	errno = saved;
}

/* ---- interposers: the socket calls libc-block.c does not already wrap ----------------------------
 * Pass-throughs when D9_REQUESTS is off: one branch and the system call itself (d9__direct,
 * libc-direct.c) or a tail call to libc's (measured: the wrapper that called libc and tested the
 * flag after it cost epoll-http about 30 instructions a call in saved registers);
 * read/readv/write/writev are wrapped in
 * libc-block.c, which calls the hooks above. recv and send are not timed as blocking calls: a
 * server's sockets are non-blocking, and they were not wrapped before requests. */

/* libc's functions, once the slow path found them: the pass-through needs nothing else */
static int (*fast_accept)(int, struct sockaddr *, socklen_t *);
static int (*fast_accept4)(int, struct sockaddr *, socklen_t *, int);
static ssize_t (*fast_recv)(int, void *, size_t, int);
static ssize_t (*fast_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*fast_recvmsg)(int, struct msghdr *, int);
static ssize_t (*fast_send)(int, const void *, size_t, int);
static ssize_t (*fast_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static ssize_t (*fast_sendmsg)(int, const struct msghdr *, int);
static ssize_t (*fast_sendfile)(int, int, off_t *, size_t);

static __attribute__((noinline)) int accept_req(int fd, struct sockaddr *addr, socklen_t *len)
{
	D9_REAL(int, accept, (int, struct sockaddr *, socklen_t *));
	fast_accept = real_accept;
	if (!real_accept)
		return (int)syscall(SYS_accept, fd, addr, len);
	int r = D9__SYS(real_accept(fd, addr, len), SYS_accept, fd, addr, len);
	D9__REQ_HOOK(d9__req_accepted(r));
	return r;
}

D9_INTERPOSE int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int r = D9_LIKELY(!d9__pcfg.requests && fast_accept) ?
		D9__SYS(fast_accept(fd, addr, len), SYS_accept, fd, addr, len) :
		accept_req(fd, addr, len);
	d9__fd_made(r, 1, 0); /* Linux: an accepted socket does not inherit O_NONBLOCK */
	return r;
}

static __attribute__((noinline)) int accept4_req(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	D9_REAL(int, accept4, (int, struct sockaddr *, socklen_t *, int));
	fast_accept4 = real_accept4;
	if (!real_accept4)
		return (int)syscall(SYS_accept4, fd, addr, len, flags);
	int r = D9__SYS(real_accept4(fd, addr, len, flags), SYS_accept4, fd, addr, len, flags);
	D9__REQ_HOOK(d9__req_accepted(r));
	return r;
}

D9_INTERPOSE int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int r = D9_LIKELY(!d9__pcfg.requests && fast_accept4) ?
		D9__SYS(fast_accept4(fd, addr, len, flags), SYS_accept4, fd, addr, len, flags) :
		accept4_req(fd, addr, len, flags);
	d9__fd_made(r, 1, flags & SOCK_NONBLOCK);
	return r;
}

/* A socket call without D9_REQUESTS: the system call itself while direct calls hold (preload.h),
 * else the C library's function once known; with requests (or before that), the hooked `req`. */
#define PASS(fast, args, req, nr, ...)                                               \
	(D9_LIKELY(d9__pass_direct_on()) ? D9__SYSCALL(nr, __VA_ARGS__) :              \
	 D9_UNLIKELY(d9__pcfg.requests) ? req args :                                  \
	 fast ? fast args : req args)

static __attribute__((noinline)) ssize_t recv_req(int fd, void *buf, size_t n, int flags)
{
	D9_REAL(ssize_t, recv, (int, void *, size_t, int));
	fast_recv = real_recv;
	if (!real_recv)
		return syscall(SYS_recvfrom, fd, buf, n, flags, NULL, NULL);
	ssize_t r = D9__SYS(real_recv(fd, buf, n, flags), SYS_recvfrom, fd, buf, n, flags, 0, 0);
	/* a peek leaves the bytes for the next read: not yet read */
	if (D9_UNLIKELY(d9__pcfg.requests) && !(flags & MSG_PEEK))
		req_read(fd, buf, r);
	return r;
}

D9_INTERPOSE ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	return PASS(fast_recv, (fd, buf, n, flags), recv_req, SYS_recvfrom, fd, buf, n, flags, 0, 0);
}

static __attribute__((noinline)) ssize_t recvfrom_req(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
	socklen_t *alen)
{
	D9_REAL(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *, socklen_t *));
	fast_recvfrom = real_recvfrom;
	if (!real_recvfrom)
		return syscall(SYS_recvfrom, fd, buf, n, flags, addr, alen);
	ssize_t r = D9__SYS(real_recvfrom(fd, buf, n, flags, addr, alen), SYS_recvfrom, fd, buf,
		n, flags, addr, alen);
	if (D9_UNLIKELY(d9__pcfg.requests) && !(flags & MSG_PEEK))
		req_read(fd, buf, r);
	return r;
}

D9_INTERPOSE ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
	socklen_t *alen)
{
	return PASS(fast_recvfrom, (fd, buf, n, flags, addr, alen), recvfrom_req, SYS_recvfrom, fd,
		buf, n, flags, addr, alen);
}

static __attribute__((noinline)) ssize_t recvmsg_req(int fd, struct msghdr *msg, int flags)
{
	D9_REAL(ssize_t, recvmsg, (int, struct msghdr *, int));
	fast_recvmsg = real_recvmsg;
	if (!real_recvmsg)
		return syscall(SYS_recvmsg, fd, msg, flags);
	ssize_t r = D9__SYS(real_recvmsg(fd, msg, flags), SYS_recvmsg, fd, msg, flags);
	/* a bad msg is the kernel's EFAULT, never ours to read */
	if (D9_UNLIKELY(d9__pcfg.requests) && !(flags & MSG_PEEK))
		d9__req_readv(fd, r > 0 ? msg->msg_iov : NULL, r > 0 ? msg->msg_iovlen : 0, r);
	return r;
}

D9_INTERPOSE ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	return PASS(fast_recvmsg, (fd, msg, flags), recvmsg_req, SYS_recvmsg, fd, msg, flags);
}

/* _FORTIFY_SOURCE builds (Debian's servers) call these instead when the buffer size is known. */
D9_INTERPOSE ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return read(fd, buf, n);
}

D9_INTERPOSE ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		__chk_fail();
	return recv(fd, buf, n, flags);
}

D9_INTERPOSE ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
	struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		__chk_fail();
	return recvfrom(fd, buf, n, flags, addr, alen);
}

static __attribute__((noinline)) ssize_t send_req(int fd, const void *buf, size_t n, int flags)
{
	D9_REAL(ssize_t, send, (int, const void *, size_t, int));
	fast_send = real_send;
	if (!real_send)
		return syscall(SYS_sendto, fd, buf, n, flags, NULL, 0);
	ssize_t r = D9__SYS(real_send(fd, buf, n, flags), SYS_sendto, fd, buf, n, flags, 0, 0);
	D9__REQ_HOOK(d9__req_wrote(fd, r));
	return r;
}

D9_INTERPOSE ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	return PASS(fast_send, (fd, buf, n, flags), send_req, SYS_sendto, fd, buf, n, flags, 0, 0);
}

static __attribute__((noinline)) ssize_t sendto_req(int fd, const void *buf, size_t n, int flags,
	const struct sockaddr *addr, socklen_t alen)
{
	D9_REAL(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *, socklen_t));
	fast_sendto = real_sendto;
	if (!real_sendto)
		return syscall(SYS_sendto, fd, buf, n, flags, addr, alen);
	ssize_t r = D9__SYS(real_sendto(fd, buf, n, flags, addr, alen), SYS_sendto, fd, buf, n,
		flags, addr, alen);
	D9__REQ_HOOK(d9__req_wrote(fd, r));
	return r;
}

D9_INTERPOSE ssize_t sendto(int fd, const void *buf, size_t n, int flags,
	const struct sockaddr *addr, socklen_t alen)
{
	return PASS(fast_sendto, (fd, buf, n, flags, addr, alen), sendto_req, SYS_sendto, fd, buf,
		n, flags, addr, alen);
}

static __attribute__((noinline)) ssize_t sendmsg_req(int fd, const struct msghdr *msg, int flags)
{
	D9_REAL(ssize_t, sendmsg, (int, const struct msghdr *, int));
	fast_sendmsg = real_sendmsg;
	if (!real_sendmsg)
		return syscall(SYS_sendmsg, fd, msg, flags);
	ssize_t r = D9__SYS(real_sendmsg(fd, msg, flags), SYS_sendmsg, fd, msg, flags);
	D9__REQ_HOOK(d9__req_wrote(fd, r));
	return r;
}

D9_INTERPOSE ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return PASS(fast_sendmsg, (fd, msg, flags), sendmsg_req, SYS_sendmsg, fd, msg, flags);
}

static __attribute__((noinline)) ssize_t sendfile_req(int out, int in, off_t *off, size_t n)
{
	D9_REAL(ssize_t, sendfile, (int, int, off_t *, size_t));
	fast_sendfile = real_sendfile;
	if (!real_sendfile)
		return syscall(SYS_sendfile, out, in, off, n);
	ssize_t r = real_sendfile(out, in, off, n);
	D9__REQ_HOOK(d9__req_wrote(out, r));
	return r;
}

D9_INTERPOSE ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	if (D9_LIKELY(!d9__pcfg.requests && fast_sendfile))
		return fast_sendfile(out, in, off, n); /* a tail call */
	return sendfile_req(out, in, off, n);
}

D9_INTERPOSE ssize_t sendfile64(int out, int in, off_t *off, size_t n) __attribute__((alias("sendfile")));

/* close is everywhere: with D9_REQUESTS off, one branch; on, a table look-up before the call
 * (the number may be reused by another thread as soon as it is closed). */
D9_INTERPOSE int close(int fd)
{
	D9_REAL(int, close, (int));
	d9__fd_forget(fd); /* before: the number is free for another thread once closed */
	if (D9_UNLIKELY(d9__self.role == D9_ROLE_AGENT))
		return d9__fd_agent_close(fd); /* zlib's, the reader's: checked (agent/fdown.c) */
	D9__REQ_HOOK(d9__req_close(fd));
	d9__fd_host_take(fd); /* after the agent's write in progress on it, if it is the agent's */
	int r = !real_close ? (int)syscall(SYS_close, fd) : D9__SYS(real_close(fd), SYS_close, fd);
	d9__fd_host_done(fd);
	return r;
}
