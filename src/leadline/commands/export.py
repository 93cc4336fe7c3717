"""`leadline export CAPTURE --format F`: convert a capture for other tools."""

from __future__ import annotations

import argparse
from typing import Any

from ..analyse.model import METRICS
from ..render.base import CAPTURE_KINDS, RenderOptions, formats, renderers
from ._common import render_capture


def register(sub: Any) -> None:
    described = formats(CAPTURE_KINDS)
    names = sorted(described)
    p = sub.add_parser(
        "export",
        help=f"convert a capture ({', '.join(names)})",
        description="Formats: " + ", ".join(f"{n} ({d})" for n, d in sorted(described.items())),
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
    extension = next(c.extension for (f, _), c in renderers().items() if f == args.format)
    output = args.output or (
        str(args.capture).removesuffix(".lead") + f".{args.format}.{extension}"
    )
    status = render_capture(
        args.capture, args.format, output, RenderOptions(metric=args.metric), command="export"
    )
    if output != "-":  # standard output holds the export itself
        print(f"leadline: wrote {output}")
    return status
