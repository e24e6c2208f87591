/* waitq.h: the runtime adapters' copies of their runtime's wait queues: a FIFO of coroutines per
 * condition (or mutex), in a pointer map by the object's address. Each adapter links its own
 * struct co through co->qnext. A FIFO is kept when it empties, for the object's next wait (no
 * allocation and map update per wait): runtimes free these objects and reuse their addresses,
 * and an empty FIFO is right for whatever object has the address next. The empty ones are swept
 * (pm_sweep) when the map reaches *sweep_at entries. tests/unit/test-pmap.c tests it. */
#ifndef D9_WAITQ_H
#define D9_WAITQ_H

#include "d9-agent.h" /* d9__mem_alloc */
#include "pmap.h"

struct co;
struct waitq { struct co *head, *tail; };

/* pm_sweep's test: an empty FIFO goes (freed), one with waiters stays */
static int waitq_kept(void *v)
{
	struct waitq *q = v;

	if (q->head)
		return 1;
	d9__mem_free(q);
	return 0;
}

/* obj's FIFO in m, made when it has none (NULL: out of memory, its waits go unnamed) */
static inline struct waitq *waitq_make(struct pmap *m, size_t *sweep_at, void *obj)
{
	struct waitq *q = pm_get(m, obj);

	if (q)
		return q;
	if (__builtin_expect(m->n >= *sweep_at, 0))
		pm_sweep(m, sweep_at, waitq_kept);
	if ((q = d9__mem_alloc(sizeof(*q))) && pm_put(m, obj, q) != 0) {
		d9__mem_free(q);
		q = NULL;
	}
	return q;
}

#endif
