#!/usr/bin/env bash
# test-preload-direct.sh: the wrappers that enter the kernel themselves while the host has no
# thread of its own (preload/libc-direct.c, agent/DESIGN.md "Direct system calls"), with
# build/tests/direct (tests/servers/direct.c):
#   - direct-same-results: 77 results of read, write, readv, writev, pread, pwrite, recv,
#     recvfrom, recvmsg, send, sendto, sendmsg, open, openat, close, accept, accept4, connect,
#     epoll_wait, epoll_pwait, poll and select, in success and error cases and interrupted by a
#     signal with and without SA_RESTART, give the same results,
#     errno and data without the agent, with it (direct), and with it in a program that started
#     a thread first (through the C library);
#   - direct-same-syscalls: under strace, the main thread makes the same sequence of socket and
#     wait system calls with the agent as without it (pselect6 for select, recvfrom for recv,
#     ...: a seccomp filter written for glibc allows them). SKIP without strace, or where it
#     cannot trace;
#   - direct-cancel-read, direct-cancel-thrd: a thread the program started (pthread_create, or
#     thrd_create, which glibc does not route through pthread_create) and that sits in read or
#     epoll_wait is ended by pthread_cancel. A wrapper still entering the kernel itself after the
#     thread was started would leave it there (checked: 20 s, then "not cancelled");
#   - direct-next-interposer: with another interposer of read preloaded after the agent
#     (build/tests/libcount-read.so), every one of 2,000 reads still reaches it;
#   - direct-no-cancel-path: under callgrind, the main thread of a single-threaded program with
#     the agent's threads running calls glibc's __pthread_enable_asynccancel almost never for
#     2,000 reads and writes (at most 100: the agent's own calls), and at least 4,000 times once the
#     program has started a thread of its own. SKIP without valgrind (make deps installs it).
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-direct

DIRECT=$PL_ROOT/build/tests/direct
COUNT_SO=$PL_ROOT/build/tests/libcount-read.so
for b in "$DIRECT" "$COUNT_SO"; do
	if [ ! -e "$b" ]; then
		pl_fail preload-direct "$b is not built (make all)"
		exit 0
	fi
done

# ---- the same results -----------------------------------------------------------------------
timeout -s KILL 60 "$DIRECT" sem >"$T/sem.none" 2>"$T/sem.none.err"
rc0=$?
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/a/trace.bin" timeout -s KILL 60 "$DIRECT" sem \
	>"$T/sem.agent" 2>"$T/sem.agent.err"
rc1=$?
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/b/trace.bin" timeout -s KILL 60 "$DIRECT" sem thread \
	>"$T/sem.thread" 2>"$T/sem.thread.err"
rc2=$?
lines=$(wc -l <"$T/sem.none")
if [ "$rc0$rc1$rc2" != 000 ]; then
	pl_fail direct-same-results "exit codes $rc0 (no agent), $rc1 (agent), $rc2 (agent, thread): $(head -c 300 "$T/sem.agent.err")"
elif [ "$lines" -lt 70 ]; then
	pl_fail direct-same-results "only $lines results without the agent"
elif ! diff "$T/sem.none" "$T/sem.agent" >"$T/diff1"; then
	pl_fail direct-same-results "the agent changed results: $(head -c 400 "$T/diff1")"
elif ! diff "$T/sem.none" "$T/sem.thread" >"$T/diff2"; then
	pl_fail direct-same-results "the agent changed results in a program with a thread: $(head -c 400 "$T/diff2")"
elif [ -z "$(pl_trace_files "$T/a")" ]; then
	pl_fail direct-same-results "the agent recorded nothing: it was not running"
else
	pl_pass direct-same-results "$lines results the same without the agent, with it, and with a thread of the program's own"
fi

# ---- timeouts past int64 microseconds ----------------------------------------------------------
# ppoll, pselect, select and epoll_pwait2 with the largest timeouts their types hold, on a ready
# pipe (each returns at once): every Park says INT64_MAX microseconds, saturated (the
# multiplication overflowed before: undefined, and a wrong timeout in the trace).
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/h/trace.bin" D9_COMPRESS=0 timeout -s KILL 60 \
	"$DIRECT" huge >"$T/huge.out" 2>&1
