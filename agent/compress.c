/* compress.c: the sealed segments of this process series and background gzip compression (a
 * low-priority thread; .bin -> .bin.gz through a .tmp file and rename, so a crash never leaves a
 * half-written .gz under a final name). The same thread first writes symbol records into each
 * sealed segment (symbolize.c, D9_SYMBOLIZE). The size budget is the directory's (budget.c):
 * the renames that publish a segment happen under its lock, after checking that the budget has
 * not deleted the segment meanwhile. */
#include "internal.h"
#include "symbolize.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libdeflate.h>

int d9__spawn_blocked(pthread_t *th, void *(*fn)(void *)); /* lifecycle.c */

#define RETRY_NS (30 * 1000000000ull) /* a segment that failed to compress waits this long */

/* The exit path sets compress_abort, then reads tmp_creating; this sets tmp_creating, then reads
 * compress_abort (both sequentially consistent): either the creation sees the abort and makes
 * nothing, or the exit path waits until the file is made and announced, and removes it. So an
 * exit never leaves a temporary file that was created after it gave the compressor up. */
int d9__tmp_create(struct d9__file *out, const char *path)
{
	struct d9__agent *g = &d9__g;
	int err = -ECANCELED;

	__atomic_store_n(&g->tmp_creating, 1, __ATOMIC_SEQ_CST);
	/* announced once made: an exit that stops waiting (its deadline) never removes a file of
	 * that name that is not ours (then the file is the compressor's to remove, at its abort) */
	if (!__atomic_load_n(&g->compress_abort, __ATOMIC_SEQ_CST) &&
		(err = d9__file_create(out, path, O_WRONLY)) == 0) {
		snprintf(g->compress_tmp, sizeof(g->compress_tmp), "%s", path);
		__atomic_store_n(&g->tmp_live, 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&g->tmp_creating, 0, __ATOMIC_SEQ_CST);
	return err;
}

void d9__tmp_done(void)
{
	__atomic_store_n(&d9__g.tmp_live, 0, __ATOMIC_RELEASE);
}

void d9__tmp_abandon(uint64_t deadline)
{
	struct d9__agent *g = &d9__g;
	int saved = errno;

	/* a creation takes a few system calls; the compressor runs at nice 19, so it may need
	 * the CPU back to finish one: yield to it until the exit's deadline */
	while (__atomic_load_n(&g->tmp_creating, __ATOMIC_SEQ_CST) && d9__mono_ns() < deadline) {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	if (__atomic_exchange_n(&g->tmp_live, 0, __ATOMIC_ACQ_REL))
		unlink(g->compress_tmp);
	errno = saved;
}

/* Reads up to n bytes at off from our own file: pread leaves any offset alone, and the check
 * after it tells whether the bytes came from that file. Returns bytes read or -errno. */
static ssize_t read_own(struct d9__file *f, uint8_t *buf, size_t n, uint64_t off)
{
	ssize_t k;

	do
		k = pread(f->fd, buf, n, (off_t)off);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return -errno;
	int err = d9__file_check(f);
	return err ? err : k;
}

/* The gzip layout of a sealed segment (FORMAT.md, "Compressed segments"): one gzip member per
 * 64 KiB of the segment, each with an extra field "D9" holding the member's length, so that a
 * reader can find every member without inflating (the viewer inflates them one by one; zlib,
 * gzip and Python read the concatenation as one file). libdeflate instead of zlib: its level 1
 * takes about half of zlib's time per byte for a slightly smaller file (agent/COST.md, section
 * 8), and its CRC-32 is folded with carry-less multiplies. */
enum {
	GZ_PIECE = 65536, /* raw bytes per member */
	GZ_HEAD = 20, /* 10-byte header, XLEN, then SI1 'D' SI2 '9', LEN 4, the member length */
	GZ_TAIL = 8, /* CRC-32, ISIZE */
};

/* Writes in, one member per GZ_PIECE bytes, into out. zlib's gz* calls are not used: they write
 * and close their descriptor without asking whether it is still ours. */
static int deflate_file(struct d9__file *in, struct d9__file *out)
{
	static uint8_t ibuf[GZ_PIECE]; /* compressor thread only */
	static uint8_t *obuf;
	static size_t ocap;
	static struct libdeflate_compressor *c;
	uint64_t off = 0;
	ssize_t n;

	/* made once, kept for the process's life: level 1 needs about 0.2 MiB */
	if (!c && !(c = libdeflate_alloc_compressor(1)))
		return -ENOMEM;
	if (!obuf) {
		ocap = GZ_HEAD + libdeflate_deflate_compress_bound(c, GZ_PIECE) + GZ_TAIL;
		if (!(obuf = malloc(ocap)))
			return -ENOMEM;
	}
	for (;;) {
		/* a full piece unless the file ends: a short read is not taken for the end */
		for (n = 0; n < GZ_PIECE;) {
			ssize_t k = read_own(in, ibuf + n, (size_t)(GZ_PIECE - n), off + (uint64_t)n);
			if (k < 0)
				return (int)k;
			if (k == 0)
				break;
			n += k;
		}
		if (n == 0 && off)
			return 0; /* an empty input still makes one (empty) member: a valid gzip file */
		off += (uint64_t)n;
		size_t z = libdeflate_deflate_compress(c, ibuf, (size_t)n, obuf + GZ_HEAD,
			ocap - GZ_HEAD - GZ_TAIL);
		if (!z)
			return -EIO; /* cannot happen: the buffer holds the bound */
		uint32_t len = (uint32_t)(GZ_HEAD + z + GZ_TAIL);
		static const uint8_t head[16] = { 0x1f, 0x8b, 8, 4 /* FEXTRA */, 0, 0, 0, 0,
			4 /* fastest */, 3 /* Unix */, 8, 0, 'D', '9', 4, 0 };
		memcpy(obuf, head, sizeof(head));
		d9_store_le32(obuf + 16, len);
		d9_store_le32(obuf + GZ_HEAD + z, libdeflate_crc32(0, ibuf, (size_t)n));
		d9_store_le32(obuf + GZ_HEAD + z + 4, (uint32_t)n);
		int err = d9__file_write(out, obuf, len);
		if (err)
			return err;
		if (n < GZ_PIECE)
			return 0; /* the file ended inside this piece */
		if (__atomic_load_n(&d9__g.compress_abort, __ATOMIC_RELAXED))
			return -ECANCELED; /* the process is exiting: leave the .bin as it is */
	}
}

int d9__gzip_file(const char *src, uint64_t *out_size)
{
	char tmp[4300], dst[4300];
	struct d9__file in, out;
	int err;

	snprintf(dst, sizeof(dst), "%s.gz", src);
	if ((err = d9__file_open(&in, src, O_RDONLY)) != 0)
		return err;
	/* the temporary file names its writer: recovery removes only those of dead processes (a
	 * recovered segment's name carries the dead process's pid, not ours); the random part
	 * keeps anyone from placing a file or link there first */
	do {
		d9__tmp_name(tmp, sizeof(tmp), dst, ".tmp-");
		err = d9__tmp_create(&out, tmp);
	} while (err == -EEXIST);
	if (err)
		goto err_in;
	err = deflate_file(&in, &out);
	/* on disk before the rename and the removal of the .bin: a power loss must not leave an
	 * empty .gz as the only copy */
	struct stat st;
	if (!err && (err = d9__file_enter(&out)) == 0) {
		if (fsync(out.fd) != 0)
			err = -errno;
		if (!err && out_size)
			*out_size = fstat(out.fd, &st) == 0 ? (uint64_t)st.st_size : 0;
		/* the .gz keeps the seal time: the directory budget deletes the oldest first */
		if (!err && fstat(in.fd, &st) == 0 && d9__fd_still(out.fd)) {
			struct timespec times[2] = { st.st_atim, st.st_mtim };
			futimens(out.fd, times);
		}
		d9__file_leave(&out);
	}
	int cerr = d9__file_close(&out);
	if (!err)
		err = cerr;
	if (err)
		goto err_tmp;
	/* The exit path (d9__tmp_abandon) removes the file while it is announced, up to the
	 * rename: then the rename fails and the .bin stays for the next start. So a process that
	 * exits while this waits for the directory lock leaves no temporary file behind. */
	if (!__atomic_load_n(&d9__g.tmp_live, __ATOMIC_ACQUIRE)) {
		/* the exit path gave up on us, maybe before the file existed: ours to remove */
		unlink(tmp);
		err = -ECANCELED;
		goto err_in;
	}
	/* under the directory lock: a .bin the budget deleted (any process) stays deleted */
	int taken = d9__dirlock_take(5000000000ull, 1);
	if (taken < 0) {
		err = -EAGAIN;
		goto err_tmp;
	}
	if (lstat(src, &st) != 0 || st.st_dev != in.dev || st.st_ino != in.ino) {
		d9__dirlock_give(taken);
		err = -ENOENT; /* deleted by the budget: nothing to publish */
		goto err_tmp;
	}
	if (rename(tmp, dst) != 0) {
		err = -errno;
		d9__dirlock_give(taken);
		goto err_tmp;
	}
	d9__tmp_done(); /* renamed: nothing is left for the exit path to remove */
	unlink(src);
	d9__dirlock_give(taken);
	d9__file_close(&in);
	return 0;
err_tmp:
	/* once the exit has begun, no failure is the segment's (the lock's wait cut short, the
	 * file the exit removed before the rename): a cancel, and the .bin stays for the next
	 * start */
	if (__atomic_load_n(&d9__g.compress_abort, __ATOMIC_ACQUIRE))
		err = -ECANCELED;
	d9__tmp_done();
	unlink(tmp);
err_in:
	d9__tmp_done();
	d9__file_close(&in);
	return err;
}

/* With D9_COMPRESS=0 a job stays .bin: the segments already symbolized are those of our
 * series below sym_next (sealed in seq order); sym_pid notices a fork (the child's series). */
static pid_t sym_pid;
static uint32_t sym_next;

static int sym_done(const struct d9__sealed *s)
{
	if (sym_pid != d9__g.pid) {
		sym_pid = d9__g.pid;
		sym_next = 0;
	}
	return s->seq < sym_next;
}

/* Writes the symbol records into the sealed segment at path (symbolize.c): a copy with them is
 * renamed over it, unless the budget deleted the segment meanwhile (doomed), which the rename
 * must not undo. The temporary file has the name of the gzip one (.bin.gz.tmp-<pid>), which
 * recovery removes when its process died. A segment that cannot be symbolized stays as it is.
 * Returns 0, or -ECANCELED when the process is exiting. */
static int symbolize_job(const char *path, uint32_t seq)
{
	struct d9__agent *g = &d9__g;
	char tmp[4300];
	uint64_t size = 0;

	char base[4300];
	snprintf(base, sizeof(base), "%s.gz", path);
	d9__tmp_name(tmp, sizeof(tmp), base, ".tmp-");
	/* tmp is made by d9__tmp_create (write_segment); as in d9__gzip_file, the exit path
	 * removes it while it is announced, up to the rename */
	int r = d9__symbolize_segment(path, tmp, &size);
	if (r <= 0) {
		d9__tmp_done();
		return r == -ECANCELED ? r : 0;
	}
	if (!__atomic_load_n(&g->tmp_live, __ATOMIC_ACQUIRE)) {
		unlink(tmp); /* the exit path gave up on us: nothing is renamed any more */
		return -ECANCELED;
	}
	if (size > g->cfg.max_file_size) {
		/* no segment is larger than D9_MAX_FILE_SIZE: this one stays without symbols (the
		 * analyzer names its addresses from the module map) */
		d9__log_once(D9_LOG_INFO, "%s stays without symbol records: with them it would "
			"exceed D9_MAX_FILE_SIZE (said once)", path);
		d9__tmp_done();
		unlink(tmp);
		return 0;
	}
	/* keeps the seal time (the budget's age), and renames under the directory lock only
	 * while the segment is still there: another process's budget may have deleted it */
	struct stat st;
	if (lstat(path, &st) == 0) {
		struct timespec times[2] = { st.st_atim, st.st_mtim };
		utimensat(AT_FDCWD, tmp, times, AT_SYMLINK_NOFOLLOW);
	}
	int taken = d9__dirlock_take(5000000000ull, 1);
	if (taken < 0) {
		d9__tmp_done();
		unlink(tmp); /* symbols are skipped for this one rather than waiting longer */
		return 0;
	}
	d9__lock(&g->disk_lock);
	struct d9__sealed *job = NULL;
	for (size_t i = 0; i < g->nsealed && !job; i++)
		if (g->sealed[i].seq == seq && g->sealed[i].compressing)
			job = &g->sealed[i];
	int present = job && !job->doomed && lstat(path, &st) == 0;
	int moved = present && rename(tmp, path) == 0;
	int err = errno;
	d9__tmp_done();
	if (!moved) {
		/* a file the exit path removed meanwhile: the segment stays without symbols, quietly */
		if (present && !(err == ENOENT &&
			__atomic_load_n(&g->compress_abort, __ATOMIC_ACQUIRE)))
			d9__log_once(D9_LOG_WARN, "cannot rename %s: %s", tmp, strerror(err));
		unlink(tmp);
	} else if (!job->foreign) {
		job->size = size;
	}
	d9__unlock(&g->disk_lock);
	d9__dirlock_give(taken);
	return 0;
}

void d9__sealed_add(const char *path, uint64_t size, uint32_t seq, int foreign)
{
	struct d9__agent *g = &d9__g;

	d9__lock(&g->disk_lock);
	if (g->nsealed == g->sealed_cap) {
		size_t cap = g->sealed_cap ? g->sealed_cap * 2 : 64;
		struct d9__sealed *s = realloc(g->sealed, cap * sizeof(*s));
		if (!s) {
			d9__unlock(&g->disk_lock);
			return; /* not tracked: it stays on disk outside the budget (logged below) */
		}
		g->sealed = s;
		g->sealed_cap = cap;
	}
	/* keep the list sorted by seq, the oldest first; foreign entries go to the end */
	size_t i = g->nsealed;
	while (!foreign && i > 0 && (g->sealed[i - 1].foreign || g->sealed[i - 1].seq > seq)) {
		g->sealed[i] = g->sealed[i - 1];
		i--;
	}
	struct d9__sealed *s = &g->sealed[i];
	memset(s, 0, sizeof(*s));
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->size = size;
	s->seq = seq;
	s->foreign = foreign;
	g->nsealed++;
	if (!g->cfg.compress && !g->cfg.symbolize && !foreign) {
		if (d9__sealed_hook) /* nothing more is done to it: final (S3, s3.c) */
			d9__sealed_hook(path, g->cfg.flight);
	} else if (!foreign) {
		d9__s3_pending(path); /* final after the compressor: an eviction before is counted */
	}
	if (!__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE))
		pthread_cond_signal(&g->disk_cond); /* at exit it is left for the next start */
	d9__unlock(&g->disk_lock);
	/* D9_COMPRESS=0 starts no compressor, and a forked child none at its start; symbols or
	 * gzip still need the thread: started here, on the writer thread, at the first seal (exit
	 * and fork treat it as the compressor); not for the seal at exit, which leaves the work to
	 * the next start (a short-lived child never starts one) */
	/* only where the start spawns none: otherwise the writer may get here first, before the
	 * start marks its compressor started, and two would run */
	if ((g->cfg.compress || g->cfg.symbolize) && (!g->cfg.compress || g->forked) &&
		!g->compressor_started && !__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE) &&
		d9__spawn_blocked(&g->compressor, d9__compressor_main) == 0)
		g->compressor_started = 1;
}

