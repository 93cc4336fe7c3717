"""`leadline diff BASE NEW`: which function got slower between two profiles."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..analyse.diff import (
    DEFAULT_FLOOR,
    DEFAULT_MIN_DELTA,
    DEFAULT_PER_FLOOR,
    DEFAULT_SIGMA,
    Settings,
    diff_paths,
    fail_reasons,
    parse_per,
    to_json,
)
from ..errors import LeadlineError
from ..render import RenderOptions
from ..render.console import make_console
from ..render.diff_text import render_diff_text
from ._common import open_output


def _pct(text: str) -> float:
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}")
    return v


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {text!r}")
    return v


def register(sub: Any) -> None:
    p = sub.add_parser(
        "diff",
        help="which functions got slower between two profiles",
        description="Compares two profiles of the same program (captures of leadline run, "
        "attach or trace; pprof files; collapsed stacks) and ranks the functions whose cost "
        "changed, saying which changes are beyond noise.",
    )
    p.add_argument("base", metavar="BASE", help="the profile to compare against")
    p.add_argument("new", metavar="NEW", help="the profile to judge")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="machine-readable JSON (docs/diff.md)",
    )
    fmt.add_argument(
        "--html",
        dest="format",
        action="store_const",
        const="html",
        help="a self-contained differential flame graph (red grew, blue shrank)",
    )
    p.add_argument(
        "--per",
        metavar="N[,M]",
        help="compare cost per unit of work: BASE did N units (iterations, requests...), "
        "NEW did M (default N); without it, shares of each side's total are compared",
    )
    p.add_argument(
        "--fail-above",
        metavar="PCT",
        type=_pct,
        help="exit with status 1 when a function's cost grew by more than PCT%% beyond noise",
    )
    p.add_argument(
        "--sigma",
        type=_positive,
        default=DEFAULT_SIGMA,
        help=f"standard deviations a change must exceed to be beyond noise "
        f"(default {DEFAULT_SIGMA:g})",
    )
    p.add_argument(
        "--noise-floor",
        metavar="PCT",
        type=_pct,
        default=None,
        help="run-to-run variation assumed on top of counting noise, in %% of a value "
        f"(default {100 * DEFAULT_FLOOR:g} for shares, {100 * DEFAULT_PER_FLOOR:g} with --per)",
    )
    p.add_argument(
        "--min-delta",
        metavar="PCT",
        type=_pct,
        default=100 * DEFAULT_MIN_DELTA,
        help="changes smaller than this %% of the total are never flagged "
        f"(default {100 * DEFAULT_MIN_DELTA:g})",
    )
    p.add_argument(
        "--idle", action="store_true", help="count samples of idle threads too (wall mode)"
    )
    p.add_argument(
        "--sample-type", help="the sample type of pprof inputs (default: samples, else default)"
    )
    p.add_argument("--limit", type=int, default=None, help="rows to show (text: 25)")
    p.add_argument("-o", "--output", help="write here instead of standard output")
    p.set_defaults(func=run, format="text")


def run(args: argparse.Namespace) -> int:
    settings = Settings(
        per=parse_per(args.per) if args.per else None,
        sigma=args.sigma,
        floor=None if args.noise_floor is None else args.noise_floor / 100,
        min_delta=args.min_delta / 100,
        tree=args.format == "html",
    )
    if args.limit is not None and args.limit < 1:
        raise LeadlineError("--limit must be at least 1")
    result = diff_paths(args.base, args.new, settings, idle=args.idle, sample_type=args.sample_type)
    output = args.output
    if args.format == "html" and not output:
        output = str(args.new).rsplit(".", 1)[0] + ".diff.html"
    with open_output(output) as out:
        if args.format == "json":
            json.dump(to_json(result, args.limit), out, indent=1, allow_nan=False)
            out.write("\n")
        elif args.format == "html":
            from ..render.diff_html import render_diff_html

            out.write(render_diff_html(to_json(result)))
        else:
            render_diff_text(result, make_console(out, RenderOptions()), args.limit)
    if args.format == "html":
        print(f"leadline: wrote {output}")
    for warning in result.base.warnings + result.new.warnings:
        print(f"leadline: warning: {warning}", file=sys.stderr)
    if args.fail_above is not None:
        reasons = fail_reasons(result, args.fail_above)
        if reasons:
            more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
            print(f"leadline: regression: {reasons[0]}{more}", file=sys.stderr)
            return 1
    return 0
