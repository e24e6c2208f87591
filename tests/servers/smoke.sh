#!/usr/bin/env bash
# smoke.sh: checks one built test server by hand-style requests: smoke.sh PATH/TO/BINARY.
# The kind is taken from the binary's name (epoll-http*: the epoll server, anything else: the
# State Threads server). Builds nothing; starts servers on free loopback ports only, each with a
# 60 s safety limit; prints "PASS name" / "FAIL name: why" and exits non-zero on any failure.
# Timing checks use generous bounds: they catch "did not burn/block at all", not slowness.
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

# start_server ARGS...: sets spid and port; returns 1 if no port file within 5 s
start_server() {
	rm -f "$tmp/port"
	"$bin" -p 0 -P "$tmp/port" -t 60 -q "$@" 2>"$tmp/stderr" &
	spid=$!
	for _ in $(seq 50); do
		[ -s "$tmp/port" ] && { port=$(cat "$tmp/port"); return 0; }
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	fail "start $*" "no port file within 5 s ($(head -c 200 "$tmp/stderr"))"
	kill -TERM "$spid" 2>/dev/null
	spid=""
	return 1
}

# stop_server NAME: /quit, then expects exit status 0 within 5 s
stop_server() {
	local body rc
	body=$(curl -sS --max-time 5 "http://127.0.0.1:$port/quit" 2>&1)
	for _ in $(seq 50); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$spid" 2>/dev/null; then
		fail "$1" "still running 5 s after /quit (reply: $body)"
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

	get /stats
	if echo "$body" | grep -q '"fanout_children":8,"fanout_signals":1}' &&
	   echo "$body" | grep -q '"switch_cb":false,"switch_in_calls":0'
	then pass stats-fanout; else fail stats-fanout "body '$body'"; fi

	# a blocking handler stalls every coroutine; a parked one stalls none
	curl -sS --max-time 10 -o /dev/null "http://127.0.0.1:$port/block?ms=400" & bg=$!
	sleep 0.1; get /fast; wait "$bg"
	if ge "$secs" 0.1; then pass block-stalls-all; else fail block-stalls-all "/fast took ${secs}s"; fi
	curl -sS --max-time 10 -o /dev/null "http://127.0.0.1:$port/sleep?ms=1000" & bg=$!
	sleep 0.1; get /fast; wait "$bg"
	if ! ge "$secs" 0.5; then pass sleep-stalls-none; else fail sleep-stalls-none "/fast took ${secs}s"; fi
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
		# a worker stuck in /block cannot accept, so the next requests must reach the other one
		curl -sS --max-time 10 -D "$tmp/hb" -o /dev/null "http://127.0.0.1:$port/block?ms=500" & bg=$!
		sleep 0.15
		pids=""
		for _ in 1 2 3; do get /fast; pids="$pids $(header X-Pid)"; done
		wait "$bg"
		bpid=$(tr -d '\r' <"$tmp/hb" | sed -n 's/^X-Pid: //Ip')
		n=$(echo "$bpid $pids" | tr ' ' '\n' | grep -c . )
		d=$(echo "$bpid $pids" | tr ' ' '\n' | grep . | sort -u | wc -l)
		kids=$(ps -o pid= --ppid "$spid" | tr -d ' ' | sort | tr '\n' ' ')
		if [ "$n" = 4 ] && [ "$d" = 2 ] && ! echo "$pids" | grep -qw "$bpid" &&
		   [ "$(echo "$bpid $pids" | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ')" = "$kids" ]
		then pass workers-two-pids
		else fail workers-two-pids "block by '$bpid', fast by '$pids', workers '$kids'"; fi
		stop_server quit-workers
	fi
fi

# ---- epoll only: -T 2 ------------------------------------------------------------------------------
if [ "$kind" = epoll ] && start_server -T 2; then
	names=$(cat /proc/"$spid"/task/*/comm | sort | tr '\n' ' ')
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
