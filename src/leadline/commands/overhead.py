"""`leadline overhead [--rounds N] [--modes ...] (script.py | -m module | -c code) [args]`: the
program alone and under each leadline mode, interleaved, as seed 002's summary table."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from ..analyse.overhead import MODES, measure, summarise, target_argv
from ..errors import LeadlineError
from ..record import runner
from ..render import RenderOptions
from ..render.text import make_console
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


def _cell(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


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
    total = args.rounds * len(modes)
    if sys.stderr.isatty():
        with Progress(
            TextColumn("overhead"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            transient=True,
        ) as bar:
            task = bar.add_task("overhead", total=total)
            results = measure(
                target,
                modes,
                args.rounds,
                args.count,
                args.timeout,
                lambda d, t: bar.update(task, completed=d),
            )
    else:
        results = measure(target, modes, args.rounds, args.count, args.timeout)
    rows = summarise(results)
    if args.json:
        doc = {
            "python_version": ".".join(map(str, sys.version_info[:3])),
            "rounds": args.rounds,
            "argv": target.argv,
            "modes": rows,
            "notes": notes,
        }
        print(json.dumps(doc, indent=1))
        return 0
    console = make_console(sys.stdout, RenderOptions())
    console.print(
        f"leadline overhead of: {' '.join(target_argv(target))}  "
        f"({args.rounds} rounds, interleaved; "
        f"Python {'.'.join(map(str, sys.version_info[:3]))})",
        markup=False,
    )
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in (
        "Mode",
        "Median time",
        "CPU",
        "Ratio",
        "Ratio range",
        "Events",
        "Events/s",
        "µs/event",
        "Bytes written",
    ):
        table.add_column(col, justify="left" if col == "Mode" else "right", no_wrap=True)
    for r in rows:
        rng = f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}" if r["ratio_min"] is not None else "-"
        table.add_row(
            r["mode"],
            _cell(r["median_wall"], ".3f") + " s",
            _cell(r["median_cpu"], ".3f") + " s",
            "x" + _cell(r["ratio"], ".2f"),
            rng,
            f"{r['events']:,}",
            _cell(r["events_per_s"], ",.0f"),
            _cell(r["us_per_event"], ".3f"),
            f"{r['bytes']:,}",
        )
    console.print(table)
    for r in rows:
        if r["failed_runs"]:
            notes.append(f"{r['mode']}: {r['failed_runs']} run(s) failed")
    for n in notes:
        console.print(f"note: {n}", markup=False)
    return 0
