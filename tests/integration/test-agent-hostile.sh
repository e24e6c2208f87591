#!/usr/bin/env bash
# shellcheck disable=SC2154 # $pid: set by d9_bg (printf -v)
# test-agent-hostile.sh: the agent never harms its host's files, whatever the host or other users
# do to the descriptors and names the agent uses (issue 11's reproductions):
# - reused-fds: a daemon closes every descriptor 3..1023 after start, opens its own logs and
#   database, and puts copies of them on the agent's old descriptor numbers: its files get none
#   of the trace's bytes, every park is in the trace, the segment is sealed, one stderr line;
#   The agent's threads have descriptor tables of their own (agent/fdown.c) where the kernel
#   allows: the sweep cannot reach the segment, and nothing is said. reused-fds-shared: the same
#   with D9_AGENT_FDS=shared (the program's table, as on a kernel that refuses), one line;
# - reused-fds-closefrom, reused-fds-syscall: the same (shared), the daemon closing with
#   closefrom(3) and with syscall(SYS_close, fd);
# - stderr-reused (shared, where the sweep takes the segment and the agent has a line to say):
#   the same, the sweep closing stderr too and the database opened at number 2: the agent's line
#   about the descriptor does not go there;
# - reused-fds-disk-full (shared: where the program can take the segment's number; the disk-full
#   cases of the default are test-agent-diskfull's): the same with the trace's disk full: the
#   database is never truncated, the trace is sealed (trailer from the segment's reserve) and
#   counts every lost event;
# - steal-while-writing (shared): each turn the daemon dup2()s its log onto the agent's segment number
#   while the agent's write into it is under way (slow-write.so, preloaded after the agent,
#   holds each of the writer's segment writes 20 ms before the kernel): the dup2 waits for the
#   write, the log gets none of the trace's bytes, every Park and Unpark is in the sealed trace
#   or counted lost (write_error: a chunk whose number is taken again right after the writer
#   took its segment back by name is lost, counted; the daemon takes it every turn, and under
#   two CPU hogs that happened in about 1 of 40 runs);
# - planted-links: links to a victim file under every name the agent will use: never followed;
# - fifo-leftover: a FIFO named like a dead process's .active segment: recovery skips it (one
#   line), the program traces and exits without waiting on it;
# - compress-after-failure: a segment that cannot be compressed (disk full) stays .bin (until its
#   retry 30 s later) and later segments are still compressed.
# - many-workers-fds: 950 worker threads under ulimit -n 1024: the host's own opens still succeed.
# The disk-full cases need root to mount a tmpfs: SKIP otherwise.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-hostile

LIB=$D9_ROOT/build/libd9agent.so
DAEMON=$D9_ROOT/build/tests/hostile-daemon
for b in "$LIB" "$DAEMON"; do
	if [ ! -x "$b" ] && [ ! -f "$b" ]; then
		d9_fail agent-hostile "$b is not built (make all)"
		exit 0
	fi
done

# daemon NAME TRACE_DIR [VAR=value ...] -- DAEMON_ARGS...: runs the hostile daemon under the
# agent (60 s at most): $T/NAME.out, $T/NAME.err; status in D9_RC.
daemon() {
	local name=$1 dir=$2 envs=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	mkdir -p "$T/$name.log"
	env LD_PRELOAD="$LIB" D9_TRACE_PATH="$dir/trace.bin" D9_FLUSH_INTERVAL=20ms "${envs[@]}" \
		timeout -s KILL 60 "$DAEMON" --trace-dir "$dir" --log-dir "$T/$name.log" "$@" \
		>"$T/$name.out" 2>"$T/$name.err"
	D9_RC=$?
}

# logs_clean NAME LOGS TURNS: every log holds exactly the daemon's own TURNS lines.
logs_clean() {
	python3 - "$T/$1.log" "$2" "$3" <<'EOF'
import sys
d, logs, turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(logs):
    want = "".join("host line %d of log %d\n" % (t, i) for t in range(turns)).encode()
    got = open("%s/log%d.txt" % (d, i), "rb").read()
    if got != want:
        print("log%d.txt: %d bytes, expected %d (first difference at byte %d)" % (i, len(got),
              len(want), next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
              min(len(got), len(want)))))
        sys.exit(1)
