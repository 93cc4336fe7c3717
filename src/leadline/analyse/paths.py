"""File names the way people read them (docs/paths.md).

A capture keeps each code object's file name whole, as the program saw it; reports show it
short: a package's file from where the package starts (`requests/sessions.py`, found after the
last `site-packages` or `dist-packages`), a standard library's file from the library's folder
(`threading.py`, `asyncio/events.py`), and the program's own files relative to the folder it ran
in (META `cwd`).  Anything else (a frozen module, `<string>`, a file outside all three) is shown
whole.  The HTML pages show the whole name on hover, and JSON and the exports keep it whole."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The folder of installed packages, in a virtual environment, a system or a user install.
_PACKAGES = re.compile(r"/(?:site|dist)-packages/")
# The standard library's folder: lib/python3.12/, lib/python3.13t/ (a free-threaded build),
# lib64/python3.11/ (some distributions).
_STDLIB = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)?t?/")


def is_source_file(file: str) -> bool:
    """A file name a code object can have that names a file on disk (not `<string>`,
    `<frozen ...>`, the sampler's `asyncio` task roots or `gc`)."""
    return file.startswith("/")


def short_path(file: str, base: str | None = None) -> str:
    """`file` as reports show it; `base`: the folder the program ran in, if known."""
    if not is_source_file(file):
        return file
    ends = [m.end() for m in _PACKAGES.finditer(file)]
    if ends and ends[-1] < len(file):  # the last: a package vendored inside another's
        return file[ends[-1] :]
    stdlib = _STDLIB.search(file)
    if stdlib is not None and stdlib.end() < len(file):
        return file[stdlib.end() :]
    folder = (base or "").rstrip("/")
    if folder and file.startswith(folder + "/"):
        return file[len(folder) + 1 :]
    return file


def base_of(meta: Mapping[str, Any]) -> str | None:
    """The folder the program ran in, from a capture's META (None when it does not say)."""
    cwd = meta.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


class PathNamer:
    """short_path() for one capture's files (`base`: base_of() its META), each worked out once
    (a report names a file in every row of its table)."""

    def __init__(self, base: str | None = None) -> None:
        self.base = base
        self._seen: dict[str, str] = {}

    def __call__(self, file: str) -> str:
        got = self._seen.get(file)
        if got is None:
            got = self._seen[file] = short_path(file, self.base)
        return got
