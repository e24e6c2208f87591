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
#     (perf events); no perf descriptor is left open. Its segment is in its writer's own
#     descriptor table (agent/fdown.c), where the daemon's sweep cannot reach it: no line about
#     it. fds-shared: the same run with D9_AGENT_FDS=shared (the agent's threads in the program's
#     table, as where the kernel refuses a table of their own): the host's files intact, and one
#     line about the segment's descriptor too, since the sweep took it.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup preload-fds

mkdir -p "$T/host"
# D9_LOG=info: the writer says when the kernel refused its threads a table of their own
d9_run "$T/cf.out" "$T/cf.err" D9_TRACE_PATH="$T/trace/trace.bin" D9_CPU_PROFILE=99 \
	D9_SCHED_EVENTS=1 D9_LOG=info -- --close-fds "$T/host"
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

# SAID: the lines about the agent's descriptors; sys.argv[3]: how many about the segment's
SAID='
r = one(f[0])
err = open(f[1]).read()
n = err.count("a perf event descriptor of the agent")
if n != 1:
    fail("want one line about the perf descriptors taken, got %d: %s" % (n, err[:300]))
seg = err.count("closed or reused d9'"'"'s descriptor")
if seg != int(f[2]):
    fail("%d lines about the segment'"'"'s descriptor, want %s: %s" % (seg, f[2], err[:300]))
if "CAP_PERFMON" in err or "Too many open files" in err:
    fail("stderr: %s" % err[:300])
if r["perf_fds_after"]:
    fail("%d perf descriptors open after the workers exited" % r["perf_fds_after"])
info = " | ".join(l for l in err.splitlines() if "replaced by the program" in l or "reused d9" in l)
'
private=$(grep -c 'share the program.s descriptor table' "$T/cf.err")
d9_py fds-said-once "$SAID" "$T/cf.out" "$T/cf.err" "$private"

mkdir -p "$T/host2"
d9_run "$T/cf2.out" "$T/cf2.err" D9_TRACE_PATH="$T/trace2/trace.bin" D9_CPU_PROFILE=99 \
	D9_SCHED_EVENTS=1 D9_AGENT_FDS=shared -- --close-fds "$T/host2"
rc=$?
if [ "$rc" -ne 0 ]; then
	d9_fail fds-shared "driver exited $rc: $(head -c 300 "$T/cf2.out") $(head -c 300 "$T/cf2.err")"
else
	d9_py fds-shared "$SAID"'
if r["host_fds_bad"] or r["short_writes"]:
    fail("%d of the host'"'"'s %d descriptors are no longer its files, %d short writes"
         % (r["host_fds_bad"], r["files"], r["short_writes"]))
' "$T/cf2.out" "$T/cf2.err" 1
fi

# ---- fds-agent-tables: where the agent's threads keep their descriptors ---------------------------
# epoll-http (no threads of its own) under the agent: its descriptor table holds none of the
# trace's files, each agent thread's table holds /dev/null at 0, 1 and 2 and nothing of the
# program's (agent/fdown.c), and a line the writer says (D9_LOG=debug: "segment ...
# opened") still reaches the program's stderr, through a copy of its descriptor 2 taken for the
# line. Where the kernel refuses the threads a table of their own: SKIP.
if ! d9_own_tables; then
	d9_skip fds-agent-tables "close_range(CLOSE_RANGE_UNSHARE) is refused here (Linux 5.9 and later)"
else
	mkdir -p "$T/at"
	env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" D9_TRACE_PATH="$T/at/trace/trace.bin" \
		D9_LOG=debug D9_FLUSH_INTERVAL=20ms timeout -s KILL 60 \
		"$D9_ROOT/build/tests/epoll-http" -p 0 -P "$T/at/port" -q >"$T/at/out" 2>"$T/at/err" &
	spid=$!
	d9_wait_for 20 test -s "$T/at/port"
	port=$(cat "$T/at/port" 2>/dev/null)
	curl -s -o /dev/null "http://127.0.0.1:$port/fast"
	# the writer has its segment open once it said so
	d9_wait_for 20 grep -q 'segment .* opened' "$T/at/err"
	srv=$(pgrep -P "$spid" | head -n 1) # timeout's child: the server
	python3 - "${srv:-$spid}" "$T/at/trace" >"$T/at/fds" 2>&1 <<'PY'
import os, sys
pid, trace = sys.argv[1], os.path.realpath(sys.argv[2])
for t in sorted(os.listdir("/proc/%s/task" % pid)):
    d = "/proc/%s/task/%s" % (pid, t)
    comm = open(d + "/comm").read().strip()
    fds = {}
    for fd in os.listdir(d + "/fd"):
        try:
            fds[int(fd)] = os.readlink("%s/fd/%s" % (d, fd))
        except OSError:
            pass
    print("%s %s" % (comm, sorted(fds.items())))
PY
	curl -s -o /dev/null "http://127.0.0.1:$port/quit"
	wait "$spid"
	rc=$?
	d9_py fds-agent-tables '
trace = os.path.realpath(f[2])
rows = [l.split(" ", 1) for l in open(f[0]).read().splitlines()]
tables = {c: eval(fds) for c, fds in rows}
if int(f[3]) != 0:
    fail("epoll-http exited %s: %s" % (f[3], open(f[1]).read()[:300]))
main = tables.get("epoll-http")
writer = tables.get("d9-writer")
if main is None or writer is None:
    fail("threads seen: %s" % list(tables))
ours = [p for _, p in main if p.startswith(trace)]
if ours:
    fail("the program'"'"'s table holds the trace'"'"'s files: %s" % ours)
for c, fds in tables.items():
    if c.startswith("d9-"):
        low = dict(fds)
        if any(low.get(n) != "/dev/null" for n in (0, 1, 2)):
            fail("%s: 0, 1, 2 are %s, want /dev/null" % (c, [low.get(n) for n in (0, 1, 2)]))
        shared = [p for n, p in fds if n > 2 and (p, n) in [(q, m) for m, q in main]]
        if shared:
            fail("%s holds the program'"'"'s descriptors: %s" % (c, shared))
if not [p for _, p in writer if p.startswith(trace)]:
    fail("the writer holds no file of the trace: %s" % writer)
err = open(f[1]).read()
if "opened" not in err:
    fail("no line of the writer'"'"'s on stderr: %r" % err[:300])
info = "program: %d descriptors, none of the trace; writer: %s" % (len(main), [p for _, p in writer])
' "$T/at/fds" "$T/at/err" "$T/at/trace" "$rc"
fi
