#!/usr/bin/env bash
# test-real-sshd.sh: Debian's OpenSSH server (build/debs/openssh-server, unpacked by `make deps`:
# installing it would start a login server here) under LD_PRELOAD=build/libd9agent.so, in the
# foreground (-D) on 127.0.0.1 and a free port, public-key logins only. For each connection sshd
# forks a privilege-separated child that chroots to /run/sshd, gives up root to the user sshd,
# sets RLIMIT_FSIZE and RLIMIT_NOFILE to 0 and loads a seccomp filter (prctl(PR_SET_SECCOMP))
# that kills it at a call it does not list. Before, every login failed under the agent: the
# child died at the filter (the agent's own calls), or by SIGXFSZ when the agent wrote its line
# about the filter to a stderr that is a file (a write past RLIMIT_FSIZE).
#   - sshd-logins: 3 logins running `echo hi` succeed, as without the agent;
#   - sshd-logins-follow: the same with D9_CHROOT=follow (the child is still traced when it loads
#     its filter, and stops recording there);
#   - sshd-trace: the listener's trace reads (d9-analyze summary), one series per process.
# Skips (counted, with the reason) when not root, without the unpacked package, its libraries,
# the ssh client or the user sshd (make deps makes it, as the package would).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

NAME=sshd
pl_need_built "$NAME"
SSHD=$PL_ROOT/build/debs/openssh-server/usr/sbin/sshd
skip_all() {
	for c in logins logins-follow trace; do pl_skip "$NAME-$c" "$1"; done
	exit 0
}
[ -x "$SSHD" ] || skip_all "build/debs/openssh-server is not there (make deps downloads and unpacks Debian's openssh-server)"
[ "$(id -u)" = 0 ] || skip_all "needs root (sshd's privilege separation)"
command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || skip_all "the ssh client is not installed (openssh-client; make deps)"
getent passwd sshd >/dev/null || skip_all "no user sshd (make deps makes it)"
if ldd "$SSHD" | grep -q 'not found'; then
	skip_all "sshd's libraries are missing: $(ldd "$SSHD" | grep 'not found' | tr -s ' \n' ' ')(make deps)"
fi
pl_env "$NAME"
# sshd's privilege-separation directory (its package's tmpfiles make it at boot)
[ -d /run/sshd ] || { mkdir -m 0755 /run/sshd && RUN_MADE=1; }
ssh-keygen -q -t ed25519 -N '' -f "$T/hostkey" && ssh-keygen -q -t ed25519 -N '' -f "$T/id" &&
	cp "$T/id.pub" "$T/authorized_keys" || skip_all "ssh-keygen failed"
chmod 0755 "$T"

# run_logins CASE [VAR=value...]: sshd under the agent, 3 logins, then SIGTERM
run_logins() {
	local c=$1 port d=$T/$1 ok=0
	shift
	port=$(pl_free_port)
	mkdir -p "$d" && mkdir -m 0700 "$d/trace"
	cat >"$d/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $T/hostkey
AuthorizedKeysFile $T/authorized_keys
PidFile $d/sshd.pid
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
EOF
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d/trace" "$@" "$SSHD" -D -e -f "$d/sshd_config" \
		>"$d/stdout" 2>"$d/stderr" &
	local spid=$!
	PL_PIDS+=("$spid")
	listening() { ss -ltn "sport = :$port" 2>/dev/null | grep -q LISTEN; }
	if ! d9_wait_for 30 listening; then
		pl_fail "$NAME-$c" "sshd did not listen: $(head -c 300 "$d/stderr")"
		kill -KILL "$spid" 2>/dev/null
		return 1
	fi
	for i in 1 2 3; do
		out=$(timeout -s KILL 60 ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no \
			-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -i "$T/id" -p "$port" \
			root@127.0.0.1 'echo hi' 2>"$d/ssh.err")
		[ "$out" = hi ] && ok=$((ok + 1))
	done
	kill -TERM "$spid"
	gone() { ! pl_alive "$spid"; }
	d9_wait_for 30 gone || kill -KILL "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	if [ "$ok" = 3 ]; then
		pl_pass "$NAME-$c" "3 logins of 3 ($(grep -c '^d9\[' "$d/stderr") lines of the agent's)"
	else
		pl_fail "$NAME-$c" "$ok logins of 3 succeeded (3 without the agent): ssh said $(head -c 200 "$d/ssh.err"); sshd: $(grep -v '^Server listening' "$d/stderr" | head -c 400)"
	fi
}
run_logins logins
run_logins logins-follow D9_CHROOT=follow
"$PL_ANALYZE" summary --json "$T/logins/trace" >"$T/summary.json" 2>"$T/analyze.err"
arc=$?
python3 - "$NAME-trace" "$arc" "$T/summary.json" "$T/analyze.err" <<'PY'
import json, sys
name, arc, js, aerr = sys.argv[1:]
# exit status 4: read, with a damaged part (a privilege-separated child's segment cut short)
s = json.load(open(js)) if arc in ("0", "4") else None
if not s or not s["processes"]:
    print("FAIL %s: d9-analyze summary exited %s: %s" % (name, arc, open(aerr).read()[:300]))
else:
    print("PASS %s: %d processes, %d events" % (name, len(s["processes"]), s["events"]))
PY
[ -n "${RUN_MADE:-}" ] && rmdir /run/sshd 2>/dev/null
exit 0
