#!/usr/bin/env bash
# test-api.sh: the application API (include/d9.h, agent/api.c, `d9-analyze events`).
# build/tests/api-demo makes marks, values and custom events and prints one line per call. Without
# the agent it runs with no symbol error and prints the same as with it (PIE and non-PIE builds:
# a weak reference would resolve to 0 in the non-PIE one); with the agent every call comes back
# through `d9-analyze events --json`, in order, with exact values (u64 above 2^53, negative i64,
# f64 bits, strings cut to their field's bound, bytes); a run large enough to rotate shows each
# segment decodes its custom events alone (self-contained definitions). The hostile run (NULL
# pointers, huge names, 10,000 fields, unknown handles, negative lengths) exits 0 with one stderr
# line and exactly as many Dropped (reason api) as rejected calls. d9.h compiles as C++ and works
# from a dlopen'd library.
set -u
# shellcheck source=lib-preload.sh
. "$(dirname "$0")/lib-preload.sh"

pl_need_built api
DEMO=$PL_ROOT/build/tests/api-demo
DEMO_NOPIE=$PL_ROOT/build/tests/api-demo-nopie
for b in "$DEMO" "$DEMO_NOPIE"; do
	if [ ! -x "$b" ]; then
		pl_fail api "$b is not built (make all)"
		exit 0
	fi
done
if ! command -v python3 >/dev/null; then
	pl_fail api "python3 is not installed (make deps)"
	exit 0
fi
pl_env api

# expect_lines EVENTS_JSON: the events as the program prints its calls (api-demo's format).
expect_lines() {
	python3 - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["type"] == "Mark":
        print("mark %s" % e["name"])
    elif e["type"] == "Value":
        v = e["value"]
        print("%s %s %s" % (e["kind"], e["name"], repr(float(v)) if isinstance(v, float) else v))
    else:
        f = e["fields"]
        print("event %s id=%d delta=%d price=%s user=%s blob=%s" % (e["name"], f["id"], f["delta"],
              repr(float(f["price"])), f["user"], f["blob"]))
EOF
}

# the program's own lines, with floats as Python's repr (the program prints %.17g)
normalize() {
	python3 -c '
import re, sys
for l in sys.stdin:
    l = l.rstrip("\n")
    l = re.sub(r"^(gauge temperature) (\S+)$", lambda m: "%s %s" % (m.group(1), repr(float(m.group(2)))), l)
    l = re.sub(r"price=(\S+)", lambda m: "price=" + repr(float(m.group(1))), l)
    print(l)' <"$1"
}

# 1. without the agent: no symbol error, exit 0, the same lines from both builds
for b in "$DEMO" "$DEMO_NOPIE"; do
	n=$(basename "$b")
	if "$b" 7 >"$T/$n.plain" 2>"$T/$n.plain.err" && [ ! -s "$T/$n.plain.err" ] &&
		[ "$(wc -l <"$T/$n.plain")" -eq 35 ]; then
		pl_pass "api-no-agent-$n" "35 calls, no error"
	else
		pl_fail "api-no-agent-$n" "exit or output wrong: $(head -c 300 "$T/$n.plain.err")"
	fi
done

# 2. with the agent: every call comes back, in order, exact
for b in "$DEMO" "$DEMO_NOPIE"; do
	n=$(basename "$b")
	d=$T/$n
	mkdir -p "$d"
	if ! env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d/trace.bin" D9_COMPRESS=0 "$b" 7 \
		>"$d/out" 2>"$d/err"; then
		pl_fail "api-events-$n" "exit status $? under the agent: $(head -c 300 "$d/err")"
		continue
	fi
	if ! cmp -s "$d/out" "$T/$n.plain"; then
		pl_fail "api-same-output-$n" "the program printed something else under the agent"
	elif [ -s "$d/err" ]; then
		pl_fail "api-same-output-$n" "stderr under the agent: $(head -c 300 "$d/err")"
	else
		pl_pass "api-same-output-$n"
	fi
	"$PL_ANALYZE" events --json "$d" >"$d/events.json" 2>"$d/events.err"
	rc=$?
	expect_lines "$d/events.json" >"$d/got"
	normalize "$d/out" >"$d/want"
	if [ "$rc" -eq 0 ] && cmp -s "$d/got" "$d/want"; then
		pl_pass "api-events-$n" "$(wc -l <"$d/got") marks, values and custom events, exact and in order"
	else
		pl_fail "api-events-$n" "exit $rc; differences (got vs want): $(diff "$d/got" "$d/want" | head -c 400)"
	fi
