/* cmd-flame.c: `d9-analyze flame`: folded stacks ("root;...;leaf N", outermost frame first), the
 * input of flamegraph.pl, inferno and speedscope. Sources: CpuSample events weighted by the time
 * each stands for (on-CPU: the sampling period; off-CPU: the time off CPU) in us, or by count in
 * traces whose samples carry no time (or with --samples); with --blocking, BlockingCall stacks
 * weighted by duration in us. Streaming: weights are kept per distinct (stack, location, call),
 * never per event; only --long-polls holds the samples of each thread's open poll (or loop turn,
 * in generic mode) until its length is known. Documented in README.md, "flame". */
#include "analyze.h"
#include "d9-format.h"
#include "trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CPU_ON = 1, CPU_OFF = 2 }; /* bits of flame.cpu */

static const char NO_POLL[] = "(no poll)", NO_LOC[] = "(unknown)", TURN[] = "(loop turn)";

/* What one event adds: ns of time (0 when unknown), samples, samples of unknown time. */
struct weight {
	uint64_t ns, n, unknown;
};

/* One distinct (stack, prefix, call) and its weight: CPU samples, or ns of blocking calls. */
struct agg {
	const struct d9__stack *stack; /* NULL: no stack */
	const char *prefix; /* --by-location: the poll's location name, NO_LOC or NO_POLL */
	const char *call; /* --blocking: the call's name (the leaf frame) */
	struct weight w;
	struct agg *next; /* hash chain */
};

struct pending {
	const struct d9__stack *stack;
	const char *call;
	struct weight w;
};

/* The open poll of a thread. */
struct tpoll {
	struct d9__open o; /* the open poll's start and gap mark (trace.h) */
	int lost; /* a gap ended the open poll: which poll runs is unknown until the next one */
	int skip; /* --location does not match: its samples are dropped */
	int known_long; /* --long-polls: already at least that long, samples go straight through */
	const struct d9__loc *loc;
	struct pending *buf; /* --long-polls: the samples of this poll, until its length is known */
	size_t nbuf, capbuf;
};

struct flame {
	struct d9__trace *t;
	int cpu; /* CPU_ON | CPU_OFF */
	int blocking, by_location;
	int generic; /* loop turns (Unpark to the next Park) stand for polls */
	int samples; /* --samples: count samples even when they carry their time */
	int64_t long_ns; /* 0: no --long-polls */
	const char *location;
	long worker, pid; /* -1: any */
	struct tpoll *polls; /* by thread idx */
	size_t npolls;
	struct d9__map aggs; /* hash -> chain of struct agg */
	size_t naggs;
	int oom;
};

static uint64_t agg_hash(const struct d9__stack *s, const char *prefix, const char *call)
{
	return d9__hash64((uint64_t)(uintptr_t)s * 31 + d9__hash64((uint64_t)(uintptr_t)prefix) * 7 +
		(uint64_t)(uintptr_t)call);
}

static void add(struct flame *fl, const struct d9__stack *s, const char *prefix, const char *call,
	struct weight w)
{
	uint64_t h = agg_hash(s, prefix, call);
	struct agg *head = d9__map_get(&fl->aggs, h);

	for (struct agg *a = head; a; a = a->next)
		if (a->stack == s && a->prefix == prefix && a->call == call) {
			a->w.ns += w.ns;
			a->w.n += w.n;
			a->w.unknown += w.unknown;
			return;
		}
	struct agg *a = malloc(sizeof(*a));
	if (!a) {
		fl->oom = 1;
		return;
	}
	a->stack = s;
	a->prefix = prefix;
	a->call = call;
	a->w = w;
	a->next = head;
	if (d9__map_put(&fl->aggs, h, a)) {
		free(a);
		fl->oom = 1;
		return;
	}
	fl->naggs++;
}

/* The location name of p's poll: its spawn location, "(unknown)", or "(loop turn)". */
static const char *loc_name(const struct flame *fl, const struct tpoll *p)
{
	return fl->generic ? TURN : p->loc ? p->loc->name : NO_LOC;
}

