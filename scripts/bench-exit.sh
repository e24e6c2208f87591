#!/usr/bin/env bash
# bench-exit.sh: what the agent adds to a server's exit, run by scripts/bench.sh. redis-server and
# nginx (master and 2 workers), the Debian packages, each started REPS times without and REPS
# times with the agent (alternating, a fresh process and trace directory each), given some work
# (redis: 200k keys and requests; nginx: 200 requests), then stopped (redis: SHUTDOWN NOSAVE on an
# open connection, since SIGTERM waits for its next 100 ms timer tick; nginx: SIGTERM): the exit
# time is from the stop to the moment the process is reaped (Python's Popen.wait, no polling), for
# nginx the master, which waits for its workers. Default agent settings (D9_EXIT_TIMEOUT 100ms,
# compression on). Writes build/bench/exit.json (every run, medians) and prints a table. A server
# that is not installed is skipped with a line saying so. Then a fork storm (500 forked children
# of tests/integration/exit-progs.c, each exiting after two epoll_waits), alternating without and
# with the agent: its time ratio (goal: at most 2). QUICK=1: 2 runs each instead of 7.
# Timing claims live here, never in tests.
set -euo pipefail
cd "$(dirname "$0")/.."

reps=${BENCH_EXIT_REPS:-7}
[ "${QUICK:-0}" = "1" ] && reps=2
agent=$PWD/build/libd9agent.so
[ -e "$agent" ] || { echo "bench-exit: $agent is missing; run 'make bench'" >&2; exit 1; }
mkdir -p build/bench
work=$(mktemp -d "${TMPDIR:-/tmp}/d9-bench-exit-XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== exit: time from the stop to the exit, without and with the agent ($reps runs each)"
python3 - "$agent" "$work" "$reps" build/bench/exit.json <<'PY'
import json, os, shutil, signal, socket, statistics, subprocess, sys, time, urllib.request
agent, work, reps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

def wait_until(pred, secs=30):
    end = time.time() + secs
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False

def env_for(with_agent, d):
    e = {k: v for k, v in os.environ.items() if not k.startswith("D9_") and k != "LD_PRELOAD"}
    if with_agent:
        e.update(LD_PRELOAD=agent, D9_TRACE_PATH=os.path.join(d, "trace", "trace.bin"))
    return e

def redis_run(with_agent, d):
    port = free_port()
    cli = ["redis-cli", "-p", str(port)]
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                          "--save", "", "--appendonly", "no", "--daemonize", "no"],
                         env=env_for(with_agent, d), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok = wait_until(lambda: subprocess.run(cli + ["PING"], capture_output=True, text=True).stdout.strip() == "PONG")
    if not ok:
        p.kill(); p.wait()
        raise RuntimeError("redis-server did not start")
    # work: 200k SETs in one pipeline, a few reads
    cmds = "".join("SET key:%d %s\n" % (i, "v" * 32) for i in range(200000))
    subprocess.run(cli + ["--pipe"], input=cmds, capture_output=True, text=True)
    for _ in range(20):
        subprocess.run(cli + ["GET", "key:1"], capture_output=True)
    # the stop: SHUTDOWN NOSAVE on a connection opened now (SIGTERM would only schedule the
    # shutdown for redis's next 100 ms timer tick, whose phase then dominates the measurement)
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    return p, lambda: c.sendall(b"SHUTDOWN NOSAVE\r\n")

NGINX_CONF = """
daemon off;
master_process on;
worker_processes 2;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
%(user)s
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %(d)s/body; proxy_temp_path %(d)s/proxy; fastcgi_temp_path %(d)s/fcgi;
    uwsgi_temp_path %(d)s/uwsgi; scgi_temp_path %(d)s/scgi;
    server { listen 127.0.0.1:%(port)d; location / { return 200 "ok\\n"; } }
}
"""

