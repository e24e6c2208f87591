/* cmd-check.c: `d9-analyze check`, the diagnosis: one pass over the trace with summary's
 * accumulator (summary.h), plus the timer lateness only check measures, then findings in plain
 * words ordered by severity and impact (the time a problem cost per second of trace), each with
 * the numbers behind it and the command line to run next. It judges, it never computes what
 * summary already does. Findings, thresholds and exit statuses: README.md, "### check". */
#include "analyze.h"
#include "d9-format.h"
#include "json.h"
#include "summary.h"
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FINDINGS 16
#define MAX_NUMS 14
#define LONG_KEPT 10000 /* longest polls kept to judge hogs: past it, totals are "at least" */
#define NEXT_LEN 768

enum { SEV_INFO = 0, SEV_WARNING = 1, SEV_SERIOUS = 2 };
/* exit statuses of check, besides D9_EXIT_USAGE and D9_EXIT_NO_TRACE (README.md) */
enum { CHECK_EXIT_WARNING = 1, CHECK_EXIT_SERIOUS = 5 };

static const char *const sev_names[] = { "info", "warning", "serious" };

/* One number behind a finding: a duration (ns), a count, a percentage or a name. */
struct num {
	const char *key;
	char type; /* 'n' ns, 'c' count, 'p' percent, 's' string */
	uint64_t u;
	double d;
	const char *s;
};

struct finding {
	const char *kind;
	int severity;
	int data; /* about the data, not the server: after the time findings of its severity */
	int follows_hog; /* a consequence of the hog finding (its cause): listed right after it */
	uint64_t cost_ns; /* the time it cost over the whole trace (0 for data findings) */
	uint64_t impact_ns; /* cost_ns per second of trace */
	char title[320];
	struct num nums[MAX_NUMS];
	size_t nnums;
	const struct d9__stack *stack; /* where: the stack to look at, NULL for none */
	char next[NEXT_LEN]; /* a command line, nothing else: scripts may run it */
	char hint[240]; /* advice in words, "" for none */
};

struct check {
	struct sum s;
	struct d9__trace *t;
	/* thresholds (README.md) */
	int64_t hog_ns, delay_ns, late_ns;
	double warn_pct, serious_pct;
	double preempt_pct; /* preemption: workers' wait in % of their time for a warning */
	/* late timers: loop waits that timed out late, coroutine timers that woke late */
	int64_t *park_timeout_us; /* by thread idx: the open Park's timeout, -1 none */
	size_t npark;
	uint64_t late_waits, late_waits_ns, late_waits_max;
	/* of late_waits_ns, what the late Unparks' own run delay explains (sched_wait_ns, when they
	 * carry it): a parked thread is made late by the kernel, never by a long poll */
	uint64_t late_waits_pre_ns;
	uint64_t late_timers, late_timers_ns, late_timers_max;
	int64_t trace_ns;
	uint64_t hog_total; /* find_hogs: the hogs' time, and where most of it was */
	const char *hog_where;
	uint64_t w_wait, w_busy, w_span, w_known; /* worker_totals */
	uint64_t hog_preempted; /* the workers' wait inside the hogs (estimated): the hogs' cost */
	int hog_severity;
	uint64_t hog_impact;
	char traces[NEXT_LEN / 2]; /* the TRACE arguments, for the "next" command lines */
	struct finding f[MAX_FINDINGS];
	size_t nf;
	int oom;
	int cpu_off; /* a RecorderState says CPU samples were off */
};

/* ---- the pass -------------------------------------------------------------------------------- */
static void late_add(uint64_t *n, uint64_t *total, uint64_t *max, uint64_t late)
{
	(*n)++;
	*total += late;
	if (late > *max)
		*max = late;
}

/* Timer lateness that summary does not measure: a loop wait (Park with a timeout) that timed
 * out (Unpark ready 0: no I/O woke it) later than its timeout, and a coroutine timer (Wake of
 * kind timer) delivered later than its deadline. Runs before d9__sum_event, so the thread's
 * Park is still open in summary's state at its Unpark. */
static void late_event(struct check *c, const struct d9__ev *ev)
{
	size_t i = ev->th ? ev->th->idx : 0;

	if (ev->type == D9_EV_WAKE && ev->kind == D9_WAKE_TIMER && ev->ns - ev->deadline_ns >=
	    c->late_ns)
		late_add(&c->late_timers, &c->late_timers_ns, &c->late_timers_max,
			(uint64_t)(ev->ns - ev->deadline_ns));
	if (ev->type != D9_EV_PARK && ev->type != D9_EV_UNPARK)
		return;
	if (i >= c->npark) {
		size_t n = i + 1 > c->npark * 2 ? i + 1 : c->npark * 2;
		int64_t *a = realloc(c->park_timeout_us, n * sizeof(*a));
		if (!a) {
			c->oom = 1;
			return;
		}
		for (size_t k = c->npark; k < n; k++)
			a[k] = -1;
		c->park_timeout_us = a;
		c->npark = n;
	}
	if (ev->type == D9_EV_PARK) {
		c->park_timeout_us[i] = ev->value;
		return;
	}
	int64_t to = c->park_timeout_us[i];
	c->park_timeout_us[i] = -1;
	struct wstat *w = i < c->s.nws ? c->s.ws[i] : NULL;
	if (to <= 0 || ev->value != 0 || !w)
		return;
	struct d9__open park = w->park; /* a copy: summary closes its own */
	uint64_t d;
	if (d9__pair_close(&park, ev, &d) != D9__PAIR_OK)
		return;
	uint64_t due = (uint64_t)to * 1000;
	if (d >= due && d - due >= (uint64_t)c->late_ns) {
		uint64_t late = d - due, wait = ev->raw ? ev->raw->f[D9_F_UNPARK_SCHED_WAIT_NS] :
			D9_UNKNOWN;
		late_add(&c->late_waits, &c->late_waits_ns, &c->late_waits_max, late);
		if (wait != D9_UNKNOWN)
			c->late_waits_pre_ns += wait < late ? wait : late;
	}
}

static void check_event(void *ctx, const struct d9__ev *ev)
{
	struct check *c = ctx;

	if (ev->th)
		late_event(c, ev);
	d9__sum_event(&c->s, ev);
}

