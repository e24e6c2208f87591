#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-agent-diskfull.sh: a full disk, on a 2 MiB tmpfs. Writing stops without crashing or
# blocking the program (exit status 0); the events of chunks that could not be written are
# counted and recorded as Dropped(write_error) once writes succeed again, so the accounting stays
# exact; one stderr line per problem. Needs root to mount the tmpfs: SKIP otherwise.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-diskfull

# fresh_disk NAME FREE_KIB: a new 2 MiB tmpfs at $T/NAME whose filler leaves FREE_KIB free
# (0: completely full). Sets $disk.
fresh_disk() {
	disk=$T/$1
	d9_mount_tmpfs "$disk" 2m || return 1
	if [ "$2" -eq 0 ]; then
		cat /dev/zero >"$disk/filler" 2>/dev/null
	else
		head -c $((2048 * 1024 - $2 * 1024)) /dev/zero >"$disk/filler"
	fi
	return 0
}

if ! fresh_disk probe 0; then
	d9_skip disk-full "cannot mount a tmpfs: $D9_MOUNT_ERR"
	exit 0
fi

# ---- the disk fills mid-run, then space returns --------------------------------------------------
# ~250 KiB free, ~900 KB of events over ~1.5 s: writes fail part way; when the agent says so on
# stderr the test deletes the filler, and the rest of the run is written with the drop counts.
fresh_disk refill 250
d9_bg pid "$T/refill.out" "$T/refill.err" D9_TRACE_PATH="$disk/t/trace.bin" D9_COMPRESS=0 \
	D9_MAX_FILE_SIZE=1M -- -t 2 -n 150000 --park-every 500 --sleep-us 5000
if d9_wait_for 30 grep -qs 'cannot write' "$T/refill.err"; then
	rm -f "$disk/filler"
	hit=1
else
	hit=0
fi
d9_wait_pid "$pid" 40
rc=$D9_RC
d9_check "$T/refill.json" --expect-n 150000 --park-every 500 --driver "$T/refill.out" "$disk/t"
if [ "$hit" -eq 0 ]; then
	d9_fail disk-full-then-space "the agent never reported a failed write (status $rc): $(head -c 300 "$T/refill.err")"
elif [ "$rc" -ne 0 ]; then
	d9_fail disk-full-then-space "exit status $rc: $(head -c 300 "$T/refill.err")"
else
	d9_py disk-full-then-space '
c = one(f[0]); drv = parent(f[1])
ev, dr = accounting(c, drv)
we = c["drop_reasons"].get("write_error", 0)
if not we:
    fail("no Dropped(write_error) record although writes failed: %s" % c["drop_reasons"])
if c["corrupt_chunks"] or c["truncated"]:
    fail("%d corrupt chunks, %d truncated segments" % (c["corrupt_chunks"], c["truncated"]))
info = "%d events written, %d dropped (write_error %d), all accounted" % (ev, dr, we)
' "$T/refill.json" "$T/refill.out"
	lines=$(grep -c . "$T/refill.err")
	if grep -q 'cannot write' "$T/refill.err" && [ "$(grep -c 'cannot write' "$T/refill.err")" -eq 1 ] && [ "$lines" -le 2 ]; then
		d9_pass disk-full-one-line "$(tr '\n' '|' <"$T/refill.err")"
	else
		d9_fail disk-full-one-line "$lines stderr lines: $(head -n 4 "$T/refill.err" | tr '\n' '|')"
	fi
fi

# ---- the disk stays full ----------------------------------------------------------------------------------
# 100 KiB free for ~2.5 MB of events: the program must still end normally and promptly, say it
# once, and leave segments that decode (cut at chunk boundaries, never a corrupt chunk).
fresh_disk stuck 100
d9_run "$T/stuck.out" "$T/stuck.err" D9_TRACE_PATH="$disk/t/trace.bin" D9_MAX_FILE_SIZE=1M -- \
	-t 2 -n 500000 --park-every 1000 --sleep-us 100
rc=$?
d9_check "$T/stuck.json" --park-every 1000 "$disk/t"
if [ "$rc" -ne 0 ]; then
	d9_fail disk-stays-full "exit status $rc: $(head -c 300 "$T/stuck.err")"
else
	d9_py disk-stays-full '
