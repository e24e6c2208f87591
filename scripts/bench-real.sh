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
# side of the goal, else inconclusive. Then one more run per mode with the agent under
# perf record (-F 999): the agent's share of the process's CPU samples, with its standard error
# (see "the agent's share of the CPU, sampled" below; REAL_SAMPLE=0 skips it; skipped, with the
# reason, without perf, objdump or the permission). Writes build/bench/real.json. Builds
# nothing. QUICK=1: fewer, shorter pairs. REAL_SERVERS, REAL_MODES, REAL_PAIRS, REAL_DURATION
# narrow it.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=${QUICK:-0}
exec python3 - "$PWD/build/libd9agent.so" "$quick" <<'PY'
import contextlib, glob, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

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

def tasks(pid):
    """(/proc directory, name) of every thread of pid still there"""
    try:
        ts = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out = []
    for t in ts:
        d = f"/proc/{pid}/task/{t}"
        try:
            out.append((d, open(d + "/comm").read().strip()))
        except OSError:
            pass
    return out

def cpu_ns(pid):
    """CPU time of every thread of pid and its children, ns; and the agent's threads' (d9-*)"""
    total = agent_ns = 0
    for p in pids_of(pid):
        for d, name in tasks(p):
            try:
                ns = int(open(d + "/schedstat").read().split()[0])
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

def sealed(d):
    """a compressed segment in the run's trace directory (trace/d9-uid-N/ when the server
    dropped its privileges: memcached -u nobody, nginx's worker)"""
    return glob.glob(os.path.join(d, "trace", "**", "*.bin.gz"), recursive=True)

@contextlib.contextmanager
def loaded(srv, mode):
    """a fresh server (with the agent in mode, or without: None) under its load, warmed up:
    yields (process, port, its directory); stops both after"""
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
        while mode and not sealed(d) and time.time() < until:
            time.sleep(0.1)
        yield p, port, d
    finally:
        lp.kill(); lp.wait()
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill(); p.wait()

def one(srv, mode):
    """one run: (CPU ns per request, agent threads' share of the CPU, requests)"""
    count = SERVERS[srv][2]
    with loaded(srv, mode) as (p, port, _):
        r0, (c0, a0) = count(port), cpu_ns(p.pid)
        time.sleep(dur)
        r1, (c1, a1) = count(port), cpu_ns(p.pid)
    n = r1 - r0
    if n <= 0:
        raise RuntimeError(f"{srv}: no requests counted")
    return (c1 - c0) / n, (a1 - a0) / max(c1 - c0, 1), n

# ---- the agent's share of the CPU, sampled -------------------------------------------------------
# A pair's ratio cannot tell 1% on a shared machine (its spread is tens of points), so each mode
# also gets one run under perf record (-F SAMPLE_HZ, cpu-clock, every thread of the server's
# processes, kernel included) in the measured window: the agent's share is its threads' CPU time
# (d9-*) as the pairs' runs with the agent measured it (schedstat over the process's, the
# median: the kernel's own accounting, without perf attached) plus the share of the process's
# samples that the server's threads took in libd9agent.so, which only samples can split out.
# With N samples and share p, the latter's standard error is sqrt(p(1-p)/N). Under perf the
# agent's threads took up to twice their share of the pairs' runs (redis: 1.0% against 0.5%;
# perf's own work at every switch of a traced thread, which d9-compress, preempted at each of
# redis's wake-ups on the CPU they share, makes often), so that run's schedstat figure and
# their share of its samples are kept for reference only.
# What samples cannot see: the agent's effect on the server's own code (a longer path in malloc,
# caches; the callgrind rows count the instructions of it); the agent's calls into other objects
# on the server's threads (the C library's trylock where the program called lock, and its clock
# reads when they are the vDSO's: on a machine whose kernel does not use the TSC); and the
# kernel's work at each switch of a thread that has perf events of the agent's (modes cpu99 and
# sched). Nor the kernel's price for a process the agent's threads made multi-threaded (a file
# reference at each system call on a descriptor once the table is shared: agent/COST.md section
# 12), which a server that has threads of its own pays anyway, and which the agent's threads
# avoid with tables of their own (agent/fdown.c, where the kernel allows: the run records which).
# So a sampled share is "direct cost within the goal" only in default mode, on a machine where
# the agent reads the TSC, for a server whose every process has a thread of its own besides its
# main one or whose agent threads had tables of their own; elsewhere a lower bound: a MISS when
# even that is over the goal.
SAMPLE = os.environ.get("REAL_SAMPLE", "1") != "0"
SAMPLE_HZ = 999

