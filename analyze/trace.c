/* trace.c: reads segments into resolved events for the subcommands (trace.h). Per segment it
 * keeps the id tables (strings, locations, stacks, coroutine locations) and drops them at the
 * segment's end; what survives is interned once per distinct value, so memory follows the number
 * of distinct locations, stacks, threads and processes, not the number of events. It never
 * trusts the input: every id may be undefined and every string may hold any bytes. */
#include "trace.h"
#include "merge.h"
#include "json.h"
#include "analyze.h"
#include "d9-format.h"
#include "dumps.h"
#include "inputs.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Input from this size on gets a progress line when stderr is a terminal. */
#define PROGRESS_MIN_BYTES (64ull << 20)
#define PROGRESS_EVERY_NS 100000000 /* at most 10 updates a second */

struct d9__seg {
	char *path;
	uint64_t size; /* file size (compressed for .gz) */
	uint32_t pid, ppid, seq;
	int64_t start_real;
	const char *process, *cmdline, *hostname, *boot_id;
	struct d9__proc *proc;
	int live; /* an .active file its process, alive on this host, is still writing */
};

struct d9__istr {
	struct d9__istr *next;
	uint64_t hash;
	size_t len;
	char s[]; /* NUL-terminated */
};

/* Id tables of the segment being read; ids are per segment (FORMAT.md, "Ids"). */
struct segstate {
	struct d9__trace *t;
	struct d9__seg *seg;
	struct d9__map strings; /* id -> interned string */
	struct d9__map locs; /* id -> struct d9__loc */
	struct d9__map stacks; /* id -> struct d9__stack */
	struct d9__map co_locs; /* coroutine id -> struct d9__loc */
	struct d9__map cschemas; /* CustomSchema id -> struct d9__cschema */
	struct d9_custom_value cvals[D9_CUSTOM_MAX_FIELDS]; /* the CustomEvent being delivered */
	/* problems of this file */
	uint64_t problems, damage;
	uint64_t first_off;
	char first_msg[160];
	int oom;
};

