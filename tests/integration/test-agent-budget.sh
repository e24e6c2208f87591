#!/usr/bin/env bash
# test-agent-budget.sh: one budget for a trace directory, shared by every process writing to it
# (agent/budget.c; agent/DESIGN.md, "The directory budget").
#   - several processes (the driver and three forked children, each writing ~MBs) with
#     D9_MAX_TOTAL_SIZE=4M, D9_MAX_FILE_SIZE=1M, compression off (sizes are the real ones) and
#     on: once everything has settled, the directory holds at most the budget (1% slack); no
#     file is larger than D9_MAX_FILE_SIZE; the oldest segments went first whoever wrote them;
#     the deletions d9-analyze summary counts (the trailers' running count) equal the files the
#     agents deleted (their D9_LOG=debug lines, one per file), and every segment missing from a
#     kept series is one of them.
#   - a fork storm under LD_PRELOAD (fork-storm.c: 500 children, each waits in epoll_wait twice
#     and exits, 4 alive at once) with D9_MAX_TOTAL_SIZE=2M and the default D9_MAX_FILES (256):
#     at most 256 segment files and 2M remain, every process's segment is either kept or counted
#     as deleted, and the analyzer's count is the number deleted.
#   - a pre-forked server under LD_PRELOAD (fork-storm.c -w: 4 workers, each parks in epoll_wait as
#     fast as it can for 3 s) with D9_MAX_TOTAL_SIZE=4M, D9_MAX_FILE_SIZE=1M and the defaults
#     (compression, symbols): the same bounds and counts.
#   - the estimate in the lock file spares scans (two storms of 200 children: defaults, and
#     limits that make every later look delete): spared looks counted, the same bounds and counts.
#   - a link planted as <stem>.lock is never followed, a hard link never opened, a file that is
#     not a ledger never written over: the agent keeps the budget alone (or uncounted there),
#     says so once, and the file is untouched.
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-budget

# deleted_names ERR...: the segment names the agents' debug lines say they deleted, one a line
deleted_names() { cat "$@" | sed -n 's|^d9\[[0-9]*\]: deleted .*/\([^/ ]*\) (directory budget)$|\1|p'; }

# summary_json DIR OUT: d9-analyze summary --json of DIR into OUT
summary_json() { timeout -s KILL 120 "$ANALYZE" summary --json "$1" >"$2" 2>"$2.err"; }

