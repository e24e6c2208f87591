#!/usr/bin/env bash
# test-stacks.sh: the stacks of CPU samples on real servers built without frame pointers, with
# the default settings (D9_STACKS=auto). Debian's kresd (knot-resolver) and named (bind9) run
# under LD_PRELOAD=build/libd9agent.so with D9_CPU_PROFILE=999 and a private configuration in $T
# that answers every query itself (kresd: a policy.ANSWER rule; named: a primary zone) on
# 127.0.0.1 and a free high port, so no query leaves the machine; dnsperf sends them queries for
# 3 s (bounded rate), then the server gets SIGTERM.
#   - stacks-NAME: at most 1% of the samples hold an invalid stack, by the analyzer's summary
#     (stacks.invalid_share) and by an independent check of `d9-analyze dump` here (a frame in
#     no Module of its segment, or a frame equal to the one below it); both counts agree; every
#     sample records its unwinder (CpuSample.unwind) and at least 100 samples were taken.
#   - stacks-NAME-validated: the kernel's frame-pointer chain was rejected in some samples (the
#     binaries have no frame pointers: without the validation auto mode would keep it).
#   - stacks-kresd-fp: D9_STACKS=fp on kresd: the chains are cut at their first bad frame, so
#     still at most 1% invalid, and the cut ones are marked truncated.
#   - stacks-ctimer-fds, stacks-ctimer: D9_CPU_PROFILE_MODE=ctimer on the test's own ST server
#     built without frame pointers (st-http-nofp, blocking-call stacks off: D9_BLOCKING=0):
#     /burn?ms=300 leaves no descriptor in the host but the trace segment and the connections
#     (the handler used libunwind, whose first use opened a pipe for good), and its samples'
#     stacks, unwound by libdw from the copied stack, hold burn_cpu with serve_conn above in 80%.
# Skips (counted, with the reason) when a package is missing or perf_event_open is denied.
set -u
. "$(dirname "$0")/lib-preload.sh"

NAME=stacks
for b in "$PL_LIB" "$PL_ANALYZE"; do
	if [ ! -e "$b" ]; then
		pl_fail "$NAME" "$b is not built (make all)"
		exit 0
	fi
done
if ! command -v python3 >/dev/null; then
	pl_fail "$NAME" "python3 is not installed (make deps)"
	exit 0
fi
HAVE_DNSPERF=1
if ! command -v dnsperf >/dev/null; then
	pl_skip "$NAME-dns" "dnsperf is not installed (Debian package dnsperf; make deps)"
	HAVE_DNSPERF=0
fi
for b in $(compgen -e | grep '^D9_'); do unset "$b"; done
export D9_ROTATION_PERIOD=0
unset LD_PRELOAD
T=$(mktemp -d "${TMPDIR:-/tmp}/d9-$NAME-XXXXXX")
trap pl_cleanup EXIT

# free_port: a port free for both UDP and TCP on 127.0.0.1 (the servers listen on both).
free_port() {
	python3 - <<'EOF'
import random, socket
for _ in range(200):
    p = random.randint(20000, 60000)
    try:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", p))
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM); t.bind(("127.0.0.1", p))
        u.close(); t.close(); print(p); break
    except OSError:
        pass
EOF
}

# answers PORT: one A query for www.d9.test to 127.0.0.1:PORT gets an answer.
answers() {
	python3 - "$1" <<'EOF'
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l for l in (b"www", b"d9", b"test")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.5)
try:
    s.sendto(q, ("127.0.0.1", int(sys.argv[1])))
    r = s.recv(512)
    sys.exit(0 if r[:2] == q[:2] else 1)
except OSError:
    sys.exit(1)
EOF
}

printf 'www.d9.test A\nmail.d9.test A\nns.d9.test A\nwww.d9.test A\n' >"$T/queries"

