#!/usr/bin/env node
/* format13-test.js: the viewer's decoder (viewer/decode.js) reads format 1.3's two additions as
 * format/format.c does (FORMAT.md section 8, "Semantics" and "Unpark statistics"), on segments
 * built here byte by byte (so every case is there, whatever the agent happens to write):
 *   - Park's `timeout_us_delta`: a repeated timeout (`00`), a changed one, the first Park of the
 *     next chunk counting from -1 again, 64-bit wrapping, and a schema listing `timeout_us` too
 *     (every Park sets the previous timeout to what it decoded);
 *   - UnparkStats (code 20): merged into the Unpark before it (not an event, not counted by the
 *     model), its `c` field updating the coroutine list, an Unpark without one (also as the
 *     chunk's last record, or before a lone 0F ending the chunk) unknown, one after a Park
 *     reported as a positional code-20 event, one damaged (reported, rest of the chunk dropped,
 *     the Unpark kept), and no merge when the schema has no code 20 or names it otherwise;
 *   - the older layouts (Park's `timeout_us`, Unpark's `cpu_ns+1` or `cpu_ns`) as before.
 * Needs node only. `node format13-test.js [DIR]`: with DIR, the segments are also written there
 * as DIR/f13-NAME.bin, for comparing `d9-analyze dump` with dump.js on them. Prints PASS/FAIL
 * lines (tests/run.sh counts them); exits 1 after a failure. */
'use strict';
const fs = require('fs');
const path = require('path');
const D = require('../../viewer/decode.js');
const Model = require('../../viewer/model.js');

let failed = 0;
const pass = (n, d) => console.log('PASS format13-' + n + (d ? ': ' + d : ''));
const fail = (n, d) => {
	failed++;
	console.log('FAIL format13-' + n + ': ' + d);
};
/* JSON that shows BigInts (as "123n": a BigInt is not the Number of the same value here) and
 * NaN (the model's unknown, which JSON would print as null) */
const show = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? x + 'n' :
	Number.isNaN(x) ? 'NaN' : x));
function check(name, got, want, detail) {
	if (show(got) === show(want))
		pass(name, detail);
	else
		fail(name, 'got ' + show(got).slice(0, 600) + ', want ' + show(want).slice(0, 600));
}

/* ---- writing (FORMAT.md sections 2 to 9) ---- */
/* CRC-32 (zlib's) bit by bit: slow, short, and not decode.js's table */
function crc32(bytes) {
	let c = -1;
	for (const b of bytes) {
		c ^= b;
		for (let k = 0; k < 8; k++)
			c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
	}
	return (c ^ -1) >>> 0;
}
function le(v, n) {
	let b = BigInt.asUintN(8 * n, BigInt(v));
	const out = [];
	for (let i = 0; i < n; i++, b >>= 8n)
		out.push(Number(b & 0xffn));
	return out;
}
function varint(v) {
	let b = BigInt.asUintN(64, BigInt(v));
	const out = [];
	do {
		const x = Number(b & 0x7fn);
		b >>= 7n;
		out.push(b ? x | 0x80 : x);
	} while (b);
	return out;
}
const u = varint;
const i = (v) => { /* svarint: zigzag, 64-bit */
	const b = BigInt.asIntN(64, BigInt(v));
	return varint((b << 1n) ^ (b >> 63n));
};
const str = (s) => {
	const b = [...Buffer.from(s, 'latin1')];
	return [...varint(b.length), ...b];
};
/* one event record: the first byte (type, low delta bits, "more"), the extended type, the
 * delta's high part, then the fields' bytes */
