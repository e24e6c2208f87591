#!/usr/bin/env bash
# test-viewer.sh: the viewer (viewer/) and `d9-analyze html`.
#   - decoder conformance: viewer/decode.js prints exactly the golden tests/golden/*.jsonl, and
#     what `d9-analyze dump` prints for every fuzz corpus file (gzip files with damaged streams
#     aside: their messages are zlib's wording) and for 300 golden segments damaged inside
#     chunk payloads (checks recomputed, fixed seed); format 1.3's compact waits on segments
#     built byte by byte (tests/browser/format13-test.js), checked and compared with the dump;
#   - parity: the decoder's events equal `d9-analyze jsonl` on the golden segments and on a real
#     trace of st-http under the agent with CPU samples, on- and off-CPU where permitted (3 x
#     /fast, /burn?ms=20, /sleep?ms=50, /block?ms=30, /fanout?k=4); tests/browser/parity.js says
#     which keys are compared;
#   - `d9-analyze html` writes a report of that trace (exit 0), and 3 for a file that is no trace;
#   - in Debian's chromium through playwright-core (tests/browser/viewer-test.js): poll bars
#     drawn for a known window of the golden trace, a golden segment in the agent's gzip layout of
#     several members read whole and, cut inside a member, read up to the cut, the messages for
#     a truncated file and a file
#     that is no trace, the real trace: the burn poll clicked shows its details and a flame graph
#     naming burn_cpu, the /block poll's off-CPU flame graph names usleep (SKIP when the kernel
#     gives no off-CPU samples), a shift+drag range gives the aggregated flame graph and location
#     table, zoom and pan, the location filter, search by function, points of interest, no network
#     request, and the report.
# Screenshots and the report are kept in build/test-artifacts/viewer/.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup viewer
pl_san_setup viewer || exit 0
ART=$PL_ROOT/build/test-artifacts/viewer
BR=$PL_ROOT/tests/browser
mkdir -p "$ART"
if ! command -v node >/dev/null; then
	pl_fail viewer "node is not installed (make deps)"
	exit 0
fi

