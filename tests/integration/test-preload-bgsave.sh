#!/usr/bin/env bash
# test-preload-bgsave.sh: a forked child that never enters an event loop is traced (README,
# "What gets recorded"; agent/DESIGN.md, "Exit, signals, fork"). redis-server (the Debian
# package) runs under the agent with D9_CPU_PROFILE=99 in a temporary directory on a free port,
# is filled with a few hundred MB (DEBUG POPULATE), then BGSAVE forks a child that spends
# seconds of CPU writing the RDB file and ends with _exit. The child must be in the trace: its
# own pid with the server as parent, CPU samples whose stacks run through rdbSave, and no
# worker (it never waits in a loop); every segment sealed. How many samples is derived from the
# CPU time the child used (the server's reaped children's time, /proc/PID/stat), not from the
# amount of work: a quarter of 99 a second of it; a child that used under 0.3 s of CPU (a machine
# that saves the RDB that fast) gives too few to judge: SKIP. SKIP without redis-server.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-bgsave

for b in redis-server redis-cli; do
	if ! command -v "$b" >/dev/null; then
		pl_skip redis-bgsave-child "$b is not installed (apt-get install redis-server)"
		exit 0
	fi
done
KEYS=${BGSAVE_KEYS:-2000000} # 100-byte values: ~300 MB in the server (pl_setup clears D9_*)

R=$T/redis
mkdir -p "$R"
port=$(pl_free_port)
cli() { timeout 120 redis-cli -p "$port" "$@" 2>>"$R/cli.err"; }
# the sealing waits for the children's exits: up to 10 s (D9_EXIT_TIMEOUT), see
# test-preload-exits.sh
start() { # extra redis arguments
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$R/trace/trace.bin" D9_CPU_PROFILE=99 D9_EXIT_TIMEOUT=10s \
		redis-server --port "$port" --bind 127.0.0.1 --dir "$R" --save '' --appendonly no \
		--daemonize no "$@" >"$R/log" 2>"$R/stderr" &
	SPID=$!
	PL_PIDS+=("$SPID")
	d9_wait_for 30 eval '[ "$(cli PING)" = PONG ] || ! pl_alive "$SPID"' && [ "$(cli PING)" = PONG ]
}
# DEBUG is off by default since redis 7 (enable-debug-command); older servers refuse the option
if ! start --enable-debug-command local; then
	kill -KILL "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
	if ! start; then
		pl_fail redis-bgsave-child "redis-server did not answer PING within $((30 * D9_SLOW)) s: $(tail -n 3 "$R/log" | tr '\n' ' ')"
		exit 0
	fi
fi
if [ "$(cli DEBUG POPULATE "$KEYS" key 100)" != OK ]; then
	pl_fail redis-bgsave-child "DEBUG POPULATE failed: $(head -c 300 "$R/cli.err")"
	exit 0
fi
# bgsave_done: the server's first BGSAVE is over (it has a duration: -1 until then) and went
# well. Not LASTSAVE, counted in whole seconds: a save within the second the server started in
# (a fast machine) left it as it was, and the wait ran out.
bgsave_done() {
	local info
	info=$(cli INFO persistence | tr -d '\r')
	grep -q '^rdb_bgsave_in_progress:0' <<<"$info" && grep -q '^rdb_last_bgsave_status:ok' <<<"$info" &&
		grep -q '^rdb_last_bgsave_time_sec:[0-9]' <<<"$info"
}
# reaped_ticks: the CPU time (cutime + cstime, clock ticks) of the server's children that it
# has waited for: the BGSAVE child's once the save is over (redis reaps it, then reports it done)
reaped_ticks() { sed 's/.*) //' "/proc/$SPID/stat" 2>/dev/null | awk '{ print $14 + $15 }'; }
ticks0=$(reaped_ticks)
cli BGSAVE >/dev/null
if ! d9_wait_for 300 bgsave_done; then
	pl_fail redis-bgsave-child "BGSAVE did not finish within $((300 * D9_SLOW)) s: $(cli INFO persistence | tr -d '\r' | grep -E 'bgsave' | tr '\n' ' ')"
	exit 0
