/* files.c: the agent's own descriptors and files. The host may close any descriptor number and
 * reuse it (daemons close 3..1023 after start), and others may plant links or FIFOs under the
 * names the agent uses. So every descriptor the agent keeps is marked the agent's (fdown.c),
 * moved near the top of the table and remembered with its device and inode; it is written,
 * truncated or closed only inside d9__fd_enter/leave (the program's close or dup2 of the number
 * waits meanwhile) and after fstat shows it still is that file. Files are created with
 * O_EXCL|O_NOFOLLOW, and files found on disk are opened O_NONBLOCK|O_NOFOLLOW and used only when
 * they are regular files of ours. agent/DESIGN.md, "Descriptors and files". */
#include "internal.h"

#include <dirent.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Descriptors go at or above this number: programs take the lowest free number, so they reuse
 * ours only when they hold hundreds of descriptors, or after closing them by number. */
static int high_floor(void)
{
	struct rlimit rl;
	rlim_t lim = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lim = rl.rlim_cur;
	if (lim > 1024)
		lim = 1024; /* higher numbers only grow the kernel's table */
	return lim > 128 ? (int)lim - 64 : 3;
}

/* Grows the descriptor table now to hold the agent's high numbers. Called in a forked child's
 * fork handler, where the calling thread is the process's only one: the kernel then enlarges
 * the table at once. Grown later, by the writer's first high descriptor while two threads share
 * the table, it first waits for an RCU grace period (expand_fdtable; 8 to 20 ms measured here,
 * in each child that a fork storm makes before its parent holds a high descriptor: a child's
 * table is only as large as the parent's highest open number needs). Touches only a
 * descriptor it makes and closes; errno kept. */
void d9__fd_table_grow(void)
{
	int saved = errno, floor = high_floor();
	int fd = eventfd(0, EFD_CLOEXEC);

	if (fd >= 0) {
		int hi = fd < floor ? fcntl(fd, F_DUPFD_CLOEXEC, floor) : -1;
		if (hi >= 0)
			close(hi);
		close(fd);
	}
	errno = saved;
}

/* Takes a number the kernel just gave this thread: marked the agent's (fdown.c), so that from
 * here on the program's close or dup2 of it waits for the agent's call in progress. 0 or
 * -errno; on failure the number is given up: closed when it never was the agent's to guard,
 * else left alone (the program's, or not known to be free of its calls). */
static int own_new(int fd)
{
	int err = d9__fd_own(fd);

	if (err == -EMFILE)
		syscall(SYS_close, fd); /* too high to guard: closed at once, by this thread */
	return err;
}

/* Moves the agent's fd to a high free number (close-on-exec) when one is free; returns the
 * descriptor that stays the agent's. */
static int move_high(int fd)
{
	int floor = high_floor();

	if (fd >= floor || d9__fd_enter(fd))
		return fd;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, floor);
	d9__fd_leave(fd);
	if (hi < 0 || own_new(hi))
		return fd; /* none free up there: keep the low one, still checked before each use */
	d9__fd_close(fd);
	return hi;
}

enum { REGULAR = 1, HIGH = 2, DIRECTORY = 4, FOLLOW = 8 };

/* fd, just opened by this thread from `name` (relative to dirfd), becomes f: a regular file
 * owned by the effective user with REGULAR, a directory with DIRECTORY, moved to a high number
 * with HIGH. The file is the one named (fstatat, following a link only with FOLLOW): a number
 * the program took and refilled before the agent marked it is then not adopted (and not
 * closed). 0 or -errno (fd given up then); *out (if any) gets the file's stat. */
static int adopt(struct d9__file *f, int fd, int how, int dirfd, const char *name,
	struct stat *out)
{
	int regular = how & REGULAR;
	struct stat st, named;
	int err = own_new(fd);

