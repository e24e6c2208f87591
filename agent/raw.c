/* raw.c: the writer's half of the raw records. A recording thread stores each event as a few
 * whole words (d9-agent.h, "Raw records"): no varints, no coroutine list, no type counts on its
 * hot path. When the writer takes the block it encodes the records into the block's chunk here,
 * in place, with the same encoder (format/) the thread used to call, so the chunk's bytes are
 * exactly what they were (tests/unit/test-raw-encode.c). The records start past the room of the
 * chunk's heads, and each record is at least as long as the most bytes its encoding writes
 * (tests/unit/test-raw.c), so the encoding, written from the block's start, never reaches a
 * record before it is read. */
#include "internal.h"

#include <string.h>

/* One record into e. Returns 0, or -1 for a record that is not one (a bug: the rest of the
 * block is then counted as dropped, never guessed at). */
static int encode_one(struct d9_enc *e, const uint64_t *p, uint32_t words)
{
	uint64_t now = p[0], h = p[1];
	uint32_t small = D9__RAW_SMALL(h);

	/* Park, Unpark, PollStart, PollEnd, Wake and QueueSample are d9__raw_encode's own: one
	 * reaches this only when the chunk is full or the record is damaged, and ends the block
	 * either way (the default below); but an Unpark with statistics (its UnparkStats after
	 * it) is encoded here */
	switch (D9__RAW_TYPE(h)) {
	case D9_EV_UNPARK: /* with statistics: the plain one is d9__raw_encode's */
		return words == D9__RW_UNPARK_STATS ?
			d9_enc_unpark(e, now, (int64_t)p[2], p[3], p[4]) : -1;
	case D9_EV_SPAWN:
		return words == D9__RW_SPAWN ? d9_enc_spawn(e, now, p[2], p[3], p[4]) : -1;
	case D9_EV_COROUTINE_EXIT:
		return words == 3 ? d9_enc_coroutine_exit(e, now, p[2]) : -1;
	case D9_EV_ZERO_TIMEOUT_WAITS:
		return words == 3 ? d9_enc_zero_timeout_waits(e, now, p[2]) : -1;
	case D9_EV_MARK:
		return words == 3 ? d9_enc_mark(e, now, p[2]) : -1;
	case D9_EV_BLOCKING_CALL:
		return words == D9__RW_CALL ?
			d9_enc_blocking_call(e, now, p[2], p[3], small, p[4],
			p[D9__RAW_CALL_LAST]) : -1;
	case D9_EV_SCHED_DELAY:
		return words == D9__RW_CALL ?
			d9_enc_sched_delay(e, now, p[2], p[3], small, p[4],
			p[D9__RAW_CALL_LAST]) : -1;
	case D9_EV_REQUEST_BEGIN:
		return words == D9__RW_REQUEST_BEGIN ?
			d9_enc_request_begin(e, now, p[2], (int64_t)p[3], p[4], small, p[5]) : -1;
	case D9_EV_REQUEST_END:
		/* the tail is recorded in clock ticks: converted here, off the recording thread */
		return words == D9__RW_REQUEST_END ? d9_enc_request_end(e, now, p[2], small, p[3],
			p[4], (uint32_t)p[5], p[6], (int64_t)p[7],
			p[8] ? d9_agent_ticks_to_ns(p[8]) : 0) : -1;
	case D9_EV_DROPPED:
		return words == D9__RW_DROPPED ? d9_enc_dropped(e, now, p[2], small) : -1;
	case D9_EV_VALUE:
		return words == D9__RW_VALUE ? d9_enc_value(e, now, p[2], small, (int64_t)p[3]) : -1;
	case D9_EV_CUSTOM: {
		/* schema, payload length, payload bytes padded to words; the payload is copied
		 * aside first: its encoding may overlap it */
		static uint8_t payload[D9_CUSTOM_DATA_MAX];
		if (words < D9__RW_CUSTOM || p[3] > D9_CUSTOM_DATA_MAX ||
			(words - D9__RW_CUSTOM) * 8 < p[3])
			return -1;
		memcpy(payload, p + 4, (size_t)p[3]);
		return d9_enc_custom(e, now, p[2], payload, (size_t)p[3]);
	}
	default:
		return -1;
	}
}

