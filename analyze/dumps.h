/* dumps.h: the manifests of flight-recorder dumps (agent/flight.c writes
 * <dir>/<stem>.<pid>.dump-<seq>.json next to the dump's segments). The analyzer shows the trigger
 * of each dump whose segments it reads (summary, polls). */
#ifndef D9_ANALYZE_DUMPS_H
#define D9_ANALYZE_DUMPS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct d9__dump {
	char trigger[24]; /* "poll", "loop turn", "blocking call", "scheduling delay", "drops",
			   * "signal", "file" */
	char unit[8]; /* "ns", "events", "signal", "none" */
	int64_t time_real; /* the triggering event (a poll's start), CLOCK_REALTIME ns */
	uint64_t value, threshold; /* in unit */
	uint32_t pid, tid, worker;
	uint64_t extensions, refused, evicted;
	char *manifest; /* its path */
};

struct d9__trace;
/* Reads the manifests in the directories of the segment files paths[0..n) and keeps those naming
 * one of them (a hostile or foreign manifest is skipped: it is parsed with bounds, never
 * trusted). Sets t->dumps and t->ndumps, sorted by trigger time. Returns 0 or -ENOMEM. */
int d9__dumps_load(struct d9__trace *t, const char *const *paths, size_t n);
void d9__dumps_free(struct d9__trace *t);
/* "poll > 150ms (1.32s)" and the like, into buf. */
const char *d9__dump_what(char *buf, size_t cap, const struct d9__dump *d);
/* The dump's JSON object (summary --json). */
void d9__dump_json(FILE *f, const struct d9__dump *d, int64_t trace_start);
#endif