fi
child_ms=$(( ($(reaped_ticks) - ticks0) * 1000 / $(getconf CLK_TCK) ))
cli SHUTDOWN NOSAVE >/dev/null
pl_wait_exit 30
if [ "$SRC" != 0 ]; then
	pl_fail redis-bgsave-child "redis-server exit status $SRC: $(tail -n 3 "$R/log" | tr '\n' ' ')"
	exit 0
fi
if [ -s "$R/stderr" ]; then
	pl_fail redis-bgsave-child-stderr "the agent printed: $(head -n 2 "$R/stderr")"
fi
left=$(ls "$R/trace" | grep -vE '\.bin(\.gz)?$|^trace\.lock$' | tr '\n' ' ') # the budget's lock file stays
if [ -z "$left" ]; then
	pl_pass redis-bgsave-sealed
else
	pl_fail redis-bgsave-sealed "files other than sealed segments: $left"
fi

"$PL_ANALYZE" summary --json "$R/trace" >"$R/summary.json" 2>"$R/analyze.err" ||
	pl_fail redis-bgsave-child "d9-analyze summary failed: $(head -c 300 "$R/analyze.err")"
"$PL_ANALYZE" jsonl "$R/trace" >"$R/events.jsonl" 2>>"$R/analyze.err" ||
	pl_fail redis-bgsave-child "d9-analyze jsonl failed: $(head -c 300 "$R/analyze.err")"
python3 - "$R/summary.json" "$R/events.jsonl" "$SPID" "$child_ms" <<'PY'
import collections, json, sys
summary, events, server = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
child_ms = int(sys.argv[4])
procs = {p["pid"]: p for p in summary["processes"]}
kids = [p for p in summary["processes"] if p["ppid"] == server]
def fail(why):
    print("FAIL redis-bgsave-child: %s" % why)
    sys.exit(0)
if server not in procs:
    fail("the server (pid %d) is not in the trace: %s" % (server, sorted(procs)))
if len(kids) != 1:
    fail("%d processes with the server as parent, expected the BGSAVE child: %s" % (len(kids), kids))
kid = kids[0]["pid"]
samples, rdb, kinds = 0, 0, collections.Counter()
for line in open(events):
    e = json.loads(line)
    if e["pid"] != kid:
        continue
    kinds[e["type"]] += 1
    if e["type"] == "CpuSample" and e.get("source") == "on_cpu":
        samples += 1
        rdb += any(f.startswith("rdbSave") for f in e.get("stack", []))
if kids[0]["workers"] or any(w["pid"] == kid for w in summary["workers"]):
    fail("the child %d is called a worker: %s" % (kid, kids[0]))
# 99 samples a second of the child's CPU time (perf counts CPU time; the ctimer, without perf,
# fires at the tick while the thread runs, fewer on a loaded machine): a quarter of that at least
if child_ms < 300:
    print("SKIP redis-bgsave-child: the BGSAVE child used %d ms of CPU, under 0.3 s: too few samples "
          "to judge (%d on-CPU samples, %d in rdbSave*)" % (child_ms, samples, rdb))
    sys.exit(0)
floor = child_ms * 99 // 4000
if samples < floor or rdb < samples // 2:
    fail("the child %d used %d ms of CPU and has %d on-CPU samples (want >= %d), %d of them in rdbSave* "
         "(events: %s)" % (kid, child_ms, samples, floor, rdb, dict(kinds)))
print("PASS redis-bgsave-child: pid %d (parent %d): %d ms of CPU, %d on-CPU samples (want >= %d), %d in "
      "rdbSave*, events %s" % (kid, server, child_ms, samples, floor, rdb, dict(kinds)))
PY
exit 0
