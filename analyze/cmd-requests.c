/* cmd-requests.c: `d9-analyze requests`: the requests of a trace (RequestBegin to RequestEnd,
 * zero-code or the application's), the slowest first, each with its time split: on CPU (its
 * coroutine's polls, or in generic mode the loop turns, inside it, less blocking calls), blocked
 * (BlockingCalls inside), waiting to be scheduled (wake to poll) and waiting off CPU (the rest:
 * for the peer, a timer, another thread's work), the polls and the hottest CPU stack inside it;
 * percentiles per path when the HTTP preview was on; --json: one object per request. Streaming: memory grows with open requests, the top N
 * and the paths, never with events. Rules: README.md, "Requests"; agent/DESIGN.md, "Requests". */
#include "analyze.h"
#include "d9-format.h"
#include "json.h"
#include "trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RQ_STACKS 4 /* distinct stacks counted per request (the hottest is shown) */
#define RQ_RECENT 16 /* latest time pieces per request, clipped at its real end */

enum { K_CPU = 0, K_BLOCKED = 1, K_SCHED = 2 };

struct rq {
	uint64_t id, co;
	uint32_t source;
	int64_t fd;
	const struct d9__proc *proc;
	const struct d9__thread *th;
	int64_t begin_ns, begin_real, end_ns;
	const char *preview;
	uint64_t mark; /* gap mark of its thread at the begin */
	uint64_t pmark; /* its process's gap count at the begin (a request that moves threads) */
	/* it ended on another thread than it began (a thread pool hands connections over: Apache's
	 * event MPM): its duration is known, its time split only as far as its first thread saw */
	const struct d9__thread *end_th;
	uint64_t cpu_ns, blocked_ns, sched_ns, polls, samples, blocking_calls;
	const char *block_call; /* its longest blocking call */
	uint64_t block_call_ns;
	const struct d9__stack *block_stack;
	struct { const struct d9__stack *st; uint32_t n; } stk[RQ_STACKS];
	uint64_t bytes_in, bytes_out, flags, count;
	int64_t status;
	int overridden; /* an API request of the same coroutine (loop thread) replaced it */
	/* The response ended tail_ns before RequestEnd (the reader's return tells it later): the
	 * pieces of time counted after that real end are taken back, from the latest ones */
	struct { int64_t s, e; int kind; } recent[RQ_RECENT];
	unsigned nrecent; /* pieces added so far; the last RQ_RECENT are kept */
};

/* One thread's view. */
struct rthr {
	int in_poll, in_turn;
	uint64_t poll_co;
	int64_t poll_ns, turn_ns;
	struct rq **loop; /* open requests served by its loop (coroutine 0) */
	size_t nloop, caploop;
};

struct path {
	const char *name;
	struct d9__hist h;
	uint64_t ambiguous;
};

struct reqs {
	struct d9__trace *t;
	int json;
	long top, pid;
	struct rthr *thr; /* by thread idx */
	size_t nthr;
	struct d9__map open; /* key(pid, source, id) -> struct rq */
	struct d9__map by_co; /* key(pid, coroutine) -> the open request of that coroutine */
	/* key(pid, source, id) -> struct early: an end read before its begin (another thread's
	 * chunk, written first: a request that moved threads) */
	struct d9__map early;
	struct d9__map wakes; /* key(pid, coroutine) -> its last Wake's ns + 1 */
	struct rq **best; /* the top N, a min-heap by duration */
	size_t nbest;
	struct d9__map paths; /* preview (interned pointer) -> struct path */
	uint64_t n, ambiguous, ambiguous_count, closed, unknown, untracked, api, overridden;
	uint64_t unmatched; /* ends without a begin (before the window, or a gap) */
	uint64_t moved; /* ended on another thread than they began (end_th) */
	uint64_t counted; /* requests their bytes held, summed (1 when unknown) */
	int oom;
};

static uint64_t key3(uint32_t pid, uint32_t source, uint64_t id)
{
	return d9__hash64(((uint64_t)pid << 1 | source) * 0x9E3779B97F4A7C15ull) ^ id;
}

static uint64_t key_co(uint32_t pid, uint64_t co)
{
	return d9__hash64((uint64_t)pid + 0x51ED27) ^ co;
}

