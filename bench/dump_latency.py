"""How long `leadline dump PID` takes on the programs it is for (docs/dump.md): one blocked in C,
one whose thread holds the GIL in a C loop for ever (a regular expression that backtracks), one
deadlocked on two locks, and a C extension of its own holding the GIL; each plain, with
`--locals` and with `--native`.  The programs are the test suite's (tests/test_dump.py), so the
stacks these timings are of are the ones the tests check.

    python bench/dump_latency.py [--rounds N]

Each dump is a fresh `leadline dump` process (its start-up and imports included, as a user
waits for it), its wall time and its CPU time (user and system) measured; the cases take turns,
round after round.  Writes
bench/results/dump-latency-py<X.Y>-<date>.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, cpus_and_load, machine, markdown_table, ready_programs, write_result

sys.path.insert(0, str(REPO / "tests"))
import test_dump  # the programs the tests dump

PROGRAMS = {
    "blocked in C": (test_dump.BLOCKED, 0.0),
    "GIL held in a C loop": (test_dump.GIL_FOREVER, 0.5),
    "two-lock deadlock": (test_dump.DEADLOCK, 0.2),
    "C extension holding the GIL": (test_dump.SPINNING, 0.3),
}
VARIANTS = {"plain": [], "--locals": ["--locals"], "--native": ["--native"]}
LIMIT_S = 1.0  # what issue 17 asks of dump on these programs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    m = machine()
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="dump-latency-") as tmp:
        work = Path(tmp)
        test_dump.build_spinmod(work)
        with ready_programs(work, {n: src for n, (src, _) in PROGRAMS.items()}) as procs:
            time.sleep(max(settle for _, settle in PROGRAMS.values()))
            for _ in range(args.rounds):
                for name, p in procs.items():
                    for variant, extra in VARIANTS.items():
                        cmd = [sys.executable, "-m", "leadline", "dump", str(p.pid), *extra]
                        before = resource.getrusage(resource.RUSAGE_CHILDREN)
                        t = time.perf_counter()
                        r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
                        took = time.perf_counter() - t
                        after = resource.getrusage(resource.RUSAGE_CHILDREN)
                        used = (after.ru_utime + after.ru_stime) - (
                            before.ru_utime + before.ru_stime
                        )
                        cpu.setdefault((name, variant), []).append(used)
                        if r.returncode != 0:
                            print(f"{name} {variant}: {r.stderr.strip()}", file=sys.stderr)
                            return 1
                        times.setdefault((name, variant), []).append(took)
    m["load_after"] = os.getloadavg()[0]
    rows = []
    for key, ts in times.items():
        c = statistics.median(cpu[key])
        rows.append([*key, f"{statistics.median(ts):.3f}", f"{max(ts):.3f}", f"{c:.3f}"])
    worst = max(max(ts) for ts in times.values())
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    lines = [
        f"# `leadline dump` latency: Python {version}",
        "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- machine: {cpus_and_load(m)}",
        f"- rounds: {args.rounds}; each dump a fresh process, its wall time (start-up included)",
        f"- command: `python bench/dump_latency.py --rounds {args.rounds}`",
        "",
        markdown_table(["program", "dump", "median s", "max s", "median CPU s"], rows),
        "",
        f"Slowest of all: {worst:.3f} s ({'within' if worst <= LIMIT_S else 'beyond'} "
        f"{LIMIT_S:g} s).",
    ]
    write_result("dump-latency", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
