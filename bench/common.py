"""What the benchmark harnesses share: workloads, running a child, results files, tables.

``bench/run.py`` (tracing) and ``bench/sampling.py`` (sampling) both run every candidate as a
subprocess, measure it with ``os.wait4`` and write ``bench/results/<name>-py<X.Y>-<date>.md`` and
``.json``.  See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import setup_env

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORKLOADS = BENCH / "workloads"

# ---------------------------------------------------------------------------------------------
# Programs that wait to be looked at (dump_latency.py, native_pause.py)


@contextlib.contextmanager
def ready_programs(work: Path, programs: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    """Each program (name -> source, which prints "ready" when it has begun) started under
    this Python in `work`, once it is ready; all killed on the way out."""
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for name, source in programs.items():
            script = work / f"{len(procs)}.py"
            script.write_text(source)
            p = subprocess.Popen(
                [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=work
            )
            procs[name] = p
            if p.stdout is None or p.stdout.readline() != "ready\n":
                raise RuntimeError(f"{name}: the program did not start")
        yield procs
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


def write_result(stem: str, lines: Sequence[str]) -> Path:
    """bench/results/<stem>-py<X.Y>-<date>.md, printed too."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    out = BENCH / "results" / f"{stem}-py{version}-{datetime.date.today().isoformat()}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwritten: {out.relative_to(REPO)}")
    return out


# ---------------------------------------------------------------------------------------------
# Workloads


@dataclass
class Workload:
    name: str
    script: Path
    args: Callable[[Path], list[str]]  # (run dir) -> arguments of one timed run
    prepare: Callable[[], None] | None = None  # untimed, once, before the runs
    needs: tuple[str, ...] = ()  # setup_env requirements


@dataclass(frozen=True)
class Sizes:
    """How much work the overhead workloads do."""

    calls_scale: float | None  # calls.py --scale (None: its default, 1)
    las_mb: float  # size of the LAS data set
    las_files: int | None  # number of LAS files (None: 20-80, by seed)


def make_workloads(python: str, work: Path, sizes: Sizes) -> dict[str, Workload]:
    """The call-dense (``calls``) and the memory-story (``las``) workloads."""
    las_params = ["--size-mb", f"{sizes.las_mb:g}"]
    if sizes.las_files is not None:
        las_params += ["--files", str(sizes.las_files)]
    las_data = work / f"las-{sizes.las_mb:g}mb-{sizes.las_files or 'auto'}"

    def prepare_las() -> None:
        cmd = [python, str(WORKLOADS / "las.py"), "--generate", str(las_data), *las_params]
        subprocess.run(cmd, check=True)

    calls_args = [] if sizes.calls_scale is None else ["--scale", f"{sizes.calls_scale:g}"]
    return {
        "calls": Workload(
            "calls",
            WORKLOADS / "calls.py",
            lambda run_dir: list(calls_args),
            needs=("pyperformance",),
        ),
        "las": Workload(
            "las",
            WORKLOADS / "las.py",
            lambda run_dir: ["--data", str(las_data), "--out", str(run_dir / "html")],
            prepare=prepare_las,
        ),
    }


def ensure_requirements(python: str, needs: Iterable[str], setup: bool, who: str) -> list[str]:
    """Install what is missing of `needs` into `python` (if `setup`); the names still missing."""
    names = sorted(set(needs))

    def still_missing() -> list[str]:  # REQUIREMENTS keys, not distribution names
        missing = setup_env.missing(python, names)
        return [n for n in names if setup_env.REQUIREMENTS[n] in missing]

    left = still_missing()
    if left and setup:
        for problem in setup_env.ensure(python, left):
            print(f"{who}: {problem}", file=sys.stderr)
        left = still_missing()
    return left


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class Finished:
    wall: float  # seconds from start to reaping
    usage: Any  # os.wait4's rusage: the child and the descendants it waited for
    code: int | None  # exit code, None if killed by a signal
    timed_out: bool
    # The child's own user + sys CPU seconds, without its waited-for descendants (read from
    # /proc before reaping it, to clock-tick resolution), when asked for with own_cpu.
    own_cpu: float | None = None
    # User + sys CPU seconds of descendants the child did not wait for (they were orphaned to
    # this process, a subreaper: see become_subreaper), reaped after it.
    orphans_cpu: float = 0.0

    @property
    def cpu(self) -> float:
        """The child's CPU time and that of all its descendants."""
        return float(self.usage.ru_utime + self.usage.ru_stime) + self.orphans_cpu


