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
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
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
from ..errors import LeadlineError
from ..fleet.pyroscope import FleetQuery, is_fleet_url, parse_fleet_url, select_merge_profile
from .model import Stack
from .samples import load_profile, selected
from .stacktree import StackTree, TreePath
from .trace import Node, analyse

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
    unit: str  # "samples" or "ns"
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
    # reads its weight came from (_row_spread; a read counted one weighs 1), which is how much
    # a sum of such reads varies.
    squares: bool = False

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

    def describe(self) -> str:
        what = {
            "sample": f"{self.measure}-mode sampling capture",
            "trace": "trace capture",
            "pprof": f"pprof profile ({self.measure})",
            "collapsed": "collapsed stacks",
            "pyroscope": f"Pyroscope fleet aggregate ({self.measure})",
        }[self.kind]
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
    # distinct stack from the reads its weight came from (_row_spread): the side's quantum, what
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
        squares = _row_spread(s, float(w), s.cpu_sq if cpu_weights else float(w), idle)
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
        side.warnings.append(f"{path}: incomplete capture; comparing the samples it holds")
    return side


def _row_spread(s: Stack, w: float, squares: float, idle: bool) -> float:
    """How much the weight `w` of a distinct stack's samples varies, as the sum of the squared
    weights of the reads it came from.  The records' own squares (`squares`) count too little
    when some records are no reads but weight given to earlier ones (SAMPLE_GIVEN: a late tick
    or reads that could not stand for where the thread was, spread over its fair samples): in
    a 0.4 s run with most reads deferred, one stack's 58 records held 15.6 ms from a few reads,
    not 58.  Those reads' weights are not in the capture; as equal parts of `w` they vary
    least, so that is the bound taken with the records' squares."""
    reads = s.reads if idle else s.reads - s.idle_reads
    return max(squares, w * w / reads) if reads > 0 else w * w


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
    side.rate, side.jump = _disturbance(t.nodes)
    # A function's inclusive spread: that of its nodes with no caller of the same function
    # above them (a recursion's inner calls are inside the outer call's time).
    outer = side.tree.outermost(side.tree.key)
    for node in range(1, len(side.tree)):
        if outer[node]:
            f = side.tree.key[node]
            side.incl_var[f] = side.incl_var.get(f, 0.0) + side.node_var[node]
    if not cap.complete or cap.damage:
        side.warnings.append(f"{path}: incomplete capture; comparing the calls it holds")
    return side


def _disturbance(nodes: Iterable[Node]) -> tuple[float, float]:
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
    """
    spread = time = largest = 0.0
    for n in nodes:
        if n.calls >= 2:
            v = n.spread("self")
            spread += v
            time += n.self_ns
            largest = max(largest, v)
    return (spread / time if time > 0 else 0.0), math.sqrt(largest)


def _from_foreign(path: str, prof: ForeignProfile) -> Side:
    intern = _Interner()
    stacks = [
        (tuple(intern(f.name, f.file, f.func_line) for f in frames), w) for frames, w in prof.stacks
    ]
    tree = StackTree()
    weight = [0.0]
    for p, w in stacks:
        node = tree.add(p)
        weight.extend([0.0] * (len(tree) - len(weight)))
        weight[node] += w
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
        node_var=[0.0] * len(weight),
        node_calls=[0] * len(weight),
    )


def _smallest(weights: Iterable[float]) -> float:
    """The size of one sample when the file does not say: the lightest stack's weight (the
    rarest stacks were seen once), 1 for counts."""
    return min((w for w in weights if w > 0), default=1.0)


Fetch = Callable[[FleetQuery], bytes]  # asks Pyroscope (select_merge_profile)


def _fleet_quantum(query: FleetQuery, side: Side, fetch: Fetch) -> float:
    """The weight of one sample of a fleet aggregate.  Pyroscope's merged profile says its
    period is one second whatever the rate was, so for CPU time the sample count comes from the
    companion ``samples:count`` profile that leadline's agent pushes alongside."""
    if side.unit != "ns" or not query.profile_type.startswith("process_cpu:cpu:nanoseconds:"):
        return side.quantum
    counts_type = query.profile_type.replace(":cpu:nanoseconds:", ":samples:count:", 1)
    try:
        counts = read_pprof(query.shown, fetch(replace(query, profile_type=counts_type)))
    except LeadlineError:
        return _smallest(side.weight)
    n = sum(w for _, w in counts.stacks)
    return side.total / n if n > 0 else _smallest(side.weight)


