/* profile.c: CPU and off-CPU samples per worker (D9_CPU_PROFILE, D9_SCHED_EVENTS, D9_STACKS).
 *
 * A thread that becomes a worker opens its own perf events (not inherited): cpu-clock for
 * on-CPU samples, context-switches for off-CPU samples, timestamps on CLOCK_MONOTONIC, each
 * with a small mmap ring. The kernel writes the samples; the writer thread drains every ring
 * every few milliseconds (d9__profile_drain), tags each sample with the coroutine that ran at
 * its time (the worker's switch log, d9-agent.h), turns its stack into a Stack definition and
 * encodes CpuSample events into one chunk per worker. Lost records of the kernel and samples
 * the agent could not keep become Dropped(samples_lost) events in that chunk.
 *
 * Where perf_event_open is denied (EACCES, EPERM, ENOSYS: seccomp, containers) or
 * D9_CPU_PROFILE_MODE=ctimer, on-CPU samples come from a per-worker POSIX timer on the thread's
 * CPU clock instead: its signal (D9_PROFILE_SIGNAL) lands on the worker itself, whose handler
 * copies the interrupted registers and stack into a lock-free per-thread ring for the writer.
 *
 * Stacks (DESIGN.md, "Validation"): the kernel's frame-pointer chain is used only as far as every
 * return address lies in executable memory and its frame records climb within the stack; per
 * D9_STACKS the writer picks it or the libdw unwind of the stack copy, ends it at a coroutine's
 * root (d9_agent_stack_root), and records the unwinder and whether the stack is truncated in the
 * CpuSample (FORMAT.md, CpuSample.unwind).
 *
 * Descriptors: a worker's perf descriptors are opened, disabled and closed only by the worker
 * itself (never by the writer: a number closed elsewhere may be the host's by then), at most
 * 1/8 of RLIMIT_NOFILE of them at once, and each is checked to still be the agent's event
 * (fstat device and inode, PERF_EVENT_IOC_ID) before it is touched. At exit the worker copies
 * the samples still in its rings to the heap for the writer and unmaps them (DESIGN.md).
 *
 * Ordering: the writer drains the rings after it has taken the queue of finished chunks and
 * before it writes them, so a worker's samples reach the file before any events chunk of that
 * worker holding later events (the analyzer merges them by time; FORMAT.md, CpuSample). */
#include "internal.h"
#include "unwind.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <sys/uio.h>
#include <ucontext.h>

#define CT_SLOTS 32u /* ctimer ring: samples between two drains (250 Hz: 2.5 a drain) */
#define CT_STACK 8192u /* ctimer: bytes of stack copied per sample, at most */
#define CT_NREGS 17 /* ctimer: the registers of D9__UNWIND_REGS_MASK */
#define MAX_FRAMES 128
#define KERNEL_ADDR 0xffff800000000000ull
#define OFFCPU_DUMP 2048u /* bytes of stack per off-CPU sample, at most */
#define FDS_MAX 4096 /* perf descriptors at most, whatever RLIMIT_NOFILE allows */
#define COPY_MAX (4u << 20) /* bytes of exited workers' samples held for the writer, at most */
#define MAPS_MAX 65536 /* mappings kept from /proc/self/maps, at most */
#define MAPS_REFRESH_NS 100000000ull /* re-reading the maps for an unknown address: at most */
#define MAPS_MAX_AGE_NS 1000000000ull /* ... and for one in no mapping at all, at most */
#define ANON_MAX 256 /* anonymous code mappings (JIT) made modules, at most */
#define PERF_REG_BP 6 /* PERF_REG_X86_BP, PERF_REG_X86_SP: bits of the sample's register mask */
#define PERF_REG_SP 7

/* One perf event and its ring. */
struct ring {
	int fd; /* -1: none; opened, disabled and closed only by the worker itself */
	dev_t dev; /* the descriptor's identity at open: fd_ours() compares before every use */
	ino_t ino;
	uint64_t id; /* PERF_EVENT_IOC_ID, 0 if the kernel has none */
	uint8_t *base; /* the mapping (or the heap copy): the metadata page, then data_size bytes */
	size_t map_len, data_size;
	size_t data_off; /* where the data starts: 4096 in a mapping, after the metadata in a copy */
	int copied; /* base is a malloc'd copy of the unread samples (the worker exited) */
	int switches; /* the kernel also writes PERF_RECORD_SWITCH records (attr.context_switch) */
};

/* ctimer samples: written by the worker's signal handler, read by the writer. */
struct ct_slot {
	uint64_t t, co;
	uint32_t len; /* bytes of stack copied, 0: none */
	uint64_t regs[CT_NREGS]; /* in PERF_REG bit order of D9__UNWIND_REGS_MASK */
	uint8_t stack[CT_STACK];
};
struct ct_ring {
	uint64_t head; /* handler: slots written */
	uint64_t tail; /* writer: slots read */
	uint64_t lost; /* handler: samples with no free slot */
	struct ct_slot s[CT_SLOTS];
};

struct d9__prof {
	struct d9__prof *next; /* P.list (P.lock) */
	uint32_t tid, worker;
	struct ring cpu, sw;
	struct d9__swlog *swlog;
	struct ct_ring *ct;
	timer_t timer;
	int has_timer;
	int hold; /* atomic: 0 free, 1 the writer drains the rings, 2 the exiting worker copies them */
	int dead; /* atomic: the thread exited; the writer drains what is left and frees it */
	uint64_t exit_lost; /* atomic: samples the exiting worker could not keep or never took */
	int miss_cpu, miss_sw; /* events not opened for want of descriptors (cap, EMFILE) */
	uint64_t cpu0, csw0; /* thread CPU ns and context switches when it became a worker */
	uint64_t lost; /* samples lost, not yet recorded (writer) */
	uint64_t throttled_at; /* cpu-clock: CLOCK_MONOTONIC ns of a PERF_RECORD_THROTTLE, or 0 */
	uint64_t last_ticks; /* time of the last event written for this worker's samples */
	/* the off-CPU sample whose switch-in has not been read yet: written once it is, with the
	 * time off CPU as its weight (the thread cannot switch out again before it switches in) */
	struct {
		int on;
		uint64_t mono_ns, ticks, co, stack;
		uint32_t how;
	} off;
};

static struct {
	pthread_mutex_t lock;
	struct d9__prof *list;
	struct d9__prof *stale; /* a forked child's copies of the parent's, freed by its writer */
	int on; /* profiling configured */
	int mode; /* D9_PROF_PERF or D9_PROF_CTIMER once chosen; D9_PROF_AUTO before */
	int handler; /* ctimer: 1 installed, -1 refused (P.lock) */
	int draining; /* the writer drains the rings: exiting workers leave their entry to it */
	int stacks; /* D9_STACKS */
	uint64_t regs_mask;
	struct d9__unwinder *unw;
	int unw_tried;
	uint64_t samples, untagged, unwound; /* statistics (writer) */
	int nfds; /* atomic: perf descriptors open (reserved before perf_event_open) */
	uint64_t copy_bytes; /* atomic: bytes of ring copies held for the writer */
	uint64_t foreign; /* atomic: our descriptors found closed or replaced by the program */
} P = { .lock = PTHREAD_MUTEX_INITIALIZER };

void d9__profile_init(void)
{
	struct d9__config *c = &d9__g.cfg;

	P.on = c->cpu_hz || c->sched_events;
	P.mode = c->profile_mode;
	P.stacks = c->stacks;
	P.regs_mask = D9__UNWIND_REGS_MASK;
}

/* ---- perf events ------------------------------------------------------------------------------ */

int d9__perf_adopt(int fd, struct stat *st, uint64_t *id)
{
	int err = d9__fd_own(fd);

	if (err == -EMFILE) {
		close(fd); /* too high to mark: closed at once, by this thread */
		return err;
	}
	if (err)
		return err; /* the program's, or not known to be free of its calls */
	if ((err = d9__fd_enter(fd)) != 0) {
		d9__fd_disown(fd); /* taken by the program meanwhile: no mark left on its number */
		return err;
	}
	/* a perf event is an anonymous inode (no file type) with an id (Linux 3.12 and later);
	 * anything else is a file the program put on the number before the agent marked it:
	 * neither mapped nor closed */
	*id = 0;
	if (fstat(fd, st) != 0 || (st->st_mode & S_IFMT) != 0 ||
		ioctl(fd, PERF_EVENT_IOC_ID, id) != 0 || !*id) {
		d9__fd_leave(fd);
		d9__fd_disown(fd);
		return -ESTALE;
	}
	return 0;
}

static int perf_open(struct perf_event_attr *a)
{
	/* under an inherited seccomp filter, once: systemd's @debug group (denied by Debian's nsd
	 * and pdns-recursor units, left out of @system-service) holds it, and a unit's filter kills
	 * at what it denies unless it names an errno */
	if (!d9__call_survives(SYS_perf_event_open)) { /* said at load (lifecycle.c) */
		errno = EPERM;
		return -1;
	}
	return (int)syscall(SYS_perf_event_open, a, 0 /* this thread */, -1, -1,
		PERF_FLAG_FD_CLOEXEC);
}

/* The most perf descriptors the agent keeps open: 1/8 of the soft RLIMIT_NOFILE (read at every
 * open: servers often raise it after start), at most FDS_MAX. The host keeps 7/8 for itself. */
static int fds_cap(rlim_t *soft)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		rl.rlim_cur = (rlim_t)FDS_MAX * 8;
	*soft = rl.rlim_cur;
	return rl.rlim_cur / 8 < FDS_MAX ? (int)(rl.rlim_cur / 8) : FDS_MAX;
}

/* 1 when r->fd is still the event the agent opened: the program may have closed it (a daemon
 * closing every descriptor after start) and got the number back for a file of its own. All
 * anonymous descriptors share one inode, so the event's id decides; PERF_EVENT_IOC_ID ('$')
 * means nothing to the other anonymous descriptors (eventfd, epoll, timerfd). */
static int fd_ours(const struct ring *r)
{
	struct stat st;
	uint64_t id = 0;

	if (fstat(r->fd, &st) != 0 || st.st_dev != r->dev || st.st_ino != r->ino)
		return 0;
	if (!r->id)
		return 1; /* a kernel before 3.12 (no PERF_EVENT_IOC_ID): the inode is all we have */
	return ioctl(r->fd, PERF_EVENT_IOC_ID, &id) == 0 && id == r->id;
}

/* Gives up the ring's descriptor (the ring's mapping, if any, stays): disables the event first
 * when `disable`, closes it only if it is still ours. A number that is no longer ours is left
 * alone; the event lives on through its mapping until that is unmapped, so no sample is lost. */