static struct rthr *thr_of(struct reqs *q, const struct d9__thread *th)
{
	if (th->idx >= q->nthr) {
		size_t n = th->idx + 64;
		struct rthr *m = realloc(q->thr, n * sizeof(*m));
		if (!m) {
			q->oom = 1;
			return NULL;
		}
		memset(m + q->nthr, 0, (n - q->nthr) * sizeof(*m));
		q->thr = m;
		q->nthr = n;
	}
	return &q->thr[th->idx];
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Counts [s, e) of r's time as kind (K_*), from its begin on. */
static void add_time(struct rq *r, int kind, int64_t s, int64_t e)
{
	s = max64(s, r->begin_ns);
	if (e <= s)
		return;
	uint64_t d = (uint64_t)(e - s);
	if (kind == K_CPU)
		r->cpu_ns += d;
	else if (kind == K_BLOCKED)
		r->blocked_ns += d;
	else
		r->sched_ns += d;
	unsigned i = r->nrecent++ % RQ_RECENT;
	r->recent[i].s = s;
	r->recent[i].e = e;
	r->recent[i].kind = kind;
}

/* Takes back what was counted after the request's real end. */
static void clip_time(struct rq *r)
{
	unsigned n = r->nrecent < RQ_RECENT ? r->nrecent : RQ_RECENT;

	for (unsigned i = 0; i < n; i++) {
		if (r->recent[i].e <= r->end_ns)
			continue;
		uint64_t over = (uint64_t)(r->recent[i].e - max64(r->recent[i].s, r->end_ns));
		uint64_t *v = r->recent[i].kind == K_CPU ? &r->cpu_ns :
			r->recent[i].kind == K_BLOCKED ? &r->blocked_ns : &r->sched_ns;
		*v = *v > over ? *v - over : 0;
	}
}

static void add_stack(struct rq *r, const struct d9__stack *st)
{
	int free_i = -1;

	for (int i = 0; i < RQ_STACKS; i++) {
		if (r->stk[i].st == st) {
			r->stk[i].n++;
			return;
		}
		if (!r->stk[i].st && free_i < 0)
			free_i = i;
	}
	if (free_i >= 0) {
		r->stk[free_i].st = st;
		r->stk[free_i].n = 1;
	}
}

static const struct d9__stack *hot_stack(const struct rq *r, uint32_t *n)
{
	int b = -1;

	for (int i = 0; i < RQ_STACKS; i++)
		if (r->stk[i].st && (b < 0 || r->stk[i].n > r->stk[b].n))
			b = i;
	*n = b < 0 ? 0 : r->stk[b].n;
	return b < 0 ? NULL : r->stk[b].st;
}

/* ---- output ------------------------------------------------------------------------------------ */

static uint64_t dur_of(const struct rq *r)
{
	return r->end_ns > r->begin_ns ? (uint64_t)(r->end_ns - r->begin_ns) : 0;
}

/* on CPU, and waiting off CPU (the rest: the peer, a timer, another thread) */
static void split(const struct rq *r, uint64_t *cpu, uint64_t *wait)
{
	uint64_t d = dur_of(r);
	uint64_t c = r->cpu_ns > r->blocked_ns ? r->cpu_ns - r->blocked_ns : 0;
	uint64_t used = c + r->blocked_ns + r->sched_ns;

	*cpu = c;
	*wait = d > used ? d - used : 0;
}

static const char *proto_name(uint64_t flags)
{
	return flags & D9_REQ_HTTP ? "http" : flags & D9_REQ_RESP ? "resp" : NULL;
}

static void print_json(struct reqs *q, const struct rq *r)
{
	FILE *f = stdout;
	uint64_t cpu, wait;
	uint32_t ns;
	const struct d9__stack *hs = hot_stack(r, &ns);
	const char *proto = proto_name(r->flags);

	split(r, &cpu, &wait);
	char wbuf[24] = "null"; /* moved threads: the other thread's part is not in the split */
	if (!r->end_th)
		snprintf(wbuf, sizeof(wbuf), "%" PRIu64, wait);
	fprintf(f, "{\"id\":%" PRIu64 ",\"source\":\"%s\",\"pid\":%u,\"tid\":%u,\"worker\":%u,"
		"\"coroutine\":%" PRIu64 ",\"fd\":%" PRId64 ",\"begin_ns\":%" PRId64
		",\"offset_ns\":%" PRId64 ",\"begin_mono_ns\":%" PRId64 ",\"end_mono_ns\":%" PRId64
		",\"duration_ns\":%" PRIu64 ",\"cpu_ns\":%" PRIu64 ",\"blocked_ns\":%" PRIu64
		",\"sched_ns\":%" PRIu64 ",\"waiting_ns\":%s,\"polls\":%" PRIu64
		",\"blocking_calls\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"bytes_in\":%" PRIu64
		",\"bytes_out\":%" PRIu64 ",\"count\":%" PRIu64 ",\"ambiguous\":%s,\"closed\":%s"
		",\"turn_end\":%s,\"no_response\":%s,\"status\":%" PRId64 ",\"protocol\":",
		r->id, r->source == D9_REQ_SRC_API ? "api" : "zero-code", r->proc->pid, r->th->tid,
		r->th->worker, r->co, r->fd, r->begin_real, r->begin_real - q->t->start_real,
		r->begin_ns, r->end_ns, dur_of(r), cpu, r->blocked_ns, r->sched_ns, wbuf, r->polls,
		r->blocking_calls, r->samples, r->bytes_in, r->bytes_out, r->count,
		r->flags & D9_REQ_AMBIGUOUS ? "true" : "false",
		r->flags & D9_REQ_CLOSED ? "true" : "false",
		r->flags & D9_REQ_TURN_END ? "true" : "false",
		r->flags & D9_REQ_NO_RESPONSE ? "true" : "false", r->status);
	if (proto)
		fprintf(f, "\"%s\"", proto);
	else
		fputs("null", f);
	fputs(",\"preview\":", f);
	if (r->preview)
		d9__json_cstr(f, r->preview);
	else
		fputs("null", f);
	fputs(",\"blocking_call\":", f);
	if (r->block_call) {
		d9__json_cstr(f, r->block_call);
		fprintf(f, ",\"blocking_call_ns\":%" PRIu64, r->block_call_ns);
	} else {
		fputs("null", f);
	}
	if (hs) {
		fprintf(f, ",\"hot_stack_samples\":%u,\"hot_stack\":", ns);
		d9__json_stack(f, q->t, hs);
	}
	if (r->end_th)
		fprintf(f, ",\"moved_threads\":true,\"end_tid\":%u,\"end_worker\":%u", r->end_th->tid,
			r->end_th->worker);
	fputs("}\n", f);
}

static void print_text(struct reqs *q, const struct rq *r)
{
	char a[32], b[32], c[32], d[32], e[32], g[32];
	uint64_t cpu, wait;
	uint32_t ns;
	const struct d9__stack *hs = hot_stack(r, &ns);

	split(r, &cpu, &wait);
	snprintf(a, sizeof(a), "+%.6fs", (double)(r->begin_real - q->t->start_real) / 1e9);
	printf("%-14s %-9s pid %-7u worker %-3u coroutine %-6" PRIu64 " fd %-5" PRId64 " %s%s%s\n",
		a, d9__fmt_dur(b, sizeof(b), (int64_t)dur_of(r)), r->proc->pid, r->th->worker, r->co,
		r->fd, r->preview ? r->preview : r->source == D9_REQ_SRC_API ? "(api)" : "(no preview)",
		r->flags & D9_REQ_AMBIGUOUS ? "  AMBIGUOUS" : "",
		r->flags & D9_REQ_CLOSED ? "  closed" : "");
	if (r->end_th)
		snprintf(g, sizeof(g), "-"); /* the other thread's part is not in the split */
	else
		d9__fmt_dur(g, sizeof(g), (int64_t)wait);
	printf("    on CPU %s  blocked %s  waiting to run %s  waiting %s  polls %" PRIu64
		"  in %" PRIu64 "B out %" PRIu64 "B%s\n", d9__fmt_dur(c, sizeof(c), (int64_t)cpu),
		d9__fmt_dur(d, sizeof(d), (int64_t)r->blocked_ns),
		d9__fmt_dur(e, sizeof(e), (int64_t)r->sched_ns), g, r->polls, r->bytes_in,
		r->bytes_out, r->end_th ? "  (moved threads: its time split is partial)" : "");
	if (r->block_call)
		printf("    longest blocking call: %s %s\n", r->block_call,
			d9__fmt_dur(c, sizeof(c), (int64_t)r->block_call_ns));
	if (hs) {
		char buf[64];
		printf("    hot stack (%u of %" PRIu64 " samples):", ns, r->samples);
		for (uint32_t i = 0; i < hs->n && i < 6; i++)
			printf("%s %s", i ? " <-" : "", d9__frame_name(q->t, hs, i, buf, sizeof(buf)));
		putchar('\n');
	}
}

/* ---- the top N: a min-heap by duration -------------------------------------------------------- */

static int less(const struct rq *a, const struct rq *b)
{
	return dur_of(a) < dur_of(b);
}

static void heap_down(struct rq **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && less(h[l], h[m]))
			m = l;
		if (l + 1 < n && less(h[l + 1], h[m]))
			m = l + 1;
		if (m == i)
			return;
		struct rq *x = h[i];
		h[i] = h[m];
		h[m] = x;
		i = m;
	}
}

