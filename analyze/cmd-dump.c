/* cmd-dump.c: `d9-analyze dump`: every record of the given segments as one JSON object per line,
 * ids unresolved, in file order. This is the decoder-level view that the golden files
 * (tests/golden/ *.jsonl) pin down and that other decoders are checked against; FORMAT.md,
 * "Reference output", documents each line. */
#include "analyze.h"
#include "d9-format.h"
#include "inputs.h"
#include "json.h"

#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

static const char *const problem_names[] = {
	"", "truncated", "corrupt", "unknown_chunk", "unknown_event", "unknown_def", "bad_event",
};

static void on_problem(void *ctx, int kind, uint64_t offset, const char *msg)
{
	FILE *f = ctx;

	fprintf(f, "{\"rec\":\"problem\",\"kind\":\"%s\",\"offset\":%" PRIu64 ",\"message\":",
		kind > 0 && kind <= D9_PROB_BAD_EVENT ? problem_names[kind] : "other", offset);
	d9__json_cstr(f, msg);
	fputs("}\n", f);
}

static void dump_header(FILE *f, const struct d9_header *h)
{
	fprintf(f, "{\"rec\":\"header\",\"major\":%u,\"minor\":%u,\"pid\":%u,\"ppid\":%u,"
		"\"segment\":%u,\"clock\":\"%s\",\"time_shift\":%u,\"ticks_per_sec\":%" PRIu64
		",\"anchor_ticks\":%" PRIu64 ",\"anchor_mono_ns\":%" PRIu64
		",\"anchor_realtime_ns\":%" PRIu64 ",\"start_realtime_ns\":%" PRIu64 ",\"writer\":",
		h->major, h->minor, h->pid, h->ppid, h->segment_seq,
		h->clock_source == D9_CLOCK_TSC ? "tsc" : "monotonic", h->time_shift, h->ticks_per_sec,
		h->anchor_ticks, h->anchor_mono_ns, h->anchor_realtime_ns, h->start_realtime_ns);
	d9__json_cstr(f, h->writer);
	fputs(",\"process\":", f);
	d9__json_cstr(f, h->process);
	fputs(",\"cmdline\":", f);
	d9__json_str(f, h->cmdline, h->cmdline_len);
	fputs(",\"hostname\":", f);
	d9__json_cstr(f, h->hostname);
	fputs(",\"boot_id\":", f);
	d9__json_cstr(f, h->boot_id);
	fputs("}\n", f);
}

static void dump_schema(FILE *f, struct d9_reader *r, const struct d9_chunk *c)
{
	int first = 1;

	fprintf(f, "{\"rec\":\"schema\",\"offset\":%" PRIu64 ",\"types\":[", c->offset);
	for (uint32_t t = 1; t < D9_EV_TYPE_LIMIT; t++) {
		const struct d9_schema_type *s = d9_reader_schema(r, t);
		if (!s)
			continue;
		fprintf(f, "%s{\"code\":%u,\"name\":", first ? "" : ",", t);
		d9__json_cstr(f, s->name);
		fputs(",\"fields\":[", f);
		for (int i = 0; i < s->nfields; i++) {
			fprintf(f, "%s{\"name\":", i ? "," : "");
			d9__json_cstr(f, s->fields[i].name);
			fprintf(f, ",\"enc\":\"%c\"}", s->fields[i].enc);
		}
		fputs("]}", f);
		first = 0;
	}
	fputs("]}\n", f);
}

static void hex(FILE *f, const uint8_t *p, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
	fputc('"', f);
}

