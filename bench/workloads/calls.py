"""Call-dense workload: four pyperformance benchmarks run back to back.

The benchmark sources are not part of this repository: they are loaded at run time from the
installed ``pyperformance`` package (``pyperformance/data-files/benchmarks/bm_*/run_benchmark.py``,
see ``bench/setup_env.py``).  Each file is executed as an ordinary module whose ``__name__`` is
not ``"__main__"``, so its ``pyperf.Runner`` block never runs; the work functions are called
directly.  The files import the real ``pyperf`` package (a dependency of ``pyperformance``) and
``raytrace`` uses its ``perf_counter``.

Usage::

    python bench/workloads/calls.py [--scale 1.0] [--only richards,go]

At ``--scale 1`` the whole run takes about four seconds under CPython 3.11 on a 2-core machine.
The work is deterministic: ``go`` seeds ``random`` itself, the others use no randomness.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Benchmark:
    name: str
    size: int  # work units at --scale 1
    run: Callable[[Any, float], str]  # (module, units) -> short deterministic result


# Each runner does `units` units of work.  Whole units are loops of the benchmark as pyperformance
# runs it; below one unit (--scale for smoke runs) go plays fewer games and raytrace draws fewer
# rows, so that a tiny scale gives a tiny run.  richards and deltablue do at least one loop.


def _richards(mod: Any, units: float) -> str:
    ok = mod.Richards().run(max(1, round(units)))
    if ok is not True:
        raise RuntimeError("richards: wrong result")
    return "ok"


def _deltablue(mod: Any, units: float) -> str:
    for _ in range(max(1, round(units))):
        mod.delta_blue(100)  # the size pyperformance uses
    return "ok"


def _go(mod: Any, units: float) -> str:
    if units < 1:
        mod.GAMES = max(1, round(mod.GAMES * units))  # playouts per move, 200 by default
    moves = {mod.versus_cpu() for _ in range(max(1, round(units)))}  # seeds random(1) each time
    if len(moves) != 1:
        raise RuntimeError(f"go: moves differ between loops: {sorted(moves)}")
    return f"move {moves.pop()}"


def _raytrace(mod: Any, units: float) -> str:
    # pyperformance draws a 100x100 picture per loop
    height = max(1, round(100 * units)) if units < 1 else 100
    mod.bench_raytrace(max(1, round(units)), 100, height, None)
    return "ok"


BENCHMARKS = (
    Benchmark("richards", 20, _richards),
    Benchmark("deltablue", 200, _deltablue),
    Benchmark("go", 8, _go),
    Benchmark("raytrace", 4, _raytrace),
)


def benchmarks_dir() -> Path:
    """The folder of benchmark sources inside the installed pyperformance package."""
    spec = importlib.util.find_spec("pyperformance")  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "calls.py: the pyperformance package is not installed in this Python "
            f"({sys.executable}); run: {sys.executable} bench/setup_env.py"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data-files" / "benchmarks"


def load(name: str) -> ModuleType:
    """Execute ``bm_<name>/run_benchmark.py`` as the module ``bm_<name>``."""
    path = benchmarks_dir() / f"bm_{name}" / "run_benchmark.py"
    if not path.is_file():
        raise SystemExit(f"calls.py: {path} not found (pyperformance too old or too new?)")
    spec = importlib.util.spec_from_file_location(f"bm_{name}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"calls.py: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply the work of every benchmark (default 1)"
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated subset of: " + ",".join(b.name for b in BENCHMARKS),
    )
    args = parser.parse_args(argv)
    wanted = {name for name in args.only.split(",") if name}
    unknown = wanted - {b.name for b in BENCHMARKS}
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")

    total = 0.0
    for bench in BENCHMARKS:
        if wanted and bench.name not in wanted:
            continue
        units = bench.size * args.scale
        module = load(bench.name)
        start = time.perf_counter()
        result = bench.run(module, units)
        elapsed = time.perf_counter() - start
        total += elapsed
        print(f"{bench.name:10} units={units:<8g} {result:10} {elapsed:7.3f} s")
    print(f"{'total':10} {'':20} {total:7.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
