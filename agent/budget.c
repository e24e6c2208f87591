/* budget.c: one size and file-count budget for a trace directory, shared by every process that
 * writes segments of the same stem into it (D9_MAX_TOTAL_SIZE, D9_MAX_FILES). Processes agree
 * through <dir>/<stem>.lock, the agent's own file (O_EXCL|O_NOFOLLOW, a high descriptor), locked
 * with fcntl record locks only by agent threads and only with non-blocking tries up to a deadline:
 * never a host thread, never an unbounded wait. The lock file also holds the directory's running
 * count of deleted segments, which every trailer carries (FORMAT.md section 11). Design:
 * agent/DESIGN.md, "The directory budget". */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* fcntl (POSIX) record locks, not flock: they belong to the process, so a forked child that
 * inherits the descriptor excludes its parent like any other process, and takes no lock the
 * parent's writer held at the fork. The threads of one process are kept apart by mu. */
static struct {
	pthread_mutex_t mu;
	struct d9__file lock; /* <dir>/<stem>.lock opened O_RDWR; fd -1: none */
	uint64_t deleted_segments, deleted_bytes; /* the directory's totals, as of our last look */
	uint64_t total, gen; /* the directory's bytes at our last look (less the compressor's
			      * savings since), and how many looks (D9_COMPRESS=auto) */
} bud = { PTHREAD_MUTEX_INITIALIZER, { -1, 0, 0 }, 0, 0, 0, 0 };

/* 16 bytes, then u64 LE: segments deleted, their bytes; then (optional: an older agent writes
 * the first 32 bytes only) the estimate: the directory's bytes and files, and the
 * CLOCK_MONOTONIC ns of the scan it started from (0: none) */
#define LEDGER_MAGIC "d9 budget 1\n\0\0\0\0"
#define LEDGER_BYTES 56
/* An estimate this young, with room for half the budget after what it adds, spares a scan. */
#define ESTIMATE_FRESH_NS 1000000000ull

struct ledger {
	uint64_t segs, bytes, est_bytes, est_files, est_ns;
	int ours; /* the file was empty or began with the magic: only then written */
};

void d9__budget_child(void)
{
	/* a parent thread may have held it at the fork; the descriptor stays ours (it is the same
	 * file, and the parent's record locks are not inherited) */
	pthread_mutex_init(&bud.mu, NULL);
}

void d9__budget_deleted(uint64_t *segments, uint64_t *bytes)
{
	*segments = __atomic_load_n(&bud.deleted_segments, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&bud.deleted_bytes, __ATOMIC_RELAXED);
}

uint64_t d9__budget_total(uint64_t *gen)
{
	*gen = __atomic_load_n(&bud.gen, __ATOMIC_ACQUIRE);
	return __atomic_load_n(&bud.total, __ATOMIC_RELAXED);
}