/* ---- findings -------------------------------------------------------------------------------- */
static struct finding *add_finding(struct check *c, const char *kind, int data)
{
	if (c->nf == MAX_FINDINGS)
		return NULL;
	struct finding *f = &c->f[c->nf++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->data = data;
	return f;
}

static void num_add(struct finding *f, const char *key, char type, uint64_t u, double d,
	const char *s)
{
	if (f->nnums < MAX_NUMS)
		f->nums[f->nnums++] = (struct num){ key, type, u, d, s };
}
#define NUM_NS(f, k, v) num_add(f, k, 'n', (uint64_t)(v), 0, NULL)
#define NUM_COUNT(f, k, v) num_add(f, k, 'c', (uint64_t)(v), 0, NULL)
#define NUM_PCT(f, k, v) num_add(f, k, 'p', 0, v, NULL)
#define NUM_STR(f, k, v) num_add(f, k, 's', 0, 0, v)

static double share_pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* A time finding's impact and severity from what it cost over the trace. */
static void set_cost(struct check *c, struct finding *f, uint64_t cost_ns)
{
	double pct = share_pct(cost_ns, (uint64_t)c->trace_ns);

	f->cost_ns = cost_ns;
	f->impact_ns = (uint64_t)((double)cost_ns * 1e9 / (double)c->trace_ns);
	f->severity = pct >= c->serious_pct ? SEV_SERIOUS : pct >= c->warn_pct ? SEV_WARNING :
		SEV_INFO;
	NUM_NS(f, "total_ns", cost_ns);
	NUM_PCT(f, "share_of_trace_pct", pct);
}

#define D(buf, v) d9__fmt_dur(buf, sizeof(buf), (int64_t)(v))

static void set_next(struct check *c, struct finding *f, const char *cmd)
{
	snprintf(f->next, sizeof(f->next), "d9-analyze %s %s", cmd, c->traces);
}

/* The share of a worker's runnable time it was on CPU (1 when unknown): Unpark's cpu_ns over
 * cpu_ns + sched_wait_ns, summed over the worker's readings. */
static double on_cpu_share(const struct sum *s, const struct d9__thread *th)
{
	const struct wstat *w = th->idx < s->nws ? s->ws[th->idx] : NULL;

	if (!w || !w->stat_unparks || !(w->park_cpu_ns + w->sched_wait_ns))
		return 1.0;
	return (double)w->park_cpu_ns / (double)(w->park_cpu_ns + w->sched_wait_ns);
}

/* Polls (loop turns) that ran at least hog_ns on CPU: their time minus their blocking calls
 * (those are the blocking finding's), times the share of its runnable time their worker was on
 * CPU when the trace measures it, so a poll stretched by preemption alone is not a hog (a
 * handler that runs long, not a machine that is busy). A loop turn whose CPU time the trace
 * tells (cpu_max: the schedstat delta of the Unpark after it covers it) counts that, at most:
 * a turn spent waiting where d9 sees no wait (Apache prefork's blocking accept after the poll
 * woke every worker) or preempted is no hog, whatever the worker's share over the trace. What a hog cost is its whole time
 * without the blocking calls: every other coroutine of the worker waited that long; the
 * preemption inside it is counted here and left out of sched_delay's. */
static void find_hogs(struct check *c)
{
	struct sum *s = &c->s;
	int gen = d9__sum_generic(s);
	struct long_poll *lp = gen ? s->lt : s->lp;
	size_t nlp = gen ? s->nlt : s->nlp, n = 0, top = 0;
	uint64_t total = 0, cpu_ns = 0, samples = 0, preempted = 0;
	int weighed = 1, guessed = 0; /* guessed: a hog whose CPU time the trace does not tell */
	const struct long_poll *longest = NULL;
	/* the location with the most hog time: few distinct ones, a linear scan is enough */
	const struct d9__loc *locs[32];
	uint64_t loc_ns[32];
	size_t nlocs = 0;

	qsort(lp, nlp, sizeof(*lp), d9__sum_cmp_long);
	for (size_t i = 0; i < nlp; i++) {
		uint64_t own = lp[i].dur > lp[i].b.ns ? lp[i].dur - lp[i].b.ns : 0;
		/* a loop turn's own CPU time when the trace tells it (at most its Unpark's
		 * schedstat delta); else the worker's share */
		uint64_t on = lp[i].cpu_max != UINT64_MAX ? (lp[i].cpu_max < own ? lp[i].cpu_max : own) :
			(uint64_t)((double)own * on_cpu_share(s, lp[i].th));
		if (on < (uint64_t)c->hog_ns)
			continue;
		const struct wstat *w = lp[i].th->idx < s->nws ? s->ws[lp[i].th->idx] : NULL;
		guessed |= lp[i].cpu_max == UINT64_MAX && (!w || !w->stat_unparks) && !lp[i].cpu_on;
		n++;
		total += own;
		/* off CPU: runnable (preempted) as far as the trace tells, the rest a wait unseen */
		preempted += lp[i].cpu_max != UINT64_MAX && lp[i].wait_max < own - on ? lp[i].wait_max :
			own - on;
		cpu_ns += lp[i].on_ns;
		samples += lp[i].cpu_on;
		weighed &= lp[i].weighed || !lp[i].cpu_on;
		if (!longest)
			longest = &lp[i];
		size_t k = 0;
		while (k < nlocs && locs[k] != lp[i].loc)
			k++;
		if (k == nlocs && nlocs < 32) {
			locs[nlocs] = lp[i].loc;
			loc_ns[nlocs++] = 0;
		}
		if (k < nlocs) {
			loc_ns[k] += own;
			if (loc_ns[k] > loc_ns[top])
				top = k;
		}
	}
	if (!n)
		return;
	struct finding *f = add_finding(c, "hog", 0);
	if (!f)
		return;
	const char *unit = gen ? "loop turn" : "poll";
	const char *where = nlocs && locs[top] ? locs[top]->name : gen ? "(loop turn)" : "(unknown)";
	char a[32], b[32], d[32];
	set_cost(c, f, total);
	c->hog_total = total;
	c->hog_preempted = preempted;
	c->hog_where = where;
	c->hog_severity = f->severity;
	c->hog_impact = f->impact_ns;
	char pre[96] = "";
	if (guessed)
		/* no schedstat (a chroot without /proc, a kernel without it) and no CPU sample:
		 * the time is the poll's, its CPU share unknown */
		snprintf(pre, sizeof(pre), "CPU time unknown (no schedstat): taken as all on CPU; ");
	else if (preempted >= total / 10)
		snprintf(pre, sizeof(pre), "%s of it waiting for a CPU; ", D(a, preempted));
	snprintf(f->title, sizeof(f->title), "%s%" PRIu64 " %s%s of at least %s on CPU held a worker "
		"for %s in all (%slongest %s), mostly at %s", nlp == LONG_KEPT ? "at least " : "", n,
		unit, n == 1 ? "" : "s", D(a, c->hog_ns), D(b, total), pre, D(d, longest->dur), where);
	NUM_COUNT(f, gen ? "loop_turns" : "polls", n);
	NUM_NS(f, "preempted_ns", preempted); /* estimated: the workers' wait share */
	NUM_COUNT(f, "cpu_unknown", guessed); /* 1: a hog's CPU time is not in the trace */
	NUM_NS(f, "longest_ns", longest->dur);
	NUM_STR(f, "location", where);
	NUM_COUNT(f, "worker", longest->th->worker);
	NUM_COUNT(f, "pid", longest->th->proc->pid);
	NUM_COUNT(f, "cpu_samples", samples);
	if (samples && weighed)
		NUM_NS(f, "cpu_ns", cpu_ns);
	f->stack = longest->nhot ? longest->hot[0].stack : NULL;
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "polls --min %s", D(a, c->hog_ns));
	if (longest->nhot && longest->hot[0].stack)
		snprintf(cmd, sizeof(cmd), "flame --long-polls %s", D(a, c->hog_ns));
	set_next(c, f, cmd);
	if (!longest->nhot)
		snprintf(f->hint, sizeof(f->hint), "no CPU sample in the longest: record with "
			"D9_CPU_PROFILE=1 to see where its time went");
}