/* Keeps r if it is among the top N; frees what it does not keep. */
static void keep(struct reqs *q, struct rq *r)
{
	if ((long)q->nbest < q->top) {
		size_t i = q->nbest++;
		q->best[i] = r;
		while (i > 0 && less(q->best[i], q->best[(i - 1) / 2])) {
			struct rq *x = q->best[i];
			q->best[i] = q->best[(i - 1) / 2];
			q->best[(i - 1) / 2] = x;
			i = (i - 1) / 2;
		}
		return;
	}
	if (q->nbest == 0 || !less(q->best[0], r)) {
		free(r);
		return;
	}
	free(q->best[0]);
	q->best[0] = r;
	heap_down(q->best, q->nbest, 0);
}

static int by_dur_desc(const void *a, const void *b)
{
	uint64_t x = dur_of(*(struct rq *const *)a), y = dur_of(*(struct rq *const *)b);
	return x < y ? 1 : x > y ? -1 : 0;
}

/* ---- events ------------------------------------------------------------------------------------ */

static void loop_remove(struct rthr *s, const struct rq *r)
{
	for (size_t i = 0; i < s->nloop; i++)
		if (s->loop[i] == r) {
			s->loop[i] = s->loop[--s->nloop];
			return;
		}
}

/* An end read before its begin (file order is per thread): what the begin completes. */
struct early {
	const struct d9__thread *th;
	int64_t ns, status;
	uint64_t tail, bytes_in, bytes_out, flags, count, pgaps;
};