done

# 3. --name and --type filter; text output names fields
d=$T/api-demo
got=$("$PL_ANALYZE" events --json --name served "$d" | wc -l)
got2=$("$PL_ANALYZE" events --type mark --type event "$d" | grep -c -E ' (mark config reload|event order id=[0-9]+ delta=-?[0-9]+ price=[0-9.e+-]+ user="[^"]*" blob=[0-9a-f]{6})$')
if [ "$got" -eq 7 ] && [ "$got2" -eq 14 ]; then
	pl_pass api-filters "--name served: 7 counters; --type mark --type event: 14 lines"
else
	pl_fail api-filters "--name served: $got lines (want 7); --type mark --type event: $got2 (want 14)"
fi

# 4. jsonl and chrome carry them
jl=$("$PL_ANALYZE" jsonl "$d" | grep -c -E '"type":"(Mark|Value|CustomEvent)"')
ch=$("$PL_ANALYZE" chrome "$d" | python3 -c '
import json, sys
d = json.load(sys.stdin)
ev = d["traceEvents"] if isinstance(d, dict) else d
c = [e for e in ev if e.get("ph") == "C" and e.get("cat") == "value" and e["name"] == "served"]
i = [e for e in ev if e.get("ph") == "i" and e.get("cat") == "custom" and e["name"] == "order"]
ok = [e["args"]["value"] for e in c] == [1, 3, 6, 10, 15, 21, 28] and len(i) == 7 and \
	i[0]["args"]["id"] == 2**64 - 1 and i[1]["args"]["delta"] == -1001
print("ok" if ok else "bad %r %r" % ([e["args"] for e in c], [e["args"] for e in i][:2]))')
if [ "$jl" -eq 35 ] && [ "$ch" = ok ]; then
	pl_pass api-exports "jsonl: 35 events; chrome: counter track 'served' and 7 'order' instants with fields"
else
	pl_fail api-exports "jsonl: $jl application events (want 35); chrome: $ch"
fi

# 4b. the viewer's model (viewer/model.js in node): a value track per name, ticks for marks and
# custom events with their fields
if command -v node >/dev/null; then
	r=$(node - "$PL_ROOT/viewer/model.js" "$d"/*.bin <<'EOF'
const fs = require('fs');
const M = require(process.argv[2]);
const b = new M.Builder();
for (const f of process.argv.slice(3)) b.add(f, new Uint8Array(fs.readFileSync(f)));
b.decodeAll(() => {});
const m = b.finish();
const served = m.app.values.find((v) => v.name === 'served');
const temp = m.app.values.find((v) => v.name === 'temperature');
const marks = m.app.ticks.filter((k) => k.type === 0 && k.name === 'config reload').length;
const ev = m.app.ticks.filter((k) => k.type === 2 && k.name === 'order');
const ok = served && served.kind === 1 && Array.from(served.v).join() === '1,3,6,10,15,21,28' &&
	temp && temp.v[6] === 26.25 && marks === 7 && ev.length === 7 &&
	ev[2].text === 'id=18446744073709551613 delta=-2001 price=0.5 user="user-2-with-a-lo" blob=0200ff' &&
	m.problems.length === 0;
console.log(ok ? 'ok' : JSON.stringify({ values: m.app.values.map((v) => [v.name, Array.from(v.v)]), marks, ev: ev.slice(0, 3), problems: m.problems.slice(0, 2) }));
EOF
)
	if [ "$r" = ok ]; then
		pl_pass api-viewer-model "value tracks (counter totals, f64 gauge), 7 marks and 7 custom events with their fields"
	else
		pl_fail api-viewer-model "$(echo "$r" | head -c 500)"
	fi
else
	pl_skip api-viewer-model "node is not installed"
fi

# 5. self-contained segments: a run that rotates (1 MiB segments); each segment alone decodes
# the custom events it holds, and together they hold every call
d=$T/rotate
mkdir -p "$d"
rounds=30000
if env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d/trace.bin" D9_COMPRESS=0 D9_MAX_FILE_SIZE=1M \
	"$DEMO" "$rounds" >"$d/out" 2>"$d/err"; then
	nseg=0 total=0 bad=0
	for f in "$d"/*.bin; do
		nseg=$((nseg + 1))
		n=$("$PL_ANALYZE" events --json --type event "$f" 2>>"$d/seg.err" | grep -c '"fields":{"id":')
		[ "$n" -gt 0 ] || bad=$((bad + 1))
		total=$((total + $("$PL_ANALYZE" events --json "$f" 2>>"$d/seg.err" | wc -l)))
	done
	if [ "$nseg" -ge 2 ] && [ "$bad" -eq 0 ] && [ "$total" -eq $((rounds * 5)) ] && [ ! -s "$d/seg.err" ]; then
		pl_pass api-segments "$nseg segments, each decodes its custom events alone; $total events"
	else
		pl_fail api-segments "$nseg segments ($bad without custom events), $total events (want $((rounds * 5))): $(head -c 300 "$d/seg.err")"
	fi
else
	pl_fail api-segments "exit status $?: $(head -c 300 "$d/err")"
fi

# 6. hostile calls: counted drops, one stderr line, exit 0, recording goes on
d=$T/hostile
mkdir -p "$d"
if env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$d/trace.bin" D9_COMPRESS=0 "$DEMO" hostile \
	>"$d/out" 2>"$d/err"; then
	want=$(sed -n 's/^rejected //p' "$d/out")
	drops=$("$PL_ANALYZE" jsonl "$d" | python3 -c '
import json, sys
print(sum(e["count"] for e in map(json.loads, sys.stdin) if e["type"] == "Dropped" and e["reason"] == "api"))')
	lines=$(wc -l <"$d/err")
	good=$("$PL_ANALYZE" events "$d" | grep -c " event ok n=42 s=\"$(printf 'x%.0s' $(seq 32))\"$")
	summary=$("$PL_ANALYZE" summary "$d" | grep -c "dropped by reason: api $want")
	if [ -n "$want" ] && [ "$want" -gt 20 ] && [ "$drops" = "$want" ] && [ "$lines" -eq 1 ] &&
		[ "$good" -eq 1 ] && [ "$summary" -eq 1 ]; then
		pl_pass api-hostile "$want rejected calls, $drops Dropped (reason api), 1 stderr line, then a good event"
	else
		pl_fail api-hostile "rejected '$want', Dropped api $drops, stderr lines $lines, good event $good, summary $summary: $(head -c 300 "$d/err")"
	fi
else
	pl_fail api-hostile "exit status $?: $(head -c 300 "$d/err")"
fi

# 7. C++: the header compiles cleanly as C++ and the calls reach the agent
if command -v g++ >/dev/null; then
	cat >"$T/cxx.cc" <<'EOF'
#include "d9.h"
int main()
{
	static const d9_field f[] = { { "n", D9_U64, 0 }, { "s", D9_STR, 8 } };
	uint32_t s = d9_schema("cxx", f, 2);
	union d9_arg a[2] = { d9_u64(7), d9_str("plus") };
	d9_event(s, a, 2);
	d9_mark(d9_name("from c++"));
	return 0;
}
EOF
	if g++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -I"$PL_ROOT/include" -o "$T/cxx" "$T/cxx.cc" 2>"$T/cxx.err"; then
		mkdir -p "$T/cxxtr"
		env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/cxxtr/trace.bin" D9_COMPRESS=0 "$T/cxx" 2>"$T/cxx.err"
		n=$("$PL_ANALYZE" events "$T/cxxtr" | grep -c -E ' (event cxx n=7 s="plus"|mark from c\+\+)$')
		if [ "$n" -eq 2 ]; then
			pl_pass api-cxx "g++ -Wpedantic -Werror clean; event and mark recorded"
		else
			pl_fail api-cxx "$n of 2 events recorded: $(head -c 300 "$T/cxx.err")"
		fi
	else
		pl_fail api-cxx "g++ rejects d9.h: $(head -c 400 "$T/cxx.err")"
	fi
else
	pl_skip api-cxx "g++ is not installed"
fi

# 8. a dlopen'd library using d9.h (plugins): it finds the agent too
cat >"$T/plugin.c" <<'EOF'
#include "d9.h"
void plugin_run(void);
void plugin_run(void)
{
	d9_gauge(d9_name("plugin gauge"), 99);
}
EOF
cat >"$T/host.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	void *h = dlopen(argc > 1 ? argv[1] : "", RTLD_NOW | RTLD_LOCAL);
	void (*run)(void) = h ? (void (*)(void))dlsym(h, "plugin_run") : NULL;
	if (!run) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	run();
	return 0;
}
EOF
if cc -std=gnu11 -Wall -Wextra -Werror -fPIC -shared -I"$PL_ROOT/include" -o "$T/plugin.so" "$T/plugin.c" 2>"$T/dl.err" &&
	cc -std=gnu11 -Wall -Wextra -Werror -o "$T/host" "$T/host.c" 2>>"$T/dl.err"; then
	mkdir -p "$T/dltr"
	"$T/host" "$T/plugin.so" 2>>"$T/dl.err" || echo "host without the agent failed" >>"$T/dl.err"
	env LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$T/dltr/trace.bin" D9_COMPRESS=0 "$T/host" "$T/plugin.so" 2>>"$T/dl.err"
	n=$("$PL_ANALYZE" events "$T/dltr" | grep -c ' gauge plugin gauge 99$')
	if [ "$n" -eq 1 ] && [ ! -s "$T/dl.err" ]; then
		pl_pass api-dlopen "the dlopen'd library's gauge is recorded; runs without the agent too"
	else
		pl_fail api-dlopen "$n gauges recorded: $(head -c 300 "$T/dl.err")"
	fi
else
	pl_fail api-dlopen "cannot build the plugin: $(head -c 300 "$T/dl.err")"
fi

# 8b. the application's requests (d9_request_begin/end) override d9's zero-code guess: api-demo
# serve 5 answers 5 lines on an accepted loopback connection, each inside an API request; with
# D9_REQUESTS=1 the same exchanges are also zero-code requests, which the analyzer replaces: the
# requests listed are exactly the program's 5 (ids, statuses, in order), and `requests` says 5
# were replaced. Without D9_REQUESTS the API requests are recorded all the same.
for mode in zero-code-on off; do
	rd=$T/apireq-$mode
	envs=(LD_PRELOAD="$PL_LIB" D9_TRACE_PATH="$rd/trace.bin" D9_EXIT_TIMEOUT=10s)
	[ "$mode" = off ] || envs+=(D9_REQUESTS=1)
	env "${envs[@]}" "$DEMO" serve 5 >"$T/apireq-$mode.out" 2>"$T/apireq-$mode.err"
	r=$("$PL_ANALYZE" requests --json --top 100 "$rd" 2>>"$T/apireq-$mode.err" | python3 -c '
import json, sys
reqs = [json.loads(l) for l in sys.stdin if l.strip()]
got = [(r["id"], r["source"], r["status"]) for r in reqs]
want = [(1000 + i, "api", 200 + i) for i in range(5)]
print("ok" if got == want else "got %r" % got)')
	want_out=$(printf 'request %d %d
' 1000 200 1001 201 1002 202 1003 203 1004 204)
	repl=$("$PL_ANALYZE" requests "$rd" 2>/dev/null | sed -n 's/.*replaced by API requests \([0-9]*\).*/\1/p' | head -n 1)
	repl=${repl:-0}
	want_repl=5
	[ "$mode" = off ] && want_repl=0
	if [ "$r" = ok ] && [ "$(cat "$T/apireq-$mode.out")" = "$want_out" ] && [ "$repl" = "$want_repl" ]; then
		pl_pass "api-requests-$mode" "the program's 5 requests (ids 1000-1004, statuses 200-204), $repl zero-code requests replaced"
	else
		pl_fail "api-requests-$mode" "requests: $r; replaced: $repl (want $want_repl); $(head -c 300 "$T/apireq-$mode.err")"
	fi
done

# 9. the viewer in a browser: value tracks, ticks, hover (tests/browser/api-test.js)
BR=$PL_ROOT/tests/browser
if ! command -v node >/dev/null || [ ! -x /usr/bin/chromium ] || [ ! -f "$BR/node_modules/playwright-core/package.json" ]; then
	pl_skip api-viewer-browser "chromium, node or playwright-core is missing (scripts/install-deps.sh installs them)"
else
	node "$BR/api-test.js" "$PL_ROOT/build/test-artifacts/api" "$T"/api-demo/*.bin 2>&1 | head -n 20
fi
