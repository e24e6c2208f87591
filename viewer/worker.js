/* worker.js: the Web Worker side of the viewer: inflates gzip input (DecompressionStream), decodes
 * every segment and builds the model (model.js), then hands it to the page with its typed arrays
 * transferred, not copied. The page starts it from a Blob made of the source of this function and
 * of the decoder and model modules (Function.toString), so it also works from file:// and inside
 * the single-file report of `d9-analyze html`. Never touches the network. */
function d9_worker_main(self) {
	'use strict';

	/* Inflates one gzip stream into out (an array of chunks); returns the bytes added and the
	 * error, if any. A damaged or cut stream keeps what was inflated before the damage. */
	async function inflate(bytes, out) {
		let n = 0;
		try {
			const ds = new DecompressionStream('gzip');
			const reader = new Blob([bytes]).stream().pipeThrough(ds).getReader();
			for (;;) {
				const r = await reader.read();
				if (r.done) break;
				out.push(r.value);
				n += r.value.length;
			}
		} catch (e) {
			return { n, err: String(e && e.message || e) };
		}
		return { n, err: null };
	}

	/* The members of a segment the agent compressed (FORMAT.md, "Compressed segments"): each
	 * gzip member's extra field "D9" holds its length. Returns [offset, length] pairs, the last one
	 * cut to what the file holds, or null for any other gzip file (inflated as one stream).
	 * Browsers differ on gzip files of several members; one stream per member works in all. */
	function d9Members(u8) {
		const out = [];
		let off = 0;
		while (off < u8.length) {
			const h = u8.subarray(off, off + 20);
			const ours = h.length === 20 && h[0] === 0x1f && h[1] === 0x8b && h[2] === 8 &&
				(h[3] & 4) && h[10] === 8 && h[11] === 0 && h[12] === 0x44 && h[13] === 0x39 &&
				h[14] === 4 && h[15] === 0;
			const len = ours ? (h[16] | h[17] << 8 | h[18] << 16 | h[19] << 24) >>> 0 : 0;
			if (!ours || len < 28) {
				if (!off)
					return null;
				out.push([off, u8.length - off]); /* damaged: inflating it says so */
				break;
			}
			out.push([off, Math.min(len, u8.length - off)]);
			off += len;
		}
		return out;
	}

	/* Inflates a gzip file, member by member when the agent wrote it. */
	async function gunzip(buf) {
		const out = [];
		let n = 0, err = null;
		const members = d9Members(buf) || [[0, buf.length]];
		for (const [off, len] of members) {
			const r = await inflate(buf.subarray(off, off + len), out);
			n += r.n;
			if ((err = r.err))
				break;
		}
		const u8 = new Uint8Array(n);
		let p = 0;
		for (const c of out) {
			u8.set(c, p);
			p += c.length;
		}
		return { u8, err };
	}

	self.onmessage = async (msg) => {
		const files = msg.data.files;
		const t0 = Date.now();
		try {
			const b = new self.D9Model.Builder({ names: msg.data.names || null });
			let i = 0;
			for (const f of files) {
				let u8 = new Uint8Array(f.buffer);
				let note = null;
				if (self.D9Decode.isGzip(u8)) {
					const g = await gunzip(u8);
					u8 = g.u8;
					if (g.err)
						note = 'gzip data ends early or is damaged after ' + u8.length + ' inflated bytes (' + g.err + ')';
				}
				b.add(f.name, u8, note);
				if (note)
					b.problems.push({ file: f.name, kind: 'truncated', offset: u8.length, message: note });
				self.postMessage({ progress: 'read ' + (++i) + '/' + files.length + ' files' });
			}
			let last = 0;
			b.decodeAll((done, total, events) => {
				const now = Date.now();
				if (now - last > 200) {
					last = now;
					self.postMessage({ progress: 'decoding: ' + Math.round(100 * done / total) + '%, ' + events + ' events' });
				}
			});
			const m = b.finish();
			m.decodeMs = Date.now() - t0;
			self.postMessage({ model: m }, self.D9Model.transferables(m));
		} catch (e) {
			self.postMessage({ error: String(e && e.stack || e) });
		}
	};
}
if (typeof module === 'undefined' && typeof window === 'undefined' && typeof self !== 'undefined')
	d9_worker_main(self);
