#!/usr/bin/env bash
# test-preload-seccomp.sh: a program that installs a seccomp filter while the agent runs, as
# Debian's chronyd does with its package's default `-F 1` (libseccomp's seccomp_load on its main
# thread after its start; under the agent it was killed by SIGSYS at once: the agent's gettid
# when its main loop's first select made the thread a worker). seccomp-prog.c waits 10 times,
# installs a filter that kills the process at any call it does not list (none of the agent's:
# gettid, getpid, openat, pread64...), waits 10 times more, starts a thread and forks a child
# that wait 10 times each, and exits with exit(0). For each way of installing it:
#   - seccomp-thread (seccomp(2) on the calling thread), seccomp-prctl (prctl(PR_SET_SECCOMP)):
#     the program ends as without the agent (exit 0, "done"); the agent said once that it
#     records nothing more on that thread, and so does the trace (a `threads` limited recorder
#     state: the program holds until it is there); the trace holds the 10 Parks before the
#     filter and nothing after it (the thread, the one it started, the forked child: no segment);
#   - seccomp-tsync (SECCOMP_FILTER_FLAG_TSYNC: every thread's, the agent's too): the same end;
#     tracing stopped before the call (said once, `threads` off), the 10 Parks in a sealed
#     segment;
#   - seccomp-fsize: as seccomp-thread, with RLIMIT_FSIZE 0 set first (OpenSSH's sandbox): the
#     agent's line about the filter goes to a stderr that is a file, where the write fails
#     (EFBIG) and must not raise SIGXFSZ, which ended the program: exit 0, nothing said (the
#     trace is not checked: the agent's writer cannot write past the limit either);
#   - seccomp-parked: TSYNC while another thread waits in poll: that thread's Unpark, after
#     the filter, made its schedstat reading (pread64), which the filter kills at: exit 0 now;
#   - seccomp-exec: the thread's filter, then exec of /bin/true: the new image's agent made
#     calls at its load (getpid), killed there: now it makes none (D9__NO_CALLS in the
#     environment it gets), and /bin/true exits 0;
#   - seccomp-spawn: the same with posix_spawn (the child's agent read no marker before);
#   - seccomp-timer: the thread's filter, then timer_create(SIGEV_THREAD): the C library starts
#     the notification thread itself (no pthread_create through the PLT), with the filter; its
#     first wait registered it (prctl, which the filter kills at): now it is marked first;
#   - seccomp-failed (a filter the kernel refuses, EINVAL, then libseccomp's probe with no
#     program, EFAULT): no filter, so everything is recorded: 20 Parks of the main thread, 10 of
#     its thread, 10 of the child in a segment of its own; the refusal said.
# Skips (counted, with the reason) when the program cannot install its filter without the agent
# (a kernel without seccomp filters, a container that refuses them).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=seccomp
pl_need_built "$NAME"
pl_env "$NAME"
MODES="thread prctl tsync failed fsize parked exec spawn timer"

if ! cc -O2 -pthread -o "$T/seccomp-prog" "$PL_ROOT/tests/integration/seccomp-prog.c" 2>"$T/cc.err"; then
	for m in $MODES; do pl_fail "$NAME-$m" "cannot build seccomp-prog.c: $(head -c 300 "$T/cc.err")"; done
	exit 0
fi
for m in $MODES; do
	# the program's own lines through a pipe (fsize: a file past RLIMIT_FSIZE would end it)
	timeout -s KILL 60 "$T/seccomp-prog" "$m" </dev/null 2>&1 | cat >"$T/$m.base"
	rc=${PIPESTATUS[0]}
	if [ "$rc" != 0 ]; then
		pl_skip "$NAME-$m" "the program cannot run its filter here without the agent (exit status $rc: $(head -c 200 "$T/$m.base"))"
		continue
	fi
	mkdir -m 0700 "$T/trace-$m"
	# thread and prctl: the program holds (its stdin open) until the trace says that the thread
	# records nothing more (the writer appends that at its next pass, 50 ms; the program's own
	# exit would cut it short), 30 s at most
	mkfifo "$T/$m.in"
	timeout -s KILL 60 env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace-$m" D9_FLUSH_INTERVAL=50ms \
		"$T/seccomp-prog" "$m" hold <"$T/$m.in" > >(cat >"$T/$m.out") 2>"$T/$m.err" &
	ppid=$!
	exec 3>"$T/$m.in"
	if [ "$m" = thread ] || [ "$m" = prctl ]; then
		said() { "$PL_ANALYZE" summary "$T/trace-$m" 2>/dev/null | grep -q 'recorder: a thread under a seccomp filter'; }
		d9_wait_for 30 said || true # checked below
	fi
	exec 3>&-
	wait "$ppid"
	rc=$?
	# nothing of the agent's runs once the program has exited: no compression goes on (a segment
	# a thread under a filter ended with stays .active; d9-analyze reads it as it is)
	"$PL_ANALYZE" jsonl "$T/trace-$m" >"$T/$m.jsonl" 2>"$T/$m.aerr"
	"$PL_ANALYZE" summary --json "$T/trace-$m" >"$T/$m.json" 2>>"$T/$m.aerr"
	python3 - "$NAME-$m" "$m" "$rc" "$T/$m.out" "$T/$m.err" "$T/$m.jsonl" "$T/trace-$m" "$T/$m.json" <<'PY'
