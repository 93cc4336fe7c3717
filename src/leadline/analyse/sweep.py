"""`leadline sweep`: run a command once per value of an environment variable, repeated and
interleaved, and tabulate wall time, CPU time, peak RSS and probe counts per value (seed 000's
cache-size table), with a chart of one column against the value."""

from __future__ import annotations

import html
import json
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LeadlineError
from ..record.childrun import ChildResult, run_child


@dataclass
class Run:
    result: ChildResult
    counts: dict[str, int]
    ratios: dict[str, float | None]


@dataclass
class Row:
    value: str
    runs: list[Run] = field(default_factory=list)

    def ok(self) -> list[Run]:
        return [r for r in self.runs if r.result.status == 0]

    def median(self, get: Callable[[Run], float | None]) -> float | None:
        values = [v for r in self.ok() if (v := get(r)) is not None]
        return statistics.median(values) if values else None

    def columns(self, probes: Sequence[str], ratios: Sequence[str]) -> dict[str, float | None]:
        cols: dict[str, float | None] = {
            "wall": self.median(lambda r: r.result.wall),
            "cpu": self.median(lambda r: r.result.cpu),
            "peak_rss": self.median(lambda r: float(r.result.maxrss_kib * 1024)),
        }
        for p in probes:
            cols[p] = self.median(_count_of(p))
        for q in ratios:
            cols[q] = self.median(_ratio_of(q))
        return cols


def _count_of(name: str) -> Callable[[Run], float | None]:
    return lambda r: float(r.counts[name]) if name in r.counts else None


def _ratio_of(name: str) -> Callable[[Run], float | None]:
    return lambda r: r.ratios.get(name)


def parse_env(spec: str) -> tuple[str, list[str]]:
    name, sep, values = spec.partition("=")
    name = name.strip()
    items = [v.strip() for v in values.split(",")]
    if not sep or not name.isidentifier() or not values.strip() or "" in items:
        raise LeadlineError(f"--env {spec!r}: expected NAME=VALUE1,VALUE2,... (no empty values)")
    if len(set(items)) != len(items):
        raise LeadlineError(f"--env {spec!r}: a value is repeated")
    return name, items


def probe_command(cmd: list[str], counts: list[str], ratios: list[str], out: str) -> list[str]:
    """The command run under `leadline probe`, which writes its counts to `out`."""
    probe = ["-m", "leadline", "probe", "-q", "--json-output", out]
    for c in counts:
        probe += ["--count", c]
    for r in ratios:
        probe += ["--ratio", r]
    head = os.path.basename(cmd[0])
    if head.startswith("python"):
        return [cmd[0], *probe, "--", *cmd[1:]]
    if cmd[0].endswith(".py"):
        return [sys.executable, *probe, "--", *cmd]
    raise LeadlineError(
        f"--count needs a Python command (python script.py ... or script.py ...), not {cmd[0]!r}"
    )


@dataclass
class Sweep:
    name: str
    rows: list[Row]
    probes: list[str]
    ratios: list[str]
    command: list[str]
    repeat: int

    def to_json(self) -> dict[str, Any]:
        return {
            "variable": self.name,
            "command": self.command,
            "repeat": self.repeat,
            "probes": self.probes,
            "ratios": self.ratios,
            "rows": [
                {
                    "value": row.value,
                    **row.columns(self.probes, self.ratios),
                    "runs": [
                        {
                            "wall": r.result.wall,
                            "cpu": r.result.cpu,
                            "peak_rss": r.result.maxrss_kib * 1024,
                            "status": r.result.status,
                            "counts": r.counts,
                            "ratios": r.ratios,
                        }
                        for r in row.runs
                    ],
                }
                for row in self.rows
            ],
        }

    @property
    def failed(self) -> list[tuple[str, int]]:
        return [
            (row.value, r.result.status) for row in self.rows for r in row.runs if r.result.status
        ]


def run_sweep(
    name: str,
    values: list[str],
    cmd: list[str],
    repeat: int,
    counts: list[str],
    ratios: list[str],
    timeout: float | None,
    progress: Callable[[int, int], None] | None = None,
) -> Sweep:
    rows = [Row(v) for v in values]
    ratio_names = [r.partition("=")[0].strip() if "=" in r else r.strip() for r in ratios]
    probe_names = [c.partition("=")[0].strip() for c in counts]
    with tempfile.TemporaryDirectory(prefix="leadline-sweep-") as tmp:
        out = str(Path(tmp) / "probe.json")
        run_cmd = probe_command(cmd, counts, ratios, out) if counts else cmd
        total = repeat * len(rows)
        done = 0
        for _ in range(repeat):  # interleaved: every value once per round
            for row in rows:
                Path(out).unlink(missing_ok=True)
                result = run_child(run_cmd, {**os.environ, name: row.value}, timeout)
                got: dict[str, Any] = {}
                if counts and result.status == 0:
                    try:
                        got = json.loads(Path(out).read_text())
                    except (OSError, ValueError):
                        result = ChildResult(result.wall, result.cpu, result.maxrss_kib, 2)
                row.runs.append(Run(result, got.get("counts", {}), got.get("ratios", {})))
                done += 1
                if progress:
                    progress(done, total)
    return Sweep(name, rows, probe_names, ratio_names, cmd, repeat)


# ---- formatting -----------------------------------------------------------------------------


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


def chart_points(s: Sweep, column: str) -> list[tuple[str, float]]:
    return [
        (row.value, v)
        for row in s.rows
        if (v := row.columns(s.probes, s.ratios).get(column)) is not None
    ]


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


def write_png(s: Sweep, column: str, path: str) -> None:
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
        fig.savefig(path, format="png")
    except OSError as e:
        raise LeadlineError(f"cannot write {path}: {e.strerror}") from None
    finally:
        plt.close(fig)