def perf_missing():
    if not shutil.which("perf"):
        return "perf is missing (linux-perf)"
    if not root:
        try:
            par = int(open("/proc/sys/kernel/perf_event_paranoid").read())
        except (OSError, ValueError):
            par = 3
        if par > 1:
            return "needs root or kernel.perf_event_paranoid <= 1 (the kernel's samples too)"
    try:
        subprocess.run(["perf", "record", "-q", "-F", "99", "-o", os.path.join(work, "probe.data"),
                        "--", "true"], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return "perf record does not work here"
    return None

def agent_clock(d):
    """the agent's clock in the run's first segment ("tsc" or "monotonic"), or None: the
    header chunk's clock_source (format/FORMAT.md section 6, file offset 36)"""
    import gzip
    # a server that dropped its privileges writes under trace/d9-uid-N/
    for f in sorted(glob.glob(os.path.join(d, "trace", "**", "*.bin*"), recursive=True)):
        try:
            with (gzip.open(f) if f.endswith(".gz") else open(f, "rb")) as fh:
                b = fh.read(40)
        except (OSError, EOFError):
            continue
        if len(b) > 36:
            return "tsc" if b[36] == 1 else "monotonic"
    return None

def after_syscalls(path):
    """'symbol+0xoffset' of the instructions in the agent that follow a syscall instruction, up to
    and including the first branch (the test of the result: mov, cmp, ja; at most three): where
    the return from the kernel lands. The wrappers make the program's system calls themselves
    (preload/libc-direct.c), so a sample there is the program's call: without the agent it lands
    in the C library's stub, after the same call, spread the same way over the instructions that
    test its result (nginx without the agent: `__libc_pread` 70% of its samples on the cmp after
    its syscall and 19% on the ja after that; `write` 89% and 6%; `close` 94% and 6%)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True,
                         text=True, timeout=300).stdout
    # perf may name an address by any of its aliases (open64 for open), objdump by one of them
    names = {}
    nm = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                        timeout=300).stdout
    for line in nm.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TtWw":
            names.setdefault(int(f[0], 16), set()).add(f[2].split("@")[0])
    sites, sym, base, left = set(), None, 0, 0
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.+)>:$", line)
        if m:
            base, sym, left = int(m.group(1), 16), m.group(2), 0
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)", line)
        if not m or sym is None:
            continue
        op = m.group(2)
        if left:
            for name in names.get(base, set()) | {sym}:
                sites.add("%s+0x%x" % (name, int(m.group(1), 16) - base))
            # the result's test goes on through plain moves and compares to its branch
            left = left - 1 if op in ("mov", "movslq", "cmp", "test") else 0
        if op == "syscall":
            left = 3
    return sites

def own_threads(pid):
    """the threads of pid that are not the agent's (d9-*)"""
    return sum(not name.startswith("d9-") for _, name in tasks(pid))

def agent_fds(procs):
    """"private" when the agent's writer has a descriptor table of its own (agent/fdown.c: none
    of the server's sockets in it), "shared" when it shares the server's, None: not seen"""
    for pid in procs:
        for d, name in tasks(pid):
            if name != "d9-writer":
                continue
            try:
                links = [os.readlink(f"{d}/fd/{x}") for x in os.listdir(d + "/fd")]
            except OSError:
                continue
            return "shared" if any(l.startswith("socket:") for l in links) else "private"
    return None

def sampled(srv, mode):
    """one run with the agent under perf record: (the server threads' share in libd9agent.so %,
    its standard error %, samples, the agent's clock, the system calls' returns there %, a
    process of the server single-threaded without the agent, the agent's threads in that run:
    by schedstat %, by samples %)"""
    data = os.path.join(work, "perf.data")
    with loaded(srv, mode) as (p, port, d):
        procs = pids_of(p.pid)
        pids = ",".join(str(x) for x in procs)
        single = any(own_threads(x) == 1 for x in procs)
        c0, a0 = cpu_ns(p.pid)
        subprocess.run(["perf", "record", "-q", "-F", str(SAMPLE_HZ), "-e", "cpu-clock",
                        "-p", pids, "-o", data, "--", "sleep", str(dur)],
                       capture_output=True, timeout=dur + 120, check=True)
        c1, a1 = cpu_ns(p.pid)
        clock = agent_clock(d)
        fds = agent_fds(procs)
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym,symoff,dso"],
                         capture_output=True, text=True, timeout=300).stdout
    total = threads = in_code = returns = 0
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        total += 1
        if f[0].startswith("d9-"):
            threads += 1
        elif "libd9agent.so" in line:
            if len(f) >= 4 and f[-2] in SYSCALL_RETURNS:
                returns += 1
                continue
            in_code += 1
    if total < 100 or c1 <= c0:
        raise RuntimeError(f"{srv}: {total} samples")
    p_code = in_code / total
    return (p_code * 100, (p_code * (1 - p_code) / total) ** 0.5 * 100, total, clock,
            returns / total * 100, single, (a1 - a0) / (c1 - c0) * 100, threads / total * 100,
            fds)

