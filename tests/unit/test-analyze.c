/* test-analyze.c: unit tests of the analyzer core and of `summary` and `polls` (analyze/) on
 * synthetic segments written with the format library's encoder: every number the analyzer
 * reports is known in advance (CLOCK_MONOTONIC, time_shift 0: one time unit is one ns), so the
 * checks are exact. The analyzer's sources are compiled into this program (it links only the
 * format library), so the tests can look at its internal tallies as well as its output. */
#include "../../agent/dwsym.c"
#include "../../analyze/cmd-polls.c"
#include "../../analyze/cmd-summary.c"
#include "../../analyze/dumps.c"
#include "../../analyze/inputs.c"
#include "../../analyze/json.c"
#include "../../analyze/merge.c"
#include "../../analyze/opts.c"
#include "../../analyze/symbols.c"
#include "../../analyze/trace.c"
#include "../../analyze/util.c"
#include "../../analyze/wakes.c"
#include "d9-format.h"
#include "t.h"

#include <fcntl.h>
#include <sys/stat.h>

const char *__asan_default_options(void);
const char *__ubsan_default_options(void);
const char *__asan_default_options(void)
{
	return "exitcode=66";
}
const char *__ubsan_default_options(void)
{
	return "exitcode=66:print_stacktrace=1";
}

#define B 1000000000ull /* mono ns of the anchor; event times below are offsets from it */
#define R0 1700000000000000000ll /* CLOCK_REALTIME at the anchor */

/* ---- writing segments --------------------------------------------------------------------- */
struct gen {
	uint8_t *buf;
	struct d9_wbuf w;
	uint8_t *open;
	struct d9_enc e;
};

static void gen_begin_flags(struct gen *g, uint32_t pid, uint32_t seq, unsigned flags)
{
	struct d9_header h;

	memset(g, 0, sizeof(*g));
	g->buf = calloc(1, 1 << 20);
	T_ASSERT(g->buf);
	d9_wbuf_init(&g->w, g->buf, 1 << 20);
	g->w.p += d9_prefix_encode(g->w.p, 1 << 20);
	memset(&h, 0, sizeof(h));
	h.major = 1;
	h.pid = pid;
	h.ppid = 1;
	h.segment_seq = seq;
	h.clock_source = D9_CLOCK_MONOTONIC;
	h.time_shift = 0;
	h.ticks_per_sec = 1000000000;
	h.anchor_ticks = B;
	h.anchor_mono_ns = B;
	h.anchor_realtime_ns = (uint64_t)R0;
	h.start_realtime_ns = (uint64_t)R0;
	h.writer = "test";
	h.process = "srv";
	h.cmdline = "srv\0-x\0";
	h.cmdline_len = 7;
	h.hostname = "host";
	h.boot_id = "boot";
	T_EQ(d9_header_write(&g->w, &h), 0);
	T_EQ(d9_schema_write(&g->w, flags), 0);
}

static void gen_begin(struct gen *g, uint32_t pid, uint32_t seq)
{
	gen_begin_flags(g, pid, seq, 0);
}

static void defs_open(struct gen *g)
{
	g->open = d9_chunk_open(&g->w, D9_CHUNK_DEFS);
}

static void defs_close(struct gen *g)
{
	T_EQ(d9_chunk_close(&g->w, g->open), 0);
}

static void str(struct gen *g, uint64_t id, const char *s)
{
	d9_def_string(&g->w, id, s, strlen(s));
}

static struct d9_enc *ev_open_flags(struct gen *g, uint32_t tid, uint32_t worker, unsigned flags)
{
	T_EQ(d9_enc_begin(&g->e, g->w.p, (size_t)(g->w.end - g->w.p), tid, worker, B, 0,
		(uint8_t)flags), 0);
	return &g->e;
}

static struct d9_enc *ev_open(struct gen *g, uint32_t tid, uint32_t worker)
{
	T_EQ(d9_enc_begin(&g->e, g->w.p, (size_t)(g->w.end - g->w.p), tid, worker, B, 0, 0), 0);
	return &g->e;
}

static void ev_close(struct gen *g)
{
	g->w.p += d9_enc_end(&g->e, 1);
}

/* Writes the segment to dir/name, with a trailer when sealed; returns its length. */
static size_t gen_write_as(struct gen *g, const char *dir, const char *name, int sealed)
{
	char path[512];
	struct d9_trailer tr;

	memset(&tr, 0, sizeof(tr));
	if (sealed)
		T_EQ(d9_trailer_write(&g->w, &tr), 0);
	size_t len = (size_t)(g->w.p - g->buf);

	T_EQ(g->w.err, 0);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	T_ASSERT(f);
	T_EQ(fwrite(g->buf, 1, len, f), len);
	fclose(f);
	free(g->buf);
	return len;
}

/* A sealed segment, as d9's writer leaves it. */
static size_t gen_write(struct gen *g, const char *dir, const char *name)
{
	return gen_write_as(g, dir, name, 1);
}

static char top_dir[64]; /* made by main, removed after every test ran */

/* A fresh directory for the running test, inside top_dir. */
static char *tmpdir(void)
{
	static char d[128];

	snprintf(d, sizeof(d), "%s/%s", top_dir, t_current);
	T_EQ(mkdir(d, 0700), 0);
	return d;
}

/* The main scenario: one State Threads worker (pid 100, tid 100, worker 1). Times are ns after
 * the anchor. Polls: 10us, 30us (handler), 20us (0x3000), 40us (handler). Parks: 89us, 145us.
 * Wakes: spawn (delay 1us), fd (2us), timer 500 ns late (delay from the deadline 3.5us). */
static void write_main(const char *dir, const char *name)
{
	struct gen g;
	uint64_t frames[2] = { 0x1111, 0x2222 };

	gen_begin(&g, 100, 0);
	defs_open(&g);
	str(&g, 1, "handler");
	str(&g, 2, "main-thread");
	str(&g, 3, "usleep");
	str(&g, 4, "read");
	d9_def_location(&g.w, 1, 0x1000, 0x2000, 0, 1);
	d9_def_location(&g.w, 2, 0x3000, 0, 0, 0);
	d9_def_thread(&g.w, 100, 2, 1, D9_ROLE_WORKER);
	d9_def_coroutine(&g.w, 5, 0, 1, 0);
	d9_def_coroutine(&g.w, 6, 5, 2, 0);
	d9_def_stack(&g.w, 1, frames, 2);
	defs_close(&g);
	struct d9_enc *e = ev_open(&g, 100, 1);
	d9_enc_spawn(e, B + 0, 5, 0, 1);
	d9_enc_wake(e, B + 0, 5, 0, D9_WAKE_SPAWN, 0);
	d9_enc_poll_start(e, B + 1000, 5, 1);
	d9_enc_poll_end(e, B + 11000, 5);
	d9_enc_park(e, B + 11000, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, B + 100000, 1, 0, 0);
	d9_enc_wake(e, B + 100000, 5, 0, D9_WAKE_FD, 7);
	d9_enc_poll_start(e, B + 102000, 5, 1);
	d9_enc_poll_end(e, B + 132000, 5);
	d9_enc_wake(e, B + 132000, 6, 0, D9_WAKE_TIMER, -500);
	d9_enc_poll_start(e, B + 135000, 6, 0); /* location from the Coroutine def */
	d9_enc_poll_end(e, B + 155000, 6);
	d9_enc_coroutine_exit(e, B + 155000, 6);
	d9_enc_zero_timeout_waits(e, B + 155000, 3);
	d9_enc_park(e, B + 155000, D9_CALL_EPOLL_WAIT, 1000);
	ev_close(&g);
	e = ev_open(&g, 100, 1);
	d9_enc_unpark(e, B + 300000, 0, 0, 0);
	d9_enc_queue_sample(e, B + 300000, 2);
	d9_enc_blocking_call(e, B + 300000, 5, 3, D9_FD_NONE, 5000, 1);
	d9_enc_blocking_call(e, B + 300000, 5, 3, D9_FD_NONE, 7000, 1);
	d9_enc_blocking_call(e, B + 300000, 5, 4, D9_FD_FILE, 1000, 0);
	d9_enc_dropped(e, B + 301000, 4, D9_DROP_BUFFERS_FULL);
	d9_enc_dropped(e, B + 301000, 2, D9_DROP_SAMPLES_LOST);
	d9_enc_poll_start(e, B + 301000, 5, 1);
	d9_enc_poll_end(e, B + 341000, 5);
	ev_close(&g);
	gen_write(&g, dir, name);
}

