/* s3.c: d9-analyze reading s3://bucket/prefix directly, and `d9-analyze ls s3://...`. The keys put
 * time first ({prefix}/{YYYY-MM-DD}/{HHMM}/{service}/{host}/{boot}-{pid}-{seq}.bin.gz, agent/s3.h),
 * so the walk lists one level at a time (ListObjectsV2 with a prefix and the '/' delimiter) and
 * descends only into the days and minutes the --from/--to range covers and the --service/--host
 * asked for. Selected objects are downloaded into a temporary directory (removed at exit) and
 * read like local segments. Endpoint, region and credentials come from the agent's variables
 * (README.md, "S3"); libcurl is linked normally here. */
#include "analyze.h"
#include "inputs.h"
#include "s3.h"
#include "util.h"

#include <curl/curl.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* what main.c took off the command line (d9__s3_args) */
static struct {
	int64_t from_ns, to_ns; /* CLOCK_REALTIME; 0 / INT64_MAX: open */
	const char *service, *host;
} sel = { 0, INT64_MAX, NULL, NULL };

#define LOOKBACK_NS (600 * 1000000000ll) /* the agent's default D9_ROTATION_PERIOD, 10 min */

struct obj {
	char *key;
	uint64_t size;
};

struct walk {
	struct d9__s3_cfg cfg;
	struct d9__s3_creds cr;
	struct d9__curl c; /* libcurl, loaded for the first S3 input */
	CURL *e;
	int64_t lo, hi; /* segments started in [lo, hi]: from - lookback .. to */
	struct obj *o;
	size_t n, cap;
	int err; /* a listing failed (said on stderr) */
};

static char tmpdir[4096]; /* downloads; removed at exit */