# The independent check: frames against the Module definitions of their process (every segment
# of its pid, wherever in them: a module the writer first defines after a sample that ran in it is
# still the process's, as the analyzer takes it).
read -r -d '' CHECK <<'EOF'
import json, re, sys
mods = {}  # pid -> [(start, end)]
samples = []  # (pid, frames, unwind)
stacks = {}
pid = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("rec") == "file":
        m = re.search(r"\.(\d+)\.\d+\.bin", r.get("name", ""))
        pid = int(m.group(1)) if m else r.get("name")
        stacks = {}
        continue
    if r.get("rec") == "def" and r.get("kind") == "Module":
        mods.setdefault(pid, []).append((r["start"], r["end"]))
    elif r.get("rec") == "def" and r.get("kind") == "Stack":
        stacks[r["id"]] = r["frames"]
    elif r.get("rec") == "event" and r.get("type") == "CpuSample":
        samples.append((pid, stacks.get(r["stack"], []), r.get("unwind", 0)))
invalid = recorded = 0
for pid, fr, unwind in samples:
    recorded += bool(unwind & 7)
    inmod = lambda a: any(lo <= a < hi for lo, hi in mods.get(pid, []))
    if any(not inmod(a if i == 0 else a - 1) for i, a in enumerate(fr)) or \
            any(fr[i] == fr[i - 1] for i in range(1, len(fr))):
        invalid += 1
samples = len(samples)
print(samples, invalid, recorded)
EOF

# run_server NAME DIR PORT [VAR=value ...] -- ARGV...: the server under the agent, dnsperf for 3 s,
# SIGTERM; its trace in DIR/trace. Returns 1 with the reason in PL_ERR.
run_server() {
	local name=$1 dir=$2 port=$3 envs=() pid rc
	shift 3
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	mkdir -p "$dir/trace"
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$dir/trace/trace.bin" D9_FLUSH_INTERVAL=50ms \
		D9_CPU_PROFILE=999 "${envs[@]}" "$@" >"$dir/stdout" 2>"$dir/stderr" &
	pid=$!
	PL_PIDS+=("$pid")
	if ! d9_wait_for 30 eval "answers $port || ! pl_alive $pid" || ! pl_alive "$pid"; then
		PL_ERR="$name does not answer on 127.0.0.1:$port within $((30 * D9_SLOW)) s (stderr: $(tail -c 300 "$dir/stderr"))"
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 1
	fi
	timeout 60 dnsperf -s 127.0.0.1 -p "$port" -d "$T/queries" -l 3 -c 4 -Q 20000 >"$dir/dnsperf" 2>&1
	rc=$?
	kill -TERM "$pid" 2>/dev/null
	SPID=$pid
	pl_wait_exit 30
	if [ "$rc" != 0 ] || ! grep -q 'Queries completed: *[1-9]' "$dir/dnsperf"; then
		PL_ERR="dnsperf against $name failed (exit $rc): $(grep -E 'completed|Error|error' "$dir/dnsperf" | head -3)"
		return 1
	fi
	if [ "$SRC" = hung ]; then
		PL_ERR="$name did not exit within $((30 * D9_SLOW)) s of SIGTERM"
		return 1
	fi
}

