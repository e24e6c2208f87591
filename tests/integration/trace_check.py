#!/usr/bin/env python3
"""trace_check.py: loads what `d9-analyze dump` prints for a trace directory into per-segment,
per-process and per-thread structures and offers the checks that the preload integration tests
(test-preload-*.sh) share. It reads only the dump's JSON lines (format/FORMAT.md, section 13),
never the binary format, and never trusts the agent: every id is resolved in its own segment.

Run as `trace_check.py NAME TRACE_DIR CODE [ARG...]`: loads TRACE_DIR into `tr` (decoding it once)
and runs the Python CODE with `tr`, `args` (the ARGs) and every name of this module in scope.
CODE reports results with `with case("name") as c: ...`: the block prints "PASS name[: c.info]",
or "FAIL name: why" when it calls fail(msg) / require(errors) or raises. If CODE raises outside
a case, or the trace cannot be loaded, one "FAIL NAME: why" is printed. The exit status is
always 0: run.sh counts the lines.

Time: event times are compared through the dump's mono_ns (CLOCK_MONOTONIC ns, from the header's
anchor); a Wake object in time units is converted with the header's ticks_per_sec and time_shift.
"""
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ANALYZE = os.path.join(ROOT, "build", "d9-analyze")

# Enumerations of FORMAT.md section 8.
WAKE_OTHER, WAKE_FD, WAKE_TIMER, WAKE_COND, WAKE_MUTEX, WAKE_JOIN, WAKE_INTERRUPT, WAKE_SPAWN = range(8)
CALL_EPOLL_WAIT, CALL_POLL, CALL_SELECT = 1, 4, 6
FD_NONE, FD_FILE, FD_SOCKET = 0, 1, 2
ROLE_WORKER = 1
# Event types that only a runtime adapter (State Threads) records.
COROUTINE_TYPES = ("PollStart", "PollEnd", "Wake", "Spawn", "CoroutineExit", "QueueSample")


class Fail(Exception):
    pass


def fail(msg):
    raise Fail(msg)


class Skip(Exception):
    pass


def skip(msg):
    """The run did not meet the check's precondition (a timing the machine did not give): SKIP,
    counted, with the reason; never a PASS."""
    raise Skip(msg)


def require(errors, what=""):
    """Fails with the first few of a list of error strings, if any."""
    if errors:
        more = " (+%d more)" % (len(errors) - 3) if len(errors) > 3 else ""
        fail((what + ": " if what else "") + "; ".join(errors[:3]) + more)


def ms(ns):
    return "%.3f ms" % (ns / 1e6)


# ---- loading ---------------------------------------------------------------------------------


class Segment:
    """One segment file: its header, definitions (ids are per segment), events, trailer."""

    def __init__(self, name):
        self.name = name
        self.header = None
        self.trailer = None
        self.end = None
        self.problems = []
        self.strings = {}
        self.locations = {}
        self.stacks = {}
        self.coroutine_defs = {}  # id -> Coroutine definition
        self.threads = {}  # tid -> the last Thread definition (the last one wins)
        self.thread_defs = []  # every Thread definition, in order
        self.events = []
        self.pid = None
        self.seq = None

    def string(self, sid):
        return self.strings.get(sid) if sid else None

    def location(self, lid):
        return self.locations.get(lid) if lid else None

    def location_name(self, lid):
        loc = self.location(lid)
        return self.string(loc["name"]) if loc else None

    def time_unit_ns(self):
        """Nanoseconds per event time unit: 2^time_shift ticks at ticks_per_sec."""
        h = self.header
        return (1 << h["time_shift"]) * 1e9 / h["ticks_per_sec"]

    def thread_name(self, tid):
        t = self.threads.get(tid)
        return self.string(t["name"]) if t else None


