/* cmd-diff.c: `d9-analyze diff`: two trace sets (A and B), or two time ranges of one, compared.
 * Per function: on- and off-CPU time (self and total), largest change first; poll durations and
 * scheduling delays (p50/p90/p99/max); blocking calls per call name (calls, time, mean time per
 * call). Sums are normalized so traces of different lengths and loads compare: per poll (the
 * default: the cost of a unit of work, which a change of traffic leaves alone) or per second of
 * trace (--per second: a trace's seconds are the span of its events).
 * --folded prints a differential flame graph, "stack usA usB" lines (difffolded.pl's output,
 * flamegraph.pl's input). Each side is one pass of its own d9__trace, so names are compared as
 * strings. Memory follows stacks, functions and call names, never events. README.md, "diff". */
#include "analyze.h"
#include "d9-format.h"
#include "json.h"
#include "trace.h"
#include "wakes.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIFF_TOP 20 /* rows per table (--top) */

/* A name (function, call, folded stack) and its numbers on both sides. */
struct drow {
	char *name; /* malloc'd */
	uint64_t h;
	uint64_t v[2][4]; /* [side]: functions: on self, on total, off self, off total (ns);
			   * calls: count, ns; folded: ns */
	size_t mark[2]; /* functions: the last stack (idx + 1) that counted total, per side */
	struct drow *next;
};

struct dtable {
	struct d9__map m; /* hash -> chain */
	struct drow **rows;
	size_t n, cap;
};

/* One side: its trace and what its pass collects. */
struct dside {
	struct d9__trace t;
	const char *what; /* how the side was given, for the header */
	int generic; /* loop turns stand for polls */
	uint64_t min_ns; /* --min: polls shorter than this stay out of the percentiles */
	uint64_t npolls; /* complete polls (all of them: the per-poll denominator) */
	uint64_t *st_ns[2]; /* by stack idx + 1 (0: no stack): on-, off-CPU ns */
	size_t nst;
	struct d9__open *open; /* by thread idx: the open poll or loop turn */
	size_t nopen;
	struct d9__hist polls, sched;
	struct d9__wakes wakes;
	uint64_t unknown; /* samples of unknown time, left out */
	int64_t first_real, last_real;
	int any;
	int oom;
	struct dtable *calls; /* shared with the other side */
	int idx; /* 0: A, 1: B */
};

static struct drow *row_of(struct dtable *tb, const char *name, int *oom)
{
	uint64_t h = d9__hash_bytes(name, strlen(name), 0x9e37);
	struct drow *head = d9__map_get(&tb->m, h), *r;

	for (r = head; r; r = r->next)
		if (r->h == h && !strcmp(r->name, name))
			return r;
	if (tb->n == tb->cap) {
		size_t cap = tb->cap ? tb->cap * 2 : 256;
		struct drow **q = realloc(tb->rows, cap * sizeof(*q));
		if (!q)
			goto oom;
		tb->rows = q;
		tb->cap = cap;
	}
	if (!(r = calloc(1, sizeof(*r))) || !(r->name = strdup(name))) {
		free(r);
		goto oom;
	}
	r->h = h;
	r->next = head;
	if (d9__map_put(&tb->m, h, r)) {
		free(r->name);
		free(r);
		goto oom;
	}
	tb->rows[tb->n++] = r;
	return r;
oom:
	*oom = 1;
	return NULL;
}

static void table_free(struct dtable *tb)
{
	for (size_t i = 0; i < tb->n; i++) {
		free(tb->rows[i]->name);
		free(tb->rows[i]);
	}
	free(tb->rows);
	d9__map_free(&tb->m);
}

static struct d9__open *open_of(struct dside *s, const struct d9__thread *th)
{
	if (d9__grow(&s->open, &s->nopen, th->idx, sizeof(*s->open))) {
		s->oom = 1;
		return NULL;
	}
	return &s->open[th->idx];
}

static void on_pair(void *ctx, const struct d9__wake_pair *p)
{
	struct dside *s = ctx;

	if (p->result == D9__PAIR_OK)
		d9__hist_add(&s->sched, p->delay_ns);
}

