/* lifecycle.c: the agent's life inside the host: configuration at load, a lazy start on the
 * first event (so programs that never record anything are left alone), the final flush and seal
 * at exit and on SIGTERM/SIGINT (only when the host has no handler of its own), the toggle signal,
 * and fork (the child starts a fresh agent; nothing it needs can be held by a vanished thread).
 * Nothing here may exit, abort or hang the host: every wait has a deadline. */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
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
	d9__log(D9_LOG_INFO, "tracing to %s/%s.%d.*", g->cfg.dir, g->cfg.stem, (int)g->pid);
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
