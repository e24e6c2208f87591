#!/usr/bin/env bash
# test-analyze-chrome.sh: `d9-analyze chrome` (sanitizer build). First the fuzz corpus
# (tests/fuzz/corpus, .gz files also gunzipped) goes through it one file at a time: no sanitizer
# report, exit 0, 3 or 4, and with 0 or 4 the output parses as JSON. Then a real trace of the
# State Threads test server (3 x /fast, /burn?ms=20, /sleep?ms=50, /block?ms=30, /fanout?k=4, the
# control session), written with -o:
#   - one JSON object {"traceEvents": [...], "displayTimeUnit": "ns"};
#   - as many poll slices ("X", cat poll) as the jsonl output has PollStart/PollEnd pairs;
#   - park slices ("park (CALL)", timeout_us and ready), at most one per Unpark;
#   - the /burn?ms=20 poll: dur >= 19000 us, named after serve_conn's location;
#   - the /block?ms=30 usleep slice: dur >= 29000 us, inside a serve_conn poll;
#   - every flow start "s" has one "f" (bp "e") with its id, at a poll start of the woken
#     coroutine, and lies inside a slice of the waker's thread, before its end (whole ns);
#   - one thread_name per worker, one process_name per process, run-queue counter events;
#   - --pid of another process gives no events; --from/--to keep the events of the window, and
#     exactly the polls that start and end inside it.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup analyze-chrome
pl_san_setup analyze-chrome || exit 0

