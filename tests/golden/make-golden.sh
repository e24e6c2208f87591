#!/usr/bin/env bash
# make-golden.sh: regenerates the golden segments (build/tests/gen-golden) and their expected
# `d9-analyze dump` output, NAME.jsonl for each NAME. Run it through `make golden`, which builds
# first; then review the diff: a changed .jsonl is a changed decoder contract (FORMAT.md, section
# 13), and a changed .bin is a changed encoder. tests/integration/test-golden.sh checks both.
set -euo pipefail
cd "$(dirname "$0")/../.."

gen=build/tests/gen-golden
analyze=build/d9-analyze
dir=tests/golden
# name and the exit status dump must give for it (test-golden.sh holds the same table)
files=("basic.bin 0" "truncated.bin 4" "corrupt-chunk.bin 4" "unknown-types.bin 0" "basic.bin.gz 0"
	"compact-waits.bin 0")

for b in "$gen" "$analyze"; do
	if [ ! -x "$b" ]; then
		echo "make-golden: $b is missing: run make first" >&2
		exit 1
	fi
done
"$gen" "$dir"
status=0
for entry in "${files[@]}"; do
	read -r name want <<<"$entry"
	rc=0
	# run from the golden directory so no path appears anywhere in the output
	(cd "$dir" && "../../$analyze" dump "$name") >"$dir/$name.jsonl" 2>/dev/null || rc=$?
	printf 'make-golden: %-20s %6d bytes, %3d lines, dump exit %d\n' "$name" \
		"$(stat -c %s "$dir/$name")" "$(wc -l <"$dir/$name.jsonl")" "$rc"
	if [ "$rc" -ne "$want" ]; then
		echo "make-golden: $name: dump exited $rc, expected $want" >&2
		status=1
	fi
done
exit $status
