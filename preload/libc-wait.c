/* libc-wait.c: the event-loop waits (epoll_wait, epoll_pwait, epoll_pwait2, poll, ppoll, select,
 * pselect). A wait with a non-zero timeout parks the calling thread: Park before, Unpark after
 * with the ready count (or -errno). The first park makes the thread a worker. Zero-timeout waits
 * are only counted: loops that spin on them would otherwise emit a pair per call. A State Threads
 * scheduler's idle wait also tells the adapter which descriptors woke which coroutines. */
#include "preload.h"
#include "requests.h"
#include "runtime.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread struct d9__pl d9__pl __attribute__((tls_model("initial-exec")));

void *d9__real(const char *name, const char *version)
{
	int saved = errno;
	void *p;

	if (d9__pl.resolving)
		return NULL;
	d9__pl.resolving = 1;
	p = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
	d9__pl.resolving = 0;
	errno = saved;
	return p;
}

static inline int64_t ms_to_us(int ms)
{
	return ms < 0 ? -1 : (int64_t)ms * 1000;
}

/* sec s and us microseconds in microseconds, saturated: a host may pass any tv_sec (a "forever"
 * of INT64_MAX seconds, or garbage the kernel then refuses), and a signed overflow is undefined */
static inline int64_t sat_us(int64_t s, int64_t us)
{
	int64_t r;

	if (__builtin_mul_overflow(s, 1000000, &r) || __builtin_add_overflow(r, us, &r))
		return s < 0 ? INT64_MIN : INT64_MAX;
	return r;
}

static inline int64_t ts_to_us(const struct timespec *ts)
{
	return ts ? sat_us(ts->tv_sec, ts->tv_nsec / 1000) : -1;
}

static inline int64_t tv_to_us(const struct timeval *tv)
{
	return tv ? sat_us(tv->tv_sec, tv->tv_usec) : -1;
}

/* Returns 1 when the wait is recorded as a park (then call d9__unpark after it). */
static inline __attribute__((always_inline)) int park(uint32_t call, int64_t timeout_us)
{
	/* the loop turn ends: requests it answered end (requests.c; 0 with D9_REQUESTS off), at
	 * the time the Park then takes too (one clock read for both) */
	uint64_t now = 0;
	if (D9_UNLIKELY(d9__pl.req_npending))
		now = d9__req_turn_end();
	if (timeout_us == 0) {
		d9__pl.nowait++;
		d9__pl.hold_nowait = 1;
		return 0;
	}
	if (d9__pl.coroutine && d9__pl.rt && d9__pl.rt->wait_yields && d9__pl.rt->wait_yields(call))
		return 0; /* the runtime makes it a coroutine yield: its scheduler's wait is the park */
	if (D9_UNLIKELY(!d9__self.worker)) {
		if (!d9__pl_active() || !d9_agent_become_worker())
			return 0;
	} else if (D9_UNLIKELY(!d9__enabled || d9__self.busy)) {
		/* d9__pl_active() but for the role: a worker is never the agent's own thread
		 * (d9_agent_become_worker refuses those) */
		return 0;
	}
	d9__pl.in_turn = 0;
	if (d9__pl.nowait) {
		/* the loop spun on zero-timeout waits since its last park: one count, not a pair each */
		if (!now)
			now = d9__now();
		d9_rec_zero_timeout_waits(now, d9__pl.nowait);
		d9__pl.nowait = 0;
		d9__pl.hold_nowait = 0;
	}
	d9_rec_park_at(now ? now : d9__now(), call, timeout_us);
	return 1;
}

/* ---- Scheduler statistics --------------------------------------------------------------------
 * Unpark carries the thread's CPU time and run delay (time runnable but waiting for a CPU) from
 * /proc/thread-self/schedstat, as deltas since the previous Unpark that carried them: a reading
 * costs a pread (five syscalls past the 16 workers that keep the file open: record.c), so it is
 * taken at an Unpark only when D9__SCHED_READ_NS (d9-agent.h; d9__pcfg.schedstat_ticks in clock ticks) have passed since
 * the thread's last such Unpark, which keeps the cost at
 * most one syscall per worker per 10 ms and none per request. An Unpark without a reading says
 * "unknown" (not 0); one with a reading covers every park cycle since the previous one. The
 * blocking-call wrappers (libc-block.c) take readings too, for calls that ran past the threshold,
 * and use the last reading to tell waiting from preemption. */
