#!/usr/bin/env bash
# test-rt-libco.sh: the libco adapter (preload/rt-libco.c) on tests/servers/libco-http.cc, built
# here against libco built from ../shared/third_party/libco-*.tar.gz into build/third_party/libco/
# (libcolib.so with -fno-optimize-sibling-calls, and libcolib.a). SKIP (counted, with the reason)
# when the archive or a tool is missing. Ground truth comes from the server (its /stats and the
# "loop_turns T requests R connections C" line it prints at exit) and from what each request does.
#   - shared-exact: one connection each for /fast x4, /burn?ms=20 x2 (with D9_CPU_PROFILE=999),
#     /sleep?ms=30 x2, /block?ms=40, /loopblock?ms=40, one /fast sent 500 ms after its
#     connection opened (its hooked read waits at least 150 ms of that), /wait (co_cond_timedwait) then
#     /signal from another connection, /wait?ms=30 unsignalled, /fwrite?kb=8192 (write + fsync
#     of a temp file), then the keep-alive control session (/stats, /quit). One Spawn per
#     connection at serve_conn (parent: the accept_loop coroutine, which resumes it), every
#     connection coroutine exits once and is woken by its socket (fd Wakes, one descriptor each);
#     durations are checked against the handler's own clock (its X-Wall-Ns and X-Blocked-Ns
#     reply headers, CLOCK_MONOTONIC), within 10% + 1 ms (the 1 ms for tiny values: a call
#     under D9_BLOCKING_THRESHOLD, 1 ms, is not recorded; for blocking calls plus X-Run-Delay-Ns,
#     the time the thread was preempted around them, which no call's time holds when it falls
#     between them), so a loaded machine that stretches a handler stretches the truth with it: each burn's longest poll is its handler's wall time
#     with burn_cpu on its CPU samples' stacks; each 30 ms sleep (poll(NULL, 0, 30), a yield under libco's hook, and
#     the unsignalled wait) ends with one timer Wake whose deadline is 30 ms after the poll that
#     slept; the signalled wait has one cond Wake by the signalling coroutine; the BlockingCalls
#     are exactly the /block nanosleep (the handler's nanosleep, in its coroutine, handle on its
#     stack, in a poll of the handler's wall time), the one /loopblock makes the event loop's
#     callback do (>= 40 ms, no coroutine, loop_turn on its stack), and the /fwrite coroutine's
#     fsync (handle_fwrite on its stack): its write and fsync (BlockingCalls, or SchedDelays when
#     preempted rather than waiting) add up to the handler's write + fsync, in a poll of the
#     handler's wall time; a handler's poll (/burn, /block, /fwrite) may be up to 5 ms longer
#     than its wall time, never shorter: a preemption in the poll's part outside the handler
#     (parsing, the reply's write) on a loaded machine, as in test-rt-srs;
#     Parks = loop turns (no nested park: the hooked reads' and sleeps' polls are yields, the
#     event loop's epoll_wait the only park).
#   - shared-load: wrk -t2 -c16 on /fast for 1 s: the same invariants, 0 BlockingCalls (the
#     reads libco's hooks turn into coroutine waits: 859 of them before the adapter), Spawns =
#     connections, polls and fd Wakes >= requests, Parks = loop turns.
#   - generic: the same load with D9_RUNTIME=generic: no coroutine event, 0 false BlockingCalls,
#     and the nested parks the adapter removes (Parks > loop turns: the -parks checks can fail).
#   - static: libco linked into the executable: its entry points patched (preload/patch.c), then
#     the checks of shared-exact and shared-load; or, when patching is refused, exactly one
#     message on stderr and the generic checks. Stripped (no symbols, no DWARF): generic mode
#     without a word, Parks = loop turns, 0 false BlockingCalls.
#   - threads: libco-threads.cc, two event loops at once, shared and static: each thread's three
#     coroutines on it, 21 polls and 20 timer Wakes each.
#   - untracked: libco-untracked.cc refuses the agent a larger coroutine table (mmap): of its
#     3,000 coroutines those the table cannot hold are not recorded, each one dropped event
#     (Spawns + Dropped = 3,000), one warning.
#   - refused: a library with co_swap but not the rest: one message, and the program's calls go
#     through.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_need_built rt-libco
pl_env rt-libco

LC_ARCHIVE=$(ls "$PL_ROOT"/../shared/third_party/libco-*.tar.gz 2>/dev/null | head -n1)
LC_DIR=$PL_ROOT/build/third_party/libco
if [ -z "$LC_ARCHIVE" ]; then
	pl_skip rt-libco "no libco archive in $(cd "$PL_ROOT/.." && pwd)/shared/third_party"
	exit 0
fi
for b in g++ make tar wrk curl python3 nm; do
	if ! command -v "$b" >/dev/null; then
		pl_skip rt-libco "$b is not installed"
		exit 0
	fi
done

