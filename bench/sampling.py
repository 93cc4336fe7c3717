"""Sampling benchmark: what `leadline run` and py-spy cost a program, and how accurate they are.

Overhead (workloads ``calls``, ``las`` and the asyncio ``tasks``): the workload alone, under
``leadline run`` at 100 Hz and 1 kHz and under ``py-spy record`` at the same rates
(``--nonblocking``, and its default blocking mode), each a subprocess, interleaved (A B C, A B C,
...) for ``--rounds`` rounds after one untimed warm-up run of the baseline.  Per run: wall
time, the target process's CPU time (user + sys from ``os.wait4``; for py-spy without py-spy's
own process), the profiler's own CPU time (leadline's sampler thread from the capture's END
``sampler_cpu_ns``; py-spy's process from ``/proc`` before it is reaped) and the samples taken.

Accuracy (workload ``split``, ``--accuracy``): ``bench/workloads/split.py`` splits its CPU time
50/30/20 between three functions and measures the true split itself; each profiler's share of
each function is compared with it, in percentage points.

Prints a table per workload and writes ``bench/results/<name>-py<X.Y>-<date>.md`` and ``.json``.
See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import common
import setup_env

# The packages whose versions a results file records.
PACKAGES = ("leadline", "py-spy", "pyperformance", "pyperf")
SPLIT_FUNCTIONS = ("heavy", "medium", "light")  # bench/workloads/split.py
LOADED = "+load"  # the suffix of a candidate's twin that runs beside CPU hogs (--load)
OTHER = "@other"  # the suffix of a leadline candidate's twin that runs --other-build's build

# ---------------------------------------------------------------------------------------------
# Candidates


@dataclass(frozen=True)
class Candidate:
    name: str
    # "plain", "leadline", "top" (leadline top: the program in a child process, sampled from
    # outside as py-spy does), "py-spy", "stdlib" (3.15's profiling.sampling) or "timer" (the
    # workload beside a bare timer thread on the sampler's schedule: bench/timer_floor.c)
    kind: str
    description: str
    rate: int = 0  # samples per second
    options: tuple[str, ...] = ()  # more `leadline run` or `py-spy record` options
    loaded: bool = False  # runs while --load CPU hogs keep every core busy
    build: str = ""  # put first on PYTHONPATH: another build of leadline (--other-build)

    def under_load(self) -> Candidate:
        """This candidate's twin that runs beside the CPU hogs (--load), named NAME+load."""
        return dataclasses.replace(
            self,
            name=f"{self.name}{LOADED}",
            description=f"{self.description}; beside CPU hogs",
            loaded=True,
        )

    def built_in(self, directory: str) -> Candidate:
        """This leadline candidate's twin that runs the build of leadline in `directory`
        (--other-build), named NAME@other."""
        return dataclasses.replace(
            self,
            name=f"{self.name}{OTHER}",
            description=f"{self.description}; the other build ({directory})",
            build=directory,
        )

    def command(
        self, python: str, py_spy: str, out: Path, script: Path, args: list[str], timer: str = ""
    ) -> list[str]:
        target = [str(script), *args]
        if self.kind == "plain":
            return [python, *target]
        if self.kind == "timer":
            return [timer or "timer_floor", str(self.rate), str(TIMER_WORK_US), str(out), "--",
                    python, *target]  # fmt: skip
        rate = ["--rate", str(self.rate)]
        if self.kind == "leadline":
            return [python, "-m", "leadline", "run", *rate, *self.options, "-o", str(out), *target]
        if self.kind == "top":  # stdout is a file: plain tables, every --interval
            top = [python, "-m", "leadline", "top", *rate, "--interval", "5", "-o", str(out)]
            return [*top, *self.options, "--", *target]
        if self.kind == "stdlib":
            # All threads (-a), but for --async-aware, which reads tasks and refuses -a.
            every = [] if "--async-aware" in self.options else ["-a"]
            sampler = [python, "-m", "profiling.sampling", "run", *every, "-r", str(self.rate)]
            return [*sampler, *self.options, "--collapsed", "-o", str(out), *target]
        raw = ["-f", "raw", "-o", str(out)]
        return [py_spy, "record", *rate, *self.options, *raw, "--", python, *target]


def _leadline(name: str, rate: int, *options: str) -> Candidate:
    mode = " ".join(options) or "default mode"
    what = f"leadline run at {rate} Hz, {mode} (--quiet: no summary on stderr at the end)"
    return Candidate(name, "leadline", what, rate, ("--quiet", *options))


def _top(name: str, rate: int) -> Candidate:
    what = (
        f"leadline top at {rate} Hz: the program in a child process, sampled from outside, "
        "a plain table every 5 s (its output is a file)"
    )
    return Candidate(name, "top", what, rate)


def _py_spy(name: str, rate: int, blocking: bool) -> Candidate:
    if blocking:
        what = f"py-spy record at {rate} Hz, its default mode: pauses the target for each sample"
        return Candidate(name, "py-spy", what, rate)
    what = f"py-spy record at {rate} Hz, --nonblocking: never pauses the target"
    return Candidate(name, "py-spy", what, rate, ("--nonblocking",))