static void ring_release_fd(struct ring *r, int disable)
{
	if (r->fd < 0)
		return;
	if (D9_UNLIKELY(d9__self.fd_private)) {
		/* the writer freeing a worker that ended without its thread-exit handler: the number
		 * is in the program's table, which this thread cannot reach; left open (said once) */
		d9__log_once(D9_LOG_WARN, "a profiled thread ended without its exit handler: its "
			"perf event descriptor (fd %d) stays open", r->fd);
		__atomic_sub_fetch(&P.nfds, 1, __ATOMIC_RELAXED);
		r->fd = -1;
		return;
	}
	int held = d9__fd_enter(r->fd) == 0; /* the program's close of it waits meanwhile */
	if (held && fd_ours(r)) {
		if (disable && d9__fd_still(r->fd))
			ioctl(r->fd, PERF_EVENT_IOC_DISABLE, 0);
		d9__fd_close(r->fd);
		d9__fd_leave(r->fd);
	} else {
		if (held)
			d9__fd_leave(r->fd);
		d9__fd_disown(r->fd);
		__atomic_add_fetch(&P.foreign, 1, __ATOMIC_RELAXED);
		d9__log_once(D9_LOG_WARN, "a perf event descriptor of the agent (fd %d) was closed or "
			"replaced by the program; the agent leaves that descriptor alone (its samples "
			"are kept through the ring's mapping)", r->fd);
	}
	__atomic_sub_fetch(&P.nfds, 1, __ATOMIC_RELAXED);
	r->fd = -1;
}

static void ring_close(struct ring *r)
{
	ring_release_fd(r, 0);
	if (r->base && r->copied) {
		free(r->base);
		__atomic_sub_fetch(&P.copy_bytes, r->map_len, __ATOMIC_RELAXED);
	} else if (r->base) {
		munmap(r->base, r->map_len);
	}
	r->base = NULL;
	r->copied = 0;
}

/* Opens one event on the calling thread with its ring of `pages` data pages. Returns 0, -EDQUOT
 * when the agent's descriptor cap is reached, or -errno (the ring stays closed). */
static int ring_open(struct ring *r, uint32_t type, uint64_t config, uint64_t period,
	uint32_t dump, size_t pages)
{
	struct perf_event_attr a;
	struct stat st;
	rlim_t soft;
	int err;

	if (__atomic_add_fetch(&P.nfds, 1, __ATOMIC_RELAXED) > fds_cap(&soft)) {
		__atomic_sub_fetch(&P.nfds, 1, __ATOMIC_RELAXED);
		return -EDQUOT;
	}
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = type;
	a.config = config;
	a.sample_period = period;
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	if (P.stacks != D9_STACKS_DWARF)
		a.sample_type |= PERF_SAMPLE_CALLCHAIN;
	if (P.stacks != D9_STACKS_FP) {
		a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		a.sample_regs_user = P.regs_mask;
		a.sample_stack_user = dump;
	}
	a.exclude_callchain_kernel = 1;
	a.exclude_hv = 1;
	a.sample_id_all = 1;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;
	a.wakeup_events = 0;
	/* context switches: the switch-in records give each off-CPU sample its time off CPU */
	a.context_switch = config == PERF_COUNT_SW_CONTEXT_SWITCHES && type == PERF_TYPE_SOFTWARE;
	r->fd = perf_open(&a);
	if (r->fd < 0 && errno == EINVAL && a.context_switch) {
		a.context_switch = 0; /* before Linux 4.3: samples without their time off CPU */
		r->fd = perf_open(&a);
	}
	r->switches = r->fd >= 0 && a.context_switch;
	if (r->fd < 0 && (errno == EACCES || errno == EPERM) &&
		type == PERF_TYPE_SOFTWARE && config == PERF_COUNT_SW_CPU_CLOCK) {
		int denied = errno;
		a.exclude_kernel = 1; /* unprivileged (perf_event_paranoid 2): user time only */
		r->fd = perf_open(&a);
		if (r->fd >= 0)
			d9__defs_recorder(D9_REC_CPU_PROFILE, D9_REC_LIMITED, denied,
				"perf_event_open(cpu-clock)");
	}
	if (r->fd < 0) {
		err = -errno;
		goto err_count;
	}
	/* the agent's from here (fdown.c), and held while it is set up */
	if ((err = d9__perf_adopt(r->fd, &st, &r->id)) != 0) {
		r->fd = -1;
		goto err_count;
	}
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	/* Unprivileged rings count against perf_event_mlock_kb (516 KiB per user by default):
	 * smaller rings before none. A ring that cannot be mapped is no reason to leave perf. */
	for (; pages >= 8; pages /= 2) {
		r->data_size = pages * 4096;
		r->map_len = r->data_size + 4096;
		r->data_off = 4096;
		if (!d9__fd_still(r->fd))
			break;
		void *m = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (m != MAP_FAILED) {
			r->base = m;
			r->copied = 0;
			d9__fd_leave(r->fd);
			return 0;
		}
	}
	int map_err = errno;
	d9__fd_close(r->fd); /* just opened by this thread: ours */
	d9__fd_leave(r->fd);
	r->fd = -1;
	/* said with the number let go (stderr may block) */
	d9__log_once(D9_LOG_WARN, "cannot map a perf sample ring: %s (perf_event_mlock_kb, "
		"RLIMIT_MEMLOCK); some workers have no samples", strerror(map_err));
	d9__defs_recorder(D9_REC_PERF_RING, D9_REC_LIMITED, map_err,
		"mmap of a perf sample ring");
	err = -ENOBUFS;
err_count:
	__atomic_sub_fetch(&P.nfds, 1, __ATOMIC_RELAXED);
	return err;
}

/* Data pages for a ring: room for ~40 ms of samples at the rate, a power of two, 16 to max. */
static size_t ring_pages(uint64_t per_second, uint32_t dump, size_t max)
{
	uint64_t rec = P.stacks == D9_STACKS_FP ? 1200 : 1200 + dump;
	uint64_t bytes = per_second * rec / 25;
	size_t pages = 16;

	while (pages < max && pages * 4096 < bytes)
		pages *= 2;
	return pages;
}

static int perf_denied(int err)
{
	return err == -EACCES || err == -EPERM || err == -ENOSYS || err == -ENOENT ||
		err == -EOPNOTSUPP;
}

/* ---- ctimer ------------------------------------------------------------------------------------ */

static int ct_nocopy; /* process_vm_readv is refused here (seccomp): stacks hold the IP only */

/* Copies the stack from sp up, as far as it is readable (at most CT_STACK bytes) without ever
 * faulting: process_vm_readv on the process itself stops at the first unreadable page (the top
 * of a coroutine stack, a guard page) where a plain copy would crash the host. Returns the
 * bytes copied. Async-signal-safe. */
static uint32_t ct_copy(uint8_t *to, uint64_t sp)
{
	if (__atomic_load_n(&ct_nocopy, __ATOMIC_RELAXED) || !sp)
		return 0;
	struct iovec local = { to, CT_STACK }, remote = { (void *)(uintptr_t)sp, CT_STACK };
	/* getpid() every time: a forked child must read its own memory, not its parent's */
	ssize_t n = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL);
	if (n < 0 && (errno == ENOSYS || errno == EPERM || errno == EACCES)) {
		__atomic_store_n(&ct_nocopy, 1, __ATOMIC_RELAXED); /* said by the writer */
		return 0;
	}
	return n > 0 ? (uint32_t)n & ~7u : 0;
}

static void ct_handler(int sig, siginfo_t *si, void *uc)
{
	struct d9__thr *t = &d9__self;
	struct d9__prof *p = t->prof;
	int saved = errno;

	(void)sig;
	if (!p || !p->ct || si->si_code != SI_TIMER || __atomic_load_n(&d9__no_calls, __ATOMIC_ACQUIRE))
		goto out;
	struct ct_ring *r = p->ct;
	if (si->si_overrun > 0) /* expirations merged into this one: samples not taken */
		__atomic_add_fetch(&r->lost, (uint64_t)si->si_overrun, __ATOMIC_RELAXED);
	uint64_t h = r->head;
	if (h - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) >= CT_SLOTS) {
		__atomic_add_fetch(&r->lost, 1, __ATOMIC_RELAXED);
		goto out;
	}
	struct ct_slot *s = &r->s[h % CT_SLOTS];
	s->t = d9__now();
	struct d9__swlog *l = t->swlog;
	uint64_t n = l ? __atomic_load_n(&l->seq, __ATOMIC_RELAXED) : 0;
	s->co = n ? l->e[(n - 1) % D9__SWLOG_N].co : 0;
	/* the interrupted registers and a copy of its stack, unwound later on the writer thread
	 * (libdw, as perf samples are): nothing here allocates, locks or opens a descriptor */
	const mcontext_t *mc = &((const ucontext_t *)uc)->uc_mcontext;
	static const int8_t order[CT_NREGS] = { REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI,
		REG_RDI, REG_RBP, REG_RSP, REG_RIP, REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13,
		REG_R14, REG_R15 };
	for (int i = 0; i < CT_NREGS; i++)
		s->regs[i] = (uint64_t)mc->gregs[order[i]];
	s->len = ct_copy(s->stack, s->regs[7]);
	__atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
out:
	errno = saved;
}

/* Installs the handler once, only over the default disposition: the program's own handler of
 * that signal stays. Returns 1 when ctimer sampling can run. */
static int ct_install_locked(void)
{
	int sig = d9__g.cfg.profile_signal;
	struct sigaction old, sa;

	if (P.handler)
		return P.handler > 0;
	P.handler = -1;
	if (sigaction(sig, NULL, &old) != 0)
		return 0;
	if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
		d9__log(D9_LOG_WARN, "signal %d (D9_PROFILE_SIGNAL) has a handler of the program; "
			"ctimer CPU sampling is off (choose another signal)", sig);
		d9__defs_recorder(D9_REC_CPU_PROFILE, D9_REC_OFF, 0, "ctimer: D9_PROFILE_SIGNAL has "
			"a handler of the program");
		return 0;
	}
	if (old.sa_flags & SA_SIGINFO) {
		d9__log(D9_LOG_WARN, "signal %d (D9_PROFILE_SIGNAL) has a handler of the program; "
			"ctimer CPU sampling is off (choose another signal)", sig);
		d9__defs_recorder(D9_REC_CPU_PROFILE, D9_REC_OFF, 0, "ctimer: D9_PROFILE_SIGNAL has "
			"a handler of the program");
		return 0;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = ct_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0)
		return 0;
	P.handler = 1;
	return 1;
}

static int ct_install(void)
{
	d9__lock(&P.lock); /* workers often start together */
	int ok = ct_install_locked();
	d9__unlock(&P.lock);
	return ok;
}

/* Creates the worker's timer, not armed yet (ct_arm, once the handler can find the ring). */
static int ct_start(struct d9__prof *p)
{
	struct sigevent ev;

	if (!ct_install())
		return -1;
	p->ct = mmap(NULL, sizeof(struct ct_ring), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		-1, 0);
	if (p->ct == MAP_FAILED) {
		p->ct = NULL;
		return -1;
	}
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = d9__g.cfg.profile_signal;
	ev._sigev_un._tid = (pid_t)p->tid;
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &p->timer) != 0)
		return -1;
	p->has_timer = 1;
	return 0;
}

