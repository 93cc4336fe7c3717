"""`leadline run [options] (script.py | -m module | -c code) [args]`: a sampling profile.

The program runs in this process, as `python` would run it; a native thread samples the
stacks of all its threads (and with --subprocesses of its child processes) without the GIL."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .. import runner
from ..profiler import ProfileOptions, Profiler, ProfileResult
from ..render import RenderOptions, get_renderer
from ..tracer import default_output
from ._common import render_capture, run_recorded
from .trace import add_target_arguments


def add_sampling_arguments(p: argparse.ArgumentParser) -> None:
    """What `run` and `attach` share."""
    p.add_argument("-o", "--output", help="capture file (default: NAME-sample-DATE-PID.lead)")
    p.add_argument(
        "-r",
        "--rate",
        type=float,
        default=100.0,
        metavar="HZ",
        help="samples per second (default 100; up to 20000)",
    )
    p.add_argument(
        "--mode",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: every thread at every tick, idle ones marked (default); cpu: only threads "
        "that ran, weighted by the CPU time they used",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="also record RSS at every tick and attribute its growth to the stacks that ran",
    )
    p.add_argument(
        "--subprocesses",
        action="store_true",
        help="also sample child processes that run Python (fork, exec, multiprocessing)",
    )
    p.add_argument("--max-depth", type=int, default=8192, metavar="N", help="frames kept per stack")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")


def options_from(args: argparse.Namespace) -> ProfileOptions:
    return ProfileOptions(
        rate_hz=args.rate,
        mode=args.mode,
        memory=args.memory,
        subprocesses=args.subprocesses,
        max_depth=args.max_depth,
    )


def summarise(result: ProfileResult, quiet: bool) -> None:
    """The profile's top functions and a one-line summary, on stderr."""
    if quiet:
        return
    if result.write_error is None:
        try:
            sys.stderr.flush()
            render_capture(
                str(result.path), get_renderer("text"), "-", RenderOptions(limit=15), sys.stderr
            )
        except Exception as e:  # the capture is written; a report problem must not hide it
            print(f"leadline: cannot summarise {result.path}: {e}", file=sys.stderr)
    cpu = 100.0 * result.sampler_cpu_ns / max(result.seconds * 1e9, 1)
    print(
        f"leadline: {result.samples:,} samples in {result.ticks:,} ticks "
        f"({result.missed:,} missed, {result.torn:,} torn), sampler {cpu:.2f}% of a core, "
        f"{result.bytes_written:,} bytes -> {result.path}",
        file=sys.stderr,
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="sample a program's stacks (all threads) at a set rate",
        description="Run a program and sample the Python stacks of all its threads from a "
        "native thread that never takes the GIL; writes a capture for `leadline report`.",
    )
    add_sampling_arguments(p)
    add_target_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    target = runner.parse_target(args.program, args.module, args.code)
    output = args.output or default_output(target.argv0, "sample")
    profiler = Profiler(output, options_from(args), argv=target.argv)
    status, result = run_recorded(target, profiler)
    if os.getpid() == profiler.pid:
        summarise(result, args.quiet)
    return status
