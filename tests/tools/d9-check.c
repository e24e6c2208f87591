/* d9-check.c: verifies traces written while tests/tools/d9-driver.c recorded. Reads segment files
 * (or directories of them) with the format library, orders each process's segments by
 * segment_seq and follows every thread's stream across them: QueueSample seqs must strictly
 * increase, and every gap (plus the driver's parks and --mix events lost in it) must be covered
 * exactly by the Dropped counts recorded in between: exact accounting. It also checks that
 * segments are self-contained (Thread defs), that chunks carry one worker id per thread, that
 * buffers_full drops open their chunk, and compares trailers with what was decoded.
 * Prints one JSON object; exits 0 when the trace is consistent, 1 on accounting errors,
 * 2 on usage errors. `--help` lists the options. */
#include "d9-format.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static struct {
	uint64_t park_every; /* the driver's --park-every: 2 events after each multiple */
	int mix; /* the driver's --mix: 3 events before each seq, 2 after each multiple of 16 */
	uint64_t expect_n; /* every thread recorded seqs 1..N: check the tail too */
	uint64_t tail_extra; /* events each thread recorded after seq N (hang: its final park) */
	int no_worker_check, strict_trailer;
	const char *driver; /* the driver's JSON lines: which threads to expect, what they recorded */
} opt;

struct file {
	char *path;
	uint32_t pid, seq;
	uint64_t bytes;
	int open_err, sealed, truncated, recovered, active_name;
	uint64_t events, chunks, event_chunks, corrupt, bad_events, dropped, samples_lost;
	uint64_t type_counts[D9_EV_TYPE_LIMIT];
	uint64_t min_time, max_time;
	int64_t first_mono, last_mono, first_real, last_real;
	uint64_t start_real;
	int clock_tsc, has_trailer;
	struct d9_trailer tr;
};

/* One thread's stream across its process's segments. */
struct stream {
	uint32_t pid, tid;
	uint32_t worker; /* of its first chunk */
	uint64_t worker_changes, def_mismatch, undefined;
	uint64_t received, events, dropped, missing, overcounted, out_of_order, gaps;
	uint64_t first_seq, last_seq;
	uint64_t pending_drop, pending_other; /* since the last QueueSample */
	uint64_t reasons[D9_DROP_REASON_MAX + 1];
	uint64_t dropped_not_first;
	int64_t first_mono, last_mono, first_real, last_real, prev_mono, prev_real, max_backstep_ns;
	int seen_time;
	int expected; /* listed by the driver, which attempted `attempted` events on it */
	uint64_t attempted;
};

static struct file *files;
static size_t nfiles, files_cap;
static struct stream *streams;
static size_t nstreams, streams_cap;
static uint64_t nerrors, ntrailer_errors;
static char *errors[40], *trailer_errors[40];
static size_t nerror_msgs, ntrailer_msgs;

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);

	if (!q) {
		fprintf(stderr, "d9-check: out of memory\n");
		exit(2);
	}
	return q;
}

__attribute__((format(printf, 3, 4))) static void note(char **list, size_t *n, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	if (*n >= 40)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	list[(*n)++] = strdup(buf);
}

#define ERROR(...) (nerrors++, note(errors, &nerror_msgs, __VA_ARGS__))
#define TRAILER_ERROR(...) (ntrailer_errors++, note(trailer_errors, &ntrailer_msgs, __VA_ARGS__))

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

static void add_file(const char *path)
{
	if (nfiles == files_cap) {
		files_cap = files_cap ? files_cap * 2 : 64;
		files = xrealloc(files, files_cap * sizeof(*files));
	}
	struct file *f = &files[nfiles++];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	f->active_name = ends_with(path, ".active");
}

