"""``leadline diff BASE NEW``: which function got slower, by how much, and is it beyond noise.

Each input (a sampling or trace capture, a pprof file, collapsed stacks) is read into a
:class:`Side`: its functions and its distinct stacks of functions (outermost first) with a
weight, plus what the noise of those weights is.  Everything after that works on two Sides:

1. **Matching.** Functions are the same function on both sides when their qualified name and
   module-relative file agree (``pkg/mod.py`` wherever the package was installed), so line
   numbers that moved do not matter.  What is left is matched by name and file name, then by
   name alone when that is unique on both sides (a file that moved inside its package).
2. **Normalisation.** By default each side is divided by its own total, so two runs of
   different lengths compare as shares.  With ``per=(N, M)`` each side is divided by the units
   of work it did instead, so costs are per unit (seconds per iteration when the time base is
   known) and a run that did twice the work does not read as a regression.
3. **Noise.** Sampled weights are counts, so their spread is Poisson: a weight of ``k``
   samples has variance ``k`` (times the sample's size in time); as a share of the side's
   ``n`` samples it is binomial, ``k (1 - k/n)``.  A trace knows every call, so
   a function's spread is its calls times the variance of its per-call time.  To these a floor
   is added (``floor`` x the value on each side; for a share, x the smaller of it and the
   rest, so the floor is the same for a share and its complement): identical runs vary beyond
   counting noise (garbage collections fall in other functions, hash randomisation changes
   dict and set work, the host interferes): by up to about 10% of a function's share, and by
   more in cost per unit of work, where the machine's speed does not cancel out (15%).
   A change is *beyond noise* when it is larger than ``sigma`` of those standard deviations
   and than ``min_delta`` of the total.
4. **Ranking.** Growth of exclusive (self) cost beyond noise comes first, largest first: that
   is where the new time is spent.  Functions whose only change is inclusive (their callers)
   follow, then what shrank, then the rest.  The callers of the top regressions show where
   the new calls come from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..capture.foreign import (
    ForeignProfile,
    folded_lines,
    looks_folded,
    read_collapsed,
    read_pprof,
)
from ..capture.reader import MAGIC, Capture
from ..capture.stop import stopped_early
from ..errors import LeadlineError
from ..fleet.pyroscope import (
    FleetQuery,
    companion_type,
    is_fleet_url,
    parse_fleet_url,
    select_merge_profile,
)
from ..render.encode import PprofMetric
from .culprits import STDLIB, Culprit, Folded, find_culprits, fold_recursion, owner_of
from .model import SPREAD_UNIT, Frame, row_spread
from .samples import load_profile, selected
from .stacktree import StackTree, TreePath
from .stats import chi2_ratio, compare_runs, t_threshold
from .trace import Node, analyse, coarse_clock

SCHEMA_VERSION = 1
DEFAULT_SIGMA = 4.0
DEFAULT_FLOOR = 0.10  # shares: a function's share varies this much between identical runs
DEFAULT_PER_FLOOR = 0.15  # cost per unit of work: and the machine's speed varies too
DEFAULT_MIN_DELTA = 0.002  # of the total (share mode) or of the base's total cost per unit
TOP_CALLERS = 3  # regressions whose callers are listed
CALLERS_EACH = 8  # callers listed for each
MAX_TREE_NODES = 200_000
MAX_COUNTS = 10_000_000  # collapsed weights adding up to more are not sample counts
MAX_SAMPLE_PERIODS = 8  # a cpu-mode sample weighs at most this many sampling periods of CPU
RACED_WARNING = 0.25  # a capture with this fraction of raced stack reads is named in a warning
RACED_REFERENCE = 0.25  # the fraction of raced reads at which all of them may have been wrong
FEW_CALLS = 3  # a traced function called fewer times has too few calls to show its spread
# The whole program's time per run: how much it varies between identical runs (a fraction of
# each side's; measured on this project's 2-core host beside one CPU hog per core, a cpu-mode
# run's total varied by 3.6% to 5.5%), and the standard deviations a change of it must exceed:
# one comparison, not hundreds as for functions, so fewer than `sigma`.
WHOLE_FLOOR = 0.05
WHOLE_SIGMA = 3.0
# From MIN_RUNS runs a side, an assumed noise (WHOLE_FLOOR's; a function's run-to-run floor
# when too few functions measure the profile's) is a prior the runs' spread updates, as a
# variance measured with this many degrees of freedom, not a figure they replace
# (bench/whole_judge.py).
PRIOR_DOF = 4.0
# Runs per side from which the noise of every change is measured from the spread of the runs
# (Welch's two-sample comparison) instead of assumed (the run-to-run floor).
MIN_RUNS = 5
DETECT_SHARE = 0.01  # the smallest detectable change is told for functions above this share
# When the whole program is compared per run, the host's speed on each side is read from code
# whose owner did not change (host_speed), if that code is at least this much of BASE's time.
REFERENCE_SHARE = 0.25

# Where an installed package's files start: after these directories.
_INSTALL_DIRS = re.compile(r".*/(?:site-packages|dist-packages)/|.*/lib/python\d+\.\d+/")


@dataclass(frozen=True)
class Func:
    name: str
    file: str
    line: int

    @property
    def module_path(self) -> str:
        return module_path(self.file)


def module_path(file: str) -> str:
    """A file's path as its import system sees it: ``pkg/mod.py`` for any installation of
    ``pkg`` (site-packages of any environment, the standard library of any prefix)."""
    f = file.replace("\\", "/")
    m = _INSTALL_DIRS.match(f)
    return f[m.end() :] if m else f


@dataclass
class Side:
    """One input of a diff, as distinct stacks of functions with a weight each."""

    path: str
    kind: str  # "sample", "trace", "pprof", "collapsed", "pyroscope"
    measure: str  # what the weights measure: "wall", "cpu", "trace" (wall time of calls) or
    # "samples" (counts of an unknown kind of sampling: pprof or collapsed stacks)
    unit: str  # "samples", "ns" or "calls" (a trace's work: work_side)
    quantum: float  # the weight of one sample (0 for a trace: no sampling noise)
    seconds: float | None  # seconds per unit of weight (None when unknown)
    funcs: list[Func]
    # Stacks given as paths of function indexes (outermost first) with a weight, as a side built
    # by hand or read from collapsed stacks or pprof has them: folded into `tree` when the Side
    # is made, and emptied.  Captures are read straight into the tree.
    stacks: list[tuple[Sequence[int], float]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    # A trace's spreads: the variance of each function's exclusive and inclusive weight, and of
    # each tree node's inclusive weight (from per-call times).  Empty for sampled sides.
    self_var: dict[int, float] = field(default_factory=dict)
    incl_var: dict[int, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # The distinct stacks as one prefix tree of function indexes (each stack is a node: its
    # innermost function under its caller's node), with the weight of the stacks that end at
    # each node, so a deep recursion costs its depth once, not once per distinct stack.
    tree: StackTree = field(default_factory=StackTree)
    weight: list[float] = field(default_factory=lambda: [0.0])
    node_var: list[float] = field(default_factory=lambda: [0.0])  # a trace's, per node
    node_calls: list[int] = field(default_factory=lambda: [0])  # a trace's, per node
    calls: dict[int, int] = field(default_factory=dict)  # a trace's, per function
    # How much a trace's host disturbed it (see _disturbance): the variance per nanosecond of
    # traced time that its calls show, and the largest excess one disturbance gave one call.
    rate: float = 0.0
    jump: float = 0.0
    # The fraction of a sampling capture's stack reads that raced with the program (read
    # again while the thread ran on, or dropped, because the stack changed under the sampler;
    # a read made with the thread parked is sure): a read that raced and was kept may have
    # named a caller for its callee, so shares are no surer than that.
    racy: float = 0.0
    # A sampling capture's: `node_var` holds, per node, the sum of the squared weights of the
    # reads its weight came from (row_spread; a read counted one weighs 1), which is how much
    # a sum of such reads varies.
    squares: bool = False
    complete: bool = True  # False: a capture cut short (its total is not a whole run's)
    # A side of several runs (merge_runs): each run's own Side, and the index in `funcs` of
    # each of its functions.  Empty for a side of one run.
    runs: list[tuple[Side, list[int]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for path, w in self.stacks:
            self.add(self.tree.add(path), w)
        self.stacks = []

    def add(self, node: int, w: float, var: float = 0.0, calls: int = 0) -> None:
        """Weight `w` at `node` (and, for a trace, the variance `var` of its inclusive weight
        and its `calls`)."""
        grow = len(self.tree) - len(self.weight)
        if grow > 0:
            self.weight.extend([0.0] * grow)
            self.node_var.extend([0.0] * grow)
            self.node_calls.extend([0] * grow)
        self.weight[node] += w
        self.node_var[node] += var
        self.node_calls[node] += calls

    @property
    def total(self) -> float:
        return sum(self.weight)

    @property
    def n_runs(self) -> int:
        return max(len(self.runs), 1)

    def describe(self) -> str:
        what = {
            "sample": f"{self.measure}-mode sampling capture",
            "trace": "trace capture" + (" (its calls)" if self.measure == "calls" else ""),
            "pprof": f"pprof profile ({self.measure})",
            "collapsed": "collapsed stacks",
            "pyroscope": f"Pyroscope fleet aggregate ({self.measure})",
        }[self.kind]
        if self.runs:
            return f"{self.path} ({len(self.runs)} runs, each a {what})"
        return f"{self.path} (a {what})"


# -- reading inputs -------------------------------------------------------------------------
def _read_bytes(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise LeadlineError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise LeadlineError(f"{path}: is a directory, not a profile") from None
    except OSError as e:
        raise LeadlineError(f"{path}: cannot read ({e.strerror})") from None


class _Interner:
    def __init__(self) -> None:
        self.funcs: list[Func] = []
        self.ids: dict[tuple[str, str], int] = {}

    def __call__(self, name: str, file: str, line: int) -> int:
        key = (name, file)
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.funcs)
            self.funcs.append(Func(name, file, line))
        return i


def _from_sampling(path: str, cap: Capture, idle: bool) -> Side:
    # A cpu-mode sample weighs the CPU time its thread used since its previous sample, which
    # the sampler measured.  On a busy host the sampler's ticks come late, and fewer at some
    # moments than at others: counted one each, samples then under-weigh what the program did
    # while the sampler was held up (the share of one program's start-up ranged from 1.7% to
    # 18.6% over 17 identical runs counted in samples, 8.0% to 15.1% in CPU time), while the
    # CPU time they stand for stays right.  So cpu-mode sides are weighed in CPU time, and the
    # counting noise of a sum of unequal weights is the sum of their squares, taken per
    # distinct stack from the reads its weight came from (row_spread): the side's quantum, what
    # one of its reads weighs on average, is those sums over its total weight.
    #
    # But a sample stands for no more than MAX_SAMPLE_PERIODS periods of CPU time: the sample
    # after a long stall of the sampler says little about where that time went (the program
    # was elsewhere for most of it), and one such sample, weighing as much as dozens, only adds
    # noise (a 3x slowdown among 50 functions was beyond noise in 77 of 100 pairs of loaded
    # runs weighed in full, in 92 capped at 8 periods, as in 92 counted one each).
    options = cap.meta.get("options") or {}
    rate = float(options.get("rate_hz") or 0)
    cap_ns = MAX_SAMPLE_PERIODS * 1e9 / rate if options.get("mode") == "cpu" and rate > 0 else None
    p = load_profile(cap, cpu_cap_ns=cap_ns)
    intern = _Interner()
    func_of = [intern(f.name, f.file, f.func_line) for f in p.frames]
    side = Side(
        path=path,
        kind="sample",
        measure=p.mode,
        unit="samples",
        quantum=1.0,
        seconds=1.0 / p.rate_hz if p.rate_hz > 0 else None,
        funcs=intern.funcs,
        meta=dict(p.meta),
    )
    weighted = selected(p, idle, "samples")
    cpu_weights = False
    if p.mode == "cpu":
        by_cpu = selected(p, idle, "cpu")
        if by_cpu:
            weighted, cpu_weights = by_cpu, True
            side.unit, side.seconds = "ns", 1e-9
    # The profile's stacks are nodes of its tree of frames: that tree is folded onto one of
    # functions node by node (frames of one function at different lines become one node), in
    # the time of its size, never stack by stack.
    frame_tree = next((s.frames.tree for s, _ in weighted if isinstance(s.frames, TreePath)), None)
    node_of: list[int] = []
    if frame_tree is not None:
        node_of = [0] * len(frame_tree)
        for n in range(1, len(frame_tree)):
            node_of[n] = side.tree.child(node_of[frame_tree.parent[n]], func_of[frame_tree.key[n]])
    side.squares = True
    spread = 0.0
    for s, w in weighted:
        frames = s.frames
        counted = s.samples_sq if idle else s.samples_sq - s.idle_sq
        squares = row_spread(s, float(w), s.cpu_sq if cpu_weights else counted, idle)
        spread += squares
        if isinstance(frames, TreePath) and frames.tree is frame_tree:
            side.add(node_of[frames.node], float(w), squares)
        else:
            side.add(side.tree.add(func_of[i] for i in frames), float(w), squares)
    if side.total > 0:
        side.quantum = spread / side.total
    end = cap.end or {}
    reads = p.samples + p.torn
    if reads > 0:
        side.racy = min((int(end.get("retried", 0)) + p.torn) / reads, 1.0)
    if side.racy >= RACED_WARNING:
        side.warnings.append(
            f"{path}: {side.racy:.0%} of the sampler's stack reads raced with the program "
            "(its stacks changed while they were read): its shares are that much less sure"
        )
    if not p.complete:
        side.complete = False
        side.warnings.append(f"{path}: incomplete capture; comparing the samples it holds")
    return side


def _from_trace(path: str, cap: Capture) -> Side:
    t = analyse(cap)
    intern = _Interner()
    func_ids: dict[int, int] = {}
    side = Side(
        path=path,
        kind="trace",
        measure="trace",
        unit="ns",
        quantum=0.0,
        seconds=1e-9,
        funcs=intern.funcs,
        meta=dict(cap.meta),
    )
    # The call tree's nodes (one per call path and thread) fold onto the side's tree of
    # functions node by node: threads with the same call path share a node.
    node_of: list[int] = []
    for n in t.nodes:  # parents come before their children
        f = func_ids.get(n.func)
        if f is None:
            fn = cap.function(n.func)
            f = func_ids[n.func] = intern(fn.label, fn.file, fn.line)
        node = side.tree.child(node_of[n.parent] if n.parent >= 0 else 0, f)
        node_of.append(node)
        side.add(node, float(n.self_ns), n.spread("incl"), n.calls)
        side.self_var[f] = side.self_var.get(f, 0.0) + n.spread("self")
        side.calls[f] = side.calls.get(f, 0) + n.calls
    side.rate, side.jump = _disturbance(t.nodes, clock_step_ns(cap))
    # A function's inclusive spread: that of its nodes with no caller of the same function
    # above them (a recursion's inner calls are inside the outer call's time).
    outer = side.tree.outermost(side.tree.key)
    for node in range(1, len(side.tree)):
        if outer[node]:
            f = side.tree.key[node]
            side.incl_var[f] = side.incl_var.get(f, 0.0) + side.node_var[node]
    if not cap.complete or cap.damage or stopped_early(cap.end):
        side.complete = False
        side.warnings.append(f"{path}: incomplete capture; comparing the calls it holds")
    return side


def work_side(side: Side) -> Side:
    """A trace's deterministic work: each call path weighs the calls made along it, not their
    time.  Calls do not depend on the machine's speed or load, so two traces of code that did
    the same work have the same weights (no counting noise, no run-to-run floor), however short
    they ran; the diff of two such sides names the code whose calls grew (docs/diff.md,
    "Work")."""
    if side.kind != "trace":
        raise LeadlineError(f"calls are counted by traces: {side.describe()} is not one")
    work = Side(
        path=side.path,
        kind="trace",
        measure="calls",
        unit="calls",
        quantum=0.0,
        seconds=None,
        funcs=side.funcs,
        meta=side.meta,
        warnings=list(side.warnings),
        tree=side.tree,
        complete=side.complete,
    )
    work.weight = [float(c) for c in side.node_calls]
    work.node_var = [0.0] * len(work.weight)
    work.node_calls = list(side.node_calls)
    work.calls = dict(side.calls)
    return work


def work_signature(side: Side) -> str:
    """A digest of a work side's calls per call path (functions by name, file and first
    line): two traces that made the same calls along the same paths have the same one, so an
    unchanged test's work is known unchanged without a diff."""
    t = side.tree
    path = [b""] * len(t)
    rows = []
    for n in range(1, len(t)):
        f = side.funcs[t.key[n]]
        label = f"{f.name}\0{f.file}\0{f.line}".encode("utf-8", "surrogatepass")
        path[n] = hashlib.blake2b(path[t.parent[n]] + label, digest_size=12).digest()
        calls = side.node_calls[n] if n < len(side.node_calls) else 0
        if calls:
            rows.append(path[n] + calls.to_bytes(8, "little"))
    rows.sort()
    return hashlib.blake2b(b"".join(rows), digest_size=16).hexdigest()


