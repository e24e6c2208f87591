/* inputs.js: the segment files named by command-line arguments (files, or directories whose
 * .bin, .bin.gz and .active files are taken in name order), for the node checks of the viewer's
 * decoder (gaps.js, parity.js). */
'use strict';
const fs = require('fs');
const path = require('path');

function expandInputs(args) {
	const out = [];
	for (const a of args) {
		if (fs.statSync(a).isDirectory()) {
			for (const f of fs.readdirSync(a).sort())
				if (/\.(bin|bin\.gz|active)$/.test(f)) out.push(path.join(a, f));
		} else {
			out.push(a);
		}
	}
	return out;
}

module.exports = { expandInputs };
