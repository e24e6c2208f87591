/* util.h: small containers and parsers shared by the analyzer's subcommands: a u64-keyed hash
 * map, a bounded-memory latency histogram with exact small-count percentiles, and the duration
 * and time-window syntax of the command line (documented in README.md, "Analyzer"). */
#ifndef D9_ANALYZE_UTIL_H
#define D9_ANALYZE_UTIL_H
#include <stddef.h>
#include <stdint.h>

/* Open addressing, linear probing; values are never NULL (NULL means "absent"). */
struct d9__map {
	uint64_t *keys;
	void **vals;
	size_t cap, n; /* cap is 0 or a power of two; n < cap * 3 / 4 */
};
void *d9__map_get(const struct d9__map *m, uint64_t key);
/* Inserts or replaces. Returns 0 or -ENOMEM. */
int d9__map_put(struct d9__map *m, uint64_t key, void *val);
/* Removes key; returns its value or NULL. */
void *d9__map_del(struct d9__map *m, uint64_t key);
void d9__map_free(struct d9__map *m);
/* Iteration: for (size_t i = 0; i < m->cap; i++) if (m->vals && m->vals[i]) ... */
uint64_t d9__hash64(uint64_t x);
uint64_t d9__hash_bytes(const void *p, size_t n, uint64_t seed);

/* Histogram of non-negative values (ns). The first D9__HIST_EXACT values are kept as they are,
 * so percentiles are exact up to that count; past it they move into log buckets of 128 per
 * power of two (relative width <= 1/128), and a percentile is its bucket's midpoint clamped to
 * [min, max]: within 0.4%. Memory: at most 8 KiB raw + 59 KiB of buckets. */
#define D9__HIST_EXACT 1024
struct d9__hist {
	uint64_t n, sum, min, max;
	uint64_t *raw; /* n <= D9__HIST_EXACT: the values; afterwards NULL */
	uint32_t nraw, capraw;
	uint64_t *b; /* buckets once n > D9__HIST_EXACT */
};
void d9__hist_add(struct d9__hist *h, uint64_t v);
/* Nearest-rank percentile: the value of rank ceil(p / 100 * n) in sorted order (p in (0, 100]);
 * 0 when empty. Sorts the raw values in place. */
uint64_t d9__hist_pct(struct d9__hist *h, double p);
void d9__hist_free(struct d9__hist *h);

/* "250ms", "1.5s", "20us", "100ns", "2m", "1h" (a bare number is seconds) to ns. Returns 0 or
 * -EINVAL. */
int d9__parse_duration(const char *s, int64_t *ns);

/* A --from/--to value: relative to the trace start (a duration, e.g. "1.5s") or absolute wall
 * clock ("2026-11-22T05:40:00[.frac][Z]", local time unless Z; or "@1763790000.25", or a Unix
 * time in seconds with a decimal point, "1763790000.25"). */
struct d9__when {
	int set;
	int absolute; /* ns is CLOCK_REALTIME ns since 1970; else ns since the trace start */
	int64_t ns;
};
int d9__parse_when(const char *s, struct d9__when *w);

/* Formats ns as a short human duration ("20.1ms", "812us", "3.20s") into buf. */
const char *d9__fmt_dur(char *buf, size_t n, int64_t ns);

/* Grows the array at *(T **)pa of *n elements of elem bytes, new elements zeroed, so that index
 * i is inside it (at least doubling: amortized O(1) per element). Returns 0 or -ENOMEM (the
 * array is kept as it was). The analyzer's per-thread and per-stack arrays. */
int d9__grow(void *pa, size_t *n, size_t i, size_t elem);

/* Progress on long work (reading many segments, S3 downloads): one line on stderr, redrawn in
 * place and cleared at the end, only when stderr is a terminal and --quiet was not given
 * (README.md, "Progress"). d9__progress_args takes --quiet off every command line (main.c). */
void d9__progress_args(int *argc, char **argv);
/* 1 when progress lines may be shown. */
int d9__progress_wanted(void);
/* Redraws the line ("\rd9-analyze: " fmt, then clear to the end of the line) when 100 ms passed
 * since *last (CLOCK_MONOTONIC ns; 0: at once) or when force; sets *shown. */
void d9__progress_show(int64_t *last, int *shown, int force, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Clears a shown line ("\r", clear line) and resets *shown. */
void d9__progress_clear(int *shown);
#endif
