#!/usr/bin/env bash
# test-analyze-flame.sh: `d9-analyze flame` (sanitizer build) on the synthetic traces of
# build/tests/gen-analyze-flame (tests/tools/gen-analyze-flame.c: CpuSample and BlockingCall
# stacks inside known polls). Checks the exact folded output of each option (sources on, off,
# both and --blocking; --by-location; the filters --location, --long-polls, --from/--to,
# --worker, --pid), the empty-result message and the usage errors. Then the fuzz corpus (.gz
# files gunzipped) goes through it: no sanitizer report, exit 0, 3 or 4, only folded lines.
set -u
cd "$(dirname "$0")/../.."

san=build/san/d9-analyze
gen=build/tests/gen-analyze-flame
for b in "$san" "$gen"; do
	if [ ! -x "$b" ]; then
		echo "FAIL analyze-flame-setup: $b is not built (make all build/san/d9-analyze)"
		exit 0
	fi
done
# shellcheck source=lib.sh
. tests/integration/lib.sh
d9_san_env
tmp=$(mktemp -d "${TMPDIR:-/tmp}/d9-analyze-flame-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! "$gen" "$tmp" 2>"$tmp/gen.err"; then
	echo "FAIL analyze-flame-setup: $gen: $(head -c 300 "$tmp/gen.err")"
	exit 0
fi
full=$tmp/full

# flame NAME WANT ARGS...: runs flame ARGS on the full trace; wants exit 0 and exactly WANT on
# stdout (lines separated by '|'). The generator's samples carry no time (as an older d9 wrote
# them), so N counts samples: stderr says so in one line, unless --samples or --blocking asks for
# what N is; any other stderr fails.
flame() {
	local name=$1 want=$2 rc=0 got note=1
	shift 2
	case " $* " in *" --samples "* | *" --blocking "*) note=0 ;; esac
	"$san" flame "$@" "$full" >"$tmp/out" 2>"$tmp/err" || rc=$?
	got=$(paste -sd'|' "$tmp/out")
	if [ "$note" = 1 ] && [ "$(cat "$tmp/err")" = "d9-analyze: flame: the samples carry no duration (written by an older d9): N counts samples, not time" ]; then
		: >"$tmp/err"
	fi
	if [ "$rc" != 0 ] || [ -s "$tmp/err" ]; then
		echo "FAIL analyze-flame-$name: exit $rc, stderr '$(head -c 300 "$tmp/err")'"
	elif [ "$got" != "$want" ]; then
		echo "FAIL analyze-flame-$name: flame $*: got '$got', want '$want'"
	else
		echo "PASS analyze-flame-$name"
	fi
}

# nothing NAME ARGS...: flame ARGS on a trace; wants exit 0, no stdout, one stderr line saying
# there were no samples.
nothing() {
	local name=$1 rc=0
	shift
	"$san" flame "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if [ "$rc" != 0 ] || [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" != 1 ] ||
		! grep -q 'no samples' "$tmp/err"; then
		echo "FAIL analyze-flame-$name: exit $rc, stdout '$(head -c 200 "$tmp/out")'," \
			"stderr '$(head -c 300 "$tmp/err")'"
	else
		echo "PASS analyze-flame-$name"
	fi
}

# stacks (innermost first) S1 = 0x11 0x22 0x33, S2 = 0x44 0x22 0x33, S3 = 0x55.
# on-CPU samples: S1 x6 (poll A 2, B 1, E 2, C 1), S2 x2 (A, C), S3 x4 (B, outside polls, F, pid 200)
flame default "0x33;0x22;0x11 6|0x33;0x22;0x44 2|0x55 4"
flame cpu-on "0x33;0x22;0x11 6|0x33;0x22;0x44 2|0x55 4" --cpu on
flame samples "0x33;0x22;0x11 6|0x33;0x22;0x44 2|0x55 4" --samples
# off-CPU: S3 in A, S2 outside polls
flame cpu-off "0x33;0x22;0x44 1|0x55 1" --cpu off
flame cpu-both "0x33;0x22;0x11 6|0x33;0x22;0x44 3|0x55 5" --cpu=both
# the poll's location first; a ';' in a name becomes '_'
flame by-location "(no poll);0x55 1|handler;0x33;0x22;0x11 5|handler;0x33;0x22;0x44 2|handler;0x55 1|odd_name;0x55 1|ticker;0x33;0x22;0x11 1|ticker;0x55 1" --by-location
flame location "0x33;0x22;0x11 1|0x55 1" --location tick
flame location-odd "odd_name;0x55 1" --location 'odd;' --by-location
# polls of at least 20 us: A (30 us) and E (no PollEnd, but its last sample is 30 us in)
flame long-polls-20us "0x33;0x22;0x11 4|0x33;0x22;0x44 1" --long-polls 20us
# at least 10 us (inclusive): A, C, E and pid 200's D; not B, F (5 us) nor samples outside polls
flame long-polls-10us "0x33;0x22;0x11 5|0x33;0x22;0x44 2|0x55 1" --long-polls 10us
flame long-polls-location "handler;0x33;0x22;0x11 4|handler;0x33;0x22;0x44 1" --long-polls 20us \
	--location hand --by-location
