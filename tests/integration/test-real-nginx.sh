#!/usr/bin/env bash
# test-real-nginx.sh: Debian's nginx as Debian runs it: the master as root, `user www-data;`,
# 2 workers, master_process on, daemon off, a private configuration in $T listening on
# 127.0.0.1 and a free port, LD_PRELOAD=build/libd9agent.so with CPU profiling, and a trace
# directory made by root with mode 0700. wrk loads it for 3 s, then the master gets SIGQUIT
# (graceful stop) and the test waits for it to end.
#   - nginx-workers: each of the two workers (their pids, as ps listed them under the master)
#     has its own series, read by `d9-analyze summary` given the trace directory alone (the
#     sanitizer build reads it the same way, without complaint), and its parent the master; at
#     least 20 loop turns in all (wrk sends tens of thousands of requests, which the kernel
#     shares between the workers, not necessarily evenly: one may get none).
#   - nginx-title: each worker's segments record "nginx: worker process" (the title nginx
#     writes over its argv after the fork), not the master's command line.
#   - nginx-privileges: each worker records its drop (uid 0 -> www-data) in the summary, and when
#     the kernel only lets unprivileged users profile user space (perf_event_paranoid >= 2) that
#     its later-profiled threads have no kernel frames; the agent said so once for the whole
#     server, by one worker (on its stderr, which nginx points at its error log): the workers
#     are the master's forked children and share the agent's once.
#   - nginx-offcpu (with D9_SCHED_EVENTS=1, as root): the workers, which give up root before
#     their first wait, have off-CPU samples (their perf events are opened at the drop, while root
#     may: with perf_event_paranoid 2 they were always off) and nothing says they are off.
#     Skipped (counted) unless run as root where perf events open (the run is then without
#     D9_SCHED_EVENTS).
#   - nginx-access: the trace directory stays root's and 0700, the workers' files are in
#     d9-uid-<www-data> (www-data's, 0700), each file its writer's and 0600.
#   - nginx-budget: a second run (wrk in 2 s runs until a segment was deleted, 60 s at most)
#     with D9_MAX_TOTAL_SIZE=2M and off-CPU samples: once all has ended, the whole tree (the
#     master's directory and the workers' d9-uid one) holds at most 2M +1%, and segments were
#     deleted (counted in the summary).
# Skips (counted, with the reason) without nginx or wrk, when not root, or without www-data.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=nginx
pl_need_built "$NAME"
pl_program NGINX "$NAME" nginx /usr/sbin nginx || exit 0
for b in wrk curl ps; do
	if ! command -v "$b" >/dev/null; then
		pl_skip "$NAME" "$b is not installed (make deps; ps: Debian package procps)"
		exit 0
	fi
done
if [ "$(id -u)" != 0 ]; then
	pl_skip "$NAME" "needs root (nginx's master runs as root and its workers drop to www-data)"
	exit 0
fi
if ! WUID=$(id -u www-data 2>/dev/null); then
	pl_skip "$NAME" "no user www-data"
	exit 0
fi
pl_env "$NAME"
pl_san_setup "$NAME-san" || exit 0

PORT=$(pl_free_port)
mkdir -m 0700 "$T/trace"
cat >"$T/nginx.conf" <<CONF
user www-data;
worker_processes 2;
master_process on;
daemon off;
pid $T/nginx.pid;
error_log $T/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path $T/body;
	proxy_temp_path $T/proxy;
	fastcgi_temp_path $T/fastcgi;
	uwsgi_temp_path $T/uwsgi;
	scgi_temp_path $T/scgi;
	server {
		listen 127.0.0.1:$PORT;
		location / { return 200 "hello\n"; }
	}
}
CONF
# off-CPU samples (nginx-offcpu) only where root may open context-switch events: elsewhere each
# worker would say they are off, which nginx-privileges does not expect
OFFCPU_SKIP=
if [ "$(id -u)" != 0 ]; then
	OFFCPU_SKIP="not root: the workers' perf events are opened at their drop from root"
