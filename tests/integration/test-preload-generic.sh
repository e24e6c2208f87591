#!/usr/bin/env bash
# test-preload-generic.sh: generic mode (no coroutine runtime adapter): only the event loop's
# waits are recorded.
#   - epoll-http, one loop on the main thread: 5 /fast, /block?ms=30, /quit. Park/Unpark pairs
#     with call epoll_wait (1) strictly alternate on the one worker thread (Thread def role
#     worker, the same worker id as its events); no Spawn, poll, Wake, CoroutineExit or
#     QueueSample; at least one park per request; the blocking usleep is a BlockingCall of
#     29..200 ms with no coroutine, made between an Unpark and the next Park (a loop turn), with
#     handle_block among its frames.
#   - epoll-http -T 2: two worker threads, each defined (last Thread def wins) with the name
#     "worker-0" / "worker-1" (resolved String ids), role worker, distinct worker ids, parking in
#     epoll_wait; every reply's X-Tid is one of them; the main thread (it only joins) records
#     nothing.
#   - st-http with D9_RUNTIME=generic: the State Threads adapter stays out: no poll, no coroutine
#     event, only Park/Unpark pairs on select (6), and the /block usleep is a BlockingCall with
#     no coroutine.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-generic

read -r -d '' COMMON <<'PYEOF'
binary, maps, nreq, call = args[0], args[1], int(args[2]), int(args[3])
syms = Symbols(binary, maps)

def call_name(e):
    return e["_seg"].string(e["call"])

with case(prefix + "-decode"):
    require(check_decodes_clean(tr) + check_thread_order(tr) + check_polls_and_parks(tr) +
            check_ids_defined(tr))

with case(prefix + "-no-coroutines") as c:
    got = collections.Counter(e["type"] for e in tr.events(COROUTINE_TYPES))
    if got:
        fail("coroutine events in generic mode: %s" % dict(got))
    calls = collections.Counter(e["call"] for e in tr.events(("Park",)))
    if set(calls) != {call}:
        fail("Park calls %s, want only %d" % (dict(calls), call))
    parks = sum(calls.values())
    if parks < nreq:
        fail("%d parks for %d requests" % (parks, nreq))
    c.info = "%d Park/Unpark pairs (call %d) for %d requests, no coroutine event" % (parks, call, nreq)

with case(prefix + "-workers") as c:
    proc = tr.the_proc()
    errs = []
    for tid, evs in proc.tids.items():
        td, seg = proc.thread_def(tid)
        if not any(e["type"] == "Park" for e in evs):
            errs.append("tid %d records without parking: %s" % (tid, collections.Counter(e["type"] for e in evs)))
        if not td or td["role"] != ROLE_WORKER or not td["worker"]:
            errs.append("tid %d: Thread def %s, want role worker with an id" % (tid, td))
        elif any(e["worker"] != td["worker"] for e in evs):
            errs.append("tid %d: events with worker ids %s, Thread def %d"
                        % (tid, sorted(set(e["worker"] for e in evs)), td["worker"]))
    ids = [proc.thread_def(t)[0]["worker"] for t in proc.tids if proc.thread_def(t)[0]]
    if len(set(ids)) != len(ids):
        errs.append("worker ids %s are not distinct" % ids)
    require(errs)
    c.info = ", ".join("tid %d worker %d %r" % (t, proc.thread_def(t)[0]["worker"],
                       proc.thread_def(t)[1].thread_name(t)) for t in proc.tids)
PYEOF

