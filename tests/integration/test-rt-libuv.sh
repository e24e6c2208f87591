#!/usr/bin/env bash
# test-rt-libuv.sh: the libuv adapter (preload/rt-libuv.c) on real libuv programs.
#   - uv-http (tests/servers/uv-http.c, Debian's libuv1) under the agent with a pool of one
#     thread and CPU profiling: N /fast, /burn?ms=20 (20 ms of CPU in burn_cpu inside on_read),
#     /timer?ms=50, 3 /async (uv_async_send from the notifier thread), /fs, /nested, /work?hold=1
#     (uv_queue_work; its work_cb holds the pool's only thread until /release) and, queued
#     behind it, /work?ms=10, then /release, /stats, /quit.
#     Checked on the trace against the server's own counters: every callback run is a poll of
#     its handle's unit, located at the callback and named "<type> <callback> uv-http+0x<offset
#     of the function>"; one connection_cb poll and one unit per connection, each with read_cb,
#     write_cb and close_cb polls and an exit (the /quit one exits the process inside its
#     write_cb: no poll stays open); the 20 ms read_cb poll, with burn_cpu on its CPU samples'
#     stacks; the timer's poll >= 45 ms after its unit was spawned, after a timer Wake whose
#     deadline is libuv's (50 ms after the loop's time) and had passed; every uv_async_send a cond
#     Wake from the notifier thread, followed by an async_cb poll on the loop thread; each work
#     request a unit spawned by its connection, whose work_cb poll runs on the pool thread after
#     the spawn Wake (queue delay: the second starts only after the first's work_cb ended, which
#     was after it was queued), with its usleep as a BlockingCall of the unit, then a Wake from
#     the pool thread and its after_work_cb poll on the loop thread before it exits; the loop
#     thread parks in epoll_wait, the pool thread in its wait for work; /fs's uv_fs_open and
#     uv_fs_close are units of their own (spawned by the connection, then by the open's callback),
#     one poll each; /nested runs uv_run from inside on_read, whose 0 ms timer's poll splits the
#     read_cb poll in two (it ends where the timer's starts, and starts again after it); `d9-analyze summary`
#     names the callbacks.
#   - the same server with D9_RUNTIME=generic and with D9_RUNTIME=st: answers every request, and
#     the trace has parks but no coroutine event (generic mode).
#   - the same server started with recording off (D9_ENABLED=0), toggled on, then off
#     (D9_TOGGLE_SIGNAL): every request answered; the trace defines every unit it names (handles
#     registered while off are not units) and has the connections made while it was on.
#   - knot-resolver (kresd, Debian's package, on libuv) with the package's modules and its
#     closest command line (`kresd -c CONFIG -n RUNDIR`, its own port, a hints entry so nothing
#     leaves the machine), and BIND 9.18 (`named -f -u bind` as Debian's unit runs it, a zone of
#     our own), each under dnsperf over UDP then TCP, stopped with SIGTERM: a clean trace that
#     names their callbacks; UDP recv_cb polls >= the queries dnsperf saw answered over UDP;
#     kresd: write_cb polls >= those over TCP (it answers TCP with uv_write); named: polls on
#     two or more loop threads and uv_async_send Wakes between them. SKIP (counted, with the
#     reason) without the server or dnsperf.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_need_built rt-libuv
UV_HTTP=$PL_ROOT/build/tests/uv-http
if [ ! -x "$UV_HTTP" ]; then
	pl_fail rt-libuv "$UV_HTTP is not built (make all; needs libuv1-dev)"
	exit 0
fi
for b in curl python3 nm; do
	if ! command -v "$b" >/dev/null; then
		pl_fail rt-libuv "$b is not installed (make deps)"
		exit 0
	fi
done
pl_env rt-libuv

# stats_is KEY VALUE: the server's /stats has KEY (a path: requests.work) at VALUE or more.
stats_is() {
	curl -sS --max-time 5 "http://127.0.0.1:$SPORT/stats" 2>/dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[k]
sys.exit(0 if v >= int(sys.argv[2]) else 1)' "$1" "$2"
}

# ---- uv-http under the adapter --------------------------------------------------------------------
N=5
if ! pl_start "$T/uv" "$UV_HTTP" UV_THREADPOOL_SIZE=1 D9_CPU_PROFILE=999 --; then
	pl_fail rt-libuv "$PL_ERR"
	exit 0