def _disturbance(nodes: Iterable[Node], step_ns: float = 0.0) -> tuple[float, float]:
    """What a trace's calls say about how much its host disturbed it: (rate, jump).

    A traced call's time is wall-clock time: on a busy host, a call that is preempted takes a
    scheduler time slice (milliseconds) longer, whatever the code did.  A function called
    thousands of times shows that in the spread of its per-call times; a function called once
    or twice shows nothing, yet is just as likely to be hit, per nanosecond it runs.  So:

    - `rate`: the variance per nanosecond of time, pooled over the call paths that were called
      at least twice (their per-call spread over their time).  A function's variance is at
      least `rate` x its time: preemptions fall on every nanosecond alike.
    - `jump`: the largest excess that one disturbance gave one call, bounded from above by the
      largest per-call spread of one call path (one call's excess over its path's mean is at
      most the square root of calls x the per-call variance).  Preemptions are rare and large,
      not the many small deviations a standard deviation stands for, so a change smaller than
      one of them is never beyond noise, however small the function's own spread.

    A trace timed by the RSS sampler's clock (`step_ns`, see clock_step_ns) has a spread of its
    own in every call path: a call reads the clock's gaps inside it, a variance of at most
    `step_ns` x its time.  That stays in `rate` (it is noise of the totals like any other) and
    is taken out of `jump`, which is about what one disturbance did to one call.
    """
    spread = time = largest = 0.0
    for n in nodes:
        if n.calls >= 2:
            v = n.spread("self")
            spread += v
            time += n.self_ns
            largest = max(largest, v - step_ns * n.self_ns)
    return (spread / time if time > 0 else 0.0), math.sqrt(largest)


def clock_step_ns(cap: Capture) -> float:
    """E[gap^2] / E[gap] of the clock a trace's events read, in ns: 0 for the CPU's counter;
    for the RSS sampler's clock, whose gaps are drawn evenly from half a period to one and a
    half, 13/12 of the period (a call of time d << gap reads a whole gap with chance d / E[gap],
    a variance of about d x E[gap^2] / E[gap]).  A trace whose first periods read the counter
    is taken at the sampler's step throughout: the step only bounds what is taken out of the
    largest single disturbance."""
    clock = coarse_clock(cap)
    return 0.0 if clock is None else clock.period_ns * 13.0 / 12.0


def _from_foreign(path: str, prof: ForeignProfile, spread: ForeignProfile | None = None) -> Side:
    """`spread`: the same pushes' cpu_spread (a fleet aggregate's), each stack's in node_var."""
    intern = _Interner()
    tree = StackTree()
    weight = [0.0]
    var = [0.0]

    def node_of(frames: Sequence[Frame]) -> int:
        node = tree.add(tuple(intern(f.name, f.file, f.func_line) for f in frames))
        grow = [0.0] * (len(tree) - len(weight))
        weight.extend(grow)
        var.extend(grow)
        return node

    for frames, w in prof.stacks:
        weight[node_of(frames)] += w
    for frames, w in spread.stacks if spread else ():
        if w > 0:  # a hostile server's negative spread is no spread
            var[node_of(frames)] += w * SPREAD_UNIT
    seconds: float | None = None
    unit = "samples"
    quantum = 1.0
    if prof.unit == "nanoseconds":
        # A time weight: one sample weighs a period (when the file says which).
        unit, seconds = "ns", 1e-9
        quantum = float(prof.period) if prof.period > 0 else _smallest(weight)
    elif prof.unit == "count" and prof.period > 0 and prof.period_type in ("cpu", "wall"):
        seconds = prof.period * 1e-9
    elif prof.unit != "count":
        raise LeadlineError(
            f"{path}: pprof sample type {prof.sample_type!r} is in {prof.unit!r}, not time or "
            "samples (choose one with --sample-type)"
        )
    if prof.kind == "collapsed" and sum(weight) > MAX_COUNTS:
        quantum = _smallest(weight)  # not counts: times (leadline's cpu-mode export) or bytes
    measure = prof.period_type if prof.period_type in ("cpu", "wall") else "samples"
    if prof.sample_type in ("cpu", "wall"):
        measure = prof.sample_type
    return Side(
        path=path,
        kind=prof.kind,
        measure=measure,
        unit=unit,
        quantum=quantum,
        seconds=seconds,
        funcs=intern.funcs,
        meta={"comments": prof.comments},
        tree=tree,
        weight=weight,
        node_var=var,
        node_calls=[0] * len(weight),
    )


