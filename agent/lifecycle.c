/* lifecycle.c: the agent's life inside the host: configuration at load, a lazy start on the
 * first event (so programs that never record anything are left alone), the seal at every way the
 * process ends (exit, _exit and exit_group through preload/libc-exit.c, fatal signals the host
 * leaves at their default action) and before exec, the toggle signal, and fork (the child starts
 * a fresh agent; nothing it needs can be held by a vanished thread). Nothing here may exit, abort
 * or hang the host: every wait has a deadline, and an exit waits at most D9_EXIT_TIMEOUT.
 * Design: agent/DESIGN.md, "Exit, signals, fork". */
#include "internal.h"
#include "symbolize.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

int d9__arena_init(void);
int d9__key_init(void);
void d9__record_child(void);
void d9__writer_child(void);
int d9__spawn_blocked(pthread_t *th, void *(*fn)(void *));
void d9__child_trace(void);
void d9__drop_profile(void);

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static int chroot_said; /* the stop at the program's chroot said why tracing ends */
/* a seccomp filter on every thread (TSYNC): tracing stopped for good, no start again (an exec
 * that fails, a forked child) */
static int seccomp_all;
/* a thread's filter is in: the writer appends the RecorderState (d9__seccomp_defs), which the
 * filtered thread cannot (the definitions' lock and memory may be calls); its text */
static int seccomp_pending; /* 0 none, 1 being written, 2 ready for the writer, 3 said */
static char seccomp_text[48]; /* the first filtered thread's (the trace says it once) */
static __thread char seccomp_mine[48] __attribute__((tls_model("initial-exec")));
static int seccomp_enabled; /* d9__enabled before a filter on every thread (back if refused) */
static __thread uint8_t seccomp_prev_busy __attribute__((tls_model("initial-exec")));

int d9__seccomp_defs(void)
{
	int ready = 2;
	if (!__atomic_compare_exchange_n(&seccomp_pending, &ready, 3, 0, __ATOMIC_ACQUIRE,
		    __ATOMIC_RELAXED))
		return 0;
	d9__defs_recorder(D9_REC_THREADS, D9_REC_LIMITED, 0, seccomp_text);
	return 1;
}
static uid_t prepared_euid = (uid_t)-1; /* the trace directory was checked for this user */
static uid_t refused_as; /* the user who refused it at a change of user before the start */

/* Creates an agent thread with every signal blocked, so host signals never land on it; the
 * compressor (compress.c) is started the same way. Its argument says whether this thread has a
 * descriptor table, root and working directory of its own, which the new thread shares until it
 * makes its own (d9__agent_thread: fdown.c, paths.c); it returns once the thread has, so that a
 * chroot() or chdir() of the program right after cannot reach the new thread (paths.c), or after
 * SPAWN_WAIT_MS: a thread that never gets that far (a seccomp filter that kills it, a debugger
 * holding it) must not hang the program's thread, which may hold the start lock. Then the
 * thread's root is not known to be its own (fs_shared). The wait is a raw futex: no
 * cancellation point, no interposed call. Returns 0 or a negative errno. */
#define SPAWN_WAIT_MS 2000

static void spawn_unref(struct d9__spawn *sp)
{
	if (__atomic_sub_fetch(&sp->refs, 1, __ATOMIC_ACQ_REL) == 0)
		d9__mem_free(sp);
}

