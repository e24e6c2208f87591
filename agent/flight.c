/* flight.c: the flight recorder (D9_MODE=flight). The writer hands every drained chunk here: it
 * checks the triggers on the chunk's events (poll or loop turn, blocking call, scheduling delay,
 * drops) and, while no dump runs, keeps the chunk in an in-memory ring of the last
 * D9_FLIGHT_WINDOW seconds instead of writing it. A trigger writes the ring as ordinary segments,
 * keeps writing for D9_FLIGHT_AFTER seconds, seals, and leaves a manifest (JSON) naming the
 * trigger and the segments. Only the writer thread runs this file, except the dump signal's
 * handler (two atomic stores). It never records events, never does I/O on a host thread, and
 * holds at most the block arena (D9_MAX_MEMORY). Design: agent/DESIGN.md, "Flight recorder". */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { IDLE = 0, DUMPING = 1 };
enum { TRIG_POLL, TRIG_TURN, TRIG_BLOCKING, TRIG_SCHED, TRIG_DROPS, TRIG_SIGNAL, TRIG_FILE };
static const char *const trig_names[] = { "poll", "loop turn", "blocking call", "scheduling delay",
	"drops", "signal", "file" };

/* one trigger, as the manifest tells it */
struct trig {
	int kind;
	uint64_t time; /* event time units of the triggering event (its start for durations) */
	uint64_t real_ns; /* the same instant on CLOCK_REALTIME */
	uint64_t value; /* ns for durations, events for drops, the signal number */
	uint64_t threshold; /* ns, or events for drops */
	uint32_t tid, worker;
};

/* what each thread has open: a poll (PollStart seen) or a loop turn (Unpark seen) */
#define OPEN_SLOTS 1024
struct open_thr {
	uint32_t tid, worker;
	uint64_t poll_start, turn_start; /* units, 0 = none open */
	int polls; /* the thread runs coroutines: its polls are checked, not its loop turns */
};

/* coroutines woken and not yet polled: scheduling delay is Wake -> the woken coroutine's next
 * PollStart (as d9-analyze counts it). Chunks of different threads arrive in any order, so a
 * Wake older than the coroutine's last PollStart seen is one whose poll went by already. */
#define WAKE_SLOTS 4096
struct wake_co { uint64_t co, woken, last_poll; }; /* times in units, woken 0 = none pending */

/* window evictions forced by the memory cap, per thread: counted in the next dump when they fall
 * inside its window (an eviction older than the window is no loss: it would have gone anyway) */
#define LOSS_SLOTS 256
struct loss { uint32_t tid, worker; uint64_t count, last_time; };

static struct {
	int state;
	struct d9__block *head, *tail; /* the ring: chunks in the order the writer got them */
	size_t nblocks;
	struct open_thr open[OPEN_SLOTS];
	struct wake_co wakes[WAKE_SLOTS];
	struct loss loss[LOSS_SLOTS];
	size_t nloss;
	uint64_t evicted_window; /* events evicted for memory that were inside the window */
	uint64_t evicted_total; /* all events evicted for memory (said once) */
	uint64_t drop_second, drops_in_second; /* D9_TRIGGER_DROPS: events dropped per second */
	/* the dump in progress, or the last one */
	struct trig first; /* the trigger that started it */
	struct trig more[16]; /* triggers during it that extended it */
	uint32_t nmore, extended;
	uint64_t end_time; /* units: the dump ends once the clock passes it */
	uint64_t cooldown_until; /* units: no new dump starts before */
	uint64_t suppressed; /* triggers refused by the cooldown since the last dump */
	uint64_t window_start; /* units: the oldest event time the dump may hold */
	uint64_t seq_lo; /* the dump's first segment number */
	uint64_t dumps;
	struct d9_reader *dec; /* decodes chunks (our schema) */
	uint8_t dec_buf[4096];
	int dec_failed;
} fr; /* the flight recorder's state (writer thread) */

