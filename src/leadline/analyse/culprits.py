"""Where a diff's new cost enters the program: its *culprits*.

A ranking by growth of self cost names the leaf where the new time is spent, and that is often
a standard-library function (a file open, an introspection helper) that the code which changed
now calls much more.  The question a diff is asked is which code changed, so the culprits are
found in the merged call tree of both sides, with its recursion folded (fold_recursion: new
cost spread over every level of a recursion adds up on one path), from the top down:

1. **Real growth.**  A call path's growth is real when it is beyond noise by the diff's full
   noise model (counting noise, run-to-run floor, raced reads), or when the whole program got
   slower beyond noise (then the root's growth is real).
2. **Following it down.**  From a path whose growth is real, the growth is followed into the
   child that carries at least half of it (``EXPLAINED``), provided that child's own growth is
   beyond counting noise (a path's growth counts as far as its function's cost over the whole
   tree grew: cost that only moved to another call path, under a wrapper that changed shape,
   is not new; and a path's new cost is at most its own code's growth and its children's new
   cost, so a wrapper that is new on one side does not count the moved cost under it): once a
   caller's growth is known to be real, the run-to-run floor no longer decides where it went,
   only whether enough samples say so.  Any other child whose
   growth is beyond noise on its own is followed too.  A path where no single child carries
   half of its growth is an **entry**: the new cost enters there, in its own code or spread
   over many callees.
3. **The code, not the leaf.**  Each frame belongs to an *owner*: the program (scripts and
   their own modules), an installed top-level package, or Python's standard library.  The
   culprit of an entry is the innermost frame on its path whose owner's code differs between
   the two sides (a function found on both whose first line moved; the standard library
   differs only when the Python versions do); if none is known to differ, the innermost frame
   that is not standard library; the entry itself if the whole path is.  When the culprit is
   above its entry, the first frame after it on the path is what it *now calls*, and the
   culprit's figure is the new cost of that call (everything that came through it); otherwise
   the entry's.
4. **Ranking.**  Entries with the same culprit (and call) add up; culprits rank by that
   growth, largest first.

Everything is one or two passes over the merged tree, without recursion, so a 50,000-deep
call tree costs its size.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

EXPLAINED = 0.5  # a child carrying this much of its caller's growth is where the growth goes
MAX_CULPRITS = 5

STDLIB = "the standard library"
PROGRAM = "the program"

_SITE = re.compile(r".*/(?:site-packages|dist-packages)/")
_STDLIB_DIR = re.compile(r".*/lib/python\d+\.\d+t?/")


def owner_of(file: str) -> str:
    """Whose code a file is: an installed package's top-level name, the standard library, or
    the program."""
    f = file.replace("\\", "/")
    if f.startswith("<frozen ") or f in ("<built-in>", "<native>"):
        return STDLIB
    m = _SITE.match(f)
    if m:
        top = f[m.end() :].split("/", 1)[0]
        return top[:-3] if top.endswith(".py") else top
    if _STDLIB_DIR.match(f):
        return STDLIB
    return PROGRAM


@dataclass
class Culprit:
    func: int  # the culprit's index in the diff's function list
    into: int | None  # the first frame after it on the growth's path, when it is above it
    base: float  # the entries' inclusive cost on each side (normalised)
    new: float
    owner: str
    # The merged tree's nodes its figure comes from: its calls into other code, else its entries.
    nodes: list[int] = field(default_factory=list)
    noise: float = 0.0  # of its change (the nodes' noises, added as independent ones)
    # Its figure: the nodes' growth as far as it is new cost (new_cost), which `base` -> `new`
    # overstates where cost only moved under it.
    grown: float = 0.0

    @property
    def delta(self) -> float:
        return self.grown


def find_culprits(
    parent: Sequence[int],
    func: Sequence[int],
    values: tuple[Sequence[float], Sequence[float]],
    sig: tuple[Sequence[int], Sequence[int]],
    func_growth: Sequence[float],
    owners: Sequence[str],
    changed: set[str],
    root_real: bool,
    calls: bool = False,
) -> list[Culprit]:
    """The culprits of a merged tree (node 0 the root; parents before children): `func` gives
    each node's function, `values` its inclusive cost on each side (BASE, NEW), `sig` whether
    its growth is beyond noise by the full noise model and by counting noise alone (1 grew);
    `func_growth` each function's growth of inclusive cost over the whole tree, `owners` each
    function's owner, `changed` the owners whose code differs.  `calls`: the costs count
    calls (a work diff), so a node's own growth is more calls made by its caller, and the
    caller is where that growth comes from.  Ranked, at most MAX_CULPRITS."""
    base, new = values
    full, counting = sig
    grown = new_cost(parent, func, values, func_growth).__getitem__

    n_nodes = len(parent)
    first = array("q", [-1]) * n_nodes
    after = array("q", [-1]) * n_nodes
    for n in range(n_nodes - 1, 0, -1):
        p = parent[n]
        after[n] = first[p]
        first[p] = n

    def kids(n: int) -> Iterator[int]:
        c = first[n]
        while c >= 0:
            yield c
            c = after[c]

    entries: list[int] = []
    # Nodes whose growth is real, to follow down; the top-down walk finds the first ones.
    todo = [0] if root_real and new[0] > base[0] else []
    walk = [] if todo else [0]
    while walk:
        n = walk.pop()
        for c in kids(n):
            (todo if full[c] > 0 else walk).append(c)
    while todo:
        n = todo.pop()
        more = [c for c in kids(n) if grown(c) > 0]
        best = max(more, key=grown, default=-1)
        if best < 0 or grown(best) < EXPLAINED * grown(n) or counting[best] <= 0:
            entries.append(n)
            continue
        todo.append(best)
        todo.extend(c for c in more if c != best and full[c] > 0)
    if not any(e > 0 for e in entries):  # the root alone is no culprit
        return []
    found: dict[tuple[int, int], Culprit] = {}
    seen: set[int] = set()
    culprit_at, next_at = _culprits_by_node(parent, func, owners, changed)
    own = _own_growth(parent, base, new) if calls else None
    for e in entries:
        if e == 0:
            continue
        at, below = culprit_at[e], next_at[e]
        p = parent[e]
        called = own is not None and p > 0 and own[e] >= EXPLAINED * (new[e] - base[e])
        if called:
            # Its own calls grew: the code that makes them is its caller's (or above it).
            at, below = culprit_at[p], next_at[p] or e
        f = func[at]
        into: int | None = func[below] if below > 0 else None
        if into is not None and owners[into] == owners[f] and not (called and below == e):
            into = None
        key = (f, -1 if into is None else into)
        cul = found.setdefault(key, Culprit(f, into, 0.0, 0.0, owners[f]))
        # Its figure: the growth of the call into other code when there is one (all of what
        # came through it), else of the entry.
        node = below if into is not None else e
        if node in seen:
            continue
        seen.add(node)
        cul.base += base[node]
        cul.new += new[node]
        cul.grown += grown(node)
        cul.nodes.append(node)
    ranked = sorted(found.values(), key=lambda c: (-c.delta, c.func))
    return [c for c in ranked if c.delta > 0][:MAX_CULPRITS]


def new_cost(
    parent: Sequence[int],
    func: Sequence[int],
    values: tuple[Sequence[float], Sequence[float]],
    func_growth: Sequence[float],
) -> array[float]:
    """Each node's growth as far as it is new cost (the root's: its growth): no more than its
    function's growth over the whole tree, so cost that only moved to another call path (a
    wrapper that changed shape, whose callees now hang under other frames) is not new; and no
    more than its own code's growth and its children's new cost (what is not negative of it),
    so a wrapper found on one side only (decorator 5's ``fun``, where 4.x had a generated
    wrapper) counts the new code under it, not the caller's unchanged work that moved under it
    with it.  One pass, children before parents."""
    base, new = values
    n_nodes = len(parent)
    own = _own_growth(parent, base, new)
    grown = array("d", [0.0]) * n_nodes
    below = array("d", [0.0]) * n_nodes
    for n in range(n_nodes - 1, 0, -1):
        grown[n] = min(new[n] - base[n], func_growth[func[n]], own[n] + below[n])
        below[parent[n]] += max(grown[n], 0.0)
    grown[0] = new[0] - base[0]
    return grown


def _own_growth(parent: Sequence[int], base: Sequence[float], new: Sequence[float]) -> list[float]:
    """Each node's growth of its own cost: of its inclusive cost, less its children's."""
    own = [new[n] - base[n] for n in range(len(parent))]
    for n in range(1, len(parent)):
        own[parent[n]] -= new[n] - base[n]
    return own


# Folding stops (the tree is walked as it is) if it would cost more than this many steps per
# node: a path of many distinct functions under which many branches call back to its top.
FOLD_BUDGET = 64


@dataclass
class Folded:
    """A call tree with its recursion folded: every path is cut back to a function's first
    frame when that function is called again below it, so that cost spread over every level
    of a recursion (jsonschema 4's `ref` -> `descend` -> ... -> `ref`, each level calling
    `RefResolver.resolve`) adds up on one path.  `node[m]`: the folded node of the tree's node
    `m`; `back[m]`: whether `m` was cut back (its function was already on its folded path)."""

    parent: list[int]
    func: list[int]
    node: array[int]
    back: bytearray
    tree_parent: Sequence[int]
    same: bool = False  # the tree as it is (Folded.unfolded): its nodes and values are the tree's

    @classmethod
    def unfolded(cls, parent: Sequence[int], func: Sequence[int]) -> Folded:
        """The tree as it is."""
        n = len(parent)
        return cls(list(parent), list(func), array("q", range(n)), bytearray(n), parent, True)

    def values(self, incl: Sequence[float], additive: bool = True) -> list[float]:
        """Per folded node, its value from the tree's: of inclusive costs (`additive`), the
        cost of the samples whose folded path passes through it (each tree node's own cost
        goes to its folded node, and up); otherwise (counts of calls) the sum over the nodes
        that were not cut back."""
        n_tree, n_fold = len(self.node), len(self.parent)
        out = [0.0] * n_fold
        if not additive:
            for m in range(1, n_tree):
                if not self.back[m]:
                    out[self.node[m]] += incl[m]
            return out
        own = [float(incl[m]) for m in range(n_tree)]
        for m in range(n_tree - 1, 0, -1):
            p = self.tree_parent[m]
            if p > 0:
                own[p] -= incl[m]
        for m in range(1, n_tree):
            out[self.node[m]] += own[m]
        for x in range(n_fold - 1, 0, -1):
            if self.parent[x] > 0:
                out[self.parent[x]] += out[x]
        return out


def fold_recursion(parent: Sequence[int], func: Sequence[int]) -> Folded:
    """The tree `parent` (node 0 the root, parents before children) of functions `func`, with
    its recursion folded (Folded).  One depth-first pass; each cut costs the frames it drops
    from the folded path, which the pass puts back when it leaves the cut node.  Should that
    exceed FOLD_BUDGET steps per node, the tree is returned unfolded."""
    n_tree = len(parent)
    first = array("q", [-1]) * n_tree
    after = array("q", [-1]) * n_tree
    for m in range(n_tree - 1, 0, -1):
        after[m] = first[parent[m]]
        first[parent[m]] = m
    fparent, ffunc, fdepth = [-1], [-1], [0]
    made: dict[tuple[int, int], int] = {}
    node = array("q", [0]) * n_tree
    back = bytearray(n_tree)
    path = [0]  # the folded path of the node being visited
    at: dict[int, int] = {}  # function -> its folded node on `path`
    dropped: dict[int, list[int]] = {}  # cut node -> what its cut took off `path`
    budget = FOLD_BUDGET * n_tree
    stack: list[int] = []
    c = first[0]
    while c >= 0:
        stack.append(c)
        c = after[c]
    while stack:
        m = stack.pop()
        if m < 0:  # leaving ~m: its folded path's end goes back as it was
            gone = dropped.pop(~m, None)
            if gone is None:
                del at[ffunc[path.pop()]]
            else:
                for x in gone:
                    at[ffunc[x]] = x
                path.extend(gone)
            continue
        f = func[m]
        x = at.get(f, -1)
        if x < 0:
            key = (path[-1], f)
            x = made.get(key, -1)
            if x < 0:
                x = made[key] = len(fparent)
                fparent.append(path[-1])
                ffunc.append(f)
                fdepth.append(fdepth[path[-1]] + 1)
            path.append(x)
            at[f] = x
        else:
            gone = path[fdepth[x] + 1 :]
            del path[fdepth[x] + 1 :]
            for y in gone:
                del at[ffunc[y]]
            dropped[m] = gone
            back[m] = 1
            budget -= len(gone)
            if budget < 0:
                return Folded.unfolded(parent, func)
        node[m] = x
        stack.append(~m)
        c = first[m]
        while c >= 0:
            stack.append(c)
            c = after[c]
    return Folded(fparent, ffunc, node, back, parent)


def _culprits_by_node(
    parent: Sequence[int], func: Sequence[int], owners: Sequence[str], changed: set[str]
) -> tuple[array[int], array[int]]:
    """For every node, taken as an entry: its culprit's node (the innermost frame on its path
    of code that changed, else of code that is not the standard library, else the node itself)
    and the node after the culprit on the path (0 when the culprit is the node).  One pass,
    parents before children, so a deep tree costs its size, not its depth squared."""
    n_nodes = len(parent)
    # Per rule, the innermost matching node at or above each node (0: none), and the node
    # after it on the path (0: it is the node itself).
    rules: tuple[Callable[[str], bool], ...] = (
        lambda o: o in changed,
        lambda o: o != STDLIB,
    )
    culprit = array("q", range(n_nodes))
    below = array("q", [0]) * n_nodes
    decided = bytearray(n_nodes)
    for wanted in rules:
        at = array("q", [0]) * n_nodes
        nxt = array("q", [0]) * n_nodes
        for n in range(1, n_nodes):
            p = parent[n]
            if wanted(owners[func[n]]):
                at[n] = n
            else:
                at[n] = at[p]
                nxt[n] = nxt[p] or (n if at[p] else 0)
            if at[n] and not decided[n]:
                culprit[n], below[n], decided[n] = at[n], nxt[n], 1
    return culprit, below
