#!/usr/bin/env bash
# test-rt-srs.sh: State Threads as SRS builds it (epoll event system), linked as libst.so and as
# libst.a, traced by the ST adapter (preload/rt-st.c, rt-st-static.c).
# First, two refusals (no archive needed): a program whose st_init is there but not the rest of
# the runtime d9 knows (no st_set_switch_in_cb: ST built without switch callbacks), and one whose
# st_init starts with a branch back into its first bytes (no trampoline can hold it): each gets
# the refusal line on stderr, stays in generic mode (parks, no coroutine event), runs unchanged.
# Then ../shared/third_party/state-threads-srs-*.tar.gz (D9_THIRD_PARTY: another directory) is
# built into build/third_party/srs-st/ (`make linux-debug STATIC_ONLY=no`) and st-http.c against
# each library; without the archive those cases are SKIPs with the reason. Each build runs `-e
# alt` (epoll) at D9_CPU_PROFILE=999, and so does Debian's st-http (select) as the reference:
# 20 /fast on their own connections, /join (a joinable coroutine: zombie, join), /fanout?k=4
# (cond, timers), /burn?ms=20, /sleep?ms=20, /block?ms=20, /fwrite?kb=8192 (write + fsync of a temp
# file), 4 keep-alive connections of 100 /fast each, the control session.
# Durations are checked against the handler's own clock, not the nominal ms: the slow handlers
# reply X-Wall-Ns (their CLOCK_MONOTONIC wall time) and X-Blocked-Ns (their usleep; their write +
# fsync), so a loaded machine that stretches a 20 ms burn to 100 ms stretches the truth with it.
# "Within 10%" below means |trace - truth| <= 10% of truth + 1 ms (the 1 ms for tiny values: a
# call under D9_BLOCKING_THRESHOLD, 1 ms, is not recorded); for the blocking calls plus the
# handler's X-Run-Delay-Ns, the time its thread was preempted around them (from its schedstat),
# since a preemption outside the calls (in d9's wrapper after a slow call) is in no call's time.
#   - the trace decodes cleanly and holds every State Threads invariant (trace_check);
#   - one spawn at serve_conn per connection the server counted, one CoroutineExit each (the
#     control connection excepted); the joinable child and the fanout children exit once;
#   - every poll of a connection coroutine after a wait has one Wake (0.9 to 1.1 per poll), at
#     least 80% of them fd Wakes, both within 0.15 of the select build's, at most ~1 poll per
#     /fast request (how many requests wait at all is timing: the bytes may already be there):
#     the epoll idle loop's readiness is named (fd Wakes, none of kind other), with a non-zero
#     p50 delay;
#   - QueueSamples, some with coroutines waiting;
#   - /burn?ms=20: its longest poll within 10% of X-Wall-Ns (or up to 5 ms longer, plus the run
#     delay the kernel counted for the scheduler thread across the request: a preemption after
#     the handler's clock stopped is in the poll), with CPU samples in it on burn_cpu <
#     handle_burn; /sleep?ms=20: one timer Wake, >= 19 ms after the poll that slept;
#     /block?ms=20: its longest poll within 10% of X-Wall-Ns, and one BlockingCall, a usleep within
#     10% of X-Blocked-Ns with handle_block on its stack; /fwrite: its longest poll within 10% of
#     X-Wall-Ns, its write and fsync (BlockingCalls, or SchedDelays when preempted rather than
#     waiting) add up to X-Blocked-Ns within 10%, the fsync a BlockingCall with handle_fwrite on
#     its stack; no other BlockingCall in the trace (no false one);
#   - sampled connection stacks never run past ST's _st_thread_main (the coroutine's entry); most
#     end there with the start routine (serve_conn) just above it;
#   - static: the binary exports no st_* symbol and nothing is said on stderr: ST mode by patching;
#     the same checks pass on a static build linked with -rdynamic (it exports its st_*).
# Last, in both builds: st_thread_yield (SRS only), a yield that switches is a Wake of kind other
# of the coroutine by itself; two pthreads with a scheduler each, traced each on its own.
set -u
. "$(dirname "$0")/lib-preload.sh"
TP=${D9_THIRD_PARTY:-$PL_ROOT/../shared/third_party} # before pl_setup clears D9_*
pl_setup rt-srs

# ---- refusal: an st_init in the executable, but not the runtime the adapter knows ----------------
# (State Threads built without ST_SWITCH_CB has no st_set_switch_in_cb: nothing to hook switches
# with.) The agent must say so once and stay in generic mode; the program runs unchanged.
cat >"$T/fake-st.c" <<'CEOF'
#include <poll.h>
#include <stdio.h>
#define NI __attribute__((noinline))
NI int st_init(void) { return 0; }
NI void *st_thread_create(void *(*f)(void *), void *a, int j, int s) { (void)j; (void)s; return f(a); }
NI void st_thread_exit(void *r) { (void)r; }
NI int st_poll(struct pollfd *p, int n, unsigned long long t) { return poll(p, n, (int)(t / 1000)); }
NI void *st_thread_self(void) { return NULL; }
static void *body(void *a) { for (int i = 0; i < 5; i++) st_poll(NULL, 0, 2000); return a; }
int main(void)
{
	if (st_init() != 0 || st_thread_create(body, "x", 0, 0) == NULL)
		return 1;
	st_thread_exit(NULL);
	puts("done");
	return 0;
}
CEOF
read -r -d '' REFUSE <<'PYEOF'
with case("rt-srs-refuse-generic") as c:
    require(check_decodes_clean(tr))
    proc = tr.the_proc()
    n = collections.Counter(e["type"] for e in proc.events())
    if n["Park"] < 5 or n["Spawn"] or n["Wake"] or n["PollStart"] or n["CoroutineExit"]:
        fail("events %s: want >= 5 Parks (generic mode) and no coroutine event" % dict(n))
    c.info = "%d parks, no coroutine event" % n["Park"]