function rec(type, delta, ...fields) {
	const t = type < 15 ? type : 15;
	const out = [t | (delta & 7) << 4 | (delta >= 8 ? 0x80 : 0)];
	if (t === 15)
		out.push(...varint(type));
	if (delta >= 8)
		out.push(...varint(Math.floor(delta / 8)));
	for (const f of fields)
		out.push(...f);
	return out;
}
function chunk(type, payload) {
	const head = [0x44, 0x39, type, 0, ...le(payload.length, 4)];
	head[3] = crc32([0, 1, 2, 4, 5, 6, 7].map((j) => head[j])) & 0xff;
	const body = head.concat(payload);
	return body.concat(le(crc32(body), 4));
}
const MAGIC = [0x89, 0x44, 0x39, 0x54, 0x0d, 0x0a, 0x1a, 0x0a];
const REALTIME = 1700000000000000000n;
/* a segment: the prefix (format 1.3) and the HEADER (ns units), then what is added */
class Seg {
	constructor() {
		this.b = [...MAGIC, ...le(1, 2), ...le(3, 2), ...le(0, 4)];
		this.b.push(...chunk(1, [...le(4242, 4), ...le(1, 4), ...le(0, 4), 0, 0, 0, 0,
			...le(1e9, 8), ...le(0, 8), ...le(0, 8), ...le(REALTIME, 8),
			...le(REALTIME, 8), ...str('d9 format13-test'), ...str('f13'),
			...str('f13\0'), ...str('f13.example'),
			...str('00000000-0000-4000-8000-000000000013')]));
	}
	/* types: [code, name, [[enc, field name], ...]], ... */
	schema(...types) {
		const p = [...varint(types.length)];
		for (const [code, name, fields] of types) {
			p.push(...varint(code), ...str(name), ...varint(fields.length));
			for (const [enc, fname] of fields)
				p.push(enc.charCodeAt(0), ...str(fname));
		}
		this.b.push(...chunk(2, p));
	}
	/* an EVENTS chunk of tid's events (an Unpark and its UnparkStats: one record, counted once,
	 * as d9's writer counts them); returns each record's file offset */
	events(tid, base, recs) {
		const offs = [];
		let p = this.b.length + 8 + 24;
		for (const r of recs) {
			offs.push(p);
			p += r.length;
		}
		this.b.push(...chunk(4, [...le(tid, 4), ...le(1, 4), ...le(base, 8),
			...le(recs.length, 4), ...le(0, 4), ...recs.flat()]));
		return offs;
	}
	bytes() {
		return Uint8Array.from(this.b);
	}
}

/* the layouts: d9's agent's (D9_SCHEMA_COMPACT_WAITS) and d9's older ones */
const PARK_DELTA = [3, 'Park', [['u', 'call'], ['i', 'timeout_us_delta']]];
const UNPARK_READY = [4, 'Unpark', [['i', 'ready']]];
const STATS = [20, 'UnparkStats', [['u', 'cpu_ns+1'], ['u', 'sched_wait_ns+1']]];
const park = (delta, call, d) => rec(3, delta, u(call), i(d));
const unpark = (delta, ready) => rec(4, delta, i(ready));
/* an UnparkStats of cpu_ns and sched_wait_ns (null: unknown), as the writer puts it: delta 0 */
const stats = (cpu, sw) => rec(20, 0, u(cpu === null ? 0 : BigInt(cpu) + 1n),
	u(sw === null ? 0 : BigInt(sw) + 1n));

/* ---- reading ---- */
const latin1 = (b) => Buffer.from(b).toString('latin1');
function decode(u8) {
	const evs = [], problems = [];
	const res = D.decodeSegment(u8, {
		problem(kind, offset, message) { problems.push({ kind, offset, message }); },
		event(e, ch) {
			evs.push({ code: e.code, type: latin1(e.schema.name), offset: e.offset,
				time: e.time, tid: ch.tid, f: e.f.slice(0, 3) });
		},
	});
	return { evs, problems, stats: res.stats, unreadable: res.unreadable };
}
const written = [];
function segment(name, seg) {
	const u8 = seg.bytes();
	written.push([name, u8]);
	return u8;
}
/* what to compare of an event: its time, code and first three fields (Park: call, timeout_us;
 * Unpark: ready, cpu_ns, sched_wait_ns, null unknown) */
const brief = (e) => [e.time, e.code, ...e.f];
const skipped = (why, off) => why + ' at offset ' + off + '; rest of chunk skipped';

