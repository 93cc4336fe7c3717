"""Run a Python script under the bare empty hook (bench/barehook): the floor of a tracer.

Usage::

    python bench/run_barehook.py [--c-calls] -- SCRIPT [ARGS...]

The hook is of the kind leadline's ``trace`` installs and does nothing: a C profile function
that returns 0 on 3.10/3.11, an empty C callable registered with ``sys.monitoring`` for the six
events ``trace`` hooks on 3.12+ (with ``--c-calls`` also the three of
``trace --c-calls``).  ``bench/setup_env.py`` builds and installs it.  The script
runs as ``__main__`` with the hook on; the exit status is the script's.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from as_main import run_as_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--c-calls", action="store_true", help="hook builtin calls too (3.12+)")
    parser.add_argument("script", type=Path)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    try:
        barehook = importlib.import_module("barehook")  # a bench-only C module, no stubs
    except ImportError as exc:
        print(
            f"run_barehook.py: barehook is not importable in {sys.executable}: {exc}\n"
            f"install it with: {sys.executable} bench/setup_env.py --only barehook",
            file=sys.stderr,
        )
        return 2

    @contextmanager
    def hooked() -> Iterator[None]:
        barehook.install(c_calls=ns.c_calls)
        try:
            yield
        finally:
            barehook.uninstall()

    return run_as_main(ns.script, list(ns.args), hooked)


if __name__ == "__main__":
    sys.exit(main())