def become_subreaper() -> None:
    """Make the descendants that the children leave behind (a profiler exits without waiting
    for its target) this process's children, so that run_once can count their CPU time."""
    import ctypes

    pr_set_child_subreaper = 36  # <linux/prctl.h>
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _orphans(pgid: int) -> list[int]:
    """This process's children in process group pgid."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def _own_cpu(pid: int) -> float | None:
    """User + sys seconds of an exited, not yet reaped process itself (not its children)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(
    cmd: list[str],
    cwd: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    own_cpu: bool = False,
) -> Finished:
    """Run cmd in its own session, stdout and stderr to files in cwd; kill it after timeout.

    Whatever the child leaves running in its process group (a profiler's target that it did not
    stop, say) is killed once the child has exited, and reaped if it became ours.
    """
    env = {**os.environ, "PYTHONHASHSEED": "0", **(env or {})}
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
        own = None
        try:
            if own_cpu:
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
                own = _own_cpu(proc.pid)
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
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        orphans = 0.0
        for pid in _orphans(proc.pid):
            _, _, left = os.wait4(pid, 0)
            orphans += left.ru_utime + left.ru_stime
    proc.returncode = os.waitstatus_to_exitcode(status)
    code = None if os.WIFSIGNALED(status) else proc.returncode
    return Finished(wall, usage, code, state["timed_out"], own, orphans)


def tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


# A median's interval from the rounds covers it this often (median_interval).
COVERAGE = 0.90


def median_interval(values: Sequence[float], coverage: float = COVERAGE) -> tuple[float, float]:
    """A distribution-free confidence interval for the median of `values`: the k-th smallest
    and the k-th largest, for the largest k whose interval covers the median with at least
    `coverage` (1 - 2 P(B <= k - 1), B the number of heads in n fair coin flips).  With too few
    values for that coverage, the smallest and the largest."""
    xs = sorted(values)
    n = len(xs)

    def below(k: int) -> float:  # P(B <= k)
        return sum(math.comb(n, i) for i in range(k + 1)) / float(2**n)

    k = 1
    while k + 1 <= (n + 1) // 2 and 1 - 2 * below(k) >= coverage:
        k += 1
    return xs[k - 1], xs[n - k]


def paired_ratio(runs: dict[int, float], reference: dict[int, float]) -> float | None:
    """Median over the rounds of value / reference of the same round ({round: value} each):
    pairing the runs of a round cancels the machine's slow and fast spells."""
    ratios = [v / reference[rnd] for rnd, v in runs.items() if reference.get(rnd)]
    return median(ratios)


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


# ---------------------------------------------------------------------------------------------
# Describing the run


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


def cpus_and_load(m: dict[str, Any]) -> str:
    """`machine()`'s CPUs and the load average before and after the runs, in a few words."""
    return (
        f"{m['nproc']} CPUs ({m['cpu']}), load {m['load_before']:.2f} before, "
        f"{m.get('load_after', 0):.2f} after"
    )


def python_info(python: str, packages: Sequence[str]) -> dict[str, Any]:
    code = (
        "import json, platform, sys, importlib.metadata as md\n"
        "def v(n):\n"
        "    try: return md.version(n)\n"
        "    except Exception: return None\n"
        "print(json.dumps({'version': platform.python_version(), "
        "'implementation': platform.python_implementation(), "
        "'venv': sys.prefix != sys.base_prefix, 'packages': {n: v(n) for n in "
        f"{tuple(packages)!r}}}}}))"
    )
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    info: dict[str, Any] = json.loads(proc.stdout)
    return info


