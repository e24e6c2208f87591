#!/usr/bin/env bash
# test-analyze-st.sh: `d9-analyze summary --json` and `polls` (sanitizer build) on a real trace of
# the State Threads test server under the agent. One server run answers, each on its own
# connection: 3 x /fast, /burn?ms=20, /sleep?ms=50, /block?ms=30, /fanout?k=8, then the control
# session (/stats, /quit). The summary must show:
#   - the 20 ms CPU burn as a long poll >= 19 ms at serve_conn's location (the /block poll is
#     the only other one that long);
#   - the 50 ms st_usleep as a timer wake (the fan-out children add 8 more), with a sane lateness
#     (0 to 1 s: only unit errors are caught; a busy VM delays wakes by tens of ms);
#   - the 30 ms blocking usleep in blocking_calls: call "usleep", total >= 29 ms;
#   - /fanout?k=8: 8 spawn wakes and 8 timer wakes before polls at fanout_child's location, and
#     exactly 1 cond wake in the by-kind table (the last child signals the handler);
#   - the locations table: serve_conn's location with as many polls as the trace has PollStarts
#     of it (counted from `d9-analyze dump`, the location found with nm and /proc/PID/maps).
# Names come from the module map the agent records: "serve_conn (st-http.c:N)", and the usleep
# stack handle_block < dispatch (inlined) < serve_conn, each at the line of its call. And `polls --location` lists exactly the serve_conn polls; `polls
# --min 19ms` finds the burn.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup analyze-st
SAN=$PL_ROOT/build/san/d9-analyze
if [ ! -x "$SAN" ]; then
	pl_fail analyze-st "$SAN is not built (make build/san/d9-analyze)"
	exit 0
fi

if ! pl_start "$T/run" "$ST_HTTP" --; then
	pl_fail analyze-st-server "$PL_ERR"
	exit 0
