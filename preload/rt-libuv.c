/* rt-libuv.c: the libuv adapter (libuv 1.x, Debian's libuv1). libuv's unit of work is a
 * callback: each handle is a unit (coroutine id), each run of one of its callbacks a poll of it;
 * uv_queue_work spawns a unit onto the thread pool, uv_async_send wakes a unit from another thread.
 * It must never change what libuv does: registrations pass a wrapper that finds the program's
 * callback in a map kept per loop (handle->data is never touched) and calls it with the same
 * arguments; an entry goes when libuv can no longer call it. Rules: README.md, "libuv"; design:
 * agent/DESIGN.md, "The libuv adapter". */
#include "preload.h"
#include "runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

const struct d9__runtime d9__rt_libuv;

/* ---- a map from tagged pointers to callback entries --------------------------------------------
 * Keys are a handle's or a request's address plus a slot in its low bits (libuv's structures are
 * pointer-aligned): slot 0 the handle's callback (read, timer, ...) or the request's, slot 1 a
 * handle's close callback. Single-threaded: each loop's map is used only by whoever operates on
 * that loop, which libuv's own rules already serialize. */
enum { SLOT_CB = 0, SLOT_CLOSE = 1 };

struct uent {
	uintptr_t key; /* 0: empty */
	void *cb; /* the program's callback, NULL: none (a unit made by a request or a close) */
	uint64_t id; /* the unit (coroutine id) */
	uint64_t loc; /* the location of cb's polls */
	uint32_t what; /* enum what: the kind of cb (set by reg_begin) */
};

struct umap { struct uent *e; size_t cap, n; };

static size_t um_slot(const struct umap *m, uintptr_t k)
{
	uint64_t h = k * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 24) & (m->cap - 1);
}

static struct uent *um_get(const struct umap *m, uintptr_t k)
{
	if (!m->cap)
		return NULL;
	for (size_t i = um_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		if (m->e[i].key == k)
			return &m->e[i];
		if (!m->e[i].key)
			return NULL;
	}
}

/* The entry of k, or the empty slot where it goes (the map has room). */
static struct uent *um_get_free(struct umap *m, uintptr_t k)
{
	size_t i = um_slot(m, k);

	while (m->e[i].key && m->e[i].key != k)
		i = (i + 1) & (m->cap - 1);
	return &m->e[i];
}

/* Inserts or replaces k. Returns 0, or -ENOMEM (the map is unchanged). */
static int um_put(struct umap *m, uintptr_t k, void *cb, uint64_t id, uint64_t loc)
{
	struct uent *old = um_get(m, k);

	if (old) { /* in place: never fails */
		*old = (struct uent){ k, cb, id, loc, old->what };
		return 0;
	}
	if ((m->n + 1) * 4 > m->cap * 3) {
		struct umap n = { 0 };
		n.cap = m->cap ? m->cap * 2 : 256;
		n.e = d9__mem_alloc(n.cap * sizeof(*n.e));
		if (!n.e)
			return -ENOMEM;
		for (size_t i = 0; i < m->cap; i++)
			if (m->e[i].key)
				*um_get_free(&n, m->e[i].key) = m->e[i];
		n.n = m->n;
		d9__mem_free(m->e);
		*m = n;
	}
	struct uent *e = um_get_free(m, k);
	if (!e->key)
		m->n++;
	*e = (struct uent){ k, cb, id, loc, 0 };
	return 0;
}

static void um_del(struct umap *m, uintptr_t k)
{
	struct uent *e = um_get(m, k);

	if (!e)
		return;
	size_t i = (size_t)(e - m->e);
	/* backward-shift deletion keeps probe chains intact without tombstones */
	for (size_t j = i;;) {
		m->e[i].key = 0;
		for (;;) {
			j = (j + 1) & (m->cap - 1);
			if (!m->e[j].key) {
				m->n--;
				return;
			}
			size_t home = um_slot(m, m->e[j].key);
			if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j)))
				break;
		}
		m->e[i] = m->e[j];
		i = j;
	}
}

/* ---- per-loop state ----------------------------------------------------------------------------
 * Found by the loop's address: a table of every loop seen (a loop freed and allocated again at
 * the same address is a new loop of the same program and takes the same state; uv_loop_close
 * empties it), read without a lock (entries are published once and never move) and cached per
 * thread. D9__UV_LOOPS distinct loop addresses at most: a further loop is not traced (said
 * once). */
#define D9__UV_LOOPS 1024
#define LOC_CACHE 64

struct lstate {
	struct umap m;
	void *last_cb[32]; /* by enum what: the callback a wrapper ran last (see orig_behind) */
	struct { uintptr_t cb, site; uint32_t what; uint64_t id; } loc_cache[LOC_CACHE];
};

static struct { uv_loop_t *loop; struct lstate *s; } loops[D9__UV_LOOPS];
static unsigned nloops; /* entries published (release) */
static int loops_lock;

static __thread uv_loop_t *cached_loop __attribute__((tls_model("initial-exec")));
static __thread struct lstate *cached_state __attribute__((tls_model("initial-exec")));
static __thread uint64_t cur_loc __attribute__((tls_model("initial-exec"))); /* the open poll's */

static int refused; /* attach found a libuv whose structures this file does not know */

/* A spinlock for the maps shared across threads (async handles, work requests): held for a map
 * operation only, never while calling anything; pthread_mutex_lock would reach libc-block.c's
 * wrapper. A forked child starts with it free (atfork_child). */
static void spin_lock(int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		for (unsigned i = 0; __atomic_load_n(l, __ATOMIC_RELAXED); i++)
			if (i < 1000)
				__builtin_ia32_pause();
			else
				sched_yield(); /* the holder was preempted: let it run */
}