/* Blocking calls, by call and stack (summary's groups): the group with the most time names it. */
static void find_blocking(struct check *c)
{
	struct sum *s = &c->s;
	uint64_t total = 0, calls = 0;

	if (!s->nbl)
		return;
	qsort(s->bl, s->nbl, sizeof(*s->bl), d9__sum_cmp_blocking);
	for (size_t i = 0; i < s->nbl; i++) {
		total += s->bl[i]->total;
		calls += s->bl[i]->count;
	}
	const struct bgroup *g = s->bl[0];
	struct finding *f = add_finding(c, "blocking", 0);
	if (!f)
		return;
	char a[32], b[32];
	set_cost(c, f, total);
	snprintf(f->title, sizeof(f->title), "blocking calls stalled their worker for %s in %" PRIu64
		" call(s); most in %s%s%s%s (%" PRIu64 " calls, %s)", D(a, total), calls, g->call,
		g->fd_kind ? " on a " : "", g->fd_kind ? d9_fd_kind_name(g->fd_kind) : "",
		g->fd_kind ? " descriptor" : "", g->count, D(b, g->total));
	NUM_COUNT(f, "calls", calls);
	NUM_STR(f, "call", g->call);
	NUM_STR(f, "fd_kind", d9_fd_kind_name(g->fd_kind));
	NUM_COUNT(f, "call_count", g->count);
	NUM_NS(f, "call_total_ns", g->total);
	NUM_NS(f, "call_max_ns", g->max);
	NUM_COUNT(f, "stacks", s->nbl);
	f->stack = g->stack;
	set_next(c, f, "flame --blocking");
}

/* The workers' busy time, time span and schedstat wait (runnable, off CPU), summed. */
static void worker_totals(struct check *c)
{
	struct wstat **wl;
	size_t nw = d9__sum_workers(&c->s, &wl);

	for (size_t i = 0; i < nw; i++) {
		struct wstat *w = wl[i];
		int wg = w->polls.n == 0 && w->turns.n > 0;
		c->w_busy += wg ? w->turn_ns : w->busy_ns;
		c->w_span += (uint64_t)(w->last_ns - w->first_ns);
		if (w->stat_unparks) {
			c->w_wait += w->sched_wait_ns;
			c->w_known++;
		}
	}
	free(wl);
}

/* Some preemption is the lot of any shared machine: what it causes is judged by the share of
 * the workers' own time they waited for a CPU, not by the trace's. */
static int preempt_severity(const struct check *c, uint64_t wait)
{
	double w = share_pct(wait, c->w_span);

	return w >= 4 * c->preempt_pct ? SEV_SERIOUS : w >= c->preempt_pct ? SEV_WARNING : SEV_INFO;
}

/* Scheduling delay: coroutines waiting to run after their wake, workers runnable but off CPU.
 * The cause is the largest of what explains it: preemption (the workers' schedstat wait),
 * one hot coroutine (the hog polls), CPU saturation (workers busy nearly all the time), a burst. */