fi
ok=1
pl_gets "$N" /fast "ok" || { pl_fail rt-libuv-requests "$PL_ERR"; ok=0; }
pl_get "/burn?ms=20"
case "$BODY" in "burn ms=20 cpu_ns="*) ;; *) pl_fail rt-libuv-requests "/burn: $CODE '$BODY'"; ok=0 ;; esac
pl_get "/timer?ms=50"
[ "$BODY" = "timer ms=50" ] || { pl_fail rt-libuv-requests "/timer: $CODE '$BODY'"; ok=0; }
pl_gets 3 /async "async" || { pl_fail rt-libuv-requests "$PL_ERR"; ok=0; }
pl_gets 1 /fs "fs" || { pl_fail rt-libuv-requests "$PL_ERR"; ok=0; }
pl_gets 1 /nested "nested fired=1" || { pl_fail rt-libuv-requests "$PL_ERR"; ok=0; }
# the pool's one thread is held by work_hold until /release, and /work?ms=10 waits behind it
curl -sS --max-time 60 -o "$T/work1" "http://127.0.0.1:$SPORT/work?hold=1" 2>/dev/null &
w1=$!
d9_wait_for 30 stats_is work_holding 1 || { pl_fail rt-libuv-requests "work_hold did not start within 30 s"; ok=0; }
curl -sS --max-time 60 -o "$T/work2" "http://127.0.0.1:$SPORT/work?ms=10" 2>/dev/null &
w2=$!
d9_wait_for 30 stats_is requests.work 2 || { pl_fail rt-libuv-requests "the second /work was not queued within 30 s"; ok=0; }
pl_get /release
[ "$BODY" = "released" ] || { pl_fail rt-libuv-requests "/release: $CODE '$BODY'"; ok=0; }
wait "$w1" "$w2"
[ "$(cat "$T/work1" 2>/dev/null)" = "work ms=10 status=0" ] && [ "$(cat "$T/work2" 2>/dev/null)" = "work ms=10 status=0" ] ||
	{ pl_fail rt-libuv-requests "/work: '$(head -c 100 "$T/work1" 2>/dev/null)' '$(head -c 100 "$T/work2" 2>/dev/null)'"; ok=0; }
pl_get /stats
echo "$BODY" >"$SDIR/stats.json"
pl_quit
if [ "$SRC" != 0 ] || [ -s "$SDIR/stderr" ]; then
	pl_fail rt-libuv-exit "exit status $SRC, stderr '$(head -c 300 "$SDIR/stderr")'"
else
	pl_pass rt-libuv-exit "status 0 after /quit, nothing on stderr"
fi
[ "$ok" = 1 ] && pl_pass rt-libuv-requests "$N /fast, /burn, /timer, 3 /async, /fs, /nested, 2 /work (one queued behind the other) answered"

read -r -d '' CHECKS <<'PYEOF'
binary, maps, stats_path, n = args[0], args[1], args[2], int(args[3])
syms = Symbols(binary, maps)
stats = load_json(stats_path)
proc = tr.the_proc()
loop_tid = proc.pid  # uv-http runs its loop on the main thread
cos = coroutines(proc)
conns_total = stats["connections_total"] + 1  # and the /quit connection

def loc_of(e):
    return e["_seg"].location(e["location"])

def fn_of(e):
    return syms.name_of(loc_of(e)["function_addr"])

def polls_of(x, func):
    return [p for p in x.polls if fn_of(p[0]) == func]

def units_at(func):
    """Units spawned at a location whose function is func (the first callback registered)."""
    return [x for x in cos.values() if x.spawn and fn_of(x.spawn) == func]

def all_polls(func):
    return [p for x in cos.values() for p in polls_of(x, func)]

with case("rt-libuv-decode") as c:
    lost = [e for e in tr.events(("Dropped",)) if e["reason"] != 3]  # samples_lost: profiling
    require(check_decodes_clean(tr, allow_dropped=True) + check_series(tr) + check_thread_order(tr)
            + ["Dropped event: count %s reason %s" % (e["count"], e["reason"]) for e in lost])
    c.info = "%d events, threads %s" % (tr.nevents, sorted(proc.tids))

with case("rt-libuv-nesting") as c:
    require(check_polls_and_parks(tr))
    c.info = "%d polls, %d parks" % (tr.count("PollStart"), tr.count("Park"))

with case("rt-libuv-ids") as c:
    require(check_ids_defined(tr) + check_coroutine_defs(tr))

with case("rt-libuv-names") as c:
    # every location: "<type> <callback> uv-http+0x<the function's offset>" (static functions)
    errs, seen = [], set()
    for e in proc.events(("PollStart", "Spawn")):
        loc = loc_of(e)
        name = e["_seg"].string(loc["name"])
        fn = fn_of(e)
        if fn is None:
            continue  # libuv's own callback (none in this server) or the agent's
        want = "uv-http+%#x" % syms.funcs[fn][0]
        if not name or not name.endswith(" " + want) or len(name.split()) != 3:
            errs.append("location %r of %s, want '<type> <callback> %s'" % (name, fn, want))
        seen.add(" ".join(name.split()[:2]) if name else None)
    for want in ("tcp connection_cb", "tcp read_cb", "tcp write_cb", "tcp close_cb", "timer timer_cb",
                 "timer close_cb", "async async_cb", "check check_cb", "work work_cb", "work after_work_cb",
                 "fs fs_cb"):
        if want not in seen:
            errs.append("no poll named %r (seen %s)" % (want, sorted(s for s in seen if s)))
    require(errs)
    c.info = "%d kinds: %s" % (len(seen), ", ".join(sorted(s for s in seen if s)))