/* set by the dump signal's handler, taken by the writer */
static uint64_t sig_time;
static int sig_pending;

/* ---- time ------------------------------------------------------------------------------------- */

static uint64_t now_units(void)
{
	return d9__now() >> d9__shift;
}

static uint64_t units_to_ns(uint64_t u)
{
	return d9_agent_ticks_to_ns(u << d9__shift);
}

static uint64_t ns_to_units(uint64_t ns)
{
	return d9_agent_ns_to_ticks(ns) >> d9__shift;
}

/* The realtime instant of event time t (units), from one reading of both clocks now. */
static uint64_t units_to_real(uint64_t t)
{
	uint64_t now = now_units(), real = d9__realtime_ns();

	return t <= now ? real - units_to_ns(now - t) : real + units_to_ns(t - now);
}

static uint64_t window_start_now(void)
{
	uint64_t now = now_units(), win = ns_to_units(d9__g.cfg.flight_window_ns);

	return now > win ? now - win : 0;
}

/* ---- the ring --------------------------------------------------------------------------------- */

static void note_loss(const struct d9__block *b)
{
	uint64_t n = d9__block_events(b);

	fr.evicted_total += n;
	for (size_t i = 0; i < fr.nloss; i++)
		if (fr.loss[i].tid == b->tid) {
			fr.loss[i].count += n;
			if (b->last_time > fr.loss[i].last_time)
				fr.loss[i].last_time = b->last_time;
			return;
		}
	if (fr.nloss < LOSS_SLOTS) {
		fr.loss[fr.nloss++] = (struct loss){ b->tid, b->worker, n, b->last_time };
		return;
	}
	fr.loss[0].count += n; /* full table: charged to its first thread rather than forgotten */
	fr.loss[0].tid = 0;
}

/* Forgets losses older than the window: a dump would not have held those events anyway. */
static void prune_losses(uint64_t window_start)
{
	size_t j = 0;

	for (size_t i = 0; i < fr.nloss; i++)
		if (fr.loss[i].last_time >= window_start)
			fr.loss[j++] = fr.loss[i];
	fr.nloss = j;
}

/* Packs: a chunk drained after a flush interval often fills a small part of its 64 KiB block, so
 * a window of whole blocks would hold far less than D9_MAX_MEMORY allows. Chunks of up to half a
 * block are copied into packs (pool blocks holding entries back to back: a copy of the chunk's
 * block head, then its bytes, 8-aligned) and their blocks go back to the pool at once. A pack is
 * marked by tid PACK_TID (no thread has it); its first/last_time span its entries, count is their
 * number, size the bytes used. */
#define PACK_TID UINT32_MAX
#define PACK_MAX (D9_BLOCK_DATA / 2)

static size_t entry_len(const struct d9__block *e)
{
	return (sizeof(struct d9__block) + e->size + 7) & ~(size_t)7;
}

/* The entries of pack p: for (e = pack_first(p); e; e = pack_next(p, e)). */
static struct d9__block *pack_first(struct d9__block *p)
{
	return p->count ? (struct d9__block *)(void *)p->data : NULL;
}

static struct d9__block *pack_next(struct d9__block *p, struct d9__block *e)
{
	uint8_t *n = (uint8_t *)e + entry_len(e);

	return n < p->data + p->size ? (struct d9__block *)(void *)n : NULL;
}

static void ring_append(struct d9__block *b)
{
	b->next = NULL;
	if (fr.tail)
		fr.tail->next = b;
	else
		fr.head = b;
	fr.tail = b;
	fr.nblocks++;
}

/* Keeps b in the ring: copied into the last pack (a new one when it is full), or whole when it
 * is large or no block is free for a pack. */
