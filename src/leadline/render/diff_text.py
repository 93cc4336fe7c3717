"""The terminal form of ``leadline diff``: what each side is, the ranked table of functions,
and the callers of the top regressions."""

from __future__ import annotations

from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analyse.diff import (
    DETECT_SHARE,
    MIN_RUNS,
    WHOLE_FLOOR,
    WHOLE_SIGMA,
    Change,
    DiffResult,
    Side,
    culprit_text,
)
from .base import Renderer, RenderOptions, register
from .console import make_console
from .units import fmt_ns


def fmt_value(v: float, unit: str) -> str:
    if unit == "share":
        return f"{100 * v:.2f}%" if abs(v) < 0.1 else f"{100 * v:.1f}%"
    if unit == "s":
        return ("-" if v < 0 else "") + fmt_ns(abs(v) * 1e9)
    return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def fmt_delta(v: float, unit: str) -> str:
    sign = "+" if v > 0 else "-" if v < 0 else "±"
    if unit == "share":
        return f"{sign}{abs(100 * v):.2f} pp"
    return sign + fmt_value(abs(v), unit)


def fmt_ratio(ch: Change) -> str:
    if ch.base <= 0:
        return "new" if ch.new > 0 else ""
    if ch.new <= 0:
        return "gone"
    return f"\u00d7{ch.new / ch.base:.2f}"


def _side_line(label: str, side: Side, units: float | None) -> str:
    argv = " ".join(side.meta.get("argv") or [])
    parts = [f"{label}: {side.describe()}"]
    if side.meta.get("python_version"):
        parts.append(f"Python {side.meta['python_version']}")
    total = side.total
    parts.append(f"total {fmt_ns(total)}" if side.unit == "ns" else f"{total:,.0f} {side.unit}")
    if side.n_runs > 1:
        parts[-1] += " in all"
    if units is not None:
        parts.append(f"{units:g} units of work")
    if argv:
        parts.append(f"of: {argv}")
    return "  ".join(parts)


def header_lines(r: DiffResult) -> list[str]:
    s = r.settings
    per = s.per
    how = (
        "share of each side's total"
        if per is None
        else "time per run (the whole program's changed beyond noise; --shares for shares)"
        if r.by_run
        else f"cost per unit of work ({'time' if r.unit == 's' else 'samples'} per unit)"
    )
    raced = max(r.base.racy, r.new.racy)
    jump = max(r.base.jump, r.new.jump)
    if r.from_runs:
        how = "round by round, recorded interleaved" if r.paired else "Yuen"
        noise = f"the spread of {r.base.n_runs} and {r.new.n_runs} runs ({how})"
    else:
        noise = f"counting noise + {100 * (s.floor or 0):g}% run-to-run floor" + (
            f" + {100 * raced:.0f}% of stack reads raced" if raced >= 0.005 else ""
        )
    if r.unit == "calls":
        least = s.min_delta * r.base.total
        return [
            _side_line("BASE", r.base, None),
            _side_line("NEW ", r.new, None),
            "Compared by calls per run, which are exact (no noise): a change counts from "
            f"{least:,.0f} calls ({100 * s.min_delta:.2g}% of BASE's)",
        ] + [f"warning: {w}" for w in r.base.warnings + r.new.warnings]
    lines = [
        _side_line("BASE", r.base, per[0] if per and not r.by_run else None),
        _side_line("NEW ", r.new, per[1] if per and not r.by_run else None),
        f"Normalised by {how}; beyond noise: more than {s.sigma:g} sigma ({noise}) and "
        f"{100 * s.min_delta:g}% of the total"
        + (f", and one disturbance of a traced call ({fmt_ns(jump)})" if jump > 0 else ""),
    ]
    if r.detectable is not None:
        smallest, count = r.detectable
        lines.append(
            f"Smallest change beyond noise: {100 * smallest:.0f}% of a function's own cost "
            f"(median over the {count} function{'s' if count != 1 else ''} above "
            f"{100 * DETECT_SHARE:g}% of the "
            f"total; runs a side: {r.base.n_runs} and {r.new.n_runs})"
        )
    lines += [f"warning: {w}" for w in r.base.warnings + r.new.warnings]
    return lines


