#!/usr/bin/env node
/* viewer-test.js: the viewer in a real browser (Debian's chromium through playwright-core, no
 * network). Run by tests/integration/test-viewer.sh with one JSON argument naming its inputs:
 *   golden, golden_jsonl: a golden segment and its `d9-analyze jsonl` output;
 *   members, members_cut: the golden segment in the agent's gzip layout of several members, and
 *   the same cut inside its last but one member;
 *   truncated: a truncated segment; real, real_jsonl: the files of a real st-http trace with
 *   CPU samples and its jsonl; report: the file `d9-analyze html` wrote for it; artifacts: where
 *   screenshots go.
 * Prints PASS/FAIL/SKIP lines (tests/run.sh counts them). */
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const B = require('./browser.js');

const cfg = JSON.parse(process.argv[2]);
const { pass, fail, shot } = B.results('viewer-', cfg.artifacts);

/* The waits: for a state of the page, never for a fixed time (a loaded machine is slow). until()
 * resolves true when fn(arg) holds within 120 s, false otherwise (the check that follows then
 * fails with what it sees); frame() resolves after the page has drawn two more frames. */
const { WAIT_MS, frame, loadFiles } = B;
const until = (page, fn, arg) => page.waitForFunction(fn, arg, { timeout: WAIT_MS }).then(() => true, () => false);

function readJsonl(f) {
	return fs.readFileSync(f, 'utf8').split('\n').filter((l) => l.trim())
		.map((l) => JSON.parse(l.replace(/"(ts_ns|mono_ns|deadline_ns)":(-?\d+)/g, '"$1":"$2"')));
}
/* polls of the reference: PollStart .. PollEnd per thread, times as BigInt realtime ns */
function refPolls(ev) {
	const open = new Map(), out = [];
	for (const e of ev) {
		const k = e.pid + '/' + e.tid;
		if (e.type === 'PollStart') open.set(k, e);
		else if (e.type === 'PollEnd' && open.has(k)) {
			const s = open.get(k);
			open.delete(k);
			out.push({ tid: e.tid, co: e.coroutine, start: BigInt(s.ts_ns), end: BigInt(e.ts_ns) });
		}
	}
	return out;
}

/* What the page read last: its event count and its message. */
const loaded = (page) => page.evaluate(() => ({ events: window.__d9test.events, msg: window.__d9test.message }));

