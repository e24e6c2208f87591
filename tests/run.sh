#!/usr/bin/env bash
# run.sh: runs every test program and counts results. Each program prints lines
# "PASS name", "FAIL name: why" or "SKIP name: why"; a program that exits non-zero without
# printing a FAIL line counts as one failure of its own. Ends with "N passed, N failed[, N skipped]"
# and exits non-zero on any failure. An argument runs only the programs whose path contains it.
set -u
cd "$(dirname "$0")/.."
filter="${1:-}"
log_dir=build/test-logs
mkdir -p "$log_dir"

progs=()
for t in build/san/tests/test-*; do [ -x "$t" ] && progs+=("$t"); done
for t in tests/integration/test-*.sh; do [ -f "$t" ] && progs+=("$t"); done

pass=0 fail=0 skip=0
for t in "${progs[@]}"; do
	[ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && continue
	name=$(basename "$t")
	log="$log_dir/$name.log"
	start=$(date +%s)
	if [[ "$t" == *.sh ]]; then bash "$t" >"$log" 2>&1; rc=$?; else "$t" >"$log" 2>&1; rc=$?; fi
	secs=$(( $(date +%s) - start ))
	p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $name: exited with status $rc (log: $log)" >>"$log"
		f=1
	fi
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
	printf '%-32s %3d passed %3d failed %3d skipped  %3ds\n' "$name" "$p" "$f" "$s" "$secs"
	grep -E '^(FAIL|SKIP) ' "$log" | sed 's/^/    /'
	if [ "$f" -gt 0 ]; then tail -n 20 "$log" | grep -vE '^(PASS|FAIL|SKIP) ' | sed 's/^/    | /'; fi
done
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
