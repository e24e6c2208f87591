#!/usr/bin/env bash
# test-analyze-generic.sh: `d9-analyze polls` (sanitizer build) in generic mode, on a real trace
# of epoll-http under the agent (no runtime adapter: Park/Unpark only). One server run answers
# 5 x /fast and /block?ms=30, then /quit. polls must list the loop turns (Unpark to the next
# Park), as summary counts them:
#   - every line has location "(loop turn)" and coroutine 0, and summary's mode is "generic";
#   - as many lines as summary's "(loop turn)" row has polls, with the same total and max;
#   - the 30 ms blocking usleep lies inside a turn: `polls --min 29ms` lists at least one, and
#     only turns of 29 ms or more;
#   - `--location "loop turn"` keeps every line, `--location serve_conn` none.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup analyze-generic
SAN=$PL_ROOT/build/san/d9-analyze
if [ ! -x "$SAN" ]; then
	pl_fail analyze-generic "$SAN is not built (make build/san/d9-analyze)"
	exit 0
fi

if ! pl_start "$T/run" "$EPOLL_HTTP" --; then
	pl_fail analyze-generic-server "$PL_ERR"
	exit 0
fi
ok=1
pl_gets 5 /fast ok || { pl_fail analyze-generic-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/block?ms=30" "block ms=30" || { pl_fail analyze-generic-requests "$PL_ERR"; ok=0; }
pl_quit
if [ "$SRC" != 0 ]; then
	pl_fail analyze-generic-exit "exit status $SRC"
	exit 0
fi
[ "$ok" = 1 ] && pl_pass analyze-generic-requests "5 /fast, /block?ms=30"

run() { # run NAME ARGS...: SAN ARGS > $SDIR/NAME.out; FAIL on a non-zero exit or any stderr
	local name=$1 rc=0
	shift
	"$SAN" "$@" >"$SDIR/$name.out" 2>"$SDIR/$name.err" || rc=$?
	if [ "$rc" != 0 ] || [ -s "$SDIR/$name.err" ]; then
		pl_fail "analyze-generic-$name" "exit $rc, stderr '$(head -c 400 "$SDIR/$name.err")'"
		return 1
	fi
}
run summary summary --json "$SDIR/trace" || exit 0
run polls polls --json "$SDIR/trace" || exit 0
run min polls --json --min 29ms "$SDIR/trace" || exit 0
run loc polls --json --location "loop turn" "$SDIR/trace" || exit 0
run noloc polls --json --location serve_conn "$SDIR/trace" || exit 0
run text polls "$SDIR/trace" || exit 0

python3 - "$SDIR" <<'PYEOF'
import json, sys
d = sys.argv[1]
def lines(name):
    return [json.loads(l) for l in open("%s/%s.out" % (d, name)) if l.strip()]
s = json.load(open(d + "/summary.out"))
polls, mins, loc, noloc = lines("polls"), lines("min"), lines("loc"), lines("noloc")

def case(name, errs, info):
    if errs:
        print("FAIL analyze-generic-%s: %s" % (name, "; ".join(errs[:5])))
    else:
        print("PASS analyze-generic-%s: %s" % (name, info))

errs = []
if s["mode"] != "generic":
    errs.append("summary mode %r, want generic" % s["mode"])
bad = [p for p in polls if p["location"] != "(loop turn)" or p["coroutine"] != 0]
if bad:
    errs.append("%d lines not (loop turn) with coroutine 0, first %s" % (len(bad), bad[0]))
if not polls:
    errs.append("no line")
case("turns", errs, "%d loop turns, all '(loop turn)', coroutine 0" % len(polls))

errs = []
row = [l for l in s["locations"] if l["name"] == "(loop turn)"]
if len(row) != 1:
    errs.append("summary locations %s, want one (loop turn) row" % [l["name"] for l in s["locations"]])
else:
    row = row[0]
    total = sum(p["duration_ns"] for p in polls)
    mx = max((p["duration_ns"] for p in polls), default=0)
    if len(polls) != row["polls"] or len(polls) < 6:
        errs.append("%d turns listed, summary counts %d (want >= 6)" % (len(polls), row["polls"]))
    if total != row["total_ns"] or total != s["polls"]["total_ns"]:
        errs.append("total %d ns, summary row %d, polls %d" % (total, row["total_ns"], s["polls"]["total_ns"]))
    if mx != row["max_ns"]:
        errs.append("max %d ns, summary %d" % (mx, row["max_ns"]))
    case("matches-summary", errs, "%d turns, total %.3f ms, max %.3f ms, as in summary"
         % (len(polls), total / 1e6, mx / 1e6))

errs = []
if not mins:
    errs.append("no turn of 29 ms or more: the /block?ms=30 turn is missing")
if any(p["duration_ns"] < 29000000 for p in mins):
    errs.append("--min 29ms listed %s" % [p["duration_ns"] for p in mins])
if mins and sorted(p["duration_ns"] for p in mins) != sorted(p["duration_ns"] for p in polls if p["duration_ns"] >= 29000000):
    errs.append("--min 29ms differs from the filtered full list")
case("min", errs, "--min 29ms: %s ns" % [p["duration_ns"] for p in mins])

errs = []
if loc != polls:
    errs.append("--location 'loop turn' gave %d lines of %d" % (len(loc), len(polls)))
if noloc:
    errs.append("--location serve_conn gave %d lines, want 0" % len(noloc))
text = [l for l in open(d + "/text.out")][1:]
if len(text) != len(polls) or not all(l.rstrip().endswith("(loop turn)") for l in text):
    errs.append("text: %d lines, want %d ending in '(loop turn)'" % (len(text), len(polls)))
case("filters", errs, "--location filters and the text form agree")
PYEOF
