#!/usr/bin/env bash
# test-preload-st-wakes.sh: who woke whom, on the State Threads server. Requests, each on its own
# connection: /fanout?k=8 twice, /fanout?k=0, /join twice, /fanout?k=300 (enough coroutines to
# grow the adapter's tables); then the keep-alive control connection (/stats until every other
# connection closed, /quit). Expected from st-http.c and tests/servers/README.md:
#   - each /fanout?k=K handler spawns exactly K children (location fanout_child, call site in
#     handle_fanout, parent the handler), each announced by one spawn Wake (kind 7) right after
#     its Spawn, with the handler as waker; each child runs exactly 2 polls (until st_usleep,
#     then after its one timer Wake until it exits) and exits once; /fanout?k=0 spawns nothing;
#   - one st_cond_signal per /fanout with k >= 1: exactly one cond Wake (kind 3) per such
#     request, waking the handler, with the last child to run as its waker, recorded inside that
#     child's poll; in total as many cond Wakes as the server's fanout_signals counter (3);
#   - each /join: one joinable child (location join_child, call site in handle_join), one join
#     Wake (kind 5) waking the handler with the child as waker, after the child's CoroutineExit
#     (st_thread_exit signals the joiner from inside libst); no cond Wake for the joiner.
# Plus the invariants of every State Threads trace (see trace_check.check_st_invariants), and a
# Coroutine definition for every coroutine named in the segment (FORMAT.md section 10).
# Then st-join-early.c (built here with -lst): a joinable coroutine returns before it is joined
# (libst gives it no out-callback) and the scheduler goes idle; the pipe that becomes readable
# during that idle wait must be credited to its reader: an fd Wake naming the pipe, not "other".
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-st-wakes

read -r -d '' CHECKS <<'PYEOF'
binary, maps, stats_path = args
syms = Symbols(binary, maps)
stats = load_json(stats_path)

with case("st-wakes-decode"):
    require(check_decodes_clean(tr))

with case("st-wakes-invariants") as c:
    require(check_st_invariants(tr))
    c.info = "%d polls, %d Wakes, %d Spawns" % (tr.count("PollStart"), tr.count("Wake"), tr.count("Spawn"))

with case("st-wakes-coroutine-defs") as c:
    require(check_coroutine_defs(tr))

proc = tr.the_proc()
cos = coroutines(proc)
conns = serve_conn_coroutines(proc, syms)

def children_of(h):
    return sorted((x for x in cos.values() if x.spawn and x.parent == h.id),
                  key=lambda x: x.spawn["_i"])

with case("st-wakes-requests") as c:
    if len(conns) != 7:
        fail("%d connection coroutines, want 7 (fanout 8, fanout 8, fanout 0, join, join, fanout 300, control)" % len(conns))
    r = stats["requests"]
    if (r["fanout"], r["join"], stats["fanout_children"], stats["fanout_signals"]) != (4, 2, 316, 3):
        fail("server counters: fanout %d join %d fanout_children %d fanout_signals %d, want 4 2 316 3"
             % (r["fanout"], r["join"], stats["fanout_children"], stats["fanout_signals"]))

fan = conns[0:3] + conns[5:6]
ks = (8, 8, 0, 300)
joins = conns[3:5]

