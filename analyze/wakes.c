/* wakes.c: wake -> poll pairing and coroutine lifetimes in time order within a process (wakes.h).
 * A process's Spawn, Wake, PollStart and CoroutineExit events wait in a heap ordered by (time,
 * arrival) until every thread that may still hold an earlier one has moved past them: each
 * thread's events arrive in time order, so the horizon is the oldest latest-time among the
 * process's threads (one known from its Thread definition, with no event yet, holds it back
 * entirely), leaving out threads LAG_NS behind (exited, or idle for good). One thread: the
 * horizon is that thread's own time and every event is settled at once, in file order, as
 * before. Never lies: an event that arrives after its coroutine's later events were settled is
 * applied where it still can be, else its pair is counted as unknown. Memory: the entries
 * younger than the horizon, at most MAX_PENDING per process (processes are read one by one). */
#include "wakes.h"
#include "d9-format.h"

#include <stdlib.h>
#include <string.h>

/* A thread this far behind the process's latest time holds nothing back: a quiet thread's chunk
 * reaches the file within the flush interval (60 s at most), but one running without recording
 * (a pool thread blocked in its work) keeps its chunk until its next event, seconds later. */
#define LAG_NS 60000000000ll
#define MAX_PENDING (1u << 20) /* entries per process (~72 MiB); past it the oldest settle early */
#define SMALL_PROC 16 /* threads up to which the horizon is recomputed at every event */

enum { E_SPAWN, E_WAKE, E_POLL, E_EXIT };

/* One event waiting for the horizon. */
struct went {
	int64_t ns; /* the event's time: the heap's key, then seq */
	uint64_t seq; /* arrival order in the process */
	uint64_t co;
	uint64_t kind; /* Wake */
	int64_t wake_ns; /* Wake: runnable since (timers: the deadline if earlier) */
	int64_t real_ns;
	uint64_t gaps; /* the process's gaps at arrival (d9__proc.gaps) */
	int64_t gap_ns; /* d9__proc.gap_ns at arrival */
	const struct d9__loc *loc; /* PollStart */
	uint32_t tid, th_idx;
	uint8_t type, tag;
};

/* A coroutine, in time order up to its latest settled entry. */
struct wco {
	uint8_t alive; /* seen (Spawn, Wake, PollStart) and not exited since */
	uint8_t has_wake; /* wake: the first Wake since its last PollStart */
	uint8_t done; /* done_ns is set */
	uint32_t npending; /* its entries in the heap */
	int64_t done_ns; /* time of its latest settled entry */
	int64_t last_poll_ns; /* its latest settled PollStart (INT64_MIN: none) */
	struct went wake;
};

/* How far a thread of a process is. */
struct d9__wthread {
	int64_t ns; /* its latest event time; INT64_MIN: none yet */
	int64_t since; /* no event yet: the process's latest time when it became known */
	uint8_t listed; /* in its d9__wproc's threads[] */
};

struct d9__wproc {
	struct d9__map cos; /* coroutine id -> struct wco */
	struct went *heap;
	size_t n, cap;
	uint64_t seq;
	int64_t horizon; /* entries up to this time are settled */
	int64_t maxf; /* the latest time of any thread */
	uint32_t *threads; /* d9__thread.idx of the threads known (events or definitions) */
	size_t nthreads, capthreads;
	size_t known; /* d9__proc.threads.n when the threads were last listed */
	uint32_t since; /* events since the horizon was last recomputed (many threads) */
	int stale; /* a thread moved on since the horizon was last recomputed */
	uint64_t alive; /* set at D9__EV_PROCESS_END */
};

void d9__wakes_init(struct d9__wakes *w, d9__wake_fn *fn, void *ctx)
{
	memset(w, 0, sizeof(*w));
	w->fn = fn;
	w->ctx = ctx;
}

static int wk_before(const struct went *a, const struct went *b)
{
	return a->ns < b->ns || (a->ns == b->ns && a->seq < b->seq);
}

static int wk_heap_push(struct d9__wproc *p, const struct went *e)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct went *h = realloc(p->heap, cap * sizeof(*h));
		if (!h)
			return -1;
		p->heap = h;
		p->cap = cap;
	}
	size_t i = p->n++;
	while (i > 0 && wk_before(e, &p->heap[(i - 1) / 2])) {
		p->heap[i] = p->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	p->heap[i] = *e;
	return 0;
}

