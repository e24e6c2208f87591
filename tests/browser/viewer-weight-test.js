#!/usr/bin/env node
/* viewer-weight-test.js: flame graphs by time, preempted calls and Unpark statistics in a real
 * browser (Debian's chromium through playwright-core, no network). Run by
 * tests/integration/test-viewer.sh with one JSON argument:
 *   sleeper: the segment files of a generic-mode worker recorded with D9_CPU_PROFILE=99
 *     D9_SCHED_EVENTS=1 D9_BLOCKING_THRESHOLD=10us: one loop turn that sleeps 300 ms in nanosleep
 *     and burns 200 ms of CPU, another that writes 1 MiB at a time into a non-blocking pipe (on
 *     CPU past the threshold: SchedDelays);
 *   nanosleep_ns: the nanosleep BlockingCall's duration in that trace (d9-analyze jsonl); perf:
 *     whether its off-CPU samples carry their time (perf_event_open was allowed);
 *   old: a trace whose samples carry no duration (a golden segment); artifacts: screenshots.
 * Prints PASS/FAIL lines (tests/run.sh counts them). */
'use strict';
const B = require('./browser.js');

const cfg = JSON.parse(process.argv[2]);
const { pass, fail, shot } = B.results('viewer-', cfg.artifacts);
const { WAIT_MS, frame, loadFiles } = B;
const ms = (v) => (v / 1e6).toFixed(1) + ' ms';

/* the tooltip's text with the mouse at page coordinates (x, y) */
async function tipAt(page, x, y) {
	await page.mouse.move(x, y);
	await frame(page);
	return page.evaluate(() => {
		const t = document.getElementById('tip');
		return t.style.display === 'block' ? t.textContent : '';
	});
}

/* The loop turn that holds the 300 ms nanosleep: by time, the sleep is its widest leaf (counted
 * in samples it would be the burn's ~20 on-CPU samples against one off-CPU sample: the check
 * can fail), about as wide as the BlockingCall says the sleep took. */