# ---- decoder conformance ---------------------------------------------------------------------------
bad=() ngold=0
for f in "$PL_ROOT"/tests/golden/*.bin "$PL_ROOT"/tests/golden/basic.bin.gz; do
	ngold=$((ngold + 1))
	node "$BR/dump.js" "$f" >"$T/g.out" 2>"$T/g.err" || bad+=("$(basename "$f"): node failed: $(head -c 200 "$T/g.err")")
	cmp -s "$T/g.out" "$f.jsonl" || bad+=("$(basename "$f"): $(diff "$f.jsonl" "$T/g.out" | head -n 3 | cut -c1-200)")
done
if [ "${#bad[@]}" -gt 0 ]; then
	pl_fail viewer-decoder-golden "${bad[*]:0:3}"
else
	pl_pass viewer-decoder-golden "$ngold golden files byte for byte"
fi

mkdir -p "$T/js" "$T/c"
node "$BR/dump.js" --each "$T/js" "$PL_ROOT"/tests/fuzz/corpus/* 2>"$T/js.err"
bad=() n=0
for f in "$PL_ROOT"/tests/fuzz/corpus/*; do
	b=$(basename "$f")
	"$PL_ANALYZE" dump "$f" >"$T/c/$b.out" 2>/dev/null
	grep -q '"message":"gzip ' "$T/c/$b.out" && continue
	n=$((n + 1))
	cmp -s "$T/c/$b.out" "$T/js/$b.out" || bad+=("$b")
done
if [ "${#bad[@]}" -gt 0 ]; then
	pl_fail viewer-decoder-corpus "${#bad[@]} of $n files differ from d9-analyze dump: ${bad[*]:0:5}"
elif [ "$n" -lt 40 ]; then
	pl_fail viewer-decoder-corpus "only $n corpus files (the corpus is missing?)"
else
	pl_pass viewer-decoder-corpus "$n fuzz corpus files, the same lines as d9-analyze dump"
fi

# golden segments with bytes changed inside SCHEMA, DEFS, EVENTS and TRAILER payloads and the
# chunk's checks recomputed, so the damage reaches the record and event decoders
mkdir -p "$T/mut" "$T/mut/js"
python3 - "$PL_ROOT/tests/golden" "$T/mut" <<'PYEOF'
import random, struct, sys, zlib
gold, out = sys.argv[1:]
random.seed(11)
srcs = [open("%s/%s" % (gold, n), "rb").read() for n in ("basic.bin", "unknown-types.bin",
                                                           "compact-waits.bin")]
def chunks(b):
    p, res = 16, []
    while p + 12 <= len(b):
        n = struct.unpack_from("<I", b, p + 4)[0]
        res.append((p, b[p + 2], n))
        p += 12 + n
    return res
for i in range(300):
    b = bytearray(random.choice(srcs))
    p, t, n = random.choice([c for c in chunks(b) if c[1] in (2, 3, 4, 5)])
    skip = 24 if t == 4 and n > 24 and random.random() < 0.8 else 0
    for _ in range(random.randint(1, 4)):
        q = p + 8 + skip + random.randrange(max(1, n - skip))
        if q < p + 8 + n:
            b[q] = random.choice([0, 1, 2, 3, 4, 5, 0x7f, 0x80, 0xff, random.randrange(256)])
    b[p + 3] = zlib.crc32(bytes(b[p:p + 3] + b[p + 4:p + 8])) & 0xff
    struct.pack_into("<I", b, p + 8 + n, zlib.crc32(bytes(b[p:p + 8 + n])))
    open("%s/m%03d.bin" % (out, i), "wb").write(b)
PYEOF
node "$BR/dump.js" --each "$T/mut/js" "$T"/mut/m*.bin 2>"$T/mut.err"
bad=() n=0
for f in "$T"/mut/m*.bin; do
	n=$((n + 1))
	"$PL_ANALYZE" dump "$f" >"$T/mut/c.out" 2>/dev/null
	cmp -s "$T/mut/c.out" "$T/mut/js/$(basename "$f").out" || bad+=("$(basename "$f")")
done
if [ "${#bad[@]}" -gt 0 ] || [ "$n" -lt 300 ]; then
	pl_fail viewer-decoder-mutants "${#bad[@]} of $n damaged segments differ from d9-analyze dump: ${bad[*]:0:5} $(head -c 200 "$T/mut.err")"
else
	pl_pass viewer-decoder-mutants "$n damaged golden segments, the same lines as d9-analyze dump"
fi

# format 1.3 (Park's timeout_us_delta, UnparkStats) on segments built byte by byte
# (tests/browser/format13-test.js says which), then the same lines as d9-analyze dump on them
node "$BR/format13-test.js" "$T/f13" 2>"$T/f13.err" >"$T/f13.out"
rc=$?
cat "$T/f13.out"
[ "$rc" = 0 ] || grep -q '^FAIL ' "$T/f13.out" ||
	pl_fail viewer-format13 "format13-test.js exited with status $rc: $(head -c 300 "$T/f13.err")"
bad=() n=0
for f in "$T"/f13/*.bin; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	cmp -s <("$PL_ANALYZE" dump "$f" 2>/dev/null) <(node "$BR/dump.js" "$f") || bad+=("$(basename "$f")")
done
if [ "${#bad[@]}" -gt 0 ] || [ "$n" -lt 7 ]; then
	pl_fail viewer-format13-dump "${#bad[@]} of $n segments differ from d9-analyze dump: ${bad[*]:0:5}"
else
	pl_pass viewer-format13-dump "$n format 1.3 segments, the same lines as d9-analyze dump"
fi

# ---- parity with d9-analyze jsonl ---------------------------------------------------------------------
parity() { # parity NAME TRACE...
	local name=$1
	shift
	"$PL_ANALYZE" jsonl "$@" >"$T/$name.jsonl" 2>/dev/null
	local r
	r=$(node "$BR/parity.js" "$T/$name.jsonl" "$@" 2>&1)
	case "$r" in
	'{"ok":true'*) pl_pass "viewer-parity-$name" "$(echo "$r" | sed 's/.*"events":\([0-9]*\).*/\1/') events equal to d9-analyze jsonl" ;;
	*) pl_fail "viewer-parity-$name" "$(echo "$r" | head -c 600)" ;;
	esac
}
for g in basic.bin basic.bin.gz truncated.bin corrupt-chunk.bin unknown-types.bin; do
	parity "golden-${g//./-}" "$PL_ROOT/tests/golden/$g"