with case("rt-libuv-units") as c:
    errs = []
    for x in cos.values():
        if (x.polls or x.wakes or x.exits) and not x.spawn:
            errs.append("unit %d polls, wakes or exits but was never spawned" % x.id)
            continue
        if x.spawns > 1 or x.exits > 1:
            errs.append("unit %d: %d Spawns, %d exits" % (x.id, x.spawns, x.exits))
        t0 = x.spawn["mono_ns"] if x.spawn else 0
        t1 = x.exit["mono_ns"] if x.exit else float("inf")
        for p in x.polls:
            if not t0 <= p[0]["mono_ns"] <= t1:
                errs.append("unit %d: a poll at %d outside its life [%d, %s]" % (x.id, p[0]["mono_ns"], t0, t1))
        for w in x.wakes:
            if not t0 <= w["mono_ns"] <= t1:
                errs.append("unit %d: a Wake outside its life" % x.id)
    require(errs)
    c.info = "%d units, %d exited" % (len(cos), sum(1 for x in cos.values() if x.exits))

with case("rt-libuv-connections") as c:
    conns = units_at("on_read")
    accepts = all_polls("on_connection")
    errs = []
    if len(conns) != conns_total:
        errs.append("%d units spawned at on_read (read_cb), want %d connections" % (len(conns), conns_total))
    if len(accepts) != conns_total:
        errs.append("%d connection_cb polls, want %d" % (len(accepts), conns_total))
    conns.sort(key=lambda x: x.spawn["mono_ns"])
    for i, x in enumerate(conns):
        last = i == len(conns) - 1  # /quit: the process exits in its write_cb
        nr, nw, nc = len(polls_of(x, "on_read")), len(polls_of(x, "on_written")), len(polls_of(x, "on_conn_closed"))
        if nr < 1 or nw != 1 or nc != (0 if last else 1) or x.exits != (0 if last else 1):
            errs.append("connection unit %d: %d read_cb, %d write_cb, %d close_cb polls, %d exits"
                        % (x.id, nr, nw, nc, x.exits))
        if any(p[0]["tid"] != loop_tid for p in x.polls):
            errs.append("connection unit %d polls off the loop thread" % x.id)
        if x.parent != accepts[0][0]["coroutine"]:
            errs.append("connection unit %d: parent %d, want the listener's unit" % (x.id, x.parent))
    require(errs)
    c.info = "%d connections, %d read_cb polls" % (len(conns), len(all_polls("on_read")))

samples = []
with case("rt-libuv-burn") as c:
    # connections in order: n /fast, then /burn (other polls may run long on a busy machine)
    x = sorted(units_at("on_read"), key=lambda u: u.spawn["mono_ns"])[n]
    reads = [p for p in polls_of(x, "on_read") if p[1]]
    p = max(reads, key=lambda p: p[1]["mono_ns"] - p[0]["mono_ns"]) if reads else None
    if not p or p[1]["mono_ns"] - p[0]["mono_ns"] < 19e6:
        fail("the /burn connection's read_cb polls last %s, none >= 19 ms"
             % [ms(q[1]["mono_ns"] - q[0]["mono_ns"]) for q in reads])
    c.info = "read_cb poll of %s" % ms(p[1]["mono_ns"] - p[0]["mono_ns"])
    samples = [e for e in proc.events(("CpuSample",)) if e["tid"] == loop_tid
               and p[0]["mono_ns"] <= e["mono_ns"] <= p[1]["mono_ns"]]

def in_burn(frames):
    return any(syms.name_of(a if i == 0 else a - 1) == "burn_cpu" for i, a in enumerate(frames))

if not any(True for _ in proc.events(("CpuSample",))):
    print("SKIP rt-libuv-burn-stack: no CPU sample in the trace (perf_event_open refused?)")
else:
    with case("rt-libuv-burn-stack") as c:
        hits = [e for e in samples if e["stack"] and in_burn(e["_seg"].stacks.get(e["stack"], []))]
        if not hits:
            fail("%d CPU samples inside the 20 ms read_cb poll, none with burn_cpu on its stack" % len(samples))
        c.info = "%d of %d samples inside the poll have burn_cpu on their stack" % (len(hits), len(samples))

