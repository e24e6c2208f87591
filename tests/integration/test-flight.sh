#!/usr/bin/env bash
# test-flight.sh: the flight recorder (D9_MODE=flight, agent/flight.c) on the real State Threads
# and epoll test servers. Checked, each through the files on disk and d9-analyze's machine output:
#   - idle: after N requests and >= 10 writer wake-ups (its context switches, read from /proc),
#     the trace directory holds no segment;
#   - poll trigger: a /burn longer than D9_TRIGGER_POLL gives one dump (segments numbered from
#     0: nothing was opened before) whose manifest names the trigger, its threshold and the
#     segments on disk, and which holds the slow poll and the N requests from before it;
#   - a second slow request during D9_FLIGHT_AFTER extends that dump (one manifest, extensions
#     >= 1, both burns in it); a third after the dump, within D9_TRIGGER_COOLDOWN, writes nothing
#     and is said on stderr;
#   - signal (D9_DUMP_SIGNAL=USR2) and file (<stem>.dump-request, removed) triggers: one dump each,
#     the second holding only the requests made after the first (the ring was emptied); a handler
#     the program installs later for the dump signal gets it (busy-workers take-urg), no dump;
#   - an exit during a dump (D9_FLIGHT_AFTER=1h) seals it; its manifest says "ended":"exit"; a
#     manifest whose first segment was deleted goes at the next dump;
#   - blocking call: /block?ms=300 over D9_TRIGGER_BLOCKING=100ms, the call in the dump;
#   - drops: epoll-http with 64 threads and D9_MAX_MEMORY=1M, D9_TRIGGER_DROPS=1, a flush interval
#     longer than the threads take to start;
#   - generic mode (epoll-http): a /block loop turn longer than the threshold triggers;
#   - small chunks are packed: 40 requests in separate chunks fit in D9_MAX_MEMORY=1M, nothing
#     evicted;
#   - memory bound: D9_MAX_MEMORY=1M with a window that does not fit: a dump whose manifest and
#     Dropped records count the evicted events, and the one warning line;
#   - d9-analyze reads only well-formed manifests naming its input (hostile ones, sanitizer build);
#   - d9-analyze: the summary names the trigger (text line, "dumps" in JSON) and polls lists the
#     triggering poll (loop turn) first, marked; the HTML report opens at the trigger in chromium
#     (tests/browser/viewer-flight-test.js; SKIP without chromium and playwright-core).
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup flight

