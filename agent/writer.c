/* writer.c: the background writer thread. It takes finished chunks from the queue, writes them
 * into the active segment (<dir>/<stem>.<pid>.<seq>.active), rotates by size and by wall-clock
 * aligned periods, seals segments (trailer, rename to .bin) and hands them to the compressor.
 * A failed write (disk full) truncates the partial chunk away, counts the chunk's events as
 * dropped for its thread, and the next successful write records those counts. It never records
 * events itself and never blocks a recording thread. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

struct d9__wdrop { uint32_t tid, worker; uint64_t count; uint32_t reason; };
#define WDROP_MAX 256

static struct d9__wdrop wdrops[WDROP_MAX];
static size_t nwdrops;
static uint64_t wdrop_overflow; /* drops of threads beyond WDROP_MAX, recorded under tid 0 */
/* drop counts threads handed over (d9__drops_report), taken with the queue: written after it */
static struct d9__drop reports[D9_PENDING_DROPS];
static size_t nreports;
static int logged_failure, logged_recovery;

/* The S3 counts the last trailer of this process carried (seg_seal). */
static uint64_t s3_sealed[4];

void d9__writer_child(void);
/* In a forked child: the parent's unwritten drop counts belong to the parent, and its S3 counts
 * (the child's start from zero, s3.c). */
void d9__writer_child(void)
{
	nwdrops = 0;
	wdrop_overflow = 0;
	nreports = 0;
	logged_failure = logged_recovery = 0;
	memset(s3_sealed, 0, sizeof(s3_sealed));
	d9__budget_child();
	d9__flight_child();
}

/* A segment was sealed since the directory budget was last kept: the writer keeps it (with the
 * sealed segment's real size) after the seal, outside seg_seal (writer thread only). */
static int budget_due;
/* The open segment was opened during the exit's last pass with the budget kept for it (room for
 * all of D9_MAX_FILE_SIZE), so the exit need not keep it again before the seal: a scan of the
 * directory moments later, with the segment's real size, would find what the first one found
 * (a fork-per-request server's children each saved one scan of every file: agent/COST.md
 * section 17). */
static int budget_kept_at_exit_open;

static char proc_comm[64], hostname[256], boot_id[64];
static char proc_cmdline[4096];
static size_t proc_cmdline_len;

/* dir + "/" + name into out; returns 0, or -1 when it does not fit (the entry is skipped). */
static int join_path(char *out, size_t cap, const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);

	if (a + 1 + b + 1 > cap)
		return -1;
	memcpy(out, dir, a);
	out[a] = '/';
	memcpy(out + a + 1, name, b + 1);
	return 0;
}

/* The process's name and command line as they are now: read again for every segment, because a
 * forked worker renames itself (nginx writes "nginx: worker process" over its argv) after the
 * agent started, and a child must not record its parent's identity. */
static void process_identity(void)
{
	size_t n = d9__file_read_small("/proc/self/comm", proc_comm, sizeof(proc_comm));
	if (n && proc_comm[n - 1] == '\n')
		proc_comm[n - 1] = 0;
	proc_cmdline_len = d9__cmdline_read(proc_cmdline, sizeof(proc_cmdline), d9__g.cfg.cmdline);
}

/* What a new writer reads once. The name and command line are read again at each segment's
 * open (process_identity: programs rename themselves); the boot id cannot change while the
 * process, or its parent before the fork, runs, so a forked child keeps its parent's. */
static void process_info(void)
{
	if (gethostname(hostname, sizeof(hostname)) != 0)
		hostname[0] = 0;
	hostname[sizeof(hostname) - 1] = 0;
	if (!boot_id[0]) {
		size_t n = d9__file_read_small("/proc/sys/kernel/random/boot_id", boot_id, sizeof(boot_id));
		if (n && boot_id[n - 1] == '\n')
			boot_id[n - 1] = 0;
	}
}

static void seg_name(char *out, size_t cap, uint32_t seq, const char *suffix)
{
	const struct d9__config *c = &d9__g.cfg;

	snprintf(out, cap, "%s/%s.%d.%06u%s", c->dir, c->stem, (int)d9__g.pid, seq, suffix);
}

/* ---- definitions into the segment ----------------------------------------------------------- */

/* Writes log bytes as DEFS chunks split at record boundaries (payloads up to 1 MiB). */
static int write_defs(struct d9__file *f, const uint8_t *log, size_t n, uint64_t *written)
{
	size_t pos = 0;

	while (pos < n) {
		size_t end = pos;
		while (end < n) {
			/* record: u8 kind, varint length, body */
			size_t q = end + 1;
			uint64_t len = 0;
			int shift = 0;
			while (q < n && shift < 64) {
				len |= (uint64_t)(log[q] & 0x7f) << shift;
				shift += 7;
				if (!(log[q++] & 0x80))
					break;
			}
			size_t rec = q - end + (size_t)len;
			if (end > pos && end - pos + rec > (1u << 20))
				break;
			end += rec;
		}
		if (end > n)
			end = n; /* cannot happen with a well-formed log; never read past it */
		size_t cap = end - pos + D9_CHUNK_OVERHEAD;
		uint8_t *buf = malloc(cap);
		if (!buf)
			return -ENOMEM;
		struct d9_wbuf w;
		d9_wbuf_init(&w, buf, cap);
		uint8_t *c = d9_chunk_open(&w, D9_CHUNK_DEFS);
		d9_wbuf_raw(&w, log + pos, end - pos);
		d9_chunk_close(&w, c);
		size_t len = (size_t)(w.p - buf);
		int err = w.err ? w.err : d9__file_write(f, buf, len);
		free(buf);
		if (err)
			return err;
		*written += len;
		d9__g.seg.tr.chunks++;
		pos = end;
	}
	return 0;
}

/* After a failed write: cuts the segment back to its last complete chunk (O_APPEND: the next
 * write lands there), on our own descriptor only. */
static void cut_back(struct d9__segment *s)
{
	int err = d9__file_truncate(&s->f, s->good);

	s->alloc_end = 0; /* the truncation gave the blocks past the end back */
	if (err && err != -EBADF && err != -ESTALE)
		d9__log_once(D9_LOG_WARN, "cannot truncate %s: %s", s->path, strerror(-err));
}

