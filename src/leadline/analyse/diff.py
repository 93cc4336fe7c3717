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
from .samples import load_profile, selected
from .trace import analyse

SCHEMA_VERSION = 1
DEFAULT_SIGMA = 4.0
DEFAULT_FLOOR = 0.10  # shares: a function's share varies this much between identical runs
DEFAULT_PER_FLOOR = 0.15  # cost per unit of work: and the machine's speed varies too
DEFAULT_MIN_DELTA = 0.002  # of the total (share mode) or of the base's total cost per unit
TOP_CALLERS = 3  # regressions whose callers are listed
CALLERS_EACH = 8  # callers listed for each
MAX_TREE_NODES = 200_000
MAX_COUNTS = 10_000_000  # collapsed weights adding up to more are not sample counts

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
    stacks: list[tuple[tuple[int, ...], float]]  # function indexes, outermost first
    meta: dict[str, Any] = field(default_factory=dict)
    # A trace's spreads: the variance of each path's inclusive weight, and of each function's
    # exclusive and inclusive weight (from per-call times).  Empty for sampled sides.
    path_var: dict[tuple[int, ...], float] = field(default_factory=dict)
    self_var: dict[int, float] = field(default_factory=dict)
    incl_var: dict[int, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(w for _, w in self.stacks)

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


def _merge(stacks: Iterable[tuple[tuple[int, ...], float]]) -> list[tuple[tuple[int, ...], float]]:
    out: dict[tuple[int, ...], float] = {}
    for path, w in stacks:
        if w:
            out[path] = out.get(path, 0.0) + w
    return list(out.items())


def _from_sampling(path: str, cap: Capture, idle: bool) -> Side:
    p = load_profile(cap)
    intern = _Interner()
    func_of = [intern(f.name, f.file, f.func_line) for f in p.frames]
    stacks = _merge(
        (tuple(func_of[i] for i in s.frames), float(w)) for s, w in selected(p, idle, "samples")
    )
    seconds = 1.0 / p.rate_hz if p.rate_hz > 0 else None
    if p.mode == "cpu":
        # A sample stands for the CPU time its thread used since the one before, which the
        # sampler measured: on a busy machine its ticks come late and fewer, but the CPU time
        # the samples cover stays right.  Costs per unit of work use that time.
        n = sum(w for _, w in stacks)
        cpu_ns = sum(w for _, w in selected(p, idle, "cpu"))
        if n > 0 and cpu_ns > 0:
            seconds = cpu_ns * 1e-9 / n
    side = Side(
        path=path,
        kind="sample",
        measure=p.mode,
        unit="samples",
        quantum=1.0,
        seconds=seconds,
        funcs=intern.funcs,
        stacks=stacks,
        meta=dict(p.meta),
    )
    if not p.complete:
        side.warnings.append(f"{path}: incomplete capture; comparing the samples it holds")
    return side


def _from_trace(path: str, cap: Capture) -> Side:
    t = analyse(cap)
    intern = _Interner()
    func_ids: dict[int, int] = {}
    paths: list[tuple[int, ...]] = []
    side = Side(
        path=path,
        kind="trace",
        measure="trace",
        unit="ns",
        quantum=0.0,
        seconds=1e-9,
        funcs=intern.funcs,
        stacks=[],
        meta=dict(cap.meta),
    )
    weights: dict[tuple[int, ...], float] = {}
    for n in t.nodes:  # parents come before their children
        f = func_ids.get(n.func)
        if f is None:
            fn = cap.function(n.func)
            f = func_ids[n.func] = intern(fn.label, fn.file, fn.line)
        above = paths[n.parent] if n.parent >= 0 else ()
        here = (*above, f)
        paths.append(here)
        weights[here] = weights.get(here, 0.0) + n.self_ns
        side.path_var[here] = side.path_var.get(here, 0.0) + n.spread("incl")
        side.self_var[f] = side.self_var.get(f, 0.0) + n.spread("self")
        if f not in above:
            side.incl_var[f] = side.incl_var.get(f, 0.0) + n.spread("incl")
    side.stacks = _merge(weights.items())
    if not cap.complete or cap.damage:
        side.warnings.append(f"{path}: incomplete capture; comparing the calls it holds")
    return side


def _from_foreign(path: str, prof: ForeignProfile) -> Side:
    intern = _Interner()
    stacks = _merge(
        (tuple(intern(f.name, f.file, f.func_line) for f in frames), w) for frames, w in prof.stacks
    )
    seconds: float | None = None
    unit = "samples"
    quantum = 1.0
    if prof.unit == "nanoseconds":
        # A time weight: one sample weighs a period (when the file says which).
        unit, seconds = "ns", 1e-9
        quantum = float(prof.period) if prof.period > 0 else _smallest(stacks)
    elif prof.unit == "count" and prof.period > 0 and prof.period_type in ("cpu", "wall"):
        seconds = prof.period * 1e-9
    elif prof.unit != "count":
        raise LeadlineError(
            f"{path}: pprof sample type {prof.sample_type!r} is in {prof.unit!r}, not time or "
            "samples (choose one with --sample-type)"
        )
    if prof.kind == "collapsed" and sum(w for _, w in stacks) > MAX_COUNTS:
        quantum = _smallest(stacks)  # not counts: times (leadline's cpu-mode export) or bytes
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
        stacks=stacks,
        meta={"comments": prof.comments},
    )