static int ct_arm(struct d9__prof *p, uint32_t hz)
{
	struct itimerspec its;
	long ns = hz ? 1000000000L / hz : 0; /* 0 disarms */

	its.it_interval.tv_sec = its.it_value.tv_sec = 0;
	its.it_interval.tv_nsec = its.it_value.tv_nsec = ns;
	return timer_settime(p->timer, 0, &its, NULL);
}

/* ---- worker life ------------------------------------------------------------------------------- */

/* A worker's descriptors and its own mappings (no free(): also a forked child's handler) */
static void prof_unmap(struct d9__prof *p)
{
	ring_release_fd(&p->cpu, 0);
	ring_release_fd(&p->sw, 0);
	if (p->ct)
		munmap(p->ct, sizeof(*p->ct));
	if (p->swlog)
		munmap(p->swlog, sizeof(*p->swlog));
	p->ct = NULL;
	p->swlog = NULL;
}

static void prof_free(struct d9__prof *p)
{
	prof_unmap(p);
	ring_close(&p->cpu);
	ring_close(&p->sw);
	free(p);
}

/* Thread CPU time (ns) and context switches so far of the calling thread. */
static void thread_usage(uint64_t *cpu_ns, uint64_t *switches)
{
	struct timespec ts;
	struct rusage ru;

	*cpu_ns = *switches = 0;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
		*cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (getrusage(RUSAGE_THREAD, &ru) == 0)
		*switches = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

/* The worker could not have a descriptor for an event (err: -EDQUOT for the agent's cap, or
 * -EMFILE/-ENFILE): says so once; returns 1 for those errors. */
static int fds_short(int err)
{
	rlim_t soft;
	int cap = fds_cap(&soft);
	char text[96];

	if (err == -EDQUOT)
		d9__log_once(D9_LOG_WARN, "perf descriptors are capped at %d (1/8 of RLIMIT_NOFILE %llu):"
			" workers beyond it are not profiled; their samples are counted as lost", cap,
			(unsigned long long)soft);
	else if (err == -EMFILE || err == -ENFILE)
		d9__log_once(D9_LOG_WARN, "perf_event_open: %s (%s, RLIMIT_NOFILE %llu): workers that "
			"cannot open their events are not profiled; their samples are counted as lost",
			strerror(-err), err == -EMFILE ? "EMFILE" : "ENFILE", (unsigned long long)soft);
	else
		return 0;
	/* the trace says it too (once): some workers have no samples */
	if (err == -EDQUOT)
		snprintf(text, sizeof(text), "perf descriptors capped at %d, 1/8 of RLIMIT_NOFILE %llu",
			cap, (unsigned long long)soft);
	else
		snprintf(text, sizeof(text), "perf_event_open, RLIMIT_NOFILE %llu",
			(unsigned long long)soft);
	d9__defs_recorder(D9_REC_PERF_FDS, D9_REC_LIMITED, err == -EDQUOT ? 0 : err, text);
	return 1;
}

/* The calling thread became a worker (d9_agent_become_worker), or a forked child's thread is
 * traced (d9__child_trace); t->busy set. */
void d9__profile_thread_start(struct d9__thr *t)
{
	struct d9__config *c = &d9__g.cfg;

	if (t->prof)
		t->prof->worker = t->worker; /* profiled since its fork (d9__child_trace), a worker now */
	if (!P.on || t->prof)
		return;
	struct d9__prof *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->cpu.fd = p->sw.fd = -1;
	p->tid = (uint32_t)gettid();
	p->worker = t->worker;
	p->swlog = mmap(NULL, sizeof(*p->swlog), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		-1, 0);
	if (p->swlog == MAP_FAILED) {
		free(p);
		return;
	}
	int mode = __atomic_load_n(&P.mode, __ATOMIC_RELAXED);
	if (mode != D9_PROF_CTIMER) {
		int err = 0;
		if (c->cpu_hz)
			err = ring_open(&p->cpu, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK,
				1000000000u / c->cpu_hz, c->stack_dump,
				ring_pages(c->cpu_hz, c->stack_dump, 128));
		if (!err && c->sched_events) {
			/* a busy worker switches thousands of times a second: a smaller copy each */
			uint32_t dump = c->stack_dump < OFFCPU_DUMP ? c->stack_dump : OFFCPU_DUMP;
			int e2 = ring_open(&p->sw, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, 1,
				dump, ring_pages(10000, dump, 256));
			if (fds_short(e2))
				p->miss_sw = 1;
			else if (e2 && perf_denied(e2))
				d9__log_tree_once(D9__SAID_SCHED_DENIED, D9_LOG_WARN, "off-CPU samples "
					"(D9_SCHED_EVENTS) are off: perf_event_open(context-switches): "
					"%s (needs root, CAP_PERFMON or perf_event_paranoid <= 1)",
					strerror(-e2));
			else if (e2)
				d9__log_once(D9_LOG_WARN, "off-CPU samples (D9_SCHED_EVENTS) are off: "
					"perf_event_open(context-switches): %s", strerror(-e2));
			if (e2 && !p->miss_sw)
				d9__defs_recorder(D9_REC_SCHED_EVENTS, D9_REC_OFF, e2,
					"perf_event_open(context-switches)");
		}
		if (fds_short(err)) {
			/* no descriptor for this worker: not a reason to leave perf for the others */
			p->miss_cpu = 1;
			p->miss_sw = c->sched_events;
		} else if (err && mode == D9_PROF_AUTO && perf_denied(err)) {
			d9__log_tree_once(D9__SAID_CPU_FALLBACK, D9_LOG_WARN, "perf_event_open(cpu-clock): "
				"%s; CPU samples come from a CPU-time timer instead (ctimer mode)",
				strerror(-err));
			d9__defs_recorder(D9_REC_CPU_PROFILE, D9_REC_FALLBACK, err,
				"perf_event_open(cpu-clock)");
			__atomic_store_n(&P.mode, D9_PROF_CTIMER, __ATOMIC_RELAXED);
			mode = D9_PROF_CTIMER;
		} else if (err) {
			d9__log_tree_once(D9__SAID_CPU_OFF, D9_LOG_WARN, "CPU samples are off: "
				"perf_event_open(cpu-clock): %s", strerror(-err));
			d9__defs_recorder(D9_REC_CPU_PROFILE, D9_REC_OFF, err,
				"perf_event_open(cpu-clock)");
		} else if (mode == D9_PROF_AUTO && c->cpu_hz) {
			__atomic_store_n(&P.mode, D9_PROF_PERF, __ATOMIC_RELAXED);
		}
		if (p->miss_cpu || p->miss_sw)
			thread_usage(&p->cpu0, &p->csw0);
	}
	if (mode == D9_PROF_CTIMER && c->sched_events) {
		/* context switches come from perf alone: without it they are off, say so */
		d9__log_once(D9_LOG_WARN, "off-CPU samples (D9_SCHED_EVENTS) are off: they need "
			"perf_event_open, and CPU samples come from the ctimer");
		d9__defs_recorder(D9_REC_SCHED_EVENTS, D9_REC_OFF, 0,
			"ctimer mode: they need perf_event_open");
	}
	if (mode == D9_PROF_CTIMER && c->cpu_hz && ct_start(p) != 0) {
		d9__log_once(D9_LOG_WARN, "ctimer CPU sampling is off: %s", strerror(errno));
		d9__defs_recorder(D9_REC_CPU_PROFILE, D9_REC_OFF, errno, "ctimer: timer_create");
	}
	d9__lock(&P.lock);
	p->next = P.list;
	P.list = p;
	d9__unlock(&P.lock);
	t->prof = p;
	__atomic_store_n(&t->swlog, p->swlog, __ATOMIC_RELEASE);
	if (p->has_timer && ct_arm(p, c->cpu_hz) != 0) {
		d9__log_once(D9_LOG_WARN, "ctimer CPU sampling is off: timer_settime: %s",
			strerror(errno));
		d9__defs_recorder(D9_REC_CPU_PROFILE, D9_REC_OFF, errno, "ctimer: timer_settime");
	}
}

static const uint8_t *rec_at(const struct ring *r, uint64_t off, size_t len, uint8_t *buf);

/* Samples (and the kernel's lost counts) in the ring between tail and head. */
static uint64_t ring_count(const struct ring *r, uint64_t tail, uint64_t head)
{
	uint8_t buf[24];
	uint64_t n = 0;

	while (head - tail >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		memcpy(&h, rec_at(r, tail, sizeof(h), buf), sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail)
			break;
		if (h.type == PERF_RECORD_SAMPLE) {
			n++;
		} else if (h.type == PERF_RECORD_LOST && h.size >= 24) {
			uint64_t lost;
			memcpy(&lost, rec_at(r, tail, 24, buf) + 16, 8);
			n += lost;
		}
		tail += h.size;
	}
	return n;
}

/* The exiting worker (its event disabled): moves the samples still unread in the ring to a heap
 * copy of the same layout for the writer, and unmaps the ring, so nothing of a dead thread but
 * that copy waits for the writer. Past COPY_MAX bytes of copies the samples are counted as lost
 * instead. Returns the samples lost. */
static uint64_t ring_keep(struct ring *r)
{
	uint64_t lost = 0;
	uint8_t *copy = NULL;

	if (!r->base || r->copied)
		return 0;
	struct perf_event_mmap_page *m = (void *)r->base;
	uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE), tail = m->data_tail;
	uint64_t n = head - tail;
	if (n > r->data_size)
		n = 0; /* cannot happen with a sane kernel */
	size_t len = sizeof(struct perf_event_mmap_page) + n; /* the copy: metadata, then data */
	if (n && __atomic_add_fetch(&P.copy_bytes, len, __ATOMIC_RELAXED) <= COPY_MAX)
		copy = malloc(len);
	if (n && !copy)
		__atomic_sub_fetch(&P.copy_bytes, len, __ATOMIC_RELAXED); /* over the budget, or no memory */
	if (copy) {
		uint8_t *data = copy + sizeof(struct perf_event_mmap_page);
		size_t at = tail % r->data_size, first = r->data_size - at < n ? r->data_size - at : n;
		memset(copy, 0, sizeof(struct perf_event_mmap_page));
		memcpy(data, r->base + r->data_off + at, first);
		memcpy(data + first, r->base + r->data_off, n - first);
		((struct perf_event_mmap_page *)(void *)copy)->data_head = n;
	} else if (n) {
		lost = ring_count(r, tail, head);
		d9__log_once(D9_LOG_WARN, "samples of exited workers waiting for the writer reached "
			"%u MiB: further ones are counted as lost", COPY_MAX >> 20);
	}
	munmap(r->base, r->map_len);
	r->base = copy;
	r->data_size = copy ? n : 0;
	r->map_len = copy ? len : 0;
	r->data_off = sizeof(struct perf_event_mmap_page);
	r->copied = copy != NULL;
	return lost;
}

/* Samples a worker without its events (descriptor cap, EMFILE) would have had: its CPU time at
 * the sampling rate, and one off-CPU sample per context switch. */
