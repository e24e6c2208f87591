#!/usr/bin/env bash
# test-preload-st-process.sh: the State Threads server's process-level variants under the agent.
#   - fork mode (-w 2): the parent forks two workers that each run st_init and an accept loop.
#     12 /fast requests (one connection each; X-Pid names the worker), then /quit: that worker
#     exits 0, the parent SIGTERMs the other and exits 0. The trace holds one decodable, sealed
#     series per worker (files trace.<pid>.<seq>.*, header pid = that worker, ppid = the parent,
#     segments 0, 1, ...), each a worker thread with polls; the parent runs no scheduler and
#     records nothing. Each worker's connection coroutines are exactly the replies it sent.
#   - fork mode, SIGTERM to the parent only: the parent (it never recorded, so it has no agent
#     handler) dies by the signal (status 143); the workers follow (PR_SET_PDEATHSIG=SIGTERM) and
#     each leaves a sealed series.
#   - application switch callbacks (-c, in select and poll mode): the program's own st_set_switch_in_cb/out_cb still run.
#     After 3 /fast, /fanout?k=4 and /join, /stats (on the control connection, every other one
#     closed) shows switch_in_calls > 0, switch_out_calls > 0 and, per tests/servers/README.md,
#     out - in = fanout_children + closed connections + 1 (the primordial coroutine); the trace
#     still has the polls, and the usual invariants hold.
#   - SIGTERM (the server has no handler; the agent's flushes and re-raises): the shell sees
#     exit status 143, no .active file is left, every segment is sealed (.bin/.bin.gz with a
#     trailer) and the trailer's event count, time range and per-type counts match the decoded
#     events (FORMAT.md section 11).
#   - SIGTERM while a coroutine runs (/burn?ms=3000, signal after 0.5 s): exit status 143, a
#     sealed trace whose last event is the PollStart of the burning connection coroutine (what
#     ran when the process was killed is in the trace; its poll stays open).
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-st-process

# sockets_left PID...: each process holds one socket, its listener: every connection it accepted
# is closed, so its coroutine has exited (it returns right after the close, without yielding).
sockets_left() {
	local p n
	for p in "$@"; do
		n=$(find /proc/"$p"/fd -lname 'socket:*' 2>/dev/null | wc -l)
		[ "$n" = 1 ] || return 1
	done
}
# all_gone PID...: none of the processes exists any more
all_gone() {
	local p
	for p in "$@"; do ! kill -0 "$p" 2>/dev/null || return 1; done
}
# two_workers PID: the -w 2 parent has forked its two workers
two_workers() { [ "$(ps -o pid= --ppid "$1" | wc -l)" = 2 ]; }
# cpu_ms PID: CPU time (user + system) of the process's main thread in ms
cpu_ms() { sed 's/.*) //' "/proc/$1/task/$1/stat" 2>/dev/null | awk -v hz="$(getconf CLK_TCK)" '{ print int(($12 + $13) * 1000 / hz) }'; }

# ---- fork mode -----------------------------------------------------------------------------------
read -r -d '' FORK <<'PYEOF'
binary, maps, parent, served = args[0], args[1], int(args[2]), args[3]
syms = Symbols(binary, maps)
# served: "pid pid pid ..." the X-Pid of every /fast reply, then the /quit worker last
replies = [int(x) for x in served.split()]
workers = sorted(set(int(x) for x in args[4].split()))

with case("st-fork-decode") as c:
    require(check_decodes_clean(tr) + check_series(tr))
    c.info = "segments %s" % [s.name for s in tr.segments]

with case("st-fork-series") as c:
    pids = sorted(tr.procs)
    if pids != workers:
        fail("trace pids %s, the workers are %s (parent %d)" % (pids, workers, parent))
    errs = []
    for pid, proc in tr.procs.items():
        for s in proc.segments:
            if s.header["ppid"] != parent:
                errs.append("%s: ppid %d, want the parent %d" % (s.name, s.header["ppid"], parent))
        if not any(proc.events(("PollStart",))):
            errs.append("pid %d has no poll" % pid)
        for tid in proc.tids:
            td, _ = proc.thread_def(tid)
            if not td or td["role"] != ROLE_WORKER or not td["worker"]:
                errs.append("pid %d tid %d: Thread def %s, want a worker" % (pid, tid, td))
        if list(proc.tids) != [pid]:
            errs.append("pid %d: events on threads %s, want only the main thread" % (pid, list(proc.tids)))
    require(errs)
    c.info = "one series per worker: %s" % {p: len(tr.procs[p].segments) for p in pids}

