#!/usr/bin/env bash
# test-preload-regress.sh: regression tests for bugs a review found in agent/ and preload/
# (each was reproduced before its fix):
#  - an event refused by the encoder because the writer cleared enc.end after the room check was
#    lost without a Dropped count (D9_FLUSH_INTERVAL=1ms makes the writer ask often);
#  - a leftover file that cannot be recovered made the writer retry it forever;
#  - SIGTERM with a long flush interval could not wake the writer: nothing was sealed;
#  - a cond signal after an interrupt named the wrong woken coroutine;
#  - a cond signal skips a waiter ST has timed out and wakes one whose timeout passed with no
#    refresh of ST's cached clock, as ST does (the adapter keeps a wait's timeout on that clock);
#    the event clock's deadline named the wrong coroutine in the second case;
#  - ST mutexes: a hand-off is a Wake of kind mutex by the unlocker; an unlock by a coroutine
#    that does not hold the mutex (EPERM) names no one; a free mutex makes no Wake and answers as
#    without the agent, and so does a lock with an interrupt pending (EINTR);
#  - a coroutine the ST adapter's table could not hold (no memory) had its first run recorded and
#    none after: now it is not recorded at all and counts as one dropped event.
set -u
cd "$(dirname "$0")/../.."
T=$(mktemp -d "${TMPDIR:-/tmp}/d9-regress-XXXXXX")
trap 'rm -rf "$T"' EXIT
export D9_ROTATION_PERIOD=0 # no wall-clock seal in the middle of a test
drv=build/tests/d9-driver
# shellcheck source=lib.sh
. tests/integration/lib.sh # d9_wait_for, d9_all_asleep
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# ---- no uncounted loss when the writer asks for chunks all the time
D9_TRACE_PATH="$T/a/trace.bin" D9_FLUSH_INTERVAL=1ms "$drv" -t 2 -n 2000000 --sleep-every 200 \
	--sleep-us 1 >"$T/a.out" 2>"$T/a.err"
if build/tests/d9-check --expect-n 2000000 --driver "$T/a.out" "$T/a" >"$T/a.json" 2>&1; then
	pass flush-request-race-counted
else
	fail flush-request-race-counted "$(head -c 400 "$T/a.json")"
fi

# ---- a damaged leftover is set aside once, and the process exits promptly
mkdir -p "$T/b"
echo garbage >"$T/b/trace.3999999.000000.active"
start=$(date +%s%N)
D9_TRACE_PATH="$T/b/trace.bin" "$drv" -t 1 -n 1000 >/dev/null 2>"$T/b.err"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
lines=$(grep -c . "$T/b.err")
# promptly: a writer retrying forever would hold the exit for its 5 s wait and then say so on a
# second stderr line (the line count decides, not the time, which a loaded machine stretches)
if [ -f "$T/b/trace.3999999.000000.damaged" ] && [ "$lines" -le 1 ]; then
	pass damaged-leftover-set-aside
else
	fail damaged-leftover-set-aside "files: $(ls "$T/b" | tr '\n' ' '), $lines stderr lines, ${ms} ms"
fi

# ---- SIGTERM seals promptly even with a 30 s flush interval
D9_TRACE_PATH="$T/c/trace.bin" D9_FLUSH_INTERVAL=30s "$drv" -t 1 -n 1000 --park-every 100 \
	--exit hang >"$T/c.out" 2>"$T/c.err" &
pid=$!
# recording done and every thread waiting (the writer in its 30 s wait): SIGTERM must wake it
d9_wait_for 30 grep -qs '"role":"parent"' "$T/c.out"
d9_wait_for 30 d9_all_asleep "$pid"
start=$(date +%s%N)
kill -TERM "$pid"
wait "$pid"
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
# well under the 30 s flush interval the writer would otherwise sleep through (not a timing
# claim: a loaded machine may take a few seconds)
if [ "$rc" -eq 143 ] && compgen -G "$T/c/*.bin*" >/dev/null && [ "$ms" -lt 15000 ]; then
	pass sigterm-long-flush-interval
else
	fail sigterm-long-flush-interval "exit $rc after ${ms} ms, files: $(ls "$T/c" 2>/dev/null | tr '\n' ' ')"