static void progress_clear(struct d9__trace *t)
{
	if (t->progress_shown) {
		fputs("\r\033[K", stderr);
		t->progress_shown = 0;
	}
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Redraws the progress line when 100 ms have passed; pos is the position in the current
 * segment (uncompressed, so it is capped at the file's size for .gz files). */
static void progress_tick(struct d9__trace *t, const struct d9__seg *seg, uint64_t pos)
{
	int64_t now = now_ns();

	if (now - t->progress_last < PROGRESS_EVERY_NS)
		return;
	t->progress_last = now;
	uint64_t done = t->progress_done + (pos < seg->size ? pos : seg->size);
	double secs = (double)(now - t->progress_start) / 1e9;
	fprintf(stderr, "\rd9-analyze: reading %zu/%zu segments, %.0f of %.0f MiB (%.0f%%), "
		"%.1fM events/s\033[K", (size_t)(seg - t->segs) + 1, t->nsegs,
		(double)done / 1048576.0, (double)t->bytes / 1048576.0,
		t->bytes ? 100.0 * (double)done / (double)t->bytes : 100.0,
		secs > 0 ? (double)t->events / secs / 1e6 : 0.0);
	fflush(stderr);
	t->progress_shown = 1;
}

static void warn(struct d9__trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct d9__trace *t, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	progress_clear(t);
	if (!t->quiet)
		fprintf(stderr, "d9-analyze: %s\n", buf);
	char **w = realloc(t->warnings, (t->nwarnings + 1) * sizeof(*w));
	if (!w)
		return;
	t->warnings = w;
	if ((w[t->nwarnings] = strdup(buf)))
		t->nwarnings++;
}

const char *d9__trace_intern(struct d9__trace *t, const char *s, size_t n)
{
	if (!s)
		s = "", n = 0;
	const char *nul = memchr(s, 0, n);
	if (nul)
		n = (size_t)(nul - s);
	uint64_t h = d9__hash_bytes(s, n, 1);
	struct d9__istr *head = d9__map_get(&t->istr, h);
	for (struct d9__istr *e = head; e; e = e->next)
		if (e->len == n && !memcmp(e->s, s, n))
			return e->s;
	struct d9__istr *e = malloc(sizeof(*e) + n + 1);
	if (!e)
		return "";
	memcpy(e->s, s, n);
	e->s[n] = 0;
	e->len = n;
	e->hash = h;
	e->next = head;
	if (d9__map_put(&t->istr, h, e)) {
		free(e);
		return "";
	}
	return e->s;
}

static int push(void *arrp, size_t *n, void *item)
{
	void ***arr = arrp;
	void **a = realloc(*arr, (*n + 1) * sizeof(void *));

	if (!a)
		return -ENOMEM;
	a[(*n)++] = item;
	*arr = a;
	return 0;
}

const char *d9__frame_name(struct d9__trace *t, const struct d9__stack *s, uint32_t i, char *buf,
	size_t n)
{
	/* a return address names the call before it; a sample's frame 0 is an instruction of its
	 * own (at a function's first byte, the call before it would be the function before) */
	const char *name = i < s->n ? d9__symbolize(t, s->proc, s->frames[i], !(i == 0 && s->pc0)) :
		NULL;

	if (name)
		return name;
	snprintf(buf, n, "0x%" PRIx64, i < s->n ? s->frames[i] : 0);
	return buf;
}

size_t d9__frame_names(struct d9__trace *t, const struct d9__stack *s, uint32_t i,
	const char **names, size_t max, char *buf, size_t n)
{
	size_t k = i < s->n && max ? d9__symbolize_inline(t, s->proc, s->frames[i],
		!(i == 0 && s->pc0), names, max) : 0;

	if (k || !max)
		return k;
	names[0] = d9__frame_name(t, s, i, buf, n);
	return 1;
}

static struct d9__loc *intern_loc(struct d9__trace *t, const char *name, uint64_t fn, uint64_t cs)
{
	uint64_t h = d9__hash_bytes(name, strlen(name), fn * 31 + cs);
	struct d9__loc *head = d9__map_get(&t->iloc, h);

	for (struct d9__loc *l = head; l; l = l->next)
		if (l->function_addr == fn && l->callsite_addr == cs && !strcmp(l->name, name))
			return l;
	struct d9__loc *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->name = name;
	l->function_addr = fn;
	l->callsite_addr = cs;
	l->hash = h;
	l->idx = (uint32_t)t->nlocs;
	l->next = head;
	if (push(&t->locs, &t->nlocs, l) || d9__map_put(&t->iloc, h, l)) {
		free(l);
		return NULL;
	}
	return l;
}

static struct d9__stack *intern_stack(struct d9__trace *t, struct d9__proc *p,
	const uint64_t *frames, uint32_t n)
{
	uint64_t h = d9__hash_bytes(frames, n * sizeof(*frames), n);
	struct d9__stack *head = d9__map_get(&t->istack, h);

	for (struct d9__stack *s = head; s; s = s->next)
		if (s->n == n && !memcmp(s->frames, frames, n * sizeof(*frames)))
			return s;
	struct d9__stack *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->frames = malloc((n ? n : 1) * sizeof(*frames));
	if (!s->frames) {
		free(s);
		return NULL;
	}
	memcpy(s->frames, frames, n * sizeof(*frames));
	s->n = n;
	s->proc = p;
	s->hash = h;
	s->idx = (uint32_t)t->nstacks;
	s->next = head;
	if (push(&t->stacks, &t->nstacks, s) || d9__map_put(&t->istack, h, s)) {
		free(s->frames);
		free(s);
		return NULL;
	}
	return s;
}

/* ---- opening: headers, grouping ------------------------------------------------------------- */
static struct d9__proc *find_proc(struct d9__trace *t, const struct d9__seg *s)
{
	for (size_t i = 0; i < t->nprocs; i++) {
		struct d9__proc *p = t->procs[i];
		/* one process: same pid on the same boot of the same host */
		if (p->pid == s->pid && p->boot_id == s->boot_id && p->hostname == s->hostname)
			return p;
	}
	struct d9__proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = s->pid;
	p->ppid = s->ppid;
	p->process = s->process;
	p->cmdline = s->cmdline;
	p->hostname = s->hostname;
	p->boot_id = s->boot_id;
	p->idx = (uint32_t)t->nprocs;
	p->gap_ns = p->last_ns = INT64_MIN;
	if (push(&t->procs, &t->nprocs, p)) {
		free(p);
		return NULL;
	}
	return p;
}

/* Decides what trace.h says of d9__segment_live. A reused pid can make a dead process's file
 * look live; crash recovery seals such files when the agent next starts. */
int d9__segment_live(const char *path, const struct d9_header *h)
{
	size_t n = strlen(path);
	char host[256], boot[64] = "";

	if (n < 7 || strcmp(path + n - 7, ".active") || !h->pid || h->pid > INT32_MAX)
		return 0;
	if (gethostname(host, sizeof(host)) != 0)
		return 0;
	host[sizeof(host) - 1] = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = 0;
		fclose(f);
	}
	boot[strcspn(boot, "\n")] = 0;
	if (strcmp(host, h->hostname) || !boot[0] || strcmp(boot, h->boot_id))
		return 0;
	return kill((pid_t)h->pid, 0) == 0 || errno == EPERM;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct d9__seg *x = a, *y = b;

	if (x->proc->idx != y->proc->idx)
		return x->proc->idx < y->proc->idx ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return strcmp(x->path, y->path);
}

int d9__trace_open(struct d9__trace *t, char **args, int nargs)
{
	struct d9__inputs in = { 0 };
	int bad = 0;

	if (d9__inputs_expand(&in, args, nargs, &bad))
		return -ENOMEM;
	t->bad_args = (uint64_t)bad;
	if (bad) {
		int quiet = t->quiet;
		t->quiet = 1; /* inputs.c named each one on stderr already */
		warn(t, "%d input argument(s) could not be read", bad);
		t->quiet = quiet;
	}
	t->segs = calloc(in.n ? in.n : 1, sizeof(*t->segs));
	if (!t->segs) {
		d9__inputs_free(&in);
		return -ENOMEM;
	}
	int64_t start = INT64_MAX;
	for (size_t i = 0; i < in.n; i++) {
		struct d9_reader *r;
		t->files++;
		int err = d9_reader_open_file(&r, in.paths[i]);
		if (err) {
			t->unreadable++;
			warn(t, "%s: %s", in.paths[i], err < 0 && err > -4096 ? strerror(-err) :
				d9_strerror(err));
			continue;
		}
		const struct d9_header *h = d9_reader_header(r);
		struct d9__seg *s = &t->segs[t->nsegs];
		s->path = in.paths[i];
		in.paths[i] = NULL;
		struct stat sb;
		s->size = stat(s->path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
		t->bytes += s->size;
		s->pid = h->pid;
		s->ppid = h->ppid;
		s->seq = h->segment_seq;
		s->start_real = h->start_realtime_ns > INT64_MAX ? INT64_MAX :
			(int64_t)h->start_realtime_ns;
		s->process = d9__trace_intern(t, h->process, strlen(h->process));
		s->cmdline = d9__trace_intern(t, h->cmdline, h->cmdline_len);
		s->hostname = d9__trace_intern(t, h->hostname, strlen(h->hostname));
		s->boot_id = d9__trace_intern(t, h->boot_id, strlen(h->boot_id));
		s->live = d9__segment_live(s->path, h);
		/* the first events can predate the segment's start (they wait in buffers while the
		 * writer creates the file): the first event of each of the file's first 32 chunks
		 * (each thread's buffer is a chunk of its own, flushed in any order) moves the start
		 * back; an earlier event in a later chunk still shows before time 0, with a minus */
		struct d9_chunk c;
		for (int k = 0; k < 32 && d9_reader_next(r, &c) == 1; k++) {
			if (c.type != D9_CHUNK_EVENTS)
				continue;
			struct d9_events_iter it;
			struct d9_event e;
			d9_events_init(&it, r, &c);
			if (d9_events_next(&it, &e) == 1) {
				int64_t first = d9_time_to_realtime_ns(h, e.time);
				if (first < s->start_real)
					s->start_real = first;
			}
		}
		d9_reader_close(r);
		if (!(s->proc = find_proc(t, s))) {
			d9__inputs_free(&in);
			return -ENOMEM;
		}
		s->proc->nsegs++;
		if (s->start_real < start)
			start = s->start_real;
		t->nsegs++;
		t->readable++;
	}
	d9__inputs_free(&in);
	qsort(t->segs, t->nsegs, sizeof(*t->segs), cmp_seg);
	const char **paths = malloc((t->nsegs ? t->nsegs : 1) * sizeof(*paths));
	if (!paths)
		return -ENOMEM;
	for (size_t i = 0; i < t->nsegs; i++)
		paths[i] = t->segs[i].path;
	int derr = d9__dumps_load(t, paths, t->nsegs);
	free(paths);
	if (derr)
		return derr;
	t->start_real = t->nsegs ? start : 0;
	t->from_real = INT64_MIN;
	t->to_real = INT64_MAX;
	if (t->from.set)
		t->from_real = t->from.absolute ? t->from.ns : t->start_real + t->from.ns;
	if (t->to.set)
		t->to_real = t->to.absolute ? t->to.ns : t->start_real + t->to.ns;
	t->progress = !t->quiet && t->bytes >= PROGRESS_MIN_BYTES && d9__progress_wanted();
	return 0;
}

/* ---- gaps ------------------------------------------------------------------------------------ */
void d9__gap(struct d9__proc *p, struct d9__thread *th, int64_t ns)
{
	if (th)
		th->gaps++;
	else
		p->wide_gaps++;
	p->gaps++;
	if (ns > p->gap_ns)
		p->gap_ns = ns;
}

void d9__pair_open(struct d9__open *o, const struct d9__ev *ev)
{
	o->open = 1;
	o->mark = d9__gap_mark(ev->th);
	o->ns = ev->ns;
	o->real_ns = ev->real_ns;
}

int d9__pair_close(struct d9__open *o, const struct d9__ev *ev, uint64_t *dur)
{
	if (!o->open)
		return D9__PAIR_NONE;
	o->open = 0;
	if (o->mark != d9__gap_mark(ev->th))
		return D9__PAIR_UNKNOWN;
	*dur = ev->ns > o->ns ? (uint64_t)ev->ns - (uint64_t)o->ns : 0;
	return D9__PAIR_OK;
}

int d9__proc_gap_since(const struct d9__proc *p, uint64_t mark, int64_t since_ns)
{
	return p->gaps != mark || p->gap_ns >= since_ns;
}

/* ---- decoding -------------------------------------------------------------------------------- */
static void on_problem(void *ctx, int kind, uint64_t offset, const char *msg)
{
	struct segstate *ss = ctx;

	if (kind == D9_PROB_UNKNOWN_CHUNK || kind == D9_PROB_UNKNOWN_EVENT ||
	    kind == D9_PROB_UNKNOWN_DEF) {
		ss->t->unknown_records++;
		return;
	}
	/* whatever the damage held is lost, for any thread of the process */
	d9__gap(ss->seg->proc, NULL, ss->seg->proc->last_ns);
	if (!ss->damage++) {
		ss->first_off = offset;
		snprintf(ss->first_msg, sizeof(ss->first_msg), "%s", msg);
	}
}

static const char *seg_string(struct segstate *ss, uint64_t id)
{
	return id ? d9__map_get(&ss->strings, id) : NULL;
}

/* The schema of a CustomSchema definition, interned by name and field description. NULL when
 * out of memory. The definition was checked by the reader (d9_defs_next). */
static struct d9__cschema *intern_cschema(struct segstate *ss, const struct d9_def *d)
{
	struct d9__trace *t = ss->t;
	const char *name = seg_string(ss, d->u.custom_schema.name);
	const uint8_t *desc = d->u.custom_schema.fields;
	size_t n = d->u.custom_schema.fields_len;
	uint64_t h = 0xcbf29ce484222325ull ^ (uintptr_t)name;

	if (!name)
		name = "?";
	for (size_t i = 0; i < n; i++)
		h = (h ^ desc[i]) * 0x100000001b3ull;
	for (size_t i = 0; i < t->ncschemas; i++) {
		struct d9__cschema *c = t->cschemas[i];
		if (c->hash == h && c->name == name && c->desc_len == n && !memcmp(c->desc, desc, n))
			return c;
	}
	struct d9__cschema *c = calloc(1, sizeof(*c));
	if (!c || !(c->desc = malloc(n ? n : 1)))
		goto err_free;
	memcpy(c->desc, desc, n);
	c->desc_len = n;
	if (d9_custom_schema_parse(c->desc, n, &c->cs))
		goto err_free; /* cannot happen: checked by the reader */
	for (uint32_t i = 0; i < c->cs.nfields; i++)
		c->fields[i] = d9__trace_intern(t, c->cs.f[i].name, c->cs.f[i].name_len);
	c->name = name;
	c->hash = h;
	c->idx = (uint32_t)t->ncschemas;
	if (push(&t->cschemas, &t->ncschemas, c))
		goto err_free;
	return c;
err_free:
	if (c)
		free(c->desc);
	free(c);
	return NULL;
}

static void set_worker(struct d9__thread *th, uint32_t worker)
{
	if (!th->worker)
		th->proc->nworkers++;
	th->worker = worker;
}

static void do_def(struct segstate *ss, const struct d9_def *d)
{
	struct d9__trace *t = ss->t;
	struct d9__proc *p = ss->seg->proc;
	char buf[64];

	switch (d->kind) {
	case D9_DEF_STRING: {
		const char *s = d9__trace_intern(t, d->u.string.s, d->u.string.len);
		if (d9__map_put(&ss->strings, d->id, (void *)s))
			ss->oom = 1;
		break;
	}
	case D9_DEF_LOCATION: {
		const char *name = seg_string(ss, d->u.location.name);
		if (!name || !*name)
			name = d9__symbolize(t, p, d->u.location.function_addr, 0);
		if (!name) {
			snprintf(buf, sizeof(buf), "0x%" PRIx64, d->u.location.function_addr);
			name = d9__trace_intern(t, buf, strlen(buf));
		}
		struct d9__loc *l = intern_loc(t, name, d->u.location.function_addr,
			d->u.location.callsite_addr);
		if (!l || d9__map_put(&ss->locs, d->id, l))
			ss->oom = 1;
		break;
	}
	case D9_DEF_STACK: {
		struct d9__stack *s = intern_stack(t, p, d->u.stack.frames, d->u.stack.nframes);
		if (!s || d9__map_put(&ss->stacks, d->id, s))
			ss->oom = 1;
		break;
	}
	case D9_DEF_MODULE: {
		const char *path = seg_string(ss, d->u.module.path);
		for (size_t i = 0; i < p->nmodules; i++)
			if (p->modules[i].start == d->u.module.start && p->modules[i].path == path)
				return;
		struct d9__module *m = realloc(p->modules, (p->nmodules + 1) * sizeof(*m));
		if (!m) {
			ss->oom = 1;
			break;
		}
		p->modules = m;
		uint8_t *bid = d->u.module.build_id_len ? malloc(d->u.module.build_id_len) : NULL;
		if (bid)
			memcpy(bid, d->u.module.build_id, d->u.module.build_id_len);
		m[p->nmodules++] = (struct d9__module){ path ? path : "", d->u.module.start,
			d->u.module.end, d->u.module.offset, bid, bid ? d->u.module.build_id_len : 0 };
		break;
	}
	case D9_DEF_THREAD: {
		if (d->id > UINT32_MAX)
			break;
		struct d9__thread *th = d9__map_get(&p->threads, d->id);
		const char *name = seg_string(ss, d->u.thread.name);
		if (!th) {
			/* owned by t->threads once pushed (freed at close), then findable by tid */
			th = calloc(1, sizeof(*th));
			if (!th || push(&t->threads, &t->nthreads, th)) {
				free(th);
				ss->oom = 1;
				break;
			}
			if (d9__map_put(&p->threads, d->id, th)) {
				ss->oom = 1;
				break;
			}
			th->proc = p;
			th->tid = (uint32_t)d->id;
			th->idx = (uint32_t)t->nthreads - 1;
			th->name = "";
		}
		if (name)
			th->name = name;
		if (d->u.thread.worker && d->u.thread.worker <= UINT32_MAX)
			set_worker(th, (uint32_t)d->u.thread.worker);
		break;
	}
	case D9_DEF_PRIVILEGES:
		/* repeated in every later segment (and again when a flag is added) */
		if (!p->priv_dropped)
			p->priv_from_uid = (uint32_t)d->u.privileges.from_uid;
		p->priv_dropped = 1;
		p->priv_to_uid = (uint32_t)d->u.privileges.to_uid;
		p->priv_flags |= (uint32_t)d->u.privileges.flags;
		break;
	case D9_DEF_RECORDER: {
		/* repeated in every later segment: kept once per (feature, state) */
		uint32_t feature = d->u.recorder.feature > UINT32_MAX ? UINT32_MAX :
			(uint32_t)d->u.recorder.feature;
		uint32_t state = d->u.recorder.state > UINT32_MAX ? UINT32_MAX :
			(uint32_t)d->u.recorder.state;
		uint32_t i;
		for (i = 0; i < p->nnarrowed; i++)
			if (p->narrowed[i].feature == feature && p->narrowed[i].state == state)
				break;
		if (i < p->nnarrowed || i == D9__NARROWED_MAX)
			break; /* known, or more than a writer makes */
		const char *text = seg_string(ss, d->u.recorder.text);
		p->narrowed[p->nnarrowed++] = (struct d9__narrowing){ feature, state,
			d->u.recorder.err > 4095 ? 0 : (uint32_t)d->u.recorder.err, text ? text : "" };
		break;
	}
	case D9_DEF_COROUTINE: {
		struct d9__loc *l = d->u.coroutine.location ?
			d9__map_get(&ss->locs, d->u.coroutine.location) : NULL;
		if (l && d9__map_put(&ss->co_locs, d->id, l))
			ss->oom = 1;
		break;
	}
	case D9_DEF_SYMBOL: {
		/* names of this process's addresses (the agent writes them right after the SCHEMA
		 * chunk, so they come before the locations and stacks that need them); a record
		 * whose function string is undefined is ignored */
		const char *fn = seg_string(ss, d->u.symbol.function);
		if (fn && *fn && d9__symbols_add(t, p, ss->seg, d->u.symbol.start, d->u.symbol.len, fn,
			seg_string(ss, d->u.symbol.file), d->u.symbol.line, d->u.symbol.inline_depth))
			ss->oom = 1;
		break;
	}
	case D9_DEF_CUSTOM_SCHEMA: {
		struct d9__cschema *c = intern_cschema(ss, d);
		if (!c || d9__map_put(&ss->cschemas, d->id, c))
			ss->oom = 1;
		break;
	}
	default:
		break; /* ClockSync: not used yet */
	}
}

static struct d9__thread *chunk_thread(struct segstate *ss, const struct d9_chunk *c)
{
	struct d9__proc *p = ss->seg->proc;
	struct d9__thread *th = d9__map_get(&p->threads, c->tid);

	if (!th) {
		th = calloc(1, sizeof(*th));
		if (!th || push(&ss->t->threads, &ss->t->nthreads, th)) {
			free(th);
			ss->oom = 1;
			return NULL;
		}
		if (d9__map_put(&p->threads, c->tid, th)) {
			ss->oom = 1;
			return NULL;
		}
		th->proc = p;
		th->tid = c->tid;
		th->idx = (uint32_t)ss->t->nthreads - 1;
		th->name = "";
	}
	if (c->worker)
		set_worker(th, c->worker);
	return th;
}

/* d9_time_to_realtime_ns(h, time), given mono = d9_time_to_mono_ns(h, time): both add the
 * same tick offset to their anchor, saturating; unless mono saturated, that offset is
 * mono - anchor_mono, and one conversion per event is saved. */
static int64_t mono_to_real(const struct d9_header *h, int64_t mono, uint64_t time)
{
	if (mono == INT64_MAX || mono == INT64_MIN)
		return d9_time_to_realtime_ns(h, time);
	__int128 v = (__int128)h->anchor_realtime_ns + ((__int128)mono - h->anchor_mono_ns);

	return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

static void do_events(struct segstate *ss, struct d9_reader *r, const struct d9_chunk *c,
	d9__ev_fn *fn, void *ctx)
{
	struct d9__trace *t = ss->t;
	const struct d9_header *h = d9_reader_header(r);
	struct d9__thread *th = chunk_thread(ss, c);
	struct d9_events_iter it;
	struct d9_event e;

	if (!th)
		return;
	struct d9__ev ev;

	/* zeroed once per chunk; each event then resets the fields the switch below sets (a
	 * memset per event was a tenth of the analyzer's time) */
	memset(&ev, 0, sizeof(ev));
	/* code 14 is SchedDelay when the segment's schema says so (it is not built in) */
	const struct d9_schema_type *sds = d9_reader_schema(r, D9_EV_SCHED_DELAY);
	int sd_ok = sds && sds->nfields >= 5 && !strcmp(sds->name, D9_SCHED_DELAY_NAME);
	/* 18 and 19 are Mark and Value when the schema names them so (application API) */
	const struct d9_schema_type *ms = d9_reader_schema(r, D9_EV_MARK);
	const struct d9_schema_type *vs = d9_reader_schema(r, D9_EV_VALUE);
	int mark_ok = ms && ms->nfields >= 1 && !strcmp(ms->name, D9_MARK_NAME);
	int value_ok = vs && vs->nfields >= 3 && !strcmp(vs->name, D9_VALUE_NAME);
	/* and 16, 17 are RequestBegin, RequestEnd when it names them so */
	const struct d9_schema_type *rbs = d9_reader_schema(r, D9_EV_REQUEST_BEGIN);
	const struct d9_schema_type *res = d9_reader_schema(r, D9_EV_REQUEST_END);
	int req_ok = rbs && rbs->nfields >= 5 && !strcmp(rbs->name, D9_REQUEST_BEGIN_NAME) &&
		res && res->nfields >= 7 && !strcmp(res->name, D9_REQUEST_END_NAME);
	d9_events_init(&it, r, c);
	while (d9_events_next(&it, &e) == 1) {
		if (e.type < 1 || (e.type > D9_EV_KNOWN_MAX && !(e.type == D9_EV_SCHED_DELAY && sd_ok) &&
			!(e.type == D9_EV_MARK && mark_ok) && !(e.type == D9_EV_VALUE && value_ok) &&
			!((e.type == D9_EV_REQUEST_BEGIN || e.type == D9_EV_REQUEST_END) && req_ok)))
			continue;
		ev.co = ev.co2 = 0;
		ev.loc = NULL;
		ev.stack = NULL;
		ev.call = NULL;
		ev.kind = 0;
		ev.object = ev.deadline_ns = 0;
		ev.count = 0;
		ev.value = 0;
		ev.unwind = 0;
		ev.weight_ns = D9_UNKNOWN;
		ev.name = NULL;
		ev.cschema = NULL;
		ev.cvals = NULL;
		ev.type = e.type;
		ev.ns = d9_time_to_mono_ns(h, e.time);
		if (ev.ns > ss->seg->proc->last_ns)
			ss->seg->proc->last_ns = ev.ns;
		ev.real_ns = mono_to_real(h, ev.ns, e.time);
		if (ev.real_ns < t->from_real || ev.real_ns >= t->to_real) {
			/* merge.c counts the gap of a Dropped it delivers; one outside the window
			 * still marks a gap: a writer records a write error's drop count when
			 * writing works again, before the chunks that hold earlier events */
			if (e.type == D9_EV_DROPPED && e.f[D9_F_DROP_REASON] != D9_DROP_SAMPLES_LOST)
				d9__gap(ss->seg->proc, th->tid ? th : NULL, ev.ns);
			continue;
		}
		ev.proc = ss->seg->proc;
		ev.th = th;
		ev.raw = &e;
		switch (e.type) {
		case D9_EV_POLL_START:
			ev.co = e.f[D9_F_POLL_COROUTINE];
			if (e.f[D9_F_POLL_LOCATION])
				ev.loc = d9__map_get(&ss->locs, e.f[D9_F_POLL_LOCATION]);
			if (!ev.loc)
				ev.loc = d9__map_get(&ss->co_locs, ev.co);
			break;
		case D9_EV_POLL_END:
			ev.co = e.f[D9_F_POLL_COROUTINE];
			break;
		case D9_EV_PARK:
			ev.kind = e.f[D9_F_PARK_CALL];
			ev.value = (int64_t)e.f[D9_F_PARK_TIMEOUT_US];
			break;
		case D9_EV_UNPARK:
			ev.value = (int64_t)e.f[D9_F_UNPARK_READY];
			break;
		case D9_EV_WAKE:
			ev.co = e.f[D9_F_WAKE_WOKEN];
			ev.co2 = e.f[D9_F_WAKE_WAKER];
			ev.kind = e.f[D9_F_WAKE_KIND];
			ev.object = (int64_t)e.f[D9_F_WAKE_OBJECT];
			if (ev.kind == D9_WAKE_TIMER) {
				/* object: the deadline in units relative to the Wake's own time */
				uint64_t dl = ev.object < 0 && (uint64_t)-ev.object > e.time ? 0 :
					e.time + (uint64_t)ev.object;
				ev.deadline_ns = d9_time_to_mono_ns(h, dl);
			}
			break;
		case D9_EV_SPAWN:
			ev.co = e.f[D9_F_SPAWN_COROUTINE];
			ev.co2 = e.f[D9_F_SPAWN_PARENT];
			if (e.f[D9_F_SPAWN_LOCATION])
				ev.loc = d9__map_get(&ss->locs, e.f[D9_F_SPAWN_LOCATION]);
			if (!ev.loc)
				ev.loc = d9__map_get(&ss->co_locs, ev.co);
			break;
		case D9_EV_COROUTINE_EXIT:
			ev.co = e.f[D9_F_EXIT_COROUTINE];
			break;
		case D9_EV_QUEUE_SAMPLE:
			ev.count = e.f[D9_F_QUEUE_RUNNABLE];
			break;
		case D9_EV_BLOCKING_CALL:
		case D9_EV_SCHED_DELAY:
			/* the same first four fields (d9__enc_call), then stack or sched_wait_ns */
			ev.co = e.f[D9_F_BLOCK_COROUTINE];
			ev.call = seg_string(ss, e.f[D9_F_BLOCK_CALL]);
			if (!ev.call)
				ev.call = "?";
			ev.kind = e.f[D9_F_BLOCK_FD_KIND];
			ev.count = e.f[D9_F_BLOCK_DURATION_NS];
			if (e.type == D9_EV_SCHED_DELAY)
				ev.value = e.f[D9_F_SD_SCHED_WAIT_NS] == D9_UNKNOWN ? -1 :
					(int64_t)e.f[D9_F_SD_SCHED_WAIT_NS];
			else if (e.f[D9_F_BLOCK_STACK])
				ev.stack = d9__map_get(&ss->stacks, e.f[D9_F_BLOCK_STACK]);
			break;
		case D9_EV_CPU_SAMPLE:
			ev.co = e.f[D9_F_CPU_COROUTINE];
			ev.kind = e.f[D9_F_CPU_SOURCE];
			ev.unwind = e.f[D9_F_CPU_UNWIND]; /* 0 when the schema has no such field */
			ev.weight_ns = e.f[D9_F_CPU_WEIGHT_NS];
			if (e.f[D9_F_CPU_STACK]) {
				struct d9__stack *st = d9__map_get(&ss->stacks, e.f[D9_F_CPU_STACK]);
				if (st)
					st->pc0 = 1; /* named as it is: d9__frame_name */
				ev.stack = st;
			}
			break;
		case D9_EV_DROPPED:
			ev.count = e.f[D9_F_DROP_COUNT];
			ev.kind = e.f[D9_F_DROP_REASON];
			break;
		case D9_EV_ZERO_TIMEOUT_WAITS:
			ev.count = e.f[D9_F_ZTW_COUNT];
			break;
		case D9_EV_MARK:
		case D9_EV_VALUE:
			ev.name = seg_string(ss, e.f[D9_F_MARK_NAME]);
			if (!ev.name)
				ev.name = "?";
			ev.kind = e.f[D9_F_VALUE_KIND]; /* 0 for a Mark */
			ev.value = (int64_t)e.f[D9_F_VALUE_VALUE];
			break;
		case D9_EV_CUSTOM:
			/* a payload that does not match its schema, or an undefined schema, is damage */
			ev.cschema = d9__map_get(&ss->cschemas, e.f[D9_F_CUSTOM_SCHEMA]);
			if (!ev.cschema) {
				d9_reader_bad_event(r, e.offset, "CustomEvent of an undefined CustomSchema");
				continue;
			}
			if (d9_custom_decode(&ev.cschema->cs, e.fdata[D9_F_CUSTOM_DATA],
				(size_t)e.f[D9_F_CUSTOM_DATA], ss->cvals)) {
				d9_reader_bad_event(r, e.offset, "CustomEvent payload does not match its schema");
				continue;
			}
			ev.cvals = ss->cvals;
			break;
		case D9_EV_REQUEST_BEGIN:
			ev.count = e.f[D9_F_RB_ID];
			ev.object = (int64_t)e.f[D9_F_RB_FD];
			ev.co = e.f[D9_F_RB_COROUTINE];
			ev.kind = e.f[D9_F_RB_SOURCE];
			ev.call = e.f[D9_F_RB_PREVIEW] ? seg_string(ss, e.f[D9_F_RB_PREVIEW]) : NULL;
			break;
		case D9_EV_REQUEST_END:
			ev.count = e.f[D9_F_RE_ID];
			ev.kind = e.f[D9_F_RE_SOURCE];
			ev.value = (int64_t)e.f[D9_F_RE_STATUS];
			break;
		default:
			continue;
		}
		t->events++;
		fn(ctx, &ev);
		if (t->stop)
			return;
	}
}

static void seg_free(struct segstate *ss)
{
	d9__map_free(&ss->strings);
	d9__map_free(&ss->locs);
	d9__map_free(&ss->stacks);
	d9__map_free(&ss->co_locs);
	d9__map_free(&ss->cschemas);
}

/* A trailer's count of the directory budget's deletions: the directory's running total when
 * the segment was sealed, so the largest one of a directory is its count. */
static void budget_note(struct d9__trace *t, const char *path, const struct d9_trailer *tr)
{
	const char *slash = strrchr(path, '/');
	const char *dir = d9__trace_intern(t, path, slash ? (size_t)(slash - path) : 0);
	size_t i;

	for (i = 0; i < t->nbudget_dirs && t->budget_dirs[i].dir != dir; i++)
		;
	if (i == t->nbudget_dirs) {
		struct d9__budget_dir *m = realloc(t->budget_dirs, (i + 1) * sizeof(*m));
		if (!m)
			return;
		t->budget_dirs = m;
		m[i] = (struct d9__budget_dir){ dir, 0, 0 };
		t->nbudget_dirs++;
	}
	struct d9__budget_dir *b = &t->budget_dirs[i];
	if (tr->budget_deleted_segments > b->segments ||
	    (tr->budget_deleted_segments == b->segments && tr->budget_deleted_bytes > b->bytes)) {
		b->segments = tr->budget_deleted_segments;
		b->bytes = tr->budget_deleted_bytes;
	}
}

static int run_seg(struct d9__trace *t, struct d9__seg *seg, d9__ev_fn *fn, void *ctx)
{
	struct segstate ss;
	struct d9_reader *r;
	struct d9_chunk c;
	int err;
	int64_t ended_ns = 0, ended_real = 0; /* its trailer's end_time (D9_TRAILER_ENDED) */
	int ended_kind = 0; /* D9__END_PROCESS or D9__END_WINDOW */

	memset(&ss, 0, sizeof(ss));
	ss.t = t;
	ss.seg = seg;
	/* a segment missing between this one and the process's previous one (deleted, unreadable,
	 * never written) */
	if (seg->proc->seq_seen && seg->seq != seg->proc->last_seq + 1) {
		t->seq_gaps++;
		d9__gap(seg->proc, NULL, seg->proc->last_ns);
	}
	seg->proc->seq_seen = 1;
	seg->proc->last_seq = seg->seq;
	if ((err = d9_reader_open_file(&r, seg->path))) {
		/* it opened a moment ago: the file changed under us */
		t->unreadable++;
		d9__gap(seg->proc, NULL, seg->proc->last_ns);
		warn(t, "%s: %s", seg->path, err < 0 && err > -4096 ? strerror(-err) : d9_strerror(err));
		return 0;
	}
	err = 0;
	uint64_t data_end = 0; /* the end of the last chunk read */
	d9_reader_on_problem(r, on_problem, &ss);
	while (!t->stop && (err = d9_reader_next(r, &c)) == 1 && !ss.oom) {
		data_end = c.offset + 12 + c.len;
		if (c.type == D9_CHUNK_DEFS) {
			struct d9_defs_iter it;
			struct d9_def d;
			d9_defs_init(&it, r, &c);
			while (d9_defs_next(&it, &d) == 1)
				do_def(&ss, &d);
		} else if (c.type == D9_CHUNK_EVENTS) {
			do_events(&ss, r, &c, fn, ctx);
			if (t->progress)
				progress_tick(t, seg, c.offset);
		} else if (c.type == D9_CHUNK_TRAILER) {
			struct d9_trailer tr;
			if (d9_trailer_decode(&c, &tr) != 0)
				on_problem(&ss, D9_PROB_CORRUPT, c.offset, "trailer does not parse");
			else if (tr.budget_deleted_segments || tr.budget_deleted_bytes)
				budget_note(t, seg->path, &tr);
			if ((tr.flags & (D9_TRAILER_ENDED | D9_TRAILER_WINDOW)) && tr.end_time) {
				const struct d9_header *h = d9_reader_header(r);
				ended_ns = d9_time_to_mono_ns(h, tr.end_time);
				ended_real = mono_to_real(h, ended_ns, tr.end_time);
				ended_kind = tr.flags & D9_TRAILER_ENDED ? D9__END_PROCESS :
					D9__END_WINDOW;
			}
			if (seg->proc) { /* running totals of the process: the largest is the latest */
				const uint64_t v[4] = { tr.s3_uploaded, tr.s3_uploaded_bytes, tr.s3_failures,
					tr.s3_evicted };
				for (int i = 0; i < 4; i++)
					if (v[i] > seg->proc->s3[i])
						seg->proc->s3[i] = v[i];
			}
		}
	}
	const struct d9_reader_stats *st = d9_reader_stats(r);
	if (err < 0 && !ss.damage)
		on_problem(&ss, D9_PROB_TRUNCATED, st->truncated_at, "read error");
	int truncated = st->truncated;
	if (!st->sealed && !t->stop && !ss.oom) {
		if (seg->live) {
			/* being written: its last chunk may be the one the writer is writing */
			t->live_segments++;
			if (truncated && ss.damage == 1 && !st->corrupt_chunks && !st->bad_events &&
			    !st->bad_defs)
				ss.damage = truncated = 0;
		} else if (!ss.damage) {
			on_problem(&ss, D9_PROB_TRUNCATED, data_end ? data_end : st->data_start,
				"no trailer: the segment was not sealed (its writer stopped)");
			truncated = 1;
		} else {
			truncated = 1;
		}
		/* what came after the last chunk is unknown: nothing pairs across the end */
		d9__gap(seg->proc, NULL, seg->proc->last_ns);
	}
	t->corrupt_chunks += st->corrupt_chunks;
	t->bad_events += st->bad_events;
	t->bad_defs += st->bad_defs;
	if (truncated)
		t->truncated_segments++;
	if (st->corrupt_chunks || st->bad_events || st->bad_defs)
		t->corrupt_segments++;
	if (ss.damage) {
		t->damaged_files++;
		warn(t, "%s: damaged segment (%s%" PRIu64 " corrupt chunks, %" PRIu64
			" bad events, %" PRIu64 " bad definitions): first problem at offset %" PRIu64
			": %s", seg->path, truncated ? "truncated, " : "", st->corrupt_chunks,
			st->bad_events, st->bad_defs, ss.first_off, ss.first_msg);
	}
	int sealed = st->sealed; /* st is the reader's: gone with it */
	d9_reader_close(r);
	struct d9__ev end;
	memset(&end, 0, sizeof(end));
	end.type = D9__EV_SEGMENT_END;
	end.proc = seg->proc;
	/* a later segment of the same process: it went on (an exec that failed, after which the
	 * agent started again): not its end */
	size_t si = (size_t)(seg - t->segs);
	int later = si + 1 < t->nsegs && t->segs[si + 1].proc == seg->proc;
	if (ended_ns && sealed && !ss.damage && seg->proc && !later) {
		/* sealed at the process's end (exit, exec): what its threads had open lasted until
		 * then, or until its last event when another thread recorded past it */
		end.kind = (uint64_t)ended_kind;
		end.ns = ended_ns > seg->proc->last_ns ? ended_ns : seg->proc->last_ns;
		end.real_ns = ended_real + (end.ns - ended_ns);
	}
	fn(ctx, &end);
	seg_free(&ss);
	return ss.oom ? -ENOMEM : 0;
}

static int run_all(struct d9__trace *t, d9__ev_fn *fn, void *ctx)
{
	t->progress_start = t->progress_last = now_ns();
	t->progress_done = 0;
	for (size_t i = 0; i < t->nsegs; i++) {
		struct d9__proc *p = t->segs[i].proc;
		if (i == 0 || t->segs[i - 1].proc != p) {
			/* a process's first segment: a prescan and the real pass each start afresh
			 * (the gap counters only ever grow: marks stay comparable) */
			p->seq_seen = 0;
			p->gap_ns = p->last_ns = INT64_MIN;
		}
		int err = run_seg(t, &t->segs[i], fn, ctx);
		t->progress_done += t->segs[i].size;
		if (err || t->stop) {
			progress_clear(t);
			return err;
		}
		if (i + 1 == t->nsegs || t->segs[i + 1].proc != t->segs[i].proc) {
			struct d9__ev end;
			memset(&end, 0, sizeof(end));
			end.type = D9__EV_PROCESS_END;
			end.proc = t->segs[i].proc;
			fn(ctx, &end);
		}
	}
	progress_clear(t);
	return 0;
}

int d9__trace_run(struct d9__trace *t, d9__ev_fn *fn, void *ctx)
{
	struct d9__merge m = { .t = t, .fn = fn, .ctx = ctx };
	int err = run_all(t, d9__merge_ev, &m);

	d9__merge_free(&m);
	return err ? err : m.oom ? -ENOMEM : 0;
}

int d9__trace_prescan(struct d9__trace *t, d9__ev_fn *fn, void *ctx)
{
	struct d9__trace saved = *t;
	int err;

	t->quiet = 1;
	t->progress = 0;
	t->stop = 0;
	err = d9__trace_run(t, fn, ctx);
	for (size_t i = saved.nwarnings; i < t->nwarnings; i++)
		free(t->warnings[i]);
	t->nwarnings = saved.nwarnings;
	t->quiet = saved.quiet;
	t->progress = saved.progress;
	t->stop = 0;
	t->unreadable = saved.unreadable;
	t->damaged_files = saved.damaged_files;
	t->truncated_segments = saved.truncated_segments;
	t->live_segments = saved.live_segments;
	t->seq_gaps = saved.seq_gaps;
	t->corrupt_segments = saved.corrupt_segments;
	t->corrupt_chunks = saved.corrupt_chunks;
	t->bad_events = saved.bad_events;
	t->bad_defs = saved.bad_defs;
	t->unknown_records = saved.unknown_records;
	t->events = saved.events;
	return err;
}

int d9__trace_exit_code(const struct d9__trace *t)
{
	if (!t->readable)
		return D9_EXIT_NO_TRACE;
	if (t->unreadable || t->bad_args || t->damaged_files)
		return D9_EXIT_DAMAGED;
	return D9_EXIT_OK;
}

const char *d9__narrowing_text(const struct d9__narrowing *n, char *buf, size_t len)
{
	static const struct { uint32_t feature, state; const char *what; } what[] = {
		{ D9_REC_CPU_PROFILE, D9_REC_OFF, "CPU samples off" },
		{ D9_REC_CPU_PROFILE, D9_REC_FALLBACK, "CPU samples from ctimer" },
		{ D9_REC_CPU_PROFILE, D9_REC_LIMITED, "CPU samples of user time only" },
		{ D9_REC_SCHED_EVENTS, D9_REC_OFF, "off-CPU samples off" },
		{ D9_REC_PERF_FDS, D9_REC_LIMITED, "some workers not profiled" },
		{ D9_REC_PERF_RING, D9_REC_LIMITED, "some workers without a sample ring" },
		{ D9_REC_BLOCKING_STACKS, D9_REC_OFF, "blocking-call stacks off" },
		{ D9_REC_UNWIND, D9_REC_OFF, "DWARF unwinding off" },
		{ D9_REC_SYMBOLS, D9_REC_OFF, "segments without symbol records" },
		{ D9_REC_MAPS, D9_REC_LIMITED, "frame-pointer stacks cut" },
		{ D9_REC_STACK_COPY, D9_REC_OFF, "ctimer stacks without their callers" },
		{ D9_REC_THREADS, D9_REC_LIMITED, "a thread under a seccomp filter records nothing more" },
		{ D9_REC_THREADS, D9_REC_OFF, "recording stopped at a seccomp filter on every thread" },
		{ D9_REC_EXEC, D9_REC_OFF, "a program it started runs in secure-execution mode, where "
			"the loader ignores LD_PRELOAD: not traced" },
		{ D9_REC_CHROOT, D9_REC_OFF, "tracing stopped at the program's chroot" },
	};
	char head[64];
	const char *w = NULL;

	for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++)
		if (what[i].feature == n->feature && what[i].state == n->state)
			w = what[i].what;
	if (!w) {
		/* a writer newer than this reader: its names, else its numbers */
		const char *f = d9_rec_feature_name(n->feature), *st = d9_rec_state_name(n->state);
		char fb[16], sb[16];
		snprintf(fb, sizeof(fb), "feature %u", n->feature);
		snprintf(sb, sizeof(sb), "state %u", n->state);
		snprintf(head, sizeof(head), "%s %s", f ? f : fb, st ? st : sb);
		w = head;
	}
	if (*n->text && n->err)
		snprintf(buf, len, "%s (%s: %s)", w, n->text, strerror((int)n->err));
	else if (*n->text || n->err)
		snprintf(buf, len, "%s (%s)", w, *n->text ? n->text : strerror((int)n->err));
	else
		snprintf(buf, len, "%s", w);
	return buf;
}

const char *d9__narrowing_hint(const struct d9__narrowing *n)
{
	switch (n->feature) {
	case D9_REC_CPU_PROFILE:
	case D9_REC_SCHED_EVENTS:
		if (n->err == EMFILE || n->err == ENFILE)
			return "raise RLIMIT_NOFILE (ulimit -n)";
		if (n->state != D9_REC_OFF && n->state != D9_REC_FALLBACK && n->state != D9_REC_LIMITED)
			return "";
		return "perf_event_open must be allowed: run as root or with CAP_PERFMON, or lower "
			"kernel.perf_event_paranoid (1 for off-CPU samples and kernel time, 2 for user "
			"CPU samples); a seccomp filter (container) must allow perf_event_open";
	case D9_REC_PERF_FDS:
		return "raise RLIMIT_NOFILE (ulimit -n): the agent keeps its perf descriptors to 1/8 of it";
	case D9_REC_PERF_RING:
		return "raise kernel.perf_event_mlock_kb or RLIMIT_MEMLOCK (ulimit -l), or lower "
			"D9_CPU_PROFILE";
	case D9_REC_BLOCKING_STACKS:
	case D9_REC_STACK_COPY:
		return "process_vm_readv must be allowed (a seccomp filter, a container profile) and "
			"memory available";
	case D9_REC_SYMBOLS:
		if (n->state == D9_REC_LIMITED)
			/* libdw is there: the symbolizer kept its memory cap */
			return "raise D9_SYMBOLIZE_MEMORY (8M by default) to let the agent inflate those "
				"modules' debug sections, or name them later: d9-analyze reads the files "
				"where they are";
		/* fall through */
	case D9_REC_UNWIND:
		return "install libdw (Debian/Ubuntu: libdw1, Fedora: elfutils-libs) where the server runs";
	case D9_REC_MAPS:
		return "/proc must be mounted and /proc/self/maps readable by the server";
	case D9_REC_CHROOT:
		return "D9_CHROOT=follow traces on inside the program's new root (its threads keep "
			"theirs outside it: README, Privilege drops)";
	case D9_REC_EXEC:
		return "the kernel starts a program in secure-execution mode when its ids change: "
			"its starter's real and effective ids differ (squid's master execs its kid so: "
			"squid -N serves in one process), or its file is set-user-ID, set-group-ID or "
			"has capabilities; start it so that they do not (README: Secure execution)";
	case D9_REC_THREADS:
		return "the program's seccomp filter may kill a thread at a system call the agent "
			"would make there: d9 records no thread under one (a program option to turn the "
			"filter off, such as chronyd's -F 0, while tracing)";
	}
	return "";
}

void d9__trace_budget(const struct d9__trace *t, uint64_t *segments, uint64_t *bytes)
{
	*segments = *bytes = 0;
	for (size_t i = 0; i < t->nbudget_dirs; i++) {
		*segments += t->budget_dirs[i].segments;
		*bytes += t->budget_dirs[i].bytes;
	}
}

void d9__trace_s3(const struct d9__trace *t, uint64_t out[4])
{
	memset(out, 0, 4 * sizeof(*out));
	for (size_t i = 0; i < t->nprocs; i++)
		for (int k = 0; k < 4; k++)
			out[k] += t->procs[i]->s3[k];
}

void d9__trace_close(struct d9__trace *t)
{
	d9__dumps_free(t);
	free(t->budget_dirs);
	for (size_t i = 0; i < t->nsegs; i++)
		free(t->segs[i].path);
	free(t->segs);
	for (size_t i = 0; i < t->nprocs; i++) {
		d9__map_free(&t->procs[i]->threads);
		d9__symtab_free(t->procs[i]);
		for (size_t j = 0; j < t->procs[i]->nmodules; j++)
			free(t->procs[i]->modules[j].build_id);
		free(t->procs[i]->modules);
		free(t->procs[i]);
	}
	free(t->procs);
	for (size_t i = 0; i < t->nthreads; i++)
		free(t->threads[i]);
	free(t->threads);
	for (size_t i = 0; i < t->nlocs; i++)
		free(t->locs[i]);
	free(t->locs);
	for (size_t i = 0; i < t->ncschemas; i++) {
		free(t->cschemas[i]->desc);
		free(t->cschemas[i]);
	}
	free(t->cschemas);
	for (size_t i = 0; i < t->nstacks; i++) {
		free(t->stacks[i]->frames);
		free(t->stacks[i]);
	}
	free(t->stacks);
	for (size_t i = 0; i < t->istr.cap; i++) {
		struct d9__istr *e = t->istr.vals ? t->istr.vals[i] : NULL;
		while (e) {
			struct d9__istr *n = e->next;
			free(e);
			e = n;
		}
	}
	d9__map_free(&t->istr);
	d9__map_free(&t->iloc);
	d9__map_free(&t->istack);
	for (size_t i = 0; i < t->nwarnings; i++)
		free(t->warnings[i]);
	free(t->warnings);
	memset(t, 0, sizeof(*t));
}

/* A stack as a JSON array of frame names, innermost first, inlined functions expanded; [] when
 * there is none (summary and jsonl). */
void d9__json_stack(FILE *f, struct d9__trace *t, const struct d9__stack *st)
{
	char buf[64];
	const char *names[D9__MAX_INLINE];
	int first = 1;

	fputc('[', f);
	for (uint32_t i = 0; st && i < st->n; i++) {
		size_t k = d9__frame_names(t, st, i, names, D9__MAX_INLINE, buf, sizeof(buf));
		for (size_t j = 0; j < k; j++, first = 0) {
			if (!first)
				fputc(',', f);
			d9__json_cstr(f, names[j]);
		}
	}
	fputc(']', f);
}

/* ---- generic mode ------------------------------------------------------------------------------ */
/* The first pass: finds whether the window holds a complete poll (coroutine mode; stops
 * there) or else a complete loop turn (generic mode), by summary's rules. */
struct mode_scan {
	struct d9__trace *t;
	struct d9__open *in_poll, *in_turn; /* by thread idx */
	size_t n;
	int polls, turns, oom;
};

static void mode_on_event(void *ctx, const struct d9__ev *ev)
{
	struct mode_scan *m = ctx;

	if (!ev->th)
		return;
	if (ev->th->idx >= m->n) {
		size_t n = ev->th->idx + 1 > m->n * 2 ? ev->th->idx + 1 : m->n * 2;
		struct d9__open *a = realloc(m->in_poll, n * sizeof(*a));
		struct d9__open *b = a ? realloc(m->in_turn, n * sizeof(*b)) : NULL;
		if (a)
			m->in_poll = a;
		if (!b) {
			m->oom = 1;
			m->t->stop = 1;
			return;
		}
		m->in_turn = b;
		memset(a + m->n, 0, (n - m->n) * sizeof(*a));
		memset(b + m->n, 0, (n - m->n) * sizeof(*b));
		m->n = n;
	}
	uint32_t i = ev->th->idx;
	uint64_t d;
	switch (ev->type) {
	case D9_EV_POLL_START:
	case D9_EV_POLL_END:
		if (d9__pair_close(&m->in_poll[i], ev, &d) == D9__PAIR_OK) {
			m->polls = 1; /* a poll ended: coroutine mode, no need to read on */
			m->t->stop = 1;
		}
		if (ev->type == D9_EV_POLL_START)
			d9__pair_open(&m->in_poll[i], ev);
		break;
	case D9_EV_PARK:
		if (d9__pair_close(&m->in_turn[i], ev, &d) == D9__PAIR_OK)
			m->turns = 1;
		break;
	case D9_EV_UNPARK:
		d9__pair_open(&m->in_turn[i], ev);
		break;
	default:
		break;
	}
}

int d9__trace_generic(struct d9__trace *t)
{
	struct mode_scan m;

	memset(&m, 0, sizeof(m));
	m.t = t;
	int err = d9__trace_prescan(t, mode_on_event, &m);
	free(m.in_poll);
	free(m.in_turn);
	if (err || m.oom)
		return -1;
	return !m.polls && m.turns;
}

int d9__trace_stream(struct d9__trace *t, char **args, int nargs, d9__ev_fn *fn, void *ctx)
{
	int rc = d9__trace_start(t, args, nargs);

	if (rc)
		return rc;
	if (d9__trace_run(t, fn, ctx))
		fprintf(stderr, "d9-analyze: out of memory: the output is incomplete\n");
	fflush(stdout);
	rc = d9__trace_exit_code(t);
	d9__trace_close(t);
	return rc;
}