static void diff_on_event(void *ctx, const struct d9__ev *ev)
{
	struct dside *s = ctx;
	struct d9__open *o;
	uint64_t d;

	d9__wakes_event(&s->wakes, ev, 0);
	s->oom |= s->wakes.oom;
	if (!ev->th)
		return;
	if (!s->any || ev->real_ns < s->first_real)
		s->first_real = ev->real_ns;
	if (!s->any || ev->real_ns > s->last_real)
		s->last_real = ev->real_ns;
	s->any = 1;
	switch (ev->type) {
	case D9_EV_POLL_START:
	case D9_EV_UNPARK:
		if ((ev->type == D9_EV_UNPARK) == s->generic && (o = open_of(s, ev->th)))
			d9__pair_open(o, ev);
		break;
	case D9_EV_POLL_END:
	case D9_EV_PARK:
		if ((ev->type == D9_EV_PARK) == s->generic && (o = open_of(s, ev->th)) &&
		    d9__pair_close(o, ev, &d) == D9__PAIR_OK) {
			s->npolls++;
			if (d >= s->min_ns)
				d9__hist_add(&s->polls, d);
			o->open = 0;
		}
		break;
	case D9_EV_CPU_SAMPLE: {
		int src = ev->kind == D9_CPU_ON ? 0 : ev->kind == D9_CPU_OFF ? 1 : -1;
		if (src < 0)
			break;
		if (ev->weight_ns == D9_UNKNOWN) {
			s->unknown++;
			break;
		}
		size_t i = ev->stack ? ev->stack->idx + 1 : 0, n0 = s->nst, n1 = s->nst;
		if (d9__grow(&s->st_ns[0], &n0, i, sizeof(uint64_t)) ||
		    d9__grow(&s->st_ns[1], &n1, i, sizeof(uint64_t))) {
			s->oom = 1;
			break;
		}
		s->nst = n0 < n1 ? n0 : n1; /* the same unless the second grow failed */
		s->st_ns[src][i] += ev->weight_ns;
		break;
	}
	case D9_EV_BLOCKING_CALL: {
		struct drow *r = row_of(s->calls, ev->call ? ev->call : "?", &s->oom);
		if (r) {
			r->v[s->idx][0]++;
			r->v[s->idx][1] += ev->count;
		}
		break;
	}
	default:
		break;
	}
}

/* Adds side s's per-stack CPU time to the function table: self to the innermost function of the
 * innermost frame, total to every function on the stack once per stack (recursion), as summary's
 * hot spots count them. */
static void functions_add(struct dside *s, struct dtable *fns, int *oom)
{
	struct d9__trace *t = &s->t;
	const char *names[D9__MAX_INLINE];
	char buf[64];

	for (size_t i = 0; i < s->nst && i <= t->nstacks; i++) {
		if (!s->st_ns[0][i] && !s->st_ns[1][i])
			continue;
		const struct d9__stack *st = i ? t->stacks[i - 1] : NULL;
		uint32_t nf = st ? st->n : 0;
		for (uint32_t f = 0; f < (nf ? nf : 1); f++) {
			size_t k = 1;
			if (nf)
				k = d9__frame_names(t, st, f, names, D9__MAX_INLINE, buf, sizeof(buf));
			for (size_t j = 0; j < k; j++) {
				const char *fn = nf ? d9__function_of(t, names[j]) : "(no stack)";
				struct drow *r = fn ? row_of(fns, fn, oom) : NULL;
				if (!r)
					return;
				uint64_t *v = r->v[s->idx];
				if (r->mark[s->idx] != i + 1) {
					r->mark[s->idx] = i + 1;
					v[1] += s->st_ns[0][i];
					v[3] += s->st_ns[1][i];
				}
				if (f == 0 && j == 0) {
					v[0] += s->st_ns[0][i];
					v[2] += s->st_ns[1][i];
				}
			}
		}
	}
}

/* Seconds of trace of a side: the span of its events (1 ns at least, so rates stay finite). */
static double seconds(const struct dside *s)
{
	int64_t d = s->any ? s->last_real - s->first_real : 0;

	return (double)(d > 0 ? d : 1) / 1e9;
}

static int per_poll = 1; /* the normalization: 1 per poll, 0 per second (--per) */

/* A normalized time (ns per poll, or ns per second of trace) for people: a duration per poll,
 * a share of one CPU per second. sign: with a '+' or '-' (changes). */
static const char *fmt_norm(char *buf, size_t n, double v, int sign)
{
	if (!per_poll) {
		snprintf(buf, n, sign ? "%+.2f%%" : "%.2f%%", v / 1e7);
		return buf;
	}
	char d[24];
	d9__fmt_dur(d, sizeof(d), (int64_t)llround(fabs(v)));
	snprintf(buf, n, "%s%s", !sign ? "" : v < 0 ? "-" : "+", d);
	return buf;
}

