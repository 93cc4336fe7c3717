"""The terminal report: a header and a table of per-function totals (rich)."""

from __future__ import annotations

from typing import IO

from rich.table import Table

from ..analyse.paths import PathNamer, base_of
from ..analyse.trace import TraceProfile, coarse_clock
from .base import Renderer, RenderOptions, register
from .console import make_console
from .marks_table import print_marks
from .units import fmt_bytes, fmt_ns


def header_lines(p: TraceProfile) -> list[str]:
    cap = p.capture
    argv = " ".join(cap.meta.get("argv") or [])
    per_event = cap.size / p.recorded if p.recorded else 0.0
    lines = [
        f"leadline trace of: {argv}",
        f"Python {cap.meta.get('python_version')}  pid {cap.meta.get('pid')}  "
        f"duration {fmt_ns(p.duration_ns)}  threads {len(p.threads)}",
        f"events {p.events:,}  recorded {p.recorded:,}  "
        + (f"lost {p.lost:,}  " if p.lost else "")
        + f"capture {fmt_bytes(cap.size)} "
        f"({per_event:.1f} bytes/event)",
        f"RSS start {fmt_bytes(p.start_rss)}  end {fmt_bytes(p.end_rss)}  "
        f"peak {fmt_bytes(p.peak_rss)}",
    ]
    clock = coarse_clock(cap)
    if clock is not None:
        period = fmt_ns(clock.period_ns)
        warmup = (
            f"the CPU's counter for the first {fmt_ns(clock.from_ns)}, then "
            if clock.from_ns
            else ""
        )
        lines.append(
            f"times from {warmup}a clock that moves every {period} on average: totals are "
            f"unbiased estimates, one call is timed to within {period} (--exact-time times each "
            "call)"
        )
    if p.stopped_early:
        lines.append(
            f"warning: recording stopped early, at {fmt_ns(p.stopped_early['at_ns'])}: "
            f"{p.stopped_early['message']}; the program ran on unrecorded"
        )
    if not cap.complete:
        why = cap.damage or "it was not stopped cleanly"
        lines.append(f"warning: incomplete capture: {why}; showing what was readable")
    return lines


@register
class TraceText(Renderer[TraceProfile]):
    name = "text"
    kinds = ("trace",)
    extension = "txt"
    description = "per-function table for the terminal"

    def render(self, p: TraceProfile, out: IO[str], options: RenderOptions) -> None:
        console = make_console(out, options)
        for line in header_lines(p):
            console.print(line, markup=False)
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        for col in (
            "Calls",
            "Incl time",
            "Self time",
            "Incl RSS",
            "Self RSS",
            "Heap alloc",
            "Peak Δ",
        ):
            table.add_column(col, justify="right", no_wrap=True)
        table.add_column("Function", overflow="fold")
        funcs = p.sorted_functions(options.sort)[: options.limit or 25]
        shown = PathNamer(base_of(p.capture.meta))
        for f in funcs:
            table.add_row(
                f"{f.calls:,}",
                fmt_ns(f.incl_ns),
                fmt_ns(f.self_ns),
                fmt_bytes(f.incl_rss, signed=True),
                fmt_bytes(f.self_rss, signed=True),
                fmt_bytes(f.incl_heap),
                fmt_bytes(f.peak_growth),
                f"{f.func.label}  {f.func.located(shown)}",
            )
        console.print()
        console.print(table)
        print_marks(p.capture, console)
