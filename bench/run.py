"""Benchmark harness: leadline against no profiler, a bare empty hook and pymemtrace.

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
import json
import resource
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import common
import setup_env
from common import (
    BENCH,
    Session,
    Sizes,
    Workload,
    add_common_arguments,
    big,
    ensure_requirements,
    interleaved,
    make_workloads,
    markdown_report,
    markdown_table,
    median,
    num,
    paired_ratio,
    run_once,
    stop_reason,
    tail,
    text_table,
)

# The packages whose versions a results file records.
PACKAGES = ("leadline", "pyperformance", "pyperf", "pymemtrace")

# ---------------------------------------------------------------------------------------------
# Candidates


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str  # "plain", "barehook", "leadline" or "pymemtrace"
    description: str
    options: tuple[str, ...] = ()  # leadline trace options or pymemtrace trigger

    def command(self, python: str, out: Path, script: Path, args: list[str]) -> list[str]:
        target = [str(script), *args]
        if self.kind == "plain":
            return [python, *target]
        if self.kind == "leadline":
            # No size limit: the benchmark measures recording every event, however many.
            trace = [python, "-m", "leadline", "trace", "--max-size", "none", *self.options]
            return [*trace, "-o", str(out), *target]
        if self.kind == "barehook":
            return [python, str(BENCH / "run_barehook.py"), *self.options, "--", *target]
        runner = str(BENCH / "run_pymemtrace.py")
        return [python, runner, *self.options, "--log", str(out), "--", *target]


CANDIDATES = {
    c.name: c
    for c in (
        Candidate("baseline", "plain", "the workload alone"),
        Candidate(
            "floor",
            "barehook",
            "a bare empty C hook of the same kind (bench/barehook), the cost floor",
        ),
        Candidate(
            "hook-only",
            "leadline",
            "leadline trace --hook-only: leadline's session with its empty native hook",
            ("--hook-only",),
        ),
        Candidate(
            "leadline",
            "leadline",
            "leadline trace: every event, its time (the RSS sampler's 1 ms clock) and memory",
        ),
        Candidate(
            "leadline-exact",
            "leadline",
            "leadline trace --exact-time: every event, timed by the CPU's time-stamp counter",
            ("--exact-time",),
        ),
        Candidate(
            "leadline-lean",
            "leadline",
            "leadline trace --no-heap: every event, its time and RSS, no heap bytes",
            ("--no-heap",),
        ),
        Candidate(
            "leadline-trigger",
            "leadline",
            "leadline trace --rss-trigger 4096: events where RSS moved by a page",
            ("--rss-trigger", "4096"),
        ),
        Candidate(
            "floor-c",
            "barehook",
            "the bare empty hook with builtin calls hooked too (CALL, C_RETURN, C_RAISE on 3.12+)",
            ("--c-calls",),
        ),
        Candidate(
            "hook-only-c",
            "leadline",
            "leadline trace --hook-only --c-calls: leadline's empty hook with C calls hooked",
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
class Result(common.Result[Run]):
    counts: Counts | None = None


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
    cpu_x_floor: float | None
    wall_x_hook_only: float | None
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

    def x_ref(r: Result, ref: str, attr: str) -> float | None:
        """Median of the rounds' ratios (of `attr`: wall or cpu) to the run of `ref` in the same
        round, `ref` being "floor" or "hook-only", or their "-c" forms for the --c-calls
        candidates: pairing the runs of a round cancels the machine's slow and fast spells.
        Lower bound for a timed-out candidate."""
        if r.candidate.endswith("-c") and f"{ref}-c" in by_name:
            ref = f"{ref}-c"
        reference = by_name.get(ref)
        if reference is None or reference is r:
            return None
        used = ok_runs(r) or [run for run in r.runs if run.status == "timeout"]
        ratio = paired_ratio(
            {run.round: getattr(run, attr) for run in used},
            {run.round: getattr(run, attr) for run in ok_runs(reference)},
        )
        if ratio is not None:
            return ratio
        mine, theirs = median([getattr(run, attr) for run in used]), med(ref, attr)
        return mine / theirs if mine is not None and theirs else None

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
                wall_x_floor=x_ref(r, "floor", "wall"),
                cpu_x_floor=x_ref(r, "floor", "cpu"),
                wall_x_hook_only=x_ref(r, "hook-only", "wall"),
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
    *common.TIME_HEADERS,
    "wall/floor",
    "cpu/floor",
    "wall/hook-only",
    "max RSS MB",
    "bytes",
    "events",
    "recorded",
    "B/rec. event",
    "µs/event wall",
    "µs/event cpu",
)


def cells(row: Row) -> list[str]:
    gt = ">" if row.lower_bound else ""
    return [
        *common.time_cells(row, 2, gt),
        num(row.wall_x_floor, 2, gt),
        num(row.cpu_x_floor, 2, gt),
        num(row.wall_x_hook_only, 2, gt),
        # a killed run's peak so far is a lower bound, unless the harness's own peak hides it
        num(row.max_rss_mb, 0, "<=" if row.rss_upper_bound else gt and ">="),
        big(row.bytes),
        (">=" if row.counts_partial and row.events is not None else "") + big(row.events),
        (">=" if row.counts_partial and row.recorded is not None else "") + big(row.recorded),
        num(row.bytes_per_event, 1),
        num(row.us_per_event_wall, 3),
        num(row.us_per_event_cpu, 3),
    ]


# ---------------------------------------------------------------------------------------------
# Main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workload",
        choices=("calls", "las", "richards", "all"),
        default="all",
        help="all: calls and las; richards: calls.py's richards alone, twice its size "
        "(the program of the tracer's target)",
    )
    parser.add_argument(
        "--candidates",
        default=",".join(CANDIDATES),
        help=f"comma-separated, from: {', '.join(CANDIDATES)} (default: all)",
    )
    add_common_arguments(parser, 3, 1800, "the workload, +'-quick'")
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
    names = [n for n in args.candidates.split(",") if n]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        parser.error(f"unknown candidate(s): {', '.join(unknown)}")
    if "baseline" not in names:
        names.insert(0, "baseline")
        print("run.py: adding the baseline, which every ratio needs")
    session = Session.start(parser, args, argv or sys.argv[1:], PACKAGES)
    python, work, clean, report = session.python, session.work, session.clean, session.report
    sizes = Sizes(0.01, 2, 6) if args.quick else Sizes(None, 50, None)
    workloads = make_workloads(python, work, sizes)
    calls = workloads["calls"]
    richards = ["--only", "richards", "--scale", f"{2 * (sizes.calls_scale or 1):g}"]
    workloads["richards"] = Workload(
        "richards", calls.script, lambda run_dir: list(richards), needs=calls.needs
    )
    chosen = ["calls", "las"] if args.workload == "all" else [args.workload]

    unavailable: dict[str, str] = {}
    # Candidates of these kinds run a program that bench/setup_env.py installs, named as the kind.
    installed = {"pymemtrace", "barehook"}
    needs = sorted(
        {n for w in chosen for n in workloads[w].needs}
        | {CANDIDATES[n].kind for n in names if CANDIDATES[n].kind in installed}
    )
    for missing in ensure_requirements(python, needs, not args.no_setup, "run.py"):
        why = f"{setup_env.REQUIREMENTS[missing].spec} is not installed (bench/setup_env.py)"
        unavailable.update({n: why for n in names if CANDIDATES[n].kind == missing})
        for w in chosen:
            if missing in workloads[w].needs:
                unavailable[w] = why
    if any(CANDIDATES[n].kind == "leadline" for n in names):
        for n, reason in check_leadline(python).items():
            if reason and n in names:
                unavailable[n] = clean(reason)
    for n, why in unavailable.items():
        print(f"run.py: {n}: {why}", file=sys.stderr)

    report["candidates"] = {n: CANDIDATES[n].description for n in names}
    print(
        f"Python {report['python']['version']} ({clean(python)}), {args.rounds} rounds, "
        f"workloads: {', '.join(chosen)}, candidates: {', '.join(names)}",
        flush=True,
    )

    for wname in chosen:
        workload = workloads[wname]
        if not session.begin(workload, unavailable):
            continue
        results: dict[str, Result] = {}
        for n in names:
            example = CANDIDATES[n].command(python, Path("OUT"), workload.script, ["ARGS"])
            results[n] = Result(n, CANDIDATES[n].description, clean(" ".join(example[1:])))
            results[n].unavailable = unavailable.get(n)
        for rnd, n in interleaved(results, args.rounds, "baseline"):
            cand, res = CANDIDATES[n], results[n]
            run_dir = session.run_dir(wname, n, rnd)
            out = run_dir / ("capture.lead" if cand.kind == "leadline" else "profile.log")
            cmd = cand.command(python, out, workload.script, workload.args(run_dir))
            session.announce(wname, rnd, n, 17)
            fin = run_once(cmd, run_dir, args.timeout)
            status = "timeout" if fin.timed_out else ("ok" if fin.code == 0 else "failed")
            run = Run(
                rnd,
                status,
                fin.wall,
                fin.usage.ru_utime,
                fin.usage.ru_stime,
                fin.usage.ru_maxrss,
                fin.code,
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                out.stat().st_size if out.exists() else None,
                None if status == "ok" else clean(tail(run_dir / "stderr.txt")),
            )
            print(
                f" {status:7} wall {run.wall:8.2f} s  cpu {run.cpu:8.2f} s  "
                f"rss {run.max_rss_kb / 1024:7.0f} MB"
                + (f"  out {run.bytes / 1e6:9.1f} MB" if run.bytes is not None else ""),
                flush=True,
            )
            res.stopped = stop_reason(status, rnd)
            if rnd == 0:
                if status != "ok":
                    print(clean(tail(run_dir / "stderr.txt")), file=sys.stderr)
                session.done(run_dir)
                continue
            res.runs.append(run)
            if status == "failed" and cand.kind == "leadline" and run.error:
                print(f"    {run.error.splitlines()[-1]}", file=sys.stderr)
            if res.counts is None and status in ("ok", "timeout") and out.exists():
                if cand.kind == "leadline" and status == "ok":
                    res.counts = leadline_counts(python, out, run_dir)
                elif cand.kind == "pymemtrace":
                    res.counts = pymemtrace_counts(out)
            session.done(run_dir)
        rows = summarise(list(results.values()))
        print(f"\n{wname}:\n{text_table(HEADERS, [cells(row) for row in rows])}")
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
        session.save(args.name or (args.workload + ("-quick" if args.quick else "")), markdown)
    return 0


def rerender(path: Path) -> None:
    """Recompute the summaries of a results .json from its runs; rewrite it and its .md."""
    report = json.loads(path.read_text())
    report.setdefault("name", path.stem.rsplit("-py", 1)[0])
    for data in report["workloads"].values():
        if "results" not in data:
            continue
        results = []
        for d in data["results"]:
            fields = {**d, "runs": [Run(**r) for r in d["runs"]]}
            fields["counts"] = Counts(**d["counts"]) if d["counts"] else None
            results.append(Result(**fields))
        data["summary"] = [asdict(row) for row in summarise(results)]
    path.write_text(json.dumps(report, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown(report))
    print(f"rewrote {path} and {path.with_suffix('.md')}")


def markdown(report: dict[str, Any]) -> str:
    def section(data: dict[str, Any]) -> tuple[str, list[str]]:
        rows = [Row(**row) for row in data["summary"]]
        notes = [f"- `{row.candidate}`: {row.note}" for row in rows if row.note]
        return markdown_table(HEADERS, [cells(row) for row in rows]), notes

    return markdown_report(
        report,
        f"Benchmark {report['name']}",
        "after one warm-up run of the baseline",
        "spread is (max - min) / median of the wall times.",
        section,
    )


if __name__ == "__main__":
    sys.exit(main())
