"""pprof: the gzip protobuf that `go tool pprof`, Pyroscope and Cloud Profiler read."""

from __future__ import annotations

from typing import IO

from ..analyse.model import SampleProfile
from .base import Renderer, RenderOptions, register
from .encode import to_pprof


@register
class Pprof(Renderer[SampleProfile]):
    name = "pprof"
    kinds = ("sample",)
    extension = "pb.gz"
    description = "pprof profile, every sample type (go tool pprof, Pyroscope)"
    binary = True

    def render(self, p: SampleProfile, out: IO[bytes], options: RenderOptions) -> None:
        out.write(to_pprof(p))
