# lib-preload.sh: shared helpers of tests/integration/test-preload-*.sh (sourced, not run). Those
# scripts run the real test servers (tests/servers/) under LD_PRELOAD=build/libd9agent.so with
# real requests (curl, wrk; 127.0.0.1 only), stop them, and check the trace through
# `d9-analyze dump` with trace_check.py. Every result is a line "PASS name[: detail]",
# "FAIL name: why" or "SKIP name: why" (tests/run.sh counts them). Each script gets a fresh
# directory $T, removed at exit together with every server the script started (killed by pid).
# Runs are bounded: servers get -t 50 (they exit by themselves), waits have deadlines, and no
# result depends on timing except the delays the requests inject (checked with wide margins).

# the waits (d9_wait_for, d9_wait_settled, d9_symbolized, D9_TEST_SLOW) are lib.sh's
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PL_LIB=$PL_ROOT/build/libd9agent.so
PL_ANALYZE=$PL_ROOT/build/d9-analyze
PL_CHECK=$PL_ROOT/tests/integration/trace_check.py
ST_HTTP=$PL_ROOT/build/tests/st-http
ST_HTTP_NOFP=$PL_ROOT/build/tests/st-http-nofp
EPOLL_HTTP=$PL_ROOT/build/tests/epoll-http

PL_PIDS=()

pl_pass() { echo "PASS $1${2:+: $2}"; }
pl_fail() { echo "FAIL $1: $2"; }
pl_skip() { echo "SKIP $1: $2"; }

# pl_need_built NAME: one FAIL line (and the script's end) when the agent or the analyzer is not
# built; the tests of real servers check their own servers and tools after this.
pl_need_built() {
	local b
	for b in "$PL_LIB" "$PL_ANALYZE"; do
		if [ ! -e "$b" ]; then
			pl_fail "$1" "$b is not built (make all)"
			exit 0
		fi
	done
}