PYEOF
SDIR=$T/refuse
mkdir -p "$SDIR"
if ! ${CC:-cc} -O1 -o "$T/fake-st" "$T/fake-st.c" 2>"$T/cc.err"; then
	pl_fail rt-srs-refuse "cannot build the fake runtime: $(head -c 300 "$T/cc.err")"
else
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$SDIR/trace/trace.bin" \
		timeout -s KILL 20 "$T/fake-st" >"$SDIR/stdout" 2>"$SDIR/stderr"
	rc=$?
	nmsg=$(grep -c "State Threads in the executable has no st_set_switch_in_cb.*generic mode" "$SDIR/stderr")
	if [ "$rc" != 0 ] || [ "$(cat "$SDIR/stdout")" != "done" ]; then
		pl_fail rt-srs-refuse "exit status $rc, stdout '$(cat "$SDIR/stdout")'"
	elif [ "$nmsg" != 1 ] || [ "$(wc -l <"$SDIR/stderr")" != 1 ]; then
		pl_fail rt-srs-refuse "want one refusal line on stderr, got: '$(head -c 300 "$SDIR/stderr")'"
	else
		pl_pass rt-srs-refuse "$(cat "$SDIR/stderr")"
		pl_check rt-srs-refuse "$REFUSE"
	fi
fi

# ---- refusal: the runtime is all there, but st_init's first instructions cannot be moved ----------
# (its third instruction branches back to its first: no trampoline can hold that). d9__patch says
# why, the adapter says the process stays in generic mode; nothing is patched, the program runs.
cat >"$T/fake-st2.c" <<'CEOF'
#include <poll.h>
#include <stdio.h>
#define NI __attribute__((noinline))
/* returns 0; "jne st_init" is never taken, but it points into the bytes a patch would copy */
__asm__(".text\n.globl st_init\n.type st_init, @function\nst_init:\n"
	"\txorl %eax, %eax\n\ttestl %eax, %eax\n\tjne st_init\n"
	"\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tnop\n\tret\n"
	".size st_init, .-st_init\n");
int st_init(void);
typedef void (*cb_t)(void);
static cb_t in_cb, out_cb;
NI void *st_thread_create(void *(*f)(void *), void *a, int j, int s) { (void)j; (void)s; return f(a); }
NI void st_thread_exit(void *r) { (void)r; }
NI int st_poll(struct pollfd *p, int n, unsigned long long t) { return poll(p, n, (int)(t / 1000)); }
NI void *st_thread_self(void) { return NULL; }
NI cb_t st_set_switch_in_cb(cb_t cb) { cb_t o = in_cb; in_cb = cb; return o; }
NI cb_t st_set_switch_out_cb(cb_t cb) { cb_t o = out_cb; out_cb = cb; return o; }
static void *body(void *a) { for (int i = 0; i < 5; i++) st_poll(NULL, 0, 2000); return a; }
int main(void)
{
	if (st_init() != 0 || st_thread_create(body, "x", 0, 0) == NULL || in_cb || out_cb)
		return 1;
	st_thread_exit(NULL);
	puts("done");
	return 0;
}
CEOF
SDIR=$T/refuse2
mkdir -p "$SDIR"
if ! ${CC:-cc} -O1 -o "$T/fake-st2" "$T/fake-st2.c" 2>"$T/cc.err"; then
	pl_fail rt-srs-refuse-patch "cannot build the fake runtime: $(head -c 300 "$T/cc.err")"
else
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$SDIR/trace/trace.bin" \
		timeout -s KILL 20 "$T/fake-st2" >"$SDIR/stdout" 2>"$SDIR/stderr"
	rc=$?
	nmsg=$(grep -c "State Threads in the executable: st_init cannot be patched.*generic mode" "$SDIR/stderr")
	if [ "$rc" != 0 ] || [ "$(cat "$SDIR/stdout")" != "done" ]; then
		pl_fail rt-srs-refuse-patch "exit status $rc, stdout '$(cat "$SDIR/stdout")'"
	elif [ "$nmsg" != 1 ] || [ "$(wc -l <"$SDIR/stderr")" -gt 2 ]; then
		pl_fail rt-srs-refuse-patch "want the patcher's reason and one refusal line, got: '$(head -c 400 "$SDIR/stderr")'"
	else
		pl_pass rt-srs-refuse-patch "$(tr '\n' ' ' <"$SDIR/stderr")"
		pl_check rt-srs-refuse-patch "${REFUSE//rt-srs-refuse-generic/rt-srs-refuse-patch-generic}"
	fi
fi

# ---- SRS's State Threads ---------------------------------------------------------------------
ARCHIVE=$(find "$TP" -maxdepth 1 -name 'state-threads-srs-*.tar.gz' 2>/dev/null | sort | head -n 1)
SRS=$PL_ROOT/build/third_party/srs-st
if [ -z "$ARCHIVE" ]; then
	for c in rt-srs-shared rt-srs-static rt-srs-yield; do
		pl_skip "$c" "no state-threads-srs-*.tar.gz in $TP"
	done
	exit 0
fi

