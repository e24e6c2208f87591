/* rt-libco.c: the libco adapter (Tencent libco, github.com/Tencent/libco; facts it relies on in
 * ../shared/third_party/README.md and agent/DESIGN.md "libco"). It turns libco's scheduler into
 * polls, spawns, exits and wakes:
 *   - co_swap (the one function every co_resume and co_yield* goes through): the coroutine
 *     switched out ends its poll, the one switched in starts one; libco's main coroutine is the
 *     scheduler (its co_eventloop), never a coroutine; a coroutine resumed by, or yielded to by,
 *     another is woken by it;
 *   - co_create: Spawn + a spawn Wake; the routine is wrapped, so its return is a CoroutineExit
 *     and sampled stacks end at libco's CoroutineFunc; co_release forgets the coroutine;
 *   - co_poll_inner (libco's hooked poll/read/write/connect and co_poll all wait there) notes the
 *     wait's timeout; epoll_ctl from inside it tells which epoll registration is whose, so the
 *     event loop's epoll_wait (libc-wait.c, a park) names the coroutines its readiness wakes (fd
 *     wakes); a coroutine resumed from its wait without readiness timed out (a timer wake).
 * libco's own hooks turn a coroutine's read/write/poll into a yield to the event loop. Those are
 * never BlockingCalls or parks, whichever side of the hooks d9 sits on: every switch counts in
 * d9__pl.switches (libc-block.c drops a timed call across which the thread switched coroutines),
 * and wait_yields() tells libc-wait.c that a hooked poll is a yield, not a park.
 * A shared libcolib.so is interposed (its C++ names, resolved with dlsym); in a libco linked into
 * the executable the same four functions are patched before main (patch.h) to jump to the same
 * wrappers, or the adapter refuses (generic mode, one message). It never changes what libco does:
 * every wrapper calls the real function with the same arguments and returns its result and errno,
 * and it reads none of libco's structures. State is per thread (libco's is). */
#include "preload.h"
#include "runtime.h"
#include "pmap.h"
#include "waitq.h"

#include "internal.h" /* d9__log_once: attach says once why it refuses */
#include "patch.h"

#include <dlfcn.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

/* libco's entry points by their C++ (Itanium ABI) names; the library has no extern "C" API */
#define SYM_CO_CREATE "_Z9co_createPP13stCoRoutine_tPK17stCoRoutineAttr_tPFPvS5_ES5_"
#define SYM_CO_SWAP "_Z7co_swapP13stCoRoutine_tS0_"
#define SYM_CO_RELEASE "_Z10co_releaseP13stCoRoutine_t"
#define SYM_CO_POLL_INNER "_Z13co_poll_innerP11stCoEpoll_tP6pollfdmiPFiS2_miE"
#define SYM_CO_HOOK_ENABLED "_Z21co_is_enable_sys_hookv"
#define SYM_CO_COND_SIGNAL "_Z14co_cond_signalP10stCoCond_t"
#define SYM_CO_COND_BROADCAST "_Z17co_cond_broadcastP10stCoCond_t"
#define SYM_CO_COND_TIMEDWAIT "_Z17co_cond_timedwaitP10stCoCond_ti"

typedef void *(*co_fn_t)(void *);
typedef int (*poll_fn_t)(struct pollfd *, nfds_t, int);

typedef int (*co_create_fn)(void **, const void *, co_fn_t, void *);
typedef void (*co_swap_fn)(void *, void *);
typedef void (*co_release_fn)(void *);
typedef int (*co_poll_inner_fn)(void *, struct pollfd *, nfds_t, int, poll_fn_t);
typedef _Bool (*co_hook_enabled_fn)(void);
typedef int (*co_cond_fn)(void *);
typedef int (*co_cond_timedwait_fn)(void *, int);

static co_create_fn real_co_create;
static co_swap_fn real_co_swap;
static co_release_fn real_co_release;
static co_poll_inner_fn real_co_poll_inner;
static co_hook_enabled_fn real_co_hook_enabled;
static co_cond_fn real_co_cond_signal, real_co_cond_broadcast;
static co_cond_timedwait_fn real_co_cond_timedwait;

