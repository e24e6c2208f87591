// node-http.js: an HTTP/1.1 server on Node.js (libuv underneath: Debian's node links libuv1, the
// upstream builds link it in statically), for test-real-node.sh.
//   /burn?ms=N   burn_cpu: N ms of the main thread's CPU in JavaScript, timed by the handler:
//                wall_ns (process.hrtime.bigint(), CLOCK_MONOTONIC) and its start on the wall
//                clock, start_ns (performance.timeOrigin + performance.now(): sub-microsecond,
//                what d9-analyze's polls start at); "burn ms=N"
//   /quit        "bye", then the server closes, writes the burns' times to TRUTH (one JSON object a
//                line: start_ns, wall_ns) and exits 0 after printing "requests R"
//   else         "ok"
// Usage: node node-http.js PORT_FILE TRUTH_FILE (listens on 127.0.0.1, a free port, written to
// PORT_FILE once it listens).
'use strict';
const http = require('http');
const fs = require('fs');
const { performance } = require('perf_hooks');

const [portFile, truthFile] = process.argv.slice(2);
const burns = [];
let requests = 0;

function burn_cpu(ms) {
  const end = process.hrtime.bigint() + BigInt(ms) * 1000000n;
  let x = 0;
  while (process.hrtime.bigint() < end)
    for (let i = 0; i < 1000; i++) x += i;
  return x;
}

const server = http.createServer((req, res) => {
  requests++;
  const u = new URL(req.url, 'http://localhost');
  if (u.pathname === '/burn') {
    const ms = Math.min(Math.max(parseInt(u.searchParams.get('ms'), 10) || 20, 1), 1000);
    const wall = (performance.timeOrigin + performance.now()) * 1e6;
    const start = process.hrtime.bigint();
    burn_cpu(ms);
    burns.push({ start_ns: Math.round(wall), wall_ns: Number(process.hrtime.bigint() - start) });
    res.end(`burn ms=${ms}\n`);
  } else if (u.pathname === '/quit') {
    res.end('bye\n', () => {
      server.close();
      server.closeAllConnections && server.closeAllConnections();
      fs.writeFileSync(truthFile, burns.map((b) => JSON.stringify(b) + '\n').join(''));
      console.log(`requests ${requests}`);
      setImmediate(() => process.exit(0));
    });
  } else {
    res.end('ok\n');
  }
});
server.listen(0, '127.0.0.1', () => fs.writeFileSync(portFile, String(server.address().port)));
