/* defs.c: interned definitions (strings, spawn locations, stacks, threads). Each new definition
 * is appended, already encoded, to one log; the writer writes the whole log at the start of every
 * segment and the new tail before every chunk, so every id an event uses is defined earlier in
 * the same segment (self-contained segments, FORMAT.md). Slow path only: one mutex. Memory is
 * capped; past the cap, lookups of new keys return 0 ("unknown") and are counted. */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DEFLOG_LIMIT (16u << 20) /* log bytes + index bytes */

struct node {
	struct node *next;
	uint64_t hash, id;
	uint32_t klen;
	uint8_t kind;
	uint8_t key[];
};

struct d9__intern {
	struct node **tab;
	size_t cap, n, bytes;
	uint64_t next_id[D9_DEF_KNOWN_MAX + 1];
};

static struct d9__intern intern_state;

/* The definitions' memory is mapped, never taken from the program's malloc: intern runs on the
 * program's threads (a worker's first definitions, a spawn site, a stack), and the C library's
 * blocks there would sit among the program's own, long-lived, near the top of its heap. nginx,
 * whose worker serves from the main heap, then spent about 200 instructions more in malloc and
 * free per request (agent/COST.md section 29). Definitions only grow (DEFLOG_LIMIT bounds
 * them): the log is remapped larger, the index replaced, the nodes carved from blocks. */
#define NODE_BLOCK (256u << 10)
static uint8_t *node_at, *node_end;

static void *map_zeroed(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void *node_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if ((size_t)(node_end - node_at) < n) {
		size_t b = n > NODE_BLOCK ? n : NODE_BLOCK;
		uint8_t *p = map_zeroed(b);
		if (!p)
			return NULL;
		node_at = p; /* the old block's rest is left unused */
		node_end = p + b;
	}
	void *r = node_at;
	node_at += n;
	return r;
}

/* The agent's own code, from its ELF header to the end of its text (symbols the linker
 * defines in every object), when it runs as libd9agent.so; empty in a program that links the
 * core statically (tests, benchmarks), whose own code that range would be. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char __etext[] __attribute__((visibility("hidden")));
static uint64_t agent_lo, agent_hi;

static void find_agent_code(void)
{
	Dl_info di;

	if (!dladdr((void *)find_agent_code, &di) || !di.dli_fname)
		return;
	const char *base = strrchr(di.dli_fname, '/');
	if (strncmp(base ? base + 1 : di.dli_fname, "libd9agent.so", 13))
		return;
	agent_lo = (uintptr_t)__ehdr_start;
	agent_hi = (uintptr_t)__etext;
}

void d9__defs_init(void)
{
	struct d9__agent *g = &d9__g;

	find_agent_code();

	pthread_mutex_init(&g->def_lock, NULL);
	g->intern = &intern_state;
	g->log.limit = DEFLOG_LIMIT;
}

static uint64_t hash_bytes(uint8_t kind, const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 0xcbf29ce484222325ull ^ kind;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Room for n more log bytes (def lock held). Returns 0 or -ENOSPC. */
static int log_reserve(size_t n)
{
	struct d9__deflog *l = &d9__g.log;

	if (l->len + n + d9__g.intern->bytes > l->limit)
		return -ENOSPC;
	if (l->len + n <= l->cap)
		return 0;
	size_t cap = l->cap ? l->cap : 65536;
	while (cap < l->len + n)
		cap *= 2;
	uint8_t *b = l->buf ? mremap(l->buf, l->cap, cap, MREMAP_MAYMOVE) : map_zeroed(cap);
	if (!b || b == MAP_FAILED)
		return -ENOMEM;
	l->buf = b;
	l->cap = cap;
	return 0;
}

static void log_begin(struct d9_wbuf *w, size_t need)
{
	struct d9__deflog *l = &d9__g.log;

	if (log_reserve(need)) {
		d9_wbuf_init(w, NULL, 0);
		w->err = -ENOSPC;
		return;
	}
	d9_wbuf_init(w, l->buf + l->len, l->cap - l->len);
}

static int log_commit(struct d9_wbuf *w)
{
	if (w->err) {
		d9__g.log.full++;
		d9__log_once(D9_LOG_WARN, "definition tables full (%u MiB): new names are recorded as unknown",
			DEFLOG_LIMIT >> 20);
		return w->err;
	}
	/* published with release so the forked child and the writer see whole records */
	__atomic_store_n(&d9__g.log.len, d9__g.log.len + (size_t)(w->p - w->start), __ATOMIC_RELEASE);
	return 0;
}

