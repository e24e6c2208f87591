/* cmd-summary.c: `d9-analyze summary` (the default command): one pass over the trace that
 * answers "where did the time go": per-worker busy/parked time and poll durations, per spawn
 * location poll times, the longest polls (with the CPU samples taken during each), scheduling
 * delay, timer lateness, blocking calls, run-queue depth, idle workers, CPU hot spots and data
 * quality. Text for people, --json for scripts (keys in README.md, "Analyzer"). Memory follows
 * coroutines, locations, stacks and functions, never events or samples: samples are counted per
 * stack, and per (stack, source) for each thread's open poll only. Wakes are paired with polls
 * and coroutines counted alive in time order across threads (wakes.c: it holds the events not
 * yet paired, at most 1M per process). */
#include "analyze.h"
#include "d9-format.h"
#include "dumps.h"
#include "json.h"
#include "summary.h"
#include "trace.h"
#include "wakes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *grow_ptrs(void *arrp, size_t *n, size_t want)
{
	void ***arr = arrp;

	if (want <= *n)
		return *arr;
	void **a = realloc(*arr, want * sizeof(void *));
	if (!a)
		return NULL;
	memset(a + *n, 0, (want - *n) * sizeof(void *));
	*arr = a;
	*n = want;
	return a;
}

static struct wstat *wstat_of(struct sum *s, struct d9__thread *th)
{
	if (!grow_ptrs(&s->ws, &s->nws, th->idx + 1)) {
		s->oom = 1;
		return NULL;
	}
	if (!s->ws[th->idx]) {
		s->ws[th->idx] = calloc(1, sizeof(struct wstat));
		if (!s->ws[th->idx]) {
			s->oom = 1;
			return NULL;
		}
		s->ws[th->idx]->th = th;
	}
	return s->ws[th->idx];
}

static struct pstat *pstat_of(struct sum *s, struct d9__proc *p)
{
	if (!grow_ptrs(&s->ps, &s->nps, p->idx + 1)) {
		s->oom = 1;
		return NULL;
	}
	if (!s->ps[p->idx] && !(s->ps[p->idx] = calloc(1, sizeof(struct pstat))))
		s->oom = 1;
	return s->ps[p->idx];
}

static struct locstat *locstat_of(struct sum *s, const struct d9__loc *l)
{
	size_t i = l ? l->idx + 1 : 0;

	if (i >= s->nlocs) {
		size_t n = i + 1 > s->nlocs * 2 ? i + 1 : s->nlocs * 2;
		struct locstat *a = realloc(s->locs, n * sizeof(*a));
		if (!a) {
			s->oom = 1;
			return NULL;
		}
		memset(a + s->nlocs, 0, (n - s->nlocs) * sizeof(*a));
		s->locs = a;
		s->nlocs = n;
	}
	return &s->locs[i];
}

/* Keeps the `top` largest in a min-heap of at most s->top entries. */
static void heap_push(struct long_poll *h, size_t *n, size_t cap, struct long_poll v)
{
	size_t i;

	if (!cap)
		return;
	if (*n == cap) {
		if (v.dur <= h[0].dur)
			return;
		i = 0; /* replace the smallest, sift down */
		for (;;) {
			size_t l = 2 * i + 1, r = l + 1, m = i;
			uint64_t mv = v.dur;
			if (l < *n && h[l].dur < mv)
				m = l, mv = h[l].dur;
			if (r < *n && h[r].dur < mv)
				m = r;
			if (m == i)
				break;
			h[i] = h[m];
			i = m;
		}
		h[i] = v;
		return;
	}
	i = (*n)++;
	while (i && h[(i - 1) / 2].dur > v.dur) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = v;
}

int d9__sum_cmp_long(const void *a, const void *b)
{
	const struct long_poll *x = a, *y = b;

	if (x->dur != y->dur)
		return x->dur > y->dur ? -1 : 1;
	return x->start_real < y->start_real ? -1 : x->start_real > y->start_real;
}

static void add_sched_delay(struct sum *s, const struct d9__ev *ev)
{
	size_t i = 0;

	while (i < s->nsd && strcmp(s->sd[i].call, ev->call) != 0)
		i++;
	if (i == s->nsd) {
		if (s->nsd < SD_CALLS)
			s->sd[s->nsd++].call = ev->call;
		else
			i = SD_CALLS; /* "other" */
	}
	struct sdgroup *g = &s->sd[i];
	g->count++;
	g->total += ev->count;
	if (ev->value < 0)
		g->wait_unknown++;
	else
		g->wait += (uint64_t)ev->value;
}

/* A blocking call inside the open poll or loop turn pc (the call's time is its end). */
static void pollblock_add(struct pollcpu *pc, const struct d9__ev *ev)
{
	pc->b.n++;
	pc->b.ns += ev->count;
	if (pc->b.n == 1 || ev->count > pc->b.max) {
		pc->b.max = ev->count;
		pc->b.call = ev->call;
		pc->b.stack = ev->stack;
		pc->b.fd_kind = ev->kind;
	}
}

static void add_blocking(struct sum *s, const struct d9__ev *ev)
{
	uint64_t h = d9__hash64((uint64_t)(uintptr_t)ev->call ^
		d9__hash64((uint64_t)(uintptr_t)ev->stack));
	struct bgroup *head = d9__map_get(&s->bmap, h), *g;

	for (g = head; g; g = g->next)
		if (g->call == ev->call && g->stack == ev->stack)
			break;
	if (!g) {
		g = calloc(1, sizeof(*g));
		struct bgroup **a = g ? realloc(s->bl, (s->nbl + 1) * sizeof(*a)) : NULL;
		if (!a || d9__map_put(&s->bmap, h, g)) {
			free(g);
			s->oom = 1;
			return;
		}
		g->call = ev->call;
		g->stack = ev->stack;
		g->fd_kind = ev->kind;
		g->next = head;
		s->bl = a;
		s->bl[s->nbl++] = g;
	}
	g->count++;
	g->total += ev->count;
	if (ev->count > g->max)
		g->max = ev->count;
}

/* ---- CPU samples ----------------------------------------------------------------------------- */
static void pollcpu_add(struct sum *s, struct pollcpu *pc, const struct d9__stack *st, int off,
	uint64_t weight_ns)
{
	uint64_t key = (st ? (uint64_t)st->idx + 1 : 0) * 2 + (uint64_t)off;
	uintptr_t i = (uintptr_t)d9__map_get(&pc->idx, key);
	uint64_t ns = weight_ns == D9_UNKNOWN ? 0 : weight_ns;

	pc->unweighed += weight_ns == D9_UNKNOWN;
	if (off) {
		pc->off++;
		pc->off_ns += ns;
	} else {
		pc->on++;
		pc->on_ns += ns;
	}
	if (i) {
		pc->e[i - 1].samples++;
		pc->e[i - 1].ns += ns;
		return;
	}
	if (pc->n == pc->cap) {
		size_t cap = pc->cap ? pc->cap * 2 : 8;
		struct hot_stack *a = realloc(pc->e, cap * sizeof(*a));
		if (!a) {
			s->oom = 1;
			return;
		}
		pc->e = a;
		pc->cap = cap;
	}
	if (d9__map_put(&pc->idx, key, (void *)(uintptr_t)(pc->n + 1))) {
		s->oom = 1;
		return;
	}
	pc->e[pc->n++] = (struct hot_stack){ st, 1, ns, (uint8_t)off };
}

/* Order of a poll's hot stacks: most time first when every sample carries its time (else most
 * samples), then on-CPU first, then by stack (input order), so the output does not depend on
 * hashing. */
static int hot_before(const struct hot_stack *x, const struct hot_stack *y, int weighed)
{
	if (weighed && x->ns != y->ns)
		return x->ns > y->ns;
	if (x->samples != y->samples)
		return x->samples > y->samples;
	if (x->off != y->off)
		return x->off < y->off;
	return (x->stack ? x->stack->idx + 1 : 0) < (y->stack ? y->stack->idx + 1 : 0);
}

/* Copies the samples and hottest stacks of pc into lp. */
static void pollcpu_top(const struct pollcpu *pc, struct long_poll *lp)
{
	int weighed = pc->on + pc->off > 0 && !pc->unweighed;

	lp->cpu_on = pc->on;
	lp->cpu_off = pc->off;
	lp->on_ns = pc->on_ns;
	lp->off_ns = pc->off_ns;
	lp->weighed = weighed;
	lp->b = pc->b;
	lp->nhot = 0;
	for (size_t i = 0; i < pc->n; i++) {
		size_t j = lp->nhot < POLL_STACKS ? lp->nhot++ : POLL_STACKS;
		if (j == POLL_STACKS && !hot_before(&pc->e[i], &lp->hot[POLL_STACKS - 1], weighed))
			continue;
		if (j == POLL_STACKS)
			j--;
		for (; j > 0 && hot_before(&pc->e[i], &lp->hot[j - 1], weighed); j--)
			lp->hot[j] = lp->hot[j - 1];
		lp->hot[j] = pc->e[i];
	}
}

/* Empties pc for the next poll: costs its distinct stacks, not the map's capacity. */
static void pollcpu_clear(struct pollcpu *pc)
{
	for (size_t i = 0; i < pc->n; i++)
		d9__map_del(&pc->idx, (pc->e[i].stack ? (uint64_t)pc->e[i].stack->idx + 1 : 0) * 2 +
			pc->e[i].off);
	pc->n = 0;
	pc->on = pc->off = pc->on_ns = pc->off_ns = pc->unweighed = 0;
	memset(&pc->b, 0, sizeof(pc->b));
}

static void pollcpu_free(struct pollcpu *pc)
{
	d9__map_free(&pc->idx);
	free(pc->e);
}

/* A CpuSample: counted per stack for the hot spots, per thread, and in the thread's open poll
 * and loop turn. The reader delivers a thread's events in time order, so a sample between a
 * PollStart and its PollEnd was taken during that poll. */
/* 1 when a stack holds a frame in no module of its process, or a frame equal to the one below
 * it (a frame-pointer loop): frames no unwinder should have produced. */
static int stack_invalid(const struct d9__stack *st)
{
	const struct d9__proc *p = st->proc;

	for (uint32_t i = 0; i < st->n; i++) {
		uint64_t a = i ? st->frames[i] - 1 : st->frames[i];
		size_t m = 0;
		if (i && st->frames[i] == st->frames[i - 1])
			return 1;
		while (p && m < p->nmodules && !(a >= p->modules[m].start && a < p->modules[m].end))
			m++;
		if (!p || m == p->nmodules)
			return 1;
	}
	return 0;
}

