"""The `leadline` command line.  Each subcommand is one module in leadline.commands with
`register(subparsers)` and `run(args) -> int`; help is generated from the parsers."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from . import __version__, commands
from .errors import LeadlineError


class Parser(argparse.ArgumentParser):
    """Usage errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"leadline: error: {message} (see '{self.prog} --help')\n")


def build_parser(only: str | None = None) -> Parser:
    """The parser, with every command, or with `only` that one (what `main` uses when the
    command line names it: the other commands' modules are not imported)."""
    parser = Parser(prog="leadline", description="Where a Python program's time and memory go.")
    parser.add_argument("--version", action="version", version=f"leadline {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in commands.load((only,) if only else commands.NAMES):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    first = args_in[0] if args_in else None
    parser = build_parser(first if first in commands.NAMES else None)
    if first == "diff":
        from .commands.diff import mark_sides

        args_in = mark_sides(args_in)
    args = parser.parse_args(args_in)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        status: int = args.func(args)
        return status
    except LeadlineError as e:
        print(f"leadline: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


def console_main() -> NoReturn:
    status = main()
    if status < 0:  # the program ended as python ends by signal -status (Ctrl-C)
        from .record.runner import exit_by_signal

        exit_by_signal(-status)
    sys.exit(status)
