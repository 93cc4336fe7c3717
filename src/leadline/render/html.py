"""`report --html`: a self-contained page with the memory timeline and a flame graph."""

from __future__ import annotations

from typing import IO

from ..analysis import analyse, to_json
from ..capture import Capture
from .base import Renderer, RenderOptions, register
from .trace_html import render_trace_html


@register
class HtmlReport(Renderer):
    name = "html"
    extension = "html"
    description = "self-contained HTML: memory timeline and flame graph"

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        out.write(render_trace_html(to_json(analyse(cap, options.progress), None, options.sort)))