static struct went wk_heap_pop(struct d9__wproc *p)
{
	struct went top = p->heap[0], last = p->heap[--p->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= p->n)
			break;
		if (c + 1 < p->n && wk_before(&p->heap[c + 1], &p->heap[c]))
			c++;
		if (!wk_before(&p->heap[c], &last))
			break;
		p->heap[i] = p->heap[c];
		i = c;
	}
	if (p->n)
		p->heap[i] = last;
	return top;
}

static struct d9__wproc *wk_wproc_of(struct d9__wakes *w, const struct d9__proc *proc)
{
	if (proc->idx >= w->nprocs) {
		size_t n = proc->idx + 16;
		struct d9__wproc **a = realloc(w->procs, n * sizeof(*a));
		if (!a)
			return NULL;
		memset(a + w->nprocs, 0, (n - w->nprocs) * sizeof(*a));
		w->procs = a;
		w->nprocs = n;
	}
	if (!w->procs[proc->idx]) {
		struct d9__wproc *p = calloc(1, sizeof(*p));
		if (!p)
			return NULL;
		p->horizon = p->maxf = INT64_MIN;
		w->procs[proc->idx] = p;
	}
	return w->procs[proc->idx];
}

/* The entry of thread idx, listed in p (since: now); NULL when out of memory. */
static struct d9__wthread *wk_thread(struct d9__wakes *w, struct d9__wproc *p, uint32_t idx)
{
	if (idx >= w->nfront) {
		size_t n = idx + 64;
		struct d9__wthread *a = realloc(w->front, n * sizeof(*a));
		if (!a)
			return NULL;
		for (size_t i = w->nfront; i < n; i++)
			a[i] = (struct d9__wthread){ INT64_MIN, INT64_MIN, 0 };
		w->front = a;
		w->nfront = n;
	}
	struct d9__wthread *t = &w->front[idx];
	if (!t->listed) {
		if (p->nthreads == p->capthreads) {
			size_t cap = p->capthreads ? p->capthreads * 2 : 8;
			uint32_t *a = realloc(p->threads, cap * sizeof(*a));
			if (!a)
				return NULL;
			p->threads = a;
			p->capthreads = cap;
		}
		p->threads[p->nthreads++] = idx;
		t->listed = 1;
		t->since = p->maxf;
	}
	return t;
}

/* Lists the threads the trace knows for proc (a Thread definition comes before the thread's
 * first chunk: a thread with events still to come), then moves thread th's time on to ns.
 * Returns -1 when out of memory. */
static int wk_thread_at(struct d9__wakes *w, struct d9__wproc *p, const struct d9__thread *th,
	int64_t ns)
{
	const struct d9__map *m = &th->proc->threads;
	struct d9__wthread *t;

	if (m->n != p->known) {
		for (size_t i = 0; i < m->cap; i++)
			if (m->vals && m->vals[i] &&
			    !wk_thread(w, p, ((const struct d9__thread *)m->vals[i])->idx))
				return -1;
		p->known = m->n;
	}
	if (!(t = wk_thread(w, p, th->idx)))
		return -1;
	if (ns > t->ns)
		t->ns = ns;
	if (ns > p->maxf)
		p->maxf = ns;
	return 0;
}

/* The horizon: the earliest latest-time among the threads not LAG_NS behind. It only grows (what
 * is settled stays settled; a thread seen for the first time behind it makes late entries). */
static void wk_horizon_update(const struct d9__wakes *w, struct d9__wproc *p)
{
	int64_t h = INT64_MAX;
	int64_t quiet = p->maxf > INT64_MIN + LAG_NS ? p->maxf - LAG_NS : INT64_MIN;

	for (size_t i = 0; i < p->nthreads; i++) {
		struct d9__wthread *t = &w->front[p->threads[i]];
		if (t->ns == INT64_MIN && t->since == INT64_MIN)
			t->since = p->maxf; /* known before the process's first event */
		if (t->ns == INT64_MIN ? t->since >= quiet : t->ns >= quiet)
			h = t->ns < h ? t->ns : h;
	}
	if (h != INT64_MAX && h > p->horizon)
		p->horizon = h;
	p->since = 0;
}

/* The wake and poll of a pair: unknown when a gap was counted between their arrivals, or one
 * counted before the later arrival reached past the wake (trace.h, "Pairing across gaps"). */
static int wk_pair_gap(const struct went *wake, const struct went *poll)
{
	const struct went *first = wake->seq < poll->seq ? wake : poll;
	const struct went *last = first == wake ? poll : wake;

	return last->gaps != first->gaps || last->gap_ns >= wake->wake_ns;
}

