#!/usr/bin/env bash
# test-preload-nbfd.sh: which reads the blocking-call wrapper times (preload/libc-fds.c). Runs
# build/tests/nbfd (tests/servers/nbfd.c) with D9_BLOCKING_THRESHOLD=10us, its minimum:
#   - nbfd-nonblocking: 20 reads of 1 MiB from a non-blocking pipe, tens of microseconds each,
#     are not timed: no BlockingCall or SchedDelay between the phase's first read and its last;
#   - nbfd-control: the same reads from a blocking pipe are (a SchedDelay or a BlockingCall each
#     time one passes 10 us): at least one event, so the check above can fail;
#   - nbfd-must-time: seven reads that wait 30 ms, each on a number the agent once knew as a
#     non-blocking socket or whose mode changed behind it (a blocking socketpair; O_NONBLOCK
#     cleared by fcntl; FIONBIO set then cleared; closed and reused by pipe(); a blocking pipe
#     dup2'ed onto it; closed by syscall(SYS_close) and reused by syscall(SYS_pipe2); made
#     blocking through a dup): each is exactly one "read" BlockingCall of 29 ms or more inside its
#     read, as the program measured it.
#   - nbfd-stacks, nbfd-stacks-requests: in `d9-analyze flame --blocking`, the frame under each
#     read or write BlockingCall is nbfd's own (wait_read or big_reads, with its source line),
#     none of the agent's (the wrappers' timed paths are functions of their own), seven of them in
#     wait_read; the same with D9_REQUESTS=1, where the wrappers take their slow path.
# SKIP: a pipe cannot be given 1 MiB (fs.pipe-max-size, unprivileged).
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-nbfd

NB=$PL_ROOT/build/tests/nbfd
if [ ! -x "$NB" ]; then
	pl_fail preload-nbfd "$NB is not built (make all)"
	exit 0
fi

read -r -d '' CHECKS <<'PYEOF'
truth = load_json(args[0])
spans = truth["spans"]
evs = [e for e in tr.events(("BlockingCall", "SchedDelay"))]

def inside(e, span, slack=0):
    return span[0] - slack <= e["mono_ns"] <= span[1]

with case("nbfd-decode"):
    require(check_decodes_clean(tr) + check_ids_defined(tr))

with case("nbfd-nonblocking") as c:
    got = [e for e in evs if inside(e, spans[0])]
    if got:
        fail("%d events during the reads from a non-blocking pipe: %s" % (len(got),
             ["%s %s" % (e["type"], ms(e["duration_ns"])) for e in got[:5]]))
    c.info = "20 reads of 1 MiB from a non-blocking pipe, not timed"

with case("nbfd-control") as c:
    got = [e for e in evs if inside(e, spans[1])]
    if not got:
        fail("no event during the reads from a blocking pipe at a 10 us threshold: the check above cannot fail")
    c.info = "%d events past 10 us during the 20 reads from a blocking pipe and the writes between them (%s)" % (len(got),
             ", ".join(sorted(set(e["type"] for e in got))))

with case("nbfd-must-time") as c:
    names = ("blocking socketpair", "fcntl cleared O_NONBLOCK", "FIONBIO on then off",
             "reused by pipe()", "dup2 onto it", "SYS_close, reused by SYS_pipe2",
             "made blocking through a dup")
    errs = []
    for i, name in enumerate(names):
        span = spans[2 + i]
        want = truth["waits_ns"][i]
        got = [e for e in evs if e["type"] == "BlockingCall" and inside(e, span, 1000000)
               and e["_seg"].string(e["call"]) == "read"]
        if len(got) != 1:
            errs.append("%s: %d read BlockingCalls, want 1" % (name, len(got)))
        elif not (29e6 <= got[0]["duration_ns"] and abs(got[0]["duration_ns"] - want) <= want / 10 + 1e6):
            errs.append("%s: %s in the trace, %s by the program" % (name, ms(got[0]["duration_ns"]), ms(want)))
    require(errs)
    c.info = "7 waits of 30 ms, each one read BlockingCall"
PYEOF

SDIR=$T/run
mkdir -p "$SDIR/trace"
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$SDIR/trace/trace.bin" D9_BLOCKING_THRESHOLD=10us \
	"${PL_NICE[@]}" timeout -s KILL 60 "$NB" >"$SDIR/truth.json" 2>"$SDIR/stderr"
rc=$?
if [ "$rc" -eq 77 ]; then
	pl_skip preload-nbfd "a pipe cannot hold 1 MiB here (fs.pipe-max-size $(cat /proc/sys/fs/pipe-max-size 2>/dev/null), not root)"
	exit 0
fi
if [ "$rc" -ne 0 ] || ! grep -q '"spans"' "$SDIR/truth.json"; then
	pl_fail preload-nbfd "nbfd exited $rc: $(head -c 300 "$SDIR/stderr")"
	exit 0
fi
pl_check preload-nbfd "$CHECKS" "$SDIR/truth.json"

# stacks_ok DIR: the frame under each read/write BlockingCall leaf is nbfd's own
stacks_ok() {
	local out
	out=$("$PL_ANALYZE" flame --blocking "$1" 2>&1)
	if ! python3 - "$out" <<'PYEOF'
import re, sys
lines = [l for l in sys.argv[1].splitlines() if re.search(r";(read|write) \d+$", l)]
bad = [l for l in lines if not re.search(r"(^|;)(wait_read|big_reads) \(nbfd\.c:\d+\);(read|write) \d+$", l)]
waits = [l for l in lines if re.search(r"(^|;)wait_read \(nbfd\.c:\d+\);read \d+$", l)]
if bad or len(waits) < 7:
    print("%d stacks with another frame under the call (%s), %d reads under wait_read (want 7)"
          % (len(bad), " | ".join(l[-120:] for l in bad[:2]), len(waits)))
    sys.exit(1)
print("%d read/write stacks, each with nbfd's own frame under the call" % len(lines))
PYEOF
	then
		return 1
	fi
}
if msg=$(stacks_ok "$SDIR/trace"); then
	pl_pass nbfd-stacks "$msg"
else
	pl_fail nbfd-stacks "$msg"
fi
RDIR=$T/requests
mkdir -p "$RDIR/trace"
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$RDIR/trace/trace.bin" D9_BLOCKING_THRESHOLD=10us D9_REQUESTS=1 \
	"${PL_NICE[@]}" timeout -s KILL 60 "$NB" >"$RDIR/truth.json" 2>"$RDIR/stderr"
rc=$?
if [ "$rc" -ne 0 ]; then
	pl_fail nbfd-stacks-requests "nbfd exited $rc with D9_REQUESTS=1: $(head -c 300 "$RDIR/stderr")"
elif msg=$(stacks_ok "$RDIR/trace"); then
	pl_pass nbfd-stacks-requests "$msg (D9_REQUESTS=1)"
else
	pl_fail nbfd-stacks-requests "$msg (D9_REQUESTS=1)"
fi
