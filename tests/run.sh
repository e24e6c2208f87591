#!/usr/bin/env bash
# run.sh: runs every test program and counts results. Each program prints lines
# "PASS name", "FAIL name: why" or "SKIP name: why"; a program that exits non-zero without
# printing a FAIL line counts as one failure of its own, and so does one that outlives its time
# limit (D9_TEST_TIMEOUT, 900 s; it is killed with every process it started). An argument runs
# only the programs whose path contains it.
# Programs run D9_TEST_JOBS at a time (default 3), the longest of the last run first (their
# durations are kept in build/test-logs/durations); the heavy ones (the HEAVY list: wrk load,
# the browser, CPU profiling) never two at once, so the machine is not swamped by them together.
# Each program's log is build/test-logs/<name>.log; its result line is printed when it ends,
# the failures and skips again in a stable order at the end, then a time report (wall, and the
# CPU each program used with what it waited for: build/test-logs/cpu) and always
# "N passed, N failed, N skipped". Exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.." || exit 1
filter="${1:-}"
log_dir=build/test-logs
mkdir -p "$log_dir"
jobs=${D9_TEST_JOBS:-3}
limit=${D9_TEST_TIMEOUT:-900}
durations=$log_dir/durations
HEAVY=" test-rt-libco.sh test-preload-load.sh test-viewer.sh test-preload-profile.sh test-agent-accounting.sh test-stacks.sh test-real-nginx.sh test-preload-exits.sh test-requests.sh test-docs.sh "

# The tests' helpers run python3 hundreds of times. A version manager's shim ahead of the
# system's in PATH (pyenv's is a shell script that runs pyenv: about 350 ms a call on one of
# these VMs, against 47 for /usr/bin/python3) made the whole suite three times slower; the tests
# use the Debian python3 scripts/install-deps.sh installs, when it is there.
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
	mkdir -p build/test-bin && ln -sfn /usr/bin/python3 build/test-bin/python3
	export PATH="$PWD/build/test-bin:$PATH"
fi

# Separate debug files under /usr/lib/debug are the machine's: the tests name frames without
# them (lib.sh, d9_no_machine_debug_files, says why; test scripts set it again themselves).
mkdir -p build/test-no-debug && export D9_DEBUG_DIR=$PWD/build/test-no-debug