	if (err)
		return err;
	if ((err = d9__fd_enter(fd)) != 0)
		return err;
	if (fstat(fd, &st) != 0)
		err = -errno;
	else if (fstatat(dirfd, name, &named, how & FOLLOW ? 0 : AT_SYMLINK_NOFOLLOW) != 0)
		/* removed since the open (another process's budget or compressor): the file opened
		 * if it is a removed file of ours or a removed directory, closed then */
		err = errno == ENOENT && !st.st_nlink && ((S_ISREG(st.st_mode) &&
			st.st_uid == geteuid()) || ((how & DIRECTORY) && S_ISDIR(st.st_mode))) ?
			-ENOENT : -ESTALE;
	else if (named.st_dev != st.st_dev || named.st_ino != st.st_ino)
		err = -ESTALE;
	else if (regular && (!S_ISREG(st.st_mode) || st.st_nlink != 1 || (st.st_uid != geteuid() &&
		!(geteuid() == 0 && dirfd == AT_FDCWD && st.st_uid == d9__trace_dir_owner(name)))))
		/* a second name (a hard link, fs.protected_hardlinks=0) may be a file outside the
		 * trace directory: every file the agent makes has one. Another user's file only in
		 * the subdirectory made for that user, to root just before it changes to that user
		 * (d9__file_create gave it the files it made there) */
		err = -EPERM;
	else if ((how & DIRECTORY) && !S_ISDIR(st.st_mode))
		err = -ENOTDIR;
	else if (regular) /* back to blocking I/O (O_NONBLOCK only kept the open from a FIFO) */
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	d9__fd_leave(fd);
	if (err == -ESTALE && d9__self.fd_private) {
		/* a table of this thread's own: no one else's call can have refilled the number, so
		 * it still holds what this thread opened (renamed or removed since): closed */
		d9__fd_close(fd);
		return err;
	}
	if (err == -ESTALE || err == -EBADF) {
		/* not the file opened: the program's, or unknown, left open; or closed by the
		 * program already (its dup2 and close of every number naming a segment), which a
		 * close here could only hit once the program's next open got the number again */
		d9__fd_unmark(fd);
		return err;
	}
	if (err) {
		d9__fd_close(fd);
		return err;
	}
	f->fd = how & HIGH ? move_high(fd) : fd;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	if (out)
		*out = st;
	return 0;
}

/* adopt() for the exported calls: fd < 0 is a failed open (its errno); f->fd -1 on failure;
 * errno back to `saved`. */
static int adopted(struct d9__file *f, int fd, int how, int dirfd, const char *name,
	int saved, struct stat *out)
{
	int err = fd < 0 ? -errno : adopt(f, fd, how, dirfd, name, out);

	if (err)
		f->fd = -1;
	errno = saved;
	return err;
}

int d9__file_take(struct d9__file *f, int fd, int dirfd, const char *name)
{
	return adopted(f, fd, HIGH, dirfd, name, errno, NULL);
}

int d9__file_take_here(struct d9__file *f, int fd, int dirfd, const char *name)
{
	return adopted(f, fd, 0, dirfd, name, errno, NULL);
}

int d9__file_create(struct d9__file *f, const char *path, int flags)
{
	int saved = errno;
	int fd = open(path, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd >= 0 && geteuid() == 0) {
		/* a file of the subdirectory of the user the program is changing to, made while the
		 * writer still runs as root (the directory moved at the change's start, the change
		 * itself comes after): that user's, as the ones made after it will be; else that
		 * user's budget could never delete it, nor its next process use its lock file */
		uid_t owner = d9__trace_dir_owner(path);
		if (owner != (uid_t)-1 && owner != 0 && fchown(fd, owner, (gid_t)-1) != 0)
			errno = saved; /* no CAP_CHOWN (dnsmasq's ACL form): it stays root's */
	}
	return adopted(f, fd, HIGH, AT_FDCWD, path, saved, NULL);
}

/* Opens an existing file: a regular file owned by the effective user with one name, else -EPERM
 * (FIFOs, devices, sockets, directories, links, hard-linked files and other users' files are
 * never ours). */
int d9__file_open(struct d9__file *f, const char *path, int flags)
{
	int saved = errno;
	int fd = open(path, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);

	return adopted(f, fd, REGULAR | HIGH, AT_FDCWD, path, saved, NULL);
}

