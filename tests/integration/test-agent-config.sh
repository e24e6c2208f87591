#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-agent-config.sh: the D9_* variables. A bad value of any variable prints exactly one stderr
# line naming the variable, its value and (for numbers: spaces, signs, overflow, units) what is
# wrong with it, the agent stays off (nothing written, not even the directory) and the
# program runs on and exits 0; valid spellings are accepted silently. An unwritable trace
# directory: one line, exit 0. D9_ENABLED=0 writes nothing; D9_TOGGLE_SIGNAL switches recording
# at run time and only what was recorded while on is in the trace. Files are created 0600 and
# missing directories 0700 whatever the umask. D9_CLOCK=monotonic and tsc both give event times
# that fall inside the run, on CLOCK_MONOTONIC and CLOCK_REALTIME.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-config

# ---- bad values --------------------------------------------------------------------------------------
# bad_value VAR VALUE [WHY]: the driver runs with VAR=VALUE and a trace path in a fresh directory;
# the line must also contain WHY (what is wrong with the value) when given.
n=0
bad_value() {
	local var=$1 val=$2 why=${3:-} dir=$T/bad-$n path
	n=$((n + 1))
	path=$dir/trace.bin
	[ "$var" = D9_TRACE_PATH ] && path=$val
	d9_run "$T/bad.out" "$T/bad.err" D9_TRACE_PATH="$path" "$var=$val" -- -t 2 -n 1000 --park-every 100
	local rc=$? lines
	lines=$(wc -l <"$T/bad.err")
	local name="bad-value/$var=${val:0:40}"
	if [ "$rc" -ne 0 ]; then
		d9_fail "$name" "exit status $rc: $(head -c 200 "$T/bad.err")"
	elif [ "$lines" -ne 1 ]; then
		d9_fail "$name" "$lines stderr lines, expected exactly 1: $(head -n 3 "$T/bad.err" | tr '\n' '|')"
	elif ! grep -qF "$var=\"${val:0:200}" "$T/bad.err"; then # a line is cut at 512 bytes
		d9_fail "$name" "the line does not name $var and the value: $(cat "$T/bad.err")"
	elif [ -n "$why" ] && ! grep -qF ": $why; expected " "$T/bad.err"; then
		d9_fail "$name" "the line does not say '$why': $(cat "$T/bad.err")"
	elif [ -e "$dir" ] || { [ "$var" = D9_TRACE_PATH ] && [ -e "$T/badpath" ]; }; then
		d9_fail "$name" "the agent wrote to disk: $(ls -R "$dir" "$T/badpath" 2>/dev/null | head -n 5 | tr '\n' ' ')"
	elif ! grep -q '"active":0' "$T/bad.out" || ! grep -q '"worker":0' "$T/bad.out"; then
		d9_fail "$name" "the agent is not off: $(head -c 300 "$T/bad.out")"
	else
		d9_pass "$name"
	fi
}

