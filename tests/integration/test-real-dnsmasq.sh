#!/usr/bin/env bash
# test-real-dnsmasq.sh: Debian's dnsmasq, started by root the way its package's init script starts
# it (a daemon: it forks away from its parent, writes a pid file, and gives up root with
# `-u dnsmasq`, the package's user, or nobody), answering from a hosts file on 127.0.0.1 and a
# free port, under LD_PRELOAD=build/libd9agent.so with a root-owned 0700 trace directory.
# dnsmasq gives up every capability but CAP_SETUID before its setuid, so at the setuid the agent
# can no longer give the user a directory of its own: before, the daemon recorded nothing
# (agent/DESIGN.md, "Privilege drops"). dnsperf sends 1,000 queries (500 rounds of two names, at
# most 2,000 a second), then the daemon gets SIGTERM.
#   - dnsmasq-drop: the daemon's series is in the directory's d9-uid-<user>, with its drop from
#     uid 0 to that user, and d9-analyze summary reads it given the directory alone.
#   - dnsmasq-turns: its loop turns (generic mode: a poll loop) number about the queries it
#     answered (dnsmasq reads one datagram a turn): at least 90% of them and at most 110% + 50.
#   - dnsmasq-access: nothing is opened to others: the trace directory stays root's and 0700; the
#     subdirectory is root's, 0770 with an ACL that lets the user alone in; every segment file is
#     the user's and 0600.
# Skips (counted, with the reason) without dnsmasq or dnsperf, or when not root.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=dnsmasq
pl_need_built "$NAME"
pl_program DNSMASQ "$NAME" dnsmasq /usr/sbin dnsmasq-base || exit 0
if ! command -v dnsperf >/dev/null; then
	pl_skip "$NAME" "dnsperf is not installed (make deps)"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	pl_skip "$NAME" "needs root (dnsmasq gives up root itself)"
	exit 0
fi
USER_=dnsmasq
NUID=$(id -u dnsmasq 2>/dev/null) || { USER_=nobody; NUID=$(id -u nobody 2>/dev/null); } || {
	pl_skip "$NAME" "neither the user dnsmasq nor nobody exists"
	exit 0
}
pl_env "$NAME"

PORT=$(pl_free_port)
mkdir -m 0700 "$T/trace"
printf '192.0.2.1 a.test\n192.0.2.2 b.test\n' >"$T/hosts"
printf 'a.test A\nb.test A\n' >"$T/queries"
chmod 0755 "$T"
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace" D9_FLUSH_INTERVAL=50ms \
	"$DNSMASQ" -x "$T/dnsmasq.pid" -u "$USER_" --conf-file=/dev/null -p "$PORT" \
	--listen-address=127.0.0.1 --bind-interfaces --no-resolv --no-hosts --addn-hosts="$T/hosts" \
	--log-facility="$T/log" >"$T/stdout" 2>"$T/stderr"
rc=$?
pidfile() { [ -s "$T/dnsmasq.pid" ]; }
if [ "$rc" != 0 ] || ! d9_wait_for 30 pidfile; then
	pl_fail "$NAME" "dnsmasq did not start (exit status $rc): $(head -c 300 "$T/stderr") $(tail -c 300 "$T/log" 2>/dev/null)"
	exit 0
fi
DPID=$(cat "$T/dnsmasq.pid")
PL_PIDS+=("$DPID")
timeout -s KILL 120 dnsperf -s 127.0.0.1 -p "$PORT" -d "$T/queries" -n 500 -c 2 -Q 2000 \
	>"$T/dnsperf.out" 2>&1
prc=$?
kill -TERM "$DPID"
gone() { ! pl_alive "$DPID"; }
if ! d9_wait_for 60 gone; then
	pl_fail "$NAME" "dnsmasq did not stop within 60 s of SIGTERM"
	exit 0
