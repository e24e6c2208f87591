/* s3.c: uploads sealed segments (continuous mode) and dumps (flight mode) to an S3-compatible
 * endpoint from one background thread (d9-s3). libcurl is loaded with dlopen only when
 * D9_S3_BUCKET is set, so the host gets no new library otherwise. It must never block or slow
 * the host: the hook (d9__sealed_hook) only queues a path; failures open a circuit breaker (1 s
 * doubling to 5 min); what waits stays on disk under the directory budget, which may evict it
 * (counted); uploads, failures and evictions reach every trailer (FORMAT.md section 11). One
 * stderr line per state change. Design: agent/DESIGN.md, "S3 upload". */
#include "internal.h"
#include "s3.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int d9__spawn_blocked(pthread_t *th, void *(*fn)(void *)); /* lifecycle.c */

/* paths waiting, 4.2 KB each at most (4.3 MB); past it the oldest is given up (counted as
 * evicted). The directory budget keeps far fewer segments (D9_MAX_FILES, default 256). */
#define QUEUE_MAX 1024
#define BACKOFF_MIN_NS 1000000000ull
#define BACKOFF_MAX_NS (300 * 1000000000ull)

/* libcurl, resolved at the uploader's start: the only calls made into it */
struct job {
	char path[4200];
	int is_dump;
	int ready; /* 0: sealed, not final yet (being symbolized or compressed): not uploaded yet,
		    * but counted when the budget deletes it first */
};

enum { S3_IDLE = 0, S3_UP = 1, S3_FAILING = 2, S3_OFF = 3 };

static struct {
	int configured; /* 1: D9_S3_BUCKET set and the settings valid */
	struct d9__s3_cfg cfg;
	pthread_mutex_t mu;
	pthread_cond_t cond; /* CLOCK_MONOTONIC: work queued */
	struct job *q; /* oldest first */
	size_t nq, qcap;
	int started, off; /* off: the uploader gave up for good (no libcurl) */
	int uploading; /* busy is being uploaded: an eviction leaves it to the upload's outcome */
	char busy[4200];
	pthread_t th;
	pid_t pid; /* whose queue and counters these are (a forked child starts its own) */
	/* running totals of this process, read by the writer for each trailer (all under mu) */
	uint64_t uploaded, uploaded_bytes, failures, evicted;
} s3 = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void cond_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s3.cond, &ca);
	pthread_condattr_destroy(&ca);
}

/* A forked child: the parent's thread is gone and its queue is the parent's work. */
static void s3_child(void)
{
	pthread_mutex_init(&s3.mu, NULL);
	cond_init();
	s3.nq = 0;
	s3.started = s3.uploading = 0;
	s3.pid = getpid();
	s3.uploaded = s3.uploaded_bytes = s3.failures = s3.evicted = 0;
}

/* At load, while the host has no threads that could change the environment: the settings are
 * copied; nothing is loaded or started until the first sealed segment. */
__attribute__((constructor)) static void s3_init(void)
{
	const char *why;
	int saved = errno;

	if (getenv("D9__NO_CALLS"))
		return; /* a process under a seccomp filter (lifecycle.c, d9__init) */
	int r = d9__s3_config_env(&s3.cfg, &why, 0);
	if (r < 0)
		d9__log(D9_LOG_ERROR, "%s; S3 upload is off", why);
	if (r > 0) {
		s3.configured = 1;
		s3.pid = getpid();
		cond_init();
		pthread_atfork(NULL, NULL, s3_child);
	}
	errno = saved;
}

int d9__s3_configured(void)
{
	return s3.configured;
}

/* The four counts as of one moment: under mu, where the uploader adds an upload's two together
 * (a seal between them would pair N uploads with N - 1 uploads' bytes). Writer thread. */
void d9__s3_counts(uint64_t out[4])
{
	if (!s3.configured) {
		memset(out, 0, 4 * sizeof(*out));
		return;
	}
	d9__lock(&s3.mu);
	out[0] = s3.uploaded;
	out[1] = s3.uploaded_bytes;
	out[2] = s3.failures;
	out[3] = s3.evicted;
	d9__unlock(&s3.mu);
}

/* ---- libcurl ------------------------------------------------------------------------------------ */

