"""speedscope JSON: one sampled profile per thread (open in speedscope.app or `speedscope`)."""

from __future__ import annotations

import json
from typing import IO

from ..analyse.model import SampleProfile
from ..analyse.samples import default_metric
from .base import Renderer, RenderOptions, register
from .encode import to_speedscope


@register
class Speedscope(Renderer[SampleProfile]):
    name = "speedscope"
    kinds = ("sample",)
    extension = "json"
    description = "speedscope JSON, one profile per thread, weighted by --metric"

    def render(self, p: SampleProfile, out: IO[str], options: RenderOptions) -> None:
        # ASCII JSON: names and paths from the program may hold lone surrogates.
        metric = options.metric or default_metric(p)
        json.dump(to_speedscope(p, metric), out, separators=(",", ":"))
        out.write("\n")
