#!/usr/bin/env bash
# test-viewer-url.sh: the viewer's link, search and names (README.md, "Viewer"; issue 18).
# st-http runs under the agent with CPU samples and D9_SYMBOLIZE=0, answers /burn and exits
# right after: its one segment is sealed at exit with no Symbol record (as a segment sealed at
# exit before the compressor reached it; D9_SYMBOLIZE=0 makes that certain on a machine of any
# speed). Then:
#   - `d9-analyze html` embeds the names d9-analyze gives the burn's code (handle_burn, as
#     summary names it) (viewer-url-html-names);
#   - in chromium (tests/browser/viewer-url-test.js): the report's flame graph of the burn poll
#     names handle_burn; the raw segment shows st-http+0x... and the page says names are missing
#     and how to get them; a link copied after picking a poll and shift+dragging a range
#     reopens the same view, range, selection and details (in the report, and with the raw
#     files opened again), and says when its poll or its files are not those loaded; searching the function goes to and outlines its polls; a coroutine
#     is found by id and by spawn location; the search text is in the link.
# Screenshots are kept in build/test-artifacts/viewer/.
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup viewer-url
pl_san_setup viewer-url || exit 0
ART=$PL_ROOT/build/test-artifacts/viewer
BR=$PL_ROOT/tests/browser
mkdir -p "$ART"
if ! command -v node >/dev/null; then
	pl_fail viewer-url "node is not installed (make deps)"
	exit 0
fi

# ---- a trace sealed at exit, without Symbol records ------------------------------------------------
if ! pl_start "$T/run" "$ST_HTTP" D9_CPU_PROFILE=999 D9_SYMBOLIZE=0 --; then
	pl_fail viewer-url-server "$PL_ERR"
	exit 0
fi
ok=1
pl_gets 2 /fast ok || { pl_fail viewer-url-requests "$PL_ERR"; ok=0; }
pl_get "/burn?ms=30"
case "$BODY" in "burn ms=30 cpu_ns="*) ;; *) pl_fail viewer-url-requests "/burn: $CODE '$BODY'"; ok=0 ;; esac
pl_gets 1 /fast ok || { pl_fail viewer-url-requests "$PL_ERR"; ok=0; }
pl_quit
if [ "$SRC" != 0 ]; then
	pl_fail viewer-url-exit "st-http exited with $SRC: $(head -c 300 "$SDIR/stderr")"
	exit 0
fi
mapfile -t raw < <(pl_trace_files "$SDIR/trace" | sed "s|^|$SDIR/trace/|")
if [ "${#raw[@]}" = 0 ]; then
	pl_fail viewer-url-trace "no segment file in $SDIR/trace"
	exit 0
fi
# preconditions: sealed, no Symbol record, and d9-analyze names the burn (libdw, the binary)
"$PL_ANALYZE" dump "${raw[@]}" >"$T/dump.jsonl" 2>/dev/null
"$PL_ANALYZE" summary "${raw[@]}" >"$T/summary.txt" 2>/dev/null
if grep -q '"kind":"Symbol"' "$T/dump.jsonl"; then
	pl_fail viewer-url-trace "the segment carries Symbol records though D9_SYMBOLIZE=0"
	exit 0
fi
if ! grep -q '"rec":"end".*"sealed":true' "$T/dump.jsonl"; then
	pl_fail viewer-url-trace "the segment was not sealed at exit: $(ls "$SDIR/trace" | tr '\n' ' ')"
	exit 0
fi
if ! grep -q 'handle_burn' "$T/summary.txt"; then
	pl_skip viewer-url "d9-analyze summary does not name handle_burn here (no libdw?): $(grep -m1 -i 'hottest' "$T/summary.txt" | head -c 200)"
	exit 0
fi
[ "$ok" = 1 ] && pl_pass viewer-url-trace "st-http: 3 /fast, /burn?ms=30, exit; ${#raw[@]} segment sealed at exit, no Symbol record; summary names handle_burn"

# ---- d9-analyze html embeds the names -----------------------------------------------------------------
rc=0
"$SAN" html -o "$T/report.html" "${raw[@]}" >"$T/html.out" 2>"$T/html.err" || rc=$?
names=$(sed -n '/<script type="application\/x-d9-names">/,/<\/script>/p' "$T/report.html")
if [ "$rc" != 0 ] || [ -s "$T/html.err" ]; then
	pl_fail viewer-url-html-names "exit $rc, stderr '$(head -c 300 "$T/html.err")'"
elif ! printf '%s' "$names" | grep -q '"handle_burn (st-http.c:[0-9]*)"'; then
	pl_fail viewer-url-html-names "the report embeds no name handle_burn (st-http.c:N): $(printf '%s' "$names" | head -c 300)"
elif ! printf '%s' "$names" | sed '1d;$d' | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["version"] == 1 and d["procs"]'; then
	pl_fail viewer-url-html-names "the embedded names are not the JSON README describes"
else
	pl_pass viewer-url-html-names "report.html embeds $(printf '%s' "$names" | grep -o '"[0-9a-f]*":\[' | wc -l) named addresses, handle_burn among them"
fi
cp "$T/report.html" "$ART/report-url.html" 2>/dev/null

# ---- in the browser --------------------------------------------------------------------------------------
if [ ! -x /usr/bin/chromium ] || [ ! -f "$BR/node_modules/playwright-core/package.json" ]; then
	pl_fail viewer-url-browser "chromium or playwright-core is missing (scripts/install-deps.sh installs them)"
	exit 0
fi
cfg=$(python3 -c 'import json, sys
a = sys.argv
print(json.dumps({"report": a[1], "artifacts": a[2], "fn": "handle_burn", "raw": a[3:]}))' "$T/report.html" "$ART" "${raw[@]}")
timeout -s KILL 300 node "$BR/viewer-url-test.js" "$cfg" 2>"$T/browser.err"
rc=$?
[ "$rc" = 0 ] || pl_fail viewer-url-browser "viewer-url-test.js exited with $rc: $(tail -c 400 "$T/browser.err")"
