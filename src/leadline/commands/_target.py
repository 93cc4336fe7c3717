"""The program a command runs, given as `python` takes it (script, -m module, -c code)."""

from __future__ import annotations

import argparse


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
