#!/usr/bin/env bash
# test-preload-sched.sh: Unpark's cpu_ns and sched_wait_ns (the worker's schedstat), and calls
# that were preempted rather than blocked, on State Threads servers.
#   - cpu: st-http, /burn?ms=200 (200 ms of thread CPU time between two parks): the Unpark that
#     covers it carries 160 ms <= cpu_ns <= 240 ms, the summary's worker cpu is at least that;
#     Unparks carrying values are at least 29 ms apart (one schedstat reading per 30 ms at most:
#     bounded cost), the others carry null (unknown), never 0; every value is plausible
#     (cpu_ns + sched_wait_ns <= the wall time since the previous Unpark carrying values, + one
#     scheduler slice: the clock is read before schedstat).
#   - wait: the same server and a CPU hog pinned to the same CPU (taskset): the Unpark covering
#     /burn?ms=200 has sched_wait_ns >= 50 ms (the hog takes about half the CPU) and within the
#     wall time bound above; the summary shows the worker's sched wait.
#   - st-hog: st-http (Debian's libst, select) pinned with the hog, wrk on /fast for 3 s with
#     D9_BLOCKING_THRESHOLD=50us: 0 BlockingCalls on sockets (ST's sockets are non-blocking: a
#     slow write there is preemption), scheduling delay > 0 in the summary; the preempted calls,
#     if any, are SchedDelay events inside a poll of their coroutine, each >= 50 us with a run
#     delay no longer than the call, all counted by the summary's preempted_calls (reads and
#     writes on ST's non-blocking sockets are not timed at all: preload/libc-fds.c, so there
#     are usually none; test-preload-nbfd.sh and test-viewer.sh make some); and, as the control
#     that the check can fail, /block?ms=30 (a libc usleep) under the same hog is still a
#     BlockingCall.
#   - srs-hog: the same with SRS's State Threads (epoll), built from
#     ../shared/third_party/state-threads-srs-*.tar.gz into build/third_party/ (SKIP when the
#     archive is absent or does not build).
# SKIP lines: taskset or wrk missing.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-sched

HOG_PID=""
hog_stop() {
	if [ -n "$HOG_PID" ]; then
		kill -KILL "$HOG_PID" 2>/dev/null
		wait "$HOG_PID" 2>/dev/null
		HOG_PID=""
	fi
}
trap 'hog_stop; pl_cleanup' EXIT

# the last CPU this script may run on: the server and the hog share it
CPU=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //' | tr ',' '\n' | sed 's/.*-//' | tail -n1)

# hog_start: a busy loop pinned to $CPU, running (state R) before this returns.
hog_start() {
	taskset -c "$CPU" sh -c 'while :; do :; done' &
	HOG_PID=$!
	PL_PIDS+=("$HOG_PID")
	d9_wait_for 10 eval '[ "$(sed "s/.*) //" /proc/$HOG_PID/stat 2>/dev/null | cut -d" " -f1)" = R ]'
}

# pin: every thread of the server SPID onto $CPU.
pin() {
	taskset -a -p -c "$CPU" "$SPID" >/dev/null
}

# check NAME ARGS...: runs the Python check in $CHECK on the jsonl and summary of $SDIR's trace.
check() {
	local name=$1
	shift
	"$PL_ANALYZE" jsonl "$SDIR/trace" >"$SDIR/events.jsonl" 2>"$SDIR/jsonl.err"
	"$PL_ANALYZE" summary --json "$SDIR/trace" >"$SDIR/summary.json" 2>"$SDIR/summary.err"
	python3 - "$name" "$SDIR/events.jsonl" "$SDIR/summary.json" "$@" <<<"$CHECK"
}

read -r -d '' COMMON <<'PYEOF'
import json, sys
name, events_path, summary_path = sys.argv[1:4]
args = sys.argv[4:]
evs = [json.loads(l) for l in open(events_path)]
summary = json.load(open(summary_path))
ms = lambda v: "%.1f ms" % (v / 1e6)
out = []
def ok(case, info=""):
    out.append("PASS %s%s" % (case, ": " + info if info else ""))
