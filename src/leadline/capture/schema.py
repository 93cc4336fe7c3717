"""META and END, checked once where the reader loads them (docs/format.md).

Every consumer of a capture (the analyses, each renderer and exporter, diff, the fleet agent)
reads META and END as the writer makes them: argv a list of strings, tick_ns a positive finite
number, counters non-negative integers, thread names strings.  A capture is untrusted input, so
rather than guard each use, the reader refuses here, with the field's name, any JSON that breaks
those assumptions: not an object, nested deeper than anything the writer makes, NaN or infinite
numbers, and every known field of the wrong type or out of range.  Fields this version does not
know are kept as they are (a newer minor version may add some) once the nesting is bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 16  # the writer's deepest is 3 (META.options.probes[i]); marks' fields are flat
U64 = 1 << 64

Check = Callable[[Any], str | None]  # None when the value is right, else what is wrong with it


class Malformed(ValueError):
    """A chunk whose content is not what docs/format.md says; the message says what."""


def _no_constant(name: str) -> Any:
    raise Malformed(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e999: JSON's only way to write infinity
        raise Malformed(f"{text[:20]} is not a finite number")
    return value


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether lists and objects nest deeper than `limit` (without recursion)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        if depth > limit:
            return True
        todo.extend((c, depth + 1) for c in children)
    return False


def load_json(payload: bytes, what: str) -> Any:
    """Strict JSON: UTF-8, finite numbers only, nested at most MAX_DEPTH deep."""
    try:
        value = json.loads(
            payload.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float
        )
    except UnicodeDecodeError:
        raise Malformed(f"{what} is not UTF-8") from None
    except json.JSONDecodeError as e:
        raise Malformed(f"{what} is not JSON ({e.msg})") from None
    except RecursionError:
        raise Malformed(f"{what} is nested too deeply") from None
    except Malformed as e:
        raise Malformed(f"{what}: {e}") from None
    except ValueError as e:  # an integer of more digits than int() converts
        raise Malformed(f"{what}: {str(e).split(';')[0]}") from None
    if _depth_exceeds(value, MAX_DEPTH):
        raise Malformed(f"{what} is nested too deeply")
    return value


# -- field checks ----------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _uint(v: Any) -> str | None:
    return None if _is_int(v) and 0 <= v < U64 else "not an integer from 0 to 2^64-1"


def _int_in(lo: int, hi: int) -> Check:
    def check(v: Any) -> str | None:
        return None if _is_int(v) and lo <= v <= hi else f"not an integer from {lo} to {hi}"

    return check


def _number_in(lo: float, hi: float) -> Check:
    def check(v: Any) -> str | None:
        ok = (_is_int(v) or isinstance(v, float)) and lo <= v <= hi
        return None if ok else f"not a number from {lo:g} to {hi:g}"

    return check


def _optional(check: Check) -> Check:
    def optional(v: Any) -> str | None:
        return None if v is None else check(v)

    return optional


def _str(v: Any) -> str | None:
    return None if isinstance(v, str) else "not a string"


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else "not true or false"


def _dict(v: Any) -> str | None:
    return None if isinstance(v, dict) else "not an object"


def _list_of(check: Check) -> Check:
    def list_of(v: Any) -> str | None:
        if not isinstance(v, list):
            return "not a list"
        for i, item in enumerate(v):
            why = check(item)
            if why:
                return f"item {i}: {why}"
        return None

    return list_of


def _triple(v: Any) -> str | None:
    if not isinstance(v, list) or len(v) != 3:
        return "not a list of three counts"
    return _list_of(_uint)(v)


def _dict_of(check: Check) -> Check:
    def dict_of(v: Any) -> str | None:
        if not isinstance(v, dict):
            return "not an object"
        for key, item in v.items():
            why = check(item)
            if why:
                return f"{key!r}: {why}"
        return None

    return dict_of


def _object(fields: dict[str, Check], required: tuple[str, ...] = ()) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, dict):
            return "not an object"
        for name in required:
            if name not in v:
                return f"no {name!r}"
        return check_fields(v, fields)

    return check


def check_fields(obj: dict[str, Any], fields: dict[str, Check]) -> str | None:
    for name, check in fields.items():
        if name in obj:
            why = check(obj[name])
            if why:
                return f"{name!r}: {why}"
    return None


# Tick lengths of every clock leadline uses lie far inside these bounds; outside them the
# conversions to nanoseconds (and back, in the fleet agent) would overflow a float.
_TICK_NS = _number_in(1e-6, 1e9)
_PROBE = _object({"name": _str, "spec": _str, "where": _str}, required=("name",))

# META.options: the fields some reader uses (sampling: mode, rate_hz, memory; probe: probes,
# ratios, mechanism).  A trace's options are only shown, never computed with.
OPTIONS_FIELDS: dict[str, Check] = {
    "mode": _str,
    "rate_hz": _number_in(1e-3, 1e9),
    "memory": _bool,
    "probes": _list_of(_PROBE),
    "ratios": _dict_of(_str),
    "mechanism": _str,
}

META_FIELDS: dict[str, Check] = {
    "format": _uint,
    "mode": _str,
    "leadline_version": _str,
    "argv": _list_of(_str),
    "python_version": _str,
    "implementation": _str,
    "pid": _uint,
    "host": _str,
    "start_unix_ns": _uint,
    "t_start": _uint,
    "tick_ns": _TICK_NS,
    "clock": _str,
    "page_size": _int_in(1, 1 << 30),
    "package_dir": _str,
    "cwd": _str,
    "attached": _bool,
    "options": _object(OPTIONS_FIELDS),
}

# The sampler's counters, as its finish() gives them and END keeps them (docs/format.md).
SAMPLER_COUNTERS = (
    "ticks",
    "missed",
    "torn",
    "deferred",
    "held",
    "retried",
    "parked",
    "truncated",
    "sampler_cpu_ns",
    "reads",
)

END_FIELDS: dict[str, Check] = {
    "t_end": _uint,
    "tick_ns": _TICK_NS,
    "stop_unix_ns": _uint,
    "write_error": _optional(_str),
    "threads": _dict_of(_str),
    "thread_tids": _dict_of(_str),
    # the SHA-256 of each source file of the program when it was recorded (format 1.4)
    "sources": _dict_of(_str),
    # trace
    "events": _uint,
    "recorded": _uint,
    "dropped_chunks": _uint,
    # the tick from which a trace's events read the RSS sampler's clock; null: never (1.9)
    "coarse_from": _optional(_uint),
    # sampling
    **dict.fromkeys((*SAMPLER_COUNTERS, "samples", "samples_lost", "exit_t"), _uint),
    # every read's GIL state by thread serial: held, waiting, neither (format 1.3)
    "gil_reads": _dict_of(_triple),
    # dump --locals: the variables of a snapshot's innermost frames (format 1.5)
    "locals": _list_of(
        _object(
            {"serial": _uint, "frame": _uint, "name": _str, "type": _str, "repr": _str},
            required=("serial", "frame", "name", "type", "repr"),
        )
    ),
    # how long the threads found running were stopped while their variables were read
    "locals_held_ns": _uint,
    "native_held_ns": _uint,
    "native_stops": _uint,
    "native_unread": _uint,
    "native_unanswered": _uint,
    # probe
    "counts": _dict_of(_uint),
    "ratios": _dict_of(_optional(_number_in(-1.8e308, 1.8e308))),
    "seconds": _number_in(0, 1e12),
    "marks": _uint,
    "marks_dropped": _uint,
}


def load_object(payload: bytes, what: str, fields: dict[str, Check]) -> dict[str, Any]:
    """A META or END payload: a JSON object whose known fields are what the readers assume."""
    value = load_json(payload, what)
    if not isinstance(value, dict):
        raise Malformed(f"{what} is not a JSON object")
    why = check_fields(value, fields)
    if why:
        raise Malformed(f"{what} field {why}")
    return value
