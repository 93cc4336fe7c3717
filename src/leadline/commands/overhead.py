"""`leadline overhead [--rounds N] [--modes ...] (script.py | -m module | -c code) [args]`: the
program alone and under each leadline mode, interleaved: the cost of each mode, as a table."""

from __future__ import annotations

import argparse
from typing import Any

from ..analyse.overhead import MODES, OverheadTable, measure, summarise, target_argv
from ..errors import LeadlineError
from ..record import runner
from ..render.base import RenderOptions, get_renderer
from ._common import run_progress, write_rendered
from ._target import add_target_arguments
from .probe import add_probe_arguments


def register(sub: Any) -> None:
    p = sub.add_parser(
        "overhead",
        help="measure what each leadline mode costs a program",
        description="Run the program alone and under each leadline mode (rounds interleaved, "
        "each run its own process) and print mode, median time, ratio to the program alone, "
        "events, events/s, µs per event and bytes written.",
    )
    p.add_argument("--rounds", type=int, default=5, metavar="N", help="rounds (default 5)")
    p.add_argument(
        "--modes",
        metavar="A,B,...",
        help="modes to run besides baseline: " + ", ".join(m.name for m in MODES[1:]),
    )
    add_probe_arguments(p)
    p.add_argument("--timeout", type=float, metavar="S", help="kill a run after S seconds")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    add_target_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.rounds < 1:
        raise LeadlineError("--rounds must be at least 1")
    target = runner.parse_target(args.program, args.module, args.code)
    names = [m.name for m in MODES]
    wanted = args.modes.split(",") if args.modes else names[1:]
    for w in wanted:
        if w not in names:
            raise LeadlineError(f"--modes: no mode {w!r} (modes: {', '.join(names[1:])})")
    notes = []
    if "probe" in wanted and not args.count:
        wanted.remove("probe")
        notes.append("probe: no --count given")
    modes = [MODES[0], *(m for m in MODES[1:] if m.name in wanted)]
    with run_progress("overhead", args.rounds * len(modes)) as progress:
        results = measure(target, modes, args.rounds, args.count, args.timeout, progress)
    rows = summarise(results)
    for r in rows:
        if r["failed_runs"]:
            notes.append(f"{r['mode']}: {r['failed_runs']} run(s) failed")
    table = OverheadTable(target.argv, target_argv(target), args.rounds, rows, notes)
    write_rendered(
        get_renderer("json" if args.json else "text", "overhead"), table, None, RenderOptions()
    )
    return 0