def _stdlib(name: str, rate: int, *options: str) -> Candidate:
    what = (
        f"python -m profiling.sampling run at {rate} Hz (3.15's standard library sampler, "
        + (" ".join(options) + ": asyncio tasks" if options else "-a: all threads")
        + ", wall mode, collapsed stacks)"
    )
    return Candidate(name, "stdlib", what, rate, options)


# What the bare timer spins a tick: about what leadline's sampler takes a sample beside CPU
# hogs (33-58 µs, bench/results/sampling-loaded-calls-py3.11-2026-11-28.md).
TIMER_WORK_US = 30


def _timer(name: str, rate: int) -> Candidate:
    what = (
        f"the workload alone beside a bare C timer thread at {rate} Hz on leadline's sampler's "
        f"schedule (Poisson, timer slack 1 ns, 100 µs slice), spinning {TIMER_WORK_US} µs a "
        "tick: the floor for missed ticks (bench/timer_floor.c)"
    )
    return Candidate(name, "timer", what, rate)


def build_timer(work: Path) -> str:
    """bench/timer_floor.c compiled into `work` with the machine's C compiler; its path."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) for bench/timer_floor.c")
    exe = work / "timer_floor"
    src = Path(__file__).resolve().parent / "timer_floor.c"
    proc = subprocess.run(
        [cc, "-O2", "-Wall", "-Wextra", "-o", str(exe), str(src), "-lm"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"cannot build bench/timer_floor.c: {last}")
    return str(exe)


def _candidates(*cands: Candidate) -> dict[str, Candidate]:
    return {c.name: c for c in cands}


STDLIB = _candidates(_stdlib("stdlib-100", 100), _stdlib("stdlib-1k", 1000))
PY_SPY = _candidates(
    _py_spy("py-spy-100", 100, False),
    _py_spy("py-spy-1k", 1000, False),
    _py_spy("py-spy-100-blocking", 100, True),
    _py_spy("py-spy-1k-blocking", 1000, True),
)
OVERHEAD = _candidates(
    Candidate("baseline", "plain", "the workload alone"),
    _leadline("leadline-100", 100),
    _leadline("leadline-1k", 1000),
    # Not in the default set: 50x the default rate makes the per-sample cost to the program
    # large enough to see through a noisy machine; divide its overhead by 50 for 100 Hz.
    _leadline("leadline-5k", 5000),
    # asyncio tasks' stacks (the default) against the loop's frames as they are; and 3.15's
    # sampler reading tasks too (workload tasks).
    _leadline("leadline-1k-async-off", 1000, "--async", "off"),
    # The live view, at its default rate: what it costs the program against `run`'s.
    _top("leadline-top-100", 100),
    _timer("timer-100", 100),
    _timer("timer-1k", 1000),
    *PY_SPY.values(),
    *STDLIB.values(),
    _stdlib("stdlib-1k-async", 1000, "--async-aware"),
)
DEFAULT_EXCLUDED = {
    "leadline-5k",
    "leadline-1k-async-off",
    "stdlib-1k-async",
    "leadline-top-100",
    "timer-100",
    "timer-1k",
}
ACCURACY = _candidates(
    _leadline("leadline-cpu-1k", 1000, "--mode", "cpu"),
    _leadline("leadline-wall-1k", 1000, "--mode", "wall"),
    PY_SPY["py-spy-1k"],
    PY_SPY["py-spy-1k-blocking"],
    STDLIB["stdlib-1k"],
)
ALL = OVERHEAD | ACCURACY


def check_leadline(python: str, cands: list[Candidate]) -> dict[str, str]:
    """Why each leadline candidate cannot run with this Python (absent: it can)."""
    if not cands:
        return {}
    cmd = [python, "-m", "leadline", "run", "--help"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return {c.name: "`leadline run --help` did not answer within 2 minutes" for c in cands}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        why = f"`leadline run --help` exits {proc.returncode}: {last}"
        return {c.name: why for c in cands}
    reasons = {}
    for c in cands:
        absent = [o for o in ("--rate", *c.options) if o.startswith("--") and o not in proc.stdout]
        if absent:
            reasons[c.name] = f"`leadline run` has no {', '.join(absent)} option"
    return reasons


# ---------------------------------------------------------------------------------------------
# Runs


@dataclass
class Run:
    round: int
    status: str  # "ok", "failed" or "timeout"
    wall: float
    cpu: float  # the target process's user + sys seconds (with leadline's sampler thread)
    total_cpu: float  # all wait4 counted: what the machine paid (py-spy: with its target)
    exit_code: int | None
    profiler_cpu: float | None = None  # leadline's sampler thread or py-spy's process, seconds
    profiled_s: float | None = None  # how long the profiler ran (capture's span, else wall)
    samples: int | None = None
    ticks: int | None = None  # leadline
    missed: int | None = None  # leadline
    torn: int | None = None  # leadline
    errors: int | None = None  # py-spy's count of failed samples
    lag_s: float | None = None  # py-spy: how far it fell behind its rate, if it said so
    shares: dict[str, float] | None = None  # accuracy: profiled % of samples per function
    truth: dict[str, float] | None = None  # accuracy: true % of the three functions' CPU time
    error: str | None = None
    note: str | None = None  # something missing from an otherwise good run

    @property
    def pct_core(self) -> float | None:
        """The profiler's CPU time as a percentage of one core over the time it ran."""
        if self.profiler_cpu is None or not self.profiled_s:
            return None
        return 100 * self.profiler_cpu / self.profiled_s

    @property
    def tick_rate(self) -> float | None:
        """Sampling ticks (leadline) or samples (py-spy) per second."""
        ticks = self.ticks if self.ticks is not None else self.samples
        return ticks / self.profiled_s if ticks is not None and self.profiled_s else None