/* A stop for the compressor (compress_stop set): woken now rather than at its next due time,
 * so that a pause can join it (lifecycle.c, join_threads). The lock is waited for until
 * deadline at most (the exit's), as seal_now waits for the pool lock. */
void d9__compressor_wake(uint64_t deadline)
{
	struct d9__agent *g = &d9__g;
	struct timespec until = d9__timespec(deadline);

	if (pthread_mutex_clocklock(&g->disk_lock, CLOCK_MONOTONIC, &until) == 0) {
		pthread_cond_signal(&g->disk_cond);
		d9__unlock(&g->disk_lock);
	}
}

void d9__sealed_forget(const char *path)
{
	struct d9__agent *g = &d9__g;

	d9__lock(&g->disk_lock);
	for (size_t i = 0; i < g->nsealed; i++) {
		struct d9__sealed *s = &g->sealed[i];
		if (strcmp(s->path, path))
			continue;
		if (s->compressing) {
			/* the compressor keeps reading its open descriptor; its rename finds the
			 * segment gone and publishes nothing */
			s->doomed = 1;
			s->size = 0;
		} else {
			memmove(s, s + 1, (g->nsealed - i - 1) * sizeof(*s));
			g->nsealed--;
		}
		break;
	}
	d9__unlock(&g->disk_lock);
}