static void stack_quality(struct sum *s, const struct d9__ev *ev)
{
	uint64_t u = ev->unwind, k = u & D9_UNWINDER_MASK;

	if (k != D9_UNWIND_NONE) { /* a writer that records it always names the unwinder */
		s->st_recorded++;
		s->st_by[k <= D9_UNWINDER_MAX ? k : D9_UNWINDER_MAX + 1]++;
		s->st_truncated += !!(u & D9_UNWIND_TRUNCATED);
		if (ev->kind == D9_CPU_OFF) {
			s->st_recorded_off++;
			s->st_truncated_off += !!(u & D9_UNWIND_TRUNCATED);
		}
		s->st_rejected += !!(u & D9_UNWIND_FP_REJECTED);
	}
}

/* Judged once the whole trace is read, not at a stack's first sample: the writer may define a
 * module (a JIT region it finds at its next read of /proc/self/maps) after a sample that ran in
 * it, and the frame is the process's all the same. The samples per stack are cpu_sample's. */
static int would_list(const struct sum *s, const struct long_poll *h, size_t n, uint64_t d);

/* Lists w's pending loop turn (the Unpark after it came, or never will). */
static void list_turn(struct sum *s, struct wstat *w)
{
	if (!w->has_pend)
		return;
	w->has_pend = 0;
	if (would_list(s, s->lt, s->nlt, w->pend.dur))
		heap_push(s->lt, &s->nlt, (size_t)s->top, w->pend);
}

void d9__sum_judge_stacks(struct sum *s)
{
	for (size_t i = 0; i < s->nws; i++)
		if (s->ws[i])
			list_turn(s, s->ws[i]); /* turns no Unpark followed: the trace ended */
	s->st_invalid = 0;
	for (size_t i = 1; i < s->nstack_cnt && i - 1 < s->t->nstacks; i++) {
		uint64_t n = s->stack_on[i] + s->stack_off[i];
		if (n && stack_invalid(s->t->stacks[i - 1]))
			s->st_invalid += n;
	}
}

static void cpu_sample(struct sum *s, struct wstat *w, const struct d9__ev *ev)
{
	size_t i = ev->stack ? (size_t)ev->stack->idx + 1 : 0;
	int off = ev->kind == D9_CPU_OFF;

	if (ev->kind != D9_CPU_ON && ev->kind != D9_CPU_OFF) {
		s->cpu_other++;
		return;
	}
	stack_quality(s, ev);
	if (i >= s->nstack_cnt) {
		size_t n = i + 1 > s->nstack_cnt * 2 ? i + 1 : s->nstack_cnt * 2;
		uint64_t **arr[4] = { &s->stack_on, &s->stack_off, &s->stack_on_ns, &s->stack_off_ns };
		for (int k = 0; k < 4; k++) {
			uint64_t *a = realloc(*arr[k], n * sizeof(*a));
			if (!a) {
				s->oom = 1;
				return;
			}
			memset(a + s->nstack_cnt, 0, (n - s->nstack_cnt) * sizeof(*a));
			*arr[k] = a;
		}
		s->nstack_cnt = n;
	}
	int known = ev->weight_ns != D9_UNKNOWN;
	if (off) {
		s->stack_off[i]++;
		s->stack_off_ns[i] += known ? ev->weight_ns : 0;
		s->off_unweighed += !known;
		s->cpu_off++;
		w->cpu_off++;
	} else {
		s->stack_on[i]++;
		s->stack_on_ns[i] += known ? ev->weight_ns : 0;
		s->on_unweighed += !known;
		s->cpu_on++;
		w->cpu_on++;
	}
	if (w->poll.open) {
		if (ev->co && ev->co != w->poll_co)
			s->co_mismatch++; /* still the poll's by time */
		pollcpu_add(s, &w->poll_cpu, ev->stack, off, ev->weight_ns);
	}
	if (w->turn.open)
		pollcpu_add(s, &w->turn_cpu, ev->stack, off, ev->weight_ns);
}

/* 1 when a poll of d ns would enter the list of the longest (heap h of n entries). */
static int would_list(const struct sum *s, const struct long_poll *h, size_t n, uint64_t d)
{
	return d >= (uint64_t)s->min_ns && s->top && (n < (size_t)s->top || d > h[0].dur);
}

static size_t workers_of(const struct d9__proc *p)
{
	return p->nworkers;
}

static void push_interval(struct sum *s, struct pstat *ps, struct d9__thread *th, int64_t from,
	int64_t to)
{
	if (ps->nparks == ps->capparks) {
		size_t cap = ps->capparks ? ps->capparks * 2 : 256;
		struct interval *a = realloc(ps->parks, cap * sizeof(*a));
		if (!a) {
			s->oom = 1;
			return;
		}
		ps->parks = a;
		ps->capparks = cap;
	}
	ps->parks[ps->nparks++] = (struct interval){ th, from, to };
}

static int cmp_interval(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	if (x->th != y->th)
		return x->th->idx < y->th->idx ? -1 : 1;
	return x->from < y->from ? -1 : x->from > y->from;
}

