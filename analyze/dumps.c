/* dumps.c: reads the manifests of flight-recorder dumps (agent/flight.c; README.md, "Flight
 * recorder") that sit next to the segments being analyzed. A manifest is small JSON the agent
 * writes itself; it is still read as hostile input: at most 64 KiB, every value looked up inside
 * the bounds of the text, numbers checked, unknown or malformed manifests skipped. */
#include "dumps.h"
#include "json.h"
#include "trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST_MAX (64u << 10)

/* The first `"key":` in [p, end) (a key inside a string value cannot look like this: the agent
 * escapes nothing it writes there, and a manifest that fools this only misleads itself). */
static const char *find_key(const char *p, const char *end, const char *key)
{
	char pat[40];
	int n = snprintf(pat, sizeof(pat), "\"%s\":", key);

	if (n <= 0 || (size_t)n >= sizeof(pat) || end - p < n)
		return NULL;
	const char *q = memmem(p, (size_t)(end - p), pat, (size_t)n);
	return q ? q + n : NULL;
}

static int get_u64(const char *p, const char *end, const char *key, uint64_t *out)
{
	const char *v = find_key(p, end, key);
	uint64_t x = 0;
	int digits = 0;

	if (!v)
		return -1;
	while (v < end && *v >= '0' && *v <= '9' && digits < 20) {
		uint64_t d = (uint64_t)(*v++ - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
		digits++;
	}
	if (!digits)
		return -1;
	*out = x;
	return 0;
}

/* A string value of at most cap-1 plain characters (no escapes: the agent writes none). */
static int get_str(const char *p, const char *end, const char *key, char *out, size_t cap)
{
	const char *v = find_key(p, end, key);
	size_t n = 0;

	if (!v || v >= end || *v++ != '"')
		return -1;
	while (v < end && *v != '"') {
		if (*v == '\\' || (unsigned char)*v < 0x20 || n + 1 >= cap)
			return -1;
		out[n++] = *v++;
	}
	if (v >= end)
		return -1;
	out[n] = 0;
	return 0;
}

/* Reads path (a regular file, not followed if a link) into a NUL-terminated buffer. */
static char *read_small(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	char *buf = NULL;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
		(uint64_t)st.st_size > MANIFEST_MAX || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return NULL;
	}
	ssize_t n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n <= 0) {
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	*len = (size_t)n;
	return buf;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* 1 when the manifest text names a segment of t in directory dir (X.bin also matches the
 * X.bin.gz the compressor made of it). */
static int names_input(const char *const *paths, size_t npaths, const char *dir, size_t dirlen,
	const char *text, const char *end)
{
	const char *list = find_key(text, end, "segments");

	if (!list)
		return 0;
	for (size_t i = 0; i < npaths; i++) {
		const char *path = paths[i];
		const char *b = base_name(path);
		if ((size_t)(b - path) != dirlen + 1 || strncmp(path, dir, dirlen))
			continue;
		size_t n = strlen(b);
		if (n > 3 && !strcmp(b + n - 3, ".gz"))
			n -= 3;
		char pat[512];
		if (n + 3 > sizeof(pat))
			continue;
		pat[0] = '"';
		memcpy(pat + 1, b, n);
		pat[n + 1] = '"';
		if (memmem(list, (size_t)(end - list), pat, n + 2))
			return 1;
	}
	return 0;
}

/* Parses one manifest into d. Returns 0, or -1 when it is not one (skipped). */
static int parse(const char *text, size_t len, struct d9__dump *d)
{
	const char *end = text + len;
	const char *trig = find_key(text, end, "trigger");
	const char *more = find_key(text, end, "extended_by");
	uint64_t pid, tid = 0, worker = 0, real;

	if (!strstr(text, "\"d9_dump\":1") || !trig || *trig != '{' || !more || more < trig)
		return -1;
	/* the first trigger's object ends where extended_by starts */
	if (get_str(trig, more, "trigger", d->trigger, sizeof(d->trigger)) ||
		get_str(trig, more, "unit", d->unit, sizeof(d->unit)) ||
		get_u64(trig, more, "time_realtime_ns", &real) || real > INT64_MAX ||
		get_u64(trig, more, "value", &d->value) ||
		get_u64(trig, more, "threshold", &d->threshold) ||
		get_u64(text, trig, "pid", &pid) || pid > UINT32_MAX)
		return -1;
	get_u64(trig, more, "tid", &tid);
	get_u64(trig, more, "worker", &worker);
	d->time_real = (int64_t)real;
	d->pid = (uint32_t)pid;
	d->tid = tid > UINT32_MAX ? 0 : (uint32_t)tid;
	d->worker = worker > UINT32_MAX ? 0 : (uint32_t)worker;
	d->extensions = d->refused = d->evicted = 0;
	get_u64(more, end, "extensions", &d->extensions);
	get_u64(more, end, "refused_by_cooldown", &d->refused);
	get_u64(more, end, "evicted_events", &d->evicted);
	return 0;
}

static int cmp_dump(const void *a, const void *b)
{
	const struct d9__dump *x = a, *y = b;

	return x->time_real < y->time_real ? -1 : x->time_real > y->time_real;
}

/* The manifests of one directory (dir: dirlen bytes of a segment path). */
static int load_dir(struct d9__trace *t, const char *const *paths, size_t npaths, const char *dir,
	size_t dirlen)
{
	char dname[4096];

	if (dirlen >= sizeof(dname))
		return 0;
	memcpy(dname, dir, dirlen);
	dname[dirlen] = 0;
	DIR *dp = opendir(dirlen ? dname : ".");
	struct dirent *e;
	if (!dp)
		return 0;
	while ((e = readdir(dp))) {
		size_t n = strlen(e->d_name);
		if (n < 10 || strcmp(e->d_name + n - 5, ".json") || !strstr(e->d_name, ".dump-"))
			continue;
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", dirlen ? dname : ".", e->d_name);
		size_t len;
		char *text = read_small(path, &len);
		struct d9__dump d;
		memset(&d, 0, sizeof(d));
		if (text && parse(text, len, &d) == 0 && names_input(paths, npaths, dir, dirlen, text, text + len)) {
			struct d9__dump *a = realloc(t->dumps, (t->ndumps + 1) * sizeof(*a));
			d.manifest = strdup(path);
			if (!a || !d.manifest) {
				free(a ? NULL : d.manifest);
				if (a)
					t->dumps = a;
				free(text);
				closedir(dp);
				return -ENOMEM;
			}
			t->dumps = a;
			t->dumps[t->ndumps++] = d;
		}
		free(text);
	}
	closedir(dp);
	return 0;
}

int d9__dumps_load(struct d9__trace *t, const char *const *paths, size_t npaths)
{
	for (size_t i = 0; i < npaths; i++) {
		const char *path = paths[i];
		const char *b = base_name(path);
		size_t dirlen = b > path ? (size_t)(b - path) - 1 : 0;
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++) {
			const char *q = paths[j], *qb = base_name(q);
			seen = (size_t)(qb > q ? qb - q - 1 : 0) == dirlen && !strncmp(q, path, dirlen);
		}
		if (!seen && load_dir(t, paths, npaths, path, dirlen))
			return -ENOMEM;
	}
	if (t->ndumps > 1)
		qsort(t->dumps, t->ndumps, sizeof(*t->dumps), cmp_dump);
	return 0;
}