long=$(printf 'a%.0s' $(seq 1 2000))
bad_value D9_TRACE_PATH "$T/badpath/"
bad_value D9_TRACE_PATH "$T/badpath/$long/trace.bin"
for v in 512K 0 abc 10X -5M 1.5M 64MBB; do bad_value D9_MAX_FILE_SIZE "$v"; done
for v in 1M lots 99999999999999999999G; do bad_value D9_MAX_TOTAL_SIZE "$v"; done
for v in 0 3 1000001 1K many -5; do bad_value D9_MAX_FILES "$v"; done
for v in 500ms 10 1d -1s 2x; do bad_value D9_ROTATION_PERIOD "$v"; done
for v in 2 maybe -1; do bad_value D9_COMPRESS "$v"; done
for v in 2 "yes please" enabled; do bad_value D9_ENABLED "$v"; done
for v in KILL USR3 9 RTMIN+99 RTMIN+x RTMIN+3x; do bad_value D9_TOGGLE_SIGNAL "$v"; done
for v in 512K 65G x 0; do bad_value D9_MAX_MEMORY "$v"; done
for v in 0 0ms 61s 100 fast; do bad_value D9_FLUSH_INTERVAL "$v"; done
for v in verbose 3 trace; do bad_value D9_LOG "$v"; done
for v in rdtsc realtime 1; do bad_value D9_CLOCK "$v"; done
for v in own 1 none; do bad_value D9_AGENT_FDS "$v"; done
for v in jail 1 none; do bad_value D9_CHROOT "$v"; done
for v in -1 10001 fast 99hz; do bad_value D9_CPU_PROFILE "$v"; done
for v in MODE=ring FLIGHT_WINDOW=500ms FLIGHT_WINDOW=2h FLIGHT_AFTER=10 TRIGGER_POLL=fast TRIGGER_DROPS=1k TRIGGER_COOLDOWN=2d DUMP_SIGNAL=KILL; do bad_value "D9_${v%%=*}" "${v#*=}"; done
for v in hw cycles 1; do bad_value D9_CPU_PROFILE_MODE "$v"; done
for v in 2 maybe; do bad_value D9_SCHED_EVENTS "$v"; done
for v in lbr frame 1; do bad_value D9_STACKS "$v"; done
for v in 512 64K 1M x; do bad_value D9_STACK_DUMP "$v"; done
for v in KILL USR3 RTMIN+99; do bad_value D9_PROFILE_SIGNAL "$v"; done
for v in 2 maybe; do bad_value D9_SYMBOLIZE "$v"; done
for v in -1 lots 65G; do bad_value D9_SYMBOLIZE_MEMORY "$v"; done
# Numbers are digits only: strtoull alone skips spaces and reads "-1" as 2^64-1 (no budget).
bad_value D9_MAX_TOTAL_SIZE " -1" "leading space"
bad_value D9_MAX_TOTAL_SIZE "-1" "a sign is not allowed"
bad_value D9_MAX_TOTAL_SIZE "+5" "a sign is not allowed"
bad_value D9_MAX_TOTAL_SIZE "+5G" "a sign is not allowed"
bad_value D9_MAX_TOTAL_SIZE "99999999999999999999999" "too large"
bad_value D9_MAX_TOTAL_SIZE "99999999999G" "too large"
bad_value D9_MAX_TOTAL_SIZE "1 " "trailing space"
bad_value D9_MAX_TOTAL_SIZE "1G " "trailing space"
bad_value D9_MAX_TOTAL_SIZE "M" "no number"
bad_value D9_MAX_TOTAL_SIZE "1M" "too small"
bad_value D9_MAX_MEMORY " 64M" "leading space"
bad_value D9_MAX_MEMORY "65G" "too large"
bad_value D9_FLUSH_INTERVAL "+100ms" "a sign is not allowed"
bad_value D9_FLUSH_INTERVAL "100ms " "trailing space"
bad_value D9_FLUSH_INTERVAL "100" "no unit"
bad_value D9_ROTATION_PERIOD "-10m" "a sign is not allowed"
bad_value D9_ROTATION_PERIOD "500ms" "too small"
bad_value D9_ROTATION_PERIOD "99999999999999999999h" "too large"
bad_value D9_BLOCKING_THRESHOLD " 1ms" "leading space"
bad_value D9_QUEUE_INTERVAL "+10ms" "a sign is not allowed"
bad_value D9_CPU_PROFILE " 99" "leading space"
bad_value D9_CPU_PROFILE "+99" "a sign is not allowed"
bad_value D9_CPU_PROFILE "99 " "trailing space"
bad_value D9_CPU_PROFILE "18446744073709551617" "too large"
bad_value D9_STACK_DUMP "-8K" "a sign is not allowed"
bad_value D9_TOGGLE_SIGNAL "RTMIN+ 1" "leading space"
bad_value D9_TOGGLE_SIGNAL "RTMIN+-1" "a sign is not allowed"
bad_value D9_TOGGLE_SIGNAL "RTMIN+99" "beyond SIGRTMAX"
for v in all 1 " full"; do bad_value D9_CMDLINE "$v" "unknown value"; done
for v in 2 maybe; do bad_value D9_ALLOW_SHARED_DIR "$v" "not a boolean"; done