static void flush(struct flame *fl, struct tpoll *p)
{
	const char *prefix = !fl->by_location ? NULL : loc_name(fl, p);

	for (size_t i = 0; i < p->nbuf; i++)
		add(fl, p->buf[i].stack, prefix, p->buf[i].call, p->buf[i].w);
	p->nbuf = 0;
}

static struct tpoll *tpoll_of(struct flame *fl, const struct d9__thread *th)
{
	if (th->idx >= fl->npolls) {
		size_t n = th->idx + 1 > fl->npolls * 2 ? th->idx + 1 : fl->npolls * 2;
		struct tpoll *a = realloc(fl->polls, n * sizeof(*a));
		if (!a) {
			fl->oom = 1;
			return NULL;
		}
		memset(a + fl->npolls, 0, (n - fl->npolls) * sizeof(*a));
		fl->polls = a;
		fl->npolls = n;
	}
	return &fl->polls[th->idx];
}

/* ns - start, or 0 when ns is earlier; no signed overflow on hostile times. */
static uint64_t elapsed(int64_t start, int64_t ns)
{
	return ns > start ? (uint64_t)ns - (uint64_t)start : 0;
}

/* The poll of p ends at ev: with --long-polls its samples count only if it was long enough
 * (not when a gap in the data makes its length unknown). */
static void poll_end(struct flame *fl, struct tpoll *p, const struct d9__ev *ev)
{
	uint64_t d;

	if (d9__pair_close(&p->o, ev, &d) == D9__PAIR_OK && !p->skip && fl->long_ns &&
	    d >= (uint64_t)fl->long_ns)
		flush(fl, p);
	p->skip = p->known_long = p->lost = 0;
	p->nbuf = 0;
}

static void sample(struct flame *fl, struct tpoll *p, const struct d9__ev *ev, const char *call,
	struct weight w)
{
	if (p->o.open && p->o.mark != d9__gap_mark(ev->th)) {
		/* a gap since the PollStart: this sample may belong to a later poll whose start
		 * was lost; the poll's length and location are unknown from here on */
		p->o.open = p->skip = p->known_long = 0;
		p->nbuf = 0;
		p->lost = 1;
	}
	if (!p->o.open) {
		if (!fl->location && !fl->long_ns)
			add(fl, ev->stack, !fl->by_location ? NULL : p->lost ? NO_LOC : NO_POLL, call, w);
		return;
	}
	if (p->skip)
		return;
	if (fl->long_ns && !p->known_long) {
		if (elapsed(p->o.ns, ev->ns) < (uint64_t)fl->long_ns) {
			if (p->nbuf == p->capbuf) {
				size_t n = p->capbuf ? p->capbuf * 2 : 16;
				struct pending *b = realloc(p->buf, n * sizeof(*b));
				if (!b) {
					fl->oom = 1;
					return;
				}
				p->buf = b;
				p->capbuf = n;
			}
			p->buf[p->nbuf++] = (struct pending){ ev->stack, call, w };
			return;
		}
		/* the poll is already long enough: what it held counts, and so does the rest */
		flush(fl, p);
		p->known_long = 1;
	}
	add(fl, ev->stack, !fl->by_location ? NULL : loc_name(fl, p), call, w);
}

/* A poll (a loop turn in generic mode) starts at ev. */
static void poll_start(struct flame *fl, struct tpoll *p, const struct d9__ev *ev)
{
	poll_end(fl, p, ev); /* a start without an end ends the open poll */
	d9__pair_open(&p->o, ev);
	p->loc = fl->generic ? NULL : ev->loc;
	p->skip = fl->location && !strstr(loc_name(fl, p), fl->location);
}

