"""Accuracy on a busy machine: builds of leadline side by side, interleaved, on a program whose
true split the program measures itself, beside CPU hogs.

The program is ``bench/workloads/alternating.py`` at SLOW=3 (70% of its CPU in ``slow_part``,
a turn of both every 4 ms), sampled by ``leadline run --rate R`` in each mode.  For each run the
harness reads the capture with this checkout's reader and gives ``slow_part``'s share of the two
functions in points against the program's own figure:

- ``fair``: among the reads written as read (not weight given to another read), which are the
  fair samples (and, on a machine so busy that a thread had none lately, reads counted where
  they were found);
- ``weighted``: of what the samples stand for (CPU time in cpu mode, ticks in wall mode), as the
  reports weigh them.

The hogs are plain busy loops, one per core (``--hogs``), started before a round and stopped
after it; ``--pinned`` puts one hog, the program and its sampler on CPU 0 instead (a CPU shared
three ways).  The candidates are Pythons with leadline installed (``NAME=PYTHON``, comma
separated), run in turn within each round (A B, A B, ...); the harness itself reads the captures
with the leadline of the Python that runs it.

    .venv/bin/python bench/busy_accuracy.py \\
        --candidates before=/tmp/a/bin/python,after=.venv/bin/python --rounds 6 [--pinned]

Writes ``bench/results/<name>-<date>.md`` and ``.json``.  See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import cpus_and_load, machine, markdown_table  # noqa: E402

from leadline.capture.reader import SAMPLE_GIVEN, SAMPLE_IDLE, Capture  # noqa: E402

WORKLOAD = HERE / "workloads" / "alternating.py"
FUNCS = ("slow_part", "fast_part")


@dataclass
class Run:
    candidate: str
    mode: str
    round: int
    truth: float  # slow_part's share of the two functions' CPU time, as the program measured
    fair: float
    weighted: float
    reads: int  # the reads written as read (fair samples) in the two functions
    ticks: int
    deferred: int


def _leaf(cap: Capture, stack: int, memo: dict[int, str]) -> str:
    """Which of the two functions the stack is in ("" for neither)."""
    if stack in memo:
        return memo[stack]
    sid, found = stack, ""
    while sid and not found:
        parent, func, _off = cap.stacks.get(sid, (0, 0, 0))
        name = cap.function(func).name
        found = name if name in FUNCS else ""
        sid = parent
    memo[stack] = found
    return found


def _pct(d: dict[str, float]) -> float:
    """slow_part's share of the two functions, in percent."""
    return 100.0 * d["slow_part"] / max(d["slow_part"] + d["fast_part"], 1)


def _sd(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def measure(path: Path, truth_path: Path, mode: str) -> tuple[float, float, float, int, int, int]:
    truth = json.loads(truth_path.read_text())
    reads = {f: 0 for f in FUNCS}
    weights = {f: 0.0 for f in FUNCS}
    memo: dict[int, str] = {}
    with Capture(path) as cap:
        for _t, _serial, flags, stack, cpu, _drss in cap.samples():
            if flags & SAMPLE_IDLE:
                continue
            f = _leaf(cap, stack, memo)
            if not f:
                continue
            weights[f] += cpu if mode == "cpu" else 1
            if not flags & SAMPLE_GIVEN:
                reads[f] += 1
        end = cap.end or {}
    return (
        _pct(truth),
        _pct({f: float(n) for f, n in reads.items()}),
        _pct(weights),
        sum(reads.values()),
        int(end.get("ticks", 0)),
        int(end.get("deferred", 0)),
    )


def hogs(pinned: bool, n: int) -> list[subprocess.Popen[bytes]]:
    prefix = ["taskset", "-c", "0"] if pinned else []
    return [
        subprocess.Popen([*prefix, "sh", "-c", "while :; do :; done"])
        for _ in range(1 if pinned else n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", required=True, help="NAME=PYTHON,NAME=PYTHON,...")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--modes", default="wall,cpu")
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--pinned", action="store_true", help="one hog, and the program, on CPU 0")
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--name", default="busy-accuracy")
    args = ap.parse_args()
    candidates = [tuple(c.split("=", 1)) for c in args.candidates.split(",")]
    modes = args.modes.split(",")
    m = machine()
    runs: list[Run] = []
    env = {**os.environ, "SLOW": "3", "SECONDS": str(args.seconds)}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            load = hogs(args.pinned, args.hogs)
            try:
                for name, python in candidates:
                    for mode in modes:
                        cap, truth = Path(tmp, "run.lead"), Path(tmp, "truth.json")
                        cmd = [python, "-m", "leadline", "run", "-q", "--mode", mode]
                        cmd += ["--rate", str(args.rate), "-o", str(cap), str(WORKLOAD), str(truth)]
                        if args.pinned:
                            cmd = ["taskset", "-c", "0", *cmd]
                        subprocess.run(cmd, env=env, check=True, capture_output=True)
                        t, fair, weighted, reads, ticks, deferred = measure(cap, truth, mode)
                        runs.append(Run(name, mode, rnd, t, fair, weighted, reads, ticks, deferred))
                        print(
                            f"round {rnd + 1} {name} {mode}: truth {t:.1f}, fair {fair:.1f} "
                            f"({reads} reads), weighted {weighted:.1f}",
                            flush=True,
                        )
            finally:
                for h in load:
                    h.kill()
                    h.wait()
    m["load_after"] = os.getloadavg()[0]
    rows = []
    for name, _python in candidates:
        for mode in modes:
            mine = [r for r in runs if r.candidate == name and r.mode == mode]
            errors = [r.fair - r.truth for r in mine]
            werrors = [r.weighted - r.truth for r in mine]
            rows.append(
                [
                    name,
                    mode,
                    str(len(mine)),
                    f"{statistics.mean(errors):+.2f} ({_sd(errors):.2f})",
                    f"{statistics.mean(werrors):+.2f} ({_sd(werrors):.2f})",
                    f"{max(werrors, key=abs):+.1f}",
                    f"{statistics.mean(r.reads for r in mine):.0f}",
                    f"{statistics.mean(r.deferred / max(r.ticks, 1) for r in mine):.0%}",
                ]
            )
    headers = ["candidate", "mode", "runs", "fair error (sd)", "weighted error (sd)",
               "worst weighted", "fair reads", "deferred"]  # fmt: skip
    table = markdown_table(headers, rows)
    print(table)
    stamp = time.strftime("%Y-%m-%d")
    out = HERE / "results" / f"{args.name}-{stamp}"
    where = "one hog, the program and its sampler on CPU 0" if args.pinned else (
        f"{args.hogs} hogs on {m['nproc']} CPUs"
    )  # fmt: skip
    text = (
        f"# Benchmark {args.name}\n\n- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        f"\n- machine: {cpus_and_load(m)}\n- load: {where}\n- program: "
        f"bench/workloads/alternating.py, SLOW=3, {args.seconds:g} s, `--rate {args.rate:g}`\n"
        f"- rounds: {args.rounds}, candidates in turn within each\n\n"
        "Errors are slow_part's share of the two functions less the program's own figure, in "
        "points: mean over the runs (standard deviation).\n\n" + table + "\n"
    )
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(
        json.dumps({"machine": m, "args": vars(args), "runs": [asdict(r) for r in runs]}, indent=1)
    )
    print(f"wrote {out}.md")


if __name__ == "__main__":
    main()