struct dcmp {
	const struct drow *r;
	double key, key2; /* |change| of the ordering value, then of the tie-breaker */
};

static int cmp_dcmp(const void *x, const void *y)
{
	const struct dcmp *a = x, *b = y;

	if (a->key != b->key)
		return a->key > b->key ? -1 : 1;
	if (a->key2 != b->key2)
		return a->key2 > b->key2 ? -1 : 1;
	return strcmp(a->r->name, b->r->name);
}

/* The rows of tb with v[.][c1] or v[.][c2] nonzero, by |change per second| of column c1, then
 * of c2. Returns how many (the array into *out, freed by the caller), -1 out of memory. */
static long order(const struct dtable *tb, const double den[2], int c1, int c2,
	struct dcmp **out)
{
	struct dcmp *a = malloc((tb->n ? tb->n : 1) * sizeof(*a));
	long n = 0;

	*out = a;
	if (!a)
		return -1;
	for (size_t i = 0; i < tb->n; i++) {
		const struct drow *r = tb->rows[i];
		if (!r->v[0][c1] && !r->v[1][c1] && !r->v[0][c2] && !r->v[1][c2])
			continue;
		a[n].r = r;
		a[n].key = fabs((double)r->v[1][c1] / den[1] - (double)r->v[0][c1] / den[0]);
		a[n].key2 = fabs((double)r->v[1][c2] / den[1] - (double)r->v[0][c2] / den[0]);
		n++;
	}
	qsort(a, (size_t)n, sizeof(*a), cmp_dcmp);
	return n;
}

static double ratio(double b, double a)
{
	return a > 0 ? b / a : 0;
}

static const double pcts[4] = { 50, 90, 99, 100 };
static const char *const pct_names[4] = { "p50", "p90", "p99", "max" };

static uint64_t hist_at(struct d9__hist *h, int k)
{
	return k == 3 ? h->max : d9__hist_pct(h, pcts[k]);
}

/* ---- text ------------------------------------------------------------------------------------ */
static void text_hists(FILE *f, const char *what, struct d9__hist *a, struct d9__hist *b)
{
	char x[32], y[32];

	fprintf(f, "\n%s (A %" PRIu64 ", B %" PRIu64 "):\n", what, a->n, b->n);
	if (!a->n || !b->n) {
		fprintf(f, "  (none on %s)\n", !a->n && !b->n ? "either side" : !a->n ? "A" : "B");
		return;
	}
	for (int k = 0; k < 4; k++) {
		uint64_t va = hist_at(a, k), vb = hist_at(b, k);
		fprintf(f, "  %-4s %10s %10s", pct_names[k], d9__fmt_dur(x, sizeof(x), (int64_t)va),
			d9__fmt_dur(y, sizeof(y), (int64_t)vb));
		if (va)
			fprintf(f, "  x%.2f\n", ratio((double)vb, (double)va));
		else
			fputc('\n', f);
	}
}

static void text_functions(FILE *f, const char *what, const struct dtable *fns,
	const double den[2], int c, long top)
{
	struct dcmp *a;
	long n = order(fns, den, c, c + 1, &a);
	char p[6][32];

	fprintf(f, "\n%s time %s, largest change of self first:\n"
		"  %9s %9s %9s  %9s %9s %9s  %s\n", what,
		per_poll ? "per poll" : "per second of trace (% of one CPU)", "self A", "self B",
		"change", "total A", "total B", "change", "function");
	for (long i = 0; i < n && i < top; i++) {
		const uint64_t *va = a[i].r->v[0], *vb = a[i].r->v[1];
		double sa = (double)va[c] / den[0], sb = (double)vb[c] / den[1];
		double ta = (double)va[c + 1] / den[0], tb = (double)vb[c + 1] / den[1];
		fprintf(f, "  %9s %9s %9s  %9s %9s %9s  %s\n", fmt_norm(p[0], 32, sa, 0),
			fmt_norm(p[1], 32, sb, 0), fmt_norm(p[2], 32, sb - sa, 1),
			fmt_norm(p[3], 32, ta, 0), fmt_norm(p[4], 32, tb, 0),
			fmt_norm(p[5], 32, tb - ta, 1), a[i].r->name);
	}
	if (!n)
		fprintf(f, "  (no samples with their time)\n");
	free(a);
}

