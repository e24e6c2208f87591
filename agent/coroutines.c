/* coroutines.c: the live coroutine table, so that every segment defines the coroutines its events
 * name (self-contained segments, FORMAT.md). preload/ registers a coroutine when it is spawned and
 * marks it dead when it exits; the writer defines every coroutine alive at a segment's start (and
 * those that died during the previous segment, whose last events may still be in flight) and,
 * before each chunk, the ones spawned since. Memory follows the live coroutines, not the
 * process's history. One mutex; preload calls it once per spawn and once per exit, on the
 * program's threads: the table's memory is the agent's own (mem.c). The writer's record buffers
 * are malloc's, on the writer's thread. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct cdef {
	uint64_t id, parent, location, flags;
	uint64_t dead_gen; /* 0: alive; else the segment generation it exited in */
	uint64_t dead_ns; /* when it exited (monotonic) */
};

static struct {
	pthread_mutex_t lock;
	struct cdef *v; /* dense array */
	size_t n, cap;
	uint32_t *index; /* open addressing: id -> position in v + 1 (0: empty) */
	size_t icap;
	uint64_t *fresh; /* ids registered since the writer last looked */
	size_t nfresh, capfresh;
	uint64_t gen; /* segment generation: bumped by every segment the writer opens */
} T = { .lock = PTHREAD_MUTEX_INITIALIZER };

