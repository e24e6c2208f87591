#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid, $pid2: set by d9_bg (printf -v)
# test-agent-rotation.sh: the segment series on disk. Rotation by size (D9_MAX_FILE_SIZE) and by
# wall-clock aligned time (D9_ROTATION_PERIOD); the total budget (D9_MAX_TOTAL_SIZE) sampled while
# the writer is busy; max_file_size clamped to half the budget; D9_COMPRESS on (.bin.gz) and off
# (.bin), the compressed layout (gzip members of 64 KiB of the segment each, walked by the
# lengths in their extra fields); segment names <stem>.<pid>.<seq 6 digits>; every segment self-contained and every
# event accounted for across segments; trailers that agree with what the segment holds.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-rotation

MiB=1048576

# ---- by size: 1 MiB segments, ~10 MB of events, uncompressed so sizes are the real ones --------
d=$T/size
d9_run "$T/size.out" "$T/size.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_FILE_SIZE=1M D9_COMPRESS=0 -- \
	-t 4 -n 1000000 --park-every 5000 --sleep-us 100
rc=$?
d9_check "$T/size.json" --expect-n 1000000 --park-every 5000 --driver "$T/size.out" "$d"
if [ "$rc" -ne 0 ]; then
	d9_fail rotation-size "driver exited $rc: $(head -c 300 "$T/size.err")"
else
	d9_py rotation-size '
import re
c = one(f[0]); drv = parent(f[1]); d = f[2]
accounting(c, drv)
segs = c["segments"]
if len(segs) < 4:
    fail("%d segments for ~10 MB of events with D9_MAX_FILE_SIZE=1M" % len(segs))
limit = 1048576 + 65536
names = files(d)
for s in segs:
    if s["bytes"] > limit:
        fail("%s: %d bytes, more than 1 MiB plus one chunk" % (s["path"], s["bytes"]))
    if not s["sealed"] or s["truncated"]:
        fail("%s: sealed %d truncated %d" % (s["path"], s["sealed"], s["truncated"]))
seqs = c["pids"][str(drv["pid"])]["seqs"]
if seqs != list(range(len(seqs))):
    fail("segment seqs %s are not 0..n-1" % seqs)
want = ["trace.%d.%06d.bin" % (drv["pid"], q) for q in seqs]
if names != want:
    fail("file names %s, expected %s" % (names[:3], want[:3]))
big = [s["bytes"] for s in segs[:-1]]
if min(big) < 1048576 - 2 * 65536:
    fail("a segment other than the last was sealed at %d bytes, far below the limit" % min(big))
info = "%d segments, largest %d bytes" % (len(segs), max(s["bytes"] for s in segs))
' "$T/size.json" "$T/size.out" "$d"
	d9_py segments-self-contained '
c = one(f[0])
bad = [e for e in c["error_list"] if "before any Thread def" in e]
if bad:
    fail(bad[0])
if c["files"] < 4:
    fail("only %d segments" % c["files"])
' "$T/size.json"
	d9_py trailer-consistency '
c = one(f[0])
if c["trailer_errors"]:
    fail("%d trailer fields disagree with the segment: %s" % (c["trailer_errors"], c["trailer_error_list"][:4]))
' "$T/size.json"
fi

# ---- by time: D9_ROTATION_PERIOD=1s, ~3.5 s of recording --------------------------------------------
# Segments rotate at wall-clock multiples of the period: each new segment starts in a later
# period than the one before, and a sealed segment holds no event recorded well after the end of
# the period it started in (0.4 s of slack for the writer to notice the boundary: a pass seals a
# segment whose period ended before it writes the pass's chunks, so a writer that waited for a
# CPU does not stretch it).
d=$T/time
d9_run "$T/time.out" "$T/time.err" D9_TRACE_PATH="$d/trace.bin" D9_ROTATION_PERIOD=1s -- \
	-t 2 -n 700 --sleep-every 1 --sleep-us 5000
