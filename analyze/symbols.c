/* symbols.c: names for code addresses. First from the Symbol records the segments carry (the
 * agent writes them into sealed segments, FORMAT.md section 10), so a trace read on another
 * machine still names its code; otherwise from the module map a trace records (Module
 * definitions): elfutils libdw reads each module's file on this machine, offline, at the
 * address it was mapped at. libdw is loaded at run time (dlopen), so d9-analyze runs without it
 * and then shows addresses. It must never give a wrong name: a module whose file is missing, or
 * whose build id differs from the recorded one, gives "module+0xoffset" instead. */
#include "symbols.h"
#include "trace.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The libdw entry points d9 uses, looked up once. */
static struct {
	int tried, ok;
	Dwfl *(*begin)(const Dwfl_Callbacks *);
	void (*end)(Dwfl *);
	void (*report_begin_add)(Dwfl *);
	Dwfl_Module *(*report_elf)(Dwfl *, const char *, const char *, int, GElf_Addr, bool);
	int (*report_end)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *),
		void *);
	Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
	const char *(*addrinfo)(Dwfl_Module *, GElf_Addr, GElf_Off *, GElf_Sym *, GElf_Word *,
		Elf **, Dwarf_Addr *);
	Dwfl_Line *(*getsrc)(Dwfl_Module *, Dwarf_Addr);
	const char *(*lineinfo)(Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *, Dwarf_Word *);
	int (*build_id)(Dwfl_Module *, const unsigned char **, GElf_Addr *);
	Dwarf_Die *(*addrdie)(Dwfl_Module *, Dwarf_Addr, Dwarf_Addr *);
	int (*getscopes)(Dwarf_Die *, Dwarf_Addr, Dwarf_Die **);
	int (*tag)(Dwarf_Die *);
	Dwarf_Attribute *(*attr_integrate)(Dwarf_Die *, unsigned int, Dwarf_Attribute *);
	const char *(*formstring)(Dwarf_Attribute *);
	int (*formudata)(Dwarf_Attribute *, Dwarf_Word *);
	int (*getsrcfiles)(Dwarf_Die *, Dwarf_Files **, size_t *);
	const char *(*filesrc)(Dwarf_Files *, size_t, Dwarf_Word *, Dwarf_Word *);
	Elf *(*getelf)(Dwfl_Module *, GElf_Addr *);
	int (*getphdrnum)(Elf *, size_t *);
	GElf_Phdr *(*getphdr)(Elf *, int, GElf_Phdr *);
	Dwfl_Callbacks cb;
} dw;

static char *debuginfo_path;

static int dw_load(void)
{
	if (dw.tried)
		return dw.ok;
	dw.tried = 1;
	void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 0;
#define SYM(field, name) if (!(*(void **)&dw.field = dlsym(h, name))) return 0
	SYM(begin, "dwfl_begin");
	SYM(end, "dwfl_end");
	SYM(report_begin_add, "dwfl_report_begin_add");
	SYM(report_elf, "dwfl_report_elf");
	SYM(report_end, "dwfl_report_end");
	SYM(addrmodule, "dwfl_addrmodule");
	SYM(addrinfo, "dwfl_module_addrinfo");
	SYM(getsrc, "dwfl_module_getsrc");
	SYM(lineinfo, "dwfl_lineinfo");
	SYM(build_id, "dwfl_module_build_id");
	SYM(addrdie, "dwfl_module_addrdie");
	SYM(getscopes, "dwarf_getscopes");
	SYM(tag, "dwarf_tag");
	SYM(attr_integrate, "dwarf_attr_integrate");
	SYM(formstring, "dwarf_formstring");
	SYM(formudata, "dwarf_formudata");
	SYM(getsrcfiles, "dwarf_getsrcfiles");
	SYM(filesrc, "dwarf_filesrc");
	SYM(getelf, "dwfl_module_getelf");
	SYM(getphdrnum, "elf_getphdrnum"); /* libelf, a dependency of libdw */
	SYM(getphdr, "gelf_getphdr");
	SYM(cb.find_elf, "dwfl_build_id_find_elf");
	SYM(cb.find_debuginfo, "dwfl_standard_find_debuginfo");
	SYM(cb.section_address, "dwfl_offline_section_address");
#undef SYM
	dw.cb.debuginfo_path = &debuginfo_path;
	dw.ok = 1;
	return 1;
}

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

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* 1 when libdw placed the module so that file offset m->offset is at address m->start, as in
 * the traced process (a segment whose address and file offset differ would shift every name). */