static void ring_keep(struct d9__block *b)
{
	size_t need = (sizeof(struct d9__block) + b->size + 7) & ~(size_t)7;
	struct d9__block *p = fr.tail;

	if (b->size > PACK_MAX) {
		ring_append(b);
		return;
	}
	if (!p || p->tid != PACK_TID || p->size + need > D9_BLOCK_DATA) {
		p = d9__pool_get();
		if (!p) {
			ring_append(b);
			return;
		}
		memset(p, 0, sizeof(*p));
		p->tid = PACK_TID;
		p->first_time = UINT64_MAX;
		ring_append(p);
	}
	struct d9__block *e = (struct d9__block *)(void *)(p->data + p->size);
	memcpy(e, b, sizeof(*b) + b->size);
	e->next = NULL;
	p->size += (uint32_t)need;
	p->count++;
	if (b->first_time < p->first_time)
		p->first_time = b->first_time;
	if (b->last_time > p->last_time)
		p->last_time = b->last_time;
	d9__pool_put(b);
}

static struct d9__block *ring_pop(void)
{
	struct d9__block *b = fr.head;

	if (b) {
		fr.head = b->next;
		if (!fr.head)
			fr.tail = NULL;
		fr.nblocks--;
	}
	return b;
}

/* Drops chunks that ended before start (units: the window's start), then, while recording
 * threads could run short of blocks (fewer than a quarter of the arena free), the oldest chunks:
 * those were inside the window, so their events are losses of the next dump (counted). */
static void ring_trim(uint64_t start)
{
	struct d9__agent *g = &d9__g;
	struct d9__block **pp = &fr.head, *prev = NULL;

	while (*pp) {
		struct d9__block *b = *pp;
		if (b->last_time < start) {
			*pp = b->next;
			fr.nblocks--;
			d9__pool_put(b);
			continue;
		}
		prev = b;
		pp = &b->next;
	}
	fr.tail = prev;
	size_t reserve = g->arena_blocks / 4 > 2 ? g->arena_blocks / 4 : 2;
	while (fr.head && __atomic_load_n(&g->nfree, __ATOMIC_RELAXED) < reserve) {
		struct d9__block *b = ring_pop();
		if (b->tid != PACK_TID)
			note_loss(b);
		for (struct d9__block *e = b->tid == PACK_TID ? pack_first(b) : NULL; e; e = pack_next(b, e))
			note_loss(e);
		d9__pool_put(b);
	}
	if (fr.evicted_total)
		d9__log_once(D9_LOG_WARN, "flight recorder: D9_FLIGHT_WINDOW (%llu s) does not fit in "
			"D9_MAX_MEMORY; the oldest events of the window are dropped (counted in each dump)",
			(unsigned long long)(g->cfg.flight_window_ns / 1000000000u));
	prune_losses(start);
}

/* ---- the triggers --------------------------------------------------------------------------- */

/* A reader over a header and our schema, to decode chunks with format.c's own decoder. */
static int decoder_open(void)
{
	struct d9_wbuf w;
	struct d9_header h = {
		.time_shift = d9__shift,
		.ticks_per_sec = d9__clock_tps(),
		.writer = D9_WRITER_VERSION,
		.process = "",
		.cmdline = "",
		.hostname = "",
		.boot_id = "",
	};

	if (fr.dec || fr.dec_failed)
		return fr.dec ? 0 : -1;
	d9_wbuf_init(&w, fr.dec_buf, sizeof(fr.dec_buf));
	w.p += d9_prefix_encode(w.p, D9_PREFIX_LEN);
	d9_header_write(&w, &h);
	d9_schema_write(&w, D9_AGENT_SCHEMA);
	struct d9_chunk c;
	if (w.err || d9_reader_open_mem(&fr.dec, fr.dec_buf, (size_t)(w.p - fr.dec_buf)) != 0 ||
		d9_reader_next(fr.dec, &c) != 1) {
		if (fr.dec)
			d9_reader_close(fr.dec);
		fr.dec = NULL;
		fr.dec_failed = 1;
		d9__log_once(D9_LOG_WARN, "flight recorder: cannot decode chunks; only the signal and "
			"file triggers work");
		return -1;
	}
	return 0;
}

