#!/usr/bin/env bash
# test-real-redis.sh: time off CPU weighed by its duration, on Debian's redis-server (a generic
# epoll loop nobody here wrote). redis runs under LD_PRELOAD=build/libd9agent.so with
# D9_CPU_PROFILE=999 and D9_SCHED_EVENTS=1 (off-CPU samples), on 127.0.0.1 and a free port, with no
# persistence; redis-cli injects two slow events, then redis gets SIGTERM:
#   - redis-sleep: `DEBUG SLEEP 0.3` (nanosleep in the command): a loop turn in `summary --json`
#     of at least 300 ms and at most what the client saw the command take (+10%), whose main item is
#     that blocking call (nanosleep, 300 ms to the client's time +10%, its stack through
#     debugCommand); the flame graph of that turn (a window around it, --cpu both, by time) has
#     the sleep on top: its heaviest stack ends in nanosleep and weighs as much.
#   - redis-eval: an EVAL whose Lua loop runs 200 ms of wall time (it reads TIME): a loop turn
#     of at least that and at most what the client saw it take (+10%); the flame graph of that turn (a window around it, on-CPU by time) has the
#     Lua interpreter on top: its heaviest stack runs in Lua (under lua_pcall: Lua's internal
#     functions have no names in a stripped redis) and Lua holds most of the turn's CPU time.
#   - redis-hotspots: the hot spots are by time, and the sleep weighs its 300 ms off CPU (only
#     the idle loop's epoll_wait may weigh more).
#   - redis-stacks: at most 1% of the samples hold an invalid stack (default D9_STACKS=auto on a
#     binary built without frame pointers).
# Skips (counted, with the reason) when redis-server or redis-cli is missing or perf is denied.
set -u
. "$(dirname "$0")/lib-preload.sh"

NAME=redis
pl_need_built "$NAME"
for b in redis-server redis-cli python3; do
	if ! command -v "$b" >/dev/null; then
		pl_skip "$NAME" "$b is not installed (Debian package redis-server; make deps)"
		exit 0
	fi
done
pl_env "$NAME"

# redis and the client that times its commands run at nice -10 when root (PL_NICE): the test
# compares the loop turn with the time the client saw
port=$(pl_free_port)
mkdir -p "$T/trace" "$T/data"
"${PL_NICE[@]}" env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace/trace.bin" D9_FLUSH_INTERVAL=50ms \
	D9_CPU_PROFILE=999 D9_SCHED_EVENTS=1 \
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$T/data" \
	--daemonize no --enable-debug-command yes --logfile "$T/redis.log" \
	>"$T/stdout" 2>"$T/stderr" &
SPID=$!
PL_PIDS+=("$SPID")
cli() { timeout 30 redis-cli -h 127.0.0.1 -p "$port" "$@"; }
if ! d9_wait_for 30 eval '[ "$(cli ping 2>/dev/null)" = PONG ] || ! pl_alive $SPID' ||
	! pl_alive "$SPID"; then
	pl_fail "$NAME" "redis-server does not answer on port $port (stderr: $(tail -c 300 "$T/stderr"); log: $(tail -c 300 "$T/redis.log" 2>/dev/null))"
	exit 0
fi
if grep -q 'perf_event_open' "$T/stderr"; then
	pl_skip "$NAME" "perf_event_open is denied here: $(grep -m1 perf_event_open "$T/stderr")"
	exit 0
fi

cli set k v >/dev/null
# timed CMD ARGS...: sends one command on a fresh connection, prints its reply and the time from
# the send to the whole reply in ns (what the client saw: the server's loop turn plus loopback)
timed() {
	"${PL_NICE[@]}" python3 - "$port" "$@" <<'PYEOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
args = [a.encode() for a in sys.argv[2:]]
req = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
t0 = time.monotonic_ns()  # before the send: a client preempted inside it must not see less than the server's turn
s.sendall(req)
d = b""
while not d.endswith(b"\r\n"):
    c = s.recv(4096)
    if not c:
        break
    d += c
print(d.decode(errors="replace").strip().lstrip("+:"), time.monotonic_ns() - t0)
PYEOF
}
read -r sleep_reply sleep_ns <<<"$(timed DEBUG SLEEP 0.3 2>&1)"
# Lua: about 200 ms of wall time in the interpreter (TIME is wall clock: a busy machine makes the
# loop run fewer iterations, not longer)
LUA='local s = redis.call("TIME") local t0 = s[1] * 1000000 + s[2] local x = 0
repeat for i = 1, 20000 do x = (x + i * 7) % 1000003 end
local n = redis.call("TIME") until n[1] * 1000000 + n[2] - t0 >= 200000 return x'
read -r eval_reply eval_ns <<<"$(timed EVAL "$LUA" 0 2>&1)"
cli get k >/dev/null
kill -TERM "$SPID" 2>/dev/null
pl_wait_exit 30
if [ "$SRC" = hung ]; then
	pl_fail "$NAME" "redis-server did not exit within $((30 * D9_SLOW)) s of SIGTERM"
	exit 0
