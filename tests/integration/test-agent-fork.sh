#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-agent-fork.sh: fork and exec. A child forked while other threads record gets its own series
# (its pid in the segment names and headers) and its own writer, never deadlocks, and exits 0;
# the parent's series is undisturbed; both decode with exact accounting. Across exec no agent fd
# survives (every one is O_CLOEXEC), also while the writer recovers old .active files at start.
# A child forked while the writer walks the loader's list (dl_iterate_phdr) does not hang on the
# loader's lock (fork-loader.c under LD_PRELOAD), nor while the program's own allocator is locked by
# its own fork handler (own-malloc.c).
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-fork

# ---- fork from a multi-threaded recording process --------------------------------------------------
# 3 workers record 300k seqs each (with parks); main forks 3 times at 1/4, 1/2 and 3/4 of the way;
# each child records its own 300k seqs on its one thread and exits. The driver kills a child
# that has not exited after 30 s and reports it as timed out.
d=$T/fork
d9_run "$T/fork.out" "$T/fork.err" D9_TRACE_PATH="$d/trace.bin" -- \
	-t 3 -n 300000 --park-every 1000 --sleep-us 100 --forks 3
rc=$?
d9_check "$T/fork.json" --expect-n 300000 --park-every 1000 --driver "$T/fork.out" "$d"
if [ "$rc" -ne 0 ]; then
	d9_fail fork-series "driver exited $rc: $(head -c 300 "$T/fork.err")"
else
	d9_py fork-series '
import re
c = one(f[0]); drv = parent(f[1]); kids = children(f[1]); names = files(f[2])
if len(drv["children"]) != 3 or any(k["timed_out"] or k["code"] != 0 for k in drv["children"]):
    fail("children: %s" % drv["children"])
if len(kids) != 3:
    fail("%d child result lines, expected 3" % len(kids))
accounting(c, drv, expect_drops=False)
for k in kids:
    if k["ppid"] != drv["pid"]:
        fail("child %d has parent %d" % (k["pid"], k["ppid"]))
    accounting(c, k, expect_drops=False)
    if k["threads"][0]["worker"] != 1:
        fail("child %d: its worker id is %d, expected 1 (a fresh numbering)" % (k["pid"], k["threads"][0]["worker"]))
pids = sorted(set(int(re.match(r"trace\.(\d+)\.", n).group(1)) for n in names))
want = sorted([drv["pid"]] + [k["pid"] for k in kids])
if pids != want:
    fail("series in file names %s, expected %s" % (pids, want))
for s in c["segments"]:
    if "trace.%d." % s["pid"] not in s["path"]:
        fail("%s holds pid %d" % (s["path"], s["pid"]))
info = "4 series, %d segments" % len(names)
' "$T/fork.json" "$T/fork.out" "$d"
	[ -s "$T/fork.err" ] && d9_fail fork-series-stderr "the agent printed: $(head -n 2 "$T/fork.err")"
fi

# ---- many forks under contention ---------------------------------------------------------------------
# 1 MiB of buffers and 4 threads recording flat out: the pool, registry and definition locks are
# busy at every fork. 12 children, each must exit (no deadlock) and account exactly.
d=$T/forkstress
d9_run "$T/fs.out" "$T/fs.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_MEMORY=1M -- \
	-t 4 -n 200000 --park-every 50 --sleep-us 0 --forks 12
rc=$?
d9_check "$T/fs.json" --expect-n 200000 --park-every 50 --driver "$T/fs.out" "$d"
if [ "$rc" -ne 0 ]; then
	d9_fail fork-no-deadlock "driver exited $rc (124/137: hung): $(head -c 300 "$T/fs.err")"
else
	d9_py fork-no-deadlock '
c = one(f[0]); drv = parent(f[1]); kids = children(f[1])
hung = [k for k in drv["children"] if k["timed_out"] or k["code"] != 0]
if hung or len(drv["children"]) != 12:
    fail("children that hung or failed: %s" % hung)
if len(kids) != 12:
    fail("%d children printed a result, expected 12" % len(kids))
accounting(c, drv)
for k in kids:
    accounting(c, k)
info = "12 children"
' "$T/fs.json" "$T/fs.out"
fi