enum { MODE_NONE = 0, MODE_SHARED = 1, MODE_STATIC = 2, MODE_REFUSED = -1 };
enum { WAIT_NONE = 0, WAIT_POLL = 1, WAIT_COND = 2 };
static int mode; /* set once by attach(), before main */

struct co {
	uint64_t id, location;
	co_fn_t start;
	void *arg;
	void *handle; /* libco's stCoRoutine_t: the key of lc_state.cos */
	int wait_ms; /* its hooked wait's timeout in ms (libco's clock); 0: none */
	uint64_t since; /* the time of the PollEnd its timed wait switched out with (ticks) */
	uint8_t woken; /* a Wake was recorded since its last poll */
	uint8_t waiting; /* WAIT_*: in a wait whose end without a seen wake is its timeout */
	struct co *qnext; /* FIFO of a condition variable */
	void *cond; /* the condition it waits on (WAIT_COND) */
	uint8_t exited; /* its routine returned (a co_reset coroutine may run again: a new id) */
};

/* An open-addressing map from pointers to pointers (libco frees and reuses coroutines:
 * entries are replaced and removed, never trusted across a co_release). */

struct fdreg { /* one epoll registration made inside a coroutine's hooked wait */
	uint64_t data; /* the epoll_event's data (libco: its poll item), 0: none */
	void *handle; /* the stCoRoutine_t that registered it (looked up again: may be released) */
	int epfd;
};

struct lc_state {
	struct pmap cos; /* stCoRoutine_t -> struct co */
	struct pmap conds; /* stCoCond_t -> struct waitq (kept when empty: waitq.h) */
	size_t sweep_at; /* the empty FIFOs are freed when conds has this many entries */
	struct pmap regs; /* epoll data -> fd + 1 */
	struct fdreg *fds; /* by fd */
	size_t nfds;
	struct co *cur; /* the running coroutine, NULL in the scheduler (libco's main coroutine) */
	struct co *exiting; /* its routine returned, its last switch not yet made: named as waker */
	uint64_t runnable; /* woken (a Wake recorded) and not yet run: the run queue */
	uint64_t next_sample; /* event clock ticks of the next QueueSample */
	struct d9__loc_cache locs;
};

static __thread struct lc_state *S __attribute__((tls_model("initial-exec")));

const struct d9__runtime d9__rt_libco;

static void cond_remove(struct lc_state *s, void *cond, struct co *co);

/* ---- recording helpers ------------------------------------------------------------------------- */

/* The calling thread's state, made on its first co_create when the adapter traces this process. */
static struct lc_state *state(void)
{
	struct lc_state *s = S;

	if (D9_LIKELY(s) || mode <= 0 || !d9__rt_wanted(&d9__rt_libco))
		return s;
	if (!(s = d9__mem_alloc(sizeof(*s)))) {
		d9__log_once(D9_LOG_WARN, "libco: no memory for the adapter's state: this thread's "
			"coroutines are not traced");
		return NULL;
	}
	d9_agent_become_worker();
	d9__pl_set_rt(&d9__rt_libco);
	S = s;
	return s;
}

static uint64_t location_of(void *start, void *callsite)
{
	return d9__rt_location(&S->locs, start, callsite);
}

/* co became runnable because of `waker` (0: none) for `kind` on `object`, at `at` (d9__now(); for
 * the descriptors the event loop's wait found ready, when it returned). */
static void wake_at(uint64_t at, struct co *co, uint64_t waker, uint32_t kind, int64_t object)
{
	if (co->woken || co->exited)
		return;
	co->woken = 1;
	S->runnable++;
	d9_rec_wake_at(at, co->id, waker, kind, object);
}

static void wake(struct co *co, uint64_t waker, uint32_t kind, int64_t object)
{
	wake_at(d9__now(), co, waker, kind, object);
}

/* runtime.h's run-queue sample, with this scheduler's counts */
static inline void sample_queue(struct lc_state *s)
{
	d9__rt_sample_queue(s->runnable, &s->next_sample);
}

/* The event clock ticks of `ms` milliseconds (a 128-bit division per call cost ~26 instructions
 * per timer Wake: the ticks of one ms are computed once). */
