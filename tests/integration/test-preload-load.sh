#!/usr/bin/env bash
# test-preload-load.sh: the State Threads server under wrk load, traced with the default memory
# cap (D9_MAX_MEMORY 64M) and flush interval.
#   - select mode, wrk -t2 -c16 -d3s on /fast: the trace decodes cleanly (no problem, no bad event,
#     no Dropped event), every invariant of a State Threads trace still holds, the coroutine counts
#     are exact (one connection coroutine per connection the server counted, each exited but the
#     control connection's), and the cost is sane: 1..40 events and < 16 bytes per event
#     (uncompressed), for the requests the server counted. Reports events/request and
#     bytes/request (uncompressed and as stored).
#   - the same checks with D9_MAX_FILE_SIZE=1M (wrk in 1 s rounds until the trace rotated, 8 at
#     most): several segments, named and numbered as one series, each decoding alone (ids
#     resolved per segment, coroutines followed across), and each carrying a Coroutine
#     definition for every coroutine its events name (FORMAT.md section 10).
#   - generic mode, epoll-http -T 2 under wrk -t2 -c16 -d2s on /fast: clean decode, no Dropped,
#     Park/Unpark alternating on each of the two worker threads (epoll_wait only), no coroutine
#     event; reports events/request.
#   - poll mode, wrk -t1 -c4 -d2s on /sleep?ms=2: libst's poll loop spins on zero-timeout polls
#     while a sub-millisecond timer is due (ST-NOTES.md: ~70,000 polls for 5 connections); those
#     must not become Park/Unpark pairs: at most 5 parks per request (+50).
set -u
. "$(dirname "$0")/lib-preload.sh"
pl_setup preload-load

if ! command -v wrk >/dev/null; then
	pl_skip load "wrk is not installed (make deps)"
	exit 0
fi

read -r -d '' COMMON <<'PYEOF'
import gzip
binary, maps, stats_path, endpoint = args[0], args[1], args[2], args[3]
syms = Symbols(binary, maps)
stats = load_json(stats_path)
nreq = stats["requests"][endpoint]
nev = sum(len(s.events) for s in tr.segments)

def trace_bytes():
    raw = stored = 0
    for name in os.listdir(tr.paths[0]):
        path = os.path.join(tr.paths[0], name)
        stored += os.path.getsize(path)
        if name.endswith(".gz"):
            with gzip.open(path) as fh:
                raw += len(fh.read())
        else:
            raw += os.path.getsize(path)
    return raw, stored

with case(prefix + "-decode") as c:
    require(check_decodes_clean(tr))
    if nreq < 100:
        fail("the server answered only %d %s requests under wrk" % (nreq, endpoint))
    c.info = "%d events for %d requests in %d segment(s)" % (nev, nreq, len(tr.segments))

with case(prefix + "-invariants"):
    require(check_st_invariants(tr))

with case(prefix + "-counts") as c:
    proc = tr.the_proc()
    conns = serve_conn_coroutines(proc, syms)
    total = stats["connections_total"]
    spawns, exits = tr.count("Spawn"), tr.count("CoroutineExit")
    if len(conns) != total or spawns != total + 1 or exits != total - 1:
        fail("%d connection coroutines, %d Spawns, %d CoroutineExits; the server counted %d "
             "connections (want %d, %d, %d)" % (len(conns), spawns, exits, total, total, total + 1, total - 1))
    c.info = "%d connections, %d Spawns, %d CoroutineExits" % (total, spawns, exits)
PYEOF

read -r -d '' FAST <<'PYEOF'
with case(prefix + "-cost") as c:
    raw, stored = trace_bytes()
    per_req = nev / nreq
    if not (1 <= per_req <= 40):
        fail("%.2f events per request" % per_req)
    if raw / nev >= 16:
        fail("%.1f bytes per event" % (raw / nev))
    types = collections.Counter(e["type"] for e in tr.events())
    c.info = ("%.2f events/request, %.1f bytes/request uncompressed (%.2f bytes/event), %.2f "
              "bytes/request stored; %d requests; per request: %s" % (per_req, raw / nreq, raw / nev,
              stored / nreq, nreq, ", ".join("%s %.2f" % (k, v / nreq) for k, v in types.most_common())))
PYEOF

read -r -d '' ROTATE <<'PYEOF'
with case(prefix + "-segments") as c:
    require(check_series(tr))
    if len(tr.segments) < 2:
        fail("%d segment(s) for %d events: no rotation happened" % (len(tr.segments), nev))
    c.info = "%d segments (%s)" % (len(tr.segments), ", ".join(s.name for s in tr.segments))

with case(prefix + "-coroutine-defs") as c:
    require(check_coroutine_defs(tr))
PYEOF

read -r -d '' SPIN <<'PYEOF'
with case(prefix + "-no-spin-parks") as c:
    parks = tr.count("Park")
    zero = sum(e.get("count", 0) for e in tr.events(("ZeroTimeoutWaits",)))
    if parks > 5 * nreq + 50:
        fail("%d Park/Unpark pairs for %d requests: zero-timeout polls are recorded as parks" % (parks, nreq))
    calls = collections.Counter(e["call"] for e in tr.events(("Park",)))
    if set(calls) != {CALL_POLL}:
        fail("Park calls %s, want poll (4) only" % dict(calls))
    zinfo = "; ZeroTimeoutWaits events count %d zero-timeout polls" % zero if zero else ""
    c.info = "%d parks for %d requests (%.2f per request)%s" % (parks, nreq, parks / nreq, zinfo)
