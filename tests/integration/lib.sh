# shellcheck shell=bash disable=SC2034
# lib.sh: shared helpers of tests/integration/test-agent-*.sh (sourced, not run). Those scripts
# run build/tests/d9-driver (the agent linked in, configured by D9_*) and inspect what it wrote
# with build/tests/d9-check (JSON; exact drop accounting) and build/d9-analyze. Every result is a
# line "PASS name[: detail]", "FAIL name: why" or "SKIP name: why" (tests/run.sh counts them).
# Each script gets a fresh directory $T under ${TMPDIR:-/tmp}, removed at exit with every process
# and mount the script started. Timing never decides a result: waits have generous deadlines.

D9_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DRIVER=$D9_ROOT/build/tests/d9-driver
CHECK=$D9_ROOT/build/tests/d9-check
ANALYZE=$D9_ROOT/build/d9-analyze

D9_BG_PIDS=()
D9_MOUNTS=()

# d9_san_env: how the sanitizer build of d9-analyze reports: leaks checked, a report does not
# abort (the test reads it from stderr), UBSan with stacks.
d9_san_env() {
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
	export UBSAN_OPTIONS=print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}
}

# d9_san_once OUT ERR CMD...: runs CMD (a sanitizer build) with stdout to OUT, stderr appended to
# ERR; again, once, when LeakSanitizer itself could not run its check at the exit ("LeakSanitizer
# has encountered a fatal error": its tracer could not stop the threads, seen once on a loaded
# CI machine): that is no finding about the program, and the second run's report counts.
d9_san_once() {
	local out=$1 err=$2 tmp
	shift 2
	tmp=$(mktemp)
	"$@" >"$out" 2>"$tmp"
	if grep -q 'LeakSanitizer has encountered a fatal error' "$tmp"; then
		"$@" >"$out" 2>"$tmp"
	fi
	cat "$tmp" >>"$err"
	rm -f "$tmp"
}

# d9_corpus_leaks I: D9_CORPUS_ASAN = the ASAN_OPTIONS for the I-th file (from 1) of a loop over
# the fuzz corpus: leaks are checked for the first file and every D9_CORPUS_LEAKS_EVERY-th after
# it; memory errors and undefined behaviour for every file. LeakSanitizer's check at exit costs
# about 60 ms of CPU a process on these VMs (it reads libubsan's 6 MB of zeroed .bss, a page
# fault a page), more than the run itself, and the suite makes about 1,000 corpus runs.
# test-analyze-bad-input still checks every file for leaks through summary and polls (the
# decoder every command shares).
D9_CORPUS_LEAKS_EVERY=8
d9_corpus_leaks() {
	D9_CORPUS_ASAN="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=$((($1 - 1) % D9_CORPUS_LEAKS_EVERY == 0))"
}

d9_pass() { echo "PASS $1${2:+: $2}"; }
d9_fail() { echo "FAIL $1: $2"; }
d9_skip() { echo "SKIP $1: $2"; }

