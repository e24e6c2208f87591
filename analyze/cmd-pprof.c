/* cmd-pprof.c: `d9-analyze pprof`: the CPU samples of a trace as a gzip-compressed pprof profile
 * (analyze/proto/profile.proto, encoded by protobuf-c), the input of `go tool pprof`, Pyroscope,
 * Grafana and speedscope. Sample values are the time each CpuSample stands for (weight_ns):
 * cpu/nanoseconds for on-CPU samples, off_cpu/nanoseconds for off-CPU ones. Locations carry
 * their mapping (module path, build id, address range from the trace's Module definitions) and
 * the names the analyzer resolves (symbols.c), inlined functions as extra lines; labels name the
 * coroutine, the poll's spawn location, the worker (or thread) and the pid. Memory follows the
 * distinct (stack, coroutine, location, thread) tuples, never the samples (with --no-labels the
 * distinct (stack, process) pairs). README.md, "pprof". */
#include "analyze.h"
#include "d9-format.h"
#include "trace.h"

#include "profile.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { PP_ON = 1, PP_OFF = 2 }; /* bits of pprof.want */

/* One distinct (stack, coroutine, location, thread): its summed on- and off-CPU ns. */
struct pp_agg {
	const struct d9__stack *stack; /* NULL: no stack */
	uint64_t co;
	const struct d9__loc *loc;
	const struct d9__thread *th; /* NULL with --no-labels */
	struct d9__proc *proc;
	uint64_t ns[2]; /* [0] on-CPU, [1] off-CPU */
	struct pp_agg *next; /* hash chain */
};

/* Interned keys of the output tables: a string (an interned pointer), a function (name, file),
 * a location (process, address) or a mapping (process, module index); id is 1-based (string
 * indexes are 0-based: "" is 0). */
struct pp_key {
	const void *a;
	uint64_t b;
	uint64_t id;
	struct pp_key *next;
};

struct pp_table {
	struct d9__map m; /* hash -> chain of struct pp_key */
	uint64_t n;
	struct pp_key **byid; /* by id - 1 (strings: by index - 1) */
	size_t cap;
};

struct pprof {
	struct d9__trace *t;
	int want; /* PP_ON | PP_OFF */
	long pid; /* -1: any */
	int no_labels; /* --no-labels: samples keyed by stack and process only */
	const struct d9__loc **poll_loc; /* by thread idx: the location of its open poll, or NULL */
	size_t npoll_loc;
	struct d9__map aggs; /* hash -> chain of struct pp_agg */
	size_t naggs;
	uint64_t unknown[2]; /* samples of unknown time, left out */
	uint64_t samples[2];
	int64_t first_real, last_real; /* span of the samples, CLOCK_REALTIME ns */
	struct d9__map periods; /* on-CPU weight -> count (as a pointer): the most common is the period */
	int oom;
	/* output tables */
	struct pp_table strs, funcs, locs, maps;
	Perftools__Profiles__Function *fn;
	Perftools__Profiles__Location *loc;
	Perftools__Profiles__Line *lines; /* every location's lines, locs[i].line points in */
	Perftools__Profiles__Line **linep;
	size_t nlines, caplines;
	Perftools__Profiles__Mapping *map;
	size_t *line0; /* by location id - 1: the index of its first line in the pool */
	size_t capfn, caploc, capmap, capline0;
};

/* The slot of th's open poll location, or NULL when out of memory. */
static const struct d9__loc **poll_slot(struct pprof *pp, const struct d9__thread *th)
{
	if (d9__grow(&pp->poll_loc, &pp->npoll_loc, th->idx, sizeof(*pp->poll_loc))) {
		pp->oom = 1;
		return NULL;
	}
	return &pp->poll_loc[th->idx];
}