def _smallest(weights: Iterable[float]) -> float:
    """The size of one sample when the file does not say: the lightest stack's weight (the
    rarest stacks were seen once), 1 for counts."""
    return min((w for w in weights if w > 0), default=1.0)


Fetch = Callable[[FleetQuery], bytes]  # asks Pyroscope (select_merge_profile)


def _agent_cpu(query: FleetQuery, in_ns: bool) -> bool:
    """Whether the aggregate (`in_ns`: its weights are times) is CPU time as leadline's agent
    pushes it, with its companions."""
    return in_ns and query.profile_type.startswith("process_cpu:cpu:nanoseconds:")


def _companion(query: FleetQuery, metric: PprofMetric, fetch: Fetch) -> ForeignProfile | None:
    """The same pushes' `metric`, or None where the server has none (pushes of an older agent,
    or of another profiler) or its answer cannot be read."""
    try:
        prof = read_pprof(
            query.shown,
            fetch(replace(query, profile_type=companion_type(query.profile_type, metric))),
        )
    except LeadlineError:
        return None
    return prof if prof.stacks else None


def _fleet_quantum(query: FleetQuery, side: Side, fetch: Fetch) -> float:
    """The weight of one sample of a fleet aggregate.  Pyroscope's merged profile says its
    period is one second whatever the rate was, so for CPU time the sample count comes from the
    companion ``samples:count`` profile that leadline's agent pushes alongside."""
    if not _agent_cpu(query, side.unit == "ns"):
        return side.quantum
    counts = _companion(query, "samples", fetch)
    n = sum(w for _, w in counts.stacks) if counts else 0
    return side.total / n if n > 0 else _smallest(side.weight)


def fleet_side(
    query: FleetQuery, fetch: Fetch = select_merge_profile, sample_type: str | None = None
) -> Side:
    """A fleet aggregate from Pyroscope: the server's answers to `query` (and to its companion
    sample-count and spread queries), which `fetch` asks for, read as a Side.  Everything a
    server says is parsed here, so this is what the fuzzer feeds with hostile answers.

    The counting noise of CPU time is the sum of its reads' squared weights (_from_sampling),
    which the agent pushes as cpu_spread: on a busy machine, where most reads are set aside and
    a few fair ones carry the time (beside three CPU hogs on two cores, 20 to 100 fair reads'
    worth of evidence in a 4 s run at 100 Hz, of 400 records), the sample count alone made a
    fleet diff sure of shares that moved by 10 to 15 points between identical runs.  Each
    stack's spread is at least what the sample count gives it (pushes without a spread, mixed
    into the aggregate, count so)."""
    prof = read_pprof(query.shown, fetch(query), sample_type)
    if not prof.stacks:
        raise LeadlineError(f"{query.shown}: no profiles in that time range")
    spread = (
        _companion(query, "cpu_spread", fetch)
        if _agent_cpu(query, prof.unit == "nanoseconds")
        else None
    )
    side = _from_foreign(query.shown, prof, spread)
    side.kind = "pyroscope"
    per_record = _fleet_quantum(query, side, fetch)
    side.quantum = per_record
    if spread is not None and side.total > 0:
        side.node_var = [
            max(v, w * per_record) for v, w in zip(side.node_var, side.weight, strict=True)
        ]
        side.squares = True
        side.quantum = sum(side.node_var) / side.total
    return side


def load_side(path: str, *, idle: bool = False, sample_type: str | None = None) -> Side:
    """Reads a capture, a pprof profile or collapsed stacks, whichever `path` holds, or a fleet
    aggregate from Pyroscope (``pyroscope://HOST:PORT/SERVICE?from=...&until=...&label=v``)."""
    if is_fleet_url(path):
        return fleet_side(parse_fleet_url(path), sample_type=sample_type)
    data = _read_bytes(path)
    if data[: len(MAGIC)] == MAGIC:
        with Capture(path) as cap:
            if cap.meta.get("mode") == "sample":
                side = _from_sampling(path, cap, idle)
            else:
                side = _from_trace(path, cap)
            if cap.damage:
                side.complete = False
                side.warnings.append(f"{path}: {cap.damage}; {cap.unused_bytes} bytes unread")
            return side
    if data[:2] == b"\x1f\x8b" or path.endswith((".pb", ".pprof", ".pb.gz")):
        return _from_foreign(path, read_pprof(path, data, sample_type))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LeadlineError(
            f"{path}: not a leadline capture, a pprof profile or collapsed stacks"
        ) from None
    first = next((ln for _, ln in folded_lines(text)), "")
    if not looks_folded(first):
        if not text.strip():
            raise LeadlineError(f"{path}: an empty file, not a profile")
        raise LeadlineError(f"{path}: not a leadline capture, a pprof profile or collapsed stacks")
    return _from_foreign(path, read_collapsed(path, text))


def merge_runs(runs: Sequence[Side], path: str) -> Side:
    """One side of several runs of the same program: their stacks added up (a function is the
    same function in every run when its name and file agree), each run kept for the spread of
    its values (MIN_RUNS and more: the noise model is measured instead of assumed)."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    for r in runs:
        if r.total <= 0:
            raise LeadlineError(f"{r.path}: no samples or calls to compare")
    for r in runs[1:]:
        if (r.measure, r.unit, r.seconds) != (first.measure, first.unit, first.seconds):
            raise LeadlineError(
                f"cannot add up {first.describe()} and {r.describe()} as runs of one side: "
                "record every run the same way (same --mode and --rate)"
            )
    argvs = [r.meta.get("argv") for r in runs]
    versions = {r.meta.get("python_version") for r in runs}
    meta: dict[str, Any] = {
        "argv": argvs[0] if all(a == argvs[0] for a in argvs) else None,
        "python_version": versions.pop() if len(versions) == 1 else None,
    }
    intern = _Interner()
    merged = Side(
        path=path,
        kind=first.kind,
        measure=first.measure,
        unit=first.unit,
        quantum=0.0,
        seconds=first.seconds,
        funcs=intern.funcs,
        meta=meta,
        squares=all(r.squares for r in runs),
    )
    spread = 0.0
    # In the order they were recorded (when the captures say), so that two sides recorded
    # interleaved can be compared round by round.
    starts = [r.meta.get("start_unix_ns") for r in runs]
    if all(isinstance(t, int) for t in starts):
        order = sorted(range(len(runs)), key=lambda i: int(starts[i] or 0))
        runs = [runs[i] for i in order]
    for r in runs:
        fmap = [intern(f.name, f.file, f.line) for f in r.funcs]
        merged.runs.append((r, fmap))
        t = r.tree
        r.add(0, 0.0)  # weights as long as its tree
        node_of = [0] * len(t)
        for n in range(1, len(t)):
            node_of[n] = merged.tree.child(node_of[t.parent[n]], fmap[t.key[n]])
            merged.add(node_of[n], r.weight[n], r.node_var[n], r.node_calls[n])
        for src, dst in ((r.self_var, merged.self_var), (r.incl_var, merged.incl_var)):
            for f, v in src.items():
                dst[fmap[f]] = dst.get(fmap[f], 0.0) + v
        for f, k in r.calls.items():
            merged.calls[fmap[f]] = merged.calls.get(fmap[f], 0) + k
        spread += r.quantum * r.total
        merged.jump = max(merged.jump, r.jump)
        merged.complete = merged.complete and r.complete
        merged.warnings += r.warnings
    total = merged.total
    merged.quantum = spread / total if total > 0 else first.quantum
    merged.rate = sum(r.rate * r.total for r in runs) / total if total > 0 else 0.0
    merged.racy = sum(r.racy * r.total for r in runs) / total if total > 0 else 0.0
    return merged


def expand_inputs(paths: Sequence[str]) -> list[str]:
    """The captures one side names: files as given, a directory as the captures in it
    (``*.lead``, in name order)."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(str(q) for q in Path(p).glob("*.lead") if q.is_file())
            if not found:
                raise LeadlineError(f"{p}: a directory with no captures (*.lead) in it")
            out += found
        else:
            out.append(p)
    return out


def load_runs(paths: Sequence[str], *, idle: bool = False, sample_type: str | None = None) -> Side:
    """One side of a diff from one input or several runs (files or directories of captures)."""
    files = expand_inputs(paths)
    runs = [load_side(p, idle=idle, sample_type=sample_type) for p in files]
    shown = ", ".join(files) if len(files) <= 3 else f"{files[0]} ... {files[-1]}"
    return merge_runs(runs, shown)


# -- comparing --------------------------------------------------------------------------------
def check_comparable(base: Side, new: Side) -> None:
    """Refuses two inputs whose weights mean different things."""
    a, b = base.measure, new.measure
    if a == b or ("samples" in (a, b) and "trace" not in (a, b)):
        return
    raise LeadlineError(
        f"cannot compare {base.describe()} with {new.describe()}: "
        "record both the same way (same command and --mode)"
    )


def match_functions(base: Side, new: Side) -> tuple[list[Func], list[int], list[int]]:
    """One function list for both sides, and each side's index into it."""
    funcs: list[Func] = []
    base_map = [-1] * len(base.funcs)
    new_map = [-1] * len(new.funcs)

    def key_exact(f: Func) -> tuple[str, str]:
        return (f.name, f.module_path)

    def key_basename(f: Func) -> tuple[str, str]:
        return (f.name, os.path.basename(f.module_path))

    def key_name(f: Func) -> tuple[str, str]:
        return (f.name, "") if f.name and not f.name.startswith("<") else ("", f"\0{id(f)}")

    for key in (key_exact, key_basename, key_name):
        pending_b: dict[tuple[str, str], list[int]] = {}
        pending_n: dict[tuple[str, str], list[int]] = {}
        for i, f in enumerate(base.funcs):
            if base_map[i] < 0:
                pending_b.setdefault(key(f), []).append(i)
        for i, f in enumerate(new.funcs):
            if new_map[i] < 0:
                pending_n.setdefault(key(f), []).append(i)
        for k, bs in pending_b.items():
            ns = pending_n.get(k)
            if not ns or (key is not key_exact and (len(bs) > 1 or len(ns) > 1)):
                continue
            # Exact keys may repeat (one file seen under two absolute paths): pair in order.
            for b_i, n_i in zip(bs, ns, strict=False):
                base_map[b_i] = new_map[n_i] = len(funcs)
                funcs.append(new.funcs[n_i])
    for i, f in enumerate(base.funcs):
        if base_map[i] < 0:
            base_map[i] = len(funcs)
            funcs.append(f)
    for i, f in enumerate(new.funcs):
        if new_map[i] < 0:
            new_map[i] = len(funcs)
            funcs.append(f)
    return funcs, base_map, new_map


