"""`leadline overhead`: what each leadline mode costs a given program: the program alone and
under each mode, rounds interleaved, each run a child process; the median time, the ratio to the
program alone, the events recorded, events per second, the cost of one event and the bytes
written."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..capture.reader import Capture
from ..errors import LeadlineError
from ..record.childrun import ChildResult, run_child
from ..record.runner import Target


@dataclass(frozen=True)
class Mode:
    name: str
    args: tuple[str, ...]  # leadline subcommand and options; () for the program alone
    what: str


# The trace modes have no size limit: what recording every event costs, however many.
_TRACE = ("trace", "--max-size", "none")
MODES = (
    Mode("baseline", (), "the program alone"),
    Mode("hook", (*_TRACE, "--hook-only"), "trace's empty native hook: the cost floor"),
    Mode("trace", _TRACE, "every call and return with time, RSS and heap bytes"),
    Mode(
        "trace-exact", (*_TRACE, "--exact-time"), "the same, each event timed by the CPU's counter"
    ),
    Mode("trace-rss4096", (*_TRACE, "--rss-trigger", "4096"), "only events where RSS moved 4 KiB"),
    Mode("run-100", ("run", "--rate", "100"), "sampling at 100 Hz"),
    Mode("run-1000", ("run", "--rate", "1000"), "sampling at 1 kHz"),
    Mode("probe", ("probe",), "the --count probes"),
)


@dataclass
class Measured:
    result: ChildResult
    events: int
    bytes: int


@dataclass
class ModeRuns:
    mode: Mode
    command: list[str]
    runs: list[Measured] = field(default_factory=list)


def target_argv(target: Target) -> list[str]:
    """The program as `python` (and every leadline command) takes it."""
    head = {"script": [target.value], "module": ["-m", target.value], "code": ["-c", target.value]}
    return [*head[target.kind], *target.args]


def mode_command(mode: Mode, target: Target, out: Path, counts: list[str]) -> list[str]:
    if not mode.args:
        return [sys.executable, *target_argv(target)]
    extra: list[str] = []
    if mode.name == "probe":
        for c in counts:
            extra += ["--count", c]
        extra += ["--json-output", str(out.with_suffix(".json"))]
    return [
        sys.executable,
        "-m",
        "leadline",
        *mode.args,
        "-q",
        *extra,
        "-o",
        str(out),
        *(["--"] if target.kind == "script" else []),  # -m and -c take the rest themselves
        *target_argv(target),
    ]


def count_events(mode: Mode, out: Path) -> tuple[int, int]:
    """(events, bytes written) of one run's capture."""
    if not mode.args or not out.exists():
        return 0, 0
    size = out.stat().st_size
    if mode.name == "probe":
        try:
            counts = json.loads(out.with_suffix(".json").read_text())["counts"]
            return sum(int(v) for v in counts.values()), size
        except (OSError, ValueError, KeyError):
            return 0, size
    with Capture(out) as cap:
        end = cap.end or {}
    if mode.name.startswith("run"):
        return int(end.get("samples", 0)), size
    return (0 if mode.name == "hook" else int(end.get("events", 0))), size


def measure(
    target: Target,
    modes: list[Mode],
    rounds: int,
    counts: list[str],
    timeout: float | None,
    progress: Callable[[int, int], None] | None = None,
) -> list[ModeRuns]:
    results = [ModeRuns(m, []) for m in modes]
    total, done = rounds * len(modes), 0
    with tempfile.TemporaryDirectory(prefix="leadline-overhead-") as tmp:
        for r in range(rounds):  # interleaved: A B C ... A B C ...
            for mr in results:
                out = Path(tmp) / f"{mr.mode.name}-{r}.lead"
                cmd = mode_command(mr.mode, target, out, counts)
                mr.command = cmd
                res = run_child(cmd, dict(os.environ), timeout)
                events, size = count_events(mr.mode, out)
                mr.runs.append(Measured(res, events, size))
                for f in (out, out.with_suffix(".json")):
                    f.unlink(missing_ok=True)
                done += 1
                if progress:
                    progress(done, total)
    if results and all(m.result.status != 0 for m in results[0].runs):
        status = results[0].runs[0].result.status
        raise LeadlineError(f"the program failed on its own (exit status {status})")
    return results


@dataclass
class OverheadTable:
    """What `leadline overhead` found: one row per mode (see `summarise`)."""

    argv: list[str]  # the program's sys.argv
    program: list[str]  # the program as `python` takes it (script, -m module or -c code)
    rounds: int
    rows: list[dict[str, Any]]
    notes: list[str]
    python_version: str = field(default_factory=lambda: ".".join(map(str, sys.version_info[:3])))

    def to_json(self) -> dict[str, Any]:
        return {
            "python_version": self.python_version,
            "rounds": self.rounds,
            "argv": self.argv,
            "modes": self.rows,
            "notes": self.notes,
        }


def summarise(results: list[ModeRuns]) -> list[dict[str, Any]]:
    """One row per mode: medians, per-round ratios to the baseline, events and their cost."""
    base = results[0].runs
    base_status = base[0].result.status if base else 0
    rows = []
    for mr in results:
        ok = [i for i, m in enumerate(mr.runs) if m.result.status == base_status]
        walls = [mr.runs[i].result.wall for i in ok]
        cpus = [mr.runs[i].result.cpu for i in ok]
        ratios = [mr.runs[i].result.wall / base[i].result.wall for i in ok if base[i].result.wall]
        wall = statistics.median(walls) if walls else None
        base_wall = statistics.median(m.result.wall for m in base) if base else None
        events = int(statistics.median(mr.runs[i].events for i in ok)) if ok else 0
        size = int(statistics.median(mr.runs[i].bytes for i in ok)) if ok else 0
        us = None
        if events and wall is not None and base_wall is not None:
            us = (wall - base_wall) / events * 1e6
        rows.append(
            {
                "mode": mr.mode.name,
                "what": mr.mode.what,
                "command": mr.command,
                "runs": [
                    {
                        "wall": m.result.wall,
                        "cpu": m.result.cpu,
                        "status": m.result.status,
                        "events": m.events,
                        "bytes": m.bytes,
                    }
                    for m in mr.runs
                ],
                "failed_runs": len(mr.runs) - len(ok),
                "median_wall": wall,
                "median_cpu": statistics.median(cpus) if cpus else None,
                "ratio": statistics.median(ratios) if ratios else None,
                "ratio_min": min(ratios) if ratios else None,
                "ratio_max": max(ratios) if ratios else None,
                "events": events,
                "events_per_s": events / wall if events and wall else None,
                "us_per_event": us,
                "bytes": size,
            }
        )
    return rows
