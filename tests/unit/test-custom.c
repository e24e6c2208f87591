/* test-custom.c: the application API's part of the format (FORMAT.md, "Application events"):
 * CustomSchema definitions, CustomEvent payloads, Mark and Value events. Round trips come back
 * exact; damaged schemas are malformed definitions (skipped, counted in bad_defs, reported) and
 * damaged payloads are refused by d9_custom_decode, which never reads outside its input: inputs
 * sit at the end of exact-size heap blocks, so AddressSanitizer catches any over-read. */
#include "d9-format.h"
#include "t.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

struct seg {
	uint8_t *buf;
	struct d9_wbuf w;
	uint8_t *open;
};

static void seg_begin(struct seg *s, size_t cap)
{
	struct d9_header h = {
		.pid = 77, .ppid = 1, .clock_source = D9_CLOCK_MONOTONIC, .time_shift = 0,
		.ticks_per_sec = 1000000000, .anchor_ticks = 1000, .anchor_mono_ns = 1000,
		.anchor_realtime_ns = 1700000000000000000ull, .start_realtime_ns = 1700000000000000000ull,
		.writer = "test", .process = "t", .cmdline = "t", .cmdline_len = 2,
		.hostname = "h", .boot_id = "b",
	};

	s->buf = calloc(1, cap);
	T_ASSERT(s->buf);
	int n = d9_prefix_encode(s->buf, cap);
	T_ASSERT(n > 0);
	d9_wbuf_init(&s->w, s->buf + n, cap - (size_t)n);
	T_EQ(d9_header_write(&s->w, &h), 0);
	T_EQ(d9_schema_write(&s->w, D9_SCHEMA_API), 0);
}

static size_t seg_len(const struct seg *s)
{
	return (size_t)(s->w.p - s->buf);
}

struct probs {
	int n, corrupt, bad_event;
	char last[160];
};

static void on_prob(void *ctx, int kind, uint64_t off, const char *msg)
{
	struct probs *p = ctx;

	(void)off;
	p->n++;
	p->corrupt += kind == D9_PROB_CORRUPT;
	p->bad_event += kind == D9_PROB_BAD_EVENT;
	snprintf(p->last, sizeof(p->last), "%s", msg);
}

/* A CustomSchema body as raw bytes: id, name, then `fields` as given. */
static size_t schema_body(uint8_t *out, uint64_t id, const void *fields, size_t n)
{
	uint8_t *p = d9_put_varint(out, id);

	p = d9_put_varint(p, 9);
	memcpy(p, fields, n);
	return (size_t)(p - out) + n;
}

/* Reads every definition of the segment in buf; fills defs (CustomSchema ones). */
static int read_defs(const uint8_t *buf, size_t len, struct probs *pr, struct d9_def *defs,
	int max, uint64_t *bad_defs)
{
	struct d9_reader *r;
	struct d9_chunk c;
	int n = 0;

	memset(pr, 0, sizeof(*pr));
	T_EQ(d9_reader_open_mem(&r, buf, len), 0);
	d9_reader_on_problem(r, on_prob, pr);
	while (d9_reader_next(r, &c) == 1) {
		if (c.type != D9_CHUNK_DEFS)
			continue;
		struct d9_defs_iter it;
		struct d9_def d;
		d9_defs_init(&it, r, &c);
		while (d9_defs_next(&it, &d) == 1)
			if (d.kind == D9_DEF_CUSTOM_SCHEMA && n < max)
				defs[n++] = d;
	}
	*bad_defs = d9_reader_stats(r)->bad_defs;
	d9_reader_close(r);
	return n;
}

