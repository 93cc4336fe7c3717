"""The outputs of `leadline overhead`: the cost of each mode as a table (text, JSON)."""

from __future__ import annotations

import json
from typing import IO

from rich.table import Table

from ..analyse.overhead import OverheadTable
from .base import Renderer, RenderOptions, register
from .console import make_console


def _cell(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


@register
class OverheadText(Renderer[OverheadTable]):
    name = "text"
    kinds = ("overhead",)
    extension = "txt"
    description = "the cost of each mode, as a table"

    def render(self, t: OverheadTable, out: IO[str], options: RenderOptions) -> None:
        console = make_console(out, options)
        console.print(
            f"leadline overhead of: {' '.join(t.program)}  "
            f"({t.rounds} rounds, interleaved; Python {t.python_version})",
            markup=False,
        )
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        for col in (
            "Mode",
            "Median time",
            "CPU",
            "Ratio",
            "Ratio range",
            "Events",
            "Events/s",
            "µs/event",
            "Bytes written",
        ):
            table.add_column(col, justify="left" if col == "Mode" else "right", no_wrap=True)
        for r in t.rows:
            rng = (
                f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}" if r["ratio_min"] is not None else "-"
            )
            table.add_row(
                r["mode"],
                _cell(r["median_wall"], ".3f") + " s",
                _cell(r["median_cpu"], ".3f") + " s",
                "x" + _cell(r["ratio"], ".2f"),
                rng,
                f"{r['events']:,}",
                _cell(r["events_per_s"], ",.0f"),
                _cell(r["us_per_event"], ".3f"),
                f"{r['bytes']:,}",
            )
        console.print(table)
        for n in t.notes:
            console.print(f"note: {n}", markup=False)


@register
class OverheadJson(Renderer[OverheadTable]):
    name = "json"
    kinds = ("overhead",)
    extension = "json"
    description = "the cost table as JSON (docs/overhead.md)"

    def render(self, t: OverheadTable, out: IO[str], options: RenderOptions) -> None:
        out.write(json.dumps(t.to_json(), indent=1) + "\n")