# ---- several processes, one directory --------------------------------------------------------------
# multi NAME COMPRESS: the driver with 2 recording threads forks 3 children while it records
# (each child records on its own thread); 4 processes write ~25 MB into one directory.
multi() {
	local name=$1 compress=$2 d=$T/$1
	mkdir -p "$d"
	d9_run "$T/$name.out" "$T/$name.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_TOTAL_SIZE=4M \
		D9_MAX_FILE_SIZE=1M D9_COMPRESS="$compress" D9_LOG=debug -- \
		-t 2 -n 1500000 --park-every 2000 --sleep-us 100 --forks 3
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		d9_fail "$name" "driver exited $rc: $(grep -v '^d9\[[0-9]*\]: \(deleted\|segment\)' "$T/$name.err" | head -c 300)"
		return
	fi
	# every process has ended (the driver waits for its children); an exiting process leaves
	# the compression it has not done (its last .bin files), so only temporary files are waited
	# for
	if ! d9_wait_settled "$d"; then
		d9_fail "$name" "$D9_SETTLE_ERR"
		return
	fi
	deleted_names "$T/$name.err" >"$T/$name.deleted"
	summary_json "$d" "$T/$name.json"
	d9_py "$name" '
import re
drv = parent(f[0]); kids = children(f[0]); d = f[1]; summ = one(f[2])
deleted = open(f[3]).read().split()
limit = 4 * 1048576
names = [n for n in files(d) if n.endswith(".bin") or n.endswith(".bin.gz")]
other = [n for n in files(d) if n not in names]
if other:
    fail("files left beside the segments: %s" % other)
pids = [drv["pid"]] + [k["pid"] for k in kids]
if len(kids) != 3:
    fail("%d children reported, expected 3" % len(kids))
# preconditions: the test means something only if the processes wrote well over the budget
if not deleted:
    fail("nothing was deleted: the processes did not exceed the budget (%s)" % names)
total = sum(os.path.getsize(os.path.join(d, n)) for n in names)
if total > limit * 1.01:
    fail("%d bytes of segments in the directory, over D9_MAX_TOTAL_SIZE=4M (+1%%): %s" % (total, names))
big = [(n, os.path.getsize(os.path.join(d, n))) for n in names if os.path.getsize(os.path.join(d, n)) > 1048576]
if big:
    fail("segments larger than D9_MAX_FILE_SIZE=1M: %s" % big)
# the count the trace carries (trailers) is the number of files the agents deleted
dq = summ["data_quality"]
if dq["budget_deleted_segments"] != len(deleted) or len(set(deleted)) != len(deleted):
    fail("d9-analyze counts %d deleted segments, the agents deleted %d (%d distinct)"
         % (dq["budget_deleted_segments"], len(deleted), len(set(deleted))))
back = [n for n in deleted if n in names or n + ".gz" in names or (n.endswith(".gz") and n[:-3] in names)]
if back:
    fail("deleted segments are back in the directory: %s" % back[:3])
# every segment missing from a kept series was deleted by a budget (no file lost uncounted)
gone = set(re.sub(r"\.bin(\.gz)?$", "", n) for n in deleted)
series = {}
for n in names:
    m = re.match(r"trace\.(\d+)\.(\d+)\.bin", n)
    series.setdefault(int(m.group(1)), []).append(int(m.group(2)))
for pid, seqs in series.items():
    for q in range(max(seqs)):
        if q not in seqs and "trace.%d.%06d" % (pid, q) not in gone:
            fail("trace.%d.%06d is missing and no agent deleted it" % (pid, q))
    # oldest first: what is kept of a process is the newest part of its series
    if sorted(seqs) != list(range(min(seqs), max(seqs) + 1)):
        fail("pid %d: kept segments %s are not the newest of its series" % (pid, sorted(seqs)))
writers = set(int(re.match(r"trace\.(\d+)\.", n).group(1)) for n in deleted + names)
if not writers <= set(pids) or len(writers) < 4:
    fail("segments of pids %s, the processes were %s" % (sorted(writers), pids))
# oldest first, whoever wrote them: some process deleted another one'"'"'s segments
err = open(f[4]).read()
cross = re.findall(r"^d9\[(\d+)\]: deleted .*/trace\.(\d+)\.", err, re.M)
if not any(a != b for a, b in cross):
    fail("every process deleted only its own segments")
info = "%d bytes in %d segments kept, %d deleted (analyzer %d)" % (total, len(names), len(deleted),
    dq["budget_deleted_segments"])
' "$T/$name.out" "$d" "$T/$name.json" "$T/$name.deleted" "$T/$name.err"
}
multi budget-shared 0
multi budget-shared-gz 1

