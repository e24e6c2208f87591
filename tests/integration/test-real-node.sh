#!/usr/bin/env bash
# test-real-node.sh: Node.js, the most common libuv program, serving HTTP (tests/servers/
# node-http.js) under LD_PRELOAD=build/libd9agent.so. Debian's node (libnode108) calls Debian's
# libuv1 through the shared library: the libuv adapter sees its handles and callbacks. An upstream
# build (NodeSource's, nodejs.org's) links libuv in statically: its calls never reach d9, which
# stays in generic mode (loop turns). Which one this is comes from ldd; the test expects that
# mode and checks the same things in both. wrk loads it for 2 s, then a /burn?ms=5 (V8 compiles
# the burn's code) and three /burn?ms=20 (20 ms of JavaScript on the main thread, timed by the
# handler), each on its own connection, then /quit.
#   - node-served: the server exits 0 after /quit, having served what wrk counted, the burns and
#     the quit (up to wrk's connections more: replies wrk stopped before reading).
#   - node-mode: with a shared libuv, the adapter's units (spawn locations of tcp read_cb polls,
#     at least one poll a request); with a static one, generic mode (no unit spawned, at least
#     4 loop turns: under wrk's load node's loop waits with timeout 0, counted as zero-timeout
#     waits, not turns; the burns and the quit come alone).
#   - node-burn: each burn is inside one poll (libuv: the connection's read_cb) or loop turn
#     (generic) that lasts the handler's time, or up to 10% + 1 ms + 5 ms more (the request's
#     parsing and reply in the same callback, a preemption there on a loaded machine), never less.
#   - node-quality: nothing dropped or damaged, and no BlockingCall but V8's own waits for its
#     helper threads (a garbage collection's safepoint waits on a condition variable: real, with
#     V8's frames on its stack) and the server's own synchronous file writes (its port and truth
#     files: libuv's uv_fs_* on its stack): the server's sockets are non-blocking.
# Skips (counted, with the reason) without node, wrk or curl.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=node
pl_need_built "$NAME"
pl_program NODE "$NAME" node /usr/bin nodejs || exit 0
for b in wrk curl; do
	if ! command -v "$b" >/dev/null; then
		pl_skip "$NAME" "$b is not installed (make deps)"
		exit 0
	fi
done
# D9_TEST_NODE_WRAP: a command to run node (and its ldd) under, for a node that needs one (a
# Debian node unpacked elsewhere, with LD_LIBRARY_PATH); empty by default (read before pl_env
# clears D9_*)
read -r -a WRAP <<<"${D9_TEST_NODE_WRAP:-}"
pl_env "$NAME"
if "${WRAP[@]}" ldd "$NODE" 2>/dev/null | grep -q 'libuv\.so\.1'; then
	MODE=libuv
else
	MODE=generic
fi
mkdir -m 0700 "$T/trace"
# at nice -10 when root (PL_NICE): a burn's turn is checked against the handler's clock, and a
# preemption outside the handler, on a machine busy with other work, would stretch the turn alone
D9_TRACE_PATH="$T/trace/trace.bin" D9_FLUSH_INTERVAL=50ms "${PL_NICE[@]}" "${WRAP[@]}" env LD_PRELOAD="$PL_LIB" \
	"$NODE" "$PL_ROOT/tests/servers/node-http.js" "$T/port" "$T/truth.jsonl" \
	>"$T/stdout" 2>"$T/stderr" &
SPID=$!
PL_PIDS+=("$SPID")
if ! d9_wait_for 30 eval '[ -s "$T/port" ] || ! pl_alive "$SPID"' || [ ! -s "$T/port" ]; then
	pl_fail "$NAME" "node did not listen: $(head -c 300 "$T/stderr")"
	exit 0
fi
PORT=$(cat "$T/port")
timeout -s KILL 60 wrk -t 1 -c 4 -d 2s "http://127.0.0.1:$PORT/" >"$T/wrk.out" 2>&1
# a first, shorter burn compiles burn_cpu (V8's JIT) outside the three that are checked
for ms in 5 20 20 20; do
	curl -sS --max-time 20 "http://127.0.0.1:$PORT/burn?ms=$ms" >>"$T/burns" 2>&1
done
curl -sS --max-time 20 "http://127.0.0.1:$PORT/quit" >"$T/quit" 2>&1
gone() { ! pl_alive "$SPID"; }
if ! d9_wait_for 60 gone; then
	pl_fail "$NAME" "node did not exit within 60 s of /quit"
	kill -KILL "$SPID" 2>/dev/null
	exit 0
fi
wait "$SPID"
rc=$?
sent=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$T/wrk.out")
d9_wait_settled "$T/trace" || true # sealed: a compression the exit left stays .bin
"$PL_ANALYZE" summary --json --top 100 --min 10ms "$T/trace" >"$T/summary.json" 2>"$T/analyze.err"
arc=$?
python3 - "$MODE" "$rc" "${sent:-0}" "$T/stdout" "$T/truth.jsonl" "$T/summary.json" "$arc" \
	"$T/analyze.err" "$T/burns" "$T/quit" <<'PY'
