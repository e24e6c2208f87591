#!/usr/bin/env bash
# test-analyze-gaps.sh: the analyzer never pairs events across a gap in the data (issue 11: a
# disk-full trace showed a 14.4 s "longest poll" and a 14.3 s scheduling delay that spanned the
# dropped events, and its trailer-less segment read as "0 truncated", exit 0). On the synthetic
# traces of build/tests/gen-analyze-gaps (tests/tools/gen-analyze-gaps.c says what each holds),
# with the sanitizer build:
#   - drop: Dropped events (write_error, buffers_full, other) between a PollStart and its
#     PollEnd, a Wake and its poll, a Park and its Unpark: summary counts 1 unknown poll, delay
#     and park, reports no duration that spans a drop (longest poll 4 s, the other worker's),
#     shows every drop by reason; samples_lost breaks nothing; exit 0. polls, chrome and flame
#     leave the same pairs out;
#   - unsealed: a segment without a trailer is truncated (exit 4, a warning; html too) and
#     nothing pairs across its end, on any thread;
#   - seqgap: a missing segment_seq breaks pairs too (seq_gaps 1), exit 0;
#   - live: a trailer-less .active of a live process on this host is "live", not truncated
#     (exit 0); once that process is gone, the same file is truncated (exit 4).
set -u
cd "$(dirname "$0")/../.."

san=build/san/d9-analyze
gen=build/tests/gen-analyze-gaps
for b in "$san" "$gen"; do
	if [ ! -x "$b" ]; then
		echo "FAIL analyze-gaps-setup: $b is not built (make all build/san/d9-analyze)"
		exit 0
	fi
