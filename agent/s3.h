/* s3.h: what the agent's uploader (agent/s3.c) and the analyzer's S3 reader (analyze/s3.c) share:
 * the D9_S3_* settings, AWS credentials, SHA-256, the URI encoding SigV4 wants and the object
 * key layout (agent/s3common.c). Nothing here logs or touches d9__g: the analyzer links it too.
 * Design: agent/DESIGN.md, "S3 upload"; user view: README.md, "S3". */
#ifndef D9_AGENT_S3_H
#define D9_AGENT_S3_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

struct d9__s3_cfg {
	char bucket[256]; /* D9_S3_BUCKET; "" = S3 off */
	char prefix[512]; /* D9_S3_PREFIX without leading or trailing '/' */
	char region[64]; /* D9_S3_REGION, else AWS_REGION, AWS_DEFAULT_REGION, us-east-1 */
	char endpoint[512]; /* D9_S3_ENDPOINT without trailing '/'; "" = AWS (virtual-hosted) */
	char service[128], host[256]; /* D9_S3_SERVICE, D9_S3_HOST; "" = from the segment */
	int delete_after; /* D9_S3_DELETE_AFTER_UPLOAD */
	/* credentials' sources, copied at load (the uploader reads the file later) */
	char key_id[256], secret[256], token[4096]; /* AWS_* variables; "" = from the file */
	char cred_file[1024]; /* AWS_SHARED_CREDENTIALS_FILE, else $HOME/.aws/credentials */
	char profile[128]; /* AWS_PROFILE, else "default" */
};

struct d9__s3_creds {
	char key_id[256], secret[256], token[4096]; /* token "" = none */
};

/* Reads D9_S3_* and AWS_* from the environment into c; without D9_S3_BUCKET the rest only when
 * any (the analyzer, which takes the bucket from its s3:// argument). Returns 1 when
 * D9_S3_BUCKET is set, 0 when not, or -EINVAL with *why naming the variable at fault. */
int d9__s3_config_env(struct d9__s3_cfg *c, const char **why, int any);
/* 0 when b is a bucket name d9 accepts (lower-case letters, digits, '-', '.'), else -EINVAL. */
int d9__s3_bucket_check(const char *b);

/* The credentials: the AWS_* variables when AWS_ACCESS_KEY_ID is set, else the profile's
 * section of the shared credentials file. Returns 0, or -errno / -EINVAL with why (cap bytes)
 * saying what is wrong. */
int d9__s3_creds_load(const struct d9__s3_cfg *c, struct d9__s3_creds *cr, char *why, size_t cap);

struct d9__sha256 { uint32_t h[8]; uint64_t len; uint8_t buf[64]; size_t n; };
void d9__sha256_init(struct d9__sha256 *s);
void d9__sha256_update(struct d9__sha256 *s, const void *data, size_t n);
void d9__sha256_final(struct d9__sha256 *s, uint8_t out[32]);
/* 64 lower-case hex digits and a NUL into out (65 bytes). */
void d9__sha256_hex(const uint8_t sum[32], char out[65]);

/* URI-encodes s as SigV4 wants it (RFC 3986 unreserved kept, every other byte %XX; '/' kept when
 * keep_slash: object keys; a raw '=' becomes %3D, which libcurl 7.88 would otherwise sign
 * differently from S3). Returns the length, or cap when out is too small. */
size_t d9__s3_uri_encode(char *out, size_t cap, const char *s, int keep_slash);

/* The request URL of key (already encoded) with an optional query (already sorted and encoded,
 * without '?'): <endpoint>/<bucket>/<key> (path style) with D9_S3_ENDPOINT, else
 * https://<bucket>.s3.<region>.amazonaws.com/<key> (path style for a bucket name with dots).
 * Returns 0 or -ENAMETOOLONG. */
int d9__s3_url(const struct d9__s3_cfg *c, const char *key, const char *query, char *out, size_t cap);

/* Replaces every byte of s outside [A-Za-z0-9._-] by '_' (a key part: no '/', no '='); empty
 * becomes "unknown". */
void d9__s3_key_part(char *s, size_t cap);

/* The object key of a segment:
 * {prefix}/{YYYY-MM-DD}/{HHMM}/{service}/{host}/{boot id}-{pid}-{seq}{suffix}, the date and
 * minute the segment started (UTC). Returns 0 or -ENAMETOOLONG. */
int d9__s3_key(const struct d9__s3_cfg *c, char *out, size_t cap, uint64_t start_realtime_ns,
	const char *service, const char *host, const char *boot_id, uint32_t pid, const char *name);

/* gmtime_r without glibc's time-zone lock: UTC needs no zone, and that lock is not reset in a
 * forked child, so an agent thread holding it at a host's fork would hang the child's first
 * localtime (agent/DESIGN.md, "Exit, signals, fork"). Returns tm, or NULL (EOVERFLOW) when the
 * year does not fit an int, as glibc does. */
struct tm;
struct tm *d9__utc_tm(int64_t t, struct tm *tm);

/* The "aws:amz:<region>:s3" of CURLOPT_AWS_SIGV4 into out. */
void d9__s3_sigv4(const struct d9__s3_cfg *c, char *out, size_t cap);

/* The libcurl functions d9 calls, looked up in a dlopen()ed libcurl.so.4: neither the agent
 * nor d9-analyze links libcurl, whose thirty-odd dependencies would load into every host (and
 * cost every d9-analyze run about 9 ms of start-up here, half of it) for S3 alone. */
struct d9__curl {
	void *lib;
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_reset)(CURL *);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
};

/* Looks up c's functions in lib (c->lib = lib). Returns 0, or -ENOENT with the missing one in
 * why. */
int d9__curl_syms(struct d9__curl *c, void *lib, char *why, size_t cap);

#endif
