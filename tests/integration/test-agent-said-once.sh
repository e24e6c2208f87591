#!/usr/bin/env bash
# test-agent-said-once.sh: a line about what narrowed the recording is said once for the whole
# tree of processes the program forks, not once in each: under Apache's prefork each worker (its
# perf events opened as root, then the drop to www-data) said "privileges dropped" and each CGI
# helper it forked per request said "off-CPU samples ... are off" into the server's error log
# (1,460 lines in one run). drop-forks.c waits as root, drops to nobody, then forks 20 children
# that each wait (workers whose perf events open as nobody), with D9_SCHED_EVENTS=1 where
# perf_event_paranoid denies context-switch events to unprivileged users:
#   - said-once: each line is said once in all (before: the off-CPU line by each child, 20), and
#     the trace still records it for every child (a RecorderState sched_events off in each
#     child's segment: 20); the drop's line, said once, names what it takes with D9_SCHED_EVENTS
#     alone: off-CPU samples (it spoke of CPU samples' kernel frames).
#   - said-once-owner: every file in d9-uid-65534 is nobody's, and the agent never found its
#     budget lock file unusable: the parent's writer moved there at the drop's start and made
#     its next segment and the lock file while still root, before the drop took effect (root's
#     files in nobody's directory, which nobody's processes could neither delete nor lock).
#   - said-once-reroot (drop-forks reroot, D9_CPU_PROFILE=99): children of a parent that gave up
#     root as its effective uid only become root again, keep only CAP_SETUID and CAP_SETGID,
#     change group, then user (varnish's compiler processes): the agent says nothing of the
#     trace directory (it said "cannot write traces to .../d9-uid-0 ... tracing is off" and
#     "after a change of groups the trace directory ... d9-uid-0 is not writable"), and each
#     child has its segment.
# Skips (counted, with the reason) unless run as root, where nobody may open those events
# (perf_event_paranoid below 2), or where root cannot either (no perf: a container's filter).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh

NAME=said-once
d9_setup "$NAME"
para=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 2)
if [ "$(id -u)" != 0 ]; then
	d9_skip "$NAME" "needs root (the program drops to nobody)"
	exit 0
elif [ "$para" -lt 2 ]; then
	d9_skip "$NAME" "perf_event_paranoid is $para: nobody may open context-switch events here"
	exit 0
elif perf_off=$(d9_perf_off) && [ -n "$perf_off" ]; then
	# the parent, root, must open them (and say nothing) for the children's refusal to be theirs
	for c in "" -owner -reroot; do d9_skip "$NAME$c" "perf events cannot be opened here: ${perf_off:0:200}"; done
	exit 0
fi
if ! cc -O2 -o "$T/drop-forks" tests/integration/drop-forks.c 2>"$T/cc.err"; then
	d9_fail "$NAME" "cannot build drop-forks.c: $(head -c 300 "$T/cc.err")"
	exit 0
fi
mkdir -m 0700 "$T/trace"
timeout 120 env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" D9_TRACE_PATH="$T/trace/trace.bin" \
	D9_SCHED_EVENTS=1 "$T/drop-forks" 65534 65534 20 >"$T/out" 2>"$T/err"
rc=$?
said=$(grep -c 'off-CPU samples (D9_SCHED_EVENTS) are off' "$T/err")
dropped=$(grep -c 'privileges dropped' "$T/err")
rec=$("$ANALYZE" summary --json "$T/trace" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for p in d.get("processes", []) if any(r.get("feature") == "sched_events" for r in p.get("recorder", []))))' 2>/dev/null)
if [ "$rc" != 0 ]; then
	d9_fail "$NAME" "drop-forks exited $rc: $(grep -v '^d9\[' "$T/err" | head -c 300)"
elif [ "$dropped" = 1 ] && ! grep 'privileges dropped' "$T/err" | grep -q 'no off-CPU samples'; then
	# D9_SCHED_EVENTS alone: the drop takes off-CPU samples, not kernel frames of CPU samples
	d9_fail "$NAME" "the drop's line does not say off-CPU samples: $(grep -m1 'privileges dropped' "$T/err")"
elif [ "$said" = 1 ] && [ "$dropped" -le 1 ] && [ "${rec:-0}" = 20 ]; then
	d9_pass "$NAME" "said once for 20 children; each child's trace records it"
else
	d9_fail "$NAME" "off-CPU line said $said time(s) (expected 1), the drop's $dropped, recorded by ${rec:-0} process(es) of 20: $(head -c 300 "$T/err")"
fi
others=$(find "$T/trace/d9-uid-65534" -mindepth 1 ! -uid 65534 2>/dev/null | head -3)
nfiles=$(find "$T/trace/d9-uid-65534" -mindepth 1 -type f 2>/dev/null | wc -l)
if [ "$rc" != 0 ]; then
	d9_fail "$NAME-owner" "drop-forks exited $rc"
elif [ -z "$others" ] && [ "$nfiles" -ge 21 ] && ! grep -q 'budget lock file' "$T/err"; then
	d9_pass "$NAME-owner" "$nfiles files in d9-uid-65534, all nobody's"
else
	d9_fail "$NAME-owner" "$nfiles files; not nobody's: $others; $(grep -m1 'budget lock file' "$T/err")"
fi
mkdir -m 0700 "$T/trace-reroot"
timeout 120 env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" D9_TRACE_PATH="$T/trace-reroot/trace.bin" \
	D9_CPU_PROFILE=99 "$T/drop-forks" 65534 65534 3 reroot >"$T/rr.out" 2>"$T/rr.err"
rc=$?
nseg=$(find "$T/trace-reroot" -name 'trace.*.bin*' | wc -l)
bad=$(grep -E 'tracing is off|change of groups|d9-uid-0' "$T/rr.err" | head -2)
if [ "$rc" != 0 ]; then
	d9_fail "$NAME-reroot" "drop-forks exited $rc: $(head -c 300 "$T/rr.err")"
elif [ -n "$bad" ] || [ "$nseg" -lt 4 ]; then
	d9_fail "$NAME-reroot" "$nseg segment(s) (want 4); the agent said: $bad"
else
	d9_pass "$NAME-reroot" "$nseg segments, nothing said of the trace directory"
fi