static void done(struct reqs *q, struct rq *r, uint64_t flags);

static void begin(struct reqs *q, struct rthr *s, const struct d9__ev *ev)
{
	struct rq *r = calloc(1, sizeof(*r));

	if (!r) {
		q->oom = 1;
		return;
	}
	r->id = ev->count;
	r->source = (uint32_t)ev->kind;
	r->fd = ev->object;
	r->co = ev->co;
	r->proc = ev->proc;
	r->th = ev->th;
	r->begin_ns = ev->ns;
	r->begin_real = ev->real_ns;
	r->preview = ev->call;
	r->mark = d9__gap_mark(ev->th);
	r->pmark = ev->proc->gaps;
	uint64_t k = key3(ev->proc->pid, r->source, r->id);
	struct early *x = d9__map_del(&q->early, k);
	if (x) {
		/* its end came first, from another thread: complete, moved threads, its time
		 * split unknown; no gap of the process between the two */
		q->unmatched--;
		r->end_th = x->th;
		r->end_ns = x->tail < (uint64_t)(x->ns - r->begin_ns) ? x->ns - (int64_t)x->tail :
			r->begin_ns;
		r->bytes_in = x->bytes_in;
		r->bytes_out = x->bytes_out;
		r->flags = x->flags;
		r->count = x->count;
		r->status = x->status;
		int gap = x->th == ev->th || x->ns < r->begin_ns || ev->proc->gaps != x->pgaps ||
			ev->proc->gap_ns >= r->begin_ns;
		uint64_t flags = x->flags;
		free(x);
		if (gap) {
			q->unknown++;
			free(r);
			return;
		}
		q->moved++;
		done(q, r, flags);
		return;
	}
	struct rq *old = d9__map_get(&q->open, k);
	if (old) { /* a begin without its end (a gap, a restart): forget the old one */
		if (old->co)
			d9__map_del(&q->by_co, key_co(old->proc->pid, old->co));
		else
			loop_remove(thr_of(q, old->th), old);
		free(old);
	}
	if (d9__map_put(&q->open, k, r)) {
		free(r);
		q->oom = 1;
		return;
	}
	if (r->source == D9_REQ_SRC_API) {
		/* the application's request replaces the zero-code guess of its coroutine (loop) */
		struct rq *z = r->co ? d9__map_get(&q->by_co, key_co(ev->proc->pid, r->co)) :
			s->nloop ? s->loop[s->nloop - 1] : NULL;
		if (z && z->source == D9_REQ_SRC_ZERO_CODE)
			z->overridden = 1;
	}
	if (r->co) {
		if (d9__map_put(&q->by_co, key_co(ev->proc->pid, r->co), r))
			q->oom = 1;
		if (s->in_poll && s->poll_co == r->co)
			r->polls = 1;
	} else {
		if (s->nloop == s->caploop) {
			size_t n = s->caploop ? 2 * s->caploop : 16;
			struct rq **m = realloc(s->loop, n * sizeof(*m));
			if (!m) {
				q->oom = 1;
				return;
			}
			s->loop = m;
			s->caploop = n;
		}
		s->loop[s->nloop++] = r;
		if (s->in_turn)
			r->polls = 1;
	}
}

