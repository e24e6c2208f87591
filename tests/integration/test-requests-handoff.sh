#!/usr/bin/env bash
# test-requests-handoff.sh: zero-code requests (D9_REQUESTS=1) that end on another thread than
# they began, as a thread pool hands a connection over (Apache's event MPM: 959 of its requests
# were "left out: a gap in the data" with no data missing). req-handoff.c reads each request on
# its epoll loop and answers it on another thread; a python client makes 20 requests, one
# connection each, then /quit:
#   - requests-handoff: the 20 requests are in `requests --json`, each with its duration, marked
#     moved_threads with the answering thread's tid, its waiting time null (the split is the
#     first thread's), and none is left out.
#   - requests-handoff-viewer: the viewer's model (in node) draws as many requests (SKIP without
#     node).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=requests-handoff
pl_need_built "$NAME"
pl_env "$NAME"
if ! cc -O2 -pthread -o "$T/req-handoff" "$PL_ROOT/tests/integration/req-handoff.c" 2>"$T/cc.err"; then
	pl_fail "$NAME" "cannot build req-handoff.c: $(head -c 300 "$T/cc.err")"
	exit 0
fi
mkdir -m 0700 "$T/trace"
coproc SRV { LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace/t.bin" D9_REQUESTS=1 \
	timeout -s KILL 60 "$T/req-handoff" 2>"$T/stderr"; }
cpid=$SRV_PID
port=
read -r -t 30 _ port <&"${SRV[0]}"
if [ -z "$port" ]; then
	pl_fail "$NAME" "the server did not start (stderr: $(head -c 300 "$T/stderr"))"
	exit 0
fi
sent=$(timeout 60 python3 - "$port" 20 <<'PYEOF' 2>&1
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
def req(path):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    if not data.endswith(b"ok\n"):
        raise SystemExit("bad answer %r" % data)
    s.close()
for i in range(n):
    req("/r")
req("/quit")
print("sent %d" % n)
PYEOF
)
wait "$cpid"
rc=$?
"$PL_ANALYZE" requests --json "$T/trace" >"$T/req.json" 2>"$T/analyze.err"
res=$(python3 - "$T/req.json" "$T/analyze.err" <<'PYEOF' 2>&1
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
err = open(sys.argv[2]).read()
moved = [r for r in reqs if r.get("moved_threads")]
bad = [r["id"] for r in moved if r["end_tid"] == r["tid"] or r["waiting_ns"] is not None or
       r["duration_ns"] <= 0 or r["bytes_out"] <= 0]
if "left out" in err:
    print("FAIL requests left out: %s" % err.strip()[:300])
elif len(moved) < 20:
    print("FAIL %d moved request(s) of %d found, 20 sent (stderr: %s)" % (len(moved), len(reqs), err.strip()[:200]))
elif bad:
    print("FAIL moved requests without their end thread, duration or bytes: %s" % bad[:5])
else:
    print("OK %d requests moved threads, each with its duration and its end thread" % len(moved))
PYEOF
)
if [ "$rc" != 0 ] || [ "$sent" != "sent 20" ]; then
	pl_fail "$NAME" "server exit $rc, client: $sent (stderr: $(head -c 300 "$T/stderr"))"
elif [[ "$res" == OK* ]]; then
	pl_pass "$NAME" "${res#OK }"
else
	pl_fail "$NAME" "${res#FAIL }"
fi
if command -v node >/dev/null; then
	v=$(node -e '
const fs = require("fs"), path = require("path");
const Model = require(process.argv[1]);
const b = new Model.Builder();
for (const f of process.argv.slice(2)) { const u8 = fs.readFileSync(f); b.add(path.basename(f), new Uint8Array(u8.buffer, u8.byteOffset, u8.length)); }
b.decodeAll(); const m = b.finish();
let n = 0; for (const l of m.lanes) n += l.requests.n;
console.log(n);' "$PL_ROOT/viewer/model.js" $(pl_trace_files "$T/trace" | sed "s|^|$T/trace/|") 2>&1)
	want=$(grep -c . "$T/req.json")
	if [ "$v" = "$want" ] && [ "$want" -ge 20 ]; then
		pl_pass "$NAME-viewer" "the viewer draws the $v requests"
	else
		pl_fail "$NAME-viewer" "the viewer draws '$v' requests, the analyzer found $want"
	fi
else
	pl_skip "$NAME-viewer" "node is not installed (make deps)"
fi