static struct open_thr *open_of(uint32_t tid, uint32_t worker)
{
	struct open_thr *o = &fr.open[(tid * 2654435761u) % OPEN_SLOTS];

	if (o->tid != tid) /* a collision forgets the other thread's open poll: a missed trigger */
		*o = (struct open_thr){ .tid = tid, .worker = worker };
	return o;
}

static struct wake_co *wake_of(uint64_t co)
{
	struct wake_co *w = &fr.wakes[(co * 0x9e3779b97f4a7c15ull) >> 52]; /* 12 bits: 4096 */

	if (w->co != co) /* a collision forgets the other coroutine's pending Wake */
		*w = (struct wake_co){ .co = co };
	return w;
}

static void fire(const struct trig *t);

static void check(int kind, uint64_t time, uint64_t value_ns, uint64_t threshold_ns,
	uint32_t tid, uint32_t worker)
{
	if (!threshold_ns || value_ns <= threshold_ns)
		return;
	struct trig t = { kind, time, units_to_real(time), value_ns, threshold_ns, tid, worker };
	fire(&t);
}

/* The event triggers of one chunk, in its event order. */
static void check_events(const struct d9__block *b)
{
	const struct d9__config *c = &d9__g.cfg;

	if (!c->trigger_poll_ns && !c->trigger_blocking_ns && !c->trigger_sched_ns)
		return;
	if (b->size < D9_CHUNK_OVERHEAD + D9_EVENTS_HDR_LEN || decoder_open() != 0)
		return;
	struct d9_chunk ch = {
		.type = D9_CHUNK_EVENTS,
		.len = b->size - D9_CHUNK_OVERHEAD,
		.payload = b->data + D9_CHUNK_HDR_LEN,
		.tid = b->tid,
		.worker = b->worker,
		.count = b->count,
	};
	memcpy(&ch.base_time, ch.payload + 8, 8);
	/* thresholds in event units: durations are compared without a division per event */
	uint64_t poll_u = c->trigger_poll_ns ? ns_to_units(c->trigger_poll_ns) : UINT64_MAX;
	uint64_t sched_u = c->trigger_sched_ns ? ns_to_units(c->trigger_sched_ns) : UINT64_MAX;
	struct d9_events_iter it;
	struct d9_event ev;
	struct open_thr *o = open_of(b->tid, b->worker);
	d9_events_init(&it, fr.dec, &ch);
	while (d9_events_next(&it, &ev) == 1) {
		switch (ev.type) {
		case D9_EV_POLL_START: {
			o->poll_start = ev.time;
			o->polls = 1;
			if (!c->trigger_sched_ns || !ev.f[D9_F_POLL_COROUTINE])
				break;
			struct wake_co *w = wake_of(ev.f[D9_F_POLL_COROUTINE]);
			if (w->woken && w->woken <= ev.time && ev.time - w->woken > sched_u)
				check(TRIG_SCHED, w->woken, units_to_ns(ev.time - w->woken),
					c->trigger_sched_ns, b->tid, b->worker);
			w->woken = 0;
			if (ev.time > w->last_poll)
				w->last_poll = ev.time;
			break;
		}
		case D9_EV_WAKE: {
			if (!c->trigger_sched_ns || !ev.f[D9_F_WAKE_WOKEN])
				break;
			struct wake_co *w = wake_of(ev.f[D9_F_WAKE_WOKEN]);
			/* the first Wake counts (a second before the poll changes nothing) */
			if (ev.time >= w->last_poll && (!w->woken || ev.time < w->woken))
				w->woken = ev.time;
			break;
		}
		case D9_EV_POLL_END:
			if (o->poll_start && ev.time >= o->poll_start && ev.time - o->poll_start > poll_u)
				check(TRIG_POLL, o->poll_start, units_to_ns(ev.time - o->poll_start),
					c->trigger_poll_ns, b->tid, b->worker);
			o->poll_start = 0;
			break;
		case D9_EV_UNPARK:
			o->turn_start = ev.time;
			break;
		case D9_EV_PARK:
			/* the loop turn of a thread without coroutines (generic mode) */
			if (!o->polls && o->turn_start && ev.time >= o->turn_start &&
				ev.time - o->turn_start > poll_u)
				check(TRIG_TURN, o->turn_start, units_to_ns(ev.time - o->turn_start),
					c->trigger_poll_ns, b->tid, b->worker);
			o->turn_start = 0;
			break;
		case D9_EV_BLOCKING_CALL: {
			uint64_t d = ev.f[D9_F_BLOCK_DURATION_NS];
			if (!c->trigger_blocking_ns || d <= c->trigger_blocking_ns)
				break;
			uint64_t du = ns_to_units(d); /* the event's time is the call's end */
			check(TRIG_BLOCKING, ev.time > du ? ev.time - du : ev.time, d, c->trigger_blocking_ns,
				b->tid, b->worker);
			break;
		}
		default:
			break;
		}
	}
}

