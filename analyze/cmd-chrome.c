/* cmd-chrome.c: `d9-analyze chrome`: the trace as Chrome Trace Event JSON (the object form), for
 * the Perfetto UI and chrome://tracing: a process per traced pid, a track per thread, poll, park
 * and blocking-call slices, wake -> poll flow arrows, CPU samples and drops as instants, the run
 * queue as a counter. Streaming: a slice is written when it ends; only the open poll and park of
 * each thread and the wakes and polls not yet paired in time order (wakes.c) are kept.
 * Documented in README.md, "chrome". */
#include "analyze.h"
#include "api-events.h"
#include "d9-format.h"
#include "json.h"
#include "trace.h"
#include "wakes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The open slices of one thread. */
struct chrome_thread {
	int named; /* thread_name metadata written */
	struct d9__open poll, park; /* starts and gap marks (trace.h) */
	uint64_t co; /* the open poll's coroutine */
	const struct d9__loc *loc;
	int64_t park_timeout;
	uint64_t park_call;
	/* Wakes at the very end of their slice: the clock's tick can hold a Wake and the PollEnd
	 * after it. A flow start at a slice's end time is not inside it, and Perfetto binds it to
	 * the innermost slice open on the track, where a slice that ends at that time is popped
	 * as soon as another begins in the same tick (the woken's poll, then, would be the
	 * arrow's source). Such a flow gets the 1 ns "wake" slice that untagged ones get.
	 * last_wake: the latest tagged Wake's time; edge: the latest few of those found at a
	 * slice's end (their flows come when the woken polls). */
	int64_t last_wake, edge[4];
	unsigned nedge;
};

struct chrome_proc {
	int named; /* process_name metadata written */
};

struct chrome {
	struct d9__trace *t;
	FILE *f;
	long pid; /* -1: any */
	struct chrome_thread *th; /* by thread idx */
	size_t nth;
	struct chrome_proc *procs; /* by process idx */
	size_t nprocs;
	uint64_t nevents, next_flow;
	struct d9__wakes wakes; /* wake -> poll pairs in time order; tag: a slice was open at the
				 * wake on the waker's thread, so the arrow starts there */
	int oom;
};

/* "ts" in µs from the trace start, with ns precision: "ts":123.456 */
static void put_ts(FILE *f, const char *key, int64_t rel_ns)
{
	uint64_t a = rel_ns < 0 ? -(uint64_t)rel_ns : (uint64_t)rel_ns;

	fprintf(f, ",\"%s\":%s%" PRIu64 ".%03u", key, rel_ns < 0 ? "-" : "", a / 1000,
		(unsigned)(a % 1000));
}

