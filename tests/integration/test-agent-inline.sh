#!/usr/bin/env bash
# test-agent-inline.sh: nested inlined functions are named level by level, each at its own line
# (agent/dwsym.c, shared by the agent's symbolizer and the analyzer; tests/tools/inline-check.c).
set -u
cd "$(dirname "$0")/../.."
bin=build/tests/inline-check
if [ ! -x "$bin" ]; then
	echo "FAIL inline-chain: $bin is not built (make all)"
	exit 0
fi
"$bin" || echo "FAIL inline-chain: $bin exited with status $?"