int d9__spawn_blocked(pthread_t *th, void *(*fn)(void *))
{
	sigset_t all, old;
	struct d9__spawn *sp = d9__mem_alloc(sizeof(*sp));

	if (!sp)
		return -ENOMEM;
	*sp = (struct d9__spawn){ d9__self.fd_private, d9__self.fs_private, 0, 2 };
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	uint8_t busy = d9__self.busy;
	d9__self.busy = 1; /* the agent's thread, not the host's (preload/libc-direct.c) */
	int err = pthread_create(th, NULL, fn, sp);
	if (err) {
		d9__mem_free(sp);
	} else {
		uint64_t deadline = d9__mono_ns() + SPAWN_WAIT_MS * 1000000ull;
		while (!__atomic_load_n(&sp->ready, __ATOMIC_ACQUIRE)) {
			uint64_t now = d9__mono_ns();
			if (now >= deadline)
				break;
			struct timespec ts = { (time_t)((deadline - now) / 1000000000u),
				(long)((deadline - now) % 1000000000u) };
			syscall(SYS_futex, &sp->ready, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
		}
		if (!__atomic_load_n(&sp->ready, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&d9__g.fs_shared, 1, __ATOMIC_RELEASE);
			d9__log_once(D9_LOG_WARN, "an agent thread did not start within %d ms; a "
				"chroot of the program from now on stops tracing", SPAWN_WAIT_MS);
		}
		spawn_unref(sp);
	}
	d9__self.busy = busy;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

void d9__spawn_ready(struct d9__spawn *sp)
{
	__atomic_store_n(&sp->ready, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &sp->ready, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	spawn_unref(sp);
}

/* Sleeps in 1 ms steps until *flag is value or the monotonic deadline (async-signal-safe).
 * Returns 1 when the flag got there. */
static int wait_flag(const int *flag, int value, uint64_t deadline_ns)
{
	while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != value) {
		if (d9__mono_ns() >= deadline_ns)
			return 0;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return 1;
}

/* preload/ closes what is open on the exiting thread (the running coroutine's poll); absent in
 * programs that link the recording core without preload/ (the test driver). */
void d9__preload_at_exit(void) __attribute__((weak));
void d9__direct_sync(void) __attribute__((weak)); /* preload/libc-direct.c */
/* preload/runtimes.c: each runtime adapter looks for its runtime (runtime.h) */
void d9__runtimes_attach(void) __attribute__((weak));

/* Seals what the process wrote because it ends (exit, _exit, exit_group, a fatal signal) or
 * replaces its image (exec): the calling thread's chunk is handed off, the writer collects the
 * parked threads' chunks, writes everything, seals the segment and stops; this waits for that
 * at most D9_EXIT_TIMEOUT. Compression and symbolization are not waited for: the compressor drops
 * its job (its .bin stays, its temporary file goes: removed here, after a creation under way,
 * within the same deadline) and the next start or the analyzer finishes them. Safe in a signal
 * handler that interrupted anything: a thread caught inside the agent (busy) takes no lock and
 * waits by polling. Only the first caller seals; another thread ending
 * at the same time waits for that seal. ended: the running coroutine ends its poll here (exit,
 * _exit, exec: the program's own call); a fatal signal cuts it, and the trace says so by ending
 * with its open PollStart. Returns 1 when the writer stopped (sealed). */
static int seal_now(int ended)
{
	struct d9__agent *g = &d9__g;
	struct d9__thr *t = &d9__self;
	/* the most any way of ending adds to the process's exit (D9_EXIT_TIMEOUT, 100 ms): the
	 * writer's seal; compression and symbolization still pending are the next start's */
	uint64_t deadline = d9__mono_ns() + g->cfg.exit_timeout_ns;

	/* a vfork child shares our memory (and this thread's TLS) but not our pid: nothing here
	 * is its to touch */
	/* a thread under a seccomp filter makes no call: the writer seals at the next start
	 * (the segment stays .active; d9-analyze reads it as it is) */
	if (t->filtered)
		return 0;
	if (__atomic_load_n(&g->state, __ATOMIC_ACQUIRE) != D9__RUNNING_ || g->pid != getpid() ||
		t->role == D9_ROLE_AGENT)
		return 0;
	if (__atomic_exchange_n(&g->exit_done, 1, __ATOMIC_ACQ_REL))
		return wait_flag(&g->state, D9__STOPPED, deadline);
	int inside = t->busy;
	if (ended && !inside && d9__preload_at_exit)
		d9__preload_at_exit();
	t->busy = 1; /* from here on this thread records nothing */
	if (!inside && t->blk) {
		d9__unpark(t); /* e.g. _exit from a handler that interrupted a wait */
		d9__handoff(t);
	}
	if (!inside)
		/* events this thread could not record (no free block, at the end of a burst): the
		 * writer records the count after the chunks handed off above, before it sees stop
		 * (the same lock) */
		d9__drops_report_all(t);
	/* a pause or an exec goes on in this process: the threads' caches then end with them */
	if (ended)
		g->end_at = d9__now(); /* the last trailer says so (D9_TRAILER_ENDED) */
	__atomic_store_n(&g->stop_ended, ended, __ATOMIC_RELAXED);
	__atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
	/* first, so the compressor starts nothing (symbolizing loads libdw: CPU the exit would
	 * compete with) and drops what it has (its .bin stays; it makes no temporary file after
	 * this: d9__tmp_create). Also when none has started: the writer starts one itself (a
	 * forked child's first seal, D9_COMPRESS=0 with symbols) and may be doing so now; that one
	 * then finds the abort before its first job, and the wait below covers a file it makes */
	__atomic_store_n(&g->compress_stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&g->compress_abort, 1, __ATOMIC_SEQ_CST);
	/* the writer first (it takes no lock): also from a thread inside the agent, or a signal
	 * handler; the compressor's wake may wait for disk_lock, which the writer's seal takes */
	d9__writer_wake();
	d9__tmp_abandon(deadline); /* after the wake: its wait is the writer's sealing time */
	if (g->compressor_started && !inside)
		d9__compressor_wake(deadline); /* a pause joins it (join_threads) */
	int sealed = 0, waited = 0;
	if (!inside) {
		/* woken by the writer's last broadcast (no polling delay at every child's exit); a
		 * thread inside the agent may hold the pool lock: then it polls */
		struct timespec until = d9__timespec(deadline);
		if (pthread_mutex_clocklock(&g->pool_lock, CLOCK_MONOTONIC, &until) == 0) {
			while (g->state != D9__STOPPED &&
				pthread_cond_timedwait(&g->done_cond, &g->pool_lock, &until) != ETIMEDOUT)
				;
			sealed = g->state == D9__STOPPED;
			waited = 1;
			d9__unlock(&g->pool_lock);
		}
	}
	if (!waited)
		sealed = wait_flag(&g->state, D9__STOPPED, deadline);
	if (!sealed)
		/* once for a server's forked processes (PostgreSQL's backends said it each) */
		d9__log_tree_once(D9__SAID_EXIT_TIMEOUT, D9_LOG_WARN, "the writer did not seal "
			"within D9_EXIT_TIMEOUT (%llu ms) of the exit (a busy machine): what it had "
			"written stays .active (d9-analyze reads it; the next start recovers it), what "
			"it had not written yet is lost, and no trailer counts it",
			(unsigned long long)(g->cfg.exit_timeout_ns / 1000000u));
	return sealed;
}

/* atexit: return from main, exit(), the runtime's own exit. */
static void on_exit_flush(void)
{
	int saved = errno;

	seal_now(1);
	errno = saved;
}

void d9_agent_process_end(void)
{
	int saved = errno;

	seal_now(1);
	errno = saved;
}

/* Before exec: sealed like an exit, since the new image starts a new agent (or none). */
int d9_agent_exec_begin(void)
{
	int saved = errno;
	int r = seal_now(1);

	errno = saved;
	return r;
}

void d9_agent_exec_untraced(const char *what, const char *why)
{
	struct d9__agent *g = &d9__g;
	int saved = errno;
	char text[96];

	/* a vfork child shares our memory but is not this process: nothing of its to record */
	if (g->state == D9__OFF || g->state == D9__FAILED || g->pid != getpid())
		goto out;
	const char *base = what ? strrchr(what, '/') : NULL;
	snprintf(text, sizeof(text), "%.40s: %s", base ? base + 1 : what ? what : "?", why);
	/* once for the tree: a traced script's children that each exec a set-user-ID program */
	d9__log_tree_once(D9__SAID_EXEC, D9_LOG_WARN, "%s will start in secure-execution mode (%s): "
		"the loader ignores LD_PRELOAD's paths there, so d9 does not trace it (said once; "
		"README: Secure execution)", what ? what : "a program", why);
	d9__defs_recorder(D9_REC_EXEC, D9_REC_OFF, 0, text);
	/* into a segment even where nothing else was recorded (squid's master only forks and
	 * waits): the writer opens one for it at the seal (writer.c) */
	__atomic_store_n(&g->exec_note, 1, __ATOMIC_RELEASE);
	if (g->state == D9__CONFIGURED && d9__enabled)
		d9__start();
out:
	errno = saved;
}

/* After a seal that stopped them (start lock held): joins the writer, and the compressor within
 * the exit timeout. The compressor, told to stop by the seal, drops its job; if it is still leaving
 * after that, no new one is started (two would race), and the segments stay .bin for the next
 * start. */
static void join_threads(void)
{
	struct d9__agent *g = &d9__g;

	if (g->writer_started)
		pthread_join(g->writer, NULL); /* it returned when it stopped */
	g->writer_started = 0;
	if (!g->compressor_started) /* the seal's stop was for a compressor the writer might start */
		g->compress_stop = g->compress_abort = g->compressor_done = 0;
	if (g->compressor_started) {
		uint64_t until = d9__mono_ns() + g->cfg.exit_timeout_ns;
		struct timespec ts = d9__timespec(until);
		if (pthread_clockjoin_np(g->compressor, NULL, CLOCK_MONOTONIC, &ts) == 0) {
			g->compressor_started = 0;
			g->compress_stop = g->compress_abort = g->compressor_done = 0;
		}
	}
}

/* Before unshare/setns calls that a multi-threaded process may not make (a new user or mount
 * namespace): the agent seals and its threads end, so the call sees the host's threads only.
 * Returns 1 when it did (then d9_agent_resume after the call). */
int d9_agent_pause(void)
{
	int saved = errno, r = 0, cancel;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	__atomic_store_n(&d9__g.pausing, 1, __ATOMIC_RELEASE);
	if (seal_now(0)) {
		d9__lock(&start_lock);
		join_threads();
		d9__unlock(&start_lock);
		r = 1;
	}
	__atomic_store_n(&d9__g.pausing, 0, __ATOMIC_RELEASE);
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return r;
}

void d9_agent_resume(void)
{
	d9_agent_exec_failed();
}

/* The exec failed: the agent starts again as at the first event (a new writer, a new segment). */
void d9_agent_exec_failed(void)
{
	struct d9__agent *g = &d9__g;
	int saved = errno;

	if (d9__self.filtered || seccomp_all || g->pid != getpid() || g->state != D9__STOPPED ||
		d9__self.role == D9_ROLE_AGENT)
		goto out;
	d9__lock(&start_lock);
	join_threads();
	g->stop = 0;
	g->exit_done = 0;
	/* the new writer lists the series again (scan_series), sealed segments included */
	d9__lock(&g->disk_lock);
	g->nsealed = 0;
	d9__unlock(&g->disk_lock);
	memset(&g->seg, 0, sizeof(g->seg));
	g->seg.f.fd = -1;
	__atomic_store_n(&g->state, D9__CONFIGURED, __ATOMIC_RELEASE);
	d9__unlock(&start_lock);
	d9__self.busy = 0;
out:
	errno = saved;
}

/* The signals whose default action ends the process and that a handler can catch. A fault
 * (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS raised by the kernel) is sealed, then the handler
 * returns with the default action back: the faulting instruction runs again and the process
 * dies by it as it would have, core dump included. SIGTRAP is left to debuggers, SIGPROF and the
 * agent's own signals to their owners, real-time signals alone. */
static const int fatal_sigs[] = {
	SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGUSR1, SIGSEGV, SIGUSR2,
	SIGPIPE, SIGALRM, SIGTERM, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGSYS, SIGPWR,
};

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)uc;
	seal_now(0); /* nothing on a thread under a seccomp filter (the calls below may then be
		      * ones it kills at: the process ends by SIGSYS instead) */
	/* SA_RESETHAND put the default action back on entry */
	int fault = sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGSYS;
	if (!(fault && si && si->si_code > 0)) {
		signal(sig, SIG_DFL);
		raise(sig); /* blocked until this handler returns, then the default action */
	}
	errno = saved;
}

/* Installs the sealing handler for every fatal signal the host leaves at its default action
 * (a handler the host installs later replaces it; one it installed earlier is never touched). */
static void install_fatal_handlers(void)
{
	const struct d9__config *c = &d9__g.cfg;

	for (size_t i = 0; i < sizeof(fatal_sigs) / sizeof(fatal_sigs[0]); i++) {
		int sig = fatal_sigs[i];
		struct sigaction old, sa;
		if (sig == c->toggle_signal || sig == c->profile_signal || sig == c->dump_signal ||
			sigaction(sig, NULL, &old) != 0)
			continue;
		if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
			continue; /* the host's own handler (or SIG_IGN) stays */
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_fatal;
		sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
		sigemptyset(&sa.sa_mask);
		sigaction(sig, &sa, NULL);
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

static int toggle_installed; /* the agent's handler went in (install_toggle) */

/* Writer, at each periodic pass: the program set its own disposition for the toggle signal
 * after the agent installed its handler (PostgreSQL's SIGHUP handler for its reload comes after
 * the agent's start): toggling is gone, said once, as at the start when the program had one. */
void d9__toggle_check(void)
{
	struct sigaction cur;
	int sig = d9__g.cfg.toggle_signal;

	if (!__atomic_load_n(&toggle_installed, __ATOMIC_ACQUIRE) || sigaction(sig, NULL, &cur) != 0 ||
		(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_toggle))
		return;
	__atomic_store_n(&toggle_installed, 0, __ATOMIC_RELEASE);
	d9__log(D9_LOG_WARN, "D9_TOGGLE_SIGNAL: the program set its own handling of signal %d after "
		"d9 started; toggling is off", sig);
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
	if (sigaction(sig, &sa, NULL) == 0)
		__atomic_store_n(&toggle_installed, 1, __ATOMIC_RELEASE);
}

int d9__start(void)
{
	struct d9__agent *g = &d9__g;
	int err = 0, cancel;

	if (__atomic_load_n(&g->state, __ATOMIC_ACQUIRE) == D9__RUNNING_)
		return 0;
	/* a cancellation point inside (the program's pending cancel) must not end the thread
	 * with the start lock held */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	d9__lock(&start_lock);
	if (g->state == D9__RUNNING_)
		goto out;
	if (g->state != D9__CONFIGURED) {
		err = -1;
		goto out;
	}
	if (__atomic_load_n(&g->chrooted, __ATOMIC_ACQUIRE)) {
		/* its threads would start in the program's new root, where the trace directory's
		 * name means another directory (one d9 would be making inside the program's jail);
		 * a stop at the chroot said so already */
		if (!chroot_said)
			d9__log_once(D9_LOG_WARN, "the program changed its root directory (chroot) "
				"and d9 was not running in this process then (a process forked after it, "
				"or a restart after a pause); tracing is off");
		goto fail;
	}
	/* a forked child of a running agent, same user: its parent made and checked the directory
	 * (a directory removed since is made again when a segment cannot be created) */
	if (!(g->forked && prepared_euid == geteuid()) && (err = d9__trace_dir_prepare(&g->cfg, 0)) != 0) {
		/* it said why; and why root refused it at an earlier change of user, which is often
		 * the cause (squid, with the directory's parent writable by others, said only
		 * "Permission denied" here, as its new user) */
		const char *before = d9__trace_dir_refusal();
		if (before)
			d9__log(D9_LOG_ERROR, "before that, at the program's change of user, as uid %u: %s",
				(unsigned)refused_as, before);
		goto fail;
	}
	prepared_euid = geteuid();
	if ((err = d9__arena_init()) != 0) {
		d9__log(D9_LOG_ERROR, "cannot reserve %llu bytes of buffers: %s; tracing is off",
			(unsigned long long)g->cfg.max_memory, strerror(-err));
		goto fail;
	}
	g->seg.f.fd = -1;
	d9__clock_calibrate_start();
	/* before the writer reads it: D9_COMPRESS=auto gzips every segment where little is
	 * written (flight dumps) or everything is uploaded (gzipped objects); only a continuous
	 * local trace waits for the budget to need it */
	if (g->cfg.compress == D9_COMPRESS_AUTO &&
		(g->cfg.flight || (d9__s3_configured && d9__s3_configured())))
		g->cfg.compress = D9_COMPRESS_ON;
	if ((err = d9__spawn_blocked(&g->writer, d9__writer_main)) != 0) {
		d9__log(D9_LOG_ERROR, "cannot start the writer thread: %s; tracing is off", strerror(-err));
		goto fail;
	}
	g->writer_started = 1;
	/* a forked child's compressor starts at its first seal (compress.c): a short-lived child
	 * never needs one */
	if (g->cfg.compress && !g->forked && !g->compressor_started &&
		d9__spawn_blocked(&g->compressor, d9__compressor_main) == 0)
		g->compressor_started = 1;
	install_fatal_handlers();
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
	pthread_setcancelstate(cancel, NULL);
	return err;
}

/* Waits on done_cond (pool lock held) until pred() or the deadline. Returns 0 or -ETIMEDOUT. */
static int wait_writer(int (*pred)(void *), void *arg, int timeout_ms)
{
	struct d9__agent *g = &d9__g;
	uint64_t deadline = d9__mono_ns() + (uint64_t)timeout_ms * 1000000u;
	struct timespec until = d9__timespec(deadline);

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

int d9_agent_flush(int timeout_ms)
{
	struct d9__agent *g = &d9__g;

	if (g->state != D9__RUNNING_ || d9__self.busy)
		return 0;
	d9__self.busy = 1; /* to the end: the waits below are not the host's */
	d9__unpark(&d9__self);
	d9__handoff(&d9__self);
	d9__lock(&g->pool_lock);
	/* two passes after the one under way: the first collects every thread's chunk, the
	 * second comes at the first hand-off of a running thread, or 50 ms later (writer.c) */
	uint64_t target = g->passes + 2 + (uint64_t)g->in_pass;
	g->flush_req = 1;
	g->flush_waiters++; /* the threads' hand-offs wake the writer at once (d9__queue_push) */
	d9__writer_wake();
	int err = wait_writer(passes_reached, &target, timeout_ms);
	g->flush_waiters--;
	d9__unlock(&g->pool_lock);
	d9__self.busy = 0;
	return err;
}

int d9_agent_active(void)
{
	int s = d9__g.state;

	return s == D9__CONFIGURED || s == D9__RUNNING_;
}

/* ---- privilege drops (agent/DESIGN.md, "Privilege drops") ------------------------------------ */

/* How long a privilege drop waits for the writer to seal the open segment and move to the
 * prepared directory (the host's setuid waits that long at most, once). */
#define DIR_SWITCH_WAIT_MS 5000

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
	/* not started yet: the directory is made (0700, ours) now, with the start's checks; not
	 * after a chroot, where the start refuses (and says why). A refusal keeps its reason:
	 * the start, as the new user, checks again (a trace directory in a directory of that
	 * user's is fine for it: BIND's as its tests run it), and says it if it fails too */
	if (st == D9__CONFIGURED && __atomic_load_n(&g->chrooted, __ATOMIC_ACQUIRE))
		goto out;
	if (st == D9__CONFIGURED && d9__trace_dir_prepare(&g->cfg, 2) != 0) {
		refused_as = geteuid();
		goto out;
	}
	int err = d9__trace_dir_for_uid(&g->cfg, euid);
	if (err < 0) {
		d9__log_once(D9_LOG_WARN, "cannot prepare a trace directory for uid %u in %s (%s%s): "
			"what the process records after it changes user is lost", (unsigned)euid,
			d9__trace_dir_shown(&g->cfg), strerror(-err), err == -EOPNOTSUPP ?
			"; the program gave up CAP_CHOWN, and this file system keeps no ACLs to let "
			"that user in instead" : "");
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
	d9__writer_wake();
	if (wait_writer(dir_switched, NULL, DIR_SWITCH_WAIT_MS) != 0)
		d9__log_once(D9_LOG_WARN, "the writer did not move to the new trace directory within %d "
			"ms; the open segment may stay .active", DIR_SWITCH_WAIT_MS);
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
	if (!d9__call_survives(SYS_perf_event_open))
		return 0; /* an inherited seccomp filter that kills at it: profile.c's perf_open */
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
			/* as profile.c's own: closed only while it is still this perf event (another
			 * of the program's threads may sweep and reuse numbers meanwhile) */
			struct stat st;
			uint64_t id;
			if (!d9__perf_adopt(fd, &st, &id)) {
				d9__fd_close(fd);
				d9__fd_leave(fd);
			}
			return flags;
		}
		if (errno != EACCES && errno != EPERM)
			return flags; /* not a matter of privileges (ENOSYS, ENOENT): as before the drop */
		flags |= user_only ? D9_PRIV_PERF_DENIED : D9_PRIV_KERNEL_SAMPLES_LOST;
	}
	return flags;
}

/* Whether the program's new root shows a /proc: through /proc/self/task/<tid>/root the program
 * could reach the agent's threads' root, outside its jail. */
static int new_root_has_proc(void)
{
	struct statfs fs;

	return statfs("/proc", &fs) == 0 && (unsigned long)fs.f_type == PROC_SUPER_MAGIC;
}

/* Stops tracing for good at the program's chroot, with the reason (once): sealed as at an exit
 * (not a pause: no start follows, so what the other threads still hold in their blocks is
 * counted as lost) and the agent's threads joined; the caller closes the trace directory's
 * descriptors. Called on the program's thread, not busy (its own open turn is handed off),
 * before the chroot (token 2: started again if the call fails) or after it. */
static void chroot_stop(const char *why)
{
	chroot_said = 1;
	d9__log_once(D9_LOG_WARN, "the program changes its root directory (chroot): %s; tracing "
		"stops here", why);
	/* in the segment the stop seals: the trace says it too (dovecot's login processes stopped
	 * with nothing in theirs) */
	if (__atomic_load_n(&d9__g.state, __ATOMIC_ACQUIRE) == D9__RUNNING_)
		d9__defs_recorder(D9_REC_CHROOT, D9_REC_OFF, 0, "the program's chroot (D9_CHROOT=stop)");
	if (seal_now(0)) {
		d9__lock(&start_lock);
		join_threads();
		d9__unlock(&start_lock);
	}
}

int d9_agent_chroot_before(void)
{
	struct d9__agent *g = &d9__g;
	struct d9__thr *t = &d9__self;
	char why[PATH_MAX + 160];
	int token = 0, cancel;

	/* (a vfork child: see d9_agent_creds_before) */
	if (!d9_agent_active() || t->busy || t->role == D9_ROLE_AGENT || g->pid != getpid())
		return 0;
	int saved = errno;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	t->busy = 1;
	why[0] = 0;
	if (!g->cfg.chroot_follow) {
		snprintf(why, sizeof(why), "D9_CHROOT=stop, the default (agent/DESIGN.md, chroot)");
	} else {
		/* a forked child's agent would start at its first event, in the new root by then;
		 * not while tracing is toggled off (D9_ENABLED=0) */
		if (__atomic_load_n(&g->state, __ATOMIC_ACQUIRE) == D9__CONFIGURED &&
			!__atomic_load_n(&g->chrooted, __ATOMIC_ACQUIRE) &&
			__atomic_load_n(&d9__enabled, __ATOMIC_RELAXED))
			d9__start();
		d9__lock(&start_lock);
		if (g->state == D9__RUNNING_) {
			int err = d9__trace_dir_anchor(&g->cfg);
			token = 1;
			if (__atomic_load_n(&g->fs_shared, __ATOMIC_ACQUIRE))
				snprintf(why, sizeof(why), "d9's threads could not keep a root of their "
					"own (a seccomp filter, or a thread that did not start in time)");
			else if (err < 0)
				snprintf(why, sizeof(why), "cannot hold the trace directory %s (%s)",
					d9__trace_dir_shown(&g->cfg), strerror(-err));
			else if (err > 0)
				/* its descriptor in the program's table would lead out of the jail */
				snprintf(why, sizeof(why), "the trace directory %s is open to other "
					"users (mode %o, not 0700)", d9__trace_dir_shown(&g->cfg),
					(unsigned)err);
		}
		d9__unlock(&start_lock);
	}
	t->busy = 0;
	int st = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
	if (why[0] && st != D9__OFF && st != D9__FAILED) {
		chroot_stop(why); /* before the call: the seal still sees the trace directory */
		token = 2;
	}
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return token;
}

void d9_agent_chroot_after(int token, int ok)
{
	struct d9__agent *g = &d9__g;
	struct d9__thr *t = &d9__self;
	int cancel;

	if (d9__calls_off() || t->role == D9_ROLE_AGENT || g->pid != getpid())
		return;
	int saved = errno;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	if (!ok) {
		if (token == 2)
			d9_agent_resume(); /* the call failed: nothing changed */
	} else {
		int stopped = token == 2;
		__atomic_store_n(&g->chrooted, 1, __ATOMIC_RELEASE);
		if (token == 1 && new_root_has_proc()) {
			chroot_stop("the new root has a /proc, through which the program could reach "
				"the root d9's threads keep outside it");
			stopped = 1;
		}
		/* nothing of the agent's uses them from now on (a pause whose writer did not end in
		 * time has given up on it too) */
		if (stopped || __atomic_load_n(&g->state, __ATOMIC_ACQUIRE) != D9__RUNNING_)
			d9__trace_dir_release();
	}
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
}

/* ---- seccomp filters (agent/DESIGN.md, "Seccomp filters") ------------------------------------- */

int d9_agent_seccomp_before(int tsync)
{
	struct d9__agent *g = &d9__g;
	struct d9__thr *t = &d9__self;
	int token = 0, cancel;

	/* a thread filtered already can make no call of the agent's (a second filter, or one on
	 * every thread from it, is beyond what the agent can prepare for: agent/DESIGN.md); an
	 * agent thread or a vfork child have nothing to prepare. (A busy thread is one a stop left
	 * busy, a chroot's or an exit's: the program's call, never the agent's own) */
	if (d9__calls_off() || t->role == D9_ROLE_AGENT || g->pid != getpid())
		return 0; /* (calls off: also a second filter after one on every thread) */
	int saved = errno;
	int st = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
	if (st != D9__CONFIGURED && st != D9__RUNNING_) {
		/* not tracing (off, failed, stopped): nothing to say, and still no call on it (what
		 * it still holds, a ctimer, its place in the registry, ended now); every thread's:
		 * no call anywhere, and none again (seccomp_all on success) */
		seccomp_prev_busy = t->busy;
		if (t->registered || t->prof)
			d9__thread_quit();
		t->filtered = t->busy = 1;
		if (tsync) {
			__atomic_store_n(&d9__no_calls, 1, __ATOMIC_RELEASE);
			return 5;
		}
		return 4;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	if (tsync) {
		d9__log_once(D9_LOG_WARN, "the program installs a seccomp filter on every thread "
			"(SECCOMP_FILTER_FLAG_TSYNC), which may kill the process at a system call it "
			"does not list, d9's own included: tracing stops here");
		d9__defs_recorder(D9_REC_THREADS, D9_REC_OFF, 0, "seccomp filter on every thread");
		/* the program's other threads: no new event, and what is under way makes no call */
		seccomp_enabled = __atomic_load_n(&d9__enabled, __ATOMIC_RELAXED);
		__atomic_store_n(&d9__no_calls, 1, __ATOMIC_RELEASE);
		/* a start under way on another thread finishes first, and none follows */
		d9__lock(&start_lock);
		st = g->state;
		if (st == D9__CONFIGURED)
			__atomic_store_n(&g->state, D9__STOPPED, __ATOMIC_RELEASE);
		d9__unlock(&start_lock);
		if (st == D9__RUNNING_) {
			/* the agent's threads must be gone before the filter: seconds for the seal,
			 * not the exit's deadline (a thread still running after it is said) */
			seal_now(0);
			if (wait_flag(&g->state, D9__STOPPED, d9__mono_ns() + 5000000000ull)) {
				d9__lock(&start_lock);
				join_threads();
				if (g->compressor_started) {
					struct timespec ts = d9__timespec(d9__mono_ns() + 5000000000ull);
					if (pthread_clockjoin_np(g->compressor, NULL, CLOCK_MONOTONIC, &ts) == 0)
						g->compressor_started = 0;
				}
				d9__unlock(&start_lock);
			}
			if (g->writer_started || g->compressor_started)
				d9__log(D9_LOG_WARN, "d9's %s did not end before the seccomp filter: it may "
					"be killed at its next system call", g->writer_started ? "writer" :
					"compressor");
		}
		__atomic_store_n(&g->state, D9__STOPPED, __ATOMIC_RELEASE);
		token = st == D9__RUNNING_ ? 2 : 3;
	} else {
		char name[16] = "";
		pthread_getname_np(pthread_self(), name, sizeof(name));
		int tid = (int)syscall(SYS_gettid);
		d9__log_once(D9_LOG_WARN, "thread %d (%s) installs a seccomp filter, which may kill it "
			"at a system call it does not list, d9's own included: d9 records nothing more "
			"on it, nor on the threads and processes it starts (said once)", tid, name);
		/* the trace says it once the filter is in (the writer: d9__seccomp_defs) */
		snprintf(seccomp_mine, sizeof(seccomp_mine), "seccomp filter: thread %d (%s)", tid, name);
		/* what it recorded on disk now: an exit from it will not seal (calls) */
		d9_agent_flush(100);
		d9__thread_quit(); /* its chunk to the writer, out of the registry, busy */
		t->filtered = 1;
		token = 1;
	}
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return token;
}

void d9_agent_seccomp_after(int token, int ok)
{
	struct d9__agent *g = &d9__g;
	struct d9__thr *t = &d9__self;

	if (!token)
		return;
	if (ok) {
		if (token == 2 || token == 3 || token == 5) { /* no call of the agent's from here */
			seccomp_all = 1;
			__atomic_store_n(&d9__enabled, 0, __ATOMIC_RELAXED);
		} else if (token == 1) {
			/* memory only: the first filtered thread's text, published for the writer */
			int none = 0;
			if (__atomic_compare_exchange_n(&seccomp_pending, &none, 1, 0, __ATOMIC_ACQ_REL,
				    __ATOMIC_RELAXED)) {
				memcpy(seccomp_text, seccomp_mine, sizeof(seccomp_text));
				__atomic_store_n(&seccomp_pending, 2, __ATOMIC_RELEASE);
			}
		}
		return;
	}
	/* the call failed (no filter: the kernel said why): as before it */
	int saved = errno;
	if (token == 4 || token == 5) {
		t->filtered = 0;
		t->busy = seccomp_prev_busy;
		if (token == 5)
			__atomic_store_n(&d9__no_calls, 0, __ATOMIC_RELEASE);
	} else if (token == 1) {
		t->filtered = 0;
		d9__thread_unquit();
		d9__log(D9_LOG_WARN, "the seccomp filter of thread %d was not installed (%s): d9 records "
			"on it again", (int)syscall(SYS_gettid), strerror(saved));
	} else if (token == 2 || token == 3) {
		__atomic_store_n(&d9__no_calls, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&d9__enabled, seccomp_enabled, __ATOMIC_RELAXED);
		if (token == 2)
			d9_agent_resume();
		else
			__atomic_store_n(&g->state, D9__CONFIGURED, __ATOMIC_RELEASE);
		d9__log(D9_LOG_WARN, "the seccomp filter on every thread was not installed (%s): d9 "
			"traces again", strerror(saved));
	}
	errno = saved;
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
	/* a vfork child (the parent's memory, its own descriptors): the exec that follows starts
	 * its own agent; nothing of the parent's is changed here */
	if (d9__g.pid != getpid())
		return 0;
	int saved = errno, cancel;
	/* no cancellation point of the program's pending cancel inside, with the start lock held */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	t->busy = 1;
	perf_before = perf_narrowed();
	const struct d9__config *c = &d9__g.cfg;
	if (geteuid() == 0 && (c->cpu_hz || c->sched_events) && !t->prof && d9__enabled &&
		!d9__calls_off())
		d9__drop_profile(); /* its perf events while it may: record.c */
	int token = dir_for((uid_t)euid);
	t->busy = 0;
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return token;
}

void d9_agent_creds_after(int token, unsigned from_euid, int ok)
{
	struct d9__thr *t = &d9__self;

	if (!d9_agent_active() || t->busy || t->role == D9_ROLE_AGENT || d9__g.pid != getpid())
		return; /* (a vfork child: see d9_agent_creds_before) */
	uid_t now = geteuid();
	int saved = errno, cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	t->busy = 1;
	if (!ok || now == (uid_t)from_euid) {
		if (token)
			dir_for(now); /* the call failed: back to where this user writes */
		else if (ok && d9__g.state == D9__RUNNING_ && now != 0 &&
			 !__atomic_load_n(&d9__g.chrooted, __ATOMIC_ACQUIRE) &&
			 faccessat(AT_FDCWD, d9__g.cfg.dir, W_OK | X_OK, AT_EACCESS) != 0)
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
		d9__log_tree_once(D9__SAID_PRIV_PERF, D9_LOG_WARN, "privileges dropped (uid %u -> %u): "
			"perf_event_open is denied from now on; threads profiled from now on get no "
			"perf samples (the trace says so)", from_euid, (unsigned)now);
	else if ((flags & D9_PRIV_KERNEL_SAMPLES_LOST) && !d9__g.cfg.cpu_hz)
		/* D9_SCHED_EVENTS alone: what the drop takes is the off-CPU samples themselves */
		d9__log_tree_once(D9__SAID_PRIV_KERNEL, D9_LOG_WARN, "privileges dropped (uid %u -> %u): "
			"threads profiled from now on get no off-CPU samples (D9_SCHED_EVENTS needs "
			"perf_event_paranoid <= 1 or CAP_PERFMON); the trace says so", from_euid,
			(unsigned)now);
	else if (flags & D9_PRIV_KERNEL_SAMPLES_LOST)
		d9__log_tree_once(D9__SAID_PRIV_KERNEL, D9_LOG_WARN, "privileges dropped (uid %u -> %u): "
			"CPU samples of threads profiled from now on have no kernel frames "
			"(perf_event_paranoid); the trace says so", from_euid, (unsigned)now);
out:
	t->busy = 0;
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
}

/* ---- the loader and fork ---------------------------------------------------------------------
 * glibc does not reset the loader's write lock (dl_load_write_lock) in a forked child: a thread
 * inside dl_iterate_phdr, or in the part of dlopen/dlclose that changes the list of objects, at
 * the moment of a fork leaves it held for ever in the child. Every dl_iterate_phdr, dlopen and
 * dlclose of the agent goes through loader_mu, and the fork waits for it: no agent thread is
 * inside the loader when a fork copies the process. (The writer's module scan did: a forked
 * worker hung at its first C++ throw, dlopen or exit.) */
static pthread_mutex_t loader_mu = PTHREAD_MUTEX_INITIALIZER;
static int loader_forking; /* fork_prepare took loader_mu */
static int defs_forking; /* fork_prepare took the definitions lock */

/* The longest a fork waits for an agent thread's loader call: a scan takes microseconds, a
 * dlopen milliseconds of CPU. It is reached when that call waits for the fork itself (a library
 * constructor that calls pthread_atfork, or a host thread's dlopen/dlclose that does and holds
 * the loader's main lock meanwhile: glibc holds its atfork lock during the fork's handlers),
 * and then the call is not in the loader's write-locked part, so the fork goes on without the
 * gate; or when the caller, at nice 19 (the compressor loading libdw, the uploader libcurl),
 * gets too little CPU on a saturated machine. Each happens at most once per library and
 * process; a 2 s stall of one fork, never a hang. */
#define LOADER_FORK_WAIT_NS 2000000000ull

void d9__loader_enter(void)
{
	d9__lock(&loader_mu);
}

void d9__loader_leave(void)
{
	d9__unlock(&loader_mu);
}

void *d9__dlopen(const char *path, int flags)
{
	d9__loader_enter();
	void *h = dlopen(path, flags);
	d9__loader_leave();
	return h;
}

void d9__dlclose(void *h)
{
	d9__loader_enter();
	dlclose(h);
	d9__loader_leave();
}

int d9__dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
	d9__loader_enter();
	int r = dl_iterate_phdr(cb, arg);
	d9__loader_leave();
	return r;
}

/* The loader gate first, then the definitions lock: the writer takes them in that order (its
 * module scan defines modules inside dl_iterate_phdr). Both within one deadline: a thread that
 * holds the definitions lock may be waiting in malloc for an allocator that the program's own
 * fork handler has locked already (one registered after ours runs before it: a malloc linked
 * into the executable, tcmalloc's or mimalloc's way), and would never let go of it. Then the
 * fork goes on without the lock after LOADER_FORK_WAIT_NS, and the child, whose copy of the
 * definitions may be half-written, is not traced (fork_child). */
static __thread int fork_skipped __attribute__((tls_model("initial-exec")));

static void fork_prepare(void)
{
	fork_skipped = d9__self.filtered || seccomp_all;
	if (fork_skipped)
		return; /* no lock taken (a wait is a call the filter may kill at): fork_child */
	struct timespec until = d9__timespec(d9__mono_ns() + LOADER_FORK_WAIT_NS);
	uint8_t busy = d9__self.busy;

	d9__self.busy = 1;
	d9__schedstat_fork_prepare();
	loader_forking = pthread_mutex_clocklock(&loader_mu, CLOCK_MONOTONIC, &until) == 0;
	defs_forking = pthread_mutex_clocklock(&d9__g.def_lock, CLOCK_MONOTONIC, &until) == 0;
	d9__self.busy = busy;
}

static void fork_parent(void)
{
	if (fork_skipped)
		return; /* fork_prepare took nothing */
	d9__schedstat_fork_parent();
	if (defs_forking)
		d9__unlock(&d9__g.def_lock);
	defs_forking = 0;
	if (loader_forking)
		d9__unlock(&loader_mu);
	loader_forking = 0;
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
	/* the forking thread recorded in a running agent: the child's work (a BGSAVE that never
	 * enters a loop, a worker that will) is traced from here */
	int trace = g->state == D9__RUNNING_ && d9__self.registered && d9__self.role != D9_ROLE_AGENT;
	int defs_ok = defs_forking;

	if (d9__self.filtered || seccomp_all) {
		/* the child has the forking thread's seccomp filter: the agent is off in it and makes
		 * no call (its descriptors stay open, close-on-exec, as the parent's were) */
		g->state = D9__OFF;
		d9__enabled = 0;
		return;
	}

	d9__fd_child(); /* before any descriptor of the agent's is used or closed */
	d9__mem_child(); /* the adapters allocate in the child even when it is not traced */
	d9__schedstat_child(); /* the parent's threads' schedstat files */
	pthread_mutex_init(&g->def_lock, NULL);
	pthread_mutex_init(&loader_mu, NULL);
	loader_forking = defs_forking = 0;
	if (__atomic_load_n(&g->chrooted, __ATOMIC_ACQUIRE)) {
		/* the child's agent cannot start (d9__start): what it holds of the trace directory
		 * is let go (its lock made anew first: the parent's other threads are gone) */
		d9__paths_child();
		d9__trace_dir_release();
	}
	if (g->state == D9__OFF || g->state == D9__FAILED)
		return;
	if (g->writer_private)
		g->seg.f.fd = -1; /* in the parent's writer's own table, which the child has not */
	else
		d9__file_close(&g->seg.f); /* the parent's segment, if the child still has it */
	if (!defs_ok) {
		/* the fork did not get the definitions lock (fork_prepare): nothing of the agent's
		 * is trusted in this child, which runs untraced */
		g->state = D9__FAILED;
		d9__enabled = 0;
		d9__log(D9_LOG_WARN, "a fork waited %llu ms for the agent's definitions lock (a thread "
			"holding it waits for the program's allocator, locked by its own fork handler); "
			"child %d is not traced", (unsigned long long)(LOADER_FORK_WAIT_NS / 1000000u),
			(int)getpid());
		return;
	}
	memset(&g->seg, 0, sizeof(g->seg));
	g->seg.f.fd = -1;
	g->next_seq = 0;
	g->writer_started = g->compressor_started = 0;
	g->compress_stop = 0;
	g->compress_abort = 0;
	g->compressor_done = 0;
	g->tmp_live = 0; /* the parent's compressor's file, not ours to remove */
	g->tmp_creating = 0;
	g->write_failing = 0;
	g->exit_done = 0;
	g->dir_switch = 0; /* a drop in progress in the parent is the parent's (the child has no writer) */
	disk_init();
	g->nsealed = 0; /* the parent's list; the child's series is its own */
	g->pid = getpid();
	g->forked = 1;
	d9__defs_child();
	d9__record_child();
	d9__writer_child();
	d9__coroutines_child();
	d9__symbolize_child();
	pthread_mutex_init(&start_lock, NULL);
	g->state = g->state == D9__STOPPED ? D9__STOPPED : D9__CONFIGURED;
	if (g->state == D9__STOPPED) {
		d9__enabled = 0;
		return;
	}
	if (!d9__enabled)
		return;
	d9__fd_table_grow(); /* the only thread now: no RCU wait (files.c) */
	if (trace && (g->cfg.cpu_hz || g->cfg.sched_events))
		d9__child_trace(); /* samples need the writer from the start */
	else if (trace && g->cfg.pre.blocking)
		d9__self.traced = 1; /* its first BlockingCall starts the agent; an exec, nothing */
}

uint32_t *d9__tree_said;

/* d9__init in secure execution: off, and said when the environment names a D9_ variable */
static __attribute__((noinline, cold)) void secure_off(void)
{
	for (char **e = environ; e && *e; e++)
		if (!strncmp(*e, "D9_", 3)) {
			/* the level is the default's: D9_LOG is the caller's too */
			d9__log(D9_LOG_WARN, "this program runs in secure-execution mode (set-user-ID, "
				"set-group-ID, file capabilities, or real and effective ids that differ): "
				"its environment is not trusted, so d9 reads no D9_ variable and does not "
				"trace it");
			return;
		}
}

__attribute__((constructor)) static void d9__init(void)
{
	struct d9__agent *g = &d9__g;
	int saved = errno;

	g->state = D9__OFF;
	d9__enabled = 0;
	if (getauxval(AT_SECURE)) {
		/* secure execution: a set-user-ID or set-group-ID program, file capabilities, or a
		 * parent whose real and effective ids differ. The loader ignores LD_PRELOAD's paths
		 * then, so the agent came another way (/etc/ld.so.preload, a set-user-ID copy in a
		 * system directory, a link), and the environment is the caller's, who may be less
		 * privileged than the program: D9_TRACE_PATH, D9_ALLOW_SHARED_DIR or D9_S3_* would let
		 * them choose where its trace goes. glibc reads none of its own variables there; the
		 * agent neither, and stays off (said when one was set: the user asked for a trace) */
		secure_off();
		return;
	}
	if (getenv("D9__NO_CALLS")) {
		/* exec'd from a thread under a seccomp filter (preload/libc-exit.c): this image has
		 * it, and the agent makes no call in it, nor in what it starts */
		__atomic_store_n(&d9__no_calls, 1, __ATOMIC_RELEASE);
		d9__self.filtered = d9__self.busy = 1;
		seccomp_all = 1;
		return;
	}
	d9__fd_init(); /* this process's descriptor numbers are the ones marked (fdown.c) */
	/* before the program forks: its children share it (d9__log_tree_once) */
	void *said = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (said != MAP_FAILED)
		d9__tree_said = said;
	d9__seccomp_at_start();
	if (d9__config_load(&g->cfg) != 0)
		goto out;
	d9__seccomp_probe(); /* under an inherited filter: before any thread of the program's */
	int prio = d9__call_survives(SYS_setpriority), perf = d9__call_survives(SYS_perf_event_open);
	int minc = d9__call_survives(SYS_mincore);
	if (!prio || !perf || !minc)
		d9__log(D9_LOG_WARN, "the process started under a seccomp filter that kills at%s%s%s "
			"(or d9 could not tell): d9 leaves those calls out%s", prio ? "" : " setpriority",
			perf ? "" : " perf_event_open", minc ? "" : " mincore",
			prio ? "" : " (its threads keep the program's priority)");
	d9__clock_init(g->cfg.clock);
	d9__pcfg = g->cfg.pre;
	d9__clock_update_ticks(); /* at the clock's first rate: the writer refines it */
	if (d9__direct_sync)
		d9__direct_sync(); /* D9_REQUESTS is known now */
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
	if (g->cfg.dump_signal && g->cfg.flight)
		d9__flight_signal_install();
	if (d9__runtimes_attach)
		d9__runtimes_attach();
	/* the table grown while the program has one thread: grown later, by the first high number
	 * (a worker's schedstat file at its first idle wait, the writer's segment), the kernel
	 * waits for an RCU grace period first, and every thread that takes a number meanwhile
	 * waits with it (12 ms on a worker's first wake measured on a loaded machine) */
	if (d9__enabled)
		d9__fd_table_grow();
out:
	errno = saved;
}
