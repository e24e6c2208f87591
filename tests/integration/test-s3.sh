#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-s3.sh: shipping traces to S3 (README "S3", agent/DESIGN.md "S3 upload"). The peer is a real
# S3 protocol server, npm's s3rver 3.7.1 (tests/s3/peer.js: it logs every request and answers
# 403, 500 or slowly on demand). s3rver does not check SigV4 signatures, so the test verifies
# every request's signature with botocore (tests/s3/sigcheck.py, itself shown to refuse another
# secret's signatures) and reads what was stored with its own client (tests/s3/s3tool.py). The host is the test driver (d9 linked in),
# rotating every second. Checks: keys, bytes, session token, '=' sent as %3D; libcurl loaded only
# when S3 is configured; the analyzer reading s3:// with time/service/host selection and `ls`;
# the breaker with the endpoint down then back, 403 and 500; a slow endpoint; eviction under the
# budget while uploads wait; delete after upload; credentials files, good and bad; uploads go on
# while a host thread holds glibc's time-zone lock (tz-hold.c). The host finishes its work in
# each.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup s3

S3DIR=$D9_ROOT/tests/s3
BUCKET=d9test
for b in $(compgen -e | grep '^AWS_'); do unset "$b"; done
if ! command -v node >/dev/null; then
	d9_skip s3 "node is not installed (make deps)"
	exit 0
fi
if [ ! -f "$S3DIR/node_modules/s3rver/package.json" ]; then
	d9_skip s3 "s3rver is not installed in tests/s3 (make deps runs npm ci there)"
	exit 0
fi
if ! python3 -c 'import botocore' 2>/dev/null; then
	d9_skip s3 "python3 has no botocore (make deps: python3-botocore)"
	exit 0
fi

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
EP=http://127.0.0.1:$PORT
REQ=$T/requests.jsonl
MODE=$T/mode
PEER_PID=

peer_start() {
	mkdir -p "$T/peer"
	rm -f "$T/peer/ready"
	node "$S3DIR/peer.js" "$PORT" "$T/peer" "$BUCKET" "$REQ" "$MODE" >>"$T/peer.log" 2>&1 &
	PEER_PID=$!
	D9_BG_PIDS+=("$PEER_PID")
	d9_wait_for 30 test -f "$T/peer/ready"
}
peer_stop() {
	kill -KILL "$PEER_PID" 2>/dev/null
	wait "$PEER_PID" 2>/dev/null
}
s3keys() { python3 "$S3DIR/s3tool.py" "$EP" keys "$BUCKET"; }
# requests of one phase: the log so far moves to FILE
req_take() { if [ -f "$REQ" ]; then mv "$REQ" "$1"; else : >"$1"; fi; }

S3ENV=("D9_S3_BUCKET=$BUCKET" "D9_S3_ENDPOINT=$EP" D9_ROTATION_PERIOD=1s D9_LOG=info)
CREDS=(AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER)
BOOT=$(cat /proc/sys/kernel/random/boot_id)
HOST=$(hostname | tr -c 'A-Za-z0-9._\n-' _)

# uploaded_all DIR PREFIX: every sealed .bin.gz of DIR is stored under PREFIX (at least 2)
uploaded_all() {
	local n=0 f pid seq keys
	keys=$(s3keys 2>/dev/null | awk '{ print $1 }')
	for f in "$1"/*.bin.gz; do
		[ -e "$f" ] || return 1
		pid=$(basename "$f" | cut -d. -f2)
		seq=$((10#$(basename "$f" | cut -d. -f3)))
		grep -q "^$2/.*/$BOOT-$pid-$seq\.bin\.gz$" <<<"$keys" || return 1
		n=$((n + 1))
	done
	[ "$n" -ge 2 ]
}
log_has() { grep -qs "$2" "$1"; }

if ! peer_start; then
	d9_fail s3 "the S3 peer did not start: $(tail -c 300 "$T/peer.log")"
	exit 0
fi