done

# ---- a real trace with CPU samples ---------------------------------------------------------------------
# The viewer names code only from the Symbol records the agent's compressor writes into sealed
# segments (at nice 19; at exit it gets 2 s, which a busy machine does not give it). So segments
# rotate every second, and the server stays up until the segments that hold the requests are
# sealed and compressed (symbols first, then gzip: .bin.gz means named); only the control
# session's last segment may stay without names.
if ! pl_start "$T/run" "$ST_HTTP" D9_CPU_PROFILE=999 D9_SCHED_EVENTS=1 D9_ROTATION_PERIOD=1s D9_COMPRESS=1 --; then
	pl_fail viewer-server "$PL_ERR"
	exit 0
fi
ok=1
pl_gets 3 /fast ok || { pl_fail viewer-requests "$PL_ERR"; ok=0; }
pl_get "/burn?ms=20"
case "$BODY" in "burn ms=20 cpu_ns="*) ;; *) pl_fail viewer-requests "/burn: $CODE '$BODY'"; ok=0 ;; esac
pl_gets 1 "/sleep?ms=50" "sleep ms=50" || { pl_fail viewer-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/block?ms=30" "block ms=30" || { pl_fail viewer-requests "$PL_ERR"; ok=0; }
pl_gets 1 "/fanout?k=4" "fanout k=4 done=4" || { pl_fail viewer-requests "$PL_ERR"; ok=0; }
# the 7 connection coroutines and the 4 fanout children have exited, in .bin.gz segments
gz_exits() {
	local f n=0
	for f in "$SDIR"/trace/*.bin.gz; do
		[ -e "$f" ] || continue
		n=$((n + $("$PL_ANALYZE" jsonl "$f" 2>/dev/null | grep -c '"type":"CoroutineExit"')))
	done
	[ "$n" -ge 11 ]
}
if ! d9_wait_for 120 gz_exits; then
	pl_fail viewer-trace-sealed "the requests' segments were not sealed and compressed within $((120 * D9_SLOW)) s: $(ls "$SDIR/trace" | tr '\n' ' ')"
elif ! d9_wait_settled "$SDIR/trace" gz; then
	pl_fail viewer-trace-sealed "$D9_SETTLE_ERR"
elif ! d9_symbolized "$SDIR"/trace/*.bin.gz; then
	pl_fail viewer-trace-sealed "a compressed segment has no Symbol record (D9_SYMBOLIZE is on by default)"
fi
if ! pl_session_quit || [ "$SRC" != 0 ]; then
	pl_fail viewer-server-exit "${PL_ERR:-exit status $SRC}"
	exit 0
fi
[ "$ok" = 1 ] && pl_pass viewer-requests "3 /fast, /burn?ms=20, /sleep?ms=50, /block?ms=30, /fanout?k=4"
mapfile -t real < <(pl_trace_files "$SDIR/trace" | sed "s|^|$SDIR/trace/|")
if [ "${#real[@]}" = 0 ]; then
	pl_fail viewer-trace "no segment file in $SDIR/trace"
	exit 0
fi
parity real "${real[@]}"
"$PL_ANALYZE" jsonl "${real[@]}" >"$T/real.jsonl" 2>/dev/null

# ---- d9-analyze html ------------------------------------------------------------------------------------
rc=0
"$SAN" html -o "$T/report.html" "$SDIR/trace" >"$T/html.out" 2>"$T/html.err" || rc=$?
if [ "$rc" != 0 ] || [ -s "$T/html.err" ] || [ -s "$T/html.out" ] || ! grep -q 'application/x-d9-segment' "$T/report.html" ||
	grep -q '<script src=' "$T/report.html"; then
	pl_fail viewer-html "exit $rc, stderr '$(head -c 300 "$T/html.err")', $(wc -c <"$T/report.html" 2>/dev/null) bytes"
else
	pl_pass viewer-html "report.html, $(wc -c <"$T/report.html") bytes, scripts inlined, trace embedded"
fi
cp "$T/report.html" "$ART/report.html" 2>/dev/null
echo "not a trace" >"$T/junk.bin"
rc=0
"$SAN" html -o "$T/junk.html" "$T/junk.bin" >/dev/null 2>"$T/junk.err" || rc=$?
if [ "$rc" = 3 ] && grep -q 'not a d9 trace' "$T/junk.err"; then
	pl_pass viewer-html-junk "exit 3: $(head -n 1 "$T/junk.err")"
else
	pl_fail viewer-html-junk "exit $rc, stderr '$(head -c 300 "$T/junk.err")'"
fi

# ---- in the browser -----------------------------------------------------------------------------------
if [ ! -x /usr/bin/chromium ] || [ ! -f "$BR/node_modules/playwright-core/package.json" ]; then
	pl_fail viewer-browser "chromium or playwright-core is missing (scripts/install-deps.sh installs them)"
	exit 0
fi
"$PL_ANALYZE" jsonl "$PL_ROOT/tests/golden/basic.bin" >"$T/golden.jsonl" 2>/dev/null
# basic.bin in the agent's compressed layout (FORMAT.md, "Compressed segments": one gzip member
# per piece, its length in the extra field "D9"), in 200-byte pieces so that it has several
# members; and the same cut inside its last but one member
python3 - "$PL_ROOT/tests/golden/basic.bin" "$T/members.bin.gz" "$T/members-cut.bin.gz" <<'PYEOF'
import struct, sys, zlib
raw = open(sys.argv[1], "rb").read()
out = b""
for p in range(0, len(raw), 200):
    piece = raw[p:p + 200]
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    z = c.compress(piece) + c.flush()
    n = 20 + len(z) + 8
    out += bytes([0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 4, 3, 8, 0, 0x44, 0x39, 4, 0]) + struct.pack("<I", n)
    out += z + struct.pack("<II", zlib.crc32(piece), len(piece))
    if p // 200 == len(raw) // 200 - 1:
        cut = len(out) - len(z) // 2 - 8
open(sys.argv[2], "wb").write(out)
open(sys.argv[3], "wb").write(out[:cut])
PYEOF
cfg=$(python3 -c 'import json, sys
a = sys.argv
print(json.dumps({"golden": a[1], "golden_jsonl": a[2], "truncated": a[3], "real_jsonl": a[4],
	"report": a[5], "artifacts": a[6], "members": a[7], "members_cut": a[8], "real": a[9:]}))' \
	"$PL_ROOT/tests/golden/basic.bin" "$T/golden.jsonl" "$PL_ROOT/tests/golden/truncated.bin" \
	"$T/real.jsonl" "$T/report.html" "$ART" "$T/members.bin.gz" "$T/members-cut.bin.gz" "${real[@]}")
timeout -s KILL 600 node "$BR/viewer-test.js" "$cfg" 2>"$T/browser.err"
rc=$?
[ "$rc" = 0 ] || pl_fail viewer-browser "viewer-test.js exited with $rc: $(tail -c 400 "$T/browser.err")"

# ---- gaps in the data (README.md, "Gaps"): the viewer pairs as d9-analyze does -------------------------
# On the real trace: the polls the viewer's model draws as closed are those `d9-analyze polls`
# lists, and it counts as many unknown pairs (tests/browser/gaps.js; the synthetic gap traces
# are in test-viewer-gaps.sh).
viewer_gaps_real() {
	local r
	"$PL_ANALYZE" polls --json "${real[@]}" >"$T/real.polls" 2>/dev/null
	"$PL_ANALYZE" summary --json "${real[@]}" >"$T/real.sum" 2>/dev/null
	r=$(node "$BR/gaps.js" "$T/real.polls" "$T/real.sum" "${real[@]}" 2>&1)
	case "$r" in
	'{"ok":true'*) pl_pass viewer-gaps-real "$(echo "$r" | sed 's/.*"polls":\([0-9]*\).*"unknown":\({[^}]*}\).*/\1 polls as d9-analyze polls, unknown \2/')" ;;
	*) pl_fail viewer-gaps-real "$(echo "$r" | head -c 600)" ;;
	esac
}
viewer_gaps_real