# storm_check NAME DIR RC PROCS FILES BYTES MIN_SPARED: a storm that exited RC (its output in
# $T/NAME.out, stderr in $T/NAME.err), its directory once settled: PROCS processes reported, at
# most FILES segment files and BYTES bytes (1% slack) left, each process's segment either kept
# or deleted (the agents' debug lines), the analyzer's count of deletions equal, and at least
# MIN_SPARED looks that skipped the scan (the estimate, below).
storm_check() {
	local name=$1 d=$2 rc=$3
	shift 3
	if [ "$rc" -ne 0 ]; then
		d9_fail "$name" "fork-storm exited $rc: $(grep -v '^d9\[[0-9]*\]: ' "$T/$name.err" | head -c 300)"
		return
	elif ! d9_wait_settled "$d"; then
		d9_fail "$name" "$D9_SETTLE_ERR"
		return
	fi
	deleted_names "$T/$name.err" >"$T/$name.deleted"
	summary_json "$d" "$T/$name.json"
	d9_py "$name" '
import re
procs, max_files, max_bytes, min_spared = (int(v) for v in f[5:9])
lines = open(f[0]).read().split("\n")
pids = set(int(l.split()[1]) for l in lines if l.startswith("child ") or l.startswith("parent "))
spared = sum(1 for l in open(f[4]) if ": no scan, the estimate of " in l)
d = f[1]; summ = one(f[2]); deleted = open(f[3]).read().split()
names = [n for n in files(d) if n.endswith(".bin") or n.endswith(".bin.gz")]
if len(pids) != procs:
    fail("%d processes reported, expected %d" % (len(pids), procs))
if len(names) > max_files:
    fail("%d segment files left, over D9_MAX_FILES=%d" % (len(names), max_files))
total = sum(os.path.getsize(os.path.join(d, n)) for n in names)
if total > max_bytes * 1.01:
    fail("%d bytes left, over D9_MAX_TOTAL_SIZE=%d" % (total, max_bytes))
def pid_of(n):
    return int(re.match(r"trace\.(\d+)\.", n).group(1))
kept = [pid_of(n) for n in names]; gone = [pid_of(n) for n in deleted]
if sorted(kept + gone) != sorted(pids):
    missing = sorted(pids - set(kept + gone))[:5]
    fail("kept + deleted segments are not one per process: %d kept, %d deleted, %d processes, "
         "missing %s (their files: %s)" % (len(kept), len(gone), len(pids), missing,
         [n for n in files(d) if any(".%d." % m in n for m in missing)]))
dq = summ["data_quality"]
if dq["budget_deleted_segments"] != len(deleted):
    fail("d9-analyze counts %d deleted segments, the agents deleted %d"
         % (dq["budget_deleted_segments"], len(deleted)))
if spared < min_spared:
    fail("%d looks skipped the scan, expected %d at least" % (spared, min_spared))
info = "%d files (%d bytes) kept, %d deleted (analyzer %d), %d looks skipped the scan" % (
    len(names), total, len(deleted), dq["budget_deleted_segments"], spared)
' "$T/$name.out" "$d" "$T/$name.json" "$T/$name.deleted" "$T/$name.err" "$1" "$2" "$3" "$4"
}

# ---- a fork storm -----------------------------------------------------------------------------------
storm=$T/fork-storm
if [ ! -e "$D9_ROOT/build/libd9agent.so" ]; then
	d9_fail budget-fork-storm "build/libd9agent.so is not built (make all)"
elif ! ${CC:-cc} -O2 -o "$storm" "$D9_ROOT/tests/integration/fork-storm.c" 2>"$T/cc.err"; then
	d9_skip budget-fork-storm "cannot build fork-storm.c: $(head -c 200 "$T/cc.err")"
