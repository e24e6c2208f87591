/* symbolize.c: names for the code addresses of a sealed segment, written into the segment
 * itself (String + Symbol records in one extra DEFS chunk), so a trace copied to another machine
 * still reads well. Runs on the compressor thread (nice 19), never on a host thread. Names come
 * from dwsym.c (libdw loaded with dlopen, the naming d9-analyze uses): the agent does not link
 * libdw, and without it segments stay as they are. It must never crash or stall the host, never
 * change a segment it cannot fully read, and never write a wrong name: modules are placed from
 * the segment's own Module definitions and checked against their recorded build ids. Design:
 * agent/DESIGN.md, "Background symbolization". */
#include "symbolize.h"
#include "dwsym.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ADDRS 65536 /* distinct addresses resolved per segment; more are counted, skipped */
#define MAX_MODULES 4096
#define MAX_CHUNK (8u << 20) /* the Symbol chunk's payload: records past it are skipped */
#define MAX_PATH_BYTES (1u << 20) /* strings kept while reading (module paths) */
#define MAX_SECONDS 60 /* resolving time per segment; the rest is skipped */
#define MAX_INLINE 16 /* inline levels per address, the real function included */

static int aborting(void)
{
	return __atomic_load_n(&d9__g.compress_abort, __ATOMIC_RELAXED);
}

/* ---- small tables ------------------------------------------------------------------------------- */

/* A set of non-zero u64 (open addressing, power-of-two capacity). */
struct set { uint64_t *k; size_t cap, n; };

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* Adds k (not 0). Returns 1 added, 0 already there, -ENOMEM. */
static int set_add(struct set *s, uint64_t k)
{
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		uint64_t *nk = calloc(cap, sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->k[i])
				continue;
			size_t j = mix(s->k[i]) & (cap - 1);
			while (nk[j])
				j = (j + 1) & (cap - 1);
			nk[j] = s->k[i];
		}
		free(s->k);
		s->k = nk;
		s->cap = cap;
	}
	size_t j = mix(k) & (s->cap - 1);
	while (s->k[j]) {
		if (s->k[j] == k)
			return 0;
		j = (j + 1) & (s->cap - 1);
	}
	s->k[j] = k;
	s->n++;
	return 1;
}

/* The segment's absolute-path strings (candidates for module paths), by id. */
struct pathstr { uint64_t id; char *s; };

/* New strings of the Symbol chunk, interned: same bytes, same id. */
struct strtab {
	uint64_t *hash;
	uint32_t *idx; /* index + 1 into s, 0: empty slot */
	size_t cap;
	char **s;
	size_t n;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h | 1;
}

/* Index of s in t (added when new), or -1 without memory. */
static long str_index(struct strtab *t, const char *s)
{
	uint64_t h = hash_str(s);

	if ((t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		uint64_t *nh = calloc(cap, sizeof(*nh));
		uint32_t *ni = calloc(cap, sizeof(*ni));
		char **ns = realloc(t->s, cap * sizeof(*ns));
		if (!nh || !ni || !ns) {
			free(nh);
			free(ni);
			if (ns)
				t->s = ns;
			return -1;
		}
		t->s = ns;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->idx[i])
				continue;
			size_t j = t->hash[i] & (cap - 1);
			while (ni[j])
				j = (j + 1) & (cap - 1);
			nh[j] = t->hash[i];
			ni[j] = t->idx[i];
		}
		free(t->hash);
		free(t->idx);
		t->hash = nh;
		t->idx = ni;
		t->cap = cap;
	}
	size_t j = h & (t->cap - 1);
	while (t->idx[j]) {
		if (t->hash[j] == h && !strcmp(t->s[t->idx[j] - 1], s))
			return (long)t->idx[j] - 1;
		j = (j + 1) & (t->cap - 1);
	}
	char *c = strdup(s);
	if (!c)
		return -1;
	t->s[t->n] = c;
	t->hash[j] = h;
	t->idx[j] = (uint32_t)++t->n;
	return (long)t->n - 1;
}

/* A growing byte buffer. */
struct buf { uint8_t *p; size_t len, cap; };