got=$("$PL_ANALYZE" dump "$T/h" 2>/dev/null | python3 -c '
import json, sys
parks = [e for e in map(json.loads, sys.stdin) if e.get("type") == "Park"]
print(" ".join(str(e["timeout_us"]) for e in parks))')
want="9223372036854775807 9223372036854775807 9223372036854775807 9223372036854775807"
if [ "$(tr '\n' ' ' <"$T/huge.out")" != "ppoll 1 pselect 1 select 1 epoll_pwait2 1 " ]; then
	pl_fail direct-huge-timeouts "the calls did not return 1: $(head -c 300 "$T/huge.out")"
elif [ "$got" != "$want" ]; then
	pl_fail direct-huge-timeouts "Park timeouts: '$got', expected four of 9223372036854775807"
else
	pl_pass direct-huge-timeouts "4 Parks of INT64_MAX us"
fi

# ---- the same system calls ------------------------------------------------------------------
SYSCALLS=select,pselect6,poll,ppoll,epoll_wait,epoll_pwait,epoll_pwait2,recvfrom,sendto,recvmsg,sendmsg,accept,accept4,connect,readv,writev
names() { sed -n 's/^\([a-z0-9_]*\)(.*/\1/p' "$1"; }
if ! command -v strace >/dev/null; then
	pl_skip direct-same-syscalls "strace is not installed (make deps)"
elif ! timeout -s KILL 60 strace -o "$T/strace.none" -e trace="$SYSCALLS" "$DIRECT" sem >/dev/null 2>&1 ||
	[ "$(names "$T/strace.none" | wc -l)" -lt 20 ]; then
	pl_skip direct-same-syscalls "strace cannot trace here: $(head -c 200 "$T/strace.none" 2>/dev/null)"
else
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/s/trace.bin" timeout -s KILL 60 \
		strace -o "$T/strace.agent" -e trace="$SYSCALLS" "$DIRECT" sem >/dev/null 2>&1
	names "$T/strace.none" >"$T/names.none"
	names "$T/strace.agent" >"$T/names.agent"
	if diff "$T/names.none" "$T/names.agent" >"$T/names.diff"; then
		pl_pass direct-same-syscalls "$(wc -l <"$T/names.none") socket and wait system calls, the same with the agent"
	else
		pl_fail direct-same-syscalls "other system calls with the agent: $(head -c 300 "$T/names.diff")"
	fi
fi

# ---- cancellation ---------------------------------------------------------------------------
for how in read thrd; do
	out=$(env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/c/trace.bin" timeout -s KILL 60 "$DIRECT" cancel "$how" 2>&1)
	if [ "$out" = cancelled ]; then
		pl_pass "direct-cancel-$how" "a thread waiting in $([ $how = read ] && echo read || echo epoll_wait) ended by pthread_cancel"
	else
		pl_fail "direct-cancel-$how" "$(echo "$out" | head -c 300)"
	fi
done

# ---- an interposer after the agent ----------------------------------------------------------
out=$(env LD_PRELOAD="$PL_LIB:$COUNT_SO" D9_TRACE_PATH="$T/d/trace.bin" timeout -s KILL 60 "$DIRECT" count 2000 2>&1)
n=$(echo "$out" | sed -n 's/^count-read: read \([0-9]*\) .*/\1/p')
if [ -z "$n" ]; then
	pl_fail direct-next-interposer "no count from the second interposer: $(echo "$out" | head -c 300)"
elif [ "$n" -lt 2000 ]; then
	pl_fail direct-next-interposer "$n of 2000 reads reached the interposer after the agent"
else
	pl_pass direct-next-interposer "$n reads reached the interposer after the agent (2000 made)"
fi

# ---- glibc's cancellation path, counted -----------------------------------------------------
if ! command -v valgrind >/dev/null; then
	pl_skip direct-no-cancel-path "valgrind is not installed (make deps)"
	exit 0
fi
calls() { # FILE: calls to __pthread_enable_asynccancel in a callgrind output
	python3 - "$1" <<'PYEOF'
import sys
n, cfn = 0, ""
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("cfn="):
        cfn = line[4:]
    elif line.startswith("calls=") and "__pthread_enable_asynccancel" in cfn:
        n += int(line[6:].split()[0])
print(n)
PYEOF
}
for how in single thread; do
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/cg-$how/trace.bin" timeout -s KILL 300 \
		valgrind --tool=callgrind --separate-threads=yes --dump-instr=no --compress-strings=no \
		--callgrind-out-file="$T/cg-$how.out" --log-file="$T/cg-$how.log" \
		"$DIRECT" count 2000 $([ $how = thread ] && echo thread) >"$T/cg-$how.stdout" 2>&1
done
if [ ! -s "$T/cg-single.out-01" ] || [ ! -s "$T/cg-thread.out-01" ]; then
	pl_fail direct-no-cancel-path "no callgrind output: $(tail -c 300 "$T/cg-single.log")"
	exit 0
fi
if [ ! -e "$T/cg-single.out-02" ]; then
	pl_fail direct-no-cancel-path "the agent started no thread under callgrind: nothing to show"
	exit 0
fi
single=$(calls "$T/cg-single.out-01")
threaded=$(calls "$T/cg-thread.out-01")
if [ "$single" -gt 100 ] || [ "$threaded" -lt 4000 ]; then
	pl_fail direct-no-cancel-path "$single calls of __pthread_enable_asynccancel on the main thread of a single-threaded program (at most 100), $threaded with a thread of its own (at least 4000)"
else
	pl_pass direct-no-cancel-path "__pthread_enable_asynccancel on the main thread for 4000 calls: $single single-threaded, $threaded with a thread of the program's own"
fi