/* Finds or adds (kind, key); on add, encode() appends its record. Def lock held. */
static uint64_t intern(uint8_t kind, const void *key, size_t klen,
	void (*encode)(struct d9_wbuf *w, uint64_t id, const void *key, size_t klen), size_t maxrec)
{
	struct d9__intern *in = d9__g.intern;
	uint64_t h = hash_bytes(kind, key, klen);

	if (in->cap) {
		for (struct node *n = in->tab[h & (in->cap - 1)]; n; n = n->next)
			if (n->hash == h && n->kind == kind && n->klen == klen && !memcmp(n->key, key, klen))
				return n->id;
	}
	if (in->n + 1 > in->cap * 3 / 4) {
		size_t cap = in->cap ? in->cap * 2 : 1024;
		struct node **tab = map_zeroed(cap * sizeof(*tab));
		if (!tab)
			return 0;
		for (size_t i = 0; i < in->cap; i++)
			for (struct node *n = in->tab[i], *next; n; n = next) {
				next = n->next;
				n->next = tab[n->hash & (cap - 1)];
				tab[n->hash & (cap - 1)] = n;
			}
		in->bytes += (cap - in->cap) * sizeof(*tab);
		if (in->tab)
			munmap(in->tab, in->cap * sizeof(*tab));
		in->tab = tab;
		in->cap = cap;
	}
	struct d9_wbuf w;
	log_begin(&w, maxrec + sizeof(struct node) + klen);
	if (w.err)
		return log_commit(&w), 0;
	struct node *n = node_alloc(sizeof(*n) + klen);
	if (!n)
		return 0;
	uint64_t id = ++in->next_id[kind];
	encode(&w, id, key, klen);
	if (log_commit(&w)) {
		in->next_id[kind]--;
		node_at = (uint8_t *)n; /* the last piece carved: given back to its block */
		return 0;
	}
	n->hash = h;
	n->id = id;
	n->kind = kind;
	n->klen = (uint32_t)klen;
	memcpy(n->key, key, klen);
	n->next = in->tab[h & (in->cap - 1)];
	in->tab[h & (in->cap - 1)] = n;
	in->n++;
	in->bytes += sizeof(*n) + klen;
	return id;
}

static void enc_string(struct d9_wbuf *w, uint64_t id, const void *key, size_t klen)
{
	d9_def_string(w, id, key, klen);
}

static uint64_t string_locked(const char *s, size_t len)
{
	if (len > 4096)
		len = 4096;
	return intern(D9_DEF_STRING, s, len, enc_string, len + 16);
}

static int usable(void)
{
	int s = d9__g.state;

	return s == D9__CONFIGURED || s == D9__RUNNING_;
}

uint64_t d9_agent_string(const char *s, size_t len)
{
	if (!usable())
		return 0;
	d9__lock(&d9__g.def_lock);
	uint64_t id = string_locked(s, len);
	d9__unlock(&d9__g.def_lock);
	return id;
}

static void enc_location(struct d9_wbuf *w, uint64_t id, const void *key, size_t klen)
{
	uint64_t k[3];

	(void)klen;
	memcpy(k, key, sizeof(k));
	d9_def_location(w, id, k[0], k[1], 0, k[2]);
}

uint64_t d9_agent_location(uint64_t function_addr, uint64_t callsite_addr, uint64_t name)
{
	uint64_t k[3] = { function_addr, callsite_addr, name };

	if (!usable())
		return 0;
	d9__lock(&d9__g.def_lock);
	uint64_t id = intern(D9_DEF_LOCATION, k, sizeof(k), enc_location, 64);
	d9__unlock(&d9__g.def_lock);
	return id;
}

static void enc_stack(struct d9_wbuf *w, uint64_t id, const void *key, size_t klen)
{
	uint64_t frames[D9_STACK_MAX_FRAMES];

	memcpy(frames, key, klen);
	d9_def_stack(w, id, frames, (uint32_t)(klen / sizeof(uint64_t)));
}

/* Where a stack starts once the agent's own work is left out. A stack taken while an
 * interposer runs has agent frames on top of the program's: the interposer (called by the
 * program) and, when the agent was recording, its internal functions and what they called. The
 * first run of agent frames from the top is cut to its outermost frame, the interposer, named
 * like the call it wraps (dwsym.c), so the program's stack ends in `read` or
 * `pthread_mutex_lock`. A run of one frame is the interposer alone, calling the real function:
 * the frames above it are that call's and stay. */
