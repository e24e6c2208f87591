/* browser.js: launches Debian's /usr/bin/chromium through playwright-core for the viewer tests,
 * headless and cut off from the network (no proxy reachable, no DNS, no background services),
 * and fails any request that is not file:, data: or blob:. */
'use strict';
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
module.exports = { launch, newPage, viewerUrl };