static int buf_put(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (!q)
			return -ENOMEM;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* ---- the segment as read --------------------------------------------------------------------- */
struct mod {
	uint64_t path_id, start, end, offset;
	const char *path; /* resolved after reading; NULL: unknown */
	uint8_t build_id[64];
	size_t build_id_len;
	Dwfl_Module *dm; /* NULL: not usable (file missing, other build, misplaced) */
};

struct seg {
	const char *path;
	struct d9__file f; /* the sealed segment, read with pread only */
	uint64_t file_size;
	uint64_t insert_at; /* offset of the first chunk after HEADER and SCHEMA */
	uint64_t trailer_at; /* offset of the TRAILER chunk, the last one */
	uint8_t *trailer; /* its payload (copy) */
	uint32_t trailer_len;
	uint64_t max_string; /* highest String id of the segment */
	int has_symbols, damaged, after_trailer;
	struct set addrs; /* looked-up addresses: return addresses - 1, function addresses */
	uint64_t skipped; /* distinct addresses over MAX_ADDRS (an upper bound) */
	struct pathstr *paths;
	size_t npaths, path_bytes;
	struct mod *mods;
	size_t nmods;
	const char *why; /* why it was left alone */
};

static void on_problem(void *ctx, int kind, uint64_t offset, const char *msg)
{
	struct seg *s = ctx;

	(void)offset;
	(void)msg;
	if (kind == D9_PROB_TRUNCATED || kind == D9_PROB_CORRUPT || kind == D9_PROB_BAD_EVENT)
		s->damaged = 1;
}

static void add_addr(struct seg *s, uint64_t a)
{
	if (!a)
		return;
	if (s->addrs.n >= MAX_ADDRS) {
		s->skipped++;
		return;
	}
	if (set_add(&s->addrs, a) < 0)
		s->skipped++;
}

static void read_def(struct seg *s, const struct d9_def *d)
{
	switch (d->kind) {
	case D9_DEF_STRING:
		if (d->id > s->max_string)
			s->max_string = d->id;
		if (d->u.string.len && d->u.string.s[0] == '/' && d->u.string.len < 4096 &&
			s->path_bytes + d->u.string.len < MAX_PATH_BYTES) {
			struct pathstr *p = realloc(s->paths, (s->npaths + 1) * sizeof(*p));
			char *c = malloc(d->u.string.len + 1);
			if (p)
				s->paths = p;
			if (!p || !c) {
				free(c);
				break;
			}
			memcpy(c, d->u.string.s, d->u.string.len);
			c[d->u.string.len] = 0;
			p[s->npaths++] = (struct pathstr){ d->id, c };
			s->path_bytes += d->u.string.len;
		}
		break;
	case D9_DEF_LOCATION:
		add_addr(s, d->u.location.function_addr); /* looked up as it is */
		if (d->u.location.callsite_addr)
			add_addr(s, d->u.location.callsite_addr - 1); /* a return address */
		break;
	case D9_DEF_STACK:
		/* every frame is a return address: the call before it is named (as d9-analyze does);
		 * but frame 0 of a CPU sample's stack is the sampled instruction, looked up as it is
		 * (one at a function's first byte is not in the function before it): named both ways */
		for (uint32_t i = 0; i < d->u.stack.nframes; i++)
			if (d->u.stack.frames[i] > 1)
				add_addr(s, d->u.stack.frames[i] - 1);
		if (d->u.stack.nframes && d->u.stack.frames[0])
			add_addr(s, d->u.stack.frames[0]);
		break;
	case D9_DEF_MODULE: {
		if (s->nmods >= MAX_MODULES)
			break;
		struct mod *m = realloc(s->mods, (s->nmods + 1) * sizeof(*m));
		if (!m)
			break;
		s->mods = m;
		m = &m[s->nmods++];
		memset(m, 0, sizeof(*m));
		m->path_id = d->u.module.path;
		m->start = d->u.module.start;
		m->end = d->u.module.end;
		m->offset = d->u.module.offset;
		m->build_id_len = d->u.module.build_id_len < sizeof(m->build_id) ?
			d->u.module.build_id_len : sizeof(m->build_id);
		memcpy(m->build_id, d->u.module.build_id, m->build_id_len);
		break;
	}
	case D9_DEF_SYMBOL:
		s->has_symbols = 1;
		break;
	default:
		break;
	}
}

/* Reads the whole segment through /proc/self/fd (the file we hold open, even if the budget
 * deletes it meanwhile). Returns 0, -ECANCELED, or another error (s->why says it). */
static int read_segment(struct seg *s)
{
	struct d9_reader *r;
	struct d9_chunk c;
	int err, seen_other = 0, n;
	int rfd = d9__file_dup(&s->f); /* the reader's own descriptor, at offset 0 (pread only) */

	if (rfd < 0) {
		s->why = "no descriptor";
		return -EMFILE;
	}
	if ((err = d9_reader_open_fd(&r, rfd)) != 0) {
		s->why = "not readable as a segment";
		return err < 0 ? err : -EINVAL;
	}
	d9_reader_on_problem(r, on_problem, s);
	s->insert_at = d9_reader_stats(r)->data_start;
	while ((n = d9_reader_next(r, &c)) == 1) {
		if (aborting()) {
			d9_reader_close(r);
			return -ECANCELED;
		}
		if (s->trailer)
			s->after_trailer = 1;
		if (c.type == D9_CHUNK_SCHEMA && !seen_other)
			s->insert_at = c.offset + D9_CHUNK_OVERHEAD + c.len;
		else
			seen_other = 1;
		if (c.type == D9_CHUNK_DEFS) {
			struct d9_defs_iter it;
			struct d9_def d;
			d9_defs_init(&it, r, &c);
			while (d9_defs_next(&it, &d) == 1)
				read_def(s, &d);
		} else if (c.type == D9_CHUNK_TRAILER && !s->trailer) {
			struct d9_trailer tr;
			if (c.len < 16 || d9_trailer_decode(&c, &tr) != 0 ||
				c.offset + D9_CHUNK_OVERHEAD + c.len != s->file_size) {
				s->damaged = 1;
				continue;
			}
			if (!(s->trailer = malloc(c.len)))
				break;
			memcpy(s->trailer, c.payload, c.len);
			s->trailer_len = c.len;
			s->trailer_at = c.offset;
		}
	}
	const struct d9_reader_stats *st = d9_reader_stats(r);
	if (n < 0 || st->truncated || st->corrupt_chunks || st->bad_defs)
		s->damaged = 1;
	d9_reader_close(r);
	if (n < 0) {
		s->why = "read error";
		return n;
	}
	if (s->damaged || s->after_trailer || !s->trailer) {
		s->why = !s->trailer ? "not sealed" : "damaged";
		return -EINVAL;
	}
	return 0;
}

/* ---- resolving ------------------------------------------------------------------------------- */

/* ---- one libdw session across segments ------------------------------------------------------
 * Reporting a module to libdw opens its file and reads its tables; with a new session per segment
 * that was done again at every seal: most of the compressor's CPU with a short D9_ROTATION_PERIOD
 * (nginx at 2 s: 170 ms of symbolizing in 6 s, 8 ms without). So the compressor thread keeps one
 * session and the modules reported to it, keyed by what makes a name right (path, place, build
 * id), and reports only modules it has not seen (dwfl_report_begin_add). A segment whose new
 * module cannot be reported (e.g. another library now mapped where an old one was) starts a
 * fresh session; so does every CACHE_SEGMENTS-th segment and a full table, which bounds memory. */
#define CACHE_MODS 512
#define CACHE_SEGMENTS 256

struct cached_mod {
	char *path;
	uint64_t start, offset;
	uint8_t build_id[64];
	size_t build_id_len;
	Dwfl_Module *dm; /* NULL: not usable (kept: not tried again for this session) */
};

static struct {
	Dwfl *dwfl;
	unsigned segments;
	size_t n;
	struct cached_mod m[CACHE_MODS];
} cache; /* the compressor thread's */

/* ---- names found, kept across the segments of one session ------------------------------------
 * The same code addresses come back in every segment of a server (its loop, its handlers, libc's
 * waits), and naming one costs libdw tens to hundreds of microseconds (a pass over the module's
 * symbol table, the DWARF scopes of its inline levels): with CPU profiling at 99 Hz that was
 * about 2% of redis-server's CPU at 1-second rotation. So each address's names are kept, keyed by
 * the address and its module in the session (a module at another place, or with another build
 * id, is another Dwfl_Module), and emptied with the session or when NAMES_MAX addresses or
 * NAMES_BYTES of strings are kept (memory stays bounded). */
#define NAMES_MAX 32768
#define NAMES_BYTES (8u << 20)

struct name { uint64_t a; Dwfl_Module *dm; uint32_t first; int n; };
struct name_frame { const char *fn, *file; int line; };

static struct {
	struct name *e; /* open addressing, 2 * NAMES_MAX slots; a == 0: free */
	struct name_frame *f;
	size_t n, nf, fcap, bytes;
	struct strtab st; /* the names' strings */
} names; /* the compressor thread's */

static void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->hash);
	free(t->idx);
}

