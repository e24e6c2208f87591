#!/usr/bin/env bash
# test-agent-symbols.sh: symbol records written into sealed segments (agent/symbolize.c) and used
# by the analyzer (analyze/symbols.c). The ST test server, copied to a directory of its own, serves
# /block?ms=30 (a usleep the agent records as a BlockingCall whose innermost frame is in
# handle_block) and exits by /quit; then the copy of the binary is deleted, as when a trace is
# read on another machine.
#   - D9_COMPRESS=1 (gzip): every sealed .bin.gz holds Symbol records, in a DEFS chunk before its first
#     EVENTS chunk; the usleep stack's innermost frame (looked up at frame - 1) is named
#     handle_block, file st-http.c, a line inside handle_block's body in the source; String ids
#     are defined once per file; the trailer's chunk count equals the chunks the reader counts;
#     no damage, no temporary file left. With the binary gone, `d9-analyze summary` and `jsonl`
#     still name handle_block (the names can only come from the records).
#     (Segments rotate every second and the server waits for the compressor before /quit: at
#     exit it gets 2 s at most, so the last segment, sealed then, may stay .bin.)
#   - D9_COMPRESS=0: the same records in the .bin files.
#   - D9_ROTATION_PERIOD=1s and 25 x /block?ms=100: several sealed segments, each with its own
#     records naming every usleep stack; libdebuginfod/libcurl never get loaded into the host
#     (they would show up in the later segments' module maps).
#   - D9_SYMBOLIZE=0: no Symbol record; with the binary gone the frame reads st-http+0x<offset>
#     (the offset of that address in the file, computed with nm) and never handle_block.
#   - crash recovery: a segment left .active by SIGKILL is recovered by the next process of the
#     same trace path, which also writes its Symbol records (from the dead process's Module
#     definitions and the files on disk), before gzip.
#   - a live .active segment: no Symbol records, reads clean up to its end, and (binary still
#     there) the analyzer names handle_block from the file with libdw.
#   - crafted segments (no module map, so only records can name anything): records at the END
#     of a segment (after the events) still name its stacks in `summary --json`, with the
#     inline chain innermost first and "(file:line)"; a wider range [start, start+len) names an
#     address inside it; a Symbol whose function String is undefined names nothing (0x<addr>);
#     a later segment of the same process naming the same range otherwise is ignored (the first
#     stands); another process's addresses are never named by these records; 3000 ranges
#     arriving in random order, with lookups in between, each name their own addresses.
#   - symbols-twin-modules: one library under two paths at the same place, recovered and
#     symbolized by the next process: the host serves on.
#   - symbols-pc0: a dead process's segment (tests/tools/gen-pc0.c) whose CPU sample is at the
#     first byte of a function F of a copy of st-http, adopted and symbolized by the next
#     process; with the copy removed (only the Symbol records can name it) the sample's leaf is
#     F: frame 0 of a sample is the sampled instruction, named as it is (the records named only
#     address - 1, the code before F).
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup agent-symbols

SRC=$PL_ROOT/tests/servers/st-http.c
# handle_block's body in the source: its definition line to the next line that is "}"
LO=$(grep -n '^void handle_block(.*)$' "$SRC" | head -n1 | cut -d: -f1)
HI=$(awk -v lo="$LO" 'NR > lo && /^}/ { print NR; exit }' "$SRC")
if [ -z "$LO" ] || [ -z "$HI" ]; then
	pl_fail agent-symbols "cannot find handle_block's definition in $SRC"
	exit 0
fi

# check NAME WANT FILE...: dumps the segment files and checks their Symbol records. WANT is
# "named" (records naming handle_block, as above) or "none" (no Symbol record at all).
check() {
	local name=$1 want=$2
	shift 2
	timeout -s KILL 60 python3 - "$name" "$want" "$LO" "$HI" "$PL_ANALYZE" "$@" <<'PYEOF'
import json, os, subprocess, sys
name, want, lo, hi, analyze, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6:]

def fail(why):
    print("FAIL %s: %s" % (name, why))
    sys.exit(0)

if not files:
    fail("no segment file")
