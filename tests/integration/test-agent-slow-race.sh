#!/usr/bin/env bash
# test-agent-slow-race.sh: the writer asks a running thread for its chunk (clears enc.end) at the
# worst instant: just after the recording slow path took a fresh block, before the event is in
# it. build/tests/slow-race stops its thread there with a hardware watchpoint and runs the
# writer's pass in the SIGTRAP handler, once for each of N events (tests/tools/slow-race.c):
#   - flush: a flush pass, which asks every running thread: the event goes round the slow path
#     again and is recorded (it used to vanish without a Dropped record: a Park or Unpark lost).
#   - timed: a timed pass finds the fresh block with the start time of the chunk before it (the
#     block was published before its start time was set), so it asked for it too.
# Both: d9-check finds all N QueueSamples, in order, none dropped. SKIP without a usable
# watchpoint (perf_event_open PERF_TYPE_BREAKPOINT with sigtrap, Linux >= 5.13).
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-slow-race

RACE=$D9_ROOT/build/tests/slow-race
N=200
if [ ! -x "$RACE" ]; then
	d9_fail slow-race "$RACE is not built (make all)"
	exit 0
fi
for mode in flush timed; do
	name=slow-race-$mode
	d=$T/$mode
	{ env D9_TRACE_PATH="$d/trace.bin" timeout -s KILL 60 "$RACE" "$mode" "$N" \
		>"$T/$mode.out" 2>"$T/$mode.err"; } 2>/dev/null
	rc=$?
	if grep -q '"skip"' "$T/$mode.out"; then
		d9_skip "$name" "$(sed -n 's/.*"skip":"\([^"]*\)".*/\1/p' "$T/$mode.out")"
		continue
	fi
	if [ "$rc" != 0 ]; then
		d9_fail "$name" "slow-race exited with status $rc: $(head -c 300 "$T/$mode.err")"
		continue
	fi
	d9_check "$T/$mode.json" --expect-n "$N" --driver "$T/$mode.out" "$d"
	d9_py "$name" '
drv = parent(f[1]); n = int(f[2])
if drv["injected"] != n - 1:
    fail("the writer pass was injected %d times for %d events: the window was not tested"
         % (drv["injected"], n - 1))
events, dropped = accounting(one(f[0]), drv, expect_drops=False)
if events != n:
    fail("%d events in the trace, %d recorded" % (events, n))
info = "%d events, each after the first with a %s pass injected in the slow path (%d traps), none lost" % (
    events, drv["mode"], drv["traps"])
' "$T/$mode.json" "$T/$mode.out" "$N"
done
