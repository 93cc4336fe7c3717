"""`leadline export CAPTURE --format F`: convert a capture for other tools."""

from __future__ import annotations

import argparse
from typing import Any

from ..analyse.model import METRICS
from ..render import RenderOptions, get_renderer
from ..render.base import all_renderers
from ._common import render_capture


def register(sub: Any) -> None:
    names = sorted(all_renderers())
    p = sub.add_parser(
        "export",
        help=f"convert a capture ({', '.join(names)})",
        description="Formats: "
        + ", ".join(f"{n} ({cls.description})" for n, cls in sorted(all_renderers().items())),
    )
    p.add_argument("capture", help="a .lead capture file")
    p.add_argument("--format", required=True, choices=names)
    p.add_argument(
        "-o", "--output", help="output file (default: CAPTURE with the format's extension)"
    )
    p.add_argument(
        "--metric",
        default=None,
        choices=METRICS,
        help="weight of a sampling export with one weight: speedscope, collapsed "
        "(default: samples in wall mode, cpu in cpu mode; pprof carries every sample type)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    renderer = get_renderer(args.format)
    output = args.output or (
        str(args.capture).removesuffix(".lead") + f".{args.format}.{renderer.extension}"
    )
    status = render_capture(args.capture, renderer, output, RenderOptions(metric=args.metric))
    if output != "-":  # standard output holds the export itself
        print(f"leadline: wrote {output}")
    return status