static void flame_on_event(void *ctx, const struct d9__ev *ev)
{
	struct flame *fl = ctx;
	struct tpoll *p;

	if (ev->type == D9__EV_PROCESS_END) {
		/* events come process by process: every open poll was this process's, and its
		 * end is unknown (the samples of a poll known to be long enough are already in) */
		for (size_t i = 0; i < fl->npolls; i++) {
			struct tpoll *q = &fl->polls[i];
			q->o.open = q->skip = q->known_long = q->lost = 0;
			q->nbuf = 0;
		}
		return;
	}
	if (!ev->th || (fl->worker >= 0 && ev->th->worker != fl->worker) ||
	    (fl->pid >= 0 && ev->proc->pid != fl->pid))
		return;
	switch (ev->type) {
	case D9_EV_POLL_START:
	case D9_EV_UNPARK:
		if ((ev->type == D9_EV_UNPARK) == fl->generic && (p = tpoll_of(fl, ev->th)))
			poll_start(fl, p, ev);
		break;
	case D9_EV_POLL_END:
	case D9_EV_PARK:
		if ((ev->type == D9_EV_PARK) == fl->generic && (p = tpoll_of(fl, ev->th)))
			poll_end(fl, p, ev);
		break;
	case D9_EV_CPU_SAMPLE: {
		/* a source this version does not know counts only with --cpu both */
		int want = ev->kind == D9_CPU_ON ? CPU_ON : ev->kind == D9_CPU_OFF ? CPU_OFF :
			CPU_ON | CPU_OFF;
		if (fl->blocking || (fl->cpu & want) != want)
			return;
		int known = ev->weight_ns != D9_UNKNOWN;
		if ((p = tpoll_of(fl, ev->th)))
			sample(fl, p, ev, NULL, (struct weight){ known ? ev->weight_ns : 0, 1, !known });
		break;
	}
	case D9_EV_BLOCKING_CALL:
		if (fl->blocking && (p = tpoll_of(fl, ev->th)))
			sample(fl, p, ev, ev->call, (struct weight){ ev->count, 1, 0 });
		break;
	default:
		break;
	}
}

/* ---- output ------------------------------------------------------------------------------------ */
struct line {
	char *s;
	uint64_t weight;
};

/* What N of each output line counts: us of time (blocking calls; samples that carry their time)
 * or samples (--samples; traces whose samples carry no time). */
static int by_time(const struct flame *fl, uint64_t *unknown, uint64_t *known)
{
	*unknown = *known = 0;
	for (size_t i = 0; i < fl->aggs.cap; i++)
		for (struct agg *a = fl->aggs.vals ? fl->aggs.vals[i] : NULL; a; a = a->next) {
			*unknown += a->w.unknown;
			*known += a->w.n - a->w.unknown;
		}
	return fl->blocking || (!fl->samples && *known);
}

struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
};

/* Appends a frame name: ';' and control characters would split frames or lines, so they become
 * '_'; an empty name becomes "?". */