class Proc:
    """One process (pid): its segments in file order and each thread's events in file order."""

    def __init__(self, pid):
        self.pid = pid
        self.segments = []
        self.tids = collections.OrderedDict()  # tid -> [event...] in file order

    def events(self, types=None):
        for evs in self.tids.values():
            for e in evs:
                if types is None or e["type"] in types:
                    yield e

    def thread_def(self, tid):
        """The last Thread definition of tid in this process, with its segment."""
        for seg in reversed(self.segments):
            if tid in seg.threads:
                return seg.threads[tid], seg
        return None, None


def merge_samples(evs):
    """A thread's events with its CpuSamples merged in by time, as the analyzer does: the agent
    writes samples in chunks of their own, before the chunks with the thread's later events, so
    in file order a sample may precede events older than itself (so may the Dropped(samples_lost)
    events of those chunks). A sample goes just before the
    first other event with a later time (ties: the other event first)."""
    def of_samples(e):  # the profiler's chunks: samples and their Dropped(samples_lost)
        return e["type"] == "CpuSample" or (e["type"] == "Dropped" and e["reason"] == 3)
    samples = [e for e in evs if of_samples(e)]
    if not samples:
        return evs
    others = [e for e in evs if not of_samples(e)]
    out, i = [], 0
    for e in others:
        while i < len(samples) and samples[i]["mono_ns"] < e["mono_ns"]:
            out.append(samples[i])
            i += 1
        out.append(e)
    out.extend(samples[i:])
    for k, e in enumerate(out):
        e["_ti"] = k
    return out