/* 1 when l is now held, 0 when it stayed taken for ~1000 pauses (a few microseconds). */
static int spin_trylock(int *l)
{
	for (unsigned i = 0; i < 1000; i++) {
		if (!__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
			return 1;
		__builtin_ia32_pause();
	}
	return 0;
}

static void spin_unlock(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* One line on stderr, once per call site (the agent's log is not part of d9-agent.h), while
 * descriptor 2 is still the program's stderr (agent/config.c). */
#define LOG_ONCE(msg)                                                                  \
	do {                                                                           \
		static int once_;                                                      \
		if (!__atomic_exchange_n(&once_, 1, __ATOMIC_RELAXED)) {               \
			int e_ = errno;                                                \
			if (d9__stderr_ours()) {                                       \
				ssize_t w_ = write(2, "d9: libuv: " msg "\n",       \
					sizeof("d9: libuv: " msg "\n") - 1);        \
				(void)w_;                                              \
			}                                                              \
			errno = e_;                                                    \
		}                                                                      \
	} while (0)

/* The state of loop, created when create is set. NULL when the table is full or out of memory. */
static struct lstate *state_of(uv_loop_t *loop, int create)
{
	if (D9_LIKELY(loop == cached_loop && loop))
		return cached_state;
	unsigned n = __atomic_load_n(&nloops, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (loops[i].loop == loop) {
			cached_loop = loop;
			cached_state = loops[i].s;
			return loops[i].s;
		}
	if (!create || !loop)
		return NULL;
	spin_lock(&loops_lock);
	struct lstate *s = NULL;
	n = nloops;
	for (unsigned i = 0; i < n; i++) /* another thread may have added it */
		if (loops[i].loop == loop)
			s = loops[i].s;
	if (!s && n < D9__UV_LOOPS && (s = d9__mem_alloc(sizeof(*s)))) {
		loops[n].loop = loop;
		loops[n].s = s;
		__atomic_store_n(&nloops, n + 1, __ATOMIC_RELEASE);
	}
	spin_unlock(&loops_lock);
	if (!s) {
		LOG_ONCE("too many loops (or out of memory): callbacks of further loops are not traced");
		return NULL;
	}
	cached_loop = loop;
	cached_state = s;
	return s;
}

/* Structures libuv keeps inside the loop itself (the thread pool's wq_async, the child watcher)
 * are its own machinery, not the program's work: never wrapped. Their callbacks run the
 * program's (after_work_cb, exit_cb), which then are polls of their own. */
static int internal(const void *h, const uv_loop_t *loop)
{
	return (uintptr_t)h - (uintptr_t)loop < sizeof(uv_loop_t);
}

/* ---- shared maps: async handles (uv_async_send from any thread) and work requests ------------ */
static struct umap asyncs; /* key: the uv_async_t, id: its unit */
static size_t nasyncs; /* asyncs.n, read without the lock to skip it when there is none */
static int asyncs_lock;

struct work {
	uv_work_cb work_cb;
	uv_after_work_cb after_cb;
	uint64_t id, loc_work, loc_after;
};
static struct umap works; /* key: the uv_work_t, cb: its struct work */
/* the callbacks of the work request whose after_work_cb runs on this thread: a program that
 * queues the request again from there may pass back req->work_cb (our wrapper) */
static __thread struct { uv_work_cb work_cb; uv_after_work_cb after_cb; } last_work;
static __thread uint8_t pool_thread; /* a thread of libuv's pool: it has run a work_cb */
static int works_lock;

/* A lock a vanished thread held may have left its map between growing (the old table unmapped:
 * agent/mem.c) and storing the new one: that map is given up (leaked), not trusted. The loop
 * table's entries are published after they are whole. */
static void atfork_child(void)
{
	if (asyncs_lock) {
		asyncs = (struct umap){ 0 };
		nasyncs = 0;
	}
	if (works_lock)
		works = (struct umap){ 0 };
	loops_lock = asyncs_lock = works_lock = 0;
}

/* ---- units and locations -------------------------------------------------------------------- */
enum what {
	W_READ, W_CONNECTION, W_WRITE, W_SHUTDOWN, W_CONNECT, W_CLOSE, W_TIMER, W_IDLE, W_PREPARE,
	W_CHECK, W_POLL, W_RECV, W_SEND, W_ASYNC, W_SIGNAL, W_WORK, W_AFTER_WORK, W_FS,
};
static const char *const what_names[] = {
	"read_cb", "connection_cb", "write_cb", "shutdown_cb", "connect_cb", "close_cb", "timer_cb",
	"idle_cb", "prepare_cb", "check_cb", "poll_cb", "recv_cb", "send_cb", "async_cb",
	"signal_cb", "work_cb", "after_work_cb", "fs_cb",
};
#define TYPE_FS ((uv_handle_type)-1) /* a file-system request: named "fs" */

static const char *type_name(uv_handle_type t)
{
	if (t == TYPE_FS)
		return "fs";
	switch (t) {
#define XX(uc, lc) case UV_##uc: return #lc;
	UV_HANDLE_TYPE_MAP(XX)
#undef XX
	default:
		return "handle";
	}
}

/* The location of cb's polls: function cb, call site of its registration, named "<handle type>
 * <callback kind> <function>": the function's name when the dynamic symbol table has it exactly,
 * else (a static function) "<module>+0x<offset from its load base>" (the analyzer shows a
 * location's name string rather than its symbolized address). Cached per loop: dladdr costs
 * microseconds. */
static uint64_t location_of(struct lstate *s, void *cb, void *site, enum what w, const char *type)
{
	uintptr_t c = (uintptr_t)cb, cs = (uintptr_t)site;
	size_t h = ((c >> 4) ^ (cs >> 2) ^ ((uintptr_t)type >> 3) ^ w) & (LOC_CACHE - 1);

	if (s && s->loc_cache[h].id && s->loc_cache[h].cb == c && s->loc_cache[h].site == cs &&
		s->loc_cache[h].what == ((uint32_t)w | (uint32_t)((uintptr_t)type << 8)))
		return s->loc_cache[h].id;
	char name[256];
	Dl_info di;
	int len;
	if (!cb || !dladdr(cb, &di))
		len = snprintf(name, sizeof(name), "%s %s", type, what_names[w]);
	else if (di.dli_sname && di.dli_saddr == cb)
		len = snprintf(name, sizeof(name), "%s %s %s", type, what_names[w], di.dli_sname);
	else /* a static function: its module and offset from the load base, as addr2line takes it */
		len = snprintf(name, sizeof(name), "%s %s %s+%#lx", type, what_names[w],
			di.dli_fname && strrchr(di.dli_fname, '/') ? strrchr(di.dli_fname, '/') + 1 :
			di.dli_fname ? di.dli_fname : "?", (unsigned long)(c - (uintptr_t)di.dli_fbase));
	if (len < 0)
		len = 0;
	if ((size_t)len >= sizeof(name))
		len = sizeof(name) - 1;
	uint64_t id = d9_agent_location(c, cs, d9_agent_string(name, (size_t)len));
	if (s && id) {
		s->loc_cache[h].cb = c;
		s->loc_cache[h].site = cs;
		s->loc_cache[h].what = (uint32_t)w | (uint32_t)((uintptr_t)type << 8);
		s->loc_cache[h].id = id;
	}
	return id;
}

/* A new unit, spawned by the running one (0 outside any callback) at loc. */
static uint64_t unit_spawn(uint64_t loc)
{
	uint64_t id = d9_agent_coroutine_new_id();

	d9_agent_coroutine(id, d9__pl.coroutine, loc, 0);
	d9_rec_spawn(id, d9__pl.coroutine, loc);
	return id;
}

static void unit_exit(uint64_t id)
{
	if (d9__pl_active())
		d9_rec_coroutine_exit(id);
	d9_agent_coroutine_exit(id);
}

/* ---- polls ------------------------------------------------------------------------------------
 * A callback runs as one poll of its unit. libuv runs callbacks one after another, but some run
 * inside another: uv_run called from a callback, a library's callback calling the program's.
 * The thread has one poll open at a time, so the inner callback ends the outer poll, runs as a
 * poll of its own and the outer unit's poll starts again after it (as a coroutine switch would);
 * an inner callback of the same unit stays inside its poll. */
struct frame { uint64_t outer, outer_loc; uint8_t same, rec; };

static inline void enter(struct frame *f, uint64_t id, uint64_t loc)
{
	int e = errno;

	f->outer = d9__pl.coroutine;
	f->outer_loc = cur_loc;
	f->same = f->outer == id;
	f->rec = (uint8_t)d9__pl_active();
	if (f->same)
		return;
	if (f->outer && f->rec)
		d9_rec_poll_end(f->outer);
	d9__pl.coroutine = id;
	cur_loc = loc;
	if (f->rec)
		d9_rec_poll_start(id, loc);
	errno = e;
}

static inline void leave(struct frame *f)
{
	int e = errno;

	if (f->same)
		return;
	/* the agent's end (at_exit) may have closed the poll already: then coroutine is 0 */
	uint64_t id = d9__pl.coroutine;
	if (id && f->rec && d9__pl_active())
		d9_rec_poll_end(id);
	d9__pl.coroutine = f->outer;
	cur_loc = f->outer_loc;
	if (f->outer && f->rec && d9__pl_active())
		d9_rec_poll_start(f->outer, f->outer_loc);
	errno = e;
}

/* The entry of slot of p in its loop's map, copied out (the program's callback may change the
 * map). Returns 0, or -ENOENT: libuv called a wrapper the map has no entry for, which the
 * registrations below never allow (said once; the callback cannot be called). */
static int entry(uv_loop_t *loop, const void *p, int slot, struct uent *out, int take)
{
	struct lstate *s = state_of(loop, 0);
	struct uent *e = s ? um_get(&s->m, (uintptr_t)p | (uintptr_t)slot) : NULL;

	if (D9_UNLIKELY(!e)) {
		LOG_ONCE("a wrapped callback has no entry: it was not called (please report)");
		return -ENOENT;
	}
	*out = *e;
	if (e->what < 32)
		s->last_cb[e->what] = e->cb;
	if (take)
		um_del(&s->m, (uintptr_t)p | (uintptr_t)slot);
	return 0;
}

/* Runs the callback of entry e (its arguments after the macro's). */
#define RUN(e, type, ...)                                                         \
	do {                                                                      \
		struct frame f_;                                                  \
		enter(&f_, (e).id, (e).loc);                                      \
		((type)(e).cb)(__VA_ARGS__);                                      \
		leave(&f_);                                                       \
	} while (0)

/* ---- registrations ------------------------------------------------------------------------------
 * Before the real registration: the entry of (p, slot) takes the program's callback, creating
 * the unit of handle h when it has none (p is h, or a request on h); after it, a failed call
 * puts back what was there. A callback is wrapped only while the adapter is wanted, but a
 * handle that has a unit keeps being wrapped (its close must be seen): its entries stay right
 * whatever D9_ENABLED does meanwhile. */
/* The program's callback behind wrapper kind w when the program passes the wrapper itself for
 * a handle or request without an entry (it read the field of another one): the only original
 * of that kind in the loop's map, else the one a wrapper of that kind ran last. NULL: none. */
static void *orig_behind(struct lstate *s, enum what w)
{
	void *found = NULL;

	for (size_t i = 0; i < s->m.cap; i++) {
		const struct uent *e = &s->m.e[i];
		if (!e->key || e->what != (uint32_t)w || !e->cb)
			continue;
		if (found && found != e->cb)
			return s->last_cb[w];
		found = e->cb;
	}
	return found ? found : s->last_cb[w];
}

struct reg {
	struct lstate *s;
	uintptr_t key, unit_key; /* (p, slot); the handle's unit entry (h, SLOT_CB) */
	struct uent old; /* key 0: there was none */
	uint64_t spawned; /* the unit made for this registration, 0: none */
	uint64_t id; /* the unit of the entry */
	int err; /* errno before the registration */
};

/* Returns 1 when the wrapper must be passed (then call reg_end with the result). */
static int reg_begin(struct reg *r, uv_loop_t *loop, uv_handle_t *h, uv_handle_type type,
	const void *p, int slot, void **cbp, void *wrapper, enum what w, void *site)
{
	/* recording off (D9_ENABLED=0, the toggle signal): no new unit, since its Spawn and
	 * definition would be missing from the trace once recording is back on */
	int wanted = !refused && d9__enabled && d9__rt_wanted(&d9__rt_libuv);
	struct lstate *s = loop && !internal(h, loop) ? state_of(loop, wanted) : NULL;

	r->err = errno;
	if (!s)
		return 0;
	r->s = s;
	r->key = (uintptr_t)p | (uintptr_t)slot;
	r->unit_key = (uintptr_t)h | SLOT_CB;
	struct uent *e = um_get(&s->m, r->key);
	int passed_back = *cbp == wrapper;
	if (passed_back) {
		/* the program passes back what it read from a handle (uv_timer_start(t, t->timer_cb,
		 * ...), and libuv's own uv_timer_again does): the callback behind our wrapper */
		*cbp = e && e->cb ? e->cb : orig_behind(s, w);
		errno = r->err;
		if (!*cbp) {
			LOG_ONCE("a callback read back from a handle has no known original: not called");
			return 0;
		}
	}
	void *cb = *cbp;
	struct uent *unit = um_get(&s->m, r->unit_key);
	if (!unit && (!wanted || !cb))
		return 0; /* e.g. a close without a callback of a handle that never had one */
	e = um_get(&s->m, r->key);
	r->old = e ? *e : (struct uent){ 0 };
	r->spawned = 0;
	uint64_t loc = passed_back && e ? e->loc :
		wanted && cb ? location_of(s, cb, site, w, type_name(type)) : 0;
	uint64_t id = unit ? unit->id : 0;
	if (!id) {
		r->spawned = id = unit_spawn(loc);
		if (r->unit_key != r->key && um_put(&s->m, r->unit_key, NULL, id, loc))
			goto err_unit;
	}
	if (um_put(&s->m, r->key, cb, id, loc))
		goto err_entry;
	um_get(&s->m, r->key)->what = (uint32_t)w;
	r->id = id;
	errno = r->err;
	return 1;
err_entry:
	if (r->spawned)
		um_del(&s->m, r->unit_key);
err_unit:
	if (r->spawned)
		unit_exit(r->spawned);
	LOG_ONCE("out of memory: some callbacks are not traced");
	errno = r->err;
	return 0;
}

static void reg_end(struct reg *r, int result)
{
	int e = errno;

	if (result == 0)
		return;
	if (r->old.key) {
		um_put(&r->s->m, r->key, r->old.cb, r->old.id, r->old.loc); /* in place: cannot fail */
	} else {
		um_del(&r->s->m, r->key);
		if (r->spawned) {
			um_del(&r->s->m, r->unit_key);
			unit_exit(r->spawned);
		}
	}
	errno = e;
}

#define SITE __builtin_return_address(0)

/* ---- handle callbacks ----------------------------------------------------------------------- */
static void w_read(uv_stream_t *h, ssize_t n, const uv_buf_t *buf)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_read_cb, h, n, buf);
}

static void w_connection(uv_stream_t *h, int status)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_connection_cb, h, status);
}