static uint32_t agent_trim(const uint64_t *f, uint32_t n)
{
	uint32_t a = 0;

	if (agent_lo == agent_hi)
		return 0;
	while (a < n && (f[a] < agent_lo || f[a] >= agent_hi))
		a++;
	uint32_t b = a;
	while (b + 1 < n && f[b + 1] >= agent_lo && f[b + 1] < agent_hi)
		b++;
	return b < n && b > a ? b : 0;
}

uint64_t d9_agent_stack(const uint64_t *frames, uint32_t n)
{
	if (!usable())
		return 0;
	uint32_t skip = agent_trim(frames, n);
	frames += skip;
	n -= skip;
	if (n > D9_STACK_MAX_FRAMES)
		n = D9_STACK_MAX_FRAMES;
	d9__lock(&d9__g.def_lock);
	uint64_t id = intern(D9_DEF_STACK, frames, n * sizeof(uint64_t), enc_stack, 24 + n * 10);
	d9__unlock(&d9__g.def_lock);
	return id;
}

static void enc_module(struct d9_wbuf *w, uint64_t id, const void *key, size_t klen)
{
	/* the caller passed the already-interned fields through this scratch record */
	const uint64_t *f = key;
	(void)klen;
	d9_def_module(w, id, f[0], f[1], f[2], f[3], (const uint8_t *)(f + 5), (size_t)f[4]);
}

void d9__defs_module(const char *path, uint64_t start, uint64_t end, uint64_t offset,
	const uint8_t *build_id, size_t build_id_len)
{
	/* interned by (start, path): a library loaded again elsewhere is a new module */
	uint64_t key[5 + 8 + 512];
	size_t plen = strlen(path);

	if (plen > 4000 || build_id_len > 64)
		return;
	d9__lock(&d9__g.def_lock);
	uint64_t sid = string_locked(path, plen);
	key[0] = sid;
	key[1] = start;
	key[2] = end;
	key[3] = offset;
	key[4] = build_id_len;
	memcpy(key + 5, build_id, build_id_len);
	intern(D9_DEF_MODULE, key, 5 * sizeof(uint64_t) + build_id_len, enc_module, 128);
	d9__unlock(&d9__g.def_lock);
}

/* The last Thread definition of each thread (def lock), so that the writer can see a name that
 * changed without the thread telling: pthread_setname_np on another thread, a write to
 * /proc/self/task/TID/comm. Bounded: threads beyond NAMES_MAX keep the name they were defined
 * with. An entry whose tid is 0 is free; a dead thread's entry is freed when its comm is gone. */
#define NAMES_MAX 1024u
static struct thread_name {
	uint32_t tid, worker, role;
	uint64_t sid; /* String id of the name last defined */
} names[NAMES_MAX];
static int names_stale; /* atomic: a rename of another thread was seen */

/* The entry of tid, or a free one to take, or NULL (full). Def lock held. */
static struct thread_name *name_slot(uint32_t tid)
{
	struct thread_name *free_slot = NULL;

	for (uint32_t i = 0, h = tid * 2654435761u; i < NAMES_MAX; i++) {
		struct thread_name *e = &names[(h + i) % NAMES_MAX];
		if (e->tid == tid)
			return e;
		if (!e->tid && !free_slot)
			free_slot = e;
		if (!e->tid && !e->sid)
			break; /* never used: tid is not further on */
	}
	return free_slot;
}

/* Appends a Thread definition (def lock held) and remembers it. */
static void thread_locked(uint32_t tid, uint64_t sid, uint32_t worker, uint32_t role)
{
	struct d9_wbuf w;
	struct thread_name *e = name_slot(tid);

	log_begin(&w, 64);
	if (!w.err)
		d9_def_thread(&w, tid, sid, worker, role);
	if (log_commit(&w) == 0 && e)
		*e = (struct thread_name){ tid, worker, role, sid };
}

void d9__defs_thread(uint32_t tid, const char *name, uint32_t worker, uint32_t role)
{
	d9__lock(&d9__g.def_lock);
	thread_locked(tid, string_locked(name, strlen(name)), worker, role);
	d9__unlock(&d9__g.def_lock);
}

void d9__defs_privileges(uint32_t from_uid, uint32_t to_uid, uint32_t flags)
{
	struct d9_wbuf w;

	d9__lock(&d9__g.def_lock);
	log_begin(&w, 32);
	if (!w.err)
		d9_def_privileges(&w, from_uid, to_uid, flags);
	log_commit(&w);
	d9__unlock(&d9__g.def_lock);
}

/* One RecorderState per feature, state and process (a forked child inherits the log and these
 * flags): CPU samples that fall back to the ctimer and later lose it too say both. */