# ---- upload: keys, bytes, session token, '=' in the prefix, signatures -------------------------------
d=$T/up
# D9_LOG=debug: the agent says "stored" once it has counted an upload (after the object is in
# the store), which is what the trailer check below waits for
d9_bg pid "$T/up.out" "$T/up.err" "${S3ENV[@]}" "${CREDS[@]}" AWS_SESSION_TOKEN=tok-1 \
	D9_LOG=debug D9_S3_PREFIX="d9/env=test" D9_TRACE_PATH="$d/trace.bin" -- \
	-t 2 -n 500 --sleep-every 1 --sleep-us 5000 --exit hang
UP_PID=$pid
# every event of the driver (it records for about 2.5 s, then hangs) in sealed, compressed
# segments (the time-based rotation seals the last one), each stored, and each upload counted by
# the agent: the last upload comes after the last seal, so only the exit can put it in a trailer
up_counted() {
	local want got f
	[ -s "$T/up.out" ] && ! compgen -G "$d/*.active" >/dev/null &&
		! compgen -G "$d/*.bin" >/dev/null || return 1
	want=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["events"])' \
		"$T/up.out" 2>/dev/null) || return 1
	got=$("$ANALYZE" summary --json "$d" 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["events"])' 2>/dev/null) || return 1
	[ "$got" = "$want" ] && uploaded_all "$d" "d9/env=test" || return 1
	for f in "$d"/*.bin.gz; do
		grep -qF "/${f##*/} stored (" "$T/up.err" || return 1
	done
}
if ! d9_wait_for 120 up_counted; then
	d9_fail s3-upload "not every sealed segment was uploaded: local $(ls "$d" | tr '\n' ' '); stored $(s3keys | head -5 | tr '\n' ' '); $(tail -c 300 "$T/up.err")"
else
	if grep -q libcurl "/proc/$UP_PID/maps"; then
		d9_pass s3-libcurl-loaded "configured: libcurl in the host once it uploads"
	else
		d9_fail s3-libcurl-loaded "S3 uploads worked but no libcurl in /proc/$UP_PID/maps"
	fi
	d9_kill "$UP_PID" TERM
	req_take "$T/up.req"
	s3keys >"$T/up.keys"
	d9_py s3-upload '
import os, re, subprocess
keys = dict(l.split() for l in open(f[0]))
d, boot, host, pid, ep, tool = f[1:7]
pat = re.compile(r"^d9/env=test/(\d{4}-\d\d-\d\d)/(\d{4})/d9-driver/" + re.escape(host) + "/" +
    re.escape(boot) + "-" + pid + r"-(\d+)\.bin\.gz$")
mine = {}
for k in keys:
    if k.startswith("d9/env=test/"):
        m = pat.match(k)
        if not m:
            fail("key %s does not follow {prefix}/{date}/{HHMM}/{service}/{host}/{boot}-{pid}-{seq}.bin.gz" % k)
        mine[int(m.group(3))] = k
local = sorted(n for n in os.listdir(d) if n.endswith(".bin.gz"))
if len(local) < 2:
    fail("only %d sealed segments" % len(local))
for n in local:
    seq = int(n.split(".")[2])
    if seq not in mine:
        fail("%s was not uploaded" % n)
    out = os.path.join(d, "got-%d" % seq)
    subprocess.run(["python3", tool, ep, "get", "d9test", mine[seq], out], check=True)
    if open(out, "rb").read() != open(os.path.join(d, n), "rb").read():
        fail("%s: the stored object differs from the local file" % mine[seq])
    os.unlink(out)