static int sched_off; /* the host's threads cannot read schedstat: stop trying */

int d9__pl_schedstat(uint64_t now)
{
	uint64_t c, d;

	if (__atomic_load_n(&sched_off, __ATOMIC_RELAXED) ||
		__atomic_load_n(&d9__no_calls, __ATOMIC_ACQUIRE))
		return -ENOENT;
	int err = d9_agent_schedstat(&c, &d);
	if (err < 0) {
		if (err == -ENOENT || err == -EACCES || err == -EPERM)
			/* the same for every thread: no point in each one failing */
			__atomic_store_n(&sched_off, 1, __ATOMIC_RELAXED);
		return err;
	}
	if (err == 1)
		d9__pl.ss_base = 0; /* the thread's first reading (or first after a fork) */
	d9__pl.ss_at = now ? now : 1;
	d9__pl.ss_cpu = c;
	d9__pl.ss_delay = d;
	return err;
}

/* Records the Unpark of a wait that returned `ready` (-errno when it failed); returns its time. */
static inline __attribute__((always_inline)) uint64_t unpark(int64_t ready)
{
	uint64_t cpu = D9_UNKNOWN, wait = D9_UNKNOWN;
	uint64_t now = d9__now();

	if (D9_UNLIKELY(now - d9__pl.ss_uat >=
		__atomic_load_n(&d9__pcfg.schedstat_ticks, __ATOMIC_RELAXED)) &&
		d9__pl_schedstat(now) >= 0) {
		d9__pl.ss_uat = now;
		if (d9__pl.ss_base) {
			/* the counters are cumulative and monotonic: a smaller value is a bad read */
			cpu = d9__pl.ss_cpu >= d9__pl.ss_ucpu ? d9__pl.ss_cpu - d9__pl.ss_ucpu : D9_UNKNOWN;
			wait = d9__pl.ss_delay >= d9__pl.ss_udelay ?
				d9__pl.ss_delay - d9__pl.ss_udelay : D9_UNKNOWN;
		}
		d9__pl.ss_ucpu = d9__pl.ss_cpu;
		d9__pl.ss_udelay = d9__pl.ss_delay;
		d9__pl.ss_base = 1;
		d9_rec_unpark_at(now, ready, cpu, wait);
	} else {
		/* its own call, with the constants: the record's choice (d9_raw_unpark) folds away */
		d9_rec_unpark_at(now, ready, D9_UNKNOWN, D9_UNKNOWN);
	}
	d9__pl.in_turn = 1;
	return now;
}

/* After a wait: its Unpark (when parked), with -errno when the wait failed, then the runtime's
 * look at the ready descriptors (its `hook`), given when the wait returned: the Unpark's time,
 * or a clock read for a wait that was not a park. errno is read only for a failed wait, and
 * saved nowhere: the Unpark's own slow paths (d9__slow, d9_agent_schedstat, d9__unpark) leave it
 * as it was, and so do the hooks (runtime.h). */
#define AFTER_WAIT(parked, r, hook, ...)                                             \
	do {                                                                         \
		uint64_t at_ = (parked) ? unpark((r) < 0 ? -errno : (r)) : 0;        \
		if (d9__pl.rt && (r) > 0 && d9__pl.rt->hook)                         \
			d9__pl.rt->hook((parked) ? at_ : d9__now(), __VA_ARGS__);    \
	} while (0)

/* The thread is a worker, not inside the agent, and recording is on. */
static inline int plain_thread(void)
{
	return d9__self.busy == 0 && d9__self.worker != 0 && d9__enabled != 0;
}

/* The common wait of a generic loop's worker, in one test: plain_thread, no runtime adapter (so
 * no coroutine), no zero-timeout waits to count, no requests pending. Then park()'s and
 * AFTER_WAIT's other branches have nothing to do. */
static inline int wait_plain(void)
{
	return d9__pl.hold == 0 && plain_thread();
}

