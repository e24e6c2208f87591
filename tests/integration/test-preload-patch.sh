#!/usr/bin/env bash
# test-preload-patch.sh: preload/patch.c, the machinery the adapters of static runtimes use:
# d9__exe_symbol finds functions of the executable that export no dynamic symbol, d9__patch
# redirects them to a hook with a relocating trampoline, or refuses with one message and leaves
# the code as it was. build/tests/patch-preload.so (tests/integration/patch-preload.c, the test's
# own preload library; the agent has no test hook) patches build/tests/patch-target
# (patch-target.c: functions of known prologue shapes in assembly, and C) before main; its
# hooks add 1000000 to what the original returns, so the program's output tells which calls went
# through a hook and that *orig still computes the original's value. Each case compares the
# program's output under the library with its output alone (the same binary, no preload):
#   - patch-pie, patch-nopie: every shape the 5-byte jump allows is patched (endbr64 + push rbp +
#     sub rsp, a rip-relative load, a jcc and a call among the first bytes, a tail jmp, gcc's C);
#     too short, a loop back into the first bytes, a cold part jumping back, a jump table with an
#     entry into the first bytes (gcc's own switch tables, PIC and absolute, pass), wrong expected
#     bytes are refused and their code is byte for byte what it was; a second patch of the same
#     function and a patch while a second thread runs are refused.
#   - patch-far-pie, patch-far-nopie: with every page within 2 GiB taken (PROT_NONE reservations
#     by the test library), the 14-byte absolute jump: a call and gcc's prologue are moved with
#     absolute forms, a rip-relative load that cannot reach from far is refused.
#   - patch-stripped: `strip --strip-all`: nothing found (NULL), nothing patched, same output,
#     and libdw not even loaded (nothing in the file says a debug file exists).
#   - patch-buildid: stripped, its debug file under D9_DEBUG_DIR/.build-id/xx/yyyy.debug: same.
#   - patch-debuglink: stripped, with a separate debug file (.gnu_debuglink): found by the debug
#     file's symbols at nm's addresses, patched as the unstripped program.
#   - patch-dwarf-only: no .symtab, DWARF kept: the C functions found by their DWARF entries.
#   - patch-messages: one "d9[pid]: ..." line per attempt, naming the function and the reason.
#   - patch-agent-no-capstone: libd9agent.so does not link libcapstone (it is loaded by dlopen
#     on the first patch only).
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

TARGET=$PL_ROOT/build/tests/patch-target
TARGET_NOPIE=$PL_ROOT/build/tests/patch-target-nopie
PRELOAD=$PL_ROOT/build/tests/patch-preload.so
for b in "$TARGET" "$TARGET_NOPIE" "$PRELOAD" "$PL_LIB"; do
	if [ ! -e "$b" ]; then
		pl_fail preload-patch "$b is not built (make all)"
		exit 0
	fi
done
if ! command -v python3 >/dev/null; then
	pl_fail preload-patch "python3 is not installed (make deps)"
	exit 0
fi
pl_env preload-patch
if [ "$(uname -m)" != x86_64 ]; then
	pl_skip preload-patch "patching is implemented for x86-64 only (this is $(uname -m))"
	exit 0
fi

# run_case NAME BINARY [VAR=value ...]: the binary alone ($T/NAME.plain), then under the test
# library ($T/NAME.out, $T/NAME.err); 60 s each at most. Returns 1 (after a FAIL) when either
# run failed.
run_case() {
	local name=$1 bin=$2 rc
	shift 2
	timeout -s KILL 60 "$bin" >"$T/$name.plain" 2>"$T/$name.plain.err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		pl_fail "$name" "$(basename "$bin") alone exited $rc: $(head -c 300 "$T/$name.plain.err")"
		return 1
	fi
	env "$@" LD_PRELOAD="$PRELOAD" timeout -s KILL 60 "$bin" >"$T/$name.out" 2>"$T/$name.err"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		pl_fail "$name" "$(basename "$bin") under the test library exited $rc: $(head -c 600 "$T/$name.err")"
		return 1
	fi
}

