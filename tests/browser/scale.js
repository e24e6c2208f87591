#!/usr/bin/env node
/* scale.js: `node scale.js TRACE_FILE...` loads a (large) trace into the viewer in chromium and
 * prints one JSON line: events, load time (pick -> drawn, ms), the peak resident memory of all
 * of this chromium's processes (MiB, sampled every 100 ms), and redraw times (ms) of the
 * timeline at "fit all", zoomed in 10x and 100x and while panning. A measurement, not a test
 * (README.md, "Viewer", has the numbers): build a trace with build/tests/gen-analyze-load. */
'use strict';
const fs = require('fs');
const B = require('./browser.js');

function chromiumRss(marker) {
	let kb = 0;
	for (const p of fs.readdirSync('/proc')) {
		if (!/^\d+$/.test(p)) continue;
		try {
			const cmd = fs.readFileSync('/proc/' + p + '/cmdline', 'latin1');
			if (!cmd.includes('chromium') || !cmd.includes(marker)) continue;
			const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync('/proc/' + p + '/status', 'latin1'));
			if (m) kb += Number(m[1]);
		} catch (e) { /* gone */ }
	}
	return kb / 1024;
}

(async () => {
	const browser = await B.launch();
	const page = await B.newPage(browser, 1600, 1000);
	await page.goto(B.viewerUrl);
	/* the renderer and its workers carry the profile directory playwright made */
	const marker = 'playwright';
	await page.waitForTimeout(300);
	const base = chromiumRss(marker);
	let peak = 0;
	const timer = setInterval(() => { peak = Math.max(peak, chromiumRss(marker)); }, 100);
	const t0 = Date.now();
	await page.setInputFiles('#pick', process.argv.slice(2));
	await page.waitForFunction(() => window.__d9test.loads > 0 || (window.__d9test.ready && window.__d9test.messageKind === 'err'), null, { timeout: 600000, polling: 200 });
	const loadMs = Date.now() - t0;
	await page.waitForTimeout(500);
	clearInterval(timer);
	peak = Math.max(peak, chromiumRss(marker));
	const settled = chromiumRss(marker);
	const r = await page.evaluate(() => {
		const T = window.__d9test, v = T.view;
		const time = (f) => { const ts = []; for (let i = 0; i < 5; i++) { f(i); const a = performance.now(); T.drawNow(); ts.push(performance.now() - a); } ts.sort((x, y) => x - y); return { median: ts[2], max: ts[4] }; };
		const fit = time(() => T.setView(v.v0, v.v1));
		const span = (v.v1 - v.v0) / 100, mid = (v.v0 + v.v1) / 2;
		const zoomed = time((i) => T.setView(mid + i * span / 10, mid + span + i * span / 10));
		const zoom10 = time((i) => T.setView(mid + i * span, mid + span * 10 + i * span));
		const pan = time((i) => T.setView(v.v0 + i * (v.v1 - v.v0) / 20, v.v1 + i * (v.v1 - v.v0) / 20));
		return { events: T.events, decodeInWorkerMs: T.loadMs, message: T.message, fit, zoom10, zoomed, pan, draws: T.draws };
	});
	console.log(JSON.stringify(Object.assign({ loadMs, baseRssMiB: Math.round(base), peakRssMiB: Math.round(peak), settledRssMiB: Math.round(settled), errors: page.d9errors.slice(0, 3) }, r)));
	await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