/* A request with both ends: counted, listed, kept among the slowest. */
static void done(struct reqs *q, struct rq *r, uint64_t flags)
{
	if (r->overridden) {
		q->overridden++;
		free(r);
		return;
	}
	q->n++;
	q->api += r->source == D9_REQ_SRC_API;
	q->closed += !!(flags & D9_REQ_CLOSED);
	q->counted += r->count ? r->count : 1;
	if (flags & D9_REQ_AMBIGUOUS) {
		q->ambiguous++;
		q->ambiguous_count += r->count;
	}
	if (r->preview) {
		struct path *p = d9__map_get(&q->paths, (uint64_t)(uintptr_t)r->preview);
		if (!p) {
			p = calloc(1, sizeof(*p));
			if (!p || d9__map_put(&q->paths, (uint64_t)(uintptr_t)r->preview, p)) {
				free(p);
				q->oom = 1;
				p = NULL;
			} else {
				p->name = r->preview;
			}
		}
		if (p) {
			d9__hist_add(&p->h, dur_of(r));
			p->ambiguous += !!(flags & D9_REQ_AMBIGUOUS);
		}
	}
	if (q->json) {
		print_json(q, r);
		free(r);
		return;
	}
	keep(q, r);
}

static void end(struct reqs *q, struct rthr *s, const struct d9__ev *ev)
{
	const struct d9_event *e = ev->raw;
	uint64_t flags = e->f[D9_F_RE_FLAGS];

	if (flags & D9_REQ_UNTRACKED) {
		q->untracked++;
		return;
	}
	uint64_t k = key3(ev->proc->pid, (uint32_t)ev->kind, ev->count);
	struct rq *r = d9__map_del(&q->open, k);
	if (!r) {
		/* its begin may come later in the file, on another thread (begin completes it);
		 * counted unmatched until then */
		struct early *x = calloc(1, sizeof(*x));
		if (x) {
			*x = (struct early){ ev->th, ev->ns, ev->value,
				e->nfields > D9_F_RE_TAIL_NS ? e->f[D9_F_RE_TAIL_NS] : 0,
				e->f[D9_F_RE_BYTES_IN], e->f[D9_F_RE_BYTES_OUT], flags,
				e->f[D9_F_RE_COUNT], ev->proc->gaps };
			free(d9__map_del(&q->early, k));
			if (d9__map_put(&q->early, k, x)) {
				free(x);
				q->oom = 1;
			}
		}
		q->unmatched++;
		return;
	}
	struct rthr *bs = r->th == ev->th ? s : thr_of(q, r->th);
	if (r->co) {
		if (d9__map_get(&q->by_co, key_co(r->proc->pid, r->co)) == r)
			d9__map_del(&q->by_co, key_co(r->proc->pid, r->co));
		if (s->in_poll && s->poll_co == r->co)
			add_time(r, K_CPU, s->poll_ns, ev->ns);
	} else {
		if (bs)
			loop_remove(bs, r);
		if (s->in_turn)
			add_time(r, K_CPU, s->turn_ns, ev->ns);
	}
	/* its real end: when its response was written */
	uint64_t tail = e->nfields > D9_F_RE_TAIL_NS ? e->f[D9_F_RE_TAIL_NS] : 0;
	r->end_ns = tail < (uint64_t)(ev->ns - r->begin_ns) ? ev->ns - (int64_t)tail : r->begin_ns;
	clip_time(r);
	r->bytes_in = e->f[D9_F_RE_BYTES_IN];
	r->bytes_out = e->f[D9_F_RE_BYTES_OUT];
	r->flags = flags;
	r->count = e->f[D9_F_RE_COUNT];
	r->status = ev->value;
	if (r->th != ev->th) {
		/* it moved threads: known when no gap of the process (nor of its first thread)
		 * lies inside it */
		if (d9__gap_mark(r->th) != r->mark ||
			d9__proc_gap_since(ev->proc, r->pmark, r->begin_ns)) {
			q->unknown++;
			free(r);
			return;
		}
		r->end_th = ev->th;
		q->moved++;
	} else if (d9__gap_mark(ev->th) != r->mark) {
		/* a gap in the data inside it: what ran is not known */
		q->unknown++;
		free(r);
		return;
	}
	done(q, r, flags);
}

