"""`report --html`: a self-contained page: for a trace the memory timeline and a flame graph,
for a sampling profile its flame graph."""

from __future__ import annotations

from typing import IO

from ..analyse.model import SampleProfile
from ..analyse.trace import TraceProfile, to_json
from .base import Renderer, RenderOptions, register
from .marks_table import marks_json
from .sample_html import render_sample_html
from .sources import sources_by_weight
from .trace_html import render_trace_html


@register
class TraceHtml(Renderer[TraceProfile]):
    name = "html"
    kinds = ("trace",)
    extension = "html"
    description = "self-contained HTML: memory timeline and flame graph"

    def render(self, p: TraceProfile, out: IO[str], options: RenderOptions) -> None:
        data = to_json(p, None, options.sort)
        data["marks"] = marks_json(p.capture)
        # The files of the traced functions, by their own time (the source view).
        weight: dict[str, float] = {}
        for f in p.functions:
            if f.func.file:
                weight[f.func.file] = weight.get(f.func.file, 0.0) + max(f.self_ns, 0)
        data["sources"] = sources_by_weight(weight, p.capture.end)
        out.write(render_trace_html(data))


@register
class SampleHtml(Renderer[SampleProfile]):
    name = "html"
    kinds = ("sample",)
    extension = "html"
    description = "self-contained HTML: flame graph"

    def render(self, p: SampleProfile, out: IO[str], options: RenderOptions) -> None:
        out.write(render_sample_html(p))