/* The last RESERVE bytes a segment may grow by are kept for what makes the trace honest after a
 * disk fills: Dropped records (one small chunk per thread) and the trailer. Other writes go
 * ahead only when fallocate finds room for them and the reserve (blocks past the end of the
 * file, KEEP_SIZE); where fallocate is not supported, writes simply go ahead. The blocks are
 * taken PREALLOC ahead, so most chunks need no call: fallocate at every chunk was a quarter of
 * the writer's CPU on redis with 99 Hz profiling (ext4's block allocator; agent/COST.md, section
 * 10). The step grows with the segment, from PREALLOC_MIN to PREALLOC: the seal gives back what
 * was taken ahead, and a short-lived process's small segment gave back 1 MiB at every exit
 * (0.5 ms of ftruncate in a fork storm's children). Where the step does not fit, the exact need
 * is asked for, as before. The seal (and a failed write) truncates the file to its size, which
 * gives every block past it back.
 * A segment opened in the exit's own last pass (a short-lived child's only one) is written and
 * sealed within a few hundred microseconds: when the file system has room for all of it at
 * D9_MAX_FILE_SIZE and the reserve (fstatvfs, no_reserve), it takes no blocks ahead and gives
 * none back. The fallocate and the seal's ftruncate were about 0.2 ms of every child's exit in
 * a fork storm (ext4 frees blocks taken past the end in a journal transaction). The window the
 * reserve closes, a disk that fills while the segment lives, is those microseconds here; a
 * quota that statvfs does not show would fail the write, which counts its chunk as lost as
 * before, and may leave the segment without its trailer (d9-analyze counts it truncated). */
#define RESERVE (16u << 10)
#define PREALLOC (1u << 20)
#define PREALLOC_MIN (64u << 10)
static int no_fallocate;

/* The size a segment's chunks may reach: D9_MAX_FILE_SIZE less the reserve (Dropped records
 * after a write error, the trailer) and, when symbols are written into sealed segments, a
 * thirty-second for them (symbolize_job keeps a segment without symbols rather than let them
 * take it past the limit). No segment is larger than D9_MAX_FILE_SIZE. */
static uint64_t seg_limit(void)
{
	const struct d9__config *c = &d9__g.cfg;

	return c->max_file_size - RESERVE - (c->symbolize ? c->max_file_size / 32 : 0);
}

/* room_for's fallocate, inside d9__file_enter. */
static int room_ahead(struct d9__segment *s, uint64_t need, uint64_t ahead)
{
	for (;;) {
		if (!d9__fd_still(s->f.fd))
			return 0; /* the write's own check reports a lost descriptor */
		if (fallocate(s->f.fd, FALLOC_FL_KEEP_SIZE, (off_t)s->size,
			(off_t)(ahead - s->size)) == 0) {
			s->alloc_end = ahead;
			return 0;
		}
		int err = errno;
		if (err != ENOSPC && err != EDQUOT && err != EFBIG) {
			no_fallocate = 1; /* EOPNOTSUPP and the like: no reserve on this file system */
			return 0;
		}
		if (ahead == need)
			return -err;
		/* a disk nearly full: only what each write needs, for the rest of this segment */
		s->no_ahead = 1;
		ahead = need;
	}
}

/* 0 when size more bytes (and the reserve) fit; -ENOSPC (or -EDQUOT) otherwise. */
static int room_for(struct d9__segment *s, size_t size)
{
	uint64_t step = s->size < PREALLOC_MIN ? PREALLOC_MIN : s->size < PREALLOC ? s->size : PREALLOC;
	uint64_t need = s->size + size + RESERVE, ahead = s->no_ahead ? need : need + step;

	if (no_fallocate || s->no_reserve || need <= s->alloc_end)
		return 0;
	if (d9__file_enter(&s->f))
		return 0; /* the write's own check reports a lost descriptor */
	if (ahead > d9__g.cfg.max_file_size)
		ahead = need > d9__g.cfg.max_file_size ? need : d9__g.cfg.max_file_size;
	int err = room_ahead(s, need, ahead);
	d9__file_leave(&s->f);
	return err;
}

/* Writes definition records (a buffer it frees) as DEFS chunks into the active segment. */
static int write_records(struct d9__segment *s, uint8_t *recs, size_t n)
{
	uint64_t written = 0;

	if (!n) {
		free(recs); /* an empty buffer (or NULL) */
		return 0;
	}
	int err = room_for(s, n + D9_CHUNK_OVERHEAD * (n / (1u << 20) + 1));
	if (err) {
		free(recs);
		return err;
	}
	err = write_defs(&s->f, recs, n, &written);
	free(recs);
	if (err) {
		cut_back(s);
		return err;
	}
	s->size += written;
	s->good = s->size;
	return 0;
}

/* Writes the definition log's new tail, and the coroutines spawned since the last chunk. A
 * coroutine whose definition cannot be written now (full disk) is still defined by its Spawn. */
static int write_pending_defs(struct d9__segment *s)
{
	uint8_t *recs;
	size_t n = d9__defs_snapshot((size_t)s->deflog_written, &recs);
	int err = write_records(s, recs, n);

	if (err)
		return err;
	s->deflog_written += n;
	n = d9__coroutines_fresh(&recs);
	return write_records(s, recs, n);
}

/* ---- segments ----------------------------------------------------------------------------------- */

/* Opens the next segment; budget: 0 for the exit's segment of S3 counts, whose budget pass
 * comes before its seal (a few KB, not room for D9_MAX_FILE_SIZE, within the exit's deadline). */
