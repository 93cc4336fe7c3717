"""`leadline trace [options] (script.py | -m module | -c code) [args]`: every call, with memory."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..record import runner
from ..record.recorder import default_output
from ..record.tracer import TraceOptions, Tracer, parse_size
from ._target import add_target_arguments, run_recorded


def _bytes(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    try:
        if t and t[-1] in units:
            return int(float(t[:-1]) * units[t[-1]])
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r}") from None


def _max_size(text: str) -> int:
    try:
        size = parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (bytes, or with a unit: 500M, 2G; 0 or none: no limit)"
        ) from None
    assert size is not None
    return size


def register(sub: Any) -> None:
    p = sub.add_parser(
        "trace",
        help="record every call and return with time and memory",
        description="Record CALL/RETURN (and optionally C calls) on all threads, each with a "
        "timestamp, RSS and Python-heap bytes allocated, into a capture file.",
    )
    p.add_argument("-o", "--output", help="capture file (default: PROGRAM-trace-DATE-PID.lead)")
    p.add_argument(
        "--c-calls",
        action="store_true",
        help="also record calls into builtins (C_CALL/C_RETURN/C_EXCEPTION)",
    )
    p.add_argument(
        "--rss-trigger",
        type=_bytes,
        default=0,
        metavar="BYTES",
        help="record only events where RSS moved by at least BYTES since the last "
        "recorded one (-1: one page)",
    )
    p.add_argument(
        "--previous",
        action="store_true",
        help="with --rss-trigger, also record the event just before each one",
    )
    p.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="trace only functions in modules or paths matching GLOB (repeatable)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="do not trace functions in modules or paths matching GLOB (repeatable)",
    )
    p.add_argument(
        "--max-depth",
        type=int,
        default=0,
        metavar="N",
        help="record only calls less than N deep (0: no limit)",
    )
    p.add_argument(
        "--exact-rss",
        action="store_true",
        help="read RSS from /proc on every event (about 0.5 us an event) instead of "
        "the 1 ms sampler",
    )
    p.add_argument(
        "--no-heap", dest="heap", action="store_false", help="do not hook the Python allocator"
    )
    clock = p.add_mutually_exclusive_group()
    clock.add_argument(
        "--exact-time",
        dest="coarse_time",
        action="store_const",
        const=False,
        help="time each event by the CPU's time-stamp counter (exact call times; costs a "
        "counter read an event, 10-25 ns) instead of the RSS sampler's clock",
    )
    clock.add_argument(
        "--coarse-time",
        dest="coarse_time",
        action="store_const",
        const=True,
        help="time events by the RSS sampler's clock, every --rss-period (the default): a "
        "function's total is an unbiased estimate, one call is timed to within a period",
    )
    p.add_argument(
        "--rss-period",
        type=float,
        default=1.0,
        metavar="MS",
        help="RSS sampling period in milliseconds (default 1); also the step of the events' "
        "clock, which above 10 ms is the CPU's counter instead",
    )
    p.add_argument(
        "--max-size",
        type=_max_size,
        default=None,
        metavar="SIZE",
        help="stop recording when the capture reaches SIZE (500M, 2G; 0 or none: no limit); "
        "the program runs on.  Default: 1G, or half the free space of the output's file "
        "system when that is less",
    )
    p.add_argument(
        "--hook-only",
        action="store_true",
        help="install the hook but record nothing (measures the hook's own cost)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    add_target_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    target = runner.parse_target(args.program, args.module, args.code)
    options = TraceOptions(
        c_calls=args.c_calls,
        rss_trigger=args.rss_trigger,
        previous=args.previous,
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        max_depth=args.max_depth,
        exact_rss=args.exact_rss,
        heap=args.heap,
        hook_only=args.hook_only,
        rss_period_us=int(args.rss_period * 1000),
        max_size=args.max_size,
        coarse_time=args.coarse_time,
    )
    output = args.output or default_output(target.argv0)
    tracer = Tracer(output, options, argv=target.argv)
    status, result = run_recorded(target, tracer)
    if not args.quiet and os.getpid() == tracer.pid:
        # recorded: events that reached the file; lost: recorded ones that did not (the
        # warning printed just before says why).
        per = result.bytes_written / result.recorded if result.recorded else 0.0
        lost = f"{result.lost:,} lost, " if result.lost else ""
        print(
            f"leadline: {result.events:,} events, {result.recorded:,} recorded, {lost}"
            f"{result.bytes_written:,} bytes ({per:.1f}/event) -> {result.path}",
            file=sys.stderr,
        )
    return status