/* ---- work left by processes that ended ----------------------------------------------------------
 * A process that ends seals its last segment and leaves it .bin (an exit waits for no
 * compression or symbolization), and so does a short-lived child, which never starts a
 * compressor. A live process of the same series takes that work over: every ADOPT_NS its idle
 * compressor lists the directory for <stem>.<pid>.<seq>.bin files of dead processes (owned by
 * us, regular) and queues them as foreign (never counted in our budget, never deleted by us). A
 * .bin next to its .bin.gz (killed between the rename of the complete .gz and the unlink) is the
 * same segment twice: the .bin goes. Two live processes may adopt the same file; the second finds
 * it gone (ENOENT) and drops it. */
#define ADOPT_NS (5 * 1000000000ull)
#define ADOPT_MAX 64 /* foreign segments queued at once */

static int own_file(const char *path, mode_t *mode)
{
	struct stat st;

	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return 0;
	if (mode)
		*mode = st.st_mode;
	return 1;
}

/* Called by the compressor without the disk lock. */
static void adopt_pending(void)
{
	struct d9__agent *g = &d9__g;
	const char *stem = g->cfg.stem;
	size_t ns = strlen(stem);
	struct d9__file dir;
	struct d9__dir_read rd = { 0 };
	const char *n;
	char path[4200], gz[4200];

	if (d9__dir_open(&dir, AT_FDCWD, g->cfg.dir, 1, NULL))
		return;
	while ((n = d9__dir_next(&dir, &rd))) {
		char *end;
		if (strncmp(n, stem, ns) || n[ns] != '.')
			continue;
		long pid = strtol(n + ns + 1, &end, 10);
		if (*end != '.' || pid <= 0 || pid == g->pid)
			continue;
		long seq = strtol(end + 1, &end, 10);
		if (seq < 0 || strcmp(end, ".bin"))
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue; /* alive (or not ours to ask): its own compressor's work */
		size_t nd = strlen(g->cfg.dir), nn = strlen(n);
		if (nd + 1 + nn + 4 > sizeof(path))
			continue;
		memcpy(path, g->cfg.dir, nd);
		path[nd] = '/';
		memcpy(path + nd + 1, n, nn + 1);
		memcpy(gz, path, nd + 1 + nn);
		memcpy(gz + nd + 1 + nn, ".gz", 4);
		mode_t mode = 0;
		if (!own_file(path, &mode))
			continue;
		if (own_file(gz, NULL)) {
			unlink(path);
			continue;
		}
		if (g->cfg.compress == D9_COMPRESS_AUTO && (mode & S_ISVTX))
			continue; /* finished: gzipped only when the budget needs it */
		d9__lock(&g->disk_lock);
		size_t foreign = 0;
		int known = 0;
		for (size_t i = 0; i < g->nsealed; i++) {
			foreign += g->sealed[i].foreign;
			known |= !strcmp(g->sealed[i].path, path);
		}
		d9__unlock(&g->disk_lock);
		if (foreign >= ADOPT_MAX)
			break; /* the rest at a later pass */
		if (!known)
			d9__sealed_add(path, 0, (uint32_t)seq, 1);
	}
	d9__file_close(&dir);
}

