#!/usr/bin/env bash
# test-analyze-xwake.sh: wakes across threads are paired with polls in time order (analyze/wakes.c).
#   uv-http (tests/servers/uv-http.c) under the agent with a pool of one thread: 3 /async
#   (uv_async_send from the notifier thread, async_cb polled on the loop thread), /work?hold=1 and,
#   queued behind it, /work?ms=10 (Spawn + spawn Wake on the loop thread, work_cb polled on the pool
#   thread), /release, /quit. From `d9-analyze jsonl` the test pairs each coroutine's first Wake
#   since its previous PollStart with its next PollStart BY TIME (timers from their deadline) and
#   counts the coroutines alive at the end, and checks that `summary --json` agrees: per location
#   and per wake kind the same count, and total, p50, p90, max within 1 us; the same alive count;
#   `chrome` draws one wake -> poll flow per pair, spanning the same delays.
#   The viewer's model (viewer/model.js in node) must draw the same delays (within 1 us). A
#   cross-thread wake must be among the pairs (else the run tests nothing); whether file order
#   would have paired differently is said in the PASS line. A run whose trace has a gap (a drop
#   under load: no exact comparison) is made again, 3 runs at most.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_need_built analyze-xwake
UV_HTTP=$PL_ROOT/build/tests/uv-http
if [ ! -x "$UV_HTTP" ]; then
	pl_skip analyze-xwake "$UV_HTTP is not built (make all; needs libuv1-dev)"
	exit 0
fi
for b in curl python3; do
	if ! command -v "$b" >/dev/null; then
		pl_fail analyze-xwake "$b is not installed (make deps)"
		exit 0
	fi
done
pl_env analyze-xwake

# stats_is KEY VALUE: the server's /stats has KEY (a path: requests.work) at VALUE or more.
stats_is() {
	curl -sS --max-time 5 "http://127.0.0.1:$SPORT/stats" 2>/dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[k]
sys.exit(0 if v >= int(sys.argv[2]) else 1)' "$1" "$2"
}

# run_once N: the server's run in $T/uvN (exits the script on a failure), then the analyzer's
# outputs in $T.
run_once() {
	if ! pl_start "$T/uv$1" "$UV_HTTP" UV_THREADPOOL_SIZE=1 --; then
		pl_fail analyze-xwake "$PL_ERR"
		exit 0
	fi
	ok=1
	pl_gets 3 /async "async" || { pl_fail analyze-xwake-requests "$PL_ERR"; ok=0; }
	curl -sS --max-time 60 -o "$T/work1-$1" "http://127.0.0.1:$SPORT/work?hold=1" 2>/dev/null &
	w1=$!
	d9_wait_for 30 stats_is work_holding 1 || { pl_fail analyze-xwake-requests "work_hold did not start within 30 s"; ok=0; }
	curl -sS --max-time 60 -o "$T/work2-$1" "http://127.0.0.1:$SPORT/work?ms=10" 2>/dev/null &
	w2=$!
	d9_wait_for 30 stats_is requests.work 2 || { pl_fail analyze-xwake-requests "the second /work was not queued within 30 s"; ok=0; }
	pl_get /release
	[ "$BODY" = "released" ] || { pl_fail analyze-xwake-requests "/release: $CODE '$BODY'"; ok=0; }
	wait "$w1" "$w2"
	pl_gets 2 /async "async" || { pl_fail analyze-xwake-requests "$PL_ERR"; ok=0; }
	pl_quit
	if [ "$SRC" != 0 ]; then
		pl_fail analyze-xwake "uv-http exit status $SRC, stderr '$(head -c 300 "$SDIR/stderr")'"
		exit 0
	fi
	[ "$ok" = 1 ] || exit 0

	"$PL_ANALYZE" jsonl "$SDIR/trace" >"$T/events.jsonl" 2>"$T/jsonl.err"
	rc1=$?
	"$PL_ANALYZE" summary --json "$SDIR/trace" >"$T/summary.json" 2>"$T/summary.err"
	rc2=$?
	"$PL_ANALYZE" chrome -o "$T/chrome.json" "$SDIR/trace" 2>"$T/chrome.err"
	rc3=$?
	if [ "$rc1" != 0 ] || [ "$rc2" != 0 ] || [ "$rc3" != 0 ]; then
		pl_fail analyze-xwake "jsonl exit $rc1, summary exit $rc2, chrome exit $rc3: $(head -c 300 "$T/jsonl.err" "$T/summary.err" "$T/chrome.err")"
		exit 0
	fi
}

