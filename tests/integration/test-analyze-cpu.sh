#!/usr/bin/env bash
# test-analyze-cpu.sh: the CPU part of `d9-analyze summary` (sanitizer build) on the synthetic
# traces of build/tests/gen-analyze-cpu (tests/tools/gen-analyze-cpu.c: CpuSample events with
# known stacks of raw addresses inside known polls and loop turns). Checks the exact numbers of
# --json: cpu_samples, cpu_hotspots and offcpu_hotspots (self/total, recursion counted once,
# order), per-worker counts, each long poll's samples and hottest stacks (at most 3, ties
# broken on-CPU first), the coroutine-mismatch and unknown-source warnings, that every older key
# is still there; then --top/--min, the text sections, generic mode (loop turns) and a poll of
# 2 million samples followed by 100000 polls: exact counts, and memory that does not grow with
# the samples (the optimised build's peak RSS next to a 1000-sample trace's, generous bound).
set -u
cd "$(dirname "$0")/../.."

san=build/san/d9-analyze
opt=build/d9-analyze
gen=build/tests/gen-analyze-cpu
for b in "$san" "$opt" "$gen"; do
	if [ ! -x "$b" ]; then
		echo "FAIL analyze-cpu-setup: $b is not built (make all build/san/d9-analyze)"
		exit 0
	fi
