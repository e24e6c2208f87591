#!/usr/bin/env bash
# bench-real.sh: CPU per request that the agent adds to Debian's redis-server, memcached and nginx
# under load, run by scripts/bench.sh (issue 14's wall-clock goals: <= 1% with default settings,
# <= 2% with 99 Hz CPU profiling, <= 3% with switch-out stacks). Per server and mode, PAIRS
# alternating pairs of fresh server processes, one without the agent and one with it (the order
# flips every pair, so drift on a shared machine cancels in the median): the server pinned to CPU
# 1 and the load tool to CPU 0, both at nice -10 when root, load for DUR seconds after a warm-up
# of 3 s (the agent's first seal, which reads the modules' symbols once per process, falls into
# it). Per run: the CPU time of every thread of the server's processes (the agent's threads
# included: /proc/PID/task/*/schedstat, ns) over the measured window, divided by the requests the
# server counted itself in that window (redis INFO total_commands_processed, memcached stats
# cmd_get + cmd_set, nginx stub_status requests). With the agent, D9_ROTATION_PERIOD=2s seals,
# symbolizes and compresses segments while the run is measured (a steady state, not a run that
# ends before its first seal); D9_COMPRESS=1 gzips every segment, as the default D9_COMPRESS=auto
# does once the directory is half full (a busy server's steady state; the short runs here would
# otherwise never compress). Result per mode: the median of the pairs' ratios (with / without -
# 1) and their spread (min .. max); the verdict is PASS or MISS only when every pair is on the same
# side of the goal, else inconclusive. Writes build/bench/real.json. Builds nothing. QUICK=1: fewer,
# shorter pairs. REAL_SERVERS, REAL_MODES, REAL_PAIRS, REAL_DURATION narrow it.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=${QUICK:-0}
exec python3 - "$PWD/build/libd9agent.so" "$quick" <<'PY'
import glob, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

agent, quick = sys.argv[1], sys.argv[2] == "1"
servers = os.environ.get("REAL_SERVERS", "redis memcached nginx").split()
modes = os.environ.get("REAL_MODES", "default cpu99 sched").split()
pairs = int(os.environ.get("REAL_PAIRS", "2" if quick else "5"))
dur = float(os.environ.get("REAL_DURATION", "4" if quick else "8"))
GOALS = {"default": 1.0, "cpu99": 2.0, "sched": 3.0}
MODE_ENV = {"default": {}, "cpu99": {"D9_CPU_PROFILE": "99"}, "sched": {"D9_SCHED_EVENTS": "1"}}
root = os.geteuid() == 0
nice = ["nice", "-n", "-10"] if root else []
if not os.path.exists(agent):
    sys.exit("bench-real: build/libd9agent.so is missing; run 'make bench'")
work = tempfile.mkdtemp(prefix="d9-bench-real-")

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def wait_until(pred, secs=20):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False

def env_for(mode, d):
    e = {k: v for k, v in os.environ.items() if not k.startswith("D9_") and k != "LD_PRELOAD"}
    if mode:
        e.update(LD_PRELOAD=agent, D9_TRACE_PATH=os.path.join(d, "trace", "trace.bin"),
                 D9_ROTATION_PERIOD="2s", D9_COMPRESS="1", **MODE_ENV[mode])
    return e

def pids_of(pid):
    """the process and its children (nginx's workers)"""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                kids = open(f"/proc/{p}/task/{t}/children").read().split()
                todo += [int(k) for k in kids]
        except OSError:
            pass
    return out

def cpu_ns(pid):
    """CPU time of every thread of pid and its children, ns; and the agent's threads' (d9-*)"""
    total = agent_ns = 0
    for p in pids_of(pid):
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                ns = int(open(f"/proc/{p}/task/{t}/schedstat").read().split()[0])
                name = open(f"/proc/{p}/task/{t}/comm").read().strip()
            except (OSError, ValueError, IndexError):
                continue
            total += ns
            if name.startswith("d9-"):
                agent_ns += ns
    return total, agent_ns