done
# shellcheck source=lib.sh
. tests/integration/lib.sh
d9_san_env
tmp=$(mktemp -d "${TMPDIR:-/tmp}/d9-analyze-gaps-XXXXXX")
live_pid=
cleanup() {
	[ -n "$live_pid" ] && { kill -KILL "$live_pid"; wait "$live_pid"; } 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# the "live" writer: a process of ours that runs until we end it
sleep 3600 &
live_pid=$!
if ! "$gen" "$tmp" "$live_pid" 2>"$tmp/gen.err"; then
	echo "FAIL analyze-gaps-setup: $gen: $(head -c 300 "$tmp/gen.err")"
	exit 0
fi

# run NAME WANT_RC ARGS...: $san ARGS > $tmp/NAME.out, stderr to $tmp/NAME.err; FAIL (and
# return 1) on another exit status or a sanitizer report.
run() {
	local name=$1 want=$2 rc=0
	shift 2
	"$san" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	if grep -qE 'runtime error|AddressSanitizer|LeakSanitizer' "$tmp/$name.err"; then
		echo "FAIL analyze-gaps-$name: sanitizer report: $(grep -m1 -E 'runtime error|Sanitizer' "$tmp/$name.err")"
		return 1
	fi
	if [ "$rc" != "$want" ]; then
		echo "FAIL analyze-gaps-$name: $* exited $rc, want $want; stderr '$(head -c 300 "$tmp/$name.err")'"
		return 1
	fi
}

# check NAME PYTHON: runs PYTHON with s = the JSON of $tmp/NAME.out (or lines = its JSON lines,
# text = its text, err = its stderr); it calls fail(msg) for each problem. PASS when none.
check() {
	python3 - "$1" "$tmp" "$2" <<'PYEOF'
import json, sys
name, d, code = sys.argv[1], sys.argv[2], sys.argv[3]
text = open("%s/%s.out" % (d, name)).read()
err = open("%s/%s.err" % (d, name)).read()
errs = []
def fail(msg):
    errs.append(msg)
def lines():
    return [json.loads(l) for l in text.splitlines() if l.strip()]
def obj():
    return json.loads(text)
try:
    exec(code)
except Exception as e:
    errs.append("%s: %s" % (type(e).__name__, e))
if errs:
    print("FAIL analyze-gaps-%s: %s" % (name, "; ".join(errs[:6])))
else:
    print("PASS analyze-gaps-%s" % name)
PYEOF
}

S10=10000000000 # no duration in these traces may reach 10 s: each such pair spans a gap

# ---- drop --------------------------------------------------------------------------------------
if run drop-summary 0 summary --json "$tmp/drop"; then
	check drop-summary "
s = obj(); q = s['data_quality']
want = {'polls_unknown': 1, 'parks_unknown': 1, 'sched_delay_unknown': 1, 'loop_turns_unknown': 0,
        'truncated_segments': 0, 'damaged_files': 0, 'seq_gaps': 0, 'live_segments': 0}
for k, v in want.items():
    if q.get(k) != v:
        fail('data_quality.%s = %s, want %s' % (k, q.get(k), v))
# known polls: coroutine 6 and 7 (10 us each) on worker 1, coroutine 8 (4 s) on worker 2
if (s['polls']['count'], s['polls']['max_ns']) != (3, 4 * 10**9):
    fail('polls: count %d max %d, want 3 and 4 s' % (s['polls']['count'], s['polls']['max_ns']))
lp = sorted((p['coroutine'], p['duration_ns']) for p in s['long_polls'])
if lp != [(6, 10000), (7, 10000), (8, 4 * 10**9)]:
    fail('long_polls (coroutine, ns): %s' % lp)
sd = s['sched_delay']
if (sd['count'], sd['max_ns']) != (1, 2000):
    fail('sched_delay: count %d max %d, want 1 and 2 us' % (sd['count'], sd['max_ns']))
for loc in s['locations']:
    if loc['max_ns'] >= $S10 or loc['sched_delay']['max_ns'] >= $S10:
        fail('location %s: a duration of 10 s or more' % loc['name'])
w1 = [w for w in s['workers'] if w['id'] == 1][0]
if w1['parked_ns'] != 100000 or w1['busy_ns'] != 20000:
    fail('worker 1: parked %d ns, busy %d ns; want 100 us and 20 us' % (w1['parked_ns'], w1['busy_ns']))
dr = s['drops']
if dr['by_reason'] != {'write_error': 500, 'buffers_full': 3, 'other': 1, 'samples_lost': 4} or \
   (dr['events'], dr['samples']) != (504, 4):
    fail('drops: %s' % dr)
"
fi
# the write error's Dropped (14.5 s) is outside the window, the poll's two ends inside
if run drop-window 0 summary --json --to 14.45s "$tmp/drop"; then
	check drop-window "
s = obj()
if (s['data_quality']['polls_unknown'], s['polls']['count'], s['polls']['max_ns']) != (1, 1, 4 * 10**9):
    fail('polls_unknown %d, polls %s: want 1 unknown, 1 known of 4 s' % (s['data_quality']['polls_unknown'], s['polls']))
"
fi
if run drop-text 0 summary "$tmp/drop"; then
	check drop-text "
for want in ['dropped by reason: other 1, buffers_full 3, write_error 500, samples_lost 4',
             '1 polls, 0 loop turns, 1 parks, 1 scheduling delays', '504 events and 4 samples dropped']:
    if want not in text:
        fail('text lacks: ' + want)
for bad in ['14.399s', '14.300s', '9.000s']:
    if bad in text:
        fail('text shows a duration across the gap: ' + bad)
"
fi
if run drop-polls 0 polls --json "$tmp/drop"; then
	check drop-polls "
got = sorted((p['coroutine'], p['duration_ns']) for p in lines())
if got != [(6, 10000), (7, 10000), (8, 4 * 10**9)]:
    fail('polls (coroutine, ns): %s' % got)
if '1 poll(s) left out' not in err:
    fail('stderr does not say a poll was left out: %r' % err[:200])
"
fi
if run drop-chrome 0 chrome "$tmp/drop"; then
	check drop-chrome "
ev = obj()['traceEvents']
polls = sorted(e['dur'] for e in ev if e.get('cat') == 'poll')
parks = [e['dur'] for e in ev if e.get('cat') == 'park']
flows = [e for e in ev if e.get('ph') == 's']
if polls != [10.0, 10.0, 4000000.0]:
    fail('poll slices (us): %s' % polls)
if parks != [100.0]:
    fail('park slices (us): %s' % parks)
if len(flows) != 1 or flows[0]['args']['woken'] != 7:
    fail('wake flows: %s (want only coroutine 7)' % flows)
"
fi
# flame: the 0x22 sample comes after the gap inside coroutine 5's poll: its poll is unknown
if run drop-flame 0 flame --by-location "$tmp/drop"; then
	check drop-flame "
if sorted(text.splitlines()) != ['(unknown);0x22 1', 'handler;0x11 1', 'handler;0x33 1']:
    fail('folded: %r' % text)
"
fi
if run drop-flame-long 0 flame --long-polls 1s "$tmp/drop"; then
	check drop-flame-long "
if text.splitlines() != ['0x33 1']:
    fail('folded (only the 4 s poll is known to be 1 s or longer): %r' % text)
"
fi

# ---- unsealed ----------------------------------------------------------------------------------
if run unsealed-summary 4 summary --json "$tmp/unsealed"; then
	check unsealed-summary "
s = obj(); q = s['data_quality']
want = {'truncated_segments': 1, 'damaged_files': 1, 'polls_unknown': 2, 'sched_delay_unknown': 1,
        'live_segments': 0}
for k, v in want.items():
    if q.get(k) != v:
        fail('data_quality.%s = %s, want %s' % (k, q.get(k), v))
if (s['polls']['count'], s['polls']['max_ns']) != (2, 20000):
    fail('polls: count %d max %d, want 2 and 20 us' % (s['polls']['count'], s['polls']['max_ns']))
if s['sched_delay']['count'] != 0:
    fail('a scheduling delay across the segment end: %s' % s['sched_delay'])
if not any('trace.200.000000.bin' in w and 'no trailer' in w for w in s['warnings']):
    fail('no warning names the segment without a trailer: %s' % s['warnings'])
if 'no trailer' not in err:
    fail('stderr does not say so: %r' % err[:300])
"
fi
if run unsealed-text 4 summary "$tmp/unsealed"; then
	check unsealed-text "
if '1 truncated' not in text:
    fail('text does not count the truncated segment')
"
fi
run unsealed-polls 4 polls --json "$tmp/unsealed" && check unsealed-polls "
got = sorted((p['coroutine'], p['duration_ns']) for p in lines())
if got != [(6, 10000), (9, 20000)]:
    fail('polls (coroutine, ns): %s' % got)
"
# html checks its inputs by the same rule: the trailer-less segment makes it exit 4
run unsealed-html 4 html -o "$tmp/unsealed.html" "$tmp/unsealed" && check unsealed-html "
if 'trace.200.000000.bin' not in err or 'no trailer' not in err:
    fail('stderr does not name the segment without a trailer: %r' % err[:300])
"
run drop-html 0 html -o "$tmp/drop.html" "$tmp/drop" && check drop-html "
if err:
    fail('stderr: %r' % err[:300])
"

# ---- seqgap ------------------------------------------------------------------------------------
if run seqgap-summary 0 summary --json "$tmp/seqgap"; then
	check seqgap-summary "
s = obj(); q = s['data_quality']
want = {'seq_gaps': 1, 'polls_unknown': 1, 'sched_delay_unknown': 1, 'truncated_segments': 0}
for k, v in want.items():
    if q.get(k) != v:
        fail('data_quality.%s = %s, want %s' % (k, q.get(k), v))
if (s['polls']['count'], s['polls']['max_ns'], s['sched_delay']['count']) != (1, 10000, 0):
    fail('polls %s, sched_delay %s' % (s['polls'], s['sched_delay']))
"
fi

# ---- live, then dead ---------------------------------------------------------------------------
if run live-summary 0 summary --json "$tmp/live"; then
	check live-summary "
q = obj()['data_quality']
if (q['live_segments'], q['truncated_segments'], q['damaged_files']) != (1, 0, 0):
    fail('live .active: %s' % q)
"
fi
{ kill -KILL "$live_pid"; wait "$live_pid"; } 2>/dev/null # braces: no "Killed" notice
live_pid=
if run dead-summary 4 summary --json "$tmp/live"; then
	check dead-summary "
q = obj()['data_quality']
if (q['live_segments'], q['truncated_segments'], q['damaged_files']) != (0, 1, 1):
    fail('.active of a dead process: %s' % q)
"
fi

# ---- a segment as .bin and .bin.gz (killed between the compressor's rename and unlink) --------
# the directory's X.bin next to X.bin.gz is the same segment: read once, not counted twice
mkdir "$tmp/twin"
cp tests/golden/basic.bin "$tmp/twin/trace.7.000000.bin"
gzip -c tests/golden/basic.bin >"$tmp/twin/trace.7.000000.bin.gz"
if run twin-one 0 summary --json tests/golden/basic.bin && run twin-both 0 summary --json "$tmp/twin"; then
	check twin-both "
one = json.load(open('$tmp/twin-one.out'))
s = obj()
if (s['events'], s['data_quality']['files']) != (one['events'], 1):
    fail('%d events in %d files, want %d in 1' % (s['events'], s['data_quality']['files'], one['events']))
"
fi