def _smallest(stacks: list[tuple[tuple[int, ...], float]]) -> float:
    """The size of one sample when the file does not say: the lightest stack's weight (the
    rarest stacks were seen once), 1 for counts."""
    return min((w for _, w in stacks if w > 0), default=1.0)


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
        return _smallest(side.stacks)
    n = sum(w for _, w in counts.stacks)
    return side.total / n if n > 0 else _smallest(side.stacks)


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
    """One side's normalised costs, per function and per call path."""

    self_: dict[int, float] = field(default_factory=dict)
    incl: dict[int, float] = field(default_factory=dict)
    self_var: dict[int, float] = field(default_factory=dict)
    incl_var: dict[int, float] = field(default_factory=dict)
    paths: dict[tuple[int, ...], float] = field(default_factory=dict)
    path_var: dict[tuple[int, ...], float] = field(default_factory=dict)
    callers: dict[int, dict[int, float]] = field(default_factory=dict)  # f -> caller (-1) -> w
    total: float = 0.0


def _costs(side: Side, mapping: list[int], scale: float, tree: bool, shares: bool) -> Costs:
    """One side's costs, `scale`d.  A sampled weight's variance is Poisson (k samples: k), or
    binomial for `shares` (k of the side's n samples: k (1 - k/n)): the share of a function that
    takes most of the time cannot vary as much as a count that large could."""
    c = Costs()
    sampled = side.kind != "trace"
    q = side.quantum * scale  # a sample's weight after scaling
    for local_path, w in side.stacks:
        path = tuple(mapping[i] for i in local_path)
        v = w * scale
        c.total += v
        if path:
            c.self_[path[-1]] = c.self_.get(path[-1], 0.0) + v
        seen: set[int] = set()
        for depth, f in enumerate(path):
            if f in seen:
                continue
            seen.add(f)
            c.incl[f] = c.incl.get(f, 0.0) + v
            caller = path[depth - 1] if depth else -1
            by = c.callers.setdefault(f, {})
            by[caller] = by.get(caller, 0.0) + v
        if tree:
            for depth in range(1, len(path) + 1):
                prefix = path[:depth]
                c.paths[prefix] = c.paths.get(prefix, 0.0) + v
    if sampled:
        c.self_var = {f: _sample_var(v, q, shares) for f, v in c.self_.items()}
        c.incl_var = {f: _sample_var(v, q, shares) for f, v in c.incl.items()}
        c.path_var = {p: _sample_var(v, q, shares) for p, v in c.paths.items()}
    else:
        s2 = scale * scale
        c.self_var = {mapping[f]: v * s2 for f, v in side.self_var.items()}
        c.incl_var = {mapping[f]: v * s2 for f, v in side.incl_var.items()}
        c.path_var = {tuple(mapping[i] for i in p): v * s2 for p, v in side.path_var.items()}
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


