"""speedscope JSON: one sampled profile per thread (open in speedscope.app or `speedscope`)."""

from __future__ import annotations

from typing import IO

from ..capture.reader import Capture
from .base import RenderOptions, register
from .encode import to_speedscope
from .sampled import SampledExport
from .untrusted import json_text


@register
class Speedscope(SampledExport):
    name = "speedscope"
    extension = "json"
    description = "speedscope JSON, one profile per thread, weighted by --metric"

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        p = self.profile(cap)
        out.write(json_text(to_speedscope(p, self.metric(p, options)), separators=(",", ":")))
        out.write("\n")