fi
if [ "${sleep_reply:-}" != OK ] || [[ ! "${eval_reply:-}" =~ ^[0-9]+$ ]] || [ -z "${eval_ns:-}" ]; then
	pl_fail "$NAME" "the slow commands failed: DEBUG SLEEP '${sleep_reply:-}', EVAL '${eval_reply:-}'"
	exit 0
fi
d9_wait_settled "$T/trace" >/dev/null 2>&1 || true

"$PL_ANALYZE" summary --json "$T/trace" >"$T/summary.json" 2>"$T/summary.err"
if ! python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/summary.json" 2>/dev/null; then
	pl_fail "$NAME" "no summary: $(head -c 300 "$T/summary.err")"
	exit 0
fi

# pick NAME LO_MS HI_MS: the offset_ns and duration_ns of the longest loop turn in [LO, HI] ms.
pick() {
	python3 - "$T/summary.json" "$2" "$3" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
lo, hi = float(sys.argv[2]) * 1e6, float(sys.argv[3]) * 1e6
t = [p for p in s.get("long_polls", []) if lo <= p["duration_ns"] <= hi]
if t:
    p = max(t, key=lambda p: p["duration_ns"])
    print(p["offset_ns"], p["duration_ns"])
EOF
}

# top_line FILE: the heaviest folded line of a flame output, as "WEIGHT<tab>FRAMES".
top_line() { awk '{ w = $NF; $NF = ""; sub(/ $/, ""); print w "\t" $0 }' "$1" | sort -n -k1,1 | tail -1; }

# ---- DEBUG SLEEP 0.3 -----------------------------------------------------------------------------
# the turn is at least the 300 ms the sleep asked for, and at most what the client saw the
# command take (+10%): the client's clock starts before its send and stops after the reply, so
# the turn lies inside it, however long the client itself waited for a CPU
read -r off dur <<<"$(pick sleep 300 "$((sleep_ns * 11 / 10000000))")"
if [ -z "${dur:-}" ]; then
	pl_fail redis-sleep "no loop turn of 300 ms to $((sleep_ns / 1000000)) ms +10% (what the client saw): $(python3 -c 'import json,sys; print([p["duration_ns"] for p in json.load(open(sys.argv[1]))["long_polls"]][:10])' "$T/summary.json")"
else
	why=$(python3 - "$T/summary.json" "$dur" "$sleep_ns" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
p = [p for p in s["long_polls"] if p["duration_ns"] == int(sys.argv[2])][0]
hi = int(sys.argv[3]) * 1.1
b = p.get("blocking")
if not b:
    print("the turn lists no blocking call"); sys.exit()
l = b["longest"]
st = " < ".join(l["stack"] or [])
if "sleep" not in l["call"]:
    print("its longest blocking call is %s, not the sleep" % l["call"])
elif not 300e6 <= l["duration_ns"] <= hi:
    print("the sleep took %d ns, not 300 ms to %d ns" % (l["duration_ns"], hi))
elif "debugCommand" not in st:
    print("the sleep's stack does not reach debugCommand: %s" % st[:300])
EOF
)
	"$PL_ANALYZE" flame --cpu both --long-polls 300ms --from "$((off / 1000))us" \
		--to "$(((off + dur) / 1000 + 1))us" "$T/trace" >"$T/sleep.flame" 2>"$T/sleep.flame.err"
	IFS=$'\t' read -r w frames <<<"$(top_line "$T/sleep.flame")"
	if [ -n "$why" ]; then
		pl_fail redis-sleep "$why"
	elif [ -z "${w:-}" ]; then
		pl_fail redis-sleep "the turn's flame graph is empty: $(head -c 300 "$T/sleep.flame.err")"
	elif [[ "${frames##*;}" != *sleep* ]] || [ "$w" -lt 300000 ] || [ "$w" -gt "$((sleep_ns * 11 / 10000))" ]; then
		pl_fail redis-sleep "the top of the turn's flame graph is not the 300 ms sleep: $w us in ${frames: -200}"
	else
		pl_pass redis-sleep "loop turn of $((dur / 1000000)) ms; its main item the blocking nanosleep; flame top ${frames##*;} $((w / 1000)) ms"
	fi
fi

