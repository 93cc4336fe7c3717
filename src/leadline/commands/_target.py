"""The program a command runs, given as `python` takes it (script, -m module, -c code), and
running it while it is recorded."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..record import runner
from ..record.recorder import Recorder


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """The program to run, as `python` takes it; shared by every command that runs one."""
    for flag, dest, metavar, what in (
        ("-m", "module", "MODULE ...", "run a library module as a script"),
        ("-c", "code", "CODE ...", "run a program passed in as a string"),
    ):
        p.add_argument(flag, dest=dest, nargs=argparse.REMAINDER, metavar=metavar, help=what)
    p.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        metavar="script.py [args]",
        help="the script and its arguments (a leading -- is allowed)",
    )


def run_recorded(target: runner.Target, recorder: Recorder) -> tuple[int, Any]:
    """Run the program as `python` would, recording it; (its exit status, the recording's
    result).  The recording stops however the program ends.  A negative status -N means that
    python would have ended by signal N (runner.exit_by_signal does that, last)."""
    program = runner.prepare(target)
    recorder.start()
    try:
        status = runner.execute(program)
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        result = recorder.stop()
    return status, result
