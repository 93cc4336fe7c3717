"""The pytest plugin's cost on a real suite of short tests: more-itertools 10.5.0's own tests
(664, from its sdist on PyPI), plain `pytest` against `pytest --leadline-baseline DIR` comparing
with baselines stored beforehand (two runs: calls first, then the long tests' samples).

Rounds interleaved (plain, plugin, plain, plugin ...); the table gives the median wall-clock and
CPU time (user + system of the pytest process and its children) of each, and the median of the
per-round ratios, plugin over plain.

    python bench/pytest_plugin.py [--rounds 7] [--name pytest-plugin]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SUITE = "more-itertools==10.5.0"
SUMMARY = re.compile(r"leadline: (\d+) tests compared with their baseline \((\d+) regressed")


def fetch(work: Path) -> Path:
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", "--no-binary", ":all:", "-d", str(work), SUITE], check=True)
    with tarfile.open(next(work.glob("more*itertools-10.5.0.tar.gz"))) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(work, filter="data")
        else:
            tar.extractall(work)
    return work / "more-itertools-10.5.0"


def timed(argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall-clock and CPU seconds of one run, and its output."""
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout[-2000:]}")
    return wall, cpu, r.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--name", default="pytest-plugin")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        src = fetch(work)
        plain = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
        plugin = [*plain, "--leadline-baseline", str(work / "base")]
        for _ in range(2):  # the baselines: calls, then the long tests' samples
            timed(plugin, src)
        rows: dict[str, list[tuple[float, float]]] = {"plain": [], "plugin": []}
        compared = []
        for _ in range(args.rounds):
            for kind, argv in (("plain", plain), ("plugin", plugin)):
                wall, cpu, out = timed(argv, src)
                rows[kind].append((wall, cpu))
                m = SUMMARY.search(out)
                if m:
                    compared.append((int(m[1]), int(m[2])))
    ratio_wall = [p[0] / b[0] for p, b in zip(rows["plugin"], rows["plain"], strict=True)]
    ratio_cpu = [p[1] / b[1] for p, b in zip(rows["plugin"], rows["plain"], strict=True)]
    result = {
        "suite": SUITE,
        "python": sys.version.split()[0],
        "rounds": args.rounds,
        "date": datetime.date.today().isoformat(),
        "load": os.getloadavg(),
        "median": {
            kind: {
                "wall_s": statistics.median(w for w, _ in runs),
                "cpu_s": statistics.median(c for _, c in runs),
            }
            for kind, runs in rows.items()
        },
        "ratio": {"wall": statistics.median(ratio_wall), "cpu": statistics.median(ratio_cpu)},
        "compared": [c for c, _ in compared],
        "regressed": [r for _, r in compared],
    }
    med = result["median"]
    table = "\n".join(
        [
            f"# The pytest plugin on {SUITE}'s suite, Python {result['python']}",
            "",
            f"{args.rounds} rounds, interleaved; load average at the end {result['load'][0]:.2f}.",
            "",
            "| | wall (median) | CPU (median) |",
            "|---|---|---|",
            f"| plain pytest | {med['plain']['wall_s']:.2f} s | {med['plain']['cpu_s']:.2f} s |",
            f"| pytest --leadline-baseline | {med['plugin']['wall_s']:.2f} s | "
            f"{med['plugin']['cpu_s']:.2f} s |",
            f"| ratio (median of rounds) | x{result['ratio']['wall']:.2f} | "
            f"x{result['ratio']['cpu']:.2f} |",
            "",
            f"Tests compared per run: {sorted(set(result['compared']))}; "
            f"regressed: {sorted(set(result['regressed']))}.",
            "",
        ]
    )
    stem = f"{args.name}-py{sys.version_info[0]}.{sys.version_info[1]}-{result['date']}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{stem}.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
