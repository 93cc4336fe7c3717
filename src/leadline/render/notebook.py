"""What the notebook magics (leadline/notebook.py) show in a cell's output: the flame graph page
in a frame of its own, and a traced cell's table of functions, as HTML fragments."""

from __future__ import annotations

import html

from ..analyse.trace import FunctionStats
from .units import fmt_bytes, fmt_ns
from .untrusted import escape_surrogates

FRAME_HEIGHT_PX = 560


def page_in_frame(page: str, title: str, height: int = FRAME_HEIGHT_PX) -> str:
    """A title, then a whole HTML page (the flame graph's) as an iframe's document: its script,
    style and policy stay in the frame, whatever the notebook's page has."""
    doc = html.escape(page, quote=True)
    return (
        f'<div class="leadline-flamegraph"><p>{html.escape(title)}</p><iframe srcdoc="{doc}" '
        f'style="width:100%;height:{height}px;border:1px solid #ddd" '
        'sandbox="allow-scripts"></iframe></div>'
    )


_STYLE = (
    "<style>.leadline-table td,.leadline-table th{padding:2px 8px;text-align:right}"
    ".leadline-table td:last-child,.leadline-table th:last-child{text-align:left}</style>"
)
_COLUMNS = ("CALLS", "TOTAL", "SELF", "RSS KEPT", "PEAK GROWTH", "HEAP ALLOC", "FUNCTION")


def trace_table(rows: list[FunctionStats], title: str, limit: int) -> str:
    """A traced cell's functions, by total time: calls, time, and what each did to memory."""
    ordered = sorted(rows, key=lambda r: (-r.incl_ns, r.func.name))[:limit]
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = []
    for r in ordered:
        f = r.func
        where = escape_surrogates(f"{f.name} ({f.location})")
        cells = (
            f"{r.calls:,}",
            fmt_ns(r.incl_ns),
            fmt_ns(r.self_ns),
            fmt_bytes(r.incl_rss, signed=True),
            fmt_bytes(r.peak_growth),
            fmt_bytes(r.incl_heap),
        )
        tds = "".join(f"<td>{html.escape(c)}</td>" for c in cells)
        body.append(f"<tr>{tds}<td><code>{html.escape(where)}</code></td></tr>")
    return (
        f'{_STYLE}<div class="leadline-trace"><p>{html.escape(title)}</p>'
        f'<table class="leadline-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )
