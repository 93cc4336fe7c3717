"""The sampling profile: what every sampling report and exporter works from.

A sampling capture (``leadline run``, ``leadline attach``, ``leadline.profile()``) is folded by
``sampling.load_profile`` into a :class:`SampleProfile`: distinct stacks, each with how many
samples landed on it and what they weighed.  Renderers and exporters (text table, HTML flame
graph, pprof, speedscope, collapsed stacks) take this model and nothing else, so they can be
tested on profiles built by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..capture.reader import Definitions

Metric = Literal["samples", "cpu", "memory"]
METRICS: tuple[Metric, ...] = ("samples", "cpu", "memory")


@dataclass(frozen=True)
class Frame:
    """One frame of a stack: a Python function and the line it was executing."""

    name: str  # qualified name (bare name on 3.10)
    file: str  # the code object's file name, as the program saw it
    line: int  # the line being executed in this frame (0 if unknown)
    func_line: int  # the function's first line (its `def`)
    native: bool = False  # a C function (`attach --native`, `dump --native`): file is its module

    @property
    def label(self) -> str:
        """`name (file:line)`, the way the tables print a frame."""
        return f"{self.name} ({self.file}:{self.line})"


@dataclass(frozen=True)
class Thread:
    serial: int  # the capture's id of the thread
    pid: int
    tid: int  # the kernel's thread id (0 if unknown)
    name: str


@dataclass
class Stack:
    """A distinct (thread, stack) with its weights.  `frames` are indexes into
    `SampleProfile.frames`, outermost first: a tuple, or (from a capture) a view of a node of
    the profile's stack tree that reads the frames when asked, so that the distinct stacks of a
    deep recursion do not each hold a copy of every frame above them."""

    frames: Sequence[int]
    thread: int  # Thread.serial
    # The weights by name only: given by position, a field added among them shifts every
    # caller's weights into the wrong fields (the fleet agent once pushed no CPU time so).
    _: KW_ONLY
    samples: int = 0  # samples that saw this stack
    idle: int = 0  # of which the thread was idle (wall mode: off CPU)
    # Of those records, the stack reads (the rest are weight given to them: SAMPLE_GIVEN), and
    # the reads that found the thread idle: the evidence behind the weights.
    reads: int = 0
    idle_reads: int = 0
    cpu_ns: int = 0  # CPU time the thread used, attributed to this stack
    cpu_sq: float = 0.0  # the sum of each of those samples' CPU time squared (its spread)
    # The sum over its reads of the records each stands for, squared (a read and the records
    # given to it at the same tick: SAMPLE_GIVEN), and of them the idle reads': the spread of
    # its sample count, as cpu_sq is of its CPU time.
    samples_sq: float = 0.0
    idle_sq: float = 0.0
    rss_bytes: int = 0  # RSS change attributed to this stack (--memory); may be negative
    # Of its reads, those that found the thread holding the GIL, waiting for it, or neither
    # (format 1.3; reads that cannot tell count in none of them).
    gil_held: int = 0
    gil_wait: int = 0
    gil_none: int = 0

    def weight(self, metric: Metric) -> int:
        if metric == "samples":
            return self.samples
        if metric == "cpu":
            return self.cpu_ns
        return self.rss_bytes


# The unit of a spread pushed to a fleet (pprof's cpu_spread), a square microsecond, in square
# nanoseconds: a fleet's merged sums stay far inside an int64.
SPREAD_UNIT = 1e6


def row_spread(s: Stack, w: float, squares: float, idle: bool) -> float:
    """How much the weight `w` of a distinct stack's samples varies, as the sum of the squared
    weights of the reads it came from.  The records' own squares (`squares`) count too little
    when some records are no reads but weight given to earlier ones (SAMPLE_GIVEN: a late tick
    or reads that could not stand for where the thread was, spread over its fair samples): in
    a 0.4 s run with most reads deferred, one stack's 58 records held 15.6 ms from a few reads,
    not 58.  A sample count's squares are its reads' (`Stack.samples_sq`: the records given
    to a read follow it at its tick); the CPU time a read was given is in its own record, but
    weight given at another tick (what a thread's pool held when it ended) is no read's, and
    as equal parts of `w` the reads vary least, so that is the bound taken with the squares.
    `idle`: the reads that found the thread idle count (wall mode with idle samples)."""
    reads = s.reads if idle else s.reads - s.idle_reads
    return max(squares, w * w / reads) if reads > 0 else w * w


TimelineSample = tuple[int, int, int, int, int]


@dataclass
class SampleProfile:
    mode: str  # "wall", "cpu" or "gil" (wall mode, only samples holding the GIL)
    rate_hz: float
    duration_ns: int
    start_unix_ns: int
    samples: int  # sample records (one per thread per tick due in wall mode)
    ticks: int  # sampling ticks taken
    missed: int  # ticks skipped because the sampler was late
    torn: int  # thread samples dropped because the stack changed while it was read
    memory: bool  # RSS per sample was recorded
    frames: list[Frame]
    threads: list[Thread]
    stacks: list[Stack]
    meta: dict[str, Any] = field(default_factory=dict)  # the capture's META (argv, python...)
    complete: bool = True  # the capture was stopped cleanly
    deferred: int = 0  # thread samples that could not stand for where its time went (late, or
    # the thread stopped by the scheduler): their weight went to the thread's next fair samples
    held: int = 0  # ticks at which the sampler was held up (waited for a CPU): not on time
    exited_ns: int | None = None  # attach: when the process was found gone, from the start
    samples_lost: int = 0  # samples taken that never reached the file (END's samples_lost)
    stopped_early: dict[str, Any] | None = None  # capture.stop.for_report
    # Every read's GIL state by thread serial, deferred reads included: (held, waiting,
    # neither), from END (format 1.3); empty when the capture does not say.
    gil_reads: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    # Each thread's reads over time (samples.LANE_BINS equal spans of the run), by state:
    # LANE_STATES counts a span; empty when no read's GIL state is known.
    lanes: dict[int, list[int]] = field(default_factory=dict)
    # The capture it was read from (its marks are reported with it); None when built otherwise.
    capture: Definitions | None = field(default=None, repr=False, compare=False)
    # Every sample kept, in the capture's order, when asked for (load_profile(timeline=True)):
    # (clock ticks, thread serial, stack tree node, flags, CPU ns); None otherwise.
    timeline: list[TimelineSample] | None = field(default=None, repr=False, compare=False)

    def thread(self, serial: int) -> Thread:
        for t in self.threads:
            if t.serial == serial:
                return t
        return Thread(serial, 0, 0, f"thread-{serial}")

    def total(self, metric: Metric) -> int:
        return sum(s.weight(metric) for s in self.stacks)
