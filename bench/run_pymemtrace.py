"""Run a Python script under pymemtrace's C profiler, ``cPyMemTrace.Profile``.

Usage::

    python bench/run_pymemtrace.py --trigger 0 [--log FILE] -- SCRIPT [ARGS...]

``--trigger`` is Profile's ``d_rss_trigger`` (pymemtrace 0.6.3, ``cPyMemTrace.Profile``
docstring): ``0`` writes every event to the log, ``n > 0`` writes an event only when RSS moved
by at least ``n`` bytes since the last written one (plus the event just before it), ``-1`` (its
default) means one page.  The profiler sees Python calls and returns and C calls, returns and
exceptions, like leadline's ``trace``.

The script runs as ``__main__`` through ``runpy`` inside the ``with Profile(...)`` block, with
``sys.argv`` and ``sys.path[0]`` as ``python SCRIPT ARGS`` would set them.  The log goes to
``--log`` or, by default, to a new temporary directory (never the current one), whose path is
printed on stderr.  The exit status is the script's.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

from as_main import run_as_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--trigger",
        type=int,
        required=True,
        help="cPyMemTrace.Profile d_rss_trigger: 0 = log every event, n = RSS change >= n bytes",
    )
    parser.add_argument("--log", type=Path, help="log file (default: in a new temp directory)")
    parser.add_argument("script", type=Path)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    try:
        c_py_mem_trace = importlib.import_module("pymemtrace.cPyMemTrace")  # has no type stubs
    except ImportError as exc:
        print(
            f"run_pymemtrace.py: pymemtrace is not importable in {sys.executable}: {exc}\n"
            f"install it with: {sys.executable} bench/setup_env.py",
            file=sys.stderr,
        )
        return 2

    log: Path = ns.log
    if log is None:
        log = Path(tempfile.mkdtemp(prefix="pymemtrace-")) / "profile.log"
        print(f"run_pymemtrace.py: log file {log}", file=sys.stderr)
    return run_as_main(
        ns.script,
        list(ns.args),
        lambda: c_py_mem_trace.Profile(ns.trigger, filepath=os.fspath(log)),
    )


if __name__ == "__main__":
    sys.exit(main())
