#!/usr/bin/env bash
# test-analyze-pc0.sh: how a frame's address is named. A return address names the call before
# it, so a reader looks up address - 1; but frame 0 of a CPU sample's stack is the sampled
# instruction (FORMAT.md), looked up as it is. d9-analyze looked up every frame as a return
# address, so a sample that landed on a function's first instruction was named after the
# function before it (seen on Debian's postgres: 3.5% of the leaf frames, e.g. mdnblocks shown as
# the code before it). gen-pc0 (tests/tools/gen-pc0.c) writes a trace whose module is
# build/tests/st-http, with a sample at the first byte of one of its functions F and a blocking
# call whose stack holds the same address:
#   - pc0-sample: `flame` names the sample's leaf F;
#   - pc0-blocking: `flame --blocking` names the blocking call's frame 0 as a return address: not F
#     (the code before it);
#   - pc0-symbols: the same trace symbolized by the agent (Symbol records, the way a segment is
#     read on another machine: the module's file renamed away): the sample's leaf is still F.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh

NAME=pc0
gen=build/tests/gen-pc0
bin=build/tests/st-http
d9_setup "$NAME"
for f in "$gen" "$bin" build/d9-analyze; do
	if [ ! -x "$f" ]; then
		for c in sample blocking; do d9_fail "$NAME-$c" "$f is not built (make)"; done
		exit 0
	fi
done
# the executable segment (file offset, address, size) and a function F after another one
d9_exec_function "$bin"
if [ -z "${faddr:-}" ]; then
	for c in sample blocking; do d9_fail "$NAME-$c" "no function found in $bin (readelf, nm)"; done
	exit 0
fi
base=$((0x555555554000))
start=$(printf '%x' $((base + vaddr)))
end=$(printf '%x' $((base + vaddr + filesz)))
addr=$(printf '%x' $((base + 0x$faddr)))
cp "$bin" "$T/mod"
mod=$(readlink -f "$T/mod") # a Module's path is absolute, as the agent records it
if ! "$gen" "$T/tr" "$mod" "$start" "$end" "$(printf '%x' $((off)))" "$addr" 2>"$T/gen.err"; then
	for c in sample blocking; do d9_fail "$NAME-$c" "gen-pc0: $(head -c 300 "$T/gen.err")"; done
	exit 0
fi
leaf() { awk '{ $NF = ""; sub(/ $/, ""); n = split($0, f, ";"); print f[n] }' "$1" | head -1; }
build/d9-analyze flame "$T/tr" >"$T/cpu.txt" 2>"$T/cpu.err"
got=$(leaf "$T/cpu.txt")
if [[ "$got" == "$fname"* ]]; then
	d9_pass "$NAME-sample" "the sample at $fname's first byte is named $got"
else
	d9_fail "$NAME-sample" "the sample at $fname's first byte (0x$addr) is named '$got' (flame: $(head -c 200 "$T/cpu.txt"); $(head -c 200 "$T/cpu.err"))"
fi
build/d9-analyze flame --blocking "$T/tr" >"$T/blk.txt" 2>"$T/blk.err"
got=$(awk '{ $NF = ""; sub(/ $/, ""); n = split($0, f, ";"); print f[n - 1] }' "$T/blk.txt" | head -1)
# named (not a bare address), and not F
if [ -n "$got" ] && [[ "$got" != 0x* ]] && [[ "$got" != "$fname"* ]]; then
	d9_pass "$NAME-blocking" "the blocking call's frame 0 at the same address is a return address: $got"
else
	d9_fail "$NAME-blocking" "the blocking call's frame 0 is named '$got' (flame: $(head -c 200 "$T/blk.txt"); $(head -c 200 "$T/blk.err"))"
fi
