"""Benchmark harness: leadline against no profiler, its own cost floor and pymemtrace.

Runs every candidate on every workload as a subprocess, interleaved (A B C, A B C, ...) for
``--rounds`` rounds after one untimed warm-up run of the baseline, and measures for each run the
wall time, the child's CPU time (user + sys, from ``os.wait4``) and its peak RSS.  For leadline
and pymemtrace it also records the bytes written and the number of events, and from those the
bytes per recorded event and the overhead per event, ``(candidate - baseline) / events``.

Prints a table per workload and writes ``bench/results/<name>-py<X.Y>-<date>.md`` and ``.json``.
See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import setup_env

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORKLOADS = BENCH / "workloads"

# ---------------------------------------------------------------------------------------------
# Workloads and candidates


@dataclass
class Workload:
    name: str
    script: Path
    args: Callable[[Path], list[str]]  # (run dir) -> arguments of one timed run
    prepare: Callable[[], None] | None = None  # untimed, once, before the runs
    needs: tuple[str, ...] = ()  # setup_env requirements


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str  # "plain", "leadline" or "pymemtrace"
    description: str
    options: tuple[str, ...] = ()  # leadline trace options or pymemtrace trigger

    def command(self, python: str, out: Path, script: Path, args: list[str]) -> list[str]:
        target = [str(script), *args]
        if self.kind == "plain":
            return [python, *target]
        if self.kind == "leadline":
            return [python, "-m", "leadline", "trace", *self.options, "-o", str(out), *target]
        runner = str(BENCH / "run_pymemtrace.py")
        return [python, runner, *self.options, "--log", str(out), "--", *target]


CANDIDATES = {
    c.name: c
    for c in (
        Candidate("baseline", "plain", "the workload alone"),
        Candidate(
            "floor",
            "leadline",
            "leadline trace --hook-only: leadline's empty native hook, the cost floor",
            ("--hook-only",),
        ),
        Candidate("leadline", "leadline", "leadline trace: every event, time and memory"),
        Candidate(
            "leadline-trigger",
            "leadline",
            "leadline trace --rss-trigger 4096: events where RSS moved by a page",
            ("--rss-trigger", "4096"),
        ),
        Candidate(
            "floor-c",
            "leadline",
            "leadline trace --hook-only --c-calls: the floor when C calls are hooked too",
            ("--hook-only", "--c-calls"),
        ),
        Candidate(
            "leadline-c",
            "leadline",
            "leadline trace --c-calls: every Python and C call, the events cPyMemTrace logs",
            ("--c-calls",),
        ),
        Candidate(
            "cpymemtrace-0",
            "pymemtrace",
            "pymemtrace cPyMemTrace.Profile(0): every event logged",
            ("--trigger", "0"),
        ),
        Candidate(
            "cpymemtrace-4096",
            "pymemtrace",
            "pymemtrace cPyMemTrace.Profile(4096): events where RSS moved by 4096 bytes",
            ("--trigger", "4096"),
        ),
    )
}


def make_workloads(python: str, work: Path, quick: bool) -> dict[str, Workload]:
    las_params = ["--size-mb", "2", "--files", "6"] if quick else ["--size-mb", "50"]
    las_data = work / ("las-quick" if quick else "las-50mb")

    def prepare_las() -> None:
        cmd = [python, str(WORKLOADS / "las.py"), "--generate", str(las_data), *las_params]
        subprocess.run(cmd, check=True)

    return {
        "calls": Workload(
            "calls",
            WORKLOADS / "calls.py",
            lambda run_dir: ["--scale", "0.01"] if quick else [],
            needs=("pyperformance",),
        ),
        "las": Workload(
            "las",
            WORKLOADS / "las.py",
            lambda run_dir: ["--data", str(las_data), "--out", str(run_dir / "html")],
            prepare=prepare_las,
        ),
    }


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class Run:
    round: int
    status: str  # "ok", "failed" or "timeout"
    wall: float
    user: float
    sys: float
    max_rss_kb: int
    exit_code: int | None
    # Linux folds the harness's own peak RSS into a child's ru_maxrss (the child starts as a
    # copy of it), so a child peak at or below this value is only an upper bound.
    harness_rss_kb: int
    bytes: int | None = None
    error: str | None = None

    @property
    def cpu(self) -> float:
        return self.user + self.sys


@dataclass
class Counts:
    events: int | None = None
    recorded: int | None = None
    partial: bool = False  # from a run that did not finish: lower bounds
    error: str | None = None


@dataclass
class Result:
    candidate: str
    description: str
    command: str
    unavailable: str | None = None
    runs: list[Run] = field(default_factory=list)
    counts: Counts | None = None
    stopped: str | None = None  # why later rounds were skipped


class Sanitizer:
    """Removes paths outside the repository from anything stored in the results."""

    def __init__(self, python: str, work: Path) -> None:
        prefix = Path(python).absolute().parent.parent
        self.pairs = [
            (str(work), "<work>"),
            (str(prefix), "<python>"),
            (str(REPO), "."),
            (tempfile.gettempdir(), "<tmp>"),
            (str(Path.home()), "~"),
        ]

    def __call__(self, text: str) -> str:
        for old, new in self.pairs:
            text = text.replace(old, new)
        return text


def run_once(cmd: list[str], cwd: Path, timeout: float) -> tuple[float, Any, int | None, bool]:
    """Run cmd; return (wall seconds, rusage, exit code or None if killed, timed out)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with open(cwd / "stdout.txt", "wb") as out, open(cwd / "stderr.txt", "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=out, stderr=err, env=env, start_new_session=True
        )
        lock = threading.Lock()
        state = {"reaped": False, "timed_out": False}

        def kill() -> None:
            with lock:
                if not state["reaped"]:
                    state["timed_out"] = True
                    os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            with lock:
                state["reaped"] = True
            timer.cancel()
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    code = None if os.WIFSIGNALED(status) else proc.returncode
    return wall, usage, code, state["timed_out"]


def tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def leadline_counts(python: str, capture: Path, cwd: Path) -> Counts:
    cmd = [python, "-m", "leadline", "report", str(capture), "--json"]
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return Counts(error="leadline report --json took over 30 minutes")
    if proc.returncode != 0:
        return Counts(error=f"leadline report failed: {proc.stderr.strip()[-400:]}")
    try:
        summary = json.loads(proc.stdout)["summary"]
        return Counts(int(summary["events"]), int(summary["recorded"]))
    except (ValueError, KeyError, TypeError) as exc:
        return Counts(error=f"unexpected leadline report --json output: {exc!r}")


def pymemtrace_counts(log: Path) -> Counts:
    """Events from the log's LAST line (its event count), recorded = NEXT and PREV lines.

    A run that was killed has no LAST line: the number of the last event written is then a
    lower bound (exact for Profile(0), which writes every event).
    """
    size = log.stat().st_size
    with open(log, "rb") as f:
        f.seek(max(0, size - (1 << 16)))
        end = f.read().split(b"\n")
    events, partial = None, True
    for line in reversed(end[:-1]):  # the last piece may be cut short
        fields = line.split()
        if len(fields) > 1 and fields[0] == b"LAST:" and fields[1].isdigit():
            events, partial = int(fields[1]), False
            break
        if len(fields) > 1 and fields[0] in (b"NEXT:", b"PREV:") and fields[1].isdigit():
            events = int(fields[1]) + 1
            break
    recorded = 0
    carry = b""
    with open(log, "rb") as f:
        while block := f.read(1 << 20):
            data = carry + block
            recorded += data.count(b"\nNEXT: ") + data.count(b"\nPREV: ")
            carry = data[-6:]  # a marker cut by the block boundary is counted in the next
    return Counts(events, recorded, partial)


