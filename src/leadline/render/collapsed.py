"""Collapsed (folded) stacks: flamegraph.pl, inferno, speedscope and most flame graph tools."""

from __future__ import annotations

from typing import IO

from ..capture.reader import Capture
from .base import RenderOptions, register
from .encode import to_collapsed
from .sampled import SampledExport


@register
class Collapsed(SampledExport):
    name = "collapsed"
    extension = "txt"
    description = "folded stacks 'a;b;c weight', weighted by --metric"

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        p = self.profile(cap)
        out.write(to_collapsed(p, self.metric(p, options)))