fi

# ---- ST: the cond signal after an interrupt wakes B, named as such
if cc -O1 -o "$T/condq" tests/integration/st-cond-interrupt.c -lst 2>"$T/cc.err"; then
	D9_TRACE_PATH="$T/d/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" "$T/condq" 2>/dev/null
	build/d9-analyze dump "$T/d" >"$T/d.jsonl" 2>/dev/null
	python3 - "$T/d.jsonl" <<'PY'
import json, sys
spawns, wakes = [], []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("rec") != "event": continue
    if r["type"] == "Spawn": spawns.append(r)
    if r["type"] == "Wake": wakes.append(r)
main = [s["coroutine"] for s in spawns if s["parent"] == 0][0]
a, b = [s["coroutine"] for s in spawns if s["parent"] == main][:2]
cond = [(w["woken"], w["waker"]) for w in wakes if w["kind"] == 3]
intr = [(w["woken"], w["waker"]) for w in wakes if w["kind"] == 6]
if cond == [(b, main)] and intr == [(a, main)]:
    print("PASS st-cond-signal-skips-interrupted")
else:
    print("FAIL st-cond-signal-skips-interrupted: cond wakes %s, interrupt wakes %s (A=%d B=%d main=%d)" % (cond, intr, a, b, main))
PY
else
	fail st-cond-signal-skips-interrupted "cannot build: $(head -c 200 "$T/cc.err")"
fi

# ---- ST: a cond signal and waiters whose timeouts fell due, as ST decides (st-cond-timeout.c):
# skip: C's signal skips A (timed out, not yet run) and wakes B; wake: the signal wakes A, whose
# 200 ms passed with no refresh of ST's clock; zero: a timeout of 0 not yet refreshed, A woken;
# intr: an interrupt of A, which ST has timed out, is not A's wake.
# The trace is checked against what ST did (the program says; a held-back machine may change it).
if cc -O1 -o "$T/condt" tests/integration/st-cond-timeout.c -lst 2>"$T/cc.err"; then
	for mode in skip wake zero intr; do
		name=st-cond-timeout-$mode
		st_did=$(D9_TRACE_PATH="$T/t-$mode/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" \
			"$T/condt" "$mode" 2>"$T/t-$mode.err")
		rc=$?
		if [ "$rc" -ne 0 ] || ! [[ "$st_did" =~ ^A=(0,0|-1,[0-9]+)\ B=(0|9)$ ]]; then
			fail "$name" "the program under the agent: exit $rc, said '$st_did' ($(head -c 200 "$T/t-$mode.err"))"
			continue
		fi
		if ! build/d9-analyze dump "$T/t-$mode" >"$T/t-$mode.jsonl" 2>"$T/t-$mode.aerr"; then
			fail "$name" "d9-analyze dump: $(head -c 200 "$T/t-$mode.aerr")"
			continue
		fi
		python3 - "$T/t-$mode.jsonl" "$mode" "$st_did" <<'PY'
import json, sys
path, mode, did = sys.argv[1:]
spawns, wakes, clock = [], [], []
for line in open(path):
    r = json.loads(line)
    if r.get("rec") != "event": continue
    clock.append((r["time"], r["mono_ns"]))
    if r["type"] == "Spawn": spawns.append(r)
    if r["type"] == "Wake" and r["kind"] != 7: wakes.append(r)  # 7: spawn
main = [s["coroutine"] for s in spawns if s["parent"] == 0][0]
kids = [s["coroutine"] for s in spawns if s["parent"] == main]
a = kids[0]
b = kids[1] if mode != "intr" else None
c = kids[2] if mode in ("skip", "zero") else None
signaller = main if mode == "wake" else c
a_signalled = did.startswith("A=0,")
got = sorted((w["woken"], w["waker"], w["kind"]) for w in wakes if w["woken"] in kids)
TIMER, COND = 2, 3
if mode == "intr":
    if did != "A=-1,4 B=9":
        # A ran before the interrupt (the machine held the program back past its timeout
        # before ST's first refresh): the case was not made
        print("SKIP st-cond-timeout-intr: A returned before main interrupted it (%s): a loaded machine" % did)
        sys.exit(0)
    # ST timed A out at the refresh that ran main first; A's wait still returns EINTR (ST
    # tests the interrupt flag after the timeout's), but its timer made it runnable
    want = [(a, 0, TIMER)]