static void text_calls(FILE *f, const struct dtable *calls, const double den[2], long top)
{
	struct dcmp *a;
	long n = order(calls, den, 1, 0, &a);
	char p[4][32];
	const char *u = per_poll ? "/poll" : "/s";

	fprintf(f, "\nblocking calls, largest change of time %s first:\n"
		"  %9s%-2s %9s%-2s %9s %9s %9s%-2s %9s%-2s  %s\n", per_poll ? "per poll" : "per second",
		"calls", u, "calls", u, "mean A", "mean B", "time", u, "time", u, "call");
	for (long i = 0; i < n && i < top; i++) {
		const uint64_t *va = a[i].r->v[0], *vb = a[i].r->v[1];
		fprintf(f, "  %9.3f A %9.3f B %9s %9s %9s A %9s B  %s\n", (double)va[0] / den[0],
			(double)vb[0] / den[1],
			va[0] ? d9__fmt_dur(p[0], 32, (int64_t)(va[1] / va[0])) : "-",
			vb[0] ? d9__fmt_dur(p[1], 32, (int64_t)(vb[1] / vb[0])) : "-",
			fmt_norm(p[2], 32, (double)va[1] / den[0], 0),
			fmt_norm(p[3], 32, (double)vb[1] / den[1], 0), a[i].r->name);
	}
	if (!n)
		fprintf(f, "  (none)\n");
	free(a);
}

/* ---- JSON ------------------------------------------------------------------------------------ */
static void json_side(FILE *f, struct dside *s)
{
	fputs("{\"input\":", f);
	d9__json_cstr(f, s->what);
	fprintf(f, ",\"duration_ns\":%" PRId64 ",\"mode\":\"%s\",\"samples_without_time\":%" PRIu64
		",\"complete_polls\":%" PRIu64, s->any ? s->last_real - s->first_real : 0,
		s->generic ? "generic" : "coroutine", s->unknown, s->npolls);
	struct d9__hist *h[2] = { &s->polls, &s->sched };
	const char *hn[2] = { "polls", "sched_delay" };
	for (int i = 0; i < 2; i++) {
		fprintf(f, ",\"%s\":{\"count\":%" PRIu64, hn[i], h[i]->n);
		for (int k = 0; k < 4; k++)
			fprintf(f, ",\"%s_ns\":%" PRIu64, pct_names[k], hist_at(h[i], k));
		fputc('}', f);
	}
	fputc('}', f);
}

static void json_ratios(FILE *f, const char *name, struct d9__hist *a, struct d9__hist *b,
	int first)
{
	fprintf(f, "%s\"%s\":{", first ? "" : ",", name);
	for (int k = 0; k < 4; k++)
		fprintf(f, "%s\"%s\":%.4f", k ? "," : "", pct_names[k],
			ratio((double)hist_at(b, k), (double)hist_at(a, k)));
	fputc('}', f);
}

static void json_functions(FILE *f, const char *key, const struct dtable *fns,
	const double den[2], int c, long top)
{
	struct dcmp *a;
	long n = order(fns, den, c, c + 1, &a);

	fprintf(f, ",\"%s\":[", key);
	for (long i = 0; i < n && i < top; i++) {
		const uint64_t *va = a[i].r->v[0], *vb = a[i].r->v[1];
		double sa = (double)va[c] / den[0], sb = (double)vb[c] / den[1];
		double ta = (double)va[c + 1] / den[0], tb = (double)vb[c + 1] / den[1];
		fprintf(f, "%s{\"function\":", i ? "," : "");
		d9__json_cstr(f, a[i].r->name);
		fprintf(f, ",\"self_ns_a\":%" PRIu64 ",\"self_ns_b\":%" PRIu64 ",\"total_ns_a\":%"
			PRIu64 ",\"total_ns_b\":%" PRIu64 ",\"self_a\":%.1f,\"self_b\":%.1f,"
			"\"self_change\":%.1f,\"total_a\":%.1f,\"total_b\":%.1f,\"total_change\":%.1f}", va[c], vb[c], va[c + 1], vb[c + 1], sa, sb, sb - sa,
			ta, tb, tb - ta);
	}
	fputc(']', f);
	free(a);
}

