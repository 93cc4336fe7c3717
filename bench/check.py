"""A regression gate for leadline itself: short interleaved runs, compared with stored figures.

Each check runs a reference and a candidate on the same program, interleaved (R C, R C, ...)
for ``--rounds`` rounds after one untimed warm-up run of each, and takes for each round the
ratio of the candidate's CPU time to the reference's (CPU time is steadier than wall time on a
shared machine; pairing the runs of a round cancels its slow and fast spells):

* ``trace``: ``leadline trace`` recording every event, against the bare empty hook of the same
  kind (``bench/barehook``, the floor of any tracer);
* ``trace-exact``: the same with ``--exact-time`` (each event timed by the CPU's counter);
* ``run-1k``: ``leadline run`` sampling at 1 kHz, against the program alone.

The program is the call-dense workload (pyperformance's richards, deltablue, go and raytrace)
at ``--scale`` (default 0.3: about a second and a half a run on 3.11).

The noise is measured in the same run: the median's confidence interval from the order
statistics of the rounds' ratios (distribution-free: with 9 rounds, from the 2nd to the 8th
smallest, 96% coverage).  A check fails when the whole interval lies above the stored figure
for this Python version, that is when the candidate is worse beyond the noise of this very run.
A check with no stored figure passes and says so.  ``--update`` stores this run's medians.

``--other-build DIR`` also runs each candidate with another build of leadline (``pip install
--no-deps --target DIR .`` of another checkout) in the same rounds, right after this one's, and
says how the two builds' ratios compare, round by round (the other's over this one's, with the
median's interval): two builds judged in one run, under the same noise.

Usage::

    python bench/check.py [--rounds 9] [--scale 0.3] [--only trace,run-1k] [--update]
                          [--figures bench/check-figures.json] [--script PATH]
                          [--other-build DIR]

Exit status 0 when every check holds, 1 when one is worse, 2 when one could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common import (
    BENCH,
    Sizes,
    ensure_requirements,
    make_workloads,
    median,
    median_interval,
    run_once,
)

FIGURES = BENCH / "check-figures.json"


@dataclass(frozen=True)
class Check:
    name: str
    what: str
    reference: tuple[str, ...]  # the command's words before the program and its arguments
    candidate: tuple[str, ...]
    needs: tuple[str, ...] = ()  # what bench/setup_env.py installs for it


def checks(python: str, out: Path) -> dict[str, Check]:
    trace = (python, "-m", "leadline", "trace", "-q", "--max-size", "none", "-o", str(out))
    return {
        c.name: c
        for c in (
            Check(
                "trace",
                "trace (every event) / bare empty hook, CPU",
                (python, str(BENCH / "run_barehook.py"), "--"),
                trace,
                ("barehook",),
            ),
            Check(
                "trace-exact",
                "trace --exact-time (every event, the CPU's counter) / bare empty hook, CPU",
                (python, str(BENCH / "run_barehook.py"), "--"),
                (*trace, "--exact-time"),
                ("barehook",),
            ),
            Check(
                "run-1k",
                "run at 1 kHz / the program alone, CPU",
                (python,),
                (python, "-m", "leadline", "run", "-q", "--rate", "1000", "-o", str(out)),
            ),
        )
    }


@dataclass(frozen=True)
class Verdict:
    name: str
    median: float
    low: float
    high: float
    stored: float | None

    @property
    def worse(self) -> bool:
        """Worse beyond this run's noise: the whole interval above the stored figure."""
        return self.stored is not None and self.low > self.stored

    def line(self) -> str:
        interval = f"{self.median:.3f} (interval {self.low:.3f}-{self.high:.3f})"
        if self.stored is None:
            return f"{self.name}: {interval}; no stored figure for this Python (--update stores it)"
        verdict = "WORSE than" if self.worse else "holds against"
        return f"{self.name}: {interval} {verdict} the stored {self.stored:.3f}"


def judge(name: str, ratios: Sequence[float], stored: float | None) -> Verdict:
    low, high = median_interval(ratios)
    mid = median(ratios)
    assert mid is not None
    return Verdict(name, mid, low, high, stored)


