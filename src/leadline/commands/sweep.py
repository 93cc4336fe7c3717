"""`leadline sweep --env NAME=v1,v2,... [--repeat N] [--count ...] -- cmd`: the command once
per value (rounds interleaved), and the table of wall, CPU, peak RSS, probe counts and ratios."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..analyse.sweep import parse_env, run_sweep
from ..errors import LeadlineError
from ..render.base import RenderOptions, get_renderer
from ._common import open_in_browser, run_progress, write_rendered
from .probe import add_probe_arguments


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a command per value of an environment variable and tabulate the results",
        description="Run CMD once per value of an environment variable (--repeat rounds, "
        "interleaved) and print value, wall time, CPU time, peak RSS, probe counts and ratios "
        "(medians); --html/--png chart a column against the value.",
    )
    p.add_argument("--env", required=True, metavar="NAME=V1,V2,...", help="the variable swept")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="rounds (default 1)")
    add_probe_arguments(p)
    p.add_argument("--timeout", type=float, metavar="S", help="kill a run after S seconds")
    p.add_argument("--json", action="store_true", help="print the sweep as JSON on stdout")
    p.add_argument("--html", metavar="FILE", help="write the table and a chart (self-contained)")
    p.add_argument("--open", action="store_true", help="open the --html page in a web browser")
    p.add_argument("--png", metavar="FILE", help="write the chart as PNG (needs matplotlib)")
    p.add_argument(
        "--chart",
        metavar="COLUMN",
        help="the column to chart: wall, cpu, peak_rss, a probe or a ratio name "
        "(default: the first ratio, else wall)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    name, values = parse_env(args.env)
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise LeadlineError("nothing to run: give the command after --")
    if args.repeat < 1:
        raise LeadlineError("--repeat must be at least 1")
    if args.open and not args.html:
        raise LeadlineError("--open opens the --html page: give --html FILE")
    ratio_names = [r.partition("=")[0].strip() if "=" in r else r.strip() for r in args.ratio]
    probe_names = [c.partition("=")[0].strip() for c in args.count]
    if args.chart and args.chart not in ("wall", "cpu", "peak_rss", *probe_names, *ratio_names):
        raise LeadlineError(f"--chart {args.chart!r}: not a column of this sweep")
    if args.ratio and not args.count:
        raise LeadlineError("--ratio needs --count")
    with run_progress("sweep", args.repeat * len(values)) as progress:
        sweep = run_sweep(
            name, values, cmd, args.repeat, args.count, args.ratio, args.timeout, progress
        )
    options = RenderOptions(column=args.chart)
    write_rendered(get_renderer("json" if args.json else "text", "sweep"), sweep, None, options)
    for value, status in sweep.failed:
        print(f"leadline: {name}={value}: the command exited with status {status}", file=sys.stderr)
    for fmt, path in (("html", args.html), ("png", args.png)):
        if path:
            write_rendered(get_renderer(fmt, "sweep"), sweep, path, options)
    if args.open:
        open_in_browser(args.html)
    return 1 if sweep.failed else 0
