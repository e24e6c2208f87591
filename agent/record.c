/* record.c: per-thread recording. The hot path (d9-agent.h) stores raw records into the
 * thread's block, which the writer encodes (raw.c); this file is everything around it: taking
 * and handing off blocks, counting drops when the memory cap is reached (never blocking), the
 * registry of recording threads, and the park/steal protocol that lets the writer flush threads
 * that went quiet. It must never block a recording thread on the writer or on I/O.
 * agent/DESIGN.md explains the protocol. */
#include "internal.h"
#include "schedstat.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

__thread struct d9__thr d9__self __attribute__((tls_model("initial-exec")));
int d9__enabled;
int d9__no_calls;
struct d9__agent d9__g;

enum { ROLE_DEAD = 3 }; /* a thread past its exit destructor: never records again */

static void thread_exit(void *arg);

void d9__record_init(void)
{
	struct d9__agent *g = &d9__g;

	pthread_mutex_init(&g->pool_lock, NULL);
	pthread_mutex_init(&g->reg_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->done_cond, &ca);
	pthread_condattr_destroy(&ca);
	g->free_list = NULL;
	g->q_head = g->q_tail = NULL;
	g->q_len = 0;
	g->flush_waiters = 0;
	g->arena_used = 0;
	g->threads = NULL;
	g->nworkers = 0;
	g->passes = 0;
	g->in_pass = 0;
	g->flush_req = 0;
	g->stop = 0;
	g->writer_sleeps = 0; /* a forked child: its writer is not the parent's */
	g->npending = 0; /* a forked child does not inherit the parent's drop reports */
	g->pending_overflow = 0;
	__atomic_store_n(&g->nfree, (uint32_t)g->arena_blocks, __ATOMIC_RELAXED);
}

/* Reserves the block arena (address space only: pages become resident when first used).
 * Returns 0 or -errno. */