static struct rq *of_co(struct reqs *q, const struct d9__ev *ev, uint64_t co)
{
	return co ? d9__map_get(&q->by_co, key_co(ev->proc->pid, co)) : NULL;
}

static void blocking(struct reqs *q, struct rthr *s, const struct d9__ev *ev)
{
	struct rq *one = of_co(q, ev, ev->co);
	size_t n = ev->co ? (one != NULL) : s->nloop;

	for (size_t i = 0; i < n; i++) {
		struct rq *r = ev->co ? one : s->loop[i];
		int64_t in = ev->ns - r->begin_ns;
		uint64_t d = in <= 0 ? 0 : ev->count < (uint64_t)in ? ev->count : (uint64_t)in;
		add_time(r, K_BLOCKED, ev->ns - (int64_t)d, ev->ns);
		r->blocking_calls++;
		if (d >= r->block_call_ns) {
			r->block_call_ns = d;
			r->block_call = ev->call;
		}
	}
}

static void req_on_event(void *ctx, const struct d9__ev *ev)
{
	struct reqs *q = ctx;
	struct rq *r;

	if (!ev->th || (q->pid >= 0 && ev->proc->pid != q->pid))
		return;
	struct rthr *s = thr_of(q, ev->th);
	if (!s)
		return;
	switch (ev->type) {
	case D9_EV_REQUEST_BEGIN:
		begin(q, s, ev);
		break;
	case D9_EV_REQUEST_END:
		end(q, s, ev);
		break;
	case D9_EV_POLL_START:
		s->in_poll = 1;
		s->poll_co = ev->co;
		s->poll_ns = ev->ns;
		if ((r = of_co(q, ev, ev->co))) {
			r->polls++;
			uintptr_t w = (uintptr_t)d9__map_get(&q->wakes, key_co(ev->proc->pid, ev->co));
			if (w && (int64_t)(w - 1) >= r->begin_ns && (int64_t)(w - 1) <= ev->ns)
				add_time(r, K_SCHED, (int64_t)(w - 1), ev->ns);
		}
		break;
	case D9_EV_POLL_END:
		if (s->in_poll && (r = of_co(q, ev, ev->co)))
			add_time(r, K_CPU, s->poll_ns, ev->ns);
		s->in_poll = 0;
		break;
	case D9_EV_WAKE:
		if (ev->co && d9__map_put(&q->wakes, key_co(ev->proc->pid, ev->co),
				      (void *)(uintptr_t)(ev->ns + 1)))
			q->oom = 1;
		break;
	case D9_EV_UNPARK:
		s->in_turn = 1;
		s->turn_ns = ev->ns;
		for (size_t i = 0; i < s->nloop; i++)
			s->loop[i]->polls++;
		break;
	case D9_EV_PARK:
		if (s->in_turn)
			for (size_t i = 0; i < s->nloop; i++)
				add_time(s->loop[i], K_CPU, s->turn_ns, ev->ns);
		s->in_turn = 0;
		break;
	case D9_EV_BLOCKING_CALL:
		blocking(q, s, ev);
		break;
	case D9_EV_CPU_SAMPLE:
		if (ev->kind != D9_CPU_ON)
			break;
		if ((r = of_co(q, ev, ev->co))) {
			r->samples++;
			if (ev->stack)
				add_stack(r, ev->stack);
		} else if (!ev->co) {
			for (size_t i = 0; i < s->nloop && s->in_turn; i++) {
				s->loop[i]->samples++;
				if (ev->stack)
					add_stack(s->loop[i], ev->stack);
			}
		}
		break;
	case D9__EV_PROCESS_END:
		break;
	default:
		break;
	}
}