/* ---- compressing for the budget (D9_COMPRESS=auto) ----------------------------------------------
 * A sealed segment is symbolized and then left .bin, marked finished with S_ISVTX (a bit Linux
 * gives no meaning on a regular file; ls shows it as T), while the directory takes at most half
 * of D9_MAX_TOTAL_SIZE as the budget counts it. Above that, the compressor gzips the oldest
 * finished .bin files of the stem (ours, whichever process of the series wrote them) until the
 * directory is under half again: every segment the budget deletes later was compressed first,
 * so a full directory holds the same history as with D9_COMPRESS=1 less what its newest half
 * would save. A .bin without the mark (sealed at an exit, recovered) is adopted and symbolized
 * first, as with D9_COMPRESS=1. Another process compressing the same file at the same time
 * publishes first; the later one finds the .bin gone (d9__gzip_file, under the directory lock). */
static uint64_t budget_seen; /* the budget look whose finished .bin files are all compressed */

static int mark_final(const char *path)
{
	struct d9__file f;
	struct stat st;
	int err = d9__file_open(&f, path, O_RDONLY);

	if (err)
		return err == -ENOENT ? err : 0; /* deleted by a budget; else left unmarked */
	if (!d9__file_enter(&f)) {
		if (fstat(f.fd, &st) == 0 && !(st.st_mode & S_ISVTX) &&
			fchmod(f.fd, (st.st_mode & 07777) | S_ISVTX) != 0)
			d9__log_once(D9_LOG_WARN, "cannot mark %s as finished: %s; a later process "
				"reads it again (said once)", path, strerror(errno));
		d9__file_leave(&f);
	}
	d9__file_close(&f);
	return 0;
}

