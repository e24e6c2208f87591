#!/usr/bin/env bash
# test-dump-bad-input.sh: `d9-analyze dump` (sanitizer build) on input that is not a healthy
# segment. Checks the exit status (0 ok, 3 nothing readable, 4 some input damaged) and that stderr
# holds exactly one line per bad input, naming it and saying what is wrong. Inputs are built from
# the golden segments in a temp dir; tests run as root, so "unreadable" means a missing path or a
# directory, not chmod 000. Prints PASS/FAIL lines.
set -u
cd "$(dirname "$0")/../.."

san=build/san/d9-analyze
golden=tests/golden
if [ ! -x "$san" ] || [ ! -f "$golden/basic.bin" ]; then
	echo "FAIL dump-bad-input-setup: need $san and $golden/basic.bin (make; make golden)"
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME RC LINES PATTERN... -- ARGS...: d9_expect (lib-expect.sh) on `d9-analyze dump ARGS`
# shellcheck source=tests/integration/lib-expect.sh
. tests/integration/lib-expect.sh # (the script runs from the repository root)
expect() { d9_expect dump "dump" "$@"; }

d=$tmp/in
mkdir -p "$d"

: >"$d/empty.bin"
expect empty-file 3 1 "$d/empty.bin: " -- "$d/empty.bin"

cp /bin/ls "$d/ls.bin"
expect not-a-trace 3 1 "$d/ls.bin: .*not a d9 trace" -- "$d/ls.bin"

printf 'GET / HTTP/1.1\r\n\r\n' >"$d/http.active"
expect text-file 3 1 "$d/http.active: .*not a d9 trace" -- "$d/http.active"

cp "$golden/truncated.bin" "$d/truncated.bin"
expect truncated 4 1 "$d/truncated.bin: .*truncated" -- "$d/truncated.bin"

cp "$golden/corrupt-chunk.bin" "$d/corrupt.bin"
expect corrupt-chunk 4 1 "$d/corrupt.bin: .*corrupt" -- "$d/corrupt.bin"

head -c 100 "$golden/basic.bin" >"$d/cut-header.bin" # inside the HEADER chunk
expect cut-in-header 3 1 "$d/cut-header.bin: .*truncated" -- "$d/cut-header.bin"

cp "$golden/basic.bin" "$d/bad-header.bin"
printf '\xff' | dd of="$d/bad-header.bin" bs=1 seek=30 conv=notrunc 2>/dev/null
expect corrupt-header 3 1 "$d/bad-header.bin: .*header" -- "$d/bad-header.bin"

cp "$golden/basic.bin" "$d/v2.bin"
printf '\x02' | dd of="$d/v2.bin" bs=1 seek=8 conv=notrunc 2>/dev/null
expect major-version-2 3 1 "$d/v2.bin: .*version" -- "$d/v2.bin"

expect missing-path 3 1 "$d/nonexistent.bin: .*No such file" -- "$d/nonexistent.bin"

mkdir "$d/x.bin"
expect directory-argument-without-segments 3 1 "$d/x.bin" -- "$d/x.bin"

expect missing-and-good 4 1 "$d/gone.bin: .*No such file" -- "$d/gone.bin" "$golden/basic.bin"

# gzip: cut in the middle of the stream, and cut only by its 8-byte gzip trailer (all segment
# bytes inflate, but the end of the stream never came: the reader reports "truncated")
gz_size=$(stat -c %s "$golden/basic.bin.gz")
head -c $((gz_size / 2)) "$golden/basic.bin.gz" >"$d/half.bin.gz"
expect gzip-cut-in-half 4 1 "$d/half.bin.gz: .*truncated" -- "$d/half.bin.gz"
head -c $((gz_size - 8)) "$golden/basic.bin.gz" >"$d/no-gz-trailer.bin.gz"
expect gzip-without-trailer 4 1 "$d/no-gz-trailer.bin.gz: .*truncated" -- "$d/no-gz-trailer.bin.gz"

# a gzip data error names the file as given on the command line (FORMAT.md section 5): a segment
# of about 1 MB (d9-driver, uncompressed) gzipped whole, its gzip CRC zeroed, so that zlib finds
# the error at the end, past the first read's output
big=$tmp/big
if ! D9_TRACE_PATH="$big/trace.bin" D9_COMPRESS=0 timeout -s KILL 60 build/tests/d9-driver -t 1 \
	-n 100000 --park-every 100 --sleep-us 0 >/dev/null 2>&1; then
	echo "FAIL dump-gzip-error-names-file: d9-driver failed"
else
	f=$(ls "$big"/*.bin | head -n 1)
	gzip -1 -c "$f" >"$d/crc.bin.gz"
	gz_size=$(stat -c %s "$d/crc.bin.gz")
	printf '\0\0\0\0' | dd of="$d/crc.bin.gz" bs=1 seek=$((gz_size - 8)) conv=notrunc 2>/dev/null
	"$san" dump "$d/crc.bin.gz" >"$tmp/crc.out" 2>/dev/null
	if grep -qF "gzip data error: $d/crc.bin.gz: incorrect data check" "$tmp/crc.out"; then
		echo "PASS dump-gzip-error-names-file"
	else
		echo "FAIL dump-gzip-error-names-file: $(grep -m1 '"problem"' "$tmp/crc.out" | head -c 300)"
	fi
fi

# directories of segments: taken in name order, non-segment names ignored
g=$tmp/good
mkdir "$g"
cp "$golden/basic.bin" "$golden/basic.bin.gz" "$golden/unknown-types.bin" "$g/"
echo "not a segment" >"$g/notes.txt"
expect directory-all-good 0 0 -- "$g"
names=$(grep -o '"rec":"file","name":"[^"]*"' "$tmp/out" | cut -d'"' -f8 | tr '\n' ' ')
if [ "$names" = "basic.bin basic.bin.gz unknown-types.bin " ]; then
	echo "PASS dump-directory-order"
else
	echo "FAIL dump-directory-order: files dumped as: $names"
fi

m=$tmp/mixed
mkdir "$m"
cp "$golden/basic.bin" "$m/a-good.bin"
cp "$golden/truncated.bin" "$m/b-truncated.bin"
cp "$golden/corrupt-chunk.bin" "$m/c-corrupt.bin"
: >"$m/d-empty.active"
expect directory-mixed 4 3 "$m/b-truncated.bin: .*truncated" "$m/c-corrupt.bin: .*corrupt" \
	"$m/d-empty.active: " -- "$m"

# a directory entry named like a segment that is itself a directory
s=$tmp/subdir
mkdir -p "$s/0001.bin"
cp "$golden/basic.bin" "$s/0002.bin"
expect directory-entry-is-directory 4 1 "$s/0001.bin: .*[Dd]irectory" -- "$s"

e=$tmp/empty-dir
mkdir "$e"
expect directory-without-segments 3 1 "$e: .*no segment files" -- "$e"

rc=0
"$san" dump >/dev/null 2>&1 || rc=$?
if [ "$rc" -eq 2 ]; then echo "PASS dump-no-arguments"; else echo "FAIL dump-no-arguments: exit $rc, expected 2"; fi
