#!/usr/bin/env node
/* parity.js: `node parity.js REFERENCE.jsonl TRACE...` checks that the viewer's decoder
 * (viewer/decode.js) sees the same events as `d9-analyze jsonl` on the same segment files:
 * the same multiset of events with every key compared except the names the analyzer gets from
 * libdw (location, stack frame and thread names; location_addr is compared instead), and, per
 * thread, the same order of the events that are not CpuSamples (the analyzer merges samples
 * into their thread by time). Prints one JSON line {"ok":bool,"events":N,"diffs":[...]}. */
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const D = require('../../viewer/decode.js');
const { expandInputs } = require('./inputs.js');

const WAKE = ['other', 'fd', 'timer', 'cond', 'mutex', 'join', 'interrupt', 'spawn'];
const CALLS = ['other', 'epoll_wait', 'epoll_pwait', 'epoll_pwait2', 'poll', 'ppoll', 'select', 'pselect'];
const FDK = ['none', 'file', 'socket', 'pipe', 'char', 'other'];
const DROP = ['other', 'buffers_full', 'write_error', 'samples_lost', 'segment_deleted'];
const en = (t, v) => t[Number(v)] || 'unknown';
const S = (v) => (typeof v === 'bigint' ? v.toString() : String(v));

/* our events, as jsonl-like lines with the compared keys */
function ours(files) {
	const lines = [];
	for (const f of files) {
		let u8 = fs.readFileSync(f);
		if (D.isGzip(u8)) u8 = zlib.gunzipSync(u8);
		u8 = new Uint8Array(u8.buffer, u8.byteOffset, u8.length);
		let h = null;
		const strings = new Map(), locs = new Map(), coLocs = new Map();
		D.decodeSegment(u8, {
			header(x) { h = x; },
			def(cp, d) {
				if (d.kind === 1) strings.set(S(d.id), new TextDecoder().decode(D.cutNul(d.value)));
				if (d.kind === 2) locs.set(S(d.id), d);
				if (d.kind === 8 && d.location) coLocs.set(S(d.id), S(d.location));
			},
			event(ev, ch) {
				/* 14: SchedDelay when the segment's schema names it so (not built in) */
				const sd = ev.code === 14 && new TextDecoder().decode(ev.schema.name) === 'SchedDelay';
				if (ev.code < 1 || (ev.code > 13 && !sd)) return;
				const f = ev.f;
				const mono = D.monoNsExact(h, ev.time);
				const real = BigInt(h.anchor_realtime_ns) + (mono - BigInt(h.anchor_mono_ns));
				const o = { type: sd ? 'SchedDelay' : D.EVENT_NAMES[ev.code], ts_ns: S(real), mono_ns: S(mono), pid: h.pid, tid: ch.tid, worker: ch.worker };
				const loc = (id, co) => {
					let l = id ? locs.get(S(id)) : undefined;
					if (!l && coLocs.has(S(co))) l = locs.get(coLocs.get(S(co)));
					return l ? '0x' + BigInt(l.function_addr).toString(16) : null;
				};
				switch (ev.code) {
				case 1: o.coroutine = S(f[0]); o.location_addr = loc(f[1], f[0]); break;
				case 2: case 7: o.coroutine = S(f[0]); break;
				case 3: o.call = en(CALLS, f[0]); o.timeout_us = D.i64str(f[1]); break;
				case 4: o.ready = D.i64str(f[0]); o.cpu_ns = f[1] === null ? null : D.u64str(f[1]); o.sched_wait_ns = f[2] === null ? null : D.u64str(f[2]); break;
				case 5: {
					o.kind = en(WAKE, f[2]); o.woken = S(f[0]); o.waker = S(f[1]);
					if (f[2] === 1) o.fd = D.i64str(f[3]);
					else if (f[2] === 2) {
						const obj = BigInt(f[3]);
						const dl = obj < 0n && -obj > BigInt(ev.time) ? 0n : BigInt(ev.time) + obj;
						const dns = D.monoNsExact(h, dl);
						o.deadline_ns = S(dns); o.lateness_ns = S(mono - dns);
					} else o.object = D.i64str(f[3]);
					break;
				}
				case 6: o.coroutine = S(f[0]); o.parent = S(f[1]); o.location_addr = loc(f[2], f[0]); break;
				case 8: o.runnable = S(f[0]); break;
				case 9: o.coroutine = S(f[0]); o.call = strings.get(S(f[1])) || '?'; o.fd_kind = en(FDK, f[2]); o.duration_ns = D.u64str(f[3]); break;
				case 10: {
					o.coroutine = S(f[0]); o.source = Number(f[1]) === 0 ? 'on_cpu' : Number(f[1]) === 1 ? 'off_cpu' : 'unknown';
					/* unwind (schema-listed): as jsonl prints it, only when recorded */
					const u = f[3] !== null ? Number(f[3]) : 0;
					if (u & 7) {
						o.unwinder = ['none', 'fp', 'dwarf', 'libunwind', 'ip'][u & 7] || 'unknown';
						o.truncated = (u & 8) !== 0; o.fp_rejected = (u & 16) !== 0;
					}
					/* weight_ns (schema-listed as weight_ns+1): printed only when known */
					if (f[4] !== null) o.weight_ns = D.u64str(f[4]);
					break;
				}
				case 11: o.count = S(f[0]); o.reason = en(DROP, f[1]); break;
				case 12: return; /* CustomEvent: not in jsonl's schema */
				case 13: o.count = S(f[0]); break;
				case 14:
					o.coroutine = S(f[0]); o.call = strings.get(S(f[1])) || '?'; o.fd_kind = en(FDK, f[2]);
					o.duration_ns = D.u64str(f[3]); o.sched_wait_ns = D.u64str(f[4]) === '18446744073709551615' ? null : D.u64str(f[4]);
					break;
				}
				lines.push(o);
			},
		});
	}
	return lines;
}

