#!/usr/bin/env bash
# test-real-haproxy.sh: Debian's HAProxy as its package starts it (haproxy.service: `haproxy -Ws
# -f CONFIG -p PIDFILE -S MASTER_SOCKET`, master-worker mode; the package's haproxy.cfg: `chroot`,
# `user haproxy`, `group haproxy`, `daemon`), with a private configuration in $T: the chroot is
# an empty directory of the test's, the frontend answers every request itself (`http-request
# return`) on 127.0.0.1 and a free port, LD_PRELOAD=build/libd9agent.so, and a trace directory
# made by root with mode 0700, D9_CHROOT=follow. The worker, a child of the master, changes its
# root directory, then gives up root. One keep-alive connection sends N requests, then the master gets SIGTERM.
#   - haproxy-worker: the worker's series is in d9-uid-<haproxy>, read by `d9-analyze summary`
#     given the trace directory alone, with its drop (uid 0 -> haproxy) and at least N loop
#     turns over its threads (each request needs the loop to wake); the master's series is in the
#     directory itself. Before, the agent made the trace directory's path inside the worker's
#     new root and recorded nothing of the worker.
#   - haproxy-jail: nothing was made inside the new root; the trace directory stays root's and
#     0700, the subdirectory haproxy's and 0700; the agent said nothing but that the worker's
#     threads' schedstat readings are unknown (the new root has no /proc).
# Skips (counted, with the reason) without haproxy, when not root, or without the user haproxy.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=haproxy
pl_need_built "$NAME"
pl_program HAPROXY "$NAME" haproxy /usr/sbin haproxy || exit 0
for b in ps python3; do
	if ! command -v "$b" >/dev/null; then
		pl_skip "$NAME" "$b is not installed (make deps; ps: Debian package procps)"
		exit 0
	fi
done
if [ "$(id -u)" != 0 ]; then
	pl_skip "$NAME" "needs root (HAProxy's worker changes its root directory and drops to haproxy)"
	exit 0
fi
if ! HUID=$(id -u haproxy 2>/dev/null); then
	pl_skip "$NAME" "no user haproxy (the package makes it)"
	exit 0
fi
pl_env "$NAME"

N=300
PORT=$(pl_free_port)
mkdir -m 0700 "$T/trace"
mkdir -m 0755 "$T/jail"
chmod 0711 "$T" # the worker (haproxy) reads nothing here, but its agent's libdw reads the binary
cat >"$T/haproxy.cfg" <<CONF
global
	chroot $T/jail
	stats socket $T/admin.sock mode 660 level admin
	user haproxy
	group haproxy
	daemon
defaults
	mode http
	timeout connect 5000
	timeout client 50000
	timeout server 50000
frontend fe
	bind 127.0.0.1:$PORT
	http-request return status 200 content-type text/plain string "hello\n"
CONF
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace" D9_FLUSH_INTERVAL=50ms D9_CHROOT=follow \
	"$HAPROXY" -Ws -f "$T/haproxy.cfg" -p "$T/haproxy.pid" -S "$T/master.sock" \
	>"$T/stdout" 2>"$T/stderr" &
MPID=$!
PL_PIDS+=("$MPID")
worker() { ps -o pid= --ppid "$MPID" | tr -d ' ' | head -n 1; }
# send PORT COUNT: COUNT GETs on one keep-alive connection; prints how many got a 200
send() {
	python3 - "$PORT" "$1" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
ok = 0
for _ in range(int(sys.argv[2])):
    c.request("GET", "/")
    r = c.getresponse()
    ok += r.status == 200 and r.read() == b"hello\n"
print(ok)
PY
}
if ! d9_wait_for 30 eval '[ -n "$(worker)" ] && [ "$(send 1 2>/dev/null)" = 1 ]'; then
	pl_fail "$NAME" "haproxy did not start serving: $(head -c 300 "$T/stderr")"
	exit 0
fi
WPID=$(worker)
ok=$(send "$N" 2>"$T/send.err")
kill -TERM "$MPID"
gone() { ! pl_alive "$MPID" && ! pl_alive "$WPID"; }
if ! d9_wait_for 60 gone; then
	pl_fail "$NAME" "haproxy did not stop within 60 s of SIGTERM"
	exit 0
fi
wait "$MPID" 2>/dev/null
if [ "$ok" != "$N" ]; then
	pl_fail "$NAME" "$ok of $N requests answered: $(head -c 300 "$T/send.err")"
	exit 0
fi
d9_wait_settled "$T/trace" || true # sealed: a compression the exit left stays .bin
d9_wait_settled "$T/trace/d9-uid-$HUID" || true
"$PL_ANALYZE" summary --json "$T/trace" >"$T/summary.json" 2>"$T/analyze.err"
arc=$?
python3 - "$NAME" "$T" "$HUID" "$arc" "$MPID" "$WPID" "$N" <<'PY'
import json, os, stat, sys
name, T, huid, arc, mpid, wpid, n = sys.argv[1:]
huid, mpid, wpid, n = int(huid), int(mpid), int(wpid), int(n)
d = os.path.join(T, "trace")
sub = os.path.join(d, "d9-uid-%d" % huid)
def result(case, why, info=""):
    print("FAIL %s: %s" % (case, why) if why else "PASS %s%s" % (case, ": " + info if info else ""))

def worker():
    if arc != "0":
        return "d9-analyze summary exited %s: %s" % (arc, open(os.path.join(T, "analyze.err")).read()[:300]), ""
    s = json.load(open(os.path.join(T, "summary.json")))
    procs = dict((p["pid"], p) for p in s["processes"])
    mine = lambda dd, pid: [f for f in (os.listdir(dd) if os.path.isdir(dd) else [])
                            if f.startswith("trace.%d." % pid)]
    if not mine(sub, wpid):
        return "no segment of the worker %d in %s: %s" % (wpid, sub, os.listdir(d)), ""
    if not mine(d, mpid) or mine(sub, mpid):
        return "the master's series is not (only) in %s" % d, ""
    if wpid not in procs or procs[wpid]["ppid"] != mpid:
        return "the worker %d is not in the summary as the master's child: %s" % (
            wpid, procs.get(wpid, sorted(procs))), ""
    pv = procs[wpid].get("privileges")
    if not pv or pv["from_uid"] != 0 or pv["to_uid"] != huid:
        return "the worker's drop is not in the summary: %s" % pv, ""
    ws = [w for w in s["workers"] if w["pid"] == wpid]
    turns = sum(w["polls"] for w in ws)
    if turns < n:
        return "the worker's threads made %d loop turns for %d requests" % (turns, n), ""
    return None, "%d loop turns over %d threads for %d requests" % (turns, len(ws), n)
why, info = worker()
result(name + "-worker", why, info)

def jail():
    if os.listdir(os.path.join(T, "jail")):
        return "the agent made %s inside the worker's new root" % os.listdir(os.path.join(T, "jail"))
    for dd, uid in ((d, 0), (sub, huid)):
        st = os.lstat(dd)
        if st.st_uid != uid or stat.S_IMODE(st.st_mode) != 0o700:
            return "%s is uid %d mode %o" % (dd, st.st_uid, stat.S_IMODE(st.st_mode))
    said = [l for l in open(os.path.join(T, "stderr")).read().splitlines()
            if l.startswith("d9") and "/proc/thread-self/schedstat" not in l]
    if said:
        return "the agent said: %s" % said[:2]
    return None
result(name + "-jail", jail())
PY