/* OpenSSL 3 frees its global state from an atexit handler, which would pull it from under an
 * upload still running on d9-s3 while the host exits: when libcrypto is not in the process yet,
 * it is loaded first and initialised without that handler (OPENSSL_INIT_NO_ATEXIT). A host that
 * already uses OpenSSL keeps its own choice. */
static void openssl_no_atexit(void)
{
	void *crypto = d9__dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);

	if (crypto) {
		d9__dlclose(crypto); /* already there: the host's (or a library's) */
		return;
	}
	crypto = d9__dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
	if (!crypto)
		return;
	int (*init)(uint64_t, const void *);
	*(void **)&init = dlsym(crypto, "OPENSSL_init_crypto");
	if (init) {
		/* through the loader gate: depending on openssl.cnf it loads providers or engines */
		d9__loader_enter();
		init(0x00080000ull /* OPENSSL_INIT_NO_ATEXIT */, NULL);
		d9__loader_leave();
	}
	/* kept loaded: libcurl's libssl needs it */
}

static int curl_load(struct d9__curl *c, char *why, size_t cap)
{
	openssl_no_atexit();
	/* RTLD_LOCAL: its symbols never interpose on the host's; a host that has its own libcurl
	 * shares the loaded copy (same soname) */
	void *lib = d9__dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(why, cap, "cannot load libcurl.so.4 (%s)", dlerror());
		return -ENOENT;
	}
	int err = d9__curl_syms(c, lib, why, cap);
	if (err)
		return err;
	d9__loader_enter(); /* TLS and its configuration may load more (OpenSSL, above) */
	int gerr = c->global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK;
	d9__loader_leave();
	if (gerr) {
		snprintf(why, cap, "curl_global_init failed");
		return -EIO;
	}
	return 0;
}

/* The connection's socket, made by us: close-on-exec and at a high number (files.c), so the
 * host's low descriptors and its children never see it. */
static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	(void)ctx;
	(void)purpose;
	int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	struct stat st;

	if (fd < 0)
		return CURL_SOCKET_BAD;
	int err = d9__fd_own(fd); /* marked already by socket() on this (the agent's) thread */
	if (err == -EMFILE)
		return fd; /* too high to mark the agent's (fdown.c): used as it is */
	if (err)
		return CURL_SOCKET_BAD; /* the program's now, or not known to be free: left alone */
	if ((err = d9__fd_enter(fd)) != 0)
		return CURL_SOCKET_BAD;
	err = fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode);
	d9__fd_leave(fd);
	if (err) {
		d9__fd_unmark(fd); /* not the socket made: left alone */
		return CURL_SOCKET_BAD;
	}
	struct d9__file f = { fd, st.st_dev, st.st_ino };
	int hi = d9__file_dup(&f);
	if (hi < 0)
		return d9__file_check(&f) ? CURL_SOCKET_BAD : fd; /* no high number free: the low one */
	d9__fd_close(fd); /* made just now by this thread */
	return hi;
}

struct body {
	struct d9__file *f;
	uint64_t off, size;
	int err;
};

static size_t read_body(char *buf, size_t size, size_t n, void *ctx)
{
	struct body *b = ctx;
	size_t want = size * n;
	ssize_t k;

	if (b->off >= b->size)
		return 0;
	if (want > b->size - b->off)
		want = (size_t)(b->size - b->off);
	do
		k = pread(b->f->fd, buf, want, (off_t)b->off);
	while (k < 0 && errno == EINTR);
	if (k <= 0 || d9__file_check(b->f) != 0) {
		b->err = k < 0 ? -errno : -EIO;
		return CURL_READFUNC_ABORT;
	}
	b->off += (uint64_t)k;
	return (size_t)k;
}

/* S3's answer body: nothing, or an XML error whose start is kept for the failure line. */
struct answer {
	char text[512];
	size_t n;
};

static size_t sink(char *buf, size_t size, size_t n, void *ctx)
{
	struct answer *a = ctx;
	size_t k = size * n, room = sizeof(a->text) - 1 - a->n;

	memcpy(a->text + a->n, buf, k < room ? k : room);
	a->n += k < room ? k : room;
	a->text[a->n] = 0;
	return k;
}