static uint64_t samples_missed(const struct d9__prof *p)
{
	uint64_t cpu, csw, n = 0;

	if (!p->miss_cpu && !p->miss_sw)
		return 0;
	thread_usage(&cpu, &csw);
	if (p->miss_cpu && d9__g.cfg.cpu_hz && cpu > p->cpu0)
		n += (cpu - p->cpu0) * d9__g.cfg.cpu_hz / 1000000000u;
	if (p->miss_sw && csw > p->csw0)
		n += csw - p->csw0;
	return n;
}

/* The calling thread exits: sampling stops now and the thread closes its own descriptors, so
 * none outlives it whether or not the writer gets the CPU. Unread samples go to a heap copy the
 * writer drains; the writer frees the entry. */
void d9__profile_thread_exit(struct d9__thr *t)
{
	struct d9__prof *p = t->prof;

	if (!p)
		return;
	t->swlog = NULL;
	__atomic_store_n(&t->prof, NULL, __ATOMIC_RELEASE); /* the signal handler sees no ring */
	if (p->has_timer) {
		d9__lock(&P.lock); /* ct_check_signal disarms the timers of the list */
		timer_delete(p->timer);
		p->has_timer = 0;
		d9__unlock(&P.lock);
	}
	ring_release_fd(&p->cpu, 1);
	ring_release_fd(&p->sw, 1);
	uint64_t lost = samples_missed(p);
	d9__lock(&P.lock);
	if (!P.draining) {
		/* no writer drains (recording off, D9_ENABLED=0, or the agent failed to start): the
		 * thread frees its own entry */
		struct d9__prof **pp = &P.list;
		while (*pp && *pp != p)
			pp = &(*pp)->next;
		if (*pp)
			*pp = p->next;
		d9__unlock(&P.lock);
		prof_free(p);
		return;
	}
	d9__unlock(&P.lock);
	int idle = 0;
	if (__atomic_compare_exchange_n(&p->hold, &idle, 2, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		lost += ring_keep(&p->cpu) + ring_keep(&p->sw);
		if (p->ct && __atomic_load_n(&p->ct->head, __ATOMIC_ACQUIRE) == p->ct->tail) {
			/* an empty ctimer ring (its timer is gone; a late signal finds no t->prof) */
			lost += __atomic_exchange_n(&p->ct->lost, 0, __ATOMIC_RELAXED);
			munmap(p->ct, sizeof(*p->ct));
			p->ct = NULL;
		}
		if (!p->cpu.base && !p->sw.base) {
			munmap(p->swlog, sizeof(*p->swlog)); /* no sample left to tag */
			p->swlog = NULL;
		}
		__atomic_store_n(&p->exit_lost, lost, __ATOMIC_RELAXED);
		__atomic_store_n(&p->dead, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&p->hold, 0, __ATOMIC_RELEASE); /* the thread's last touch of p */
		return;
	}
	/* the writer is draining this worker right now (without waiting for it: it may be starved):
	 * the rings stay mapped until the writer frees the entry; the descriptors are closed */
	__atomic_store_n(&p->exit_lost, lost, __ATOMIC_RELAXED);
	__atomic_store_n(&p->dead, 1, __ATOMIC_RELEASE); /* the thread's last touch of p */
}

static void bs_child(void);

/* The child's writer, at its start: frees what d9__profile_child could not. */
void d9__profile_stale_free(void)
{
	struct d9__prof *p = P.stale;

	P.stale = NULL;
	while (p) {
		struct d9__prof *next = p->next;
		/* the heap copies of its rings (not counted in the child's P.copy_bytes) */
		if (p->cpu.copied)
			free(p->cpu.base);
		if (p->sw.copied)
			free(p->sw.base);
		free(p);
		p = next;
	}
}

/* In a forked child: the parent's workers are gone; their inherited descriptors are closed and
 * their mappings removed here, but their memory is freed later by the child's writer
 * (d9__profile_stale_free): a program's own allocator may still be locked by its fork handler,
 * which runs after ours in the child when it was registered after ours, so no free() here. */
void d9__profile_child(void)
{
	struct d9__prof *p = P.list;

	pthread_mutex_init(&P.lock, NULL);
	while (p) {
		struct d9__prof *next = p->next;
		p->has_timer = 0; /* POSIX timers are not inherited */
		/* perf rings are not mapped in a child (VM_DONTCOPY): only their descriptors are
		 * inherited; heap copies are */
		if (!p->cpu.copied)
			p->cpu.base = NULL;
		if (!p->sw.copied)
			p->sw.base = NULL;
		prof_unmap(p);
		p->next = P.stale;
		P.stale = p;
		p = next;
	}
	P.list = NULL;
	P.nfds = 0;
	P.copy_bytes = 0;
	P.draining = 0;
	P.unw = NULL; /* the parent's unwinder: its state belongs to the writer thread */
	P.unw_tried = 0;
	bs_child();
}

/* ---- draining (writer thread) ------------------------------------------------------------------ */

/* The coroutine running at tick time `when` on the worker of `l`; *unknown = 1 when the log no
 * longer reaches back that far. */
static uint64_t coroutine_at(const struct d9__swlog *l, uint64_t when, int *unknown)
{
	*unknown = 0;
	if (!l)
		return 0; /* the worker exited with no sample left to tag (d9__profile_thread_exit) */
	uint64_t seq = __atomic_load_n(&l->seq, __ATOMIC_ACQUIRE);
	if (!seq)
		return 0;
	/* entries [lo, seq) are stable unless the thread wraps around meanwhile (checked after) */
	uint64_t lo = seq > D9__SWLOG_N - 64 ? seq - (D9__SWLOG_N - 64) : 0, hi = seq;
	if (l->e[lo % D9__SWLOG_N].t > when) {
		*unknown = lo > 0;
		return 0;
	}
	while (hi - lo > 1) { /* last entry with t <= when */
		uint64_t mid = lo + (hi - lo) / 2;
		if (l->e[mid % D9__SWLOG_N].t <= when)
			lo = mid;
		else
			hi = mid;
	}
	uint64_t co = l->e[lo % D9__SWLOG_N].co;
	uint64_t seq2 = __atomic_load_n(&l->seq, __ATOMIC_ACQUIRE);
	if (seq2 - lo >= D9__SWLOG_N) {
		*unknown = 1;
		return 0;
	}
	return co;
}

/* The chunk being filled for one worker. */
struct out {
	struct d9__prof *p;
	struct d9__block *b;
	struct d9_enc e;
	struct d9__block **tail;
};

static void out_finish(struct out *o)
{
	struct d9__block *b = o->b;

	if (!b)
		return;
	o->b = NULL;
	if (!o->e.count) {
		d9__pool_put(b);
		return;
	}
	b->size = (uint32_t)d9_enc_end(&o->e, 0);
	b->count = o->e.count;
	memcpy(b->types, o->e.types, sizeof(b->types));
	b->first_time = d9_enc_first_time(&o->e);
	b->last_time = o->e.last;
	b->next = NULL;
	*o->tail = b;
	o->tail = &b->next;
}

/* Room for one more event at tick time `when` (not earlier than the chunk's last). */
static int out_ready(struct out *o, uint64_t when)
{
	if (o->b && o->e.p < o->e.end)
		return 1;
	out_finish(o);
	struct d9__block *b = d9__pool_get();
	if (!b)
		return 0;
	memset(b, 0, sizeof(*b));
	b->tid = o->p->tid;
	b->worker = o->p->worker;
	d9_enc_begin(&o->e, b->data, D9_BLOCK_DATA, b->tid, b->worker, when, d9__shift,
		D9__SCHEMA_FLAGS);
	o->b = b;
	if (o->p->lost) {
		d9_enc_dropped(&o->e, when, o->p->lost, D9_DROP_SAMPLES_LOST);
		b->dropped += o->p->lost;
		b->lost_samples += o->p->lost;
		b->drop_records++;
		o->p->lost = 0;
	}
	return 1;
}

/* Records the worker's unrecorded losses at the time of its last sample (a later time could
 * come after samples still on their way into the rings), or `when` if it has none yet. */
static void record_lost(struct out *o, uint64_t when)
{
	if (o->p->last_ticks)
		when = o->p->last_ticks;
	o->p->last_ticks = when;
	if (!out_ready(o, when) || !o->p->lost)
		return; /* out_ready wrote them at the start of a new chunk */
	if (d9_enc_dropped(&o->e, when, o->p->lost, D9_DROP_SAMPLES_LOST) == 0) {
		o->b->dropped += o->p->lost;
		o->b->lost_samples += o->p->lost;
		o->b->drop_records++;
		o->p->lost = 0;
	}
}

/* ---- stack roots: where a coroutine's stack ends (d9_agent_stack_root) ----------------------- */

static uint64_t roots[D9_STACK_ROOTS]; /* atomic; 0: free */

void d9_agent_stack_root(uint64_t ra)
{
	for (int i = 0; i < D9_STACK_ROOTS && ra; i++) {
		uint64_t r = __atomic_load_n(&roots[i], __ATOMIC_RELAXED), zero = 0;
		if (r == ra)
			return;
		if (!r && __atomic_compare_exchange_n(&roots[i], &zero, ra, 0, __ATOMIC_RELAXED,
			__ATOMIC_RELAXED))
			return;
		if (__atomic_load_n(&roots[i], __ATOMIC_RELAXED) == ra)
			return; /* another thread stored the same one */
	}
}

/* Root slots: where a coroutine's root return address lies in its stack while the coroutine
 * runs. The kernel's copy of a sample's stack stops at the first page the program never wrote
 * (it copies without taking page faults), and a coroutine's outermost frame often holds a large,
 * partly used buffer (st-http's serve_conn: 12 KiB, an 8 KiB request buffer), so the copy ends
 * inside that frame, below the one word the unwind still needs to reach the root: the entry
 * function's return address. Adapters name that word's address (d9_agent_stack_root_slot) and
 * the unwinder takes it from here when, and only when, it lies above the copy. Open addressing,
 * insert-only: a reused coroutine stack has the same slot. */
#define ROOT_SLOTS 8192 /* a power of 2: 128 KiB of .bss, touched only by the slots in use */
#define ROOT_SLOT_PROBES 16
static struct {
	uint64_t at; /* atomic; 0: free, 1: being filled; set (release) after ra */
	uint64_t ra; /* atomic */
} root_slots[ROOT_SLOTS];

static uint32_t root_slot_hash(uint64_t at)
{
	return (uint32_t)((at >> 3) * 0x9e3779b97f4a7c15ull >> 40) & (ROOT_SLOTS - 1);
}

void d9_agent_stack_root_slot(uint64_t at, uint64_t ra)
{
	if (!at || (at & 7) || !ra)
		return;
	uint32_t h = root_slot_hash(at);
	for (int i = 0; i < ROOT_SLOT_PROBES; i++) {
		__typeof__(root_slots[0]) *e = &root_slots[(h + (uint32_t)i) & (ROOT_SLOTS - 1)];
		uint64_t cur = __atomic_load_n(&e->at, __ATOMIC_ACQUIRE), zero = 0;
		if (cur == at) {
			if (__atomic_load_n(&e->ra, __ATOMIC_RELAXED) != ra)
				__atomic_store_n(&e->ra, ra, __ATOMIC_RELAXED);
			return;
		}
		if (cur)
			continue; /* another slot's, or being claimed (1) */
		/* claim the entry (1: ours, being filled), fill it, publish it */
		if (!__atomic_compare_exchange_n(&e->at, &zero, 1, 0, __ATOMIC_ACQUIRE,
			__ATOMIC_RELAXED))
			continue; /* lost the race: a twin insert of the same slot is harmless */
		__atomic_store_n(&e->ra, ra, __ATOMIC_RELAXED);
		__atomic_store_n(&e->at, at, __ATOMIC_RELEASE);
		return;
	}
	d9__log_once(D9_LOG_INFO, "stack root slots are full (%d): stacks of coroutines on further "
		"stacks may end short of their root when the stack copy does", ROOT_SLOTS);
}

int d9__stack_root_slot(uint64_t at, uint64_t *ra)
{
	uint32_t h = root_slot_hash(at);

	for (int i = 0; i < ROOT_SLOT_PROBES; i++) {
		__typeof__(root_slots[0]) *e = &root_slots[(h + (uint32_t)i) & (ROOT_SLOTS - 1)];
		uint64_t cur = __atomic_load_n(&e->at, __ATOMIC_ACQUIRE);
		if (!cur)
			return 0;
		if (cur == at) {
			*ra = __atomic_load_n(&e->ra, __ATOMIC_RELAXED);
			return *ra != 0;
		}
	}
	return 0;
}

/* Ends the stack at its first frame that is a root (kept): what lies beyond is not this
 * coroutine's. A stack that reaches a root is complete, however its unwinder ended. */
static uint32_t cut_at_root(const uint64_t *ips, uint32_t n, uint32_t *how)
{
	for (uint32_t i = 0; i < n; i++)
		for (int k = 0; k < D9_STACK_ROOTS; k++) {
			uint64_t r = __atomic_load_n(&roots[k], __ATOMIC_RELAXED);
			if (!r)
				break;
			/* a return address that is a root; or the sampled instruction itself a few bytes
			 * past one (the window the ST adapter gives its st_thread_exit call): the entry
			 * function's own code after the start routine returned, whose caller is another
			 * context's stale frame (rt-srs-static-stack-root once went on into
			 * st_thread_create) */
			if ((i && ips[i] == r) || (!i && ips[0] > r && ips[0] - r <= 32)) {
				*how &= ~D9_UNWIND_TRUNCATED;
				return i + 1;
			}
		}
	return n;
}

/* Writes one sample; weight_ns is the time it stands for (D9_UNKNOWN: not known). */
static void emit_stack(struct out *o, uint64_t when, uint64_t co, uint32_t source, uint64_t stack,
	uint32_t how, uint64_t weight_ns)
{
	/* a worker's samples never go back in time, across chunks too (the two rings are read one
	 * after the other: a sample of one can show up a drain late, by nanoseconds) */
	if (when < o->p->last_ticks)
		when = o->p->last_ticks;
	o->p->last_ticks = when;
	if (!out_ready(o, when)) {
		o->p->lost++;
		return;
	}
	if (d9_enc_cpu_sample_w(&o->e, when, co, source, stack, how, weight_ns) != 0)
		o->p->lost++;
	P.samples++;
}

/* The stack id of a sample's frames, cut at the coroutine's entry when one is known. */
static uint64_t sample_stack_id(const uint64_t *ips, uint32_t n, uint32_t *how)
{
	n = cut_at_root(ips, n, how);
	return n ? d9_agent_stack(ips, n) : 0;
}

static void emit(struct out *o, uint64_t when, uint64_t co, uint32_t source, const uint64_t *ips,
	uint32_t n, uint32_t how, uint64_t weight_ns)
{
	if (!d9__enabled)
		return; /* recording is toggled off: the rings are emptied, nothing is kept */
	uint64_t stack = sample_stack_id(ips, n, &how);
	emit_stack(o, when, co, source, stack, how, weight_ns);
}

/* Writes the off-CPU sample waiting for its switch-in, weighted by its time off CPU (until
 * switch_in_ns; 0: unknown, the thread ended or a record was lost). */
static void emit_off(struct out *o, uint64_t switch_in_ns)
{
	struct d9__prof *p = o->p;

	if (!p->off.on)
		return;
	p->off.on = 0;
	if (!d9__enabled)
		return;
	uint64_t w = switch_in_ns >= p->off.mono_ns && switch_in_ns ? switch_in_ns - p->off.mono_ns :
		D9_UNKNOWN;
	emit_stack(o, p->off.ticks, p->off.co, D9_CPU_OFF, p->off.stack, p->off.how, w);
}

/* Reads the ring's record at `off` into buf (records may wrap around the data area). */
static const uint8_t *rec_at(const struct ring *r, uint64_t off, size_t len, uint8_t *buf)
{
	const uint8_t *data = r->base + r->data_off;
	size_t at = off % r->data_size;

	if (at + len <= r->data_size)
		return data + at;
	size_t first = r->data_size - at;
	memcpy(buf, data + at, first);
	memcpy(buf + first, data, len - first);
	return buf;
}

struct cursor {
	struct ring *r;
	uint64_t head, tail;
	uint32_t source;
	const uint8_t *rec; /* the current record (header included), or NULL */
	uint64_t time_ns; /* its time (samples), 0 for other records */
	uint8_t buf[65536 + 64];
};

static void cursor_next(struct cursor *c)
{
	c->rec = NULL;
	if (!c->r || c->tail >= c->head)
		return;
	struct perf_event_header h;
	memcpy(&h, rec_at(c->r, c->tail, sizeof(h), c->buf), sizeof(h));
	if (h.size < sizeof(h) || h.size > c->head - c->tail) {
		c->tail = c->head; /* cannot happen with a sane kernel: drop the rest */
		return;
	}
	c->rec = rec_at(c->r, c->tail, h.size, c->buf);
	c->time_ns = 0;
	if (h.type == PERF_RECORD_SAMPLE && h.size >= 32)
		memcpy(&c->time_ns, c->rec + 8 + 16, 8); /* after ip, pid/tid */
	else if (h.type == PERF_RECORD_SWITCH && h.size >= 24)
		memcpy(&c->time_ns, c->rec + 8 + 8, 8); /* sample_id_all: pid/tid, then time */
	c->tail += h.size;
}

/* The writer's end on a thread with a descriptor table of its own (fdown.c): the unwinder's
 * debug files are that table's numbers, which end with the thread; a writer started later makes
 * its own. */
void d9__profile_writer_end(void)
{
	if (!d9__self.fd_private)
		return;
	if (P.unw)
		d9__unwind_free(P.unw);
	P.unw = NULL;
	P.unw_tried = 0;
}

static struct d9__unwinder *unwinder(void)
{
	if (!P.unw_tried) {
		P.unw_tried = 1;
		P.unw = d9__unwind_new(); /* logs why not */
		if (!P.unw)
			d9__defs_recorder(D9_REC_UNWIND, D9_REC_OFF, 0,
				"libdw.so.1 not usable: frame-pointer stacks only");
	}
	return P.unw;
}

/* ---- the process's mappings (writer thread): what validates a frame-pointer chain ----------- */

struct mapping {
	uint64_t lo, hi;
	int exec;
};

static struct {
	struct mapping *m; /* sorted by address, not overlapping */
	size_t n, cap;
	int stale; /* modules changed: read again before the next check */
	uint64_t read_ns; /* CLOCK_MONOTONIC of the last read, 0: never */
	unsigned anon; /* anonymous code mappings given to the module map */
	uint64_t anon_at[ANON_MAX][2]; /* their ranges */
	size_t recent[4]; /* indices of mappings found last (maps_find); any index may be stale */
	unsigned next_recent;
} M;

/* Anonymous code (JIT: LuaJIT traces, ...) becomes a module of its own, once per range, so that a
 * stack through it reads as code, not as garbage. */
static void maps_anon(uint64_t lo, uint64_t hi)
{
	for (unsigned i = 0; i < M.anon; i++)
		if (M.anon_at[i][0] == lo && M.anon_at[i][1] == hi)
			return;
	if (M.anon == ANON_MAX)
		return;
	M.anon_at[M.anon][0] = lo;
	M.anon_at[M.anon][1] = hi;
	M.anon++;
	d9__defs_module("[anon]", lo, hi, 0, NULL, 0);
}

static void maps_add(uint64_t lo, uint64_t hi, int exec)
{
	if (M.n == M.cap) {
		size_t cap = M.cap ? M.cap * 2 : 512;
		if (cap > MAPS_MAX)
			return; /* an address in the mappings left out is taken as unknown: cut there */
		struct mapping *m = realloc(M.m, cap * sizeof(*m));
		if (!m)
			return;
		M.m = m;
		M.cap = cap;
	}
	M.m[M.n++] = (struct mapping){ lo, hi, exec };
}

/* Reads /proc/self/maps (its descriptor is closed before this returns). Kept as it was when the
 * file cannot be read. */
static void maps_read(void)
{
	static char buf[16384]; /* writer thread only */
	size_t have = 0, n_old = M.n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	M.read_ns = d9__mono_ns();
	M.stale = 0;
	if (fd < 0) {
		d9__log_once(D9_LOG_WARN, "cannot read /proc/self/maps (%s): frame-pointer stacks are "
			"cut at their first frame", strerror(errno));
		d9__defs_recorder(D9_REC_MAPS, D9_REC_LIMITED, errno, "/proc/self/maps");
		return;
	}
	M.n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n'))) {
			unsigned long long lo, hi;
			char perms[8];
			int name = 0;
			*nl = 0;
			if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &name) >= 3 &&
				lo < hi) {
				maps_add(lo, hi, perms[2] == 'x');
				if (perms[2] == 'x' && name > 0 && (!line[name] ||
					!strncmp(line + name, "[anon", 5)))
					maps_anon(lo, hi);
			}
			line = nl + 1;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0; /* a line longer than the buffer (a path): drop it */
	}
	close(fd); /* opened just above by this thread: ours */
	if (!M.n && n_old) {
		d9__log_once(D9_LOG_WARN, "/proc/self/maps read empty: frame-pointer stacks are cut "
			"at their first frame");
		d9__defs_recorder(D9_REC_MAPS, D9_REC_LIMITED, 0, "/proc/self/maps read empty");
	}
}