static size_t slot_of(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

/* Rebuilds the index for n entries (lock held). Returns 0 or -1. */
static int reindex(size_t want)
{
	size_t cap = 1024;

	while (cap < want * 2)
		cap *= 2;
	uint32_t *idx = d9__mem_alloc(cap * sizeof(*idx));
	if (!idx)
		return -1;
	for (size_t i = 0; i < T.n; i++) {
		size_t s = slot_of(T.v[i].id, cap);
		while (idx[s])
			s = (s + 1) & (cap - 1);
		idx[s] = (uint32_t)i + 1;
	}
	d9__mem_free(T.index);
	T.index = idx;
	T.icap = cap;
	return 0;
}

static struct cdef *find(uint64_t id)
{
	if (!T.icap)
		return NULL;
	for (size_t s = slot_of(id, T.icap); T.index[s]; s = (s + 1) & (T.icap - 1))
		if (T.v[T.index[s] - 1].id == id)
			return &T.v[T.index[s] - 1];
	return NULL;
}

static uint64_t next_id;

uint64_t d9_agent_coroutine_new_id(void)
{
	return __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
}

void d9_agent_coroutine(uint64_t id, uint64_t parent, uint64_t location, uint64_t flags)
{
	/* only while recording (the first event starts the writer, which prunes the table): with
	 * recording off nothing would ever prune it */
	if (!id || !d9__enabled || (d9__g.state != D9__RUNNING_ && d9__g.state != D9__CONFIGURED))
		return;
	d9__lock(&T.lock);
	if (T.n == T.cap) {
		size_t cap = T.cap ? T.cap * 2 : 1024;
		struct cdef *v = d9__mem_realloc(T.v, cap * sizeof(*v));
		if (!v)
			goto out;
		T.v = v;
		T.cap = cap;
	}
	if ((T.n + 1) * 2 > T.icap && reindex(T.n + 1))
		goto out;
	if (T.nfresh == T.capfresh) {
		size_t cap = T.capfresh ? T.capfresh * 2 : 256;
		uint64_t *f = d9__mem_realloc(T.fresh, cap * sizeof(*f));
		if (!f)
			goto out;
		T.fresh = f;
		T.capfresh = cap;
	}
	T.v[T.n] = (struct cdef){ id, parent, location, flags, 0, 0 };
	size_t s = slot_of(id, T.icap);
	while (T.index[s])
		s = (s + 1) & (T.icap - 1);
	T.index[s] = (uint32_t)T.n + 1;
	T.n++;
	T.fresh[T.nfresh++] = id;
out:
	d9__unlock(&T.lock);
}

void d9_agent_coroutine_exit(uint64_t id)
{
	d9__lock(&T.lock);
	struct cdef *c = find(id);
	if (c) {
		c->dead_gen = T.gen ? T.gen : 1;
		c->dead_ns = d9__mono_ns();
	}
	d9__unlock(&T.lock);
}

static void encode(struct d9_wbuf *w, const struct cdef *c)
{
	if (w->start)
		d9_def_coroutine(w, c->id, c->parent, c->location, c->flags);
}

/* A buffer for n definitions (at most 48 bytes each); w->start is NULL when out of memory. */
static void records_begin(struct d9_wbuf *w, size_t n)
{
	size_t cap = n * 48 + 16;
	uint8_t *buf = malloc(cap);

	d9_wbuf_init(w, buf, buf ? cap : 0);
}

/* Hands the records to the caller (*out, to free); returns their length, 0 on failure. */
static size_t records_end(struct d9_wbuf *w, uint8_t **out)
{
	if (!w->start || w->err) {
		free(w->start);
		*out = NULL;
		return 0;
	}
	*out = w->start;
	return (size_t)(w->p - w->start);
}

/* Writer, opening a segment: every coroutine alive, or dead since the previous segment opened,
 * into a fresh buffer (the caller frees it); the longer dead are forgotten. Returns the length. */
size_t d9__coroutines_all(uint8_t **out)
{
	size_t keep = 0;

	struct d9_wbuf w;

	d9__lock(&T.lock);
	T.gen++;
	records_begin(&w, T.n);
	for (size_t i = 0; i < T.n; i++) {
		struct cdef *c = &T.v[i];
		if (c->dead_gen && c->dead_gen + 1 < T.gen)
			continue; /* died two segments ago: its events are all written */
		encode(&w, c);
		T.v[keep++] = *c;
	}
	if (keep != T.n) {
		T.n = keep;
		reindex(T.n + 1);
	}
	T.nfresh = 0;
	d9__unlock(&T.lock);
	return records_end(&w, out);
}

/* Writer, before a chunk: the coroutines registered since the last call. */
size_t d9__coroutines_fresh(uint8_t **out)
{
	struct d9_wbuf w;

	*out = NULL;
	d9__lock(&T.lock);
	if (!T.nfresh) {
		d9__unlock(&T.lock);
		return 0;
	}
	records_begin(&w, T.nfresh);
	for (size_t i = 0; i < T.nfresh; i++) {
		struct cdef *c = find(T.fresh[i]);
		if (c)
			encode(&w, c);
	}
	T.nfresh = 0;
	d9__unlock(&T.lock);
	return records_end(&w, out);
}

/* Writer, every pass: forgets coroutines that exited more than `age_ns` ago. Their events were
 * recorded before their exit and reach the file within a flush interval or two, in the segment
 * whose start (or fresh list) defined them. Keeps memory to the live coroutines. */
void d9__coroutines_prune(uint64_t age_ns)
{
	uint64_t now = d9__mono_ns();
	size_t keep = 0;

	d9__lock(&T.lock);
	for (size_t i = 0; i < T.n; i++)
		if (!T.v[i].dead_gen || now - T.v[i].dead_ns < age_ns)
			T.v[keep++] = T.v[i];
	if (keep != T.n) {
		T.n = keep;
		reindex(T.n + 1);
		/* fresh ids of pruned coroutines are skipped by find() */
	}
	d9__unlock(&T.lock);
}

/* In a forked child: the parent's coroutines stay defined (the child continues the forking
 * thread's coroutines); the lock may have been held by a vanished thread, caught between growing
 * an array (its old mapping unmapped: mem.c) and storing the new one: then the table is given
 * up (leaked), not trusted, and the child's coroutines start a new one. */
void d9__coroutines_child(void)
{
	if (pthread_mutex_trylock(&T.lock) != 0) {
		T.v = NULL;
		T.n = T.cap = 0;
		T.index = NULL;
		T.icap = 0;
		T.fresh = NULL;
		T.nfresh = T.capfresh = 0;
	}
	pthread_mutex_init(&T.lock, NULL);
}
