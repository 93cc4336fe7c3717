"""`leadline top`'s screen (kind "top"): a header saying what is sampled and shown, then the
hottest functions with their own and total share over the window and since the start.

The same table is drawn live on a terminal (``top_table``, redrawn by rich's Live display) and
written as plain text blocks when the output is not a terminal (the "text" renderer)."""

from __future__ import annotations

from typing import IO, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..analyse.live import TopView
from ..analyse.paths import PathNamer
from .base import Renderer, RenderOptions, register
from .console import make_console
from .untrusted import terminal_text

KEYS = "q quit  p pause  s sort  c cpu/wall  t thread"
SORT_TITLES = {"own": "OWN%", "total": "TOTAL%", "own-all": "OWN% ALL", "total-all": "TOTAL% ALL"}


def header_lines(v: TopView) -> list[str]:
    """Four lines, each within 80 columns but for the program's arguments."""
    argv = terminal_text(" ".join(v.argv))
    state = f"ended: {v.ended}" if v.ended else ("PAUSED" if v.paused else "sampling")
    return [
        f"leadline top  pid {v.pid}  Python {v.python}  {v.elapsed_s:.1f} s  {state}",
        argv,
        f"{v.view} view, {terminal_text(v.thread)} of {v.threads}, {v.rate_hz:g} Hz, "
        f"sorted by {SORT_TITLES[v.sort]}",
        f"last {v.window_s:g} s: {v.samples_window:,} samples; since start: {v.samples_all:,}",
    ]


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}"


def top_table(v: TopView, limit: int) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", expand=False)
    for col in ("OWN%", "TOTAL%", "OWN% ALL", "TOTAL% ALL", "OWN S"):
        style = "reverse" if SORT_TITLES.get(v.sort) == col else None
        width = max(len(col), 6)  # the numbers keep their width; the function gives way
        table.add_column(
            col,
            justify="right",
            no_wrap=True,
            header_style=style,
            min_width=width,
            max_width=width,
        )
    table.add_column("FUNCTION (FILE:LINE)", no_wrap=True, overflow="ellipsis", ratio=1)
    shown = PathNamer(v.cwd)
    for r in v.rows[:limit]:
        table.add_row(
            _pct(r.own),
            _pct(r.total),
            _pct(r.own_all),
            _pct(r.total_all),
            f"{r.own_s:.2f}",
            Text(terminal_text(f"{r.name} ({shown(r.file)}:{r.line})")),
        )
    return table


def top_screen(v: TopView, height: int) -> Group:
    """The live screen for a terminal `height` lines tall: header, table, keys."""
    head = [Text(line, no_wrap=True, overflow="ellipsis") for line in header_lines(v)]
    limit = max(height - len(head) - 3, 1)  # a blank line, the table's header, the keys
    keys = Text(KEYS, style="dim", no_wrap=True)
    return Group(*head, Text(""), top_table(v, limit), keys)


@register
class TopText(Renderer[TopView]):
    name = "text"
    kinds = ("top",)
    extension = "txt"
    description = "the hottest functions as plain text, one block per refresh"

    def render(self, subject: TopView, out: IO[Any], options: RenderOptions) -> None:
        console = make_console(out, options)
        for line in header_lines(subject):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        console.print(top_table(subject, options.limit or 20))
        console.print()