info = "%d segments, keys like %s" % (len(local), mine[min(mine)])
' "$T/up.keys" "$d" "$BOOT" "$HOST" "$UP_PID" "$EP" "$S3DIR/s3tool.py"
	if grep -q '"method":"PUT","url":"/d9test/d9/env%3Dtest/' "$T/up.req" &&
		! grep -q '"url":"/d9test/d9/env=test/' "$T/up.req"; then
		d9_pass s3-key-escape "'=' in the key sent as %3D"
	else
		d9_fail s3-key-escape "the PUT paths: $(grep -o '"url":"[^"]*"' "$T/up.req" | head -2 | tr '\n' ' ')"
	fi
	if out=$(python3 "$S3DIR/sigcheck.py" "$T/up.req" S3RVER S3RVER tok-1 2>&1); then
		d9_pass s3-signatures "agent: ${out##*$'\n'}, botocore agrees, session token sent"
	else
		d9_fail s3-signatures "$(head -c 600 <<<"$out")"
	fi
	# the trailers count the uploads (FORMAT.md section 11): every upload the agent made, the
	# last ones (after the last time-based seal: the driver hangs) in the segment its exit
	# seals for them
	"$ANALYZE" summary --json "$d" >"$T/up.sum" 2>/dev/null
	d9_py s3-trailer-counts '
import re
q = one(f[0])["data_quality"]
stored = re.findall(r"S3 upload: (\S+) stored \((\d+) bytes\)", open(f[2], errors="replace").read())
if len(set(p for p, _ in stored)) != len(stored):
    fail("a file stored twice: %s" % stored)
want, want_bytes = len(stored), sum(int(b) for _, b in stored)
if q["s3_uploaded"] != want or q["s3_uploaded_bytes"] != want_bytes:
    fail("summary shows %d segments, %d bytes uploaded; the agent stored %d, %d bytes (files: %s)" %
         (q["s3_uploaded"], q["s3_uploaded_bytes"], want, want_bytes, sorted(os.listdir(f[1]))))
if q["s3_failures"] or q["s3_evicted"]:
    fail("failures %d, evicted %d with a working endpoint" % (q["s3_failures"], q["s3_evicted"]))
info = "%d uploaded, %d bytes, as the agent stored them" % (q["s3_uploaded"], q["s3_uploaded_bytes"])
' "$T/up.sum" "$d" "$T/up.err"
fi

# ---- a real server under LD_PRELOAD keeps answering while its segments are uploaded ---------------------
SRV=$D9_ROOT/build/tests/epoll-http
if [ ! -x "$SRV" ] || [ ! -e "$D9_ROOT/build/libd9agent.so" ]; then
	d9_fail s3-preload-server "$SRV or build/libd9agent.so is not built (make all)"
else
	mkdir -p "$T/srv"
	env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" "${S3ENV[@]}" "${CREDS[@]}" D9_S3_PREFIX=srv \
		D9_TRACE_PATH="$T/srv/trace/trace.bin" "$SRV" -p 0 -P "$T/srv/port" -t 120 -q \
		>"$T/srv/out" 2>"$T/srv/err" &
	SRV_PID=$!
	D9_BG_PIDS+=("$SRV_PID")
	srv_served=0 srv_failed=0
	# one request at a time until two segments of the server are stored (each answered: any
	# HTTP status; 000 is no answer)
	srv_step() {
		local code url urls=()
		[ -s "$T/srv/port" ] || return 1
		url="http://127.0.0.1:$(cat "$T/srv/port")/"
		for _ in $(seq 20); do urls+=(-o /dev/null "$url"); done
		for code in $(curl -s -m 10 -w '%{http_code}\n' "${urls[@]}"); do
			if [ "$code" = 000 ]; then srv_failed=$((srv_failed + 1)); else srv_served=$((srv_served + 1)); fi
		done
		[ "$(s3keys | grep -c "^srv/.*/epoll-http/.*-$SRV_PID-[0-9]*\.bin\.gz ")" -ge 2 ]
	}
	if ! d9_wait_for 120 srv_step; then
		d9_fail s3-preload-server "fewer than 2 segments stored: $(tail -c 300 "$T/srv/err")"
	elif [ "$srv_failed" -ne 0 ] || ! kill -0 "$SRV_PID" 2>/dev/null; then
		d9_fail s3-preload-server "$srv_failed of $((srv_served + srv_failed)) requests unanswered"
	else
		d9_pass s3-preload-server "$srv_served requests answered while its segments were uploaded"
	fi
	d9_kill "$SRV_PID"
fi

# ---- uploads while a host thread holds glibc's time-zone lock ---------------------------------------------
# glibc does not reset that lock in a forked child: an agent thread inside it at a host's fork
# would hang the child's first localtime. The uploader's gmtime_r calls (the key; libcurl's
# SigV4 signing) must not take it (agent/DESIGN.md, "libc's locks that a fork does not reset").
# tz-hold.c under LD_PRELOAD with TZ naming a FIFO: its holder thread blocks in localtime_r's
# open of the zone file with the lock held; a segment must be stored meanwhile.
tzh=$T/tz-hold
tz_holder_blocked() { # the holder thread waits in open/openat (x86-64: 2, 257)
	local tid
	tid=$(sed -n 's/^holder //p' "$T/tz/out" 2>/dev/null)
	[ -n "$tid" ] && case "$(cut -d' ' -f1 "/proc/$TZ_PID/task/$tid/syscall" 2>/dev/null)" in
		2 | 257) return 0 ;; *) return 1 ;; esac
}
if ! ${CC:-cc} -O2 -o "$tzh" "$D9_ROOT/tests/integration/tz-hold.c" -lpthread 2>"$T/tzcc.err"; then
	d9_skip s3-tz-lock "cannot build tz-hold.c: $(head -c 200 "$T/tzcc.err")"