/* A one-shot timer's run starts with a timer Wake whose object is its deadline: libuv's due
 * time (h->timeout, in ms of the loop's CLOCK_MONOTONIC time, so its deadline is up to 1 ms
 * earlier than the instant libuv computed it from). A repeating timer has already been
 * rearmed (uv_timer_again) when its callback runs, its due time is gone: no Wake. */
static void timer_wake(const uv_timer_t *h, uint64_t id)
{
	struct timespec ts;

	if (h->repeat || !d9__pl_active() || clock_gettime(CLOCK_MONOTONIC, &ts))
		return;
	int64_t late_ns = (int64_t)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) -
		(int64_t)(h->timeout * 1000000u);
	int64_t units = (int64_t)(d9_agent_ns_to_ticks((uint64_t)(late_ns < 0 ? -late_ns : late_ns)) >>
		d9__shift);
	d9_rec_wake(id, 0, D9_WAKE_TIMER, late_ns < 0 ? units : -units);
}

static void w_timer(uv_timer_t *h)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0)) {
		int err = errno;
		timer_wake(h, e.id);
		errno = err;
		RUN(e, uv_timer_cb, h);
	}
}

static void w_idle(uv_idle_t *h)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_idle_cb, h);
}

static void w_prepare(uv_prepare_t *h)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_prepare_cb, h);
}

