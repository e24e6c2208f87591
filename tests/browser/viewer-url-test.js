#!/usr/bin/env node
/* viewer-url-test.js: the viewer's link, search and names (README.md, "Viewer": "The view in
 * the URL", "Search", "Names"), in Debian's chromium through playwright-core, no network. Run
 * by tests/integration/test-viewer-url.sh with one JSON argument: raw: the segment files of an
 * st-http trace whose segment was sealed at exit without Symbol records (it holds a /burn
 * poll); report: `d9-analyze html` of it; fn: a function the analyzer names in the burn's
 * stacks (handle_burn); artifacts: where screenshots go. Prints PASS/FAIL lines. */
'use strict';
const B = require('./browser.js');

const cfg = JSON.parse(process.argv[2]);
const { pass, fail, shot } = B.results('viewer-url-', cfg.artifacts);
const reportUrl = 'file://' + require('path').resolve(cfg.report);

/* the poll with the most on-CPU samples: the /burn */
function findBurn(page) {
	return page.evaluate(() => {
		const M = window.__d9test.model();
		let best = null;
		M.lanes.forEach((l, li) => {
			for (let i = 0; i < l.polls.n; i++) {
				let k = 0;
				for (let j = 0; j < l.samples.n; j++)
					if (l.samples.source[j] === 0 && l.samples.t[j] >= l.polls.start[i] && l.samples.t[j] < l.polls.end[i]) k++;
				if (k >= 3 && (!best || k > best.samples))
					best = { li, i, co: l.polls.co[i], tid: l.tid, start: l.polls.start[i], end: l.polls.end[i], samples: k };
			}
		});
		return best;
	});
}
async function openReport(page, hash) {
	await page.goto('about:blank'); /* a new document, not a move to the hash in the same one */
	await page.goto(reportUrl + (hash || ''));
	await page.waitForFunction(() => window.__d9test.loads > 0 && window.__d9test.ready, null, { timeout: B.WAIT_MS });
	await B.frame(page);
}
/* waits until the page has written its state into the URL (it does so after each redraw) */
async function urlSettled(page, re) {
	await page.waitForFunction((r) => new RegExp(r).test(location.hash) && location.hash === '#' + window.__d9test.urlState(), re.source, { timeout: B.WAIT_MS });
	return page.url();
}
/* what a reopened page must show the same */
function snapshot(page) {
	return page.evaluate(() => {
		const T = window.__d9test;
		return { state: T.urlState(), view: T.view, detail: T.detail && T.detail.text, flame: T.flame && T.flame.title, search: $search(), applied: T.urlApplied };
		function $search() { return document.getElementById('search').value; }
	});
}