static const struct mapping *maps_find(uint64_t a)
{
	size_t lo = 0, hi = M.n;

	/* a sample's frames lie in a few mappings (the stack, the program, libc), sample after
	 * sample: those found last first */
	for (int k = 0; k < 4; k++) {
		size_t i = M.recent[k];
		if (i < M.n && a >= M.m[i].lo && a < M.m[i].hi)
			return &M.m[i];
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a < M.m[mid].lo) {
			hi = mid;
		} else if (a >= M.m[mid].hi) {
			lo = mid + 1;
		} else {
			M.recent[M.next_recent++ % 4] = mid;
			return &M.m[mid];
		}
	}
	return NULL;
}

/* 1 unless the page holding a is known to be unmapped: mincore says ENOMEM for an unmapped range
 * (a question to the kernel: nothing of the host's memory is read). */
static int maybe_mapped(uint64_t a)
{
	static uint64_t page_size; /* writer thread only */
	/* an inherited seccomp filter may kill at it (systemd's @system-service leaves it out):
	 * then every page may be */
	unsigned char vec;

	if (a >= KERNEL_ADDR)
		return 0;
	if (!page_size)
		page_size = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t page = a & ~(page_size - 1);
	if (!d9__call_survives(SYS_mincore))
		return 1;
	return mincore((void *)(uintptr_t)page, 1, &vec) == 0 || errno != ENOMEM;
}

