/* s3common.c: the parts of S3 the agent's uploader (s3.c) and the analyzer (analyze/s3.c) share:
 * settings from the environment, credentials (variables or the shared credentials file), a
 * small SHA-256 (the x-amz-content-sha256 header libcurl 7.88 does not compute; no new library
 * for the host), SigV4's URI encoding and the object key layout. It never logs and never keeps
 * a descriptor: callers say what went wrong. Design: agent/DESIGN.md, "S3 upload". */
#include "s3.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- settings -------------------------------------------------------------------------------- */

static int copy_env(char *out, size_t cap, const char *name)
{
	const char *v = getenv(name);

	out[0] = 0;
	if (!v || !*v)
		return 0;
	if (strlen(v) >= cap)
		return -EINVAL;
	memcpy(out, v, strlen(v) + 1);
	return 1;
}

static void trim_slashes(char *s)
{
	size_t n = strlen(s), i = 0;

	while (n && s[n - 1] == '/')
		s[--n] = 0;
	while (s[i] == '/')
		i++;
	memmove(s, s + i, n - i + 1);
}

int d9__s3_config_env(struct d9__s3_cfg *c, const char **why, int any)
{
	char b[16];

	memset(c, 0, sizeof(*c));
	*why = NULL;
	if (copy_env(c->bucket, sizeof(c->bucket), "D9_S3_BUCKET") < 0)
		return *why = "D9_S3_BUCKET: too long", -EINVAL;
	if (!c->bucket[0] && !any)
		return 0; /* the agent reads the rest only when S3 is on */
	if (d9__s3_bucket_check(c->bucket))
		return *why = "D9_S3_BUCKET: a bucket name is lower-case letters, digits, '-' and '.'",
			-EINVAL;
	if (copy_env(c->prefix, sizeof(c->prefix), "D9_S3_PREFIX") < 0)
		return *why = "D9_S3_PREFIX: too long", -EINVAL;
	trim_slashes(c->prefix);
	if (copy_env(c->region, sizeof(c->region), "D9_S3_REGION") < 0 ||
		(!c->region[0] && copy_env(c->region, sizeof(c->region), "AWS_REGION") < 0) ||
		(!c->region[0] && copy_env(c->region, sizeof(c->region), "AWS_DEFAULT_REGION") < 0))
		return *why = "D9_S3_REGION: too long", -EINVAL;
	if (!c->region[0])
		snprintf(c->region, sizeof(c->region), "us-east-1");
	for (const char *p = c->region; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-')
			return *why = "D9_S3_REGION: letters, digits and '-' (e.g. eu-west-1)", -EINVAL;
	if (copy_env(c->endpoint, sizeof(c->endpoint), "D9_S3_ENDPOINT") < 0)
		return *why = "D9_S3_ENDPOINT: too long", -EINVAL;
	size_t n = strlen(c->endpoint);
	while (n && c->endpoint[n - 1] == '/')
		c->endpoint[--n] = 0;
	if (n && strncmp(c->endpoint, "http://", 7) && strncmp(c->endpoint, "https://", 8))
		return *why = "D9_S3_ENDPOINT: an http:// or https:// URL", -EINVAL;
	if (copy_env(c->service, sizeof(c->service), "D9_S3_SERVICE") < 0)
		return *why = "D9_S3_SERVICE: too long", -EINVAL;
	if (copy_env(c->host, sizeof(c->host), "D9_S3_HOST") < 0)
		return *why = "D9_S3_HOST: too long", -EINVAL;
	if (c->service[0])
		d9__s3_key_part(c->service, sizeof(c->service));
	if (c->host[0])
		d9__s3_key_part(c->host, sizeof(c->host));
	if (copy_env(b, sizeof(b), "D9_S3_DELETE_AFTER_UPLOAD") < 0 ||
		(b[0] && strcmp(b, "0") && strcmp(b, "1")))
		return *why = "D9_S3_DELETE_AFTER_UPLOAD: 0 or 1", -EINVAL;
	c->delete_after = b[0] == '1';
	if (copy_env(c->key_id, sizeof(c->key_id), "AWS_ACCESS_KEY_ID") < 0 ||
		copy_env(c->secret, sizeof(c->secret), "AWS_SECRET_ACCESS_KEY") < 0 ||
		copy_env(c->token, sizeof(c->token), "AWS_SESSION_TOKEN") < 0)
		return *why = "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or AWS_SESSION_TOKEN: too long",
			-EINVAL;
	if (copy_env(c->profile, sizeof(c->profile), "AWS_PROFILE") < 0)
		return *why = "AWS_PROFILE: too long", -EINVAL;
	if (!c->profile[0])
		snprintf(c->profile, sizeof(c->profile), "default");
	if (!copy_env(c->cred_file, sizeof(c->cred_file), "AWS_SHARED_CREDENTIALS_FILE")) {
		const char *home = getenv("HOME");
		if (home && *home && strlen(home) + 18 < sizeof(c->cred_file))
			snprintf(c->cred_file, sizeof(c->cred_file), "%s/.aws/credentials", home);
	}
	return c->bucket[0] != 0;
}

int d9__s3_bucket_check(const char *b)
{
	for (const char *p = b; *p; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '-' && *p != '.')
			return -EINVAL;
	return 0;
}

/* ---- credentials ------------------------------------------------------------------------------ */

#define CRED_FILE_MAX (256u << 10)

static char *strip(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = 0;
	return s;
}

/* Reads the shared credentials file (INI: [profile], then key = value lines) without following
 * a link into something that blocks (O_NONBLOCK) and at most CRED_FILE_MAX bytes. */
static int creds_file(const struct d9__s3_cfg *c, struct d9__s3_creds *cr, char *why, size_t cap)
{
	struct stat st;
	char *buf = NULL;
	int err = 0;

	if (!c->cred_file[0]) {
		snprintf(why, cap, "no AWS_ACCESS_KEY_ID and no credentials file (HOME unset)");
		return -ENOENT;
	}
	int fd = open(c->cred_file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(why, cap, "no AWS_ACCESS_KEY_ID, and %s: %s", c->cred_file, strerror(errno));
		return err;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > CRED_FILE_MAX) {
		snprintf(why, cap, "%s: not a regular file of at most 256 KiB", c->cred_file);
		err = -EINVAL;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		snprintf(why, cap, "out of memory");
		err = -ENOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	buf[got] = 0;
	int in = 0, found = 0;
	for (char *line = buf, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *s = strip(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *e = strchr(s, ']');
			if (!e) {
				snprintf(why, cap, "%s: a section line without ']'", c->cred_file);
				err = -EINVAL;
				goto out;
			}
			*e = 0;
			in = !strcmp(strip(s + 1), c->profile);
			found |= in;
			continue;
		}
		char *eq = strchr(s, '=');
		if (!in)
			continue;
		if (!eq) {
			snprintf(why, cap, "%s: a line in [%s] that is not key = value", c->cred_file,
				c->profile);
			err = -EINVAL;
			goto out;
		}
		*eq = 0;
		char *k = strip(s), *v = strip(eq + 1);
		char *dst = NULL;
		size_t dcap = 0;
		if (!strcmp(k, "aws_access_key_id"))
			dst = cr->key_id, dcap = sizeof(cr->key_id);
		else if (!strcmp(k, "aws_secret_access_key"))
			dst = cr->secret, dcap = sizeof(cr->secret);
		else if (!strcmp(k, "aws_session_token"))
			dst = cr->token, dcap = sizeof(cr->token);
		if (dst && strlen(v) < dcap)
			memcpy(dst, v, strlen(v) + 1);
	}
	if (!found || !cr->key_id[0] || !cr->secret[0]) {
		snprintf(why, cap, "%s: no aws_access_key_id and aws_secret_access_key in [%s]",
			c->cred_file, c->profile);
		err = -EINVAL;
	}
out:
	free(buf);
	close(fd); /* opened just now by this thread */
	return err;
}

static int printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f || *s == ':')
			return 0;
	return 1;
}

