#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-agent-idle.sh: an idle agent sleeps. The driver records, its workers park for good, and
# over 2 s the agent's own threads (d9-writer, d9-compress) may use at most 10% of a CPU each: a
# thread that spins uses ~100% (the compressor once waited on a CLOCK_REALTIME condition with
# CLOCK_MONOTONIC deadlines, and every wait returned at once). Not a timing claim: the bound is
# ten times what a sleeping thread uses even on a loaded machine. Also with profiling on, where the
# writer wakes every 10 ms to drain the sample rings. And the threads do nothing while there is
# nothing to do: their wake-ups are counted (voluntary context switches).
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-idle

# task_of PID NAME: the /proc directory of the thread of PID named NAME (nothing if none)
task_of() {
	local f
	for f in /proc/"$1"/task/*; do
		if [ "$(cat "$f/comm" 2>/dev/null)" = "$2" ]; then
			echo "$f"
			return
		fi
	done
}

# wakes PID NAME: voluntary context switches of that thread (each sleep that ended: a timed wait
# running out, or a wake-up)
wakes() {
	local f
	f=$(task_of "$1" "$2")
	[ -n "$f" ] && sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "$f/status"
}

# cpu_ticks PID NAME: utime + stime (clock ticks) of that thread
cpu_ticks() {
	local f
	f=$(task_of "$1" "$2")
	[ -n "$f" ] && sed 's/.*) //' "$f/stat" | awk '{ print $12 + $13 }'
}

# idle NAME MAXWAKES ENV...: MAXWAKES bounds the writer's and the compressor's wake-ups over
# the 2 s (a count, not a time: a loaded machine wakes a sleeping thread no more often), or "-".
# A loaded machine can stretch the 2 s between the readings (sleep returns late): the bounds
# grow with the window actually measured (from before the first reading to after the last).
idle() {
	local name=$1 d=$T/$1 maxw=$2
	shift 2
	d9_bg pid "$T/$name.out" "$T/$name.err" D9_TRACE_PATH="$d/trace.bin" "$@" -- -t 2 -n 1000 --exit hang
	if ! d9_wait_for 20 grep -qs '"role":"parent"' "$T/$name.out" || ! d9_wait_for 10 compgen -G "$d/*.active" >/dev/null; then
		d9_fail "$name" "the driver did not start recording: $(head -c 300 "$T/$name.err")"
		d9_kill "$pid"
		return
	fi
	# start-up work (calibration, first segment) is not idling: from when every thread waits. A
	# thread never asleep in 30 s is the busy thread this test looks for: said, with the states
	if ! d9_wait_for 30 d9_all_asleep "$pid"; then
		d9_fail "$name" "not every thread asleep within $((30 * D9_SLOW)) s: $(for f in /proc/"$pid"/task/*; do
			printf '%s=%s ' "$(cat "$f/comm" 2>/dev/null)" "$(sed 's/.*) //' "$f/stat" 2>/dev/null | cut -d' ' -f1)"
		done)"
		d9_kill "$pid"
		return
	fi
	local hz w0 c0 w1 c1
	hz=$(getconf CLK_TCK)
	w0=$(cpu_ticks "$pid" d9-writer) c0=$(cpu_ticks "$pid" d9-compress)
	local ww0 cw0 ww1 cw1 t0 t1
	t0=$(date +%s%N)
	ww0=$(wakes "$pid" d9-writer) cw0=$(wakes "$pid" d9-compress)
	sleep 2
	w1=$(cpu_ticks "$pid" d9-writer) c1=$(cpu_ticks "$pid" d9-compress)
	ww1=$(wakes "$pid" d9-writer) cw1=$(wakes "$pid" d9-compress)
	t1=$(date +%s%N)
	d9_kill "$pid"
	if [ -z "$w0" ] || [ -z "$w1" ] || [ -z "$c0" ] || [ -z "$c1" ]; then
		d9_fail "$name" "no d9-writer or d9-compress thread found (writer '$w0', compress '$c0')"
		return
	fi
	local wms=$(( (w1 - w0) * 1000 / hz )) cms=$(( (c1 - c0) * 1000 / hz ))
	if [ "$wms" -le 200 ] && [ "$cms" -le 200 ]; then
		d9_pass "$name" "CPU over 2 s idle: d9-writer ${wms} ms, d9-compress ${cms} ms"
	else
		d9_fail "$name" "CPU over 2 s idle: d9-writer ${wms} ms, d9-compress ${cms} ms (at most 200 each)"
	fi
	[ "$maxw" = - ] && return
	local ww=$((ww1 - ww0)) cw=$((cw1 - cw0)) ms=$(((t1 - t0) / 1000000))
	[ "$ms" -lt 2000 ] && ms=2000
	# the bounds per 2 s, scaled to the window (rounded up)
	local mw=$(((${maxw%/*} * ms + 1999) / 2000)) mc=$(((${maxw#*/} * ms + 1999) / 2000))
	if [ "$ww" -le "$mw" ] && [ "$cw" -le "$mc" ]; then
		d9_pass "$name-wakes" "wake-ups over ${ms} ms idle: d9-writer $ww, d9-compress $cw (at most $mw and $mc)"
	else
		d9_fail "$name-wakes" "wake-ups over ${ms} ms idle: d9-writer $ww, d9-compress $cw (at most $mw and $mc)"
	fi
}

# Wake-ups: the writer once per flush interval (20 in 2 s at the default 100 ms; 2 at 1 s), the
# compressor once a second at most; before they slept at most 50 and 100 ms (40 and 20).
idle idle-default 30/5
idle idle-flush-1s 5/5 D9_FLUSH_INTERVAL=1s
idle idle-profiling - D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1