flame worker "0x33;0x22;0x11 1|0x33;0x22;0x44 1|0x55 1" --worker 2
flame pid "0x55 1" --pid 200 --worker 1
flame pid-100 "0x33;0x22;0x11 6|0x33;0x22;0x44 2|0x55 3" --pid 100
flame window "0x33;0x22;0x11 2|0x33;0x22;0x44 1|0x55 2" --from 50us --to 110us
# the window cuts poll A's PollStart: its samples are outside any known poll
flame window-cut "0x33;0x22;0x11 1|0x33;0x22;0x44 1|0x55 1" --from 15us --to 45us
nothing window-cut-location --from 15us --to 45us --location handler "$full"
nothing long-polls-none --long-polls 31us "$full"
nothing empty "$tmp/empty"
nothing empty-blocking --blocking "$tmp/empty"
# blocking calls: us per stack, the call as leaf (A: 7.4 + 2.4 us of usleep, summed then rounded)
flame blocking "(no stack);read 1|0x33;0x22;0x11;read 3|0x33;0x22;0x44;usleep 10" --blocking
flame blocking-by-location "(no poll);(no stack);read 1|handler;0x33;0x22;0x11;read 3|handler;0x33;0x22;0x44;usleep 10" \
	--blocking --by-location
flame blocking-long "0x33;0x22;0x44;usleep 10" --blocking --long-polls 20us

# usage errors: exit 2
bad=()
for args in "--cpu maybe" "--blocking --cpu on" "--blocking --samples" "--long-polls soon" "--worker x" "--bogus" ""; do
	rc=0
	# shellcheck disable=SC2086 # word splitting of the option list is wanted
	"$san" flame $args ${args:+"$full"} >/dev/null 2>"$tmp/err" || rc=$?
	[ "$rc" = 2 ] && ! grep -qE 'runtime error|Sanitizer' "$tmp/err" || bad+=("'$args': exit $rc")
done
if [ "${#bad[@]}" -gt 0 ]; then
	echo "FAIL analyze-flame-usage: ${bad[*]}"
else
	echo "PASS analyze-flame-usage"
fi

# ---- the fuzz corpus: hostile input ------------------------------------------------------------
mkdir -p "$tmp/corpus"
for f in tests/fuzz/corpus/*; do
	case "$f" in *.gz) gunzip -c "$f" >"$tmp/corpus/$(basename "$f" .gz)" 2>/dev/null ;; esac
done
bad=() files=0
for f in tests/fuzz/corpus/* "$tmp"/corpus/*; do
	[ -f "$f" ] || continue
	files=$((files + 1))
	d9_corpus_leaks "$files"
	for args in "--cpu both --by-location" "--blocking --long-polls 1ns --location a"; do
		rc=0
		# shellcheck disable=SC2086
		ASAN_OPTIONS=$D9_CORPUS_ASAN timeout 60 "$san" flame $args "$f" >"$tmp/c.out" 2>"$tmp/c.err" || rc=$?
		if grep -qE 'ERROR: |runtime error|Sanitizer' "$tmp/c.err"; then
			bad+=("$(basename "$f"): $(grep -m1 -E 'ERROR: |runtime error|Sanitizer' "$tmp/c.err")")
		elif [ "$rc" != 0 ] && [ "$rc" != 3 ] && [ "$rc" != 4 ]; then
			bad+=("$(basename "$f") ($args): exit $rc")
		elif grep -qvE '^[^;].* [0-9]+$' "$tmp/c.out"; then
			bad+=("$(basename "$f"): not a folded line: $(grep -m1 -vE '^[^;].* [0-9]+$' "$tmp/c.out")")
		fi
	done
done
if [ "${#bad[@]}" -gt 0 ]; then
	echo "FAIL analyze-flame-corpus: ${#bad[@]} runs of $files files: ${bad[*]:0:5}"
elif [ "$files" -lt 40 ]; then
	echo "FAIL analyze-flame-corpus: only $files files (the corpus is missing?)"
else
	echo "PASS analyze-flame-corpus: $files files, no sanitizer report"
fi
