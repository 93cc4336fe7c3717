"""The probe table: each probe's count, its rate and where it is, then the ratios.  Printed by
`leadline probe` at the end of the run and by `leadline report` for a probe capture."""

from __future__ import annotations

from typing import IO, Any

from rich.console import Console
from rich.table import Table

from ..analyse.probes import ProbeReport
from .base import Renderer, RenderOptions, register
from .console import make_console
from .marks_table import print_marks


def fmt_ratio(value: float | None) -> str:
    if value is None:
        return "n/a (division by zero)"
    return f"{value:.6g}" + (f"  ({100 * value:.2f}%)" if 0 <= value <= 1 else "")


def print_probe_table(data: dict[str, Any], console: Console) -> None:
    """`data` is ProbeResult.to_json() (or the same fields rebuilt from a capture)."""
    seconds = float(data.get("seconds") or 0.0)
    console.print(
        f"leadline probe: {seconds:.3f} s, counted with {data.get('mechanism', '?')}", markup=False
    )
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("Probe", "Count", "Per second"):
        table.add_column(col, justify="left" if col == "Probe" else "right", no_wrap=True)
    table.add_column("Where", overflow="fold")
    for p in data.get("probes", []):
        count = int(p.get("count", 0))
        rate = count / seconds if seconds > 0 else 0.0
        table.add_row(p["name"], f"{count:,}", f"{rate:,.1f}", str(p.get("where", "")))
    console.print(table)
    exprs: dict[str, str] = data.get("ratio_expressions", {})
    for name, value in (data.get("ratios") or {}).items():
        expr = exprs.get(name, name)
        label = expr if expr == name else f"{name} = {expr}"
        console.print(f"{label} = {fmt_ratio(value)}", markup=False)


@register
class ProbeText(Renderer[ProbeReport]):
    name = "text"
    kinds = ("probe",)
    extension = "txt"
    description = "per-function table for the terminal"

    def render(self, r: ProbeReport, out: IO[str], options: RenderOptions) -> None:
        console = make_console(out, options)
        argv = " ".join(r.capture.meta.get("argv") or [])
        console.print(f"leadline probe of: {argv}", markup=False)
        if not r.complete:
            console.print("warning: incomplete capture: the counts were not written", markup=False)
        print_probe_table(r.data, console)
        print_marks(r.capture, console)
