"""From a sampling capture to a profile: stacks resolved to frames, per-function totals, and the
callers and callees of a function.

``load_profile`` folds the capture's samples into distinct (thread, stack) rows, so everything
after it works on the number of distinct stacks, not the number of samples.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..capture import stop
from ..capture.reader import (
    GIL_HELD,
    GIL_NONE,
    GIL_WAIT,
    SAMPLE_EXCEPTION,
    SAMPLE_GIVEN,
    SAMPLE_IDLE,
    SAMPLE_TASK_WAITING,
    Capture,
    CaptureStream,
    Function,
    Progress,
    gil_state,
)
from ..errors import LeadlineError
from .model import Frame, Metric, SampleProfile, Stack, Thread, TimelineSample
from .stacktree import StackTree, TreePath

SCHEMA_VERSION = 1
_RUNPY = ("runpy.py", "<frozen runpy>")


# The functions leadline puts in the program's way, by module of the package and by their names
# on 3.11+ and on 3.10 (no qualified names): the recorder's Thread.start and os._exit wrappers,
# and the function that @leadline.span wraps around the program's.  A program's stack that runs
# through one is shown without it, as the program would see it.
_IN_THE_WAY = {
    "record/recorder.py": frozenset(
        {"Recorder._watch_thread_names.<locals>.start", "start", "Recorder._exit_wrapper",
         "_exit_wrapper", "Recorder._fork", "_fork"}
    ),
    "record/marks.py": frozenset({"span.<locals>.wrap.<locals>.spanned", "spanned"}),
}  # fmt: skip


def _is_shim(func: Function | None) -> bool:
    """The interpreter's own frame between a class's call and its ``__init__`` (3.13+: the
    ``_Py_InitCleanup`` code, named ``__init__`` in a file ``__init__``, line 0), which the
    sampler reads like any Python frame: not the program's code, so not shown."""
    return func is not None and (func.name, func.file, func.line) == ("__init__", "__init__", 0)


# The module of the package that runs the program (its code, then its sys.excepthook): the one
# launcher frame the program's first frame can be called from.
_RUNNER = "record/runner.py"


def _package_module(file: str, package_dir: str) -> str | None:
    """A file of leadline's package as a path within it ("record/runner.py"), else None."""
    if not package_dir or not file.startswith(package_dir):
        return None
    return file[len(package_dir.rstrip("/")) + 1 :]


def _in_the_way(file: str, name: str, package_dir: str) -> bool:
    module = _package_module(file, package_dir)
    names = _IN_THE_WAY.get(module) if module is not None else None
    return names is not None and name in names


def _is_wrapper(file: str, package_dir: str) -> bool:
    """Frames of leadline's own runner (and runpy under it) at the root of a stack."""
    return bool(package_dir and file.startswith(package_dir)) or file.endswith(_RUNPY)


def load_profile(
    cap: Capture | CaptureStream,
    progress: Progress | None = None,
    *,
    cpu_cap_ns: float | None = None,
    timeline: bool = False,
) -> SampleProfile:
    """The capture's samples folded into distinct (thread, stack) rows.  With `cpu_cap_ns`,
    each sample's CPU time counts for at most that much (the diff's weights); with `timeline`,
    the profile also keeps every sample in order (SampleProfile.timeline: exports that draw
    time, at a tuple a sample)."""
    if cap.meta.get("mode") != "sample":
        raise LeadlineError(
            f"{cap.path}: a {cap.meta.get('mode', 'unknown')} capture, not a sampling one "
            "(leadline run / attach)"
        )
    stacks = _StackResolver(cap)
    kept: list[TimelineSample] | None = [] if timeline else None
    read = _fold_samples(cap, stacks, progress, cpu_cap_ns, kept)
    profile = _profile(cap, stacks.frames, read)
    profile.timeline = kept
    return profile


