#!/usr/bin/env node
/* dump.js: `node dump.js FILE...` prints what `d9-analyze dump FILE...` prints, decoded by the
 * viewer's JavaScript decoder (viewer/decode.js); gzip input is inflated with zlib first. Used
 * by tests/integration/test-viewer.sh to check the decoder byte for byte (FORMAT.md, section 13).
 * `node dump.js --each DIR FILE...` writes each file's lines to DIR/BASENAME.out instead. */
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const D = require('../../viewer/decode.js');

function dumpFile(f) {
	let u8;
	try {
		u8 = fs.readFileSync(f);
	} catch (e) {
		return ['{"rec":"file","name":' + JSON.stringify(path.basename(f)) + '}',
			'{"rec":"problem","kind":"unreadable","offset":0,"message":"No such file or directory"}'];
	}
	if (D.isGzip(u8)) {
		try {
			u8 = zlib.gunzipSync(u8);
		} catch (e) {
			u8 = new Uint8Array(0); /* damaged gzip: the analyzer's wording is zlib's, not compared */
		}
	}
	return D.dump(path.basename(f), new Uint8Array(u8.buffer, u8.byteOffset, u8.length));
}

let args = process.argv.slice(2), each = null;
if (args[0] === '--each') {
	each = args[1];
	args = args.slice(2);
}
const all = [];
for (const f of args) {
	const lines = dumpFile(f);
	if (each)
		fs.writeFileSync(path.join(each, path.basename(f) + '.out'), lines.join('\n') + '\n');
	else
		all.push(...lines);
}
if (!each)
	process.stdout.write(all.map((l) => l + '\n').join(''));
