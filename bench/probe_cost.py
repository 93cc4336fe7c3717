"""What a `leadline probe` costs per execution, measured inside the program so that neither the
command's start-up nor the host's slow spells between runs blur it.

A child program calls a small function N times and times the loop itself (CPU time, then ns per
call).  It runs alone, under `leadline probe` with a probe on a line of another function that
never runs (what unprobed code pays), with a probe on the called function's hot line (every
call counts once), and with a probe on its entry (`module:qualname`).  Rounds are interleaved;
the table gives the median ns per call and the extra ns per call against the program alone.

    python bench/probe_cost.py [--python PATH] [--rounds 7] [--calls 2000000] [--name probe-cost]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

PROGRAM = textwrap.dedent(
    """\
    import sys, time


    def never(x):
        return x * 2  # line 5: probed in the "unprobed code" case; never runs


    def f(x):
        y = x + 1  # line 9: the hot line
        return y


    def main(n):
        t = time.process_time()
        for i in range(n):
            f(i)
        print((time.process_time() - t) / n * 1e9)


    main(int(sys.argv[1]))
    """
)

CASES = {
    "alone": None,
    "probe elsewhere": "other=work.py:5",
    "probe hot line": "hot=work.py:9",
    "probe entry": "calls=__main__:f",
}


def run_case(python: str, work: Path, spec: str | None, calls: int) -> float:
    head = [python] if spec is None else [python, "-m", "leadline", "probe", "-q", "--count", spec]
    out = subprocess.run(
        [*head, "work.py", str(calls)], cwd=work, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2_000_000)
    ap.add_argument("--name", default="probe-cost")
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()
    version = subprocess.run(
        [a.python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory(prefix="leadline-probe-cost-") as tmp:
        work = Path(tmp)
        (work / "work.py").write_text(PROGRAM)
        for _ in range(a.rounds):
            for name, spec in CASES.items():
                times[name].append(run_case(a.python, work, spec, a.calls))
    alone = statistics.median(times["alone"])
    rows = [
        {
            "case": name,
            "probe": CASES[name],
            "ns_per_call": statistics.median(ts),
            "extra_ns": statistics.median(ts) - alone,
            "min": min(ts),
            "max": max(ts),
            "runs": ts,
        }
        for name, ts in times.items()
    ]
    lines = [
        f"# leadline probe per call, Python {version}",
        "",
        f"{a.rounds} interleaved rounds; each run times {a.calls:,} calls of a two-line "
        "function inside the program (CPU time), so start-up is not in the figure.",
        "",
        "| case | probe | ns/call | extra ns/call | min-max |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['probe'] or '-'} | {r['ns_per_call']:.1f} | "
            f"{r['extra_ns']:+.1f} | {r['min']:.1f}-{r['max']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_save:
        RESULTS.mkdir(exist_ok=True)
        minor = ".".join(version.split(".")[:2])
        stem = f"{a.name}-py{minor}-{datetime.date.today().isoformat()}"
        (RESULTS / f"{stem}.md").write_text(text)
        doc = {"python_version": version, "rounds": a.rounds, "calls": a.calls, "rows": rows}
        (RESULTS / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
