"""How fast `leadline report` reads a large capture, and with how much memory.

Traces the call-dense workload (about 78 million events at --scale 1), then runs
`leadline report --json` and `leadline report` (the table) on the capture as subprocesses,
each --rounds times, and reports the median wall time, the peak RSS of the reading process,
and both scaled to 100 million events (the target: at most 60 s and 1 GB).

    python bench/report_speed.py [--scale 1.0] [--rounds 3] [--capture FILE] [--no-save]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_EVENTS = 100_000_000


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one subprocess."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if status != 0:
        raise SystemExit(f"report_speed: {' '.join(cmd)} failed: {stderr.strip()}")
    return wall, usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="calls workload scale")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--capture", type=Path, help="measure this capture instead")
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        cap = args.capture or Path(tmp) / "calls.lead"
        if args.capture is None:
            workload = HERE / "workloads" / "calls.py"
            trace = [py, "-m", "leadline", "trace", "-q", "--max-size", "none"]
            cmd = [*trace, "-o", str(cap), str(workload)]
            subprocess.run(
                [*cmd, "--scale", str(args.scale)], check=True, stdout=subprocess.DEVNULL
            )
        out = subprocess.run(
            [py, "-m", "leadline", "report", str(cap), "--json", "--limit", "1"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        events = int(json.loads(out)["summary"]["recorded"])
        size = cap.stat().st_size
        rows = []
        for label, extra in (("report --json", ["--json"]), ("report (table)", [])):
            walls, rsss = [], []
            for _ in range(args.rounds):
                wall, rss = timed([py, "-m", "leadline", "report", str(cap), *extra])
                walls.append(wall)
                rsss.append(rss)
            wall, rss = statistics.median(walls), max(rsss)
            rows.append((label, wall, rss, wall * TARGET_EVENTS / events))
    lines = [
        "# Report speed",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- python: {platform.python_implementation()} {platform.python_version()}",
        f"- capture: calls workload, {events:,} events, {size / 2**20:.0f} MiB "
        f"({size / events:.1f} bytes/event)",
        f"- rounds: {args.rounds} (median wall time, highest peak RSS)",
        "",
        "| command | wall s | peak RSS MiB | wall s scaled to 100 M events | target |",
        "|---|---|---|---|---|",
    ]
    for label, wall, rss, scaled in rows:
        mib = rss / 2**20
        lines.append(f"| {label} | {wall:.2f} | {mib:.0f} | {scaled:.1f} | <= 60 s, 1 GiB |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_save:
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        name = f"report-speed-py{version}-{time.strftime('%Y-%m-%d')}"
        (HERE / "results" / f"{name}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
