"""What `leadline run` and `leadline attach` share: their sampling options and the summary they
print.  Kept apart from both so that `attach` imports little before it first looks at its
target: a starved attach (a busy machine, a low priority) can take seconds to import what a
report needs, and a process that ends meanwhile is gone before it is seen."""

from __future__ import annotations

import argparse
import sys

from ..record.profiler import ASYNC_MODES, SAMPLE_MODES, ProfileOptions, ProfileResult


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
        choices=SAMPLE_MODES,
        default="wall",
        help="wall: every thread at every tick, idle ones marked (default); cpu: only threads "
        "that ran, weighted by the CPU time they used; gil: every thread at every tick, kept "
        "only while it held the GIL; exception: kept only while it raised or handled an "
        "exception",
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
    add_stack_arguments(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")


def add_stack_arguments(p: argparse.ArgumentParser) -> None:
    """How stacks are read: what `run`, `attach` and `dump` share."""
    p.add_argument(
        "--async",
        dest="async_tasks",
        choices=ASYNC_MODES,
        default="running",
        help="running: a thread running an asyncio task (3.11+) shows the task's name at the "
        "root of its stack, then its coroutines, without the event loop's frames (default); "
        "all: the same, and each tick a sample of every task waiting on the loop, where it "
        "waits (3.14+, wall mode); off: the frames as they are",
    )
    p.add_argument("--max-depth", type=int, default=8192, metavar="N", help="frames kept per stack")


def options_from(args: argparse.Namespace) -> ProfileOptions:
    return ProfileOptions(
        rate_hz=args.rate,
        mode=args.mode,
        memory=args.memory,
        subprocesses=args.subprocesses,
        max_depth=args.max_depth,
        async_tasks=args.async_tasks,
    )


def summarise(result: ProfileResult, quiet: bool) -> None:
    """The profile's top functions and a one-line summary, on stderr."""
    if quiet:
        return
    from ..render.base import RenderOptions  # what a report needs, once sampled
    from ._common import render_capture

    if result.write_error is None:
        try:
            sys.stderr.flush()
            render_capture(str(result.path), "text", "-", RenderOptions(limit=15), sys.stderr)
        except Exception as e:  # the capture is written; a report problem must not hide it
            print(f"leadline: cannot summarise {result.path}: {e}", file=sys.stderr)
    if result.exited_after_s is not None:
        print(
            f"leadline: process {result.pid} exited {result.exited_after_s:.2f} s after "
            "sampling began; the capture holds the samples taken until then",
            file=sys.stderr,
        )
    cpu = 100.0 * result.sampler_cpu_ns / max(result.seconds * 1e9, 1)
    lost = f", {result.samples_lost:,} lost" if result.samples_lost else ""
    print(
        f"leadline: {result.samples:,} samples in {result.ticks:,} ticks "
        f"({result.missed:,} missed, {result.torn:,} torn, {result.deferred:,} deferred{lost}), "
        f"sampler {cpu:.2f}% of a core, {result.bytes_written:,} bytes -> {result.path}",
        file=sys.stderr,
    )