rc=$?
d9_check "$T/time.json" --expect-n 700 --driver "$T/time.out" "$d"
if [ "$rc" -ne 0 ]; then
	d9_fail rotation-time "driver exited $rc: $(head -c 300 "$T/time.err")"
else
	d9_py rotation-time '
c = one(f[0]); drv = parent(f[1])
accounting(c, drv, expect_drops=False)
P = 10**9
segs = [s for s in c["segments"] if s["pid"] == drv["pid"]]
run = (drv["end_real_ns"] - drv["start_real_ns"]) / 1e9
if len(segs) < 2:
    fail("%d segment(s) for a %.1f s run with D9_ROTATION_PERIOD=1s" % (len(segs), run))
periods = [s["start_real_ns"] // P for s in segs]
if periods != sorted(set(periods)):
    fail("segments start in periods %s: two in one period" % periods)
for s in segs[:-1]:
    end = (s["start_real_ns"] // P + 1) * P
    if s["events"] and s["last_real_ns"] > end + 0.4 * P:
        fail("%s: an event %.3f s after the end of its period" % (s["path"], (s["last_real_ns"] - end) / 1e9))
info = "%d segments in %.1f s" % (len(segs), run)
' "$T/time.json" "$T/time.out"
fi

# ---- the total budget, sampled under sustained load --------------------------------------------
# D9_MAX_TOTAL_SIZE=4M with 1 MiB segments while ~40 MB of events are written over ~2 s. The writer deletes
# the oldest sealed segments whenever it opens a new one so that sealed + one full active
# segment fit the budget. Slack allowed on top of 4 MiB, sampled every ~20 ms:
#   - the compressor's output: while it gzips a sealed segment, the .bin (counted) and its
#     .bin.gz.tmp (not yet counted) both exist; gzip output is at most the input size plus 0.1%,
#     so <= 1 MiB + 1 KiB;
#   - the active segment may pass its limit by the definitions written in front of a chunk and
#     the trailer: a few KiB here (threads and strings only), bounded by 64 KiB.
# So the directory must stay <= 4 MiB + 1 MiB + 64 KiB + 1 KiB at every sample, and <= 4 MiB at
# the end, when no compression is in flight.
d=$T/budget
mkdir -p "$d"
d9_bg pid "$T/budget.out" "$T/budget.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_TOTAL_SIZE=4M \
	D9_MAX_FILE_SIZE=1M -- -t 4 -n 2500000 --park-every 2000 --sleep-us 1500
max=0 samples=0
deadline=$(( $(date +%s) + 50 ))
while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
	b=$(d9_dir_bytes "$d" '*')
	[ "$b" -gt "$max" ] && max=$b
	samples=$((samples + 1))
	st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
	[ "$st" = Z ] && break
	sleep 0.02
done
d9_wait_pid "$pid" 20; rc=$D9_RC
# the segments only: a compression cut short at exit may leave its temporary file, which the
# next process removes (compress-exit-no-tmp below)
end=$(( $(d9_dir_bytes "$d" '*.bin') + $(d9_dir_bytes "$d" '*.bin.gz') ))
d9_check "$T/budget.json" "$d"
limit=$((4 * MiB + MiB + 65536 + 1024))
if [ "$rc" -ne 0 ]; then
	d9_fail budget "driver exited $rc: $(head -c 300 "$T/budget.err")"
elif [ "$samples" -lt 1 ]; then
	d9_fail budget "the directory was never sampled while the driver ran"
else
	# how many samples a run gets depends on the machine's load (the loop is a shell); what the
	# budget is tested on is that old segments were deleted (seqs[0] > 0) and the sizes seen
	d9_py budget '
c = one(f[0]); drv = parent(f[1])
mx, end, limit, samples = int(f[2]), int(f[3]), int(f[4]), int(f[5])
total = sum(s["bytes"] for s in c["segments"])
if mx > limit:
    fail("the directory reached %d bytes while running, over 4 MiB + slack (%d)" % (mx, limit))
if end > 4 * 1048576:
    fail("%d bytes of segments left at the end, over D9_MAX_TOTAL_SIZE=4M: %s" % (end, files(f[6])))
seqs = c["pids"][str(drv["pid"])]["seqs"]
if seqs[0] == 0:
    fail("segment 0 still exists: nothing was deleted (%d bytes, seqs %s)" % (end, seqs))
# deleted segments leave gaps in the streams: only check that what is kept decodes
if c["unreadable"] or c["corrupt_chunks"] or c["truncated"]:
    fail("kept segments damaged: %d unreadable, %d corrupt chunks, %d truncated"
         % (c["unreadable"], c["corrupt_chunks"], c["truncated"]))
info = "max %d bytes over %d samples, %d at the end, segments %s kept" % (mx, samples, end, seqs)
' "$T/budget.json" "$T/budget.out" "$max" "$end" "$limit" "$samples" "$d"
	# "deletes the oldest sealed segments": what is left is the newest part of the series
	d9_py budget-deletes-oldest '
c = one(f[0]); drv = parent(f[1])
seqs = c["pids"][str(drv["pid"])]["seqs"]
if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
    fail("the kept segments %s are not the newest ones: newer segments were deleted before older ones" % seqs)
' "$T/budget.json" "$T/budget.out"
fi

# ---- max_file_size clamped to half the budget ------------------------------------------------------
d=$T/clamp
d9_run "$T/clamp.out" "$T/clamp.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_TOTAL_SIZE=2M \
	D9_MAX_FILE_SIZE=64M D9_COMPRESS=0 -- -t 2 -n 1000000 --park-every 5000 --sleep-us 100
rc=$?
d9_check "$T/clamp.json" "$d"
if [ "$rc" -ne 0 ]; then
	d9_fail max-file-size-clamped "driver exited $rc: $(head -c 300 "$T/clamp.err")"
else
	d9_py max-file-size-clamped '
c = one(f[0])
segs = c["segments"]
if len(segs) < 2:
    fail("one segment of %d bytes: D9_MAX_FILE_SIZE=64M was not clamped to 1M (half of 2M)" % segs[0]["bytes"])
for s in segs:
    if s["bytes"] > 1048576 + 65536:
        fail("%s: %d bytes, over half of D9_MAX_TOTAL_SIZE=2M plus one chunk" % (s["path"], s["bytes"]))
total = sum(s["bytes"] for s in segs)
if total > 2 * 1048576:
    fail("%d bytes kept, over D9_MAX_TOTAL_SIZE=2M" % total)
info = "%d segments kept, %d bytes" % (len(segs), total)
' "$T/clamp.json"
fi

# ---- D9_COMPRESS=1 gzips every segment (.bin.gz), 0 leaves .bin ------------------------------------
# With compression on, the driver stays alive (hang) until the compressor has gzipped every
# segment sealed so far: it runs at nice 19 and at exit gets 2 s at most, which a busy machine
# does not give it. Then SIGTERM seals the last segment, which the compressor may or may not
# finish within its 2 s (see compress-exit-no-tmp below): every other one must be .bin.gz.
for mode in on off; do
	d=$T/compress-$mode
	envs=(D9_TRACE_PATH="$d/trace.bin" D9_MAX_FILE_SIZE=1M)
	args=(-t 2 -n 600000 --park-every 5000 --sleep-us 100)
	if [ "$mode" = off ]; then
		d9_run "$T/c$mode.out" "$T/c$mode.err" "${envs[@]}" D9_COMPRESS=0 -- "${args[@]}"
		rc=$?
		d9_check "$T/c$mode.json" --expect-n 600000 --park-every 5000 --driver "$T/c$mode.out" "$d"
	else
		d9_bg pid "$T/c$mode.out" "$T/c$mode.err" "${envs[@]}" D9_COMPRESS=1 -- "${args[@]}" --exit hang
		rc=0
		# every event in the directory first: until then the writer may still seal one more
		# segment, which the settling below could miss
		if ! d9_wait_for 60 grep -qs '"role":"parent"' "$T/c$mode.out"; then
			rc="no result line from the driver"
		elif ! d9_wait_for 60 d9_check "$T/c$mode.pre.json" --expect-n 600000 --park-every 5000 \
			--tail-extra 1 --driver "$T/c$mode.out" "$d"; then
			rc="not every event reached the directory within 60 s: $(head -c 300 "$T/c$mode.pre.json")"
		elif ! d9_wait_settled "$d" gz; then
			rc="compressor: $D9_SETTLE_ERR"
		fi
		kill -TERM "$pid"
		d9_wait_pid "$pid" 30
		[ "$rc" = 0 ] && [ "$D9_RC" -ne 143 ] && rc="status $D9_RC after SIGTERM, expected 143"
		d9_check "$T/c$mode.json" --expect-n 600000 --park-every 5000 --tail-extra 1 --driver "$T/c$mode.out" "$d"
	fi
	if [ "$rc" != 0 ]; then
		d9_fail "compress-$mode" "driver: $rc: $(head -c 300 "$T/c$mode.err")"
		continue
	fi
	d9_py "compress-$mode" '
c = one(f[0]); drv = parent(f[1]); mode = f[2]; names = files(f[3])
accounting(c, drv)
if len(names) < 3:
    fail("%d files: expected a few 1 MiB segments" % len(names))
if mode == "on":
    # the last one was sealed at SIGTERM: compressed if the exit wait sufficed, else .bin with
    # maybe the temporary file of the cut compression (the next process removes it)
    tmp = [n for n in names if ".bin.gz.tmp-" in n]
    names = [n for n in names if n not in tmp]
    bad = [n for n in tmp if not n.startswith(names[-1] + ".gz.tmp-")]
    bad += [n for n in names[:-1] if not n.endswith(".bin.gz")]
    if not (names[-1].endswith(".bin.gz") or names[-1].endswith(".bin")):
        bad.append(names[-1])
    suffix = ".bin.gz"
else:
    bad = [n for n in names if not n.endswith(".bin")]
    suffix = ".bin"
if bad:
    fail("with D9_COMPRESS %s: %s (expected only *%s)" % (mode, bad, suffix))
if c["sealed"] != len(names):
    fail("%d of %d segments sealed" % (c["sealed"], len(names)))
info = "%d x %s" % (len(names), suffix) + (", the last %s" % names[-1][-7:] if mode == "on" else "")
' "$T/c$mode.json" "$T/c$mode.out" "$mode" "$d"
	[ "$mode" = on ] || continue
	# the layout FORMAT.md gives ("Compressed segments"): one gzip member per 64 KiB of the
	# segment, each naming its own length in the extra field "D9", which walks the file exactly
	d9_py compress-gzip-members '
import gzip, os, struct, zlib
gz = [n for n in files(f[0]) if n.endswith(".bin.gz")]
members = 0
for n in gz:
    b = open(os.path.join(f[0], n), "rb").read()
    off, sizes = 0, []
    while off < len(b):
        h = b[off:off + 20]
        if len(h) < 20 or h[:4] != b"\x1f\x8b\x08\x04" or h[10:16] != b"\x08\x00D9\x04\x00":
            fail("%s: no d9 member head at offset %d of %d: %s" % (n, off, len(b), h.hex()))
            break
        ln = struct.unpack_from("<I", h, 16)[0]
        if ln < 28 or off + ln > len(b):
            fail("%s: member at %d claims %d bytes, the file has %d" % (n, off, ln, len(b)))
            break
        z = zlib.decompressobj(-15)
        data = z.decompress(b[off + 20:off + ln - 8])
        crc, isize = struct.unpack_from("<II", b, off + ln - 8)
        if not z.eof or z.unused_data or zlib.crc32(data) != crc or len(data) != isize:
            fail("%s: member at %d: deflate data does not end at its length, or CRC/ISIZE differ" % (n, off))
        sizes.append(isize)
        off += ln
    if any(s != 65536 for s in sizes[:-1]) or not sizes or sizes[-1] > 65536:
        fail("%s: member sizes %s: expected 65536 each but the last" % (n, sizes[:8]))
    whole = len(gzip.decompress(b))
    if whole != sum(sizes):
        fail("%s: gzip reads %d bytes, the members hold %d" % (n, whole, sum(sizes)))
    members += len(sizes)
if len(gz) < 2 or members < 8 * len(gz):
    fail("%d members in %d compressed 1 MiB segments: expected 16 or more each" % (members, len(gz)))
info = "%d segments of %d gzip members in all, each member walked by its length" % (len(gz), members)
' "$d"
done
# ---- D9_COMPRESS=auto (the default): gzip only what the budget needs -----------------------------
# The same ~4.8 MB in 1 MiB segments. With the default budget (1G) the directory stays under half
# of it: every sealed segment is symbolized and left .bin, marked finished (sticky bit), nothing
# is gzipped. The segment sealed at SIGTERM is not finished (an exit waits for no symbols); the
# next process of the series adopts it, symbolizes and marks it, and gzips nothing. With
# D9_MAX_TOTAL_SIZE=8M the directory (4 to 5 MB at the budget's last look) is over half of it:
# the compressor gzips the oldest finished segments until it is under half, so at least one is
# .bin.gz, the newest finished ones stay .bin, and every .bin.gz is older than every finished
# .bin. Every event is accounted for across the .bin and .bin.gz files either way.
for mode in under over; do
	d=$T/auto-$mode
	envs=(D9_TRACE_PATH="$d/trace.bin" D9_MAX_FILE_SIZE=1M)
	[ "$mode" = over ] && envs+=(D9_MAX_TOTAL_SIZE=8M)
	args=(-t 2 -n 600000 --park-every 5000 --sleep-us 100)
	d9_bg pid "$T/a$mode.out" "$T/a$mode.err" "${envs[@]}" -- "${args[@]}" --exit hang
	rc=0
	if ! d9_wait_for 60 grep -qs '"role":"parent"' "$T/a$mode.out"; then
		rc="no result line from the driver"
	elif ! d9_wait_for 120 d9_series_finished "$d"; then
		rc="not finished: $(ls -l "$d" | tr '\n' ' ' | head -c 400)"
	elif [ "$mode" = over ] && ! d9_wait_for 120 sh -c 'ls "$1" | grep -q "\.bin\.gz$"' sh "$d"; then
		rc="nothing gzipped: $(ls -l "$d" | tr '\n' ' ' | head -c 400)"
	fi
	ls -l "$d" >"$T/a$mode.before"
	kill -TERM "$pid"
	d9_wait_pid "$pid" 30
	[ "$rc" = 0 ] && [ "$D9_RC" -ne 143 ] && rc="status $D9_RC after SIGTERM, expected 143"
	d9_check "$T/a$mode.json" --expect-n 600000 --park-every 5000 --tail-extra 1 --driver "$T/a$mode.out" "$d"
	if [ "$rc" = 0 ] && [ "$mode" = under ]; then
		# the next process adopts the last segment: symbolized, marked, not gzipped
		d9_bg pid2 "$T/a$mode.2.out" "$T/a$mode.2.err" "${envs[@]}" -- -t 1 -n 10 --exit hang
		if ! d9_wait_for 60 d9_series_finished "$d"; then
			rc="the next process did not finish the last segment: $(ls -l "$d" | tr '\n' ' ' | head -c 400)"
		fi
		kill -TERM "$pid2"
		d9_wait_pid "$pid2" 30
	fi
	if [ "$rc" != 0 ]; then
		d9_fail "compress-auto-$mode" "driver: $rc: $(head -c 300 "$T/a$mode.err")"
		continue
	fi
	d9_py "compress-auto-$mode" '
import stat
c = one(f[0]); drv = parent(f[1]); mode = f[2]; d = f[3]
accounting(c, drv)
mine = [n for n in files(d) if ".%d." % drv["pid"] in n]
def seq(n): return int(n.split(".")[2])
gz = [n for n in mine if n.endswith(".bin.gz")]
raw = [n for n in mine if n.endswith(".bin")]
fin = [n for n in raw if os.stat(os.path.join(d, n)).st_mode & stat.S_ISVTX]
other = [n for n in mine if n not in gz and n not in raw]
if other:
    fail("files beside the segments: %s" % other)
if c["sealed"] != len(gz) + len(raw) or len(gz) + len(raw) < 4:
    fail("%d sealed, %d .bin.gz, %d .bin: expected 4 or more segments, all sealed" % (c["sealed"], len(gz), len(raw)))
if mode == "under":
    if gz:
        fail("under half the budget, yet gzipped: %s" % gz)
    if len(fin) != len(raw):
        fail("not marked finished after the next process ran: %s" % sorted(set(raw) - set(fin)))
    info = "%d x .bin, all finished, none gzipped" % len(raw)
else:
    if not gz or not fin:
        fail("over half the budget: %d gzipped, %d finished .bin; expected some of each" % (len(gz), len(fin)))
    elif max(seq(n) for n in gz) > min(seq(n) for n in fin):
        fail("not oldest first: gzipped %s, finished .bin %s" % (sorted(gz), sorted(fin)))
    info = "gzipped %s, left .bin %s" % (" ".join(n[-14:] for n in sorted(gz)), " ".join(n[-10:] for n in sorted(raw)))
' "$T/a$mode.json" "$T/a$mode.out" "$mode" "$d"
done

# ---- exit while the compressor is still at work ------------------------------------------------------
# One 32 MB segment (the default D9_MAX_FILE_SIZE is 64M): at exit the agent gives the compressor
# 2 s, which is not enough here, so the segment may stay .bin. The compressor's temporary file
# (.bin.gz.tmp-<pid>) goes with the job it belonged to; if the compressor could not even get to
# that within its last 300 ms (a saturated machine: it runs at nice 19), the file stays, and the
# next process with the same trace path removes it (a dead process's temporary file) as it starts.
# Either way no temporary file of the first process outlives the second one.
d=$T/exitgz
d9_run "$T/exitgz.out" "$T/exitgz.err" D9_TRACE_PATH="$d/trace.bin" D9_COMPRESS=1 -- -t 4 -n 2000000 --park-every 20000 --sleep-us 50
rc=$?
d9_check "$T/exitgz.json" --expect-n 2000000 --park-every 20000 --driver "$T/exitgz.out" "$d"
left=$(ls "$d" | grep -vE '\.(bin|bin\.gz)$' | tr '\n' ' ')
d9_run "$T/exitgz2.out" "$T/exitgz2.err" D9_TRACE_PATH="$d/trace.bin" -- -t 1 -n 10
rc2=$?
if [ "$rc" -ne 0 ] || [ "$rc2" -ne 0 ]; then
	d9_fail compress-exit-no-tmp "driver exited $rc, the next one $rc2: $(head -c 300 "$T/exitgz.err" "$T/exitgz2.err")"
else
	d9_py compress-exit-no-tmp '
c = one(f[0]); drv = parent(f[1]); names = files(f[2]); left = f[3].split()
accounting(c, drv)
mine = [n for n in names if ".%d." % drv["pid"] in n]
tmp = [n for n in mine if not (n.endswith(".bin") or n.endswith(".bin.gz"))]
if tmp:
    fail("left in the trace directory after the next process ran: %s (with %s)" % (tmp, names))
info = " ".join(mine) + (" (%s left at exit, removed by the next process)" % " ".join(left) if left else "")
' "$T/exitgz.json" "$T/exitgz.out" "$d" "$left"
fi
exit 0
