/* diff.js: the differential flame graph of viewer/diff.html. Input: folded stacks with two counts,
 * "root;...;leaf usA usB" (d9-analyze diff --folded), from the file picker or from the JSON that
 * `d9-analyze diff --html` embeds (<script type="application/json" id="d9diff">: {a, b, unit, src,
 * polls_a, polls_b, lines: [[stack, a, b], ...]}). An icicle (callers on top): each frame as wide
 * as its time in B (after; A with "widths by A"), red where it grew, blue where it shrank, by how
 * much of its own time. "compare": A scaled per poll (as `d9-analyze diff` normalizes; the
 * default when the polls are known), to B's total (shares), or sums as they are. Click zooms
 * into a frame. Tests read window.__d9diff. Never fetches anything. */
'use strict';
(function () {
	const T = window.__d9diff = { ready: false, frames: [], zoomTo: null };
	const $ = (id) => document.getElementById(id);
	let root = null, zoom = null, meta = { a: 'A', b: 'B', unit: 'us' };

	/* the factor A's times are multiplied by before they are compared with B's */
	function scaleOf() {
		const m = $('norm').value;
		if (m === 'poll' && meta.polls_a > 0 && meta.polls_b > 0) return meta.polls_b / meta.polls_a;
		if (m === 'total' && root && root.a > 0) return root.b / root.a;
		return 1;
	}

	function node(name, parent) {
		return { name, a: 0, b: 0, kids: new Map(), parent };
	}
	/* lines: [[stack, a, b], ...] to the tree */
	function build(lines) {
		const r = node('all', null);
		for (const [stack, a, b] of lines) {
			let n = r;
			r.a += a;
			r.b += b;
			for (const f of stack.split(';')) {
				let k = n.kids.get(f);
				if (!k) n.kids.set(f, (k = node(f, n)));
				k.a += a;
				k.b += b;
				n = k;
			}
		}
		return r;
	}
	/* "stack a b" text to lines; malformed lines are counted, not fatal */
	function parse(text) {
		const lines = [];
		let bad = 0;
		for (const l of text.split('\n')) {
			const m = /^(.*) (\d+) (\d+)$/.exec(l.trimEnd());
			if (m) lines.push([m[1], Number(m[2]), Number(m[3])]);
			else if (l.trim()) bad++;
		}
		return { lines, bad };
	}
	const pct = (v, all) => (all > 0 ? ((100 * v) / all).toFixed(1) + '%' : '-');
	const fmt = (v) => (meta.unit === 'us' ? (v >= 1e6 ? (v / 1e6).toFixed(2) + ' s' : v >= 1e3 ? (v / 1e3).toFixed(1) + ' ms' : v + ' us') : String(v));

	function draw() {
		const box = $('flame');
		box.textContent = '';
		T.frames = [];
		if (!root) return;
		const byA = $('byA').checked;
		const scale = scaleOf();
		const W = box.clientWidth || 1000, H = 18;
		const width = (n) => (byA ? n.a * scale : n.b);
		const total = width(zoom);
		let depth = 0;
		/* the path from the root down to the zoomed frame stays on top, full width */
		const path = [];
		for (let n = zoom; n; n = n.parent) path.unshift(n);
		const frags = document.createDocumentFragment();
		function put(n, x, w, d) {
			const was = n.a * scale, now = n.b, big = Math.max(was, now);
			const rel = big > 0 ? (now - was) / big : 0; /* -1 (gone) .. 1 (new) */
			const div = document.createElement('div');
			const c = Math.round(235 - 150 * Math.abs(rel));
			div.style.background = rel > 0 ? 'rgb(255,' + c + ',' + c + ')' : rel < 0 ? 'rgb(' + c + ',' + c + ',255)' : 'rgb(235,235,235)';
			div.style.left = x + 'px';
			div.style.top = d * H + 'px';
			div.style.width = Math.max(w - 1, 1) + 'px';
			div.textContent = n.name;
			div.d9node = n;
			frags.appendChild(div);
			T.frames.push({ name: n.name, a: n.a, b: n.b, rel, x, w, depth: d });
			depth = Math.max(depth, d + 1);
		}
		path.forEach((n, i) => put(n, 0, W, i));
		function kids(n, x, d) {
			const ks = [...n.kids.values()].sort((p, q) => (p.name < q.name ? -1 : p.name > q.name ? 1 : 0));
			for (const k of ks) {
				const w = total > 0 ? (width(k) / total) * W : 0;
				if (w >= 1) {
					put(k, x, w, d);
					kids(k, x, d + 1);
				}
				x += w;
			}
		}
		kids(zoom, 0, path.length);
		box.style.height = depth * H + 'px';
		box.appendChild(frags);
		$('note').textContent = 'A: ' + fmt(root.a) + ', B: ' + fmt(root.b) + ' of ' + (meta.src || 'on') +
			'-CPU time. Widths: ' + (byA ? 'A (before)' : 'B (after)') + '; red grew, blue shrank' +
			(scale !== 1 ? ' (A scaled by ' + scale.toFixed(3) + ($('norm').value === 'poll' ? ': per poll, A ' + meta.polls_a + ' polls, B ' + meta.polls_b : ': shares of the total') + ')' : '') + '. Click a frame to zoom.';
	}
	function load(lines, m, bad) {
		meta = Object.assign({ a: 'A', b: 'B', unit: 'us' }, m || {});
		if (!(meta.polls_a > 0 && meta.polls_b > 0) && $('norm').value === 'poll') $('norm').value = 'none';
		root = zoom = build(lines);
		$('sides').textContent = 'A: ' + meta.a + '  vs  B: ' + meta.b + (bad ? '  (' + bad + ' malformed lines left out)' : '');
		draw();
		T.ready = true;
	}
	T.zoomTo = (name) => {
		const find = (n) => {
			if (n.name === name) return n;
			for (const k of n.kids.values()) {
				const f = find(k);
				if (f) return f;
			}
			return null;
		};
		const f = root && find(root);
		if (f) {
			zoom = f;
			draw();
		}
		return !!f;
	};

	$('flame').addEventListener('click', (e) => {
		const n = e.target.d9node;
		if (!n) return;
		zoom = n === zoom && n.parent ? n.parent : n;
		draw();
	});
	$('flame').addEventListener('mousemove', (e) => {
		const n = e.target.d9node, tip = $('tip');
		if (!n) {
			tip.style.display = 'none';
			return;
		}
		const scale = scaleOf();
		tip.textContent = n.name + '\nA: ' + fmt(n.a) + ' (' + pct(n.a, root.a) + ' of A)\nB: ' + fmt(n.b) + ' (' +
			pct(n.b, root.b) + ' of B)\nchange: ' + (n.b - n.a * scale >= 0 ? '+' : '-') + fmt(Math.round(Math.abs(n.b - n.a * scale))) +
			(scale !== 1 ? ' (A scaled)' : '');
		tip.style.display = 'block';
		tip.style.left = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 4) + 'px';
		tip.style.top = e.clientY + 14 + 'px';
	});
	$('flame').addEventListener('mouseleave', () => ($('tip').style.display = 'none'));
	$('byA').addEventListener('change', draw);
	$('norm').addEventListener('change', draw);
	$('top').addEventListener('click', () => {
		zoom = root;
		draw();
	});
	window.addEventListener('resize', draw);
	$('pick').addEventListener('change', async () => {
		const f = $('pick').files[0];
		if (!f) return;
		const { lines, bad } = parse(await f.text());
		load(lines, { a: f.name + ' column 1', b: f.name + ' column 2' }, bad);
	});
	const data = $('d9diff');
	if (data) {
		const d = JSON.parse(data.textContent);
		$('pick').style.display = 'none';
		load(d.lines, d);
	} else {
		T.ready = true;
	}
})();
