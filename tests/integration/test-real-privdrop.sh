#!/usr/bin/env bash
# test-real-privdrop.sh: a root process forks a child that gives up root (setgroups, setgid,
# setuid to nobody), the way daemons do; the trace directory is root's, mode 0700. The program
# (priv-drop.c, built here) waits in epoll_wait before and after; run as "early" (the child drops
# before it records anything, like nginx's workers) and "late" (the child's agent already wrote a
# segment as root when it drops).
#   - privdrop-MODE: the program exits 0; the child's series is in the directory and in
#     d9-uid-<nobody> (late: its first segment in the directory, later ones in the subdirectory),
#     read by `d9-analyze summary` given the directory alone; the child's loop turns are all
#     there (one fewer than its waits, or as many); the parent's series is untouched, in the
#     directory; the child (only) carries the drop: from uid 0 to nobody's uid; the parent's
#     thread is named pd-renamed (it renamed itself with prctl(PR_SET_NAME) after its segment
#     was open, so only the rename itself can have told the agent).
#   - privdrop-caps, privdrop-caps-late: "early" and "late" with the child giving up every
#     capability but CAP_SETUID before its setuid, as dnsmasq does: the same checks (before,
#     the agent could not give the child a directory, and the child recorded nothing).
#   - privdrop-jail, privdrop-jail-late: with D9_CHROOT=follow, "early" and "late" with the
#     child changing its root
#     directory to an empty directory first (chroot(), then syscall(SYS_chroot)), as HAProxy's
#     and bind9's workers do: the same checks, and nothing made inside the new root (before,
#     the agent made the trace directory's path in it, and recorded nothing).
#   - privdrop-jail-stop, privdrop-jail-stop-late: the default, D9_CHROOT=stop: tracing stops at
#     the child's chroot, said once; nothing made in the new root; a child that recorded before
#     (late) has its series sealed in the trace directory, before the call, and its trace says
#     why it ends there (a RecorderState chroot off).
#   - privdrop-jail-open, privdrop-jail-proc, privdrop-jail-seccomp: with D9_CHROOT=follow, the
#     chroots the agent still does not follow, because its descriptor of a trace directory others
#     may search (0755), or the new root's /proc, would lead the child out of its jail, or
#     because its threads could not keep a root of their own (a seccomp filter): said once, with
#     the reason, before the chroot where it can be, so the seal still sees the trace directory;
#     nothing made in the new root.
#   - privdrop-MODE-access: nothing is opened to others: the directory stays root's and 0700, the
#     subdirectory is nobody's and 0700 (caps: root's, 0770 with an ACL that lets nobody alone
#     in), every segment file is its writer's and 0600, and no temporary file is left.
#   - privdrop-caps-again-early, privdrop-caps-again-caps: "caps" again over early's
#     subdirectory (nobody's 0700, which root without CAP_DAC_OVERRIDE opens as nobody) and
#     caps' (root's with the ACL, kept as it is): the child's series there, the form unchanged.
#   - privdrop-refused-at-drop: a child that changes user before anything in its process recorded
#     (squid does), with the trace directory's parent writable by others: the child's agent,
#     which cannot enter the directory once it starts, says once why root refused it at the drop
#     (before: only "Permission denied"); nothing is written.
#   - privdrop-refused-calls: a program that gave up every capability on its own thread while the
#     agent's threads run makes set*id calls the kernel refuses it: each fails with EPERM (before,
#     glibc aborted the process: the agent's threads' calls succeeded); changes to its own ids
#     still work.
#   - privdrop-budget, privdrop-budget-caps: "busy" (and "busy-caps": the child's drop as in
#     caps, its directory root's with an ACL): root and its dropped child record blocking calls
#     fast, until the budget deleted 4 segments, under D9_MAX_TOTAL_SIZE=3M: once both ended the whole tree
#     (root's directory and the child's d9-uid one) holds at most 3M +1%, kept by root, which may
#     delete in both; deletions counted.
#   - privdrop-stacks: the dropped child's BlockingCall stacks reach main (DWARF unwinding after
#     the drop, priv-drop being built without frame pointers), and the agent never says it cannot
#     read the module map.
# Skips (counted, with the reason) when not run as root or the machine has no user nobody.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=privdrop
pl_need_built "$NAME"
if [ "$(id -u)" != 0 ]; then
	pl_skip "$NAME" "needs root (a process that gives up root)"
	exit 0