static int placed_right(Dwfl_Module *dm, const struct d9__module *m)
{
	GElf_Addr bias;
	Elf *elf = dw.getelf(dm, &bias);
	size_t n;

	if (!elf || dw.getphdrnum(elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!dw.getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (m->offset >= ph.p_offset && m->offset < ph.p_offset + ph.p_filesz)
			return ph.p_vaddr + (m->offset - ph.p_offset) + bias == m->start;
	}
	return 0;
}

/* Hands the process's new modules to libdw. A module is usable only when its file was found
 * and its build id (when both sides have one) matches the recorded one. */
static void report_new(struct d9__symtab *st, struct d9__proc *p)
{
	if (st->nreported == p->nmodules)
		return;
	int *u = realloc(st->usable, p->nmodules * sizeof(*u));
	if (!u)
		return;
	st->usable = u;
	dw.report_begin_add(st->dwfl);
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
		Dwfl_Module *dm = dw.report_elf(st->dwfl, base_name(m->path), m->path, -1,
			m->start - m->offset, false);
		if (!dm)
			continue;
		const unsigned char *bid;
		GElf_Addr vaddr;
		int n = dw.build_id(dm, &bid, &vaddr);
		if (m->build_id_len && n > 0 &&
		    ((size_t)n != m->build_id_len || memcmp(bid, m->build_id, (size_t)n)))
			continue; /* another build of that file: its names would be wrong */
		u[i] = placed_right(dm, m);
	}
	dw.report_end(st->dwfl, NULL, NULL);
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

static const char *fmt_name(struct d9__trace *t, const char *fn, const char *file, int line)
{
	char buf[1024];

	if (file && line > 0)
		snprintf(buf, sizeof(buf), "%s (%s:%d)", fn, base_name(file), line);
	else
		snprintf(buf, sizeof(buf), "%s", fn);
	return d9__trace_intern(t, buf, strlen(buf));
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute at;

	/* integrate: an inlined instance names its function through DW_AT_abstract_origin */
	return dw.attr_integrate(die, DW_AT_name, &at) ? dw.formstring(&at) : NULL;
}

/* The inline chain at a (module-relative lookups done by libdw): fills f with the inlined
 * functions, innermost first, each with the file:line reached in it, then the real function
 * (named sym, its ELF symbol). Returns 0 when DWARF scopes are not available. */
static int inline_chain(struct d9__trace *t, Dwfl_Module *dm, uint64_t a, const char *sym,
	const char *file, int line, struct frames *f)
{
	Dwarf_Addr bias;
	Dwarf_Die *cu = dw.addrdie(dm, a, &bias), *scopes = NULL;
	int ns = cu ? dw.getscopes(cu, a - bias, &scopes) : -1;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;

	if (ns <= 0)
		return 0;
	if (dw.getsrcfiles(cu, &files, &nfiles) != 0)
		files = NULL;
	f->n = 0;
	for (int i = 0; i < ns && f->n < D9__MAX_INLINE; i++) {
		int tag = dw.tag(&scopes[i]);
		if (tag == DW_TAG_subprogram)
			break;
		if (tag != DW_TAG_inlined_subroutine)
			continue; /* lexical blocks */
		const char *n = die_name(&scopes[i]);
		f->names[f->n++] = fmt_name(t, n ? n : "?", file, line);
		/* the caller's position: where this instance was inlined */
		Dwarf_Attribute at;
		Dwarf_Word v;
		line = dw.attr_integrate(&scopes[i], DW_AT_call_line, &at) && !dw.formudata(&at, &v) ?
			(int)v : 0;
		file = files && dw.attr_integrate(&scopes[i], DW_AT_call_file, &at) &&
			!dw.formudata(&at, &v) && v < nfiles ? dw.filesrc(files, v, NULL, NULL) : NULL;
	}
	free(scopes);
	/* last, the real function (its ELF symbol: the caller found it first) */
	if (f->n == D9__MAX_INLINE)
		f->n--;
	f->names[f->n++] = fmt_name(t, sym, file, line);
	return 1;
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
	const char *name = NULL, *file = NULL;
	int line = 0;
	Dwfl_Module *dm = NULL;
	uint64_t a = ret_addr && addr ? addr - 1 : addr; /* a return address follows its call */
	if (dw_load()) {
		if (!st->dwfl)
			st->dwfl = dw.begin(&dw.cb);
		if (st->dwfl)
			report_new(st, p);
		dm = st->dwfl && mi < st->nreported && st->usable[mi] ?
			dw.addrmodule(st->dwfl, addr) : NULL;
		if (dm) {
			GElf_Off symoff;
			GElf_Sym sym;
			name = dw.addrinfo(dm, a, &symoff, &sym, NULL, NULL, NULL);
			/* libdw falls back to the closest symbol before the address when none holds
			 * it (a static function of a stripped library): that name would be wrong */
			if (name && (sym.st_size == 0 || symoff >= sym.st_size))
				name = NULL;
			Dwfl_Line *l = dw.getsrc(dm, a);
			if (l)
				file = dw.lineinfo(l, NULL, &line, NULL, NULL, NULL);
		}
	}
	if (!name || !inline_chain(t, dm, a, name, file, line, f)) {
		char buf[1024];
		f->n = 1;
		if (name)
			f->names[0] = fmt_name(t, name, file, line);
		else {
			snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, *m->path ? base_name(m->path) : "?",
				addr - m->start + m->offset);
			f->names[0] = d9__trace_intern(t, buf, strlen(buf));
		}
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
		dw.end(st->dwfl);
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