# ---- valid values: no line, a trace ------------------------------------------------------------------
good_value() {
	local var=$1 val=$2 dir=$T/good-$n
	n=$((n + 1))
	d9_run "$T/good.out" "$T/good.err" D9_TRACE_PATH="$dir/trace.bin" "$var=$val" -- -t 2 -n 1000
	local rc=$?
	local name="good-value/$var=$val"
	if [ "$var$val" = D9_CLOCKtsc ] && ! d9_tsc_trusted; then
		d9_skip "$name" "the kernel does not use the TSC as its clocksource here ($(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)): the agent warns"
	elif [ "$rc" -ne 0 ]; then
		d9_fail "$name" "exit status $rc: $(head -c 200 "$T/good.err")"
	elif [ -s "$T/good.err" ]; then
		d9_fail "$name" "the agent printed: $(head -n 2 "$T/good.err" | tr '\n' '|')"
	elif ! compgen -G "$dir/trace.*.000000.bin*" >/dev/null; then
		d9_fail "$name" "no trace written: $(ls "$dir" 2>&1 | head -n 3)"
	else
		d9_pass "$name"
	fi
}
for v in 1M 1048576 64MB 2MiB 1g; do good_value D9_MAX_FILE_SIZE "$v"; done
for v in MODE=Continuous FLIGHT_WINDOW=1s FLIGHT_AFTER=0 TRIGGER_POLL=50ms TRIGGER_BLOCKING=0 TRIGGER_SCHED_DELAY=20ms TRIGGER_DROPS=100 TRIGGER_COOLDOWN=0 DUMP_SIGNAL=none DUMP_SIGNAL=USR2; do good_value "D9_${v%%=*}" "${v#*=}"; done
for v in 2M 4MiB 10G; do good_value D9_MAX_TOTAL_SIZE "$v"; done
for v in 4 256 1000000; do good_value D9_MAX_FILES "$v"; done
for v in 0 1s 1500ms 10m 1h; do good_value D9_ROTATION_PERIOD "$v"; done
for v in 0 1 true off auto AUTO; do good_value D9_COMPRESS "$v"; done
for v in 1 yes ON; do good_value D9_ENABLED "$v"; done
for v in USR2 SIGUSR1 hup RTMIN+1; do good_value D9_TOGGLE_SIGNAL "$v"; done
for v in 1M 64M 1G; do good_value D9_MAX_MEMORY "$v"; done
for v in 1ms 250ms 60s 1m; do good_value D9_FLUSH_INTERVAL "$v"; done
for v in 0 1 99 999; do good_value D9_CPU_PROFILE "$v"; done
for v in auto perf ctimer; do good_value D9_CPU_PROFILE_MODE "$v"; done
for v in 0 1; do good_value D9_SCHED_EVENTS "$v"; done
for v in auto fp dwarf; do good_value D9_STACKS "$v"; done
for v in 1K 8K 16384 58K; do good_value D9_STACK_DUMP "$v"; done
for v in RTMIN+6 USR2; do good_value D9_PROFILE_SIGNAL "$v"; done
for v in 0 1; do good_value D9_SYMBOLIZE "$v"; done
for v in 0 8M 1G; do good_value D9_SYMBOLIZE_MEMORY "$v"; done
for v in error warn WARN; do good_value D9_LOG "$v"; done
for v in auto tsc monotonic; do good_value D9_CLOCK "$v"; done
for v in private shared SHARED; do good_value D9_AGENT_FDS "$v"; done
for v in stop follow FOLLOW; do good_value D9_CHROOT "$v"; done
for v in full redacted name NAME; do good_value D9_CMDLINE "$v"; done
for v in 0 1; do good_value D9_ALLOW_SHARED_DIR "$v"; done
# an empty variable counts as unset
for var in D9_MAX_TOTAL_SIZE D9_CPU_PROFILE D9_CMDLINE; do good_value "$var" ""; done

# ---- an unwritable trace directory ---------------------------------------------------------------------
unwritable() { # name, trace path, what the line must mention
	d9_run "$T/unw.out" "$T/unw.err" D9_TRACE_PATH="$2" -- -t 2 -n 1000 --park-every 100
	local rc=$? lines
	lines=$(wc -l <"$T/unw.err")
	if [ "$rc" -ne 0 ]; then
		d9_fail "$1" "exit status $rc: $(head -c 200 "$T/unw.err")"
	elif [ "$lines" -ne 1 ] || ! grep -q "$3" "$T/unw.err"; then
		d9_fail "$1" "$lines stderr lines, expected one naming $3: $(head -n 3 "$T/unw.err" | tr '\n' '|')"
	else
		d9_pass "$1" "$(cat "$T/unw.err")"
	fi
}
echo "not a directory" >"$T/file"
unwritable unwritable-dir-under-file "$T/file/sub/trace.bin" "$T/file/sub"
# mode 0700: a tmpfs root is 1777 by default, which the agent refuses before it tries to write
if d9_mount_tmpfs "$T/ro" 1m ro,mode=0700; then
	unwritable unwritable-readonly-fs "$T/ro/trace.bin" "$T/ro"
	unwritable unwritable-readonly-fs-subdir "$T/ro/a/b/trace.bin" "$T/ro/a/b"
else
	d9_skip unwritable-readonly-fs "cannot mount a read-only tmpfs: $D9_MOUNT_ERR"
fi

# ---- D9_ENABLED=0 writes nothing -----------------------------------------------------------------------
d=$T/disabled
d9_run "$T/dis.out" "$T/dis.err" D9_TRACE_PATH="$d/trace.bin" D9_ENABLED=0 -- -t 3 -n 100000 --park-every 100
rc=$?
if [ "$rc" -ne 0 ] || [ -s "$T/dis.err" ]; then
	d9_fail enabled-0-writes-nothing "exit status $rc, stderr: $(head -n 2 "$T/dis.err")"