def bad(case, why):
    out.append("FAIL %s: %s" % (case, why))

def stat_unparks():
    """Unparks with values, each with the wall time since the previous one with values."""
    last, res = {}, []
    for e in evs:
        if e["type"] != "Unpark":
            continue
        if (e["cpu_ns"] is None) != (e["sched_wait_ns"] is None):
            raise SystemExit("FAIL %s: half-known Unpark %s" % (name, e))
        if e["cpu_ns"] is None:
            continue
        prev = last.get(e["tid"])
        last[e["tid"]] = e["mono_ns"]
        res.append((e, None if prev is None else e["mono_ns"] - prev))
    return res

def plausible(case, su):
    errs = []
    for e, wall in su:
        if wall is not None and wall < 29e6:
            errs.append("Unpark with values %s after the previous one (< 29 ms)" % ms(wall))
        # + one scheduler slice (10 ms): the agent reads the clock, then schedstat; a thread
        # preempted between the two (the sched-wait case runs beside a hog on purpose) has run
        # delay in its reading that lies after the Unpark's time
        if wall is not None and e["cpu_ns"] + e["sched_wait_ns"] > wall + 11e6:
            errs.append("cpu %s + wait %s > wall %s" % (ms(e["cpu_ns"]), ms(e["sched_wait_ns"]), ms(wall)))
    if not su:
        bad(case, "no Unpark carries cpu_ns and sched_wait_ns")
    elif errs:
        bad(case, "; ".join(errs[:3]))
    else:
        ok(case, "%d Unparks with values, %d without" % (len(su),
           sum(1 for e in evs if e["type"] == "Unpark" and e["cpu_ns"] is None)))

def worker():
    ws = [w for w in summary["workers"]]
    if len(ws) != 1:
        raise SystemExit("FAIL %s: %d workers, want 1" % (name, len(ws)))
    return ws[0]
PYEOF

# ---- cpu: a known amount of CPU between two parks -------------------------------------------
read -r -d '' CHECK <<PYEOF
$COMMON
su = stat_unparks()
plausible(name + "-bounded", su)
burn = max((e for e, _ in su), key=lambda e: e["cpu_ns"], default=None)
w = worker()
if burn is None or not (160e6 <= burn["cpu_ns"] <= 240e6):
    bad(name, "largest Unpark cpu_ns %s, want 200 ms +-20%%" % (ms(burn["cpu_ns"]) if burn else None))
elif w["park_cpu_ns"] is None or w["park_cpu_ns"] < burn["cpu_ns"]:
    bad(name, "summary cpu %s < the burn's Unpark %s" % (w["park_cpu_ns"], burn["cpu_ns"]))
else:
    ok(name, "burn Unpark cpu %s, wait %s; worker cpu %s" % (ms(burn["cpu_ns"]),
       ms(burn["sched_wait_ns"]), ms(w["park_cpu_ns"])))
print("\n".join(out))
PYEOF
if pl_run cpu "$ST_HTTP" -- /fast ok "/burn?ms=200" "burn ms=200*" /fast ok; then
	check sched-cpu
fi

if ! command -v taskset >/dev/null || [ -z "$CPU" ]; then
	pl_skip sched-wait "taskset is not installed"
	pl_skip sched-st-hog "taskset is not installed"
	pl_skip sched-srs-hog "taskset is not installed"
	exit 0
fi

# ---- wait: runnable behind a CPU hog on the same CPU ------------------------------------------
read -r -d '' CHECK <<PYEOF
$COMMON
su = stat_unparks()
plausible(name + "-bounded", su)
burn = max((e for e, _ in su), key=lambda e: e["cpu_ns"], default=None)
w = worker()
if burn is None or burn["cpu_ns"] < 160e6:
    bad(name, "no Unpark covers the burn (largest cpu_ns %s)" % (burn and ms(burn["cpu_ns"])))
