"""`leadline attach PID [--duration S]`: sample a running Python process from outside.

Nothing is injected into the target and it is never stopped (but with --native, for a moment
at each sample, while a thread's C stack is unwound): its memory is read with process_vm_readv,
which needs ptrace permission over it."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from typing import Any

from ..errors import LeadlineError
from ..record.profiler import attach
from ._common import StatusLine
from ._sampling import add_sampling_arguments, options_from, summarise


def _pid(text: str) -> int:
    try:
        pid = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}")
    return pid


def register(sub: Any) -> None:
    p = sub.add_parser(
        "attach",
        help="sample a running Python process (3.10-3.15) without stopping it",
        description="Sample the Python stacks of all threads of a running process until it "
        "exits, --duration passes, or Ctrl-C.  Needs ptrace permission over the process.",
    )
    p.add_argument("pid", type=_pid, help="the process id")
    p.add_argument(
        "-d", "--duration", type=float, default=None, metavar="S", help="stop after S seconds"
    )
    p.add_argument(
        "--native",
        action="store_true",
        help="also sample each thread's C frames (the interpreter's, extensions', libraries'), "
        "the Python frames in place of the interpreter's loop that runs them; each thread is "
        "stopped for a moment at each sample while its C stack is read (needs elfutils' libdw)",
    )
    add_sampling_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.pid == os.getpid():
        raise LeadlineError("cannot attach to leadline itself; use `leadline run`")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise LeadlineError("--duration must be a positive number of seconds")
    status = StatusLine()
    status.active = status.active and not args.quiet

    def progress(ticks: int, samples: int, seconds: float) -> None:
        left = f", {args.duration - seconds:.0f} s left" if args.duration else ""
        status.update(
            f"leadline: sampling {args.pid}: {samples:,} samples in {seconds:.1f} s{left} "
            "(Ctrl-C stops)"
        )

    try:
        options = dataclasses.replace(options_from(args), native=args.native)
        result = attach(args.pid, args.output, options, args.duration, progress=progress)
    finally:
        status.clear()
    summarise(result, args.quiet)
    return 0