# ---- exec: no agent fd survives -------------------------------------------------------------------------
# After recording (the writer has its segment open), the driver execs `ls -l /proc/self/fd/`. The
# listing must show the fds the test gave it and ls's own directory fd, nothing more: compared
# with ls run the same way without the agent.
d=$T/exec
{ timeout -s KILL 60 ls -l /proc/self/fd/ >"$T/base.out" 2>"$T/base.err"; } 2>/dev/null
d9_run "$T/exec.out" "$T/exec.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_FILE_SIZE=1M -- \
	-t 2 -n 400000 --park-every 1000 --exec
rc=$?
base=$(grep -c -- ' -> ' "$T/base.out")
got=$(grep -c -- ' -> ' "$T/exec.out")
if [ "$rc" -ne 0 ]; then
	d9_fail exec-no-fd-leak "exit status $rc: $(head -c 300 "$T/exec.err")"
elif ! compgen -G "$d/*.active" >/dev/null; then
	d9_fail exec-no-fd-leak "no .active segment was open at exec: the test proves nothing"
elif grep -q -- "-> $d/" "$T/exec.out" || [ "$got" -ne "$base" ]; then
	d9_fail exec-no-fd-leak "$got fds after exec, $base without the agent: $(grep -- "-> $d/" "$T/exec.out" | head -n 2)"
else
	d9_pass exec-no-fd-leak "$got fds, as without the agent"
fi