static void wk_emit(struct d9__wakes *w, struct d9__proc *proc, int result, const struct went *wake,
	const struct went *poll, uint64_t co)
{
	struct d9__wake_pair r;

	memset(&r, 0, sizeof(r));
	r.proc = proc;
	r.result = result;
	r.co = co;
	if (wake) {
		r.kind = wake->kind;
		r.wake_ns = wake->wake_ns;
		r.wake_real_ns = wake->real_ns;
		r.wake_tid = wake->tid;
		r.wake_th_idx = wake->th_idx;
		r.wake_tag = wake->tag;
	}
	if (poll) {
		r.poll_ns = poll->ns;
		r.poll_real_ns = poll->real_ns;
		r.poll_tid = poll->tid;
		r.loc = poll->loc;
		if (wake && result == D9__PAIR_OK)
			r.delay_ns = poll->ns > wake->wake_ns ?
				(uint64_t)(poll->ns - wake->wake_ns) : 0;
	}
	w->fn(w->ctx, &r);
}

/* Applies e, the next entry of c in time order (or a late one, where it still fits). */
static void wk_apply(struct d9__wakes *w, struct d9__proc *proc, struct wco *c,
	const struct went *e)
{
	switch (e->type) {
	case E_SPAWN:
		c->alive = 1;
		break;
	case E_WAKE:
		c->alive = 1;
		/* the first wake since its last poll made it runnable (a late one: earlier) */
		if (!c->has_wake || e->ns < c->wake.ns) {
			c->has_wake = 1;
			c->wake = *e;
		}
		break;
	case E_POLL:
		c->alive = 1;
		if (c->has_wake && c->wake.ns <= e->ns) {
			int r = wk_pair_gap(&c->wake, e) ? D9__PAIR_UNKNOWN : D9__PAIR_OK;
			wk_emit(w, proc, r, &c->wake, e, e->co);
			c->has_wake = 0;
		} else {
			/* (a late poll before the pending wake leaves it to the next poll) */
			wk_emit(w, proc, D9__PAIR_NONE, NULL, e, e->co);
		}
		if (e->ns > c->last_poll_ns)
			c->last_poll_ns = e->ns;
		break;
	case E_EXIT:
		/* as a fresh coroutine from here on, as if it had never been seen */
		c->alive = c->has_wake = 0;
		c->last_poll_ns = INT64_MIN;
		break;
	}
	if (!c->done || e->ns > c->done_ns)
		c->done_ns = e->ns;
	c->done = 1;
}

static void wk_drop_if_dead(struct d9__wproc *p, struct wco *c, uint64_t co)
{
	if (!c->alive && !c->npending)
		free(d9__map_del(&p->cos, co));
}

/* Settles the entries up to the horizon (all of them when all is set). */
static void wk_settle(struct d9__wakes *w, struct d9__proc *proc, struct d9__wproc *p, int all)
{
	while (p->n && (all || p->heap[0].ns <= p->horizon)) {
		struct went e = wk_heap_pop(p);
		struct wco *c = d9__map_get(&p->cos, e.co);
		if (!c)
			continue; /* cannot happen: an entry keeps its coroutine */
		c->npending--;
		wk_apply(w, proc, c, &e);
		wk_drop_if_dead(p, c, e.co);
	}
}

static void wk_process_end(struct d9__wakes *w, struct d9__proc *proc, struct d9__wproc *p)
{
	wk_settle(w, proc, p, 1);
	p->alive = 0;
	for (size_t i = 0; i < p->cos.cap; i++)
		if (p->cos.vals && p->cos.vals[i]) {
			struct wco *c = p->cos.vals[i];
			p->alive += c->alive;
			free(c);
		}
	d9__map_free(&p->cos);
	memset(&p->cos, 0, sizeof(p->cos));
	free(p->heap);
	p->heap = NULL;
	p->n = p->cap = 0;
	p->horizon = p->maxf = INT64_MIN;
	for (size_t i = 0; i < p->nthreads; i++)
		w->front[p->threads[i]] = (struct d9__wthread){ INT64_MIN, INT64_MIN, 0 };
	p->nthreads = 0;
	p->known = 0;
}