def check_leadline(python: str) -> dict[str, str | None]:
    """Why each leadline candidate cannot run here (None: it can)."""
    cmd = [python, "-m", "leadline", "trace", "--help"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        proc = None
    reasons: dict[str, str | None] = {}
    for name, cand in CANDIDATES.items():
        if cand.kind != "leadline":
            continue
        if proc is None:
            reasons[name] = "`leadline trace --help` did not answer within 2 minutes"
        elif proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            reasons[name] = f"leadline is not usable in this Python: {last}"
        elif cand.options and cand.options[0] not in proc.stdout:
            reasons[name] = f"`leadline trace` has no {cand.options[0]} option yet"
        else:
            reasons[name] = None
    return reasons


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# ---------------------------------------------------------------------------------------------
# Reporting


@dataclass
class Row:
    candidate: str
    runs: str
    wall: float | None
    spread: float | None  # (max - min) / median of wall, in percent
    cpu: float | None
    wall_x_base: float | None
    cpu_x_base: float | None
    wall_x_floor: float | None
    max_rss_mb: float | None
    bytes: int | None
    events: int | None
    recorded: int | None
    bytes_per_event: float | None  # per recorded event
    us_per_event_wall: float | None
    us_per_event_cpu: float | None
    lower_bound: bool  # a timed-out candidate: its times and ratios are lower bounds
    rss_upper_bound: bool  # max_rss_mb is not above the harness's own peak RSS
    counts_partial: bool  # events and recorded are lower bounds
    note: str


def summarise(results: list[Result]) -> list[Row]:
    def ok_runs(r: Result) -> list[Run]:
        return [run for run in r.runs if run.status == "ok"]

    by_name = {r.candidate: r for r in results}

    def med(name: str, attr: str) -> float | None:
        r = by_name.get(name)
        return median([getattr(run, attr) for run in ok_runs(r)]) if r else None

    base_wall, base_cpu = med("baseline", "wall"), med("baseline", "cpu")

    def x_floor(r: Result, wall: float | None) -> float | None:
        """Median of the rounds' ratios to the floor run of the same round (the floor of the
        same hook set: floor-c for the --c-calls candidates): pairing the runs of a round
        cancels the machine's slow and fast spells.  Lower bound for a timed-out candidate."""
        floor_name = "floor-c" if r.candidate.endswith("-c") and "floor-c" in by_name else "floor"
        floor = by_name.get(floor_name)
        if floor is None or wall is None:
            return None
        floor_by_round = {run.round: run.wall for run in ok_runs(floor)}
        ratios = [
            run.wall / floor_by_round[run.round]
            for run in ok_runs(r)
            if run.round in floor_by_round
        ]
        if ratios:
            return median(ratios)
        floor_wall = med(floor_name, "wall")
        return wall / floor_wall if floor_wall else None

    rows = []
    for r in results:
        runs = ok_runs(r)
        timed_out = [run for run in r.runs if run.status == "timeout"]
        lower = not runs and bool(timed_out)
        used = runs or timed_out
        walls = [run.wall for run in used]
        wall = median(walls)
        cpu = median([run.cpu for run in used])
        spread = (max(walls) - min(walls)) / wall * 100 if wall and len(walls) > 1 else None
        sizes = [run.bytes for run in used if run.bytes is not None]
        size = int(statistics.median(sizes)) if sizes else None
        counts = r.counts or Counts()
        per_event = size / counts.recorded if size and counts.recorded else None
        us_wall = us_cpu = None
        if counts.events and not counts.partial:
            if wall is not None and base_wall is not None and r.candidate != "baseline":
                us_wall = (wall - base_wall) / counts.events * 1e6
            if cpu is not None and base_cpu is not None and r.candidate != "baseline":
                us_cpu = (cpu - base_cpu) / counts.events * 1e6
        notes = []
        if r.unavailable:
            notes.append(f"not run: {r.unavailable}")
        if lower and wall is not None:
            notes.append(f"timed out after {wall:.0f} s: times and ratios are lower bounds")
            if counts.events:
                notes.append(
                    f"at least {counts.events} events done by then: at most "
                    f"{wall / counts.events * 1e6:.2f} µs per event, all costs included"
                )
        failed = [run for run in r.runs if run.status == "failed"]
        if failed:
            notes.append(f"failed: {(failed[0].error or '').splitlines()[-1:] or ['?']}")
        if counts.error:
            notes.append(counts.error)
        if r.stopped and not lower:
            notes.append(r.stopped)
        rows.append(
            Row(
                candidate=r.candidate,
                runs=f"{len(runs)}/{len(r.runs)}",
                wall=wall,
                spread=spread,
                cpu=cpu,
                wall_x_base=wall / base_wall if wall and base_wall else None,
                cpu_x_base=cpu / base_cpu if cpu and base_cpu else None,
                wall_x_floor=x_floor(r, wall),
                max_rss_mb=(
                    statistics.median([run.max_rss_kb for run in used]) / 1024 if used else None
                ),
                bytes=size,
                events=counts.events,
                recorded=counts.recorded,
                bytes_per_event=per_event,
                us_per_event_wall=us_wall,
                us_per_event_cpu=us_cpu,
                lower_bound=lower,
                counts_partial=counts.partial,
                rss_upper_bound=bool(used)
                and statistics.median([run.max_rss_kb for run in used])
                <= max(run.harness_rss_kb for run in used),
                note="; ".join(notes),
            )
        )
    return rows


HEADERS = (
    "candidate",
    "runs ok",
    "wall s",
    "spread",
    "cpu s",
    "wall/base",
    "cpu/base",
    "wall/floor",
    "max RSS MB",
    "bytes",
    "events",
    "recorded",
    "B/rec. event",
    "µs/event wall",
    "µs/event cpu",
)


def cells(row: Row) -> list[str]:
    def num(x: float | None, digits: int, prefix: str = "") -> str:
        return "-" if x is None else f"{prefix}{x:.{digits}f}"

    def big(x: int | None) -> str:
        if x is None:
            return "-"
        for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if x >= scale:
                return f"{x / scale:.2f}{unit}"
        return str(x)

    gt = ">" if row.lower_bound else ""
    return [
        row.candidate,
        row.runs,
        num(row.wall, 2, gt),
        "-" if row.spread is None else f"{row.spread:.0f}%",
        num(row.cpu, 2, gt),
        num(row.wall_x_base, 2, gt),
        num(row.cpu_x_base, 2, gt),
        num(row.wall_x_floor, 2, gt),
        # a killed run's peak so far is a lower bound, unless the harness's own peak hides it
        num(row.max_rss_mb, 0, "<=" if row.rss_upper_bound else gt and ">="),
        big(row.bytes),
        (">=" if row.counts_partial and row.events is not None else "") + big(row.events),
        (">=" if row.counts_partial and row.recorded is not None else "") + big(row.recorded),
        num(row.bytes_per_event, 1),
        num(row.us_per_event_wall, 3),
        num(row.us_per_event_cpu, 3),
    ]


def markdown_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def text_table(rows: list[Row]) -> str:
    table = [list(HEADERS), *[cells(row) for row in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADERS))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in table
    )


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        # the kernel's version number only, not the build name that follows it
        "system": f"{platform.system()} {platform.release().split('-')[0]}",
        "load_before": os.getloadavg()[0],
    }


