/* symbols.c: names for code addresses. First from the Symbol records the segments carry (the
 * agent writes them into sealed segments, FORMAT.md section 10), so a trace read on another
 * machine still names its code; otherwise from the module map a trace records (Module
 * definitions): elfutils libdw reads each module's file on this machine, offline, at the
 * address it was mapped at, through agent/dwsym.c (the naming the agent's symbolizer uses too).
 * libdw is loaded at run time (dlopen), so d9-analyze runs without it and then shows addresses.
 * It must never give a wrong name: a module whose file is missing, or whose build id differs
 * from the recorded one, gives "module+0xoffset" instead. */
#include "symbols.h"
#include "dwsym.h"
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Cached names of one address: the inline chain, innermost first. */
struct frames {
	uint32_t n;
	const char *names[D9__MAX_INLINE];
};

/* The Symbol records of one address range [start, start + len) of a process. */
struct symgroup {
	uint64_t start, len;
	const void *seg; /* the segment that described the range first: only its records count */
	struct symgroup *next; /* other ranges with the same start */
	const char *by_depth[D9__MAX_INLINE]; /* "function (file:line)" per inline level, or NULL */
	int dirty; /* f must be rebuilt from by_depth */
	struct frames f;
};

/* Per process: the embedded Symbol records, the libdw session and what each recorded module
 * became. */
struct d9__symtab {
	Dwfl *dwfl;
	size_t nreported; /* modules of the process handed to libdw so far */
	int *usable; /* per module: 1 reported with a matching build id, 0 not */
	struct d9__map cache; /* addr (return addresses: | 1 << 63) -> struct frames */
	struct d9__map groups; /* start -> struct symgroup chain (owns the groups) */
	struct symgroup **wide; /* groups with len > 1: [0, nsorted) sorted by start, then the
				  * newest (fewer than WIDE_TAIL), unsorted */
	size_t nwide, nsorted;
};

/* Ranges longer than 1 byte (d9's writer writes none): at most WIDE_MAX per process, merged into
 * the sorted part WIDE_TAIL at a time, so hostile input costs O(n * n / WIDE_TAIL) at worst. */
#define WIDE_MAX 16384
#define WIDE_TAIL 32

/* Hands the process's new modules to libdw. A module is usable only when its file was found,
 * its build id (when both sides have one) matches the recorded one and it lands where it was
 * mapped (d9__dwsym_report). */
static void report_new(struct d9__symtab *st, struct d9__proc *p)
{
	if (st->nreported == p->nmodules)
		return;
	int *u = realloc(st->usable, p->nmodules * sizeof(*u));
	if (!u)
		return;
	st->usable = u;
	d9__dw.report_begin_add(st->dwfl);
	for (size_t i = st->nreported; i < p->nmodules; i++) {
		const struct d9__module *m = &p->modules[i];
		u[i] = 0;
		if (!*m->path || m->path[0] != '/' || m->start < m->offset)
			continue;
		/* the same file mapped again at the same place (another segment): reported once */
		int dup = 0;
		for (size_t j = 0; j < i && !dup; j++) {
			const struct d9__module *o = &p->modules[j];
			if (o->path == m->path && u[j] && o->start - o->offset == m->start - m->offset &&
			    o->build_id_len == m->build_id_len &&
			    (!m->build_id_len || !memcmp(o->build_id, m->build_id, m->build_id_len)))
				dup = 1;
		}
		if (dup) {
			u[i] = 1;
			continue;
		}
		u[i] = d9__dwsym_report(st->dwfl, m->path, m->start, m->offset, m->build_id,
			m->build_id_len) != NULL;
	}
	d9__dw.report_end(st->dwfl, NULL, NULL);
	st->nreported = p->nmodules;
}

/* The recorded module holding addr, or NULL. */
static const struct d9__module *module_of(const struct d9__proc *p, uint64_t addr, size_t *idx)
{
	for (size_t i = 0; i < p->nmodules; i++)
		if (addr >= p->modules[i].start && addr < p->modules[i].end) {
			*idx = i;
			return &p->modules[i];
		}
	return NULL;
}

/* The name of one inline level, interned in t: "function (file:line)", or "function" without
 * line information. */