void d9__wakes_event(struct d9__wakes *w, const struct d9__ev *ev, uint8_t tag)
{
	struct d9__wproc *p;
	struct went e;

	if (!ev->proc || !(p = wk_wproc_of(w, ev->proc))) {
		w->oom |= ev->proc != NULL;
		return;
	}
	if (ev->type == D9__EV_PROCESS_END) {
		wk_process_end(w, ev->proc, p);
		return;
	}
	if (!ev->th)
		return;
	/* samples come from chunks of their own: their times say nothing of the thread's events */
	if (ev->type != D9_EV_CPU_SAMPLE &&
	    !(ev->type == D9_EV_DROPPED && ev->kind == D9_DROP_SAMPLES_LOST)) {
		struct d9__wthread *t = ev->th->idx < w->nfront ? &w->front[ev->th->idx] : NULL;
		if (t && t->listed && ev->th->proc->threads.n == p->known) {
			/* the common case: a thread already listed, no new one */
			if (ev->ns > t->ns)
				t->ns = ev->ns;
			if (ev->ns > p->maxf)
				p->maxf = ev->ns;
		} else if (wk_thread_at(w, p, ev->th, ev->ns)) {
			w->oom = 1;
			return;
		}
		p->stale = 1;
	}
	/* the horizon is needed only with entries to settle or one arriving */
	if (p->stale && (p->n || ev->type == D9_EV_SPAWN || ev->type == D9_EV_WAKE ||
	    ev->type == D9_EV_POLL_START || ev->type == D9_EV_COROUTINE_EXIT) &&
	    (p->nthreads <= SMALL_PROC || ++p->since >= 64)) {
		wk_horizon_update(w, p);
		p->stale = 0;
	}
	switch (ev->type) {
	case D9_EV_SPAWN:
		e.type = E_SPAWN;
		break;
	case D9_EV_WAKE:
		e.type = E_WAKE;
		break;
	case D9_EV_POLL_START:
		e.type = E_POLL;
		break;
	case D9_EV_COROUTINE_EXIT:
		e.type = E_EXIT;
		break;
	default:
		if (p->n)
			wk_settle(w, ev->proc, p, 0);
		return;
	}
	if (!ev->co)
		return;
	e.ns = ev->ns;
	e.seq = p->seq++;
	e.co = ev->co;
	e.kind = ev->kind;
	e.wake_ns = ev->ns;
	if (ev->type == D9_EV_WAKE && ev->kind == D9_WAKE_TIMER && ev->deadline_ns < ev->ns)
		e.wake_ns = ev->deadline_ns; /* timers: from the deadline */
	e.real_ns = ev->real_ns;
	e.gaps = ev->proc->gaps;
	e.gap_ns = ev->proc->gap_ns;
	e.loc = ev->loc;
	e.tid = ev->th->tid;
	e.th_idx = (uint32_t)ev->th->idx;
	e.tag = tag;

	struct wco *c = d9__map_get(&p->cos, e.co);
	if (!c) {
		if (!(c = calloc(1, sizeof(*c))) || d9__map_put(&p->cos, e.co, c)) {
			free(c);
			w->oom = 1;
			return;
		}
		c->last_poll_ns = INT64_MIN;
	}
	if (c->done && e.ns < c->done_ns) {
		/* later events of its coroutine are settled already */
		w->late++;
		if (e.type == E_WAKE && e.ns <= c->last_poll_ns)
			/* the poll it led to is settled */
			wk_emit(w, ev->proc, D9__PAIR_UNKNOWN, &e, NULL, e.co);
		else
			wk_apply(w, ev->proc, c, &e);
		wk_drop_if_dead(p, c, e.co);
	} else if (!p->n && e.ns <= p->horizon) {
		/* nothing waits and nothing earlier can come: its turn is now (one thread, always) */
		wk_apply(w, ev->proc, c, &e);
		wk_drop_if_dead(p, c, e.co);
		return;
	} else if (p->n >= MAX_PENDING || wk_heap_push(p, &e)) {
		/* full (or out of memory): the oldest entries settle now, out of their turn */
		struct went old = p->n ? p->heap[0] : e;
		if (old.ns > p->horizon)
			p->horizon = old.ns;
		wk_settle(w, ev->proc, p, 0);
		if (wk_heap_push(p, &e)) {
			w->oom = 1;
			return;
		}
		c->npending++;
	} else {
		c->npending++;
	}
	wk_settle(w, ev->proc, p, 0);
}

uint64_t d9__wakes_alive(const struct d9__wakes *w, const struct d9__proc *p)
{
	return p->idx < w->nprocs && w->procs[p->idx] ? w->procs[p->idx]->alive : 0;
}

void d9__wakes_free(struct d9__wakes *w)
{
	for (size_t i = 0; i < w->nprocs; i++) {
		struct d9__wproc *p = w->procs[i];
		if (!p)
			continue;
		for (size_t j = 0; j < p->cos.cap; j++)
			if (p->cos.vals && p->cos.vals[j])
				free(p->cos.vals[j]);
		d9__map_free(&p->cos);
		free(p->heap);
		free(p->threads);
		free(p);
	}
	free(w->procs);
	free(w->front);
	memset(w, 0, sizeof(*w));
}
