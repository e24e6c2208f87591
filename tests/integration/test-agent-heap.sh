#!/usr/bin/env bash
# test-agent-heap.sh: the agent keeps out of the program's heap. Its allocations on the program's
# threads would sit among the program's own blocks in the C library's heap; nginx, whose worker
# serves from the main heap, spent about 200 instructions more in malloc and free per request
# because of the agent's definitions table (agent/COST.md section 29). build/tests/heap-who.so,
# preloaded before the agent, counts the malloc, calloc and realloc calls made from
# libd9agent.so's code on threads not named d9-* after the constructors:
#   - heap-generic: epoll-http (generic mode: its loop's waits, blocking calls, the definitions
#     of its worker, names and call sites) over 20 requests on their own connections, a /block
#     (a BlockingCall with its stack) and 100 on one keep-alive connection: none.
# The State Threads and libco adapters still keep their coroutine records and tables in the C
# library's heap (agent/DESIGN.md, "Memory bounds"); they are not checked here.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup agent-heap

WHO=$PL_ROOT/build/tests/heap-who.so
if [ ! -e "$WHO" ]; then
	pl_fail heap-generic "$WHO is not built (make all)"
	exit 0
fi

p=heap-generic
if pl_start "$T/$p" "$EPOLL_HTTP" LD_PRELOAD="$WHO $PL_LIB" HEAP_WHO_OUT="$T/$p/who" --; then
	ok=1
	pl_gets 20 /fast ok || { pl_fail "$p" "$PL_ERR"; ok=0; }
	pl_gets 1 "/block?ms=5" "block ms=5" || { pl_fail "$p" "$PL_ERR"; ok=0; }
	urls=()
	for i in $(seq 100); do urls+=("http://127.0.0.1:$SPORT/fast"); done
	curl -sS --max-time 30 "${urls[@]}" >/dev/null 2>"$T/$p/curl.err" || { pl_fail "$p" "keep-alive: $(head -c 200 "$T/$p/curl.err")"; ok=0; }
	pl_quit
	if [ "$ok" = 1 ]; then
		if [ "$SRC" != 0 ]; then
			pl_fail "$p" "exit status $SRC"
		elif [ ! -s "$T/$p/who" ]; then
			pl_fail "$p" "heap-who wrote no count (was it preloaded? stderr: $(head -c 200 "$SDIR/stderr"))"
		elif [ ! -d "$SDIR/trace" ] || [ -z "$(ls "$SDIR/trace")" ]; then
			pl_fail "$p" "no trace: the agent did not record"
		else
			read -r n callers <"$T/$p/who"
			if [ "$n" = no-agent ]; then
				pl_fail "$p" "heap-who did not find libd9agent.so among the loaded objects: nothing was counted"
			elif [ "$n" = 0 ]; then
				pl_pass "$p" "no allocation from the agent's code on the program's threads"
			else
				pl_fail "$p" "$n allocations from the agent's code on the program's threads, at offsets $callers of libd9agent.so (addr2line -f -i -e build/libd9agent.so)"
			fi
		fi
	fi
else
	pl_fail "$p" "$PL_ERR"
fi