/* Dropped events (recorded by their threads, or reported to the writer): D9_TRIGGER_DROPS
 * fires when one second of the clock holds that many. */
void d9__flight_drops(uint64_t count, uint32_t tid, uint32_t worker)
{
	const struct d9__config *c = &d9__g.cfg;

	if (!c->flight || !c->trigger_drops || !count)
		return;
	uint64_t second = d9__mono_ns() / 1000000000u;
	if (second != fr.drop_second) {
		fr.drop_second = second;
		fr.drops_in_second = 0;
	}
	fr.drops_in_second += count;
	if (fr.drops_in_second >= c->trigger_drops) {
		uint64_t t = now_units();
		struct trig tr = { TRIG_DROPS, t, units_to_real(t), fr.drops_in_second, c->trigger_drops,
			tid, worker };
		fr.drops_in_second = 0;
		fire(&tr);
	}
}

/* ---- dumps ------------------------------------------------------------------------------------ */

/* A trigger: starts a dump, extends the one running, or is refused by the cooldown. */
static void fire(const struct trig *t)
{
	const struct d9__config *c = &d9__g.cfg;
	uint64_t after = ns_to_units(c->flight_after_ns);

	if (fr.state == DUMPING) {
		if (t->time + after > fr.end_time)
			fr.end_time = t->time + after;
		if (fr.nmore < sizeof(fr.more) / sizeof(fr.more[0]))
			fr.more[fr.nmore++] = *t;
		fr.extended++;
		return;
	}
	if (fr.dumps && t->time < fr.cooldown_until) {
		fr.suppressed++;
		d9__log(D9_LOG_INFO, "flight recorder: %s trigger within D9_TRIGGER_COOLDOWN of the last "
			"dump: no dump (%llu refused so far)", trig_names[t->kind],
			(unsigned long long)fr.suppressed);
		d9__log_once(D9_LOG_WARN, "flight recorder: a trigger came within D9_TRIGGER_COOLDOWN "
			"(%llu ms) of the last dump and was refused (counted in the next manifest; said once)",
			(unsigned long long)(c->trigger_cooldown_ns / 1000000u));
		return;
	}
	/* the dump starts: the window before the trigger goes out first, oldest chunk first */
	uint64_t win = ns_to_units(c->flight_window_ns);
	fr.window_start = t->time > win ? t->time - win : 0;
	ring_trim(fr.window_start);
	fr.state = DUMPING;
	fr.first = *t;
	fr.nmore = fr.extended = 0;
	fr.end_time = t->time + after;
	fr.seq_lo = d9__g.next_seq;
	fr.evicted_window = 0;
	prune_losses(fr.window_start);
	for (size_t i = 0; i < fr.nloss; i++) {
		d9__writer_count_drop(fr.loss[i].tid, fr.loss[i].worker, fr.loss[i].count);
		fr.evicted_window += fr.loss[i].count;
	}
	fr.nloss = 0;
	d9__log(D9_LOG_INFO, "flight recorder: dump triggered by %s (%llu, threshold %llu)",
		trig_names[t->kind], (unsigned long long)t->value, (unsigned long long)t->threshold);
	struct d9__block *b;
	while ((b = ring_pop())) {
		if (b->tid != PACK_TID) {
			d9__write_block(b);
			continue;
		}
		for (struct d9__block *e = pack_first(b); e; e = pack_next(b, e))
			if (e->last_time >= fr.window_start)
				d9__write_chunk(e);
		d9__pool_put(b);
	}
}

