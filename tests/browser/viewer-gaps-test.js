#!/usr/bin/env node
/* viewer-gaps-test.js: the viewer never draws a poll, park or scheduling delay across a gap in
 * the data (README.md, "Gaps"), in a real browser (Debian's chromium through playwright-core,
 * no network). Run by tests/integration/test-viewer-gaps.sh with one JSON argument: drop,
 * unsealed, seqgap: the segment files of the traces of build/tests/gen-analyze-gaps (its
 * source says what each holds); report: `d9-analyze html` of the unsealed trace; artifacts:
 * where screenshots go. Prints PASS/FAIL lines (tests/run.sh counts them). */
'use strict';
const B = require('./browser.js');

const cfg = JSON.parse(process.argv[2]);
const { pass, fail, shot } = B.results('viewer-gaps-', cfg.artifacts);
const { loadFiles } = B;

/* what the page holds and drew with everything in view */
function state(page) {
	return page.evaluate(() => {
		const T = window.__d9test, M = T.model();
		const polls = [], parks = [];
		for (const l of M.lanes) {
			for (let i = 0; i < l.polls.n; i++) polls.push({ tid: l.tid, co: l.polls.co[i], dur: l.polls.end[i] - l.polls.start[i], wakeKind: l.polls.wakeKind[i] });
			for (let i = 0; i < l.parks.n; i++) parks.push({ tid: l.tid, dur: l.parks.end[i] - l.parks.start[i] });
		}
		T.setView(M.tMin, M.tMax);
		return { polls, parks, message: T.message, pois: T.pois.map((p) => p.kind), draws: T.draws,
			files: M.files.map((f) => f.name + ': ' + f.status) };
	});
}

async function main() {
	const browser = await B.launch();
	const page = await B.newPage(browser, 1400, 700);

	/* drop: coroutine 5's poll spans a write_error drop (14.4 s), 6's wake a buffers_full drop,
	 * the park at 40 s an "other" drop; worker 2's 4 s poll and 7's 10 us poll are known */
	await loadFiles(page, cfg.drop);
	let s = await state(page);
	const long = s.polls.filter((p) => p.dur > 5e9);
	const co = (n) => s.polls.filter((p) => p.co === n);
	if (!long.length && co(5).length === 0 && co(8).length === 1 && Math.abs(co(8)[0].dur - 4e9) < 1000 &&
		co(7).length === 1 && co(6).length === 1 && co(6)[0].wakeKind === -2 && co(7)[0].wakeKind === 1 &&
		!s.parks.some((p) => p.dur > 1e9) && s.parks.length === 1)
		pass('drop-pairs', s.polls.length + ' polls drawn, none across a drop (longest ' + Math.max(...s.polls.map((p) => p.dur)) / 1e9 + ' s); ' + s.parks.length + ' park');
	else
		fail('drop-pairs', JSON.stringify({ polls: s.polls, parks: s.parks }));
	if (/1 poll, 1 park and 1 scheduling delay of unknown length not drawn/.test(s.message) &&
		s.pois.includes('1 poll of unknown length (gap in the data)') && s.pois.includes('1 park of unknown length (gap in the data)') &&
		s.pois.includes('1 scheduling delay of unknown length (gap in the data)'))
		pass('drop-message', s.message.split('\n').find((x) => /unknown/.test(x)));
	else
		fail('drop-message', JSON.stringify({ message: s.message, pois: s.pois }));
	await shot(page, 'gaps-drop');
	/* the poll whose wake lies across a drop: its details say the delay is unknown */
	const det = await page.evaluate(() => {
		const T = window.__d9test, M = T.model();
		for (let li = 0; li < M.lanes.length; li++) {
			const p = M.lanes[li].polls;
			for (let i = 0; i < p.n; i++) if (p.co[i] === 6) { T.selectPoll(li, i); return T.detail.text; }
		}
		return '';
	});
	if (/woken\s+unknown: a gap in the data lies between its wake and this poll/.test(det))
		pass('drop-detail', 'the poll of coroutine 6: wake unknown');
	else
		fail('drop-detail', JSON.stringify(det));

	/* unsealed: segment 0 has no trailer: nothing pairs across its end, on either worker */
	await loadFiles(page, cfg.unsealed);
	s = await state(page);
	if (s.polls.length === 2 && !s.polls.some((p) => p.dur > 1e6) &&
		/trace\.200\.000000\.bin: not sealed \(truncated, or still being written\)/.test(s.message) &&
		/2 polls and 1 scheduling delay of unknown length/.test(s.message) &&
		s.files.includes('trace.200.000000.bin: not sealed') &&
		s.pois.some((k) => /^gap in the data after trace\.200\.000000\.bin/.test(k)) && s.draws.gapMarks > 0)
		pass('unsealed', 'no trailer: "not sealed", 2 polls and 1 delay unknown, ' + s.draws.gapMarks + ' gap marks drawn');
	else
		fail('unsealed', JSON.stringify(s));
	await shot(page, 'gaps-unsealed');

	/* seqgap: segment 1 is missing */
	await loadFiles(page, cfg.seqgap);
	s = await state(page);
	if (s.polls.length === 1 && s.polls[0].co === 6 && s.pois.some((k) => /1 segment\(s\) missing/.test(k)) &&
		/1 poll and 1 scheduling delay of unknown length/.test(s.message))
		pass('seqgap', 'one segment missing: 1 poll and 1 delay unknown, the known 10 us poll drawn');
	else
		fail('seqgap', JSON.stringify(s));

	/* the report of d9-analyze html says the same */
	await page.goto('file://' + cfg.report);
	await page.waitForFunction(() => window.__d9test && window.__d9test.loads > 0, null, { timeout: 30000 });
	const rep = await page.evaluate(() => window.__d9test.message);
	if (/not sealed/.test(rep) && /2 polls and 1 scheduling delay of unknown length/.test(rep))
		pass('report', 'the html report of the unsealed trace says so too');
	else
		fail('report', JSON.stringify(rep));

	if (page.d9errors.length) fail('errors', page.d9errors.slice(0, 3).join('; '));
	else pass('errors', 'no page error');
	if (page.d9net.length) fail('no-network', page.d9net.slice(0, 3).join(' '));
	await browser.close();
}
main().catch((e) => { fail('run', String(e && e.stack || e)); process.exit(1); });
