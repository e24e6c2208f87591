#!/usr/bin/env bash
# test-preload-secure.sh: programs in secure-execution mode (AT_SECURE: a set-user-ID or
# set-group-ID file, file capabilities, or a starter whose real and effective ids differ, as
# Debian's squid master, real uid proxy and effective root, when it execs its kid). The loader
# ignores LD_PRELOAD's paths there, and the environment is the starter's, who may be less
# privileged. secure-prog.c (run: 5 waits of 20 ms, which record Parks):
#   - secure-linked: secure-prog linked to the agent (DT_NEEDED, which the loader honours in
#     secure execution too), started normally: a segment (the control: the agent is in it);
#   - secure-off: the same program started in secure execution (real uid nobody, effective
#     root) with D9_TRACE_PATH set: exit 0, no trace at all (before, the agent read the
#     caller's D9_ variables and wrote where they said), and the one line that says why;
#   - secure-exec: a traced program whose real uid is nobody's and effective root execs
#     secure-prog (squid's kid): the new image runs untraced (exit 0); the agent said so once
#     and its trace holds a RecorderState `exec` off naming the program, written although the
#     program recorded nothing else (before: nothing said, no trace: the squid user saw an
#     empty directory);
#   - secure-spawn: the same through posix_spawn (the parent goes on, and writes it at its exit);
#   - secure-setuid: a root program execs a set-user-ID copy owned by nobody (the file's bit, not
#     the starter's ids): said and recorded; skipped on a nosuid mount, where the bit is ignored;
#   - secure-same: a root program execs secure-prog with its ids as they are: traced (its
#     segment), and nothing said or recorded about secure execution (no false notice).
# Skips (counted, with the reason) unless run as root (the ids are set with setresuid).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=secure
CASES="linked off exec spawn setuid same"
pl_need_built "$NAME"
if [ "$(id -u)" != 0 ]; then
	for c in $CASES; do pl_skip "$NAME-$c" "needs root (real and effective ids set apart with setresuid)"; done
	exit 0
fi
pl_env "$NAME"
chmod 0755 "$T"
src="$PL_ROOT/tests/integration/secure-prog.c"
lib=$(readlink -f "$PL_LIB")
if ! cc -O2 -o "$T/plain" "$src" 2>"$T/cc.err" ||
	! cc -O2 -o "$T/linked" "$src" -Wl,--no-as-needed "$lib" 2>>"$T/cc.err"; then
	for c in $CASES; do pl_fail "$NAME-$c" "cannot build secure-prog.c: $(head -c 300 "$T/cc.err")"; done
	exit 0
fi
chmod 0755 "$T/plain" "$T/linked"

# segs DIR: the segment files under DIR (and its d9-uid-N), one per line
segs() { find "$1" -name '*.bin' -o -name '*.bin.gz' -o -name '*.active' 2>/dev/null; }
# exec_notes DIR: "feature text" of every RecorderState `exec` in DIR's trace
exec_notes() {
	"$PL_ANALYZE" summary --json "$1" 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for p in d.get("processes", []):
    for r in p.get("recorder", []):
        if r.get("feature") == "exec":
            print(r.get("text", ""))'
}
says() { grep -c "secure-execution mode" "$1"; }

# ---- linked: the control ----
mkdir -m 0700 "$T/tr-linked"
D9_TRACE_PATH="$T/tr-linked/t.bin" timeout 60 "$T/linked" run 2>"$T/linked.err"
rc=$?
n=$(segs "$T/tr-linked" | wc -l)
if [ "$rc" = 0 ] && [ "$n" -ge 1 ]; then
	pl_pass "$NAME-linked" "$n segment(s): the agent comes with the program's own link"
else
	pl_fail "$NAME-linked" "exit $rc, $n segment(s) (stderr: $(head -c 300 "$T/linked.err"))"
fi

# ---- off: the linked program in secure execution ----
mkdir -m 0700 "$T/tr-off"
D9_TRACE_PATH="$T/tr-off/t.bin" timeout 60 python3 -c '
import os, sys
os.setresuid(65534, 0, 0)
os.execv(sys.argv[1], [sys.argv[1], "run"])' "$T/linked" 2>"$T/off.err" </dev/null
rc=$?
n=$(segs "$T/tr-off" | wc -l)
if [ "$rc" = 0 ] && [ "$n" = 0 ] && [ "$(says "$T/off.err")" = 1 ] &&
	[ -z "$(ls -A "$T/tr-off")" ]; then
	pl_pass "$NAME-off" "untraced, nothing written, said once"
else
	pl_fail "$NAME-off" "exit $rc, $n segment(s), directory: $(ls -A "$T/tr-off" | head -3 | tr '\n' ' '); stderr: $(head -c 400 "$T/off.err")"
fi

# ---- exec, spawn, setuid, same: a traced starter ----
# notice CASE MODE PROG WANT: secure-prog MODE PROG under the agent; WANT 1: the program runs
# untraced, said once and recorded in the starter's trace; 0: traced, nothing said or recorded
notice() {
	local c=$1 mode=$2 prog=$3 want=$4
	mkdir -m 0700 "$T/tr-$c"
	LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/tr-$c/t.bin" timeout 60 "$T/plain" "$mode" "$prog" \
		2>"$T/$c.err" </dev/null
	local rc=$? said notes nseg
	said=$(says "$T/$c.err")
	notes=$(exec_notes "$T/tr-$c")
	nseg=$(segs "$T/tr-$c" | wc -l)
	local base=${prog##*/}
	if [ "$want" = 1 ]; then
		if [ "$rc" = 0 ] && [ "$said" = 1 ] && [ "$nseg" = 1 ] &&
			[ "$(grep -c "secure-execution.*($base: " <<<"$notes")" = 1 ]; then
			pl_pass "$NAME-$c" "untraced; said once and recorded: $notes"
		else
			pl_fail "$NAME-$c" "exit $rc, said $said time(s), $nseg segment(s), recorded: '$notes' (stderr: $(head -c 400 "$T/$c.err"))"
		fi
	elif [ "$rc" = 0 ] && [ "$said" = 0 ] && [ -z "$notes" ] && [ "$nseg" = 1 ]; then
		pl_pass "$NAME-$c" "traced (one segment: the exec keeps the pid), no notice"
	else
		pl_fail "$NAME-$c" "exit $rc, said $said time(s), $nseg segment(s), recorded: '$notes' (stderr: $(head -c 400 "$T/$c.err"))"
	fi
}
notice exec exec "$T/plain" 1
notice spawn spawn "$T/plain" 1
cp "$T/plain" "$T/suid"
chown 65534 "$T/suid"
chmod 4755 "$T/suid"
if findmnt -n -o OPTIONS -T "$T/suid" 2>/dev/null | tr ',' '\n' | grep -qx nosuid; then
	pl_skip "$NAME-setuid" "$T is on a nosuid mount: the kernel ignores the set-user-ID bit there"
else
	notice setuid same "$T/suid" 1
fi
notice same same "$T/plain" 0