/* 1 when one of the (disjoint, sorted) intervals parks[lo, hi) holds instant t. */
static int parked_at(const struct interval *parks, size_t lo, size_t hi, int64_t t)
{
	while (lo < hi) { /* the last interval starting at or before t */
		size_t mid = lo + (hi - lo) / 2;
		if (parks[mid].from <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && parks[lo - 1].from <= t && parks[lo - 1].to >= t;
}

/* End of a segment of a multi-worker process: each QueueSample with work waiting on worker A
 * counts one idle-worker sample for every other worker B parked at that instant. */
static void idle_check(struct sum *s, struct d9__proc *p, struct pstat *ps)
{
	for (size_t i = 0; i < s->nws; i++) {
		struct wstat *w = s->ws[i];
		if (w && w->th->proc == p && w->park.open && w->park.mark == d9__gap_mark(w->th))
			push_interval(s, ps, w->th, w->park.ns, INT64_MAX);
	}
	if (ps->nparks)
		qsort(ps->parks, ps->nparks, sizeof(*ps->parks), cmp_interval);
	for (size_t q = 0; q < ps->nqs; q++) {
		int any = 0;
		/* each worker's intervals form one sorted run of parks[] */
		for (size_t lo = 0, hi; lo < ps->nparks; lo = hi) {
			struct d9__thread *th = ps->parks[lo].th;
			for (hi = lo + 1; hi < ps->nparks && ps->parks[hi].th == th; hi++)
				;
			if (th == ps->qs[q].th || !parked_at(ps->parks, lo, hi, ps->qs[q].ns))
				continue;
			struct wstat *w = wstat_of(s, th);
			if (w)
				w->idle_samples++;
			any = 1;
		}
		s->queue_busy_samples++;
		if (any)
			s->idle_samples++;
	}
	ps->nparks = ps->nqs = 0;
}

/* The open poll of w ends at ev (its PollEnd, or the next PollStart when the PollEnd was
 * lost); a poll with a gap inside is counted as unknown. */
static void end_poll(struct sum *s, struct wstat *w, const struct d9__ev *ev)
{
	uint64_t d;
	int r = d9__pair_close(&w->poll, ev, &d);
	struct locstat *ls = locstat_of(s, w->poll_loc);

	if (r != D9__PAIR_OK) {
		s->polls_unknown += r == D9__PAIR_UNKNOWN;
		pollcpu_clear(&w->poll_cpu);
		return;
	}
	d9__hist_add(&w->polls, d);
	d9__hist_add(&s->polls, d);
	w->busy_ns += d;
	if (ls)
		d9__hist_add(&ls->polls, d);
	if (would_list(s, s->lp, s->nlp, d)) {
		struct long_poll v = { .dur = d, .start_real = w->poll.real_ns, .loc = w->poll_loc,
			.th = w->th, .co = w->poll_co, .cpu_max = UINT64_MAX };
		pollcpu_top(&w->poll_cpu, &v);
		heap_push(s->lp, &s->nlp, (size_t)s->top, v);
	}
	pollcpu_clear(&w->poll_cpu);
}

/* The open loop turn of w ends at ev (its Park, or its process's end). */
static void end_turn(struct sum *s, struct wstat *w, const struct d9__ev *ev)
{
	uint64_t d;
	int r = d9__pair_close(&w->turn, ev, &d);

	s->turns_unknown += r == D9__PAIR_UNKNOWN;
	if (r == D9__PAIR_OK) {
		d9__hist_add(&w->turns, d);
		d9__hist_add(&s->turns, d);
		w->turn_ns += d;
		list_turn(s, w); /* one whose Unpark never came */
		if (would_list(s, s->lt, s->nlt, d)) {
			struct long_poll v = { .dur = d, .start_real = w->turn.real_ns, .th = w->th,
				.cpu_max = UINT64_MAX };
			pollcpu_top(&w->turn_cpu, &v);
			/* listed at the next Unpark, with its CPU time when that tells it */
			w->pend = v;
			w->pend_ns = w->turn.ns;
			w->has_pend = 1;
		}
	}
	pollcpu_clear(&w->turn_cpu);
}

/* The process of ev ended at ev->ns (a segment sealed at its exit or exec, D9__END_PROCESS):
 * each of its threads' open poll, loop turn and park lasted until then. */
static void end_process(struct sum *s, const struct d9__ev *ev)
{
	for (size_t i = 0; i < s->nws; i++) {
		struct wstat *w = s->ws[i];
		if (!w || w->th->proc != ev->proc)
			continue;
		struct d9__ev e = *ev;
		e.th = w->th;
		uint64_t d;
		if (ev->kind == D9__END_WINDOW) {
			/* a flight dump's end: parked at least until then; a poll or turn open
			 * goes on past the window, unseen */
			if (w->park.open && d9__pair_close(&w->park, &e, &d) == D9__PAIR_OK)
				w->parked_ns += d;
			if (ev->ns > w->last_ns)
				w->last_ns = ev->ns;
			continue;
		}
		if (w->poll.open)
			end_poll(s, w, &e);
		if (w->turn.open)
			end_turn(s, w, &e);
		list_turn(s, w); /* no Unpark follows */
		if (w->park.open && d9__pair_close(&w->park, &e, &d) == D9__PAIR_OK)
			w->parked_ns += d;
		if (ev->ns > w->last_ns)
			w->last_ns = ev->ns;
	}
}

void d9__sum_event(void *ctx, const struct d9__ev *ev)
{
	struct sum *s = ctx;
	struct pstat *ps = pstat_of(s, ev->proc);

	if (!ps)
		return;
	if (ev->type == D9__EV_SEGMENT_END) {
		if (ev->kind == D9__END_PROCESS || ev->kind == D9__END_WINDOW) {
			end_process(s, ev);
			if (ev->real_ns > ps->last_real)
				ps->last_real = ev->real_ns;
			if (ev->real_ns > s->last_real)
				s->last_real = ev->real_ns;
		}
		if (ps->nqs)
			idle_check(s, ev->proc, ps);
		ps->nparks = 0;
		return;
	}
	if (ev->type == D9__EV_PROCESS_END) {
		d9__wakes_event(&s->wakes, ev, 0);
		ps->alive = d9__wakes_alive(&s->wakes, ev->proc);
		s->alive += ps->alive;
		free(ps->parks);
		free(ps->qs);
		ps->parks = NULL;
		ps->qs = NULL;
		ps->capparks = ps->capqs = 0;
		return;
	}
	struct wstat *w = wstat_of(s, ev->th);
	if (!w)
		return;
	if (!w->seen || ev->ns < w->first_ns)
		w->first_ns = ev->ns;
	if (!w->seen || ev->ns > w->last_ns)
		w->last_ns = ev->ns;
	w->seen = 1;
	if (!ps->seen || ev->real_ns < ps->first_real)
		ps->first_real = ev->real_ns;
	if (!ps->seen || ev->real_ns > ps->last_real)
		ps->last_real = ev->real_ns;
	ps->seen = 1;
	if (!s->seen || ev->real_ns < s->first_real)
		s->first_real = ev->real_ns;
	if (!s->seen || ev->real_ns > s->last_real)
		s->last_real = ev->real_ns;
	s->seen = 1;

	switch (ev->type) {
	case D9_EV_POLL_START: {
		end_poll(s, w, ev); /* an open poll's PollEnd was lost: it ends here */
		d9__pair_open(&w->poll, ev);
		w->poll_co = ev->co;
		w->poll_loc = ev->loc;
		d9__wakes_event(&s->wakes, ev, 0); /* its scheduling delay: sum_on_pair */
		break;
	}
	case D9_EV_POLL_END:
		end_poll(s, w, ev);
		break;
	case D9_EV_PARK:
		end_turn(s, w, ev);
		d9__pair_open(&w->park, ev);
		w->parks++;
		break;
	case D9_EV_UNPARK: {
		uint64_t d;
		int64_t park_ns = w->park.ns;
		int r = d9__pair_close(&w->park, ev, &d);
		if (ev->raw->f[D9_F_UNPARK_CPU_NS] != D9_UNKNOWN &&
			ev->raw->f[D9_F_UNPARK_SCHED_WAIT_NS] != D9_UNKNOWN) {
			w->park_cpu_ns += ev->raw->f[D9_F_UNPARK_CPU_NS];
			w->sched_wait_ns += ev->raw->f[D9_F_UNPARK_SCHED_WAIT_NS];
			w->stat_unparks++;
			/* the delta covers the time since the previous such Unpark: the pending
			 * turn's CPU, at most, when that came before the turn began */
			if (w->has_pend && w->stat_known && w->stat_ns <= w->pend_ns) {
				w->pend.cpu_max = ev->raw->f[D9_F_UNPARK_CPU_NS];
				w->pend.wait_max = ev->raw->f[D9_F_UNPARK_SCHED_WAIT_NS];
			}
			w->stat_known = 1;
			w->stat_ns = ev->ns;
		}
		list_turn(s, w);
		s->parks_unknown += r == D9__PAIR_UNKNOWN;
		if (r == D9__PAIR_OK) {
			w->parked_ns += d;
			if (workers_of(ev->proc) > 1)
				push_interval(s, ps, w->th, park_ns, ev->ns);
		}
		pollcpu_clear(&w->turn_cpu); /* a turn whose Park was lost ends here */
		d9__pair_open(&w->turn, ev);
		break;
	}
	case D9_EV_WAKE: {
		if (ev->kind == D9_WAKE_TIMER)
			d9__hist_add(&s->lateness, ev->ns > ev->deadline_ns ?
				(uint64_t)(ev->ns - ev->deadline_ns) : 0);
		d9__wakes_event(&s->wakes, ev, 0);
		break;
	}
	case D9_EV_SPAWN:
		s->spawned++;
		ps->spawned++;
		d9__wakes_event(&s->wakes, ev, 0);
		break;
	case D9_EV_COROUTINE_EXIT:
		s->exited++;
		ps->exited++;
		d9__wakes_event(&s->wakes, ev, 0);
		break;
	case D9_EV_QUEUE_SAMPLE:
		d9__hist_add(&s->queue, ev->count);
		if (ev->count > 0 && workers_of(ev->proc) > 1) {
			if (ps->nqs == ps->capqs) {
				size_t cap = ps->capqs ? ps->capqs * 2 : 64;
				struct qsample *a = realloc(ps->qs, cap * sizeof(*a));
				if (!a) {
					s->oom = 1;
					break;
				}
				ps->qs = a;
				ps->capqs = cap;
			}
			ps->qs[ps->nqs++] = (struct qsample){ ev->th, ev->ns };
		}
		break;
	case D9_EV_BLOCKING_CALL:
		add_blocking(s, ev);
		if (w->poll.open)
			pollblock_add(&w->poll_cpu, ev);
		if (w->turn.open)
			pollblock_add(&w->turn_cpu, ev);
		break;
	case D9_EV_SCHED_DELAY:
		add_sched_delay(s, ev);
		break;
	case D9_EV_CPU_SAMPLE:
		cpu_sample(s, w, ev);
		break;
	case D9_EV_DROPPED:
		if (ev->kind == D9_DROP_SAMPLES_LOST)
			s->drops_samples += ev->count;
		else
			s->drops_events += ev->count;
		s->drop_reasons[ev->kind <= D9_DROP_REASON_MAX ? ev->kind : D9_DROP_REASON_MAX + 1] +=
			ev->count;
		break;
	case D9_EV_ZERO_TIMEOUT_WAITS:
		w->ztw += ev->count;
		s->ztw += ev->count;
		break;
	case D9_EV_REQUEST_END:
		if (!(ev->raw->f[D9_F_RE_FLAGS] & D9_REQ_UNTRACKED)) {
			s->req_n++;
			s->req_ambiguous += !!(ev->raw->f[D9_F_RE_FLAGS] & D9_REQ_AMBIGUOUS);
			s->req_counted += ev->raw->f[D9_F_RE_COUNT] ? ev->raw->f[D9_F_RE_COUNT] : 1;
			s->req_api += ev->raw->f[D9_F_RE_SOURCE] == D9_REQ_SRC_API;
		}
		break;
	default:
		break;
	}
	if (ev->type != D9_EV_POLL_START && ev->type != D9_EV_WAKE && ev->type != D9_EV_SPAWN &&
	    ev->type != D9_EV_COROUTINE_EXIT)
		d9__wakes_event(&s->wakes, ev, 0); /* every event moves its thread's time on */
	s->oom |= s->wakes.oom;
}

/* A PollStart settled in time order (wakes.c): its scheduling delay, when a wake preceded it. */
static void sum_on_pair(void *ctx, const struct d9__wake_pair *p)
{
	struct sum *s = ctx;
	int kind = (int)(p->kind <= D9_WAKE_MAX ? p->kind : D9_WAKE_MAX + 1);

	if (p->result == D9__PAIR_UNKNOWN) {
		s->sched_unknown++; /* its real first poll after the wake may be lost */
	} else if (p->result == D9__PAIR_OK) {
		struct locstat *ls = locstat_of(s, p->loc);
		d9__hist_add(&s->sched, p->delay_ns);
		d9__hist_add(&s->kind_sched[kind], p->delay_ns);
		if (ls) {
			d9__hist_add(&ls->sched, p->delay_ns);
			ls->wakes[kind]++;
		}
	}
}

int d9__sum_init(struct sum *s, struct d9__trace *t, int top, int64_t min_ns)
{
	memset(s, 0, sizeof(*s));
	s->t = t;
	s->top = top;
	s->min_ns = min_ns;
	s->lp = calloc((size_t)top + 1, sizeof(*s->lp));
	s->lt = calloc((size_t)top + 1, sizeof(*s->lt));
	d9__wakes_init(&s->wakes, sum_on_pair, s);
	return s->lp && s->lt ? 0 : -ENOMEM;
}

void d9__sum_free(struct sum *s)
{
	for (size_t i = 0; i < s->nws; i++) {
		if (!s->ws[i])
			continue;
		d9__hist_free(&s->ws[i]->polls);
		d9__hist_free(&s->ws[i]->turns);
		pollcpu_free(&s->ws[i]->poll_cpu);
		pollcpu_free(&s->ws[i]->turn_cpu);
		free(s->ws[i]);
	}
	free(s->ws);
	d9__wakes_free(&s->wakes);
	for (size_t i = 0; i < s->nps; i++) {
		struct pstat *ps = s->ps[i];
		if (!ps)
			continue;
		free(ps->parks);
		free(ps->qs);
		free(ps);
	}
	free(s->ps);
	for (size_t i = 0; i < s->nlocs; i++) {
		d9__hist_free(&s->locs[i].polls);
		d9__hist_free(&s->locs[i].sched);
	}
	free(s->locs);
	d9__hist_free(&s->polls);
	d9__hist_free(&s->turns);
	d9__hist_free(&s->sched);
	d9__hist_free(&s->lateness);
	d9__hist_free(&s->queue);
	for (int k = 0; k < NKINDS; k++)
		d9__hist_free(&s->kind_sched[k]);
	free(s->lp);
	free(s->lt);
	for (size_t i = 0; i < s->nbl; i++)
		free(s->bl[i]);
	free(s->bl);
	d9__map_free(&s->bmap);
	free(s->stack_on);
	free(s->stack_off);
	free(s->stack_on_ns);
	free(s->stack_off_ns);
}

/* The hot spots of a source are by time when some of its samples carry their time (the others,
 * counted in *_unweighed, are then left out of that table); by samples in older traces. */
static int on_by_time(const struct sum *s)
{
	return s->cpu_on > s->on_unweighed;
}

static int off_by_time(const struct sum *s)
{
	return s->cpu_off > s->off_unweighed;
}

/* Generic mode: no poll anywhere but loop turns: turns take the place of polls. */
int d9__sum_generic(const struct sum *s)
{
	return s->polls.n == 0 && s->turns.n > 0;
}

int d9__sum_cmp_blocking(const void *a, const void *b)
{
	const struct bgroup *x = *(struct bgroup *const *)a, *y = *(struct bgroup *const *)b;

	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->call, y->call);
}

/* Location rows, sorted by total poll time. */
struct locrow { const char *name; struct locstat *ls; };

static int cmp_locrow(const void *a, const void *b)
{
	const struct locrow *x = a, *y = b;

	if (x->ls->polls.sum != y->ls->polls.sum)
		return x->ls->polls.sum > y->ls->polls.sum ? -1 : 1;
	return strcmp(x->name, y->name);
}

static size_t loc_rows(struct sum *s, struct locrow **out)
{
	size_t n = 0;
	struct locrow *r = calloc(s->nlocs + 1, sizeof(*r));

	*out = r;
	if (!r)
		return 0;
	for (size_t i = 0; i < s->nlocs; i++) {
		if (!s->locs[i].polls.n && !s->locs[i].sched.n)
			continue;
		r[n].name = i ? s->t->locs[i - 1]->name : "(unknown)";
		r[n].ls = &s->locs[i];
		n++;
	}
	qsort(r, n, sizeof(*r), cmp_locrow);
	return n;
}

static int cmp_ws(const void *a, const void *b)
{
	const struct wstat *x = *(struct wstat *const *)a, *y = *(struct wstat *const *)b;

	if (x->th->proc->idx != y->th->proc->idx)
		return x->th->proc->idx < y->th->proc->idx ? -1 : 1;
	if (x->th->worker != y->th->worker)
		return x->th->worker < y->th->worker ? -1 : 1;
	return x->th->tid < y->th->tid ? -1 : x->th->tid > y->th->tid;
}

/* The workers (threads with a worker id and events), in (process, worker) order. */
size_t d9__sum_workers(struct sum *s, struct wstat ***out)
{
	size_t n = 0;
	struct wstat **a = calloc(s->nws + 1, sizeof(*a));

	*out = a;
	if (!a)
		return 0;
	for (size_t i = 0; i < s->nws; i++)
		if (s->ws[i] && s->ws[i]->seen && s->ws[i]->th->worker)
			a[n++] = s->ws[i];
	qsort(a, n, sizeof(*a), cmp_ws);
	return n;
}

/* ---- CPU hot spots ----------------------------------------------------------------------------- */

/* The function of a frame name: the name without its line, "f (file.c:12)" -> "f (file.c)",
 * so the samples of every line of a function add up. Interned in t. */
static const char *function_of(struct d9__trace *t, const char *name)
{
	size_t n = strlen(name), i = n ? n - 1 : 0;
	char buf[1024];

	if (n < 5 || name[n - 1] != ')' || n >= sizeof(buf))
		return d9__trace_intern(t, name, n);
	while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
		i--;
	if (i == n - 1 || i < 2 || name[i - 1] != ':')
		return d9__trace_intern(t, name, n);
	size_t colon = i - 1, j = colon;
	while (j > 1 && name[j - 1] != '(')
		j--;
	if (j <= 1 || name[j - 2] != ' ' || j == colon) /* no " (", or no file */
		return d9__trace_intern(t, name, n);
	memcpy(buf, name, colon);
	buf[colon] = ')';
	return d9__trace_intern(t, buf, colon + 1);
}

/* diff counts per function as the hot spots do (analyze.h) */
const char *d9__function_of(struct d9__trace *t, const char *name)
{
	return function_of(t, name);
}

static int cmp_fnstat(const void *a, const void *b)
{
	const struct fnstat *x = *(struct fnstat *const *)a, *y = *(struct fnstat *const *)b;

	if (x->by_ns && x->self_ns != y->self_ns)
		return x->self_ns > y->self_ns ? -1 : 1;
	if (x->by_ns && x->total_ns != y->total_ns)
		return x->total_ns > y->total_ns ? -1 : 1;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->name, y->name);
}

