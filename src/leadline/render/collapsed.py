"""Collapsed (folded) stacks: flamegraph.pl, inferno, speedscope and most flame graph tools."""

from __future__ import annotations

from typing import IO

from ..analyse.model import SampleProfile
from ..analyse.samples import default_metric
from .base import Renderer, RenderOptions, register
from .encode import iter_collapsed


@register
class Collapsed(Renderer[SampleProfile]):
    name = "collapsed"
    kinds = ("sample",)
    extension = "txt"
    description = "folded stacks 'a;b;c weight', weighted by --metric"

    def render(self, p: SampleProfile, out: IO[str], options: RenderOptions) -> None:
        for line in iter_collapsed(p, options.metric or default_metric(p)):
            out.write(line)
