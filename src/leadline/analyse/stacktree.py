"""Distinct stacks as one prefix tree, and the passes that total costs over it.

A deep recursion seen in many samples (or traced call by call) has as many distinct stacks as
depths, and each of them repeats every frame above it: written out as one tuple per stack, or
keyed by its whole path, a 50,000-deep recursion is 50,000^2 / 2 frames, gigabytes.  A capture
does not store it that way (its stack table is parent-linked), and neither does the analysis:
a stack is a node of a :class:`StackTree` (its innermost frame, linked to its caller's node),
so the tree is as large as the capture's distinct stack prefixes.

Costs are accumulated up that tree once (:meth:`StackTree.subtree_sums`); inclusive costs per
function take, for each function, the nodes that have no ancestor of the same function
(:meth:`StackTree.outermost`), so a recursive function counts each stack once however deep the
recursion, without a per-stack "seen" set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

Number = TypeVar("Number", int, float)


class StackTree:
    """A prefix tree of stacks: node 0 is the root (no frame); every other node is one frame
    (its `key`: a frame or function index) under its caller's node.  Nodes are numbered in the
    order they were made, so a parent always comes before its children."""

    __slots__ = ("_children", "depth", "key", "parent")

    def __init__(self) -> None:
        self.parent: list[int] = [-1]
        self.key: list[int] = [-1]
        self.depth: list[int] = [0]
        # (node, key) -> child, keyed by one int (node << 32 | key) rather than a tuple: a
        # third of the memory per node.
        self._children: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.parent)

    def child(self, node: int, key: int) -> int:
        """The node for `key` (0 <= key < 2**32) called from `node`, made if new."""
        at = node << 32 | key
        c = self._children.get(at)
        if c is None:
            c = self._children[at] = len(self.parent)
            self.parent.append(node)
            self.key.append(key)
            self.depth.append(self.depth[node] + 1)
        return c

    def add(self, keys: Iterable[int], node: int = 0) -> int:
        """The node of the stack `keys` (outermost first) below `node`."""
        for k in keys:
            node = self.child(node, k)
        return node

    def path(self, node: int) -> list[int]:
        """The keys from the root down to `node` (outermost first)."""
        out = []
        while node > 0:
            out.append(self.key[node])
            node = self.parent[node]
        out.reverse()
        return out

    def subtree_sums(self, values: Sequence[Number]) -> list[Number]:
        """Each node's value plus its descendants' (children come after their parents, so one
        backward pass sums every subtree)."""
        out = list(values)
        parent = self.parent
        for n in range(len(out) - 1, 0, -1):
            out[parent[n]] += out[n]
        return out

    def reached(self, marked: Sequence[bool]) -> list[bool]:
        """For each node, whether it or a descendant is `marked`."""
        out = list(marked)
        parent = self.parent
        for n in range(len(out) - 1, 0, -1):
            if out[n]:
                out[parent[n]] = True
        return out

    def children(self) -> tuple[list[int], list[int]]:
        """(first child, next sibling) of every node, -1 for none; siblings in node order."""
        first = [-1] * len(self.parent)
        after = [-1] * len(self.parent)
        parent = self.parent
        for n in range(len(parent) - 1, 0, -1):
            p = parent[n]
            after[n] = first[p]
            first[p] = n
        return first, after

    def outermost(self, keys: Sequence[int]) -> list[bool]:
        """For each node, whether no ancestor has the same key (`keys[n]` per node, e.g. its
        function): the nodes where a function's inclusive cost is counted, once per stack
        however deep it recurses.  One depth-first walk, without recursion."""
        first, after = self.children()
        out = [False] * len(self.parent)
        on_path: dict[int, int] = {}
        todo = [0]
        while todo:
            n = todo.pop()
            if n < 0:  # leaving ~n: its key is one fewer time on the path
                k = keys[~n]
                left = on_path[k] - 1
                if left:
                    on_path[k] = left
                else:
                    del on_path[k]
                continue
            k = keys[n]
            out[n] = k not in on_path
            on_path[k] = on_path.get(k, 0) + 1
            todo.append(~n)
            c = first[n]
            while c >= 0:
                todo.append(c)
                c = after[c]
        out[0] = False
        return out


class TreePath(Sequence[int]):
    """The keys of one node's stack, outermost first, read from the tree when asked: a
    sequence that costs two references however deep the stack is."""

    __slots__ = ("node", "tree")

    def __init__(self, tree: StackTree, node: int) -> None:
        self.tree = tree
        self.node = node

    def __len__(self) -> int:
        return self.tree.depth[self.node]

    def __iter__(self) -> Iterator[int]:
        return iter(self.tree.path(self.node))

    def __reversed__(self) -> Iterator[int]:
        key, parent = self.tree.key, self.tree.parent
        n = self.node
        while n > 0:
            yield key[n]
            n = parent[n]

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[int, ...]: ...

    def __getitem__(self, i: int | slice) -> int | tuple[int, ...]:
        if isinstance(i, slice):
            return tuple(self.tree.path(self.node))[i]
        depth = len(self)
        if i < 0:
            i += depth
        if not 0 <= i < depth:
            raise IndexError("stack index out of range")
        n = self.node
        for _ in range(depth - 1 - i):
            n = self.tree.parent[n]
        return self.tree.key[n]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TreePath) and other.tree is self.tree:
            return other.node == self.node
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == len(self) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"TreePath({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (or deep-copied) as the plain tuple it stands for, not the whole tree.
        return (tuple, (tuple(self),))