def _floor_term(x: float, s: Settings) -> float:
    """The run-to-run floor's standard deviation for a value `x`: a fraction of it per unit of
    work; as a share, of the smaller of it and the rest (a function at 76% moves as much as the
    24% that is everything else, and one at 100% cannot move at all)."""
    floor = s.floor or 0.0
    return floor * (x if s.per is not None else min(x, max(1.0 - x, 0.0)))


def _change(b: float, n: float, var: float, s: Settings, min_abs: float) -> Change:
    noise = math.sqrt(var + _floor_term(b, s) ** 2 + _floor_term(n, s) ** 2)
    d = n - b
    sig = 0
    if abs(d) > s.sigma * noise and abs(d) > min_abs:
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


def compare(base: Side, new: Side, settings: Settings | None = None) -> DiffResult:
    s = settings or Settings()
    check_comparable(base, new)
    if s.per is not None and min(s.per) <= 0:
        raise LeadlineError("--per: units of work must be positive")
    if s.floor is None:
        s = dataclasses.replace(s, floor=DEFAULT_FLOOR if s.per is None else DEFAULT_PER_FLOOR)
    funcs, bmap, nmap = match_functions(base, new)
    k_base, k_new, unit = _scales(base, new, s)
    shares = s.per is None
    cb = _costs(base, bmap, k_base, s.tree, shares)
    cn = _costs(new, nmap, k_new, s.tree, shares)
    min_abs = s.min_delta * cb.total

    diffs = []
    for i, f in enumerate(funcs):
        in_b, in_n = i in cb.incl, i in cn.incl
        status = "both" if in_b and in_n else "new" if in_n else "gone"
        self_ch = _change(
            cb.self_.get(i, 0.0),
            cn.self_.get(i, 0.0),
            cb.self_var.get(i, 0.0) + cn.self_var.get(i, 0.0),
            s,
            min_abs,
        )
        total_ch = _change(
            cb.incl.get(i, 0.0),
            cn.incl.get(i, 0.0),
            cb.incl_var.get(i, 0.0) + cn.incl_var.get(i, 0.0),
            s,
            min_abs,
        )
        diffs.append(FunctionDiff(f, status, self_ch, total_ch))
    order = sorted(range(len(diffs)), key=lambda i: (_rank_key(diffs[i]), diffs[i].func.name))
    position = {old: new_i for new_i, old in enumerate(order)}
    ranked = [diffs[i] for i in order]
    for r, fd in enumerate(ranked, 1):
        fd.rank = r

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
            var = _sample_var(b, base.quantum * k_base, shares) + _sample_var(
                n, new.quantum * k_new, shares
            )
            ch = _change(b, n, var, s, min_abs)
            rows.append((position[caller] if caller >= 0 else -1, ch))
        rows.sort(key=lambda r: (-r[1].delta, r[0]))
        callers.append((position[old], rows[:CALLERS_EACH]))

    parent: list[int] = [-1]
    tfunc: list[int] = [-1]
    root = Change(cb.total, cn.total, 0.0, 0)
    tchange: list[Change] = [root]
    if s.tree:
        node_of: dict[tuple[int, ...], int] = {(): 0}
        # Shorter paths first, so every node's parent exists before it.
        for path in sorted(set(cb.paths) | set(cn.paths), key=len):
            if len(parent) >= MAX_TREE_NODES:
                break
            up = node_of.get(path[:-1])
            if up is None:
                continue
            node_of[path] = len(parent)
            parent.append(up)
            tfunc.append(position[path[-1]])
            tchange.append(
                _change(
                    cb.paths.get(path, 0.0),
                    cn.paths.get(path, 0.0),
                    cb.path_var.get(path, 0.0) + cn.path_var.get(path, 0.0),
                    s,
                    min_abs,
                )
            )
    return DiffResult(base, new, s, unit, ranked, callers, parent, tfunc, tchange)


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
