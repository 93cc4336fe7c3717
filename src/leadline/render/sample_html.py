"""The HTML report of a sampling profile: an interactive flame graph.

:func:`render_sample_html` turns a :class:`~leadline.analyse.model.SampleProfile` into one
self-contained page (see :mod:`.html_page` for what every report page shares, and how
untrusted names are kept out of the markup): a header with the capture's facts, a flame graph
of the stacks merged across threads with a thread selector, a weight switch (samples, CPU
time, RSS growth), an idle-samples toggle, search, zoom and tooltips, and a table of the top
functions by total and self weight.

The stacks are sent as a prefix tree of frame indexes (each distinct stack prefix once), so
a deep recursion seen in many samples costs its depth once, not once per stack; the page
merges frames of the same function (name, file, first line) into the call tree it draws.
"""

from __future__ import annotations

import math
from typing import Any

from ..analyse.model import SampleProfile
from ..analyse.paths import PathNamer, base_of
from ..analyse.samples import LANE_BINS, LANE_STATES, gil_by_thread
from .html_page import flame_panel, header, render_page, source_panel, table_panel
from .sources import sources_by_weight

__all__ = ["render_sample_html"]

_CONTROLS = """<label class="ll-control">Thread <select id="ll-thread"></select></label>
<label class="ll-control" id="ll-idle-control" hidden><input type="checkbox" id="ll-idle" checked>
Idle samples</label>
"""

_BODY = (
    header("leadline profile")
    + flame_panel(
        "Flame graph",
        _CONTROLS,
        "Callers above callees; width is the selected weight, stacks of all threads merged "
        "unless one is selected. Click a frame to zoom in, click it again, a breadcrumb, "
        "Reset or Escape to zoom out.",
    )
    + """<section class="ll-panel" id="ll-lanes-panel" hidden>
<div class="ll-panel-head"><h2>Threads over time</h2><span class="ll-grow"></span>
<span id="ll-lanes-legend" class="ll-note"></span></div>
<div class="ll-panel-body"><div id="ll-lanes"></div>
<div class="ll-note">Each thread's reads in equal spans of the run, by what it was doing with the
GIL: holding it, waiting for it, running without it (C code that let it go, or waiting for a
CPU), idle. The busiest threads are shown.</div></div>
</section>
"""
    + table_panel("Top functions")
    + source_panel(
        "Each line's self share (the line running at the top of the stack) and total share (the "
        "line anywhere on the stack, counted once) of the selected weight and thread; the "
        "darker, the hotter. Click a row of the table or zoom into a frame to see its "
        "function's lines."
    )
)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _document(profile: SampleProfile) -> dict[str, Any]:
    """The page's data: the profile's facts, frames and threads, and its stacks as a prefix
    tree (``nodes``: parent node or -1, frame index; parents before children) with one row
    per stack (its deepest node, or -1 for an empty stack) in column arrays."""
    node_of: dict[tuple[int, int], int] = {}
    node_parent: list[int] = []
    node_frame: list[int] = []
    columns: dict[str, list[int]] = {
        k: [] for k in ("node", "thread", "samples", "idle", "cpu_ns", "rss_bytes")
    }
    for stack in profile.stacks:
        at = -1
        for frame in stack.frames:
            key = (at, frame)
            node = node_of.get(key)
            if node is None:
                node = node_of[key] = len(node_parent)
                node_parent.append(at)
                node_frame.append(int(frame))
            at = node
        columns["node"].append(at)
        columns["thread"].append(stack.thread)
        columns["samples"].append(stack.samples)
        columns["idle"].append(stack.idle)
        columns["cpu_ns"].append(stack.cpu_ns)
        columns["rss_bytes"].append(stack.rss_bytes)

    serials = [t.serial for t in profile.threads]
    serials += sorted({s.thread for s in profile.stacks} - set(serials))
    threads = [profile.thread(serial) for serial in serials]
    return {
        "meta": profile.meta,
        "profile": {
            "mode": profile.mode,
            "rate_hz": _finite(profile.rate_hz),
            "duration_ns": profile.duration_ns,
            "start_unix_ns": profile.start_unix_ns,
            "samples": profile.samples,
            "ticks": profile.ticks,
            "missed": profile.missed,
            "torn": profile.torn,
            "memory": profile.memory,
            "complete": profile.complete,
            "stopped_early": profile.stopped_early,
        },
        # [name, file, line, first line, 1 for a C function (--native)]
        "frames": [[f.name, f.file, f.line, f.func_line, int(f.native)] for f in profile.frames],
        "shown_files": _shown_files(profile),
        "threads": [[t.serial, t.pid, t.tid, t.name] for t in threads],
        "nodes": {"parent": node_parent, "frame": node_frame},
        "stacks": columns,
        "lanes": {
            "bins": LANE_BINS,
            "states": list(LANE_STATES),
            "threads": [[serial, counts] for serial, counts in sorted(profile.lanes.items())],
        },
        "gil": {str(serial): g.as_dict() for serial, g in gil_by_thread(profile).items()},
        "sources": _sources(profile),
    }


def _shown_files(profile: SampleProfile) -> dict[str, str]:
    """Each file's short name, where it has one (the page shows the whole name on hover)."""
    shown = PathNamer(base_of(profile.meta))
    return {f.file: s for f in profile.frames if (s := shown(f.file)) != f.file}


def _sources(profile: SampleProfile) -> list[list[object]]:
    """The files of the profile's functions, heaviest first, with their lines now and whether
    they are the lines that ran (render/sources.py)."""
    weight = dict.fromkeys((f.file for f in profile.frames), 0)
    n = len(profile.frames)
    for stack in profile.stacks:  # by the samples whose innermost frame is in the file
        leaf = stack.frames[-1] if len(stack.frames) else -1
        if 0 <= leaf < n:
            weight[profile.frames[leaf].file] += stack.samples
    return sources_by_weight(weight, profile.capture.end if profile.capture is not None else None)


def render_sample_html(profile: SampleProfile) -> str:
    """The HTML flame graph page of a sampling profile, as one self-contained document.

    Values in ``profile.meta`` that JSON cannot hold are written with ``str()``; NaN and
    infinities there are refused with ValueError.
    """
    return render_page(
        title="leadline profile", body=_BODY, data=_document(profile), assets="sample_html"
    )