static void dump_def(FILE *f, const struct d9_def *d, uint64_t chunk_off)
{
	fprintf(f, "{\"rec\":\"def\",\"chunk\":%" PRIu64 ",\"kind\":\"%s\"", chunk_off,
		d9_def_name(d->kind));
	switch (d->kind) {
	case D9_DEF_STRING:
		fprintf(f, ",\"id\":%" PRIu64 ",\"value\":", d->id);
		d9__json_str(f, d->u.string.s, d->u.string.len);
		break;
	case D9_DEF_LOCATION:
		fprintf(f, ",\"id\":%" PRIu64 ",\"function_addr\":%" PRIu64 ",\"callsite_addr\":%" PRIu64
			",\"module\":%" PRIu64 ",\"name\":%" PRIu64, d->id, d->u.location.function_addr,
			d->u.location.callsite_addr, d->u.location.module, d->u.location.name);
		break;
	case D9_DEF_STACK:
		fprintf(f, ",\"id\":%" PRIu64 ",\"frames\":[", d->id);
		for (uint32_t i = 0; i < d->u.stack.nframes; i++)
			fprintf(f, "%s%" PRIu64, i ? "," : "", d->u.stack.frames[i]);
		fputc(']', f);
		break;
	case D9_DEF_MODULE:
		fprintf(f, ",\"id\":%" PRIu64 ",\"path\":%" PRIu64 ",\"start\":%" PRIu64 ",\"end\":%" PRIu64
			",\"offset\":%" PRIu64 ",\"build_id\":", d->id, d->u.module.path, d->u.module.start,
			d->u.module.end, d->u.module.offset);
		hex(f, d->u.module.build_id, d->u.module.build_id_len);
		break;
	case D9_DEF_SYMBOL:
		fprintf(f, ",\"start\":%" PRIu64 ",\"len\":%" PRIu64 ",\"function\":%" PRIu64
			",\"file\":%" PRIu64 ",\"line\":%" PRIu64 ",\"inline_depth\":%" PRIu64,
			d->u.symbol.start, d->u.symbol.len, d->u.symbol.function, d->u.symbol.file,
			d->u.symbol.line, d->u.symbol.inline_depth);
		break;
	case D9_DEF_THREAD:
		fprintf(f, ",\"tid\":%" PRIu64 ",\"name\":%" PRIu64 ",\"worker\":%" PRIu64
			",\"role\":%" PRIu64, d->id, d->u.thread.name, d->u.thread.worker, d->u.thread.role);
		break;
	case D9_DEF_CLOCK_SYNC:
		fprintf(f, ",\"ticks\":%" PRIu64 ",\"mono_ns\":%" PRIu64 ",\"realtime_ns\":%" PRIu64,
			d->u.clock.ticks, d->u.clock.mono_ns, d->u.clock.realtime_ns);
		break;
	case D9_DEF_COROUTINE:
		fprintf(f, ",\"id\":%" PRIu64 ",\"parent\":%" PRIu64 ",\"location\":%" PRIu64
			",\"flags\":%" PRIu64, d->id, d->u.coroutine.parent, d->u.coroutine.location,
			d->u.coroutine.flags);
		break;
	case D9_DEF_PRIVILEGES:
		fprintf(f, ",\"from_uid\":%" PRIu64 ",\"to_uid\":%" PRIu64 ",\"flags\":%" PRIu64,
			d->u.privileges.from_uid, d->u.privileges.to_uid, d->u.privileges.flags);
		break;
	case D9_DEF_RECORDER:
		fprintf(f, ",\"feature\":%" PRIu64 ",\"state\":%" PRIu64 ",\"errno\":%" PRIu64
			",\"text\":%" PRIu64, d->u.recorder.feature, d->u.recorder.state, d->u.recorder.err,
			d->u.recorder.text);
		break;
	case D9_DEF_CUSTOM_SCHEMA:
		fprintf(f, ",\"id\":%" PRIu64 ",\"name\":%" PRIu64 ",\"fields\":", d->id,
			d->u.custom_schema.name);
		hex(f, d->u.custom_schema.fields, d->u.custom_schema.fields_len);
		break;
	}
	fputs("}\n", f);
}

/* An Unpark statistic, decoded: null when unknown. */
static void dump_stat(FILE *f, const char *name, uint64_t v)
{
	fprintf(f, ",\"%s\":", name);
	if (v == D9_UNKNOWN)
		fputs("null", f);
	else
		fprintf(f, "%" PRIu64, v);
}