d9_cleanup() {
	local p m
	for p in "${D9_BG_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for p in "${D9_BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	for m in "${D9_MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
	# D9_TEST_KEEP=1 keeps the test's files (traces, outputs) for a look after a failure
	if [ -n "${T:-}" ]; then
		if [ -n "${D9_TEST_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
	fi
}

# d9_setup NAME: checks that the tools are built, clears D9_* from the environment, makes $T.
d9_setup() {
	local b
	for b in "$DRIVER" "$CHECK" "$ANALYZE"; do
		if [ ! -x "$b" ]; then
			d9_fail "$1" "$b is not built (make all)"
			exit 0
		fi
	done
	for b in $(compgen -e | grep '^D9_'); do unset "$b"; done
	# The default 10m wall-clock rotation would seal a segment whenever a test happens to run
	# across a boundary, and tests that look for the .active file would fail once in a while.
	# Tests of rotation set it themselves.
	export D9_ROTATION_PERIOD=0
	# An exit waits at most D9_EXIT_TIMEOUT (100ms) for the seal, then leaves the segment
	# .active; on a loaded machine the writer may get no CPU that soon. Tests that check what
	# an exit seals wait up to 10 s; what the default costs is measured by `make bench`.
	export D9_EXIT_TIMEOUT=10s
	T=$(mktemp -d "${TMPDIR:-/tmp}/d9-$1-XXXXXX")
	trap d9_cleanup EXIT
	d9_no_machine_debug_files
}

# d9_no_machine_debug_files: points D9_DEBUG_DIR (agent and analyzer) at an empty directory.
# The separate debug files under /usr/lib/debug are the machine's, not the tests': with
# libc6-dbg installed (valgrind recommends it), every agent and analyzer that names a libc frame
# inflates its compressed DWARF (about 16 MB; 0.1 s of CPU on one of these VMs, for each of the
# suite's hundreds of analyzer runs), and names could differ between machines. The tests of
# debug files (test-names, test-preload-patch) set their own. Done when this file is sourced, and
# again by d9_setup and pl_env, which clear D9_*.
# d9_perf_off: why this shell's user cannot open the agent's perf events (cpu-clock and
# context switches, as D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1 open them: the driver's own lines),
# printed; nothing when it can. Needs $T.
d9_perf_off() {
	env D9_TRACE_PATH="$T/perf-probe/trace.bin" D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1 \
		timeout 60 "$DRIVER" --churn 1 2>&1 >/dev/null
}

# d9_exec_function ELF: sets off vaddr filesz (file offset, address and size of ELF's executable
# LOAD segment) and faddr fname (hex address and name of a text symbol past the segment's first
# 256 bytes that follows another one, so a sample at its first byte has a function before it);
# faddr is empty when there is none.
d9_exec_function() {
	read -r off vaddr filesz < <(readelf -lW "$1" | awk '$1 == "LOAD" && ($7 ~ /E/ || $8 ~ /E/) { print $2, $3, $5; exit }')
	faddr= fname=
	local a t n prev=
	while read -r a t n; do
		[[ "$t" == [tT] ]] || continue
		if [ -n "$prev" ] && [ $((0x$a)) -gt $((vaddr + 256)) ] && [ $((0x$a)) -gt $((0x$prev)) ]; then
			faddr=$a fname=$n
			return 0
		fi
		prev=$a
	done < <(nm -n --defined-only "$1")
}

d9_no_machine_debug_files() {
	mkdir -p "$D9_ROOT/build/test-no-debug" 2>/dev/null
	export D9_DEBUG_DIR=$D9_ROOT/build/test-no-debug
}
d9_no_machine_debug_files

# d9_run OUT ERR [VAR=value ...] -- DRIVER_ARGS...: runs the driver (60 s at most) with the
# variables set; stdout to OUT, stderr to ERR. Returns the driver's status (124: timed out).
d9_run() {
	local out=$1 err=$2 envs=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	# the braces keep the shell's own "Killed" notice out of the log (the kill modes)
	{ env "${envs[@]}" timeout -s KILL 60 "$DRIVER" "$@" >"$out" 2>"$err"; } 2>/dev/null
}

# Background commands of a non-interactive shell start with SIGINT and SIGQUIT ignored; a real
# server started from a terminal or a service manager has them at their default, so restore that
# where env(1) can (coreutils >= 8.31).
D9_DEFSIG=()
# shellcheck disable=SC2054 # one argument: env takes a comma-separated list
env --default-signal=INT true 2>/dev/null && D9_DEFSIG=(--default-signal=INT,QUIT)

# d9_bg VAR OUT ERR [VAR=value ...] -- DRIVER_ARGS...: starts the driver in the background and
# stores its pid in VAR (killed at exit if still running).
d9_bg() {
	local var=$1 out=$2 err=$3 envs=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	env "${D9_DEFSIG[@]}" "${envs[@]}" "$DRIVER" "$@" >"$out" 2>"$err" &
	D9_BG_PIDS+=("$!")
	printf -v "$var" '%s' "$!"
}

# D9_TEST_SLOW (a whole number, default 1) multiplies every deadline of d9_wait_for and
# d9_wait_settled: for a machine slower than "busy" (a valgrind run, an emulator).
D9_SLOW=${D9_TEST_SLOW:-1}
case "$D9_SLOW" in '' | *[!0-9]* | 0) D9_SLOW=1 ;; esac

# d9_wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds; 1 on timeout
# (SECONDS times D9_TEST_SLOW). The one way tests wait: never a fixed sleep.
d9_wait_for() {
	local deadline=$(( $(date +%s%N) + $1 * D9_SLOW * 1000000000 ))
	shift
	while ! "$@"; do
		[ "$(date +%s%N)" -gt "$deadline" ] && return 1
		sleep 0.05
	done
}

# d9_series_settled DIR [gz]: the background work on DIR's sealed segments is done: no
# temporary file (.tmp-*, .active.tmp, .recovering-*) and, with gz, no .bin left beside the
# .bin.gz files (the compressor symbolizes a segment, then gzips it: .bin.gz means both are
# done). At least one sealed segment; the .active file of a live process may be there. A
# .tmp-PID.* of a process that is gone is its compressor's, cut short by the exit (the next start
# removes it, agent/DESIGN.md "Recovery"): nothing will change it, so it does not
# count (a loaded CI run waited 120 s for one).
d9_series_settled() {
	local f p sealed=0
	for f in "$1"/*; do
		case "$f" in
		*.tmp-*)
			p=${f##*.tmp-}
			p=${p%%.*}
			[[ "$p" =~ ^[0-9]+$ ]] && [ ! -d "/proc/$p" ] && continue
			return 1
			;;
		*.active.tmp | *.recovering-*) return 1 ;;
		*.bin) [ "${2:-}" = gz ] && return 1; sealed=1 ;;
		*.bin.gz) sealed=1 ;;
		esac
	done
	[ "$sealed" = 1 ]
}

# d9_wait_settled DIR [gz]: waits (120 s, times D9_TEST_SLOW) for d9_series_settled. The
# compressor runs at nice 19: on a machine saturated by other work it gets a sliver of a CPU, so
# the deadline is generous; a test never assumes it has finished. 1 (with what is in DIR in
# D9_SETTLE_ERR) on timeout.
d9_wait_settled() {
	D9_SETTLE_ERR=""
	d9_wait_for 120 d9_series_settled "$@" && return 0
	D9_SETTLE_ERR="not settled within $((120 * D9_SLOW)) s: $(ls "$1" 2>&1 | tr '\n' ' ' | head -c 300)"
	return 1
}

# d9_series_finished DIR: as d9_series_settled, and every .bin is finished: symbolized and
# marked with the sticky bit, which D9_COMPRESS=auto gives a segment it leaves uncompressed
# (agent/DESIGN.md, "Compressing for the budget").
d9_series_finished() {
	d9_series_settled "$1" && [ -z "$(find "$1" -maxdepth 1 -name '*.bin' ! -perm -1000 -print -quit)" ]
}

# d9_has_finished DIR: the compressor finished a sealed segment there: a .bin.gz, or a .bin
# marked finished (D9_COMPRESS=auto under half the budget).
d9_has_finished() {
	compgen -G "$1/*.bin.gz" >/dev/null || [ -n "$(find "$1" -maxdepth 1 -name '*.bin' -perm -1000 -print -quit)" ]
}

# d9_symbolized FILE...: every FILE carries Symbol records (the compressor wrote them).
d9_symbolized() {
	local f
	for f in "$@"; do
		"$D9_ROOT/build/d9-analyze" dump "$f" 2>/dev/null | grep -q '"kind":"Symbol"' || return 1
	done
}

# d9_kernel_hz: the kernel's tick rate (CONFIG_HZ, from /proc/config.gz or /boot/config-*), at
# which CPU-time timers fire (ctimer samples: at most one a tick while the thread runs); 100,
# the lowest in use, when the configuration is not there to read.
d9_kernel_hz() {
	local hz
	hz=$({ zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null; } |
		sed -n 's/^CONFIG_HZ=\([0-9][0-9]*\)$/\1/p' | head -n 1)
	echo "${hz:-100}"
}

# d9_tsc_trusted: the CPU has an invariant TSC and the kernel uses it as its clocksource (what
# D9_CLOCK=auto requires; D9_CLOCK=tsc on another machine warns once on stderr). The kernel
# drops the TSC as its clocksource when it finds it unstable, e.g. on a loaded VM.
d9_tsc_trusted() {
	grep -qw constant_tsc /proc/cpuinfo && grep -qw nonstop_tsc /proc/cpuinfo &&
		[ "$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)" = tsc ]
}

# d9_own_tables: the agent's threads take descriptor tables of their own here (agent/fdown.c):
# no seccomp filter (under one the agent makes no close_range) and the kernel gives a thread one
# (close_range(0, ~0U, CLOSE_RANGE_UNSHARE), Linux 5.9), tried on a thread of a python process.
d9_own_tables() {
	! grep -Eq '^Seccomp:[[:space:]]*[1-9]' /proc/self/status && [ "$(python3 -c '
import ctypes, threading
r = []
t = threading.Thread(target=lambda: r.append(ctypes.CDLL(None).syscall(436, 0, 0xffffffff, 2)))
t.start(); t.join(); print(r[0])' 2>/dev/null)" = 0 ]
}

# d9_all_asleep PID: every thread of the process is asleep (state S) at this moment: it has
# reached a wait (pause, a parked worker), not merely printed that it will.
d9_all_asleep() {
	local f st n=0
	for f in /proc/"$1"/task/*/stat; do
		st=$(sed 's/.*) //' "$f" 2>/dev/null | cut -d' ' -f1)
		[ "$st" = S ] || return 1
		n=$((n + 1))
	done
	[ "$n" -gt 0 ]
}

# d9_sig_pending PID SIG: signal SIG (a number) is pending for the process or one of its
# threads (not yet delivered to a handler), as /proc/PID/task/*/status shows it.
d9_sig_pending() {
	local m
	for m in $(sed -n 's/^\(ShdPnd\|SigPnd\):[[:space:]]*//p' /proc/"$1"/task/*/status 2>/dev/null); do
		(( (16#$m >> ($2 - 1)) & 1 )) && return 0
	done
	return 1
}

# d9_wait_pid PID SECONDS: waits for a background driver; its status goes to D9_RC (124: still
# running after SECONDS, then killed). Not in $(...): only this shell can wait for its children.
d9_wait_pid() {
	local pid=$1 deadline=$(( $(date +%s%N) + $2 * 1000000000 ))
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$(date +%s%N)" -gt "$deadline" ]; then
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			D9_RC=124
			return
		fi
		# a zombie of ours (not yet waited for) still answers kill -0
		local st
		st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
		[ -z "$st" ] || [ "$st" = Z ] && break
		sleep 0.05
	done
	wait "$pid" 2>/dev/null
	D9_RC=$?
}

# d9_check OUT [D9-CHECK ARGS...]: runs d9-check, JSON to OUT; returns its status.
d9_check() {
	local out=$1
	shift
	timeout -s KILL 120 "$CHECK" "$@" >"$out" 2>"$out.err"
}

# d9_py NAME CODE [FILE...]: runs the Python CODE, then prints PASS NAME (with `info` if CODE
# set it) or FAIL NAME: the message of fail(). In CODE: `f` is the list of FILE arguments,
# load(path) the JSON objects of a file of JSON lines, one(path) its only/last object,
# parent(path) the driver's parent line, children(path) its child lines,
# accounting(check, drv_line) checks exact accounting of one driver process (see below).
d9_py() {
	local name=$1 code=$2
	shift 2
	python3 - "$name" "$code" "$@" <<'PYEOF'
import json, os, stat, sys
name, code, f = sys.argv[1], sys.argv[2], sys.argv[3:]

class Fail(Exception):
    pass

class Skip(Exception):
    pass

def fail(msg):
    raise Fail(msg)

def skip(msg):
    raise Skip(msg)  # a precondition the run did not meet: counted, with the reason

def load(path):
    out = []
    with open(path, errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out

def one(path):
    objs = load(path)
    if not objs:
        fail("%s: no JSON output" % path)
    return objs[-1]

def parent(path):
    for o in load(path):
        if o.get("role") == "parent":
            return o
    fail("%s: the driver printed no result line" % path)

def children(path):
    return [o for o in load(path) if o.get("role") == "child"]

def accounting(c, drv, expect_drops=None):
    """Exact accounting of one driver process in d9-check output c: every thread the driver ran
    is in the trace with its worker id, seqs in order, every lost event counted by Dropped, and
    events + dropped == what the driver attempted. Returns (events, dropped) of the process."""
    pid = str(drv["pid"])
    if pid not in c["pids"]:
        fail("no segment of pid %s" % pid)
    tids = c["pids"][pid]["tids"]
    want = {str(t["tid"]): t for t in drv["threads"]}
    extra = sorted(set(tids) - set(want))
    if extra:
        fail("pid %s: tids %s in the trace are not the driver's" % (pid, extra))
    events = dropped = 0
    workers = set()
    for tid, t in want.items():
        s = tids.get(tid)
        if s is None:
            fail("pid %s tid %s: recorded %d events, none in the trace, no Dropped record"
                 % (pid, tid, t["attempted"]))
        if s["out_of_order"]:
            fail("pid %s tid %s: %d seqs out of order" % (pid, tid, s["out_of_order"]))
        if s["missing"] or s["overcounted"]:
            fail("pid %s tid %s: %d events lost without a Dropped record, %d over-counted (%s)"
                 % (pid, tid, s["missing"], s["overcounted"], c["error_list"][:3]))
        if s["events"] + s["dropped"] != t["attempted"]:
            fail("pid %s tid %s: attempted %d, trace has %d + %d dropped"
                 % (pid, tid, t["attempted"], s["events"], s["dropped"]))
        if t["worker"] and s["worker"] != t["worker"]:
            fail("pid %s tid %s: chunks carry worker %d, d9_agent_become_worker said %d"
                 % (pid, tid, s["worker"], t["worker"]))
        if s["worker_changes"] or s["dropped_not_first"]:
            fail("pid %s tid %s: worker id changes %d, Dropped not first in chunk %d"
                 % (pid, tid, s["worker_changes"], s["dropped_not_first"]))
        workers.add(s["worker"])
        events += s["events"]
        dropped += s["dropped"]
    if len(workers) != len(want):
        fail("pid %s: worker ids %s are not distinct per thread" % (pid, sorted(workers)))
    if not c["ok"]:
        fail("d9-check: %s" % c["error_list"][:3])
    if expect_drops is True and dropped == 0:
        fail("pid %s: no event was dropped, so this run did not test drop accounting" % pid)
    if expect_drops is False and dropped:
        fail("pid %s: %d events dropped" % (pid, dropped))
    return events, dropped

def files(d):
    # the segment files: <stem>.lock is the directory budget's lock file (agent/budget.c)
    return sorted(n for n in os.listdir(d) if not n.endswith(".lock")) if os.path.isdir(d) else []

info = ""
try:
    exec(code)
except Fail as e:
    print("FAIL %s: %s" % (name, e))
except Skip as e:
    print("SKIP %s: %s" % (name, e))
except Exception as e:
    print("FAIL %s: checker error %s: %s" % (name, type(e).__name__, e))
else:
    print("PASS %s%s" % (name, ": " + info if info else ""))
PYEOF
}

# d9_dir_bytes DIR PATTERN: total bytes of the files matching PATTERN in DIR (0 if none).
d9_dir_bytes() {
	local sum=0 s f
	for f in "$1"/$2; do
		[ -f "$f" ] || continue
		s=$(stat -c %s "$f" 2>/dev/null) || continue
		sum=$((sum + s))
	done
	echo "$sum"
}

# d9_mount_tmpfs DIR SIZE [OPTS]: mounts a tmpfs; 1 (with the reason in $D9_MOUNT_ERR) if not allowed.
d9_mount_tmpfs() {
	mkdir -p "$1"
	if D9_MOUNT_ERR=$(mount -t tmpfs -o "size=$2${3:+,$3}" tmpfs "$1" 2>&1); then
		D9_MOUNTS+=("$1")
		return 0
	fi
	D9_MOUNT_ERR=${D9_MOUNT_ERR:-mount failed}
	return 1
}

# d9_kill PID [SIGNAL]: signals a background driver and reaps it quietly; status to D9_RC.
d9_kill() {
	kill -s "${2:-KILL}" "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	D9_RC=$?
}