void d9__s3_args(int *argc, char **argv)
{
	int w = 1;

	for (int i = 1; i < *argc; i++) {
		const char *a = argv[i], *v = NULL;
		int r = 0;
		if ((r = d9__opt(*argc, argv, &i, "--service", &v)) == 1) {
			sel.service = v;
			continue;
		}
		if (r == 0 && (r = d9__opt(*argc, argv, &i, "--host", &v)) == 1) {
			sel.host = v;
			continue;
		}
		if (r < 0)
			exit(D9_EXIT_USAGE);
		/* --from/--to stay for the command; absolute ones also choose the listing */
		struct d9__when wh;
		const char *val = NULL;
		if (!strncmp(a, "--from=", 7) || !strncmp(a, "--to=", 5))
			val = strchr(a, '=') + 1;
		else if ((!strcmp(a, "--from") || !strcmp(a, "--to")) && i + 1 < *argc)
			val = argv[i + 1];
		if (val && d9__parse_when(val, &wh) == 0 && wh.absolute) {
			if (a[2] == 'f')
				sel.from_ns = wh.ns;
			else
				sel.to_ns = wh.ns;
		}
		argv[w++] = argv[i];
	}
	argv[w] = NULL;
	*argc = w;
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

struct mem {
	char *p;
	size_t n, cap;
};

static size_t to_mem(char *buf, size_t size, size_t n, void *ctx)
{
	struct mem *m = ctx;
	size_t k = size * n;

	if (m->n + k + 1 > m->cap) {
		size_t cap = (m->n + k + 1) * 2;
		char *p = realloc(m->p, cap);
		if (!p)
			return 0;
		m->p = p;
		m->cap = cap;
	}
	memcpy(m->p + m->n, buf, k);
	m->n += k;
	m->p[m->n] = 0;
	return k;
}

static size_t to_file(char *buf, size_t size, size_t n, void *ctx)
{
	return fwrite(buf, size, n, ctx);
}

/* GET url signed with SigV4; the body to fn(ctx). Returns the HTTP status, or -1 (said why). */
static long http_get(struct walk *w, const char *url, curl_write_callback fn, void *ctx)
{
	struct curl_slist *h = NULL;
	char sig[96], up[600], tok[4200];
	long code = 0;

	/* SHA-256 of the empty body: libcurl 7.88 signs this header but does not add it */
	h = w->c.slist_append(h, "x-amz-content-sha256: "
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	if (w->cr.token[0]) {
		snprintf(tok, sizeof(tok), "x-amz-security-token: %s", w->cr.token);
		h = w->c.slist_append(h, tok);
	}
	d9__s3_sigv4(&w->cfg, sig, sizeof(sig));
	snprintf(up, sizeof(up), "%s:%s", w->cr.key_id, w->cr.secret);
	w->c.easy_reset(w->e);
	w->c.easy_setopt(w->e, CURLOPT_URL, url);
	w->c.easy_setopt(w->e, CURLOPT_NOSIGNAL, 1L);
	w->c.easy_setopt(w->e, CURLOPT_HTTPHEADER, h);
	w->c.easy_setopt(w->e, CURLOPT_AWS_SIGV4, sig);
	w->c.easy_setopt(w->e, CURLOPT_USERPWD, up);
	w->c.easy_setopt(w->e, CURLOPT_WRITEFUNCTION, fn);
	w->c.easy_setopt(w->e, CURLOPT_WRITEDATA, ctx);
	w->c.easy_setopt(w->e, CURLOPT_CONNECTTIMEOUT, 20L);
	w->c.easy_setopt(w->e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	w->c.easy_setopt(w->e, CURLOPT_LOW_SPEED_TIME, 60L);
	CURLcode cc = w->c.easy_perform(w->e);
	w->c.slist_free_all(h);
	memset(up, 0, sizeof(up));
	if (cc != CURLE_OK) {
		fprintf(stderr, "d9-analyze: %s: %s\n", url, w->c.easy_strerror(cc));
		return -1;
	}
	w->c.easy_getinfo(w->e, CURLINFO_RESPONSE_CODE, &code);
	return code;
}

/* ---- ListObjectsV2 ---------------------------------------------------------------------------- */

/* The text of the next <tag>...</tag> at or after *p (XML entities decoded) into a new string;
 * *p moves past it. NULL when there is none. */
static char *xml_next(const char **p, const char *end, const char *tag)
{
	char open[64], close[64];

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *a = strstr(*p, open);
	if (!a || a >= end)
		return NULL;
	a += strlen(open);
	const char *b = strstr(a, close);
	if (!b || b > end)
		return NULL;
	*p = b + strlen(close);
	char *s = malloc((size_t)(b - a) + 1), *o = s;
	if (!s)
		return NULL;
	while (a < b) {
		static const struct { const char *ent; char ch; } ents[] = {
			{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' } };
		size_t i, k = sizeof(ents) / sizeof(ents[0]);
		for (i = 0; i < k; i++)
			if (!strncmp(a, ents[i].ent, strlen(ents[i].ent)))
				break;
		if (i < k) {
			*o++ = ents[i].ch;
			a += strlen(ents[i].ent);
		} else {
			*o++ = *a++;
		}
	}
	*o = 0;
	return s;
}

typedef int list_fn(struct walk *w, const char *name, int is_prefix, uint64_t size);

/* Lists prefix (with the '/' delimiter when delim), page by page, calling fn for each common
 * prefix and each object. Query parameters go in sorted order and SigV4-encoded: libcurl 7.88
 * signs the query as it is sent. Returns 0, or -EIO (said on stderr). */
static int list(struct walk *w, const char *prefix, int delim, list_fn *fn)
{
	char *token = NULL;
	int err = 0;

	do {
		char q[8400], ep[4096], et[4096], url[12800];
		struct mem m = { 0 };
		if (d9__s3_uri_encode(ep, sizeof(ep), prefix, 0) >= sizeof(ep) ||
			(token && d9__s3_uri_encode(et, sizeof(et), token, 0) >= sizeof(et))) {
			err = -ENAMETOOLONG;
			break;
		}
		snprintf(q, sizeof(q), "%s%s%s%slist-type=2&prefix=%s", token ? "continuation-token=" : "",
			token ? et : "", token ? "&" : "", delim ? "delimiter=%2F&" : "", ep);
		if (d9__s3_url(&w->cfg, "", q, url, sizeof(url))) {
			err = -ENAMETOOLONG;
			break;
		}
		long code = http_get(w, url, to_mem, &m);
		if (code != 200) {
			if (code > 0) {
				const char *p = m.p ? m.p : "";
				char *c = xml_next(&p, p + strlen(p), "Code");
				fprintf(stderr, "d9-analyze: s3://%s/%s: HTTP %ld%s%s%s\n", w->cfg.bucket, prefix,
					code, c ? " (" : "", c ? c : "", c ? ")" : "");
				free(c);
			}
			free(m.p);
			err = -EIO;
			break;
		}
		const char *p = m.p ? m.p : "", *end = p + m.n;
		free(token);
		token = NULL;
		const char *t = p;
		char *trunc = xml_next(&t, end, "IsTruncated");
		if (trunc && !strcmp(trunc, "true")) {
			t = p;
			token = xml_next(&t, end, "NextContinuationToken");
		}
		free(trunc);
		/* <Contents><Key>..</Key>..<Size>..</Size></Contents>, <CommonPrefixes><Prefix>.. */
		const char *c = p;
		for (;;) {
			const char *s = strstr(c, "<Contents>");
			if (!s)
				break;
			const char *e = strstr(s, "</Contents>");
			if (!e)
				break;
			const char *k = s;
			char *key = xml_next(&k, e, "Key"), *size = xml_next(&k, e, "Size");
			if (key && !err)
				err = fn(w, key, 0, size ? strtoull(size, NULL, 10) : 0);
			free(key);
			free(size);
			c = e + 11;
		}
		c = p;
		for (;;) {
			const char *s = strstr(c, "<CommonPrefixes>");
			if (!s)
				break;
			const char *e = strstr(s, "</CommonPrefixes>");
			if (!e)
				break;
			const char *k = s;
			char *pre = xml_next(&k, e, "Prefix");
			if (pre && !err)
				err = fn(w, pre, 1, 0);
			free(pre);
			c = e + 17;
		}
		free(m.p);
	} while (token && !err);
	free(token);
	if (err == -ENAMETOOLONG)
		fprintf(stderr, "d9-analyze: s3://%s/%s: prefix too long\n", w->cfg.bucket, prefix);
	return err;
}

/* ---- the walk ------------------------------------------------------------------------------------- */

static int walk_level(struct walk *w, const char *prefix, int level);

static int add_obj(struct walk *w, const char *key, uint64_t size)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct obj *o = realloc(w->o, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		w->o = o;
		w->cap = cap;
	}
	if (!(w->o[w->n].key = strdup(key)))
		return -ENOMEM;
	w->o[w->n++].size = size;
	return 0;
}

/* The last component of a common prefix "a/b/c/" -> "c" (into out). */
static void last_part(const char *pre, char *out, size_t cap)
{
	size_t n = strlen(pre);

	if (n && pre[n - 1] == '/')
		n--;
	size_t s = n;
	while (s && pre[s - 1] != '/')
		s--;
	snprintf(out, cap, "%.*s", (int)(n - s), pre + s);
}

static int64_t day_start(const char *d)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	const char *e = strptime(d, "%Y-%m-%d", &tm);
	if (!e || *e)
		return -1;
	return (int64_t)timegm(&tm) * 1000000000ll;
}

static int level_fn(struct walk *w, const char *name, int is_prefix, uint64_t size);
static int cur_level; /* of the listing level_fn serves */
static int64_t cur_day; /* the day (ns) above a minute listing */

static int level_fn(struct walk *w, const char *name, int is_prefix, uint64_t size)
{
	char part[256];
	const int level = cur_level;

	if (!is_prefix)
		return level >= 4 ? add_obj(w, name, size) : 0; /* not of the layout: left alone */
	last_part(name, part, sizeof(part));
	if (level == 0) {
		int64_t d = day_start(part);
		if (d < 0 || d + 86400000000000ll <= w->lo || d > w->hi)
			return 0;
		int64_t saved = cur_day;
		cur_day = d;
		int err = walk_level(w, name, 1);
		cur_day = saved;
		cur_level = level;
		return err;
	}
	if (level == 1) {
		if (strlen(part) != 4 || strspn(part, "0123456789") != 4)
			return 0;
		int64_t m = cur_day + ((part[0] - '0') * 10 + (part[1] - '0')) * 3600000000000ll +
			((part[2] - '0') * 10 + (part[3] - '0')) * 60000000000ll;
		if (m + 60000000000ll <= w->lo || m > w->hi)
			return 0;
	}
	if ((level == 2 && sel.service && strcmp(part, sel.service)) ||
		(level == 3 && sel.host && strcmp(part, sel.host)))
		return 0;
	int err = walk_level(w, name, level + 1);
	cur_level = level;
	return err;
}

/* Level 0 lists days, 1 minutes, 2 services, 3 hosts, 4 objects (no delimiter below). A chosen
 * service or host is not listed: its prefix is known. */
static int walk_level(struct walk *w, const char *prefix, int level)
{
	char p[4096];

	if ((level == 2 && sel.service) || (level == 3 && sel.host)) {
		if (snprintf(p, sizeof(p), "%s%s/", prefix, level == 2 ? sel.service : sel.host) >=
			(int)sizeof(p))
			return -ENAMETOOLONG;
		return walk_level(w, p, level + 1);
	}
	cur_level = level;
	return list(w, prefix, level < 4, level_fn);
}

static int walk_init(struct walk *w, const char *url, char *base, size_t cap)
{
	const char *why;

	memset(w, 0, sizeof(*w));
	if (d9__s3_config_env(&w->cfg, &why, 1) < 0) {
		fprintf(stderr, "d9-analyze: %s\n", why);
		return -EINVAL;
	}
	const char *b = url + 5, *slash = strchr(b, '/');
	size_t bn = slash ? (size_t)(slash - b) : strlen(b);
	if (!bn || bn >= sizeof(w->cfg.bucket)) {
		fprintf(stderr, "d9-analyze: %s: want s3://BUCKET[/PREFIX]\n", url);
		return -EINVAL;
	}
	memcpy(w->cfg.bucket, b, bn);
	w->cfg.bucket[bn] = 0;
	if (d9__s3_bucket_check(w->cfg.bucket)) {
		fprintf(stderr, "d9-analyze: %s: not a bucket name d9 accepts\n", url);
		return -EINVAL;
	}
	/* the prefix as given, '/' at its end (the layout starts below it) */
	const char *pre = slash ? slash + 1 : "";
	while (*pre == '/')
		pre++;
	int n = snprintf(base, cap, "%s", pre);
	while (n > 0 && base[n - 1] == '/')
		base[--n] = 0;
	if (n > 0 && (size_t)n + 2 < cap)
		strcat(base, "/");
	char why2[512];
	if (d9__s3_creds_load(&w->cfg, &w->cr, why2, sizeof(why2))) {
		fprintf(stderr, "d9-analyze: %s: no credentials: %s\n", url, why2);
		return -EINVAL;
	}
	void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "d9-analyze: %s: cannot load libcurl.so.4 (%s)\n", url, dlerror());
		return -EINVAL;
	}
	if (d9__curl_syms(&w->c, lib, why2, sizeof(why2))) {
		fprintf(stderr, "d9-analyze: %s: %s\n", url, why2);
		return -EINVAL;
	}
	w->c.global_init(CURL_GLOBAL_DEFAULT);
	if (!(w->e = w->c.easy_init()))
		return -ENOMEM;
	int64_t look = LOOKBACK_NS, rp;
	const char *v = getenv("D9_ROTATION_PERIOD");
	if (v && d9__parse_duration(v, &rp) == 0 && rp > 0)
		look = rp;
	w->lo = sel.from_ns > look ? sel.from_ns - look : 0;
	w->hi = sel.to_ns;
	return 0;
}

static void walk_free(struct walk *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->o[i].key);
	free(w->o);
	if (w->e)
		w->c.easy_cleanup(w->e);
	memset(&w->cr, 0, sizeof(w->cr));
}

