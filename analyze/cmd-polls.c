/* cmd-polls.c: `d9-analyze polls`: one line per poll (a run of a coroutine on a worker), with
 * filters, as text or JSON lines. Streaming: a poll is printed at its PollEnd, so lines come per
 * process and, inside a segment, in chunk order (each thread's polls in time order). In generic
 * mode (as summary decides it: no poll but loop turns) the loop turns, Unpark to the next Park,
 * are listed instead, with the location "(loop turn)"; telling the modes apart costs a first
 * pass that stops at the first complete poll (so a full pass only for generic traces). */
#include "analyze.h"
#include "d9-format.h"
#include "dumps.h"
#include "json.h"
#include "trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct open_poll {
	struct d9__open o; /* the start and its gap mark (trace.h) */
	uint64_t co;
	const struct d9__loc *loc;
};

struct polls {
	struct d9__trace *t;
	int json;
	int generic; /* list loop turns: Unpark to the next Park */
	int64_t min_ns;
	const char *location;
	long worker, pid; /* -1: any */
	struct open_poll *open; /* by thread idx */
	size_t nopen;
	uint64_t printed;
	uint64_t unknown; /* polls (turns) with a gap between their ends: not listed */
	int oom;
	/* a flight dump's triggering poll (turn) is listed first: found by a first pass */
	const struct d9__dump *dump; /* the first dump with a poll (turn) trigger, or NULL */
	int finding; /* the first pass: look for it, list nothing */
	int found;
	int64_t found_diff;
	struct found_poll {
		int64_t start, dur;
		uint32_t pid, tid, worker;
		uint64_t co;
		const char *loc;
	} trig;
};

static void print_poll(struct polls *p, const struct found_poll *x, int is_trigger)
{
	char a[32], b[32];

	p->printed++;
	if (p->json) {
		printf("{\"start_ns\":%" PRId64 ",\"offset_ns\":%" PRId64 ",\"duration_ns\":%" PRId64
			",\"pid\":%u,\"tid\":%u,\"worker\":%u,\"coroutine\":%" PRIu64 ",\"location\":",
			x->start, x->start - p->t->start_real, x->dur, x->pid, x->tid, x->worker, x->co);
		d9__json_cstr(stdout, x->loc);
		fputs(is_trigger ? ",\"trigger\":true}\n" : "}\n", stdout);
		return;
	}
	snprintf(a, sizeof(a), "%+.6fs", (double)(x->start - p->t->start_real) / 1e9);
	printf("%-14s %-9s pid %-7u worker %-3u coroutine %-8" PRIu64 " %s%s\n", a,
		d9__fmt_dur(b, sizeof(b), x->dur), x->pid, x->worker, x->co, x->loc,
		is_trigger ? "  <- the dump's trigger" : "");
}

/* The poll (turn) o of thread ev->th ends at ev: listed when no gap lies inside it. */
static void list_poll(struct polls *p, struct open_poll *o, const struct d9__ev *ev)
{
	const struct d9__thread *th = ev->th;
	uint64_t dur;
	int r = d9__pair_close(&o->o, ev, &dur);

	if (!p->finding)
		p->unknown += r == D9__PAIR_UNKNOWN;
	if (r != D9__PAIR_OK)
		return;
	int64_t d = dur > INT64_MAX ? INT64_MAX : (int64_t)dur;
	const char *loc = p->generic ? "(loop turn)" : o->loc ? o->loc->name : "(unknown)";

	if (d < p->min_ns || (p->worker >= 0 && th->worker != p->worker) ||
	    (p->pid >= 0 && th->proc->pid != p->pid) || (p->location && !strstr(loc, p->location)))
		return;
	struct found_poll x = { o->o.real_ns, d, th->proc->pid, th->tid, th->worker, o->co, loc };
	if (p->finding) {
		/* the same thread, starting within 5 ms of the manifest's time (its clock reading
		 * differs a little from the segment's anchor): the nearest */
		int64_t diff = x.start - p->dump->time_real;
		diff = diff < 0 ? -diff : diff;
		if (x.pid == p->dump->pid && x.tid == p->dump->tid && diff <= p->found_diff) {
			p->trig = x;
			p->found = 1;
			p->found_diff = diff;
		}
		return;
	}
	if (p->found && x.pid == p->trig.pid && x.tid == p->trig.tid && x.start == p->trig.start)
		return; /* listed first */
	print_poll(p, &x, 0);
}