/* Asked once wait_plain() failed: nothing held but requests pending (D9_REQUESTS=1, a loop that
 * answered some this turn), which epoll_wait.req ends first (park_plain_at with
 * d9__req_turn_end's time, as park() does). It does not test the count itself: should wait_plain
 * have failed for a reason that no longer holds, ending no request costs nothing. */
static inline int wait_plain_but_requests(void)
{
	return d9__pl.hold_rt == 0 && d9__pl.hold_nowait == 0 && plain_thread();
}

/* The plain Park of the generic loop's epoll_wait at `now` (wait_plain holds, or only requests
 * were pending and the caller ended them: park() has nothing else to do). */
static inline __attribute__((always_inline)) void park_plain_at(uint64_t now, int timeout)
{
	d9__pl.in_turn = 0;
	d9_rec_park_at(now, D9_CALL_EPOLL_WAIT, ms_to_us(timeout));
}

/* The C library's epoll_wait, resolved by the full path (epoll_wait.slow) at its first call. The
 * plain path calls it while the wrappers may not make system calls themselves (preload/
 * libc-direct.c: the host has started threads), and takes the full path while it is unset (a
 * thread made a worker by another wait or an adapter, or inherited as one by a forked child);
 * epoll_wait.req needs it either way. */
typedef int epoll_wait_fn(int, struct epoll_event *, int, int);
static epoll_wait_fn *real_epoll_wait;

/* epoll_wait is the generic loop's wait (every turn of an epoll server's loop): the wrapper is
 * one test (wait_plain) and a tail jump to one of four functions of its own, so that it saves no
 * register for any. Their symbols are "epoll_wait.plain", "epoll_wait.libc", "epoll_wait.req"
 * and "epoll_wait.slow": a stack that holds one reads "epoll_wait" (agent/dwsym.c names the
 * agent's frames by the symbol up to its dot). The plain wait records its Park, makes the system
 * call, records the Unpark with the kernel's own answer (-errno when it failed), and sets errno
 * last. While the wrappers may not make system calls themselves (d9__direct off: the host
 * started threads, and the C library's wait is a cancellation point), the same is
 * "epoll_wait.libc" around the C library's call; the Unpark keeps the errno it set. When the
 * test fails, a second one (wait_plain_but_requests) sends a turn whose only reason was requests
 * pending to "epoll_wait.req": it ends them at the Park's time, then waits as either plain form
 * does. */
static int epoll_wait_slow(int epfd, struct epoll_event *events, int maxevents, int timeout)
	__asm__("epoll_wait.slow");
#if defined(__x86_64__)
/* The plain forms' wait once their Park is recorded: the system call and its Unpark with the
 * kernel's answer, errno set last; or the C library's call, its Unpark keeping the errno it set. */
static inline __attribute__((always_inline)) int wait_direct(int epfd, struct epoll_event *events,
	int maxevents, int timeout)
{
	long k = d9__syscall4(SYS_epoll_wait, epfd, (long)events, maxevents, timeout);
	unpark(k);
	return (int)d9__sysret(k);
}

static inline __attribute__((always_inline)) int wait_libc(epoll_wait_fn *real, int epfd,
	struct epoll_event *events, int maxevents, int timeout)
{
	int r = real(epfd, events, maxevents, timeout);
	unpark(r < 0 ? -errno : r);
	return r;
}

static int epoll_wait_plain(int epfd, struct epoll_event *events, int maxevents, int timeout)
	__asm__("epoll_wait.plain");
static __attribute__((noinline)) int epoll_wait_plain(int epfd, struct epoll_event *events,
	int maxevents, int timeout)
{
	park_plain_at(d9__now(), timeout);
	return wait_direct(epfd, events, maxevents, timeout);
}

static int epoll_wait_libc(int epfd, struct epoll_event *events, int maxevents, int timeout)
	__asm__("epoll_wait.libc");
static __attribute__((noinline)) int epoll_wait_libc(int epfd, struct epoll_event *events,
	int maxevents, int timeout)
{
	epoll_wait_fn *real = __atomic_load_n(&real_epoll_wait, __ATOMIC_RELAXED);
	if (D9_UNLIKELY(!real))
		return epoll_wait_slow(epfd, events, maxevents, timeout);
	park_plain_at(d9__now(), timeout);
	return wait_libc(real, epfd, events, maxevents, timeout);
}