void d9__raw_encode(struct d9__block *b)
{
	struct d9_enc e;

	if (!b->raw)
		return;
	b->raw = 0;
	const uint64_t *p = d9__raw_start(b), *end = p + b->size / 8;
	memset(&e, 0, sizeof(e));
	d9_enc_begin(&e, b->data, D9_BLOCK_DATA, b->tid, b->worker, b->first_time, d9__shift,
		D9_AGENT_SCHEMA);
	/* The six events a scheduler records most are encoded here, with the encoder's position,
	 * last time and count in locals (through e they were loaded and stored at every event: its
	 * fields are written through byte pointers, which may alias them) and each recognised by
	 * its head's type and length at once: per event 84 -> 70 for Park or Unpark, 68 -> 63 for
	 * QueueSample (agent/COST.md, section 12). The bytes are d9_enc_*'s (the head's and fields'
	 * code is theirs: tests/unit/test-raw-encode.c); the other events go through encode_one,
	 * inline but cold (out of line, its call and frame made QueueSample cost 120). */
#define HOT(type, words) ((uint32_t)(type) | (uint32_t)(words) << 8)
	_Static_assert(D9_AGENT_SCHEMA & D9_SCHEMA_COMPACT_WAITS, "Park and Unpark below are 1.3's");
#ifdef __clang__
#define D9__COLD_LABEL /* clang takes `cold` on functions only */
#else
#define D9__COLD_LABEL __attribute__((cold))
#endif
	uint8_t *q = e.p, *const limit = e.end;
	uint64_t last = e.last;
	uint32_t count = e.count, words;
	const unsigned shift = d9__shift;
	for (; p + 2 <= end; p += words) {
		uint64_t h = p[1];
		uint32_t type = D9__RAW_TYPE(h);
		words = D9__RAW_WORDS(h);
		if (words < 3 || p + words > end)
			break;
		uint64_t t = p[0] >> shift, d = t > last ? t - last : 0;
		uint32_t tw = (uint32_t)h;
		if (D9_UNLIKELY(q >= limit)) {
			goto other; /* -ENOSPC there */
		} else if (tw == HOT(D9_EV_PARK, D9__RW_PARK)) {
			int64_t timeout = (int64_t)p[2];
			q = d9__enc_park_delta_fields(&e, d9__enc_type_delta(q, type, d),
				D9__RAW_SMALL(h), timeout);
		} else if (tw == HOT(D9_EV_UNPARK, D9__RW_UNPARK)) {
			int64_t ready = (int64_t)p[2];
			q = d9_put_varint(d9__enc_type_delta(q, type, d), d9_zigzag(ready));
		} else if (tw == HOT(D9_EV_POLL_START, D9__RW_POLL_START)) {
			uint64_t co = p[2], loc = p[3];
			q = d9__enc_poll_start_fields(&e, d9__enc_type_delta(q, type, d), co, loc);
		} else if (tw == HOT(D9_EV_POLL_END, D9__RW_POLL_END)) {
			uint64_t co = p[2];
			q = d9__enc_coroutine(&e, d9__enc_type_delta(q, type, d), co);
		} else if (tw == HOT(D9_EV_QUEUE_SAMPLE, D9__RW_QUEUE_SAMPLE)) {
			uint64_t runnable = p[2];
			q = d9_put_varint(d9__enc_type_delta(q, type, d), runnable);
		} else if (tw == HOT(D9_EV_WAKE, D9__RW_WAKE)) {
			uint64_t woken = p[2], waker = p[3];
			int64_t object = (int64_t)p[4];
			q = d9__enc_wake_fields(&e, d9__enc_type_delta(q, type, d), woken, waker,
				D9__RAW_SMALL(h), object);
		} else {
other: D9__COLD_LABEL;
			e.p = q;
			e.last = last;
			e.count = count;
			if (encode_one(&e, p, words) != 0)
				goto done;
			q = e.p;
			last = e.last;
			count = e.count;
			continue;
		}
		/* d9__enc_head's bookkeeping */
		if (t > last)
			last = t;
		count++;
		e.types[type]++;
	}
#undef HOT
#undef D9__COLD_LABEL
	e.p = q;
	e.last = last;
	e.count = count;
done:
	/* one event per record */
	if (e.count < b->count) {
		/* cannot happen (a record the stores above did not write): count, do not guess */
		uint64_t lost = b->count - e.count;
		if (d9_enc_dropped(&e, (uint64_t)e.last << d9__shift, lost, D9_DROP_BUFFERS_FULL) == 0) {
			b->dropped += lost;
			b->drop_records++;
		}
		d9__log_once(D9_LOG_ERROR, "internal: a block held %llu records that could not be "
			"encoded; counted as dropped", (unsigned long long)lost);
	}
	b->size = (uint32_t)d9_enc_end(&e, 0);
	b->count = e.count;
	memcpy(b->types, e.types, sizeof(b->types));
	b->first_time = d9_enc_first_time(&e);
	b->last_time = e.last;
}
