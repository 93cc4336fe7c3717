"""The terminal report: a header and a table of per-function totals (rich)."""

from __future__ import annotations

import os
import shutil
from typing import IO, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analyse.samples import load_profile
from ..analyse.trace import TraceProfile, analyse
from ..capture.reader import Capture
from .base import Renderer, RenderOptions, is_sampling, register
from .marks_table import print_marks
from .probe_text import render_probe_text
from .sample_text import render_sample_text
from .units import fmt_bytes, fmt_ns
from .untrusted import terminal_text


class _Console(Console):
    """A console for text from the profiled program: no rich markup ("[red]" in a function
    name is text), and control characters and lone surrogates shown as escapes."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(terminal_text(text), **kwargs)


def make_console(out: IO[str], options: RenderOptions) -> Console:
    is_tty = out.isatty()
    no_color = bool(os.environ.get("NO_COLOR")) or options.color is False or not is_tty
    width = options.width or (None if is_tty else max(140, shutil.get_terminal_size().columns))
    return _Console(
        file=out,
        no_color=no_color,
        highlight=False,
        markup=False,
        width=width,
        soft_wrap=False,
        force_terminal=is_tty and options.color is not False,
        emoji=False,
    )


def header_lines(p: TraceProfile) -> list[str]:
    cap = p.capture
    argv = " ".join(cap.meta.get("argv") or [])
    per_event = cap.size / p.recorded if p.recorded else 0.0
    lines = [
        f"leadline trace of: {argv}",
        f"Python {cap.meta.get('python_version')}  pid {cap.meta.get('pid')}  "
        f"duration {fmt_ns(p.duration_ns)}  threads {len(p.threads)}",
        f"events {p.events:,}  recorded {p.recorded:,}  capture {fmt_bytes(cap.size)} "
        f"({per_event:.1f} bytes/event)",
        f"RSS start {fmt_bytes(p.start_rss)}  end {fmt_bytes(p.end_rss)}  "
        f"peak {fmt_bytes(p.peak_rss)}",
    ]
    if not cap.complete:
        why = cap.damage or "it was not stopped cleanly"
        lines.append(f"warning: incomplete capture: {why}; showing what was readable")
    return lines


@register
class TextReport(Renderer):
    name = "text"
    extension = "txt"
    description = "per-function table for the terminal"

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        console = make_console(out, options)
        if cap.meta.get("mode") == "probe":
            render_probe_text(cap, console)
            print_marks(cap, console)
            return
        if is_sampling(cap):
            render_sample_text(load_profile(cap, options.progress), console, options)
            print_marks(cap, console)
            return
        p = analyse(cap, options.progress)
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
        for f in funcs:
            table.add_row(
                f"{f.calls:,}",
                fmt_ns(f.incl_ns),
                fmt_ns(f.self_ns),
                fmt_bytes(f.incl_rss, signed=True),
                fmt_bytes(f.self_rss, signed=True),
                fmt_bytes(f.incl_heap),
                fmt_bytes(f.peak_growth),
                f"{f.func.label}  {f.func.location}",
            )
        console.print()
        console.print(table)
        print_marks(cap, console)
