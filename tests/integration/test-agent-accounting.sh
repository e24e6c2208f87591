#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-agent-accounting.sh: exact event accounting of the recording core under real load.
# d9-driver threads record QueueSample(seq), seq = 1..N; d9-check follows each thread's stream
# and requires every event to be in the trace or counted by a Dropped record, in order, in
# chunks that carry the thread's tid and worker id. Covers: millions of events from 4 threads
# without drops; drops forced by D9_MAX_MEMORY=1M and a starved writer (with and without parks,
# and with the poll/wake mix); drops of a thread that exits while every buffer is taken.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-accounting

# ---- 4 threads x 1M events, 160 MiB of buffers: no drop at all --------------------------------
# 4M QueueSamples are ~10 MB encoded but 96 MB as the threads' raw records (3 words each), over
# the default 64M cap: with it, no drop depended on the writer keeping up (it did not, twice, on
# a loaded machine). D9_MAX_MEMORY=160M holds them all, so nothing may be dropped whatever the
# scheduling. Parks every 10000 events exercise the writer's chunk stealing.
N=1000000
d=$T/nodrop
d9_run "$T/nodrop.out" "$T/nodrop.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_MEMORY=160M -- \
	-t 4 -n $N --park-every 10000 --sleep-us 50
rc=$?
d9_check "$T/nodrop.json" --expect-n $N --park-every 10000 --driver "$T/nodrop.out" "$d"
if [ "$rc" -ne 0 ]; then
	d9_fail accounting-no-drops "driver exited $rc: $(head -c 300 "$T/nodrop.err")"
else
	d9_py accounting-no-drops '
c = one(f[0]); drv = parent(f[1])
ev, dr = accounting(c, drv, expect_drops=False)
if ev != 4 * (1000000 + 200):
    fail("%d events in the trace, expected 4 x (1M QueueSample + 200 Park/Unpark)" % ev)
if c["sealed"] != c["files"] or c["active"]:
    fail("%d of %d segments sealed, %d .active left" % (c["sealed"], c["files"], c["active"]))
info = "%d events, %d segments" % (ev, c["files"])
' "$T/nodrop.json" "$T/nodrop.out"
	d9_py per-thread-order '
c = one(f[0]); drv = parent(f[1])
tids = c["pids"][str(drv["pid"])]["tids"]
for t in drv["threads"]:
    s = tids[str(t["tid"])]
    if (s["first_seq"], s["last_seq"], s["received"], s["out_of_order"]) != (1, 1000000, 1000000, 0):
        fail("tid %d: seqs %d..%d, %d received, %d out of order" % (t["tid"], s["first_seq"],
             s["last_seq"], s["received"], s["out_of_order"]))
    if s["max_backstep_ns"] > 0:
        fail("tid %d: event time steps back by %d ns" % (t["tid"], s["max_backstep_ns"]))
' "$T/nodrop.json" "$T/nodrop.out"
	d9_py worker-ids '
c = one(f[0]); drv = parent(f[1])
got = sorted(t["worker"] for t in drv["threads"])
if got != [1, 2, 3, 4]:
    fail("d9_agent_become_worker returned %s, expected 1..4" % got)
tids = c["pids"][str(drv["pid"])]["tids"]
for t in drv["threads"]:
    if tids[str(t["tid"])]["worker"] != t["worker"]:
        fail("tid %d: chunks carry worker %d, expected %d" % (t["tid"], tids[str(t["tid"])]["worker"], t["worker"]))
' "$T/nodrop.json" "$T/nodrop.out"
fi
[ -s "$T/nodrop.err" ] && d9_fail accounting-no-drops-stderr "the agent printed: $(head -n 3 "$T/nodrop.err")"

# ---- drops: 1 MiB of buffers (16 chunks) and a writer that hardly gets the CPU -------------------
# --slow-writer pins every thread to one CPU this process may use and runs the writer at nice 19:
# 4 threads recording flat out fill 16 blocks long before the writer drains them, so drops are
# certain, and the accounting must stay exact: each gap covered by the Dropped(buffers_full) that
# opens the next chunk, and drops pending when a thread exits recorded before its exit. Parks
# (recorded without sleeping) and the --mix events lost inside a gap count too. Where the driver
# could not pin or renice (its pin_error: a cpuset, a container) and nothing was dropped, the run
# tested no drop: SKIP.
run_drops() { # name, extra checker args, driver args...
	local name=$1 cargs=$2
	shift 2
	local d=$T/$name
	d9_run "$T/$name.out" "$T/$name.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_MEMORY=1M -- "$@"
	local rc=$?
	# shellcheck disable=SC2086
	d9_check "$T/$name.json" --driver "$T/$name.out" $cargs "$d"
	if [ "$rc" -ne 0 ]; then
		d9_fail "$name" "driver exited $rc: $(head -c 300 "$T/$name.err")"
		return
	fi
	d9_py "$name" '
c = one(f[0]); drv = parent(f[1])
ev, dr = accounting(c, drv)
if not dr and drv.get("pin_error"):
    skip("no event dropped, and the writer was not starved: %s" % drv["pin_error"])
if not dr:
    fail("pid %s: no event was dropped (writer_starved %s), so this run did not test drop accounting"
         % (drv["pid"], drv.get("writer_starved")))
reasons = c["drop_reasons"]
if set(reasons) != {"buffers_full"}:
    fail("drop reasons %s, expected only buffers_full" % reasons)
info = "%d events kept, %d dropped, all accounted" % (ev, dr)
' "$T/$name.json" "$T/$name.out"
}

