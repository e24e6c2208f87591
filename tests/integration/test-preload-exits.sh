#!/usr/bin/env bash
# test-preload-exits.sh: every way a process ends seals what it wrote (README, "What the agent does
# to the host"; agent/DESIGN.md, "Exit, signals, fork"). exit-progs.c (compiled here) runs under
# LD_PRELOAD, records parks, then ends: _exit from a signal handler, _Exit, execve (the old image's
# segment sealed before the new image writes its own), a failed exec (recording goes on), exit_group
# from a secondary thread, abort() and SIGSEGV (default actions), SIGTERM sent from outside. Each run must leave only
# sealed segments (no .active), all readable by d9-analyze (exit 0, no truncated segment) with
# every park recorded. Then a fork storm: a fork-per-request parent and N children that each
# wait in epoll_wait twice and exit, every child leaving one sealed segment with this machine's
# boot id (its time against a run without the agent is scripts/bench-exit.sh's); a forked
# child's blocking-call stacks; and a later process of the series finishes the compression
# those exits left pending.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-exits
ulimit -c 0 # the abort and segv runs: no core files

PROG=$T/exit-progs
if ! cc -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -o "$PROG" "$PL_ROOT/tests/integration/exit-progs.c" \
	-lpthread 2>"$T/cc.err"; then
	pl_fail preload-exits "cannot compile exit-progs.c: $(head -c 300 "$T/cc.err")"
	exit 0
fi

# The runs that check sealing wait up to 10 s for the seal (D9_EXIT_TIMEOUT, pl_setup): on a loaded
# machine the writer may not get a CPU within the default 100 ms, and then the segment is left
# .active by design. What the default costs an exit is measured by `make bench`, not here; the
# fork storm runs with the default.
EXIT_WAIT=D9_EXIT_TIMEOUT=10s