# lc_build: libco into $LC_DIR/src once per archive (built aside, then renamed: a concurrent run
# never sees half a build), then the two servers when their source is newer.
lc_build() {
	local stamp=$LC_DIR/src/.built-$(basename "$LC_ARCHIVE") tmp
	mkdir -p "$LC_DIR"
	if [ ! -e "$stamp" ]; then
		tmp=$(mktemp -d "$LC_DIR/src.tmp-XXXXXX")
		# libcolib.so as built crashes before main (a sibling call to dlsym in a static
		# initialiser); the flag avoids it (../shared/third_party/README.md)
		if ! tar xzf "$LC_ARCHIVE" -C "$tmp" --strip-components=1 ||
			! make -C "$tmp" colib CXX="g++ -fno-optimize-sibling-calls" >"$tmp/build.log" 2>&1; then
			LC_ERR="libco does not build: $(tail -n 3 "$tmp/build.log" 2>/dev/null | tr '\n' ' ')"
			rm -rf "$tmp"
			return 1
		fi
		touch "$tmp/.built-$(basename "$LC_ARCHIVE")"
		rm -rf "$LC_DIR/src"
		mv -T "$tmp" "$LC_DIR/src" 2>/dev/null || rm -rf "$tmp"
	fi
	local src=$PL_ROOT/tests/servers/libco-http.cc flags=(-O2 -g -fno-omit-frame-pointer -Wall -I"$LC_DIR/src")
	if [ ! "$LC_DIR/libco-http-shared" -nt "$src" ] &&
		! g++ "${flags[@]}" -o "$LC_DIR/libco-http-shared" "$src" -L"$LC_DIR/src/solib" -lcolib \
			-Wl,-rpath,"$LC_DIR/src/solib" -ldl -lpthread 2>"$LC_DIR/server.log"; then
		LC_ERR="libco-http (shared) does not build: $(head -c 300 "$LC_DIR/server.log")"
		return 1
	fi
	# coctx_swap.S has no .note.GNU-stack: the linker's warning about it is libco's, not ours
	if [ ! "$LC_DIR/libco-http-static" -nt "$src" ] &&
		! g++ "${flags[@]}" -o "$LC_DIR/libco-http-static" "$src" "$LC_DIR/src/lib/libcolib.a" \
			-ldl -lpthread 2>"$LC_DIR/server.log"; then
		LC_ERR="libco-http (static) does not build: $(head -c 300 "$LC_DIR/server.log")"
		return 1
	fi
}
if ! lc_build; then
	pl_fail rt-libco-build "$LC_ERR"
	exit 0
fi
SHARED=$LC_DIR/libco-http-shared
STATIC=$LC_DIR/libco-http-static

# What every run checks: clean decode, the invariants of a coroutine trace (those of
# check_st_invariants but the primordial coroutine: libco's main coroutine is the scheduler),
# Parks = the server's loop turns, and the server's own counts.
read -r -d '' COMMON <<'PYEOF'
binary, maps, stats_path, stdout_path = args[:4]
syms = Symbols(binary, maps)
proc = tr.the_proc()
cos = coroutines(proc)
conns = serve_conn_coroutines(proc, syms)
stats = load_json(stats_path)
truth = dict(zip(*[iter(open(stdout_path).read().split())] * 2))
turns = int(truth.get("loop_turns", -1))
parks = tr.count("Park")
blocking = list(proc.events(("BlockingCall",)))
wakes = list(proc.events(("Wake",)))

def call_name(e):
    return e["_seg"].string(e["call"])

def frames_of(e):
    return e["_seg"].stacks.get(e["stack"], []) if e["stack"] else []

def on_stack(name, frames):
    return any(syms.contains(name, a if i == 0 else a - 1) for i, a in enumerate(frames))

with case(prefix + "-decode"):
    require(check_decodes_clean(tr))

PYEOF

# Parks = loop turns: what the adapter guarantees (generic mode checks the opposite).
read -r -d '' PARKS <<'PYEOF'
with case(prefix + "-parks") as c:
    # one epoll_wait per co_eventloop turn, each a Park; a hooked poll inside a coroutine is a
    # yield, never a Park of its own (nested parks)
    require(check_polls_and_parks(tr))
    if turns <= 0:
        fail("the server printed no loop_turns: %r" % truth)
    if parks != turns:
        fail("%d Parks, the event loop turned %d times" % (parks, turns))
    c.info = "%d Parks = %d loop turns" % (parks, turns)
PYEOF

read -r -d '' COROUTINES <<'PYEOF'
with case(prefix + "-invariants") as c:
    require(check_thread_order(tr) + check_one_wake_per_poll(tr) + check_ids_defined(tr) +
            check_poll_locations(tr) + check_fd_wakes_one_fd(tr) + check_coroutine_defs(tr) +
            check_queue_samples(tr))
    if tr.count("QueueSample") == 0:
        fail("no QueueSample")
    c.info = "%d polls, %d Wakes, %d Spawns, %d QueueSamples" % (
        tr.count("PollStart"), len(wakes), tr.count("Spawn"), tr.count("QueueSample"))