static void names_reset(void)
{
	strtab_free(&names.st);
	free(names.e);
	free(names.f);
	memset(&names, 0, sizeof(names));
}

/* The kept copy of v (NULL stays NULL); *err = 1 when memory runs out. */
static const char *names_str(const char *v, int *err)
{
	if (!v)
		return NULL;
	size_t before = names.st.n;
	long i = str_index(&names.st, v);
	if (i < 0) {
		*err = 1;
		return NULL;
	}
	if ((size_t)i >= before)
		names.bytes += strlen(v) + 1;
	return names.st.s[i];
}

static struct name *names_slot(Dwfl_Module *dm, uint64_t a)
{
	size_t j = (size_t)mix(a ^ (uint64_t)(uintptr_t)dm) & (2 * NAMES_MAX - 1);

	while (names.e[j].a && (names.e[j].a != a || names.e[j].dm != dm))
		j = (j + 1) & (2 * NAMES_MAX - 1);
	return &names.e[j];
}

/* The kept names of a in module dm into f: how many (0: a has none), -1 when not kept. */
static int names_get(Dwfl_Module *dm, uint64_t a, struct d9__dwsym_frame *f)
{
	if (!names.e)
		return -1;
	struct name *e = names_slot(dm, a);
	if (!e->a)
		return -1;
	for (int i = 0; i < e->n; i++) {
		const struct name_frame *k = &names.f[e->first + (uint32_t)i];
		f[i].fn = k->fn;
		f[i].file = k->file;
		f[i].line = k->line;
	}
	return e->n;
}