# srs_build: the archive built into $SRS/src (once per archive; a lock keeps two runs apart).
srs_build() {
	mkdir -p "$SRS"
	(
		flock 9
		if [ ! -e "$SRS/stamp" ] || [ "$ARCHIVE" -nt "$SRS/stamp" ]; then
			rm -rf "$SRS/src" && mkdir -p "$SRS/src" &&
				tar -xzf "$ARCHIVE" -C "$SRS/src" --strip-components=1 &&
				make -C "$SRS/src" linux-debug STATIC_ONLY=no >"$SRS/build.log" 2>&1 &&
				touch "$SRS/stamp"
		fi
	) 9>"$SRS/lock"
	[ -e "$SRS/stamp" ] && [ -e "$SRS/src/obj/libst.a" ] && [ -e "$SRS/src/obj/libst.so.1" ]
}

# srs_server OUT LINK...: st-http.c against SRS's st.h (which has no ST_EVENTSYS_POLL: -e poll
# then fails with EINVAL, unused here).
srs_server() {
	local out=$1
	shift
	[ "$out" -nt "$PL_ROOT/tests/servers/st-http.c" ] && [ "$out" -nt "$SRS/stamp" ] && return 0
	${CC:-cc} -std=gnu11 -D_GNU_SOURCE -O2 -g -fno-omit-frame-pointer -DST_EVENTSYS_POLL=2 \
		-I"$SRS/src/obj" -o "$out.tmp" "$PL_ROOT/tests/servers/st-http.c" "$@" \
		2>"$SRS/cc.log" && mv "$out.tmp" "$out"
}

if ! srs_build; then
	pl_fail rt-srs-build "cannot build $ARCHIVE: $(tail -c 300 "$SRS/build.log" 2>/dev/null)"
	exit 0
fi
SO_BIN=$SRS/st-http-so
A_BIN=$SRS/st-http-a
LIBST=$(readlink -f "$SRS/src/obj/libst.so.1")
RD_BIN=$SRS/st-http-a-rdynamic
if ! srs_server "$SO_BIN" -L"$SRS/src/obj" -lst -Wl,-rpath,"$SRS/src/obj" ||
	! srs_server "$A_BIN" "$SRS/src/obj/libst.a" ||
	! srs_server "$RD_BIN" -rdynamic "$SRS/src/obj/libst.a"; then
	pl_fail rt-srs-build "cannot build st-http.c on SRS's ST: $(head -c 300 "$SRS/cc.log")"
	exit 0
fi
if ! ldd "$SO_BIN" | grep -q "$SRS/src/obj/libst.so.1"; then
	pl_fail rt-srs-build "$SO_BIN does not load SRS's libst.so: $(ldd "$SO_BIN" | grep libst)"
	exit 0
fi
if nm -D "$A_BIN" | grep -q ' st_'; then
	pl_fail rt-srs-build "$A_BIN exports st_* symbols: not the static case"
	exit 0
fi

read -r -d '' CHECKS <<'PYEOF'
import statistics
binary, maps, stats_path, libst, mode, ref_path = args
syms = Symbols(binary, maps)
# where _st_thread_main is: the executable (static) or SRS's libst.so
stsyms = syms if mode == "static" else Symbols(libst, maps) if mode == "shared" else None
stats = load_json(stats_path)
p = "rt-srs-" + (mode if "rdynamic" not in binary else "rdynamic")

with case(p + "-decode"):
    require(check_decodes_clean(tr))

with case(p + "-invariants") as c:
    require(check_st_invariants(tr))
    c.info = "%d polls, %d Wakes, %d Spawns, %d QueueSamples" % (tr.count("PollStart"),
        tr.count("Wake"), tr.count("Spawn"), tr.count("QueueSample"))

proc = tr.the_proc()
cos = coroutines(proc)
conns = serve_conn_coroutines(proc, syms)
wakes = list(proc.events(("Wake",)))

with case(p + "-epoll") as c:
    want = "select" if mode == "select" else "epoll"
    if stats["eventsys"] != want:
        fail("the server runs %r, want %s" % (stats["eventsys"], want))
    parks = [e for e in proc.events(("Park",))]
    calls = set(e.get("call_name", e.get("call")) for e in parks)
    c.info = "%d parks, calls %s" % (len(parks), sorted(str(x) for x in calls))

with case(p + "-spawns-exits") as c:
    errs = []
    if len(conns) != stats["connections_total"]:
        errs.append("%d coroutines spawned at serve_conn, the server accepted %d connections"
                    % (len(conns), stats["connections_total"]))
    for x in conns[:-1]:
        if x.exits != 1:
            errs.append("connection coroutine %d: %d CoroutineExits, want 1" % (x.id, x.exits))
    joined = [x for x in cos.values() if x.spawn and location_is(x.seg, x.location, "join_child", syms)[0]]
    if len(joined) != 1 or joined[0].exits != 1:
        errs.append("join_child coroutines %s, want one that exits once" % [(x.id, x.exits) for x in joined])
    if not any(w["kind"] == WAKE_JOIN for w in wakes):
        errs.append("no join Wake")
    kids = [x for x in cos.values() if x.spawn and location_is(x.seg, x.location, "fanout_child", syms)[0]]
    if len(kids) != 4 or any(x.exits != 1 or [w["kind"] for w in x.wakes] != [WAKE_SPAWN, WAKE_TIMER] for x in kids):
        errs.append("fanout children %s, want 4, each woken by spawn then timer, 1 exit"
                    % [(x.id, [w["kind"] for w in x.wakes], x.exits) for x in kids])
    require(errs)
    c.info = "%d connection coroutines, %d exits in all" % (len(conns), tr.count("CoroutineExit"))

truth = load_json(os.path.join(os.path.dirname(stats_path), "truth.json"))

def near(d, want, slack=0):
    # the trace's duration d against the handler's own clock: 10%, plus 1 ms for tiny values,
    # plus slack: the run delay the handler saw around its blocking calls (a preemption there,
    # outside the calls, is in its time but in no call's; 0 on an idle machine)
    return d is not None and abs(d - want) <= 0.1 * want + 1e6 + slack

