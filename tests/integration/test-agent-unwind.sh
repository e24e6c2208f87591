#!/usr/bin/env bash
# test-agent-unwind.sh: DWARF unwinding of perf_event samples (agent/unwind.c) through
# build/tests/unwind-check, which samples its own frame-pointer-less call chain with a real
# cpu-clock event (user registers + 8 KiB of stack), unwinds every sample with libdw in process
# and names the frames; then feeds the unwinder hostile input and libraries loaded later. Its
# PASS/FAIL/SKIP lines are passed on; a crash, a hang or a run without any result line is a FAIL.
set -u
cd "$(dirname "$0")/../.."

bin=build/tests/unwind-check
if [ ! -x "$bin" ]; then
	echo "FAIL agent-unwind: $bin is not built (make all)"
	exit 0
fi
for v in $(compgen -e | grep '^D9_'); do unset "$v"; done

out=$(mktemp)
trap 'rm -rf "$out"' EXIT
rc=0
timeout -k 5 120 "$bin" >"$out" 2>&1 || rc=$?
cat "$out"
results=$(grep -cE '^(PASS|FAIL|SKIP) ' "$out")
if [ "$rc" -ge 124 ]; then
	echo "FAIL agent-unwind: unwind-check died (exit status $rc: timeout or signal)"
elif [ "$results" -eq 0 ]; then
	echo "FAIL agent-unwind: unwind-check printed no result (exit status $rc)"
elif [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$out"; then
	echo "FAIL agent-unwind: unwind-check exited with status $rc without a FAIL line"
fi
exit 0
