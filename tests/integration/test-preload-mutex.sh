#!/usr/bin/env bash
# test-preload-mutex.sh: pthread_mutex_lock under the blocking-call wrapper, which takes a free
# mutex with a trylock and times only a mutex that is held (README, BlockingCall).
# build/tests/mutex-wait, inside a loop turn: 1000 locks of a free mutex, a recursive mutex taken
# twice, a second lock of an error-checking mutex it holds, then a wait of ~50 ms for a mutex
# another thread holds. It prints its own results and how long the wait took.
#   - with the agent, every lock answers as without it: both recursive locks succeed, the
#     error-checking one gives the same error (EDEADLK) as a run without the agent;
#   - exactly one BlockingCall: pthread_mutex_lock, the held one, lasting the program's own
#     measure +-10% (+1 ms), with wait_for_holder on its stack; the free, recursive and
#     error-checking locks are none.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-mutex
MW=$PL_ROOT/build/tests/mutex-wait
if [ ! -x "$MW" ]; then
	pl_fail preload-mutex "$MW is not built (make all)"
	exit 0
fi

read -r -d '' CHECKS <<'PYEOF'
binary, maps, truth_path, plain_path = args
syms = Symbols(binary, maps)
truth, plain = load_json(truth_path), load_json(plain_path)

with case("preload-mutex-decode"):
    require(check_decodes_clean(tr) + check_ids_defined(tr))

with case("preload-mutex-semantics") as c:
    errs = []
    if truth["recursive"] != 0:
        errs.append("a recursive mutex taken twice failed (%d)" % truth["recursive"])
    if truth["errorcheck"] != plain["errorcheck"]:
        errs.append("an error-checking mutex's second lock gave %d, %d without the agent"
                    % (truth["errorcheck"], plain["errorcheck"]))
    require(errs)
    c.info = "recursive 0, error-checking %d as without the agent" % truth["errorcheck"]

with case("preload-mutex-blocking") as c:
    bcs = list(tr.events(("BlockingCall",)))
    if len(bcs) != 1:
        fail("%d BlockingCalls (%s), want the one held mutex"
             % (len(bcs), [b["_seg"].string(b["call"]) for b in bcs]))
    b = bcs[0]
    want = truth["waited_ns"]
    if b["_seg"].string(b["call"]) != "pthread_mutex_lock":
        fail("the BlockingCall is %r" % b["_seg"].string(b["call"]))
    if abs(b["duration_ns"] - want) > want / 10 + 1000000:
        fail("the wait lasted %d ns in the trace, %d ns by the program's clock" % (b["duration_ns"], want))
    frames = b["_seg"].stacks.get(b["stack"]) if b["stack"] else None
    names = describe_frames(frames or [], syms, maps)
    if not frames or not any(syms.contains("wait_for_holder", a, return_address=True) for a in frames):
        fail("wait_for_holder is not on its stack: %s" % names[:8])
    c.info = "pthread_mutex_lock %.1f ms (program: %.1f ms), stack %s" % (
        b["duration_ns"] / 1e6, want / 1e6, " < ".join(names[:3]))
PYEOF

SDIR=$T/run
mkdir -p "$SDIR/trace"
if ! "$MW" >"$T/plain.json" 2>"$T/plain.err"; then
	pl_fail preload-mutex "without the agent: $(head -c 300 "$T/plain.err")"
	exit 0
fi
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$SDIR/trace/trace.bin" "${PL_NICE[@]}" \
	timeout -s KILL 60 "$MW" "$SDIR/maps" >"$SDIR/truth.json" 2>"$SDIR/stderr"
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q '"waited_ns"' "$SDIR/truth.json"; then
	pl_fail preload-mutex "mutex-wait exited $rc: $(head -c 300 "$SDIR/stderr")"
	exit 0
fi
pl_check preload-mutex "$CHECKS" "$MW" "$SDIR/maps" "$SDIR/truth.json" "$T/plain.json"
