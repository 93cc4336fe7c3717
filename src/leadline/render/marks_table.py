"""The marks of a capture (`leadline.mark()`, spans, log records) summarised by name: the
section that `report` adds to every kind of capture that has them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from ..analyse.marks import mark_events
from ..capture.reader import MARK, Definitions
from .units import fmt_ns


@dataclass
class MarkRow:
    name: str
    count: int = 0  # marks, or completed spans
    location: str = ""  # where the first one was recorded
    threads: set[str] = field(default_factory=set)
    first_ns: int = 0
    span_ns: list[int] = field(default_factory=list)  # each span's duration

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "count": self.count,
            "location": self.location,
            "threads": sorted(self.threads),
            "first_ns": self.first_ns,
            "span_total_ns": sum(self.span_ns) if self.span_ns else None,
            "span_max_ns": max(self.span_ns) if self.span_ns else None,
        }


def mark_rows(cap: Definitions) -> list[MarkRow]:
    """One row per mark name (spans: per span name), most frequent first."""
    rows: dict[tuple[str, bool], MarkRow] = {}
    for event in mark_events(cap.marks):
        m = event.first
        key = (m.name, m.kind != MARK["MARK"])
        row = rows.get(key)
        if row is None:
            row = rows[key] = MarkRow(m.name, location=m.location, first_ns=cap.ns(m.t))
        row.threads.add(cap.tid_name(m.tid))
        if m.kind == MARK["MARK"]:
            row.count += 1
        elif event.end is not None:  # a span ended: a span never ended or never begun is not
            row.count += 1  # counted
            row.span_ns.append(int((event.end.t - m.t) * cap.tick_ns))
    return sorted(rows.values(), key=lambda r: (-r.count, r.first_ns))


def print_marks(cap: Definitions | None, console: Console, limit: int = 25) -> None:
    if cap is None:
        return
    rows = mark_rows(cap)
    if not rows:
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("Count", "First at", "Span total", "Span max"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("Mark", overflow="fold")
    table.add_column("Where", overflow="fold")
    for r in rows[:limit]:
        table.add_row(
            f"{r.count:,}",
            fmt_ns(r.first_ns),
            fmt_ns(sum(r.span_ns)) if r.span_ns else "",
            fmt_ns(max(r.span_ns)) if r.span_ns else "",
            r.name,
            f"{r.location}  ({', '.join(sorted(r.threads))})",
        )
    console.print()
    console.print(f"Marks: {len(cap.marks):,}", markup=False)
    console.print(table)


MAX_MARKS_JSON = 5000


def marks_json(cap: Definitions | None, limit: int = MAX_MARKS_JSON) -> dict[str, Any]:
    """The `marks` member of `report --json` and of the HTML pages (docs/report-json.md)."""
    if cap is None:
        return {"total": 0, "summary": [], "events": []}
    return {
        "total": len(cap.marks),
        "summary": [r.as_json() for r in mark_rows(cap)],
        "events": [
            {
                "t_ns": cap.ns(m.t),
                "kind": m.kind_name.lower(),
                "name": m.name,
                "file": m.file,
                "line": m.line,
                "thread": cap.tid_name(m.tid),
                "fields": m.fields,
            }
            for m in cap.marks[:limit]
        ],
    }
