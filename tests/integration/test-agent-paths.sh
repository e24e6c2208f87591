#!/usr/bin/env bash
# test-agent-paths.sh: where the agent writes, and what it refuses (README "Trace directory").
#   - D9_TRACE_PATH that is not a file path: /dev/null (a device), a FIFO, a path under /dev, a
#     path through a file (/etc/passwd/trace.bin: "not a directory"): one stderr line saying so,
#     the program exits 0 untraced, nothing is created (in /dev, as root, too).
#   - D9_TRACE_PATH naming an existing directory (with or without a trailing slash): the segments
#     land inside it as trace.<pid>.<seq>.*, nothing beside it.
#   - A trace directory another user could write to (0777 and owned by nobody; 0770 root; 1777
#     like /tmp; a symbolic link in place of the directory; a safe directory in a 0777 parent):
#     refused with one line naming the owner and mode (and D9_ALLOW_SHARED_DIR), nothing written;
#     D9_ALLOW_SHARED_DIR=1 accepts the shared ones, silently.
#   - The default path /var/tmp/d9-<uid>/trace.bin (inside a private mount namespace whose
#     /var/tmp is a sticky 1777 directory of this test) is created 0700 and written.
#   - A relative D9_TRACE_PATH names a directory from where the program started, also when the
#     program changes its working directory before it records (relative-path); refused with one
#     line when that directory was removed (relative-path-no-cwd).
#   - The command line in the segment header: by default the values of secret-looking options,
#     NAME=VALUE pairs and URL passwords are "***" in `summary`, `dump` and the raw segment bytes,
#     other arguments stay; D9_CMDLINE=full keeps everything, D9_CMDLINE=name only argv[0].
set -u
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
d9_setup agent-paths
LIB=$D9_ROOT/build/libd9agent.so

# refused NAME LINE_PATTERN [VAR=value ...]: the driver runs with the variables; it must exit 0
# with the agent off and exactly one stderr line matching LINE_PATTERN (grep -E).
refused() {
	local name=$1 pat=$2 rc lines
	shift 2
	d9_run "$T/$name.out" "$T/$name.err" "$@" -- -t 2 -n 1000 --park-every 100
	rc=$?
	lines=$(wc -l <"$T/$name.err")
	if [ "$rc" -ne 0 ]; then
		d9_fail "$name" "exit status $rc: $(head -c 200 "$T/$name.err")"
	elif [ "$lines" -ne 1 ] || ! grep -Eq -- "$pat" "$T/$name.err"; then
		d9_fail "$name" "$lines stderr lines, expected one matching '$pat': $(head -n 3 "$T/$name.err" | tr '\n' '|')"
	elif ! grep -q '"active":0' "$T/$name.out"; then
		d9_fail "$name" "the agent is not off: $(head -c 300 "$T/$name.out")"
	else
		return 0
	fi
	return 1
}

# traced NAME DIR [VAR=value ...]: the driver runs with the variables; exit 0, nothing on stderr,
# and its first segment is in DIR.
traced() {
	local name=$1 dir=$2 rc
	shift 2
	d9_run "$T/$name.out" "$T/$name.err" "$@" -- -t 2 -n 1000 --park-every 100
	rc=$?
	if [ "$rc" -ne 0 ]; then
		d9_fail "$name" "exit status $rc: $(head -c 200 "$T/$name.err")"
	elif [ -s "$T/$name.err" ]; then
		d9_fail "$name" "the agent printed: $(head -n 2 "$T/$name.err" | tr '\n' '|')"
	elif ! compgen -G "$dir/trace.*.000000.bin*" >/dev/null; then
		d9_fail "$name" "no segment in $dir: $(ls -A "$dir" 2>&1 | head -n 3 | tr '\n' ' ')"
	else
		return 0
	fi
	return 1
}

# ---- paths that are not file paths -------------------------------------------------------------
if [ "$(id -u)" = 0 ]; then
	before=$(ls -A /dev | sort)
	if refused dev-null 'D9_TRACE_PATH="/dev/null": it is a character device, not a file or directory' \
		D9_TRACE_PATH=/dev/null; then
		# the old agent created /dev/null.<pid>.000000.active as root
		new=$(comm -13 <(echo "$before") <(ls -A /dev | sort) | grep '^null\.\|^trace\.' | head -n 3)
		if [ -n "$new" ]; then
			d9_fail dev-null "created in /dev: $new"
		else
			d9_pass dev-null "$(cat "$T/dev-null.err")"
		fi
	fi
	if refused dev-file 'never creates files under /dev' D9_TRACE_PATH=/dev/d9-test-trace.bin; then
		if compgen -G "/dev/d9-test-trace*" >/dev/null; then
			d9_fail dev-file "created in /dev: $(ls /dev/d9-test-trace*)"
		else
			d9_pass dev-file "$(cat "$T/dev-file.err")"
		fi
	fi
