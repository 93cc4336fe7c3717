"""Text that comes from the profiled program (function, class and file names, argv, thread
names, mark labels) on its way into an output.  None of it is trusted, and none of it may
crash a writer.

One rule for lone surrogates, everywhere: a code point U+D800..U+DFFF that is not half of a
pair (an undecodable file name, a name the program built, such as ``"\\ud800"``) cannot be
written as UTF-8, so it is written as the six characters ``\\udXXX``, which is what Python's own
error output does (the ``backslashreplace`` handler).  The capture writers (the tracer, the
sampler, marks) store names that way, and every output does the same with the strings a capture
holds as JSON (argv, thread names, mark fields): text and HTML show ``\\ud800``, JSON outputs
hold the string ``"\\\\ud800"`` (never a lone-surrogate escape, which strict JSON parsers reject),
pprof and collapsed stacks the same six characters.

On a terminal, control characters are written as escapes too (``\\x1b``), so that a name cannot
move the cursor, clear the screen or change the terminal's title.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but tab and newline, DEL, and C1 controls (some terminals act on those too).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_surrogates(text: str) -> str:
    """`text` with each lone surrogate as the text ``\\udXXX`` (UTF-8 encodable)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def json_text(data: Any, **options: Any) -> str:
    """``json.dumps(data, ensure_ascii=False, **options)`` whose strings hold each lone
    surrogate as the text ``\\udXXX``.  Only string literals can hold a surrogate in JSON text,
    so each one becomes an escaped backslash followed by ``udXXX``."""
    text = json.dumps(data, ensure_ascii=False, **options)
    return _SURROGATE.sub(lambda m: f"\\\\u{ord(m[0]):04x}", text)


def terminal_text(text: str) -> str:
    """`text` as it may be shown on a terminal: lone surrogates and control characters (but
    tab and newline) written as escapes."""
    text = escape_surrogates(text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)