/* ---- one upload ---------------------------------------------------------------------------------- */

/* SHA-256 of the whole file (S3 checks it; libcurl 7.88 signs the header, it does not compute it). */
static int hash_file(struct d9__file *f, uint64_t size, char hex[65])
{
	static uint8_t buf[65536]; /* uploader thread only */
	struct d9__sha256 s;
	uint8_t sum[32];
	uint64_t off = 0;

	d9__sha256_init(&s);
	while (off < size) {
		size_t want = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		ssize_t k = pread(f->fd, buf, want, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		d9__sha256_update(&s, buf, (size_t)k);
		off += (uint64_t)k;
	}
	if (d9__file_check(f))
		return -EBADF;
	d9__sha256_final(&s, sum);
	d9__sha256_hex(sum, hex);
	return 0;
}

/* The key of a segment or dump, from its own header: its process, host, boot and start time,
 * so a leftover of a dead process adopted by this one goes under its writer's name. */
static int key_for(const char *path, struct d9__file *f, char *key, size_t cap)
{
	struct d9_reader *r;
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	/* the reader's own descriptor, high (zlib closes it unchecked), at offset 0: f is read
	 * with pread only */
	int rfd = d9__file_dup(f);
	if (rfd < 0)
		return -EBADF;
	int err = d9_reader_open_fd(&r, rfd);
	if (err)
		return err < 0 ? err : -EINVAL;
	const struct d9_header *h = d9_reader_header(r);
	/* <stem>.<pid>.<seq><suffix> -> <seq><suffix>; a dump keeps its own name */
	char name[256];
	long pid, seq;
	const char *suffix = d9__seg_parse(base, &pid, &seq);
	if (suffix && (uint32_t)pid == h->pid)
		snprintf(name, sizeof(name), "%ld%s", seq, suffix);
	else
		snprintf(name, sizeof(name), "%.255s", base);
	err = d9__s3_key(&s3.cfg, key, cap, h->start_realtime_ns, h->process, h->hostname,
		h->boot_id, h->pid, name);
	d9_reader_close(r);
	return err;
}

struct result {
	long http; /* 0: no answer */
	CURLcode cc;
	char why[256];
};

/* PUTs path under its key. Returns 0 (stored), -ENOENT (the file is gone: evicted), -EBADMSG
 * (this file can never be uploaded: not a readable segment) or another negative errno (the
 * endpoint, the network, the credentials: worth trying again), res saying what happened.
 * *size gets the bytes sent. On success f stays open for the caller (delete after upload checks
 * that the name still is that file). */
static int put_file(struct d9__curl *c, const char *path, struct d9__file *f, uint64_t *size,
	struct result *res)
{
	char key[2048], ekey[6200], url[8192], sig[96], hex[65], hdr[4200], up[600];
	struct d9__s3_creds cr;
	struct curl_slist *h = NULL;
	struct stat st;
	int err;

	res->http = 0;
	res->cc = CURLE_OK;
	res->why[0] = 0;
	if ((err = d9__file_open(f, path, O_RDONLY)) != 0) {
		snprintf(res->why, sizeof(res->why), "%s", strerror(-err));
		return err;
	}
	if (fstat(f->fd, &st) != 0) {
		err = -errno;
		goto fail;
	}
	*size = (uint64_t)st.st_size;
	if (key_for(path, f, key, sizeof(key)) != 0) {
		snprintf(res->why, sizeof(res->why), "cannot read its header");
		err = -EBADMSG;
		goto fail;
	}
	if (d9__s3_uri_encode(ekey, sizeof(ekey), key, 1) >= sizeof(ekey) ||
		d9__s3_url(&s3.cfg, ekey, NULL, url, sizeof(url))) {
		snprintf(res->why, sizeof(res->why), "the key is too long");
		err = -EBADMSG;
		goto fail;
	}
	if ((err = hash_file(f, *size, hex)) != 0) {
		snprintf(res->why, sizeof(res->why), "cannot read it: %s", strerror(-err));
		goto fail;
	}
	/* read for every upload: a rotated session token is picked up without a restart */
	if (d9__s3_creds_load(&s3.cfg, &cr, res->why, sizeof(res->why)) != 0) {
		err = -EPERM; /* not -ENOENT: that would say the segment is gone */
		goto fail;
	}
	CURL *e = c->easy_init();
	if (!e) {
		snprintf(res->why, sizeof(res->why), "curl_easy_init failed");
		err = -ENOMEM;
		goto fail;
	}
	snprintf(hdr, sizeof(hdr), "x-amz-content-sha256: %s", hex);
	h = c->slist_append(h, hdr);
	if (cr.token[0]) {
		snprintf(hdr, sizeof(hdr), "x-amz-security-token: %s", cr.token);
		h = c->slist_append(h, hdr);
	}
	/* no "Expect:" to turn 100-continue off: libcurl 7.88 would sign that header without
	 * sending it (agent/DESIGN.md, "S3 upload") */
	h = c->slist_append(h, "Content-Type: application/octet-stream");
	d9__s3_sigv4(&s3.cfg, sig, sizeof(sig));
	snprintf(up, sizeof(up), "%s:%s", cr.key_id, cr.secret);
	struct body b = { f, 0, *size, 0 };
	struct answer ans = { .n = 0 };
	c->easy_setopt(e, CURLOPT_URL, url);
	c->easy_setopt(e, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM for the host's handlers */
	c->easy_setopt(e, CURLOPT_UPLOAD, 1L);
	c->easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)*size);
	c->easy_setopt(e, CURLOPT_READFUNCTION, read_body);
	c->easy_setopt(e, CURLOPT_READDATA, &b);
	c->easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	c->easy_setopt(e, CURLOPT_WRITEDATA, &ans);
	c->easy_setopt(e, CURLOPT_HTTPHEADER, h);
	c->easy_setopt(e, CURLOPT_AWS_SIGV4, sig);
	c->easy_setopt(e, CURLOPT_USERPWD, up);
	c->easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	/* a new connection per upload: no socket of ours stays open between uploads */
	c->easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
	c->easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 10L);
	c->easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled peer: given up after 30 s */
	c->easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 30L);
	c->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	res->cc = c->easy_perform(e);
	c->easy_getinfo(e, CURLINFO_RESPONSE_CODE, &res->http);
	c->easy_cleanup(e);
	c->slist_free_all(h);
	memset(up, 0, sizeof(up));
	memset(&cr, 0, sizeof(cr));
	if (res->cc != CURLE_OK) {
		snprintf(res->why, sizeof(res->why), "%s", b.err ? strerror(-b.err) :
			c->easy_strerror(res->cc));
		err = b.err ? b.err : -EIO;
		goto fail;
	}
	if (res->http < 200 || res->http > 299) {
		/* <Code>AccessDenied</Code> says more than the status */
		const char *code = strstr(ans.text, "<Code>"), *end = code ? strstr(code, "</Code>") : NULL;
		if (end)
			snprintf(res->why, sizeof(res->why), "HTTP %ld %.*s", res->http,
				(int)(end - code - 6), code + 6);
		else
			snprintf(res->why, sizeof(res->why), "HTTP %ld", res->http);
		err = -EIO;
		goto fail;
	}
	return 0;