/* The mapping holding a, re-reading the maps (at most every MAPS_REFRESH_NS, 100 ms: kresd's
 * LuaJIT maps new traces all the time) when none does and the page is mapped now: a library
 * mapped since, a thread stack, JIT code. Garbage frames of code built without frame pointers
 * also land here, in no mapping at all: those re-read the maps only when the table is
 * MAPS_MAX_AGE_NS old (so mappings removed since leave it within a second). Before mincore
 * sorted them out, they re-read the maps every 100 ms: on redis with 99 Hz profiling a quarter
 * of the writer's CPU (agent/COST.md, sections 8 and 10). */
static const struct mapping *mapping_of(uint64_t a)
{
	if (M.stale || !M.read_ns)
		maps_read();
	const struct mapping *m = maps_find(a);
	if (!m) {
		uint64_t age = d9__mono_ns() - M.read_ns;
		if (age >= MAPS_MAX_AGE_NS || (age >= MAPS_REFRESH_NS && maybe_mapped(a))) {
			maps_read();
			m = maps_find(a);
		}
	}
	return m;
}

/* 1 when a return address lies in executable memory. */
static int is_code(uint64_t a)
{
	const struct mapping *m = mapping_of(a - 1); /* the call instruction */

	return m && m->exec;
}

/* The sample's user registers and stack copy, when it has them. */
struct copy {
	int ok;
	uint64_t ip, sp, bp;
	const uint8_t *stack;
	uint64_t len; /* bytes really copied (dyn_size) */
	uint64_t regs[64]; /* in PERF_REG bit order of P.regs_mask */
};

static uint64_t copy_word(const struct copy *c, uint64_t at)
{
	uint64_t v;

	memcpy(&v, c->stack + (at - c->sp), 8);
	return v;
}

/* How many leading frames of the kernel's frame-pointer chain k[0..n) are true: each return
 * address must be code (an executable mapping), and each frame record must lie above the
 * previous one. Where the stack copy holds the records, the chain is walked again over it from
 * the sampled BP: the records must climb strictly within [SP, the copy's end) and hold the
 * return addresses the kernel reported. Past the copy, a record cannot be checked: the frame
 * pointer must still lie within the stack's mapping, and a return address that repeats the
 * previous one is taken for a loop. *bad = 1 when a frame failed (the chain is cut there).
 * *open_end = 1 when the copy shows that the chain did not end at the outermost frame pointer (0)
 * but at one the kernel could not follow: a frame without a frame pointer broke it. */
static uint32_t fp_check(const uint64_t *k, uint32_t n, const struct copy *c, int *bad,
	int *open_end)
{
	int walk = c && c->ok && c->bp; /* still walking the records inside the copy */
	uint32_t i_bad = 0;
	uint64_t bp = walk ? c->bp : 0, floor = walk ? c->sp : 0, top = 0;

	*bad = *open_end = 0;
	if (walk) {
		const struct mapping *m = mapping_of(c->sp);
		top = m ? m->hi : 0;
	}
	for (uint32_t i = 1; i < n; i++) {
		i_bad = i;
		if (!is_code(k[i]))
			goto bad;
		if (walk) {
			if (bp < floor || (bp & 7) || (top && bp >= top))
				goto bad; /* a record below its callee's, or outside the stack */
			if (bp + 16 <= c->sp + c->len) {
				if (copy_word(c, bp + 8) != k[i])
					goto bad; /* not the chain the kernel walked: it changed meanwhile */
				floor = bp + 16;
				bp = copy_word(c, bp);
				continue;
			}
			walk = 0; /* the rest of the chain lies above the copy */
			continue;
		}
		if (k[i] == k[i - 1])
			goto bad;
	}
	*open_end = walk && bp != 0;
	return n;
bad:
	*bad = 1;
	return i_bad;
}

/* The leading frames of ips[0..n) that lie in code; *how gets D9_UNWIND_TRUNCATED when that is
 * not all of them. Frames from the DWARF unwind pass this but for a frame the CFI took from a
 * stack slot the program had not filled yet (a function's first instructions). */
static uint32_t code_prefix(const uint64_t *ips, uint32_t n, uint32_t *how)
{
	for (uint32_t i = 1; i < n; i++) { /* the sampled IP is where the CPU was: it stays */
		const struct mapping *m = mapping_of(ips[i] - 1);
		if (!m || !m->exec) {
			*how |= D9_UNWIND_TRUNCATED;
			return i;
		}
	}
	return n;
}

/* Picks a sample's stack from its DWARF unwind dw[0..ndw) (complete: it reached the outermost
 * frame) and its frame-pointer chain fp[0..nok) (the frames that passed validation; bad: the
 * chain went on with a refused frame; fp_complete: it ended at the outermost frame pointer).
 * See sample_stack for the rules per D9_STACKS. */
static uint32_t pick(const uint64_t *dw, uint32_t ndw, int complete, const uint64_t *fp,
	uint32_t nok, int bad, int fp_complete, uint64_t *ips, uint32_t *how)
{
	uint32_t rejected = bad ? D9_UNWIND_FP_REJECTED : 0;
	uint32_t root_how = D9_UNWIND_TRUNCATED;

	/* a DWARF stack that reaches a runtime's root (a coroutine's entry) is complete too: a
	 * frame-pointer chain through code without frame pointers skips frames (libc's usleep
	 * between a handler and clock_nanosleep) and must not win over it */
	if (ndw && !complete) {
		cut_at_root(dw, ndw, &root_how);
		complete = !(root_how & D9_UNWIND_TRUNCATED);
	}
	/* auto, the DWARF stack short of the root: its frames, which are exact, then the chain's
	 * frames past the deepest frame both have. A chain through code without frame pointers
	 * skips the caller of a leaf without them (the agent's interposer under libc's read), and
	 * DWARF stops where the stack copy ends: together they give the whole stack. */
	if (ndw > 1 && nok > 1 && !complete && P.stacks == D9_STACKS_AUTO) {
		for (uint32_t i = ndw - 1; i >= 1; i--)
			for (uint32_t j = 1; j < nok; j++) {
				if (dw[i] != fp[j])
					continue;
				uint32_t n = i + 1, more = nok - j - 1;
				if (n + more > MAX_FRAMES)
					more = MAX_FRAMES - n;
				/* a chain cut short that adds nothing must not cut the DWARF frames */
				if (n + more <= ndw && !fp_complete)
					goto whole;
				memcpy(ips, dw, n * 8);
				memcpy(ips + n, fp + j + 1, more * 8);
				*how = D9_UNWIND_DWARF | (fp_complete ? 0 : D9_UNWIND_TRUNCATED) | rejected;
				P.unwound++;
				return code_prefix(ips, n + more, how);
			}
	}
whole:
	if (ndw && (complete || P.stacks == D9_STACKS_DWARF || !nok ||
		(ndw >= nok && !fp_complete))) {
		memcpy(ips, dw, ndw * 8);
		*how = D9_UNWIND_DWARF | (complete ? 0 : D9_UNWIND_TRUNCATED) | rejected;
		P.unwound++;
		return code_prefix(ips, ndw, how);
	}
	memcpy(ips, fp, nok * 8);
	*how = D9_UNWIND_FP | (fp_complete ? 0 : D9_UNWIND_TRUNCATED) | rejected;
	return nok;
}

/* Decodes one PERF_RECORD_SAMPLE into a stack (innermost first); *how: the unwinder that made it
 * (enum d9_unwinder) and D9_UNWIND_* flags. Per D9_STACKS:
 *   fp     the kernel's chain, cut at its first frame that fp_check refuses (truncated);
 *   dwarf  the DWARF unwind of the copied stack (truncated unless it reached the outermost frame);
 *   auto   the DWARF unwind when it reached the outermost frame; else the kernel's chain when
 *          every frame of it passed fp_check and it ended at the outermost frame pointer; else
 *          the longer of the two (the chain cut at its first bad frame), marked truncated. */
static uint32_t sample_stack(const uint8_t *rec, size_t size, uint64_t *ips, uint32_t *how)
{
	const uint8_t *p = rec + 8 + 24, *end = rec + size; /* after ip, pid/tid, time */
	uint64_t fp[MAX_FRAMES], dw[MAX_FRAMES];
	uint32_t nfp = 0, nok = 0, ndw = 0;
	int bad = 0, open_end = 0, complete = 0, have_fp = 0;
	uint64_t ip;
	struct copy c;

	memset(&c, 0, offsetof(struct copy, regs)); /* regs: only read once filled */
	memcpy(&ip, rec + 8, 8);
	*how = D9_UNWIND_IP | D9_UNWIND_TRUNCATED;
	if (P.stacks != D9_STACKS_DWARF) {
		uint64_t nr;
		if (p + 8 > end)
			goto done;
		memcpy(&nr, p, 8);
		p += 8;
		if (nr > (uint64_t)(end - p) / 8)
			goto done;
		for (uint64_t i = 0; i < nr; i++) {
			uint64_t a;
			memcpy(&a, p + i * 8, 8);
			if (a >= KERNEL_ADDR || !a) /* context markers (PERF_CONTEXT_*), kernel frames */
				continue;
			if (nfp < MAX_FRAMES)
				fp[nfp++] = a;
		}
		p += nr * 8;
		have_fp = 1;
	}
	if (P.stacks != D9_STACKS_FP) {
		uint64_t abi, nregs = (uint64_t)__builtin_popcountll(P.regs_mask);
		if (p + 8 > end)
			goto check;
		memcpy(&abi, p, 8);
		p += 8;
		if (abi) {
			if (p + nregs * 8 > end)
				goto check;
			/* the registers may be unaligned in a copied record: copy them */
			memcpy(c.regs, p, nregs * 8);
			p += nregs * 8;
		}
		uint64_t len;
		if (p + 8 > end)
			goto check;
		memcpy(&len, p, 8);
		p += 8;
		if (len > (uint64_t)(end - p))
			goto check;
		uint64_t dyn = 0;
		if (len && p + len + 8 <= end)
			memcpy(&dyn, p + len, 8);
		if (dyn > len)
			dyn = len;
		if (abi && dyn) {
			c.ok = 1;
			c.stack = p;
			c.len = dyn;
			int k = 0;
			for (int bit = 0; bit < 64; bit++) {
				if (!(P.regs_mask >> bit & 1))
					continue;
				if (bit == PERF_REG_BP)
					c.bp = c.regs[k];
				else if (bit == PERF_REG_SP)
					c.sp = c.regs[k];
				k++;
			}
		}
		struct d9__unwinder *u = c.ok ? unwinder() : NULL;
		if (u) {
			int n = d9__unwind(u, c.regs, P.regs_mask, c.stack, c.len, dw, MAX_FRAMES,
				&complete);
			if (n > 0)
				ndw = (uint32_t)n;
		}
	}
check:
	if (have_fp && nfp)
		nok = fp_check(fp, nfp, &c, &bad, &open_end);
	if (ndw || nok)
		/* a chain that ends by itself ends at the outermost frame pointer (0), unless the
		 * copy shows otherwise; one that holds only the sampled IP ended at a frame pointer
		 * that was no pointer */
		return pick(dw, ndw, complete, fp, nok, bad,
			!bad && !open_end && nok > 1 && nfp < MAX_FRAMES, ips, how);
done:
	if (ip && ip < KERNEL_ADDR) {
		ips[0] = ip;
		return 1;
	}
	return 0;
}