with case("st-fork-invariants"):
    require(check_st_invariants(tr) + check_coroutine_defs(tr))

with case("st-fork-connections") as c:
    errs = []
    want = collections.Counter(replies)
    for pid, proc in tr.procs.items():
        n = len(serve_conn_coroutines(proc, syms))
        if n != want[pid]:
            errs.append("pid %d: %d connection coroutines, it answered %d requests" % (pid, n, want[pid]))
    require(errs)
    c.info = "connections per worker %s" % dict(want)
PYEOF

if pl_start "$T/fork" "$ST_HTTP" -- -w 2; then
	parent=$SPID
	d9_wait_for 30 two_workers "$parent"
	workers=$(ps -o pid= --ppid "$parent" | tr -d ' ' | tr '\n' ' ')
	served=""
	ok=1
	for _ in $(seq 12); do
		pl_get /fast
		if [ "$CODE" != 200 ] || [ "$BODY" != ok ]; then ok=0; break; fi
		served="$served $(pl_header X-Pid)"
	done
	# the /fast connections' coroutines see EOF and exit before SIGTERM reaches one worker
	# shellcheck disable=SC2086 # one word per pid
	d9_wait_for 30 sockets_left $workers
	pl_get /quit
	qpid=$(pl_header X-Pid)
	served="$served $qpid"
	pl_wait_exit 15
	if [ "$ok" = 1 ] && [ "$BODY" = bye ] && [ "$SRC" = 0 ] && [ "$(echo "$workers" | wc -w)" = 2 ]; then
		pl_pass st-fork-run "workers $workers; replies from$served"
		pl_check st-fork "$FORK" "$ST_HTTP" "$SDIR/maps" "$parent" "$served" "$workers"
	else
		pl_fail st-fork-run "replies ok=$ok quit '$BODY', parent exit status $SRC, workers '$workers'"
	fi
else
	pl_fail st-fork-run "$PL_ERR"
fi

# ---- fork mode, SIGTERM to the parent alone -------------------------------------------------------------
# The parent records nothing (so the agent installs no handler there) and dies by SIGTERM; each
# worker gets SIGTERM from PR_SET_PDEATHSIG and the agent in it seals its series.
read -r -d '' FORKTERM <<'PYEOF'
workers = sorted(int(x) for x in args[0].split())
with case("st-fork-sigterm-sealed") as c:
    require(check_decodes_clean(tr, sealed=True) + check_series(tr))
    if sorted(tr.procs) != workers:
        fail("sealed series of pids %s, the workers were %s" % (sorted(tr.procs), workers))
    require(check_st_invariants(tr))
    c.info = "segments %s" % [s.name for s in tr.segments]
PYEOF

if pl_start "$T/forkterm" "$ST_HTTP" -- -w 2; then
	d9_wait_for 30 two_workers "$SPID"
	workers=$(ps -o pid= --ppid "$SPID" | tr -d ' ' | tr '\n' ' ')
	pl_gets 4 /fast ok || pl_fail st-fork-sigterm-run "$PL_ERR"
	# shellcheck disable=SC2086 # one word per pid
	d9_wait_for 30 sockets_left $workers
	kill -TERM "$SPID"
	pl_wait_exit 10
	gone=0
	# shellcheck disable=SC2086 # one word per pid
	d9_wait_for 30 all_gone $workers && gone=1
	if [ "$SRC" = 143 ] && [ "$gone" = 1 ] && [ "$(echo "$workers" | wc -w)" = 2 ]; then
		pl_pass st-fork-sigterm-run "parent exit status 143, workers $workers gone"
		pl_check st-fork-sigterm "$FORKTERM" "$workers"
	else
		pl_fail st-fork-sigterm-run "parent exit status $SRC (want 143), workers '$workers' gone=$gone"
		for w in $workers; do kill -KILL "$w" 2>/dev/null; done
	fi