fi
if ! NUID=$(id -u nobody 2>/dev/null) || ! NGID=$(id -g nobody 2>/dev/null); then
	pl_skip "$NAME" "no user nobody"
	exit 0
fi
pl_env "$NAME"

if ! cc -O1 -o "$T/priv-drop" "$PL_ROOT/tests/integration/priv-drop.c" 2>"$T/cc.err"; then
	pl_fail "$NAME" "cannot build priv-drop.c: $(head -c 300 "$T/cc.err")"
	exit 0
fi
# the dropped child reads its own executable's unwind tables (libdw opens the file by path), as a
# daemon in /usr/sbin can: the test directory must let it through to the binary
chmod 0711 "$T"

for mode in early late jail jail-late caps caps-late; do
	d=$T/$mode
	mkdir -m 0700 "$d"
	mkdir -m 0755 "$T/$mode.jail"
	timeout -s KILL 120 env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d" D9_FLUSH_INTERVAL=50ms \
		PD_JAIL="$T/$mode.jail" D9_CHROOT=follow \
		"$T/priv-drop" "$mode" "$d" "$NUID" "$NGID" >"$T/$mode.out" 2>"$T/$mode.err"
	rc=$?
	if [ "$rc" != 0 ]; then
		pl_fail "$NAME-$mode" "exit status $rc: $(head -c 300 "$T/$mode.err")"
		continue
	fi
	# the compressor of each process finished (or the process had none left to do)
	d9_wait_settled "$d" || true # sealed: a compression the exit left stays .bin
	d9_wait_settled "$d/d9-uid-$NUID" || true
	"$PL_ANALYZE" summary --json "$d" >"$T/$mode.json" 2>"$T/$mode.aerr"
	arc=$?
	python3 - "$NAME-$mode" "$mode" "$d" "$NUID" "$T/$mode.json" "$arc" "$T/$mode.out" \
		"$T/$mode.err" "$T/$mode.aerr" "$T/$mode.jail" <<'PY'
import json, os, re, stat, struct, sys
name, mode, d, nuid, js, arc, out, err, aerr, jail = sys.argv[1:]
nuid = int(nuid)
jailed = mode.startswith("jail")
capsmode = mode.startswith("caps")
mode = {"jail": "early", "jail-late": "late", "caps": "early", "caps-late": "late"}.get(mode, mode)
def result(case, why, info=""):
    print("FAIL %s: %s" % (case, why) if why else "PASS %s%s" % (case, ": " + info if info else ""))
def check():
    if arc != "0":
        return "d9-analyze summary exited %s: %s" % (arc, open(aerr).read()[:300])
    runs = dict((m.group(1), (int(m.group(2)), int(m.group(3))))
                for m in re.finditer(r"^(child|parent) (\d+) turns (\d+)$", open(out).read(), re.M))
    if set(runs) != {"child", "parent"}:
        return "the program printed %r" % open(out).read()[:200]
    s = json.load(open(js))
    procs = dict((p["pid"], p) for p in s["processes"])
    sub = os.path.join(d, "d9-uid-%d" % nuid)
    top = [f for f in os.listdir(d) if f.startswith("trace.")]
    low = os.listdir(sub) if os.path.isdir(sub) else []
    cpid, cturns = runs["child"]
    ppid, pturns = runs["parent"]
    for pid in (cpid, ppid):
        if pid not in procs:
            return "no process %d in the summary (processes %s)" % (pid, sorted(procs))
    mine = lambda names, pid: [f for f in names if f.startswith("trace.%d." % pid)]
    if not mine(low, cpid):
        return "no segment of the child in %s (%s)" % (sub, low)
    if mode == "late" and not mine(top, cpid):
        return "the child's first segment (written as root) is not in %s (%s)" % (d, top)
    if mode == "early" and mine(top, cpid):
        return "the child wrote into %s before it recorded anything: %s" % (d, mine(top, cpid))
    if not mine(top, ppid) or mine(low, ppid):
        return "the parent's series is not (only) in %s: %s / %s" % (d, top, low)
    for pid, waits in ((cpid, cturns), (ppid, pturns)):
        turns = sum(w["polls"] for w in s["workers"] if w["pid"] == pid)
        if not waits - 1 <= turns <= waits:
            return "process %d: %d loop turns in the trace, %d waits made" % (pid, turns, waits)
    pv = procs[cpid].get("privileges")
    if not pv or pv["from_uid"] != 0 or pv["to_uid"] != nuid:
        return "the child's drop is not in the summary: %s" % pv
    pnames = [w["name"] for w in s["workers"] if w["pid"] == ppid]
    if pnames != ["pd-renamed"]:
        return "the parent's thread is named %s, expected pd-renamed (prctl)" % pnames
    if procs[ppid].get("privileges"):
        return "the parent, which kept root, is said to have dropped: %s" % procs[ppid]["privileges"]
    # in the new root there is no /proc: the child's schedstat readings are unknown (said, and
    # said to be the chroot's doing: not a broken procfs)
    lines = [l for l in open(err).read().splitlines() if l.startswith("d9")]
    bad = [l for l in lines if "privileges dropped" not in l
           and not (jailed and "/proc/thread-self/schedstat" in l)]
    if bad:
        return "the agent said: %s" % bad[:2]
    if jailed and [l for l in lines if "/proc/thread-self/schedstat" in l and "chroot" not in l]:
        return "the schedstat line does not name the chroot: %s" % [l for l in lines if "schedstat" in l][:1]
    if jailed and os.listdir(jail):
        return "the agent made %s inside the child's new root %s" % (os.listdir(jail), jail)
    return None
