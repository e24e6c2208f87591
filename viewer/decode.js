/* decode.js: the d9 trace format decoder in JavaScript (format/FORMAT.md is the contract; where
 * they disagree, format/format.c is right). Input is hostile: every read is bounds-checked, a
 * damaged chunk is skipped with a problem naming its offset, nothing here throws on bad bytes.
 * Runs in the page, in the Web Worker (its source is handed over with Function.toString, so the
 * whole module is one function with no outside references) and in Node (tests/browser/). */
function d9_decode_module(root) {
	'use strict';

	const MAX_PAYLOAD = 16777216;
	const TYPE_LIMIT = 256; /* schema entries kept for codes below this */
	const MAX_FIELDS = 8; /* fields kept per event (positional types) */
	const SLOT_KIND_OBJECT = 100; /* Wake's packed field */
	/* Unpark's `cpu_ns+1` / `sched_wait_ns+1`: value plus one, 0 = unknown (null in f[1], f[2]) */
	const SLOT_CPU_P1 = 101, SLOT_SCHED_P1 = 102;
	/* CpuSample's `weight_ns+1`: value plus one, 0 = unknown (null in f[4]; also when not listed) */
	const SLOT_WEIGHT_P1 = 103;
	/* Park's `timeout_us_delta` (format 1.3): the difference from the chunk's previous Park's
	 * timeout (-1 before the first), decoded into f[1] */
	const SLOT_TIMEOUT_DELTA = 104;
	/* UnparkStats (format 1.3): an Unpark's statistics in a record of its own right after it,
	 * beginning 0F 14; merged into that Unpark (FORMAT.md, "Unpark statistics") */
	const UNPARK_STATS = 20;
	const SAFE = 9007199254740991;
	const MAGIC = [0x89, 0x44, 0x39, 0x54, 0x0d, 0x0a, 0x1a, 0x0a];

	const EVENT_NAMES = ['?', 'PollStart', 'PollEnd', 'Park', 'Unpark', 'Wake', 'Spawn',
		'CoroutineExit', 'QueueSample', 'BlockingCall', 'CpuSample', 'Dropped', 'CustomEvent',
		'ZeroTimeoutWaits'];
	const DEF_NAMES = ['?', 'String', 'SpawnLocation', 'Stack', 'Module', 'Symbol', 'Thread',
		'ClockSync', 'Coroutine', 'CustomSchema', 'Privileges', 'RecorderState'];
	/* built-in v1 schema: field order is d9's writer's order and the slot order */
	const BUILTIN = [null,
		[['c', 'coroutine'], ['u', 'location']],
		[['c', 'coroutine']],
		[['u', 'call'], ['i', 'timeout_us']],
		[['i', 'ready'], ['u', 'cpu_ns'], ['u', 'sched_wait_ns']],
		[['c', 'woken'], ['c', 'waker'], ['u', 'kind_object']],
		[['c', 'coroutine'], ['c', 'parent'], ['u', 'location']],
		[['c', 'coroutine']],
		[['u', 'runnable']],
		[['c', 'coroutine'], ['u', 'call'], ['u', 'fd_kind'], ['u', 'duration_ns'], ['u', 'stack']],
		[['c', 'coroutine'], ['u', 'source'], ['u', 'stack']],
		[['u', 'count'], ['u', 'reason']],
		[['u', 'schema'], ['b', 'data']],
		[['u', 'count']]];
	const WAKE_SLOTS = ['woken', 'waker', 'kind', 'object'];

	/* ---- CRC-32 (IEEE, zlib's) ---- */
	const CRC_TABLE = new Int32Array(256);
	for (let n = 0; n < 256; n++) {
		let c = n;
		for (let k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
		CRC_TABLE[n] = c;
	}
	function crc32(u8, start, end) {
		let c = -1;
		for (let i = start; i < end; i++)
			c = CRC_TABLE[(c ^ u8[i]) & 0xff] ^ (c >>> 8);
		return (c ^ -1) >>> 0;
	}
	function headCheck(u8, p) {
		let c = -1;
		for (const i of [0, 1, 2, 4, 5, 6, 7])
			c = CRC_TABLE[(c ^ u8[p + i]) & 0xff] ^ (c >>> 8);
		return ((c ^ -1) >>> 0) & 0xff;
	}

	/* ---- 64-bit values: a Number when exact (<= 2^53 - 1 in magnitude), else a BigInt ---- */
	function norm(b) {
		return b <= BigInt(SAFE) && b >= -BigInt(SAFE) ? Number(b) : b;
	}
	function big(v) {
		return typeof v === 'bigint' ? v : BigInt(v);
	}
	/* unsigned 64-bit a + b (b may be signed), wrapping */
	function add64(a, b) {
		if (typeof a === 'number' && typeof b === 'number') {
			const s = a + b;
			if (s >= 0 && s <= SAFE)
				return s;
		}
		return norm(BigInt.asUintN(64, big(a) + big(b)));
	}
	function unzigzag(n) {
		if (typeof n === 'number')
			return n % 2 ? -(n + 1) / 2 : n / 2;
		return norm((n >> 1n) ^ -(n & 1n));
	}
	function u64str(v) {
		if (typeof v === 'number' && v >= 0)
			return String(v);
		return BigInt.asUintN(64, big(v)).toString();
	}
	function i64str(v) {
		if (typeof v === 'number')
			return String(v);
		return BigInt.asIntN(64, v).toString();
	}
	function le(u8, p, n) {
		if (n <= 6) {
			let v = 0;
			for (let i = n - 1; i >= 0; i--)
				v = v * 256 + u8[p + i];
			return v;
		}
		let v = 0n;
		for (let i = n - 1; i >= 0; i--)
			v = (v << 8n) | BigInt(u8[p + i]);
		return norm(v);
	}

	/* A bounded cursor over u8[p, end): err set (sticky) when a read does not fit. */
	class Cur {
		constructor(u8, p, end) {
			this.u8 = u8;
			this.p = p;
			this.end = end;
			this.err = false;
		}
		u() { /* varint: Number when it fits, else BigInt; 0 with err on failure */
			const u8 = this.u8;
			let p = this.p;
			if (p < this.end && u8[p] < 0x80) {
				this.p = p + 1;
				return u8[p];
			}
			let v = 0, mul = 1;
			for (let i = 0; i < 7; i++) { /* 49 bits stay exact as a Number */
				if (p >= this.end) {
					this.err = true;
					return 0;
				}
				const b = u8[p++];
				v += (b & 0x7f) * mul;
				mul *= 128;
				if (b < 0x80) {
					this.p = p;
					return v;
				}
			}
			let bv = BigInt(v);
			for (let shift = 49n; shift < 70n; shift += 7n) {
				if (p >= this.end) {
					this.err = true;
					return 0;
				}
				const b = u8[p++];
				if (shift === 63n && b > 1) {
					this.err = true;
					return 0;
				}
				bv |= BigInt(b & 0x7f) << shift;
				if (b < 0x80) {
					this.p = p;
					return norm(bv);
				}
			}
			this.err = true;
			return 0;
		}
		take(n) { /* start offset of n bytes, or -1 */
			if (this.err || typeof n !== 'number' || this.end - this.p < n) {
				this.err = true;
				return -1;
			}
			const p = this.p;
			this.p += n;
			return p;
		}
		bytes() { /* a subarray, or null with err */
			const n = this.u();
			if (this.err || typeof n !== 'number' || n > this.end - this.p) {
				this.err = true;
				return null;
			}
			const p = this.take(n);
			return this.u8.subarray(p, p + n);
		}
		le(n) {
			const p = this.take(n);
			return p < 0 ? 0 : le(this.u8, p, n);
		}
	}

	function cutNul(b) {
		const i = b.indexOf(0);
		return i < 0 ? b : b.subarray(0, i);
	}

	/* ---- time (section 7), exact: BigInt with the reference's clamps ---- */
	function clampB(v, lo, hi) {
		return v < lo ? lo : v > hi ? hi : v;
	}
	function ticksToNsExact(h, time) {
		const lim = 1n << 100n;
		const shift = BigInt(h.time_shift & 63);
		const tps = h.ticks_per_sec ? big(h.ticks_per_sec) : 1000000000n;
		let dt = (big(time) << shift) - big(h.anchor_ticks);
		dt = clampB(dt, -lim, lim);
		let q = dt / tps;
		const r = dt % tps;
		q = clampB(q, -(1n << 64n), 1n << 64n);
		let ns = q * 1000000000n + r * 1000000000n / tps;
		const half = (1n << 62n);
		return clampB(ns, -half, half - 1n);
	}
	function addSat(base, d) {
		return clampB(big(base) + d, -(1n << 63n), (1n << 63n) - 1n);
	}
	function monoNsExact(h, time) {
		return addSat(h.anchor_mono_ns, ticksToNsExact(h, time));
	}
	function realNsExact(h, time) {
		return addSat(h.anchor_realtime_ns, ticksToNsExact(h, time));
	}

	/* ---- schema ---- */
	function slotOf(code, name) {
		if (code === 0 || code > 13)
			return -1;
		if (code === 5) {
			if (name === 'kind_object')
				return SLOT_KIND_OBJECT;
			return WAKE_SLOTS.indexOf(name);
		}
		if (code === 4 && name === 'cpu_ns+1')
			return SLOT_CPU_P1;
		if (code === 4 && name === 'sched_wait_ns+1')
			return SLOT_SCHED_P1;
		if (code === 10 && name === 'unwind')
			return 3; /* CpuSample's unwind (schema-listed; 0 when a writer does not list it) */
		if (code === 10 && name === 'weight_ns+1')
			return SLOT_WEIGHT_P1;
		if (code === 3 && name === 'timeout_us_delta')
			return SLOT_TIMEOUT_DELTA;
		const b = BUILTIN[code];
		for (let i = 0; i < b.length; i++)
			if (b[i][1] === name)
				return i;
		return -1;
	}
	const latin1 = (b) => { let s = ''; for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]); return s; };
	function builtinSchema() {
		const s = new Array(TYPE_LIMIT).fill(null);
		for (let t = 1; t <= 13; t++) {
			const nf = t === 4 ? 1 : BUILTIN[t].length;
			const fields = [];
			for (let i = 0; i < nf; i++) {
				const nb = new TextEncoder().encode(BUILTIN[t][i][1]);
				fields.push({ enc: BUILTIN[t][i][0], name: nb, key: BUILTIN[t][i][1], slot: slotOf(t, BUILTIN[t][i][1]) });
			}
			s[t] = { name: new TextEncoder().encode(EVENT_NAMES[t]), fields };
		}
		return s;
	}
	/* names: at most 29 bytes, cut at a NUL; "key" compares byte for byte (latin1 string) */
	function schemaName(b) {
		return cutNul(b.subarray(0, Math.min(b.length, 29)));
	}
	function parseSchema(r, u8, p, end) {
		const k = new Cur(u8, p, end);
		const t = new Map();
		const n = k.u();
		for (let i = 0; (typeof n === 'bigint' ? BigInt(i) < n : i < n) && !k.err; i++) {
			const code = k.u();
			const name = k.bytes();
			const nf = k.u();
			if (k.err || code === 0 || typeof code !== 'number' || code >= 0xffffffff || nf > 16) {
				k.err = true;
				break;
			}
			const st = { name: schemaName(name), fields: [] };
			for (let f = 0; f < nf && !k.err; f++) {
				const ep = k.take(1);
				const fname = k.bytes();
				if (k.err)
					break;
				const enc = String.fromCharCode(u8[ep]);
				if (enc !== 'u' && enc !== 'i' && enc !== 'c' && enc !== 'b') {
					k.err = true;
					break;
				}
				const nm = schemaName(fname);
				const key = latin1(nm);
				st.fields.push({ enc, name: nm, key, slot: slotOf(code, key) });
			}
			if (!k.err && code < TYPE_LIMIT)
				t.set(code, st);
		}
		if (k.err) {
			r.stats.corrupt_chunks++;
			r.problem('corrupt', p - 8, 'schema chunk does not parse; keeping the previous schema');
		} else {
			for (const [code, st] of t)
				r.schema[code] = st;
		}
	}

	/* ---- definitions (section 10) ---- */
	function defBody(kind, k) {
		const d = { kind };
		switch (kind) {
		case 1:
			d.id = k.u();
			d.value = k.err ? new Uint8Array(0) : k.u8.subarray(k.p, k.end);
			break;
		case 2:
			d.id = k.u(); d.function_addr = k.u(); d.callsite_addr = k.u(); d.module = k.u(); d.name = k.u();
			break;
		case 3: {
			d.id = k.u();
			const n = k.u();
			if (n > 128)
				return -1;
			d.frames = [];
			for (let i = 0; i < n && !k.err; i++)
				d.frames.push(i === 0 ? k.u() : add64(d.frames[i - 1], unzigzag(k.u())));
			break;
		}
		case 4:
			d.id = k.u(); d.path = k.u(); d.start = k.u(); d.end = k.u(); d.offset = k.u();
			d.build_id = k.bytes();
			break;
		case 5:
			d.start = k.u(); d.len = k.u(); d.function = k.u(); d.file = k.u(); d.line = k.u(); d.inline_depth = k.u();
			break;
		case 6:
			d.id = k.u(); d.name = k.u(); d.worker = k.u(); d.role = k.u();
			break;
		case 7:
			d.ticks = k.u(); d.mono_ns = k.u(); d.realtime_ns = k.u();
			break;
		case 8:
			d.id = k.u(); d.parent = k.u(); d.location = k.u(); d.flags = k.u();
			break;
		case 9: /* CustomSchema: type and name of each field to the end; checked as format.c does */
			d.id = k.u(); d.name = k.u();
			d.fields = k.err ? new Uint8Array(0) : k.u8.subarray(k.p, k.end);
			if (!k.err && (d.id === 0 || !customFieldsOk(d.fields)))
				return -1;
			break;
		case 10: /* Privileges (1.1) */
			d.from_uid = k.u(); d.to_uid = k.u(); d.flags = k.u();
			break;
		case 11: /* RecorderState: the recorder was narrowed */
			d.feature = k.u(); d.state = k.u(); d.errno = k.u(); d.text = k.u();
			break;
		default:
			return 1;
		}
		return k.err ? -1 : d;
	}
	/* a CustomSchema's field description (d9_custom_schema_parse): at most 32 fields, each a type
	 * of u i f s b and a name of 1 to 64 bytes, nothing cut short */
	function customFieldsOk(b) {
		const k = new Cur(b, 0, b.length);
		for (let n = 0; k.p < k.end; n++) {
			if (n === 32) return false;
			const t = k.take(1);
			const name = k.bytes();
			if (k.err || !'uifsb'.includes(String.fromCharCode(b[t])) || name.length < 1 || name.length > 64) return false;
		}
		return true;
	}
	function decodeDefs(r, u8, cp, p, end) {
		while (p < end) {
			const k = new Cur(u8, p, end);
			const off = p;
			const kp = k.take(1);
			const body = k.bytes();
			if (k.err) {
				r.stats.bad_defs++;
				r.problem('corrupt', off, 'definition record overruns its chunk');
				return;
			}
			p = k.p;
			const kind = u8[kp];
			const bk = new Cur(u8, body.byteOffset - u8.byteOffset, body.byteOffset - u8.byteOffset + body.length);
			const d = defBody(kind, bk);
			if (d === 1) {
				if (!r.unknownDefSeen) {
					r.unknownDefSeen = true;
					r.problem('unknown_def', off, 'unknown definition kind ' + kind + ' skipped');
				}
				continue;
			}
			if (d === -1) {
				r.stats.bad_defs++;
				r.problem('corrupt', off, 'malformed ' + DEF_NAMES[kind] + ' definition skipped');
				continue;
			}
			if (r.sink.def)
				r.sink.def(cp, d);
		}
	}

	/* ---- events (section 9) ---- */
	function decodeEvents(r, u8, cp, len) {
		const pl = cp + 8;
		const ch = { offset: cp, tid: le(u8, pl, 4), worker: le(u8, pl + 4, 4), base_time: le(u8, pl + 8, 8) };
		if (r.sink.chunk && r.sink.chunk(ch) === false)
			return;
		const end = pl + len;
		const k = new Cur(u8, pl + 24, end);
		const m = [0, 0, 0, 0];
		let time = ch.base_time;
		let parkTimeout = -1; /* the chunk's previous Park's timeout_us */
		const ev = { code: 0, offset: 0, time: 0, f: new Array(MAX_FIELDS).fill(0), fdata: new Array(MAX_FIELDS).fill(null), schema: null, stats: false };
		const st = { f: new Array(MAX_FIELDS).fill(0), fdata: new Array(MAX_FIELDS).fill(null) };
		const fail = (off, why) => {
			r.stats.bad_events++;
			r.problem('bad_event', off, why + ' at offset ' + off + '; rest of chunk skipped');
		};
		const sink = r.sink;
		/* the fields of schema entry s into f and fd (known: a built-in type, mapped by name);
		 * false when the event is damaged (reported, the rest of the chunk dropped) */
		const readFields = (s, known, f, fd, off) => {
			const fields = s.fields;
			for (let i = 0; i < fields.length; i++) {
				const fl = fields[i];
				let v;
				let data = null;
				if (fl.enc === 'b') {
					data = k.bytes();
					v = data ? data.length : 0;
				} else {
					v = k.u();
					if (fl.enc === 'c' && v !== 0) {
						let id;
						if (v <= 4) {
							id = m[v - 1];
							if (!id) {
								fail(off, 'coroutine field names an empty slot');
								return false;
							}
							for (let j = v - 1; j > 0; j--)
								m[j] = m[j - 1];
						} else {
							id = add64(m[0], unzigzag(typeof v === 'number' ? v - 5 : v - 5n));
							if (!id) {
								fail(off, 'coroutine field decodes to id 0');
								return false;
							}
							m[3] = m[2]; m[2] = m[1]; m[1] = m[0];
						}
						m[0] = id;
						v = id;
					} else if (fl.enc === 'i') {
						v = unzigzag(v);
					}
				}
				if (k.err) {
					fail(off, 'event overruns its chunk');
					return false;
				}
				const slot = known ? fl.slot : i;
				if (slot === SLOT_KIND_OBJECT) {
					if (typeof v === 'number' && v >= 0) {
						f[2] = v % 8;
						f[3] = unzigzag(Math.floor(v / 8));
					} else {
						const bv = BigInt.asUintN(64, big(v));
						f[2] = Number(bv & 7n);
						f[3] = unzigzag(norm(bv >> 3n));
					}
				} else if (slot === SLOT_CPU_P1 || slot === SLOT_SCHED_P1 || slot === SLOT_WEIGHT_P1) {
					f[slot === SLOT_CPU_P1 ? 1 : slot === SLOT_SCHED_P1 ? 2 : 4] = v === 0 ? null : typeof v === 'number' ? v - 1 : norm(v - 1n);
				} else if (slot === SLOT_TIMEOUT_DELTA) {
					/* signed 64-bit wrapping, as the C reader's uint64 sum */
					const t = typeof v === 'number' && typeof parkTimeout === 'number' ? parkTimeout + v : NaN;
					f[1] = Number.isSafeInteger(t) ? t : norm(BigInt.asIntN(64, big(parkTimeout) + big(v)));
				} else if (slot >= 0 && slot < MAX_FIELDS) {
					f[slot] = v;
					if (data)
						fd[slot] = data;
				}
			}
			return true;
		};
		while (k.p < end) {
			const off = k.p;
			const b0 = u8[k.p++];
			let type = b0 & 15, delta = (b0 >> 4) & 7;
			if (type === 0)
				return fail(off, 'event type 0');
			if (type === 15) {
				type = k.u();
				if (k.err || typeof type !== 'number' || type > 0xffffffff)
					return fail(off, 'bad extended event type');
			}
			if (b0 & 0x80) {
				const high = k.u();
				if (k.err || (typeof high === 'bigint' && high >> 61n))
					return fail(off, 'bad time delta');
				delta = typeof high === 'number' && high < 2 ** 49 ? delta + high * 8 : norm(big(delta) | (big(high) << 3n));
			}
			const s = type < TYPE_LIMIT ? r.schema[type] : null;
			if (!s) {
				if (type < TYPE_LIMIT && !r.unknownEventSeen[type]) {
					r.unknownEventSeen[type] = 1;
					r.problem('unknown_event', off, 'event type ' + type + ' has no schema');
				}
				return fail(off, 'undescribed event type');
			}
			const f = ev.f, fd = ev.fdata;
			for (let j = 0; j < MAX_FIELDS; j++) {
				f[j] = 0;
				fd[j] = null;
			}
			if (type === 4)
				f[1] = f[2] = null; /* Unpark statistics not listed or not recorded: unknown */
			else if (type === 10)
				f[4] = null; /* CpuSample's weight not listed or not recorded: unknown, never 0 */
			time = add64(time, delta);
			if (!readFields(s, type <= 13, f, fd, off))
				return;
			ev.stats = false;
			let damaged = false;
			if (type === 3) {
				parkTimeout = f[1];
			} else if (type === 4 && k.p + 1 < end && u8[k.p] === 0x0f && u8[k.p + 1] === UNPARK_STATS &&
				r.schema[UNPARK_STATS] && latin1(r.schema[UNPARK_STATS].name) === 'UnparkStats') {
				/* its UnparkStats: decoded like any event (delta 0), merged, not reported */
				const so = k.p, ss = r.schema[UNPARK_STATS];
				k.p += 2;
				for (let j = 0; j < MAX_FIELDS; j++) {
					st.f[j] = 0;
					st.fdata[j] = null;
				}
				if (!readFields(ss, false, st.f, st.fdata, so)) {
					damaged = true; /* reported; the Unpark before it stands */
				} else {
					for (let i = 0; i < ss.fields.length && i < MAX_FIELDS; i++) {
						const key = ss.fields[i].key, v = st.f[i];
						const to = key === 'cpu_ns+1' ? 1 : key === 'sched_wait_ns+1' ? 2 : 0;
						if (to)
							f[to] = v === 0 ? null : typeof v === 'number' ? v - 1 : norm(v - 1n);
					}
					ev.stats = true;
				}
			}
			ev.code = type;
			ev.offset = off;
			ev.time = time;
			ev.schema = s;
			if (sink.event)
				sink.event(ev, ch);
			if (damaged)
				return;
		}
	}

	function decodeTrailer(u8, p, end) {
		const k = new Cur(u8, p, end);
		const t = { events: k.le(8), chunks: k.le(8), first_time: k.le(8), last_time: k.le(8),
			dropped_events: k.le(8), dropped_samples: k.le(8), flags: k.le(4), type_counts: [] };
		const n = k.u();
		for (let i = 0; (typeof n === 'bigint' ? BigInt(i) < n : i < n) && !k.err; i++) {
			const type = k.u(), count = k.u();
			if (!k.err && type <= 13)
				t.type_counts[type] = count;
		}
		/* optional, as format.c reads them: the directory budget's deletions, then S3's counts;
		 * a trailer cut inside them is damaged */
		if (!k.err && k.p < end) {
			t.budget_deleted_segments = k.u();
			t.budget_deleted_bytes = k.u();
		}
		if (!k.err && k.p < end) {
			t.s3_uploaded = k.u();
			t.s3_uploaded_bytes = k.u();
			t.s3_failures = k.u();
			t.s3_evicted = k.u();
		}
		/* with flag bit 1 or 2 (the process ended, a flight dump's window ended): when */
		if (!k.err && k.p < end)
			t.end_time = k.u();
		return k.err ? null : t;
	}

	function parseHeader(u8, p, len) {
		const k = new Cur(u8, p, p + len);
		const h = {};
		h.pid = k.le(4); h.ppid = k.le(4); h.segment_seq = k.le(4);
		h.clock_source = k.le(1); h.time_shift = k.le(1); k.le(2);
		h.ticks_per_sec = k.le(8); h.anchor_ticks = k.le(8); h.anchor_mono_ns = k.le(8);
		h.anchor_realtime_ns = k.le(8); h.start_realtime_ns = k.le(8);
		const names = ['writer', 'process', 'cmdline', 'hostname', 'boot_id'];
		for (const n of names)
			h[n] = k.bytes() || new Uint8Array(0);
		if (k.err || h.ticks_per_sec === 0 || h.time_shift > 40 || h.clock_source > 1)
			return null;
		return h;
	}

	/* Reads one segment file (uncompressed bytes u8) and hands every record to sink:
	 *   sink.problem(kind, offset, message), sink.header(h), sink.schema(offset, schema),
	 *   sink.def(chunkOffset, def), sink.chunk(eventsHead) (return false to skip its events),
	 *   sink.event(ev, chunkHead) (ev is reused: copy what you keep), sink.trailer(offset, t|null).
	 * Returns { unreadable: message } or { stats }. */
	function decodeSegment(u8, sink, opts) {
		const r = {
			sink, schema: builtinSchema(), unknownEventSeen: new Uint8Array(TYPE_LIMIT),
			unknownChunkSeen: new Uint8Array(256), unknownDefSeen: false, crcSpent: 0,
			stats: { chunks: 0, corrupt_chunks: 0, unknown_chunks: 0, bad_events: 0, bad_defs: 0,
				skipped_bytes: 0, truncated: false, truncated_at: 0, sealed: false },
			problem(kind, off, msg) { if (sink.problem) sink.problem(kind, off, msg); },
		};
		const end = u8.length;
		if (end === 0)
			return { unreadable: 'truncated' };
		for (let i = 0; i < Math.min(8, end); i++)
			if (u8[i] !== MAGIC[i])
				return { unreadable: 'not a d9 trace (bad magic)' };
		if (end < 16)
			return { unreadable: 'truncated' };
		const major = le(u8, 8, 2), minor = le(u8, 10, 2);
		if (major !== 1)
			return { unreadable: 'unsupported format major version' };

		/* 1 valid, 0 invalid, -1 incomplete (section 5) */
		function valid(p) {
			if (p + 8 > end)
				return -1;
			if (u8[p] !== 0x44 || u8[p + 1] !== 0x39 || u8[p + 3] !== headCheck(u8, p))
				return 0;
			const len = le(u8, p + 4, 4);
			if (len > MAX_PAYLOAD)
				return 0;
			if (p + 12 + len > end)
				return -1;
			if (r.crcSpent + len > 64 * 1048576 + 8 * pos)
				return 0;
			r.crcSpent += len;
			return crc32(u8, p, p + 8 + len) === le(u8, p + 8 + len, 4) ? 1 : 0;
		}
		function headOk(p) {
			if (p + 8 > end)
				return true;
			return u8[p] === 0x44 && u8[p + 1] === 0x39 && u8[p + 3] === headCheck(u8, p) &&
				le(u8, p + 4, 4) <= MAX_PAYLOAD;
		}
		function candidate(p) {
			if (p + 8 > end || u8[p] !== 0x44 || u8[p + 1] !== 0x39 || u8[p + 3] !== headCheck(u8, p))
				return false;
			const len = le(u8, p + 4, 4);
			if (len > MAX_PAYLOAD || !headOk(p + 12 + len))
				return false;
			return valid(p) === 1;
		}

		let pos = 16;
		const v0 = valid(16);
		if (v0 === -1)
			return { unreadable: 'truncated' };
		if (v0 === 0 || u8[18] !== 1)
			return { unreadable: 'missing or corrupt segment header' };
		const hlen = le(u8, 20, 4);
		const h = parseHeader(u8, 24, hlen);
		if (!h)
			return { unreadable: 'missing or corrupt segment header' };
		h.major = major;
		h.minor = minor;
		r.header = h;
		r.stats.chunks = 1;
		pos = 16 + 12 + hlen;
		if (sink.header)
			sink.header(h);
		while (pos < end) {
			const v = valid(pos);
			if (v !== 1) {
				const bad = pos;
				let skip = 1;
				for (;;) {
					if (pos + skip + 8 > end) {
						skip = end - pos;
						break;
					}
					if (u8[pos + skip] === 0x44 && u8[pos + skip + 1] === 0x39 && candidate(pos + skip))
						break;
					skip++;
				}
				if (skip >= end - pos && v === -1) {
					r.stats.truncated = true;
					r.stats.truncated_at = bad;
					r.problem('truncated', bad, 'segment truncated: incomplete chunk at offset ' + bad + ' (' + (end - pos) + ' bytes)');
				} else {
					r.stats.corrupt_chunks++;
					r.problem('corrupt', bad, 'corrupt chunk at offset ' + bad + ': skipped ' + skip + ' bytes');
				}
				r.stats.skipped_bytes += skip;
				pos += skip;
				continue;
			}
			const type = u8[pos + 2], len = le(u8, pos + 4, 4), cp = pos;
			pos += 12 + len;
			r.stats.chunks++;
			switch (type) {
			case 4:
				if (len < 24) {
					r.stats.corrupt_chunks++;
					r.problem('corrupt', cp, 'events chunk shorter than its head');
					continue;
				}
				decodeEvents(r, u8, cp, len);
				break;
			case 2:
				parseSchema(r, u8, cp + 8, cp + 8 + len);
				if (sink.schema)
					sink.schema(cp, r.schema);
				break;
			case 5:
				r.stats.sealed = true;
				if (sink.trailer)
					sink.trailer(cp, decodeTrailer(u8, cp + 8, cp + 8 + len));
				break;
			case 3:
				decodeDefs(r, u8, cp, cp + 8, cp + 8 + len);
				break;
			case 1:
				r.problem('corrupt', cp, 'second header chunk ignored');
				r.stats.corrupt_chunks++;
				break;
			default:
				r.stats.unknown_chunks++;
				if (!r.unknownChunkSeen[type]) {
					r.unknownChunkSeen[type] = 1;
					r.problem('unknown_chunk', cp, 'unknown chunk type ' + type + ' skipped (written by a newer d9?)');
				}
			}
		}
		return { stats: r.stats, header: h };
	}

	/* ---- JSON as `d9-analyze dump` writes it (section 13) ---- */
	function jsonBytes(b) {
		let s = '"';
		const n = b.length;
		for (let i = 0; i < n; i++) {
			const c = b[i];
			if (c === 0x22) s += '\\"';
			else if (c === 0x5c) s += '\\\\';
			else if (c === 0x0a) s += '\\n';
			else if (c === 0x09) s += '\\t';
			else if (c < 0x20 || c === 0x7f) s += '\\u00' + c.toString(16).padStart(2, '0');
			else if (c < 0x80) s += String.fromCharCode(c);
			else {
				const l = utf8Len(b, i);
				if (l) {
					s += new TextDecoder().decode(b.subarray(i, i + l));
					i += l - 1;
				} else {
					s += '\\u00' + c.toString(16).padStart(2, '0');
				}
			}
		}
		return s + '"';
	}
	/* length of a well-formed 2..4 byte UTF-8 sequence at b[i], else 0 */
	function utf8Len(b, i) {
		const c = b[i], n = b.length;
		const cont = (j) => j < n && (b[j] & 0xc0) === 0x80;
		if (c >= 0xc2 && c <= 0xdf)
			return cont(i + 1) ? 2 : 0;
		if (c >= 0xe0 && c <= 0xef) {
			if (!cont(i + 1) || !cont(i + 2)) return 0;
			if (c === 0xe0 && b[i + 1] < 0xa0) return 0;
			if (c === 0xed && b[i + 1] >= 0xa0) return 0;
			return 3;
		}
		if (c >= 0xf0 && c <= 0xf4) {
			if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
			if (c === 0xf0 && b[i + 1] < 0x90) return 0;
			if (c === 0xf4 && b[i + 1] >= 0x90) return 0;
			return 4;
		}
		return 0;
	}
	const hex = (b) => '"' + Array.from(b || [], (x) => x.toString(16).padStart(2, '0')).join('') + '"';

	/* dump(name, u8) -> the lines of `d9-analyze dump` for one file (an array of strings) */
	function dump(name, u8) {
		const out = [];
		let h = null;
		out.push('{"rec":"file","name":' + jsonBytes(new TextEncoder().encode(name)) + '}');
		const sink = {
			problem(kind, off, msg) {
				out.push('{"rec":"problem","kind":"' + kind + '","offset":' + off + ',"message":' + jsonBytes(cutNul(new TextEncoder().encode(msg))) + '}');
			},
			header(hd) {
				h = hd;
				let cmd = hd.cmdline.slice();
				for (let j = 0; j + 1 < cmd.length; j++)
					if (cmd[j] === 0) cmd[j] = 0x20;
				if (cmd.length && cmd[cmd.length - 1] === 0) cmd = cmd.subarray(0, cmd.length - 1);
				out.push('{"rec":"header","major":' + hd.major + ',"minor":' + hd.minor + ',"pid":' + hd.pid +
					',"ppid":' + hd.ppid + ',"segment":' + hd.segment_seq + ',"clock":"' + (hd.clock_source === 1 ? 'tsc' : 'monotonic') +
					'","time_shift":' + hd.time_shift + ',"ticks_per_sec":' + u64str(hd.ticks_per_sec) +
					',"anchor_ticks":' + u64str(hd.anchor_ticks) + ',"anchor_mono_ns":' + u64str(hd.anchor_mono_ns) +
					',"anchor_realtime_ns":' + u64str(hd.anchor_realtime_ns) + ',"start_realtime_ns":' + u64str(hd.start_realtime_ns) +
					',"writer":' + jsonBytes(cutNul(hd.writer)) + ',"process":' + jsonBytes(cutNul(hd.process)) +
					',"cmdline":' + jsonBytes(cmd) + ',"hostname":' + jsonBytes(cutNul(hd.hostname)) +
					',"boot_id":' + jsonBytes(cutNul(hd.boot_id)) + '}');
			},
			schema(off, schema) {
				const types = [];
				for (let t = 1; t < TYPE_LIMIT; t++) {
					const s = schema[t];
					if (!s) continue;
					types.push('{"code":' + t + ',"name":' + jsonBytes(s.name) + ',"fields":[' +
						s.fields.map((f) => '{"name":' + jsonBytes(f.name) + ',"enc":"' + f.enc + '"}').join(',') + ']}');
				}
				out.push('{"rec":"schema","offset":' + off + ',"types":[' + types.join(',') + ']}');
			},
			def(cp, d) {
				let s = '{"rec":"def","chunk":' + cp + ',"kind":"' + DEF_NAMES[d.kind] + '"';
				const U = u64str;
				switch (d.kind) {
				case 1: s += ',"id":' + U(d.id) + ',"value":' + jsonBytes(d.value); break;
				case 2: s += ',"id":' + U(d.id) + ',"function_addr":' + U(d.function_addr) + ',"callsite_addr":' + U(d.callsite_addr) + ',"module":' + U(d.module) + ',"name":' + U(d.name); break;
				case 3: s += ',"id":' + U(d.id) + ',"frames":[' + d.frames.map(U).join(',') + ']'; break;
				case 4: s += ',"id":' + U(d.id) + ',"path":' + U(d.path) + ',"start":' + U(d.start) + ',"end":' + U(d.end) + ',"offset":' + U(d.offset) + ',"build_id":' + hex(d.build_id); break;
				case 5: s += ',"start":' + U(d.start) + ',"len":' + U(d.len) + ',"function":' + U(d.function) + ',"file":' + U(d.file) + ',"line":' + U(d.line) + ',"inline_depth":' + U(d.inline_depth); break;
				case 6: s += ',"tid":' + U(d.id) + ',"name":' + U(d.name) + ',"worker":' + U(d.worker) + ',"role":' + U(d.role); break;
				case 7: s += ',"ticks":' + U(d.ticks) + ',"mono_ns":' + U(d.mono_ns) + ',"realtime_ns":' + U(d.realtime_ns); break;
				case 8: s += ',"id":' + U(d.id) + ',"parent":' + U(d.parent) + ',"location":' + U(d.location) + ',"flags":' + U(d.flags); break;
				case 9: s += ',"id":' + U(d.id) + ',"name":' + U(d.name) + ',"fields":' + hex(d.fields); break;
				case 10: s += ',"from_uid":' + U(d.from_uid) + ',"to_uid":' + U(d.to_uid) + ',"flags":' + U(d.flags); break;
				case 11: s += ',"feature":' + U(d.feature) + ',"state":' + U(d.state) + ',"errno":' + U(d.errno) + ',"text":' + U(d.text); break;
				}
				out.push(s + '}');
			},
			event(ev, ch) {
				const s = ev.schema;
				let line = '{"rec":"event","offset":' + ev.offset + ',"tid":' + ch.tid + ',"worker":' + ch.worker +
					',"type":' + jsonBytes(s.name) + ',"code":' + ev.code + ',"time":' + u64str(ev.time) +
					',"mono_ns":' + monoNsExact(h, ev.time).toString();
				const known = ev.code <= 13;
				let cpuDone = false, waitDone = false; /* Unpark statistics printed */
				for (let i = 0; i < s.fields.length; i++) {
					const fd = s.fields[i];
					const slot = known ? fd.slot : i;
					if (slot === SLOT_TIMEOUT_DELTA) {
						line += ',"timeout_us":' + i64str(ev.f[1]);
						continue;
					}
					if (known && ev.code === 4 && slot === 1)
						cpuDone = true;
					if (known && ev.code === 4 && slot === 2)
						waitDone = true;
					if (slot === SLOT_KIND_OBJECT) {
						line += ',"kind":' + u64str(ev.f[2]) + ',"object":' + i64str(ev.f[3]);
						continue;
					}
					if (slot === SLOT_CPU_P1 || slot === SLOT_SCHED_P1) {
						const v = ev.f[slot === SLOT_CPU_P1 ? 1 : 2];
						line += (slot === SLOT_CPU_P1 ? ',"cpu_ns":' : ',"sched_wait_ns":') + (v === null ? 'null' : u64str(v));
						if (slot === SLOT_CPU_P1)
							cpuDone = true;
						else
							waitDone = true;
						continue;
					}
					if (slot === SLOT_WEIGHT_P1) {
						line += ',"weight_ns":' + (ev.f[4] === null ? 'null' : u64str(ev.f[4]));
						continue;
					}
					if (slot < 0 || slot >= MAX_FIELDS)
						continue;
					line += ',' + jsonBytes(fd.name) + ':';
					/* an unknown statistic (null) in a plain field: 2^64-1, as format.c holds it */
					const v = ev.f[slot] === null ? (fd.enc === 'i' ? -1 : 18446744073709551615n) : ev.f[slot];
					if (fd.enc === 'i') line += i64str(v);
					else if (fd.enc === 'b') line += hex(ev.fdata[slot]);
					else line += u64str(v);
				}
				if (ev.code === 4 && ev.stats) {
					/* from the UnparkStats after it (format 1.3), those its own fields did not
					 * print: after its fields */
					if (!cpuDone)
						line += ',"cpu_ns":' + (ev.f[1] === null ? 'null' : u64str(ev.f[1]));
					if (!waitDone)
						line += ',"sched_wait_ns":' + (ev.f[2] === null ? 'null' : u64str(ev.f[2]));
				}
				out.push(line + '}');
			},
			trailer(off, t) {
				if (!t) {
					out.push('{"rec":"problem","kind":"corrupt","offset":' + off + ',"message":"trailer does not parse"}');
					return;
				}
				const tc = [];
				for (let i = 0; i <= 13; i++)
					if (t.type_counts[i]) tc.push('"' + EVENT_NAMES[i] + '":' + u64str(t.type_counts[i]));
				out.push('{"rec":"trailer","offset":' + off + ',"events":' + u64str(t.events) + ',"chunks":' + u64str(t.chunks) +
					',"first_time":' + u64str(t.first_time) + ',"last_time":' + u64str(t.last_time) +
					',"dropped_events":' + u64str(t.dropped_events) + ',"dropped_samples":' + u64str(t.dropped_samples) +
					',"flags":' + u64str(t.flags) + ',"type_counts":{' + tc.join(',') + '}' +
					((Number(t.flags) & 6) && t.end_time !== undefined ? ',"end_time":' + u64str(t.end_time) : '') + '}');
			},
		};
		const res = decodeSegment(u8, sink);
		if (res.unreadable) {
			out.push('{"rec":"problem","kind":"unreadable","offset":0,"message":"' + res.unreadable + '"}');
			return out;
		}
		const st = res.stats;
		out.push('{"rec":"end","chunks":' + st.chunks + ',"corrupt_chunks":' + st.corrupt_chunks + ',"unknown_chunks":' + st.unknown_chunks +
			',"bad_events":' + st.bad_events + ',"bad_defs":' + st.bad_defs + ',"skipped_bytes":' + st.skipped_bytes +
			',"truncated":' + st.truncated + ',"sealed":' + st.sealed + '}');
		return out;
	}

	function isGzip(u8) {
		return u8.length >= 2 && u8[0] === 0x1f && u8[1] === 0x8b;
	}

	root.D9Decode = {
		decodeSegment, dump, monoNsExact, realNsExact, u64str, i64str, isGzip, unzigzag, add64,
		EVENT_NAMES, DEF_NAMES, cutNul, utf8Len,
	};
	return root.D9Decode;
}
if (typeof module !== 'undefined' && module.exports)
	module.exports = d9_decode_module({});
else
	d9_decode_module(typeof self !== 'undefined' ? self : this);