/* The parts of a key below the base prefix: day, minute, service, host, name (pointers into
 * copy). Returns 0 when key follows the layout. */
static int key_parts(const char *key, size_t base_len, char *copy, size_t cap, char *part[5])
{
	if (strlen(key) < base_len || snprintf(copy, cap, "%s", key + base_len) >= (int)cap)
		return -1;
	char *s = copy;
	for (int i = 0; i < 5; i++) {
		part[i] = s;
		char *sl = strchr(s, '/');
		if (i < 4) {
			if (!sl)
				return -1;
			*sl = 0;
			s = sl + 1;
		} else if (sl) {
			return -1;
		}
	}
	return 0;
}

/* Removes dir's files (and its subdirectories' files: one level), then dir. */
static void rm_dir(const char *dir, int depth)
{
	char path[8192];
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (unlink(path) != 0 && errno == EISDIR && depth == 0)
			rm_dir(path, 1);
		else if (depth == 0 && e->d_type == DT_DIR)
			rm_dir(path, 1);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static void rm_tmpdir(void)
{
	if (tmpdir[0])
		rm_dir(tmpdir, 0);
}

int d9__s3_fetch(const char *url, char *dir, size_t cap, int *bad)
{
	struct walk w;
	char base[2048];
	int err = walk_init(&w, url, base, sizeof(base));

	if (err)
		goto out;
	err = walk_level(&w, base, 0);
	if (err == -ENOMEM)
		goto out;
	int listed_bad = err != 0;
	if (err)
		(*bad)++; /* said why; what was listed is still read */
	if (!tmpdir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(tmpdir, sizeof(tmpdir), "%s/d9-analyze-s3-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(tmpdir)) {
			fprintf(stderr, "d9-analyze: %s: %s\n", tmpdir, strerror(errno));
			tmpdir[0] = 0;
			err = -EIO;
			goto out;
		}
		atexit(rm_tmpdir);
	}
	/* one subdirectory per s3:// argument: each is read as a directory of its own */
	static int nfetch;
	snprintf(dir, cap, "%s/%d", tmpdir, nfetch++);
	if (mkdir(dir, 0700) != 0) {
		fprintf(stderr, "d9-analyze: %s: %s\n", dir, strerror(errno));
		err = -EIO;
		goto out;
	}
	size_t got = 0;
	/* progress on a terminal (util.h): segments and bytes fetched of the listed ones */
	int progress = d9__progress_wanted(), shown = 0;
	int64_t last = 0;
	uint64_t total = 0, done = 0;
	for (size_t i = 0; i < w.n; i++)
		total += w.o[i].size;
	for (size_t i = 0; i < w.n; i++) {
		char copy[2048], *part[5], local[8192], ek[6200], u[8192];
		if (progress)
			d9__progress_show(&last, &shown, 0, "downloading %zu/%zu segments, %.1f of %.1f MiB",
				i + 1, w.n, (double)done / 1048576.0, (double)total / 1048576.0);
		done += w.o[i].size;
		if (key_parts(w.o[i].key, strlen(base), copy, sizeof(copy), part))
			continue;
		/* <boot>-<pid>-<seq><suffix> -> a name that sorts by process and seq */
		char *suffix = strstr(part[4], ".bin");
		char *dash = suffix ? memrchr(part[4], '-', (size_t)(suffix - part[4])) : NULL;
		if (!suffix || !dash)
			continue;
		unsigned long seq = strtoul(dash + 1, NULL, 10);
		*dash = 0;
		snprintf(local, sizeof(local), "%s/%s.%s.%s.%09lu%s", dir, part[2], part[3], part[4],
			seq, suffix);
		if (d9__s3_uri_encode(ek, sizeof(ek), w.o[i].key, 1) >= sizeof(ek) ||
			d9__s3_url(&w.cfg, ek, NULL, u, sizeof(u)))
			continue;
		FILE *f = fopen(local, "wbx");
		if (!f) {
			d9__progress_clear(&shown);
			fprintf(stderr, "d9-analyze: %s: %s\n", local, strerror(errno));
			(*bad)++;
			continue;
		}
		long code = http_get(&w, u, to_file, f);
		if (fclose(f) != 0 || code != 200) {
			d9__progress_clear(&shown);
			if (code > 0)
				fprintf(stderr, "d9-analyze: s3://%s/%s: HTTP %ld\n", w.cfg.bucket,
					w.o[i].key, code);
			unlink(local);
			(*bad)++;
			continue;
		}
		got++;
	}
	d9__progress_clear(&shown);
	if (!got && !listed_bad)
		fprintf(stderr, "d9-analyze: %s: no segment objects%s\n", url,
			sel.from_ns || sel.to_ns != INT64_MAX || sel.service || sel.host ?
			" in the selection" : "");
	err = got ? 0 : 1;
out:
	walk_free(&w);
	return err;
}

/* ---- d9-analyze ls ---------------------------------------------------------------------------------- */

struct tally {
	char name[256];
	uint64_t objects, bytes;
	char first[16], last[16]; /* YYYY-MM-DD HHMM as in the keys */
};

static int tally_add(struct tally **t, size_t *n, const char *name, uint64_t size, const char *when)
{
	size_t i;

	for (i = 0; i < *n; i++)
		if (!strcmp((*t)[i].name, name))
			break;
	if (i == *n) {
		struct tally *m = realloc(*t, (*n + 1) * sizeof(*m));
		if (!m)
			return -ENOMEM;
		*t = m;
		memset(&m[i], 0, sizeof(m[i]));
		snprintf(m[i].name, sizeof(m[i].name), "%s", name);
		(*n)++;
	}
	struct tally *x = &(*t)[i];
	x->objects++;
	x->bytes += size;
	if (!x->first[0] || strcmp(when, x->first) < 0)
		snprintf(x->first, sizeof(x->first), "%s", when);
	if (strcmp(when, x->last) > 0)
		snprintf(x->last, sizeof(x->last), "%s", when);
	return 0;
}

static void tally_print(const char *what, const struct tally *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%-8s %-32s %6" PRIu64 " objects %12" PRIu64 " bytes  %s .. %s UTC\n", what,
			t[i].name, t[i].objects, t[i].bytes, t[i].first, t[i].last);
}

