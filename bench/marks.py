"""`leadline.mark()` per call, in ns: disabled (nothing records) and enabled (a capture records
every mark), against `logging.debug` with DEBUG disabled and a call of a no-op Python function.

Each case is timed with `timeit` in a fresh child process (`--python` picks the interpreter),
rounds interleaved (A B C D ... A B C D ...); the table gives the median ns per call, and the
same minus the cost of the timing loop itself (an empty `pass` statement timed the same way).

    python bench/marks.py [--python PATH] [--rounds 7] [--number 2000000] [--name marks]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

SETUP = """
import logging, os, tempfile
import leadline
from leadline import _native
log = logging.getLogger("bench")
log.setLevel(logging.WARNING)
def noop(*args, **kwargs):
    pass
k = 42
"""

ENABLE = """
fd, path = tempfile.mkstemp(suffix=".lead")
journal = _native.Journal(fd, b'{"format": 1, "mode": "probe"}')
"""

CASES = {
    "loop (pass)": ("pass", ""),
    "mark disabled": ('leadline.mark("cache.miss")', ""),
    "mark disabled, 1 field": ('leadline.mark("cache.miss", key=k)', ""),
    "logging.debug disabled": ('log.debug("cache miss %s", k)', ""),
    "no-op function": ('noop("cache.miss", key=k)', ""),
    "mark enabled, 1 field": ('leadline.mark("cache.miss", key=k)', ENABLE),
}


def time_case(python: str, stmt: str, extra: str, number: int) -> float:
    code = (
        "import timeit\n"
        f"setup = {SETUP + extra!r}\n"
        f"t = timeit.timeit({stmt!r}, setup=setup, number={number})\n"
        f"print(t / {number} * 1e9)\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=2_000_000)
    ap.add_argument("--name", default="marks")
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()
    version = subprocess.run(
        [a.python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(a.rounds):
        for name, (stmt, extra) in CASES.items():
            times[name].append(time_case(a.python, stmt, extra, a.number))
    loop = statistics.median(times["loop (pass)"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append(
            {
                "case": name,
                "ns_per_call": med,
                "ns_net": med - loop,
                "min": min(ts),
                "max": max(ts),
                "runs": ts,
            }
        )
    lines = [
        f"# leadline.mark() per call, Python {version}",
        "",
        f"{a.rounds} rounds of {a.number:,} calls each, interleaved; median ns per call; "
        "'net' subtracts the empty loop.",
        "",
        "| case | ns/call | net ns/call | min-max |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['ns_per_call']:.1f} | {r['ns_net']:.1f} | "
            f"{r['min']:.1f}-{r['max']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_save:
        RESULTS.mkdir(exist_ok=True)
        minor = ".".join(version.split(".")[:2])
        stem = f"{a.name}-py{minor}-{datetime.date.today().isoformat()}"
        (RESULTS / f"{stem}.md").write_text(text)
        doc = {"python_version": version, "rounds": a.rounds, "number": a.number, "rows": rows}
        (RESULTS / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