fi
ok=1
pl_gets 3 /fast ok || { pl_fail analyze-st-requests "$PL_ERR"; ok=0; }
pl_get "/burn?ms=20"
case "$BODY" in "burn ms=20 cpu_ns="*) ;; *) pl_fail analyze-st-requests "/burn: $CODE '$BODY'"; ok=0 ;; esac
pl_gets 1 "/sleep?ms=50" "sleep ms=50" || { pl_fail analyze-st-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/block?ms=30" "block ms=30" || { pl_fail analyze-st-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/fanout?k=8" "fanout k=8 done=8" || { pl_fail analyze-st-requests "$PL_ERR"; ok=0; }
if ! pl_session_quit || [ "$SRC" != 0 ]; then
	pl_fail analyze-st-exit "${PL_ERR:-exit status $SRC}"
	exit 0
fi
[ "$ok" = 1 ] && pl_pass analyze-st-requests "3 /fast, /burn?ms=20, /sleep?ms=50, /block?ms=30, /fanout?k=8"

rc=0
"$SAN" summary --json "$SDIR/trace" >"$SDIR/summary.json" 2>"$SDIR/summary.err" || rc=$?
if [ "$rc" != 0 ] || [ -s "$SDIR/summary.err" ]; then
	pl_fail analyze-st-summary "exit $rc, stderr '$(head -c 400 "$SDIR/summary.err")'"
	exit 0
fi
"$PL_ANALYZE" dump "$SDIR/trace" >"$SDIR/dump.jsonl" 2>/dev/null
python3 - "$ST_HTTP" "$SDIR/maps" "$SDIR/summary.json" "$SDIR/dump.jsonl" "$SAN" "$SDIR/trace" \
	"$PL_ROOT/tests/servers/st-http.c" <<'PYEOF'
import json, os, subprocess, sys
binary, maps, summ, dump, san, trace, source = sys.argv[1:]
binary = os.path.realpath(binary)
s = json.load(open(summ))

def ms(ns):
    return "%.2f ms" % (ns / 1e6)

def result(name, errs, info=""):
    if errs:
        print("FAIL analyze-st-%s: %s" % (name, "; ".join(errs)))
    else:
        print("PASS analyze-st-%s%s" % (name, ": " + info if info else ""))

nm = subprocess.run(["nm", "--defined-only", binary], stdout=subprocess.PIPE, check=True).stdout.decode()
syms = {l.split()[-1]: int(l.split()[0], 16) for l in nm.splitlines() if len(l.split()) == 3}
base = None
for l in open(maps):
    f = l.split()
    if len(f) >= 6 and os.path.realpath(f[5]) == binary and int(f[2], 16) == 0:
        base = int(f[0].split("-")[0], 16)
        break
locs = {l["name"]: l for l in s["locations"]}

# the agent records the module map: then names must be "function (st-http.c:LINE)"; without it
# they are the function's address
strings, modules = {}, False
for line in open(dump):
    r = json.loads(line)
    if r["rec"] == "def" and r["kind"] == "String":
        strings[r["id"]] = r["value"]
    elif r["rec"] == "def" and r["kind"] == "Module" and os.path.realpath(strings.get(r["path"], "")) == binary:
        modules = True

def loc_name(fn):
    if not modules:
        return "0x%x" % (base + syms[fn])
    names = [n for n in locs if n.startswith(fn + " (st-http.c:") and n.endswith(")")]
    return names[0] if len(names) == 1 else "%s (st-http.c:?) among %s" % (fn, list(locs))

conn_name = loc_name("serve_conn")
child_name = loc_name("fanout_child")
conn_addr = "0x%x" % (base + syms["serve_conn"])

# PollStarts at serve_conn's location, from the decoder's view
want_polls = 0
loc_fn, co_loc = {}, {}
for line in open(dump):
    r = json.loads(line)
    if r["rec"] == "file":
        loc_fn, co_loc = {}, {}
    elif r["rec"] == "def" and r["kind"] == "SpawnLocation":
        loc_fn[r["id"]] = "0x%x" % r["function_addr"]
    elif r["rec"] == "def" and r["kind"] == "Coroutine":
        co_loc[r["id"]] = r["location"]
    elif r["rec"] == "event" and r["type"] == "PollStart":
        lid = r["location"] or co_loc.get(r["coroutine"], 0)
        if loc_fn.get(lid) == conn_addr:
            want_polls += 1

errs = []
# two polls >= 19 ms at serve_conn: the burn, then the blocking usleep; nothing else is that long
burn = sorted((p for p in s["long_polls"] if p["duration_ns"] >= 19e6), key=lambda p: p["offset_ns"])
if len(burn) != 2 or any(p["location"] != conn_name for p in burn):
    errs.append("long polls >= 19 ms %s, want 2 at %s (burn, block)" % (
        [(ms(p["duration_ns"]), p["location"]) for p in burn], conn_name))
elif burn[0]["worker"] != 1 or burn[0]["coroutine"] == 0 or (burn[0]["stack"] and not burn[0]["stack"][0].startswith("burn_cpu")) or burn[0]["offset_ns"] <= 0:
    errs.append("long poll %s" % burn[0])
result("burn", errs, "longest polls %s" % [ms(p["duration_ns"]) for p in s["long_polls"][:3]])

errs = []
tl = s["timer_lateness"]
kinds = {k["kind"]: k for k in s["sched_delay"]["by_kind"]}
if tl["count"] != 9:
    errs.append("%d timer wakes, want 9 (the 50 ms sleep + 8 fan-out children)" % tl["count"])
# a sanity bound, not a timing claim: a loaded VM delays wakes by tens of ms, a unit error in the
# deadline would show as seconds or as negative lateness
if not (0 <= tl["p50_ns"] <= tl["max_ns"] < 1e9):
    errs.append("timer lateness p50 %s, max %s" % (ms(tl["p50_ns"]), ms(tl["max_ns"])))
if kinds.get("timer", {}).get("count") != 9:
    errs.append("sched_delay by kind timer: %s" % kinds.get("timer"))
result("timer", errs, "lateness p50 %s max %s" % (ms(tl["p50_ns"]), ms(tl["max_ns"])))

errs = []
us = [b for b in s["blocking_calls"] if b["call"] == "usleep"]
if len(us) != 1 or us[0]["count"] != 1 or us[0]["total_ns"] < 29e6 or us[0]["total_ns"] > 1e9:
    errs.append("usleep groups %s, want one call of >= 29 ms" % us)
elif modules:
    # frames named with file:line, the inlined dispatch() expanded between handle_block and
    # serve_conn; the lines are those of the calls in the server's source
    src = open(source).read().splitlines()
    def line_of(text):
        hits = [i + 1 for i, l in enumerate(src) if text in l]
        return hits[0] if len(hits) == 1 else None
    want = ["handle_block (st-http.c:%s)" % line_of("usleep((useconds_t)ms * 1000);"),
            "dispatch (st-http.c:%s)" % line_of("routes[i].fn(r, query);"),
            "serve_conn (st-http.c:%s)" % line_of("dispatch(buf, &r);")]
    if us[0]["stack"][:3] != want:
        errs.append("usleep stack %s, want it to start with %s" % (us[0]["stack"], want))
elif not us[0]["stack"]:
    errs.append("usleep BlockingCall without a stack")
result("blocking", errs, "usleep %s, stack %s" % (ms(us[0]["total_ns"]), " < ".join(us[0]["stack"])) if us else "-")

errs = []
child = locs.get(child_name)
if not child:
    errs.append("no location %s (fanout_child) in %s" % (child_name, list(locs)))
else:
    w = child["sched_delay"]["wakes"]
    if w.get("spawn") != 8 or w.get("timer") != 8 or child["polls"] != 16:
        errs.append("fanout_child: wakes %s and %d polls, want 8 spawn + 8 timer, 16 polls" % (w, child["polls"]))
if kinds.get("cond", {}).get("count") != 1:
    errs.append("by-kind cond %s, want 1" % kinds.get("cond"))
if kinds.get("spawn", {}).get("count", 0) < 8:
    errs.append("by-kind spawn %s, want >= 8" % kinds.get("spawn"))
result("fanout", errs, "by kind %s" % {k: v["count"] for k, v in kinds.items()})

errs = []
conn = locs.get(conn_name)
if not conn:
    errs.append("no location %s (serve_conn) in %s" % (conn_name, list(locs)))
elif conn["polls"] != want_polls or want_polls < 8:
    errs.append("serve_conn location: %d polls, the trace has %d" % (conn["polls"], want_polls))
if "main" not in locs:
    errs.append("no location 'main' (the primordial coroutine)")
wk = s["workers"]
if len(wk) != 1 or wk[0]["polls"] != s["polls"]["count"] or not (0 < wk[0]["busy_ns"] < wk[0]["span_ns"]):
    errs.append("workers %s" % wk)
elif wk[0]["busy_ns"] + wk[0]["parked_ns"] > wk[0]["span_ns"]:
    errs.append("busy + parked > span: %s" % wk[0])
if s["warnings"] or s["drops"] != {"events": 0, "samples": 0, "by_reason": {}}:
    errs.append("warnings %s drops %s" % (s["warnings"], s["drops"]))
result("locations", errs, "%s: %d polls; names %s" % (conn_name, want_polls,
       "from the module map" if modules else "as addresses (no module map)"))

errs = []
def polls(*args):
    p = subprocess.run([san, "polls", "--json"] + list(args) + [trace], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode or p.stderr:
        errs.append("polls %s: exit %d, stderr %s" % (args, p.returncode, p.stderr[:300]))
    return [json.loads(l) for l in p.stdout.decode().splitlines()]

pc = polls("--location", conn_name)
pl = polls("--min", "19ms")
if len(pc) != want_polls or any(p["location"] != conn_name for p in pc):
    errs.append("polls --location: %d lines, want %d" % (len(pc), want_polls))
if not any(p["duration_ns"] >= 19e6 and p["location"] == conn_name for p in pl) or \
        any(p["duration_ns"] < 19e6 for p in pl):
    errs.append("polls --min 19ms: %s" % pl)
result("polls", errs, "%d polls at serve_conn, %d >= 19 ms" % (len(pc), len(pl)))
PYEOF
