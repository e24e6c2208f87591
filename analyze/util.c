/* util.c: hash map, histogram and command-line parsers of the analyzer (util.h). The histogram
 * keeps memory bounded whatever the number of values; its accuracy is stated in util.h and in
 * README.md ("Analyzer"). */
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t d9__hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

uint64_t d9__hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ull ^ seed;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return d9__hash64(h);
}

void *d9__map_get(const struct d9__map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = d9__hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i])
			return NULL;
		if (m->keys[i] == key)
			return m->vals[i];
	}
}

static int map_grow(struct d9__map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	uint64_t *keys = calloc(cap, sizeof(*keys));
	void **vals = calloc(cap, sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (size_t j = 0; j < m->cap; j++) {
		if (!m->vals[j])
			continue;
		size_t i = d9__hash64(m->keys[j]) & (cap - 1);
		while (vals[i])
			i = (i + 1) & (cap - 1);
		keys[i] = m->keys[j];
		vals[i] = m->vals[j];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

int d9__map_put(struct d9__map *m, uint64_t key, void *val)
{
	if ((m->n + 1) * 4 >= m->cap * 3 && map_grow(m))
		return -ENOMEM;
	size_t i = d9__hash64(key) & (m->cap - 1);
	while (m->vals[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->vals[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

void *d9__map_del(struct d9__map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1, i = d9__hash64(key) & mask;
	while (m->vals[i] && m->keys[i] != key)
		i = (i + 1) & mask;
	void *v = m->vals[i];
	if (!v)
		return NULL;
	/* backward-shift deletion keeps every probe chain unbroken without tombstones */
	size_t j = i;
	for (;;) {
		m->vals[i] = NULL;
		for (;;) {
			j = (j + 1) & mask;
			if (!m->vals[j])
				goto out;
			size_t k = d9__hash64(m->keys[j]) & mask;
			if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
				continue; /* j's home lies in (i, j]: it may stay */
			break;
		}
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		i = j;
	}
out:
	m->n--;
	return v;
}

void d9__map_free(struct d9__map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- histogram ---------------------------------------------------------------------------- */
#define SUB 128 /* buckets per power of two */
#define NBUCKETS (SUB + (64 - 7) * SUB)

static size_t bucket_of(uint64_t v)
{
	if (v < SUB)
		return (size_t)v;
	int e = 63 - __builtin_clzll(v); /* >= 7 */
	return SUB + (size_t)(e - 7) * SUB + (size_t)((v >> (e - 7)) - SUB);
}

static void bucket_range(size_t b, uint64_t *lo, uint64_t *width)
{
	if (b < SUB) {
		*lo = b;
		*width = 1;
		return;
	}
	size_t e = (b - SUB) / SUB + 7, sub = (b - SUB) % SUB;
	*lo = (uint64_t)(SUB + sub) << (e - 7);
	*width = (uint64_t)1 << (e - 7);
}

void d9__hist_add(struct d9__hist *h, uint64_t v)
{
	if (!h->n || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->n++;
	h->sum += v;
	if (!h->b && h->nraw < D9__HIST_EXACT) {
		if (h->nraw == h->capraw) {
			uint32_t cap = h->capraw ? h->capraw * 2 : 16;
			uint64_t *r = realloc(h->raw, cap * sizeof(*r));
			if (r) {
				h->raw = r;
				h->capraw = cap;
			}
		}
		if (h->nraw < h->capraw) {
			h->raw[h->nraw++] = v;
			return;
		}
	}
	if (!h->b) {
		h->b = calloc(NBUCKETS, sizeof(*h->b));
		if (!h->b)
			return; /* out of memory: count, sum and max stay exact */
		for (uint32_t i = 0; i < h->nraw; i++)
			h->b[bucket_of(h->raw[i])]++;
		free(h->raw);
		h->raw = NULL;
		h->nraw = h->capraw = 0;
	}
	h->b[bucket_of(v)]++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t d9__hist_pct(struct d9__hist *h, double p)
{
	if (!h->n)
		return 0;
	uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->n);
	if (rank < 1)
		rank = 1;
	if (rank > h->n)
		rank = h->n;
	if (rank == h->n)
		return h->max;
	if (!h->b) {
		if (h->nraw)
			qsort(h->raw, h->nraw, sizeof(*h->raw), cmp_u64);
		return h->nraw ? h->raw[rank - 1 < h->nraw ? rank - 1 : h->nraw - 1] : h->max;
	}
	uint64_t seen = 0;
	for (size_t b = 0; b < NBUCKETS; b++) {
		seen += h->b[b];
		if (seen >= rank) {
			uint64_t lo, w;
			bucket_range(b, &lo, &w);
			uint64_t v = lo + (w - 1) / 2;
			return v < h->min ? h->min : v > h->max ? h->max : v;
		}
	}
	return h->max;
}

void d9__hist_free(struct d9__hist *h)
{
	free(h->raw);
	free(h->b);
	memset(h, 0, sizeof(*h));
}

/* ---- parsers ------------------------------------------------------------------------------ */
int d9__parse_duration(const char *s, int64_t *ns)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	double mul;

	if (end == s || errno || !(v >= 0) || *s == '-' || *s == '+' || isinf(v))
		return -EINVAL;
	if (!*end || !strcmp(end, "s"))
		mul = 1e9;
	else if (!strcmp(end, "ns"))
		mul = 1;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "m"))
		mul = 60e9;
	else if (!strcmp(end, "h"))
		mul = 3600e9;
	else
		return -EINVAL;
	if (v * mul > 9.2e18)
		return -EINVAL;
	*ns = (int64_t)llround(v * mul);
	return 0;
}

/* Fractional seconds ".123" at s into ns; returns the end or NULL. */
static const char *parse_frac(const char *s, int64_t *ns)
{
	int64_t scale = 100000000;

	*ns = 0;
	if (*s != '.')
		return s;
	s++;
	if (*s < '0' || *s > '9')
		return NULL;
	for (; *s >= '0' && *s <= '9'; s++) {
		*ns += (*s - '0') * scale;
		scale /= 10;
	}
	return s;
}

int d9__parse_when(const char *s, struct d9__when *w)
{
	memset(w, 0, sizeof(*w));
	if (!s || !*s)
		return -EINVAL;
	if (strchr(s, 'T') && strchr(s, '-')) {
		struct tm tm;
		memset(&tm, 0, sizeof(tm));
		const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
		int64_t frac;
		if (!p || !(p = parse_frac(p, &frac)))
			return -EINVAL;
		time_t t;
		if (!strcmp(p, "Z")) {
			t = timegm(&tm);
		} else if (!*p) {
			tm.tm_isdst = -1;
			t = mktime(&tm);
		} else {
			return -EINVAL;
		}
		if (t == (time_t)-1)
			return -EINVAL;
		w->set = w->absolute = 1;
		w->ns = (int64_t)t * 1000000000 + frac;
		return 0;
	}
	int forced = *s == '@';
	const char *p = s + forced;
	char *end;
	errno = 0;
	long long sec = strtoll(p, &end, 10);
	/* a bare number from 10^9 on (2001 and later) is a Unix time; below it, seconds from the
	 * trace start */
	if (!errno && end != p && *p >= '0' && *p <= '9' && (forced || sec >= 1000000000LL)) {
		int64_t frac;
		const char *q = parse_frac(end, &frac);
		if (!q || *q || sec > 9000000000LL)
			return -EINVAL;
		w->set = w->absolute = 1;
		w->ns = sec * 1000000000LL + frac;
		return 0;
	}
	if (forced || d9__parse_duration(s, &w->ns))
		return -EINVAL;
	w->set = 1;
	return 0;
}

const char *d9__fmt_dur(char *buf, size_t n, int64_t ns)
{
	double v = (double)ns;

	if (ns < 0)
		snprintf(buf, n, "-");
	else if (ns < 1000)
		snprintf(buf, n, "%lldns", (long long)ns);
	else if (ns < 1000000)
		snprintf(buf, n, "%.3gus", v / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, n, "%.3gms", v / 1e6);
	else
		snprintf(buf, n, "%.3fs", v / 1e9);
	return buf;
}

int d9__grow(void *pa, size_t *n, size_t i, size_t elem)
{
	void *a, *b;

	if (i < *n)
		return 0;
	size_t m = i + 1 > *n * 2 ? i + 1 : *n * 2;
	memcpy(&a, pa, sizeof(a)); /* pa points to a T *: copied, not aliased */
	if (m > SIZE_MAX / elem || !(b = realloc(a, m * elem)))
		return -ENOMEM;
	memset((char *)b + *n * elem, 0, (m - *n) * elem);
	memcpy(pa, &b, sizeof(b));
	*n = m;
	return 0;
}

/* ---- progress lines ---------------------------------------------------------------------- */
static int progress_quiet; /* --quiet */

void d9__progress_args(int *argc, char **argv)
{
	int j = 1;

	for (int i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--quiet"))
			progress_quiet = 1;
		else
			argv[j++] = argv[i];
	}
	argv[j] = NULL;
	*argc = j;
}

int d9__progress_wanted(void)
{
	return !progress_quiet && isatty(2);
}

void d9__progress_show(int64_t *last, int *shown, int force, const char *fmt, ...)
{
	struct timespec ts;
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (!force && *last && now - *last < 100000000)
		return;
	*last = now;
	fputs("\rd9-analyze: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\033[K", stderr);
	fflush(stderr);
	*shown = 1;
}

void d9__progress_clear(int *shown)
{
	if (*shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		*shown = 0;
	}
}