@dataclass
class Costs:
    """One side's normalised costs, per function and per node of its stack tree."""

    self_: dict[int, float] = field(default_factory=dict)
    incl: dict[int, float] = field(default_factory=dict)
    self_var: dict[int, float] = field(default_factory=dict)
    incl_var: dict[int, float] = field(default_factory=dict)
    callers: dict[int, dict[int, float]] = field(default_factory=dict)  # f -> caller (-1) -> w
    total: float = 0.0
    # Per node of the side's tree: its function in the diff's list, its inclusive cost (its
    # subtree's), whether any stack ends in its subtree, and (a trace) its inclusive variance.
    parent: list[int] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    incl_at: list[float] = field(default_factory=list)
    present: list[bool] = field(default_factory=list)
    var_at: list[float] | None = None
    calls_at: list[int] | None = None  # a trace's calls per node
    calls: dict[int, int] = field(default_factory=dict)  # a trace's calls per function


def _costs(side: Side, mapping: list[int], scale: float) -> Costs:
    """One side's costs, `scale`d, and their variances: a trace's from its calls, a sampling
    capture's the sums of its samples' squared weights (the judge makes them counting noise).

    Everything is one pass or two over the side's stack tree: a node's inclusive cost is its
    subtree's weight, and a function's is the sum over its nodes that have no ancestor of the
    same function (so a recursion counts each stack once), never a walk per stack."""
    c = Costs()
    sampled = side.kind != "trace"
    t = side.tree
    n_nodes = len(t)
    side.add(0, 0.0)  # weights as long as the tree
    # Sums are of the unscaled weights (whole sample counts and nanoseconds add up exactly, in
    # any order), scaled once at the end: two functions on the same stacks get the very same
    # cost, and so rank by name, not by rounding.
    own = side.weight
    c.parent = t.parent
    c.keys = [-1] + [mapping[t.key[n]] for n in range(1, n_nodes)]
    incl_at = t.subtree_sums(own)
    c.present = t.reached([w != 0 for w in own])
    outer = t.outermost(c.keys)
    # A sampled side's spreads (sums of its reads' squared weights, row_spread), per node:
    # summed per function as its costs are, in the same pass.
    squares = side.node_var if sampled and side.squares else None
    squares_at = t.subtree_sums(squares) if squares is not None else None
    for n in range(1, n_nodes):
        if not c.present[n]:
            continue
        f = c.keys[n]
        if own[n]:
            c.self_[f] = c.self_.get(f, 0.0) + own[n]
            if squares is not None:
                c.self_var[f] = c.self_var.get(f, 0.0) + squares[n]
        if outer[n]:
            v = incl_at[n]
            c.incl[f] = c.incl.get(f, 0.0) + v
            if squares_at is not None:
                c.incl_var[f] = c.incl_var.get(f, 0.0) + squares_at[n]
            up = t.parent[n]
            caller = c.keys[up] if up > 0 else -1
            by = c.callers.setdefault(f, {})
            by[caller] = by.get(caller, 0.0) + v
    if not sampled:
        # A trace's variances: its per-call spreads, and at least what the host's disturbance
        # rate gives the function's (or call path's) time, for functions called too few times
        # to show a spread of their own.
        s2, rate = scale * scale, side.rate
        self_var = {mapping[f]: v for f, v in side.self_var.items()}
        incl_var = {mapping[f]: v for f, v in side.incl_var.items()}
        c.self_var = {f: max(self_var.get(f, 0.0), rate * v) * s2 for f, v in c.self_.items()}
        c.incl_var = {f: max(incl_var.get(f, 0.0), rate * v) * s2 for f, v in c.incl.items()}
        c.var_at = [max(v, rate * w) * s2 for v, w in zip(side.node_var, incl_at, strict=False)]
        c.calls_at = side.node_calls
        for f, k in side.calls.items():
            c.calls[mapping[f]] = c.calls.get(mapping[f], 0) + k
    elif squares_at is not None:
        s2 = scale * scale
        for spreads in (c.self_var, c.incl_var):
            for f in spreads:
                spreads[f] *= s2
        c.var_at = [v * s2 for v in squares_at]
    c.total = sum(own) * scale
    c.incl_at = [v * scale for v in incl_at]
    for values in (c.self_, c.incl, *c.callers.values()):
        for k in values:
            values[k] *= scale
    return c


def _sample_var(v: float, q: float, shares: bool) -> float:
    """The variance of a sampled cost `v` whose samples weigh `q` each; as a share (of 1),
    binomial."""
    return v * q * (max(1.0 - v, 0.0) if shares else 1.0)


@dataclass
class Change:
    base: float
    new: float
    noise: float  # one standard deviation of new - base
    sig: int  # 1 grew beyond noise, -1 shrank beyond noise, 0 within noise

    @property
    def delta(self) -> float:
        return self.new - self.base

    @property
    def ratio(self) -> float | None:
        return self.new / self.base if self.base > 0 else None


@dataclass
class Settings:
    per: tuple[float, float] | None = None  # units of work of BASE and NEW
    sigma: float = DEFAULT_SIGMA
    floor: float | None = None  # None: DEFAULT_FLOOR for shares, DEFAULT_PER_FLOOR per unit
    min_delta: float = DEFAULT_MIN_DELTA
    tree: bool = True  # send the merged call-path tree (for the HTML flame graph)
    # Compare time per run instead of shares when both sides ran the same command and the
    # whole program's time changed beyond noise (without `per`).
    by_run: bool = True


@dataclass
class FunctionDiff:
    func: Func
    status: str  # "both", "new" (only in NEW), "gone" (only in BASE)
    self_: Change
    total: Change
    rank: int = 0


@dataclass
class DiffResult:
    base: Side
    new: Side
    settings: Settings
    unit: str  # "share", "s", "samples" or "calls": what the normalised values are
    functions: list[FunctionDiff]  # ranked
    callers: list[tuple[int, list[tuple[int, Change]]]]  # index into functions; caller index or -1
    tree_parent: list[int]
    tree_func: list[int]  # index into functions (-1 for the root)
    tree_change: list[Change]
    # The whole program's time per run (seconds) when both sides ran the same command, judged
    # against WHOLE_FLOOR; None otherwise.
    whole: Change | None = None
    by_run: bool = False  # compared per run because `whole` changed beyond noise
    culprits: list[Culprit] = field(default_factory=list)  # `func`, `into`: ranked indexes
    culprit_nodes: list[list[int]] = field(default_factory=list)  # each's nodes of `tree_*`
    # The smallest change of a function's own cost beyond noise, as a fraction of its BASE
    # cost (the median over the functions above DETECT_SHARE of the total), and over how many.
    detectable: tuple[float, int] | None = None
    # The owners whose code is taken to differ, and why (culprits.py's rule 3).
    changed: list[Changed] = field(default_factory=list)

    @property
    def from_runs(self) -> bool:
        """Whether noise was measured from the spread of each side's runs."""
        return min(self.base.n_runs, self.new.n_runs) >= MIN_RUNS

    @property
    def paired(self) -> bool:
        """Whether the runs were compared round by round (recorded interleaved)."""
        return interleaved(self.base, self.new)

    @property
    def grew(self) -> list[FunctionDiff]:
        return [f for f in self.functions if f.self_.sig > 0 or f.total.sig > 0]

    @property
    def shrank(self) -> list[FunctionDiff]:
        return [
            f
            for f in self.functions
            if (f.self_.sig < 0 or f.total.sig < 0) and f.self_.sig <= 0 and f.total.sig <= 0
        ]


def _scales(base: Side, new: Side, s: Settings) -> tuple[float, float, str]:
    if s.per is None:
        bt, nt = base.total, new.total
        if bt <= 0 or nt <= 0:
            empty = base if bt <= 0 else new
            raise LeadlineError(f"{empty.path}: no samples or calls to compare")
        return 1.0 / bt, 1.0 / nt, "share"
    # A side of several runs: cost per unit of work of one run (every run did `per` units).
    n_base, n_new = s.per[0] * base.n_runs, s.per[1] * new.n_runs
    if base.seconds is not None and new.seconds is not None:
        return base.seconds / n_base, new.seconds / n_new, "s"
    if base.unit == new.unit and base.unit in ("samples", "calls"):
        return 1.0 / n_base, 1.0 / n_new, base.unit
    raise LeadlineError(
        f"cannot compare cost per unit of work: {base.describe()} and {new.describe()} do not "
        "share a time base (compare shares of the total instead: leave out --per)"
    )


def _floor_term(x: float, floor: float, s: Settings) -> float:
    """The run-to-run floor's standard deviation for a value `x`: a fraction of it per unit of
    work; as a share, of the smaller of it and the rest (a function at 76% moves as much as the
    24% that is everything else, and one at 100% cannot move at all)."""
    return floor * (x if s.per is not None else min(x, max(1.0 - x, 0.0)))


def _raced_allowance(racy: float) -> float:
    """How far off, as a fraction of a value, a capture whose stack reads raced with the program
    in this fraction of reads may be.  A read that raced was read again, and most are right
    then; the ones that were kept wrong grow faster than the races do: at 29% of the reads
    raced, callers' self shares were 2 to 7 times what the other 16 runs of the program had, at
    53% a function's inclusive share was a sixth of theirs, while runs with under 10% were as
    good as any.  So the allowance is racy^2 / RACED_REFERENCE (a quarter of the reads raced:
    all of them may be wrong), at most the whole value."""
    return min(racy * racy / RACED_REFERENCE, 1.0)


def _verdict(b: float, n: float, noise: float, sigma: float, least: float) -> Change:
    """The change from `b` to `n`: beyond noise when larger than `sigma` x `noise` and than
    `least`."""
    d = n - b
    sig = 0
    if abs(d) > sigma * noise and abs(d) > least:
        sig = 1 if d > 0 else -1
    return Change(b, n, noise, sig)


def _rank_key(f: FunctionDiff) -> tuple[int, float]:
    if f.self_.sig > 0:
        return (0, -f.self_.delta)
    if f.total.sig > 0:
        return (1, -f.total.delta)
    if f.self_.sig < 0 or f.total.sig < 0:
        return (2, min(f.self_.delta, f.total.delta))
    return (3, -abs(f.self_.delta))


