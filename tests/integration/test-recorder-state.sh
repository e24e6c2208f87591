#!/usr/bin/env bash
# test-recorder-state.sh: the trace says when the recorder was narrowed (RecorderState
# definitions, FORMAT.md section 10; README.md "### check", finding "recorder"). Real denials, no
# mocks: st-http runs under the agent behind a launcher that narrows it, so the agent is in
# st-http alone (the launcher runs `env LD_PRELOAD=... st-http`).
#   - recorder-seccomp: perf_event_open denied by a seccomp filter (build/tests/no-perf, EACCES),
#     D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1, /burn for CPU time, D9_ROTATION_PERIOD=1s until there
#     are 3 segments: every segment's `dump` holds RecorderState cpu_profile/fallback errno 13 and
#     sched_events/off, nothing else (a narrowing of the first segment stays visible in every
#     later one), `summary` says "recorder: CPU samples from ctimer (perf_event_open(cpu-clock):
#     Permission denied)" (text and JSON), the ctimer samples are there, and `check --json` has
#     an info "recorder" finding with the hint about perf, and one for the off-CPU samples.
#   - recorder-nobody: D9_SCHED_EVENTS=1 as user nobody (setpriv; SKIP: not root, no nobody):
#     what is expected follows /proc/sys/kernel/perf_event_paranoid: <= 1 no sched_events record;
#     2 sched_events off (EACCES or EPERM) and CPU samples of user time only; >= 3 sched_events off
#     and CPU samples from ctimer. check: the sched_events finding is info or warning.
#   - recorder-fdcap: epoll-http -T 10 with D9_CPU_PROFILE=99 under prlimit --nofile=64: perf
#     descriptors capped at 8, RecorderState perf_fds/limited and a check finding with the hint
#     about RLIMIT_NOFILE (SKIP: no prlimit).
#   - recorder-clean: the same as root: no RecorderState in any segment, no "recorder" finding
#     (SKIP when perf_event_open is denied to root here: the agent says so).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"
pl_setup recorder-state
pl_san_setup recorder-state-setup || exit 0
NOPERF=$PL_ROOT/build/tests/no-perf
PAR=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 2)

# rs_start DIR LAUNCHER [VAR=value ...] [-- SERVER_ARGS...]: st-http (RS_BIN: another test
# server) under the agent behind LAUNCHER (words, may be empty), like pl_start (D9_TRACE_PATH=DIR/trace/trace.bin, D9_FLUSH_INTERVAL=50ms, the VARs
# after; a free port, -t 50 -q). Sets SPID, SPORT, SDIR; returns 1 (PL_ERR) without a port.
rs_start() {
	local dir=$1 launcher=$2 bin=${RS_BIN:-$ST_HTTP} envs=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	mkdir -p "$dir/trace"
	rm -f "$dir/port"
	SDIR=$dir SBIN=$bin SPORT=""
	# shellcheck disable=SC2086 # the launcher's words
	$launcher env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$dir/trace/trace.bin" D9_FLUSH_INTERVAL=50ms \
		"${envs[@]}" "$bin" -p 0 -P "$dir/port" -t 50 -q "$@" >"$dir/stdout" 2>"$dir/stderr" &
	SPID=$!
	PL_PIDS+=("$SPID")
	if d9_wait_for 30 eval '[ -s "$dir/port" ] || ! pl_alive "$SPID"' && [ -s "$dir/port" ]; then
		SPORT=$(cat "$dir/port")
		return 0
	fi
	PL_ERR="$(basename "$bin") behind '$launcher': no port file within $((30 * D9_SLOW)) s (stderr: $(head -c 300 "$dir/stderr"))"
	kill -KILL "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
	return 1
}

rs_nsegs() { [ "$(pl_trace_files "$SDIR/trace" | wc -l)" -ge "$1" ]; }

