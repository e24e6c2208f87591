/* cmd-events.c: `d9-analyze events`: the application's own events (include/d9.h): marks, values
 * (gauges, counters) and custom events with their fields by name, in the order the trace model
 * delivers them (per process, per segment, each thread's events in time order), filtered by
 * name, type and time. Also the JSON of those events that `jsonl` and `chrome` share
 * (api-events.h). Streaming: nothing is kept per event. README.md, "Application API (d9.h)". */
#include "analyze.h"
#include "api-events.h"
#include "d9-format.h"
#include "json.h"
#include "trace.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMES_MAX 16 /* --name options */

struct events {
	struct d9__trace *t;
	long pid; /* -1: any */
	int json;
	unsigned types; /* bit per type wanted (TYPE_*), 0: all */
	const char *names[NAMES_MAX];
	int nnames;
	uint64_t shown;
};

enum { TYPE_MARK = 1, TYPE_VALUE = 2, TYPE_EVENT = 4 };

int d9__api_event(const struct d9__ev *ev)
{
	return ev->th && ((ev->type == D9_EV_MARK || ev->type == D9_EV_VALUE) ? ev->name != NULL :
		ev->type == D9_EV_CUSTOM && ev->cschema);
}

const char *d9__api_type_name(const struct d9__ev *ev)
{
	return ev->type == D9_EV_MARK ? D9_MARK_NAME : ev->type == D9_EV_VALUE ? D9_VALUE_NAME :
		d9_event_name(ev->type);
}

const char *d9__api_name(const struct d9__ev *ev)
{
	return ev->type == D9_EV_CUSTOM ? ev->cschema->name : ev->name;
}

static double f64_of(uint64_t bits)
{
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* A double as JSON: null when not finite (JSON has no NaN or infinity). */
static void json_f64(FILE *f, double d)
{
	if (isfinite(d))
		fprintf(f, "%.17g", d);
	else
		fputs("null", f);
}

/* A Value's value as JSON; an f64 gauge as a number. */
void d9__api_json_value(FILE *f, const struct d9__ev *ev)
{
	if (ev->kind == D9_VALUE_GAUGE_F64)
		json_f64(f, f64_of((uint64_t)ev->value));
	else
		fprintf(f, "%" PRId64, ev->value);
}

static void hex(FILE *f, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
}

void d9__api_json_fields(FILE *f, const struct d9__ev *ev)
{
	const struct d9__cschema *c = ev->cschema;

	fputc('{', f);
	for (uint32_t i = 0; i < c->cs.nfields; i++) {
		const struct d9_custom_value *v = &ev->cvals[i];
		if (i)
			fputc(',', f);
		d9__json_cstr(f, c->fields[i]);
		fputc(':', f);
		switch (v->type) {
		case D9_CT_U64:
			fprintf(f, "%" PRIu64, v->u);
			break;
		case D9_CT_I64:
			fprintf(f, "%" PRId64, (int64_t)v->u);
			break;
		case D9_CT_F64:
			json_f64(f, f64_of(v->u));
			break;
		case D9_CT_STR:
			d9__json_str(f, (const char *)v->p, v->len);
			break;
		default: /* bytes: hex */
			fputc('"', f);
			hex(f, v->p, v->len);
			fputc('"', f);
			break;
		}
	}
	fputc('}', f);
}

void d9__api_json(FILE *f, const struct d9__ev *ev)
{
	fputs(",\"name\":", f);
	d9__json_cstr(f, d9__api_name(ev));
	if (ev->type == D9_EV_VALUE) {
		fprintf(f, ",\"kind\":\"%s\",\"value\":", d9_value_kind_name(ev->kind));
		d9__api_json_value(f, ev);
	} else if (ev->type == D9_EV_CUSTOM) {
		fputs(",\"fields\":", f);
		d9__api_json_fields(f, ev);
	}
}

/* A string for the text output: printable ASCII as is, other bytes as \xNN. */
static void text_str(FILE *f, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' && p[i] != '"')
			fputc(p[i], f);
		else
			fprintf(f, "\\x%02x", p[i]);
	}
}

static void text_line(struct events *e, const struct d9__ev *ev)
{
	FILE *f = stdout;

	fprintf(f, "%+.6fs %u/%u ", (double)(ev->real_ns - e->t->start_real) / 1e9, ev->proc->pid,
		ev->th->tid);
	if (ev->type == D9_EV_MARK) {
		fputs("mark ", f);
		text_str(f, (const uint8_t *)ev->name, strlen(ev->name));
	} else if (ev->type == D9_EV_VALUE) {
		fprintf(f, "%s ", d9_value_kind_name(ev->kind));
		text_str(f, (const uint8_t *)ev->name, strlen(ev->name));
		if (ev->kind == D9_VALUE_GAUGE_F64)
			fprintf(f, " %.17g", f64_of((uint64_t)ev->value));
		else
			fprintf(f, " %" PRId64, ev->value);
	} else {
		const struct d9__cschema *c = ev->cschema;
		fputs("event ", f);
		text_str(f, (const uint8_t *)c->name, strlen(c->name));
		for (uint32_t i = 0; i < c->cs.nfields; i++) {
			const struct d9_custom_value *v = &ev->cvals[i];
			fprintf(f, " %s=", c->fields[i]);
			if (v->type == D9_CT_U64)
				fprintf(f, "%" PRIu64, v->u);
			else if (v->type == D9_CT_I64)
				fprintf(f, "%" PRId64, (int64_t)v->u);
			else if (v->type == D9_CT_F64)
				fprintf(f, "%.17g", f64_of(v->u));
			else if (v->type == D9_CT_STR) {
				fputc('"', f);
				text_str(f, v->p, v->len);
				fputc('"', f);
			} else {
				hex(f, v->p, v->len);
			}
		}
	}
	fputc('\n', f);
}