else
	perf_off=$(d9_perf_off)
	[ -n "$perf_off" ] && OFFCPU_SKIP="perf events cannot be opened here: ${perf_off:0:200}"
fi
SCHED=()
[ -z "$OFFCPU_SKIP" ] && SCHED=(D9_SCHED_EVENTS=1)
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace" D9_FLUSH_INTERVAL=50ms D9_CPU_PROFILE=99 \
	"${SCHED[@]}" "$NGINX" -c "$T/nginx.conf" -p "$T" >"$T/stdout" 2>"$T/stderr" &
MPID=$!
PL_PIDS+=("$MPID")
workers() { ps -o pid= --ppid "$MPID" | tr -d ' ' | sort -n; }
two_workers_serving() {
	[ "$(workers | wc -l)" = 2 ] && curl -s -o /dev/null "http://127.0.0.1:$PORT/"
}
if ! d9_wait_for 30 two_workers_serving; then
	pl_fail "$NAME" "nginx did not start serving: $(head -c 300 "$T/error.log" "$T/stderr" 2>&1)"
	exit 0
fi
mapfile -t WPIDS < <(workers)
timeout -s KILL 60 wrk -t 2 -c 16 -d 3s "http://127.0.0.1:$PORT/" >"$T/wrk.out" 2>&1
kill -QUIT "$MPID"
gone() { ! pl_alive "$MPID"; }
if ! d9_wait_for 60 gone; then
	pl_fail "$NAME" "nginx did not stop within 60 s of SIGQUIT"
	exit 0
fi
wait "$MPID" 2>/dev/null
d9_wait_settled "$T/trace/d9-uid-$WUID" || true # sealed: a compression the exit left stays .bin
"$PL_ANALYZE" summary --json "$T/trace" >"$T/summary.json" 2>"$T/analyze.err"
arc=$?
"$SAN" summary --json "$T/trace" >"$T/san.json" 2>"$T/san.err"
src=$?
OFFCPU_SKIP="$OFFCPU_SKIP" python3 - "$NAME" "$T" "$WUID" "$arc" "$src" "$MPID" "${WPIDS[@]}" <<'PY'
import json, os, stat, sys
name, T, wuid, arc, src, mpid = sys.argv[1:7]
wuid, mpid = int(wuid), int(mpid)
wpids = [int(p) for p in sys.argv[7:]]
def result(case, why, info=""):
    print("FAIL %s: %s" % (case, why) if why else "PASS %s%s" % (case, ": " + info if info else ""))
try:
    s = json.load(open(os.path.join(T, "summary.json")))
except Exception as e:
    s = None
    err = "d9-analyze summary exited %s (%s): %s" % (arc, e, open(os.path.join(T, "analyze.err")).read()[:300])
procs = dict((p["pid"], p) for p in s["processes"]) if s else {}

def workers():
    if not s:
        return err
    if src != "0" or open(os.path.join(T, "san.err")).read().strip():
        return "the sanitizer build of d9-analyze exited %s: %s" % (src, open(os.path.join(T, "san.err")).read()[:300])
    if len(wpids) != 2:
        return "ps listed %d workers: %s" % (len(wpids), wpids)
    for pid in wpids:
        p = procs.get(pid)
        if not p:
            return "no series of worker %d (processes %s)" % (pid, sorted(procs))
        if p["ppid"] != mpid:
            return "worker %d: parent %d, not the master %d" % (pid, p["ppid"], mpid)
    # wrk's connections may all go to one worker (EPOLLEXCLUSIVE wakes one waiter, and on one
    # CPU the same one can be the waiter every time): the turns are counted in all
    turns = sum(w["polls"] for w in s["workers"] if w["pid"] in wpids)
    if turns < 20:
        return "the workers made %d loop turns in all" % turns
    return None
result(name + "-workers", workers(), "2 workers, %s loop turns" % (
    [sum(w["polls"] for w in s["workers"] if w["pid"] == pid) for pid in wpids] if s else []))