elif ! mkfifo "$T/tzfifo"; then
	d9_skip s3-tz-lock "cannot make a FIFO in $T"
else
	mkdir -p "$T/tz"
	env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" "${S3ENV[@]}" "${CREDS[@]}" D9_S3_PREFIX=tz \
		D9_LOG=debug TZ=":$T/tzfifo" D9_TRACE_PATH="$T/tz/trace.bin" "$tzh" $((60 * D9_SLOW)) \
		>"$T/tz/out" 2>"$T/tz/err" &
	TZ_PID=$!
	D9_BG_PIDS+=("$TZ_PID")
	if ! d9_wait_for 30 tz_holder_blocked; then
		d9_fail s3-tz-lock "the holder thread never blocked in the zone file's open: $(head -c 200 "$T/tz/out")"
	elif ! d9_wait_for 60 grep -q "S3 upload: .* stored" "$T/tz/err"; then
		d9_fail s3-tz-lock "no segment was stored while a host thread held the time-zone lock: $(tail -c 300 "$T/tz/err")"
	elif ! tz_holder_blocked; then
		d9_fail s3-tz-lock "the holder thread left its open before the upload: the test proves nothing"
	else
		d9_pass s3-tz-lock "$(grep -c 'S3 upload: .* stored' "$T/tz/err") segment(s) stored while localtime_r held the lock"
	fi
	# the writer end's open lets the holder's open return (then EOF: no zone, UTC)
	timeout 10 sh -c ': >"$1"' sh "$T/tzfifo" 2>/dev/null
	d9_kill "$TZ_PID"
fi

# ---- not configured: libcurl is never loaded ------------------------------------------------------------
d9_bg pid "$T/off.out" "$T/off.err" D9_TRACE_PATH="$T/off/trace.bin" D9_ROTATION_PERIOD=1s -- \
	-t 1 -n 300 --sleep-every 1 --sleep-us 5000 --exit hang
if ! d9_wait_for 60 d9_has_finished "$T/off"; then
	d9_fail s3-libcurl-not-loaded "no sealed segment: $(tail -c 300 "$T/off.err")"
elif grep -q libcurl "/proc/$pid/maps"; then
	d9_fail s3-libcurl-not-loaded "libcurl is in the host without D9_S3_BUCKET"
else
	d9_pass s3-libcurl-not-loaded
fi
d9_kill "$pid"