else
	pl_fail st-fork-sigterm-run "$PL_ERR"
fi

# ---- application switch callbacks -------------------------------------------------------------------
read -r -d '' CB <<'PYEOF'
binary, maps, stats_path = args
syms = Symbols(binary, maps)
s = load_json(stats_path)

with case(p + "-stats") as c:
    i, o = s["switch_in_calls"], s["switch_out_calls"]
    closed = s["connections_total"] - s["connections_open"]
    want = s["fanout_children"] + closed + 1
    if not s["switch_cb"] or i <= 0 or o <= 0:
        fail("switch_cb %s, in %d, out %d: the application's callbacks did not run" % (s["switch_cb"], i, o))
    if o - i != want:
        fail("out - in = %d - %d = %d, want fanout_children %d + closed connections %d + 1 = %d"
             % (o, i, o - i, s["fanout_children"], closed, want))
    if s["fanout_children"] != 4 or closed != 5:
        fail("fanout_children %d, closed connections %d, want 4 and 5" % (s["fanout_children"], closed))
    c.info = "in %d, out %d, out - in = %d = 4 children + %d closed + 1" % (i, o, o - i, closed)

with case(p + "-trace") as c:
    require(check_decodes_clean(tr) + check_st_invariants(tr))
    polls = tr.count("PollStart")
    proc = tr.the_proc()
    if len(serve_conn_coroutines(proc, syms)) != 6:
        fail("%d connection coroutines, want 6" % len(serve_conn_coroutines(proc, syms)))
    if polls < s["switch_in_calls"]:
        fail("%d polls, fewer than the %d in-callbacks the application saw" % (polls, s["switch_in_calls"]))
    c.info = "%d polls; the application saw %d in-callbacks" % (polls, s["switch_in_calls"])
PYEOF

for mode in select poll; do
	p=st-switch-cb-$mode
	if pl_start "$T/$p" "$ST_HTTP" -- -c -e "$mode"; then
		ok=1
		pl_gets 3 /fast ok || ok=0
		pl_gets 1 "/fanout?k=4" "fanout k=4 done=4" || ok=0
		pl_gets 1 /join "join ok" || ok=0
		if [ "$ok" = 1 ] && pl_session_quit && [ "$SRC" = 0 ]; then
			pl_check "$p" "p = '$p'
$CB" "$ST_HTTP" "$SDIR/maps" "$SDIR/stats.json"
		else
			pl_fail "$p-run" "${PL_ERR:-} exit status ${SRC:-?}"
		fi
	else
		pl_fail "$p-run" "$PL_ERR"
	fi
done

# ---- SIGTERM seals ---------------------------------------------------------------------------------
read -r -d '' TERM <<'PYEOF'
with case("st-sigterm-sealed") as c:
    require(check_decodes_clean(tr, sealed=True))
    errs = []
    for s in tr.segments:
        if s.trailer is None:
            errs.append("%s: no trailer" % s.name)
        elif s.trailer["events"] != len(s.events):
            errs.append("%s: trailer says %d events, %d decoded" % (s.name, s.trailer["events"], len(s.events)))
    require(errs)
    c.info = ", ".join("%s (%d events)" % (s.name, len(s.events)) for s in tr.segments)

with case("st-sigterm-trailer-time-range") as c:
    errs = []
    for s in tr.segments:
        if s.trailer and s.events:
            lo, hi = min(e["time"] for e in s.events), max(e["time"] for e in s.events)
            if (s.trailer["first_time"], s.trailer["last_time"]) != (lo, hi):
                errs.append("%s: trailer time range [%d, %d], events span [%d, %d]"
                            % (s.name, s.trailer["first_time"], s.trailer["last_time"], lo, hi))
    require(errs)