# check NAME DIR [fp]: the results above for the trace in DIR.
check() {
	local name=$1 dir=$2 mode=${3:-auto} js py n inv rec sn sinv rej trunc
	if grep -q 'perf_event_open(cpu-clock)' "$dir/stderr"; then
		pl_skip "stacks-$name" "perf_event_open is denied here: $(grep -m1 perf_event_open "$dir/stderr")"
		return
	fi
	js=$("$PL_ANALYZE" summary --json "$dir/trace" 2>"$dir/analyze.err")
	read -r sn sinv rej trunc <<<"$(python3 -c 'import json,sys; s=json.load(sys.stdin)["stacks"]; print(s["samples"], s["invalid"], s["fp_rejected"], s["truncated"])' <<<"$js" 2>/dev/null)"
	"$PL_ANALYZE" dump "$dir/trace" >"$dir/dump" 2>"$dir/dump.err"
	py=$(python3 -c "$CHECK" "$dir/dump" 2>&1)
	read -r n inv rec <<<"$py"
	if [ -z "${sn:-}" ] || [ -z "${n:-}" ] || [ -n "${py//[0-9 ]/}" ]; then
		pl_fail "stacks-$name" "no result (summary: $(head -c 200 "$dir/analyze.err"); check: ${py:0:300})"
		return
	fi
	local detail="$n samples, $inv invalid (summary: $sinv of $sn), $trunc truncated, frame-pointer chain rejected in $rej"
	if [ "$n" -lt 100 ]; then
		pl_fail "stacks-$name" "only $n samples (want at least 100): $detail"
	elif [ "$sn" != "$n" ] || [ "$sinv" != "$inv" ]; then
		pl_fail "stacks-$name" "the summary and the dump disagree: $detail"
	elif [ $((inv * 100)) -gt "$n" ]; then
		pl_fail "stacks-$name" "more than 1% invalid stacks: $detail"
	elif [ "$rec" != "$n" ]; then
		pl_fail "stacks-$name" "$((n - rec)) sample(s) without their unwinder: $detail"
	else
		pl_pass "stacks-$name" "$detail"
	fi
	if [ "$mode" = fp ]; then
		# every rejected chain was cut, and says so
		if [ "$rej" -gt 0 ] && [ "$trunc" -ge "$rej" ]; then
			pl_pass "stacks-$name-cut" "$rej rejected chains, $trunc truncated stacks"
		else
			pl_fail "stacks-$name-cut" "want rejected chains, each marked truncated: $detail"
		fi
	elif [ "$rej" -gt 0 ]; then
		pl_pass "stacks-$name-validated" "frame-pointer chain rejected in $rej of $n samples"
	else
		pl_fail "stacks-$name-validated" "no frame-pointer chain was rejected on a binary without frame pointers: $detail"
	fi
}

# ---- kresd ---------------------------------------------------------------------------------------
if [ "$HAVE_DNSPERF" = 0 ]; then
	: # said above
elif ! command -v kresd >/dev/null; then
	pl_skip stacks-kresd "kresd is not installed (Debian package knot-resolver; make deps)"
else
	for mode in auto fp; do
		dir=$T/kresd-$mode
		port=$(free_port)
		mkdir -p "$dir/run"
		# answers A queries itself (policy.ANSWER) and never asks another server: no root
		# priming, no time-skew or trust-anchor queries, DNSSEC off
		cat >"$dir/kresd.conf" <<EOF
net.listen('127.0.0.1', $port, { kind = 'dns' })
cache.open(10 * MB, 'lmdb://$dir/run/cache')
modules.unload('priming')
modules.unload('detect_time_skew')
modules.unload('detect_time_jump')
modules.unload('ta_signal_query')
modules.unload('ta_sentinel')
trust_anchors.remove('.')
policy.add(policy.all(policy.ANSWER({ [kres.type.A] = { rdata = kres.str2ip('127.0.0.2'), ttl = 300 } }, true)))
EOF
		envs=()
		[ "$mode" = fp ] && envs=(D9_STACKS=fp)
		name=kresd
		[ "$mode" = fp ] && name=kresd-fp
		if run_server kresd "$dir" "$port" "${envs[@]}" -- kresd -n -q -c "$dir/kresd.conf" "$dir/run"; then
			check "$name" "$dir" "$mode"
		else
			pl_fail "stacks-$name" "$PL_ERR"
		fi
	done
fi

# ---- named ---------------------------------------------------------------------------------------
if [ "$HAVE_DNSPERF" = 0 ]; then
	: # said above
elif ! command -v named >/dev/null && [ ! -x /usr/sbin/named ]; then
	pl_skip stacks-named "named is not installed (Debian package bind9; make deps)"
else
	NAMED=$(command -v named || echo /usr/sbin/named)
	dir=$T/named
	port=$(free_port)
	mkdir -p "$dir/run"
	cat >"$dir/named.conf" <<EOF