# the poll holds the request's parsing, dispatch and the reply's write as well, outside the
# handler's clock: a preemption there (a few ms on a loaded machine) is in the poll, in no
# handler's time; the poll may be that much longer, never shorter
POLL_EXTRA_NS = 5e6

def handler_poll(x, what):
    # the poll that ran the handler: the coroutine's longest; checked against its wall time
    ds = [d for d in x.poll_ns() if d is not None]
    d = max(ds) if ds else None
    want = truth[what]["wall_ns"]
    # the preemption the kernel counted across the whole request (/burn), which a poll may
    # hold outside the handler's clock; checked, so a poll stretched for another reason fails
    around = max(0, truth[what].get("request_delay_ns") or 0)
    if not (near(d, want) or (d is not None and want <= d <= want * 1.1 + 1e6 + POLL_EXTRA_NS + around)):
        fail("the /%s coroutine %d: longest poll %s, the handler took %s (want within 10%% + 1 ms,"
             " or up to 5 ms more, and the %s its thread waited to run during the request:"
             " the poll's part outside the handler)"
             % (what, x.id, ms(d) if d is not None else None, ms(want), ms(around)))
    return d

def delay_ns(w):
    nxt = next_in_thread(proc, w, lambda e: e["type"] == "PollStart" and e["coroutine"] == w["woken"])
    return nxt["mono_ns"] - w["mono_ns"] if nxt else None

kinds = collections.Counter(w["kind"] for w in wakes)
fdw = [w for w in wakes if w["kind"] == WAKE_FD]
fd_delays = [d for d in (delay_ns(w) for w in fdw) if d is not None]
nreq = stats["requests"]["fast"]
conn_fd = sum(1 for w in fdw if w["woken"] in set(x.id for x in conns))
conn_polls = sum(len(x.polls) for x in conns)
# a request waits in st_poll (one fd Wake, one more poll) only when its bytes are not there yet
# when the coroutine reads: timing decides how many do, so the check is per poll that followed
# a wait (every poll of a connection coroutine but its first), not per request
conn_ids = set(x.id for x in conns)
conn_wakes = sum(1 for w in wakes if w["woken"] in conn_ids and w["kind"] != WAKE_SPAWN)
later_polls = conn_polls - len(conns)
mine = {"fd_per_req": conn_fd / max(1, nreq), "polls_per_req": conn_polls / max(1, nreq),
        "wakes_per_poll": conn_wakes / max(1, later_polls),
        "fd_share": conn_fd / max(1, conn_wakes),
        "p50_fd_delay_ns": statistics.median(fd_delays) if fd_delays else 0, "fd_wakes": len(fdw),
        "other": kinds.get(WAKE_OTHER, 0), "requests": nreq}

with case(p + "-fd-wakes") as c:
    errs = []
    if kinds.get(WAKE_OTHER, 0):
        errs.append("%d Wakes of kind other (readiness not named)" % kinds[WAKE_OTHER])
    if not fd_delays or statistics.median(fd_delays) <= 0:
        errs.append("p50 delay of fd Wakes is %s, want > 0" % (statistics.median(fd_delays) if fd_delays else None))
    if later_polls < nreq / 10:
        errs.append("%d polls after a wait for %d requests: too few to judge" % (later_polls, nreq))
    if not (0.9 <= mine["wakes_per_poll"] <= 1.1):
        errs.append("%.2f Wakes per poll after a wait (connection coroutines), want 1" % mine["wakes_per_poll"])
    if mine["fd_share"] < 0.8:
        errs.append("only %.0f%% of the connection coroutines' Wakes are fd Wakes" % (100 * mine["fd_share"]))
    if mine["polls_per_req"] > 1.5:
        errs.append("%.2f polls of connection coroutines per /fast request, want at most about 1" % mine["polls_per_req"])
    if ref_path:
        ref = load_json(ref_path)
        for k in ("wakes_per_poll", "fd_share"):
            if abs(mine[k] - ref[k]) > 0.15:
                errs.append("%s %.2f, Debian's select build %.2f" % (k, mine[k], ref[k]))
        if ref["p50_fd_delay_ns"] <= 0:
            errs.append("the reference run has p50 fd delay %s" % ref["p50_fd_delay_ns"])
    require(errs)
    c.info = ("%d fd Wakes (%.2f per request, %.2f polls per request, %.2f Wakes per poll after a "
              "wait, %.0f%% fd) p50 delay %.1f us, kinds %s"
              % (len(fdw), mine["fd_per_req"], mine["polls_per_req"], mine["wakes_per_poll"],
                 100 * mine["fd_share"], mine["p50_fd_delay_ns"] / 1e3, dict(sorted(kinds.items()))))
    if ref_path:
        c.info += "; select build: %.2f Wakes per poll after a wait, %.0f%% fd, p50 delay %.1f us" % (
            ref["wakes_per_poll"], 100 * ref["fd_share"], ref["p50_fd_delay_ns"] / 1e3)

with case(p + "-queue") as c:
    qs = [e["runnable"] for e in proc.events(("QueueSample",))]
    if not qs or max(qs) < 1:
        fail("%d QueueSamples, max runnable %s: want samples, some with a coroutine waiting to run"
             % (len(qs), max(qs) if qs else None))
    c.info = "%d samples, max %d runnable" % (len(qs), max(qs))