static void json_calls(FILE *f, const struct dtable *calls, const double den[2], long top)
{
	struct dcmp *a;
	long n = order(calls, den, 1, 0, &a);

	fputs(",\"blocking\":[", f);
	for (long i = 0; i < n && i < top; i++) {
		const uint64_t *va = a[i].r->v[0], *vb = a[i].r->v[1];
		fprintf(f, "%s{\"call\":", i ? "," : "");
		d9__json_cstr(f, a[i].r->name);
		fprintf(f, ",\"count_a\":%" PRIu64 ",\"count_b\":%" PRIu64 ",\"total_ns_a\":%" PRIu64
			",\"total_ns_b\":%" PRIu64 ",\"mean_ns_a\":%" PRIu64 ",\"mean_ns_b\":%" PRIu64
			",\"count_norm_a\":%.4f,\"count_norm_b\":%.4f,\"time_a\":%.1f,\"time_b\":%.1f,"
			"\"time_change\":%.1f}", va[0], vb[0], va[1], vb[1], va[0] ? va[1] / va[0] : 0,
			vb[0] ? vb[1] / vb[0] : 0, (double)va[0] / den[0], (double)vb[0] / den[1],
			(double)va[1] / den[0], (double)vb[1] / den[1],
			(double)vb[1] / den[1] - (double)va[1] / den[0]);
	}
	fputc(']', f);
	free(a);
}

/* ---- folded ---------------------------------------------------------------------------------- */
/* Adds side s's stacks of source src (0 on, 1 off; 2 both) to tb as folded lines. */
static void folded_add(struct dside *s, struct dtable *tb, int src, int *oom)
{
	for (size_t i = 0; i < s->nst && i <= s->t.nstacks && !*oom; i++) {
		uint64_t ns = src == 2 ? s->st_ns[0][i] + s->st_ns[1][i] : s->st_ns[src][i];
		if (!ns)
			continue;
		char *line = d9__fold_stack(&s->t, NULL, i ? s->t.stacks[i - 1] : NULL, NULL);
		struct drow *r = line ? row_of(tb, line, oom) : NULL;
		free(line);
		if (!r) {
			*oom = 1;
			return;
		}
		r->v[s->idx][0] += ns;
	}
}

static int cmp_name(const void *x, const void *y)
{
	return strcmp((*(struct drow *const *)x)->name, (*(struct drow *const *)y)->name);
}

static void print_folded(struct dtable *tb)
{
	qsort(tb->rows, tb->n, sizeof(*tb->rows), cmp_name);
	for (size_t i = 0; i < tb->n; i++) {
		uint64_t a = (tb->rows[i]->v[0][0] + 500) / 1000, b = (tb->rows[i]->v[1][0] + 500) / 1000;
		if (a || b)
			printf("%s %" PRIu64 " %" PRIu64 "\n", tb->rows[i]->name, a, b);
	}
}

/* ---- --html: viewer/diff.html with diff.js and the data inlined ------------------------------- */
struct d9__viewer_file {
	const char *name;
	const unsigned char *data;
	size_t len;
};
extern const struct d9__viewer_file d9__viewer_files[]; /* build/gen/viewer-files.c */
extern const size_t d9__viewer_nfiles;

static const struct d9__viewer_file *viewer_file(const char *name)
{
	for (size_t i = 0; i < d9__viewer_nfiles; i++)
		if (!strcmp(d9__viewer_files[i].name, name))
			return &d9__viewer_files[i];
	return NULL;
}

/* A JSON string that is safe inside a <script> element: '<', '>' and '&' as \u escapes. */
static void html_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == '<' || c == '>' || c == '&')
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static int is_line(const char *s, const char *le, const char *want)
{
	while (s < le && (*s == ' ' || *s == '\t'))
		s++;
	while (le > s && (le[-1] == '\n' || le[-1] == '\r' || le[-1] == ' '))
		le--;
	return (size_t)(le - s) == strlen(want) && !memcmp(s, want, (size_t)(le - s));
}

/* Writes the page: diff.html line by line, its diff.js script tag replaced by the script and
 * its data marker by the folded lines as JSON. Returns 0, or -1 when the viewer files are not
 * in this build (said). */