done
# shellcheck source=lib.sh
. tests/integration/lib.sh
d9_san_env
tmp=$(mktemp -d "${TMPDIR:-/tmp}/d9-analyze-cpu-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/small" "$tmp/large"
if ! "$gen" "$tmp/small" 1000 2>"$tmp/gen.err" || ! "$gen" "$tmp/large" 2000000 2>>"$tmp/gen.err"; then
	echo "FAIL analyze-cpu-setup: $gen: $(head -c 300 "$tmp/gen.err")"
	exit 0
fi

# run NAME ARGS...: SAN ARGS > $tmp/NAME.out; prints a FAIL line (and returns 1) on a non-zero
# exit or anything on stderr
run() {
	local name=$1 rc=0
	shift
	"$san" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	if [ "$rc" != 0 ] || [ -s "$tmp/$name.err" ]; then
		echo "FAIL analyze-cpu-$name: exit $rc, stderr '$(head -c 400 "$tmp/$name.err")'"
		return 1
	fi
}
ok=1
run json summary --json "$tmp/small/polls" || ok=0
run top summary --json --top 2 --min 100us "$tmp/small/polls" || ok=0
run text summary "$tmp/small/polls" || ok=0
run generic summary --json "$tmp/small/generic" || ok=0
run big summary --json --top 2 "$tmp/large/big" || ok=0
[ "$ok" = 1 ] || exit 0

# peak RSS (KiB) of the optimised build on the 1000- and 2000000-sample traces
rss() {
	python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$opt" summary --json "$1"
}
rss_small=$(rss "$tmp/small/big") rss_large=$(rss "$tmp/large/big")

python3 - "$tmp" "$rss_small" "$rss_large" <<'PYEOF'
import json, sys
d, rss_small, rss_large = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(name):
    return json.load(open("%s/%s.out" % (d, name)))

def case(name, errs, info=""):
    if errs:
        print("FAIL analyze-cpu-%s: %s" % (name, "; ".join(str(e) for e in errs[:5])))
    else:
        print("PASS analyze-cpu-%s%s" % (name, ": " + info if info else ""))

def want(errs, what, got, exp):
    if got != exp:
        errs.append("%s: got %r, want %r" % (what, got, exp))

S1, S2, S3 = ["0xa1", "0xb0", "0xc0"], ["0xa2", "0xb0", "0xc0"], ["0xd0", "0xc0"]
S4, S5 = ["0xe0", "0xe0", "0xe0", "0xc0"], ["0xf0"]
def fn(name, self_, total):
    return {"function": name, "self_samples": self_, "total_samples": total}
def hot(n, src, stack):
    return {"samples": n, "source": src, "stack": stack}

s = load("json")
errs = []
old = ["mode", "start_ns", "end_ns", "duration_ns", "trace_start_ns", "events", "processes",
       "workers", "coroutines", "polls", "locations", "long_polls", "sched_delay",
       "timer_lateness", "blocking_calls", "run_queue", "zero_timeout_waits", "idle_workers",
       "cpu_hotspots", "drops", "data_quality", "warnings"]
errs += ["key %s is missing" % k for k in old if k not in s]
for p in s.get("long_polls", []):
    errs += ["long poll key %s is missing" % k for k in
             ["duration_ns", "location", "worker", "pid", "tid", "coroutine", "start_ns",
              "offset_ns", "stack"] if k not in p]
case("keys", errs, "every key of before is still there")

# totals: on 20 (S1 6, S2 4, S3 4, S4 5, no stack 1), off 8 (S5); the source-2 sample left out
errs = []
want(errs, "cpu_samples", s["cpu_samples"], {"on": 20, "off": 8})
# self desc, then total desc, then name; 0xe0 recurses 3 times in S4 but counts once per sample
want(errs, "cpu_hotspots", s["cpu_hotspots"], [
    fn("0xa1", 6, 6), fn("0xe0", 5, 5), fn("0xa2", 4, 4), fn("0xd0", 4, 4),
    fn("(no stack)", 1, 1), fn("0xc0", 0, 19), fn("0xb0", 0, 10)])
want(errs, "offcpu_hotspots", s["offcpu_hotspots"], [fn("0xf0", 8, 8)])
case("hotspots", errs, "%d on-CPU functions" % len(s["cpu_hotspots"]))

errs = []
want(errs, "workers (id, cpu_samples, offcpu_samples)",
     [(w["id"], w["cpu_samples"], w["offcpu_samples"]) for w in s["workers"]],
     [(1, 18, 6), (2, 2, 2)])
case("workers", errs)

errs = []
lp = [(p["duration_ns"], p["coroutine"], p["cpu_samples"], p["offcpu_samples"], p["hot_stacks"],
       p["stack"]) for p in s["long_polls"]]
want(errs, "long_polls", lp, [
    (300000, 11, 9, 3, [hot(5, "on", S1), hot(3, "off", S5), hot(2, "on", S2)], S1),
    (200000, 12, 7, 2, [hot(4, "on", S4), hot(3, "on", S3), hot(2, "off", S5)], S4),
    (50000, 21, 2, 2, [hot(2, "on", S2), hot(2, "off", S5)], S2),
    (10000, 13, 1, 0, [hot(1, "on", S1)], S1)])
case("long-polls", errs, "4 polls, top 3 of 5 distinct stacks in the longest, ties on-CPU first")

errs = []
w = s["warnings"]
if len(w) != 2 or not w[0].startswith("1 CPU sample(s) name a coroutine other than") or \
        not w[1].startswith("1 CPU sample(s) of an unknown source"):
    errs.append("warnings %r" % w)
case("warnings", errs)

t = load("top")
errs = []
want(errs, "--top 2 --min 100us", [(p["duration_ns"], p["cpu_samples"], p["offcpu_samples"],
     p["hot_stacks"]) for p in t["long_polls"]],
     [(300000, 9, 3, [hot(5, "on", S1), hot(3, "off", S5), hot(2, "on", S2)]),
      (200000, 7, 2, [hot(4, "on", S4), hot(3, "on", S3), hot(2, "off", S5)])])
want(errs, "cpu_samples", t["cpu_samples"], {"on": 20, "off": 8})
case("top", errs)

# generic mode: the long loop turns carry the samples taken between Unpark and Park (the
# off-CPU sample while parked is in no turn, but counts in the totals)
g = load("generic")
errs = []
want(errs, "mode", g["mode"], "generic")
want(errs, "cpu_samples", g["cpu_samples"], {"on": 3, "off": 2})
want(errs, "loop turns", [(p["duration_ns"], p["location"], p["cpu_samples"], p["offcpu_samples"],
     p["hot_stacks"]) for p in g["long_polls"]],
     [(200000, "(loop turn)", 2, 1, [hot(2, "on", S1), hot(1, "off", S5)]),
      (100000, "(loop turn)", 1, 0, [hot(1, "on", S3)])])
want(errs, "cpu_hotspots", g["cpu_hotspots"],
     [fn("0xa1", 2, 2), fn("0xd0", 1, 1), fn("0xc0", 0, 3), fn("0xb0", 0, 2)])
want(errs, "offcpu_hotspots", g["offcpu_hotspots"], [fn("0xf0", 2, 2)])
want(errs, "warnings", g["warnings"], [])
case("generic", errs)

# one poll of 2000000 samples over S1..S4 in turn, then 100000 polls of 5 us with one
# off-CPU S5 sample each
b = load("big")
errs = []
want(errs, "cpu_samples", b["cpu_samples"], {"on": 2000000, "off": 100000})
want(errs, "cpu_hotspots", b["cpu_hotspots"], [
    fn("0xa1", 500000, 500000), fn("0xa2", 500000, 500000), fn("0xd0", 500000, 500000),
    fn("0xe0", 500000, 500000), fn("0xc0", 0, 2000000), fn("0xb0", 0, 1000000)])
want(errs, "long_polls", [(p["location"], p["cpu_samples"], p["offcpu_samples"], p["hot_stacks"])
     for p in b["long_polls"]],
     [("big", 2000000, 0, [hot(500000, "on", S1), hot(500000, "on", S2), hot(500000, "on", S3)]),
      ("small", 0, 1, [hot(1, "off", S5)])])
case("big", errs, "2.1 million samples")

# memory follows stacks, not samples: 2 million more samples (16 MB at 8 bytes each) must not
# show in the peak RSS; 4 MiB of slack for allocator and reader noise
errs = []
if rss_large - rss_small > 4096:
    errs.append("peak RSS %d KiB with 2000000 samples, %d KiB with 1000" % (rss_large, rss_small))
case("memory", errs, "peak RSS %d KiB with 2000000 samples, %d KiB with 1000" % (rss_large,
     rss_small))
PYEOF

# the text sections
bad=()
grep -qx 'CPU hot spots: 20 on-CPU and 8 off-CPU samples (top 20 functions by self samples; self: innermost frame, total: anywhere on the stack)' "$tmp/text.out" ||
	bad+=("no hot-spot header")
grep -qE '^  on-CPU +self +self% +total +total% +function$' "$tmp/text.out" || bad+=("no on-CPU table head")
grep -qE '^ +6 +30\.0% +6 +30\.0%  0xa1$' "$tmp/text.out" || bad+=("no 0xa1 row")
grep -qE '^ +0 +0\.0% +19 +95\.0%  0xc0$' "$tmp/text.out" || bad+=("no 0xc0 row")
grep -qE '^  off-CPU +self' "$tmp/text.out" || bad+=("no off-CPU table")
grep -qE '^ +8 +100\.0% +8 +100\.0%  0xf0$' "$tmp/text.out" || bad+=("no 0xf0 row")
grep -A1 -E '^  300us +at \+100us ' "$tmp/text.out" | grep -qxE ' +cpu samples: 9 on, 3 off; hottest stack \(5 on-CPU\): 0xa1 < 0xb0 < 0xc0' ||
	bad+=("no hottest stack under the 300us poll")
grep -q 'warning: 1 CPU sample(s) name a coroutine other than' "$tmp/text.out" || bad+=("no mismatch warning")
if [ "${#bad[@]}" -gt 0 ]; then
	echo "FAIL analyze-cpu-text: ${bad[*]}"
	sed -n '/^longest/,/^scheduling/p' "$tmp/text.out" | sed 's/^/    /'
else
	echo "PASS analyze-cpu-text"
fi

# no samples: an empty table, said so
run nosamples summary "$tmp/small/generic" --to 50us || exit 0
if grep -A1 '^CPU hot spots: 0 on-CPU and 0 off-CPU samples' "$tmp/nosamples.out" | grep -qx '  none'; then
	echo "PASS analyze-cpu-none"
else
	echo "FAIL analyze-cpu-none: $(grep -A2 '^CPU hot' "$tmp/nosamples.out" | paste -sd'|')"
fi