static void put_frame(struct sbuf *b, const char *name)
{
	size_t len = strlen(name);

	if (b->oom)
		return;
	if (b->n + len + 3 > b->cap) {
		size_t cap = (b->n + len + 3) * 2;
		char *q = realloc(b->p, cap);
		if (!q) {
			b->oom = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	if (b->n)
		b->p[b->n++] = ';';
	if (!len)
		b->p[b->n++] = '?';
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		b->p[b->n++] = c == ';' || c < 0x20 || c == 0x7f ? '_' : (char)c;
	}
	b->p[b->n] = 0;
}

char *d9__fold_stack(struct d9__trace *t, const char *prefix, const struct d9__stack *st,
	const char *call)
{
	struct sbuf b = { NULL, 0, 0, 0 };
	const char *names[D9__MAX_INLINE];
	char buf[64];

	if (prefix)
		put_frame(&b, prefix);
	if (!st || !st->n)
		put_frame(&b, "(no stack)");
	for (uint32_t i = st ? st->n : 0; i-- > 0;) {
		size_t k = d9__frame_names(t, st, i, names, D9__MAX_INLINE, buf, sizeof(buf));
		while (k-- > 0)
			put_frame(&b, names[k]);
	}
	if (call)
		put_frame(&b, call);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

static char *fold(struct flame *fl, const struct agg *a)
{
	return d9__fold_stack(fl->t, a->prefix, a->stack, a->call);
}

static int cmp_line(const void *x, const void *y)
{
	return strcmp(((const struct line *)x)->s, ((const struct line *)y)->s);
}

/* Prints the folded lines, sorted, equal stacks merged. Returns how many lines (0 also when
 * every blocking weight rounds to 0 us), or -1 when out of memory. */
static long print_folded(struct flame *fl)
{
	struct line *l = calloc(fl->naggs ? fl->naggs : 1, sizeof(*l));
	size_t n = 0;
	long printed = 0;
	uint64_t unknown, known;
	int time = by_time(fl, &unknown, &known);

	if (!l)
		return -1;
	if (!fl->blocking && time && unknown)
		fprintf(stderr, "d9-analyze: flame: %" PRIu64 " sample(s) of unknown duration left out "
			"(N is time in us)\n", unknown);
	else if (!fl->blocking && !time && unknown && !fl->samples)
		fprintf(stderr, "d9-analyze: flame: the samples carry no duration (written by an "
			"older d9): N counts samples, not time\n");
	for (size_t i = 0; i < fl->aggs.cap; i++)
		for (struct agg *a = fl->aggs.vals ? fl->aggs.vals[i] : NULL; a && n < fl->naggs;
		     a = a->next) {
			if (!(l[n].s = fold(fl, a)))
				goto oom;
			l[n++].weight = time ? a->w.ns : a->w.n;
		}
	qsort(l, n, sizeof(*l), cmp_line);
	for (size_t i = 0; i < n;) {
		uint64_t w = 0;
		size_t j = i;
		for (; j < n && !strcmp(l[j].s, l[i].s); j++)
			w += l[j].weight;
		if (time)
			w = (w + 500) / 1000; /* ns to us, rounded */
		if (w) {
			printf("%s %" PRIu64 "\n", l[i].s, w);
			printed++;
		}
		i = j;
	}
	for (size_t i = 0; i < n; i++)
		free(l[i].s);
	free(l);
	return printed;
oom:
	for (size_t i = 0; i < n; i++)
		free(l[i].s);
	free(l);
	return -1;
}

static void flame_free(struct flame *fl)
{
	for (size_t i = 0; i < fl->aggs.cap; i++) {
		struct agg *a = fl->aggs.vals ? fl->aggs.vals[i] : NULL;
		while (a) {
			struct agg *next = a->next;
			free(a);
			a = next;
		}
	}
	d9__map_free(&fl->aggs);
	for (size_t i = 0; i < fl->npolls; i++)
		free(fl->polls[i].buf);
	free(fl->polls);
}

static void flame_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze flame [OPTIONS] TRACE...\n\n"
		"Prints folded stacks, one 'root;...;leaf N' line per distinct stack, outermost frame\n"
		"first (input of flamegraph.pl, inferno, speedscope). N is the time in microseconds the\n"
		"CPU samples stand for (on-CPU: the sampling period each; off-CPU: the time until the\n"
		"thread ran again), or with --blocking the microseconds spent in blocking calls (the\n"
		"call is the leaf frame). Samples of traces that do not record their time (older d9)\n"
		"are counted instead, and stderr says so; with time, samples of unknown time are left\n"
		"out and counted on stderr.\n\n"
		"options:\n"
		"  --cpu on|off|both      which CPU samples: on-CPU (default), off-CPU or both\n"
		"  --blocking             BlockingCall stacks weighted by duration instead of samples\n"
		"  --samples              N counts samples instead of their time\n"
		"  --by-location          first frame: the location of the poll the sample is in,\n"
		"                         '(unknown)' or '(no poll)'\n"
		"  --location TEXT        only samples in polls whose location name contains TEXT\n"
		"  --long-polls DURATION  only samples in polls at least this long (loop turns in\n"
		"                         generic mode, as in 'd9-analyze polls')\n"
		"  --worker N             only samples on worker N\n"
		"  --pid N                only samples of process N\n"
		"  --from WHEN            ignore events before WHEN\n"
		"  --to WHEN              ignore events from WHEN on\n"
		"  -h, --help             this text\n\n"
		"DURATION and WHEN: as in 'd9-analyze summary --help'. A poll that crosses a window\n"
		"edge has no known location or length: --location and --long-polls drop its samples.\n"
		"With no samples, stdout stays empty and stderr says so.\n"
		"exit status: 0 ok, 2 usage, 3 no readable trace, 4 output written but input damaged\n");
}