static uint64_t ms_ticks(int ms)
{
	static uint64_t ticks_per_ms;

	if (D9_UNLIKELY(!ticks_per_ms))
		ticks_per_ms = d9_agent_ns_to_ticks(1000000u);
	return (uint64_t)ms * ticks_per_ms;
}

/* A new id and its Spawn by `parent` (0: the scheduler), for co (created, or run again after
 * co_reset). */
static void spawn(struct co *co, uint64_t parent)
{
	co->id = d9_agent_coroutine_new_id();
	co->exited = 0;
	co->woken = 0;
	d9_agent_coroutine(co->id, parent, co->location, 0);
	d9_rec_spawn(co->id, parent, co->location);
	wake(co, parent, D9_WAKE_SPAWN, 0);
}

/* The running coroutine stops (a switch, or the end of its routine). */
static void stop(struct lc_state *s)
{
	struct co *co = s->cur;

	if (co && !co->exited) {
		d9_rec_poll_end(co->id);
		co->woken = 0;
		/* a timed wait's deadline counts from here, the PollEnd's own time: libco's from its
		 * clock at the call, microseconds before. No clock read of its own. A PollEnd the
		 * agent could not record (counted) leaves an earlier record's time: the deadline
		 * then reads early by that much. */
		if (co->wait_ms)
			co->since = d9_rec_last_time();
	}
	s->cur = NULL;
	d9__pl.coroutine = 0;
}

/* co starts running, switched to from `from` (NULL: the scheduler). */
static void run(struct lc_state *s, struct co *co, struct co *from)
{
	if (co->exited)
		spawn(co, from ? from->id : 0); /* co_reset, then resumed again: a new life */
	if (!co->woken) {
		s->runnable++; /* the Wake below, then it runs */
		if (from) {
			/* resumed by another coroutine, or the one it resumed yielded back to it */
			d9_rec_wake(co->id, from->id, D9_WAKE_OTHER, 0);
		} else if (co->waiting && co->wait_ms) {
			/* back from a wait without readiness or signal: its timeout fired */
			uint64_t now = d9__now(), due = co->since + ms_ticks(co->wait_ms);
			int64_t obj = (int64_t)(due >> d9__shift) - (int64_t)(now >> d9__shift);
			d9_rec_wake(co->id, 0, D9_WAKE_TIMER, obj);
		} else {
			d9_rec_wake(co->id, 0, D9_WAKE_OTHER, 0); /* something we do not see */
		}
	}
	co->woken = 0;
	if (s->runnable)
		s->runnable--;
	if (D9_UNLIKELY(!d9__self.worker))
		d9_agent_become_worker(); /* e.g. in a forked child */
	s->cur = co;
	d9__pl.coroutine = co->id;
	d9_rec_poll_start(co->id, co->location);
	sample_queue(s);
}

/* Called by the agent at exit, on the exiting thread: the running coroutine's poll ends here. */
static void at_exit(void)
{
	struct lc_state *s = S;

	if (s && s->cur)
		stop(s);
}

/* ---- coroutine life ---------------------------------------------------------------------------- */

static void *trampoline(void *arg)
{
	struct co *co = arg;

	/* called by libco's CoroutineFunc: sampled stacks of coroutines end there */
	d9_agent_stack_root((uint64_t)(uintptr_t)__builtin_return_address(0));
	void *r = co->start(co->arg);
	struct lc_state *s = S;
	if (s && s->cur == co) {
		/* the routine returned: libco marks it ended and yields for good */
		d9_rec_poll_end(co->id);
		d9_rec_coroutine_exit(co->id);
		d9_agent_coroutine_exit(co->id);
		co->exited = 1;
		s->cur = NULL;
		s->exiting = co;
		d9__pl.coroutine = 0;
	}
	return r;
}

