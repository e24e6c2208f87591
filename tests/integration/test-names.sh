#!/usr/bin/env bash
# test-names.sh: the names stacks are shown with (agent/dwsym.c, README "Names"). Real servers
# under LD_PRELOAD at D9_CPU_PROFILE=999, checked through `d9-analyze flame` and `summary`.
#   - names-cxx: the C++ server (tests/servers/cxx-http.cc, a copy in a directory of its own)
#     burns 200 ms in d9test::Burner<d9test::Spin>::run(long); the agent symbolizes the sealed
#     segment, then the copy is deleted (names can only come from the Symbol records, which the
#     viewer reads too): the heaviest folded stack and the summary's hot spots read
#     d9test::Server::handle_burn(std::...) < d9test::Burner<d9test::Spin>::run(long), the inlined
#     d9test::Spin::step(unsigned long) on top, and no mangled _Z name anywhere.
#     names-no-false-line: there, _start (crt1.o, no DWARF, past a compile unit's last
#     range) reads without a file:line.
#   - names-cxx-analyzer: D9_SYMBOLIZE=0, binary in place: the analyzer demangles the same way.
#   - names-debuglink-dir, -debug-subdir, -debug-root, names-build-id: a stripped copy (no
#     .symtab, no DWARF) whose debug file (objcopy --only-keep-debug) is found by the agent by
#     .gnu_debuglink next to the binary, in its .debug/, under D9_DEBUG_DIR + its directory, and
#     by build id under D9_DEBUG_DIR/.build-id/; binary and debug file are deleted before
#     the trace is read: the names are the agent's.
#   - names-compressed-debug: the same by build id with the debug file's sections compressed
#     (as Debian's -dbgsym packages ship them): named the same, inline level included.
#     names-dwarf-limit: that with D9_SYMBOLIZE_MEMORY=0: the server is named from the debug
#     file's symbol table alone (handler and burner, no inlined Spin::step, no cxx-http.cc line),
#     the trace's summary says "recorder: symbols limited" naming the module (check's hint names
#     D9_SYMBOLIZE_MEMORY, not libdw's installation: libdw is there), and stderr stays
#     empty (it is said at info level).
#   - names-no-debug (the test can fail): the stripped copy without its debug file names nothing
#     of the server (cxx-http+0x...). Then on the same trace the analyzer finds the debug file
#     it is given afterwards by debuglink (names-analyzer-debuglink) and by build id under
#     D9_DEBUG_DIR (names-analyzer-build-id).
#   - names-fde: there, each unnamed function is named after its .eh_frame entry's start
#     (cxx-http@0xSTART): every such start is a function's in the unstripped binary, and the
#     heaviest stack ends in Burner<Spin>::run; a sample in a PLT stub reads cxx-http@plt, never
#     the start of the .plt section (which is no function's).
#   - names-wrong-debug: a debug file of another program under the debuglink's name is refused
#     (build id): no name of that program shows, nothing of the server is named.
#   - names-agent-frames: st-http's /file?kb=1024 (4 blocking read() calls of 1 MiB, each past
#     10 us on any machine) 100 times (400 MiB copied: tens of 999 Hz samples in read() even
#     on a machine a few times faster) with D9_BLOCKING_THRESHOLD=10us, so the agent records (and
#     unwinds) inside its read() interposer while samples are taken: no folded stack shows the
#     agent's own functions or sources (libc-block.c, record, d9__*, libunwind), and the
#     program's stacks end in a frame named just `read` under handle_file.
#   - names-agent-offcpu: off-CPU samples (D9_SCHED_EVENTS=1) of st-http's /block (a blocking
#     usleep): every off-CPU hot stack of the sleep (through handle_block and nanosleep) has `usleep` (the
#     interposer, by its symbol alone) right above handle_block, and no agent source or d9__
#     name anywhere. SKIP when the machine gives no off-CPU sample.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"
pl_setup names
CXX_HTTP=$PL_ROOT/build/tests/cxx-http
if [ ! -x "$CXX_HTTP" ]; then
	pl_fail names "$CXX_HTTP is not built (make all)"
	exit 0