import collections, json, os, sys
name, mode, rc, out, err, jl, d, js = sys.argv[1:]
def check():
    if rc != "0" or open(out).read() != "before\nafter\ndone\n":
        return "exit status %s (without the agent 0), printed %r; stderr %s" % (
            rc, open(out).read()[:80], open(err).read()[:300])
    said = [l for l in open(err).read().splitlines() if l.startswith("d9[")]
    # fsize: stderr is a file past RLIMIT_FSIZE 0: the line is not written (EFBIG), and the
    # write must not end the program (SIGXFSZ)
    want = {"thread": ["records nothing more on it"], "prctl": ["records nothing more on it"],
            "fsize": [], "parked": ["tracing stops here"], "exec": ["records nothing more on it"],
            "timer": ["records nothing more on it"], "spawn": ["records nothing more on it"],
            "tsync": ["tracing stops here"],
            "failed": ["records nothing more on it", "was not installed (Invalid argument)"]}[mode]
    if len(said) != len(want) or any(w not in l for w, l in zip(want, said)):
        return "the agent said %s, want lines with %s" % (said, want)
    rec = {"thread": [("threads", "limited")], "prctl": [("threads", "limited")],
           "fsize": None, "parked": [("threads", "off")], "exec": None, "spawn": None, "timer": None,
           "tsync": [("threads", "off")], "failed": []}[mode]
    s = json.load(open(js)) if os.path.getsize(js) else {"processes": []}
    got = [(r["feature"], r["state"]) for p in s["processes"] for r in p.get("recorder") or []]
    if mode in ("fsize", "exec", "spawn"):
        # fsize: the writer cannot write past RLIMIT_FSIZE either (events dropped); exec: the
        # new image (/bin/true) leaves nothing
        return None
    if rec is not None and got != rec: # (timer: it exits before the writer's next pass)
        return "recorder states %s in the trace, want %s" % (got, rec)
    ev = [json.loads(l) for l in open(jl)] if os.path.getsize(jl) else []
    parks = collections.Counter((e["pid"], e["tid"]) for e in ev if e.get("type") == "Park")
    pids = sorted(set(p for p, _ in parks))
    if not pids:
        return "no Park in the trace (%s)" % os.listdir(d)
    # the program itself: the most Parks (its forked child's pid may be lower: pids wrap)
    main = max(pids, key=lambda p: sum(n for (q, _), n in parks.items() if q == p))
    got = sorted(parks.values(), reverse=True)
    if mode == "failed":
        if len(pids) != 2 or parks[(main, main)] != 20 or sorted(parks.values()) != [10, 10, 20]:
            return "Parks %s, want 20 of the main thread, 10 of its thread, 10 of the child" % dict(parks)
    elif mode == "parked":
        # the second thread's wait began before the filter: its Park, and no Unpark after
        if sorted(parks.values()) != [1, 10] or parks[(main, main)] != 10:
            return "Parks %s, want the main thread's 10 and the parked thread's 1" % dict(parks)
    else:
        if dict(parks) != {(main, main): 10}:
            return "Parks %s, want the 10 of the main thread before the filter alone" % dict(parks)
        segs = [f for f in os.listdir(d) if f.startswith("trace.") and f != "trace.lock"]
        if any(not f.startswith("trace.%d." % main) for f in segs):
            return "segments of another process (the child has the filter): %s" % segs
        if mode == "tsync" and not any(f.endswith((".bin", ".bin.gz")) for f in segs):
            return "the stop before the call sealed nothing: %s" % segs
    return None
why = check()
print("FAIL %s: %s" % (name, why) if why else "PASS %s: exit 0 as without the agent; %s" % (
    name, "everything recorded" if mode == "failed" else "the 10 Parks before the filter, nothing after"))
PY
done
