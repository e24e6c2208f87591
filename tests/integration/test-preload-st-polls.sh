#!/usr/bin/env bash
# test-preload-st-polls.sh: polls, parks and coroutine lifetimes of the State Threads server under
# the agent, in both event systems (select, the Debian default, and -e poll). One run per mode:
# N /fast requests on N connections; one /burn?ms=20 and one /sleep?ms=50, each on its own
# connection; /burn?ms=20 and /sleep?ms=50 pipelined on one connection (the sleep starts right
# after 20 ms of CPU, with no idle wait in between); then one keep-alive control connection that
# waits for every other connection to close (/stats) and sends /quit. Checked on the trace:
#   - decoding: clean, sealed, no Dropped; thread order; polls and parks properly nested per
#     (pid, tid); coroutine lifetimes; exactly one Wake before every poll (the fd Wakes of a
#     coroutine all name its one socket); QueueSample counts match the Wakes not yet followed
#     by a poll; every id defined in its segment and every poll at its coroutine's spawn
#     location; (select mode) a Coroutine definition in the segment for every coroutine its
#     events name (FORMAT.md section 10); one worker thread, parking in select or poll;
#   - exact counts from st-http.c: 1 primordial Spawn (location "main") + N + 4 connection
#     coroutines (spawned at serve_conn by the primordial one, each with its spawn Wake and >= 1
#     poll); N + 3 CoroutineExits (the control connection is still running at exit); every
#     location's call site lies in run_scheduler (st_init's and st_thread_create's callers);
#   - /burn: a poll of >= 19 ms by the burn connection's coroutine, located at serve_conn (by
#     dladdr name if present, else by function_addr = load base + nm's offset);
#   - /sleep: one timer Wake, with no waker, whose deadline (Wake time + object, in units of
#     2^time_shift ticks) is libst's: 50 ms after libst's last clock reading, which is taken when
#     its idle wait returns (so at or after the Unpark before the sleeping poll) and no later
#     than the st_usleep call; whose lateness (-object) is >= 0 (down to -0.1 ms: libst's clock
#     is gettimeofday in microseconds) and < 1 s (a loaded 2-CPU machine made a 10 ms select
#     return 300 ms late once); followed by the coroutine's PollStart >= 49 ms after the PollEnd
#     that went to sleep (alone, libst's idle wait lasts the whole 50 ms). The same on the
#     pipelined connection.
# A third run per mode pipelines /burn?ms=20 + /sleep?ms=50 while /fast requests on other
# connections keep libst's idle wait returning: libst then wakes the sleeper at its own due time,
# which can come well before 50 ms after the call; the timer Wake must still show the deadline as
# passed (lateness >= 0), with the deadline window above.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-st-polls

N=10