static void dump_event(FILE *f, struct d9_reader *r, const struct d9_chunk *c,
	const struct d9_event *ev)
{
	const struct d9_header *h = d9_reader_header(r);
	const struct d9_schema_type *s = d9_reader_schema(r, ev->type);
	int known = ev->type <= D9_EV_KNOWN_MAX;

	fprintf(f, "{\"rec\":\"event\",\"offset\":%zu,\"tid\":%u,\"worker\":%u,\"type\":", ev->offset,
		c->tid, c->worker);
	d9__json_cstr(f, s ? s->name : "?");
	fprintf(f, ",\"code\":%u,\"time\":%" PRIu64 ",\"mono_ns\":%" PRId64, ev->type, ev->time,
		d9_time_to_mono_ns(h, ev->time));
	int cpu_done = 0, wait_done = 0; /* Unpark statistics printed */
	for (int i = 0; s && i < s->nfields; i++) {
		const struct d9_schema_field *fd = &s->fields[i];
		int slot = known ? fd->slot : i;
		if (slot == D9_SLOT_TIMEOUT_DELTA) {
			/* Park's timeout as a difference (format 1.3): shown decoded */
			fprintf(f, ",\"timeout_us\":%" PRId64, (int64_t)ev->f[D9_F_PARK_TIMEOUT_US]);
			continue;
		}
		if (slot == D9_SLOT_KIND_OBJECT) {
			/* Wake's packed field: shown as the two fields it holds */
			fprintf(f, ",\"kind\":%" PRIu64 ",\"object\":%" PRId64, ev->f[D9_F_WAKE_KIND],
				(int64_t)ev->f[D9_F_WAKE_OBJECT]);
			continue;
		}
		if (slot == D9_SLOT_WEIGHT_NS_P1) {
			/* CpuSample's value-plus-one weight: shown decoded, null when unknown */
			fputs(",\"weight_ns\":", f);
			if (ev->f[D9_F_CPU_WEIGHT_NS] == D9_UNKNOWN)
				fputs("null", f);
			else
				fprintf(f, "%" PRIu64, ev->f[D9_F_CPU_WEIGHT_NS]);
			continue;
		}
		if (slot == D9_SLOT_CPU_NS_P1 || slot == D9_SLOT_SCHED_WAIT_NS_P1) {
			/* Unpark's value-plus-one fields: shown decoded, null when unknown */
			int to = slot == D9_SLOT_CPU_NS_P1 ? D9_F_UNPARK_CPU_NS : D9_F_UNPARK_SCHED_WAIT_NS;
			dump_stat(f, to == D9_F_UNPARK_CPU_NS ? "cpu_ns" : "sched_wait_ns", ev->f[to]);
			*(to == D9_F_UNPARK_CPU_NS ? &cpu_done : &wait_done) = 1;
			continue;
		}
		if (known && ev->type == D9_EV_UNPARK && slot == D9_F_UNPARK_CPU_NS)
			cpu_done = 1;
		if (known && ev->type == D9_EV_UNPARK && slot == D9_F_UNPARK_SCHED_WAIT_NS)
			wait_done = 1;
		if (slot < 0 || slot >= D9_EV_MAX_FIELDS)
			continue; /* a field this decoder does not keep */
		fputc(',', f);
		d9__json_cstr(f, fd->name);
		fputc(':', f);
		if (fd->enc == D9_FIELD_I)
			fprintf(f, "%" PRId64, (int64_t)ev->f[slot]);
		else if (fd->enc == D9_FIELD_B)
			hex(f, ev->fdata[slot], ev->fdata[slot] ? ev->flen[slot] : 0);
		else
			fprintf(f, "%" PRIu64, ev->f[slot]);
	}
	if (ev->type == D9_EV_UNPARK && ev->stats_merged) {
		/* statistics from the UnparkStats after it (format 1.3), those its own fields did
		 * not print: after its fields */
		if (!cpu_done)
			dump_stat(f, "cpu_ns", ev->f[D9_F_UNPARK_CPU_NS]);
		if (!wait_done)
			dump_stat(f, "sched_wait_ns", ev->f[D9_F_UNPARK_SCHED_WAIT_NS]);
	}
	fputs("}\n", f);
}

/* Returns 1 when the trailer is damaged. */
static int dump_trailer(FILE *f, const struct d9_chunk *c)
{
	struct d9_trailer t;

	if (d9_trailer_decode(c, &t) != 0) {
		fprintf(f, "{\"rec\":\"problem\",\"kind\":\"corrupt\",\"offset\":%" PRIu64
			",\"message\":\"trailer does not parse\"}\n", c->offset);
		return 1;
	}
	fprintf(f, "{\"rec\":\"trailer\",\"offset\":%" PRIu64 ",\"events\":%" PRIu64 ",\"chunks\":%" PRIu64
		",\"first_time\":%" PRIu64 ",\"last_time\":%" PRIu64 ",\"dropped_events\":%" PRIu64
		",\"dropped_samples\":%" PRIu64 ",\"flags\":%u,\"type_counts\":{",
		c->offset, t.events, t.chunks, t.first_time, t.last_time, t.dropped_events,
		t.dropped_samples, t.flags);
	int first = 1;
	for (int i = 0; i <= D9_EV_KNOWN_MAX; i++) {
		if (!t.type_counts[i])
			continue;
		fprintf(f, "%s\"%s\":%" PRIu64, first ? "" : ",", d9_event_name((uint32_t)i) ?
			d9_event_name((uint32_t)i) : "?", t.type_counts[i]);
		first = 0;
	}
	fputs("}", f);
	if (t.flags & (D9_TRAILER_ENDED | D9_TRAILER_WINDOW))
		fprintf(f, ",\"end_time\":%" PRIu64, t.end_time);
	fputs("}\n", f);
	return 0;
}

