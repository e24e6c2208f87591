/* model.js: turns decoded segments into the viewer's trace model: one lane per thread (grouped by
 * process) holding its polls, parks, blocking calls, CPU samples, wakes and drops in typed
 * arrays (columns, not one object per event: 10 million events must fit in a tab), plus the
 * names of locations and stack frames. Runs in the Web Worker; needs d9_decode_module. Names
 * come from what the page holds: the names `d9-analyze html` embedded (those `summary` shows),
 * SpawnLocation name strings and Symbol records, else `module+0xoffset` from the Module
 * definitions, else the address (no symbol files here); those left unnamed are counted.
 * CpuSamples keep their weight (the time each stands for, NaN: unknown in older traces), Unparks
 * their cpu_ns / sched_wait_ns (NaN: unknown, never 0), SchedDelays (code 14, when the schema
 * names it so: a call that was slow without waiting off CPU) go to their own column.
 * Never pairs two events across a gap in the data (README.md, "Gaps"; the same rule as
 * analyze/trace.h, "Pairing across gaps"): such polls, parks, loop turns and scheduling delays
 * are counted as unknown, not drawn. Wakes are paired with polls in time order across the threads
 * of a process (pairWakes, at the end: another thread's chunk can come after the poll its Wake led
 * to), as analyze/wakes.c does. */
