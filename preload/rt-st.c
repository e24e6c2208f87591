/* rt-st.c: the State Threads adapter (Debian libst 1.9, ../shared/ST-NOTES.md; SRS's fork with its
 * epoll event system, agent/DESIGN.md "State Threads as SRS builds it"). It turns ST's switch callbacks and scheduler entry points into polls, spawns,
 * exits, wakes and run-queue samples:
 *   - st_init: installs the callbacks after the real st_init (which wipes them), excludes the idle
 *     coroutine it creates (the scheduler, not user work), starts the primordial coroutine's poll;
 *   - st_thread_create: Spawn + a spawn Wake; the start routine is wrapped, because a coroutine's
 *     first run gets no in-callback; st_thread_exit ends the last poll (zombies get no
 *     out-callback) and records CoroutineExit;
 *   - st_poll / st_usleep / st_cond_timedwait / st_mutex_lock / st_thread_join note what a
 *     coroutine waits for; st_cond_signal/broadcast, st_mutex_unlock, st_thread_interrupt and the
 *     idle coroutine's select/poll/epoll_wait (libc-wait.c) name who woke it; a timer or timeout
 *     wake is recorded when the coroutine runs again, with its deadline; a switching
 *     st_thread_yield (SRS) is a wake of the coroutine by itself.
 * The same hooks serve a runtime linked into the executable: rt-st-static.c patches its entry
 * points to them before main, and sets the real functions they call (rt-st.h).
 * Everything runs on the scheduler's thread (ST's state is per scheduler), so the adapter's state
 * is per thread and needs no locks. It never changes what ST does: every wrapper calls the real
 * function with the same arguments and returns its result and errno. */
#include "preload.h"
#include "runtime.h"
#include "pmap.h"
#include "rt-st.h"
#include "waitq.h"
#include "internal.h" /* d9__drop_one, d9__log_once */

#include <dlfcn.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

struct fdw { /* one descriptor a coroutine waits on in st_poll, beside others */
	struct fdw *next;
	struct co *co;
	int fd;
	short events;
};

/* A descriptor's waiters: the one coroutine that waits on it alone (st_poll of one descriptor,
 * the common case: st_read, st_write, st_accept...; its events in co->wait_events), and the
 * others. The slot is taken when free and given back by its taker. */
struct fdslot {
	struct co *co;
	struct fdw *more;
};

struct co {
	uint64_t id, location;
	void *(*start)(void *);
	void *arg;
	st_utime_t due; /* when its wait times out, on ST's clock as ST keeps it; 0: none */
	st_utime_t since; /* ST's cached clock when the wait began */
	uint64_t deadline; /* the same on the event clock, without ST's clock functions; 0: none */
	struct co *qnext; /* FIFO of a condition variable or mutex */
	struct waitq *waitq; /* the FIFO it is on, NULL: none */
	uint32_t wait_kind; /* D9_WAKE_* it expects while blocked, 0: not blocked in a wrapper */
	short wait_events; /* poll events it waits for in a descriptor's slot (struct fdslot) */
	uint8_t woken, exited, join;
	uint8_t yielding; /* inside st_thread_yield (SRS): switching out puts it on the run queue */
	uint8_t untracked; /* not in the table (no memory): never recorded; the trampoline frees it */
	void *locking; /* the mutex its st_mutex_lock is taking: goes on its FIFO if it blocks */
	struct fdw *wbuf; /* poll_listed's entries for more than 8 descriptors, kept for reuse */
	uint32_t wcap;
};

/* A coroutine's record and what it keeps. */
static void co_free(struct co *co)
{
	if (co) {
		d9__mem_free(co->wbuf);
		d9__mem_free(co);
	}
}

struct st_state {
	struct pmap threads; /* st_thread_t -> struct co */
	struct pmap queues; /* cond or mutex -> struct waitq (kept when empty: waitq.h) */
	size_t nwaiting; /* coroutines on the queues */
	size_t sweep_at; /* the queues' empty FIFOs are freed when the map has this many entries */
	struct fdslot *fds; /* fd -> waiters */
	size_t nfds;
	struct co *cur; /* the running coroutine, NULL in the scheduler */
	struct co *dead; /* exited; freed once another coroutine runs */
	struct co *exiting; /* returned, still signalling its joiner: named as the waker */
	uint64_t runnable, next_sample;
	st_switch_cb_t app_in, app_out; /* the application's own callbacks, chained */
	int in_init;
	struct d9__loc_cache locs;
};

static __thread struct st_state *S __attribute__((tls_model("initial-exec")));

/* The runtime's functions as the adapter calls them: with libst.so, the next definition after the
 * agent's (found on first use); with libst.a linked into the program, the executable's own, set
 * before main by rt-st-static.c (a patched entry's relocated start, or the function itself). */
