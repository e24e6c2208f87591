#!/usr/bin/env bash
# test-preload-blockstack.sh: BlockingCall stacks are unwound by the agent's writer from a copy of
# the caller's registers and stack, never in the host's thread (agent/DESIGN.md, "Blocking-call
# stacks"). Both servers are built without frame pointers (-O2 -fomit-frame-pointer), so only a
# DWARF unwind finds the callers: a frame-pointer walk skips or garbles them.
#   - blockstack-st-fds, blockstack-thread-fds: /block?ms=30 (a libc usleep past the 1 ms
#     threshold) leaves no new descriptor in the host but connections and the trace's own files.
#     The descriptors are read from outside (/proc/PID/fd) before the call and again once the
#     trace holds its BlockingCall with a Stack, until two readings agree (the writer's own
#     short-lived reads of /proc/self/maps and module files come and go). libunwind, which took
#     these stacks before, opened a pipe at its first use and kept it.
#   - blockstack-st: st-http-nofp, the State Threads server: the usleep BlockingCall's stack is
#     handle_block (innermost, the agent's frames cut off), then serve_conn, the coroutine's start
#     function, then exactly one frame in libst (_st_thread_main, where rt-st.c says a coroutine's
#     stack ends): nothing of the stale frames beyond the coroutine's entry.
#   - blockstack-thread: epoll-http built here without frame pointers, 2 worker threads (-T 2):
#     the stack is handle_block (innermost), ..., serve_loop (the thread's start function), then
#     only libc frames (start_thread, clone3), at most 3: the unwind ended at the thread's start.
#   - blockstack-burst: blockstack-burst.c, 24 worker threads that each make a 3 ms usleep at the
#     same instant, 5 times: often more slow calls at once than the agent's 32 slots hold while
#     the writer is slow (the first burst also waits for its first unwind: libdw loads). The
#     program exits 0; every usleep is a BlockingCall (120); each one with a stack has
#     burst_sleep innermost and sleeper below it; if some have none, stderr says so exactly once
#     (those calls are the count of the loss). Passes either way, saying how many had no stack.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-blockstack

# fds: the host's descriptors, one "number target" a line
fds() {
	local f
	for f in /proc/"$SPID"/fd/*; do
		printf '%s %s\n' "${f##*/}" "$(readlink "$f")"
	done 2>/dev/null | sort
}

# has_stack: the trace holds a usleep BlockingCall with a Stack (the writer patched its id in)
has_stack() {
	"$PL_ANALYZE" dump "$SDIR/trace" 2>/dev/null |
		grep '"type":"BlockingCall"' | grep -qv '"stack":0[,}]'
}

# fds_agree FILE: a new reading into FILE equals the one before it (FILE.prev, then replaced)
fds_agree() {
	fds >"$1"
	cmp -s "$1" "$1.prev" && return 0
	cp "$1" "$1.prev"
	return 1
}

# stable_fds FILE: two readings in a row agree (10 s at most); the last one is in FILE
stable_fds() {
	fds >"$1.prev"
	d9_wait_for 10 fds_agree "$1"
}

# block_fds NAME: before/after /block?ms=30 on the running server (SPID, SDIR)
block_fds() {
	local name=$1 extra
	stable_fds "$SDIR/fds0"
	pl_get "/block?ms=30"
	if [ "$CODE" != 200 ]; then
		pl_fail "$name" "/block?ms=30: status $CODE $(head -c 200 "$SDIR/curl.err")"
		return
	fi
	if ! d9_wait_for 30 has_stack; then
		pl_fail "$name" "no BlockingCall with a stack in the trace within $((30 * D9_SLOW)) s"
		return
	fi
	if ! stable_fds "$SDIR/fds1"; then
		pl_fail "$name" "the host's descriptors did not settle within $((10 * D9_SLOW)) s"
		return
	fi
	# new since the first reading: connections and the trace's files, never a pipe or anything
	# else (a worker's /proc/thread-self/schedstat, which the first 16 workers keep open: README)
	extra=$(comm -13 "$SDIR/fds0" "$SDIR/fds1" | grep -v -e ' socket:' -e " $SDIR/trace/" \
		-e ' /proc/[0-9]*/task/[0-9]*/schedstat$')
	if [ -n "$extra" ]; then
		pl_fail "$name" "new descriptors in the host: $(tr '\n' ' ' <<<"$extra")"
	else
		pl_pass "$name" "$(wc -l <"$SDIR/fds1") descriptors after the call, none new but sockets and the trace's"
	fi
}

# The check's start (python, trace_check.py): the stack of the one usleep BlockingCall, with names.
read -r -d '' USLEEP_STACK <<'PYEOF'
def usleep_stack(proc, syms):
    us = [e for e in proc.events(('BlockingCall',)) if e['_seg'].string(e['call']) == 'usleep']
    if len(us) != 1:
        fail('%d usleep BlockingCalls, want 1' % len(us))
    e = us[0]
    frames = e['_seg'].stacks.get(e['stack']) if e['stack'] else None
    if not frames:
        fail('the usleep BlockingCall has stack %d, no Stack definition with frames' % e['stack'])
    return frames, describe_frames(frames, syms, args[1])
PYEOF

# ---- State Threads: the stack ends at the coroutine's entry ---------------------------------------
p=blockstack-st
if pl_start "$T/st" "$ST_HTTP_NOFP" --; then
	block_fds "$p-fds"
	if pl_session_quit && [ "$SRC" = 0 ]; then
		pl_check "$p" "$USLEEP_STACK
