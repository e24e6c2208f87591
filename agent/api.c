/* api.c: the agent's side of include/d9.h, the application API: named marks, values (gauges and
 * counters), typed custom events, and request begin/end handed to the request recorder.
 * The agent exports one symbol, d9_api_v1, a function returning its table (agent/DESIGN.md,
 * "Application API"). Recording an event is the hot path: a timestamp and a few stores into the
 * calling thread's chunk (d9-agent.h), no lock, no allocation. Registration (names, schemas)
 * takes a lock and allocates, once per name or schema. Hostile input (NULL pointers, absurd
 * sizes, unknown handles) is never trusted: the call is dropped, counted in the trace as a
 * Dropped event of reason api, and said once on stderr. */
#include "internal.h"

#include "../include/d9.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define API_NAMES_MAX 4096u /* names of marks and values per process */
#define API_SCHEMAS_MAX 1024u /* custom event schemas per process */
#define API_NAME_LEN_MAX 256u /* bytes of a mark, value or schema name */

/* Request events are the request recorder's (preload/requests.c, codes 16 and 17): called when
 * linked in. Hidden: resolved inside libd9agent.so at link time, never bound to a symbol of the
 * host's that happens to have the name (a weak default-visibility reference would be). */
void d9__api_request_begin(uint64_t id) __attribute__((weak, visibility("hidden")));
void d9__api_request_end(uint64_t id, int status) __attribute__((weak, visibility("hidden")));

__attribute__((visibility("default"))) const struct d9_api_v1 *d9_api_v1(void);

/* A registered name: handle h is names[h], 1 .. nnames. */
static struct api_name {
	uint64_t sid; /* its String id */
	int64_t total; /* counters: the sum of the adds so far (atomic) */
} names[API_NAMES_MAX + 1];
static uint32_t nnames; /* atomic (release): entries 1 .. nnames are complete */

/* A registered schema: handle h is schemas[h], also its CustomSchema id. */
struct api_schema {
	uint64_t sid; /* its name's String id */
	size_t max_data; /* the largest payload (<= D9_CUSTOM_DATA_MAX) */
	struct d9_custom_schema cs; /* field names point into names_buf */
	char names_buf[D9_CUSTOM_MAX_FIELDS * D9_CUSTOM_NAME_MAX];
};
static struct api_schema *schemas[API_SCHEMAS_MAX + 1];
static uint32_t nschemas; /* atomic (release) */
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER; /* registration only */
static int warned; /* the one stderr line about rejected calls */

/* A rejected call: one Dropped event (reason api) on the calling thread, one stderr line per
 * process. Nothing when the agent is off (the call would not have been recorded either). */
static __attribute__((noinline, cold)) void api_drop(const char *why)
{
	struct d9__thr *t = &d9__self;

	if (!d9_agent_active() || t->busy)
		return;
	int saved = errno;
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		d9__log(D9_LOG_WARN, "application API call rejected (%s); rejected calls are counted "
			"as dropped events, reason api, without further messages", why);
	int ok = D9_LIKELY(d9__enabled) &&
		d9_raw_dropped(&t->raw, d9__now(), 1, D9_DROP_API) == 0;
	for (unsigned r = 0; !ok && d9__slow(t, r); r++)
		ok = d9_raw_dropped(&t->raw, d9__now(), 1, D9_DROP_API) == 0;
	if (ok) {
		t->block_dropped++; /* the trailer's dropped_events (writer.c) */
		t->block_drop_records++;
	}
	errno = saved;
}

/* ---- registration (slow path) ---------------------------------------------------------------- */

/* strnlen bounded by max + 1: a length above max means too long. */
static size_t bounded_len(const char *s, size_t max)
{
	return strnlen(s, max + 1);
}

static uint32_t api_name(const char *name)
{
	size_t len;
	uint32_t h = 0;

	if (!d9_agent_active())
		return 0;
	if (!name || (len = bounded_len(name, API_NAME_LEN_MAX)) == 0 || len > API_NAME_LEN_MAX) {
		api_drop("a name that is NULL, empty or longer than 256 bytes");
		return 0;
	}
	int saved = errno;
	uint64_t sid = d9_agent_string(name, len);
	if (sid) {
		d9__lock(&api_lock);
		uint32_t n = nnames;
		for (uint32_t i = 1; i <= n && !h; i++)
			if (names[i].sid == sid)
				h = i;
		if (!h && n < API_NAMES_MAX) {
			h = n + 1;
			names[h].sid = sid;
			names[h].total = 0;
			__atomic_store_n(&nnames, h, __ATOMIC_RELEASE);
		}
		d9__unlock(&api_lock);
	}
	errno = saved;
	if (!h)
		api_drop(sid ? "more than 4096 names" : "definition tables full");
	return h;
}