else
	d9_skip dev-null "not root: the case is about root creating files in /dev"
fi
refused proc-dir 'never creates files under /proc' D9_TRACE_PATH=/proc/self/d9/trace.bin &&
	d9_pass proc-dir "$(cat "$T/proc-dir.err")"

if [ -f /etc/passwd ]; then
	refused through-a-file '"/etc/passwd/trace.bin": /etc/passwd is not a directory' \
		D9_TRACE_PATH=/etc/passwd/trace.bin && d9_pass through-a-file "$(cat "$T/through-a-file.err")"
else
	d9_skip through-a-file "no /etc/passwd"
fi
mkfifo "$T/fifo"
refused fifo 'it is a FIFO, not a file or directory' D9_TRACE_PATH="$T/fifo" &&
	d9_pass fifo "$(cat "$T/fifo.err")"
refused missing-dir-slash 'ends with / but is not an existing directory' \
	D9_TRACE_PATH="$T/missing/" && { [ -e "$T/missing" ] && d9_fail missing-dir-slash "$T/missing created" ||
	d9_pass missing-dir-slash; }

# ---- an existing directory as the path ---------------------------------------------------------
for form in plain slash; do
	d=$T/existing-$form
	mkdir -m 0700 "$d"
	p=$d
	[ $form = slash ] && p=$d/
	if traced "existing-dir-$form" "$d" D9_TRACE_PATH="$p"; then
		beside=$(ls -A "$T" | grep "^existing-$form\." | head -n 3)
		if [ -n "$beside" ]; then
			d9_fail "existing-dir-$form" "files beside the directory: $beside"
		else
			d9_pass "existing-dir-$form" "$(ls "$d" | head -n 1)"
		fi
	fi
done

# ---- directories other users can write to --------------------------------------------------------
# shared NAME OWNER MODE PATTERN: a trace directory with that owner and mode is refused with one
# line matching PATTERN and stays empty; with D9_ALLOW_SHARED_DIR=1 it is used.
shared() {
	local name=$1 d=$T/$1
	mkdir "$d"
	chown "$2" "$d" && chmod "$3" "$d"
	if refused "$name" "$4" D9_TRACE_PATH="$d/trace.bin"; then
		if [ -n "$(ls -A "$d")" ]; then
			d9_fail "$name" "written although refused: $(ls -A "$d" | head -n 3 | tr '\n' ' ')"
		else
			d9_pass "$name" "$(cat "$T/$name.err")"
		fi
	fi
	traced "$name-allowed" "$d" D9_TRACE_PATH="$d/trace.bin" D9_ALLOW_SHARED_DIR=1 &&
		d9_pass "$name-allowed" "D9_ALLOW_SHARED_DIR=1: $(ls "$d" | head -n 1)"
}
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	# the issue's case: another user made the directory world-writable before the agent ran
	shared shared-nobody-0777 nobody 0777 \
		"refusing trace directory .*: owned by uid $(id -u nobody) \(not this process's\), mode 0777 \(writable by others\).*D9_ALLOW_SHARED_DIR=1"
	shared shared-group-0770 root 0770 'refusing trace directory .*: owned by uid 0, mode 0770 \(writable by its group\).*D9_ALLOW_SHARED_DIR=1'
	shared shared-sticky-1777 root 1777 'refusing trace directory .*: owned by uid 0, mode 1777 \(writable by others\)'
else
	d9_skip shared-dirs "needs root and the user nobody to make another user's directory"
fi
# a 0777 parent without the sticky bit: anyone could swap the (safe) trace directory for their own
mkdir -m 0700 "$T/open"
chmod 0777 "$T/open"
if refused open-parent "refusing trace directory $T/open/d9: its parent $T/open has mode 0777 \(writable by others, not sticky\)" \
	D9_TRACE_PATH="$T/open/d9/trace.bin"; then
	d9_pass open-parent "$(cat "$T/open-parent.err")"
fi
traced open-parent-allowed "$T/open/d9" D9_TRACE_PATH="$T/open/d9/trace.bin" D9_ALLOW_SHARED_DIR=1 &&
	d9_pass open-parent-allowed "D9_ALLOW_SHARED_DIR=1: $(ls "$T/open/d9" | head -n 1)"
