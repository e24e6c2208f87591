#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-agent-flush.sh: data reaches the .active file while the process still runs (the writer
# flushes every D9_FLUSH_INTERVAL, default 100ms): from parked threads (the writer takes their
# chunk), from threads that keep recording (they hand their chunk off at their next event) and
# from threads that exit (their chunk is handed off at exit). Each case polls the .active file
# with d9-check until every event is there, with a deadline far above the interval (no timing
# claim: a late flush fails only when it is seconds late).
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-flush

DEADLINE=5 # seconds; the flush interval is 100ms

# all_there CHECK_OUT DIR ARGS...: true once d9-check accounts for every event in DIR.
all_there() {
	local out=$1 dir=$2
	shift 2
	compgen -G "$dir/*.active" >/dev/null || return 1
	d9_check "$out" "$@" "$dir"
}

# ---- parked threads: 3 threads record 2000 events, park (d9_rec_park) and sleep forever ------------
d=$T/parked
d9_bg pid "$T/parked.out" "$T/parked.err" D9_TRACE_PATH="$d/trace.bin" -- -t 3 -n 2000 --exit hang
if ! d9_wait_for 20 grep -qs '"role":"parent"' "$T/parked.out"; then
	d9_fail flush-parked "the driver did not finish recording: $(head -c 300 "$T/parked.err")"
else
	start=$(date +%s%N)
	if d9_wait_for $DEADLINE all_there "$T/parked.json" "$d" --expect-n 2000 --tail-extra 1 \
		--driver "$T/parked.out"; then
		ms=$(( ($(date +%s%N) - start) / 1000000 ))
		d9_py flush-parked '
c = one(f[0]); drv = parent(f[1])
accounting(c, drv, expect_drops=False)
if c["sealed"] or c["active"] != 1:
    fail("expected one unsealed .active segment, got %d files, %d sealed" % (c["files"], c["sealed"]))
want = "trace.%d.000000.active" % drv["pid"]
if files(f[3]) != [want]:
    fail("files %s, expected %s" % (files(f[3]), want))
info = "all events in %s %s ms after recording ended" % (want, f[2])
' "$T/parked.json" "$T/parked.out" "$ms" "$d"
	else
		d9_check "$T/parked.json" --expect-n 2000 --tail-extra 1 --driver "$T/parked.out" "$d"
		d9_fail flush-parked "after ${DEADLINE}s the .active file still lacks events of parked threads: $(head -c 400 "$T/parked.json")"
	fi
fi
d9_kill "$pid"

# ---- running threads that keep recording: one event every 2 ms, never parked -----------------------
# A 64 KiB chunk holds ~20000 QueueSamples, 40 s of this thread's events: anything in the file
# within seconds was handed off because the writer asked for it.
d=$T/running
d9_bg pid "$T/running.out" "$T/running.err" D9_TRACE_PATH="$d/trace.bin" -- \
	-t 2 -n 100000 --sleep-us 2000 --exit hang
some_events() {
	compgen -G "$d/*.active" >/dev/null || return 1
	d9_check "$T/running.json" --no-worker-check "$d"
	python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
tids = [s for p in c["pids"].values() for s in p["tids"].values()]
sys.exit(0 if len(tids) == 2 and all(s["received"] >= 20 for s in tids) else 1)' "$T/running.json"
}
start=$(date +%s%N)
if d9_wait_for $DEADLINE some_events; then
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	d9_py flush-running '
c = one(f[0])
if not c["ok"]:
    fail("d9-check: %s" % c["error_list"][:3])
tids = [s for p in c["pids"].values() for s in p["tids"].values()]
if any(s["missing"] or s["out_of_order"] or s["first_seq"] != 1 for s in tids):
    fail("streams of running threads are not complete prefixes: %s" % tids)
info = "threads recording every 2 ms reached the file within %s ms of start" % f[1]
' "$T/running.json" "$ms"
else
	d9_fail flush-running "after ${DEADLINE}s no data of the recording threads in the .active file: $(ls -l "$d" 2>&1 | tail -n 3)"
fi
d9_kill "$pid"

# ---- threads that exit: 4 threads record and exit; the process lives on (main sleeps) ------------
d=$T/exited
d9_bg pid "$T/exited.out" "$T/exited.err" D9_TRACE_PATH="$d/trace.bin" -- -t 4 -n 5000 --exit join-hang
if ! d9_wait_for 20 grep -qs '"role":"parent"' "$T/exited.out"; then
	d9_fail flush-thread-exit "the driver did not finish recording: $(head -c 300 "$T/exited.err")"
elif d9_wait_for $DEADLINE all_there "$T/exited.json" "$d" --expect-n 5000 --driver "$T/exited.out"; then
	d9_py flush-thread-exit '
c = one(f[0]); drv = parent(f[1])
accounting(c, drv, expect_drops=False)
' "$T/exited.json" "$T/exited.out"
else
	d9_check "$T/exited.json" --expect-n 5000 --driver "$T/exited.out" "$d"
	d9_fail flush-thread-exit "after ${DEADLINE}s events of exited threads are missing: $(head -c 400 "$T/exited.json")"
fi
d9_kill "$pid"

# ---- D9_FLUSH_INTERVAL is honoured: 2s between flushes ---------------------------------------------
# Parked threads' data must arrive (within interval + deadline), and a first look after 0.3 s is
# reported for information only.
d=$T/interval
d9_bg pid "$T/interval.out" "$T/interval.err" D9_TRACE_PATH="$d/trace.bin" D9_FLUSH_INTERVAL=2s -- \
	-t 2 -n 1000 --exit hang
if ! d9_wait_for 20 grep -qs '"role":"parent"' "$T/interval.out"; then
	d9_fail flush-interval-2s "the driver did not finish recording: $(head -c 300 "$T/interval.err")"
elif d9_wait_for $((DEADLINE + 2)) all_there "$T/interval.json" "$d" --expect-n 1000 --tail-extra 1 \
	--driver "$T/interval.out"; then
	d9_py flush-interval-2s 'accounting(one(f[0]), parent(f[1]), expect_drops=False)' \
		"$T/interval.json" "$T/interval.out"
else
	d9_fail flush-interval-2s "after $((DEADLINE + 2))s parked threads' events are not in the file"
fi
[ -s "$T/interval.err" ] && d9_fail flush-interval-2s-stderr "the agent printed: $(head -n 2 "$T/interval.err")"
d9_kill "$pid"
exit 0