with case(prefix + "-spawns") as c:
    errs = []
    acc = [x for x in cos.values() if x.spawn and location_is(x.seg, x.location, "accept_loop", syms)[0]]
    if len(acc) != 1:
        errs.append("%d Spawns at accept_loop, want 1" % len(acc))
    if len(conns) != stats["connections"]:
        errs.append("%d Spawns at serve_conn, the server accepted %d connections" % (len(conns), stats["connections"]))
    for x in conns:
        if acc and x.parent != acc[0].id:
            errs.append("connection coroutine %d: parent %d, want accept_loop's %d" % (x.id, x.parent, acc[0].id))
            break
    # the control connection too: /quit closes it, its coroutine returns, then the loop ends
    ended = [x for x in conns if x.exits == 1]
    if len(ended) != len(conns):
        errs.append("%d of %d connection coroutines exited once, want all" % (len(ended), len(conns)))
    require(errs)
    c.info = "%d connections, one Spawn each at serve_conn by accept_loop" % len(conns)

with case(prefix + "-fd-wakes") as c:
    fdw = [w for w in wakes if w["kind"] == WAKE_FD]
    unwoken = [x.id for x in conns if not any(w["kind"] == WAKE_FD for w in x.wakes)]
    if unwoken:
        fail("connection coroutines never woken by their socket: %s" % unwoken[:8])
    other = [w for w in wakes if w["kind"] == WAKE_OTHER and w["waker"] == 0]
    if other:
        fail("%d Wakes of kind other with no waker (first: coroutine %d)" % (len(other), other[0]["woken"]))
    c.info = "%d fd Wakes for %d requests" % (len(fdw), stats["requests"])
PYEOF

# ---- shared, exact --------------------------------------------------------------------------

read -r -d '' EXACT <<'PYEOF'
# the slow handlers' own clocks, in request order: /burn, /burn, /block, /fwrite
truth = [json.loads(l) for l in open(os.path.join(os.path.dirname(stats_path), "truth.jsonl"))]
if [t["path"] for t in truth] != ["/burn?ms=20", "/burn?ms=20", "/block?ms=40", "/fwrite?kb=8192"]:
    raise Exception("truth.jsonl holds %s" % truth)

def near(d, want, slack=0):
    # the trace's duration d against the handler's own clock: 10%, plus 1 ms for tiny values,
    # plus slack: the run delay the handler saw around its blocking calls (a preemption there,
    # outside the calls, is in its time but in no call's; 0 on an idle machine)
    return d is not None and want is not None and abs(d - want) <= 0.1 * want + 1e6 + (slack or 0)

def poll_fits(d, w):
    # the poll that ran a handler lasts what the handler measured (preemption included), or up to
    # 5 ms more: a preemption in the poll's part outside the handler (parsing, the reply's write)
    # on a loaded machine; never less
    return near(d, w) or (d is not None and w <= d <= w * 1.1 + 1e6 + 5e6)

def longest_poll(x):
    ps = [p for p in x.polls if p[1] is not None]
    return max(ps, key=lambda p: p[1]["mono_ns"] - p[0]["mono_ns"]) if ps else None

def poll_ns(p):
    return p[1]["mono_ns"] - p[0]["mono_ns"] if p else None

with case(prefix + "-requests") as c:
    if len(conns) != 16:
        fail("%d connection coroutines, want 16 (4 fast, 2 burn, 2 sleep, 1 block, 1 loopblock, 1 idle, 3 cond, 1 fwrite, control)" % len(conns))
    idle = conns[10]
    w = [p for p in idle.polls if p[1] is not None]
    gaps = [b[0]["mono_ns"] - a[1]["mono_ns"] for a, b in zip(w, w[1:])]
    if not gaps or max(gaps) < 150e6:
        fail("the idle connection's coroutine never waited >= 150 ms between polls: %s" % [ms(g) for g in gaps])
    c.info = "the idle connection waited %s in its hooked read" % ms(max(gaps))

samples = list(proc.events(("CpuSample",)))
with case(prefix + "-burn") as c:
    errs, info = [], []
    for x, t in zip(conns[4:6], truth[:2]):
        p = longest_poll(x)
        d = poll_ns(p)
        w = t["wall_ns"]
        if not poll_fits(d, w):
            errs.append("burn coroutine %d: longest poll %s, the handler took %s (want within 10%% + 1 ms,"
                        " or up to 5 ms more)" % (x.id, ms(d) if d else None, ms(w)))
            continue
        inside = [e for e in samples if e["tid"] == p[0]["tid"] and p[0]["time"] <= e["time"] <= p[1]["time"]]
        burning = [e for e in inside if on_stack("burn_cpu", frames_of(e)) and e["coroutine"] == x.id]
        if len(burning) < 5:
            errs.append("burn coroutine %d: %d of %d CPU samples in its poll have burn_cpu on the "
                        "stack, want >= 5" % (x.id, len(burning), len(inside)))
        info.append("%s, the handler's %s (%d/%d samples in burn_cpu)" % (ms(d), ms(t["wall_ns"]),
                    len(burning), len(inside)))
    require(errs)
    c.info = "polls " + ", ".join(info)

