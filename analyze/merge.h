/* merge.h: CPU samples merged into their thread's timeline (merge.c), used by d9__trace_run. */
#ifndef D9_ANALYZE_MERGE_H
#define D9_ANALYZE_MERGE_H
#include "trace.h"
#include "d9-format.h"

struct squeue;

struct d9__merge {
	struct d9__trace *t;
	d9__ev_fn *fn; /* the command's callback */
	void *ctx;
	struct squeue *q; /* per thread (d9__thread.idx) */
	size_t nq;
	int oom;
};

/* The d9__ev_fn that d9__trace_run hands every event to (ctx: a struct d9__merge). */
void d9__merge_ev(void *ctx, const struct d9__ev *ev);
void d9__merge_free(struct d9__merge *m);
#endif