/* Keeps b in the ring (returns 1) or leaves it to the writer (0: continuous mode, or a dump is
 * being written). Checks b's triggers first, so the chunk that holds a trigger goes out after
 * the window before it. */
int d9__flight_keep(struct d9__block *b)
{
	if (!d9__g.cfg.flight)
		return 0;
	check_events(b);
	if (b->dropped > b->lost_samples)
		d9__flight_drops(b->dropped - b->lost_samples, b->tid, b->worker);
	if (fr.state == DUMPING)
		return 0;
	ring_keep(b);
	if (__atomic_load_n(&d9__g.nfree, __ATOMIC_RELAXED) < d9__g.arena_blocks / 4)
		ring_trim(window_start_now());
	return 1;
}

/* 1 when the writer may write (and open segments): continuous mode, or a dump runs. */
int d9__flight_writing(void)
{
	return !d9__g.cfg.flight || fr.state == DUMPING;
}

static void json_trig(FILE *f, const struct trig *t)
{
	fprintf(f, "{\"trigger\":\"%s\",\"time_realtime_ns\":%llu,\"value\":%llu,\"threshold\":%llu,"
		"\"unit\":\"%s\",\"tid\":%u,\"worker\":%u}", trig_names[t->kind],
		(unsigned long long)t->real_ns, (unsigned long long)t->value,
		(unsigned long long)t->threshold,
		t->kind == TRIG_DROPS ? "events" : t->kind == TRIG_SIGNAL ? "signal" :
		t->kind == TRIG_FILE ? "none" : "ns", t->tid, t->worker);
}

/* Removes the manifests (of any process of the stem) whose first segment is gone: the directory
 * budget deleted the oldest part of that dump, so the manifest would name what is not there, and
 * manifests would pile up without bound. Only regular files of the effective user are touched;
 * keep (a path) stays. */
static void prune_manifests(const char *keep)
{
	const struct d9__config *c = &d9__g.cfg;
	size_t n = strlen(c->stem);
	struct d9__file dir;
	struct d9__dir_read rd = { 0 };
	const char *name;

	if (d9__dir_open(&dir, AT_FDCWD, c->dir, 1, NULL))
		return;
	while ((name = d9__dir_next(&dir, &rd))) {
		char *end;
		if (strncmp(name, c->stem, n) || name[n] != '.')
			continue;
		long pid = strtol(name + n + 1, &end, 10);
		if (pid <= 0 || strncmp(end, ".dump-", 6))
			continue;
		long seq = strtol(end + 6, &end, 10);
		if (seq < 0 || strcmp(end, ".json"))
			continue;
		char path[4200], seg[4200];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", c->dir, name);
		int there = 0;
		static const char *const suffixes[] = { ".bin", ".bin.gz", ".active" };
		for (size_t i = 0; i < 3 && !there; i++) {
			snprintf(seg, sizeof(seg), "%s/%s.%ld.%06ld%s", c->dir, c->stem, pid, seq, suffixes[i]);
			there = lstat(seg, &st) == 0;
		}
		if (!there && strcmp(path, keep) && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
			st.st_uid == geteuid())
			unlink(path);
	}
	d9__file_close(&dir);
}