/* The old struct co of a released (or reused) stCoRoutine_t address. */
static void forget(struct lc_state *s, void *handle)
{
	struct co *old = pm_get(&s->cos, handle);

	if (!old)
		return;
	pm_del(&s->cos, handle);
	if (old == s->exiting)
		s->exiting = NULL;
	if (old->waiting == WAIT_COND)
		cond_remove(s, old->cond, old); /* released while it waited: a bug, not our crash */
	if (old == s->cur) {
		s->cur = NULL; /* a coroutine releasing itself: a bug, not ours to crash on */
		d9__pl.coroutine = 0;
	}
	d9__mem_free(old);
}

/* A coroutine the adapter has no memory for (its record, or its place in the table): not
 * recorded at all, its Spawn counted as one dropped event, with a warning once. */
static __attribute__((cold)) void not_recorded(void)
{
	d9__drop_unrecorded();
	d9__log_once(D9_LOG_WARN, "libco: no memory for the coroutine table: new coroutines are "
		"not recorded (counted as dropped events)");
}

D9_INTERPOSE int d9__lc_co_create(void **ppco, const void *attr, co_fn_t fn, void *arg)
	__asm__(SYM_CO_CREATE);
D9_INTERPOSE int d9__lc_co_create(void **ppco, const void *attr, co_fn_t fn, void *arg)
{
	if (D9_UNLIKELY(!real_co_create))
		real_co_create = (co_create_fn)d9__real(SYM_CO_CREATE, NULL);
	if (!real_co_create) {
		errno = ENOSYS;
		return -1;
	}
	struct lc_state *s = state();
	struct co *co;
	/* (busy: a thread under a seccomp filter, whose bookkeeping may be calls it kills at) */
	if (!s || !fn || !ppco || d9__self.busy)
		return real_co_create(ppco, attr, fn, arg);
	/* the table's room first: a coroutine made with the trampoline must be in it (its record
	 * is freed only through the table, at its release) */
	if (pm_reserve(&s->cos) != 0 || !(co = d9__mem_alloc(sizeof(*co)))) {
		not_recorded();
		return real_co_create(ppco, attr, fn, arg);
	}
	co->start = fn;
	co->arg = arg;
	co->location = location_of((void *)fn, __builtin_return_address(0));
	int r = real_co_create(ppco, attr, trampoline, co);
	int e = errno;
	if (r == 0 && *ppco) {
		forget(s, *ppco); /* a released coroutine's address, reused */
		co->handle = *ppco;
	}
	if (r != 0 || !*ppco || pm_put(&s->cos, *ppco, co) != 0) {
		/* not created; or not tracked (cannot happen after pm_reserve: then the trampoline
		 * only calls fn, never a poll of it is seen nor its exit, s->cur is never co, and
		 * its record stays, since a co_reset coroutine may run its trampoline again) */
		if (r != 0 || !*ppco)
			d9__mem_free(co);
		else
			not_recorded();
		errno = e;
		return r;
	}
	spawn(co, s->cur ? s->cur->id : 0);
	errno = e;
	return r;
}

D9_INTERPOSE void d9__lc_co_release(void *co) __asm__(SYM_CO_RELEASE);
D9_INTERPOSE void d9__lc_co_release(void *co)
{
	if (D9_UNLIKELY(!real_co_release))
		real_co_release = (co_release_fn)d9__real(SYM_CO_RELEASE, NULL);
	struct lc_state *s = S;
	if (s && co)
		forget(s, co);
	if (real_co_release)
		real_co_release(co);
}

D9_INTERPOSE void d9__lc_co_swap(void *curr, void *pending) __asm__(SYM_CO_SWAP);
D9_INTERPOSE void d9__lc_co_swap(void *curr, void *pending)
{
	if (D9_UNLIKELY(!real_co_swap))
		real_co_swap = (co_swap_fn)d9__real(SYM_CO_SWAP, NULL);
	struct lc_state *s = S;
	/* counted even in generic mode: a blocking-call wrapper around a hooked call sees it */
	d9__pl.switches++;
	if (s) {
		/* an ended routine's last switch: it resumes whoever resumed it last */
		struct co *from = s->cur ? s->cur : s->exiting;
		struct co *to = pm_get(&s->cos, pending);
		s->exiting = NULL;
		stop(s);
		if (to)
			run(s, to, from);
	}
	(void)curr; /* s->cur is what runs: curr is libco's own view of the same */
	if (real_co_swap)
		real_co_swap(curr, pending);
	/* back in curr: whoever switched to it has started its poll */
}