/* The plain wait of a loop that answered requests this turn (wait_plain_but_requests), either
 * way: it ends them at the Park's time. */
static int epoll_wait_req(int epfd, struct epoll_event *events, int maxevents, int timeout)
	__asm__("epoll_wait.req");
static __attribute__((noinline)) int epoll_wait_req(int epfd, struct epoll_event *events,
	int maxevents, int timeout)
{
	epoll_wait_fn *real = __atomic_load_n(&real_epoll_wait, __ATOMIC_RELAXED);
	if (D9_UNLIKELY(!real))
		return epoll_wait_slow(epfd, events, maxevents, timeout);
	uint64_t now = d9__req_turn_end();
	park_plain_at(now ? now : d9__now(), timeout);
	return D9_LIKELY(d9__direct_on()) ? wait_direct(epfd, events, maxevents, timeout) :
		wait_libc(real, epfd, events, maxevents, timeout);
}
#endif

static __attribute__((noinline)) int epoll_wait_slow(int epfd, struct epoll_event *events,
	int maxevents, int timeout)
{
	if (D9_UNLIKELY(!real_epoll_wait))
		__atomic_store_n(&real_epoll_wait, (epoll_wait_fn *)d9__real("epoll_wait", NULL),
			__ATOMIC_RELAXED);
	if (!real_epoll_wait)
		return (int)syscall(SYS_epoll_wait, epfd, events, maxevents, timeout);
	int parked = park(D9_CALL_EPOLL_WAIT, ms_to_us(timeout));
	int r = D9__SYS(real_epoll_wait(epfd, events, maxevents, timeout), SYS_epoll_wait, epfd,
		events, maxevents, timeout);
	if (!parked)
		return r;
	AFTER_WAIT(1, r, after_epoll, epfd, events, r);
	return r;
}

D9_INTERPOSE int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
#if defined(__x86_64__)
	if (D9_LIKELY(timeout != 0 && wait_plain()))
		return D9_LIKELY(d9__direct_on()) ? epoll_wait_plain(epfd, events, maxevents, timeout) :
			epoll_wait_libc(epfd, events, maxevents, timeout);
	if (timeout != 0 && wait_plain_but_requests())
		return epoll_wait_req(epfd, events, maxevents, timeout);
#endif
	return epoll_wait_slow(epfd, events, maxevents, timeout);
}

D9_INTERPOSE int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
	const sigset_t *sigmask)
{
	D9_REAL(int, epoll_pwait, (int, struct epoll_event *, int, int, const sigset_t *));
	if (!real_epoll_pwait)
		return (int)syscall(SYS_epoll_pwait, epfd, events, maxevents, timeout, sigmask, _NSIG / 8);
	int parked = park(D9_CALL_EPOLL_PWAIT, ms_to_us(timeout));
	int r = D9__SYS(real_epoll_pwait(epfd, events, maxevents, timeout, sigmask),
		SYS_epoll_pwait, epfd, events, maxevents, timeout, sigmask, _NSIG / 8);
	if (!parked)
		return r;
	AFTER_WAIT(1, r, after_epoll, epfd, events, r);
	return r;
}

D9_INTERPOSE int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
	const struct timespec *timeout, const sigset_t *sigmask)
{
	D9_REAL(int, epoll_pwait2, (int, struct epoll_event *, int, const struct timespec *,
		const sigset_t *));
	if (!real_epoll_pwait2) {
		errno = ENOSYS; /* the C library has none: neither could the program's own call */
		return -1;
	}
	if (!park(D9_CALL_EPOLL_PWAIT2, ts_to_us(timeout)))
		return real_epoll_pwait2(epfd, events, maxevents, timeout, sigmask);
	int r = real_epoll_pwait2(epfd, events, maxevents, timeout, sigmask);
	AFTER_WAIT(1, r, after_epoll, epfd, events, r);
	return r;
}