options {
	directory "$dir/run";
	pid-file "$dir/run/named.pid";
	listen-on port $port { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	notify no;
	allow-query { 127.0.0.1; };
};
controls { };
zone "d9.test" { type primary; file "$dir/d9.test.zone"; };
EOF
	cat >"$dir/d9.test.zone" <<'EOF'
$TTL 300
@ IN SOA ns.d9.test. admin.d9.test. 1 3600 600 86400 300
@ IN NS ns.d9.test.
ns IN A 127.0.0.1
www IN A 127.0.0.2
mail IN A 127.0.0.3
EOF
	if run_server named "$dir" "$port" -- "$NAMED" -f -n 2 -c "$dir/named.conf"; then
		check named "$dir"
	else
		pl_fail stacks-named "$PL_ERR"
	fi
fi

# ---- ctimer: no libunwind, no pipe -------------------------------------------------------------
if [ ! -x "$ST_HTTP_NOFP" ]; then
	pl_fail stacks-ctimer "$ST_HTTP_NOFP is not built (make all)"
elif ! pl_start "$T/ctimer" "$ST_HTTP_NOFP" D9_CPU_PROFILE=999 D9_CPU_PROFILE_MODE=ctimer \
	D9_BLOCKING=0 --; then
	pl_fail stacks-ctimer "$PL_ERR"
else
	fds() { for f in /proc/"$SPID"/fd/*; do readlink "$f"; done 2>/dev/null | sort; }
	fds >"$SDIR/fds0"
	pl_get "/burn?ms=300"
	fds >"$SDIR/fds1"
	# new since the start: the segment file, connections; never a pipe or anything else
	# (and the worker's /proc/thread-self/schedstat, README "What the agent does to the host")
	extra=$(comm -13 "$SDIR/fds0" "$SDIR/fds1" | grep -v -e '^socket:' -e "^$SDIR/trace/" \
		-e '^/proc/[0-9]*/task/[0-9]*/schedstat$')
	if [ "$CODE" != 200 ]; then
		pl_fail stacks-ctimer-fds "/burn: status $CODE"
	elif [ -n "$extra" ]; then
		pl_fail stacks-ctimer-fds "new descriptors in the host: $(tr '\n' ' ' <<<"$extra")"
	else
		pl_pass stacks-ctimer-fds "$(wc -l <"$SDIR/fds1") descriptors, none new but the trace's and sockets"
	fi
	pl_quit
	if [ "$SRC" = hung ]; then
		pl_fail stacks-ctimer "st-http-nofp did not exit"
	else
		"$PL_ANALYZE" flame "$SDIR/trace" >"$SDIR/flame" 2>"$SDIR/flame.err"
		read -r all good <<<"$(awk '{ n = $NF; all += n; if ($0 ~ /serve_conn.*burn_cpu/) good += n }
			END { print all + 0, good + 0 }' "$SDIR/flame")"
		js=$("$PL_ANALYZE" summary --json "$SDIR/trace" 2>/dev/null)
		inv=$(python3 -c 'import json,sys; s=json.load(sys.stdin)["stacks"]; print(s["invalid"], s["by_unwinder"])' <<<"$js" 2>&1)
		# 300 ms at up to the kernel's tick: a quarter of that at least (20 at 250 Hz)
		want=$(($(d9_kernel_hz) * 3 / 10 / 4 + 1))
		if [ "$all" -lt "$want" ]; then
			pl_fail stacks-ctimer "only $all ctimer samples (want $want: 300 ms at up to $(d9_kernel_hz) Hz): $(head -c 200 "$SDIR/stderr")"
		elif [ $((good * 100)) -lt $((all * 80)) ]; then
			pl_fail stacks-ctimer "$good of $all samples have serve_conn above burn_cpu (want 80%): $(sort -k2 -n "$SDIR/flame" | tail -n 1 | cut -c1-200)"
		elif [ "${inv%% *}" != 0 ]; then
			pl_fail stacks-ctimer "invalid stacks: $inv"
		else
			pl_pass stacks-ctimer "$good of $all samples with serve_conn above burn_cpu; invalid, unwinders: $inv"
		fi
	fi
fi
