"""`report --json`: the machine form of the report (schema in docs/report-json.md)."""

from __future__ import annotations

from typing import IO

from ..analyse.samples import load_profile
from ..analyse.samples import to_json as sample_json
from ..analyse.trace import SCHEMA_VERSION, analyse, to_json
from ..capture.reader import Capture
from .base import Renderer, RenderOptions, is_sampling, register
from .marks_table import marks_json
from .probe_text import probe_data
from .untrusted import json_text


@register
class JsonReport(Renderer):
    name = "json"
    extension = "json"
    description = "the report as JSON (docs/report-json.md)"

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        if cap.meta.get("mode") == "probe":
            data = {"schema": SCHEMA_VERSION, "kind": "probe", **probe_data(cap)}
        elif is_sampling(cap):
            data = sample_json(load_profile(cap, options.progress), options.idle)
        else:
            data = to_json(analyse(cap, options.progress), options.limit, options.sort)
        data["marks"] = marks_json(cap)
        out.write(json_text(data) + "\n")