why = check()
result(name, why, "" if why else "child and parent series read from one directory")

def access():
    st = os.lstat(d)
    if st.st_uid != 0 or stat.S_IMODE(st.st_mode) != 0o700:
        return "%s is uid %d mode %o" % (d, st.st_uid, stat.S_IMODE(st.st_mode))
    sub = os.path.join(d, "d9-uid-%d" % nuid)
    st = os.lstat(sub)
    # the child kept no CAP_CHOWN for its setuid (caps): the subdirectory stays root's, with an
    # ACL that lets that user alone in (mode 0770: the group bits are the ACL's mask)
    want = (0, 0o770) if capsmode else (nuid, 0o700)
    if (st.st_uid, stat.S_IMODE(st.st_mode)) != want or not stat.S_ISDIR(st.st_mode):
        return "%s is uid %d mode %o, expected uid %d mode %o" % (sub, st.st_uid, stat.S_IMODE(st.st_mode), want[0], want[1])
    if capsmode:
        acl = os.getxattr(sub, "system.posix_acl_access")
        # version 2; user obj rwx, user nobody rwx, group obj ---, mask rwx, other ---
        ents = [struct.unpack_from("<HHI", acl, 4 + 8 * i) for i in range((len(acl) - 4) // 8)]
        want_acl = [(1, 7, 0xffffffff), (2, 7, nuid), (4, 0, 0xffffffff), (0x10, 7, 0xffffffff), (0x20, 0, 0xffffffff)]
        if acl[:4] != b"\x02\0\0\0" or ents != want_acl:
            return "%s has the ACL %s, expected %s" % (sub, ents, want_acl)
    for dd, owner_of in ((d, 0), (sub, nuid)):
        for f in os.listdir(dd):
            p = os.path.join(dd, f)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                continue
            if ".tmp" in f or ".recovering" in f:
                return "left behind: %s" % p
            # the sticky bit marks a finished .bin (D9_COMPRESS=auto): no access of anyone's
            if st.st_uid != owner_of or stat.S_IMODE(st.st_mode) & ~stat.S_ISVTX != 0o600:
                return "%s is uid %d mode %o, expected uid %d 0600 (or 1600)" % (p, st.st_uid, stat.S_IMODE(st.st_mode), owner_of)
    return None
why = access()
result(name + "-access", why)
PY
done

# ---- chroots the agent does not follow -----------------------------------------------------------
# jail-open: the trace directory is 0755 (others may search it: its descriptor in the child's table
# would lead out of the jail); jail-proc: the new root has a /proc (mounted in a mount namespace
# of the run's own), through which the child could reach the agent threads' root. Either way the
# child's agent says once that tracing stops at the chroot, with the reason, and the program
# still exits 0 with nothing made in the new root (but the /proc mount point) and nothing of the
# child's outside the trace directory's own files.
for mode in jail-stop jail-stop-late jail-open jail-proc jail-seccomp; do
	d=$T/$mode
	mkdir -m 0700 "$d"
	[ "$mode" = jail-open ] && chmod 0755 "$d"
	mkdir -m 0755 "$T/$mode.jail"
	follow=follow prog=jail
	case $mode in jail-stop*) follow=stop ;; esac
	[ "$mode" = jail-stop-late ] && prog=jail-late
	run=(env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d" D9_FLUSH_INTERVAL=50ms PD_JAIL="$T/$mode.jail"
		D9_CHROOT=$follow "$T/priv-drop" "$prog" "$d" "$NUID" "$NGID")
	# under a seccomp filter (no-perf's: it refuses perf_event_open) the agent's threads make
	# no unshare, so they could not keep a root of their own
	[ "$mode" = jail-seccomp ] && run=("${run[@]:0:6}" "$PL_ROOT/build/tests/no-perf" "${run[@]:6}")
	if [ "$mode" = jail-proc ]; then
		mkdir -m 0755 "$T/$mode.jail/proc"
		# (a container may give a mount namespace but refuse a proc mount in it)
		if ! command -v unshare >/dev/null || ! unshare -m --propagation private \
			sh -c 'mount -t proc proc "$0"' "$T/$mode.jail/proc" 2>/dev/null; then
			pl_skip "$NAME-$mode" "no mount namespace with a proc mount here (unshare -m) to give the jail a /proc"
			continue
		fi
		# the mount is the namespace's: it ends with the run
		run=(unshare -m --propagation private sh -c 'mount -t proc proc "$0/proc" && exec "$@"'
			"$T/$mode.jail" "${run[@]}")
	fi
	timeout -s KILL 120 "${run[@]}" >"$T/$mode.out" 2>"$T/$mode.err"
	rc=$?
	if [ "$rc" != 0 ]; then
		pl_fail "$NAME-$mode" "exit status $rc: $(head -c 300 "$T/$mode.err")"
		continue
	fi
	case $mode in
	jail-stop*) want="D9_CHROOT=stop" ;;
	jail-open) want="open to other users" ;;
	jail-proc) want="new root has a /proc" ;;
	*) want="could not keep a root of their own" ;;
	esac
	said=$(grep -c "^d9.*chroot.*$want.*tracing stops here" "$T/$mode.err")
	other=$(grep '^d9' "$T/$mode.err" | grep -v "tracing stops here" | head -n 2)
	made=$(ls -A "$T/$mode.jail" | grep -vx proc)
	if [ "$said" != 1 ]; then
		pl_fail "$NAME-$mode" "the agent said $said times that tracing stops ($want): $(head -c 300 "$T/$mode.err")"
	elif [ -n "$other" ]; then
		pl_fail "$NAME-$mode" "the agent also said: $other"
	elif [ -n "$made" ]; then
		pl_fail "$NAME-$mode" "made inside the new root: $made"
	elif [ "$mode" = jail-stop-late ] && { ! cpid=$(sed -n 's/^child \([0-9]*\) .*/\1/p' "$T/$mode.out") ||
		[ -z "$cpid" ] || ! compgen -G "$d/trace.$cpid.*.bin*" >/dev/null ||
		compgen -G "$d/trace.$cpid.*.active" >/dev/null; }; then
		# the child recorded before its chroot: its series sealed there, before the call
		pl_fail "$NAME-$mode" "the child's series is not sealed in $d: $(ls "$d" | tr '\n' ' ')"
	elif [ "$mode" = jail-stop-late ] && ! "$PL_ANALYZE" summary --json "$d" 2>/dev/null |
		python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if any(r.get("feature") == "chroot" for p in d.get("processes", []) for r in p.get("recorder", [])) else 1)'; then
		# ...and the trace says why it ends there (a RecorderState chroot off)
		pl_fail "$NAME-$mode" "the trace does not say that tracing stopped at the chroot"
	else
		pl_pass "$NAME-$mode" "$(grep -m1 'tracing stops here' "$T/$mode.err" | cut -c1-160)"
	fi
