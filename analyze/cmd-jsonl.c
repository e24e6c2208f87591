/* cmd-jsonl.c: `d9-analyze jsonl`: every event as one JSON object per line, in the order the
 * trace model delivers them (per process, per segment, chunk order), with every id resolved:
 * threads, locations, stacks, call and kind names. Streaming: nothing is kept per event. The keys
 * of each type are documented in README.md, "jsonl schema"; a key is never left out. */
#include "analyze.h"
#include "api-events.h"
#include "d9-format.h"
#include "json.h"
#include "trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jsonl {
	struct d9__trace *t;
	long pid; /* -1: any */
};

static const char *cpu_source_name(uint64_t source)
{
	return source == D9_CPU_ON ? "on_cpu" : source == D9_CPU_OFF ? "off_cpu" : "unknown";
}

/* "location" and "location_addr" (hex string), both null when the location is unknown. */
static void put_loc(FILE *f, const struct d9__loc *l)
{
	fputs(",\"location\":", f);
	if (!l) {
		fputs("null,\"location_addr\":null", f);
		return;
	}
	d9__json_cstr(f, l->name);
	fprintf(f, ",\"location_addr\":\"0x%" PRIx64 "\"", l->function_addr);
}

/* RequestBegin / RequestEnd (README.md, "Requests"): their fields by name */
static void put_request(FILE *f, const struct d9__ev *ev)
{
	const uint64_t *v = ev->raw->f;

	fprintf(f, ",\"id\":%" PRIu64 ",\"source\":\"%s\"", ev->count,
		ev->kind == D9_REQ_SRC_API ? "api" : "zero-code");
	if (ev->type == D9_EV_REQUEST_BEGIN) {
		fprintf(f, ",\"fd\":%" PRId64 ",\"coroutine\":%" PRIu64 ",\"preview\":", ev->object,
			ev->co);
		if (ev->call)
			d9__json_cstr(f, ev->call);
		else
			fputs("null", f);
		return;
	}
	fprintf(f, ",\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64 ",\"flags\":%" PRIu64
		",\"count\":%" PRIu64 ",\"status\":%" PRId64 ",\"tail_ns\":%" PRIu64,
		v[D9_F_RE_BYTES_IN], v[D9_F_RE_BYTES_OUT], v[D9_F_RE_FLAGS], v[D9_F_RE_COUNT], ev->value,
		v[D9_F_RE_TAIL_NS]);
}