/* Dumps one segment file. Returns 0 clean, 1 damaged, -1 unreadable. */
static int dump_file(FILE *f, const char *path)
{
	struct d9_reader *r;
	struct d9_chunk c;
	char tmp[4096];
	int bad_trailer = 0;
	int err = d9_reader_open_file(&r, path);

	snprintf(tmp, sizeof(tmp), "%s", path);
	fputs("{\"rec\":\"file\",\"name\":", f);
	d9__json_cstr(f, basename(tmp));
	fputs("}\n", f);
	if (err) {
		fprintf(stderr, "d9-analyze: %s: %s\n", path, d9_strerror(err));
		fputs("{\"rec\":\"problem\",\"kind\":\"unreadable\",\"offset\":0,\"message\":", f);
		d9__json_cstr(f, d9_strerror(err));
		fputs("}\n", f);
		return -1;
	}
	d9_reader_on_problem(r, on_problem, f);
	dump_header(f, d9_reader_header(r));
	while ((err = d9_reader_next(r, &c)) == 1) {
		if (c.type == D9_CHUNK_SCHEMA) {
			dump_schema(f, r, &c);
		} else if (c.type == D9_CHUNK_DEFS) {
			struct d9_defs_iter it;
			struct d9_def d;
			d9_defs_init(&it, r, &c);
			while (d9_defs_next(&it, &d) == 1)
				dump_def(f, &d, c.offset);
		} else if (c.type == D9_CHUNK_EVENTS) {
			struct d9_events_iter it;
			struct d9_event ev;
			d9_events_init(&it, r, &c);
			while (d9_events_next(&it, &ev) == 1)
				dump_event(f, r, &c, &ev);
		} else if (c.type == D9_CHUNK_TRAILER) {
			bad_trailer |= dump_trailer(f, &c);
		}
	}
	const struct d9_reader_stats *st = d9_reader_stats(r);
	fprintf(f, "{\"rec\":\"end\",\"chunks\":%" PRIu64 ",\"corrupt_chunks\":%" PRIu64
		",\"unknown_chunks\":%" PRIu64 ",\"bad_events\":%" PRIu64 ",\"bad_defs\":%" PRIu64
		",\"skipped_bytes\":%" PRIu64 ",\"truncated\":%s,\"sealed\":%s}\n", st->chunks,
		st->corrupt_chunks, st->unknown_chunks, st->bad_events, st->bad_defs, st->skipped_bytes, st->truncated ? "true" : "false",
		st->sealed ? "true" : "false");
	int damaged = err < 0 || st->truncated || st->corrupt_chunks || st->bad_events || st->bad_defs ||
		bad_trailer;
	if (damaged)
		fprintf(stderr, "d9-analyze: %s: damaged segment (%s%s%" PRIu64
			" corrupt chunks); decoded what could be read\n", path,
			st->truncated ? "truncated, " : "", err < 0 ? "read error, " : "",
			st->corrupt_chunks);
	d9_reader_close(r);
	return damaged;
}

int d9__cmd_dump(int argc, char **argv)
{
	struct d9__inputs in = { 0 };
	int bad = 0, damaged = 0, readable = 0;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: d9-analyze dump TRACE...\n\n"
			"Prints every record of the given segment files (.bin, .bin.gz, .active, or\n"
			"directories of them) as one JSON object per line, in file order, with ids as they\n"
			"are on disk. Damaged input is decoded as far as possible and reported with\n"
			"\"problem\" lines. The schema of each line is in format/FORMAT.md.\n");
		return argc < 2 ? D9_EXIT_USAGE : D9_EXIT_OK;
	}
	in.every_file = 1; /* every file as it is on disk, twins included */
	if (d9__inputs_expand(&in, argv + 1, argc - 1, &bad))
		return D9_EXIT_NO_TRACE;
	for (size_t i = 0; i < in.n; i++) {
		int v = dump_file(stdout, in.paths[i]);
		if (v >= 0)
			readable++;
		if (v != 0)
			damaged++;
	}
	d9__inputs_free(&in);
	fflush(stdout);
	if (!readable)
		return D9_EXIT_NO_TRACE;
	return damaged || bad ? D9_EXIT_DAMAGED : D9_EXIT_OK;
}