static void events_on_event(void *ctx, const struct d9__ev *ev)
{
	struct events *e = ctx;

	if (!d9__api_event(ev) || (e->pid >= 0 && ev->proc->pid != e->pid))
		return;
	unsigned bit = ev->type == D9_EV_MARK ? TYPE_MARK : ev->type == D9_EV_VALUE ? TYPE_VALUE :
		TYPE_EVENT;
	if (e->types && !(e->types & bit))
		return;
	if (e->nnames) {
		const char *name = d9__api_name(ev);
		int i = 0;
		while (i < e->nnames && strcmp(e->names[i], name))
			i++;
		if (i == e->nnames)
			return;
	}
	e->shown++;
	if (!e->json) {
		text_line(e, ev);
		return;
	}
	FILE *f = stdout;
	fprintf(f, "{\"type\":\"%s\",\"ts_ns\":%" PRId64 ",\"mono_ns\":%" PRId64
		",\"pid\":%u,\"tid\":%u,\"worker\":%u,\"thread\":", d9__api_type_name(ev), ev->real_ns,
		ev->ns, ev->proc->pid, ev->th->tid, ev->th->worker);
	d9__json_cstr(f, ev->th->name);
	d9__api_json(f, ev);
	fputs("}\n", f);
}

static void events_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze events [OPTIONS] TRACE...\n\n"
		"Lists the application's own events (include/d9.h): marks, values (gauges and\n"
		"counters) and custom events with their fields by name. Text: one line per event,\n"
		"\"+SECONDS PID/TID\" from the trace start, then \"mark NAME\", \"gauge NAME VALUE\",\n"
		"\"counter NAME TOTAL\" or \"event SCHEMA FIELD=VALUE...\" (strings quoted, bytes in hex).\n\n"
		"options:\n"
		"  --json            one JSON object per line: type (Mark, Value, CustomEvent), ts_ns,\n"
		"                    mono_ns, pid, tid, worker, thread, name; Value: kind and value;\n"
		"                    CustomEvent: fields (an object, by field name)\n"
		"  --name NAME       only events of this name (mark, value or schema name); repeatable\n"
		"  --type TYPE       only marks, values or events (mark, value, event); repeatable\n"
		"  --pid N           only events of process N\n"
		"  --from WHEN       ignore events before WHEN\n"
		"  --to WHEN         ignore events from WHEN on\n"
		"  -h, --help        this text\n\n"
		"WHEN: as in 'd9-analyze summary --help'. Calls the agent rejected are counted as\n"
		"dropped events (reason api) in 'd9-analyze summary'.\n"
		"exit status: 0 ok, 2 usage, 3 no readable trace, 4 output written but input damaged\n");
}

int d9__cmd_events(int argc, char **argv)
{
	struct events e;
	struct d9__trace t;
	int nargs = 0;
	char **args = calloc((size_t)argc + 1, sizeof(*args));

	if (!args)
		return D9_EXIT_USAGE;
	memset(&t, 0, sizeof(t));
	memset(&e, 0, sizeof(e));
	e.t = &t;
	e.pid = -1;
	for (int i = 1; i < argc; i++) {
		const char *v;
		int r = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			events_help(stdout);
			free(args);
			return D9_EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			e.json = 1;
		} else if ((r = d9__opt(argc, argv, &i, "--name", &v)) == 1) {
			if (e.nnames == NAMES_MAX) {
				fprintf(stderr, "d9-analyze events: at most %d --name\n", NAMES_MAX);
				goto usage;
			}
			e.names[e.nnames++] = v;
		} else if (r == 0 && (r = d9__opt(argc, argv, &i, "--type", &v)) == 1) {
			if (!strcmp(v, "mark"))
				e.types |= TYPE_MARK;
			else if (!strcmp(v, "value"))
				e.types |= TYPE_VALUE;
			else if (!strcmp(v, "event"))
				e.types |= TYPE_EVENT;
			else {
				fprintf(stderr, "d9-analyze events: --type is mark, value or event\n");
				goto usage;
			}
		} else if (r == 0 && (r = d9__opt_window(argc, argv, &i, &t, &e.pid)) == 1) {
			/* --pid, --from, --to */
		} else if (r == 0 && d9__opt_arg("events", argv[i], args, &nargs)) {
			goto usage;
		}
		if (r < 0)
			goto usage;
	}
	if (d9__opt_traces("events", nargs))
		goto usage;
	return d9__trace_stream(&t, args, nargs, events_on_event, &e);
usage:
	free(args);
	events_help(stderr);
	return D9_EXIT_USAGE;
}