static const char NO_STACK[] = "(no stack)";

/* Functions of the samples of one source (counts by stack idx + 1), sorted by self then total
 * samples. Each frame counts with its inlined functions, innermost first (as the stacks are
 * printed): self goes to the innermost function of the innermost frame, total to every function
 * on the stack, once per sample even when it appears several times (recursion). Samples without
 * a stack count for "(no stack)". Returns how many in *out (freed by the caller, each entry and
 * the array), 0 when none or out of memory (s->oom set). */
size_t d9__sum_functions(struct sum *s, const uint64_t *cnt, const uint64_t *ns, int by_ns,
	struct fnstat ***out)
{
	struct d9__trace *t = s->t;
	struct d9__map m = { 0 };
	struct fnstat **a = NULL;
	size_t n = 0, cap = 0;
	const char *names[D9__MAX_INLINE];
	char buf[64];

	*out = NULL;
	for (size_t i = 0; i < s->nstack_cnt; i++) {
		if (!cnt[i] || i > t->nstacks)
			continue;
		const struct d9__stack *st = i ? t->stacks[i - 1] : NULL;
		uint32_t nf = st ? st->n : 0;
		for (uint32_t f = 0; f < (nf ? nf : 1); f++) {
			size_t k = 1;
			if (nf)
				k = d9__frame_names(t, st, f, names, D9__MAX_INLINE, buf, sizeof(buf));
			else
				names[0] = NO_STACK;
			for (size_t j = 0; j < k; j++) {
				const char *fn = nf ? function_of(t, names[j]) : NO_STACK;
				uint64_t h = d9__hash64((uint64_t)(uintptr_t)fn);
				struct fnstat *head = d9__map_get(&m, h), *e;
				for (e = head; e && e->name != fn; e = e->next)
					;
				if (!e) {
					if (n == cap) {
						size_t c = cap ? cap * 2 : 64;
						struct fnstat **b = realloc(a, c * sizeof(*b));
						if (!b)
							goto oom;
						a = b;
						cap = c;
					}
					if (!(e = calloc(1, sizeof(*e))))
						goto oom;
					e->name = fn;
					e->by_ns = by_ns;
					e->next = head;
					if (d9__map_put(&m, h, e)) {
						free(e);
						goto oom;
					}
					a[n++] = e;
				}
				if (e->mark != i + 1) {
					e->mark = i + 1;
					e->total += cnt[i];
					e->total_ns += ns[i];
				}
				if (f == 0 && j == 0) {
					e->self += cnt[i];
					e->self_ns += ns[i];
				}
			}
		}
	}
	d9__map_free(&m);
	if (n)
		qsort(a, n, sizeof(*a), cmp_fnstat);
	*out = a;
	return n;
oom:
	s->oom = 1;
	d9__map_free(&m);
	for (size_t i = 0; i < n; i++)
		free(a[i]);
	free(a);
	return 0;
}

void d9__sum_functions_free(struct fnstat **a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(a[i]);
	free(a);
}

static const char *kind_name(int k)
{
	const char *n = k <= D9_WAKE_MAX ? d9_wake_kind_name((uint64_t)k) : NULL;

	return n ? n : "unknown";
}

/* ---- JSON ------------------------------------------------------------------------------------ */
static void json_hist(FILE *f, struct d9__hist *h)
{
	fprintf(f, "\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"mean_ns\":%" PRIu64
		",\"p50_ns\":%" PRIu64 ",\"p90_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64,
		h->n, h->sum, h->n ? h->sum / h->n : 0, d9__hist_pct(h, 50), d9__hist_pct(h, 90),
		d9__hist_pct(h, 99), h->max);
}

/* Frame names, innermost first, inlined functions expanded into frames of their own. */