/* The manifest: <dir>/<stem>.<pid>.dump-<first seq>.json, written to a temporary name and
 * renamed. Returns 0 or a negative errno. */
static int write_manifest(const char *ended)
{
	struct d9__agent *g = &d9__g;
	const struct d9__config *c = &g->cfg;
	char path[4200], tmp[4300];
	struct d9__file file;
	char *text = NULL;
	size_t len = 0;
	uint64_t hi = g->next_seq;

	snprintf(path, sizeof(path), "%s/%s.%d.dump-%06llu.json", c->dir, c->stem, (int)g->pid,
		(unsigned long long)fr.seq_lo);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	fprintf(f, "{\"d9_dump\":1,\"pid\":%d,", (int)g->pid);
	fputs("\"trigger\":", f);
	json_trig(f, &fr.first);
	fprintf(f, ",\"extended_by\":[");
	for (uint32_t i = 0; i < fr.nmore; i++) {
		if (i)
			fputc(',', f);
		json_trig(f, &fr.more[i]);
	}
	fprintf(f, "],\"extensions\":%u,\"refused_by_cooldown\":%llu,", fr.extended,
		(unsigned long long)fr.suppressed);
	fprintf(f, "\"window_start_realtime_ns\":%llu,\"end_realtime_ns\":%llu,\"ended\":\"%s\",",
		(unsigned long long)units_to_real(fr.window_start), (unsigned long long)d9__realtime_ns(),
		ended);
	fprintf(f, "\"thresholds\":{\"poll_ns\":%llu,\"blocking_ns\":%llu,\"sched_delay_ns\":%llu,"
		"\"drops\":%llu,\"signal\":%d,\"window_ns\":%llu,\"after_ns\":%llu,\"cooldown_ns\":%llu},",
		(unsigned long long)c->trigger_poll_ns, (unsigned long long)c->trigger_blocking_ns,
		(unsigned long long)c->trigger_sched_ns, (unsigned long long)c->trigger_drops,
		c->dump_signal, (unsigned long long)c->flight_window_ns,
		(unsigned long long)c->flight_after_ns, (unsigned long long)c->trigger_cooldown_ns);
	/* the names as sealed: the compressor makes X.bin.gz of each X.bin later (compressed 1) */
	fprintf(f, "\"evicted_events\":%llu,\"compressed\":%d,\"segments\":[",
		(unsigned long long)fr.evicted_window, c->compress);
	for (uint64_t s = fr.seq_lo; s < hi; s++)
		fprintf(f, "%s\"%s.%d.%06llu.bin\"", s > fr.seq_lo ? "," : "", c->stem, (int)g->pid,
			(unsigned long long)s);
	fputs("]}\n", f);
	if (fclose(f) != 0 || !text) {
		free(text);
		return -ENOMEM;
	}
	int err = d9__file_create(&file, tmp, O_WRONLY);
	if (!err) {
		err = d9__file_write(&file, text, len);
		d9__file_close(&file);
		if (!err && rename(tmp, path) != 0)
			err = -errno;
		if (err)
			unlink(tmp);
	}
	free(text);
	if (err) {
		d9__log_once(D9_LOG_WARN, "flight recorder: cannot write %s: %s", path, strerror(-err));
		return err;
	}
	d9__log(D9_LOG_INFO, "flight recorder: dump written, manifest %s", path);
	prune_manifests(path); /* not the one just written, whatever became of its segments */
	if (d9__sealed_hook)
		d9__sealed_hook(path, 1);
	return 0;
}

/* The dump request file: <stem>.dump-request (any process of the stem: the first to remove it
 * takes it) or <stem>.<pid>.dump-request (this process). */