static const char *fmt_name(struct d9__trace *t, const char *fn, const char *file, int line)
{
	char buf[1024];

	if (file && line > 0)
		snprintf(buf, sizeof(buf), "%s (%s:%d)", fn, d9__dwsym_base_name(file), line);
	else
		snprintf(buf, sizeof(buf), "%s", fn);
	return d9__trace_intern(t, buf, strlen(buf));
}

/* ---- embedded Symbol records ------------------------------------------------------------- */
static struct d9__symtab *symtab_of(struct d9__proc *p)
{
	if (!p->symtab)
		p->symtab = calloc(1, sizeof(*p->symtab));
	return p->symtab;
}

static int cmp_group(const void *a, const void *b)
{
	const struct symgroup *x = *(struct symgroup *const *)a, *y = *(struct symgroup *const *)b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts the tail of st->wide and merges it into the sorted part. Returns 0 or -ENOMEM. */
static int wide_merge(struct d9__symtab *st)
{
	size_t a = st->nsorted, b = st->nwide - st->nsorted;
	struct symgroup *tail[WIDE_TAIL], **out = malloc(st->nwide * sizeof(*out));

	if (!out)
		return -ENOMEM;
	memcpy(tail, st->wide + a, b * sizeof(*tail));
	qsort(tail, b, sizeof(*tail), cmp_group);
	for (size_t k = st->nwide; k > 0; k--) /* merge from the back */
		out[k - 1] = b == 0 || (a > 0 && st->wide[a - 1]->start > tail[b - 1]->start) ?
			st->wide[--a] : tail[--b];
	memcpy(st->wide, out, st->nwide * sizeof(*out));
	free(out);
	st->nsorted = st->nwide;
	return 0;
}

int d9__symbols_add(struct d9__trace *t, struct d9__proc *p, const void *seg, uint64_t start,
	uint64_t len, const char *function, const char *file, uint64_t line, uint64_t inline_depth)
{
	if (!p || !function || !*function || !len || inline_depth >= D9__MAX_INLINE)
		return 0; /* nothing usable: the address stays with libdw or module+offset */
	struct d9__symtab *st = symtab_of(p);
	if (!st)
		return -ENOMEM;
	struct symgroup *head = d9__map_get(&st->groups, start), *g = head;
	while (g && g->len != len)
		g = g->next;
	if (!g) {
		if (len > 1 && st->nwide >= WIDE_MAX)
			return 0; /* beyond the cap: those addresses go to libdw */
		if (!(g = calloc(1, sizeof(*g))))
			return -ENOMEM;
		g->start = start;
		g->len = len;
		g->seg = seg;
		g->next = head;
		if (len > 1) {
			struct symgroup **w = realloc(st->wide, (st->nwide + 1) * sizeof(*w));
			if (!w) {
				free(g);
				return -ENOMEM;
			}
			st->wide = w;
		}
		if (d9__map_put(&st->groups, start, g)) {
			free(g);
			return -ENOMEM;
		}
		if (len > 1 && (st->wide[st->nwide++] = g, st->nwide - st->nsorted >= WIDE_TAIL) &&
			wide_merge(st))
			return -ENOMEM;
	}
	/* a range another segment described already: the first description stands (the same
	 * address in two segments of one process normally names the same code) */
	if (g->seg != seg || g->by_depth[inline_depth])
		return 0;
	g->by_depth[inline_depth] = fmt_name(t, function, file, line > INT32_MAX ? 0 : (int)line);
	g->dirty = 1;
	return 0;
}

/* The embedded chain of looked-up address a, or NULL. An exact range [a, a + 1) (what d9's
 * writer records) is found by hashing; wider ranges from other writers by binary search. */
static const struct frames *embedded(struct d9__symtab *st, uint64_t a)
{
	struct symgroup *g = d9__map_get(&st->groups, a), *best = NULL;

	for (; g; g = g->next)
		if (!best || g->len < best->len)
			best = g;
	if (!best && st->nwide) {
		size_t lo = 0, hi = st->nsorted; /* first index whose start > a */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (st->wide[mid]->start <= a)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* overlapping ranges: the nearest start that still covers a (a bounded look back),
		 * then the unsorted tail */
		for (size_t i = lo, k = 0; i > 0 && k < 64 && !best; i--, k++)
			if (a - st->wide[i - 1]->start < st->wide[i - 1]->len)
				best = st->wide[i - 1];
		for (size_t i = st->nsorted; i < st->nwide; i++) {
			struct symgroup *w = st->wide[i];
			if (a - w->start < w->len && (!best || w->start > best->start))
				best = w;
		}
	}
	if (!best)
		return NULL;
	if (best->dirty) {
		best->f.n = 0;
		for (int d = D9__MAX_INLINE - 1; d >= 0; d--)
			if (best->by_depth[d])
				best->f.names[best->f.n++] = best->by_depth[d];
		best->dirty = 0;
	}
	return best->f.n ? &best->f : NULL;
}

static const struct frames *lookup(struct d9__trace *t, struct d9__proc *p, uint64_t addr,
	int ret_addr)
{
	size_t mi;

	if (p && p->symtab) {
		const struct frames *e = embedded(p->symtab, ret_addr && addr ? addr - 1 : addr);
		if (e)
			return e;
	}
	if (!p || !p->nmodules)
		return NULL;
	const struct d9__module *m = module_of(p, addr, &mi);
	if (!m)
		return NULL;
	struct d9__symtab *st = symtab_of(p);
	if (!st)
		return NULL;
	uint64_t key = addr ^ (ret_addr ? 1ull << 63 : 0);
	const struct frames *hit = d9__map_get(&st->cache, key);
	if (hit)
		return hit;
	struct frames *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	struct d9__dwsym_frame fr[D9__MAX_INLINE];
	int n = 0;
	uint64_t a = ret_addr && addr ? addr - 1 : addr; /* a return address follows its call */
	if (d9__dwsym_load(NULL)) {
		if (!st->dwfl)
			st->dwfl = d9__dwsym_begin(D9__DWSYM_STANDARD);
		if (st->dwfl)
			report_new(st, p);
		Dwfl_Module *dm = st->dwfl && mi < st->nreported && st->usable[mi] ?
			d9__dw.addrmodule(st->dwfl, addr) : NULL;
		if (dm)
			n = d9__dwsym_resolve(dm, a, fr, D9__MAX_INLINE, 1);
	}
	for (int i = 0; i < n; i++)
		f->names[i] = fmt_name(t, fr[i].fn, fr[i].file, fr[i].line);
	f->n = (uint32_t)n;
	if (!n) {
		char buf[1024];
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64,
			*m->path ? d9__dwsym_base_name(m->path) : "?", addr - m->start + m->offset);
		f->names[0] = d9__trace_intern(t, buf, strlen(buf));
		f->n = 1;
	}
	if (d9__map_put(&st->cache, key, f)) {
		free(f);
		return NULL;
	}
	return f;
}

