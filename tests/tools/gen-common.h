/* gen-common.h: the segment-writing scaffolding of the synthetic-trace generators
 * (gen-analyze-*.c): one segment built in memory with the format library's encoder (header,
 * schema, a DEFS chunk, event chunks), then written to a file. Each generator is one .c file
 * linked with libd9core.a, so this is static inline code; define GEN_TOOL (the tool's name, for
 * its error messages) before including it. Times are ns after the anchor GEN_ANCHOR (mono ns). */
#ifndef D9_TESTS_GEN_COMMON_H
#define D9_TESTS_GEN_COMMON_H

#include "d9-format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef GEN_TOOL
#error "define GEN_TOOL before including gen-common.h"
#endif

#define GEN_ANCHOR 1000000000ull /* anchor_ticks = anchor_mono_ns; one tick is one ns */

/* A segment being written. */
struct gen {
	uint8_t *buf;
	size_t cap;
	struct d9_wbuf w;
	struct d9_enc e;
	uint8_t *defs; /* the open DEFS chunk, NULL once events have begun */
	uint32_t schema; /* D9_SCHEMA_* flags of the segment (gen_begin_schema), 0 by default */
	uint32_t trailer_flags; /* D9_TRAILER_* of its trailer, with end_time (units) */
	uint64_t end_time;
};

static inline void die(const char *what)
{
	fprintf(stderr, GEN_TOOL ": %s\n", what);
	exit(1);
}

/* The header every generator writes: process "srv" on "host", pid pid, MONOTONIC ns. */
static inline void gen_header(struct d9_header *h, uint32_t pid)
{
	memset(h, 0, sizeof(*h));
	h->major = 1;
	h->pid = pid;
	h->ppid = 1;
	h->clock_source = D9_CLOCK_MONOTONIC;
	h->ticks_per_sec = 1000000000;
	h->anchor_ticks = h->anchor_mono_ns = GEN_ANCHOR;
	h->anchor_realtime_ns = h->start_realtime_ns = 1700000000000000000ull;
	h->writer = GEN_TOOL;
	h->process = "srv";
	h->cmdline = "srv";
	h->cmdline_len = 3;
	h->hostname = "host";
	h->boot_id = "boot";
}

/* Starts a segment of at most cap bytes with header h and the schema of flags schema (D9_SCHEMA_*:
 * Unpark's statistics...): header, schema, an open DEFS chunk. */
static inline void gen_begin_header_schema(struct gen *g, const struct d9_header *h, size_t cap,
	uint32_t schema)
{
	memset(g, 0, sizeof(*g));
	g->cap = cap;
	g->schema = schema;
	if (!(g->buf = calloc(1, cap)))
		die("out of memory");
	d9_wbuf_init(&g->w, g->buf, cap);
	g->w.p += d9_prefix_encode(g->w.p, cap);
	if (d9_header_write(&g->w, h) || d9_schema_write(&g->w, schema))
		die("header");
	g->defs = d9_chunk_open(&g->w, D9_CHUNK_DEFS);
}

static inline void gen_begin_header(struct gen *g, const struct d9_header *h, size_t cap)
{
	gen_begin_header_schema(g, h, cap, 0);
}

/* Starts a segment of at most cap bytes for pid, with gen_header's header. */
static inline void gen_begin(struct gen *g, uint32_t pid, size_t cap)
{
	struct d9_header h;

	gen_header(&h, pid);
	gen_begin_header(g, &h, cap);
}

static inline void str(struct gen *g, uint64_t id, const char *s)
{
	d9_def_string(&g->w, id, s, strlen(s));
}

/* Closes the DEFS chunk (first time) and opens an events chunk of thread tid, worker worker. */
static inline struct d9_enc *events(struct gen *g, uint32_t tid, uint32_t worker)
{
	if (g->defs) {
		if (d9_chunk_close(&g->w, g->defs))
			die("defs chunk");
		g->defs = NULL;
	}
	if (d9_enc_begin(&g->e, g->w.p, (size_t)(g->w.end - g->w.p), tid, worker, GEN_ANCHOR, 0,
		g->schema))
		die("events chunk");
	return &g->e;
}

static inline void events_end(struct gen *g)
{
	g->w.p += d9_enc_end(&g->e, 1);
}

/* Writes the segment to dir/name (dir is created when missing) and frees it; sealed: ends with
 * a TRAILER (its totals are not checked by the analyzer), as a writer that closed it cleanly
 * leaves it; unsealed: no trailer, as a writer that stopped (FORMAT.md, section 11). */
static inline void write_out_as(struct gen *g, const char *dir, const char *name, int sealed)
{
	char path[4096];
	struct d9_trailer tr;

	memset(&tr, 0, sizeof(tr));
	tr.flags = g->trailer_flags;
	tr.end_time = g->end_time;
	if (g->defs) {
		if (d9_chunk_close(&g->w, g->defs))
			die("defs chunk");
		g->defs = NULL;
	}
	if (sealed && d9_trailer_write(&g->w, &tr))
		die("trailer");
	size_t len = (size_t)(g->w.p - g->buf);

	if (g->w.err)
		die("encoding");
	if (mkdir(dir, 0700) && errno != EEXIST)
		die(dir);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(g->buf, 1, len, f) != len || fclose(f))
		die(path);
	free(g->buf);
}

static inline void write_out(struct gen *g, const char *dir, const char *name)
{
	write_out_as(g, dir, name, 1);
}

#endif
