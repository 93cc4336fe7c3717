"""Source files for the reports that show lines (the flame graph page's source view): read when
the report is made, and compared with the hash of each file the capture kept when it was
recorded (END `sources`, record/sources.py), so that a file edited since says so."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..analyse.paths import is_source_file
from ..record.sources import file_hash
from .untrusted import escape_surrogates

MAX_FILES = 40  # the heaviest files of a profile, shown with their lines
MAX_FILE_BYTES = 2 << 20
MAX_LINES = 20_000
_LINE_END = re.compile(r"\r\n|\r|\n")  # where Python ends a line (not U+2028, form feeds...)

# A file's state: as recorded, edited since, or not known (the capture has no hash of it).
SAME, CHANGED, UNKNOWN = "same", "changed", "unknown"


def read_sources(files: Iterable[str], recorded: Mapping[str, str]) -> list[list[object]]:
    """[file, state, lines or None, note] for each of `files` (heaviest first), at most
    MAX_FILES: its text now, split where Python splits lines, and whether it is the text that
    was recorded."""
    out: list[list[object]] = []
    for file in files:
        if len(out) >= MAX_FILES:
            break
        if not is_source_file(file):
            continue
        shown = escape_surrogates(file)
        try:
            with open(file, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except (OSError, ValueError) as e:
            why = getattr(e, "strerror", None) or str(e)
            out.append([shown, UNKNOWN, None, f"cannot be read now: {why}"])
            continue
        if len(data) > MAX_FILE_BYTES:
            out.append([shown, UNKNOWN, None, f"larger than {MAX_FILE_BYTES >> 20} MiB"])
            continue
        was = recorded.get(file)
        state = UNKNOWN if was is None else SAME if file_hash(data) == was else CHANGED
        text = data.decode("utf-8", errors="replace")
        lines = _LINE_END.split(text)[:MAX_LINES]
        if lines and lines[-1] == "":
            lines.pop()
        out.append([shown, state, [escape_surrogates(line) for line in lines], ""])
    return out


def sources_by_weight(
    weight: Mapping[str, float], end: Mapping[str, Any] | None
) -> list[list[object]]:
    """read_sources of the files in `weight`, heaviest first, with the hashes that the capture's
    END (`end`, None when it has none) kept of them when it was recorded."""
    recorded = (end or {}).get("sources") or {}
    return read_sources(sorted(weight, key=lambda f: (-weight[f], f)), recorded)