fail:
	d9__file_close(f);
	return err;
}

/* D9_S3_DELETE_AFTER_UPLOAD: removes path when it is still the file uploaded (f), under the
 * directory lock that orders every deletion and publishing rename of the stem (budget.c). */
static void delete_uploaded(const char *path, struct d9__file *f)
{
	struct stat st;
	int taken = d9__dirlock_take(5000000000ull, 1);

	if (taken < 0)
		return; /* left to the budget */
	if (lstat(path, &st) == 0 && st.st_dev == f->dev && st.st_ino == f->ino && S_ISREG(st.st_mode) &&
		st.st_uid == geteuid() && unlink(path) == 0)
		d9__log(D9_LOG_DEBUG, "deleted %s (uploaded to S3)", path);
	d9__dirlock_give(taken);
}

/* ---- the uploader thread --------------------------------------------------------------------------- */

/* The oldest job ready for upload into *j (mu held). Returns 0 when there is none. */
static int peek(struct job *j)
{
	for (size_t i = 0; i < s3.nq; i++)
		if (s3.q[i].ready) {
			*j = s3.q[i];
			return 1;
		}
	return 0;
}

/* Removes path from the queue (mu held). Returns 1 when it was there. */
static int unqueue(const char *path)
{
	for (size_t i = 0; i < s3.nq; i++)
		if (!strcmp(s3.q[i].path, path)) {
			memmove(&s3.q[i], &s3.q[i + 1], (s3.nq - i - 1) * sizeof(*s3.q));
			s3.nq--;
			return 1;
		}
	return 0;
}

