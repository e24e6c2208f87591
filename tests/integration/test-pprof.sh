#!/usr/bin/env bash
# test-pprof.sh: `d9-analyze pprof` (sanitizer build) read back by an independent reader, Debian's
# `go tool pprof` (golang-go; offline). st-http under the agent at 999 Hz with
# D9_SCHED_EVENTS=1 answers /burn?ms=300 and /sleep?ms=200, then:
#   - pprof-top: go tool pprof -top's heaviest function is summary --json's first CPU hot spot
#     (burn_cpu), with the same self time (within 0.5%);
#   - pprof-total: the profile's total CPU time equals `flame`'s (us, rounded per stack line);
#   - pprof-off: --both has cpu and off_cpu sample types; off_cpu's total equals `flame --cpu off`;
#   - pprof-labels: the coroutine, poll (serve_conn's location), worker and pid labels are there;
#     with --no-labels only pid, and the same total and top function;
#   - pprof-mapping: the first mapping is st-http's (pprof's main binary), with the build id
#     readelf reads in the binary;
#   - pprof-errors: an unwritable -o fails with a message and exit status 3; no TRACE is a usage
#     error;
#   - pprof-corpus: the fuzz corpus through the sanitizer build: no report, and every profile
#     written is one go tool pprof reads.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup pprof
pl_san_setup pprof || exit 0
if ! command -v go >/dev/null || ! go tool pprof -h >/dev/null 2>&1; then
	pl_skip pprof "go tool pprof is not installed (golang-go; make deps)"
	exit 0
fi
if ! command -v readelf >/dev/null; then
	pl_skip pprof "readelf is not installed (binutils)"
	exit 0
fi
# go tool pprof keeps nothing in $HOME with -top/-raw, but give it a private one anyway
export HOME=$T PPROF_TMPDIR=$T GOFLAGS=-mod=mod

p=pprof-run
pl_run $p "$ST_HTTP" D9_CPU_PROFILE=999 D9_SCHED_EVENTS=1 -- \
	"/burn?ms=300" "burn ms=300 cpu_ns=*" "/sleep?ms=200" "sleep ms=200*" /fast ok || exit 0
TR=$SDIR/trace

if ! "$SAN" pprof --both -o "$T/both.pb.gz" "$TR" 2>"$T/both.err" ||
	! "$SAN" pprof -o "$T/cpu.pb.gz" "$TR" 2>"$T/cpu.err" ||
	! "$SAN" pprof --off "$TR" >"$T/off.pb.gz" 2>"$T/off.err" ||
	! "$SAN" pprof --no-labels -o "$T/nolabels.pb.gz" "$TR" 2>"$T/nolabels.err"; then
	pl_fail pprof-write "d9-analyze pprof failed: $(cat "$T"/*.err | head -c 400)"
	exit 0
fi
if [ -s "$T/both.err" ] || [ -s "$T/cpu.err" ] || [ -s "$T/off.err" ] || [ -s "$T/nolabels.err" ]; then
	pl_fail pprof-write "stderr: $(cat "$T"/*.err | head -c 400)"
else
	pl_pass pprof-write "$(stat -c %s "$T/cpu.pb.gz") bytes gzip"
fi
"$SAN" summary --json "$TR" >"$T/summary.json" 2>/dev/null
"$SAN" flame "$TR" >"$T/flame-on" 2>/dev/null
"$SAN" flame --cpu off "$TR" >"$T/flame-off" 2>/dev/null
for f in cpu both off nolabels; do
	go tool pprof -top -unit=ns -nodecount=1000 "$T/$f.pb.gz" >"$T/$f.top" 2>"$T/$f.toperr" ||
		pl_fail pprof-read "go tool pprof -top $f: $(head -c 300 "$T/$f.toperr")"
done
go tool pprof -top -unit=ns -sample_index=off_cpu -nodecount=1000 "$T/both.pb.gz" \
	>"$T/both-off.top" 2>&1