# ---- flame graphs by time, preempted calls, Unpark statistics (issue 12) --------------------------------
# A generic-mode worker (tests/browser/viewer-weight-test.js says what it checks): two epoll_waits
# with a timeout, then one loop turn that sleeps 300 ms in nanosleep and burns 200 ms of CPU,
# one that writes 1 MiB at a time into a non-blocking pipe (on CPU past the blocking threshold of
# 10 us, its minimum: a copy of 1 MiB takes 80 to 150 us here and tens of microseconds on any
# machine, where 50 us could be missed by a faster one: SchedDelays; a regular file would do on
# bare metal, but on a busy VM steal time looks like waiting off CPU and makes some of them
# BlockingCalls), then epoll_waits until told to
# quit, once the segments holding all that are sealed and named.
cat >"$T/sleeper.c" <<'CEOF'
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static double now_cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void sleep_300ms(void)
{
	struct timespec ts = { 0, 300000000 };
	nanosleep(&ts, NULL);
}

__attribute__((noinline)) static unsigned long burn_200ms(void)
{
	volatile unsigned long x = 0;
	double t0 = now_cpu();
	while (now_cpu() - t0 < 0.2)
		for (int i = 0; i < 10000; i++)
			x += i;
	return x;
}

/* 8 x 1 MiB through a non-blocking pipe with room for it: each write copies on CPU for longer
 * than the 10 us blocking threshold, and a call on a non-blocking pipe is never a BlockingCall
 * (it cannot wait): SchedDelays. Made by the system call itself: a pipe2 the agent sees makes
 * its calls untimed (preload/libc-fds.c), one it does not see is timed and then found
 * non-blocking. */