static double pct(uint64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

static void json_functions(FILE *f, struct fnstat **a, size_t n)
{
	for (size_t i = 0; i < n && i < HOT_TOP; i++) {
		fprintf(f, "%s{\"function\":", i ? "," : "");
		d9__json_cstr(f, a[i]->name);
		fprintf(f, ",\"self_samples\":%" PRIu64 ",\"total_samples\":%" PRIu64, a[i]->self,
			a[i]->total);
		if (a[i]->by_ns)
			fprintf(f, ",\"self_ns\":%" PRIu64 ",\"total_ns\":%" PRIu64, a[i]->self_ns,
				a[i]->total_ns);
		fputc('}', f);
	}
}

static double share(uint64_t part, uint64_t all)
{
	return all ? 100.0 * (double)part / (double)all : 0.0;
}

/* "stacks:" lines: which unwinder made the samples' stacks, how many were cut short, and how many
 * hold frames no unwinder should produce (README.md, "Stacks"). */
static void text_stack_quality(FILE *f, const struct sum *s)
{
	uint64_t all = s->cpu_on + s->cpu_off;

	fprintf(f, "  stacks: %.1f%% invalid (%" PRIu64 " of %" PRIu64 " samples: a frame in no module, "
		"or repeated)", share(s->st_invalid, all), s->st_invalid, all);
	if (!s->st_recorded) {
		fprintf(f, "; unwinder not recorded by this trace's writer\n");
		return;
	}
	fprintf(f, ", %.1f%% truncated (%" PRIu64, share(s->st_truncated, s->st_recorded),
		s->st_truncated);
	if (s->st_recorded_off && s->st_truncated)
		/* off-CPU samples copy 2 KiB of stack: apart, so on-CPU stacks are judged alone */
		fprintf(f, ": on-CPU %.1f%%, off-CPU %.1f%%", share(s->st_truncated -
			s->st_truncated_off, s->st_recorded - s->st_recorded_off),
			share(s->st_truncated_off, s->st_recorded_off));
	fputs("); unwinder:", f);
	for (uint64_t k = 0; k <= D9_UNWINDER_MAX + 1; k++)
		if (s->st_by[k])
			fprintf(f, " %s %.1f%%", k <= D9_UNWINDER_MAX ? d9_unwinder_name(k) : "unknown",
				share(s->st_by[k], s->st_recorded));
	if (s->st_rejected)
		fprintf(f, "; frame-pointer chain rejected in %.1f%%", share(s->st_rejected,
			s->st_recorded));
	fputc('\n', f);
}

/* The summary's own warnings, after the trace's: things worth a look that are not damage. */
static size_t sum_warnings(const struct sum *s, char out[][160])
{
	size_t n = 0;

	if (s->co_mismatch)
		snprintf(out[n++], 160, "%" PRIu64 " CPU sample(s) name a coroutine other than the one "
			"of the poll they fall in (counted in that poll)", s->co_mismatch);
	if (s->cpu_other)
		snprintf(out[n++], 160, "%" PRIu64 " CPU sample(s) of an unknown source left out",
			s->cpu_other);
	return n;
}

static void print_json(FILE *f, struct sum *s)
{
	struct d9__trace *t = s->t;
	int gen = d9__sum_generic(s);
	struct d9__hist *polls = gen ? &s->turns : &s->polls;

	fprintf(f, "{\"mode\":\"%s\",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
		",\"duration_ns\":%" PRId64 ",\"trace_start_ns\":%" PRId64 ",\"events\":%" PRIu64,
		gen ? "generic" : "coroutines", s->seen ? s->first_real : 0, s->seen ? s->last_real : 0,
		s->seen ? s->last_real - s->first_real : 0, t->start_real, t->events);
	if (s->req_n) /* only in traces with requests (D9_REQUESTS=1, the API) */
		fprintf(f, ",\"requests\":{\"count\":%" PRIu64 ",\"api\":%" PRIu64
			",\"ambiguous\":%" PRIu64 ",\"in_their_bytes\":%" PRIu64 "}", s->req_n,
			s->req_api, s->req_ambiguous, s->req_counted);
	fputs(",\"dumps\":[", f);
	for (size_t i = 0; i < t->ndumps; i++) {
		if (i)
			fputc(',', f);
		d9__dump_json(f, &t->dumps[i], t->start_real);
	}
	fputs("],\"processes\":[", f);
	for (size_t i = 0; i < t->nprocs; i++) {
		struct d9__proc *p = t->procs[i];
		struct pstat *ps = i < s->nps ? s->ps[i] : NULL;
		fprintf(f, "%s{\"pid\":%u,\"ppid\":%u,\"process\":", i ? "," : "", p->pid, p->ppid);
		d9__json_cstr(f, p->process);
		fputs(",\"cmdline\":", f);
		d9__json_cstr(f, p->cmdline);
		fputs(",\"hostname\":", f);
		d9__json_cstr(f, p->hostname);
		fprintf(f, ",\"segments\":%u,\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
			",\"workers\":%zu,\"spawned\":%" PRIu64 ",\"exited\":%" PRIu64 ",\"alive\":%" PRIu64,
			p->nsegs, ps && ps->seen ? ps->first_real : 0, ps && ps->seen ? ps->last_real : 0,
			workers_of(p), ps ? ps->spawned : 0, ps ? ps->exited : 0, ps ? ps->alive : 0);
		if (p->priv_dropped)
			fprintf(f, ",\"privileges\":{\"from_uid\":%u,\"to_uid\":%u,"
				"\"kernel_samples_lost\":%s,\"perf_denied\":%s}", p->priv_from_uid,
				p->priv_to_uid, p->priv_flags & D9_PRIV_KERNEL_SAMPLES_LOST ? "true" : "false",
				p->priv_flags & D9_PRIV_PERF_DENIED ? "true" : "false");
		if (p->nnarrowed)
			fputs(",\"recorder\":[", f);
		for (uint32_t k = 0; k < p->nnarrowed; k++) {
			const struct d9__narrowing *n = &p->narrowed[k];
			const char *fn = d9_rec_feature_name(n->feature), *sn = d9_rec_state_name(n->state);
			char buf[256];
			/* names as strings; a newer writer's unknown values as "<number>" */
			if (fn)
				fprintf(f, "%s{\"feature\":\"%s\"", k ? "," : "", fn);
			else
				fprintf(f, "%s{\"feature\":\"%u\"", k ? "," : "", n->feature);
			if (sn)
				fprintf(f, ",\"state\":\"%s\"", sn);
			else
				fprintf(f, ",\"state\":\"%u\"", n->state);
			fprintf(f, ",\"errno\":%u,\"detail\":", n->err);
			d9__json_cstr(f, n->text);
			fputs(",\"text\":", f);
			d9__json_cstr(f, d9__narrowing_text(n, buf, sizeof(buf)));
			fputc('}', f);
		}
		if (p->nnarrowed)
			fputc(']', f);
		fputc('}', f);
	}
	fputs("],\"workers\":[", f);
	struct wstat **wl;
	size_t nw = d9__sum_workers(s, &wl);
	for (size_t i = 0; i < nw; i++) {
		struct wstat *w = wl[i];
		int wg = w->polls.n == 0 && w->turns.n > 0;
		struct d9__hist *h = wg ? &w->turns : &w->polls;
		uint64_t busy = wg ? w->turn_ns : w->busy_ns;
		int64_t span = w->last_ns - w->first_ns;
		fprintf(f, "%s{\"id\":%u,\"pid\":%u,\"tid\":%u,\"name\":", i ? "," : "", w->th->worker,
			w->th->proc->pid, w->th->tid);
		d9__json_cstr(f, w->th->name);
		fprintf(f, ",\"unit\":\"%s\",\"polls\":%" PRIu64 ",\"span_ns\":%" PRId64 ",\"busy_ns\":%"
			PRIu64 ",\"parked_ns\":%" PRIu64 ",\"busy_pct\":%.2f,\"parked_pct\":%.2f,"
			"\"p50_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"parks\":%"
			PRIu64 ",\"zero_timeout_waits\":%" PRIu64 ",\"idle_samples\":%" PRIu64
			",\"stat_unparks\":%" PRIu64,
			wg ? "loop_turn" : "poll", h->n, span, busy, w->parked_ns, pct(busy, span),
			pct(w->parked_ns, span), d9__hist_pct(h, 50), d9__hist_pct(h, 99), h->max, w->parks,
			w->ztw, w->idle_samples, w->stat_unparks);
		/* null: no Unpark of this worker carried the statistics (unknown, not 0) */
		if (w->stat_unparks)
			fprintf(f, ",\"park_cpu_ns\":%" PRIu64 ",\"sched_wait_ns\":%" PRIu64,
				w->park_cpu_ns, w->sched_wait_ns);
		else
			fputs(",\"park_cpu_ns\":null,\"sched_wait_ns\":null", f);
		fprintf(f, ",\"cpu_samples\":%" PRIu64 ",\"offcpu_samples\":%" PRIu64 "}", w->cpu_on,
			w->cpu_off);
	}
	free(wl);
	fprintf(f, "],\"coroutines\":{\"spawned\":%" PRIu64 ",\"exited\":%" PRIu64 ",\"alive\":%" PRIu64
		"},\"polls\":{", s->spawned, s->exited, s->alive);
	json_hist(f, polls);
	fputs("},\"locations\":[", f);
	struct locrow *rows;
	size_t nr = 0;
	if (gen) {
		fputs("{\"name\":\"(loop turn)\",\"polls\":", f);
		fprintf(f, "%" PRIu64 ",", s->turns.n);
		json_hist(f, &s->turns);
		fputs(",\"sched_delay\":{\"count\":0,\"p50_ns\":0,\"p99_ns\":0,\"max_ns\":0,"
			"\"wakes\":{}}}", f);
	} else {
		nr = loc_rows(s, &rows);
		for (size_t i = 0; i < nr; i++) {
			fprintf(f, "%s{\"name\":", i ? "," : "");
			d9__json_cstr(f, rows[i].name);
			fprintf(f, ",\"polls\":%" PRIu64 ",", rows[i].ls->polls.n);
			json_hist(f, &rows[i].ls->polls);
			fputs(",\"sched_delay\":{", f);
			json_hist(f, &rows[i].ls->sched);
			fputs(",\"wakes\":{", f);
			for (int k = 0, n = 0; k < NKINDS; k++)
				if (rows[i].ls->wakes[k])
					fprintf(f, "%s\"%s\":%" PRIu64, n++ ? "," : "", kind_name(k),
						rows[i].ls->wakes[k]);
			fputs("}}}", f);
		}
		free(rows);
	}
	fputs("],\"long_polls\":[", f);
	struct long_poll *lp = gen ? s->lt : s->lp;
	size_t nlp = gen ? s->nlt : s->nlp;
	qsort(lp, nlp, sizeof(*lp), d9__sum_cmp_long);
	for (size_t i = 0; i < nlp; i++) {
		fprintf(f, "%s{\"duration_ns\":%" PRIu64 ",\"location\":", i ? "," : "", lp[i].dur);
		d9__json_cstr(f, lp[i].loc ? lp[i].loc->name : gen ? "(loop turn)" : "(unknown)");
		fprintf(f, ",\"worker\":%u,\"pid\":%u,\"tid\":%u,\"coroutine\":%" PRIu64 ",\"start_ns\":%"
			PRId64 ",\"offset_ns\":%" PRId64 ",\"stack\":", lp[i].th->worker,
			lp[i].th->proc->pid, lp[i].th->tid, lp[i].co, lp[i].start_real,
			lp[i].start_real - t->start_real);
		d9__json_stack(f, t, lp[i].nhot ? lp[i].hot[0].stack : NULL);
		fprintf(f, ",\"cpu_samples\":%" PRIu64 ",\"offcpu_samples\":%" PRIu64, lp[i].cpu_on,
			lp[i].cpu_off);
		if (lp[i].weighed)
			fprintf(f, ",\"cpu_ns\":%" PRIu64 ",\"offcpu_ns\":%" PRIu64, lp[i].on_ns,
				lp[i].off_ns);
		if (lp[i].b.n) {
			/* its blocking calls, the longest first: the main item of the poll */
			fprintf(f, ",\"blocking\":{\"calls\":%" PRIu64 ",\"total_ns\":%" PRIu64
				",\"longest\":{\"call\":", lp[i].b.n, lp[i].b.ns);
			d9__json_cstr(f, lp[i].b.call);
			fprintf(f, ",\"fd_kind\":\"%s\",\"duration_ns\":%" PRIu64 ",\"stack\":",
				d9_fd_kind_name(lp[i].b.fd_kind), lp[i].b.max);
			d9__json_stack(f, t, lp[i].b.stack);
			fputs("}}", f);
		}
		fputs(",\"hot_stacks\":[", f);
		for (size_t j = 0; j < lp[i].nhot; j++) {
			fprintf(f, "%s{\"samples\":%" PRIu64 ",\"source\":\"%s\"", j ? "," : "",
				lp[i].hot[j].samples, lp[i].hot[j].off ? "off" : "on");
			if (lp[i].weighed)
				fprintf(f, ",\"time_ns\":%" PRIu64, lp[i].hot[j].ns);
			fputs(",\"stack\":", f);
			d9__json_stack(f, t, lp[i].hot[j].stack);
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputs("],\"sched_delay\":{", f);
	json_hist(f, &s->sched);
	fputs(",\"by_kind\":[", f);
	int first = 1;
	for (int k = 0; k < NKINDS; k++) {
		if (!s->kind_sched[k].n)
			continue;
		fprintf(f, "%s{\"kind\":\"%s\",", first ? "" : ",", kind_name(k));
		json_hist(f, &s->kind_sched[k]);
		fputc('}', f);
		first = 0;
	}
	fputs("]},\"timer_lateness\":{", f);
	json_hist(f, &s->lateness);
	fputs("},\"blocking_calls\":[", f);
	if (s->nbl) /* qsort wants a non-NULL base, even for 0 elements */
		qsort(s->bl, s->nbl, sizeof(*s->bl), d9__sum_cmp_blocking);
	for (size_t i = 0; i < s->nbl; i++) {
		fprintf(f, "%s{\"call\":", i ? "," : "");
		d9__json_cstr(f, s->bl[i]->call);
		fprintf(f, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64
			",\"stack\":", s->bl[i]->count, s->bl[i]->total, s->bl[i]->max);
		d9__json_stack(f, t, s->bl[i]->stack);
		fputc('}', f);
	}
	fputs("],\"preempted_calls\":[", f);
	for (size_t i = 0, n = 0; i <= SD_CALLS; i++) {
		const struct sdgroup *g = &s->sd[i];
		if (!g->count)
			continue;
		fprintf(f, "%s{\"call\":", n++ ? "," : "");
		if (g->call)
			d9__json_cstr(f, g->call);
		else
			fputs("null", f);
		fprintf(f, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"sched_wait_ns\":",
			g->count, g->total);
		if (g->wait_unknown == g->count)
			fputs("null", f);
		else
			fprintf(f, "%" PRIu64, g->wait);
		fprintf(f, ",\"sched_wait_unknown\":%" PRIu64 "}", g->wait_unknown);
	}
	fprintf(f, "],\"run_queue\":{\"samples\":%" PRIu64 ",\"mean\":%.2f,\"p50\":%" PRIu64
		",\"p99\":%" PRIu64 ",\"max\":%" PRIu64 "}", s->queue.n,
		s->queue.n ? (double)s->queue.sum / (double)s->queue.n : 0.0, d9__hist_pct(&s->queue, 50),
		d9__hist_pct(&s->queue, 99), s->queue.max);
	fprintf(f, ",\"zero_timeout_waits\":%" PRIu64, s->ztw);
	fprintf(f, ",\"idle_workers\":{\"queue_samples_with_work\":%" PRIu64
		",\"samples_with_idle_worker\":%" PRIu64 "}", s->queue_busy_samples, s->idle_samples);
	fprintf(f, ",\"cpu_samples\":{\"on\":%" PRIu64 ",\"off\":%" PRIu64 "}", s->cpu_on,
		s->cpu_off);
	uint64_t all = s->cpu_on + s->cpu_off;
	fprintf(f, ",\"stacks\":{\"samples\":%" PRIu64 ",\"invalid\":%" PRIu64
		",\"invalid_share\":%.4f,\"recorded\":%" PRIu64 ",\"truncated\":%" PRIu64
		",\"truncated_share\":%.4f,\"recorded_off\":%" PRIu64 ",\"truncated_off\":%" PRIu64
		",\"fp_rejected\":%" PRIu64 ",\"by_unwinder\":{", all,
		s->st_invalid, all ? (double)s->st_invalid / (double)all : 0.0, s->st_recorded,
		s->st_truncated, s->st_recorded ? (double)s->st_truncated / (double)s->st_recorded : 0.0,
		s->st_recorded_off, s->st_truncated_off, s->st_rejected);
	first = 1;
	for (uint64_t k = 0; k <= D9_UNWINDER_MAX + 1; k++)
		if (s->st_by[k]) {
			fprintf(f, "%s\"%s\":%" PRIu64, first ? "" : ",",
				k <= D9_UNWINDER_MAX ? d9_unwinder_name(k) : "unknown", s->st_by[k]);
			first = 0;
		}
	fputs("}},\"cpu_hotspots\":[", f);
	struct fnstat **fa;
	size_t nfa = d9__sum_functions(s, s->stack_on, s->stack_on_ns, on_by_time(s), &fa);
	json_functions(f, fa, nfa);
	d9__sum_functions_free(fa, nfa);
	fputs("],\"offcpu_hotspots\":[", f);
	nfa = d9__sum_functions(s, s->stack_off, s->stack_off_ns, off_by_time(s), &fa);
	json_functions(f, fa, nfa);
	d9__sum_functions_free(fa, nfa);
	fprintf(f, "],\"hotspots_by\":{\"on\":\"%s\",\"off\":\"%s\"},\"samples_without_time\":{"
		"\"on\":%" PRIu64 ",\"off\":%" PRIu64 "}", on_by_time(s) ? "time" : "samples",
		off_by_time(s) ? "time" : "samples", s->on_unweighed, s->off_unweighed);
	fprintf(f, ",\"drops\":{\"events\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"by_reason\":{",
		s->drops_events, s->drops_samples);
	first = 1;
	for (int r = 0; r <= D9_DROP_REASON_MAX + 1; r++) {
		if (!s->drop_reasons[r])
			continue;
		const char *n = r <= D9_DROP_REASON_MAX ? d9_drop_reason_name((uint64_t)r) : NULL;
		fprintf(f, "%s\"%s\":%" PRIu64, first ? "" : ",", n ? n : "unknown", s->drop_reasons[r]);
		first = 0;
	}
	fprintf(f, "}},\"data_quality\":{\"files\":%" PRIu64 ",\"readable\":%" PRIu64 ",\"unreadable\":%"
		PRIu64 ",\"bad_arguments\":%" PRIu64 ",\"damaged_files\":%" PRIu64
		",\"truncated_segments\":%" PRIu64 ",\"corrupt_segments\":%" PRIu64
		",\"corrupt_chunks\":%" PRIu64 ",\"bad_events\":%" PRIu64 ",\"bad_defs\":%" PRIu64
		",\"unknown_records\":%" PRIu64 ",\"live_segments\":%" PRIu64 ",\"seq_gaps\":%" PRIu64
		",\"polls_unknown\":%"
		PRIu64 ",\"loop_turns_unknown\":%" PRIu64 ",\"parks_unknown\":%" PRIu64
		",\"sched_delay_unknown\":%" PRIu64, t->files, t->readable, t->unreadable,
		t->bad_args, t->damaged_files, t->truncated_segments, t->corrupt_segments,
		t->corrupt_chunks, t->bad_events, t->bad_defs, t->unknown_records, t->live_segments,
		t->seq_gaps, s->polls_unknown, s->turns_unknown, s->parks_unknown, s->sched_unknown);
	uint64_t bseg, bbytes;
	d9__trace_budget(t, &bseg, &bbytes);
	uint64_t s3[4];
	d9__trace_s3(t, s3);
	fprintf(f, ",\"budget_deleted_segments\":%" PRIu64 ",\"budget_deleted_bytes\":%" PRIu64
		",\"s3_uploaded\":%" PRIu64 ",\"s3_uploaded_bytes\":%" PRIu64 ",\"s3_failures\":%" PRIu64
		",\"s3_evicted\":%" PRIu64 "}", bseg, bbytes, s3[0], s3[1], s3[2], s3[3]);
	fputs(",\"warnings\":[", f);
	for (size_t i = 0; i < t->nwarnings; i++) {
		if (i)
			fputc(',', f);
		d9__json_cstr(f, t->warnings[i]);
	}
	char sw[2][160];
	for (size_t i = 0, n = sum_warnings(s, sw); i < n; i++) {
		if (i || t->nwarnings)
			fputc(',', f);
		d9__json_cstr(f, sw[i]);
	}
	fputs("]}\n", f);
}

/* ---- text ------------------------------------------------------------------------------------ */
#define D(buf, v) d9__fmt_dur(buf, sizeof(buf), (int64_t)(v))

static void text_hist_line(FILE *f, const char *label, struct d9__hist *h)
{
	char a[32], b[32], c[32], d[32];

	fprintf(f, "  %-14s %8" PRIu64 "  p50 %-8s p90 %-8s p99 %-8s max %s\n", label, h->n,
		D(a, d9__hist_pct(h, 50)), D(b, d9__hist_pct(h, 90)), D(c, d9__hist_pct(h, 99)),
		D(d, h->max));
}

/* CLOCK_REALTIME ns as "2026-11-22T05:40:00.123456" (UTC). */
static const char *fmt_utc(char *buf, size_t n, int64_t ns)
{
	time_t sec = (time_t)(ns / 1000000000);
	struct tm tm;

	if (ns < 0 || !gmtime_r(&sec, &tm)) {
		snprintf(buf, n, "?");
		return buf;
	}
	size_t k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + k, n - k, ".%06lld", (long long)(ns % 1000000000) / 1000);
	return buf;
}

/* Prints up to max frame names of st, innermost first, each after sep (the first after first). */
static void text_stack(FILE *f, struct d9__trace *t, const struct d9__stack *st, int max,
	const char *first)
{
	const char *names[D9__MAX_INLINE];
	char buf[64];
	int shown = 0;

	for (uint32_t j = 0; st && j < st->n && shown < max; j++) {
		size_t k = d9__frame_names(t, st, j, names, D9__MAX_INLINE, buf, sizeof(buf));
		for (size_t m = 0; m < k && shown < max; m++, shown++)
			fprintf(f, "%s%s", shown ? " < " : first, names[m]);
	}
	if (!shown)
		fprintf(f, "%s%s", first, NO_STACK);
}

/* all: the source's samples, or its time in ns when the functions are by time */
static void text_functions(FILE *f, const char *what, struct fnstat **a, size_t n, uint64_t all)
{
	char x[32], y[32];

	if (!n)
		return;
	fprintf(f, "  %-8s %9s %7s %9s %7s  %s\n", what, "self", "self%", "total", "total%",
		"function");
	for (size_t i = 0; i < n && i < HOT_TOP; i++) {
		if (a[i]->by_ns)
			fprintf(f, "  %-8s %9s %6.1f%% %9s %6.1f%%  %s\n", "",
				D(x, (int64_t)a[i]->self_ns), pct(a[i]->self_ns, (int64_t)all),
				D(y, (int64_t)a[i]->total_ns), pct(a[i]->total_ns, (int64_t)all), a[i]->name);
		else
			fprintf(f, "  %-8s %9" PRIu64 " %6.1f%% %9" PRIu64 " %6.1f%%  %s\n", "", a[i]->self,
				pct(a[i]->self, (int64_t)all), a[i]->total, pct(a[i]->total, (int64_t)all),
				a[i]->name);
	}
}

/* The index in lp of the poll (loop turn, gen) that triggered a flight dump of the input: same
 * process and thread, starting within 5 ms of the manifest's time (its clock reading differs a
 * little from the segment's anchor), the nearest; -1 when none is listed. */
static long trigger_poll(const struct d9__trace *t, const struct long_poll *lp, size_t n, int gen)
{
	long best = -1;
	int64_t best_diff = 5000000;

	for (size_t k = 0; k < t->ndumps; k++) {
		const struct d9__dump *dp = &t->dumps[k];
		if (strcmp(dp->trigger, gen ? "loop turn" : "poll"))
			continue;
		for (size_t i = 0; i < n; i++) {
			int64_t diff = lp[i].start_real - dp->time_real;
			if (diff < 0)
				diff = -diff;
			if (lp[i].th->proc->pid == dp->pid && lp[i].th->tid == dp->tid && diff <= best_diff) {
				best = (long)i;
				best_diff = diff;
			}
		}
		if (best >= 0)
			break; /* the first dump's (by time) */
	}
	return best;
}

static void print_text(FILE *f, struct sum *s)
{
	struct d9__trace *t = s->t;
	int gen = d9__sum_generic(s);
	const char *unit = gen ? "loop turns" : "polls";
	char a[32], b[32], c[32], d[32];

	fprintf(f, "d9 trace summary%s\n", gen ? " (generic mode: loop turns in place of polls)" : "");
	char from[40], to[40];
	fprintf(f, "time range: %s to %s UTC (%s), %" PRIu64 " events in %" PRIu64 " segment(s)\n",
		fmt_utc(from, sizeof(from), s->seen ? s->first_real : 0),
		fmt_utc(to, sizeof(to), s->seen ? s->last_real : 0),
		D(a, s->seen ? s->last_real - s->first_real : 0), t->events, t->readable);
	if (s->req_n)
		fprintf(f, "requests: %" PRIu64 " recorded (%" PRIu64 " from the application's API; %"
			PRIu64 " ambiguous; %" PRIu64 " in their bytes): 'd9-analyze requests' lists the "
			"slowest, an API request in place of the zero-code one it lies in\n", s->req_n,
			s->req_api, s->req_ambiguous, s->req_counted);
	for (size_t i = 0; i < t->ndumps; i++) {
		const struct d9__dump *dp = &t->dumps[i];
		char what[128];
		/* a trigger before the first event (a blocking call's, recorded when it ended):
		 * before the trace's start, not "+-" */
		int64_t off = dp->time_real - t->start_real;
		fprintf(f, "flight dump triggered by %s at %s UTC (%s%s), pid %u",
			d9__dump_what(what, sizeof(what), dp), fmt_utc(from, sizeof(from), dp->time_real),
			off < 0 ? "-" : "+", D(a, off < 0 ? -off : off), dp->pid);
		if (dp->tid)
			fprintf(f, " tid %u", dp->tid);
		if (dp->extensions)
			fprintf(f, "; extended by %" PRIu64 " later trigger(s)", dp->extensions);
		if (dp->evicted)
			fprintf(f, "; %" PRIu64 " events of its window did not fit in D9_MAX_MEMORY "
				"(counted as dropped)", dp->evicted);
		fputc('\n', f);
	}
	for (size_t i = 0; i < t->nprocs; i++) {
		struct d9__proc *p = t->procs[i];
		struct pstat *ps = i < s->nps ? s->ps[i] : NULL;
		fprintf(f, "process %u (%s) on %s: %u segment(s), %zu worker(s), %" PRIu64
			" coroutines spawned; %s\n", p->pid, p->process, p->hostname, p->nsegs,
			workers_of(p), ps ? ps->spawned : 0, p->cmdline);
		if (p->priv_dropped)
			fprintf(f, "  privileges dropped: uid %u -> %u%s%s\n", p->priv_from_uid,
				p->priv_to_uid, p->priv_flags & D9_PRIV_PERF_DENIED ? "; perf denied after "
				"it: threads profiled later have no perf samples" : "",
				(p->priv_flags & (D9_PRIV_PERF_DENIED | D9_PRIV_KERNEL_SAMPLES_LOST)) ==
				D9_PRIV_KERNEL_SAMPLES_LOST ? "; CPU samples of threads profiled after it "
				"have no kernel frames" : "");
		for (uint32_t k = 0; k < p->nnarrowed; k++) {
			char buf[256];
			fprintf(f, "  recorder: %s\n", d9__narrowing_text(&p->narrowed[k], buf,
				sizeof(buf)));
		}
	}
	fprintf(f, "\nworkers:\n  %-8s %-8s %-16s %9s %7s %7s %-8s %-8s %-8s %7s %-8s  %s\n",
		"pid", "worker", "name", unit, "busy%", "parked%", "p50", "p99", "max", "parks", "cpu",
		"sched wait");
	struct wstat **wl;
	size_t nw = d9__sum_workers(s, &wl);
	for (size_t i = 0; i < nw; i++) {
		struct wstat *w = wl[i];
		int wg = w->polls.n == 0 && w->turns.n > 0;
		struct d9__hist *h = wg ? &w->turns : &w->polls;
		int64_t span = w->last_ns - w->first_ns;
		char e[32];
		/* "-": no Unpark of this worker carried the statistics (unknown, not 0) */
		fprintf(f, "  %-8u %-8u %-16.16s %9" PRIu64 " %6.1f%% %6.1f%% %-8s %-8s %-8s %7" PRIu64
			" %-8s  %s\n", w->th->proc->pid, w->th->worker, *w->th->name ? w->th->name : "-",
			h->n, pct(wg ? w->turn_ns : w->busy_ns, span), pct(w->parked_ns, span),
			D(a, d9__hist_pct(h, 50)), D(b, d9__hist_pct(h, 99)), D(c, h->max), w->parks,
			w->stat_unparks ? D(e, w->park_cpu_ns) : "-",
			w->stat_unparks ? D(d, w->sched_wait_ns) : "-");
	}
	free(wl);
	fprintf(f, "\ncoroutines: %" PRIu64 " spawned, %" PRIu64 " exited, %" PRIu64 " alive at the end\n",
		s->spawned, s->exited, s->alive);
	fprintf(f, "\n%s:\n", unit);
	text_hist_line(f, "all", gen ? &s->turns : &s->polls);
	if (!gen) {
		struct locrow *rows;
		size_t nr = loc_rows(s, &rows);
		fprintf(f, "\nspawn locations (by total poll time):\n  %9s %-9s %-9s %-9s %-9s  %s\n",
			"polls", "total", "mean", "p99", "max", "location");
		for (size_t i = 0; i < nr; i++) {
			struct d9__hist *h = &rows[i].ls->polls;
			fprintf(f, "  %9" PRIu64 " %-9s %-9s %-9s %-9s  %s\n", h->n, D(a, h->sum),
				D(b, h->n ? h->sum / h->n : 0), D(c, d9__hist_pct(h, 99)), D(d, h->max),
				rows[i].name);
		}
		free(rows);
	}
	struct long_poll *lp = gen ? s->lt : s->lp;
	size_t nlp = gen ? s->nlt : s->nlp;
	qsort(lp, nlp, sizeof(*lp), d9__sum_cmp_long);
	/* a flight dump's triggering poll (turn) goes first: what the dump is about */
	long trig = trigger_poll(t, lp, nlp, gen);
	if (trig > 0) {
		struct long_poll x = lp[trig];
		memmove(lp + 1, lp, (size_t)trig * sizeof(*lp));
		lp[0] = x;
	}
	fprintf(f, "\nlongest %s (top %d, at least %s):\n", unit, s->top, D(a, s->min_ns));
	for (size_t i = 0; i < nlp; i++) {
		fprintf(f, "  %-9s at +%-10s pid %u worker %u coroutine %" PRIu64 "  %s%s\n",
			D(a, lp[i].dur), D(b, lp[i].start_real - t->start_real), lp[i].th->proc->pid,
			lp[i].th->worker, lp[i].co, lp[i].loc ? lp[i].loc->name :
			gen ? "(loop turn)" : "(unknown)", trig >= 0 && i == 0 ? "  <- the dump's trigger" : "");
		if (lp[i].b.n) {
			/* the blocking calls first: the main item of the poll when there is one */
			const char *k = d9_fd_kind_name(lp[i].b.fd_kind);
			fprintf(f, "  %-9s blocked %s in %" PRIu64 " call(s); longest: %s%s%s%s %s", "",
				D(a, lp[i].b.ns), lp[i].b.n, lp[i].b.call, lp[i].b.fd_kind ? " (" : "",
				lp[i].b.fd_kind ? k : "", lp[i].b.fd_kind ? ")" : "", D(b, lp[i].b.max));
			text_stack(f, t, lp[i].b.stack, 4, ": ");
			fputc('\n', f);
		}
		if (!lp[i].nhot)
			continue;
		if (lp[i].weighed) {
			fprintf(f, "  %-9s cpu samples: %" PRIu64 " on, %" PRIu64 " off (%s on CPU, %s off "
				"CPU); hottest stack (%s %s-CPU)", "", lp[i].cpu_on, lp[i].cpu_off,
				D(a, lp[i].on_ns), D(b, lp[i].off_ns), D(c, lp[i].hot[0].ns),
				lp[i].hot[0].off ? "off" : "on");
		} else {
			fprintf(f, "  %-9s cpu samples: %" PRIu64 " on, %" PRIu64 " off; hottest stack (%"
				PRIu64 " %s-CPU)", "", lp[i].cpu_on, lp[i].cpu_off, lp[i].hot[0].samples,
				lp[i].hot[0].off ? "off" : "on");
		}
		text_stack(f, t, lp[i].hot[0].stack, 4, ": ");
		fputc('\n', f);
	}
	if (!nlp)
		fprintf(f, "  none\n");
	int on_t = on_by_time(s), off_t = off_by_time(s);
	uint64_t on_ns = 0, off_ns = 0;
	for (size_t i = 0; i < s->nstack_cnt; i++) {
		on_ns += s->stack_on_ns[i];
		off_ns += s->stack_off_ns[i];
	}
	if (on_t || off_t)
		fprintf(f, "\nCPU hot spots: %" PRIu64 " on-CPU and %" PRIu64 " off-CPU samples, by "
			"time: %s on CPU (the sampling period each), %s off CPU (each sample's time until "
			"its thread ran again) (top %d functions by self time; self: innermost frame, "
			"total: anywhere on the stack)\n", s->cpu_on, s->cpu_off, D(a, on_ns), D(b, off_ns),
			HOT_TOP);
	else
		fprintf(f, "\nCPU hot spots: %" PRIu64 " on-CPU and %" PRIu64 " off-CPU samples (top %d "
			"functions by self samples; self: innermost frame, total: anywhere on the stack)\n",
			s->cpu_on, s->cpu_off, HOT_TOP);
	struct fnstat **fa;
	size_t nfa = d9__sum_functions(s, s->stack_on, s->stack_on_ns, on_t, &fa);
	text_functions(f, "on-CPU", fa, nfa, on_t ? on_ns : s->cpu_on);
	d9__sum_functions_free(fa, nfa);
	nfa = d9__sum_functions(s, s->stack_off, s->stack_off_ns, off_t, &fa);
	text_functions(f, "off-CPU", fa, nfa, off_t ? off_ns : s->cpu_off);
	d9__sum_functions_free(fa, nfa);
	if ((on_t && s->on_unweighed) || (off_t && s->off_unweighed))
		fprintf(f, "  left out: %" PRIu64 " on-CPU and %" PRIu64 " off-CPU samples of unknown "
			"time (an off-CPU sample whose thread never ran again, or a lost switch record)\n",
			on_t ? s->on_unweighed : 0, off_t ? s->off_unweighed : 0);
	if (!s->cpu_on && !s->cpu_off)
		fprintf(f, "  none\n");
	else
		text_stack_quality(f, s);
	fprintf(f, "\nscheduling delay (wake -> next poll start; timers from their deadline):\n");
	text_hist_line(f, "all", &s->sched);
	for (int k = 0; k < NKINDS; k++)
		if (s->kind_sched[k].n)
			text_hist_line(f, kind_name(k), &s->kind_sched[k]);
	fprintf(f, "timer lateness (wake - deadline):\n");
	text_hist_line(f, "timers", &s->lateness);
	fprintf(f, "\nblocking calls (by call and stack):\n");
	if (s->nbl) /* qsort wants a non-NULL base, even for 0 elements */
		qsort(s->bl, s->nbl, sizeof(*s->bl), d9__sum_cmp_blocking);
	for (size_t i = 0; i < s->nbl; i++) {
		fprintf(f, "  %-16s %7" PRIu64 " calls  total %-9s max %-9s", s->bl[i]->call,
			s->bl[i]->count, D(a, s->bl[i]->total), D(b, s->bl[i]->max));
		if (s->bl[i]->stack && s->bl[i]->stack->n)
			text_stack(f, t, s->bl[i]->stack, 4, " stack ");
		fputc('\n', f);
	}
	if (!s->nbl)
		fprintf(f, "  none\n");
	fprintf(f, "\npreempted calls (past the blocking threshold, but running or runnable, not "
		"waiting):\n");
	size_t nsd = 0;
	for (size_t i = 0; i <= SD_CALLS; i++) {
		const struct sdgroup *g = &s->sd[i];
		if (!g->count)
			continue;
		nsd++;
		fprintf(f, "  %-16s %7" PRIu64 " calls  total %-9s sched wait %s%s\n",
			g->call ? g->call : "(other)", g->count, D(a, g->total),
			g->wait_unknown == g->count ? "-" : D(b, g->wait),
			g->wait_unknown && g->wait_unknown < g->count ? " (some unknown)" : "");
	}
	if (!nsd)
		fprintf(f, "  none\n");
	fprintf(f, "\nrun queue: %" PRIu64 " samples, mean %.2f, p50 %" PRIu64 ", p99 %" PRIu64
		", max %" PRIu64 "\n", s->queue.n,
		s->queue.n ? (double)s->queue.sum / (double)s->queue.n : 0.0, d9__hist_pct(&s->queue, 50),
		d9__hist_pct(&s->queue, 99), s->queue.max);
	fprintf(f, "zero-timeout waits: %" PRIu64 "\n", s->ztw);
	if (s->queue_busy_samples)
		fprintf(f, "idle workers: %" PRIu64 " of %" PRIu64 " run-queue samples with work waiting "
			"found another worker of the process parked\n", s->idle_samples,
			s->queue_busy_samples);
	fprintf(f, "\ndata quality: %" PRIu64 " events and %" PRIu64 " samples dropped; %" PRIu64
		" file(s), %" PRIu64 " unreadable, %" PRIu64 " truncated, %" PRIu64 " with corrupt data\n",
		s->drops_events, s->drops_samples, t->files + t->bad_args, t->unreadable + t->bad_args,
		t->truncated_segments, t->corrupt_segments);
	if (s->drops_events || s->drops_samples) {
		fputs("  dropped by reason:", f);
		for (int r = 0, n = 0; r <= D9_DROP_REASON_MAX + 1; r++) {
			const char *name = r <= D9_DROP_REASON_MAX ? d9_drop_reason_name((uint64_t)r) : NULL;
			if (s->drop_reasons[r])
				fprintf(f, "%s %s %" PRIu64, n++ ? "," : "", name ? name : "unknown",
					s->drop_reasons[r]);
		}
		fputc('\n', f);
	}
	if (t->seq_gaps)
		fprintf(f, "  %" PRIu64 " gap(s) in a process's segment_seq: segments missing from "
			"the input\n", t->seq_gaps);
	uint64_t bseg, bbytes;
	d9__trace_budget(t, &bseg, &bbytes);
	if (bseg)
		fprintf(f, "  %" PRIu64 " segment(s) (%" PRIu64 " bytes) deleted by the directory "
			"budget (D9_MAX_TOTAL_SIZE, D9_MAX_FILES), oldest first\n", bseg, bbytes);
	uint64_t s3[4];
	d9__trace_s3(t, s3);
	if (s3[0] || s3[2] || s3[3])
		fprintf(f, "  S3: %" PRIu64 " segment(s) (%" PRIu64 " bytes) uploaded, %" PRIu64
			" failed attempt(s), %" PRIu64 " segment(s) never uploaded (evicted before "
			"upload)\n", s3[0], s3[1], s3[2], s3[3]);
	if (t->live_segments)
		fprintf(f, "  %" PRIu64 " segment(s) still being written (.active of a live process): "
			"read up to their last complete chunk\n", t->live_segments);
	if (s->polls_unknown || s->turns_unknown || s->parks_unknown || s->sched_unknown)
		fprintf(f, "  unknown (a gap in the data between their two ends; left out of every "
			"duration): %" PRIu64 " polls, %" PRIu64 " loop turns, %" PRIu64 " parks, %" PRIu64
			" scheduling delays\n", s->polls_unknown, s->turns_unknown, s->parks_unknown,
			s->sched_unknown);
	for (size_t i = 0; i < t->nwarnings; i++)
		fprintf(f, "  warning: %s\n", t->warnings[i]);
	char sw[2][160];
	for (size_t i = 0, n = sum_warnings(s, sw); i < n; i++)
		fprintf(f, "  warning: %s\n", sw[i]);
}

/* ---- command --------------------------------------------------------------------------------- */
static void summary_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze [summary] [OPTIONS] TRACE...\n\n"
		"Summarises segment files (.bin, .bin.gz, .active, or directories of them): workers'\n"
		"busy and parked time, poll durations per spawn location, the longest polls,\n"
		"scheduling delay, timer lateness, blocking calls, run-queue depth, idle workers,\n"
		"CPU hot spots (the top 20 functions by on- and off-CPU time: each sample weighs the\n"
		"time it stands for, its sampling period on CPU, its time until the thread ran again\n"
		"off CPU; by sample counts in traces that do not record it; each long poll with its\n"
		"blocking calls, the longest first, its samples and hottest stacks) and data quality.\n"
		"Without a runtime (generic mode),\n"
		"loop turns take the place of polls. A poll, park, loop turn or scheduling delay with\n"
		"a gap in the data between its two ends (dropped events, a damaged or missing part of\n"
		"the trace) is counted as unknown and left out of every duration.\n\n"
		"options:\n"
		"  --json           one JSON object for scripts (keys in README.md, \"Analyzer\")\n"
		"  --top N          longest polls to list (default 10)\n"
		"  --min DURATION   only polls at least this long in that list (default 0)\n"
		"  --from WHEN      ignore events before WHEN\n"
		"  --to WHEN        ignore events from WHEN on\n"
		"  -h, --help       this text\n\n"
		"DURATION: a number with ns, us, ms, s, m or h (a bare number is seconds).\n"
		"WHEN: a DURATION from the trace start (\"1.5s\", \"250ms\"), or wall-clock time:\n"
		"\"2026-11-22T05:40:00[.frac]\" (local time; add Z for UTC), or Unix seconds\n"
		"(\"1763790000.25\"; any number from 1000000000 on, or prefixed with @).\n"
		"exit status: 0 ok, 2 usage, 3 no readable trace, 4 output written but input damaged\n");
}