def whole_line(r: DiffResult) -> str | None:
    """The whole program's time per run, when both sides ran the same command."""
    w = r.whole
    if w is None:
        return None
    verdict = (
        f"{'slower' if w.sig > 0 else 'faster'} beyond noise"
        if w.sig
        else f"within noise ({WHOLE_SIGMA:g} sigma of {fmt_ns(w.noise * 1e9)})"
    )
    how = "; compared per run below" if r.by_run else ""
    runs = min(r.base.n_runs, r.new.n_runs)
    if runs < MIN_RUNS:
        # The noise is assumed, not measured: a busy host varies more than that at times.
        how += (
            f" (assuming runs of one command vary by {100 * WHOLE_FLOOR:g}%;"
            f" {MIN_RUNS} runs a side measure it)"
        )
    return (
        f"Whole program: {fmt_ns(w.base * 1e9)} -> {fmt_ns(w.new * 1e9)} per run "
        f"({fmt_ratio(w)}), {verdict}{how}"
    )


def culprit_lines(r: DiffResult) -> list[str]:
    """The ranked culprits, the first as the most likely cause."""
    unit = r.unit
    total = r.tree_change[0].base
    out = []
    for i, c in enumerate(r.culprits):
        change = (
            f"{fmt_value(c.base, unit)} -> {fmt_value(c.new, unit)} ({fmt_delta(c.delta, unit)}"
        )
        if unit != "share" and total > 0:
            change += f", +{100 * c.delta / total:.0f}% of the program"
        change += ")" + (" per run" if r.by_run else "")
        label = "Most likely cause" if i == 0 else f"{i + 1}."
        out.append(f"{label}: {culprit_text(r, c)}: {change}")
    return out


def _mark(ch: Change) -> str:
    return "▲" if ch.sig > 0 else "▼" if ch.sig < 0 else ""


@register
class DiffText(Renderer[DiffResult]):
    name = "text"
    kinds = ("diff",)
    extension = "txt"
    description = "the ranked functions and the callers of the top regressions"

    def render(self, r: DiffResult, out: IO[str], options: RenderOptions) -> None:
        console = make_console(out, options)
        for line in header_lines(r):
            console.print(line, markup=False, highlight=False)
        console.print()
        whole = whole_line(r)
        lines = ([whole] if whole else []) + culprit_lines(r)
        for line in lines:
            console.print(line, markup=False, highlight=False)
        if lines:
            console.print()
        _table(r, console, options.limit or 25)
        _callers(r, console)
        console.print()
        n_grew, n_shrank = len(r.grew), len(r.shrank)
        if not n_grew and not n_shrank:
            console.print("No function changed beyond noise.", markup=False)
        else:
            console.print(
                f"{n_grew} function{'s' if n_grew != 1 else ''} grew beyond noise, "
                f"{n_shrank} shrank.",
                markup=False,
            )


def _table(r: DiffResult, console: Console, limit: int) -> None:
    """The first `limit` ranked functions, changes beyond noise marked and coloured."""
    unit = r.unit
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("#", "BASE SELF", "NEW SELF", "Δ SELF", "RATIO", "BASE TOTAL", "NEW TOTAL"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("Δ TOTAL", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("FUNCTION", overflow="fold")
    for fd in r.functions[:limit]:
        grew = fd.self_.sig > 0 or fd.total.sig > 0
        shrank = not grew and (fd.self_.sig < 0 or fd.total.sig < 0)
        style = "red" if grew else "blue" if shrank else None
        verdict = "grew" if grew else "shrank" if shrank else ""
        table.add_row(
            str(fd.rank),
            fmt_value(fd.self_.base, unit),
            fmt_value(fd.self_.new, unit),
            Text(fmt_delta(fd.self_.delta, unit) + _mark(fd.self_), style=style or ""),
            fmt_ratio(fd.self_),
            fmt_value(fd.total.base, unit),
            fmt_value(fd.total.new, unit),
            Text(fmt_delta(fd.total.delta, unit) + _mark(fd.total), style=style or ""),
            Text(verdict, style=style or ""),
            Text(f"{fd.func.name} ({fd.func.module_path}:{fd.func.line})"),
        )
    console.print(table)


def _callers(r: DiffResult, console: Console) -> None:
    """The callers of the top regressions, each with its change."""
    unit = r.unit
    for index, rows in r.callers:
        fd = r.functions[index]
        console.print()
        console.print(
            f"Callers of #{fd.rank} {fd.func.name} ({fd.func.module_path}), "
            f"its total cost {fmt_value(fd.total.base, unit)} -> {fmt_value(fd.total.new, unit)}:",
            markup=False,
            highlight=False,
        )
        for caller, ch in rows:
            name = "(root of the stack)"
            if caller >= 0:
                c = r.functions[caller].func
                name = f"{c.name} ({c.module_path}:{c.line})"
            console.print(
                f"  {fmt_value(ch.base, unit):>10} -> {fmt_value(ch.new, unit):<10} "
                f"{fmt_delta(ch.delta, unit):>11} {fmt_ratio(ch):>7}  {name}",
                markup=False,
                highlight=False,
            )
