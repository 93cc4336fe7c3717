"""`leadline compare --base PY --new PY [--runs N] -- script.py [args]`: run two versions of a
program interleaved, sample every run, and print the diff of the two sides."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..analyse.diff import MIN_RUNS, compare, load_runs
from ..errors import LeadlineError
from ..record.twins import MAX_RATE, MIN_RATE, TARGET_SAMPLES, parse_side, record_twins
from ._common import run_progress
from .diff import add_judging_options, settings_of, show


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="run two versions of a program interleaved and diff their profiles",
        description="Runs BASE and NEW in turn (A B A B ...), --runs times each, samples every "
        "run with `leadline run`, and prints `leadline diff` of the two sides.  Same script, two "
        "virtual environments: leadline compare --base old/bin/python --new new/bin/python "
        "-- bench.py.  Two commands: --base 'python bench.py --old' --new 'python bench.py'.",
    )
    p.add_argument(
        "--base",
        required=True,
        metavar="PYTHON | 'PYTHON SCRIPT ARGS'",
        help="BASE's interpreter (the script after -- is run by it), or its whole command line",
    )
    p.add_argument(
        "--new",
        required=True,
        metavar="PYTHON | 'PYTHON SCRIPT ARGS'",
        help="NEW's interpreter, or its whole command line",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=MIN_RUNS,
        metavar="N",
        help=f"runs of each side (default {MIN_RUNS}: from {MIN_RUNS} a side, noise is measured "
        "from their spread)",
    )
    p.add_argument("--mode", choices=("cpu", "wall"), default="cpu", help="default: cpu")
    p.add_argument(
        "--rate",
        type=int,
        metavar="HZ",
        help=f"samples per second (default: chosen from a first run of BASE for about "
        f"{TARGET_SAMPLES:,} samples a run, {MIN_RATE} to {MAX_RATE})",
    )
    p.add_argument(
        "--keep",
        metavar="DIR",
        help="keep the captures in DIR/base and DIR/new (default: a temporary folder, removed)",
    )
    p.add_argument("--timeout", type=float, metavar="S", help="stop if a run takes over S seconds")
    add_judging_options(p)
    p.add_argument("script", nargs=argparse.REMAINDER, metavar="-- SCRIPT [ARGS]")
    p.set_defaults(func=run, format="text")


def run(args: argparse.Namespace) -> int:
    script = list(args.script)
    if script and script[0] == "--":
        script = script[1:]
    twins = [parse_side("base", args.base, script), parse_side("new", args.new, script)]
    if args.rate is not None and not MIN_RATE <= args.rate <= MAX_RATE:
        raise LeadlineError(f"--rate must be between {MIN_RATE} and {MAX_RATE}")
    settings = settings_of(args)
    with tempfile.TemporaryDirectory(prefix="leadline-compare-") as scratch:
        folder = Path(args.keep) if args.keep else Path(scratch)
        with run_progress("compare", args.runs * 2) as progress:
            recorded = record_twins(
                twins, args.runs, args.mode, args.rate, folder, args.timeout, progress
            )
        sides = [load_runs([str(p) for p in recorded.runs[t.label]]) for t in twins]
        result = compare(sides[0], sides[1], settings)
        print(
            f"leadline: {args.runs} run{'s' if args.runs != 1 else ''} of each side at "
            f"{recorded.rate} Hz, interleaved" + (f"; captures in {folder}" if args.keep else ""),
            file=sys.stderr,
        )
        return show(result, args, str(Path(args.keep or ".") / "compare.diff.html"))