function reference(file) {
	const out = [];
	for (const l of fs.readFileSync(file, 'utf8').split('\n')) {
		if (!l.trim()) continue;
		/* big integers: keep the digits exactly */
		const o = JSON.parse(l.replace(/":(-?\d{16,})/g, '":"$1"'));
		if (o.type === 'Mark' || o.type === 'Value' || o.type === 'CustomEvent') continue; /* application events: not compared */
		delete o.thread; delete o.location; delete o.stack;
		for (const k in o) if (typeof o[k] === 'number') o[k] = k === 'pid' || k === 'tid' || k === 'worker' ? o[k] : String(o[k]);
		out.push(o);
	}
	return out;
}

const canon = (o) => JSON.stringify(Object.keys(o).sort().reduce((a, k) => { a[k] = typeof o[k] === 'number' && !['pid', 'tid', 'worker'].includes(k) ? String(o[k]) : o[k]; return a; }, {}));
const ref = reference(process.argv[2]);
const mine = ours(expandInputs(process.argv.slice(3)));
const diffs = [];
const count = new Map();
for (const o of ref) { const k = canon(o); count.set(k, (count.get(k) || 0) + 1); }
for (const o of mine) {
	const k = canon(o);
	const n = count.get(k) || 0;
	if (n) count.set(k, n - 1);
	else if (diffs.length < 5) diffs.push('only in the viewer: ' + k);
}
for (const [k, n] of count) if (n && diffs.length < 10) diffs.push('only in d9-analyze jsonl (x' + n + '): ' + k);
/* order per thread, samples aside */
const seq = (arr) => {
	const m = new Map();
	for (const o of arr) {
		if (o.type === 'CpuSample') continue;
		const k = o.pid + '/' + o.tid;
		if (!m.has(k)) m.set(k, []);
		m.get(k).push(canon(o));
	}
	return m;
};
const a = seq(ref), b = seq(mine);
for (const [k, la] of a) {
	const lb = b.get(k) || [];
	for (let i = 0; i < Math.max(la.length, lb.length); i++)
		if (la[i] !== lb[i]) { diffs.push('thread ' + k + ' event ' + i + ' differs: ' + la[i] + ' vs ' + lb[i]); break; }
}
process.stdout.write(JSON.stringify({ ok: diffs.length === 0 && ref.length === mine.length, events: mine.length, reference: ref.length, diffs }) + '\n');