# a trace with a gap (a drop, on a loaded machine) cannot be compared exactly: up to 3 runs
for attempt in 1 2 3; do
	run_once "$attempt"
	python3 -c '
import json, sys
dq = json.load(open(sys.argv[1]))["data_quality"]
drops = sum(1 for l in open(sys.argv[2]) if json.loads(l)["type"] == "Dropped")
sys.exit(1 if dq["sched_delay_unknown"] or drops else 0)' "$T/summary.json" "$T/events.jsonl" && break
done

# the viewer's model (viewer/model.js, in node as in the page's worker): each drawn poll's delay
# from its wake (start - wakeT), in ns, as a JSON list; {"skip": why} without node
if command -v node >/dev/null; then
	node - "$PL_ROOT" "$SDIR/trace" >"$T/viewer.json" 2>"$T/viewer.err" <<'JSEOF'
'use strict';
const fs = require('fs'), path = require('path'), zlib = require('zlib');
const [root, dir] = process.argv.slice(2);
const D = require(path.join(root, 'viewer/decode.js'));
const Model = require(path.join(root, 'viewer/model.js'));
const b = new Model.Builder();
for (const f of fs.readdirSync(dir).filter((x) => /\.(bin|bin\.gz|active)$/.test(x))) {
	let u8 = fs.readFileSync(path.join(dir, f));
	if (D.isGzip(u8)) u8 = zlib.gunzipSync(u8);
	b.add(f, new Uint8Array(u8.buffer, u8.byteOffset, u8.length));
}
b.decodeAll();
const m = b.finish(), delays = [];
for (const l of m.lanes)
	for (let i = 0; i < l.polls.n; i++)
		if (l.polls.wakeKind[i] >= 0)
			delays.push(Math.max(0, l.polls.start[i] - l.polls.wakeT[i]));
console.log(JSON.stringify({ delays }));
JSEOF
	[ $? = 0 ] || echo "{\"error\": \"node: $(head -c 200 "$T/viewer.err" | tr -d '"\\\n')\"}" >"$T/viewer.json"
else
	echo '{"skip": "node is not installed"}' >"$T/viewer.json"
fi

python3 - "$T/events.jsonl" "$T/summary.json" "$T/viewer.json" "$T/chrome.json" <<'PYEOF'
import json, math, sys

events = [json.loads(l) for l in open(sys.argv[1])]
summary = json.load(open(sys.argv[2]))
WAKE_KINDS = ["other", "fd", "timer", "cond", "mutex", "join", "interrupt", "spawn"]

def fail(why):
    print("FAIL analyze-xwake: " + why)
    sys.exit(0)

dq = summary["data_quality"]
drops = [e for e in events if e["type"] == "Dropped"]
if dq["sched_delay_unknown"] or drops:
    fail("the trace has gaps: sched_delay_unknown %d, Dropped %s: nothing to compare exactly"
         % (dq["sched_delay_unknown"], [(e["tid"], e["reason"], e["count"]) for e in drops]))
pids = {e["pid"] for e in events}
if len(pids) != 1:
    fail("want one process, the trace has %s" % sorted(pids))

def pairs(order):
    """(location, kind, delay_ns, wake tid, poll tid) per PollStart that followed a Wake: the
    coroutine's first Wake since its previous PollStart, in the given event order; and the
    coroutines alive at the end (seen by Spawn, Wake or PollStart, not exited since)."""
    pending, out, alive = {}, [], set()
    for e in order:
        t = e["type"]
        if t == "Wake" and e["woken"]:
            alive.add(e["woken"])
            if e["woken"] not in pending:
                at = e["mono_ns"]
                if e["kind"] == "timer" and e["deadline_ns"] < at:
                    at = e["deadline_ns"]
                pending[e["woken"]] = (at, e["kind"], e["tid"])
        elif t == "PollStart" and e["coroutine"]:
            alive.add(e["coroutine"])
            w = pending.pop(e["coroutine"], None)
            if w:
                out.append((e["location"], w[1], max(0, e["mono_ns"] - w[0]), w[2], e["tid"]))
        elif t == "Spawn" and e["coroutine"]:
            alive.add(e["coroutine"])
        elif t == "CoroutineExit":
            alive.discard(e["coroutine"])
            pending.pop(e["coroutine"], None)
    return out, len(alive)