else:
    want = [(a, signaller, COND)] if a_signalled else [(a, 0, TIMER), (b, signaller, COND)]
if mode == "skip":
    want.append((c, 0, TIMER))
want.sort()
errs = []
if got != want:
    errs.append("wakes (woken, waker, kind) %s, want %s for ST's %s" % (got, want, did))
elif mode == "skip" and not a_signalled:
    # each timer Wake's time + object is its deadline: A's is 10 ms after C's (100 and 90 ms
    # from the same cached clock); time units in ns from the trace's first and last events
    by = {w["woken"]: w for w in wakes}
    wa, wc = by[a], by[c]
    (t0, n0), (t1, n1) = min(clock), max(clock)
    ns_per_unit = (n1 - n0) / (t1 - t0) if t1 > t0 else None
    if ns_per_unit:
        gap_ms = ((wa["time"] + wa["object"]) - (wc["time"] + wc["object"])) * ns_per_unit / 1e6
        if not 8 <= gap_ms <= 12:
            errs.append("deadlines A - C = %.2f ms, want about 10" % gap_ms)
    if wa["object"] >= 0 or wc["object"] >= 0:
        errs.append("timer objects A %d, C %d: both deadlines were past" % (wa["object"], wc["object"]))
name = "st-cond-timeout-" + mode
print("FAIL %s: %s" % (name, "; ".join(errs)) if errs else
      "PASS %s (ST: %s)" % (name, did))
PY
	done
else
	fail st-cond-timeout "cannot build: $(head -c 200 "$T/cc.err")"
fi
# ---- ST: st_poll of more descriptors than the adapter's on-stack array (st-poll-many.c): rounds of
# 12, 12, 200 and 12 pipes, each woken by a byte on its last pipe. Each round's ready descriptor is
# an fd Wake of the waiting coroutine for that descriptor (the coroutine's own array, grown and
# kept: preload/rt-st.c, poll_listed), and nothing is counted as dropped.
if cc -O1 -o "$T/spm-prog" tests/integration/st-poll-many.c -lst 2>"$T/cc.err"; then
	st_did=$(D9_TRACE_PATH="$T/spm/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" "$T/spm-prog" 2>"$T/spm.err")
	rc=$?
	if [ "$rc" -ne 0 ] || [ "$(echo "$st_did" | wc -l)" -ne 4 ]; then
		fail st-poll-many "the program under the agent: exit $rc, said '$st_did' ($(head -c 200 "$T/spm.err"))"
	elif ! build/d9-analyze jsonl "$T/spm" >"$T/spm.jsonl" 2>"$T/spm.aerr" ||
		! build/d9-analyze summary "$T/spm" >"$T/spm.summary" 2>>"$T/spm.aerr"; then
		fail st-poll-many "d9-analyze jsonl: $(head -c 200 "$T/spm.aerr")"
	else
		python3 - "$T/spm.jsonl" "$st_did" <<'PY'
import json, sys
path, did = sys.argv[1:]
ev = [json.loads(l) for l in open(path)]
waiter = [e["coroutine"] for e in ev if e.get("type") == "Spawn" and e.get("parent")][0]
got = [e.get("fd") for e in ev if e.get("type") == "Wake" and e.get("kind") == "fd" and e.get("woken") == waiter]
want = [int(l.split()[3]) for l in did.splitlines()]
quality = open(path.replace(".jsonl", ".summary")).read()
drops = "data quality: 0 events and 0 samples dropped" not in quality
if got != want or drops:
    print("FAIL st-poll-many: fd Wakes of the waiter %s, want %s (ST said: %s)%s" % (got, want, did.replace("\n", "; "), "; drops: " + [l for l in quality.splitlines() if "data quality" in l][0] if drops else ""))
else:
    print("PASS st-poll-many: %d rounds of 12 to 200 descriptors, each an fd Wake for its descriptor" % len(want))
PY
	fi
else
	fail st-poll-many "cannot build: $(head -c 200 "$T/cc.err")"
