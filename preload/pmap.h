/* pmap.h: an open-addressing map from pointers to pointers, per runtime adapter state (one
 * thread's scheduler: no locks). Runtimes reuse their thread structures and free condition
 * variables, so entries are replaced and removed, never trusted across a free. */
#ifndef D9_PMAP_H
#define D9_PMAP_H

#include <stddef.h>
#include <stdint.h>

struct pmap { void **keys, **vals; size_t cap, n; };

static inline size_t pm_slot(const struct pmap *m, const void *k)
{
	uintptr_t h = (uintptr_t)k;

	h ^= h >> 17;
	h *= 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (m->cap - 1);
}

static inline void *pm_get(const struct pmap *m, const void *k)
{
	if (!m->cap)
		return NULL;
	for (size_t i = pm_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == k)
			return m->vals[i];
		if (!m->keys[i])
			return NULL;
	}
}

/* Adds or replaces k's value (0), or -1 when the map cannot grow (out of memory). */
int d9__pm_put(struct pmap *m, void *k, void *v);
/* Room for one more entry (the table grown now if it must be): the next pm_put of a new key
 * then cannot fail. 0, or -1 (no memory: m as it was). */
int d9__pm_reserve(struct pmap *m);
/* Removes k (absent: nothing). */
void d9__pm_del(struct pmap *m, const void *k);
/* Sweeps m: drops the entries whose value keep() refuses (keep frees what it drops; nothing is
 * dropped when the table cannot be rebuilt) and sets *at to the size at which to sweep again,
 * 1,024 entries or twice what is left, so that each sweep is paid for by as many new entries. */
void d9__pm_sweep(struct pmap *m, size_t *at, int (*keep)(void *v));
#define pm_put d9__pm_put
#define pm_reserve d9__pm_reserve
#define pm_del d9__pm_del
#define pm_sweep d9__pm_sweep

#endif
