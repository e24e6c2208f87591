#!/usr/bin/env bash
# test-preload-fds.sh: the agent touches only descriptors it owns. A daemon (d9-driver
# --close-fds) closes every descriptor from 3 to 1023 while its 4 workers are profiled (real
# perf_event_open: cpu-clock and context switches); 4 more workers start, whose perf events get
# the old numbers, and the host opens 32 files of its own, which get the rest. Then the first
# workers exit, then the second.
#   - fds-host-files: every host descriptor is still the file the host opened (fstat device and
#     inode), the agent closed none of them, and each file holds exactly the host's two lines.
#     The writer's segment descriptor is taken too: the writer goes on in a new segment instead
#     of writing trace chunks into the host's file.
#   - fds-other-events: the first workers' exit left the second workers' perf descriptors open,
#     though they have the numbers the first ones had (same anonymous inode: only the event id
#     tells them apart; checking the inode alone closed 7 of the 8).
#   - fds-said-once: the agent noticed that its descriptors were taken and said so in one line
#     (perf events) and one line (the segment); no perf descriptor is left open.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup preload-fds

mkdir -p "$T/host"
d9_run "$T/cf.out" "$T/cf.err" D9_TRACE_PATH="$T/trace/trace.bin" D9_CPU_PROFILE=99 \
	D9_SCHED_EVENTS=1 -- --close-fds "$T/host"
rc=$?
if [ "$rc" -ne 0 ]; then
	d9_fail fds-host-files "driver exited $rc: $(head -c 300 "$T/cf.out") $(head -c 300 "$T/cf.err")"
	exit 0
fi
if grep -q '"perf_fds_before":0,' "$T/cf.out"; then
	d9_skip fds-host-files "no perf event could be opened here: $(head -c 200 "$T/cf.err")"
	exit 0
fi
d9_py fds-host-files '
r = one(f[0])
if r["host_fds_bad"] or r["short_writes"]:
    fail("%d of the host'"'"'s %d descriptors are no longer its files, %d short writes"
         % (r["host_fds_bad"], r["files"], r["short_writes"]))
bad = []
for k in range(r["files"]):
    got = open(os.path.join(f[1], "host.%d" % k), "rb").read()
    want = ("host %d open\nhost %d close\n" % (k, k)).encode()
    if got != want:
        bad.append("host.%d: %r" % (k, got[:80]))
if bad:
    fail("files with bytes the host did not write: %s" % bad[:3])
info = ("%d host files on fds %d..%d intact (the agent had %d perf descriptors before the close)"
        % (r["files"], r["first_fd"], r["last_fd"], r["perf_fds_before"]))
' "$T/cf.out" "$T/host"

d9_py fds-other-events '
r = one(f[0])
if r["perf_fds_second_set"] != r["perf_fds_before"]:
    fail("%d perf descriptors open while the second workers ran alone, want %d as before"
         % (r["perf_fds_second_set"], r["perf_fds_before"]))
info = "%d perf descriptors of the second workers survived the first ones'"'"' exit" % r["perf_fds_second_set"]
' "$T/cf.out"

d9_py fds-said-once '
r = one(f[0])
err = open(f[1]).read()
n = err.count("a perf event descriptor of the agent")
if n != 1:
    fail("want one line about the perf descriptors taken, got %d: %s" % (n, err[:300]))
if err.count("closed or reused d9'"'"'s descriptor") != 1:
    fail("want one line about the segment'"'"'s descriptor: %s" % err[:300])
if "CAP_PERFMON" in err or "Too many open files" in err:
    fail("stderr: %s" % err[:300])
if r["perf_fds_after"]:
    fail("%d perf descriptors open after the workers exited" % r["perf_fds_after"])
info = " | ".join(l for l in err.splitlines() if "replaced by the program" in l)
' "$T/cf.out" "$T/cf.err"
