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
from ..capture.reader import SAMPLE_IDLE, Capture, CaptureStream, Progress
from ..errors import LeadlineError
from .model import Frame, Metric, SampleProfile, Stack, Thread

SCHEMA_VERSION = 1
_RUNPY = ("runpy.py", "<frozen runpy>")


def _is_wrapper(file: str, package_dir: str) -> bool:
    """Frames of leadline's own runner (and runpy under it) at the root of a stack."""
    return bool(package_dir and file.startswith(package_dir)) or file.endswith(_RUNPY)


def load_profile(cap: Capture | CaptureStream, progress: Progress | None = None) -> SampleProfile:
    if cap.meta.get("mode") != "sample":
        raise LeadlineError(
            f"{cap.path}: a {cap.meta.get('mode', 'unknown')} capture, not a sampling one "
            "(leadline run / attach)"
        )
    package_dir = "" if cap.meta.get("attached") else str(cap.meta.get("package_dir") or "")
    frames: list[Frame] = []
    frame_ids: dict[Frame, int] = {}
    resolved: dict[int, tuple[int, ...] | None] = {0: ()}

    def frame_of(func: int, off: int) -> int:
        f = cap.functions.get(func)
        fr = (
            Frame(f.name, f.file, f.line_at(off), f.line)
            if f is not None
            else Frame(f"<function {func}>", "?", 0, 0)
        )
        idx = frame_ids.get(fr)
        if idx is None:
            idx = frame_ids[fr] = len(frames)
            frames.append(fr)
        return idx

    def launcher_frames(chain: list[tuple[int, int]]) -> int:
        """How many root frames (outermost first) are leadline's own launcher: the console
        script's or runpy's frames and leadline's package, up to the program's first frame."""
        files = [cap.functions[f].file if f in cap.functions else "" for f, _ in chain]
        cut = i = 0
        while i < len(files):
            if _is_wrapper(files[i], package_dir):
                i += 1
                cut = i if files[i - 1].startswith(package_dir) else cut
            elif i == 0 and len(files) > 1 and files[1].startswith(package_dir):
                i += 1  # the `leadline` console script's <module> (not the program's, which
                # can call into leadline too: its Thread.start wrapper)
            else:
                break
        return cut

    def resolve(stack: int) -> tuple[int, ...] | None:
        """Frame indexes outermost first, leadline's launcher frames cut from the root; None
        if nothing but those is left (the recorder itself was sampled)."""
        if stack in resolved:
            return resolved[stack]
        chain: list[tuple[int, int]] = []
        sid = stack
        while sid and len(chain) < 1_000_000:
            parent, func, off = cap.stacks.get(sid, (0, 0, 0))
            chain.append((func, off))
            sid = parent
        chain.reverse()
        cut = launcher_frames(chain) if package_dir else 0
        out = tuple(frame_of(func, off) for func, off in chain[cut:])
        result = out if out or not cut else None
        resolved[stack] = result
        return result

    rows: dict[tuple[int, tuple[int, ...]], Stack] = {}
    page = int(cap.meta.get("page_size") or 4096)
    n_samples = 0
    first_t = last_t = None
    for t, serial, flags, stack, cpu, drss in cap.samples(progress):
        n_samples += 1
        if first_t is None:
            first_t = t
        last_t = t
        fr = resolve(stack)
        if fr is None:
            continue
        key = (serial, fr)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Stack(fr, serial)
        row.samples += 1
        if flags & SAMPLE_IDLE:
            row.idle += 1
        row.cpu_ns += cpu
        row.rss_bytes += drss * page
    end = cap.end or {}
    opts = cap.meta.get("options") or {}
    t0 = int(cap.meta.get("t_start", first_t or 0))
    t1 = int(end.get("t_end", last_t or t0))
    names: dict[str, str] = end.get("threads") or {}
    own_pid = int(cap.meta.get("pid", 0))
    threads = []
    for serial, task in sorted(cap.tasks.items()):
        name = task.name or f"thread-{serial}"
        if task.pid == own_pid and str(task.ident) in names:
            name = names[str(task.ident)]
        threads.append(Thread(serial, task.pid, task.tid, name))
    return SampleProfile(
        mode=str(opts.get("mode", "wall")),
        rate_hz=float(opts.get("rate_hz", 100.0)),
        duration_ns=cap.ns(t1) if t1 >= t0 else 0,
        start_unix_ns=int(cap.meta.get("start_unix_ns", 0)),
        samples=n_samples,
        ticks=int(end.get("ticks", 0)),
        missed=int(end.get("missed", 0)),
        torn=int(end.get("torn", 0)),
        memory=bool(opts.get("memory", False)),
        frames=frames,
        threads=threads,
        stacks=list(rows.values()),
        meta=dict(cap.meta),
        complete=cap.complete,
        samples_lost=int(end.get("samples_lost") or 0),
        stopped_early=stop.for_report(cap),
        capture=cap,
    )


# -- views -------------------------------------------------------------------


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


def function_rows(p: SampleProfile, weighted: Iterable[tuple[Stack, int]]) -> list[FunctionRow]:
    """Per function: inclusive weight (once per stack, however deep the recursion) and self
    weight (the innermost frame), sorted by self then total."""
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


def to_json(p: SampleProfile, idle: bool = False) -> dict[str, Any]:
    """The document of `leadline report --json` for a sampling capture (docs/report-json.md)."""
    metric = default_metric(p)
    weighted = selected(p, idle, metric)
    total = sum(w for _, w in weighted) or 1
    funcs = function_rows(p, weighted)
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
        "memory": p.memory,
        "complete": p.complete,
        "samples_lost": p.samples_lost,
        "stopped_early": p.stopped_early,
        "total": total if weighted else 0,
        "threads": [
            {"serial": t.serial, "pid": t.pid, "tid": t.tid, "name": t.name} for t in p.threads
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
            }
            for r in funcs
        ],
        "frames": [
            {"name": f.name, "file": f.file, "line": f.line, "func_line": f.func_line}
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
