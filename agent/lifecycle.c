/* lifecycle.c: the agent's life inside the host: configuration at load, a lazy start on the
 * first event (so programs that never record anything are left alone), the final flush and seal
 * at exit and on SIGTERM/SIGINT (only when the host has no handler of its own), the toggle signal,
 * and fork (the child starts a fresh agent; nothing it needs can be held by a vanished thread).
 * Nothing here may exit, abort or hang the host: every wait has a deadline. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int d9__arena_init(void);
int d9__key_init(void);
void d9__record_child(void);
void d9__writer_child(void);
int d9__spawn_blocked(pthread_t *th, void *(*fn)(void *));

#define EXIT_WAIT_MS 5000

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* Creates an agent thread (fn(NULL)) with every signal blocked, so host signals never land on
 * it; the compressor (compress.c) is started the same way. Returns 0 or a negative errno. */
int d9__spawn_blocked(pthread_t *th, void *(*fn)(void *))
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(th, NULL, fn, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

/* Sleeps in 1 ms steps until *flag is set or ms have passed (async-signal-safe). */
static void wait_flag(const int *flag, int value, int ms)
{
	for (int i = 0; i < ms && __atomic_load_n(flag, __ATOMIC_ACQUIRE) != value; i++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

static void on_term(int sig)
{
	struct d9__agent *g = &d9__g;
	int saved = errno;

	/* Async-signal context: ask the writer to seal (it polls `stop` at least every flush
	 * interval) and the compressor to finish, wait for both with deadlines, then let the signal
	 * take its default effect. A compression cut short leaves the .bin, and a .tmp file that the
	 * next process with this trace path removes. */
	if (g->state == D9__RUNNING_ && g->writer_started) {
		/* The thread the signal landed on may be running (a long poll) with its chunk in
		 * hand, which the writer cannot take. Outside the agent's slow path it holds no agent
		 * lock, and its chunk is whole up to the last complete event: hand it off here. */
		struct d9__thr *t = &d9__self;
		int inside = t->busy;
		t->busy = 1; /* nothing below is the host's: no recording from this handler */
		if (!inside && t->blk && t->role != D9_ROLE_AGENT &&
			__atomic_load_n(&t->park, __ATOMIC_RELAXED) == D9__RUNNING)
			d9__handoff(t);
		__atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
		wait_flag(&g->state, D9__STOPPED, EXIT_WAIT_MS);
		if (g->compressor_started) {
			__atomic_store_n(&g->compress_stop, 1, __ATOMIC_RELEASE);
			wait_flag(&g->compressor_done, 1, 2000);
			__atomic_store_n(&g->compress_abort, 1, __ATOMIC_RELEASE);
			wait_flag(&g->compressor_done, 1, 300);
			if (!__atomic_load_n(&g->compressor_done, __ATOMIC_ACQUIRE))
				d9__tmp_abandon();
		}
	}
	signal(sig, SIG_DFL);
	errno = saved;
	raise(sig); /* blocked until this handler returns, then the default action */
}

/* Installs the SIGTERM/SIGINT flush handler where the host has none. */
static void install_term_handlers(void)
{
	static const int sigs[] = { SIGTERM, SIGINT };

	for (size_t i = 0; i < 2; i++) {
		struct sigaction old, sa;
		if (sigaction(sigs[i], NULL, &old) != 0)
			continue;
		if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
			continue; /* the host's own handler (or SIG_IGN) stays */
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_term;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}

static void on_toggle(int sig)
{
	(void)sig;
	int on = !__atomic_load_n(&d9__enabled, __ATOMIC_RELAXED);
	__atomic_store_n(&d9__enabled, on, __ATOMIC_RELAXED);
	if (on && d9__g.state == D9__STOPPED)
		__atomic_store_n(&d9__enabled, 0, __ATOMIC_RELAXED);
}

static void install_toggle(int sig)
{
	struct sigaction old, sa;

	if (sigaction(sig, NULL, &old) != 0)
		return;
	if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
		d9__log(D9_LOG_WARN, "D9_TOGGLE_SIGNAL: the program handles signal %d itself; toggling is off",
			sig);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_toggle;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

int d9__start(void)
{
	struct d9__agent *g = &d9__g;
	int err = 0;

	if (__atomic_load_n(&g->state, __ATOMIC_ACQUIRE) == D9__RUNNING_)
		return 0;
	d9__lock(&start_lock);
	if (g->state == D9__RUNNING_)
		goto out;
	if (g->state != D9__CONFIGURED) {
		err = -1;
		goto out;
	}
	if ((err = d9__trace_dir_prepare(&g->cfg, 0)) != 0)
		goto fail; /* it said why */
	if ((err = d9__arena_init()) != 0) {
		d9__log(D9_LOG_ERROR, "cannot reserve %llu bytes of buffers: %s; tracing is off",
			(unsigned long long)g->cfg.max_memory, strerror(-err));
		goto fail;
	}
	g->seg.f.fd = -1;
	d9__clock_calibrate_start();
	if ((err = d9__spawn_blocked(&g->writer, d9__writer_main)) != 0) {
		d9__log(D9_LOG_ERROR, "cannot start the writer thread: %s; tracing is off", strerror(-err));
		goto fail;
	}
	g->writer_started = 1;
	if (g->cfg.compress && d9__spawn_blocked(&g->compressor, d9__compressor_main) == 0)
		g->compressor_started = 1;
	install_term_handlers();
	__atomic_store_n(&g->state, D9__RUNNING_, __ATOMIC_RELEASE);
	d9__log(D9_LOG_INFO, "tracing to %s/%s.%d.*", d9__trace_dir_shown(&g->cfg), g->cfg.stem,
		(int)g->pid);
	goto out;
fail:
	g->state = D9__FAILED;
	d9__enabled = 0;
	err = -1;
out:
	d9__unlock(&start_lock);
	return err;
}

/* Waits on done_cond (pool lock held) until pred() or the deadline. Returns 0 or -ETIMEDOUT. */
static int wait_writer(int (*pred)(void *), void *arg, int timeout_ms)
{
	struct d9__agent *g = &d9__g;
	uint64_t deadline = d9__mono_ns() + (uint64_t)timeout_ms * 1000000u;
	struct timespec until = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };

	while (!pred(arg)) {
		if (pthread_cond_timedwait(&g->done_cond, &g->pool_lock, &until) == ETIMEDOUT)
			return pred(arg) ? 0 : -ETIMEDOUT;
	}
	return 0;
}

static int passes_reached(void *arg)
{
	return d9__g.passes >= *(uint64_t *)arg || d9__g.state == D9__STOPPED;
}

static int writer_stopped(void *arg)
{
	(void)arg;
	return d9__g.state == D9__STOPPED;
}

int d9_agent_flush(int timeout_ms)
{
	struct d9__agent *g = &d9__g;

	if (g->state != D9__RUNNING_ || d9__self.busy)
		return 0;
	d9__self.busy = 1; /* to the end: the waits below are not the host's */
	d9__unpark(&d9__self);
	d9__handoff(&d9__self);
	d9__lock(&g->pool_lock);
	/* two passes: the first collects every thread's chunk, the second writes what running
	 * threads handed off in between */
	uint64_t target = g->passes + 2;
	g->flush_req = 1;
	pthread_cond_signal(&g->writer_cond);
	int err = wait_writer(passes_reached, &target, timeout_ms);
	d9__unlock(&g->pool_lock);
	d9__self.busy = 0;
	return err;
}

int d9_agent_active(void)
{
	int s = d9__g.state;

	return s == D9__CONFIGURED || s == D9__RUNNING_;
}

/* preload/ closes what is open on the exiting thread (the running coroutine's poll); absent in
 * programs that link the recording core without preload/ (the test driver). */
void d9__preload_at_exit(void) __attribute__((weak));

/* atexit: return from main, exit(), the runtime's own exit. */
static void on_exit_flush(void)
{
	struct d9__agent *g = &d9__g;
	int saved = errno;

	if (g->state != D9__RUNNING_ || g->pid != getpid())
		return;
	/* exit() from a signal handler may have interrupted this thread inside the agent, holding
	 * an agent lock: then its chunk is left alone and every lock below has a deadline */
	int inside = d9__self.busy;
	if (!inside && d9__preload_at_exit)
		d9__preload_at_exit();
	d9__self.busy = 1; /* from here on this thread records nothing */
	if (!inside) {
		d9__unpark(&d9__self); /* e.g. exit() from a handler that interrupted a wait */
		d9__handoff(&d9__self);
	}
	struct timespec lock_until;
	clock_gettime(CLOCK_REALTIME, &lock_until);
	lock_until.tv_sec += EXIT_WAIT_MS / 1000;
	if (pthread_mutex_timedlock(&g->pool_lock, &lock_until) != 0) {
		d9__log(D9_LOG_WARN, "exit: the agent is busy; the last segment stays .active");
		errno = saved;
		return;
	}
	__atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
	pthread_cond_signal(&g->writer_cond);
	if (wait_writer(writer_stopped, NULL, EXIT_WAIT_MS) != 0)
		d9__log(D9_LOG_WARN, "the writer did not finish within %d ms; the last segment stays .active",
			EXIT_WAIT_MS);
	d9__unlock(&g->pool_lock);
	if (g->compressor_started) {
		/* compress what is sealed if it is quick; otherwise it stays .bin (still readable) */
		d9__lock(&g->disk_lock);
		g->compress_stop = 1;
		pthread_cond_signal(&g->disk_cond);
		d9__unlock(&g->disk_lock);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 2;
		if (pthread_timedjoin_np(g->compressor, NULL, &until) != 0) {
			/* out of time: the job in progress is dropped (its .bin stays, its .tmp goes) */
			__atomic_store_n(&g->compress_abort, 1, __ATOMIC_RELEASE);
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += 300000000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			if (pthread_timedjoin_np(g->compressor, NULL, &until) != 0)
				d9__tmp_abandon(); /* still running: its .bin stays, its .tmp goes now */
		}
		g->compressor_started = 0;
	}
	errno = saved;
}

/* ---- privilege drops (agent/DESIGN.md, "Privilege drops") ------------------------------------ */

static int dir_switched(void *arg)
{
	(void)arg;
	return !d9__g.dir_switch || d9__g.state == D9__STOPPED;
}

/* Whether a sealed segment still waits for the compressor (disk lock held): after the drop it
 * could no longer make its temporary file in the old directory. */
static int compress_pending(void)
{
	struct d9__agent *g = &d9__g;
	uint64_t now = d9__mono_ns();

	for (size_t i = 0; i < g->nsealed; i++) {
		struct d9__sealed *s = &g->sealed[i];
		size_t n = strlen(s->path);
		if (s->compressing || (g->cfg.compress && !s->foreign && n > 4 &&
			    !strcmp(s->path + n - 4, ".bin") && s->retry_at_ns <= now))
			return 1;
	}
	return 0;
}

/* Gives the compressor up to 2 s to finish the segments sealed before a drop, while it still
 * may write there; what is left stays .bin (readable) and is not tried again by this process. */
static void compress_before_drop(void)
{
	struct d9__agent *g = &d9__g;
	uint64_t until = d9__mono_ns() + 2000000000u;

	while (d9__mono_ns() < until) {
		d9__lock(&g->disk_lock);
		int pending = compress_pending();
		pthread_cond_signal(&g->disk_cond);
		d9__unlock(&g->disk_lock);
		if (!pending)
			return;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	d9__lock(&g->disk_lock);
	for (size_t i = 0; i < g->nsealed; i++)
		if (!g->sealed[i].compressing)
			g->sealed[i].retry_at_ns = UINT64_MAX;
	d9__unlock(&g->disk_lock);
}

/* Makes the agent write where euid can: prepared now (still privileged); before the agent runs
 * it simply uses it, once it runs the writer seals the open segment here and goes on there.
 * Returns 1 when the directory changed. Busy thread (its calls are the agent's). */
static int dir_for(uid_t euid)
{
	struct d9__agent *g = &d9__g;
	int changed = 0;

	d9__lock(&start_lock);
	int st = g->state;
	if (st != D9__CONFIGURED && st != D9__RUNNING_)
		goto out;
	/* not started yet: the directory is made (0700, ours) now, with the start's checks */
	if (st == D9__CONFIGURED && d9__trace_dir_prepare(&g->cfg, 1) != 0)
		goto out; /* the start says why */
	int err = d9__trace_dir_for_uid(&g->cfg, euid);
	if (err < 0) {
		d9__log_once(D9_LOG_WARN, "cannot prepare a trace directory for uid %u in %s (%s): what "
			"the process records after it changes user is lost", (unsigned)euid,
			d9__trace_dir_shown(&g->cfg), strerror(-err));
		goto out;
	}
	if (err > 0)
		goto out;
	changed = 1;
	if (st == D9__CONFIGURED) {
		d9__trace_dir_use(&g->cfg);
		goto out;
	}
	d9__lock(&g->pool_lock);
	__atomic_store_n(&g->dir_switch, 1, __ATOMIC_RELEASE);
	g->flush_req = 1;
	pthread_cond_signal(&g->writer_cond);
	if (wait_writer(dir_switched, NULL, EXIT_WAIT_MS) != 0)
		d9__log_once(D9_LOG_WARN, "the writer did not move to the new trace directory within %d "
			"ms; the open segment may stay .active", EXIT_WAIT_MS);
	d9__unlock(&g->pool_lock);
	if (g->compressor_started)
		compress_before_drop();
out:
	d9__unlock(&start_lock);
	return changed;
}

/* After the drop: whether a thread profiled from now on still gets perf samples, and kernel
 * ones (threads profiled before keep the events they opened while privileged). Only asked when
 * perf profiling is on; the probe is one perf_event_open of this thread, closed at once. */
static uint32_t perf_narrowed(void)
{
	const struct d9__config *c = &d9__g.cfg;
	struct perf_event_attr a;
	uint32_t flags = 0;

	if ((!c->cpu_hz || c->profile_mode == D9_PROF_CTIMER) && !c->sched_events)
		return 0;
	for (int user_only = 0; user_only < 2; user_only++) {
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = PERF_TYPE_SOFTWARE;
		a.config = PERF_COUNT_SW_CPU_CLOCK;
		a.sample_period = 1000000;
		a.disabled = 1;
		a.exclude_kernel = (unsigned)user_only;
		a.exclude_hv = 1;
		int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			return flags;
		}
		if (errno != EACCES && errno != EPERM)
			return flags; /* not a matter of privileges (ENOSYS, ENOENT): as before the drop */
		flags |= user_only ? D9_PRIV_PERF_DENIED : D9_PRIV_KERNEL_SAMPLES_LOST;
	}
	return flags;
}

/* perf_narrowed() of the moment before the drop: what was denied already is no loss of it */
static uint32_t perf_before;

int d9_agent_creds_before(unsigned euid)
{
	struct d9__thr *t = &d9__self;

	/* root writes wherever the agent writes: becoming root again needs nothing */
	if (!d9_agent_active() || t->busy || t->role == D9_ROLE_AGENT || euid == (unsigned)-1 ||
		euid == (unsigned)geteuid() || euid == 0)
		return 0;
	int saved = errno;
	t->busy = 1;
	perf_before = perf_narrowed();
	int token = dir_for((uid_t)euid);
	t->busy = 0;
	errno = saved;
	return token;
}

void d9_agent_creds_after(int token, unsigned from_euid, int ok)
{
	struct d9__thr *t = &d9__self;
	uid_t now = geteuid();

	if (!d9_agent_active() || t->busy || t->role == D9_ROLE_AGENT)
		return;
	int saved = errno;
	t->busy = 1;
	if (!ok || now == (uid_t)from_euid) {
		if (token)
			dir_for(now); /* the call failed: back to where this user writes */
		else if (ok && d9__g.state == D9__RUNNING_ && faccessat(AT_FDCWD, d9__g.cfg.dir,
				 W_OK | X_OK, AT_EACCESS) != 0)
			/* a group change: only a group-writable directory (D9_ALLOW_SHARED_DIR) can be
			 * lost this way */
			d9__log_once(D9_LOG_WARN, "after a change of groups the trace directory %s is "
				"not writable: events are dropped (counted)", d9__trace_dir_shown(&d9__g.cfg));
		goto out;
	}
	if (now == 0)
		goto out; /* root again (a saved uid): nothing is narrowed */
	uint32_t flags = perf_narrowed() & ~perf_before;
	d9__defs_privileges(from_euid, (uint32_t)now, flags);
	if (flags & D9_PRIV_PERF_DENIED)
		d9__log_once(D9_LOG_WARN, "privileges dropped (uid %u -> %u): perf_event_open is denied "
			"from now on; threads profiled from now on get no perf samples (the trace says so)",
			from_euid, (unsigned)now);
	else if (flags & D9_PRIV_KERNEL_SAMPLES_LOST)
		d9__log_once(D9_LOG_WARN, "privileges dropped (uid %u -> %u): CPU samples of threads "
			"profiled from now on have no kernel frames (perf_event_paranoid); the trace says so",
			from_euid, (unsigned)now);
out:
	t->busy = 0;
	errno = saved;
}

static void fork_prepare(void)
{
	d9__lock(&d9__g.def_lock);
}

static void fork_parent(void)
{
	d9__unlock(&d9__g.def_lock);
}

/* The disk lock and condition. The compressor waits on the condition with CLOCK_MONOTONIC
 * deadlines: on the default clock (CLOCK_REALTIME) every wait timed out at once and the idle
 * compressor spun on a CPU. */
static void disk_init(void)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&d9__g.disk_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d9__g.disk_cond, &ca);
	pthread_condattr_destroy(&ca);
}

/* The child: one thread, the parent's memory. Start over with a new series and new threads; the
 * definitions (held consistent by fork_prepare) carry over so ids cached by preload/ stay valid. */
static void fork_child(void)
{
	struct d9__agent *g = &d9__g;

	pthread_mutex_init(&g->def_lock, NULL);
	if (g->state == D9__OFF || g->state == D9__FAILED)
		return;
	d9__file_close(&g->seg.f); /* the parent's segment, if the child still has it */
	memset(&g->seg, 0, sizeof(g->seg));
	g->seg.f.fd = -1;
	g->next_seq = 0;
	g->writer_started = g->compressor_started = 0;
	g->compress_stop = 0;
	g->compress_abort = 0;
	g->compressor_done = 0;
	g->tmp_live = 0; /* the parent's compressor's file, not ours to remove */
	g->write_failing = 0;
	g->exit_done = 0;
	g->dir_switch = 0; /* a drop in progress in the parent is the parent's (the child has no writer) */
	disk_init();
	g->nsealed = 0; /* the parent's list; the child's series is its own */
	g->pid = getpid();
	d9__record_child();
	d9__writer_child();
	d9__coroutines_child();
	pthread_mutex_init(&start_lock, NULL);
	g->state = g->state == D9__STOPPED ? D9__STOPPED : D9__CONFIGURED;
	if (g->state == D9__STOPPED)
		d9__enabled = 0;
}

__attribute__((constructor)) static void d9__init(void)
{
	struct d9__agent *g = &d9__g;
	int saved = errno;

	g->state = D9__OFF;
	d9__enabled = 0;
	if (d9__config_load(&g->cfg) != 0)
		goto out;
	d9__clock_init(g->cfg.clock);
	d9__pcfg = g->cfg.pre;
	d9__profile_init();
	disk_init();
	d9__record_init();
	d9__defs_init();
	if (d9__key_init() != 0)
		goto out;
	g->pid = getpid();
	g->seg.f.fd = -1;
	g->state = D9__CONFIGURED;
	d9__enabled = g->cfg.enabled;
	atexit(on_exit_flush);
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	if (g->cfg.toggle_signal)
		install_toggle(g->cfg.toggle_signal);
out:
	errno = saved;
}
