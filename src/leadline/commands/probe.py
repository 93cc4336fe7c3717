"""`leadline probe --count NAME=FILE:LINE|NAME=module:qualname ... (script.py | -m module | -c
code) [args]`: how often chosen lines run, in an unmodified program, and their ratios."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from ..errors import LeadlineError
from ..record import runner
from ..record.probe import (
    ProbeRecorder,
    ProbeResult,
    Probes,
    ProbeSpec,
    Ratio,
    parse_count,
    parse_ratio,
    write_json,
)
from ..record.recorder import signals_blocked
from ._target import add_target_arguments

ATTACH_NEEDS = (
    "--pid: counting in a running process needs code loaded into it, which CPython allows "
    "from 3.14 on (sys.remote_exec); for {version} start the program under "
    "`leadline probe --count ... -- script.py`"
)


def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    """The probe definitions; `sweep` and `overhead` take them too."""
    p.add_argument(
        "--count",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="count executions of FILE:LINE, or entries of module:qualname (repeatable)",
    )
    p.add_argument(
        "--ratio",
        action="append",
        default=[],
        metavar="[NAME=]EXPR",
        help="a ratio of counts to print, e.g. 'hit/(hit+miss)' (repeatable)",
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "probe",
        help="count how often chosen lines run or functions are entered",
        description="Run a program and count executions of chosen lines (FILE:LINE) and entries "
        "of chosen functions (module:qualname), without changing its code; prints counts, rates "
        "and ratios on stderr.",
    )
    add_probe_arguments(p)
    p.add_argument(
        "--duration",
        type=float,
        metavar="S",
        help="count for S seconds only, then report (the program runs on, unprobed)",
    )
    p.add_argument(
        "--pid",
        type=int,
        help="count in a running process instead (3.14+, the same Python version; until "
        "--duration, Ctrl-C or its exit)",
    )
    p.add_argument("-o", "--output", help="also write a capture: the counts and every mark")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--json-output", metavar="FILE", help="write the result as JSON to FILE")
    p.add_argument("-q", "--quiet", action="store_true", help="no table on stderr")
    add_target_arguments(p)
    p.set_defaults(func=run)


def _report(result: ProbeResult, args: argparse.Namespace) -> None:
    data = result.to_json()
    if args.json_output:
        write_json(result, args.json_output)
    if args.json:
        sys.stdout.flush()
        print(json.dumps(data, indent=1), flush=True)
    if not args.quiet:
        from ..render import RenderOptions  # the table's modules load only to print it
        from ..render.console import make_console
        from ..render.probe_text import print_probe_table

        print_probe_table(data, make_console(sys.stderr, RenderOptions()))


def _parse_probes(
    args: argparse.Namespace, main_file: str | None
) -> tuple[list[ProbeSpec], list[Ratio]]:
    """The --count and --ratio definitions, checked (`__main__:qualname` names a function of
    main_file, the script run, if there is one)."""
    specs = [parse_count(text, main_file) for text in args.count]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise LeadlineError("--count: two probes have the same name")
    return specs, [parse_ratio(text, set(names)) for text in args.ratio]


def run(args: argparse.Namespace) -> int:
    if not args.count:
        raise LeadlineError("nothing to count: give at least one --count NAME=SPEC")
    if args.duration is not None and not args.duration > 0:
        raise LeadlineError("--duration must be positive")
    if args.pid is not None:
        return probe_process(args)
    target = runner.parse_target(args.program, args.module, args.code)
    specs, ratios = _parse_probes(args, target.value if target.kind == "script" else None)
    probes = Probes(specs, ratios)
    program = runner.prepare(target)
    recorder = ProbeRecorder(args.output, probes, target.argv) if args.output else None
    lock = threading.Lock()
    reported = False

    def finish() -> None:
        nonlocal reported
        with lock:
            if reported:
                return
            reported = True
            result = recorder.stop() if recorder else probes.stop()
            _report(result, args)

    if recorder:
        recorder.start()
    else:
        probes.start()
    timer = threading.Timer(args.duration, finish) if args.duration else None
    if timer:
        timer.daemon = True
        with signals_blocked():  # signals are the program's threads' to take
            timer.start()
    try:
        status = runner.execute(program)
    finally:
        if timer:
            timer.cancel()
        finish()
    return status


def probe_process(args: argparse.Namespace) -> int:
    """`probe --pid PID`: count in a running process through sys.remote_exec (3.14+)."""
    if sys.version_info < (3, 14):
        version = ".".join(map(str, sys.version_info[:2]))
        raise LeadlineError(ATTACH_NEEDS.format(version=f"Python {version}"))
    if args.program or args.module or args.code:
        raise LeadlineError("--pid counts in a running process: give no program to run")
    if args.output:
        raise LeadlineError("--pid: -o (a capture of the session) is not supported; use --json")
    from ..record.probe import RemoteProbes
    from ..record.profiler import inspect_process

    info = inspect_process(args.pid)
    mine = sys.version_info[1]
    if info["minor"] != mine:
        raise LeadlineError(
            f"process {args.pid} runs Python 3.{info['minor']}; counting in it needs leadline "
            f"run by the same version (sys.remote_exec), e.g. python3.{info['minor']} -m "
            "leadline probe --pid ..."
        )
    remote = RemoteProbes(args.pid, *_parse_probes(args, None))
    try:
        remote.start()
        if not args.quiet:
            until = f"for {args.duration:g} s" if args.duration else "until Ctrl-C or its exit"
            print(f"leadline: counting in process {args.pid} {until}", file=sys.stderr)
        deadline = time.monotonic() + args.duration if args.duration else None
        try:
            while deadline is None or time.monotonic() < deadline:
                if remote.ended():
                    break
                time.sleep(0.05)
        except KeyboardInterrupt:
            pass
        result = remote.stop()
    finally:
        remote.close()
    _report(result, args)
    return 0
