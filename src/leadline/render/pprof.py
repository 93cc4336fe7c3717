"""pprof: the gzip protobuf that `go tool pprof`, Pyroscope and Cloud Profiler read."""

from __future__ import annotations

from typing import IO

from ..capture.reader import Capture
from .base import RenderOptions, register
from .encode import to_pprof
from .sampled import SampledExport


@register
class Pprof(SampledExport):
    name = "pprof"
    extension = "pb.gz"
    description = "pprof profile, every sample type (go tool pprof, Pyroscope)"
    binary = True

    def render(self, cap: Capture, out: IO[bytes], options: RenderOptions) -> None:
        out.write(to_pprof(self.profile(cap)))