# check NAME NM_BINARY 'fn=rc ...' 'fn ...' loaded|absent: the results of run_case NAME. rc is the return code
# d9__patch must give (nosym: d9__exe_symbol must find nothing, any: either way); the second list
# names the functions d9__exe_symbol must find (at the address nm shows in NM_BINARY); the others
# it is asked for must be "none". Then, for every function: a patched one's every call went
# through the hook (original + 1000000) and a refused one's through the original (same value as
# the program alone) with its bytes untouched; c_func calls c_static (hooked or not); the
# second patch of fp_func and the patch with a second thread (when found) were refused; libdw
# was loaded (stripped programs with DWARF or a debug file) or not (all others: it costs).
check() {
	python3 - "$T/$1" "$2" "$3" "$4" "$1" "$5" <<'EOF'
import re, subprocess, sys
base, nm_bin, want_rc, want_sym, name, want_dw = sys.argv[1:7]
out = open(base + ".out").read().splitlines()
plain = open(base + ".plain").read().splitlines()
err = open(base + ".err").read().splitlines()
bad = []
nm = {}
for l in subprocess.run(["nm", nm_bin], capture_output=True, text=True).stdout.splitlines():
    p = l.split()
    if len(p) == 3:
        nm[p[2]] = int(p[0], 16)
rc = {}
syms = {}
untouched = {}
for l in err:
    m = re.match(r"patch-test: patch (\S+) (?:rc=(-?\d+)|(nosym))$", l)
    if m:
        rc[m.group(1)] = "nosym" if m.group(3) else int(m.group(2))
    m = re.match(r"patch-test: sym (\S+) (0x[0-9a-f]+|none)$", l)
    if m:
        syms[m.group(1)] = None if m.group(2) == "none" else int(m.group(2), 16)
    m = re.match(r"patch-test: untouched (\S+) (yes|no)$", l)
    if m:
        untouched[m.group(1)] = m.group(2) == "yes"
for spec in want_rc.split():
    fn, want = spec.split("=")
    got = rc.get(fn, "missing")
    if want == "any":
        continue
    if str(got) != want:
        bad.append("d9__patch(%s) gave %s, want %s" % (fn, got, want))
found = set(want_sym.split())
for fn, a in syms.items():
    if fn in found:
        if a is None:
            bad.append("d9__exe_symbol(%s) found nothing" % fn)
        elif nm.get(fn) != a:
            bad.append("d9__exe_symbol(%s) at 0x%x, nm says %s" % (fn, a, hex(nm[fn]) if fn in nm else "nothing"))
    elif a is not None:
        bad.append("d9__exe_symbol(%s) found 0x%x, want NULL" % (fn, a))
if len(syms) != 6:
    bad.append("%d symbol lines, want 6" % len(syms))
def results(lines):
    r = []
    for l in lines:
        m = re.match(r"(\w+)\((-?\d+)\) = (-?\d+)$", l)
        if m:
            r.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return r
got, ref = results(out), results(plain)
if len(got) != len(ref) or len(ref) < 10:
    bad.append("%d results under the library, %d alone" % (len(got), len(ref)))
hooked = {fn for fn, r in rc.items() if r == 0}
for (fn, arg, v), (fn2, arg2, v0) in zip(got, ref):
    d = 1000000 if fn in hooked or (fn == "c_func" and "c_static" in hooked) else 0
    if (fn, arg) != (fn2, arg2) or v != v0 + d:
        bad.append("%s(%d) = %d, want %d (%s)" % (fn, arg, v, v0 + d, "hooked" if d else "original"))
for fn, r in rc.items():
    if r not in (0, "nosym") and not untouched.get(fn):
        bad.append("%s refused (%s) but its code changed" % (fn, r))
if rc.get("fp_func") == 0 and "patch-test: again rc=-17" not in err:
    bad.append("a second patch of fp_func was not refused with -EEXIST")
# helper_func (assembly) is found where fp_func is
if rc.get("fp_func") not in (None, "nosym") and "patch-test: thread rc=-16" not in err:
    bad.append("a patch with a second thread running was not refused with -EBUSY")
if "patch-test: libdw " + want_dw not in err:
    bad.append("libdw not %s after the lookups" % want_dw)
if bad:
    print("FAIL %s: %s" % (name, "; ".join(bad[:6])))
else:
    print("PASS %s: %d patched, %d refused, %d not found" % (name, len(hooked),
        sum(1 for r in rc.values() if r not in (0, "nosym")), sum(1 for r in rc.values() if r == "nosym")))
EOF
}