int d9__s3_creds_load(const struct d9__s3_cfg *c, struct d9__s3_creds *cr, char *why, size_t cap)
{
	int err = 0;

	memset(cr, 0, sizeof(*cr));
	if (c->key_id[0]) {
		if (!c->secret[0]) {
			snprintf(why, cap, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
			return -EINVAL;
		}
		memcpy(cr->key_id, c->key_id, sizeof(cr->key_id));
		memcpy(cr->secret, c->secret, sizeof(cr->secret));
		memcpy(cr->token, c->token, sizeof(cr->token));
	} else if ((err = creds_file(c, cr, why, cap)) != 0) {
		return err;
	}
	/* they go into a user:password option and a header line */
	if (!printable(cr->key_id) || !printable(cr->secret) || !printable(cr->token)) {
		snprintf(why, cap, "the credentials hold spaces, control characters or ':'");
		memset(cr, 0, sizeof(*cr));
		return -EINVAL;
	}
	return 0;
}

/* ---- SHA-256 (FIPS 180-4) ---------------------------------------------------------------------- */

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) ((x) >> (n) | (x) << (32 - (n)))

static void sha_block(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
			(uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		k = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void d9__sha256_init(struct d9__sha256 *s)
{
	static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

	memcpy(s->h, iv, sizeof(iv));
	s->len = 0;
	s->n = 0;
}

void d9__sha256_update(struct d9__sha256 *s, const void *data, size_t n)
{
	const uint8_t *p = data;

	s->len += n;
	while (n) {
		if (s->n == 0 && n >= 64) {
			sha_block(s->h, p);
			p += 64;
			n -= 64;
			continue;
		}
		size_t k = 64 - s->n < n ? 64 - s->n : n;
		memcpy(s->buf + s->n, p, k);
		s->n += k;
		p += k;
		n -= k;
		if (s->n == 64) {
			sha_block(s->h, s->buf);
			s->n = 0;
		}
	}
}

void d9__sha256_final(struct d9__sha256 *s, uint8_t out[32])
{
	uint64_t bits = s->len * 8;
	uint8_t pad[72] = { 0x80 };
	size_t padn = (s->n < 56 ? 56 : 120) - s->n;

	for (int i = 0; i < 8; i++)
		pad[padn + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
	d9__sha256_update(s, pad, padn + 8);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
}

void d9__sha256_hex(const uint8_t sum[32], char out[65])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = hex[sum[i] >> 4];
		out[2 * i + 1] = hex[sum[i] & 15];
	}
	out[64] = 0;
}

/* ---- URLs and keys ------------------------------------------------------------------------------ */

size_t d9__s3_uri_encode(char *out, size_t cap, const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' ||
			(keep_slash && ch == '/')) {
			if (n + 1 >= cap)
				return cap;
			out[n++] = (char)ch;
		} else {
			if (n + 3 >= cap)
				return cap;
			out[n++] = '%';
			out[n++] = hex[ch >> 4];
			out[n++] = hex[ch & 15];
		}
	}
	if (n >= cap)
		return cap;
	out[n] = 0;
	return n;
}