Result = common.Result[Run]


_PYSPY_COUNTS = re.compile(r"Samples: (\d+) Errors: (\d+)")
_STDLIB_COUNTS = re.compile(r"Captured (\d+) samples in ([\d.]+) seconds")
_STDLIB_ERRORS = re.compile(r"Error rate: ([\d.]+)")
_PYSPY_BEHIND = re.compile(r"([\d.]+)s behind in sampling")
_PYSPY_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")

_READ_END = """
import json, sys
from leadline.capture.reader import Capture
with Capture(sys.argv[1]) as c:
    print(json.dumps({"meta": c.meta, "end": c.end}))
"""


def leadline_end(python: str, capture: Path, run: Run) -> None:
    """Fill run's counters from the capture's META and END."""
    proc = subprocess.run(
        [python, "-c", _READ_END, str(capture)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        run.note = f"cannot read the capture's END: {last}"
        return
    data = json.loads(proc.stdout)
    end, meta = data["end"], data["meta"]
    if end is None:
        run.note = "the capture has no END (not stopped cleanly)"
        return

    def count(key: str) -> int | None:
        value = end.get(key)
        return int(value) if isinstance(value, int | float) else None

    run.samples, run.ticks = count("samples"), count("ticks")
    run.missed, run.torn = count("missed"), count("torn")
    sampler_ns = count("sampler_cpu_ns")
    run.profiler_cpu = sampler_ns / 1e9 if sampler_ns is not None else None
    start, stop = meta.get("start_unix_ns"), end.get("stop_unix_ns")
    if isinstance(start, int) and isinstance(stop, int) and stop > start:
        run.profiled_s = (stop - start) / 1e9
    missing = [k for k in ("samples", "ticks", "missed", "torn", "sampler_cpu_ns") if k not in end]
    if missing:
        run.note = f"END has no {', '.join(missing)}"


def leadline_shares(python: str, capture: Path, script: Path) -> dict[str, float]:
    """% of samples in each split.py function (inclusive), from `leadline report --json`."""
    cmd = [python, "-m", "leadline", "report", str(capture), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise ValueError(f"leadline report --json failed: {last}")
    shares = dict.fromkeys(SPLIT_FUNCTIONS, 0.0)
    for fn in json.loads(proc.stdout)["functions"]:
        name = str(fn["name"]).rsplit(".", 1)[-1]
        if name in shares and str(fn["file"]).endswith(script.name):
            shares[name] += float(fn.get("total_pct", fn["self_pct"]))
    return shares


def py_spy_profile(raw: Path, script: Path, stdlib: bool = False) -> tuple[int, dict[str, float]]:
    """(samples, % of samples in each split.py function, inclusive) of a py-spy raw file, or
    of profiling.sampling's collapsed stacks (`stdlib`: frames are FILE:FUNCTION:LINE)."""
    total = 0
    hits = dict.fromkeys(SPLIT_FUNCTIONS, 0)
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        seen = set()
        for frame in stack.split(";"):
            if stdlib:
                parts = frame.rsplit(":", 2)
                if len(parts) == 3 and parts[1] in hits and parts[0].endswith(script.name):
                    seen.add(parts[1])
                continue
            m = _PYSPY_FRAME.match(frame)
            if m and m["name"] in hits and m["file"].endswith(script.name):
                seen.add(m["name"])
        for name in seen:
            hits[name] += count
    return total, {n: 100 * c / total if total else 0.0 for n, c in hits.items()}


def measure(
    cand: Candidate,
    fin: common.Finished,
    rnd: int,
    run_dir: Path,
    out: Path,
    python: str,
    script: Path,
    accuracy: bool,
    clean: Callable[[str], str],
) -> Run:
    status = "timeout" if fin.timed_out else ("ok" if fin.code == 0 else "failed")
    cpu = fin.cpu
    profiler_cpu = None
    if cand.kind == "timer" and status == "ok":
        try:
            floor = json.loads(out.read_text())
        except (OSError, ValueError) as exc:
            status, floor = "failed", {"error": str(exc)}
        if status == "ok":
            run = Run(rnd, status, fin.wall, fin.cpu - float(floor["cpu_s"]), fin.cpu, fin.code)
            run.ticks = run.samples = int(floor["ticks"])
            run.missed, run.torn = int(floor["missed"]), 0
            run.profiler_cpu, run.profiled_s = float(floor["cpu_s"]), float(floor["seconds"])
            return run
    if cand.kind in ("py-spy", "stdlib", "top") and fin.own_cpu is not None:
        profiler_cpu = fin.own_cpu
        cpu = fin.cpu - fin.own_cpu
    run = Run(rnd, status, fin.wall, cpu, fin.cpu, fin.code, profiler_cpu, fin.wall)
    stderr = run_dir / "stderr.txt"
    if status != "ok":
        why = f"killed after {fin.wall:.0f} s (--timeout)" if fin.timed_out else None
        why = why or (f"exit status {fin.code}" if fin.code is not None else "killed by a signal")
        run.error = clean(common.tail(stderr)) or why
        return run
    try:
        if cand.kind in ("leadline", "top"):
            # top: the profiler column is its sampler thread (END), as run's; the rest of its
            # process (start-up, tables) is in the all-CPU column.
            leadline_end(python, out, run)
            if accuracy:
                run.shares = leadline_shares(python, out, script)
        elif cand.kind == "py-spy":
            text = stderr.read_text(errors="replace")
            behind = [float(x) for x in _PYSPY_BEHIND.findall(text)]
            run.lag_s = max(behind) if behind else None
            found = _PYSPY_COUNTS.search(text)
            if found:
                run.samples, run.errors = int(found[1]), int(found[2])
            if out.exists():
                samples, shares = py_spy_profile(out, script)
                run.samples = run.samples if run.samples is not None else samples
                run.shares = shares if accuracy else None
            if not run.samples:
                run.status = "failed"
                run.error = "no samples: " + clean(common.tail(stderr, 3))
        elif cand.kind == "stdlib":
            text = (run_dir / "stdout.txt").read_text(errors="replace")
            text += stderr.read_text(errors="replace")
            found = _STDLIB_COUNTS.search(text)
            if found:
                run.samples, run.profiled_s = int(found[1]), float(found[2])
            rate = _STDLIB_ERRORS.search(text)
            if rate and run.samples:  # its error rate is a percentage of the samples
                run.errors = round(float(rate[1]) * run.samples / 100)
            if out.exists():
                samples, shares = py_spy_profile(out, script, stdlib=True)
                run.samples = run.samples if run.samples is not None else samples
                run.shares = shares if accuracy else None
            if not run.samples:
                run.status = "failed"
                run.error = "no samples: " + clean(common.tail(stderr, 3))
        if accuracy and run.status == "ok":
            truth = json.loads((run_dir / "truth.json").read_text())["functions"]
            run.truth = {n: float(truth[n]["share_pct"]) for n in SPLIT_FUNCTIONS}
    except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired) as exc:
        run.status, run.error = "failed", clean(f"cannot read the results: {exc}")
    return run


# ---------------------------------------------------------------------------------------------
# Summaries


@dataclass
class OverheadRow:
    candidate: str
    runs: str
    wall: float | None
    spread: float | None  # (max - min) / median of wall, in percent
    cpu: float | None
    wall_x_base: float | None  # median of per-round ratios
    cpu_x_base: float | None
    all_cpu_x_base: float | None  # target + outside profiler, against the baseline's CPU
    profiler_cpu: float | None
    profiler_pct_core: float | None
    samples: float | None
    samples_per_s: float | None
    missed: float | None
    torn_or_errors: float | None
    note: str
    # For judging a +load twin against its quiet candidate beyond the noise of the rounds:
    # each round's {"wall_x_base", "us_per_sample", "share"} (keys of rounds, as strings),
    # and the ticks and missed ticks of all the rounds.
    rounds: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    ticks_sum: int = 0
    missed_sum: int = 0

    @property
    def us_per_sample(self) -> float | None:
        """The sampler's CPU per sample taken, microseconds."""
        if self.profiler_cpu is None or not self.samples:
            return None
        return self.profiler_cpu / self.samples * 1e6


def ok_runs(r: Result) -> list[Run]:
    return [run for run in r.runs if run.status == "ok"]


def notes_of(r: Result) -> list[str]:
    notes = []
    if r.unavailable:
        notes.append(f"failed: {r.unavailable} (not run)")
    bad = [run for run in r.runs if run.status != "ok"]
    if bad:
        last = (bad[0].error or "").strip().splitlines()[-1:] or ["(no message)"]
        notes.append(f"{bad[0].status}: {last[0]}")
    notes += sorted({run.note for run in r.runs if run.note})
    lagged = [run.lag_s for run in r.runs if run.lag_s is not None]
    if lagged:
        notes.append(
            f"py-spy fell behind its rate in {len(lagged)} of {len(r.runs)} runs, "
            f"by up to {max(lagged):.2f} s"
        )
    if r.stopped:
        notes.append(r.stopped)
    return notes


def summarise_overhead(results: list[Result]) -> list[OverheadRow]:
    def base_runs_for(candidate: str) -> list[Run]:
        """The baseline of the same condition: quiet, or beside the hogs (NAME+load)."""
        name = "baseline" + (LOADED if candidate.endswith(LOADED) else "")
        base = next((r for r in results if r.candidate == name), None)
        return ok_runs(base) if base else []

    def by_round(runs: list[Run], value: Callable[[Run], float]) -> dict[int, float]:
        return {run.round: value(run) for run in runs}

    def med(runs: list[Run], value: Callable[[Run], float | int | None]) -> float | None:
        return common.median([float(v) for run in runs if (v := value(run)) is not None])

    rows = []
    for r in results:
        runs = ok_runs(r)
        base_runs = base_runs_for(r.candidate)
        walls = [run.wall for run in runs]
        wall = common.median(walls)
        base_cpu = by_round(base_runs, lambda run: run.cpu)
        rows.append(
            OverheadRow(
                candidate=r.candidate,
                runs=f"{len(runs)}/{len(r.runs)}",
                wall=wall,
                spread=(max(walls) - min(walls)) / wall * 100 if wall and len(walls) > 1 else None,
                cpu=med(runs, lambda run: run.cpu),
                wall_x_base=common.paired_ratio(
                    by_round(runs, lambda run: run.wall), by_round(base_runs, lambda run: run.wall)
                ),
                cpu_x_base=common.paired_ratio(by_round(runs, lambda run: run.cpu), base_cpu),
                all_cpu_x_base=common.paired_ratio(
                    by_round(runs, lambda run: run.total_cpu), base_cpu
                ),
                profiler_cpu=med(runs, lambda run: run.profiler_cpu),
                profiler_pct_core=med(runs, lambda run: run.pct_core),
                samples=med(runs, lambda run: run.samples),
                samples_per_s=med(runs, lambda run: run.tick_rate),
                missed=med(runs, lambda run: run.missed),
                torn_or_errors=med(
                    runs, lambda run: run.torn if run.torn is not None else run.errors
                ),
                note="; ".join(notes_of(r)),
                rounds=round_figures(runs, base_runs),
                ticks_sum=sum(run.ticks or 0 for run in runs),
                missed_sum=sum(run.missed or 0 for run in runs),
            )
        )
    return rows


def round_figures(runs: list[Run], base_runs: list[Run]) -> dict[str, dict[str, float]]:
    """Each round's wall time against the baseline's of the same round, the sampler's CPU per
    sample and its share of a core (those known), by round."""
    base = {run.round: run.wall for run in base_runs if run.wall > 0}
    out: dict[str, dict[str, float]] = {}
    for run in runs:
        figures: dict[str, float] = {}
        if run.round in base:
            figures["wall_x_base"] = run.wall / base[run.round]
        if run.profiler_cpu is not None and run.samples:
            figures["us_per_sample"] = run.profiler_cpu / run.samples * 1e6
        if run.pct_core is not None:
            figures["share"] = run.pct_core / 100
        out[str(run.round)] = figures
    return out


OVERHEAD_HEADERS = (
    *common.TIME_HEADERS,
    "all cpu/base",
    "profiler cpu s",
    "profiler % core",
    "samples",
    "rate Hz",
    "missed",
    "torn/errors",
)


def overhead_cells(row: OverheadRow) -> list[str]:
    def count(x: float | None) -> str:
        return common.big(round(x)) if x is not None else "-"

    return [
        *common.time_cells(row, 3),
        common.num(row.all_cpu_x_base, 3),
        common.num(row.profiler_cpu, 3),
        common.num(row.profiler_pct_core, 2),
        count(row.samples),
        common.num(row.samples_per_s, 0),
        count(row.missed),
        count(row.torn_or_errors),
    ]


@dataclass
class AccuracyRow:
    candidate: str
    function: str
    runs: str
    target: float  # the planned share, percent
    true: float | None  # median over the runs of the measured share
    profiled: float | None  # median of the profiled share among the three functions
    diff: float | None  # median of the per-run (profiled - true), percentage points
    worst: float | None  # largest |profiled - true| of any run
    in_three: float | None  # common.median % of all samples that fell in the three functions
    samples: float | None
    note: str


def summarise_accuracy(results: list[Result]) -> list[AccuracyRow]:
    targets = {"heavy": 50.0, "medium": 30.0, "light": 20.0}
    rows = []
    for r in results:
        runs = [run for run in ok_runs(r) if run.shares and run.truth]
        notes = notes_of(r)
        for name in SPLIT_FUNCTIONS:
            true, profiled, diffs, in_three = [], [], [], []
            for run in runs:
                assert run.shares is not None and run.truth is not None
                three = sum(run.shares.values())
                share = 100 * run.shares[name] / three if three else 0.0
                true.append(run.truth[name])
                profiled.append(share)
                diffs.append(share - run.truth[name])
                in_three.append(three)
            rows.append(
                AccuracyRow(
                    r.candidate,
                    name,
                    f"{len(runs)}/{len(r.runs)}",
                    targets[name],
                    common.median(true),
                    common.median(profiled),
                    common.median(diffs),
                    max((abs(d) for d in diffs), default=None),
                    common.median(in_three),
                    common.median([float(run.samples) for run in runs if run.samples is not None]),
                    "; ".join(notes) if name == SPLIT_FUNCTIONS[0] else "",
                )
            )
    return rows


ACCURACY_HEADERS = (
    "candidate",
    "function",
    "runs ok",
    "target %",
    "true %",
    "profiled %",
    "diff pp",
    "worst |diff| pp",
    "samples in the three %",
    "samples",
)


def accuracy_cells(row: AccuracyRow) -> list[str]:
    return [
        row.candidate,
        row.function,
        row.runs,
        f"{row.target:.0f}",
        common.num(row.true, 2),
        common.num(row.profiled, 2),
        common.num(row.diff, 2, "+" if row.diff is not None and row.diff >= 0 else ""),
        common.num(row.worst, 2),
        common.num(row.in_three, 1),
        common.big(round(row.samples)) if row.samples is not None else "-",
    ]


def table(kind: str, summary: list[dict[str, Any]], text: bool) -> tuple[str, list[str]]:
    """(the table, its notes) of a workload's summary rows."""
    render = common.text_table if text else common.markdown_table
    if kind == "accuracy":
        acc = [AccuracyRow(**row) for row in summary]
        notes = [(row.candidate, row.note) for row in acc if row.note]
        body = render(ACCURACY_HEADERS, [accuracy_cells(row) for row in acc])
        verdicts = []
    else:
        over = [OverheadRow(**row) for row in summary]
        notes = [(row.candidate, row.note) for row in over if row.note]
        body = render(OVERHEAD_HEADERS, [overhead_cells(row) for row in over])
        verdicts = load_verdicts(over)
    return body, [f"- `{c}`: {n}" for c, n in notes] + [f"- {line}" for line in verdicts]


# ---------------------------------------------------------------------------------------------
# Main


def tasks_workload(scale: float | None) -> common.Workload:
    args = [] if scale is None else ["--scale", f"{scale:g}"]
    return common.Workload("tasks", common.WORKLOADS / "tasks.py", lambda run_dir: list(args))


def split_workload(seconds: float) -> common.Workload:
    return common.Workload(
        "split", common.WORKLOADS / "split.py", lambda run_dir: ["--seconds", f"{seconds:g}"]
    )


@contextmanager
def cpu_hogs(n: int) -> Iterator[None]:
    """n busy loops at the default priority for the duration (what tools/with-load starts)."""
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


def load_verdicts(summary: list[OverheadRow]) -> list[str]:
    """Each leadline candidate beside the hogs against itself on a quiet machine: missed ticks
    and the sampler's CPU per sample within 2x of the quiet figures, and the program's slowdown
    grown by no more than the sampler's own share of a core under load.  Each is judged beyond
    the noise of the rounds: "NOT within" only when even the favourable end of its interval
    misses the aim, "within" when the point figure meets it, and "above the aim within noise"
    between the two."""
    rows = {row.candidate: row for row in summary}
    lines = []
    for name, quiet in rows.items():
        loaded = rows.get(f"{name}{LOADED}")
        if loaded is None or not name.startswith(("leadline", "timer")):
            continue
        checks = [
            text
            for text in (missed_check(quiet, loaded), *round_checks(quiet, loaded))
            if text is not None
        ]
        if checks:
            lines.append(f"{name} beside the hogs: " + "; ".join(checks))
    lines += floor_checks(rows)
    return lines


def floor_checks(rows: dict[str, OverheadRow]) -> list[str]:
    """Each leadline candidate's missed ticks against the bare timer's at the same rate in the
    same condition (quiet, or beside the hogs): what the machine allows any sampler."""
    lines = []
    for name, row in rows.items():
        base = name.removesuffix(LOADED)
        cand = ALL.get(base)
        if cand is None or cand.kind != "leadline" or OTHER in name:
            continue
        timers = [c for c in ALL.values() if c.kind == "timer" and c.rate == cand.rate]
        timer = rows.get(timers[0].name + name[len(base) :]) if timers else None
        if timer is None or row.ticks_sum <= 0 or timer.ticks_sum <= 0:
            continue
        tl, tt, ml, mt = row.ticks_sum, timer.ticks_sum, row.missed_sum, timer.missed_sum
        # As missed_check, with an aim of the timer's own rate (ratio 1).
        n, p = ml + mt, tl / (tl + tt)
        tail = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(ml, n + 1))
        where = "beside the hogs" if name.endswith(LOADED) else "quiet"
        judged = (
            "at most the floor"
            if ml / tl <= mt / tt
            else "above the floor, beyond noise"
            if tail < 0.025
            else "above the floor, within noise"
        )
        lines.append(
            f"{base} {where}, missed ticks against the bare timer's: {100 * ml / tl:.2f}% and "
            f"{100 * mt / tt:.2f}% ({ml} of {tl} and {mt} of {tt}; {judged})"
        )
    return lines


def verdict(point_ok: bool, beyond: bool) -> str:
    return "within" if point_ok else "NOT within" if beyond else "above the aim, within noise"


def missed_check(quiet: OverheadRow, loaded: OverheadRow) -> str | None:
    """Missed ticks, all rounds counted, as a rate per tick: loaded at most twice quiet.  Few
    ticks are missed (counts of 5 to 20), so the comparison is the exact one of two Poisson
    counts: given their sum, the loaded count is binomial, with the chance 2 Tl / (Tq + 2 Tl)
    at the aim's edge; beyond it when that count is above the aim's 97.5th percentile."""
    tq, tl, q, lm = quiet.ticks_sum, loaded.ticks_sum, quiet.missed_sum, loaded.missed_sum
    if tq <= 0 or tl <= 0:
        return None
    q_rate, l_rate = q / tq, lm / tl
    n = q + lm
    p = 2 * tl / (tq + 2 * tl)
    tail = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(lm, n + 1))
    return (
        f"missed {100 * q_rate:.2f}% -> {100 * l_rate:.2f}% of ticks ({q} and {lm}; "
        f"{verdict(l_rate <= 2 * q_rate, tail < 0.025)} 2x)"
    )