elif [ -n "$(find "$d" -type f 2>/dev/null)" ]; then
	d9_fail enabled-0-writes-nothing "files written: $(find "$d" -type f | head -n 3)"
else
	d9_pass enabled-0-writes-nothing "$([ -d "$d" ] && echo 'no files (the empty directory was created)' || echo 'no directory')"
fi

# ---- D9_TOGGLE_SIGNAL=USR2 ------------------------------------------------------------------------------
# The driver records a phase of 1000 seqs on its main thread at each SIGUSR1; USR2 toggles
# recording between phases. Only the phase recorded while on may be in the trace, completely.
toggle() { # name, D9_ENABLED, which phase is recorded (1-based) ...
	local name=$1 en=$2 d=$T/$1 k
	shift 2
	d9_bg pid "$T/$name.out" "$T/$name.err" D9_TRACE_PATH="$d/trace.bin" D9_ENABLED="$en" \
		D9_TOGGLE_SIGNAL=USR2 -- --phases 3 -n 1000
	if ! d9_wait_for 20 grep -qs '"ready"' "$T/$name.out"; then
		d9_fail "$name" "the driver did not start: $(head -c 300 "$T/$name.err")"
		d9_kill "$pid"
		return
	fi
	for k in 1 2 3; do
		if [ "$k" -gt 1 ]; then
			kill -USR2 "$pid"
			# the toggle handler has run before the next phase starts (USR1 < USR2: both
			# pending, USR1 would be delivered first)
			d9_wait_for 20 eval '! d9_sig_pending "$pid" 12'
		fi
		kill -USR1 "$pid"
		if ! d9_wait_for 20 grep -qs "\"phase\":$k," "$T/$name.out"; then
			d9_fail "$name" "phase $k did not finish: $(tail -c 300 "$T/$name.out")"
			d9_kill "$pid"
			return
		fi
	done
	d9_wait_pid "$pid" 20
	d9_check "$T/$name.json" "$d"
	d9_py "$name" '
c = one(f[0]); out = load(f[1]); rc = int(f[2]); on = [int(x) for x in f[3:]]
phases = [o for o in out if "phase" in o]
states = [p["enabled"] for p in phases]
want = [1 if k in on else 0 for k in (1, 2, 3)]
if rc != 0:
    fail("exit status %d" % rc)
if states != want:
    fail("recording was %s during the phases, expected %s (the harness toggled too late?)" % (states, want))
tids = [s for p in c["pids"].values() for s in p["tids"].values()]
seqs = set()
for k in on:
    seqs |= set(range((k - 1) * 1000 + 1, k * 1000 + 1))
got = sum(s["received"] for s in tids)
if len(tids) != 1 or got != len(seqs):
    fail("%d threads, %d QueueSamples in the trace, expected %d (phases %s)" % (len(tids), got, len(seqs), on))
s = tids[0]
if s["dropped"] or s["out_of_order"]:
    fail("dropped %d, out of order %d" % (s["dropped"], s["out_of_order"]))
if s["first_seq"] != min(seqs) or s["last_seq"] != max(seqs):
    fail("seqs %d..%d in the trace, expected %d..%d" % (s["first_seq"], s["last_seq"], min(seqs), max(seqs)))
# the checker counts seqs skipped while off as missing: exactly the phases recorded while off
off = 3000 - len(seqs) - (3000 - max(seqs))
if s["missing"] != off:
    fail("%d seqs missing inside the recorded range, expected %d" % (s["missing"], off))
' "$T/$name.json" "$T/$name.out" "$D9_RC" "$@"
}
toggle toggle-from-off 0 2
toggle toggle-from-on 1 1 3

# ---- file and directory modes -------------------------------------------------------------------------
# Under umask 000: every directory the agent creates is 0700 and every file 0600 (.active while
# written, .bin.gz once sealed and compressed).
d=$T/modes/a/b
old_umask=$(umask)
umask 000
d9_bg pid "$T/modes.out" "$T/modes.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_FILE_SIZE=1M -- \
	-t 2 -n 600000 --park-every 1000 --sleep-us 10 --exit hang