/* pick a poll and shift+drag a range with the mouse, zoom with the keyboard: the link reopens it */
async function linkTest(page, name, open) {
	const burn = await findBurn(page);
	if (!burn) { fail(name + '-setup', 'no poll with 3 or more on-CPU samples (the /burn)'); return; }
	/* zoom to the burn, click it, then shift+drag a range over its second half */
	await page.evaluate((b) => window.__d9test.setView(b.start - (b.end - b.start), b.end + (b.end - b.start)), burn);
	await B.frame(page);
	const xy = await page.evaluate((b) => window.__d9test.pollXY(b.li, b.i), burn);
	await page.mouse.click(xy.x, xy.y);
	await page.waitForFunction(() => window.__d9test.detail && window.__d9test.detail.coroutine !== undefined, null, { timeout: B.WAIT_MS });
	const x0 = await page.evaluate((b) => window.__d9test.timeX((b.start + b.end) / 2), burn);
	const x1 = await page.evaluate((b) => window.__d9test.timeX(b.end + (b.end - b.start) / 2), burn);
	await page.keyboard.down('Shift');
	await page.mouse.move(x0, xy.y);
	await page.mouse.down();
	await page.mouse.move((x0 + x1) / 2, xy.y, { steps: 4 });
	await page.mouse.move(x1, xy.y, { steps: 4 });
	await page.mouse.up();
	await page.keyboard.up('Shift');
	await page.keyboard.press('d'); /* pan right a little: the view is not one a click makes */
	const url = await urlSettled(page, /sel=poll.*range=|range=.*sel=poll/);
	const before = await snapshot(page);
	await shot(page, 'url-' + name + '-before');
	if (!/range=/.test(before.state) || !/sel=poll/.test(before.state) || !before.detail || !/Range/.test(before.detail)) {
		fail(name + '-setup', 'the range and poll were not both picked: ' + JSON.stringify(before));
		return;
	}
	/* reopened in another tab of a fresh context: the same view, range, selection, details */
	const p2 = await B.newPage(page.context().browser());
	const fitted = await open(p2, '');
	await open(p2, url.replace(/^[^#]*/, ''));
	const after = await snapshot(p2);
	await shot(p2, 'url-' + name + '-after');
	const close = (a, b) => Math.abs(a - b) <= 2;
	if (after.state === before.state && close(after.view.v0, before.view.v0) && close(after.view.v1, before.view.v1) &&
		after.detail === before.detail && after.flame === before.flame && fitted.state !== before.state)
		pass(name, 'a copied link reopens view, range and selection: ' + after.applied.join(', ') + ' (' + after.flame + ')');
	else
		fail(name, JSON.stringify({ before, after, fitted: fitted.state }));
	/* Esc, then the poll alone: the link holds the poll and reopens it as the details */
	await page.keyboard.press('Escape');
	await B.frame(page);
	const xy2 = await page.evaluate((b) => window.__d9test.pollXY(b.li, b.i), burn);
	await page.mouse.click(xy2.x, xy2.y);
	const url2 = await urlSettled(page, /sel=poll/);
	const b2 = await snapshot(page);
	await open(p2, url2.replace(/^[^#]*/, ''));
	const a2 = await snapshot(p2);
	if (!/range=/.test(b2.state) && a2.state === b2.state && a2.detail === b2.detail && /Poll/.test(a2.detail || ''))
		pass(name + '-poll', 'the link of a selected poll reopens it: ' + (a2.detail || '').split('\n').slice(0, 3).join(' '));
	else
		fail(name + '-poll', JSON.stringify({ b2, a2 }));
	/* a link whose poll is not in the files, and one of other files: said, not guessed */
	const hash2 = url2.replace(/^[^#]*/, '');
	const moved = hash2.replace(/(sel=poll%2C\d+%2C\d+%2C)(\d+)/, (x, a, t) => a + (BigInt(t) + 5000000000n));
	await open(p2, moved);
	const m1 = await p2.evaluate(() => ({ msg: window.__d9test.message, applied: window.__d9test.urlApplied, detail: window.__d9test.detail }));
	await open(p2, hash2 + '&file=other.bin');
	const m2 = await p2.evaluate(() => ({ msg: window.__d9test.message, applied: window.__d9test.urlApplied }));
	if (moved !== hash2 && /selected poll .* is not in these files/.test(m1.msg) && m1.applied && !m1.applied.includes('poll') && !m1.detail &&
		/view was not restored: it is of other files \(other\.bin not loaded\)/.test(m2.msg) && m2.applied === null)
		pass(name + '-mismatch', 'a poll not in the files, and other files, are said: ' + m2.msg.split('\n').pop());
	else
		fail(name + '-mismatch', JSON.stringify({ moved, m1, m2 }));
	if (p2.d9errors.length) fail(name + '-errors', p2.d9errors.slice(0, 3).join('; '));
	await p2.context().close();
}

async function main() {
	const browser = await B.launch();
	const page = await B.newPage(browser, 1400, 800);

	/* ---- names: the report names what the analyzer names; raw files say names are missing ---- */
	await openReport(page, '');
	let burn = await findBurn(page);
	let r = burn && await page.evaluate((b) => { window.__d9test.selectPoll(b.li, b.i); const T = window.__d9test; return { names: T.flame.names, loc: T.detail.location, naming: T.naming, msg: T.message }; }, burn);
	if (r && r.names.includes(cfg.fn) && r.names.includes('burn_cpu') && !r.names.some((n) => /^st-http\+0x/.test(n)) &&
		r.naming && r.naming.embedded && !/names missing.*Symbol records/.test(r.msg) && !/^st-http\+0x/.test(r.loc))
		pass('report-names', 'the report\'s burn poll (' + r.loc + ') has ' + cfg.fn + ' and burn_cpu in its flame graph');
	else
		fail('report-names', JSON.stringify(r));
	await shot(page, 'url-report-names');
	await B.loadFiles(page, cfg.raw);
	burn = await findBurn(page);
	r = burn && await page.evaluate((b) => { window.__d9test.selectPoll(b.li, b.i); const T = window.__d9test; return { names: T.flame.names, loc: T.detail.location, naming: T.naming, msg: T.message }; }, burn);
	if (r && !r.names.includes(cfg.fn) && r.names.some((n) => /^st-http\+0x/.test(n)) && r.naming && !r.naming.embedded &&
		r.naming.unnamedFrames > 0 && /names missing: .*no Symbol records.*d9-analyze html/.test(r.msg))
		pass('raw-names-missing', 'raw segment: ' + r.msg.split('\n').find((l) => /names missing/.test(l)).slice(0, 160) + '…');
	else
		fail('raw-names-missing', JSON.stringify(r));
	await shot(page, 'url-raw-names');

	/* ---- the link: in the report, and with raw files opened again ---- */
	await openReport(page, '');
	await linkTest(page, 'link-report', async (p, hash) => { await openReport(p, hash); return snapshot(p); });
	await B.loadFiles(page, cfg.raw);
	await linkTest(page, 'link-files', async (p, hash) => {
		if (!hash) { await B.loadFiles(p, cfg.raw); return snapshot(p); }
		/* a link of dropped or picked files: the page says which to open, then shows the view */
		await p.goto('about:blank');
		await p.goto(B.viewerUrl + hash);
		const before = await p.evaluate(() => window.__d9test.loads);
		await p.waitForFunction(() => /this link shows a view of/.test(window.__d9test.message), null, { timeout: B.WAIT_MS });
		await p.setInputFiles('#pick', cfg.raw);
		await p.waitForFunction((n) => window.__d9test.loads > n && window.__d9test.ready, before, { timeout: B.WAIT_MS });
		await B.frame(p);
		return snapshot(p);
	});

	/* ---- search: a function goes to its polls; coroutines by id and by location ---- */
	await openReport(page, '');
	burn = await findBurn(page);
	await page.evaluate(() => window.__d9test.setView(window.__d9test.model().tMin, window.__d9test.model().tMin + 1000));
	await page.fill('#search', cfg.fn);
	await page.press('#search', 'Enter');
	await page.waitForFunction(() => window.__d9test.searchWent, null, { timeout: B.WAIT_MS });
	await B.frame(page);
	r = await page.evaluate(() => {
		const T = window.__d9test, wrap = document.getElementById('tlwrap');
		const l = T.model().lanes[T.detail.lane];
		return { went: T.searchWent, items: T.search.items.slice(0, 5), detail: { lane: T.detail.lane, index: T.detail.index, start: T.detail.start, end: T.detail.end },
			view: T.view, hits: T.draws.searchHits || 0, flame: T.flame.names, laneVisible: l.y >= wrap.scrollTop && l.y + 20 <= wrap.scrollTop + wrap.clientHeight,
			tab: document.querySelector('#tabs button.on').dataset.tab };
	});
	if (burn && r.went.kind === 'function' && r.went.label === cfg.fn && r.detail.lane === burn.li && r.detail.index === burn.i &&
		r.view.v0 <= burn.start && r.view.v1 >= burn.end && r.hits >= 1 && r.flame.includes(cfg.fn) && r.laneVisible && r.tab === 'search')
		pass('search-function', '"' + cfg.fn + '" + Enter: ' + r.items[0].detail + '; the burn poll in view, selected and outlined (' + r.hits + ' drawn)');
	else
		fail('search-function', JSON.stringify({ burn, r }));
	await shot(page, 'url-search-function');
	/* the search text is in the link too */
	const surl = await urlSettled(page, /q=/);
	const p3 = await B.newPage(browser);
	await openReport(p3, surl.replace(/^[^#]*/, ''));
	const s3 = await p3.evaluate(() => ({ q: document.getElementById('search').value, items: window.__d9test.search && window.__d9test.search.items.length }));
	if (s3.q === cfg.fn && s3.items > 0) pass('link-search', 'the link reopens the search "' + s3.q + '" (' + s3.items + ' found)');
	else fail('link-search', JSON.stringify(s3));
	await p3.context().close();
	/* a coroutine by its id, then the coroutines of a spawn location */
	await page.fill('#search', String(burn.co));
	await page.press('#search', 'Enter');
	await page.waitForFunction((co) => window.__d9test.searchWent && window.__d9test.searchWent.kind === 'coroutine' && window.__d9test.detail.coroutine === co, burn.co, { timeout: B.WAIT_MS }).catch(() => {});
	r = await page.evaluate(() => ({ went: window.__d9test.searchWent, co: window.__d9test.detail.coroutine, items: window.__d9test.search.items.filter((x) => x.kind === 'coroutine') }));
	if (r.went.kind === 'coroutine' && r.co === burn.co && r.items.length === 1 && /serve_conn/.test(r.items[0].label))
		pass('search-coroutine', '"' + burn.co + '": ' + r.items[0].label + ', its poll selected');
	else
		fail('search-coroutine', JSON.stringify({ co: burn.co, r }));
	await page.fill('#search', 'serve_conn');
	r = await page.evaluate(() => window.__d9test.search.items.filter((x) => x.kind === 'coroutine').map((x) => x.label));
	if (r.length >= 2 && r.every((x) => /serve_conn/.test(x)) && r.some((x) => x.startsWith('coroutine ' + burn.co + ' ')))
		pass('search-coroutine-location', '"serve_conn": ' + r.length + ' coroutines spawned there');
	else
		fail('search-coroutine-location', JSON.stringify(r));
	if (page.d9errors.length) fail('errors', page.d9errors.slice(0, 3).join('; '));
	else pass('errors', 'no page error');
	if (page.d9net.length) fail('no-network', page.d9net.slice(0, 3).join(' '));
	await browser.close();
}
main().catch((e) => { fail('run', String(e && e.stack || e).split('\n').slice(0, 3).join(' ')); process.exit(1); });