with case("rt-libuv-timer") as c:
    ts = units_at("on_timer")
    if len(ts) != 1 or stats["timer_fires"] != 1:
        fail("%d timer units, the server counted %d fires; want 1" % (len(ts), stats["timer_fires"]))
    x = ts[0]
    fired, closed = polls_of(x, "on_timer"), polls_of(x, "on_timer_closed")
    if len(fired) != 1 or len(closed) != 1 or x.exits != 1:
        fail("timer unit %d: %d timer_cb, %d close_cb polls, %d exits" % (x.id, len(fired), len(closed), x.exits))
    # libuv's due time is 50 ms after the loop's time, read when its wait returned (at or after
    # the Unpark before the poll that started the timer), not at uv_timer_start: a preemption
    # between the two would make the timer look early from the Spawn. From the Unpark: 50 ms,
    # less libuv's whole-ms rounding (1 ms) and 0.1 ms of slack, as for the deadline below
    idle = prev_in_thread(proc, x.spawn, lambda e: e["type"] == "Unpark")
    if not idle:
        fail("timer unit %d: no Unpark before its Spawn on the loop thread" % x.id)
    after = fired[0][0]["mono_ns"] - idle["mono_ns"]
    if after < 50e6 - 1.1e6:
        fail("timer_cb ran %s after the loop's wake-up before uv_timer_start, want >= 48.9 ms" % ms(after))
    # its timer Wake: the deadline is libuv's due time, 50 ms after the loop's time (whole ms of
    # CLOCK_MONOTONIC, read when its wait returned: at or after the Unpark before the poll that
    # started the timer), and it had passed when the timer ran
    tw = [w for w in x.wakes if w["kind"] == WAKE_TIMER]
    if len(tw) != 1 or tw[0]["waker"] != 0 or len(x.wakes) != 1:
        fail("timer unit %d: Wakes %s, want one timer Wake with no waker" % (x.id, [(w["kind"], w["waker"]) for w in x.wakes]))
    w = tw[0]
    unit = w["_seg"].time_unit_ns()
    deadline = w["mono_ns"] + w["object"] * unit
    lo = idle["mono_ns"] + 50e6 - 1.1e6
    hi = x.spawn["mono_ns"] + 50e6 + 0.1e6
    if not lo <= deadline <= hi:
        fail("deadline %s after the Unpark before uv_timer_start, %s after it: want within [49, 50] ms"
             % (ms(deadline - lo + 50e6 - 1.1e6), ms(deadline - x.spawn["mono_ns"])))
    if -w["object"] * unit < -0.1e6 or w["mono_ns"] > fired[0][0]["mono_ns"]:
        fail("timer Wake at lateness %s, or after the timer's poll" % ms(-w["object"] * unit))
    c.info = "timer_cb %s after the loop's wake-up before uv_timer_start (%s after the Spawn); timer Wake lateness %s" % (
        ms(after), ms(fired[0][0]["mono_ns"] - x.spawn["mono_ns"]), ms(-w["object"] * unit))

with case("rt-libuv-async") as c:
    xs = units_at("on_async")
    if len(xs) != 1:
        fail("%d units spawned at on_async, want 1" % len(xs))
    x = xs[0]
    runs = polls_of(x, "on_async")
    errs = []
    if stats["async_sends"] != 3 or len(x.wakes) != stats["async_sends"]:
        errs.append("%d Wakes of the async unit, the notifier sent %d (want 3)" % (len(x.wakes), stats["async_sends"]))
    if len(runs) != stats["async_runs"] or not 1 <= len(runs) <= 3:
        errs.append("%d async_cb polls, the server counted %d runs" % (len(runs), stats["async_runs"]))
    for w in x.wakes:
        if w["kind"] != WAKE_COND or w["tid"] == loop_tid or w["waker"] != 0:
            errs.append("async Wake kind %d on tid %d waker %d, want cond from the notifier thread"
                        % (w["kind"], w["tid"], w["waker"]))
        if not any(p[0]["mono_ns"] >= w["mono_ns"] and p[0]["tid"] == loop_tid for p in runs):
            errs.append("no async_cb poll after the Wake at %d" % w["mono_ns"])
    require(errs)
    d = [min(p[0]["mono_ns"] for p in runs if p[0]["mono_ns"] >= w["mono_ns"]) - w["mono_ns"] for w in x.wakes]
    c.info = "%d cross-thread Wakes, %d async_cb polls, wake -> poll %s" % (
        len(x.wakes), len(runs), ", ".join(ms(v) for v in d))

