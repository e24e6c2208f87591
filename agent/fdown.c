/* fdown.c: which descriptor numbers are the agent's. The host may take any number at any time
 * (a daemon's close of 3..1023, a dup2 of its log onto a number of ours). A check of the number
 * (fstat) followed by a write leaves a window in which the number can become the host's; this
 * table closes it for the calls the interposers see: the host's close, dup2, dup3, close_range
 * and closefrom of a number of ours take it from the agent, after waiting for the agent's call
 * in progress on it, before the host's call runs. The agent's side never waits on the host's
 * side while it holds a number. Design: agent/DESIGN.md, "Descriptors and files". */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>

/* One word per number below D9__OWN_FDS (d9-agent.h: OURS, REVOKED, BUSY and PENDING), all
 * changed by atomic read-modify-writes, so that the agent's and the host's changes to one number
 * are totally ordered. */
#define OURS D9__FD_OURS
#define REVOKED D9__FD_REVOKED
#define BUSY1 (1u << 8) /* an agent call on the number in progress (8 bits) */
#define BUSY_MASK (0xffu << 8)
#define PEND1 D9__FD_PEND1
#define PEND_MASK (0xffffu << 16)

uint32_t d9__fd_words[D9__OWN_FDS];
#define own d9__fd_words
static uint32_t range_pending; /* host close_range/closefrom calls in progress */
int d9__fd_top; /* atomic: the highest number whose word was ever changed (d9__fd_child) */
#define top d9__fd_top
uint64_t d9__fd_taken; /* numbers of ours the host took */

/* The agent waits for the host's calls in progress on a number it has just been given (below)
 * at most this long: a close that blocks (SO_LINGER, a slow file system) has already freed its
 * number, but nothing shows that from here. */
#define DRAIN_WAIT_NS 100000000ull

/* System calls made here directly: libc's close and syscall() are this library's interposers,
 * whose take of an agent number would wait for this very call. Returns -errno on failure. */
static long raw4(long nr, long a, long b, long c, long d)
{
	return d9__raw6(nr, a, b, c, d, 0, 0);
}

#define raw2(nr, a, b) raw4(nr, a, b, 0, 0)

/* A short pause (libc's nanosleep is interposed and would be timed as the program's). */
static void pause_briefly(unsigned *n)
{
	if (D9_UNLIKELY(d9__calls_off())) {
		_mm_pause(); /* under a seccomp filter: no call of the agent's (lifecycle.c) */
		return;
	}
	if (++*n < 100) {
		raw2(SYS_sched_yield, 0, 0);
	} else {
		struct timespec ts = { 0, 200000 };
		raw2(SYS_nanosleep, (long)&ts, 0);
	}
}

/* Waits until (*a & mask) is 0 and *b (if any) is 0, limit_ns at most: 0, or -EAGAIN. */
static int wait_clear(const uint32_t *a, uint32_t mask, const uint32_t *b, uint64_t limit_ns)
{
	unsigned n = 0;
	uint64_t deadline = 0;

	while ((__atomic_load_n(a, __ATOMIC_SEQ_CST) & mask) ||
	       (b && __atomic_load_n(b, __ATOMIC_SEQ_CST))) {
		if (!deadline)
			deadline = d9__mono_ns() + limit_ns;
		else if (d9__mono_ns() > deadline)
			return -EAGAIN;
		pause_briefly(&n);
	}
	return 0;
}

#define raise_top d9__fd_raise_top

/* The numbers this thread holds (d9__fd_enter without its leave yet), so that a signal handler
 * run on it that closes or is given one of them does not wait for the thread it interrupted. */
#define HELD_MAX 4
static __thread int held[HELD_MAX] __attribute__((tls_model("initial-exec")));
static __thread unsigned nheld __attribute__((tls_model("initial-exec")));
static void unlist(int fd);

static int held_here(int fd)
{
	for (unsigned i = 0; i < nheld && i < HELD_MAX; i++)
		if (held[i] == fd)
			return 1;
	return 0;
}

/* The process whose agent marked the numbers: a child that skipped the fork handlers (_Fork,
 * a raw fork or clone) has its own table and must neither wait for its parent's calls nor, a
 * vfork child sharing the parent's memory, take the parent's numbers. */
static int owner_pid;

static int same_process(void)
{
	return (int)raw2(SYS_getpid, 0, 0) == __atomic_load_n(&owner_pid, __ATOMIC_RELAXED);
}