static void w_check(uv_check_t *h)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_check_cb, h);
}

static void w_poll(uv_poll_t *h, int status, int events)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_poll_cb, h, status, events);
}

static void w_recv(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *addr,
	unsigned flags)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_udp_recv_cb, h, n, buf, addr, flags);
}

static void w_signal(uv_signal_t *h, int signum)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_signal_cb, h, signum);
}

static void w_async(uv_async_t *h)
{
	struct uent e;
	if (!entry(h->loop, h, SLOT_CB, &e, 0))
		RUN(e, uv_async_cb, h);
}

/* The handle's last callback: its entries go before the program's close callback runs (it may
 * free the handle), and its unit exits after it. Requests still pending on a closing handle
 * (writes, sends, connects, shutdowns) get their callbacks before this one. */
static void w_close(uv_handle_t *h)
{
	struct uent c, u;
	uv_loop_t *loop = h->loop;

	if (entry(loop, h, SLOT_CLOSE, &c, 1))
		return;
	if (!entry(loop, h, SLOT_CB, &u, 1) && u.id != c.id)
		c.id = u.id; /* cannot differ: both were made for the same unit */
	if (h->type == UV_ASYNC) {
		spin_lock(&asyncs_lock);
		um_del(&asyncs, (uintptr_t)h);
		__atomic_store_n(&nasyncs, asyncs.n, __ATOMIC_RELAXED);
		spin_unlock(&asyncs_lock);
	}
	if (c.cb)
		RUN(c, uv_close_cb, h);
	unit_exit(c.id);
}

/* ---- request callbacks: each runs once, as a poll of its handle's unit ---------------------- */
static void w_write(uv_write_t *req, int status)
{
	struct uent e;
	if (!entry(req->handle->loop, req, SLOT_CB, &e, 1))
		RUN(e, uv_write_cb, req, status);
}

static void w_shutdown(uv_shutdown_t *req, int status)
{
	struct uent e;
	if (!entry(req->handle->loop, req, SLOT_CB, &e, 1))
		RUN(e, uv_shutdown_cb, req, status);
}

static void w_connect(uv_connect_t *req, int status)
{
	struct uent e;
	if (!entry(req->handle->loop, req, SLOT_CB, &e, 1))
		RUN(e, uv_connect_cb, req, status);
}

static void w_send(uv_udp_send_t *req, int status)
{
	struct uent e;
	if (!entry(req->handle->loop, req, SLOT_CB, &e, 1))
		RUN(e, uv_udp_send_cb, req, status);
}