# by time; equal times keep file order (one thread's events are in time order in its chunks)
by_time, alive = pairs(sorted(events, key=lambda e: e["mono_ns"]))
by_file, alive_file = pairs(events)
cross = [p for p in by_time if p[3] != p[4]]
if not cross:
    fail("no wake from another thread was followed by a poll: this run tests nothing")

def nearest_rank(v, p):
    v = sorted(v)
    return v[max(1, math.ceil(p / 100.0 * len(v))) - 1] if v else 0

def stats(v):
    return {"count": len(v), "total_ns": sum(v), "p50_ns": nearest_rank(v, 50),
            "p90_ns": nearest_rank(v, 90), "max_ns": max(v) if v else 0}

def compare(what, got, want, errs):
    if got["count"] != want["count"]:
        errs.append("%s: %d scheduling delays, want %d" % (what, got["count"], want["count"]))
        return
    for k in ("total_ns", "p50_ns", "p90_ns", "max_ns"):
        if abs(got[k] - want[k]) > 1000:
            errs.append("%s: %s %d, want %d (by time)" % (what, k, got[k], want[k]))

errs = []
locs = {}
for p in by_time:
    locs.setdefault(p[0], []).append(p[2])
got_locs = {}
for l in summary["locations"]:
    if l["sched_delay"]["count"]:
        if l["name"] in got_locs:
            errs.append("location %r listed twice" % l["name"])
        got_locs[l["name"]] = l["sched_delay"]
for name in sorted(set(locs) | set(got_locs), key=str):
    compare("location %r" % name, got_locs.get(name, {"count": 0}), stats(locs.get(name, [])), errs)
kinds = {}
for p in by_time:
    kinds.setdefault(p[1], []).append(p[2])
got_kinds = {k["kind"]: k for k in summary["sched_delay"]["by_kind"]}
compare("all", summary["sched_delay"], stats([p[2] for p in by_time]), errs)
for k in sorted(set(kinds) | set(got_kinds)):
    compare("kind %s" % k, got_kinds.get(k, {"count": 0}), stats(kinds.get(k, [])), errs)
# chrome: one wake -> poll flow per pair, from the Wake to the PollStart (no timer here: the
# delay is their distance; "ts" is in us with ns decimals)
flows = {}
for e in json.load(open(sys.argv[4]))["traceEvents"]:
    if e.get("cat") == "wake" and e["ph"] in ("s", "f"):
        flows.setdefault(e["id"], {})[e["ph"]] = e["ts"]
got = sorted(round((f["f"] - f["s"]) * 1000) for f in flows.values() if "s" in f and "f" in f)
want = sorted(p[2] for p in by_time if p[1] != "timer")
if len(got) != len(flows) or len(got) != len(want) or any(abs(a - b) > 1000 for a, b in zip(got, want)):
    errs.append("chrome's wake flows span %s ns, want %s" % (got, want))
if summary["coroutines"]["alive"] != alive:
    errs.append("alive %d, want %d (by time; file order: %d)" % (summary["coroutines"]["alive"], alive,
                                                                  alive_file))
if errs:
    fail("; ".join(errs[:6]))
viewer = json.load(open(sys.argv[3]))
if "skip" in viewer:
    print("SKIP analyze-xwake-viewer: " + viewer["skip"])
elif "error" in viewer:
    print("FAIL analyze-xwake-viewer: " + viewer["error"])
else:
    got, want = sorted(viewer["delays"]), sorted(p[2] for p in by_time)
    if len(got) != len(want) or any(abs(a - b) > 1000 for a, b in zip(got, want)):
        print("FAIL analyze-xwake-viewer: the viewer's delays (ns) %s, want %s (by time)"
              % ([round(x) for x in got], want))
    else:
        print("PASS analyze-xwake-viewer: the viewer's %d scheduling delays are the by-time ones"
              % len(got))
names = sorted({(p[0] or "?").split(" uv-http")[0] for p in cross})
differs = sorted(by_file) != sorted(by_time) or alive_file != alive
print("PASS analyze-xwake: %d scheduling delays (%d from a wake on another thread: %s) and %d alive"
      " coroutines as by time; file order would %s" % (len(by_time), len(cross), ", ".join(names), alive,
      "differ (%d pairs, %d alive)" % (len(by_file), alive_file) if differs else "have agreed this run"))
PYEOF