# writer_switches PID: voluntary context switches of the agent's writer thread (d9-writer).
writer_switches() {
	local t
	for t in /proc/"$1"/task/*; do
		if [ "$(cat "$t/comm" 2>/dev/null)" = d9-writer ]; then
			sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "$t/status"
			return 0
		fi
	done
	echo 0
}

# writer_passed PID N: the writer woke N more times than when writer_mark ran.
writer_mark() { W0=$(writer_switches "$1"); }
writer_passed() { [ "$(writer_switches "$1")" -ge $((W0 + $2)) ]; }

# manifests DIR: the dump manifests, one per line.
manifests() { ls "$1" 2>/dev/null | grep -E '\.dump-[0-9]+\.json$'; }
nmanifests() { manifests "$1" | wc -l; }

# fast_gets N: N /fast requests on one keep-alive connection (quick) or fails.
keepalive_gets() {
	python3 - "$SPORT" "$@" <<'PYEOF'
import http.client, sys
port, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for i in range(n):
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit("request %d of %s: status %d" % (i, path, r.status))
PYEOF
}

# check_dump NAME DIR MANIFEST PYTHON [ARGS]: runs PYTHON with m (the manifest), polls (polls
# --json of the manifest's segments), summary (summary --json of them), segs (their paths).
check_dump() {
	local name=$1 dir=$2 man=$3 code=$4
	shift 4
	python3 - "$PL_ANALYZE" "$dir" "$man" "$@" <<PYEOF
import json, os, subprocess, sys
ana, d, man = sys.argv[1], sys.argv[2], sys.argv[3]
args = sys.argv[4:]
def fail(why):
    print("FAIL $name: " + why)
    sys.exit(0)
try:
    m = json.load(open(os.path.join(d, man)))
except Exception as e:
    fail("manifest %s: %s" % (man, e))
# the manifest names segments as sealed (X.bin); the compressor makes them X.bin.gz
segs = [os.path.join(d, s) for s in m.get("segments", [])]
segs = [s + ".gz" if m.get("compressed") and not os.path.exists(s) else s for s in segs]
missing = [s for s in segs if not os.path.exists(s)]
if not segs or missing:
    fail("manifest segments %s: missing %s (dir: %s)" % (m.get("segments"), missing, sorted(os.listdir(d))))
def run(*a):
    p = subprocess.run([ana] + list(a) + segs, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("d9-analyze %s: status %d: %s" % (" ".join(a), p.returncode, p.stderr[:300]))
    return p.stdout
polls = [json.loads(l) for l in run("polls", "--json").splitlines() if l.startswith("{")]
summary = json.loads(run("summary", "--json"))
info = ""
$code
print("PASS $name" + (": " + info if info else ""))
PYEOF
}

# ---- 1. State Threads: idle, poll trigger, extension, cooldown -------------------------------
N=10
D=$T/st/trace
if pl_start "$T/st" "$ST_HTTP" D9_MODE=flight D9_TRIGGER_POLL=150ms D9_FLIGHT_AFTER=15s \
	D9_TRIGGER_COOLDOWN=1h D9_LOG=info --; then
	if ! pl_gets "$N" /fast ok; then
		pl_fail flight-st-requests "$PL_ERR"
	fi
	writer_mark "$SPID"
	if ! d9_wait_for 30 writer_passed "$SPID" 10; then
		pl_fail flight-idle "the writer did not wake 10 times within 30 s ($(writer_switches "$SPID") switches)"
	elif [ -n "$(pl_trace_files "$D")" ] || [ "$(nmanifests "$D")" != 0 ]; then
		pl_fail flight-idle "files written without a trigger: $(ls "$D" | tr '\n' ' ')"
	else
		pl_pass flight-idle "$N requests, $((W0)) -> $(writer_switches "$SPID") writer wake-ups, no segment"
	fi
	# two slow polls: the second while the first's dump is still running (15 s after its
	# start: a wide margin on a loaded machine, where a 400 ms burn once took 2.2 s)
	pl_get "/burn?ms=400"
	b1=$BODY
	pl_get "/burn?ms=400"
	case "$b1 $BODY" in "burn ms=400"*" burn ms=400"*) ;; *) pl_fail flight-st-requests "/burn: '$b1' '$BODY'" ;; esac
	if ! d9_wait_for 60 eval '[ "$(nmanifests "$D")" -ge 1 ]'; then
		pl_fail flight-poll-trigger "no manifest within 60 s: $(ls "$D" | tr '\n' ' '); stderr $(head -c 300 "$T/st/stderr")"
	else
		# a third slow poll after the dump, within the cooldown: refused, said on stderr
		pl_get "/burn?ms=400"
		if d9_wait_for 30 grep -q "within D9_TRIGGER_COOLDOWN" "$T/st/stderr"; then
			pl_pass flight-cooldown "the trigger after the dump was refused: $(grep -m1 'no dump (' "$T/st/stderr" | cut -c1-120)"
		else
			pl_fail flight-cooldown "no refusal on stderr within 30 s: $(tail -c 300 "$T/st/stderr")"
		fi
		d9_wait_settled "$D" gz || pl_fail flight-poll-trigger "$D9_SETTLE_ERR"
		pl_quit
		[ "$SRC" = 0 ] || pl_fail flight-st-exit "exit status $SRC"
		n=$(nmanifests "$D")
		[ "$n" = 1 ] || pl_fail flight-cooldown "$n manifests, want 1: $(manifests "$D" | tr '\n' ' ')"
		check_dump flight-poll-trigger "$D" "$(manifests "$D" | head -n1)" '
n = int(args[0])
t = m["trigger"]
if t["trigger"] != "poll" or t["threshold"] != 150000000 or t["unit"] != "ns":
    fail("trigger %s, want poll over 150ms" % t)
if not (390e6 <= t["value"] < 60e9):
    fail("trigger value %d ns for a 400 ms burn" % t["value"])
if m["thresholds"]["poll_ns"] != 150000000 or m["thresholds"]["after_ns"] != 15000000000:
    fail("thresholds %s" % m["thresholds"])
if not m["segments"][0].endswith(".000000.bin"):
    fail("the first segment of the dump is %s: a segment was written before the trigger" % m["segments"][0])
if m["ended"] != "after":
    fail("ended %s, want after" % m["ended"])
burns = [p for p in polls if p["duration_ns"] >= 390e6]
if len(burns) != 2:
    fail("%d polls >= 390 ms in the dump, want the 2 burns: %s" % (len(burns), [p["duration_ns"] for p in polls][:20]))
first = min(burns, key=lambda p: p["start_ns"])
if abs(first["start_ns"] - t["time_realtime_ns"]) > 2e6 or first["tid"] != t["tid"]:
    fail("trigger at %d tid %d, the first burn poll starts at %d tid %d" % (t["time_realtime_ns"], t["tid"], first["start_ns"], first["tid"]))
conns = {p["coroutine"] for p in polls if p["location"].startswith("serve_conn")}
if len(conns) != n + 2:
    fail("%d connection coroutines in the dump, want %d (the %d requests before the trigger and the 2 burns; not the refused one nor /quit)" % (len(conns), n + 2, n))
# d9-analyze: the trigger in the summary (text and JSON), the triggering poll first in polls
if not polls[0].get("trigger") or polls[0]["start_ns"] != first["start_ns"]:
    fail("polls --json does not list the triggering poll first: %s" % polls[:1])
if sum(1 for p in polls if p.get("trigger")) != 1:
    fail("more than one poll marked as the trigger")
dumps = summary["dumps"]
if len(dumps) != 1 or dumps[0]["trigger"] != "poll" or dumps[0]["value"] != t["value"] or dumps[0]["pid"] != m["pid"]:
    fail("summary --json dumps %s, want the manifest trigger %s" % (dumps, t))
text = run()
if "flight dump triggered by poll > 150ms" not in text or "<- the dump" not in text:
    fail("the summary text does not name the trigger: %s" % text[:400])
ext = m["extensions"]
if ext < 1 or m["extended_by"][0]["trigger"] != "poll":
    fail("extensions %d %s: the second burn did not extend the dump" % (ext, m["extended_by"]))
info = "poll %.0f ms > 150 ms, %d connections, %d segment(s), extended %d time(s)" % (t["value"] / 1e6, len(conns), len(m["segments"]), ext)
' "$N"
		# the HTML report of the dump opens at the trigger (tests/browser/viewer-flight-test.js)
		BR=$PL_ROOT/tests/browser
		if [ ! -x /usr/bin/chromium ] || [ ! -f "$BR/node_modules/playwright-core/package.json" ] ||
			! command -v node >/dev/null; then
			pl_skip flight-viewer-opens-at-trigger "chromium, node or playwright-core is missing (scripts/install-deps.sh installs them)"
		elif ! "$PL_ANALYZE" html -o "$T/st/report.html" "$D" 2>"$T/st/html.err"; then
			pl_fail flight-viewer-opens-at-trigger "d9-analyze html failed: $(head -c 300 "$T/st/html.err")"
		else
			cfg=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[2]))
print(json.dumps({"report": sys.argv[1], "time_ns": str(m["trigger"]["time_realtime_ns"]),
	"what": "poll > 150ms", "value_ns": m["trigger"]["value"], "artifacts": sys.argv[3]}))' "$T/st/report.html" "$D/$(manifests "$D" | head -n1)" \
				"$PL_ROOT/build/test-artifacts/flight")
			timeout -s KILL 300 node "$BR/viewer-flight-test.js" "$cfg" 2>"$T/st/browser.err" ||
				pl_fail flight-viewer-opens-at-trigger "viewer-flight-test.js failed: $(tail -c 300 "$T/st/browser.err")"
		fi
	fi
else
	pl_fail flight-st "$PL_ERR"
fi

# ---- 1b. scheduling delay: two /burn connections accepted in the same turn ------------------------
# A blocking /block?ms=2000 stalls the scheduler while two /burn?ms=300 connect; afterwards both
# are spawned in one turn and the second runs only after the first's 300 ms poll: its Wake ->
# PollStart delay is >= 300 ms. Polls themselves trigger nothing here (D9_TRIGGER_POLL unset).
D=$T/sd/trace
if pl_start "$T/sd" "$ST_HTTP" D9_MODE=flight D9_TRIGGER_SCHED_DELAY=150ms D9_FLIGHT_AFTER=0s --; then
	curl -sS --max-time 30 -o /dev/null "http://127.0.0.1:$SPORT/block?ms=2000" &
	blk=$!
	# clock_nanosleep (230) or nanosleep (35): the scheduler thread is inside the blocking sleep
	d9_wait_for 30 eval 'case "$(cut -d" " -f1 /proc/$SPID/syscall 2>/dev/null)" in 230|35) true ;; *) false ;; esac'
	curl -sS --max-time 30 -o /dev/null "http://127.0.0.1:$SPORT/burn?ms=300" &
	b1=$!
	curl -sS --max-time 30 -o /dev/null "http://127.0.0.1:$SPORT/burn?ms=300" &
	b2=$!
	wait "$blk" "$b1" "$b2"
	if d9_wait_for 60 eval '[ "$(nmanifests "$D")" -ge 1 ]'; then
		d9_wait_settled "$D" gz || pl_fail flight-sched-delay "$D9_SETTLE_ERR"
		pl_quit
		check_dump flight-sched-delay "$D" "$(manifests "$D" | head -n1)" '
t = m["trigger"]
if t["trigger"] != "scheduling delay" or t["value"] < 250e6 or t["threshold"] != 150000000:
    fail("trigger %s, want a scheduling delay >= 300 ms over 150 ms" % t)
sd = summary["sched_delay"]["max_ns"]
if abs(sd - t["value"]) > 2e6:
    fail("the dump s longest scheduling delay is %d ns, the trigger says %d" % (sd, t["value"]))
info = "Wake -> PollStart %.0f ms, as d9-analyze counts it" % (t["value"] / 1e6)
'
	else
		pl_fail flight-sched-delay "no manifest within 60 s (did both /burn connect during the /block?): $(ls "$D" | tr '\n' ' ')"
		pl_quit
	fi
else
	pl_fail flight-sd "$PL_ERR"
fi

# ---- 1c. a blocking call: /block?ms=300 (usleep on the scheduler thread) ---------------------------
D=$T/blk/trace
if pl_start "$T/blk" "$ST_HTTP" D9_MODE=flight D9_TRIGGER_BLOCKING=100ms D9_FLIGHT_AFTER=0s --; then
	pl_gets 2 /fast ok || pl_fail flight-blocking-requests "$PL_ERR"
	pl_get "/block?ms=300"
	if d9_wait_for 60 eval '[ "$(nmanifests "$D")" -ge 1 ]'; then
		d9_wait_settled "$D" gz || pl_fail flight-blocking "$D9_SETTLE_ERR"
		pl_quit
		check_dump flight-blocking "$D" "$(manifests "$D" | head -n1)" '
t = m["trigger"]
if t["trigger"] != "blocking call" or t["value"] < 295e6 or t["threshold"] != 100000000:
    fail("trigger %s, want a blocking call >= 300 ms over 100 ms" % t)
calls = summary["blocking_calls"]
if not calls or max(c["max_ns"] for c in calls) != t["value"]:
    fail("the dump s blocking calls %s, the trigger says %d ns" % (calls, t["value"]))
conns = {p["coroutine"] for p in polls if p["location"].startswith("serve_conn")}
if len(conns) != 3:
    fail("%d connection coroutines, want the 2 /fast before and the /block" % len(conns))
info = "%s of %.0f ms" % (calls[0]["call"], t["value"] / 1e6)
'
	else
		pl_fail flight-blocking "no manifest within 60 s: $(ls "$D" | tr '\n' ' ')"
		pl_quit
	fi
else
	pl_fail flight-blk "$PL_ERR"
fi

# ---- 2. signal and file triggers -------------------------------------------------------------
D=$T/sig/trace
if pl_start "$T/sig" "$ST_HTTP" D9_MODE=flight D9_DUMP_SIGNAL=USR2 D9_FLIGHT_AFTER=0s \
	D9_TRIGGER_COOLDOWN=0 --; then
	pl_gets 5 /fast ok || pl_fail flight-sig-requests "$PL_ERR"
	writer_mark "$SPID"
	d9_wait_for 30 writer_passed "$SPID" 10
	kill -USR2 "$SPID"
	if d9_wait_for 60 eval '[ "$(nmanifests "$D")" -ge 1 ]'; then
		pl_gets 3 /fast ok || pl_fail flight-sig-requests "$PL_ERR"
		writer_mark "$SPID"
		d9_wait_for 30 writer_passed "$SPID" 10
		: >"$D/trace.dump-request"
		if d9_wait_for 60 eval '[ "$(nmanifests "$D")" -ge 2 ]'; then
			[ -e "$D/trace.dump-request" ] && pl_fail flight-file-trigger "the request file is still there"
		else
			pl_fail flight-file-trigger "no second manifest within 60 s: $(ls "$D" | tr '\n' ' ')"
		fi
	else
		pl_fail flight-signal-trigger "no manifest within 60 s after SIGUSR2: $(ls "$D" | tr '\n' ' ')"
	fi
	d9_wait_settled "$D" gz || pl_fail flight-signal-trigger "$D9_SETTLE_ERR"
	pl_quit
	[ "$SRC" = 0 ] || pl_fail flight-sig-exit "exit status $SRC (SIGUSR2 must not kill the host)"
	check_dump flight-signal-trigger "$D" "$(manifests "$D" | sed -n 1p)" '
if m["trigger"]["trigger"] != "signal" or m["trigger"]["value"] != 12:
    fail("trigger %s, want signal 12" % m["trigger"])
conns = {p["coroutine"] for p in polls if p["location"].startswith("serve_conn")}
if len(conns) != 5:
    fail("%d connection coroutines, want the 5 requests before the signal" % len(conns))
info = "SIGUSR2: %d requests in the dump" % len(conns)
'
	[ "$(nmanifests "$D")" -ge 2 ] && check_dump flight-file-trigger "$D" "$(manifests "$D" | sed -n 2p)" '
if m["trigger"]["trigger"] != "file":
    fail("trigger %s, want file" % m["trigger"])
conns = {p["coroutine"] for p in polls if p["location"].startswith("serve_conn")}
if len(conns) != 3:
    fail("%d connection coroutines, want the 3 requests after the first dump only" % len(conns))
info = "%s: %d requests in the dump, request file removed" % (m["segments"], len(conns))
'
else
	pl_fail flight-sig "$PL_ERR"
fi

# ---- 2b. a dump ends at its time, not at the next flush-interval pass ---------------------------
# The writer sleeps until its next periodic pass (here a minute away) or a wake-up; the end of a
# running dump (D9_FLIGHT_AFTER after the trigger) is one of the times it wakes for. Before, the
# dump waited for the periodic pass. The deadline is far above the second the dump lasts.
D=$T/after/trace
if pl_start "$T/after" "$ST_HTTP" D9_MODE=flight D9_DUMP_SIGNAL=USR2 D9_FLIGHT_AFTER=1s \
	D9_FLUSH_INTERVAL=60s --; then
	pl_gets 2 /fast ok || pl_fail flight-after-requests "$PL_ERR"
	kill -USR2 "$SPID"
	if d9_wait_for 30 eval '[ "$(nmanifests "$D")" -ge 1 ]'; then
		pl_quit
		check_dump flight-ends-on-time "$D" "$(manifests "$D" | head -n1)" '
if m["trigger"]["trigger"] != "signal" or m["ended"] != "after":
    fail("trigger %s, ended %s: want signal, after" % (m["trigger"], m["ended"]))
info = "a 1 s dump sealed although the next periodic pass was a minute away"
'
	else
		pl_fail flight-ends-on-time "no manifest within 30 s of SIGUSR2 (D9_FLIGHT_AFTER=1s, D9_FLUSH_INTERVAL=60s): $(ls "$D" | tr '\n' ' ')"
		pl_quit
	fi
else
	pl_fail flight-after "$PL_ERR"
fi

# ---- 2a. an exit during a dump seals it: the manifest says so -------------------------------------
D=$T/exit/trace
if pl_start "$T/exit" "$ST_HTTP" D9_MODE=flight D9_FLIGHT_AFTER=1h --; then
	pl_gets 2 /fast ok || pl_fail flight-exit-requests "$PL_ERR"
	: >"$D/trace.dump-request"
	# the dump runs once the request file is taken and a segment is open
	if d9_wait_for 60 eval '[ ! -e "$D/trace.dump-request" ] && [ -n "$(pl_trace_files "$D")" ]'; then
		pl_gets 2 /fast ok || pl_fail flight-exit-requests "$PL_ERR"
		pl_quit
		if [ "$SRC" != 0 ] || [ "$(nmanifests "$D")" != 1 ]; then
			pl_fail flight-exit-during-dump "exit $SRC, manifests: $(ls "$D" | tr '\n' ' ')"
		else
			check_dump flight-exit-during-dump "$D" "$(manifests "$D" | head -n1)" '
if m["ended"] != "exit" or m["trigger"]["trigger"] != "file":
    fail("ended %s, trigger %s: want exit, file" % (m["ended"], m["trigger"]))
if [s for s in segs if s.endswith(".active")] or summary["data_quality"]["truncated_segments"]:
    fail("the dump was not sealed at the exit: %s" % summary["data_quality"])
conns = {p["coroutine"] for p in polls if p["location"].startswith("serve_conn")}
if len(conns) < 4:
    fail("%d connection coroutines, want the 2 requests before the trigger and the 2 after" % len(conns))
info = "sealed at the exit, %d connections" % len(conns)
'
		fi
	else
		pl_fail flight-exit-during-dump "the request file was not taken within 60 s: $(ls "$D" | tr '\n' ' ')"
		pl_quit
	fi
else
	pl_fail flight-exit "$PL_ERR"
fi

# ---- 2d. hostile manifests: d9-analyze (sanitizer build) reads only well-formed ones ---------------
# The signal dump's segments and manifest copied, with manifests beside them that are truncated,
# overlong, full of huge numbers or escapes, a directory, a link, and one naming another segment.
D=$T/sig/trace
H=$T/hostile
if [ "$(nmanifests "$D")" -ge 1 ] && pl_san_setup flight-hostile-manifests; then
	mkdir -p "$H"
	good=$(manifests "$D" | sed -n 1p)
	cp "$D/$good" "$H/"
	python3 - "$D/$good" "$H" <<'PYEOF'
import json, os, sys
src, h = sys.argv[1], sys.argv[2]
m = json.load(open(src))
for s in m["segments"]:
    for suf in ("", ".gz"):
        if os.path.exists(os.path.join(os.path.dirname(src), s + suf)):
            os.system("cp '%s' '%s'" % (os.path.join(os.path.dirname(src), s + suf), h))
text = open(src).read()
base = os.path.basename(src).split(".dump-")[0]
bad = {
    "truncated": text[: len(text) // 2],
    "huge": text.replace('"value":', '"value":99999999999999999999999999'),
    "escape": text.replace('"trigger":"signal"', '"trigger":"sig\\"nal\\u0000"'),
    "nokeys": '{"d9_dump":1,"segments":[%s]}' % ",".join('"%s"' % s for s in m["segments"]),
    "noquote": text.replace('"unit":"signal"', '"unit":signal'),
    "long": text.replace('"trigger":"signal"', '"trigger":"' + "x" * 70000 + '"'),
    "other": text.replace(m["segments"][0], "trace.1.000000.bin"),
}
for i, (k, v) in enumerate(bad.items()):
    open(os.path.join(h, "%s.%d.dump-%06d.json" % (base.split(".")[0], 900 + i, i)), "w").write(v)
os.mkdir(os.path.join(h, "trace.999.dump-000009.json"))
os.symlink(src, os.path.join(h, "trace.998.dump-000008.json"))
PYEOF
	out=$("$SAN" summary --json "$H" 2>"$T/hostile.err")
	rc=$?
	n=$(printf '%s' "$out" | python3 -c 'import json, sys; d = json.load(sys.stdin)["dumps"]; print(len(d), d[0]["trigger"] if d else "")' 2>/dev/null)
	if [ "$rc" != 0 ] || grep -q "runtime error\|Sanitizer" "$T/hostile.err"; then
		pl_fail flight-hostile-manifests "exit $rc: $(head -c 300 "$T/hostile.err")"
	elif [ "$n" != "1 signal" ]; then
		pl_fail flight-hostile-manifests "dumps read: '$n', want the one good manifest (signal)"
	else
		pl_pass flight-hostile-manifests "9 malformed or foreign manifests skipped, the good one read"
	fi
fi

# ---- 2c. a manifest goes with its first segment (deleted by the budget; here by the test) ---------
D=$T/prune/trace
if pl_start "$T/prune" "$ST_HTTP" D9_MODE=flight D9_FLIGHT_AFTER=0s D9_TRIGGER_COOLDOWN=0 --; then
	pl_gets 1 /fast ok || pl_fail flight-prune-requests "$PL_ERR"
	: >"$D/trace.dump-request"
	if d9_wait_for 60 eval '[ "$(nmanifests "$D")" = 1 ]' && d9_wait_settled "$D" gz; then
		first=$(manifests "$D")
		rm -f "$D/trace.$SPID.000000.bin" "$D/trace.$SPID.000000.bin.gz"
		pl_gets 1 /fast ok || pl_fail flight-prune-requests "$PL_ERR"
		: >"$D/trace.dump-request"
		if ! d9_wait_for 60 eval '[ -n "$(manifests "$D" | grep -v "^$first\$")" ]'; then
			pl_fail flight-manifest-pruned "no second manifest within 60 s: $(ls "$D" | tr '\n' ' ')"
		elif [ -e "$D/$first" ] || [ "$(nmanifests "$D")" != 1 ]; then
			pl_fail flight-manifest-pruned "the manifest of the deleted segment is still there: $(ls "$D" | tr '\n' ' ')"
		else
			pl_pass flight-manifest-pruned "$first went with its segment; $(manifests "$D") stays"
		fi
	else
		pl_fail flight-manifest-pruned "no first dump within 60 s: $(ls "$D" | tr '\n' ' ')"
	fi
	pl_quit
else
	pl_fail flight-prune "$PL_ERR"
fi

# ---- 2b. the dump signal is never stolen: a handler the program installs later gets it ---------
# busy-workers installs its own SIGURG handler right after printing t=1; D9_DUMP_SIGNAL=URG was
# installed at load. Every SIGURG sent after t=2 must reach the program, and no dump be written.
BW=$PL_ROOT/build/tests/busy-workers
if [ -x "$BW" ]; then
	mkdir -p "$T/urg"
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/urg/trace/trace.bin" D9_MODE=flight D9_DUMP_SIGNAL=URG \
		"$BW" 2 4 take-urg >"$T/urg/stdout" 2>"$T/urg/stderr" &
	SPID=$!
	PL_PIDS+=("$SPID")
	if d9_wait_for 30 grep -q "^t=2 " "$T/urg/stdout"; then
		kill -URG "$SPID"
		pl_wait_exit 60
		got=$(sed -n 's/^urg=//p' "$T/urg/stdout")
		if [ "$SRC" != 0 ] || [ "${got:-0}" -lt 1 ]; then
			pl_fail flight-signal-not-stolen "exit $SRC, the program got ${got:-no} SIGURG: $(tail -c 200 "$T/urg/stdout")"
		elif [ "$(nmanifests "$T/urg/trace")" != 0 ] || [ -n "$(pl_trace_files "$T/urg/trace")" ]; then
			pl_fail flight-signal-not-stolen "a dump was written: $(ls "$T/urg/trace" | tr '\n' ' ')"
		else
			pl_pass flight-signal-not-stolen "the program's own handler got SIGURG ($got), no dump"
		fi
	else
		pl_fail flight-signal-not-stolen "busy-workers printed no t=2 within 30 s"
	fi
else
	pl_skip flight-signal-not-stolen "$BW is not built (make all)"
fi

# ---- 3. generic mode: a loop turn --------------------------------------------------------------
D=$T/epoll/trace
if pl_start "$T/epoll" "$EPOLL_HTTP" D9_MODE=flight D9_TRIGGER_POLL=150ms D9_FLIGHT_AFTER=0s --; then
	pl_gets 3 /fast ok || pl_fail flight-epoll-requests "$PL_ERR"
	pl_get "/block?ms=300"
	if d9_wait_for 60 eval '[ "$(nmanifests "$D")" -ge 1 ]'; then
		d9_wait_settled "$D" gz || pl_fail flight-loop-turn "$D9_SETTLE_ERR"
		pl_quit
		check_dump flight-loop-turn "$D" "$(manifests "$D" | head -n1)" '
t = m["trigger"]
if t["trigger"] != "loop turn" or t["value"] < 290e6:
    fail("trigger %s, want a loop turn >= 300 ms" % t)
turns = [p for p in polls if p["duration_ns"] >= 290e6]
if not turns:
    fail("no loop turn >= 300 ms in the dump")
if not polls[0].get("trigger") or polls[0]["duration_ns"] < 290e6:
    fail("polls --json does not list the triggering loop turn first: %s" % polls[:1])
info = "loop turn of %.0f ms" % (t["value"] / 1e6)
'
	else
		pl_fail flight-loop-turn "no manifest within 60 s: $(ls "$D" | tr '\n' ' ')"
		pl_quit
	fi
else
	pl_fail flight-epoll "$PL_ERR"
fi

# ---- 3b. drops: 64 epoll threads, 16 blocks (D9_MAX_MEMORY=1M) ----------------------------------
# Each worker thread takes a block at its first Park, and the writer takes a parked thread's
# chunk back only once it is a flush interval old. With D9_FLUSH_INTERVAL=FI (2 s, times
# D9_TEST_SLOW) no block comes back sooner than FI after the start, so when every worker is asleep
# in epoll_wait within FI, all 64 recorded their first Park with no block returned: 48 or more
# found none and counted a drop, whatever the machine's pace (a start slower than FI is a
# precondition missing: SKIP). Requests then wake threads until one that dropped gets a block
# (the writer's passes give them back) and its chunk, which opens with the Dropped record,
# reaches the writer: the trigger.
FI=$((2 * D9_SLOW))
[ "$FI" -le 60 ] || FI=60
# workers_waiting PID N: N threads named worker-*, each asleep (S) in epoll_wait (232) or
# epoll_pwait (281, x86_64): past its first Park. Builtins only: the time it takes is measured.
workers_waiting() {
	local t comm st nr n=0
	for t in /proc/"$1"/task/*; do
		read -r comm <"$t/comm" 2>/dev/null || continue
		case "$comm" in worker-*) ;; *) continue ;; esac
		read -r st <"$t/stat" 2>/dev/null || return 1
		st=${st##*) }
		[ "${st%% *}" = S ] || return 1
		read -r nr _ <"$t/syscall" 2>/dev/null || return 1
		case "$nr" in 232 | 281) ;; *) return 1 ;; esac
		n=$((n + 1))
	done
	[ "$n" = "$2" ]
}
# drops_poke DIR: one /fast on a new connection (SO_REUSEPORT hands it to any worker), then
# whether DIR has a manifest; a failed request is kept in DROPS_BAD
drops_poke() {
	pl_get /fast
	[ "$CODE" = 200 ] || DROPS_BAD="/fast: status $CODE $(head -c 200 "$SDIR/curl.err")"
	[ "$(nmanifests "$1")" -ge 1 ]
}
D=$T/drops/trace
t0=$(date +%s%N)
if pl_start "$T/drops" "$EPOLL_HTTP" D9_MODE=flight D9_MAX_MEMORY=1M D9_TRIGGER_DROPS=1 \
	D9_FLIGHT_AFTER=0s D9_FLUSH_INTERVAL=${FI}s -- -T 64; then
	waiting=0
	d9_wait_for 30 workers_waiting "$SPID" 64 && waiting=1
	started=$(( ($(date +%s%N) - t0) / 1000000 ))
	DROPS_BAD=""
	if [ "$waiting" = 0 ]; then
		pl_fail flight-drops "the 64 threads were not all asleep in epoll_wait within $((30 * D9_SLOW)) s"
		pl_quit
	elif [ "$started" -ge $((FI * 1000)) ]; then
		pl_skip flight-drops "the 64 threads were all in epoll_wait only after $started ms, not within the flush interval ($FI s): some may have found a block given back"
		pl_quit
	elif d9_wait_for 60 drops_poke "$D"; then
		[ -z "$DROPS_BAD" ] || pl_fail flight-drops-requests "$DROPS_BAD"
		d9_wait_settled "$D" gz || pl_fail flight-drops "$D9_SETTLE_ERR"
		pl_quit
		check_dump flight-drops "$D" "$(manifests "$D" | head -n1)" '
t = m["trigger"]
if t["trigger"] != "drops" or t["unit"] != "events" or t["threshold"] != 1 or t["value"] < 1:
    fail("trigger %s, want drops >= 1" % t)
if summary["drops"]["events"] < t["value"]:
    fail("the dump shows drops %s, the trigger %d" % (summary["drops"], t["value"]))
info = "%d event(s) dropped by thread %d triggered it; the dump shows %s (64 threads in epoll_wait after %s ms)" % (t["value"], t["tid"], summary["drops"], args[0])
' "$started"
	else
		pl_fail flight-drops "no manifest within $((60 * D9_SLOW)) s of requests, though the 64 threads on 16 blocks were in epoll_wait after $started ms, within the flush interval ($FI s) ${DROPS_BAD:+($DROPS_BAD)}: $(ls "$D" | tr '\n' ' ')"
		pl_quit
	fi
else
	pl_fail flight-drops "$PL_ERR"
fi

# ---- 4a. small chunks are packed: a quiet server's window fits in few blocks -----------------------
# 40 requests, each followed by writer passes, so each one's events reach the writer in chunks of
# their own (the writer takes a quiet thread's chunk every flush interval): 40+ small chunks, which
# as whole 64 KiB blocks would not fit in D9_MAX_MEMORY=1M (16 blocks, 4 kept free).
D=$T/pack/trace
if pl_start "$T/pack" "$ST_HTTP" D9_MODE=flight D9_MAX_MEMORY=1M D9_FLIGHT_WINDOW=1h \
	D9_FLIGHT_AFTER=0s --; then
	for i in $(seq 40); do
		pl_get /fast
		writer_mark "$SPID"
		d9_wait_for 30 writer_passed "$SPID" 3
	done
	: >"$D/trace.dump-request"
	if d9_wait_for 60 eval '[ "$(nmanifests "$D")" -ge 1 ]'; then
		d9_wait_settled "$D" gz || pl_fail flight-packed "$D9_SETTLE_ERR"
		pl_quit
		check_dump flight-packed "$D" "$(manifests "$D" | head -n1)" '
if m["evicted_events"] != 0 or summary["drops"]["events"] != 0:
    fail("evicted %d, drops %s: 40 small chunks did not fit in 1M" % (m["evicted_events"], summary["drops"]))
conns = {p["coroutine"] for p in polls if p["location"].startswith("serve_conn")}
if len(conns) != 40:
    fail("%d connection coroutines in the dump, want 40" % len(conns))
info = "40 requests in separate chunks kept in 1M, nothing evicted"
'
	else
		pl_fail flight-packed "no manifest within 60 s: $(ls "$D" | tr '\n' ' ')"
		pl_quit
	fi
else
	pl_fail flight-pack "$PL_ERR"
fi

# ---- 4. memory bound: the window does not fit in D9_MAX_MEMORY ---------------------------------
D=$T/mem/trace
if pl_start "$T/mem" "$ST_HTTP" D9_MODE=flight D9_MAX_MEMORY=1M D9_FLIGHT_WINDOW=1h \
	D9_FLIGHT_AFTER=0s --; then
	# ~40 KiB of events per /fanout?k=1024: 60 of them fill the 16 blocks several times over
	keepalive_gets 60 "/fanout?k=1024" || pl_fail flight-memory-requests "fanout failed"
	writer_mark "$SPID"
	d9_wait_for 30 writer_passed "$SPID" 10
	rss=$(sed -n 's/^VmRSS:[[:space:]]*//p' "/proc/$SPID/status")
	: >"$D/trace.dump-request"
	if d9_wait_for 60 eval '[ "$(nmanifests "$D")" -ge 1 ]'; then
		d9_wait_settled "$D" gz || pl_fail flight-memory "$D9_SETTLE_ERR"
		pl_quit
		grep -q "does not fit in D9_MAX_MEMORY" "$T/mem/stderr" ||
			pl_fail flight-memory "no warning on stderr: $(head -c 300 "$T/mem/stderr")"
		check_dump flight-memory "$D" "$(manifests "$D" | head -n1)" '
ev = m["evicted_events"]
if ev <= 0:
    fail("evicted_events %d: the window fit after all (raise the load)" % ev)
dropped = summary["drops"]
if dropped["events"] < ev or not dropped["by_reason"]:
    fail("the dump shows drops %s, want at least the %d evicted events" % (dropped, ev))
info = "%d events evicted and counted (drops %s), server RSS %s" % (ev, dropped, args[0])
' "$rss"
	else
		pl_fail flight-memory "no manifest within 60 s: $(ls "$D" | tr '\n' ' ')"
		pl_quit
	fi
else
	pl_fail flight-mem "$PL_ERR"
fi