static void find_delay(struct check *c, uint64_t hog_ns, const char *hog_where)
{
	struct sum *s = &c->s;
	/* the wait inside the hogs is theirs (find_hogs) */
	uint64_t wait = c->w_wait > c->hog_preempted ? c->w_wait - c->hog_preempted : 0;
	uint64_t busy = c->w_busy, span = c->w_span, known = c->w_known;
	uint64_t sd_wait = 0, sd_n = 0;
	for (size_t i = 0; i <= SD_CALLS; i++) {
		sd_n += s->sd[i].count;
		sd_wait += s->sd[i].wait;
	}
	/* coroutines' delay after wakes of each kind whose p99 reaches the threshold; timers are
	 * late_timers' (their delay runs from the deadline); the workers' own wait (runnable, off
	 * CPU) delays every coroutine they run */
	uint64_t coro = 0, p99 = 0, ndelays = 0, dmax = 0;
	for (int k = 0; k < NKINDS; k++) {
		struct d9__hist *h = &s->kind_sched[k];
		uint64_t p = h->n ? d9__hist_pct(h, 99) : 0;
		if (k == D9_WAKE_TIMER || p < (uint64_t)c->delay_ns)
			continue;
		coro += h->sum;
		ndelays += h->n;
		p99 = p > p99 ? p : p99;
		dmax = h->max > dmax ? h->max : dmax;
	}
	uint64_t cost = wait > coro ? wait : coro;
	if (!cost || share_pct(cost, (uint64_t)c->trace_ns) < c->warn_pct)
		return;
	double busy_pct = share_pct(busy, span);
	const char *cause = "preemption";
	if (cost == coro && wait < coro / 2) {
		/* else the workers ran other coroutines meanwhile: more work than they could do, all
		 * the time (saturation) or at once (a burst of wakes) */
		cause = hog_ns >= coro / 4 ? "hot coroutine" : busy_pct >= 90.0 ? "cpu saturation" :
			"burst";
	}
	struct finding *f = add_finding(c, "sched_delay", 0);
	if (!f)
		return;
	char a[32], b[32];
	set_cost(c, f, cost);
	if (!strcmp(cause, "preemption"))
		f->severity = preempt_severity(c, wait);
	if (!strcmp(cause, "preemption"))
		snprintf(f->title, sizeof(f->title), "scheduling delay, cause preemption: workers were "
			"runnable but off CPU for %s (%.1f%% of their time; other threads or processes "
			"had their CPU)%s", D(a, wait), share_pct(wait, span), c->hog_preempted ?
			", besides the wait inside the hogs" : "");
	else if (!strcmp(cause, "hot coroutine"))
		snprintf(f->title, sizeof(f->title), "scheduling delay, cause one hot coroutine: "
			"coroutines waited %s to run (p99 %s) behind long polls at %s", D(a, coro),
			D(b, p99), hog_where);
	else if (!strcmp(cause, "cpu saturation"))
		snprintf(f->title, sizeof(f->title), "scheduling delay, cause CPU saturation: workers "
			"were busy %.1f%% of the time running other coroutines; coroutines waited %s to run "
			"(p99 %s)", busy_pct, D(a, coro), D(b, p99));
	else
		snprintf(f->title, sizeof(f->title), "scheduling delay, cause a burst: many coroutines "
			"became runnable at once and waited for the ones ahead of them, %s in all (p99 %s), "
			"though the workers were busy only %.1f%% of the time", D(a, coro),
			D(b, p99), busy_pct);
	f->follows_hog = !strcmp(cause, "hot coroutine");
	NUM_STR(f, "cause", cause);
	NUM_NS(f, "worker_sched_wait_ns", c->w_wait);
	NUM_NS(f, "inside_hogs_ns", c->hog_preempted);
	NUM_COUNT(f, "workers_with_sched_stats", known);
	NUM_COUNT(f, "delays", ndelays); /* of the wake kinds past the threshold, timers aside */
	NUM_NS(f, "delay_total_ns", coro);
	NUM_NS(f, "delay_p99_ns", p99);
	NUM_NS(f, "delay_max_ns", dmax);
	NUM_PCT(f, "workers_busy_pct", busy_pct);
	NUM_COUNT(f, "preempted_calls", sd_n);
	NUM_NS(f, "preempted_calls_sched_wait_ns", sd_wait);
	NUM_COUNT(f, "offcpu_samples", s->cpu_off);
	if (!strcmp(cause, "hot coroutine"))
		snprintf(b, sizeof(b), "polls --min %s", D(a, c->hog_ns));
	else
		snprintf(b, sizeof(b), "summary");
	set_next(c, f, !strcmp(cause, "preemption") && s->cpu_off ? "flame --cpu off" : b);
}

/* A worker's busy time in % of its process's span (the first to the last event of any of its
 * workers): a worker parked from its start has a span of its own of nearly nothing. */
static double busy_share(struct wstat **wl, size_t nw, const struct wstat *w, uint64_t *pspan)
{
	int64_t first = w->first_ns, last = w->last_ns;

	for (size_t i = 0; i < nw; i++) {
		if (wl[i]->th->proc != w->th->proc)
			continue;
		first = wl[i]->first_ns < first ? wl[i]->first_ns : first;
		last = wl[i]->last_ns > last ? wl[i]->last_ns : last;
	}
	*pspan = (uint64_t)(last - first);
	return share_pct(w->polls.n == 0 && w->turns.n > 0 ? w->turn_ns : w->busy_ns, *pspan);
}

/* Idle workers while others are saturated, per process with two workers or more. */
static void find_imbalance(struct check *c)
{
	struct sum *s = &c->s;
	struct wstat **wl;
	size_t nw = d9__sum_workers(s, &wl);
	const struct wstat *hi = NULL, *lo = NULL;
	double hi_pct = 0, lo_pct = 0;
	uint64_t hspan = 0, span;

	for (size_t i = 0; i < nw; i++) {
		double p = busy_share(wl, nw, wl[i], &span);
		for (size_t j = 0; j < nw && p >= 80.0; j++) {
			double q = busy_share(wl, nw, wl[j], &span);
			if (wl[j]->th->proc == wl[i]->th->proc && q <= 20.0 && p - q > hi_pct - lo_pct) {
				hi = wl[i], lo = wl[j];
				hi_pct = p, lo_pct = q;
				hspan = span;
			}
		}
	}
	free(wl);
	int queued = s->queue_busy_samples && share_pct(s->idle_samples, s->queue_busy_samples) >= 10.0;
	if (!hi && !queued)
		return;
	struct finding *f = add_finding(c, "imbalance", 0);
	if (!f)
		return;
	/* what the idle worker could have taken: half the difference of their busy time */
	set_cost(c, f, hi ? (uint64_t)((hi_pct - lo_pct) / 200.0 * (double)hspan) : 0);
	if (f->severity == SEV_INFO)
		f->severity = SEV_WARNING; /* a worker at 80%+ next to one at 20%- is worth a look */
	if (hi)
		snprintf(f->title, sizeof(f->title), "workers unbalanced: worker %u of pid %u was busy "
			"%.0f%% of the process's time while worker %u was busy %.0f%%", hi->th->worker,
			hi->th->proc->pid, hi_pct, lo->th->worker, lo_pct);
	else
		snprintf(f->title, sizeof(f->title), "idle workers: %.0f%% of the run-queue samples with "
			"work waiting found another worker of the process parked",
			share_pct(s->idle_samples, s->queue_busy_samples));
	if (hi) {
		NUM_COUNT(f, "busy_worker", hi->th->worker);
		NUM_PCT(f, "busy_worker_pct", hi_pct);
		NUM_COUNT(f, "idle_worker", lo->th->worker);
		NUM_PCT(f, "idle_worker_pct", lo_pct);
	}
	NUM_COUNT(f, "queue_samples_with_work", s->queue_busy_samples);
	NUM_COUNT(f, "samples_with_idle_worker", s->idle_samples);
	set_next(c, f, "summary");
}