# rs_check NAME PY [ARG...]: dumps every segment of $SDIR/trace (sanitizer build), runs summary
# (text and --json) and check --json on the trace, then the Python checks PY with segs (one list
# of RecorderState records per segment, as dump prints them, with "text" resolved), summ (the
# summary JSON), stext (its text), fs (check's findings), rec (the "recorder" findings) and
# args; prints PASS/FAIL NAME.
rs_check() {
	local name=$1 code=$2 f
	shift 2
	rm -rf "$T/$name.dumps"
	mkdir -p "$T/$name.dumps"
	for f in $(pl_trace_files "$SDIR/trace"); do
		d9_san_once "$T/$name.dumps/$f.jsonl" "$T/$name.err" "$SAN" dump "$SDIR/trace/$f"
	done
	d9_san_once "$T/$name.sum.txt" "$T/$name.err" "$SAN" summary "$SDIR/trace"
	d9_san_once "$T/$name.sum.json" "$T/$name.err" "$SAN" summary --json "$SDIR/trace"
	d9_san_once "$T/$name.check.json" "$T/$name.err" "$SAN" check --json "$SDIR/trace"
	if grep -qE 'runtime error|AddressSanitizer|LeakSanitizer' "$T/$name.err"; then
		pl_fail "$name" "sanitizer report: $(grep -m1 -E 'runtime error|Sanitizer' "$T/$name.err")"
		return
	fi
	python3 - "$name" "$T/$name.dumps" "$T/$name.sum.json" "$T/$name.sum.txt" \
		"$T/$name.check.json" "$@" <<PYEOF
import glob, json, os, sys
name, ddir, sjson, stxt, cjson = sys.argv[1:6]
args = sys.argv[6:]
def fail(why):
    print("FAIL %s: %s" % (name, why))
    sys.exit(0)
segs = []
for p in sorted(glob.glob(os.path.join(ddir, "*.jsonl"))):
    strings, recs = {}, []
    for line in open(p):
        try:
            r = json.loads(line)
        except Exception as e:
            fail("dump of %s: a line does not parse: %s" % (os.path.basename(p), e))
        if r.get("rec") != "def":
            continue
        if r["kind"] == "String":
            strings[r["id"]] = r["value"]
        elif r["kind"] == "RecorderState":
            r["text"] = strings.get(r["text"], "") if r["text"] else ""
            recs.append(r)
    segs.append(recs)
if not segs:
    fail("no segment in the trace")
try:
    summ = json.load(open(sjson))
    cj = json.load(open(cjson))
except Exception as e:
    fail("JSON does not parse: %s" % e)
stext = open(stxt).read()
fs = cj["findings"]
rec = [f for f in fs if f["kind"] == "recorder"]
info = "%d segment(s)" % len(segs)
$code
print("PASS %s: %s" % (name, info))
PYEOF
}

# ---- perf_event_open denied by seccomp: CPU samples from ctimer, said in every segment ---------
if [ ! -x "$NOPERF" ]; then
	pl_fail recorder-seccomp "$NOPERF is not built (make all)"
elif rs_start "$T/seccomp" "$NOPERF" D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1 D9_ROTATION_PERIOD=1s; then
	# CPU time for the ctimer to sample, until the wall-clock rotation made 3 segments
	rs_burn() { pl_get "/burn?ms=20"; rs_nsegs 3; }
	if ! d9_wait_for 60 rs_burn; then
		pl_fail recorder-seccomp "fewer than 3 segments within $((60 * D9_SLOW)) s: $(pl_trace_files "$SDIR/trace" | tr '\n' ' ')"
	elif pl_session_quit && [ "$SRC" = 0 ]; then
		rs_check recorder-seccomp '
want = ("cpu_profile", "fallback")
for i, recs in enumerate(segs):
    got = [r for r in recs if (r["feature"], r["state"]) == (1, 2)]
    if len(got) != 1 or got[0]["errno"] != 13 or got[0]["text"] != "perf_event_open(cpu-clock)":
        fail("segment %d of %d: RecorderState %s, want one cpu_profile/fallback errno 13" % (i, len(segs), recs))
    if sorted((r["feature"], r["state"]) for r in recs) != [(1, 2), (2, 1)]:
        fail("segment %d: RecorderStates %s, want the fallback and off-CPU samples off" % (i, recs))
line = "recorder: CPU samples from ctimer (perf_event_open(cpu-clock): Permission denied)"
if line not in stext:
    fail("summary does not say %r" % line)
pr = summ["processes"][0].get("recorder", [])
if sorted((r["feature"], r["state"], r["errno"]) for r in pr) != [("cpu_profile", "fallback", 13), ("sched_events", "off", 0)]:
    fail("summary --json recorder: %s" % pr)
n = summ["cpu_samples"]["on"] + summ["cpu_samples"]["off"]
if n == 0:
    fail("no CPU samples: the ctimer fallback did not sample")
fb = [f for f in rec if "CPU samples from ctimer" in f["title"]]
off = [f for f in rec if "off-CPU samples off" in f["title"]]
if len(rec) != 2 or len(fb) != 1 or len(off) != 1 or fb[0]["severity"] != "info" \
        or "perf_event_open" not in fb[0]["hint"] or off[0]["severity"] not in ("info", "warning"):
    fail("check recorder findings: %s" % [(f["severity"], f["title"], f["hint"]) for f in rec])
info += ", %d ctimer samples; check: %s" % (n, fb[0]["title"])
'
	else
		pl_fail recorder-seccomp-exit "${PL_ERR:-exit status $SRC}"
	fi
else
	pl_fail recorder-seccomp "$PL_ERR"
fi

# ---- D9_SCHED_EVENTS as an unprivileged user: what perf_event_paranoid allows ---------------------
NUID=$(id -u nobody 2>/dev/null)
NGID=$(id -g nobody 2>/dev/null)
if [ "$(id -u)" != 0 ] || [ -z "$NUID" ] || [ -z "$NGID" ] || ! command -v setpriv >/dev/null; then
	pl_skip recorder-nobody "needs root, a user nobody and setpriv (a process that is not root)"