done

# ---- caps again, over what earlier runs left --------------------------------------------------------
# caps-again: "caps" once more into early's directory (d9-uid-nobody is nobody's, 0700: root
# without CAP_DAC_OVERRIDE cannot open it, and finds it as root, then opens it as nobody) and into
# caps' (root's with the ACL: kept as it is, since that user's processes may be writing there).
# Each time the child's new series is there, and the subdirectory keeps its form.
for prev in early caps; do
	d=$T/$prev
	[ -d "$d/d9-uid-$NUID" ] || continue
	before=$(stat -c '%u %a' "$d/d9-uid-$NUID")
	timeout -s KILL 120 env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d" D9_FLUSH_INTERVAL=50ms \
		"$T/priv-drop" caps "$d" "$NUID" "$NGID" >"$T/again-$prev.out" 2>"$T/again-$prev.err"
	rc=$?
	cpid=$(sed -n 's/^child \([0-9]*\) .*/\1/p' "$T/again-$prev.out")
	after=$(stat -c '%u %a' "$d/d9-uid-$NUID")
	if [ "$rc" != 0 ] || [ -z "$cpid" ]; then
		pl_fail "$NAME-caps-again-$prev" "exit status $rc: $(head -c 300 "$T/again-$prev.err")"
	elif ! compgen -G "$d/d9-uid-$NUID/trace.$cpid.*" >/dev/null; then
		pl_fail "$NAME-caps-again-$prev" "no segment of the child $cpid in d9-uid-$NUID: $(ls "$d/d9-uid-$NUID" | tr '\n' ' ') $(grep -m2 '^d9' "$T/again-$prev.err")"
	elif [ "$before" != "$after" ]; then
		pl_fail "$NAME-caps-again-$prev" "d9-uid-$NUID was uid/mode $before, is $after"
	else
		pl_pass "$NAME-caps-again-$prev" "the child's series in d9-uid-$NUID ($after, as it was)"
	fi