class _Judge:
    """The noise model of one comparison: judges a change from BASE's value to NEW's, both
    normalised, against the noise the two sides' kinds and hosts allow it."""

    def __init__(
        self,
        base: Side,
        new: Side,
        scales: tuple[float, float],
        s: Settings,
        total: float,
        counting: bool = False,
    ) -> None:
        """`scales` normalise BASE's and NEW's weights; `total` is BASE's, normalised.
        `counting`: judge by counting noise (a trace's per-call spread) alone, without the
        run-to-run floor and the raced-reads allowance."""
        k_base, k_new = scales
        self.s = s
        self.shares = s.per is None
        self.floor = 0.0 if counting else s.floor or 0.0
        # Never beyond noise: less than min_delta of the total; for a function called once or
        # twice on a traced side, less than one disturbance of either trace's host (a
        # preempted call).
        self.min_abs = s.min_delta * total
        self.few_abs = max(base.jump * k_base, new.jump * k_new)
        self.raced = (0.0, 0.0)
        if not counting:
            self.raced = (_raced_allowance(base.racy), _raced_allowance(new.racy))
        self.traced = (base.kind == "trace", new.kind == "trace")
        self.quanta = (base.quantum * k_base, new.quantum * k_new)
        self.squares = (base.squares, new.squares)

    def _quanta(self, b: float, n: float, var: tuple[float, float] | None) -> tuple[float, ...]:
        """What one sample of this value weighs on each side: its reads' squared weights over
        their weights where the side saw it; else (a side that did not see it, or pprof and
        collapsed stacks, which do not say) the side's average.  Each side's own: one run whose
        sampler deferred 70% of its reads holds a third of its twin's evidence for the same
        time, and a function missing from it is no surer than that (between two runs of one
        program, weighed by the other side's reads, an import seen at 5% in one and not in the
        other was beyond noise)."""
        if var is None:
            return self.quanta
        return tuple(
            var[k] / x if self.squares[k] and x > 0 else self.quanta[k]
            for k, x in enumerate((b, n))
        )

    def __call__(
        self, b: float, n: float, var: tuple[float, float] | None, calls: tuple[int, int]
    ) -> Change:
        """The change from `b` to `n`, judged against its noise, side by side (`var`: each
        side's variance of it, None when unknown):

        - a sampled side: counting noise at the value both sides would share if nothing had
          changed (their mean, as a two-sample test does: a function seen on one side only is as
          uncertain on the other, not certain to be 0 there), with samples that weigh what
          this value's reads weigh on that side (_quanta: the reads of a program's start-up
          carried 10 to 60 times the others' weight in one run of 0.4 s and not in its twin;
          judged as average samples, four import-time functions were beyond noise), the
          run-to-run floor of its own value, and its raced-reads allowance of the shared value
          (reads that raced may have taken a function's samples away, so what the side shows
          is no measure of that);
        - a trace: the variance from its calls (`var`), or the run-to-run floor if that is
          larger.  On a busy host that spread is the host's run-to-run variation itself: over 12
          identical traces, shares moved less between runs than the spread alone predicted, so
          the floor is the least noise a trace has, not more of it.
        """
        s = self.s
        at = (b + n) / 2
        noise2 = 0.0
        quanta = self._quanta(b, n, var)
        for k, x in enumerate((b, n)):
            floor2 = _floor_term(x, self.floor, s) ** 2
            if self.traced[k]:
                noise2 += max(var[k] if var is not None else 0.0, floor2)
            else:
                noise2 += _sample_var(at, quanta[k], self.shares) + floor2
                noise2 += _floor_term(at, self.raced[k], s) ** 2
        few = any(self.traced[k] and calls[k] < FEW_CALLS for k in (0, 1))
        least = max(self.min_abs, self.few_abs) if few else self.min_abs
        return _verdict(b, n, math.sqrt(noise2), s.sigma, least)


def same_command(base: Side, new: Side) -> bool:
    """Whether both sides recorded one command (the same argv), so their times per run are
    comparable."""
    a, b = base.meta.get("argv"), new.meta.get("argv")
    return bool(a) and a == b


def whole_program(base: Side, new: Side) -> Change | None:
    """The whole program's time per run on each side (seconds; the mean run of a side of
    several), judged: a change beyond WHOLE_SIGMA standard deviations of WHOLE_FLOOR of each
    side's time (less by the square root of its runs) and its counting noise is beyond noise;
    from MIN_RUNS runs a side, or of the runs' own spread when that is larger (_RunJudge).
    None unless both sides are whole runs of the same command whose time is known."""
    if not (same_command(base, new) and base.complete and new.complete):
        return None
    if base.seconds is None or new.seconds is None or base.kind != new.kind:
        return None
    means = []
    counting = 0.0
    for side in (base, new):
        seconds, n = side.seconds or 0.0, side.n_runs
        means.append(side.total * seconds / n)
        counting += side.total * side.quantum * seconds**2 / (n * n)
    if min(means) <= 0 or not all(math.isfinite(x) for x in (*means, counting)):
        return None
    var = counting + sum(
        (WHOLE_FLOOR * m) ** 2 / side.n_runs for m, side in zip(means, (base, new), strict=True)
    )
    if min(base.n_runs, new.n_runs) >= MIN_RUNS:
        # The floor is the noise the runs are judged against unless they spread more (as a
        # function's pooled noise is, _RunJudge).
        per_run = [[r.total * (r.seconds or 0.0) for r, _ in side.runs] for side in (base, new)]
        judge = _RunJudge(WHOLE_SIGMA, 0.0, paired=interleaved(base, new), counting_is_prior=True)
        return judge(means[0], means[1], per_run[0], per_run[1], var)
    return _verdict(means[0], means[1], math.sqrt(var), WHOLE_SIGMA, 0.0)


def interleaved(base: Side, new: Side) -> bool:
    """Whether both sides are as many runs, MIN_RUNS or more, recorded in turn (A B A B ...,
    or B A B A ...: their start times alternate), so they can be compared round by round."""
    n = base.n_runs
    if n != new.n_runs or n < MIN_RUNS:
        return False
    starts: list[tuple[int, int]] = []
    for k, side in enumerate((base, new)):
        for r, _ in side.runs:
            t = r.meta.get("start_unix_ns")
            if not isinstance(t, int):
                return False
            starts.append((t, k))
    order = [k for _, k in sorted(starts)]
    return all(order[i] != order[i + 1] for i in range(len(order) - 1))


class _RunJudge:
    """Judges a change from the spread of each side's runs (MIN_RUNS or more each).

    Every change is compared by Yuen's test of the runs' 20%-trimmed means (stats.compare_runs),
    which one run a busy host disturbed does not move.  Its noise is one of two:

    - **pooled** (most functions): the counting noise of the change times a factor `phi` that
      the runs measure for the whole profile, the median over its functions of their measured
      spread over their counting noise, or the change's own measured spread if that is larger.
      Fifty functions' spreads tell how much the host adds to counting far better than one
      function's ten runs do, so this noise is judged as a known one, at `sigma` (a function
      whose own runs happen to spread more is not judged on less than they show: over 300
      random splits of 20 identical runs of a 50-function program into two sides, nothing was
      flagged, and the smallest detectable change was 12.1% to 14.1%; docs/diff.md);
    - **its own**: when a change's measured spread is larger than the pooled noise beyond what
      chance gives its runs (the 99th percentile of a chi-square of its degrees of freedom; a
      function the host disturbs more than others, such as one whose time moves with the
      host's phases), that spread, judged at the t quantile as rare at its degrees of freedom
      as `sigma` of a normal (4 sigma is 6.2 at ten runs a side).

    An assumed noise can be the prior instead, worth PRIOR_DOF degrees of freedom, that the
    runs' measured spread updates (the variance of both, weighed by their degrees of freedom,
    never below the prior's), judged at the t quantile of their summed degrees of freedom:

    - `counting_is_prior` (the whole program's time, one comparison whose noise is an assumed
      floor measured on another host, not one measured on this profile's functions): the
      counting variance given (there, the floor's).  A switch from the floor to the spread
      alone at five runs a side (two degrees of freedom once trimmed: 6.4 times the spread at 3
      sigma) judged identical runs changed 6% to 9% of the time on a host whose runs spread two
      to three times the floor, and missed a 1.5x slowdown more often than it caught it; this
      rule judged them changed 2% to 5% of the time and caught 1.5x two to three times in four
      (bench/whole_judge.py);
    - no `phi` (fewer than five functions to measure it, such as a short test's profile): the
      `assumed` variance (counting and the run-to-run floor, of a mean of the runs).  Judged by
      its own spread alone, five runs a side of a test with three functions could see no change
      smaller than 3x, less than one run a side sees with the floor.

    The values shown stay each side's mean run (they add up along a call path).  The noise it
    gives is scaled so that `sigma` of it is the threshold used, so everything after reads it
    as any other noise."""

    def __init__(
        self,
        sigma: float,
        least: float,
        phi: float | None = None,
        paired: bool = False,
        counting_is_prior: bool = False,
    ) -> None:
        self.sigma = sigma
        self.least = least
        self.phi = phi  # None: every change is judged by its own spread
        self.paired = paired  # the sides' runs were recorded interleaved: compared round by round
        self.counting_is_prior = counting_is_prior  # a prior the spread updates, see above
        self._thresholds: dict[float, float] = {}

    def _threshold(self, dof: float) -> float:
        key = round(dof, 1) if math.isfinite(dof) else math.inf
        t = self._thresholds.get(key)
        if t is None:
            t = self._thresholds[key] = t_threshold(self.sigma, key)
        return t

    def __call__(
        self,
        b: float,
        n: float,
        runs_b: Sequence[float],
        runs_n: Sequence[float],
        counting: float,
        assumed: float | None = None,
    ) -> Change:
        """`b`, `n`: each side's mean run; `counting`: the variance of the change from counting
        alone; `assumed`: from the assumed noise model (counting and the run-to-run floor, of a
        mean of the runs), the prior when no `phi` was measured."""
        c = compare_runs(runs_b, runs_n, paired=self.paired)
        d = c.diff
        pooled = self.phi * counting if self.phi is not None and counting > 0 else None
        prior = counting if self.counting_is_prior else None
        if self.phi is None and assumed is not None and assumed > 0:
            prior = assumed  # too few functions to measure phi: the floor, updated by the runs
        if prior is not None and prior > 0 and math.isfinite(c.dof):
            dof = PRIOR_DOF + c.dof
            var = max(prior, (PRIOR_DOF * prior + c.dof * c.se**2) / dof)
            noise = math.sqrt(var) * self._threshold(dof) / self.sigma
        elif pooled is not None and not c.se**2 > pooled * chi2_ratio(c.dof, 0.99):
            noise = math.sqrt(max(pooled, c.se**2))
        elif c.se > 0:
            noise = c.se * self._threshold(c.dof) / self.sigma
        else:  # every run of both sides gave one value: a spread that says nothing
            noise, d = math.sqrt(max(counting, 0.0)), n - b
        sig = 0
        if abs(d) > self.sigma * noise and abs(d) > self.least:
            sig = 1 if d > 0 else -1
        return Change(b, n, noise, sig)