static int budget_wants(void)
{
	struct d9__agent *g = &d9__g;
	uint64_t gen, total = d9__budget_total(&gen);

	return g->cfg.compress == D9_COMPRESS_AUTO && gen != budget_seen &&
		total > g->cfg.max_total_size / 2 &&
		!__atomic_load_n(&g->compress_stop, __ATOMIC_ACQUIRE) &&
		!__atomic_load_n(&g->compress_abort, __ATOMIC_ACQUIRE);
}

struct fin {
	char name[256];
	struct timespec mtime;
	uint64_t size;
};

static int fin_cmp(const void *a, const void *b)
{
	const struct fin *x = a, *y = b;
	int c = d9__mtime_cmp(&x->mtime, &y->mtime);

	return c ? c : strcmp(x->name, y->name);
}

/* Called by the compressor without the disk lock. */
static void compress_for_budget(void)
{
	struct d9__agent *g = &d9__g;
	uint64_t gen, half = g->cfg.max_total_size / 2;
	struct fin *f = NULL;
	size_t n = 0, cap = 0;
	struct d9__file dir;
	struct d9__dir_read rd = { 0 };
	const char *name;
	struct stat st;

	d9__budget_total(&gen);
	if (d9__dir_open(&dir, AT_FDCWD, g->cfg.dir, 1, NULL)) {
		budget_seen = gen;
		return;
	}
	if (d9__file_enter(&dir)) { /* held: its fstatat below names this directory */
		d9__file_close(&dir);
		budget_seen = gen;
		return;
	}
	while ((name = d9__dir_next(&dir, &rd))) {
		long pid, seq;
		if (!d9__fd_still(dir.fd)) {
			rd.err = -ESTALE; /* taken by the program: its close waits for no more */
			break;
		}
		const char *suffix = d9__seg_parse(name, &pid, &seq);
		if (!suffix || strcmp(suffix, ".bin") || strlen(name) >= sizeof(f->name) ||
			fstatat(dir.fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
			!S_ISREG(st.st_mode) || st.st_uid != geteuid() || !(st.st_mode & S_ISVTX))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct fin *m = realloc(f, ncap * sizeof(*m));
			if (!m)
				break; /* the oldest of those seen so far, now; the rest at a later look */
			f = m;
			cap = ncap;
		}
		snprintf(f[n].name, sizeof(f[n].name), "%s", name);
		f[n].mtime = st.st_mtim;
		f[n].size = (uint64_t)st.st_size;
		n++;
	}
	d9__file_leave(&dir);
	d9__file_close(&dir);
	if (f)
		qsort(f, n, sizeof(*f), fin_cmp);
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t g2, gz = 0;
		if (d9__budget_total(&g2) <= half ||
			__atomic_load_n(&g->compress_stop, __ATOMIC_ACQUIRE))
			break;
		char path[4400];
		snprintf(path, sizeof(path), "%.2047s/%.255s", g->cfg.dir, f[i].name);
		int err = d9__gzip_file(path, &gz);
		if (!err) {
			d9__budget_shrunk(f[i].size > gz ? f[i].size - gz : 0);
			d9__log(D9_LOG_DEBUG, "compressed %s (directory over half its budget)", path);
		} else if (err == -ECANCELED) {
			break;
		} else if (err != -ENOENT) {
			/* e.g. a full disk: it stays .bin, tried again after the next budget look */
			g->compress_failures++;
			d9__log_once(D9_LOG_WARN, "cannot compress %s: %s; it stays uncompressed "
				"(said once)", path, strerror(-err));
			failed = 1;
			break;
		}
	}
	free(f);
	/* nothing more to do until the budget looks again (the next seal): all compressed that
	 * could be, or a failure to wait out */
	uint64_t g3;
	if (failed || d9__budget_total(&g3) > half)
		budget_seen = gen;
}