read -r -d '' SLEEPDEF <<'PYEOF'
def check_sleep(proc, x, burn_ms, quiet):
    """The timer Wake of connection coroutine x after a 50 ms st_usleep (called after burn_ms of
    CPU in the same poll). quiet: nothing else happened during the sleep. Returns info."""
    unit = proc.segments[0].time_unit_ns()
    timers = [w for w in x.wakes if w["kind"] == WAKE_TIMER]
    if len(timers) != 1:
        fail("the /sleep connection %d has %d timer Wakes (kinds %s), want 1" % (
            x.id, len(timers), [w["kind"] for w in x.wakes]))
    w = timers[0]
    if w["waker"] != 0:
        fail("timer Wake names waker %d" % w["waker"])
    late_ns = -w["object"] * unit
    # the poll that called st_usleep: the last one that ended before the Wake
    before = [pp for pp in x.polls if pp[1] is not None and pp[1]["mono_ns"] <= w["mono_ns"]]
    after = [pp for pp in x.polls if pp[0]["mono_ns"] >= w["mono_ns"]]
    if not before or not after:
        fail("no poll before/after the timer Wake")
    start, end = before[-1]
    nxt = after[0][0]
    idle = prev_in_thread(proc, start, lambda e: e["type"] == "Unpark")
    deadline = w["mono_ns"] + w["object"] * unit
    errs = []
    # libst wakes a sleeper once its clock passed the due time: the deadline the trace gives
    # must have passed at the Wake (0.1 ms for libst's microsecond gettimeofday clock)
    if late_ns < -0.1e6:
        errs.append("lateness %s < 0: the Wake (object %d units) says the deadline is still "
                    "ahead, yet libst woke the sleeper" % (ms(late_ns), w["object"]))
    if late_ns >= 1e9:
        errs.append("lateness %s >= 1 s" % ms(late_ns))
    # libst's deadline is 50 ms after its last clock reading, taken when its idle wait returned
    # (at or after the Unpark before the sleeping poll) and no later than the st_usleep call
    lo = (idle["mono_ns"] if idle else start["mono_ns"]) + 50e6 - 0.1e6
    if not (lo <= deadline <= end["mono_ns"] + 50e6 + 0.05e6):
        errs.append("deadline %s after the last idle wait returned, %s after the sleeping poll "
                    "ended: want within [50 ms after the first, 50 ms after the second]"
                    % (ms(deadline - lo - 50e6 + 0.1e6), ms(deadline - end["mono_ns"])))
    gap = nxt["mono_ns"] - end["mono_ns"]
    # alone, libst's idle wait lasts the whole 50 ms from the call (its timeout counts from its
    # last clock reading, taken when the wait starts)
    if quiet and gap < 49e6:
        errs.append("next PollStart %s after the PollEnd that went to sleep, want >= 49 ms" % ms(gap))
    if nxt is not next_in_thread(proc, w, lambda e: e["type"] == "PollStart"):
        errs.append("the timer Wake is not followed by the coroutine's PollStart")
    if burn_ms and end["mono_ns"] - start["mono_ns"] < (burn_ms - 1) * 1e6:
        errs.append("the poll that burned and went to sleep lasted %s" % ms(end["mono_ns"] - start["mono_ns"]))
    require(errs)
    return "lateness %s (object %d units), slept %s%s" % (ms(late_ns), w["object"], ms(gap),
        ", poll before the sleep %s" % ms(end["mono_ns"] - start["mono_ns"]) if burn_ms else "")
PYEOF

read -r -d '' CHECKS <<'PYEOF'
binary, maps, stats_path, n, mode = args[0], args[1], args[2], int(args[3]), args[4]
p = "st-polls-" + mode
syms = Symbols(binary, maps)
stats = load_json(stats_path)

with case(p + "-decode") as c:
    require(check_decodes_clean(tr) + check_series(tr))
    proc = tr.the_proc()
    c.info = "%d events in %d segment(s)" % (sum(len(s.events) for s in tr.segments), len(tr.segments))

with case(p + "-nesting") as c:
    require(check_thread_order(tr) + check_polls_and_parks(tr))
    c.info = "%d polls, %d parks" % (tr.count("PollStart"), tr.count("Park"))

with case(p + "-lifetimes") as c:
    require(check_lifetimes(tr))

with case(p + "-one-wake-per-poll") as c:
    require(check_one_wake_per_poll(tr) + check_fd_wakes_one_fd(tr))

with case(p + "-ids") as c:
    require(check_ids_defined(tr) + check_poll_locations(tr))

if mode == "select":  # once is enough: the rule does not depend on the event system
    with case(p + "-coroutine-defs") as c:
        require(check_coroutine_defs(tr))

with case(p + "-queue-samples") as c:
    require(check_queue_samples(tr))
    c.info = "%d QueueSamples" % tr.count("QueueSample")

with case(p + "-worker") as c:
    proc = tr.the_proc()
    if len(proc.tids) != 1:
        fail("events on threads %s, want the one scheduler thread" % list(proc.tids))
    tid = next(iter(proc.tids))
    td, seg = proc.thread_def(tid)
    if not td or td["role"] != ROLE_WORKER or td["worker"] == 0:
        fail("thread %d: definition %s, want role worker with a worker id" % (tid, td))
    bad = [e for e in proc.events() if e["worker"] != td["worker"]]
    if bad:
        fail("%d events carry worker %d, the Thread def says %d" % (len(bad), bad[0]["worker"], td["worker"]))
    calls = collections.Counter(e["call"] for e in proc.events(("Park",)))
    want = CALL_POLL if mode == "poll" else CALL_SELECT
    if set(calls) != {want}:
        fail("Park calls %s, want only %d (%s)" % (dict(calls), want, mode))
    c.info = "tid %d worker %d, Park call %d" % (tid, td["worker"], want)