/* The writer's schema, the reader's view of it, and values through an event and back. */
TEST(custom_schema_and_event_roundtrip)
{
	struct d9_custom_schema cs = { .nfields = 5 };
	const char *names[5] = { "id", "delta", "price", "user", "blob" };
	const uint8_t types[5] = { D9_CT_U64, D9_CT_I64, D9_CT_F64, D9_CT_STR, D9_CT_BYTES };
	struct seg s;

	for (int i = 0; i < 5; i++)
		cs.f[i] = (struct d9_custom_field){ types[i], (uint8_t)strlen(names[i]), names[i],
			i >= 3 ? 16 : 0 };
	T_EQ(d9_custom_max_data(&cs), 10 + 10 + 8 + 18 + 18);
	seg_begin(&s, 1 << 16);
	uint8_t *c = d9_chunk_open(&s.w, D9_CHUNK_DEFS);
	d9_def_string(&s.w, 9, "order", 5);
	d9_def_custom_schema(&s.w, 3, 9, &cs);
	T_EQ(d9_chunk_close(&s.w, c), 0);

	/* a payload as the agent writes it (agent/api.c, enc_event) */
	uint8_t data[64], *p = data;
	double price = -0.1;
	uint64_t bits;
	memcpy(&bits, &price, 8);
	p = d9_put_varint(p, UINT64_MAX);
	p = d9_put_varint(p, d9_zigzag(INT64_MIN));
	d9_store_le64(p, bits);
	p += 8;
	p = d9_put_varint(p, 3);
	memcpy(p, "bob", 3);
	p += 3;
	p = d9_put_varint(p, 0);
	struct d9_enc e;
	size_t room = (size_t)(s.w.end - s.w.p);
	T_EQ(d9_enc_begin(&e, s.w.p, room, 5, 1, 2000, 0, D9_SCHEMA_API), 0);
	T_EQ(d9_enc_mark(&e, 2001, 9), 0);
	T_EQ(d9_enc_value(&e, 2002, 9, D9_VALUE_COUNTER, -5), 0);
	T_EQ(d9_enc_custom(&e, 2003, 3, data, (size_t)(p - data)), 0);
	s.w.p += d9_enc_end(&e, 1);

	struct d9_reader *r;
	struct d9_chunk ch;
	struct probs pr = { 0 };
	int nev = 0, ndef = 0;
	struct d9_custom_schema got;
	T_EQ(d9_reader_open_mem(&r, s.buf, seg_len(&s)), 0);
	d9_reader_on_problem(r, on_prob, &pr);
	while (d9_reader_next(r, &ch) == 1) {
		if (ch.type == D9_CHUNK_DEFS) {
			struct d9_defs_iter it;
			struct d9_def d;
			d9_defs_init(&it, r, &ch);
			while (d9_defs_next(&it, &d) == 1) {
				if (d.kind != D9_DEF_CUSTOM_SCHEMA)
					continue;
				ndef++;
				T_EQ(d.id, 3);
				T_EQ(d.u.custom_schema.name, 9);
				T_EQ(d9_custom_schema_parse(d.u.custom_schema.fields,
					d.u.custom_schema.fields_len, &got), 0);
			}
		} else if (ch.type == D9_CHUNK_EVENTS) {
			struct d9_events_iter it;
			struct d9_event ev;
			d9_events_init(&it, r, &ch);
			while (d9_events_next(&it, &ev) == 1) {
				nev++;
				if (ev.type == D9_EV_MARK) {
					T_EQ(ev.f[D9_F_MARK_NAME], 9);
				} else if (ev.type == D9_EV_VALUE) {
					T_EQ(ev.f[D9_F_VALUE_NAME], 9);
					T_EQ(ev.f[D9_F_VALUE_KIND], D9_VALUE_COUNTER);
					T_EQ((int64_t)ev.f[D9_F_VALUE_VALUE], -5);
				} else {
					struct d9_custom_value v[D9_CUSTOM_MAX_FIELDS];
					T_EQ(ev.type, D9_EV_CUSTOM);
					T_EQ(ev.f[D9_F_CUSTOM_SCHEMA], 3);
					T_EQ(d9_custom_decode(&got, ev.fdata[D9_F_CUSTOM_DATA],
						ev.f[D9_F_CUSTOM_DATA], v), 0);
					T_ASSERT(v[0].u == UINT64_MAX);
					T_ASSERT((int64_t)v[1].u == INT64_MIN);
					T_ASSERT(v[2].u == bits);
					T_EQ(v[3].len, 3);
					T_ASSERT(!memcmp(v[3].p, "bob", 3));
					T_EQ(v[4].len, 0);
				}
			}
		}
	}
	T_EQ(pr.n, 0);
	T_EQ(ndef, 1);
	T_EQ(nev, 3);
	T_EQ(got.nfields, 5);
	for (int i = 0; i < 5; i++) {
		T_EQ(got.f[i].type, types[i]);
		T_EQ(got.f[i].name_len, strlen(names[i]));
		T_ASSERT(!memcmp(got.f[i].name, names[i], strlen(names[i])));
	}
	d9_reader_close(r);
	free(s.buf);
}