c = one(f[0])
if c["corrupt_chunks"] or c["unreadable"]:
    fail("%d corrupt chunks, %d unreadable: %s" % (c["corrupt_chunks"], c["unreadable"], c["error_list"][:2]))
tids = [s for p in c["pids"].values() for s in p["tids"].values()]
if any(s["out_of_order"] for s in tids):
    fail("seqs out of order")
info = "%d files, %d events kept" % (c["files"], c["events"])
' "$T/stuck.json"
	# one line for the problem; a small write between two failures may succeed once ("writing
	# again"), and D9_COMPRESS is on, so the compressor may say once that it cannot compress
	n=$(grep -c 'cannot write' "$T/stuck.err")
	again=$(grep -c 'writing again' "$T/stuck.err")
	comp=$(grep -c 'cannot compress' "$T/stuck.err")
	all=$(grep -c . "$T/stuck.err")
	if [ "$n" -eq 1 ] && [ "$again" -le 1 ] && [ "$comp" -le 1 ] && [ "$all" -eq $((n + again + comp)) ]; then
		d9_pass disk-stays-full-one-line "$all lines"
	else
		d9_fail disk-stays-full-one-line "$n 'cannot write', $again 'writing again', $comp 'cannot compress' of $all lines: $(head -n 4 "$T/stuck.err" | tr '\n' '|')"
	fi
fi

# ---- chunks that carry buffers_full drops fail to write ---------------------------------------------
# The disk is full from the start and 1 MiB of buffers with a starved writer drops events too, so
# some of the chunks that fail to write open with a Dropped(buffers_full) record. The write-error
# count recorded later must count the events those chunks stood for (including the ones their
# Dropped record counted), not the records they held. Threads sleep before their last event so
# that every buffers_full count is recorded in a chunk (not left pending at thread exit).
# The program then waits for SIGTERM (its own handler): the test frees the disk first. No
# buffers_full drop where the driver could not starve the writer (pin_error) is a SKIP.
fresh_disk mixed 0
d9_bg pid "$T/mixed.out" "$T/mixed.err" D9_TRACE_PATH="$disk/t/trace.bin" D9_COMPRESS=0 \
	D9_MAX_MEMORY=1M -- -t 4 -n 300000 --burst --slow-writer --settle-ms 300 --term-handler
if d9_wait_for 30 grep -qs '"role":"parent"' "$T/mixed.out"; then
	# the writer has failed a write and worked off its queue (every thread asleep: it waits
	# for more) before the disk is freed
	d9_wait_for 30 grep -qs 'cannot write' "$T/mixed.err"
	d9_wait_for 30 d9_all_asleep "$pid"
	rm -f "$disk/filler"
	kill -TERM "$pid"
	d9_wait_pid "$pid" 30
	rc=$D9_RC
	d9_check "$T/mixed.json" --expect-n 300000 --driver "$T/mixed.out" "$disk/t"
	if [ "$rc" -ne 0 ]; then
		d9_fail disk-full-with-buffer-drops "exit status $rc: $(head -c 300 "$T/mixed.err")"
	else
		d9_py disk-full-with-buffer-drops '
c = one(f[0]); drv = parent(f[1])
ev, dr = accounting(c, drv)
if not c["drop_reasons"].get("buffers_full") and drv.get("pin_error"):
    skip("no buffers_full drop, and the writer was not starved: %s" % drv["pin_error"])
if not dr:
    fail("pid %s: no event was dropped, so this run did not test drop accounting" % drv["pid"])
if not c["drop_reasons"].get("write_error"):
    fail("no write_error drops: %s" % c["drop_reasons"])
info = "%d dropped: %s" % (dr, c["drop_reasons"])
' "$T/mixed.json" "$T/mixed.out"
	fi
else
	d9_fail disk-full-with-buffer-drops "the driver did not finish recording: $(head -c 300 "$T/mixed.err")"
	d9_kill "$pid"
fi

# ---- fork while writes are failing ------------------------------------------------------------------
# The parent's writer holds write-error counts of its own threads when the program forks; the
# child's series must not record the parent's threads, and both series must account exactly.
fresh_disk fork 0
d9_bg pid "$T/fork.out" "$T/fork.err" D9_TRACE_PATH="$disk/t/trace.bin" D9_COMPRESS=0 -- \
	-t 2 -n 100000 --park-every 500 --sleep-us 5000 --fork