static void ls_help(FILE *f)
{
	fprintf(f, "usage: d9-analyze ls [--from T] [--to T] [--service S] [--host H] s3://BUCKET[/PREFIX]\n\n"
		"Lists the segments stored under PREFIX (the agent's D9_S3_PREFIX): the services and\n"
		"hosts, each with its objects, bytes and time span (the minutes its segments started,\n"
		"UTC), then the totals. Only the days and minutes --from/--to cover are listed.\n"
		"Endpoint, region and credentials: D9_S3_ENDPOINT, D9_S3_REGION, AWS_* (README, S3).\n");
}

int d9__cmd_ls(int argc, char **argv)
{
	const char *url = NULL;
	struct walk w;
	char base[2048];
	struct tally *sv = NULL, *hs = NULL, all;
	size_t nsv = 0, nhs = 0;
	int rc = D9_EXIT_OK;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			ls_help(stdout);
			return D9_EXIT_OK;
		}
		if (!strncmp(argv[i], "--from", 6) || !strncmp(argv[i], "--to", 4)) {
			if (!strchr(argv[i], '='))
				i++; /* taken by d9__s3_args */
			continue;
		}
		if (strncmp(argv[i], "s3://", 5) || url) {
			ls_help(stderr);
			return D9_EXIT_USAGE;
		}
		url = argv[i];
	}
	if (!url) {
		ls_help(stderr);
		return D9_EXIT_USAGE;
	}
	if (walk_init(&w, url, base, sizeof(base))) {
		walk_free(&w);
		return D9_EXIT_NO_TRACE;
	}
	int err = walk_level(&w, base, 0);
	if (err)
		rc = D9_EXIT_DAMAGED;
	memset(&all, 0, sizeof(all));
	for (size_t i = 0; i < w.n && err != -ENOMEM; i++) {
		char copy[2048], *part[5], when[16];
		if (key_parts(w.o[i].key, strlen(base), copy, sizeof(copy), part))
			continue;
		snprintf(when, sizeof(when), "%.10s %.4s", part[0], part[1]);
		if (tally_add(&sv, &nsv, part[2], w.o[i].size, when) ||
			tally_add(&hs, &nhs, part[3], w.o[i].size, when))
			err = -ENOMEM;
		all.objects++;
		all.bytes += w.o[i].size;
		if (!all.first[0] || strcmp(when, all.first) < 0)
			snprintf(all.first, sizeof(all.first), "%s", when);
		if (strcmp(when, all.last) > 0)
			snprintf(all.last, sizeof(all.last), "%s", when);
	}
	tally_print("service", sv, nsv);
	tally_print("host", hs, nhs);
	if (all.objects)
		printf("total    %-32s %6" PRIu64 " objects %12" PRIu64 " bytes  %s .. %s UTC\n", url,
			all.objects, all.bytes, all.first, all.last);
	else
		printf("total    %-32s %6d objects %12d bytes\n", url, 0, 0);
	if (err == -ENOMEM) {
		fprintf(stderr, "d9-analyze: out of memory\n");
		rc = D9_EXIT_NO_TRACE;
	}
	free(sv);
	free(hs);
	walk_free(&w);
	return rc;
}