int d9__s3_url(const struct d9__s3_cfg *c, const char *key, const char *query, char *out, size_t cap)
{
	int n;
	const char *q = query && *query ? "?" : "";

	if (!query)
		query = "";
	if (c->endpoint[0])
		n = snprintf(out, cap, "%s/%s/%s%s%s", c->endpoint, c->bucket, key, q, query);
	else if (strchr(c->bucket, '.'))
		/* a dotted name as a host would not match AWS's wildcard certificate */
		n = snprintf(out, cap, "https://s3.%s.amazonaws.com/%s/%s%s%s", c->region, c->bucket,
			key, q, query);
	else
		n = snprintf(out, cap, "https://%s.s3.%s.amazonaws.com/%s%s%s", c->bucket, c->region, key,
			q, query);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

void d9__s3_key_part(char *s, size_t cap)
{
	if (!s[0] && cap > 7) {
		memcpy(s, "unknown", 8);
		return;
	}
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-')
			*s = '_';
}

struct tm *d9__utc_tm(int64_t t, struct tm *tm)
{
	static const int before[12] = { 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334 };
	int64_t days = t / 86400, secs = t % 86400;

	if (secs < 0) {
		secs += 86400;
		days--;
	}
	/* the proleptic Gregorian calendar in 400-year eras, from 0000-03-01 (H. Hinnant's
	 * days_from_civil, inverted) */
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097; /* [0, 146096] */
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100); /* from March 1st */
	int64_t mp = (5 * doy + 2) / 153;
	int mday = (int)(doy - (153 * mp + 2) / 5 + 1);
	int mon = (int)(mp < 10 ? mp + 2 : mp - 10); /* 0 = January */
	int64_t year = yoe + era * 400 + (mon < 2);
	if (year - 1900 > INT_MAX || year - 1900 < INT_MIN) {
		errno = EOVERFLOW;
		return NULL;
	}
	int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
	memset(tm, 0, sizeof(*tm));
	tm->tm_sec = (int)(secs % 60);
	tm->tm_min = (int)(secs / 60 % 60);
	tm->tm_hour = (int)(secs / 3600);
	tm->tm_mday = mday;
	tm->tm_mon = mon;
	tm->tm_year = (int)(year - 1900);
	tm->tm_wday = (int)(((days + 4) % 7 + 7) % 7); /* 1970-01-01 was a Thursday */
	tm->tm_yday = before[mon] + mday - 1 + (leap && mon > 1);
	tm->tm_zone = "GMT"; /* as glibc's gmtime_r */
	return tm;
}