static int seg_open(int budget)
{
	struct d9__agent *g = &d9__g;
	struct d9__segment *s = &g->seg;
	struct d9__anchor a;
	uint8_t head[8192];

	d9__modules_refresh(); /* the module map goes in with the other definitions */
	d9__defs_names_refresh(1); /* thread names as they are now (renamed by another thread) */
	d9__clock_calibrate();
	int err = d9__trace_dir_check(&g->cfg);
	if (err) {
		/* after a privilege drop the directory is named by a descriptor of the agent's: when
		 * the program took that number, no file is made through it; after the program's
		 * chroot (-EXDEV) the names lead into its jail, and the stop said so */
		if (err != -EXDEV)
			d9__log_once(D9_LOG_WARN, "the program closed d9's descriptor of the trace "
				"directory; events are dropped (counted)");
		return err;
	}
	err = -EEXIST;
	for (int tries = 0; tries < 1000 && err == -EEXIST; tries++) {
		s->seq = (uint32_t)g->next_seq++;
		/* created as .active.tmp and renamed once its head is written, so a kill never
		 * leaves an .active file without a header. O_APPEND: after a failed write is cut
		 * off with ftruncate, the next write lands at the new end, not past it. A name that
		 * exists (a planted file or link) is skipped, never opened. */
		seg_name(s->path, sizeof(s->path), s->seq, ".active.tmp");
		err = d9__file_create(&s->f, s->path, O_WRONLY | O_APPEND);
	}
	if (err) {
		/* the directory was removed under us: made again with the start's checks (someone
		 * else may have made it first), at most every 10 s; writes fail (counted) meanwhile */
		static uint64_t dir_tried_ns;
		uint64_t now = d9__mono_ns();
		if (err == -ENOENT && (!dir_tried_ns || now - dir_tried_ns >= 10000000000ull)) {
			dir_tried_ns = now;
			int derr = d9__trace_dir_prepare(&g->cfg, 1);
			if (derr)
				d9__log_once(D9_LOG_WARN, "the trace directory %s was removed and cannot be "
					"made again (%s); events are dropped (counted) until it can",
					g->cfg.dir, strerror(-derr));
		}
		return err;
	}
	/* the directory budget, with room for this segment to grow to D9_MAX_FILE_SIZE (its
	 * .active.tmp); a busy lock leaves it to the next seal or segment */
	/* opened in the exit's own last pass: its budget is kept once, and it may skip the
	 * reserve (room_for) */
	int exiting = __atomic_load_n(&g->stop, __ATOMIC_ACQUIRE);
	if (budget && d9__budget_enforce(200000000u, g->cfg.max_file_size) == 0) {
		budget_due = 0;
		budget_kept_at_exit_open = exiting;
	}
	process_identity();
	d9__clock_anchor(&a);
	struct d9_header h = {
		.pid = (uint32_t)g->pid,
		.ppid = (uint32_t)getppid(),
		.segment_seq = s->seq,
		.clock_source = d9__clock_tsc ? D9_CLOCK_TSC : D9_CLOCK_MONOTONIC,
		.time_shift = d9__shift,
		.ticks_per_sec = d9__clock_tps(),
		.anchor_ticks = a.ticks,
		.anchor_mono_ns = a.mono_ns,
		.anchor_realtime_ns = a.realtime_ns,
		.start_realtime_ns = a.realtime_ns,
		.writer = D9_WRITER_VERSION,
		.process = proc_comm,
		.cmdline = proc_cmdline,
		.cmdline_len = proc_cmdline_len,
		.hostname = hostname,
		.boot_id = boot_id,
	};
	struct d9_wbuf w;
	d9_wbuf_init(&w, head, sizeof(head));
	int n = d9_prefix_encode(w.p, D9_PREFIX_LEN);
	w.p += n;
	d9_header_write(&w, &h);
	d9_schema_write(&w, D9_AGENT_SCHEMA);
	memset(&s->tr, 0, sizeof(s->tr));
	s->tr.first_time = UINT64_MAX;
	s->tr.chunks = 2; /* header and schema */
	s->size = s->good = 0;
	s->alloc_end = 0;
	s->no_ahead = 0;
	s->no_reserve = 0;
	if (exiting) {
		struct statvfs vfs;
		s->no_reserve = fstatvfs(s->f.fd, &vfs) == 0 &&
			(uint64_t)vfs.f_bavail * vfs.f_frsize >= g->cfg.max_file_size + RESERVE;
	}
	s->deflog_written = 0;
	err = w.err ? w.err : d9__file_write(&s->f, head, (size_t)(w.p - head));
	if (!err) {
		s->size = s->good = (uint64_t)(w.p - head);
		err = write_pending_defs(s); /* the whole log: every definition so far */
	}
	if (!err) {
		/* every coroutine that may appear here: alive, or only just exited */
		uint8_t *recs;
		size_t len = d9__coroutines_all(&recs);
		err = write_records(s, recs, len);
	}
	char active[sizeof(s->path)];
	seg_name(active, sizeof(active), s->seq, ".active");
	if (!err && rename(s->path, active) != 0)
		err = -errno;
	if (err) {
		d9__file_close(&s->f);
		unlink(s->path);
		return err;
	}
	memcpy(s->path, active, sizeof(active));
	s->opened_real_ns = a.realtime_ns;
	uint64_t period = g->cfg.rotation_period_ns;
	s->rotate_at_real_ns = period ? (a.realtime_ns / period + 1) * period : 0;
	d9__log(D9_LOG_DEBUG, "segment %s opened", s->path);
	return 0;
}

/* Checks that the segment's descriptor is still ours. When the host closed it, or closed it and
 * reused the number for a file of its own, the descriptor is dropped (never closed: it may be
 * the host's), the agent says so once and takes the segment back by its name when the file
 * there is still the same one; otherwise the segment is abandoned without a trailer (d9-analyze
 * lists it as truncated) and the next write opens a new one. Returns 0 when s->f is usable. */
static int seg_owned(struct d9__segment *s)
{
	struct d9__file old = s->f, again;
	int err = d9__file_check(&s->f);

	if (!err)
		return 0;
	d9__file_drop(&s->f);
	d9__log_once(D9_LOG_WARN, "the program closed or reused d9's descriptor %d of %s; d9 no longer "
		"uses that number", old.fd, s->path);
	/* the new descriptor's number can be taken too, between the open and its mark (a program
	 * that dup2s onto every number naming the segment and closes it, as test-agent-hostile's
	 * daemon does each turn): d9__file_open then leaves it to the program (-ESTALE, -EBADF,
	 * -EAGAIN) and a later try may get it */
	int tries = 3, got;
	while (((got = d9__file_open(&again, s->path, O_WRONLY | O_APPEND)) == -ESTALE ||
		       got == -EAGAIN || got == -EBADF) && --tries)
		;
	if (got == 0) {
		if (again.dev == old.dev && again.ino == old.ino) {
			s->f = again;
			return 0;
		}
		d9__file_close(&again);
	}
	d9__log(D9_LOG_WARN, "segment %s left unsealed: it is no longer the file d9 wrote (%s)",
		s->path, got ? strerror(-got) : "another file under its name");
	return err;
}

