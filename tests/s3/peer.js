// peer.js: the S3 protocol peer of tests/integration/test-s3.sh: npm's s3rver 3.7.1 (it knows
// the access key S3RVER but does not verify SigV4 signatures: tests/s3/sigcheck.py does) with two
// additions:
//  - every request is appended to LOG as one JSON line (method, url, headers) so the test can
//    verify each signature independently (botocore) and see which headers were sent;
//  - MODE_FILE (read at each request) makes it answer "403", "500", or "slow" (6 s before
//    answering); absent or "ok": normal.
// s3rver 3.7.1's filesystem store never descends below the first delimiter of a listing, so a
// ListObjectsV2 with delimiter '/' finds no key two levels down (no CommonPrefixes at all for
// d9's keys); listObjects is wrapped to list without the delimiter and fold keys into common
// prefixes as S3 does.
// usage: node peer.js PORT DIR BUCKET LOG MODE_FILE
'use strict';
const fs = require('fs');
const path = require('path');
const S3rver = require('s3rver');
const FilesystemStore = require('s3rver/lib/stores/filesystem');

const [port, dir, bucket, log, modeFile] = process.argv.slice(2);

const list = FilesystemStore.prototype.listObjects;
FilesystemStore.prototype.listObjects = async function (b, options) {
  const { delimiter = '', prefix = '', maxKeys = Infinity } = options;
  if (!delimiter) return list.call(this, b, options);
  const all = await list.call(this, b, { ...options, delimiter: '', maxKeys: Infinity });
  const prefixes = new Set();
  const objects = [];
  for (const o of all.objects) {
    const idx = o.key.slice(prefix.length).indexOf(delimiter);
    if (idx !== -1) prefixes.add(o.key.slice(0, prefix.length + idx + 1));
    else if (objects.length < maxKeys) objects.push(o);
  }
  return { objects, commonPrefixes: [...prefixes].sort(), isTruncated: false };
};

const server = new S3rver({
  port: Number(port),
  address: '127.0.0.1',
  directory: dir,
  silent: true,
  configureBuckets: [{ name: bucket }],
});

function mode() {
  try {
    return fs.readFileSync(modeFile, 'utf8').trim();
  } catch (e) {
    return 'ok';
  }
}

server.middleware.unshift(async (ctx, next) => {
  fs.appendFileSync(log, JSON.stringify({
    method: ctx.method, url: ctx.url, headers: ctx.headers, mode: mode(),
  }) + '\n');
  const m = mode();
  if (m === 'slow') await new Promise((r) => setTimeout(r, 6000));
  if (m === '403' || m === '500') {
    ctx.status = Number(m);
    ctx.type = 'application/xml';
    ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' +
      (m === '403' ? 'AccessDenied' : 'InternalError') + '</Code></Error>';
    return;
  }
  await next();
});

server.run().then((addr) => {
  fs.writeFileSync(path.join(dir, 'ready'), String(addr.port));
}, (err) => {
  console.error(err);
  process.exit(1);
});