/* ---- registration interposers ------------------------------------------------------------------
 * Each passes straight through when libuv has no such function (ENOSYS), when the adapter does
 * not want the call, or when it cannot keep an entry; otherwise it passes its wrapper. */
#define REAL_OR_ENOSYS(ret, name, params)                                         \
	D9_REAL(ret, name, params);                                                \
	if (!real_##name)                                                          \
		return UV_ENOSYS

/* The usual shape: a handle h starts calling cb (slot 0), via real(h, ..., wrapper, ...). */
#define HANDLE_START(h, cb, what, wrapper, call_orig, call_wrapped)                             \
	do {                                                                               \
		struct reg r_;                                                             \
		void *cb_ = (void *)(cb);                                                  \
		if (!cb_ || !reg_begin(&r_, (h)->loop, (uv_handle_t *)(h), (h)->type, (h), \
				SLOT_CB, &cb_, (void *)(wrapper), (what), SITE))           \
			return (call_orig);                                                \
		int rc_ = (call_wrapped);                                                  \
		reg_end(&r_, rc_);                                                         \
		return rc_;                                                                \
	} while (0)

D9_INTERPOSE int uv_read_start(uv_stream_t *h, uv_alloc_cb alloc_cb, uv_read_cb read_cb)
{
	REAL_OR_ENOSYS(int, uv_read_start, (uv_stream_t *, uv_alloc_cb, uv_read_cb));
	HANDLE_START(h, read_cb, W_READ, w_read,
		real_uv_read_start(h, alloc_cb, (__typeof__(read_cb))cb_),
		real_uv_read_start(h, alloc_cb, w_read));
}

D9_INTERPOSE int uv_listen(uv_stream_t *h, int backlog, uv_connection_cb cb)
{
	REAL_OR_ENOSYS(int, uv_listen, (uv_stream_t *, int, uv_connection_cb));
	HANDLE_START(h, cb, W_CONNECTION, w_connection,
		real_uv_listen(h, backlog, (__typeof__(cb))cb_),
		real_uv_listen(h, backlog, w_connection));
}

D9_INTERPOSE int uv_timer_start(uv_timer_t *h, uv_timer_cb cb, uint64_t timeout, uint64_t repeat)
{
	REAL_OR_ENOSYS(int, uv_timer_start, (uv_timer_t *, uv_timer_cb, uint64_t, uint64_t));
	HANDLE_START(h, cb, W_TIMER, w_timer,
		real_uv_timer_start(h, (__typeof__(cb))cb_, timeout, repeat),
		real_uv_timer_start(h, w_timer, timeout, repeat));
}

D9_INTERPOSE int uv_idle_start(uv_idle_t *h, uv_idle_cb cb)
{
	REAL_OR_ENOSYS(int, uv_idle_start, (uv_idle_t *, uv_idle_cb));
	HANDLE_START(h, cb, W_IDLE, w_idle,
		real_uv_idle_start(h, (__typeof__(cb))cb_),
		real_uv_idle_start(h, w_idle));
}

D9_INTERPOSE int uv_prepare_start(uv_prepare_t *h, uv_prepare_cb cb)
{
	REAL_OR_ENOSYS(int, uv_prepare_start, (uv_prepare_t *, uv_prepare_cb));
	HANDLE_START(h, cb, W_PREPARE, w_prepare,
		real_uv_prepare_start(h, (__typeof__(cb))cb_),
		real_uv_prepare_start(h, w_prepare));
}

D9_INTERPOSE int uv_check_start(uv_check_t *h, uv_check_cb cb)
{
	REAL_OR_ENOSYS(int, uv_check_start, (uv_check_t *, uv_check_cb));
	HANDLE_START(h, cb, W_CHECK, w_check,
		real_uv_check_start(h, (__typeof__(cb))cb_),
		real_uv_check_start(h, w_check));
}

D9_INTERPOSE int uv_poll_start(uv_poll_t *h, int events, uv_poll_cb cb)
{
	REAL_OR_ENOSYS(int, uv_poll_start, (uv_poll_t *, int, uv_poll_cb));
	HANDLE_START(h, cb, W_POLL, w_poll,
		real_uv_poll_start(h, events, (__typeof__(cb))cb_),
		real_uv_poll_start(h, events, w_poll));
}

D9_INTERPOSE int uv_udp_recv_start(uv_udp_t *h, uv_alloc_cb alloc_cb, uv_udp_recv_cb cb)
{
	REAL_OR_ENOSYS(int, uv_udp_recv_start, (uv_udp_t *, uv_alloc_cb, uv_udp_recv_cb));
	HANDLE_START(h, cb, W_RECV, w_recv,
		real_uv_udp_recv_start(h, alloc_cb, (__typeof__(cb))cb_),
		real_uv_udp_recv_start(h, alloc_cb, w_recv));
}

D9_INTERPOSE int uv_signal_start(uv_signal_t *h, uv_signal_cb cb, int signum)
{
	REAL_OR_ENOSYS(int, uv_signal_start, (uv_signal_t *, uv_signal_cb, int));
	HANDLE_START(h, cb, W_SIGNAL, w_signal,
		real_uv_signal_start(h, (__typeof__(cb))cb_, signum),
		real_uv_signal_start(h, w_signal, signum));
}

D9_INTERPOSE int uv_signal_start_oneshot(uv_signal_t *h, uv_signal_cb cb, int signum)
{
	REAL_OR_ENOSYS(int, uv_signal_start_oneshot, (uv_signal_t *, uv_signal_cb, int));
	HANDLE_START(h, cb, W_SIGNAL, w_signal,
		real_uv_signal_start_oneshot(h, (__typeof__(cb))cb_, signum),
		real_uv_signal_start_oneshot(h, w_signal, signum));
}

/* A request on stream or UDP handle h runs cb once, as a poll of h's unit. */
#define REQ_START(req, h, cb, what, wrapper, call_orig, call_wrapped)                           \
	do {                                                                               \
		struct reg r_;                                                             \
		void *cb_ = (void *)(cb);                                                  \
		if (!cb_ || !reg_begin(&r_, (h)->loop, (uv_handle_t *)(h), (h)->type, (req), \
				SLOT_CB, &cb_, (void *)(wrapper), (what), SITE))           \
			return (call_orig);                                                \
		int rc_ = (call_wrapped);                                                  \
		reg_end(&r_, rc_);                                                         \
		return rc_;                                                                \
	} while (0)

D9_INTERPOSE int uv_write(uv_write_t *req, uv_stream_t *h, const uv_buf_t bufs[], unsigned int n,
	uv_write_cb cb)
{
	REAL_OR_ENOSYS(int, uv_write, (uv_write_t *, uv_stream_t *, const uv_buf_t[], unsigned int,
		uv_write_cb));
	REQ_START(req, h, cb, W_WRITE, w_write,
		real_uv_write(req, h, bufs, n, (__typeof__(cb))cb_),
		real_uv_write(req, h, bufs, n, w_write));
}

D9_INTERPOSE int uv_shutdown(uv_shutdown_t *req, uv_stream_t *h, uv_shutdown_cb cb)
{
	REAL_OR_ENOSYS(int, uv_shutdown, (uv_shutdown_t *, uv_stream_t *, uv_shutdown_cb));
	REQ_START(req, h, cb, W_SHUTDOWN, w_shutdown,
		real_uv_shutdown(req, h, (__typeof__(cb))cb_),
		real_uv_shutdown(req, h, w_shutdown));
}

D9_INTERPOSE int uv_tcp_connect(uv_connect_t *req, uv_tcp_t *h, const struct sockaddr *addr,
	uv_connect_cb cb)
{
	REAL_OR_ENOSYS(int, uv_tcp_connect, (uv_connect_t *, uv_tcp_t *, const struct sockaddr *,
		uv_connect_cb));
	REQ_START(req, h, cb, W_CONNECT, w_connect,
		real_uv_tcp_connect(req, h, addr, (__typeof__(cb))cb_),
		real_uv_tcp_connect(req, h, addr, w_connect));
}

D9_INTERPOSE int uv_udp_send(uv_udp_send_t *req, uv_udp_t *h, const uv_buf_t bufs[],
	unsigned int n, const struct sockaddr *addr, uv_udp_send_cb cb)
{
	REAL_OR_ENOSYS(int, uv_udp_send, (uv_udp_send_t *, uv_udp_t *, const uv_buf_t[], unsigned int,
		const struct sockaddr *, uv_udp_send_cb));
	REQ_START(req, h, cb, W_SEND, w_send,
		real_uv_udp_send(req, h, bufs, n, addr, (__typeof__(cb))cb_),
		real_uv_udp_send(req, h, bufs, n, addr, w_send));
}

/* ---- file-system requests: each is a unit of its own --------------------------------------------
 * Spawned when submitted (parent: the running unit), its callback is its one poll, then it
 * exits. libuv runs the operation on a pool thread inside its own machinery, which d9 does not
 * see: no Wake, so no queue delay (uv_queue_work has one). Synchronous calls (no callback) pass
 * straight through; the libc calls they make are the caller's. */
static void w_fs(uv_fs_t *req)
{
	struct uent e;
	if (!entry(req->loop, req, SLOT_CB, &e, 1)) {
		RUN(e, uv_fs_cb, req);
		int err = errno;
		unit_exit(e.id);
		errno = err;
	}
}

#define FS_INTERPOSE(fn, params, args)                                                       \
	D9_INTERPOSE int fn params                                                               \
	{                                                                                        \
		REAL_OR_ENOSYS(int, fn, params);                                                 \
		struct reg r_;                                                                   \
		void *cb_ = (void *)cb;                                                          \
		if (!cb_ || !reg_begin(&r_, loop, (uv_handle_t *)req, TYPE_FS, req, SLOT_CB,     \
				&cb_, (void *)w_fs, W_FS, SITE)) {                               \
			cb = (uv_fs_cb)cb_;                                                      \
			return real_##fn args;                                                   \
		}                                                                                \
		cb = w_fs;                                                                       \
		int rc_ = real_##fn args;                                                        \
		reg_end(&r_, rc_);                                                               \
		return rc_;                                                                      \
	}

FS_INTERPOSE(uv_fs_open, (uv_loop_t *loop, uv_fs_t *req, const char *path, int flags, int mode,
	uv_fs_cb cb), (loop, req, path, flags, mode, cb))
FS_INTERPOSE(uv_fs_close, (uv_loop_t *loop, uv_fs_t *req, uv_file file, uv_fs_cb cb),
	(loop, req, file, cb))
FS_INTERPOSE(uv_fs_read, (uv_loop_t *loop, uv_fs_t *req, uv_file file, const uv_buf_t bufs[],
	unsigned int nbufs, int64_t offset, uv_fs_cb cb), (loop, req, file, bufs, nbufs, offset, cb))
FS_INTERPOSE(uv_fs_write, (uv_loop_t *loop, uv_fs_t *req, uv_file file, const uv_buf_t bufs[],
	unsigned int nbufs, int64_t offset, uv_fs_cb cb), (loop, req, file, bufs, nbufs, offset, cb))
FS_INTERPOSE(uv_fs_stat, (uv_loop_t *loop, uv_fs_t *req, const char *path, uv_fs_cb cb),
	(loop, req, path, cb))
FS_INTERPOSE(uv_fs_lstat, (uv_loop_t *loop, uv_fs_t *req, const char *path, uv_fs_cb cb),
	(loop, req, path, cb))
FS_INTERPOSE(uv_fs_fstat, (uv_loop_t *loop, uv_fs_t *req, uv_file file, uv_fs_cb cb),
	(loop, req, file, cb))
FS_INTERPOSE(uv_fs_unlink, (uv_loop_t *loop, uv_fs_t *req, const char *path, uv_fs_cb cb),
	(loop, req, path, cb))
FS_INTERPOSE(uv_fs_rename, (uv_loop_t *loop, uv_fs_t *req, const char *path, const char *new_path,
	uv_fs_cb cb), (loop, req, path, new_path, cb))
FS_INTERPOSE(uv_fs_fsync, (uv_loop_t *loop, uv_fs_t *req, uv_file file, uv_fs_cb cb),
	(loop, req, file, cb))
FS_INTERPOSE(uv_fs_fdatasync, (uv_loop_t *loop, uv_fs_t *req, uv_file file, uv_fs_cb cb),
	(loop, req, file, cb))
FS_INTERPOSE(uv_fs_ftruncate, (uv_loop_t *loop, uv_fs_t *req, uv_file file, int64_t offset,
	uv_fs_cb cb), (loop, req, file, offset, cb))
FS_INTERPOSE(uv_fs_mkdir, (uv_loop_t *loop, uv_fs_t *req, const char *path, int mode,
	uv_fs_cb cb), (loop, req, path, mode, cb))
FS_INTERPOSE(uv_fs_scandir, (uv_loop_t *loop, uv_fs_t *req, const char *path, int flags,
	uv_fs_cb cb), (loop, req, path, flags, cb))
FS_INTERPOSE(uv_fs_sendfile, (uv_loop_t *loop, uv_fs_t *req, uv_file out_fd, uv_file in_fd,
	int64_t in_offset, size_t length, uv_fs_cb cb),
	(loop, req, out_fd, in_fd, in_offset, length, cb))

/* uv_close: the close callback is always wrapped for a handle with a unit (also when the program
 * passes none), so its entries and unit end exactly when libuv is done with it. */
D9_INTERPOSE void uv_close(uv_handle_t *h, uv_close_cb cb)
{
	D9_REAL(void, uv_close, (uv_handle_t *, uv_close_cb));
	struct reg r;

	void *cb_ = (void *)cb;

	if (!real_uv_close)
		return;
	if (!reg_begin(&r, h->loop, h, h->type, h, SLOT_CLOSE, &cb_, (void *)w_close, W_CLOSE, SITE)) {
		real_uv_close(h, (uv_close_cb)cb_);
		return;
	}
	real_uv_close(h, w_close);
}

/* ---- async handles: uv_async_send from any thread wakes the handle's unit ------------------- */
D9_INTERPOSE int uv_async_init(uv_loop_t *loop, uv_async_t *h, uv_async_cb cb)
{
	REAL_OR_ENOSYS(int, uv_async_init, (uv_loop_t *, uv_async_t *, uv_async_cb));
	struct reg r;
	void *cb_ = (void *)cb;

	if (!cb || !reg_begin(&r, loop, (uv_handle_t *)h, UV_ASYNC, h, SLOT_CB, &cb_, (void *)w_async,
			W_ASYNC, SITE))
		return real_uv_async_init(loop, h, (uv_async_cb)cb_);
	int e = errno;
	spin_lock(&asyncs_lock);
	int put = um_put(&asyncs, (uintptr_t)h, NULL, r.id, 0); /* failed: its sends are not seen */
	__atomic_store_n(&nasyncs, asyncs.n, __ATOMIC_RELAXED);
	spin_unlock(&asyncs_lock);
	errno = e;
	int rc = real_uv_async_init(loop, h, w_async);
	reg_end(&r, rc);
	if (rc && !put) {
		e = errno;
		spin_lock(&asyncs_lock);
		um_del(&asyncs, (uintptr_t)h);
		__atomic_store_n(&nasyncs, asyncs.n, __ATOMIC_RELAXED);
		spin_unlock(&asyncs_lock);
		errno = e;
	}
	return rc;
}

D9_INTERPOSE int uv_async_send(uv_async_t *h)
{
	REAL_OR_ENOSYS(int, uv_async_send, (uv_async_t *));
	/* libuv allows uv_async_send in a signal handler, which may interrupt this thread while it
	 * holds the lock (uv_async_init, uv_close): so the lock is waited for a few microseconds at
	 * most, then the Wake is not recorded (said once) rather than the handler never returning */
	if (__atomic_load_n(&nasyncs, __ATOMIC_RELAXED) && d9__pl_active() &&
		spin_trylock(&asyncs_lock)) {
		int e = errno;
		struct uent *u = um_get(&asyncs, (uintptr_t)h);
		uint64_t id = u ? u->id : 0;
		spin_unlock(&asyncs_lock);
		/* the cond kind: a signal from one thread to another (FORMAT.md has no async kind) */
		if (id)
			d9_rec_wake(id, d9__pl.coroutine, D9_WAKE_COND, (int64_t)(uintptr_t)h);
		errno = e;
	} else if (__atomic_load_n(&nasyncs, __ATOMIC_RELAXED) && d9__pl_active()) {
		LOG_ONCE("uv_async_send: a Wake was not recorded (its map stayed locked)");
	}
	return real_uv_async_send(h);
}

/* ---- the thread pool: uv_queue_work spawns a unit ----------------------------------------------
 * Spawn and spawn Wake on the submitting thread; work_cb's poll on a pool thread (the Wake's
 * delay to it is the queue delay); when work_cb returns, a Wake (other, object: the request)
 * from the pool thread; after_work_cb's poll on the loop thread; then the unit exits. */
static struct work *work_of(uv_work_t *req, int take)
{
	spin_lock(&works_lock);
	struct uent *e = um_get(&works, (uintptr_t)req);
	struct work *w = e ? e->cb : NULL;
	if (e && take)
		um_del(&works, (uintptr_t)req);
	spin_unlock(&works_lock);
	if (!w)
		LOG_ONCE("a wrapped work request has no entry: it was not run (please report)");
	return w;
}

static void w_work(uv_work_t *req)
{
	int err = errno;
	struct work *w = work_of(req, 0);

	if (!w)
		return;
	/* a pool thread: its blocking calls inside work_cb count as the unit's */
	if (D9_UNLIKELY(!d9__pl.rt) && d9__pl_active() && d9_agent_become_worker())
		d9__pl_set_rt(&d9__rt_libuv);
	pool_thread = 1;
	struct uent e = { (uintptr_t)req, (void *)w->work_cb, w->id, w->loc_work, W_WORK };
	errno = err;
	RUN(e, uv_work_cb, req);
	if (d9__pl_active()) {
		err = errno;
		d9_rec_wake(e.id, 0, D9_WAKE_OTHER, (int64_t)(uintptr_t)req);
		errno = err;
	}
}

static void w_after_work(uv_work_t *req, int status)
{
	int err = errno;
	struct work *w = work_of(req, 1);

	if (!w)
		return;
	struct work c = *w;
	d9__mem_free(w);
	errno = err;
	last_work.work_cb = c.work_cb;
	last_work.after_cb = c.after_cb;
	if (c.after_cb) {
		struct uent e = { (uintptr_t)req, (void *)c.after_cb, c.id, c.loc_after, W_AFTER_WORK };
		RUN(e, uv_after_work_cb, req, status);
	}
	err = errno;
	unit_exit(c.id);
	errno = err;
}

D9_INTERPOSE int uv_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work_cb,
	uv_after_work_cb after_cb)
{
	REAL_OR_ENOSYS(int, uv_queue_work, (uv_loop_t *, uv_work_t *, uv_work_cb, uv_after_work_cb));
	if (work_cb == w_work || after_cb == w_after_work) {
		/* passed back from the request (see last_work) */
		work_cb = work_cb == w_work ? last_work.work_cb : work_cb;
		after_cb = after_cb == w_after_work ? last_work.after_cb : after_cb;
		if (!work_cb)
			return UV_EINVAL; /* what libuv says to a work request without work_cb */
	}
	if (!work_cb || refused || !d9__enabled || !d9__rt_wanted(&d9__rt_libuv))
		return real_uv_queue_work(loop, req, work_cb, after_cb);
	int e = errno;
	struct lstate *s = state_of(loop, 1);
	struct work *w = d9__mem_alloc(sizeof(*w));
	if (!w) {
		errno = e;
		return real_uv_queue_work(loop, req, work_cb, after_cb);
	}
	w->work_cb = work_cb;
	w->after_cb = after_cb;
	w->loc_work = location_of(s, (void *)work_cb, SITE, W_WORK, "work");
	w->loc_after = after_cb ? location_of(s, (void *)after_cb, SITE, W_AFTER_WORK, "work") : 0;
	spin_lock(&works_lock);
	int put = um_put(&works, (uintptr_t)req, w, 0, 0);
	spin_unlock(&works_lock);
	if (put) {
		d9__mem_free(w);
		errno = e;
		return real_uv_queue_work(loop, req, work_cb, after_cb);
	}
	/* before the real call: a pool thread may start work_cb before it returns */
	w->id = unit_spawn(w->loc_work);
	if (d9__pl_active())
		d9_rec_wake(w->id, d9__pl.coroutine, D9_WAKE_SPAWN, 0);
	errno = e;
	int rc = real_uv_queue_work(loop, req, w_work, w_after_work);
	if (rc) {
		e = errno;
		work_of(req, 1);
		unit_exit(w->id);
		d9__mem_free(w);
		errno = e;
	}
	return rc;
}