def round_checks(quiet: OverheadRow, loaded: OverheadRow) -> list[str | None]:
    """The sampler's CPU per sample (loaded at most 2x quiet) and the program's slowdown (grown
    by at most the sampler's share of a core), each from the rounds in which both ran: the
    median of the rounds' figures, and its distribution-free interval (common.median_interval)
    for the verdict."""
    both = [(quiet.rounds[r], loaded.rounds[r]) for r in quiet.rounds if r in loaded.rounds]
    out: list[str | None] = []
    per = [
        ld["us_per_sample"] / qd["us_per_sample"] for qd, ld in both if has(qd, ld, "us_per_sample")
    ]
    if per:
        mid, (low, _) = common.median(per) or 0.0, common.median_interval(per)
        q_us = common.median([qd["us_per_sample"] for qd, _ in both if "us_per_sample" in qd])
        l_us = common.median([ld["us_per_sample"] for _, ld in both if "us_per_sample" in ld])
        out.append(
            f"sampler CPU per sample {q_us or 0:.1f} -> {l_us or 0:.1f} µs, x{mid:.2f} "
            f"(rounds' interval from x{low:.2f}; {verdict(mid <= 2, low > 2)} 2x)"
        )
    grown = [
        ld["wall_x_base"] - qd["wall_x_base"] - ld["share"]
        for qd, ld in both
        if has(qd, ld, "wall_x_base") and "share" in ld
    ]
    if grown:
        mid, (low, high) = common.median(grown) or 0.0, common.median_interval(grown)
        share = common.median([ld["share"] for _, ld in both if "share" in ld]) or 0.0
        out.append(
            f"slowdown grown {100 * (mid + share):+.2f} points against the sampler's "
            f"{100 * share:.2f}% of a core: {100 * mid:+.2f} beyond it (rounds' interval "
            f"{100 * low:+.2f} to {100 * high:+.2f}; {verdict(mid <= 0, low > 0)})"
        )
    return out