/* Keeps the n names of a in module dm (best effort: a failure only costs a later lookup). */
static void names_put(Dwfl_Module *dm, uint64_t a, const struct d9__dwsym_frame *f, int n)
{
	int err = 0;

	if (names.n >= NAMES_MAX || names.bytes >= NAMES_BYTES)
		names_reset();
	if (!names.e && !(names.e = calloc(2 * NAMES_MAX, sizeof(*names.e))))
		return;
	if (names.nf + (size_t)n > names.fcap) {
		size_t cap = names.fcap ? names.fcap * 2 : 4096;
		struct name_frame *nf = realloc(names.f, cap * sizeof(*nf));
		if (!nf)
			return;
		names.f = nf;
		names.fcap = cap;
	}
	struct name *e = names_slot(dm, a);
	for (int i = 0; i < n; i++) {
		struct name_frame *k = &names.f[names.nf + (size_t)i];
		k->fn = names_str(f[i].fn, &err);
		k->file = names_str(f[i].file, &err);
		k->line = f[i].line;
	}
	if (err)
		return;
	e->a = a;
	e->dm = dm;
	e->first = (uint32_t)names.nf;
	e->n = n;
	names.nf += (size_t)n;
	names.n++;
}

static void cache_reset(void)
{
	names_reset(); /* its modules go with the session */
	if (cache.dwfl)
		d9__dw.end(cache.dwfl);
	for (size_t i = 0; i < cache.n; i++)
		free(cache.m[i].path);
	cache.dwfl = NULL;
	cache.n = 0;
	cache.segments = 0;
}

/* The compressor's end on a thread with a descriptor table of its own (fdown.c): the session's
 * module descriptors are numbers of that table, which ends with the thread; a compressor started
 * later has another and makes a new session. */