# run NAME WANT_RC [VAR=value...] ARGS...: one run in $T/NAME under the agent; sets RC.
run() {
	local name=$1 envs=()
	shift 2
	while [[ "${1:-}" == D9_*=* ]]; do envs+=("$1"); shift; done
	mkdir -p "$T/$name"
	{ env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/$name/trace/trace.bin" "$EXIT_WAIT" "${envs[@]}" \
		timeout -s KILL 60 "$PROG" "$@" >"$T/$name/stdout" 2>"$T/$name/stderr"; } 2>/dev/null
	RC=$?
}

# sealed NAME WANT_RC PARKS [active]: the run's status, only sealed segments, d9-analyze reads
# them all with exit 0 and no truncated segment, and the workers' parks add up to at least PARKS.
# With "active", .active segments (the exit's seal timed out) are allowed when they read whole.
sealed() {
	local name=$1 want=$2 parks=$3 active=${4:-} dir=$T/$1/trace
	if [ "$RC" -ne "$want" ]; then
		pl_fail "$name" "exit status $RC, expected $want: $(head -c 300 "$T/$name/stderr")"
		return
	fi
	if [ -s "$T/$name/stderr" ] && [ -z "$active" ]; then
		pl_fail "$name" "the agent printed: $(head -n 2 "$T/$name/stderr")"
		return
	fi
	local left
	# (trace.lock: the directory budget's lock file, budget.c)
	left=$(ls "$dir" 2>/dev/null | grep -vE "\\.bin(\\.gz)?\$${active:+|\\.active\$}|^trace\\.lock\$" | tr '\n' ' ')
	if [ -n "$left" ]; then
		pl_fail "$name" "files other than sealed segments: $left"
		return
	fi
	if ! "$PL_ANALYZE" summary --json "$dir" >"$T/$name/summary.json" 2>"$T/$name/analyze.err"; then
		pl_fail "$name" "d9-analyze summary failed: $(head -c 300 "$T/$name/analyze.err")"
		return
	fi
	python3 - "$name" "$T/$name/summary.json" "$parks" "$active" <<'PY'
import json, sys
name, path, want, active = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
j = json.load(open(path))
q = j["data_quality"]
parks = sum(w["parks"] for w in j["workers"])
why = []
if q["files"] == 0 or q["readable"] != q["files"]:
    why.append("%d of %d files readable" % (q["readable"], q["files"]))
for k in ("truncated_segments", "corrupt_segments", "corrupt_chunks", "live_segments"):
    if q[k] and not (active and k in ("truncated_segments", "live_segments")):
        why.append("%s %d" % (k, q[k]))
if parks < want:
    why.append("%d parks recorded, expected at least %d" % (parks, want))
if why:
    print("FAIL %s: %s" % (name, "; ".join(why)))
else:
    print("PASS %s: %d segment(s), %d of them .active, %d parks" % (name, q["files"], q["live_segments"], parks))
PY
}

# ---- the ways to end --------------------------------------------------------------------------------
# (each run parks 50 times first; the modes that wait for their end park once more at least)
run exit-sig-_exit 3 sig-_exit
sealed exit-sig-_exit 3 50
run exit-_Exit 4 _Exit
sealed exit-_Exit 4 50
run exit-thread-exit-group 5 thread-exit-group
sealed exit-thread-exit-group 5 70
run exit-abort 134 abort
sealed exit-abort 134 50
run exit-segv 139 segv
sealed exit-segv 139 50

# execve: the old image (50 parks) seals seq 0 before the new one (same pid, 50 parks, _Exit)
# writes its own segment after it
run exit-execve 4 exec "$PROG" _Exit
sealed exit-execve 4 100
segs=$(ls "$T/exit-execve/trace" 2>/dev/null | grep -cE '\.0000(00|01)\.bin(\.gz)?$')
if [ "$RC" = 4 ] && [ "$segs" -lt 2 ]; then
	pl_fail exit-execve-two-images "expected the old image's and the new image's segments: $(ls "$T/exit-execve/trace" | tr '\n' ' ')"
elif [ "$RC" = 4 ]; then
	pl_pass exit-execve-two-images "$segs segments of one pid"
fi

# a failed exec: the segment sealed before it, the agent started again after it (a new segment of
# the same series), every park of both
run exit-exec-fail 6 exec-fail
sealed exit-exec-fail 6 100

# a child forked by a recording thread with profiling on has the agent's threads from the fork;
# unshare(CLONE_NEWUSER) refuses a multi-threaded process, so the agent steps aside around it
run fork-unshare 0 fork-unshare
if [ "$RC" = 8 ] || [ "$RC" = 7 ]; then
	pl_skip fork-unshare "unshare(CLONE_NEWUSER) is not permitted here without the agent (status $RC)"
else
	RC0=$RC
	run fork-unshare-profiled 0 D9_CPU_PROFILE=99 fork-unshare
	[ "$RC0" = 0 ] || pl_fail fork-unshare "exit status $RC0 without profiling"
	# 7: unshare failed in the child (EINVAL: it had threads)
	sealed fork-unshare-profiled 0 70
fi

# setns(fd, 0) ("any type": maybe a user or mount namespace) pauses the agent: it seals and its
# threads end, and it starts again after the call. A worker computing at the pause keeps its
# unwritten events, which the next segment carries (they were counted as dropped as well before);
# those it records while the agent is stopped are counted as dropped, reason other, in its first
# block after the pause (they were neither recorded nor counted before). So the worker's Park and
# Unpark events in the trace and the events its Dropped records count add up to exactly 2 per
# park it made (a pause may cut a pair: its Park traced, its Unpark counted), with no drop of
# another reason.
run setns-pause 0 setns-busy
if [ "$RC" = 9 ]; then
	pl_skip setns-pause "setns into its own net namespace is not permitted here (status $RC)"
else
	sealed setns-pause 0 10
	if [ "$RC" = 0 ]; then
		"$PL_ANALYZE" jsonl "$T/setns-pause/trace" >"$T/setns-pause/events.jsonl" 2>/dev/null
		python3 - "$T/setns-pause/events.jsonl" "$T/setns-pause/trace" "$T/setns-pause/stdout" <<'PY'
import json, os, sys
segs = [n for n in os.listdir(sys.argv[2]) if ".bin" in n]
_, tid, _, parks = open(sys.argv[3]).read().split()
tid, parks = int(tid), int(parks)
traced = {"Park": 0, "Unpark": 0}
dropped, other_reasons = 0, []
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["type"] == "Dropped":
        if e["reason"] != "other":
            other_reasons.append(e)
        elif e["tid"] == tid:
            dropped += e["count"]
    elif e["tid"] == tid and e["type"] in traced:
        traced[e["type"]] += 1
got = traced["Park"] + traced["Unpark"] + dropped
if len(segs) < 6:
    print("FAIL setns-pause-accounted: %d segments, expected one sealed at each of the 5 pauses and the last" % len(segs))
elif other_reasons:
    print("FAIL setns-pause-accounted: drops of other reasons than a pause: %s" % other_reasons[:3])
elif got != 2 * parks:
    print("FAIL setns-pause-accounted: the worker parked %d times (%d events); the trace has %d Parks, %d Unparks and %d events counted as dropped" % (parks, 2 * parks, traced["Park"], traced["Unpark"], dropped))
else:
    print("PASS setns-pause-accounted: %d segments; the worker's %d parks: %d Parks and %d Unparks in the trace, %d events counted as dropped while paused" % (len(segs), parks, traced["Park"], traced["Unpark"], dropped))
PY
	fi
fi

# SIGTERM sent while parked (no handler of the program's own)
mkdir -p "$T/exit-sigterm"
env "${D9_DEFSIG[@]}" LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/exit-sigterm/trace/trace.bin" "$EXIT_WAIT" \
	"$PROG" wait-term >"$T/exit-sigterm/stdout" 2>"$T/exit-sigterm/stderr" &
SPID=$!
PL_PIDS+=("$SPID")
if d9_wait_for 30 compgen -G "$T/exit-sigterm/trace/*.active" >/dev/null; then
	kill -TERM "$SPID"
	pl_wait_exit 20
	RC=$SRC
	sealed exit-sigterm 143 50
else
	pl_fail exit-sigterm "no segment within $((30 * D9_SLOW)) s: $(head -c 300 "$T/exit-sigterm/stderr")"
fi

# ---- a forked child's blocking-call stacks ---------------------------------------------------------
# The parent's pool of blocking-call stack slots is unmapped in a child, not walked (profile.c,
# bs_child): the child maps its own at its first slow call. exit-progs fork-block: a 20 ms usleep
# in parent_block, a fork, a 20 ms usleep in the child's child_block (injected blocking calls,
# 20 times D9_BLOCKING_THRESHOLD, set here; nothing waits on them); each process's BlockingCall
# has its own function on its stack.
sd=$T/fork-block/trace
mkdir -p "$T/fork-block"
if ! { env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$sd/trace.bin" "$EXIT_WAIT" D9_BLOCKING_THRESHOLD=1ms \
	timeout -s KILL 60 "$PROG" fork-block >"$T/fork-block/out" 2>"$T/fork-block/err"; } 2>/dev/null; then
	pl_fail fork-child-blocking-stack "exit-progs fork-block failed: $(head -c 300 "$T/fork-block/err")"
else
	"$PL_ANALYZE" jsonl "$sd" >"$T/fork-block/events.jsonl" 2>"$T/fork-block/analyze.err"
	why=$(python3 - "$T/fork-block/events.jsonl" <<'PY3'
import json, sys
calls = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "BlockingCall" and
         e["call"] == "usleep"]
by = {}
for e in calls:
    fn = next((f.split()[0] for f in e.get("stack") or [] if f.split()[0] in ("parent_block", "child_block")), None)
    by.setdefault(fn, set()).add(e["pid"])
if len(by.get("parent_block", ())) != 1 or len(by.get("child_block", ())) != 1 or \
        by["parent_block"] == by["child_block"]:
    print("usleep BlockingCalls by function and pid: %s" % {k: sorted(v) for k, v in by.items()})
PY3
)
	if [ -n "$why" ]; then
		pl_fail fork-child-blocking-stack "$why"
	else
		pl_pass fork-child-blocking-stack "parent_block in the parent's usleep, child_block in the child's"
	fi
fi

# ---- fork storm -----------------------------------------------------------------------------------
# One storm with the agent: N children, each leaving its sealed segment, and no hang (the storm is
# killed after 300 s). What the storm costs in time (without the agent against with it, with the
# default D9_EXIT_TIMEOUT) is a timing claim: scripts/bench-exit.sh measures it in `make bench`,
# never a test. Here the exits wait for their seal as long as the other sealing runs ($EXIT_WAIT):
# with the default 100 ms a child whose writer got no CPU in time on a loaded machine leaves its
# segment .active, or .active.tmp when its head was not written yet (by design; a later process
# of the series recovers it), which says nothing about the storm.
N=${STORM_N:-500} # children per storm (pl_setup clears D9_*)
sd=$T/storm/trace
mkdir -p "$T/storm"
# D9_MAX_FILES above the storm's 501 segments: the budget's bounds are test-agent-budget's
if ! { env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$sd/trace.bin" "$EXIT_WAIT" D9_MAX_FILES=2000 \
	timeout -s KILL 300 "$PROG" storm "$N" >"$T/storm/agent2" 2>"$T/storm/agent2.err"; } 2>/dev/null; then
	pl_fail fork-storm "the storm failed: $(head -c 300 "$T/storm/agent2.err")"
else
	# the storm's series: the parent's and one per child, each readable with every park (the
	# directory is read as the exits left it: what compression is pending is the next test's)
	RC=0
	mkdir -p "$T/storm-last" && mv "$sd" "$T/storm-last/trace"
	cp "$T/storm/agent2.err" "$T/storm-last/stderr"
	sealed storm-last 0 $((2 * N + N)) active
	n=$(ls "$T/storm-last/trace" | grep -cE '\.(bin|bin\.gz|active)$')
	if [ "$n" -eq $((N + 1)) ]; then
		pl_pass fork-storm-segments "$n segments: the parent's and one per child"
	else
		pl_fail fork-storm-segments "$n segments, expected $((N + 1))"
	fi
	# a forked child keeps its parent's boot id (writer.c, process_info: not read again)
	boot=$(cat /proc/sys/kernel/random/boot_id)
	bad=0 seen=0
	for f in $(ls "$T/storm-last/trace" | grep -E '\.(bin|bin\.gz|active)$' | head -n 25); do
		seen=$((seen + 1))
		"$PL_ANALYZE" dump "$T/storm-last/trace/$f" 2>/dev/null | grep -m1 '"rec":"header"' |
			grep -qF "\"boot_id\":\"$boot\"" || bad=$((bad + 1))
	done
	if [ "$seen" -gt 0 ] && [ "$bad" -eq 0 ]; then
		pl_pass fork-storm-boot-id "$seen segments (the parent's and children's) carry boot id $boot"
	else
		pl_fail fork-storm-boot-id "$bad of $seen segments lack this machine's boot id $boot"
	fi
fi

# ---- a child's exit segment takes no blocks ahead ------------------------------------------------
# A segment opened in the exit's own last pass, on a file system with room for all of it, is
# written without fallocate and sealed without ftruncate (agent/writer.c, "no_reserve"): 10
# children under strace -f, whose processes are told apart by the clone calls that made them
# (fork: no CLONE_THREAD). D9_FLUSH_INTERVAL=60s: a child that lived past one writer pass
# (strace on a loaded machine) would have its segment opened in a periodic pass, which takes
# blocks ahead as it should (test-agent-diskfull's prealloc cases); the case here is the segment
# the exit's last pass opens (the parent's too, in this run).
# The same run, child-fd-table-grown: each child's fork handler, while it is the child's only
# thread, grows the descriptor table to the agent's high numbers (agent/files.c,
# d9__fd_table_grow: an eventfd moved up and closed), so its first high descriptor comes
# before the clone3 that starts its writer; grown later, with two threads sharing the table,
# the kernel first waits for an RCU grace period (milliseconds).
if ! command -v strace >/dev/null; then
	pl_skip exit-segment-no-blocks-ahead "strace is not installed (make deps)"
	pl_skip child-fd-table-grown "strace is not installed (make deps)"
else
	sd=$T/storm-strace/trace
	mkdir -p "$T/storm-strace"
	{ env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$sd/trace.bin" D9_FLUSH_INTERVAL=60s "$EXIT_WAIT" timeout -s KILL 120 \
		strace -f -qq -o "$T/storm-strace/strace" -e trace=clone,clone3,fork,vfork,fallocate,ftruncate,fcntl \
		"$PROG" storm 10 >"$T/storm-strace/out" 2>"$T/storm-strace/err"; } 2>/dev/null
	RC=$?
	res=$(python3 - "$T/storm-strace/strace" "$(ls "$sd" 2>/dev/null | grep -c '\.bin$')" <<'PY2'
import re, sys
# strace -f interleaves threads: a call another thread interrupts is split into
# "<unfinished ...>" and "<... NAME resumed>" lines, and a new thread's first call can come
# before the line that says which clone made it; so the calls are joined first, then the
# processes are known from every clone's result, and only then are the calls attributed.
calls_in_order, pending = [], {}
for line in open(sys.argv[1]):
    m = re.match(r"(\d+)\s+(.*)$", line.rstrip("\n"))
    if not m:
        continue
    tid, body = int(m.group(1)), m.group(2)
    if body.endswith("<unfinished ...>"):
        pending[tid] = body[:-len("<unfinished ...>")]
        continue
    r = re.match(r"<\.\.\. \w+ resumed>(.*)$", body)
    if r:
        body = pending.pop(tid, "") + r.group(1)
    m = re.match(r"(\w+)\((.*)$", body)
    if m:
        res = re.search(r"= (\d+)$", body.strip())
        calls_in_order.append((tid, m.group(1), m.group(2), int(res.group(1)) if res else None))
made_by = {}  # tid -> (creator tid, is a thread)
for tid, name, rest, res in calls_in_order:
    if name in ("clone", "clone3", "fork", "vfork") and res:
        made_by[res] = (tid, "CLONE_THREAD" in rest)
def proc(t):
    while t in made_by and made_by[t][1]:
        t = made_by[t][0]
    return t
tids = {t for t, _, _, _ in calls_in_order} | set(made_by)
roots = [t for t in tids if t not in made_by]
first = roots[0] if len(roots) == 1 else None
kids = {t for t, (c, thread) in made_by.items() if not thread and proc(c) == first}
calls, order = {}, {}
for tid, name, rest, res in calls_in_order:
    p = proc(tid)
    if name in ("fallocate", "ftruncate"):
        calls.setdefault(p, []).append(name)
    if p in kids and p not in order:
        # a child's first high descriptor, or its first thread start, whichever comes first
        if name == "fcntl" and "F_DUPFD_CLOEXEC" in rest and res is not None and res >= 64:
            order[p] = "dup-first" if tid == p else "dup-by-thread"
        elif name == "clone3":
            order[p] = "thread-first"
bad = {p: c for p, c in calls.items() if p in kids}
late = len([p for p, o in order.items() if o != "dup-first"]) + len(kids) - len(order)
print("%d %d %d %s %d" % (len(kids), len(bad), len(calls.get(first, [])), int(sys.argv[2]), late))
PY2
)
	read -r kids bad parent nbin late <<<"$res"
	if [ "$RC" -ne 0 ] || [ "${kids:-0}" -ne 10 ] || [ "${nbin:-0}" -ne 11 ]; then
		pl_fail exit-segment-no-blocks-ahead "exit status $RC, ${kids:-?} children seen, ${nbin:-?} sealed segments (want 10, 11): $(head -c 300 "$T/storm-strace/err")"
	elif [ "$bad" -ne 0 ]; then
		pl_fail exit-segment-no-blocks-ahead "$bad of 10 children called fallocate or ftruncate for their exit segment: $(grep -E 'fallocate|ftruncate' "$T/storm-strace/strace" | head -n 3 | tr '\n' ' ')"
	else
		pl_pass exit-segment-no-blocks-ahead "10 children sealed their segments with no fallocate or ftruncate (the parent: $parent calls)"
	fi
	if [ "$RC" -ne 0 ] || [ "${kids:-0}" -ne 10 ]; then
		pl_fail child-fd-table-grown "exit status $RC, ${kids:-?} children seen (want 10)"
	elif [ "$late" -ne 0 ]; then
		pl_fail child-fd-table-grown "$late of 10 children started a thread before their first high descriptor: $(grep -E 'DUPFD|clone3' "$T/storm-strace/strace" | head -n 4 | tr '\n' ' ')"
	else
		pl_pass child-fd-table-grown "in all 10 children the fork handler's high descriptor came before the writer's clone3"
	fi
fi

# ---- the descriptor table grown at the start -----------------------------------------------------
# The constructor grows the table to the agent's high numbers while the program has one thread
# (agent/lifecycle.c, d9__fd_table_grow). Grown later, by a worker's first schedstat file or the
# writer's segment, the kernel waits for an RCU grace period, and so does every thread that
# takes a number meanwhile: on a machine with two CPU hogs, st-http's first wake waited 12 ms in
# that fcntl and d9-analyze check called it a burst (agent/COST.md section 31). grep reads its
# own FDSize (the kernel's table size) before the agent has started a thread or opened a file;
# under a limit of 1024 the agent's numbers start at 960, so the table must hold 1,024.
if [ "$(ulimit -H -n)" != unlimited ] && [ "$(ulimit -H -n)" -lt 1024 ]; then
	pl_skip start-fd-table-grown "the hard descriptor limit is under 1024 ($(ulimit -H -n))"
else
	mkdir -p "$T/fdsize"
	got=$( (ulimit -S -n 1024 && env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/fdsize/trace.bin" \
		grep FDSize /proc/self/status) 2>"$T/fdsize/err" | awk '{print $2}')
	plain=$( (ulimit -S -n 1024 && grep FDSize /proc/self/status) 2>/dev/null | awk '{print $2}')
	if [ "${got:-0}" -ge 1024 ]; then
		pl_pass start-fd-table-grown "FDSize $got at the program's start (${plain:-?} without the agent)"
	else
		pl_fail start-fd-table-grown "FDSize ${got:-?} at the program's start, want 1024 or more: $(head -c 300 "$T/fdsize/err")"
	fi
fi

# ---- pending compression is finished by the next process of the series ------------------------
# The storm's exits left their segments .bin (an exit waits for no compression). A later process
# of the same series (D9_COMPRESS=1), alive long enough, compresses them all (its compressor adopts the .bin
# files of dead processes); then SIGTERM ends it. 30 of the storm's segments (symbolizing and
# compressing all 500 at nice 19 would load the machine for minutes).
d=$T/adopt/trace
if [ -d "$T/storm-last/trace" ]; then
	mkdir -p "$d"
	find "$T/storm-last/trace" -name '*.bin' | head -n 30 | xargs -r cp -t "$d"
fi
if [ -d "$d" ] && [ -n "$(ls "$d")" ]; then
	env "${D9_DEFSIG[@]}" LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d/trace.bin" D9_COMPRESS=1 "$PROG" wait-term \
		>"$T/adopt.out" 2>"$T/adopt.err" &
	SPID=$!
	PL_PIDS+=("$SPID")
	# settled: no temporary file, and no .bin but the live process's own .active
	if d9_wait_for 240 eval '[ -z "$(ls "$d" | grep -E "\.bin$|\.tmp-")" ]'; then
		pl_pass pending-compression-adopted "$(ls "$d" | grep -c '\.bin\.gz$') segments compressed by the next process"
	else
		pl_fail pending-compression-adopted "still .bin after $((240 * D9_SLOW)) s: $(ls "$d" | grep -cE '\.bin$') files"
	fi
	kill -TERM "$SPID"
	pl_wait_exit 20
fi
exit 0