pl_cleanup() {
	local p
	for p in "${PL_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for p in "${PL_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	# D9_TEST_KEEP=1 keeps the test's files, as d9_cleanup does
	if [ -n "${T:-}" ]; then
		if [ -n "${D9_TEST_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
	fi
}

# pl_setup NAME: checks that the agent, the analyzer, the servers and the tools exist (one FAIL
# line and exit otherwise), clears D9_* and LD_PRELOAD from the environment, makes $T.
pl_setup() {
	local b
	for b in "$PL_LIB" "$PL_ANALYZE" "$ST_HTTP" "$ST_HTTP_NOFP" "$EPOLL_HTTP"; do
		if [ ! -e "$b" ]; then
			pl_fail "$1" "$b is not built (make all)"
			exit 0
		fi
	done
	for b in curl python3 nm; do
		if ! command -v "$b" >/dev/null; then
			pl_fail "$1" "$b is not installed (make deps)"
			exit 0
		fi
	done
	pl_env "$1"
}

# pl_env NAME: clears D9_* and LD_PRELOAD from the environment but for the two settings every
# test wants (below), makes $T and removes it, with every server started, at exit. pl_setup does
# this after its checks; the tests of real servers call it after theirs.
pl_env() {
	local b
	for b in $(compgen -e | grep '^D9_'); do unset "$b"; done
	# The default 10m wall-clock rotation would seal a segment whenever a test happens to run
	# across a boundary, and tests that look for the .active file would fail once in a while.
	# Tests of rotation set it themselves.
	export D9_ROTATION_PERIOD=0
	# An exit waits at most D9_EXIT_TIMEOUT (100ms) for the seal, then leaves the segment
	# .active; on a loaded machine the writer may get no CPU that soon. Tests that check what
	# an exit seals wait up to 10 s; what the default costs is measured by `make bench`.
	export D9_EXIT_TIMEOUT=10s
	unset LD_PRELOAD
	T=$(mktemp -d "${TMPDIR:-/tmp}/d9-$1-XXXXXX")
	trap pl_cleanup EXIT
	d9_no_machine_debug_files
}

# pl_program VAR NAME PROGRAM DIR PACKAGE: sets VAR to the path of PROGRAM (on PATH, else
# DIR/PROGRAM); when it is not installed, a SKIP of NAME (counted) naming the Debian PACKAGE, and
# returns 1.
pl_program() {
	local p
	p=$(command -v "$3" || echo "$4/$3")
	if [ ! -x "$p" ]; then
		pl_skip "$2" "$3 is not installed (Debian package $5; make deps)"
		return 1
	fi
	printf -v "$1" '%s' "$p"
}

# pl_free_port: a TCP port free on 127.0.0.1 now.
pl_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# PL_NICE: the prefix that runs a command at nice -10 when we may (root), for tests that compare
# a server's timing with what a client saw, or two runs' times: on a machine busy with other work
# a preempted process would stretch both by whole scheduler slices.
PL_NICE=()
[ "$(id -u)" -eq 0 ] && PL_NICE=(nice -n -10)

# pl_start DIR BINARY [VAR=value ...] -- [SERVER_ARGS...]: starts the server under the agent with
# D9_TRACE_PATH=DIR/trace/trace.bin and D9_FLUSH_INTERVAL=50ms (the VARs come after, so they can
# override), on a free port, -t 50 -q. Sets SPID, SPORT, SDIR, SBIN; copies /proc/SPID/maps to
# DIR/maps (the PIE's load base; forked workers share it). Returns 1 with the reason in PL_ERR
# when no port file appears within 30 s (times D9_TEST_SLOW).
pl_start() {
	local dir=$1 bin=$2 envs=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	mkdir -p "$dir"
	rm -f "$dir/port"
	SDIR=$dir SBIN=$bin SPORT=""
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$dir/trace/trace.bin" D9_FLUSH_INTERVAL=50ms \
		"${envs[@]}" "$bin" -p 0 -P "$dir/port" -t 50 -q "$@" >"$dir/stdout" 2>"$dir/stderr" &
	SPID=$!
	PL_PIDS+=("$SPID")
	# the port file, or the server's end (then no point waiting)
	if d9_wait_for 30 eval '[ -s "$dir/port" ] || ! pl_alive "$SPID"' && [ -s "$dir/port" ]; then
		SPORT=$(cat "$dir/port")
		cp "/proc/$SPID/maps" "$dir/maps" 2>/dev/null
		return 0
	fi
	PL_ERR="$(basename "$bin") $*: no port file within $((30 * D9_SLOW)) s (stderr: $(head -c 300 "$dir/stderr"))"
	kill -KILL "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
	return 1
}

# pl_run PREFIX BINARY [VAR=value ...] -- PATH BODY [PATH BODY ...]: one server run in $T/PREFIX
# (pl_start), the requests in order, each on its own connection, then the control connection
# (pl_session_quit). BODY is a glob pattern of the reply's body ("burn ms=300*"). Failures are
# reported as PREFIX, PREFIX-replies or PREFIX-exit; returns 1 when there is no trace to check.
pl_run() {
	local prefix=$1 bin=$2 envs=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	if ! pl_start "$T/$prefix" "$bin" "${envs[@]}" --; then
		pl_fail "$prefix" "$PL_ERR"
		return 1
	fi
	while [ $# -gt 1 ]; do
		pl_get "$1"
		# shellcheck disable=SC2254 # $2 is a pattern
		case "$BODY" in
		$2) [ "$CODE" = 200 ] || pl_fail "$prefix-replies" "$1: status $CODE" ;;
		*) pl_fail "$prefix-replies" "$1: status $CODE body '${BODY:0:100}', want '$2'" ;;
		esac
		shift 2
	done
	if ! pl_session_quit || [ "$SRC" != 0 ]; then
		pl_fail "$prefix-exit" "${PL_ERR:-exit status $SRC}"
		return 1
	fi
}

# pl_alive PID: the process exists and is not a zombie.
pl_alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ]
}

# pl_wait_exit SECONDS: waits for the server SPID to end; sets SRC to its exit status (as the
# shell reports it: 143 for SIGTERM), or to "hung" after killing it when it outlives SECONDS
# (times D9_TEST_SLOW). The quits below give 20 s: the exit may wait D9_EXIT_TIMEOUT (10 s, set
# above for loaded machines) for the seal, and the compressor's stop after it.
pl_wait_exit() {
	local deadline=$(( $(date +%s%N) + $1 * D9_SLOW * 1000000000 ))
	while pl_alive "$SPID"; do
		if [ "$(date +%s%N)" -gt "$deadline" ]; then
			kill -KILL "$SPID" 2>/dev/null
			wait "$SPID" 2>/dev/null
			SRC=hung
			return 1
		fi
		sleep 0.05
	done
	wait "$SPID" 2>/dev/null
	SRC=$?
}

# pl_get PATH: one GET on a new connection to the server; body in BODY, status in CODE, headers
# in $SDIR/headers.
pl_get() {
	CODE=$(curl -sS --max-time 20 -D "$SDIR/headers" -o "$SDIR/body" -w '%{http_code}' \
		"http://127.0.0.1:$SPORT$1" 2>"$SDIR/curl.err")
	BODY=$(cat "$SDIR/body" 2>/dev/null)
}

# pl_header NAME: a header of the last pl_get reply.
pl_header() { tr -d '\r' <"$SDIR/headers" | sed -n "s/^$1: //Ip" | head -n1; }

