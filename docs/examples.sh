#!/usr/bin/env bash
# docs/examples.sh: makes the traces and the outputs quoted in docs/guide.md from the test servers
# (tests/servers/), so every example there can be made again: `bash docs/examples.sh [DIR]`
# (default build/docs-examples). Needs `make all` and wrk, curl. Each scenario starts a server
# under the agent, sends known requests, stops it with SIGTERM (the agent seals the trace) and
# runs the commands the guide shows; their outputs go to DIR/<scenario>.<command>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build/docs-examples}")
rm -rf "$out"
mkdir -p "$out"
A=build/d9-analyze

# start NAME ENV...: st-http under the agent, its trace in $out/NAME; sets pid and url
start() {
	local name=$1
	shift
	mkdir -p "$out/$name"
	env "$@" D9_TRACE_PATH="$out/$name/trace/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" \
		build/tests/st-http -p 0 -P "$out/$name/port" -q -t 120 2>"$out/$name/server.log" &
	pid=$!
	for _ in $(seq 600); do [ -s "$out/$name/port" ] && break; sleep 0.05; done
	url="http://127.0.0.1:$(cat "$out/$name/port")"
}
stop() {
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
}
run() { # NAME CMD ARGS...: output of `d9-analyze CMD ARGS` into $out/NAME.CMD.txt (and its status)
	local name=$1 cmd=$2 st=0
	shift 2
	(cd "$out" && "$OLDPWD/$A" "$cmd" "$@" >"$name.$cmd.txt" 2>&1) || st=$?
	echo "exit status $st" >>"$out/$name.$cmd.txt"
}

# 1. an incident: steady keep-alive load, one request that burns 100 ms of CPU, one that blocks the
# whole process in usleep() for 50 ms, and one that sleeps 20 ms the right way (st_usleep)
start incident D9_CPU_PROFILE=99 D9_REQUESTS=1 D9_REQUESTS_PREVIEW=1
wrk -t1 -c4 -d2s "$url/fast" >/dev/null 2>&1 &
w=$!
curl -s "$url/burn?ms=100" >/dev/null
curl -s "$url/block?ms=50" >/dev/null
curl -s "$url/sleep?ms=20" >/dev/null
wait "$w"
stop
run incident check incident/trace
run incident summary incident/trace
run incident polls --min 10ms incident/trace
run incident flame --long-polls 10ms incident/trace
if "$A" requests --help >/dev/null 2>&1; then run incident requests --top 5 incident/trace; fi
"$A" html incident/trace -o "$out/incident.html" 2>/dev/null || true

# 2. before and after a change that makes /burn twice as slow (a 5 ms handler, then a 10 ms one)
for v in before:5 after:10; do
	start "${v%%:*}" D9_CPU_PROFILE=99
	for _ in $(seq 40); do curl -s "$url/burn?ms=${v#*:}" >/dev/null; curl -s "$url/fast" >/dev/null; done
	stop
done
if "$A" diff --help >/dev/null 2>&1; then run change diff before/trace after/trace; fi
if "$A" pprof --help >/dev/null 2>&1; then
	(cd "$out" && "$OLDPWD/$A" pprof -o incident.pb.gz incident/trace >/dev/null 2>&1) || true
	if command -v go >/dev/null && [ -s "$out/incident.pb.gz" ]; then
		go tool pprof -top -nodecount=8 "$out/incident.pb.gz" >"$out/incident.pprof-top.txt" 2>&1 || true
	fi
fi

# 3. a program that uses d9.h: marks, values and custom events
mkdir -p "$out/api"
D9_TRACE_PATH="$out/api/trace/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" \
	build/tests/api-demo 2 >/dev/null
run api events api/trace
echo "examples in $out"
