#!/usr/bin/env bash
# demo.sh (make demo): the main job end to end. Starts the State Threads test server under the
# agent, drives a short mixed load (wrk plus a few injected slow requests), stops the server with
# SIGTERM (the agent seals the trace), and shows the analyzer's summary of it, a flame graph
# input and the viewer's self-contained HTML report. CPU profiling is on at 99 Hz (off-CPU
# samples too: they need root or CAP_PERFMON, otherwise the agent says so once and goes on).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${D9_DEMO_DIR:-build/demo}
rm -rf "$out"
mkdir -p "$out"
trace="$out/trace"
portfile="$out/port"

echo "== starting build/tests/st-http under LD_PRELOAD=build/libd9agent.so (D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1)"
D9_TRACE_PATH="$trace/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" \
	D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1 \
	build/tests/st-http -p 0 -P "$portfile" -q -t 60 2>"$out/server.log" &
pid=$!
for _ in $(seq 600); do [ -s "$portfile" ] && break; sleep 0.05; done # 30 s: a loaded machine
port=$(cat "$portfile")
url="http://127.0.0.1:$port"

echo "== load: wrk -t2 -c8 -d3s $url/fast, plus injected slow requests"
wrk -t2 -c8 -d3s "$url/fast" >"$out/wrk.txt" 2>&1 &
wrk_pid=$!
sleep 0.5
curl -s "$url/burn?ms=200" >/dev/null     # 200 ms of CPU in burn_cpu(): ~20 samples at 99 Hz
curl -s "$url/sleep?ms=50" >/dev/null     # st_usleep: a timer wake
curl -s "$url/block?ms=30" >/dev/null     # blocking usleep: stalls every coroutine
curl -s "$url/fanout?k=8" >/dev/null      # 8 coroutines and a condition variable
curl -s "$url/file" >/dev/null            # blocking reads of a regular file
wait "$wrk_pid"
grep -E 'Requests/sec|Latency' "$out/wrk.txt" | sed 's/^/   /'

echo "== stopping the server with SIGTERM (the agent seals the trace)"
kill -TERM "$pid"
wait "$pid" 2>/dev/null || true
ls -l "$trace" | sed 's/^/   /'

echo "== d9-analyze summary $trace"
build/d9-analyze summary "$trace"
build/d9-analyze dump "$trace" >"$out/dump.jsonl"
build/d9-analyze flame "$trace" >"$out/cpu.folded" 2>/dev/null || true
build/d9-analyze html "$trace" -o "$out/report.html"
echo "== done: the trace is in $trace; every record as JSON in $out/dump.jsonl; on-CPU folded"
echo "   stacks in $out/cpu.folded; the timeline viewer in $out/report.html (open it in a browser); try"
echo "   build/d9-analyze polls --min 10ms $trace"