go tool pprof -tags "$T/cpu.pb.gz" >"$T/tags" 2>&1
go tool pprof -tags "$T/nolabels.pb.gz" >"$T/tags-nolabels" 2>&1
go tool pprof -raw "$T/cpu.pb.gz" >"$T/raw" 2>&1
BUILD_ID=$(readelf -n "$ST_HTTP" | sed -n 's/.*Build ID: *//p' | head -n1)

python3 - "$T" "$ST_HTTP" "$BUILD_ID" <<'PYEOF'
import json, re, sys
d, binary, build_id = sys.argv[1], sys.argv[2], sys.argv[3]

def case(name, errs, info=""):
    if errs:
        print("FAIL %s: %s" % (name, "; ".join(str(e) for e in errs[:5])))
    else:
        print("PASS %s%s" % (name, ": " + info if info else ""))

def top(path):
    """go tool pprof -top -unit=ns: (total ns, [(flat ns, cum ns, function)])"""
    total, rows = None, []
    for line in open(path):
        m = re.search(r"Total samples = (\d+)ns", line) or re.search(r"of (\d+)ns total", line)
        if m and total is None:
            total = int(m.group(1))
        m = re.match(r"\s*(\d+)ns\s+[\d.]+%\s+[\d.]+%\s+(\d+)ns\s+[\d.]+%\s+(.*)$", line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), m.group(3).strip()))
    return total, rows

def flame_total(path):
    return sum(int(l.rsplit(" ", 1)[1]) for l in open(path) if l.strip())

s = json.load(open(d + "/summary.json"))
hot = s["cpu_hotspots"]
total, rows = top(d + "/cpu.top")
errs = []
if not hot or not rows:
    errs.append("no hot spot (summary %d, pprof %d rows)" % (len(hot), len(rows)))
else:
    # summary names a function "f (file.c)": pprof's function is f, its file apart
    want = hot[0]["function"].split(" (")[0]
    if rows[0][2] != want:
        errs.append("pprof's top function %r, summary's %r" % (rows[0][2], hot[0]["function"]))
    elif abs(rows[0][0] - hot[0]["self_ns"]) > 0.005 * hot[0]["self_ns"]:
        errs.append("%s: pprof flat %d ns, summary self %d ns" % (want, rows[0][0], hot[0]["self_ns"]))
    if want != "burn_cpu":
        errs.append("the top function is %r, want burn_cpu (the /burn handler)" % want)
case("pprof-top", errs, "%s %.1f ms in both" % (rows[0][2], rows[0][0] / 1e6) if rows else "")

errs = []
ft = flame_total(d + "/flame-on") * 1000
# flame rounds each stack line to whole us: within 1 us per line
nlines = sum(1 for l in open(d + "/flame-on") if l.strip())
if total is None or abs(total - ft) > 1000 * nlines:
    errs.append("pprof total %s ns, flame total %d ns (%d lines)" % (total, ft, nlines))
case("pprof-total", errs, "%.1f ms of on-CPU time" % (ft / 1e6))

errs = []
btotal, _ = top(d + "/both.top")
ototal, orows = top(d + "/both-off.top")
o2total, _ = top(d + "/off.top")
fo = flame_total(d + "/flame-off") * 1000
nlo = sum(1 for l in open(d + "/flame-off") if l.strip())
if btotal != total:
    errs.append("--both cpu total %s, --cpu %s" % (btotal, total))
if ototal is None or fo == 0 or abs(ototal - fo) > 1000 * nlo:
    errs.append("--both off_cpu total %s ns, flame --cpu off %d ns" % (ototal, fo))
if o2total != ototal:
    errs.append("--off total %s, --both off_cpu %s" % (o2total, ototal))
case("pprof-off", errs, "%.1f ms off-CPU" % (fo / 1e6))

errs = []
tags = open(d + "/tags").read()
for k in ("coroutine:", "poll:", "worker:", "pid:"):
    if k not in tags:
        errs.append("no %s label" % k)
if not re.search(r"serve_conn \(st-http\.c:\d+\)", tags):
    errs.append("no poll label naming serve_conn's location: %r" % tags[:300])
