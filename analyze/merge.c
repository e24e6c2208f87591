/* merge.c: puts CPU samples in their place in their thread's timeline. The agent writes a
 * worker's samples in chunks of their own, each before any chunk holding that worker's later
 * events (FORMAT.md, CpuSample), so in file order a sample can come before the events that
 * precede it in time. d9__trace_run passes every event through here: a sample waits in its
 * thread's queue until an event of that thread with a later time arrives, and is delivered
 * just before it; a process's queues are emptied before its D9__EV_PROCESS_END (and before a
 * segment end that says the process ended there, D9__END_PROCESS). Commands thus
 * see each sample between the PollStart and PollEnd of the poll it was taken in. A
 * Dropped(samples_lost) comes from the same chunks and waits with the samples; any other Dropped
 * is counted here as a gap of its thread (trace.h, "Pairing across gaps"). A sample
 * older than the thread's last delivered event (another writer's order) is delivered at once.
 * Memory: the samples of one thread since its latest event, at most MAX_QUEUED of them. */
#include "merge.h"

#include <stdlib.h>
#include <string.h>

#define MAX_QUEUED (1u << 18) /* samples held per thread: ~45 min at 99 Hz, ~40 MiB */

struct squeue {
	struct d9__ev *v;
	size_t head, n, cap;
	int64_t last_ns; /* time of the thread's last delivered event */
	int seen; /* last_ns is set */
};

static struct squeue *queue_of(struct d9__merge *m, const struct d9__thread *th)
{
	if (th->idx >= m->nq) {
		size_t n = th->idx + 64;
		struct squeue *q = realloc(m->q, n * sizeof(*q));
		if (!q)
			return NULL;
		memset(q + m->nq, 0, (n - m->nq) * sizeof(*q));
		m->q = q;
		m->nq = n;
	}
	return &m->q[th->idx];
}

/* Delivers the queued samples with a time before `before` (all when flush). */
static void squeue_release(struct d9__merge *m, struct squeue *q, int64_t before, int flush)
{
	while (q->head < q->n && (flush || q->v[q->head].ns < before) && !m->t->stop)
		m->fn(m->ctx, &q->v[q->head++]);
	if (q->head == q->n)
		q->head = q->n = 0;
}

static int squeue_push(struct squeue *q, const struct d9__ev *ev)
{
	if (q->n == q->cap) {
		if (q->head) {
			memmove(q->v, q->v + q->head, (q->n - q->head) * sizeof(*q->v));
			q->n -= q->head;
			q->head = 0;
		}
		if (q->n == q->cap) {
			size_t cap = q->cap ? q->cap * 2 : 64;
			struct d9__ev *v = realloc(q->v, cap * sizeof(*v));
			if (!v)
				return -1;
			q->v = v;
			q->cap = cap;
		}
	}
	q->v[q->n] = *ev;
	q->v[q->n].raw = NULL; /* the decoder's event is gone by the time this one is delivered */
	q->n++;
	return 0;
}

/* Events of the profiler's chunks: samples, and the Dropped(samples_lost) that start them. */
static int sample_stream(const struct d9__ev *ev)
{
	return ev->type == D9_EV_CPU_SAMPLE ||
		(ev->type == D9_EV_DROPPED && ev->kind == D9_DROP_SAMPLES_LOST);
}

void d9__merge_ev(void *ctx, const struct d9__ev *ev)
{
	struct d9__merge *m = ctx;
	struct squeue *q;

	if (ev->type == D9__EV_PROCESS_END ||
		(ev->type == D9__EV_SEGMENT_END && ev->kind == D9__END_PROCESS)) {
		/* the process ended (its end closes what its threads had open: the samples of
		 * those go first) */
		for (size_t i = 0; i < m->nq && i < m->t->nthreads; i++)
			if (m->t->threads[i]->proc == ev->proc) {
				squeue_release(m, &m->q[i], 0, 1);
				m->q[i].seen = 0;
			}
	} else if (ev->th && (q = queue_of(m, ev->th))) {
		if (sample_stream(ev)) {
			/* a cap for a thread that samples for minutes without one event: its oldest
			 * samples go out early (in order; only their place among events may suffer) */
			if (q->n - q->head >= MAX_QUEUED && !m->t->stop)
				m->fn(m->ctx, &q->v[q->head++]);
			if ((!q->seen || ev->ns >= q->last_ns) && squeue_push(q, ev) == 0)
				return;
		} else {
			squeue_release(m, q, ev->ns, 0);
			q->last_ns = ev->ns;
			q->seen = 1;
			/* events of this thread were lost before this one, after the samples just
			 * delivered (a Dropped of thread 0 is the writer's count for threads it could
			 * not tell apart: all of them) */
			if (ev->type == D9_EV_DROPPED)
				d9__gap(ev->proc, ev->th->tid ? ev->th : NULL, ev->ns);
		}
	} else if (ev->th) {
		m->oom = 1;
	}
	if (!m->t->stop)
		m->fn(m->ctx, ev);
}

void d9__merge_free(struct d9__merge *m)
{
	for (size_t i = 0; i < m->nq; i++)
		free(m->q[i].v);
	free(m->q);
	m->q = NULL;
	m->nq = 0;
}