static int write_html(FILE *f, struct dtable *tb, char *what[2], int src, const uint64_t polls[2])
{
	static const char *const srcs[3] = { "on", "off", "both" };
	const struct d9__viewer_file *page = viewer_file("diff.html"), *js = viewer_file("diff.js");

	if (!page || !js || memmem(js->data, js->len, "</script", 8)) {
		fprintf(stderr, "d9-analyze: diff: this build has no embeddable viewer/diff.html\n");
		return -1;
	}
	qsort(tb->rows, tb->n, sizeof(*tb->rows), cmp_name);
	const char *p = (const char *)page->data, *end = p + page->len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl + 1 : end;
		if (is_line(p, le, "<script src=\"diff.js\"></script>")) {
			fputs("<script>\n", f);
			fwrite(js->data, 1, js->len, f);
			fputs("</script>\n", f);
		} else if (is_line(p, le, "<!-- d9diff data -->")) {
			fputs("<script type=\"application/json\" id=\"d9diff\">{\"a\":", f);
			html_json_str(f, what[0]);
			fputs(",\"b\":", f);
			html_json_str(f, what[1]);
			fprintf(f, ",\"unit\":\"us\",\"src\":\"%s\",\"polls_a\":%" PRIu64 ",\"polls_b\":%"
				PRIu64 ",\"lines\":[", srcs[src], polls[0], polls[1]);
			size_t k = 0;
			for (size_t i = 0; i < tb->n; i++) {
				uint64_t a = (tb->rows[i]->v[0][0] + 500) / 1000;
				uint64_t b = (tb->rows[i]->v[1][0] + 500) / 1000;
				if (!a && !b)
					continue;
				fputs(k++ ? ",[" : "[", f);
				html_json_str(f, tb->rows[i]->name);
				fprintf(f, ",%" PRIu64 ",%" PRIu64 "]", a, b);
			}
			fputs("]}</script>\n", f);
		} else {
			fwrite(p, 1, (size_t)(le - p), f);
		}
		p = le;
	}
	return 0;
}

static void diff_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze diff [OPTIONS] A B\n"
		"       d9-analyze diff [OPTIONS] A... --vs B...\n"
		"       d9-analyze diff [OPTIONS] --a-from WHEN --a-to WHEN --b-from WHEN --b-to WHEN TRACE...\n\n"
		"Compares two trace sets (A: before, B: after), or two time ranges of one trace set:\n"
		"on- and off-CPU time per function (self and total), poll durations and scheduling\n"
		"delays (p50, p90, p99, max), blocking calls (calls, mean time per call), the largest\n"
		"changes first. Sums are normalized so traces of different lengths compare: per poll\n"
		"(default; loop turns in generic mode), or with --per second per second of trace (the\n"
		"span of each side's events, shown as a %% of one CPU).\n\n"
		"options:\n"
		"  --json                 one JSON object instead of text (README.md, \"diff\")\n"
		"  --folded               a differential flame graph: 'stack usA usB' lines (the\n"
		"                         input of flamegraph.pl; B minus A colours the frames)\n"
		"  --html                 the differential flame graph as one self-contained HTML\n"
		"                         page (viewer/diff.html with the data inside)\n"
		"  -o FILE                write to FILE instead of stdout\n"
		"  --cpu on|off|both      the samples of --folded and --html (default on)\n"
		"  --per poll|second      normalize sums per poll (default) or per second of trace\n"
		"  --min DURATION         poll percentiles of polls at least this long only (the\n"
		"                         short polls of a request can hide its slow one in p50)\n"
		"  --top N                rows per table (default %d)\n"
		"  --vs                   ends A's inputs, B's follow\n"
		"  --a-from, --a-to, --b-from, --b-to WHEN\n"
		"                         the two ranges of one trace set (WHEN as in 'summary --help';\n"
		"                         a missing end is the trace's)\n"
		"  -h, --help             this text\n\n"
		"exit status: 0 ok, 2 usage, 3 a side has no readable trace, 4 some input damaged\n",
		DIFF_TOP);
}

/* --a-from, --a-to, --b-from, --b-to: the windows of the two sides. Returns as d9__opt does
 * (-1 also for a bad time, said). */
static int range_opt(int argc, char **argv, int *i, struct dside sd[2])
{
	static const char *const names[4] = { "--a-from", "--a-to", "--b-from", "--b-to" };
	const char *v;

	for (int k = 0; k < 4; k++) {
		int r = d9__opt(argc, argv, i, names[k], &v);
		if (r != 1) {
			if (r < 0)
				return r;
			continue;
		}
		struct d9__when *w = k & 1 ? &sd[k / 2].t.to : &sd[k / 2].t.from;
		if (d9__parse_when(v, w)) {
			fprintf(stderr, "d9-analyze: %s: bad time '%s'\n", names[k], v);
			return -1;
		}
		return 1;
	}
	return 0;
}

/* "a b c" of the side's arguments, for the header (malloc'd; NULL when out of memory). */
static char *join(char **args, int n)
{
	size_t len = 1;

	for (int i = 0; i < n; i++)
		len += strlen(args[i]) + 1;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	*s = 0;
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? " " : "", args[i]);
	return s;
}