int d9__s3_key(const struct d9__s3_cfg *c, char *out, size_t cap, uint64_t start_realtime_ns,
	const char *service, const char *host, const char *boot_id, uint32_t pid, const char *name)
{
	char sv[128], hs[256], boot[64], nm[256];
	struct tm tm;

	d9__utc_tm((int64_t)(start_realtime_ns / 1000000000u), &tm);
	snprintf(sv, sizeof(sv), "%s", c->service[0] ? c->service : service ? service : "");
	snprintf(hs, sizeof(hs), "%s", c->host[0] ? c->host : host ? host : "");
	snprintf(boot, sizeof(boot), "%s", boot_id ? boot_id : "");
	snprintf(nm, sizeof(nm), "%s", name);
	d9__s3_key_part(sv, sizeof(sv));
	d9__s3_key_part(hs, sizeof(hs));
	d9__s3_key_part(boot, sizeof(boot));
	d9__s3_key_part(nm, sizeof(nm));
	int n = snprintf(out, cap, "%s%s%04d-%02d-%02d/%02d%02d/%s/%s/%s-%u-%s", c->prefix,
		c->prefix[0] ? "/" : "", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		tm.tm_min, sv, hs, boot, pid, nm);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

void d9__s3_sigv4(const struct d9__s3_cfg *c, char *out, size_t cap)
{
	snprintf(out, cap, "aws:amz:%s:s3", c->region);
}

int d9__curl_syms(struct d9__curl *c, void *lib, char *why, size_t cap)
{
	c->lib = lib;
#define SYM(field, name)                                                                   \
	if (!(*(void **)&c->field = dlsym(lib, name))) {                                    \
		snprintf(why, cap, "libcurl.so.4 has no %s", name);                          \
		return -ENOENT;                                                             \
	}
	SYM(global_init, "curl_global_init");
	SYM(easy_init, "curl_easy_init");
	SYM(easy_setopt, "curl_easy_setopt");
	SYM(easy_perform, "curl_easy_perform");
	SYM(easy_getinfo, "curl_easy_getinfo");
	SYM(easy_reset, "curl_easy_reset");
	SYM(easy_cleanup, "curl_easy_cleanup");
	SYM(easy_strerror, "curl_easy_strerror");
	SYM(slist_append, "curl_slist_append");
	SYM(slist_free_all, "curl_slist_free_all");
#undef SYM
	return 0;
}
