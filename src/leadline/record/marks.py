"""Tracepoints: `leadline.mark()`, spans and a logging handler that turns records into marks.

`mark` is the native function itself: with nothing recording it returns at once, without
looking at its arguments or the caller's frame.  When a trace, profile or probe session is
recording, it stores the name, the fields (as JSON), the thread, the time and the caller's
file:line in the capture (the MARKS chunk, docs/format.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from .. import _native

if TYPE_CHECKING:
    from .mark_handler import MarkHandler as MarkHandler

mark = _native.mark
marks_active = _native.marks_active

P = ParamSpec("P")
R = TypeVar("R")

MARK, BEGIN, END = (_native.MARK_KINDS[k] for k in ("MARK", "BEGIN", "END"))


def span(name: str | None = None, **fields: Any) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator: each call of the function is a span, a BEGIN and an END mark at its `def`
    line (name: the function's qualified name unless given).  Nothing is recorded, and only
    one check is made, when no recording listens."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        code = getattr(fn, "__code__", None)
        file = code.co_filename if code else "?"
        line = code.co_firstlineno if code else 0
        label: str = name or getattr(fn, "__qualname__", None) or repr(fn)

        @functools.wraps(fn)
        def spanned(*args: P.args, **kwargs: P.kwargs) -> R:
            if not _native.marks_active():
                return fn(*args, **kwargs)
            # The marks straight from here: a context manager's frames (contextlib's and its
            # generator's) would be leadline's own frames in the program's stacks (a sample
            # that fell in one showed `_span_at` in a report: CI, 3.13).
            _native.mark_at(BEGIN, label, file, line, fields)
            try:
                return fn(*args, **kwargs)
            finally:
                _native.mark_at(END, label, file, line, {})

        return spanned

    return wrap


def __getattr__(name: str) -> Any:
    # The logging handler lives in its own module: `import leadline` does not load `logging`.
    if name == "MarkHandler":
        from .mark_handler import MarkHandler

        return MarkHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
