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


class _LogWriter:
    """Writes the log's lines, as text columns or JSON lines, keeping what a line needs of
    those before it: each thread's Python call stack (a C call is shown at its caller's
    file:line), its previous event number and the previous RSS."""

    def __init__(self, cap: Capture, out: IO[str], as_json: bool) -> None:
        self.cap = cap
        self.out = out
        self.as_json = as_json
        self.multi = len({c.stream for c in cap.event_chunks}) > 1  # a thread column
        self.stacks: dict[int, list[int]] = {}
        self.prev_n: dict[int, int] = {}
        self.prev_rss: int | None = None

    def header(self) -> None:
        if not self.as_json:
            self.out.write(HEADER + (" Thread" if self.multi else "") + "\n")

    def _where(self, stream: int, kind: int, fid: int, off: int) -> tuple[str, int]:
        """The file and line an event is shown at; follows the thread's call stack."""
        cap = self.cap
        st = self.stacks.setdefault(stream, [])
        if kind not in (EVENT["CALL"], EVENT["RETURN"]):  # a builtin's: at its caller
            cf = cap.function(st[-1]) if st else None
            return (cf.file, cf.line_at(off)) if cf else ("", 0)
        func = cap.function(fid)
        if kind == EVENT["CALL"]:
            st.append(fid)
            return func.file, func.line
        if st and st[-1] == fid:
            st.pop()
        return func.file, func.line_at(off)

    def event(self, stream: int, n: int, kind: int, fid: int, t: int, rss_pages: int,
              heap: int, off: int) -> None:  # fmt: skip
        cap = self.cap
        file, line = self._where(stream, kind, fid, off)
        name = cap.function(fid).name
        rss = rss_pages * cap.page_size
        d_rss = rss - self.prev_rss if self.prev_rss is not None else rss
        d_event = n - self.prev_n.get(stream, 0)
        self.prev_n[stream] = n
        self.prev_rss = rss
        clock = cap.ns(t) / 1e9
        if self.as_json:
            row = {
                "event": n,
                "d_event": d_event,
                "clock": round(clock, 9),
                "what": KIND_NAMES[kind],
                "file": file,
                "line": line,
                "function": name,
                "rss": rss,
                "d_rss": d_rss,
                "heap": heap,
                "thread": cap.thread_name(stream),
            }
            self.out.write(json_text(row) + "\n")
            return
        text = (
            f"{n:<12} {'+' + str(d_event):<7} {clock:<12.6f} {KIND_NAMES[kind]:<8} "
            f"{file:<60} #{line:>4} {name:<40} {rss:>12} {d_rss:>10}"
        )
        if self.multi:
            text += f" {cap.thread_name(stream)}"
        self.out.write(terminal_text(text) + "\n")

    def mark(self, m: Mark) -> None:
        clock = self.cap.ns(m.t) / 1e9
        thread = self.cap.tid_name(m.tid)
        if self.as_json:
            row = {
                "clock": round(clock, 9),
                "what": m.kind_name,
                "file": m.file,
                "line": m.line,
                "mark": m.name,
                "fields": m.fields,
                "thread": thread,
            }
            self.out.write(json_text(row) + "\n")
            return
        fields = json_text(m.fields) if m.fields else ""
        text = (
            f"{'':<12} {'':<7} {clock:<12.6f} {m.kind_name:<8} {m.file:<60} #{m.line:>4} "
            f"{m.name + (' ' + fields if fields else ''):<40}"
        )
        line = text + (f" {'':>12} {'':>10} {thread}" if self.multi else "")
        self.out.write(terminal_text(line) + "\n")

    def trailer(self) -> None:
        """How the capture ended, if not cleanly (as comments; JSON lines leave them out but
        for damage, which is said either way)."""
        early = stop.for_report(self.cap)
        if early and not self.as_json:
            self.out.write(
                f"# recording stopped early, at {early['at_ns'] / 1e9:.6f} s: {early['message']}\n"
            )
        if self.cap.damage:
            self.out.write(f"# incomplete capture: {self.cap.damage}\n")


@register
class EventLog(Renderer[Capture]):
    name = "log"
    kinds = CAPTURE_KINDS  # the events, marks and RSS timeline of any capture
    extension = "log"
    description = "every recorded event, one line each (cPyMemTrace's columns)"

    def load(self, cap: Capture, options: RenderOptions) -> Capture:
        return cap  # the events are streamed from the capture as they are written out

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        log = _LogWriter(cap, out, options.json_lines)
        log.header()
        marks = cap.marks
        next_mark = 0  # marks and events, in time order
        for stream, (n, kind, fid, t, rss_pages, heap, off) in cap.events_by_time():
            while next_mark < len(marks) and marks[next_mark].t <= t:
                log.mark(marks[next_mark])
                next_mark += 1
            log.event(stream, n, kind, fid, t, rss_pages, heap, off)
        for m in marks[next_mark:]:
            log.mark(m)
        log.trailer()