async function golden(browser) {
	const page = await B.newPage(browser);
	await loadFiles(page, [cfg.golden]);
	const ref = readJsonl(cfg.golden_jsonl);
	const polls = refPolls(ref);
	const t0 = BigInt(await page.evaluate(() => window.__d9test.model().t0));
	const st = await page.evaluate(() => { const M = window.__d9test.model(); let n = 0; for (const l of M.lanes) n += l.polls.n; return { polls: n, events: M.events }; });
	/* the golden file ends inside a poll (drawn to the trace end): the reference lists closed ones */
	if (st.polls >= polls.length && st.polls <= polls.length + 2)
		pass('golden-polls', st.polls + ' polls (' + polls.length + ' closed in the jsonl)');
	else
		fail('golden-polls', 'viewer ' + st.polls + ' polls, jsonl ' + polls.length);
	/* a known window: 4 consecutive polls of one thread, edges in the gaps around them; every
	 * poll overlapping it (any thread) must be drawn as one bar at least 1 px wide */
	const W = await page.evaluate(() => document.getElementById('timeline').clientWidth - 170);
	let win = null;
	const byTid = new Map();
	for (const p of polls) { if (!byTid.has(p.tid)) byTid.set(p.tid, []); byTid.get(p.tid).push(p); }
	for (const [, ps] of byTid) {
		for (let i = 1; i + 4 < ps.length && !win; i++) {
			const a = (ps[i - 1].end + ps[i].start) / 2n, b = (ps[i + 3].end + ps[i + 4].start) / 2n;
			const over = polls.filter((p) => p.start < b && p.end > a);
			const px = Number(b - a) / W;
			if (over.every((p) => Number(p.end - p.start) > 3 * px && p.start >= a && p.end <= b))
				win = { a, b, n: over.length };
		}
	}
	if (!win) {
		fail('golden-window', 'no window of 4 polls with gaps in the golden file');
	} else {
		const d = await page.evaluate(([a, b]) => { window.__d9test.setView(a, b); return { draws: window.__d9test.draws, drawn: window.__d9test.drawn.length }; }, [Number(win.a - t0), Number(win.b - t0)]);
		if (d.draws.polls === win.n && d.draws.pollColumns === 0 && d.drawn === win.n)
			pass('golden-window', win.n + ' poll bars drawn for a window of ' + Number(win.b - win.a) + ' ns');
		else
			fail('golden-window', 'expected ' + win.n + ' poll bars, drew ' + JSON.stringify(d));
	}
	await shot(page, 'golden');
	/* the same segment gzipped, dropped on the page: inflated in the browser */
	const gz = fs.readFileSync(cfg.golden + '.gz').toString('base64');
	const nbefore = await page.evaluate(() => window.__d9test.loads);
	await page.evaluate((b64) => {
		const bin = atob(b64), u8 = new Uint8Array(bin.length);
		for (let i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
		const dt = new DataTransfer();
		dt.items.add(new File([u8], 'basic.bin.gz'));
		document.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
	}, gz);
	await page.waitForFunction((n) => window.__d9test.loads > n, nbefore, { timeout: WAIT_MS });
	const dropped = await loaded(page);
	if (dropped.events === st.events && !/truncated|damaged|not readable/.test(dropped.msg))
		pass('drop-gzip', 'basic.bin.gz dropped: ' + dropped.events + ' events, as from basic.bin');
	else
		fail('drop-gzip', JSON.stringify(dropped) + ' vs ' + st.events + ' events from basic.bin');
	/* the agent's gzip layout, one member per piece (FORMAT.md, "Compressed segments"): every
	 * member inflated; cut inside the last but one, the members before it are kept and the cut is
	 * said */
	await loadFiles(page, [cfg.members]);
	const mem = await loaded(page);
	if (mem.events === st.events && !/truncated|damaged|not readable/.test(mem.msg))
		pass('gzip-members', 'a segment of several gzip members: ' + mem.events + ' events, as from basic.bin');
	else
		fail('gzip-members', JSON.stringify(mem) + ' vs ' + st.events + ' events from basic.bin');
	await loadFiles(page, [cfg.members_cut]);
	const cut = await loaded(page);
	if (/gzip data ends early or is damaged after (\d+) inflated bytes/.test(cut.msg) &&
		+RegExp.$1 >= 1000 && cut.events > 0 && cut.events < st.events)
		pass('gzip-members-cut', cut.events + ' events; ' + cut.msg.split('\n')[0]);
	else
		fail('gzip-members-cut', JSON.stringify(cut) + ' (expected some of ' + st.events + ' events and the cut after at least 1000 inflated bytes)');
	/* a truncated file: what could be read, and where it stopped */
	await loadFiles(page, [cfg.truncated]);
	let msg = await page.evaluate(() => window.__d9test.message);
	if (/truncated/.test(msg) && /offset 1490/.test(msg) && /read \d+ events/.test(msg))
		pass('truncated-message', msg.split('\n')[0]);
	else
		fail('truncated-message', JSON.stringify(msg));
	await shot(page, 'truncated');
	/* not a trace at all */
	const junkDir = fs.mkdtempSync(path.join(os.tmpdir(), 'd9-viewer-'));
	const junk = path.join(junkDir, 'not-a-trace.bin');
	fs.writeFileSync(junk, 'GET / HTTP/1.1\r\nthis is not a d9 trace\r\n');
	await loadFiles(page, [junk]);
	msg = await page.evaluate(() => window.__d9test.message + '|' + window.__d9test.messageKind);
	if (/not-a-trace\.bin: not readable as a d9 trace: not a d9 trace \(bad magic\)\|err/.test(msg))
		pass('corrupt-message', msg.split('|')[0]);
	else
		fail('corrupt-message', JSON.stringify(msg));
	await shot(page, 'not-a-trace');
	fs.rmSync(junkDir, { recursive: true, force: true });
	if (page.d9errors.length) fail('golden-errors', page.d9errors.slice(0, 3).join('; '));
	else pass('golden-errors', 'no page error');
	if (page.d9net.length) fail('no-network', page.d9net.slice(0, 3).join(' '));
	else pass('no-network', 'no request beyond file:, data:, blob:');
	await page.context().close();
}

/* the poll with the most on-CPU samples: the 20 ms /burn (the others wait, or run for µs) */
async function findBurn(page) {
	return page.evaluate(() => {
		const M = window.__d9test.model();
		let best = null;
		M.lanes.forEach((l, li) => {
			for (let i = 0; i < l.polls.n; i++) {
				const d = l.polls.end[i] - l.polls.start[i];
				let k = 0;
				for (let j = 0; j < l.samples.n; j++)
					if (l.samples.source[j] === 0 && l.samples.t[j] >= l.polls.start[i] && l.samples.t[j] < l.polls.end[i]) k++;
				if (k >= 3 && (!best || k > best.samples)) best = { li, i, d, start: l.polls.start[i], end: l.polls.end[i], samples: k };
			}
		});
		return best;
	});
}

async function real(browser) {
	const page = await B.newPage(browser);
	await loadFiles(page, cfg.real);
	const ref = readJsonl(cfg.real_jsonl);
	const nref = ref.filter((e) => e.type !== 'CustomEvent').length;
	const st = await loaded(page);
	if (st.events === nref) pass('real-load', st.events + ' events, as many as d9-analyze jsonl');
	else fail('real-load', 'viewer ' + st.events + ' events, jsonl ' + nref + ' (' + st.msg + ')');
	const burn = await findBurn(page);
	if (!burn || burn.d < 19e6) {
		fail('real-burn', 'no poll of >= 19 ms with CPU samples: ' + JSON.stringify(burn));
		await page.context().close();
		return;
	}
	/* zoom to it, then click it with the mouse */
	await page.evaluate((b) => window.__d9test.setView(b.start - (b.end - b.start), b.end + (b.end - b.start)), burn);
	const xy = await page.evaluate((b) => window.__d9test.pollXY(b.li, b.i), burn);
	await page.mouse.click(xy.x, xy.y);
	await until(page, (b) => window.__d9test.detail && window.__d9test.detail.index === b.i && window.__d9test.flame, burn);
	const d = await page.evaluate(() => ({ detail: window.__d9test.detail, flame: window.__d9test.flame }));
	const errs = [];
	if (!d.detail || d.detail.index !== burn.i || d.detail.lane !== burn.li) errs.push('click selected ' + JSON.stringify(d.detail && [d.detail.lane, d.detail.index]));
	else {
		if (!(d.detail.duration_ns >= 19e6)) errs.push('duration ' + d.detail.duration_ns);
		if (!/duration\s+\d+\.\d+ ms/.test(d.detail.text)) errs.push('detail text ' + JSON.stringify(d.detail.text.slice(0, 200)));
		if (!/serve_conn/.test(d.detail.location)) errs.push('location ' + d.detail.location);
		if (!/woken\s+\w+/.test(d.detail.text)) errs.push('no wake line');
	}
	/* burnN: burn_cpu's width in the graph's unit (ns: the trace's samples carry their time) */
	const burnN = d.flame && d.flame.functions.burn_cpu || 0, burnS = d.flame && d.flame.functionSamples.burn_cpu || 0;
	/* 999 Hz gives about 20; ctimer mode (perf denied) at most CONFIG_HZ, about 5 */
	if (burnS < 3 || burnN * 2 < d.flame.total || d.flame.unit !== 'ns' || !/by time/.test(d.flame.title))
		errs.push('flame graph: burn_cpu has ' + burnS + ' samples, ' + burnN + ' of ' + d.flame.total + ' ' + d.flame.unit + ': ' + JSON.stringify(d.flame && d.flame.functions).slice(0, 300));
	if (errs.length) fail('real-burn-click', errs.join('; '));
	else pass('real-burn-click', 'poll of ' + (d.detail.duration_ns / 1e6).toFixed(1) + ' ms at ' + d.detail.location + ', flame graph by time: burn_cpu ' +
		(burnN / 1e6).toFixed(1) + ' of ' + (d.flame.total / 1e6).toFixed(1) + ' ms, in ' + burnS + ' samples');
	await shot(page, 'real-burn-poll');
	/* shift+drag a range around it: the aggregated flame graph and the location table */
	const x0 = await page.evaluate((t) => window.__d9test.timeX(t), burn.start - (burn.end - burn.start) * 0.3);
	const x1 = await page.evaluate((t) => window.__d9test.timeX(t), burn.end + (burn.end - burn.start) * 0.3);
	await page.keyboard.down('Shift');
	await page.mouse.move(x0, xy.y);
	await page.mouse.down();
	await page.mouse.move((x0 + x1) / 2, xy.y, { steps: 4 });
	await page.mouse.move(x1, xy.y, { steps: 4 });
	await page.mouse.up();
	await page.keyboard.up('Shift');
	await until(page, () => window.__d9test.flame && /^range /.test(window.__d9test.flame.title) && window.__d9test.rangeStats);
	const r = await page.evaluate(() => ({ flame: window.__d9test.flame, stats: window.__d9test.rangeStats, detail: window.__d9test.detail }));
	const rerr = [];
	if (!r.flame || !/^range /.test(r.flame.title)) rerr.push('flame title ' + JSON.stringify(r.flame && r.flame.title));
	const rb = r.flame && r.flame.functions.burn_cpu || 0;
	if (rb < burnN) rerr.push('burn_cpu ' + rb + ' ' + r.flame.unit + ' in the range, ' + burnN + ' in the poll');
	const sc = (r.stats || []).find((x) => /serve_conn/.test(x.location));
	if (!sc || sc.polls < 1 || sc.max_ns < 19e6) rerr.push('location table ' + JSON.stringify(r.stats));
	if (rerr.length) fail('real-range', rerr.join('; '));
	else pass('real-range', 'range flame graph: ' + r.flame.samples + ' samples, ' + (r.flame.total / 1e6).toFixed(1) + ' ms, burn_cpu ' + (rb / 1e6).toFixed(1) + ' ms; serve_conn ' + sc.polls + ' polls, max ' + (sc.max_ns / 1e6).toFixed(1) + ' ms');
	await shot(page, 'real-range');
	/* the /block?ms=30 poll: its usleep is off the CPU; an off-CPU flame graph names it */
	const blk = await page.evaluate(() => {
		const M = window.__d9test.model();
		let off = 0;
		for (const l of M.lanes) for (let j = 0; j < l.samples.n; j++) off += l.samples.source[j] === 1;
		for (let li = 0; li < M.lanes.length; li++) {
			const l = M.lanes[li], b = l.blocks;
			for (let j = 0; j < b.n; j++) {
				if (M.names[b.call[j]] !== 'usleep' || b.end[j] - b.start[j] < 29e6) continue;
				for (let i = 0; i < l.polls.n; i++)
					if (l.polls.start[i] <= b.start[j] && l.polls.end[i] >= b.end[j]) return { li, i, off };
			}
		}
		return { off };
	});
	if (!blk.off) {
		console.log('SKIP viewer-real-offcpu: no off-CPU samples in the trace (perf_event_paranoid or no CAP_PERFMON)');
	} else if (blk.i === undefined) {
		fail('real-offcpu', 'no poll holds a usleep of >= 29 ms');
	} else {
		await page.selectOption('#flamesrc', '1');
		await page.evaluate((b) => window.__d9test.selectPoll(b.li, b.i), blk);
		const fo = await page.evaluate(() => window.__d9test.flame);
		await page.selectOption('#flamesrc', '2');
		const hit = Object.keys(fo.functions).filter((n) => /usleep|nanosleep/.test(n));
		if (fo.samples >= 1 && hit.length)
			pass('real-offcpu', 'the /block poll: ' + fo.samples + ' off-CPU sample(s), ' + (fo.total / 1e6).toFixed(1) + ' ms, flame graph names ' + hit.join(', '));
		else
			fail('real-offcpu', JSON.stringify(fo).slice(0, 300));
		await shot(page, 'real-offcpu');
	}
	/* keyboard and wheel: fit all, zoom in, pan; redraws stay cheap */
	await page.keyboard.press('0');
	await frame(page);
	const full = await page.evaluate(() => window.__d9test.view);
	await page.mouse.move(xy.x, xy.y);
	await page.mouse.wheel(0, -600);
	await until(page, (f) => window.__d9test.view.v1 - window.__d9test.view.v0 < (f.v1 - f.v0) * 0.8, full);
	const zoomed = await page.evaluate(() => window.__d9test.view);
	await page.keyboard.press('d');
	await until(page, (z) => window.__d9test.view.v0 !== z.v0, zoomed);
	const panned = await page.evaluate(() => window.__d9test.view);
	const span = (v) => v.v1 - v.v0;
	if (span(zoomed) < span(full) * 0.8 && panned.v0 > zoomed.v0 && Math.abs(span(panned) - span(zoomed)) < 1)
		pass('real-zoom-pan', 'wheel zoom x' + (span(full) / span(zoomed)).toFixed(1) + ', pan by key');
	else
		fail('real-zoom-pan', JSON.stringify({ full, zoomed, panned }));
	/* location table click filters the timeline */
	await page.click('#tabbody tr.gloc');
	const f = await page.evaluate(() => window.__d9test.locFilter);
	if (typeof f === 'number' && f >= 0) pass('real-location-filter', 'location ' + f);
	else fail('real-location-filter', String(f));
	/* search by function name: the locations whose polls ran burn_cpu */
	await page.click('#tabbody tr.gloc.sel');
	await page.fill('#search', 'burn_cpu');
	await until(page, () => window.__d9test.searchLocs && window.__d9test.searchLocs.length > 0);
	const found = await page.evaluate(() => window.__d9test.searchLocs);
	if (found && found.includes('serve_conn') && !found.includes('main'))
		pass('real-search', 'burn_cpu -> ' + found.join(', '));
	else
		fail('real-search', JSON.stringify(found));
	await page.fill('#search', '');
	await page.click('#tabs button[data-tab=poi]');
	const pois = await page.evaluate(() => window.__d9test.pois);
	if (pois.length && /long poll|scheduling delay|blocking/.test(pois[0].kind)) pass('real-pois', pois.length + ' points of interest, first: ' + pois[0].kind + ' ' + (pois[0].v / 1e6).toFixed(1) + ' ms');
	else fail('real-pois', JSON.stringify(pois.slice(0, 3)));
	await shot(page, 'real-pois');
	if (page.d9errors.length) fail('real-errors', page.d9errors.slice(0, 3).join('; '));
	else pass('real-errors', 'no page error');
	if (page.d9net.length) fail('real-no-network', page.d9net.slice(0, 3).join(' '));
	await page.context().close();
}

async function report(browser) {
	if (!cfg.report) return;
	const page = await B.newPage(browser);
	await page.goto('file://' + path.resolve(cfg.report));
	try {
		await page.waitForFunction(() => window.__d9test && window.__d9test.loads > 0, null, { timeout: WAIT_MS });
	} catch (e) {
		fail('html-report', 'did not load: ' + page.d9errors.slice(0, 3).join('; '));
		await page.context().close();
		return;
	}
	const nref = readJsonl(cfg.real_jsonl).length;
	const n = await page.evaluate(() => window.__d9test.events);
	const burn = await findBurn(page);
	if (n === nref && burn && burn.d >= 19e6 && !page.d9errors.length && !page.d9net.length)
		pass('html-report', n + ' events from the embedded trace, burn poll ' + (burn.d / 1e6).toFixed(1) + ' ms');
	else
		fail('html-report', JSON.stringify({ n, nref, burn, errors: page.d9errors.slice(0, 3), net: page.d9net.slice(0, 3) }));
	await shot(page, 'html-report');
	await page.context().close();
}

(async () => {
	let browser;
	try {
		browser = await B.launch();
	} catch (e) {
		fail('launch', String(e.message || e).split('\n')[0]);
		return;
	}
	try {
		await golden(browser);
		if (cfg.real) {
			await real(browser);
			await report(browser);
		}
	} catch (e) {
		fail('run', String(e.stack || e).split('\n').slice(0, 3).join(' | '));
	}
	await browser.close();
})();