ALL_SYMS="fp_func c_func c_static cold_func rip_func"
NEAR_RC="fp_func=0 rip_func=0 rip_long_func=0 jcc_func=0 call_func=0 tail_func=0 short_func=-34
	loop_func=-84 cold_func=-84 expect_func=-84 c_static=0 jt_func=-84 c_switch=0"
# far: only what is 14 bytes long, has no rip-relative operand among them and no branch into them
FAR_RC="fp_func=0 rip_func=-34 rip_long_func=-34 jcc_func=-84 call_func=0 tail_func=-34
	short_func=-34 loop_func=-34 cold_func=-84 expect_func=-84 c_static=any jt_func=-84
	c_switch=-34"

# capstone: without it every patch is refused (said once each); the cases below need it
if ! run_case patch-pie "$TARGET"; then
	exit 0
fi
if grep -q 'libcapstone.so.4 not found' "$T/patch-pie.err"; then
	pl_skip patch-pie "libcapstone.so.4 is not installed (make deps): every patch is refused"
	exit 0
fi
check patch-pie "$TARGET" "$NEAR_RC" "$ALL_SYMS" absent
run_case patch-nopie "$TARGET_NOPIE" && check patch-nopie "$TARGET_NOPIE" "$NEAR_RC" "$ALL_SYMS" absent
run_case patch-far-pie "$TARGET" PATCH_TEST_FAR=1 &&
	check patch-far-pie "$TARGET" "$FAR_RC" "$ALL_SYMS" absent
run_case patch-far-nopie "$TARGET_NOPIE" PATCH_TEST_FAR=1 &&
	check patch-far-nopie "$TARGET_NOPIE" "$FAR_RC" "$ALL_SYMS" absent

# ---- stripped copies (binutils)
if ! command -v strip >/dev/null || ! command -v objcopy >/dev/null || ! command -v nm >/dev/null; then
	pl_skip patch-stripped "no strip/objcopy/nm (binutils)"