/* Grows p->open to hold thread index idx; returns 0 or -1 (out of memory, p->oom set). */
static int open_reserve(struct polls *p, size_t idx)
{
	if (idx >= p->nopen) {
		size_t n = idx + 1 > p->nopen * 2 ? idx + 1 : p->nopen * 2;
		struct open_poll *a = realloc(p->open, n * sizeof(*a));
		if (!a) {
			p->oom = 1;
			return -1;
		}
		memset(a + p->nopen, 0, (n - p->nopen) * sizeof(*a));
		p->open = a;
		p->nopen = n;
	}
	return 0;
}

/* A segment sealed at its process's end (D9__END_PROCESS): the polls (turns) its threads had
 * open end there, as summary ends them. */
static void polls_process_end(struct polls *p, const struct d9__ev *ev)
{
	for (size_t i = 0; i < p->nopen && i < p->t->nthreads; i++) {
		struct d9__thread *th = p->t->threads[i];
		if (th->proc != ev->proc || !p->open[i].o.open)
			continue;
		struct d9__ev e = *ev;
		e.th = th;
		list_poll(p, &p->open[i], &e);
	}
}

/* Generic mode: a loop turn runs from an Unpark to the same thread's next Park. */
static void turns_on_event(void *ctx, const struct d9__ev *ev)
{
	struct polls *p = ctx;

	if (ev->type == D9__EV_SEGMENT_END && ev->kind == D9__END_PROCESS)
		polls_process_end(p, ev);
	if (ev->type != D9_EV_PARK && ev->type != D9_EV_UNPARK)
		return;
	if (open_reserve(p, ev->th->idx))
		return;
	struct open_poll *o = &p->open[ev->th->idx];
	if (ev->type == D9_EV_PARK) {
		list_poll(p, o, ev);
		return;
	}
	d9__pair_open(&o->o, ev);
	o->co = 0;
	o->loc = NULL;
}

static void polls_on_event(void *ctx, const struct d9__ev *ev)
{
	struct polls *p = ctx;

	if (ev->type == D9__EV_SEGMENT_END && ev->kind == D9__END_PROCESS)
		polls_process_end(p, ev);
	if (ev->type != D9_EV_POLL_START && ev->type != D9_EV_POLL_END)
		return;
	if (open_reserve(p, ev->th->idx))
		return;
	struct open_poll *o = &p->open[ev->th->idx];
	list_poll(p, o, ev); /* a PollStart without PollEnd ends the poll */
	if (ev->type == D9_EV_POLL_START) {
		d9__pair_open(&o->o, ev);
		o->co = ev->co;
		o->loc = ev->loc;
	}
}

static void polls_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze polls [OPTIONS] TRACE...\n\n"
		"Lists polls (one run of a coroutine on a worker, PollStart to PollEnd), one line each:\n"
		"start (from the trace start), duration, pid, worker, coroutine, spawn location.\n\n"
		"options:\n"
		"  --json            JSON lines: start_ns (wall clock ns), offset_ns (from the trace\n"
		"                    start), duration_ns, pid, tid, worker, coroutine, location\n"
		"  --min DURATION    only polls at least this long\n"
		"  --location TEXT   only polls whose location name contains TEXT\n"
		"  --worker N        only polls on worker N\n"
		"  --pid N           only polls of process N\n"
		"  --from WHEN       ignore events before WHEN\n"
		"  --to WHEN         ignore events from WHEN on\n"
		"  -h, --help        this text\n\n"
		"DURATION and WHEN: as in 'd9-analyze summary --help'. A poll that crosses a window\n"
		"edge is not listed. Lines come per process, each thread's polls in time order.\n"
		"In generic mode (no poll in the trace, as in summary) the loop turns are listed\n"
		"instead, Unpark to the next Park, with coroutine 0 and location \"(loop turn)\".\n"
		"For a flight-recorder dump (its manifest next to the segments) the poll that\n"
		"triggered it comes first, marked (JSON: \"trigger\":true).\n"
		"A poll with a gap in the data between its start and end (dropped events, a damaged\n"
		"or missing part of the trace) is not listed: its length is unknown; stderr says\n"
		"how many were left out.\n"
		"exit status: 0 ok, 2 usage, 3 no readable trace, 4 output written but input damaged\n");
}

