#!/usr/bin/env bash
# test-docs.sh: docs/guide.md's examples are made again by docs/examples.sh from the test
# servers, and say what the guide says they say:
#   - docs-examples: the script runs to its end (wrk load, /burn?ms=100, /block?ms=50,
#     /sleep?ms=20; before/after /burn?ms=5 and 10; api-demo);
#   - docs-check: `check`'s findings are the 100 ms hog with burn_cpu on its stack (serious or
#     warning: a loaded machine stretches the run), then the blocking usleep, with nothing else
#     but scheduling delay and late timers (the machine's load, or the hog's doing); exit status
#     5 or 1;
#   - docs-requests: the slowest request is GET /burn, on CPU, and GET /block is blocked in usleep
#     (either may carry the flag closed: whether curl's close comes before the next read is a race);
#   - docs-diff: burn_cpu is the first on-CPU row of `diff`, and it grew;
#   - docs-events: the application's mark, gauge, counter and typed event are listed;
#   - docs-commands: every `d9-analyze COMMAND` the guide names is a command (`--help` exits 0).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"
pl_setup docs
if ! command -v wrk >/dev/null; then
	pl_skip docs "wrk is not installed (make deps)"
	exit 0
fi
X=$T/examples
if ! (cd "$PL_ROOT" && timeout -s KILL 300 bash docs/examples.sh "$X") >"$T/ex.out" 2>&1; then
	pl_fail docs-examples "docs/examples.sh failed: $(tail -c 400 "$T/ex.out")"
	exit 0
fi
pl_pass docs-examples "$(ls "$X"/*.txt | wc -l) outputs"

# scheduling delay may come first, of any cause: the machine's own load (preemption, CPU
# saturation) or the hog itself (a hot coroutine), and so may timers the hog made late; of the
# rest, the hog comes first, then the blocking call
res=$("$PL_ANALYZE" check --json "$X/incident/trace" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = [x for x in d["findings"] if x["kind"] not in ("sched_delay", "late_timers")]
kinds = [x["kind"] for x in f]
if len(f) < 2 or kinds[:2] != ["hog", "blocking"]:
    print("findings %s" % kinds)
elif f[0]["severity"] == "info" or not any("burn_cpu" in s for s in f[0].get("stack") or []):
    print("hog %s, stack %s" % (f[0]["severity"], f[0].get("stack")))
elif d["exit"] not in (1, 5):
    print("exit %s" % d["exit"])
else:
    print("ok %s" % kinds)' 2>&1)
if [[ "$res" == ok* ]]; then
	pl_pass docs-check "the hog (burn_cpu on its stack), then the blocking call: ${res#ok }"
else
	pl_fail docs-check "$res"
fi

r=$X/incident.requests.txt
slow=$(grep -m1 -A1 '^+' "$r")
# a request's line may end in flags after its path: "closed" when the reader found the peer gone
# (curl closes as soon as it has the response, and sometimes does so before st-http reads again)
blk=$(grep -E -A2 '^\+.* GET /block(  |$)' "$r" | head -n 3)
if [[ "$slow" == *"GET /burn"* ]] && [[ "$blk" == *"longest blocking call: usleep"* ]]; then
	pl_pass docs-requests "GET /burn slowest, GET /block blocked in usleep"
else
	pl_fail docs-requests "slowest: ${slow:0:200}; /block: ${blk:0:200}"
fi

row=$(grep -A2 '^on-CPU time per poll' "$X/change.diff.txt" | sed -n 3p)
if [[ "$row" == *"burn_cpu"* ]] && [[ "$row" =~ \ \+[0-9.]+(us|ms) ]]; then
	pl_pass docs-diff "first row: $(echo "$row" | tr -s ' ')"
else
	pl_fail docs-diff "first on-CPU row: $row"
fi

ev=$X/api.events.txt
if grep -q ' mark config reload$' "$ev" && grep -q ' gauge queue_len -7$' "$ev" &&
	grep -q ' counter served 1$' "$ev" && grep -q ' event order id=' "$ev"; then
	pl_pass docs-events "mark, gauge, counter and typed event listed"
else
	pl_fail docs-events "$(head -c 300 "$ev")"
fi

bad=()
for c in $(grep -oE 'd9-analyze [a-z]+' "$PL_ROOT/docs/guide.md" | awk '{print $2}' | sort -u); do
	"$PL_ANALYZE" "$c" --help >/dev/null 2>&1 || bad+=("$c")
done
if [ ${#bad[@]} -eq 0 ]; then
	pl_pass docs-commands "every command the guide names exists"
else
	pl_fail docs-commands "not commands: ${bad[*]}"
fi
