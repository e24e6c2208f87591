#!/usr/bin/env bash
# test-progress.sh: the download progress of s3:// inputs (README.md, "Progress"). Three st-http
# runs under the agent give three segments; the test's own client (tests/s3/s3tool.py, botocore)
# stores them gzipped in the S3 peer of test-s3.sh (npm's s3rver, tests/s3/peer.js). Then
# `d9-analyze summary --json s3://...`:
#   - progress-s3-not-a-tty: stderr a file: nothing on it;
#   - progress-s3-tty: stderr a terminal (script(1) makes a pty): "\rd9-analyze: downloading
#     I/3 segments, X of Y MiB" lines, I growing up to 3, the line cleared at the end ("\r\e[K"
#     is the last thing written), and stdout byte for byte the one without a terminal;
#   - progress-s3-quiet: --quiet on a terminal: no progress line, the same stdout.
# The reading line of large inputs is test-analyze-progress.sh's.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup progress
S3DIR=$PL_ROOT/tests/s3
BUCKET=d9progress
for b in $(compgen -e | grep '^AWS_'); do unset "$b"; done
if ! command -v node >/dev/null || [ ! -f "$S3DIR/node_modules/s3rver/package.json" ]; then
	pl_skip progress-s3 "node or s3rver is not installed (make deps runs npm ci in tests/s3)"
	exit 0
fi
if ! python3 -c 'import botocore' 2>/dev/null; then
	pl_skip progress-s3 "python3 has no botocore (make deps: python3-botocore)"
	exit 0
fi
if ! command -v script >/dev/null; then
	pl_skip progress-s3 "script(1) is not installed (util-linux)"
	exit 0
fi

PORT=$(pl_free_port)
EP=http://127.0.0.1:$PORT
mkdir -p "$T/peer"
node "$S3DIR/peer.js" "$PORT" "$T/peer" "$BUCKET" "$T/requests.jsonl" "$T/mode" >"$T/peer.log" 2>&1 &
PL_PIDS+=("$!")
if ! d9_wait_for 30 test -f "$T/peer/ready"; then
	pl_fail progress-s3 "the S3 peer did not start: $(tail -c 300 "$T/peer.log")"
	exit 0
fi

BOOT=$(cat /proc/sys/kernel/random/boot_id)
for i in 1 2 3; do
	if ! pl_start "$T/run$i" "$ST_HTTP" -- || ! pl_gets 3 /fast ok || ! pl_quit || [ "$SRC" != 0 ]; then
		pl_fail progress-s3 "st-http run $i: ${PL_ERR:-exit status $SRC}"
		exit 0
	fi
	seg=$(ls "$T/run$i/trace/"*.bin 2>/dev/null | head -n1)
	if [ -z "$seg" ]; then
		pl_fail progress-s3 "run $i left no sealed segment: $(ls "$T/run$i/trace")"
		exit 0
	fi
	gzip -c "$seg" >"$T/seg$i.bin.gz"
	key="d9/env=progress/2026-11-25/2100/st-http/testhost/$BOOT-$SPID-0.bin.gz"
	if ! python3 "$S3DIR/s3tool.py" "$EP" put "$BUCKET" "$key" "$T/seg$i.bin.gz" 2>"$T/put.err"; then
		pl_fail progress-s3 "put $key: $(tail -c 300 "$T/put.err")"
		exit 0
	fi
done

URL="s3://$BUCKET/d9/env=progress"
export D9_S3_ENDPOINT=$EP AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
A=$PL_ANALYZE
rc=0
"$A" summary --json "$URL" >"$T/plain.json" 2>"$T/plain.err" || rc=$?
if [ "$rc" != 0 ] || [ -s "$T/plain.err" ] || ! grep -q '"events"' "$T/plain.json"; then
	pl_fail progress-s3-not-a-tty "exit $rc, stderr '$(head -c 300 "$T/plain.err")'"
	exit 0
fi
pl_pass progress-s3-not-a-tty "3 segments from S3, stderr a file: nothing written to it"
# script(1) gives the command a pty for stdin, stdout and stderr; stdout goes to a file, so the
# log holds stderr only
script -qec "'$A' summary --json '$URL' >'$T/tty.json'" "$T/tty.log" >/dev/null 2>&1
script -qec "'$A' summary --quiet --json '$URL' >'$T/quiet.json'" "$T/quiet.log" >/dev/null 2>&1
python3 - "$T" <<'PYEOF'
import re, sys
d = sys.argv[1]
def case(name, errs, info):
    print(("FAIL progress-%s: %s" % (name, "; ".join(errs))) if errs else
          "PASS progress-%s: %s" % (name, info))
plain = open(d + "/plain.json", "rb").read()
log = open(d + "/tty.log", "rb").read()
body = log[log.find(b"\rd9-analyze"):] if b"\rd9-analyze" in log else b""
if b"\nScript done" in body:
    body = body[:body.find(b"\nScript done")]
ups = re.findall(rb"\rd9-analyze: downloading (\d+)/(\d+) segments, ([0-9.]+) of ([0-9.]+) MiB\x1b\[K", body)
errs = []
if not ups:
    errs.append("no progress line in %r" % log[:300])
else:
    idx = [int(u[0]) for u in ups]
    if idx != sorted(idx) or any(u[1] != b"3" for u in ups) or max(idx) > 3:
        errs.append("the lines do not count up to 3 segments: %s" % ups)
    if not body.rstrip(b"\r\n").endswith(b"\r\x1b[K"):
        errs.append("the line is not cleared at the end: %r" % body[-120:])
    if re.search(rb"\n", body.rstrip(b"\r\n")):
        errs.append("more than one line: %r" % body[:300])
if open(d + "/tty.json", "rb").read() != plain:
    errs.append("stdout differs from the run without a terminal")
case("s3-tty", errs, "%d updates, the last %s; cleared at the end; same JSON"
     % (len(ups), ups[-1][0].decode() + "/3" if ups else "?"))
quiet = open(d + "/quiet.log", "rb").read()
errs = ["progress with --quiet: %r" % quiet[:200]] if b"downloading" in quiet else []
if open(d + "/quiet.json", "rb").read() != plain:
    errs.append("stdout with --quiet differs")
case("s3-quiet", errs, "--quiet on a terminal: nothing on stderr, same JSON")
PYEOF