else
	d=$T/storm
	mkdir -p "$d"
	# D9_EXIT_TIMEOUT=10s: each child seals its one segment at exit; with the default 100 ms a
	# loaded machine left one .active (correct behaviour, the next start recovers it), and this
	# test counts sealed segments (test-preload-exits does the same)
	{ env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" D9_TRACE_PATH="$d/trace.bin" \
		D9_MAX_TOTAL_SIZE=2M D9_LOG=debug D9_EXIT_TIMEOUT=10s \
		timeout -s KILL $((300 * D9_SLOW)) "$storm" 500 4 \
		>"$T/budget-fork-storm.out" 2>"$T/budget-fork-storm.err"; } 2>/dev/null
	storm_check budget-fork-storm "$d" $? 501 256 $((2 * 1048576)) 0
fi

# ---- the estimate that spares a scan ---------------------------------------------------------------
# The lock file also holds an estimate of the directory (bytes, files, when scanned); a look
# within a second of a scan, with room for half the budget after adding one whole segment and
# a file, adds them and skips the scan (agent/budget.c). Two storms of 200 children, 4 at once:
#   - defaults but D9_MAX_FILES=2000 (1G, 64M segments: 8 looks per scan can be spared): at
#     least a third of the 201 looks say "no scan" (D9_LOG=debug), and every segment is kept;
#   - D9_MAX_TOTAL_SIZE=64M, D9_MAX_FILE_SIZE=1M, D9_MAX_FILES=40: looks are spared until the
#     estimate reaches 20 files, then every look scans and deletes: at most 40 files and 64M
#     remain, every process's segment is kept or counted as deleted, and the analyzer agrees.
estimate_storm() {
	local name=$1 d=$T/$1
	shift
	mkdir -p "$d"
	{ env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" D9_TRACE_PATH="$d/trace.bin" D9_LOG=debug \
		D9_EXIT_TIMEOUT=10s "$@" timeout -s KILL $((300 * D9_SLOW)) "$storm" 200 4 \
		>"$T/$name.out" 2>"$T/$name.err"; } 2>/dev/null
	ESTORM_RC=$?
}
if [ ! -x "$storm" ]; then
	d9_skip budget-estimate "fork-storm.c was not built (above)"
else
	estimate_storm est-loose D9_MAX_FILES=2000
	if [ "$ESTORM_RC" -ne 0 ]; then
		d9_fail budget-estimate "fork-storm exited $ESTORM_RC: $(grep -v '^d9\[[0-9]*\]: ' "$T/est-loose.err" | head -c 300)"
	elif ! d9_wait_settled "$T/est-loose"; then
		d9_fail budget-estimate "$D9_SETTLE_ERR"
	else
		d9_py budget-estimate '
lines = open(f[0]).read().split("\n")
procs = [l for l in lines if l.startswith("child ") or l.startswith("parent ")]
spared = sum(1 for l in open(f[1]) if ": no scan, the estimate of " in l)
names = [n for n in files(f[2]) if n.endswith(".bin") or n.endswith(".bin.gz")]
if len(procs) != 201:
    fail("%d processes reported, expected 201" % len(procs))
if spared * 3 < len(procs):
    fail("%d of %d looks spared the scan, expected a third at least" % (spared, len(procs)))
if len(names) != 201:
    fail("%d segments kept, expected 201 (nothing to delete)" % len(names))
info = "%d of %d looks spared the scan, %d segments kept" % (spared, len(procs), len(names))
' "$T/est-loose.out" "$T/est-loose.err" "$T/est-loose"
	fi
	estimate_storm budget-estimate-bounds D9_MAX_TOTAL_SIZE=64M D9_MAX_FILE_SIZE=1M D9_MAX_FILES=40
	storm_check budget-estimate-bounds "$T/budget-estimate-bounds" "$ESTORM_RC" 201 40 \
		$((64 * 1048576)) 1
fi

# ---- a pre-forked server under LD_PRELOAD ----------------------------------------------------------
if [ -x "$storm" ]; then
	d=$T/workers
	mkdir -p "$d"
	# the workers exit together and each keeps the budget in turn under the lock, waiting up to a
	# quarter of D9_EXIT_TIMEOUT: 10 s, so that a loaded machine cannot make one give up
	{ env LD_PRELOAD="$D9_ROOT/build/libd9agent.so" D9_TRACE_PATH="$d/trace.bin" \
		D9_MAX_TOTAL_SIZE=4M D9_MAX_FILE_SIZE=1M D9_LOG=debug D9_EXIT_TIMEOUT=10s \
		timeout -s KILL $((120 * D9_SLOW)) "$storm" -w 4 3 >"$T/workers.out" 2>"$T/workers.err"; } 2>/dev/null
	rc=$?
	if [ "$rc" -ne 0 ]; then
		d9_fail budget-workers "fork-storm -w exited $rc: $(grep -v '^d9\[[0-9]*\]: \(deleted\|segment\|tracing\)' "$T/workers.err" | head -c 300)"
	elif ! d9_wait_settled "$d"; then
		d9_fail budget-workers "$D9_SETTLE_ERR"
	else
		deleted_names "$T/workers.err" >"$T/workers.deleted"
		summary_json "$d" "$T/workers.json"
		d9_py budget-workers '
import re
lines = open(f[0]).read().split("\n")
kids = set(int(l.split()[1]) for l in lines if l.startswith("child "))
d = f[1]; summ = one(f[2]); deleted = open(f[3]).read().split()
names = [n for n in files(d) if n.endswith(".bin") or n.endswith(".bin.gz")]
if not deleted:
    fail("nothing was deleted: the workers did not exceed the budget (%s)" % names)
total = sum(os.path.getsize(os.path.join(d, n)) for n in names)
if total > 4 * 1048576 * 1.01:
    fail("%d bytes left, over D9_MAX_TOTAL_SIZE=4M" % total)
big = [n for n in names if os.path.getsize(os.path.join(d, n)) > 1048576]
if big:
    fail("segments larger than D9_MAX_FILE_SIZE=1M: %s" % big)
dq = summ["data_quality"]
if dq["budget_deleted_segments"] != len(deleted):
    fail("d9-analyze counts %d deleted segments, the agents deleted %d"
         % (dq["budget_deleted_segments"], len(deleted)))
writers = set(int(re.match(r"trace\.(\d+)\.", n).group(1)) for n in names + deleted)
if writers != kids:
    fail("segments of pids %s, the workers were %s" % (sorted(writers), sorted(kids)))
parks = [w["parks"] for w in summ["workers"] if w["pid"] in kids]
if not parks or not all(parks):
    fail("workers in the summary: %s" % [(w["pid"], w["parks"]) for w in summ["workers"]])
info = "%d bytes in %d segments kept, %d deleted (analyzer %d)" % (total, len(names), len(deleted),
    dq["budget_deleted_segments"])
' "$T/workers.out" "$d" "$T/workers.json" "$T/workers.deleted"
	fi
fi

# ---- a link or a foreign file planted as the lock file ---------------------------------------------
# A symbolic link is never followed (O_NOFOLLOW), a hard link (a second name of a file that may be
# outside the trace directory: fs.protected_hardlinks=0 lets anyone make one to root's files) is
# never opened, a regular file that holds something else than a ledger is never written over: the
# file stays as it was, the agent says once that it keeps the budget alone (or does not count
# there), and the process's own budget still holds.
planted_lock() {
	local name=budget-planted-lock$1 how=$1 d=$T/planted$1
	mkdir -p "$d"
	chmod 700 "$d"
	printf 'not d9s\n' >"$T/victim$how"
	case $how in
	"") ln -s "$T/victim$how" "$d/trace.lock" ;;
	-hardlink) ln "$T/victim$how" "$d/trace.lock" ;;
	-foreign) mv "$T/victim$how" "$d/trace.lock" && ln -s "$d/trace.lock" "$T/victim$how" ;;
	esac
	d9_run "$T/planted$how.out" "$T/planted$how.err" D9_TRACE_PATH="$d/trace.bin" D9_MAX_TOTAL_SIZE=2M \
		D9_MAX_FILE_SIZE=1M D9_COMPRESS=0 -- -t 2 -n 600000 --park-every 2000 --sleep-us 100
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		d9_fail "$name" "driver exited $rc: $(head -c 300 "$T/planted$how.err")"
	elif ! d9_wait_settled "$d"; then
		d9_fail "$name" "$D9_SETTLE_ERR"
	else
		d9_py "$name" '
