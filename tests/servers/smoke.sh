#!/usr/bin/env bash
# smoke.sh: checks one built test server by hand-style requests: smoke.sh PATH/TO/BINARY.
# The kind is taken from the binary's name (epoll-http*: the epoll server, anything else: the
# State Threads server). Builds nothing; starts servers on free loopback ports only, each with a
# 60 s safety limit; prints "PASS name" / "FAIL name: why" and exits non-zero on any failure.
# Timing checks are lower bounds only: they catch "did not burn/block at all", not slowness.
# What must happen concurrently (blocking stalls all, parking stalls none, the second worker
# serves while the first blocks) is checked from the server's state (/proc/PID/syscall,
# /stats), never by sleeping and hoping the other request has got there.
set -u
bin="${1:?usage: smoke.sh PATH/TO/SERVER}"
[ -x "$bin" ] || { echo "FAIL smoke: $bin is not an executable"; exit 1; }
command -v curl >/dev/null || { echo "FAIL smoke: curl not found"; exit 1; }
kind=st
case "$(basename "$bin")" in epoll-http*) kind=epoll ;; esac

tmp=$(mktemp -d)
spid=""
failed=0
cleanup() {
	[ -n "$spid" ] && kill -0 "$spid" 2>/dev/null && kill -TERM "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }

# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds; 1 on timeout. The
# only way this script waits: a loaded machine makes any fixed sleep too short.
wait_for() {
	local deadline=$(( $(date +%s%N) + $1 * 1000000000 ))
	shift
	while ! "$@"; do
		[ "$(date +%s%N)" -gt "$deadline" ] && return 1
		sleep 0.05
	done
}

# start_server ARGS...: sets spid and port; returns 1 if no port file within 30 s
start_server() {
	rm -f "$tmp/port"
	"$bin" -p 0 -P "$tmp/port" -t 60 -q "$@" 2>"$tmp/stderr" &
	spid=$!
	if wait_for 30 eval '[ -s "$tmp/port" ] || ! kill -0 "$spid" 2>/dev/null' && [ -s "$tmp/port" ]; then
		port=$(cat "$tmp/port")
		return 0
	fi
	fail "start $*" "no port file within 30 s ($(head -c 200 "$tmp/stderr"))"
	kill -TERM "$spid" 2>/dev/null
	spid=""
	return 1
}

# stop_server NAME: /quit, then expects exit status 0 within 20 s
stop_server() {
	local body rc
	body=$(curl -sS --max-time 20 "http://127.0.0.1:$port/quit" 2>&1)
	if ! wait_for 20 eval '! kill -0 "$spid" 2>/dev/null'; then
		fail "$1" "still running 20 s after /quit (reply: $body)"
		kill -TERM "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	else
		wait "$spid"; rc=$?
		if [ "$body" = "bye" ] && [ "$rc" -eq 0 ]; then pass "$1"
		else fail "$1" "reply '$body', exit status $rc"; fi
	fi
	spid=""
}

# get PATH: body in $body, headers in $tmp/h, seconds in $secs, status code in $code
get() {
	local out
	out=$(curl -sS --max-time 20 -D "$tmp/h" -o "$tmp/b" -w '%{http_code} %{time_total}' \
		"http://127.0.0.1:$port$1" 2>&1)
	code=${out%% *}; secs=${out##* }
	body=$(cat "$tmp/b" 2>/dev/null)
}
header() { tr -d '\r' <"$tmp/h" | sed -n "s/^$1: //Ip" | head -n1; }
# ge A B: A >= B for decimals
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# in_usleep PID...: prints the first PID whose main thread is inside the blocking sleep of
# /block (usleep: nanosleep or clock_nanosleep, per /proc/PID/syscall); 1 if none is. An idle
# server waits in epoll_wait or poll, and /sleep parks in them too, so this sees only /block.
case "$(uname -m)" in
aarch64) sleep_nrs=" 101 115 " ;;
*) sleep_nrs=" 35 230 " ;;
esac
in_usleep() {
	local p nr
	for p in "$@"; do
		read -r nr _ <"/proc/$p/syscall" 2>/dev/null || continue
		[[ "$sleep_nrs" == *" $nr "* ]] && { echo "$p"; return 0; }
	done
	return 1
}
# count ENDPOINT: the server's request count for ENDPOINT (from /stats on its own connection)
count() {
	curl -sS --max-time 20 "http://127.0.0.1:$port/stats" 2>/dev/null |
		sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}

