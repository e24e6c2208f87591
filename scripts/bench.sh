#!/usr/bin/env bash
# bench.sh: runs d9's benchmarks and leaves machine-readable results in build/bench/*.json, a
# table on stdout and BENCHMARKS.md at the repository root. In order: format encode/decode
# (bench-format), analyzer summary throughput, the hot path (bench-micro.sh), the agent's cost
# on a real server under wrk (bench-server.sh), its deterministic cost in instructions and
# syscalls per request under callgrind and strace (bench-cost.sh), what it adds to redis's and
# nginx's exit (bench-exit.sh), CPU per request of Debian's redis, memcached and nginx
# (bench-real.sh), then the report (bench-report.sh).
# Builds nothing: `make bench` builds everything first. QUICK=1 runs shorter repetitions
# (a smoke run, about 14 minutes: 845 s on a 2-core VM at 8f49f63, the deterministic section
# about 4 of them; its timings are noisier). Timing claims live here, never in tests.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
[ "${QUICK:-0}" = "1" ] && quick=(--quick)
mkdir -p build/bench
t_start=$(date +%s)
load_before=$(cut -d' ' -f1 /proc/loadavg)

bin=build/tests/bench-format
if [ ! -x "$bin" ]; then
	echo "bench: $bin is missing; run 'make bench' (it builds everything first)" >&2
	exit 1
fi
echo "== format: encoder and decoder throughput"
"$bin" "${quick[@]}" --json build/bench/format.json

# the analyzer: decode + summary of the synthetic trace of gen-analyze-load (README, "Analyzer"),
# best wall time of REPS runs (3; QUICK=1: 1 run on a trace a tenth the size), peak RSS from
# /usr/bin/time -v
echo "== analyze: summary throughput and peak memory"
gen=build/tests/gen-analyze-load
ana=build/d9-analyze
for b in "$gen" "$ana" /usr/bin/time; do
	if [ ! -x "$b" ]; then
		echo "bench: $b is missing; run 'make bench' (and install GNU time)" >&2
		exit 1
	fi
done
requests=5000000 reps=3
[ "${QUICK:-0}" = "1" ] && requests=500000 reps=1
adir=$(mktemp -d "${TMPDIR:-/tmp}/d9-bench-analyze-XXXXXX")
trap 'rm -rf "$adir"' EXIT
mkdir -p "$adir/trace"
"$gen" "$adir/trace" "$requests" >/dev/null
abytes=$(cat "$adir"/trace/*.bin | wc -c)
best_s="" rss_kb=0 events=0
for _ in $(seq "$reps"); do
	t0=$(date +%s%N) # wall time to the ns: time -v gives only hundredths
	/usr/bin/time -v -o "$adir/time" "$ana" summary --json "$adir/trace" >"$adir/summary.json"
	t1=$(date +%s%N)
	s=$(awk "BEGIN { printf \"%.4f\", ($t1 - $t0) / 1e9 }")
	kb=$(sed -n 's/^\tMaximum resident set size (kbytes): //p' "$adir/time")
	if [ -z "$best_s" ] || awk "BEGIN { exit !($s < $best_s) }"; then best_s=$s; fi
	if [ "$kb" -gt "$rss_kb" ]; then rss_kb=$kb; fi
done
events=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["events"])' "$adir/summary.json")
eps=$(awk "BEGIN { printf \"%d\", $events / ($best_s > 0 ? $best_s : 0.001) }")
printf '  summary: %d events, %d bytes in %.2f s (best of %d): %.1fM events/s, peak RSS %d KiB\n' \
	"$events" "$abytes" "$best_s" "$reps" "$(awk "BEGIN { print $eps / 1e6 }")" "$rss_kb"
cat >build/bench/analyze.json <<JSON
{
  "bench": "analyze",
  "schema_version": 1,
  "quick": $([ "${QUICK:-0}" = "1" ] && echo true || echo false),
  "reps": $reps,
  "requests": $requests,
  "events": $events,
  "trace_bytes": $abytes,
  "results": {
    "summary": {"events_per_s": $eps, "best_s": $best_s, "peak_rss_kb": $rss_kb}
  }
}
JSON

bash scripts/bench-micro.sh
bash scripts/bench-server.sh
# deterministic cost: counted, not timed, so it is the figure to compare across commits
echo "== deterministic cost (callgrind and strace, per request)"
bash scripts/bench-cost.sh

bash scripts/bench-exit.sh
echo "== CPU per request on Debian's servers (redis, memcached, nginx)"
bash scripts/bench-real.sh

# the machine, for BENCHMARKS.md
python3 - "$load_before" "$(cut -d' ' -f1 /proc/loadavg)" "$(( $(date +%s) - t_start ))" \
	>build/bench/machine.json <<'PY'
import json, os, platform, subprocess, sys, time
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
lscpu = dict(l.split(":", 1) for l in sh("lscpu").splitlines() if ":" in l)
lscpu = {k.strip(): v.strip() for k, v in lscpu.items()}
mem_kb = int(open("/proc/meminfo").readline().split()[1])
osr = dict(l.rstrip().split("=", 1) for l in open("/etc/os-release") if "=" in l)
virt = lscpu.get("Hypervisor vendor")
print(json.dumps({
    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "cpu": lscpu.get("Model name", "?"), "cpus": os.cpu_count(),
    "mem": f"{mem_kb / 1048576:.0f} GiB RAM", "kernel": platform.release(),
    "os": osr.get("PRETTY_NAME", "?").strip('"'),
    "virt": f"VM ({virt})" if virt else "no hypervisor reported",
    "load_before": sys.argv[1], "load_after": sys.argv[2], "seconds": int(sys.argv[3]),
}, indent=2))
PY
echo "== results"
bash scripts/bench-report.sh