void d9__symbolize_thread_end(void)
{
	if (d9__self.fd_private)
		cache_reset();
}

void d9__symbolize_child(void)
{
	/* the parent's session, modules and names are not freed (the session is the parent's).
	 * Only the counts are reset: an entry past cache.n is written whole before it is read, and
	 * clearing all CACHE_MODS entries cost every forked child about 13 page faults */
	cache.dwfl = NULL;
	cache.n = 0;
	cache.segments = 0;
	memset(&names, 0, sizeof(names));
}

static struct cached_mod *cache_find(const struct mod *m)
{
	for (size_t i = 0; i < cache.n; i++) {
		struct cached_mod *c = &cache.m[i];
		if (c->start == m->start && c->offset == m->offset &&
			c->build_id_len == m->build_id_len && !strcmp(c->path, m->path) &&
			!memcmp(c->build_id, m->build_id, m->build_id_len))
			return c;
	}
	return NULL;
}

/* Hands the segment's modules to libdw (those the session does not know yet); a module is usable
 * (m->dm set) only when its file was found at its recorded path, its build id matches the
 * recorded one and it lands where it was mapped. Returns 0, or -EAGAIN when a new module could
 * not be reported while the session held others (the caller starts a fresh session). */
static int report_modules(Dwfl *dwfl, struct seg *s)
{
	int reported = 0, failed = 0;

	for (size_t i = 0; i < s->nmods; i++) {
		struct mod *m = &s->mods[i];
		m->dm = NULL;
		for (size_t j = 0; j < s->npaths && !m->path; j++)
			if (s->paths[j].id == m->path_id)
				m->path = s->paths[j].s;
		if (!m->path || m->start < m->offset || m->end <= m->start)
			continue;
		struct cached_mod *c = cache_find(m);
		if (c) {
			m->dm = c->dm;
			continue;
		}
		if (!reported++)
			d9__dw.report_begin_add(dwfl);
		/* the same file at the same place twice (two executable segments): reported once */
		int same = 0;
		for (size_t j = 0; j < i && !same; j++) {
			struct mod *o = &s->mods[j];
			if (o->dm && o->path && !strcmp(o->path, m->path) &&
				o->start - o->offset == m->start - m->offset) {
				same = 1;
				m->dm = d9__dwsym_placed_right(o->dm, m->start, m->offset) ? o->dm : NULL;
			}
		}
		if (!same) {
			m->dm = d9__dwsym_report(dwfl, m->path, m->start, m->offset, m->build_id,
				m->build_id_len);
			failed |= !m->dm;
		}
	}
	if (reported)
		d9__dw.report_end(dwfl, NULL, NULL);
	if (failed && cache.n)
		return -EAGAIN;
	/* a module libdw dropped in the meantime (two reports it took for one) is freed: forget it */
	for (size_t i = 0; i < s->nmods; i++) {
		struct mod *m = &s->mods[i];
		if (m->dm && d9__dw.addrmodule(dwfl, m->start) != m->dm)
			m->dm = NULL;
		if (!m->path || cache_find(m) || cache.n == CACHE_MODS)
			continue;
		struct cached_mod *c = &cache.m[cache.n];
		if (!(c->path = strdup(m->path)))
			continue;
		c->start = m->start;
		c->offset = m->offset;
		c->build_id_len = m->build_id_len;
		memcpy(c->build_id, m->build_id, m->build_id_len);
		c->dm = m->dm;
		cache.n++;
	}
	return 0;
}

/* The names of address a (innermost inlined function first, the real function last, each with
 * the file:line reached in it) into f. Returns how many, 0 when a has no trustworthy name. */
static int resolve(struct seg *s, uint64_t a, struct d9__dwsym_frame *f)
{
	struct mod *m = NULL;

	for (size_t i = 0; i < s->nmods && !m; i++)
		if (a >= s->mods[i].start && a < s->mods[i].end)
			m = &s->mods[i];
	if (!m || !m->dm)
		return 0;
	int n = names_get(m->dm, a, f);
	if (n < 0) {
		n = d9__dwsym_resolve(m->dm, a, f, MAX_INLINE, 0);
		names_put(m->dm, a, f, n);
	}
	return n;
}

