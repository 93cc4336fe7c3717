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
from .html_page import flame_panel, header, render_page, table_panel

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
    + table_panel("Top functions")
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
        "frames": [[f.name, f.file, f.line, f.func_line] for f in profile.frames],
        "threads": [[t.serial, t.pid, t.tid, t.name] for t in threads],
        "nodes": {"parent": node_parent, "frame": node_frame},
        "stacks": columns,
    }


def render_sample_html(profile: SampleProfile) -> str:
    """The HTML flame graph page of a sampling profile, as one self-contained document.

    Values in ``profile.meta`` that JSON cannot hold are written with ``str()``; NaN and
    infinities there are refused with ValueError.
    """
    return render_page(
        title="leadline profile", body=_BODY, data=_document(profile), assets="sample_html"
    )