static void find_late(struct check *c, uint64_t hog_ns)
{
	/* a loop wait that came back late makes the coroutine timers it served late too: the
	 * larger of the two, not their sum, is what it cost */
	uint64_t n = c->late_waits + c->late_timers;
	uint64_t total = c->late_waits_ns > c->late_timers_ns ? c->late_waits_ns : c->late_timers_ns;

	if (!n)
		return;
	struct finding *f = add_finding(c, "late_timers", 0);
	if (!f)
		return;
	char a[32], b[32], d[32];
	set_cost(c, f, total);
	/* late loop waits (they cost the most) that their own Unparks' run delay explains: the
	 * waiting threads were runnable, off CPU, whatever hogs other workers ran */
	int preempted = c->late_waits_ns >= c->late_timers_ns && c->late_waits_pre_ns * 2 >=
		c->late_waits_ns;
	snprintf(f->title, sizeof(f->title), "%" PRIu64 " timer(s) fired at least %s late (%s, at "
		"most %s); %s", n, D(a, c->late_ns), D(b, total), D(d, c->late_waits_max >
		c->late_timers_max ? c->late_waits_max : c->late_timers_max), preempted ?
		"the late waits' threads were runnable and waited for a CPU (preemption: their "
		"run delay)" : hog_ns ? "long polls held their worker past the deadline" :
		c->w_wait >= total / 2 ? "no long poll held their worker: it waited for a CPU "
		"(preemption)" : "no long poll held their worker, nor did it wait for a CPU: its "
		"thread was stopped or throttled, or busy with many short polls");
	f->follows_hog = hog_ns > 0 && !preempted;
	NUM_NS(f, "loop_waits_preempted_ns", c->late_waits_pre_ns);
	/* lateness the workers' wait for a CPU explains is preemption's, judged by its measure */
	uint64_t wait = preempted ? c->late_waits_pre_ns : c->w_wait;
	if ((preempted || (!hog_ns && c->w_wait >= total / 2)) &&
		f->severity > preempt_severity(c, wait))
		f->severity = preempt_severity(c, wait);
	NUM_COUNT(f, "loop_waits_late", c->late_waits);
	NUM_NS(f, "loop_waits_late_ns", c->late_waits_ns);
	NUM_NS(f, "loop_waits_late_max_ns", c->late_waits_max);
	NUM_COUNT(f, "coroutine_timers_late", c->late_timers);
	NUM_NS(f, "coroutine_timers_late_ns", c->late_timers_ns);
	NUM_NS(f, "coroutine_timers_late_max_ns", c->late_timers_max);
	set_next(c, f, "summary");
}

/* Findings about the data: what limits what the others can say. */
/* The kind's worst severity among the findings so far (-1: none). */
static int severity_of(const struct check *c, const char *kind)
{
	int sev = -1;

	for (size_t i = 0; i < c->nf; i++)
		if (!strcmp(c->f[i].kind, kind) && c->f[i].severity > sev)
			sev = c->f[i].severity;
	return sev;
}

/* RecorderState definitions: one "recorder" finding per narrowing (feature and state), over
 * the processes that had it (a forked child inherits its parent's). A warning when it took data
 * a finding of this trace depends on, else info. */
static void find_narrowed(struct check *c)
{
	struct d9__trace *t = c->t;
	struct finding *f;

	for (size_t i = 0; i < t->nprocs; i++) {
		for (uint32_t k = 0; k < t->procs[i]->nnarrowed; k++) {
			const struct d9__narrowing *n = &t->procs[i]->narrowed[k];
			int seen = 0;
			for (size_t j = 0; j < i && !seen; j++)
				for (uint32_t m = 0; m < t->procs[j]->nnarrowed; m++)
					seen |= t->procs[j]->narrowed[m].feature == n->feature &&
						t->procs[j]->narrowed[m].state == n->state;
			if (seen || !(f = add_finding(c, "recorder", 1)))
				continue;
			uint64_t procs = 0;
			for (size_t j = i; j < t->nprocs; j++)
				for (uint32_t m = 0; m < t->procs[j]->nnarrowed; m++)
					procs += t->procs[j]->narrowed[m].feature == n->feature &&
						t->procs[j]->narrowed[m].state == n->state;
			const char *why = "";
			f->severity = SEV_INFO;
			if (n->feature == D9_REC_CPU_PROFILE && n->state == D9_REC_OFF) {
				c->cpu_off = 1;
				f->severity = SEV_WARNING;
				why = ": polls that hog a worker cannot be traced to functions";
			} else if (n->feature == D9_REC_SCHED_EVENTS && severity_of(c, "sched_delay") ==
				SEV_SERIOUS) {
				f->severity = SEV_WARNING;
				why = ": the scheduling delay found has no off-CPU stacks to say where "
					"workers waited";
			} else if (n->feature == D9_REC_BLOCKING_STACKS && severity_of(c, "blocking") >
				SEV_INFO) {
				f->severity = SEV_WARNING;
				why = ": the blocking calls found have no stacks";
			} else if (n->feature == D9_REC_EXEC) {
				f->severity = SEV_WARNING;
				why = "";
			} else if (n->feature == D9_REC_STACK_COPY && severity_of(c, "hog") > SEV_INFO) {
				f->severity = SEV_WARNING;
				why = ": the hogs found have no callers in their stacks";
			}
			char buf[256];
			const char *fn = d9_rec_feature_name(n->feature);
			const char *sn = d9_rec_state_name(n->state);
			char more[48] = "";
			if (procs > 1)
				snprintf(more, sizeof(more), " (and %" PRIu64 " other process(es))",
					procs - 1);
			snprintf(f->title, sizeof(f->title), "the recorder was narrowed in pid %u%s: %s%s",
				t->procs[i]->pid, more, d9__narrowing_text(n, buf, sizeof(buf)), why);
			NUM_COUNT(f, "pid", t->procs[i]->pid);
			NUM_COUNT(f, "processes", procs);
			NUM_STR(f, "feature", fn ? fn : "unknown");
			NUM_STR(f, "state", sn ? sn : "unknown");
			NUM_COUNT(f, "errno", n->err);
			NUM_STR(f, "detail", n->text);
			set_next(c, f, "summary");
			snprintf(f->hint, sizeof(f->hint), "%s", d9__narrowing_hint(n));
		}
	}
}

static void find_data(struct check *c)
{
	struct sum *s = &c->s;
	struct d9__trace *t = c->t;
	uint64_t unknown = s->polls_unknown + s->turns_unknown + s->parks_unknown + s->sched_unknown;
	uint64_t samples = s->cpu_on + s->cpu_off;
	struct finding *f;

	if ((s->drops_events || s->drops_samples) && (f = add_finding(c, "drops", 1))) {
		uint64_t pairs = s->polls.n + s->turns.n + unknown;
		f->severity = share_pct(s->drops_events, t->events + s->drops_events) >= 1.0 ||
			share_pct(unknown, pairs) >= 1.0 ? SEV_SERIOUS : s->drops_events ? SEV_WARNING :
			share_pct(s->drops_samples, samples + s->drops_samples) >= 1.0 ? SEV_WARNING : SEV_INFO;
		snprintf(f->title, sizeof(f->title), "the recorder dropped %" PRIu64 " events and %" PRIu64
			" CPU samples: %" PRIu64 " polls, turns, parks or delays across the gaps are unknown "
			"and left out of every number above", s->drops_events, s->drops_samples, unknown);
		NUM_COUNT(f, "events_dropped", s->drops_events);
		NUM_COUNT(f, "samples_dropped", s->drops_samples);
		for (int r = 0; r <= D9_DROP_REASON_MAX; r++)
			if (s->drop_reasons[r])
				NUM_COUNT(f, d9_drop_reason_name((uint64_t)r), s->drop_reasons[r]);
		NUM_COUNT(f, "unknown_pairs", unknown);
		set_next(c, f, "summary");
		snprintf(f->hint, sizeof(f->hint), "see summary's data quality; buffers_full: a larger "
			"D9_MAX_MEMORY or a shorter D9_FLUSH_INTERVAL; write_error: the disk was full or "
			"failing");
	}
	uint64_t damaged = t->truncated_segments + t->corrupt_segments + t->unreadable +
		t->bad_args + t->seq_gaps;
	if (damaged && (f = add_finding(c, "damaged_input", 1))) {
		f->severity = SEV_WARNING;
		snprintf(f->title, sizeof(f->title), "the input is incomplete: %" PRIu64 " truncated and %"
			PRIu64 " corrupt segment(s), %" PRIu64 " unreadable file(s), %" PRIu64 " gap(s) in "
			"segment numbers", t->truncated_segments, t->corrupt_segments, t->unreadable +
			t->bad_args, t->seq_gaps);
		NUM_COUNT(f, "truncated_segments", t->truncated_segments);
		NUM_COUNT(f, "corrupt_segments", t->corrupt_segments);
		NUM_COUNT(f, "unreadable_files", t->unreadable + t->bad_args);
		NUM_COUNT(f, "seq_gaps", t->seq_gaps);
		set_next(c, f, "summary");
	}
	double trunc = share_pct(s->st_truncated, s->st_recorded);
	double inval = share_pct(s->st_invalid, samples);
	if ((s->st_truncated || s->st_invalid) && (f = add_finding(c, "stacks", 1))) {
		f->severity = samples >= 50 && (trunc >= 20.0 || inval >= 5.0) ? SEV_WARNING : SEV_INFO;
		snprintf(f->title, sizeof(f->title), "stacks cut short: %.1f%% of the CPU samples' stacks "
			"are truncated and %.1f%% invalid, so hot spots may miss their callers", trunc, inval);
		NUM_COUNT(f, "samples", samples);
		NUM_COUNT(f, "truncated", s->st_truncated);
		NUM_PCT(f, "truncated_pct", trunc);
		NUM_COUNT(f, "invalid", s->st_invalid);
		NUM_PCT(f, "invalid_pct", inval);
		NUM_COUNT(f, "truncated_off_cpu", s->st_truncated_off);
		set_next(c, f, "summary");
		if (s->st_truncated_off * 2 > s->st_truncated)
			snprintf(f->hint, sizeof(f->hint), "most are off-CPU samples (D9_SCHED_EVENTS), "
				"which copy 2 KiB of stack: a deep stack or a large frame ends there; see "
				"summary's stacks: line and README.md, \"Profiling\"");
		else
			snprintf(f->hint, sizeof(f->hint), "see summary's stacks: line; D9_STACKS and "
				"D9_STACK_DUMP in README.md, \"Profiling\"");
	}
	for (size_t i = 0; i < t->nprocs; i++) {
		struct d9__proc *p = t->procs[i];
		if (!p->priv_dropped || !(f = add_finding(c, "recorder", 1)))
			continue;
		int denied = !!(p->priv_flags & D9_PRIV_PERF_DENIED);
		f->severity = denied ? SEV_WARNING : SEV_INFO;
		snprintf(f->title, sizeof(f->title), "%s: pid %u dropped privileges (uid %u -> %u)%s",
			p->priv_flags ? "the recorder was narrowed" : "privileges dropped", p->pid,
			p->priv_from_uid, p->priv_to_uid, denied ? "; perf was denied after it: threads "
			"profiled later have no CPU samples" : p->priv_flags & D9_PRIV_KERNEL_SAMPLES_LOST ?
			"; CPU samples of threads profiled later have no kernel frames" : ", and recording "
			"went on unchanged");
		NUM_COUNT(f, "pid", p->pid);
		NUM_COUNT(f, "from_uid", p->priv_from_uid);
		NUM_COUNT(f, "to_uid", p->priv_to_uid);
		NUM_STR(f, "perf_denied", denied ? "yes" : "no");
		NUM_STR(f, "kernel_samples_lost", p->priv_flags & D9_PRIV_KERNEL_SAMPLES_LOST ? "yes" :
			"no");
		set_next(c, f, "summary");
		snprintf(f->hint, sizeof(f->hint), "README.md, \"Privilege drops\"");
	}
	find_narrowed(c);
	uint64_t bseg, bbytes;
	d9__trace_budget(t, &bseg, &bbytes);
	if (bseg && (f = add_finding(c, "budget", 1))) {
		snprintf(f->title, sizeof(f->title), "%" PRIu64 " older segment(s) were deleted by the "
			"directory budget: the trace starts later than the recording", bseg);
		NUM_COUNT(f, "segments_deleted", bseg);
		NUM_COUNT(f, "bytes_deleted", bbytes);
		set_next(c, f, "summary");
	}
	/* no samples because the recorder could not take them: the recorder finding says why */
	if (!samples && !c->cpu_off && (f = add_finding(c, "no_profile", 1))) {
		snprintf(f->title, sizeof(f->title), "no CPU samples: long polls cannot be traced to "
			"functions (record with D9_CPU_PROFILE=1)");
		set_next(c, f, "summary");
	}
}

