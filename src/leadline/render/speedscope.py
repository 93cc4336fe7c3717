"""speedscope JSON: one sampled profile per thread (open in speedscope.app or `speedscope`)."""

from __future__ import annotations

import json
from typing import IO

from ..capture.reader import Capture
from .base import RenderOptions, register
from .encode import to_speedscope
from .sampled import SampledExport


@register
class Speedscope(SampledExport):
    name = "speedscope"
    extension = "json"
    description = "speedscope JSON, one profile per thread, weighted by --metric"

    def render(self, cap: Capture, out: IO[str], options: RenderOptions) -> None:
        # ASCII JSON: names and paths from the program may hold lone surrogates.
        p = self.profile(cap)
        json.dump(to_speedscope(p, self.metric(p, options)), out, separators=(",", ":"))
        out.write("\n")