with case(p + "-sleep") as c:
    # the coroutine parked in st_usleep(20 ms): its timer Wake comes >= 19 ms after its poll ended
    gaps = []
    for x in conns:
        for w in x.wakes:
            if w["kind"] != WAKE_TIMER:
                continue
            pe = prev_in_thread(proc, w, lambda e: e["type"] == "PollEnd" and e["coroutine"] == x.id)
            if pe:
                gaps.append(w["mono_ns"] - pe["mono_ns"])
    if len(gaps) != 1 or not (19e6 <= gaps[0] < 1e9):
        fail("timer Wakes of connection coroutines after %s, want one after about 20 ms" % [ms(g) for g in gaps])
    c.info = "the /sleep?ms=20 coroutine woke by its timer %s after its poll ended" % ms(gaps[0])

with case(p + "-blocking") as c:
    # connections in order: 20 /fast, /join, /fanout, /burn, /sleep, /block, /fwrite, ...
    blk, fw = conns[24], conns[25]
    bcs = list(proc.events(("BlockingCall",)))
    names = [(e["_seg"].string(e["call"]), e["coroutine"], ms(e["duration_ns"])) for e in bcs]
    ub = [e for e in bcs if e["coroutine"] == blk.id]
    uf = [e for e in bcs if e["coroutine"] == fw.id]
    if len(ub) != 1 or ub[0]["_seg"].string(ub[0]["call"]) != "usleep" or len(ub) + len(uf) != len(bcs):
        fail("BlockingCalls (call, coroutine, duration) %s: want one usleep of the /block coroutine %d,"
             " then only the /fwrite coroutine %d's" % (names, blk.id, fw.id))
    e = ub[0]
    if not near(e["duration_ns"], truth["block"]["blocked_ns"], truth["block"]["run_delay_ns"]):
        fail("the usleep lasted %s, the handler's usleep %s" % (ms(e["duration_ns"]), ms(truth["block"]["blocked_ns"])))
    frames = e["_seg"].stacks.get(e["stack"], []) if e["stack"] else []
    if not any(syms.contains("handle_block", a, return_address=True) for a in frames):
        fail("the usleep's stack has no frame in handle_block: %s" % describe_frames(frames, syms, maps))
    handler_poll(blk, "block")
    c.info = "usleep %s on handle_block (the handler's: %s)" % (ms(e["duration_ns"]), ms(truth["block"]["blocked_ns"]))

with case(p + "-fwrite") as c:
    # write + fsync, each recorded when it took >= 1 ms: as a BlockingCall when it waited off CPU,
    # as a SchedDelay when it was preempted instead
    # (on its file: a preempted read or write of its socket is a SchedDelay of that coroutine too)
    calls = [e for e in proc.events(("BlockingCall", "SchedDelay")) if e["coroutine"] == fw.id and
             e["fd_kind"] == FD_FILE and e["_seg"].string(e["call"]) in ("write", "fsync")]
    cn = [(e["type"], e["_seg"].string(e["call"]), ms(e["duration_ns"])) for e in calls]
    total = sum(e["duration_ns"] for e in calls)
    if not near(total, truth["fwrite"]["blocked_ns"], truth["fwrite"]["run_delay_ns"]):
        fail("the /fwrite coroutine's calls %s add up to %s, its write + fsync took %s (%s of it preempted)"
             % (cn, ms(total), ms(truth["fwrite"]["blocked_ns"]), ms(truth["fwrite"]["run_delay_ns"])))
    fs = [e for e in calls if e["type"] == "BlockingCall" and e["_seg"].string(e["call"]) == "fsync"]
    if len(fs) != 1:
        fail("%d fsync BlockingCalls of the /fwrite coroutine, want 1: %s" % (len(fs), cn))
    frames = fs[0]["_seg"].stacks.get(fs[0]["stack"], []) if fs[0]["stack"] else []
    if not any(syms.contains("handle_fwrite", a, return_address=True) for a in frames):
        fail("the fsync's stack has no frame in handle_fwrite: %s" % describe_frames(frames, syms, maps))
    d = handler_poll(fw, "fwrite")
    c.info = "%s = %s (the handler's write + fsync: %s, %s preempted), in a poll of %s (the handler's %s)" % (
        " + ".join("%s %s" % n[1:] for n in cn), ms(total), ms(truth["fwrite"]["blocked_ns"]),
        ms(truth["fwrite"]["run_delay_ns"]), ms(d), ms(truth["fwrite"]["wall_ns"]))

samples = [e for e in proc.events(("CpuSample",)) if e["coroutine"]]

def frames_of(e):
    return e["_seg"].stacks.get(e["stack"], []) if e["stack"] else []

def at(name, frames, s=syms):
    for i, a in enumerate(frames):
        if s.contains(name, a if i == 0 else a - 1):
            return i
    return -1

with case(p + "-burn") as c:
    # connections in order: 20 /fast, /join, /fanout, /burn, /sleep, /block, /fwrite, 4 keep-alive, control
    b = conns[22]
    handler_poll(b, "burn")
    i = max(range(len(b.polls)), key=lambda k: b.poll_ns()[k] or 0)
    ps, pe = b.polls[i]
    ins = [e for e in samples if e["coroutine"] == b.id and ps["mono_ns"] <= e["mono_ns"] <= pe["mono_ns"]]
    good = [e for e in ins if 0 <= at("burn_cpu", frames_of(e)) < at("handle_burn", frames_of(e))]
    if len(good) < 5 or len(good) < 0.8 * len(ins):
        fail("%d CPU samples of the burn coroutine in its poll, %d with burn_cpu under handle_burn"
             " (e.g. %s)" % (len(ins), len(good), [describe_frames(frames_of(e), syms, maps) for e in ins[:2]]))
    c.info = ("a poll of %s (the handler's %s; %s run delay in the request), %d of %d samples in it"
              " on burn_cpu < handle_burn" % (ms(pe["mono_ns"] - ps["mono_ns"]), ms(truth["burn"]["wall_ns"]),
                                              ms(truth["burn"]["request_delay_ns"]), len(good), len(ins)))

