"""`leadline log`: the classic per-event log (the columns of cPyMemTrace's log files)."""

from __future__ import annotations

from typing import IO

from ..capture import stop
from ..capture.reader import EVENT, KIND_NAMES, Capture, Mark
from .base import CAPTURE_KINDS, Renderer, RenderOptions, register
from .untrusted import json_text, terminal_text

HEADER = (
    f"{'Event':<12} {'dEvent':<7} {'Clock':<12} {'What':<8} {'File':<60} {'#line':>5} "
    f"{'Function':<40} {'RSS':>12} {'dRSS':>10}"
)


class _LogState:
    """Per-thread Python call stacks, so that a C call is shown at its caller's file:line."""

    def __init__(self) -> None:
        self.stacks: dict[int, list[int]] = {}

    def caller(self, stream: int) -> int | None:
        st = self.stacks.get(stream)
        return st[-1] if st else None

    def apply(self, stream: int, kind: int, fid: int) -> None:
        st = self.stacks.setdefault(stream, [])
        if kind == EVENT["CALL"]:
            st.append(fid)
        elif kind == EVENT["RETURN"] and st and st[-1] == fid:
            st.pop()


@register
class EventLog(Renderer[Capture]):
    name = "log"
    kinds = CAPTURE_KINDS  # the events, marks and RSS timeline of any capture
    extension = "log"
    description = "every recorded event, one line each (cPyMemTrace's columns)"

    def load(self, cap: Capture, options: RenderOptions) -> Capture:
        return cap  # the events are streamed from the capture as they are written out

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        as_json = options.json_lines
        page = cap.page_size
        state = _LogState()
        multi = len({c.stream for c in cap.event_chunks}) > 1
        if not as_json:
            out.write(HEADER + (" Thread" if multi else "") + "\n")
        prev_n: dict[int, int] = {}
        prev_rss: int | None = None
        marks = cap.marks
        next_mark = 0

        def write_mark(m: Mark) -> None:
            clock = cap.ns(m.t) / 1e9
            thread = cap.tid_name(m.tid)
            if as_json:
                row = {
                    "clock": round(clock, 9),
                    "what": m.kind_name,
                    "file": m.file,
                    "line": m.line,
                    "mark": m.name,
                    "fields": m.fields,
                    "thread": thread,
                }
                out.write(json_text(row) + "\n")
                return
            fields = json_text(m.fields) if m.fields else ""
            text = (
                f"{'':<12} {'':<7} {clock:<12.6f} {m.kind_name:<8} {m.file:<60} #{m.line:>4} "
                f"{m.name + (' ' + fields if fields else ''):<40}"
            )
            line = text + (f" {'':>12} {'':>10} {thread}" if multi else "")
            out.write(terminal_text(line) + "\n")

        for stream, (n, kind, fid, t, rss_pages, heap, off) in cap.events_by_time():
            while next_mark < len(marks) and marks[next_mark].t <= t:
                write_mark(marks[next_mark])
                next_mark += 1
            func = cap.function(fid)
            if kind not in (EVENT["CALL"], EVENT["RETURN"]):  # a builtin's: at its caller
                caller = state.caller(stream)
                cf = cap.function(caller) if caller is not None else None
                file = cf.file if cf else ""
                line = cf.line_at(off) if cf else 0
            else:
                file = func.file
                line = func.line if kind == EVENT["CALL"] else func.line_at(off)
            state.apply(stream, kind, fid)
            rss = rss_pages * page
            d_rss = rss - prev_rss if prev_rss is not None else rss
            d_event = n - prev_n.get(stream, 0)
            prev_n[stream] = n
            prev_rss = rss
            clock = cap.ns(t) / 1e9
            if as_json:
                row = {
                    "event": n,
                    "d_event": d_event,
                    "clock": round(clock, 9),
                    "what": KIND_NAMES[kind],
                    "file": file,
                    "line": line,
                    "function": func.name,
                    "rss": rss,
                    "d_rss": d_rss,
                    "heap": heap,
                    "thread": cap.thread_name(stream),
                }
                out.write(json_text(row) + "\n")
                continue
            text = (
                f"{n:<12} {'+' + str(d_event):<7} {clock:<12.6f} {KIND_NAMES[kind]:<8} "
                f"{file:<60} #{line:>4} {func.name:<40} {rss:>12} {d_rss:>10}"
            )
            if multi:
                text += f" {cap.thread_name(stream)}"
            out.write(terminal_text(text) + "\n")
        for m in marks[next_mark:]:
            write_mark(m)
        early = stop.for_report(cap)
        if early and not as_json:
            out.write(
                f"# recording stopped early, at {early['at_ns'] / 1e9:.6f} s: {early['message']}\n"
            )
        if cap.damage:
            out.write(f"# incomplete capture: {cap.damage}\n")