/* Runs the summary engine over dir; the caller frees with d9__sum_free + d9__trace_close. */
static void summarise(struct d9__trace *t, struct sum *s, const char *dir, int top, int64_t min_ns,
	const char *from, const char *to)
{
	char *args[1] = { (char *)dir };

	memset(t, 0, sizeof(*t));
	t->quiet = 1;
	if (from)
		T_EQ(d9__parse_when(from, &t->from), 0);
	if (to)
		T_EQ(d9__parse_when(to, &t->to), 0);
	T_EQ(d9__trace_open(t, args, 1), 0);
	T_EQ(d9__sum_init(s, t, top, min_ns), 0);
	T_EQ(d9__trace_run(t, d9__sum_event, s), 0);
	T_EQ(s->oom, 0);
	d9__sum_judge_stacks(s);
}

static struct wstat *worker(struct sum *s, uint32_t tid)
{
	for (size_t i = 0; i < s->nws; i++)
		if (s->ws[i] && s->ws[i]->th->tid == tid)
			return s->ws[i];
	T_FAIL("no stats for thread %u", tid);
}

static struct locstat *loc_named(struct sum *s, const char *name)
{
	for (size_t i = 0; i < s->t->nlocs; i++)
		if (!strcmp(s->t->locs[i]->name, name))
			return locstat_of(s, s->t->locs[i]);
	T_FAIL("no location %s", name);
}