# ---- EVAL: 200 ms in Lua -------------------------------------------------------------------------
# at least the 200 ms the script runs for by redis's wall clock (195: a slewing clock), at most what
# the client saw
read -r off dur <<<"$(pick eval 195 "$((eval_ns * 11 / 10000000))")"
if [ -z "${dur:-}" ]; then
	pl_fail redis-eval "no loop turn of 195 ms to $((eval_ns / 1000000)) ms +10% (what the client saw): $(python3 -c 'import json,sys; print([p["duration_ns"] for p in json.load(open(sys.argv[1]))["long_polls"]][:10])' "$T/summary.json")"
else
	from=$((off / 1000))us to=$(((off + dur) / 1000 + 1))us
	"$PL_ANALYZE" flame --long-polls 180ms --from "$from" --to "$to" "$T/trace" >"$T/eval.flame" 2>"$T/eval.flame.err"
	res=$(python3 - "$T/eval.flame" "$dur" <<'EOF'
import sys
lines = [l.rstrip("\n").rsplit(" ", 1) for l in open(sys.argv[1]) if l.strip()]
lines = [(f.split(";"), int(w)) for f, w in lines]
total = sum(w for _, w in lines)
if not total:
    print("FAIL empty"); sys.exit()
# Lua's interpreter is the code lua_pcall (Lua's API, exported) runs: its internal functions are
# unnamed in a stripped redis, so the stack passing through lua_pcall tells it
def in_lua(fr):
    return any(f.split(" (")[0] == "lua_pcall" for f in fr[:-1])
top_fr, top_w = max(lines, key=lambda l: l[1])
lua_w = sum(w for fr, w in lines if in_lua(fr))
if not in_lua(top_fr):
    print("FAIL the heaviest stack does not run in Lua (%d of %d us): %s" % (top_w, total, ";".join(top_fr)[-300:]))
elif lua_w * 2 < total:
    print("FAIL Lua holds only %d of %d us of the turn's CPU time" % (lua_w, total))
else:
    print("OK Lua (under lua_pcall) holds %d of %d us on CPU; heaviest stack %d us ending in %s" % (lua_w, total, top_w, top_fr[-1]))
EOF
)
	if [[ "$res" == OK* ]]; then
		pl_pass redis-eval "loop turn of $((dur / 1000000)) ms; ${res#OK }"
	else
		pl_fail redis-eval "${res#FAIL } ($(head -c 200 "$T/eval.flame.err"))"
	fi
fi

# ---- hot spots by time ---------------------------------------------------------------------------
res=$(python3 - "$T/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
off = s.get("offcpu_hotspots", [])
by = s.get("hotspots_by", {})
if by.get("off") != "time" or by.get("on") != "time":
    print("FAIL hot spots not by time: %s" % by)
elif not off or "self_ns" not in off[0]:
    print("FAIL no off-CPU hot spot with its time")
else:
    sl = [f for f in off if "nanosleep" in f["function"]]
    if not sl or sl[0]["self_ns"] < 300e6 and sl[0]["total_ns"] < 300e6:
        print("FAIL the sleep does not weigh 300 ms off CPU: %s" % off[:3])
    elif off[0]["self_ns"] > max(sl[0]["self_ns"], sl[0]["total_ns"]) and "epoll" not in off[0]["function"]:
        print("FAIL %s leads the off-CPU hot spots ahead of the sleep" % off[0]["function"])
    else:
        print("OK the sleep weighs %d ms off CPU (%d off-CPU samples in all)" % (max(sl[0]["self_ns"], sl[0]["total_ns"]) // 1000000, s["cpu_samples"]["off"]))
EOF
)
if [[ "$res" == OK* ]]; then
	pl_pass redis-hotspots "${res#OK }"
else
	pl_fail redis-hotspots "${res#FAIL }"
fi

# ---- stacks --------------------------------------------------------------------------------------
# redis-server is built without frame pointers: with the default D9_STACKS=auto at most 1% of the
# samples may hold an invalid stack (a frame in no module, or a repeated frame)
res=$(python3 - "$T/summary.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1])).get("stacks", {})
n, bad = s.get("samples", 0), s.get("invalid", 0)
if n < 20:
    print("FAIL only %d samples" % n)
elif bad * 100 > n:
    print("FAIL %d of %d samples hold an invalid stack" % (bad, n))
else:
    print("OK %d of %d samples invalid, %d truncated" % (bad, n, s.get("truncated", 0)))
PYEOF
)
if [[ "$res" == OK* ]]; then
	pl_pass redis-stacks "${res#OK }"
else
	pl_fail redis-stacks "${res#FAIL }"
fi