int d9__cmd_flame(int argc, char **argv)
{
	struct flame fl;
	struct d9__trace t;
	int nargs = 0, rc, cpu_set = 0;
	const char *v;
	char **args = calloc((size_t)argc + 1, sizeof(*args));

	if (!args)
		return D9_EXIT_USAGE;
	memset(&fl, 0, sizeof(fl));
	memset(&t, 0, sizeof(t));
	fl.worker = fl.pid = -1;
	fl.cpu = CPU_ON;
	fl.t = &t;
	for (int i = 1; i < argc; i++) {
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			flame_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if (!strcmp(argv[i], "--blocking")) {
			fl.blocking = 1;
		} else if (!strcmp(argv[i], "--samples")) {
			fl.samples = 1;
		} else if (!strcmp(argv[i], "--by-location")) {
			fl.by_location = 1;
		} else if ((r = d9__opt(argc, argv, &i, "--cpu", &v)) == 1) {
			cpu_set = 1;
			if (!strcmp(v, "on"))
				fl.cpu = CPU_ON;
			else if (!strcmp(v, "off"))
				fl.cpu = CPU_OFF;
			else if (!strcmp(v, "both"))
				fl.cpu = CPU_ON | CPU_OFF;
			else {
				fprintf(stderr, "d9-analyze: --cpu: want on, off or both, not '%s'\n", v);
				goto usage;
			}
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--long-polls", &v)) == 1) {
			if (d9__parse_duration(v, &fl.long_ns) || fl.long_ns <= 0) {
				fprintf(stderr, "d9-analyze: --long-polls: bad duration '%s'\n", v);
				goto usage;
			}
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--location", &v)) == 1) {
			fl.location = v;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--worker", &v)) == 1) {
			if (d9__parse_id("--worker", v, &fl.worker))
				goto usage;
		} else if (r == 0 && (r = d9__opt_window(argc, argv, &i, &t, &fl.pid)) == 1) {
			/* --pid, --from, --to */
		} else if (r == 0 && d9__opt_arg("flame", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (fl.blocking && fl.samples) {
		fprintf(stderr, "d9-analyze: flame: --blocking weighs calls by time: no --samples\n");
		goto usage;
	}
	if (fl.blocking && cpu_set) {
		/* samples and microseconds do not add up: one source per graph */
		fprintf(stderr, "d9-analyze: flame: --blocking and --cpu do not mix\n");
		goto usage;
	}
	if (d9__opt_traces("flame", nargs))
		goto usage;
	if ((rc = d9__trace_start(&t, args, nargs)) != 0)
		return rc;
	long lines = 0;
	if ((fl.location || fl.long_ns || fl.by_location) && (fl.generic = d9__trace_generic(&t)) < 0)
		fl.oom = 1;
	if (d9__trace_run(&t, flame_on_event, &fl) || fl.oom)
		fprintf(stderr, "d9-analyze: out of memory: the output is incomplete\n");
	else if ((lines = print_folded(&fl)) < 0)
		fprintf(stderr, "d9-analyze: out of memory: the output is incomplete\n");
	else if (!lines)
		fprintf(stderr, "d9-analyze: flame: no samples: no %s matched\n",
			fl.blocking ? "blocking call (of 0.5 us or more)" :
			fl.cpu == CPU_ON ? "on-CPU sample" : fl.cpu == CPU_OFF ? "off-CPU sample" :
			"CPU sample");
	fflush(stdout);
	rc = d9__trace_exit_code(&t);
	flame_free(&fl);
	d9__trace_close(&t);
	return rc;
usage:
	free(args);
	flame_help(stderr);
	return D9_EXIT_USAGE;
}
