/* browser.js: launches Debian's /usr/bin/chromium through playwright-core for the viewer tests,
 * headless and cut off from the network (no proxy reachable, no DNS, no background services),
 * and fails any request that is not file:, data: or blob:. */
'use strict';
const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const FLAGS = [
	'--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage',
	'--no-first-run', '--no-default-browser-check', '--disable-background-networking',
	'--disable-component-update', '--disable-default-apps', '--disable-sync', '--disable-extensions',
	'--disable-domain-reliability', '--disable-client-side-phishing-detection', '--no-pings',
	'--metrics-recording-only', '--disable-breakpad', '--disable-crash-reporter',
	'--disable-features=Translate,OptimizationHints,MediaRouter,NetworkTimeServiceQuerying,AutofillServerCommunication,CertificateTransparencyComponentUpdater',
	'--host-resolver-rules=MAP * ~NOTFOUND', '--proxy-server=http://127.0.0.1:9', '--proxy-bypass-list=<-loopback>',
	'--allow-file-access-from-files', '--js-flags=--max-old-space-size=6144',
];

async function launch() {
	return chromium.launch({ executablePath: process.env.D9_CHROMIUM || '/usr/bin/chromium', headless: true, args: FLAGS });
}

/* A page that refuses the network; collects console errors and page errors in page.d9errors. */
async function newPage(browser, width, height) {
	const ctx = await browser.newContext({ viewport: { width: width || 1400, height: height || 900 } });
	const page = await ctx.newPage();
	page.d9errors = [];
	page.d9net = [];
	await page.route('**/*', (route) => {
		const u = route.request().url();
		if (/^(file|data|blob):/.test(u)) return route.continue();
		page.d9net.push(u);
		return route.abort();
	});
	page.on('pageerror', (e) => page.d9errors.push(String(e)));
	page.on('console', (m) => { if (m.type() === 'error') page.d9errors.push(m.text()); });
	return page;
}

const viewerUrl = 'file://' + path.resolve(__dirname, '../../viewer/index.html');

/* The waits: for a state of the page, never for a fixed time (a loaded machine is slow). frame()
 * resolves after the page has drawn two more frames. */
const WAIT_MS = 120000 * (Number(process.env.D9_TEST_SLOW) || 1);
const frame = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

/* Opens the viewer and loads files with its file picker; resolves once they are loaded (or the
 * viewer said why not) and drawn. */
async function loadFiles(page, files) {
	await page.goto(viewerUrl);
	const before = await page.evaluate(() => window.__d9test.loads);
	await page.setInputFiles('#pick', files);
	await page.waitForFunction((n) => window.__d9test.loads > n || (window.__d9test.ready && window.__d9test.messageKind === 'err'), before, { timeout: WAIT_MS });
	await frame(page);
}

/* The result lines of a test program, "PASS <prefix><name>[: detail]" and "FAIL ...: why"
 * (tests/run.sh counts them), and screenshots into the artifacts directory. */
function results(prefix, artifacts) {
	return {
		pass: (n, d) => console.log('PASS ' + prefix + n + (d ? ': ' + d : '')),
		fail: (n, d) => console.log('FAIL ' + prefix + n + ': ' + d),
		shot: async (page, name) => {
			fs.mkdirSync(artifacts, { recursive: true });
			await page.screenshot({ path: path.join(artifacts, name + '.png') });
		},
	};
}

module.exports = { launch, newPage, viewerUrl, WAIT_MS, frame, loadFiles, results };