static int by_p99_desc(const void *a, const void *b)
{
	struct path *x = *(struct path *const *)a, *y = *(struct path *const *)b;
	uint64_t u = d9__hist_pct(&x->h, 99), v = d9__hist_pct(&y->h, 99);
	return u < v ? 1 : u > v ? -1 : 0;
}

static void print_paths(struct reqs *q)
{
	struct path **v = NULL;
	size_t n = 0;

	if (!q->paths.n)
		return;
	v = malloc(q->paths.n * sizeof(*v));
	if (!v)
		return;
	for (size_t i = 0; i < q->paths.cap; i++)
		if (q->paths.vals && q->paths.vals[i])
			v[n++] = q->paths.vals[i];
	qsort(v, n, sizeof(*v), by_p99_desc);
	printf("\nper path (preview), slowest p99 first:\n%-32s %8s %9s %9s %9s %9s %9s\n", "path",
		"count", "p50", "p90", "p99", "max", "ambiguous");
	for (size_t i = 0; i < n; i++) {
		char a[32], b[32], c[32], d[32];
		printf("%-32s %8" PRIu64 " %9s %9s %9s %9s %9" PRIu64 "\n", v[i]->name, v[i]->h.n,
			d9__fmt_dur(a, sizeof(a), (int64_t)d9__hist_pct(&v[i]->h, 50)),
			d9__fmt_dur(b, sizeof(b), (int64_t)d9__hist_pct(&v[i]->h, 90)),
			d9__fmt_dur(c, sizeof(c), (int64_t)d9__hist_pct(&v[i]->h, 99)),
			d9__fmt_dur(d, sizeof(d), (int64_t)v[i]->h.max), v[i]->ambiguous);
	}
	free(v);
}

static void requests_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze requests [OPTIONS] TRACE...\n\n"
		"Lists the requests of a trace recorded with D9_REQUESTS=1 (or the d9.h API), the\n"
		"slowest first, with their time split: on CPU (the polls of their coroutine, or the\n"
		"loop turns, inside them, less blocking calls), blocked (blocking calls inside),\n"
		"waiting to run (wake to poll), waiting (the rest: for the peer, a timer, another\n"
		"thread); their polls, longest blocking call and hottest CPU stack; then\n"
		"percentiles per path (HTTP preview on).\n"
		"Requests whose bytes held more or less than one request are AMBIGUOUS: their\n"
		"boundaries are not known (pipelining); the count says how many requests they held.\n\n"
		"options:\n"
		"  --json            one JSON object per request, in the order they end\n"
		"  --top N           the N slowest (default 10)\n"
		"  --pid N           only requests of process N\n"
		"  --from WHEN       ignore events before WHEN\n"
		"  --to WHEN         ignore events from WHEN on\n"
		"  -h, --help        this text\n\n"
		"A request with a gap in the data inside it is not listed (stderr counts them).\n"
		"exit status: 0 ok, 2 usage, 3 no readable trace, 4 output written but input damaged\n");
}