/* ---- waits ------------------------------------------------------------------------------------- */

D9_INTERPOSE int d9__lc_co_poll_inner(void *ctx, struct pollfd *fds, nfds_t nfds, int timeout,
	poll_fn_t pollfn) __asm__(SYM_CO_POLL_INNER);
D9_INTERPOSE int d9__lc_co_poll_inner(void *ctx, struct pollfd *fds, nfds_t nfds, int timeout,
	poll_fn_t pollfn)
{
	if (D9_UNLIKELY(!real_co_poll_inner))
		real_co_poll_inner = (co_poll_inner_fn)d9__real(SYM_CO_POLL_INNER, NULL);
	if (!real_co_poll_inner) {
		errno = ENOSYS;
		return -1;
	}
	struct lc_state *s = S;
	struct co *co = s ? s->cur : NULL;
	if (!co || timeout == 0)
		return real_co_poll_inner(ctx, fds, nfds, timeout, pollfn);
	/* libco counts the timeout from its millisecond clock; < 0 waits for INT_MAX ms */
	co->wait_ms = timeout < 0 ? 0 : timeout;
	co->waiting = WAIT_POLL;
	int r = real_co_poll_inner(ctx, fds, nfds, timeout, pollfn);
	int e = errno;
	co->waiting = WAIT_NONE;
	co->wait_ms = 0;
	errno = e;
	return r;
}

/* libco's condition variables: a FIFO per condition, as libco's own (co_cond_signal pops the
 * head); the signaller is the waker. */
static void cond_remove(struct lc_state *s, void *cond, struct co *co)
{
	struct waitq *q = pm_get(&s->conds, cond);
	struct co *prev = NULL;

	if (!q)
		return;
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
		break;
	}
	/* an emptied FIFO is kept for the condition's next wait (waitq.h) */
}

D9_INTERPOSE int d9__lc_co_cond_timedwait(void *cond, int ms) __asm__(SYM_CO_COND_TIMEDWAIT);
D9_INTERPOSE int d9__lc_co_cond_timedwait(void *cond, int ms)
{
	if (D9_UNLIKELY(!real_co_cond_timedwait))
		real_co_cond_timedwait = (co_cond_timedwait_fn)d9__real(SYM_CO_COND_TIMEDWAIT, NULL);
	if (!real_co_cond_timedwait) {
		errno = ENOSYS;
		return -1;
	}
	struct lc_state *s = S;
	struct co *co = s ? s->cur : NULL;
	if (!co || !cond)
		return real_co_cond_timedwait(cond, ms);
	struct waitq *q = waitq_make(&s->conds, &s->sweep_at, cond);
	if (q) {
		co->qnext = NULL;
		if (q->tail)
			q->tail->qnext = co;
		else
			q->head = co;
		q->tail = co;
	}
	co->wait_ms = ms > 0 ? ms : 0;
	co->waiting = WAIT_COND;
	co->cond = cond;
	int r = real_co_cond_timedwait(cond, ms);
	int e = errno;
	co->waiting = WAIT_NONE;
	co->wait_ms = 0;
	cond_remove(s, cond, co);
	errno = e;
	return r;
}

/* The first waiter (all with `all`) of cond is woken by the running coroutine. */
static void cond_wake(void *cond, int all)
{
	struct lc_state *s = S;
	struct waitq *q = s && cond ? pm_get(&s->conds, cond) : NULL;

	while (q && q->head) {
		struct co *co = q->head;
		cond_remove(s, cond, co);
		wake(co, s->cur ? s->cur->id : 0, D9_WAKE_COND, (int64_t)(uintptr_t)cond);
		if (!all)
			break;
	}
}

D9_INTERPOSE int d9__lc_co_cond_signal(void *cond) __asm__(SYM_CO_COND_SIGNAL);
D9_INTERPOSE int d9__lc_co_cond_signal(void *cond)
{
	if (D9_UNLIKELY(!real_co_cond_signal))
		real_co_cond_signal = (co_cond_fn)d9__real(SYM_CO_COND_SIGNAL, NULL);
	if (!real_co_cond_signal) {
		errno = ENOSYS;
		return -1;
	}
	cond_wake(cond, 0);
	return real_co_cond_signal(cond);
}