with case(prefix + "-sleep") as c:
    errs, info = [], []
    # the two /sleep?ms=30 (a hooked poll) and the unsignalled /wait?ms=30 (co_cond_timedwait)
    for x in conns[6:8] + conns[13:14]:
        tw = [w for w in x.wakes if w["kind"] == WAKE_TIMER]
        if len(tw) != 1:
            errs.append("sleeping coroutine %d: %d timer Wakes, want 1" % (x.id, len(tw)))
            continue
        w = tw[0]
        end = prev_in_thread(proc, w, lambda e: e["type"] == "PollEnd" and e["coroutine"] == x.id)
        deadline = w["mono_ns"] + w["object"] * w["_seg"].time_unit_ns()
        if end is None:
            errs.append("sleep coroutine %d: no poll before its timer Wake" % x.id)
            continue
        dl = deadline - end["mono_ns"]
        waited = w["mono_ns"] - end["mono_ns"]
        # libco's timer has millisecond ticks: it fires from 29 ms on
        if not (29e6 <= dl <= 31e6) or waited < 29e6:
            errs.append("sleep coroutine %d: deadline %s and Wake %s after its poll, want 30 ms and >= 29 ms"
                        % (x.id, ms(dl), ms(waited)))
        info.append("deadline +%s, woken +%s" % (ms(dl), ms(waited)))
    require(errs)
    c.info = "; ".join(info)

with case(prefix + "-cond") as c:
    a, b = conns[11], conns[12]
    cw = [w for w in wakes if w["kind"] == WAKE_COND]
    if len(cw) != 1:
        fail("%d cond Wakes, want 1 (one co_cond_signal with a waiter)" % len(cw))
    w = cw[0]
    if w["woken"] != a.id or w["waker"] != b.id or w["object"] == 0:
        fail("cond Wake of %d by %d on %#x; want %d (the /wait) by %d (the /signal) on the condition"
             % (w["woken"], w["waker"], w["object"], a.id, b.id))
    ps = prev_in_thread(proc, w, lambda e: e["type"] in ("PollStart", "PollEnd"))
    if not ps or ps["type"] != "PollStart" or ps["coroutine"] != b.id:
        fail("the cond Wake is not inside the signaller's poll")
    c.info = "the /wait coroutine woken by the /signal one, inside its poll"

with case(prefix + "-blocking") as c:
    blk, fw = conns[8], conns[14]
    names = [call_name(e) for e in blocking if e["coroutine"] != fw.id]
    if names != ["nanosleep", "nanosleep"]:
        fail("BlockingCalls %s (but the /fwrite coroutine's), want exactly the /block and /loopblock nanosleeps" % names)
    e, l = [e for e in blocking if e["coroutine"] != fw.id]
    tb = truth[2]
    if e["coroutine"] != blk.id or not near(e["duration_ns"], tb["blocked_ns"], tb["run_delay_ns"]):
        fail("nanosleep BlockingCall of coroutine %d, %s; want %d, the handler's nanosleep %s (within 10%% + 1 ms)"
             % (e["coroutine"], ms(e["duration_ns"]), blk.id, ms(tb["blocked_ns"])))
    if not on_stack("handle", frames_of(e)):
        fail("the nanosleep's stack %s has no frame in handle" % describe_frames(frames_of(e), syms, maps))
    d = poll_ns(longest_poll(blk))
    w = tb["wall_ns"]
    if not poll_fits(d, w):
        fail("the /block coroutine's longest poll %s, the handler took %s (want within 10%% + 1 ms,"
             " or up to 5 ms more)" % (ms(d) if d else None, ms(w)))
    # the event loop's callback runs in libco's main coroutine: no coroutine, the loop's stack
    if l["coroutine"] != 0 or l["duration_ns"] < 40e6 or not on_stack("loop_turn", frames_of(l)):
        fail("the loop callback's nanosleep: coroutine %d, %s, stack %s; want 0, >= 40 ms, loop_turn"
             % (l["coroutine"], ms(l["duration_ns"]), describe_frames(frames_of(l), syms, maps)))
    c.info = "nanosleep %s (the handler's %s) in the /block coroutine (%s), %s in the loop callback (%s)" % (
        ms(e["duration_ns"]), ms(tb["blocked_ns"]), " < ".join(describe_frames(frames_of(e), syms, maps)[:2]),
        ms(l["duration_ns"]), " < ".join(describe_frames(frames_of(l), syms, maps)[:2]))

