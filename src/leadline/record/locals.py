"""`leadline dump --locals`: the local variables the sampler read of a snapshot's innermost
frames (``_native/locals.c``), made into the reprs END keeps (docs/dump.md, docs/format.md).

Nothing here runs code of the target: a value is shown from its bytes only for the types whose
layout is known (None, bool, int, float, str, bytes); a list, tuple or dict by its length; any
other object by its type and address, as Python's default repr shows it.  Every repr is
bounded: a long str or bytes is cut, and the cut said."""

from __future__ import annotations

import struct
from typing import Any

# The kinds locals.c writes (LL_VAL_*), in its order; a kind or-ed with CUT was cut short.
VALUE_KINDS = (
    "object",
    "none",
    "bool",
    "int",
    "bigint",
    "float",
    "str",
    "bytes",
    "sized",
    "changing",  # it held another object at every read: a running loop's counter, say
)
CUT = 0x80
MAX_REPR = 400  # characters of a repr kept (a str's escapes can make it longer than the text)
EMPTY = {"list": "[]", "tuple": "()", "dict": "{}"}


def value_repr(kind: int, type_name: str, value: bytes) -> str:
    """The repr of a value as locals.c read it."""
    cut, what = bool(kind & CUT), kind & ~CUT
    name = VALUE_KINDS[what] if what < len(VALUE_KINDS) else "object"
    if name == "none":
        return "None"
    if name == "changing":
        return "<changed while read>"
    if name == "bool":
        return "True" if value[:1] == b"\x01" else "False"
    if name == "int":
        return value.decode("ascii", "replace")
    if name in ("bigint", "sized", "object", "float") and len(value) != 8:
        return f"<{type_name}>"
    if name == "bigint":
        return f"<int of {struct.unpack('<Q', value)[0]} bits>"
    if name == "float":
        return repr(struct.unpack("<d", value)[0])
    if name == "sized":
        n = struct.unpack("<q", value)[0]
        if n == 0 and type_name in EMPTY:
            return EMPTY[type_name]
        unit = "character" if type_name == "str" else "item"  # a str too long to read
        return f"<{type_name} of {n} {unit}{'' if n == 1 else 's'}>"
    if name == "str":
        text = repr(value.decode("utf-8", "replace"))
    elif name == "bytes":
        text = repr(value)
    else:
        return f"<{type_name} object at {struct.unpack('<Q', value)[0]:#x}>"
    if cut or len(text) > MAX_REPR:
        return text[:MAX_REPR] + "…"
    return text


def local_reprs(raw: list[tuple[int, int, int, bytes, bytes, bytes]]) -> list[dict[str, Any]]:
    """END's `locals`: each variable read, in the order read (a thread's frames innermost
    first, a frame's variables in the code's order)."""
    out = []
    for serial, frame, kind, name, type_name, value in raw:
        tname = type_name.decode("utf-8", "replace")
        out.append(
            {
                "serial": serial,
                "frame": frame,
                "name": name.decode("utf-8", "replace"),
                "type": tname,
                "repr": value_repr(kind, tname, value),
            }
        )
    return out