D9_INTERPOSE int d9__lc_co_cond_broadcast(void *cond) __asm__(SYM_CO_COND_BROADCAST);
D9_INTERPOSE int d9__lc_co_cond_broadcast(void *cond)
{
	if (D9_UNLIKELY(!real_co_cond_broadcast))
		real_co_cond_broadcast = (co_cond_fn)d9__real(SYM_CO_COND_BROADCAST, NULL);
	if (!real_co_cond_broadcast) {
		errno = ENOSYS;
		return -1;
	}
	cond_wake(cond, 1);
	return real_co_cond_broadcast(cond);
}

/* libco registers each descriptor of a hooked wait with EPOLL_CTL_ADD (data: its poll item) and
 * removes it with EPOLL_CTL_DEL when the wait ends; the registrations made by a coroutine are
 * remembered by descriptor so the event loop's readiness names it. */
static void note_ctl(struct lc_state *s, int epfd, int op, int fd, const struct epoll_event *ev)
{
	if (fd < 0)
		return;
	if ((size_t)fd >= s->nfds) {
		if (op == EPOLL_CTL_DEL)
			return;
		size_t n = s->nfds ? s->nfds : 1024;
		while (n <= (size_t)fd)
			n *= 2;
		struct fdreg *t = d9__mem_realloc(s->fds, n * sizeof(*t));
		if (!t)
			return;
		memset(t + s->nfds, 0, (n - s->nfds) * sizeof(*t));
		s->fds = t;
		s->nfds = n;
	}
	struct fdreg *r = &s->fds[fd];
	if (r->data && r->epfd == epfd) {
		pm_del(&s->regs, (void *)(uintptr_t)r->data);
		r->data = 0;
	}
	if (op == EPOLL_CTL_DEL || !ev || !ev->data.u64 || !s->cur)
		return;
	if (pm_put(&s->regs, (void *)(uintptr_t)ev->data.u64, (void *)(uintptr_t)(fd + 1)) == 0)
		*r = (struct fdreg){ ev->data.u64, s->cur->handle, epfd };
}

D9_INTERPOSE int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	D9_REAL(int, epoll_ctl, (int, int, int, struct epoll_event *));
	if (!real_epoll_ctl)
		return (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev);
	int r = real_epoll_ctl(epfd, op, fd, ev);
	struct lc_state *s = S;
	if (s && r == 0 && (s->cur || op == EPOLL_CTL_DEL)) {
		int e = errno;
		note_ctl(s, epfd, op, fd, ev);
		errno = e;
	}
	return r;
}

/* The event loop's epoll_wait returned n events (libc-wait.c, after its Unpark). */
static void after_epoll(uint64_t at, int epfd, const struct epoll_event *ev, int n)
{
	struct lc_state *s = S;

	if (!s || s->cur)
		return; /* only the scheduler's own wait reports readiness */
	for (int i = 0; i < n; i++) {
		uint64_t data = ev[i].data.u64;
		uintptr_t v = (uintptr_t)pm_get(&s->regs, (void *)(uintptr_t)data);
		if (!v || v - 1 >= s->nfds)
			continue;
		int fd = (int)(v - 1);
		struct fdreg *r = &s->fds[fd];
		struct co *co = r->data == data && r->epfd == epfd ?
			pm_get(&s->cos, r->handle) : NULL;
		if (co && co->waiting == WAIT_POLL)
			wake_at(at, co, 0, D9_WAKE_FD, fd);
	}
	sample_queue(s);
}

/* libc-wait.c asks before it parks: with libcolib.so, d9's poll sits above libco's hooked poll,
 * which turns a coroutine's poll into a yield to the event loop (whose epoll_wait is the park). */
static int wait_yields(uint32_t call)
{
	struct lc_state *s = S;

	return call == D9_CALL_POLL && mode == MODE_SHARED && s && s->cur && real_co_hook_enabled &&
		real_co_hook_enabled();
}