static int file_request(void)
{
	const struct d9__config *c = &d9__g.cfg;
	char path[4200];

	snprintf(path, sizeof(path), "%s/%s.%d.dump-request", c->dir, c->stem, (int)d9__g.pid);
	if (unlink(path) == 0)
		return 1;
	snprintf(path, sizeof(path), "%s/%s.dump-request", c->dir, c->stem);
	return unlink(path) == 0;
}

/* The writer's periodic pass (flush interval, or every pass when due): the signal and file
 * requests, the window, and the end of a dump. Returns 1 when the dump is due to end: the writer
 * collects every thread's chunk, writes it, seals and calls d9__flight_ended. */
int d9__flight_pass(int periodic)
{
	const struct d9__config *c = &d9__g.cfg;

	if (!c->flight)
		return 0;
	if (__atomic_exchange_n(&sig_pending, 0, __ATOMIC_ACQ_REL)) {
		uint64_t t = __atomic_load_n(&sig_time, __ATOMIC_RELAXED) >> d9__shift;
		struct trig tr = { TRIG_SIGNAL, t, units_to_real(t), (uint64_t)c->dump_signal, 0, 0, 0 };
		fire(&tr);
	}
	if (periodic && file_request()) {
		uint64_t t = now_units();
		struct trig tr = { TRIG_FILE, t, units_to_real(t), 0, 0, 0, 0 };
		fire(&tr);
	}
	if (fr.state == IDLE) {
		if (periodic)
			ring_trim(window_start_now());
		return 0;
	}
	return now_units() >= fr.end_time;
}

uint64_t d9__flight_due_in_ns(void)
{
	if (!d9__g.cfg.flight || fr.state == IDLE)
		return UINT64_MAX;
	uint64_t now = now_units();
	return now >= fr.end_time ? 0 : units_to_ns(fr.end_time - now);
}

/* The writer sealed the dump (ended: "after", or "exit" when the process ends during it). */
void d9__flight_ended(const char *ended)
{
	if (!d9__g.cfg.flight || fr.state != DUMPING)
		return;
	fr.state = IDLE;
	fr.dumps++;
	fr.cooldown_until = fr.first.time + ns_to_units(d9__g.cfg.trigger_cooldown_ns);
	write_manifest(ended);
	fr.suppressed = 0;
}

/* In a forked child: the ring's blocks were the parent's arena, now re-created. */
void d9__flight_child(void)
{
	struct d9_reader *dec = fr.dec;

	__atomic_store_n(&sig_pending, 0, __ATOMIC_RELAXED);
	/* continuous mode never wrote fr: clearing its 116 KiB of untouched zero pages cost every
	 * forked child about 29 page faults */
	if (!d9__g.cfg.flight)
		return;
	memset(&fr, 0, sizeof(fr));
	if (dec)
		d9_reader_close(dec); /* opened again on the child's first chunk */
}

static void on_dump_signal(int sig)
{
	(void)sig;
	__atomic_store_n(&sig_time, d9__now(), __ATOMIC_RELAXED);
	__atomic_store_n(&sig_pending, 1, __ATOMIC_RELEASE);
	/* seen at the writer's next pass: now, unless the handler runs on a thread under a seccomp
	 * filter (the wake is a futex call): then at its next periodic pass */
	if (!d9__calls_off())
		d9__writer_wake();
}

/* D9_DUMP_SIGNAL: installed only when the host leaves the signal at its default action or
 * ignores it; a handler of the host's is never replaced (said once). */
void d9__flight_signal_install(void)
{
	int sig = d9__g.cfg.dump_signal;
	struct sigaction old, sa;

	if (!sig || sigaction(sig, NULL, &old) != 0)
		return;
	if ((old.sa_flags & SA_SIGINFO) || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
		d9__log(D9_LOG_WARN, "D9_DUMP_SIGNAL: the program handles signal %d itself; the dump "
			"signal is off (use the dump request file)", sig);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_dump_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}