# Debian's libst (the select reference) has no symbol table: no _st_thread_main to find there
if mode != "select":
    with case(p + "-stack-root") as c:
        conn_ids = set(x.id for x in conns)
        mine_s = [e for e in samples if e["coroutine"] in conn_ids and frames_of(e)]
        def in_entry(a):
            return stsyms.contains("_st_thread_main", a - 1)
        past, ended, below, cut = [], 0, 0, 0
        for e in mine_s:
            f = frames_of(e)
            cut += 1 if e.get("unwind", 0) & 8 else 0
            if any(in_entry(a) for a in f[:-1]):
                past.append(describe_frames(f, syms, maps)[-4:])
            elif in_entry(f[-1]):
                ended += 1
                below += at("serve_conn", f) == len(f) - 2
        # some unwinds stop short (a frame-pointer unwind from a libc or ld.so leaf loses that
        # leaf's caller, or stops there): most samples, not all, reach the entry
        if not mine_s or past or ended < 0.8 * len(mine_s) or below < 0.8 * len(mine_s):
            fail("%d samples of connection coroutines: %d with frames past _st_thread_main (%s), "
                 "%d ending there, %d of them with serve_conn just above it; %s is at %s; "
                 "the last frames of the first samples: %s"
                 % (len(mine_s), len(past), past[:3], ended, below, stsyms.binary,
                    "%#x (_st_thread_main %#x-%#x)" % ((stsyms.base or 0,) + stsyms.addr("_st_thread_main")),
                    ["%s (%s; unwind %d)" % (describe_frames(frames_of(e), syms, maps)[-3:],
                                             " ".join("%#x" % a for a in frames_of(e)[-2:]),
                                             e.get("unwind", 0)) for e in mine_s[:3]]))
        c.info = ("%d of %d samples end with serve_conn < _st_thread_main (%s), %d at it, none past "
                  "it, %d truncated" % (below, len(mine_s), os.path.basename(stsyms.binary), ended, cut))

with open(os.path.join(os.path.dirname(stats_path), "figures.json"), "w") as fh:
    json.dump(mine, fh)
PYEOF

# run_srs NAME BINARY MODE REF: one run of BINARY -e alt (MODE: shared, static or select for the
# Debian reference, which runs its default select), checked with CHECKS.
run_srs() {
	local name=$1 bin=$2 mode=$3 ref=$4 ok=1 ev=(-e alt) i
	[ "$mode" = select ] && ev=()
	if ! pl_start "$T/$name" "$bin" D9_CPU_PROFILE=999 -- "${ev[@]}"; then
		pl_fail "$name" "$PL_ERR"
		return 1
	fi
	# the durations are checked against the handlers' own clocks, and a poll also covers the
	# microseconds after its handler: a preemption there (another process's turn, seen on a
	# loaded machine) would stretch the poll alone. At nice -10 (PL_NICE: when root) that is rare.
	[ ${#PL_NICE[@]} -gt 0 ] && renice -n -10 -p "$SPID" >/dev/null
	pl_gets 20 /fast ok || { pl_fail "$name-replies" "$PL_ERR"; ok=0; }
	pl_gets 1 /join "join ok" || { pl_fail "$name-replies" "$PL_ERR"; ok=0; }
	pl_gets 1 "/fanout?k=4" "fanout k=4 done=4" || { pl_fail "$name-replies" "$PL_ERR"; ok=0; }
	# the scheduler thread's run delay (the kernel's count, 0 where there is no schedstat) across
	# the whole /burn request: a preemption outside the handler, which the poll covers and the
	# handler's clock does not, is in it
	local burn_wall burn_delay rd0 rd1 block_wall block_blocked block_delay fw_wall fw_blocked fw_delay
	rd0=$(awk '{ print $2 }' "/proc/$SPID/schedstat" 2>/dev/null)
	pl_get "/burn?ms=20"
	rd1=$(awk '{ print $2 }' "/proc/$SPID/schedstat" 2>/dev/null)
	case "$BODY" in "burn ms=20 cpu_ns="*) ;; *) pl_fail "$name-replies" "/burn: $CODE '$BODY'"; ok=0 ;; esac
	burn_wall=$(pl_header X-Wall-Ns)
	burn_delay=$(( ${rd1:-0} - ${rd0:-0} ))
	pl_gets 1 "/sleep?ms=20" "sleep ms=20" || { pl_fail "$name-replies" "$PL_ERR"; ok=0; }
	pl_gets 1 "/block?ms=20" "block ms=20" || { pl_fail "$name-replies" "$PL_ERR"; ok=0; }
	block_wall=$(pl_header X-Wall-Ns) block_blocked=$(pl_header X-Blocked-Ns) block_delay=$(pl_header X-Run-Delay-Ns)
	pl_gets 1 "/fwrite?kb=8192" "fwrite kb=8192" || { pl_fail "$name-replies" "$PL_ERR"; ok=0; }
	fw_wall=$(pl_header X-Wall-Ns) fw_blocked=$(pl_header X-Blocked-Ns) fw_delay=$(pl_header X-Run-Delay-Ns)
	if [ -z "$burn_wall" ] || [ -z "$block_blocked" ] || [ -z "$fw_blocked" ]; then
		pl_fail "$name-replies" "a slow handler's reply lacks X-Wall-Ns or X-Blocked-Ns"
		ok=0
	fi
	# the handlers' own clocks: the truth the durations are checked against
	printf '{"burn": {"wall_ns": %s, "request_delay_ns": %s}, "block": {"wall_ns": %s, "blocked_ns": %s, "run_delay_ns": %s}, "fwrite": {"wall_ns": %s, "blocked_ns": %s, "run_delay_ns": %s}}\n' \
		"${burn_wall:-null}" "$burn_delay" "${block_wall:-null}" "${block_blocked:-null}" "${block_delay:-null}" \
		"${fw_wall:-null}" "${fw_blocked:-null}" "${fw_delay:-null}" >"$SDIR/truth.json"
	# keep-alive load: 4 connections of 100 requests each
	local urls=() pids=()
	for i in $(seq 100); do urls+=("http://127.0.0.1:$SPORT/fast"); done
	for i in 1 2 3 4; do
		curl -sS --max-time 30 "${urls[@]}" >/dev/null 2>"$SDIR/curl$i.err" &
		pids+=($!)
	done
	wait "${pids[@]}" 2>/dev/null
	if ! pl_session_quit || [ "$SRC" != 0 ]; then
		pl_fail "$name-exit" "${PL_ERR:-exit status $SRC}"
		return 1
	fi
	if [ -s "$SDIR/stderr" ]; then
		pl_fail "$name-stderr" "the agent or the server said: $(head -c 300 "$SDIR/stderr")"
	else
		pl_pass "$name-stderr" "nothing on stderr"
	fi
	[ "$ok" = 1 ] && pl_pass "$name-replies" "20 /fast, /join, /fanout?k=4, /burn?ms=20, /sleep?ms=20, /block?ms=20, /fwrite?kb=8192, 400 /fast on 4 keep-alive connections"
	pl_check "$name" "$CHECKS" "$bin" "$SDIR/maps" "$SDIR/stats.json" "$LIBST" "$mode" "$ref"
}