void *d9__compressor_main(void *arg)
{
	struct d9__agent *g = &d9__g;

	d9__agent_thread(arg);
	prctl(PR_SET_NAME, "d9-compress");
	/* this thread only: the host comes first (under an inherited seccomp filter, only when it
	 * does not kill at setpriority: systemd's @resources, denied by Debian's redis and nsd units) */
	if (d9__call_survives(SYS_setpriority))
		setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	uint64_t adopt_at = 0; /* the first look right away: the work of earlier runs */
	d9__lock(&g->disk_lock);
	for (;;) {
		struct d9__sealed *job = NULL;
		if (__atomic_load_n(&g->compress_abort, __ATOMIC_ACQUIRE))
			break; /* the process is exiting: no new job (its .bin files stay) */
		for (size_t i = 0; i < g->nsealed && !job; i++) {
			size_t n = strlen(g->sealed[i].path);
			if (n > 4 && !strcmp(g->sealed[i].path + n - 4, ".bin") &&
				(g->cfg.compress == D9_COMPRESS_ON || g->sealed[i].foreign ||
				 !sym_done(&g->sealed[i])) &&
				g->sealed[i].retry_at_ns <= d9__mono_ns())
				job = &g->sealed[i];
		}
		if (!job) {
			if (__atomic_load_n(&g->compress_stop, __ATOMIC_ACQUIRE))
				break;
			if (g->cfg.compress && d9__mono_ns() >= adopt_at) {
				d9__unlock(&g->disk_lock);
				adopt_pending();
				adopt_at = d9__mono_ns() + ADOPT_NS;
				d9__lock(&g->disk_lock);
				continue;
			}
			if (budget_wants()) {
				d9__unlock(&g->disk_lock);
				compress_for_budget();
				d9__lock(&g->disk_lock);
				continue;
			}
			/* until a seal or a stop wakes it, or its next due time: the next look for
			 * the work of dead processes, a failed segment's retry; at most a second
			 * (an exit in a signal handler sets compress_stop without a wake) */
			uint64_t now = d9__mono_ns(), t = now + 1000000000u;
			if (g->cfg.compress && adopt_at < t)
				t = adopt_at;
			for (size_t i = 0; i < g->nsealed; i++)
				if (g->sealed[i].retry_at_ns > now && g->sealed[i].retry_at_ns < t)
					t = g->sealed[i].retry_at_ns;
			struct timespec until = d9__timespec(t);
			pthread_cond_timedwait(&g->disk_cond, &g->disk_lock, &until);
			continue;
		}
		char path[sizeof(job->path)];
		uint32_t seq = job->seq;
		int foreign = job->foreign;
		snprintf(path, sizeof(path), "%s", job->path);
		job->compressing = 1;
		d9__unlock(&g->disk_lock);
		uint64_t size = 0;
		int err = 0;
		if (g->cfg.symbolize)
			err = symbolize_job(path, seq);
		if (!err && g->cfg.compress == D9_COMPRESS_ON) {
			err = d9__gzip_file(path, &size);
		} else if (!err) {
			if (g->cfg.compress == D9_COMPRESS_AUTO)
				err = mark_final(path);
			if (!foreign)
				sym_next = seq + 1;
		}
		d9__lock(&g->disk_lock);
		/* the list may have moved: find the entry again */
		for (size_t i = 0; i < g->nsealed; i++) {
			struct d9__sealed *s = &g->sealed[i];
			if (s->seq != seq || !s->compressing)
				continue;
			s->compressing = 0;
			size_t n = strlen(path);
			int sealed_ok = !err && !s->doomed;
			if (sealed_ok && d9__sealed_hook) {
				/* a segment's final form (S3 upload, s3.c); a dead process's too */
				char done[sizeof(s->path) + 4];
				snprintf(done, sizeof(done), "%s%s", path,
					g->cfg.compress == D9_COMPRESS_ON ? ".gz" : "");
				d9__sealed_hook(done, !s->foreign && g->cfg.flight);
			}
			if (s->foreign && (!err || err == -ENOENT)) {
				/* a dead process's segment: done, or another process took it first */
				memmove(s, s + 1, (g->nsealed - i - 1) * sizeof(*s));
				g->nsealed--;
				err = 0;
				break;
			}
			if (err == -ENOENT)
				s->doomed = 1; /* deleted by a budget (ours or another process's) */
			if (s->doomed) {
				/* published in a race with a process that had no lock file: removed */
				char gz[sizeof(s->path) + 4];
				memcpy(gz, path, n);
				memcpy(gz + n, ".gz", 4);
				if (g->cfg.compress == D9_COMPRESS_ON && !err)
					unlink(gz);
				err = 0;
			}
			if (!err) {
				/* done: the list is the compressor's queue, the budget reads the
				 * directory */
				memmove(s, s + 1, (g->nsealed - i - 1) * sizeof(*s));
				g->nsealed--;
			} else if (err != -ECANCELED) {
				/* stays a readable .bin; tried again later, after the next ones */
				s->retry_at_ns = d9__mono_ns() + RETRY_NS;
			}
			break;
		}
		if (err == -ECANCELED)
			break;
		if (err) {
			/* e.g. a full disk: this segment stays .bin for now; later ones are still
			 * compressed and symbolized */
			g->compress_failures++;
			d9__log_once(D9_LOG_WARN, "cannot compress %s: %s; it stays uncompressed and is "
				"tried again in %d s (said once)", path, strerror(-err),
				(int)(RETRY_NS / 1000000000u));
		}
	}
	d9__unlock(&g->disk_lock);
	if (!__atomic_load_n(&g->stop_ended, __ATOMIC_RELAXED))
		d9__symbolize_thread_end(); /* a pause or an exec: the session ends with the table */
	__atomic_store_n(&g->compressor_done, 1, __ATOMIC_RELEASE);
	return NULL;
}
