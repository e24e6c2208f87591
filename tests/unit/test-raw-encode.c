/* test-raw-encode.c: the writer's encoding of raw records (agent/raw.c) against the encoder it
 * must equal. raw.c encodes the six events a scheduler records most (Park, Unpark, PollStart,
 * PollEnd, Wake, QueueSample) with its own loop, the encoder's state in locals, and the rest through the
 * d9_enc_* calls; the chunk it makes must be byte for byte the one those calls make for the same
 * events, with the same count and per-type counts. Random blocks: every record type the agent
 * writes in raw form, time steps from 0 to 2^40 clock ticks (2^32 units at shift 8) and
 * backwards, coroutines near and far from the recent ones (the one-byte MRU codes and the
 * varint), timeouts that repeat and change (Park's cached bytes), schedstat fields known and
 * unknown. Then a block with a damaged record: the rest is
 * counted as dropped, never guessed at. Links agent/raw.c with the stand-ins below. */
#include "internal.h"
#include "t.h"

/* raw.c's outside world: the clock's shift, its tick conversion, its log */
uint8_t d9__shift = 8;

uint64_t d9_agent_ticks_to_ns(uint64_t ticks)
{
	return ticks * 3; /* any function does: both sides call it */
}

static int logged;

void d9__log(int level, const char *fmt, ...)
{
	(void)level;
	(void)fmt;
	logged++;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static struct d9__block *blk;
static uint8_t direct[D9_BLOCK_SIZE];

/* Fills blk with random raw records (and the same events through d9_enc_* into `direct`) until
 * about `fill` bytes of records; returns the direct chunk's size. */
static size_t fill_block(struct d9_enc *e, size_t fill, uint64_t *kept_types)
{
	uint64_t *rec = d9__raw_start(blk);
	uint32_t off = 0;
	uint64_t t = rnd() & 0xffffffffff;
	static const uint64_t timeouts[] = { (uint64_t)-1, 1000000, 0, 899785000, 5 };
	uint64_t cos[8];

	for (int i = 0; i < 8; i++)
		cos[i] = 0x7f0000000000ull + (rnd() & 0xffffff) * 4096;
	memset(blk, 0, sizeof(*blk));
	memset(e, 0, sizeof(*e));
	blk->tid = 7;
	blk->worker = 3;
	blk->first_time = t;
	blk->raw = 1;
	T_EQ(d9_enc_begin(e, direct, D9_BLOCK_DATA, 7, 3, t, d9__shift, D9_AGENT_SCHEMA), 0);
	while (off * 8 + 128 < fill) {
		uint64_t w[D9__RW_REQUEST_END] = { 0 }, r = rnd();
		uint32_t n;
		/* steps: mostly small, some past the one-byte varint, a few huge, some backwards */
		switch (r & 7) {
		case 0: break;
		case 1: t -= (r >> 8) & 0xfff; break;
		case 2: t += (r >> 8) & 0xffffffffff; break;
		default: t += (r >> 8) & 0x3ffff; break;
		}
		uint64_t co = (r >> 20) & 1 ? cos[(r >> 21) & 7] : rnd(), co2 = cos[(r >> 24) & 7];
		uint32_t small = (uint32_t)(r >> 27) & 7;
		w[0] = t;
		switch ((r >> 30) % 12) {
		case 0:
		case 1: {
			int64_t to = (int64_t)timeouts[(r >> 34) % 5];
			n = D9__RW_PARK;
			w[1] = D9__RAW_HDR(D9_EV_PARK, n, small);
			w[2] = (uint64_t)to;
			T_EQ(d9_enc_park(e, t, small, to), 0);
			break;
		}
		case 2:
		case 3: {
			int64_t ready = (r >> 34) & 1 ? -(int64_t)((r >> 35) & 0xff) : (int64_t)((r >> 35) & 3);
			uint64_t cpu = (r >> 40) & 1 ? D9_UNKNOWN : rnd() >> ((r >> 41) & 63);
			uint64_t wait = (r >> 47) & 1 ? D9_UNKNOWN : rnd() >> ((r >> 48) & 63);
			/* the recording thread's choice of record (d9_raw_unpark) */
			n = cpu == D9_UNKNOWN && wait == D9_UNKNOWN ? D9__RW_UNPARK : D9__RW_UNPARK_STATS;
			w[1] = D9__RAW_HDR(D9_EV_UNPARK, n, 0);
			w[2] = (uint64_t)ready;
			w[3] = cpu;
			w[4] = wait;
			T_EQ(d9_enc_unpark(e, t, ready, cpu, wait), 0);
			break;
		}
		case 4:
			n = D9__RW_POLL_START;
			w[1] = D9__RAW_HDR(D9_EV_POLL_START, n, 0);
			w[2] = co;
			w[3] = rnd() >> ((r >> 34) & 63);
			T_EQ(d9_enc_poll_start(e, t, co, w[3]), 0);
			break;
		case 5:
			n = D9__RW_POLL_END;
			w[1] = D9__RAW_HDR(D9_EV_POLL_END, n, 0);
			w[2] = co;
			T_EQ(d9_enc_poll_end(e, t, co), 0);
			break;
		case 6: {
			int64_t obj = (int64_t)(rnd() >> 5) >> ((r >> 34) & 63);
			n = D9__RW_WAKE;
			w[1] = D9__RAW_HDR(D9_EV_WAKE, n, small);
			w[2] = co;
			w[3] = (r >> 40) & 1 ? 0 : co2;
			w[4] = (uint64_t)obj;
			T_EQ(d9_enc_wake(e, t, co, w[3], small, obj), 0);
			break;
		}
		case 7:
			n = D9__RW_SPAWN;
			w[1] = D9__RAW_HDR(D9_EV_SPAWN, n, 0);
			w[2] = co;
			w[3] = co2;
			w[4] = rnd();
			T_EQ(d9_enc_spawn(e, t, co, co2, w[4]), 0);
			break;
		case 8:
			n = D9__RW_QUEUE_SAMPLE;
			w[1] = D9__RAW_HDR(D9_EV_QUEUE_SAMPLE, n, 0);
			w[2] = (r >> 34) & 1 ? r >> 50 : rnd() >> ((r >> 35) & 63);
			T_EQ(d9_enc_queue_sample(e, t, w[2]), 0);
			break;
		case 9:
			n = D9__RW_CALL;
			w[1] = D9__RAW_HDR(D9_EV_BLOCKING_CALL, n, small);
			w[2] = co;
			w[3] = r >> 52;
			w[4] = rnd() >> 20;
			w[D9__RAW_CALL_LAST] = (r >> 34) & 1 ? 0 : rnd() >> 40;
			T_EQ(d9_enc_blocking_call(e, t, co, w[3], small, w[4], w[D9__RAW_CALL_LAST]), 0);
			break;
		case 10:
			n = D9__RW_ZERO_WAITS;
			w[1] = D9__RAW_HDR(D9_EV_ZERO_TIMEOUT_WAITS, n, 0);
			w[2] = r >> 40;
			T_EQ(d9_enc_zero_timeout_waits(e, t, w[2]), 0);
			break;
		default:
			n = D9__RW_REQUEST_END;
			w[1] = D9__RAW_HDR(D9_EV_REQUEST_END, n, small);
			for (int k = 2; k < 9; k++)
				w[k] = rnd() >> (r >> (34 + k) & 31);
			w[5] &= 0xffffffff;
			T_EQ(d9_enc_request_end(e, t, w[2], small, w[3], w[4], (uint32_t)w[5], w[6],
				(int64_t)w[7], w[8] ? d9_agent_ticks_to_ns(w[8]) : 0), 0);
			break;
		}
		memcpy(rec + off, w, n * 8);
		off += n;
		blk->count++;
		kept_types[D9__RAW_TYPE(w[1])]++;
	}
	blk->size = off * 8;
	return d9_enc_end(e, 0);
}

TEST(raw_encode_matches_direct)
{
	blk = aligned_alloc(4096, D9_BLOCK_SIZE);
	T_ASSERT(blk != NULL);
	for (int round = 0; round < 400; round++) {
		struct d9_enc e;
		uint64_t types[256] = { 0 };
		size_t fill = round % 4 == 0 ? 200 + rnd() % 2000 : D9_BLOCK_DATA - 256;
		size_t n = fill_block(&e, fill, types);
		uint32_t events = blk->count;
		d9__raw_encode(blk);
		if (blk->size != n || memcmp(blk->data, direct, n) != 0)
			T_FAIL("round %d: %u bytes against the encoder's %zu (first difference at %zd)",
				round, blk->size, n, ({
					ssize_t at = -1;
					for (size_t i = 0; i < n && at < 0; i++)
						if (blk->data[i] != direct[i])
							at = (ssize_t)i;
					at;
				}));
		T_EQ(blk->count, events);
		T_EQ(blk->count, e.count);
		T_EQ(blk->last_time, e.last);
		T_EQ(blk->dropped, 0);
		for (int k = 0; k <= D9_EV_KNOWN_MAX; k++)
			T_EQ(blk->types[k], e.types[k]);
	}
	T_EQ(logged, 0);
	free(blk);
}

/* A record whose length is not its type's (memory gone wrong): the events before it are kept,
 * the rest of the block is one Dropped of their count, and it is said. */
TEST(raw_encode_damaged_record_counted)
{
	blk = aligned_alloc(4096, D9_BLOCK_SIZE);
	T_ASSERT(blk != NULL);
	struct d9_enc e;
	uint64_t types[256] = { 0 };
	fill_block(&e, 4000, types);
	uint64_t *rec = d9__raw_start(blk);
	uint32_t total = blk->count, at = 0, off = 0;
	/* damage the record in the middle: a Park that claims to be 5 words long */
	while (at < total / 2) {
		off += D9__RAW_WORDS(rec[off + 1]);
		at++;
	}
	rec[off + 1] = D9__RAW_HDR(D9_EV_PARK, 5, 0);
	d9__raw_encode(blk);
	T_EQ(blk->count, at + 1); /* the events before it and one Dropped */
	T_EQ(blk->dropped, total - at);
	T_EQ(blk->drop_records, 1);
	T_EQ(blk->types[D9_EV_DROPPED], 1);
	T_EQ(logged, 1);
	free(blk);
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
