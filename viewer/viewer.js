/* viewer.js: the page side of the viewer: file input, the timeline canvas (lanes of polls, parks,
 * blocking and preempted calls, CPU samples), zoom/pan/range selection, poll and park details
 * (the coroutine's life and wake chain, the thread's CPU time and scheduling wait), flame graphs
 * (by time when the samples carry their duration), the location table and points of interest.
 * The view (files, time range, selection, search) lives in the URL's hash, so a copied link
 * reopens it; the search box finds locations, functions, coroutines (and any kind added with
 * searchable()). Names the report embeds (`d9-analyze html`) are used; missing names are said.
 * Never shows an unknown value as 0 (README.md, "Viewer"). Drawing is on canvas,
 * bounded by pixels, not events: polls narrower than a pixel are merged into pixel columns.
 * Tests read window.__d9test (what was last drawn, the flame graph, the messages). */
(function () {
	'use strict';
	const $ = (id) => document.getElementById(id);
	const LANE_H = 26, AXIS_H = 34, GUTTER = 170, PROC_H = 18;
	const T = window.__d9test = { ready: false, loads: 0, draws: null, flame: null, message: '', detail: null };
	let M = null; /* the model */
	let dumps = []; /* flight dumps of a report (d9-analyze html): { t (realtime ns, string), ns, what } */
	let view = { v0: 0, v1: 1 };
	let rows = []; /* [{type:'proc', proc} | {type:'lane', lane}] with y */
	let sel = null; /* { lane, i } selected poll */
	let selPark = null; /* { lane, j } selected park (sel is null then) */
	let selReq = null; /* { lane, k } selected request (its polls are outlined) */
	let selArrows = []; /* its wake chain: { fromLane, t0, toLane, t1 } */
	let range = null; /* [t0, t1] */
	let locFilter = -1; /* name id of a location, or -1 */
	let searchText = '';
	let searchLocs = null; /* Set of location name ids matching the search */
	let pois = [], poiIdx = -1;
	let flameSrc = 2;

	/* ---- messages ---- */
	function message(kind, text) {
		const m = $('msg');
		m.className = kind || '';
		m.textContent = text || '';
		T.message = text || '';
		T.messageKind = kind || '';
	}
	function status(s) { $('status').textContent = s; }

	/* ---- loading ---- */
	function workerUrl() {
		const src = '(' + d9_decode_module + ')(self);\n(' + d9_model_module + ')(self);\n(' + d9_worker_main + ')(self);\n';
		return URL.createObjectURL(new Blob([src], { type: 'text/javascript' }));
	}
	let embNames = null; /* the names a report embeds (d9-analyze html), for the worker */
	function load(files) { /* files: [{ name, buffer }] */
		if (!files.length) return;
		message('info', 'decoding ' + files.length + ' file(s)…');
		T.ready = false;
		const t0 = performance.now();
		const w = new Worker(workerUrl());
		w.onmessage = (e) => {
			const d = e.data;
			if (d.progress) { status(d.progress); return; }
			w.terminate();
			if (d.error) { message('err', 'the viewer failed to decode: ' + d.error); T.ready = true; return; }
			setModel(d.model, performance.now() - t0);
		};
		w.onerror = (e) => { message('err', 'the decoder worker failed: ' + (e.message || e)); T.ready = true; };
		w.postMessage({ files, names: embNames }, files.map((f) => f.buffer));
	}
	async function loadFileList(list) {
		const files = [];
		for (const f of list)
			files.push({ name: f.name, buffer: await f.arrayBuffer() });
		load(files);
	}
	$('pick').addEventListener('change', (e) => loadFileList(e.target.files));
	document.addEventListener('dragover', (e) => { e.preventDefault(); });
	document.addEventListener('drop', (e) => { e.preventDefault(); loadFileList(e.dataTransfer.files); });
	/* the single-file report: trace files embedded as base64 by `d9-analyze html` */
	window.addEventListener('load', () => {
		const emb = document.querySelectorAll('script[type="application/x-d9-segment"]');
		if (!emb.length) return;
		dumps = [...document.querySelectorAll('script[type="application/x-d9-dump"]')].map((s) => ({
			t: s.dataset.timeNs, ns: s.dataset.unit === 'ns' ? Number(s.dataset.value) || 0 : 0, what: s.dataset.what || '' }));
		const files = [];
		for (const s of emb) {
			const bin = atob(s.textContent.replace(/\s+/g, ''));
			const u8 = new Uint8Array(bin.length);
			for (let i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
			files.push({ name: s.dataset.name || 'trace.bin', buffer: u8.buffer });
		}
		embNames = reportNames();
		load(files);
	});
	T.loadBuffers = (files) => load(files.map((f) => ({ name: f.name, buffer: new Uint8Array(f.bytes).buffer })));

	/* ---- the model in the page ---- */
	function setModel(m, ms) {
		M = m;
		T.loads++;
		T.loadMs = ms;
		T.events = m.events;
		const readable = m.files.filter((f) => f.status !== 'unreadable');
		const notes = [];
		for (const f of m.files) {
			if (f.status === 'unreadable')
				notes.push(f.name + ': not readable as a d9 trace: ' + f.problems[0].message);
			else if (f.status === 'not sealed')
				notes.push(f.name + ': not sealed (truncated, or still being written): no trailer; read ' + f.events +
					' events; nothing is paired across its end');
			else if (f.status === 'truncated' || f.status === 'damaged' || f.note) {
				const p = f.problems.find((x) => x.kind === 'truncated' || x.kind === 'corrupt' || x.kind === 'bad_event') || f.problems[0];
				notes.push(f.name + ': ' + (f.status === 'truncated' ? 'truncated' : 'damaged') + ' data: read ' + f.events +
					' events; ' + (p ? p.message + (p.kind === 'truncated' ? ' (decoding stopped at offset ' + p.offset + ')' : '') : '') +
					(f.nproblems > 1 ? ' (+' + (f.nproblems - 1) + ' more problems)' : '') + (f.note ? '; ' + f.note : ''));
			}
		}
		let nsamples = 0, npolls = 0;
		for (const l of m.lanes) { nsamples += l.samples.n; npolls += l.polls.n; }
		if (!readable.length) {
			message('err', notes.join('\n') || 'nothing to show');
			$('drop').style.display = 'flex';
			$('main').style.display = 'none';
			T.ready = true;
			return;
		}
		const unk = unknownText(m);
		if (unk)
			notes.push('gaps in the data: ' + unk + ' not drawn (a gap lies between their two ends: what ran there was not seen).');
		if (m.events && !nsamples)
			notes.push('no CPU samples in this trace: flame graphs stay empty (record with D9_CPU_PROFILE=1).');
		if (!m.events)
			notes.push('the trace holds no events.');
		const nmNote = namesNote(m);
		if (nmNote) notes.push(nmNote);
		message(notes.length ? 'warn' : '', notes.join('\n'));
		$('drop').style.display = 'none';
		$('main').style.display = 'flex';
		ovCache = null;
		searchText = '';
		searchLocs = null;
		$('search').value = '';
		buildRows();
		buildLod();
		computeStats();
		computePois();
		fitAll();
		/* a flight dump's report opens at its trigger (README, "Flight recorder"); f shows all */
		const dump = dumps.length && /^\d+$/.test(dumps[0].t) ? dumps[0] : null;
		T.dump = null;
		if (dump) {
			const t = Number(BigInt(dump.t) - BigInt(m.t0)), span = Math.max(4 * dump.ns, 50e6);
			const a = Math.max(m.tMin, t - span / 4);
			setView(a, a + span);
			T.dump = { t, what: dump.what };
		}
		sel = null; selReq = null; range = null; locFilter = -1; selArrows = [];
		status(m.events + ' events, ' + npolls + ' polls, ' + nsamples + ' samples, ' + m.procs.length + ' process(es), decoded in ' + Math.round(ms) + ' ms' +
			(dump ? '; flight dump triggered by ' + dump.what + ': the view opens at the trigger (f: fit all)' : ''));
		showTab(curTab);
		renderFlame([], 'flame graph: click a poll or shift+drag a range', true);
		selPark = null;
		searchHits = null;
		urlOnLoad(m);
		T.ready = true;
	}
	/* "2 polls and 1 scheduling delay of unknown length", or '' (README.md, "Gaps") */
	function unknownText(m) {
		const u = m.unknown, parts = [];
		const n = (k, one, many) => { if (u[k]) parts.push(u[k] + ' ' + (u[k] === 1 ? one : many)); };
		n('polls', 'poll', 'polls');
		n('turns', 'loop turn', 'loop turns');
		n('parks', 'park', 'parks');
		n('delays', 'scheduling delay', 'scheduling delays');
		if (!parts.length) return '';
		return (parts.length > 1 ? parts.slice(0, -1).join(', ') + ' and ' + parts[parts.length - 1] : parts[0]) + ' of unknown length';
	}
	function buildRows() {
		rows = [];
		let y = AXIS_H, lastProc = -1;
		M.lanes.forEach((l, i) => {
			if (l.proc !== lastProc) {
				if (lastProc >= 0) y = valueRows(lastProc, y);
				rows.push({ type: 'proc', proc: l.proc, y });
				y += PROC_H;
				lastProc = l.proc;
			}
			rows.push({ type: 'lane', lane: i, y });
			l.y = y;
			y += LANE_H;
		});
		if (lastProc >= 0) y = valueRows(lastProc, y);
		T.valueRows = rows.filter((r) => r.type === 'value').map((r) => ({ name: M.app.values[r.value].name, y: r.y }));
		const c = $('timeline');
		c.style.height = (y + 4) + 'px';
	}

	/* ---- application events (include/d9.h): a plotted track per value name under its process's
	 * lanes; marks and custom events as ticks on their thread's lane, named on hover ---- */
	const VALUE_H = 30;
	function valueRows(proc, y) {
		const app = M.app || { values: [] };
		app.values.forEach((v, k) => {
			if (v.proc !== proc) return;
			rows.push({ type: 'value', value: k, y });
			y += VALUE_H;
		});
		return y;
	}
	function fmtValue(v, kind) {
		return kind === 2 ? String(v) : Number.isFinite(v) ? String(Math.round(v)) : '?';
	}
	/* a step plot of the values in view (each value holds until the next), scaled to their range */
	function drawValueRow(c, r, W, counts) {
		const v = M.app.values[r.value], y = r.y, n = v.t.length;
		c.fillStyle = '#fffdf5';
		c.fillRect(GUTTER, y, W - GUTTER, VALUE_H);
		let i0 = Math.max(0, lowerBound(v.t, n, view.v0) - 1);
		const i1 = Math.min(n, lowerBound(v.t, n, view.v1) + 1);
		let lo = Infinity, hi = -Infinity;
		for (let i = i0; i < i1; i++) if (Number.isFinite(v.v[i])) { lo = Math.min(lo, v.v[i]); hi = Math.max(hi, v.v[i]); }
		if (hi === lo) { hi += 1; lo -= 1; }
		const yOf = (x) => y + VALUE_H - 4 - (x - lo) / (hi - lo) * (VALUE_H - 8);
		c.strokeStyle = '#c60';
		c.lineWidth = 1.2;
		c.beginPath();
		let started = false, py = 0;
		for (let i = i0; i < i1; i++) {
			if (!Number.isFinite(v.v[i])) continue;
			const x = Math.max(GUTTER, Math.min(W, xOf(v.t[i], W))), yy = yOf(v.v[i]);
			if (!started) c.moveTo(x, yy);
			else { c.lineTo(x, py); c.lineTo(x, yy); }
			started = true;
			py = yy;
			counts.values++;
		}
		if (started && i1 === n) c.lineTo(Math.min(W, xOf(v.t[n - 1], W)), py);
		c.stroke();
		c.fillStyle = '#fff';
		c.fillRect(0, y, GUTTER, VALUE_H);
		c.fillStyle = '#630';
		c.font = '11px system-ui';
		c.fillText((v.kind === 1 ? 'counter ' : 'gauge ') + v.name.slice(0, 22), 4, y + 13);
		if (Number.isFinite(hi)) {
			c.fillStyle = '#888';
			c.fillText(fmtValue(lo, v.kind) + ' .. ' + fmtValue(hi, v.kind), 4, y + 26);
		}
	}
	/* ticks of marks (blue) and custom events (green) of lane i in view */
	function drawAppTicks(c, lane, y, W, counts) {
		const ticks = M.app ? M.app.ticks : [];
		for (let j = lowerBoundBy(ticks, view.v0); j < ticks.length && ticks[j].t <= view.v1; j++) {
			const k = ticks[j];
			if (k.lane !== lane) continue;
			const x = Math.floor(xOf(k.t, W));
			c.fillStyle = k.type === 0 ? '#05a' : '#083';
			c.fillRect(x, y + 2, 2, LANE_H - 4);
			counts.ticks++;
		}
	}
	function lowerBoundBy(ticks, t) { let lo = 0, hi = ticks.length; while (lo < hi) { const m = (lo + hi) >> 1; if (ticks[m].t < t) lo = m + 1; else hi = m; } return lo; }
	/* hover text of the ticks of lane near time t (tol ns), or of the value row at y */
	function appTickText(lane, t, tol) {
		const ticks = M.app ? M.app.ticks : [], out = [];
		for (let j = lowerBoundBy(ticks, t - tol); j < ticks.length && ticks[j].t <= t + tol && out.length < 5; j++)
			if (ticks[j].lane === lane) out.push((ticks[j].type === 0 ? 'mark ' : 'event ') + ticks[j].name + (ticks[j].text ? ' ' + ticks[j].text : ''));
		return out.join('\n');
	}
	function valueRowAt(y) {
		for (const r of rows) if (r.type === 'value' && y >= r.y && y < r.y + VALUE_H) return r;
		return null;
	}
	function valueText(r, t) {
		const v = M.app.values[r.value], i = lowerBound(v.t, v.t.length, t + 1e-9) - 1;
		return (v.kind === 1 ? 'counter ' : 'gauge ') + v.name + (i >= 0 ? ' = ' + fmtValue(v.v[i], v.kind) + ' (since ' + wall(v.t[i]) + ')' : ': no value yet');
	}

	/* Level of detail for zoomed-out views: per lane, which of LOD_BINS equal time bins hold a
	 * poll or a park, so a redraw at "fit all" costs pixels, not events. */
	const LOD_BINS = 16384;
	function buildLod() {
		const a = M.tMin, binW = Math.max(1, (M.tMax - a) / LOD_BINS);
		for (const l of M.lanes) {
			const mark = (arr, start, end, n) => {
				for (let i = 0; i < n; i++) {
					const b0 = Math.max(0, Math.floor((start[i] - a) / binW)), b1 = Math.min(LOD_BINS - 1, Math.floor((end[i] - a) / binW));
					for (let b = b0; b <= b1; b++) arr[b] = 1;
				}
			};
			l.lod = { binW, polls: new Uint8Array(LOD_BINS), parks: new Uint8Array(LOD_BINS) };
			mark(l.lod.polls, l.polls.start, l.polls.end, l.polls.n);
			mark(l.lod.parks, l.parks.start, l.parks.end, l.parks.n);
		}
	}
	/* draws one 1-pixel column per pixel whose bins are marked; returns the number of columns */
	function drawLod(c, bins, binW, W, y, h) {
		let n = 0;
		const a = M.tMin, nsPx = (view.v1 - view.v0) / (W - GUTTER);
		for (let x = GUTTER; x < W; x++) {
			const t = view.v0 + (x - GUTTER) * nsPx;
			let b0 = Math.floor((t - a) / binW), b1 = Math.floor((t + nsPx - a) / binW);
			if (b1 < 0 || b0 >= LOD_BINS) continue;
			b0 = Math.max(0, b0);
			b1 = Math.min(LOD_BINS - 1, b1);
			for (let b = b0; b <= b1; b++) {
				if (bins[b]) { c.fillRect(x, y, 1, h); n++; break; }
			}
		}
		return n;
	}

	/* ---- names, times ---- */
	const nm = (id) => (id >= 0 && M.names[id] !== undefined ? M.names[id] : '(unknown)');
	const locNameId = (g) => (g >= 0 ? M.locName[g] : -1);
	const locName = (g) => (g >= 0 ? nm(M.locName[g]) : '(unknown location)');
	function fmtDur(ns) {
		if (!isFinite(ns)) return '?';
		const a = Math.abs(ns);
		if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
		if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
		if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' µs';
		return Math.round(ns) + ' ns';
	}
	function wall(t) { /* ISO wall-clock time of rel t, µs */
		const ns = BigInt(M.t0) + BigInt(Math.round(t));
		const ms = Number(ns / 1000000n);
		const us = Number((ns / 1000n) % 1000n);
		return new Date(ms).toISOString().replace('Z', String(us).padStart(3, '0') + 'Z');
	}
	function laneLabel(l) {
		return (l.worker ? 'worker ' + l.worker : 'thread') + ' ' + l.tid + (l.name ? ' ' + l.name : '');
	}
	function procLabel(p) {
		const P = M.procs[p];
		return P.process + ' pid ' + P.pid + (P.hostname ? ' @' + P.hostname : '') + '  (' + P.segments + ' segment' + (P.segments > 1 ? 's' : '') + ')';
	}
	function colorOf(id) {
		/* golden-angle hues: neighbouring ids get far-apart colours */
		return 'hsl(' + Math.round((id * 137.508) % 360) + ',' + (55 + (id % 3) * 10) + '%,' + (52 + (id % 2) * 8) + '%)';
	}

	/* ---- binary searches over sorted columns ---- */
	function lowerBound(a, n, x) { let lo = 0, hi = n; while (lo < hi) { const m = (lo + hi) >> 1; if (a[m] < x) lo = m + 1; else hi = m; } return lo; }
	function firstEndingAfter(ends, n, t) { return lowerBound(ends, n, t); } /* polls do not overlap in a lane: ends sorted */

	/* ---- timeline drawing ---- */
	const tl = $('timeline'), tctx = tl.getContext('2d');
	let dpr = 1;
	function xOf(t, W) { return GUTTER + (t - view.v0) / (view.v1 - view.v0) * (W - GUTTER); }
	function tOf(x, W) { return view.v0 + (x - GUTTER) / (W - GUTTER) * (view.v1 - view.v0); }
	function resizeCanvas(c, h) {
		dpr = window.devicePixelRatio || 1;
		const w = c.clientWidth;
		if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
			c.width = Math.round(w * dpr);
			c.height = Math.round(h * dpr);
		}
		return w;
	}
	let drawPending = false;
	function redraw() {
		if (drawPending) return;
		drawPending = true;
		requestAnimationFrame(() => { drawPending = false; draw(); });
	}
	function pollMatches(l, i) {
		const nid = locNameId(l.polls.loc[i]);
		if (locFilter >= 0 && nid !== locFilter) return false;
		if (searchLocs && !searchLocs.has(nid)) return false;
		return true;
	}
	function draw() {
		if (!M) return;
		const t0 = performance.now();
		const H = parseFloat(tl.style.height) || 400;
		const W = resizeCanvas(tl, H);
		const c = tctx;
		c.setTransform(dpr, 0, 0, dpr, 0, 0);
		c.clearRect(0, 0, W, H);
		const wrap = $('tlwrap');
		const yTop = wrap.scrollTop, yBot = yTop + wrap.clientHeight;
		const span = view.v1 - view.v0;
		const counts = { polls: 0, pollColumns: 0, parks: 0, blocks: 0, preempted: 0, samples: 0, drops: 0, gapMarks: 0, values: 0, ticks: 0 };
		/* gaps of every thread of a process in view: damage, a segment's end without a trailer,
		 * missing segments (the thread's own gaps are its drops, drawn as triangles) */
		const gapsInView = M.gapMarks.filter((g) => g.t >= view.v0 && g.t <= view.v1);
		const bandsInView = M.gaps.filter((g) => g.to >= view.v0 && g.from <= view.v1);
		const drawn = [];
		const selCo = sel ? M.lanes[sel.lane].polls.co[sel.i] : null;
		let hits = null; /* the polls a function search found, outlined in blue */
		const selProc = sel ? M.lanes[sel.lane].proc : -1;
		for (const r of rows) {
			if (r.y + LANE_H < yTop || r.y > yBot) continue;
			if (r.type === 'proc') {
				c.fillStyle = '#dde3ec';
				c.fillRect(0, r.y, W, PROC_H);
				c.fillStyle = '#123';
				c.font = 'bold 11px system-ui';
				c.fillText(procLabel(r.proc), 4, r.y + 13);
				continue;
			}
			if (r.type === 'value') {
				drawValueRow(c, r, W, counts);
				continue;
			}
			const l = M.lanes[r.lane], y = r.y;
			c.fillStyle = r.lane % 2 ? '#f3f3f3' : '#fbfbfb';
			c.fillRect(GUTTER, y, W - GUTTER, LANE_H);
			/* parks: a thin grey bar (the worker waits in epoll/select) */
			c.fillStyle = '#c4c9d0';
			/* exact drawing while the visible polls are few enough; bins past that */
			const inView = lowerBound(l.polls.start, l.polls.n, view.v1) - firstEndingAfter(l.polls.end, l.polls.n, view.v0) +
				lowerBound(l.parks.start, l.parks.n, view.v1) - firstEndingAfter(l.parks.end, l.parks.n, view.v0);
			const useLod = inView > 50000 && (view.v1 - view.v0) / (W - GUTTER) > l.lod.binW * 2;
			if (useLod) {
				counts.parks += drawLod(c, l.lod.parks, l.lod.binW, W, y + LANE_H - 7, 3);
			} else {
				const p = l.parks;
				let i = firstEndingAfter(p.end, p.n, view.v0), lastX = -1;
				for (; i < p.n && p.start[i] < view.v1; i++) {
					const x0 = Math.max(GUTTER, xOf(p.start[i], W)), x1 = Math.min(W, xOf(p.end[i], W));
					if (x1 < lastX + 0.5 && x1 - x0 < 1) continue;
					c.fillRect(x0, y + LANE_H - 7, Math.max(1, x1 - x0), 3);
					lastX = x1;
					counts.parks++;
				}
			}
			hits = searchHits && searchHits.get(r.lane);
			/* polls: coloured by location; sub-pixel polls merged per pixel column */
			if (useLod && locFilter < 0 && !searchLocs) {
				c.fillStyle = '#556';
				counts.pollColumns += drawLod(c, l.lod.polls, l.lod.binW, W, y + 3, LANE_H - 11);
			} else {
				const p = l.polls;
				let i = firstEndingAfter(p.end, p.n, view.v0);
				let colX = -1, colCount = 0;
				for (; i < p.n && p.start[i] < view.v1; i++) {
					const xs = xOf(p.start[i], W), xe = xOf(p.end[i], W);
					const x0 = Math.max(GUTTER, xs), x1 = Math.min(W, xe);
					const match = pollMatches(l, i);
					if (x1 - x0 < 1) {
						const px = Math.floor(x0);
						if (px === colX) { colCount++; continue; }
						colX = px;
						c.fillStyle = match ? '#556' : '#ddd';
						c.fillRect(px, y + 3, 1, LANE_H - 11);
						counts.pollColumns++;
						continue;
					}
					const lid = locNameId(p.loc[i]);
					c.fillStyle = match ? colorOf(lid + 1) : '#e2e2e2';
					c.fillRect(x0, y + 3, x1 - x0, LANE_H - 11);
					if (p.open[i]) { c.fillStyle = '#a00'; c.fillRect(x1 - 2, y + 3, 2, LANE_H - 11); }
					if (selCo !== null && l.proc === selProc && p.co[i] === selCo && M.lanes[sel.lane].polls.co[sel.i] !== 0) {
						c.strokeStyle = sel.lane === r.lane && sel.i === i ? '#000' : '#e0a000';
						c.lineWidth = 2;
						c.strokeRect(x0 + 1, y + 2, Math.max(1, x1 - x0 - 2), LANE_H - 9);
					}
					if (hits && hits.has(i)) {
						c.strokeStyle = '#0a5cff';
						c.lineWidth = 2;
						c.strokeRect(x0, y + 1, Math.max(2, x1 - x0), LANE_H - 6);
						counts.searchHits = (counts.searchHits || 0) + 1;
					}
					if (x1 - x0 > 40) {
						c.fillStyle = '#000';
						c.font = '10px system-ui';
						c.save();
						c.beginPath(); c.rect(x0, y, x1 - x0, LANE_H); c.clip();
						c.fillText(nm(lid), x0 + 2, y + 13);
						c.restore();
					}
					counts.polls++;
					if (drawn.length < 20000) drawn.push([r.lane, i]);
				}
			}
			/* blocking calls: red, under the polls */
			{
				const b = l.blocks;
				let i = lowerBound(b.start, b.n, view.v0 - span * 4);
				for (; i < b.n && b.start[i] < view.v1; i++) {
					if (b.end[i] < view.v0) continue;
					const x0 = Math.max(GUTTER, xOf(b.start[i], W)), x1 = Math.min(W, xOf(b.end[i], W));
					c.fillStyle = '#d22';
					c.fillRect(x0, y + LANE_H - 4, Math.max(1, x1 - x0), 3);
					counts.blocks++;
				}
			}
			/* preempted calls (SchedDelay: slow, but not waiting off CPU): orange and striped,
			 * where a blocking call would be red, so the two never read as one */
			{
				const b = l.preempted;
				let i = lowerBound(b.start, b.n, view.v0 - span * 4);
				for (; i < b.n && b.start[i] < view.v1; i++) {
					if (b.end[i] < view.v0) continue;
					const x0 = Math.max(GUTTER, xOf(b.start[i], W)), x1 = Math.min(W, xOf(b.end[i], W));
					c.fillStyle = '#f0a020';
					c.fillRect(x0, y + LANE_H - 5, Math.max(1, x1 - x0), 5);
					c.fillStyle = '#7a4a00';
					for (let x = Math.ceil(x0 / 4) * 4; x < x1; x += 4) c.fillRect(x, y + LANE_H - 5, 1, 5);
					counts.preempted++;
				}
			}
			drawRequests(c, l, r.lane, y, W, span);
			/* CPU samples: ticks at the top edge (dark: on-CPU, blue: off-CPU) */
			{
				const s = l.samples;
				let i = lowerBound(s.t, s.n, view.v0), lastX = -1;
				for (; i < s.n && s.t[i] < view.v1; i++) {
					const x = Math.floor(xOf(s.t[i], W));
					if (x === lastX) continue;
					lastX = x;
					c.fillStyle = s.source[i] ? '#36c' : '#222';
					c.fillRect(x, y, 1, 3);
					counts.samples++;
				}
			}
			/* gaps of the whole process: a light red band between segments, a dashed red line */
			for (const g of bandsInView) {
				if (g.proc !== l.proc) continue;
				const x0 = Math.max(GUTTER, xOf(g.from, W)), x1 = Math.min(W, xOf(g.to, W));
				c.fillStyle = 'rgba(220,0,0,0.12)';
				c.fillRect(x0, y, Math.max(1, x1 - x0), LANE_H);
				counts.gapMarks++;
			}
			if (gapsInView.length) {
				c.strokeStyle = '#e00';
				c.lineWidth = 1;
				c.setLineDash([3, 3]);
				for (const g of gapsInView) {
					if (g.proc !== l.proc) continue;
					const x = Math.floor(xOf(g.t, W)) + 0.5;
					c.beginPath(); c.moveTo(x, y); c.lineTo(x, y + LANE_H); c.stroke();
					counts.gapMarks++;
				}
				c.setLineDash([]);
			}
			/* drops: red triangles */
			{
				const d = l.drops;
				for (let i = 0; i < d.n; i++) {
					if (d.t[i] < view.v0 || d.t[i] > view.v1) continue;
					const x = xOf(d.t[i], W);
					c.fillStyle = '#e00';
					c.beginPath(); c.moveTo(x - 4, y); c.lineTo(x + 4, y); c.lineTo(x, y + 7); c.fill();
					counts.drops++;
				}
			}
			drawAppTicks(c, r.lane, y, W, counts);
			/* label gutter */
			c.fillStyle = '#fff';
			c.fillRect(0, y, GUTTER, LANE_H);
			c.fillStyle = '#222';
			c.font = '11px system-ui';
			c.fillText(laneLabel(l).slice(0, 28), 4, y + 16);
		}
		/* the selected poll's wake chain: waker's poll -> woken poll */
		if (sel) {
			c.strokeStyle = c.fillStyle = '#8a2be2';
			c.lineWidth = 1.5;
			for (const a of selArrows) {
				const x0 = xOf(a.t0, W), x1 = xOf(a.t1, W);
				const y0 = M.lanes[a.fromLane].y + 4, y1 = M.lanes[a.toLane].y + 4;
				if (Math.max(x0, x1) < GUTTER || Math.min(x0, x1) > W) continue;
				c.beginPath();
				c.moveTo(x0, y0);
				c.bezierCurveTo(x0, y0 - 14, x1, y1 - 14, x1, y1);
				c.stroke();
				c.beginPath();
				c.moveTo(x1, y1); c.lineTo(x1 - 4, y1 - 6); c.lineTo(x1 + 4, y1 - 6); c.fill();
			}
		}
		/* range selection */
		if (range) {
			const x0 = xOf(range[0], W), x1 = xOf(range[1], W);
			c.fillStyle = 'rgba(40,100,220,0.15)';
			c.fillRect(Math.max(GUTTER, x0), AXIS_H, Math.max(1, Math.min(W, x1) - Math.max(GUTTER, x0)), H - AXIS_H);
			c.strokeStyle = 'rgba(40,100,220,0.8)';
			c.lineWidth = 1;
			c.strokeRect(x0, AXIS_H, x1 - x0, H - AXIS_H);
		}
		drawAxis(c, W, yTop);
		T.draws = counts;
		T.drawn = drawn;
		T.view = { v0: view.v0, v1: view.v1 };
		T.drawMs = performance.now() - t0;
		drawOverview();
		urlSave();
	}
	function niceStep(span, px) {
		const raw = span / Math.max(1, px / 90);
		const p = Math.pow(10, Math.floor(Math.log10(raw)));
		for (const m of [1, 2, 5, 10]) if (p * m >= raw) return p * m;
		return p * 10;
	}
	function drawAxis(c, W, yTop) {
		/* the axis stays at the top of the visible part of the scrolled lanes */
		c.fillStyle = '#fff';
		c.fillRect(0, yTop, W, AXIS_H);
		c.strokeStyle = '#888';
		c.beginPath(); c.moveTo(0, yTop + AXIS_H - 0.5); c.lineTo(W, yTop + AXIS_H - 0.5); c.stroke();
		const span = view.v1 - view.v0, step = niceStep(span, W - GUTTER);
		c.fillStyle = '#333';
		c.font = '10px system-ui';
		for (let t = M.tMin + Math.ceil((view.v0 - M.tMin) / step) * step; t <= view.v1; t += step) {
			const x = xOf(t, W);
			c.fillRect(x, yTop + AXIS_H - 8, 1, 8);
			c.fillText(fmtDur(t - M.tMin), x + 2, yTop + AXIS_H - 10);
		}
		c.fillStyle = '#333';
		c.fillText(wall(view.v0).replace('T', ' '), 4, yTop + 11);
		c.fillText('span ' + fmtDur(span), 4, yTop + 24);
	}

	/* ---- overview (minimap): poll density per pixel over the whole trace ---- */
	let ovCache = null;
	function drawOverview() {
		const c = $('overview'), ctx = c.getContext('2d');
		const W = resizeCanvas(c, 36);
		ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
		const a = M.tMin, b = M.tMax, sp = Math.max(1, b - a);
		if (!ovCache || ovCache.W !== W) {
			const bins = new Float64Array(W);
			for (const l of M.lanes) {
				const p = l.polls;
				for (let i = 0; i < p.n; i++) {
					const x0 = Math.floor((p.start[i] - a) / sp * (W - 1)), x1 = Math.floor((p.end[i] - a) / sp * (W - 1));
					if (x0 === x1) bins[x0] += p.end[i] - p.start[i];
					else for (let x = Math.max(0, x0); x <= Math.min(W - 1, x1); x++) bins[x] += sp / W;
				}
			}
			let mx = 0;
			for (const v of bins) mx = Math.max(mx, v);
			ovCache = { W, bins, mx };
		}
		ctx.clearRect(0, 0, W, 36);
		ctx.fillStyle = '#eef';
		ctx.fillRect(0, 0, W, 36);
		ctx.fillStyle = '#557';
		for (let x = 0; x < W; x++) {
			const h = ovCache.mx ? Math.ceil(ovCache.bins[x] / ovCache.mx * 32) : 0;
			if (h) ctx.fillRect(x, 36 - h, 1, h);
		}
		const x0 = (view.v0 - a) / sp * W, x1 = (view.v1 - a) / sp * W;
		ctx.fillStyle = 'rgba(255,160,0,0.3)';
		ctx.fillRect(x0, 0, Math.max(2, x1 - x0), 36);
		ctx.strokeStyle = '#c70';
		ctx.strokeRect(x0, 0.5, Math.max(2, x1 - x0), 35);
	}
	$('overview').addEventListener('mousedown', (e) => {
		if (!M) return;
		const W = $('overview').clientWidth;
		const t = M.tMin + e.offsetX / W * (M.tMax - M.tMin), half = (view.v1 - view.v0) / 2;
		setView(t - half, t + half);
	});

	/* ---- view changes ---- */
	function setView(a, b) {
		const minSpan = 1000; /* 1 µs */
		if (b - a < minSpan) { const m = (a + b) / 2; a = m - minSpan / 2; b = m + minSpan / 2; }
		view.v0 = a;
		view.v1 = b;
		redraw();
	}
	function fitAll() {
		const pad = (M.tMax - M.tMin) * 0.01 + 1000;
		setView(M.tMin - pad, M.tMax + pad);
	}
	function zoom(f, atT) {
		const t = atT === undefined ? (view.v0 + view.v1) / 2 : atT;
		setView(t - (t - view.v0) * f, t + (view.v1 - t) * f);
	}
	function pan(frac) {
		const d = (view.v1 - view.v0) * frac;
		setView(view.v0 + d, view.v1 + d);
	}
	T.setView = (a, b) => { setView(a, b); draw(); };
	T.drawNow = () => { draw(); return T.draws; };
	$('fit').onclick = () => M && fitAll();
	$('zin').onclick = () => M && zoom(0.5);
	$('zout').onclick = () => M && zoom(2);
	$('tlwrap').addEventListener('scroll', redraw);
	window.addEventListener('resize', () => { ovCache = null; redraw(); renderFlame(flameLast.samples, flameLast.what, flameLast.prompt); });

	/* ---- mouse on the timeline ---- */
	let drag = null;
	tl.addEventListener('wheel', (e) => {
		if (!M) return;
		e.preventDefault();
		const W = tl.clientWidth;
		if (e.shiftKey && !e.ctrlKey) { pan((e.deltaY || e.deltaX) / 1000); return; }
		if (Math.abs(e.deltaX) > Math.abs(e.deltaY) && !e.ctrlKey) { pan(e.deltaX / W); return; }
		const f = Math.exp(e.deltaY * (e.ctrlKey ? 0.01 : 0.0015));
		zoom(f, tOf(e.offsetX, W));
	}, { passive: false });
	tl.addEventListener('mousedown', (e) => {
		if (!M || e.button !== 0) return;
		drag = { x: e.offsetX, y: e.offsetY, v0: view.v0, v1: view.v1, shift: e.shiftKey, moved: false };
		if (e.shiftKey) range = null;
	});
	window.addEventListener('mousemove', (e) => {
		if (!drag) { hover(e); return; }
		const r = tl.getBoundingClientRect(), W = tl.clientWidth;
		const x = e.clientX - r.left;
		if (Math.abs(x - drag.x) > 3) drag.moved = true;
		if (!drag.moved) return;
		if (drag.shift) {
			const a = drag.v0 + (Math.max(GUTTER, drag.x) - GUTTER) / (W - GUTTER) * (drag.v1 - drag.v0);
			const b = drag.v0 + (Math.max(GUTTER, x) - GUTTER) / (W - GUTTER) * (drag.v1 - drag.v0);
			range = [Math.min(a, b), Math.max(a, b)];
			redraw();
		} else {
			const dt = (x - drag.x) / (W - GUTTER) * (drag.v1 - drag.v0);
			setView(drag.v0 - dt, drag.v1 - dt);
		}
	});
	window.addEventListener('mouseup', (e) => {
		if (!drag) return;
		const d = drag;
		drag = null;
		if (d.shift && d.moved && range) { showRange(); return; }
		if (!d.moved && e.target === tl) clickAt(d.x, d.y);
	});
	function laneAt(y) {
		for (const r of rows) if (r.type === 'lane' && y >= r.y && y < r.y + LANE_H) return r.lane;
		return -1;
	}
	function pollAt(lane, x, W) {
		const l = M.lanes[lane], p = l.polls;
		const t = tOf(x, W), tol = 3 / (W - GUTTER) * (view.v1 - view.v0);
		let i = firstEndingAfter(p.end, p.n, t - tol);
		let best = -1, bd = Infinity;
		for (; i < p.n && p.start[i] <= t + tol; i++) {
			const d = t < p.start[i] ? p.start[i] - t : t > p.end[i] ? t - p.end[i] : 0;
			if (d < bd) { bd = d; best = i; }
		}
		return best;
	}
	function parkAt(lane, x, W) {
		const p = M.lanes[lane].parks;
		const t = tOf(x, W), tol = 3 / (W - GUTTER) * (view.v1 - view.v0);
		const i = firstEndingAfter(p.end, p.n, t - tol);
		return i < p.n && p.start[i] <= t + tol ? i : -1;
	}
	function clickAt(x, y) {
		if (x < GUTTER) return;
		const lane = laneAt(y);
		if (lane < 0) return;
		const rq = requestAt(lane, x, y, tl.clientWidth);
		if (rq >= 0) { selectRequest(lane, rq); return; }
		selReq = null;
		const i = pollAt(lane, x, tl.clientWidth);
		if (i >= 0) { selectPoll(lane, i); return; }
		const j = parkAt(lane, x, tl.clientWidth);
		if (j >= 0) { selectPark(lane, j); return; }
		sel = null;
		selPark = null;
		redraw();
	}
	function hover(e) {
		const tip = $('tip');
		if (e.target === $('flame')) return; /* the flame graph's own tooltip */
		if (!M || e.target !== tl) { tip.style.display = 'none'; return; }
		const lane = laneAt(e.offsetY);
		const vr = lane < 0 && e.offsetX >= GUTTER ? valueRowAt(e.offsetY) : null;
		if (vr) {
			tip.textContent = valueText(vr, tOf(e.offsetX, tl.clientWidth));
			tip.style.display = 'block';
			tip.style.left = (e.clientX + 12) + 'px';
			tip.style.top = (e.clientY + 12) + 'px';
			return;
		}
		if (lane < 0 || e.offsetX < GUTTER) { tip.style.display = 'none'; return; }
		const W = tl.clientWidth, l = M.lanes[lane];
		const i = pollAt(lane, e.offsetX, W);
		let s = laneLabel(l) + '\n' + wall(tOf(e.offsetX, W));
		if (i >= 0) s += '\n' + (M.generic ? 'loop turn' : 'poll of coroutine ' + l.polls.co[i] + ': ' + locName(l.polls.loc[i])) + ', ' + fmtDur(l.polls.end[i] - l.polls.start[i]);
		const t = tOf(e.offsetX, W), tol = 3 / (W - GUTTER) * (view.v1 - view.v0);
		for (const [k, txt] of [['blocks', blockText], ['preempted', preemptText]]) {
			const b = l[k];
			for (let j = lowerBound(b.start, b.n, t - tol - (view.v1 - view.v0)); j < b.n && b.start[j] <= t + tol; j++)
				if (b.end[j] >= t - tol) { s += '\n' + txt(l, j); break; }
		}
		const pk = parkAt(lane, e.offsetX, W);
		if (i < 0 && pk >= 0) s += '\n' + parkText(l, pk);
		const at = appTickText(lane, t, tol);
		if (at) s += '\n' + at;
		const rq = requestAt(lane, e.offsetX, e.offsetY, W);
		if (rq >= 0) s += '\n' + requestText(l, rq);
		tip.textContent = s;
		tip.style.display = 'block';
		tip.style.left = (e.clientX + 12) + 'px';
		tip.style.top = (e.clientY + 12) + 'px';
	}

	/* ---- keyboard ---- */
	window.addEventListener('keydown', (e) => {
		if (!M || e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') return;
		const k = e.key;
		if (k === 'w' || k === '+' || k === '=') zoom(0.5);
		else if (k === 's' || k === '-') zoom(2);
		else if (k === 'a' || k === 'ArrowLeft') pan(-0.2);
		else if (k === 'd' || k === 'ArrowRight') pan(0.2);
		else if (k === '0' || k === 'f') fitAll();
		else if (k === 'n') gotoPoi(1);
		else if (k === 'p') gotoPoi(-1);
		else if (k === 'Escape') { sel = null; selPark = null; selReq = null; selArrows = []; range = null; locFilter = -1; $('detail').innerHTML = ''; showTab(curTab); redraw(); }
		else return;
		e.preventDefault();
	});

	/* ---- details of a poll ---- */
	function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]); }
	const fdKind = (k) => M.enums.FD_KINDS[k] || 'fd kind ' + k;
	/* a value that may be unknown (NaN): never shown as 0 */
	const durOrUnknown = (v) => (v === v ? fmtDur(v) : 'unknown');
	function blockText(l, j) {
		return 'blocking ' + nm(l.blocks.call[j]) + ' on ' + fdKind(l.blocks.fd[j]) + ', ' + fmtDur(l.blocks.end[j] - l.blocks.start[j]) + ' off CPU';
	}
	function preemptText(l, j) {
		const b = l.preempted;
		return 'preempted ' + nm(b.call[j]) + ' on ' + fdKind(b.fd[j]) + ' (sched delay): ' + fmtDur(b.end[j] - b.start[j]) +
			', sched wait ' + (b.wait[j] === b.wait[j] ? fmtDur(b.wait[j]) : 'unknown');
	}
	/* The thread's CPU time and scheduling wait (Unpark's cpu_ns / sched_wait_ns): each Unpark
	 * that carries them covers the time since the thread's previous one that did (FORMAT.md,
	 * "Unpark statistics"; the agent reads them at most every 30 ms, so most carry none). For
	 * [a, b) (a park: its own Unpark at b; a poll or loop turn: the first reading at or after its
	 * end), the reading that covers b, with where its interval starts (NaN: the thread's first
	 * reading in the trace, start unknown). null: no reading at or after b. */
	function readingFor(l, b) {
		const r = l.readings, k = lowerBound(r.t, r.n, b);
		if (k >= r.n) return null;
		return { t: r.t[k], from: k > 0 ? r.t[k - 1] : NaN, cpu: r.cpu[k], sw: r.sw[k] };
	}
	function readingText(x, a) {
		if (!x) return 'unknown (no Unpark carried them after it)';
		let s = 'cpu ' + durOrUnknown(x.cpu) + ', sched wait ' + durOrUnknown(x.sw);
		s += x.from === x.from ? ' over ' + fmtDur(x.t - x.from) + ' (+' + fmtDur(x.from - M.tMin) + ' to +' + fmtDur(x.t - M.tMin) + ')' :
			' up to +' + fmtDur(x.t - M.tMin) + ' (from an earlier reading that carried no values or is not in the trace)';
		if (x.from === x.from && x.from > a) s += '; it covers only the part after +' + fmtDur(x.from - M.tMin);
		return s;
	}
	const readingJson = (x) => (x ? { cpu_ns: x.cpu === x.cpu ? x.cpu : null, sched_wait_ns: x.sw === x.sw ? x.sw : null, from: x.from === x.from ? x.from : null, to: x.t } : null);
	function parkStatsText(l, j) {
		const p = l.parks;
		if (p.cpu[j] !== p.cpu[j] && p.sw[j] !== p.sw[j])
			return 'unknown (its Unpark carried none: the agent reads them at most every 30 ms)';
		return readingText(readingFor(l, p.end[j]), p.start[j]);
	}
	function parkText(l, j) {
		const p = l.parks;
		return 'park in ' + (M.enums.CALLS[p.call[j]] || 'call ' + p.call[j]) + ', ' + fmtDur(p.end[j] - p.start[j]) + ', ready ' + p.ready[j] +
			'\nthread at its Unpark: ' + parkStatsText(l, j);
	}
	function findPollAt(proc, co, t) { /* the poll of coroutine co (process proc) open at time t */
		for (let li = 0; li < M.lanes.length; li++) {
			const l = M.lanes[li];
			if (l.proc !== proc) continue;
			const p = l.polls;
			const i = firstEndingAfter(p.end, p.n, t);
			if (i < p.n && p.start[i] <= t && p.co[i] === co) return { lane: li, i };
		}
		return null;
	}
	function selectPoll(lane, i, keepView) {
		sel = { lane, i };
		selPark = null;
		const l = M.lanes[lane], p = l.polls, P = M.procs[l.proc];
		const start = p.start[i], end = p.end[i], co = p.co[i];
		const rows2 = [];
		rows2.push(['coroutine', co ? String(co) : '(none)']);
		rows2.push(['location', esc(locName(p.loc[i])) + (p.loc[i] >= 0 && M.locAddr[p.loc[i]] ? ' <span style="color:#888">' + M.locAddr[p.loc[i]] + '</span>' : '')]);
		rows2.push(['duration', fmtDur(end - start) + (p.open[i] === 2 ? ' (still running when the trace ends)' : '')]);
		rows2.push(['start', wall(start) + ' (+' + fmtDur(start - M.tMin) + ')']);
		rows2.push(['worker', esc(laneLabel(l)) + ', pid ' + P.pid]);
		let wakeTxt = '(no wake recorded)';
		if (p.wakeKind[i] === -2)
			wakeTxt = 'unknown: a gap in the data lies between its wake and this poll';
		if (p.wakeKind[i] >= 0) {
			wakeTxt = M.enums.WAKE_KINDS[p.wakeKind[i]] + (p.waker[i] ? ' by coroutine ' + p.waker[i] : '') +
				', scheduling delay ' + fmtDur(start - p.wakeT[i]);
		}
		rows2.push(['woken', wakeTxt]);
		/* wake chain: who woke the waker, from the poll it woke us in (drawn as arrows) */
		const chain = [];
		selArrows = [];
		let cur = { lane, i };
		for (let k = 0; k < 8; k++) {
			const cp = M.lanes[cur.lane].polls;
			const wk = cp.waker[cur.i];
			if (cp.wakeKind[cur.i] < 0 || !wk) break;
			const nx = findPollAt(l.proc, wk, cp.wakeT[cur.i]);
			if (!nx) { chain.push('coroutine ' + wk); break; }
			selArrows.push({ fromLane: nx.lane, t0: cp.wakeT[cur.i], toLane: cur.lane, t1: cp.start[cur.i] });
			const np = M.lanes[nx.lane].polls;
			chain.push('coroutine ' + wk + ' (' + esc(locName(np.loc[nx.i])) + ')');
			cur = nx;
		}
		if (chain.length) rows2.push(['wake chain', chain.join(' ← ')]);
		/* the coroutine's life */
		let np = 0, tot = 0, first = Infinity, last = -Infinity;
		if (co) {
			for (const L of M.lanes) {
				if (L.proc !== l.proc) continue;
				const q = L.polls;
				for (let j = 0; j < q.n; j++) if (q.co[j] === co) { np++; tot += q.end[j] - q.start[j]; first = Math.min(first, q.start[j]); last = Math.max(last, q.end[j]); }
			}
			let life = np + ' polls, ' + fmtDur(tot) + ' running';
			if (isFinite(first)) life += ', from +' + fmtDur(first - M.tMin) + ' to +' + fmtDur(last - M.tMin);
			const k = P.cos.id.indexOf(co);
			if (k >= 0) {
				if (P.cos.parent[k]) life += ', parent ' + P.cos.parent[k];
				if (isFinite(P.cos.spawn[k])) life += ', spawned +' + fmtDur(P.cos.spawn[k] - M.tMin);
				if (isFinite(P.cos.exit[k])) life += ', exited +' + fmtDur(P.cos.exit[k] - M.tMin);
			}
			rows2.push(['life', life + ' <a href="#" id="fitco">(show)</a>']);
		}
		/* blocking calls inside */
		const b = l.blocks, blk = [];
		for (let j = lowerBound(b.start, b.n, start); j < b.n && b.start[j] < end; j++)
			blk.push(esc(nm(b.call[j])) + ' ' + fmtDur(b.end[j] - b.start[j]));
		if (blk.length) rows2.push(['blocking calls', blk.slice(0, 10).join(', ') + (blk.length > 10 ? ' …' : '')]);
		/* preempted calls inside (SchedDelay): slow without waiting off CPU */
		const pr = l.preempted, pre = [];
		for (let j = lowerBound(pr.start, pr.n, start - 1); j < pr.n && pr.start[j] < end; j++) {
			if (pr.end[j] <= start) continue;
			pre.push({ call: nm(pr.call[j]), fd_kind: fdKind(pr.fd[j]), duration_ns: pr.end[j] - pr.start[j], sched_wait_ns: pr.wait[j] === pr.wait[j] ? pr.wait[j] : null });
		}
		if (pre.length) {
			rows2.push(['preempted (sched delay)', pre.slice(0, 10).map((q) => esc(q.call) + ' on ' + q.fd_kind + ' ' + fmtDur(q.duration_ns) +
				', sched wait ' + (q.sched_wait_ns === null ? 'unknown' : fmtDur(q.sched_wait_ns))).join('; ') + (pre.length > 10 ? ' …' : '')]);
		}
		/* the thread's CPU time and scheduling wait over an interval that holds its end */
		const rd = readingFor(l, end);
		rows2.push(['thread CPU, sched wait', esc(readingText(rd, start))]);
		const samples = samplesIn([lane], start, end);
		rows2.push(['CPU samples', String(samples.length / 2)]);
		$('detail').innerHTML = '<h3>' + (M.generic ? 'Loop turn' : 'Poll') + '</h3><dl>' + rows2.map((r) => '<dt>' + r[0] + '</dt><dd>' + r[1] + '</dd>').join('') + '</dl>';
		const fc = $('fitco');
		if (fc) fc.onclick = (e) => { e.preventDefault(); const pad = (last - first) * 0.05 + 1000; setView(first - pad, last + pad); };
		T.detail = { coroutine: co, location: locName(p.loc[i]), duration_ns: end - start, start, end, lane, index: i, samples: samples.length / 2, polls_of_coroutine: np,
			preempted: pre, reading: readingJson(rd), text: $('detail').innerText };
		renderFlame(samples, (M.generic ? 'loop turn' : 'poll of coroutine ' + co) + ' (' + fmtDur(end - start) + ')');
		if (!keepView && (start < view.v0 || end > view.v1)) {
			const pad = (end - start) * 2 + 10000;
			setView(start - pad, end + pad);
		}
		redraw();
	}
	T.selectPoll = (lane, i) => selectPoll(lane, i);

	/* ---- requests (D9_REQUESTS=1 or the d9.h API; README.md, "Requests") ----
	 * A strip under the polls of the lane that read the request: green, violet when ambiguous
	 * (pipelined: boundaries unknown). Clicking one outlines the polls (loop turns) that ran
	 * for it: its coroutine's on that worker inside its time (any poll, in generic mode). */
	const REQ_Y = LANE_H - 8, REQ_H = 3, REQ_AMBIGUOUS = 1;
	function drawRequests(c, l, lane, y, W, span) {
		const q = l.requests;
		if (!q || !q.n) return;
		let i = lowerBound(q.start, q.n, view.v0 - span * 4), lastX = -1;
		for (; i < q.n && q.start[i] < view.v1; i++) {
			if (q.end[i] < view.v0) continue;
			const x0 = Math.max(GUTTER, xOf(q.start[i], W)), x1 = Math.min(W, xOf(q.end[i], W));
			if (x1 - x0 < 1 && Math.floor(x0) === lastX) continue; /* one pixel column each */
			lastX = Math.floor(x0);
			const on = selReq && selReq.lane === lane && selReq.k === i;
			c.fillStyle = on ? '#000' : q.flags[i] & REQ_AMBIGUOUS ? '#8a3fc7' : '#1a8f3c';
			c.fillRect(x0, y + REQ_Y, Math.max(1, x1 - x0), REQ_H);
		}
		if (selReq && selReq.lane === lane) outlineRequestPolls(c, l, y, W);
	}
	function requestPolls(l, k) { /* the rows of l.polls that ran for request k */
		const q = l.requests, p = l.polls, out = [];
		for (let i = firstEndingAfter(p.end, p.n, q.start[k]); i < p.n && p.start[i] <= q.end[k]; i++)
			if (M.generic || !q.co[k] || p.co[i] === q.co[k]) out.push(i);
		return out;
	}
	function outlineRequestPolls(c, l, y, W) {
		c.strokeStyle = '#1a8f3c';
		c.lineWidth = 2;
		for (const i of requestPolls(l, selReq.k)) {
			const x0 = Math.max(GUTTER, xOf(l.polls.start[i], W)), x1 = Math.min(W, xOf(l.polls.end[i], W));
			if (x1 < GUTTER) continue;
			c.strokeRect(x0 + 1, y + 2, Math.max(1, x1 - x0 - 2), LANE_H - 9);
		}
	}
	function requestText(l, k) {
		const q = l.requests;
		return 'request ' + (q.name[k] >= 0 ? nm(q.name[k]) : 'fd ' + q.fd[k]) + ', ' + fmtDur(q.end[k] - q.start[k]) +
			(q.flags[k] & REQ_AMBIGUOUS ? ' (ambiguous: ' + (q.count[k] || '?') + ' pipelined)' : '') + ' (click: its polls)';
	}
	function requestAt(lane, x, y, W) {
		const l = M.lanes[lane], q = l.requests;
		if (!q || !q.n || y - l.y < REQ_Y - 2 || y - l.y > REQ_Y + REQ_H + 1) return -1;
		const t = tOf(x, W), tol = 3 / (W - GUTTER) * (view.v1 - view.v0);
		let best = -1, bd = Infinity;
		for (let i = lowerBound(q.start, q.n, t - tol - (view.v1 - view.v0)); i < q.n && q.start[i] <= t + tol; i++) {
			const d = t < q.start[i] ? q.start[i] - t : t > q.end[i] ? t - q.end[i] : 0;
			if (d <= tol && d < bd) { bd = d; best = i; }
		}
		return best;
	}
	function selectRequest(lane, k) {
		sel = null;
		selArrows = [];
		selReq = { lane, k };
		const l = M.lanes[lane], q = l.requests, P = M.procs[l.proc];
		const polls = requestPolls(l, k);
		let running = 0;
		for (const i of polls) running += Math.min(q.end[k], l.polls.end[i]) - Math.max(q.start[k], l.polls.start[i]);
		const rows2 = [
			['request', q.name[k] >= 0 ? esc(nm(q.name[k])) : '(no preview)'],
			['duration', fmtDur(q.end[k] - q.start[k])],
			['start', wall(q.start[k]) + ' (+' + fmtDur(q.start[k] - M.tMin) + ')'],
			['worker', esc(laneLabel(l)) + ', pid ' + P.pid],
			['coroutine', q.co[k] ? String(q.co[k]) : '(none: a loop)'],
			['fd', String(q.fd[k])],
			['bytes', q.bin[k] + ' in, ' + q.bout[k] + ' out'],
			[M.generic ? 'loop turns' : 'polls', polls.length + ', ' + fmtDur(Math.max(0, running)) + ' inside it'],
		];
		if (q.flags[k] & REQ_AMBIGUOUS)
			rows2.push(['ambiguous', 'its bytes held ' + (q.count[k] || '?') + ' requests (pipelined): their boundaries are not known']);
		const samples = samplesIn([lane], q.start[k], q.end[k]);
		rows2.push(['CPU samples', String(samples.length / 2)]);
		$('detail').innerHTML = '<h3>Request</h3><dl>' + rows2.map((r) => '<dt>' + r[0] + '</dt><dd>' + r[1] + '</dd>').join('') + '</dl>';
		T.detail = { request: true, lane, index: k, duration_ns: q.end[k] - q.start[k], start: q.start[k], end: q.end[k],
			polls: polls, text: $('detail').innerText };
		renderFlame(samples, 'request (' + fmtDur(q.end[k] - q.start[k]) + ')');
		redraw();
	}
	T.selectRequest = (lane, k) => selectRequest(lane, k);

	/* ---- details of a park (the thread waiting in epoll/select) ---- */
	function selectPark(lane, j) {
		sel = null;
		selPark = { lane, j };
		selArrows = [];
		const l = M.lanes[lane], p = l.parks, P = M.procs[l.proc];
		const start = p.start[j], end = p.end[j];
		const rows2 = [
			['call', esc(M.enums.CALLS[p.call[j]] || 'call ' + p.call[j])],
			['duration', fmtDur(end - start)],
			['start', wall(start) + ' (+' + fmtDur(start - M.tMin) + ')'],
			['worker', esc(laneLabel(l)) + ', pid ' + P.pid],
			['ready', String(p.ready[j])],
			['thread CPU, sched wait at its Unpark', esc(parkStatsText(l, j))],
		];
		const samples = samplesIn([lane], start, end);
		rows2.push(['CPU samples', String(samples.length / 2)]);
		$('detail').innerHTML = '<h3>Park</h3><dl>' + rows2.map((r) => '<dt>' + r[0] + '</dt><dd>' + r[1] + '</dd>').join('') + '</dl>';
		T.detail = { park: true, lane, index: j, duration_ns: end - start, start, end, cpu_ns: p.cpu[j] === p.cpu[j] ? p.cpu[j] : null,
			sched_wait_ns: p.sw[j] === p.sw[j] ? p.sw[j] : null, reading: p.cpu[j] === p.cpu[j] || p.sw[j] === p.sw[j] ? readingJson(readingFor(l, end)) : null,
			samples: samples.length / 2, text: $('detail').innerText };
		renderFlame(samples, 'park (' + fmtDur(end - start) + ')');
		redraw();
	}
	T.selectPark = (lane, j) => selectPark(lane, j);
	T.pollXY = (lane, i) => { /* page coordinates of a poll's middle, for tests that click */
		const r = tl.getBoundingClientRect(), l = M.lanes[lane], W = tl.clientWidth;
		const x = (Math.max(GUTTER, xOf(l.polls.start[i], W)) + Math.min(W, xOf(l.polls.end[i], W))) / 2;
		return { x: r.left + x, y: r.top + l.y + LANE_H / 2 - 2 };
	};
	T.timeX = (t) => tl.getBoundingClientRect().left + xOf(t, tl.clientWidth);
	T.model = () => M;

	/* samples of the given lanes for [a, b): [lane, i, lane, i, ...], those taken in it and the
	 * off-CPU ones taken before whose time off CPU reaches into it; .win = [a, b] (renderFlame
	 * weighs only the part inside) */
	function samplesIn(laneIdx, a, b) {
		const out = [];
		for (const li of laneIdx) {
			const l = M.lanes[li], s = l.samples;
			const first = lowerBound(s.t, s.n, a);
			/* off-CPU samples taken before a whose time off CPU reaches into [a, b) */
			if (flameSrc !== 0) {
				const back = a - maxOffWeight(l);
				for (let i = first - 1; i >= 0 && s.t[i] >= back; i--)
					if (s.source[i] === 1 && s.t[i] + s.w[i] > a) out.push(li, i);
			}
			for (let i = first; i < s.n && s.t[i] < b; i++)
				if (flameSrc === 2 || s.source[i] === flameSrc) out.push(li, i);
		}
		out.win = [a, b];
		return out;
	}
	/* the longest time off CPU of a lane's samples (how far back samplesIn looks) */
	function maxOffWeight(l) {
		if (l.maxOff === undefined) {
			let m = 0;
			const s = l.samples;
			for (let i = 0; i < s.n; i++) if (s.source[i] === 1 && s.w[i] > m) m = s.w[i];
			l.maxOff = m;
		}
		return l.maxOff;
	}


	/* ---- flame graph (icicle: callers on top) ----
	 * Weighted by time when the trace's samples carry their duration (CpuSample weight_ns: an
	 * on-CPU sample its sampling period, an off-CPU one its time off CPU, so a 300 ms sleep is
	 * 300 ms wide, not one sample): samples of unknown duration are then left out, and the title
	 * says how many. A trace with no duration on any sample (older agents) is counted in samples,
	 * and the title says that too. The choice is per trace, so two graphs of one trace compare. */
	let flameLast = { samples: [], what: '', prompt: true };
	let flameRects = [];
	function traceWeighted() {
		if (M.weighted === undefined) {
			M.weighted = false;
			for (const l of M.lanes) {
				const w = l.samples.w;
				for (let i = 0; i < l.samples.n && !M.weighted; i++) if (w[i] === w[i]) M.weighted = true;
				if (M.weighted) break;
			}
		}
		return M.weighted;
	}
	/* a flame graph value in its unit: a duration, or a number of samples */
	const flameVal = (v, byTime) => (byTime ? fmtDur(v) : v + ' sample' + (v === 1 ? '' : 's'));
	function renderFlame(samples, what, prompt) {
		flameLast = { samples, what, prompt };
		const byTime = !!M && traceWeighted();
		const root = { name: -2, v: 0, n: 0, self: 0, kids: new Map() };
		const nsamp = samples.length / 2;
		const win = samples.win;
		let unknown = 0;
		for (let k = 0; k < samples.length; k += 2) {
			const l = M.lanes[samples[k]], i = samples[k + 1];
			let w = byTime ? l.samples.w[i] : 1;
			if (w !== w) { unknown++; continue; } /* NaN: duration unknown */
			/* an off-CPU sample stands for the time from its switch-out on: only the part
			 * inside the window counts (a 50 ms range does not hold 300 ms of a sleep) */
			if (byTime && win && l.samples.source[i] === 1) {
				const t = l.samples.t[i];
				w = Math.min(t + w, win[1]) - Math.max(t, win[0]);
				if (!(w > 0)) w = 0;
			}
			const st = l.samples.stack[i];
			let node = root;
			node.v += w;
			node.n++;
			const path = [];
			if (st < 0) path.push(-3);
			else {
				const a = M.stackOff[st], b = M.stackOff[st + 1];
				for (let j = b - 1; j >= a; j--) path.push(M.frames[j]);
				if (a === b) path.push(-3);
			}
			for (const f of path) {
				let n = node.kids.get(f);
				if (!n) { n = { name: f, v: 0, n: 0, self: 0, kids: new Map() }; node.kids.set(f, n); }
				n.v += w;
				n.n++;
				node = n;
			}
			node.self += w;
		}
		let title = what;
		if (!prompt) {
			if (!nsamp) title += ': no CPU samples';
			else if (byTime) {
				title += ': ' + fmtDur(root.v) + ' in ' + root.n + ' sample' + (root.n === 1 ? '' : 's') + ', by time';
				if (unknown) title += '; ' + unknown + ' sample' + (unknown === 1 ? '' : 's') + ' of unknown duration left out';
			} else {
				title += ': ' + nsamp + ' sample' + (nsamp === 1 ? '' : 's') + ', by samples: this trace\'s samples carry no duration';
			}
		}
		$('flametitle').textContent = title;
		const fname = (id) => (id === -2 ? 'all (' + flameVal(root.v, byTime) + ')' : id === -3 ? '(no stack)' : nm(id));
		flameTree = { root, nsamp, byTime, fname, unknown };
		layoutFlame(root);
		/* what tests read: the total and every function with its value (inclusive, counted once
		 * per stack even when it recurses) and its self value, in `unit`, and its samples */
		const fns = {}, self = {}, cnt = {};
		(function acc(n, seen) {
			for (const k of n.kids.values()) {
				const s = fname(k.name);
				self[s] = (self[s] || 0) + k.self;
				if (!seen.has(s)) { fns[s] = (fns[s] || 0) + k.v; cnt[s] = (cnt[s] || 0) + k.n; }
				const inner = new Set(seen);
				inner.add(s);
				acc(k, inner);
			}
		})(root, new Set());
		const names = new Set(flameRects.map((r) => r.name));
		T.flame = { title, unit: byTime ? 'ns' : 'samples', total: root.v, samples: root.n, unknown, names: [...names], functions: fns, self, functionSamples: cnt,
			rects: flameRects.slice(0, 500).map((r) => ({ name: r.name, x: r.x, y: r.y, w: r.w, h: r.h, v: r.v })) };
	}
	let flameTree = null;
	/* draws the flame graph with node `top` as its full width (a clicked frame zooms in) */
	function layoutFlame(top) {
		const { root, byTime, fname } = flameTree;
		const c = $('flame'), FH = 16;
		let depth = 0;
		(function d(n, k) { depth = Math.max(depth, k); for (const x of n.kids.values()) d(x, k + 1); })(root, 1);
		const H = Math.max(60, depth * FH + 4);
		const W = resizeCanvas(c, H);
		c.style.height = H + 'px';
		const ctx = c.getContext('2d');
		ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
		ctx.clearRect(0, 0, W, H);
		flameRects = [];
		if (!root.n) {
			ctx.fillStyle = '#777';
			ctx.font = '12px system-ui';
			ctx.fillText(!M || !M.events ? '' : flameTree.unknown ? 'no CPU sample of known duration here' : 'no CPU samples here', 6, 20);
		} else {
			(function lay(n, x, w, lvl) {
				if (w < 0.3) return;
				const nmS = fname(n.name);
				const y = lvl * FH;
				let h = 0;
				for (let q = 0; q < nmS.length; q++) h = (h * 31 + nmS.charCodeAt(q)) >>> 0;
				ctx.fillStyle = n.name === -2 ? '#bbb' : 'hsl(' + (10 + h % 45) + ',' + (70 + h % 20) + '%,' + (55 + (h >> 8) % 15) + '%)';
				ctx.fillRect(x, y, Math.max(0.5, w - 0.5), FH - 1);
				if (w > 24) {
					ctx.fillStyle = '#000';
					ctx.font = '11px system-ui';
					ctx.save(); ctx.beginPath(); ctx.rect(x, y, w, FH); ctx.clip();
					ctx.fillText(n.name === -2 ? nmS : nmS + '  ' + flameVal(n.v, byTime), x + 3, y + 12);
					ctx.restore();
				}
				flameRects.push({ x, y, w, h: FH, name: nmS, v: n.v, node: n });
				let cx = x;
				const kids = [...n.kids.values()].sort((a, b) => b.v - a.v);
				for (const k of kids) {
					const kw = w * k.v / n.v;
					lay(k, cx, kw, lvl + 1);
					cx += kw;
				}
			})(top, 0, W, 0);
		}
		flameTree.top = top;
	}
	$('flame').addEventListener('mousemove', (e) => {
		const tip = $('tip');
		const r = flameRects.find((q) => e.offsetX >= q.x && e.offsetX < q.x + q.w && e.offsetY >= q.y && e.offsetY < q.y + q.h);
		if (!r) { tip.style.display = 'none'; return; }
		const ft = flameTree;
		tip.textContent = r.name + '\n' + flameVal(r.v, ft.byTime) + ' (' + (100 * r.v / Math.max(1, ft.root.v)).toFixed(1) + '%)' +
			(ft.byTime ? ', ' + r.node.n + ' sample' + (r.node.n === 1 ? '' : 's') : '');
		tip.style.display = 'block';
		tip.style.left = (e.clientX + 12) + 'px';
		tip.style.top = (e.clientY + 12) + 'px';
	});
	$('flame').addEventListener('click', (e) => {
		if (!flameTree) return;
		const r = flameRects.find((q) => e.offsetX >= q.x && e.offsetX < q.x + q.w && e.offsetY >= q.y && e.offsetY < q.y + q.h);
		if (!r) return;
		layoutFlame(r.node === flameTree.top ? flameTree.root : r.node);
	});
	$('flame').addEventListener('mouseleave', () => { $('tip').style.display = 'none'; });
	$('flamesrc').addEventListener('change', (e) => {
		flameSrc = Number(e.target.value);
		if (sel) selectPoll(sel.lane, sel.i, true);
		else if (range) showRange();
	});

	/* ---- range: aggregated flame graph and per-location statistics ---- */
	function showRange() {
		const [a, b] = range;
		const all = M.lanes.map((_, i) => i);
		const samples = samplesIn(all, a, b);
		renderFlame(samples, 'range ' + fmtDur(b - a) + ' from +' + fmtDur(a - M.tMin));
		const st = statsFor(a, b);
		T.rangeStats = st.map((r) => ({ location: nm(r.id), polls: r.n, total_ns: r.total, p99_ns: r.p99, max_ns: r.max }));
		let blk = 0;
		let pre = 0;
		for (const l of M.lanes) for (let j = lowerBound(l.blocks.start, l.blocks.n, a); j < l.blocks.n && l.blocks.start[j] < b; j++) blk++;
		for (const l of M.lanes) for (let j = lowerBound(l.preempted.start, l.preempted.n, a); j < l.preempted.n && l.preempted.start[j] < b; j++) pre++;
		$('detail').innerHTML = '<h3>Range ' + fmtDur(b - a) + '</h3><dl><dt>from</dt><dd>' + wall(a) + '</dd><dt>to</dt><dd>' + wall(b) +
			'</dd><dt>CPU samples</dt><dd>' + samples.length / 2 + '</dd><dt>blocking calls</dt><dd>' + blk + '</dd><dt>preempted calls</dt><dd>' + pre + '</dd></dl>' +
			'<h3 style="margin-top:8px">Locations in range</h3>' + locTableHtml(st, 'rloc');
		T.detail = { range: [a, b], samples: samples.length / 2, text: $('detail').innerText };
		redraw();
	}
	T.showRange = (a, b) => { range = [a, b]; showRange(); };

	/* ---- location statistics ---- */
	let locStats = [];
	function statsFor(a, b) {
		const per = new Map();
		for (const l of M.lanes) {
			const p = l.polls;
			let i = a === undefined ? 0 : lowerBound(p.start, p.n, a);
			for (; i < p.n && (b === undefined || p.start[i] < b); i++) {
				const id = locNameId(p.loc[i]);
				let r = per.get(id);
				if (!r) { r = { id, n: 0, total: 0, max: 0, d: [] }; per.set(id, r); }
				const d = p.end[i] - p.start[i];
				r.n++; r.total += d; if (d > r.max) r.max = d; r.d.push(d);
			}
		}
		const out = [...per.values()];
		for (const r of out) {
			const d = Float64Array.from(r.d).sort();
			r.p99 = d.length ? d[Math.max(0, Math.ceil(0.99 * d.length) - 1)] : 0;
			r.d = null;
		}
		out.sort((x, y) => y.total - x.total);
		return out;
	}
	function computeStats() { locStats = statsFor(); }
	function locTableHtml(st, cls) {
		let h = '<table><tr><th>location</th><th>polls</th><th>total</th><th>p99</th><th>max</th></tr>';
		for (const r of st.slice(0, 500)) {
			if (searchText && !nm(r.id).toLowerCase().includes(searchText)) continue;
			h += '<tr class="row ' + cls + (r.id === locFilter ? ' sel' : '') + '" data-id="' + r.id + '"><td title="' + esc(nm(r.id)) + '"><span class="swatch" style="background:' + colorOf(r.id + 1) + '"></span>' +
				esc(nm(r.id)) + '</td><td>' + r.n + '</td><td>' + fmtDur(r.total) + '</td><td>' + fmtDur(r.p99) + '</td><td>' + fmtDur(r.max) + '</td></tr>';
		}
		return h + '</table>';
	}

	/* ---- points of interest, worst first ---- */
	function computePois() {
		const data = [], longPolls = [], delays = [], blocks = [];
		const top = (arr, item, k) => { arr.push(item); if (arr.length > k * 4) { arr.sort((a, b) => b.v - a.v); arr.length = k; } };
		M.lanes.forEach((l, li) => {
			const p = l.polls;
			for (let i = 0; i < p.n; i++) {
				top(longPolls, { kind: 'long poll', v: p.end[i] - p.start[i], lane: li, i, t: p.start[i], t1: p.end[i] }, 25);
				if (p.wakeKind[i] >= 0) top(delays, { kind: 'scheduling delay', v: p.start[i] - p.wakeT[i], lane: li, i, t: p.wakeT[i], t1: p.start[i] }, 25);
			}
			const b = l.blocks;
			for (let i = 0; i < b.n; i++) top(blocks, { kind: 'blocking ' + nm(b.call[i]), v: b.end[i] - b.start[i], lane: li, t: b.start[i], t1: b.end[i] }, 25);
			const q = l.preempted;
			for (let i = 0; i < q.n; i++) top(blocks, { kind: 'preempted ' + nm(q.call[i]) + ' (sched delay)', v: q.end[i] - q.start[i], lane: li, t: q.start[i], t1: q.end[i] }, 25);
			const d = l.drops;
			for (let i = 0; i < d.n; i++) data.push({ kind: 'dropped ' + d.count[i] + ' (' + (M.enums.DROP_REASONS[d.reason[i]] || d.reason[i]) + ')', v: Infinity, lane: li, t: d.t[i], t1: d.t[i] });
		});
		const unk = M.unknown;
		const firstOf = (k) => unk.first.find((x) => x.kind === k);
		for (const [k, one, many] of [['polls', 'poll', 'polls'], ['turns', 'loop turn', 'loop turns'], ['parks', 'park', 'parks'], ['delays', 'scheduling delay', 'scheduling delays']]) {
			if (!unk[k]) continue;
			const f = firstOf(k);
			data.push({ kind: unk[k] + ' ' + (unk[k] === 1 ? one : many) + ' of unknown length (gap in the data)', v: Infinity, lane: f ? f.lane : -1, t: f ? f.t : NaN, t1: f ? f.t : NaN });
		}
		for (const g of M.gaps)
			data.push({ kind: 'gap in the data after ' + g.after + (g.missing > 0 ? ' (' + g.missing + ' segment(s) missing)' : ' (not sealed: cut short)'), v: Infinity, lane: -1, t: g.from, t1: g.to });
		for (const f of M.files)
			if (f.status !== 'ok' || f.note) data.push({ kind: f.name + ': ' + f.status + ' (' + ((f.problems[0] || {}).message || f.note) + ')', v: Infinity, lane: -1, t: NaN });
		const srt = (a) => a.sort((x, y) => y.v - x.v).slice(0, 25);
		pois = data.concat(srt(longPolls.concat(delays, blocks)).sort((x, y) => y.v - x.v));
		poiIdx = -1;
		T.pois = pois.map((p) => ({ kind: p.kind, v: p.v, t: p.t }));
	}
	function gotoPoi(d) {
		if (!pois.length) return;
		poiIdx = (poiIdx + d + pois.length) % pois.length;
		const q = pois[poiIdx];
		if (isFinite(q.t)) {
			const w = Math.max(q.t1 - q.t, 1000), pad = w * 2;
			setView(q.t - pad, q.t1 + pad);
		}
		if (q.i !== undefined) selectPoll(q.lane, q.i, true);
		showTab('poi');
	}
	$('next').onclick = () => M && gotoPoi(1);
	$('prev').onclick = () => M && gotoPoi(-1);

	/* ---- side tabs ---- */
	let curTab = 'locs';
	function showTab(name) {
		curTab = name;
		for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('on', b.dataset.tab === name);
		const body = $('tabbody');
		if (!M) { body.innerHTML = ''; return; }
		if (name === 'locs') {
			body.innerHTML = locTableHtml(locStats, 'gloc');
		} else if (name === 'search') {
			body.innerHTML = searchHtml();
		} else if (name === 'poi') {
			let h = '<table><tr><th>what</th><th>how long</th><th>when</th></tr>';
			pois.forEach((p, k) => {
				h += '<tr class="row poi' + (k === poiIdx ? ' sel' : '') + '" data-k="' + k + '"><td>' + esc(p.kind) + '</td><td>' + (isFinite(p.v) ? fmtDur(p.v) : p.t1 > p.t ? fmtDur(p.t1 - p.t) : '') +
					'</td><td>' + (isFinite(p.t) ? '+' + fmtDur(p.t - M.tMin) : '') + '</td></tr>';
			});
			body.innerHTML = h + '</table>';
		} else {
			let h = '<table><tr><th>file</th><th>bytes</th><th>events</th><th>state</th></tr>';
			for (const f of M.files) h += '<tr><td title="' + esc(f.name) + '">' + esc(f.name) + '</td><td>' + f.size + '</td><td>' + f.events + '</td><td>' + esc(f.status) + '</td></tr>';
			body.innerHTML = h + '</table>';
		}
	}
	$('tabs').addEventListener('click', (e) => { if (e.target.dataset.tab) showTab(e.target.dataset.tab); });
	document.addEventListener('click', (e) => {
		const tr = e.target.closest && e.target.closest('tr.row');
		if (!tr || !M) return;
		if (tr.classList.contains('gloc') || tr.classList.contains('rloc')) {
			const id = Number(tr.dataset.id);
			locFilter = locFilter === id ? -1 : id;
			T.locFilter = locFilter;
			showTab(curTab);
			redraw();
		} else if (tr.classList.contains('poi')) {
			poiIdx = Number(tr.dataset.k) - 1;
			gotoPoi(1);
		}
	});
	$('search').addEventListener('input', (e) => {
		searchText = e.target.value.trim().toLowerCase();
		searchLocs = null;
		if (searchText && M) {
			/* locations whose name matches, or whose polls' samples ran a matching function */
			searchLocs = new Set();
			M.names.forEach((n, id) => { if (n.toLowerCase().includes(searchText)) searchLocs.add(id); });
			const fnMatch = new Uint8Array(M.names.length);
			M.names.forEach((n, id) => { if (n.toLowerCase().includes(searchText)) fnMatch[id] = 1; });
			for (const l of M.lanes) {
				const s = l.samples, p = l.polls;
				for (let i = 0; i < s.n; i++) {
					const st = s.stack[i];
					if (st < 0) continue;
					let hit = false;
					for (let j = M.stackOff[st]; j < M.stackOff[st + 1]; j++) if (fnMatch[M.frames[j]]) { hit = true; break; }
					if (!hit) continue;
					const k = firstEndingAfter(p.end, p.n, s.t[i]);
					if (k < p.n && p.start[k] <= s.t[i]) searchLocs.add(locNameId(p.loc[k]));
				}
			}
		}
		T.searchLocs = searchLocs ? [...searchLocs].map(nm) : null;
		runSearch();
		showTab(curTab);
		redraw();
	});
	/* ---- names: what the report embeds, and saying when names are missing ----
	 * A segment sealed at process exit (before the agent's compressor named it), or recorded
	 * with D9_SYMBOLIZE=0, has no Symbol records, and the page reads no binaries: its code is
	 * `module+0xoffset`. `d9-analyze html` embeds the names it gives each address (as `summary`
	 * does); the model (model.js) uses them and counts what stays unnamed. */
	function reportNames() {
		const el = document.querySelector('script[type="application/x-d9-names"]');
		if (!el) return null;
		try {
			return JSON.parse(el.textContent);
		} catch (e) {
			return null;
		}
	}
	function namesNote(m) {
		const N = m.naming;
		T.naming = N ? Object.assign({}, N) : null;
		if (!N || !(N.unnamedLocs + N.unnamedFrames)) return '';
		const parts = [];
		if (N.unnamedLocs) parts.push(N.unnamedLocs + ' location' + (N.unnamedLocs === 1 ? '' : 's'));
		if (N.unnamedFrames) parts.push(N.unnamedFrames + ' stack frame address' + (N.unnamedFrames === 1 ? '' : 'es'));
		const what = parts.join(' and ') + ' without a function name, shown as module+0xoffset or an address' +
			(N.examples.length ? ' (e.g. ' + N.examples.join(', ') + ')' : '');
		if (N.embedded)
			return 'names missing: ' + what + ': d9-analyze html could not name them either (no binary or debug symbols for them where it ran): ' +
				'run it where the binaries are, or install their debug symbols.';
		return 'names missing: ' + what + ': these segments carry no Symbol records (sealed at process exit before the agent named them, ' +
			'still being written, or recorded with D9_SYMBOLIZE=0). To see names, write a report where the binaries are: ' +
			'`d9-analyze html TRACE… -o report.html` names them as `d9-analyze summary` does (keep the binaries, or install their debug symbols).';
	}

	/* ---- the view in the URL ----
	 * The hash fragment (never sent to a server) holds the file set, the time range, the
	 * selection (a poll or a park), the shift+drag range, the location filter and the search
	 * text; times are CLOCK_REALTIME ns, so they do not depend on which files set time 0. A link
	 * opened on the files it names (a report holds them; dropped or picked files must be opened
	 * again: a page cannot read a file it was not given) shows the same view. */
	let urlPending = null; /* the state of the link, until its files are loaded */
	let urlLast = ''; /* the hash this page last wrote */
	let urlTimer = 0;
	const absNs = (t) => (BigInt(M.t0) + BigInt(Math.round(t))).toString();
	const relNs = (s) => (/^\d+$/.test(s || '') ? Number(BigInt(s) - BigInt(M.t0)) : NaN);
	function urlState() {
		const q = new URLSearchParams();
		for (const f of M.files) q.append('file', f.name);
		q.set('view', absNs(view.v0) + ',' + absNs(view.v1));
		if (range) q.set('range', absNs(range[0]) + ',' + absNs(range[1]));
		const lanePid = (li) => M.procs[M.lanes[li].proc].pid + ',' + M.lanes[li].tid;
		if (sel) q.set('sel', 'poll,' + lanePid(sel.lane) + ',' + absNs(M.lanes[sel.lane].polls.start[sel.i]));
		else if (selPark) q.set('sel', 'park,' + lanePid(selPark.lane) + ',' + absNs(M.lanes[selPark.lane].parks.start[selPark.j]));
		/* which of the two the detail pane shows: the one picked last */
		if (range && (sel || selPark) && T.detail && T.detail.range) q.set('detail', 'range');
		if (locFilter >= 0) q.set('loc', nm(locFilter));
		if (searchText) q.set('q', $('search').value.trim());
		return q.toString();
	}
	function urlSave() {
		if (!M || urlPending || urlTimer) return;
		urlTimer = setTimeout(() => {
			urlTimer = 0;
			if (!M || urlPending) return;
			const h = urlState();
			if (h === urlLast) return;
			urlLast = h;
			try {
				history.replaceState(null, '', '#' + h);
			} catch (e) {
				location.replace('#' + h);
			}
			T.url = location.href;
		}, 120);
	}
	function urlRead() {
		const h = location.hash.replace(/^#/, '');
		if (!h) return null;
		const q = new URLSearchParams(h);
		return { hash: h, files: q.getAll('file'), view: q.get('view'), range: q.get('range'), sel: q.get('sel'), detail: q.get('detail'), loc: q.get('loc'), q: q.get('q') };
	}
	/* a model was loaded: apply the link's state when its files are these (all of them, by name) */
	function urlOnLoad(m) {
		/* (a hash this page wrote is the previous files' view, not a link) */
		const st = urlPending || ((h) => (h && h.hash !== urlLast ? h : null))(urlRead());
		urlPending = null;
		urlLast = '';
		T.urlApplied = null;
		if (!st) return;
		const have = new Set(m.files.map((f) => f.name));
		const missing = st.files.filter((f) => !have.has(f));
		if (missing.length) {
			message('warn', [T.message, 'the link\'s view was not restored: it is of other files (' + missing.slice(0, 5).join(', ') +
				(missing.length > 5 ? ', …' : '') + ' not loaded)'].filter(Boolean).join('\n'));
			return;
		}
		urlApply(st);
	}
	function urlApply(st) {
		const pair = (v) => (v ? v.split(',').map(relNs) : null);
		const ok = (p) => p && p.length === 2 && p.every((x) => x === x) && p[1] >= p[0];
		const applied = [];
		if (st.q !== null && st.q !== undefined) {
			const box = $('search');
			box.value = st.q;
			box.dispatchEvent(new Event('input'));
			applied.push('search');
		}
		if (st.loc) {
			const id = M.names.indexOf(st.loc);
			if (id >= 0) { locFilter = id; T.locFilter = id; applied.push('location'); }
		}
		const r = pair(st.range);
		const pickRange = () => { if (ok(r)) { range = r; showRange(); applied.push('range'); } };
		const pickSel = () => {
			const f = (st.sel || '').split(',');
			if (f.length !== 4) return;
			const pid = Number(f[1]), tid = Number(f[2]), t = relNs(f[3]);
			const li = M.lanes.findIndex((l) => M.procs[l.proc].pid === pid && l.tid === tid);
			if (li < 0 || t !== t) {
				message('warn', [T.message, 'the link\'s selection (thread ' + tid + ' of pid ' + pid + ') is not in these files'].filter(Boolean).join('\n'));
				return;
			}
			const col = f[0] === 'park' ? M.lanes[li].parks : M.lanes[li].polls;
			const i = lowerBound(col.start, col.n, t - 1000);
			if (i >= col.n || Math.abs(col.start[i] - t) > 1000) {
				message('warn', [T.message, 'the link\'s selected ' + f[0] + ' (thread ' + tid + ' of pid ' + pid + ') is not in these files'].filter(Boolean).join('\n'));
				return;
			}
			if (f[0] === 'park') selectPark(li, i);
			else selectPoll(li, i, true);
			scrollToLane(li);
			applied.push(f[0]);
		};
		if (st.detail === 'range') { pickSel(); pickRange(); } else { pickRange(); pickSel(); }
		const v = pair(st.view);
		if (ok(v)) { setView(v[0], v[1]); applied.push('view'); }
		showTab(curTab);
		T.urlApplied = applied;
		redraw();
	}
	function scrollToLane(li) {
		const wrap = $('tlwrap'), y = M.lanes[li].y;
		if (y < wrap.scrollTop + AXIS_H || y + LANE_H > wrap.scrollTop + wrap.clientHeight)
			wrap.scrollTop = Math.max(0, y - wrap.clientHeight / 2);
	}
	/* a link opened without its files (dropped or picked ones): say which to open */
	window.addEventListener('load', () => {
		const st = urlRead();
		if (!st || document.querySelector('script[type="application/x-d9-segment"]')) return;
		urlPending = st;
		if (st.files.length)
			message('info', 'this link shows a view of ' + st.files.length + ' file(s): ' + st.files.slice(0, 8).join(', ') +
				(st.files.length > 8 ? ', …' : '') + '. Open them (drop them here, or “Open files…”) to see it.');
	});
	window.addEventListener('hashchange', () => {
		const st = urlRead();
		if (!st || st.hash === urlLast) return;
		if (!M) { urlPending = st; return; }
		urlLast = st.hash;
		urlApply(st);
	});
	T.urlState = () => (M ? urlState() : '');

	/* ---- search: a generic list of searchable items ----
	 * searchable(kind, find): find(q, M) returns the items of that kind matching the lower-case
	 * text q: { label, detail, go(), exact } (go shows the item; exact: q names it whole, listed
	 * first). The box lists every kind's items in the Search tab; Enter goes to the first. A new
	 * kind is one searchable() call (locations, functions, coroutines, requests below). */
	const searchKinds = [];
	const SEARCH_MAX = 200; /* items listed per kind */
	let searchItems = [];
	let searchHits = null; /* Map lane -> Set of poll indices a function search found */
	function searchable(kind, find) { searchKinds.push({ kind, find }); }
	function runSearch() {
		searchItems = [];
		searchHits = null;
		if (searchText && M)
			for (const k of searchKinds) {
				let items = [];
				try {
					items = k.find(searchText, M) || [];
				} catch (e) {
					items = [];
				}
				for (const it of items.slice(0, SEARCH_MAX)) searchItems.push(Object.assign({ kind: k.kind }, it));
			}
		/* what the text names exactly (a coroutine's id, a function's whole name) first */
		searchItems = searchItems.filter((x) => x.exact).concat(searchItems.filter((x) => !x.exact));
		T.search = { q: searchText, items: searchItems.map((x) => ({ kind: x.kind, label: x.label, detail: x.detail || '' })) };
		const n = $('searchn');
		if (n) n.textContent = searchText ? searchItems.length + (searchItems.length === 1 ? ' match' : ' matches') + (searchItems.length ? ' ⏎' : '') : '';
	}
	function searchHtml() {
		if (!searchText) return '<i>Type in the search box: locations, functions, coroutines, requests (by path or id).</i>';
		if (!searchItems.length) return '<i>nothing matches “' + esc(searchText) + '”</i>';
		let h = '<table><tr><th>found</th><th>kind</th><th></th></tr>';
		searchItems.forEach((x, k) => {
			h += '<tr class="row hit" data-k="' + k + '"><td title="' + esc(x.label) + '">' + esc(x.label) + '</td><td>' + esc(x.kind) + '</td><td>' + esc(x.detail || '') + '</td></tr>';
		});
		return h + '</table>';
	}
	function searchGo(k) {
		const x = searchItems[k];
		if (!x) return;
		T.searchWent = { kind: x.kind, label: x.label };
		x.go();
		showTab('search');
		redraw();
	}
	T.searchGo = searchGo;
	document.addEventListener('click', (e) => {
		const tr = e.target.closest && e.target.closest('tr.hit');
		if (tr && M) searchGo(Number(tr.dataset.k));
	});
	$('search').addEventListener('keydown', (e) => {
		if (e.key !== 'Enter' || !M) return;
		e.preventDefault();
		if (searchItems.length) searchGo(0);
		else showTab('search');
	});
	/* shows poll i of lane li: its detail, the view around it, its lane scrolled into sight */
	function goPoll(li, i) {
		selectPoll(li, i, true);
		const p = M.lanes[li].polls, pad = (p.end[i] - p.start[i]) * 2 + 10000;
		setView(p.start[i] - pad, p.end[i] + pad);
		scrollToLane(li);
	}
	/* locations by name: go shows the location's polls only, at its longest poll */
	searchable('location', (q, m) => {
		const out = [];
		const byId = new Map(locStats.map((r) => [r.id, r]));
		for (const [id, r] of byId) {
			if (!nm(id).toLowerCase().includes(q)) continue;
			out.push({ label: nm(id), exact: nm(id).toLowerCase() === q, detail: r.n + ' polls, ' + fmtDur(r.total), go: () => {
				locFilter = id;
				T.locFilter = id;
				let best = null;
				m.lanes.forEach((l, li) => {
					for (let i = 0; i < l.polls.n; i++)
						if (locNameId(l.polls.loc[i]) === id && (!best || l.polls.end[i] - l.polls.start[i] > best.d)) best = { li, i, d: l.polls.end[i] - l.polls.start[i] };
				});
				if (best) goPoll(best.li, best.i);
			} });
		}
		return out;
	});
	/* functions in the CPU samples' stacks: the polls whose samples ran one are outlined; go
	 * shows the poll with the most of its time */
	searchable('function', (q, m) => {
		const match = new Uint8Array(m.names.length);
		let any = false;
		m.names.forEach((n, id) => { if (n.toLowerCase().includes(q)) { match[id] = 1; any = true; } });
		if (!any) return [];
		const fns = new Map(); /* name id -> { samples, polls: Map 'li,i' -> samples } */
		const hits = new Map();
		m.lanes.forEach((l, li) => {
			const s = l.samples, p = l.polls;
			for (let i = 0; i < s.n; i++) {
				const st = s.stack[i];
				if (st < 0) continue;
				let seen = null; /* (made only for a sample that matches: most do not) */
				for (let j = m.stackOff[st]; j < m.stackOff[st + 1]; j++) if (match[m.frames[j]]) (seen || (seen = new Set())).add(m.frames[j]);
				if (!seen) continue;
				const k = firstEndingAfter(p.end, p.n, s.t[i]);
				const inPoll = k < p.n && p.start[k] <= s.t[i];
				if (inPoll) {
					if (!hits.has(li)) hits.set(li, new Set());
					hits.get(li).add(k);
				}
				for (const id of seen) {
					let f = fns.get(id);
					if (!f) { f = { samples: 0, polls: new Map() }; fns.set(id, f); }
					f.samples++;
					if (inPoll) f.polls.set(li + ',' + k, (f.polls.get(li + ',' + k) || 0) + 1);
				}
			}
		});
		searchHits = hits.size ? hits : null;
		const out = [];
		for (const [id, f] of [...fns].sort((a, b) => b[1].samples - a[1].samples)) {
			let best = null;
			for (const [key, n] of f.polls) if (!best || n > best.n) best = { key, n };
			out.push({ label: nm(id), exact: nm(id).toLowerCase() === q, detail: f.samples + ' sample' + (f.samples === 1 ? '' : 's') + ' in ' + f.polls.size + ' poll' + (f.polls.size === 1 ? '' : 's'),
				go: () => { if (best) { const [li, i] = best.key.split(',').map(Number); goPoll(li, i); } } });
		}
		return out;
	});
	/* per process, each coroutine's first poll: Map co -> { li, i } (once per model) */
	let coFirst = null;
	function coFirstPolls(m) {
		if (coFirst && coFirst.m === m) return coFirst.by;
		const by = m.procs.map(() => new Map());
		m.lanes.forEach((l, li) => {
			const p = l.polls, f = by[l.proc];
			for (let i = 0; i < p.n; i++) {
				if (!p.co[i]) continue;
				const x = f.get(p.co[i]);
				if (!x || p.start[i] < m.lanes[x.li].polls.start[x.i]) f.set(p.co[i], { li, i });
			}
		});
		coFirst = { m, by };
		return by;
	}
	/* coroutines: by id (the whole number), or by the name of their spawn location (or, when
	 * no Spawn was recorded, of their first poll's); go shows its first poll, its life outlined */
	searchable('coroutine', (q, m) => {
		const out = [], num = /^#?\d+$/.test(q) ? Number(q.replace('#', '')) : NaN;
		const first = coFirstPolls(m);
		let total = 0;
		m.procs.forEach((P, pi) => {
			const seen = new Set();
			const consider = (co, loc) => {
				if (seen.has(co)) return;
				seen.add(co);
				const fp = first[pi].get(co);
				const locN = loc >= 0 ? locName(loc) : fp ? locName(m.lanes[fp.li].polls.loc[fp.i]) : '(unknown location)';
				if (num === num ? co !== num : !locN.toLowerCase().includes(q)) return;
				total++;
				if (out.length >= SEARCH_MAX) return;
				out.push({ label: 'coroutine ' + co + ' (' + locN + ')', exact: num === num, detail: 'pid ' + P.pid + (fp ? '' : ', no poll in the trace'),
					go: () => { if (fp) goPoll(fp.li, fp.i); } });
			};
			for (let k = 0; k < P.cos.id.length; k++) consider(P.cos.id[k], P.cos.loc[k]);
			for (const co of first[pi].keys()) consider(co, -1);
		});
		if (total > out.length) out.push({ label: '… ' + (total - out.length) + ' more coroutines', detail: 'narrow the search', go: () => {} });
		return out;
	});
	/* requests (D9_REQUESTS, the d9.h API): by their preview (method and path), or by id; the
	 * slowest first; go selects the request (its polls outlined) and shows its time */
	searchable('request', (q, m) => {
		const out = [], num = /^#?\d+$/.test(q) ? Number(q.replace('#', '')) : NaN;
		m.lanes.forEach((l, li) => {
			const r = l.requests;
			for (let k = 0; r && k < r.n; k++) {
				const name = r.name[k] >= 0 ? nm(r.name[k]) : '';
				if (num === num ? r.id[k] !== num : !name.toLowerCase().includes(q)) continue;
				out.push({ label: 'request ' + r.id[k] + (name ? ' ' + name : ''), exact: num === num, d: r.end[k] - r.start[k],
					detail: fmtDur(r.end[k] - r.start[k]) + ', pid ' + m.procs[l.proc].pid + (r.co[k] ? ', coroutine ' + r.co[k] : ''),
					go: () => {
						const pad = (r.end[k] - r.start[k]) * 2 + 10000;
						setView(r.start[k] - pad, r.end[k] + pad);
						selectRequest(li, k);
						scrollToLane(li);
					} });
			}
		});
		return out.sort((a, b) => b.d - a.d);
	});
})();