D9_INTERPOSE int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	D9_REAL(int, poll, (struct pollfd *, nfds_t, int));
	if (!real_poll)
		return (int)syscall(SYS_poll, fds, nfds, timeout);
	int parked = park(D9_CALL_POLL, ms_to_us(timeout));
	int r = D9__SYS(real_poll(fds, nfds, timeout), SYS_poll, fds, nfds, timeout);
	AFTER_WAIT(parked, r, after_poll, fds, nfds, r);
	return r;
}

D9_INTERPOSE int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
	const sigset_t *sigmask)
{
	D9_REAL(int, ppoll, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *));
	if (!real_ppoll)
		return (int)syscall(SYS_ppoll, fds, nfds, tmo, sigmask, _NSIG / 8);
	int parked = park(D9_CALL_PPOLL, ts_to_us(tmo));
	int r = real_ppoll(fds, nfds, tmo, sigmask);
	AFTER_WAIT(parked, r, after_poll, fds, nfds, r);
	return r;
}

/* The _FORTIFY_SOURCE forms (Debian's nsd waits in __ppoll_chk, haproxy and memcached call
 * __poll_chk): glibc's own check of the array's size, which ends the program as it would without
 * the agent, then the same wait. Not seen, nsd's main process's wait was one loop turn of seconds
 * "on CPU" (d9-analyze check: a serious hog). */
extern void __chk_fail(void) __attribute__((noreturn));
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
	const sigset_t *sigmask, size_t fdslen);

D9_INTERPOSE int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return poll(fds, nfds, timeout);
}

D9_INTERPOSE int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
	const sigset_t *sigmask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return ppoll(fds, nfds, tmo, sigmask);
}

/* select as glibc 2.36 makes it on x86-64, the same system call (pselect6: a seccomp filter
 * written for glibc allows it, maybe not the old select) with the same handling of the timeout:
 * negative parts are EINVAL, microseconds past a second are carried into the seconds (the sum
 * capped), and the time left is written back to *tv even on error. */
static int select_direct(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
#if defined(__x86_64__)
	struct timespec ts, *pts = NULL;

	if (tv) {
		int64_t s = tv->tv_sec;
		int32_t us = (int32_t)tv->tv_usec;
		if (s < 0 || us < 0) {
			errno = EINVAL;
			return -1;
		}
		if (D9_LIKELY(us < 1000000)) { /* the usual form: no carry, no division */
			ts.tv_sec = s;
			ts.tv_nsec = (long)us * 1000;
		} else if (us / 1000000 > INT64_MAX - s) {
			ts.tv_sec = INT64_MAX;
			ts.tv_nsec = 999999999;
		} else {
			ts.tv_sec = s + us / 1000000;
			ts.tv_nsec = (long)(us % 1000000) * 1000;
		}
		pts = &ts;
	}
	long r = d9__syscall6(SYS_pselect6, nfds, (long)rd, (long)wr, (long)ex, (long)pts, 0);
	if (tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return (int)d9__sysret(r);
#else
	(void)nfds, (void)rd, (void)wr, (void)ex, (void)tv;
	errno = ENOSYS; /* never called: d9__direct is set on x86-64 only */
	return -1;
#endif
}

D9_INTERPOSE int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	D9_REAL(int, select, (int, fd_set *, fd_set *, fd_set *, struct timeval *));
	if (!real_select)
		return (int)syscall(SYS_select, nfds, rd, wr, ex, tv);
	int parked = park(D9_CALL_SELECT, tv_to_us(tv));
	int r = d9__direct_on() ? select_direct(nfds, rd, wr, ex, tv) :
		real_select(nfds, rd, wr, ex, tv);
	AFTER_WAIT(parked, r, after_select, nfds, rd, wr, ex, r);
	return r;
}

D9_INTERPOSE int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
	const sigset_t *sigmask)
{
	D9_REAL(int, pselect, (int, fd_set *, fd_set *, fd_set *, const struct timespec *,
		const sigset_t *));
	if (!real_pselect) {
		errno = ENOSYS;
		return -1;
	}
	int parked = park(D9_CALL_PSELECT, ts_to_us(tmo));
	int r = real_pselect(nfds, rd, wr, ex, tmo, sigmask);
	AFTER_WAIT(parked, r, after_select, nfds, rd, wr, ex, r);
	return r;
}