with case(prefix + "-fwrite") as c:
    # write + fsync, each recorded when it took >= 1 ms: as a BlockingCall when it waited off CPU,
    # as a SchedDelay when it was preempted instead
    fw, tf = conns[14], truth[3]
    # (on its file: a preempted read or write of its socket is a SchedDelay of that coroutine too)
    calls = [e for e in proc.events(("BlockingCall", "SchedDelay")) if e["coroutine"] == fw.id and
             e["fd_kind"] == FD_FILE and call_name(e) in ("write", "fsync")]
    cn = [(e["type"], call_name(e), ms(e["duration_ns"])) for e in calls]
    total = sum(e["duration_ns"] for e in calls)
    if not near(total, tf["blocked_ns"], tf["run_delay_ns"]):
        fail("the /fwrite coroutine's calls %s add up to %s, its write + fsync took %s (%s of it preempted)"
             % (cn, ms(total), ms(tf["blocked_ns"]), ms(tf["run_delay_ns"] or 0)))
    fs = [e for e in calls if e["type"] == "BlockingCall" and call_name(e) == "fsync"]
    if len(fs) != 1 or not on_stack("handle_fwrite", frames_of(fs[0])):
        fail("fsync BlockingCalls of the /fwrite coroutine %s, want one with handle_fwrite on its stack (%s)"
             % (cn, [describe_frames(frames_of(e), syms, maps) for e in fs]))
    d = poll_ns(longest_poll(fw))
    if not poll_fits(d, tf["wall_ns"]):
        fail("the /fwrite coroutine's longest poll %s, the handler took %s (want within 10%% + 1 ms,"
             " or up to 5 ms more)" % (ms(d) if d else None, ms(tf["wall_ns"])))
    c.info = "%s = %s (the handler's write + fsync: %s, %s preempted), in a poll of %s (the handler's %s)" % (
        " + ".join("%s %s" % n[1:] for n in cn), ms(total), ms(tf["blocked_ns"]), ms(tf["run_delay_ns"] or 0),
        ms(d), ms(tf["wall_ns"]))
PYEOF

