#!/usr/bin/env bash
# bench.sh: runs d9's benchmarks and leaves machine-readable results in build/bench/*.json.
# Builds nothing: `make bench` builds everything first. QUICK=1 runs shorter repetitions
# (a smoke run for CI; its numbers are noisier). Timing claims live here, never in tests.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
[ "${QUICK:-0}" = "1" ] && quick=(--quick)
mkdir -p build/bench

bin=build/tests/bench-format
if [ ! -x "$bin" ]; then
	echo "bench: $bin is missing; run 'make bench' (it builds everything first)" >&2
	exit 1
fi
echo "== format: encoder and decoder throughput"
"$bin" "${quick[@]}" --json build/bench/format.json