with case(p + "-counts") as c:
    proc = tr.the_proc()
    cos = coroutines(proc)
    spawned = [x for x in cos.values() if x.spawn]
    mains = [x for x in spawned if x.parent == 0 and x.location_name() == "main"]
    if len(mains) != 1:
        fail("%d primordial coroutines" % len(mains))
    main = mains[0]
    conns = serve_conn_coroutines(proc, syms)
    if len(conns) != n + 4:
        fail("%d coroutines spawned at serve_conn, want %d (N=%d /fast + burn + sleep + pipelined + control)"
             % (len(conns), n + 4, n))
    if len(spawned) != n + 5:
        fail("%d Spawns, want %d (primordial + %d connections): extra %s" % (len(spawned), n + 5,
             n + 4, [(x.id, x.location_def()) for x in spawned if x is not main and x not in conns]))
    if stats["connections_total"] != n + 4 or stats["requests"]["fast"] != n:
        fail("the server counted %s connections, %s /fast" % (stats["connections_total"], stats["requests"]["fast"]))
    errs = []
    for x in conns:
        if x.parent != main.id:
            errs.append("coroutine %d: parent %d, want the primordial %d" % (x.id, x.parent, main.id))
        sw = [w for w in x.wakes if w["kind"] == WAKE_SPAWN]
        if len(sw) != 1 or sw[0]["waker"] != main.id:
            errs.append("coroutine %d: spawn Wakes %s, want one by %d" % (x.id, [(w["waker"], w["kind"]) for w in sw], main.id))
        if not x.polls:
            errs.append("coroutine %d: no poll" % x.id)
        if any(w["kind"] == WAKE_FD and w["waker"] != 0 for w in x.wakes):
            errs.append("coroutine %d: an fd Wake names a waker" % x.id)
    for x in conns[:-1]:
        if x.exits != 1:
            errs.append("connection coroutine %d (closed): %d CoroutineExits" % (x.id, x.exits))
    if conns[-1].exits:
        errs.append("the control connection %d exited, but the process exited inside it" % conns[-1].id)
    if main.exits:
        errs.append("the primordial coroutine exited")
    # call sites: the connection coroutines are created by run_scheduler's accept loop, and
    # the primordial location is st_init's call site, also in run_scheduler
    for x in conns + [main]:
        site = syms.name_of(x.location_def()["callsite_addr"] - 1)
        if site != "run_scheduler":
            errs.append("coroutine %d: location call site %#x is in %s, want run_scheduler"
                        % (x.id, x.location_def()["callsite_addr"], site))
    exits = tr.count("CoroutineExit")
    if exits != n + 3:
        errs.append("%d CoroutineExits, want %d" % (exits, n + 3))
    require(errs)
    c.info = "%d connection coroutines, %d exits, %d polls of /fast connections" % (
        len(conns), exits, sum(len(x.polls) for x in conns[:n]))

with case(p + "-burn") as c:
    proc = tr.the_proc()
    conns = serve_conn_coroutines(proc, syms)
    burn = conns[n]
    ok, how = location_is(burn.seg, burn.location, "serve_conn", syms)
    long_polls = [d for d in burn.poll_ns() if d is not None and d >= 19e6]
    if not long_polls:
        fail("the /burn connection %d has polls of %s, none >= 19 ms" % (
            burn.id, [ms(d) for d in burn.poll_ns() if d is not None]))
    if max(long_polls) > 5e9:
        fail("a 20 ms burn took a poll of %s" % ms(max(long_polls)))
    others = [ms(d) for x in conns[:n] for d in x.poll_ns() if d is not None and d >= 19e6]
    c.info = "poll of %s at serve_conn (%s)%s" % (ms(max(long_polls)), how,
        "; /fast polls >= 19 ms too: %s" % others if others else "")

with case(p + "-sleep") as c:
    proc = tr.the_proc()
    c.info = check_sleep(proc, serve_conn_coroutines(proc, syms)[n + 1], 0, True)

with case(p + "-sleep-after-burn") as c:
    proc = tr.the_proc()
    c.info = check_sleep(proc, serve_conn_coroutines(proc, syms)[n + 2], 20, True)
PYEOF