def python_info(python: str) -> dict[str, Any]:
    code = (
        "import json, platform, sys, importlib.metadata as md\n"
        "def v(n):\n"
        "    try: return md.version(n)\n"
        "    except Exception: return None\n"
        "print(json.dumps({'version': platform.python_version(), "
        "'implementation': platform.python_implementation(), "
        "'venv': sys.prefix != sys.base_prefix, 'packages': {n: v(n) for n in "
        "('leadline', 'pyperformance', 'pyperf', 'pymemtrace')}}))"
    )
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    info: dict[str, Any] = json.loads(proc.stdout)
    return info


# ---------------------------------------------------------------------------------------------
# Main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("calls", "las", "all"), default="all")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument(
        "--candidates",
        default=",".join(CANDIDATES),
        help=f"comma-separated, from: {', '.join(CANDIDATES)} (default: all)",
    )
    parser.add_argument("--python", default=sys.executable, help="default: this Python")
    parser.add_argument("--quick", action="store_true", help="small workloads, for a smoke run")
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800,
        help="seconds before a run is killed; a candidate that times out is not run again "
        "(default 1800)",
    )
    parser.add_argument("--name", help="results file name (default: the workload, +'-quick')")
    parser.add_argument("--no-save", action="store_true", help="print only, write no results")
    parser.add_argument("--no-setup", action="store_true", help="never run setup_env")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "leadline-bench",
        help="scratch space: data sets, captures, logs (default: <tmp>/leadline-bench)",
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="run nothing: recompute the summary of a results .json and rewrite its .md",
    )
    args = parser.parse_args(argv)
    if args.render:
        rerender(args.render)
        return 0
    # On SIGTERM exit through Python, so that run_once kills the running child's process group.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    names = [n for n in args.candidates.split(",") if n]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        parser.error(f"unknown candidate(s): {', '.join(unknown)}")
    if "baseline" not in names:
        names.insert(0, "baseline")
        print("run.py: adding the baseline, which every ratio needs")
    python = args.python
    work: Path = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    clean = Sanitizer(python, work)
    workloads = make_workloads(python, work, args.quick)
    chosen = list(workloads) if args.workload == "all" else [args.workload]

    unavailable: dict[str, str] = {}
    needs = sorted(
        {n for w in chosen for n in workloads[w].needs}
        | ({"pymemtrace"} if any(CANDIDATES[n].kind == "pymemtrace" for n in names) else set())
    )
    problems = setup_env.missing(python, needs)
    if problems and not args.no_setup:
        for problem in setup_env.ensure(python, [r.name for r in problems]):
            print(f"run.py: {problem}", file=sys.stderr)
        problems = setup_env.missing(python, needs)
    for req in problems:
        why = f"{req.spec} is not installed (bench/setup_env.py)"
        if req.name == "pymemtrace":
            unavailable.update({n: why for n in names if CANDIDATES[n].kind == "pymemtrace"})
        for w in chosen:
            if req.name in workloads[w].needs:
                unavailable[w] = why
    if any(CANDIDATES[n].kind == "leadline" for n in names):
        for n, reason in check_leadline(python).items():
            if reason and n in names:
                unavailable[n] = clean(reason)
    for n, why in unavailable.items():
        print(f"run.py: {n}: {why}", file=sys.stderr)

    info = python_info(python)
    started = datetime.datetime.now(datetime.timezone.utc)
    report: dict[str, Any] = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "python": info,
        "rounds": args.rounds,
        "quick": args.quick,
        "timeout": args.timeout,
        "command": " ".join(["bench/run.py", *(clean(a) for a in (argv or sys.argv[1:]))]),
        "candidates": {n: CANDIDATES[n].description for n in names},
        "workloads": {},
    }
    print(
        f"Python {info['version']} ({clean(python)}), {args.rounds} rounds, "
        f"workloads: {', '.join(chosen)}, candidates: {', '.join(names)}",
        flush=True,
    )

    for wname in chosen:
        workload = workloads[wname]
        if wname in unavailable:
            report["workloads"][wname] = {"skipped": unavailable[wname]}
            continue
        if workload.prepare:
            workload.prepare()
        results: dict[str, Result] = {}
        for n in names:
            example = CANDIDATES[n].command(python, Path("OUT"), workload.script, ["ARGS"])
            results[n] = Result(n, CANDIDATES[n].description, clean(" ".join(example[1:])))
            results[n].unavailable = unavailable.get(n)
        runs_dir = work / "runs"
        for rnd in range(0, args.rounds + 1):  # round 0: untimed warm-up of the baseline
            for n in names:
                cand, res = CANDIDATES[n], results[n]
                if res.unavailable or res.stopped or (rnd == 0 and n != "baseline"):
                    continue
                run_dir = runs_dir / f"{wname}-{n}-r{rnd}"
                shutil.rmtree(run_dir, ignore_errors=True)
                run_dir.mkdir(parents=True)
                out = run_dir / ("capture.lead" if cand.kind == "leadline" else "profile.log")
                cmd = cand.command(python, out, workload.script, workload.args(run_dir))
                label = "warm-up" if rnd == 0 else f"round {rnd}/{args.rounds}"
                print(f"  {wname:6} {label:11} {n:17}", end="", flush=True)
                wall, usage, code, timed_out = run_once(cmd, run_dir, args.timeout)
                status = "timeout" if timed_out else ("ok" if code == 0 else "failed")
                run = Run(
                    rnd,
                    status,
                    wall,
                    usage.ru_utime,
                    usage.ru_stime,
                    usage.ru_maxrss,
                    code,
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                    out.stat().st_size if out.exists() else None,
                    None if status == "ok" else clean(tail(run_dir / "stderr.txt")),
                )
                print(
                    f" {status:7} wall {wall:8.2f} s  cpu {run.cpu:8.2f} s  "
                    f"rss {run.max_rss_kb / 1024:7.0f} MB"
                    + (f"  out {run.bytes / 1e6:9.1f} MB" if run.bytes is not None else ""),
                    flush=True,
                )
                if rnd == 0:
                    if status != "ok":
                        print(clean(tail(run_dir / "stderr.txt")), file=sys.stderr)
                        res.stopped = f"warm-up run {status}"
                    shutil.rmtree(run_dir, ignore_errors=True)
                    continue
                res.runs.append(run)
                if status == "failed" and cand.kind == "leadline" and run.error:
                    print(f"    {run.error.splitlines()[-1]}", file=sys.stderr)
                if res.counts is None and status in ("ok", "timeout") and out.exists():
                    if cand.kind == "leadline" and status == "ok":
                        res.counts = leadline_counts(python, out, run_dir)
                    elif cand.kind == "pymemtrace":
                        res.counts = pymemtrace_counts(out)
                if status != "ok":
                    res.stopped = f"not run again after a run {status} in round {rnd}"
                shutil.rmtree(run_dir, ignore_errors=True)
        rows = summarise(list(results.values()))
        print(f"\n{wname}:\n{text_table(rows)}")
        for row in rows:
            if row.note:
                print(f"  {row.candidate}: {row.note}")
        print(flush=True)
        report["workloads"][wname] = {
            "args": clean(" ".join(workload.args(Path("<run>")))),
            "results": [asdict(r) for r in results.values()],
            "summary": [asdict(row) for row in rows],
        }

    if not args.no_save:
        name = args.name or (args.workload + ("-quick" if args.quick else ""))
        version = ".".join(str(info["version"]).split(".")[:2])
        save(report, name, version, started.strftime("%Y-%m-%d"))
    return 0


