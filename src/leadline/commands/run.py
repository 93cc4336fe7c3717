"""`leadline run [options] (script.py | -m module | -c code) [args]`: a sampling profile.

The program runs in this process, as `python` would run it; a native thread samples the
stacks of all its threads (and with --subprocesses of its child processes) without the GIL."""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import LeadlineError
from ..record import runner
from ..record.profiler import Profiler
from ..record.recorder import default_output
from ._sampling import add_sampling_arguments, options_from, summarise
from ._target import add_target_arguments, run_recorded

if TYPE_CHECKING:
    from ..fleet.agent import AgentConfig


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="sample a program's stacks (all threads) at a set rate",
        description="Run a program and sample the Python stacks of all its threads from a "
        "native thread that never takes the GIL; writes a capture for `leadline report`.",
    )
    add_sampling_arguments(p)
    p.add_argument(
        "--native",
        action="store_true",
        help="also sample each thread's C frames (the interpreter's, extensions', libraries'), "
        "the Python frames in place of the interpreter's loop that runs them; each thread is "
        "held in a signal handler for a moment at each sample while its stack is copied "
        "(x86-64; needs elfutils' libdw)",
    )
    fleet = p.add_argument_group(
        "fleet", "push profiles to Grafana Pyroscope instead of writing a capture (docs/fleet.md)"
    )
    fleet.add_argument(
        "--push",
        metavar="URL",
        help="Pyroscope's URL (http://host:4040): sample continuously in CPU mode and push a "
        "profile every --push-interval seconds; Python child processes push too",
    )
    fleet.add_argument("--service", help="the service_name label (default: the program's name)")
    fleet.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a label on every profile (repeatable), e.g. --label version=2 --label env=prod",
    )
    fleet.add_argument(
        "--push-interval", type=float, metavar="S", help="seconds per profile (default 10)"
    )
    fleet.add_argument(
        "--thread-labels", action="store_true", help="label every sample with its thread's name"
    )
    fleet.add_argument("--spool", metavar="DIR", help="where undelivered profiles wait")
    add_target_arguments(p)
    p.set_defaults(func=run)


def push_config(args: argparse.Namespace, target: runner.Target) -> AgentConfig:
    """The command line's settings over the LEADLINE_* environment's (docs/fleet.md)."""
    from ..fleet.agent import AgentConfig  # the fleet path's modules load only when it is used
    from ..fleet.pyroscope import parse_labels

    base = AgentConfig.from_env({**os.environ, "LEADLINE_PUSH": args.push})
    assert base is not None
    service = (
        args.service
        or os.environ.get("LEADLINE_SERVICE", "").strip()
        or os.path.splitext(os.path.basename(target.argv0))[0]
        or "python"
    )
    return dataclasses.replace(
        base,
        service=service,
        labels={**base.labels, **parse_labels(",".join(args.label))},
        interval_s=args.push_interval if args.push_interval is not None else base.interval_s,
        rate_hz=args.rate,
        memory=args.memory or base.memory,
        thread_labels=args.thread_labels or base.thread_labels,
        spool_dir=Path(args.spool) if args.spool else base.spool_dir,
    )


def run_pushing(args: argparse.Namespace, target: runner.Target) -> int:
    if args.output:
        raise LeadlineError("--push sends profiles to Pyroscope; it writes no capture (-o)")
    from ..fleet.agent import Agent
    from ..fleet.agent import register as register_agent

    config = push_config(args, target)
    config.validate()
    os.environ.update(config.to_env())  # Python child processes start an agent of their own
    agent = Agent(config)
    register_agent(agent)
    status, _ = run_recorded(target, agent)
    if os.getpid() == agent.pid and not args.quiet:
        st = agent.stats()
        print(
            f"leadline: {st['samples']:,} samples in {st['periods']} periods; "
            f"{st['delivered']} profiles pushed to {agent.endpoint.shown} "
            f"({st['delivered_bytes']:,} bytes), {st['spooled']} spooled, {st['dropped']} dropped",
            file=sys.stderr,
        )
    return status


def run(args: argparse.Namespace) -> int:
    target = runner.parse_target(args.program, args.module, args.code)
    if args.native and args.push:
        raise LeadlineError("--native is for a capture: it cannot be used with --push")
    if args.native and platform.machine() not in ("x86_64", "AMD64"):
        raise LeadlineError(
            f"run --native reads C stacks on x86-64 only (this is {platform.machine()}); "
            "run the program, then `leadline attach PID --native`"
        )
    if args.push:
        return run_pushing(args, target)
    output = args.output or default_output(target.argv0, "sample")
    options = dataclasses.replace(options_from(args), native=args.native)
    profiler = Profiler(output, options, argv=target.argv)
    status, result = run_recorded(target, profiler)
    if os.getpid() == profiler.pid:
        summarise(result, args.quiet)
    return status
