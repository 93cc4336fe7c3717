"""The Firefox Profiler's format (`export --format gecko`): open the file at
profiler.firefox.com ("Load a profile from file") or with its command line, `profiler-cli load`.

A sampling capture is written as a Gecko profile (the format Firefox itself writes, which the
profiler imports and upgrades; docs-developer/gecko-profile-format.md in its repository): one
thread a sampled thread, each sample at its own time with the CPU time the thread used since
its previous one (the CPU graph), stacks and frames in the thread's tables, `leadline.mark()`
and spans as markers, and categories for what a frame is: Python, the garbage collector's
`<GC>`, an asyncio task at a stack's root, and Idle for samples of a thread that was not
running.  A frame's location is "name (file:first line)", so the profiler gathers a function's
lines into one function, and the line it was running is the frame's line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

from .. import __version__
from ..analyse.marks import mark_events
from ..analyse.model import Frame, SampleProfile
from ..analyse.samples import load_profile
from ..analyse.stacktree import StackTree
from ..capture.reader import MARK, SAMPLE_IDLE, SAMPLE_TASK_WAITING, Capture, Definitions
from ..errors import LeadlineError
from .base import Renderer, RenderOptions, register
from .untrusted import escape_surrogates, json_text

GECKO_VERSION = 31  # the Gecko profile format version written (the profiler upgrades it)
# The categories, in the order their indexes are written; (name, colour).
CATEGORIES = (
    ("Other", "grey"),
    ("Python", "yellow"),
    ("Idle", "transparent"),
    ("GC", "orange"),
    ("Task", "blue"),
    ("Mark", "green"),
)
CATEGORY = {name: i for i, (name, _) in enumerate(CATEGORIES)}
MARK_SCHEMA = "LeadlineMark"


def frame_category(f: Frame) -> int:
    """A frame's category: the sampler's <GC> (a function of module gc), an asyncio task (file
    asyncio, no first line: the sampler's task roots), or Python."""
    if f.name == "<GC>" and f.file == "gc":
        return CATEGORY["GC"]
    if f.file == "asyncio" and f.func_line == 0:
        return CATEGORY["Task"]
    return CATEGORY["Python"]


@dataclass
class _Thread:
    """One Gecko thread's tables, filled as its samples are written."""

    strings: list[str] = field(default_factory=list)
    string_ids: dict[str, int] = field(default_factory=dict)
    frames: list[list[Any]] = field(default_factory=list)
    frame_ids: dict[tuple[int, int], int] = field(default_factory=dict)
    stacks: list[list[Any]] = field(default_factory=list)
    stack_of: dict[tuple[int, bool], int] = field(default_factory=dict)  # (tree node, idle)
    samples: list[list[Any]] = field(default_factory=list)
    markers: list[list[Any]] = field(default_factory=list)

    def string(self, text: str) -> int:
        i = self.string_ids.get(text)
        if i is None:
            i = self.string_ids[text] = len(self.strings)
            self.strings.append(text)
        return i

    def frame(self, p: SampleProfile, index: int, category: int) -> int:
        key = (index, category)
        i = self.frame_ids.get(key)
        if i is None:
            f = p.frames[index]
            where = f"{f.file}:{f.func_line}" if f.func_line else f.file
            location = self.string(escape_surrogates(f"{f.name} ({where})"))
            line = f.line or None
            i = self.frame_ids[key] = len(self.frames)
            # location, relevantForJS, innerWindowID, implementation, line, column, category,
            # subcategory
            self.frames.append([location, False, None, None, line, None, category, 0])
        return i

    def stack(self, p: SampleProfile, tree: StackTree, node: int, idle: bool) -> int | None:
        """The stack of tree node `node` (its innermost frame in the Idle category if
        `idle`), made with its prefixes; None for the empty stack."""
        if node <= 0:
            return None
        key = (node, idle)
        i = self.stack_of.get(key)
        if i is not None:
            return i
        # The frames from the innermost up to the first whose stack is made (iteratively: a
        # 10,000-deep recursion must not recurse here).
        chain = [node]
        up = tree.parent[node]
        while up > 0 and (up, False) not in self.stack_of:
            chain.append(up)
            up = tree.parent[up]
        prefix = self.stack_of.get((up, False)) if up > 0 else None
        for n in reversed(chain):
            leaf_idle = idle and n == node
            f = tree.key[n]
            category = CATEGORY["Idle"] if leaf_idle else frame_category(p.frames[f])
            self.stacks.append([prefix, self.frame(p, f, category)])
            prefix = len(self.stacks) - 1
            self.stack_of[(n, leaf_idle)] = prefix
        assert prefix is not None
        return prefix


def _marks(cap: Definitions, threads: dict[int, _Thread], main: _Thread) -> None:
    """leadline.mark() as instant markers and spans as intervals, on the thread that made
    them (the first thread when it was not sampled); a span never ended starts an interval."""
    for event in mark_events(cap.marks):
        m = event.first
        th = threads.get(m.tid, main)
        t_ms = cap.ns(m.t) / 1e6
        data = {
            "type": MARK_SCHEMA,
            "fields": json_text(m.fields) if m.fields else "",
            "where": escape_surrogates(m.location),
        }
        name = th.string(escape_surrogates(m.name))
        if m.kind == MARK["MARK"]:
            row: list[Any] = [name, t_ms, None, 0]  # an instant
        elif m.kind == MARK["BEGIN"] and event.end is not None:
            row = [name, t_ms, cap.ns(event.end.t) / 1e6, 1]  # an interval
        elif m.kind == MARK["BEGIN"]:
            row = [name, t_ms, None, 2]  # an interval that never ended
        else:
            row = [name, None, t_ms, 3]  # the end of one that never began
        th.markers.append([*row, CATEGORY["Mark"], data])


def to_gecko(p: SampleProfile) -> dict[str, Any]:
    """The profile, with its timeline (load_profile(timeline=True)), as a Gecko profile."""
    cap = p.capture
    if p.timeline is None or cap is None:
        raise LeadlineError("the Firefox Profiler's format needs the capture's samples in order")
    first = p.stacks[0].frames if p.stacks else None
    tree: StackTree | None = getattr(first, "tree", None)
    interval_ms = 1000.0 / p.rate_hz if p.rate_hz > 0 else 1.0
    # Times are milliseconds since the start of recording (meta.startTime, unix milliseconds).
    start_ms = p.start_unix_ns / 1e6
    tables = {t.serial: _Thread() for t in p.threads}
    for tick, serial, node, flags, cpu in p.timeline:
        th = tables.get(serial)
        if th is None or tree is None:
            continue
        idle = bool(flags & SAMPLE_IDLE) and not flags & SAMPLE_TASK_WAITING
        stack = th.stack(p, tree, node, idle)
        th.samples.append([stack, cap.ns(tick) / 1e6, 0.0, cpu])
    by_tid = {t.tid: tables[t.serial] for t in p.threads if t.tid}
    # Marks made without a thread go to the process's main thread (its tid is the pid).
    mains = [t for t in p.threads if t.tid and t.tid == t.pid] or p.threads
    main = tables[mains[0].serial] if mains else _Thread()
    _marks(cap, by_tid, main)
    argv = p.meta.get("argv")
    program = " ".join(map(str, argv)) if isinstance(argv, list) and argv else "python"
    end_ms = p.duration_ns / 1e6
    threads = []
    for t in p.threads:
        th = tables[t.serial]
        if not th.samples and not th.markers:
            # No sample and no mark in the profile (what it was sampled in, if anything, was
            # leadline's own, left out): listed, it was an empty, unnamed thread (seen once in
            # CI under load: "thread-1" beside MainThread and sleepy).
            continue
        threads.append(
            {
                "name": escape_surrogates(t.name),
                "processType": "default",
                "processName": escape_surrogates(program),
                "registerTime": 0,
                "unregisterTime": None,
                "tid": t.tid,
                "pid": t.pid,
                "samples": {
                    "schema": {"stack": 0, "time": 1, "eventDelay": 2, "threadCPUDelta": 3},
                    "data": th.samples,
                },
                "markers": {
                    "schema": {
                        "name": 0,
                        "startTime": 1,
                        "endTime": 2,
                        "phase": 3,
                        "category": 4,
                        "data": 5,
                    },
                    "data": th.markers,
                },
                "frameTable": {
                    "schema": {
                        "location": 0,
                        "relevantForJS": 1,
                        "innerWindowID": 2,
                        "implementation": 3,
                        "line": 4,
                        "column": 5,
                        "category": 6,
                        "subcategory": 7,
                    },
                    "data": th.frames,
                },
                "stackTable": {"schema": {"prefix": 0, "frame": 1}, "data": th.stacks},
                "stringTable": th.strings,
            }
        )
    return {
        "meta": {
            "version": GECKO_VERSION,
            "interval": interval_ms,
            "startTime": start_ms,
            "profilingStartTime": 0,
            "profilingEndTime": end_ms,
            "shutdownTime": None,
            "processType": 0,
            "product": escape_surrogates(f"{program} (leadline {__version__})"),
            "stackwalk": 0,
            "debug": 0,
            "gcpoison": 0,
            "asyncstack": 0,
            "presymbolicated": True,
            "platform": "Linux",
            "misc": f"Python {p.meta.get('python_version', '?')}, {p.mode} mode",
            "sampleUnits": {"time": "ms", "eventDelay": "ms", "threadCPUDelta": "ns"},
            "categories": [
                {"name": name, "color": color, "subcategories": ["Other"]}
                for name, color in CATEGORIES
            ],
            "markerSchema": [
                {
                    "name": MARK_SCHEMA,
                    "display": ["marker-chart", "marker-table", "timeline-overview"],
                    "tableLabel": "{marker.name} {marker.data.fields}",
                    "chartLabel": "{marker.name}",
                    "tooltipLabel": "{marker.name}",
                    "data": [
                        {"key": "fields", "label": "Fields", "format": "string"},
                        {"key": "where", "label": "Where", "format": "string"},
                    ],
                }
            ],
        },
        "libs": [],
        "pages": [],
        "threads": threads,
        "pausedRanges": [],
        "processes": [],
    }


@register
class Gecko(Renderer[SampleProfile]):
    name = "gecko"
    kinds = ("sample",)
    extension = "json"
    description = "the Firefox Profiler's format (profiler.firefox.com): samples in time, marks"

    def load(self, cap: Capture, options: RenderOptions) -> SampleProfile:
        return load_profile(cap, options.progress, timeline=True)

    def render(self, p: SampleProfile, out: IO[str], options: RenderOptions) -> None:
        out.write(json_text(to_gecko(p), separators=(",", ":")))
        out.write("\n")
