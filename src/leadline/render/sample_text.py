"""The terminal report of a sampling profile: StackProf's two-number table, and the callers or
callees of a function as an indented tree."""

from __future__ import annotations

from typing import IO

from rich.console import Console
from rich.table import Table

from ..analyse.model import Metric, SampleProfile
from ..analyse.paths import PathNamer, base_of
from ..analyse.samples import (
    TreeNode,
    call_tree,
    default_metric,
    function_rows,
    gil_lines,
    match_function,
    selected,
)
from ..errors import LeadlineError
from .base import Renderer, RenderOptions, register
from .console import make_console
from .marks_table import print_marks
from .units import fmt_bytes, fmt_ns


def fmt_weight(w: int, metric: Metric) -> str:
    if metric == "cpu":
        return fmt_ns(w)
    if metric == "memory":
        return fmt_bytes(w, signed=True)
    return f"{w:,}"


def pct(part: int, whole: int) -> str:
    return f"({100.0 * part / whole:.1f}%)" if whole else "(0.0%)"


def header_lines(p: SampleProfile, metric: Metric, idle: bool) -> list[str]:
    argv = " ".join(p.meta.get("argv") or [])
    idle_n = sum(s.idle for s in p.stacks)
    ticks = p.ticks or 1
    lost = p.samples + p.torn
    lines = [
        f"leadline sampling profile of: {argv}",
        f"Python {p.meta.get('python_version')}  pid {p.meta.get('pid')}  "
        f"threads {len(p.threads)}  duration {fmt_ns(p.duration_ns)}",
        f"Mode: {p.mode} ({p.rate_hz:g} Hz)  Samples: {p.samples:,}"
        + (f"  idle {idle_n:,} ({'included' if idle else 'excluded; --idle to include'})")
        + f"  Missed: {p.missed:,} {pct(p.missed, ticks + p.missed)}"
        + f"  Torn: {p.torn:,} {pct(p.torn, lost)}",
    ]
    if metric != "samples":
        lines.append(
            "Weights: "
            + ("CPU time used by the thread" if metric == "cpu" else "RSS growth")
            + " since its previous sample"
        )
    if p.stopped_early:
        gone = f"; {p.samples_lost:,} samples never reached the file" if p.samples_lost else ""
        lines.append(
            f"warning: recording stopped early, at {fmt_ns(p.stopped_early['at_ns'])}: "
            f"{p.stopped_early['message']}{gone}"
        )
    if not p.complete:
        lines.append("warning: incomplete capture (not stopped cleanly); showing what was readable")
    lines += [f"GIL: {line}" for line in gil_lines(p)]
    return lines


def _tree_lines(
    node: TreeNode, total: int, metric: Metric, depth: int, out: list[str], shown: PathNamer
) -> None:
    for child in node.sorted_children():
        out.append(
            f"{fmt_weight(child.weight, metric):>10} {pct(child.weight, total):>8}  "
            f"{'  ' * depth}{child.name} ({shown(child.file)}:{child.line})"
        )
        if depth < 64:
            _tree_lines(child, total, metric, depth + 1, out, shown)


def render_sample_text(p: SampleProfile, console: Console, options: RenderOptions) -> None:
    metric = options.metric or default_metric(p)
    if metric == "memory" and not p.memory:
        raise LeadlineError("this capture has no memory samples (record with --memory)")
    weighted = selected(p, options.idle, metric)
    total = sum(w for _, w in weighted)
    shown = PathNamer(base_of(p.meta))
    for line in header_lines(p, metric, options.idle):
        console.print(line, markup=False)
    console.print()
    for direction, pattern in (("callers", options.callers), ("callees", options.callees)):
        if not pattern:
            continue
        targets = match_function(p, pattern)
        if not targets:
            raise LeadlineError(f"no function matching {pattern!r} in this profile")
        tree = call_tree(p, weighted, targets, direction)
        console.print(
            f"{direction.capitalize()} of {pattern}: {fmt_weight(tree.weight, metric)} "
            f"{pct(tree.weight, total)} of all",
            markup=False,
        )
        lines: list[str] = []
        _tree_lines(tree, total, metric, 0, lines, shown)
        for line in lines:
            console.print(line, markup=False, highlight=False)
        console.print()
    if options.callers or options.callees:
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("TOTAL", "(pct)", "SAMPLES", "(pct)"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("FRAME", overflow="fold")
    for r in function_rows(p, weighted)[: options.limit or 25]:
        table.add_row(
            fmt_weight(r.total, metric),
            pct(r.total, total),
            fmt_weight(r.self, metric),
            pct(r.self, total),
            f"{r.name} ({shown(r.file)}:{r.line})",
        )
    console.print(table)


@register
class SampleText(Renderer[SampleProfile]):
    name = "text"
    kinds = ("sample",)
    extension = "txt"
    description = "per-function table for the terminal"

    def render(self, p: SampleProfile, out: IO[str], options: RenderOptions) -> None:
        console = make_console(out, options)
        render_sample_text(p, console, options)
        print_marks(p.capture, console)