progs=()
for t in build/san/tests/test-* tests/integration/test-*.sh; do
	{ [[ "$t" == *.sh ]] && [ -f "$t" ]; } || [ -x "$t" ] || continue
	[ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && continue
	progs+=("$t")
done
if [ "${#progs[@]}" -eq 0 ]; then
	echo "no test program matches '$filter'"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi

# longest first by the last run's durations, else by these (seconds with two CPU hogs running;
# a program in neither list counts as long: it may be new)
DEFAULT_SECS=" test-agent-fork.sh:44 test-preload-profile.sh:41 test-analyze-jsonl.sh:40
	test-preload-load.sh:38 test-agent-rotation.sh:34 test-analyze-chrome.sh:31 test-viewer.sh:29
	test-agent-exit.sh:28 test-agent-config.sh:23 test-agent-accounting.sh:16 test-preload-smoke.sh:13
	test-agent-symbols.sh:12 test-analyze-flame.sh:12 test-analyze-bad-input.sh:12 "
order=$(for t in "${progs[@]}"; do
	n=$(basename "$t")
	s=$(awk -v n="$n" '$1 == n { print $2 }' "$durations" 2>/dev/null | tail -n 1)
	if [ -z "$s" ] && [ -f "$durations" ]; then s=999
	elif [ -z "$s" ]; then s=$(echo "$DEFAULT_SECS" | tr ' \t' '\n\n' | sed -n "s/^$n://p"); fi
	echo "${s:-5} $t"
done | sort -k1,1nr -k2 | cut -d' ' -f2-)
mapfile -t queue <<<"$order"

# run_one PROG: runs it with its output in its log, then writes "rc secs cpu" to its .rc file.
run_one() {
	local t=$1 name log start rc
	name=$(basename "$t")
	log=$log_dir/$name.log
	start=$(date +%s)
	# timeout puts the program in a process group of its own and kills the whole group
	if [[ "$t" == *.sh ]]; then
		timeout -k 10 "$limit" bash "$t" >"$log" 2>&1 </dev/null
	else
		timeout -k 10 "$limit" "$t" >"$log" 2>&1 </dev/null
	fi
	rc=$?
	# the CPU the program and the processes it waited for used (user + system, s): the
	# subshell's children's times (the builtin in this shell itself: in a pipe or $(...) it
	# would run in a new subshell, which has no children)
	local cpu
	times >"$log.times"
	cpu=$(tail -n 1 "$log.times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } printf "%d", s + 0.5 }')
	echo "$rc $(( $(date +%s) - start )) ${cpu:-0}" >"$log.rc"
}

# report PROG: counts its log, prints its result line; adds to the totals.
pass=0 fail=0 skip=0 prog_secs=0 cpu_secs=0
declare -A secs_of=() cpu_of=()
report() {
	local t=$1 name log rc secs p f s
	name=$(basename "$t")
	log=$log_dir/$name.log
	read -r rc secs cpu <"$log.rc"
	p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "FAIL $name: killed after the time limit of ${limit}s (status $rc)" >>"$log"
		f=$((f + 1))
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $name: exited with status $rc (log: $log)" >>"$log"
		f=1
	fi
	pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
	prog_secs=$((prog_secs + secs)) cpu_secs=$((cpu_secs + cpu))
	secs_of[$name]=$secs cpu_of[$name]=$cpu
	printf '%-32s %3d passed %3d failed %3d skipped  %3ds\n' "$name" "$p" "$f" "$s" "$secs"
}

t0=$(date +%s)
declare -A pid_of=() running_heavy=()
rm -f "$log_dir"/*.rc
while [ "${#queue[@]}" -gt 0 ] || [ "${#pid_of[@]}" -gt 0 ]; do
	# start what fits: the first queued program that may run now (a heavy one only when no
	# other heavy one runs)
	while [ "${#pid_of[@]}" -lt "$jobs" ] && [ "${#queue[@]}" -gt 0 ]; do
		pick=-1
		for i in "${!queue[@]}"; do
			n=$(basename "${queue[$i]}")
			if [[ "$HEAVY" != *" $n "* ]] || [ "${#running_heavy[@]}" -eq 0 ]; then
				pick=$i
				break
			fi
		done
		[ "$pick" -lt 0 ] && break
		t=${queue[$pick]}
		queue=("${queue[@]:0:$pick}" "${queue[@]:$((pick + 1))}")
		run_one "$t" &
		pid_of[$t]=$!
		n=$(basename "$t")
		[[ "$HEAVY" == *" $n "* ]] && running_heavy[$t]=1
	done
	wait -n 2>/dev/null
	for t in "${!pid_of[@]}"; do
		kill -0 "${pid_of[$t]}" 2>/dev/null && continue
		wait "${pid_of[$t]}" 2>/dev/null
		unset "pid_of[$t]" "running_heavy[$t]"
		report "$t"
	done
done
wall=$(( $(date +%s) - t0 ))

# the details in the order of the program list, then the times
for t in "${progs[@]}"; do
	name=$(basename "$t")
	log=$log_dir/$name.log
	grep -qE '^(FAIL|SKIP) ' "$log" || continue
	echo "$name:"
	grep -E '^(FAIL|SKIP) ' "$log" | sed 's/^/    /'
	if grep -q '^FAIL ' "$log"; then tail -n 20 "$log" | grep -vE '^(PASS|FAIL|SKIP) ' | sed 's/^/    | /'; fi
done
{
	[ -f "$durations" ] && awk -v keep="$(printf '%s ' "${!secs_of[@]}")" \
		'BEGIN { split(keep, k, " "); for (i in k) h[k[i]] = 1 } !($1 in h)' "$durations"
	for n in "${!secs_of[@]}"; do echo "$n ${secs_of[$n]}"; done
} | sort >"$durations.new" && mv "$durations.new" "$durations"
slow=$(for n in "${!secs_of[@]}"; do echo "${secs_of[$n]} $n"; done | sort -nr | head -n 3 |
	awk '{ printf "%s%s %ss", (NR > 1 ? ", " : ""), $2, $1 }')
for n in "${!cpu_of[@]}"; do echo "$n ${cpu_of[$n]} ${secs_of[$n]}"; done | sort -k2,2nr >"$log_dir/cpu"
hungry=$(for n in "${!cpu_of[@]}"; do echo "${cpu_of[$n]} $n"; done | sort -nr | head -n 3 |
	awk '{ printf "%s%s %ss", (NR > 1 ? ", " : ""), $2, $1 }')
echo "time: ${wall}s wall for ${#progs[@]} programs (${prog_secs}s of program time, $jobs at a time); slowest: $slow"
echo "cpu: ${cpu_secs}s user + system; most: $hungry"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
