"""From a capture to a profile: the call tree, per-function totals, the memory timeline.

The native Aggregator folds events into a call tree; everything here works on that tree, whose
size is the number of distinct call paths, not the number of events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import _native
from ..capture import stop
from ..capture.reader import Capture, Function, Progress
from ..errors import LeadlineError

SORT_KEYS = {
    "calls": "calls",
    "incl": "incl_ns",
    "self": "self_ns",
    "rss": "incl_rss",
    "self-rss": "self_rss",
    "heap": "incl_heap",
    "self-heap": "self_heap",
    "peak": "peak_growth",
}

TIMELINE_POINTS = 2000
SCHEMA_VERSION = 1


@dataclass
class Node:
    id: int
    parent: int
    func: int
    thread: int
    calls: int
    incl_ns: int
    self_ns: int
    incl_rss: int
    self_rss: int
    incl_heap: int
    self_heap: int
    peak_growth: int
    peak_rss: int
    incl_sq: float = 0.0  # sum over calls of the squared inclusive time (ns^2)
    self_sq: float = 0.0  # sum over calls of the squared exclusive time (ns^2)

    def spread(self, attr: str) -> float:
        """The variance of this node's total `incl_ns` or `self_ns` over its calls, read as
        independent draws of one per-call distribution: calls x the per-call variance."""
        total = float(getattr(self, f"{attr}_ns"))
        squares = float(getattr(self, f"{attr}_sq"))
        return max(squares - total * total / self.calls, 0.0) if self.calls else 0.0


@dataclass
class FunctionStats:
    func: Function
    calls: int = 0
    incl_ns: int = 0
    self_ns: int = 0
    incl_rss: int = 0
    self_rss: int = 0
    incl_heap: int = 0
    self_heap: int = 0
    peak_rss: int = 0
    peak_growth: int = 0


@dataclass
class Mover:
    func: int
    thread: int
    start_ns: int
    end_ns: int
    rss_delta: int
    # Its thread's count of events at its call and at its return: a call made inside it has a
    # later call and a return no later, whatever the clock (one that moves every millisecond
    # gives a call and the one it made the same times).
    seq0: int
    seq1: int


@dataclass(frozen=True)
class CoarseClock:
    """The RSS sampler's clock, when a trace's events read it (`options.coarse_time`)."""

    period_ns: int  # its average step
    from_ns: int  # since the start of recording; before it each event read the CPU's counter


def coarse_clock(cap: Capture) -> CoarseClock | None:
    """The clock a trace's events read from some moment on, or None when every event read the
    CPU's counter: `--exact-time`, or a program that ended in the counter's first
    `_native.COARSE_WARMUP_PERIODS` periods (END's `coarse_from` null).  A capture with no
    `coarse_from` (an older writer's, or one with no END) is taken to read the sampler's clock
    from the start."""
    options = cap.meta.get("options")
    if not isinstance(options, dict) or options.get("coarse_time") is not True:
        return None
    from_ns = 0
    if cap.end and "coarse_from" in cap.end:
        start = cap.end["coarse_from"]
        if start is None:
            return None
        from_ns = max(0, cap.ns(start))
    period_us = options.get("rss_period_us")
    if isinstance(period_us, bool) or not isinstance(period_us, int) or period_us <= 0:
        period_us = 1000
    return CoarseClock(period_us * 1000, from_ns)


# The memory timeline marks at most this many calls, each at least NOTABLE_SHARE of the largest
# change: the aggregator keeps the 20 that changed RSS the most, and nested calls each carry
# their callee's growth (the program's <module>, its main(), the loader, the parser...), so
# all 20 shaded the whole chart.
NOTABLE_MOVERS = 5
NOTABLE_SHARE = 0.1
# A call whose change a call inside it (same thread, same direction) makes nearly all of is
# not marked: the inner one is where the memory went.
INNER_SHARE = 0.8


def notable_movers(movers: list[Mover]) -> list[Mover]:
    """The calls the memory timeline marks: the innermost call that accounts for a change,
    the biggest first, a few, none negligible beside the biggest."""

    def inside(inner: Mover, outer: Mover) -> bool:
        return (
            inner.thread == outer.thread
            and outer.seq0 < inner.seq0
            and inner.seq1 <= outer.seq1
            and (inner.rss_delta > 0) == (outer.rss_delta > 0)
            and abs(inner.rss_delta) >= INNER_SHARE * abs(outer.rss_delta)
        )

    kept = [m for m in movers if m.rss_delta and not any(inside(o, m) for o in movers)]
    kept.sort(key=lambda m: -abs(m.rss_delta))
    if not kept:
        return []
    floor = NOTABLE_SHARE * abs(kept[0].rss_delta)
    return [m for m in kept if abs(m.rss_delta) >= floor][:NOTABLE_MOVERS]


@dataclass
class TraceProfile:
    capture: Capture
    nodes: list[Node]
    functions: list[FunctionStats]
    timeline: list[tuple[int, int]]
    movers: list[Mover]
    threads: list[tuple[int, str, int]]  # serial, name, events
    duration_ns: int
    events: int
    recorded: int
    peak_rss: int
    start_rss: int
    end_rss: int
    unmatched: int
    lost: int = 0  # recorded events that never reached the file (END's lost)
    stopped_early: dict[str, Any] | None = None  # capture.stop.for_report

    def sorted_functions(self, key: str = "incl") -> list[FunctionStats]:
        attr = SORT_KEYS.get(key)
        if attr is None:
            raise LeadlineError(f"unknown sort key {key!r} (one of: {', '.join(SORT_KEYS)})")
        return sorted(self.functions, key=lambda f: (-abs(getattr(f, attr)), f.func.name))


def analyse(cap: Capture, progress: Progress | None = None) -> TraceProfile:
    page = cap.page_size
    tick = cap.tick_ns
    agg = _native.Aggregator(cap.timeline_t.tobytes(), cap.timeline_rss.tobytes())
    for stream, payload in cap.event_payloads(progress):
        try:
            agg.feed(stream, payload)
        except ValueError:
            cap.damage = "an event chunk cannot be decoded"
            break
    raw_nodes, raw_movers, raw_threads = agg.finish()

    nodes = [
        Node(
            id=n[0],
            parent=n[1],
            func=n[2],
            thread=n[3],
            calls=n[4],
            incl_ns=int(n[5] * tick),
            self_ns=int(n[6] * tick),
            incl_rss=n[7] * page,
            self_rss=n[8] * page,
            incl_heap=n[9],
            self_heap=n[10],
            peak_growth=n[11] * page,
            peak_rss=n[12] * page,
            incl_sq=n[13] * tick * tick,
            self_sq=n[14] * tick * tick,
        )
        for n in raw_nodes
    ]
    functions = _function_totals(cap, nodes)

    last_t = max((t[2] for t in raw_threads), default=cap.t_start)
    if cap.end:
        last_t = max(last_t, int(cap.end.get("t_end", last_t)))
    if len(cap.timeline_t):
        last_t = max(last_t, cap.timeline_t[-1])
    duration = cap.ns(last_t)
    rss_values = [v * page for v in cap.timeline_rss]
    events = sum(t[3] for t in raw_threads)
    recorded = events
    lost = 0
    if cap.end:
        events = int(cap.end.get("events", events))
        recorded = int(cap.end.get("recorded", recorded))
        lost = int(cap.end.get("lost") or 0)
    peak_candidates = rss_values + [n.peak_rss for n in nodes]
    return TraceProfile(
        capture=cap,
        nodes=nodes,
        functions=functions,
        timeline=_downsample(cap, rss_values),
        movers=sorted(
            (
                Mover(m[0], m[1], cap.ns(m[2]), cap.ns(m[3]), m[4] * page, m[5], m[6])
                for m in raw_movers
            ),
            key=lambda m: -abs(m.rss_delta),
        ),
        threads=[(t[0], cap.thread_name(t[0]), t[3]) for t in sorted(raw_threads)],
        duration_ns=max(duration, 0),
        events=events,
        recorded=recorded,
        peak_rss=max(peak_candidates, default=0),
        start_rss=rss_values[0] if rss_values else 0,
        end_rss=rss_values[-1] if rss_values else 0,
        unmatched=sum(t[4] for t in raw_threads),
        lost=lost,
        stopped_early=stop.for_report(cap),
    )


def subtree_functions(p: TraceProfile, root: Callable[[Node], bool]) -> list[FunctionStats]:
    """Per-function totals of the calls made inside the calls for which `root` is true
    (themselves included), on any thread: what one piece of the program did, such as a
    notebook cell's code traced from inside the notebook."""
    inside: list[bool] = []
    for n in p.nodes:
        inside.append(root(n) or (n.parent >= 0 and inside[n.parent]))
    return _function_totals(p.capture, p.nodes, inside)


def _function_totals(
    cap: Capture, nodes: list[Node], inside: list[bool] | None = None
) -> list[FunctionStats]:
    """Per-function totals (of the nodes `inside` says, or all).  Inclusive figures count only
    the outermost activation of a recursive function, so that time spent in fib(10) inside
    fib(11) is not counted twice."""
    stats: dict[int, FunctionStats] = {}
    # Parents are always created before their children, so one forward pass sees every
    # ancestor first.  path_funcs[i] is the set of functions on the path to node i.
    path_funcs: list[frozenset[int]] = []
    for i, n in enumerate(nodes):
        above = path_funcs[n.parent] if n.parent >= 0 else frozenset()
        recursive = n.func in above
        path_funcs.append(above if recursive else above | {n.func})
        if inside is not None and not inside[i]:
            continue
        s = stats.get(n.func)
        if s is None:
            s = stats[n.func] = FunctionStats(cap.function(n.func))
        s.calls += n.calls
        s.self_ns += n.self_ns
        s.self_rss += n.self_rss
        s.self_heap += n.self_heap
        if not recursive:
            s.incl_ns += n.incl_ns
            s.incl_rss += n.incl_rss
            s.incl_heap += n.incl_heap
        s.peak_rss = max(s.peak_rss, n.peak_rss)
        s.peak_growth = max(s.peak_growth, n.peak_growth)
    return list(stats.values())


def _downsample(cap: Capture, rss_values: list[int]) -> list[tuple[int, int]]:
    """At most TIMELINE_POINTS points, keeping each bucket's maximum so peaks survive."""
    times = [cap.ns(t) for t in cap.timeline_t]
    if len(times) <= TIMELINE_POINTS:
        return list(zip(times, rss_values, strict=False))
    span = max(times[-1] - times[0], 1)
    buckets: dict[int, tuple[int, int]] = {}
    for t, v in zip(times, rss_values, strict=False):
        b = (t - times[0]) * (TIMELINE_POINTS - 1) // span
        cur = buckets.get(b)
        if cur is None or v > cur[1]:
            buckets[b] = (t, v)
    return [buckets[b] for b in sorted(buckets)]


# The fields of report --json's records (docs/report-json.md) that are attributes of the same
# name: of the summary (TraceProfile), a function's totals, a call-tree node, a mover.
_META_FIELDS = (
    "argv",
    "python_version",
    "pid",
    "host",
    "start_unix_ns",
    "mode",
    "options",
    "leadline_version",
)
_SUMMARY_FIELDS = ("duration_ns", "events", "recorded", "lost", "stopped_early")
_CAPTURE_FIELDS = ("complete", "damage", "unused_bytes")
_RSS_FIELDS = ("peak_rss", "start_rss", "end_rss")
_COST_FIELDS = ("incl_ns", "self_ns", "incl_rss", "self_rss", "incl_heap", "self_heap")
_FUNCTION_FIELDS = ("calls", *_COST_FIELDS, "peak_rss", "peak_growth")
_NODE_FIELDS = ("id", "parent", "func", "thread", "calls", *_COST_FIELDS, "peak_growth")
_MOVER_FIELDS = ("func", "thread", "start_ns", "end_ns", "rss_delta")


def _fields(obj: object, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


def _coarse_clock_json(cap: Capture) -> dict[str, int] | None:
    clock = coarse_clock(cap)
    return None if clock is None else {"period_ns": clock.period_ns, "from_ns": clock.from_ns}


def to_json(p: TraceProfile, limit: int | None = None, sort: str = "incl") -> dict[str, Any]:
    """The report's machine form; its schema is documented in docs/report-json.md."""
    cap = p.capture
    funcs = p.sorted_functions(sort)
    if limit:
        funcs = funcs[:limit]
    notable = notable_movers(p.movers)
    return {
        "schema": SCHEMA_VERSION,
        "meta": {k: cap.meta.get(k) for k in _META_FIELDS},
        "summary": {
            **_fields(p, _SUMMARY_FIELDS),
            "threads": len(p.threads),
            **_fields(cap, _CAPTURE_FIELDS),
            **_fields(p, _RSS_FIELDS),
            "unmatched_returns": p.unmatched,
            "capture_bytes": cap.size,
            "coarse_clock": _coarse_clock_json(cap),
        },
        "functions": [
            {
                **_fields(f.func, ("id", "kind", "file", "name", "line")),
                **_fields(f, _FUNCTION_FIELDS),
            }
            for f in funcs
        ],
        "nodes": [_fields(n, _NODE_FIELDS) for n in p.nodes],
        "threads": [{"serial": s, "name": name, "events": ev} for s, name, ev in p.threads],
        "timeline": [[t, v] for t, v in p.timeline],
        "movers": [
            {**_fields(m, _MOVER_FIELDS), "notable": any(m is n for n in notable)} for m in p.movers
        ],
    }