/* A pool thread waits for work in uv_cond_wait: that wait is its park (as epoll_wait is the
 * loop's), so the writer takes its chunk while it waits: without it, a pool thread's events
 * would stay in its chunk until it records again. Any other uv_cond_wait passes through (inside
 * a work_cb it is a blocking call, libc-block.c's pthread_cond_wait). */
D9_INTERPOSE void uv_cond_wait(uv_cond_t *cond, uv_mutex_t *mutex)
{
	D9_REAL(void, uv_cond_wait, (uv_cond_t *, uv_mutex_t *));
	int parked = pool_thread && !d9__pl.coroutine && d9__pl_active();

	if (parked) {
		int e = errno;
		d9_rec_park(D9_CALL_OTHER, -1);
		errno = e;
	}
	if (real_uv_cond_wait)
		real_uv_cond_wait(cond, mutex);
	else
		pthread_cond_wait(cond, mutex); /* libuv's uv_cond_t on Unix */
	if (parked) {
		int e = errno;
		d9_rec_unpark(0, D9_UNKNOWN, D9_UNKNOWN);
		errno = e;
	}
}

/* ---- the loop ------------------------------------------------------------------------------- */
/* The thread that runs a loop is the scheduler: a worker whose callbacks are units of work
 * (libc-block.c times blocking calls only inside them). Its wait, epoll_wait inside uv_run, is
 * parked by libc-wait.c. */
