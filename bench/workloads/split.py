"""Accuracy workload: CPU time split between three functions in a known proportion.

``heavy``, ``medium`` and ``light`` get 50%, 30% and 20% of the work.  The work comes in small
units of 50 to 200 µs each (sizes drawn at random), and the units of all three functions run in
one shuffled order, so a sampler ticking at any fixed rate cannot fall in step with them.  The
three functions have the same body, so a unit's time follows from its size alone.

Usage::

    python bench/workloads/split.py [--seconds S] [--seed N] [--truth FILE]

``--seconds`` (default: the ``SPLIT_SECONDS`` environment variable, else 10) is how much work to
plan, converted to loop iterations by a 50 ms calibration: the run takes about that long, as
well as a short calibration on a busy machine can tell.  ``--truth`` (default: the
``SPLIT_TRUTH`` environment variable, else standard error) is where the measured truth goes, as
one JSON object::

    {"seconds": 10.0, "seed": 1, "units": 80123, "file": ".../split.py",
     "thread_cpu_ns": 10012345678,   # the main thread's CPU time from start to end
     "functions": {"heavy": {"target_pct": 50, "calls": 40000, "cpu_ns": 5003456789,
                             "share_pct": 49.98,       # of the three functions' CPU time
                             "of_thread_pct": 49.95},  # of the thread's CPU time
                   "medium": {...}, "light": {...}}}

The truth is each function's CPU time measured with ``time.thread_time_ns()`` around each of its
calls.  The plan is deterministic for given ``--seconds`` and ``--seed``: the same units in the
same order, splitting the loop iterations exactly 50/30/20 (only the iterations per microsecond
come from the calibration), so the measured shares stay within a few tenths of a point of
50/30/20 from run to run.  The program never blocks: wall-clock and CPU sampling see the same.

A profiler's share of a function is binomial: from N samples its standard error is
``sqrt(p * (1 - p) / N)``, 0.5 points for p = 0.5 at N = 10,000 (10 s at 1 kHz) and 1.1 points
at N = 2,000.  Give a check of "within 2 points" at least 10,000 samples.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

TARGETS = {"heavy": 50, "medium": 30, "light": 20}  # percent of the work
UNIT_US = (50.0, 200.0)  # a unit's planned duration, drawn uniformly


# The three measured functions have the same body on purpose: a unit's time then depends on
# its size only, and a profiler sees three distinct functions with no callees (self = total).


def heavy(n: int) -> int:
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFF
    return acc


def medium(n: int) -> int:
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFF
    return acc


def light(n: int) -> int:
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFF
    return acc


def calibrate(n: int) -> int:
    """The same loop, to measure its speed outside the three measured functions."""
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFF
    return acc


FUNCTIONS = {"heavy": heavy, "medium": medium, "light": light}


def iterations_per_us(min_ns: int = 50_000_000) -> float:
    clock = time.thread_time_ns
    n, spent = 0, 0
    while spent < min_ns:
        start = clock()
        calibrate(20_000)
        spent += clock() - start
        n += 20_000
    return n / (spent / 1000)


def plan(seconds: float, seed: int) -> list[tuple[str, float]]:
    """(function, planned microseconds) of every unit, in the order they run."""
    rng = random.Random(seed)
    units: list[tuple[str, float]] = []
    for name, pct in TARGETS.items():
        left = seconds * 1e6 * pct / 100
        while left > 0:
            size = min(left, rng.uniform(*UNIT_US))
            units.append((name, size))
            left -= size
    rng.shuffle(units)
    return units


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=float(os.environ.get("SPLIT_SECONDS", "10")),
        help="work to plan, in seconds (default: $SPLIT_SECONDS, else 10)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--truth",
        type=Path,
        default=os.environ.get("SPLIT_TRUTH") or None,
        help="file for the truth JSON (default: $SPLIT_TRUTH, else standard error)",
    )
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be positive")

    clock = time.thread_time_ns
    thread_start = clock()
    speed = iterations_per_us()
    units = [
        (FUNCTIONS[name], name, max(1, round(us * speed)))
        for name, us in plan(args.seconds, args.seed)
    ]
    spent = dict.fromkeys(TARGETS, 0)
    calls = dict.fromkeys(TARGETS, 0)
    for fn, name, n in units:
        start = clock()
        fn(n)
        spent[name] += clock() - start
        calls[name] += 1
    thread_cpu = clock() - thread_start

    measured = sum(spent.values())
    truth = {
        "seconds": args.seconds,
        "seed": args.seed,
        "units": len(units),
        "file": str(Path(__file__).resolve()),
        "thread_cpu_ns": thread_cpu,
        "functions": {
            name: {
                "target_pct": TARGETS[name],
                "calls": calls[name],
                "cpu_ns": spent[name],
                "share_pct": round(100 * spent[name] / measured, 3),
                "of_thread_pct": round(100 * spent[name] / thread_cpu, 3),
            }
            for name in TARGETS
        },
    }
    text = json.dumps(truth)
    if args.truth is not None:
        Path(args.truth).write_text(text + "\n")
    else:
        print(text, file=sys.stderr)
    shares = ", ".join(f"{n} {f['share_pct']:.2f}%" for n, f in truth["functions"].items())
    print(f"split.py: {len(units)} units, {thread_cpu / 1e9:.2f} s of CPU: {shares}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
