"""`report --json`: the machine form of the report of each kind of capture (schema in
docs/report-json.md)."""

from __future__ import annotations

import json
from typing import IO, Any

from ..analyse.model import SampleProfile
from ..analyse.probes import ProbeReport
from ..analyse.samples import to_json as sample_json
from ..analyse.trace import SCHEMA_VERSION, TraceProfile, to_json
from .base import Renderer, RenderOptions, register
from .marks_table import marks_json


def write_json(data: dict[str, Any], out: IO[str]) -> None:
    json.dump(data, out, ensure_ascii=False)
    out.write("\n")


@register
class TraceJson(Renderer[TraceProfile]):
    name = "json"
    kinds = ("trace",)
    extension = "json"
    description = "the report as JSON (docs/report-json.md)"

    def render(self, p: TraceProfile, out: IO[str], options: RenderOptions) -> None:
        write_json({**to_json(p, options.limit, options.sort), "marks": marks_json(p.capture)}, out)


@register
class SampleJson(Renderer[SampleProfile]):
    name = "json"
    kinds = ("sample",)
    extension = "json"
    description = TraceJson.description

    def render(self, p: SampleProfile, out: IO[str], options: RenderOptions) -> None:
        write_json({**sample_json(p, options.idle), "marks": marks_json(p.capture)}, out)


@register
class ProbeJson(Renderer[ProbeReport]):
    name = "json"
    kinds = ("probe",)
    extension = "json"
    description = TraceJson.description

    def render(self, r: ProbeReport, out: IO[str], options: RenderOptions) -> None:
        data = {"schema": SCHEMA_VERSION, "kind": "probe", **r.data}
        write_json({**data, "marks": marks_json(r.capture)}, out)