static void pprof_on_event(void *ctx, const struct d9__ev *ev)
{
	struct pprof *pp = ctx;
	const struct d9__loc **slot, *loc;

	if (!ev->th || pp->oom || (pp->pid >= 0 && ev->proc->pid != (uint32_t)pp->pid))
		return;
	if (ev->type == D9_EV_POLL_START || ev->type == D9_EV_POLL_END) {
		/* the poll label: the spawn location of the poll a sample falls in (a gap may
		 * hide a PollEnd: the next PollStart replaces it, as everywhere else) */
		if ((slot = poll_slot(pp, ev->th)))
			*slot = ev->type == D9_EV_POLL_START ? ev->loc : NULL;
		return;
	}
	if (ev->type != D9_EV_CPU_SAMPLE)
		return;
	slot = poll_slot(pp, ev->th);
	loc = ev->loc ? ev->loc : slot ? *slot : NULL;
	uint64_t co = ev->co;
	const struct d9__thread *th = ev->th;
	if (pp->no_labels) {
		/* one sample per stack and process: memory follows the stacks alone */
		co = 0;
		loc = NULL;
		th = NULL;
	}
	int src = ev->kind == D9_CPU_ON ? 0 : ev->kind == D9_CPU_OFF ? 1 : -1;
	if (src < 0 || !(pp->want & (src ? PP_OFF : PP_ON)))
		return;
	pp->samples[src]++;
	if (ev->weight_ns == D9_UNKNOWN) {
		pp->unknown[src]++;
		return;
	}
	if (!pp->first_real || ev->real_ns < pp->first_real)
		pp->first_real = ev->real_ns;
	if (ev->real_ns > pp->last_real)
		pp->last_real = ev->real_ns;
	if (!src) {
		uint64_t k = ev->weight_ns + 1; /* map keys are any u64; values are non-NULL counts */
		uintptr_t c = (uintptr_t)d9__map_get(&pp->periods, k);
		if (d9__map_put(&pp->periods, k, (void *)(c + 1)))
			pp->oom = 1;
	}
	uint64_t h = d9__hash64((uint64_t)(uintptr_t)ev->stack * 31 + co * 7 +
		d9__hash64((uint64_t)(uintptr_t)loc ^ ((uint64_t)(uintptr_t)th << 1) ^
		(uint64_t)(uintptr_t)ev->proc));
	struct pp_agg *head = d9__map_get(&pp->aggs, h), *a;
	for (a = head; a; a = a->next)
		if (a->stack == ev->stack && a->co == co && a->loc == loc && a->th == th &&
		    a->proc == ev->proc) {
			a->ns[src] += ev->weight_ns;
			return;
		}
	if (!(a = calloc(1, sizeof(*a)))) {
		pp->oom = 1;
		return;
	}
	*a = (struct pp_agg){ ev->stack, co, loc, th, ev->proc, { 0, 0 }, head };
	a->ns[src] = ev->weight_ns;
	if (d9__map_put(&pp->aggs, h, a)) {
		free(a);
		pp->oom = 1;
		return;
	}
	pp->naggs++;
}

/* The id of (a, b) in tb, added when new (*added set). Returns 0 when out of memory. */
static uint64_t table_id(struct pprof *pp, struct pp_table *tb, const void *a, uint64_t b,
	int *added)
{
	uint64_t h = d9__hash64((uint64_t)(uintptr_t)a * 0x9e3779b97f4a7c15ull + b);
	struct pp_key *head = d9__map_get(&tb->m, h), *k;

	*added = 0;
	for (k = head; k; k = k->next)
		if (k->a == a && k->b == b)
			return k->id;
	if (tb->n == tb->cap) {
		size_t cap = tb->cap ? tb->cap * 2 : 256;
		struct pp_key **q = realloc(tb->byid, cap * sizeof(*q));
		if (!q)
			goto oom;
		tb->byid = q;
		tb->cap = cap;
	}
	if (!(k = malloc(sizeof(*k))))
		goto oom;
	*k = (struct pp_key){ a, b, tb->n + 1, head };
	if (d9__map_put(&tb->m, h, k)) {
		free(k);
		goto oom;
	}
	tb->byid[tb->n++] = k;
	*added = 1;
	return k->id;
oom:
	pp->oom = 1;
	return 0;
}

static void table_free(struct pp_table *tb)
{
	for (uint64_t i = 0; i < tb->n; i++)
		free(tb->byid[i]);
	free(tb->byid);
	d9__map_free(&tb->m);
}

/* The string index of s (NULL or "" is 0). */
static int64_t str_idx(struct pprof *pp, const char *s)
{
	int added;

	if (!s || !*s)
		return 0;
	s = d9__trace_intern(pp->t, s, strlen(s)); /* equal strings, one pointer */
	return s ? (int64_t)table_id(pp, &pp->strs, s, 0, &added) : 0;
}