async function sleepTurn(page) {
	const at = await page.evaluate(() => {
		const M = window.__d9test.model();
		for (let li = 0; li < M.lanes.length; li++) {
			const l = M.lanes[li], b = l.blocks;
			for (let j = 0; j < b.n; j++) {
				if (!/nanosleep/.test(M.names[b.call[j]])) continue;
				for (let i = 0; i < l.polls.n; i++)
					if (l.polls.start[i] <= b.start[j] && l.polls.end[i] >= b.end[j])
						return { li, i, generic: M.generic, start: l.polls.start[i], end: l.polls.end[i], sleepStart: b.start[j] };
			}
		}
		return null;
	});
	if (!at || !at.generic) {
		fail('weight-sleep', 'no loop turn holds the nanosleep BlockingCall: ' + JSON.stringify(at));
		return null;
	}
	const d = at.end - at.start;
	await page.evaluate((a) => window.__d9test.setView(a.start - (a.end - a.start) * 0.2, a.end + (a.end - a.start) * 0.2), at);
	const xy = await page.evaluate((a) => window.__d9test.pollXY(a.li, a.i), at);
	await page.mouse.click(xy.x, xy.y);
	await page.waitForFunction((a) => window.__d9test.detail && window.__d9test.detail.index === a.i && window.__d9test.flame, at, { timeout: WAIT_MS }).catch(() => {});
	const r = await page.evaluate(() => ({ flame: window.__d9test.flame, detail: window.__d9test.detail }));
	const f = r.flame, errs = [], errs2 = [];
	let top = null, sleep = null;
	for (const [n, v] of Object.entries(f.self)) {
		if (!top || v > top[1]) top = [n, v];
		if (/nanosleep/.test(n) && (!sleep || v > sleep[1])) sleep = [n, v];
	}
	/* the burn's on-CPU time: its on-CPU samples (each one sampling period) */
	const burnOn = await page.evaluate((a) => {
		const M = window.__d9test.model(), l = M.lanes[a.li], s = l.samples;
		let w = 0;
		for (let i = 0; i < s.n; i++) {
			if (s.t[i] < a.start || s.t[i] >= a.end || s.source[i] !== 0 || s.stack[i] < 0) continue;
			for (let j = M.stackOff[s.stack[i]]; j < M.stackOff[s.stack[i] + 1]; j++)
				if (M.names[M.frames[j]] === 'burn_200ms') { w += s.w[i]; break; }
		}
		return w;
	}, at);
	if (f.unit !== 'ns' || !/by time/.test(f.title)) errs.push('not by time: unit ' + f.unit + ', title ' + JSON.stringify(f.title));
	if (!sleep) errs.push('no nanosleep frame: ' + JSON.stringify(f.self).slice(0, 300));
	/* the off-CPU sample stands for the time off CPU: the sleep, and then its wait for a CPU */
	else if (sleep[1] < 0.8 * cfg.nanosleep_ns || sleep[1] > d) errs.push(sleep[0] + ' ' + ms(sleep[1]) + ', the call took ' + ms(cfg.nanosleep_ns) + ' in a turn of ' + ms(d));
	/* the widest leaf; on a loaded machine the 200 ms burn may take longer than the sleep in
	 * wall time (its off-CPU samples weigh the time it was preempted): then the sleep must at
	 * least outweigh the burn's CPU time. Counted in samples, the sleep would be 1 or 2
	 * samples against about 20 on CPU. The burn's leaf is whatever it calls (clock_gettime's vdso
	 * frame), not burn_200ms itself. */
	const stretched = top && sleep && top[0] !== sleep[0] && top[1] > sleep[1]; /* e.g. the vdso frame under burn_200ms */
	if (sleep && top[0] !== sleep[0] && !(stretched && sleep[1] > burnOn)) errs.push('widest leaf ' + JSON.stringify(top) + ', nanosleep ' + JSON.stringify(sleep) + ', burn on CPU ' + ms(burnOn));
	if (sleep && !(f.functionSamples[sleep[0]] * 4 < f.samples)) errs.push('the sleep is ' + f.functionSamples[sleep[0]] + ' of ' + f.samples + ' samples: not a test of weighting');
	if (!(f.functions.sleep_300ms >= 0.8 * cfg.nanosleep_ns)) errs.push('sleep_300ms ' + f.functions.sleep_300ms);
	if (f.total > d * 1.05 + 20e6) errs.push('total ' + ms(f.total) + ' > the turn ' + ms(d));
	/* its Unpark statistics: the reading that covers the turn holds the 200 ms of CPU burned */
	const rd = r.detail && r.detail.reading;
	if (!rd || !(rd.cpu_ns >= 150e6) || !/thread CPU, sched wait\s+cpu \d/.test(r.detail.text))
		errs.push('reading ' + JSON.stringify(rd) + ' ' + JSON.stringify(r.detail && r.detail.text.slice(-300)));
	/* the tooltip and the label of the widest leaf show its time */
	const rect = f.rects.find((q) => q.name === (sleep && sleep[0]) && q.w > 30);
	let tip = '';
	if (rect) {
		const box = await page.evaluate(() => { const b = document.getElementById('flame').getBoundingClientRect(); return { x: b.left, y: b.top }; });
		tip = await tipAt(page, box.x + rect.x + rect.w / 2, box.y + rect.y + rect.h / 2);
	}
	if (!/nanosleep\S*\n\d+\.\d+ ms \(\d+\.\d%\), \d+ samples?/.test(tip)) errs.push('tooltip ' + JSON.stringify(tip));
	await shot(page, 'weight-sleep');
	if (errs.length) fail('weight-sleep', errs.join('; '));
	else pass('weight-sleep', 'loop turn of ' + ms(d) + ', by time: ' + sleep[0] + ' ' + ms(sleep[1]) + ' in ' + f.functionSamples[sleep[0]] + ' sample(s) (the call: ' +
		ms(cfg.nanosleep_ns) + ')' + (stretched ? ', the widest after ' + top[0] + ' (burn_200ms) stretched by preemption to ' + ms(top[1]) + ' (' + ms(burnOn) + ' on CPU)' : ', the widest leaf') + ', ' +
		f.samples + ' samples, ' + ms(f.total) + '; tooltip ' + JSON.stringify(tip.split('\n')[1]) + '; reading cpu ' + ms(rd.cpu_ns));
	/* a range holds only its part of the sleep: 50 ms from 100 ms into it (the sample was taken
	 * at its start, before the range), and its first 100 ms */
	const rs = [];
	for (const [from, to] of [[100e6, 150e6], [-10e6, 100e6]]) {
		const g = await page.evaluate(([a, b]) => { window.__d9test.showRange(a, b); return window.__d9test.flame; }, [at.sleepStart + from, at.sleepStart + to]);
		const v = Object.entries(g.self).filter(([n]) => /nanosleep/.test(n)).reduce((x, [, y]) => x + y, 0);
		const want = Math.min(to, cfg.nanosleep_ns) - Math.max(from, 0);
		rs.push(ms(v) + ' of [' + ms(from) + ', ' + ms(to) + ']');
		if (!(Math.abs(v - want) < 5e6) || g.unit !== 'ns') errs2.push('range [' + ms(from) + ', ' + ms(to) + '] of the sleep: nanosleep ' + ms(v) + ', want ' + ms(want) + ' (' + g.title + ')');
	}
	if (errs2.length) fail('weight-range', errs2.join('; '));
	else pass('weight-range', 'the sleep clipped to the range: ' + rs.join(', '));
	return at;
}

