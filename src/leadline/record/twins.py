"""Recording two versions of one program, run after run (``leadline compare``): each side is a
Python interpreter (a virtual environment's, say) and a script, sampled by ``leadline run`` in a
child process, the sides interleaved (A B A B ...) so that what the host does meanwhile falls on
both alike.

The rate is chosen from a first, uncounted run of BASE: high enough that a run gives
TARGET_SAMPLES samples, within MIN_RATE..MAX_RATE, and the same for every run (a side's runs
must be recorded alike to be added up).  leadline runs inside each interpreter: one that
cannot import it is given this leadline, when it is the same Python version, through a folder
on ``PYTHONPATH`` that holds only the ``leadline`` package (the interpreter's own packages stay
first for everything else)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LeadlineError
from .childrun import run_child

TARGET_SAMPLES = 10_000
MIN_RATE = 100
MAX_RATE = 4000
DEFAULT_RATE = 1000


@dataclass(frozen=True)
class Twin:
    """One side: the interpreter and the script with its arguments."""

    label: str  # "base" or "new"
    python: str
    argv: tuple[str, ...]

    @property
    def shown(self) -> str:
        return shlex.join([self.python, *self.argv])


@dataclass
class Recorded:
    rate: int
    runs: dict[str, list[Path]] = field(default_factory=dict)  # label -> captures


def parse_side(label: str, spec: str, script: Sequence[str]) -> Twin:
    """A side from its option: an interpreter (the script after ``--`` is run by it), or with no
    script, a command line ``PYTHON SCRIPT [ARGS]``."""
    words = shlex.split(spec)
    if not words:
        raise LeadlineError(f"--{label}: give a Python interpreter or a command line")
    if script:
        if len(words) != 1:
            raise LeadlineError(
                f"--{label} {spec!r}: with a script after --, give only the interpreter"
            )
        return Twin(label, words[0], tuple(script))
    if len(words) < 2:
        raise LeadlineError(
            f"--{label} {spec!r}: give the script too (--{label} 'PYTHON SCRIPT ARGS'), or "
            "the script after -- for both sides"
        )
    return Twin(label, words[0], tuple(words[1:]))


def _python(python: str, code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -c code`, its output captured; a one-line error when it cannot be started."""
    try:
        return subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, env=env
        )
    except OSError as e:
        raise LeadlineError(f"cannot run {python}: {e.strerror}") from None
    except subprocess.TimeoutExpired:
        raise LeadlineError(f"{python} did not answer within a minute") from None


def _env_for(python: str, shim: Path) -> dict[str, str]:
    """The environment `python` runs leadline in: as it is when it imports leadline; else this
    leadline through `shim` (same Python version only)."""
    env = dict(os.environ)
    probe = _python(python, "import sys, leadline._native", env)
    if probe.returncode == 0:
        return env
    version = _python(python, "import sys; print('%d.%d' % sys.version_info[:2])", env)
    if version.returncode != 0:
        raise LeadlineError(f"{python} is not a Python interpreter that runs")
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    theirs = version.stdout.strip()
    if theirs != mine:
        raise LeadlineError(
            f"{python} (Python {theirs}) cannot import leadline: install leadline in it "
            f"(this one is built for Python {mine})"
        )
    if not shim.exists():
        shim.mkdir(parents=True)
        package = Path(__file__).resolve().parents[1]
        (shim / "leadline").symlink_to(package, target_is_directory=True)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), env.get("PYTHONPATH", "")) if p)
    return env


def _record_one(
    twin: Twin, env: dict[str, str], mode: str, rate: int, out: Path, timeout: float | None
) -> float:
    """One sampled run of `twin` into `out`; its wall time.  A run that fails stops it all."""
    cmd = [twin.python, "-m", "leadline", "run", "-q", "--mode", mode, "--rate", str(rate)]
    cmd += ["-o", str(out), *twin.argv]
    result = run_child(cmd, env=env, timeout=timeout)
    if result.status != 0 or not out.exists():
        why = "timed out" if result.status == 124 else f"exited with status {result.status}"
        raise LeadlineError(f"{twin.label}: {twin.shown} {why}; run it alone to see why")
    return result.wall


def record_twins(
    twins: Sequence[Twin],
    runs: int,
    mode: str,
    rate: int | None,
    folder: Path,
    timeout: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Recorded:
    """`runs` sampled runs of each side into `folder/<label>/NN.lead`, interleaved; the rate
    `rate`, or chosen from a first run of BASE that is not kept."""
    if runs < 1:
        raise LeadlineError("--runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="leadline-compare-") as scratch:
        shim = Path(scratch)
        envs = {t.label: _env_for(t.python, shim / "path") for t in twins}
        for t in twins:
            (folder / t.label).mkdir(parents=True, exist_ok=True)
        if rate is None:
            probe = shim / "probe.lead"
            wall = _record_one(twins[0], envs[twins[0].label], mode, DEFAULT_RATE, probe, timeout)
            rate = int(min(MAX_RATE, max(MIN_RATE, TARGET_SAMPLES / max(wall, 1e-3))))
        recorded = Recorded(rate, {t.label: [] for t in twins})
        total = runs * len(twins)
        for i in range(runs):
            for t in twins:
                out = folder / t.label / f"{i + 1:02d}.lead"
                _record_one(t, envs[t.label], mode, rate, out, timeout)
                recorded.runs[t.label].append(out)
                if progress is not None:
                    progress(sum(len(v) for v in recorded.runs.values()), total)
        return recorded