static int arena_reserve(void)
{
	struct d9__agent *g = &d9__g;

	if (g->arena)
		return 0;
	size_t n = (size_t)(g->cfg.max_memory / D9_BLOCK_SIZE);
	void *p = mmap(NULL, n * D9_BLOCK_SIZE, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	g->arena = p;
	g->arena_blocks = n;
	g->arena_used = 0;
	__atomic_store_n(&g->nfree, (uint32_t)n, __ATOMIC_RELAXED);
	return 0;
}

int d9__arena_init(void);
int d9__arena_init(void)
{
	return arena_reserve();
}

struct d9__block *d9__pool_get(void)
{
	struct d9__agent *g = &d9__g;
	struct d9__block *b = NULL;

	d9__lock(&g->pool_lock);
	if (g->free_list) {
		b = g->free_list;
		g->free_list = b->next;
	} else if (g->arena_used < g->arena_blocks) {
		b = (struct d9__block *)(g->arena + g->arena_used++ * (size_t)D9_BLOCK_SIZE);
	}
	if (b)
		__atomic_sub_fetch(&g->nfree, 1, __ATOMIC_RELAXED);
	d9__unlock(&g->pool_lock);
	if (b)
		b->raw = 0; /* an encoded chunk until a thread's handoff says otherwise */
	return b;
}

void d9__pool_put(struct d9__block *b)
{
	struct d9__agent *g = &d9__g;

	d9__lock(&g->pool_lock);
	b->next = g->free_list;
	g->free_list = b;
	__atomic_add_fetch(&g->nfree, 1, __ATOMIC_RELAXED);
	d9__unlock(&g->pool_lock);
}

/* ---- waking the writer ---------------------------------------------------------------------------
 * The writer sleeps on a futex word of its own rather than a condition variable: a signal
 * handler (the dump signal, an exit from a fatal signal) can wake it too, since FUTEX_WAKE is a
 * plain system call. So it sleeps until there is work or its next periodic pass is due (the flush
 * interval; 10 ms when profiling: the sample rings), not a fixed 50 ms: an idle process's writer
 * wakes once per flush interval. A wake bumps the word; the writer sleeps only while the word
 * is the one it saw before its last pass, so a wake during a pass makes another pass, and
 * FUTEX_WAIT returns at once when a wake came between that look and the sleep. The system call
 * is made only when the writer sleeps (or is about to: then the word's compare catches it). */
void d9__writer_wake(void)
{
	struct d9__agent *g = &d9__g;

	__atomic_add_fetch(&g->writer_word, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&g->writer_sleeps, __ATOMIC_SEQ_CST)) {
		int saved = errno;
		syscall(SYS_futex, &g->writer_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		errno = saved;
	}
}

/* Writer thread, pool lock held (released while it sleeps): sleeps until a wake after `seen`
 * or until wake_ns (CLOCK_MONOTONIC). */
void d9__writer_sleep(uint32_t seen, uint64_t wake_ns)
{
	struct d9__agent *g = &d9__g;
	struct timespec until = d9__timespec(wake_ns);

	__atomic_store_n(&g->writer_sleeps, 1, __ATOMIC_SEQ_CST);
	d9__unlock(&g->pool_lock);
	/* FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC deadline */
	if (syscall(SYS_futex, &g->writer_word, FUTEX_WAIT_BITSET_PRIVATE, seen, &until, NULL,
		    FUTEX_BITSET_MATCH_ANY) != 0 && errno != EAGAIN && errno != ETIMEDOUT &&
		errno != EINTR) {
		/* refused (a seccomp filter): a short sleep rather than a writer that spins */
		d9__log_once(D9_LOG_WARN, "futex wait refused (%s): the writer wakes every 10 ms",
			strerror(errno));
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	__atomic_store_n(&g->writer_sleeps, 0, __ATOMIC_SEQ_CST);
	d9__lock(&g->pool_lock);
}

void d9__queue_push(struct d9__block *b)
{
	struct d9__agent *g = &d9__g;

	b->next = NULL;
	d9__lock(&g->pool_lock);
	if (g->q_tail)
		g->q_tail->next = b;
	else
		g->q_head = b;
	g->q_tail = b;
	g->q_len++;
	/* The writer comes by every flush interval (10 ms when profiling) and takes the whole
	 * queue. Waking it for each block would cost the recording thread a futex call every
	 * ~1,900 events (a block of raw records) and the writer a pass for each: only a queue of
	 * 16 blocks or an eighth of the memory, memory running short, or a flush waiting for this
	 * block wakes it now. */
	if (g->q_len >= 16 || g->q_len * 8 >= g->arena_blocks || g->flush_waiters ||
		__atomic_load_n(&g->nfree, __ATOMIC_RELAXED) < g->arena_blocks / 4)
		d9__writer_wake();
	d9__unlock(&g->pool_lock);
}

void d9__handoff(struct d9__thr *t)
{
	struct d9__block *b = t->blk;

	if (!b)
		return;
	/* raw records: the writer encodes them (raw.c, d9__raw_encode) and fills the rest */
	b->size = (uint32_t)((uint8_t *)t->raw.p - (uint8_t *)d9__raw_start(b));
	b->count = t->raw.count;
	b->raw = 1;
	b->tid = t->tid;
	b->worker = t->worker;
	b->first_time = t->raw.base;
	b->last_time = 0;
	b->dropped = t->block_dropped;
	b->drop_records = t->block_drop_records;
	b->lost_samples = 0;
	t->blk = NULL;
	t->raw.p = t->raw.end = NULL;
	t->raw.count = 0;
	t->block_dropped = 0;
	t->block_drop_records = 0;
	if (b->count)
		d9__queue_push(b);
	else
		d9__pool_put(b);
}

static void thread_name(char name[17])
{
	memset(name, 0, 17);
	if (prctl(PR_GET_NAME, name) != 0)
		strcpy(name, "?");
}

static void thread_register(struct d9__thr *t)
{
	struct d9__agent *g = &d9__g;
	char name[17];

	t->tid = (uint32_t)gettid();
	if (!t->role)
		t->role = D9_ROLE_THREAD;
	d9__lock(&g->reg_lock);
	t->prev = NULL;
	t->next = g->threads;
	if (g->threads)
		g->threads->prev = t;
	g->threads = t;
	d9__unlock(&g->reg_lock);
	t->registered = 1;
	pthread_setspecific(g->exit_key, t);
	thread_name(name);
	d9__defs_thread(t->tid, name, t->worker, t->role);
}

/* Takes t out of the registry (reg_lock held). */
static void unlink_locked(struct d9__thr *t)
{
	struct d9__agent *g = &d9__g;

	if (t->prev)
		t->prev->next = t->next;
	else if (g->threads == t)
		g->threads = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->next = t->prev = NULL;
	t->registered = 0;
}

static void thread_unregister(struct d9__thr *t)
{
	d9__lock(&d9__g.reg_lock);
	unlink_locked(t);
	d9__unlock(&d9__g.reg_lock);
}

void d9__unpark(struct d9__thr *t)
{
	if (__atomic_load_n(&t->park, __ATOMIC_RELAXED) == D9__RUNNING)
		return;
	uint32_t expect = D9__PARKED;
	if (!__atomic_compare_exchange_n(&t->park, &expect, D9__RUNNING, 0, __ATOMIC_ACQ_REL,
		    __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&t->park, __ATOMIC_ACQUIRE) == D9__STEALING)
			_mm_pause();
		__atomic_store_n(&t->park, D9__RUNNING, __ATOMIC_RELAXED);
	}
}

static int slow(struct d9__thr *t, unsigned retry);

int d9__slow(struct d9__thr *t, unsigned retry)
{
	int saved = errno;

	if (t->busy || __atomic_load_n(&d9__no_calls, __ATOMIC_ACQUIRE))
		return 0; /* an interposed call made by the agent itself: never recorded */
	t->busy = 1;
	int ok = slow(t, retry);
	t->busy = 0;
	errno = saved;
	return ok;
}

/* A Dropped record at the start of t's new block for the count in *counter (t->dropped or
 * t->dropped_paused), taken atomically; put back when the record does not fit. */
static void block_drops(struct d9__thr *t, uint64_t now, uint64_t *counter, uint32_t reason)
{
	uint64_t n = __atomic_load_n(counter, __ATOMIC_RELAXED) ?
		__atomic_exchange_n(counter, 0, __ATOMIC_RELAXED) : 0;

	if (!n)
		return;
	if (d9_raw_dropped(&t->raw, now, n, reason) == 0) {
		t->block_dropped += n;
		t->block_drop_records++;
	} else {
		__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
	}
}

static int slow(struct d9__thr *t, unsigned retry)
{
	struct d9__agent *g = &d9__g;

	if (t->role == D9_ROLE_AGENT || t->role == ROLE_DEAD || !d9__enabled)
		return 0;
	if (retry >= D9__SLOW_TRIES) {
		/* the writer took every fresh block before the event got into it: give up on the
		 * event, counted (never seen outside a test that forces it) */
		d9__drop_one(t);
		return 0;
	}
	if (D9_UNLIKELY(g->state != D9__RUNNING_) && d9__start() != 0) {
		/* sealed and stopped: a pause around unshare or setns (the agent starts again
		 * after the call, and this count goes into the thread's first block then), or the
		 * process is ending (then nothing more is written, counted or not) */
		if (__atomic_load_n(&g->state, __ATOMIC_ACQUIRE) == D9__STOPPED)
			__atomic_add_fetch(&t->dropped_paused, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (!t->registered)
		thread_register(t);
	if (t->blk)
		d9__handoff(t); /* full, or the writer asked for it (raw.end cleared) */
	if (__atomic_load_n(&g->nfree, __ATOMIC_RELAXED) == 0) {
		d9__drop_one(t);
		return 0;
	}
	struct d9__block *b = d9__pool_get();
	if (!b) {
		d9__drop_one(t);
		return 0;
	}
	uint64_t now = d9__now();
	t->raw.p = d9__raw_start(b);
	t->raw.count = 0;
	t->raw.base = now;
	t->raw.end = (uint64_t *)(void *)(b->data + D9_BLOCK_DATA - D9__RAW_RESERVE);
	/* the chunk's start time before the block is published: the writer reads blk, then
	 * chunk_mono_ns, and must not take a fresh block for an old one (d9__collect) */
	t->chunk_mono_ns = d9__mono_ns();
	__atomic_store_n(&t->blk, b, __ATOMIC_RELEASE);
	/* the writer may have cleared raw.end already: then the Dropped record is not written
	 * and its count waits for the next block (the caller's retry comes back here) */
	block_drops(t, now, &t->dropped, D9_DROP_BUFFERS_FULL);
	block_drops(t, now, &t->dropped_paused, D9_DROP_OTHER);
	return 1;
}

/* The retry loops of the inline recorders (d9-agent.h: one try in line, the rest here). */
__attribute__((noinline, cold)) void d9__rec_poll_start_slow(uint64_t coroutine, uint64_t location)
{
	uint64_t co_ = coroutine;
	D9__REC_AT(now_, d9_raw_poll_start(&t_->raw, now_, coroutine, location));
}

__attribute__((noinline, cold)) void d9__rec_poll_end_slow(uint64_t coroutine)
{
	uint64_t co_ = 0;
	D9__REC_AT(now_, d9_raw_poll_end(&t_->raw, now_, coroutine));
}

__attribute__((noinline, cold)) void d9__rec_wake_slow(uint64_t woken, uint64_t waker,
	uint32_t kind, int64_t object)
{
	D9__REC(d9_raw_wake(&t_->raw, d9__now(), woken, waker, kind, object));
}

/* The retry loops of the inline Park and Unpark (d9-agent.h). */
__attribute__((noinline, cold)) void d9__rec_park_slow(uint32_t call, int64_t timeout_us)
{
	struct d9__thr *self = &d9__self;

	D9__REC(d9_raw_park(&t_->raw, d9__now(), call, timeout_us));
	if (self->blk)
		__atomic_store_n(&self->park, D9__PARKED, __ATOMIC_RELEASE);
}

__attribute__((noinline, cold)) void d9__rec_unpark_slow(int64_t ready, uint64_t cpu_ns,
	uint64_t sched_wait_ns)
{
	D9__REC(d9_raw_unpark(&t_->raw, d9__now(), ready, cpu_ns, sched_wait_ns));
}

/* ---- scheduler statistics -------------------------------------------------------------------
 * /proc/thread-self/schedstat is a file of the agent's like its others (files.c, DESIGN.md
 * "Descriptors and files"): marked its own before it is read, checked to be the file named, and
 * closed only while still the agent's, so that a program that closes or refills the number
 * meanwhile never has its file closed by the agent. Up to SCHED_KEEP workers keep theirs open,
 * at a high number (one pread a reading); the others open, read and close it at each reading
 * (openat, fstat, fstatat, pread, close): a descriptor per worker without a bound would take one
 * of the host's per thread (a thread-per-connection server ran out of them). Readings come at
 * most every 30 ms per worker. A kept descriptor's identity (fstat) is checked again whenever the
 * program has taken a number of the agent's since the last check (the number may since have
 * gone to another holder of the agent's, another thread's schedstat among them) and at every
 * SCHED_CHECK_EVERY-th reading otherwise (a number replaced behind the interposers' back: a raw
 * system call); between checks, pread moves no offset and fails on pipes and sockets, and
 * content that is not exactly schedstat's three numbers lets the number go unclosed and the file
 * is opened again. */
#define SCHED_KEEP 16
#define SCHED_CHECK_EVERY 32
/* each slot: 0 free, -1 being filled, the kept descriptor + 1; its file in sched_files (written
 * before the slot is published), so that a forked child closes only what is still that file */
static int sched_kept[SCHED_KEEP];
static struct d9__file sched_files[SCHED_KEEP];
/* 0 no reading yet, 1 read before, -1 given up */
static __thread int sched_state __attribute__((tls_model("initial-exec")));
/* this thread's slot + 1 (0: none); readings since its identity check; d9__fd_taken then */
static __thread int sched_slot __attribute__((tls_model("initial-exec")));
static __thread uint32_t sched_unchecked __attribute__((tls_model("initial-exec")));
static __thread uint64_t sched_taken_seen __attribute__((tls_model("initial-exec")));
/* 1 while this thread is inside an open (a fork from a signal handler does not wait for it) */
static __thread int sched_in_open __attribute__((tls_model("initial-exec")));
static const char sched_path[] = "/proc/thread-self/schedstat";
/* Opens in progress (from the openat until the descriptor is kept in sched_kept or closed), and
 * forks being prepared: a fork waits for the opens (100 ms at most), and no open starts
 * meanwhile, so a child gets no descriptor the bookkeeping does not know (it closes the kept
 * ones: d9__schedstat_child). */
static int sched_opening, sched_forking;
#define SCHED_FORK_WAIT_NS 100000000ull

void d9__schedstat_fork_prepare(void)
{
	__atomic_add_fetch(&sched_forking, 1, __ATOMIC_SEQ_CST);
	uint64_t until = d9__mono_ns() + SCHED_FORK_WAIT_NS;
	while (__atomic_load_n(&sched_opening, __ATOMIC_SEQ_CST) > sched_in_open &&
		d9__mono_ns() < until)
		sched_yield();
}

void d9__schedstat_fork_parent(void)
{
	__atomic_sub_fetch(&sched_forking, 1, __ATOMIC_RELEASE);
}

/* Lets this thread's kept descriptor go: closed while still the agent's file (d9__file_close),
 * only forgotten when `drop` (taken by the program, or its content not schedstat's). */
static void sched_unkeep(int drop)
{
	int slot = sched_slot - 1;

	if (slot < 0)
		return;
	if (drop)
		d9__file_drop(&sched_files[slot]);
	else
		d9__file_close(&sched_files[slot]);
	sched_slot = 0;
	__atomic_store_n(&sched_kept[slot], 0, __ATOMIC_RELEASE);
}

static void sched_close(void)
{
	sched_unkeep(0);
	sched_state = 0;
}

/* In a forked child, its only thread (lifecycle.c's fork handler, right after d9__fd_child,
 * whatever the agent's state): the parent's threads' files are the child's to close, its own
 * among them (a file of the parent's thread), each only while it still is that file. */
void d9__schedstat_child(void)
{
	for (int i = 0; i < SCHED_KEEP; i++) {
		if (__atomic_load_n(&sched_kept[i], __ATOMIC_ACQUIRE) > 0)
			d9__file_close(&sched_files[i]);
		sched_kept[i] = 0;
	}
	sched_slot = 0;
	sched_state = 0;
	sched_in_open = 0;
	sched_opening = sched_forking = 0;
}

/* pread of the marked descriptor fd: bytes read, or -errno (-ESTALE: the program took it). */
static ssize_t sched_pread(int fd, char *buf, size_t len)
{
	if (d9__fd_enter(fd) != 0)
		return -ESTALE;
	ssize_t n = syscall(SYS_pread64, fd, buf, len, (off_t)0);
	int err = n < 0 ? -errno : n == 0 ? -ENODATA : 0;
	d9__fd_leave(fd);
	return err ? err : n;
}

/* The kept descriptor read, its identity checked first when due: bytes read or -errno. */
static ssize_t sched_kept_read(char *buf, size_t len)
{
	const struct d9__file *f = &sched_files[sched_slot - 1];
	uint64_t taken = __atomic_load_n(&d9__fd_taken, __ATOMIC_ACQUIRE);

	if (++sched_unchecked >= SCHED_CHECK_EVERY || taken != sched_taken_seen) {
		if (d9__file_check(f) != 0)
			return -ESTALE;
		sched_unchecked = 0;
		sched_taken_seen = taken;
	}
	return sched_pread(f->fd, buf, len);
}

/* The file opened, read into buf and kept (or closed): the length read or -errno. */
static ssize_t sched_open_read(char *buf, size_t len)
{
	ssize_t n;
	struct d9__file f;
	uint64_t taken = __atomic_load_n(&d9__fd_taken, __ATOMIC_ACQUIRE);
	/* after the program's chroot the name leads into its jail, where anyone who can write there
	 * could have put a FIFO (that would block this open) or a file of fake readings */
	if (__atomic_load_n(&d9__g.chrooted, __ATOMIC_ACQUIRE))
		return -ENOENT;
	long fd = syscall(SYS_openat, AT_FDCWD, sched_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int slot = -1;
	for (int i = 0; i < SCHED_KEEP && slot < 0; i++)
		if (!__atomic_load_n(&sched_kept[i], __ATOMIC_RELAXED)) {
			int free_ = 0;
			if (__atomic_compare_exchange_n(&sched_kept[i], &free_, -1, 0,
				    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				slot = i; /* claimed (-1: being filled) */
		}
	int err = slot >= 0 ? d9__file_take(&f, (int)fd, AT_FDCWD, sched_path) :
		d9__file_take_here(&f, (int)fd, AT_FDCWD, sched_path);
	n = err ? err : sched_pread(f.fd, buf, len - 1);
	if (slot >= 0 && n > 0) {
		sched_files[slot] = f;
		sched_slot = slot + 1;
		sched_unchecked = 0;
		sched_taken_seen = taken;
		__atomic_store_n(&sched_kept[slot], f.fd + 1, __ATOMIC_RELEASE);
		return n;
	}
	if (slot >= 0)
		__atomic_store_n(&sched_kept[slot], 0, __ATOMIC_RELEASE);
	if (err)
		/* the number is not known to be ours (-ESTALE), the program closed it meanwhile
		 * (-EBADF), or it is too high to guard (-EMFILE: closed at once): no reading this
		 * time, not a reason to give up */
		return err == -ESTALE || err == -EBADF || err == -EMFILE ? -EAGAIN : err;
	if (n == -ESTALE)
		d9__file_drop(&f);
	else
		d9__file_close(&f);
	return n;
}

/* One reading of the file into buf (NUL-terminated): its length or -errno; *kept: 1 when it
 * came from the kept descriptor. */
static ssize_t sched_read(char *buf, size_t len, int *kept)
{
	ssize_t n;

	*kept = 0;
	if (sched_slot) {
		if ((n = sched_kept_read(buf, len - 1)) > 0) {
			*kept = 1;
			goto done;
		}
		sched_unkeep(n == -ESTALE); /* taken by the program, or failing: opened again */
	}
	sched_in_open = 1;
	__atomic_add_fetch(&sched_opening, 1, __ATOMIC_SEQ_CST);
	n = __atomic_load_n(&sched_forking, __ATOMIC_SEQ_CST) ? -EAGAIN : sched_open_read(buf, len);
	__atomic_sub_fetch(&sched_opening, 1, __ATOMIC_RELEASE);
	sched_in_open = 0;
	if (n <= 0)
		return n;
done:
	buf[n] = 0;
	return n;
}

int d9_agent_schedstat(uint64_t *cpu_ns, uint64_t *run_delay_ns)
{
	struct d9__thr *t = &d9__self;
	char buf[96];
	int err, first = sched_state == 0, kept;

	if (sched_state < 0)
		return -ECANCELED; /* given up on this thread (not a reason for other threads) */
	uint8_t busy = t->busy;
	t->busy = 1; /* the calls below are the agent's own */
	int saved = errno;
	ssize_t n;
again:
	n = sched_read(buf, sizeof(buf), &kept);
	if (n == -EAGAIN || n == -ESTALE) {
		/* the number was the program's business for a moment: no reading this time */
		errno = saved;
		t->busy = busy;
		return -EAGAIN;
	}
	if (n < 0) {
		err = (int)n;
		goto fail;
	}
	if (d9__sched_parse(buf, n, cpu_ns, run_delay_ns) != 0) {
		/* not schedstat's content: a kept number that is no longer the file opened is let
		 * go unclosed and the file opened again; a file just opened and checked that reads
		 * so is a kernel that says something else */
		if (kept) {
			sched_unkeep(1);
			goto again;
		}
		sched_unkeep(0); /* the file just opened, if it was kept: ours, closed */
		err = -EPROTO;
		goto fail;
	}
	sched_state = 1;
	errno = saved;
	t->busy = busy;
	return first;
fail:
	/* after the program's chroot the file is not looked for (sched_open_read); where tracing
	 * stopped there, that stop is all there is to say */
	if (!__atomic_load_n(&d9__g.chrooted, __ATOMIC_ACQUIRE))
		d9__log_once(D9_LOG_WARN, "cannot read /proc/thread-self/schedstat (%s): Unpark "
			"cpu_ns and sched_wait_ns are unknown", strerror(-err));
	else if (d9__g.cfg.chroot_follow)
		/* not a broken procfs: the program's new root has none (unbound's, HAProxy's) */
		d9__log_once(D9_LOG_WARN, "after the program's chroot (D9_CHROOT=follow) its threads "
			"cannot read /proc/thread-self/schedstat in their new root (%s): Unpark cpu_ns "
			"and sched_wait_ns are unknown from now on", strerror(-err));
	sched_state = -1;
	errno = saved;
	t->busy = busy;
	return err;
}

void d9__collect(uint64_t older_than_mono_ns, int all)
{
	struct d9__agent *g = &d9__g;
	int stopping = all && __atomic_load_n(&g->stop, __ATOMIC_RELAXED);

	d9__lock(&g->reg_lock);
	for (struct d9__thr *t = g->threads; t; t = t->next) {
		uint32_t state = __atomic_load_n(&t->park, __ATOMIC_ACQUIRE);
		if (state == D9__PARKED) {
			uint32_t expect = D9__PARKED;
			if (!__atomic_compare_exchange_n(&t->park, &expect, D9__STEALING, 0,
				    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				continue;
			/* the thread is parked and spins in unpark() until we are done */
			int take = t->blk && t->raw.count &&
				(all || t->chunk_mono_ns <= older_than_mono_ns);
			if (take)
				d9__handoff(t);
			if (stopping)
				/* starved and parked at exit: its counts would be lost with it */
				d9__drops_report_all(t);
			__atomic_store_n(&t->park, take ? D9__STOLEN : D9__PARKED, __ATOMIC_RELEASE);
		} else if (state == D9__RUNNING && __atomic_load_n(&t->blk, __ATOMIC_ACQUIRE)) {
			/* A running thread hands its chunk off itself at its next event: clearing
			 * raw.end sends that event down the slow path. If the thread is inside the
			 * slow path right now this request may be lost; the next pass repeats it. It
			 * may also hit the block the slow path has just taken, before the event the
			 * slow path was for is in it: that event goes round the slow path again
			 * (D9__REC). chunk_mono_ns is set before blk (acquire above), so a timed pass
			 * does not take a fresh block for an old chunk; mostly flush passes do. */
			if (all || __atomic_load_n(&t->chunk_mono_ns, __ATOMIC_RELAXED) <= older_than_mono_ns)
				__atomic_store_n(&t->raw.end, NULL, __ATOMIC_RELAXED);
		}
	}
	d9__unlock(&g->reg_lock);
}

void d9__unflushed_report(void (*count)(uint32_t tid, uint32_t worker, uint64_t n,
	uint32_t reason))
{
	struct d9__agent *g = &d9__g;

	d9__lock(&g->reg_lock);
	for (struct d9__thr *t = g->threads; t; t = t->next) {
		if (__atomic_load_n(&t->park, __ATOMIC_ACQUIRE) != D9__RUNNING)
			continue; /* a parked thread's are d9__collect's */
		/* the thread's own counter, read while it may still be appending: a lower bound */
		uint32_t n = __atomic_load_n(&t->blk, __ATOMIC_ACQUIRE) ?
			__atomic_load_n(&t->raw.count, __ATOMIC_RELAXED) : 0;
		if (n)
			count(t->tid, t->worker, n, D9_DROP_OTHER);
		/* starved (no free block) and still running: its count waits for a block that
		 * will not come; taken, so that a block after a pause does not count it again */
		uint64_t dropped = d9__drops_take(t);
		if (dropped)
			count(t->tid, t->worker, dropped, D9_DROP_BUFFERS_FULL);
		/* and one that ran through an earlier pause without a block since */
		dropped = d9__paused_take(t);
		if (dropped)
			count(t->tid, t->worker, dropped, D9_DROP_OTHER);
	}
	d9__unlock(&g->reg_lock);
}

uint32_t d9_agent_become_worker(void)
{
	struct d9__thr *t = &d9__self;
	struct d9__agent *g = &d9__g;
	char name[17];
	int saved = errno;

	if (t->worker)
		return t->worker;
	if (t->role == D9_ROLE_AGENT || t->role == ROLE_DEAD ||
		(g->state != D9__CONFIGURED && g->state != D9__RUNNING_))
		return 0;
	t->role = D9_ROLE_WORKER; /* the agent itself starts at the first recorded event */
	t->busy = 1;
	d9__unpark(t);
	if (t->blk)
		d9__handoff(t); /* the worker id is per chunk: start a new one */
	t->worker = __atomic_add_fetch(&g->nworkers, 1, __ATOMIC_RELAXED);
	if (!t->registered) {
		thread_register(t); /* defines the thread with its worker id */
	} else {
		thread_name(name);
		d9__defs_thread(t->tid, name, t->worker, D9_ROLE_WORKER);
	}
	d9__profile_thread_start(t);
	t->busy = 0;
	errno = saved;
	return t->worker;
}

/* A forked child's only thread, which recorded in its parent: traced from the start, without
 * waiting for an event loop that may never come (a BGSAVE child): registered (its Thread
 * definition, role thread), profiled when profiling is on, its blocking calls timed
 * (t->traced). It becomes a worker if it enters a loop after all. */
void d9__child_trace(void);
void d9__child_trace(void)
{
	struct d9__thr *t = &d9__self;
	int saved = errno;

	if (d9__start() != 0)
		goto out;
	t->busy = 1;
	t->traced = 1;
	if (!t->registered)
		thread_register(t);
	d9__profile_thread_start(t);
	t->busy = 0;
out:
	errno = saved;
}

/* The calling thread, still root, is about to make the process another user (a set*id call):
 * registered and profiled now, while the kernel lets it open its perf events (with
 * perf_event_paranoid 2 a user gets no off-CPU samples and no kernel time). The thread that drops
 * is most often the one that serves (nginx's, lighttpd's, mosquitto's workers), and its first
 * wait, which made it a worker and profiled it, came after the drop: off-CPU samples were always
 * off for such servers. It becomes a worker at that wait (d9__profile_thread_start keeps its
 * events). Not traced (t->traced): a thread that never waits records no blocking call. */
void d9__drop_profile(void);
void d9__drop_profile(void)
{
	struct d9__thr *t = &d9__self;
	struct d9__agent *g = &d9__g;
	int saved = errno;

	/* the agent is not started for it: its samples wait in the ring (lost ones counted) for
	 * the writer the first event starts, and the first segment, whose header holds the
	 * command line, opens then (nginx names its worker after the drop) */
	if (g->state != D9__CONFIGURED && g->state != D9__RUNNING_)
		goto out;
	if (!t->registered)
		thread_register(t);
	d9__profile_thread_start(t);
out:
	errno = saved;
}

void d9_agent_thread_renamed(void)
{
	struct d9__thr *t = &d9__self;
	char name[17];

	if (!t->registered || t->busy)
		return;
	t->busy = 1;
	thread_name(name);
	d9__defs_thread(t->tid, name, t->worker, t->role);
	t->busy = 0;
}

void d9__agent_thread(void *arg)
{
	struct d9__spawn *sp = arg; /* d9__spawn_blocked's, shared until d9__spawn_ready */

	d9__self.role = D9_ROLE_AGENT;
	/* its creator's own table (an agent thread's) is its own from the first call: the /proc
	 * read below must not mark the program's numbers */
	d9__self.fd_private = d9__self.fd_inherited = sp->fd_private;
	d9__self.fs_private = sp->fs_private;
	/* a /proc read: only when a table or a root of its own is to be made */
	int filtered = !d9__g.cfg.agent_fds_shared || d9__g.cfg.chroot_follow ?
		d9__seccomp_filtered() : 1;
	/* before the thread's first descriptor of its own (fdown.c) */
	d9__fd_private_begin(d9__g.cfg.agent_fds_shared ? 0 : filtered);
	d9__fs_private_begin(filtered);
	if (!d9__self.fs_private && d9__g.cfg.chroot_follow)
		__atomic_store_n(&d9__g.fs_shared, 1, __ATOMIC_RELEASE);
	d9__spawn_ready(sp);
}

void d9__drops_report(uint32_t tid, uint32_t worker, uint64_t count, uint32_t reason)
{
	struct d9__agent *g = &d9__g;

	if (!count)
		return;
	d9__lock(&g->pool_lock);
	size_t i = 0;
	while (i < g->npending && (g->pending[i].tid != tid || g->pending[i].reason != reason))
		i++;
	if (i == g->npending && i < D9_PENDING_DROPS)
		g->pending[g->npending++] = (struct d9__drop){ tid, worker, 0, reason };
	if (i < D9_PENDING_DROPS)
		g->pending[i].count += count;
	else
		g->pending_overflow += count; /* recorded under tid 0 */
	d9__writer_wake();
	d9__unlock(&g->pool_lock);
}

void d9__drops_report_all(struct d9__thr *t)
{
	d9__drops_report(t->tid, t->worker, d9__drops_take(t), D9_DROP_BUFFERS_FULL);
	d9__drops_report(t->tid, t->worker, d9__paused_take(t), D9_DROP_OTHER);
}

/* The calling thread ends its recording: its chunk goes to the writer, and it records nothing
 * again (thread_exit; a seccomp filter it is about to install, lifecycle.c). */
static void quit(struct d9__thr *t)
{
	d9__unpark(t);
	t->busy = 1;
	d9__profile_thread_exit(t);
	sched_close();
	d9__handoff(t);
	/* drops not yet recorded (the thread was starved, or ran through a pause and took no block
	 * since): the writer records them after the chunks this thread queued before */
	d9__drops_report_all(t);
	d9__handoff(t);
	thread_unregister(t);
	t->role = ROLE_DEAD;
}

void d9__thread_quit(void)
{
	int saved = errno;

	quit(&d9__self);
	errno = saved;
}

void d9__thread_unquit(void)
{
	struct d9__thr *t = &d9__self;
	int saved = errno;

	if (!t->worker) {
		t->role = 0; /* registered again at its next event */
		t->busy = 0;
		return;
	}
	/* a worker comes back as the same worker, profiled as before (review 31, M8) */
	t->role = D9_ROLE_WORKER;
	t->busy = 1;
	thread_register(t);
	d9__profile_thread_start(t);
	t->busy = 0;
	errno = saved;
}

/* pthread key destructor: a recording thread is exiting; its chunk goes to the writer. A thread
 * under a seccomp filter ended its recording before the filter: it makes no call now. */
static void thread_exit(void *arg)
{
	struct d9__thr *t = arg;
	int saved = errno;

	if (t != &d9__self || t->filtered)
		return;
	if (__atomic_load_n(&d9__no_calls, __ATOMIC_ACQUIRE)) {
		/* a filter on every thread is coming: out of the registry, which the writer may still
		 * walk for its seal (review 32, H2), taking its lock by trylock (no futex wait); its
		 * chunk is lost */
		if (t->registered) {
			/* 1 s at most (the writer holding the lock on a starved CPU): then left as it
			 * is, as before (a writer that walks it later reads a dead thread's state) */
			uint64_t until = d9__mono_ns() + 1000000000ull;
			while (pthread_mutex_trylock(&d9__g.reg_lock) != 0) {
				if (d9__mono_ns() > until)
					return;
				_mm_pause();
			}
			unlink_locked(t);
			pthread_mutex_unlock(&d9__g.reg_lock);
		}
		return;
	}
	quit(t);
	errno = saved;
}

int d9__key_init(void);
int d9__key_init(void)
{
	return -pthread_key_create(&d9__g.exit_key, thread_exit);
}

/* In a forked child: only the forking thread exists and every block belongs to the parent. The
 * child reuses the arena's address space from scratch and forgets the parent's threads. */
void d9__record_child(void);
void d9__record_child(void)
{
	struct d9__thr *t = &d9__self;
	uint8_t role = t->role == D9_ROLE_AGENT ? D9_ROLE_AGENT : 0;

	memset(t, 0, sizeof(*t));
	t->role = role;
	d9__record_init();
	d9__profile_child();
}
