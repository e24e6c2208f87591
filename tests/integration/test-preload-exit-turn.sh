#!/usr/bin/env bash
# test-preload-exit-turn.sh: the work between a worker's last wait and its process's end is in
# the trace. exit-turn.c waits twice, then burns 200 ms of CPU in one loop turn and ends without
# waiting again, as a PostgreSQL backend does whose client sent its last query and its Terminate
# together (its 800 ms query was in no turn: "0 workers", nothing for `check`). The segment
# sealed at the end now says when the process ended (trailer flag D9_TRAILER_ENDED, end_time),
# and the analyzer ends every pair still open there. For each way of ending:
#   - exit-turn-exit, exit-turn-_exit, exit-turn-exec, exit-turn-return: `summary`'s longest
#     loop turn lasts at least the burn's wall time and at most 100 ms more (the end's own work:
#     other atexit handlers, the seal's start);
#   - exit-turn-check: `check` on the exit case finds the hog (at least 190 ms on CPU).
#   - exit-turn-wait: the program waits 200 ms for a child in wait() between two waits: a
#     BlockingCall "wait" of at least 190 ms, and no hog (wait, wait3, wait4 and waitid were not
#     timed: exim's daemon, asleep in wait(), was a serious hog).
#   - exit-turn-viewer: the viewer's model (tests/browser/gaps.js, in node) draws the same loop
#     turns as `polls` lists for the exit case, the last one included (SKIP without node).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=exit-turn
HOWS="exit _exit exec return"
pl_need_built "$NAME"
pl_env "$NAME"
if ! cc -O2 -pthread -o "$T/exit-turn" "$PL_ROOT/tests/integration/exit-turn.c" 2>"$T/cc.err"; then
	for h in $HOWS check; do pl_fail "$NAME-$h" "cannot build exit-turn.c: $(head -c 300 "$T/cc.err")"; done
	exit 0
fi
for h in $HOWS; do
	mkdir -m 0700 "$T/tr-$h"
	LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/tr-$h/t.bin" timeout 60 "$T/exit-turn" "$h" 200 \
		>"$T/$h.out" 2>"$T/$h.err"
	rc=$?
	burn=$(sed -n 's/^burn //p' "$T/$h.out")
	res=$("$PL_ANALYZE" summary --json "$T/tr-$h" 2>/dev/null | python3 -c '
import json, sys
burn = int(sys.argv[1] or 0)
d = json.load(sys.stdin)
lp = d.get("long_polls") or []
top = max((p.get("duration_ns") or 0 for p in lp), default=0)
if burn <= 0:
    print("FAIL the program printed no burn time")
elif top < burn or top > burn + 100000000:
    print("FAIL longest loop turn %d ns, the burn took %d ns" % (top, burn))
else:
    print("OK longest loop turn %.1f ms for a burn of %.1f ms" % (top / 1e6, burn / 1e6))' "$burn" 2>&1)
	if [ "$rc" != 0 ]; then
		pl_fail "$NAME-$h" "exit status $rc: $(head -c 300 "$T/$h.err")"
	elif [[ "$res" == OK* ]]; then
		pl_pass "$NAME-$h" "${res#OK }"
	else
		pl_fail "$NAME-$h" "${res#FAIL }"
	fi
done
res=$("$PL_ANALYZE" check --json "$T/tr-exit" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
hogs = [f for f in d.get("findings", []) if f.get("kind") == "hog"]
if not hogs:
    print("FAIL no hog: %s" % [f.get("title") for f in d.get("findings", [])])
else:
    print("OK " + hogs[0].get("title", ""))' 2>&1)
if [[ "$res" == OK* ]]; then
	pl_pass "$NAME-check" "${res#OK }"
else
	pl_fail "$NAME-check" "${res#FAIL }"
fi
mkdir -m 0700 "$T/tr-wait"
LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/tr-wait/t.bin" timeout 60 "$T/exit-turn" wait 200 \
	>"$T/wait.out" 2>"$T/wait.err"
rc=$?
res=$( ( "$PL_ANALYZE" jsonl "$T/tr-wait" 2>/dev/null; echo '{"sep":1}'; "$PL_ANALYZE" check --json "$T/tr-wait" 2>/dev/null ) | python3 -c '
import json, sys
lines = sys.stdin.read().split("{\"sep\":1}")
evs = [json.loads(l) for l in lines[0].splitlines() if l.strip()]
chk = json.loads(lines[1])
calls = [e for e in evs if e.get("type") == "BlockingCall" and e.get("call") == "wait"]
hogs = [f for f in chk.get("findings", []) if f.get("kind") == "hog"]
if not calls or calls[0].get("duration_ns", 0) < 190e6:
    print("FAIL no BlockingCall wait of >= 190 ms: %s" % [(e.get("type"), e.get("call")) for e in evs if e.get("type") in ("BlockingCall", "SchedDelay")])
elif hogs:
    print("FAIL a hog: %s" % hogs[0].get("title"))
else:
    print("OK a BlockingCall wait of %.1f ms, no hog" % (calls[0]["duration_ns"] / 1e6))' 2>&1)
if [ "$rc" != 0 ]; then
	pl_fail "$NAME-wait" "exit status $rc: $(head -c 300 "$T/wait.err")"
elif [[ "$res" == OK* ]]; then
	pl_pass "$NAME-wait" "${res#OK }"
else
	pl_fail "$NAME-wait" "${res#FAIL }"
fi
if command -v node >/dev/null; then
	"$PL_ANALYZE" polls --json "$T/tr-exit" >"$T/exit.polls" 2>/dev/null
	"$PL_ANALYZE" summary --json "$T/tr-exit" >"$T/exit.summary" 2>/dev/null
	r=$(node "$PL_ROOT/tests/browser/gaps.js" "$T/exit.polls" "$T/exit.summary" "$T/tr-exit" 2>&1)
	n=$(grep -c . "$T/exit.polls")
	if [[ "$r" == '{"ok":true'* ]] && [ "$n" -ge 2 ]; then
		pl_pass "$NAME-viewer" "the viewer draws the $n loop turns polls lists, the last one to the exit"
	else
		pl_fail "$NAME-viewer" "$(head -c 400 <<<"$r")"
	fi
else
	pl_skip "$NAME-viewer" "node is not installed (make deps)"
fi