with case("rt-libuv-work") as c:
    hold, sleep = units_at("work_hold"), units_at("work_sleep")
    if len(hold) != 1 or len(sleep) != 1 or stats["works_done"] != 2:
        fail("%d work_hold and %d work_sleep units, the server counted %d done; want 1, 1, 2"
             % (len(hold), len(sleep), stats["works_done"]))
    errs, info = [], []
    blocking = list(proc.events(("BlockingCall",)))
    pool = set()
    for x, fn in ((hold[0], "work_hold"), (sleep[0], "work_sleep")):
        sw = [w for w in x.wakes if w["kind"] == WAKE_SPAWN]
        done = [w for w in x.wakes if w["kind"] == WAKE_OTHER]
        work, after = polls_of(x, fn), polls_of(x, "after_work")
        if x.spawn["tid"] != loop_tid or len(sw) != 1 or sw[0]["tid"] != loop_tid or not sw[0]["waker"]:
            errs.append("work unit %d: Spawn/spawn Wake not on the loop thread by its connection" % x.id)
            continue
        if len(work) != 1 or len(after) != 1 or len(done) != 1 or x.exits != 1:
            errs.append("work unit %d: %d work_cb, %d after_work_cb polls, %d done Wakes, %d exits"
                        % (x.id, len(work), len(after), len(done), x.exits))
            continue
        wp, ap = work[0], after[0]
        pool.add(wp[0]["tid"])
        if wp[0]["tid"] == loop_tid or done[0]["tid"] != wp[0]["tid"] or ap[0]["tid"] != loop_tid:
            errs.append("work unit %d: work_cb on tid %d, done Wake on %d, after_work_cb on %d"
                        % (x.id, wp[0]["tid"], done[0]["tid"], ap[0]["tid"]))
        if not sw[0]["mono_ns"] <= wp[0]["mono_ns"] <= wp[1]["mono_ns"] <= done[0]["mono_ns"] <= ap[0]["mono_ns"] <= x.exit["mono_ns"]:
            errs.append("work unit %d: spawn Wake, work_cb poll, done Wake, after_work_cb, exit out of order" % x.id)
        # usleep(10 ms) and the held read on a pipe: BlockingCalls of the unit, on the pool thread
        calls = [b for b in blocking if b["coroutine"] == x.id and b["tid"] == wp[0]["tid"]]
        if not calls or (fn == "work_sleep" and max(b["duration_ns"] for b in calls) < 9e6):
            errs.append("work unit %d: blocking calls of %s, want its usleep of 10 ms / its read"
                        % (x.id, [ms(b["duration_ns"]) for b in calls]))
        info.append("%s queue delay %s" % (fn, ms(wp[0]["mono_ns"] - sw[0]["mono_ns"])))
    if len(pool) != 1:
        errs.append("work_cb polls on threads %s, want the one pool thread" % sorted(pool))
    require(errs)
    first, second = polls_of(hold[0], "work_hold")[0], polls_of(sleep[0], "work_sleep")[0]
    q2 = [w for w in sleep[0].wakes if w["kind"] == WAKE_SPAWN][0]
    # by construction the second was queued while work_hold ran on the only pool thread
    if not q2["mono_ns"] < first[1]["mono_ns"] <= second[0]["mono_ns"]:
        fail("work_sleep queued at %d, work_hold's poll ended at %d, work_sleep's started at %d: "
             "want queued before the end, started after it" % (q2["mono_ns"], first[1]["mono_ns"], second[0]["mono_ns"]))
    c.info = "; ".join(info) + " (work_sleep waited behind work_hold)"

with case("rt-libuv-fs") as c:
    op, cl = units_at("on_opened"), units_at("on_fs_closed")
    if len(op) != 1 or len(cl) != 1:
        fail("%d units at on_opened, %d at on_fs_closed, want 1 each (/fs)" % (len(op), len(cl)))
    errs = []
    for x in op + cl:
        if len(x.polls) != 1 or x.exits != 1 or x.polls[0][0]["tid"] != loop_tid:
            errs.append("fs unit %d: %d polls, %d exits" % (x.id, len(x.polls), x.exits))
    conn = [u for u in cos.values() if u.id == op[0].parent and u.spawn and fn_of(u.spawn) == "on_read"]
    if not conn:
        errs.append("the open's unit %d has parent %d, not a connection" % (op[0].id, op[0].parent))
    if cl[0].parent != op[0].id:
        errs.append("the close's unit has parent %d, want the open's %d" % (cl[0].parent, op[0].id))
    require(errs)
    c.info = "open unit %d (parent: connection %d), close unit %d" % (op[0].id, op[0].parent, cl[0].id)

with case("rt-libuv-nested") as c:
    # on_nested_timer ran inside on_read (uv_run from a callback): the read_cb poll ends where
    # the timer's poll starts, and the connection's poll starts again right after it ends
    ts = units_at("on_nested_timer")
    if len(ts) != 1:
        fail("%d units at on_nested_timer, want 1" % len(ts))
    tp = polls_of(ts[0], "on_nested_timer")
    if len(tp) != 1 or not tp[0][1]:
        fail("nested timer unit: %d timer_cb polls" % len(tp))
    start, end = tp[0]
    before = prev_in_thread(proc, start, lambda e: e["type"] in ("PollStart", "PollEnd", "Park"))
    after = next_in_thread(proc, end, lambda e: e["type"] in ("PollStart", "PollEnd", "Park"))
    outer = before["coroutine"] if before and before["type"] == "PollEnd" else None
    x = cos.get(outer)
    if not x or not x.spawn or fn_of(x.spawn) != "on_read" or x.id != ts[0].parent:
        fail("the event before the nested timer's poll is %s, want the PollEnd of the connection that started it"
             % (before and before["type"]))
    if not after or after["type"] != "PollStart" or after["coroutine"] != outer or fn_of(after) != "on_read":
        fail("the event after the nested timer's poll is %s, want the connection's read_cb poll again"
             % (after and (after["type"], after.get("coroutine"))))
    c.info = "read_cb poll of unit %d split around the timer_cb poll of unit %d" % (outer, ts[0].id)