class Trace:
    """The dump of one or more trace paths (files or directories)."""

    def __init__(self, *paths):
        self.paths = paths
        p = subprocess.run([ANALYZE, "dump"] + list(paths), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        self.rc = p.returncode
        self.stderr = p.stderr.decode(errors="replace")
        self.segments = []
        self.problems = []
        self.procs = collections.OrderedDict()
        self.bad_lines = 0
        self.nevents = 0
        seg = None
        lines = p.stdout.splitlines()
        try:  # one parse of the whole output is several times faster than one per line
            records = json.loads(b"[" + b",".join(lines) + b"]")
        except ValueError:
            records = []
            for raw in lines:
                try:
                    records.append(json.loads(raw))
                except ValueError:
                    self.bad_lines += 1
        for r in records:
            rec = r.get("rec") if isinstance(r, dict) else None
            if rec == "file":
                seg = Segment(r["name"])
                self.segments.append(seg)
            elif seg is None:
                self.bad_lines += 1
            elif rec == "header":
                seg.header = r
                seg.pid = r["pid"]
                seg.seq = r["segment"]
                proc = self.procs.setdefault(r["pid"], Proc(r["pid"]))
                proc.segments.append(seg)
            elif rec == "def":
                k = r["kind"]
                if k == "String":
                    seg.strings[r["id"]] = r["value"]
                elif k == "SpawnLocation":
                    seg.locations[r["id"]] = r
                elif k == "Stack":
                    seg.stacks[r["id"]] = r["frames"]
                elif k == "Coroutine":
                    seg.coroutine_defs[r["id"]] = r
                elif k == "Thread":
                    seg.threads[r["tid"]] = r
                    seg.thread_defs.append(r)
            elif rec == "event":
                r["_seg"] = seg
                r["_i"] = self.nevents  # position in file order: comparable across segments
                self.nevents += 1
                seg.events.append(r)
                lst = self.procs[seg.pid].tids.setdefault(r["tid"], [])
                r["_ti"] = len(lst)  # position in its thread's list
                lst.append(r)
            elif rec == "trailer":
                seg.trailer = r
            elif rec == "end":
                seg.end = r
            elif rec == "problem":
                seg.problems.append(r)
                self.problems.append((seg.name, r))
        for proc in self.procs.values():
            for tid, evs in proc.tids.items():
                proc.tids[tid] = merge_samples(evs)

    def events(self, types=None):
        for proc in self.procs.values():
            yield from proc.events(types)

    def count(self, typ):
        return sum(1 for _ in self.events((typ,)))

    def the_proc(self):
        """The only process of the trace (fails if there is not exactly one)."""
        if len(self.procs) != 1:
            fail("expected one process in the trace, found pids %s (files %s)"
                 % (list(self.procs), [s.name for s in self.segments]))
        return next(iter(self.procs.values()))


# ---- generic checks (each returns a list of error strings) --------------------------------------


def check_decodes_clean(tr, sealed=True, allow_dropped=False):
    """The dump exited 0 with no problem record, every file was read to its end without corrupt
    chunks, bad events or bad definitions, sealed files only (with sealed=True), no Dropped
    (allow_dropped: True for any, or a tuple of the reason codes allowed)."""
    errs = []
    if not tr.segments:
        errs.append("no segment file in %s" % (tr.paths,))
    if tr.rc != 0:
        errs.append("d9-analyze dump exited %d: %s" % (tr.rc, tr.stderr.strip()[:200]))
    if tr.bad_lines:
        errs.append("%d dump lines are not JSON records" % tr.bad_lines)
    for name, p in tr.problems:
        errs.append("%s: problem %s at %d: %s" % (name, p["kind"], p["offset"], p["message"]))
    for s in tr.segments:
        if s.header is None:
            errs.append("%s: no header" % s.name)
            continue
        e = s.end or {}
        for k in ("corrupt_chunks", "unknown_chunks", "bad_events", "bad_defs", "skipped_bytes"):
            if e.get(k):
                errs.append("%s: %s = %d" % (s.name, k, e[k]))
        if sealed and not e.get("sealed"):
            errs.append("%s: not sealed (no trailer)" % s.name)
        if sealed and s.name.endswith(".active"):
            errs.append("%s: still .active" % s.name)
    if allow_dropped is not True:
        for ev in tr.events(("Dropped",)):
            if allow_dropped and ev.get("reason") in allow_dropped:
                continue
            errs.append("Dropped event: count %s reason %s at %s offset %d"
                        % (ev.get("count"), ev.get("reason"), ev["_seg"].name, ev["offset"]))
    return errs


def check_ids_defined(tr):
    """Every id an event uses is defined in the event's own segment (FORMAT.md section 10):
    PollStart/Spawn locations, BlockingCall call strings and stacks, and a Thread definition
    for every thread with events in the segment."""
    errs = []
    for s in tr.segments:
        tids = set()
        for e in s.events:
            t = e["type"]
            tids.add(e["tid"])
            if t in ("PollStart", "Spawn") and e["location"] and e["location"] not in s.locations:
                errs.append("%s offset %d: %s location %d undefined" % (s.name, e["offset"], t, e["location"]))
            elif t == "BlockingCall":
                if e["call"] not in s.strings:
                    errs.append("%s offset %d: BlockingCall call string %d undefined" % (s.name, e["offset"], e["call"]))
                if e["stack"] and e["stack"] not in s.stacks:
                    errs.append("%s offset %d: BlockingCall stack %d undefined" % (s.name, e["offset"], e["stack"]))
        for tid in sorted(tids - set(s.threads)):
            errs.append("%s: events of thread %d but no Thread definition" % (s.name, tid))
        for loc in s.locations.values():
            if loc["name"] and loc["name"] not in s.strings:
                errs.append("%s: SpawnLocation %d names undefined string %d" % (s.name, loc["id"], loc["name"]))
        for td in s.thread_defs:
            if td["name"] and td["name"] not in s.strings:
                errs.append("%s: Thread %d names undefined string %d" % (s.name, td["tid"], td["name"]))
    return errs


def check_coroutine_defs(tr):
    """FORMAT.md section 10: every id an event uses is defined in the same segment, and for
    coroutine ids "each segment still carries its own Coroutine definition". So every coroutine
    named by an event of a segment has a Coroutine definition there, whose parent and location
    agree with its Spawn when the Spawn is in that segment."""
    errs = []
    for s in tr.segments:
        used = collections.OrderedDict()
        for e in s.events:
            for k in ("coroutine", "woken", "waker", "parent"):
                if e["type"] in COROUTINE_TYPES + ("BlockingCall",) and e.get(k):
                    used.setdefault(e[k], e)
        missing = [c for c in used if c not in s.coroutine_defs]
        if missing:
            errs.append("%s: %d of %d coroutines named by events have no Coroutine definition "
                        "(first: %d, at offset %d)" % (s.name, len(missing), len(used), missing[0],
                                                        used[missing[0]]["offset"]))
        for e in s.events:
            d = s.coroutine_defs.get(e["coroutine"]) if e["type"] == "Spawn" else None
            if d and (d["parent"], s.location_name(d["location"]) if d["location"] else None,
                      s.location(d["location"])) != (e["parent"], s.location_name(e["location"]),
                                                     s.location(e["location"])):
                errs.append("%s: Coroutine definition %s disagrees with its Spawn at offset %d"
                            % (s.name, d, e["offset"]))
    return errs


def check_poll_locations(tr):
    """Every PollStart names the location its coroutine was spawned at (resolved in each
    event's own segment: ids differ between segments)."""
    errs = []

    def key(seg, lid):
        loc = seg.location(lid)
        return (loc["function_addr"], loc["callsite_addr"], seg.string(loc["name"])) if loc else None

    for pid, proc in tr.procs.items():
        where = {}
        for e in proc.events(("Spawn",)):
            where[e["coroutine"]] = key(e["_seg"], e["location"])
        for e in proc.events(("PollStart",)):
            want = where.get(e["coroutine"])
            got = key(e["_seg"], e["location"])
            if want is not None and got != want:
                errs.append("pid %d: PollStart of %d (%s offset %d) at location %s, spawned at %s"
                            % (pid, e["coroutine"], e["_seg"].name, e["offset"], got, want))
    return errs


def check_series(tr):
    """Each process's segments are named trace.<pid>.<seq>.* after their header's pid and
    segment number, and its segment numbers are 0, 1, 2... in file order."""
    errs = []
    for pid, proc in tr.procs.items():
        seqs = [s.seq for s in proc.segments]
        if seqs != list(range(len(seqs))):
            errs.append("pid %d: segment numbers %s are not 0..%d" % (pid, seqs, len(seqs) - 1))
        for s in proc.segments:
            parts = s.name.split(".")
            if len(parts) < 4 or parts[1] != str(pid) or int(parts[2]) != s.seq:
                errs.append("%s: header says pid %d segment %d" % (s.name, pid, s.seq))
    return errs


def check_thread_order(tr):
    """Within each thread, event times never go back (file order is the thread's order)."""
    errs = []
    for pid, proc in tr.procs.items():
        for tid, evs in proc.tids.items():
            last = None
            for e in evs:
                if last is not None and e["mono_ns"] < last["mono_ns"]:
                    errs.append("pid %d tid %d: %s at %s (offset %d) is %d ns before the previous"
                                " %s (offset %d)" % (pid, tid, e["type"], e["_seg"].name,
                                                     e["offset"], last["mono_ns"] - e["mono_ns"],
                                                     last["type"], last["offset"]))
                last = e
    return errs


def check_polls_and_parks(tr, open_poll_at_end=False):
    """Per (pid, tid): a PollStart never comes while a poll is open, a PollEnd closes the open
    poll of the same coroutine, no Park happens while a poll is open or the thread is parked,
    every Unpark follows a Park, no poll starts while the thread is parked. With
    open_poll_at_end=False no poll may be left open at the end of the trace (a clean exit ends
    the running coroutine's poll)."""
    errs = []
    for pid, proc in tr.procs.items():
        for tid, evs in proc.tids.items():
            open_co = None
            open_ev = None
            parked = False
            where = lambda e: "pid %d tid %d %s offset %d" % (pid, tid, e["_seg"].name, e["offset"])
            for e in evs:
                t = e["type"]
                if t == "PollStart":
                    if open_co is not None:
                        errs.append("%s: PollStart of %d while the poll of %d (offset %d) is open"
                                    % (where(e), e["coroutine"], open_co, open_ev["offset"]))
                    if parked:
                        errs.append("%s: PollStart of %d while parked" % (where(e), e["coroutine"]))
                    open_co, open_ev = e["coroutine"], e
                elif t == "PollEnd":
                    if open_co is None:
                        errs.append("%s: PollEnd of %d with no poll open" % (where(e), e["coroutine"]))
                    elif open_co != e["coroutine"]:
                        errs.append("%s: PollEnd of %d while the open poll is %d's"
                                    % (where(e), e["coroutine"], open_co))
                    open_co = open_ev = None
                elif t == "Park":
                    if open_co is not None:
                        errs.append("%s: Park while the poll of %d (offset %d) is open"
                                    % (where(e), open_co, open_ev["offset"]))
                    if parked:
                        errs.append("%s: Park while already parked" % where(e))
                    parked = True
                elif t == "Unpark":
                    if not parked:
                        errs.append("%s: Unpark without a Park" % where(e))
                    parked = False
            if open_co is not None and not open_poll_at_end:
                errs.append("pid %d tid %d: the poll of %d (offset %d) is still open at the end"
                            % (pid, tid, open_co, open_ev["offset"]))
    return errs


class Coroutine:
    def __init__(self, cid):
        self.id = cid
        self.spawn = None  # the Spawn event
        self.spawns = 0
        self.tids = set()
        self.polls = []  # [PollStart, PollEnd or None]
        self.wakes = []  # Wake events naming it as woken
        self.exit = None
        self.exits = 0

    @property
    def parent(self):
        return self.spawn["parent"] if self.spawn else None

    @property
    def location(self):
        return self.spawn["location"] if self.spawn else None

    @property
    def seg(self):
        return self.spawn["_seg"] if self.spawn else None

    def location_def(self):
        return self.seg.location(self.location) if self.spawn else None

    def location_name(self):
        return self.seg.location_name(self.location) if self.spawn else None

    def poll_ns(self):
        return [(p[1]["mono_ns"] - p[0]["mono_ns"]) if p[1] else None for p in self.polls]


def coroutines(proc):
    """The coroutines of one process, by id, in order of first appearance."""
    cos = collections.OrderedDict()

    def co(cid):
        if cid not in cos:
            cos[cid] = Coroutine(cid)
        return cos[cid]

    for tid, evs in proc.tids.items():
        for e in evs:
            t = e["type"]
            if t == "Spawn":
                c = co(e["coroutine"])
                c.spawns += 1
                if c.spawn is None:
                    c.spawn = e
                c.tids.add(tid)
            elif t == "PollStart":
                c = co(e["coroutine"])
                c.polls.append([e, None])
                c.tids.add(tid)
            elif t == "PollEnd":
                c = co(e["coroutine"])
                if c.polls and c.polls[-1][1] is None:
                    c.polls[-1][1] = e
            elif t == "Wake":
                co(e["woken"]).wakes.append(e)
            elif t == "CoroutineExit":
                c = co(e["coroutine"])
                c.exits += 1
                if c.exit is None:
                    c.exit = e
    return cos


def check_lifetimes(tr):
    """Per process: no coroutine id is spawned twice, the primordial coroutine (location named
    "main", no parent) has a Spawn, every coroutine that polls was spawned first on its thread,
    runs on one thread only, exits at most once, and nothing about it (poll, wake) happens after
    its CoroutineExit; a CoroutineExit comes with no poll of it open."""
    errs = []
    for pid, proc in tr.procs.items():
        cos = coroutines(proc)
        mains = [c for c in cos.values() if c.spawn and c.parent == 0 and c.location_name() == "main"]
        if any(proc.events(("PollStart",))) and len(mains) != 1:
            errs.append("pid %d: %d primordial Spawns (location \"main\", no parent), want 1"
                        % (pid, len(mains)))
        for c in cos.values():
            if c.spawns > 1:
                errs.append("pid %d: coroutine %d spawned %d times" % (pid, c.id, c.spawns))
            if c.exits > 1:
                errs.append("pid %d: coroutine %d exited %d times" % (pid, c.id, c.exits))
            if len(c.tids) > 1:
                errs.append("pid %d: coroutine %d ran on threads %s" % (pid, c.id, sorted(c.tids)))
            if c.polls and c.spawn is None:
                errs.append("pid %d: coroutine %d polls (first at offset %d) but was never spawned"
                            % (pid, c.id, c.polls[0][0]["offset"]))
        # order within each thread: index of every event
        for tid, evs in proc.tids.items():
            spawned, exited, open_poll = set(), set(), None
            for e in evs:
                t = e["type"]
                if t == "Spawn":
                    spawned.add(e["coroutine"])
                elif t == "PollStart":
                    cid = e["coroutine"]
                    if cid not in spawned:
                        errs.append("pid %d tid %d: PollStart of %d (offset %d) before its Spawn"
                                    % (pid, tid, cid, e["offset"]))
                    if cid in exited:
                        errs.append("pid %d tid %d: PollStart of %d (offset %d) after its "
                                    "CoroutineExit" % (pid, tid, cid, e["offset"]))
                    open_poll = cid
                elif t == "PollEnd":
                    open_poll = None
                elif t == "Wake":
                    if e["woken"] in exited:
                        errs.append("pid %d tid %d: Wake of %d (offset %d) after its CoroutineExit"
                                    % (pid, tid, e["woken"], e["offset"]))
                    if e["woken"] not in spawned:
                        errs.append("pid %d tid %d: Wake of %d (offset %d) before its Spawn"
                                    % (pid, tid, e["woken"], e["offset"]))
                elif t == "CoroutineExit":
                    cid = e["coroutine"]
                    if open_poll == cid:
                        errs.append("pid %d tid %d: CoroutineExit of %d (offset %d) inside its "
                                    "own open poll" % (pid, tid, cid, e["offset"]))
                    if cid not in spawned:
                        errs.append("pid %d tid %d: CoroutineExit of %d (offset %d) before its "
                                    "Spawn" % (pid, tid, cid, e["offset"]))
                    exited.add(cid)
    return errs


def check_one_wake_per_poll(tr):
    """Per process: between a coroutine's Spawn or PollEnd and its next PollStart there is
    exactly one Wake naming it (the first poll of the primordial coroutine excepted: it is
    running when st_init returns), and no Wake names a coroutine whose poll is open."""
    errs = []
    for pid, proc in tr.procs.items():
        for tid, evs in proc.tids.items():
            pending = {}  # coroutine -> wakes since its Spawn / last PollEnd
            running = None
            primordial = set()
            for e in evs:
                t = e["type"]
                if t == "Spawn":
                    pending[e["coroutine"]] = 0
                    if e["parent"] == 0 and e["_seg"].location_name(e["location"]) == "main":
                        primordial.add(e["coroutine"])
                elif t == "Wake":
                    w = e["woken"]
                    if w == running:
                        errs.append("pid %d tid %d: Wake of %d (offset %d) while it runs"
                                    % (pid, tid, w, e["offset"]))
                    pending[w] = pending.get(w, 0) + 1
                elif t == "PollStart":
                    c = e["coroutine"]
                    n = pending.get(c, 0)
                    if c in primordial and n == 0:
                        primordial.discard(c)
                    elif n != 1:
                        errs.append("pid %d tid %d: PollStart of %d (offset %d) after %d Wakes "
                                    "of it, want 1" % (pid, tid, c, e["offset"], n))
                    primordial.discard(c)
                    pending[c] = 0
                    running = c
                elif t == "PollEnd":
                    running = None
                    pending[e["coroutine"]] = 0
    return errs


def check_queue_samples(tr):
    """Per thread: every QueueSample's `runnable` equals the number of coroutines the trace has
    shown woken (a Wake naming them) and not yet started (no PollStart since)."""
    errs = []
    for pid, proc in tr.procs.items():
        for tid, evs in proc.tids.items():
            woken = set()
            for e in evs:
                t = e["type"]
                if t == "Wake":
                    woken.add(e["woken"])
                elif t == "PollStart":
                    woken.discard(e["coroutine"])
                elif t == "QueueSample" and e["runnable"] != len(woken):
                    errs.append("pid %d tid %d: QueueSample runnable %d at offset %d, the trace has "
                                "%d woken and not started (%s)" % (pid, tid, e["runnable"], e["offset"],
                                                                  len(woken), sorted(woken)[:8]))
    return errs


def check_fd_wakes_one_fd(tr):
    """Each coroutine's fd Wakes (no waker) all name one descriptor. True of programs whose
    coroutines each wait on one socket (st-http: the listener, or one connection); a Wake
    naming another descriptor means readiness was credited to the wrong waiter."""
    errs = []
    for pid, proc in tr.procs.items():
        fds = collections.defaultdict(set)
        for e in proc.events(("Wake",)):
            if e["kind"] == WAKE_FD:
                fds[e["woken"]].add(e["object"])
                if e["waker"] != 0 or e["object"] < 0:
                    errs.append("pid %d: fd Wake of %d at offset %d: waker %d, fd %d"
                                % (pid, e["woken"], e["offset"], e["waker"], e["object"]))
        for co, s in fds.items():
            if len(s) != 1:
                errs.append("pid %d: coroutine %d woken by fds %s" % (pid, co, sorted(s)))
    return errs


def check_st_invariants(tr, open_poll_at_end=False):
    """Everything that holds for a trace of st-http (every State Threads program, but for the
    one-descriptor rule of check_fd_wakes_one_fd)."""
    return (check_thread_order(tr) + check_polls_and_parks(tr, open_poll_at_end) +
            check_lifetimes(tr) + check_one_wake_per_poll(tr) + check_queue_samples(tr) +
            check_ids_defined(tr) + check_poll_locations(tr) + check_fd_wakes_one_fd(tr))


# ---- symbols: the servers are PIEs without -rdynamic --------------------------------------------


class Symbols:
    """Function symbols of a binary (`nm -S --defined-only`, static ones included) and its load
    base, read from a copy of /proc/PID/maps taken while it ran."""

    def __init__(self, binary, maps_path=None):
        self.binary = os.path.realpath(binary)
        self.funcs = {}  # name -> (offset, size)
        out = subprocess.run(["nm", "-S", "--defined-only", self.binary], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, check=True).stdout.decode()
        for line in out.splitlines():
            f = line.split()
            if len(f) == 4 and f[2] in "tTwW":
                self.funcs[f[3]] = (int(f[0], 16), int(f[1], 16))
        self.base = None
        if maps_path:
            self.base = module_base(maps_path, self.binary)

    def addr(self, name):
        """Absolute [start, end) of a function in the running process."""
        off, size = self.funcs[name]
        return self.base + off, self.base + off + size

    def name_of(self, addr):
        """The function of the binary containing an absolute address, or None."""
        if self.base is None:
            return None
        off = addr - self.base
        for name, (start, size) in self.funcs.items():
            if start <= off < start + size:
                return name
        return None

    def contains(self, name, addr, return_address=False):
        """addr is inside function `name`; a return address may also be the byte after it."""
        lo, hi = self.addr(name)
        return lo <= addr < hi or (return_address and addr == hi)


def module_base(maps_path, binary):
    """The address where the file offset 0 of `binary` is mapped by the loader (a PIE's load
    base). Other mappings of the same file may be there too: the agent's libdw maps a module
    read-only, at offset 0, while it symbolizes or unwinds, and a copy of the maps taken then
    lists that one as well (rt-srs-shared-stack-root once took its address for libst's base).
    The loader's is the offset-0 mapping followed by the code where GNU ld puts it: an
    executable mapping at base + its file offset."""
    real = os.path.realpath(binary)
    maps = []
    with open(maps_path) as fh:
        for line in fh:
            f = line.split()
            if len(f) >= 6 and os.path.realpath(f[5]) == real:
                lo = int(f[0].split("-")[0], 16)
                maps.append((lo, f[1], int(f[2], 16)))
    code = [(lo, off) for lo, perms, off in maps if "x" in perms]
    for lo, perms, off in maps:
        if off == 0 and any(c - coff == lo for c, coff in code):
            return lo
    first = [lo for lo, perms, off in maps if off == 0]
    if first:
        return first[0] # a layout where code does not sit at its file offset (not GNU ld's)
    fail("%s is not mapped in %s" % (binary, maps_path))


def module_of(maps_path, addr):
    """The base name of the file mapped at an absolute address in a copy of /proc/PID/maps."""
    with open(maps_path) as fh:
        for line in fh:
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if lo <= addr < hi:
                return os.path.basename(f[5]) if len(f) >= 6 else "[anonymous]"
    return "?"


def describe_frames(frames, syms, maps_path):
    """Names for stack frames (return addresses: the call is the byte before): a function of
    the binary, else the module they lie in."""
    return [syms.name_of(a - 1) or module_of(maps_path, a - 1) for a in frames]


def location_is(seg, loc_id, func, syms):
    """(ok, how): the SpawnLocation names `func`, by its name when the agent found one
    (dladdr), else by its function address resolved with the binary's symbols."""
    loc = seg.location(loc_id)
    if loc is None:
        return False, "location %s is not defined in %s" % (loc_id, seg.name)
    name = seg.string(loc["name"])
    if name:
        return name == func, "name %r" % name
    lo, _ = syms.addr(func)
    got = syms.name_of(loc["function_addr"])
    return loc["function_addr"] == lo, "no name; function_addr %#x is %s" % (
        loc["function_addr"], got if got else "outside the binary")


# ---- process helpers ----------------------------------------------------------------------------


def serve_conn_coroutines(proc, syms):
    """The connection coroutines of st-http (spawned at serve_conn), in spawn order."""
    cos = coroutines(proc)
    out = []
    for c in cos.values():
        if c.spawn and location_is(c.seg, c.location, "serve_conn", syms)[0]:
            out.append(c)
    out.sort(key=lambda c: c.spawn["_i"])
    return out


def next_in_thread(proc, ev, pred):
    """The first event after ev on ev's thread that satisfies pred, or None."""
    evs = proc.tids[ev["tid"]]
    for i in range(ev["_ti"] + 1, len(evs)):
        if pred(evs[i]):
            return evs[i]
    return None


def prev_in_thread(proc, ev, pred):
    evs = proc.tids[ev["tid"]]
    for i in range(ev["_ti"] - 1, -1, -1):
        if pred(evs[i]):
            return evs[i]
    return None


def load_json(path):
    with open(path) as fh:
        return json.load(fh)


class case:
    """A named check: prints PASS, FAIL or SKIP (skip()) for the block it wraps (see the file head)."""

    def __init__(self, name):
        self.name = name
        self.info = ""

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if typ is None:
            print("PASS %s%s" % (self.name, ": " + self.info if self.info else ""))
        elif issubclass(typ, Fail):
            print("FAIL %s: %s" % (self.name, exc))
        elif issubclass(typ, Skip):
            print("SKIP %s: %s" % (self.name, exc))
        elif issubclass(typ, Exception):
            print("FAIL %s: checker error %s: %s (line %s)" % (self.name, typ.__name__, exc,
                                                               _code_line(tb)))
        else:
            return False
        sys.stdout.flush()
        return True


def _code_line(tb):
    import traceback
    frames = traceback.extract_tb(tb)
    return ",".join(str(f.lineno) for f in frames[-2:])


def main():
    if len(sys.argv) < 4:
        print("usage: trace_check.py NAME TRACE_DIR CODE [ARG...]", file=sys.stderr)
        sys.exit(2)
    name, path, code = sys.argv[1], sys.argv[2], sys.argv[3]
    env = dict(globals())
    env["args"] = sys.argv[4:]
    try:
        env["tr"] = Trace(path)
        exec(code, env)
    except Fail as e:
        print("FAIL %s: %s" % (name, e))
    except Exception as e:  # a checker bug must still be one FAIL line
        print("FAIL %s: checker error %s: %s (line %s)" % (name, type(e).__name__, e,
                                                           _code_line(sys.exc_info()[2])))


if __name__ == "__main__":
    main()