def fleet_side(
    query: FleetQuery, fetch: Fetch = select_merge_profile, sample_type: str | None = None
) -> Side:
    """A fleet aggregate from Pyroscope: the server's answers to `query` (and to its companion
    sample-count query), which `fetch` asks for, read as a Side.  Everything a server says is
    parsed here, so this is what the fuzzer feeds with hostile answers."""
    prof = read_pprof(query.shown, fetch(query), sample_type)
    if not prof.stacks:
        raise LeadlineError(f"{query.shown}: no profiles in that time range")
    side = _from_foreign(query.shown, prof)
    side.kind = "pyroscope"
    side.quantum = _fleet_quantum(query, side, fetch)
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
    # A sampled side's spreads (sums of its reads' squared weights, _row_spread), per node:
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
    tree: bool = True  # build the merged call-path tree (for the HTML flame graph)


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
    unit: str  # "share", "s" or "samples": what the normalised values are
    functions: list[FunctionDiff]  # ranked
    callers: list[tuple[int, list[tuple[int, Change]]]]  # index into functions; caller index or -1
    tree_parent: list[int]
    tree_func: list[int]  # index into functions (-1 for the root)
    tree_change: list[Change]

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
    n_base, n_new = s.per
    if base.seconds is not None and new.seconds is not None:
        return base.seconds / n_base, new.seconds / n_new, "s"
    if base.unit == new.unit == "samples":
        return 1.0 / n_base, 1.0 / n_new, "samples"
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
        self, base: Side, new: Side, scales: tuple[float, float], s: Settings, total: float
    ) -> None:
        """`scales` normalise BASE's and NEW's weights; `total` is BASE's, normalised."""
        k_base, k_new = scales
        self.s = s
        self.shares = s.per is None
        self.floor = s.floor or 0.0
        # Never beyond noise: less than min_delta of the total; for a function called once or
        # twice on a traced side, less than one disturbance of either trace's host (a
        # preempted call).
        self.min_abs = s.min_delta * total
        self.few_abs = max(base.jump * k_base, new.jump * k_new)
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


def compare(base: Side, new: Side, settings: Settings | None = None) -> DiffResult:
    s = settings or Settings()
    check_comparable(base, new)
    if s.per is not None and min(s.per) <= 0:
        raise LeadlineError("--per: units of work must be positive")
    if s.floor is None:
        s = dataclasses.replace(s, floor=DEFAULT_FLOOR if s.per is None else DEFAULT_PER_FLOOR)
    funcs, bmap, nmap = match_functions(base, new)
    k_base, k_new, unit = _scales(base, new, s)
    cb = _costs(base, bmap, k_base)
    cn = _costs(new, nmap, k_new)
    judge = _Judge(base, new, (k_base, k_new), s, cb.total)
    diffs = [_function_diff(i, f, cb, cn, judge) for i, f in enumerate(funcs)]
    order = sorted(range(len(diffs)), key=lambda i: (_rank_key(diffs[i]), diffs[i].func.name))
    position = {old: new_i for new_i, old in enumerate(order)}
    ranked = [diffs[i] for i in order]
    for r, fd in enumerate(ranked, 1):
        fd.rank = r
    callers = _top_callers(diffs, order, position, (cb, cn), judge)
    tree = _tree(position, (cb, cn), judge, s.tree)
    return DiffResult(base, new, s, unit, ranked, callers, *tree)


