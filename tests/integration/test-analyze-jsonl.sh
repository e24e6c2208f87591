#!/usr/bin/env bash
# test-analyze-jsonl.sh: `d9-analyze jsonl` (sanitizer build). First the fuzz corpus
# (tests/fuzz/corpus, .gz files also gunzipped) goes through it one file at a time: no sanitizer
# report, exit 0, 3 or 4, and every output line parses as JSON. Then a real trace of the State
# Threads test server (3 x /fast, /sleep?ms=50, /block?ms=30, /fanout?k=4, the control session):
#   - per event type, as many lines as `d9-analyze dump` has events of that type;
#   - every line has exactly the keys README.md, "jsonl schema", lists for its type;
#   - the /block?ms=30 BlockingCall: call "usleep", >= 29 ms, a stack with handle_block in it;
#   - timer wakes (the 50 ms sleep, the 4 fan-out children): lateness_ns >= 0, and
#     deadline_ns + lateness_ns = mono_ns;
#   - --pid and --from/--to keep exactly the events of that process / of that window.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup analyze-jsonl
pl_san_setup analyze-jsonl || exit 0

# ---- the fuzz corpus: hostile input --------------------------------------------------------------
pl_corpus_unpack
bad=() files=0 lines=0
mkdir -p "$T/cj"
for f in "$PL_ROOT"/tests/fuzz/corpus/* "$T"/corpus/*; do
	[ -f "$f" ] || continue
	files=$((files + 1))
	d9_corpus_leaks "$files"
	rc=0
	ASAN_OPTIONS=$D9_CORPUS_ASAN timeout 60 "$SAN" jsonl "$f" >"$T/c.out" 2>"$T/c.err" || rc=$?
	if grep -qE 'ERROR: |runtime error|Sanitizer' "$T/c.err"; then
		bad+=("$(basename "$f"): $(grep -m1 -E 'ERROR: |runtime error|Sanitizer' "$T/c.err")")
	elif [ "$rc" != 0 ] && [ "$rc" != 3 ] && [ "$rc" != 4 ]; then
		bad+=("$(basename "$f"): exit $rc")
	else
		lines=$((lines + $(wc -l <"$T/c.out")))
		echo "$rc" >"$T/cj/$files-$(basename "$f").rc"
		mv "$T/c.out" "$T/cj/$files-$(basename "$f")"
	fi
done
# every output, read by one python3: each line one JSON object
while IFS= read -r line; do bad+=("$line"); done < <(python3 - "$T/cj" <<'PY'
import json, os, sys
d = sys.argv[1]
for n in sorted(os.listdir(d)):
    if n.endswith(".rc"):
        continue
    path = os.path.join(d, n)
    why = None
    for i, l in enumerate(open(path, "rb")):
        try:
            if not isinstance(json.loads(l), dict):
                why = "line %d is not an object" % (i + 1)
        except ValueError as e:
            why = "line %d: %s" % (i + 1, e)
        if why:
            break
    if why:
        data = open(path, "rb").read()
        print("%s: %s (jsonl exit %s, %d bytes: %r)" % (n.split("-", 1)[1], why,
              open(path + ".rc").read().strip(), len(data), data[:120]))
PY
)
if [ "${#bad[@]}" -gt 0 ]; then
	pl_fail analyze-jsonl-corpus "${#bad[@]} of $files files: ${bad[*]:0:5}"
elif [ "$files" -lt 40 ] || [ "$lines" -lt 90 ]; then
	pl_fail analyze-jsonl-corpus "only $files files, $lines lines (the corpus is missing?)"
else
	pl_pass analyze-jsonl-corpus "$files files, $lines lines, no sanitizer report, all JSON"
fi

# ---- a real trace of the ST server ---------------------------------------------------------------
if ! pl_start "$T/run" "$ST_HTTP" --; then
	pl_fail analyze-jsonl-server "$PL_ERR"
	exit 0
fi
ok=1
pl_gets 3 /fast ok || { pl_fail analyze-jsonl-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/sleep?ms=50" "sleep ms=50" || { pl_fail analyze-jsonl-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/block?ms=30" "block ms=30" || { pl_fail analyze-jsonl-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/fanout?k=4" "fanout k=4 done=4" || { pl_fail analyze-jsonl-requests "$PL_ERR"; ok=0; }
if ! pl_session_quit || [ "$SRC" != 0 ]; then
	pl_fail analyze-jsonl-exit "${PL_ERR:-exit status $SRC}"
	exit 0
fi
[ "$ok" = 1 ] && pl_pass analyze-jsonl-requests "3 /fast, /sleep?ms=50, /block?ms=30, /fanout?k=4"

rc=0
"$SAN" jsonl "$SDIR/trace" >"$SDIR/events.jsonl" 2>"$SDIR/jsonl.err" || rc=$?
if [ "$rc" != 0 ] || [ -s "$SDIR/jsonl.err" ]; then
	pl_fail analyze-jsonl-run "exit $rc, stderr '$(head -c 400 "$SDIR/jsonl.err")'"
	exit 0
fi
"$PL_ANALYZE" dump "$SDIR/trace" >"$SDIR/dump.jsonl" 2>/dev/null
timeout -s KILL 120 python3 - "$SDIR/events.jsonl" "$SDIR/dump.jsonl" "$SAN" "$SDIR/trace" "$SPID" <<'PYEOF'
import collections, json, subprocess, sys
events, dump, san, trace, spid = sys.argv[1:]
spid = int(spid)

def result(name, errs, info=""):
    if errs:
        print("FAIL analyze-jsonl-%s: %s" % (name, "; ".join(errs[:5])))
    else:
        print("PASS analyze-jsonl-%s%s" % (name, ": " + info if info else ""))

# the schema of README.md, "jsonl schema"
COMMON = {"type", "ts_ns", "mono_ns", "pid", "tid", "worker", "thread"}
LOC = {"location", "location_addr"}
KEYS = {
    "PollStart": {"coroutine"} | LOC,
    "PollEnd": {"coroutine"},
    "Park": {"call", "timeout_us"},
    "Unpark": {"ready", "cpu_ns", "sched_wait_ns"},
    "Spawn": {"coroutine", "parent"} | LOC,
    "CoroutineExit": {"coroutine"},
    "QueueSample": {"runnable"},
    "BlockingCall": {"coroutine", "call", "fd_kind", "duration_ns", "stack"},
    "CpuSample": {"coroutine", "source", "stack"},
    "Dropped": {"count", "reason"},
    "ZeroTimeoutWaits": {"count"},
    "SchedDelay": {"coroutine", "call", "fd_kind", "duration_ns", "sched_wait_ns"},
}
WAKE = {"fd": {"fd"}, "timer": {"deadline_ns", "lateness_ns"}}
# Unpark's cpu_ns and sched_wait_ns: an int, or null when not recorded at that Unpark
NULLABLE_INTS = {"cpu_ns", "sched_wait_ns"}
INTS = {"ts_ns", "mono_ns", "pid", "tid", "worker", "coroutine", "timeout_us", "ready", "woken", "waker", "fd", "deadline_ns", "lateness_ns", "object", "parent",
        "runnable", "duration_ns", "count"}
STRS = {"type", "thread", "call", "fd_kind", "source", "reason", "kind"}

def keys_of(r):
    if r.get("type") == "Wake":
        return COMMON | {"kind", "woken", "waker"} | WAKE.get(r.get("kind"), {"object"})
    return COMMON | KEYS.get(r.get("type"), set())

errs, lines = [], []
for i, l in enumerate(open(events)):
    try:
        r = json.loads(l)
    except ValueError as e:
        errs.append("line %d is not JSON: %s" % (i + 1, e))
        continue
    if not isinstance(r, dict) or (r.get("type") not in KEYS and r.get("type") != "Wake"):
        errs.append("line %d: unknown type: %s" % (i + 1, l[:200]))
        continue
    want = keys_of(r)
    if set(r) != want:
        errs.append("line %d (%s): keys %s, want %s" % (i + 1, r["type"], sorted(r), sorted(want)))
    for k, v in r.items():
        if k in NULLABLE_INTS and v is not None and type(v) is not int:
            errs.append("line %d: %s = %r" % (i + 1, k, v))
        elif (k in INTS and (type(v) is not int)) or (k in STRS and type(v) is not str):
            errs.append("line %d: %s = %r" % (i + 1, k, v))
        elif k in ("location", "location_addr") and v is not None and type(v) is not str:
            errs.append("line %d: %s = %r" % (i + 1, k, v))
        elif k == "stack" and (type(v) is not list or any(type(x) is not str for x in v)):
            errs.append("line %d: stack %r" % (i + 1, v))
    lines.append(r)
got = collections.Counter(r["type"] for r in lines)
result("schema", errs, "%d lines, types %s" % (len(lines), dict(got)))

# the same events as the decoder's view: counts per type
errs = []
want = collections.Counter()
for l in open(dump):
    r = json.loads(l)
    if r["rec"] == "event":
        want[r["type"]] += 1
if got != want:
    errs.append("jsonl %s, dump %s" % (dict(got), dict(want)))
for t in ("PollStart", "PollEnd", "Park", "Unpark", "Wake", "Spawn", "CoroutineExit", "BlockingCall"):
    if not got[t]:
        errs.append("no %s event" % t)
result("counts", errs, "%d events in both" % sum(want.values()))

# ids resolved: threads and locations by name
errs = []
for r in lines:
    if r["pid"] != spid:
        errs.append("pid %d, the server is %d" % (r["pid"], spid))
        break
locs = collections.Counter(r["location"] for r in lines if r["type"] == "PollStart")
if not any(l and "serve_conn" in l for l in locs) or not any(l and "fanout_child" in l for l in locs):
    errs.append("PollStart locations %s: want serve_conn and fanout_child" % dict(locs))
for r in lines:
    if r["type"] in ("PollStart", "Spawn") and r["location"] is not None and \
            not r["location_addr"].startswith("0x"):
        errs.append("location_addr %r" % r["location_addr"])
        break
workers = {(r["tid"], r["worker"], r["thread"]) for r in lines if r["type"] == "PollStart"}
if len(workers) != 1 or next(iter(workers))[1] != 1:
    errs.append("polls on %s, want one thread, worker 1" % workers)
result("resolved", errs, "locations %s, worker thread %s" % (sorted(l for l in locs if l), workers))

# the 30 ms blocking usleep and its stack
errs = []
us = [r for r in lines if r["type"] == "BlockingCall" and r["call"] == "usleep"]
if len(us) != 1:
    errs.append("%d usleep BlockingCalls, want 1: %s" % (len(us), us))
else:
    b = us[0]
    if not (29e6 <= b["duration_ns"] < 1e9):
        errs.append("usleep duration %d ns" % b["duration_ns"])
    if not any("handle_block" in f for f in b["stack"]):
        errs.append("usleep stack %s has no handle_block" % b["stack"])
    if b["coroutine"] == 0 or b["worker"] != 1:
        errs.append("usleep line %s" % b)
result("blocking", errs, "usleep %.2f ms, stack %s" % (us[0]["duration_ns"] / 1e6,
       " < ".join(us[0]["stack"])) if len(us) == 1 else "")

# timer wakes: the 50 ms sleep and the fan-out children
errs = []
tw = [r for r in lines if r["type"] == "Wake" and r["kind"] == "timer"]
if len(tw) < 5:
    errs.append("%d timer wakes, want >= 5 (the sleep, 4 fan-out children)" % len(tw))
for r in tw:
    if r["lateness_ns"] < 0 or r["deadline_ns"] + r["lateness_ns"] != r["mono_ns"] or \
            r["lateness_ns"] > 1e9:
        errs.append("timer wake %s" % r)
fdw = [r for r in lines if r["type"] == "Wake" and r["kind"] == "fd"]
if any(r["fd"] < 0 for r in fdw):
    errs.append("fd wakes with a negative fd")
result("timer", errs, "%d timer wakes, lateness max %.3f ms" % (len(tw),
       max([r["lateness_ns"] for r in tw] or [0]) / 1e6))

# options: --pid, --from/--to
errs = []
def run(*args):
    p = subprocess.run([san, "jsonl"] + list(args) + [trace], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode or p.stderr:
        errs.append("jsonl %s: exit %d, stderr %s" % (args, p.returncode, p.stderr[:300]))
    return [json.loads(l) for l in p.stdout.decode().splitlines()]
if len(run("--pid", str(spid))) != len(lines):
    errs.append("--pid %d does not give every line" % spid)
if run("--pid", str(spid + 1)):
    errs.append("--pid %d gives lines" % (spid + 1))
ts = sorted(r["ts_ns"] for r in lines)
lo, hi = ts[len(ts) // 4], ts[3 * len(ts) // 4]
win = run("--from", "@%d.%09d" % divmod(lo, 10**9), "--to", "@%d.%09d" % divmod(hi, 10**9))
want_n = sum(1 for t in ts if lo <= t < hi)
if len(win) != want_n or any(not (lo <= r["ts_ns"] < hi) for r in win):
    errs.append("--from/--to: %d lines, want %d in [%d, %d)" % (len(win), want_n, lo, hi))
result("options", errs, "window of %d lines" % len(win))
PYEOF