static void jsonl_on_event(void *ctx, const struct d9__ev *ev)
{
	struct jsonl *j = ctx;
	FILE *f = stdout;
	const char *type = !ev->th ? NULL : ev->type == D9_EV_SCHED_DELAY ? D9_SCHED_DELAY_NAME :
		d9__api_event(ev) ? d9__api_type_name(ev) :
		ev->type == D9_EV_REQUEST_BEGIN ? D9_REQUEST_BEGIN_NAME :
		ev->type == D9_EV_REQUEST_END ? D9_REQUEST_END_NAME : d9_event_name(ev->type);

	if (!type || (j->pid >= 0 && ev->proc->pid != j->pid))
		return; /* pseudo events (segment and process ends); other processes */
	fprintf(f, "{\"type\":\"%s\",\"ts_ns\":%" PRId64 ",\"mono_ns\":%" PRId64
		",\"pid\":%u,\"tid\":%u,\"worker\":%u,\"thread\":", type, ev->real_ns, ev->ns,
		ev->proc->pid, ev->th->tid, ev->th->worker);
	d9__json_cstr(f, ev->th->name);
	switch (ev->type) {
	case D9_EV_POLL_START:
		fprintf(f, ",\"coroutine\":%" PRIu64, ev->co);
		put_loc(f, ev->loc);
		break;
	case D9_EV_POLL_END:
	case D9_EV_COROUTINE_EXIT:
		fprintf(f, ",\"coroutine\":%" PRIu64, ev->co);
		break;
	case D9_EV_PARK:
		fprintf(f, ",\"call\":\"%s\",\"timeout_us\":%" PRId64, d9_wait_call_name(ev->kind),
			ev->value);
		break;
	case D9_EV_UNPARK:
		fprintf(f, ",\"ready\":%" PRId64, ev->value);
		/* null: not recorded at this Unpark (unknown, never 0) */
		for (int i = D9_F_UNPARK_CPU_NS; i <= D9_F_UNPARK_SCHED_WAIT_NS; i++) {
			uint64_t v = ev->raw->f[i];
			fprintf(f, i == D9_F_UNPARK_CPU_NS ? ",\"cpu_ns\":" : ",\"sched_wait_ns\":");
			if (v == D9_UNKNOWN)
				fputs("null", f);
			else
				fprintf(f, "%" PRIu64, v);
		}
		break;
	case D9_EV_WAKE:
		fprintf(f, ",\"kind\":\"%s\",\"woken\":%" PRIu64 ",\"waker\":%" PRIu64,
			d9_wake_kind_name(ev->kind), ev->co, ev->co2);
		if (ev->kind == D9_WAKE_FD)
			fprintf(f, ",\"fd\":%" PRId64, ev->object);
		else if (ev->kind == D9_WAKE_TIMER)
			/* unclamped: negative when the runtime woke the coroutine early */
			fprintf(f, ",\"deadline_ns\":%" PRId64 ",\"lateness_ns\":%" PRId64,
				ev->deadline_ns, ev->ns - ev->deadline_ns);
		else
			fprintf(f, ",\"object\":%" PRId64, ev->object);
		break;
	case D9_EV_SPAWN:
		fprintf(f, ",\"coroutine\":%" PRIu64 ",\"parent\":%" PRIu64, ev->co, ev->co2);
		put_loc(f, ev->loc);
		break;
	case D9_EV_QUEUE_SAMPLE:
		fprintf(f, ",\"runnable\":%" PRIu64, ev->count);
		break;
	case D9_EV_BLOCKING_CALL:
		fprintf(f, ",\"coroutine\":%" PRIu64 ",\"call\":", ev->co);
		d9__json_cstr(f, ev->call);
		fprintf(f, ",\"fd_kind\":\"%s\",\"duration_ns\":%" PRIu64, d9_fd_kind_name(ev->kind),
			ev->count);
		fputs(",\"stack\":", f);
		d9__json_stack(f, j->t, ev->stack);
		break;
	case D9_EV_CPU_SAMPLE:
		fprintf(f, ",\"coroutine\":%" PRIu64 ",\"source\":\"%s\"", ev->co,
			cpu_source_name(ev->kind));
		fputs(",\"stack\":", f);
		d9__json_stack(f, j->t, ev->stack);
		if (ev->unwind & D9_UNWINDER_MASK) /* recorded by the writer (CpuSample.unwind) */
			fprintf(f, ",\"unwinder\":\"%s\",\"truncated\":%s,\"fp_rejected\":%s",
				d9_unwinder_name(ev->unwind),
				ev->unwind & D9_UNWIND_TRUNCATED ? "true" : "false",
				ev->unwind & D9_UNWIND_FP_REJECTED ? "true" : "false");
		if (ev->weight_ns != D9_UNKNOWN)
			fprintf(f, ",\"weight_ns\":%" PRIu64, ev->weight_ns);
		break;
	case D9_EV_DROPPED:
		fprintf(f, ",\"count\":%" PRIu64 ",\"reason\":\"%s\"", ev->count,
			d9_drop_reason_name(ev->kind));
		break;
	case D9_EV_ZERO_TIMEOUT_WAITS:
		fprintf(f, ",\"count\":%" PRIu64, ev->count);
		break;
	case D9_EV_SCHED_DELAY:
		fprintf(f, ",\"coroutine\":%" PRIu64 ",\"call\":", ev->co);
		d9__json_cstr(f, ev->call);
		fprintf(f, ",\"fd_kind\":\"%s\",\"duration_ns\":%" PRIu64 ",\"sched_wait_ns\":",
			d9_fd_kind_name(ev->kind), ev->count);
		if (ev->value < 0)
			fputs("null", f);
		else
			fprintf(f, "%" PRId64, ev->value);
		break;
	case D9_EV_MARK:
	case D9_EV_VALUE:
	case D9_EV_CUSTOM:
		d9__api_json(f, ev);
		break;
	case D9_EV_REQUEST_BEGIN:
	case D9_EV_REQUEST_END:
		put_request(f, ev);
		break;
	default:
		break;
	}
	fputs("}\n", f);
}

static void jsonl_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze jsonl [OPTIONS] TRACE...\n\n"
		"Prints every event as one JSON object per line, with ids resolved: type, ts_ns\n"
		"(wall clock ns), mono_ns, pid, tid, worker, thread, and the event's fields (locations\n"
		"and stack frames by name, calls and kinds by name). The keys of each type are listed\n"
		"in README.md, \"jsonl schema\".\n\n"
		"options:\n"
		"  --pid N           only events of process N\n"
		"  --from WHEN       ignore events before WHEN\n"
		"  --to WHEN         ignore events from WHEN on\n"
		"  -h, --help        this text\n\n"
		"WHEN: as in 'd9-analyze summary --help'. Lines come per process, each thread's\n"
		"events in time order.\n"
		"exit status: 0 ok, 2 usage, 3 no readable trace, 4 output written but input damaged\n");
}

int d9__cmd_jsonl(int argc, char **argv)
{
	struct jsonl j;
	struct d9__trace t;
	int nargs = 0;
	char **args = calloc((size_t)argc + 1, sizeof(*args));

	if (!args)
		return D9_EXIT_USAGE;
	memset(&t, 0, sizeof(t));
	j.t = &t;
	j.pid = -1;
	for (int i = 1; i < argc; i++) {
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			jsonl_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if ((r = d9__opt_window(argc, argv, &i, &t, &j.pid)) == 1) {
			/* --pid, --from, --to */
		} else if (r == 0 && d9__opt_arg("jsonl", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (d9__opt_traces("jsonl", nargs))
		goto usage;
	return d9__trace_stream(&t, args, nargs, jsonl_on_event, &j);
usage:
	free(args);
	jsonl_help(stderr);
	return D9_EXIT_USAGE;
}