def _function_diff(i: int, f: Func, cb: Costs, cn: Costs, judge: _Judge) -> FunctionDiff:
    """Function `i` of the diff's list: where it is found, and its self and total changes."""
    in_b, in_n = i in cb.incl, i in cn.incl
    status = "both" if in_b and in_n else "new" if in_n else "gone"
    calls = (cb.calls.get(i, 0), cn.calls.get(i, 0))
    b, n = cb.self_.get(i, 0.0), cn.self_.get(i, 0.0)
    self_ch = judge(b, n, (cb.self_var.get(i, 0.0), cn.self_var.get(i, 0.0)), calls)
    b, n = cb.incl.get(i, 0.0), cn.incl.get(i, 0.0)
    total_ch = judge(b, n, (cb.incl_var.get(i, 0.0), cn.incl_var.get(i, 0.0)), calls)
    return FunctionDiff(f, status, self_ch, total_ch)


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
    position: dict[int, int], costs: tuple[Costs, Costs], judge: _Judge, wanted: bool
) -> tuple[list[int], list[int], list[Change]]:
    """The merged call-path tree (parents, ranked function indexes, changes), its root alone
    unless `wanted`."""
    cb, cn = costs
    parent: list[int] = [-1]
    tfunc: list[int] = [-1]
    tchange: list[Change] = [Change(cb.total, cn.total, 0.0, 0)]
    if not wanted:
        return parent, tfunc, tchange
    merged, values = _merged_tree([cb, cn])
    # Shallower nodes first (each level in the order its nodes were met), so that every node's
    # parent comes before it and a tree too large to send loses its deepest levels.
    order = sorted(range(1, len(merged)), key=lambda m: merged.depth[m])
    kept = order[: MAX_TREE_NODES - 1]
    index = {0: 0}
    for m in kept:
        index[m] = len(parent)
        parent.append(index[merged.parent[m]])
        tfunc.append(position[merged.key[m]])
        (b, vb, kb), (nw, vn, kn) = values[0][m], values[1][m]
        tchange.append(judge(b, nw, (vb, vn), (kb, kn)))
    return parent, tfunc, tchange


Merged = tuple[float, float, int]  # a merged node's inclusive cost, its variance, its calls


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


def fail_reasons(result: DiffResult, pct: float) -> list[str]:
    """Functions present on both sides whose exclusive or inclusive cost grew by more than
    `pct` percent of its BASE value even after the noise is taken off (the change less
    sigma standard deviations); one line each, worst first."""
    out: list[tuple[float, str]] = []
    s = result.settings
    for fd in result.functions:
        if fd.status != "both":
            continue
        for what, ch in (("self", fd.self_), ("total", fd.total)):
            if ch.sig <= 0 or ch.base <= 0:
                continue
            growth = (ch.delta - s.sigma * ch.noise) / ch.base * 100
            if growth > pct:
                out.append(
                    (
                        -growth,
                        f"{fd.func.name} ({fd.func.module_path}) {what} cost grew "
                        f"{(ch.delta / ch.base) * 100:.0f}% (at least {growth:.0f}% beyond noise)",
                    )
                )
                break
    out.sort()
    return [line for _, line in out]


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
    }


def to_json(r: DiffResult, limit: int | None = None) -> dict[str, Any]:
    """The diff's machine form; its schema is documented in docs/diff.md."""
    per = r.settings.per
    funcs = r.functions if limit is None else r.functions[:limit]
    return {
        "schema": SCHEMA_VERSION,
        "kind": "diff",
        "base": _side_json(r.base, per[0] if per else None),
        "new": _side_json(r.new, per[1] if per else None),
        "normalization": {"by": "per" if per else "total", "unit": r.unit},
        "sigma": r.settings.sigma,
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
    base: str,
    new: str,
    settings: Settings | None = None,
    *,
    idle: bool = False,
    sample_type: str | None = None,
) -> DiffResult:
    """The Python API of ``leadline diff``: read both inputs and compare them."""
    sides: Sequence[Side] = [load_side(p, idle=idle, sample_type=sample_type) for p in (base, new)]
    return compare(sides[0], sides[1], settings)