/* Whether uploads settled since the last trailer: they reach no trailer unless one more segment
 * is sealed (the exit's, below; the counts are this process's and die with it). */
static int s3_unreported(void)
{
	uint64_t c[4];

	d9__s3_counts(c);
	return memcmp(c, s3_sealed, sizeof(c)) != 0;
}

static void seg_seal(void)
{
	struct d9__segment *s = &d9__g.seg;
	uint8_t buf[512];
	char sealed[4096];
	struct d9_wbuf w;

	if (s->f.fd < 0 || seg_owned(s) != 0)
		return;
	if (s->tr.first_time == UINT64_MAX)
		s->tr.first_time = 0;
	s->tr.chunks += 1; /* the trailer itself */
	/* the directory's deletions as this process last saw them (FORMAT.md section 11) */
	d9__budget_deleted(&s->tr.budget_deleted_segments, &s->tr.budget_deleted_bytes);
	uint64_t s3c[4];
	d9__s3_counts(s3c); /* S3 uploads of this process so far (FORMAT.md section 11) */
	s->tr.s3_uploaded = s3c[0], s->tr.s3_uploaded_bytes = s3c[1];
	s->tr.s3_failures = s3c[2], s->tr.s3_evicted = s3c[3];
	d9_wbuf_init(&w, buf, sizeof(buf));
	d9_trailer_write(&w, &s->tr);
	int sealed_ok = !w.err && d9__file_write(&s->f, buf, (size_t)(w.p - buf)) == 0;
	if (sealed_ok) {
		s->size += (uint64_t)(w.p - buf);
		s->good = s->size;
	} else {
		cut_back(s);
	}
	/* renamed right after the trailer (a kill in between leaves an .active with a trailer,
	 * which recovery handles); then the reserve's blocks are given back */
	seg_name(sealed, sizeof(sealed), s->seq, ".bin");
	int renamed = rename(s->path, sealed) == 0 ? 0 : -errno;
	if (sealed_ok && s->alloc_end)
		cut_back(s); /* none taken (no_reserve, no fallocate here): none to give back */
	d9__file_close(&s->f);
	if (renamed) {
		d9__log_once(D9_LOG_WARN, "cannot rename %s: %s", s->path, strerror(-renamed));
		return;
	}
	if (sealed_ok) /* recovery would redo an .active's trailer, without the counts */
		memcpy(s3_sealed, s3c, sizeof(s3c));
	d9__log(D9_LOG_DEBUG, "segment %s sealed (%llu bytes)", sealed, (unsigned long long)s->size);
	d9__sealed_add(sealed, s->size, s->seq, 0);
	budget_due = 1;
	budget_kept_at_exit_open = 0;
}

/* ---- chunks ----------------------------------------------------------------------------------- */

/* Whether a count of tid's lost events waits to be written (an overflowed count may be anyone's). */
static int drops_wait_for(uint32_t tid)
{
	if (wdrop_overflow)
		return 1;
	for (size_t i = 0; i < nwdrops; i++)
		if (wdrops[i].tid == tid)
			return 1;
	return 0;
}

static void count_drop(uint32_t tid, uint32_t worker, uint64_t count, uint32_t reason)
{
	for (size_t i = 0; i < nwdrops; i++)
		if (wdrops[i].tid == tid && wdrops[i].reason == reason) {
			wdrops[i].count += count;
			return;
		}
	if (nwdrops < WDROP_MAX)
		wdrops[nwdrops++] = (struct d9__wdrop){ tid, worker, count, reason };
	else
		wdrop_overflow += count;
}

static void count_write_drop(uint32_t tid, uint32_t worker, uint64_t count)
{
	count_drop(tid, worker, count, D9_DROP_WRITE_ERROR);
}

void d9__writer_count_drop(uint32_t tid, uint32_t worker, uint64_t count)
{
	count_drop(tid, worker, count, D9_DROP_BUFFERS_FULL);
}

static void write_failed(int err, const char *what)
{
	struct d9__agent *g = &d9__g;

	if (!logged_failure)
		d9__log(D9_LOG_WARN, "cannot write %s: %s; dropping events (counted) until writes succeed",
			what, strerror(-err));
	logged_failure = 1;
	g->write_failing = 1;
}

/* types: the chunk's events of each built-in type, as its encoder counted them. */
static int write_chunk(struct d9__segment *s, uint8_t *chunk, size_t size, uint32_t count,
	const uint32_t *types, uint64_t first, uint64_t last, uint64_t dropped, uint64_t lost,
	int reserve)
{
	int err = write_pending_defs(s);

	if (err && reserve)
		err = 0; /* a Dropped record goes in without them: its thread is named later */
	if (!err && !reserve && s->size + size > seg_limit() && s->tr.events > 0)
		return -E2BIG; /* the definitions took the room: the caller rotates and tries again */
	if (!err && !reserve)
		err = room_for(s, size);
	if (!err) {
		d9_chunk_fill_crc(chunk);
		err = d9__file_write(&s->f, chunk, size);
		if (err)
			cut_back(s);
	}
	if (err)
		return err;
	s->size += size;
	s->good = s->size;
	s->tr.events += count;
	s->tr.chunks++;
	for (int t = 0; t <= D9_EV_KNOWN_MAX; t++)
		s->tr.type_counts[t] += types[t];
	if (first < s->tr.first_time)
		s->tr.first_time = first;
	if (last > s->tr.last_time)
		s->tr.last_time = last;
	s->tr.dropped_events += dropped - lost;
	s->tr.dropped_samples += lost;
	return 0;
}

/* Makes sure a segment with room for `size` more bytes is open. `look`: how its descriptor is
 * checked first: LOOK_FULL (seg_owned's fstat), or LOOK_MARK, only the number's mark (fdown.c),
 * for a caller whose write checks the file itself (d9__file_write's fstat) and comes back with
 * LOOK_FULL when that check fails: one fstat a chunk, not two. */
