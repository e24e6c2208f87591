#!/usr/bin/env bash
# test-rt-unknown.sh: a coroutine runtime d9 has no adapter for stays in generic mode, without
# false events (issue 15). build/tests/uctx-sched is a hand-written ucontext scheduler (4
# coroutines, 25 rounds each of a little CPU and a 3 ms sleep through the scheduler, whose idle
# waits are poll(NULL, 0, ms); one real nanosleep of 30 ms inside a coroutine, after the first
# wait with a timeout). It prints its own ground truth: the waits with a non-zero timeout it made and how long
# the nanosleep took. Run under the agent with D9_RUNTIME=auto (every adapter looks) and =st:
#   - the trace decodes cleanly; no coroutine event at all (PollStart, PollEnd, Wake, Spawn,
#     CoroutineExit, QueueSample): no adapter took the process;
#   - exactly as many Park/Unpark pairs (call poll) as the program's waits;
#   - exactly one BlockingCall, the nanosleep, lasting the program's own measure +-10% (and at
#     least 29 ms), with block_thread on its stack; no SchedDelay claims it.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup rt-unknown
UCTX=$PL_ROOT/build/tests/uctx-sched
if [ ! -x "$UCTX" ]; then
	pl_fail rt-unknown "$UCTX is not built (make all)"
	exit 0
fi

read -r -d '' CHECKS <<'PYEOF'
binary, maps, truth_path, name = args
syms = Symbols(binary, maps)
truth = load_json(truth_path)
p = "rt-unknown-" + name

with case(p + "-decode"):
    require(check_decodes_clean(tr) + check_polls_and_parks(tr) + check_ids_defined(tr))

with case(p + "-no-coroutines") as c:
    got = collections.Counter(e["type"] for e in tr.events(COROUTINE_TYPES))
    if got:
        fail("coroutine events without an adapter: %s" % dict(got))
    parks = list(tr.events(("Park",)))
    calls = collections.Counter(e["call"] for e in parks)
    if len(parks) != truth["waits"]:
        fail("%d Parks, the program made %d waits with a timeout" % (len(parks), truth["waits"]))
    c.info = "%d Parks (calls %s) for %d waits, no coroutine event" % (len(parks), dict(calls),
                                                                       truth["waits"])

with case(p + "-blocking") as c:
    bcs = list(tr.events(("BlockingCall",)))
    sds = list(tr.events(("SchedDelay",)))
    if len(bcs) != 1:
        fail("%d BlockingCalls, want exactly the one nanosleep" % len(bcs))
    b = bcs[0]
    name_ = b["_seg"].string(b["call"])
    want = truth["blocked_ns"]
    if name_ != "nanosleep":
        fail("the BlockingCall is %r, want nanosleep" % name_)
    if b["duration_ns"] < 29000000 or abs(b["duration_ns"] - want) > want / 10:
        fail("nanosleep lasted %d ns in the trace, %d ns by the program's clock (want +-10%%)"
             % (b["duration_ns"], want))
    frames = b["_seg"].stacks.get(b["stack"]) if b["stack"] else None
    names = describe_frames(frames or [], syms, maps)
    if not frames or not any(syms.contains("block_thread", a, return_address=True) for a in frames):
        fail("block_thread is not on the nanosleep's stack: %s" % names[:8])
    if sds:
        fail("%d SchedDelays: the nanosleep waited off CPU" % len(sds))
    c.info = "nanosleep %.1f ms (program: %.1f ms), stack %s" % (
        b["duration_ns"] / 1e6, want / 1e6, " < ".join(names[:3]))
PYEOF

for mode in auto st; do
	SDIR=$T/$mode
	mkdir -p "$SDIR/trace"
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$SDIR/trace/trace.bin" D9_RUNTIME=$mode \
		"${PL_NICE[@]}" timeout -s KILL 60 "$UCTX" "$SDIR/maps" >"$SDIR/truth.json" 2>"$SDIR/stderr"
	rc=$?
	if [ "$rc" -ne 0 ] || ! grep -q '"waits"' "$SDIR/truth.json"; then
		pl_fail "rt-unknown-$mode" "uctx-sched exited $rc: $(head -c 300 "$SDIR/stderr")"
		continue
	fi
	pl_check "rt-unknown-$mode" "$CHECKS" "$UCTX" "$SDIR/maps" "$SDIR/truth.json" "$mode"
done
