"""speedscope JSON: one sampled profile per thread (open in speedscope.app or `speedscope`)."""

from __future__ import annotations

from typing import IO

from ..analyse.model import SampleProfile
from ..analyse.samples import default_metric
from .base import Renderer, RenderOptions, register
from .encode import to_speedscope
from .untrusted import json_text


@register
class Speedscope(Renderer[SampleProfile]):
    name = "speedscope"
    kinds = ("sample",)
    extension = "json"
    description = "speedscope JSON, one profile per thread, weighted by --metric"

    def render(self, p: SampleProfile, out: IO[str], options: RenderOptions) -> None:
        metric = options.metric or default_metric(p)
        out.write(json_text(to_speedscope(p, metric), separators=(",", ":")))
        out.write("\n")