fi
answered=$(sed -n 's/^ *Queries completed: *\([0-9]*\).*/\1/p' "$T/dnsperf.out")
if [ "$prc" != 0 ] || [ -z "$answered" ] || [ "$answered" -lt 900 ]; then
	pl_fail "$NAME" "dnsperf exited $prc, ${answered:-no} queries answered: $(tail -c 300 "$T/dnsperf.out")"
	exit 0
fi
d9_wait_settled "$T/trace/d9-uid-$NUID" || true # sealed: a compression the exit left stays .bin
"$PL_ANALYZE" summary --json "$T/trace" >"$T/summary.json" 2>"$T/analyze.err"
arc=$?
python3 - "$NAME" "$T/summary.json" "$arc" "$DPID" "$NUID" "$answered" "$T/analyze.err" \
	"$T/trace" <<'PY'
import json, os, stat, struct, sys
name, js, arc, dpid, nuid, answered, aerr, d = sys.argv[1:]
dpid, nuid, answered = int(dpid), int(nuid), int(answered)
sub = os.path.join(d, "d9-uid-%d" % nuid)
def result(case, why, info=""):
    print("FAIL %s: %s" % (case, why) if why else "PASS %s%s" % (case, ": " + info if info else ""))
s = json.load(open(js)) if arc == "0" else None
procs = dict((p["pid"], p) for p in s["processes"]) if s else {}
def drop():
    if not s:
        return "d9-analyze summary exited %s: %s" % (arc, open(aerr).read()[:300])
    if dpid not in procs:
        return "no series of the daemon %d (processes %s)" % (dpid, sorted(procs))
    mine = [f for f in (os.listdir(sub) if os.path.isdir(sub) else []) if f.startswith("trace.%d." % dpid)]
    if not mine:
        return "no segment of the daemon in %s" % sub
    pv = procs[dpid].get("privileges")
    if not pv or pv["from_uid"] != 0 or pv["to_uid"] != nuid:
        return "the daemon's drop from 0 to %d is not in the summary: %s" % (nuid, pv)
    return None
result(name + "-drop", drop(), "the daemon's series in d9-uid-%d, with its drop" % nuid)
turns = sum(w["polls"] for w in s["workers"] if w["pid"] == dpid) if s else 0
def count():
    if not s or dpid not in procs:
        return "no series of the daemon"
    if not 0.9 * answered <= turns <= 1.1 * answered + 50:
        return "%d loop turns for %d queries answered" % (turns, answered)
    return None
result(name + "-turns", count(), "%d loop turns, %d queries answered" % (turns, answered))
def access():
    st = os.lstat(d)
    if st.st_uid != 0 or stat.S_IMODE(st.st_mode) != 0o700:
        return "%s is uid %d mode %o" % (d, st.st_uid, stat.S_IMODE(st.st_mode))
    if not os.path.isdir(sub):
        return "no %s" % sub
    st = os.lstat(sub)
    if not stat.S_ISDIR(st.st_mode) or (st.st_uid, stat.S_IMODE(st.st_mode)) != (0, 0o770):
        return "%s is uid %d mode %o, expected root's 0770" % (sub, st.st_uid, stat.S_IMODE(st.st_mode))
    acl = os.getxattr(sub, "system.posix_acl_access")
    ents = [struct.unpack_from("<HHI", acl, 4 + 8 * i) for i in range((len(acl) - 4) // 8)]
    want = [(1, 7, 0xffffffff), (2, 7, nuid), (4, 0, 0xffffffff), (0x10, 7, 0xffffffff), (0x20, 0, 0xffffffff)]
    if ents != want:
        return "%s has the ACL %s, expected the user %d alone (%s)" % (sub, ents, nuid, want)
    for f in os.listdir(sub):
        st = os.lstat(os.path.join(sub, f))
        # the sticky bit marks a finished .bin (D9_COMPRESS=auto): no access of anyone's
        if st.st_uid != nuid or stat.S_IMODE(st.st_mode) & ~stat.S_ISVTX != 0o600:
            return "%s is uid %d mode %o, expected uid %d 0600" % (f, st.st_uid, stat.S_IMODE(st.st_mode), nuid)
    return None
result(name + "-access", access())
PY