int d9__cmd_diff(int argc, char **argv)
{
	struct dside sd[2];
	struct dtable calls = { 0 }, fns = { 0 }, folded = { 0 };
	int json = 0, fold = 0, fold_src = 0, vs = -1, ranges = 0, nargs = 0, rc = D9_EXIT_USAGE;
	int oom = 0, opened = 0, html = 0;
	long top = DIFF_TOP;
	const char *v, *out = NULL;
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	char *what[2] = { NULL, NULL };

	if (!args)
		return D9_EXIT_USAGE;
	per_poll = 1;
	memset(sd, 0, sizeof(sd));
	for (int i = 1; i < argc; i++) {
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			diff_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--folded")) {
			fold = 1;
		} else if (!strcmp(argv[i], "--html")) {
			html = 1;
		} else if ((r = d9__opt(argc, argv, &i, "-o", &v)) == 1) {
			out = v;
		} else if (!strcmp(argv[i], "--vs")) {
			if (vs >= 0) {
				fprintf(stderr, "d9-analyze: diff: --vs given twice\n");
				goto usage;
			}
			vs = nargs;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--cpu", &v)) == 1) {
			fold_src = !strcmp(v, "on") ? 0 : !strcmp(v, "off") ? 1 : !strcmp(v, "both") ? 2 : -1;
			if (fold_src < 0) {
				fprintf(stderr, "d9-analyze: --cpu: want on, off or both, not '%s'\n", v);
				goto usage;
			}
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--per", &v)) == 1) {
			per_poll = !strcmp(v, "poll") ? 1 : !strcmp(v, "second") ? 0 : -1;
			if (per_poll < 0) {
				fprintf(stderr, "d9-analyze: --per: want poll or second, not '%s'\n", v);
				goto usage;
			}
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--min", &v)) == 1) {
			int64_t ns;
			if (d9__parse_duration(v, &ns) || ns < 0) {
				fprintf(stderr, "d9-analyze: --min: bad duration '%s'\n", v);
				goto usage;
			}
			sd[0].min_ns = sd[1].min_ns = (uint64_t)ns;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--top", &v)) == 1) {
			char *end;
			top = strtol(v, &end, 10);
			if (*end || top <= 0) {
				fprintf(stderr, "d9-analyze: --top: want a positive number, not '%s'\n", v);
				goto usage;
			}
		} else if (r == 0 && (r = range_opt(argc, argv, &i, sd)) == 1) {
			ranges = 1;
		} else if (r == 0 && d9__opt_arg("diff", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (json + fold + html > 1) {
		fprintf(stderr, "d9-analyze: diff: one of --json, --folded, --html\n");
		goto usage;
	}
	fold |= html; /* the page holds the folded lines */
	/* the two sides' inputs: [0, na) and [nb0, nargs) of args */
	int na, nb0;
	if (ranges) {
		if (vs >= 0) {
			fprintf(stderr, "d9-analyze: diff: time ranges compare one trace set: no --vs\n");
			goto usage;
		}
		na = nargs;
		nb0 = 0;
	} else if (vs >= 0) {
		na = vs;
		nb0 = vs;
	} else if (nargs == 2) {
		na = 1;
		nb0 = 1;
	} else {
		fprintf(stderr, "d9-analyze: diff: want two inputs A B, 'A... --vs B...', or time "
			"ranges (--a-from ...)\n");
		goto usage;
	}
	if (!na || nb0 == nargs) {
		fprintf(stderr, "d9-analyze: diff: %s has no input\n", na ? "B" : "A");
		goto usage;
	}
	if (out && !freopen(out, "w", stdout)) {
		fprintf(stderr, "d9-analyze: diff: cannot open %s: %s\n", out, strerror(errno));
		free(args);
		return D9_EXIT_NO_TRACE;
	}
	if (html && !out && isatty(1)) {
		fprintf(stderr, "d9-analyze: diff: --html writes a page: give -o FILE or redirect "
			"stdout\n");
		goto usage;
	}
	for (int k = 0; k < 2; k++) {
		int from = k ? nb0 : 0, n = k ? nargs - nb0 : na;
		char **a = calloc((size_t)n + 1, sizeof(*a));
		if (!a || !(what[k] = join(args + from, n))) {
			free(a);
			oom = 1;
			break;
		}
		memcpy(a, args + from, (size_t)n * sizeof(*a));
		sd[k].idx = k;
		sd[k].calls = &calls;
		sd[k].what = what[k];
		d9__wakes_init(&sd[k].wakes, on_pair, &sd[k]);
		if ((rc = d9__trace_start(&sd[k].t, a, n)) != 0) {
			fprintf(stderr, "d9-analyze: diff: side %c (%s) has no readable trace\n",
				'A' + k, what[k]);
			goto out;
		}
		opened = k + 1;
		if ((sd[k].generic = d9__trace_generic(&sd[k].t)) < 0 ||
		    d9__trace_run(&sd[k].t, diff_on_event, &sd[k]) || sd[k].oom) {
			oom = 1;
			break;
		}
	}
	free(args);
	args = NULL;
	double sec[2] = { seconds(&sd[0]), seconds(&sd[1]) }, den[2];
	if (per_poll && !oom && !fold && (!sd[0].npolls || !sd[1].npolls)) {
		fprintf(stderr, "d9-analyze: diff: side %c has no complete poll: times are per "
			"second of trace\n", sd[0].npolls ? 'B' : 'A');
		per_poll = 0;
	}
	for (int k = 0; k < 2; k++)
		den[k] = per_poll ? (double)sd[k].npolls : sec[k];
	if (!oom && fold) {
		for (int k = 0; k < 2; k++)
			folded_add(&sd[k], &folded, fold_src, &oom);
		if (!oom && !html)
			print_folded(&folded);
		else if (!oom && write_html(stdout, &folded, what, fold_src,
				 (uint64_t[2]){ sd[0].npolls, sd[1].npolls }))
			html = -1;
	} else if (!oom) {
		for (int k = 0; k < 2; k++)
			functions_add(&sd[k], &fns, &oom);
	}
	if (!oom && !fold && json) {
		fputs("{\"a\":", stdout);
		json_side(stdout, &sd[0]);
		fputs(",\"b\":", stdout);
		json_side(stdout, &sd[1]);
		printf(",\"normalized\":\"%s\",\"ratios\":{", per_poll ? "per_poll" : "per_second");
		json_ratios(stdout, "polls", &sd[0].polls, &sd[1].polls, 1);
		json_ratios(stdout, "sched_delay", &sd[0].sched, &sd[1].sched, 0);
		fputc('}', stdout);
		json_functions(stdout, "cpu", &fns, den, 0, top);
		json_functions(stdout, "offcpu", &fns, den, 2, top);
		json_calls(stdout, &calls, den, top);
		fputs("}\n", stdout);
	} else if (!oom && !fold) {
		char x[32], y[32];
		printf("A: %s (%s of trace)\nB: %s (%s of trace)\n", what[0],
			d9__fmt_dur(x, sizeof(x), (int64_t)(sec[0] * 1e9)), what[1],
			d9__fmt_dur(y, sizeof(y), (int64_t)(sec[1] * 1e9)));
		if (sd[0].generic != sd[1].generic)
			printf("note: A is in %s mode, B in %s mode: 'polls' are not the same thing\n",
				sd[0].generic ? "generic" : "coroutine",
				sd[1].generic ? "generic" : "coroutine");
		text_hists(stdout, sd[0].generic ? "loop turns" : "polls", &sd[0].polls, &sd[1].polls);
		text_hists(stdout, "scheduling delay", &sd[0].sched, &sd[1].sched);
		text_functions(stdout, "on-CPU", &fns, den, 0, top);
		text_functions(stdout, "off-CPU", &fns, den, 2, top);
		text_calls(stdout, &calls, den, top);
	}
	for (int k = 0; k < 2; k++)
		if (sd[k].unknown)
			fprintf(stderr, "d9-analyze: diff: side %c: %" PRIu64 " CPU sample(s) of unknown "
				"duration left out\n", 'A' + k, sd[k].unknown);
	if (oom)
		fprintf(stderr, "d9-analyze: out of memory: the output is incomplete\n");
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "d9-analyze: diff: writing the output failed\n");
		html = -1;
	}
	rc = d9__trace_exit_code(&sd[0].t);
	if (rc == D9_EXIT_OK)
		rc = d9__trace_exit_code(&sd[1].t);
	if (html < 0 || oom)
		rc = D9_EXIT_NO_TRACE;
out:
	for (int k = 0; k < 2; k++) {
		if (k < opened)
			d9__trace_close(&sd[k].t);
		d9__wakes_free(&sd[k].wakes);
		d9__hist_free(&sd[k].polls);
		d9__hist_free(&sd[k].sched);
		free(sd[k].st_ns[0]);
		free(sd[k].st_ns[1]);
		free(sd[k].open);
		free(what[k]);
	}
	table_free(&calls);
	table_free(&fns);
	table_free(&folded);
	free(args);
	return rc;
usage:
	free(args);
	diff_help(stderr);
	return D9_EXIT_USAGE;
}