PYEOF

# ---- select mode, /fast ------------------------------------------------------------------------------
p=load-select-fast
if pl_start "$T/$p" "$ST_HTTP" D9_FLUSH_INTERVAL=100ms --; then
	timeout -s KILL 30 wrk -t2 -c16 -d3s "http://127.0.0.1:$SPORT/fast" >"$T/$p.wrk" 2>&1
	if pl_session_quit && [ "$SRC" = 0 ]; then
		pl_pass "$p-run" "$(grep -E 'requests in' "$T/$p.wrk" | sed 's/^ *//')"
		pl_check "$p" "prefix = '$p'
$COMMON
$FAST" "$ST_HTTP" "$SDIR/maps" "$SDIR/stats.json" fast
	else
		pl_fail "$p-run" "${PL_ERR:-} exit status $SRC; wrk: $(tail -n 3 "$T/$p.wrk" | tr '\n' ' ')"
	fi
else
	pl_fail "$p" "$PL_ERR"
fi

# ---- select mode, /fast, rotating every 1M: the same checks across segments ----------------------------
p=load-select-rotate
if pl_start "$T/$p" "$ST_HTTP" D9_MAX_FILE_SIZE=1M D9_FLUSH_INTERVAL=100ms --; then
	# load in 1 s rounds until the writer has rotated (at most 8 rounds)
	for _ in $(seq 8); do
		timeout -s KILL 30 wrk -t2 -c16 -d1s "http://127.0.0.1:$SPORT/fast" >>"$T/$p.wrk" 2>&1
		[ "$(pl_trace_files "$SDIR/trace" | wc -l)" -ge 2 ] && break
	done
	if pl_session_quit && [ "$SRC" = 0 ]; then
		pl_check "$p" "prefix = '$p'
$COMMON
$ROTATE" "$ST_HTTP" "$SDIR/maps" "$SDIR/stats.json" fast
	else
		pl_fail "$p-run" "${PL_ERR:-} exit status $SRC; wrk: $(tail -n 3 "$T/$p.wrk" | tr '\n' ' ')"
	fi
else
	pl_fail "$p" "$PL_ERR"
fi

# ---- poll mode, /sleep?ms=2 ----------------------------------------------------------------------------
p=load-poll-sleep
if pl_start "$T/$p" "$ST_HTTP" D9_FLUSH_INTERVAL=100ms -- -e poll; then
	timeout -s KILL 30 wrk -t1 -c4 -d2s "http://127.0.0.1:$SPORT/sleep?ms=2" >"$T/$p.wrk" 2>&1
	if pl_session_quit && [ "$SRC" = 0 ]; then
		pl_pass "$p-run" "$(grep -E 'requests in' "$T/$p.wrk" | sed 's/^ *//')"
		pl_check "$p" "prefix = '$p'
$COMMON
$SPIN" "$ST_HTTP" "$SDIR/maps" "$SDIR/stats.json" sleep
	else
		pl_fail "$p-run" "${PL_ERR:-} exit status $SRC; wrk: $(tail -n 3 "$T/$p.wrk" | tr '\n' ' ')"
	fi
else
	pl_fail "$p" "$PL_ERR"
fi

# ---- generic mode: epoll-http -T 2 ---------------------------------------------------------------------
read -r -d '' GENERIC <<'PYEOF'
nreq = int(args[0])
with case("load-generic-epoll-trace") as c:
    require(check_decodes_clean(tr) + check_thread_order(tr) + check_polls_and_parks(tr) +
            check_ids_defined(tr))
    proc = tr.the_proc()
    types = collections.Counter(e["type"] for e in tr.events())
    if any(t in types for t in COROUTINE_TYPES):
        fail("coroutine events in generic mode: %s" % dict(types))
    calls = collections.Counter(e["call"] for e in tr.events(("Park",)))
    if set(calls) != {CALL_EPOLL_WAIT}:
        fail("Park calls %s" % dict(calls))
    workers = [t for t in proc.tids if (proc.thread_def(t)[0] or {}).get("role") == ROLE_WORKER]
    if len(workers) != 2 or len(proc.tids) != 2:
        fail("threads %s, workers %s: want the 2 worker threads only" % (list(proc.tids), workers))
    if nreq < 100:
        fail("only %d requests served" % nreq)
    nev = sum(types.values())
    c.info = "%d requests, %.2f events/request (%s)" % (nreq, nev / nreq, ", ".join(
        "%s %.2f" % (k, v / nreq) for k, v in types.most_common()))
PYEOF

if pl_start "$T/generic" "$EPOLL_HTTP" D9_FLUSH_INTERVAL=100ms -- -T 2; then
	timeout -s KILL 30 wrk -t2 -c16 -d2s "http://127.0.0.1:$SPORT/fast" >"$T/generic.wrk" 2>&1
	pl_get /stats
	nreq=$(echo "$BODY" | sed -n 's/.*"fast":\([0-9]*\).*/\1/p')
	pl_quit
	if [ "$SRC" = 0 ] && [ -n "$nreq" ]; then
		pl_check load-generic-epoll "$GENERIC" "$nreq"
	else
		pl_fail load-generic-epoll-run "exit status $SRC, /stats '$BODY'"
	fi
else
	pl_fail load-generic-epoll-run "$PL_ERR"
fi