mkdir -m 0700 "$T/real"
ln -s "$T/real" "$T/link"
for form in file dir; do
	p=$T/link/trace.bin
	[ $form = dir ] && p=$T/link
	if refused "symlink-dir-$form" "cannot write traces to $T/link: it is a symbolic link" D9_TRACE_PATH="$p"; then
		if [ -n "$(ls -A "$T/real")" ]; then
			d9_fail "symlink-dir-$form" "written through the link: $(ls -A "$T/real" | head -n 3)"
		else
			d9_pass "symlink-dir-$form" "$(cat "$T/symlink-dir-$form.err")"
		fi
	fi
done

# ---- the default path ---------------------------------------------------------------------------
# In a private mount namespace /var/tmp is this test's own sticky directory, so the default
# /var/tmp/d9-<uid> is created there and nothing is left outside $T.
mkdir -m 1777 "$T/vartmp"
if unshare -m --propagation private true 2>/dev/null; then
	uid=$(id -u)
	unshare -m --propagation private sh -c 'mount --bind "$1" /var/tmp && shift && exec "$@"' \
		sh "$T/vartmp" env D9_ROTATION_PERIOD=0 timeout -s KILL 60 "$DRIVER" -t 2 -n 1000 \
		>"$T/default.out" 2>"$T/default.err"
	rc=$?
	d=$T/vartmp/d9-$uid
	if [ "$rc" -ne 0 ] || [ -s "$T/default.err" ]; then
		d9_fail default-path "exit status $rc: $(head -c 300 "$T/default.err")"
	elif ! compgen -G "$d/trace.*.000000.bin*" >/dev/null; then
		d9_fail default-path "no segment in /var/tmp/d9-$uid: $(ls -A "$T/vartmp" "$d" 2>&1 | head -n 4 | tr '\n' ' ')"
	elif [ "$(stat -c %a "$d")" != 700 ]; then
		d9_fail default-path "/var/tmp/d9-$uid has mode $(stat -c %a "$d")"
	else
		d9_pass default-path "/var/tmp/d9-$uid (0700): $(ls "$d" | head -n 1)"
	fi
else
	d9_skip default-path "cannot make a private mount namespace (unshare -m)"
fi

# ---- the command line in the trace -------------------------------------------------------------------
# A real program with arbitrary arguments under LD_PRELOAD: python3 polling in a loop records loop
# turns (generic mode), so it writes segments with its command line in every header.
ARGS=(--password=hunter2 --token abc --keep x DB_PASSWORD=sw0rdfish 'postgres://app:pg5ecret@db/main'
	-p short --api-key=K3YVALUE)
POLL='import select; [select.poll().poll(2) for _ in range(40)]'
cmdline_run() { # NAME [VAR=value ...]: the traced run; its trace in $T/NAME
	local name=$1
	shift
	mkdir -m 0700 "$T/$name"
	env LD_PRELOAD="$LIB" D9_TRACE_PATH="$T/$name/trace.bin" "$@" timeout -s KILL 60 \
		python3 -c "$POLL" "${ARGS[@]}" >"$T/$name.stdout" 2>"$T/$name.stderr"
	local rc=$?
	if [ "$rc" -ne 0 ] || [ -s "$T/$name.stderr" ]; then
		d9_fail "$name" "python3 exit status $rc: $(head -c 300 "$T/$name.stderr")"
		return 1
	fi
	"$ANALYZE" summary "$T/$name" >"$T/$name.summary" 2>&1 &&
		"$ANALYZE" dump "$T/$name" >"$T/$name.dump" 2>&1
}
# check_cmdline NAME MODE: summary, dump and the raw (decompressed) segment bytes against MODE.
check_cmdline() {
	d9_py "$1" '
import glob, gzip
name, mode, T = f[0], f[1], f[2]
summary = open("%s/%s.summary" % (T, name), errors="replace").read()
dump = load("%s/%s.dump" % (T, name))
heads = [o for o in dump if o.get("rec") == "header"]
if not heads:
    fail("no header in the dump: %s" % summary[:200])
raw = b""
for p in glob.glob("%s/%s/trace.*" % (T, name)):
    b = open(p, "rb").read()
    raw += gzip.decompress(b) if p.endswith(".gz") else b
secrets = ["hunter2", "--token abc", "sw0rdfish", "pg5ecret", "K3YVALUE"]
kept = ["--keep x", "-p short", "postgres://app:", "@db/main", "--password=", "--token", "DB_PASSWORD=", "--api-key="]
cmd = heads[0]["cmdline"]
for h in heads:
    if h["cmdline"] != cmd:
        fail("segments differ in their command line: %r, %r" % (cmd, h["cmdline"]))
words = cmd.split(" ")
if "python3" not in words[0]:
    fail("argv[0] is not python3: %r" % cmd)
if mode == "name":
    if len(words) != 1:
        fail("D9_CMDLINE=name recorded more than argv[0]: %r" % cmd)
    secrets += ["--keep"]
    kept = []
elif mode == "full":
    kept += secrets
    secrets = []
else:
    for want in ["--password=***", "--token *** --keep x", "DB_PASSWORD=***", "postgres://app:***@db/main", "--api-key=***"]:
        if want not in cmd:
            fail("%r is not in the recorded command line %r" % (want, cmd))
for s in secrets:
    for where, text in (("dump", cmd), ("summary", summary)):
        if s in text:
            fail("%r is in the %s output: %r" % (s, where, text[:400]))
    if s.replace(" ", "\0").encode() in raw:
        fail("%r is in the raw segment bytes" % s)
for k in kept:
    if k not in cmd or k not in summary:
        fail("%r is missing from the command line: %r" % (k, cmd))
    if k.replace(" ", "\0").encode() not in raw:
        fail("%r is not in the raw segment bytes" % k)
info = "%d segment(s): ...%s" % (len(heads), cmd[-140:])
' "$1" "$2" "$T"
}
# ---- a relative D9_TRACE_PATH, and a program that changes its working directory ----------------
# The path means the directory it names from where the program started: a program (python3 here)
# that chdir()s before it records anything still writes there (the agent's threads keep their
# own working directory, agent/DESIGN.md "chroot", and the path is made absolute at load).
if ! command -v python3 >/dev/null; then
	d9_skip relative-path "no python3"