with case("st-wakes-fanout-spawns") as c:
    errs = []
    names = set()
    for h, k in zip(fan, ks):
        kids = children_of(h)
        if len(kids) != k:
            errs.append("handler %d: %d children, want %d" % (h.id, len(kids), k))
            continue
        for x in kids:
            ok, how = location_is(x.seg, x.location, "fanout_child", syms)
            names.add("by dladdr name" if how.startswith("name") else "by function_addr (no name)")
            if not ok:
                errs.append("child %d: location is not fanout_child (%s)" % (x.id, how))
            site = syms.name_of(x.location_def()["callsite_addr"] - 1)
            if site != "handle_fanout":
                errs.append("child %d: call site in %s, want handle_fanout" % (x.id, site))
            sw = [w for w in x.wakes if w["kind"] == WAKE_SPAWN]
            if len(sw) != 1 or sw[0]["waker"] != h.id:
                errs.append("child %d: spawn Wakes %s, want one by the handler %d"
                            % (x.id, [(w["waker"], w["kind"]) for w in sw], h.id))
            elif next_in_thread(proc, x.spawn, lambda e: True) is not sw[0]:
                errs.append("child %d: its spawn Wake does not follow its Spawn" % x.id)
            if [w["kind"] for w in x.wakes] != [WAKE_SPAWN, WAKE_TIMER]:
                errs.append("child %d: Wake kinds %s, want [spawn, timer] (it sleeps 1 ms once)"
                            % (x.id, [w["kind"] for w in x.wakes]))
            if x.exits != 1 or len(x.polls) != 2:
                errs.append("child %d: %d CoroutineExits, %d polls, want 1 and 2" % (x.id, x.exits, len(x.polls)))
            if not (h.polls[0][0]["mono_ns"] <= x.spawn["mono_ns"]):
                errs.append("child %d spawned before its handler ran" % x.id)
    total = sum(1 for x in cos.values() if x.spawn and location_is(x.seg, x.location, "fanout_child", syms)[0])
    if total != stats["fanout_children"]:
        errs.append("%d Spawns at fanout_child, the server counted %d children" % (total, stats["fanout_children"]))
    require(errs)
    c.info = "8 + 8 + 0 + 300 children, each with its spawn Wake by its handler, 2 polls, 1 exit; location resolved %s" % ", ".join(sorted(names))

with case("st-wakes-fanout-cond") as c:
    errs = []
    conds = [w for w in proc.events(("Wake",)) if w["kind"] == WAKE_COND]
    if len(conds) != stats["fanout_signals"]:
        errs.append("%d cond Wakes, the server made %d st_cond_signal calls" % (len(conds), stats["fanout_signals"]))
    for h, k in zip(fan, ks):
        if k == 0:
            continue
        kids = children_of(h)
        mine = [w for w in conds if w["woken"] == h.id]
        if len(mine) != 1:
            errs.append("handler %d: %d cond Wakes, want 1" % (h.id, len(mine)))
            continue
        w = mine[0]
        # the last child to run before the handler runs again
        hnext = next_in_thread(proc, w, lambda e: e["type"] == "PollStart" and e["coroutine"] == h.id)
        last = max(kids, key=lambda x: x.polls[-1][0]["_i"] if x.polls else -1)
        if w["waker"] != last.id:
            errs.append("handler %d: cond Wake by %d, want the last child to run, %d" % (h.id, w["waker"], last.id))
        ps = prev_in_thread(proc, w, lambda e: e["type"] in ("PollStart", "PollEnd"))
        if not ps or ps["type"] != "PollStart" or ps["coroutine"] != w["waker"]:
            errs.append("handler %d: the cond Wake is not inside its waker's poll (previous: %s)"
                        % (h.id, ps and (ps["type"], ps.get("coroutine"))))
        if hnext is None:
            errs.append("handler %d: never ran after its cond Wake" % h.id)
        elif any(x.polls and x.polls[-1][0]["_i"] > hnext["_i"] for x in kids):
            errs.append("handler %d: a child ran after the handler was woken" % h.id)
        if w["object"] == 0:
            errs.append("handler %d: cond Wake object 0, want the condition's address" % h.id)
    if any(w["woken"] in (fan[2].id,) + tuple(j.id for j in joins) for w in conds):
        errs.append("a cond Wake names the k=0 handler or a join handler")
    require(errs)
    c.info = "%d cond Wakes = fanout_signals, each by the last child" % len(conds)

with case("st-wakes-join") as c:
    errs = []
    jw = [w for w in proc.events(("Wake",)) if w["kind"] == WAKE_JOIN]
    if len(jw) != 2:
        errs.append("%d join Wakes, want 2" % len(jw))
    for h in joins:
        kids = children_of(h)
        if len(kids) != 1:
            errs.append("join handler %d: %d children" % (h.id, len(kids)))
            continue
        x = kids[0]
        ok, how = location_is(x.seg, x.location, "join_child", syms)
        if not ok:
            errs.append("join child %d: location is not join_child (%s)" % (x.id, how))
        site = syms.name_of(x.location_def()["callsite_addr"] - 1)
        if site != "handle_join":
            errs.append("join child %d: call site in %s, want handle_join" % (x.id, site))
        mine = [w for w in jw if w["woken"] == h.id]
        if len(mine) != 1 or mine[0]["waker"] != x.id:
            errs.append("join handler %d: join Wakes %s, want one by child %d"
                        % (h.id, [(w["waker"], w["kind"]) for w in mine], x.id))
            continue
        if x.exit is None or x.exit["_i"] > mine[0]["_i"]:
            errs.append("join child %d: no CoroutineExit before the join Wake" % x.id)
        if [w["kind"] for w in x.wakes] != [WAKE_SPAWN, WAKE_TIMER]:
            errs.append("join child %d: Wake kinds %s, want [spawn, timer]" % (x.id, [w["kind"] for w in x.wakes]))
        if len(x.polls) != 2:
            errs.append("join child %d: %d polls, want 2" % (x.id, len(x.polls)))
    require(errs)
    c.info = "2 join Wakes, each naming the joined child as waker"