fi
# ---- ST mutexes: hand-offs, an unlock that fails, free locks, a lock with an interrupt pending
# (st-mutex.c)
if cc -O1 -o "$T/stm" tests/integration/st-mutex.c -lst 2>"$T/cc.err"; then
	plain=$("$T/stm" 2>&1)
	traced=$(D9_TRACE_PATH="$T/m/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" "$T/stm" 2>"$T/m.err")
	rc=$?
	if [ "$rc" -ne 0 ] || [ "$traced" != "$plain" ] || [ "$plain" != "contended=0,0 eperm=-1,1 free=0 intr=-1,4" ]; then
		fail st-mutex-semantics "with the agent (exit $rc) '$traced', without '$plain', want 'contended=0,0 eperm=-1,1 free=0 intr=-1,4' ($(head -c 200 "$T/m.err"))"
	elif ! build/d9-analyze dump "$T/m" >"$T/m.jsonl" 2>"$T/m.aerr"; then
		fail st-mutex-wakes "d9-analyze dump: $(head -c 200 "$T/m.aerr")"
	else
		pass st-mutex-semantics
		python3 - "$T/m.jsonl" <<'PY'
import json, sys
spawns, wakes = [], []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("rec") != "event": continue
    if r["type"] == "Spawn": spawns.append(r)
    if r["type"] == "Wake" and r["kind"] == 4: wakes.append((r["woken"], r["waker"]))
main = [s["coroutine"] for s in spawns if s["parent"] == 0][0]
a, b = [s["coroutine"] for s in spawns if s["parent"] == main][:2]
print("PASS st-mutex-wakes" if wakes == [(a, main), (b, a)] else
      "FAIL st-mutex-wakes: mutex wakes (woken, waker) %s, want [(%d, %d), (%d, %d)]: the two hand-offs only" % (wakes, a, main, b, a))
PY
	fi
else
	fail st-mutex "cannot build: $(head -c 200 "$T/cc.err")"
fi
# ---- ST: the coroutine table cannot grow (the program refuses the agent a larger table): the
# coroutines it cannot hold are not recorded, each counted as a dropped event (st-untracked.c)
if cc -O1 -rdynamic -o "$T/stu" tests/integration/st-untracked.c -lst 2>"$T/cc.err"; then
	traced=$(D9_TRACE_PATH="$T/u/trace.bin" LD_PRELOAD="$PWD/build/libd9agent.so" "$T/stu" 2>"$T/u.err")
	rc=$?
	if [ "$rc" -ne 0 ] || [ "$traced" != "ran=3000" ]; then
		fail st-untracked "exit $rc, output '$traced', want ran=3000 ($(head -c 200 "$T/u.err"))"
	elif [ "$(grep -c 'no memory for the coroutine table' "$T/u.err")" != 1 ]; then
		fail st-untracked "want the warning once on stderr: '$(head -c 300 "$T/u.err")'"
	elif ! build/d9-analyze dump "$T/u" >"$T/u.jsonl" 2>"$T/u.aerr"; then
		fail st-untracked "d9-analyze dump: $(head -c 200 "$T/u.aerr")"
	else
		python3 - "$T/u.jsonl" <<'PY'
import json, sys
spawns, polls, dropped = set(), set(), 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("rec") != "event": continue
    if r["type"] == "Spawn": spawns.add(r["coroutine"])
    elif r["type"] == "PollStart": polls.add(r["coroutine"])
    elif r["type"] == "Dropped": dropped += r["count"]
untracked = 3000 - (len(spawns) - 1)  # main is a Spawn too
errs = []
if not 0 < untracked < 3000:
    errs.append("%d Spawns: want fewer than 3,001 (the table could not hold them all)" % len(spawns))
if polls - spawns:
    errs.append("%d coroutines ran in the trace without a Spawn" % len(polls - spawns))
if dropped != untracked:
    errs.append("%d dropped events counted, want %d (one per coroutine not recorded)" % (dropped, untracked))
print("FAIL st-untracked: " + "; ".join(errs) if errs else
      "PASS st-untracked (%d coroutines recorded, %d not, each counted)" % (3000 - untracked, untracked))
PY
	fi
else
	fail st-untracked "cannot build: $(head -c 200 "$T/cc.err")"
fi
exit 0
