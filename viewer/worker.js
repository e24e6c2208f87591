/* worker.js: the Web Worker side of the viewer: inflates gzip input (DecompressionStream), decodes
 * every segment and builds the model (model.js), then hands it to the page with its typed arrays
 * transferred, not copied. The page starts it from a Blob made of the source of this function and
 * of the decoder and model modules (Function.toString), so it also works from file:// and inside
 * the single-file report of `d9-analyze html`. Never touches the network. */
function d9_worker_main(self) {
	'use strict';

	/* Inflates a gzip file. A damaged or cut stream keeps what was inflated before the damage. */
	async function gunzip(buf) {
		const out = [];
		let n = 0, err = null;
		try {
			const ds = new DecompressionStream('gzip');
			const reader = new Blob([buf]).stream().pipeThrough(ds).getReader();
			for (;;) {
				const r = await reader.read();
				if (r.done) break;
				out.push(r.value);
				n += r.value.length;
			}
		} catch (e) {
			err = String(e && e.message || e);
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