void d9__budget_shrunk(uint64_t bytes)
{
	uint64_t t = __atomic_load_n(&bud.total, __ATOMIC_RELAXED);

	while (!__atomic_compare_exchange_n(&bud.total, &t, t > bytes ? t - bytes : 0, 1,
		__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void lock_path(char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s.lock", d9__g.cfg.dir, d9__g.cfg.stem);
}

/* The lock file's descriptor for the calling thread: bud.lock, or on an agent thread with a
 * descriptor table of its own (fdown.c) one of the thread's own, since another thread's number
 * means nothing there. mu still keeps the process's threads apart; record locks then belong to
 * each thread's table, which mu makes no difference to (a thread releases before another takes).
 * Closed with the thread's table when the thread ends. */
static __thread struct d9__file own_lock __attribute__((tls_model("initial-exec"))) = { -1, 0, 0 };
#define LK (d9__self.fd_private ? &own_lock : &bud.lock)

/* Makes bud.lock the file now at <dir>/<stem>.lock, creating it when missing (mu held): a
 * directory removed and made again gets a new lock file, and every process must use that one.
 * Returns 0 or -errno (then the process keeps the budget alone, said once). */
static int lock_file(void)
{
	char path[4200];
	struct stat st;

	lock_path(path, sizeof(path));
	if (LK->fd >= 0 && d9__file_check(LK) == 0 && lstat(path, &st) == 0 &&
		st.st_dev == LK->dev && st.st_ino == LK->ino)
		return 0;
	d9__file_close(LK);
	/* root, just before a drop, in a subdirectory it could not give to the user (paths.c's
	 * ACL form): a lock file of root's there would be no use to that user, whose process makes
	 * its own after the drop; until then this process keeps the budget alone, quietly */
	if (geteuid() == 0 && d9__trace_dir_opened())
		return -EAGAIN;
	int err = d9__file_open(LK, path, O_RDWR);
	if (err == -ENOENT) {
		err = d9__file_create(LK, path, O_RDWR);
		if (err == -EEXIST) /* another process made it first */
			err = d9__file_open(LK, path, O_RDWR);
		else if (!err && stat(d9__g.cfg.dir, &st) == 0 && st.st_uid != geteuid() &&
			geteuid() == 0)
			/* root about to drop privileges made it in the target user's directory
			 * (d9-uid-N, paths.c): it is that user's, as the segments there are, so the
			 * processes that run as that user afterwards can use it */
			if (!d9__file_enter(LK)) {
				(void)fchown(LK->fd, st.st_uid, st.st_gid);
				d9__file_leave(LK);
			}
	}
	if (err)
		d9__log_once(D9_LOG_WARN, "cannot use the budget lock file %s (%s): this process keeps "
			"D9_MAX_TOTAL_SIZE without the other processes writing to the directory",
			path, strerror(-err));
	return err;
}

static int record_lock(int type)
{
	struct flock l = { .l_type = (short)type, .l_whence = SEEK_SET };

	if (d9__file_enter(LK))
		return -EBADF;
	/* inside enter/leave: an unlock on the program's file would drop its own locks */
	int err = fcntl(LK->fd, F_SETLK, &l) == 0 ? 0 : -errno;
	d9__file_leave(LK);
	return err;
}

int d9__dirlock_take(uint64_t wait_ns, int abortable)
{
	int saved = errno;
	uint64_t deadline = d9__mono_ns() + wait_ns;
	long pause_ns = 1000000;

	d9__lock(&bud.mu);
	if (lock_file() != 0) {
		errno = saved;
		return 1; /* alone: the mutex still orders this process's threads */
	}
	for (;;) {
		int err = record_lock(F_WRLCK);
		if (!err)
			break;
		if (err != -EAGAIN && err != -EACCES && err != -EINTR) {
			/* no record locks here (some network file systems): alone, said once */
			d9__log_once(D9_LOG_WARN, "cannot lock the budget lock file of %s: %s; this "
				"process keeps D9_MAX_TOTAL_SIZE alone", d9__g.cfg.dir, strerror(-err));
			errno = saved;
			return 1;
		}
		/* the process is exiting and the exit cannot wait for the compressor */
		if (d9__mono_ns() >= deadline || (abortable &&
			__atomic_load_n(&d9__g.compress_abort, __ATOMIC_RELAXED))) {
			d9__unlock(&bud.mu);
			errno = saved;
			return -ETIMEDOUT;
		}
		struct timespec ts = { 0, pause_ns };
		nanosleep(&ts, NULL);
		if (pause_ns < 8000000)
			pause_ns *= 2;
	}
	errno = saved;
	return 0;
}

void d9__dirlock_give(int taken)
{
	int saved = errno;

	if (taken == 0)
		record_lock(F_UNLCK);
	d9__unlock(&bud.mu);
	errno = saved;
}

/* ---- the ledger: the directory's count of deleted segments ---------------------------------- */

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

/* Reads the totals (lock held); a new or foreign-looking file counts from 0, and one without the
 * estimate (new, or written by an older agent) has none. A file that is neither empty nor a
 * ledger is not written over (l->ours 0): whatever it is, it is not the agent's. */
static void ledger_read(struct ledger *l)
{
	uint8_t buf[LEDGER_BYTES];
	ssize_t n;

	memset(l, 0, sizeof(*l));
	do
		n = pread(LK->fd, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	l->ours = n == 0 || (n >= 32 && !memcmp(buf, LEDGER_MAGIC, 16));
	if (n < 32 || !l->ours || d9__file_check(LK))
		return;
	l->segs = le64(buf + 16);
	l->bytes = le64(buf + 24);
	if (n == LEDGER_BYTES) {
		l->est_bytes = le64(buf + 32);
		l->est_files = le64(buf + 40);
		l->est_ns = le64(buf + 48);
	}
}

static void ledger_write(const struct ledger *l)
{
	uint8_t buf[LEDGER_BYTES];
	ssize_t n;

	if (!l->ours) {
		d9__log_once(D9_LOG_WARN, "the budget lock file of %s holds something else: d9 does not "
			"write over it; deletions by the budget are not counted there", d9__g.cfg.dir);
		return;
	}
	memcpy(buf, LEDGER_MAGIC, 16);
	put_le64(buf + 16, l->segs);
	put_le64(buf + 24, l->bytes);
	put_le64(buf + 32, l->est_bytes);
	put_le64(buf + 40, l->est_files);
	put_le64(buf + 48, l->est_ns);
	if (d9__file_enter(LK))
		return;
	do
		n = pwrite(LK->fd, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR && d9__fd_still(LK->fd));
	d9__file_leave(LK);
	if (n != (ssize_t)sizeof(buf))
		d9__log_once(D9_LOG_WARN, "cannot update the budget lock file of %s: deletions by "
			"the budget may be undercounted", d9__g.cfg.dir);
}

/* ---- the scan ---------------------------------------------------------------------------------- */

struct cand {
	char name[256];
	uint64_t size;
	struct timespec mtime;
	long pid, seq;
	int dir; /* index in struct scan's dfd: 0 the trace directory, then d9-uid-N ones */
};

/* Root's view takes in the d9-uid-N directories it prepared for privilege drops (paths.c): their
 * processes run as N, cannot see the trace directory and keep the budget among themselves; root,
 * which may delete there, keeps it for the whole tree at its own segments, seals and exit. */
#define SUBDIRS_MAX 8

struct scan {
	struct d9__file dir[1 + SUBDIRS_MAX]; /* fd -1: not open (any more) */
	uid_t uid[1 + SUBDIRS_MAX]; /* whose files count in each */
	int ndirs;
	char subname[SUBDIRS_MAX][24]; /* the d9-uid-N names the trace directory's scan found */
	uid_t subuid[SUBDIRS_MAX]; /* their N */
	int nsub;
	struct cand *c;
	size_t nc, ccap, nfiles;
	uint64_t total;
};

int d9__mtime_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	if (a->tv_nsec != b->tv_nsec)
		return a->tv_nsec < b->tv_nsec ? -1 : 1;
	return 0;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	int c = d9__mtime_cmp(&x->mtime, &y->mtime);

	if (c)
		return c;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Parses "<stem>.<pid>.<seq><suffix>"; returns the suffix or NULL. */
const char *d9__seg_parse(const char *name, long *pid, long *seq)
{
	const char *stem = d9__g.cfg.stem;
	size_t n = strlen(stem);
	char *end;

	if (strncmp(name, stem, n) || name[n] != '.')
		return NULL;
	*pid = strtol(name + n + 1, &end, 10);
	if (*end != '.' || *pid <= 0)
		return NULL;
	*seq = strtol(end + 1, &end, 10);
	if (*seq < 0 || *end != '.')
		return NULL;
	return end;
}

/* Root only: takes d9-uid-N (N > 0) of the trace directory into the scan when it is a real
 * directory of N that nobody else can write to, or root's with the ACL that lets N alone in (what
 * paths.c made for a privilege drop; only N's files in it are counted, as everywhere). */
static void scan_subdir(struct scan *sc, const char *name, uid_t uid)
{
	struct d9__agent *g = &d9__g;
	char path[4200];
	struct stat st;

	if (sc->ndirs > SUBDIRS_MAX)
		return;
	struct d9__file *f = &sc->dir[sc->ndirs];
	snprintf(path, sizeof(path), "%.2047s/%.255s", g->cfg.dir, name);
	if (d9__dir_open(f, AT_FDCWD, path, 0, &st))
		return;
	if (st.st_uid != uid || (st.st_mode & 022)) {
		int acl = !d9__file_enter(f);
		if (acl) {
			acl = d9__dir_acl_form(f->fd, NULL, &st, uid);
			d9__file_leave(f);
		}
		if (!acl) {
			d9__file_close(f);
			return;
		}
	}
	sc->uid[sc->ndirs] = uid;
	sc->ndirs++;
}

/* Counts the segment files of directory di of sc owned by sc->uid[di] and makes the sealed ones
 * candidates for deletion; in the trace directory of a root process, also finds the d9-uid-N
 * directories (their names, for scan_subdir). 1 when the whole directory was read, 0 when the
 * scan was cut short (the program took the number): no estimate is kept from it then. */
static int scan_dir(struct scan *sc, int di, uint64_t own_reserve)
{
	struct d9__agent *g = &d9__g;
	struct d9__file *dir = &sc->dir[di];
	struct d9__dir_read rd = { 0 };
	const char *name;

	if (d9__file_enter(dir))
		return 0; /* held: the fstatat below names this directory */
	while ((name = d9__dir_next(dir, &rd))) {
		long pid, seq;
		const char *suffix = d9__seg_parse(name, &pid, &seq);
		struct stat st;
		if (!suffix && di == 0 && sc->uid[0] == 0 && !strncmp(name, "d9-uid-", 7)) {
			/* N > 0, digits only: what paths.c makes */
			char *end;
			unsigned long uid = strtoul(name + 7, &end, 10);
			if (sc->nsub < SUBDIRS_MAX && name[7] >= '1' && name[7] <= '9' && !*end &&
				uid <= 0xfffffffful && strlen(name) < sizeof(sc->subname[0])) {
				sc->subuid[sc->nsub] = (uid_t)uid;
				strcpy(sc->subname[sc->nsub++], name);
			}
			continue;
		}
		if (!d9__fd_still(dir->fd)) {
			rd.err = -ESTALE; /* taken by the program: its close waits for no more */
			break;
		}
		if (!suffix || fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
			!S_ISREG(st.st_mode) || st.st_uid != sc->uid[di])
			continue; /* not a file of ours: neither counted nor touched */
		uint64_t size = (uint64_t)st.st_size;
		sc->nfiles++;
		if (!strcmp(suffix, ".active") || !strcmp(suffix, ".active.tmp")) {
			/* the segment this process is opening gets its room; another writer's counts
			 * as it is now, and is counted again when it is sealed (its writer keeps
			 * the budget then): reserving D9_MAX_FILE_SIZE for every live writer would
			 * leave a fork-per-request server no sealed segment at all */
			sc->total += di == 0 && pid == (long)g->pid && size < own_reserve ? own_reserve :
				size;
			continue;
		}
		/* a .bin counts at its full size until it is compressed: the budget bounds the
		 * disk space the directory takes now, not what it will take */
		sc->total += size;
		if (strcmp(suffix, ".bin") && strcmp(suffix, ".bin.gz"))
			continue; /* temporary or set-aside files: counted, never deleted here */
		if (strlen(name) >= sizeof(sc->c->name))
			continue;
		if (sc->nc == sc->ccap) {
			size_t ncap = sc->ccap ? sc->ccap * 2 : 64;
			struct cand *m = realloc(sc->c, ncap * sizeof(*m));
			if (!m)
				continue; /* counted, not deletable: older ones may still go */
			sc->c = m;
			sc->ccap = ncap;
		}
		struct cand *k = &sc->c[sc->nc++];
		snprintf(k->name, sizeof(k->name), "%s", name);
		k->size = size;
		k->mtime = st.st_mtim;
		k->pid = pid;
		k->seq = seq;
		k->dir = di;
	}
	d9__file_leave(dir);
	return !rd.err;
}

/* unlinkat in dir while it is still the directory scanned: 0, or -1 with errno (ESTALE: the
 * program took its number since). */
static int unlink_in(struct d9__file *dir, const char *name)
{
	int err = d9__file_enter(dir), r = -1;

	if (err) {
		errno = -err;
		return -1;
	}
	r = unlinkat(dir->fd, name, 0);
	d9__file_leave(dir);
	return r;
}

int d9__budget_enforce(uint64_t wait_ns, uint64_t own_reserve)
{
	struct d9__agent *g = &d9__g;
	const uint64_t budget = g->cfg.max_total_size;
	struct cand *c = NULL;
	uint64_t segs = 0, bytes = 0, del_segs = 0, del_bytes = 0, now;
	int saved = errno, scanned = 0;
	struct ledger l = { 0 };
	struct scan sc = { .ndirs = 0 };

	int taken = d9__dirlock_take(wait_ns, 0);
	if (taken < 0) {
		d9__log(D9_LOG_DEBUG, "budget lock of %s busy: the budget is kept at the next segment",
			g->cfg.dir);
		errno = saved;
		return taken;
	}
	now = d9__mono_ns(); /* the estimate's age, or the time of the scan below */
	if (taken == 0) {
		ledger_read(&l);
		/* A fresh estimate far from the limits spares the scan (a fork storm's children each
		 * scanned a directory of hundreds of files). What this look lets the directory gain
		 * before the next one is at most one segment of ours: it is added. */
		uint64_t add = g->cfg.max_file_size;
		if (l.est_ns && now >= l.est_ns && now - l.est_ns < ESTIMATE_FRESH_NS &&
			l.est_bytes <= budget / 2 && add <= budget / 2 - l.est_bytes &&
			l.est_files < g->cfg.max_files / 2) {
			l.est_bytes += add;
			l.est_files++;
			ledger_write(&l);
			d9__log(D9_LOG_DEBUG, "budget of %s: no scan, the estimate of %llu ms ago says "
				"%llu bytes in %llu files with this segment", g->cfg.dir,
				(unsigned long long)((now - l.est_ns) / 1000000),
				(unsigned long long)l.est_bytes, (unsigned long long)l.est_files);
			goto out;
		}
	}
	if (d9__dir_open(&sc.dir[0], AT_FDCWD, g->cfg.dir, 1, NULL))
		goto out;
	sc.uid[0] = geteuid();
	sc.ndirs = 1;
	int whole = scan_dir(&sc, 0, own_reserve);
	for (int i = 0; i < sc.nsub; i++)
		scan_subdir(&sc, sc.subname[i], sc.subuid[i]);
	for (int i = 1; i < sc.ndirs; i++)
		whole &= scan_dir(&sc, i, own_reserve);
	scanned = 1;
	c = sc.c;
	size_t nc = sc.nc, nfiles = sc.nfiles;
	uint64_t total = sc.total;
	if (c)
		qsort(c, nc, sizeof(*c), cand_cmp);
	/* oldest sealed first, whoever wrote them */
	for (size_t i = 0; i < nc && (total > budget || nfiles > g->cfg.max_files); i++) {
		if (unlink_in(&sc.dir[c[i].dir], c[i].name) != 0) {
			if (errno != ENOENT)
				d9__log_once(D9_LOG_WARN, "cannot delete %s/%s: %s", g->cfg.dir, c[i].name,
					strerror(errno));
			continue;
		}
		total -= c[i].size;
		nfiles--;
		del_segs++;
		del_bytes += c[i].size;
		d9__log(D9_LOG_DEBUG, "deleted %s/%s%s (directory budget)", g->cfg.dir,
			c[i].dir ? "d9-uid-N/" : "", c[i].name);
		if (c[i].dir)
			continue; /* another user's segment: not in this process's lists */
		char path[4400];
		snprintf(path, sizeof(path), "%.2047s/%.255s", g->cfg.dir, c[i].name);
		d9__sealed_forget(path);
		d9__s3_evicted(path); /* counted when it was still waiting for upload */
	}
	__atomic_store_n(&bud.total, total, __ATOMIC_RELAXED);
	__atomic_add_fetch(&bud.gen, 1, __ATOMIC_RELEASE);
	/* the estimate starts again from what was found (none when other users' directories
	 * were in it: their writers do not add to ours; none from a scan cut short) */
	l.est_bytes = total;
	l.est_files = nfiles;
	l.est_ns = sc.ndirs > 1 || !whole ? 0 : now;
	if (total > budget || nfiles > g->cfg.max_files)
		d9__log_once(D9_LOG_INFO, "the directory budget of %s cannot be kept now: the segments "
			"being written take %llu bytes in %zu files (said once)", g->cfg.dir,
			(unsigned long long)total, nfiles);
	for (int i = 0; i < sc.ndirs; i++)
		d9__file_close(&sc.dir[i]);
out:
	if (taken == 0) {
		l.segs += del_segs;
		l.bytes += del_bytes;
		if (del_segs || scanned)
			ledger_write(&l);
		segs = l.segs;
		bytes = l.bytes;
	} else {
		segs = bud.deleted_segments + del_segs; /* alone: this process's own count */
		bytes = bud.deleted_bytes + del_bytes;
	}
	__atomic_store_n(&bud.deleted_segments, segs, __ATOMIC_RELAXED);
	__atomic_store_n(&bud.deleted_bytes, bytes, __ATOMIC_RELAXED);
	d9__dirlock_give(taken);
	free(c);
	errno = saved;
	return 0;
}