run_drops accounting-drops-burst "--expect-n 1000000" -t 4 -n 1000000 --burst --slow-writer
run_drops accounting-drops-parked "--expect-n 500000 --park-every 100" \
	-t 4 -n 500000 --park-every 100 --burst --slow-writer
run_drops accounting-drops-mix "--expect-n 200000 --park-every 8 --mix" \
	-t 4 -n 200000 --mix --park-every 8 --burst --slow-writer

# holders_run NAME CHECK_ARGS DRIVER_ARGS...: the driver with 1 MiB of buffers, then d9-check;
# returns 1 (after FAIL NAME) when the driver failed, so the caller checks the rest.
holders_run() {
	local name=$1 cargs=$2
	shift 2
	d9_run "$T/$name.out" "$T/$name.err" D9_TRACE_PATH="$T/$name/trace.bin" D9_MAX_MEMORY=1M -- "$@"
	local rc=$?
	# shellcheck disable=SC2086
	d9_check "$T/$name.json" $cargs --driver "$T/$name.out" "$T/$name"
	if [ "$rc" -ne 0 ]; then
		d9_fail "$name" "driver exited $rc: $(head -c 300 "$T/$name.err")"
		return 1
	fi
}

# ---- a thread that exits while every buffer is taken -----------------------------------------------
# 16 holder threads each keep one of the 16 blocks (one event, then running without recording);
# 2 more threads record 1000 events each, all dropped, and exit while the pool is still empty.
# Their 2000 dropped events must still be counted somewhere in the trace (a Dropped record);
# the holders then record the rest of their seqs and exit normally.
if holders_run accounting-drops-at-thread-exit "--expect-n 1000" -t 18 --holders 16 -n 1000; then
	d9_py accounting-drops-at-thread-exit '
c = one(f[0]); drv = parent(f[1])
ev, dr = accounting(c, drv)
if dr != 2000:
    fail("%d drops recorded, expected 2000 (2 threads x 1000 events with no free buffer)" % dr)
' "$T/accounting-drops-at-thread-exit.json" "$T/accounting-drops-at-thread-exit.out"
fi

# ---- a process that exits while threads are starved ----------------------------------------------
# The same 16 holders keep every block, running; 2 more threads record 1000 events each (all
# dropped) and stay alive, running; then main records 1000 events of its own (all dropped) and
# calls exit(). Nothing is left to carry the counts but the exit: main's 1000 (its own seal), the
# other two's 2000 (the writer's last pass), each holder's one unwritten event (reason other).
if holders_run accounting-drops-at-exit-starved "" -t 18 --holders 16 -n 1000 --exit exit-starved; then
	d9_py accounting-drops-at-exit-starved '
c = one(f[0]); drv = parent(f[1])
ev, dr = accounting(c, drv)
reasons = c["drop_reasons"]
if reasons.get("buffers_full") != 3000 or reasons.get("other") != 16:
    fail("drops by reason %s, expected buffers_full 3000 (3 starved threads x 1000), other 16 "
         "(one unwritten event per holder)" % reasons)
info = "%d dropped, %s" % (dr, reasons)
' "$T/accounting-drops-at-exit-starved.json" "$T/accounting-drops-at-exit-starved.out"
fi
# ---- a thread that exits with events refused during a pause ---------------------------------------
# Around unshare/setns the agent stops; an event a thread cannot record meanwhile is counted in
# the thread's dropped_paused and written as a Dropped record (reason other) in its first block
# after the pause (test-preload-exits.sh setns-pause-accounted). A thread that exits before it
# takes that block hands the count over with its exit. --paused-drops 7 puts 7 in each thread's
# count after its last event, as a pause ending just then would: the trace must count 2 x 7.
d=$T/paused-exit
d9_run "$T/paused-exit.out" "$T/paused-exit.err" D9_TRACE_PATH="$d/trace.bin" -- \
	-t 2 -n 1000 --paused-drops 7
rc=$?
d9_check "$T/paused-exit.json" --expect-n 1000 --driver "$T/paused-exit.out" "$d"
if [ "$rc" -ne 0 ]; then
	d9_fail paused-drops-at-thread-exit "driver exited $rc: $(head -c 300 "$T/paused-exit.err")"
else
	d9_py paused-drops-at-thread-exit '
c = one(f[0])
reasons = c["drop_reasons"]
if reasons != {"other": 14}:
    fail("drops by reason %s, expected other 14 (2 threads x 7 counted at their exit)" % reasons)
info = "drops by reason %s" % reasons
' "$T/paused-exit.json" "$T/paused-exit.out"
fi
exit 0
