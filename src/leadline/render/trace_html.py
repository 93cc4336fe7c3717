"""The HTML report of a per-call memory and time trace.

:func:`render_trace_html` turns the report's JSON document (what ``leadline report --json``
prints for a trace) into one self-contained page with a memory timeline, a flame graph and a
table of functions (see :mod:`.html_page` for what every report page shares, and how
untrusted names are kept out of the markup).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .html_page import flame_panel, header, render_page, source_panel, table_panel

__all__ = ["render_trace_html"]

_BODY = (
    header("leadline trace")
    + """<section class="ll-panel" id="ll-timeline">
<div class="ll-panel-head"><h2>Memory over time</h2>
<span class="ll-note ll-grow">Resident set size; shaded spans are the calls that changed it
the most (red: grew, green: shrank). Hover for details.</span></div>
<div class="ll-panel-body"><div id="ll-timeline-chart"></div></div>
</section>
"""
    + flame_panel(
        "Call tree",
        "",
        "Callers above callees; width is the selected weight. "
        "Click a frame to zoom in, click it again (or Reset) to zoom out.",
    )
    + table_panel("Top functions")
    + source_panel(
        "A trace records calls, not lines: each function's self and total share of the "
        "selected weight is shown at its first line (its <code>def</code>), and hovering the "
        "line gives its calls, time and memory. Click a row of the table or zoom into a frame "
        "to see its function."
    )
)


def render_trace_html(data: Mapping[str, Any]) -> str:
    """The HTML report page for a trace's JSON document.

    ``data`` has the keys ``meta``, ``summary``, ``functions``, ``nodes``, ``threads``,
    ``timeline`` and ``movers`` (see the report's ``--json`` output), and ``sources``
    (render/sources.py's rows, for the source view); missing parts are shown as empty.
    Values that JSON cannot hold are written with ``str()``; NaN and infinities are refused
    with ValueError.
    """
    return render_page(title="leadline trace", body=_BODY, data=data, assets="trace_html")
