#!/usr/bin/env bash
# test-check.sh: `d9-analyze check` on traces of the test servers, each with one known problem
# injected; check must find exactly that problem first (README.md, "### check"). Every run is
# checked with the sanitizer build, text and --json: the JSON parses, lists the same findings in
# the same order as the text, its "exit" is the exit status (the worst severity's), every "next"
# is a d9-analyze command line, and the first one runs.
#   - hog-st, hog-epoll: /burn?ms=100 (100 ms of CPU in one poll; in one loop turn of the epoll
#     server, generic mode) with D9_CPU_PROFILE=999: first finding "hog", its stack
#     names handle_burn; serious or warning (a loaded machine stretches the run), never info.
#   - stacks: the same /burn on st-http-nofp with D9_STACKS=fp: a "stacks" warning (>= 20%
#     truncated) after the hog; stacks-fp: none above info on the frame-pointer build (hog-st).
#   - damaged: the hog-st trace cut in half: a "damaged_input" finding, exit 1 or 5 (not 4);
#     bad-input: no trace is exit 3, a bad option value exit 2; hostile-input: the fuzz corpus and
#     the golden segments, each file alone: no sanitizer report, exit 0, 1, 5 or 3, JSON parses.
#   - block-st, block-epoll: /block?ms=100 (a usleep): first finding "blocking", not info, call
#     usleep, its stack names handle_block; no "hog" finding (the poll's time is the call's).
#   - imbalance: epoll-http -T 2, /burn?ms=2 on one keep-alive connection, three in flight, 3 s:
#     an "imbalance" finding (busy worker >= 80%, idle one <= 20%), after nothing but a
#     "sched_delay" of cause preemption (the machine's other work). SKIP when there is none and
#     that preemption took 10% or more of the workers' time (a loaded machine: the busy worker
#     cannot reach 80%).
#   - late-timer: a coroutine in /sleep?ms=600 (parked: /stats counted it, within 300 ms, else
#     tried again), then /burn?ms=1000 holds the worker past its deadline: first "hog" (the
#     cause), and a "late_timers" finding with a coroutine timer >= 200 ms late.
#   - late-wait: st-http stopped (SIGSTOP, 2 s) while its scheduler waits in select() for a
#     coroutine's 1 s timer: first finding "late_timers", not info, a loop wait >= 500 ms late.
#   - preempt: st-http and a CPU hog pinned to one CPU, wrk on /fast for 2 s from the other
#     CPUs: first finding "sched_delay" with cause "preemption", or after hog findings whose
#     polls mostly waited for a CPU (a machine busy besides) (SKIP: 1 CPU, no taskset or wrk).
#   - drops: the trace on a full tmpfs until the agent says it cannot write, then space again:
#     first finding "drops", serious, with write_error drops (SKIP: no tmpfs mount, not root).
#   - recorder: a root program's child gives up root while profiled (priv-drop.c, late): a
#     "recorder" finding to nobody's uid whose perf_denied, kernel_samples_lost and severity
#     follow perf_event_paranoid (SKIP: not root, no user nobody).
#   - clean: light requests (/fast, /sleep?ms=5): no serious finding and exit 0 (nothing but
#     info), start-up aside (findings located at the main coroutine: a loaded machine can make
#     its first poll long), and a "sched_delay" of cause preemption, or "late_timers" that it
#     explains, only as large as the run delay the kernel counted for the worker (the
#     machine's other work: a loaded machine).
# Everything runs at nice -10 when we may (root), so a shared machine's other work preempts the
# servers less than the problems injected.
# The injected delays are 100 ms and more where a clean run's polls take microseconds.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"
pl_setup check
pl_san_setup check-setup || exit 0
# the tmpfs of the drops case goes when the servers are gone, before $T is removed
check_cleanup() {
	local p m
	for p in "${PL_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for p in "${PL_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	for m in "${D9_MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
	pl_cleanup
}
trap check_cleanup EXIT
# every server, client and hog of this script at nice -10 when we may (PL_NICE's reason): the
# problems injected here, not the other work of a shared machine, should be what check finds
[ "$(id -u)" -eq 0 ] && renice -n -10 -p $$ >/dev/null

# run_check NAME DIR WANT_FIRST PY [ARG...]: runs check (text and --json, sanitizer build) on
# DIR, then the Python checks PY (one string) with j (the JSON), fs (its findings), first, text,
# rc, names() of a stack and the ARGs from sys.argv[7]; prints PASS/FAIL NAME.
run_check() {
	local name=$1 dir=$2 want=$3 code=$4 rc
	shift 4
	"$SAN" check "$dir" >"$T/$name.txt" 2>"$T/$name.err"
	rc=$?
	"$SAN" check --json "$dir" >"$T/$name.json" 2>>"$T/$name.err"
	if grep -qE 'runtime error|AddressSanitizer|LeakSanitizer' "$T/$name.err"; then
		pl_fail "$name" "sanitizer report: $(grep -m1 -E 'runtime error|Sanitizer' "$T/$name.err")"
		return
	fi
	python3 - "$name" "$T/$name.json" "$T/$name.txt" "$rc" "$want" "$PL_ANALYZE" "$@" <<PYEOF
import json, re, shlex, subprocess, sys
name, jpath, tpath, rc, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
text = open(tpath).read()
def fail(why):
    print("FAIL %s: %s (text: %s)" % (name, why, text[:600].replace("\n", " | ")))
    sys.exit(0)
def skip(why):
    print("SKIP %s: %s" % (name, why))
    sys.exit(0)
try:
    j = json.load(open(jpath))
except Exception as e:
    fail("--json does not parse: %s" % e)
fs = j["findings"]
# the text lists the same findings in the same order
heads = re.findall(r"^(\d+)\. (\w+) +(.*)$", text, re.M)
if [(h[1], h[2]) for h in heads] != [(f["severity"], f["title"]) for f in fs]:
    fail("text and JSON disagree: %s vs %s" % (heads[:3], [(f["severity"], f["title"]) for f in fs][:3]))
if j["exit"] != rc:
    fail("JSON exit %d, status %d" % (j["exit"], rc))
worst = max([{"info": 0, "warning": 1, "serious": 5}[f["severity"]] for f in fs] or [0])
if rc != worst:
    fail("exit status %d, want %d for the worst finding" % (rc, worst))
for f in fs:
    if not f["next"].startswith("d9-analyze "):
        fail("finding %s: next %r is not a command line" % (f["kind"], f["next"]))
# the first finding's next command runs as it is (the damage of a damaged trace: exit 4)
if fs:
    argv = shlex.split(fs[0]["next"])
    r = subprocess.run([sys.argv[6]] + argv[1:], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120)
    if r.returncode not in (0, 4):
        fail("next %r exited %d: %s" % (fs[0]["next"], r.returncode, r.stderr[:200]))
def names(f):
    return " < ".join(f["stack"])
first = fs[0] if fs else None
if want and (first is None or first["kind"] != want):
    fail("first finding %s, want %s" % (first and (first["kind"], first["title"]), want))
info = first["title"] if first else "nothing found"
$code
print("PASS %s: %s" % (name, info))
PYEOF
}

HOG='
# serious for 100 ms in a trace of about 1 s; a loaded machine that stretches the run makes it
# a warning, never info
if first["severity"] == "info" or rc not in (1, 5):
    fail("hog finding is %s, exit %d" % (first["severity"], rc))
if "handle_burn" not in names(first):
    fail("hog stack does not name handle_burn: %s" % names(first))
info += "; stack " + names(first)
'
BLOCK='
if first["severity"] == "info" or first["numbers"]["call"] != "usleep":
    fail("blocking finding %s, call %s" % (first["severity"], first["numbers"]["call"]))
if "handle_block" not in names(first):
    fail("blocking stack does not name handle_block: %s" % names(first))
if any(f["kind"] == "hog" for f in fs):
    fail("a hog finding for a poll that blocked: %s" % [f["title"] for f in fs if f["kind"] == "hog"])
info += "; stack " + names(first)
'

# ---- a hog poll, a blocking call: st-http (coroutines) and epoll-http (generic) ----------------
if pl_run hog-st "$ST_HTTP" D9_CPU_PROFILE=999 -- /fast ok "/burn?ms=100" "burn ms=100*" /fast ok; then
	run_check check-hog-st "$SDIR/trace" hog "$HOG"
fi
# the same without frame pointers, stacks from the kernel's frame-pointer chain only
# (D9_STACKS=fp): they are cut at their first bad frame and marked truncated (README.md,
# "Profiling"; the default DWARF stacks of this build reach the coroutine's root since the root
# slot), a "stacks" warning after the hog; with frame pointers (hog-st) there is none
if pl_run hog-nofp "$ST_HTTP_NOFP" D9_CPU_PROFILE=999 D9_STACKS=fp -- "/burn?ms=100" "burn ms=100*"; then
	run_check check-stacks "$SDIR/trace" hog '
st = [f for f in fs if f["kind"] == "stacks"]
if not st or st[0]["severity"] != "warning" or st[0]["numbers"]["truncated_pct"] < 20:
    fail("stacks finding %s" % [(f["severity"], f["numbers"]) for f in st])
info = st[0]["title"]
'
fi
if [ -s "$T/check-hog-st.json" ] && python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(any(f["kind"] == "stacks" and f["severity"] != "info" for f in j["findings"]))' "$T/check-hog-st.json"; then
	pl_pass check-stacks-fp "no stacks warning with frame pointers"
else
	pl_fail check-stacks-fp "a stacks warning on the frame-pointer build: $(grep -m1 stacks "$T/check-hog-st.txt")"
fi

# the same trace cut in half: the damage is a finding (exit status 1 or 5, not 4)
seg=$(pl_trace_files "$T/hog-st/trace" | head -n1)
if [ -n "$seg" ]; then
	mkdir -p "$T/damaged"
	case "$seg" in
	*.gz) gunzip -c "$T/hog-st/trace/$seg" >"$T/damaged/full.bin" 2>/dev/null ;;
	*) cp "$T/hog-st/trace/$seg" "$T/damaged/full.bin" ;;
	esac
	head -c $(($(stat -c %s "$T/damaged/full.bin") / 2)) "$T/damaged/full.bin" >"$T/damaged/trace.1.1.bin"
	rm -f "$T/damaged/full.bin"
	run_check check-damaged "$T/damaged" "" '