class _StackResolver:
    """The capture's stack ids as nodes of one prefix tree of frame indexes (`tree`, the frames
    in `frames`), so a deep recursion costs its depth once, not once per distinct stack (see
    stacktree).

    leadline's own launcher frames are cut from the root of every stack: the console script's
    or runpy's frames and leadline's package, up to the program's first frame (the `leadline`
    console script's <module> too when leadline's package is what it calls next, but not the
    program's <module>, which can call into leadline too: its Thread.start wrapper).  Which
    frames that is depends only on the frames from the root down to the program's first, so it
    is decided once per capture stack id, walking down from the root: a stack id whose frames
    are all launcher frames so far is in `_zone` (its parent, depth, how many root frames are
    cut so far, and whether its one frame is a non-launcher root frame that a leadline frame
    below would make part of the launcher); any other has its node in `_node_of`."""

    def __init__(self, cap: Capture | CaptureStream) -> None:
        self.cap = cap
        self.package_dir = (
            "" if cap.meta.get("attached") else str(cap.meta.get("package_dir") or "")
        )
        self.frames: list[Frame] = []
        self.tree = StackTree()
        self._frame_ids: dict[Frame, int] = {}
        self._node_of: dict[int, int] = {0: 0}
        self._zone: dict[int, tuple[int, int, int, bool]] = {}
        # A zone stack id's own stack, once cut (-1: nothing left).
        self._zone_node: dict[int, int] = {}

    def frame_of(self, func: int, off: int) -> int:
        f = self.cap.functions.get(func)
        fr = (
            Frame(f.name, f.file, f.line_at(off), f.line, native=f.kind == "c" and f.name != "<GC>")
            if f is not None
            else Frame(f"<function {func}>", "?", 0, 0)
        )
        idx = self._frame_ids.get(fr)
        if idx is None:
            idx = self._frame_ids[fr] = len(self.frames)
            self.frames.append(fr)
        return idx

    def _file_of(self, func: int) -> str:
        f = self.cap.functions.get(func)
        return f.file if f is not None else ""

    def _zone_stack(self, sid: int) -> int:
        """The node of a zone stack id's frames once the launcher's are cut (-1 if none is
        left: the recorder itself was sampled)."""
        got = self._zone_node.get(sid)
        if got is not None:
            return got
        zone = self._zone
        _, depth, cut, _ = zone[sid]
        chain: list[tuple[int, int]] = []
        s = sid
        while s in zone:
            _, func, off = self.cap.stacks.get(s, (0, 0, 0))
            chain.append((func, off))
            s = zone[s][0]
        chain.reverse()
        node = (
            self.tree.add(self.frame_of(func, off) for func, off in chain[cut:])
            if cut < depth
            else -1
        )
        self._zone_node[sid] = node
        return node

    def _place(self, sid: int, parent: int, func: int, off: int) -> None:
        """Decides where the stack id `sid` (frame `func`, `off` under `parent`, whose place is
        known) goes."""
        package_dir, node_of, zone = self.package_dir, self._node_of, self._zone
        if (
            parent in node_of
            and parent != 0
            and (node_of[parent] < 0 or _is_shim(self.cap.functions.get(func)))
        ):
            node_of[sid] = node_of[parent]  # under leadline's own work, or a shim
            return
        if not package_dir:
            node_of[sid] = self.tree.child(node_of[parent], self.frame_of(func, off))
            return
        file = self._file_of(func)
        ours = file.startswith(package_dir)
        if parent == 0:
            if _is_wrapper(file, package_dir):
                zone[sid] = (0, 1, 1 if ours else 0, False)
            else:
                zone[sid] = (0, 1, 0, True)
            return
        up = zone.get(parent)
        if up is None:
            f = self.cap.functions.get(func)
            if f is not None and _in_the_way(file, f.name, package_dir):
                node_of[sid] = node_of[parent]  # leadline's wrapper: not the program's frame
            else:
                node_of[sid] = self.tree.child(node_of[parent], self.frame_of(func, off))
            return
        _, depth, cut, pending = up
        if pending and ours:
            # The root frame was the console script calling into leadline: both are cut.
            zone[sid] = (parent, depth + 1, depth + 1, False)
        elif not pending and _is_wrapper(file, package_dir):
            zone[sid] = (parent, depth + 1, depth + 1 if ours else cut, False)
        elif not pending and _package_module(
            self._file_of(self.cap.stacks.get(parent, (0, 0, 0))[1]), package_dir
        ) not in (None, _RUNNER):
            # Out of the package into the standard library from anywhere but the runner:
            # leadline's own work on the program's thread (the agent's start blocking signals
            # while it starts its threads, the recorder's stop), not the program's first frame.
            node_of[sid] = -1
        else:
            # The program's first frame: the launcher ends above it.
            above = self._zone_stack(parent)
            node_of[sid] = self.tree.child(max(above, 0), self.frame_of(func, off))

    def resolve(self, stack: int) -> int:
        """The tree node of a capture stack id, leadline's launcher frames cut from the root;
        -1 if nothing but those is left (the recorder itself was sampled)."""
        node_of, zone, stacks = self._node_of, self._zone, self.cap.stacks
        node = node_of.get(stack)
        if node is not None:
            return node
        if stack in zone:
            return self._zone_stack(stack)
        # Walk up to the first stack id already placed, then place the ones below it from the
        # root down.  A damaged capture can link stack ids in a loop: the walk stops there.
        todo: list[int] = []
        seen: set[int] = set()
        sid = stack
        while sid and sid not in node_of and sid not in zone and sid not in seen:
            seen.add(sid)
            todo.append(sid)
            sid = stacks.get(sid, (0, 0, 0))[0]
        parent = sid if (sid in node_of or sid in zone) else 0
        for sid in reversed(todo):
            _, func, off = stacks.get(sid, (0, 0, 0))
            self._place(sid, parent, func, off)
            parent = sid
        return node_of[stack] if stack in node_of else self._zone_stack(stack)


