#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-agent-exit.sh: how a traced process ends, and what its trace looks like afterwards.
# Return from main, exit(), exit() while workers are parked: the last segment is sealed.
# SIGTERM/SIGINT (raised or sent) with no host handler: sealed, then the process dies by the
# signal; with a host SIGTERM handler the host's handler runs instead. SIGKILL: sealed segments
# stay intact and the .active file decodes up to its last complete chunk; the next process with
# the same D9_TRACE_PATH recovers it (cut to the last good chunk, trailer flags=1, .bin(.gz)),
# and leaves alone the .active file of a process that is still alive.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-exit

# sealed_ok NAME RC WANT_RC CHECK OUT: PASS when the run ended with WANT_RC, every segment is
# sealed, none .active, and the accounting is exact.
sealed_ok() {
	local name=$1 rc=$2 want=$3 check=$4 out=$5 err=$6
	if [ "$rc" -ne "$want" ]; then
		d9_fail "$name" "exit status $rc, expected $want: $(head -c 300 "$err")"
		return
	fi
	d9_py "$name" '
c = one(f[0]); drv = parent(f[1])
accounting(c, drv)
if c["files"] == 0 or c["active"] or c["sealed"] != c["files"]:
    fail("%d segments, %d sealed, %d .active" % (c["files"], c["sealed"], c["active"]))
info = "%d segment(s) sealed" % c["files"]
' "$check" "$out"
	[ -s "$err" ] && d9_fail "$name-stderr" "the agent printed: $(head -n 2 "$err")"
}

# ---- exits that run atexit ----------------------------------------------------------------------------
for mode in return exit; do
	d=$T/$mode
	d9_run "$T/$mode.out" "$T/$mode.err" D9_TRACE_PATH="$d/trace.bin" -- \
		-t 3 -n 200000 --park-every 1000 --sleep-us 50 --exit $mode
	rc=$?
	d9_check "$T/$mode.json" --expect-n 200000 --park-every 1000 --driver "$T/$mode.out" "$d"
	sealed_ok "exit-$mode-seals" $rc 0 "$T/$mode.json" "$T/$mode.out" "$T/$mode.err"
done

# exit() from main while the workers are alive and parked: the writer takes their chunks
d=$T/parked
d9_run "$T/parked.out" "$T/parked.err" D9_TRACE_PATH="$d/trace.bin" -- \
	-t 3 -n 50000 --park-every 1000 --sleep-us 50 --exit exit-parked
rc=$?
d9_check "$T/parked.json" --expect-n 50000 --park-every 1000 --tail-extra 1 --driver "$T/parked.out" "$d"
sealed_ok exit-while-workers-parked $rc 0 "$T/parked.json" "$T/parked.out" "$T/parked.err"

