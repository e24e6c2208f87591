#!/usr/bin/env bash
# test-real-chrony.sh: Debian's chronyd with its package's default option `-F 1` (/etc/default/
# chrony): once started it loads a seccomp filter (libseccomp, on its main thread) whose action
# for any call it does not list is to kill the process. Under the agent it died by SIGSYS at its
# main loop's first select (the agent's gettid, making the thread a worker, is not in its list).
# Run from the package unpacked by `make deps` (build/debs/chrony: installing it would start a
# time daemon here), in the foreground (-d), not touching the clock (-x), as nobody (-u), with a
# server it cannot reach, under LD_PRELOAD=build/libd9agent.so:
#   - chrony-filter: chronyd reaches its main loop's wait under its filter (its main thread
#     waits in pselect6, seen in /proc) and ends with exit status 0 at SIGTERM, as without the
#     agent; the agent said once that the thread records nothing more, and nothing about a
#     filter not installed (libseccomp's checks of the kernel, seccomp(SECCOMP_SET_MODE_STRICT,
#     1, NULL), were once taken for a filter that the kernel then refused).
# Skips (counted, with the reason) when not root, without the unpacked package or its libraries.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=chrony
pl_need_built "$NAME"
CHRONYD=$PL_ROOT/build/debs/chrony/usr/sbin/chronyd
if [ ! -x "$CHRONYD" ]; then
	pl_skip "$NAME-filter" "build/debs/chrony is not there (make deps downloads and unpacks Debian's chrony)"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	pl_skip "$NAME-filter" "needs root (chronyd gives up root itself)"
	exit 0
fi
if ldd "$CHRONYD" | grep -q 'not found'; then
	pl_skip "$NAME-filter" "chronyd's libraries are missing: $(ldd "$CHRONYD" | grep 'not found' | tr -s ' \n' ' ')(make deps)"
	exit 0
fi
pl_env "$NAME"
mkdir -m 0700 "$T/trace"
mkdir -m 0777 "$T/run"
chmod 0755 "$T"
cat >"$T/chrony.conf" <<EOF
server 192.0.2.1 iburst
driftfile $T/run/drift
cmdport 0
pidfile $T/run/chronyd.pid
EOF

# in_main_loop PID: its main thread waits in pselect6 (chronyd's select), after its filter
in_main_loop() {
	grep -q 'Loaded seccomp filter' "$T/stderr" && [ "$(cut -d' ' -f1 "/proc/$1/syscall" 2>/dev/null)" = 270 ]
}
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace" "$CHRONYD" -d -x -F 1 -u nobody -f "$T/chrony.conf" -L 0 \
	>"$T/stdout" 2>"$T/stderr" &
CPID=$!
PL_PIDS+=("$CPID")
if ! d9_wait_for 30 eval 'in_main_loop "$CPID" || ! pl_alive "$CPID"' || ! in_main_loop "$CPID"; then
	alive=no
	pl_alive "$CPID" && alive=yes
	kill -KILL "$CPID" 2>/dev/null
	wait "$CPID"
	pl_fail "$NAME-filter" "chronyd did not reach its main loop under its filter (alive: $alive, exit status $?): $(tail -c 400 "$T/stderr")"
	exit 0
fi
kill -TERM "$CPID"
gone() { ! pl_alive "$CPID"; }
if ! d9_wait_for 30 gone; then
	pl_fail "$NAME-filter" "chronyd did not end within 30 s of SIGTERM"
	exit 0
fi
wait "$CPID"
rc=$?
said=$(grep -c 'installs a seccomp filter' "$T/stderr")
if [ "$rc" != 0 ]; then
	pl_fail "$NAME-filter" "chronyd exited with status $rc (0 without the agent): $(tail -c 400 "$T/stderr")"
elif [ "$said" != 1 ] || grep -q 'was not installed' "$T/stderr"; then
	pl_fail "$NAME-filter" "the agent said $said times that the thread installs a seccomp filter (want 1, and no filter 'not installed'): $(grep '^d9' "$T/stderr" | head -c 400)"
else
	pl_pass "$NAME-filter" "chronyd ran its loop under its filter and exited 0; $(grep -o 'thread [0-9]* ([^)]*) installs a seccomp filter' "$T/stderr")"
fi