int d9__fd_same_process(void)
{
	return !__atomic_load_n(&owner_pid, __ATOMIC_RELAXED) || same_process();
}

/* The program waits this long at most for the agent's call in progress on a number it takes:
 * the call is then inside the kernel (a stalled disk, a hung NFS server), where it holds the
 * file itself, not the number, and the program's call can go on. */
#define TAKE_WAIT_NS 1000000000ull
uint64_t d9__fd_take_timeouts;

/* The number this thread's interposer marked last (fd + 1; 0: none), for d9__fd_own. */
static __thread int fresh __attribute__((tls_model("initial-exec")));

void d9__fd_init(void)
{
	__atomic_store_n(&owner_pid, (int)raw2(SYS_getpid, 0, 0), __ATOMIC_RELAXED);
}

/* Marks fd, just given to this thread by the kernel; `renew`: a REVOKED left by an earlier
 * holder is cleared (the kernel gave the number out again). 0 or -errno (d9__fd_own). An
 * agent thread's close of the number may still be between its close and its unmark: waited
 * for first, so that its unmark does not undo this mark. */
static int mark(int fd, int renew)
{
	if (fd < 0 || fd >= D9__OWN_FDS)
		return -EMFILE;
	int pid = (int)raw2(SYS_getpid, 0, 0), owner = __atomic_load_n(&owner_pid, __ATOMIC_RELAXED);
	if (!owner)
		__atomic_store_n(&owner_pid, owner = pid, __ATOMIC_RELAXED);
	if (owner != pid)
		return -EAGAIN; /* a vfork child (or one without the fork handlers): not its table */
	raise_top(fd);
	uint32_t *w = &own[fd];

	/* another agent thread may still be inside its close of the same number (it leaves the
	 * number's word only after the close): waited for, 1 s at most (a call stuck in the kernel
	 * on a number the program took). Not this thread's own hold (a signal handler's open on
	 * the thread inside that close). */
	if (!held_here(fd) && wait_clear(w, BUSY_MASK, NULL, TAKE_WAIT_NS))
		return -EAGAIN;
	uint32_t v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
	do {
		if (v & OURS)
			return 0; /* marked already (by this thread's interposer) */
		if ((v & REVOKED) && !renew)
			return -ESTALE; /* marked by the interposer, taken by the program since */
	} while (!__atomic_compare_exchange_n(w, &v, (v | OURS) & ~REVOKED, 0, __ATOMIC_SEQ_CST,
			__ATOMIC_SEQ_CST));
	/* A host call that read the word before OURS was set takes the number without waiting
	 * for the agent: wait until every such call has returned. One that starts from here on
	 * sees OURS. Not known to be free of it in time: unmarked and left open (that call, if it
	 * is a close, closes it; else it leaks). */
	if (wait_clear(w, PEND_MASK, &range_pending, DRAIN_WAIT_NS)) {
		__atomic_fetch_and(w, ~(OURS | REVOKED), __ATOMIC_SEQ_CST);
		return -EAGAIN;
	}
	if (!(__atomic_load_n(w, __ATOMIC_SEQ_CST) & OURS))
		return -ESTALE; /* taken by the host meanwhile */
	return 0;
}

int d9__fd_mark_new(int fd)
{
	if (D9_UNLIKELY(d9__self.fd_private))
		return 0; /* the thread's own table: the program cannot take its numbers */
	int err = mark(fd, 1);

	if (!err)
		fresh = fd + 1;
	return err;
}

int d9__fd_own(int fd)
{
	/* a number this thread's interposer marked (an agent thread's open, socket, pipe): taken
	 * by the program since when only REVOKED is left; any other is new to the marks */
	int renew = fresh != fd + 1;

	fresh = 0;
	if (D9_UNLIKELY(d9__self.fd_private))
		return fd >= 0 ? 0 : -EBADF;
	return mark(fd, renew);
}

void d9__fd_unmark(int fd)
{
	if (fd >= 0 && fd < D9__OWN_FDS && !d9__self.fd_private)
		__atomic_fetch_and(&own[fd], ~(OURS | REVOKED), __ATOMIC_SEQ_CST);
}

static void unlist(int fd)
{
	if (nheld > HELD_MAX) {
		nheld--; /* one not listed (never more than two here) */
	} else if (nheld > 0) {
		unsigned i = nheld - 1;
		while (i > 0 && held[i] != fd)
			i--;
		for (; i + 1 < nheld; i++)
			held[i] = held[i + 1];
		nheld--;
	}
}

