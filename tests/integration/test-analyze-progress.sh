#!/usr/bin/env bash
# test-analyze-progress.sh: the progress line of `d9-analyze summary` on large input (64 MiB or
# more). A synthetic trace of about 71 MB (build/tests/gen-analyze-load DIR 4000000):
#   - stderr not a terminal (a file): stderr stays empty, exit 0;
#   - stderr a terminal (a pty made by script(1)): at least one "\rd9-analyze: reading I/N
#     segments, N of M MiB (P%), R M events/s" line, the last thing written is the clearing
#     "\r\e[K", and stdout is byte for byte the one of the run without a terminal;
#   - the same with --quiet: no progress line;
#   - a small trace (under 64 MiB) on a terminal: no progress line.
set -u
. "$(dirname "$0")/lib.sh"
GEN=$D9_ROOT/build/tests/gen-analyze-load
for b in "$ANALYZE" "$GEN"; do
	if [ ! -x "$b" ]; then
		d9_fail analyze-progress "$b is not built (make all)"
		exit 0
	fi
done
for b in $(compgen -e | grep '^D9_'); do unset "$b"; done
T=$(mktemp -d "${TMPDIR:-/tmp}/d9-analyze-progress-XXXXXX")
trap 'rm -rf "$T"' EXIT

mkdir -p "$T/big" "$T/small"
if ! "$GEN" "$T/big" 4000000 >/dev/null || ! "$GEN" "$T/small" 20000 >/dev/null; then
	d9_fail analyze-progress-gen "gen-analyze-load failed"
	exit 0
fi
size=$(du -cb "$T"/big/*.bin | tail -n1 | cut -f1)
if [ "$size" -lt $((64 << 20)) ]; then
	d9_fail analyze-progress-gen "the big trace has $size bytes, want 64 MiB or more"
	exit 0
fi

rc=0
"$ANALYZE" summary --json "$T/big" >"$T/plain.json" 2>"$T/plain.err" || rc=$?
if [ "$rc" = 0 ] && [ ! -s "$T/plain.err" ]; then
	d9_pass analyze-progress-not-a-tty "$size bytes, stderr a file: nothing written to it"
else
	d9_fail analyze-progress-not-a-tty "exit $rc, stderr $(head -c 300 "$T/plain.err" | od -c | head -n 3)"
fi

if ! command -v script >/dev/null; then
	d9_skip analyze-progress-tty "script(1) is not installed"
	exit 0
fi
# script(1) gives the command a pty for stdin, stdout and stderr; stdout goes to a file, so the
# pty log holds stderr only (plus script's own lines, with -q none)
script -qec "'$ANALYZE' summary --json '$T/big' >'$T/tty.json'" "$T/tty.log" >/dev/null 2>&1
script -qec "'$ANALYZE' summary --json '$T/small' >/dev/null" "$T/small.log" >/dev/null 2>&1
script -qec "'$ANALYZE' summary --quiet --json '$T/big' >'$T/quiet.json'" "$T/quiet.log" >/dev/null 2>&1
python3 - "$T" <<'PYEOF'
import re, sys
d = sys.argv[1]
def case(name, errs, info):
    print(("FAIL analyze-progress-%s: %s" % (name, "; ".join(errs))) if errs else
          "PASS analyze-progress-%s: %s" % (name, info))
log = open(d + "/tty.log", "rb").read()
# script(1) may add a "Script started/done" line of its own: look only at our bytes
body = log[log.find(b"\rd9-analyze"):] if b"\rd9-analyze" in log else b""
if b"\nScript done" in body:
    body = body[:body.find(b"\nScript done")]
ups = re.findall(rb"\rd9-analyze: reading \d+/\d+ segments, (\d+) of (\d+) MiB \((\d+)%\), ([0-9.]+)M events/s\x1b\[K", body)
errs = []
if not ups:
    errs.append("no progress line in %r" % log[:300])
elif not body.rstrip(b"\r\n").endswith(b"\r\x1b[K") or body.rstrip(b"\r\n").endswith(b"events/s\x1b[K"):
    errs.append("the line is not cleared at the end: %r" % body[-120:])
else:
    done = [int(u[0]) for u in ups]
    if done != sorted(done) or any(u[1] != ups[0][1] for u in ups):
        errs.append("progress goes backwards or the total changes: %s" % ups)
if open(d + "/tty.json", "rb").read() != open(d + "/plain.json", "rb").read():
    errs.append("stdout differs from the run without a terminal")
case("tty", errs, "%d updates, last %s of %s MiB; cleared at the end; same JSON"
     % (len(ups), ups[-1][0].decode() if ups else "?", ups[-1][1].decode() if ups else "?"))
quiet = open(d + "/quiet.log", "rb").read()
errs = ["progress with --quiet: %r" % quiet[:200]] if b"MiB (" in quiet else []
if open(d + "/quiet.json", "rb").read() != open(d + "/plain.json", "rb").read():
    errs.append("stdout with --quiet differs from the run without a terminal")
case("quiet", errs, "--quiet on a terminal: no progress line, same JSON")
small = open(d + "/small.log", "rb").read()
case("small", ["progress on a small trace: %r" % small[:200]] if b"MiB (" in small else [],
     "a trace under 64 MiB on a terminal: no progress line")
PYEOF