named = nus = 0
nsym = 0
for path in files:
    base = os.path.basename(path)
    p = subprocess.run([analyze, "dump", path], capture_output=True, text=True)
    if p.returncode != 0:
        fail("%s: d9-analyze dump exit %d: %s" % (base, p.returncode, p.stderr.strip()[:200]))
    strings, stacks, syms, bcs = {}, {}, [], []
    first_event, trailer, end = None, None, None
    for line in p.stdout.splitlines():
        r = json.loads(line)
        if r["rec"] == "problem":
            fail("%s: problem %s" % (base, r))
        if r["rec"] == "def" and r["kind"] == "String":
            if r["id"] in strings:
                fail("%s: String id %d defined twice (%r, %r)" % (base, r["id"], strings[r["id"]], r["value"]))
            strings[r["id"]] = r["value"]
        elif r["rec"] == "def" and r["kind"] == "Stack":
            stacks[r["id"]] = r["frames"]
        elif r["rec"] == "def" and r["kind"] == "Symbol":
            syms.append(r)
        elif r["rec"] == "event":
            if first_event is None:
                first_event = r["offset"]
            if r["type"] == "BlockingCall":
                bcs.append(r)
        elif r["rec"] == "trailer":
            trailer = r
        elif r["rec"] == "end":
            end = r
    nsym += len(syms)
    if want == "none":
        if syms:
            fail("%s: %d Symbol records, want none: %s" % (base, len(syms), syms[0]))
        continue
    if not end or not end["sealed"] or not trailer:
        fail("%s: not sealed: %s" % (base, end))
    if trailer["chunks"] != end["chunks"]:
        fail("%s: trailer counts %d chunks, the reader %d" % (base, trailer["chunks"], end["chunks"]))
    if not syms:
        if stacks:
            fail("%s: no Symbol records, %d stacks" % (base, len(stacks)))
        continue
    if first_event is not None and max(s["chunk"] for s in syms) > first_event:
        fail("%s: Symbol records after the first event (offset %d)" % (base, first_event))
    for s in syms:
        if s["function"] not in strings or (s["file"] and s["file"] not in strings):
            fail("%s: Symbol names undefined strings: %s" % (base, s))
    for e in bcs:
        if strings.get(e["call"]) != "usleep":
            continue
        nus += 1
        frames = stacks.get(e["stack"])
        if not frames:
            fail("%s: usleep BlockingCall without a stack" % base)
        at = [s for s in syms if s["start"] <= frames[0] - 1 < s["start"] + s["len"]]
        real = [s for s in at if s["inline_depth"] == 0]
        if len(real) != 1:
            fail("%s: %d depth-0 Symbol records for frame 0 %#x - 1: %s" % (base, len(real), frames[0], at))
        s = real[0]
        fn, fl = strings[s["function"]], strings.get(s["file"], "")
        if fn != "handle_block" or os.path.basename(fl) != "st-http.c" or not lo <= s["line"] <= hi:
            fail("%s: frame 0 named %s (%s:%d), want handle_block (st-http.c:%d..%d)" % (base, fn, fl, s["line"], lo, hi))
        named += 1
if want == "named" and (named != nus or not nus):
    fail("%d of %d usleep BlockingCalls named handle_block in %d files" % (named, nus, len(files)))
print("PASS %s: %s" % (name, "%d Symbol records in %d files; %d usleep stacks in handle_block, lines %d..%d" % (nsym, len(files), nus, lo, hi) if want == "named" else "no Symbol record in %d files" % len(files)))
PYEOF
}

# usleep_in FILE: the segment holds the usleep BlockingCall of /block
usleep_in() { "$PL_ANALYZE" jsonl "$1" 2>/dev/null | grep -q '"call":"usleep"'; }

