#!/usr/bin/env bash
# bench-server.sh: what the agent costs a real server under real load, run by scripts/bench.sh.
# build/tests/st-http (State Threads) on CPU 1 under wrk (1 thread, CONNS connections) on CPU 0,
# loopback, GET /fast. Each mode runs as warm-up pairs and then measured pairs, every pair one
# baseline run (no agent) followed by one run in the mode, each with a fresh server process, so
# drift on a shared machine cancels in the per-pair ratio. Per run it keeps wrk's throughput and
# latency, the process's CPU time, the agent's own threads' CPU (d9-writer, d9-compress, by name
# in /proc/PID/task/*/stat, read before the server stops), VmRSS, and the trace's size and event
# count (d9-analyze summary --json). Writes build/bench/server-runs.jsonl (one line per run) and
# build/bench/server.json (medians, spreads). Builds nothing. QUICK=1: shorter runs, fewer pairs.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=${QUICK:-0}
if [ "$quick" = "1" ]; then
	dur=${BENCH_DURATION:-2} pairs=${BENCH_PAIRS:-2} warm=${BENCH_WARMUP:-1} warm_dur=1
else
	dur=${BENCH_DURATION:-3} pairs=${BENCH_PAIRS:-10} warm=${BENCH_WARMUP:-1} warm_dur=2
fi
conns=${BENCH_CONNS:-4}
# lean: the default agent without its background thread (d9-compress: gzip and symbols of
# sealed segments), to tell that thread's cost from the recording's
modes=${BENCH_MODES:-"trace block lean cpu99 prof perf"}
server_cpu=${BENCH_SERVER_CPU:-1} wrk_cpu=${BENCH_WRK_CPU:-0}
# server and wrk run at nice -10 when we may (root): on a machine shared with other work they
# then get most of their CPU instead of half of it. The agent's threads inherit it, as they
# would inherit any priority of the host (d9-compress sets its own nice 19).
nice_adj=${BENCH_NICE:-$([ "$(id -u)" -eq 0 ] && echo -10 || echo 0)}
server=build/tests/st-http agent=$PWD/build/libd9agent.so ana=build/d9-analyze

for b in "$server" "$agent" "$ana"; do
	[ -e "$b" ] || { echo "bench-server: $b is missing; run 'make bench'" >&2; exit 1; }
done
for c in wrk taskset gzip python3; do
	command -v "$c" >/dev/null || { echo "bench-server: $c is missing (make deps)" >&2; exit 1; }
done
if [[ " $modes " == *" perf "* ]] && ! command -v perf >/dev/null; then
	echo "bench-server: perf is missing (Debian: apt-get install linux-perf); skipping the perf mode" >&2
	modes=${modes//perf/}
fi

mkdir -p build/bench
work=$(mktemp -d "${TMPDIR:-/tmp}/d9-bench-server-XXXXXX")
live="" # the server (or perf) of the run in progress: stopped if this script stops early
trap '[ -z "$live" ] || kill -KILL $live 2>/dev/null; rm -rf "$work"' EXIT
runs=build/bench/server-runs.jsonl
: >"$runs"
hz=$(getconf CLK_TCK)

# ticks (utime+stime) of /proc/PID/stat or a task's stat; 0 when gone
ticks() { awk '{ print $14 + $15 }' "$1" 2>/dev/null || echo 0; }

# sum of the ticks of PID's threads named $2
thread_ticks() {
	local pid=$1 name=$2 sum=0 t
	for t in /proc/"$pid"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = "$name" ] && sum=$((sum + $(ticks "$t/stat")))
	done
	echo "$sum"
}