int d9__cmd_polls(int argc, char **argv)
{
	struct polls p;
	struct d9__trace t;
	int nargs = 0, rc;
	const char *v;
	char **args = calloc((size_t)argc + 1, sizeof(*args));

	if (!args)
		return D9_EXIT_USAGE;
	memset(&p, 0, sizeof(p));
	memset(&t, 0, sizeof(t));
	p.worker = p.pid = -1;
	p.t = &t;
	for (int i = 1; i < argc; i++) {
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			polls_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			p.json = 1;
		} else if ((r = d9__opt(argc, argv, &i, "--min", &v)) == 1) {
			if (d9__parse_duration(v, &p.min_ns)) {
				fprintf(stderr, "d9-analyze: --min: bad duration '%s'\n", v);
				goto usage;
			}
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--location", &v)) == 1) {
			p.location = v;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--worker", &v)) == 1) {
			if (d9__parse_id("--worker", v, &p.worker))
				goto usage;
		} else if (r == 0 && (r = d9__opt_window(argc, argv, &i, &t, &p.pid)) == 1) {
			/* --pid, --from, --to */
		} else if (r == 0 && d9__opt_arg("polls", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (d9__opt_traces("polls", nargs))
		goto usage;
	if (d9__trace_open(&t, args, nargs) || (p.generic = d9__trace_generic(&t)) < 0) {
		fprintf(stderr, "d9-analyze: out of memory\n");
		free(args);
		d9__trace_close(&t);
		return D9_EXIT_NO_TRACE;
	}
	free(args);
	if (!t.readable) {
		fprintf(stderr, "d9-analyze: no readable trace segment in the input\n");
		d9__trace_close(&t);
		return D9_EXIT_NO_TRACE;
	}
	if (!p.json)
		printf("%-14s %-9s %-11s %-10s %-18s %s\n", "start", "duration", "pid", "worker",
			"coroutine", "location");
	for (size_t i = 0; i < t.ndumps && !p.dump; i++)
		if (!strcmp(t.dumps[i].trigger, p.generic ? "loop turn" : "poll"))
			p.dump = &t.dumps[i];
	if (p.dump) {
		/* a flight dump: its triggering poll first, then the others as usual */
		p.finding = 1;
		p.found_diff = 5000000;
		if (d9__trace_prescan(&t, p.generic ? turns_on_event : polls_on_event, &p))
			p.oom = 1;
		p.finding = 0;
		memset(p.open, 0, p.nopen * sizeof(*p.open));
		if (p.found)
			print_poll(&p, &p.trig, 1);
	}
	if (d9__trace_run(&t, p.generic ? turns_on_event : polls_on_event, &p) || p.oom)
		fprintf(stderr, "d9-analyze: out of memory: the list is incomplete\n");
	if (p.unknown)
		fprintf(stderr, "d9-analyze: %" PRIu64 " %s left out: a gap in the data (dropped or "
			"missing events) lies between their start and end\n", p.unknown,
			p.generic ? "loop turn(s)" : "poll(s)");
	fflush(stdout);
	rc = d9__trace_exit_code(&t);
	free(p.open);
	d9__trace_close(&t);
	return rc;
usage:
	free(args);
	polls_help(stderr);
	return D9_EXIT_USAGE;
}