def query(port, msg, until):
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(msg)
    buf = b""
    while until not in buf:
        d = c.recv(65536)
        if not d:
            break
        buf += d
    c.close()
    return buf.decode("latin1")

# ---- servers: start(mode, d) -> (process, port); count(port) -> requests so far; load(port) ----
def redis_start(mode, d):
    port = free_port()
    p = subprocess.Popen(nice + ["taskset", "-c", "1", "redis-server", "--port", str(port),
                         "--bind", "127.0.0.1", "--dir", d, "--save", "", "--appendonly", "no",
                         "--daemonize", "no"], env=env_for(mode, d),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok = wait_until(lambda: "PONG" in query_safe(port, b"PING\r\n", b"\r\n"))
    return p, port, ok

def query_safe(port, msg, until):
    try:
        return query(port, msg, until)
    except OSError:
        return ""

def redis_count(port):
    s = query(port, b"INFO stats\r\n", b"total_net_input")
    return int(re.search(r"total_commands_processed:(\d+)", s).group(1))

def redis_load(port):
    return ["redis-benchmark", "-p", str(port), "-c", "8", "-t", "get,set", "-l", "-q"]

def memcached_start(mode, d):
    port = free_port()
    user = ["-u", "nobody"] if root else []
    p = subprocess.Popen(nice + ["taskset", "-c", "1", "memcached", "-l", "127.0.0.1", "-p",
                         str(port), "-U", "0", "-t", "1", "-m", "64"] + user, env=env_for(mode, d),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok = wait_until(lambda: "STAT pid" in query_safe(port, b"stats\r\n", b"END\r\n"))
    return p, port, ok

def memcached_count(port):
    s = query(port, b"stats\r\n", b"END\r\n")
    g = lambda k: int(re.search(r"STAT %s (\d+)" % k, s).group(1))
    return g("cmd_get") + g("cmd_set")

def memcached_load(port):
    return ["memcaslap", "-s", f"127.0.0.1:{port}", "-t", "3600s", "-c", "8", "-T", "1"]

NGINX_CONF = """daemon off;
master_process on;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
%(user)s
events { worker_connections 256; }
http {
    access_log %(d)s/access.log;
    client_body_temp_path %(d)s/body; proxy_temp_path %(d)s/proxy; fastcgi_temp_path %(d)s/fcgi;
    uwsgi_temp_path %(d)s/uwsgi; scgi_temp_path %(d)s/scgi;
    server {
        listen 127.0.0.1:%(port)d;
        root %(d)s/www;
        location = /status { stub_status; access_log off; }
    }
}
"""

def nginx_start(mode, d):
    port = free_port()
    os.makedirs(os.path.join(d, "www"), exist_ok=True)
    open(os.path.join(d, "www", "index.html"), "w").write("<html>hello from nginx</html>\n" * 20)
    conf = os.path.join(d, "nginx.conf")
    open(conf, "w").write(NGINX_CONF % {"d": d, "port": port,
                                        "user": "user root root;" if root else ""})
    p = subprocess.Popen(nice + ["taskset", "-c", "1", "nginx", "-c", conf, "-p", d],
                         env=env_for(mode, d), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok = wait_until(lambda: "Active connections" in query_safe(
        port, b"GET /status HTTP/1.0\r\n\r\n", b"Waiting"))
    return p, port, ok

def nginx_count(port):
    s = query(port, b"GET /status HTTP/1.0\r\n\r\n", b"Waiting")
    return int(s.split("Reading")[0].split()[-1])

def nginx_load(port):
    return ["wrk", "-t", "1", "-c", "8", "-d", "3600s", f"http://127.0.0.1:{port}/index.html"]

SERVERS = {"redis": ("redis-server", redis_start, redis_count, redis_load, "redis-benchmark"),
           "memcached": ("memcached", memcached_start, memcached_count, memcached_load, "memcaslap"),
           "nginx": ("nginx", nginx_start, nginx_count, nginx_load, "wrk")}

def one(srv, mode):
    """one run: (CPU ns per request, agent threads' share of the CPU, requests)"""
    binary, start, count, load, _ = SERVERS[srv]
    d = os.path.join(work, "run")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    p, port, ok = start(mode, d)
    if not ok:
        p.kill(); p.wait()
        raise RuntimeError(f"{binary} did not start")
    lp = subprocess.Popen(nice + ["taskset", "-c", "0"] + load(port),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # warm-up: connections open and caches warm (3 s), and with the agent its first
        # segment sealed, symbolized and compressed (a .bin.gz, 60 s at most): symbolizing
        # loads the modules' DWARF once per process (about 0.2 s of CPU for libc6-dbg's), a
        # one-time cost that is not the steady state measured here
        time.sleep(3.0)
        until = time.time() + 60
        while mode and not glob.glob(os.path.join(d, "trace", "*.bin.gz")) and time.time() < until:
            time.sleep(0.1)
        r0, (c0, a0) = count(port), cpu_ns(p.pid)
        time.sleep(dur)
        r1, (c1, a1) = count(port), cpu_ns(p.pid)
    finally:
        lp.kill(); lp.wait()
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill(); p.wait()
    n = r1 - r0
    if n <= 0:
        raise RuntimeError(f"{srv}: no requests counted")
    return (c1 - c0) / n, (a1 - a0) / max(c1 - c0, 1), n

def git(*a):
    try:
        return subprocess.run(["git", *a], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
res = {"bench": "real", "schema_version": 1, "pairs": pairs, "duration_s": dur,
       "rotation": "2s", "compress": "1", "commit": git("rev-parse", "--short", "HEAD") or "unknown",
       "tree": "dirty" if git("status", "--porcelain", "--untracked-files=no") else "clean",
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "servers": {}}
print(f"  {'server':10} {'mode':8} {'base ns/req':>11} {'d9 ns/req':>10} {'median':>8}"
      f" {'spread':>17} {'d9 threads':>10}  verdict (goal)")
for srv in servers:
    binary, _, _, _, tool = SERVERS[srv]
    if not shutil.which(binary) or not shutil.which(tool):
        print(f"  {srv:10} skipped: {binary} or {tool} is missing (scripts/install-deps.sh)")
        continue
    res["servers"][srv] = {}
    for mode in modes:
        ratios, base, withd, share = [], [], [], []
        try:
            for i in range(pairs):
                order = [None, mode] if i % 2 == 0 else [mode, None]
                got = {}
                for m in order:
                    got[m] = one(srv, m)
                base.append(got[None][0]); withd.append(got[mode][0]); share.append(got[mode][1])
                ratios.append((got[mode][0] / got[None][0] - 1) * 100)
        except (RuntimeError, OSError, ValueError, AttributeError) as e:
            print(f"  {srv:10} {mode:8} failed: {e}")
            continue
        med = statistics.median(ratios)
        goal = GOALS.get(mode)
        # a verdict only when every pair is on the same side of the goal: on a shared machine
        # the pairs of one mode spread over tens of points
        verdict = "" if goal is None else ("PASS" if max(ratios) <= goal else
            "MISS" if min(ratios) > goal else
            "inconclusive (median %s)" % ("within" if med <= goal else "over"))
        res["servers"][srv][mode] = {"ratios_pct": ratios, "median_pct": med,
                                     "base_ns_per_request": statistics.median(base),
                                     "d9_ns_per_request": statistics.median(withd),
                                     "agent_threads_share_pct": statistics.median(share) * 100,
                                     "goal_pct": goal, "verdict": verdict}
        print(f"  {srv:10} {mode:8} {statistics.median(base):11.0f} {statistics.median(withd):10.0f}"
              f" {med:+7.2f}% {min(ratios):+7.2f}..{max(ratios):+6.2f}%"
              f" {statistics.median(share) * 100:9.2f}%  {verdict} (<= {goal}%)")
shutil.rmtree(work, ignore_errors=True)
os.makedirs("build/bench", exist_ok=True)
json.dump(res, open("build/bench/real.json", "w"), indent=1)
PY