done

# ---- a trace directory refused at a drop, before the agent started ------------------------------
# fresh: the child changes user before anything in the process recorded (squid does), and the
# trace directory's parent is writable by others (mode 0777, not sticky). At the drop the child's
# agent, still root, refuses the directory and keeps why; its start afterwards, as nobody, cannot
# enter it and says so, then why root refused it, naming the parent, once (before, only
# "Permission denied"). The parent, which stays root, refuses it at its own start. Nothing is
# written.
d=$T/fresh-open/trace
mkdir -m 0777 "$T/fresh-open" && mkdir -m 0700 "$d"
timeout -s KILL 120 env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d" \
	"$T/priv-drop" fresh "$d" "$NUID" "$NGID" >"$T/fresh.out" 2>"$T/fresh.err"
rc=$?
cpid=$(sed -n 's/^child \([0-9]*\) .*/\1/p' "$T/fresh.out")
said=$(grep -c "^d9\[${cpid:-x}\]: before that, at the program's change of user, as uid 0: refusing trace directory $d: its parent $T/fresh-open has mode 0777" "$T/fresh.err")
other=$(grep "^d9\[${cpid:-x}\]" "$T/fresh.err" | grep -v -e "before that, at the program's change of user" \
	-e "cannot write traces to $d: Permission denied" | head -n 2)
if [ "$rc" != 0 ] || [ -z "$cpid" ]; then
	pl_fail "$NAME-refused-at-drop" "exit status $rc: $(head -c 300 "$T/fresh.err")"
elif [ "$said" != 1 ] || [ -n "$other" ]; then
	pl_fail "$NAME-refused-at-drop" "the child said the reason $said times, and: ${other:-nothing else}: $(head -c 400 "$T/fresh.err")"
elif [ -n "$(ls -A "$d")" ]; then
	pl_fail "$NAME-refused-at-drop" "files in the refused directory: $(ls -A "$d" | tr '\n' ' ')"
else
	pl_pass "$NAME-refused-at-drop" "the child said once why root refused it: $(grep -m1 "^d9\[$cpid\]: before" "$T/fresh.err" | cut -c1-120)"
fi

# ---- set*id calls the kernel refuses the calling thread ------------------------------------------
# nocaps: the agent runs (its threads are the process's), then the program gives up every
# capability on its own thread, staying root, and makes set*id calls the kernel refuses it: each
# fails with EPERM, as it does without the agent. glibc makes such a call on every thread and
# aborts the process when their results differ: before, the agent's threads, which kept their
# capabilities, made them succeed there, and the program was aborted.
d=$T/nocaps
mkdir -m 0700 "$d"
timeout -s KILL 120 env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d" D9_FLUSH_INTERVAL=50ms \
	"$T/priv-drop" nocaps "$d" "$NUID" "$NGID" >"$T/nocaps.out" 2>"$T/nocaps.err"
rc=$?
if [ "$rc" != 0 ] || ! grep -qx "nocaps ok" "$T/nocaps.out"; then
	pl_fail "$NAME-refused-calls" "exit status $rc: $(head -c 300 "$T/nocaps.err")"
elif grep -q "^d9" "$T/nocaps.err"; then
	pl_fail "$NAME-refused-calls" "the agent said: $(grep -m2 "^d9" "$T/nocaps.err")"
else
	pl_pass "$NAME-refused-calls" "10 set*id calls refused with EPERM on the thread without capabilities, no abort"
fi

