/* d9.h: the optional application API of d9 (README.md, "Application API (d9.h)").
 * One header, no link-time dependency: a program built with it runs unchanged without the agent.
 * Each call looks up the agent's one exported symbol, d9_api_v1, once per translation unit
 * (dlsym, which glibc has in libc itself) and then costs a load and a branch; without the agent
 * every call returns at once. Never blocks, never allocates after registration, never changes
 * errno; registration (d9_name, d9_schema) takes the agent's lock and may allocate.
 * Works in C (gnu99 and later) and C++. agent/DESIGN.md, "Application API", says why a lookup and
 * not a weak symbol. */
#ifndef D9_H
#define D9_H

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* glibc's RTLD_DEFAULT (the global scope) is only declared with _GNU_SOURCE; its value is 0 */
#ifdef RTLD_DEFAULT
#define D9_RTLD_DEFAULT_ RTLD_DEFAULT
#else
#define D9_RTLD_DEFAULT_ ((void *)0)
#endif

/* Field types of a custom event schema (the bytes stored in the trace). */
enum d9_type { D9_U64 = 'u', D9_I64 = 'i', D9_F64 = 'f', D9_STR = 's', D9_BYTES = 'b' };

/* One field of a custom event schema. max_len (D9_STR, D9_BYTES only, at most 4096): longer
 * values are cut to it. A schema has at most 32 fields, names of 1 to 64 bytes, and its largest
 * event (8 or 10 bytes per number, max_len + 2 per string) at most 4096 bytes. */
struct d9_field {
	const char *name;
	int type; /* enum d9_type */
	uint32_t max_len;
};

struct d9_span {
	const void *p;
	size_t len;
};

/* One value of a custom event, in the schema's field order: u for D9_U64, i for D9_I64, f for
 * D9_F64, s for D9_STR and D9_BYTES (use the helpers below). */
union d9_arg {
	uint64_t u;
	int64_t i;
	double f;
	struct d9_span s;
};

/* The agent's table (agent/api.c). size: bytes of the table the agent has: a newer header
 * calls a function only if the running agent's table reaches it. */
struct d9_api_v1 {
	uint32_t size;
	uint32_t version; /* 1 */
	void (*request_begin)(uint64_t id);
	void (*request_end)(uint64_t id, int status);
	uint32_t (*name)(const char *name);
	void (*mark)(uint32_t name);
	void (*gauge)(uint32_t name, int64_t value);
	void (*gauge_f64)(uint32_t name, double value);
	void (*counter_add)(uint32_t name, int64_t delta);
	uint32_t (*schema)(const char *name, const struct d9_field *fields, uint32_t nfields);
	void (*event)(uint32_t schema, const union d9_arg *args, uint32_t nargs);
};

/* The table, or NULL without the agent (or with the agent off). Looked up once: the first call
 * of each translation unit calls dlsym. */
static inline const struct d9_api_v1 *d9_api(void)
{
	/* 0: not looked up yet; 1: no agent; else the table */
	static uintptr_t d9_api_cache_;
	uintptr_t v = __atomic_load_n(&d9_api_cache_, __ATOMIC_ACQUIRE);

	if (__builtin_expect(v == 0, 0)) {
		typedef const struct d9_api_v1 *d9_api_fn_(void);
		int saved = errno;
		void *sym = dlsym(D9_RTLD_DEFAULT_, "d9_api_v1");
		const struct d9_api_v1 *t = NULL;
		if (sym) {
			d9_api_fn_ *fn;
			memcpy(&fn, &sym, sizeof(fn)); /* object to function pointer, ISO-clean */
			t = fn();
		}
		errno = saved;
		v = t ? (uintptr_t)t : 1;
		__atomic_store_n(&d9_api_cache_, v, __ATOMIC_RELEASE);
	}
	return v == 1 ? NULL : (const struct d9_api_v1 *)v;
}

/* 1 when the agent is recording (calls below go somewhere). */
static inline int d9_active(void)
{
	return d9_api() != NULL;
}

/* A request of the application begins / ends on this thread; id: the application's own id
 * (a request id, a connection and sequence number). status: the application's outcome (e.g.
 * an HTTP status). Overrides d9's own guess of request boundaries (D9_REQUESTS). */
static inline void d9_request_begin(uint64_t id)
{
	const struct d9_api_v1 *a = d9_api();
	if (a)
		a->request_begin(id);
}

static inline void d9_request_end(uint64_t id, int status)
{
	const struct d9_api_v1 *a = d9_api();
	if (a)
		a->request_end(id, status);
}

/* Registers a name for marks and values (once; the same name gives the same handle). Returns
 * the handle, or 0 without the agent or when the name is rejected (NULL, empty, longer than
 * 256 bytes, too many names): events with handle 0 are counted as dropped. */
static inline uint32_t d9_name(const char *name)
{
	const struct d9_api_v1 *a = d9_api();
	return a ? a->name(name) : 0;
}

/* An instant: something happened now (a config reload, a cache flush). */
static inline void d9_mark(uint32_t name)
{
	const struct d9_api_v1 *a = d9_api();
	if (a)
		a->mark(name);
}

/* A gauge's new value (queue length, connections open). */
static inline void d9_gauge(uint32_t name, int64_t value)
{
	const struct d9_api_v1 *a = d9_api();
	if (a)
		a->gauge(name, value);
}

static inline void d9_gauge_f64(uint32_t name, double value)
{
	const struct d9_api_v1 *a = d9_api();
	if (a)
		a->gauge_f64(name, value);
}

/* Adds delta to a counter (the process's total since its start, kept by the agent: the trace
 * records the total after each add). */
static inline void d9_counter_add(uint32_t name, int64_t delta)
{
	const struct d9_api_v1 *a = d9_api();
	if (a)
		a->counter_add(name, delta);
}

/* Registers a custom event schema (once; the same name and fields give the same handle).
 * Returns the handle, or 0 without the agent or when the schema is rejected (limits above, NULL
 * pointers, unknown types, duplicate field names): its events are then counted as dropped. */
static inline uint32_t d9_schema(const char *name, const struct d9_field *fields, uint32_t nfields)
{
	const struct d9_api_v1 *a = d9_api();
	return a ? a->schema(name, fields, nfields) : 0;
}

/* Records one event of schema: nargs must be the schema's field count, args in its order. */
static inline void d9_event(uint32_t schema, const union d9_arg *args, uint32_t nargs)
{
	const struct d9_api_v1 *a = d9_api();
	if (a)
		a->event(schema, args, nargs);
}

static inline union d9_arg d9_u64(uint64_t v)
{
	union d9_arg a;
	a.u = v;
	return a;
}

static inline union d9_arg d9_i64(int64_t v)
{
	union d9_arg a;
	a.i = v;
	return a;
}

static inline union d9_arg d9_f64(double v)
{
	union d9_arg a;
	a.f = v;
	return a;
}

/* A NUL-terminated string (NULL: empty). */
static inline union d9_arg d9_str(const char *s)
{
	union d9_arg a;
	a.s.p = s;
	a.s.len = s ? strlen(s) : 0;
	return a;
}

static inline union d9_arg d9_bytes(const void *p, size_t len)
{
	union d9_arg a;
	a.s.p = p;
	a.s.len = len;
	return a;
}

#ifdef __cplusplus
}
#endif
#endif