else
	S=$T/stripped
	mkdir -p "$S"
	cp "$TARGET" "$S/full"
	NOSYM_RC="fp_func=nosym rip_func=nosym rip_long_func=nosym jcc_func=nosym call_func=nosym
		tail_func=nosym short_func=nosym loop_func=nosym cold_func=nosym expect_func=nosym
		c_static=nosym jt_func=nosym c_switch=nosym"
	if strip --strip-all -o "$S/stripped" "$S/full" 2>"$T/strip.err"; then
		run_case patch-stripped "$S/stripped" && check patch-stripped "$S/full" "$NOSYM_RC" "" absent
	else
		pl_fail patch-stripped "strip: $(head -c 300 "$T/strip.err")"
	fi
	# the debug file beside the program, named by its .gnu_debuglink (d9's in-host search)
	if objcopy --only-keep-debug "$S/full" "$S/withdbg.debug" 2>"$T/strip.err" &&
		strip --strip-all -o "$S/withdbg" "$S/full" 2>>"$T/strip.err" &&
		(cd "$S" && objcopy --add-gnu-debuglink=withdbg.debug withdbg) 2>>"$T/strip.err"; then
		run_case patch-debuglink "$S/withdbg" && check patch-debuglink "$S/full" "$NEAR_RC" "$ALL_SYMS" loaded
	else
		pl_fail patch-debuglink "objcopy/strip: $(head -c 300 "$T/strip.err")"
	fi
	# the debug file where Debian's -dbgsym packages put it: named by the build id under
	# /usr/lib/debug, here D9_DEBUG_DIR
	bid=$(readelf -n "$S/full" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
	if [ -z "$bid" ]; then
		pl_skip patch-buildid "the test program has no build id (linker without --build-id)"
	else
		mkdir -p "$S/dbg/.build-id/${bid:0:2}"
		cp "$S/withdbg.debug" "$S/dbg/.build-id/${bid:0:2}/${bid:2}.debug"
		run_case patch-buildid "$S/stripped" D9_DEBUG_DIR="$S/dbg" &&
			check patch-buildid "$S/full" "$NEAR_RC" "$ALL_SYMS" loaded
	fi
	# no symbol table, DWARF kept: only C functions have DWARF entries (not the assembly ones)
	if strip --strip-all --keep-section='.debug_*' -o "$S/dwonly" "$S/full" 2>"$T/strip.err" &&
		! readelf -S "$S/dwonly" | grep -q '\.symtab' && readelf -S "$S/dwonly" | grep -q '\.debug_info'; then
		DWARF_RC=${NOSYM_RC/c_static=nosym/c_static=0}
		DWARF_RC=${DWARF_RC/c_switch=nosym/c_switch=0}
		run_case patch-dwarf-only "$S/dwonly" &&
			check patch-dwarf-only "$S/full" "$DWARF_RC" "c_func c_static" loaded
	else
		pl_skip patch-dwarf-only "this strip cannot keep DWARF without .symtab: $(head -c 200 "$T/strip.err")"
	fi
fi

# ---- messages: one line per attempt, naming the function and why
python3 - "$T" <<'EOF'
import re, sys
t = sys.argv[1]
bad = []
want = {
    "patch-pie": [r"not patching short_func \(0x[0-9a-f]+\): the function is shorter than the 5-byte jump",
                  r"not patching loop_func \(0x[0-9a-f]+\): a branch lands inside the bytes the jump replaces .*\(at \+0x8\)",
                  r"not patching cold_func \(0x[0-9a-f]+\): a branch lands inside .*\(at \.cold\+0x4\)",
                  r"not patching expect_func \(0x[0-9a-f]+\): its first bytes are not the ones expected",
                  r"not patching fp_func \(0x[0-9a-f]+\): already patched",
                  r"not patching jt_func \(0x[0-9a-f]+\): a jump table entry lands inside the bytes",
                  r"not patching helper_func \(0x[0-9a-f]+\): other threads run",
                  r"patched fp_func \(0x[0-9a-f]+\): its calls go to d9's hook, its first 12 bytes run relocated"],
    "patch-far-pie": [r"not patching rip_long_func \(0x[0-9a-f]+\): a rip-relative operand would not reach",
                      r"not patching short_func \(0x[0-9a-f]+\): the function is shorter than the 14-byte jump"],
}
for case, pats in want.items():
    try:
        err = open("%s/%s.err" % (t, case)).read().splitlines()
    except OSError:
        continue
    d9 = [l for l in err if l.startswith("d9[")]
    for p in pats:
        if not any(re.search(p, l) for l in d9):
            bad.append("%s: no line like '%s'" % (case, p))
    tries = sum(1 for l in err if re.match(r"patch-test: (patch \S+ rc=|again rc=|thread rc=)", l))
    if len(d9) != tries:
        bad.append("%s: %d d9 lines for %d attempts" % (case, len(d9), tries))
print("FAIL patch-messages: " + "; ".join(bad[:5]) if bad else "PASS patch-messages")
EOF

# ---- the agent itself: capstone is dlopen'ed, never linked
if readelf -d "$PL_LIB" | grep NEEDED | grep -qi capstone; then
	pl_fail patch-agent-no-capstone "libd9agent.so links libcapstone: $(readelf -d "$PL_LIB" | grep NEEDED | tr -s ' ' | tr '\n' ' ')"
elif ! nm -D --defined-only "$PL_LIB" | grep -q ' d9__patch$' && nm "$PL_LIB" 2>/dev/null | grep -q 'd9__patch'; then
	pl_pass patch-agent-no-capstone "patch.c is in the agent (hidden), libcapstone is not linked"
else
	pl_fail patch-agent-no-capstone "d9__patch missing from libd9agent.so or exported"
fi