__attribute__((noinline)) static void write_pipe(void)
{
	size_t n = 1u << 20;
	char *buf = malloc(n);
	int p[2];
	if (!buf || syscall(SYS_pipe2, p, O_NONBLOCK) != 0) {
		free(buf);
		return;
	}
	if (fcntl(p[1], F_SETPIPE_SZ, (int)n) < (int)n)
		n = 65536;
	memset(buf, 1, n);
	for (int i = 0; i < 8; i++) {
		if (write(p[1], buf, n) < 0)
			perror("write");
		while (read(p[0], buf, n) > 0)
			;
	}
	close(p[0]);
	close(p[1]);
	free(buf);
}

int main(int argc, char **argv)
{
	struct epoll_event ev;
	int ep = epoll_create1(0);
	if (ep < 0 || argc < 2)
		return 2;
	for (int i = 0; i < 2; i++)
		epoll_wait(ep, &ev, 1, 20);
	sleep_300ms();
	burn_200ms();
	epoll_wait(ep, &ev, 1, 20);
	write_pipe();
	epoll_wait(ep, &ev, 1, 20);
	printf("done\n");
	fflush(stdout);
	while (access(argv[1], F_OK) != 0)
		epoll_wait(ep, &ev, 1, 50);
	return 0;
}
CEOF
viewer_weight() {
	local S=$T/sleeper-run spid
	mkdir -p "$S/trace"
	if ! cc -O1 -g -fno-omit-frame-pointer -o "$T/sleeper" "$T/sleeper.c" 2>"$T/sleeper.cc"; then
		pl_fail viewer-weight "the test program does not build: $(head -c 300 "$T/sleeper.cc")"
		return
	fi
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$S/trace/trace.bin" D9_FLUSH_INTERVAL=50ms D9_ROTATION_PERIOD=1s D9_COMPRESS=1 \
		D9_BLOCKING_THRESHOLD=10us D9_CPU_PROFILE=99 D9_SCHED_EVENTS=1 "$T/sleeper" "$S/quit" >"$S/stdout" 2>"$S/stderr" &
	spid=$!
	PL_PIDS+=("$spid")
	# the events up to the SchedDelay are in sealed, symbolized segments (.bin.gz), or never
	gz_has() {
		local f
		for f in "$S"/trace/*.bin.gz; do
			[ -e "$f" ] && "$PL_ANALYZE" jsonl "$f" 2>/dev/null | grep -q "$1" && return 0
		done
		return 1
	}
	if ! d9_wait_for 60 grep -q done "$S/stdout"; then
		pl_fail viewer-weight "the test program did not finish its work within $((60 * D9_SLOW)) s: $(head -c 300 "$S/stderr")"
		return
	fi
	# (no wait for every segment to be compressed: a new one is sealed every second while the
	# program runs, and the nice-19 compressor of a busy machine may never catch up)
	if ! d9_wait_for 120 gz_has '"type":"BlockingCall".*nanosleep' || ! d9_wait_for 120 gz_has '"type":"SchedDelay"\|"call":"write"' ||
		! d9_wait_settled "$S/trace"; then
		pl_fail viewer-weight "its segments were not sealed and compressed within $((120 * D9_SLOW)) s: $(ls "$S/trace" | tr '\n' ' ') ${D9_SETTLE_ERR:-}"
	fi
	touch "$S/quit"
	d9_wait_pid "$spid" 60
	[ "$D9_RC" = 0 ] || pl_fail viewer-weight-exit "the test program exited with $D9_RC: $(head -c 300 "$S/stderr")"
	"$PL_ANALYZE" jsonl "$S/trace" >"$S/events.jsonl" 2>/dev/null
	mapfile -t sleeper < <(pl_trace_files "$S/trace" | sed "s|^|$S/trace/|")
	parity sleeper "${sleeper[@]}"
	local cfg
	cfg=$(python3 - "$S/events.jsonl" "$PL_ROOT/tests/golden/basic.bin" "$ART" "${sleeper[@]}" <<'PYEOF'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
sleep = [e["duration_ns"] for e in evs if e["type"] == "BlockingCall" and "nanosleep" in e["call"]]
# off-CPU samples with their time off CPU: perf_event_open with context switches worked
perf = any(e["type"] == "CpuSample" and e["source"] == "off_cpu" and e.get("weight_ns") for e in evs)
print(json.dumps({"sleeper": sys.argv[4:], "nanosleep_ns": max(sleep, default=0), "perf": perf,
                  "old": [sys.argv[2]], "artifacts": sys.argv[3]}))
PYEOF
)
	timeout -s KILL 300 node "$BR/viewer-weight-test.js" "$cfg" 2>"$T/weight.err"
	local rc=$?
	[ "$rc" = 0 ] || pl_fail viewer-weight-browser "viewer-weight-test.js exited with $rc: $(tail -c 400 "$T/weight.err")"
}
viewer_weight