with case("rt-libuv-check") as c:
    checks = all_polls("on_check")
    if not checks or len(checks) < stats["checks"]:
        fail("%d check_cb polls, the server counted %d runs by /stats" % (len(checks), stats["checks"]))
    c.info = "%d check_cb polls (%d counted by /stats)" % (len(checks), stats["checks"])

with case("rt-libuv-workers") as c:
    errs = []
    parks = collections.defaultdict(collections.Counter)
    for e in proc.events(("Park",)):
        parks[e["tid"]][e["call"]] += 1
    if set(parks[loop_tid]) != {CALL_EPOLL_WAIT}:
        errs.append("the loop thread parks in %s, want epoll_wait only" % dict(parks[loop_tid]))
    pool = {p[0]["tid"] for p in all_polls("work_sleep")}
    for t in pool:
        if set(parks[t]) != {0}:
            errs.append("pool thread %d parks in %s, want its wait for work (call other)" % (t, dict(parks[t])))
    for t in [loop_tid] + sorted(pool):
        td, _ = proc.thread_def(t)
        if not td or td["role"] != ROLE_WORKER:
            errs.append("thread %d is not a worker: %s" % (t, td))
    require(errs)
    c.info = "loop %d: %d parks; pool %s" % (loop_tid, sum(parks[loop_tid].values()), sorted(pool))