def add_common_arguments(
    parser: argparse.ArgumentParser, rounds: int, timeout: float, name_help: str
) -> None:
    """The options every harness has."""
    parser.add_argument(
        "--rounds", type=int, default=rounds, help=f"timed rounds (default {rounds})"
    )
    parser.add_argument("--python", default=sys.executable, help="default: this Python")
    parser.add_argument("--quick", action="store_true", help="small workloads, for a smoke run")
    parser.add_argument(
        "--timeout",
        type=float,
        default=timeout,
        help="seconds before a run is killed; a candidate that times out is not run again "
        f"(default {timeout:g})",
    )
    parser.add_argument("--name", help=f"results file name (default: {name_help})")
    parser.add_argument("--no-save", action="store_true", help="print only, write no results")
    parser.add_argument("--no-setup", action="store_true", help="never run setup_env")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "leadline-bench",
        help="scratch space: data sets, captures, logs (default: <tmp>/leadline-bench)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep each run's folder (its output, stdout, stderr)"
    )


@dataclass
class Session:
    """One run of a harness: its options, scratch folder, and the report it builds."""

    args: argparse.Namespace
    python: str
    work: Path
    clean: Sanitizer
    started: datetime.datetime
    report: dict[str, Any]

    @classmethod
    def start(
        cls,
        parser: argparse.ArgumentParser,
        args: argparse.Namespace,
        argv: Sequence[str],
        packages: Sequence[str],
    ) -> Session:
        # On SIGTERM exit through Python, so that run_once kills the running child's group.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        work: Path = args.work_dir.resolve()
        work.mkdir(parents=True, exist_ok=True)
        python: str = args.python
        clean = Sanitizer(python, work)
        started = datetime.datetime.now(datetime.timezone.utc)
        report = {
            "date": started.strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(),
            "python": python_info(python, packages),
            "command": " ".join([f"bench/{parser.prog}", *(clean(a) for a in argv)]),
            "rounds": args.rounds,
            "quick": args.quick,
            "timeout": args.timeout,
            "candidates": {},
            "workloads": {},
        }
        return cls(args, python, work, clean, started, report)

    def begin(self, workload: Workload, unavailable: Mapping[str, str]) -> bool:
        """Prepare a workload; False (and a note in the report) if it cannot run."""
        if workload.name in unavailable:
            self.report["workloads"][workload.name] = {"skipped": unavailable[workload.name]}
            return False
        if workload.prepare:
            workload.prepare()
        return True

    def run_dir(self, workload: str, candidate: str, rnd: int) -> Path:
        """A new, empty folder for one run."""
        path = self.work / "runs" / f"{workload}-{candidate}-r{rnd}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def done(self, run_dir: Path) -> None:
        """A run is measured: remove its folder, unless --keep."""
        if not self.args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)

    def announce(self, workload: str, rnd: int, candidate: str, width: int) -> None:
        label = "warm-up" if rnd == 0 else f"round {rnd}/{self.args.rounds}"
        print(f"  {workload:6} {label:11} {candidate:{width}}", end="", flush=True)

    def save(self, name: str, markdown: Callable[[dict[str, Any]], str]) -> Path:
        """Write the report as bench/results/<name>-py<X.Y>-<date>[-N].md and .json; return
        the stem's path."""
        report = self.report
        report["machine"]["load_after"] = os.getloadavg()[0]
        version = ".".join(str(report["python"]["version"]).split(".")[:2])
        results_dir = BENCH / "results"
        results_dir.mkdir(exist_ok=True)
        stem = f"{name}-py{version}-{self.started.strftime('%Y-%m-%d')}"
        base, n = stem, 1
        while (results_dir / f"{stem}.md").exists() or (results_dir / f"{stem}.json").exists():
            n += 1
            stem = f"{base}-{n}"
        report["name"] = name
        (results_dir / f"{stem}.md").write_text(markdown(report))
        (results_dir / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
        print(f"results: {(results_dir / stem).relative_to(REPO)}.md and .json")
        return results_dir / stem


RunT = TypeVar("RunT")


@dataclass
class Result(Generic[RunT]):
    """A candidate on one workload: its runs, or why it did not run (again)."""

    candidate: str
    description: str
    command: str
    unavailable: str | None = None  # why it cannot run at all
    runs: list[RunT] = field(default_factory=list)
    stopped: str | None = None  # why later rounds were skipped


def interleaved(
    results: Mapping[str, Result[Any]], rounds: int, warm_up: str | None
) -> Iterator[tuple[int, str]]:
    """(round, candidate) in the order A B C, A B C, ... for rounds 1 to `rounds`, after a
    round 0 in which only `warm_up` runs (untimed) if given.  A candidate is skipped when it is
    unavailable or stopped at that moment (a failed run can stop it for later rounds)."""
    for rnd in range(0 if warm_up else 1, rounds + 1):
        for name, res in results.items():
            if (rnd == 0 and name != warm_up) or res.unavailable or res.stopped:
                continue
            yield rnd, name


def stop_reason(status: str, rnd: int) -> str | None:
    """Why a candidate is not run again after a run with this status (None: it is)."""
    if status == "ok":
        return None
    return (
        f"warm-up run {status}"
        if rnd == 0
        else f"not run again after a run {status} in round {rnd}"
    )


def markdown_report(
    report: dict[str, Any],
    title: str,
    warm_up: str,
    reading: str,
    section: Callable[[dict[str, Any]], tuple[str, list[str]]],
) -> str:
    """A results .md: header, candidates, then per workload its arguments, the table and notes
    that `section` makes of its data.  `warm_up` says which runs the warm-up was, `reading` how
    to read the tables."""
    info = report["python"]
    m = report["machine"]
    packages = ", ".join(f"{k} {v or 'not installed'}" for k, v in info["packages"].items())
    load = f"load average {m['load_before']:.2f} at the start"
    if "load_after" in m:
        load += f", {m['load_after']:.2f} at the end"
    lines = [
        f"# {title}: Python {info['version']}",
        "",
        f"- date: {report['date']}",
        f"- machine: {m['nproc']} CPUs, {m['cpu']}, {m['system']}, {load}",
        f"- python: {info['implementation']} {info['version']}; {packages}",
        f"- rounds: {report['rounds']} (interleaved, {warm_up}), "
        f"timeout {report['timeout']:.0f} s per run{', quick sizes' if report['quick'] else ''}",
        f"- command: `{report['command']}`",
        "",
        f"Medians over the rounds; {reading}  See bench/README.md for how to read the columns.",
        "",
        "Candidates:",
        "",
    ]
    lines += [f"- `{k}`: {v}" for k, v in report["candidates"].items()]
    for wname, data in report["workloads"].items():
        heading = f"{wname} ({data['kind']})" if "kind" in data else wname
        lines += ["", f"## {heading}", ""]
        if "skipped" in data:
            lines.append(f"Not run: {data['skipped']}")
            continue
        lines += [f"Arguments: `{data['args']}`" if data["args"] else "Arguments: none", ""]
        table, notes = section(data)
        lines += [table, "", *notes] if notes else [table]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Tables


def num(x: float | None, digits: int, prefix: str = "") -> str:
    return "-" if x is None else f"{prefix}{x:.{digits}f}"


def big(x: int | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f}{unit}"
    return str(x)


# The first columns of every overhead table: medians of the runs and ratios to the baseline.
TIME_HEADERS = ("candidate", "runs ok", "wall s", "spread", "cpu s", "wall/base", "cpu/base")


def time_cells(row: Any, ratio_digits: int = 2, prefix: str = "") -> list[str]:
    """TIME_HEADERS' cells of a row with candidate, runs, wall, spread (percent), cpu,
    wall_x_base and cpu_x_base; prefix (">" for lower bounds) goes before times and ratios."""
    return [
        row.candidate,
        row.runs,
        num(row.wall, 2, prefix),
        "-" if row.spread is None else f"{row.spread:.0f}%",
        num(row.cpu, 2, prefix),
        num(row.wall_x_base, ratio_digits, prefix),
        num(row.cpu_x_base, ratio_digits, prefix),
    ]


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    table = [list(headers), *[list(row) for row in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in table
    )
