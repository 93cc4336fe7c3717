"""Chrome trace / Perfetto JSON: every call as a slice, RSS and heap as counters."""

from __future__ import annotations

from typing import IO

from ..capture.reader import EVENT, MARK, Capture
from .base import CAPTURE_KINDS, Renderer, RenderOptions, register
from .untrusted import json_text


@register
class ChromeTrace(Renderer[Capture]):
    name = "chrome"
    kinds = CAPTURE_KINDS  # the events, marks and RSS timeline of any capture
    extension = "json"
    description = "Chrome trace / Perfetto JSON (open in ui.perfetto.dev or chrome://tracing)"

    def load(self, cap: Capture, options: RenderOptions) -> Capture:
        return cap  # the events are streamed from the capture as they are written out

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        pid = int(cap.meta.get("pid", 1))
        page = cap.page_size
        out.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        first = True

        def emit(obj: dict[str, object]) -> None:
            nonlocal first
            out.write(("" if first else ",\n") + json_text(obj))
            first = False

        for serial in sorted({c.stream for c in cap.event_chunks}):
            emit(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": serial,
                    "args": {"name": cap.thread_name(serial)},
                }
            )
        depth: dict[int, int] = {}
        for stream, (_n, kind, fid, t, rss_pages, heap, _off) in cap.events():
            ts = cap.ns(t) / 1000.0
            if kind in (EVENT["CALL"], EVENT["C_CALL"]):
                f = cap.function(fid)
                depth[stream] = depth.get(stream, 0) + 1
                emit(
                    {
                        "ph": "B",
                        "name": f.label,
                        "cat": "c" if kind == EVENT["C_CALL"] else "py",
                        "pid": pid,
                        "tid": stream,
                        "ts": ts,
                        "args": {
                            "file": f.file,
                            "line": f.line,
                            "rss": rss_pages * page,
                            "heap_allocated": heap,
                        },
                    }
                )
            elif depth.get(stream, 0) > 0:
                depth[stream] -= 1
                emit(
                    {
                        "ph": "E",
                        "pid": pid,
                        "tid": stream,
                        "ts": ts,
                        "args": {"rss": rss_pages * page},
                    }
                )
        serial_of = {tid: serial for serial, (tid, _ident) in cap.threads.items()}
        # Spans are nestable async slices, one track per thread (their id), not B/E slices in
        # the thread's stack of calls: a mark reads the CPU's counter, while the calls around
        # it may have the RSS sampler's clock, up to a period behind, and slices of the one
        # stack must nest by their times.
        phases = {MARK["MARK"]: "i", MARK["BEGIN"]: "b", MARK["END"]: "e"}
        for m in cap.marks:
            tid = serial_of.get(m.tid, m.tid)
            mark: dict[str, object] = {
                "ph": phases.get(m.kind, "i"),
                "name": m.name,
                "cat": "mark",
                "pid": pid,
                "tid": tid,
                "ts": cap.ns(m.t) / 1000.0,
                "args": {**m.fields, "location": m.location},
            }
            if m.kind == MARK["MARK"]:
                mark["s"] = "t"
            else:
                mark["id"] = f"spans-{tid}"
            emit(mark)
        for t, v in zip(cap.timeline_t, cap.timeline_rss, strict=False):
            emit(
                {
                    "ph": "C",
                    "name": "RSS",
                    "pid": pid,
                    "ts": cap.ns(t) / 1000.0,
                    "args": {"bytes": v * page},
                }
            )
        out.write("\n]}\n")