/* The pipe writes: SchedDelays, drawn, hovered, in their turn's detail and the points of interest */
async function preempted(page) {
	const at = await page.evaluate(() => {
		const M = window.__d9test.model();
		let blocks = [];
		for (let li = 0; li < M.lanes.length; li++) {
			const l = M.lanes[li], q = l.preempted;
			for (let j = 0; j < l.blocks.n; j++) blocks.push(M.names[l.blocks.call[j]]);
			for (let j = 0; j < q.n; j++) {
				if (M.names[q.call[j]] !== 'write') continue;
				for (let i = 0; i < l.polls.n; i++)
					if (l.polls.start[i] <= q.start[j] && l.polls.end[i] >= q.end[j])
						return { li, i, j, start: q.start[j], end: q.end[j], ps: l.polls.start[i], pe: l.polls.end[i] };
			}
		}
		return { blocks };
	});
	if (at.j === undefined) {
		fail('preempted', 'no SchedDelay of the write inside a loop turn (blocking calls: ' + at.blocks.join(', ') + ')');
		return;
	}
	const errs = [];
	await page.evaluate((a) => window.__d9test.setView(a.start - (a.end - a.start), a.end + (a.end - a.start)), at);
	const draws = await page.evaluate(() => window.__d9test.draws);
	if (!(draws.preempted >= 1)) errs.push('drawn ' + JSON.stringify(draws));
	const xy = await page.evaluate((a) => window.__d9test.pollXY(a.li, a.i), at);
	const x = await page.evaluate((a) => window.__d9test.timeX((a.start + a.end) / 2), at);
	const tip = await tipAt(page, x, xy.y + 11);
	if (!/preempted write on pipe \(sched delay\): \d+(\.\d+)? [nµm]?s, sched wait (\d|unknown)/.test(tip)) errs.push('tooltip ' + JSON.stringify(tip));
	await page.mouse.click(xy.x, xy.y);
	await page.waitForFunction((a) => window.__d9test.detail && window.__d9test.detail.index === a.i, at, { timeout: WAIT_MS }).catch(() => {});
	const d = await page.evaluate(() => window.__d9test.detail);
	const pr = d && d.preempted && d.preempted.find((q) => q.call === 'write');
	if (!pr || pr.fd_kind !== 'pipe' || Math.abs(pr.duration_ns - (at.end - at.start)) > 1 || !/preempted \(sched delay\)\s+(\w+ on pipe [^;]*; )*write on pipe \d/.test(d.text))
		errs.push('detail ' + JSON.stringify(d && { preempted: d.preempted, text: d.text.slice(0, 400) }));
	const pois = await page.evaluate(() => window.__d9test.pois.map((p) => p.kind));
	if (!pois.includes('preempted write (sched delay)')) errs.push('points of interest ' + JSON.stringify(pois.slice(0, 8)));
	await shot(page, 'preempted');
	if (errs.length) fail('preempted', errs.join('; '));
	else pass('preempted', 'write ' + ms(pr.duration_ns) + ' on a pipe, sched wait ' + (pr.sched_wait_ns === null ? 'unknown' : ms(pr.sched_wait_ns)) + ': drawn, tooltip, detail, points of interest');
}

