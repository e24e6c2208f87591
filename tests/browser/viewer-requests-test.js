#!/usr/bin/env node
/* viewer-requests-test.js: the viewer's requests track in a real browser (Debian's chromium
 * through playwright-core, no network). Run by tests/integration/test-requests.sh with one JSON
 * argument: files (a trace recorded with D9_REQUESTS=1), requests and ambiguous (what
 * `d9-analyze requests --json` found in it), artifacts (where a screenshot goes). Checks that the
 * model holds the same requests as the analyzer, then clicks the slowest request's bar with the
 * mouse: the details show it, and the polls it outlines are exactly its coroutine's polls inside
 * its time; then searches the request's id in the search box: Enter selects it. Prints PASS/FAIL lines (tests/run.sh counts them). */
'use strict';
const B = require('./browser.js');

const cfg = JSON.parse(process.argv[2]);
const { pass, fail, shot } = B.results('requests-viewer-', cfg.artifacts);
const until = (page, fn, arg) => page.waitForFunction(fn, arg, { timeout: B.WAIT_MS }).then(() => true, () => false);

async function main() {
	const browser = await B.launch();
	try {
		const page = await B.newPage(browser);
		await B.loadFiles(page, cfg.files);
		const st = await page.evaluate(() => {
			const M = window.__d9test.model();
			let n = 0, amb = 0, best = null;
			M.lanes.forEach((l, li) => {
				const q = l.requests;
				for (let k = 0; k < q.n; k++) {
					n++;
					amb += q.flags[k] & 1;
					if (!best || q.end[k] - q.start[k] > best.end - best.start)
						best = { li, k, start: q.start[k], end: q.end[k], co: q.co[k] };
				}
			});
			if (best) { /* its coroutine's polls inside its time, from the model itself */
				const p = M.lanes[best.li].polls;
				best.want = [];
				for (let i = 0; i < p.n; i++)
					if (p.end[i] >= best.start && p.start[i] <= best.end && (M.generic || !best.co || p.co[i] === best.co))
						best.want.push(i);
			}
			return { n, amb, best };
		});
		if (st.n === cfg.requests && st.amb === cfg.ambiguous)
			pass('model', st.n + ' requests, ' + st.amb + ' ambiguous, as d9-analyze requests');
		else
			fail('model', 'viewer ' + st.n + ' requests (' + st.amb + ' ambiguous), d9-analyze ' + cfg.requests + ' (' + cfg.ambiguous + ')');
		const b = st.best;
		if (!b) {
			fail('click', 'no request in the model');
			return;
		}
		const d = b.end - b.start;
		await page.evaluate((x) => window.__d9test.setView(x.start - x.d, x.end + x.d), { start: b.start, end: b.end, d });
		await B.frame(page);
		const xy = await page.evaluate((x) => {
			const T = window.__d9test, tl = document.getElementById('timeline'), r = tl.getBoundingClientRect();
			const l = T.model().lanes[x.li];
			return { x: (T.timeX(x.start) + T.timeX(x.end)) / 2, y: r.top + l.y + 19 };
		}, b);
		await page.mouse.click(xy.x, xy.y);
		const ok = await until(page, (x) => { const t = window.__d9test.detail; return t && t.request && t.index === x.k && t.lane === x.li; }, b);
		const det = await page.evaluate(() => window.__d9test.detail);
		await shot(page, 'requests-click');
		if (!ok) {
			fail('click', 'clicking the slowest request selected ' + JSON.stringify(det && { request: det.request, lane: det.lane, index: det.index }));
			return;
		}
		const same = det.polls.length === b.want.length && det.polls.every((v, i) => v === b.want[i]);
		if (same && b.want.length > 0 && /Request/.test(det.text) && Math.abs(det.duration_ns - d) < 1)
			pass('click', 'the slowest request (' + (d / 1e6).toFixed(1) + ' ms) selected by a click, its ' + b.want.length + ' poll(s) outlined');
		else
			fail('click', 'outlined polls ' + JSON.stringify(det.polls.slice(0, 10)) + ', want ' + JSON.stringify(b.want.slice(0, 10)) + '; text ' + JSON.stringify(det.text.slice(0, 200)));
		/* the search box finds a request by its id: Enter selects it, as the click did */
		const id = await page.evaluate((x) => window.__d9test.model().lanes[x.li].requests.id[x.k], b);
		await page.keyboard.press('Escape');
		await page.fill('#search', String(id));
		await page.press('#search', 'Enter');
		const found = await until(page, (x) => { const t = window.__d9test.detail; return t && t.request && t.index === x.k && t.lane === x.li; }, b);
		if (found)
			pass('search', 'searching ' + id + ' + Enter selects the request');
		else
			fail('search', 'searching ' + id + ' + Enter selected ' + JSON.stringify(await page.evaluate(() => { const t = window.__d9test.detail; return t && { request: t.request, lane: t.lane, index: t.index }; })));
		if (page.d9errors.length)
			fail('errors', page.d9errors.slice(0, 3).join(' | '));
	} finally {
		await browser.close();
	}
}
main().catch((e) => { fail('run', String(e && e.stack || e).slice(0, 400)); process.exitCode = 1; });
