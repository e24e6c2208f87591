#!/usr/bin/env bash
# test-agent-heap.sh: the agent keeps out of the program's heap. Its allocations on the program's
# threads would sit among the program's own blocks in the C library's heap; nginx, whose worker
# serves from the main heap, spent about 200 instructions more in malloc and free per request
# because of the agent's definitions table (agent/COST.md section 29). build/tests/heap-who.so,
# preloaded before the agent, counts the malloc, calloc and realloc calls made from
# libd9agent.so's code on threads not named d9-* after the constructors, in two servers, each over
# 20 requests on their own connections, a /block (a BlockingCall with its stack) and 100 on one
# keep-alive connection (uv-http closes every connection, and does a /work instead):
#   - heap-generic: epoll-http (generic mode: its loop's waits, blocking calls, the definitions
#     of its worker, names and call sites): none.
#   - heap-st: st-http (the State Threads adapter: a coroutine record per connection, the
#     descriptor and pointer tables, the live coroutine table; agent/mem.c): none. 31 before
#     mem.c.
#   - heap-libuv: uv-http (Debian's libuv1; the libuv adapter: its loop's state and callback
#     table, a record per uv_queue_work, on the loop's thread and the pool's): none.
# The libco adapter uses the same memory (mem.c); its server is a third-party build that this
# test does not make.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup agent-heap

WHO=$PL_ROOT/build/tests/heap-who.so
if [ ! -e "$WHO" ]; then
	pl_fail heap-generic "$WHO is not built (make all)"
	exit 0
fi

# heap_case NAME SERVER PATH REPLY: the server under heap-who over 20 /fast on their own
# connections, PATH (whose reply starts with REPLY) and 100 /fast on one curl: no allocation.
heap_case() {
	local p=$1 server=$2 path=$3 reply=$4 ok n callers
	if ! pl_start "$T/$p" "$server" LD_PRELOAD="$WHO $PL_LIB" HEAP_WHO_OUT="$T/$p/who" --; then
		pl_fail "$p" "$PL_ERR"
		return
	fi
	ok=1
	pl_gets 20 /fast ok || { pl_fail "$p" "$PL_ERR"; ok=0; }
	pl_get "$path"
	case "$BODY" in "$reply"*) ;; *) pl_fail "$p" "$path: $CODE '$BODY'"; ok=0 ;; esac
	local urls=()
	for i in $(seq 100); do urls+=("http://127.0.0.1:$SPORT/fast"); done
	curl -sS --max-time 30 "${urls[@]}" >/dev/null 2>"$T/$p/curl.err" || { pl_fail "$p" "keep-alive: $(head -c 200 "$T/$p/curl.err")"; ok=0; }
	pl_quit
	[ "$ok" = 1 ] || return
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
}

heap_case heap-generic "$EPOLL_HTTP" "/block?ms=5" "block ms=5"
heap_case heap-st "$ST_HTTP" "/block?ms=5" "block ms=5"
heap_case heap-libuv "$PL_ROOT/build/tests/uv-http" "/work?ms=5" "work ms=5"