const char *d9__symbolize(struct d9__trace *t, struct d9__proc *p, uint64_t addr, int ret_addr)
{
	const struct frames *f = lookup(t, p, addr, ret_addr);

	return f ? f->names[f->n - 1] : NULL;
}

size_t d9__symbolize_inline(struct d9__trace *t, struct d9__proc *p, uint64_t addr, int ret_addr,
	const char **names, size_t max)
{
	const struct frames *f = lookup(t, p, addr, ret_addr);
	size_t n = 0;

	for (; f && n < f->n && n < max; n++)
		names[n] = f->names[n];
	return n;
}

void d9__symtab_free(struct d9__proc *p)
{
	struct d9__symtab *st = p->symtab;

	if (!st)
		return;
	if (st->dwfl)
		d9__dw.end(st->dwfl);
	free(st->usable);
	for (size_t i = 0; i < st->cache.cap; i++)
		free(st->cache.vals ? st->cache.vals[i] : NULL);
	d9__map_free(&st->cache);
	for (size_t i = 0; i < st->groups.cap; i++) {
		struct symgroup *g = st->groups.vals ? st->groups.vals[i] : NULL;
		while (g) {
			struct symgroup *n = g->next;
			free(g);
			g = n;
		}
	}
	d9__map_free(&st->groups);
	free(st->wide);
	free(st);
	p->symtab = NULL;
}