# ---- one budget for the tree ---------------------------------------------------------------------
# busy: root and its child (dropped to nobody) each make tens of thousands of 20 us sleeps a second
# inside a loop turn (the load, not a wait) until the budget has deleted 4 segments (30 s at most),
# every one a BlockingCall (D9_BLOCKING_THRESHOLD=10us; no perf needed, which the child no longer
# gets), segments sealed every second, uncompressed, under
# D9_MAX_TOTAL_SIZE=3M (each process alone keeps its own directory near 2M: a tree of 4M
# when root does not count the child's). The child
# keeps its d9-uid directory within the budget; root, which ends last, keeps the whole tree (both
# directories) within it. Once both ended: at most 3M +1% in the tree, deletions counted; a run
# that wrote too little to need the budget tests nothing (SKIP).
for bm in busy busy-caps; do
	bname=budget${bm#busy}
	d=$T/$bm
	mkdir -m 0700 "$d"
	timeout -s KILL 120 env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d" D9_FLUSH_INTERVAL=50ms \
		D9_BLOCKING_THRESHOLD=10us D9_MAX_TOTAL_SIZE=3M D9_MAX_FILE_SIZE=1M D9_ROTATION_PERIOD=1s \
		D9_COMPRESS=0 \
		"$T/priv-drop" "$bm" "$d" "$NUID" "$NGID" >"$T/$bm.out" 2>"$T/$bm.err"
	rc=$?
	if [ "$rc" != 0 ]; then
		pl_fail "$NAME-$bname" "exit status $rc: $(head -c 300 "$T/$bm.err")"
	else
		"$PL_ANALYZE" summary --json "$d" >"$T/$bm.json" 2>"$T/$bm.aerr"
		python3 - "$NAME-$bname" "$d" "$T/$bm.json" <<'PY'
import json, os, sys
name, d, js = sys.argv[1:]
total = files = 0
where = {}
for root, dirs, names in os.walk(d):
    for n in names:
        if n.startswith("trace.") and not n.endswith(".lock"):
            sz = os.lstat(os.path.join(root, n)).st_size
            total += sz
            files += 1
            where[os.path.basename(root)] = where.get(os.path.basename(root), 0) + sz
try:
    q = json.load(open(js)).get("data_quality", {})
except Exception:
    q = {}
deleted = q.get("budget_deleted_segments", 0)
limit = 3 * 1024 * 1024
if total > limit * 1.01:
    print("FAIL %s: %d bytes in %d files in the tree (%s), budget %d (+1%%)" % (name, total, files, where, limit))
elif not deleted:
    print("SKIP %s: the run wrote %d bytes, too little to need the budget" % (name, total))
else:
    print("PASS %s: %d bytes in %d files (%s) after %d segment(s) deleted" % (name, total, files, where, deleted))
PY
		[ "$bm" = busy ] || continue
		# the child's stacks after its drop are unwound with DWARF: a process that changed its
		# credentials is not dumpable and the kernel refuses its /proc/PID/auxv, which libdw's
		# module report reads first; the agent then reads the modules from /proc/self/maps. Before,
		# the child's BlockingCall stacks held one frame (spin: priv-drop is built -O1, without
		# frame pointers) and stderr said "cannot read the module map".
		"$PL_ANALYZE" jsonl "$d" 2>/dev/null | grep '"BlockingCall"' >"$T/busy.calls"
		python3 - "$NAME-stacks" "$d" "$T/busy.calls" "$T/busy.err" <<'PY'
import json, os, re, sys
name, d, calls, err = sys.argv[1:]
kids = set()
for root, dirs, names in os.walk(d):
    if os.path.basename(root).startswith("d9-uid-"):
        kids |= set(int(m.group(1)) for m in (re.match(r"trace\.(\d+)\.", n) for n in names) if m)
got = [json.loads(l) for l in open(calls)]
mine = [r for r in got if r["pid"] in kids and r.get("stack")]
deep = [r for r in mine if any(f.split(" ")[0] == "main" for f in r["stack"])]
said = [l for l in open(err).read().splitlines() if "module map" in l]
if not kids or len(mine) < 100 or len(deep) < 0.9 * len(mine) or said:
    print("FAIL %s: the dropped child %s: %d BlockingCalls with a stack, %d reaching main "
          "(e.g. %s); the agent said %s" % (name, sorted(kids), len(mine), len(deep),
          [r["stack"] for r in mine[:1]], said[:1]))
else:
    print("PASS %s: %d of the dropped child's %d BlockingCall stacks reach main" % (name, len(deep), len(mine)))
PY
	fi
done