/* Splits a frame name of the symbolizer, "function (file:line)", into its parts (interned);
 * other names ("function", "module+0x10", "0x...") are the function alone. */
static void split_name(struct pprof *pp, const char *name, const char **fn, const char **file,
	int64_t *line)
{
	size_t n = strlen(name), i = n ? n - 1 : 0;

	*fn = name;
	*file = NULL;
	*line = 0;
	if (n < 6 || name[n - 1] != ')')
		return;
	while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
		i--;
	if (i == n - 1 || i < 2 || name[i - 1] != ':')
		return;
	size_t colon = i - 1, j = colon;
	while (j > 1 && !(name[j - 1] == '(' && name[j - 2] == ' '))
		j--;
	if (j <= 1 || j == colon)
		return;
	*fn = d9__trace_intern(pp->t, name, j - 2);
	*file = d9__trace_intern(pp->t, name + j, colon - j);
	*line = strtoll(name + colon + 1, NULL, 10);
	if (!*fn || !*file) {
		*fn = name;
		*file = NULL;
		*line = 0;
	}
}

/* The function id of (name, file). */
static uint64_t function_id(struct pprof *pp, const char *name, const char *file)
{
	int added;
	uint64_t fh = file ? d9__hash64((uint64_t)(uintptr_t)file) : 0;
	uint64_t id = table_id(pp, &pp->funcs, name, fh, &added);

	if (!id || !added)
		return id;
	if (id > pp->capfn) {
		size_t cap = pp->capfn ? pp->capfn * 2 : 256;
		Perftools__Profiles__Function *q = realloc(pp->fn, cap * sizeof(*q));
		if (!q) {
			pp->oom = 1;
			return 0;
		}
		pp->fn = q;
		pp->capfn = cap;
	}
	Perftools__Profiles__Function f = PERFTOOLS__PROFILES__FUNCTION__INIT;
	f.id = id;
	f.name = f.system_name = str_idx(pp, name);
	f.filename = str_idx(pp, file);
	pp->fn[id - 1] = f;
	return id;
}