run_srs rt-srs-select "$ST_HTTP" select ""
REF=$T/rt-srs-select/figures.json
[ -s "$REF" ] || REF=""
run_srs rt-srs-shared "$SO_BIN" shared "$REF"
# patching decodes prologues with libcapstone (preload/patch.c loads it when it needs it)
KINDS=(shared static)
if ! ldconfig -p 2>/dev/null | grep -q 'libcapstone\.so\.4'; then
	KINDS=(shared)
	for c in rt-srs-static rt-srs-rdynamic rt-srs-static-yield rt-srs-static-threads; do
		pl_skip "$c" "libcapstone.so.4 is not installed (make deps): static runtimes cannot be patched"
	done
else
	run_srs rt-srs-static "$A_BIN" static "$REF"
	# linked with -rdynamic, the program exports its own st_*: still patched, and the hooks
	# patched in are the agent's (hidden aliases), not the program's functions of the same name
	run_srs rt-srs-rdynamic "$RD_BIN" static "$REF"
fi

# ---- st_thread_yield (SRS only), both builds ----------------------------------------------------
# Two joinable coroutines yield 10 times each; while the other one is runnable a yield switches,
# and the yielder is runnable again at once by its own doing: a Wake of kind other with itself as
# the waker, then its next poll. Neither gets any other kind of Wake but its spawn.
cat >"$T/yield.c" <<'CEOF'
#include <stdio.h>
#include <st.h>
static int turns;
void *yielder(void *a) __attribute__((noinline));
void *yielder(void *a)
{
	for (int i = 0; i < 10; i++) {
		turns++;
		st_thread_yield();
	}
	return a;
}
int main(void)
{
	if (st_set_eventsys(ST_EVENTSYS_ALT) != 0 || st_init() != 0)
		return 1;
	st_thread_t a = st_thread_create(yielder, NULL, 1, 0), b = st_thread_create(yielder, NULL, 1, 0);
	if (!a || !b || st_thread_join(a, NULL) != 0 || st_thread_join(b, NULL) != 0)
		return 1;
	printf("turns=%d yielder=%p\n", turns, (void *)yielder);
	return 0;
}
CEOF
read -r -d '' YIELD <<'PYEOF'
name, addr = args[0], int(args[1], 16)
with case(name) as c:
    require(check_decodes_clean(tr) + check_st_invariants(tr))
    proc = tr.the_proc()
    cos = coroutines(proc)
    ys = [x for x in cos.values() if x.spawn and x.location_def()["function_addr"] == addr]
    if len(ys) != 2:
        fail("%d coroutines at yielder, want 2" % len(ys))
    errs = []
    for x in ys:
        kinds = [(w["kind"], w["waker"] == x.id) for w in x.wakes]
        own = kinds.count((WAKE_OTHER, True))
        if kinds[0][0] != WAKE_SPAWN or own + 1 != len(kinds) or own < 9 or len(x.polls) != own + 1 or x.exits != 1:
            errs.append("yielder %d: Wakes (kind, by itself) %s, %d polls, %d exits: want spawn, then "
                        ">= 9 of (0, True), one poll more than those, 1 exit" % (x.id, kinds, len(x.polls), x.exits))
    require(errs)
    c.info = "self Wakes per yielder: %s" % [sum(1 for w in x.wakes if w["kind"] == WAKE_OTHER) for x in ys]
