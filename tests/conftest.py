"""Shared fixtures: running the real CLI, reading its JSON, and a guard that no profiler state
leaks from one test into the next."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import ensure_chromium

PY = sys.executable


@pytest.fixture(autouse=True)
def no_profiler_leaks() -> Iterator[None]:
    yield
    assert sys.getprofile() is None
    if sys.version_info >= (3, 12):
        for tool in (2, 3, 4):
            assert sys.monitoring.get_tool(tool) is None, f"tool {tool} left registered"


def write(tmp_path: Path, name: str, source: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(source), encoding="utf-8")
    return p


def leadline(
    *args: str | os.PathLike[str], cwd: Path, timeout: float = 120, check: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    r = subprocess.run(
        [PY, "-m", "leadline", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if check and r.returncode != 0:
        raise AssertionError(f"leadline {args} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def report(capture: Path, cwd: Path) -> dict[str, Any]:
    r = leadline("report", capture, "--json", cwd=cwd, check=True)
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def log_rows(capture: Path, cwd: Path) -> list[dict[str, Any]]:
    r = leadline("log", capture, "--json", cwd=cwd, check=True)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def funcs(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Functions of a report by name (the first of each name)."""
    out: dict[str, dict[str, Any]] = {}
    for f in data["functions"]:
        out.setdefault(f["name"], f)
    return out


def traced(
    tmp_path: Path, source: str, *opts: str, name: str = "prog.py"
) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = write(tmp_path, name, source)
    cap = tmp_path / "out.lead"
    r = leadline("trace", "-o", cap, *opts, script, cwd=tmp_path)
    return r, cap


def find_python(version: str) -> str | None:
    """The path of an installed `python<version>` (e.g. "3.12", "2.7"), or None."""
    if version == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return sys.executable
    candidates = []
    try:
        bare = subprocess.run(
            ["pyenv", "versions", "--bare"], capture_output=True, text=True, timeout=30
        ).stdout.split()
        for v in bare:
            if v == version or v.startswith(version + "."):
                prefix = subprocess.run(
                    ["pyenv", "prefix", v], capture_output=True, text=True, timeout=30
                ).stdout.strip()
                candidates.append(os.path.join(prefix, "bin", f"python{version}"))
    except (OSError, subprocess.SubprocessError):
        pass
    found = shutil.which(f"python{version}")
    if found:
        candidates.append(found)
    for exe in candidates:
        try:
            ok = subprocess.run(
                [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if ok.returncode == 0 and ok.stdout.strip() == version:
            return exe
    return None


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium binary for the HTML report tests (installed if missing), or a skip."""
    binary, why = ensure_chromium()
    if binary is None:
        pytest.skip(why)
    return binary