with case("rt-libuv-summary") as c:
    p = subprocess.run([ANALYZE, "summary", tr.paths[0]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out = p.stdout.decode(errors="replace")
    missing = [k for k in ("tcp read_cb", "async async_cb", "work work_cb", "timer timer_cb") if k not in out]
    if p.returncode != 0 or missing:
        fail("d9-analyze summary exited %d, lacks %s" % (p.returncode, missing))
PYEOF
pl_check rt-libuv "$CHECKS" "$UV_HTTP" "$SDIR/maps" "$SDIR/stats.json" "$N"

# ---- generic mode: D9_RUNTIME=generic, and another adapter forced -------------------------------------
read -r -d '' GENERIC <<'PYEOF'
name = args[0]
with case(name) as c:
    require(check_decodes_clean(tr))
    proc = tr.the_proc()
    bad = [e["type"] for e in proc.events(COROUTINE_TYPES)]
    if bad:
        fail("%d coroutine events (%s) in generic mode" % (len(bad), sorted(set(bad))))
    parks = [e for e in proc.events(("Park",)) if e["tid"] == proc.pid and e["call"] == CALL_EPOLL_WAIT]
    if not parks:
        fail("no epoll_wait park on the loop thread")
    c.info = "%d parks, no coroutine event" % len(parks)
PYEOF
for rt in generic st; do
	name=rt-libuv-runtime-$rt
	if ! pl_start "$T/$rt" "$UV_HTTP" D9_RUNTIME=$rt --; then
		pl_fail "$name" "$PL_ERR"
		continue
	fi
	ok=1
	pl_gets 3 /fast ok || { pl_fail "$name-requests" "$PL_ERR"; ok=0; }
	pl_gets 1 "/work?ms=5" "work ms=5 status=0" || { pl_fail "$name-requests" "$PL_ERR"; ok=0; }
	pl_gets 1 /async async || { pl_fail "$name-requests" "$PL_ERR"; ok=0; }
	pl_quit
	[ "$SRC" = 0 ] || { pl_fail "$name-requests" "exit status $SRC"; ok=0; }
	[ "$ok" = 1 ] && pl_pass "$name-requests" "answered, exit 0"
	pl_check "$name" "$GENERIC" "$name"
done

# ---- recording toggled: D9_ENABLED=0, then D9_TOGGLE_SIGNAL on, then off again ---------------------
# Handles registered while recording is off are not units (their Spawn and definition would be
# missing): the trace stays self-contained, and every request is answered in every phase.
read -r -d '' TOGGLE <<'PYEOF'
binary, maps = args
syms = Symbols(binary, maps)
with case("rt-libuv-toggle") as c:
    # a thread that recorded while on and waits unparked once off (a pool thread: its park is
    # only recorded while on) still holds those events at exit: the last seal counts them as
    # Dropped (reason other, 0), the only drops allowed here
    require(check_decodes_clean(tr, allow_dropped=True) + check_polls_and_parks(tr)
            + check_ids_defined(tr) + check_coroutine_defs(tr)
            + ["Dropped with reason %s" % ev.get("reason") for ev in tr.events(("Dropped",))
               if ev.get("reason") != 0])
    proc = tr.the_proc()
    cos = coroutines(proc)
    conns = [x for x in cos.values() if x.spawn and
             syms.name_of(x.seg.location(x.location)["function_addr"]) == "on_read"]
    polled = [x for x in cos.values() if x.polls]
    if any(not x.spawn for x in polled):
        fail("units poll without a Spawn in the trace: %s" % [x.id for x in polled if not x.spawn])
    # recording on: 2 /fast, /timer, /work (connections accepted by the listener, which was
    # registered while recording was off: their connection_cb is no poll, their read_cb is)
    if len(conns) < 4:
        fail("%d connection units, want the 4 connections made while recording was on" % len(conns))
    c.info = "%d units, %d connection units, %d polls" % (len(cos), len(conns), tr.count("PollStart"))
PYEOF
name=rt-libuv-toggle
if pl_start "$T/toggle" "$UV_HTTP" D9_ENABLED=0 D9_TOGGLE_SIGNAL=USR2 --; then
	ok=1
	pl_gets 2 /fast ok && pl_gets 1 "/work?ms=5" "work ms=5 status=0" && pl_gets 1 /async async ||
		{ pl_fail "$name-requests" "off: $PL_ERR"; ok=0; }
	kill -USR2 "$SPID"
	pl_gets 2 /fast ok && pl_gets 1 "/timer?ms=10" "timer ms=10" &&
		pl_gets 1 "/work?ms=5" "work ms=5 status=0" && pl_gets 1 /async async ||
		{ pl_fail "$name-requests" "on: $PL_ERR"; ok=0; }
	kill -USR2 "$SPID"
	pl_gets 1 /fast ok && pl_gets 1 /async async || { pl_fail "$name-requests" "off again: $PL_ERR"; ok=0; }
	pl_quit
	[ "$SRC" = 0 ] || { pl_fail "$name-requests" "exit status $SRC"; ok=0; }
	[ "$ok" = 1 ] && pl_pass "$name-requests" "answered while off, on, off again; exit 0"
	pl_check "$name" "$TOGGLE" "$UV_HTTP" "$SDIR/maps"
else
	pl_fail "$name" "$PL_ERR"
fi

# ---- real DNS servers on libuv under dnsperf -------------------------------------------------------
# dns_answers PORT: one UDP query for d9.test is answered
dns_answers() {
	python3 - "$1" <<'PYEOF'
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x02d9\x04test\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
s.sendto(q, ("127.0.0.1", int(sys.argv[1])))
try:
    sys.exit(0 if s.recv(512)[:2] == b"\x12\x34" else 1)
except OSError:
    sys.exit(1)
PYEOF
}

# completed DIR PORT PROTO SECONDS QPS: the queries dnsperf saw answered
completed() {
	local mode=() out
	[ "$3" = tcp ] && mode=(-m tcp)
	out=$(timeout 60 dnsperf "${mode[@]}" -s 127.0.0.1 -p "$2" -d "$1/queries" -l "$4" -Q "$5" 2>&1)
	echo "$out" >"$1/dnsperf-$3"
	echo "$out" | sed -n 's/^ *Queries completed: *\([0-9]*\).*/\1/p'
}

# dns_load NAME DIR PORT -- COMMAND...: starts the server under the agent (trace in DIR/trace),
# waits until it answers, runs dnsperf over UDP (3 s) then TCP (2 s), stops it with SIGTERM.
# Sets UDP and TCP (queries answered) and SDIR; returns 1 after a FAIL line.
dns_load() {
	local name=$1 dir=$2 port=$3
	shift 4
	printf 'd9.test A\nd9.test AAAA\n' >"$dir/queries"
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$dir/trace/trace.bin" D9_FLUSH_INTERVAL=50ms \
		"$@" >"$dir/stdout" 2>"$dir/stderr" </dev/null &
	SPID=$!
	PL_PIDS+=("$SPID")
	if ! d9_wait_for 60 dns_answers "$port"; then
		pl_fail "$name" "no answer on port $port (stderr: $(head -c 300 "$dir/stderr"))"
		return 1
	fi
	UDP=$(completed "$dir" "$port" udp 3 1000)
	TCP=$(completed "$dir" "$port" tcp 2 500)
	kill -TERM "$SPID" 2>/dev/null
	pl_wait_exit 30
	if [ -z "$UDP" ] || [ -z "$TCP" ] || [ "$UDP" -eq 0 ] || [ "$TCP" -eq 0 ]; then
		pl_fail "$name" "dnsperf: udp '$UDP' tcp '$TCP' queries answered ($(tail -n 3 "$dir/dnsperf-udp" | tr '\n' ' '))"
		return 1
	fi
	pl_pass "$name-load" "$UDP UDP and $TCP TCP queries answered; exit status $SRC after SIGTERM"
	SDIR=$dir
}

read -r -d '' DNS_CHECKS <<'PYEOF'
name, udp, tcp = args[0], int(args[1]), int(args[2])
with case(name) as c:
    # a thread that recorded while on and waits unparked once off (a pool thread: its park is
    # only recorded while on) still holds those events at exit: the last seal counts them as
    # Dropped (reason other, 0), the only drops allowed here
    require(check_decodes_clean(tr, allow_dropped=True) + check_polls_and_parks(tr)
            + check_ids_defined(tr) + check_coroutine_defs(tr)
            + ["Dropped with reason %s" % ev.get("reason") for ev in tr.events(("Dropped",))
               if ev.get("reason") != 0])
    proc = tr.the_proc()
    kinds = collections.Counter()
    for e in proc.events(("PollStart",)):
        n = e["_seg"].location_name(e["location"]) or ""
        kinds[" ".join(n.split()[:2])] += 1
    errs = []
    if kinds["udp recv_cb"] < udp:
        errs.append("%d udp recv_cb polls for %d UDP queries answered" % (kinds["udp recv_cb"], udp))
    for k in ("tcp connection_cb", "tcp read_cb", "timer timer_cb"):
        if not kinds[k]:
            errs.append("no %s poll" % k)
    if name.endswith("kresd") and kinds["tcp write_cb"] < tcp:
        # kresd answers each TCP query with a uv_write
        errs.append("%d tcp write_cb polls for %d TCP queries answered" % (kinds["tcp write_cb"], tcp))
    if name.endswith("named"):
        # BIND 9.18: one loop per thread, handing work to each other with uv_async_send
        loops = {e["tid"] for e in proc.events(("PollStart",))}
        polled = collections.defaultdict(set)
        for e in proc.events(("PollStart",)):
            polled[e["coroutine"]].add(e["tid"])
        cross = [w for w in proc.events(("Wake",)) if w["kind"] == WAKE_COND
                 and polled[w["woken"]] and w["tid"] not in polled[w["woken"]]]
        if len(loops) < 2 or not cross:
            errs.append("polls on %d threads, %d cross-thread async Wakes" % (len(loops), len(cross)))
        c.info = "%d loop threads, %d cross-thread async Wakes; " % (len(loops), len(cross))
    require(errs)
    c.info += ", ".join("%s %d" % kv for kv in kinds.most_common(8))
PYEOF

if ! command -v dnsperf >/dev/null; then
	pl_skip rt-libuv-kresd "dnsperf is not installed"
	pl_skip rt-libuv-named "dnsperf is not installed"
	exit 0
fi

# knot-resolver: the package's /etc/knot-resolver/kresd.conf (its modules, a cache) on a port of
# our own, logging to stderr, with a hints entry so that every query is answered without the
# network; the unit runs `kresd -c ... -n` in its working directory
KRESD=/usr/sbin/kresd
if [ ! -x "$KRESD" ] || ! ldd "$KRESD" 2>/dev/null | grep -q 'libuv\.so'; then
	pl_skip rt-libuv-kresd "knot-resolver (kresd on libuv) is not installed"
else
	KDIR=$T/kresd
	mkdir -p "$KDIR/run"
	KPORT=$(pl_free_port)
	cat >"$KDIR/kresd.conf" <<EOF
log_target('stderr')
net.listen('127.0.0.1', $KPORT, { kind = 'dns' })
modules = { 'hints > iterate', 'stats', 'predict' }
hints.set('d9.test 127.0.0.2')
cache.open(10 * MB, 'lmdb://$KDIR/run/cache')
EOF
	dns_load rt-libuv-kresd "$KDIR" "$KPORT" -- "$KRESD" -c "$KDIR/kresd.conf" -n "$KDIR/run" &&
		pl_check rt-libuv-kresd "$DNS_CHECKS" rt-libuv-kresd "$UDP" "$TCP"
fi

# BIND 9.18: as Debian's unit starts it (`named -f -u bind`), with a config of our own: one
# primary zone d9.test on a port of our own, no recursion, no control channel
NAMED=/usr/sbin/named
if [ ! -x "$NAMED" ] || ! ldd "$NAMED" 2>/dev/null | grep -q 'libuv\.so'; then
	pl_skip rt-libuv-named "BIND (named on libuv) is not installed"
elif ! id bind >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
	pl_skip rt-libuv-named "needs root and the bind user (named -u bind)"
else
	NDIR=$T/named
	mkdir -p "$NDIR"
	NPORT=$(pl_free_port)
	cat >"$NDIR/named.conf" <<EOF
options {
	directory "$NDIR";
	listen-on port $NPORT { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	pid-file none;
	session-keyfile none;
};
controls { };
zone "d9.test" { type primary; file "$NDIR/d9.test.zone"; };
EOF
	cat >"$NDIR/d9.test.zone" <<'EOF'
$TTL 300
@ IN SOA ns.d9.test. admin.d9.test. 1 3600 600 86400 300
@ IN NS ns.d9.test.
ns IN A 127.0.0.1
@ IN A 127.0.0.2
EOF
	# named drops to the bind user: it must reach its directory (the trace directory is the
	# agent's to prepare for that user)
	chmod 755 "$T"
	chown -R bind "$NDIR"
	dns_load rt-libuv-named "$NDIR" "$NPORT" -- "$NAMED" -f -u bind -c "$NDIR/named.conf" &&
		pl_check rt-libuv-named "$DNS_CHECKS" rt-libuv-named "$UDP" "$TCP"
fi