d, how = f[0], f[3]; err = open(f[1]).read()
lock = os.path.join(d, "trace.lock")
if open(f[2], "rb").read() != b"not d9s\n" or os.path.islink(lock) != (how == ""):
    fail("the planted lock file or what it names changed")
if how == "-hardlink" and os.stat(lock).st_nlink != 2:
    fail("the hard link lost a name")
said = [l for l in err.splitlines() if "budget lock file" in l]
if len(said) != 1:
    fail("%d lines about the lock file, expected 1: %s" % (len(said), said[:2]))
names = [n for n in files(d) if n.endswith(".bin")]
total = sum(os.path.getsize(os.path.join(d, n)) for n in names)
if len(names) < 2 or total > 2 * 1048576:
    fail("%d segments, %d bytes with D9_MAX_TOTAL_SIZE=2M" % (len(names), total))
info = said[0]
' "$d" "$T/planted$how.err" "$T/victim$how" "$how"
	fi
}
planted_lock ""
planted_lock -hardlink
planted_lock -foreign

# ---- an exit while the compressor waits for the directory lock ------------------------------------
# The compressor writes the whole .gz under a temporary name, then takes the directory's lock to
# rename it. Another process holds that lock here; the program exits while the compressor waits
# for it (its thread sleeping between tries, the temporary file complete). The exit removes the
# temporary file (the .bin stays for the next start): an exiting process leaves none behind.
d=$T/lockwait
mkdir -p "$d"
# D9_EXIT_TIMEOUT=1ms: the exit does not wait for the writer (whose own budget waits for the lock
# too), so nothing else gives the compressor time to clean up after itself
d9_bg lw_pid "$T/lockwait.out" "$T/lockwait.err" D9_TRACE_PATH="$d/trace.bin" \
	D9_ROTATION_PERIOD=1s D9_EXIT_TIMEOUT=1ms D9_COMPRESS=1 -- -t 1 -n 100000000 --sleep-every 1000 \
	--sleep-us 1000 --exit hang