with case("st-sigterm-trailer-type-counts") as c:
    errs = []
    for s in tr.segments:
        # the trailer lists the built-in codes 0..12 (FORMAT.md section 11)
        want = dict(collections.Counter(e["type"] for e in s.events if e["code"] <= 12))
        tc = (s.trailer or {}).get("type_counts", {})
        if tc != want:
            errs.append("%s: trailer type_counts %s, decoded %s" % (s.name, tc, dict(want)))
    require(errs)

with case("st-sigterm-invariants"):
    require(check_st_invariants(tr))
PYEOF

if pl_start "$T/term" "$ST_HTTP" --; then
	pl_gets 3 /fast ok || pl_fail st-sigterm-run "$PL_ERR"
	d9_wait_for 30 sockets_left "$SPID"
	kill -TERM "$SPID"
	pl_wait_exit 15
	active=$(ls "$SDIR/trace" 2>/dev/null | grep -c '\.active$')
	sealed=$(ls "$SDIR/trace" 2>/dev/null | grep -cE '\.bin(\.gz)?$')
	if [ "$SRC" = 143 ] && [ "$active" = 0 ] && [ "$sealed" -ge 1 ]; then
		pl_pass st-sigterm-exit "exit status 143, $sealed sealed segment(s), no .active"
	else
		pl_fail st-sigterm-exit "exit status $SRC (want 143), files: $(ls "$SDIR/trace" 2>&1 | tr '\n' ' ')"
	fi
	pl_check st-sigterm "$TERM"
else
	pl_fail st-sigterm-run "$PL_ERR"
fi

# ---- SIGTERM while a coroutine burns CPU ------------------------------------------------------------
read -r -d '' BUSY <<'PYEOF'
binary, maps = args
syms = Symbols(binary, maps)
with case("st-sigterm-busy-trace") as c:
    require(check_decodes_clean(tr, sealed=True))
    require(check_thread_order(tr) + check_polls_and_parks(tr, open_poll_at_end=True) +
            check_lifetimes(tr) + check_one_wake_per_poll(tr))
    proc = tr.the_proc()
    conns = serve_conn_coroutines(proc, syms)
    if len(conns) != 3:
        fail("%d connection coroutines, want 3 (fast, fast, burn)" % len(conns))
    burn = conns[2]
    last = list(proc.events())[-1]
    if last["type"] != "PollStart" or last["coroutine"] != burn.id:
        fail("the trace ends with %s of %s, want the PollStart of the burning coroutine %d"
             % (last["type"], last.get("coroutine"), burn.id))
    c.info = "ends with the open poll of coroutine %d (%d events)" % (burn.id, len(list(proc.events())))
PYEOF

if pl_start "$T/busy" "$ST_HTTP" --; then
	pl_gets 2 /fast ok || pl_fail st-sigterm-busy-run "$PL_ERR"
	d9_wait_for 30 sockets_left "$SPID"
	c0=$(cpu_ms "$SPID")
	curl -sS --max-time 60 -o /dev/null "http://127.0.0.1:$SPORT/burn?ms=3000" 2>/dev/null &
	bg=$!
	# the burn is under way: the server has used 200 ms of CPU since (nothing else it does costs that)
	d9_wait_for 30 eval '[ "$(cpu_ms "$SPID")" -ge $((c0 + 200)) ]' ||
		pl_fail st-sigterm-busy-run "the server did not start burning (CPU $(cpu_ms "$SPID") ms, was $c0)"
	kill -TERM "$SPID"
	pl_wait_exit 15
	wait "$bg" 2>/dev/null
	if [ "$SRC" = 143 ] && [ "$(pl_trace_files "$SDIR/trace" | grep -c '\.active$')" = 0 ]; then
		pl_pass st-sigterm-busy-exit "exit status 143 during a burn, no .active left"
	else
		pl_fail st-sigterm-busy-exit "exit status $SRC (want 143), files: $(ls "$SDIR/trace" 2>&1 | tr '\n' ' ')"
	fi
	pl_check st-sigterm-busy "$BUSY" "$ST_HTTP" "$SDIR/maps"
else
	pl_fail st-sigterm-busy-run "$PL_ERR"
fi