#define X(ret, name, params) static ret(*real_##name) params;
D9__ST_FUNCS(X)
#undef X

#define ST_REAL(name)                                                               \
	do {                                                                        \
		if (D9_UNLIKELY(!real_##name) && !d9__st_static)                    \
			real_##name = (__typeof__(real_##name))d9__real(#name, NULL); \
	} while (0)

/* ---- recording helpers ------------------------------------------------------------------------- */

const struct d9__runtime d9__rt_st;

static int adapter_wanted(void)
{
	return d9__rt_wanted(&d9__rt_st);
}

static uint64_t location_of(void *start, void *callsite)
{
	return d9__rt_location(&S->locs, start, callsite);
}

/* co became runnable because of `waker` (0: none) for `kind` on `object`, at `at` (d9__now(); for
 * the descriptors the idle wait found ready, when it returned). Inline everywhere: out of line
 * (gcc splits it once it has several callers) each Wake of the idle loop cost a call. */
static inline __attribute__((always_inline)) void wake_at(uint64_t at, struct co *co,
	uint64_t waker, uint32_t kind, int64_t object)
{
	if (co->woken || co->exited)
		return;
	co->woken = 1;
	S->runnable++;
	d9_rec_wake_at(at, co->id, waker, kind, object);
}

static inline __attribute__((always_inline)) void wake(struct co *co, uint64_t waker,
	uint32_t kind, int64_t object)
{
	wake_at(d9__now(), co, waker, kind, object);
}

/* runtime.h's run-queue sample, with this scheduler's counts */
static inline void sample_queue(struct st_state *s)
{
	d9__rt_sample_queue(s->runnable, &s->next_sample);
}

static int64_t until_due(const struct co *co, uint64_t now);
static void lock_blocked(struct st_state *s, struct co *co);

/* The rare parts of run(), out of line: a dead coroutine to free, a worker to become (e.g. in a
 * forked child), a wake nobody we saw made. */
static __attribute__((noinline, cold)) void run_rare(struct st_state *s, struct co *co)
{
	if (s->dead) {
		co_free(s->dead);
		s->dead = NULL;
	}
	if (!d9__self.worker)
		d9_agent_become_worker();
	if (!co->woken) {
		/* nobody we saw woke it: its timer or timeout fired, or something we do not see */
		uint64_t now = d9__now();
		uint32_t kind = co->due || co->deadline ? D9_WAKE_TIMER : D9_WAKE_OTHER;
		d9_rec_wake(co->id, 0, kind, kind == D9_WAKE_TIMER ? until_due(co, now) : 0);
		s->runnable++;
	}
}

/* co starts running (its in-callback, or the first run of its start routine). */
static inline __attribute__((always_inline)) void run(struct st_state *s, struct co *co)
{
	s->exiting = NULL;
	if (D9_UNLIKELY(s->dead || !d9__self.worker || !co->woken))
		run_rare(s, co);
	co->woken = 0;
	if (s->runnable)
		s->runnable--;
	s->cur = co;
	d9__pl.coroutine = co->id;
	d9_rec_poll_start(co->id, co->location);
	sample_queue(s);
}

static void on_switch_in(void)
{
	struct st_state *s = S;

	if (s) {
		struct co *co = pm_get(&s->threads, real_st_thread_self());
		if (D9_LIKELY(co && !co->exited)) {
			run(s, co);
		} else {
			s->cur = NULL; /* a zombie's cleanup slice, or an unknown coroutine */
			d9__pl.coroutine = 0;
		}
		if (s->app_in)
			s->app_in();
	}
}

static __attribute__((noinline, cold)) void switch_out_rare(struct st_state *s);

/* The common switch-out (no callback of the program's own, a coroutine that neither yields nor
 * waits for a lock) changes the state first and records the PollEnd last, so that nothing is
 * live across the record's calls (the clock, its slow path) and the callback saves no
 * register for them. */
static void on_switch_out(void)
{
	struct st_state *s = S;

	if (!s)
		return;
	struct co *co = s->cur;
	if (D9_LIKELY(co && !s->app_out && !co->exited && !co->yielding && !co->locking)) {
		uint64_t id = co->id;
		co->woken = 0;
		s->cur = NULL;
		d9__pl.coroutine = 0;
		d9_rec_poll_end(id);
		return;
	}
	switch_out_rare(s);
}

static void switch_out_rare(struct st_state *s)
{
	if (s->app_out)
		s->app_out();
	struct co *co = s->cur;
	if (co && !co->exited) {
		d9_rec_poll_end(co->id);
		co->woken = 0;
		if (co->yielding) /* runnable at once, by its own doing */
			wake(co, co->id, D9_WAKE_OTHER, 0);
		if (D9_UNLIKELY(co->locking != NULL))
			lock_blocked(s, co);
	}
	s->cur = NULL;
	d9__pl.coroutine = 0;
}

/* Called by the agent at exit, on the exiting thread: the running coroutine's poll ends here. */
static void at_exit(void)
{
	struct st_state *s = S;

	if (s && s->cur && !s->cur->exited) {
		d9_rec_poll_end(s->cur->id);
		s->cur = NULL;
		d9__pl.coroutine = 0;
	}
}

/* ---- initialization and coroutine life ------------------------------------------------------- */

D9_INTERPOSE int st_init(void)
{
	ST_REAL(st_init);
	ST_REAL(st_set_switch_in_cb);
	ST_REAL(st_set_switch_out_cb);
	if (!real_st_init) {
		errno = ENOSYS;
		return -1;
	}
	if (S || d9__st_off || !adapter_wanted() || !real_st_set_switch_in_cb ||
		!real_st_set_switch_out_cb)
		return real_st_init();
	ST_REAL(st_thread_self);
	ST_REAL(st_utime);
	ST_REAL(st_utime_last_clock);
	struct st_state *s = d9__mem_alloc(sizeof(*s));
	if (!real_st_thread_self || !s) {
		if (!s)
			d9__log_once(D9_LOG_WARN, "State Threads: no memory for the adapter's state: "
				"this thread's coroutines are not traced");
		d9__mem_free(s);
		return real_st_init();
	}
	s->in_init = 1;
	S = s;
	int r = real_st_init();
	int e = errno;
	s->in_init = 0;
	if (r != 0) {
		S = NULL;
		d9__mem_free(s);
		errno = e;
		return r;
	}
	d9_agent_become_worker();
	d9__pl_set_rt(&d9__rt_st);
	/* st_init zeroed the scheduler, callbacks included: install ours now */
	real_st_set_switch_in_cb(on_switch_in);
	real_st_set_switch_out_cb(on_switch_out);
	/* the primordial coroutine is already running */
	struct co *co = d9__mem_alloc(sizeof(*co));
	if (co) {
		co->id = d9_agent_coroutine_new_id();
		uint64_t name = d9_agent_string("main", 4);
		co->location = d9_agent_location(0, (uintptr_t)__builtin_return_address(0), name);
		co->woken = 1;
		pm_put(&s->threads, real_st_thread_self(), co);
		d9_agent_coroutine(co->id, 0, co->location, 0);
		d9_rec_spawn(co->id, 0, co->location);
		run(s, co);
	}
	errno = e;
	return r;
}

/* The return address of _st_thread_main's call of the start routine (the stack root). */
static uint64_t st_root;

static void *trampoline(void *arg)
{
	struct co *co = arg;

	/* called by ST's _st_thread_main: sampled stacks of coroutines end there */
	uint64_t ra = (uint64_t)(uintptr_t)__builtin_return_address(0);
	if (__atomic_load_n(&st_root, __ATOMIC_RELAXED) != ra)
		__atomic_store_n(&st_root, ra, __ATOMIC_RELAXED);
	d9_agent_stack_root(ra);
	/* the slot holding it, through which the start routine (tail-called below) returns: the
	 * unwinder needs that word when the kernel's stack copy stops inside the start routine's
	 * frame (a large buffer with pages never written), README "## Profiling" */
	d9_agent_stack_root_slot((uint64_t)(uintptr_t)__builtin_frame_address(0) + 8, ra);
	if (D9_UNLIKELY(co->untracked)) {
		void *(*start)(void *) = co->start, *a = co->arg;
		d9__mem_free(co);
		return start(a);
	}
	if (S)
		run(S, co); /* the first run gets no in-callback */
	return co->start(co->arg);
}

/* A coroutine the adapter has no memory for (its record, or its place in the table): not recorded
 * at all, its Spawn counted as one dropped event, with a warning once. */
static __attribute__((cold)) void not_recorded(void)
{
	d9__drop_unrecorded();
	d9__log_once(D9_LOG_WARN, "State Threads: no memory for the coroutine table: new "
		"coroutines are not recorded (counted as dropped events)");
}

D9_INTERPOSE st_thread_t st_thread_create(void *(*start)(void *arg), void *arg, int joinable,
	int stack_size)
{
	ST_REAL(st_thread_create);
	struct st_state *s = S;

	if (!real_st_thread_create) {
		errno = ENOSYS;
		return NULL;
	}
	/* the idle coroutine st_init creates is the scheduler: not traced as a coroutine; nor are
	 * those of a scheduler thread under a seccomp filter (busy for good: the bookkeeping's
	 * memory and definitions may be calls it kills at) */
	if (!s || s->in_init || !start || d9__self.busy)
		return real_st_thread_create(start, arg, joinable, stack_size);
	struct co *co = d9__mem_alloc(sizeof(*co));
	if (!co) {
		not_recorded();
		return real_st_thread_create(start, arg, joinable, stack_size);
	}
	co->id = d9_agent_coroutine_new_id();
	co->start = start;
	co->arg = arg;
	co->location = location_of((void *)start, __builtin_return_address(0));
	st_thread_t th = real_st_thread_create(trampoline, co, joinable, stack_size);
	int e = errno;
	if (!th) {
		d9__mem_free(co);
		errno = e;
		return NULL;
	}
	if (D9_UNLIKELY(pm_put(&s->threads, th, co) != 0)) {
		/* the table could not grow: the switch callbacks would not know the coroutine, so its
		 * first run alone would be recorded. It is recorded not at all, and counted: its
		 * Spawn as one dropped event, with a warning once. */
		co->untracked = 1;
		not_recorded();
		errno = e;
		return th;
	}
	uint64_t parent = s->cur ? s->cur->id : 0;
	d9_agent_coroutine(co->id, parent, co->location, 0);
	d9_rec_spawn(co->id, parent, co->location);
	wake(co, parent, D9_WAKE_SPAWN, 0);
	errno = e;
	return th;
}

D9_INTERPOSE void st_thread_exit(void *retval)
{
	ST_REAL(st_thread_exit);
	struct st_state *s = S;

	/* _st_thread_main calls st_thread_exit right after the start routine returned: a sample
	 * taken in here (before the poll ends) stands on that call's return address, a few bytes past
	 * the root, not on the root itself; it is a root as well, or the unwind would run on into
	 * the stale frames above it. Only that call: one from the program's own code is elsewhere. */
	uint64_t ra = (uint64_t)(uintptr_t)__builtin_return_address(0), root = st_root;
	if (root && ra > root && ra - root <= 32)
		d9_agent_stack_root(ra);
	if (s && s->cur && real_st_thread_self) {
		struct co *co = s->cur;
		/* a joinable coroutine becomes a zombie without an out-callback: end its poll here */
		d9_rec_poll_end(co->id);
		d9_rec_coroutine_exit(co->id);
		d9_agent_coroutine_exit(co->id);
		co->exited = 1;
		pm_del(&s->threads, real_st_thread_self());
		co_free(s->dead);
		s->dead = co;
		/* a returning joinable coroutine gets no out-callback: it stops being current here,
		 * so the idle loop's readiness is credited (after_poll, after_select), and it is still named as
		 * the waker of its joiner, whom the real st_thread_exit signals */
		s->cur = NULL;
		s->exiting = co;
		d9__pl.coroutine = 0;
	}
	real_st_thread_exit(retval);
	__builtin_unreachable();
}

/* ---- waits ------------------------------------------------------------------------------------- */

/* A wait's timeout, kept as ST keeps it: due = ST's cached clock (refreshed when its idle wait
 * returns, not at every call) + timeout, wrapping as ST's sum wraps, and the wait has timed out
 * once a later refresh of the cached clock reaches it. No clock is read on the wait's path (a
 * read of the event clock and ST's own clock at every st_read with a timeout cost two clock calls
 * a request; agent/COST.md section 25). Without ST's clock functions (a program's libst.a may
 * lack them) the event clock's now + timeout. */
static inline void wait_until(struct co *co, st_utime_t us)
{
	co->due = 0;
	co->deadline = 0;
	if (us == ST_UTIME_NO_TIMEOUT)
		return;
	if (D9_LIKELY(real_st_utime_last_clock && real_st_utime)) {
		st_utime_t since = real_st_utime_last_clock();
		co->since = since;
		co->due = since + us ? since + us : 1; /* 0 means none */
		return;
	}
	uint64_t ns = us > UINT64_MAX / 1000 ? UINT64_MAX / 2 : us * 1000;
	co->deadline = d9__now() + d9_agent_ns_to_ticks(ns);
}

/* Has co's wait timed out, as ST sees it: has a refresh of ST's cached clock since the wait began
 * reached its due time (then ST moved it to the run queue, and a signal skips it)? A timeout of 0
 * is due at once but times out only at the next refresh, as in ST. (A refresh within the same
 * microsecond as the one before the wait is not seen: ST would time it out, the adapter not.)
 * The event clock is read only for a deadline kept on it. */
static inline int timed_out(const struct co *co)
{
	if (co->due) {
		st_utime_t now = real_st_utime_last_clock();
		return now != co->since && co->due <= now;
	}
	return co->deadline && co->deadline <= d9__now();
}

/* The Wake object of a timer: the deadline in event time units relative to now (negative: past).
 * On ST's clock, which is gettimeofday's in its builds: a step of the wall clock shows here. */
static __attribute__((cold)) int64_t until_due(const struct co *co, uint64_t now)
{
	if (!co->due)
		return (int64_t)(co->deadline >> d9__shift) - (int64_t)(now >> d9__shift);
	st_utime_t t = real_st_utime();
	uint64_t d = co->due >= t ? co->due - t : t - co->due;
	if (d > (uint64_t)1 << 40)
		d = (uint64_t)1 << 40; /* 12 days: the ticks below stay within 64 bits */
	int64_t units = (int64_t)(d9_agent_ns_to_ticks(d * 1000) >> d9__shift);
	return co->due >= t ? units : -units;
}

/* Grows the fd-waiter table to hold fd (0), or leaves it (-ENOMEM: fd's waiters go unnamed). */
static __attribute__((noinline, cold)) int grow_fds(struct st_state *s, int fd)
{
	size_t n = s->nfds ? s->nfds : 1024;

	while (n <= (size_t)fd)
		n *= 2;
	struct fdslot *t = d9__mem_realloc(s->fds, n * sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t + s->nfds, 0, (n - s->nfds) * sizeof(*t));
	s->fds = t;
	s->nfds = n;
	return 0;
}

/* The real st_poll, with co noted as waiting for a descriptor until then (errno kept). */
static inline int poll_waiting(struct co *co, struct pollfd *pds, int npds, st_utime_t timeout)
{
	wait_until(co, timeout);
	co->wait_kind = D9_WAKE_FD;
	int r = real_st_poll(pds, npds, timeout);
	co->due = 0;
	co->deadline = 0;
	co->wait_kind = 0;
	return r;
}

/* st_poll of several descriptors, or of one another coroutine waits on alone: each goes on its
 * descriptor's list (the table grows in grow_fds, off the common path) */
static __attribute__((noinline)) int poll_listed(struct st_state *s, struct co *co,
	struct pollfd *pds, int npds, st_utime_t timeout)
{
	struct fdw local[8], *w = local;

	if (npds > 8) {
		/* the coroutine's own array: the entries stay linked while it waits, and another
		 * coroutine may wait on as many meanwhile; kept, so that a loop over the same set
		 * does not take mem.c's lock (or, above about 170, a mapping) at every call */
		if ((uint32_t)npds > co->wcap) {
			struct fdw *t = d9__mem_realloc(co->wbuf, (size_t)npds * sizeof(*t));
			if (!t) {
				d9__drop_unrecorded();
				d9__log_once(D9_LOG_WARN, "State Threads: no memory to follow an st_poll "
					"of %d descriptors: its wakes are not named (counted as dropped)",
					npds);
				return real_st_poll(pds, npds, timeout);
			}
			co->wbuf = t;
			co->wcap = (uint32_t)npds;
		}
		w = co->wbuf;
	}
	int nreg = 0;
	for (int i = 0; i < npds; i++) {
		int fd = pds[i].fd;
		if (fd < 0 || ((size_t)fd >= s->nfds && grow_fds(s, fd) != 0))
			continue;
		w[nreg] = (struct fdw){ s->fds[fd].more, co, fd, pds[i].events };
		s->fds[fd].more = &w[nreg++];
	}
	int r = poll_waiting(co, pds, npds, timeout);
	int e = errno;
	for (int i = 0; i < nreg; i++) {
		struct fdw **pp = &s->fds[w[i].fd].more;
		while (*pp && *pp != &w[i])
			pp = &(*pp)->next;
		if (*pp)
			*pp = w[i].next;
	}
	errno = e;
	return r;
}

D9_INTERPOSE int st_poll(struct pollfd *pds, int npds, st_utime_t timeout)
{
	ST_REAL(st_poll);
	struct st_state *s = S;

	if (!real_st_poll) {
		errno = ENOSYS;
		return -1;
	}
	if (!s || !s->cur || npds <= 0)
		return real_st_poll(pds, npds, timeout);
	struct co *co = s->cur;
	int fd = pds[0].fd;
	if (npds == 1 && fd >= 0 && (size_t)fd < s->nfds && !s->fds[fd].co) {
		/* one descriptor, nobody else waits on it alone: the slot, no list */
		s->fds[fd].co = co;
		co->wait_events = pds[0].events;
		int r = poll_waiting(co, pds, npds, timeout);
		s->fds[fd].co = NULL; /* s->fds again: another coroutine may have grown the table */
		return r;
	}
	return poll_listed(s, co, pds, npds, timeout);
}

/* Wakes the waiters of fd for the ready events ev; `any`: events that wake every waiter of fd,
 * whatever it waits for (an error or hang-up, in poll's and epoll's terms). */
static inline void fd_wake_all(uint64_t at, struct st_state *s, int fd, short ev, short any)
{
	struct fdslot *sl = &s->fds[fd];

	if (sl->co && ((sl->co->wait_events & ev) || any))
		wake_at(at, sl->co, 0, D9_WAKE_FD, fd);
	for (struct fdw *w = sl->more; w; w = w->next)
		if ((w->events & ev) || any)
			wake_at(at, w->co, 0, D9_WAKE_FD, fd);
}

static inline void fd_ready(uint64_t at, struct st_state *s, int fd, short revents)
{
	if (fd < 0 || (size_t)fd >= s->nfds)
		return;
	fd_wake_all(at, s, fd, revents, revents & (POLLERR | POLLHUP | POLLNVAL));
}

static void after_poll(uint64_t at, const struct pollfd *fds, unsigned long n, int ready)
{
	struct st_state *s = S;

	if (!s || s->cur)
		return; /* only the scheduler's own wait reports readiness */
	for (unsigned long i = 0; i < n && ready > 0; i++)
		if (fds[i].revents) {
			fd_ready(at, s, fds[i].fd, fds[i].revents);
			ready--;
		}
	sample_queue(s);
}

static void after_select(uint64_t at, int nfds, const void *rd, const void *wr, const void *ex,
	int ready)
{
	struct st_state *s = S;
	const fd_set *r = rd, *w = wr, *x = ex;
	enum { BITS = 8 * (int)sizeof(__fd_mask) };

	if (!s || s->cur)
		return;
	/* a word of each set at a time: the ready descriptors, not every number below nfds (an
	 * FD_ISSET per number cost ~44 instructions each, per idle wait; agent/COST.md). Numbers at
	 * or past the waiter table have no waiter: the scan stops there. */
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	if ((size_t)nfds > s->nfds)
		nfds = (int)s->nfds;
	for (int base = 0; base < nfds && ready > 0; base += BITS) {
		int i = base / BITS;
		unsigned long mr = r ? (unsigned long)__FDS_BITS(r)[i] : 0;
		unsigned long mw = w ? (unsigned long)__FDS_BITS(w)[i] : 0;
		unsigned long mx = x ? (unsigned long)__FDS_BITS(x)[i] : 0;
		for (unsigned long m = mr | mw | mx; m; m &= m - 1) {
			int bit = __builtin_ctzl(m), fd = base + bit;
			if (fd >= nfds)
				break;
			short ev = (short)(((mr >> bit) & 1) * POLLIN | ((mw >> bit) & 1) * POLLOUT |
				((mx >> bit) & 1) * POLLPRI);
			fd_wake_all(at, s, fd, ev, 0); /* select has no error bits */
			if (--ready <= 0)
				break;
		}
	}
	sample_queue(s);
}

/* SRS's ST (ST_EVENTSYS_ALT): its idle coroutine's epoll_wait returns the ready descriptors as
 * data.fd with epoll bits; like its _st_epoll_dispatch, an error or hang-up readies every waiter
 * of the descriptor, whatever it waits for. */
static void after_epoll(uint64_t at, int epfd, const struct epoll_event *ev, int n)
{
	struct st_state *s = S;

	(void)epfd;
	if (!s || s->cur)
		return;
	for (int i = 0; i < n; i++) {
		uint32_t e = ev[i].events;
		short pe = 0;
		if (e & EPOLLIN)
			pe |= POLLIN;
		if (e & EPOLLOUT)
			pe |= POLLOUT;
		if (e & EPOLLPRI)
			pe |= POLLPRI;
		if (e & EPOLLERR)
			pe |= POLLERR;
		if (e & EPOLLHUP)
			pe |= POLLHUP;
		fd_ready(at, s, ev[i].data.fd, pe);
	}
	sample_queue(s);
}

D9_INTERPOSE int st_usleep(st_utime_t usecs)
{
	ST_REAL(st_usleep);
	struct st_state *s = S;

	if (!real_st_usleep) {
		errno = ENOSYS;
		return -1;
	}
	if (!s || !s->cur)
		return real_st_usleep(usecs);
	struct co *co = s->cur;
	wait_until(co, usecs);
	co->wait_kind = D9_WAKE_TIMER;
	int r = real_st_usleep(usecs);
	int e = errno;
	co->due = 0;
	co->deadline = 0;
	co->wait_kind = 0;
	errno = e;
	return r;
}

/* SRS's ST only: the coroutine goes to the back of the run queue when another one is runnable
 * (then it switches out: a Wake of itself by itself), and returns at once otherwise. */
D9_INTERPOSE void st_thread_yield(void)
{
	ST_REAL(st_thread_yield);
	struct st_state *s = S;

	if (!real_st_thread_yield)
		return;
	if (!s || !s->cur) {
		real_st_thread_yield();
		return;
	}
	struct co *co = s->cur;
	co->yielding = 1;
	real_st_thread_yield();
	co->yielding = 0;
}

/* ---- condition variables, mutexes, join, interrupt -------------------------------------------- */

/* obj's FIFO (waitq.h), made when `create` */
static struct waitq *queue_of(struct st_state *s, void *obj, int create)
{
	return create ? waitq_make(&s->queues, &s->sweep_at, obj) : pm_get(&s->queues, obj);
}

static void queue_push(struct st_state *s, struct waitq *q, struct co *co)
{
	s->nwaiting++;
	co->waitq = q;
	co->qnext = NULL;
	if (q->tail)
		q->tail->qnext = co;
	else
		q->head = co;
	q->tail = co;
}

static struct co *queue_pop(struct st_state *s, struct waitq *q)
{
	struct co *co = q->head;

	if (co) {
		q->head = co->qnext;
		if (!q->head)
			q->tail = NULL;
		co->qnext = NULL;
		co->waitq = NULL;
		s->nwaiting--;
	}
	return co;
}

static void queue_remove(struct st_state *s, struct waitq *q, struct co *co)
{
	struct co *prev = NULL;

	for (struct co *c = q->head; c; prev = c, c = c->qnext) {
		if (c != co)
			continue;
		if (prev)
			prev->qnext = c->qnext;
		else
			q->head = c->qnext;
		if (q->tail == c)
			q->tail = prev;
		c->qnext = NULL;
		c->waitq = NULL;
		s->nwaiting--;
		return;
	}
}

/* co's st_mutex_lock blocks (its switch-out): on the mutex's FIFO, as on ST's wait queue */
static __attribute__((noinline, cold)) void lock_blocked(struct st_state *s, struct co *co)
{
	struct waitq *q = queue_of(s, co->locking, 1);

	if (q)
		queue_push(s, q, co);
	co->locking = NULL;
}

/* Runs `wait` with co registered in obj's FIFO. */
#define QUEUED_WAIT(s, obj, kind, timeout, call)                                   \
	({                                                                         \
		struct co *co_ = (s)->cur;                                         \
		struct waitq *q_ = queue_of((s), (obj), 1);                        \
		if (q_)                                                            \
			queue_push((s), q_, co_);                                  \
		wait_until(co_, (timeout));                                        \
		co_->wait_kind = (kind);                                           \
		int r_ = (call);                                                   \
		int e_ = errno;                                                    \
		co_->due = 0;                                                      \
		co_->deadline = 0;                                                 \
		co_->wait_kind = 0;                                                \
		if ((q_ = co_->waitq)) /* still on it: not popped by a signal */   \
			queue_remove((s), q_, co_);                                \
		errno = e_;                                                        \
		r_;                                                                \
	})

D9_INTERPOSE int st_cond_timedwait(st_cond_t cvar, st_utime_t timeout)
{
	ST_REAL(st_cond_timedwait);
	struct st_state *s = S;

	if (!real_st_cond_timedwait) {
		errno = ENOSYS;
		return -1;
	}
	if (!s || !s->cur)
		return real_st_cond_timedwait(cvar, timeout);
	uint32_t kind = s->cur->join ? D9_WAKE_JOIN : D9_WAKE_COND;
	return QUEUED_WAIT(s, cvar, kind, timeout, real_st_cond_timedwait(cvar, timeout));
}

static uint64_t waker_id(const struct st_state *s)
{
	/* an exiting joinable coroutine signals its joiner from st_thread_exit */
	return s->cur ? s->cur->id : s->exiting ? s->exiting->id : 0;
}

static void signal_waiters(struct st_state *s, void *obj, int all, uint32_t kind)
{
	if (!s->nwaiting)
		return; /* no coroutine waits on a condition or mutex */
	struct waitq *q = queue_of(s, obj, 0);
	struct co *co;

	/* no clock read for a signal nobody waits for: the Wake reads it */
	while (q && (co = queue_pop(s, q))) {
		/* ST skips waiters that are already runnable (interrupted, or timed out and not yet
		 * run): so do we, and the signal goes to the next one */
		if (co->woken || timed_out(co))
			continue;
		wake(co, waker_id(s), co->wait_kind == D9_WAKE_JOIN ? D9_WAKE_JOIN : kind,
			(int64_t)(uintptr_t)obj);
		if (!all)
			break;
	}
}

D9_INTERPOSE int st_cond_signal(st_cond_t cvar)
{
	ST_REAL(st_cond_signal);
	if (!real_st_cond_signal) {
		errno = ENOSYS;
		return -1;
	}
	if (S)
		signal_waiters(S, cvar, 0, D9_WAKE_COND);
	return real_st_cond_signal(cvar);
}

D9_INTERPOSE int st_cond_broadcast(st_cond_t cvar)
{
	ST_REAL(st_cond_broadcast);
	if (!real_st_cond_broadcast) {
		errno = ENOSYS;
		return -1;
	}
	if (S)
		signal_waiters(S, cvar, 1, D9_WAKE_COND);
	return real_st_cond_broadcast(cvar);
}

D9_INTERPOSE int st_mutex_lock(st_mutex_t lock)
{
	ST_REAL(st_mutex_lock);
	struct st_state *s = S;

	if (!real_st_mutex_lock) {
		errno = ENOSYS;
		return -1;
	}
	if (!s || !s->cur)
		return real_st_mutex_lock(lock);
	/* A free mutex is taken at once, with no wait to note: the coroutine goes on the mutex's
	 * FIFO only when it blocks, from the switch-out that blocking makes (lock_blocked), right
	 * after ST put it on the mutex's own wait queue, so the two orders stay the same (a FIFO
	 * entry, allocation and map update for every free lock cost about 500 instructions). */
	struct co *co = s->cur;
	co->locking = lock;
	co->wait_kind = D9_WAKE_MUTEX;
	int r = real_st_mutex_lock(lock);
	int e = errno;
	co->locking = NULL;
	co->wait_kind = 0;
	if (co->waitq) /* blocked, and not popped by the unlock: interrupted */
		queue_remove(s, co->waitq, co);
	errno = e;
	return r;
}

D9_INTERPOSE int st_mutex_unlock(st_mutex_t lock)
{
	ST_REAL(st_mutex_unlock);
	if (!real_st_mutex_unlock) {
		errno = ENOSYS;
		return -1;
	}
	/* ownership passes to the first waiter, which becomes runnable (no switch: named after the
	 * real call, which fails with EPERM for a coroutine that does not hold the mutex) */
	int r = real_st_mutex_unlock(lock);
	if (r == 0 && S) {
		int e = errno;
		signal_waiters(S, lock, 0, D9_WAKE_MUTEX);
		errno = e;
	}
	return r;
}

D9_INTERPOSE int st_thread_join(st_thread_t thread, void **retvalp)
{
	ST_REAL(st_thread_join);
	struct st_state *s = S;

	if (!real_st_thread_join) {
		errno = ENOSYS;
		return -1;
	}
	if (!s || !s->cur)
		return real_st_thread_join(thread, retvalp);
	struct co *co = s->cur;
	co->join = 1; /* its wait on the target's termination condition is a join */
	int r = real_st_thread_join(thread, retvalp);
	int e = errno;
	co->join = 0;
	errno = e;
	return r;
}

D9_INTERPOSE void st_thread_interrupt(st_thread_t thread)
{
	ST_REAL(st_thread_interrupt);
	struct st_state *s = S;

	if (!real_st_thread_interrupt)
		return;
	if (s) {
		struct co *target = pm_get(&s->threads, thread);
		/* a target ST already timed out is runnable: the interrupt only sets its flag (told
		 * only on ST's clock: a deadline kept on the event clock cannot say it) */
		if (target && target->wait_kind && !(target->due && timed_out(target)))
			wake(target, waker_id(s), D9_WAKE_INTERRUPT, 0);
	}
	real_st_thread_interrupt(thread);
}

/* The application's own switch callbacks: after st_init they are kept here and called from ours. */
D9_INTERPOSE st_switch_cb_t st_set_switch_in_cb(st_switch_cb_t cb)
{
	ST_REAL(st_set_switch_in_cb);
	if (S) {
		st_switch_cb_t old = S->app_in;
		S->app_in = cb;
		return old;
	}
	return real_st_set_switch_in_cb ? real_st_set_switch_in_cb(cb) : NULL;
}

D9_INTERPOSE st_switch_cb_t st_set_switch_out_cb(st_switch_cb_t cb)
{
	ST_REAL(st_set_switch_out_cb);
	if (S) {
		st_switch_cb_t old = S->app_out;
		S->app_out = cb;
		return old;
	}
	return real_st_set_switch_out_cb ? real_st_set_switch_out_cb(cb) : NULL;
}

/* The hooks under names that bind inside the agent: a program that exports its own st_* (linked
 * with -rdynamic) must not be what the patch table's addresses resolve to. */
#define X(ret, name, params) \
	extern __typeof__(name) d9__st_hook_##name __attribute__((alias(#name), visibility("hidden")));
D9__ST_HOOKED(X)
#undef X

const struct d9__st_entry d9__st_entries[] = {
#define X(ret, name, params) { #name, (void *)d9__st_hook_##name, (void **)&real_##name },
	D9__ST_HOOKED(X)
#undef X
#define X(ret, name, params) { #name, NULL, (void **)&real_##name },
	D9__ST_CALLED(X)
#undef X
	{ NULL, NULL, NULL },
};

/* libst.so: its entry points are interposed (nothing to do before main). Else the program may
 * contain the runtime itself (rt-st-static.c). */
static int attach(void)
{
	int saved = errno, r = 1;

	if (!d9__real("st_init", NULL))
		r = d9__st_attach_static();
	errno = saved;
	return r;
}

const struct d9__runtime d9__rt_st = {
	.name = "st",
	.attach = attach,
	.after_poll = after_poll,
	.after_select = after_select,
	.after_epoll = after_epoll,
	.at_exit = at_exit,
};