enum { LOOK_MARK, LOOK_FULL };
static int seg_ready_as(size_t size, int look)
{
	struct d9__agent *g = &d9__g;
	struct d9__segment *s = &g->seg;

	if (s->f.fd >= 0 && (look == LOOK_FULL || !d9__fd_still(s->f.fd)))
		seg_owned(s); /* a segment whose descriptor the host took is left for a new one */
	if (s->f.fd >= 0 && s->size + size > seg_limit() && s->tr.events > 0)
		seg_seal();
	if (s->f.fd < 0)
		return seg_open(1);
	return 0;
}

static int seg_ready(size_t size)
{
	return seg_ready_as(size, LOOK_FULL);
}


/* Records the write-error drop counts, one chunk per thread, once writing works again. */
static void write_drop_records(void)
{
	struct d9__segment *s = &d9__g.seg;
	uint8_t buf[D9_ENC_MIN_BUF + 64];

	for (size_t i = 0; i < nwdrops || wdrop_overflow; i++) {
		struct d9__wdrop d = i < nwdrops ? wdrops[i] :
			(struct d9__wdrop){ 0, 0, wdrop_overflow, D9_DROP_OTHER };
		struct d9_enc e;
		uint64_t now = d9__now();
		d9_enc_begin(&e, buf, sizeof(buf), d.tid, d.worker, now, d9__shift, 0);
		d9_enc_dropped(&e, now, d.count, d.reason);
		size_t size = d9_enc_end(&e, 0);
		if (seg_ready(size + D9_CHUNK_OVERHEAD) ||
			write_chunk(s, buf, size, 1, e.types, now >> d9__shift, now >> d9__shift, d.count,
				0, 1)) {
			/* still failing: keep what is left for the next attempt */
			memmove(wdrops, wdrops + i, (nwdrops - (i < nwdrops ? i : nwdrops)) * sizeof(*wdrops));
			nwdrops -= i < nwdrops ? i : nwdrops;
			return;
		}
		if (i >= nwdrops) {
			wdrop_overflow = 0;
			break;
		}
	}
	nwdrops = 0;
}

static void write_block(struct d9__block *b)
{
	if (d9__flight_keep(b))
		return; /* flight mode: kept in the window (flight.c) */
	d9__write_block(b);
}

void d9__write_block(struct d9__block *b)
{
	d9__write_chunk(b);
	d9__pool_put(b);
}

/* b's chunk could not be written: the events it stood for are lost, counted. */
static void block_lost(const struct d9__block *b)
{
	count_write_drop(b->tid, b->worker, d9__block_events(b));
}

/* b's chunk into the active segment s (write_chunk with the block's own counts). */
static int write_block_chunk(struct d9__segment *s, struct d9__block *b)
{
	return write_chunk(s, b->data, b->size, b->count, b->types, b->first_time, b->last_time,
		b->dropped, b->lost_samples, 0);
}

void d9__write_chunk(struct d9__block *b)
{
	struct d9__agent *g = &d9__g;
	struct d9__segment *s = &g->seg;
	int err;

	/* the drop counts go before the thread's next events; while writes fail they wait, so
	 * that they do not use up the reserve kept for the seal */
	if ((nwdrops || wdrop_overflow) && seg_ready(0) == 0 &&
		(!g->write_failing || room_for(s, b->size + RESERVE / 2) == 0))
		write_drop_records();
	if (D9_UNLIKELY(nwdrops || wdrop_overflow) && drops_wait_for(b->tid)) {
		/* the thread's count of lost events still waits (no room for it beside this chunk,
		 * or it could not be written): the chunk waits with it, lost and counted, so that
		 * no event lands before the count of those lost before it (a disk with room for the
		 * chunk alone wrote it first) */
		block_lost(b);
		return;
	}
	err = seg_ready_as(b->size, LOOK_MARK);
	if (!err)
		err = write_block_chunk(s, b);
	if (err == -ESTALE || err == -EBADF) {
		/* the number names another file (replaced by a path the interposers do not see: a
		 * raw system call), or the host took it after seg_ready's look and before the write's
		 * own check (or closed it under the write): no disk failed, so the chunk is not lost.
		 * The segment is taken back by its name (seg_owned), cut to its last complete
		 * chunk, and the chunk written again; only a second loss counts it */
		err = seg_ready(b->size);
		if (!err) {
			cut_back(s);
			err = write_block_chunk(s, b);
		}
	}
	if (err == -E2BIG) {
		/* sealed with what it holds; the new segment starts with every definition */
		seg_seal();
		err = seg_ready(b->size);
		if (!err)
			err = write_block_chunk(s, b);
	}
	if (!err && g->write_failing) {
		g->write_failing = 0;
		if (!logged_recovery)
			d9__log(D9_LOG_WARN, "writing again to %s; the lost events are counted in the trace",
				s->path);
		logged_recovery = 1;
	}
	if (err) {
		block_lost(b);
		write_failed(err, s->f.fd >= 0 ? s->path : g->cfg.dir);
	}
}

static struct d9__block *take_queue(void)
{
	struct d9__agent *g = &d9__g;

	for (size_t i = 0; i < g->npending; i++) {
		if (nreports < D9_PENDING_DROPS)
			reports[nreports++] = g->pending[i];
		else
			wdrop_overflow += g->pending[i].count;
	}
	wdrop_overflow += g->pending_overflow;
	g->npending = 0;
	g->pending_overflow = 0;

	struct d9__block *q = g->q_head;
	g->q_head = g->q_tail = NULL;
	g->q_len = 0;
	return q;
}

/* Writes the queue taken with take_queue, then the drop counts taken with it. The workers'
 * samples up to now go first: every chunk of q was handed off before this drain, so a worker's
 * samples precede the chunks with its later events (profile.c). */
static void write_list(struct d9__block *q)
{
	struct d9__block *samples = d9__profile_drain();

	while (samples) {
		struct d9__block *next = samples->next;
		write_block(samples);
		samples = next;
	}
	while (q) {
		struct d9__block *next = q->next;
		d9__raw_encode(q); /* a thread's raw records become its chunk (raw.c) */
		write_block(q);
		q = next;
	}
	for (size_t i = 0; i < nreports; i++) {
		count_drop(reports[i].tid, reports[i].worker, reports[i].count, reports[i].reason);
		d9__flight_drops(reports[i].count, reports[i].tid, reports[i].worker);
	}
	nreports = 0;
	/* flight mode between dumps: the counts wait for the next dump (nothing is opened) */
	if ((nwdrops || wdrop_overflow) && !d9__g.write_failing && d9__flight_writing() &&
		seg_ready(0) == 0)
		write_drop_records();
}