# bc_done DIR gz|plain: the segment holding the BlockingCall is sealed and done by the compressor:
# gzipped (symbols come first), or with D9_COMPRESS=0 named in place
bc_done() {
	local f
	if [ "$2" = gz ]; then
		for f in "$1"/*.bin.gz; do [ -e "$f" ] && usleep_in "$f" && return 0; done
	else
		for f in "$1"/*.bin; do [ -e "$f" ] && usleep_in "$f" && d9_symbolized "$f" && return 0; done
	fi
	return 1
}

# serve DIR BIN gz|plain [VAR=value...]: one run of BIN: /block?ms=30, then the control session.
# Segments rotate every second and the server stays up until the BlockingCall's segment is done
# by the compressor (bc_done): at exit the compressor gets 2 s at most, which a loaded machine
# does not give it (at nice 19). So only the last segment, sealed at exit with the control
# session's requests, may stay undone (.bin, perhaps with the temporary file of a cut
# compression, which the next process would remove).
serve() {
	local dir=$1 bin=$2 kind=$3
	shift 3
	if ! pl_start "$dir" "$bin" D9_ROTATION_PERIOD=1s "$@" --; then
		pl_fail "$(basename "$dir")" "$PL_ERR"
		return 1
	fi
	if ! pl_gets 1 "/block?ms=30" "block ms=30"; then
		pl_fail "$(basename "$dir")-replies" "$PL_ERR"
		return 1
	fi
	if ! d9_wait_for 120 bc_done "$dir/trace" "$kind" || ! d9_wait_settled "$dir/trace"; then
		pl_fail "$(basename "$dir")-compressor" "the BlockingCall's segment was not done within $((120 * D9_SLOW)) s: $(ls "$dir/trace" | tr '\n' ' ')"
	fi
	if ! pl_session_quit || [ "$SRC" != 0 ]; then
		pl_fail "$(basename "$dir")-exit" "${PL_ERR:-exit status $SRC}"
		return 1
	fi
}

# copy_bin NAME: a private copy of st-http in $T/NAME/bin, deleted by the caller after the run.
copy_bin() {
	mkdir -p "$T/$1/bin"
	cp "$ST_HTTP" "$T/$1/bin/st-http"
	echo "$T/$1/bin/st-http"
}

# no_tmp NAME DIR: no temporary file is left in the trace directory but the one a compression of
# the last segment cut short at exit may leave.
no_tmp() {
	local left last
	last=$(ls "$2" | grep -E '\.(bin|bin\.gz)$' | tail -n 1)
	# <stem>.lock is the directory budget's lock file (agent/budget.c), not a leftover
	left=$(ls "$2" | grep -v -E '\.(bin|bin\.gz|lock)$' | grep -v -F "${last%.gz}.gz.tmp-")
	if [ -n "$left" ]; then pl_fail "$1" "files left: $left"; else pl_pass "$1"; fi
}

# but_last DIR SUFFIX: the segment files of DIR but the last (sealed at exit), one per line
but_last() { ls "$1" | grep -E '\.(bin|bin\.gz)$' | sed '$d'; }

files_of() { ls -d "$1"/*"$2" 2>/dev/null; }

# ---- default: gzip -----------------------------------------------------------------------------
bin=$(copy_bin gz)
if serve "$T/gz" "$bin" gz D9_COMPRESS=1; then
	rm -f "$bin"
	D=$T/gz/trace
	if but_last "$D" | grep -q '\.bin$' || [ -z "$(files_of "$D" .bin.gz)" ]; then
		pl_fail symbols-gz-files "want .bin.gz only (but the last segment, sealed at exit): $(ls "$D")"
	else
		check symbols-gz-records named $(files_of "$D" .bin.gz)
	fi
	no_tmp symbols-gz-no-tmp "$D"
	out=$("$PL_ANALYZE" summary "$D" 2>&1)
	line=$(echo "$out" | grep -E '^ +usleep ')
	if echo "$line" | grep -q "stack handle_block (st-http.c:"; then
		pl_pass symbols-gz-summary "$(echo "$line" | sed 's/^ *//')"
	else
		pl_fail symbols-gz-summary "usleep line: '$line'"
	fi
	line=$("$PL_ANALYZE" jsonl "$D" 2>&1 | grep '"call":"usleep"')
	if echo "$line" | grep -q '"stack":\["handle_block (st-http.c:'; then
		pl_pass symbols-gz-jsonl
	else
		pl_fail symbols-gz-jsonl "usleep event: '$line'"
	fi
fi

# ---- D9_COMPRESS=0 -------------------------------------------------------------------------------
bin=$(copy_bin plain)
if serve "$T/plain" "$bin" plain D9_COMPRESS=0; then
	rm -f "$bin"
	D=$T/plain/trace
	if [ -n "$(files_of "$D" .bin.gz)" ] || [ -z "$(files_of "$D" .bin)" ]; then
		pl_fail symbols-plain-files "want .bin only: $(ls "$D")"
	else
		# but the last, sealed at exit: an exit waits for no symbolization, and with
		# D9_COMPRESS=0 no later process takes it over (d9-analyze names its addresses)
		check symbols-plain-records named $(files_of "$D" .bin | sed '$d')
	fi
	no_tmp symbols-plain-no-tmp "$D"
	if "$PL_ANALYZE" jsonl "$D" 2>&1 | grep '"call":"usleep"' |
		grep -q '"stack":\["handle_block (st-http.c:'; then
		pl_pass symbols-plain-jsonl
	else
		pl_fail symbols-plain-jsonl "usleep stack not named handle_block"
	fi
fi

# ---- D9_SYMBOLIZE=0 ----------------------------------------------------------------------------
bin=$(copy_bin off)
if serve "$T/off" "$bin" gz D9_COMPRESS=1 D9_SYMBOLIZE=0; then
	D=$T/off/trace
	check symbols-off-records none $(files_of "$D" .bin.gz)
	# the file offset of handle_block, from the binary (PIE: symbol value = file offset here)
	hb=$(nm "$bin" | awk '$3 == "handle_block" { print $1 }')
	rm -f "$bin"
	line=$("$PL_ANALYZE" jsonl "$D" 2>&1 | grep '"call":"usleep"')
	off=$(echo "$line" | sed -n 's/.*"stack":\["st-http+0x\([0-9a-f]*\)".*/\1/p')
	if [ -z "$off" ] || [ -z "$hb" ]; then
		pl_fail symbols-off-offline "usleep event: '$line' (handle_block at 0x$hb)"
	elif echo "$line" | grep -q handle_block; then
		pl_fail symbols-off-offline "names handle_block without records or binary: $line"
	elif [ $((0x$off)) -le $((0x$hb)) ] || [ $((0x$off)) -gt $((0x$hb + 256)) ]; then
		pl_fail symbols-off-offline "frame 0 is st-http+0x$off, not inside handle_block (0x$hb)"
	else
		pl_pass symbols-off-offline "frame 0 st-http+0x$off (handle_block at 0x$hb)"
	fi
	if "$PL_ANALYZE" summary "$D" 2>&1 | grep -E '^ +usleep ' | grep -q 'stack st-http+0x'; then
		pl_pass symbols-off-summary
	else
		pl_fail symbols-off-summary "$("$PL_ANALYZE" summary "$D" 2>&1 | grep -E '^ +usleep ')"
	fi
fi

# ---- rotation: several sealed segments, each symbolized on its own ----------------------------------
if pl_start "$T/rot" "$ST_HTTP" D9_ROTATION_PERIOD=1s D9_COMPRESS=1 --; then
	D=$T/rot/trace
	for _ in $(seq 25); do pl_gets 1 "/block?ms=100" "block ms=100" || break; done
	# the compressor (nice 19) has done every segment sealed so far
	d9_wait_for 120 eval '[ "$(files_of "$D" .bin.gz | wc -l)" -ge 2 ] && d9_series_settled "$D" gz'
	if ! pl_session_quit || [ "$SRC" != 0 ]; then
		pl_fail symbols-rot-exit "${PL_ERR:-exit status $SRC}"
	elif [ "$(files_of "$D" .bin.gz | wc -l)" -lt 2 ]; then
		pl_fail symbols-rot "want several segments: $(ls "$D")"
	else
		check symbols-rot-records named $(files_of "$D" .bin.gz)
		# libdw's own debug-file search would load libdebuginfod and libcurl into the host
		if "$PL_ANALYZE" dump "$D" | grep '"kind":"String"' | grep -q -E 'libdebuginfod|libcurl'; then
			pl_fail symbols-rot-no-debuginfod "the agent loaded libdebuginfod/libcurl into the host"
		else
			pl_pass symbols-rot-no-debuginfod
		fi
	fi
else
	pl_fail symbols-rot "$PL_ERR"
fi

# ---- crash recovery: a dead process's segment is symbolized by the process that recovers it ----------
bin=$(copy_bin rec)
if pl_start "$T/rec" "$bin" --; then
	D=$T/rec/trace
	pl_gets 1 "/block?ms=30" "block ms=30" || pl_fail symbols-rec-replies "$PL_ERR"
	# the BlockingCall is on disk in the .active file (flushed every 50 ms)
	d9_wait_for 30 eval '"$PL_ANALYZE" jsonl "$D"/*.active 2>/dev/null | grep -q "\"call\":\"usleep\""' ||
		pl_fail symbols-rec-replies "no usleep BlockingCall in the .active file: $(ls "$D")"
	kill -KILL "$SPID"
	wait "$SPID" 2>/dev/null
	dead=$SPID
	if pl_start "$T/rec" "$bin" D9_COMPRESS=1 --; then
		pl_get /fast
		# the writer recovers at its start; the compressor symbolizes, then gzips (at nice 19,
		# and at exit it gets 2 s at most: the server stays up until it is done)
		d9_wait_for 120 test -e "$D/trace.$dead.000000.bin.gz"
		d9_wait_settled "$D"
		if ! pl_session_quit || [ "$SRC" != 0 ]; then
			pl_fail symbols-rec-exit "${PL_ERR:-exit status $SRC}"
		fi
		rm -f "$bin"
		f=$(files_of "$D" ".$dead.000000.bin.gz")
		if [ -z "$f" ]; then
			pl_fail symbols-rec-records "no recovered segment of $dead: $(ls "$D")"
		elif ! "$PL_ANALYZE" dump "$f" | grep '"rec":"trailer"' | grep -q '"flags":1'; then
			pl_fail symbols-rec-records "$f: not marked recovered"
		else
			check symbols-rec-records named "$f"
		fi
	else
		pl_fail symbols-rec "$PL_ERR"
	fi
else
	pl_fail symbols-rec "$PL_ERR"
fi

# ---- an active segment -----------------------------------------------------------------------------
if pl_start "$T/active" "$ST_HTTP" --; then
	D=$T/active/trace
	if pl_gets 1 "/block?ms=30" "block ms=30"; then
		# the flush interval is 50 ms: wait until the BlockingCall is on disk
		ok=
		d9_wait_for 30 eval '"$PL_ANALYZE" jsonl "$D"/*.active 2>/dev/null | grep -q "\"call\":\"usleep\""' && ok=1
		f=$(files_of "$D" .active)
		if [ -z "$ok" ]; then
			pl_fail symbols-active "no usleep BlockingCall in the .active file within $((30 * D9_SLOW)) s: $(ls "$D")"
		else
			cp "$f" "$T/active/copy.active"
			check symbols-active-records none "$T/active/copy.active"
			line=$("$PL_ANALYZE" jsonl "$T/active/copy.active" 2>&1 | grep '"call":"usleep"')
			if echo "$line" | grep -q '"stack":\["handle_block (st-http.c:'; then
				pl_pass symbols-active-libdw
			else
				pl_fail symbols-active-libdw "usleep event: '$line'"
			fi
		fi
	else
		pl_fail symbols-active-replies "$PL_ERR"
	fi
	pl_session_quit || pl_fail symbols-active-exit "${PL_ERR:-exit status $SRC}"
else
	pl_fail symbols-active "$PL_ERR"
fi
# ---- crafted segments: the analyzer's use of Symbol records ------------------------------------
mkdir -p "$T/crafted"
if ! out=$(timeout -s KILL 60 python3 - "$T/crafted" "$PL_ANALYZE" <<'PYEOF' 2>&1
import json, struct, subprocess, sys, zlib
out, analyze = sys.argv[1], sys.argv[2]

def uv(v):
    b = b""
    while v >= 0x80:
        b += bytes([(v & 0x7f) | 0x80]); v >>= 7
    return b + bytes([v])

def sv(v):
    return uv(((v << 1) ^ (v >> 63)) & (2**64 - 1))

def st(s):
    return uv(len(s)) + s

def chunk(t, payload):
    head = bytes([0x44, 0x39, t]) + struct.pack("<I", len(payload))
    check = zlib.crc32(head) & 0xff
    c = head[:3] + bytes([check]) + head[3:] + payload
    return c + struct.pack("<I", zlib.crc32(c))

def rec(kind, body):
    return bytes([kind]) + uv(len(body)) + body

def string(i, s):
    return rec(1, uv(i) + s.encode())

def stack(i, frames):
    b = uv(i) + uv(len(frames)) + uv(frames[0])
    for a, c in zip(frames, frames[1:]):
        b += sv(c - a)
    return rec(3, b)

def symbol(start, ln, fn, fl, line, depth):
    return rec(5, uv(start) + uv(ln) + uv(fn) + uv(fl) + uv(line) + uv(depth))

def blocking(stack_id):
    # type 9, delta 0; coroutine 0, call 1, fd_kind 0, duration 5 ms, stack
    return bytes([9]) + uv(0) + uv(1) + uv(0) + uv(5000000) + uv(stack_id)

def segment(pid, seq, before, after, stacks):
    t0 = 1700000000 * 10**9 + seq * 10**6
    hdr = struct.pack("<IIIBBHQQQQQ", pid, 1, seq, 0, 0, 0, 10**9, 10**9, 10**9, t0, t0)
    hdr += st(b"test 1") + st(b"srv") + st(b"srv\0") + st(b"host") + st(b"boot")
    ev = struct.pack("<IIQII", pid, 1, 10**9 + seq * 10**6 + 1, len(stacks), 0)
    ev += b"".join(blocking(s) for s in stacks)
    chunks = [chunk(1, hdr), chunk(3, before), chunk(4, ev)]
    if after:
        chunks.append(chunk(3, after))
    tr = struct.pack("<QQQQQQI", len(stacks), len(chunks) + 1, 0, 0, 0, 0, 0) + uv(0)
    chunks.append(chunk(5, tr))
    return b"\x89D9T\r\n\x1a\n" + struct.pack("<HHI", 1, 0, 0) + b"".join(chunks)

def write(name, data):
    with open("%s/%s" % (out, name), "wb") as f:
        f.write(data)

# process 100, segment 0: the records come after the events
write("t.100.000000.bin", segment(100, 0,
    string(1, "usleep") + stack(1, [0x1111, 0x2222, 0x3333]),
    string(2, "leaf_fn") + string(3, "src/a.c") + string(4, "inlined_fn") + string(5, "wide_fn") +
    symbol(0x1110, 1, 2, 3, 42, 0) + symbol(0x1110, 1, 4, 3, 7, 1) +
    symbol(0x2000, 0x400, 5, 0, 0, 0) + symbol(0x3332, 1, 99, 3, 1, 0), [1]))
# process 100, segment 1: says otherwise about 0x1110 (ignored: segment 0 described it first)
write("t.100.000001.bin", segment(100, 1,
    string(1, "usleep") + string(2, "WRONG_fn") + symbol(0x1110, 1, 2, 0, 0, 0) +
    stack(1, [0x1111, 0x4444]), b"", [1]))
# process 200: the same address, no records of its own
write("t.200.000000.bin", segment(200, 0,
    string(1, "usleep") + stack(1, [0x1111, 0x5555]), b"", [1]))

# process 300: 3000 ranges of 0x100 bytes in shuffled order (the analyzer sorts and merges
# them in steps), SpawnLocations in between (they look names up while ranges still arrive)
import random
rnd = random.Random(7)
order = list(range(3000))
rnd.shuffle(order)
defs = string(1, "usleep")
for k, i in enumerate(order):
    defs += string(10 + i, "w%d" % i) + symbol(0x100000 + i * 0x100, 0x100, 10 + i, 0, 0, 0)
    if k % 7 == 0:
        defs += rec(2, uv(k + 1) + uv(0x100000 + i * 0x100 + 5) + uv(0) + uv(0) + uv(0))
probe = [0, 1, 31, 32, 33, 1499, 2998, 2999]
defs += stack(1, [0x100000 + i * 0x100 + 0x81 for i in probe])
write("t.300.000000.bin", segment(300, 0, defs, b"", [1]))

p = subprocess.run([analyze, "summary", "--json", out], capture_output=True, text=True)
if p.returncode != 0:
    sys.exit("summary exit %d: %s %s" % (p.returncode, p.stderr.strip()[:300], p.stdout[:300]))
got = sorted(tuple(b["stack"]) for b in json.loads(p.stdout)["blocking_calls"])
want = sorted([
    ("inlined_fn (a.c:7)", "leaf_fn (a.c:42)", "wide_fn", "0x3333"),
    ("inlined_fn (a.c:7)", "leaf_fn (a.c:42)", "0x4444"),
    ("0x1111", "0x5555"),
    tuple("w%d" % i for i in probe),
])
if got != want:
    sys.exit("blocking-call stacks %s, want %s" % (got, want))
PYEOF
); then
	pl_fail symbols-analyzer-records "$out"
else
	pl_pass symbols-analyzer-records "end-of-segment records, inline chain, wide range, first segment wins, per process"
fi
# ---- one library under two paths at the same place (a hot-reloaded plugin, /lib vs /usr/lib) -----
# The next process recovers that segment and symbolizes it. libdw took the second report for the
# first module and freed it while the compressor still used it: the host crashed (SIGSEGV in
# d9-compress). Now the host serves on, and the recovered segment reads.
mkdir -p "$T/twin/a" "$T/twin/b" "$T/twin/trace"
lib=$T/twin/a/libtwin.so
printf 'int twin_fn(int x) { return x * 3 + 1; }\n' | cc -shared -fPIC -O2 -g -x c - -o "$lib" &&
	cp "$lib" "$T/twin/b/libtwin.so"
# the library's executable PT_LOAD: start (at base 0x7f0000000000), end, file offset
read -r off vaddr memsz < <(readelf -lW "$lib" | awk '$1 == "LOAD" && ($7 ~ /E/ || $8 ~ /E/) { print $2, $3, $6; exit }')
start=$(printf '%x' $(( 0x7f0000000000 + vaddr )))
end=$(printf '%x' $(( 0x7f0000000000 + vaddr + memsz )))
if ! "$PL_ROOT/build/tests/gen-twin-modules" "$T/twin/trace/trace.4000000.000000.active" \
	"$T/twin/a/libtwin.so" "$T/twin/b/libtwin.so" "$start" "$end" "$(printf '%x' $((off)))"; then
	pl_fail symbols-twin-modules "gen-twin-modules failed"
elif ! pl_start "$T/twin" "$ST_HTTP" D9_TRACE_PATH="$T/twin/trace/trace.bin" D9_COMPRESS=1 --; then
	pl_fail symbols-twin-modules "$PL_ERR"
else
	sealed=""
	d9_wait_for 120 eval 'compgen -G "$T/twin/trace/trace.4000000.000000.bin.gz" >/dev/null || ! pl_alive "$SPID"'
	sealed=$(compgen -G "$T/twin/trace/trace.4000000.000000.bin.gz")
	pl_get /fast
	if ! pl_alive "$SPID"; then
		wait "$SPID"
		pl_fail symbols-twin-modules "the server died (status $?) while the agent symbolized the recovered segment: $(head -c 300 "$T/twin/stderr")"
	elif [ -z "$sealed" ] || [ "$CODE" != 200 ]; then
		pl_fail symbols-twin-modules "no sealed segment ($(ls "$T/twin/trace" | tr '\n' ' ')) or /fast failed ($CODE)"
	elif ! "$PL_ANALYZE" dump "$sealed" >/dev/null; then
		pl_fail symbols-twin-modules "the recovered segment does not read: $("$PL_ANALYZE" dump "$sealed" 2>&1 | tail -n 1)"
	else
		pl_pass symbols-twin-modules "recovered and symbolized $(basename "$sealed"); the server serves on"
	fi
	pl_quit
fi
# ---- a sample at a function's first byte, named by the agent's records ----------------------------
mkdir -p "$T/pc0/trace"
cp "$ST_HTTP" "$T/pc0/mod"
mod=$(readlink -f "$T/pc0/mod")
d9_exec_function "$mod"
base=$((0x555555554000))
if [ -z "$faddr" ] || ! "$PL_ROOT/build/tests/gen-pc0" "$T/pc0/trace" "$mod" \
	"$(printf '%x' $((base + vaddr)))" "$(printf '%x' $((base + vaddr + filesz)))" \
	"$(printf '%x' $((off)))" "$(printf '%x' $((base + 0x$faddr)))"; then
	pl_fail symbols-pc0 "no function found in $mod, or gen-pc0 failed"
elif ! pl_start "$T/pc0" "$ST_HTTP" D9_TRACE_PATH="$T/pc0/trace/trace.bin" D9_COMPRESS=1 --; then
	pl_fail symbols-pc0 "$PL_ERR"
else
	gz=$T/pc0/trace/trace.4000001.000000.bin.gz
	d9_wait_for 120 eval '[ -e "$gz" ] || ! pl_alive "$SPID"'
	pl_quit
	rm -f "$mod"
	got=$("$PL_ANALYZE" flame "$gz" 2>/dev/null | awk '{ $NF = ""; sub(/ $/, ""); n = split($0, f, ";"); print f[n] }' | head -1)
	if [ ! -e "$gz" ]; then
		pl_fail symbols-pc0 "the segment was not adopted and compressed: $(ls "$T/pc0/trace" | tr '\n' ' ')"
	elif [[ "$got" == "$fname"* ]]; then
		pl_pass symbols-pc0 "the sample at $fname's first byte is named by the records: $got"
	else
		pl_fail symbols-pc0 "the sample at $fname's first byte is named '$got' by the records"
	fi
fi
exit 0