# A server single-threaded without the agent pays the kernel's file references only while the
# agent's threads share its descriptor table (agent/fdown.c: they have their own where the kernel
# allows), so "single" is passed only for a run whose writer shared it.
# MISS when even the lower bound is over the goal. A direct share within it is not a PASS: the
# agent's indirect effects (its threads' work on the CPU the server runs on, which leaves the
# server's caches colder; the server's own code taking longer paths) are not in any sample of
# the agent's, and only the pairs could show them, which cannot resolve 1% here.
def sample_verdict(mode, share, se, clock, single, goal):
    lo, hi = share - 2 * se, share + 2 * se
    complete = mode == "default" and clock == "tsc" and not single
    if lo > goal:
        return "MISS"
    if complete and hi <= goal:
        return "direct cost within the goal"
    if complete:
        return "direct cost near the goal"
    return "lower bound, no verdict"

def git(*a):
    try:
        return subprocess.run(["git", *a], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
res = {"bench": "real", "schema_version": 2, "pairs": pairs, "duration_s": dur,
       "rotation": "2s", "compress": "1", "commit": git("rev-parse", "--short", "HEAD") or "unknown",
       "tree": "dirty" if git("status", "--porcelain", "--untracked-files=no") else "clean",
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "servers": {}}
sample_skip = perf_missing() if SAMPLE else None
if SAMPLE and sample_skip is None and not shutil.which("objdump"):
    sample_skip = "objdump is missing (binutils)"
SYSCALL_RETURNS = after_syscalls(agent) if SAMPLE and sample_skip is None else set()
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
        smp = None
        if SAMPLE and sample_skip is None:
            try:
                code, se, ns, clock, rets, single, athr_perf, athr_smp, fds = sampled(srv, mode)
                # the agent's threads: their CPU time in the pairs' runs with the agent (the
                # kernel's accounting, without perf; the median), plus the server threads'
                # time in the agent's code, which only samples can split out
                athr = statistics.median(share) * 100
                sh = athr + code
                sv = sample_verdict(mode, sh, se, clock, single and fds != "private", goal)
                smp = {"share_pct": sh, "stderr_pct": se, "samples": ns, "hz": SAMPLE_HZ,
                       "agent_clock": clock, "server_threads_in_agent_pct": code,
                       "agent_threads_pct": athr, "agent_threads_range_pct":
                       [min(share) * 100, max(share) * 100],
                       "agent_threads_perf_run_pct": athr_perf,
                       "agent_threads_sampled_pct": athr_smp,
                       "syscall_returns_pct": rets, "single_threaded": single,
                       "agent_fds": fds, "verdict": sv}
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
                smp = {"failed": str(e)}
        elif SAMPLE:
            smp = {"skipped": sample_skip}
        res["servers"][srv][mode] = {"ratios_pct": ratios, "median_pct": med,
                                     "base_ns_per_request": statistics.median(base),
                                     "d9_ns_per_request": statistics.median(withd),
                                     "agent_threads_share_pct": statistics.median(share) * 100,
                                     "goal_pct": goal, "verdict": verdict, "sampled": smp}
        print(f"  {srv:10} {mode:8} {statistics.median(base):11.0f} {statistics.median(withd):10.0f}"
              f" {med:+7.2f}% {min(ratios):+7.2f}..{max(ratios):+6.2f}%"
              f" {statistics.median(share) * 100:9.2f}%  {verdict} (<= {goal}%)")
        if smp and "share_pct" in smp:
            print(f"  {'':10} {'':8} sampled: {smp['share_pct']:.2f}% +- {smp['stderr_pct']:.2f}"
                  f" (the agent's threads {smp['agent_threads_pct']:.2f}%, the pairs' median;"
                  f" in the perf run {smp['agent_threads_perf_run_pct']:.2f}% by schedstat,"
                  f" {smp['agent_threads_sampled_pct']:.2f}% of the samples; {smp['samples']}"
                  f" samples at {SAMPLE_HZ} Hz: server threads in the agent's"
                  f" code {smp['server_threads_in_agent_pct']:.2f}%, not counted: the program's"
                  f" system calls' returns there {smp['syscall_returns_pct']:.2f}%; agent clock"
                  f" {smp['agent_clock']}{'; a process of it single-threaded without the agent' if smp['single_threaded'] else ''}):"
                  f" {smp['verdict']}")
        elif smp:
            print(f"  {'':10} {'':8} sampled: {smp.get('failed') or smp.get('skipped')}")
shutil.rmtree(work, ignore_errors=True)
os.makedirs("build/bench", exist_ok=True)
json.dump(res, open("build/bench/real.json", "w"), indent=1)
PY