/* The mapping id of the module of p holding addr, 0 for none. */
static uint64_t mapping_id(struct pprof *pp, struct d9__proc *p, uint64_t addr)
{
	size_t m = 0;
	int added;

	while (m < p->nmodules && !(addr >= p->modules[m].start && addr < p->modules[m].end))
		m++;
	if (m == p->nmodules)
		return 0;
	uint64_t id = table_id(pp, &pp->maps, p, m, &added);
	if (!id || !added)
		return id;
	if (id > pp->capmap) {
		size_t cap = pp->capmap ? pp->capmap * 2 : 32;
		Perftools__Profiles__Mapping *q = realloc(pp->map, cap * sizeof(*q));
		if (!q) {
			pp->oom = 1;
			return 0;
		}
		pp->map = q;
		pp->capmap = cap;
	}
	const struct d9__module *md = &p->modules[m];
	char hex[2 * 64 + 1] = "";
	for (size_t i = 0; i < md->build_id_len && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", md->build_id[i]);
	Perftools__Profiles__Mapping mp = PERFTOOLS__PROFILES__MAPPING__INIT;
	mp.id = id;
	mp.memory_start = md->start;
	mp.memory_limit = md->end;
	mp.file_offset = md->offset;
	mp.filename = str_idx(pp, md->path);
	mp.build_id = str_idx(pp, hex);
	/* the analyzer named what it could: readers must not symbolize again */
	mp.has_functions = mp.has_filenames = mp.has_line_numbers = mp.has_inline_frames = 1;
	pp->map[id - 1] = mp;
	return id;
}

/* Appends a line to the pool; returns its index or -1. */
static long add_line(struct pprof *pp, uint64_t function, int64_t line)
{
	if (pp->nlines == pp->caplines) {
		size_t cap = pp->caplines ? pp->caplines * 2 : 1024;
		Perftools__Profiles__Line *q = realloc(pp->lines, cap * sizeof(*q));
		if (!q) {
			pp->oom = 1;
			return -1;
		}
		pp->lines = q;
		pp->caplines = cap;
	}
	Perftools__Profiles__Line l = PERFTOOLS__PROFILES__LINE__INIT;
	l.function_id = function;
	l.line = line;
	pp->lines[pp->nlines] = l;
	return (long)pp->nlines++;
}

/* The location id of frame i of stack st (NULL: the "(no stack)" location). Its lines go to
 * the line pool, which may still move: line0 keeps where they start (n_line of them follow),
 * and write_profile points the location at them once the pool is complete. */
static uint64_t location_id(struct pprof *pp, const struct d9__stack *st, uint32_t i)
{
	static const char no_stack[] = "(no stack)";
	struct d9__proc *p = st ? st->proc : NULL;
	uint64_t addr = st ? st->frames[i] : 0;
	int added;
	uint64_t id = table_id(pp, &pp->locs, p, addr, &added);

	if (!id || !added)
		return id;
	if (id > pp->caploc) {
		size_t cap = pp->caploc ? pp->caploc * 2 : 1024;
		Perftools__Profiles__Location *q = realloc(pp->loc, cap * sizeof(*q));
		if (!q) {
			pp->oom = 1;
			return 0;
		}
		pp->loc = q;
		pp->caploc = cap;
	}
	Perftools__Profiles__Location l = PERFTOOLS__PROFILES__LOCATION__INIT;
	l.id = id;
	l.address = addr;
	l.mapping_id = p ? mapping_id(pp, p, addr) : 0;
	const char *names[D9__MAX_INLINE];
	char buf[64];
	size_t k = 1;
	if (st)
		k = d9__frame_names(pp->t, st, i, names, D9__MAX_INLINE, buf, sizeof(buf));
	else
		names[0] = no_stack;
	/* names: innermost inlined function first, the real function last: pprof's line order */
	long first = -1;
	for (size_t j = 0; j < k; j++) {
		const char *fn, *file;
		int64_t line;
		split_name(pp, names[j], &fn, &file, &line);
		if (fn == buf || fn == no_stack) /* not interned */
			fn = d9__trace_intern(pp->t, fn, strlen(fn));
		long li = add_line(pp, fn ? function_id(pp, fn, file) : 0, line);
		if (first < 0)
			first = li;
	}
	if (d9__grow(&pp->line0, &pp->capline0, id - 1, sizeof(*pp->line0))) {
		pp->oom = 1;
		return 0;
	}
	l.n_line = first < 0 ? 0 : k;
	pp->line0[id - 1] = first < 0 ? 0 : (size_t)first;
	pp->loc[id - 1] = l;
	return id;
}

static int cmp_weight(const void *x, const void *y)
{
	const struct pp_agg *a = *(struct pp_agg *const *)x, *b = *(struct pp_agg *const *)y;
	uint64_t wa = a->ns[0] + a->ns[1], wb = b->ns[0] + b->ns[1];

	return wa != wb ? (wa > wb ? -1 : 1) : 0;
}

/* Builds the Profile and writes it gzip-compressed to out ("-": stdout). Returns 0 or -errno
 * (said on stderr). */
static int write_profile(struct pprof *pp, const char *out)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt[2] = { PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
		PERFTOOLS__PROFILES__VALUE_TYPE__INIT };
	Perftools__Profiles__ValueType *vtp[2] = { &vt[0], &vt[1] };
	Perftools__Profiles__ValueType period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__Sample *smp = NULL, **smpp = NULL;
	Perftools__Profiles__Label *labels = NULL, **labelp = NULL;
	Perftools__Profiles__Function **fnp = NULL;
	Perftools__Profiles__Location **locp = NULL;
	Perftools__Profiles__Mapping **mapp = NULL;
	struct pp_agg **aggs = NULL;
	uint64_t *locids = NULL;
	int64_t *values = NULL;
	char **strs = NULL;
	uint8_t *buf = NULL;
	size_t nvals = pp->want == (PP_ON | PP_OFF) ? 2 : 1, nlocids = 0, nlabels = 0, n = 0;
	int src0 = pp->want & PP_ON ? 0 : 1, err = -ENOMEM;
	int64_t k_co, k_poll, k_worker, k_thread, k_pid;
	gzFile gz = NULL;

	/* the fixed strings first: index 0 is "" */
	vt[0].type = str_idx(pp, src0 ? "off_cpu" : "cpu");
	vt[0].unit = str_idx(pp, "nanoseconds");
	if (nvals == 2) {
		vt[1].type = str_idx(pp, "off_cpu");
		vt[1].unit = vt[0].unit;
	}
	period_type.type = str_idx(pp, "cpu");
	period_type.unit = vt[0].unit;
	k_co = str_idx(pp, "coroutine");
	k_poll = str_idx(pp, "poll");
	k_worker = str_idx(pp, "worker");
	k_thread = str_idx(pp, "thread");
	k_pid = str_idx(pp, "pid");
	int64_t no_poll = str_idx(pp, "(no poll)");

	if (!(aggs = malloc((pp->naggs ? pp->naggs : 1) * sizeof(*aggs))))
		goto out;
	for (size_t i = 0; i < pp->aggs.cap; i++)
		for (struct pp_agg *a = pp->aggs.vals ? pp->aggs.vals[i] : NULL; a && n < pp->naggs;
		     a = a->next)
			if (a->ns[0] || a->ns[1])
				aggs[n++] = a;
	qsort(aggs, n, sizeof(*aggs), cmp_weight); /* heaviest first, for people reading -raw */
	/* mapping[0] is the main binary (pprof's "File:"): the first module of each process (the
	 * executable: the agent records modules in dl_iterate_phdr order), heaviest process first */
	for (size_t i = 0; i < n; i++) {
		struct d9__proc *p = aggs[i]->proc;
		if (p->nmodules)
			mapping_id(pp, p, p->modules[0].start);
	}
	size_t nframes = 0;
	for (size_t i = 0; i < n; i++)
		nframes += aggs[i]->stack && aggs[i]->stack->n ? aggs[i]->stack->n : 1;
	smp = calloc(n ? n : 1, sizeof(*smp));
	smpp = calloc(n ? n : 1, sizeof(*smpp));
	labels = calloc(n ? 4 * n : 1, sizeof(*labels));
	labelp = calloc(n ? 4 * n : 1, sizeof(*labelp));
	locids = calloc(nframes ? nframes : 1, sizeof(*locids));
	values = calloc(n ? nvals * n : 1, sizeof(*values));
	if (!smp || !smpp || !labels || !labelp || !locids || !values)
		goto out;
	for (size_t i = 0; i < n && !pp->oom; i++) {
		const struct pp_agg *a = aggs[i];
		Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
		s.location_id = locids + nlocids;
		if (!a->stack || !a->stack->n)
			locids[nlocids++] = location_id(pp, NULL, 0);
		else
			for (uint32_t f = 0; f < a->stack->n; f++) /* innermost first, as pprof wants */
				locids[nlocids++] = location_id(pp, a->stack, f);
		s.n_location_id = (size_t)(locids + nlocids - s.location_id);
		s.value = values + nvals * i;
		s.n_value = nvals;
		if (nvals == 2) {
			s.value[0] = (int64_t)a->ns[0];
			s.value[1] = (int64_t)a->ns[1];
		} else {
			s.value[0] = (int64_t)a->ns[src0];
		}
		s.label = labelp + nlabels;
		Perftools__Profiles__Label l = PERFTOOLS__PROFILES__LABEL__INIT;
		if (a->co) {
			labels[nlabels] = l;
			labels[nlabels].key = k_co;
			labels[nlabels].num = (int64_t)a->co;
			labelp[nlabels] = &labels[nlabels];
			nlabels++;
		}
		if (a->th) {
			labels[nlabels] = l;
			labels[nlabels].key = k_poll;
			labels[nlabels].str = a->loc ? str_idx(pp, a->loc->name) : no_poll;
			labelp[nlabels] = &labels[nlabels];
			nlabels++;
			labels[nlabels] = l;
			labels[nlabels].key = a->th->worker ? k_worker : k_thread;
			labels[nlabels].num = a->th->worker ? a->th->worker : a->th->tid;
			labelp[nlabels] = &labels[nlabels];
			nlabels++;
		}
		labels[nlabels] = l;
		labels[nlabels].key = k_pid;
		labels[nlabels].num = a->proc->pid;
		labelp[nlabels] = &labels[nlabels];
		nlabels++;
		s.n_label = (size_t)(labelp + nlabels - s.label);
		smp[i] = s;
		smpp[i] = &smp[i];
	}
	if (pp->oom)
		goto out;
	/* every location's lines now sit in the final pool: point them there */
	if (!(pp->linep = malloc((pp->nlines ? pp->nlines : 1) * sizeof(*pp->linep))))
		goto out;
	for (size_t i = 0; i < pp->nlines; i++)
		pp->linep[i] = &pp->lines[i];
	for (uint64_t i = 0; i < pp->locs.n; i++)
		pp->loc[i].line = pp->loc[i].n_line ? pp->linep + pp->line0[i] : NULL;
	fnp = malloc((pp->funcs.n ? pp->funcs.n : 1) * sizeof(*fnp));
	locp = malloc((pp->locs.n ? pp->locs.n : 1) * sizeof(*locp));
	mapp = malloc((pp->maps.n ? pp->maps.n : 1) * sizeof(*mapp));
	strs = malloc((pp->strs.n + 1) * sizeof(*strs));
	if (!fnp || !locp || !mapp || !strs)
		goto out;
	for (uint64_t i = 0; i < pp->funcs.n; i++)
		fnp[i] = &pp->fn[i];
	for (uint64_t i = 0; i < pp->locs.n; i++)
		locp[i] = &pp->loc[i];
	for (uint64_t i = 0; i < pp->maps.n; i++)
		mapp[i] = &pp->map[i];
	strs[0] = "";
	for (uint64_t i = 0; i < pp->strs.n; i++)
		strs[i + 1] = (char *)pp->strs.byid[i]->a;

	prof.n_sample_type = nvals;
	prof.sample_type = vtp;
	prof.n_sample = n;
	prof.sample = smpp;
	prof.n_mapping = pp->maps.n;
	prof.mapping = mapp;
	prof.n_location = pp->locs.n;
	prof.location = locp;
	prof.n_function = pp->funcs.n;
	prof.function = fnp;
	prof.n_string_table = pp->strs.n + 1;
	prof.string_table = strs;
	prof.time_nanos = pp->first_real;
	prof.duration_nanos = pp->last_real - pp->first_real;
	prof.period_type = &period_type;
	uint64_t best = 0, period = 0;
	for (size_t i = 0; i < pp->periods.cap; i++)
		if (pp->periods.vals && pp->periods.vals[i] &&
		    (uintptr_t)pp->periods.vals[i] > best) {
			best = (uintptr_t)pp->periods.vals[i];
			period = pp->periods.keys[i] - 1;
		}
	prof.period = (int64_t)period;
	prof.default_sample_type = vt[0].type;

	size_t len = protobuf_c_message_get_packed_size(&prof.base);
	if (!(buf = malloc(len ? len : 1)))
		goto out;
	protobuf_c_message_pack(&prof.base, buf);
	gz = !strcmp(out, "-") ? gzdopen(dup(1), "wb") : gzopen(out, "wb");
	if (!gz) {
		err = -errno;
		fprintf(stderr, "d9-analyze: pprof: cannot open %s: %s\n", out, strerror(errno));
		goto out;
	}
	if ((len && gzwrite(gz, buf, (unsigned)len) != (int)len) | (gzclose(gz) != Z_OK)) {
		err = -EIO;
		fprintf(stderr, "d9-analyze: pprof: writing %s failed\n", out);
		goto out;
	}
	err = 0;
out:
	if (err == -ENOMEM || pp->oom) {
		fprintf(stderr, "d9-analyze: out of memory: no profile written\n");
		err = -ENOMEM;
	}
	free(buf);
	free(strs);
	free(mapp);
	free(locp);
	free(fnp);
	free(values);
	free(locids);
	free(labelp);
	free(labels);
	free(smpp);
	free(smp);
	free(aggs);
	return err;
}