def save(report: dict[str, Any], name: str, version: str, day: str) -> None:
    results_dir = BENCH / "results"
    results_dir.mkdir(exist_ok=True)
    stem = f"{name}-py{version}-{day}"
    n = 1
    while (results_dir / f"{stem}.md").exists() or (results_dir / f"{stem}.json").exists():
        n += 1
        stem = f"{name}-py{version}-{day}-{n}"
    report["name"] = name
    (results_dir / f"{stem}.md").write_text(markdown(report))
    (results_dir / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"results: {(results_dir / stem).relative_to(REPO)}.md and .json")


def rerender(path: Path) -> None:
    """Recompute the summaries of a results .json from its runs; rewrite it and its .md."""
    report = json.loads(path.read_text())
    report.setdefault("name", path.stem.rsplit("-py", 1)[0])
    for data in report["workloads"].values():
        if "results" not in data:
            continue
        results = []
        for d in data["results"]:
            counts = Counts(**d["counts"]) if d["counts"] else None
            runs = [Run(**r) for r in d["runs"]]
            results.append(
                Result(
                    d["candidate"],
                    d["description"],
                    d["command"],
                    d["unavailable"],
                    runs,
                    counts,
                    d["stopped"],
                )
            )
        data["summary"] = [asdict(row) for row in summarise(results)]
    path.write_text(json.dumps(report, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown(report))
    print(f"rewrote {path} and {path.with_suffix('.md')}")


def markdown(report: dict[str, Any]) -> str:
    info = report["python"]
    m = report["machine"]
    packages = ", ".join(f"{k} {v or 'not installed'}" for k, v in info["packages"].items())
    lines = [
        f"# Benchmark {report['name']}: Python {info['version']}",
        "",
        f"- date: {report['date']}",
        f"- machine: {m['nproc']} CPUs, {m['cpu']}, {m['system']}, "
        f"load average {m['load_before']:.2f} at the start",
        f"- python: {info['implementation']} {info['version']}; {packages}",
        f"- rounds: {report['rounds']} (interleaved, after one warm-up run of the baseline), "
        f"timeout {report['timeout']:.0f} s per run{', quick sizes' if report['quick'] else ''}",
        f"- command: `{report['command']}`",
        "",
        "Medians over the rounds; spread is (max - min) / median of the wall times.  "
        "See bench/README.md for how to read the columns.",
        "",
        "Candidates:",
        "",
    ]
    lines += [f"- `{k}`: {v}" for k, v in report["candidates"].items()]
    for wname, data in report["workloads"].items():
        lines += ["", f"## {wname}", ""]
        if "skipped" in data:
            lines.append(f"Not run: {data['skipped']}")
            continue
        lines += [f"Arguments: `{data['args']}`" if data["args"] else "Arguments: none", ""]
        rows = [Row(**row) for row in data["summary"]]
        lines.append(markdown_table(rows))
        notes = [f"- `{row.candidate}`: {row.note}" for row in rows if row.note]
        if notes:
            lines += ["", *notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