# pl_gets N PATH WANT_BODY: N sequential GETs, each on its own connection; returns 1 (reason in
# PL_ERR) unless every reply is 200 with body WANT_BODY.
pl_gets() {
	local i
	for i in $(seq "$1"); do
		pl_get "$2"
		if [ "$CODE" != 200 ] || [ "$BODY" != "$3" ]; then
			PL_ERR="request $i of $1 to $2: status $CODE body '$BODY' $(head -c 200 "$SDIR/curl.err")"
			return 1
		fi
	done
}

# pl_pipeline PATH...: sends GETs for every PATH in ONE write on one new connection (pipelined;
# the last asks for Connection: close) and reads until the server closes. Returns 1 (reason in
# PL_ERR) unless every reply is a 200.
pl_pipeline() {
	PL_ERR=$(python3 - "$SPORT" "$@" <<'PYEOF' 2>&1
import socket, sys
port, paths = int(sys.argv[1]), sys.argv[2:]
req = b""
for i, p in enumerate(paths):
    req += ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
            % (p, "Connection: close\r\n" if i == len(paths) - 1 else "")).encode()
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(req)
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
n = data.count(b"HTTP/1.1 200 ")
if n != len(paths):
    sys.exit("%d of %d pipelined replies are 200: %r" % (n, len(paths), data[:300]))
PYEOF
	)
}

# pl_session_quit: for st-http. On ONE keep-alive connection, polls /stats until it is the only
# open connection (every earlier connection's coroutine has exited; 20 s at most, times
# D9_TEST_SLOW), saves that reply to $SDIR/stats.json, then sends /quit on the same connection and
# waits for the server to exit (SRC). So the whole control session adds exactly one connection
# coroutine, which never exits (the process exits inside it). Returns 1 (reason in PL_ERR) on any
# failure, also when other connections were still open at the deadline (the server is still
# told to quit): tests that count coroutine exits would otherwise fail on a count, not the cause.
pl_session_quit() {
	if ! PL_ERR=$(python3 - "$SPORT" "$SDIR/stats.json" "$D9_SLOW" <<'PYEOF' 2>&1
import http.client, json, sys, time
port, out, slow = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=20 * slow)
wait = 20 * slow  # connections still closing on a loaded machine
deadline = time.monotonic() + wait
while True:
    c.request("GET", "/stats")
    r = c.getresponse()
    body = r.read()
    s = json.loads(body)
    if s.get("connections_open") == 1 or time.monotonic() > deadline:
        break
    time.sleep(0.05)
with open(out, "w") as fh:
    fh.write(body.decode())
c.request("GET", "/quit")
r = c.getresponse()
b = r.read().decode()
if s.get("connections_open") != 1:
    sys.exit("%s connections open (want only this one) after %d s" % (s.get("connections_open"), wait))
if b != "bye\n":
    sys.exit("quit reply %r" % b)
PYEOF
	); then
		pl_wait_exit 20
		PL_ERR="control session: $(echo "$PL_ERR" | tail -n 1)"
		return 1
	fi
	pl_wait_exit 20
}

# pl_quit: /quit on a new connection, then waits for the exit (SRC).
pl_quit() {
	curl -sS --max-time 10 -o /dev/null "http://127.0.0.1:$SPORT/quit" 2>/dev/null
	pl_wait_exit 20
}

# pl_check PREFIX CODE [ARGS...]: runs trace_check.py on $SDIR/trace with the Python CODE (120 s
# at most; a checker that dies or hangs is one FAIL PREFIX line).
pl_check() {
	local prefix=$1 code=$2 rc
	shift 2
	timeout -s KILL 120 python3 "$PL_CHECK" "$prefix" "$SDIR/trace" "$code" "$@"
	rc=$?
	[ "$rc" -eq 0 ] || pl_fail "$prefix" "trace_check.py exited with status $rc"
}

# pl_trace_files DIR: the segment files of a trace directory, one per line.
pl_trace_files() { ls "$1" 2>/dev/null | grep -E '\.(bin|bin\.gz|active)$'; }

# pl_san_setup NAME: SAN=the sanitizer build of d9-analyze, with ASan/UBSan reporting set up;
# fails NAME (and returns 1) when it is not built.
pl_san_setup() {
	SAN=$PL_ROOT/build/san/d9-analyze
	if [ ! -x "$SAN" ]; then
		pl_fail "$1" "$SAN is not built (make build/san/d9-analyze)"
		return 1
	fi
	d9_san_env
}

# pl_corpus_unpack: gunzipped copies of the fuzz corpus's .gz files into $T/corpus, so tests can
# run both tests/fuzz/corpus/* and $T/corpus/*.
pl_corpus_unpack() {
	mkdir -p "$T/corpus"
	local f
	for f in "$PL_ROOT"/tests/fuzz/corpus/*; do
		case "$f" in *.gz) gunzip -c "$f" >"$T/corpus/$(basename "$f" .gz)" 2>/dev/null ;; esac
	done
}