/* The stack of a copy taken in the process itself (a ctimer sample, a blocking call): regs in
 * the PERF_REG order of D9__UNWIND_REGS_MASK, stack[0..len) copied from regs' SP up. Its
 * frame-pointer chain walked over the copy (validated as in fp_check) and its DWARF unwind,
 * picked as for perf samples. */
static uint32_t copy_stack(const uint64_t *regs, const uint8_t *stack, uint32_t len,
	uint64_t *ips, uint32_t *how)
{
	struct copy c = { .ok = len > 0, .ip = regs[8], .sp = regs[7], .bp = regs[6],
		.stack = stack, .len = len };
	uint64_t fp[MAX_FRAMES], dw[MAX_FRAMES];
	uint32_t nfp = 1, ndw = 0;
	int complete = 0, bad = 0, end = 0;

	memcpy(c.regs, regs, CT_NREGS * sizeof(*regs));
	fp[0] = c.ip;
	*how = D9_UNWIND_IP | D9_UNWIND_TRUNCATED;
	if (!c.ok) {
		ips[0] = c.ip;
		return c.ip ? 1 : 0;
	}
	if (P.stacks != D9_STACKS_DWARF) {
		uint64_t bp = c.bp, floor = c.sp;
		while (nfp < MAX_FRAMES) {
			if (!bp) {
				end = 1; /* the outermost frame pointer */
				break;
			}
			if (bp < floor || (bp & 7)) {
				bad = 1;
				break;
			}
			if (bp + 16 > c.sp + c.len)
				break; /* above the copy: cut, not refused */
			uint64_t ret = copy_word(&c, bp + 8);
			if (!is_code(ret)) {
				bad = 1;
				break;
			}
			fp[nfp++] = ret;
			floor = bp + 16;
			bp = copy_word(&c, bp);
		}
	}
	struct d9__unwinder *u = P.stacks != D9_STACKS_FP ? unwinder() : NULL;
	if (u) {
		int n = d9__unwind(u, c.regs, D9__UNWIND_REGS_MASK, c.stack, c.len, dw, MAX_FRAMES,
			&complete);
		if (n > 0)
			ndw = (uint32_t)n;
	}
	if (P.stacks == D9_STACKS_DWARF)
		nfp = 0;
	if (!ndw && !nfp) {
		ips[0] = c.ip;
		return c.ip ? 1 : 0;
	}
	return pick(dw, ndw, complete, fp, nfp, bad, end && nfp > 1, ips, how);
}

/* Converts a CLOCK_MONOTONIC time to event clock ticks. */
static uint64_t mono_to_ticks(const struct d9__anchor *a, uint64_t ns)
{
	if (ns >= a->mono_ns)
		return a->ticks + d9_agent_ns_to_ticks(ns - a->mono_ns);
	uint64_t back = d9_agent_ns_to_ticks(a->mono_ns - ns);
	return back < a->ticks ? a->ticks - back : 0;
}

static void drain_perf(struct out *o, const struct d9__anchor *a)
{
	static struct cursor cs[2]; /* writer thread only */
	struct d9__prof *p = o->p;
	struct ring *rings[2] = { p->cpu.base ? &p->cpu : NULL, p->sw.base ? &p->sw : NULL };

	for (int i = 0; i < 2; i++) {
		struct cursor *c = &cs[i];
		c->r = rings[i];
		c->source = i == 0 ? D9_CPU_ON : D9_CPU_OFF;
		c->rec = NULL;
		if (!c->r)
			continue;
		struct perf_event_mmap_page *m = (void *)c->r->base;
		c->head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
		c->tail = m->data_tail;
		cursor_next(c);
	}
	for (;;) {
		/* the earlier record of the two rings (other records first) */
		struct cursor *c = NULL;
		for (int i = 0; i < 2; i++)
			if (cs[i].rec && (!c || cs[i].time_ns < c->time_ns))
				c = &cs[i];
		if (!c)
			break;
		struct perf_event_header h;
		memcpy(&h, c->rec, sizeof(h));
		if (h.type == PERF_RECORD_SAMPLE) {
			uint64_t ips[MAX_FRAMES];
			uint32_t how;
			uint32_t n = sample_stack(c->rec, h.size, ips, &how);
			uint64_t when = mono_to_ticks(a, c->time_ns);
			int unknown;
			uint64_t co = coroutine_at(p->swlog, when, &unknown);
			if (unknown)
				P.untagged++;
			if (c->source == D9_CPU_ON) {
				emit(o, when, co, D9_CPU_ON, ips, n, how,
					d9__g.cfg.cpu_hz ? 1000000000u / d9__g.cfg.cpu_hz : D9_UNKNOWN);
			} else if (!c->r->switches) {
				emit(o, when, co, D9_CPU_OFF, ips, n, how, D9_UNKNOWN);
			} else {
				emit_off(o, 0); /* its switch-in was lost: time unknown */
				p->off.on = 1;
				p->off.mono_ns = c->time_ns;
				p->off.ticks = when;
				p->off.co = co;
				p->off.how = how;
				p->off.stack = sample_stack_id(ips, n, &p->off.how);
			}
		} else if (h.type == PERF_RECORD_SWITCH && !(h.misc & PERF_RECORD_MISC_SWITCH_OUT)) {
			emit_off(o, c->time_ns);
		} else if (h.type == PERF_RECORD_LOST && h.size >= 24) {
			uint64_t lost;
			memcpy(&lost, c->rec + 16, 8);
			p->lost += lost;
		} else if ((h.type == PERF_RECORD_THROTTLE || h.type == PERF_RECORD_UNTHROTTLE) &&
			h.size >= 16 && c->source == D9_CPU_ON) {
			/* the kernel stopped sampling for a while (perf_event_max_sample_rate): the
			 * samples of that time were never taken; for cpu-clock their number is known */
			uint64_t when;
			memcpy(&when, c->rec + 8, 8);
			if (h.type == PERF_RECORD_THROTTLE)
				p->throttled_at = when;
			else if (p->throttled_at && when > p->throttled_at && d9__g.cfg.cpu_hz)
				p->lost += (when - p->throttled_at) / (1000000000u / d9__g.cfg.cpu_hz);
			if (h.type == PERF_RECORD_UNTHROTTLE)
				p->throttled_at = 0;
		}
		cursor_next(c);
	}
	for (int i = 0; i < 2; i++)
		if (cs[i].r) {
			struct perf_event_mmap_page *m = (void *)cs[i].r->base;
			__atomic_store_n(&m->data_tail, cs[i].head, __ATOMIC_RELEASE);
		}
}

static void drain_ct(struct out *o)
{
	if (__atomic_load_n(&ct_nocopy, __ATOMIC_RELAXED)) {
		d9__log_once(D9_LOG_WARN, "ctimer samples cannot copy their stack (process_vm_readv is "
			"refused here): their stacks hold the sampled instruction only");
		d9__defs_recorder(D9_REC_STACK_COPY, D9_REC_OFF, 0, "process_vm_readv refused");
	}
	struct ct_ring *r = o->p->ct;
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);

	for (uint64_t i = r->tail; i < head; i++) {
		struct ct_slot *s = &r->s[i % CT_SLOTS];
		uint64_t ips[MAX_FRAMES];
		uint32_t how;
		uint32_t n = copy_stack(s->regs, s->stack, s->len, ips, &how);
		emit(o, s->t, s->co, D9_CPU_ON, ips, n, how, 1000000000u / d9__g.cfg.cpu_hz);
	}
	__atomic_store_n(&r->tail, head, __ATOMIC_RELEASE);
	o->p->lost += __atomic_exchange_n(&r->lost, 0, __ATOMIC_RELAXED);
}

/* ---- blocking-call stacks ------------------------------------------------------------------------
 * A BlockingCall's stack is taken without unwinding in the host's thread (DESIGN.md, "Blocking-call
 * stacks"): on the slow path (the call took at least D9_BLOCKING_THRESHOLD) the thread copies its
 * registers and the top of its stack into a free slot of one process-wide pool and records the
 * BlockingCall with its stack field as a 4-byte varint 0. The writer, before it writes any chunk
 * it took, unwinds every filled slot like a ctimer sample, interns the Stack and writes its id
 * into those four bytes. A slot is filled before its thread can hand off the block holding the
 * event (the thread itself does that, later), so its block is never written unpatched. No
 * descriptor, no lock, no allocation but the pool's one mapping; a full pool records the call
 * without a stack (counted, said once). */

#define BS_SLOTS 32u /* slots of the pool: calls past the threshold between two writer passes */
#define BS_STACK 32768u /* bytes of stack copied per call, at most */

enum { BS_FREE, BS_FILLING, BS_READY };

struct bs_slot {
	uint32_t state; /* atomic: BS_FREE -> BS_FILLING (the host thread) -> BS_READY -> BS_FREE */
	uint32_t skip; /* innermost frames that are the agent's (the capture, the interposer) */
	uint32_t len; /* bytes of stack copied */
	uint32_t off; /* offset of the raw record's stack word in blk->data */
	struct d9__block *blk; /* the block holding the BlockingCall (still unwritten: see above) */
	uint64_t regs[CT_NREGS]; /* in PERF_REG order of D9__UNWIND_REGS_MASK */
	uint8_t stack[BS_STACK];
};

static struct bs_slot *bs_pool; /* atomic: mapped at the first call past the threshold */
static int bs_nopool; /* the mapping failed: no blocking-call stacks in this process */
static uint32_t bs_ready; /* atomic: slots in BS_READY */
static uint64_t bs_lost; /* atomic: BlockingCalls recorded without a stack for want of a slot */

/* A free slot of the pool, now BS_FILLING, or NULL (pool full, or none). */
static struct bs_slot *bs_claim(void)
{
	struct bs_slot *pool = __atomic_load_n(&bs_pool, __ATOMIC_ACQUIRE);