/* Damaged CustomSchema bodies: each is a malformed definition (skipped, counted, reported); the
 * good one after them still decodes. */
TEST(damaged_schema_defs)
{
	static const uint8_t bad_type[] = { 'z', 1, 'a' };
	static const uint8_t name_overrun[] = { 'u', 9, 'a', 'b' };
	static const uint8_t name_empty[] = { 'u', 0 };
	static const uint8_t name_len_huge[] = { 'u', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0x01, 'a' };
	static const uint8_t type_only[] = { 'u' };
	uint8_t long_name[2 + 65];
	uint8_t many[34 * 3];
	uint8_t body[256];
	struct seg s;

	long_name[0] = 'u';
	long_name[1] = 65;
	memset(long_name + 2, 'n', 65);
	for (int i = 0; i < 33; i++) { /* 33 fields: one too many */
		many[3 * i] = 'i';
		many[3 * i + 1] = 1;
		many[3 * i + 2] = (uint8_t)('A' + i);
	}
	seg_begin(&s, 1 << 16);
	uint8_t *c = d9_chunk_open(&s.w, D9_CHUNK_DEFS);
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 1, bad_type, sizeof(bad_type)));
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 2, name_overrun,
		sizeof(name_overrun)));
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 3, name_empty, sizeof(name_empty)));
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 4, name_len_huge,
		sizeof(name_len_huge)));
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 5, type_only, sizeof(type_only)));
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 6, long_name, sizeof(long_name)));
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 7, many, sizeof(many)));
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 0, "u\001a", 3)); /* id 0 */
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, "\x80", 1); /* id cut */
	/* 32 fields: the most allowed, valid */
	d9_def_raw(&s.w, D9_DEF_CUSTOM_SCHEMA, body, schema_body(body, 8, many, 32 * 3));
	T_EQ(d9_chunk_close(&s.w, c), 0);

	struct probs pr;
	struct d9_def defs[16];
	uint64_t bad = 0;
	int n = read_defs(s.buf, seg_len(&s), &pr, defs, 16, &bad);
	T_EQ(n, 1);
	T_EQ(defs[0].id, 8);
	T_EQ(bad, 9);
	T_EQ(pr.corrupt, 9);
	T_ASSERT(strstr(pr.last, "malformed CustomSchema definition"));
	free(s.buf);
}

/* A copy of b at the end of an exact-size heap block. */
static uint8_t *exact(const void *b, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);

	T_ASSERT(p);
	memcpy(p, b, n);
	return p;
}

static int decode_exact(const struct d9_custom_schema *s, const void *b, size_t n)
{
	struct d9_custom_value v[D9_CUSTOM_MAX_FIELDS];
	uint8_t *p = exact(b, n);
	int rc = d9_custom_decode(s, p, n, v);

	free(p);
	return rc;
}

static void parse_ok(struct d9_custom_schema *s, const void *fields, size_t n)
{
	T_EQ(d9_custom_schema_parse(fields, n, s), 0);
}

/* Damaged payloads: cut at every byte, a length that runs past the end, left-over bytes, a
 * string longer than the format's bound; all refused without an over-read. */