fi
for b in objcopy strip readelf; do
	if ! command -v "$b" >/dev/null; then
		pl_fail names "$b is not installed (make deps: binutils)"
		exit 0
	fi
done

BURNER='d9test::Burner<d9test::Spin>::run(long)'
HANDLER='d9test::Server::handle_burn(std::'

# burn_sampled TRACE_DIR: the compressed (so symbolized) segments hold at least 50 on-CPU
# samples (the 200 ms burn gives ~200 at 999 Hz; a loaded machine's writer may fall behind and
# lose some from the perf ring, counted: the sample rate is test-preload-profile's to judge, the
# names need only enough for the burner to be the heaviest stack). The segment sealed at exit is left out: the exit gives the nice-19 compressor 2 s,
# which a loaded machine may not honour, and this test is about names, not about the exit.
burn_sampled() {
	"$PL_ANALYZE" summary --json "$1"/*.bin.gz 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if json.load(sys.stdin).get("cpu_samples", {}).get("on", 0) >= 50 else 1)' 2>/dev/null
}

# burn_state TRACE_DIR: what a failed burn_sampled found, for its message: the segment files by
# kind, and the CPU samples and drops of all of them
burn_state() {
	local gz bin act
	gz=$(compgen -G "$1/*.bin.gz" | wc -l) bin=$(compgen -G "$1/*.bin" | wc -l)
	act=$(compgen -G "$1/*.active" | wc -l)
	printf '%s .bin.gz, %s .bin, %s .active; all segments: ' "$gz" "$bin" "$act"
	"$PL_ANALYZE" summary --json "$1" 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("%s on-CPU samples, drops %s" % (s.get("cpu_samples", {}).get("on"), s.get("drops")))' 2>&1
}

# burn NAME DIR BINARY [VAR=value ...]: runs BINARY under the agent (trace in DIR/trace), one
# /burn?ms=200 and /quit; waits for the compressor to finish the segments. 1 (FAIL said) when
# anything goes wrong; 1 (SKIP said) when perf_event_open(cpu-clock) failed here (denied: the
# ctimer gives at most CONFIG_HZ samples a second, 50 at 250 Hz in the burn; unavailable: none),
# for the 50 samples wanted are then out of reach.
burn() {
	local name=$1 dir=$2 bin=$3
	shift 3
	if ! pl_start "$dir" "$bin" D9_CPU_PROFILE=999 D9_ROTATION_PERIOD=1s D9_COMPRESS=1 "$@" --; then
		pl_fail "$name" "$PL_ERR"
		return 1
	fi
	pl_get "/burn?ms=200"
	if [ "$CODE" != 200 ] || [ "$BODY" != "burn ms=200" ]; then
		pl_fail "$name" "/burn: status $CODE body '${BODY:0:100}'"
		return 1
	fi
	local why
	if why=$(grep -m1 'perf_event_open(cpu-clock)' "$dir/stderr"); then
		pl_skip "$name" "perf sampling is unavailable here: $why"
		pl_quit
		return 1
	fi
	# the burn's samples are in sealed, compressed segments before the exit (segments seal
	# every second)
	if ! d9_wait_for 60 burn_sampled "$dir/trace"; then
		pl_fail "$name" "fewer than 50 CPU samples in compressed segments within $((60 * D9_SLOW)) s ($(burn_state "$dir/trace"))"
		return 1
	fi
	pl_quit
	if [ "$SRC" != 0 ]; then
		pl_fail "$name" "exit status $SRC (stderr: $(head -c 300 "$dir/stderr"))"
		return 1
	fi
	if ! d9_wait_settled "$dir/trace"; then
		pl_fail "$name" "$D9_SETTLE_ERR"
		return 1
	fi
}

# server_frames SEGMENT: a Stack of SEGMENT has a frame in cxx-http (a Module whose path ends
# in /cxx-http), which the agent can name.
server_frames() {
	"$PL_ANALYZE" dump "$1" 2>/dev/null | python3 -c '
import json, sys
strings, mods, frames = {}, [], []
for line in sys.stdin:
    r = json.loads(line)
    k = r.get("kind")
    if k == "String":
        strings[r["id"]] = r["value"]
    elif k == "Module":
        mods.append(r)
    elif k == "Stack":
        frames += r.get("frames", [])
ranges = [(m["start"], m["end"]) for m in mods if strings.get(m["path"], "").endswith("/cxx-http")]
sys.exit(0 if any(a <= f < b for f in frames for a, b in ranges) else 1)'
}

# by_count: folded stacks sorted by their count, the last field (names hold spaces)
by_count() { awk '{print $NF "\t" $0}' | sort -n | cut -f2-; }

# analyze DIR [VAR=value ...]: flame (heaviest stack last) and summary of DIR/trace's
# compressed segments (see burn_sampled) into DIR/flame, DIR/summary, DIR/summary.json.
analyze() {
	local dir=$1
	shift
	env "$@" "$PL_ANALYZE" flame "$dir"/trace/*.bin.gz 2>"$dir/an.err" | by_count >"$dir/flame"
	env "$@" "$PL_ANALYZE" summary "$dir"/trace/*.bin.gz >"$dir/summary" 2>>"$dir/an.err"
	env "$@" "$PL_ANALYZE" summary --json "$dir"/trace/*.bin.gz >"$dir/summary.json" 2>>"$dir/an.err"
}

# demangled NAME DIR: the server's names are demangled in DIR's flame and summary.
demangled() {
	local name=$1 dir=$2 top bad=()
	top=$(tail -n 1 "$dir/flame")
	case "$top" in
	*"$HANDLER"*";$BURNER"*) ;;
	*) bad+=("heaviest stack has not ...;$HANDLER...;$BURNER: '${top:0:400}'") ;;
	esac
	# the burner's loop is Spin::step, inlined: most of the burner's weight ends in it (not only
	# the heaviest stack: on a loaded machine the writer may lose samples from the perf ring, and
	# with few left the loop's own lines, its CPU-clock reads, can outweigh any one line of step)
	local step
	step=$(python3 - "$dir/flame" "$BURNER" <<'PYEOF'
import sys
burner, on_top = 0, 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip("\n").rpartition(" ")
    if ";" + sys.argv[2] not in stack or not n.isdigit():
        continue
    burner += int(n)
    leaf = stack.rsplit(";", 1)[-1]
    if leaf.startswith("d9test::Spin::step(unsigned long) ("):
        on_top += int(n)
print(on_top, burner)
PYEOF
)
	local on=${step% *} all=${step#* }
	if [ -z "$step" ] || [ "$all" -eq 0 ] || [ $((on * 2)) -lt "$all" ]; then
		bad+=("inlined d9test::Spin::step(unsigned long) (file:line) on top of ${on:-?} of the burner's ${all:-?} (the flame's weights), want half or more; heaviest stack: '${top:0:400}'")
	fi
	grep -q "$BURNER" "$dir/summary" || bad+=("summary names no $BURNER")
	python3 - "$dir/summary.json" "$BURNER" <<'PYEOF' || bad+=("summary --json: cpu_hotspots lack $BURNER")
import json, sys
s = json.load(open(sys.argv[1]))
names = [h["function"] for h in s.get("cpu_hotspots", [])]
sys.exit(0 if any(n.startswith(sys.argv[2]) for n in names) else 1)
PYEOF
	if grep -qE '(^|;| )_Z' "$dir/flame" "$dir/summary"; then
		bad+=("a mangled name is left: $(grep -ohE '(^|;| )_Z[^ ;]*' "$dir/flame" "$dir/summary" | head -n 1)")
	fi
	if [ "${#bad[@]}" -gt 0 ]; then
		pl_fail "$name" "${bad[*]}"
	else
		pl_pass "$name" "$(grep -c . "$dir/flame") stacks, heaviest ends in ${top##*;}; Spin::step on top of $((on * 100 / all))% of the burner's samples"
	fi
}

# unnamed NAME DIR WHY: nothing of the server is named in DIR's flame (its frames read
# cxx-http+0x..., or cxx-http@0x... for an unnamed function found by its .eh_frame entry), and
# no name of st-http shows (a wrong debug file would give those).
unnamed() {
	local name=$1 dir=$2
	if grep -qE 'd9test::|handle_block|handle_burn|serve_conn|burn_cpu' "$dir/flame"; then
		pl_fail "$name" "$3, yet the flame names it: $(grep -ohE '[^;]*(d9test::|handle_|serve_conn|burn_cpu)[^;]*' "$dir/flame" | head -n 1)"
	elif ! grep -qE 'cxx-http[+@]0x' "$dir/flame"; then
		pl_fail "$name" "no cxx-http+0x or cxx-http@0x frame in the flame: $(tail -n 1 "$dir/flame" | head -c 300)"
	else
		pl_pass "$name" "$3: $(grep -oE 'cxx-http[+@]0x' "$dir/flame" | sort -u | paste -sd' ')... frames"
	fi
}

# ---- the C++ server, unstripped ------------------------------------------------------------------
d=$T/cxx
mkdir -p "$d/bin"
cp "$CXX_HTTP" "$d/bin/cxx-http"
if burn names-cxx "$d" "$d/bin/cxx-http"; then
	rm -f "$d/bin/cxx-http" # read elsewhere: only the Symbol records can name it
	unsym=()
	for f in "$d"/trace/*.bin.gz; do
		# a segment with a frame in the server has an address to name (one whose stacks
		# lie only in the loader or libc's internals, say one sample at start-up, has none
		# without the machine's debug files; one without stacks, none at all); its Module
		# and Stack records are counted for a failure's message
		server_frames "$f" && ! d9_symbolized "$f" &&
			unsym+=("$(basename "$f") ($("$PL_ANALYZE" dump "$f" 2>/dev/null | grep -oE '"kind":"(Module|Stack|RecorderState)"' | sort | uniq -c | tr -s ' \n' ' '))")
	done
	if [ "${#unsym[@]}" -gt 0 ]; then
		pl_fail names-cxx "compressed segments with stacks but no Symbol records: ${unsym[*]} (the agent said: $(grep -i 'symbol\|libdw' "$d/stderr" | head -c 300))"
	else
		analyze "$d"
		demangled names-cxx "$d"
		# crt1.o's _start has no DWARF; libdw's unit lookup would hand it the line a
		# unit's range before it ends on (basic_string.h:795 here): a false line
		if grep -qE '(^|;)_start \(' "$d/flame"; then
			pl_fail names-no-false-line "_start has a source line: $(grep -oE '(^|;)_start \([^)]*\)' "$d/flame" | head -n 1)"
		elif ! grep -qE '(^|;)_start;' "$d/flame"; then
			pl_fail names-no-false-line "no _start frame in the flame: $(tail -n 1 "$d/flame" | head -c 300)"
		else
			pl_pass names-no-false-line "_start, outside every compile unit's ranges, is named without a line"
		fi
	fi
fi

d=$T/cxx-an
mkdir -p "$d/bin"
cp "$CXX_HTTP" "$d/bin/cxx-http"
if burn names-cxx-analyzer "$d" "$d/bin/cxx-http" D9_SYMBOLIZE=0; then
	analyze "$d"
	demangled names-cxx-analyzer "$d"
fi

# ---- separate debug files --------------------------------------------------------------------
# stripped DIR [debuglink]: DIR/cxx-http stripped of .symtab and DWARF, DIR/cxx-http.debug its
# debug file; with "debuglink", the binary's .gnu_debuglink names cxx-http.debug.
stripped() {
	mkdir -p "$1"
	cp "$CXX_HTTP" "$1/cxx-http.full"
	objcopy --only-keep-debug "$1/cxx-http.full" "$1/cxx-http.debug" &&
		strip --strip-all -o "$1/cxx-http" "$1/cxx-http.full" || return 1
	rm -f "$1/cxx-http.full"
	if [ "${2:-}" = debuglink ]; then
		(cd "$1" && objcopy --add-gnu-debuglink=cxx-http.debug cxx-http) || return 1
	fi
}
build_id=$(readelf -n "$CXX_HTTP" | sed -n 's/^ *Build ID: *//p')
if [ "${#build_id}" -lt 4 ]; then
	pl_fail names-build-id "cxx-http has no build id (readelf -n)"
	build_id=""
fi

# debuglink next to the binary
d=$T/dla
if stripped "$d/bin" debuglink; then
	if burn names-debuglink-dir "$d" "$d/bin/cxx-http"; then
		rm -rf "$d/bin"
		analyze "$d"
		demangled names-debuglink-dir "$d"
	fi
fi
# debuglink in .debug/
d=$T/dlb
if stripped "$d/bin" debuglink && mkdir -p "$d/bin/.debug" && mv "$d/bin/cxx-http.debug" "$d/bin/.debug/"; then
	if burn names-debug-subdir "$d" "$d/bin/cxx-http"; then
		rm -rf "$d/bin"
		analyze "$d"
		demangled names-debug-subdir "$d"
	fi
fi
# debuglink under D9_DEBUG_DIR + the binary's directory
d=$T/dlc
if stripped "$d/bin" debuglink && mkdir -p "$d/root$d/bin" && mv "$d/bin/cxx-http.debug" "$d/root$d/bin/"; then
	if burn names-debug-root "$d" "$d/bin/cxx-http" D9_DEBUG_DIR="$d/root"; then
		rm -rf "$d/bin" "$d/root"
		analyze "$d"
		demangled names-debug-root "$d"
	fi
fi
# by build id under D9_DEBUG_DIR/.build-id (no debuglink)
d=$T/bid
if [ -n "$build_id" ] && stripped "$d/bin" && mkdir -p "$d/root/.build-id/${build_id:0:2}" &&
	mv "$d/bin/cxx-http.debug" "$d/root/.build-id/${build_id:0:2}/${build_id:2}.debug"; then
	if burn names-build-id "$d" "$d/bin/cxx-http" D9_DEBUG_DIR="$d/root"; then
		rm -rf "$d/bin" "$d/root"
		analyze "$d"
		demangled names-build-id "$d"
	fi
fi

# by build id, the debug file's sections compressed (as Debian's -dbgsym packages ship them): the
# agent inflates its DWARF within D9_SYMBOLIZE_MEMORY (the default); with the limit at 0 it names
# the server from the debug file's symbol table alone (no inline level, no file:line) and says so
# in the trace
if [ -n "$build_id" ]; then
	for lim in default 0; do
		d=$T/zbid-$lim
		if stripped "$d/bin" && mkdir -p "$d/root/.build-id/${build_id:0:2}" &&
			objcopy --compress-debug-sections=zlib "$d/bin/cxx-http.debug" \
				"$d/root/.build-id/${build_id:0:2}/${build_id:2}.debug" &&
			rm "$d/bin/cxx-http.debug"; then
			if [ "$lim" = default ]; then
				burn names-compressed-debug "$d" "$d/bin/cxx-http" D9_DEBUG_DIR="$d/root" &&
					rm -rf "$d/bin" "$d/root" && analyze "$d" && demangled names-compressed-debug "$d"
				continue
			fi
			burn names-dwarf-limit "$d" "$d/bin/cxx-http" D9_DEBUG_DIR="$d/root" D9_SYMBOLIZE_MEMORY=0 ||
				continue
			rm -rf "$d/bin" "$d/root"
			analyze "$d"
			top=$(tail -n 1 "$d/flame")
			if [[ "$top" != *"$HANDLER"*";$BURNER "* ]]; then
				pl_fail names-dwarf-limit "heaviest stack does not end in ...;$HANDLER...;$BURNER: '${top:0:400}'"
			elif grep -qE 'd9test::Spin::step|\(cxx-http\.cc:' "$d/flame"; then
				pl_fail names-dwarf-limit "an inline level or a source line of the server's DWARF: $(grep -oE '[^;]*(Spin::step|cxx-http\.cc:)[^;]*' "$d/flame" | head -n 1)"
			elif ! "$PL_ANALYZE" summary "$d/trace" 2>/dev/null | grep -q 'recorder: symbols limited (1 module(s) named without DWARF (D9_SYMBOLIZE_MEMORY), the last .*cxx-http)'; then
				# the whole directory: the RecorderState goes into the segment being
				# written when the compressor named the burn's, maybe the one sealed at exit
				pl_fail names-dwarf-limit "the summary does not say the symbols are limited: $("$PL_ANALYZE" summary "$d/trace" 2>&1 | grep recorder | head -c 300)"
			elif ! "$PL_ANALYZE" check --json "$d/trace" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
h = [f.get("hint", "") for f in d.get("findings", []) if f.get("kind") == "recorder" and f.get("numbers", {}).get("feature") == "symbols"]
sys.exit(0 if h and all("D9_SYMBOLIZE_MEMORY" in x for x in h) else 1)'; then
				# libdw was there: the way back is the memory cap, not "install libdw"
				pl_fail names-dwarf-limit "check's hint for the limited symbols does not name D9_SYMBOLIZE_MEMORY: $("$PL_ANALYZE" check "$d/trace" 2>&1 | grep -A3 'symbols' | grep hint | head -c 300)"
			elif [ -s "$d/stderr" ]; then
				pl_fail names-dwarf-limit "the agent printed (an info line should not show): $(head -c 300 "$d/stderr")"
			else
				pl_pass names-dwarf-limit "heaviest ends in ${top##*;}; no inline level or source line; summary says so"
			fi
		fi
	done
fi

# fde_named NAME DIR FULL: the unnamed functions of DIR's flame (cxx-http@0xSTART, named by their
# .eh_frame entry) each start where a function of the unstripped binary FULL starts, and the
# heaviest stack ends in the burner's loop (Burner<Spin>::run, Spin::step inlined into it).
fde_named() {
	local name=$1 dir=$2 full=$3 a bad=() top
	for a in $(grep -oE 'cxx-http@0x[0-9a-f]+' "$dir/flame" | sort -u | sed 's/.*@0x//'); do
		nm -C "$full" | grep -qiE "^0*$a [tTwW] " || bad+=("0x$a")
	done
	top=$(sort -t' ' -k2 -n "$dir/flame" | awk '{ print $NF " " $0 }' | sort -n | tail -n 1)
	top=${top% *}
	a=${top##*;}
	a=${a#cxx-http@0x}
	if [ ${#bad[@]} -gt 0 ]; then
		pl_fail "$name" "no function of the binary starts at ${bad[*]}"
	elif ! nm -C "$full" | grep -iE "^0*$a [tTwW] " | grep -q 'Burner<d9test::Spin>::run'; then
		pl_fail "$name" "the heaviest stack ends in 0x$a: $(nm -C "$full" | grep -iE "^0*$a " | head -n 1), not Burner<Spin>::run"
	else
		pl_pass "$name" "$(grep -oE 'cxx-http@0x[0-9a-f]+' "$dir/flame" | sort -u | wc -l) unnamed functions, each at a function start; the heaviest is Burner<Spin>::run"
	fi
}

# no debug file while it runs; the analyzer then finds the one it is given
d=$T/none
if stripped "$d/bin" debuglink && mv "$d/bin/cxx-http.debug" "$d/cxx-http.debug.kept"; then
	if burn names-no-debug "$d" "$d/bin/cxx-http"; then
		analyze "$d"
		unnamed names-no-debug "$d" "no debug file"
		fde_named names-fde "$d" "$CXX_HTTP"
		cp "$d/cxx-http.debug.kept" "$d/bin/cxx-http.debug"
		analyze "$d"
		demangled names-analyzer-debuglink "$d"
		rm -f "$d/bin/cxx-http.debug"
		if [ -n "$build_id" ]; then
			mkdir -p "$d/root/.build-id/${build_id:0:2}"
			cp "$d/cxx-http.debug.kept" "$d/root/.build-id/${build_id:0:2}/${build_id:2}.debug"
			analyze "$d" D9_DEBUG_DIR="$d/root"
			demangled names-analyzer-build-id "$d"
		fi
	fi
fi

# a debug file of another program (st-http) under the debuglink's name
d=$T/wrong
if stripped "$d/bin" debuglink && objcopy --only-keep-debug "$ST_HTTP" "$d/bin/cxx-http.debug"; then
	if burn names-wrong-debug "$d" "$d/bin/cxx-http"; then
		analyze "$d"
		unnamed names-wrong-debug "$d" "st-http's debug file refused"
	fi
fi

# ---- the agent's interposers in the program's stacks ----------------------------------------------
p=names-agent-frames
reqs=()
for i in $(seq 100); do reqs+=("/file?kb=1024" "file bytes=4194304 reads=4"); done
if pl_run $p "$ST_HTTP" D9_CPU_PROFILE=999 D9_BLOCKING_THRESHOLD=10us -- "${reqs[@]}"; then
	if ! d9_wait_settled "$SDIR/trace"; then
		pl_fail $p "$D9_SETTLE_ERR"
	else
		"$PL_ANALYZE" flame "$SDIR/trace" 2>"$SDIR/an.err" | by_count >"$SDIR/flame"
		agent=$(grep -oE '[^;]*(libc-block\.c|libc-wait\.c|rt-st\.c|d9__|_ULx86_64|unw_backtrace|(^|;)record( |;))[^;]*' "$SDIR/flame" | head -n 1)
		nread=$(grep -E 'handle_file[^;]*;read( [0-9]+$|;)' "$SDIR/flame" | awk '{n += $NF} END {print n + 0}')
		if [ -n "$agent" ]; then
			pl_fail $p "an agent frame shows: '${agent:0:200}'"
		elif [ "$nread" -lt 1 ]; then
			pl_fail $p "no sample with handle_file;read (of $(awk '{n += $NF} END {print n + 0}' "$SDIR/flame") samples): $(grep handle_file "$SDIR/flame" | tail -n 1 | head -c 400)"
		else
			pl_pass $p "$nread samples end in handle_file;read..., no agent frame"
		fi
	fi
fi

# off-CPU samples of a blocking usleep() in st-http's /block: the switch happens inside the
# agent's usleep interposer, which the stack shows as `usleep` right above handle_block
p=names-agent-offcpu
if pl_run $p "$ST_HTTP" D9_SCHED_EVENTS=1 D9_CPU_PROFILE=99 -- "/block?ms=30" "block ms=30" \
	"/block?ms=30" "block ms=30" "/block?ms=30" "block ms=30"; then
	if ! d9_wait_settled "$SDIR/trace"; then
		pl_fail $p "$D9_SETTLE_ERR"
	else
		"$PL_ANALYZE" summary --json "$SDIR/trace" >"$SDIR/summary.json" 2>"$SDIR/an.err"
		python3 - "$SDIR/summary.json" "$SDIR/stderr" <<'PYEOF'
import json, re, sys
s = json.load(open(sys.argv[1]))
stacks = [h["stack"] for p in s.get("long_polls", []) for h in p.get("hot_stacks", [])
          if h.get("source") == "off"]
if not s.get("cpu_samples", {}).get("off"):
    err = open(sys.argv[2]).read()
    print("SKIP names-agent-offcpu: no off-CPU sample (%s)" % (err.strip()[:200] or "?"))
    sys.exit(0)
# the sleep's stacks (a switch-out in nanosleep): a preemption elsewhere in the handler (its
# clock reads, its schedstat read) also makes an off-CPU sample through handle_block, with
# another frame above it
blk = [st for st in stacks if any(f.startswith("handle_block") for f in st) and
       any("nanosleep" in f for f in st)]
agent = [f for st in stacks for f in st if re.search(r"libc-block\.c|d9__|^record\b", f)]
def above(st):
    i = next(i for i, f in enumerate(st) if f.startswith("handle_block"))
    return st[i - 1] if i > 0 else None
if agent:
    print("FAIL names-agent-offcpu: an agent frame shows: %r" % agent[0])
elif not blk:
    print("FAIL names-agent-offcpu: no off-CPU hot stack through handle_block's sleep: %r" % stacks[:3])
elif not all(above(st) == "usleep" for st in blk):
    print("FAIL names-agent-offcpu: the frame above handle_block is not `usleep`: %r"
          % next(st for st in blk if above(st) != "usleep"))
else:
    print("PASS names-agent-offcpu: %d off-CPU stacks through handle_block, each with usleep "
          "above it (innermost: %s)" % (len(blk), blk[0][0]))
PYEOF
	fi
fi