/* Runs a subcommand with stdout and stderr in files; returns its exit status. */
static int run_cmd(int (*fn)(int, char **), char **argv, const char *out, const char *err)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	fflush(stdout);
	fflush(stderr);
	int so = dup(1), se = dup(2);
	int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	T_ASSERT(so >= 0 && se >= 0 && fo >= 0 && fe >= 0);
	dup2(fo, 1);
	dup2(fe, 2);
	int rc = fn(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	close(fo);
	close(fe);
	return rc;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	T_ASSERT(f);
	char *b = calloc(1, 1 << 20);
	T_ASSERT(b);
	size_t n = fread(b, 1, (1 << 20) - 1, f);
	b[n] = 0;
	fclose(f);
	return b;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* ---- tests ---------------------------------------------------------------------------------- */
TEST(polls_workers_exact)
{
	char *d = tmpdir();
	struct d9__trace t;
	struct sum s;

	write_main(d, "a.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(d9__trace_exit_code(&t), D9_EXIT_OK);
	T_EQ(t.nwarnings, 0);
	T_EQ(s.polls.n, 4);
	T_EQ(s.polls.sum, 100000);
	T_EQ(d9__hist_pct(&s.polls, 50), 20000);
	T_EQ(d9__hist_pct(&s.polls, 99), 40000);
	T_EQ(s.polls.max, 40000);
	struct wstat *w = worker(&s, 100);
	T_EQ(w->th->worker, 1);
	T_ASSERT(!strcmp(w->th->name, "main-thread"));
	T_EQ(w->polls.n, 4);
	T_EQ(w->busy_ns, 100000);
	T_EQ(w->parked_ns, 89000 + 145000);
	T_EQ(w->parks, 2);
	T_EQ(w->last_ns - w->first_ns, 341000);
	T_EQ(s.spawned, 1);
	T_EQ(s.exited, 1);
	T_EQ(s.alive, 1);
	T_EQ(s.ztw, 3);
	T_EQ(s.queue.n, 1);
	T_EQ(s.queue.max, 2);
	T_EQ(s.first_real, R0);
	T_EQ(s.last_real - s.first_real, 341000);
	T_EQ(d9__sum_generic(&s), 0);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

TEST(locations_and_long_polls)
{
	char *d = tmpdir();
	struct d9__trace t;
	struct sum s;

	write_main(d, "a.bin");
	summarise(&t, &s, d, 2, 25000, NULL, NULL);
	T_EQ(t.nlocs, 2);
	struct locstat *h = loc_named(&s, "handler"), *x = loc_named(&s, "0x3000");
	T_EQ(h->polls.n, 3);
	T_EQ(h->polls.sum, 80000);
	T_EQ(h->polls.max, 40000);
	T_EQ(d9__hist_pct(&h->polls, 50), 30000);
	T_EQ(x->polls.n, 1);
	T_EQ(x->polls.sum, 20000);
	/* top 2 at least 25 us: 40 us then 30 us */
	T_EQ(s.nlp, 2);
	qsort(s.lp, s.nlp, sizeof(*s.lp), d9__sum_cmp_long);
	T_EQ(s.lp[0].dur, 40000);
	T_EQ(s.lp[0].start_real - t.start_real, 301000);
	T_EQ(s.lp[0].co, 5);
	T_EQ(s.lp[0].th->worker, 1);
	T_ASSERT(!strcmp(s.lp[0].loc->name, "handler"));
	T_EQ(s.lp[1].dur, 30000);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

TEST(sched_delay_and_timer_lateness)
{
	char *d = tmpdir();
	struct d9__trace t;
	struct sum s;

	write_main(d, "a.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(s.sched.n, 3);
	T_EQ(d9__hist_pct(&s.sched, 50), 2000);
	T_EQ(s.sched.max, 3500);
	T_EQ(s.sched.min, 1000);
	T_EQ(s.kind_sched[D9_WAKE_SPAWN].n, 1);
	T_EQ(s.kind_sched[D9_WAKE_SPAWN].max, 1000);
	T_EQ(s.kind_sched[D9_WAKE_FD].max, 2000);
	T_EQ(s.kind_sched[D9_WAKE_TIMER].n, 1);
	T_EQ(s.kind_sched[D9_WAKE_TIMER].max, 3500); /* from the deadline, 500 ns before the Wake */
	T_EQ(s.lateness.n, 1);
	T_EQ(s.lateness.max, 500);
	struct locstat *x = loc_named(&s, "0x3000");
	T_EQ(x->sched.n, 1);
	T_EQ(x->wakes[D9_WAKE_TIMER], 1);
	T_EQ(loc_named(&s, "handler")->wakes[D9_WAKE_FD], 1);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

/* Wakes from another thread whose chunk the writer wrote after the polls they led to (pid 300:
 * worker 300 runs coroutine 9, thread 301 wakes it; both Thread definitions come first, as the
 * agent writes them). In time order: wake 40us -> poll 50us (10us), wake 150us -> poll 200us
 * (50us), and 9 exits at 210us (not alive). File order would pair neither and revive 9. A Wake
 * of coroutine 10 from thread 302, never defined, comes after its poll was settled: unknown. */
static void write_xthread(const char *dir, const char *name)
{
	struct gen g;

	gen_begin(&g, 300, 0);
	defs_open(&g);
	str(&g, 1, "handler");
	str(&g, 2, "loop");
	str(&g, 3, "waker");
	d9_def_location(&g.w, 1, 0x1000, 0, 0, 1);
	d9_def_thread(&g.w, 300, 2, 1, D9_ROLE_WORKER);
	d9_def_thread(&g.w, 301, 3, 0, D9_ROLE_THREAD);
	defs_close(&g);
	struct d9_enc *e = ev_open(&g, 300, 1);
	d9_enc_spawn(e, B + 0, 9, 0, 1);
	d9_enc_poll_start(e, B + 50000, 9, 1);
	d9_enc_poll_end(e, B + 60000, 9);
	d9_enc_poll_start(e, B + 200000, 9, 1);
	d9_enc_poll_end(e, B + 210000, 9);
	d9_enc_coroutine_exit(e, B + 210000, 9);
	d9_enc_spawn(e, B + 220000, 10, 0, 1);
	d9_enc_poll_start(e, B + 230000, 10, 1);
	d9_enc_poll_end(e, B + 240000, 10);
	d9_enc_park(e, B + 240000, D9_CALL_EPOLL_WAIT, -1);
	ev_close(&g);
	e = ev_open(&g, 301, 0);
	d9_enc_wake(e, B + 40000, 9, 0, D9_WAKE_COND, 1);
	d9_enc_wake(e, B + 150000, 9, 0, D9_WAKE_COND, 1);
	d9_enc_park(e, B + 300000, D9_CALL_POLL, -1);
	ev_close(&g);
	e = ev_open(&g, 302, 0); /* a thread with no definition: nothing waited for it */
	d9_enc_wake(e, B + 225000, 10, 0, D9_WAKE_COND, 1);
	ev_close(&g);
	gen_write(&g, dir, name);
}

TEST(cross_thread_wakes_in_time_order)
{
	char *d = tmpdir();
	struct d9__trace t;
	struct sum s;

	write_xthread(d, "x.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(s.sched.n, 2);
	T_EQ(s.sched.min, 10000);
	T_EQ(s.sched.max, 50000);
	T_EQ(s.kind_sched[D9_WAKE_COND].n, 2);
	T_EQ(loc_named(&s, "handler")->wakes[D9_WAKE_COND], 2);
	T_EQ(s.sched_unknown, 1); /* coroutine 10's wake came after its poll was settled */
	T_EQ(s.spawned, 2);
	T_EQ(s.exited, 1);
	T_EQ(s.alive, 1); /* 10; 9 exited after its last wake */
	T_EQ(s.wakes.late, 1);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

TEST(blocking_calls_drops)
{
	char *d = tmpdir();
	struct d9__trace t;
	struct sum s;

	write_main(d, "a.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(s.nbl, 2);
	qsort(s.bl, s.nbl, sizeof(*s.bl), d9__sum_cmp_blocking);
	T_ASSERT(!strcmp(s.bl[0]->call, "usleep"));
	T_EQ(s.bl[0]->count, 2);
	T_EQ(s.bl[0]->total, 12000);
	T_EQ(s.bl[0]->max, 7000);
	T_EQ(s.bl[0]->stack->n, 2);
	T_EQ(s.bl[0]->stack->frames[1], 0x2222);
	T_ASSERT(!strcmp(s.bl[1]->call, "read"));
	T_EQ(s.bl[1]->count, 1);
	T_ASSERT(s.bl[1]->stack == NULL);
	T_EQ(s.drops_events, 4);
	T_EQ(s.drops_samples, 2);
	T_EQ(s.drop_reasons[D9_DROP_BUFFERS_FULL], 4);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

TEST(json_output_keys)
{
	char *d = tmpdir(), out[128], err[128];

	write_main(d, "a.bin");
	snprintf(out, sizeof(out), "%s/out", d);
	snprintf(err, sizeof(err), "%s/err", d);
	char *argv[] = { "summary", "--json", "--top", "1", d, NULL };
	T_EQ(run_cmd(d9__cmd_summary, argv, out, err), D9_EXIT_OK);
	char *o = slurp(out);
	T_EQ(count_lines(o), 1);
	const char *want[] = { "\"duration_ns\":341000,", "\"processes\":[{\"pid\":100,",
		"\"workers\":[{\"id\":1,\"pid\":100,\"tid\":100,\"name\":\"main-thread\",\"unit\":\"poll\","
		"\"polls\":4,\"span_ns\":341000,\"busy_ns\":100000,\"parked_ns\":234000,",
		"\"polls\":{\"count\":4,\"total_ns\":100000,\"mean_ns\":25000,\"p50_ns\":20000,",
		"\"locations\":[{\"name\":\"handler\",\"polls\":3,\"count\":3,\"total_ns\":80000,",
		"\"long_polls\":[{\"duration_ns\":40000,\"location\":\"handler\",\"worker\":1,\"pid\":100,"
		"\"tid\":100,\"coroutine\":5,\"start_ns\":1700000000000301000,\"offset_ns\":301000,"
		"\"stack\":[],\"cpu_samples\":0,\"offcpu_samples\":0,\"hot_stacks\":[]}]",
		"\"sched_delay\":{\"count\":3,", "{\"kind\":\"timer\",\"count\":1,\"total_ns\":3500,",
		"\"timer_lateness\":{\"count\":1,\"total_ns\":500,",
		"\"blocking_calls\":[{\"call\":\"usleep\",\"count\":2,\"total_ns\":12000,\"max_ns\":7000,"
		"\"stack\":[\"0x1111\",\"0x2222\"]}", "\"cpu_hotspots\":[]",
		"\"drops\":{\"events\":4,\"samples\":2,", "\"warnings\":[]}" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(o, want[i]))
			T_FAIL("JSON lacks %s: %s", want[i], o);
	free(o);
}

TEST(text_output)
{
	char *d = tmpdir(), out[128], err[128];

	write_main(d, "a.bin");
	snprintf(out, sizeof(out), "%s/out", d);
	snprintf(err, sizeof(err), "%s/err", d);
	char *argv[] = { "summary", d, NULL };
	T_EQ(run_cmd(d9__cmd_summary, argv, out, err), D9_EXIT_OK);
	char *o = slurp(out);
	const char *want[] = { "process 100 (srv)", "coroutines: 1 spawned, 1 exited, 1 alive",
		"handler", "usleep", "2 calls  total 12us", "events and 2 samples dropped" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(o, want[i]))
			T_FAIL("text lacks '%s':\n%s", want[i], o);
	free(o);
}

TEST(time_window)
{
	char *d = tmpdir();
	struct d9__trace t;
	struct sum s;

	write_main(d, "a.bin");
	/* [100 us, 200 us): the polls of 30 us and 20 us; the others cross no edge but lie outside */
	summarise(&t, &s, d, 10, 0, "100us", "200us");
	T_EQ(s.polls.n, 2);
	T_EQ(s.polls.sum, 50000);
	d9__sum_free(&s);
	d9__trace_close(&t);
	/* the same window as wall-clock times */
	summarise(&t, &s, d, 10, 0, "@1700000000.0001", "1700000000.0002");
	T_EQ(s.polls.n, 2);
	T_EQ(s.polls.sum, 50000);
	d9__sum_free(&s);
	d9__trace_close(&t);
	summarise(&t, &s, d, 10, 0, "2023-11-14T22:13:20.0001Z", NULL);
	T_EQ(s.polls.n, 3);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

TEST(polls_command_filters)
{
	char *d = tmpdir(), out[128], err[128];

	write_main(d, "a.bin");
	snprintf(out, sizeof(out), "%s/out", d);
	snprintf(err, sizeof(err), "%s/err", d);
	char *a1[] = { "polls", "--json", "--min", "25us", "--location", "hand", d, NULL };
	T_EQ(run_cmd(d9__cmd_polls, a1, out, err), D9_EXIT_OK);
	char *o = slurp(out);
	T_EQ(count_lines(o), 2);
	T_ASSERT(strstr(o, "{\"start_ns\":1700000000000102000,\"offset_ns\":102000,\"duration_ns\":30000,"
		"\"pid\":100,\"tid\":100,\"worker\":1,\"coroutine\":5,\"location\":\"handler\"}\n"));
	T_ASSERT(strstr(o, "\"duration_ns\":40000,"));
	free(o);
	char *a2[] = { "polls", "--json", "--worker", "2", d, NULL };
	T_EQ(run_cmd(d9__cmd_polls, a2, out, err), D9_EXIT_OK);
	o = slurp(out);
	T_EQ(count_lines(o), 0);
	free(o);
	char *a3[] = { "polls", "--pid=100", "--from", "100us", "--to=200us", d, NULL };
	T_EQ(run_cmd(d9__cmd_polls, a3, out, err), D9_EXIT_OK);
	o = slurp(out);
	T_EQ(count_lines(o), 3); /* title + 2 polls */
	T_ASSERT(strstr(o, "+0.000135s"));
	free(o);
	char *a4[] = { "polls", "--min", "soon", d, NULL };
	T_EQ(run_cmd(d9__cmd_polls, a4, out, err), D9_EXIT_USAGE);
}

/* Two segments of one process, seq 1 in a file that sorts first: the same location under other
 * ids is one location, and a poll that starts in seq 0 and ends in seq 1 is one poll. A second
 * process is grouped apart but shares the location. */
TEST(segments_ordered_and_interned)
{
	char *d = tmpdir();
	struct gen g;
	struct d9__trace t;
	struct sum s;

	gen_begin(&g, 300, 0);
	defs_open(&g);
	str(&g, 1, "conn");
	d9_def_location(&g.w, 1, 0x10, 0x20, 0, 1);
	defs_close(&g);
	struct d9_enc *e = ev_open(&g, 300, 1);
	d9_enc_poll_start(e, B + 0, 9, 1);
	d9_enc_poll_end(e, B + 5000, 9);
	d9_enc_poll_start(e, B + 6000, 9, 1);
	ev_close(&g);
	gen_write(&g, d, "b-seq0.bin");
	gen_begin(&g, 300, 1);
	defs_open(&g);
	str(&g, 7, "conn");
	d9_def_location(&g.w, 4, 0x10, 0x20, 0, 7);
	defs_close(&g);
	e = ev_open(&g, 300, 1);
	d9_enc_poll_end(e, B + 9000, 9);
	d9_enc_poll_start(e, B + 10000, 9, 4);
	d9_enc_poll_end(e, B + 11000, 9);
	ev_close(&g);
	gen_write(&g, d, "a-seq1.bin");
	/* another process (pid 301) with the same location: its own worker, the same location row */
	gen_begin(&g, 301, 0);
	defs_open(&g);
	str(&g, 2, "conn");
	d9_def_location(&g.w, 3, 0x10, 0x20, 0, 2);
	defs_close(&g);
	e = ev_open(&g, 301, 1);
	d9_enc_poll_start(e, B + 0, 9, 3);
	d9_enc_poll_end(e, B + 7000, 9);
	ev_close(&g);
	gen_write(&g, d, "c-other-process.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(t.nprocs, 2);
	T_EQ(t.procs[0]->pid, 300);
	T_EQ(t.procs[0]->nsegs, 2);
	T_EQ(t.procs[1]->nsegs, 1);
	T_EQ(t.nlocs, 1);
	T_EQ(s.polls.n, 4);
	T_EQ(s.polls.sum, 5000 + 3000 + 1000 + 7000);
	T_EQ(loc_named(&s, "conn")->polls.n, 4);
	T_EQ(worker(&s, 300)->polls.n, 3);
	T_EQ(worker(&s, 301)->polls.n, 1);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

TEST(generic_loop_turns)
{
	char *d = tmpdir(), out[128], err[128];
	struct gen g;
	struct d9__trace t;
	struct sum s;

	gen_begin(&g, 400, 0);
	struct d9_enc *e = ev_open(&g, 401, 1);
	d9_enc_park(e, B + 0, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, B + 1000, 1, 0, 0);
	d9_enc_park(e, B + 4000, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, B + 10000, 1, 0, 0);
	d9_enc_blocking_call(e, B + 17000, 0, 0, D9_FD_NONE, 6000, 0);
	d9_enc_park(e, B + 18000, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, B + 20000, 1, 0, 0);
	d9_enc_park(e, B + 21000, D9_CALL_EPOLL_WAIT, -1);
	ev_close(&g);
	gen_write(&g, d, "g.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(d9__sum_generic(&s), 1);
	T_EQ(s.polls.n, 0);
	T_EQ(s.turns.n, 3);
	T_EQ(d9__hist_pct(&s.turns, 50), 3000);
	T_EQ(s.turns.max, 8000);
	struct wstat *w = worker(&s, 401);
	T_EQ(w->turn_ns, 12000);
	T_EQ(w->parked_ns, 1000 + 6000 + 2000);
	T_EQ(s.nlt, 3);
	T_EQ(s.nbl, 1);
	T_ASSERT(!strcmp(s.bl[0]->call, "?")); /* call string 0: undefined */
	d9__sum_free(&s);
	d9__trace_close(&t);
	snprintf(out, sizeof(out), "%s/out", d);
	snprintf(err, sizeof(err), "%s/err", d);
	char *argv[] = { "summary", "--json", d, NULL };
	T_EQ(run_cmd(d9__cmd_summary, argv, out, err), D9_EXIT_OK);
	char *o = slurp(out);
	T_ASSERT(strstr(o, "\"mode\":\"generic\""));
	T_ASSERT(strstr(o, "\"unit\":\"loop_turn\",\"polls\":3,\"span_ns\":21000,\"busy_ns\":12000,"
		"\"parked_ns\":9000,"));
	T_ASSERT(strstr(o, "\"polls\":{\"count\":3,\"total_ns\":12000,"));
	T_ASSERT(strstr(o, "\"long_polls\":[{\"duration_ns\":8000,\"location\":\"(loop turn)\""));
	free(o);
}

/* Unpark statistics (a writer schema with cpu_ns and sched_wait_ns) add up per worker. */
TEST(unpark_sched_wait)
{
	char *d = tmpdir(), out[128], err[128];
	struct gen g;

	gen_begin_flags(&g, 600, 0, D9_SCHEMA_UNPARK_STATS);
	struct d9_enc *e = ev_open_flags(&g, 601, 1, D9_SCHEMA_UNPARK_STATS);
	d9_enc_park(e, B + 0, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, B + 1000, 1, 70, 300);
	d9_enc_park(e, B + 2000, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, B + 5000, 1, 30, 1200);
	ev_close(&g);
	gen_write(&g, d, "u.bin");
	snprintf(out, sizeof(out), "%s/out", d);
	snprintf(err, sizeof(err), "%s/err", d);
	char *argv[] = { "summary", "--json", d, NULL };
	T_EQ(run_cmd(d9__cmd_summary, argv, out, err), D9_EXIT_OK);
	char *o = slurp(out);
	if (!strstr(o, "\"parked_ns\":4000,") || !strstr(o, "\"park_cpu_ns\":100,\"sched_wait_ns\":1500,"))
		T_FAIL("JSON: %s", o);
	free(o);
}

/* Gaps that tell no single thread (trace.h, "Pairing across gaps"): a Dropped of thread 0 (the
 * writer's count for threads it could not tell apart) breaks worker 2's open poll; a Dropped of
 * worker 2 written before worker 1's Wake but later in time breaks that wake's delay, not
 * worker 1's own poll. A segment with a trailer that follows is not truncated. */
TEST(gaps_across_threads)
{
	char *d = tmpdir();
	struct d9__trace t;
	struct sum s;
	struct gen g;
	struct d9_enc *e;

	gen_begin(&g, 700, 0);
	defs_open(&g);
	d9_def_thread(&g.w, 701, 0, 1, D9_ROLE_WORKER);
	d9_def_thread(&g.w, 702, 0, 2, D9_ROLE_WORKER);
	defs_close(&g);
	e = ev_open(&g, 702, 2);
	d9_enc_poll_start(e, B + 1000000, 8, 0);
	ev_close(&g);
	e = ev_open(&g, 0, 0);
	d9_enc_dropped(e, B + 2000000, 2, D9_DROP_OTHER);
	ev_close(&g);
	e = ev_open(&g, 702, 2);
	d9_enc_poll_end(e, B + 3000000, 8); /* unknown: thread 0's drop is every thread's */
	d9_enc_dropped(e, B + 50000000, 1, D9_DROP_BUFFERS_FULL);
	ev_close(&g);
	e = ev_open(&g, 701, 1);
	d9_enc_wake(e, B + 10000000, 9, 0, D9_WAKE_FD, 3);
	d9_enc_poll_start(e, B + 60000000, 9, 0); /* delay unknown: worker 2 lost events at 50 ms */
	d9_enc_poll_end(e, B + 60010000, 9); /* known: worker 1 lost nothing */
	ev_close(&g);
	gen_write(&g, d, "g.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(d9__trace_exit_code(&t), D9_EXIT_OK);
	T_EQ(t.truncated_segments, 0);
	T_EQ(s.polls.n, 1);
	T_EQ(s.polls.max, 10000);
	T_EQ(s.polls_unknown, 1);
	T_EQ(s.sched.n, 0);
	T_EQ(s.sched_unknown, 1);
	T_EQ(s.drops_events, 3);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

/* Two workers of one process: worker 1 has work waiting at 5 us and 20 us while worker 2 is
 * parked ([0, 10 us) and [15 us, 30 us)); worker 2's own sample at 12 us finds worker 1
 * running. */
TEST(idle_worker_detection)
{
	char *d = tmpdir();
	struct gen g;
	struct d9__trace t;
	struct sum s;

	gen_begin(&g, 200, 0);
	defs_open(&g);
	d9_def_thread(&g.w, 201, 0, 1, D9_ROLE_WORKER);
	d9_def_thread(&g.w, 202, 0, 2, D9_ROLE_WORKER);
	defs_close(&g);
	struct d9_enc *e = ev_open(&g, 201, 1);
	d9_enc_queue_sample(e, B + 5000, 3);
	d9_enc_queue_sample(e, B + 6000, 0);
	d9_enc_queue_sample(e, B + 20000, 1);
	ev_close(&g);
	e = ev_open(&g, 202, 2);
	d9_enc_park(e, B + 0, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, B + 10000, 1, 0, 0);
	d9_enc_queue_sample(e, B + 12000, 4);
	d9_enc_park(e, B + 15000, D9_CALL_EPOLL_WAIT, -1);
	d9_enc_unpark(e, B + 30000, 1, 0, 0);
	ev_close(&g);
	gen_write(&g, d, "w.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(s.queue_busy_samples, 3);
	T_EQ(s.idle_samples, 2);
	T_EQ(worker(&s, 202)->idle_samples, 2);
	T_EQ(worker(&s, 201)->idle_samples, 0);
	T_EQ(s.queue.n, 4);
	T_EQ(s.queue.max, 4);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

TEST(damaged_segments_warn_and_exit_4)
{
	char *d = tmpdir(), path[256], out[128], err[128];
	struct d9__trace t;
	struct sum s;

	write_main(d, "a.bin");
	snprintf(path, sizeof(path), "%s/a.bin", d);
	struct stat st;
	T_EQ(stat(path, &st), 0);
	/* b: cut in the CRC of the last EVENTS chunk (no trailer either, which follows it: 12
	 * bytes of framing, 53 of payload); c: one byte of the first EVENTS chunk flipped */
	char cmd[1024];
	const long trailer = 12 + 53;
	snprintf(cmd, sizeof(cmd), "head -c %lld %s > %s/b.bin && cp %s %s/c.bin",
		(long long)st.st_size - trailer - 3, path, d, path, d);
	T_EQ(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/c.bin", d);
	FILE *f = fopen(path, "r+b");
	T_ASSERT(f);
	char *buf = calloc(1, (size_t)st.st_size);
	T_EQ(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	T_ASSERT(buf[st.st_size - trailer] == 'D' && buf[st.st_size - trailer + 2] == D9_CHUNK_TRAILER);
	/* the first EVENTS chunk: type byte 4 after "D9" */
	long at = -1;
	for (long i = 16; i + 3 < st.st_size; i++)
		if (buf[i] == 'D' && buf[i + 1] == '9' && buf[i + 2] == D9_CHUNK_EVENTS) {
			at = i;
			break;
		}
	T_ASSERT(at > 0);
	fseek(f, at + 40, SEEK_SET);
	fputc(buf[at + 40] ^ 0x55, f);
	fclose(f);
	free(buf);
	snprintf(path, sizeof(path), "%s/a.bin", d);
	T_EQ(unlink(path), 0);
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(d9__trace_exit_code(&t), D9_EXIT_DAMAGED);
	T_EQ(t.nwarnings, 2);
	T_EQ(t.truncated_segments, 1);
	T_EQ(t.corrupt_segments, 1);
	T_EQ(t.corrupt_chunks, 1);
	char wb[300], wc[300];
	snprintf(wb, sizeof(wb), "%s/b.bin: damaged segment (truncated, 0 corrupt chunks", d);
	snprintf(wc, sizeof(wc), "%s/c.bin: damaged segment (1 corrupt chunks", d);
	T_ASSERT(strstr(t.warnings[0], wb) && strstr(t.warnings[0], "at offset "));
	T_ASSERT(strstr(t.warnings[1], wc) && strstr(t.warnings[1], "at offset "));
	/* b lost only its last chunk (the second EVENTS chunk), c only its first EVENTS chunk */
	T_EQ(s.polls.n, 3 + 1);
	d9__sum_free(&s);
	d9__trace_close(&t);
	snprintf(out, sizeof(out), "%s/out", d);
	snprintf(err, sizeof(err), "%s/err", d);
	char *argv[] = { "summary", "--json", d, NULL };
	T_EQ(run_cmd(d9__cmd_summary, argv, out, err), D9_EXIT_DAMAGED);
	char *e = slurp(err), *o = slurp(out);
	T_EQ(count_lines(e), 2);
	T_ASSERT(strstr(o, "\"truncated_segments\":1,\"corrupt_segments\":1,"));
	T_ASSERT(strstr(o, "\"warnings\":[\""));
	free(e);
	free(o);
}

TEST(bad_input_exit_codes)
{
	char *d = tmpdir(), p[256], out[128], err[128];

	snprintf(out, sizeof(out), "%s/out", d);
	snprintf(err, sizeof(err), "%s/err", d);
	snprintf(p, sizeof(p), "%s/empty.bin", d);
	FILE *f = fopen(p, "w");
	fclose(f);
	char *a1[] = { "summary", p, NULL };
	T_EQ(run_cmd(d9__cmd_summary, a1, out, err), D9_EXIT_NO_TRACE);
	char *e = slurp(err);
	T_ASSERT(strstr(e, "empty.bin: truncated"));
	free(e);
	char *a2[] = { "summary", "/nonexistent/x.bin", NULL };
	T_EQ(run_cmd(d9__cmd_summary, a2, out, err), D9_EXIT_NO_TRACE);
	e = slurp(err);
	T_ASSERT(strstr(e, "/nonexistent/x.bin: No such file or directory"));
	free(e);
	write_main(d, "good.bin");
	char good[256];
	snprintf(good, sizeof(good), "%s/good.bin", d);
	char *a3[] = { "polls", good, "/nonexistent/y.bin", NULL };
	T_EQ(run_cmd(d9__cmd_polls, a3, out, err), D9_EXIT_DAMAGED);
	char *a4[] = { "summary", "--top", "x", good, NULL };
	T_EQ(run_cmd(d9__cmd_summary, a4, out, err), D9_EXIT_USAGE);
	char *a5[] = { "summary", NULL };
	T_EQ(run_cmd(d9__cmd_summary, a5, out, err), D9_EXIT_USAGE);
	char *a6[] = { "summary", "--from", "yesterday", good, NULL };
	T_EQ(run_cmd(d9__cmd_summary, a6, out, err), D9_EXIT_USAGE);
}

TEST(histogram_exact_then_within_one_percent)
{
	struct d9__hist h;

	memset(&h, 0, sizeof(h));
	for (uint64_t v = 1000; v >= 1; v--)
		d9__hist_add(&h, v * 7);
	T_EQ(d9__hist_pct(&h, 50), 3500);
	T_EQ(d9__hist_pct(&h, 99), 6930);
	T_EQ(d9__hist_pct(&h, 100), 7000);
	for (uint64_t v = 1001; v <= 100000; v++)
		d9__hist_add(&h, v * 7);
	T_ASSERT(h.raw == NULL); /* bucketed now */
	double p50 = (double)d9__hist_pct(&h, 50), p99 = (double)d9__hist_pct(&h, 99);
	if (p50 < 350000 * 0.99 || p50 > 350000 * 1.01 || p99 < 693000 * 0.99 || p99 > 693000 * 1.01)
		T_FAIL("p50 %.0f (want 350000), p99 %.0f (want 693000), beyond 1%%", p50, p99);
	T_EQ(h.max, 700000);
	T_EQ(h.n, 100000);
	/* huge values stay within 1% too */
	struct d9__hist g;
	memset(&g, 0, sizeof(g));
	for (int i = 0; i < 5000; i++)
		d9__hist_add(&g, (uint64_t)1 << 50);
	double v = (double)d9__hist_pct(&g, 50);
	T_ASSERT(v >= 0.99 * (double)(1ull << 50) && v <= 1.01 * (double)(1ull << 50));
	d9__hist_free(&h);
	d9__hist_free(&g);
}

TEST(parse_durations_and_times)
{
	int64_t ns;
	struct d9__when w;

	T_EQ(d9__parse_duration("250ms", &ns), 0);
	T_EQ(ns, 250000000);
	T_EQ(d9__parse_duration("1.5s", &ns), 0);
	T_EQ(ns, 1500000000);
	T_EQ(d9__parse_duration("20us", &ns), 0);
	T_EQ(ns, 20000);
	T_EQ(d9__parse_duration("2m", &ns), 0);
	T_EQ(ns, 120000000000);
	T_EQ(d9__parse_duration("3", &ns), 0);
	T_EQ(ns, 3000000000);
	T_ASSERT(d9__parse_duration("-1ms", &ns) != 0);
	T_ASSERT(d9__parse_duration("5 parsecs", &ns) != 0);
	T_ASSERT(d9__parse_duration("", &ns) != 0);
	T_EQ(d9__parse_when("1.5s", &w), 0);
	T_EQ(w.absolute, 0);
	T_EQ(w.ns, 1500000000);
	T_EQ(d9__parse_when("1763790000.25", &w), 0);
	T_EQ(w.absolute, 1);
	T_EQ(w.ns, 1763790000250000000);
	T_EQ(d9__parse_when("2026-11-22T05:40:00Z", &w), 0);
	T_EQ(w.absolute, 1);
	T_EQ(w.ns, 1795326000000000000);
	T_EQ(d9__parse_when("2026-11-22T05:40:00.5Z", &w), 0);
	T_EQ(w.ns, 1795326000500000000);
	T_ASSERT(d9__parse_when("2026-11-22T05:40", &w) != 0);
	T_ASSERT(d9__parse_when("@soon", &w) != 0);
}

/* ---- symbolization (Module definitions) -------------------------------------------------- */
/* nm's address of a function of build/tests/st-http, or 0. */
static uint64_t nm_addr(const char *binary, const char *fn)
{
	char cmd[512], line[512];
	uint64_t a = 0;

	snprintf(cmd, sizeof(cmd), "nm --defined-only '%s' 2>/dev/null", binary);
	FILE *f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char name[256], type;
		unsigned long long v;
		if (sscanf(line, "%llx %c %255s", &v, &type, name) == 3 && !strcmp(name, fn))
			a = v;
	}
	pclose(f);
	return a;
}

/* The address of section sec of binary, or 0. */
static uint64_t section_addr(const char *binary, const char *sec)
{
	char cmd[512], line[512];
	uint64_t a = 0;

	snprintf(cmd, sizeof(cmd), "readelf -SW '%s' 2>/dev/null", binary);
	FILE *f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char name[64], type[64];
		unsigned long long v;
		const char *p = strchr(line, ']');
		if (p && sscanf(p + 1, "%63s %63s %llx", name, type, &v) == 3 && !strcmp(name, sec))
			a = v;
	}
	pclose(f);
	return a;
}

/* Locations in four modules: the test server's binary (found, right build), the same file
 * recorded with another build id, a library missing on this machine, and a data mapping of the
 * binary (file offset 0x4c90), where no function symbol covers the address. */
TEST(symbols_from_module_map)
{
	char bin[4096];
	if (!realpath("build/tests/st-http", bin))
		T_SKIP("build/tests/st-http is not built");
	uint64_t off = nm_addr(bin, "handle_burn"), off2 = nm_addr(bin, "serve_conn");
	if (!off || !off2)
		T_SKIP("nm finds no handle_burn/serve_conn in %s", bin);
	void *h = dlopen("libdw.so.1", RTLD_NOW);
	if (!h)
		T_SKIP("libdw.so.1 is not installed");
	dlclose(h);
	char *d = tmpdir();
	struct gen g;
	struct d9__trace t;
	struct sum s;
	const uint64_t base = 0x555555554000ull, other = 0x565656560000ull, lib = 0x7f0000000000ull;
	const uint8_t wrong_id[4] = { 0xde, 0xad, 0xbe, 0xef };

	gen_begin(&g, 500, 0);
	defs_open(&g);
	str(&g, 1, bin);
	str(&g, 2, "/nonexistent/libgone.so.1");
	d9_def_module(&g.w, 1, 1, base, base + 0x100000, 0, NULL, 0);
	d9_def_module(&g.w, 2, 1, other, other + 0x100000, 0, wrong_id, sizeof(wrong_id));
	d9_def_module(&g.w, 3, 2, lib, lib + 0x10000, 0x1000, NULL, 0);
	d9_def_location(&g.w, 1, base + off, 0, 1, 0);
	d9_def_location(&g.w, 2, other + off, 0, 2, 0);
	d9_def_location(&g.w, 3, lib + 0x234, 0, 3, 0);
	d9_def_location(&g.w, 4, 0x1234, 0, 0, 0);
	const uint64_t rw = 0x600000000000ull;
	d9_def_module(&g.w, 4, 1, rw, rw + 0x1000, 0x4c90, NULL, 0);
	d9_def_location(&g.w, 5, rw + 0x10, 0, 4, 0);
	/* a stack of return addresses: the first byte after a call in serve_conn is still in it */
	uint64_t plt = section_addr(bin, ".plt");
	if (!plt)
		T_SKIP("readelf finds no .plt in %s", bin);
	/* ... and a return address in the second stub of the procedure linkage table */
	uint64_t frames[4] = { base + off2 + 1, lib + 0x10, 0x99, base + plt + 0x19 };
	d9_def_stack(&g.w, 1, frames, 4);
	str(&g, 3, "usleep");
	defs_close(&g);
	struct d9_enc *e = ev_open(&g, 500, 1);
	d9_enc_poll_start(e, B + 0, 5, 1);
	d9_enc_poll_end(e, B + 10, 5);
	d9_enc_poll_start(e, B + 20, 6, 2);
	d9_enc_poll_end(e, B + 30, 6);
	d9_enc_poll_start(e, B + 40, 7, 3);
	d9_enc_poll_end(e, B + 50, 7);
	d9_enc_poll_start(e, B + 60, 8, 4);
	d9_enc_poll_end(e, B + 70, 8);
	d9_enc_poll_start(e, B + 80, 9, 5);
	d9_enc_poll_end(e, B + 90, 9);
	d9_enc_blocking_call(e, B + 100, 0, 3, D9_FD_NONE, 5000, 1);
	ev_close(&g);
	gen_write(&g, d, "s.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(t.nlocs, 5);
	const char *n0 = t.locs[0]->name;
	if (strncmp(n0, "handle_burn (st-http.c:", 23))
		T_FAIL("location in the server binary named '%s', want 'handle_burn (st-http.c:N)'", n0);
	char want[64];
	snprintf(want, sizeof(want), "st-http+0x%" PRIx64, off);
	if (strcmp(t.locs[1]->name, want))
		T_FAIL("location in another build named '%s', want '%s'", t.locs[1]->name, want);
	if (strcmp(t.locs[2]->name, "libgone.so.1+0x1234"))
		T_FAIL("location in a missing library named '%s'", t.locs[2]->name);
	T_ASSERT(!strcmp(t.locs[3]->name, "0x1234"));
	if (strcmp(t.locs[4]->name, "st-http+0x4ca0"))
		T_FAIL("location in a misplaced mapping named '%s', want 'st-http+0x4ca0'",
			t.locs[4]->name);
	T_EQ(s.nbl, 1);
	char b0[64], b1[64], b2[64];
	const char *f0 = d9__frame_name(&t, s.bl[0]->stack, 0, b0, sizeof(b0));
	const char *f1 = d9__frame_name(&t, s.bl[0]->stack, 1, b1, sizeof(b1));
	const char *f2 = d9__frame_name(&t, s.bl[0]->stack, 2, b2, sizeof(b2));
	if (strncmp(f0, "serve_conn (st-http.c:", 22))
		T_FAIL("frame 0 named '%s'", f0);
	if (strcmp(f1, "libgone.so.1+0x1010") || strcmp(f2, "0x99"))
		T_FAIL("frames 1, 2 named '%s', '%s'", f1, f2);
	const char *f3 = d9__frame_name(&t, s.bl[0]->stack, 3, b2, sizeof(b2));
	if (strcmp(f3, "st-http@plt"))
		T_FAIL("frame in the PLT named '%s', want 'st-http@plt'", f3);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

/* ---- CPU hot spots (summary) ----------------------------------------------------------- */
/* A frame name's function: its line goes, its file stays; other names are kept as they are. */
TEST(hotspot_function_names)
{
	struct d9__trace t;
	const char *cases[][2] = {
		{ "serve_conn (st-http.c:496)", "serve_conn (st-http.c)" },
		{ "operator() (a.cc:3)", "operator() (a.cc)" },
		{ "f (dir:x.c:12)", "f (dir:x.c)" },
		{ "serve_conn", "serve_conn" },
		{ "st-http+0x4ca0", "st-http+0x4ca0" },
		{ "0x99", "0x99" },
		{ "g (x.c)", "g (x.c)" },
		{ "h (:5)", "h (:5)" },
		{ "(:5)", "(:5)" },
		{ "k(a.c:5)", "k(a.c:5)" },
		{ "m (a.c:)", "m (a.c:)" },
	};

	memset(&t, 0, sizeof(t));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = function_of(&t, cases[i][0]);
		if (strcmp(got, cases[i][1]))
			T_FAIL("function_of(\"%s\") = \"%s\", want \"%s\"", cases[i][0], got, cases[i][1]);
		T_ASSERT(got == d9__trace_intern(&t, cases[i][1], strlen(cases[i][1])));
	}
	d9__trace_close(&t);
}

/* Hot spots with real names and an inlined frame: in build/tests/st-http, dispatch is inlined
 * into serve_conn. Stacks (innermost first) A = { handle_block, X } x3 and B = { X } x2 on-CPU,
 * where X is a return address in serve_conn inside the inlined dispatch (found by asking the
 * symbolizer), so X expands to dispatch < serve_conn. Self goes to the innermost function of
 * the innermost frame (for B, the inlined dispatch), total to every function of the stack. */
TEST(hotspots_inlined_frames)
{
	char bin[4096];
	if (!realpath("build/tests/st-http", bin))
		T_SKIP("build/tests/st-http is not built");
	uint64_t hb = nm_addr(bin, "handle_block"), sc = nm_addr(bin, "serve_conn");
	if (!hb || !sc)
		T_SKIP("nm finds no handle_block/serve_conn in %s", bin);
	void *h = dlopen("libdw.so.1", RTLD_NOW);
	if (!h)
		T_SKIP("libdw.so.1 is not installed");
	dlclose(h);
	char *d = tmpdir(), d2[256];
	struct gen g;
	struct d9__trace t;
	struct sum s;
	const uint64_t base = 0x555555554000ull;
	const char *names[D9__MAX_INLINE];

	/* pass 1: a trace with the module map only, to find X */
	gen_begin(&g, 500, 0);
	defs_open(&g);
	str(&g, 1, bin);
	d9_def_module(&g.w, 1, 1, base, base + 0x100000, 0, NULL, 0);
	defs_close(&g);
	struct d9_enc *e = ev_open(&g, 500, 1);
	d9_enc_poll_start(e, B + 0, 5, 0);
	d9_enc_poll_end(e, B + 10, 5);
	ev_close(&g);
	gen_write(&g, d, "m.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(t.nprocs, 1);
	uint64_t x = 0;
	for (uint64_t k = 1; k < 8192 && !x; k++) {
		size_t n = d9__symbolize_inline(&t, t.procs[0], base + sc + k, 1, names, D9__MAX_INLINE);
		if (n == 2 && !strncmp(names[0], "dispatch (st-http.c:", 20) &&
		    !strncmp(names[1], "serve_conn (st-http.c:", 22))
			x = base + sc + k;
	}
	size_t n = d9__symbolize_inline(&t, t.procs[0], base + hb + 1, 1, names, D9__MAX_INLINE);
	int hb_ok = n == 1 && !strncmp(names[0], "handle_block (st-http.c:", 24);
	d9__sum_free(&s);
	d9__trace_close(&t);
	if (!x)
		T_SKIP("no return address in serve_conn symbolizes as dispatch (inlined) < serve_conn");
	if (!hb_ok)
		T_FAIL("handle_block's first byte does not symbolize as 'handle_block (st-http.c:N)'");

	/* pass 2: the samples */
	snprintf(d2, sizeof(d2), "%s/2", d);
	T_EQ(mkdir(d2, 0700), 0);
	uint64_t a[2] = { base + hb + 1, x }, b[1] = { x };
	gen_begin(&g, 500, 0);
	defs_open(&g);
	str(&g, 1, bin);
	d9_def_module(&g.w, 1, 1, base, base + 0x100000, 0, NULL, 0);
	d9_def_stack(&g.w, 1, a, 2);
	d9_def_stack(&g.w, 2, b, 1);
	defs_close(&g);
	e = ev_open(&g, 500, 1);
	d9_enc_poll_start(e, B + 0, 5, 0);
	for (int i = 0; i < 3; i++)
		d9_enc_cpu_sample(e, B + 10 + (uint64_t)i, 5, D9_CPU_ON, 1);
	for (int i = 0; i < 2; i++)
		d9_enc_cpu_sample(e, B + 20 + (uint64_t)i, 5, D9_CPU_ON, 2);
	d9_enc_poll_end(e, B + 100, 5);
	ev_close(&g);
	gen_write(&g, d2, "s.bin");
	summarise(&t, &s, d2, 10, 0, NULL, NULL);
	T_EQ(s.cpu_on, 5);
	T_EQ(s.cpu_off, 0);
	struct fnstat **fa;
	size_t nfa = d9__sum_functions(&s, s.stack_on, s.stack_on_ns, 0, &fa);
	const char *want[] = { "handle_block (st-http.c)", "dispatch (st-http.c)",
		"serve_conn (st-http.c)" };
	const uint64_t self[] = { 3, 2, 0 }, total[] = { 3, 5, 5 };
	T_EQ(nfa, 3);
	for (size_t i = 0; i < 3; i++)
		if (strcmp(fa[i]->name, want[i]) || fa[i]->self != self[i] || fa[i]->total != total[i])
			T_FAIL("hot spot %zu: %s self %" PRIu64 " total %" PRIu64 ", want %s %" PRIu64
				" %" PRIu64, i, fa[i]->name, fa[i]->self, fa[i]->total, want[i], self[i],
				total[i]);
	d9__sum_functions_free(fa, nfa);
	/* the poll's hottest stack is A, printed with its inlined frame expanded */
	T_EQ(s.nlp, 1);
	T_EQ(s.lp[0].nhot, 2);
	T_EQ(s.lp[0].hot[0].samples, 3);
	T_EQ(s.lp[0].hot[0].stack->n, 2);
	T_EQ(s.lp[0].hot[1].samples, 2);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

/* A stack is judged against every module its process defines, wherever in the trace: a module
 * the writer defines after a sample that ran in it (a JIT region it finds at its next read of
 * /proc/self/maps) leaves that stack valid; a frame in no module, and a repeated frame, do not. */
TEST(stacks_judged_against_all_modules)
{
	char *d = tmpdir();
	struct gen g;
	struct d9__trace t;
	struct sum s;
	const uint64_t lib = 0x7f1000000000ull, jit = 0x7f2000001000ull;
	uint64_t a[2] = { jit + 0x10, lib + 0x20 }, b[1] = { 0x1234 }, c[2] = { lib + 0x30, lib + 0x30 };

	gen_begin(&g, 500, 0);
	defs_open(&g);
	str(&g, 1, "/usr/lib/libx.so");
	str(&g, 2, "[anon]");
	d9_def_module(&g.w, 1, 1, lib, lib + 0x10000, 0, NULL, 0);
	d9_def_stack(&g.w, 1, a, 2);
	d9_def_stack(&g.w, 2, b, 1);
	d9_def_stack(&g.w, 3, c, 2);
	defs_close(&g);
	struct d9_enc *e = ev_open(&g, 500, 1);
	d9_enc_cpu_sample(e, B + 10, 0, D9_CPU_ON, 1); /* its first frame's module comes later */
	d9_enc_cpu_sample(e, B + 11, 0, D9_CPU_ON, 2); /* no module: invalid */
	d9_enc_cpu_sample(e, B + 12, 0, D9_CPU_OFF, 2);
	d9_enc_cpu_sample(e, B + 13, 0, D9_CPU_ON, 3); /* a repeated frame: invalid */
	ev_close(&g);
	defs_open(&g);
	d9_def_module(&g.w, 2, 2, jit, jit + 0x1000, 0, NULL, 0);
	defs_close(&g);
	e = ev_open(&g, 500, 1);
	d9_enc_cpu_sample(e, B + 20, 0, D9_CPU_ON, 1);
	ev_close(&g);
	gen_write(&g, d, "j.bin");
	summarise(&t, &s, d, 10, 0, NULL, NULL);
	T_EQ(s.cpu_on, 4);
	T_EQ(s.cpu_off, 1);
	T_EQ(s.st_invalid, 3);
	d9__sum_free(&s);
	d9__trace_close(&t);
}

int main(int argc, char **argv)
{
	char cmd[128];

	snprintf(top_dir, sizeof(top_dir), "%s/d9-test-analyze-XXXXXX",
		getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(top_dir)) {
		perror("mkdtemp");
		return 1;
	}
	int rc = t_main(argc, argv);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top_dir);
	return rc;
}
