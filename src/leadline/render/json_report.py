"""`report --json`: the machine form of the report (schema in docs/report-json.md)."""

from __future__ import annotations

import json
from typing import IO

from ..analysis import analyse, to_json
from ..capture import Capture
from ..sampling import load_profile
from ..sampling import to_json as sample_json
from .base import Renderer, RenderOptions, is_sampling, register


@register
class JsonReport(Renderer):
    name = "json"
    extension = "json"
    description = "the report as JSON (docs/report-json.md)"

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        if is_sampling(cap):
            data = sample_json(load_profile(cap, options.progress), options.idle)
        else:
            data = to_json(analyse(cap, options.progress), options.limit, options.sort)
        json.dump(data, out, ensure_ascii=False)
        out.write("\n")