/* ---- attach ------------------------------------------------------------------------------------ */

/* libco linked into the executable: its calls to these functions are direct, so each is patched
 * to jump to the same wrapper the shared library's callers reach by interposition. All four or
 * none: a partial set would see switches without their coroutines (or the reverse). */
static int attach_static(void)
{
	static const struct {
		const char *name;
		void *hook;
		void **orig;
	} hooks[] = {
		{ SYM_CO_CREATE, (void *)d9__lc_co_create, (void **)&real_co_create },
		{ SYM_CO_RELEASE, (void *)d9__lc_co_release, (void **)&real_co_release },
		{ SYM_CO_POLL_INNER, (void *)d9__lc_co_poll_inner, (void **)&real_co_poll_inner },
		{ SYM_CO_SWAP, (void *)d9__lc_co_swap, (void **)&real_co_swap },
	};
	void *fn[4];

	for (size_t i = 0; i < 4; i++) {
		if (!(fn[i] = d9__exe_symbol(hooks[i].name))) {
			d9__log_once(D9_LOG_WARN, "libco is linked into the executable but %s is not in "
				"its symbol table: generic mode", hooks[i].name);
			return -ENOENT;
		}
	}
	/* co_swap last: once it is patched, switches are seen, and the others are already there */
	for (size_t i = 0; i < 4; i++) {
		int r = d9__patch(fn[i], hooks[i].hook, hooks[i].orig, NULL, 0);
		if (r < 0) {
			/* d9__patch said why; the ones already patched pass straight through, as the
			 * mode is not set (they call the original through *orig) */
			return r;
		}
	}
	/* the condition variables are optional: without them (not linked in, or not patchable:
	 * d9__patch said so) a signalled waiter's wake is `other` */
	static const struct {
		const char *name;
		void *hook;
		void **orig;
	} conds[] = {
		{ SYM_CO_COND_TIMEDWAIT, (void *)d9__lc_co_cond_timedwait,
			(void **)&real_co_cond_timedwait },
		{ SYM_CO_COND_SIGNAL, (void *)d9__lc_co_cond_signal, (void **)&real_co_cond_signal },
		{ SYM_CO_COND_BROADCAST, (void *)d9__lc_co_cond_broadcast,
			(void **)&real_co_cond_broadcast },
	};
	for (size_t i = 0; i < 3; i++) {
		void *f = d9__exe_symbol(conds[i].name);
		if (f)
			d9__patch(f, conds[i].hook, conds[i].orig, NULL, 0);
	}
	return 0;
}

static int attach(void)
{
	/* a static libco first: the executable's own definitions win over any interposer */
	if (d9__exe_symbol(SYM_CO_SWAP)) {
		int r = attach_static();
		mode = r < 0 ? MODE_REFUSED : MODE_STATIC;
		return r < 0 ? r : 1;
	}
	void *swap = d9__real(SYM_CO_SWAP, NULL);
	if (!swap)
		return 0; /* no libco */
	real_co_swap = (co_swap_fn)swap;
	real_co_create = (co_create_fn)d9__real(SYM_CO_CREATE, NULL);
	real_co_release = (co_release_fn)d9__real(SYM_CO_RELEASE, NULL);
	real_co_poll_inner = (co_poll_inner_fn)d9__real(SYM_CO_POLL_INNER, NULL);
	real_co_hook_enabled = (co_hook_enabled_fn)d9__real(SYM_CO_HOOK_ENABLED, NULL);
	if (!real_co_create || !real_co_release || !real_co_poll_inner || !real_co_hook_enabled) {
		mode = MODE_REFUSED;
		d9__log_once(D9_LOG_WARN, "libco found but not the libco d9 knows (co_create, co_release, "
			"co_poll_inner or co_is_enable_sys_hook missing): generic mode");
		return -ENOENT;
	}
	mode = MODE_SHARED;
	return 1;
}

const struct d9__runtime d9__rt_libco = {
	.name = "libco",
	.attach = attach,
	.after_epoll = after_epoll,
	.wait_yields = wait_yields,
	.at_exit = at_exit,
};
