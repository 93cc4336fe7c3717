"""Recording that stopped before the program ended: END's ``stopped_early`` (docs/format.md).

Every recording writes it the same way (the native writer stops taking chunks when the
capture reaches its size limit or a write fails), and every reader words it with
:func:`describe`: the warning printed when the program ends, the reports, the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .reader import Definitions

SIZE_LIMIT = "size_limit"
WRITE_ERROR = "write_error"

# Where a size limit came from (END's stopped_early.limit_from).
LIMIT_GIVEN = "given"
LIMIT_DEFAULT = "default"
LIMIT_FREE_SPACE = "free_space"


def size_text(n: int) -> str:
    """Bytes in binary units, as --max-size takes them: 512 KiB, 64.0 MiB, 1.0 GiB."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024:
            return f"{v:.0f} {unit}" if unit in ("B", "KiB") else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def describe(stop: Mapping[str, Any]) -> str:
    """Why recording stopped, in words: "the capture reached its size limit (64.0 MiB,
    --max-size)", "writing the capture failed (No space left on device)"."""
    reason = stop.get("reason")
    if reason == SIZE_LIMIT:
        limit = size_text(int(stop.get("max_size") or 0))
        origin = stop.get("limit_from")
        if origin == LIMIT_DEFAULT:
            why = f"{limit}, the default; --max-size changes it"
        elif origin == LIMIT_FREE_SPACE:
            why = f"{limit}, half the free space of its file system; --max-size changes it"
        else:
            why = f"{limit}, --max-size"
        return f"the capture reached its size limit ({why})"
    if reason == WRITE_ERROR:
        return f"writing the capture failed ({stop.get('error') or 'an I/O error'})"
    return f"recording stopped early ({reason})"


def stopped_early(end: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """END's ``stopped_early`` object, or None (also for a capture without END)."""
    stop = (end or {}).get("stopped_early")
    return dict(stop) if isinstance(stop, Mapping) and stop.get("reason") else None


def for_report(cap: Definitions) -> dict[str, Any] | None:
    """What a report says about an early stop (docs/report-json.md): the reason, when (ns
    since the start of recording), the words, and the limit or the error; None if there was
    none."""
    stop = stopped_early(cap.end)
    if stop is None:
        return None
    out: dict[str, Any] = {
        "reason": stop["reason"],
        "at_ns": max(cap.ns(int(stop.get("t", cap.t_start))), 0),
        "message": describe(stop),
    }
    for key in ("max_size", "limit_from", "error"):
        if key in stop:
            out[key] = stop[key]
    return out
