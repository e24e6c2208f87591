#!/usr/bin/env node
/* api-test.js: the application API's events in the viewer (Debian's chromium through
 * playwright-core, no network). `node api-test.js ARTIFACTS TRACE...` loads the trace of
 * build/tests/api-demo (test-api.sh) and checks that a value track is drawn per name (3) with its
 * points, marks and custom events are drawn as ticks, and hovering the 'served' track names the
 * counter's total there. Prints PASS/FAIL lines (tests/run.sh counts them). */
'use strict';
const B = require('./browser.js');

const [artifacts, ...files] = process.argv.slice(2);
const { pass, fail, shot } = B.results('api-viewer-', artifacts);

(async () => {
	const browser = await B.launch();
	try {
		const page = await B.newPage(browser);
		await B.loadFiles(page, files);
		const st = await page.evaluate(() => ({ draws: window.__d9test.draws }));
		const d = st.draws || {};
		if (d.values >= 21 && d.ticks >= 14)
			pass('draw', d.values + ' value points on 3 tracks, ' + d.ticks + ' mark and event ticks');
		else
			fail('draw', 'drew ' + JSON.stringify(d) + ', want >= 21 value points and >= 14 ticks');
		/* hover the middle of the 'served' row (a counter): its total at that time */
		const box = await page.evaluate(() => {
			const c = document.getElementById('timeline');
			const r = c.getBoundingClientRect();
			return { x: r.left, y: r.top, w: c.clientWidth };
		});
		const rows = await page.evaluate(() => window.__d9test.valueRows || null);
		const served = rows && rows.find((r) => r.name === 'served');
		if (!served) {
			fail('hover', 'no value row named served: ' + JSON.stringify(rows));
		} else {
			await page.mouse.move(box.x + box.w - 5, box.y + served.y + 10);
			const tip = await page.evaluate(() => document.getElementById('tip').textContent);
			if (/^counter served = 28 /.test(tip))
				pass('hover', tip.split('\n')[0]);
			else
				fail('hover', 'tooltip ' + JSON.stringify(tip) + ', want "counter served = 28 ..."');
		}
		await shot(page, 'api');
		if (page.d9errors.length) fail('errors', page.d9errors.slice(0, 3).join('; '));
		else pass('errors', 'no page error');
	} catch (e) {
		fail('run', String(e && e.stack || e).slice(0, 400));
	} finally {
		await browser.close();
	}
})();
