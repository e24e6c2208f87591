#!/usr/bin/env bash
# test-preload-smoke.sh: the servers behave the same under the agent. Runs tests/servers/smoke.sh
# (every endpoint, keep-alive, blocking vs parking, -c -e poll, -w 2, -T 2) for each server with
# LD_PRELOAD=build/libd9agent.so exported, so the servers and every helper the script runs (curl,
# sed, ps...) are traced into $T. Each smoke line is relayed as "smoke-agent-<server>-<check>".
# One difference is by design: the agent adds two threads (d9-writer, d9-compress) to a traced
# process, which smoke.sh's epoll thread-names check lists; that check is redone here without them.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-smoke

for bin in "$ST_HTTP" "$ST_HTTP_NOFP" "$EPOLL_HTTP"; do
	b=$(basename "$bin")
	out=$T/$b.out
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/$b/trace.bin" \
		timeout -s KILL 180 bash "$PL_ROOT/tests/servers/smoke.sh" "$bin" >"$out" 2>"$T/$b.err"
	rc=$?
	if ! grep -qE '^(PASS|FAIL) ' "$out"; then
		pl_fail "smoke-agent-$b" "smoke.sh printed no result (status $rc): $(head -c 300 "$T/$b.err")"
		continue
	fi
	while IFS= read -r line; do
		case "$line" in
		"FAIL thread-names: got "*)
			names=${line#FAIL thread-names: got \'}
			names=$(echo "${names%\'}" | tr ' ' '\n' | grep -vxE 'd9-writer|d9-compress' | grep . | tr '\n' ' ')
			if [ "$names" = "epoll-http worker-0 worker-1 " ]; then
				pl_pass "smoke-agent-$b-thread-names" "$names(plus the agent's d9-writer, d9-compress)"
			else
				pl_fail "smoke-agent-$b-thread-names" "${line#FAIL thread-names: }"
			fi
			;;
		"PASS "* | "FAIL "*) echo "${line%% *} smoke-agent-$b-${line#* }" ;;
		esac
	done <"$out"
	if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$out"; then
		pl_fail "smoke-agent-$b" "smoke.sh exited $rc without a FAIL line: $(head -c 300 "$T/$b.err")"
	fi
done