umask "$old_umask"
if d9_wait_for 30 grep -qs '"role":"parent"' "$T/modes.out" && d9_wait_for 120 d9_has_finished "$d"; then
	bad=""
	for p in "$T/modes" "$T/modes/a" "$d"; do
		m=$(stat -c %a "$p")
		[ "$m" = 700 ] || bad="$bad $p=$m"
	done
	for p in "$d"/*; do
		# the compressor renames files meanwhile (.bin -> .bin.gz): one that is gone is skipped
		m=$(stat -c %a "$p" 2>/dev/null) || { [ -e "$p" ] || continue; }
		# 1600: a .bin marked finished (D9_COMPRESS=auto), no access of anyone's
		[ "$m" = 600 ] || { [ "$m" = 1600 ] && [ "${p%.bin}" != "$p" ]; } || bad="$bad $(basename "$p")=$m"
	done
	kinds=$(ls "$d" | sed 's/.*\.[0-9]*\././' | sort -u | tr '\n' ' ')
	if [ -n "$bad" ]; then
		d9_fail file-modes "wrong modes (umask 000):$bad"
	elif ! compgen -G "$d/*.active" >/dev/null; then
		d9_fail file-modes "no .active file to check: $kinds"
	else
		d9_pass file-modes "dirs 0700, files 0600 ($kinds)"
	fi
else
	d9_fail file-modes "no sealed segment appeared: $(ls -R "$T/modes" 2>&1 | head -n 5 | tr '\n' ' ')"
fi
d9_kill "$pid"

# ---- clocks -----------------------------------------------------------------------------------------------
# ~1 s of recording (an event every 2 ms). Each thread's events must lie within what the driver
# measured around its first and last record call (CLOCK_MONOTONIC), and within the run as seen
# by `date` (CLOCK_REALTIME, through the header's anchor), with 50 ms of slack for TSC
# calibration and event time units; the span of the events must match the driver's within 10%.
# Forced TSC where the kernel does not trust it (kvm-clock, hyperv, xen: the vCPUs' TSCs may
# differ or drift, so a thread that migrates steps back) is a precondition missing: SKIP.
for clock in monotonic tsc; do
	if [ "$clock" = tsc ] && ! d9_tsc_trusted; then
		d9_skip "clock-$clock" "the TSC is not trusted here (clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null), or no constant_tsc and nonstop_tsc): TSC readings of different CPUs need not agree"
		continue
	fi
	d=$T/clock-$clock
	before=$(date +%s%N)
	d9_run "$T/$clock.out" "$T/$clock.err" D9_TRACE_PATH="$d/trace.bin" D9_CLOCK=$clock -- \
		-t 2 -n 500 --sleep-every 1 --sleep-us 2000
	rc=$?
	after=$(date +%s%N)
	d9_check "$T/$clock.json" --expect-n 500 --driver "$T/$clock.out" "$d"
	if [ "$rc" -ne 0 ]; then
		d9_fail "clock-$clock" "exit status $rc: $(head -c 200 "$T/$clock.err")"
		continue
	fi
	d9_py "clock-$clock" '
c = one(f[0]); drv = parent(f[1]); clock = f[2]; before, after = int(f[3]), int(f[4])
accounting(c, drv, expect_drops=False)
tol = 50 * 10**6
if any(s["clock"] != clock for s in c["segments"]) or drv["clock"] != clock:
    fail("segments use %s, the agent %s; asked for %s" % ([s["clock"] for s in c["segments"]], drv["clock"], clock))
tids = c["pids"][str(drv["pid"])]["tids"]
for t in drv["threads"]:
    s = tids[str(t["tid"])]
    if s["first_mono_ns"] < t["first_mono_ns"] - tol or s["last_mono_ns"] > t["last_mono_ns"] + tol:
        fail("tid %d: events at %d..%d ns (monotonic), recorded between %d and %d"
             % (t["tid"], s["first_mono_ns"], s["last_mono_ns"], t["first_mono_ns"], t["last_mono_ns"]))
    if s["first_real_ns"] < before - tol or s["last_real_ns"] > after + tol:
        fail("tid %d: events at %d..%d ns (realtime), the run lasted %d..%d"
             % (t["tid"], s["first_real_ns"], s["last_real_ns"], before, after))
    span, want = s["last_mono_ns"] - s["first_mono_ns"], t["last_mono_ns"] - t["first_mono_ns"]
    if not 0.9 * want <= span <= 1.1 * want:
        fail("tid %d: events span %.3f s, the driver recorded for %.3f s" % (t["tid"], span / 1e9, want / 1e9))
    if s["max_backstep_ns"]:
        fail("tid %d: time steps back by %d ns" % (t["tid"], s["max_backstep_ns"]))
info = "event spans match the run"
' "$T/$clock.json" "$T/$clock.out" "$clock" "$before" "$after"
done
exit 0