def offcpu():
    # D9_SCHED_EVENTS=1: a worker gives up root before its first wait; its perf events are
    # opened at the drop, while root may (off-CPU samples were always off for such workers)
    if not s:
        return err
    off = [sum(w.get("offcpu_samples", 0) for w in s["workers"] if w["pid"] == pid) for pid in wpids]
    if sum(off) == 0:
        return "no off-CPU samples in the workers (%s)" % off
    if any("off-CPU samples" in l for l in open(os.path.join(T, "stderr")).read().splitlines() +
            open(os.path.join(T, "error.log")).read().splitlines()):
        return "the agent said off-CPU samples are off"
    return None
if os.environ.get("OFFCPU_SKIP"):
    print("SKIP %s-offcpu: %s" % (name, os.environ["OFFCPU_SKIP"]))
else:
    result(name + "-offcpu", offcpu(), "off-CPU samples of the workers, opened before their drop")

def title():
    if not s:
        return err
    for pid in wpids:
        c = procs.get(pid, {}).get("cmdline")
        if c is None or c.strip() != "nginx: worker process":
            return "worker %d records the command line %r" % (pid, c)
    return None
result(name + "-title", title())

def privileges():
    if not s:
        return err
    paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read())
    for pid in wpids:
        pv = procs.get(pid, {}).get("privileges")
        if not pv or pv["from_uid"] != 0 or pv["to_uid"] != wuid:
            return "worker %d: drop not in the summary: %s" % (pid, pv)
        if paranoid >= 2 and not (pv["kernel_samples_lost"] or pv["perf_denied"]):
            return "worker %d: perf_event_paranoid %d, but no loss recorded: %s" % (pid, paranoid, pv)
    if procs.get(mpid, {}).get("privileges"):
        return "the master, which keeps root, is said to have dropped"
    # nginx makes its error log the workers' stderr
    text = open(os.path.join(T, "stderr")).read() + open(os.path.join(T, "error.log")).read()
    lines = [l[l.index("d9["):] for l in text.splitlines() if "d9[" in l]
    said = [l for l in lines if "privileges dropped" in l]
    # said once for the whole server: the workers are the master's forked children, which share
    # the agent's once (d9__log_tree_once); each worker's drop is in the trace (above)
    if paranoid >= 2 and (len(said) != 1 or int(said[0][3:said[0].index("]")]) not in wpids):
        return "not said once by a worker: %s" % lines[:4]
    if len(said) > 1 or len(lines) != len(said):
        return "the agent said more than once: %s" % lines[:4]
    return None
result(name + "-privileges", privileges())

def access():
    d = os.path.join(T, "trace")
    sub = os.path.join(d, "d9-uid-%d" % wuid)
    st = os.lstat(d)
    if st.st_uid != 0 or stat.S_IMODE(st.st_mode) != 0o700:
        return "%s is uid %d mode %o" % (d, st.st_uid, stat.S_IMODE(st.st_mode))
    if not os.path.isdir(sub):
        return "no %s" % sub
    st = os.lstat(sub)
    if st.st_uid != wuid or stat.S_IMODE(st.st_mode) != 0o700:
        return "%s is uid %d mode %o" % (sub, st.st_uid, stat.S_IMODE(st.st_mode))
    for f in os.listdir(sub):
        st = os.lstat(os.path.join(sub, f))
        # the sticky bit marks a finished .bin (D9_COMPRESS=auto): no access of anyone's
        if st.st_uid != wuid or stat.S_IMODE(st.st_mode) & ~stat.S_ISVTX != 0o600 or not f.startswith("trace."):
            return "%s/%s is uid %d mode %o" % (sub, f, st.st_uid, stat.S_IMODE(st.st_mode))
        if f == "trace.lock":  # the directory budget's lock file (budget.c): the user's too
            continue
        if int(f.split(".")[1]) not in wpids:
            return "%s/%s is not a worker's" % (sub, f)
    return None
result(name + "-access", access())
PY

