/* cmdline.c: the command line that every segment header records (format/FORMAT.md, header
 * "cmdline": the arguments, NUL-separated). Servers are often given secrets as arguments
 * (--password=..., --token ..., DB_PASSWORD=..., postgres://user:pass@host) and traces travel
 * further than the host, so by default (D9_CMDLINE=redacted) such values are replaced by "***"
 * before they are ever written. Runs on the writer thread; reads only /proc/self/cmdline.
 * README.md ("Command line in the trace") documents the rules. */
#include "internal.h"

#include <string.h>
#include <strings.h>

#define MASK "***"

/* An output buffer that never overflows: what does not fit is cut off. */
struct out {
	char *p;
	size_t len, cap; /* cap: usable bytes (the caller's cap less the final NUL) */
};

static void put(struct out *o, const char *s, size_t n)
{
	if (n > o->cap - o->len)
		n = o->cap - o->len;
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

/* Whether the option or variable name s[0..n) names a secret (case-insensitive). */
static int secret_name(const char *s, size_t n)
{
	static const char *const words[] = {
		"password", "passwd", "secret", "token", "key", "credential", "auth",
	};

	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		size_t k = strlen(words[w]);
		for (size_t i = 0; i + k <= n; i++)
			if (!strncasecmp(s + i, words[w], k))
				return 1;
	}
	return 0;
}

/* Copies s[0..n) with the user information of every URL in it masked: scheme://user:pass@host
 * keeps the user, scheme://token@host loses all of it. */
static void put_urls(struct out *o, const char *s, size_t n)
{
	const char *end = s + n;

	for (;;) {
		const char *sep = memmem(s, (size_t)(end - s), "://", 3);
		if (!sep) {
			put(o, s, (size_t)(end - s));
			return;
		}
		const char *auth = sep + 3, *q = auth, *at = NULL;
		for (; q < end && *q != '/' && *q != '?' && *q != '#'; q++)
			if (*q == '@')
				at = q; /* the last one: a password may contain '@' */
		if (!at) {
			put(o, s, (size_t)(q - s));
			s = q;
			continue;
		}
		const char *colon = memchr(auth, ':', (size_t)(at - auth));
		put(o, s, (size_t)((colon ? colon + 1 : auth) - s));
		put(o, MASK, sizeof(MASK) - 1);
		s = at;
	}
}

/* Whether s[0..n) is a variable name (letters, digits, '_', '.', '-'), as in NAME=VALUE. */
static int is_name(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
			ch == '_' || ch == '.' || ch == '-'))
			return 0;
	}
	return 1;
}

/* The arguments raw[0..n) (NUL-separated) into o with secret values masked. */
static void redact(struct out *o, const char *raw, size_t n)
{
	int value_next = 0; /* the previous argument was a secret option without "=" */

	for (size_t i = 0, at = 0; at < n; i++) {
		const char *a = raw + at;
		size_t len = strnlen(a, n - at);
		at += len + 1;
		if (i == 0) {
			put(o, a, len); /* the program: its path is no secret */
		} else if (value_next && !(len >= 2 && a[0] == '-' && a[1] == '-')) {
			/* "--token VALUE"; a following "--option" is taken for an option, not a value */
			value_next = 0;
			put(o, MASK, sizeof(MASK) - 1);
		} else {
			value_next = 0;
			const char *name = a;
			if (a[0] == '-')
				name += len >= 2 && a[1] == '-' ? 2 : 1;
			const char *eq = memchr(name, '=', len - (size_t)(name - a));
			size_t nlen = eq ? (size_t)(eq - name) : len - (size_t)(name - a);
			/* "-p" and other one-letter options are no names: they stay as they are */
			int secret = name != a ? nlen >= 2 && secret_name(name, nlen) :
				eq && is_name(name, nlen) && secret_name(name, nlen);
			if (secret && eq) {
				put(o, a, (size_t)(eq + 1 - a));
				put(o, MASK, sizeof(MASK) - 1);
			} else if (secret) {
				put(o, a, len);
				value_next = 1;
			} else {
				put_urls(o, a, len);
			}
		}
		put(o, "", 1); /* the separator */
	}
}

size_t d9__cmdline_read(char *buf, size_t cap, int mode)
{
	char raw[8192];

	if (!cap)
		return 0;
	buf[0] = 0;
	/* more than fits, so that a value cut off at the end of buf was still seen whole here */
	size_t n = d9__file_read_small("/proc/self/cmdline", raw, sizeof(raw));
	/* a process that rewrote its title (nginx: "nginx: worker process") leaves the rest of the
	 * old arguments' memory as NULs: empty arguments at the end are that padding */
	while (n >= 2 && !raw[n - 1] && !raw[n - 2])
		n--;
	raw[n] = 0;
	struct out o = { buf, 0, cap - 1 };
	if (mode == D9_CMDLINE_FULL)
		put(&o, raw, n);
	else if (mode == D9_CMDLINE_NAME)
		put(&o, raw, n ? strlen(raw) + 1 : 0);
	else
		redact(&o, raw, n);
	buf[o.len] = 0;
	return o.len;
}