PYEOF

if ! pl_start "$T/s" "$ST_HTTP" --; then
	pl_fail st-wakes "$PL_ERR"
	exit 0
fi
ok=1
pl_gets 2 "/fanout?k=8" "fanout k=8 done=8" || { pl_fail st-wakes-replies "$PL_ERR"; ok=0; }
pl_gets 1 "/fanout?k=0" "fanout k=0 done=0" || { pl_fail st-wakes-replies "$PL_ERR"; ok=0; }
pl_gets 2 /join "join ok" || { pl_fail st-wakes-replies "$PL_ERR"; ok=0; }
pl_gets 1 "/fanout?k=300" "fanout k=300 done=300" || { pl_fail st-wakes-replies "$PL_ERR"; ok=0; }
if ! pl_session_quit || [ "$SRC" != 0 ]; then
	pl_fail st-wakes-exit "${PL_ERR:-exit status $SRC}"
	exit 0
fi
[ "$ok" = 1 ] && pl_pass st-wakes-replies "fanout k=8 twice, k=0, join twice, k=300"
pl_check st-wakes "$CHECKS" "$ST_HTTP" "$SDIR/maps" "$SDIR/stats.json"

# ---- a joinable coroutine that returns before the join, then an idle wait --------------------------
read -r -d '' EARLY <<'PYEOF'
rfd = int(args[0])
with case("st-wakes-early-join-invariants"):
    require(check_decodes_clean(tr) + check_st_invariants(tr))
with case("st-wakes-early-join-fd-wake") as c:
    proc = tr.the_proc()
    cos = [x for x in coroutines(proc).values() if x.spawn]
    main = [x for x in cos if x.parent == 0]
    kids = sorted((x for x in cos if x.parent != 0), key=lambda x: x.spawn["_i"])
    if len(main) != 1 or len(kids) != 2:
        fail("%d primordial and %d other coroutines, want 1 and 2 (reader, joinable)" % (len(main), len(kids)))
    reader, joinable = kids
    if joinable.exits != 1 or reader.exits != 1:
        fail("exits: reader %d, joinable %d" % (reader.exits, joinable.exits))
    kinds = [(w["kind"], w["object"]) for w in reader.wakes]
    if kinds != [(WAKE_SPAWN, 0), (WAKE_FD, rfd)]:
        fail("the reader's Wakes (kind, object) are %s, want [(7, 0), (1, %d)]: the pipe's "
             "readiness, seen by the idle wait after the joinable coroutine returned, is not "
             "credited to it" % (kinds, rfd))
    c.info = "reader woken by fd %d" % rfd
PYEOF

if ! ${CC:-cc} -O2 -o "$T/st-join-early" "$PL_ROOT/tests/integration/st-join-early.c" -lst 2>"$T/cc.err"; then
	pl_fail st-wakes-early-join "cannot build st-join-early.c: $(head -c 300 "$T/cc.err")"
else
	SDIR=$T/early
	mkdir -p "$SDIR"
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$SDIR/trace/trace.bin" \
		timeout -s KILL 20 "$T/st-join-early" >"$SDIR/stdout" 2>"$SDIR/stderr"
	rc=$?
	rfd=$(sed -n 's/^reader-fd=//p' "$SDIR/stdout")
	if [ "$rc" != 0 ] || [ -z "$rfd" ] || [ -s "$SDIR/stderr" ]; then
		pl_fail st-wakes-early-join "exit status $rc, stdout '$(cat "$SDIR/stdout")', stderr '$(head -c 300 "$SDIR/stderr")'"
	else
		pl_check st-wakes-early-join "$EARLY" "$rfd"
	fi
fi