/* Checks the application's schema and copies it into s. Returns NULL or why it is rejected. */
static const char *schema_check(struct api_schema *s, const struct d9_field *fields, uint32_t n)
{
	if (n > D9_CUSTOM_MAX_FIELDS)
		return "a schema with more than 32 fields";
	if (n && !fields)
		return "a schema with NULL fields";
	s->cs.nfields = n;
	for (uint32_t i = 0; i < n; i++) {
		const struct d9_field *f = &fields[i];
		struct d9_custom_field *c = &s->cs.f[i];
		size_t len;
		if (!f->name || (len = bounded_len(f->name, D9_CUSTOM_NAME_MAX)) == 0 ||
			len > D9_CUSTOM_NAME_MAX)
			return "a schema field name that is NULL, empty or longer than 64 bytes";
		char *dst = s->names_buf + i * D9_CUSTOM_NAME_MAX;
		memcpy(dst, f->name, len);
		for (uint32_t j = 0; j < i; j++)
			if (s->cs.f[j].name_len == len && !memcmp(s->cs.f[j].name, dst, len))
				return "a schema with two fields of one name";
		c->name = dst;
		c->name_len = (uint8_t)len;
		switch (f->type) {
		case D9_U64:
		case D9_I64:
		case D9_F64:
			c->max_len = 0;
			break;
		case D9_STR:
		case D9_BYTES:
			if (f->max_len > D9_CUSTOM_DATA_MAX)
				return "a schema field longer than 4096 bytes";
			c->max_len = f->max_len;
			break;
		default:
			return "a schema field of an unknown type";
		}
		c->type = (uint8_t)f->type;
	}
	s->max_data = d9_custom_max_data(&s->cs);
	if (s->max_data > D9_CUSTOM_DATA_MAX)
		return "a schema whose events can exceed 4096 bytes";
	return NULL;
}

static int schema_same(const struct api_schema *a, const struct api_schema *b)
{
	if (a->sid != b->sid || a->cs.nfields != b->cs.nfields)
		return 0;
	for (uint32_t i = 0; i < a->cs.nfields; i++) {
		const struct d9_custom_field *x = &a->cs.f[i], *y = &b->cs.f[i];
		if (x->type != y->type || x->max_len != y->max_len || x->name_len != y->name_len ||
			memcmp(x->name, y->name, x->name_len))
			return 0;
	}
	return 1;
}

static uint32_t api_schema(const char *name, const struct d9_field *fields, uint32_t nfields)
{
	const char *why = NULL;
	size_t len;
	uint32_t h = 0;

	if (!d9_agent_active())
		return 0;
	if (!name || (len = bounded_len(name, API_NAME_LEN_MAX)) == 0 || len > API_NAME_LEN_MAX) {
		api_drop("a schema name that is NULL, empty or longer than 256 bytes");
		return 0;
	}
	int saved = errno;
	struct api_schema *s = calloc(1, sizeof(*s));
	if (!s) {
		why = "out of memory";
		goto out;
	}
	why = schema_check(s, fields, nfields);
	if (why)
		goto out;
	s->sid = d9_agent_string(name, len);
	if (!s->sid) {
		why = "definition tables full";
		goto out;
	}
	d9__lock(&api_lock);
	for (uint32_t i = 1; i <= nschemas && !h; i++)
		if (schema_same(schemas[i], s))
			h = i;
	if (!h && nschemas >= API_SCHEMAS_MAX) {
		why = "more than 1024 schemas";
	} else if (!h) {
		/* its definition first: every segment that may hold its events defines it */
		if (d9__defs_custom_schema(nschemas + 1, s->sid, &s->cs) == 0) {
			h = nschemas + 1;
			schemas[h] = s;
			s = NULL;
			__atomic_store_n(&nschemas, h, __ATOMIC_RELEASE);
		} else {
			why = "definition tables full";
		}
	}
	d9__unlock(&api_lock);
out:
	free(s);
	errno = saved;
	if (why)
		api_drop(why);
	return h;
}

/* ---- recording (hot path) -------------------------------------------------------------------- */

static inline uint64_t name_sid(uint32_t h)
{
	/* h - 1 wraps for 0: one compare covers "none" and "too large" */
	if (h - 1 >= __atomic_load_n(&nnames, __ATOMIC_ACQUIRE))
		return 0;
	return names[h].sid;
}

static void api_mark(uint32_t h)
{
	uint64_t sid = name_sid(h);

	if (D9_UNLIKELY(!sid)) {
		api_drop("a mark of an unknown name handle");
		return;
	}
	D9__REC(d9__raw_one(&t_->raw, d9__now(), D9__RAW_HDR(D9_EV_MARK, D9__RW_MARK, 0), sid));
}

static void api_value(uint32_t h, uint32_t kind, int64_t v)
{
	uint64_t sid = name_sid(h);

	if (D9_UNLIKELY(!sid)) {
		api_drop("a value of an unknown name handle");
		return;
	}
	D9__REC(d9_raw_value(&t_->raw, d9__now(), sid, kind, v));
}

