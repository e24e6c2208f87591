#!/usr/bin/env node
/* viewer-flight-test.js: the report of a flight-recorder dump (`d9-analyze html` of its
 * segments, manifest beside them) opens at the trigger in a real browser (Debian's chromium
 * through playwright-core, no network). Run by tests/integration/test-flight.sh with one JSON
 * argument: report (the HTML file), time_ns (the trigger's realtime ns, from the manifest), what
 * (the start of the trigger as d9-analyze words it, "poll > 150ms"), artifacts (screenshots).
 * Prints PASS/FAIL lines. */
'use strict';
const B = require('./browser.js');

const cfg = JSON.parse(process.argv[2]);
const { pass, fail, shot } = B.results('flight-', cfg.artifacts);

(async () => {
	const browser = await B.launch();
	try {
		const page = await B.newPage(browser);
		await page.goto('file://' + cfg.report);
		await page.waitForFunction(() => window.__d9test.loads > 0 ||
			(window.__d9test.ready && window.__d9test.messageKind === 'err'), null, { timeout: B.WAIT_MS });
		await B.frame(page);
		const r = await page.evaluate(() => {
			const T = window.__d9test, M = T.model();
			return { view: T.view, dump: T.dump, t0: M ? M.t0 : null, tMin: M ? M.tMin : 0, tMax: M ? M.tMax : 0,
				status: document.getElementById('status').textContent, message: T.message };
		});
		await shot(page, 'flight-report');
		const t = Number(BigInt(cfg.time_ns) - BigInt(r.t0 || '0'));
		const errs = [];
		if (!r.dump)
			errs.push('the viewer saw no dump (status: ' + r.status + ')');
		/* the view the viewer promises: 4 times the trigger's duration (at least 50 ms), starting
		 * a quarter of it before the trigger, not before the trace (fit all starts 1% before) */
		const span = Math.max(4 * cfg.value_ns, 50e6), a = Math.max(r.tMin, t - span / 4);
		if (!r.view || !(r.view.v0 <= t && t <= r.view.v1))
			errs.push('the trigger at ' + t + ' ns lies outside the view ' + JSON.stringify(r.view));
		else if (Math.abs(r.view.v0 - a) > 1000 || Math.abs(r.view.v1 - (a + span)) > 1000)
			errs.push('the view ' + JSON.stringify(r.view) + ', want ' + a + '..' + (a + span) + ' (trace ' + r.tMin + '..' + r.tMax + ')');
		if (r.status.indexOf('flight dump triggered by ' + cfg.what) < 0)
			errs.push('the status line does not name the trigger "' + cfg.what + '": ' + r.status);
		if (page.d9errors.length || page.d9net.length)
			errs.push('page errors ' + JSON.stringify(page.d9errors) + ', network ' + JSON.stringify(page.d9net));
		if (errs.length)
			fail('viewer-opens-at-trigger', errs.join('; '));
		else
			pass('viewer-opens-at-trigger', 'view ' + ((r.view.v1 - r.view.v0) / 1e6).toFixed(1) + ' ms of a ' +
				((r.tMax - r.tMin) / 1e9).toFixed(2) + ' s trace, trigger at +' + ((t - r.view.v0) / 1e6).toFixed(1) + ' ms into it');
	} catch (e) {
		fail('viewer-opens-at-trigger', String(e && e.stack || e));
	} finally {
		await browser.close();
	}
})();