int d9__fd_enter(int fd)
{
	if (D9_UNLIKELY(d9__self.fd_private))
		return fd >= 0 ? 0 : -EBADF;
	if (fd < 0 || fd >= D9__OWN_FDS)
		return -EBADF;
	/* listed before BUSY is raised and unlisted after it is lowered: a signal handler on this
	 * thread never finds its own hold unlisted */
	if (nheld < HELD_MAX)
		held[nheld] = fd;
	nheld++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	uint32_t v = __atomic_fetch_add(&own[fd], BUSY1, __ATOMIC_SEQ_CST);
	if (v & OURS)
		return 0;
	__atomic_fetch_sub(&own[fd], BUSY1, __ATOMIC_SEQ_CST);
	unlist(fd);
	return -ESTALE;
}

void d9__fd_leave(int fd)
{
	if (D9_UNLIKELY(d9__self.fd_private))
		return;
	__atomic_fetch_sub(&own[fd], BUSY1, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	unlist(fd);
}

void d9__fd_disown(int fd)
{
	/* REVOKED only: OURS may be another holder's of the agent's by now (the program took the
	 * number, closed it, and the kernel gave it to the agent again). A number the program took
	 * unseen stays marked; every use checks the file's identity too. On a thread with a table
	 * of its own, nothing: the number failed a check, and is forgotten, not closed. */
	if (fd >= 0 && fd < D9__OWN_FDS && !d9__self.fd_private)
		__atomic_fetch_and(&own[fd], ~REVOKED, __ATOMIC_SEQ_CST);
}

/* close(2) with libc's contract (-1 and errno). */
static int raw_close(int fd)
{
	long r = raw2(SYS_close, fd, 0);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return 0;
}

int d9__fd_close(int fd)
{
	int saved = errno, err = 0;

	if (D9_UNLIKELY(d9__self.fd_private)) {
		long r = fd >= 0 ? raw2(SYS_close, fd, 0) : -EBADF;
		return r < 0 && r != -EINTR ? (int)r : 0;
	}

	if ((err = d9__fd_enter(fd)) != 0) {
		/* the host took it (REVOKED): its number now, left alone; never ours: refused */
		d9__fd_disown(fd);
		return err;
	}
	/* Still busy while the number is free: a host that opens it and closes it again waits
	 * for the word to be cleared first, and an agent thread given it waits in d9__fd_own. */
	if (raw_close(fd) != 0 && errno != EINTR)
		err = -errno;
	__atomic_fetch_and(&own[fd], ~(OURS | REVOKED), __ATOMIC_SEQ_CST);
	d9__fd_leave(fd);
	errno = saved;
	return err;
}

int d9__fd_agent_close(int fd)
{
	if (fd < 0 || fd >= D9__OWN_FDS || d9__self.fd_private)
		return raw_close(fd);
	uint32_t v = __atomic_load_n(&own[fd], __ATOMIC_SEQ_CST);
	if (v & OURS) {
		int err = d9__fd_close(fd);
		if (err == -ESTALE)
			return 0; /* taken by the host meanwhile: its number, not closed */
		if (err) {
			errno = -err;
			return -1;
		}
		return 0;
	}
	if (v & REVOKED) {
		/* a library's (the reader's, zlib's) descriptor that the host has taken since */
		__atomic_fetch_and(&own[fd], ~REVOKED, __ATOMIC_SEQ_CST);
		return 0;
	}
	return raw_close(fd); /* not one the agent marked: a library's own descriptor */
}

/* Takes one number from the agent, if it is the agent's, after its call in progress (1 s at
 * most; not for a call of this very thread's that a signal handler interrupted). */
static void take(int fd)
{
	uint32_t *w = &own[fd];
	uint32_t v = __atomic_load_n(w, __ATOMIC_SEQ_CST);

	while ((v & OURS) && !__atomic_compare_exchange_n(w, &v, (v & ~OURS) | REVOKED, 0,
				__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	if (!(v & OURS))
		return;
	/* no message here, in the program's close: the holder says it when it finds the number
	 * gone (writer.c, profile.c) */
	__atomic_fetch_add(&d9__fd_taken, 1, __ATOMIC_RELAXED);
	if (!held_here(fd) && wait_clear(w, BUSY_MASK, NULL, TAKE_WAIT_NS))
		__atomic_fetch_add(&d9__fd_take_timeouts, 1, __ATOMIC_RELAXED);
}

void d9__fd_take(int fd)
{
	/* a thread under a seccomp filter makes no getpid (a call it may kill at): a vfork child
	 * that shares our memory and has a filter of its own is beyond it */
	if (d9__calls_off() || same_process())
		take(fd);
}

void d9__fd_host_take_range(unsigned first, unsigned last)
{
	if (d9__self.fd_private)
		return; /* an agent thread's own table (d9__fd_host_range_done pairs with it) */
	__atomic_fetch_add(&range_pending, 1, __ATOMIC_SEQ_CST);
	int hi = __atomic_load_n(&top, __ATOMIC_SEQ_CST), checked = 0;
	for (unsigned fd = first; fd <= last && (int)fd <= hi && fd < D9__OWN_FDS; fd++) {
		if (D9_UNLIKELY(__atomic_load_n(&own[fd], __ATOMIC_SEQ_CST) & OURS)) {
			if (!checked++ && !d9__calls_off() && !same_process())
				return; /* d9__fd_host_range_done still follows */
			take((int)fd);
		}
	}
}

void d9__fd_host_range_done(void)
{
	if (d9__self.fd_private)
		return;
	__atomic_fetch_sub(&range_pending, 1, __ATOMIC_RELEASE);
}

void d9__fd_child(void)
{
	d9__fd_init();
	/* the calls in progress were the other threads', which the child does not have */
	for (int fd = 0; fd <= top && fd < D9__OWN_FDS; fd++)
		if (own[fd])
			own[fd] &= OURS | REVOKED;
	range_pending = 0;
}

/* ---- agent threads with a table of their own -----------------------------------------------------
 * The agent's threads would otherwise share the program's descriptor table, and the kernel takes
 * a file reference at each of the program's system calls on a descriptor once a table is shared
 * (and a regular file's position lock at a write): a program with no threads of its own pays
 * about 27 ns a call for the agent's mere presence (agent/COST.md section 31). So each agent
 * thread gives itself an empty table at its start (close_range(0, ~0U, CLOSE_RANGE_UNSHARE):
 * Linux 5.9; the kernel copies none of the program's descriptors, takes no reference to its
 * files and flushes none) and fills 0, 1 and 2 with /dev/null, so that no file of the agent's
 * gets a number that a library writes to as its stdout or stderr. From then on the program
 * cannot reach the thread's numbers, and the marks above are not needed for them: the calls
 * above act at once on such a thread (d9__self.fd_private), and the interposers leave the
 * program's tables by number alone (libc-fds.c, requests.c). A thread an agent thread starts
 * (libcurl's resolver) shares its table, and is the agent's. Where the call is refused (an
 * older kernel, a seccomp filter), or D9_AGENT_FDS=shared, the thread keeps the program's table
 * and the marks. agent/DESIGN.md, "Descriptors and files". */
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1u << 1)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

int d9__fd_private_refused; /* the last refusal: close_range's -errno, 1: a seccomp filter; 0: none */

void d9__fd_private_begin(int filtered)
{
	if (d9__self.fd_private || d9__g.cfg.agent_fds_shared)
		return; /* started by an agent thread with a table of its own: shares it */
	/* not under a seccomp filter (d9__seccomp_filtered): one that does not list close_range
	 * may kill the process instead of refusing */
	long r = filtered ? 1 : raw4(SYS_close_range, 0, (long)~0u, CLOSE_RANGE_UNSHARE, 0);
	if (r != 0) {
		__atomic_store_n(&d9__fd_private_refused, (int)r, __ATOMIC_RELAXED);
		/* started by an agent thread that has a table of its own (d9__spawn_blocked): the
		 * thread shares that one, which is not the program's either */
		if (d9__self.fd_inherited)
			d9__self.fd_private = 1;
		return;
	}
	long fd = raw4(SYS_openat, AT_FDCWD, (long)"/dev/null", O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) /* a chroot without /dev/null: a descriptor nobody reads or writes */
		fd = raw4(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK, 0, 0);
	if (fd == 0) {
		raw4(SYS_dup3, 0, 1, O_CLOEXEC, 0);
		raw4(SYS_dup3, 0, 2, O_CLOEXEC, 0);
	}
	d9__self.fd_private = 1;
}
