"""What `attach --native` and `run --native` cost (docs/run.md, "--native"): how long each
sample stops the sampled thread while its C stack is read, and the sampler's CPU a sample,
against a plain `attach` or `run` of the same program in the same rounds.

    python bench/native_pause.py [--command attach|run] [--rounds N] [--seconds S] [--rate HZ]

The programs are the tests' (tests/test_attach_native.py, tests/test_dump.py): one compressing
with zlib (C library under an extension), one multiplying numpy matrices (numpy and its BLAS),
and one recursing 200 Python calls deep (many eval-loop frames to replace), one running at a
time (the others stopped).  Each round attaches to each program plainly and with `--native`, in
turn; the figures come from the captures' END:
`native_held_ns` (the threads' time stopped) over the samples, and `sampler_cpu_ns` over the
ticks.  Writes bench/results/native-pause-py<X.Y>-<date>.md.

`--command run`: the same three kinds of work, each repeated for S seconds by a program that
prints how many times it did it; each round runs it bare (no profiler: the reference), under a
plain `leadline run` and under `leadline run --native`, in turn.  Besides END's figures (a
thread is held in the sampler's signal handler while its registers and stack are taken: the
pause is over the holds, `native_stops`), the work each run did against the bare run's.
Writes bench/results/native-run-py<X.Y>-<date>.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, cpus_and_load, machine, markdown_table, ready_programs, write_result

sys.path.insert(0, str(REPO / "tests"))
import test_attach_native  # the programs the tests sample
import test_dump

from leadline.capture.reader import Capture

DEEP = """
def down(n):
    if n:
        return down(n - 1)
    total = 0
    for i in range(200_000):
        total += i
    return total

print("ready", flush=True)
while True:
    down(200)
"""

PROGRAMS = {
    "zlib": test_dump.COMPRESSING,
    "numpy": test_attach_native.NUMPY,
    "200 Python frames": DEEP,
}


def attach(pid: int, work: Path, native: bool, seconds: float, rate: float) -> dict[str, float]:
    out = work / f"{pid}-{int(native)}.lead"
    cmd = [sys.executable, "-m", "leadline", "attach", str(pid), "-q", "-o", str(out)]
    cmd += ["-d", str(seconds), "-r", str(rate), *(["--native"] if native else [])]
    subprocess.run(cmd, check=True, cwd=work)
    with Capture(out) as cap:
        end = cap.end or {}
    samples, ticks = max(int(end.get("samples", 0)), 1), max(int(end.get("ticks", 0)), 1)
    return {
        "pause_us": float(end.get("native_held_ns", 0)) / samples / 1e3,
        "cpu_us": float(end.get("sampler_cpu_ns", 0)) / ticks / 1e3,
        "stopped": float(end.get("native_held_ns", 0)) / (seconds * 1e9),
    }


# `--command run`: each kind of work, repeated for argv[1] seconds; prints how many times.
RUN_TEMPLATE = """
import os, sys, time
{setup}
def work():
    {body}

done = 0
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    work()
    done += 1