def _self_spreads(
    cb: Costs, cn: Costs, runs: _Runs, counting: _Judge
) -> Iterator[tuple[float, float, float]]:
    """For each function found on both sides with at least DETECT_SHARE of BASE's total: the
    measured variance of its self cost's change across the runs (Yuen), its counting
    variance, and the degrees of freedom of the former."""
    for f, b in cb.self_.items():
        n = cn.self_.get(f)
        if n is None or b < DETECT_SHARE * cb.total:
            continue
        c = compare_runs(
            [r.self_.get(f, 0.0) for r in runs.base],
            [r.self_.get(f, 0.0) for r in runs.new],
            paired=runs.judge.paired,
        )
        var = (cb.self_var.get(f, 0.0), cn.self_var.get(f, 0.0))
        calls = (cb.calls.get(f, 0), cn.calls.get(f, 0))
        yield c.se**2, counting(b, n, var, calls).noise ** 2, c.dof


def _pooled_factor(spreads: Iterable[tuple[float, float, float]]) -> float | None:
    """How much the runs' spread exceeds counting noise, for the whole profile: the median over
    the given changes (each its measured variance, its counting variance and its degrees of
    freedom) of their ratio, over the median of a chi-square's ratio at those degrees of
    freedom (so the factor is a variance, not a median's).  None with fewer than 5."""
    spreads = list(spreads)
    ratios = sorted(v / c for v, c, _ in spreads if c > 0)
    dofs = sorted(d for v, c, d in spreads if c > 0 and math.isfinite(d))
    if len(ratios) < 5:
        return None
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    dof = dofs[len(dofs) // 2] if dofs else math.inf
    return median / chi2_ratio(dof, 0.5)


def compare(base: Side, new: Side, settings: Settings | None = None) -> DiffResult:
    s = settings or Settings()
    check_comparable(base, new)
    if s.per is not None and min(s.per) <= 0:
        raise LeadlineError("--per: units of work must be positive")
    whole = whole_program(base, new)
    by_run = s.per is None and s.by_run and whole is not None and whole.sig != 0
    if by_run:
        s = dataclasses.replace(s, per=(1.0, 1.0))
    if s.floor is None:
        s = dataclasses.replace(s, floor=DEFAULT_FLOOR if s.per is None else DEFAULT_PER_FLOOR)
    funcs, bmap, nmap = match_functions(base, new)
    k_base, k_new, unit = _scales(base, new, s)
    runs = None
    if min(base.n_runs, new.n_runs) >= MIN_RUNS:
        # Each side is its mean run, and noise is the spread of the runs.
        run_costs = (_run_costs(base, bmap, s, 0, unit), _run_costs(new, nmap, s, 1, unit))
        cb, cn = _mean_costs(run_costs[0]), _mean_costs(run_costs[1])
        judge_runs = _RunJudge(s.sigma, s.min_delta * cb.total, paired=interleaved(base, new))
        runs = _Runs(*run_costs, judge_runs)
    else:
        cb, cn = _costs(base, bmap, k_base), _costs(new, nmap, k_new)
    judge = _Judge(base, new, (k_base, k_new), s, cb.total)
    counting = _Judge(base, new, (k_base, k_new), s, cb.total, counting=True)
    if runs is not None:
        runs.judge.phi = _pooled_factor(_self_spreads(cb, cn, runs, counting))
    diffs = [_function_diff(i, f, cb, cn, (judge, counting), runs) for i, f in enumerate(funcs)]
    order = sorted(range(len(diffs)), key=lambda i: (_rank_key(diffs[i]), diffs[i].func.name))
    position = {old: new_i for new_i, old in enumerate(order)}
    ranked = [diffs[i] for i in order]
    for r, fd in enumerate(ranked, 1):
        fd.rank = r
    callers = _top_callers(diffs, order, position, (cb, cn), judge)
    changes = _changed_owners(base, new, (bmap, nmap))
    changed = set(changes)
    owners = [owner_of(fd.func.file) for fd in ranked]
    host = 1.0
    if by_run and runs is None and unit != "calls" and whole is not None:
        host = host_speed(ranked, owners, changed, whole, cb.total)
    growth = [fd.total.new / host - fd.total.base for fd in ranked]
    tree, culprits, culprit_nodes = _tree(
        position,
        (cb, cn),
        (judge, counting),
        runs,
        (owners, growth),
        changed,
        s.tree,
        root_real=by_run,
        calls=unit == "calls",
        host=host,
    )
    return DiffResult(
        base,
        new,
        s,
        unit,
        ranked,
        callers,
        *tree,
        whole=whole,
        by_run=by_run,
        culprits=culprits,
        culprit_nodes=culprit_nodes,
        detectable=_detectable(ranked, cb.total, s.sigma),
        changed=sorted(changes.values(), key=lambda c: c.owner),
    )


def host_speed(
    ranked: Sequence[FunctionDiff],
    owners: Sequence[str],
    changed: set[str],
    whole: Change,
    total: float,
) -> float:
    """How much longer the same work took on NEW's host than on BASE's, when fewer than MIN_RUNS
    runs a side are compared per run: the median, weighted by BASE's self cost, of the ratio
    NEW / BASE of the self cost of every function found on both sides whose owner's code did
    not change (the program's own code beside an upgraded package, the standard library under
    one Python).  1.0 (no correction) unless some owner changed (otherwise what changed is not
    known, and a change of the program's main function would read as the host's) and that code
    is at least REFERENCE_SHARE of BASE's `total`.  Kept between 1 and the whole program's
    ratio, and within what the whole program's judge counts as noise (WHOLE_SIGMA x
    WHOLE_FLOOR): unchanged code can run more because changed code calls it more (a retry
    more), and no more than that noise is taken for the host's.  On this project's 2-core
    host, CPU time for the same work moved by 10% between quiet runs and by up to 1.4x beside
    CPU hogs; the culprits are then found at BASE's speed (new cost / this), so that the
    program's unchanged work, slower on a slower host, is not followed as new cost
    (culprits.py)."""
    ratio = whole.ratio
    if not changed or ratio is None or ratio <= 0:
        return 1.0
    points = sorted(
        (fd.self_.new / fd.self_.base, fd.self_.base)
        for fd, owner in zip(ranked, owners, strict=True)
        if owner not in changed and fd.status == "both" and fd.self_.base > 0
    )
    reference = math.fsum(w for _, w in points)
    if reference < REFERENCE_SHARE * total or reference <= 0:
        return 1.0
    seen = 0.0
    median = points[-1][0]
    for r, w in points:
        seen += w
        if seen >= reference / 2:
            median = r
            break
    most = 1 + WHOLE_SIGMA * WHOLE_FLOOR
    low, high = (1.0, min(ratio, most)) if ratio >= 1 else (max(ratio, 1 / most), 1.0)
    return min(max(median, low), high)


@dataclass
class _Runs:
    """Each run's costs on each side, and the judge of their spread."""

    base: list[Costs]
    new: list[Costs]
    judge: _RunJudge

    def assumed(
        self,
        counted: float,
        judge: _Judge,
        b: float,
        n: float,
        var: tuple[float, float] | None,
        calls: tuple[int, int],
    ) -> float | None:
        """The assumed noise model's variance of the change `b` -> `n` of the mean runs, the
        prior of a judge without `phi` (None when it has one: not needed), from its counting
        variance and the full model's (`judge`'s, which adds the run-to-run floor of one run's
        value): the floor's part is a mean's, of independent runs."""
        if self.judge.phi is not None:
            return None
        full = judge(b, n, var, calls).noise ** 2
        return counted + max(full - counted, 0.0) / min(len(self.base), len(self.new))


def _run_costs(side: Side, mapping: list[int], s: Settings, k: int, unit: str) -> list[Costs]:
    """Each run of a side's costs, normalised as the comparison is (`unit`): shares of its own
    total, or cost per unit of work of that run (`s.per[k]` units each)."""
    out = []
    for run, fmap in side.runs:
        if unit == "share":
            if run.total <= 0:
                raise LeadlineError(f"{run.path}: no samples or calls to compare")
            scale = 1.0 / run.total
        else:
            assert s.per is not None
            scale = (run.seconds if unit == "s" and run.seconds else 1.0) / s.per[k]
        out.append(_costs(run, [mapping[m] for m in fmap], scale))
    return out


def _detectable(ranked: list[FunctionDiff], total: float, sigma: float) -> tuple[float, int] | None:
    """The smallest change of a function's own cost that would have been beyond noise, as a
    fraction of its BASE cost: the median over the functions found on both sides with at least
    DETECT_SHARE of BASE's total, and how many those are."""
    values = sorted(
        sigma * fd.self_.noise / fd.self_.base
        for fd in ranked
        if fd.status == "both" and fd.self_.base >= DETECT_SHARE * total and fd.self_.base > 0
    )
    if not values:
        return None
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return median, len(values)


@dataclass(frozen=True)
class Changed:
    """Why an owner's code is taken to differ between the sides: a function of it found on
    both whose first line moved (`func`, `lines`), or the Python versions (`func` None)."""

    owner: str
    func: Func | None
    lines: tuple[int, int] | None
    versions: tuple[str, str] | None = None


def _changed_owners(base: Side, new: Side, maps: tuple[list[int], list[int]]) -> dict[str, Changed]:
    """The owners (culprits.owner_of) whose code differs between the sides, as far as the
    profiles show, each with its first evidence: a function of one file name found on both
    whose first line moved; the standard library when the Python versions differ, and only then
    (Python 3.10's code objects have no qualified names, so two `__init__`s of one module are
    one function there, at two lines).  (A function found on one side only says nothing: code
    that did not change may call it now.)"""
    changed: dict[str, Changed] = {}
    seen: dict[int, tuple[int, str]] = {}
    for side, mapping in zip((base, new), maps, strict=True):
        for i, f in enumerate(side.funcs):
            file_name = os.path.basename(f.module_path)
            first, first_name = seen.setdefault(mapping[i], (f.line, file_name))
            owner = owner_of(f.file)
            # Only a function of one file name on both sides moved (two checkouts of a program
            # are two paths): functions of one name in two files are matched when each side has
            # one (match_functions), which says nothing of a change (decorator 4's generated
            # `clamp` in `<decorator-gen-3>`, where BASE's samples missed the program's own
            # `clamp`, made the program look changed).
            if first != f.line and first_name == file_name and owner != STDLIB:
                changed.setdefault(owner, Changed(owner, f, (first, f.line)))
    versions = (base.meta.get("python_version"), new.meta.get("python_version"))
    if all(versions) and versions[0] != versions[1]:
        changed[STDLIB] = Changed(STDLIB, None, None, (str(versions[0]), str(versions[1])))
    return changed


def _self_costs(c: Costs) -> dict[int, float]:
    return c.self_


def _incl_costs(c: Costs) -> dict[int, float]:
    return c.incl


def _function_diff(
    i: int, f: Func, cb: Costs, cn: Costs, judges: tuple[_Judge, _Judge], runs: _Runs | None
) -> FunctionDiff:
    """Function `i` of the diff's list: where it is found, and its self and total changes,
    judged by the noise model (`judges`: the full one and counting alone), or from the spread
    of the runs when each side has enough of them."""
    judge, counting = judges
    in_b, in_n = i in cb.incl, i in cn.incl
    status = "both" if in_b and in_n else "new" if in_n else "gone"
    calls = (cb.calls.get(i, 0), cn.calls.get(i, 0))
    changes = []
    per_run: Callable[[Costs], dict[int, float]]
    for values, spreads, per_run in (
        ((cb.self_, cn.self_), (cb.self_var, cn.self_var), _self_costs),
        ((cb.incl, cn.incl), (cb.incl_var, cn.incl_var), _incl_costs),
    ):
        b, n = values[0].get(i, 0.0), values[1].get(i, 0.0)
        var = (spreads[0].get(i, 0.0), spreads[1].get(i, 0.0))
        if runs is None:
            changes.append(judge(b, n, var, calls))
            continue
        runs_b = [per_run(c).get(i, 0.0) for c in runs.base]
        runs_n = [per_run(c).get(i, 0.0) for c in runs.new]
        counted = counting(b, n, var, calls).noise ** 2
        assumed = runs.assumed(counted, judge, b, n, var, calls)
        changes.append(runs.judge(b, n, runs_b, runs_n, counted, assumed))
    return FunctionDiff(f, status, changes[0], changes[1])


def _top_callers(
    diffs: list[FunctionDiff],
    order: list[int],
    position: dict[int, int],
    costs: tuple[Costs, Costs],
    judge: _Judge,
) -> list[tuple[int, list[tuple[int, Change]]]]:
    """The callers of the first TOP_CALLERS ranked functions that grew beyond noise: for each
    (its rank's index), the CALLERS_EACH callers (ranked index, or -1: the root of the stack)
    whose calls to it grew most."""
    cb, cn = costs
    callers = []
    for old in order[:TOP_CALLERS]:
        fd = diffs[old]
        if fd.self_.sig <= 0 and fd.total.sig <= 0:
            break
        by_b = cb.callers.get(old, {})
        by_n = cn.callers.get(old, {})
        rows = []
        for caller in set(by_b) | set(by_n):
            b, n = by_b.get(caller, 0.0), by_n.get(caller, 0.0)
            ch = judge(b, n, None, (FEW_CALLS, FEW_CALLS))
            rows.append((position[caller] if caller >= 0 else -1, ch))
        rows.sort(key=lambda r: (-r[1].delta, r[0]))
        callers.append((position[old], rows[:CALLERS_EACH]))
    return callers


def _tree(
    position: dict[int, int],
    costs: tuple[Costs, Costs],
    judges: tuple[_Judge, _Judge],
    runs: _Runs | None,
    by_func: tuple[list[str], list[float]],
    changed: set[str],
    wanted: bool,
    root_real: bool,
    calls: bool = False,
    host: float = 1.0,
) -> tuple[tuple[list[int], list[int], list[Change]], list[Culprit], list[list[int]]]:
    """The merged call-path tree (parents, ranked function indexes, changes; its root alone
    unless `wanted`), the culprits found in it with its recursion folded (culprits.py;
    `by_func`: each ranked function's owner and growth of inclusive cost, `changed`: the owners
    whose code differs, `root_real`: the whole program's growth is beyond noise; `host`: NEW's
    costs are divided by it for the culprits, host_speed) with ranked function indexes, and
    each culprit's nodes in the tree sent."""
    cb, cn = costs
    # Each side's call paths, or each run's (then a side's value is its mean run's).
    sides = [cb, cn] if runs is None else [*runs.base, *runs.new]
    merged, values = _merged_tree(sides)
    funcs = [position[k] if k >= 0 else -1 for k in merged.key]
    totals = (cb.total, cn.total)
    # The culprits are looked for with recursion folded, so that new cost spread over every
    # level of a recursion adds up on one path.  Not in a work diff: calls do not add up so.
    folded = (Folded.unfolded if calls else fold_recursion)(merged.parent, funcs)
    walk = _judged(
        values
        if folded.same
        else [
            _fold_values(folded, v, c.calls_at is not None)
            for v, c in zip(values, sides, strict=True)
        ],
        totals,
        judges,
        runs,
        host,
    )
    owners, func_growth = by_func
    culprits = find_culprits(
        folded.parent,
        folded.func,
        (walk.base, walk.walk_new),
        (walk.walk_full, walk.walk_alone),
        func_growth,
        owners,
        changed,
        root_real,
        calls=calls,
    )
    for c in culprits:
        c.noise = math.sqrt(math.fsum(walk.noise[x] ** 2 for x in c.nodes if x > 0))
        c.new = math.fsum(walk.new[x] for x in c.nodes)  # as NEW ran (its figure is at BASE's)
    parent: list[int] = [-1]
    tfunc: list[int] = [-1]
    tchange: list[Change] = [Change(cb.total, cn.total, 0.0, 0)]
    index = {0: 0}
    if wanted:
        # The tree as it ran: judged already when the culprits' tree is the same.
        shown = walk if folded.same else _judged(values, totals, judges, runs)
        # Shallower nodes first (each level in the order its nodes were met), so that every
        # node's parent comes before it and a tree too large to send loses its deepest levels.
        order = sorted(range(1, len(merged)), key=lambda m: merged.depth[m])
        for m in order[: MAX_TREE_NODES - 1]:
            index[m] = len(parent)
            parent.append(index[merged.parent[m]])
            tfunc.append(funcs[m])
            tchange.append(Change(shown.base[m], shown.new[m], shown.noise[m], shown.full[m]))
    # A culprit's nodes in the tree sent: those that its folded nodes are (not cut back to).
    at: dict[int, list[int]] = {}
    for m in range(1, len(merged)):
        if not folded.back[m] and m in index:
            at.setdefault(folded.node[m], []).append(index[m])
    nodes = [[t for x in c.nodes if x > 0 for t in at.get(x, ())] for c in culprits]
    return (parent, tfunc, tchange), culprits, nodes


def _fold_values(folded: Folded, values: list[Merged], traced: bool) -> list[Merged]:
    """A side's (or run's) merged node values on the folded tree: costs as inclusive values
    (Folded.values; no less than 0, which sums of nodes' own parts, their inclusive values
    less their children's, can miss by a rounding error); a sampled side's variances so too
    (sums of its samples' squared weights); a trace's, which are each call path's spread of
    its calls' times, and calls, summed over the nodes that were not cut back."""
    variances = folded.values([var for _, var, _ in values], additive=not traced)
    return list(
        zip(
            (max(v, 0.0) for v in folded.values([v for v, _, _ in values])),
            (max(var, 0.0) for var in variances),
            (round(k) for k in folded.values([k for _, _, k in values], additive=False)),
            strict=True,
        )
    )


@dataclass
class _Nodes:
    """A tree's nodes judged: each side's value, the change's verdicts (full noise model,
    counting alone) and noise; and the same with NEW at BASE's host speed (walk_*: the same
    arrays when the speeds are alike)."""

    base: array[float]
    new: array[float]
    full: array[int]
    alone: array[int]
    noise: array[float]
    walk_new: array[float]
    walk_full: array[int]
    walk_alone: array[int]


def _judged(
    values: list[list[Merged]],
    totals: tuple[float, float],
    judges: tuple[_Judge, _Judge],
    runs: _Runs | None,
    host: float = 1.0,
) -> _Nodes:
    """Every node of a tree judged (`values`: per side, or per run of each side, each node's
    inclusive cost, variance and calls; node 0 the root, whose values are the sides' totals)."""
    judge, counting = judges
    n_base = 1 if runs is None else len(runs.base)
    size = len(values[0])
    # In arrays: a 50,000-deep tree costs tens of bytes a node here, not objects.
    out = _Nodes(
        array("d", [totals[0]]) * size,
        array("d", [totals[1]]) * size,
        array("b", [0]) * size,
        array("b", [0]) * size,
        array("d", [0.0]) * size,
        array("d", [0.0]),
        array("b", [0]),
        array("b", [0]),
    )
    out.walk_new, out.walk_full, out.walk_alone = out.new, out.full, out.alone
    if host != 1.0:
        assert runs is None, "a side of several runs measures its host's speed in its spread"
        out.walk_new = array("d", [totals[1] / host]) * size
        out.walk_full = array("b", [0]) * size
        out.walk_alone = array("b", [0]) * size
    for m in range(1, size):
        if runs is None:
            (b, vb, kb), (nw, vn, kn) = values[0][m], values[1][m]
        else:
            (b, vb, kb), (nw, vn, kn) = (
                _mean_node([v[m] for v in values[:n_base]]),
                _mean_node([v[m] for v in values[n_base:]]),
            )
        out.base[m], out.new[m] = b, nw
        alone = counting(b, nw, (vb, vn), (kb, kn))
        out.alone[m] = alone.sig
        if runs is None:
            ch = judge(b, nw, (vb, vn), (kb, kn))
        else:
            per_run = [v[m][0] for v in values]
            assumed = runs.assumed(alone.noise**2, judge, b, nw, (vb, vn), (kb, kn))
            ch = runs.judge(b, nw, per_run[:n_base], per_run[n_base:], alone.noise**2, assumed)
        out.full[m], out.noise[m] = ch.sig, ch.noise
        if host != 1.0:
            slow = nw / host
            out.walk_new[m] = slow
            out.walk_alone[m] = counting(b, slow, (vb, vn / host**2), (kb, kn)).sig
            out.walk_full[m] = judge(b, slow, (vb, vn / host**2), (kb, kn)).sig
    return out


Merged = tuple[float, float, int]  # a merged node's inclusive cost, its variance, its calls


def _mean_node(runs: list[Merged]) -> Merged:
    """A merged node's values in the mean run: its cost averaged, its variance a mean's."""
    k = len(runs)
    return (
        math.fsum(v for v, _, _ in runs) / k,
        math.fsum(var for _, var, _ in runs) / (k * k),
        sum(c for _, _, c in runs),
    )


def _mean_costs(runs: list[Costs]) -> Costs:
    """The mean run of a side's runs, function by function: costs averaged over the runs (each
    run counts alike, as in their spread: a run that a busy host made four times longer does not
    outweigh the others), variances a mean's (their sum over the runs' number squared)."""
    c = Costs()
    k = len(runs)
    for r in runs:
        for src, dst, div in (
            (r.self_, c.self_, k),
            (r.incl, c.incl, k),
            (r.self_var, c.self_var, k * k),
            (r.incl_var, c.incl_var, k * k),
        ):
            for f, v in src.items():
                dst[f] = dst.get(f, 0.0) + v / div
        for f, by in r.callers.items():
            into = c.callers.setdefault(f, {})
            for caller, v in by.items():
                into[caller] = into.get(caller, 0.0) + v / k
        for f, n in r.calls.items():
            c.calls[f] = c.calls.get(f, 0) + n
        c.total += r.total / k
    return c


def _merged_tree(sides: list[Costs]) -> tuple[StackTree, list[list[Merged]]]:
    """Both sides' call paths merged into one prefix tree of the diff's functions, and per
    side, each merged node's inclusive cost, its variance from per-call times and its calls (a
    trace's); node by node over each side's tree, so its size is that of the two trees."""
    merged = StackTree()
    values: list[dict[int, Merged]] = []
    for c in sides:
        node_of = [0] * len(c.keys)
        at: dict[int, Merged] = {}
        for n in range(1, len(c.keys)):
            if not c.present[n]:
                continue
            m = merged.child(node_of[c.parent[n]], c.keys[n])
            node_of[n] = m
            b, v, k = at.get(m, (0.0, 0.0, 0))
            at[m] = (
                b + c.incl_at[n],
                v + (c.var_at[n] if c.var_at is not None else 0.0),
                k + (c.calls_at[n] if c.calls_at is not None else 0),
            )
        values.append(at)
    return merged, [[v.get(m, (0.0, 0.0, 0)) for m in range(len(merged))] for v in values]


WORK_MIN_DELTA = 0.005  # a work diff judges changes of this much of BASE's calls and more
WORK_MIN_CALLS = 10  # and of at least this many calls


def work_settings(base: Side, tree: bool = True) -> Settings:
    """How two work sides (work_side) are compared: calls per run, without noise (calls are
    exact), a change judged when it is at least WORK_MIN_DELTA of BASE's calls and
    WORK_MIN_CALLS calls."""
    least = max(WORK_MIN_DELTA, WORK_MIN_CALLS / base.total) if base.total > 0 else 1.0
    return Settings(per=(1.0, 1.0), floor=0.0, min_delta=least, tree=tree, by_run=False)


def fail_reasons(result: DiffResult, pct: float) -> list[str]:
    """Functions present on both sides whose exclusive or inclusive cost grew by more than
    `pct` percent of its BASE value even after the noise is taken off (the change less
    sigma standard deviations), culprits whose new cost so taken is more than `pct` percent of
    the program's (BASE's total: a function new in NEW judged through its callers, when they
    are the program's root, whose total a share cannot show growing), and the whole program's
    time per run likewise when costs are compared per run; one line each, worst first, the
    first naming the most likely cause (the first culprit) unless it is that culprit's own
    line."""
    # -growth, the line, the function's rank (0: none), the culprit's rank (0: not a culprit's)
    out: list[tuple[float, str, int, int]] = []
    s = result.settings
    calls = result.unit == "calls"
    for fd in result.functions:
        if fd.status != "both":
            continue
        for what, ch in (("self", fd.self_), ("total", fd.total)):
            if ch.sig <= 0 or ch.base <= 0:
                continue
            growth = (ch.delta - s.sigma * ch.noise) / ch.base * 100
            if growth > pct:
                name = f"{fd.func.name} ({fd.func.module_path})"
                line = (
                    f"{name} {'calls' if what == 'self' else 'calls under it'} grew "
                    f"{(ch.delta / ch.base) * 100:.0f}% ({ch.base:,.0f} -> {ch.new:,.0f})"
                    if calls
                    else f"{name} {what} cost grew {(ch.delta / ch.base) * 100:.0f}% "
                    f"(at least {growth:.0f}% beyond noise)"
                )
                out.append((-growth, line, fd.rank, 0))
                break
    named = {rank for _, _, rank, _ in out}
    total = result.tree_change[0].base if result.tree_change else 0.0
    for i, c in enumerate(result.culprits, 1):
        if total <= 0 or result.functions[c.func].rank in named:
            continue
        growth = (c.delta - s.sigma * c.noise) / total * 100
        if growth > pct:
            what = "calls" if calls else "cost"
            line = (
                f"{culprit_text(result, c)}: added {c.delta / total * 100:.0f}% of the "
                f"program's {what} (at least {growth:.0f}% beyond noise)"
            )
            out.append((-growth, line, result.functions[c.func].rank, i))
    # The whole program's time only when costs are compared per run: shares (the pytest
    # plugin's default, `diff --shares`) are asked for because they do not change with the
    # machine's speed, and one test's CPU time per run doubled between two runs on a CI machine
    # beside two CPU hogs, with nothing changed (148 -> 293 ms, every function about x2).
    whole = result.whole
    per_run = result.by_run or s.per is not None
    if whole is not None and whole.sig > 0 and per_run:
        growth = (whole.delta - WHOLE_SIGMA * whole.noise) / whole.base * 100
        if growth > pct:
            out.append(
                (
                    -growth,
                    f"the whole program's time per run grew {whole.delta / whole.base * 100:.0f}% "
                    f"(at least {growth:.0f}% beyond noise)",
                    0,
                    0,
                )
            )
    out.sort()
    lines = [line for _, line, _, _ in out]
    if lines and result.culprits and out[0][3] != 1:
        top = result.culprits[0]
        # Said unless the first line names the culprit already (its own code grew).
        if top.into is not None or result.functions[top.func].rank != out[0][2]:
            lines[0] += f"; most likely cause: {culprit_text(result, top)}"
    return lines


def parse_per(text: str) -> tuple[float, float]:
    """``N`` (both sides did N units of work) or ``N,M`` (BASE did N, NEW did M)."""
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or not all(v > 0 and math.isfinite(v) for v in values):
        raise LeadlineError(f"--per {text!r}: give the units of work as N or BASE_N,NEW_N")
    return (values[0], values[-1])


# -- the machine form -------------------------------------------------------------------------
def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def _side_json(side: Side, units: float | None) -> dict[str, Any]:
    return {
        "path": side.path,
        "kind": side.kind,
        "measure": side.measure,
        "total": side.total,
        "unit": side.unit,
        "argv": side.meta.get("argv"),
        "python_version": side.meta.get("python_version"),
        "units_of_work": units,
        "quantum": side.quantum,
        "disturbance_ns": side.jump if side.kind == "trace" else None,
        "raced": side.racy if side.kind == "sample" else None,
        "runs": side.n_runs,
    }


def _func_json(r: DiffResult, index: int) -> dict[str, Any]:
    """A ranked function by its index and where it is."""
    f = r.functions[index].func
    return {"function": index, "name": f.name, "module_path": f.module_path, "line": f.line}


def culprit_text(r: DiffResult, c: Culprit) -> str:
    """One culprit in a line: ``find_plugins (mylib/plugins.py:47), now calls entry_points
    (importlib/metadata/__init__.py:1020)``."""

    def where(index: int) -> str:
        f = r.functions[index].func
        return f"{f.name} ({f.module_path}:{f.line})"

    return where(c.func) + (f", now calls {where(c.into)}" if c.into is not None else "")


def to_json(r: DiffResult, limit: int | None = None) -> dict[str, Any]:
    """The diff's machine form; its schema is documented in docs/diff.md."""
    per = r.settings.per
    funcs = r.functions if limit is None else r.functions[:limit]
    return {
        "schema": SCHEMA_VERSION,
        "kind": "diff",
        "base": _side_json(r.base, per[0] if per else None),
        "new": _side_json(r.new, per[1] if per else None),
        "normalization": {
            "by": "run" if r.by_run else "per" if per else "total",
            "unit": r.unit,
        },
        "whole": None
        if r.whole is None
        else {
            "unit": "s",
            "base": _num(r.whole.base),
            "new": _num(r.whole.new),
            "ratio": _num(r.whole.ratio),
            "noise": _num(r.whole.noise),
            "sig": r.whole.sig,
            "floor": WHOLE_FLOOR,
            "sigma": WHOLE_SIGMA,
        },
        "culprits": [
            {
                "rank": i,
                **_func_json(r, c.func),
                "into": None if c.into is None else _func_json(r, c.into),
                "owner": c.owner,
                "base": _num(c.base),
                "new": _num(c.new),
                "delta": _num(c.delta),
                "nodes": nodes,
            }
            for i, (c, nodes) in enumerate(zip(r.culprits, r.culprit_nodes, strict=True), 1)
        ],
        "changed": [
            {
                "owner": c.owner,
                "function": None
                if c.func is None
                else {"name": c.func.name, "module_path": c.func.module_path},
                "lines": None if c.lines is None else list(c.lines),
                "python_versions": None if c.versions is None else list(c.versions),
            }
            for c in r.changed
        ],
        "sigma": r.settings.sigma,
        "noise_from_runs": r.from_runs,
        "paired": r.paired,
        "detectable": None
        if r.detectable is None
        else {"self": _num(r.detectable[0]), "functions": r.detectable[1]},
        "noise_floor": r.settings.floor,
        "min_delta": r.settings.min_delta,
        "summary": {
            "grew": len(r.grew),
            "shrank": len(r.shrank),
            "functions": len(r.functions),
        },
        "functions": [
            {
                "name": fd.func.name,
                "file": fd.func.file,
                "module_path": fd.func.module_path,
                "line": fd.func.line,
                "status": fd.status,
                "base_self": fd.self_.base,
                "new_self": fd.self_.new,
                "delta_self": fd.self_.delta,
                "ratio_self": _num(fd.self_.ratio),
                "noise_self": fd.self_.noise,
                "sig_self": fd.self_.sig,
                "base_total": fd.total.base,
                "new_total": fd.total.new,
                "delta_total": fd.total.delta,
                "ratio_total": _num(fd.total.ratio),
                "noise_total": fd.total.noise,
                "sig_total": fd.total.sig,
                "rank": fd.rank,
            }
            for fd in funcs
        ],
        "callers": [
            {
                "function": f,
                "callers": [
                    {
                        "function": c if c >= 0 else None,
                        "base": ch.base,
                        "new": ch.new,
                        "delta": ch.delta,
                    }
                    for c, ch in rows
                ],
            }
            for f, rows in r.callers
        ],
        "tree": {
            "parent": r.tree_parent,
            "func": r.tree_func,
            "base": [c.base for c in r.tree_change],
            "new": [c.new for c in r.tree_change],
            "sig": [c.sig for c in r.tree_change],
        },
        "warnings": r.base.warnings + r.new.warnings,
    }


def diff_paths(
    base: str | Sequence[str],
    new: str | Sequence[str],
    settings: Settings | None = None,
    *,
    idle: bool = False,
    sample_type: str | None = None,
) -> DiffResult:
    """The Python API of ``leadline diff``: read both inputs (each a profile, or several runs:
    a list of them, or a directory of captures) and compare them."""
    sides = [
        load_runs([p] if isinstance(p, str) else p, idle=idle, sample_type=sample_type)
        for p in (base, new)
    ]
    return compare(sides[0], sides[1], settings)
