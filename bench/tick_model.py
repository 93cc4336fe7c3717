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
    leadline_pct: float  # its share of the CPU the samples stand for, by leadline's rule
    flat_pct: float  # the same by the flat rule (Weights)


class Weights:
    """What the fair samples stand for in cpu mode: the CPU the program used since the read
    before (a fair read or not), which each tick hands in.

    `leadline`: the sampler's rule (sampler.c, weigh): a fair sample stands for its own CPU and
    a quarter of the pool; an unfair read's CPU goes half to one of the four latest fair
    samples in turn, half to the pool.  A fair sample's own CPU is the time the program ran
    before it without a break, which is longest where the program's turns are long, so the
    rule weighs some places more than others.  `flat`: all the CPU goes to the pool, and each
    fair sample takes the same, the mean a fair sample took lately (over 4), as long as the
    pool holds it: no sample's weight depends on what ran just before it."""

    NEAR = 4
    POOL_SHARE = 4
    MEAN_OVER = 4

    def __init__(self) -> None:
        self.leadline = {True: 0.0, False: 0.0}
        self.flat = {True: 0.0, False: 0.0}
        self._recent: list[bool] = []
        self._paid = 0
        self._pool = 0.0
        self._flat_pool = 0.0
        self._flat_since = 0.0
        self._flat_mean = -1.0

    def fair(self, in_long: bool, cpu: float) -> None:
        share = self._pool / self.POOL_SHARE
        self._pool -= share
        self.leadline[in_long] += cpu + share
        self._recent = [*self._recent[-self.NEAR + 1 :], in_long]
        self._flat_pool += cpu
        self._flat_since += cpu
        m = self._flat_mean
        m = self._flat_since if m < 0 else m + (self._flat_since - m) / self.MEAN_OVER
        self._flat_mean, self._flat_since = m, 0.0
        pay = min(self._flat_pool, m)
        self._flat_pool -= pay
        self.flat[in_long] += pay

    def unfair(self, cpu: float) -> None:
        self._flat_pool += cpu
        self._flat_since += cpu
        if not self._recent:
            self._pool += cpu
            return
        back = cpu / 2
        self.leadline[self._recent[-1 - self._paid % len(self._recent)]] += back
        self._paid += 1
        self._pool += cpu - back

    @staticmethod
    def pct(w: dict[bool, float]) -> float:
        return 100 * w[True] / (w[True] + w[False])


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
    weights = Weights()
    cpu_at_read = 0.0

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
        since = used["program"] - cpu_at_read
        cpu_at_read = used["program"]
        if running == "program":  # the sampler takes the CPU from a running program: fair
            reads[_in_long(pos)] += 1
            weights.fair(_in_long(pos), since)
        else:
            weights.unfair(since)
        t += SAMPLER_MS
        gap = (
            rnd.uniform(0.75, 1.25) * period_ms
            if law == "uniform"
            else rnd.expovariate(1 / period_ms)
        )
        wake = max(event + gap, t)
        switch_if_over()
    n = reads[True] + reads[False]
    return Result(
        100 * reads[True] / n,
        100 * cpu[True] / (cpu[True] + cpu[False]),
        n,
        Weights.pct(weights.leadline),
        Weights.pct(weights.flat),
    )


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
            lead = ", ".join(f"{r.leadline_pct:.1f}" for r in runs)
            flat = ", ".join(f"{r.flat_pct:.1f}" for r in runs)
            print(f"    of the CPU they stand for: {lead}% (leadline's rule), {flat}% (flat)")


if __name__ == "__main__":
    main()