elif burn["sched_wait_ns"] < 50e6:
    bad(name, "the burn's Unpark has sched_wait_ns %s behind a hog on the same CPU, want >= 50 ms"
        % ms(burn["sched_wait_ns"]))
elif w["sched_wait_ns"] is None or w["sched_wait_ns"] < burn["sched_wait_ns"]:
    bad(name, "summary sched wait %s" % w["sched_wait_ns"])
else:
    ok(name, "burn Unpark cpu %s, sched wait %s on CPU %s" % (ms(burn["cpu_ns"]),
       ms(burn["sched_wait_ns"]), args[0]))
print("\n".join(out))
PYEOF
if pl_start "$T/wait" "$ST_HTTP" --; then
	pin
	if hog_start; then
		pl_get "/burn?ms=200"
		case "$BODY" in "burn ms=200 cpu_ns="*) ;; *) pl_fail sched-wait-requests "/burn: $CODE '$BODY'" ;; esac
		pl_get /fast
		hog_stop
		if pl_session_quit && [ "$SRC" = 0 ]; then
			check sched-wait "$CPU"
		else
			pl_fail sched-wait-exit "${PL_ERR:-exit status $SRC}"
		fi
	else
		pl_fail sched-wait "the CPU hog did not start"
	fi
else
	pl_fail sched-wait "$PL_ERR"
fi
hog_stop

# ---- an ST server under load with a CPU hog on its CPU -----------------------------------------
read -r -d '' CHECK <<PYEOF
$COMMON
bcs = [e for e in evs if e["type"] == "BlockingCall"]
sock = [e for e in bcs if e["fd_kind"] == "socket"]
sds = [e for e in evs if e["type"] == "SchedDelay"]
pre = summary["preempted_calls"]
us = [e for e in bcs if e["call"] == "usleep"]
w = worker()
if sock:
    bad(name, "%d BlockingCalls on sockets (%s), want 0: preemption is not blocking"
        % (len(sock), ", ".join("%s %s" % (e["call"], ms(e["duration_ns"])) for e in sock[:5])))
elif w["sched_wait_ns"] is None or w["sched_wait_ns"] <= 0:
    bad(name, "no scheduling delay in the summary: %s" % w["sched_wait_ns"])
else:
    ok(name, "0 of %d BlockingCalls on sockets, %d requests, sched wait %s, cpu %s"
       % (len(bcs), int(args[0]), ms(w["sched_wait_ns"]), ms(w["park_cpu_ns"])))
# the preempted calls are SchedDelays inside a poll of their coroutine, each past the threshold,
# with a run delay no longer than the call; the summary counts them all
errs = []
polls = {}
for e in evs:
    if e["type"] == "PollStart":
        polls[e["tid"]] = e["coroutine"]
    elif e["type"] == "PollEnd":
        polls[e["tid"]] = None
    elif e["type"] == "SchedDelay":
        if polls.get(e["tid"]) != e["coroutine"] or not e["coroutine"]:
            errs.append("SchedDelay of coroutine %s outside its poll" % e["coroutine"])
        if e["duration_ns"] < 50e3:
            errs.append("SchedDelay %s < the 50 us threshold" % ms(e["duration_ns"]))
        if e["sched_wait_ns"] is not None and e["sched_wait_ns"] > e["duration_ns"]:
            errs.append("sched wait %s > duration %s" % (ms(e["sched_wait_ns"]), ms(e["duration_ns"])))
if sum(g["count"] for g in pre) != len(sds):
    errs.append("summary counts %d preempted calls, the trace has %d" % (sum(g["count"] for g in pre), len(sds)))
if errs:
    bad(name + "-preempted", "; ".join(errs[:3]))
else:
    ok(name + "-preempted", "%d SchedDelays (%s), run delay inside them %s" % (len(sds),
       ", ".join("%s %d" % (g["call"], g["count"]) for g in pre),
       ms(sum(e["sched_wait_ns"] or 0 for e in sds))))
if len(us) != 1 or not (29e6 <= us[0]["duration_ns"]):
    bad(name + "-control", "usleep BlockingCalls: %s, want one >= 29 ms"
        % [ms(e["duration_ns"]) for e in us])
