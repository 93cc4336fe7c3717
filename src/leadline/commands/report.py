"""`leadline report CAPTURE`: per-function totals (text, --json, --html)."""

from __future__ import annotations

import argparse
from typing import Any

from ..analyse.trace import SORT_KEYS
from ..render.base import CAPTURE_KINDS, RenderOptions, formats
from ._common import add_open_argument, html_for_open, open_in_browser, render_capture


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="per-function time and memory totals of a capture",
        description="Per function: calls, inclusive/exclusive wall time, "
        "inclusive/exclusive RSS growth, heap bytes allocated, peak growth.",
    )
    p.add_argument("capture", help="a .lead capture file")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="machine-readable JSON (docs/report-json.md)",
    )
    fmt.add_argument(
        "--html",
        dest="format",
        action="store_const",
        const="html",
        help="self-contained HTML page: flame graph (and, for a trace, the memory timeline)",
    )
    fmt.add_argument(
        "--format", dest="format", choices=sorted(formats(CAPTURE_KINDS)), help="any output format"
    )
    p.add_argument(
        "--sort",
        default="incl",
        choices=list(SORT_KEYS),
        help="order of the table (default: inclusive time)",
    )
    p.add_argument("--limit", type=int, default=None, help="rows to show (text: 25)")
    sampling = p.add_argument_group("sampling captures (leadline run / attach)")
    sampling.add_argument(
        "--callers", metavar="FUNC", help="who calls FUNC (name, Class.method, glob, file:name)"
    )
    sampling.add_argument("--callees", metavar="FUNC", help="what FUNC calls")
    sampling.add_argument(
        "--idle", action="store_true", help="count samples of idle threads too (wall mode)"
    )
    sampling.add_argument(
        "--metric",
        choices=("samples", "cpu", "memory"),
        default=None,
        help="weight of each sample (default: samples in wall mode, cpu in cpu mode)",
    )
    p.add_argument("-o", "--output", help="write here instead of standard output")
    add_open_argument(p)
    p.set_defaults(func=run, format="text")


def run(args: argparse.Namespace) -> int:
    html_for_open(args)
    output = args.output
    if args.format == "html" and not output:
        output = str(args.capture).removesuffix(".lead") + ".html"
    status = render_capture(
        args.capture,
        args.format,
        output,
        RenderOptions(
            sort=args.sort,
            limit=args.limit,
            callers=args.callers,
            callees=args.callees,
            idle=args.idle,
            metric=args.metric,
        ),
    )
    if args.format == "html":
        print(f"leadline: wrote {output}")
        if args.open:
            open_in_browser(output)
    return status
