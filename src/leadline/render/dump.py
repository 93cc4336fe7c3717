"""`leadline dump`'s output (kind "dump"): every thread's stack as text, innermost frame first,
or as JSON (docs/dump.md)."""

from __future__ import annotations

from typing import IO, Any

from ..analyse.dump import Local, Snapshot, ThreadDump
from ..analyse.model import Frame
from ..analyse.paths import PathNamer
from .base import Renderer, RenderOptions, register
from .untrusted import json_text, terminal_text

_GIL = {"held": "holding the GIL", "wait": "waiting for the GIL"}


def _state(d: ThreadDump) -> str:
    if d.state == "unread":
        return "its stack changed under every read; run dump again"
    parts = [d.state]
    if d.gil in _GIL:
        parts.append(_GIL[d.gil])
    if d.exception:
        parts.append("raising or handling an exception")
    return ", ".join(parts)


def _frame_lines(
    frames: list[Frame],
    indent: str,
    shown: PathNamer,
    variables: dict[int, list[Local]] | None = None,
) -> list[str]:
    out = []
    for i, f in enumerate(frames):
        where = f"{shown(f.file)}:{f.line}" if f.line else shown(f.file)
        out.append(f"{indent}{terminal_text(f.name)} ({terminal_text(where)})")
        for v in (variables or {}).get(i, []):
            out.append(f"{indent}    {terminal_text(v.name)} = {terminal_text(v.repr)}")
    return out


@register
class DumpText(Renderer[Snapshot]):
    name = "text"
    kinds = ("dump",)
    extension = ".txt"
    description = "every thread's stack, innermost frame first"

    def render(self, subject: Snapshot, out: IO[Any], options: RenderOptions) -> None:
        argv = terminal_text(" ".join(subject.argv))
        lines = [f"Process {subject.pid}: {argv}", f"Python {subject.python_version}", ""]
        shown = PathNamer(subject.cwd)
        for d in subject.threads:
            lines.append(f"Thread {d.tid} ({terminal_text(d.name)}): {_state(d)}")
            lines += _frame_lines(d.frames, "    ", shown, d.locals)
            if d.truncated:
                lines.append("    ... (deeper than --max-depth: the outermost frames are left out)")
            for task in d.waiting:  # --async all: innermost first, the task last
                lines.append(f"  Task {terminal_text(task[-1].name)} (waiting):")
                lines += _frame_lines(task[:-1], "      ", shown)
            lines.append("")
        out.write("\n".join(lines))


@register
class DumpJson(Renderer[Snapshot]):
    name = "json"
    kinds = ("dump",)
    extension = ".json"
    description = "every thread's stack as JSON"

    def render(self, subject: Snapshot, out: IO[Any], options: RenderOptions) -> None:
        data = {
            "pid": subject.pid,
            "argv": subject.argv,
            "python_version": subject.python_version,
            "cwd": subject.cwd,
            "threads": [d.to_json(subject.with_locals) for d in subject.threads],
        }
        out.write(json_text(data, indent=1) + "\n")