/* a - b, saturated: times from hostile input must not overflow */
static int64_t sub_sat(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* Starts one trace event: the separator, then {"ph":..,"pid":..,"tid":..,"ts":.. */
static void begin(struct chrome *c, const char *ph, uint32_t pid, uint32_t tid, int64_t real_ns)
{
	FILE *f = c->f;

	fputs(c->nevents++ ? ",\n" : "\n", f);
	fprintf(f, "{\"ph\":\"%s\",\"pid\":%u,\"tid\":%u", ph, pid, tid);
	put_ts(f, "ts", sub_sat(real_ns, c->t->start_real));
}

static void put_name(FILE *f, const char *name)
{
	fputs(",\"name\":", f);
	d9__json_cstr(f, name);
}

/* A metadata event (process_name, thread_name, thread_sort_index) of one string or number. */
static void meta(struct chrome *c, const char *name, uint32_t pid, uint32_t tid, const char *key,
	const char *sval, long nval)
{
	FILE *f = c->f;

	fputs(c->nevents++ ? ",\n" : "\n", f);
	fprintf(f, "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",\"args\":{\"%s\":", pid,
		tid, name, key);
	if (sval)
		d9__json_cstr(f, sval);
	else
		fprintf(f, "%ld", nval);
	fputs("}}", f);
}

static void put_loc(FILE *f, const struct d9__loc *l)
{
	fputs(",\"location\":", f);
	if (l)
		d9__json_cstr(f, l->name);
	else
		fputs("null", f);
}

/* The state of ev's thread and process, with their metadata written on first use; NULL when
 * out of memory. */
static struct chrome_thread *thread_of(struct chrome *c, const struct d9__ev *ev)
{
	const struct d9__thread *th = ev->th;
	struct chrome_proc *p = ev->proc->idx < c->nprocs ? &c->procs[ev->proc->idx] : NULL;
	char buf[512];

	if (th->idx >= c->nth) {
		size_t n = th->idx + 1 > c->nth * 2 ? th->idx + 1 : c->nth * 2;
		struct chrome_thread *a = realloc(c->th, n * sizeof(*a));
		if (!a) {
			c->oom = 1;
			return NULL;
		}
		memset(a + c->nth, 0, (n - c->nth) * sizeof(*a));
		c->th = a;
		c->nth = n;
	}
	if (p && !p->named) {
		p->named = 1;
		snprintf(buf, sizeof(buf), "%s (pid %u)", ev->proc->process && *ev->proc->process ?
			ev->proc->process : "?", ev->proc->pid);
		meta(c, "process_name", ev->proc->pid, 0, "name", buf, 0);
	}
	struct chrome_thread *ct = &c->th[th->idx];
	if (!ct->named) {
		ct->named = 1;
		if (th->worker)
			snprintf(buf, sizeof(buf), "worker %u%s%s", th->worker, *th->name ? " " : "",
				th->name);
		else
			snprintf(buf, sizeof(buf), "thread %u%s%s", th->tid, *th->name ? " " : "",
				th->name);
		meta(c, "thread_name", ev->proc->pid, th->tid, "name", buf, 0);
		/* workers first, by id; other threads after them */
		meta(c, "thread_sort_index", ev->proc->pid, th->tid, "sort_index", NULL,
			th->worker ? (long)th->worker : 1000000L + (long)th->idx);
	}
	return ct;
}

/* A written slice of ct ends at end_real: a tagged Wake at that time is at its edge. */
static void note_edge(struct chrome_thread *ct, int64_t end_real)
{
	if (ct->last_wake == end_real && (!ct->nedge || ct->edge[(ct->nedge - 1) % 4] != end_real))
		ct->edge[ct->nedge++ % 4] = end_real;
}

/* The open poll ends at ev; a poll with a gap inside (its length unknown) is not written. */
static void end_poll(struct chrome *c, const struct d9__ev *ev, struct chrome_thread *ct)
{
	FILE *f = c->f;
	uint64_t d;

	if (d9__pair_close(&ct->poll, ev, &d) != D9__PAIR_OK)
		return;
	note_edge(ct, ev->real_ns);
	begin(c, "X", ev->proc->pid, ev->th->tid, ct->poll.real_ns);
	put_ts(f, "dur", d > INT64_MAX ? INT64_MAX : (int64_t)d);
	put_name(f, ct->loc ? ct->loc->name : "(unknown)");
	fprintf(f, ",\"cat\":\"poll\",\"args\":{\"coroutine\":%" PRIu64, ct->co);
	put_loc(f, ct->loc);
	fputs("}}", f);
}

/* A PollStart settled in time order (wakes.c): the wake -> poll flow, when a wake preceded it
 * with no gap between (else its first poll after the wake may be lost: no arrow). */
static void flow(void *ctx, const struct d9__wake_pair *p)
{
	struct chrome *c = ctx;
	const char *kind = p->kind <= D9_WAKE_MAX ? d9_wake_kind_name(p->kind) : "unknown";
	uint64_t id;

	if (p->result != D9__PAIR_OK)
		return;
	id = ++c->next_flow;
	int at_edge = 0;
	if (p->wake_tag && p->wake_th_idx < c->nth) {
		const struct chrome_thread *ct = &c->th[p->wake_th_idx];
		for (unsigned i = 0; i < 4 && i < ct->nedge; i++)
			at_edge |= ct->edge[i] == p->wake_real_ns;
	}
	if (!p->wake_tag || at_edge) {
		/* a flow starts inside a slice: outside polls and parks, a 1 ns "wake" slice */
		begin(c, "X", p->proc->pid, p->wake_tid, p->wake_real_ns);
		fprintf(c->f, ",\"dur\":0.001,\"name\":\"wake (%s)\",\"cat\":\"wake\""
			",\"args\":{\"woken\":%" PRIu64 "}}", kind, p->co);
	}
	begin(c, "s", p->proc->pid, p->wake_tid, p->wake_real_ns);
	fprintf(c->f, ",\"name\":\"wake\",\"cat\":\"wake\",\"id\":%" PRIu64
		",\"args\":{\"kind\":\"%s\",\"woken\":%" PRIu64 "}}", id, kind, p->co);
	begin(c, "f", p->proc->pid, p->poll_tid, p->poll_real_ns);
	fprintf(c->f, ",\"name\":\"wake\",\"cat\":\"wake\",\"id\":%" PRIu64 ",\"bp\":\"e\"}", id);
}

static void chrome_on_event(void *ctx, const struct d9__ev *ev)
{
	struct chrome *c = ctx;
	FILE *f = c->f;
	struct chrome_thread *ct;
	char name[96];

	if (c->pid >= 0 && ev->proc->pid != c->pid)
		return;
	if (!ev->th) {
		if (ev->type == D9__EV_PROCESS_END && ev->proc->idx < c->nprocs) {
			/* polls and parks still open at the end are not written (as in `polls`) */
			for (size_t i = 0; i < c->nth && i < c->t->nthreads; i++)
				if (c->t->threads[i]->proc == ev->proc)
					c->th[i].poll.open = c->th[i].park.open = 0;
			d9__wakes_event(&c->wakes, ev, 0); /* the flows still waiting */
		}
		return;
	}
	if (ev->proc->idx >= c->nprocs || !(ct = thread_of(c, ev)))
		return;
	switch (ev->type) {
	case D9_EV_POLL_START:
		end_poll(c, ev, ct); /* a PollStart without PollEnd ends the poll */
		d9__wakes_event(&c->wakes, ev, 0); /* its flow: flow() */
		d9__pair_open(&ct->poll, ev);
		ct->co = ev->co;
		ct->loc = ev->loc;
		break;
	case D9_EV_POLL_END:
		end_poll(c, ev, ct);
		break;
	case D9_EV_PARK:
		d9__pair_open(&ct->park, ev);
		ct->park_call = ev->kind;
		ct->park_timeout = ev->value;
		break;
	case D9_EV_UNPARK: {
		uint64_t d;
		if (d9__pair_close(&ct->park, ev, &d) != D9__PAIR_OK)
			break; /* no Park, or a gap inside: its length is unknown */
		note_edge(ct, ev->real_ns);
		begin(c, "X", ev->proc->pid, ev->th->tid, ct->park.real_ns);
		put_ts(f, "dur", d > INT64_MAX ? INT64_MAX : (int64_t)d);
		snprintf(name, sizeof(name), "park (%s)", d9_wait_call_name(ct->park_call));
		put_name(f, name);
		fprintf(f, ",\"cat\":\"park\",\"args\":{\"timeout_us\":%" PRId64 ",\"ready\":%" PRId64
			"}}", ct->park_timeout, ev->value);
		break;
	}
	case D9_EV_WAKE: {
		/* the tag: a slice that will be written is open (one with a gap inside is not) */
		int tag = (ct->poll.open && ct->poll.mark == d9__gap_mark(ev->th)) ||
			(ct->park.open && ct->park.mark == d9__gap_mark(ev->th));
		if (tag)
			ct->last_wake = ev->real_ns;
		d9__wakes_event(&c->wakes, ev, (uint8_t)tag);
		break;
	}
	case D9_EV_BLOCKING_CALL: {
		/* the event time is when the call returned */
		int64_t d = ev->count > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)ev->count;
		begin(c, "X", ev->proc->pid, ev->th->tid, sub_sat(ev->real_ns, d));
		put_ts(f, "dur", d);
		put_name(f, ev->call);
		fprintf(f, ",\"cat\":\"blocking\",\"args\":{\"coroutine\":%" PRIu64
			",\"fd_kind\":\"%s\",\"duration_ns\":%" PRIu64 ",\"stack\":", ev->co,
			d9_fd_kind_name(ev->kind), ev->count);
		d9__json_stack(f, c->t, ev->stack);
		fputs("}}", f);
		break;
	}
	case D9_EV_CPU_SAMPLE: {
		const char *src = ev->kind == D9_CPU_ON ? "on_cpu" : ev->kind == D9_CPU_OFF ?
			"off_cpu" : "unknown";
		begin(c, "i", ev->proc->pid, ev->th->tid, ev->real_ns);
		snprintf(name, sizeof(name), "cpu sample (%s)", src);
		put_name(f, name);
		fprintf(f, ",\"s\":\"t\",\"cat\":\"cpu\",\"args\":{\"coroutine\":%" PRIu64
			",\"source\":\"%s\",\"stack\":", ev->co, src);
		d9__json_stack(f, c->t, ev->stack);
		fputs("}}", f);
		break;
	}
	case D9_EV_QUEUE_SAMPLE:
		/* one series per worker: the counter is per process */
		begin(c, "C", ev->proc->pid, ev->th->tid, ev->real_ns);
		if (ev->th->worker)
			snprintf(name, sizeof(name), "worker %u", ev->th->worker);
		else
			snprintf(name, sizeof(name), "thread %u", ev->th->tid);
		fprintf(f, ",\"name\":\"run queue\",\"args\":{\"%s\":%" PRIu64 "}}", name, ev->count);
		break;
	case D9_EV_DROPPED:
		begin(c, "i", ev->proc->pid, ev->th->tid, ev->real_ns);
		snprintf(name, sizeof(name), "dropped (%s)", d9_drop_reason_name(ev->kind));
		put_name(f, name);
		fprintf(f, ",\"s\":\"t\",\"cat\":\"dropped\",\"args\":{\"count\":%" PRIu64
			",\"reason\":\"%s\"}}", ev->count, d9_drop_reason_name(ev->kind));
		break;
	case D9_EV_VALUE:
		/* application values (d9.h): a counter track per name and process */
		begin(c, "C", ev->proc->pid, ev->th->tid, ev->real_ns);
		put_name(f, ev->name);
		fputs(",\"cat\":\"value\",\"args\":{\"value\":", f);
		d9__api_json_value(f, ev);
		fputs("}}", f);
		break;
	case D9_EV_MARK:
	case D9_EV_CUSTOM:
		/* marks and custom events: instants on their thread, fields as args */
		begin(c, "i", ev->proc->pid, ev->th->tid, ev->real_ns);
		put_name(f, d9__api_name(ev));
		fprintf(f, ",\"s\":\"t\",\"cat\":\"%s\",\"args\":",
			ev->type == D9_EV_MARK ? "mark" : "custom");
		if (ev->type == D9_EV_CUSTOM)
			d9__api_json_fields(f, ev);
		else
			fputs("{}", f);
		fputc('}', f);
		break;
	default:
		break;
	}
	if (ev->type != D9_EV_POLL_START && ev->type != D9_EV_WAKE)
		d9__wakes_event(&c->wakes, ev, 0); /* moves its thread's time on; Spawn, Exit */
	c->oom |= c->wakes.oom;
}

static void chrome_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze chrome [OPTIONS] TRACE...\n\n"
		"Writes Chrome Trace Event JSON for the Perfetto UI (ui.perfetto.dev) and\n"
		"chrome://tracing: a process per traced pid, a track per thread (named after the\n"
		"worker id and thread name), poll slices named by spawn location, parks, blocking\n"
		"calls, wake -> poll flow arrows, CPU samples and drops as instants, the run queue as\n"
		"a counter. Times are us from the trace start.\n\n"
		"options:\n"
		"  -o FILE           write to FILE (default: stdout)\n"
		"  --pid N           only events of process N\n"
		"  --from WHEN       ignore events before WHEN\n"
		"  --to WHEN         ignore events from WHEN on\n"
		"  -h, --help        this text\n\n"
		"WHEN: as in 'd9-analyze summary --help'.\n"
		"exit status: 0 ok, 1 the output could not be written, 2 usage, 3 no readable trace,\n"
		"4 output written but input damaged\n");
}