/* Arguments: segment files, or directories whose .active, .bin and .bin.gz files are read. */
static int add_arg(const char *arg)
{
	struct stat st;

	if (stat(arg, &st) != 0) {
		fprintf(stderr, "d9-check: %s: %s\n", arg, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		add_file(arg);
		return 0;
	}
	DIR *d = opendir(arg);
	struct dirent *e;
	if (!d) {
		fprintf(stderr, "d9-check: %s: %s\n", arg, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		if (!ends_with(e->d_name, ".active") && !ends_with(e->d_name, ".bin") &&
			!ends_with(e->d_name, ".bin.gz"))
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", arg, e->d_name);
		add_file(path);
	}
	closedir(d);
	return 0;
}

static struct stream *stream_get(uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < nstreams; i++)
		if (streams[i].pid == pid && streams[i].tid == tid)
			return &streams[i];
	if (nstreams == streams_cap) {
		streams_cap = streams_cap ? streams_cap * 2 : 64;
		streams = xrealloc(streams, streams_cap * sizeof(*streams));
	}
	struct stream *s = &streams[nstreams++];
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->tid = tid;
	return s;
}

/* --driver: reads the lines d9-driver printed ({"role":...,"pid":P,...,"threads":[{"tid":T,...,
 * "attempted":A,...}]}) and registers each thread, so a thread whose events left no trace at all
 * is still accounted for. Returns the number of processes read, or -1. */
static uint32_t driver_pids[256];
static size_t ndriver_pids;

static int read_driver(const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int n = 0;

	if (!f) {
		fprintf(stderr, "d9-check: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) > 0) {
		const char *p = strstr(line, "\"role\":");
		unsigned pid;
		if (!p || !(p = strstr(p, "\"pid\":")) || sscanf(p, "\"pid\":%u", &pid) != 1)
			continue;
		if (ndriver_pids < sizeof(driver_pids) / sizeof(driver_pids[0]))
			driver_pids[ndriver_pids++] = pid;
		n++;
		while ((p = strstr(p, "{\"tid\":"))) {
			unsigned tid;
			unsigned long long attempted;
			const char *a = strstr(p, "\"attempted\":");
			if (sscanf(p, "{\"tid\":%u", &tid) != 1 || !a ||
				sscanf(a, "\"attempted\":%llu", &attempted) != 1)
				break;
			struct stream *s = stream_get(pid, tid);
			s->expected = 1;
			s->attempted = attempted;
			p = a;
		}
	}
	free(line);
	fclose(f);
	return n;
}

static int driver_pid(uint32_t pid)
{
	for (size_t i = 0; i < ndriver_pids; i++)
		if (driver_pids[i] == pid)
			return 1;
	return 0;
}

/* Multiples of m in [lo, hi] (lo >= 1). */
static uint64_t multiples(uint64_t m, uint64_t lo, uint64_t hi)
{
	if (!m || hi < lo)
		return 0;
	return hi / m - (lo - 1) / m;
}

/* Events other than QueueSample the driver records between seq a (0: the start) and seq b:
 * those after a..b-1 and those before a+1..b. */
static uint64_t others_between(uint64_t a, uint64_t b)
{
	uint64_t lo = a ? a : 1, n = 0;

	if (b <= a)
		return 0;
	n += 2 * multiples(opt.park_every, lo, b - 1);
	if (opt.mix)
		n += 3 * (b - a) + 2 * multiples(16, lo, b - 1);
	return n;
}

/* Closes the window ending at seq b (or at the stream's end when tail): compares the events lost
 * in it with the Dropped counts recorded in it. */
static void account(struct stream *s, uint64_t b, int tail)
{
	uint64_t a = s->last_seq;
	int64_t expect;

	if (tail) {
		/* after the last seq received: the rest of 1..N, the events after each of a..N (and
		 * before each of a+1..N), and the extras after seq N */
		uint64_t n = opt.expect_n > a ? opt.expect_n : a;
		uint64_t others = others_between(a, n + 1) - (opt.mix ? 3 : 0) + opt.tail_extra;
		expect = (int64_t)(n - a + others) - (int64_t)s->pending_other;
	} else {
		expect = (int64_t)(b - a - 1 + others_between(a, b)) - (int64_t)s->pending_other;
	}
	int64_t got = (int64_t)s->pending_drop;
	if (got != expect) {
		s->gaps++;
		if (got < expect)
			s->missing += (uint64_t)(expect - got);
		else
			s->overcounted += (uint64_t)(got - expect);
		if (tail)
			ERROR("pid %u tid %u: after its last seq %" PRIu64 " of %" PRIu64 ": %" PRId64
				" events lost, Dropped records say %" PRId64, s->pid, s->tid, a, opt.expect_n,
				expect, got);
		else
			ERROR("pid %u tid %u: seq %" PRIu64 " -> %" PRIu64 ": %" PRId64
				" events lost, Dropped records say %" PRId64, s->pid, s->tid, a, b, expect, got);
	}
	s->pending_drop = s->pending_other = 0;
}

static void on_queue_sample(struct stream *s, uint64_t seq)
{
	s->received++;
	if (seq <= s->last_seq) {
		s->out_of_order++;
		ERROR("pid %u tid %u: seq %" PRIu64 " after seq %" PRIu64, s->pid, s->tid, seq, s->last_seq);
		s->pending_drop = s->pending_other = 0;
		return;
	}
	if (!s->first_seq)
		s->first_seq = seq;
	account(s, seq, 0);
	s->last_seq = seq;
}

static int cmp_file(const void *a, const void *b)
{
	const struct file *x = a, *y = b;

	if (x->open_err != y->open_err)
		return x->open_err ? 1 : -1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return strcmp(x->path, y->path);
}

/* First pass: header only, for the order. */
static void peek(struct file *f)
{
	struct d9_reader *r;
	struct stat st;

	if (stat(f->path, &st) == 0)
		f->bytes = (uint64_t)st.st_size;
	f->open_err = d9_reader_open_file(&r, f->path);
	if (f->open_err)
		return;
	const struct d9_header *h = d9_reader_header(r);
	f->pid = h->pid;
	f->seq = h->segment_seq;
	f->clock_tsc = h->clock_source == D9_CLOCK_TSC;
	f->start_real = h->start_realtime_ns;
	d9_reader_close(r);
}

struct tdef { uint32_t tid; uint32_t worker; };

static void read_file(struct file *f)
{
	struct d9_reader *r;
	struct d9_chunk c;
	struct tdef *defs = NULL;
	size_t ndefs = 0, defs_cap = 0;
	int err = d9_reader_open_file(&r, f->path);

	if (err) {
		f->open_err = err;
		return;
	}
	const struct d9_header *h = d9_reader_header(r);
	f->min_time = UINT64_MAX;
	while ((err = d9_reader_next(r, &c)) == 1) {
		if (c.type == D9_CHUNK_DEFS) {
			struct d9_defs_iter it;
			struct d9_def d;
			d9_defs_init(&it, r, &c);
			while (d9_defs_next(&it, &d) == 1) {
				if (d.kind != D9_DEF_THREAD)
					continue;
				size_t i = 0;
				while (i < ndefs && defs[i].tid != (uint32_t)d.id)
					i++;
				if (i == ndefs) {
					if (ndefs == defs_cap) {
						defs_cap = defs_cap ? defs_cap * 2 : 16;
						defs = xrealloc(defs, defs_cap * sizeof(*defs));
					}
					ndefs++;
				}
				defs[i] = (struct tdef){ (uint32_t)d.id, (uint32_t)d.u.thread.worker };
			}
		} else if (c.type == D9_CHUNK_TRAILER) {
			f->has_trailer = d9_trailer_decode(&c, &f->tr) == 0;
			if (!f->has_trailer)
				TRAILER_ERROR("%s: trailer does not parse", f->path);
		} else if (c.type == D9_CHUNK_EVENTS) {
			f->event_chunks++;
			struct stream *s = stream_get(f->pid, c.tid);
			size_t i = 0;
			while (i < ndefs && defs[i].tid != c.tid)
				i++;
			if (c.tid && i == ndefs) {
				s->undefined++;
				ERROR("%s: events of tid %u at offset %" PRIu64 " before any Thread def of it",
					f->path, c.tid, c.offset);
			} else if (c.tid && defs[i].worker != c.worker) {
				s->def_mismatch++;
				ERROR("%s: tid %u chunk at offset %" PRIu64 " carries worker %u, its Thread def says %u",
					f->path, c.tid, c.offset, c.worker, defs[i].worker);
			}
			if (!s->events && !s->dropped && !s->worker_changes)
				s->worker = c.worker;
			else if (c.worker != s->worker) {
				s->worker_changes++;
				ERROR("%s: tid %u chunk at offset %" PRIu64 " carries worker %u, earlier ones %u",
					f->path, c.tid, c.offset, c.worker, s->worker);
				s->worker = c.worker;
			}
			if (!opt.no_worker_check && c.worker == 0 && c.tid) {
				s->worker_changes++;
				ERROR("%s: tid %u chunk at offset %" PRIu64 " carries no worker id", f->path, c.tid,
					c.offset);
			}
			struct d9_events_iter it;
			struct d9_event ev;
			uint32_t index = 0;
			d9_events_init(&it, r, &c);
			while (d9_events_next(&it, &ev) == 1) {
				f->events++;
				if (ev.type < D9_EV_TYPE_LIMIT)
					f->type_counts[ev.type]++;
				if (ev.time < f->min_time)
					f->min_time = ev.time;
				if (ev.time > f->max_time)
					f->max_time = ev.time;
				int64_t mono = d9_time_to_mono_ns(h, ev.time);
				if (!s->seen_time) {
					s->first_mono = mono;
					s->first_real = d9_time_to_realtime_ns(h, ev.time);
					s->seen_time = 1;
				} else if (mono < s->prev_mono && s->prev_mono - mono > s->max_backstep_ns) {
					s->max_backstep_ns = s->prev_mono - mono;
				}
				s->prev_mono = mono;
				s->prev_real = d9_time_to_realtime_ns(h, ev.time);
				if (ev.type == D9_EV_DROPPED) {
					uint64_t n = ev.f[D9_F_DROP_COUNT], why = ev.f[D9_F_DROP_REASON];
					if (why == D9_DROP_SAMPLES_LOST) {
						f->samples_lost += n;
					} else {
						f->dropped += n;
						s->dropped += n;
						s->pending_drop += n;
					}
					s->reasons[why <= D9_DROP_REASON_MAX ? why : 0] += n;
					if (why == D9_DROP_BUFFERS_FULL && index != 0) {
						s->dropped_not_first++;
						ERROR("%s: tid %u: a buffers_full Dropped record is event %u of its chunk "
							"at offset %" PRIu64 ", not the first", f->path, c.tid, index,
							c.offset);
					}
				} else {
					s->events++;
					if (ev.type == D9_EV_QUEUE_SAMPLE)
						on_queue_sample(s, ev.f[D9_F_QUEUE_RUNNABLE]);
					else
						s->pending_other++;
				}
				index++;
			}
			if (index != c.count)
				ERROR("%s: chunk at offset %" PRIu64 " decodes %u events, its head says %u", f->path,
					c.offset, index, c.count);
			s->last_mono = s->prev_mono;
			s->last_real = s->prev_real;
		}
	}
	if (err < 0)
		ERROR("%s: read error: %s", f->path, d9_strerror(err));
	const struct d9_reader_stats *st = d9_reader_stats(r);
	f->chunks = st->chunks;
	f->corrupt = st->corrupt_chunks;
	f->bad_events = st->bad_events;
	f->truncated = st->truncated;
	f->sealed = st->sealed;
	f->recovered = f->has_trailer && (f->tr.flags & 1u) /* bit 0: recovered (FORMAT.md 11) */;
	if (f->events) {
		f->first_mono = d9_time_to_mono_ns(h, f->min_time);
		f->last_mono = d9_time_to_mono_ns(h, f->max_time);
		f->first_real = d9_time_to_realtime_ns(h, f->min_time);
		f->last_real = d9_time_to_realtime_ns(h, f->max_time);
	}
	if (f->corrupt || f->bad_events)
		ERROR("%s: %" PRIu64 " corrupt chunks, %" PRIu64 " bad events", f->path, f->corrupt,
			f->bad_events);
	if (f->truncated && !f->active_name)
		ERROR("%s: a sealed segment is truncated at offset %" PRIu64, f->path, st->truncated_at);
	/* an .active segment with a trailer is a seal killed between the trailer's write and the
	 * rename (one system call apart): legal, recovery renames it (writer.c recover_one) */
	d9_reader_close(r);
	free(defs);
}

/* The trailer against what was decoded (FORMAT.md section 11). */
static void check_trailer(const struct file *f)
{
	const struct d9_trailer *t = &f->tr;

	if (!f->has_trailer)
		return;
	if (t->events != f->events)
		TRAILER_ERROR("%s: trailer events %" PRIu64 ", decoded %" PRIu64, f->path, t->events,
			f->events);
	if (t->dropped_events != f->dropped || t->dropped_samples != f->samples_lost)
		TRAILER_ERROR("%s: trailer dropped %" PRIu64 "/%" PRIu64 ", Dropped records %" PRIu64 "/%"
			PRIu64, f->path, t->dropped_events, t->dropped_samples, f->dropped, f->samples_lost);
	if (f->events && (t->first_time != f->min_time || t->last_time != f->max_time))
		TRAILER_ERROR("%s: trailer times %" PRIu64 "..%" PRIu64 ", events %" PRIu64 "..%" PRIu64,
			f->path, t->first_time, t->last_time, f->min_time, f->max_time);
	if (t->chunks != f->chunks)
		TRAILER_ERROR("%s: trailer chunks %" PRIu64 ", the file has %" PRIu64 " (%" PRIu64
			" EVENTS)", f->path, t->chunks, f->chunks, f->event_chunks);
	/* type counts are optional (n = 0 is valid); d9's writer lists complete ones for the
	 * built-in event types, which is all the driver records */
	for (uint32_t i = 0; t->ntypes && i <= D9_EV_KNOWN_MAX; i++)
		if (t->type_counts[i] != f->type_counts[i]) {
			TRAILER_ERROR("%s: trailer type_counts[%s] %" PRIu64 ", decoded %" PRIu64, f->path,
				d9_event_name(i) ? d9_event_name(i) : "?", t->type_counts[i], f->type_counts[i]);
			break;
		}
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void print_list(const char *name, char **list, size_t n)
{
	printf(",\"%s\":[", name);
	for (size_t i = 0; i < n; i++) {
		if (i)
			putchar(',');
		json_str(list[i]);
	}
	putchar(']');
}

static void report(void)
{
	uint64_t sealed = 0, truncated = 0, recovered = 0, unreadable = 0, active = 0, events = 0;
	uint64_t corrupt = 0, reasons[D9_DROP_REASON_MAX + 1] = { 0 };

	for (size_t i = 0; i < nfiles; i++) {
		struct file *f = &files[i];
		sealed += f->sealed;
		truncated += f->truncated;
		recovered += f->recovered;
		unreadable += f->open_err != 0;
		active += f->active_name;
		events += f->events;
		corrupt += f->corrupt;
	}
	for (size_t i = 0; i < nstreams; i++)
		for (int k = 0; k <= D9_DROP_REASON_MAX; k++)
			reasons[k] += streams[i].reasons[k];
	printf("{\"ok\":%s,\"errors\":%" PRIu64 ",\"trailer_errors\":%" PRIu64 ",\"files\":%zu,"
		"\"sealed\":%" PRIu64 ",\"active\":%" PRIu64 ",\"truncated\":%" PRIu64 ",\"recovered\":%"
		PRIu64 ",\"unreadable\":%" PRIu64 ",\"corrupt_chunks\":%" PRIu64 ",\"events\":%" PRIu64
		",\"drop_reasons\":{", nerrors ? "false" : "true", nerrors, ntrailer_errors, nfiles, sealed,
		active, truncated, recovered, unreadable, corrupt, events);
	for (int k = 0, first = 1; k <= D9_DROP_REASON_MAX; k++) {
		if (!reasons[k])
			continue;
		printf("%s\"%s\":%" PRIu64, first ? "" : ",", d9_drop_reason_name((uint64_t)k), reasons[k]);
		first = 0;
	}
	printf("},\"pids\":{");
	for (size_t i = 0; i < nfiles;) {
		/* files are sorted by pid, then seq */
		uint32_t pid = files[i].pid;
		size_t j = i;
		if (files[i].open_err) {
			i++;
			continue;
		}
		printf("%s\"%u\":{\"seqs\":[", i ? "," : "", pid);
		for (; j < nfiles && !files[j].open_err && files[j].pid == pid; j++)
			printf("%s%u", j > i ? "," : "", files[j].seq);
		printf("],\"segments\":%zu,\"tids\":{", j - i);
		int first = 1;
		for (size_t k = 0; k < nstreams; k++) {
			struct stream *s = &streams[k];
			if (s->pid != pid)
				continue;
			printf("%s\"%u\":{\"worker\":%u,\"received\":%" PRIu64 ",\"events\":%" PRIu64
				",\"dropped\":%" PRIu64 ",\"missing\":%" PRIu64 ",\"overcounted\":%" PRIu64
				",\"out_of_order\":%" PRIu64 ",\"attempted\":%" PRId64 ",\"first_seq\":%" PRIu64
				",\"last_seq\":%" PRIu64 ",\"worker_changes\":%" PRIu64 ",\"dropped_not_first\":%"
				PRIu64 ",\"first_mono_ns\":%" PRId64 ",\"last_mono_ns\":%" PRId64
				",\"first_real_ns\":%" PRId64 ",\"last_real_ns\":%" PRId64 ",\"max_backstep_ns\":%"
				PRId64 ",\"reasons\":{", first ? "" : ",", s->tid, s->worker, s->received, s->events,
				s->dropped, s->missing, s->overcounted, s->out_of_order,
				s->expected ? (int64_t)s->attempted : -1, s->first_seq, s->last_seq,
				s->worker_changes, s->dropped_not_first, s->first_mono, s->last_mono,
				s->first_real, s->last_real, s->max_backstep_ns);
			for (int r = 0, f2 = 1; r <= D9_DROP_REASON_MAX; r++) {
				if (!s->reasons[r])
					continue;
				printf("%s\"%s\":%" PRIu64, f2 ? "" : ",", d9_drop_reason_name((uint64_t)r),
					s->reasons[r]);
				f2 = 0;
			}
			printf("}}");
			first = 0;
		}
		printf("}}");
		i = j;
	}
	printf("},\"segments\":[");
	for (size_t i = 0; i < nfiles; i++) {
		struct file *f = &files[i];
		printf("%s{\"path\":", i ? "," : "");
		json_str(f->path);
		printf(",\"open\":");
		json_str(f->open_err ? d9_strerror(f->open_err) : "ok");
		printf(",\"pid\":%u,\"seq\":%u,\"bytes\":%" PRIu64 ",\"sealed\":%d,\"recovered\":%d,"
			"\"truncated\":%d,\"events\":%" PRIu64 ",\"chunks\":%" PRIu64 ",\"dropped\":%" PRIu64
			",\"clock\":\"%s\",\"start_real_ns\":%" PRIu64 ",\"first_mono_ns\":%" PRId64
			",\"last_mono_ns\":%" PRId64 ",\"first_real_ns\":%" PRId64 ",\"last_real_ns\":%" PRId64
			",\"trailer_flags\":%u}", f->pid, f->seq, f->bytes, f->sealed, f->recovered,
			f->truncated, f->events, f->chunks, f->dropped, f->clock_tsc ? "tsc" : "monotonic",
			f->start_real, f->first_mono, f->last_mono, f->first_real, f->last_real,
			f->has_trailer ? f->tr.flags : 0);
	}
	putchar(']');
	print_list("error_list", errors, nerror_msgs);
	print_list("trailer_error_list", trailer_errors, ntrailer_msgs);
	printf("}\n");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: d9-check [OPTIONS] DIR|SEGMENT...\n"
		"  --park-every K     the driver parked after every K seqs (2 events each)\n"
		"  --mix              the driver ran with --mix\n"
		"  --expect-n N       each thread recorded seqs 1..N: account for the tail too\n"
		"  --tail-extra E     events each thread recorded after its last seq's (--exit hang: 1)\n"
		"  --driver FILE      d9-driver's output: every thread it ran must be accounted for, and\n"
		"                     events + dropped must equal the events it attempted\n"
		"  --no-worker-check  chunks of non-worker threads are expected\n"
		"  --strict-trailer   trailer mismatches are errors too\n"
		"Prints a JSON summary; exit 0 consistent, 1 errors, 2 usage.\n");
}

int main(int argc, char **argv)
{
	int nargs = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *end;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--mix")) {
			opt.mix = 1;
		} else if (!strcmp(a, "--no-worker-check")) {
			opt.no_worker_check = 1;
		} else if (!strcmp(a, "--strict-trailer")) {
			opt.strict_trailer = 1;
		} else if (!strcmp(a, "--driver")) {
			if (i + 1 >= argc) {
				usage(stderr);
				return 2;
			}
			opt.driver = argv[++i];
		} else if (!strcmp(a, "--park-every") || !strcmp(a, "--expect-n") ||
			!strcmp(a, "--tail-extra")) {
			if (i + 1 >= argc) {
				usage(stderr);
				return 2;
			}
			uint64_t v = strtoull(argv[++i], &end, 10);
			if (*end || end == argv[i]) {
				usage(stderr);
				return 2;
			}
			if (!strcmp(a, "--park-every"))
				opt.park_every = v;
			else if (!strcmp(a, "--expect-n"))
				opt.expect_n = v;
			else
				opt.tail_extra = v;
		} else if (a[0] == '-' && a[1]) {
			usage(stderr);
			return 2;
		} else {
			if (add_arg(a) != 0)
				return 2;
			nargs++;
		}
	}
	if (!nargs) {
		usage(stderr);
		return 2;
	}
	if (opt.driver && read_driver(opt.driver) < 0)
		return 2;
	for (size_t i = 0; i < nfiles; i++)
		peek(&files[i]);
	qsort(files, nfiles, sizeof(*files), cmp_file);
	for (size_t i = 0; i < nfiles; i++) {
		if (files[i].open_err) {
			ERROR("%s: unreadable: %s", files[i].path, d9_strerror(files[i].open_err));
			continue;
		}
		read_file(&files[i]);
		check_trailer(&files[i]);
	}
	for (size_t i = 0; i < nstreams; i++) {
		struct stream *s = &streams[i];
		/* with --driver, only the driver's processes recorded seqs 1..N */
		if (opt.expect_n && s->tid && (!opt.driver || driver_pid(s->pid)))
			account(s, 0, 1);
		if (s->expected && s->events + s->dropped != s->attempted)
			ERROR("pid %u tid %u: the driver attempted %" PRIu64 " events; %" PRIu64
				" are in the trace and %" PRIu64 " counted as dropped", s->pid, s->tid,
				s->attempted, s->events, s->dropped);
		else if (!s->expected && opt.driver && driver_pid(s->pid) && s->tid)
			ERROR("pid %u tid %u: in the trace, but not a thread the driver ran in that process",
				s->pid, s->tid);
	}
	if (opt.strict_trailer)
		nerrors += ntrailer_errors;
	report();
	return nerrors ? 1 : 0;
}