ntags = open(d + "/tags-nolabels").read()
ntotal, nrows = top(d + "/nolabels.top")
if "pid:" not in ntags or any(k in ntags for k in ("coroutine:", "poll:", "worker:")):
    errs.append("--no-labels: %r" % ntags[:300])
if ntotal != total or nrows[:1] != rows[:1]:
    errs.append("--no-labels: total %s top %r, with labels %s %r" % (ntotal, nrows[:1], total, rows[:1]))
case("pprof-labels", errs, "and --no-labels: only pid, same total and top")

errs = []
raw = open(d + "/raw").read()
all_maps = [l for l in raw.split("Mappings", 1)[-1].splitlines() if l.strip()]
maps = [l for l in all_maps if binary in l]
if not maps:
    errs.append("no mapping of %s: %r" % (binary, raw[-500:]))
elif binary not in all_maps[0]:
    errs.append("mapping 1 is %r, want the main binary %s" % (all_maps[0], binary))
elif build_id not in maps[0]:
    errs.append("mapping %r lacks build id %s" % (maps[0], build_id))
elif "[FN]" not in maps[0]:
    errs.append("mapping %r does not say it has functions" % maps[0])
case("pprof-mapping", errs, build_id)
PYEOF

# errors: an unwritable output, and no TRACE
rc=0
"$SAN" pprof -o "$T/no/such/dir/p.pb.gz" "$TR" >/dev/null 2>"$T/err1" || rc=$?
rc2=0
"$SAN" pprof -o "$T/x.pb.gz" >/dev/null 2>"$T/err2" || rc2=$?
if [ "$rc" != 3 ] || ! grep -q "cannot open" "$T/err1"; then
	pl_fail pprof-errors "unwritable -o: exit $rc, stderr '$(head -c 200 "$T/err1")'"
elif [ "$rc2" != 2 ]; then
	pl_fail pprof-errors "no TRACE: exit $rc2, want 2"
else
	pl_pass pprof-errors
fi

# ---- the fuzz corpus: hostile input -------------------------------------------------------------
# every file through the sanitizer build: no report, exit 0, 3 or 4; every profile written is read
# by go tool pprof (all at once: it merges them; one by one when that fails, to name the bad one)
pl_corpus_unpack
bad=() files=0 profiles=()
for f in "$PL_ROOT"/tests/fuzz/corpus/* "$T"/corpus/*; do
	[ -f "$f" ] || continue
	files=$((files + 1))
	out=$T/corpus-$files.pb.gz rc=0
	d9_corpus_leaks "$files"
	ASAN_OPTIONS=$D9_CORPUS_ASAN timeout 60 "$SAN" pprof --both -o "$out" "$f" >/dev/null 2>"$T/c.err" || rc=$?
	if grep -qE 'ERROR: |runtime error|Sanitizer' "$T/c.err"; then
		bad+=("$(basename "$f"): $(grep -m1 -E 'ERROR: |runtime error|Sanitizer' "$T/c.err")")
	elif [ "$rc" != 0 ] && [ "$rc" != 3 ] && [ "$rc" != 4 ]; then
		bad+=("$(basename "$f"): exit $rc")
	elif [ -s "$out" ]; then
		profiles+=("$out")
	fi
done
if [ "${#bad[@]}" = 0 ] && [ "${#profiles[@]}" -gt 0 ] &&
	! go tool pprof -raw "${profiles[@]}" >/dev/null 2>"$T/merge.err"; then
	for p in "${profiles[@]}"; do
		go tool pprof -raw "$p" >/dev/null 2>"$T/one.err" ||
			bad+=("$(basename "$p"): go tool pprof: $(head -c 200 "$T/one.err")")
	done
fi
if [ "${#bad[@]}" -gt 0 ]; then
	pl_fail pprof-corpus "${#bad[@]} of $files files: ${bad[*]:0:5}"
elif [ "$files" -lt 40 ]; then
	pl_fail pprof-corpus "only $files files (the corpus is missing?)"
else
	pl_pass pprof-corpus "$files files, no sanitizer report, ${#profiles[@]} profiles read by go tool pprof"
fi
