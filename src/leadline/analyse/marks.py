"""A capture's marks with each span's begin paired with its end (docs/marks.md): what the marks
table and the exports that draw spans read, so that they pair them alike."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..capture.reader import MARK, Mark


@dataclass
class MarkEvent:
    """A mark, a span (its begin, and its end once paired), or an end with no begin."""

    first: Mark
    end: Mark | None = None


def mark_events(marks: Iterable[Mark]) -> list[MarkEvent]:
    """The marks in capture order of their first moment; an end closes the latest span still
    open on its thread under its name (spans nest), and one that closes none stands alone."""
    out: list[MarkEvent] = []
    open_spans: dict[tuple[int, str], list[MarkEvent]] = {}
    for m in marks:
        if m.kind == MARK["END"]:
            begun = open_spans.get((m.tid, m.name))
            if begun:
                begun.pop().end = m
                continue
        event = MarkEvent(m)
        out.append(event)
        if m.kind == MARK["BEGIN"]:
            open_spans.setdefault((m.tid, m.name), []).append(event)
    return out
