"""`leadline log CAPTURE`: every recorded event, the classic log."""

from __future__ import annotations

import argparse
from typing import Any

from ..render.base import RenderOptions
from ._common import render_capture


def register(sub: Any) -> None:
    p = sub.add_parser(
        "log",
        help="print every recorded event (Event, dEvent, Clock, What, "
        "File, #line, Function, RSS, dRSS)",
    )
    p.add_argument("capture", help="a .lead capture file")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("-o", "--output", help="write here instead of standard output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = RenderOptions(json_lines=args.json)
    return render_capture(args.capture, "log", args.output, options, command="log")
