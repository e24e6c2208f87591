#!/usr/bin/env bash
# test-agent-modules.sh: the module map in the trace. Every segment defines the program's
# executable mappings with the right path, build id, address range and file offset, and a library
# loaded with dlopen after recording started is defined too (agent/modules.c).
set -u
cd "$(dirname "$0")/../.."
T=$(mktemp -d "${TMPDIR:-/tmp}/d9-agent-modules-XXXXXX")
trap 'rm -rf "$T"' EXIT
export D9_ROTATION_PERIOD=0 # no wall-clock seal in the middle of a test
drv=build/tests/d9-driver
lib=$(ls /usr/lib/x86_64-linux-gnu/libst.so* 2>/dev/null | head -n 1)

D9_TRACE_PATH="$T/t/trace.bin" D9_MAX_FILE_SIZE=1M "$drv" -t 2 -n 400000 --dlopen "$lib" \
	>"$T/out" 2>"$T/err"
rc=$?
build/d9-analyze dump "$T/t" >"$T/dump" 2>/dev/null
exe=$(readlink -f "$drv")
want_id=$(readelf -n "$exe" | sed -n 's/.*Build ID: *//p')
# the executable's r-x PT_LOAD: file offset and size
read -r off memsz < <(readelf -lW "$exe" | awk '$1 == "LOAD" && / R E / { print $2, $6; exit }')
python3 - "$T/dump" "$exe" "$want_id" "$off" "$memsz" "$lib" "$rc" <<'PY'
import json, sys
dump, exe, want_id, off, memsz, lib, rc = sys.argv[1:]
segs = []  # per file: strings, modules
for line in open(dump):
    r = json.loads(line)
    if r["rec"] == "file":
        segs.append({"strings": {}, "modules": [], "name": r["name"]})
    elif r["rec"] == "def" and r["kind"] == "String":
        segs[-1]["strings"][r["id"]] = r["value"]
    elif r["rec"] == "def" and r["kind"] == "Module":
        segs[-1]["modules"].append(r)
def report(name, ok, why):
    print("PASS %s" % name if ok else "FAIL %s: %s" % (name, why))
if rc != "0" or len(segs) < 2:
    report("modules-run", False, "driver exit %s, %d segments" % (rc, len(segs)))
    sys.exit(0)
report("modules-run", True, "")
bad = []
for s in segs:
    mods = [(s["strings"].get(m["path"]), m) for m in s["modules"]]
    mine = [m for p, m in mods if p == exe]
    if len(mine) != 1:
        bad.append("%s: %d definitions of %s" % (s["name"], len(mine), exe)); continue
    m = mine[0]
    if m["build_id"] != want_id: bad.append("%s: build id %s, readelf says %s" % (s["name"], m["build_id"], want_id))
    if m["offset"] != int(off, 16): bad.append("%s: offset %d, readelf says %s" % (s["name"], m["offset"], off))
    if m["end"] - m["start"] != int(memsz, 16): bad.append("%s: size %d, readelf says %s" % (s["name"], m["end"] - m["start"], memsz))
    if not any(p and "libc.so" in p for p, _ in mods): bad.append("%s: no libc module" % s["name"])
report("modules-every-segment-defines-the-executable", not bad, "; ".join(bad[:3]))
last = segs[-1]
has_lib = any(last["strings"].get(m["path"], "").startswith(lib.rsplit(".so", 1)[0]) or
              last["strings"].get(m["path"]) == lib for m in last["modules"])
report("modules-dlopen-defined", has_lib, "the last segment defines no module for %s" % lib)
PY