int d9__cmd_chrome(int argc, char **argv)
{
	struct chrome c;
	struct d9__trace t;
	int nargs = 0, rc;
	const char *v, *out = NULL;
	char **args = calloc((size_t)argc + 1, sizeof(*args));

	if (!args)
		return D9_EXIT_USAGE;
	memset(&t, 0, sizeof(t));
	memset(&c, 0, sizeof(c));
	c.t = &t;
	c.pid = -1;
	d9__wakes_init(&c.wakes, flow, &c);
	for (int i = 1; i < argc; i++) {
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			chrome_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if ((r = d9__opt(argc, argv, &i, "-o", &v)) == 1) {
			out = v;
		} else if (r == 0 && (r = d9__opt_window(argc, argv, &i, &t, &c.pid)) == 1) {
			/* --pid, --from, --to */
		} else if (r == 0 && d9__opt_arg("chrome", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (d9__opt_traces("chrome", nargs))
		goto usage;
	if ((rc = d9__trace_start(&t, args, nargs)) != 0)
		return rc;
	c.f = out && strcmp(out, "-") ? fopen(out, "w") : stdout;
	if (!c.f) {
		fprintf(stderr, "d9-analyze: chrome: cannot write '%s': %s\n", out, strerror(errno));
		d9__trace_close(&t);
		return 1;
	}
	c.nprocs = t.nprocs;
	c.procs = calloc(t.nprocs ? t.nprocs : 1, sizeof(*c.procs));
	if (!c.procs) {
		c.oom = 1;
		c.nprocs = 0;
	}
	fputs("{\"traceEvents\":[", c.f);
	if (d9__trace_run(&t, chrome_on_event, &c) || c.oom)
		fprintf(stderr, "d9-analyze: out of memory: the output is incomplete\n");
	fputs("\n],\"displayTimeUnit\":\"ns\"}\n", c.f);
	rc = d9__trace_exit_code(&t);
	if (c.f == stdout ? fflush(c.f) != 0 || ferror(c.f) : (ferror(c.f) | fclose(c.f)) != 0) {
		fprintf(stderr, "d9-analyze: chrome: error writing '%s'\n", out ? out : "stdout");
		rc = 1;
	}
	d9__wakes_free(&c.wakes);
	free(c.procs);
	free(c.th);
	d9__trace_close(&t);
	return rc;
usage:
	free(args);
	chrome_help(stderr);
	return D9_EXIT_USAGE;
}
