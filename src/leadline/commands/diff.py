"""`leadline diff BASE NEW`: which function got slower between two profiles."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from ..analyse.diff import (
    DEFAULT_FLOOR,
    DEFAULT_MIN_DELTA,
    DEFAULT_PER_FLOOR,
    DEFAULT_SIGMA,
    MIN_RUNS,
    DiffResult,
    Settings,
    compare,
    fail_reasons,
    load_runs,
    parse_per,
    work_settings,
    work_side,
)
from ..errors import LeadlineError
from ..render.base import RenderOptions, get_renderer
from ._common import add_open_argument, html_for_open, open_in_browser, write_rendered


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


# Where the BASE runs end and the NEW runs begin: what `--` on the command line becomes before
# argparse (which drops a `--` among positionals) sees it.  No argument from the system can
# hold a NUL, so no path is mistaken for it.
SIDES = "\0"


def mark_sides(argv: list[str]) -> list[str]:
    """`argv` (starting with ``diff``) with its first ``--`` marked as the sides' separator."""
    if "--" not in argv:
        return argv
    i = argv.index("--")
    return [*argv[:i], SIDES, *argv[i + 1 :]]


def split_sides(inputs: list[str]) -> tuple[list[str], list[str]]:
    """BASE's inputs and NEW's: either side of the separator, or the two inputs given."""
    if SIDES in inputs:
        i = inputs.index(SIDES)
        base, new = inputs[:i], [x for x in inputs[i + 1 :] if x != SIDES]
        if not base or not new:
            raise LeadlineError("give the BASE runs before -- and the NEW runs after it")
        return base, new
    if len(inputs) != 2:
        raise LeadlineError(
            f"give two profiles (BASE NEW), or several runs a side as BASE... -- NEW... "
            f"({len(inputs)} inputs given)"
        )
    return inputs[:1], inputs[1:]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "diff",
        help="which functions got slower between two profiles",
        description="Compares two profiles of the same program (captures of leadline run, "
        "attach or trace; pprof files; collapsed stacks) and ranks the functions whose cost "
        "changed, saying which changes are beyond noise.",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="BASE... [--] NEW...",
        help="the profile to compare against, then the profile to judge; each side may be "
        "several runs, given as a directory of captures or as files with -- between the "
        f"sides (from {MIN_RUNS} runs a side, noise is measured from their spread)",
    )
    p.add_argument(
        "--per",
        metavar="N[,M]",
        help="compare cost per unit of work: BASE did N units (iterations, requests...), "
        "NEW did M (default N); without it, shares of each side's total are compared",
    )
    add_judging_options(p)
    p.add_argument(
        "--calls",
        action="store_true",
        help="compare two traces by their calls (work the machine's speed does not change) "
        "instead of their time",
    )
    p.add_argument(
        "--idle", action="store_true", help="count samples of idle threads too (wall mode)"
    )
    p.add_argument(
        "--sample-type", help="the sample type of pprof inputs (default: samples, else default)"
    )
    p.set_defaults(func=run, format="text")


def add_judging_options(p: argparse.ArgumentParser) -> None:
    """The options of how a diff is judged and shown (`diff`, `compare`)."""
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
        "--shares",
        action="store_true",
        help="compare shares even when both sides ran the same command and the whole "
        "program's time per run changed beyond noise (which compares time per run)",
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
        default=None,
        help="changes smaller than this %% of the total are never flagged "
        f"(default {100 * DEFAULT_MIN_DELTA:g}; with --calls, 0.5%% and 10 calls)",
    )
    p.add_argument("--limit", type=int, default=None, help="rows to show (text: 25)")
    p.add_argument("-o", "--output", help="write here instead of standard output")
    add_open_argument(p)


def settings_of(args: argparse.Namespace, per: str | None = None) -> Settings:
    """The diff's settings from the judging options."""
    html_for_open(args)
    if args.limit is not None and args.limit < 1:
        raise LeadlineError("--limit must be at least 1")
    return Settings(
        per=parse_per(per) if per else None,
        sigma=args.sigma,
        floor=None if args.noise_floor is None else args.noise_floor / 100,
        min_delta=DEFAULT_MIN_DELTA if args.min_delta is None else args.min_delta / 100,
        tree=args.format == "html",
        by_run=not args.shares,
    )


def run(args: argparse.Namespace) -> int:
    settings = settings_of(args, args.per)
    base_in, new_in = split_sides(args.inputs)
    sides = [load_runs(x, idle=args.idle, sample_type=args.sample_type) for x in (base_in, new_in)]
    if args.calls:
        if args.per:
            raise LeadlineError("--calls compares calls per run: leave out --per")
        if max(side.n_runs for side in sides) > 1:
            raise LeadlineError("--calls compares one trace a side")
        sides = [work_side(side) for side in sides]
        work = work_settings(sides[0])
        settings = dataclasses.replace(
            work,
            sigma=settings.sigma,
            tree=settings.tree,
            # Calls are exact: no floor and the least change work_settings gives, unless asked.
            floor=work.floor if args.noise_floor is None else settings.floor,
            min_delta=work.min_delta if args.min_delta is None else settings.min_delta,
        )
    result = compare(sides[0], sides[1], settings)
    html_beside = str(new_in[0]).rstrip("/").rsplit(".", 1)[0] + ".diff.html"
    return show(result, args, html_beside)


def show(result: DiffResult, args: argparse.Namespace, html_beside: str) -> int:
    """Writes the diff as the judging options ask (an HTML page to `html_beside` unless -o
    says where), its warnings, and with --fail-above, judges it: the exit status."""
    output = args.output
    if args.format == "html" and not output:
        output = html_beside
    write_rendered(
        get_renderer(args.format, "diff"), result, output, RenderOptions(limit=args.limit)
    )
    if args.format == "html":
        print(f"leadline: wrote {output}")
        if args.open:
            open_in_browser(output)
    for warning in result.base.warnings + result.new.warnings:
        print(f"leadline: warning: {warning}", file=sys.stderr)
    if args.fail_above is not None:
        reasons = fail_reasons(result, args.fail_above)
        if reasons:
            more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
            print(f"leadline: regression: {reasons[0]}{more}", file=sys.stderr)
            return 1
    return 0