/* Order: severity; then, among serious findings, the data findings first (what was lost
 * qualifies everything else), among the others the time findings first; then impact. A
 * finding that is a consequence of the hogs (their scheduling delay, their late timers) sorts
 * right after the hog finding, whatever its own numbers: the cause first. */
static int finding_before(const struct check *c, const struct finding *x, const struct finding *y)
{
	int xs = x->follows_hog ? c->hog_severity : x->severity;
	int ys = y->follows_hog ? c->hog_severity : y->severity;
	uint64_t xi = x->follows_hog ? c->hog_impact : x->impact_ns;
	uint64_t yi = y->follows_hog ? c->hog_impact : y->impact_ns;

	if (xs != ys)
		return xs > ys;
	if (x->data != y->data) /* serious data findings first: the rest is read in their light */
		return xs == SEV_SERIOUS ? x->data > y->data : x->data < y->data;
	if (xi != yi)
		return xi > yi;
	return !x->follows_hog && y->follows_hog;
}

static void diagnose(struct check *c)
{
	struct sum *s = &c->s;

	c->trace_ns = s->seen && s->last_real > s->first_real ? s->last_real - s->first_real : 0;
	if (c->trace_ns < 1000000)
		c->trace_ns = 1000000; /* a trace of one instant: per second of at least 1 ms */
	worker_totals(c);
	find_hogs(c);
	find_blocking(c);
	find_delay(c, c->hog_total, c->hog_where ? c->hog_where : "(unknown)");
	find_imbalance(c);
	find_late(c, c->hog_total);
	find_data(c);
	/* insertion sort keeps equal findings in the order found (qsort would not) */
	for (size_t i = 1; i < c->nf; i++) {
		struct finding x = c->f[i];
		size_t j = i;
		for (; j > 0 && finding_before(c, &x, &c->f[j - 1]); j--)
			c->f[j] = c->f[j - 1];
		c->f[j] = x;
	}
}

/* ---- output ---------------------------------------------------------------------------------- */
static void text_num(FILE *f, const struct num *n)
{
	char a[32];

	switch (n->type) {
	case 'n':
		fprintf(f, "%s %s", n->key, D(a, n->u));
		break;
	case 'p':
		fprintf(f, "%s %.1f", n->key, n->d);
		break;
	case 's':
		fprintf(f, "%s %s", n->key, n->s);
		break;
	default:
		fprintf(f, "%s %" PRIu64, n->key, n->u);
	}
}

static void print_text(FILE *out, struct check *c)
{
	size_t nsev[3] = { 0 };
	char a[32];

	for (size_t i = 0; i < c->nf; i++)
		nsev[c->f[i].severity]++;
	fprintf(out, "d9-analyze check: %s of trace, %zu process(es): %zu serious, %zu warning(s), "
		"%zu info\n", D(a, c->trace_ns), c->t->nprocs, nsev[2], nsev[1], nsev[0]);
	if (!c->nf)
		fprintf(out, "\nnothing found\n");
	for (size_t i = 0; i < c->nf; i++) {
		const struct finding *f = &c->f[i];
		fprintf(out, "\n%zu. %-7s %s\n", i + 1, sev_names[f->severity], f->title);
		if (!f->data)
			fprintf(out, "   impact: %s per second of trace\n", D(a, f->impact_ns));
		for (size_t k = 0; k < f->nnums; k++) {
			fputs(k ? ", " : "   numbers: ", out);
			text_num(out, &f->nums[k]);
		}
		if (f->nnums)
			fputc('\n', out);
		if (f->stack && f->stack->n) {
			char buf[64];
			const char *names[D9__MAX_INLINE];
			fputs("   stack:", out);
			for (uint32_t k = 0, shown = 0; k < f->stack->n && shown < 8; k++) {
				size_t m = d9__frame_names(c->t, f->stack, k, names, D9__MAX_INLINE, buf,
					sizeof(buf));
				for (size_t j = 0; j < m && shown < 8; j++, shown++)
					fprintf(out, "%s %s", shown ? " <" : "", names[j]);
			}
			fputc('\n', out);
		}
		fprintf(out, "   next: %s\n", f->next);
		if (*f->hint)
			fprintf(out, "   hint: %s\n", f->hint);
	}
}

static void print_json(FILE *out, struct check *c, int rc)
{
	fprintf(out, "{\"duration_ns\":%" PRId64 ",\"processes\":%zu,\"exit\":%d,\"findings\":[",
		c->trace_ns, c->t->nprocs, rc);
	for (size_t i = 0; i < c->nf; i++) {
		const struct finding *f = &c->f[i];
		fprintf(out, "%s{\"kind\":\"%s\",\"severity\":\"%s\",\"impact_ns\":%" PRIu64
			",\"title\":", i ? "," : "", f->kind, sev_names[f->severity], f->impact_ns);
		d9__json_cstr(out, f->title);
		fputs(",\"numbers\":{", out);
		for (size_t k = 0; k < f->nnums; k++) {
			const struct num *n = &f->nums[k];
			fprintf(out, "%s\"%s\":", k ? "," : "", n->key);
			if (n->type == 's')
				d9__json_cstr(out, n->s);
			else if (n->type == 'p')
				fprintf(out, "%.2f", n->d);
			else
				fprintf(out, "%" PRIu64, n->u);
		}
		fputs("},\"stack\":", out);
		d9__json_stack(out, c->t, f->stack);
		fputs(",\"next\":", out);
		d9__json_cstr(out, f->next);
		if (*f->hint) {
			fputs(",\"hint\":", out);
			d9__json_cstr(out, f->hint);
		}
		fputc('}', out);
	}
	fputs("]}\n", out);
}

