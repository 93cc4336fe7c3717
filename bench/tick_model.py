"""A model of one CPU shared by a program and a CPU hog, sampled by a thread whose ticks take the
CPU: why the sampler's ticks are a Poisson process (exponential intervals), not a period with
a little jitter.

The program alternates a 3 ms function and a 1 ms one, with a system call between them (it
reads its CPU clock there, as support.ALTERNATING does).  The scheduler gives each thread a
turn of SLICE ms of CPU, but notices that a turn is over only at a timer tick (every 4 ms), at
a system call of the program, or when the sampler wakes (it takes the CPU from whichever thread
runs; after it, the thread that has had less CPU runs).  Each tick at which the program is
running reads where it is: a fair sample.  The program's share of CPU in the long function is
75%; with ticks spread uniformly over [0.75, 1.25] x the period, the fair samples put it at
77-83% (the turns start at the ticks and at the program's system calls, so the next tick comes
at about the same point of a turn); with exponential intervals, at 74.6-75.1%.

    python bench/tick_model.py              # every slice, both interval laws, three seeds
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

LOOP_MS = 4.0  # the program's loop: LONG_MS in one function, the rest in the other
LONG_MS = 3.0
TIMER_TICK_MS = 4.0  # the kernel's tick (HZ=250)
SAMPLER_MS = 0.04  # what a tick of the sampler takes


@dataclass
class Result:
    read_pct: float  # the long function's share of the fair samples
    cpu_pct: float  # its share of the program's CPU time
    samples: int


def _in_long(pos: float) -> bool:
    return pos % LOOP_MS < LONG_MS


def _to_syscall(pos: float) -> float:
    """CPU time from `pos` to the program's next system call."""
    q = pos % LOOP_MS
    left = (LONG_MS - q) if q < LONG_MS else (LOOP_MS - q)
    return left if left > 1e-9 else (LOOP_MS - LONG_MS if q < 1e-9 else LOOP_MS)


def simulate(law: str, slice_ms: float, period_ms: float = 2.0, length_ms: float = 200_000.0,
             seed: int = 1) -> Result:  # fmt: skip
    rnd = random.Random(seed)
    t = pos = turn = 0.0
    used = {"program": 0.0, "hog": 0.0}  # CPU each has had
    running = "program"
    wake = rnd.uniform(0, period_ms)
    timer = TIMER_TICK_MS
    reads = {True: 0, False: 0}
    cpu = {True: 0.0, False: 0.0}

    def other() -> str:
        return "hog" if running == "program" else "program"

    def switch_if_over() -> None:
        nonlocal running, turn
        if turn >= slice_ms and used[other()] < used[running]:
            running, turn = other(), 0.0

    while t < length_ms:
        event = min(wake, timer)
        if running == "program" and t + _to_syscall(pos) < event:
            step = _to_syscall(pos)  # the program reaches a system call first
            cpu[_in_long(pos)] += step
            pos = round(pos + step, 9)
            t += step
            turn += step
            used["program"] += step
            switch_if_over()
            continue
        step = event - t
        if running == "program":
            cpu[_in_long(pos)] += step
            pos += step
        used[running] += step
        turn += step
        t = event
        if event == timer:
            timer += TIMER_TICK_MS
            switch_if_over()
            continue
        if running == "program":  # the sampler takes the CPU from a running program: fair
            reads[_in_long(pos)] += 1
        t += SAMPLER_MS
        gap = (
            rnd.uniform(0.75, 1.25) * period_ms
            if law == "uniform"
            else rnd.expovariate(1 / period_ms)
        )
        wake = max(event + gap, t)
        switch_if_over()
    n = reads[True] + reads[False]
    return Result(100 * reads[True] / n, 100 * cpu[True] / (cpu[True] + cpu[False]), n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--length-ms", type=float, default=200_000.0)
    args = ap.parse_args()
    for slice_ms in (0.7, 1.4, 3.0):
        for law in ("uniform", "exponential"):
            runs = [simulate(law, slice_ms, length_ms=args.length_ms, seed=s)
                    for s in range(args.seeds)]  # fmt: skip
            reads = ", ".join(f"{r.read_pct:.1f}" for r in runs)
            cpu = f"{runs[0].cpu_pct:.1f}% of the CPU ({runs[0].samples} samples)"
            print(f"turn {slice_ms} ms, {law:11} intervals: long function {reads}% of the fair "
                  f"samples; {cpu}")  # fmt: skip


if __name__ == "__main__":
    main()