/* Parses --from/--to into t; returns 0 or -1 after a message. */
static int parse_window(struct d9__trace *t, const char *from, const char *to)
{
	if (from && d9__parse_when(from, &t->from)) {
		fprintf(stderr, "d9-analyze: --from: bad time '%s'\n", from);
		return -1;
	}
	if (to && d9__parse_when(to, &t->to)) {
		fprintf(stderr, "d9-analyze: --to: bad time '%s'\n", to);
		return -1;
	}
	return 0;
}

int d9__cmd_summary(int argc, char **argv)
{
	int json = 0, top = 10, nargs = 0, rc;
	int64_t min_ns = 0;
	const char *v, *from = NULL, *to = NULL;
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	struct d9__trace t;
	struct sum s;

	if (!args)
		return D9_EXIT_USAGE;
	memset(&t, 0, sizeof(t));
	for (int i = 1; i < argc; i++) {
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			summary_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if ((r = d9__opt(argc, argv, &i, "--top", &v)) == 1) {
			char *end;
			long n = strtol(v, &end, 10);
			if (*end || end == v || n < 0 || n > 100000) {
				fprintf(stderr, "d9-analyze: --top: want a count from 0 to 100000, not '%s'\n", v);
				goto usage;
			}
			top = (int)n;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--min", &v)) == 1) {
			if (d9__parse_duration(v, &min_ns)) {
				fprintf(stderr, "d9-analyze: --min: bad duration '%s'\n", v);
				goto usage;
			}
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--from", &v)) == 1) {
			from = v;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--to", &v)) == 1) {
			to = v;
		} else if (r == 0 && d9__opt_arg("summary", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (d9__opt_traces("summary", nargs))
		goto usage;
	if (parse_window(&t, from, to))
		goto usage;
	if (d9__trace_open(&t, args, nargs) || d9__sum_init(&s, &t, top, min_ns)) {
		fprintf(stderr, "d9-analyze: out of memory\n");
		free(args);
		d9__trace_close(&t);
		return D9_EXIT_NO_TRACE;
	}
	free(args);
	if (!t.readable) {
		fprintf(stderr, "d9-analyze: no readable trace segment in the input\n");
		d9__sum_free(&s);
		d9__trace_close(&t);
		return D9_EXIT_NO_TRACE;
	}
	if (d9__trace_run(&t, d9__sum_event, &s) || s.oom)
		fprintf(stderr, "d9-analyze: out of memory: the summary is incomplete\n");
	d9__sum_judge_stacks(&s);
	if (json)
		print_json(stdout, &s);
	else
		print_text(stdout, &s);
	fflush(stdout);
	rc = d9__trace_exit_code(&t);
	d9__sum_free(&s);
	d9__trace_close(&t);
	return rc;
usage:
	free(args);
	summary_help(stderr);
	return D9_EXIT_USAGE;
}