static void wait_until(uint64_t until_ns)
{
	struct timespec ts = d9__timespec(until_ns);

	pthread_cond_timedwait(&s3.cond, &s3.mu, &ts);
}

static void *uploader_main(void *arg)
{
	static struct d9__curl c; /* uploader thread only */
	char why[256];
	int state = S3_IDLE;
	uint64_t backoff = 0, retry_at = 0;
	const char *where = s3.cfg.endpoint[0] ? s3.cfg.endpoint : "AWS";

	(void)arg;
	d9__agent_thread(arg);
	prctl(PR_SET_NAME, "d9-s3");
	/* this thread only (under an inherited seccomp filter: compress.c) */
	if (d9__call_survives(SYS_setpriority))
		setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	if (!c.lib && curl_load(&c, why, sizeof(why)) != 0) {
		d9__log(D9_LOG_WARN, "S3 upload is off: %s; segments stay in %s", why,
			d9__trace_dir_shown(&d9__g.cfg));
		d9__lock(&s3.mu);
		s3.off = 1;
		s3.nq = 0;
		d9__unlock(&s3.mu);
		return NULL;
	}
	d9__lock(&s3.mu);
	for (;;) {
		struct job j;
		uint64_t now = d9__mono_ns();
		int have = peek(&j);
		if (!have || now < retry_at) {
			/* idle: the hook signals new work; the timeout only bounds a lost wake-up */
			wait_until(have ? retry_at : now + 60000000000ull);
			continue;
		}
		s3.uploading = 1;
		memcpy(s3.busy, j.path, sizeof(s3.busy));
		d9__unlock(&s3.mu);
		struct d9__file f = { -1, 0, 0 };
		struct result res;
		uint64_t size = 0;
		int err = put_file(&c, j.path, &f, &size, &res);
		if (!err && s3.cfg.delete_after)
			delete_uploaded(j.path, &f);
		d9__file_close(&f);
		d9__lock(&s3.mu);
		s3.uploading = 0;
		if (!err || err == -ENOENT || err == -EBADMSG) {
			/* stored; gone before it could be (a budget, the host); or never storable */
			if (unqueue(j.path)) {
				if (!err) {
					s3.uploaded += 1;
					s3.uploaded_bytes += size;
					d9__log(D9_LOG_DEBUG, "S3 upload: %s stored (%llu bytes)",
						j.path, (unsigned long long)size);
				} else if (err == -ENOENT) {
					s3.evicted += 1;
				} else {
					s3.failures += 1;
					d9__log_once(D9_LOG_WARN, "S3 upload: %s is skipped: %s (said once)",
						j.path, res.why);
				}
			}
		} else {
			s3.failures += 1;
			backoff = backoff ? backoff * 2 : BACKOFF_MIN_NS;
			if (backoff > BACKOFF_MAX_NS)
				backoff = BACKOFF_MAX_NS;
			retry_at = d9__mono_ns() + backoff;
			if (state != S3_FAILING)
				d9__log(D9_LOG_WARN, "S3 upload to %s bucket %s failing (%s: %s): retrying "
					"with back-off up to 5 min; segments wait in %s within "
					"D9_MAX_TOTAL_SIZE", where, s3.cfg.bucket, j.path, res.why,
					d9__trace_dir_shown(&d9__g.cfg));
			state = S3_FAILING;
		}
		if (!err) {
			if (state == S3_FAILING)
				d9__log(D9_LOG_WARN, "S3 upload to %s bucket %s works again", where,
					s3.cfg.bucket);
			else if (state == S3_IDLE)
				d9__log(D9_LOG_INFO, "S3 upload to %s bucket %s works", where, s3.cfg.bucket);
			state = S3_UP;
			backoff = 0;
			retry_at = 0;
		}
	}
	return NULL;
}

