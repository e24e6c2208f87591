#!/usr/bin/env node
/* gaps.js: `node gaps.js POLLS.jsonl SUMMARY.json TRACE...` checks that the viewer's model
 * (viewer/model.js, run here in node as in the page's worker) pairs events as d9-analyze does
 * across gaps in the data (README.md, "Gaps"): the polls it draws as closed are exactly those
 * `d9-analyze polls --json` lists (thread, start and duration), and it counts as many unknown
 * polls, parks and scheduling delays (and loop turns in generic mode) as the data_quality of
 * `d9-analyze summary --json`. Prints one JSON line {"ok":bool,...} with what differs, and
 * what the model says of each file and of the unknown pairs. */
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const D = require('../../viewer/decode.js');
const { expandInputs } = require('./inputs.js');
const Model = require('../../viewer/model.js');

const [pollsFile, summaryFile, ...inputs] = process.argv.slice(2);
const b = new Model.Builder();
for (const f of expandInputs(inputs)) {
	let u8 = fs.readFileSync(f);
	if (D.isGzip(u8)) u8 = zlib.gunzipSync(u8);
	b.add(path.basename(f), new Uint8Array(u8.buffer, u8.byteOffset, u8.length));
}
b.decodeAll();
const m = b.finish();
const t0 = BigInt(m.t0);
const diffs = [];

/* the closed polls (open 2: the trace ends in it, which `polls` does not list) */
const ours = [];
for (const l of m.lanes)
	for (let i = 0; i < l.polls.n; i++)
		if (l.polls.open[i] !== 2)
			ours.push({ tid: l.tid, start: l.polls.start[i], dur: l.polls.end[i] - l.polls.start[i] });
const ref = fs.readFileSync(pollsFile, 'utf8').split('\n').filter((x) => x.trim()).map((x) => {
	const j = JSON.parse(x.replace(/"start_ns":(\d+)/, '"start_ns":"$1"'));
	return { tid: j.tid, start: Number(BigInt(j.start_ns) - t0), dur: j.duration_ns };
});
/* the viewer's times are doubles converted from ticks: a start may differ from the analyzer's by
 * a few ns, so polls match within 100 ns of start and 2 ns of duration, looked up in the µs
 * bucket of the start and its neighbours (a key rounded to the µs once put 3807199499.7 and
 * 3807199501 ns in different buckets) */
const key = (tid, us) => tid + '@' + us;
const refBy = new Map();
for (const p of ref) {
	const k = key(p.tid, Math.floor(p.start / 1000));
	if (!refBy.has(k)) refBy.set(k, []);
	refBy.get(k).push(p);
}
for (const p of ours) {
	let list = null, j = -1;
	for (let d = -1; d <= 1 && j < 0; d++) {
		list = refBy.get(key(p.tid, Math.floor(p.start / 1000) + d));
		j = list ? list.findIndex((r) => Math.abs(r.start - p.start) <= 100 && Math.abs(r.dur - p.dur) <= 2) : -1;
	}
	if (j < 0) {
		diffs.push('viewer draws a poll the analyzer does not list: ' + JSON.stringify(p));
		continue;
	}
	list.splice(j, 1);
}
for (const [, list] of refBy)
	for (const r of list) diffs.push('analyzer lists a poll the viewer does not draw: ' + JSON.stringify(r));

const dq = JSON.parse(fs.readFileSync(summaryFile, 'utf8')).data_quality;
const want = { polls: dq.polls_unknown, parks: dq.parks_unknown, delays: dq.sched_delay_unknown };
if (m.generic)
	want.turns = dq.loop_turns_unknown;
for (const k in want)
	if (m.unknown[k] !== want[k])
		diffs.push('unknown ' + k + ': viewer ' + m.unknown[k] + ', analyzer ' + want[k]);
if (m.seqGaps !== dq.seq_gaps)
	diffs.push('seq gaps: viewer ' + m.seqGaps + ', analyzer ' + dq.seq_gaps);

console.log(JSON.stringify({
	ok: diffs.length === 0, polls: ours.length, diffs: diffs.slice(0, 20),
	unknown: { polls: m.unknown.polls, parks: m.unknown.parks, turns: m.unknown.turns, delays: m.unknown.delays },
	files: m.files.map((f) => f.name + ': ' + f.status), gapMarks: m.gapMarks.length, segmentGaps: m.gaps.length,
}));