else
	chmod o+x "$T"
	mkdir -p "$T/nobody/trace"
	chown -R "$NUID:$NGID" "$T/nobody"
	if rs_start "$T/nobody" "setpriv --reuid=$NUID --regid=$NGID --clear-groups" \
		D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1; then
		pl_get "/burn?ms=20"
		pl_get "/block?ms=20"
		if pl_session_quit && [ "$SRC" = 0 ]; then
			rs_check recorder-nobody '
par = int(args[0])
recs = segs[-1]
got = sorted((r["feature"], r["state"]) for r in recs)
sched = [r for r in recs if r["feature"] == 2]
if par <= 1:
    want = []
elif par == 2:
    want = [(1, 3), (2, 1)]
else:
    want = [(1, 2), (2, 1)]
if got != want:
    fail("perf_event_paranoid %d: RecorderStates (feature, state) %s, want %s: %s" % (par, got, want, recs))
if sched and (sched[0]["errno"] not in (1, 13) or sched[0]["text"] != "perf_event_open(context-switches)"):
    fail("sched_events record %s, want errno EACCES or EPERM" % sched[0])
if sched:
    r = [f for f in rec if "off-CPU samples off" in f["title"]]
    if len(r) != 1 or r[0]["severity"] not in ("info", "warning") or "perf_event_paranoid" not in r[0]["hint"]:
        fail("check: no recorder finding for the off-CPU samples: %s" % [(f["severity"], f["title"]) for f in rec])
    if "recorder: off-CPU samples off (perf_event_open(context-switches): " not in stext:
        fail("summary text does not say off-CPU samples are off")
    info += "; check: " + r[0]["title"]
elif rec:
    fail("perf_event_paranoid %d: recorder findings %s" % (par, [f["title"] for f in rec]))
info += " (perf_event_paranoid %d)" % par
' "$PAR"
		else
			pl_fail recorder-nobody-exit "${PL_ERR:-exit status $SRC}"
		fi
	else
		pl_fail recorder-nobody "$PL_ERR"
	fi
fi

# ---- perf descriptors capped by RLIMIT_NOFILE: some workers not profiled ---------------------------
# 10 workers of epoll-http, each wanting one cpu-clock descriptor, under RLIMIT_NOFILE 64: the
# agent keeps to 1/8 of it (8), so two workers are not profiled
if ! command -v prlimit >/dev/null; then
	pl_skip recorder-fdcap "no prlimit (util-linux)"
elif RS_BIN=$EPOLL_HTTP rs_start "$T/fdcap" "prlimit --nofile=64 --" D9_CPU_PROFILE=99 -- -T 10; then
	pl_get /fast
	if pl_quit && [ "$SRC" = 0 ]; then
		rs_check recorder-fdcap '
recs = segs[-1]
if [(r["feature"], r["state"], r["errno"], r["text"]) for r in recs] != \
        [(3, 3, 0, "perf descriptors capped at 8, 1/8 of RLIMIT_NOFILE 64")]:
    fail("RecorderStates %s, want perf_fds limited at 8" % recs)
if len(rec) != 1 or "some workers not profiled" not in rec[0]["title"] or "RLIMIT_NOFILE" not in rec[0]["hint"]:
    fail("check recorder findings: %s" % [(f["severity"], f["title"], f["hint"]) for f in rec])
info += "; check: " + rec[0]["title"]
'
	else
		pl_fail recorder-fdcap-exit "${PL_ERR:-exit status $SRC}"
	fi
else
	pl_fail recorder-fdcap "$PL_ERR"
fi

# ---- a clean root run: nothing narrowed, nothing said ---------------------------------------------
if [ "$(id -u)" != 0 ]; then
	pl_skip recorder-clean "needs root (perf_event_open with off-CPU samples)"
elif rs_start "$T/clean" "" D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1 D9_ROTATION_PERIOD=1s; then
	rs_clean() { pl_get "/burn?ms=20"; pl_get "/block?ms=5"; rs_nsegs 2; }
	d9_wait_for 60 rs_clean
	if pl_session_quit && [ "$SRC" = 0 ]; then
		if grep -q "perf_event_open" "$SDIR/stderr"; then
			pl_skip recorder-clean "perf_event_open is denied to root here: $(head -c 200 "$SDIR/stderr")"
		else
			rs_check recorder-clean '
bad = [(i, r) for i, recs in enumerate(segs) for r in recs]
if bad:
    fail("RecorderState in a clean run: %s" % bad[:3])
if rec or summ["processes"][0].get("recorder"):
    fail("recorder findings or summary entries in a clean run: %s" % [f["title"] for f in rec])
'
		fi
	else
		pl_fail recorder-clean-exit "${PL_ERR:-exit status $SRC}"
	fi
else
	pl_fail recorder-clean "$PL_ERR"
fi