int d9__cmd_requests(int argc, char **argv)
{
	struct reqs q;
	struct d9__trace t;
	int nargs = 0, rc;
	const char *v;
	char **args = calloc((size_t)argc + 1, sizeof(*args));

	if (!args)
		return D9_EXIT_USAGE;
	memset(&q, 0, sizeof(q));
	memset(&t, 0, sizeof(t));
	q.top = 10;
	q.pid = -1;
	q.t = &t;
	for (int i = 1; i < argc; i++) {
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			requests_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			q.json = 1;
		} else if ((r = d9__opt(argc, argv, &i, "--top", &v)) == 1) {
			if (d9__parse_id("--top", v, &q.top) || q.top < 1 || q.top > 1000000) {
				fprintf(stderr, "d9-analyze: --top: want 1 to 1000000\n");
				goto usage;
			}
		} else if (r == 0 && (r = d9__opt_window(argc, argv, &i, &t, &q.pid)) == 1) {
			/* --pid, --from, --to */
		} else if (r == 0 && d9__opt_arg("requests", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (d9__opt_traces("requests", nargs))
		goto usage;
	q.best = calloc((size_t)q.top, sizeof(*q.best));
	if (!q.best) {
		free(args);
		return D9_EXIT_USAGE;
	}
	if ((rc = d9__trace_start(&t, args, nargs)) != 0) {
		free(q.best);
		return rc;
	}
	if (d9__trace_run(&t, req_on_event, &q) || q.oom)
		fprintf(stderr, "d9-analyze: out of memory: the list is incomplete\n");
	if (!q.json) {
		printf("requests: %" PRIu64 " (%" PRIu64 " from the application's API), in their bytes "
			"%" PRIu64 "; ambiguous %" PRIu64 " (holding %" PRIu64 " requests)", q.n, q.api,
			q.counted, q.ambiguous, q.ambiguous_count);
		if (q.closed)
			printf("; ended by a close %" PRIu64, q.closed);
		if (q.overridden)
			printf("; replaced by API requests %" PRIu64, q.overridden);
		if (q.untracked)
			printf("; connections not tracked (descriptor table full) %" PRIu64, q.untracked);
		putchar('\n');
		if (!q.n && !q.unknown)
			printf("(no request events: was the trace recorded with D9_REQUESTS=1?)\n");
		qsort(q.best, q.nbest, sizeof(*q.best), by_dur_desc);
		if (q.nbest)
			printf("\nslowest %zu:\n", q.nbest);
		for (size_t i = 0; i < q.nbest; i++)
			print_text(&q, q.best[i]);
		print_paths(&q);
	}
	if (q.unknown)
		fprintf(stderr, "d9-analyze: %" PRIu64 " request(s) left out: a gap in the data (dropped "
			"or missing events) lies inside them\n", q.unknown);
	if (q.moved)
		fprintf(stderr, "d9-analyze: %" PRIu64 " request(s) ended on another thread than they "
			"began (a thread pool handed them over): their durations are known, their time "
			"split is partial (what their first thread saw)\n", q.moved);
	fflush(stdout);
	rc = d9__trace_exit_code(&t);
	for (size_t i = 0; i < q.nbest; i++)
		free(q.best[i]);
	free(q.best);
	for (size_t i = 0; i < q.open.cap; i++)
		if (q.open.vals && q.open.vals[i])
			free(q.open.vals[i]);
	for (size_t i = 0; i < q.paths.cap; i++)
		if (q.paths.vals && q.paths.vals[i]) {
			struct path *p = q.paths.vals[i];
			d9__hist_free(&p->h);
			free(p);
		}
	for (size_t i = 0; i < q.nthr; i++)
		free(q.thr[i].loop);
	free(q.thr);
	for (size_t i = 0; i < q.early.cap; i++)
		if (q.early.vals)
			free(q.early.vals[i]);
	d9__map_free(&q.early);
	d9__map_free(&q.open);
	d9__map_free(&q.by_co);
	d9__map_free(&q.wakes);
	d9__map_free(&q.paths);
	d9__trace_close(&t);
	return rc;
usage:
	free(args);
	requests_help(stderr);
	return D9_EXIT_USAGE;
}