def has(a: dict[str, float], b: dict[str, float], key: str) -> bool:
    return key in a and key in b and a[key] > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workload",
        choices=("calls", "las", "split", "tasks", "all"),
        default="all",
        help="calls, las and tasks (asyncio) measure overhead, split accuracy (default: all)",
    )
    parser.add_argument(
        "--accuracy", action="store_true", help="only the accuracy run (--workload split)"
    )
    parser.add_argument(
        "--candidates",
        default="",
        help=f"comma-separated, from: {', '.join(ALL)} (default: all that fit the workload, "
        "but leadline-5k)",
    )
    parser.add_argument("--py-spy", help="py-spy program (default: the one in --python's env)")
    parser.add_argument(
        "--load",
        type=int,
        nargs="?",
        const=os.cpu_count() or 2,
        default=0,
        metavar="N",
        help="also run each candidate beside N CPU hogs (default N: one per core), "
        "interleaved with its quiet runs, and judge the loaded figures against the quiet ones "
        "(accuracy: each loaded share against the truth measured in the same run)",
    )
    parser.add_argument(
        "--other-build",
        metavar="DIR",
        help="also run every leadline candidate with the build of leadline in DIR (e.g. "
        "`pip install --no-deps --target DIR .` of another checkout), interleaved with this "
        "one's, as NAME@other: to compare two builds in one run",
    )
    parser.add_argument(
        "--split-seconds",
        type=float,
        help="work of the split workload, seconds (default 10, with --quick 3)",
    )
    common.add_common_arguments(parser, 5, 600, "sampling[-accuracy][-WORKLOAD][-quick]")
    args = parser.parse_args(argv)
    if args.accuracy:
        args.workload = "split"
    wanted = [n for n in args.candidates.split(",") if n]
    unknown = [n for n in wanted if n not in ALL]
    if unknown:
        parser.error(f"unknown candidate(s): {', '.join(unknown)}")
    session = common.Session.start(parser, args, argv or sys.argv[1:], PACKAGES)
    common.become_subreaper()  # py-spy may exit before it has waited for its target
    python, work, clean, report = session.python, session.work, session.clean, session.report
    sizes = common.Sizes(0.2, 10, 10) if args.quick else common.Sizes(None, 50, None)
    workloads = common.make_workloads(python, work, sizes)
    seconds = args.split_seconds or (3.0 if args.quick else 10.0)
    workloads["split"] = split_workload(seconds)
    workloads["tasks"] = tasks_workload(sizes.calls_scale)
    chosen = list(workloads) if args.workload == "all" else [args.workload]

    plan: dict[str, list[Candidate]] = {}
    for w in chosen:
        pool = ACCURACY if w == "split" else OVERHEAD
        plan[w] = [
            c
            for n, c in pool.items()
            if n in wanted or n == "baseline" or (not wanted and n not in DEFAULT_EXCLUDED)
        ]
        if args.other_build:
            build = str(Path(args.other_build).resolve())
            plan[w] += [c.built_in(build) for c in plan[w] if c.kind == "leadline"]
        if args.load:
            plan[w] += [c.under_load() for c in plan[w]]
    used = {c.name: c for cands in plan.values() for c in cands}

    unavailable: dict[str, str] = {}
    needs = {n for w in chosen for n in workloads[w].needs}
    if any(c.kind == "py-spy" for c in used.values()) and not args.py_spy:
        needs.add("py-spy")
    for missing in common.ensure_requirements(python, needs, not args.no_setup, "sampling.py"):
        why = f"{setup_env.REQUIREMENTS[missing].spec} is not installed (bench/setup_env.py)"
        unavailable.update({w: why for w in chosen if missing in workloads[w].needs})
    py_spy = args.py_spy or setup_env.script_path(python, "py-spy") or shutil.which("py-spy")
    for c in used.values():
        if c.kind == "py-spy" and not py_spy:
            unavailable[c.name] = "py-spy is not installed (bench/setup_env.py)"
    if any(c.kind == "stdlib" for c in used.values()):
        probe = [python, "-c", "import profiling.sampling"]
        if subprocess.run(probe, capture_output=True, timeout=120).returncode != 0:
            for c in used.values():
                if c.kind == "stdlib":
                    unavailable[c.name] = "profiling.sampling is in the standard library from 3.15"
    timer = ""
    if any(c.kind == "timer" for c in used.values()):
        try:
            timer = build_timer(work)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            for c in used.values():
                if c.kind == "timer":
                    unavailable[c.name] = str(exc)
    leadline = [c for c in used.values() if c.kind == "leadline"]
    unavailable.update({n: clean(why) for n, why in check_leadline(python, leadline).items()})
    for n, why in unavailable.items():
        print(f"sampling.py: {n}: failed: {why}", file=sys.stderr)

    report["candidates"] = {n: c.description for n, c in used.items()}
    print(
        f"Python {report['python']['version']} ({clean(python)}), "
        f"py-spy {clean(py_spy or 'none')}, {args.rounds} rounds, workloads: {', '.join(chosen)}",
        flush=True,
    )

    for wname in chosen:
        workload = workloads[wname]
        accuracy = wname == "split"
        if not session.begin(workload, unavailable):
            continue
        results: dict[str, Result] = {}
        for c in plan[wname]:
            example = c.command("python", "py-spy", Path("OUT"), workload.script, ["ARGS"])
            results[c.name] = Result(c.name, c.description, clean(" ".join(example)))
            results[c.name].unavailable = unavailable.get(c.name)
        # the overhead workloads start with an untimed warm-up run of the baseline
        for rnd, n in common.interleaved(results, args.rounds, None if accuracy else "baseline"):
            c, res = used[n], results[n]
            run_dir = session.run_dir(wname, n, rnd)
            out = run_dir / ("capture.lead" if c.kind in ("leadline", "top") else "profile.txt")
            cmd = c.command(
                python, py_spy or "py-spy", out, workload.script, workload.args(run_dir), timer
            )
            env = {"SPLIT_TRUTH": str(run_dir / "truth.json")} if accuracy else {}
            if c.build:
                env["PYTHONPATH"] = c.build
            session.announce(wname, rnd, n, 20)
            own = c.kind in ("py-spy", "stdlib", "top")
            with cpu_hogs(args.load if c.loaded else 0):
                fin = common.run_once(cmd, run_dir, args.timeout, env, own_cpu=own)
            run = measure(c, fin, rnd, run_dir, out, python, workload.script, accuracy, clean)
            print(
                f" {run.status:7} wall {run.wall:7.2f} s  cpu {run.cpu:7.2f} s"
                + (f"  profiler {run.profiler_cpu:6.3f} s" if run.profiler_cpu else "")
                + (f"  samples {run.samples}" if run.samples is not None else ""),
                flush=True,
            )
            if run.status != "ok":
                print(f"    {(run.error or '?').splitlines()[-1]}", file=sys.stderr)
            session.done(run_dir)
            res.stopped = common.stop_reason(run.status, rnd)
            if rnd > 0:
                res.runs.append(run)
        kind = "accuracy" if accuracy else "overhead"
        summarise = summarise_accuracy if accuracy else summarise_overhead
        summary = [asdict(row) for row in summarise(list(results.values()))]
        body, notes = table(kind, summary, text=True)
        print(f"\n{wname} ({kind}):\n{body}\n" + "\n".join(notes) + "\n", flush=True)
        report["workloads"][wname] = {
            "kind": kind,
            "args": clean(" ".join(workload.args(Path("<run>")))),
            "results": [asdict(r) for r in results.values()],
            "summary": summary,
        }

    if not args.no_save:
        name = args.name or (
            "sampling"
            + ("-accuracy" if args.workload == "split" else "")
            + ("" if args.workload in ("all", "split") else f"-{args.workload}")
            + ("-quick" if args.quick else "")
        )
        session.save(name, markdown)
    return 0


def markdown(report: dict[str, Any]) -> str:
    return common.markdown_report(
        report,
        f"Sampling benchmark {report['name']}",
        "the overhead workloads after one warm-up run of the baseline",
        "ratios to the baseline are medians of each round's ratio.",
        lambda data: table(data["kind"], data["summary"], text=False),
    )


if __name__ == "__main__":
    sys.exit(main())