read -r -d '' BLOCK <<'PYEOF'
with case(prefix + "-blocking") as c:
    proc = tr.the_proc()
    us = [e for e in proc.events(("BlockingCall",)) if call_name(e) == "usleep"]
    if len(us) != 1:
        fail("%d usleep BlockingCalls, want 1 (all: %s)" % (len(us), [call_name(e) for e in proc.events(("BlockingCall",))]))
    e = us[0]
    errs = []
    if not (29e6 <= e["duration_ns"] < 200e6):
        errs.append("duration %s" % ms(e["duration_ns"]))
    if e["coroutine"] != 0:
        errs.append("coroutine %d, want 0 (no runtime)" % e["coroutine"])
    p = prev_in_thread(proc, e, lambda x: x["type"] in ("Park", "Unpark"))
    if not p or p["type"] != "Unpark":
        errs.append("not inside a loop turn (previous wait event %s)" % (p and p["type"]))
    frames = e["_seg"].stacks.get(e["stack"]) if e["stack"] else None
    names = describe_frames(frames or [], syms, maps)
    if not frames or not any(syms.contains("handle_block", a, return_address=True) for a in frames):
        errs.append("no frame in handle_block: %s" % names)
    require(errs)
    c.info = "usleep %s, frames %s" % (ms(e["duration_ns"]), " < ".join(names))
PYEOF

read -r -d '' THREADS <<'PYEOF'
with case(prefix + "-names") as c:
    proc = tr.the_proc()
    tids = [int(x) for x in args[4].split()]
    pid = proc.pid
    names = {}
    for tid in proc.tids:
        td, seg = proc.thread_def(tid)
        names[tid] = seg.thread_name(tid) if td else None
    if sorted(n or "" for n in names.values()) != ["worker-0", "worker-1"]:
        fail("recording threads named %s, want worker-0 and worker-1" % names)
    if pid in proc.tids:
        fail("the main thread (it only joins) recorded %s" % collections.Counter(e["type"] for e in proc.tids[pid]))
    if not set(tids) <= set(proc.tids):
        fail("replies came from threads %s, the trace has %s" % (sorted(set(tids)), list(proc.tids)))
    c.info = "%s; replies from %s" % (names, dict(collections.Counter(tids)))
PYEOF

# ---- epoll-http, one loop ----------------------------------------------------------------------------
p=generic-epoll
if pl_start "$T/$p" "$EPOLL_HTTP" --; then
	pl_gets 5 /fast ok || pl_fail "$p-replies" "$PL_ERR"
	pl_gets 1 "/block?ms=30" "block ms=30" || pl_fail "$p-replies" "$PL_ERR"
	pl_quit
	if [ "$SRC" = 0 ]; then
		pl_check "$p" "prefix = '$p'
$COMMON
$BLOCK" "$EPOLL_HTTP" "$SDIR/maps" 6 1
	else
		pl_fail "$p-exit" "exit status $SRC"
	fi
else
	pl_fail "$p" "$PL_ERR"
fi

# ---- epoll-http -T 2 -----------------------------------------------------------------------------------
p=generic-epoll-threads
if pl_start "$T/$p" "$EPOLL_HTTP" -- -T 2; then
	tids=""
	for _ in $(seq 8); do
		pl_get /fast
		[ "$BODY" = ok ] || pl_fail "$p-replies" "status $CODE body '$BODY'"
		tids="$tids $(pl_header X-Tid)"
	done
	pl_quit
	if [ "$SRC" = 0 ]; then
		pl_check "$p" "prefix = '$p'
$COMMON
$THREADS" "$EPOLL_HTTP" "$SDIR/maps" 8 1 "$tids"
	else
		pl_fail "$p-exit" "exit status $SRC"
	fi
else
	pl_fail "$p" "$PL_ERR"
fi

# ---- st-http, D9_RUNTIME=generic ---------------------------------------------------------------------
p=generic-st
if pl_start "$T/$p" "$ST_HTTP" D9_RUNTIME=generic --; then
	pl_gets 3 /fast ok || pl_fail "$p-replies" "$PL_ERR"
	pl_gets 1 "/sleep?ms=20" "sleep ms=20" || pl_fail "$p-replies" "$PL_ERR"
	pl_gets 1 "/block?ms=30" "block ms=30" || pl_fail "$p-replies" "$PL_ERR"
	if pl_session_quit && [ "$SRC" = 0 ]; then
		pl_check "$p" "prefix = '$p'
$COMMON
$BLOCK" "$ST_HTTP" "$SDIR/maps" 5 6
	else
		pl_fail "$p-exit" "${PL_ERR:-} exit status $SRC"
	fi
else
	pl_fail "$p" "$PL_ERR"
fi