	if (!pool && !__atomic_load_n(&bs_nopool, __ATOMIC_RELAXED)) {
		/* address space only: a slot's pages become resident when a call fills them */
		void *m = mmap(NULL, BS_SLOTS * sizeof(struct bs_slot), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED) {
			__atomic_store_n(&bs_nopool, 1, __ATOMIC_RELAXED); /* said by the writer */
			return NULL;
		}
		struct bs_slot *none = NULL;
		if (!__atomic_compare_exchange_n(&bs_pool, &none, (struct bs_slot *)m, 0,
			__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			munmap(m, BS_SLOTS * sizeof(struct bs_slot)); /* another thread's came first */
		pool = __atomic_load_n(&bs_pool, __ATOMIC_ACQUIRE);
	}
	for (uint32_t i = 0; pool && i < BS_SLOTS; i++) {
		uint32_t free_ = BS_FREE;
		if (__atomic_load_n(&pool[i].state, __ATOMIC_RELAXED) == BS_FREE &&
			__atomic_compare_exchange_n(&pool[i].state, &free_, BS_FILLING, 0,
				__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return &pool[i];
	}
	return NULL;
}

/* Copies the stack from sp up, as far as it is readable (at most BS_STACK bytes), without ever
 * faulting: one iovec per page, so that process_vm_readv stops at the first unreadable one (the
 * top of a coroutine stack, a guard page). Returns the bytes copied. */
static uint32_t bs_copy(uint8_t *to, uint64_t sp)
{
	struct iovec local[BS_STACK / 4096 + 1], remote[BS_STACK / 4096 + 1];
	uint64_t at = sp, end = sp + BS_STACK;
	unsigned long n = 0;

	if (__atomic_load_n(&ct_nocopy, __ATOMIC_RELAXED) || !sp)
		return 0;
	while (at < end) {
		uint64_t next = (at | 4095) + 1 < end ? (at | 4095) + 1 : end;
		local[n] = (struct iovec){ to + (at - sp), (size_t)(next - at) };
		remote[n] = (struct iovec){ (void *)(uintptr_t)at, (size_t)(next - at) };
		n++;
		at = next;
	}
	/* getpid() every time: a forked child must read its own memory, not its parent's */
	ssize_t r = syscall(SYS_process_vm_readv, getpid(), local, n, remote, n, 0UL);
	if (r < 0 && (errno == ENOSYS || errno == EPERM || errno == EACCES)) {
		__atomic_store_n(&ct_nocopy, 1, __ATOMIC_RELAXED); /* said by the writer */
		return 0;
	}
	return r > 0 ? (uint32_t)r & ~7u : 0;
}

/* BlockingCall as a raw record (d9-agent.h) whose stack word (0 for now) is at *field: the writer
 * fills it (bs_drain) before it encodes the block (raw.c). */
static int bs_enc(struct d9__raw *r, uint64_t now, uint64_t start, uint64_t coroutine,
	uint64_t call, uint32_t fd_kind, uint64_t **field)
{
	uint64_t *p = r->p;

	if (d9_raw_call(r, now, D9_EV_BLOCKING_CALL, coroutine, call, fd_kind,
		    d9_agent_ticks_to_ns(now - start), 0) != 0)
		return -28;
	*field = p + D9__RAW_CALL_LAST;
	return 0;
}

void d9_rec_blocking_call_regs(uint64_t start, uint64_t coroutine, uint64_t call,
	uint32_t fd_kind, const uint64_t *regs, uint32_t skip)
{
	struct d9__thr *t = &d9__self;
	int saved = errno;

	t->busy = 1; /* the calls below are the agent's */
	struct bs_slot *s = bs_claim();
	if (s) {
		memcpy(s->regs, regs, sizeof(s->regs));
		s->skip = skip;
		s->len = bs_copy(s->stack, regs[7]);
	} else {
		__atomic_add_fetch(&bs_lost, 1, __ATOMIC_RELAXED);
	}
	t->busy = 0;
	if (!s) {
		errno = saved;
		d9_rec_blocking_call(start, coroutine, call, fd_kind, 0);
		return;
	}
	/* the thread must own its block from the event to the slot's release: a parked thread's
	 * block may be taken by the writer (d9__collect); a running one hands it off itself */
	d9__unpark(t);
	uint64_t now = d9__now();
	uint64_t *field = NULL;
	int rc = d9__enabled ? bs_enc(&t->raw, now, start, coroutine, call, fd_kind, &field) : -1;
	for (unsigned r = 0; rc != 0 && d9__slow(t, r); r++) {
		now = d9__now();
		rc = bs_enc(&t->raw, now, start, coroutine, call, fd_kind, &field);
	}
	if (rc != 0 || !t->blk) {
		/* not recorded (dropped and counted, or recording off): nothing to fill */
		__atomic_store_n(&s->state, BS_FREE, __ATOMIC_RELEASE);
		errno = saved;
		return;
	}
	s->blk = t->blk;
	s->off = (uint32_t)((uint8_t *)field - t->blk->data);
	__atomic_store_n(&s->state, BS_READY, __ATOMIC_RELEASE);
	if (__atomic_add_fetch(&bs_ready, 1, __ATOMIC_RELAXED) == BS_SLOTS / 4) {
		/* a quarter of the pool waits: wake the writer rather than lose stacks (rare: a call
		 * past the threshold is) */
		d9__writer_wake(); /* no lock: a futex word (record.c) */
	}
	errno = saved;
}

/* Writer: unwinds every filled slot, interns its Stack and writes the id into its BlockingCall.
 * Runs before the writer writes the chunks it has taken (d9__profile_drain). */
static void bs_drain(void)
{
	struct bs_slot *pool = __atomic_load_n(&bs_pool, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&bs_nopool, __ATOMIC_RELAXED)) {
		d9__log_once(D9_LOG_WARN, "blocking-call stacks are off: cannot map their buffer (%zu "
			"KiB)", BS_SLOTS * sizeof(struct bs_slot) >> 10);
		d9__defs_recorder(D9_REC_BLOCKING_STACKS, D9_REC_OFF, ENOMEM,
			"mmap of the blocking-call stack buffer");
	}
	if (__atomic_load_n(&bs_lost, __ATOMIC_RELAXED))
		d9__log_once(D9_LOG_WARN, "more than %u calls past D9_BLOCKING_THRESHOLD between two "
			"writer passes: some BlockingCalls are recorded without a stack", BS_SLOTS);
	for (uint32_t i = 0; pool && i < BS_SLOTS; i++) {
		struct bs_slot *s = &pool[i];
		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != BS_READY)
			continue;
		if (!s->len && __atomic_load_n(&ct_nocopy, __ATOMIC_RELAXED)) {
			d9__log_once(D9_LOG_WARN, "blocking-call stacks cannot copy the stack "
				"(process_vm_readv is refused here): BlockingCalls have no stack");
			d9__defs_recorder(D9_REC_BLOCKING_STACKS, D9_REC_OFF, 0,
				"process_vm_readv refused");
		}
		uint64_t ips[MAX_FRAMES], id = 0;
		uint32_t how, n = copy_stack(s->regs, s->stack, s->len, ips, &how);
		if (n > s->skip) {
			n = cut_at_root(ips + s->skip, n - s->skip, &how);
			id = d9_agent_stack(ips + s->skip, n);
		}
		/* the raw record's stack word (bs_enc); the block is still raw: it is encoded
		 * after this drain (writer.c, write_list) */
		memcpy(s->blk->data + s->off, &id, sizeof(id));
		__atomic_store_n(&s->state, BS_FREE, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&bs_ready, 1, __ATOMIC_RELAXED);
	}
}

/* In a forked child: the slots name the parent's blocks, and threads that were filling one are
 * gone. The pool is unmapped, not walked: marking each of its 32 slots free wrote a page of each
 * (a page fault apiece, in every forked child); the child maps its own at its first call past
 * the threshold. */
static void bs_child(void)
{
	struct bs_slot *pool = bs_pool;

	if (pool)
		munmap(pool, BS_SLOTS * sizeof(struct bs_slot));
	bs_pool = NULL;
	bs_ready = 0;
}

/* ctimer: the program set its own disposition for our signal after we installed the handler (a
 * handler of its own, or SIG_DFL in a reset loop). The timers stop at once: the program's
 * handler must not get our signals, and an RT signal's default action would kill it. */
static void ct_check_signal(void)
{
	struct sigaction cur;

	if (P.handler != 1 || sigaction(d9__g.cfg.profile_signal, NULL, &cur) != 0 ||
		((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == ct_handler))
		return;
	d9__lock(&P.lock);
	P.handler = -2;
	for (struct d9__prof *p = P.list; p; p = p->next)
		if (p->has_timer)
			ct_arm(p, 0);
	d9__unlock(&P.lock);
	d9__log(D9_LOG_WARN, "the program changed the disposition of signal %d (D9_PROFILE_SIGNAL): "
		"ctimer CPU sampling stopped", d9__g.cfg.profile_signal);
	d9__defs_recorder(D9_REC_CPU_PROFILE, D9_REC_OFF, 0, "ctimer: the program changed the "
		"disposition of D9_PROFILE_SIGNAL");
}

struct d9__block *d9__profile_drain(void)
{
	struct d9__block *list = NULL;
	struct d9__anchor a;

	bs_drain(); /* blocking-call stacks: also without profiling */
	if (!P.on)
		return NULL;
	ct_check_signal();
	d9__clock_anchor(&a);
	d9__lock(&P.lock);
	struct d9__prof **pp = &P.list;
	/* threads add themselves at the head: the rest of the list is the writer's */
	struct d9__prof *first = P.list;
	P.draining = 1;
	d9__unlock(&P.lock);
	struct out o = { .tail = &list };
	for (struct d9__prof *p = first; p;) {
		struct d9__prof *next = p->next;
		int idle = 0;
		if (!__atomic_compare_exchange_n(&p->hold, &idle, 1, 0, __ATOMIC_ACQUIRE,
			__ATOMIC_RELAXED)) {
			p = next; /* its thread is exiting and copying its rings: at the next drain */
			continue;
		}
		/* read before draining: a dead worker's events were disabled before it said so */
		int dead = __atomic_load_n(&p->dead, __ATOMIC_ACQUIRE);
		if (dead)
			p->lost += __atomic_exchange_n(&p->exit_lost, 0, __ATOMIC_RELAXED);
		o.p = p;
		if (p->cpu.base || p->sw.base)
			drain_perf(&o, &a);
		if (p->ct)
			drain_ct(&o);
		if (dead)
			emit_off(&o, 0); /* it never ran again */
		if (p->lost)
			record_lost(&o, a.ticks);
		out_finish(&o);
		__atomic_store_n(&p->hold, 0, __ATOMIC_RELEASE);
		if (dead && !p->lost) {
			d9__lock(&P.lock);
			for (pp = &P.list; *pp && *pp != p; pp = &(*pp)->next)
				;
			if (*pp)
				*pp = p->next;
			d9__unlock(&P.lock);
			prof_free(p);
		}
		p = next;
	}
	return list;
}

/* How often the writer must drain: 0 when profiling is off. */
uint64_t d9__profile_interval_ns(void)
{
	return P.on ? 10000000u : 0;
}

void d9__profile_modules_changed(void)
{
	M.stale = 1;
	if (P.unw)
		d9__unwind_modules_changed(P.unw);
}