int d9__file_check(const struct d9__file *f)
{
	int saved = errno;
	struct stat st;
	int err = 0;

	if (f->fd < 0)
		err = -EBADF;
	else if (!d9__fd_still(f->fd))
		err = -ESTALE; /* the program took the number */
	else if (fstat(f->fd, &st) != 0)
		err = -errno;
	else if (st.st_dev != f->dev || st.st_ino != f->ino)
		err = -ESTALE;
	errno = saved;
	return err;
}

int d9__file_enter(const struct d9__file *f)
{
	if (f->fd < 0)
		return -EBADF;
	int err = d9__fd_enter(f->fd);
	if (!err && (err = d9__file_check(f)) != 0)
		d9__fd_leave(f->fd);
	return err;
}

void d9__file_leave(const struct d9__file *f)
{
	d9__fd_leave(f->fd);
}

int d9__file_write(struct d9__file *f, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	int saved = errno;
	int err = d9__file_enter(f);

	if (err)
		goto out;
	while (n > 0) {
		if (!d9__fd_still(f->fd)) {
			err = -ESTALE; /* the program's take gave up waiting for the last write */
			break;
		}
		ssize_t w = write(f->fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
	d9__file_leave(f);
out:
	errno = saved;
	return err;
}

int d9__file_truncate(struct d9__file *f, uint64_t size)
{
	int saved = errno;
	int err = d9__file_enter(f);

	if (!err) {
		if (ftruncate(f->fd, (off_t)size) != 0)
			err = -errno;
		d9__file_leave(f);
	}
	errno = saved;
	return err;
}

int d9__file_close(struct d9__file *f)
{
	int saved = errno;
	int err = d9__file_enter(f);

	if (!err) {
		err = d9__fd_close(f->fd);
		d9__file_leave(f);
	} else if (f->fd >= 0) {
		d9__fd_disown(f->fd); /* a number that failed the check is the program's */
	}
	f->fd = -1; /* not ours any more either way */
	errno = saved;
	return err;
}

int d9__file_drop(struct d9__file *f)
{
	if (f->fd >= 0)
		d9__fd_disown(f->fd);
	f->fd = -1;
	return 0;
}

int d9__file_dup(const struct d9__file *f)
{
	int saved = errno;
	/* high only: the reader holds it for a whole segment's read and zlib closes it, so it must
	 * not sit among the numbers the host takes first. Marked the agent's, so that the reader's
	 * close (through this library's close, on the agent's thread) is checked too. */
	int fd = -1;

	if (!d9__file_enter(f)) {
		fd = fcntl(f->fd, F_DUPFD_CLOEXEC, high_floor());
		d9__file_leave(f);
		if (fd >= 0 && own_new(fd))
			fd = -1;
	}
	/* still f's file once marked (the program may have refilled the number before) */
	if (fd >= 0) {
		struct d9__file copy = { fd, f->dev, f->ino };
		if (d9__file_enter(&copy)) {
			d9__fd_disown(fd);
			fd = -1;
		} else {
			d9__file_leave(&copy);
		}
	}
	errno = saved;
	return fd;
}

/* ---- directories and stdio streams --------------------------------------------------------------
 * The C library's opendir and fopen keep a descriptor it closes itself (closedir, fclose), where
 * fdown.c cannot see it: a program that closed that number meanwhile (a daemon's sweep of
 * 3..1023 with syscall(SYS_close)) and opened a file that got it would have its file closed by
 * the agent. The agent reads directories and stdio streams through descriptors of its own. */

int d9__dir_open(struct d9__file *f, int dirfd, const char *name, int follow, struct stat *st)
{
	int saved = errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | (follow ? 0 : O_NOFOLLOW) | O_CLOEXEC);

	return adopted(f, fd, DIRECTORY | (follow ? FOLLOW : 0), dirfd, name, saved, st);
}

const char *d9__dir_next(struct d9__file *f, struct d9__dir_read *r)
{
	for (;;) {
		while (r->pos < r->len) {
			struct dirent64 *e = (struct dirent64 *)((char *)r->buf + r->pos);
			r->pos += e->d_reclen;
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				return e->d_name;
		}
		int saved = errno;
		ssize_t n = -1;
		if (!(r->err = d9__file_enter(f))) {
			n = getdents64(f->fd, r->buf, sizeof(r->buf));
			r->err = n < 0 ? -errno : 0;
			d9__file_leave(f);
		}
		errno = saved;
		r->pos = 0;
		r->len = n > 0 ? (unsigned)n : 0;
		if (n <= 0)
			return NULL; /* the end (r->err 0), or cut short */
	}
}

static ssize_t stream_read(void *cookie, char *buf, size_t n)
{
	struct d9__file *f = cookie;
	ssize_t r;

	if (d9__file_enter(f)) {
		errno = EBADF;
		return -1;
	}
	do
		r = read(f->fd, buf, n);
	while (r < 0 && errno == EINTR);
	d9__file_leave(f);
	return r;
}

static int stream_seek(void *cookie, off64_t *pos, int whence)
{
	struct d9__file *f = cookie;
	int err = d9__file_enter(f);

	if (err) {
		errno = -err;
		return -1;
	}
	off64_t r = lseek64(f->fd, *pos, whence);
	d9__file_leave(f);
	if (r < 0)
		return -1;
	*pos = r;
	return 0;
}

static int stream_close(void *cookie)
{
	d9__file_close(cookie);
	free(cookie);
	return 0;
}

/* Opens a file to read, links followed (/proc/self/fd/N, /proc/PID/...), as the agent's: 0 or
 * -errno. */
static int open_read(struct d9__file *f, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	return fd < 0 ? -errno : adopt(f, fd, FOLLOW, AT_FDCWD, path, NULL);
}

FILE *d9__file_fopen_read(const char *path)
{
	int saved = errno;
	struct d9__file *f = malloc(sizeof(*f));
	FILE *s = NULL;

	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	int err = open_read(f, path);
	if (!err) {
		cookie_io_functions_t io = {
			.read = stream_read, .seek = stream_seek, .close = stream_close
		};
		if ((s = fopencookie(f, "r", io)) != NULL) {
			errno = saved;
			return s;
		}
		err = -ENOMEM;
		d9__file_close(f);
	}
	free(f);
	errno = -err;
	return NULL;
}

/* Whether the calling thread runs under a seccomp filter (its /proc status's Seccomp field),
 * or that cannot be read. A filter may kill the process (SIGSYS: systemd's SystemCallFilter
 * does by default) at a call it does not list, so the agent makes no call newer than the
 * program's own under one: close_range for a table of its own, pidfd_getfd (fdown.c,
 * config.c). */
/* The calling thread's seccomp mode from /proc/thread-self/status: 0 none, 1 strict, 2 filter,
 * -1 unknown (unreadable). */
static int seccomp_mode(void)
{
	char buf[4096];

	if (!d9__file_read_small("/proc/thread-self/status", buf, sizeof(buf)))
		return -1;
	const char *p = strstr(buf, "\nSeccomp:");
	if (!p)
		return 0; /* a kernel without seccomp */
	p += strlen("\nSeccomp:");
	while (*p == ' ' || *p == '\t')
		p++;
	return *p >= '0' && *p <= '2' ? *p - '0' : -1;
}

int d9__seccomp_filtered(void)
{
	if (d9__calls_off() || d9__filter_inherited)
		return 1; /* no read (a call it may kill at) */
	return seccomp_mode() != 0;
}

int d9__filter_inherited;

/* The calls an inherited filter may kill at, each tried once at load (d9__seccomp_probe): 1 it
 * survives, 0 it does not (or it could not be told) */
static int survives_setpriority = 1, survives_perf = 1, survives_mincore = 1;

void d9__seccomp_at_start(void)
{
	/* unreadable (no /proc at load): as filtered, so the probes tell */
	d9__filter_inherited = seccomp_mode() != 0;
}

/* 1 when the system call survives the process's filter, 0 when the filter kills at it (or it
 * could not be told): made in a child process, not a thread, that shares nothing (a raw clone
 * without CLONE_VM: no core of the program's memory, and before Linux 5.16 a killed CLONE_VM
 * child's core dump took every process sharing that memory), is not dumpable (its first call),
 * runs no handler of the program's (every signal blocked, no atfork handler) and has no exit
 * signal (reaped here with __WALL). At load: the program has no thread yet to reap it, and its
 * memory is small to copy. */
static int probe(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
	sigset_t all, old;
	int st = 0, r = 0;
	/* clone3 first, as glibc starts threads (a filter written for a threaded program allows
	 * it), plain clone where the kernel or the filter says ENOSYS or EPERM */
	struct clone_args ca;

	memset(&ca, 0, sizeof(ca));
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the child starts with every signal blocked */
	long pid = d9__raw6(SYS_clone3, (long)&ca, sizeof(ca), 0, 0, 0, 0);
	if (pid == -ENOSYS || pid == -EPERM)
		pid = d9__raw6(SYS_clone, 0, 0, 0, 0, 0, 0);
	if (pid == 0) {
		d9__raw6(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0, 0);
		d9__raw6(nr, a0, a1, a2, a3, a4, a5);
		/* never returns into the program's code, even where a filter answers exit_group
		 * with an errno */
		for (;;) {
			d9__raw6(SYS_exit_group, 0, 0, 0, 0, 0, 0);
			d9__raw6(SYS_exit, 0, 0, 0, 0, 0, 0);
			__builtin_trap();
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid > 0) {
		/* 1 s at most: a child stopped, traced, or waiting for a seccomp supervisor's answer
		 * is killed (and counts as "killed": the call is left out) */
		long w = 0;
		for (int i = 0; i < 1000 && (w == 0 || w == -EINTR); i++) {
			w = d9__raw6(SYS_wait4, pid, (long)&st, __WALL | WNOHANG, 0, 0, 0);
			if (w == 0 || w == -EINTR) {
				struct timespec ts = { 0, 1000000 };
				d9__raw6(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
			}
		}
		if (w == 0 || w == -EINTR) {
			d9__raw6(SYS_kill, pid, SIGKILL, 0, 0, 0, 0);
			do
				w = d9__raw6(SYS_wait4, pid, (long)&st, __WALL, 0, 0, 0);
			while (w == -EINTR);
			st = SIGKILL; /* (as killed) */
		}
		r = w == pid && WIFEXITED(st);
	}
	return r;
}

void d9__seccomp_probe(void)
{
	int saved = errno;
	unsigned char vec;
	struct perf_event_attr a;

	if (!d9__filter_inherited)
		return;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.disabled = 1;
	survives_setpriority = probe(SYS_setpriority, PRIO_PROCESS, 0, 19, 0, 0, 0);
	survives_perf = probe(SYS_perf_event_open, (long)&a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC, 0);
	survives_mincore = probe(SYS_mincore, (long)((uintptr_t)&vec & ~(uintptr_t)4095), 1,
		(long)&vec, 0, 0, 0);
	errno = saved;
}

int d9__call_survives(long nr)
{
	if (!d9__filter_inherited)
		return 1;
	if (nr == SYS_setpriority)
		return survives_setpriority;
	if (nr == SYS_perf_event_open)
		return survives_perf;
	if (nr == SYS_mincore)
		return survives_mincore;
	return 0; /* not tried: left out */
}

size_t d9__file_read_small(const char *path, char *buf, size_t cap)
{
	int saved = errno;
	struct d9__file f;
	size_t n = 0;

	if (!cap)
		return 0;
	if (!open_read(&f, path)) {
		/* the file named since the mark (adopt): held, each read only while still marked */
		if (!d9__fd_enter(f.fd)) {
			while (n < cap - 1 && d9__fd_still(f.fd)) {
				ssize_t r = read(f.fd, buf + n, cap - 1 - n);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					break;
				n += (size_t)r;
			}
			d9__fd_leave(f.fd);
		}
		d9__fd_close(f.fd);
	}
	buf[n] = 0;
	errno = saved;
	return n;
}

void d9__tmp_name(char *out, size_t cap, const char *base, const char *tag)
{
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r ^= d9__mono_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&r;
	/* <base><tag><pid>.<random>: recovery reads the pid to remove files of dead processes */
	snprintf(out, cap, "%s%s%d.%016llx", base, tag, (int)getpid(), (unsigned long long)r);
}