# ---- SIGTERM / SIGINT without a host handler: seal, then die by the signal ---------------------
for sig in sigterm sigint; do
	want=$((128 + $( [ $sig = sigterm ] && echo 15 || echo 2 )))
	d=$T/raise-$sig
	d9_run "$T/r$sig.out" "$T/r$sig.err" D9_TRACE_PATH="$d/trace.bin" -- \
		-t 3 -n 100000 --park-every 1000 --sleep-us 50 --exit $sig
	rc=$?
	d9_check "$T/r$sig.json" --expect-n 100000 --park-every 1000 --driver "$T/r$sig.out" "$d"
	sealed_ok "$sig-raised-seals" $rc $want "$T/r$sig.json" "$T/r$sig.out" "$T/r$sig.err"

	# sent from outside while the workers are parked (hang)
	if [ $sig = sigint ] && [ ${#D9_DEFSIG[@]} -eq 0 ]; then
		d9_skip sigint-sent-seals "env(1) cannot reset SIGINT, which the shell ignores in background jobs"
		continue
	fi
	d=$T/kill-$sig
	d9_bg pid "$T/k$sig.out" "$T/k$sig.err" D9_TRACE_PATH="$d/trace.bin" -- \
		-t 3 -n 100000 --park-every 1000 --sleep-us 50 --exit hang
	if ! d9_wait_for 30 grep -qs '"role":"parent"' "$T/k$sig.out"; then
		d9_fail "$sig-sent-seals" "the driver did not finish recording: $(head -c 300 "$T/k$sig.err")"
		d9_kill "$pid"
		continue
	fi
	# every thread in its wait (main in pause, the workers parked), not just about to be
	d9_wait_for 20 d9_all_asleep "$pid"
	kill -s "${sig#sig}" "$pid"
	d9_wait_pid "$pid" 20; rc=$D9_RC
	d9_check "$T/k$sig.json" --expect-n 100000 --park-every 1000 --tail-extra 1 --driver "$T/k$sig.out" "$d"
	sealed_ok "$sig-sent-seals" "$rc" $want "$T/k$sig.json" "$T/k$sig.out" "$T/k$sig.err"
done

# ---- a host SIGTERM handler stays in charge --------------------------------------------------------
d=$T/host
d9_bg pid "$T/host.out" "$T/host.err" D9_TRACE_PATH="$d/trace.bin" -- -t 2 -n 50000 --term-handler
if d9_wait_for 30 grep -qs '"role":"parent"' "$T/host.out"; then
	kill -TERM "$pid"
	d9_wait_pid "$pid" 40; rc=$D9_RC
	d9_check "$T/host.json" --expect-n 50000 --driver "$T/host.out" "$d"
	if grep -q '"term_handled":1}' "$T/host.out"; then
		sealed_ok sigterm-host-handler "$rc" 0 "$T/host.json" "$T/host.out" "$T/host.err"
	else
		d9_fail sigterm-host-handler "the host's SIGTERM handler did not run (status $rc)"
	fi
else
	d9_fail sigterm-host-handler "the driver did not finish recording: $(head -c 300 "$T/host.err")"
	d9_kill "$pid"
fi

# ---- SIGKILL after d9_agent_flush: sealed segments intact, .active decodes fully -----------------
kill_run() { # dir, out, err, extra env...
	local d=$1 out=$2 err=$3
	shift 3
	d9_run "$out" "$err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_FILE_SIZE=1M "$@" -- \
		-t 2 -n 600000 --park-every 1000 --sleep-us 20 --exit kill
}
d=$T/sigkill
kill_run "$d" "$T/kill.out" "$T/kill.err"
rc=$?
d9_check "$T/kill.json" --expect-n 600000 --park-every 1000 --driver "$T/kill.out" "$d"
if [ "$rc" -ne 137 ]; then
	d9_fail sigkill-leaves-decodable "exit status $rc, expected 137 (SIGKILL): $(head -c 300 "$T/kill.err")"
else
	d9_py sigkill-leaves-decodable '
c = one(f[0]); drv = parent(f[1])
accounting(c, drv, expect_drops=False)
act = [s for s in c["segments"] if s["path"].endswith(".active")]
sealed = [s for s in c["segments"] if not s["path"].endswith(".active")]
if len(act) != 1 or act[0]["sealed"]:
    fail("expected one unsealed .active segment: %s" % [s["path"] for s in act])
if act[0]["truncated"]:
    fail("the .active file ends in a partial chunk although the agent flushed before the kill")
if not sealed or any(not s["sealed"] or s["truncated"] or s["open"] != "ok" for s in sealed):
    fail("sealed segments damaged: %s" % sealed)
info = "%d sealed + 1 .active, all %d events decode" % (len(sealed), c["events"])
' "$T/kill.json" "$T/kill.out"
fi

# d9_agent_flush asks the writer for two passes in a row: it returns at once even when the next
# periodic pass is a minute away (it once waited for that pass, and timed out)
d2=$T/sigkill-slowflush
kill_run "$d2" "$T/kill2.out" "$T/kill2.err" D9_FLUSH_INTERVAL=60s
rc=$?
if [ "$rc" -ne 137 ]; then
	d9_fail flush-two-passes "exit status $rc, expected 137 (SIGKILL): $(head -c 300 "$T/kill2.err")"
elif grep -q 'd9_agent_flush returned' "$T/kill2.err"; then
	d9_fail flush-two-passes "with D9_FLUSH_INTERVAL=60s: $(grep -m1 'd9_agent_flush returned' "$T/kill2.err")"
else
	d9_check "$T/kill2.json" --expect-n 600000 --park-every 1000 --driver "$T/kill2.out" "$d2"
	d9_py flush-two-passes '
c = one(f[0]); drv = parent(f[1])
accounting(c, drv, expect_drops=False)
info = "d9_agent_flush returned 0 with D9_FLUSH_INTERVAL=60s; all %d events decode" % c["events"]
' "$T/kill2.json" "$T/kill2.out"
fi

# A crash can also cut a chunk in half: append the first half (3000 bytes at most) of a real chunk
# (the file's last one) to the .active file, as if the writer died inside write(2). A whole copy
# would be a valid chunk, not a torn one: flushed chunks can be shorter than 3000 bytes.
active=$(ls "$d"/*.active 2>/dev/null | head -n 1)
if [ -n "$active" ]; then
	python3 - "$active" <<'EOF'
import sys
path = sys.argv[1]
data = open(path, "rb").read()
i = data.rfind(b"D9\x04")          # the last EVENTS chunk head
# its length: the 8-byte head (u32 payload length at offset 4), the payload, a 4-byte CRC
n = 8 + int.from_bytes(data[i + 4:i + 8], "little") + 4 if i > 0 else 0
tail = data[i:i + min(3000, n // 2)] if i > 0 else b"D9\x04\x00" + b"\xff" * 2996
open(path, "ab").write(tail)
EOF
	d9_check "$T/torn.json" --no-worker-check "$active"
	d9_py sigkill-torn-active-decodes '
c = one(f[0])
s = c["segments"][0]
if not s["truncated"] or s["open"] != "ok" or c["corrupt_chunks"]:
    fail("a torn .active should read as truncated, not corrupt: %s" % s)
' "$T/torn.json"
fi

# ---- recovery by the next process with the same D9_TRACE_PATH ------------------------------------
# The next process (D9_COMPRESS=1) recovers the file when its writer starts and hands it to its
# compressor (symbols, then gzip, at nice 19), which at exit gets 2 s at most: on a busy machine that is
# not enough, and the recovered segment would stay .bin. So this process stays alive (hang)
# until the series is settled (the recovered .bin.gz there, no temporary file), then SIGTERM
# seals its own segment.
d9_bg pid "$T/rec.out" "$T/rec.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_FILE_SIZE=1M D9_COMPRESS=1 -- -t 1 -n 10 --exit hang
rc=0 why=""
if ! d9_wait_for 30 grep -qs '"role":"parent"' "$T/rec.out"; then
	why="the second driver did not finish recording"
elif [ -n "$active" ] && ! d9_wait_for 120 test -e "${active%.active}.bin.gz"; then
	why="no ${active%.active}.bin.gz within $((120 * D9_SLOW)) s: $(ls "$d" | tr '\n' ' ')"
elif ! d9_wait_settled "$d"; then # no temporary file (the killed run left its own .bin as they were)
	why=$D9_SETTLE_ERR
fi
kill -TERM "$pid"
d9_wait_pid "$pid" 20
[ "$D9_RC" -eq 143 ] || rc=$D9_RC
d9_check "$T/rec.json" --expect-n 600000 --park-every 1000 --driver "$T/kill.out" "$d"
if [ "$rc" -ne 0 ] || [ -z "$active" ] || [ -n "$why" ]; then
	d9_fail recovery "second run exited $rc (SIGTERM expected), or no .active file to recover, or: $why; $(head -c 300 "$T/rec.err")"
else
	d9_py recovery '
import os
c = one(f[0]); drv = parent(f[1]); active = f[2]
accounting(c, drv, expect_drops=False)
if os.path.exists(active):
    fail("%s still exists" % active)
base = active[:-len(".active")]
rec = [s for s in c["segments"] if s["path"] in (base + ".bin.gz", base + ".bin")]
if not rec:
    fail("no %s.bin(.gz) after recovery: %s" % (os.path.basename(base), files(os.path.dirname(active))))
r = rec[0]
if not r["path"].endswith(".bin.gz"):
    fail("the recovered segment was not compressed (D9_COMPRESS=1): %s" % r["path"])
if not r["sealed"] or not r["recovered"] or r["trailer_flags"] != 1:
    fail("recovered segment: sealed %d, trailer flags %d (want 1)" % (r["sealed"], r["trailer_flags"]))
if r["truncated"]:
    fail("the recovered segment still ends in the torn chunk")
terr = [e for e in c["trailer_error_list"] if os.path.basename(base) in e]
if terr:
    fail("the recovery trailer disagrees with the segment: %s" % terr[:2])
others = [s for s in c["segments"] if s["pid"] == drv["pid"] and s is not r]
if any(s["recovered"] for s in others):
    fail("segments sealed normally are marked recovered")
info = "%s: flags=1, %d events" % (os.path.basename(r["path"]), r["events"])
' "$T/rec.json" "$T/kill.out" "$active"
	mode=$(stat -c %a "${active%.active}.bin.gz" 2>/dev/null)
	[ "$mode" = 600 ] && d9_pass recovery-mode || d9_fail recovery-mode "recovered file mode ${mode:-missing}, expected 600"
	[ -s "$T/rec.err" ] && d9_fail recovery-stderr "the agent printed: $(head -n 2 "$T/rec.err")"
fi

# D9_COMPRESS=0: the recovered segment stays .bin
d=$T/sigkill-nocompress
kill_run "$d" "$T/kill2.out" "$T/kill2.err" D9_COMPRESS=0
d9_run "$T/rec2.out" "$T/rec2.err" D9_TRACE_PATH="$d/trace.bin" D9_COMPRESS=0 -- -t 1 -n 10
d9_check "$T/rec2.json" --expect-n 600000 --park-every 1000 --driver "$T/kill2.out" "$d"
d9_py recovery-uncompressed '
c = one(f[0]); drv = parent(f[1])
accounting(c, drv, expect_drops=False)
rec = [s for s in c["segments"] if s["recovered"]]
if len(rec) != 1 or not rec[0]["path"].endswith(".bin"):
    fail("expected one recovered .bin: %s" % [s["path"] for s in rec])
if any(n.endswith(".active") or n.endswith(".gz") for n in files(f[2])):
    fail("files left: %s" % files(f[2]))
' "$T/rec2.json" "$T/kill2.out" "$d"

# ---- the .active file of a live process is left alone ---------------------------------------------
d=$T/live
d9_bg pid "$T/live.out" "$T/live.err" D9_TRACE_PATH="$d/trace.bin" -- -t 2 -n 1000 --exit hang
if d9_wait_for 20 grep -qs '"role":"parent"' "$T/live.out" && d9_wait_for 10 compgen -G "$d/*.active" >/dev/null; then
	before=$(ls "$d")
	d9_run "$T/live2.out" "$T/live2.err" D9_TRACE_PATH="$d/trace.bin" -- -t 1 -n 10
	if compgen -G "$d/trace.$pid.*.active" >/dev/null && ! compgen -G "$d/trace.$pid.*.bin*" >/dev/null; then
		d9_pass recovery-skips-live-process
	else
		d9_fail recovery-skips-live-process "the live process's segment was touched: before [$before], after [$(ls "$d")]"
	fi
else
	d9_fail recovery-skips-live-process "the first driver did not start writing: $(head -c 300 "$T/live.err")"
fi
d9_kill "$pid"

# ---- many crashed segments to recover do not keep the new process from sealing its own ---------
# 30 copies of the 2.4 MB .active file left by the kill above (pids above any pid_max: dead).
# The new process records and returns; at exit its own segment must be sealed (the agent waits
# up to 5 s for its writer) and its events all there, however long the recovery of the old files
# takes: recovering a crash loop's leftovers must not cost the next run its trace.
src=$(ls "$T"/sigkill-nocompress/*.bin 2>/dev/null | head -n 1)
d=$T/manyrec
mkdir -p "$d"
if [ -n "$src" ]; then
	# a recovered .bin with its trailer is still a valid .active input: recovery cuts the trailer
	for i in $(seq 1 30); do cp "$src" "$d/trace.$((4000000 + i)).000000.active"; done
	d9_run "$T/many.out" "$T/many.err" D9_TRACE_PATH="$d/trace.bin" -- -t 2 -n 100000 --park-every 1000 --sleep-us 50
	rc=$?
	mypid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$T/many.out" 2>/dev/null || echo 0)
	# only its own files: the 30 copies all hold the killed process's pid and threads
	# (segments only: a compression cut short at exit may leave a temporary file, which the
	# next process removes)
	own=$(ls "$d"/trace."$mypid".* 2>/dev/null | grep -E '\.(bin|bin\.gz|active)$')
	# shellcheck disable=SC2086
	d9_check "$T/many.json" --expect-n 100000 --park-every 1000 --driver "$T/many.out" ${own:-"$d/none"}
	if [ "$rc" -ne 0 ]; then
		d9_fail recovery-does-not-delay-sealing "exit status $rc: $(head -c 300 "$T/many.err")"
	else
		d9_py recovery-does-not-delay-sealing '
drv = parent(f[1]); names = files(f[2]); err = open(f[3]).read()
mine = [n for n in names if ".%d." % drv["pid"] in n]
if any(n.endswith(".active") for n in mine) or not mine:
    fail("its own segment was not sealed at exit: %s; stderr: %s" % (mine, err.strip()[:200]))
try:
    accounting(one(f[0]), drv, expect_drops=False)
except Fail as e:
    fail("%s; its files: %s" % (e, mine))
left = [n for n in names if n.endswith(".active")]
info = "%d of 30 old files still .active at exit" % len(left)
' "$T/many.json" "$T/many.out" "$d" "$T/many.err"
	fi
else
	d9_fail recovery-does-not-delay-sealing "no recovered .bin from the test above to copy"
fi

# ---- SIGKILL at an arbitrary moment of heavy writing ------------------------------------------------
# Whatever the writer was doing, the .active file holds whole chunks up to (maybe) one partial
# one at its end: no corrupt chunk, and every thread's stream is a gap-free prefix.
d=$T/midwrite
d9_bg pid "$T/mid.out" "$T/mid.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_FILE_SIZE=1M -- \
	-t 3 -n 20000000 --park-every 1000 --sleep-us 10
# killed while the third segment is being written (two sealed before it)
d9_wait_for 30 compgen -G "$d/*.000002.*" >/dev/null
d9_kill "$pid"
d9_check "$T/mid.json" --park-every 1000 "$d"
d9_py sigkill-mid-write '
c = one(f[0])
if c["files"] < 2:
    fail("the run was killed before it wrote a second segment")
if c["corrupt_chunks"] or c["unreadable"]:
    fail("%d corrupt chunks, %d unreadable files" % (c["corrupt_chunks"], c["unreadable"]))
if not c["ok"]:
    fail("d9-check: %s" % c["error_list"][:3])
trunc = [s["path"] for s in c["segments"] if s["truncated"] and not s["path"].endswith(".active")]
if trunc:
    fail("sealed segments truncated: %s" % trunc)
info = "%d segments, %d events, .active truncated: %d" % (c["files"], c["events"], c["truncated"])
' "$T/mid.json"
exit 0