EOF
}

summary() { "$ANALYZE" summary --json "$1" >"$2" 2>"$2.err"; }

# What every daemon run's trace must show (d9_py: the summary, the daemon's JSON line, its
# stderr). TRACED: every park in the trace, nothing damaged or dropped; WHOLE adds one stderr
# line about the descriptor the daemon took.
TRACED='
c = one(f[0]); drv = one(f[1])
w = c["workers"]
if len(w) != 1 or w[0]["parks"] != drv["parks"]:
    fail("parks %s in the trace, %d made" % ([x["parks"] for x in w], drv["parks"]))
q = c["data_quality"]
if q["truncated_segments"] or q["damaged_files"] or c["drops"]["events"]:
    fail("quality %s drops %s" % (q, c["drops"]))
'
WHOLE="$TRACED"'
err = open(f[2]).read()
lines = [l for l in err.splitlines() if "descriptor" in l]
if len(lines) != 1:
    fail("%d stderr lines about the descriptor: %r" % (len(lines), err[:300]))
'
# The same where the agent's threads have descriptor tables of their own (agent/fdown.c, the
# default where the kernel allows): the sweep cannot reach the segment, and nothing is said.
if d9_own_tables; then
	WHOLE_PRIVATE="$TRACED"'
err = open(f[2]).read()
lines = [l for l in err.splitlines() if "descriptor" in l]
if lines:
    fail("%d stderr lines about a descriptor of the agent'"'"'s own table: %r" % (len(lines), err[:300]))
'
else
	WHOLE_PRIVATE=$WHOLE # refused here: the threads share the program's table
fi

# ---- reused-fds, reused-fds-closefrom, reused-fds-syscall -------------------------------------------
# reused NAME CASE TURNS LOGS [DAEMON_ARGS...]: a daemon whose sweep takes the agent's numbers and
# refills them with copies of its log and database (900..1023): its logs and database intact,
# every park in the trace, one stderr line about the descriptor; CASE-sealed: no segment left
# .active.
reused() {
	local name=$1 case=$2 turns=$3 logs=$4 fds=$5 sum want=$WHOLE
	shift 5
	[ "$fds" = private ] && want=$WHOLE_PRIVATE
	mkdir -p "$T/$name"
	head -c 2500000 /dev/urandom >"$T/$name.db"
	sum=$(sha1sum <"$T/$name.db")
	daemon "$name" "$T/$name" D9_AGENT_FDS="$fds" -- --turns "$turns" --db "$T/$name.db" \
		--fill-high 900 --logs "$logs" "$@"
	summary "$T/$name" "$T/$name.json"
	if [ "$D9_RC" -ne 0 ]; then
		d9_fail "$case" "daemon exit $D9_RC: $(head -c 300 "$T/$name.err")"
	elif ! why=$(logs_clean "$name" "$logs" "$turns"); then
		d9_fail "$case" "the host's log has foreign bytes: $why"
	elif [ "$(sha1sum <"$T/$name.db")" != "$sum" ]; then
		d9_fail "$case" "the host's database changed"
	else
		d9_py "$case" "$want"'
if drv["filled"] < 1:
    fail("the daemon put no copy on a high descriptor number")
info = "%d parks, logs and database intact" % drv["parks"]
' "$T/$name.json" "$T/$name.out" "$T/$name.err"
	fi
	if ls "$T/$name" | grep -q '\.active'; then
		d9_fail "$case-sealed" "a segment was left unsealed: $(ls "$T/$name")"
	else
		d9_pass "$case-sealed"
	fi
}
# the program's take of the agent's numbers is the shared table's protocol (fdown.c): the sweeps
# by closefrom and syscall() run with D9_AGENT_FDS=shared, the close loop both ways
reused r1 reused-fds 2000 3 private
reused r1s reused-fds-shared 2000 3 shared
reused rclosefrom reused-fds-closefrom 500 2 shared --sweep closefrom
reused rsyscall reused-fds-syscall 500 2 shared --sweep syscall

# ---- stderr-reused -------------------------------------------------------------------------------
# The daemon's sweep closes its stderr too, and its database, opened first, gets number 2. The
# agent's line about the descriptor the daemon took must not go to number 2 (agent/config.c: a
# line goes to descriptor 2 only while it is the stderr the program started with or dup2'd
# there, or a character device): the database stays intact, every park is in the trace.
mkdir -p "$T/se"
head -c 2500000 /dev/urandom >"$T/se.db"
sum=$(sha1sum <"$T/se.db")
daemon se "$T/se" D9_AGENT_FDS=shared -- --turns 500 --db "$T/se.db" --logs 2 --close-stderr
summary "$T/se" "$T/se.json"
if [ "$D9_RC" -ne 0 ]; then
	d9_fail stderr-reused "daemon exit $D9_RC (4: its database did not get number 2)"
elif [ "$(sha1sum <"$T/se.db")" != "$sum" ]; then
	d9_fail stderr-reused "the host's database at number 2 changed: $(head -c 120 "$T/se.db" | tr -c '[:print:]' .)"
elif ! why=$(logs_clean se 2 500); then
	d9_fail stderr-reused "the host's log has foreign bytes: $why"
else
	d9_py stderr-reused "$TRACED"'
info = "%d parks, the database at number 2 intact" % drv["parks"]
' "$T/se.json" "$T/se.out"
fi

# ---- reused-fds-disk-full ------------------------------------------------------------------------------
if ! d9_mount_tmpfs "$T/disk" 2m; then
	d9_skip reused-fds-disk-full "cannot mount a tmpfs: $D9_MOUNT_ERR"
else
	head -c $((2048 * 1024 - 60 * 1024)) /dev/zero >"$T/disk/filler"
	mkdir "$T/disk/t"
	head -c 2500000 /dev/urandom >"$T/db2"
	sum2=$(sha1sum <"$T/db2")
	daemon r2 "$T/disk/t" D9_COMPRESS=0 D9_AGENT_FDS=shared -- --turns 10000 --db "$T/db2" --fill-high 900 --logs 1
	summary "$T/disk/t" "$T/r2.json"
	if [ "$D9_RC" -ne 0 ]; then
		d9_fail reused-fds-disk-full "daemon exit $D9_RC: $(head -c 300 "$T/r2.err")"
	elif [ "$(sha1sum <"$T/db2")" != "$sum2" ] || [ "$(stat -c %s "$T/db2")" -ne 2500000 ]; then
		d9_fail reused-fds-disk-full "the host's database changed: $(stat -c %s "$T/db2") bytes"
	elif ! why=$(logs_clean r2 1 10000); then
		d9_fail reused-fds-disk-full "the host's log has foreign bytes: $why"
	else
		# every Park and Unpark is either in the trace or counted as dropped (write_error)
		d9_py reused-fds-disk-full '
c = one(f[0]); drv = one(f[1])
we = c["drops"]["by_reason"].get("write_error", 0)
if not we:
    fail("the disk was full but nothing was counted as lost: %s" % c["drops"])
q = c["data_quality"]
if q["truncated_segments"] or q["damaged_files"]:
    fail("the trace is not sealed: %s" % q)
want = 2 * drv["parks"]
if c["events"] + we < want:
    fail("%d events + %d dropped < %d parks and unparks: events lost without a count" %
         (c["events"], we, want))
info = "%d events written, %d counted as lost, database intact" % (c["events"], we)
' "$T/r2.json" "$T/r2.out"
	fi
fi

# ---- steal-while-writing ---------------------------------------------------------------------------
SLOW=$D9_ROOT/build/tests/slow-write.so
mkdir -p "$T/sw" "$T/sw.log"
env LD_PRELOAD="$LIB $SLOW" D9_TRACE_PATH="$T/sw/trace.bin" D9_FLUSH_INTERVAL=1ms D9_AGENT_FDS=shared \
	timeout -s KILL 60 "$DAEMON" --trace-dir "$T/sw" --log-dir "$T/sw.log" --turns 100 --logs 1 \
	--steal >"$T/sw.out" 2>"$T/sw.err"
D9_RC=$?
summary "$T/sw" "$T/sw.json"
if [ "$D9_RC" -ne 0 ]; then
	d9_fail steal-while-writing "daemon exit $D9_RC: $(head -c 300 "$T/sw.err")"
elif ! why=$(logs_clean sw 1 100); then
	d9_fail steal-while-writing "the host's log has foreign bytes: $why"
elif ls "$T/sw" | grep -q '\.active'; then
	d9_fail steal-while-writing "a segment was left unsealed: $(ls "$T/sw")"
else
	d9_py steal-while-writing '
c = one(f[0]); drv = one(f[1]); err = open(f[2]).read()
w = c["workers"]
we = c["drops"]["by_reason"].get("write_error", 0)
if len(w) != 1 or w[0]["parks"] > drv["parks"]:
    fail("parks %s in the trace, %d made" % ([x["parks"] for x in w], drv["parks"]))
elif c["events"] + we < 2 * drv["parks"] or c["drops"]["events"] != we:
    fail("%d events + %d counted lost < a Park and an Unpark for each of %d parks, drops %s" %
         (c["events"], we, drv["parks"], c["drops"]))
q = c["data_quality"]
if q["truncated_segments"] or q["damaged_files"]:
    fail("quality %s" % q)
lines = [l for l in err.splitlines() if "descriptor" in l]
if len(lines) != 1:
    fail("%d stderr lines about the descriptor: %r" % (len(lines), err[:300]))
if drv["stolen"] < 10:
    # usually 70 to 100; a make test at 8bcee0c saw 20 (three tests at a time, the writer
    # slow to take its segment back by name): every check above held, but with so few
    # takes the case was barely made
    skip("the daemon took the segment number only %d times in 100 turns (a loaded machine: "
         "the writer took it back too slowly)" % drv["stolen"])
info = "the number taken %d times mid-write, %d parks, %d events counted lost, log intact" % (
    drv["stolen"], drv["parks"], we)
' "$T/sw.json" "$T/sw.out" "$T/sw.err"
fi

# ---- planted-links -----------------------------------------------------------------------------------
# The daemon's pid is known before it starts (sh execs it), so every name it will use can be
# planted: links to a victim file, and the old predictable temporary names.
mkdir -p "$T/l/t" "$T/l.log"
printf 'victim\n' >"$T/victim"
timeout -s KILL 60 env LD_PRELOAD="$LIB" D9_TRACE_PATH="$T/l/t/trace.bin" D9_MAX_FILE_SIZE=1M \
	sh -c 'for s in 000000 000001 000002; do
		for x in .active.tmp .active .bin .bin.gz .bin.gz.tmp-$$ .recovering-$$; do
			ln -s "$1" "$2/trace.$$.$s$x"
		done
	done
	exec "$3" --trace-dir "$2" --log-dir "$4" --turns 500' \
	sh "$T/victim" "$T/l/t" "$DAEMON" "$T/l.log" >"$T/l.out" 2>"$T/l.err"
rc=$?
if [ "$rc" -ne 0 ]; then
	d9_fail planted-links "daemon exit $rc: $(head -c 300 "$T/l.err")"
elif [ "$(head -c 7 "$T/victim" | od -An -c | tr -d ' ')" != 'victim\n' ]; then
	d9_fail planted-links "the victim file was written: $(head -c 100 "$T/victim" | od -c | head -2)"
elif ! ls "$T/l/t" | grep -qE '^trace\.[0-9]+\.00000[3-9]\.bin(\.gz)?$'; then
	d9_fail planted-links "no segment of its own: $(ls "$T/l/t" | tr '\n' ' ')"
else
	# .bin or .bin.gz: compression at exit is best effort (2 s), and a loaded machine may not
	# give the nice-19 compressor that time
	d9_pass planted-links "victim intact, the trace went to new names"
fi

# ---- fifo-leftover --------------------------------------------------------------------------------------
# pid 4194304 is above every pid_max: never alive, so the FIFO looks like a dead process's file.
mkdir -p "$T/f"
mkfifo "$T/f/trace.4194304.000000.active"
daemon fifo "$T/f" -- --turns 300
if [ "$D9_RC" -ne 0 ]; then
	d9_fail fifo-leftover "daemon exit $D9_RC: $(head -c 300 "$T/fifo.err")"
elif grep -q 'did not finish' "$T/fifo.err"; then
	d9_fail fifo-leftover "the writer hung: $(head -c 300 "$T/fifo.err")"
elif ! grep -q 'not recovering .*trace.4194304.000000.active' "$T/fifo.err"; then
	d9_fail fifo-leftover "no message about the FIFO: $(head -c 300 "$T/fifo.err")"
elif [ ! -p "$T/f/trace.4194304.000000.active" ]; then
	d9_fail fifo-leftover "the FIFO was moved or removed"
else
	summary "$T/f" "$T/fifo.json"
	d9_py fifo-leftover '
c = one(f[0]); drv = one(f[1])
if [w["parks"] for w in c["workers"]] != [drv["parks"]]:
    fail("parks %s, %d made" % ([w["parks"] for w in c["workers"]], drv["parks"]))
info = "skipped with one line, %d parks traced" % drv["parks"]
' "$T/fifo.json" "$T/fifo.out"
fi

# ---- compress-after-failure --------------------------------------------------------------------------------
# 5 MiB tmpfs with 1.1 MiB free: segment 0 (1M) fills it, so compressing it fails; the test
# then frees the space and the next phase's segment must still be compressed. The disk is big
# enough for what can exist at once after that, however late the compressor (nice 19) comes on
# a loaded machine: segments 0 and 1, segment 2 growing to 1 MiB, segment 1's symbolized copy
# (1 MiB) and its .gz. On a 3 MiB disk, segment 2 filled it before a starved compressor got to
# segment 1, which then failed too, and was retried every 30 s into a disk still full. Any later
# segment will do, whatever its number: each segment the writer cannot open on the full disk
# (its head does not fit: removed at once) takes a number, and on a loaded machine segments 1 to
# 14 went that way before the filler was removed; segment 15 was then compressed.
if ! d9_mount_tmpfs "$T/cdisk" 5m; then
	d9_skip compress-after-failure "cannot mount a tmpfs: $D9_MOUNT_ERR"
else
	head -c $((5120 * 1024 - 1100 * 1024)) /dev/zero >"$T/cdisk/filler"
	mkdir "$T/cdisk/t"
	d9_bg pid "$T/c.out" "$T/c.err" D9_TRACE_PATH="$T/cdisk/t/trace.bin" D9_MAX_FILE_SIZE=1M D9_COMPRESS=1 \
		D9_FLUSH_INTERVAL=20ms -- -n 400000 --park-every 500 --sleep-us 100 --phases 3
	ok=1 why=""
	phase() { kill -USR1 "$pid"; d9_wait_for 120 grep -q "\"phase\":$1" "$T/c.out"; }
	if ! d9_wait_for 60 grep -q ready "$T/c.out" || ! phase 1; then
		ok=0 why="phase 1 did not end"
	elif ! d9_wait_for 120 grep -q 'cannot compress' "$T/c.err"; then
		ok=0 why="compression of a segment on a full disk did not fail: $(ls "$T/cdisk/t" | tr '\n' ' ')"
	else
		rm -f "$T/cdisk/filler"
		if ! phase 2; then
			ok=0 why="phase 2 did not end"
		elif ! d9_wait_for 120 sh -c "ls '$T/cdisk/t' | grep '\.bin\.gz$' | grep -qv '\.000000\.'"; then
			ok=0 why="the segment after the failure was not compressed: $(ls "$T/cdisk/t" | tr '\n' ' ')"
		fi
	fi
	kill -USR1 "$pid" 2>/dev/null
	d9_wait_pid "$pid" 60
	if [ "$ok" -eq 0 ]; then
		d9_fail compress-after-failure "$why"
	elif [ "$D9_RC" -ne 0 ]; then
		d9_fail compress-after-failure "driver exit $D9_RC: $(head -c 300 "$T/c.err")"
	elif ! ls "$T/cdisk/t" | grep -qE '\.000000\.bin(\.gz)?$'; then
		d9_fail compress-after-failure "segment 0 is gone: $(ls "$T/cdisk/t" | tr '\n' ' ')"
	else
		# segment 0 stays .bin until its retry, 30 s after the failure: compressed by then
		# only when the wait for segment 1 was that long
		d9_pass compress-after-failure "segment 0 failed (disk full), segment 1 compressed; now: $(ls "$T/cdisk/t" | grep -E '\.00000[01]\.' | tr '\n' ' ')"
	fi
fi

# ---- many-workers-fds ---------------------------------------------------------------------------------
# A thread-per-connection host under ulimit -n 1024: 950 threads each park (each a worker, each
# taking schedstat readings), then the host opens 100 files. The agent keeps no descriptor per
# worker, so every open succeeds (a kept schedstat descriptor per worker made 32 of 100 fail):
# at most 16 workers keep theirs (1 to 16 open at the agent's high numbers, 960 and up under this
# limit, while the threads wait, when the kernel has schedstat; a worker woken meanwhile may hold
# one more at a low number for the microseconds of its reading), none is left in a child forked
# then, none once every thread has ended. Before the fork the host replaces one kept number with
# a file of its own by a raw close (no interposer sees it) and F_DUPFD: neither the child's fork
# handler nor the threads' exits close that file, and its content stays the host's.
MANY=$D9_ROOT/build/tests/many-workers
mkdir -p "$T/mw"
( ulimit -n 1024 && env LD_PRELOAD="$LIB" D9_TRACE_PATH="$T/mw/trace.bin" \
	timeout -s KILL 120 "$MANY" 950 --replace "$T/mw/host.file" ) >"$T/mw.out" 2>"$T/mw.err"
rc=$?
if [ "$rc" -ne 0 ]; then
	d9_fail many-workers-fds "exit $rc: $(head -c 300 "$T/mw.err")"
else
	d9_py many-workers-fds '
r = one(f[0])
if r["threads"] < 900:
    fail("only %d threads started" % r["threads"])
if r["failed"]:
    fail("%d of 100 host opens failed (errno %d) with %d workers" % (r["failed"], r["errno"], r["threads"]))
kept = r["schedstat_high"]
if kept > 16 or (kept < 1 and os.path.exists("/proc/self/schedstat")):
    fail("%d schedstat descriptors kept high while the workers waited (want 1 to 16; %d in all)"
         % (kept, r["schedstat"]))
if r["schedstat_child"] != 0:
    fail("a child forked then had %d schedstat descriptors" % r["schedstat_child"])
if r["schedstat_after"] != 0:
    fail("%d schedstat descriptors left after every worker ended" % r["schedstat_after"])
if r["replaced"] == -2:
    fail("the host could not put its file at a kept number")
elif r["replaced"] >= 0 and not (r["replaced_child"] and r["replaced_after"]):
    fail("the program file at the replaced number %d: in the child %s, after the threads %s"
         % (r["replaced"], "kept" if r["replaced_child"] else "CLOSED",
            "kept" if r["replaced_after"] else "CLOSED or changed"))
info = ("%d workers, 100 of 100 host opens succeeded; %d schedstat files kept, none in a "
        "child, none after; the program file at replaced number %d left alone"
        % (r["threads"], kept, r["replaced"]))
' "$T/mw.out"
fi