syms = Symbols(args[0], args[1])
proc = tr.the_proc()
with case('$p') as c:
    frames, names = usleep_stack(proc, syms)
    if len(frames) != 3:
        fail('%d frames, want 3 (handle_block < serve_conn < libst): %s' % (len(frames), names))
    if not syms.contains('handle_block', frames[0], return_address=True):
        fail('innermost frame is not in handle_block: %s' % names)
    if not syms.contains('serve_conn', frames[1], return_address=True):
        fail('second frame is not in serve_conn: %s' % names)
    if not module_of(args[1], frames[2] - 1).startswith('libst.so'):
        fail('last frame is not in libst (_st_thread_main): %s' % names)
    c.info = ' < '.join(names)
" "$ST_HTTP_NOFP" "$SDIR/maps"
	else
		pl_fail "$p-exit" "${PL_ERR:-exit status $SRC}"
	fi
else
	pl_fail "$p" "$PL_ERR"
fi

# ---- a thread of its own: the stack ends at the thread's start --------------------------------------
p=blockstack-thread
NOFP=$T/epoll-http-nofp
if ! command -v "${CC:-gcc}" >/dev/null; then
	pl_skip "$p" "no C compiler (${CC:-gcc}) to build epoll-http without frame pointers"
elif ! "${CC:-gcc}" -std=gnu11 -D_GNU_SOURCE -O2 -g -fomit-frame-pointer -o "$NOFP" \
	"$PL_ROOT/tests/servers/epoll-http.c" -lpthread 2>"$T/cc.err"; then
	pl_fail "$p" "cannot build epoll-http without frame pointers: $(head -c 300 "$T/cc.err")"
elif pl_start "$T/thread" "$NOFP" -- -T 2; then
	block_fds "$p-fds"
	pl_quit
	if [ "$SRC" = 0 ]; then
		pl_check "$p" "$USLEEP_STACK
syms = Symbols(args[0], args[1])
proc = tr.the_proc()
with case('$p') as c:
    frames, names = usleep_stack(proc, syms)
    if not syms.contains('handle_block', frames[0], return_address=True):
        fail('innermost frame is not in handle_block: %s' % names)
    loop = [i for i, a in enumerate(frames) if syms.contains('serve_loop', a, return_address=True)]
    if not loop:
        fail('no frame in serve_loop, the thread start function: %s' % names)
    rest = [module_of(args[1], a - 1) for a in frames[loop[-1] + 1:]]
    if not rest or len(rest) > 3 or any(not m.startswith('libc.so') for m in rest):
        fail('after serve_loop, want 1 to 3 libc frames (the thread start): %s' % names)
    c.info = ' < '.join(names)
" "$NOFP" "$SDIR/maps"
	else
		pl_fail "$p-exit" "exit status $SRC"
	fi
else
	pl_fail "$p" "$PL_ERR"
fi

# ---- a burst: more slow calls at once than slots -----------------------------------------------------
p=blockstack-burst
BURST=$T/blockstack-burst
if ! command -v "${CC:-gcc}" >/dev/null; then
	pl_skip "$p" "no C compiler (${CC:-gcc}) to build blockstack-burst.c"
elif ! "${CC:-gcc}" -std=gnu11 -O2 -g -fomit-frame-pointer -o "$BURST" \
	"$PL_ROOT/tests/integration/blockstack-burst.c" -lpthread 2>"$T/cc.err"; then
	pl_fail "$p" "cannot build blockstack-burst.c: $(head -c 300 "$T/cc.err")"
else
	mkdir -p "$T/burst"
	timeout -s KILL $((60 * D9_SLOW)) env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/burst/trace/trace.bin" \
		"$BURST" >"$T/burst/stdout" 2>"$T/burst/stderr"
	rc=$?
	if [ "$rc" -ne 0 ] || [ "$(cat "$T/burst/stdout")" != ok ]; then
		pl_fail "$p" "blockstack-burst exited $rc: $(head -c 300 "$T/burst/stdout") $(head -c 300 "$T/burst/stderr")"
	else
		"$PL_ANALYZE" jsonl "$T/burst/trace" >"$T/burst/jsonl" 2>"$T/burst/jsonl.err"
		d9_py "$p" '
evs = [json.loads(l) for l in open(f[0]) if l.strip()]
err = open(f[1]).read()
us = [e for e in evs if e.get("type") == "BlockingCall" and e.get("call") == "usleep"]
if len(us) != 120:
    fail("%d usleep BlockingCalls, want 120 (24 threads x 5): %s" % (len(us), open(f[2]).read()[:200]))
none = [e for e in us if not e["stack"]]
said = err.count("recorded without a stack")
if none and said != 1:
    fail("%d calls without a stack, and stderr says so %d times, want once: %s" % (len(none), said, err[:300]))
if not none and said:
    fail("stderr says calls had no stack, but all have one: %s" % err[:300])
bad = [e["stack"][:3] for e in us if e["stack"] and
       [n.split(" ")[0] for n in e["stack"][:2]] != ["burst_sleep", "sleeper"]]
if bad:
    fail("%d of %d stacks do not start burst_sleep < sleeper: %s" % (len(bad), len(us) - len(none), bad[:3]))
info = "%d usleep BlockingCalls, %d without a stack (slots full)" % (len(us), len(none))
' "$T/burst/jsonl" "$T/burst/stderr" "$T/burst/jsonl.err"
	fi
fi