# lc_exact_requests: the requests of shared-exact, each on its own connection.
lc_exact_requests() {
	local prefix=$1 ok=1
	: >"$SDIR/truth.jsonl"
	# the durations are checked against the handlers' own clocks, and a poll also covers the
	# microseconds after its handler: a preemption there (another process's turn, seen on a
	# loaded machine) would stretch the poll alone. At nice -10 (PL_NICE: when root) that is rare.
	[ ${#PL_NICE[@]} -gt 0 ] && renice -n -10 -p "$SPID" >/dev/null
	for r in "/fast ok" "/fast ok" "/fast ok" "/fast ok" "/burn?ms=20 burn ms=20 cpu_ns=*" \
		"/burn?ms=20 burn ms=20 cpu_ns=*" "/sleep?ms=30 sleep ms=30" "/sleep?ms=30 sleep ms=30" \
		"/block?ms=40 block ms=40" "/loopblock?ms=40 loopblock ms=40"; do
		pl_get "${r%% *}"
		# shellcheck disable=SC2254 # a pattern
		case "$BODY" in ${r#* }) ;; *) pl_fail "$prefix-replies" "${r%% *}: $CODE '$BODY'"; ok=0 ;; esac
		lc_truth "${r%% *}"
	done
	# a connection that stays silent for 500 ms, then asks for /fast: its coroutine's hooked
	# read waits in the event loop (the stimulus of the false blocking reads; not a timing
	# check: at least 150 ms of it, however late a loaded machine accepts the connection)
	if ! PL_ERR=$(python3 - "$SPORT" <<'IDLEEOF' 2>&1
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
time.sleep(0.5)
s.sendall(b"GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
data = b""
while True:
    d = s.recv(4096)
    if not d:
        break
    data += d
if not data.startswith(b"HTTP/1.1 200 ") or not data.endswith(b"ok\n"):
    sys.exit("reply %r" % data[:200])
IDLEEOF
	); then
		pl_fail "$prefix-replies" "idle /fast: $PL_ERR"
		ok=0
	fi
	# the condition variable: connection A waits (/wait?ms=20000), connection B polls /stats
	# until A waits, then signals on the same connection; connection C waits 30 ms, unsignalled
	if ! PL_ERR=$(python3 - "$SPORT" <<'CONDEOF' 2>&1
import http.client, json, socket, sys, time
port = int(sys.argv[1])
def req(path):
    return ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path).encode()
def reply(s):
    data = b""
    while True:
        d = s.recv(4096)
        if not d:
            return data
        data += d
a = socket.create_connection(("127.0.0.1", port), timeout=30)
a.sendall(req("/wait?ms=20000"))
b = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
deadline = time.time() + 10
while True:
    b.request("GET", "/stats")
    st = json.loads(b.getresponse().read())
    if st["cond_waiting"] == 1:
        break
    if time.time() > deadline:
        sys.exit("the /wait request never waited: %r" % st)
    time.sleep(0.02)
b.request("GET", "/signal")
if b.getresponse().read() != b"signal\n":
    sys.exit("bad /signal reply")
b.close()
ra = reply(a)
if not ra.endswith(b"wait signalled\n"):
    sys.exit("/wait reply %r" % ra[-100:])
c = socket.create_connection(("127.0.0.1", port), timeout=30)
c.sendall(req("/wait?ms=30"))
rc = reply(c)
if not rc.endswith(b"wait timeout\n"):
    sys.exit("/wait?ms=30 reply %r" % rc[-100:])
CONDEOF
	); then
		pl_fail "$prefix-replies" "cond: $PL_ERR"
		ok=0
	fi
	pl_get "/fwrite?kb=8192"
	[ "$BODY" = "fwrite kb=8192" ] || { pl_fail "$prefix-replies" "/fwrite: $CODE '$BODY'"; ok=0; }
	lc_truth "/fwrite?kb=8192"
	[ "$ok" = 1 ]
}

# lc_truth PATH: the last reply's X-Wall-Ns and X-Blocked-Ns (the handler's own clock), when it
# has them, as one line of $SDIR/truth.jsonl.
lc_truth() {
	local wall blocked delay
	wall=$(pl_header X-Wall-Ns) blocked=$(pl_header X-Blocked-Ns) delay=$(pl_header X-Run-Delay-Ns)
	[ -n "$wall" ] && printf '{"path": "%s", "wall_ns": %s, "blocked_ns": %s, "run_delay_ns": %s}\n' \
		"$1" "$wall" "${blocked:-null}" "${delay:-null}" >>"$SDIR/truth.jsonl"
	return 0
}

# lc_run PREFIX BINARY CHECKS [VAR=value ...] -- LOAD_FUNCTION: one server run and its checks.
lc_run() {
	local prefix=$1 bin=$2 checks=$3 envs=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	if ! pl_start "$T/$prefix" "$bin" "${envs[@]}" --; then
		pl_fail "$prefix" "$PL_ERR"
		return 1
	fi
	"$@" "$prefix" || return 1
	if ! pl_session_quit || [ "$SRC" != 0 ]; then
		pl_fail "$prefix-exit" "${PL_ERR:-exit status $SRC} (stderr: $(head -c 300 "$SDIR/stderr"))"
		return 1
	fi
	pl_check "$prefix" "prefix = '$prefix'
$COMMON
$checks" "$bin" "$SDIR/maps" "$SDIR/stats.json" "$SDIR/stdout"
}

# lc_load PREFIX: wrk on /fast for 1 s (16 keep-alive connections: tens of thousands of
# requests here), every reply a 200.
lc_load() {
	local out
	out=$(wrk -t2 -c16 -d1s "http://127.0.0.1:$SPORT/fast" 2>&1)
	if ! echo "$out" | grep -q "requests in" || echo "$out" | grep -q "Non-2xx"; then
		pl_fail "$1-load" "wrk: $(echo "$out" | tr '\n' ' ' | head -c 300)"
		return 1
	fi
}

read -r -d '' LOAD <<'PYEOF'
with case(prefix + "-no-false-blocking") as c:
    if blocking:
        fail("%d BlockingCalls (first: %s %s): every read and write of this server is a coroutine "
             "wait under libco's hooks" % (len(blocking), call_name(blocking[0]), ms(blocking[0]["duration_ns"])))
    c.info = "0 BlockingCalls for %d requests" % stats["requests"]
PYEOF

read -r -d '' LOAD_CO <<'PYEOF'
with case(prefix + "-per-request") as c:
    polls = tr.count("PollStart")
    fdw = sum(1 for w in wakes if w["kind"] == WAKE_FD)
    if polls < stats["requests"] or fdw < stats["requests"] - stats["connections"]:
        fail("%d polls and %d fd Wakes for %d requests on %d connections"
             % (polls, fdw, stats["requests"], stats["connections"]))
    c.info = "%d requests: %d polls, %d fd Wakes" % (stats["requests"], polls, fdw)
PYEOF

read -r -d '' GENERIC <<'PYEOF'
with case(prefix + "-generic") as c:
    co_events = [e for e in proc.events(("PollStart", "Spawn", "Wake"))]
    if co_events:
        fail("%d coroutine events in generic mode (first: %s)" % (len(co_events), co_events[0]["type"]))
PYEOF

# Without the adapter, d9's poll sits above libco's hooked poll and parks inside a coroutine, then
# the event loop parks again: what the -parks checks above would catch.
read -r -d '' NESTED <<'PYEOF'
with case(prefix + "-nested-parks") as c:
    if parks <= turns or not check_polls_and_parks(tr):
        fail("%d Parks for %d loop turns and no nested park: the fixture no longer shows what "
             "the adapter fixes" % (parks, turns))
    c.info = "%d Parks for %d loop turns without the adapter" % (parks, turns)
PYEOF

lc_run rt-libco-shared-exact "$SHARED" "$PARKS
$COROUTINES
$EXACT" D9_CPU_PROFILE=999 -- lc_exact_requests
lc_run rt-libco-shared-load "$SHARED" "$PARKS
$COROUTINES
$LOAD
$LOAD_CO" -- lc_load
lc_run rt-libco-generic "$SHARED" "$NESTED
$LOAD
$GENERIC" D9_RUNTIME=generic -- lc_load

# ---- static --------------------------------------------------------------------------------
# Patched when this build of d9 can (then the same checks as shared-exact), else refused: one
# line on stderr, and the generic checks.
if ! pl_start "$T/probe" "$STATIC" --; then
	pl_fail rt-libco-static "$PL_ERR"
	exit 0
fi
pl_quit
if grep -q "libco" "$T/probe/stderr"; then
	n=$(grep -cE '^d9(\[[0-9]+\])?: ' "$T/probe/stderr")
	if [ "$n" = 1 ]; then
		pl_pass rt-libco-static-refused "$(head -n1 "$T/probe/stderr")"
	else
		pl_fail rt-libco-static-refused "$n d9 lines on stderr, want 1: $(head -c 300 "$T/probe/stderr")"
	fi
	lc_run rt-libco-static-generic "$STATIC" "$PARKS
$LOAD
$GENERIC" -- lc_load
else
	lc_run rt-libco-static-exact "$STATIC" "$PARKS
$COROUTINES
$EXACT" D9_CPU_PROFILE=999 -- lc_exact_requests
	lc_run rt-libco-static-load "$STATIC" "$PARKS
$COROUTINES
$LOAD
$LOAD_CO" -- lc_load
fi

# Stripped: no symbol table and no DWARF, so no libco to be found: generic mode, silently (d9
# cannot tell it is there), and still the truth (d9 is below libco's hooks).
if strip -o "$LC_DIR/libco-http-stripped" "$STATIC" 2>/dev/null; then
	if pl_start "$T/rt-libco-static-stripped" "$LC_DIR/libco-http-stripped" -- && lc_load rt-libco-static-stripped &&
		pl_session_quit && [ "$SRC" = 0 ]; then
		if grep -qE '^d9(\[[0-9]+\])?: ' "$SDIR/stderr"; then
			pl_fail rt-libco-static-stripped-quiet "d9 said: $(head -c 300 "$SDIR/stderr")"
		else
			pl_pass rt-libco-static-stripped-quiet
		fi
		pl_check rt-libco-static-stripped "prefix = 'rt-libco-static-stripped'
$COMMON
$PARKS
$LOAD
$GENERIC" "$LC_DIR/libco-http-stripped" "$SDIR/maps" "$SDIR/stats.json" "$SDIR/stdout"
	else
		pl_fail rt-libco-static-stripped "${PL_ERR:-exit status ${SRC:-?}}"
	fi
else
	pl_skip rt-libco-static-stripped "strip failed"
fi

# Two threads, each with its own event loop and three coroutines that sleep 5 ms twenty times
# (tests/integration/libco-threads.cc), shared and static: 6 Spawns, 3 per thread, each
# coroutine 21 polls, 20 timer Wakes and one exit, all on its own thread.
read -r -d '' THREADS <<'PYEOF'
proc = tr.the_proc()
cos = coroutines(proc)
with case(prefix) as c:
    require(check_thread_order(tr) + check_polls_and_parks(tr) + check_one_wake_per_poll(tr) +
            check_queue_samples(tr) + check_ids_defined(tr) + check_coroutine_defs(tr))
    errs = []
    per_tid = collections.Counter(next(iter(x.tids)) for x in cos.values() if len(x.tids) == 1)
    if len(cos) != 6 or sorted(per_tid.values()) != [3, 3]:
        errs.append("%d coroutines, by thread %s; want 3 on each of 2 threads" % (len(cos), dict(per_tid)))
    for x in cos.values():
        kinds = collections.Counter(w["kind"] for w in x.wakes)
        if len(x.polls) != 21 or kinds[WAKE_TIMER] != 20 or x.exits != 1 or len(x.tids) != 1:
            errs.append("coroutine %d: %d polls, %d timer Wakes, %d exits, threads %s; want 21, 20, 1, one"
                        % (x.id, len(x.polls), kinds[WAKE_TIMER], x.exits, sorted(x.tids)))
    require(errs)
    c.info = "6 coroutines, 3 per thread, 21 polls and 20 timer Wakes each"
PYEOF
S=$LC_DIR/src
for kind in shared static; do
	name=rt-libco-threads-$kind
	if [ "$kind" = shared ]; then
		link=(-L"$S/solib" -lcolib -Wl,-rpath,"$S/solib")
	else
		link=("$S/lib/libcolib.a")
	fi
	if ! g++ -O2 -g -I"$S" -o "$T/$name" "$PL_ROOT/tests/integration/libco-threads.cc" "${link[@]}" \
		-ldl -lpthread 2>"$T/$name.log"; then
		pl_fail "$name" "does not build: $(head -c 300 "$T/$name.log")"
		continue
	fi
	mkdir -p "$T/$name.d/trace"
	out=$(env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/$name.d/trace/trace.bin" D9_EXIT_TIMEOUT=10s \
		D9_ROTATION_PERIOD=0 timeout -s KILL 60 "$T/$name" 2>"$T/$name.d/stderr")
	if [ "$?" != 0 ] || [ "$out" != done ]; then
		pl_fail "$name" "exit or output '$out': $(head -c 300 "$T/$name.d/stderr")"
		continue
	fi
	SDIR=$T/$name.d pl_check "$name" "prefix = '$name'
$THREADS"
done

# Untracked: the program refuses the agent a larger coroutine table (libco-untracked.cc, 3,000
# coroutines created before any runs): the coroutines the table cannot hold are not recorded at
# all (no poll without its Spawn), each counted as one dropped event, with one warning.
name=rt-libco-untracked
if ! g++ -O2 -g -rdynamic -I"$S" -o "$T/$name" "$PL_ROOT/tests/integration/libco-untracked.cc" \
	-L"$S/solib" -lcolib -Wl,-rpath,"$S/solib" -ldl -lpthread 2>"$T/$name.log"; then
	pl_fail "$name" "does not build: $(head -c 300 "$T/$name.log")"
else
	mkdir -p "$T/$name.d/trace"
	out=$(env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/$name.d/trace/trace.bin" timeout -s KILL 60 \
		"$T/$name" 2>"$T/$name.d/stderr")
	rc=$?
	if [ "$rc" != 0 ] || [ "$out" != ran=3000 ]; then
		pl_fail "$name" "exit $rc, output '$out', want ran=3000 ($(head -c 200 "$T/$name.d/stderr"))"
	elif [ "$(grep -c 'no memory for the coroutine table' "$T/$name.d/stderr")" != 1 ]; then
		pl_fail "$name" "want the warning once on stderr: '$(head -c 300 "$T/$name.d/stderr")'"
	elif ! "$PL_ANALYZE" dump "$T/$name.d/trace" >"$T/$name.d/dump.jsonl" 2>"$T/$name.d/dump.err"; then
		pl_fail "$name" "d9-analyze dump: $(head -c 200 "$T/$name.d/dump.err")"
	else
		res=$(python3 - "$T/$name.d/dump.jsonl" <<'PY'
import json, sys
spawns, polls, dropped = set(), set(), 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("rec") != "event":
        continue
    if r["type"] == "Spawn":
        spawns.add(r["coroutine"])
    elif r["type"] == "PollStart":
        polls.add(r["coroutine"])
    elif r["type"] == "Dropped":
        dropped += r["count"]
errs = []
if not 0 < len(spawns) < 3000:
    errs.append("%d Spawns: want fewer than 3,000 (the table could not hold them all)" % len(spawns))
if polls - spawns:
    errs.append("%d coroutines ran in the trace without a Spawn" % len(polls - spawns))
if dropped != 3000 - len(spawns):
    errs.append("%d dropped events counted, want %d (one per coroutine not recorded)"
                % (dropped, 3000 - len(spawns)))
print("FAIL " + "; ".join(errs) if errs else
      "PASS %d coroutines recorded, %d not, each counted as dropped" % (len(spawns), dropped))
PY
)
		case $res in
		PASS*) pl_pass "$name" "${res#PASS }" ;;
		*) pl_fail "$name" "${res#FAIL }" ;;
		esac
	fi
fi

# Refused: a library that has co_swap but not the rest of the libco d9 knows. One message on
# stderr, generic mode, and the program's calls still reach its co_swap (the interposer passes
# them through).
cat >"$T/fake-libco.c" <<'CEOF'
int swaps;
void fake_swap(void *a, void *b) __asm__("_Z7co_swapP13stCoRoutine_tS0_");
void fake_swap(void *a, void *b) { (void)a; (void)b; swaps++; }
CEOF
cat >"$T/fake-main.c" <<'CEOF'
#include <stdio.h>
extern int swaps;
void fake_swap(void *a, void *b) __asm__("_Z7co_swapP13stCoRoutine_tS0_");
int main(void) { for (int i = 0; i < 3; i++) fake_swap(0, 0); printf("swaps %d\n", swaps); return 0; }
CEOF
if gcc -shared -fPIC -o "$T/libfakeco.so" "$T/fake-libco.c" &&
	gcc -o "$T/fake-main" "$T/fake-main.c" -L"$T" -lfakeco -Wl,-rpath,"$T"; then
	mkdir -p "$T/fake/trace"
	out=$(env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/fake/trace/trace.bin" timeout -s KILL 60 \
		"$T/fake-main" 2>"$T/fake/stderr")
	rc=$?
	n=$(grep -cE '^d9(\[[0-9]+\])?: ' "$T/fake/stderr")
	if [ "$rc" != 0 ] || [ "$out" != "swaps 3" ]; then
		pl_fail rt-libco-refused "exit $rc, output '$out' (want 'swaps 3'); stderr: $(head -c 300 "$T/fake/stderr")"
	elif [ "$n" != 1 ] || ! grep -q "libco" "$T/fake/stderr"; then
		pl_fail rt-libco-refused "$n d9 lines on stderr, want one about libco: $(head -c 300 "$T/fake/stderr")"
	else
		pl_pass rt-libco-refused "$(grep -E '^d9(\[[0-9]+\])?: ' "$T/fake/stderr")"
	fi
else
	pl_fail rt-libco-refused "the fake libco does not build"
fi