# run_one MODE ROLE SECONDS: one fresh server in MODE (base, trace, block, lean, cpu99, prof, perf) under
# wrk for SECONDS; appends one JSON line to $runs unless ROLE is warmup
run_one() {
	local mode=$1 role=$2 secs=$3 d envs=() pid="" perf_pid="" port=""
	d=$(mktemp -d "$work/$mode-XXXX")
	case $mode in
	base | perf) ;;
	trace) envs=(LD_PRELOAD="$agent" D9_TRACE_PATH="$d/trace/trace.bin" D9_BLOCKING=0) ;;
	block) envs=(LD_PRELOAD="$agent" D9_TRACE_PATH="$d/trace/trace.bin") ;;
	lean) envs=(LD_PRELOAD="$agent" D9_TRACE_PATH="$d/trace/trace.bin" D9_COMPRESS=0
		D9_SYMBOLIZE=0) ;;
	cpu99) envs=(LD_PRELOAD="$agent" D9_TRACE_PATH="$d/trace/trace.bin" D9_CPU_PROFILE=99) ;;
	prof) envs=(LD_PRELOAD="$agent" D9_TRACE_PATH="$d/trace/trace.bin" D9_CPU_PROFILE=99
		D9_SCHED_EVENTS=1) ;;
	*) echo "bench-server: unknown mode $mode" >&2; exit 2 ;;
	esac
	if [ "$mode" = perf ]; then
		nice -n "$nice_adj" taskset -c "$server_cpu" perf record -F 99 -g -q -o "$d/perf.data" -- \
			"$server" -p 0 -P "$d/port" </dev/null >/dev/null 2>"$d/stderr" &
		perf_pid=$!
		live=$perf_pid
	else
		env "${envs[@]}" nice -n "$nice_adj" taskset -c "$server_cpu" "$server" -p 0 -P "$d/port" </dev/null \
			>/dev/null 2>"$d/stderr" &
		pid=$!
		live=$pid
	fi
	for _ in $(seq 200); do [ -s "$d/port" ] && break; sleep 0.025; done
	port=$(cat "$d/port" 2>/dev/null || true)
	[ -n "$pid" ] || pid=$(sed -n 's/^st-http: port=[0-9]* pid=\([0-9]*\).*/\1/p' "$d/stderr")
	live="$live $pid"
	if [ -z "$port" ] || [ -z "$pid" ]; then
		echo "bench-server: $mode: the server did not start:" >&2
		cat "$d/stderr" >&2
		exit 1
	fi
	local c0 w0 z0 p0 c1 w1 z1 p1 rss hwm t0 t1
	c0=$(ticks /proc/"$pid"/stat) w0=$(thread_ticks "$pid" d9-writer)
	z0=$(thread_ticks "$pid" d9-compress) p0=0
	[ -n "$perf_pid" ] && p0=$(ticks /proc/"$perf_pid"/stat)
	t0=$(date +%s%N)
	if ! nice -n "$nice_adj" taskset -c "$wrk_cpu" wrk -t1 -c"$conns" -d"${secs}s" --latency \
		"http://127.0.0.1:$port/fast" >"$d/wrk.txt" 2>&1; then
		echo "bench-server: $mode: wrk failed:" >&2
		cat "$d/wrk.txt" >&2
		exit 1
	fi
	t1=$(date +%s%N)
	c1=$(ticks /proc/"$pid"/stat) w1=$(thread_ticks "$pid" d9-writer)
	z1=$(thread_ticks "$pid" d9-compress) p1=0
	[ -n "$perf_pid" ] && p1=$(ticks /proc/"$perf_pid"/stat)
	rss=$(awk '/^VmRSS:/ { print $2 }' /proc/"$pid"/status)
	hwm=$(awk '/^VmHWM:/ { print $2 }' /proc/"$pid"/status)
	kill -TERM "$pid"
	if [ -n "$perf_pid" ]; then wait "$perf_pid" || true; else wait "$pid" || true; fi
	live=""
	[ "$role" = warmup ] && { rm -rf "$d"; return 0; }

	# the trace on disk: raw bytes (.bin, .active, or .bin.gz uncompressed) and gzipped bytes
	# (.bin.gz as written, or gzip -6 of the rest)
	local raw=0 gz=0 f segs=0 summary="{}"
	if [ -d "$d/trace" ]; then
		for f in "$d"/trace/*; do
			[ -f "$f" ] || continue
			segs=$((segs + 1))
			case $f in
			*.gz) raw=$((raw + $(gzip -dc "$f" | wc -c))) gz=$((gz + $(wc -c <"$f"))) ;;
			*) raw=$((raw + $(wc -c <"$f"))) gz=$((gz + $(gzip -6 -c "$f" | wc -c))) ;;
			esac
		done
		"$ana" summary --json "$d/trace" >"$d/summary.json" 2>"$d/analyze.err" || true
		summary="$d/summary.json"
	elif [ -f "$d/perf.data" ]; then
		raw=$(wc -c <"$d/perf.data") gz=$(gzip -6 -c "$d/perf.data" | wc -c) segs=1
	fi
	python3 - "$mode" "$d" "$summary" "$secs" "$hz" "$t0" "$t1" "$c0" "$c1" "$w0" "$w1" "$z0" "$z1" \
		"$p0" "$p1" "$rss" "$hwm" "$raw" "$gz" "$segs" >>"$runs" <<'PY'
import json, os, re, sys
(mode, d, summary, secs, hz, t0, t1, c0, c1, w0, w1, z0, z1, p0, p1, rss, hwm, raw, gz,
 segs) = sys.argv[1:]
hz = int(hz)
wrk = open(os.path.join(d, "wrk.txt")).read()

def dur_us(s):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", s)
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6, "m": 6e7}[m.group(2)] if m else None

lat = {p: dur_us(v) for p, v in re.findall(r"^\s*(50|75|90|99)%\s+(\S+)\s*$", wrk, re.M)}
m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", wrk)
requests = int(m.group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", wrk).group(1))
errors = re.search(r"Socket errors:.*", wrk)
stderr = [l for l in open(os.path.join(d, "stderr"), errors="replace").read().splitlines()
          if not l.startswith("st-http: port=") and "perf" not in l.split(":")[0]]
events = None
drops = None
if summary != "{}" and os.path.getsize(summary) > 0:
    s = json.load(open(summary))
    events = s.get("events")
    drops = s.get("drops") or s.get("data_quality", {}).get("drops")
wall = (int(t1) - int(t0)) / 1e9
tick = 1.0 / hz
out = {
    "mode": mode, "seconds": wall, "requests": requests, "rps": rps,
    "lat_p50_us": lat.get("50"), "lat_p99_us": lat.get("99"),
    "server_cpu_s": (int(c1) - int(c0)) * tick,
    "writer_cpu_s": (int(w1) - int(w0)) * tick, "compress_cpu_s": (int(z1) - int(z0)) * tick,
    "perf_cpu_s": (int(p1) - int(p0)) * tick,
    "rss_kb": int(rss), "hwm_kb": int(hwm),
    "trace_raw_bytes": int(raw), "trace_gz_bytes": int(gz), "segments": int(segs),
    "events": events, "drops": drops,
    "wrk_errors": errors.group(0) if errors else None,
    "stderr": stderr[:5],
}
if out["lat_p50_us"] is None or out["lat_p99_us"] is None:
    out["wrk_output"] = wrk[-2000:]  # kept to see why the latency did not parse
print(json.dumps(out))
PY
	rm -rf "$d"
}

echo "== server: st-http on CPU $server_cpu, wrk -t1 -c$conns on CPU $wrk_cpu (nice $nice_adj), GET /fast," \
	"$pairs pairs of ${dur}s per mode after $warm warm-up pair(s)"
for mode in $modes; do
	for _ in $(seq "$warm"); do
		run_one base warmup "$warm_dur"
		run_one "$mode" warmup "$warm_dur"
	done
	for i in $(seq "$pairs"); do
		run_one base measure "$dur"
		run_one "$mode" measure "$dur"
		python3 - "$runs" "$mode" "$i" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
a, b = runs[-2], runs[-1]
print(f"  {sys.argv[2]:6} pair {sys.argv[3]}: base {a['rps']:9.0f} req/s, {b['mode']} {b['rps']:9.0f}"
      f" req/s, ratio {b['rps'] / a['rps']:.3f}")
PY
	done
done

# where the agent's time goes: one run in the default mode (without d9-compress, so that its
# idle wake-ups do not blur the picture) with perf record -F 999 -g on the server process; the
# share of the host thread's samples (comm st-http) in each object, and the agent's top symbols
: >"$work/profile.txt"
if command -v perf >/dev/null; then
	echo "== server: profile of the agent inside st-http (perf record -F 999, default mode," \
		"D9_COMPRESS=0 D9_SYMBOLIZE=0)"
	d=$(mktemp -d "$work/profile-XXXX")
	env LD_PRELOAD="$agent" D9_TRACE_PATH="$d/trace/trace.bin" D9_COMPRESS=0 D9_SYMBOLIZE=0 \
		nice -n "$nice_adj" taskset -c "$server_cpu" "$server" -p 0 -P "$d/port" </dev/null \
		>/dev/null 2>"$d/stderr" &
	pid=$!
	live=$pid
	for _ in $(seq 200); do [ -s "$d/port" ] && break; sleep 0.025; done
	nice -n "$nice_adj" taskset -c "$wrk_cpu" wrk -t1 -c"$conns" -d"$((${dur%.*} + 2))s" \
		"http://127.0.0.1:$(cat "$d/port")/fast" >"$d/wrk.txt" 2>&1 &
	wrk_pid=$!
	sleep 0.5
	perf record -F 999 -g -q -p "$pid" -o "$d/perf.data" -- sleep "$dur" >/dev/null 2>&1 || true
	wait "$wrk_pid" || true
	kill -TERM "$pid"
	wait "$pid" || true
	live=""
	perf report -i "$d/perf.data" --comms st-http --no-children --sort dso -q -g none \
		2>/dev/null | grep '%' >"$work/profile.dso" || true
	perf report -i "$d/perf.data" --comms st-http --no-children --sort dso,sym -q -g none \
		2>/dev/null | grep '%' >"$work/profile.sym" || true
fi
python3 - "$work/profile.dso" "$work/profile.sym" >"$work/profile.json" <<'PY'
import json, re, sys
def rows(path):
    out = []
    try:
        for line in open(path):
            m = re.match(r"\s*([\d.]+)%\s+(\S+)(?:\s+\[.\]\s+(.+))?", line)
            if m:
                out.append((float(m.group(1)), m.group(2), (m.group(3) or "").strip()))
    except OSError:
        pass
    return out
dso = rows(sys.argv[1])
sym = [r for r in rows(sys.argv[2]) if r[1] == "libd9agent.so"]
print(json.dumps({
    "host_thread_pct_by_object": {d: p for p, d, _ in dso[:8]},
    "agent_pct_of_host_thread": sum(p for p, d, _ in dso if d == "libd9agent.so"),
    "agent_top_symbols_pct": {s: p for p, _, s in sym[:10]},
}))
PY
python3 - "$work/profile.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if d["host_thread_pct_by_object"]:
    top = ", ".join(f"{k} {v:.2f}%" for k, v in list(d["agent_top_symbols_pct"].items())[:6])
    print(f"  libd9agent.so: {d['agent_pct_of_host_thread']:.1f}% of the host thread's samples;"
          f" top: {top}")
PY

# aggregate: per mode the median of the per-pair ratios (mode run / the base run just before it)
python3 - "$runs" "$quick" "$dur" "$pairs" "$conns" "$server_cpu" "$wrk_cpu" "$nice_adj" "$work/profile.json" \
	>build/bench/server.json <<'PY'
import json, statistics as st, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
quick, dur, pairs, conns, scpu, wcpu, nice_adj, profile = sys.argv[2:]
def med(xs):  # the median of the values that were measured
    xs = [x for x in xs if x is not None]
    return st.median(xs) if xs else None

def q(xs, p):  # nearest-rank percentile
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, -(-p * len(xs) // 100) - 1))]

res = {}
bases = []
for i in range(1, len(runs)):
    a, b = runs[i - 1], runs[i]
    if a["mode"] != "base" or b["mode"] == "base":
        continue
    bases.append(a)
    r = res.setdefault(b["mode"], {"pairs": []})
    r["pairs"].append((a, b))
out_modes = {}
for mode, r in res.items():
    ps = r["pairs"]
    ratio = [b["rps"] / a["rps"] for a, b in ps]
    # CPU per request (whole process: host threads + agent threads; perf's own process added)
    def cpu_us(x):
        return (x["server_cpu_s"] + x["perf_cpu_s"]) / x["requests"] * 1e6
    def host_us(x):  # the host's own threads: what the inline hot path costs
        return (x["server_cpu_s"] - x["writer_cpu_s"] - x["compress_cpu_s"]) / x["requests"] * 1e6
    cpu_ratio = [cpu_us(b) / cpu_us(a) for a, b in ps]
    host_ratio = [host_us(b) / host_us(a) for a, b in ps]
    B = [b for _, b in ps]
    A = [a for a, _ in ps]
    ev = [b["events"] / b["requests"] for b in B if b["events"]]
    evs = [b["events"] for b in B if b["events"]]
    raw = [b["trace_raw_bytes"] for b in B]
    gz = [b["trace_gz_bytes"] for b in B]
    reqs = [b["requests"] for b in B]
    agent_cpu = [(b["writer_cpu_s"] + b["compress_cpu_s"] + b["perf_cpu_s"]) / b["seconds"]
                 for b in B]
    out_modes[mode] = {
        "pairs": len(ps),
        "throughput_ratio": {"median": med(ratio), "min": min(ratio), "max": max(ratio),
                             "all": ratio},
        "throughput_cost_pct": (1 - med(ratio)) * 100,
        "cpu_per_request_ratio": {"median": med(cpu_ratio), "min": min(cpu_ratio),
                                  "max": max(cpu_ratio)},
        "host_cpu_per_request_ratio": {"median": med(host_ratio), "min": min(host_ratio),
                                       "max": max(host_ratio)},
        "server_util": {"base_median": med([a["server_cpu_s"] / a["seconds"] for a in A]),
                        "median": med([b["server_cpu_s"] / b["seconds"] for b in B])},
        "rps": {"base_median": med([a["rps"] for a in A]), "median": med([b["rps"] for b in B])},
        "lat_p50_us": {"base_median": med([a["lat_p50_us"] for a in A]),
                       "median": med([b["lat_p50_us"] for b in B])},
        "lat_p99_us": {"base_median": med([a["lat_p99_us"] for a in A]),
                       "median": med([b["lat_p99_us"] for b in B])},
        "server_cpu_us_per_request": {"base_median": med([cpu_us(a) for a in A]),
                                      "median": med([cpu_us(b) for b in B])},
        "host_cpu_us_per_request": {"base_median": med([host_us(a) for a in A]),
                                    "median": med([host_us(b) for b in B])},
        "events_per_request": med(ev) if ev else None,
        "raw_bytes_per_event": med([r_ / e for r_, e in zip(raw, evs)]) if evs else None,
        "gz_bytes_per_event": med([g / e for g, e in zip(gz, evs)]) if evs else None,
        "raw_bytes_per_request": med([r_ / n for r_, n in zip(raw, reqs)]),
        "gz_bytes_per_request": med([g / n for g, n in zip(gz, reqs)]),
        "agent_cpu_pct_of_one_cpu": {
            "median": med(agent_cpu) * 100,
            "writer": med([b["writer_cpu_s"] / b["seconds"] for b in B]) * 100,
            "compress": med([b["compress_cpu_s"] / b["seconds"] for b in B]) * 100,
            "perf_process": med([b["perf_cpu_s"] / b["seconds"] for b in B]) * 100},
        "rss_kb": {"base_median": med([a["rss_kb"] for a in A]),
                   "median": med([b["rss_kb"] for b in B]),
                   "hwm_median": med([b["hwm_kb"] for b in B])},
        "drops": [b["drops"] for b in B if b["drops"]][:3],
        "stderr": sorted({l for b in B for l in b["stderr"]})[:10],
        "wrk_errors": sorted({b["wrk_errors"] for b in B + A if b["wrk_errors"]}),
    }
print(json.dumps({
    "bench": "server", "schema_version": 1, "quick": quick == "1",
    "server": "build/tests/st-http", "url": "/fast", "seconds_per_run": float(dur),
    "pairs_per_mode": int(pairs), "wrk": f"wrk -t1 -c{conns} --latency", "server_cpu": int(scpu),
    "wrk_cpu": int(wcpu), "nice": int(nice_adj),
    "modes": out_modes,
    "profile": json.load(open(profile)),
}, indent=2))
PY
echo "  results: build/bench/server.json, runs: $runs"