# ---- the analyzer: s3:// with selection, ls ---------------------------------------------------------------
if [ -s "$T/up.keys" ]; then
	AENV=(env D9_S3_ENDPOINT="$EP" "${CREDS[@]}" AWS_SESSION_TOKEN=tok-2)
	URL="s3://$BUCKET/d9/env=test"
	# the same segments, read locally and from S3
	"$ANALYZE" summary --json "$d"/*.bin.gz >"$T/local.sum" 2>"$T/local.err"
	"${AENV[@]}" "$ANALYZE" summary --json "$URL" >"$T/s3.sum" 2>"$T/s3.err"
	d9_py s3-analyze-read '
a, b = one(f[0]), one(f[1])
if a["events"] != b["events"] or a["events"] == 0:
    fail("local %d events, from S3 %d" % (a["events"], b["events"]))
info = "%d events, as read locally" % a["events"]
' "$T/local.sum" "$T/s3.sum"
	# an older segment under another day and host: ls without a range shows both; a range
	# around now neither shows nor lists the old day
	old="d9/env=test/2020-01-01/0000/d9-driver/otherhost/$BOOT-1-0.bin.gz"
	python3 "$S3DIR/s3tool.py" "$EP" put "$BUCKET" "$old" "$(ls "$d"/*.bin.gz | head -1)"
	req_take "$T/junk.req"
	"${AENV[@]}" "$ANALYZE" ls "$URL" >"$T/ls-all.out" 2>&1
	from=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
	to=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
	req_take "$T/ls-all.req"
	"${AENV[@]}" "$ANALYZE" ls --from "$from" --to "$to" "$URL" >"$T/ls-now.out" 2>&1
	req_take "$T/ls-now.req"
	"${AENV[@]}" "$ANALYZE" ls --host otherhost "$URL" >"$T/ls-host.out" 2>&1
	"${AENV[@]}" "$ANALYZE" ls --service nope "$URL" >"$T/ls-none.out" 2>&1
	"${AENV[@]}" "$ANALYZE" summary --json --from 2020-01-01T00:00:00Z --to 2020-01-01T00:30:00Z \
		"$URL" >"$T/s3-old.sum" 2>"$T/s3-old.err"
	req_take "$T/ls-more.req"
	n=$(grep -c "^d9/env=test/" "$T/up.keys")
	d9_py s3-analyze-ls '
import re
def total(path):
    for l in open(path):
        if l.startswith("total"):
            return int(re.search(r"(\d+) objects", l).group(1)), int(re.search(r"(\d+) bytes", l).group(1))
    fail("%s: no total line: %s" % (path, open(path).read()[:300]))
def hosts(path):
    return sorted(l.split()[1] for l in open(path) if l.startswith("host "))
n = int(f[5]); host = f[6]
if total(f[0])[0] != n + 1 or hosts(f[0]) != sorted([host, "otherhost"]):
    fail("ls: %s" % open(f[0]).read())
if "d9-driver" not in open(f[0]).read() or "2020-01-01 0000" not in open(f[0]).read():
    fail("ls shows no service or time span: %s" % open(f[0]).read())
if total(f[1])[0] != n or hosts(f[1]) != [host]:
    fail("ls --from/--to around now: %s" % open(f[1]).read())
if "2020-01-01" in open(f[2]).read():
    fail("ls --from/--to around now listed the 2020 prefix")
if total(f[3])[0] != 1 or hosts(f[3]) != ["otherhost"]:
    fail("ls --host otherhost: %s" % open(f[3]).read())
if total(f[4])[0] != 0:
    fail("ls --service nope: %s" % open(f[4]).read())
info = "%d objects in 2 hosts, time range and host selection" % (n + 1)
' "$T/ls-all.out" "$T/ls-now.out" "$T/ls-now.req" "$T/ls-host.out" "$T/ls-none.out" "$n" "$HOST"
	# the object under 2020-01-01/0000 is the only one fetched (its events are of today: none
	# is inside the window, which the summary applies as to any input)
	d9_py s3-analyze-range '
q = one(f[0])["data_quality"]
if q["files"] != 1 or q["readable"] != 1:
    fail("%d files fetched for a 2020 window (want the one under 2020-01-01): %s" % (q["files"], open(f[1]).read()[:300]))
info = "a 2020 window fetched only the object filed under 2020-01-01/0000"
' "$T/s3-old.sum" "$T/s3-old.err"
	cat "$T/ls-all.req" "$T/ls-now.req" "$T/ls-more.req" >"$T/an.req"
	if out=$(python3 "$S3DIR/sigcheck.py" "$T/an.req" S3RVER S3RVER tok-2 2>&1); then
		d9_pass s3-analyze-signatures "analyzer: ${out##*$'\n'}, sorted queries, session token sent"
	else
		d9_fail s3-analyze-signatures "$(head -c 600 <<<"$out")"
	fi
fi

# ---- the endpoint down at start, back later: the breaker opens and closes, nothing lost -------------
peer_stop
d=$T/down
d9_bg pid "$T/down.out" "$T/down.err" "${S3ENV[@]}" "${CREDS[@]}" D9_S3_PREFIX=down \
	D9_TRACE_PATH="$d/trace.bin" -- -t 2 -n 1500 --sleep-every 1 --sleep-us 5000 --exit hang
if ! d9_wait_for 60 log_has "$T/down.err" "S3 upload .* failing"; then
	d9_fail s3-breaker "no failure line with the endpoint down: $(tail -c 300 "$T/down.err")"
elif ! peer_start; then
	d9_fail s3-breaker "the peer did not start again"
elif ! d9_wait_for 400 log_has "$T/down.err" "works again"; then
	d9_fail s3-breaker "uploads did not resume: $(tail -c 300 "$T/down.err")"
elif ! d9_wait_for 120 uploaded_all "$d" down; then
	d9_fail s3-breaker "segments sealed while the endpoint was down were not all uploaded: local $(ls "$d" | tr '\n' ' ')"
else
	d9_kill "$pid" TERM
	"$ANALYZE" summary --json "$d" >"$T/down.sum" 2>/dev/null
	d9_py s3-breaker '
err = open(f[0]).read()
fails = err.count("failing"); again = err.count("works again")
if fails != 1 or again != 1:
    fail("%d failure and %d recovery lines (one per state change wanted): %s" % (fails, again, err[-600:]))
q = one(f[1])["data_quality"]
if q["s3_failures"] < 1 or q["s3_uploaded"] < 1 or q["s3_evicted"]:
    fail("trailer counts: %d failed attempts, %d uploaded, %d evicted" % (q["s3_failures"], q["s3_uploaded"], q["s3_evicted"]))
info = "%d failed attempts, then every sealed segment uploaded" % q["s3_failures"]
' "$T/down.err" "$T/down.sum"
fi
d9_kill "$pid"

# ---- 403, then 500: each opens the breaker once, each recovery closes it ----------------------------------
d=$T/http
echo 403 >"$MODE"
d9_bg pid "$T/http.out" "$T/http.err" "${S3ENV[@]}" "${CREDS[@]}" D9_S3_PREFIX=http \
	D9_TRACE_PATH="$d/trace.bin" -- -t 2 -n 2000 --sleep-every 1 --sleep-us 5000 --exit hang
ok=1
for step in "HTTP 403:ok" "works again:500" "HTTP 500:ok"; do
	if ! d9_wait_for 400 log_has "$T/http.err" "${step%%:*}"; then
		d9_fail s3-http-errors "no '${step%%:*}' line: $(tail -c 400 "$T/http.err")"
		ok=0
		break
	fi
	echo "${step##*:}" >"$MODE"
done
recovered_twice() { [ "$(grep -cs 'works again' "$T/http.err")" -ge 2 ]; }
if [ "$ok" = 1 ] && d9_wait_for 400 recovered_twice; then
	if ! kill -0 "$pid" 2>/dev/null; then
		d9_fail s3-http-errors "the host is gone"
	elif [ "$(grep -c failing "$T/http.err")" -ne 2 ] || [ "$(grep -c 'works again' "$T/http.err")" -ne 2 ]; then
		d9_fail s3-http-errors "want 2 failure and 2 recovery lines: $(tail -c 800 "$T/http.err")"
	else
		d9_pass s3-http-errors "403 and 500 each open the breaker once; it closes after each"
	fi
elif [ "$ok" = 1 ]; then
	d9_fail s3-http-errors "no second recovery: $(tail -c 400 "$T/http.err")"
fi
d9_kill "$pid"
echo ok >"$MODE"

# ---- a slow endpoint: the host's work is not held up, nothing dropped ------------------------------------
echo slow >"$MODE"
d=$T/slow
d9_run "$T/slow.out" "$T/slow.err" "${S3ENV[@]}" "${CREDS[@]}" D9_S3_PREFIX=slow \
	D9_TRACE_PATH="$d/trace.bin" -- -t 2 -n 600 --sleep-every 1 --sleep-us 5000
rc=$?
echo ok >"$MODE"
if [ "$rc" -ne 0 ]; then
	d9_fail s3-slow-endpoint "the host exited $rc: $(tail -c 300 "$T/slow.err")"
else
	"$ANALYZE" summary --json "$d" >"$T/slow.sum" 2>/dev/null
	d9_py s3-slow-endpoint '
s = one(f[0]); q = s["data_quality"]
if s["events"] == 0:
    fail("no events")
drops = sum(v for k, v in q.items() if k.startswith("dropped"))
if drops:
    fail("%d events dropped with a slow endpoint" % drops)
info = "%d events, none dropped" % s["events"]
' "$T/slow.sum"
fi

# ---- eviction under the budget while uploads wait (endpoint down; the segments are final at their
# seal: no compression, no symbols, so they wait in the upload queue behind the open breaker) ---------
peer_stop
d=$T/evict
d9_run "$T/evict.out" "$T/evict.err" "${S3ENV[@]}" "${CREDS[@]}" D9_S3_PREFIX=evict D9_ROTATION_PERIOD=0 \
	D9_MAX_FILE_SIZE=1M D9_MAX_TOTAL_SIZE=2M D9_COMPRESS=0 D9_SYMBOLIZE=0 D9_TRACE_PATH="$d/trace.bin" -- \
	-t 4 -n 300000 --park-every 5000 --sleep-us 100
rc=$?
if [ "$rc" -ne 0 ]; then
	d9_fail s3-evict "the host exited $rc: $(tail -c 300 "$T/evict.err")"
else
	"$ANALYZE" summary --json "$d" >"$T/evict.sum" 2>/dev/null
	d9_py s3-evict '
q = one(f[0])["data_quality"]
if q["budget_deleted_segments"] < 1:
    fail("the budget deleted nothing: no eviction to see")
if q["s3_evicted"] < 1 or q["s3_evicted"] > q["budget_deleted_segments"]:
    fail("%d evicted before upload, %d deleted by the budget" % (q["s3_evicted"], q["budget_deleted_segments"]))
if q["s3_uploaded"]:
    fail("%d uploaded with the endpoint down" % q["s3_uploaded"])
info = "%d segments evicted while waiting (%d deleted by the budget), %d failed attempts" % (
    q["s3_evicted"], q["budget_deleted_segments"], q["s3_failures"])
' "$T/evict.sum"
fi
peer_start

# ---- delete after upload ------------------------------------------------------------------------------------
d=$T/del
d9_bg pid "$T/del.out" "$T/del.err" "${S3ENV[@]}" "${CREDS[@]}" D9_S3_PREFIX=del \
	D9_S3_DELETE_AFTER_UPLOAD=1 D9_TRACE_PATH="$d/trace.bin" -- \
	-t 2 -n 500 --sleep-every 1 --sleep-us 5000 --exit hang
DEL_PID=$pid
del_done() {
	local n
	n=$(s3keys | grep -c "^del/.*-$DEL_PID-[0-9]*\.bin\.gz ")
	[ "$n" -ge 2 ] || return 1
	! compgen -G "$d/*.bin.gz" >/dev/null
}
if ! d9_wait_for 120 del_done; then
	d9_fail s3-delete-after-upload "stored: $(s3keys | grep -c '^del/'); local: $(ls "$d" | tr '\n' ' ')"
else
	# the directory first, then the store: a segment moves only from the one to the other
	ls "$d" >"$T/del.names"
	s3keys >"$T/del.keys"
	d9_py s3-delete-after-upload '
import os, re
d, pid = f[0], f[2]
names = open(f[3]).read().split()
stored = sorted(int(m.group(1)) for l in open(f[1])
    for m in [re.search(r"^del/.*-" + pid + r"-(\d+)\.bin\.gz ", l)] if m)
# a segment being compressed is there twice for a moment (.bin and a temporary .gz)
local = sorted(set(int(n.split(".")[2]) for n in names if n.startswith("trace.%s." % pid) and
    n.endswith((".bin", ".bin.gz", ".active"))))
if "trace.lock" not in names:
    fail("the lock file is gone: %s" % names)
if set(stored) | set(local) != set(range(max(stored + local) + 1)):
    fail("a segment neither uploaded nor here: stored %s, local %s" % (stored, local))
info = "%d uploaded and removed, left: %s" % (len(stored), " ".join(sorted(names)))
' "$d" "$T/del.keys" "$DEL_PID" "$T/del.names"
fi
d9_kill "$pid"

# ---- credentials from the shared file: a profile with a session token; a bad file -------------------------
printf '[default]\naws_access_key_id = WRONG\naws_secret_access_key = WRONG\n\n[d9]\n# the peer'"'"'s\naws_access_key_id = S3RVER\naws_secret_access_key=S3RVER\naws_session_token = tok-3\n' >"$T/creds"
req_take "$T/junk2.req"
d9_bg pid "$T/cf.out" "$T/cf.err" "${S3ENV[@]}" AWS_SHARED_CREDENTIALS_FILE="$T/creds" AWS_PROFILE=d9 \
	D9_S3_PREFIX=cf D9_TRACE_PATH="$T/cf/trace.bin" -- -t 2 -n 500 --sleep-every 1 --sleep-us 5000 --exit hang
if ! d9_wait_for 120 uploaded_all "$T/cf" cf; then
	d9_fail s3-credentials-file "no upload with the profile's credentials: $(tail -c 300 "$T/cf.err")"
else
	req_take "$T/cf.req"
	if out=$(python3 "$S3DIR/sigcheck.py" "$T/cf.req" S3RVER S3RVER tok-3 2>&1); then
		d9_pass s3-credentials-file "AWS_PROFILE's section, its session token sent"
	else
		d9_fail s3-credentials-file "$(head -c 600 <<<"$out")"
	fi
fi
d9_kill "$pid"
printf '[default]\nthis is not a credentials file\n' >"$T/bad-creds"
# the host runs until the first sealed segment's upload was tried (a rotation every second):
# waited for, not timed, so a loaded machine that compresses late still gets there
d9_bg pid "$T/bad.out" "$T/bad.err" "${S3ENV[@]}" AWS_SHARED_CREDENTIALS_FILE="$T/bad-creds" \
	D9_S3_PREFIX=bad D9_TRACE_PATH="$T/bad/trace.bin" -- -t 2 -n 400 --sleep-every 1 --sleep-us 5000 \
	--exit hang
d9_wait_for 120 grep -q failing "$T/bad.err" || true
alive=0
kill -0 "$pid" 2>/dev/null && alive=1
d9_kill "$pid"
if [ "$alive" -ne 1 ]; then
	d9_fail s3-bad-credentials "the host died: $(tail -c 300 "$T/bad.err")"
elif [ "$(grep -c 'failing' "$T/bad.err")" -ne 1 ] || ! grep -q 'bad-creds' "$T/bad.err"; then
	d9_fail s3-bad-credentials "want one failure line naming the file: $(tail -c 400 "$T/bad.err")"
elif s3keys | grep -q '^bad/'; then
	d9_fail s3-bad-credentials "something was uploaded"
else
	d9_pass s3-bad-credentials "$(grep -o 'failing.*' "$T/bad.err" | head -c 160)"
fi
# the signature check can fail: uploads signed with another secret (s3rver takes any SigV4
# signature) are refused by sigcheck.py for S3RVER's secret and accepted for theirs
req_take "$T/junk3.req"
d9_bg pid "$T/sig.out" "$T/sig.err" "${S3ENV[@]}" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=OTHER \
	D9_S3_PREFIX=sig D9_TRACE_PATH="$T/sig/trace.bin" -- -t 2 -n 500 --sleep-every 1 --sleep-us 5000 --exit hang
if ! d9_wait_for 120 uploaded_all "$T/sig" sig; then
	d9_fail s3-sigcheck-discriminates "no upload: $(tail -c 300 "$T/sig.err")"
else
	req_take "$T/sig.req"
	if python3 "$S3DIR/sigcheck.py" "$T/sig.req" S3RVER S3RVER >"$T/sig.check" 2>&1; then
		d9_fail s3-sigcheck-discriminates "signatures made with another secret passed: $(tail -c 200 "$T/sig.check")"
	elif ! grep -q 'botocore expects' "$T/sig.check"; then
		d9_fail s3-sigcheck-discriminates "sigcheck failed otherwise: $(head -c 300 "$T/sig.check")"
	elif ! out=$(python3 "$S3DIR/sigcheck.py" "$T/sig.req" S3RVER OTHER 2>&1); then
		d9_fail s3-sigcheck-discriminates "not even valid for their own secret: $(head -c 300 <<<"$out")"
	else
		d9_pass s3-sigcheck-discriminates "another secret's signatures refused, accepted for that secret"
	fi
fi
d9_kill "$pid"
peer_stop
exit 0
