"""The outputs of `leadline sweep`: the table (text, JSON), and a chart of one column against
the swept value in a self-contained HTML page (SVG) or a PNG (matplotlib)."""

from __future__ import annotations

import html
import io
import json
import math
from typing import IO

from ..analyse.sweep import Sweep, chart_points
from ..errors import LeadlineError
from .base import Renderer, RenderOptions, register
from .console import make_console


def fmt(column: str, v: float | None, count: bool = False) -> str:
    if v is None:
        return "-"
    if count:
        return f"{round(v):,}"
    if column in ("wall", "cpu"):
        return f"{v:.3f} s"
    if column == "peak_rss":
        return f"{v / 1048576:.1f} MiB"
    return f"{v:.4f}" + (f" ({100 * v:.2f}%)" if 0 <= v <= 1 else "")


def headers(s: Sweep) -> list[str]:
    return [s.name, "wall", "cpu", "peak_rss", *s.probes, *s.ratios]


def table_rows(s: Sweep) -> list[list[str]]:
    out = []
    for row in s.rows:
        cols = row.columns(s.probes, s.ratios)
        out.append([row.value, *(fmt(k, v, k in s.probes) for k, v in cols.items())])
    return out


def _numeric(values: list[str]) -> list[float] | None:
    try:
        xs = [float(v) for v in values]
    except ValueError:
        return None
    return xs if all(math.isfinite(x) for x in xs) else None


def chart_svg(s: Sweep, column: str, width: int = 720, height: int = 360) -> str:
    """An SVG line chart of `column` against the swept value (log x for numeric values spanning
    more than a factor of 20, evenly spaced categories otherwise)."""
    points = chart_points(s, column)
    if not points:
        raise LeadlineError(f"no value of {column!r} to chart (did every run fail?)")
    left, right, top, bottom = 80, 20, 30, 50
    pw, ph = width - left - right, height - top - bottom
    xs_num = _numeric([p[0] for p in points])
    log_x = bool(xs_num) and min(xs_num or [0]) > 0 and max(xs_num or [1]) / min(xs_num or [1]) > 20
    if xs_num and len(set(xs_num)) > 1:
        tx = [math.log10(x) if log_x else x for x in xs_num]
        lo, hi = min(tx), max(tx)
        xpos = [left + (t - lo) / (hi - lo) * pw for t in tx]
    else:
        n = len(points)
        xpos = [left + (i + 0.5) / n * pw for i in range(n)]
    ys = [p[1] for p in points]
    y_lo, y_hi = min(0.0, min(ys)), max(ys)
    if y_hi == y_lo:
        y_hi = y_lo + 1
    ypos = [top + ph - (y - y_lo) / (y_hi - y_lo) * ph for y in ys]
    e = html.escape
    is_count = column in s.probes
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" '
        f'data-points="{len(points)}" data-column="{e(column)}">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="18" font-weight="bold">{e(column)} by {e(s.name)}</text>',
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#444"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#444"/>',
    ]
    for i in range(5):
        v = y_lo + (y_hi - y_lo) * i / 4
        y = top + ph - ph * i / 4
        parts.append(
            f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#ddd"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{e(fmt(column, v, is_count))}</text>"
        )
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{x:.1f} {y:.1f}"
        for i, (x, y) in enumerate(zip(xpos, ypos, strict=True))
    )
    parts.append(f'<path d="{path}" fill="none" stroke="#2f6fd6" stroke-width="2"/>')
    for (value, v), x, y in zip(points, xpos, ypos, strict=True):
        parts.append(
            f'<circle class="pt" cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#2f6fd6">'
            f"<title>{e(s.name)}={e(value)}: {e(fmt(column, v, is_count))}</title></circle>"
        )
        parts.append(
            f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">{e(value)}</text>'
        )
    parts.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 8}" text-anchor="middle">'
        f"{e(s.name)}{' (log scale)' if log_x else ''}</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)


def html_page(s: Sweep, column: str) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in headers(s))
    body = "".join(
        "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table_rows(s)
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>leadline sweep: {e(s.name)}</title>"
        "<style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}</style></head>"
        f"<body><h2>leadline sweep of {e(s.name)}</h2><p><code>{e(' '.join(s.command))}</code>, "
        f"{s.repeat} run(s) per value, medians</p>{chart_svg(s, column)}"
        f"<table id='sweep'><tr>{head}</tr>{body}</table></body></html>\n"
    )


def _png(s: Sweep, column: str, out: IO[bytes]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise LeadlineError("--png needs matplotlib: pip install 'leadline[png]'") from None
    points = chart_points(s, column)
    if not points:
        raise LeadlineError(f"no value of {column!r} to chart (did every run fail?)")
    xs_num = _numeric([p[0] for p in points])
    fig, ax = plt.subplots(figsize=(7.2, 3.6), dpi=100)
    if xs_num:
        ax.plot(xs_num, [p[1] for p in points], marker="o")
        if min(xs_num) > 0 and max(xs_num) / min(xs_num) > 20:
            ax.set_xscale("log")
    else:
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
    ax.set_xlabel(s.name)
    ax.set_ylabel(column)
    ax.set_title(f"{column} by {s.name}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)


def _column(s: Sweep, options: RenderOptions) -> str:
    """The column charted: as asked, else the first ratio, else wall time."""
    return options.column or (s.ratios[0] if s.ratios else "wall")


@register
class SweepText(Renderer[Sweep]):
    name = "text"
    kinds = ("sweep",)
    extension = "txt"
    description = "the sweep's table for the terminal"

    def render(self, s: Sweep, out: IO[str], options: RenderOptions) -> None:
        from rich.table import Table

        console = make_console(out, options)
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        for h in headers(s):
            table.add_column(h, justify="right", no_wrap=True)
        for row in table_rows(s):
            table.add_row(*row)
        console.print(
            f"leadline sweep of {s.name}: {s.repeat} run(s) per value, medians", markup=False
        )
        console.print(table)


@register
class SweepJson(Renderer[Sweep]):
    name = "json"
    kinds = ("sweep",)
    extension = "json"
    description = "the sweep as JSON (docs/sweep.md)"

    def render(self, s: Sweep, out: IO[str], options: RenderOptions) -> None:
        out.write(json.dumps(s.to_json(), indent=1) + "\n")


@register
class SweepHtml(Renderer[Sweep]):
    name = "html"
    kinds = ("sweep",)
    extension = "html"
    description = "self-contained HTML: the table and a chart of one column"

    def render(self, s: Sweep, out: IO[str], options: RenderOptions) -> None:
        out.write(html_page(s, _column(s, options)))


@register
class SweepPng(Renderer[Sweep]):
    name = "png"
    kinds = ("sweep",)
    extension = "png"
    description = "a chart of one column as PNG (needs matplotlib)"
    binary = True

    def render(self, s: Sweep, out: IO[bytes], options: RenderOptions) -> None:
        # Drawn in memory first: nothing reaches `out` unless the whole chart was made.
        buf = io.BytesIO()
        _png(s, _column(s, options), buf)
        out.write(buf.getvalue())