static void pprof_free(struct pprof *pp)
{
	for (size_t i = 0; i < pp->aggs.cap; i++) {
		struct pp_agg *a = pp->aggs.vals ? pp->aggs.vals[i] : NULL;
		while (a) {
			struct pp_agg *next = a->next;
			free(a);
			a = next;
		}
	}
	d9__map_free(&pp->aggs);
	d9__map_free(&pp->periods);
	free(pp->poll_loc);
	table_free(&pp->strs);
	table_free(&pp->funcs);
	table_free(&pp->locs);
	table_free(&pp->maps);
	free(pp->fn);
	free(pp->loc);
	free(pp->lines);
	free(pp->linep);
	free(pp->line0);
	free(pp->map);
}

static void pprof_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze pprof [--cpu|--off|--both] [-o FILE] TRACE...\n\n"
		"Writes the CPU samples as a gzip-compressed pprof profile (profile.proto), for\n"
		"'go tool pprof', Pyroscope, Grafana or speedscope. Each sample weighs the time it\n"
		"stands for: the sampling period on-CPU (sample type cpu/nanoseconds), the time until\n"
		"the thread ran again off-CPU (off_cpu/nanoseconds). Labels: coroutine, poll (its\n"
		"spawn location, or '(no poll)'), worker (or thread: the tid of a thread that is no\n"
		"worker) and pid. Functions carry the names d9-analyze resolves, with file and line.\n\n"
		"options:\n"
		"  --cpu         on-CPU samples (default)\n"
		"  --off         off-CPU samples\n"
		"  --both        both, as two sample types (cpu first, the default type)\n"
		"  -o FILE       write to FILE (default: stdout, unless stdout is a terminal)\n"
		"  --no-labels   only the pid label: one sample per stack and process, so memory\n"
		"                follows the stacks (not the coroutines) on huge traces\n"
		"  --pid N       only samples of process N\n"
		"  --from WHEN   ignore events before WHEN\n"
		"  --to WHEN     ignore events from WHEN on\n"
		"  -h, --help    this text\n\n"
		"Samples that do not carry their time (written by an older d9) are left out and\n"
		"counted on stderr.\n"
		"exit status: 0 ok, 2 usage, 3 no readable trace, 4 output written but input damaged\n");
}

int d9__cmd_pprof(int argc, char **argv)
{
	struct pprof pp;
	struct d9__trace t;
	int nargs = 0, rc;
	long pid = -1;
	const char *v, *out = NULL;
	char **args = calloc((size_t)argc + 1, sizeof(*args));

	if (!args)
		return D9_EXIT_USAGE;
	memset(&pp, 0, sizeof(pp));
	memset(&t, 0, sizeof(t));
	pp.t = &t;
	pp.want = PP_ON;
	for (int i = 1; i < argc; i++) {
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			pprof_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if (!strcmp(argv[i], "--cpu")) {
			pp.want = PP_ON;
		} else if (!strcmp(argv[i], "--off")) {
			pp.want = PP_OFF;
		} else if (!strcmp(argv[i], "--both")) {
			pp.want = PP_ON | PP_OFF;
		} else if (!strcmp(argv[i], "--no-labels")) {
			pp.no_labels = 1;
		} else if ((r = d9__opt(argc, argv, &i, "-o", &v)) == 1) {
			out = v;
		} else if (r == 0 && (r = d9__opt_window(argc, argv, &i, &t, &pid)) == 1) {
			/* --pid, --from, --to */
		} else if (r == 0 && d9__opt_arg("pprof", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (d9__opt_traces("pprof", nargs))
		goto usage;
	if (!out && isatty(1)) {
		fprintf(stderr, "d9-analyze: pprof: the profile is binary: give -o FILE or redirect "
			"stdout\n");
		goto usage;
	}
	if ((rc = d9__trace_start(&t, args, nargs)) != 0)
		return rc;
	pp.pid = pid;
	if (d9__trace_run(&t, pprof_on_event, &pp) || pp.oom) {
		fprintf(stderr, "d9-analyze: out of memory: no profile written\n");
		rc = D9_EXIT_NO_TRACE;
	} else {
		for (int s = 0; s < 2; s++)
			if (pp.unknown[s])
				fprintf(stderr, "d9-analyze: pprof: %" PRIu64 " %s-CPU sample(s) of "
					"unknown duration left out\n", pp.unknown[s], s ? "off" : "on");
		if (!pp.naggs)
			fprintf(stderr, "d9-analyze: pprof: no %s sample with its time: the "
				"profile is empty\n", pp.want == PP_ON ? "on-CPU" :
				pp.want == PP_OFF ? "off-CPU" : "CPU");
		rc = write_profile(&pp, out ? out : "-") ? D9_EXIT_NO_TRACE : d9__trace_exit_code(&t);
	}
	pprof_free(&pp);
	d9__trace_close(&t);
	return rc;
usage:
	free(args);
	pprof_help(stderr);
	return D9_EXIT_USAGE;
}