TEST(damaged_payloads)
{
	static const uint8_t fields[] = { 'u', 1, 'a', 'i', 1, 'b', 'f', 1, 'c', 's', 1, 'd', 'b',
		1, 'e' };
	struct d9_custom_schema s;
	uint8_t good[64], *p = good;

	parse_ok(&s, fields, sizeof(fields));
	T_EQ(s.nfields, 5);
	p = d9_put_varint(p, 300);
	p = d9_put_varint(p, d9_zigzag(-3));
	memset(p, 0x11, 8);
	p += 8;
	p = d9_put_varint(p, 2);
	*p++ = 'h';
	*p++ = 'i';
	p = d9_put_varint(p, 1);
	*p++ = 0;
	size_t n = (size_t)(p - good);
	T_EQ(decode_exact(&s, good, n), 0);
	for (size_t cut = 0; cut < n; cut++)
		T_EQ(decode_exact(&s, good, cut), D9_ECORRUPT);
	uint8_t more[80];
	memcpy(more, good, n);
	more[n] = 7; /* a byte left over */
	T_EQ(decode_exact(&s, more, n + 1), D9_ECORRUPT);

	/* the string's length runs past the payload; then a 2^64-1 length */
	static const uint8_t overrun[] = { 0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 'x' };
	T_EQ(decode_exact(&s, overrun, sizeof(overrun)), D9_ECORRUPT);
	static const uint8_t huge[] = { 0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	T_EQ(decode_exact(&s, huge, sizeof(huge)), D9_ECORRUPT);
	/* a varint of 11 bytes */
	static const uint8_t long_varint[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0x01 };
	T_EQ(decode_exact(&s, long_varint, sizeof(long_varint)), D9_ECORRUPT);

	/* one string field: 4096 bytes pass, 4097 do not */
	struct d9_custom_schema one;
	parse_ok(&one, "s\001s", 3);
	uint8_t *big = calloc(1, 4100);
	T_ASSERT(big);
	p = d9_put_varint(big, 4096);
	T_EQ(decode_exact(&one, big, (size_t)(p - big) + 4096), 0);
	p = d9_put_varint(big, 4097);
	T_EQ(decode_exact(&one, big, (size_t)(p - big) + 4097), D9_ECORRUPT);
	free(big);
	/* a NULL payload of length 0 is an empty one: right only for a schema without fields */
	struct d9_custom_schema none;
	parse_ok(&none, "", 0);
	T_EQ(none.nfields, 0);
	struct d9_custom_value v[1];
	T_EQ(d9_custom_decode(&none, NULL, 0, v), 0);
	T_EQ(d9_custom_decode(&one, NULL, 0, v), D9_ECORRUPT);
}

/* Random bytes as schemas and payloads: never a crash or an over-read (ASan), every accepted
 * schema within the limits. */
TEST(random_schemas_and_payloads)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint8_t buf[400];
	static const uint8_t alphabet[] = { 'u', 'i', 'f', 's', 'b', 0, 1, 2, 3, 0x7f, 0x80, 0xff };
	int accepted = 0, decoded = 0;

	for (int round = 0; round < 20000; round++) {
		size_t n = 0;
		/* fields of random types and name lengths, then maybe one byte changed and a cut */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int nf = (int)(x % 40);
		for (int f = 0; f < nf && n + 2 + 70 < sizeof(buf); f++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			buf[n++] = alphabet[x % 5 + (x % 17 == 0 ? 5 : 0)];
			size_t len = (x >> 8) % 10 == 0 ? (x >> 16) % 70 : 1 + (x >> 16) % 4;
			buf[n++] = (uint8_t)len;
			for (size_t i = 0; i < len; i++)
				buf[n++] = (uint8_t)(x >> (i % 56));
		}
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (n && x % 4 == 0)
			buf[(x >> 8) % n] = (uint8_t)(x >> 24);
		if (n && x % 5 == 0)
			n = (x >> 32) % n;
		struct d9_custom_schema s;
		uint8_t *p = exact(buf, n);
		int rc = d9_custom_schema_parse(p, n, &s);
		if (rc == 0) {
			accepted++;
			T_ASSERT(s.nfields <= D9_CUSTOM_MAX_FIELDS);
			for (uint32_t i = 0; i < s.nfields; i++)
				T_ASSERT(s.f[i].name_len >= 1 && s.f[i].name_len <= D9_CUSTOM_NAME_MAX);
			/* the same bytes as a payload of that schema */
			decoded += decode_exact(&s, buf, n) == 0;
		} else {
			T_EQ(rc, D9_ECORRUPT);
		}
		free(p);
	}
	T_ASSERT(accepted > 100); /* the generator reaches valid schemas, not only garbage */
	printf("# random: %d of 20000 schemas accepted, %d payloads decoded\n", accepted, decoded);
}

/* d9_enc_custom never writes past the chunk: a payload bigger than the room left is refused
 * with nothing written. */
TEST(enc_custom_room)
{
	uint8_t buf[D9_ENC_MIN_BUF + 64];
	uint8_t data[200];
	struct d9_enc e;

	memset(data, 0xab, sizeof(data));
	T_EQ(d9_enc_begin(&e, buf, sizeof(buf), 1, 0, 0, 0, D9_SCHEMA_API), 0);
	uint8_t *before = e.p;
	T_EQ(d9_enc_custom(&e, 10, 1, data, sizeof(data)), -ENOSPC);
	T_ASSERT(e.p == before);
	T_EQ(e.count, 0);
	T_EQ(d9_enc_custom(&e, 10, 1, data, 40), 0);
	T_EQ(e.count, 1);
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
