#!/usr/bin/env bash
# test-analyze-turn-cpu.sh: `check`'s hogs weigh a loop turn by its own CPU time when the trace
# tells it. An Unpark carries the thread's CPU time and run delay since the previous Unpark that
# carried them (schedstat); when that one came before the turn began, the delta bounds the turn's
# CPU. `check` weighed every turn by its worker's CPU share over the whole trace instead, and
# called Apache prefork's idle workers (a poll woke them all, then each waited seconds in a
# blocking accept that d9 does not time) and a lighttpd turn that waited 194 ms for a CPU with
# 2.7 ms of it on CPU serious hogs. gen-turn-cpu (tests/tools/gen-turn-cpu.c) writes two 300 ms
# loop turns of one worker, the first with 1 ms of CPU after it, the second with 295 ms, and a
# second worker's wait that returned 300 ms late with 290 ms of run delay in its Unpark:
#   - turn-cpu-hog: one hog (the second turn: loop_turns 1, longest 300 ms), not two.
#   - turn-cpu-late: the late wait's cause is preemption, not the other worker's hog (seen on
#     postgres: a background writer's late waits, each with the run delay of its lateness, were
#     blamed on long polls of another process), and the finding does not follow the hog.
#   - turn-cpu-window: a third worker's Park with no Unpark in a flight dump whose trailer says
#     its window ended 200 ms later: summary counts it parked 200 ms (it said 0 ns, 0%).
#   - turn-cpu-unknown (gen-turn-cpu DIR nostat): a 300 ms turn of a worker whose Unparks carry
#     no schedstat (unbound chrooted with D9_CHROOT=follow) and no samples: the hog says its CPU
#     time is unknown (cpu_unknown 1), instead of "on CPU" with 0 ns preempted.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh

NAME=turn-cpu
gen=build/tests/gen-turn-cpu
d9_setup "$NAME"
if [ ! -x "$gen" ]; then
	d9_fail "$NAME-hog" "$gen is not built (make)"
	exit 0
fi
if ! "$gen" "$T/tr" 2>"$T/gen.err"; then
	d9_fail "$NAME-hog" "gen-turn-cpu: $(head -c 300 "$T/gen.err")"
	exit 0
fi
"$ANALYZE" check --json "$T/tr" >"$T/check.json" 2>"$T/check.err"
res=$(python3 - "$T/check.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
hogs = [f for f in d.get("findings", []) if f.get("kind") == "hog"]
if len(hogs) != 1:
    print("FAIL %d hog finding(s): %s" % (len(hogs), [f.get("title") for f in d.get("findings", [])]))
    sys.exit(0)
n = hogs[0].get("numbers", {})
if n.get("loop_turns") != 1 or n.get("longest_ns") != 300000000:
    print("FAIL the hog: %s (%s)" % (hogs[0].get("title"), n))
else:
    print("OK " + hogs[0].get("title"))
PYEOF
)
if [[ "$res" == OK* ]]; then
	d9_pass "$NAME-hog" "${res#OK }"
else
	d9_fail "$NAME-hog" "${res#FAIL } $(head -c 200 "$T/check.err")"
fi
res=$(python3 - "$T/check.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
late = [f for f in d.get("findings", []) if f.get("kind") == "late_timers"]
if len(late) != 1:
    print("FAIL %d late_timers finding(s): %s" % (len(late), [f.get("title") for f in d.get("findings", [])]))
elif "preemption" not in late[0].get("title", "") or "long polls" in late[0].get("title", ""):
    print("FAIL the cause: %s" % late[0].get("title"))
elif late[0].get("numbers", {}).get("loop_waits_preempted_ns") != 290000000:
    print("FAIL numbers: %s" % late[0].get("numbers"))
else:
    print("OK " + late[0].get("title"))
PYEOF
)
if [[ "$res" == OK* ]]; then
	d9_pass "$NAME-late" "${res#OK }"
else
	d9_fail "$NAME-late" "${res#FAIL }"
fi
"$ANALYZE" summary --json "$T/tr" >"$T/sum.json" 2>"$T/sum.err"
res=$(python3 - "$T/sum.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
w = [x for x in d.get("workers", []) if x.get("tid") == 802]
if not w:
    print("FAIL no worker 802: %s" % [x.get("tid") for x in d.get("workers", [])])
elif w[0].get("parked_ns") != 200000000:
    print("FAIL worker 802 parked %s ns (%s%%), want 200000000" % (w[0].get("parked_ns"), w[0].get("parked_pct")))
else:
    print("OK worker 802 parked 200 ms until the window's end (%s%%)" % w[0].get("parked_pct"))
PYEOF
)
if [[ "$res" == OK* ]]; then
	d9_pass "$NAME-window" "${res#OK }"
else
	d9_fail "$NAME-window" "${res#FAIL }"
fi
"$gen" "$T/ns" nostat 2>"$T/gen2.err"
"$ANALYZE" check --json "$T/ns" >"$T/ns.json" 2>"$T/ns.err"
res=$(python3 - "$T/ns.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
hogs = [f for f in d.get("findings", []) if f.get("kind") == "hog"]
if len(hogs) != 1:
    print("FAIL %d hog finding(s)" % len(hogs))
elif hogs[0].get("numbers", {}).get("cpu_unknown") != 1 or "unknown" not in hogs[0].get("title", ""):
    print("FAIL the hog: %s (%s)" % (hogs[0].get("title"), hogs[0].get("numbers")))
else:
    print("OK " + hogs[0].get("title"))
PYEOF
)
if [[ "$res" == OK* ]]; then
	d9_pass "$NAME-unknown" "${res#OK }"
else
	d9_fail "$NAME-unknown" "${res#FAIL }"
fi
