#!/usr/bin/env bash
# test-preload-config.sh: the agent stays out of the way when it should.
#   - An invalid preload setting (D9_RUNTIME=bogus, and likewise D9_BLOCKING, D9_BLOCKING_THRESHOLD
#     below 10us, D9_QUEUE_INTERVAL below 1ms): exactly one line on stderr, naming the variable;
#     the server (st-http -q, which prints nothing itself) still serves /fast and exits 0 on
#     /quit; no trace directory is created.
#   - Programs that never wait in a recorded way (ls, sh -c true, a pipeline, cat, sleep) run
#     unchanged under LD_PRELOAD: the same stdout as without the agent, nothing on stderr, exit
#     status 0, and no trace directory.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-config

# ---- invalid settings ----------------------------------------------------------------------------------
for setting in D9_RUNTIME=bogus D9_BLOCKING=maybe D9_BLOCKING_THRESHOLD=5us D9_QUEUE_INTERVAL=100us; do
	var=${setting%%=*}
	name=config-invalid-$(echo "${var#D9_}" | tr 'A-Z_' 'a-z-')
	if ! pl_start "$T/$name" "$ST_HTTP" "$setting" --; then
		pl_fail "$name" "$PL_ERR"
		continue
	fi
	pl_get /fast
	fast="$CODE $BODY"
	pl_quit
	lines=$(wc -l <"$SDIR/stderr")
	if [ "$fast" != "200 ok" ] || [ "$SRC" != 0 ]; then
		pl_fail "$name" "the server did not serve normally: /fast '$fast', exit status $SRC"
	elif [ "$lines" != 1 ] || ! grep -q "$var" "$SDIR/stderr"; then
		pl_fail "$name" "want one stderr line naming $var, got $lines: '$(head -c 400 "$SDIR/stderr")'"
	elif [ -e "$SDIR/trace" ]; then
		pl_fail "$name" "tracing is off, yet $SDIR/trace exists: $(ls "$SDIR/trace" | tr '\n' ' ')"
	else
		pl_pass "$name" "$(cat "$SDIR/stderr")"
	fi
done

# ---- programs that never wait -----------------------------------------------------------------------------
mkdir -p "$T/files"
printf 'alpha\nbeta\n' >"$T/files/a.txt"
printf 'gamma\n' >"$T/files/b.txt"
n=0
while IFS='|' read -r slug cmd; do
	n=$((n + 1))
	name=config-passthrough-$slug
	(cd "$T/files" && bash -c "$cmd") >"$T/plain.out" 2>"$T/plain.err"
	rc_plain=$?
	(cd "$T/files" && env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/none-$n/trace.bin" \
		timeout -s KILL 20 bash -c "$cmd") >"$T/pre.out" 2>"$T/pre.err"
	rc=$?
	if [ "$rc_plain" != 0 ] || [ -s "$T/plain.err" ]; then
		pl_fail "$name" "the command itself fails without the agent: '$cmd' ($rc_plain)"
	elif [ "$rc" != 0 ]; then
		pl_fail "$name" "'$cmd' exits $rc under the agent: $(head -c 200 "$T/pre.err")"
	elif ! cmp -s "$T/plain.out" "$T/pre.out"; then
		pl_fail "$name" "'$cmd': stdout differs: $(diff "$T/plain.out" "$T/pre.out" | head -n 4 | tr '\n' ' ')"
	elif [ -s "$T/pre.err" ]; then
		pl_fail "$name" "'$cmd': stderr under the agent: $(head -c 300 "$T/pre.err")"
	elif [ -e "$T/none-$n" ]; then
		pl_fail "$name" "'$cmd' created a trace directory: $(ls "$T/none-$n" | tr '\n' ' ')"
	else
		pl_pass "$name" "'$cmd' unchanged, no trace"
	fi
done <<'EOF'
ls|ls -l --time-style=+%s .
sh-true|sh -c true
sh-echo|sh -c 'echo hello; printf "%s\n" one two'
pipeline|cat a.txt b.txt | sort -r | head -n 2
sleep|sleep 0.2
true|/usr/bin/true
EOF