print(done)
"""

RUN_PROGRAMS = {
    "zlib": RUN_TEMPLATE.format(
        setup="import zlib\ndata = os.urandom(1 << 18) * 4", body="zlib.compress(data, 9)"
    ),
    "numpy": RUN_TEMPLATE.format(
        setup='os.environ["OPENBLAS_NUM_THREADS"] = "1"\nimport numpy\n'
        "a = numpy.random.default_rng(1).random((300, 300))",
        body="a @ a",
    ),
    "200 Python frames": RUN_TEMPLATE.format(
        setup="def down(n):\n    if n:\n        return down(n - 1)\n    return sum(range(200_000))",
        body="down(200)",
    ),
}


def run_program(script: Path, how: str, seconds: float, rate: float) -> dict[str, float]:
    """One run of `script`: bare (no profiler), plain (`leadline run`) or native."""
    out = script.with_suffix(f".{how}.lead")
    profiler = ["-m", "leadline", "run", "-q", "-o", str(out), "-r", str(rate)]
    profiler += ["--native"] if how == "native" else []
    cmd = [sys.executable, *(profiler if how != "bare" else []), str(script), str(seconds)]
    done = int(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-1])
    if how == "bare":
        return {"done": done}
    with Capture(out) as cap:
        end = cap.end or {}
    stops, ticks = max(int(end.get("native_stops", 0)), 1), max(int(end.get("ticks", 0)), 1)
    return {
        "done": done,
        "pause_us": float(end.get("native_held_ns", 0)) / stops / 1e3,
        "cpu_us": float(end.get("sampler_cpu_ns", 0)) / ticks / 1e3,
        "stopped": float(end.get("native_held_ns", 0)) / (seconds * 1e9),
    }


def pause_cells(plain: list[dict[str, float]], withn: list[dict[str, float]]) -> list[str]:
    """The pause (median, range), the share of time held, the sampler's CPU a tick plain and
    with --native."""

    def mid(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    pauses = [r["pause_us"] for r in withn]
    return [
        f"{mid(withn, 'pause_us'):.0f} ({min(pauses):.0f}-{max(pauses):.0f})",
        f"{100 * mid(withn, 'stopped'):.1f}%",
        f"{mid(plain, 'cpu_us'):.0f}",
        f"{mid(withn, 'cpu_us'):.0f}",
    ]


def paired(runs: list[dict[str, float]], reference: list[dict[str, float]]) -> str:
    """The work done in each round against the reference's in the same round: median (range)."""
    ratios = [r["done"] / max(ref["done"], 1) for r, ref in zip(runs, reference, strict=True)]
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def main_run(args: argparse.Namespace) -> int:
    m = machine()
    got: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="native-run-") as tmp:
        for name, source in RUN_PROGRAMS.items():
            script = Path(tmp) / f"work_{name.split()[0]}.py"
            script.write_text(source)
        for _ in range(args.rounds):
            for name in RUN_PROGRAMS:
                script = Path(tmp) / f"work_{name.split()[0]}.py"
                for how in ("bare", "plain", "native"):
                    figures = run_program(script, how, args.seconds, args.rate)
                    got.setdefault((name, how), []).append(figures)
    m["load_after"] = os.getloadavg()[0]
    rows = []
    for name in RUN_PROGRAMS:
        bare, plain, withn = got[(name, "bare")], got[(name, "plain")], got[(name, "native")]
        rows.append([name, *pause_cells(plain, withn), paired(plain, bare), paired(withn, plain)])
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    lines = [
        f"# `run --native`: the pause, the sampler's CPU and the work done, Python {version}",
        "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- machine: {cpus_and_load(m)}",
        f"- rounds: {args.rounds}, each run {args.seconds:g} s at {args.rate:g} Hz: bare, "
        "`leadline run`, `leadline run --native` in turn",
        f"- command: `python bench/native_pause.py --command run --rounds {args.rounds} "
        f"--seconds {args.seconds:g} --rate {args.rate:g}`",
        "",
        markdown_table(
            [
                "program",
                "pause a hold, µs (median, range)",
                "time held",
                "sampler CPU a tick, plain µs",
                "with --native µs",
                "work done, plain / bare (median, range)",
                "--native / plain",
            ],
            rows,
        ),
    ]
    write_result("native-run", lines)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--command", choices=("attach", "run"), default="attach")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=100.0)
    args = parser.parse_args()
    if args.command == "run":
        return main_run(args)
    m = machine()
    got: dict[tuple[str, bool], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="native-pause-") as tmp:
        work = Path(tmp)
        with ready_programs(work, PROGRAMS) as procs:
            # One program runs at a time (each is CPU-bound): the others wait, stopped.
            for p in procs.values():
                os.kill(p.pid, signal.SIGSTOP)
            for _ in range(args.rounds):
                for name, p in procs.items():
                    os.kill(p.pid, signal.SIGCONT)
                    time.sleep(0.2)
                    for native in (False, True):
                        figures = attach(p.pid, work, native, args.seconds, args.rate)
                        got.setdefault((name, native), []).append(figures)
                    os.kill(p.pid, signal.SIGSTOP)
    m["load_after"] = os.getloadavg()[0]
    rows = []
    for name in PROGRAMS:
        rows.append([name, *pause_cells(got[(name, False)], got[(name, True)])])
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    today = datetime.date.today().isoformat()
    lines = [
        f"# `attach --native`: the pause and the sampler's CPU, Python {version}",
        "",
        f"- date: {today}",
        f"- machine: {cpus_and_load(m)}",
        f"- rounds: {args.rounds}, each attach {args.seconds:g} s at {args.rate:g} Hz, plain and "
        "`--native` in turn",
        f"- command: `python bench/native_pause.py --rounds {args.rounds} --seconds "
        f"{args.seconds:g} --rate {args.rate:g}`",
        "",
        markdown_table(
            [
                "program",
                "pause a sample, µs (median, range)",
                "time stopped",
                "sampler CPU a tick, plain µs",
                "with --native µs",
            ],
            rows,
        ),
    ]
    write_result("native-pause", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
