#!/usr/bin/env bash
# test-preload-fortify.sh: the waits and reads of a program built with _FORTIFY_SOURCE, as Debian
# builds its packages: poll and ppoll of an array the compiler sizes become __poll_chk and
# __ppoll_chk (Debian's nsd waits in __ppoll_chk, haproxy and memcached call __poll_chk), pread
# into a buffer of known size __pread_chk. fortify-wait.c, built here with -O2
# -D_FORTIFY_SOURCE=2, makes 10 waits of each kind with 20 ms timeouts, a little CPU between them,
# then one pread of 64 MiB (milliseconds), under the agent:
#   - fortify-waits: 20 Parks, 10 of them poll and 10 ppoll, the worker parked for all but a few
#     ms, and no loop turn between them as long as a wait (the last turn, from the last wait to
#     the exit, holds the pread) (before, these waits were not seen: nsd's main
#     process showed one loop turn of seconds "on CPU", a serious hog in d9-analyze check);
#   - fortify-pread: the pread is recorded (a BlockingCall, or a SchedDelay when it ran on CPU the
#     whole time) of at least 1 ms (D9_BLOCKING_THRESHOLD), on a file (before: no event).
# Skips (counted, with the reason) when the compiler does not turn the calls into the _chk forms.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=fortify-waits
pl_need_built "$NAME"
pl_env "$NAME"

if ! cc -O2 -D_FORTIFY_SOURCE=2 -o "$T/fortify-wait" "$PL_ROOT/tests/integration/fortify-wait.c" \
	2>"$T/cc.err"; then
	pl_fail "$NAME" "cannot build fortify-wait.c: $(head -c 300 "$T/cc.err")"
	exit 0
fi
if [ "$(nm -D "$T/fortify-wait" | grep -c -E ' U (__p?poll_chk|__pread(64)?_chk)(@|$)')" != 3 ]; then
	pl_skip "$NAME" "this compiler and C library make no __poll_chk, __ppoll_chk and __pread_chk calls"
	pl_skip fortify-pread "this compiler and C library make no __poll_chk, __ppoll_chk and __pread_chk calls"
	exit 0
fi
mkdir -m 0700 "$T/trace"
timeout -s KILL 60 env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace" "$T/fortify-wait" "$T" \
	>"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" != 0 ] || ! grep -qx "waits 20" "$T/out" || ! grep -qx "pread 67108864" "$T/out"; then
	pl_fail "$NAME" "exit status $rc: $(head -c 300 "$T/out" "$T/err")"
	pl_fail fortify-pread "the program did not run"
	exit 0
fi
"$PL_ANALYZE" jsonl "$T/trace" >"$T/events.jsonl" 2>"$T/jsonl.err"
"$PL_ANALYZE" summary --json "$T/trace" >"$T/summary.json" 2>"$T/summary.err"
python3 - "$NAME" "$T/events.jsonl" "$T/summary.json" <<'PY'
import collections, json, sys
name, ev, js = sys.argv[1:]
recs = [json.loads(l) for l in open(ev)]
parks = [r for r in recs if r.get("type") == "Park"]
calls = collections.Counter(r.get("call") for r in parks)
last = max([r["ts_ns"] for r in recs if r.get("type") == "Unpark"] or [0])
try:
    # the turns between waits: the last one, from the last wait to the exit, holds the file's
    # making and the pread (the process's end closes it)
    turns = [p["duration_ns"] for p in json.load(open(js)).get("long_polls", [])
             if p["start_ns"] < last]
except ValueError:
    turns = []  # no trace at all: no Park either, said below
why = None
if len(parks) != 20:
    why = "%d Parks (calls %s), the program made 20 waits" % (len(parks), dict(calls))
elif max(turns or [0]) >= 20e6:
    why = "a loop turn of %.1f ms: a wait was not seen" % (max(turns) / 1e6)
print("FAIL %s: %s" % (name, why) if why else "PASS %s: 20 Parks (calls %s), the longest loop turn %.2f ms" % (name, dict(calls), max(turns or [0]) / 1e6))

reads = [r for r in map(json.loads, open(ev)) if r.get("type") in ("BlockingCall", "SchedDelay")
         and r.get("call") == "pread"]
if len(reads) != 1 or reads[0].get("duration_ns", 0) < 1e6 or reads[0].get("fd_kind") != "file":
    print("FAIL fortify-pread: pread events %s, want one of >= 1 ms on a file" % reads)
else:
    print("PASS fortify-pread: a %s of %.2f ms on a file" % (reads[0]["type"], reads[0]["duration_ns"] / 1e6))
PY
