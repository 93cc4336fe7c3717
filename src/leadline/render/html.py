"""`report --html`: a self-contained page: for a trace the memory timeline and a flame graph,
for a sampling profile its flame graph."""

from __future__ import annotations

from typing import IO

from ..analyse.samples import load_profile
from ..analyse.trace import analyse, to_json
from ..capture.reader import Capture
from ..errors import LeadlineError
from .base import Renderer, RenderOptions, is_sampling, register
from .marks_table import marks_json
from .sample_html import render_sample_html
from .trace_html import render_trace_html


@register
class HtmlReport(Renderer):
    name = "html"
    extension = "html"
    description = "self-contained HTML: memory timeline and flame graph"

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        if cap.meta.get("mode") == "probe":
            raise LeadlineError(
                f"{cap.path}: a probe capture has counts, not a profile: "
                "use `leadline report` or `--json`"
            )
        if is_sampling(cap):
            out.write(render_sample_html(load_profile(cap, options.progress)))
            return
        data = to_json(analyse(cap, options.progress), None, options.sort)
        data["marks"] = marks_json(cap)
        out.write(render_trace_html(data))