import json, sys
mode, rc, sent, out, truth, js, arc, aerr, burns, quit = sys.argv[1:]
sent = int(sent)
def result(case, why, info=""):
    print("FAIL %s: %s" % (case, why) if why else "PASS %s%s" % (case, ": " + info if info else ""))
served = [int(l.split()[1]) for l in open(out) if l.startswith("requests ")]
def serving():
    if rc != "0" or not served:
        return "node exited %s, printed %s" % (rc, open(out).read()[:200])
    if open(burns).read() != "burn ms=5\n" + "burn ms=20\n" * 3 or open(quit).read() != "bye\n":
        return "replies %r, %r" % (open(burns).read()[:100], open(quit).read()[:50])
    if sent < 100 or not sent + 5 <= served[0] <= sent + 5 + 4:
        return "node served %d requests, wrk counted %d (+ 4 burns and the quit)" % (served[0], sent)
    return None
result("node-served", serving(), "%d requests, wrk counted %d" % (served[0] if served else 0, sent))
s = json.load(open(js)) if arc == "0" else None
if not s:
    why = "d9-analyze summary exited %s: %s" % (arc, open(aerr).read()[:300])
    for c in ("node-mode", "node-burn", "node-quality"):
        result(c, why)
    sys.exit(0)
n = served[0] if served else sent
polls = sum(w["polls"] for w in s["workers"])
def which():
    if mode == "libuv":
        if s["mode"] != "coroutines":
            return "a shared libuv, but the trace is in %s mode" % s["mode"]
        reads = [l for l in s["locations"] if "read_cb" in (l.get("name") or l.get("location") or "")]
        if not reads:
            return "no read_cb spawn location: %s" % [l.get("name") or l.get("location") for l in s["locations"]][:8]
        if polls < n:
            return "%d polls for %d requests" % (polls, n)
        return None
    if s["mode"] == "coroutines" or s["coroutines"]["spawned"]:
        return "a static libuv (generic mode expected), but %s mode, %d units spawned" % (s["mode"], s["coroutines"]["spawned"])
    # under wrk's load the loop never sleeps (node waits with timeout 0 while it has work:
    # zero-timeout waits, not turns); the burns and the quit, each alone, are a turn each
    if polls < 4:
        return "%d loop turns for %d requests" % (polls, n)
    return None
result("node-mode", which(), "%s: %s mode, %d %s for %d requests" % (mode, s["mode"], polls,
       "polls" if s["mode"] == "coroutines" else "loop turns", n))
def burn():
    bs = [json.loads(l) for l in open(truth)]
    if len(bs) != 4:
        return "the server timed %d burns, want 4" % len(bs)
    bs = bs[1:]
    got = []
    for b in bs:
        st, w = b["start_ns"], b["wall_ns"]
        # the poll or turn holding the burn: it starts before it and ends after it (2 ms either
        # way for the two clocks), the longest of those
        hold = [p for p in s["long_polls"] if p["start_ns"] <= st + 2e6 and
                p["start_ns"] + p["duration_ns"] >= st + w - 2e6]
        if not hold:
            return "no poll of at least 10 ms holds the burn at %d (%.2f ms); the longest: %s" % (
                st, w / 1e6, [(p["start_ns"], p["duration_ns"]) for p in s["long_polls"][:5]])
        d = max(p["duration_ns"] for p in hold)
        if not w <= d <= w * 1.1 + 1e6 + 5e6:
            return "the burn of %.2f ms is in a %s of %.2f ms" % (w / 1e6, "poll" if mode == "libuv" else "loop turn", d / 1e6)
        got.append("%.2f in %.2f ms" % (w / 1e6, d / 1e6))
    return got
r = burn()
result("node-burn", r if isinstance(r, str) else None, ", ".join(r) if isinstance(r, list) else "")
def quality():
    q = s["data_quality"]
    bad = {k: q[k] for k in ("unreadable", "damaged_files", "truncated_segments", "corrupt_segments",
                             "corrupt_chunks", "bad_events", "seq_gaps") if q.get(k)}
    if bad:
        return "data quality %s" % bad
    dropped = s["drops"]
    if any(v for k, v in dropped.items() if isinstance(v, (int, float))):
        return "drops %s" % dropped
    # the server's sockets never block (non-blocking); V8 does wait for its helper threads (a
    # garbage collection's safepoint waits on a condition variable), and the server writes its
    # port and truth files with fs.writeFileSync (libuv's uv_fs_* on the main thread): such
    # waits are real, and their stacks say whose they are
    def real(b):
        st = b.get("stack") or []
        if b["call"] in SYNC and any(f.startswith(("v8::", "node::")) for f in st):
            return True
        return any("uv_fs_" in f or "uv__fs_" in f for f in st)
    own = [b for b in s["blocking_calls"] if not real(b)]
    if own:
        return "BlockingCalls other than V8's waits and the server's file writes: %s" % str(own)[:300]
    return None
SYNC = ("pthread_cond_wait", "pthread_cond_timedwait", "pthread_mutex_lock", "sem_wait")
v8 = sum(b["count"] for b in s["blocking_calls"])
result("node-quality", quality(), "%d events, nothing dropped, %d BlockingCalls (V8's waits, file writes)" % (s["events"], v8))
PY
