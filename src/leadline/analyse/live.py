"""What `leadline top` shows: the samples of a live capture, folded period by period, as each
function's own and total share over a sliding window and since the start, per thread or for all.

The sampler writes its capture into a pipe (as the fleet agent's does); each refresh, the
samples that arrived are folded into a :class:`Period` (per thread, per function: own and total
samples, for the CPU view (samples in which the thread ran) and the wall view (every sample)),
and :class:`LiveTally` keeps the periods of the window and the sums since the start.  A
:class:`TopView` is one screen of it, which ``render/top.py`` draws.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from .model import SampleProfile, Stack
from .samples import FuncKey, function_rows, selected

VIEWS = ("cpu", "wall")  # cpu: samples in which the thread ran; wall: every sample
SORTS = ("own", "total", "own-all", "total-all")  # window own/total, then since the start
ALL_THREADS = 0  # the thread "serial" that stands for every thread


@dataclass
class Tally:
    """Own and total samples per function, and the samples they are shares of."""

    samples: int = 0
    own: dict[FuncKey, int] = field(default_factory=dict)
    total: dict[FuncKey, int] = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        self.samples += other.samples
        for k, v in other.own.items():
            self.own[k] = self.own.get(k, 0) + v
        for k, v in other.total.items():
            self.total[k] = self.total.get(k, 0) + v


# A period's tallies by (view, thread serial); ALL_THREADS sums the threads.
Period = dict[tuple[str, int], Tally]


def fold_period(p: SampleProfile) -> Period:
    """One period's samples as tallies per view and thread, and for all threads."""
    out: Period = {}
    for view in VIEWS:
        everything = out.setdefault((view, ALL_THREADS), Tally())
        weighted = selected(p, view == "wall", "samples")
        by_thread: dict[int, list[tuple[Stack, int]]] = {}
        for s, w in weighted:
            by_thread.setdefault(s.thread, []).append((s, w))
        for serial, pairs in by_thread.items():
            t = Tally(samples=sum(w for _, w in pairs))
            for row in function_rows(p, pairs):
                key = (row.name, row.file, row.line)
                if row.self:
                    t.own[key] = row.self
                t.total[key] = row.total
            out[(view, serial)] = t
            everything.add(t)
    return out


@dataclass(frozen=True)
class TopRow:
    name: str
    file: str
    line: int
    own: float  # share of the window's samples, 0-1
    total: float
    own_all: float  # share of all samples since the start
    total_all: float
    own_s: float  # seconds of samples since the start (samples / rate)
    total_s: float


@dataclass(frozen=True)
class TopView:
    """One screen of `top`: what is shown, and the rows in order."""

    pid: int
    argv: list[str]
    python: str
    elapsed_s: float
    rate_hz: float
    window_s: float
    view: str
    sort: str
    thread: str  # "all threads" or the thread's name and id
    samples_window: int
    samples_all: int
    threads: int
    paused: bool
    ended: str | None  # why sampling ended ("process 123 exited"), None while it runs
    rows: list[TopRow]
    cwd: str | None = None  # the folder the program runs in (its files are shown relative)


class LiveTally:
    """The periods of a live capture: the last `window_s` seconds of them, and their sums
    since the start."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.periods: collections.deque[tuple[float, Period]] = collections.deque()
        self.since_start: Period = {}
        self.thread_names: dict[int, str] = {}

    def add(self, t: float, period: Period, threads: dict[int, str] | None = None) -> None:
        """The period that ended at time `t` (seconds, any clock that `rows` is given too)."""
        self.periods.append((t, period))
        for key, tally in period.items():
            self.since_start.setdefault(key, Tally()).add(tally)
        if threads:
            self.thread_names.update(threads)

    def window(self, now: float, view: str, thread: int) -> Tally:
        while self.periods and self.periods[0][0] <= now - self.window_s:
            self.periods.popleft()
        out = Tally()
        for _, period in self.periods:
            tally = period.get((view, thread))
            if tally is not None:
                out.add(tally)
        return out

    def thread_serials(self) -> list[int]:
        """The threads seen so far, in the order the capture numbered them."""
        return sorted({serial for (_, serial) in self.since_start if serial != ALL_THREADS})

    def rows(
        self, now: float, view: str, thread: int, sort: str, rate_hz: float
    ) -> tuple[list[TopRow], int, int]:
        """The functions of the window or seen since the start, sorted by `sort`; and the
        samples of the window and since the start."""
        win = self.window(now, view, thread)
        every = self.since_start.get((view, thread)) or Tally()
        nw = max(win.samples, 1)
        na = max(every.samples, 1)
        rows = []
        for key, total_all in every.total.items():
            name, file, line = key
            own_all = every.own.get(key, 0)
            rows.append(
                TopRow(
                    name,
                    file,
                    line,
                    own=win.own.get(key, 0) / nw,
                    total=win.total.get(key, 0) / nw,
                    own_all=own_all / na,
                    total_all=total_all / na,
                    own_s=own_all / rate_hz,
                    total_s=total_all / rate_hz,
                )
            )
        rows.sort(key=lambda r: _sort_key(r, sort))
        return rows, win.samples, every.samples


def _sort_key(r: TopRow, sort: str) -> tuple[float | str | int, ...]:
    """Largest first by the sort's share, then its other shares; ties by name and place."""
    window, start = (r.own, r.total), (r.own_all, r.total_all)
    if sort.startswith("total"):
        window, start = window[::-1], start[::-1]
    shares = (*start, *window) if sort.endswith("-all") else (*window, *start)
    return (*(-x for x in shares), r.name, r.file, r.line)
