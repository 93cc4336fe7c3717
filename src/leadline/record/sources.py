"""The program's source files as they were when it was recorded: a hash of each (the first 16
hex digits of its SHA-256), kept in the capture's END (`sources`), so that a report that shows
source lines later can say when a file changed since (render/sources.py)."""

from __future__ import annotations

import hashlib
import os
import sys
import time

MAX_BYTES = 64 << 20  # read at most this much source at the end of a recording
MAX_SECONDS = 0.5  # ... or for this long


HASH_DIGITS = 16  # of the SHA-256's hex digest: 64 bits tell an edited file, END stays small


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:HASH_DIGITS]


def source_hashes(first: list[str] | None = None) -> dict[str, str]:
    """{file: SHA-256} of the files `first` (the program's own), then of the Python source
    files of the modules loaded now (every imported module's `.py`), as their code objects name
    them; within MAX_BYTES and MAX_SECONDS, the rest left out."""
    files: list[str] = list(first or [])
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(".py"):
            files.append(path)
    out: dict[str, str] = {}
    budget = MAX_BYTES
    deadline = time.monotonic() + MAX_SECONDS
    for path in dict.fromkeys(files):
        if budget <= 0 or time.monotonic() > deadline:
            break
        try:
            st = os.stat(path)
            known = _seen.get(path)
            if known is not None and known[:2] == (st.st_mtime_ns, st.st_size):
                out[path] = known[2]  # unchanged since this process last read it
                continue
            if st.st_size > budget:
                continue
            with open(path, "rb") as f:
                data = f.read()
        except (OSError, ValueError):
            continue
        budget -= len(data)
        _seen[path] = (st.st_mtime_ns, st.st_size, file_hash(data))
        out[path] = _seen[path][2]
    return out


# What this process hashed: {file: (mtime_ns, size, hash)}, so that recordings made one after
# another (the pytest plugin's, a test each) read each file once.
_seen: dict[str, tuple[int, int, str]] = {}
