#!/usr/bin/env bash
# test-agent-toggle-taken.sh: D9_TOGGLE_SIGNAL when the program sets its own handler for that
# signal after the agent started (PostgreSQL's SIGHUP handler for its reload): toggling stops, as
# it must (the signal is the program's), and the agent says so (it said nothing: the user's
# signal then reloaded the server while recording went on). busy-workers installs its own
# SIGURG handler after its first second; D9_TOGGLE_SIGNAL=URG:
#   - toggle-taken: the program ends as without the agent (exit 0) having received the SIGURG
#     sent after it took the signal, and the agent said once, within its periodic pass, that
#     toggling is off.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=toggle-taken
pl_need_built "$NAME"
pl_env "$NAME"
BW=$PL_ROOT/build/tests/busy-workers
if [ ! -x "$BW" ]; then
	pl_fail "$NAME" "$BW is not built (make all)"
	exit 0
fi
mkdir -m 0700 "$T/trace"
env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/trace/trace.bin" D9_TOGGLE_SIGNAL=URG \
	D9_FLUSH_INTERVAL=50ms "$BW" 2 4 take-urg >"$T/stdout" 2>"$T/stderr" &
SPID=$!
PL_PIDS+=("$SPID")
said() { grep -q 'D9_TOGGLE_SIGNAL: the program set its own handling of signal' "$T/stderr"; }
if ! d9_wait_for 30 grep -q "^t=2 " "$T/stdout"; then
	pl_fail "$NAME" "busy-workers printed no t=2 within 30 s"
	exit 0
fi
kill -URG "$SPID"
d9_wait_for 30 said
pl_wait_exit 60
got=$(sed -n 's/^urg=//p' "$T/stdout")
n=$(grep -c 'D9_TOGGLE_SIGNAL: the program set its own handling' "$T/stderr")
if [ "$SRC" != 0 ] || [ "${got:-0}" -lt 1 ]; then
	pl_fail "$NAME" "exit $SRC, the program got ${got:-no} SIGURG: $(tail -c 200 "$T/stdout")"
elif [ "$n" != 1 ]; then
	pl_fail "$NAME" "said $n time(s) that toggling is off (stderr: $(head -c 300 "$T/stderr"))"
else
	pl_pass "$NAME" "the program's handler got SIGURG ($got); said once that toggling is off"
fi
