#!/usr/bin/env node
/* diff-test.js: the differential flame graph (viewer/diff.js) in a real browser (Debian's chromium
 * through playwright-core, no network). Run by tests/integration/test-diff.sh with one JSON
 * argument: html, the page of `d9-analyze diff --html A B` (A: /burn?ms=10, B: /burn?ms=20);
 * folded, the `diff --folded A B` output of the same traces. Checks:
 *   - diff-html: the page draws without errors or requests; burn_cpu's frame is red (its time
 *     per poll grew: the page's default comparison, as the text's) and the widest leaf;
 *   - diff-html-zoom: a click on handle_burn's frame zooms: it spans the whole width;
 *   - diff-html-pick: viewer/diff.html with the folded file picked draws the same frames (sums
 *     compared: a folded file has no poll counts).
 * Prints PASS/FAIL lines (tests/run.sh counts them). */
'use strict';
const path = require('path');
const B = require('./browser.js');

const cfg = JSON.parse(process.argv[2]);
const { pass, fail } = B.results('', null);

async function frames(page) {
	await page.waitForFunction(() => window.__d9diff && window.__d9diff.ready && window.__d9diff.frames.length, null, { timeout: B.WAIT_MS });
	await B.frame(page);
	return page.evaluate(() => window.__d9diff.frames);
}

(async () => {
	const browser = await B.launch();
	try {
		const page = await B.newPage(browser);
		await page.goto('file://' + path.resolve(cfg.html));
		const f = await frames(page);
		const burn = f.filter((x) => /^burn_cpu \(/.test(x.name));
		const leaves = f.filter((x) => !f.some((y) => y.depth === x.depth + 1 && y.x >= x.x && y.x < x.x + x.w));
		const widest = leaves.reduce((m, x) => (!m || x.w > m.w ? x : m), null);
		const errs = [];
		if (!burn.length) errs.push('no burn_cpu frame among ' + f.length);
		else {
			/* per poll (the page's default): the heaviest burn_cpu frame grew */
			const big = burn.reduce((m, x) => (x.b > m.b ? x : m), burn[0]);
			if (!(big.rel > 0.2)) errs.push('burn_cpu is not red per poll: ' + JSON.stringify(big));
		}
		if (widest && !/^burn_cpu \(/.test(widest.name)) errs.push('the widest leaf is ' + widest.name);
		if (page.d9errors.length || page.d9net.length) errs.push('errors ' + page.d9errors.join('; ') + ' requests ' + page.d9net.join(' '));
		if (errs.length) fail('diff-html', errs.join('; '));
		else {
			const big = burn.reduce((m, x) => (x.b > m.b ? x : m), burn[0]);
			pass('diff-html', f.length + ' frames; burn_cpu ' + big.a + ' -> ' + big.b + ' us, red ' + big.rel.toFixed(2) + ' per poll');
		}

		const hb = f.find((x) => /^handle_burn \(/.test(x.name));
		if (!hb) {
			fail('diff-html-zoom', 'no handle_burn frame');
		} else {
			const box = await page.evaluate(() => document.getElementById('flame').getBoundingClientRect().toJSON());
			await page.mouse.click(box.x + hb.x + Math.min(hb.w / 2, 20), box.y + hb.depth * 18 + 8);
			await page.waitForFunction(() => window.__d9diff.frames.some((x) => /^handle_burn \(/.test(x.name) && x.x === 0 && x.w > 0 && x.w >= document.getElementById('flame').clientWidth - 1), null, { timeout: B.WAIT_MS }).then(
				() => pass('diff-html-zoom', 'handle_burn spans the width after a click'),
				async () => fail('diff-html-zoom', 'after the click: ' + JSON.stringify((await page.evaluate(() => window.__d9diff.frames)).slice(0, 6))));
		}

		const p2 = await B.newPage(browser);
		await p2.goto('file://' + path.resolve(__dirname, '../../viewer/diff.html'));
		await p2.setInputFiles('#pick', cfg.folded);
		const g = await frames(p2);
		const key = (a) => a.map((x) => x.name + ' ' + x.a + ' ' + x.b).sort().join('\n');
		const g0 = await p2.evaluate(() => document.getElementById('norm').value);
		if (g0 !== 'none') fail('diff-html-pick', 'a picked file knows no polls, yet compares ' + g0);
		else if (key(g) !== key(f)) fail('diff-html-pick', 'the picked file draws ' + g.length + ' frames, the page ' + f.length);
		else if (p2.d9errors.length || p2.d9net.length) fail('diff-html-pick', 'errors ' + p2.d9errors.join('; ') + ' requests ' + p2.d9net.join(' '));
		else pass('diff-html-pick', g.length + ' frames, as in the page');
	} catch (e) {
		fail('diff-html', 'exception: ' + (e && e.stack ? e.stack.split('\n').slice(0, 3).join(' ') : e));
	} finally {
		await browser.close();
	}
})();
