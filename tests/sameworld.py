"""Running one program three ways, `python`, `leadline run` and `leadline trace`, to compare
what each shows of it: the tests of "the profiled program behaves the same"."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import PY, run

# Each leadline command with the option that keeps its own summary out of stderr.
MODES = {"run": ("run", "-q"), "trace": ("trace", "-q")}


@dataclass
class Outcome:
    returncode: int
    stdout: Any  # str, or bytes when run with text=False
    stderr: Any


def python_run(
    args: Sequence[str | os.PathLike[str]],
    cwd: Path,
    *,
    python: Sequence[str] = (PY,),
    timeout: float = 120,
    **kwargs: Any,
) -> Outcome:
    """The program under plain `python`."""
    return _run([*python, *map(str, args)], cwd, timeout, kwargs)


def leadline_run(
    mode: str,
    args: Sequence[str | os.PathLike[str]],
    cwd: Path,
    *,
    capture: Path | None = None,
    python: Sequence[str] = (PY,),
    timeout: float = 120,
    **kwargs: Any,
) -> Outcome:
    """The same program under `leadline run -q` or `leadline trace -q` (its capture in
    `capture`, by default beside it)."""
    capture = capture or cwd / f"{mode}.lead"
    cmd = [*python, "-m", "leadline", *MODES[mode], "-o", str(capture), *map(str, args)]
    return _run(cmd, cwd, timeout, kwargs)


def _run(cmd: list[str], cwd: Path, timeout: float, kwargs: dict[str, Any]) -> Outcome:
    """`stdin_path`: a file each run reads as its standard input, from its start."""
    kwargs = dict(kwargs)
    env = kwargs.pop("env", None) or child_env()
    stdin_path = kwargs.pop("stdin_path", None)
    if stdin_path is None:
        r = run(cmd, cwd=cwd, timeout=timeout, env=env, **kwargs)
    else:
        with open(stdin_path, "rb") as stdin:
            r = run(cmd, cwd=cwd, timeout=timeout, env=env, stdin=stdin, **kwargs)
    return Outcome(r.returncode, r.stdout, r.stderr)


def child_env() -> dict[str, str]:
    # The same environment for every run; PYTHONFAULTHANDLER (set by support.run) makes each
    # child print its stacks if it hangs.
    return {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}


def assert_same(expected: Outcome, got: Outcome, what: str) -> None:
    assert got.returncode == expected.returncode, (what, got.returncode, got.stdout, got.stderr)
    assert got.stdout == expected.stdout, what
    assert got.stderr == expected.stderr, what


def compare(args: Sequence[str | os.PathLike[str]], cwd: Path, **kwargs: Any) -> dict[str, Outcome]:
    """Runs the program with python, then under `run` and `trace`, asserts that each shows
    the same stdout, stderr and exit status as python's, and returns the three outcomes."""
    outcomes = {"python": python_run(args, cwd, **kwargs)}
    for mode in MODES:
        outcomes[mode] = leadline_run(mode, args, cwd, **kwargs)
        assert_same(outcomes["python"], outcomes[mode], f"leadline {mode}")
    return outcomes


def merged(**kwargs: Any) -> dict[str, Any]:
    """subprocess options for stdout and stderr in one pipe, as `2>&1` in a shell: their
    interleaving is then compared too."""
    return {"stderr": subprocess.STDOUT, **kwargs}