else
	mkdir -p "$T/rel-start" "$T/rel-elsewhere"
	(cd "$T/rel-start" && env LD_PRELOAD="$LIB" D9_TRACE_PATH=rel/trace.bin \
		timeout -s KILL 60 python3 -c 'import os, select, sys
os.chdir(sys.argv[1])
for _ in range(5):
    select.select([], [], [], 0.001)' "$T/rel-elsewhere" >"$T/rel.out" 2>"$T/rel.err")
	rc=$?
	if [ "$rc" != 0 ] || [ -s "$T/rel.err" ]; then
		d9_fail relative-path "exit status $rc: $(head -c 200 "$T/rel.err")"
	elif [ -e "$T/rel-elsewhere/rel" ]; then
		d9_fail relative-path "the trace went to the new working directory: $(ls -R "$T/rel-elsewhere" | head -n 5 | tr '\n' ' ')"
	elif ! compgen -G "$T/rel-start/rel/trace.*.bin*" >/dev/null; then
		d9_fail relative-path "no segment in the directory named from the start: $(ls -A "$T/rel-start/rel" 2>&1 | head -n 3 | tr '\n' ' ')"
	else
		d9_pass relative-path "rel/ named from the start directory, after a chdir: $(ls "$T/rel-start/rel" | tr '\n' ' ')"
	fi
	# started in a directory removed since: the relative path names nothing, and is refused
	mkdir "$T/rel-gone"
	had_rel=0
	[ -e /rel ] && had_rel=1
	(cd "$T/rel-gone" && rmdir "$T/rel-gone" &&
		exec env LD_PRELOAD="$LIB" D9_TRACE_PATH=rel/trace.bin /bin/true \
		>"$T/relgone.out" 2>"$T/relgone.err")
	rc=$?
	if [ "$rc" != 0 ] || [ "$(grep -c . "$T/relgone.err")" != 1 ] ||
		! grep -q 'relative and the working directory cannot be had' "$T/relgone.err"; then
		d9_fail relative-path-no-cwd "exit status $rc, stderr: $(head -c 300 "$T/relgone.err")"
	elif [ "$had_rel" = 0 ] && [ -e /rel ]; then
		d9_fail relative-path-no-cwd "/rel was made"
	else
		d9_pass relative-path-no-cwd "$(cat "$T/relgone.err")"
	fi
fi

if ! command -v python3 >/dev/null; then
	d9_skip cmdline "no python3"
else
	cmdline_run cmdline-default && check_cmdline cmdline-default redacted
	cmdline_run cmdline-redacted D9_CMDLINE=redacted && check_cmdline cmdline-redacted redacted
	cmdline_run cmdline-full D9_CMDLINE=full && check_cmdline cmdline-full full
	cmdline_run cmdline-name D9_CMDLINE=name && check_cmdline cmdline-name name
fi
exit 0