/* ---- command --------------------------------------------------------------------------------- */
static void check_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze check [OPTIONS] TRACE...\n\n"
		"Diagnoses the trace in plain words: polls that hog a worker, blocking calls, scheduling\n"
		"delay and its cause (preemption, one hot coroutine, CPU saturation, a burst),\n"
		"unbalanced workers, late timers, and what limits the data (drops, damaged input,\n"
		"truncated stacks, a narrowed recorder). Serious findings first, then warnings, then\n"
		"info; within each, the largest impact first (the time a problem cost per second of\n"
		"trace). Each finding has its numbers, the stack to look at, and the command to run\n"
		"next.\n\n"
		"options:\n"
		"  --json             one JSON object: {\"findings\":[{kind, severity, impact_ns, title,\n"
		"                     numbers, stack, next}], ...} (README.md, \"check\")\n"
		"  --hog DURATION     a poll (loop turn) holding its worker this long is a hog (10ms)\n"
		"  --delay DURATION   scheduling delay p99 worth a finding (10ms)\n"
		"  --late DURATION    a timer this late past its deadline is late (10ms)\n"
		"  --warn PCT         impact, in %% of the trace's time, for a warning (1)\n"
		"  --serious PCT      impact, in %% of the trace's time, for a serious finding (5)\n"
		"  --preempt PCT      scheduling delay caused by preemption: the workers' wait, in %%\n"
		"                     of their time, for a warning (10); 4 times that is serious\n"
		"  --from WHEN        ignore events before WHEN\n"
		"  --to WHEN          ignore events from WHEN on\n"
		"  -h, --help         this text\n\n"
		"DURATION and WHEN: as in 'd9-analyze summary --help'.\n"
		"exit status: 0 nothing found or info only, 1 warnings (none serious), 5 a serious\n"
		"finding, 2 usage, 3 no readable trace\n");
}

static int parse_pct(const char *opt, const char *v, double *out)
{
	char *end;
	double d = strtod(v, &end);

	if (*end || end == v || !(d >= 0.0 && d <= 100.0)) {
		fprintf(stderr, "d9-analyze: %s: want a percentage from 0 to 100, not '%s'\n", opt, v);
		return -1;
	}
	*out = d;
	return 0;
}

/* The TRACE arguments as one shell-ready string (single-quoted when they need it). */
static void traces_string(char *buf, size_t n, char **args, int nargs)
{
	size_t len = 0;

	buf[0] = 0;
	for (int i = 0; i < nargs && len + 1 < n; i++) {
		int plain = args[i][strspn(args[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			"0123456789/._-+:=@")] == 0;
		int w = snprintf(buf + len, n - len, plain ? "%s%s" : "%s'%s'", i ? " " : "", args[i]);
		if (w < 0 || (size_t)w >= n - len) {
			buf[len] = 0;
			break;
		}
		len += (size_t)w;
	}
}

int d9__cmd_check(int argc, char **argv)
{
	int json = 0, nargs = 0, rc;
	const char *v;
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	struct d9__trace t;
	struct check *c = calloc(1, sizeof(*c));

	if (!args || !c) {
		free(args);
		free(c);
		fprintf(stderr, "d9-analyze: out of memory\n");
		return D9_EXIT_NO_TRACE;
	}
	memset(&t, 0, sizeof(t));
	c->hog_ns = c->delay_ns = c->late_ns = 10000000;
	c->warn_pct = 1.0;
	c->serious_pct = 5.0;
	c->preempt_pct = 10.0;
	for (int i = 1; i < argc; i++) {
		int r = 0;
		int64_t *dur = NULL;
		double *pct = NULL;
		const char *opt = NULL;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			check_help(stdout);
			free(args);
			free(c);
			return D9_EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if ((r = d9__opt(argc, argv, &i, opt = "--hog", &v)) == 1) {
			dur = &c->hog_ns;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, opt = "--delay", &v)) == 1) {
			dur = &c->delay_ns;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, opt = "--late", &v)) == 1) {
			dur = &c->late_ns;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, opt = "--warn", &v)) == 1) {
			pct = &c->warn_pct;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, opt = "--serious", &v)) == 1) {
			pct = &c->serious_pct;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, opt = "--preempt", &v)) == 1) {
			pct = &c->preempt_pct;
		} else if (r == 0 && (r = d9__opt_window(argc, argv, &i, &t, NULL)) == 1) {
			;
		} else if (r == 0 && d9__opt_arg("check", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
		if (dur && (d9__parse_duration(v, dur) || *dur <= 0)) {
			fprintf(stderr, "d9-analyze: %s: bad duration '%s'\n", opt, v);
			goto usage;
		}
		if (pct && parse_pct(opt, v, pct))
			goto usage;
	}
	if (d9__opt_traces("check", nargs))
		goto usage;
	traces_string(c->traces, sizeof(c->traces), args, nargs);
	if ((rc = d9__trace_start(&t, args, nargs))) {
		free(c);
		return rc;
	}
	c->t = &t;
	if (d9__sum_init(&c->s, &t, LONG_KEPT, c->hog_ns)) {
		fprintf(stderr, "d9-analyze: out of memory\n");
		d9__sum_free(&c->s);
		d9__trace_close(&t);
		free(c);
		return D9_EXIT_NO_TRACE;
	}
	if (d9__trace_run(&t, check_event, c) || c->s.oom || c->oom)
		fprintf(stderr, "d9-analyze: out of memory: the diagnosis is incomplete\n");
	d9__sum_judge_stacks(&c->s);
	diagnose(c);
	rc = D9_EXIT_OK;
	for (size_t i = 0; i < c->nf; i++) {
		if (c->f[i].severity == SEV_SERIOUS)
			rc = CHECK_EXIT_SERIOUS;
		else if (c->f[i].severity == SEV_WARNING && rc == D9_EXIT_OK)
			rc = CHECK_EXIT_WARNING;
	}
	if (json)
		print_json(stdout, c, rc);
	else
		print_text(stdout, c);
	fflush(stdout);
	d9__sum_free(&c->s);
	d9__trace_close(&t);
	free(c->park_timeout_us);
	free(c);
	return rc;
usage:
	free(args);
	free(c);
	check_help(stderr);
	return D9_EXIT_USAGE;
}