else:
    ok(name + "-control", "/block?ms=30 still a BlockingCall (%s)" % ms(us[0]["duration_ns"]))
print("\n".join(out))
PYEOF

# hog_run NAME BINARY [SERVER_ARGS...]: the server pinned with the hog under wrk, then /block.
hog_run() {
	local name=$1 bin=$2 n
	shift 2
	if ! command -v wrk >/dev/null; then
		pl_skip "$name" "wrk is not installed (make deps)"
		return
	fi
	if ! pl_start "$T/$name" "$bin" D9_BLOCKING_THRESHOLD=50us -- "$@"; then
		pl_fail "$name" "$PL_ERR"
		return
	fi
	pin
	if ! hog_start; then
		pl_fail "$name" "the CPU hog did not start"
		return
	fi
	timeout -s KILL 30 wrk -t1 -c16 -d3s "http://127.0.0.1:$SPORT/fast" >"$SDIR/wrk" 2>&1
	n=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$SDIR/wrk")
	pl_get "/block?ms=30"
	hog_stop
	if [ "${n:-0}" -lt 100 ] || [ "$CODE" != 200 ]; then
		pl_fail "$name" "wrk made ${n:-no} requests (want >= 100), /block: $CODE; $(tail -n 3 "$SDIR/wrk" | tr '\n' ' ')"
		pl_session_quit
		return
	fi
	if ! pl_session_quit || [ "$SRC" != 0 ]; then
		pl_fail "$name-exit" "${PL_ERR:-exit status $SRC}"
		return
	fi
	check "$name" "$n"
}

hog_run sched-st-hog "$ST_HTTP"

# SRS's State Threads: built from the pristine archive into build/third_party/, once
srs_build() {
	local tgz dir out=$PL_ROOT/build/third_party
	tgz=$(ls "$PL_ROOT"/../shared/third_party/state-threads-srs-*.tar.gz 2>/dev/null | head -n1)
	[ -z "$tgz" ] && tgz=$(ls /work/shared/third_party/state-threads-srs-*.tar.gz 2>/dev/null | head -n1)
	if [ -z "$tgz" ]; then
		SRS_ERR="no state-threads-srs-*.tar.gz in ../shared/third_party/"
		return 1
	fi
	dir=$out/$(basename "$tgz" .tar.gz)
	SRS_HTTP=$out/st-http-srs
	[ -x "$SRS_HTTP" ] && [ "$SRS_HTTP" -nt "$PL_ROOT/tests/servers/st-http.c" ] && return 0
	mkdir -p "$out" && rm -rf "$dir" && tar -xzf "$tgz" -C "$out" || { SRS_ERR="cannot unpack $tgz"; return 1; }
	if ! make -C "$dir" linux-debug STATIC_ONLY=no >"$out/srs-build.log" 2>&1; then
		SRS_ERR="make linux-debug failed: $(tail -n 2 "$out/srs-build.log" | tr '\n' ' ')"
		return 1
	fi
	local lib
	lib=$(ls -d "$dir"/LINUX_*_DBG 2>/dev/null | head -n1)
	# SRS's ST has no poll event system: -e poll is mapped to its epoll one
	if ! cc -std=gnu11 -D_GNU_SOURCE -DST_EVENTSYS_POLL=ST_EVENTSYS_ALT -O2 -g -fno-omit-frame-pointer \
		-I"$lib" -o "$SRS_HTTP" "$PL_ROOT/tests/servers/st-http.c" -L"$lib" -lst \
		-Wl,-rpath,"$lib" >>"$out/srs-build.log" 2>&1; then
		SRS_ERR="st-http does not build against SRS's ST: $(tail -n 2 "$out/srs-build.log" | tr '\n' ' ')"
		return 1
	fi
}
if srs_build; then
	hog_run sched-srs-hog "$SRS_HTTP" -e alt
else
	pl_skip sched-srs-hog "$SRS_ERR"
fi