# ---- common endpoints --------------------------------------------------------------------------
start_server || exit 1
get /fast
if [ "$code" = 200 ] && [ "$body" = ok ] && [ "$(header X-Pid)" = "$spid" ]; then pass fast
else fail fast "code $code body '$body' X-Pid '$(header X-Pid)' want $spid"; fi

n=$(curl -sS --max-time 10 -o /dev/null -o /dev/null -w '%{num_connects}\n' \
	"http://127.0.0.1:$port/fast" "http://127.0.0.1:$port/fast" | tr '\n' ' ')
if [ "$n" = "1 0 " ]; then pass keep-alive; else fail keep-alive "connects per request: $n"; fi

get /nope
if [ "$code" = 404 ]; then pass not-found; else fail not-found "code $code"; fi

get "/burn?ms=20"
cpu=$(echo "$body" | sed -n 's/.*cpu_ns=\([0-9]*\).*/\1/p')
if [ "$code" = 200 ] && [ -n "$cpu" ] && [ "$cpu" -ge 20000000 ] && ge "$secs" 0.019 && ! ge "$secs" 5
then pass burn; else fail burn "code $code body '$body' in ${secs}s"; fi

get "/block?ms=50"
if [ "$code" = 200 ] && ge "$secs" 0.049; then pass block; else fail block "code $code in ${secs}s"; fi

get /stats
if [ "$code" = 200 ] && echo "$body" | grep -q '"burn":1' && echo "$body" | grep -q '"block":1'
then pass stats; else fail stats "code $code body '$body'"; fi

# ---- State Threads only ------------------------------------------------------------------------
if [ "$kind" = st ]; then
	get "/sleep?ms=50"
	if [ "$code" = 200 ] && ge "$secs" 0.049; then pass sleep; else fail sleep "code $code in ${secs}s"; fi

	get /file
	if [ "$body" = "file bytes=4194304 reads=64" ]; then pass file; else fail file "body '$body'"; fi

	get "/fanout?k=8"
	if [ "$body" = "fanout k=8 done=8" ]; then pass fanout; else fail fanout "body '$body'"; fi

	get /join
	if [ "$body" = "join ok" ]; then pass join; else fail join "body '$body'"; fi

	# the handler's own clock: write + fsync inside its wall time, the client's time around both
	get "/fwrite?kb=256"
	w=$(header X-Wall-Ns) bl=$(header X-Blocked-Ns)
	if [ "$body" = "fwrite kb=256" ] && [ -n "$w" ] && [ -n "$bl" ] && [ "$bl" -gt 0 ] &&
	   [ "$bl" -le "$w" ] && ge "$secs" "$(awk -v w="$w" 'BEGIN { print w / 1e9 }')"
	then pass fwrite; else fail fwrite "body '$body' X-Wall-Ns '$w' X-Blocked-Ns '$bl' in ${secs}s"; fi

	get /stats
	if echo "$body" | grep -q '"fanout_children":8,"fanout_signals":1}' &&
	   echo "$body" | grep -q '"switch_cb":false,"switch_in_calls":0'
	then pass stats-fanout; else fail stats-fanout "body '$body'"; fi

	# A blocking handler stalls every coroutine: a /fast sent while the server is seen inside
	# /block's usleep is answered only once the server has left it.
	curl -sS --max-time 30 -o /dev/null "http://127.0.0.1:$port/block?ms=1000" & bg=$!
	if ! wait_for 20 in_usleep "$spid" >/dev/null; then
		fail block-stalls-all "the server was never seen in /block's usleep"
	else
		get /fast
		if [ "$body" = ok ] && ! in_usleep "$spid" >/dev/null; then pass block-stalls-all
		else fail block-stalls-all "/fast answered '$body' while the server still sleeps in /block"; fi
	fi
	wait "$bg"
	# A parked one stalls none: a /fast sent once the server has started /sleep?ms=30000 is
	# answered while that request is still waiting for its reply (then it is dropped).
	n0=$(count sleep)
	curl -sS --max-time 60 -o /dev/null "http://127.0.0.1:$port/sleep?ms=30000" & bg=$!
	if ! wait_for 20 eval '[ "$(count sleep)" = $((n0 + 1)) ]'; then
		fail sleep-stalls-none "the server did not start /sleep (count $(count sleep), was $n0)"
	else
		get /fast
		if [ "$body" = ok ] && kill -0 "$bg" 2>/dev/null; then pass sleep-stalls-none
		else fail sleep-stalls-none "/fast answered '$body' only after the 30 s /sleep ended"; fi
	fi
	kill "$bg" 2>/dev/null
	wait "$bg" 2>/dev/null