/* Appends String records for new strings and the Symbol records of one address to str/sym.
 * Returns 0, -ENOSPC (the chunk is full: nothing appended) or -ENOMEM. */
static int emit(struct seg *s, struct strtab *st, struct buf *str, struct buf *sym, uint64_t a,
	const struct d9__dwsym_frame *f, int n)
{
	uint8_t rec[9000];
	struct d9_wbuf w;
	size_t str_len = str->len;
	uint64_t fid[MAX_INLINE], lid[MAX_INLINE];

	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 2; k++) {
			const char *v = k ? f[i].file : f[i].fn;
			uint64_t *out = k ? &lid[i] : &fid[i];
			if (!v || !*v) {
				*out = 0;
				continue;
			}
			size_t before = st->n;
			long idx = str_index(st, v);
			if (idx < 0)
				return -ENOMEM;
			*out = s->max_string + 1 + (uint64_t)idx;
			if ((size_t)idx < before)
				continue; /* written already (by an earlier address, or a level of this one) */
			size_t len = strlen(v);
			d9_wbuf_init(&w, rec, sizeof(rec));
			d9_def_string(&w, *out, v, len < 8192 ? len : 8192);
			if (w.err || buf_put(str, rec, (size_t)(w.p - rec)))
				return -ENOMEM;
		}
	}
	d9_wbuf_init(&w, rec, sizeof(rec));
	/* inline_depth 0 is the real function, the last of f; the innermost inlined one is n-1.
	 * start = the looked-up address, len 1 (FORMAT.md section 10, "Symbol records") */
	for (int i = 0; i < n; i++)
		d9_def_symbol(&w, a, 1, fid[i], lid[i], f[i].line > 0 ? (uint64_t)f[i].line : 0,
			(uint64_t)(n - 1 - i));
	if (w.err)
		return -ENOMEM;
	if (str->len + sym->len + (size_t)(w.p - rec) > MAX_CHUNK) {
		str->len = str_len; /* strings of this address only: they are not used */
		return -ENOSPC;
	}
	return buf_put(sym, rec, (size_t)(w.p - rec));
}

/* ---- writing ------------------------------------------------------------------------------------ */
/* Copies bytes [from, to) of the segment into out; both descriptors checked as ours. */
static int copy_range(struct d9__file *in, struct d9__file *out, uint64_t from, uint64_t to)
{
	uint8_t b[65536];

	while (from < to) {
		if (aborting())
			return -ECANCELED;
		size_t want = to - from < sizeof(b) ? (size_t)(to - from) : sizeof(b);
		ssize_t k = pread(in->fd, b, want, (off_t)from);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		int err = d9__file_check(in); /* the bytes came from the segment */
		if (!err)
			err = d9__file_write(out, b, (size_t)k);
		if (err)
			return err;
		from += (uint64_t)k;
	}
	return 0;
}

/* The new segment: [0, insert_at), the Symbol chunk, [insert_at, trailer_at), the trailer with
 * one more chunk counted. */
static int write_segment(struct seg *s, const char *tmp, const uint8_t *chunk, size_t chunk_len)
{
	uint8_t *tr = malloc(s->trailer_len + D9_CHUNK_OVERHEAD);
	struct d9_wbuf w;
	int err;

	if (!tr)
		return -ENOMEM;
	/* on-disk change: TRAILER field `chunks` (u64 at payload offset 8) counts the new chunk */
	uint64_t chunks;
	memcpy(&chunks, s->trailer + 8, 8);
	d9_store_le64(s->trailer + 8, chunks + 1);
	d9_wbuf_init(&w, tr, s->trailer_len + D9_CHUNK_OVERHEAD);
	uint8_t *start = d9_chunk_open(&w, D9_CHUNK_TRAILER);
	d9_wbuf_raw(&w, s->trailer, s->trailer_len);
	if (d9_chunk_close(&w, start)) {
		free(tr);
		return -ENOMEM;
	}
	struct d9__file out;
	if ((err = d9__tmp_create(&out, tmp)) != 0)
		goto err_tr;
	if ((err = copy_range(&s->f, &out, 0, s->insert_at)) ||
		(err = d9__file_write(&out, chunk, chunk_len)) ||
		(err = copy_range(&s->f, &out, s->insert_at, s->trailer_at)) ||
		(err = d9__file_write(&out, tr, (size_t)(w.p - tr))))
		goto err_out;
	/* the copy replaces a sealed segment by rename: it must be on disk first, or a power loss
	 * could leave an empty file under the segment's name (nice-19 thread: the cost is fine) */
	if ((err = d9__file_enter(&out)) != 0)
		goto err_out;
	if (fsync(out.fd) != 0)
		err = -errno;
	d9__file_leave(&out);
	if (err)
		goto err_out;
	if ((err = d9__file_close(&out)) != 0)
		goto err_tmp;
	free(tr);
	return 0;
err_out:
	d9__file_close(&out);
err_tmp:
	unlink(tmp);
err_tr:
	free(tr);
	return err;
}