function main() {
	/* ---- the agent's layout: timeouts as differences, statistics after their Unparks ---- */
	const s = new Seg();
	s.schema(PARK_DELTA, UNPARK_READY, STATS);
	const c1 = s.events(101, 1000, [
		park(1, 1, 5001), /* 5000: -1 before the chunk's first Park */
		[...unpark(2, 1), ...stats(1000, 250)],
		park(1, 1, 0), /* the same timeout again: 00 */
		unpark(3, 0), /* no statistics: unknown */
		park(1, 1, 0),
		[...unpark(9, 2), ...stats(0, null)], /* "more" set; a known 0, an unknown */
		park(1, 2, -5001), /* to -1 (infinite) */
		unpark(1, 1),
		park(1, 2, 21), /* to 20 */
		rec(20, 0, u(5), u(6)), /* 0F 14 after a Park: an event of its own, positional */
		park(1, 2, 0), /* still 20: the code-20 event changed nothing */
		[...unpark(4, 1), ...stats(123456789012, 0)], /* the chunk's last record */
	]);
	s.events(101, 2000, [
		park(0, 1, 5001), /* 5000 again: the previous chunk's 20 is not this chunk's */
		park(1, 1, 0),
		unpark(1, 1), /* the chunk's last byte: nothing after it to look at */
	]);
	/* wrapping: -1 + -2^63 is 2^63 - 1 in 64 bits, and back */
	const min = -(2n ** 63n);
	s.events(103, 3000, [park(0, 1, min), park(1, 1, min), park(1, 1, 1)]);
	/* a damaged UnparkStats (a varint of more than 64 bits): reported, the Unpark kept */
	const bad = [...unpark(1, 1), 0x0f, 0x14, ...new Array(10).fill(0xff)];
	const c4 = s.events(104, 4000, [park(0, 1, 8), bad, park(1, 1, 0)]);
	const agent = decode(segment('agent', s));

	const evs1 = agent.evs.filter((e) => e.tid === 101 && e.time < 2000);
	const parks1 = evs1.filter((e) => e.code === 3).map((e) => e.f[1]);
	check('park-constant', parks1.slice(0, 3), [5000, 5000, 5000],
		'a repeated timeout (00) decodes to the first one, 5000');
	check('park-change', parks1, [5000, 5000, 5000, -1, 20, 20],
		'timeouts 5000, -1 (infinite) and 20 from their differences');
	check('park-second-chunk', agent.evs.filter((e) => e.time >= 2000 && e.time < 3000)
		.map(brief),
		[[2000, 3, 1, 5000, 0], [2001, 3, 1, 5000, 0], [2002, 4, 1, null, null]],
		'the first Park of the next chunk counts from -1 (5001 -> 5000, not 20 + 5001)');
	check('park-wrap', agent.evs.filter((e) => e.tid === 103).map((e) => e.f[1]),
		[2n ** 63n - 1n, -1, 0], 'the sum wraps at 64 bits, as the C reader\'s');
	check('unpark-stats-merged', evs1.map(brief), [
		[1001, 3, 1, 5000, 0], [1003, 4, 1, 1000, 250], [1004, 3, 1, 5000, 0],
		[1007, 4, 0, null, null], [1008, 3, 1, 5000, 0], [1017, 4, 2, 0, null],
		[1018, 3, 2, -1, 0], [1019, 4, 1, null, null], [1020, 3, 2, 20, 0],
		[1020, 20, 5, 6, 0], [1021, 3, 2, 20, 0], [1025, 4, 1, 123456789012, 0]],
	'12 events of 15 records: the Unparks carry their statistics, no UnparkStats after one');
	check('unpark-stats-offsets', evs1.map((e) => e.offset), c1,
		'each event at its record\'s offset (an Unpark\'s, not its UnparkStats\')');
	const pos = evs1.find((e) => e.code === 20);
	check('unpark-stats-positional', pos && [pos.type, pos.offset, pos.f.slice(0, 2)],
		['UnparkStats', c1[9], [5, 6]],
		'an UnparkStats after a Park: an event of code 20, its fields as written');
	check('unpark-stats-damaged', [agent.evs.filter((e) => e.tid === 104).map(brief),
		agent.problems, agent.stats.bad_events], [
		[[4000, 3, 1, 7, 0], [4001, 4, 1, null, null]],
		[{ kind: 'bad_event', offset: c4[1] + 2,
			message: skipped('event overruns its chunk', c4[1] + 2) }], 1],
	'the Unpark kept, unknown; the damage reported at the UnparkStats, the Park after dropped');
	check('agent-events', agent.evs.length, 12 + 3 + 3 + 2, 'no other event');

	/* dump (`d9-analyze dump`'s lines, FORMAT.md section 13): the timeout decoded, the
	 * statistics after the Unpark's fields, the UnparkStats not a line of its own */
	const lines = D.dump('agent.bin', s.bytes());
	const at = (off) => lines.find((l) => l.startsWith('{"rec":"event","offset":' + off + ','));
	const tail = (l) => l && l.replace(/.*"mono_ns":-?\d+/, '');
	check('dump', [lines.filter((l) => l.startsWith('{"rec":"event"')).length,
		...[c1[1], c1[3], c1[6], c1[9]].map((off) => tail(at(off)))], [20,
		',"ready":1,"cpu_ns":1000,"sched_wait_ns":250}', ',"ready":0}',
		',"call":2,"timeout_us":-1}', ',"cpu_ns+1":5,"sched_wait_ns+1":6}'],
	'the lines of d9-analyze dump for these events');

	/* the model: the UnparkStats after an Unpark is no event; a Park gets its Unpark's
	 * statistics */
	const b = new Model.Builder();
	const m1 = new Seg();
	m1.schema(PARK_DELTA, UNPARK_READY, STATS);
	m1.events(101, 1000, [park(1, 1, 5001), [...unpark(2, 1), ...stats(1000, 250)],
		park(1, 1, 0), unpark(3, 0), park(1, 1, 0), [...unpark(9, 2), ...stats(0, null)],
		rec(20, 0, u(5), u(6))]);
	b.add('model.bin', m1.bytes());
	b.decodeAll();
	const m = b.finish();
	const L = m.lanes.find((l) => l.tid === 101);
	const col = (k) => (L ? Array.from(L.parks[k].subarray(0, L.parks.n)) : null);
	check('model', [m.events, col('cpu'), col('sw')],
		[7, [1000, NaN, 0], [250, NaN, NaN]],
		'7 events of 9 records; parks with cpu_ns 1000, unknown and 0');

	/* ---- the UnparkStats's coroutine field updates the coroutine list; damage in it ---- */
	const c = new Seg();
	c.schema(UNPARK_READY, [20, 'UnparkStats', [['c', 'coroutine'], ['u', 'cpu_ns+1'],
		['u', 'sched_wait_ns+1']]]);
	/* coroutine 7: 5 + zigzag(7 - 0); then PollEnd's 01, the list's first: 7 */
	c.events(201, 100, [[...unpark(0, 1), ...rec(20, 0, u(19), u(12), u(23))],
		rec(2, 1, u(1))]);
	/* 02: the list's second slot, empty in a new chunk */
	const cb = c.events(202, 200, [[...unpark(0, 1), ...rec(20, 0, u(2), u(1), u(1))],
		rec(2, 1, u(1))]);
	const cr = decode(segment('coroutine', c));
	check('unpark-stats-coroutine', [cr.evs.map(brief), cr.problems.map((p) => p.message)], [
		[[100, 4, 1, 11, 22], [101, 2, 7, 0, 0], [200, 4, 1, null, null]],
		[skipped('coroutine field names an empty slot', cb[0] + 2)]],
	'its c field puts coroutine 7 first in the list; an empty slot named: the Unpark kept');

	/* ---- 0F 14 after an Unpark and no UnparkStats to merge ---- */
	const n = new Seg();
	n.schema(UNPARK_READY, [20, 'NotStats', STATS[2]]);
	n.events(301, 100, [unpark(0, 1), rec(20, 0, u(3), u(4))]);
	const nr = decode(segment('named', n));
	check('unpark-stats-named', nr.evs.map((e) => [e.type, ...brief(e)]),
		[['Unpark', 100, 4, 1, null, null], ['NotStats', 100, 20, 3, 4, 0]],
		'code 20 named otherwise: an event of its own after the Unpark');
	const o = new Seg();
	o.schema(PARK_DELTA, UNPARK_READY);
	const ob = o.events(302, 100, [unpark(0, 1), rec(20, 0, u(3), u(4)), park(1, 1, 0)]);
	const or = decode(segment('undescribed', o));
	check('unpark-stats-undescribed', [or.evs.map(brief),
		or.problems.map((p) => [p.kind, p.offset])],
	[[[100, 4, 1, null, null]], [['unknown_event', ob[1]], ['bad_event', ob[1]]]],
	'no code 20 in the schema: 0F 14 is an undescribed event, as in a 1.2 reader');
	/* an Unpark, then 0F as the chunk's last byte, then a CRC that begins with 14 (a base time
	 * found for it): the two bytes looked at must both be the chunk's */
	let e, eb;
	for (let base = 0; base < 100000; base++) {
		e = new Seg();
		e.schema(UNPARK_READY, STATS);
		eb = e.events(303, base, [unpark(0, 1), [0x0f]]);
		if (e.b[e.b.length - 4] === 0x14)
			break;
	}
	const er = decode(segment('edge', e));
	check('unpark-stats-chunk-end', [er.evs.map((x) => x.f), er.problems.map((p) => p.message)],
		[[[1, null, null]], [skipped('bad extended event type', eb[1])]],
		'0F at the chunk\'s end, 14 after it in the CRC: no UnparkStats, a cut event');

	/* ---- older layouts, as before ---- */
	const old = new Seg();
	old.schema([3, 'Park', [['u', 'call'], ['i', 'timeout_us']]],
		[4, 'Unpark', [['i', 'ready'], ['u', 'cpu_ns+1'], ['u', 'sched_wait_ns+1']]]);
	old.events(401, 100, [rec(3, 0, u(1), i(5000)), rec(3, 1, u(1), i(5000)),
		rec(4, 1, i(1), u(0), u(8)), rec(3, 1, u(1), i(-1))]);
	old.schema([4, 'Unpark', [['i', 'ready'], ['u', 'cpu_ns'], ['u', 'sched_wait_ns']]]);
	old.events(401, 200, [rec(4, 0, i(1), u(5), u(0))]);
	check('old-layouts', decode(segment('old', old)).evs.map(brief), [[100, 3, 1, 5000, 0],
		[101, 3, 1, 5000, 0], [102, 4, 1, null, 7], [103, 3, 1, -1, 0], [200, 4, 1, 5, 0]],
	'Park\'s timeout_us; Unpark\'s cpu_ns+1, sched_wait_ns+1 and cpu_ns, sched_wait_ns');

	/* ---- Park listing timeout_us before timeout_us_delta: the difference is from the
	 * previous Park's decoded timeout (6), not from its timeout_us field (100) ---- */
	const bo = new Seg();
	bo.schema([3, 'Park', [['i', 'timeout_us'], ['i', 'timeout_us_delta']]]);
	bo.events(501, 100, [rec(3, 0, i(100), i(7)), rec(3, 1, i(100), i(1))]);
	check('park-both-fields', decode(segment('both', bo)).evs.map((x) => x.f[1]), [6, 7],
		'every Park sets the previous timeout to the timeout_us it decoded');

	if (process.argv[2]) {
		fs.mkdirSync(process.argv[2], { recursive: true });
		for (const [name, u8] of written)
			fs.writeFileSync(path.join(process.argv[2], 'f13-' + name + '.bin'), u8);
	}
}

try {
	main();
} catch (e) {
	fail('run', e.stack.split('\n').slice(0, 3).join(' | '));
}
process.exit(failed ? 1 : 0);