# compress_tid PID: the d9-compress thread of PID
compress_tid() {
	local f
	for f in /proc/"$1"/task/*; do
		[ "$(cat "$f/comm" 2>/dev/null)" = d9-compress ] && { basename "$f"; return 0; }
	done
	return 1
}
# lock_waiting PID: a temporary .gz of PID exists and its compressor sleeps between tries for
# the lock (nanosleep, clock_nanosleep: its other waits are on futexes)
lock_waiting() {
	local tid nr
	ls "$d"/trace."$1".*.tmp-"$1".* >/dev/null 2>&1 || return 1
	tid=$(compress_tid "$1") || return 1
	nr=$(cut -d' ' -f1 "/proc/$1/task/$tid/syscall" 2>/dev/null)
	[ "$nr" = 35 ] || [ "$nr" = 230 ]
}
if ! d9_wait_for 60 eval 'ls "$d"/*.bin.gz >/dev/null 2>&1'; then
	d9_fail budget-exit-lock-wait "no segment was compressed: $(ls "$d" | tr '\n' ' ') $(head -c 300 "$T/lockwait.err")"
	d9_kill "$lw_pid"
else
	# the lock file exists now (the compressor took it); hold it until told to stop
	python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
while os.path.exists(sys.argv[2]):
    time.sleep(0.05)' "$d/trace.lock" "$T/lockwait.held" &
	holder=$!
	D9_BG_PIDS+=("$holder")
	if ! d9_wait_for 30 test -e "$T/lockwait.held"; then
		d9_fail budget-exit-lock-wait "the test could not take $d/trace.lock"
		d9_kill "$lw_pid"
	elif ! d9_wait_for 60 lock_waiting "$lw_pid"; then
		d9_fail budget-exit-lock-wait "the compressor did not wait for the lock with a temporary file: $(ls "$d" | tr '\n' ' ')"
		d9_kill "$lw_pid"
	else
		tmp=$(ls "$d"/trace."$lw_pid".*.tmp-"$lw_pid".* 2>/dev/null | head -1)
		d9_kill "$lw_pid" TERM
		left=$(ls "$d" | grep "\.tmp-$lw_pid\." | tr '\n' ' ')
		bin=${tmp%.gz.tmp-*}
		if [ -n "$left" ]; then
			d9_fail budget-exit-lock-wait "the exit left $left"
		elif [ -z "$tmp" ] || [ ! -e "$bin" ]; then
			# the job's segment stays .bin for the next start: nothing lost
			d9_fail budget-exit-lock-wait "the segment of ${tmp:-the temporary file} is gone: $(ls "$d" | tr '\n' ' ')"
		else
			d9_pass budget-exit-lock-wait "$(basename "$tmp") removed at the exit (the lock was held elsewhere), $(basename "$bin") kept"
		fi
	fi
	rm -f "$T/lockwait.held"
	wait "$holder" 2>/dev/null
fi
