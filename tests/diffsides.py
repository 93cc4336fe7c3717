"""Diff inputs built by hand: a sampled Side of stacks of functions, for the diff's unit tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from leadline.analyse.diff import Func, Side


def side_of(
    stacks: Mapping[tuple[Func, ...], float],
    *,
    path: str = "x.lead",
    kind: str = "sample",
    measure: str = "cpu",
    rate: float = 1000.0,
    meta: dict[str, Any] | None = None,
) -> Side:
    """A sampled side: stacks of functions (outermost first) with sample counts."""
    funcs: list[Func] = []
    ids: dict[Func, int] = {}
    out: list[tuple[Sequence[int], float]] = []
    for frames, w in stacks.items():
        at = []
        for f in frames:
            if f not in ids:
                ids[f] = len(funcs)
                funcs.append(f)
            at.append(ids[f])
        out.append((tuple(at), w))
    return Side(
        path=path,
        kind=kind,
        measure=measure,
        unit="samples",
        quantum=1.0,
        seconds=1 / rate,
        funcs=funcs,
        stacks=out,
        meta=meta or {},
    )


def named(
    stacks: Mapping[tuple[str, ...], float], file_of: Callable[[str], str]
) -> dict[tuple[Func, ...], float]:
    """Stacks of function names as stacks of functions, each in the file `file_of` names."""
    return {tuple(Func(n, file_of(n), 1) for n in names): w for names, w in stacks.items()}