# ---- the fuzz corpus: hostile input --------------------------------------------------------------
pl_corpus_unpack
bad=() files=0
mkdir -p "$T/cj"
for f in "$PL_ROOT"/tests/fuzz/corpus/* "$T"/corpus/*; do
	[ -f "$f" ] || continue
	files=$((files + 1))
	d9_corpus_leaks "$files"
	rc=0
	ASAN_OPTIONS=$D9_CORPUS_ASAN timeout 60 "$SAN" chrome "$f" >"$T/c.out" 2>"$T/c.err" || rc=$?
	if grep -qE 'ERROR: |runtime error|Sanitizer' "$T/c.err"; then
		bad+=("$(basename "$f"): $(grep -m1 -E 'ERROR: |runtime error|Sanitizer' "$T/c.err")")
	elif [ "$rc" != 0 ] && [ "$rc" != 3 ] && [ "$rc" != 4 ]; then
		bad+=("$(basename "$f"): exit $rc")
	elif [ "$rc" = 0 ] || [ "$rc" = 4 ]; then
		mv "$T/c.out" "$T/cj/$files-$(basename "$f")"
	fi
done
# every output written, read by one python3: the last line is how many parsed
parsed=0
while IFS= read -r line; do
	case "$line" in parsed\ *) parsed=${line#parsed } ;; *) bad+=("$line") ;; esac
done < <(python3 - "$T/cj" <<'PY'
import json, os, sys
parsed = 0
for n in sorted(os.listdir(sys.argv[1])):
    try:
        d = json.load(open(os.path.join(sys.argv[1], n)))
    except ValueError as e:
        print("%s: %s" % (n.split("-", 1)[1], e))
        continue
    if not isinstance(d, dict) or not isinstance(d.get("traceEvents"), list):
        print("%s: not a trace object" % n.split("-", 1)[1])
    else:
        parsed += 1
print("parsed %d" % parsed)
PY
)
if [ "${#bad[@]}" -gt 0 ]; then
	pl_fail analyze-chrome-corpus "${#bad[@]} of $files files: ${bad[*]:0:5}"
elif [ "$files" -lt 40 ] || [ "$parsed" -lt 10 ]; then
	pl_fail analyze-chrome-corpus "only $files files, $parsed parsed (the corpus is missing?)"
else
	pl_pass analyze-chrome-corpus "$files files, $parsed outputs parsed, no sanitizer report"
fi

# ---- a real trace of the ST server ---------------------------------------------------------------
if ! pl_start "$T/run" "$ST_HTTP" --; then
	pl_fail analyze-chrome-server "$PL_ERR"
	exit 0
fi
ok=1
pl_gets 3 /fast ok || { pl_fail analyze-chrome-requests "$PL_ERR"; ok=0; }
pl_get "/burn?ms=20"
case "$BODY" in "burn ms=20 cpu_ns="*) ;; *) pl_fail analyze-chrome-requests "/burn: $CODE '$BODY'"; ok=0 ;; esac
pl_gets 1 "/sleep?ms=50" "sleep ms=50" || { pl_fail analyze-chrome-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/block?ms=30" "block ms=30" || { pl_fail analyze-chrome-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/fanout?k=4" "fanout k=4 done=4" || { pl_fail analyze-chrome-requests "$PL_ERR"; ok=0; }
if ! pl_session_quit || [ "$SRC" != 0 ]; then
	pl_fail analyze-chrome-exit "${PL_ERR:-exit status $SRC}"
	exit 0
fi
[ "$ok" = 1 ] && pl_pass analyze-chrome-requests "3 /fast, /burn?ms=20, /sleep?ms=50, /block?ms=30, /fanout?k=4"

rc=0
"$SAN" chrome -o "$SDIR/trace.json" "$SDIR/trace" >"$SDIR/chrome.out" 2>"$SDIR/chrome.err" || rc=$?
if [ "$rc" != 0 ] || [ -s "$SDIR/chrome.err" ] || [ -s "$SDIR/chrome.out" ]; then
	pl_fail analyze-chrome-run "exit $rc, stdout $(wc -c <"$SDIR/chrome.out") bytes, stderr '$(head -c 400 "$SDIR/chrome.err")'"
	exit 0
fi
"$SAN" jsonl "$SDIR/trace" >"$SDIR/events.jsonl" 2>/dev/null
timeout -s KILL 120 python3 - "$SDIR/trace.json" "$SDIR/events.jsonl" "$SAN" "$SDIR/trace" "$SPID" <<'PYEOF'
import collections, decimal, json, subprocess, sys
out, events, san, trace, spid = sys.argv[1:]
spid = int(spid)

def result(name, errs, info=""):
    if errs:
        print("FAIL analyze-chrome-%s: %s" % (name, "; ".join(str(e) for e in errs[:5])))
    else:
        print("PASS analyze-chrome-%s%s" % (name, ": " + info if info else ""))

errs = []
try:
    doc = json.load(open(out))
except ValueError as e:
    result("json", ["not JSON: %s" % e])
    sys.exit(0)
if not isinstance(doc, dict) or set(doc) != {"traceEvents", "displayTimeUnit"} or \
        doc["displayTimeUnit"] != "ns" or not isinstance(doc["traceEvents"], list):
    errs.append("top level %s" % (sorted(doc) if isinstance(doc, dict) else type(doc)))
    result("json", errs)
    sys.exit(0)
evs = doc["traceEvents"]
for e in evs:
    if not isinstance(e, dict) or not {"ph", "pid", "tid", "name"} <= set(e):
        errs.append("event %s" % e)
    elif e["ph"] != "M" and not isinstance(e.get("ts"), (int, float)):
        errs.append("event without ts %s" % e)
result("json", errs, "%d events, phases %s" % (len(evs), dict(collections.Counter(e.get("ph") for e in evs))))

lines = [json.loads(l) for l in open(events)]

# poll slices: as many as PollStart/PollEnd pairs (a PollStart while open ends the poll too)
errs = []
pairs, open_ = 0, {}
for r in lines:
    key = (r["pid"], r["tid"])
    if r["type"] == "PollStart":
        if open_.get(key):
            pairs += 1
        open_[key] = True
    elif r["type"] == "PollEnd" and open_.get(key):
        pairs += 1
        open_[key] = False
polls = [e for e in evs if e["ph"] == "X" and e.get("cat") == "poll"]
if len(polls) != pairs or not pairs:
    errs.append("%d poll slices, jsonl has %d PollStart/PollEnd pairs" % (len(polls), pairs))
for p in polls:
    if set(p["args"]) != {"coroutine", "location"} or p["args"]["location"] != p["name"] or \
            p["dur"] < 0:
        errs.append("poll slice %s" % p)
        break
parks = [e for e in evs if e["ph"] == "X" and e.get("cat") == "park"]
nparks = sum(1 for r in lines if r["type"] == "Unpark")
if not parks or len(parks) > nparks or any(not e["name"].startswith("park (") or
                                           set(e["args"]) != {"timeout_us", "ready"} for e in parks):
    errs.append("%d park slices (%d Unparks): %s" % (len(parks), nparks, parks[:2]))
result("polls", errs, "%d poll slices, %d park slices" % (len(polls), len(parks)))

# the 30 ms blocking usleep, and the 20 ms burn: the other poll >= 19 ms
errs = []
us = [e for e in evs if e["ph"] == "X" and e.get("cat") == "blocking" and e["name"] == "usleep"]
if len(us) != 1:
    errs.append("%d usleep slices, want 1" % len(us))
else:
    b = us[0]
    if not (29000 <= b["dur"] < 1e6):
        errs.append("usleep dur %s us" % b["dur"])
    if set(b["args"]) != {"coroutine", "fd_kind", "duration_ns", "stack"} or \
            not any("handle_block" in f for f in b["args"]["stack"]):
        errs.append("usleep args %s" % b["args"])
    into = [p for p in polls if p["tid"] == b["tid"] and p["ts"] <= b["ts"] + 0.001 and
            b["ts"] + b["dur"] <= p["ts"] + p["dur"] + 0.001]
    if len(into) != 1 or "serve_conn" not in into[0]["name"]:
        errs.append("usleep slice inside polls %s, want one serve_conn poll" % into)
result("blocking", errs, "usleep %.3f ms" % (us[0]["dur"] / 1e3) if len(us) == 1 else "")

errs = []
# on a loaded machine any poll may run past 19 ms (preempted: the trace says so truly), so the
# burn is the serve_conn poll of 19 ms to 1 s that holds the /block one's usleep no more
long_ = [p for p in polls if p["dur"] >= 19000 and
         not any(p["ts"] <= b["ts"] + 0.001 and b["ts"] <= p["ts"] + p["dur"] for b in us)]
burn = [p for p in long_ if p["name"].startswith("serve_conn") and p["dur"] < 1e6]
if not burn:
    errs.append("no serve_conn poll of 19 ms to 1 s besides the /block one (the burn): %s" % long_)
result("burn", errs, "%s, %.3f ms (%d long polls)" % (burn[0]["name"], burn[0]["dur"] / 1e3,
       len(long_)) if burn else "")

# flows: every "s" has one "f" with its id, binding to a poll slice of the woken coroutine
errs = []
s = collections.Counter(e["id"] for e in evs if e["ph"] == "s")
f = collections.Counter(e["id"] for e in evs if e["ph"] == "f")
if not s or s != f or max(s.values()) != 1:
    errs.append("%d flow starts, %d finishes, ids differ or repeat" % (sum(s.values()), sum(f.values())))
starts = {(p["tid"], p["ts"], p["args"]["coroutine"]) for p in polls}
starts_at = {(t, ts) for t, ts, _ in starts}
for e in evs:
    if e["ph"] == "f" and (e.get("bp") != "e" or (e["tid"], e["ts"]) not in starts_at):
        errs.append("flow end %s not at a poll start" % e)
        break
sw = [e for e in evs if e["ph"] == "s"]
for e in sw:
    if not any(p["args"]["coroutine"] == e["args"]["woken"] for p in polls):
        errs.append("flow start %s for a coroutine without polls" % e)
        break
# in whole ns (floats lose them: 525687.004 + 5.862 < 525692.866), and before the slice's end:
# at the end time, Perfetto binds a flow to a slice that begins in the same tick, if one does
exact = json.load(open(out), parse_float=lambda v: int(decimal.Decimal(v) * 1000))["traceEvents"]
xs = [e for e in exact if e["ph"] == "X"]
for e in (e for e in exact if e["ph"] == "s"):
    if not any(x["tid"] == e["tid"] and x["ts"] <= e["ts"] < x["ts"] + x["dur"] for x in xs):
        errs.append("flow start %s is in no slice (Perfetto would drop the arrow)" % e)
        break
result("flows", errs, "%d wake -> poll flows, kinds %s" % (len(s), dict(collections.Counter(e["args"]["kind"] for e in sw))))

# tracks: one process_name per process, one thread_name per worker; the run-queue counter
errs = []
workers = {(r["pid"], r["worker"]) for r in lines if r["worker"]}
names = [e for e in evs if e["ph"] == "M" and e["name"] == "thread_name"]
wnames = collections.Counter((e["pid"], e["args"]["name"].split()[1]) for e in names
                             if e["args"]["name"].startswith("worker "))
if set(wnames) != {(p, str(w)) for p, w in workers} or any(n != 1 for n in wnames.values()):
    errs.append("worker thread_names %s, workers %s" % (dict(wnames), workers))
pn = [e for e in evs if e["ph"] == "M" and e["name"] == "process_name"]
if len(pn) != 1 or pn[0]["pid"] != spid or "pid %d" % spid not in pn[0]["args"]["name"]:
    errs.append("process_name %s" % pn)
rq = [e for e in evs if e["ph"] == "C" and e["name"] == "run queue"]
nq = sum(1 for r in lines if r["type"] == "QueueSample")
if not rq or len(rq) != nq:
    errs.append("%d run queue counters, %d QueueSamples" % (len(rq), nq))
# slices on one thread nest or are disjoint (Perfetto drops the ones that overlap)
byt = collections.defaultdict(list)
for e in evs:
    if e["ph"] == "X":
        byt[(e["pid"], e["tid"])].append(e)
for xs in byt.values():
    xs.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in xs:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + 0.001:
            stack.pop()
        if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + 0.001:
            errs.append("slice %s overlaps %s" % (e, stack[-1]))
            break
        stack.append(e)
result("tracks", errs, "threads %s, %s, %d run-queue counters" % (
       [e["args"]["name"] for e in names], pn[0]["args"]["name"] if pn else "", len(rq)))

# --pid of another process: an empty trace, still JSON
errs = []
p = subprocess.run([san, "chrome", "--pid", str(spid + 1), trace], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
if p.returncode or p.stderr or json.loads(p.stdout)["traceEvents"]:
    errs.append("--pid %d: exit %d, %s" % (spid + 1, p.returncode, p.stdout[:200]))
# --from/--to: the events inside the window, and exactly the polls wholly inside it
first = min(r["ts_ns"] for r in lines if r["type"] == "PollStart")
zero = first - round(min(p["ts"] for p in polls) * 1000)  # ns of ts 0: the trace start
ts = sorted(r["ts_ns"] for r in lines)
lo, hi = ts[len(ts) // 4], ts[3 * len(ts) // 4]
p = subprocess.run([san, "chrome", "--from", "@%d.%09d" % divmod(lo, 10**9), "--to",
                    "@%d.%09d" % divmod(hi, 10**9), trace], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
win = json.loads(p.stdout)["traceEvents"] if not p.returncode else []
ns = lambda us: zero + round(us * 1000)
wpolls = [e for e in win if e["ph"] == "X" and e.get("cat") == "poll"]
want = [q for q in polls if lo <= ns(q["ts"]) and ns(q["ts"] + q["dur"]) < hi]
if p.returncode or p.stderr or not wpolls or len(wpolls) != len(want):
    errs.append("--from/--to: exit %d, %d poll slices, want %d" % (p.returncode, len(wpolls),
                                                                   len(want)))
for e in win:
    end = ns(e["ts"] + e.get("dur", 0)) if e["ph"] != "M" else lo
    if not lo <= end < hi:
        errs.append("--from/--to: event outside the window: %s" % e)
        break
result("options", errs, "window: %d of %d poll slices" % (len(wpolls), len(polls)))
PYEOF