static int recorder_said[D9_REC_FEATURE_MAX + 1][D9_REC_STATE_MAX + 1];

void d9__defs_recorder(uint32_t feature, uint32_t state, int err, const char *text)
{
	struct d9_wbuf w;

	if (feature > D9_REC_FEATURE_MAX || state > D9_REC_STATE_MAX ||
		__atomic_exchange_n(&recorder_said[feature][state], 1, __ATOMIC_RELAXED))
		return;
	int saved = errno;
	d9__lock(&d9__g.def_lock);
	uint64_t sid = text ? string_locked(text, strlen(text)) : 0;
	log_begin(&w, 48);
	if (!w.err)
		d9_def_recorder(&w, feature, state, (uint64_t)(err < 0 ? -err : err), sid);
	log_commit(&w);
	d9__unlock(&d9__g.def_lock);
	errno = saved;
}

int d9__defs_custom_schema(uint64_t id, uint64_t name, const struct d9_custom_schema *s)
{
	struct d9_wbuf w;

	d9__lock(&d9__g.def_lock);
	log_begin(&w, 32 + (size_t)s->nfields * (D9_CUSTOM_NAME_MAX + 8));
	if (!w.err)
		d9_def_custom_schema(&w, id, name, s);
	int err = log_commit(&w);
	d9__unlock(&d9__g.def_lock);
	return err;
}

void d9_agent_thread_renamed_other(void)
{
	__atomic_store_n(&names_stale, 1, __ATOMIC_RELAXED);
}

/* Reads /proc/self/task/TID/comm into name[16]. Returns its length, or -1 (the thread is gone). */
static int task_comm(uint32_t tid, char name[16])
{
	char path[48];

	snprintf(path, sizeof(path), "/proc/self/task/%u/comm", tid);
	size_t n = d9__file_read_small(path, name, 16);
	if (!n)
		return -1;
	if (name[n - 1] == '\n')
		n--;
	name[n] = 0;
	return (int)n;
}

void d9__defs_names_refresh(int always)
{
	char name[16];

	if (!__atomic_exchange_n(&names_stale, 0, __ATOMIC_RELAXED) && !always)
		return;
	/* under the def lock: a thread's own rename (d9_agent_thread_renamed) that races with this
	 * read is defined after it, and the last definition wins */
	d9__lock(&d9__g.def_lock);
	for (uint32_t i = 0; i < NAMES_MAX; i++) {
		struct thread_name *e = &names[i];
		if (!e->tid || e->role == D9_ROLE_AGENT)
			continue;
		int n = task_comm(e->tid, name);
		if (n < 0) {
			e->tid = 0; /* exited: the slot is free (sid stays set: probes go on past it) */
			continue;
		}
		uint64_t sid = string_locked(name, (size_t)n);
		if (sid && sid != e->sid)
			thread_locked(e->tid, sid, e->worker, e->role);
	}
	d9__unlock(&d9__g.def_lock);
}

/* In a forked child (def lock re-made, one thread): the parent's Thread definitions leave the
 * log, or every segment of the child would define the parent's threads (and workers) as its
 * own; the child's threads define themselves when they record. Thread records are not interned,
 * so no cached id refers to them. Records only move forward; a malformed tail is kept as is. */
void d9__defs_child(void)
{
	struct d9__deflog *l = &d9__g.log;
	size_t r = 0, w = 0;

	while (r < l->len) {
		/* record: u8 kind, varint length, body */
		size_t q = r + 1;
		uint64_t len = 0;
		int shift = 0;
		while (q < l->len && shift < 64) {
			len |= (uint64_t)(l->buf[q] & 0x7f) << shift;
			shift += 7;
			if (!(l->buf[q++] & 0x80))
				break;
		}
		if (q > l->len || len > l->len - q)
			break;
		size_t rec = q - r + (size_t)len;
		if (l->buf[r] != D9_DEF_THREAD) {
			memmove(l->buf + w, l->buf + r, rec);
			w += rec;
		}
		r += rec;
	}
	memmove(l->buf + w, l->buf + r, l->len - r);
	l->len = w + (l->len - r);
}

size_t d9__defs_snapshot(size_t from, uint8_t **out)
{
	struct d9__deflog *l = &d9__g.log;

	*out = NULL;
	d9__lock(&d9__g.def_lock);
	size_t n = l->len > from ? l->len - from : 0;
	if (n) {
		*out = malloc(n);
		if (*out)
			memcpy(*out, l->buf + from, n);
		else
			n = 0;
	}
	d9__unlock(&d9__g.def_lock);
	return n;
}