# ---- one budget for the whole tree --------------------------------------------------------------
# The same nginx with a small budget (D9_MAX_TOTAL_SIZE=2M, D9_MAX_FILE_SIZE=1M; segments sealed
# every second, uncompressed) and off-CPU samples
# (a stack per context switch: megabytes within seconds). The workers (www-data) keep the budget
# in their d9-uid directory among themselves; the master (root) keeps it for the whole tree at its
# seals and exit. wrk runs until a segment was deleted (60 s at most). Once everything has ended:
# at most 2M +1% in the tree, and some segment deleted (else the run wrote too little to test
# anything: SKIP).
B=$T/budget
mkdir -p "$B" && mkdir -m 0700 "$B/trace"
sed -e "s|pid $T/nginx.pid;|pid $B/nginx.pid;|" -e "s|error_log $T/error.log;|error_log $B/error.log;|" \
	"$T/nginx.conf" >"$B/nginx.conf"
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$B/trace" D9_FLUSH_INTERVAL=50ms D9_CPU_PROFILE=999 \
	D9_SCHED_EVENTS=1 D9_MAX_TOTAL_SIZE=2M D9_MAX_FILE_SIZE=1M D9_ROTATION_PERIOD=1s D9_COMPRESS=0 \
	"$NGINX" -c "$B/nginx.conf" -p "$T" >"$B/stdout" 2>"$B/stderr" &
MPID=$!
PL_PIDS+=("$MPID")
if ! d9_wait_for 30 two_workers_serving; then
	pl_fail "$NAME-budget" "nginx did not start serving: $(head -c 300 "$B/error.log" "$B/stderr" 2>&1)"
	exit 0
fi
# load until the budget has deleted a segment somewhere in the tree (the directory's ledger in
# each <stem>.lock: magic, then deleted segments as u64 LE), at most 60 s: a loaded machine
# serves fewer requests, and 10 s of wrk once wrote too little to need the budget
budget_hit() {
	python3 - "$B/trace" <<'PY'
import os, struct, sys
n = 0
for root, dirs, names in os.walk(sys.argv[1]):
    for f in names:
        if f.endswith(".lock"):
            b = open(os.path.join(root, f), "rb").read(32)
            if len(b) == 32 and b.startswith(b"d9 budget 1\n"):
                n += struct.unpack_from("<Q", b, 16)[0]
sys.exit(0 if n else 1)
PY
}
end=$((SECONDS + 60))
: >"$B/wrk.out"
while ! budget_hit && [ "$SECONDS" -lt "$end" ]; do
	timeout -s KILL 60 wrk -t 2 -c 32 -d 2s "http://127.0.0.1:$PORT/" >>"$B/wrk.out" 2>&1
done
kill -QUIT "$MPID"
if ! d9_wait_for 60 gone; then
	pl_fail "$NAME-budget" "nginx did not stop within 60 s of SIGQUIT"
	exit 0
fi
wait "$MPID" 2>/dev/null
"$PL_ANALYZE" summary --json "$B/trace" >"$B/summary.json" 2>"$B/analyze.err"
python3 - "$NAME-budget" "$B/trace" "$B/summary.json" <<'PY'
import json, os, sys
name, d, js = sys.argv[1:]
total = files = 0
for root, dirs, names in os.walk(d):
    for n in names:
        if n.startswith("trace.") and not n.endswith(".lock"):
            total += os.lstat(os.path.join(root, n)).st_size
            files += 1
try:
    q = json.load(open(js)).get("data_quality", {})
except Exception:
    q = {}
deleted = q.get("budget_deleted_segments", 0)
limit = 2 * 1024 * 1024
if total > limit * 1.01:
    print("FAIL %s: %d bytes in %d files under the trace directory, budget %d (+1%%)" % (name, total, files, limit))
elif not deleted:
    print("SKIP %s: the run wrote %d bytes, too little to need the budget" % (name, total))
else:
    print("PASS %s: %d bytes in %d files after %d segment(s) deleted (budget %d)" % (name, total, files, deleted, limit))
PY