/* Parks: a click shows its Unpark's cpu_ns / sched_wait_ns, or "unknown" (never 0) */
async function parks(page) {
	const p = await page.evaluate(() => {
		const M = window.__d9test.model();
		let known = null, unknown = null;
		M.lanes.forEach((l, li) => {
			for (let j = 0; j < l.parks.n; j++) {
				const k = l.parks.cpu[j] === l.parks.cpu[j];
				if (k && !known) known = { li, j, s: l.parks.start[j], e: l.parks.end[j] };
				if (!k && !unknown) unknown = { li, j, s: l.parks.start[j], e: l.parks.end[j] };
			}
		});
		return { known, unknown };
	});
	const errs = [];
	for (const k of ['known', 'unknown']) {
		const a = p[k];
		if (!a) { errs.push('no park with ' + k + ' statistics'); continue; }
		await page.evaluate((q) => window.__d9test.setView(q.s - (q.e - q.s) * 0.1, q.e + (q.e - q.s) * 0.1), a);
		const x = await page.evaluate((q) => window.__d9test.timeX((q.s + q.e) / 2), a);
		const y = await page.evaluate((q) => window.__d9test.pollXY(q.li, 0).y, a);
		await page.mouse.click(x, y + 8);
		await page.waitForFunction((q) => window.__d9test.detail && window.__d9test.detail.park && window.__d9test.detail.index === q.j, a, { timeout: WAIT_MS }).catch(() => {});
		const d = await page.evaluate(() => window.__d9test.detail);
		if (!d || !d.park || d.index !== a.j) { errs.push(k + ': the click selected ' + JSON.stringify(d && { park: d.park, index: d.index })); continue; }
		if (k === 'known' && !(typeof d.cpu_ns === 'number' && /at its Unpark\s+cpu \d+(\.\d+)? [µnm]?s, sched wait \d/.test(d.text)))
			errs.push('known: ' + JSON.stringify({ cpu: d.cpu_ns, text: d.text }));
		if (k === 'unknown' && !(d.cpu_ns === null && /at its Unpark\s+unknown/.test(d.text)))
			errs.push('unknown: ' + JSON.stringify({ cpu: d.cpu_ns, text: d.text }));
		p[k].text = d.text.replace(/\s+/g, ' ').replace(/.*at its Unpark /, '').replace(/ CPU samples.*/, '');
	}
	if (errs.length) fail('park-stats', errs.join('; '));
	else pass('park-stats', 'a park whose Unpark carried them: ' + JSON.stringify(p.known.text.slice(0, 160)) + '; one without: ' + JSON.stringify(p.unknown.text.slice(0, 60)));
}

/* A trace whose samples carry no duration: counted in samples, and the title says so; with
 * the sleeper trace beside it (both kinds in one view), its samples are left out and counted */
async function oldTrace(browser) {
	const page = await B.newPage(browser);
	await loadFiles(page, cfg.old);
	const f = await page.evaluate(() => { const M = window.__d9test.model(); window.__d9test.showRange(M.tMin - 1, M.tMax + 1); return window.__d9test.flame; });
	const n = await page.evaluate(() => { let n = 0; for (const l of window.__d9test.model().lanes) n += l.samples.n; return n; });
	if (n > 0 && f.unit === 'samples' && f.total === n && /by samples: this trace's samples carry no duration/.test(f.title))
		pass('weight-old', f.title);
	else
		fail('weight-old', JSON.stringify({ n, unit: f.unit, total: f.total, title: f.title }));
	await loadFiles(page, cfg.old.concat(cfg.sleeper));
	const m = await page.evaluate(() => { const M = window.__d9test.model(); window.__d9test.showRange(M.tMin - 1, M.tMax + 1); return window.__d9test.flame; });
	const want = new RegExp('by time; ' + n + ' samples? of unknown duration left out');
	if (m.unit === 'ns' && m.unknown === n && want.test(m.title))
		pass('weight-mixed', m.title);
	else
		fail('weight-mixed', JSON.stringify({ n, unit: m.unit, unknown: m.unknown, title: m.title }));
	if (page.d9errors.length) fail('weight-old-errors', page.d9errors.slice(0, 3).join('; '));
	await page.context().close();
}

(async () => {
	let browser;
	try {
		browser = await B.launch();
	} catch (e) {
		fail('weight-launch', String(e.message || e).split('\n')[0]);
		return;
	}
	try {
		const page = await B.newPage(browser);
		await loadFiles(page, cfg.sleeper);
		if (!cfg.perf)
			console.log('SKIP viewer-weight-sleep: no off-CPU sample carries its time (perf_event_open denied, or a kernel before 4.3)');
		else
			await sleepTurn(page);
		await preempted(page);
		await parks(page);
		if (page.d9errors.length) fail('weight-errors', page.d9errors.slice(0, 3).join('; '));
		else pass('weight-errors', 'no page error');
		await page.context().close();
		await oldTrace(browser);
	} catch (e) {
		fail('weight-run', String(e.stack || e).split('\n').slice(0, 3).join(' | '));
	}
	await browser.close();
})();