fi
stop_server quit

# ---- State Threads variants: -c, -e poll, -w 2 ----------------------------------------------------
if [ "$kind" = st ]; then
	if start_server -c -e poll; then
		get "/fanout?k=4"; get /stats
		in=$(echo "$body" | sed -n 's/.*"switch_in_calls":\([0-9]*\).*/\1/p')
		out=$(echo "$body" | sed -n 's/.*"switch_out_calls":\([0-9]*\).*/\1/p')
		if echo "$body" | grep -q '"eventsys":"poll"' && [ "${in:-0}" -gt 0 ] && [ "${out:-0}" -gt 0 ]
		then pass switch-cb-poll; else fail switch-cb-poll "body '$body'"; fi
		stop_server quit-poll
	fi
	if start_server -w 2; then
		# A worker stuck in /block cannot accept, so requests sent while it is seen in the
		# blocking usleep must reach the other one. The attempt counts only if the worker is
		# still asleep after them; else it is repeated with a longer block (a loaded machine).
		kids=$(ps -o pid= --ppid "$spid" | tr -d ' ' | sort | tr '\n' ' ')
		verdict="" why=""
		for ms in 2000 8000 30000; do
			curl -sS --max-time 60 -D "$tmp/hb" -o /dev/null "http://127.0.0.1:$port/block?ms=$ms" & bg=$!
			# shellcheck disable=SC2086 # $kids: one word per pid
			if ! blocked=$(wait_for 20 in_usleep $kids); then
				why="no worker of [$kids] was seen in /block's usleep"
				kill "$bg" 2>/dev/null; wait "$bg" 2>/dev/null
				break
			fi
			pids=""
			for _ in 1 2 3; do get /fast; pids="$pids $(header X-Pid)"; done
			in_usleep "$blocked" >/dev/null && verdict=valid
			wait "$bg"
			bpid=$(tr -d '\r' <"$tmp/hb" | sed -n 's/^X-Pid: //Ip')
			[ -n "$verdict" ] && break
			why="worker $blocked left its ${ms} ms usleep before the 3 requests were answered"
		done
		seen=$(echo "$bpid $pids" | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ')
		if [ -z "$verdict" ]; then fail workers-two-pids "$why"
		elif [ "$bpid" = "$blocked" ] && ! echo "$pids" | grep -qw "$bpid" &&
		   [ "$(echo $pids | wc -w)" = 3 ] && [ "$seen" = "$kids" ]
		then pass workers-two-pids
		else fail workers-two-pids "block by '$bpid' (seen asleep: $blocked), fast by '$pids', workers '$kids'"; fi
		stop_server quit-workers
	fi
fi

# ---- epoll only: -T 2 ------------------------------------------------------------------------------
if [ "$kind" = epoll ] && start_server -T 2; then
	# each thread names itself once it runs, after it appeared with its creator's name (under
	# the agent, its threads too): until the names are all different, 5 s at most
	names_distinct() {
		names=$(cat /proc/"$spid"/task/*/comm | sort | tr '\n' ' ')
		[ -z "$(echo "$names" | tr ' ' '\n' | grep . | uniq -d)" ]
	}
	wait_for 5 names_distinct || true # the names as they are then, checked below
	if [ "$names" = "epoll-http worker-0 worker-1 " ]; then pass thread-names
	else fail thread-names "got '$names'"; fi
	ok=1
	for _ in 1 2 3 4; do
		get /fast; tid=$(header X-Tid)
		case "$(cat /proc/"$spid"/task/"${tid:-none}"/comm 2>/dev/null)" in
		worker-*) ;;
		*) ok=0 ;;
		esac
	done
	if [ "$ok" = 1 ]; then pass threads-serve; else fail threads-serve "a reply did not come from a worker thread"; fi
	stop_server quit-threads
fi

exit "$failed"