if d9_wait_for 30 grep -qs '"forked"' "$T/fork.out"; then
	rm -f "$disk/filler"
	d9_wait_pid "$pid" 60
	rc=$D9_RC
	d9_check "$T/fork.json" --expect-n 100000 --park-every 500 --driver "$T/fork.out" "$disk/t"
	if [ "$rc" -ne 0 ]; then
		d9_fail disk-full-fork "exit status $rc: $(head -c 300 "$T/fork.err")"
	else
		d9_py disk-full-fork '
c = one(f[0]); drv = parent(f[1]); kids = children(f[1])
if len(kids) != 1 or drv["children"][0]["code"] != 0:
    fail("child: %s" % drv["children"])
if str(kids[0]["pid"]) in c["pids"]:
    child_tids = set(c["pids"][str(kids[0]["pid"])]["tids"])
    parent_tids = set(str(t["tid"]) for t in drv["threads"])
    if child_tids & parent_tids:
        fail("the child series records the parent threads %s (their write-error drops)" % sorted(child_tids & parent_tids))
accounting(c, drv)
accounting(c, kids[0])
' "$T/fork.json" "$T/fork.out"
	fi
else
	d9_fail disk-full-fork "the driver did not fork: $(head -c 300 "$T/fork.err")"
	d9_kill "$pid"
fi
# ---- blocks taken ahead are given back at the seal -----------------------------------------------
# The writer allocates a segment's blocks ahead of its end (fallocate KEEP_SIZE: one call per
# step, not per chunk; the step grows with the segment from 64 KiB to 1 MiB); the seal truncates
# the file to its size, which frees them, so a sealed segment holds no more blocks than its bytes
# (the disk budget counts sizes). On an 8 MiB tmpfs with room: while the run records, its
# .active segment has blocks past its end (the run then waits, parked, until the test has seen
# them: a run that ended first would leave nothing to see); after SIGTERM's seal, no .bin has.
blocks_ahead() { # DIR: 0 when an .active file there holds >= 64 KiB of blocks past its size
	local f
	for f in "$1"/*.active; do
		[ -f "$f" ] || continue
		set -- $(stat -c '%s %b %B' "$f")
		[ $(($2 * $3)) -ge $(($1 + 64 * 1024)) ] && return 0
	done
	return 1
}
if ! d9_mount_tmpfs "$T/ahead" 8m; then
	d9_skip prealloc-given-back "cannot mount a tmpfs: $D9_MOUNT_ERR"
else
	d9_bg pid "$T/ahead.out" "$T/ahead.err" D9_TRACE_PATH="$T/ahead/t/trace.bin" D9_COMPRESS=0 \
		-- -t 1 -n 4000 --park-every 20 --sleep-us 2000 --exit hang
	d9_wait_for 30 blocks_ahead "$T/ahead/t"
	ahead=$?
	kill -TERM "$pid" 2>/dev/null
	d9_wait_pid "$pid" 60
	rc=$D9_RC
	[ "$rc" = 143 ] && rc=0 # SIGTERM, sealed by the agent's handler
	over="" nbin=0
	for f in "$T"/ahead/t/*.bin; do
		[ -f "$f" ] || continue
		nbin=$((nbin + 1))
		read -r size nb bs < <(stat -c '%s %b %B' "$f")
		[ $((nb * bs)) -gt $((size + 65536)) ] && over="$over $(basename "$f"): $size bytes in $((nb * bs))"
	done
	if [ "$rc" -ne 0 ] || [ "$nbin" -eq 0 ]; then
		d9_fail prealloc-given-back "exit status $rc, $nbin sealed segments: $(head -c 300 "$T/ahead.err")"
	elif [ "$ahead" -ne 0 ]; then
		d9_fail prealloc-given-back "no .active segment held blocks past its end while recording"
	elif [ -n "$over" ]; then
		d9_fail prealloc-given-back "sealed segments hold blocks past their end:$over"
	else
		d9_pass prealloc-given-back "blocks taken ahead while recording; $nbin sealed segments hold none past their end"
	fi
fi
exit 0