D9_INTERPOSE int uv_run(uv_loop_t *loop, uv_run_mode mode)
{
	REAL_OR_ENOSYS(int, uv_run, (uv_loop_t *, uv_run_mode));
	if (D9_UNLIKELY(!d9__pl.rt) && !refused && d9__rt_wanted(&d9__rt_libuv)) {
		int e = errno;
		if (d9_agent_become_worker())
			d9__pl_set_rt(&d9__rt_libuv);
		errno = e;
	}
	return real_uv_run(loop, mode);
}

/* A closed loop has no handle or request left: what its map still holds is stale. */
D9_INTERPOSE int uv_loop_close(uv_loop_t *loop)
{
	REAL_OR_ENOSYS(int, uv_loop_close, (uv_loop_t *));
	int rc = real_uv_loop_close(loop);
	struct lstate *s;
	if (rc == 0 && (s = state_of(loop, 0))) {
		d9__mem_free(s->m.e);
		s->m = (struct umap){ 0 };
	}
	return rc;
}

/* Called by the agent at exit, on the exiting thread: the callback running there (the program
 * exits inside it) ends its poll. */
static void at_exit(void)
{
	if (d9__pl.rt == &d9__rt_libuv && d9__pl.coroutine) {
		d9_rec_poll_end(d9__pl.coroutine);
		d9__pl.coroutine = 0;
	}
}

/* libuv 1.x keeps its ABI (structure sizes and public fields, which is all this file reads);
 * another major version is refused. */
static int attach(void)
{
	unsigned (*version)(void) = (unsigned (*)(void))d9__real("uv_version", NULL);
	size_t (*loop_size)(void) = (size_t (*)(void))d9__real("uv_loop_size", NULL);

	if (!version)
		return 0;
	if (version() >> 16 != UV_VERSION_MAJOR || !loop_size || loop_size() != sizeof(uv_loop_t)) {
		refused = 1;
		LOG_ONCE("this libuv is not the 1.x this agent was built for: its callbacks are not traced");
		return -ENOTSUP;
	}
	pthread_atfork(NULL, NULL, atfork_child);
	return 1;
}

const struct d9__runtime d9__rt_libuv = {
	.name = "libuv",
	.attach = attach,
	.at_exit = at_exit,
};
