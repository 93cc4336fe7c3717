"""Run a script as ``__main__`` inside a profiler's context, as ``python SCRIPT ARGS`` would.

Shared by the runners of the comparison profilers (run_pymemtrace.py, run_barehook.py): the
script runs through ``runpy`` with ``sys.argv`` and ``sys.path[0]`` set as Python sets them, and
the exit status is the script's.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path


def run_as_main(
    script: Path, args: list[str], context: Callable[[], AbstractContextManager[object]]
) -> int:
    """Run `script` with `args` inside ``context()``; return its exit status."""
    if args and args[0] == "--":
        args = args[1:]
    resolved = script.resolve()
    sys.argv = [str(script), *args]
    sys.path[0] = str(resolved.parent)
    code = 0
    with context():
        try:
            runpy.run_path(str(resolved), run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
    sys.stdout.flush()
    return code