# ---- exec while the writer recovers old .active files ----------------------------------------------------
# 10 copies of a killed process's .active file under pids above any pid_max (certainly dead): the
# new writer recovers them at start (decode, cut, trailer, gzip) while the driver forks and execs
# ls 300 times. No listing may show a file of the trace directory.
src=$T/recsrc
d9_run "$T/src.out" "$T/src.err" D9_TRACE_PATH="$src/trace.bin" -- -t 2 -n 300000 --exit kill
active=$(ls "$src"/*.active 2>/dev/null | head -n 1)
d=$T/recexec
mkdir -p "$d"
if [ -z "$active" ]; then
	d9_fail exec-during-recovery-no-fd-leak "no .active file to recover: $(head -c 300 "$T/src.err")"
else
	for i in $(seq 1 10); do cp "$active" "$d/trace.$((4000000 + i)).000000.active"; done
	d9_run "$T/recexec.out" "$T/recexec.err" D9_TRACE_PATH="$d/trace.bin" -- -t 1 -n 10 --spawn-ls 300
	rc=$?
	leaks=$(grep -- "-> $d/" "$T/recexec.out" | sed 's/.* \([0-9]* -> \)/\1/' | sort | uniq -c | head -n 3)
	recovered=$(compgen -G "$d/trace.40000*.000000.bin*" | wc -l)
	if [ "$rc" -ne 0 ]; then
		d9_fail exec-during-recovery-no-fd-leak "exit status $rc: $(head -c 300 "$T/recexec.err")"
	elif [ -n "$leaks" ]; then
		d9_fail exec-during-recovery-no-fd-leak "exec'd children inherited trace fds: $(echo "$leaks" | tr '\n' ' ')"
	elif [ "$recovered" -eq 0 ]; then
		d9_fail exec-during-recovery-no-fd-leak "no file was recovered: the test proves nothing"
	else
		d9_pass exec-during-recovery-no-fd-leak "300 execs while $recovered files were recovered"
	fi
fi

# ---- fork while the writer walks the loader's list --------------------------------------------------
# fork-loader.c under LD_PRELOAD: the main thread loads and unloads a small library, then forks,
# 1000 times; each child walks the loaded objects, loads the library and formats a local time.
# glibc leaves the loader's lock held in a child forked while another thread is inside
# dl_iterate_phdr; the writer's module scan (every pass, D9_FLUSH_INTERVAL=1ms here) was such a
# thread, and children hung within the first 100 forks. Every child must exit 0; the program
# alone (no agent) is the control, and the trace must hold the parent's events (its writer ran).
fl=$T/fork-loader
if [ ! -e "$D9_ROOT/build/libd9agent.so" ]; then
	d9_fail fork-loader-no-deadlock "build/libd9agent.so is not built (make all)"
elif ! ${CC:-cc} -O2 -o "$fl" "$D9_ROOT/tests/integration/fork-loader.c" -ldl -lpthread 2>"$T/flcc.err" ||
	! echo 'int d9_tiny(void) { return 1; }' | ${CC:-cc} -shared -fPIC -x c - -o "$T/libtiny.so" 2>>"$T/flcc.err"; then
	d9_skip fork-loader-no-deadlock "cannot build fork-loader.c: $(head -c 200 "$T/flcc.err")"
elif ! { timeout -s KILL $((120 * D9_SLOW)) "$fl" "$T/libtiny.so" 300 $((5 * D9_SLOW)) >"$T/flbase.out" 2>&1; } 2>/dev/null; then
	d9_skip fork-loader-no-deadlock "the program fails without the agent: $(head -c 200 "$T/flbase.out")"
else
	d=$T/forkloader
	{ env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" D9_TRACE_PATH="$d/trace.bin" D9_FLUSH_INTERVAL=1ms \
		timeout -s KILL $((120 * D9_SLOW)) "$fl" "$T/libtiny.so" 1000 $((5 * D9_SLOW)) >"$T/fl.out" 2>"$T/fl.err"; } 2>/dev/null
	rc=$?
	if [ "$rc" -ne 0 ]; then
		d9_fail fork-loader-no-deadlock "exit status $rc: $(head -c 200 "$T/fl.out") $(head -c 200 "$T/fl.err")"
	elif ! d9_wait_settled "$d"; then
		d9_fail fork-loader-no-deadlock "$D9_SETTLE_ERR"
	else
		timeout -s KILL $((120 * D9_SLOW)) "$ANALYZE" summary --json "$d" >"$T/fl.json" 2>"$T/fl.json.err"
		d9_py fork-loader-no-deadlock '
s = one(f[0])
if s["events"] <= 0:
    fail("the trace holds no event: the writer did not run, the test proves nothing")
info = "1000 children exited; the parent recorded %d events" % s["events"]
' "$T/fl.json"
	fi
fi

# ---- fork while the program's own allocator is locked by its fork handler ---------------------------
# own-malloc.c: malloc is the executable's, and its fork handler (registered after the agent's, so
# run before it) locks it for 100 ms. A worker makes the writer define new stacks (a malloc under
# the definitions lock) at every pass: a pass in that window waits for the allocator holding the
# lock the agent's fork handler needs. That fork hung for ever; now it waits 2 s, goes on, and the
# child runs untraced (said on stderr). Every child must exit 0; at least one fork must have met
# the held lock (up to 3 runs), or the run proves nothing (skipped, counted).
om=$T/own-malloc
if ! ${CC:-cc} -O2 -o "$om" "$D9_ROOT/tests/integration/own-malloc.c" -lpthread 2>"$T/omcc.err"; then
	d9_skip fork-own-allocator-no-deadlock "cannot build own-malloc.c: $(head -c 200 "$T/omcc.err")"
elif ! { timeout -s KILL $((60 * D9_SLOW)) "$om" 3 10 >"$T/ombase.out" 2>&1; } 2>/dev/null; then
	d9_skip fork-own-allocator-no-deadlock "the program fails without the agent: $(head -c 200 "$T/ombase.out")"
else
	met=0 runs=0 why=""
	while [ "$met" -eq 0 ] && [ "$runs" -lt 3 ] && [ -z "$why" ]; do
		runs=$((runs + 1))
		{ env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" D9_TRACE_PATH="$T/om$runs/trace.bin" \
			timeout -s KILL $((120 * D9_SLOW)) "$om" 6 100 >"$T/om.out" 2>"$T/om.err"; } 2>/dev/null
		rc=$?
		if [ "$rc" -ne 0 ] || ! grep -q '^forks 6 hung 0 bad 0$' "$T/om.out"; then
			why="run $runs: exit status $rc (137: killed, hung): $(tail -n 1 "$T/om.out")"
		fi
		met=$(grep -c "a fork waited .* for the agent's definitions lock" "$T/om.err")
	done
	if [ -n "$why" ]; then
		d9_fail fork-own-allocator-no-deadlock "$why"
	elif [ "$met" -eq 0 ]; then
		d9_skip fork-own-allocator-no-deadlock "no fork met the held definitions lock in 3 runs: nothing shown"
	else
		d9_pass fork-own-allocator-no-deadlock "6 children exited, $met of them forked while the lock was held (run $runs)"
	fi
fi
exit 0
