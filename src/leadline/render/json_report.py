"""`report --json`: the machine form of the report of each kind of capture (schema in
docs/report-json.md)."""

from __future__ import annotations

from typing import IO, Any

from ..analyse.model import SampleProfile
from ..analyse.probes import ProbeReport
from ..analyse.samples import to_json as sample_json
from ..analyse.trace import SCHEMA_VERSION, TraceProfile, to_json
from .base import Renderer, RenderOptions, register
from .marks_table import marks_json
from .untrusted import json_text


def write_json(data: dict[str, Any], out: IO[str]) -> None:
    out.write(json_text(data) + "\n")


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
