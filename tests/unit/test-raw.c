/* test-raw.c: the raw records' lengths (agent/d9-agent.h, "Raw records") against the encoder.
 * A recording thread stores each event as D9__RW_* words and the writer encodes the block in
 * place, over those words (agent/raw.c): that is safe only if no event's encoding writes more
 * bytes than its record holds (Park's copies 16 bytes of its cached timeout whatever its length),
 * the records start past the chunk's heads, and the block's reserve holds the CRC and the
 * encoder's end margin. Each test encodes one event with the longest fields the encoder can be
 * given (a time delta of 2^64 - 1 units, coroutine ids far from every recent one, u64 fields of
 * 2^64 - 1) and checks how far it wrote against the record's length. */
#include "d9-agent.h"
#include "t.h"

#include <stdint.h>

static uint8_t buf[1 << 16];

/* An encoder whose next event has the longest possible time delta. */
static struct d9_enc enc(void)
{
	struct d9_enc e;

	memset(&e, 0, sizeof(e));
	T_EQ(d9_enc_begin(&e, buf, sizeof(buf), 1, 1, 0, 0, D9_AGENT_SCHEMA), 0);
	return e;
}

#define FAR (1ull << 62) /* a coroutine id whose delta from 0 takes a 10-byte varint */
#define BIG UINT64_MAX
#define T0 UINT64_MAX /* the time: a delta of 2^64 - 1 units (shift 0, base 0) */

/* How far past the encoder's position `call` writes: the last byte that differs from a fill,
 * over two fills (a written byte may equal one of them). */
#define EXTENT(call)                                                             \
	({                                                                       \
		size_t x_ = 0;                                                   \
		for (int f_ = 0; f_ < 2; f_++) {                                 \
			struct d9_enc e_ = enc();                               \
			struct d9_enc *e = &e_;                                  \
			uint8_t *p0 = e->p;                                      \
			memset(p0, f_ ? 0x5a : 0xa5, 4096);                     \
			T_EQ((call), 0);                                         \
			for (size_t i_ = 4096; i_ > x_; i_--)                   \
				if (p0[i_ - 1] != (f_ ? 0x5a : 0xa5)) {         \
					x_ = i_;                                 \
					break;                                   \
				}                                                \
			if ((size_t)(e->p - p0) > x_)                           \
				x_ = (size_t)(e->p - p0);                       \
		}                                                                \
		x_;                                                              \
	})

/* the bytes the event `call` writes fit in `words` words */
#define FITS(words, call)                                                        \
	do {                                                                     \
		size_t n_ = EXTENT(call);                                        \
		if (n_ > (size_t)(words) * 8)                                   \
			T_FAIL("%s: %zu bytes in a %u-word record", #call, n_,   \
				(unsigned)(words));                             \
	} while (0)

TEST(raw_record_lengths)
{
	FITS(D9__RW_POLL_START, d9_enc_poll_start(e, T0, FAR, BIG));
	FITS(D9__RW_POLL_END, d9_enc_poll_end(e, T0, FAR));
	FITS(D9__RW_PARK, d9_enc_park(e, T0, UINT32_MAX, INT64_MIN));
	FITS(D9__RW_UNPARK, d9_enc_unpark(e, T0, INT64_MIN, D9_UNKNOWN, D9_UNKNOWN));
	FITS(D9__RW_UNPARK_STATS, d9_enc_unpark(e, T0, INT64_MIN, BIG - 1, BIG - 1));
	FITS(D9__RW_UNPARK_STATS, d9_enc_unpark(e, T0, INT64_MIN, BIG - 1, D9_UNKNOWN));
	FITS(D9__RW_WAKE, d9_enc_wake(e, T0, FAR, FAR * 2 + 1, 7, -(1ll << 59)));
	FITS(D9__RW_SPAWN, d9_enc_spawn(e, T0, FAR, FAR * 2 + 1, BIG));
	FITS(3, d9_enc_coroutine_exit(e, T0, FAR));
	FITS(3, d9_enc_queue_sample(e, T0, BIG));
	FITS(3, d9_enc_zero_timeout_waits(e, T0, BIG));
	FITS(3, d9_enc_mark(e, T0, BIG));
	FITS(D9__RW_CALL, d9_enc_blocking_call(e, T0, FAR, BIG, UINT32_MAX, BIG, BIG));
	FITS(D9__RW_CALL, d9_enc_sched_delay(e, T0, FAR, BIG, UINT32_MAX, BIG, BIG));
	FITS(D9__RW_REQUEST_BEGIN, d9_enc_request_begin(e, T0, BIG, INT64_MIN, FAR, UINT32_MAX, BIG));
	FITS(D9__RW_REQUEST_END, d9_enc_request_end(e, T0, BIG, UINT32_MAX, BIG, BIG, UINT32_MAX,
		BIG, INT64_MIN, BIG));
	FITS(D9__RW_DROPPED, d9_enc_dropped(e, T0, BIG, UINT32_MAX));
	FITS(D9__RW_VALUE, d9_enc_value(e, T0, BIG, UINT32_MAX, INT64_MIN));
	static uint8_t payload[D9_CUSTOM_DATA_MAX];
	FITS(D9__RW_CUSTOM + D9_CUSTOM_DATA_MAX / 8, d9_enc_custom(e, T0, BIG, payload,
		sizeof(payload)));
	FITS(D9__RW_CUSTOM + 1, d9_enc_custom(e, T0, BIG, payload, 1));
}

/* The first event goes right after the heads (where a block's records start, rounded up to a
 * word), and the room a block keeps after its records holds the CRC and the encoder's margin. */
TEST(raw_block_layout)
{
	struct d9_enc e = enc();

	T_EQ((size_t)(e.p - buf), (size_t)(D9_CHUNK_HDR_LEN + D9_EVENTS_HDR_LEN));
	if (D9_CHUNK_CRC_LEN + D9_ENC_EVENT_MAX + 8 > D9__RAW_RESERVE)
		T_FAIL("CRC %d and encoder margin %d bytes, reserve %u", D9_CHUNK_CRC_LEN,
			D9_ENC_EVENT_MAX, D9__RAW_RESERVE);
}

/* The head word keeps each part: the largest custom record's length and a u32 small field. */
TEST(raw_head_word)
{
	uint64_t h = D9__RAW_HDR(D9_EV_REQUEST_END, D9__RW_CUSTOM + D9_CUSTOM_DATA_MAX / 8,
		UINT32_MAX);

	T_EQ(D9__RAW_TYPE(h), (uint32_t)D9_EV_REQUEST_END);
	T_EQ(D9__RAW_WORDS(h), (uint32_t)(D9__RW_CUSTOM + D9_CUSTOM_DATA_MAX / 8));
	T_EQ(D9__RAW_SMALL(h), UINT32_MAX);
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