static void api_gauge(uint32_t h, int64_t v)
{
	api_value(h, D9_VALUE_GAUGE, v);
}

static void api_gauge_f64(uint32_t h, double v)
{
	int64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	api_value(h, D9_VALUE_GAUGE_F64, bits);
}

static void api_counter_add(uint32_t h, int64_t delta)
{
	if (D9_UNLIKELY(!name_sid(h))) {
		api_drop("a counter of an unknown name handle");
		return;
	}
	/* the total, not the delta, goes into the trace: every segment tells the counter's value
	 * alone, whatever segments were deleted before it (wrapping, like any int64 sum) */
	uint64_t total = __atomic_add_fetch((uint64_t *)&names[h].total, (uint64_t)delta,
		__ATOMIC_RELAXED);
	api_value(h, D9_VALUE_COUNTER, (int64_t)total);
}

static inline size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Stores one CustomEvent of schema id as a raw record (d9-agent.h): the schema, len, then the
 * payload encoded here (the writer copies it as it is); len is the payload's exact size (computed
 * by api_event). Returns 0 or -ENOSPC (nothing written). */
static int enc_event(struct d9__raw *r, uint64_t ticks, uint32_t id, const struct api_schema *s,
	const union d9_arg *args, size_t len)
{
	unsigned words = D9__RW_CUSTOM + (unsigned)((len + 7) / 8);
	uint64_t *w = d9__raw_take(r, words, ticks);
	if (!w)
		return -ENOSPC;
	w[1] = D9__RAW_HDR(D9_EV_CUSTOM, words, 0);
	w[2] = id;
	w[3] = len;
	uint8_t *p = (uint8_t *)(w + 4);
	for (uint32_t i = 0; i < s->cs.nfields; i++) {
		const union d9_arg *a = &args[i];
		switch (s->cs.f[i].type) {
		case D9_CT_U64:
			p = d9_put_varint(p, a->u);
			break;
		case D9_CT_I64:
			p = d9_put_varint(p, d9_zigzag(a->i));
			break;
		case D9_CT_F64: {
			uint64_t bits;
			memcpy(&bits, &a->f, 8);
			d9_store_le64(p, bits);
			p += 8;
			break;
		}
		default: {
			size_t n = a->s.len < s->cs.f[i].max_len ? a->s.len : s->cs.f[i].max_len;
			p = d9_put_varint(p, n);
			if (n)
				memcpy(p, a->s.p, n);
			p += n;
			break;
		}
		}
	}
	return 0;
}

static void api_event(uint32_t h, const union d9_arg *args, uint32_t nargs)
{
	const struct api_schema *s = h - 1 < __atomic_load_n(&nschemas, __ATOMIC_ACQUIRE) ?
		schemas[h] : NULL;

	if (D9_UNLIKELY(!s)) {
		api_drop("an event of an unknown schema handle");
		return;
	}
	if (D9_UNLIKELY(nargs != s->cs.nfields || (nargs && !args))) {
		api_drop("an event whose values do not match its schema");
		return;
	}
	size_t len = 0;
	for (uint32_t i = 0; i < nargs; i++) {
		const union d9_arg *a = &args[i];
		switch (s->cs.f[i].type) {
		case D9_CT_U64:
			len += varint_len(a->u);
			break;
		case D9_CT_I64:
			len += varint_len(d9_zigzag(a->i));
			break;
		case D9_CT_F64:
			len += 8;
			break;
		default: {
			/* longer values are cut to the field's bound; a "negative" length or a NULL
			 * pointer with a length is a broken call, not a long value */
			if (D9_UNLIKELY(a->s.len > SIZE_MAX / 2 || (a->s.len && !a->s.p))) {
				api_drop("an event with a NULL string or a negative length");
				return;
			}
			size_t n = a->s.len < s->cs.f[i].max_len ? a->s.len : s->cs.f[i].max_len;
			len += varint_len(n) + n;
			break;
		}
		}
	}
	D9__REC(enc_event(&t_->raw, d9__now(), h, s, args, len));
}

static void api_request_begin(uint64_t id)
{
	if (d9__api_request_begin)
		d9__api_request_begin(id);
}

static void api_request_end(uint64_t id, int status)
{
	if (d9__api_request_end)
		d9__api_request_end(id, status);
}

static const struct d9_api_v1 api_table = {
	.size = sizeof(struct d9_api_v1),
	.version = 1,
	.request_begin = api_request_begin,
	.request_end = api_request_end,
	.name = api_name,
	.mark = api_mark,
	.gauge = api_gauge,
	.gauge_f64 = api_gauge_f64,
	.counter_add = api_counter_add,
	.schema = api_schema,
	.event = api_event,
};

/* The one exported symbol of the API (include/d9.h looks it up): the table, or NULL when the
 * agent is off, so a program skips its calls entirely. */
const struct d9_api_v1 *d9_api_v1(void)
{
	return d9_agent_active() ? &api_table : NULL;
}