static void seg_free(struct seg *s)
{
	free(s->addrs.k);
	for (size_t i = 0; i < s->npaths; i++)
		free(s->paths[i].s);
	free(s->paths);
	free(s->mods);
	free(s->trailer);
	d9__file_close(&s->f);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Records in the trace (a RecorderState: symbols limited) that modules are named without their
 * DWARF for D9_SYMBOLIZE_MEMORY, whenever more are, and says it once at info level: a limit
 * working as set, not a failure (with the default, libc6-dbg's libc is such a module). */
static void dwarf_report(void)
{
	static unsigned told;
	char path[256], text[400];
	unsigned n = d9__dwsym_dwarf_skipped(path, sizeof(path));

	if (n == told)
		return;
	told = n;
	d9__log_once(D9_LOG_INFO, "%s is named without its DWARF (no inline levels or source lines): "
		"its inflated debug sections would pass D9_SYMBOLIZE_MEMORY=%llu bytes", path,
		(unsigned long long)d9__g.cfg.symbolize_memory);
	snprintf(text, sizeof(text), "%u module(s) named without DWARF (D9_SYMBOLIZE_MEMORY), "
		"the last %s", n, path);
	d9__defs_recorder(D9_REC_SYMBOLS, D9_REC_LIMITED, 0, text);
}

int d9__symbolize_segment(const char *path, const char *tmp, uint64_t *size)
{
	int saved = errno, ret = 0, err;
	struct seg s;
	struct strtab st;
	struct buf str = { 0 }, sym = { 0 };
	Dwfl *dwfl = NULL;
	uint64_t *addrs = NULL;
	uint8_t *chunk = NULL;
	size_t resolved = 0, named = 0;

	memset(&s, 0, sizeof(s));
	memset(&st, 0, sizeof(st));
	s.path = path;
	s.f.fd = -1;
	const char *why;
	if (!d9__dwsym_load(&why)) {
		d9__log_once(D9_LOG_WARN, "libdw.so.1 is not usable (%s): segments are not symbolized; "
			"d9-analyze names addresses from the module map", why);
		d9__defs_recorder(D9_REC_SYMBOLS, D9_REC_OFF, 0, "libdw.so.1 not usable");
		goto out;
	}
	d9__dwsym_dwarf_limit(d9__g.cfg.symbolize_memory);
	if ((err = d9__file_open(&s.f, path, O_RDONLY)) == -ENOENT) {
		/* the directory budget (this process's or another's) deleted it: nothing to name */
		d9__log(D9_LOG_DEBUG, "%s is gone before its symbols (directory budget)", path);
		goto out;
	}
	if (err) {
		s.why = strerror(-err);
		goto fail;
	}
	struct stat sb;
	if (fstat(s.f.fd, &sb) != 0) {
		s.why = strerror(errno);
		goto fail;
	}
	s.file_size = (uint64_t)sb.st_size;
	if ((err = read_segment(&s)) != 0) {
		if (err == -ECANCELED) {
			ret = err;
			goto out;
		}
		goto fail;
	}
	if (s.has_symbols || !s.addrs.n || !s.nmods)
		goto out; /* symbolized already (a recovered copy), or nothing to name */
	if (cache.n == CACHE_MODS || ++cache.segments > CACHE_SEGMENTS)
		cache_reset();
	for (int fresh = 0;; fresh++) {
		if (!cache.dwfl && !(cache.dwfl = d9__dwsym_begin(D9__DWSYM_HOST))) {
			s.why = "libdw session failed";
			goto fail;
		}
		dwfl = cache.dwfl;
		if (report_modules(dwfl, &s) == 0 || fresh)
			break;
		cache_reset(); /* a module the old session could not take: once more, fresh */
		cache.segments = 1;
	}
	/* addresses in increasing order: neighbours share compile units and line tables */
	if (!(addrs = malloc(s.addrs.n * sizeof(*addrs)))) {
		s.why = strerror(ENOMEM);
		goto fail;
	}
	size_t na = 0;
	for (size_t i = 0; i < s.addrs.cap; i++)
		if (s.addrs.k[i])
			addrs[na++] = s.addrs.k[i];
	qsort(addrs, na, sizeof(*addrs), cmp_u64);
	uint64_t deadline = d9__mono_ns() + MAX_SECONDS * 1000000000ull;
	for (size_t i = 0; i < na; i++) {
		if (aborting()) {
			ret = -ECANCELED;
			goto out;
		}
		if ((i & 63) == 0 && d9__mono_ns() > deadline) {
			s.skipped += na - i;
			d9__log_once(D9_LOG_WARN, "symbolizing %s took over %d s: %zu addresses left unnamed",
				path, MAX_SECONDS, na - i);
			break;
		}
		struct d9__dwsym_frame f[MAX_INLINE];
		int n = resolve(&s, addrs[i], f);
		resolved++;
		if (!n)
			continue;
		err = emit(&s, &st, &str, &sym, addrs[i], f, n);
		if (err == -ENOSPC) {
			s.skipped += na - i;
			break;
		}
		if (err) {
			s.why = strerror(-err);
			goto fail;
		}
		named++;
	}
	dwarf_report();
	if (s.skipped)
		d9__log_once(D9_LOG_WARN, "%s: %llu code addresses not symbolized (limits: %d addresses, "
			"%u MiB of symbols per segment)", path, (unsigned long long)s.skipped, MAX_ADDRS,
			MAX_CHUNK >> 20);
	if (!named)
		goto out;
	/* on-disk change: one DEFS chunk, String records then Symbol records */
	size_t chunk_len = str.len + sym.len + D9_CHUNK_OVERHEAD;
	if (!(chunk = malloc(chunk_len))) {
		s.why = strerror(ENOMEM);
		goto fail;
	}
	struct d9_wbuf w;
	d9_wbuf_init(&w, chunk, chunk_len);
	uint8_t *start = d9_chunk_open(&w, D9_CHUNK_DEFS);
	d9_wbuf_raw(&w, str.p, str.len);
	d9_wbuf_raw(&w, sym.p, sym.len);
	if (d9_chunk_close(&w, start)) {
		s.why = "chunk too large";
		goto fail;
	}
	if ((err = write_segment(&s, tmp, chunk, chunk_len)) != 0) {
		if (err == -ECANCELED) {
			ret = err;
			goto out;
		}
		s.why = strerror(-err);
		goto fail;
	}
	*size = s.file_size + chunk_len;
	ret = 1;
	d9__log(D9_LOG_DEBUG, "%s: %zu of %zu code addresses named (%zu symbol bytes)", path, named,
		resolved, chunk_len);
	goto out;
fail:
	if (err == -EACCES || err == -EPERM || err == -ESTALE)
		/* another process's job: a segment it renamed under us (it symbolized it first), or
		 * one this process, having changed user since it adopted it, may no longer write
		 * (dovecot's imap processes adopt dead login processes' segments as root, then drop):
		 * no failure of the host's, and the next start or the analyzer names it */
		d9__log(D9_LOG_DEBUG, "not symbolized here: %s: %s", path, s.why ? s.why : "error");
	else
		d9__log_once(D9_LOG_WARN, "cannot symbolize %s: %s; it is left without symbols",
			path, s.why ? s.why : "error");
out:
	(void)dwfl; /* the session stays for the next segment (cache) */
	free(addrs);
	free(chunk);
	free(str.p);
	free(sym.p);
	strtab_free(&st);
	seg_free(&s);
	errno = saved;
	return ret;
}
