/* pmap.c: the pointer map's slow parts (pmap.h): growing, deleting and sweeping. */
#include "pmap.h"

#include "d9-agent.h" /* d9__mem_alloc: the map's memory is the agent's own */

/* m's entries that keep() keeps (all without it) in a new table of cap slots; -1 when it
 * cannot be allocated (then m is as it was and keep was not called) */
static int rebuild(struct pmap *m, size_t cap, int (*keep)(void *v))
{
	struct pmap n = { 0 };

	n.cap = cap;
	n.keys = d9__mem_alloc(n.cap * sizeof(void *));
	n.vals = d9__mem_alloc(n.cap * sizeof(void *));
	if (!n.keys || !n.vals) {
		d9__mem_free(n.keys);
		d9__mem_free(n.vals);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i] && (!keep || keep(m->vals[i])))
			pm_put(&n, m->keys[i], m->vals[i]); /* no more entries than slots allow: no growth */
	d9__mem_free(m->keys);
	d9__mem_free(m->vals);
	*m = n;
	return 0;
}

int d9__pm_reserve(struct pmap *m)
{
	if ((m->n + 1) * 4 > m->cap * 3 && rebuild(m, m->cap ? m->cap * 2 : 256, NULL) != 0)
		return -1;
	return 0;
}

int d9__pm_put(struct pmap *m, void *k, void *v)
{
	if (d9__pm_reserve(m) != 0)
		return -1;
	size_t i = pm_slot(m, k);
	while (m->keys[i] && m->keys[i] != k)
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = k;
	m->vals[i] = v;
	return 0;
}

void d9__pm_del(struct pmap *m, const void *k)
{
	if (!m->cap)
		return;
	size_t i = pm_slot(m, k);
	while (m->keys[i] != k) {
		if (!m->keys[i])
			return;
		i = (i + 1) & (m->cap - 1);
	}
	/* backward-shift deletion keeps probe chains intact without tombstones */
	for (size_t j = i;;) {
		m->keys[i] = NULL;
		for (;;) {
			j = (j + 1) & (m->cap - 1);
			if (!m->keys[j]) {
				m->n--;
				return;
			}
			size_t home = pm_slot(m, m->keys[j]);
			if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j)))
				break;
		}
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		i = j;
	}
}

void d9__pm_sweep(struct pmap *m, size_t *at, int (*keep)(void *v))
{
	if (m->cap)
		rebuild(m, m->cap, keep);
	*at = m->n * 2 > 1024 ? m->n * 2 : 1024;
}