for mode in select poll; do
	name=st-polls-$mode
	args=()
	[ "$mode" = poll ] && args=(-e poll)
	if ! pl_start "$T/$mode" "$ST_HTTP" -- "${args[@]}"; then
		pl_fail "$name" "$PL_ERR"
		continue
	fi
	ok=1
	if ! pl_gets "$N" /fast ok; then pl_fail "$name-requests" "$PL_ERR"; ok=0; fi
	pl_get "/burn?ms=20"
	case "$BODY" in "burn ms=20 cpu_ns="*) ;; *) pl_fail "$name-requests" "/burn: $CODE '$BODY'"; ok=0 ;; esac
	pl_get "/sleep?ms=50"
	[ "$BODY" = "sleep ms=50" ] || { pl_fail "$name-requests" "/sleep: $CODE '$BODY'"; ok=0; }
	pl_pipeline "/burn?ms=20" "/sleep?ms=50" || { pl_fail "$name-requests" "$PL_ERR"; ok=0; }
	if ! pl_session_quit; then
		pl_fail "$name-exit" "$PL_ERR (exit status $SRC)"
		continue
	fi
	if [ "$SRC" != 0 ] || [ -s "$SDIR/stderr" ]; then
		pl_fail "$name-exit" "exit status $SRC, stderr '$(head -c 300 "$SDIR/stderr")'"
	else
		pl_pass "$name-exit" "status 0 after /quit, nothing on stderr"
	fi
	[ "$ok" = 1 ] && pl_pass "$name-requests" "$N /fast, /burn?ms=20, /sleep?ms=50, both pipelined, answered"
	pl_check "$name" "$SLEEPDEF
$CHECKS" "$ST_HTTP" "$SDIR/maps" "$SDIR/stats.json" "$N" "$mode"
done

# ---- a sleep that starts late in a long poll, while other connections keep libst busy ------------
# /burn?ms=20 and /sleep?ms=50 pipelined on one connection, while /fast requests arrive on other
# connections every ~5 ms: libst's idle waits return often, so it wakes the sleeper at its own
# due time (50 ms after its last clock reading, before the burn), not 50 ms after the call.
read -r -d '' TRAFFIC <<'PYEOF'
binary, maps, mode = args
syms = Symbols(binary, maps)
p = "st-polls-%s-traffic" % mode
with case(p + "-invariants"):
    require(check_decodes_clean(tr) + check_st_invariants(tr))
with case(p + "-sleep") as c:
    proc = tr.the_proc()
    sleepers = [x for x in coroutines(proc).values() if any(w["kind"] == WAKE_TIMER for w in x.wakes)]
    if len(sleepers) != 1:
        fail("%d coroutines with a timer Wake, want the pipelined connection's only" % len(sleepers))
    x = sleepers[0]
    w = [w for w in x.wakes if w["kind"] == WAKE_TIMER][0]
    end = [pp[1] for pp in x.polls if pp[1] is not None and pp[1]["_i"] < w["_i"]][-1]
    busy = [e for e in proc.tids[w["tid"]][end["_ti"]:w["_ti"]] if e["type"] == "Unpark" and e["ready"] > 0]
    if not busy:
        skip("no idle wait returned with ready descriptors during the sleep: the traffic did not "
             "overlap it, so this run tests nothing")
    c.info = check_sleep(proc, x, 20, False) + "; %d idle waits ended by traffic during the sleep" % len(busy)
PYEOF

for mode in select poll; do
	name=st-polls-$mode-traffic
	args=()
	[ "$mode" = poll ] && args=(-e poll)
	if ! pl_start "$T/$mode-traffic" "$ST_HTTP" -- "${args[@]}"; then
		pl_fail "$name" "$PL_ERR"
		continue
	fi
	rm -f "$T/traffic-started" "$T/traffic-stop"
	# the traffic flows from before the pipeline starts until it is answered (a fixed number of
	# requests could end first on a slow machine), 2000 requests at most
	( for i in $(seq 2000); do
		curl -sS --max-time 10 -o /dev/null "http://127.0.0.1:$SPORT/fast" 2>/dev/null
		[ "$i" = 1 ] && : >"$T/traffic-started"
		[ -e "$T/traffic-stop" ] && break
		sleep 0.005 # the traffic's pace, not a wait
	done ) &
	bg=$!
	d9_wait_for 30 test -e "$T/traffic-started"
	pl_pipeline "/burn?ms=20" "/sleep?ms=50" || pl_fail "$name-requests" "$PL_ERR"
	: >"$T/traffic-stop"
	wait "$bg"
	if ! pl_session_quit || [ "$SRC" != 0 ]; then
		pl_fail "$name-exit" "${PL_ERR:-} exit status $SRC"
		continue
	fi
	pl_check "$name" "$SLEEPDEF
$TRAFFIC" "$ST_HTTP" "$SDIR/maps" "$mode"
done
