#!/usr/bin/env bash
# test-real-memcached.sh: Debian's memcached -t 4, started by root with -u nobody (it gives up
# root itself, before it starts its threads), on 127.0.0.1 and a free port, under
# LD_PRELOAD=build/libd9agent.so with a root-owned 0700 trace directory. A Python client makes
# 8 connections of 200 set/get pairs each (bounded), then memcached gets SIGTERM.
#   - memcached-thread-names: the trace holds four threads named mc-worker (memcached's main
#     thread names each worker with pthread_setname_np after creating it, so the name can come
#     after the worker first recorded), all of them workers of memcached's process, which
#     recorded its drop to nobody.
# Skips (counted, with the reason) without memcached, when not root, or without user nobody.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=memcached
pl_need_built "$NAME"
pl_program MEMCACHED "$NAME" memcached /usr/bin memcached || exit 0
if [ "$(id -u)" != 0 ] || ! NUID=$(id -u nobody 2>/dev/null); then
	pl_skip "$NAME" "needs root and the user nobody (memcached -u nobody)"
	exit 0
fi
pl_env "$NAME"

PORT=$(pl_free_port)
mkdir -m 0700 "$T/trace"
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace" D9_FLUSH_INTERVAL=50ms \
	"$MEMCACHED" -t 4 -u nobody -l 127.0.0.1 -p "$PORT" -U 0 >"$T/stdout" 2>"$T/stderr" &
MPID=$!
PL_PIDS+=("$MPID")
serving() { python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' "$PORT" 2>/dev/null; }
if ! d9_wait_for 30 serving; then
	pl_fail "$NAME" "memcached did not start serving: $(head -c 300 "$T/stderr")"
	exit 0
fi
timeout -s KILL 120 python3 - "$PORT" >"$T/client.out" 2>&1 <<'PY'
import socket, sys
port = int(sys.argv[1])
for c in range(8):
    s = socket.create_connection(("127.0.0.1", port), 10)
    for i in range(200):
        s.sendall(b"set k%d 0 0 5\r\nhello\r\nget k%d\r\n" % (i, i))
        buf = b""
        while not buf.endswith(b"END\r\n"):
            r = s.recv(4096)
            if not r:
                sys.exit("connection closed")
            buf += r
        if b"VALUE k%d 0 5\r\nhello" % i not in buf:
            sys.exit("bad reply %r" % buf[:100])
    s.close()
print("ok")
PY
crc=$?
kill -TERM "$MPID"
gone() { ! pl_alive "$MPID"; }
if ! d9_wait_for 60 gone; then
	pl_fail "$NAME" "memcached did not stop within 60 s of SIGTERM"
	exit 0
fi
wait "$MPID" 2>/dev/null
if [ "$crc" != 0 ]; then
	pl_fail "$NAME-thread-names" "the client failed: $(head -c 300 "$T/client.out")"
	exit 0
fi
d9_wait_settled "$T/trace/d9-uid-$NUID" || true # sealed: a compression the exit left stays .bin
"$PL_ANALYZE" summary --json "$T/trace" >"$T/summary.json" 2>"$T/analyze.err"
arc=$?
python3 - "$NAME-thread-names" "$T/summary.json" "$arc" "$MPID" "$NUID" "$T/analyze.err" <<'PY'
import json, sys
name, js, arc, mpid, nuid, aerr = sys.argv[1:]
def check():
    if arc != "0":
        return "d9-analyze summary exited %s: %s" % (arc, open(aerr).read()[:300])
    s = json.load(open(js))
    procs = dict((p["pid"], p) for p in s["processes"])
    if int(mpid) not in procs:
        return "no series of memcached (%s): processes %s" % (mpid, sorted(procs))
    pv = procs[int(mpid)].get("privileges")
    if not pv or pv["to_uid"] != int(nuid):
        return "memcached's drop to nobody is not in the summary: %s" % pv
    names = sorted(w["name"] for w in s["workers"] if w["pid"] == int(mpid))
    if names.count("mc-worker") != 4:
        return "worker names %s, expected four mc-worker" % names
    return None
why = check()
print("FAIL %s: %s" % (name, why) if why else "PASS %s: four mc-worker threads" % name)
PY
