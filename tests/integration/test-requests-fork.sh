#!/usr/bin/env bash
# test-requests-fork.sh: zero-code requests (D9_REQUESTS=1) in a server that forks a child per
# request, as Apache's prefork does for a CGI: req-fork.c, one epoll loop, forks a child for each
# request that closes the client socket it inherited and exits at once, waits for it, answers.
# A python client sends 20 requests on one keep-alive connection, then /quit.
#   - requests-fork: the server's trace holds the 20 requests, each answered (bytes out, not
#     closed, not unanswered), and no child wrote a segment: the children's close of the
#     inherited socket ended the parent's open request as closed unanswered, which started each
#     child's agent and wrote a segment per request (21 segments; with many, the directory budget
#     then deleted the parent's trace: seen with Apache prefork and mod_cgi).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=requests-fork
pl_need_built "$NAME"
pl_env "$NAME"
if ! cc -O2 -o "$T/req-fork" "$PL_ROOT/tests/integration/req-fork.c" 2>"$T/cc.err"; then
	pl_fail "$NAME" "cannot build req-fork.c: $(head -c 300 "$T/cc.err")"
	exit 0
fi
mkdir -m 0700 "$T/trace"
coproc SRV { LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace/t.bin" D9_REQUESTS=1 \
	timeout -s KILL 60 "$T/req-fork" 0 2>"$T/stderr"; }
cpid=$SRV_PID
port= spid=
read -r -t 30 _ port _ spid <&"${SRV[0]}"
if [ -z "$port" ]; then
	pl_fail "$NAME" "the server did not start (stderr: $(head -c 300 "$T/stderr"))"
	exit 0
fi
sent=$(timeout 60 python3 - "$port" 20 <<'PYEOF' 2>&1
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=30)
def req(path):
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
    data = b""
    while not data.endswith(b"ok\n"):
        b = s.recv(4096)
        if not b:
            raise SystemExit("the server closed the connection")
        data += b
for i in range(n):
    req("/r")
req("/quit")
print("sent %d" % n)
PYEOF
)
wait "$cpid"
rc=$?
res=$("$PL_ANALYZE" requests --json "$T/trace" 2>"$T/analyze.err" | python3 -c '
import json, sys
pid, segs = int(sys.argv[1]), sys.argv[2].split()
reqs = [json.loads(l) for l in sys.stdin if l.strip()]
mine = [r for r in reqs if r["pid"] == pid and r["fd"] >= 0]
others = [s for s in segs if ".%d." % pid not in s]
bad = [r["id"] for r in mine if r["closed"] or r["no_response"] or r["bytes_out"] != 41]
if others:
    print("FAIL %d segment(s) of other processes (the children): %s" % (len(others), " ".join(others[:4])))
elif len(mine) < 20:
    print("FAIL %d request(s) of the server found, 20 sent" % len(mine))
elif bad:
    print("FAIL requests closed, unanswered or with the wrong bytes out: %s" % bad[:5])
else:
    print("OK %d requests of the server, all answered; the 20 children wrote nothing" % len(mine))
' "$spid" "$(pl_trace_files "$T/trace" | tr '\n' ' ')" 2>&1)
if [ "$rc" != 0 ] || [ "$sent" != "sent 20" ]; then
	pl_fail "$NAME" "server exit $rc, client: $sent (stderr: $(head -c 300 "$T/stderr"))"
elif [[ "$res" == OK* ]]; then
	pl_pass "$NAME" "${res#OK }"
else
	pl_fail "$NAME" "${res#FAIL }"
fi
