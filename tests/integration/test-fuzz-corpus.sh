#!/usr/bin/env bash
# test-fuzz-corpus.sh: replays every file of tests/fuzz/corpus/ through the decoder fuzz target
# (build/fuzz/fuzz-decode: libFuzzer + ASan + UBSan); an input that crashes or hangs fails on
# its own and the files after it still run. Beyond "no sanitizer report" it checks what the
# seeds are for: valid-* decode without a single problem, trunc-*/corrupt-*/bad-* are reported
# as broken. crash-* are reproducers of decoder bugs, fuzz-* inputs merged from fuzzing runs.
# Prints PASS/FAIL/SKIP lines for tests/run.sh. Seeds come from tests/tools/gen-corpus.c.
set -u
cd "$(dirname "$0")/../.."

bin=${D9_FUZZ_BIN:-build/fuzz/fuzz-decode} # D9_FUZZ_BIN: try another build of the target
corpus=tests/fuzz/corpus
max_bytes=$((256 * 1024)) # the corpus is committed: keep it small

if [ ! -x "$bin" ]; then
	if command -v clang >/dev/null 2>&1; then
		echo "FAIL fuzz-corpus: $bin is not built (make test builds it)"
	else
		echo "SKIP fuzz-corpus: clang is not installed, so $bin cannot be built"
	fi
	exit 0
fi

files=()
for f in "$corpus"/*; do [ -f "$f" ] && files+=("$f"); done
bytes=0
for f in "${files[@]}"; do bytes=$((bytes + $(stat -c %s "$f"))); done
if [ "${#files[@]}" -lt 40 ]; then
	echo "FAIL fuzz-corpus-size: only ${#files[@]} files in $corpus (the seeds are missing?)"
elif [ "$bytes" -gt "$max_bytes" ]; then
	echo "FAIL fuzz-corpus-size: $bytes bytes in $corpus, over $max_bytes"
else
	echo "PASS fuzz-corpus-size: ${#files[@]} files, $bytes bytes"
fi

# shellcheck source=lib.sh
. tests/integration/lib.sh
d9_san_env
export D9_FUZZ_SUMMARY=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One process runs the files in order ("Running: F" ... "Executed F in N ms"); when an input
# crashes or times out (5 s: a replay takes milliseconds), that file fails and a new process
# goes on with the files after it.
declare -A crashed=()
rest=("${files[@]}")
while [ "${#rest[@]}" -gt 0 ]; do
	timeout 120 "$bin" -rss_limit_mb=2048 -timeout=5 "${rest[@]}" >"$tmp/run.log" 2>&1
	rc=$?
	# split the log into one section per file
	awk -v dir="$tmp" '
		/^Running: / { f = substr($0, 10); n = split(f, parts, "/"); out = dir "/" parts[n] ".log" }
		out != "" { print > out }
		/^Executed / { out = "" }' "$tmp/run.log"
	[ "$rc" -eq 0 ] && break
	last=$(grep '^Running: ' "$tmp/run.log" | tail -n 1 | cut -c10-)
	if [ -z "$last" ] || grep -qxF "Executed $last" <(sed -E 's/ in [0-9]+ ms$//' "$tmp/run.log"); then
		echo "FAIL fuzz-corpus: $bin exited with status $rc outside any input:"
		tail -n 5 "$tmp/run.log" | sed 's/^/    /'
		break
	fi
	crashed[$(basename "$last")]=$rc
	next=()
	seen=0
	for f in "${rest[@]}"; do
		[ "$seen" -eq 1 ] && next+=("$f")
		[ "$f" = "$last" ] && seen=1
	done
	rest=("${next[@]}")
done

for f in "${files[@]}"; do
	name=$(basename "$f")
	log="$tmp/$name.log"
	if [ -n "${crashed[$name]:-}" ]; then
		why=$(grep -m1 -E 'runtime error|ERROR: |check failed|deadly signal' "$log")
		echo "FAIL fuzz-corpus/$name: exit ${crashed[$name]}: ${why:-no sanitizer line}"
		grep -E 'runtime error|ERROR: |check failed|#[0-9]+ 0x' "$log" | head -n 12 | sed 's/^/    /'
		continue
	fi
	# summary lines: "d9-fuzz <raw|fixed|file> open=E chunks=N events=N defs=N problems=N ..."
	lines=$(grep -E '^d9-fuzz (raw|fixed|file) ' "$log" 2>/dev/null)
	if [ -z "$lines" ]; then
		echo "FAIL fuzz-corpus/$name: not run, or the target printed no decode summary"
		continue
	fi
	case "$name" in
	valid-*)
		# every reader that opened it saw no problem; at least one reader opened it
		# (a .gz opens only through the file reader)
		if grep -qvE ' problems=0 bad_iters=0 ' <<<"$lines"; then
			echo "FAIL fuzz-corpus/$name: a valid seed decoded with problems:"
			sed 's/^/    /' <<<"$lines"
		elif ! grep -q ' open=0 ' <<<"$lines"; then
			echo "FAIL fuzz-corpus/$name: a valid seed did not open"
		else
			echo "PASS fuzz-corpus/$name"
		fi
		;;
	trunc-* | corrupt-* | bad-*)
		if grep -qE ' open=-[0-9]+ | problems=[1-9]| bad_iters=[1-9]' <<<"$lines"; then
			echo "PASS fuzz-corpus/$name"
		else
			echo "FAIL fuzz-corpus/$name: a broken seed decoded without any reported problem"
		fi
		;;
	*)
		echo "PASS fuzz-corpus/$name"
		;;
	esac
done

# the richest seed must really decode: all of its events and definitions
full=$(D9_FUZZ_SUMMARY=1 "$bin" "$corpus/valid-full.d9" 2>&1 | grep -m1 '^d9-fuzz raw ')
if [[ "$full" =~ events=([0-9]+)\ defs=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -ge 90 ] &&
	[ "${BASH_REMATCH[2]}" -ge 20 ]; then
	echo "PASS fuzz-corpus-decodes: valid-full.d9 gives ${BASH_REMATCH[1]} events, ${BASH_REMATCH[2]} definitions"
else
	echo "FAIL fuzz-corpus-decodes: valid-full.d9 summary: ${full:-none}"
fi
exit 0
