"""`leadline sweep`: run a command once per value of an environment variable, repeated and
interleaved, and tabulate wall time, CPU time, peak RSS and probe counts per value (a cache's
hit rate per cache size, say), with a chart of one column against the value."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LeadlineError
from ..record.childrun import ChildResult, run_child


@dataclass
class Run:
    result: ChildResult
    counts: dict[str, int]
    ratios: dict[str, float | None]


@dataclass
class Row:
    value: str
    runs: list[Run] = field(default_factory=list)

    def ok(self) -> list[Run]:
        return [r for r in self.runs if r.result.status == 0]

    def median(self, get: Callable[[Run], float | None]) -> float | None:
        values = [v for r in self.ok() if (v := get(r)) is not None]
        return statistics.median(values) if values else None

    def columns(self, probes: Sequence[str], ratios: Sequence[str]) -> dict[str, float | None]:
        cols: dict[str, float | None] = {
            "wall": self.median(lambda r: r.result.wall),
            "cpu": self.median(lambda r: r.result.cpu),
            "peak_rss": self.median(lambda r: float(r.result.maxrss_kib * 1024)),
        }
        for p in probes:
            cols[p] = self.median(_count_of(p))
        for q in ratios:
            cols[q] = self.median(_ratio_of(q))
        return cols


def _count_of(name: str) -> Callable[[Run], float | None]:
    return lambda r: float(r.counts[name]) if name in r.counts else None


def _ratio_of(name: str) -> Callable[[Run], float | None]:
    return lambda r: r.ratios.get(name)


def parse_env(spec: str) -> tuple[str, list[str]]:
    name, sep, values = spec.partition("=")
    name = name.strip()
    items = [v.strip() for v in values.split(",")]
    if not sep or not name.isidentifier() or not values.strip() or "" in items:
        raise LeadlineError(f"--env {spec!r}: expected NAME=VALUE1,VALUE2,... (no empty values)")
    if len(set(items)) != len(items):
        raise LeadlineError(f"--env {spec!r}: a value is repeated")
    return name, items


def probe_command(cmd: list[str], counts: list[str], ratios: list[str], out: str) -> list[str]:
    """The command run under `leadline probe`, which writes its counts to `out`."""
    probe = ["-m", "leadline", "probe", "-q", "--json-output", out]
    for c in counts:
        probe += ["--count", c]
    for r in ratios:
        probe += ["--ratio", r]
    head = os.path.basename(cmd[0])
    if head.startswith("python"):
        return [cmd[0], *probe, "--", *cmd[1:]]
    if cmd[0].endswith(".py"):
        return [sys.executable, *probe, "--", *cmd]
    raise LeadlineError(
        f"--count needs a Python command (python script.py ... or script.py ...), not {cmd[0]!r}"
    )


@dataclass
class Sweep:
    name: str
    rows: list[Row]
    probes: list[str]
    ratios: list[str]
    command: list[str]
    repeat: int

    def to_json(self) -> dict[str, Any]:
        return {
            "variable": self.name,
            "command": self.command,
            "repeat": self.repeat,
            "probes": self.probes,
            "ratios": self.ratios,
            "rows": [
                {
                    "value": row.value,
                    **row.columns(self.probes, self.ratios),
                    "runs": [
                        {
                            "wall": r.result.wall,
                            "cpu": r.result.cpu,
                            "peak_rss": r.result.maxrss_kib * 1024,
                            "status": r.result.status,
                            "counts": r.counts,
                            "ratios": r.ratios,
                        }
                        for r in row.runs
                    ],
                }
                for row in self.rows
            ],
        }

    @property
    def failed(self) -> list[tuple[str, int]]:
        return [
            (row.value, r.result.status) for row in self.rows for r in row.runs if r.result.status
        ]


def run_sweep(
    name: str,
    values: list[str],
    cmd: list[str],
    repeat: int,
    counts: list[str],
    ratios: list[str],
    timeout: float | None,
    progress: Callable[[int, int], None] | None = None,
) -> Sweep:
    rows = [Row(v) for v in values]
    ratio_names = [r.partition("=")[0].strip() if "=" in r else r.strip() for r in ratios]
    probe_names = [c.partition("=")[0].strip() for c in counts]
    with tempfile.TemporaryDirectory(prefix="leadline-sweep-") as tmp:
        out = str(Path(tmp) / "probe.json")
        run_cmd = probe_command(cmd, counts, ratios, out) if counts else cmd
        total = repeat * len(rows)
        done = 0
        for _ in range(repeat):  # interleaved: every value once per round
            for row in rows:
                Path(out).unlink(missing_ok=True)
                result = run_child(run_cmd, {**os.environ, name: row.value}, timeout)
                got: dict[str, Any] = {}
                if counts and result.status == 0:
                    try:
                        got = json.loads(Path(out).read_text())
                    except (OSError, ValueError):
                        result = ChildResult(result.wall, result.cpu, result.maxrss_kib, 2)
                row.runs.append(Run(result, got.get("counts", {}), got.get("ratios", {})))
                done += 1
                if progress:
                    progress(done, total)
    return Sweep(name, rows, probe_names, ratio_names, cmd, repeat)


def chart_points(s: Sweep, column: str) -> list[tuple[str, float]]:
    return [
        (row.value, v)
        for row in s.rows
        if (v := row.columns(s.probes, s.ratios).get(column)) is not None
    ]
