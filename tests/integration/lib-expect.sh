# lib-expect.sh: the check of the bad-input tests (test-analyze-bad-input.sh,
# test-dump-bad-input.sh): one d9-analyze run against what it must say and return.
# The caller sets $san (the sanitizer build of d9-analyze) and $tmp (a scratch directory).

# d9_expect PREFIX SUBCMD NAME RC LINES PATTERN... -- ARGS...: runs `$san SUBCMD ARGS` (no SUBCMD
# when it is ""); wants exit status RC, LINES lines on stderr (-1: any), each PATTERN (extended
# regex) on stderr, and no sanitizer report. Prints PASS or FAIL PREFIX-NAME.
d9_expect() {
	local prefix=$1 sub=$2 name=$3 want_rc=$4 want_lines=$5
	shift 5
	local pats=() cmd=()
	while [ "$1" != "--" ]; do pats+=("$1"); shift; done
	shift
	[ -n "$sub" ] && cmd=("$sub")
	local rc=0
	"$san" "${cmd[@]}" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	local lines why=""
	lines=$(wc -l <"$tmp/err")
	if grep -qE 'runtime error|Sanitizer' "$tmp/err"; then
		why="sanitizer report: $(grep -m1 -E 'runtime error|Sanitizer' "$tmp/err")"
	elif [ "$rc" -ne "$want_rc" ]; then
		why="exit status $rc, expected $want_rc"
	elif [ "$want_lines" -ge 0 ] && [ "$lines" -ne "$want_lines" ]; then
		why="$lines stderr lines, expected $want_lines"
	else
		for p in "${pats[@]}"; do
			if ! grep -qE -- "$p" "$tmp/err"; then
				why="stderr does not match /$p/"
				break
			fi
		done
	fi
	if [ -n "$why" ]; then
		echo "FAIL $prefix-$name: $why; stderr: $(head -c 400 "$tmp/err" | tr '\n' '|')"
	else
		echo "PASS $prefix-$name"
	fi
}