function d9_model_module(root) {
	'use strict';
	const D = root.D9Decode;
	const SAFE = 9007199254740991;
	const WAKE_KINDS = ['other', 'fd', 'timer', 'cond', 'mutex', 'join', 'interrupt', 'spawn'];
	const CALLS = ['other', 'epoll_wait', 'epoll_pwait', 'epoll_pwait2', 'poll', 'ppoll', 'select', 'pselect'];
	const FD_KINDS = ['none', 'file', 'socket', 'pipe', 'char', 'other'];
	const DROP_REASONS = ['other', 'buffers_full', 'write_error', 'samples_lost', 'segment_deleted'];
	const DROP_SAMPLES_LOST = 3; /* loses only CPU samples: not a gap */
	/* problems that lose nothing already decoded (records of a newer writer, skipped whole) */
	const NO_GAP_PROBLEMS = new Set(['unknown_chunk', 'unknown_event', 'unknown_def']);
	/* the wake of a poll whose scheduling delay is unknown (a gap since the wake): kind -2 */
	const UNKNOWN_WAKE = { t: NaN, kind: -2, waker: 0 };
	const SCHED_DELAY = 14; /* SchedDelay: schema-described (FORMAT.md, "SchedDelay") */
	const SD_NAME = 'SchedDelay';
	/* RequestBegin / RequestEnd: schema-described (FORMAT.md, "Requests") */
	const REQ_BEGIN = 16, REQ_END = 17, REQ_NAMES = { 16: 'RequestBegin', 17: 'RequestEnd' };
	/* an unsigned value that may be unknown (null: a `+1` field holding 0; 2^64-1): NaN */
	const orNaN = (v) => (v === null || v === undefined || typeof v === 'bigint' ? NaN : v);

	/* a growable column of numbers */
	class Col {
		constructor(T, cap) {
			this.T = T;
			this.a = new T(cap || 64);
			this.n = 0;
		}
		push(v) {
			if (this.n === this.a.length) {
				const b = new this.T(this.a.length * 2);
				b.set(this.a);
				this.a = b;
			}
			this.a[this.n++] = v;
		}
		done() { /* the filled part, as its own buffer (transferable) */
			return this.a.slice(0, this.n);
		}
	}
	function table(spec) {
		const t = { n: 0, cols: {} };
		for (const k in spec)
			t.cols[k] = new Col(spec[k]);
		return t;
	}
	const num = (v) => (typeof v === 'bigint' ? Number(v) : v);
	const latin = new TextDecoder('utf-8');
	const text = (b) => latin.decode(D.cutNul(b));
	const hexAddr = (v) => '0x' + (typeof v === 'bigint' ? v : BigInt(Math.max(0, num(v)))).toString(16);

	/* ---- application events (include/d9.h; FORMAT.md "Application events") ----
	 * Marks and custom events become ticks on their thread's lane, values one plotted track per
	 * name and process. At most APP_MAX events are kept (a tab's memory); more are counted. */
	const APP_MAX = 200000;
	const f64 = new DataView(new ArrayBuffer(8));
	const bitsToF64 = (v) => { f64.setBigUint64(0, BigInt.asUintN(64, BigInt(v)), true); return f64.getFloat64(0, true); };
	/* a CustomSchema's fields: [{ type, name }], null when malformed (the decoder checked the
	 * record's length only) */
	function parseSchemaFields(b) {
		const out = [];
		let p = 0;
		while (p < b.length) {
			const type = String.fromCharCode(b[p++]);
			if (p >= b.length || b[p] >= 0x80 || !'uifsb'.includes(type)) return null;
			const n = b[p++];
			if (n < 1 || n > 64 || p + n > b.length || out.length === 32) return null;
			out.push({ type, name: latin.decode(b.subarray(p, p + n)) });
			p += n;
		}
		return out;
	}
	/* a CustomEvent's data as "name=value ..." text, null when it does not match its schema */
	function customText(fields, b) {
		let p = 0;
		const varint = () => {
			let v = 0n, sh = 0n;
			for (;;) {
				if (p >= b.length || sh > 63n) return null;
				const x = b[p++];
				v |= BigInt(x & 0x7f) << sh;
				if (x < 0x80) return v;
				sh += 7n;
			}
		};
		const parts = [];
		for (const f of fields) {
			let s;
			if (f.type === 'u' || f.type === 'i') {
				const v = varint();
				if (v === null) return null;
				s = f.type === 'u' ? v.toString() : ((v >> 1n) ^ -(v & 1n)).toString();
			} else if (f.type === 'f') {
				if (p + 8 > b.length) return null;
				let v = 0n;
				for (let i = 7; i >= 0; i--) v = (v << 8n) | BigInt(b[p + i]);
				p += 8;
				s = String(bitsToF64(v));
			} else {
				const n = varint();
				if (n === null || n > 4096n || p + Number(n) > b.length) return null;
				const d = b.subarray(p, p + Number(n));
				p += Number(n);
				s = f.type === 's' ? JSON.stringify(latin.decode(d)) : Array.from(d, (x) => x.toString(16).padStart(2, '0')).join('');
			}
			parts.push(f.name + '=' + s);
		}
		return p === b.length ? parts.join(' ') : null;
	}
	function appEvent(B, s, L, lane, t, ev, strings, cschemas, sink) {
		const fv = ev.f;
		let e;
		if (ev.code === 12) {
			const cs = cschemas.get(num(fv[0]));
			const txt = cs && cs.fields ? customText(cs.fields, ev.fdata[1] || new Uint8Array(0)) : null;
			if (txt === null) {
				sink.problem('bad_event', ev.offset, 'CustomEvent ' + (cs ? 'payload does not match its schema' : 'of an undefined CustomSchema') + ' at offset ' + ev.offset);
				return;
			}
			const nm = strings.get(num(cs.name));
			e = { type: 2, name: nm ? text(nm) : '?', text: txt, v: NaN, kind: 0 };
		} else {
			const want = ev.code === 18 ? 'Mark' : 'Value';
			if (text(ev.schema.name) !== want || ev.schema.fields.length < (ev.code === 18 ? 1 : 3)) return;
			const nm = strings.get(num(fv[0]));
			const kind = ev.code === 18 ? 0 : num(fv[1]);
			const v = ev.code === 18 ? NaN : kind === 2 ? bitsToF64(fv[2]) : Number(fv[2]);
			e = { type: ev.code === 18 ? 0 : 1, name: nm ? text(nm) : '?', text: '', v, kind };
		}
		if (B.app.length >= APP_MAX) { B.appLost++; return; }
		e.proc = s.proc; e.lane = lane; e.t = t;
		L.nApp = (L.nApp || 0) + 1;
		B.app.push(e);
	}

	/* Builder: feed segments (any order) with add(name, u8), then finish(). */
	class Builder {
		/* opts.names: the names `d9-analyze html` embedded (analyze/cmd-html.c, put_names) */
		constructor(opts) {
			this.names = [];
			this.nameIds = new Map();
			this.procs = [];
			this.procByKey = new Map();
			this.lanes = [];
			this.files = [];
			this.problems = [];
			this.segs = [];
			this.locs = []; /* global location: { proc, addr, nameStr (id or -1), fn addr } */
			this.locName = []; /* resolved at segment end: name id */
			this.locAddr = [];
			this.stackFrames = []; /* global stack index -> array of name ids, innermost first */
			this.events = 0;
			this.t0 = null; /* BigInt: realtime ns of time 0 */
			/* pairs left out because a gap lies between their ends (README.md, "Gaps") */
			this.unknown = { polls: 0, parks: 0, turns: 0, delays: 0, first: [] };
			this.seqGaps = 0;
			this.wideGaps = [];
			this.app = []; /* application events (appEvent) */
			this.appLost = 0;
			this.initNaming(opts && opts.names);
		}
		/* names from the report, by process key (as procByKey's), and the count of addresses
		 * left without a name (README.md, "Viewer", "Names") */
		initNaming(emb) {
			this.ext = null;
			this.naming = { embedded: false, unnamedLocs: 0, unnamedFrames: 0, analyzerUnnamed: 0, examples: [], seen: new Set() };
			if (!emb || !Array.isArray(emb.procs)) return;
			this.ext = new Map();
			this.naming.embedded = true;
			for (const p of emb.procs) {
				const m = (o) => new Map(Object.entries(o || {}).filter(([, v]) => Array.isArray(v) && v.length));
				this.ext.set(p.pid + '/' + p.hostname + '/' + p.boot_id, { addrs: m(p.addrs), returns: m(p.returns), unnamed: Number(p.unnamed) || 0 });
			}
		}
		/* the analyzer's names of a (the report's), or null; a location gets the real function
		 * with its file:line as `summary` names it, a frame each function without file:line (a
		 * flame graph groups by function, as with Symbol records) */
		extName(P, a, isReturn) {
			if (!P.ext) return null;
			const e = (isReturn ? P.ext.returns : P.ext.addrs).get(a.toString(16));
			if (!e) return null;
			return isReturn ? e.map((n) => String(n).replace(/ \([^()]*:\d+\)$/, '')) : [String(e[e.length - 1])];
		}
		noteUnnamed(P, a, isReturn, name) {
			const N = this.naming, k = P.key + (isReturn ? '/r' : '/a') + a;
			if (/^(linux-vdso|\[vdso\])/.test(name)) return; /* the kernel's page: nobody names it */
			if (N.seen.has(k)) return;
			N.seen.add(k);
			if (isReturn) N.unnamedFrames++;
			else N.unnamedLocs++;
			if (N.examples.length < 3) N.examples.push(name);
		}
		name(s) {
			let id = this.nameIds.get(s);
			if (id === undefined) {
				id = this.names.length;
				this.names.push(s);
				this.nameIds.set(s, id);
			}
			return id;
		}
		/* first pass: the header only, to order segments and pick time 0 */
		add(name, u8, note) {
			const f = { name, size: u8.length, events: 0, status: 'ok', problems: [], note: note || null };
			this.files.push(f);
			let header = null;
			const res = D.decodeSegment(u8.subarray(0, Math.min(u8.length, 1 << 16)), {
				header(h) { header = h; }, chunk() { return false; },
			});
			if (!header) {
				const full = D.decodeSegment(u8, { chunk() { return false; } });
				f.status = 'unreadable';
				f.problems.push({ kind: 'unreadable', offset: 0, message: full.unreadable || res.unreadable || 'unreadable' });
				this.problems.push({ file: name, kind: 'unreadable', offset: 0, message: f.problems[0].message });
				return;
			}
			const key = header.pid + '/' + text(header.hostname) + '/' + text(header.boot_id);
			let p = this.procByKey.get(key);
			if (p === undefined) {
				p = this.procs.length;
				this.procs.push({ key, pid: header.pid, process: text(header.process), hostname: text(header.hostname),
					cmdline: text(header.cmdline).replace(/\0/g, ' ').trim(), segments: 0, threads: new Map(),
					syms: new Map(), symRanges: [], modules: [], xw: [], cos: new Map(),
					realMinusMono: BigInt(header.anchor_realtime_ns) - BigInt(header.anchor_mono_ns),
					/* gaps (see gap()): those of every thread, all of them, the latest time one
					 * reached; the latest event time of the segments read; the last segment_seq */
					wideGaps: 0, gaps: 0, gapT: -Infinity, lastT: -Infinity, lastSeq: -1 });
				this.procByKey.set(key, p);
				this.procs[p].ext = this.ext ? this.ext.get(key) || null : null;
				if (this.procs[p].ext) this.naming.analyzerUnnamed += this.procs[p].ext.unnamed;
			}
			this.procs[p].segments++;
			const start = BigInt(header.anchor_realtime_ns);
			if (this.t0 === null || start < this.t0)
				this.t0 = start;
			this.segs.push({ file: f, u8, proc: p, seq: header.segment_seq, h: header });
		}
		lane(p, tid, worker) {
			const P = this.procs[p];
			let l = P.threads.get(tid);
			if (l === undefined) {
				l = this.lanes.length;
				P.threads.set(tid, l);
				this.lanes.push({
					proc: p, tid, worker: 0, name: '',
					polls: table({ start: Float64Array, end: Float64Array, co: Float64Array, loc: Int32Array,
						wakeT: Float64Array, wakeKind: Int8Array, waker: Float64Array, open: Uint8Array }),
					/* cpu, sw: the cpu_ns / sched_wait_ns of the Unpark that ended it (NaN: unknown) */
					parks: table({ start: Float64Array, end: Float64Array, call: Uint8Array, ready: Float64Array, cpu: Float64Array, sw: Float64Array }),
					blocks: table({ start: Float64Array, end: Float64Array, call: Int32Array, stack: Int32Array, co: Float64Array, fd: Uint8Array }),
					/* SchedDelay: a slow call that did not wait off CPU (preempted); wait: its
					 * sched_wait_ns, NaN unknown */
					preempted: table({ start: Float64Array, end: Float64Array, call: Int32Array, co: Float64Array, fd: Uint8Array, wait: Float64Array }),
					/* requests begun on this thread (FORMAT.md, "Requests"): end is the response's
					 * last write; name the preview's name id (-1 none); flags RequestEnd's */
					requests: table({ start: Float64Array, end: Float64Array, co: Float64Array, fd: Float64Array, flags: Uint16Array, name: Int32Array, count: Float64Array, bin: Float64Array, bout: Float64Array, id: Float64Array }),
					/* w: the time the sample stands for, ns (NaN: unknown, an older trace) */
					samples: table({ t: Float64Array, stack: Int32Array, source: Uint8Array, co: Float64Array, w: Float64Array }),
					wakes: table({ t: Float64Array, woken: Float64Array, waker: Float64Array, kind: Uint8Array }),
					drops: table({ t: Float64Array, count: Float64Array, reason: Uint8Array }),
					queue: table({ t: Float64Array, runnable: Float64Array }),
					openPoll: null, openPark: null, last: 0, first: Infinity,
					turnStart: NaN, turnMark: 0, /* the open loop turn (Unpark -> Park), NaN: none */
					turns: table({ start: Float64Array, end: Float64Array }),
					/* the Unparks that carried statistics: each covers the time since the
					 * previous one (FORMAT.md, "Unpark statistics"); NaN: that one unknown */
					readings: table({ t: Float64Array, cpu: Float64Array, sw: Float64Array }),
					gaps: 0, /* this thread's own gaps: its Dropped events */
					endT: -Infinity, endMark: -1, /* its last event that is not a Dropped, and the gap mark there */
				});
			}
			const L = this.lanes[l];
			if (worker && !L.worker)
				L.worker = worker;
			return l;
		}
		/* second pass: every segment, in (process, segment_seq) order */
		decodeAll(progress) {
			this.segs.sort((a, b) => a.proc - b.proc || a.seq - b.seq);
			const T0 = this.t0;
			let done = 0;
			const total = this.segs.reduce((s, x) => s + x.u8.length, 0);
			for (const s of this.segs) {
				const P = this.procs[s.proc];
				/* a segment missing between this one and the process's previous one */
				if (P.lastSeq >= 0 && s.seq !== P.lastSeq + 1) {
					this.seqGaps++;
					this.gap(P, null, P.lastT, 'segment(s) missing before ' + s.file.name);
				}
				P.lastSeq = s.seq;
				this.decodeOne(s, T0);
				if (s.tLast > P.lastT)
					P.lastT = s.tLast;
				done += s.u8.length;
				if (progress)
					progress(done, total, this.events);
				s.u8 = null;
			}
		}
		/* Counts a gap at time t (rel ns) of lane L, or of every thread of process P when L is
		 * null. A pair opened before a gap and closed after it is unknown: its opening event
		 * keeps the mark (lane gaps + process-wide gaps), its closing one compares it. */
		gap(P, L, t, why) {
			if (L) {
				L.gaps++;
			} else {
				P.wideGaps++;
				/* where the timeline marks it (the first 1000; a damaged file may hold more) */
				if (this.wideGaps.length < 1000)
					this.wideGaps.push({ proc: this.procs.indexOf(P), t, why });
			}
			P.gaps++;
			if (t > P.gapT)
				P.gapT = t;
		}
		noteUnknown(kind, lane, t) {
			this.unknown[kind]++;
			if (this.unknown.first.length < 1000)
				this.unknown.first.push({ kind, lane, t });
		}
		decodeOne(s, T0) {
			const B = this, P = this.procs[s.proc], h = s.h, f = s.file;
			const tps = num(h.ticks_per_sec), shift = h.time_shift;
			/* rel ns (from T0, realtime) = time * mul + add; doubles: well under 1 ns error in real traces */
			const mul = Math.pow(2, shift) * 1e9 / tps;
			const add = num(h.anchor_mono_ns) - num(h.anchor_ticks) * 1e9 / tps + Number(P.realMinusMono - T0);
			s.tFirst = Infinity;
			s.tLast = -Infinity;
			const strings = new Map(), locs = new Map(), stacks = new Map(), coLocs = new Map(), mods = new Map();
			const cschemas = new Map(); /* CustomSchema id -> { name, fields } */
			const segLocs = [], segStacks = [];
			const chunkLane = { lane: -1, L: null };
			const sdSchema = new WeakMap(); /* schema entry of code 14 -> it describes a SchedDelay */
			const isSchedDelay = (sc) => {
				let v = sdSchema.get(sc);
				if (v === undefined) {
					v = text(sc.name) === SD_NAME && sc.fields.length >= 4;
					sdSchema.set(sc, v);
				}
				return v;
			};
			let nev = 0;
			let trailer = null; /* the segment's TRAILER (end_time: FORMAT.md section 11) */
			const sink = {
				trailer(off, t) { trailer = t; },
				problem(kind, offset, message) {
					f.problems.push({ kind, offset, message });
					B.problems.push({ file: f.name, kind, offset, message });
					/* whatever the damage held is lost, for any thread of the process */
					if (!NO_GAP_PROBLEMS.has(kind))
						B.gap(P, null, Math.max(P.lastT, s.tLast), 'damaged data in ' + f.name);
				},
				def(cp, d) {
					switch (d.kind) {
					case 1: strings.set(num(d.id), d.value); break;
					case 2: {
						const g = B.locs.length;
						B.locs.push({ proc: s.proc, fn: d.function_addr, name: d.name, module: d.module });
						segLocs.push(g);
						locs.set(num(d.id), g);
						break;
					}
					case 3: {
						const g = B.stackFrames.length;
						B.stackFrames.push(d.frames);
						segStacks.push(g);
						stacks.set(num(d.id), g);
						break;
					}
					case 4: mods.set(num(d.id), d); break;
					case 5: P.symPending = P.symPending || []; P.symPending.push(d); break;
					case 6: {
						const l = B.lane(s.proc, num(d.id), num(d.worker));
						if (d.name) B.lanes[l].nameId = d.name, B.lanes[l].nameSeg = strings;
						break;
					}
					case 9:
						cschemas.set(num(d.id), { name: d.name, fields: parseSchemaFields(d.fields) });
						break;
					case 8:
						if (d.location) coLocs.set(num(d.id), d.location);
						if (!P.cos.has(num(d.id)))
							P.cos.set(num(d.id), { parent: num(d.parent), loc: -1, locId: d.location, segLocs: locs });
						break;
					}
				},
				chunk(ch) {
					chunkLane.lane = B.lane(s.proc, ch.tid, ch.worker);
					chunkLane.L = B.lanes[chunkLane.lane];
				},
				event(ev) {
					nev++;
					const L = chunkLane.L, fv = ev.f;
					const t = num(ev.time) * mul + add;
					if (t < s.tFirst) s.tFirst = t;
					if (t > s.tLast) s.tLast = t;
					if (t > L.last) L.last = t;
					if (t < L.first) L.first = t;
					const mark = L.gaps + P.wideGaps;
					if (ev.code !== 11) {
						L.endT = t;
						L.endMark = mark;
					}
					switch (ev.code) {
					case 1: { /* PollStart */
						if (L.openPoll) closePoll(L, t, 1, mark);
						let loc = fv[1] ? locs.get(num(fv[1])) : undefined;
						const co = num(fv[0]);
						if (loc === undefined && coLocs.has(co)) loc = locs.get(num(coLocs.get(co)));
						/* its wake: pairWakes, in time order (ps.row: its row once written) */
						const ps = { t, seq: P.xw.length, co, lane: chunkLane.lane, g: P.gaps, gT: P.gapT, row: -1 };
						P.xw.push(ps);
						L.openPoll = { start: t, co, loc: loc === undefined ? -1 : loc, ps, mark };
						break;
					}
					case 2: /* PollEnd */
						if (L.openPoll) closePoll(L, t, 0, mark);
						break;
					case 3: /* Park */
						if (L.turnStart === L.turnStart) { /* not NaN: a turn is open */
							if (L.turnMark === mark) {
								const k = L.turns.cols;
								k.start.push(L.turnStart); k.end.push(t);
								L.turns.n++;
							} else {
								B.noteUnknown('turns', chunkLane.lane, L.turnStart);
							}
							L.turnStart = NaN;
						}
						L.openPark = { start: t, call: num(fv[0]), mark };
						break;
					case 4: { /* Unpark */
						const cpu = orNaN(fv[1]), sw = orNaN(fv[2]);
						if (L.openPark) {
							if (L.openPark.mark === mark) {
								const k = L.parks.cols;
								k.start.push(L.openPark.start); k.end.push(t); k.call.push(L.openPark.call); k.ready.push(num(fv[0]));
								k.cpu.push(cpu); k.sw.push(sw);
								L.parks.n++;
							} else {
								B.noteUnknown('parks', chunkLane.lane, L.openPark.start);
							}
							L.openPark = null;
						}
						if (cpu === cpu || sw === sw) {
							const k = L.readings.cols;
							k.t.push(t); k.cpu.push(cpu); k.sw.push(sw);
							L.readings.n++;
						}
						L.turnStart = t;
						L.turnMark = mark;
						break;
					}
					case 5: { /* Wake */
						const woken = num(fv[0]), kind = num(fv[2]);
						const k = L.wakes.cols;
						k.t.push(t); k.woken.push(woken); k.waker.push(num(fv[1])); k.kind.push(kind);
						L.wakes.n++;
						/* timers: the delay counts from the deadline (the Wake's object, in units) */
						const at = kind === 2 ? t + num(fv[3]) * mul : t;
						P.xw.push({ t, seq: P.xw.length, wake: { t: at, kind, waker: num(fv[1]) }, co: woken, g: P.gaps, gT: P.gapT });
						break;
					}
					case 6: { /* Spawn */
						const co = num(fv[0]);
						const c = P.cos.get(co) || {};
						c.parent = num(fv[1]);
						c.spawnT = t;
						if (fv[2]) { c.locId = fv[2]; c.segLocs = locs; }
						P.cos.set(co, c);
						break;
					}
					case 7: { /* CoroutineExit */
						const c = P.cos.get(num(fv[0])) || {};
						c.exitT = t;
						P.cos.set(num(fv[0]), c);
						break;
					}
					case 8: {
						const k = L.queue.cols;
						k.t.push(t); k.runnable.push(num(fv[0]));
						L.queue.n++;
						break;
					}
					case 9: { /* BlockingCall: the event time is when the call returned */
						const k = L.blocks.cols;
						const dur = num(fv[3]);
						const cs = strings.get(num(fv[1]));
						k.start.push(t - dur); k.end.push(t); k.call.push(B.name(cs ? text(cs) : '?'));
						const st = fv[4] ? stacks.get(num(fv[4])) : undefined;
						k.stack.push(st === undefined ? -1 : st); k.co.push(num(fv[0])); k.fd.push(num(fv[2]));
						L.blocks.n++;
						break;
					}
					case 10: { /* CpuSample */
						const k = L.samples.cols;
						const st = fv[2] ? stacks.get(num(fv[2])) : undefined;
						k.t.push(t); k.stack.push(st === undefined ? -1 : st); k.source.push(num(fv[1])); k.co.push(num(fv[0]));
						k.w.push(orNaN(fv[4]));
						L.samples.n++;
						break;
					}
					case SCHED_DELAY: { /* SchedDelay: the event time is when the call returned */
						if (!isSchedDelay(ev.schema))
							break;
						const k = L.preempted.cols;
						const dur = num(fv[3]);
						const cs = strings.get(num(fv[1]));
						k.start.push(t - dur); k.end.push(t); k.call.push(B.name(cs ? text(cs) : '?'));
						k.co.push(num(fv[0])); k.fd.push(num(fv[2])); k.wait.push(orNaN(fv[4]));
						L.preempted.n++;
						break;
					}
					case REQ_BEGIN:
					case REQ_END:
						B.request(P, chunkLane.lane, ev, t, strings, mark);
						break;
					case 11: {
						const k = L.drops.cols;
						k.t.push(t); k.count.push(num(fv[0])); k.reason.push(num(fv[1]));
						L.drops.n++;
						/* events of this thread were lost before this one (thread 0: the writer's
						 * count for threads it could not tell apart, so all of them) */
						if (num(fv[1]) !== DROP_SAMPLES_LOST)
							B.gap(P, L.tid ? L : null, t, 'events dropped (' + (DROP_REASONS[num(fv[1])] || num(fv[1])) + ')');
						break;
					}
					case 12: case 18: case 19: /* CustomEvent, Mark, Value */
						appEvent(B, s, L, chunkLane.lane, t, ev, strings, cschemas, sink);
						break;
					}
				},
			};
			/* the open poll of L ends at t (its PollEnd, or the next PollStart: open 1); one
			 * with a gap between its ends is unknown, not drawn */
			function closePoll(L, t, open, mark) {
				const o = L.openPoll, k = L.polls.cols;
				if (o.mark !== mark) {
					B.noteUnknown('polls', chunkLane.lane, o.start);
					L.openPoll = null;
					return;
				}
				o.ps.row = L.polls.n;
				k.start.push(o.start); k.end.push(t); k.co.push(o.co); k.loc.push(o.loc);
				k.wakeT.push(NaN); k.wakeKind.push(-1); k.waker.push(0);
				k.open.push(open);
				L.polls.n++;
				L.openPoll = null;
			}
			const res = D.decodeSegment(s.u8, sink);
			f.events = nev;
			this.events += nev;
			if (res.unreadable) {
				f.status = 'unreadable';
				this.gap(P, null, Math.max(P.lastT, s.tLast), f.name + ' unreadable');
				return;
			}
			const st = res.stats;
			if (st.truncated) f.status = 'truncated';
			else if (st.corrupt_chunks || st.bad_events || st.bad_defs) f.status = 'damaged';
			else if (!st.sealed) f.status = 'not sealed';
			if (!st.sealed) {
				/* Without a trailer the segment's writer stopped before sealing it (a crash, a
				 * full disk) or is still writing it: a page cannot tell which (d9-analyze can,
				 * for a live process on its host). What came after its last chunk is unknown:
				 * nothing pairs across its end, on any thread. */
				const msg = 'no trailer: the segment was not sealed (its writer stopped, or it is still being written)';
				f.problems.push({ kind: 'not_sealed', offset: 0, message: msg });
				this.problems.push({ file: f.name, kind: 'not_sealed', offset: 0, message: msg });
				f.sealed = false;
				this.gap(P, null, Math.max(P.lastT, s.tLast), 'end of ' + f.name + ' (not sealed)');
			}
			f.stats = st;
			/* sealed at its process's end (flag 2) or a flight dump's window end (flag 4): its
			 * threads' open turn, park and poll end there (a window: the park alone), at the
			 * process's last event if that is later, as d9-analyze ends them */
			const tf = trailer ? Number(trailer.flags) : 0;
			if (st.sealed && f.status !== 'damaged' && f.status !== 'truncated' && (tf & 6) &&
				trailer.end_time !== undefined) {
				const tEnd = Math.max(num(trailer.end_time) * mul + add, s.tLast);
				const ended = (tf & 2) !== 0;
				for (const l of P.threads.values()) {
					const L = this.lanes[l], mark = L.gaps + P.wideGaps;
					if (ended && L.openPoll) {
						chunkLane.lane = l;
						closePoll(L, tEnd, 0, mark);
					}
					if (ended && L.turnStart === L.turnStart) {
						if (L.turnMark === mark) {
							L.turns.cols.start.push(L.turnStart); L.turns.cols.end.push(tEnd);
							L.turns.n++;
						}
						L.turnStart = NaN;
					}
					if (L.openPark && L.openPark.mark === mark) {
						const k = L.parks.cols;
						k.start.push(L.openPark.start); k.end.push(tEnd); k.call.push(L.openPark.call);
						k.ready.push(NaN); k.cpu.push(NaN); k.sw.push(NaN);
						L.parks.n++;
						L.openPark = null;
					}
					if (tEnd > L.last) L.last = tEnd;
				}
				if (tEnd > s.tLast) s.tLast = tEnd;
			}
			/* names, now that the whole segment (Symbol records included) is read */
			if (P.symPending) {
				for (const d of P.symPending) {
					const fnb = strings.get(num(d.function));
					if (!fnb || !fnb.length) continue;
					const file = d.file ? strings.get(num(d.file)) : null;
					const start = num(d.start), len = num(d.len);
					const rec = { start, len, depth: num(d.inline_depth), fn: text(fnb), file: file ? text(file).replace(/^.*\//, '') : '', line: num(d.line) };
					if (len === 1) {
						const a = P.syms.get(start);
						if (!a) P.syms.set(start, [rec]);
						else if (!a.some((r) => r.depth === rec.depth)) a.push(rec);
					} else {
						P.symRanges.push(rec);
						P.symSorted = false;
					}
				}
				P.symPending = null;
			}
			for (const [, m] of mods) {
				const pb = strings.get(num(m.path));
				P.modules.push({ path: pb ? text(pb) : '?', start: num(m.start), end: num(m.end), offset: num(m.offset) });
			}
			for (const g of segLocs) {
				const l = this.locs[g];
				const nb = l.name ? strings.get(num(l.name)) : null;
				const nm = nb && nb.length ? text(nb) : this.addrName(P, num(l.fn), false)[0];
				this.locName[g] = this.name(nm);
				this.locAddr[g] = hexAddr(l.fn);
			}
			for (const g of segStacks) {
				const out = [];
				this.stackFrames[g].forEach((a, i) => {
					for (const n of this.addrName(P, num(a), true))
						out.push(this.name(n));
				});
				this.stackFrames[g] = out;
			}
			for (const [, c] of P.cos) {
				if (c.loc === -1 || c.loc === undefined) {
					const g = c.locId && c.segLocs ? c.segLocs.get(num(c.locId)) : undefined;
					if (g !== undefined) c.loc = g;
				}
			}
			for (const [, l] of P.threads) {
				const L = this.lanes[l];
				if (L.nameSeg === strings && L.nameId) {
					const b = strings.get(num(L.nameId));
					if (b) L.name = text(b);
				}
			}
		}
		/* names of one address: innermost first (inlined functions expanded) */
		addrName(P, a, isReturn) {
			const ext = this.extName(P, a, isReturn);
			if (ext) return ext;
			const look = isReturn ? a - 1 : a;
			let recs = P.syms.get(look) || (isReturn ? P.syms.get(a) : null);
			if (!recs && P.symRanges.length) {
				if (!P.symSorted) {
					P.symRanges.sort((x, y) => x.start - y.start);
					P.symSorted = true;
				}
				recs = P.symRanges.filter((r) => look >= r.start && look < r.start + r.len);
				if (!recs.length) recs = null;
			}
			if (recs) {
				return recs.slice().sort((x, y) => y.depth - x.depth).map((r) => r.fn);
			}
			let out = ['0x' + a.toString(16)];
			for (const m of P.modules) {
				if (a >= m.start && a < m.end) {
					out = [m.path.replace(/^.*\//, '') + '+0x' + (a - m.start + m.offset).toString(16)];
					break;
				}
			}
			this.noteUnnamed(P, a, isReturn, out[0]);
			return out;
		}
		/* Each PollStart's wake: the coroutine's first Wake since its previous PollStart, in time
		 * order within the process (equal times: decode order). A gap of any thread between the
		 * two arrivals, or one counted before the later arrival that reached past the wake: its
		 * real first poll may be lost, so the delay is unknown (analyze/wakes.c, the same rule).
		 * Returns, by lane, the [row, wake] of the polls written. */
		pairWakes() {
			const byLane = new Map();
			for (const P of this.procs) {
				const xw = P.xw, pending = new Map();
				xw.sort((a, b) => a.t - b.t || a.seq - b.seq);
				for (const x of xw) {
					if (x.wake) {
						if (!pending.has(x.co)) pending.set(x.co, x);
						continue;
					}
					const wx = pending.get(x.co);
					if (!wx) continue;
					pending.delete(x.co);
					let w = wx.wake;
					if (wx.g !== x.g || Math.max(wx.gT, x.gT) >= w.t) {
						this.noteUnknown('delays', x.lane, w.t);
						w = UNKNOWN_WAKE;
					}
					if (x.row < 0) continue; /* a poll with a gap inside: not drawn */
					if (!byLane.has(x.lane)) byLane.set(x.lane, []);
					byLane.get(x.lane).push([x.row, w]);
				}
				P.xw = [];
			}
			return byLane;
		}
		/* RequestBegin / RequestEnd (when the schema names them so): a request is drawn on the
		 * lane of its begin, from its begin to its response's last write (the end's time less
		 * tail_ns); one with a gap between its events, or with no begin, is not drawn. One that
		 * ended on another thread (a thread pool's hand-over) is drawn too, as d9-analyze keeps
		 * it, when no gap of its process or first thread lies between; its end may come first
		 * in the file (the other thread's chunk): held until its begin */
		request(P, lane, ev, t, strings, mark) {
			const sc = ev.schema;
			if (!sc || text(sc.name) !== REQ_NAMES[ev.code] || sc.fields.length < (ev.code === REQ_BEGIN ? 5 : 7))
				return;
			const fv = ev.f;
			const key = String(fv[0]) + '/' + num(fv[ev.code === REQ_BEGIN ? 3 : 1]);
			if (!P.openReq) P.openReq = new Map();
			if (!P.earlyReq) P.earlyReq = new Map();
			const draw = (o, e) => {
				const L = this.lanes[o.lane];
				const k = L.requests.cols;
				k.start.push(o.t); k.end.push(Math.max(o.t, e.t - e.tail)); k.co.push(o.co); k.fd.push(o.fd);
				k.flags.push(e.flags); k.name.push(o.name); k.count.push(e.count);
				k.bin.push(e.bin); k.bout.push(e.bout); k.id.push(o.id);
				L.requests.n++;
			};
			if (ev.code === REQ_BEGIN) {
				const pv = num(fv[4]) ? strings.get(num(fv[4])) : undefined;
				const o = { t, lane, co: num(fv[2]), fd: num(fv[1]), name: pv ? this.name(text(pv)) : -1, mark, id: num(fv[0]) };
				const e = P.earlyReq.get(key);
				if (e) {
					/* its end came first, from another thread */
					P.earlyReq.delete(key);
					if (e.lane !== lane && e.wide === P.wideGaps && e.t >= t)
						draw(o, e);
					return;
				}
				P.openReq.set(key, o);
				return;
			}
			const e = { t, tail: fv.length > 7 ? num(fv[7]) : 0, flags: num(fv[4]), count: num(fv[5]),
				bin: num(fv[2]), bout: num(fv[3]), lane, wide: P.wideGaps };
			const o = P.openReq.get(key);
			if (!o) {
				P.earlyReq.set(key, e);
				return;
			}
			P.openReq.delete(key);
			const first = this.lanes[o.lane];
			if (o.lane === lane ? mark !== o.mark : first.gaps + P.wideGaps !== o.mark)
				return; /* a gap inside: its time is not known */
			draw(o, e);
		}
		finish() {
			let tMin = Infinity, tMax = -Infinity;
			const lanes = [];
			this.lanes.forEach((L, li) => {
				/* a poll the trace ends in: drawn to the lane's last event, when no gap lies
				 * between (else its end is unknown: not drawn) */
				if (L.openPoll && L.openPoll.mark !== L.endMark) {
					this.noteUnknown('polls', li, L.openPoll.start);
				} else if (L.openPoll) {
					const o = L.openPoll, k = L.polls.cols;
					o.ps.row = L.polls.n;
					k.start.push(o.start); k.end.push(Math.max(L.endT, o.start)); k.co.push(o.co); k.loc.push(o.loc);
					k.wakeT.push(NaN); k.wakeKind.push(-1); k.waker.push(0);
					k.open.push(2);
					L.polls.n++;
				}
			});
			const wakesOf = this.pairWakes(); /* every poll is written */
			this.lanes.forEach((L, li) => {
				if (L.first < tMin) tMin = L.first;
				if (L.last > tMax) tMax = L.last;
				const out = { src: li, proc: L.proc, tid: L.tid, worker: L.worker, name: L.name || '', first: L.first, last: L.last, nApp: L.nApp || 0 };
				for (const kind of ['polls', 'parks', 'blocks', 'preempted', 'samples', 'wakes', 'drops', 'queue', 'turns', 'readings', 'requests']) {
					const t = L[kind], o = { n: 0 };
					for (const c in t.cols) o[c] = t.cols[c].done();
					o.n = t.cols[Object.keys(t.cols)[0]].n;
					out[kind] = o;
				}
				for (const [row, w] of wakesOf.get(li) || []) {
					out.polls.wakeT[row] = w.t; out.polls.wakeKind[row] = w.kind; out.polls.waker[row] = w.waker;
				}
				sortBy(out.samples, 't');
				sortBy(out.polls, 'start');
				sortBy(out.blocks, 'start');
				sortBy(out.preempted, 'start');
				sortBy(out.readings, 't');
				sortBy(out.turns, 'start');
				sortBy(out.requests, 'start');
				lanes.push(out);
			});
			/* generic mode: no poll in the whole trace; loop turns (Unpark -> next Park) instead,
			 * those with no gap between their ends (paired while decoding) */
			const generic = lanes.every((l) => l.polls.n === 0) && lanes.some((l) => l.parks.n + l.turns.n > 1);
			if (generic) {
				const turn = this.name('(loop turn)');
				const g = this.locs.length;
				this.locs.push({});
				this.locName[g] = turn;
				this.locAddr[g] = null;
				for (const l of lanes) {
					const k = l.turns, n = k.n;
					const p = { n, start: k.start, end: k.end, co: new Float64Array(n), loc: new Int32Array(n).fill(g),
						wakeT: new Float64Array(n).fill(NaN), wakeKind: new Int8Array(n).fill(-1), waker: new Float64Array(n), open: new Uint8Array(n) };
					l.polls = p;
				}
			}
			for (const l of lanes)
				delete l.turns;
			lanes.sort((a, b) => a.proc - b.proc || (b.worker ? 1 : 0) - (a.worker ? 1 : 0) || (a.worker - b.worker) || a.tid - b.tid);
			/* drop threads with nothing to draw (agent threads) */
			const kept = lanes.filter((l) => l.polls.n || l.parks.n || l.blocks.n || l.preempted.n || l.samples.n || l.drops.n || l.requests.n || l.worker || l.nApp);
			const procs = this.procs.map((P) => {
				return { pid: P.pid, process: P.process, hostname: P.hostname, cmdline: P.cmdline, segments: P.segments, cos: null, _cos: P.cos };
			});
			/* coroutine table per process: parent, location, spawn, exit */
			for (const P of procs) {
				const m = P._cos, ids = [], par = [], loc = [], sp = [], ex = [];
				for (const [id, c] of m) {
					ids.push(id); par.push(c.parent || 0); loc.push(c.loc === undefined ? -1 : c.loc);
					sp.push(c.spawnT === undefined ? NaN : c.spawnT); ex.push(c.exitT === undefined ? NaN : c.exitT);
				}
				P.cos = { id: Float64Array.from(ids), parent: Float64Array.from(par), loc: Int32Array.from(loc), spawn: Float64Array.from(sp), exit: Float64Array.from(ex) };
				delete P._cos;
			}
			/* stack frames, flattened */
			let nf = 0;
			for (const s of this.stackFrames) nf += Array.isArray(s) ? s.length : 0;
			const stackOff = new Int32Array(this.stackFrames.length + 1), frames = new Int32Array(nf);
			let j = 0;
			this.stackFrames.forEach((s, i) => {
				stackOff[i] = j;
				if (Array.isArray(s)) for (const x of s) frames[j++] = typeof x === 'number' ? x : 0;
			});
			stackOff[this.stackFrames.length] = j;
			const segGaps = this.segmentGaps();
			/* unknown pairs: lanes renumbered as kept (-1: a lane left out) */
			const keptIdx = new Map();
			kept.forEach((l, i) => keptIdx.set(l.src, i));
			const app = this.appModel(keptIdx);
			const U = this.unknown;
			const unknown = { polls: U.polls, parks: U.parks, turns: generic ? U.turns : 0, delays: U.delays,
				first: U.first.filter((x) => generic || x.kind !== 'turns').map((x) => ({ kind: x.kind, t: x.t, lane: keptIdx.has(x.lane) ? keptIdx.get(x.lane) : -1 })) };
			return {
				t0: this.t0 === null ? '0' : this.t0.toString(), tMin: isFinite(tMin) ? tMin : 0, tMax: isFinite(tMax) ? tMax : 1,
				names: this.names, locName: Int32Array.from(this.locName, (x) => (x === undefined ? -1 : x)),
				locAddr: this.locAddr, procs, lanes: kept, stackOff, frames, files: this.files.map((f) => ({ name: f.name, size: f.size, events: f.events, status: f.status, problems: f.problems.slice(0, 20), nproblems: f.problems.length, note: f.note })),
				problems: this.problems.slice(0, 1000), events: this.events, generic, gaps: segGaps,
				unknown, seqGaps: this.seqGaps, gapMarks: this.wideGaps.filter((g) => isFinite(g.t)),
				enums: { WAKE_KINDS, CALLS, FD_KINDS, DROP_REASONS }, app,
				naming: { embedded: this.naming.embedded, unnamedLocs: this.naming.unnamedLocs, unnamedFrames: this.naming.unnamedFrames,
					analyzerUnnamed: this.naming.analyzerUnnamed, examples: this.naming.examples },
			};
		}
		/* application events for the page: ticks (marks, custom events) by kept lane, sorted by
		 * time; value tracks per (process, name): t and v sorted by time, kind of the last one */
		appModel(keptIdx) {
			const ticks = [], byKey = new Map();
			for (const e of this.app) {
				if (e.type === 1) {
					const key = e.proc + '\0' + e.name;
					let tr = byKey.get(key);
					if (!tr) byKey.set(key, tr = { proc: e.proc, name: e.name, kind: e.kind, pts: [] });
					tr.kind = e.kind;
					tr.pts.push([e.t, e.v]);
				} else if (keptIdx.has(e.lane)) {
					ticks.push({ lane: keptIdx.get(e.lane), t: e.t, type: e.type, name: e.name, text: e.text });
				}
			}
			ticks.sort((a, b) => a.t - b.t);
			const values = [...byKey.values()].sort((a, b) => a.proc - b.proc || (a.name < b.name ? -1 : 1)).map((tr) => {
				tr.pts.sort((a, b) => a[0] - b[0]);
				return { proc: tr.proc, name: tr.name, kind: tr.kind, t: Float64Array.from(tr.pts, (x) => x[0]), v: Float64Array.from(tr.pts, (x) => x[1]) };
			});
			return { ticks, values, lost: this.appLost };
		}
		/* holes between the segments of a process: segment numbers missing from the series
		 * (deleted by the disk budget, not given), or a segment that ends without a trailer (a
		 * crash, a full disk) before the next one */
		segmentGaps() {
			const out = [];
			const by = new Map();
			for (const s of this.segs) {
				if (!isFinite(s.tFirst)) continue;
				if (!by.has(s.proc)) by.set(s.proc, []);
				by.get(s.proc).push(s);
			}
			for (const [p, list] of by) {
				for (let i = 1; i < list.length; i++) {
					const a = list[i - 1], b = list[i];
					const missing = b.seq - a.seq - 1;
					if (missing > 0 || (a.file.sealed === false && b.tFirst - a.tLast > 1e6))
						out.push({ proc: p, from: a.tLast, to: b.tFirst, missing, after: a.file.name });
				}
			}
			return out;
		}
	}
	function sortBy(t, key) {
		const a = t[key];
		let sorted = true;
		for (let i = 1; i < t.n; i++) if (a[i] < a[i - 1]) { sorted = false; break; }
		if (sorted) return;
		const idx = new Uint32Array(t.n);
		for (let i = 0; i < t.n; i++) idx[i] = i;
		idx.sort((x, y) => a[x] - a[y]);
		for (const c in t) {
			if (c === 'n') continue;
			const old = t[c], nw = new old.constructor(t.n);
			for (let i = 0; i < t.n; i++) nw[i] = old[idx[i]];
			t[c] = nw;
		}
	}
	/* every typed array buffer of a model: the worker transfers them instead of copying */
	function transferables(m) {
		const out = [m.stackOff.buffer, m.frames.buffer, m.locName.buffer];
		for (const l of m.lanes)
			for (const k of ['polls', 'parks', 'blocks', 'preempted', 'samples', 'wakes', 'drops', 'queue', 'readings', 'requests'])
				for (const c in l[k]) if (c !== 'n') out.push(l[k][c].buffer);
		for (const p of m.procs)
			for (const c in p.cos) out.push(p.cos[c].buffer);
		return out;
	}
	root.D9Model = { Builder, transferables, WAKE_KINDS, CALLS, FD_KINDS, DROP_REASONS };
	return root.D9Model;
}
if (typeof module !== 'undefined' && module.exports)
	module.exports = d9_model_module(Object.assign({}, { D9Decode: require('./decode.js') }));
else
	d9_model_module(typeof self !== 'undefined' ? self : this);