/* Appends a job (mu held); when the queue is full its oldest entry is given up (it stays on disk,
 * never uploaded: counted as the budget's evictions are). Returns the job or NULL. */
static struct job *enqueue(const char *path, int ready, int is_dump)
{
	if (s3.nq == QUEUE_MAX) {
		d9__log_once(D9_LOG_WARN, "S3 upload queue full (%d segments): the oldest waiting "
			"segments are not uploaded (counted)", QUEUE_MAX);
		memmove(&s3.q[0], &s3.q[1], (s3.nq - 1) * sizeof(*s3.q));
		s3.nq--;
		s3.evicted += 1;
	}
	if (s3.nq == s3.qcap) {
		size_t cap = s3.qcap ? s3.qcap * 2 : 64;
		struct job *q = realloc(s3.q, cap * sizeof(*q));
		if (!q) {
			s3.evicted += 1;
			return NULL;
		}
		s3.q = q;
		s3.qcap = cap;
	}
	struct job *j = &s3.q[s3.nq++];
	snprintf(j->path, sizeof(j->path), "%s", path);
	j->is_dump = is_dump;
	j->ready = ready;
	return j;
}

/* A segment of this process sealed at path that is not final yet (the compressor symbolizes or
 * gzips it first): from now on, the budget deleting it is an eviction before upload. */
void d9__s3_pending(const char *path)
{
	int saved = errno;

	if (!s3.configured)
		return;
	d9__lock(&s3.mu);
	if (!s3.off)
		enqueue(path, 0, 0);
	d9__unlock(&s3.mu);
	errno = saved;
}

/* A segment or dump was sealed at path (after compression; .bin with D9_COMPRESS=0): ready for
 * the uploader, which is started on the first one. Called on agent threads (compressor, writer);
 * never blocks on the network. */
void d9__sealed_hook(const char *path, int is_dump)
{
	int saved = errno;
	struct job *j = NULL;

	if (!s3.configured || !path)
		return;
	d9__lock(&s3.mu);
	if (s3.off)
		goto out;
	/* the .bin registered at its seal (d9__s3_pending) is now path, or path is its .gz; a
	 * second call for the same file (two call sites after a merge) queues nothing more */
	size_t n = strlen(path);
	for (size_t i = 0; i < s3.nq && !j; i++)
		if (!strcmp(s3.q[i].path, path) ||
			(!s3.q[i].ready && n > 3 && !strcmp(path + n - 3, ".gz") &&
			 strlen(s3.q[i].path) == n - 3 && !strncmp(s3.q[i].path, path, n - 3)))
			j = &s3.q[i];
	if (j && j->ready)
		goto out;
	if (j) {
		snprintf(j->path, sizeof(j->path), "%s", path);
		j->ready = 1;
		j->is_dump = is_dump;
	} else if (!enqueue(path, 1, is_dump)) {
		goto out;
	}
	if (!s3.started && !__atomic_load_n(&d9__g.stop, __ATOMIC_ACQUIRE)) {
		int err = d9__spawn_blocked(&s3.th, uploader_main);
		if (err) {
			d9__log(D9_LOG_WARN, "S3 upload is off: cannot start its thread: %s",
				strerror(-err));
			s3.off = 1;
			s3.nq = 0;
			goto out;
		}
		s3.started = 1;
	}
	pthread_cond_signal(&s3.cond);
out:
	d9__unlock(&s3.mu);
	errno = saved;
}

void d9__s3_evicted(const char *path)
{
	char gz[4300];

	if (!s3.configured)
		return;
	snprintf(gz, sizeof(gz), "%s.gz", path);
	d9__lock(&s3.mu);
	/* the budget names what it deleted; the queue may hold the .bin or its .gz. The one being
	 * uploaded is counted by the upload's outcome (stored, or gone at the next try) */
	if (s3.uploading && (!strcmp(s3.busy, path) || !strcmp(s3.busy, gz)))
		goto out;
	if (unqueue(path) || unqueue(gz))
		s3.evicted += 1;
out:
	d9__unlock(&s3.mu);
}