/* ---- the thread ---------------------------------------------------------------------------------- */

static void scan_series(void);

void *d9__writer_main(void *arg)
{
	struct d9__agent *g = &d9__g;
	uint64_t next_collect = 0;
	uint64_t drain_ns = d9__profile_interval_ns(); /* 0: no profiling */

	d9__agent_thread(arg);
	prctl(PR_SET_NAME, "d9-writer");
	g->writer_private = d9__self.fd_private;
	if (!d9__self.fd_private && !g->cfg.agent_fds_shared)
		d9__log_once(D9_LOG_INFO, "the agent's threads share the program's descriptor table "
			"(%s): a program with no threads of its own pays a file reference at each "
			"descriptor call", d9__fd_private_refused == 1 ? "a seccomp filter is installed" :
			strerror(-d9__fd_private_refused));
	d9__profile_stale_free();
	process_info();
	g->seg.f.fd = -1;
	/* calibrate the TSC over at least 10 ms before the first header needs the frequency; a
	 * forked child's baseline (its parent's) is long enough already: no wait at its exit */
	uint64_t age = d9__clock_baseline_ns();
	if (d9__clock_tsc && age < 10000000u) {
		struct timespec ts = { 0, (long)(10000000u - age) };
		nanosleep(&ts, NULL);
	}
	d9__clock_calibrate();
	scan_series();
	g->first_seq = g->next_seq;
	/* leftovers of crashed processes: one per pass, between our writes; a forked child leaves
	 * them to its parent or the next start (its exit would pay for them) */
	int recovering = !g->forked;

	d9__lock(&g->pool_lock);
	uint32_t seen = __atomic_load_n(&g->writer_word, __ATOMIC_SEQ_CST);
	for (;;) {
		uint64_t now = d9__mono_ns();
		uint32_t word = __atomic_load_n(&g->writer_word, __ATOMIC_SEQ_CST);
		if (word == seen && !g->q_head && !g->flush_req && !g->stop && now < next_collect &&
			!recovering) {
			/* until woken (d9__writer_wake: hand-offs, flushes, the exit, the dump
			 * signal) or the next periodic pass: 10 ms when profiling (the sample rings
			 * are drained), a time-based rotation's time, else the flush interval */
			uint64_t wake = next_collect;
			if (drain_ns && now + drain_ns < wake)
				wake = now + drain_ns;
			uint64_t rot = g->seg.f.fd >= 0 ? g->seg.rotate_at_real_ns : 0;
			if (rot) {
				uint64_t real = d9__realtime_ns();
				uint64_t at = rot > real ? now + (rot - real) : now;
				if (at < wake)
					wake = at;
			}
			uint64_t due = d9__flight_due_in_ns(); /* a flight dump's end */
			if (due != UINT64_MAX && now + due < wake)
				wake = now + due;
			/* a d9_agent_flush waits for a second pass: at the first hand-off of a
			 * running thread (which wakes the writer), 50 ms after the first at most */
			if (g->flush_waiters && now + 50000000u < wake)
				wake = now + 50000000u;
			d9__writer_sleep(word, wake);
			word = __atomic_load_n(&g->writer_word, __ATOMIC_SEQ_CST);
		}
		seen = word; /* a wake from here on makes another pass */
		g->in_pass = 1; /* d9_agent_flush counts a pass already under way as not its own */
		int stopping = __atomic_load_n(&g->stop, __ATOMIC_ACQUIRE);
		int flush = g->flush_req || stopping;
		g->flush_req = 0;
		struct d9__block *q = take_queue();
		d9__unlock(&g->pool_lock);

		/* a period that ended: sealed before this pass's chunks, so a pass that came late
		 * (the writer waited for a CPU) puts them in the next segment rather than in this
		 * one past its period. The wake above comes at the period's end; a period that ends
		 * during the pass is sealed at the next, which that wake makes at once */
		if (g->seg.f.fd >= 0 && g->seg.rotate_at_real_ns &&
			d9__realtime_ns() >= g->seg.rotate_at_real_ns)
			seg_seal();
		write_list(q);
		if (__atomic_load_n(&g->dir_switch, __ATOMIC_ACQUIRE)) {
			/* a privilege drop waits: seal here while still privileged, go on there */
			seg_seal();
			d9__trace_dir_use(&g->cfg);
			__atomic_store_n(&g->dir_switch, 0, __ATOMIC_RELEASE);
		}
		now = d9__mono_ns();
		int periodic = now >= next_collect || flush;
		if (periodic) {
			d9__modules_refresh(); /* libraries loaded since (dlopen): defined before use */
			d9__toggle_check(); /* the program's handler for D9_TOGGLE_SIGNAL, said */
			/* in the segment now: a filtered thread's exit does not seal, and the
			 * other threads may record nothing more */
			if (d9__seccomp_defs() && g->seg.f.fd >= 0 && !g->write_failing)
				(void)write_pending_defs(&g->seg);
			d9__defs_names_refresh(0);
			/* flight mode: a dump may write chunks as old as its window */
			d9__coroutines_prune(20 * g->cfg.flush_interval_ns + 1000000000u +
				(g->cfg.flight ? g->cfg.flight_window_ns : 0));
			d9__collect(now - g->cfg.flush_interval_ns, flush);
			d9__lock(&g->pool_lock);
			q = take_queue();
			d9__unlock(&g->pool_lock);
			write_list(q);
			next_collect = now + g->cfg.flush_interval_ns;
		}
		if (d9__flight_pass(periodic) && !stopping) {
			/* the flight dump's time is up: every thread's chunk so far, then the seal */
			d9__collect(d9__mono_ns(), 1);
			d9__lock(&g->pool_lock);
			q = take_queue();
			d9__unlock(&g->pool_lock);
			write_list(q);
			if (nwdrops || wdrop_overflow)
				write_drop_records();
			if (g->seg.f.fd >= 0) {
				/* the dump's window ends: the threads' open parks lasted until now */
				g->seg.tr.flags |= D9_TRAILER_WINDOW;
				g->seg.tr.end_time = d9__now() >> d9__shift;
			}
			seg_seal();
			d9__flight_ended("after");
		}
		if (budget_due && !stopping && d9__budget_enforce(200000000u, 0) == 0)
			budget_due = 0;
		if (stopping) {
			/* events still in a running thread's chunk when the last segment is sealed,
			 * and those it could not record for want of a block: lost, counted. Not at a
			 * pause: the thread keeps its block and its counts, and the agent that starts
			 * after the call writes them (counted here as well, they were counted twice) */
			if (!__atomic_load_n(&g->pausing, __ATOMIC_ACQUIRE))
				d9__unflushed_report(count_drop);
			if ((nwdrops || wdrop_overflow) && d9__flight_writing())
				write_drop_records();
			/* uploads settled since the last seal (a time-based rotation sealed it and
			 * nothing was recorded since): a segment of their own, or no trailer would
			 * count them (FORMAT.md section 11); and a program started in secure
			 * execution, said in a segment even by a process that recorded nothing */
			if (g->seg.f.fd < 0 && !g->write_failing && d9__flight_writing() &&
				(s3_unreported() || __atomic_load_n(&g->exec_note, __ATOMIC_ACQUIRE)))
				seg_open(0);
			/* the budget is kept before the last seal (the segment counts as it is; its
			 * trailer adds a few hundred bytes), so that the trailer carries the deletions.
			 * The wait for the lock is a quarter of D9_EXIT_TIMEOUT: workers of one server
			 * exit together and each keeps the budget in turn (with no wait, the last ones
			 * left the directory over it) */
			if (budget_due || (g->seg.f.fd >= 0 && !budget_kept_at_exit_open))
				d9__budget_enforce(g->cfg.exit_timeout_ns / 4, 0);
			if (__atomic_load_n(&g->stop_ended, __ATOMIC_RELAXED) && g->end_at) {
				/* the process ends: what its threads have open lasted until then */
				g->seg.tr.flags |= D9_TRAILER_ENDED;
				g->seg.tr.end_time = g->end_at >> d9__shift;
			}
			seg_seal();
			d9__flight_ended("exit"); /* a dump cut short by the exit gets its manifest */
			/* our own data is safe; recovery goes on for what fits in half the exit's wait
			 * (D9_EXIT_TIMEOUT); the rest is the next start's */
			uint64_t until = d9__mono_ns() + g->cfg.exit_timeout_ns / 2;
			while (recovering && d9__mono_ns() < until)
				recovering = d9__recover_next();
		} else if (recovering) {
			recovering = d9__recover_next();
		}
		/* a pause or an exec: the unwinder ends with this thread's table (before the state
		 * says stopped, after which a new writer may start); not at the exit */
		if (stopping && !__atomic_load_n(&g->stop_ended, __ATOMIC_RELAXED))
			d9__profile_writer_end();
		d9__lock(&g->pool_lock);
		g->passes++;
		g->in_pass = 0;
		pthread_cond_broadcast(&g->done_cond);
		if (stopping) {
			g->state = D9__STOPPED;
			pthread_cond_broadcast(&g->done_cond);
			d9__unlock(&g->pool_lock);
			return NULL;
		}
	}
}

