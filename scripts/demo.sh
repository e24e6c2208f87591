#!/usr/bin/env bash
# demo.sh (make demo): the main job end to end. Starts the State Threads test server under the
# agent, drives a short mixed load (wrk plus a few injected slow requests), stops the server with
# SIGTERM (the agent seals the trace), and shows what the trace holds.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${D9_DEMO_DIR:-build/demo}
rm -rf "$out"
mkdir -p "$out"
trace="$out/trace"
portfile="$out/port"

echo "== starting build/tests/st-http under LD_PRELOAD=build/libd9agent.so"
D9_TRACE_PATH="$trace/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" \
	build/tests/st-http -p 0 -P "$portfile" -q -t 60 2>"$out/server.log" &
pid=$!
for _ in $(seq 100); do [ -s "$portfile" ] && break; sleep 0.05; done
port=$(cat "$portfile")
url="http://127.0.0.1:$port"

echo "== load: wrk -t2 -c8 -d3s $url/fast, plus injected slow requests"
wrk -t2 -c8 -d3s "$url/fast" >"$out/wrk.txt" 2>&1 &
wrk_pid=$!
sleep 0.5
curl -s "$url/burn?ms=20" >/dev/null      # 20 ms of CPU in burn_cpu()
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

echo "== decoding with build/d9-analyze dump"
build/d9-analyze dump "$trace" >"$out/dump.jsonl"
python3 - "$out/dump.jsonl" <<'PY'
import json, sys, collections
types = collections.Counter(); strings = {}; locs = {}; stacks = {}
hdr = None; polls = {}; longest = []; blocking = []; wakes = collections.Counter()
end = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["rec"] == "header": hdr = r
    elif r["rec"] == "end": end = r
    elif r["rec"] == "def":
        if r["kind"] == "String": strings[r["id"]] = r["value"]
        elif r["kind"] == "SpawnLocation": locs[r["id"]] = r
    elif r["rec"] == "event":
        types[r["type"]] += 1
        t = r["type"]
        if t == "PollStart": polls[(r["tid"], r["coroutine"])] = (r["mono_ns"], r["location"])
        elif t == "PollEnd":
            s = polls.pop((r["tid"], r["coroutine"]), None)
            if s: longest.append((r["mono_ns"] - s[0], r["coroutine"], s[1]))
        elif t == "Wake": wakes[["other","fd","timer","cond","mutex","join","interrupt","spawn"][r["kind"]]] += 1
        elif t == "BlockingCall": blocking.append((r["duration_ns"], strings.get(r["call"], "?"), r["coroutine"]))
def locname(i):
    l = locs.get(i)
    if not l: return "?"
    return strings.get(l["name"]) or "0x%x (from 0x%x)" % (l["function_addr"], l["callsite_addr"])
print("   process %s pid %d, %s clock" % (hdr["process"], hdr["pid"], hdr["clock"]))
print("   events: " + ", ".join("%s %d" % kv for kv in types.most_common()))
print("   wakes by kind: " + ", ".join("%s %d" % kv for kv in wakes.most_common()))
print("   longest polls:")
for d, co, loc in sorted(longest, reverse=True)[:5]:
    print("     %8.2f ms  coroutine %-6d %s" % (d / 1e6, co, locname(loc)))
print("   blocking calls:")
for d, name, co in sorted(blocking, reverse=True)[:5]:
    print("     %8.2f ms  %-12s coroutine %d" % (d / 1e6, name, co))
print("   data quality: %d chunks, %d corrupt, truncated=%s, sealed=%s" % (
    end["chunks"], end["corrupt_chunks"], end["truncated"], end["sealed"]))
PY
echo "== done: the full trace is in $trace, every record as JSON in $out/dump.jsonl"