d = [f for f in fs if f["kind"] == "damaged_input"]
if not d or d[0]["numbers"]["truncated_segments"] + d[0]["numbers"]["corrupt_segments"] < 1:
    fail("no damaged_input finding for a segment cut in half: %s" % [f["kind"] for f in fs])
if rc not in (1, 5):
    fail("exit %d for damaged input, want 1 or 5" % rc)
info = d[0]["title"]
'
fi
# bad input and usage: the usual statuses
mkdir -p "$T/empty"
"$SAN" check "$T/empty" >/dev/null 2>&1
rc=$?
"$SAN" check --hog nonsense "$T/empty" >/dev/null 2>&1
urc=$?
if [ "$rc" = 3 ] && [ "$urc" = 2 ]; then
	pl_pass check-bad-input "no trace: 3, bad option value: 2"
else
	pl_fail check-bad-input "no trace: exit $rc (want 3), --hog nonsense: exit $urc (want 2)"
fi

# hostile input: each file of the fuzz corpus and the golden segments alone through check --json:
# no sanitizer report, a status of check's own (0, 1, 5; 3 when nothing is readable), and JSON
# that parses whenever something was read
bad=""
mkdir -p "$T/corpus-out"
n=0
for f in "$PL_ROOT"/tests/fuzz/corpus/* "$PL_ROOT"/tests/golden/*.bin "$PL_ROOT"/tests/golden/*.bin.gz; do
	[ -f "$f" ] || continue
	n=$((n + 1))
	d9_corpus_leaks "$n"
	rc=0
	ASAN_OPTIONS=$D9_CORPUS_ASAN "$SAN" check --json "$f" >"$T/corpus-out/$n.json" \
		2>"$T/corpus.err" || rc=$?
	if grep -qE 'runtime error|Sanitizer' "$T/corpus.err"; then
		bad="$bad $(basename "$f"): $(grep -m1 -E 'runtime error|Sanitizer' "$T/corpus.err");"
	elif [ "$rc" = 3 ]; then
		rm -f "$T/corpus-out/$n.json"
	elif [ "$rc" != 0 ] && [ "$rc" != 1 ] && [ "$rc" != 5 ]; then
		bad="$bad $(basename "$f"): exit $rc;"
	fi
done
bad="$bad$(python3 -c '
import glob, json, sys
for p in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try:
        json.load(open(p))
    except Exception as e:
        print(" %s: bad JSON %s;" % (p, e), end="")
' "$T/corpus-out")"
if [ -z "$bad" ]; then
	pl_pass check-hostile-input "$n files"
else
	pl_fail check-hostile-input "${bad:0:600}"
fi

if pl_run block-st "$ST_HTTP" -- /fast ok "/block?ms=100" "block*" /fast ok; then
	run_check check-block-st "$SDIR/trace" blocking "$BLOCK"
fi
# epoll-http has no /stats session: its runs end with /quit
epoll_run() {
	local prefix=$1
	shift
	if ! pl_start "$T/$prefix" "$EPOLL_HTTP" "$@" --; then
		pl_fail "check-$prefix" "$PL_ERR"
		return 1
	fi
	pl_get /fast
	pl_get "$EPOLL_PATH"
	[ "$CODE" = 200 ] || pl_fail "check-$prefix-replies" "$EPOLL_PATH: status $CODE"
	pl_get /fast
	pl_quit
	if [ "$SRC" != 0 ]; then
		pl_fail "check-$prefix-exit" "exit status $SRC"
		return 1
	fi
}
EPOLL_PATH="/burn?ms=100"
epoll_run hog-epoll D9_CPU_PROFILE=999 && run_check check-hog-epoll "$SDIR/trace" hog "$HOG"
EPOLL_PATH="/block?ms=100"
epoll_run block-epoll && run_check check-block-epoll "$SDIR/trace" blocking "$BLOCK"

# ---- imbalance: one of two epoll workers does all the work --------------------------------------
# one keep-alive connection stays on one worker thread (its SO_REUSEPORT listener's); 2 ms of CPU
# per request, three in flight for 3 s (the process's start and end, idle, weigh little): that
# worker is busy ~90% of the process's time, the other ~0%
if pl_start "$T/imbalance" "$EPOLL_HTTP" -- -T 2; then
	if ! PL_ERR=$(python3 - "$SPORT" <<'PYEOF' 2>&1
import socket, sys, time
# three requests in flight, so the next one is always waiting when the worker finishes one
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
req = b"GET /burn?ms=2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
s.sendall(req * 3)
sent, done, data, end = 3, 0, b"", time.time() + 3.0
while done < sent:
    d = s.recv(65536)
    if not d:
        sys.exit("connection closed after %d replies" % done)
    data += d
    n = data.count(b"HTTP/1.1 200 ")
    if data.count(b"HTTP/1.1 ") != n:
        sys.exit("a reply is not 200: %r" % data[-200:])
    while done < n:
        done += 1
        if time.time() < end:
            s.sendall(req)
            sent += 1
PYEOF
	); then
		pl_fail check-imbalance-requests "$PL_ERR"
	fi
	pl_quit
	if [ "$SRC" = 0 ]; then
		# the machine may preempt the busy worker too (other work on its CPU): that finding
		# alone may come first
		run_check check-imbalance "$SDIR/trace" "" '
ahead = []
for f in fs:
    if f["kind"] == "imbalance":
        break
    ahead.append(f)
else:
    # a loaded machine keeps the busy worker runnable but off CPU: what it is then does not
    # count as busy, and past a tenth of the time it cannot reach the 80% the finding needs
    pre = [f for f in fs if f["kind"] == "sched_delay" and f["numbers"].get("cause") == "preemption"]
    m = pre and re.search(r"\(([\d.]+)% of their time", pre[0]["title"])
    if m and float(m.group(1)) >= 10:
        skip("the machine kept the workers runnable but off CPU %s%% of their time: the busy one cannot reach the 80%% an imbalance needs" % m.group(1))
    fail("no imbalance finding: %s" % [f["title"] for f in fs])
if [f for f in ahead if not (f["kind"] == "sched_delay" and f["numbers"]["cause"] == "preemption")]:
    fail("before the imbalance: %s" % [f["title"] for f in ahead])
n = f["numbers"]
if n["busy_worker_pct"] < 80 or n["idle_worker_pct"] > 20:
    fail("numbers %s" % n)
info = f["title"]
'
	else
		pl_fail check-imbalance-exit "exit status $SRC"
	fi
else
	pl_fail check-imbalance "$PL_ERR"
fi

# sleep_counted MS WITHIN_MS: a /sleep?ms=MS request in the background (CURL) that /stats counts
# (its coroutine parked, waiting for its timer) within WITHIN_MS of its start: returns 0 then, for
# the caller to act before the timer's deadline. On a loaded machine seeing /stats can take
# longer, and then the scenario cannot happen (the timer fires on time): tried again, up to 3
# times. Returns 1 (SLOW=3: every try was late) or 2 (never counted), BODY the last /stats.
sleep_counted() {
	local attempt t0
	SLOW=0
	for attempt in 1 2 3; do
		t0=$(date +%s%N)
		curl -sS --max-time 20 -o "$SDIR/sleep.body" "http://127.0.0.1:$SPORT/sleep?ms=$1" \
			2>/dev/null &
		CURL=$!
		PL_PIDS+=("$CURL")
		if ! d9_wait_for 10 eval 'pl_get /stats; case "$BODY" in *"\"sleep\":'"$attempt"'"*) true ;; *) false ;; esac'; then
			return 2
		fi
		SLOW=$((SLOW + 1))
		[ $(($(date +%s%N) - t0)) -lt $(($2 * 1000000)) ] && return 0
		wait "$CURL"
	done
	return 1
}

# ---- a late timer: a sleeping coroutine behind a hog --------------------------------------------
if pl_start "$T/late" "$ST_HTTP" --; then
	# /stats counts a request before its handler runs, and the handler parks at once: once
	# /stats shows it, the sleeping coroutine waits for its timer. The burn must start before
	# that timer's deadline: on a loaded machine seeing /stats can take longer, and then the
	# scenario did not happen (the timer fired on time); it is tried again, up to 3 times
	if sleep_counted 600 300; then
		pl_get "/burn?ms=1000"
		wait "$CURL"
		if pl_session_quit && [ "$SRC" = 0 ]; then
			run_check check-late-timer "$SDIR/trace" hog '
late = [f for f in fs if f["kind"] == "late_timers"]
if not late:
    fail("no late_timers finding: %s" % [f["kind"] for f in fs])
n = late[0]["numbers"]
if n["coroutine_timers_late"] < 1 or n["coroutine_timers_late_max_ns"] < 200e6:
    fail("late timers %s, want one coroutine timer >= 200 ms late" % n)
info += "; then " + late[0]["title"]
'
		else
			pl_fail check-late-timer-exit "${PL_ERR:-exit status $SRC}"
		fi
	elif [ "$SLOW" = 3 ]; then
		# the machine is too loaded to set the scenario up: a precondition, not a finding
		pl_skip check-late-timer "/stats counted the /sleep request only after 300 ms in 3 tries (a loaded machine): $BODY"
	else
		pl_fail check-late-timer "/stats never counted the /sleep request: $BODY"
	fi
else
	pl_fail check-late-timer "$PL_ERR"
fi

# ---- a late loop wait: the process is stopped while its scheduler waits for a timer ------------
# a coroutine in /sleep?ms=1000 (counted by /stats, so parked): libst waits in select() with
# that timeout; SIGSTOP for 2 s, SIGCONT: the wait times out about 1 s late, with no poll and no
# wait for a CPU to explain it. The stop must come before the timer's deadline: on a loaded
# machine seeing /stats can take longer, and then the scenario did not happen (the timer fired
# on time); it is tried again, up to 3 times, as the late timer above
if pl_start "$T/stopped" "$ST_HTTP" --; then
	if sleep_counted 1000 500; then
		kill -STOP "$SPID"
		sleep 2 # the injected stop (not a wait for a condition)
		kill -CONT "$SPID"
		wait "$CURL"
		if pl_session_quit && [ "$SRC" = 0 ]; then
			run_check check-late-wait "$SDIR/trace" late_timers '
n = first["numbers"]
if n["loop_waits_late"] < 1 or n["loop_waits_late_max_ns"] < 500e6 or first["severity"] == "info":
    fail("late timers %s (%s), want a loop wait >= 500 ms late, not info" % (n, first["severity"]))
'
		else
			pl_fail check-late-wait-exit "${PL_ERR:-exit status $SRC}"
		fi
	elif [ "$SLOW" = 3 ]; then
		# the machine is too loaded to set the scenario up: a precondition, not a finding
		pl_skip check-late-wait "/stats counted the /sleep request only after 500 ms in 3 tries (a loaded machine): $BODY"
	else
		pl_fail check-late-wait "/stats never counted the /sleep request: $BODY"
	fi
else
	pl_fail check-late-wait "$PL_ERR"
fi

# ---- preemption: the worker shares its CPU with a CPU hog ---------------------------------------
CPU=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //' | tr ',' '\n' | sed 's/.*-//' | tail -n1)
if ! command -v taskset >/dev/null || ! command -v wrk >/dev/null || [ -z "$CPU" ]; then
	pl_skip check-preempt "taskset or wrk is not installed"
elif [ "$(nproc)" -lt 2 ]; then
	pl_skip check-preempt "one CPU: the client would share it with the hog"
elif pl_start "$T/preempt" "$ST_HTTP" --; then
	taskset -a -p -c "$CPU" "$SPID" >/dev/null
	taskset -c "$CPU" sh -c 'while :; do :; done' &
	HOG=$!
	PL_PIDS+=("$HOG")
	others=$(python3 -c "import os; c = sorted(os.sched_getaffinity(0) - {$CPU}); print(','.join(map(str, c)))")
	taskset -c "$others" wrk -t1 -c4 -d2s "http://127.0.0.1:$SPORT/fast" >"$SDIR/wrk.out" 2>&1
	kill -KILL "$HOG" 2>/dev/null
	wait "$HOG" 2>/dev/null
	if pl_session_quit && [ "$SRC" = 0 ]; then
		# the scheduling delay comes first, unless a machine busy with other work besides the
		# hog preempted polls for long enough to be a hog finding of their own: one that says
		# most of its time was the wait for a CPU
		run_check check-preempt "$SDIR/trace" "" '
sd = [i for i, f in enumerate(fs) if f["kind"] == "sched_delay"]
if not sd:
    fail("no sched_delay finding: %s" % [(f["kind"], f["title"]) for f in fs])
for f in fs[:sd[0]]:
    n = f["numbers"]
    if f["kind"] != "hog" or 2 * n.get("preempted_ns", 0) < n.get("total_ns", 1):
        fail("before the scheduling delay: %s (%s)" % (f["kind"], f["title"]))
first = fs[sd[0]]
if first["numbers"]["cause"] != "preemption":
    fail("scheduling delay cause %s, want preemption" % first["numbers"]["cause"])
info = first["title"] + ("" if not sd[0] else " (after %d preempted hog finding(s))" % sd[0])
'
	else
		pl_fail check-preempt-exit "${PL_ERR:-exit status $SRC}"
	fi
else
	pl_fail check-preempt "$PL_ERR"
fi

# ---- drops: the disk is full for a while --------------------------------------------------------
DISK=$T/disk
if [ "$(id -u)" -ne 0 ] || ! d9_mount_tmpfs "$DISK" 2m 2>/dev/null; then
	pl_skip check-drops "cannot mount a tmpfs: ${D9_MOUNT_ERR:-not root}"
else
	# 64 KiB free: the header and the first chunks fit, the /fanout requests' events do not
	head -c $((2048 * 1024 - 64 * 1024)) /dev/zero >"$DISK/filler" 2>/dev/null
	if pl_start "$T/drops" "$ST_HTTP" D9_TRACE_PATH="$DISK/t/trace.bin" D9_COMPRESS=0 --; then
		for _ in $(seq 40); do
			grep -qs 'cannot write' "$SDIR/stderr" && break
			pl_get "/fanout?k=1024"
		done
		if d9_wait_for 20 grep -qs 'cannot write' "$SDIR/stderr"; then
			rm -f "$DISK/filler"
			pl_get /fast
			if pl_session_quit && [ "$SRC" = 0 ]; then
				run_check check-drops "$DISK/t" drops '
if first["severity"] != "serious" or not first["numbers"].get("write_error"):
    fail("drops finding %s: %s" % (first["severity"], first["numbers"]))
'
			else
				pl_fail check-drops-exit "${PL_ERR:-exit status $SRC}"
			fi
		else
			pl_fail check-drops "the agent never said it could not write: $(head -c 300 "$SDIR/stderr")"
		fi
	else
		pl_fail check-drops "$PL_ERR"
	fi
fi

# ---- a narrowed recorder: a root process's child gives up root -----------------------------------
NUID=$(id -u nobody 2>/dev/null)
NGID=$(id -g nobody 2>/dev/null)
if [ "$(id -u)" != 0 ] || [ -z "$NUID" ] || [ -z "$NGID" ]; then
	pl_skip check-recorder "needs root and a user nobody (a process that gives up root)"
elif ! cc -O1 -o "$T/priv-drop" "$PL_ROOT/tests/integration/priv-drop.c" 2>"$T/cc.err"; then
	pl_fail check-recorder "cannot build priv-drop.c: $(head -c 300 "$T/cc.err")"
else
	mkdir -m 0700 "$T/priv"
	# late: the child's agent profiled as root before the drop (test-real-privdrop.sh)
	if timeout -s KILL 120 env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/priv" D9_FLUSH_INTERVAL=50ms \
		D9_CPU_PROFILE=99 "$T/priv-drop" late "$T/priv" "$NUID" "$NGID" >"$T/priv.out" 2>"$T/priv.err"; then
		# what the drop takes depends on perf_event_paranoid: 2 (Debian's default) kernel
		# frames, 3 perf itself, 1 or less nothing
		run_check check-recorder "$T/priv" "" '
par = int(open("/proc/sys/kernel/perf_event_paranoid").read())
r = [f for f in fs if f["kind"] == "recorder"]
if not r:
    fail("no recorder finding for a privilege drop: %s" % [f["kind"] for f in fs])
n = r[0]["numbers"]
want = ("yes" if par >= 3 else "no", "yes" if par >= 2 else "no", "warning" if par >= 3 else "info")
got = (n["perf_denied"], n["kernel_samples_lost"], r[0]["severity"])
if n["to_uid"] != int(sys.argv[7]) or got != want:
    fail("recorder finding %s to uid %d, want %s to uid %s (perf_event_paranoid %d)" % (got, n["to_uid"], want, sys.argv[7], par))
info = r[0]["title"]
' "$NUID"
	else
		pl_fail check-recorder "priv-drop exited $?: $(head -c 300 "$T/priv.err")"
	fi
fi

# ---- a clean run ---------------------------------------------------------------------------------
if pl_start "$T/clean" "$ST_HTTP" D9_CPU_PROFILE=999 --; then
	pl_get /fast
	pl_get "/sleep?ms=5"
	pl_get /fast
	# the worker's run delay as the kernel counts it (the main thread is st-http's only
	# worker), read just before the quit
	CLEAN_SS=$(cat "/proc/$SPID/schedstat" 2>/dev/null)
	if pl_session_quit && [ "$SRC" = 0 ]; then
		# the main coroutine's polls are st-http's start-up (st_init, the listener, the
		# port file), as long as a loaded machine makes them (21 ms once, 8 of it waiting
		# for a CPU): the claim is about serving, in the connections' coroutines. A
		# preemption finding is the machine's other work, true on a loaded machine, when
		# the kernel counted at least that much run delay for the worker (the quit's own few
		# milliseconds came after the reading: 20 ms of slack)
		run_check check-clean "$SDIR/trace" "" '
ss = sys.argv[7].split()
delay = int(ss[1]) if len(ss) == 3 else -1
def machine(f):
    n = f.get("numbers", {})
    if delay < 0:
        return False
    if f["kind"] == "sched_delay" and n.get("cause") == "preemption":
        return n.get("worker_sched_wait_ns", 1 << 62) <= delay + 20000000
    # timers late because their worker waited for a CPU, no longer than it did
    return (f["kind"] == "late_timers" and f["title"].endswith("it waited for a CPU (preemption)")
            and n.get("total_ns", 1 << 62) <= delay + 20000000)
def fine(f):
    return f["severity"] == "info" or f.get("numbers", {}).get("location") == "main" or machine(f)
bad = [(f["severity"], f["title"]) for f in fs if not fine(f)]
if bad or (rc != 0 and not all(f["severity"] == "info" or machine(f) for f in fs)):
    fail("exit %d, findings %s (the worker'"'"'s run delay by the kernel: %s ns)" % (rc, bad, delay))
info = "%d info finding(s)" % sum(f["severity"] == "info" for f in fs) + "".join(
    ", %s of the machine'"'"'s preemption: %.1f ms of the kernel'"'"'s %.1f" %
    (f["kind"], f["numbers"]["total_ns"] / 1e6, delay / 1e6) for f in fs if machine(f))
' "$CLEAN_SS"
	else
		pl_fail check-clean-exit "${PL_ERR:-exit status $SRC}"
	fi
else
	pl_fail check-clean "$PL_ERR"
fi