void d9__dumps_free(struct d9__trace *t)
{
	for (size_t i = 0; i < t->ndumps; i++)
		free(t->dumps[i].manifest);
	free(t->dumps);
	t->dumps = NULL;
	t->ndumps = 0;
}

const char *d9__dump_what(char *buf, size_t cap, const struct d9__dump *d)
{
	char a[32], b[32];

	if (!strcmp(d->unit, "ns"))
		snprintf(buf, cap, "%s > %s (%s)", d->trigger,
			d9__fmt_dur(a, sizeof(a), d->threshold > INT64_MAX ? INT64_MAX : (int64_t)d->threshold),
			d9__fmt_dur(b, sizeof(b), d->value > INT64_MAX ? INT64_MAX : (int64_t)d->value));
	else if (!strcmp(d->unit, "events"))
		snprintf(buf, cap, "drops: %" PRIu64 " events dropped within a second (threshold %"
			PRIu64 ")", d->value, d->threshold);
	else if (!strcmp(d->unit, "signal"))
		snprintf(buf, cap, "signal %" PRIu64, d->value);
	else if (!strcmp(d->trigger, "file"))
		snprintf(buf, cap, "a dump request file");
	else
		snprintf(buf, cap, "%s", d->trigger);
	return buf;
}

void d9__dump_json(FILE *f, const struct d9__dump *d, int64_t trace_start)
{
	fputs("{\"trigger\":", f);
	d9__json_cstr(f, d->trigger);
	fprintf(f, ",\"time_ns\":%" PRId64 ",\"offset_ns\":%" PRId64 ",\"value\":%" PRIu64
		",\"threshold\":%" PRIu64 ",\"unit\":", d->time_real, d->time_real - trace_start,
		d->value, d->threshold);
	d9__json_cstr(f, d->unit);
	fprintf(f, ",\"pid\":%u,\"tid\":%u,\"worker\":%u,\"extensions\":%" PRIu64
		",\"refused_by_cooldown\":%" PRIu64 ",\"evicted_events\":%" PRIu64 ",\"manifest\":",
		d->pid, d->tid, d->worker, d->extensions, d->refused, d->evicted);
	d9__json_cstr(f, d->manifest);
	fputc('}', f);
}
