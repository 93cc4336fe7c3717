"""`leadline dump PID`: every thread's current Python stack, once, from outside the process.

The sampler takes one tick of the process, writing each thread's read as it was read, and the
stacks are printed from that capture; the process is never stopped and its GIL never taken, so
this works on a program that is blocked in C, holds the GIL forever, or is deadlocked."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import LeadlineError
from ..record.profiler import ProfileOptions, attach
from ._sampling import add_stack_arguments
from .attach import _pid

# The frames of each thread whose variables --locals reads, unless told.
LOCALS_FRAMES = 1000


def register(sub: Any) -> None:
    p = sub.add_parser(
        "dump",
        help="print every thread's current Python stack of a running process",
        description="Read the Python stacks of all threads of a running process once and print "
        "them, innermost frame first, with each thread's name and state (running or idle, "
        "holding or waiting for the GIL).  Never stops the process (with --locals, the thread "
        "running Python code pauses while it is read: a fraction of a millisecond); needs "
        "ptrace permission over it.",
    )
    p.add_argument("pid", type=_pid, help="the process id")
    p.add_argument("--json", action="store_true", help="print JSON (docs/dump.md)")
    p.add_argument(
        "--locals",
        action="store_true",
        help="also show each frame's local variables: values of None, bool, int, float, str "
        "and bytes, the length of a list, tuple or dict, the type and address of anything "
        "else; read from memory, never by running the target's code",
    )
    p.add_argument(
        "--locals-frames",
        type=_frame_count,
        metavar="N",
        help="--locals for the N innermost frames of each thread only "
        f"(--locals alone: {LOCALS_FRAMES})",
    )
    p.add_argument(
        "--native",
        action="store_true",
        help="also show each thread's C frames (the interpreter's, extensions', libraries'), "
        "the Python frames in place of the interpreter's loop that runs them; each thread is "
        "stopped while its C stack is read (needs elfutils' libdw)",
    )
    p.add_argument("-o", "--output", help="also keep the one-tick capture in this file")
    add_stack_arguments(p)
    p.set_defaults(func=run)


def _frame_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= LOCALS_FRAMES:
        raise argparse.ArgumentTypeError(
            f"expected a number of frames from 1 to {LOCALS_FRAMES}, not {text!r}"
        )
    return n


def run(args: argparse.Namespace) -> int:
    from ..analyse.dump import snapshot
    from ..capture.reader import Capture
    from ..render.base import RenderOptions, get_renderer
    from ._common import write_rendered

    if args.pid == os.getpid():
        raise LeadlineError("cannot dump leadline itself")
    renderer = get_renderer("json" if args.json else "text", "dump")
    options = ProfileOptions(
        rate_hz=1000.0,
        max_depth=args.max_depth,
        async_tasks=args.async_tasks,
        ticks=1,
        locals=args.locals_frames or (LOCALS_FRAMES if args.locals else 0),
        native=args.native,
    )
    with tempfile.TemporaryDirectory(prefix="leadline-dump-") as tmp:
        path = Path(args.output) if args.output else Path(tmp) / "dump.lead"
        result = attach(args.pid, path, options, duration=5.0)
        if result.write_error is not None:
            raise LeadlineError(f"cannot write {path}: {result.write_error}")
        with Capture(path) as cap:
            if not cap.end or not cap.end.get("ticks"):
                raise LeadlineError(f"process {args.pid} ended before its stacks were read")
            subject = snapshot(cap)
    write_rendered(renderer, subject, None, RenderOptions(), sys.stdout)
    return 0