PYEOF
for kind in "${KINDS[@]}"; do
	name=rt-srs-$kind-yield
	SDIR=$T/$name
	mkdir -p "$SDIR"
	if [ "$kind" = shared ]; then
		# shellcheck disable=SC2054 # -Wl,-rpath,DIR is one argument
		link=(-L"$SRS/src/obj" -lst -Wl,-rpath,"$SRS/src/obj")
	else
		link=("$SRS/src/obj/libst.a")
	fi
	if ! ${CC:-cc} -O2 -g -I"$SRS/src/obj" -o "$SDIR/yield" "$T/yield.c" "${link[@]}" 2>"$T/cc.err"; then
		pl_fail "$name" "cannot build yield.c: $(head -c 300 "$T/cc.err")"
		continue
	fi
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$SDIR/trace/trace.bin" \
		timeout -s KILL 20 "$SDIR/yield" >"$SDIR/stdout" 2>"$SDIR/stderr"
	rc=$?
	addr=$(sed -n 's/^turns=20 yielder=//p' "$SDIR/stdout")
	if [ "$rc" != 0 ] || [ -z "$addr" ] || [ -s "$SDIR/stderr" ]; then
		pl_fail "$name" "exit status $rc, stdout '$(cat "$SDIR/stdout")', stderr '$(head -c 300 "$SDIR/stderr")'"
	else
		pl_check "$name" "$YIELD" "$name" "$addr"
	fi
done

# ---- one scheduler per pthread (SRS's ST keeps its scheduler in __thread variables) -------------
# Two pthreads each run st_init and 3 coroutines that sleep 1 ms 5 times and return; the main
# thread joins both. Per thread: one primordial coroutine, 3 children each woken by spawn then 5
# timers, 6 polls and one exit, everything on that thread; the per-thread invariants hold (the
# primordial coroutine's last poll stays open: its pthread ends inside it, and nothing ends it).
cat >"$T/mt.c" <<'CEOF'
#include <pthread.h>
#include <stdio.h>
#include <st.h>
void *sleeper(void *a) __attribute__((noinline));
void *sleeper(void *a)
{
	for (int i = 0; i < 5; i++)
		st_usleep(1000);
	return a;
}
static void *sched(void *a)
{
	st_thread_t t[3];
	if (st_set_eventsys(ST_EVENTSYS_ALT) != 0 || st_init() != 0)
		return NULL;
	for (int i = 0; i < 3; i++)
		if (!(t[i] = st_thread_create(sleeper, NULL, 1, 0)))
			return NULL;
	for (int i = 0; i < 3; i++)
		if (st_thread_join(t[i], NULL) != 0)
			return NULL;
	return a;
}
int main(void)
{
	pthread_t p[2];
	void *r[2];
	for (int i = 0; i < 2; i++)
		if (pthread_create(&p[i], NULL, sched, "ok") != 0)
			return 1;
	for (int i = 0; i < 2; i++)
		if (pthread_join(p[i], &r[i]) != 0 || !r[i])
			return 1;
	printf("sleeper=%p\n", (void *)sleeper);
	return 0;
}
CEOF
read -r -d '' MT <<'PYEOF'
name, addr = args[0], int(args[1], 16)
with case(name) as c:
    # a pthread that returns while its primordial coroutine runs leaves that poll open
    require(check_decodes_clean(tr) + check_thread_order(tr) + check_polls_and_parks(tr, True) +
            check_one_wake_per_poll(tr) + check_queue_samples(tr) + check_ids_defined(tr))
    proc = tr.the_proc()
    cos = coroutines(proc)
    errs = []
    per = collections.defaultdict(list)
    for x in cos.values():
        if x.spawn:
            per[x.spawn["tid"]].append(x)
    if len(per) != 2:
        errs.append("coroutines spawned on %d threads, want 2" % len(per))
    for tid, xs in per.items():
        mains = [x for x in xs if x.parent == 0 and x.location_name() == "main"]
        kids = [x for x in xs if x.location_def()["function_addr"] == addr]
        if len(mains) != 1 or len(kids) != 3 or len(xs) != 4:
            errs.append("thread %d: %d primordial, %d sleepers, %d in all; want 1, 3, 4" % (tid, len(mains), len(kids), len(xs)))
        for x in kids:
            kinds = [w["kind"] for w in x.wakes]
            if kinds != [WAKE_SPAWN] + [WAKE_TIMER] * 5 or len(x.polls) != 6 or x.exits != 1 or x.tids != {tid}:
                errs.append("thread %d sleeper %d: Wakes %s, %d polls, %d exits, threads %s" % (tid, x.id, kinds, len(x.polls), x.exits, sorted(x.tids)))
    require(errs)
    c.info = "2 schedulers, each with its primordial coroutine and 3 sleepers"
PYEOF
for kind in "${KINDS[@]}"; do
	name=rt-srs-$kind-threads
	SDIR=$T/$name
	mkdir -p "$SDIR"
	if [ "$kind" = shared ]; then
		# shellcheck disable=SC2054 # -Wl,-rpath,DIR is one argument
		link=(-L"$SRS/src/obj" -lst -Wl,-rpath,"$SRS/src/obj")
	else
		link=("$SRS/src/obj/libst.a")
	fi
	if ! ${CC:-cc} -O2 -g -I"$SRS/src/obj" -o "$SDIR/mt" "$T/mt.c" "${link[@]}" -lpthread 2>"$T/cc.err"; then
		pl_fail "$name" "cannot build mt.c: $(head -c 300 "$T/cc.err")"
		continue
	fi
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$SDIR/trace/trace.bin" \
		timeout -s KILL 20 "$SDIR/mt" >"$SDIR/stdout" 2>"$SDIR/stderr"
	rc=$?
	addr=$(sed -n 's/^sleeper=//p' "$SDIR/stdout")
	if [ "$rc" != 0 ] || [ -z "$addr" ] || [ -s "$SDIR/stderr" ]; then
		pl_fail "$name" "exit status $rc, stdout '$(cat "$SDIR/stdout")', stderr '$(head -c 300 "$SDIR/stderr")'"
	else
		pl_check "$name" "$MT" "$name" "$addr"
	fi
done
