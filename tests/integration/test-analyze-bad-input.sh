#!/usr/bin/env bash
# test-analyze-bad-input.sh: `d9-analyze summary` and `polls` (sanitizer build) on input that is
# not a healthy trace, and the command line. Checks the exit status (0 ok, 2 usage, 3 nothing
# readable, 4 output written but some input damaged), that stderr names each bad input with what
# is wrong, once, and that no sanitizer report appears. Inputs come from the golden segments.
# Tests run as root, so "unreadable" means a missing path or a directory named like a segment.
set -u
cd "$(dirname "$0")/../.."

san=build/san/d9-analyze
golden=tests/golden
if [ ! -x "$san" ] || [ ! -f "$golden/basic.bin" ]; then
	echo "FAIL analyze-bad-input-setup: need $san and $golden/basic.bin"
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME RC LINES PATTERN... -- ARGS...: d9_expect (lib-expect.sh) on `d9-analyze ARGS`
# shellcheck source=tests/integration/lib-expect.sh
. tests/integration/lib-expect.sh # (the script runs from the repository root)
expect() { d9_expect analyze "" "$@"; }

d=$tmp/in
mkdir -p "$d"
: >"$d/empty.bin"
cp /bin/ls "$d/ls.bin"
cp "$golden/truncated.bin" "$d/truncated.bin"
cp "$golden/corrupt-chunk.bin" "$d/corrupt.bin"
mkdir "$d/dir.bin"

for cmd in summary polls; do
	expect $cmd-empty-file 3 2 "$d/empty.bin: truncated" "no readable trace" -- $cmd "$d/empty.bin"
	expect $cmd-not-a-trace 3 2 "$d/ls.bin: not a d9 trace" -- $cmd "$d/ls.bin"
	expect $cmd-missing-path 3 2 "$d/nope.bin: No such file or directory" -- $cmd "$d/nope.bin"
	expect $cmd-directory-named-like-a-segment 3 -1 "$d/dir.bin: .*no segment files" -- $cmd "$d/dir.bin"
	expect $cmd-truncated 4 1 "$d/truncated.bin: damaged segment \(truncated.*offset [0-9]+" -- \
		$cmd "$d/truncated.bin"
	expect $cmd-corrupt-chunk 4 1 "$d/corrupt.bin: damaged segment .*1 corrupt chunks.*offset [0-9]+" -- \
		$cmd "$d/corrupt.bin"
	expect $cmd-missing-and-good 4 1 "$d/gone.bin: No such file" -- $cmd "$d/gone.bin" "$golden/basic.bin"
	expect $cmd-good 0 0 -- $cmd "$golden/basic.bin" "$golden/basic.bin.gz"
	expect $cmd-no-trace-argument 2 -1 "no TRACE given" -- $cmd --json
	expect $cmd-unknown-option 2 -1 "unknown option '--bogus'" -- $cmd --bogus "$golden/basic.bin"
	expect $cmd-bad-min 2 -1 "--min: bad duration" -- $cmd --min 5parsecs "$golden/basic.bin"
	expect $cmd-bad-from 2 -1 "--from: bad time" -- $cmd --from yesterday "$golden/basic.bin"
	expect $cmd-help 0 0 -- $cmd --help
	if grep -q -- "--from WHEN" "$tmp/out" && grep -q -- "--to WHEN" "$tmp/out" && grep -q -- "--min DURATION" "$tmp/out"; then
		echo "PASS analyze-$cmd-help-lists-options"
	else
		echo "FAIL analyze-$cmd-help-lists-options: $(head -c 300 "$tmp/out")"
	fi
done

# the mixed directory: one warning per damaged file, output still written
m=$tmp/mixed
mkdir "$m"
cp "$golden/basic.bin" "$m/a-good.bin"
cp "$golden/truncated.bin" "$m/b-truncated.bin"
cp "$golden/corrupt-chunk.bin" "$m/c-corrupt.bin"
: >"$m/d-empty.active"
expect summary-directory-mixed 4 3 "$m/b-truncated.bin: .*truncated" "$m/c-corrupt.bin: .*corrupt" \
	"$m/d-empty.active: truncated" -- summary --json "$m"
if python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
dq = s["data_quality"]
assert len(s["warnings"]) == 3, s["warnings"]
assert dq["truncated_segments"] == 1 and dq["corrupt_segments"] == 1 and dq["unreadable"] == 1, dq
assert s["workers"] and s["polls"]["count"] > 0, s["polls"]
' "$tmp/out" 2>"$tmp/py.err"; then
	echo "PASS analyze-summary-directory-mixed-json"
else
	echo "FAIL analyze-summary-directory-mixed-json: $(tail -n 1 "$tmp/py.err")"
fi

# no command: summary is the default; the top-level help names every command
expect default-command 0 0 -- "$golden/basic.bin"
grep -q "^workers:" "$tmp/out" && echo "PASS analyze-default-is-summary" ||
	echo "FAIL analyze-default-is-summary: $(head -c 200 "$tmp/out")"
expect top-help 0 0 -- --help
if grep -q "summary" "$tmp/out" && grep -q "polls" "$tmp/out" && grep -q "dump" "$tmp/out"; then
	echo "PASS analyze-top-help-lists-commands"
else
	echo "FAIL analyze-top-help-lists-commands"
fi
expect unknown-command 2 -1 "unknown command 'frobnicate'" -- frobnicate

# hostile input: the fuzz corpus and the golden segments, each file alone, through summary --json
# and polls: no sanitizer report, a meaningful exit status, and valid JSON whenever output is
# written (status 0 or 4)
bad=""
n=0
mkdir -p "$tmp/corpus"
for f in tests/fuzz/corpus/* "$golden"/*.bin "$golden"/*.bin.gz; do
	[ -f "$f" ] || continue
	n=$((n + 1))
	for cmd in summary polls; do
		rc=0
		o=$tmp/corpus/$n.$cmd
		# leaks: every file through summary (the decoder every command shares), the first and
		# every 8th through polls (lib.sh says why: d9_corpus_leaks)
		leaks=1
		[ "$cmd" = polls ] && leaks=$(((n - 1) % 8 == 0))
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=$leaks "$san" $cmd --json "$f" \
			>"$o.out" 2>"$tmp/err" || rc=$?
		if grep -qE 'runtime error|Sanitizer' "$tmp/err"; then
			bad="$bad $cmd $(basename "$f"): $(grep -m1 -E 'runtime error|Sanitizer' "$tmp/err");"
		elif [ "$rc" != 0 ] && [ "$rc" != 3 ] && [ "$rc" != 4 ]; then
			bad="$bad $cmd $(basename "$f"): exit $rc;"
		elif [ "$rc" = 3 ]; then
			rm -f "$o.out"
		fi
	done
done
# one checker for every output written
bad="$bad$(python3 -c '
import glob, json, sys
for path in sorted(glob.glob(sys.argv[1] + "/*.out")):
    try:
        for line in open(path, errors="strict"):
            json.loads(line)
    except ValueError as e:
        print(" %s: invalid JSON (%s);" % (path, e), end="")
' "$tmp/corpus")"
if [ -z "$bad" ] && [ "$n" -gt 0 ]; then
	echo "PASS analyze-hostile-corpus: $n files"
else
	echo "FAIL analyze-hostile-corpus: ${bad:-no input files}" | head -c 2000
	echo
fi