def nginx_run(with_agent, d):
    port = free_port()
    user = "user root root;" if os.geteuid() == 0 else ""
    conf = os.path.join(d, "nginx.conf")
    open(conf, "w").write(NGINX_CONF % {"d": d, "port": port, "user": user})
    p = subprocess.Popen(["nginx", "-c", conf, "-p", d], env=env_for(with_agent, d),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d/" % port
    def up():
        try:
            return urllib.request.urlopen(url, timeout=1).read() == b"ok\n"
        except OSError:
            return False
    if not wait_until(up):
        p.kill(); p.wait()
        raise RuntimeError("nginx did not start")
    for _ in range(200):
        urllib.request.urlopen(url, timeout=5).read()
    return p, lambda: p.send_signal(signal.SIGTERM)

def one(start, with_agent):
    d = os.path.join(work, "run")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    p, stop = start(with_agent, d)
    time.sleep(0.3)  # let the agent's flush interval pass: the exit then seals a written segment
    t0 = time.monotonic()
    stop()
    p.wait(timeout=60)
    return time.monotonic() - t0

servers = [("redis", "redis-server", redis_run), ("nginx", "nginx", nginx_run)]
res = {"bench": "exit", "schema_version": 1, "reps": reps, "results": {}}
print("  %-8s %12s %12s %10s" % ("server", "without ms", "with ms", "added ms"))
for name, binary, start in servers:
    if not shutil.which(binary):
        print("  %-8s skipped: %s is not installed" % (name, binary))
        continue
    base, withd9 = [], []
    try:
        for _ in range(reps):
            base.append(one(start, False))
            withd9.append(one(start, True))
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
        print("  %-8s failed: %s" % (name, e))
        continue
    b, a = statistics.median(base), statistics.median(withd9)
    res["results"][name] = {"without_s": base, "with_s": withd9, "median_without_s": b,
                            "median_with_s": a, "median_added_s": a - b}
    print("  %-8s %12.1f %12.1f %10.1f" % (name, b * 1e3, a * 1e3, (a - b) * 1e3))

# a fork storm: a fork-per-request parent and N children that each wait in epoll_wait twice and
# exit (tests/integration/exit-progs.c, the program test-preload-exits.sh checks the segments
# of), alternating without and with the agent; the goal is at most twice the time without it
prog = os.path.join(work, "exit-progs")
n = 500
if subprocess.run(["cc", "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-o", prog,
                   "tests/integration/exit-progs.c", "-lpthread"]).returncode:
    print("  %-8s failed: cannot compile exit-progs.c" % "storm")
else:
    base, withd9 = [], []
    # a directory per run, all removed after the series: on ext4 without a journal (this
    # machine's root) creating a file skips every inode of its group deleted in the last 60 to
    # 360 s (the kernel's find_inode_bit / recently_deleted), so removing the last run's 501
    # segments just before the next one charged the bench's own cleanup to the agent's runs
    # (perf of one storm: 16% to 40% of its CPU in that scan; agent/COST.md section 20)
    for i in range(reps):
        for with_agent, into in ((False, base), (True, withd9)):
            d = os.path.join(work, "storm-%d-%d" % (i, with_agent))
            os.makedirs(d)
            e = env_for(with_agent, d)
            e["D9_MAX_FILES"] = "2000"  # above the storm's 501 segments
            r = subprocess.run([prog, "storm", str(n)], env=e, capture_output=True, text=True,
                               timeout=300)
            into.append(int(r.stdout.strip() or 0) / 1e9)
    for i in range(reps):
        for with_agent in (False, True):
            shutil.rmtree(os.path.join(work, "storm-%d-%d" % (i, with_agent)), ignore_errors=True)
    b, a = statistics.median(base), statistics.median(withd9)
    res["results"]["fork-storm"] = {"children": n, "without_s": base, "with_s": withd9,
                                    "median_without_s": b, "median_with_s": a,
                                    "ratio": a / b if b else None, "goal_ratio": 2.0}
    print("  %-8s %12.1f %12.1f %10.1f  (%d forked children; ratio %.2f, goal <= 2)" %
          ("storm", b * 1e3, a * 1e3, (a - b) * 1e3, n, a / b if b else 0))
json.dump(res, open(out, "w"), indent=2)
PY