def run_check(
    check: Check, program: list[str], rounds: int, work: Path, other: str | None = None
) -> dict[str, list[float]]:
    """The candidate's CPU time over the reference's, one ratio per round; with `other` (a
    directory holding another build of leadline), also that build's candidate's, as "other"."""
    ratios: dict[str, list[float]] = {"candidate": [], **({"other": []} if other else {})}
    sides: list[tuple[str, tuple[str, ...], dict[str, str] | None]] = [
        ("reference", check.reference, None),
        ("candidate", check.candidate, None),
    ]
    if other:
        path = os.pathsep.join(p for p in (other, os.environ.get("PYTHONPATH")) if p)
        sides.append(("other", check.candidate, {"PYTHONPATH": path}))
    for rnd in range(rounds + 1):
        cpu = {}
        for side, words, env in sides:
            run_dir = work / f"{check.name}-{side}-{rnd}"
            run_dir.mkdir(parents=True, exist_ok=True)
            fin = run_once([*words, *program], run_dir, 600, env=env)
            if fin.code != 0:
                err = (run_dir / "stderr.txt").read_text(errors="replace").strip()
                raise RuntimeError(f"{side} of {check.name} failed: {err[-300:] or fin.code}")
            cpu[side] = fin.cpu
        for side, got in ratios.items():
            if rnd:  # round 0 warms the caches up
                got.append(cpu[side] / cpu["reference"])
        shown = f"{cpu['candidate'] / cpu['reference']:.3f}"
        if other:
            shown += f" (the other build {cpu['other'] / cpu['reference']:.3f})"
        print(f"  {check.name} round {rnd}: {shown}", flush=True)
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--scale", type=float, default=0.3, help="of the call-dense workload")
    parser.add_argument(
        "--workload",
        choices=("calls", "las"),
        default="calls",
        help="the call-dense workload (default; the stored figures are its) or the LAS one (a "
        "memory story: 4 MB of LAS files parsed into an HTML report)",
    )
    parser.add_argument("--only", help="comma-separated checks (default: all)")
    parser.add_argument("--figures", type=Path, default=FIGURES)
    parser.add_argument("--update", action="store_true", help="store this run's medians")
    parser.add_argument("--script", type=Path, help="run this program instead of the workload")
    parser.add_argument(
        "--other-build",
        metavar="DIR",
        help="also run each candidate with the build of leadline in DIR, in the same rounds",
    )
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds must be at least 3")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="leadline-bench-check-") as tmp:
        work = Path(tmp)
        table = checks(python, work / "capture.lead")
        names = args.only.split(",") if args.only else list(table)
        unknown = [n for n in names if n not in table]
        if unknown:
            parser.error(f"unknown check(s): {', '.join(unknown)} (known: {', '.join(table)})")
        if args.script:
            program = [str(args.script.resolve())]
            needs = {n for name in names for n in table[name].needs}
        else:
            workload = make_workloads(python, work, Sizes(args.scale, 4, 6))[args.workload]
            if workload.prepare:
                workload.prepare()
            program = [str(workload.script), *workload.args(work)]
            needs = {n for name in names for n in table[name].needs} | set(workload.needs)
        missing = ensure_requirements(python, sorted(needs), True, "check.py")
        if missing:
            print(f"check.py: cannot run: {', '.join(missing)} not installed", file=sys.stderr)
            return 2
        try:
            stored_all = json.loads(args.figures.read_text()) if args.figures.exists() else {}
        except (OSError, ValueError) as e:
            print(f"check.py: cannot read {args.figures}: {e}", file=sys.stderr)
            return 2
        stored = stored_all.get(version, {})
        other = str(Path(args.other_build).resolve()) if args.other_build else None
        verdicts = []
        builds = []
        for name in names:
            print(f"{name}: {table[name].what}, {args.rounds} rounds", flush=True)
            try:
                ratios = run_check(table[name], program, args.rounds, work, other)
            except RuntimeError as e:
                print(f"check.py: {e}", file=sys.stderr)
                return 2
            # The stored figures are per workload: the call-dense one's under the check's name.
            key = name if args.workload == "calls" else f"{name}-{args.workload}"
            verdicts.append(judge(key, ratios["candidate"], stored.get(key)))
            if other:
                builds.append(judge(f"{key}@other", ratios["other"], stored.get(key)))
                paired = [o / c for o, c in zip(ratios["other"], ratios["candidate"], strict=True)]
                builds.append(judge(f"{key}: the other build / this one", paired, None))
    print(f"Python {version}:")
    for v in verdicts:
        print(f"  {v.line()}")
    for v in builds:
        print(f"  {v.name}: {v.median:.3f} (interval {v.low:.3f}-{v.high:.3f})")
    if args.update:
        stored_all[version] = {**stored, **{v.name: round(v.median, 3) for v in verdicts}}
        args.figures.write_text(json.dumps(stored_all, indent=1, sort_keys=True) + "\n")
        print(f"stored in {args.figures}")
        return 0
    return 1 if any(v.worse for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