/* ---- the series on disk: numbering and crash recovery ------------------------------------------ */

/* Our own series may already have files (pid reuse): number after them, and give the
 * compressor the ones it has not done (the directory budget counts them all). */
static void scan_series(void)
{
	struct d9__agent *g = &d9__g;
	struct d9__file dir;
	struct d9__dir_read rd = { 0 };
	const char *name;

	if (d9__dir_open(&dir, AT_FDCWD, g->cfg.dir, 1, NULL))
		return;
	while ((name = d9__dir_next(&dir, &rd))) {
		long pid, seq;
		const char *suffix = d9__seg_parse(name, &pid, &seq);
		if (!suffix || pid != g->pid)
			continue;
		if ((uint64_t)seq >= g->next_seq)
			g->next_seq = (uint64_t)seq + 1;
		if (!strcmp(suffix, ".bin")) {
			char path[4096];
			struct stat st;
			if (join_path(path, sizeof(path), g->cfg.dir, name) == 0 &&
				lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
				d9__sealed_add(path, (uint64_t)st.st_size, (uint32_t)seq, 0);
		}
	}
	d9__file_close(&dir);
}

/* Seals one .active file: keeps it up to its last good chunk, appends a trailer marked
 * "recovered", renames it to .bin. Returns 0 or a negative error. */
static int recover_one(const char *path, char *sealed, size_t cap)
{
	struct d9_reader *r;
	struct d9_chunk c;
	struct d9_trailer tr = { 0 };
	struct d9__file f;
	uint64_t good;
	int err = d9__file_open(&f, path, O_RDWR);

	if (err)
		return err;
	int rfd = d9__file_dup(&f);
	if (rfd < 0) {
		d9__file_close(&f);
		return -EMFILE;
	}
	if ((err = d9_reader_open_fd(&r, rfd)) != 0) {
		d9__file_close(&f);
		return err;
	}
	good = d9_reader_stats(r)->data_start; /* at least the prefix and the header */
	tr.first_time = UINT64_MAX;
	tr.chunks = 1; /* the header */
	while (d9_reader_next(r, &c) == 1) {
		if (c.type == D9_CHUNK_TRAILER)
			break; /* recovered once already, then killed before the rename: redo it */
		good = c.offset + D9_CHUNK_OVERHEAD + c.len;
		tr.chunks++;
		if (c.type != D9_CHUNK_EVENTS)
			continue;
		struct d9_events_iter it;
		struct d9_event ev;
		d9_events_init(&it, r, &c);
		while (d9_events_next(&it, &ev) == 1) {
			tr.events++;
			if (ev.type <= D9_EV_KNOWN_MAX)
				tr.type_counts[ev.type]++;
			if (ev.time < tr.first_time)
				tr.first_time = ev.time;
			if (ev.time > tr.last_time)
				tr.last_time = ev.time;
			if (ev.type == D9_EV_DROPPED) {
				if (ev.f[D9_F_DROP_REASON] == D9_DROP_SAMPLES_LOST)
					tr.dropped_samples += ev.f[D9_F_DROP_COUNT];
				else
					tr.dropped_events += ev.f[D9_F_DROP_COUNT];
			}
		}
	}
	d9_reader_close(r);
	if (tr.first_time == UINT64_MAX)
		tr.first_time = 0;
	tr.flags = D9_TRAILER_RECOVERED;
	tr.chunks++;
	d9__budget_deleted(&tr.budget_deleted_segments, &tr.budget_deleted_bytes);

	uint8_t buf[512];
	struct d9_wbuf w;
	d9_wbuf_init(&w, buf, sizeof(buf));
	d9_trailer_write(&w, &tr);
	err = d9__file_truncate(&f, good);
	if (!err && !(err = d9__file_enter(&f))) {
		if (lseek(f.fd, (off_t)good, SEEK_SET) < 0)
			err = -errno;
		d9__file_leave(&f);
	}
	if (!err)
		err = d9__file_write(&f, buf, (size_t)(w.p - buf));
	d9__file_close(&f);
	if (err)
		return err;
	const char *dot = strstr(path, ".recovering-");
	size_t n = dot ? (size_t)(dot - path) : strlen(path);
	snprintf(sealed, cap, "%.*s.bin", (int)n, path);
	if (rename(path, sealed) != 0)
		return -errno;
	return 0;
}

/* Whether path is a regular file (not followed if a link) owned by the effective user. */
static int own_regular(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

/* A recovery scan that a program's take of the directory's number cut short (or its open, the
 * number taken meanwhile: a daemon's sweep at start) is tried again at the next pass, a few
 * times in a row at most; any other failure ends recovery in this process. */
#define RECOVER_RETRIES 8
static unsigned recover_retries;

static int recover_cut_short(int err)
{
	if (err != -ESTALE && err != -EBADF && err != -EAGAIN)
		return 0;
	return recover_retries++ < RECOVER_RETRIES;
}

/* Recovers one leftover file of the series, if any: returns 1 when it did something or its scan
 * was cut short (call again), 0 when nothing is left. A dead process's .active file is first claimed by renaming it
 * to .recovering (two processes starting together never recover the same file), then cut after
 * its last good chunk, given a trailer and renamed .bin; a .recovering file left by a process
 * killed while recovering is finished the same way. Temporary files of dead processes go. */
int d9__recover_next(void)
{
	struct d9__agent *g = &d9__g;
	struct d9__file dir;
	struct d9__dir_read rd = { 0 };
	const char *name;
	int did = 0, derr = d9__dir_open(&dir, AT_FDCWD, g->cfg.dir, 1, NULL);

	if (derr)
		return recover_cut_short(derr);
	while (!did && (name = d9__dir_next(&dir, &rd))) {
		long pid, seq;
		const char *suffix = d9__seg_parse(name, &pid, &seq);
		/* files being worked on name their worker: .recovering-<pid>, .bin.gz.tmp-<pid> */
		long claimer = 0, tmp_owner = 0;
		if (suffix && !strncmp(suffix, ".recovering-", 12))
			claimer = strtol(suffix + 12, NULL, 10);
		if (suffix && !strncmp(suffix, ".bin.gz.tmp-", 12))
			tmp_owner = strtol(suffix + 12, NULL, 10);
		if (!suffix || (strcmp(suffix, ".active") && !claimer && !tmp_owner &&
			    strcmp(suffix, ".active.tmp")))
			continue;
		if (tmp_owner) {
			/* a compression cut short: its .bin is still there */
			char tmp[4096];
			if (tmp_owner != g->pid && kill((pid_t)tmp_owner, 0) != 0 && errno == ESRCH &&
				!join_path(tmp, sizeof(tmp), g->cfg.dir, name) && own_regular(tmp))
				unlink(tmp);
			continue;
		}
		/* a live process other than us is still writing it; our own files from before this
		 * run (pid reuse) are numbered below our first segment */
		if (pid != g->pid && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		/* being recovered by a live process */
		if (claimer && claimer != g->pid && (kill((pid_t)claimer, 0) == 0 || errno != ESRCH))
			continue;
		if (pid == g->pid && (uint64_t)seq >= g->first_seq)
			continue;
		char path[4096], claimed[4200], sealed[4200];
		if (join_path(path, sizeof(path), g->cfg.dir, name))
			continue;
		if (!own_regular(path)) {
			/* a FIFO, device, link or another user's file under a segment's name: never
			 * opened (a FIFO would block recovery), never moved; skipped, not retried */
			d9__log_once(D9_LOG_WARN, "not recovering %s: not a regular file owned by uid %d",
				path, (int)geteuid());
			continue;
		}
		did = 1;
		if (!strcmp(suffix, ".active.tmp")) {
			unlink(path); /* a segment killed before its header was written */
			continue;
		}
		/* claim it under our pid: rename is atomic, so one process wins; a claim left by a
		 * dead recoverer is taken over the same way */
		size_t stem = strlen(path) - strlen(suffix);
		snprintf(claimed, sizeof(claimed), "%.*s.recovering-%d", (int)stem, path, (int)g->pid);
		if (strcmp(path, claimed) && rename(path, claimed) != 0)
			continue; /* another process claimed it first */
		int err = recover_one(claimed, sealed, sizeof(sealed));
		if (err == D9_ETRUNC || err == D9_ENOHEADER) {
			unlink(claimed); /* killed before its header was complete: nothing to keep */
			continue;
		}
		if (err) {
			/* set aside under a name recovery never looks at, so it is tried once */
			char damaged[4300];
			snprintf(damaged, sizeof(damaged), "%.*s.damaged", (int)stem, path);
			d9__log_once(D9_LOG_WARN, "cannot recover %s: %s; kept as %s", path,
				d9_strerror(err), damaged);
			if (rename(claimed, damaged) != 0) {
				d9__file_close(&dir);
				return 0; /* cannot even move it: stop recovering in this process */
			}
			continue;
		}
		d9__log(D9_LOG_INFO, "recovered %s from a crashed process", sealed);
		if (g->cfg.compress)
			d9__sealed_add(sealed, 0, (uint32_t)seq, 1); /* the compressor's job, not ours */
	}
	d9__file_close(&dir);
	if (!did && rd.err)
		return recover_cut_short(rd.err);
	recover_retries = 0;
	return did;
}