@dataclass
class _Rows:
    """A capture's samples folded into distinct (thread, stack) rows, with how many samples
    were read and the times of the first and last, and the threads' lanes."""

    rows: list[Stack]
    samples: int
    first_t: int | None
    last_t: int | None
    lanes: dict[int, list[int]] = field(default_factory=dict)


# A thread's lane: its reads in LANE_BINS equal spans of the run, counted by state (holding the
# GIL, waiting for it, running without it, idle, not known); the busiest MAX_LANES threads.
LANE_BINS = 200
LANE_STATES = ("held", "wait", "running", "idle", "unknown")
MAX_LANES = 64


class _Lanes:
    """Counts reads into lanes over the span [t0, t1] of clock ticks."""

    def __init__(self, t0: int, t1: int) -> None:
        self.t0, self.span = t0, max(t1 - t0, 1)
        self.counts: dict[int, list[int]] = {}
        self.known = False

    def add(self, t: int, serial: int, gil: int, idle: bool) -> None:
        k = len(LANE_STATES)
        b = min(max((t - self.t0) * LANE_BINS // self.span, 0), LANE_BINS - 1)
        lane = self.counts.get(serial)
        if lane is None:
            lane = self.counts[serial] = [0] * (LANE_BINS * k)
        if gil == GIL_HELD:
            state = 0
        elif gil == GIL_WAIT:
            state = 1
        elif gil == GIL_NONE:
            state = 3 if idle else 2
        else:
            state = 4
        self.known = self.known or state != 4
        lane[b * k + state] += 1

    def result(self) -> dict[int, list[int]]:
        """The lanes of the MAX_LANES threads that were busiest (held the GIL, waited for it or
        ran without it most often); none when no read's GIL state is known."""
        if not self.known:
            return {}
        k = len(LANE_STATES)

        def busy(serial: int) -> int:
            lane = self.counts[serial]
            return sum(sum(lane[state::k]) for state in (0, 1, 2))

        keep = sorted(self.counts, key=lambda serial: (-busy(serial), serial))[:MAX_LANES]
        return {serial: self.counts[serial] for serial in sorted(keep)}


def _fold_samples(
    cap: Capture | CaptureStream,
    stacks: _StackResolver,
    progress: Progress | None,
    cpu_cap_ns: float | None,
    timeline: list[TimelineSample] | None = None,
) -> _Rows:
    """Reads every sample of the capture into the row of its thread and stack (and, given
    `timeline`, appends each sample kept to it)."""
    resolve, tree = stacks.resolve, stacks.tree
    rows: dict[tuple[int, int], Stack] = {}
    page = int(cap.meta.get("page_size") or 4096)
    n_samples = 0
    first_t = last_t = None
    mode = (cap.meta.get("options") or {}).get("mode")
    t_start, t_end = cap.meta.get("t_start"), (cap.end or {}).get("t_end")
    # Lanes need the threads' states, which captures hold from format 1.3 on.
    lanes = (
        _Lanes(t_start, t_end)
        if isinstance(t_start, int)
        and isinstance(t_end, int)
        and t_end > t_start
        and cap.format >= (1, 3)
        else None
    )
    # The read the records at hand belong to: its tick and thread, its row, how many records
    # it has so far (a read's records given to it follow it, at its tick).
    read_at: tuple[int, int] = (-1, -1)
    read_row: Stack | None = None
    read_n = 0
    for t, serial, flags, stack, cpu, drss in cap.samples(progress):
        gil = gil_state(flags)
        if lanes is not None and not flags & (SAMPLE_GIVEN | SAMPLE_TASK_WAITING):
            lanes.add(t, serial, gil, bool(flags & SAMPLE_IDLE))
        if mode == "gil" and gil != GIL_HELD:
            continue  # --mode gil: only what the threads did holding the GIL
        if mode == "exception" and not flags & SAMPLE_EXCEPTION:
            continue  # --mode exception: only what they did raising or handling one
        n_samples += 1
        if first_t is None:
            first_t = t
        last_t = t
        node = resolve(stack)
        if node < 0:
            continue
        if timeline is not None:
            timeline.append((t, serial, node, flags, cpu))
        key = (serial, node)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Stack(TreePath(tree, node), serial)
        row.samples += 1
        if flags & SAMPLE_IDLE:
            row.idle += 1
        if not flags & SAMPLE_GIVEN:
            row.reads += 1
            row.idle_reads += flags & SAMPLE_IDLE
            read_at, read_row, read_n = (t, serial), row, 0
        elif read_row is not row or read_at != (t, serial):
            read_row, read_n = None, 0  # weight given at another tick: a record alone
        # The read's count grows from n to n + 1 records: its square by 2n + 1.
        grown = 2.0 * read_n + 1.0
        read_n += 1
        row.samples_sq += grown
        if flags & SAMPLE_IDLE:
            row.idle_sq += grown
        used = cpu if cpu_cap_ns is None else min(cpu, int(cpu_cap_ns))
        row.cpu_ns += used
        row.cpu_sq += float(used) * used
        row.rss_bytes += drss * page
        if flags & SAMPLE_GIVEN:
            pass
        elif gil == GIL_HELD:
            row.gil_held += 1
        elif gil == GIL_WAIT:
            row.gil_wait += 1
        elif gil == GIL_NONE:
            row.gil_none += 1
    return _Rows(list(rows.values()), n_samples, first_t, last_t, lanes.result() if lanes else {})


def sampled_threads(cap: Capture | CaptureStream) -> list[Thread]:
    """The capture's sampled threads, by serial, named as the program named them (END's
    names, for threads of the program leadline ran) or as the system does."""
    names: dict[str, str] = (cap.end or {}).get("threads") or {}
    own_pid = int(cap.meta.get("pid", 0))
    threads = []
    for serial, task in sorted(cap.tasks.items()):
        name = task.name or f"thread-{serial}"
        if task.pid == own_pid and str(task.ident) in names:
            name = names[str(task.ident)]
        threads.append(Thread(serial, task.pid, task.tid, name))
    return threads


def _profile(cap: Capture | CaptureStream, frames: list[Frame], read: _Rows) -> SampleProfile:
    """The profile of the samples read, with what the capture's META and END say of the run:
    the sampler's options, its span, its threads' names, what it missed and lost."""
    end = cap.end or {}
    opts = cap.meta.get("options") or {}
    t0 = int(cap.meta.get("t_start", read.first_t or 0))
    t1 = int(end.get("t_end", read.last_t or t0))
    threads = sampled_threads(cap)
    return SampleProfile(
        mode=str(opts.get("mode", "wall")),
        rate_hz=float(opts.get("rate_hz", 100.0)),
        duration_ns=cap.ns(t1) if t1 >= t0 else 0,
        start_unix_ns=int(cap.meta.get("start_unix_ns", 0)),
        samples=read.samples,
        ticks=int(end.get("ticks", 0)),
        missed=int(end.get("missed", 0)),
        torn=int(end.get("torn", 0)),
        memory=bool(opts.get("memory", False)),
        frames=frames,
        threads=threads,
        stacks=read.rows,
        meta=dict(cap.meta),
        complete=cap.complete,
        deferred=int(end.get("deferred", 0)),
        held=int(end.get("held", 0)),
        exited_ns=cap.ns(int(end["exit_t"])) if end.get("exit_t") else None,
        samples_lost=int(end.get("samples_lost") or 0),
        stopped_early=stop.for_report(cap),
        capture=cap,
        gil_reads={int(k): (v[0], v[1], v[2]) for k, v in (end.get("gil_reads") or {}).items()},
        lanes=read.lanes,
    )


# -- views -------------------------------------------------------------------


@dataclass
class GilShares:
    """A thread's records that found it holding the GIL, waiting for it, or neither."""

    held: int = 0
    wait: int = 0
    none: int = 0

    @property
    def known(self) -> int:
        return self.held + self.wait + self.none

    def as_dict(self) -> dict[str, float | int]:
        k = self.known or 1
        return {
            "held": self.held,
            "wait": self.wait,
            "none": self.none,
            "held_pct": 100.0 * self.held / k,
            "wait_pct": 100.0 * self.wait / k,
        }


def gil_by_thread(p: SampleProfile) -> dict[int, GilShares]:
    """Each thread's GIL states over its reads (only threads with some known: captures before
    format 1.3, and versions whose GIL cannot be read, have none): END's count of every read,
    or, for a capture without END, the reads it kept (those whose weight went to other samples
    are missing there, and they were reads of a busy thread)."""
    if p.gil_reads:
        return {serial: GilShares(*c) for serial, c in p.gil_reads.items()}
    out: dict[int, GilShares] = {}
    for s in p.stacks:
        if s.gil_held or s.gil_wait or s.gil_none:
            g = out.setdefault(s.thread, GilShares())
            g.held += s.gil_held
            g.wait += s.gil_wait
            g.none += s.gil_none
    return out


def gil_lines(p: SampleProfile) -> list[str]:
    """One line a thread: how much of its time it held the GIL and waited for it, when more
    than one thread's state is known (threads that did neither are left out)."""
    threads = gil_by_thread(p)
    if len(threads) < 2 or p.mode == "gil":
        return []  # one thread has the GIL to itself; in gil mode every sample held it
    lines = []
    for serial, g in sorted(threads.items()):
        if not (g.held or g.wait):
            continue
        k = g.known
        lines.append(
            f"T{serial} ({p.thread(serial).name}): {100 * g.held / k:.0f}% holding the GIL, "
            f"{100 * g.wait / k:.0f}% waiting for it"
        )
    return lines


def default_metric(p: SampleProfile) -> Metric:
    return "cpu" if p.mode == "cpu" else "samples"


def selected(p: SampleProfile, idle: bool, metric: Metric) -> list[tuple[Stack, int]]:
    """(stack, weight) pairs for a metric; idle samples dropped unless `idle`."""
    out = []
    for s in p.stacks:
        if metric == "samples":
            w = s.samples if idle else s.samples - s.idle
        else:
            w = s.weight(metric)
        if w:
            out.append((s, w))
    return out


FuncKey = tuple[str, str, int]  # name, file, first line


def func_key(f: Frame) -> FuncKey:
    return (f.name, f.file, f.func_line)


@dataclass
class FunctionRow:
    name: str
    file: str
    line: int
    total: int = 0
    self: int = 0
    lines: dict[int, int] = field(default_factory=dict)  # self weight per line


def _tree_of(weighted: list[tuple[Stack, int]]) -> StackTree | None:
    """The stack tree that every stack of `weighted` is a node of (a profile read from a
    capture), or None (stacks given as tuples: a profile built by hand)."""
    tree = None
    for s, _ in weighted:
        frames = s.frames
        if not isinstance(frames, TreePath) or (tree is not None and frames.tree is not tree):
            return None
        tree = frames.tree
    return tree


@dataclass
class _Folded:
    """The weighted stacks of a profile folded onto its stack tree: per node, the weight of
    the stacks that end there and of its whole subtree, whether a stack ends in its subtree,
    the first stack (in order) that does, and its function (an index per FuncKey)."""

    tree: StackTree
    own: list[int]
    total: list[int]
    reached: list[bool]
    first: list[int]
    func: list[int]
    keys: list[FuncKey]


def _fold(p: SampleProfile, weighted: list[tuple[Stack, int]], tree: StackTree) -> _Folded:
    n = len(tree)
    own = [0] * n
    ends = [False] * n
    first = [len(weighted)] * n
    for i, (s, w) in enumerate(weighted):
        assert isinstance(s.frames, TreePath)
        node = s.frames.node
        own[node] += w
        ends[node] = True
        first[node] = min(first[node], i)
    parent = tree.parent
    for node in range(n - 1, 0, -1):
        up = parent[node]
        if first[node] < first[up]:
            first[up] = first[node]
    ids: dict[FuncKey, int] = {}
    keys: list[FuncKey] = []
    func_of_frame = []
    for f in p.frames:
        k = func_key(f)
        index = ids.get(k)
        if index is None:
            index = ids[k] = len(keys)
            keys.append(k)
        func_of_frame.append(index)
    func = [-1] + [func_of_frame[tree.key[node]] for node in range(1, n)]
    return _Folded(tree, own, tree.subtree_sums(own), tree.reached(ends), first, func, keys)


def function_rows(p: SampleProfile, weighted: Iterable[tuple[Stack, int]]) -> list[FunctionRow]:
    """Per function: inclusive weight (once per stack, however deep the recursion) and self
    weight (the innermost frame), sorted by self then total."""
    weighted = list(weighted)
    tree = _tree_of(weighted)
    if tree is not None:
        return _function_rows_on_tree(p, weighted, tree)
    rows: dict[FuncKey, FunctionRow] = {}
    for s, w in weighted:
        seen: set[FuncKey] = set()
        for i in s.frames:
            f = p.frames[i]
            k = func_key(f)
            if k in seen:
                continue
            seen.add(k)
            row = rows.get(k)
            if row is None:
                row = rows[k] = FunctionRow(f.name, f.file, f.func_line)
            row.total += w
        if s.frames:
            leaf = p.frames[s.frames[-1]]
            row = rows[func_key(leaf)]
            row.self += w
            row.lines[leaf.line] = row.lines.get(leaf.line, 0) + w
    return sorted(rows.values(), key=lambda r: (-r.self, -r.total, r.name))


def _function_rows_on_tree(
    p: SampleProfile, weighted: list[tuple[Stack, int]], tree: StackTree
) -> list[FunctionRow]:
    """function_rows over the stack tree, in time and memory of its size: a function's
    inclusive weight is the subtree weight of each node of it that has no ancestor of the same
    function.  The rows come out exactly as the per-stack walk makes them, ties in the same
    order (the order each function is first met, stack by stack, outermost frame first)."""
    folded = _fold(p, weighted, tree)
    outer = tree.outermost(folded.func)
    rows: dict[int, FunctionRow] = {}
    met: dict[int, tuple[int, int]] = {}
    for node in range(1, len(tree)):
        if not (outer[node] and folded.reached[node]):
            continue
        k = folded.func[node]
        row = rows.get(k)
        if row is None:
            name, file, line = folded.keys[k]
            row = rows[k] = FunctionRow(name, file, line)
        row.total += folded.total[node]
        at = (folded.first[node], tree.depth[node])
        if k not in met or at < met[k]:
            met[k] = at
    for s, w in weighted:
        assert isinstance(s.frames, TreePath)
        node = s.frames.node
        if node > 0:
            leaf = p.frames[tree.key[node]]
            row = rows[folded.func[node]]
            row.self += w
            row.lines[leaf.line] = row.lines.get(leaf.line, 0) + w
    in_order = [rows[k] for k in sorted(rows, key=met.__getitem__)]
    return sorted(in_order, key=lambda r: (-r.self, -r.total, r.name))


def match_function(p: SampleProfile, pattern: str) -> set[FuncKey]:
    """Functions named by `pattern`: a qualified name, `Class.method`, a bare name, a glob, or
    `file.py:name`."""
    file_pat = ""
    if ":" in pattern and not pattern.startswith("<"):
        file_pat, _, pattern = pattern.rpartition(":")
    found = set()
    for f in p.frames:
        names = {f.name, f.name.rsplit(".", 1)[-1]}
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            continue
        if file_pat and not (
            fnmatch.fnmatchcase(f.file, file_pat)
            or fnmatch.fnmatchcase(os.path.basename(f.file), file_pat)
            or f.file.endswith(file_pat)
        ):
            continue
        found.add(func_key(f))
    return found


@dataclass
class TreeNode:
    name: str
    file: str
    line: int  # first line of the function
    weight: int = 0
    children: dict[FuncKey, TreeNode] = field(default_factory=dict)

    def sorted_children(self) -> list[TreeNode]:
        return sorted(self.children.values(), key=lambda n: (-n.weight, n.name))


def call_tree(
    p: SampleProfile,
    weighted: Iterable[tuple[Stack, int]],
    targets: set[FuncKey],
    direction: str,
) -> TreeNode:
    """Callers (direction "callers": who calls the target, outward) or callees (inward) of the
    target functions, merged into one tree rooted at them.  Each stack counts once, at the
    target's outermost occurrence, so recursion does not inflate the weights."""
    weighted = list(weighted)
    tree = _tree_of(weighted)
    if tree is not None:
        return _call_tree_on_tree(p, weighted, tree, targets, direction)
    root = TreeNode("", "", 0)
    for s, w in weighted:
        keys = [func_key(p.frames[i]) for i in s.frames]
        at = next((i for i, k in enumerate(keys) if k in targets), None)
        if at is None:
            continue
        path = keys[at::-1] if direction == "callers" else keys[at:]
        root.weight += w
        node = root
        for k in path:
            child = node.children.get(k)
            if child is None:
                child = node.children[k] = TreeNode(k[0], k[1], k[2])
            child.weight += w
            node = child
    return root


def _call_tree_on_tree(
    p: SampleProfile,
    weighted: list[tuple[Stack, int]],
    tree: StackTree,
    targets: set[FuncKey],
    direction: str,
) -> TreeNode:
    """call_tree over the stack tree: each outermost target node (no target above it) brings
    its subtree's weight.  Callees are its subtree, merged by function, in time of the tree's
    size; callers are the path above it.  Children are in the order the per-stack walk makes
    them (the first stack that reaches each), so ties sort the same."""
    folded = _fold(p, weighted, tree)
    is_target = [k in targets for k in folded.keys]
    parent, func, keys = tree.parent, folded.func, folded.keys
    root = TreeNode("", "", 0)
    first: dict[int, int] = {}  # id of a TreeNode -> the first stack that reached it

    def add(at: TreeNode, k: FuncKey, w: int, stack: int) -> TreeNode:
        child = at.children.get(k)
        if child is None:
            child = at.children[k] = TreeNode(k[0], k[1], k[2])
            first[id(child)] = stack
        elif stack < first[id(child)]:
            first[id(child)] = stack
        child.weight += w
        return child

    n = len(tree)
    below: list[TreeNode | None] = [None] * n  # callees: the TreeNode of a node under a target
    above_target = [False] * n  # a target is among the node's ancestors
    for node in range(1, n):
        up = parent[node]
        above_target[node] = above_target[up] or (up > 0 and is_target[func[up]])
        if not folded.reached[node]:
            continue
        w, stack = folded.total[node], folded.first[node]
        outermost = is_target[func[node]] and not above_target[node]
        if outermost:
            root.weight += w
        if direction == "callers":
            if outermost:
                at, m = root, node
                while m > 0:
                    at = add(at, keys[func[m]], w, stack)
                    m = parent[m]
            continue
        holder = below[up] if not outermost else root
        if holder is not None:
            below[node] = add(holder, keys[func[node]], w, stack)
    todo = [root]
    while todo:
        t = todo.pop()
        if len(t.children) > 1:
            t.children = dict(sorted(t.children.items(), key=lambda kv: first[id(kv[1])]))
        todo.extend(t.children.values())
    return root


def to_json(p: SampleProfile, idle: bool = False) -> dict[str, Any]:
    """The document of `leadline report --json` for a sampling capture (docs/report-json.md)."""
    metric = default_metric(p)
    weighted = selected(p, idle, metric)
    total = sum(w for _, w in weighted) or 1
    funcs = function_rows(p, weighted)
    gil = {serial: g.as_dict() for serial, g in gil_by_thread(p).items()}
    native = {func_key(f) for f in p.frames if f.native}  # C functions (--native)
    return {
        "schema": SCHEMA_VERSION,
        "kind": "sample",
        "argv": p.meta.get("argv", []),
        "python_version": p.meta.get("python_version"),
        "pid": p.meta.get("pid"),
        "mode": p.mode,
        "metric": metric,
        "idle_included": idle,
        "rate_hz": p.rate_hz,
        "duration_ns": p.duration_ns,
        "samples": p.samples,
        "idle_samples": sum(s.idle for s in p.stacks),
        "ticks": p.ticks,
        "missed": p.missed,
        "torn": p.torn,
        "deferred": p.deferred,
        "held": p.held,
        "exited_ns": p.exited_ns,
        "memory": p.memory,
        "complete": p.complete,
        "samples_lost": p.samples_lost,
        "stopped_early": p.stopped_early,
        "total": total if weighted else 0,
        "threads": [
            {
                "serial": t.serial,
                "pid": t.pid,
                "tid": t.tid,
                "name": t.name,
                "gil": gil.get(t.serial),
            }
            for t in p.threads
        ],
        "functions": [
            {
                "name": r.name,
                "file": r.file,
                "line": r.line,
                "total": r.total,
                "self": r.self,
                "total_pct": 100.0 * r.total / total,
                "self_pct": 100.0 * r.self / total,
                "lines": {str(k): v for k, v in sorted(r.lines.items())},
                "native": (r.name, r.file, r.line) in native,
            }
            for r in funcs
        ],
        "frames": [
            {
                "name": f.name,
                "file": f.file,
                "line": f.line,
                "func_line": f.func_line,
                "native": f.native,
            }
            for f in p.frames
        ],
        "stacks": [
            {
                "frames": list(s.frames),
                "thread": s.thread,
                "samples": s.samples,
                "idle": s.idle,
                "cpu_ns": s.cpu_ns,
                "rss_bytes": s.rss_bytes,
            }
            for s in p.stacks
        ],
    }
