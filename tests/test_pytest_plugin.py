"""The pytest plugin, end to end: `pytest --leadline-baseline DIR` stores each test's profile,
passes unchanged tests and fails the test whose profile regressed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import run, write

from leadline.pytest_plugin import baseline_key, profile_name

SUITE = """
    import copy, os
    SLOW = int(os.environ.get("SLOW", "1"))
    COPIES = int(os.environ.get("COPIES", "0"))
    DATA = {"a": [1, 2, {"b": (3, 4)}], "c": "d"}

    def helper(n):
        s = 0
        for k in range(n):
            s += k
        for _ in range(COPIES):
            copy.deepcopy(DATA)
        return s

    def other(n):
        return sum(i * i for i in range(n))

    def test_work():
        for _ in range(2000):
            helper(1000 * SLOW)
            other(4000)

    def test_quick():
        assert other(10) == 285
"""


RATE = ("--leadline-rate", "2000")  # enough samples in a test of about half a second


def pytest_run(
    tmp_path: Path, *args: str, slow: int = 1, copies: int = 0
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLOW": str(slow), "COPIES": str(copies), "NO_COLOR": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    return run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            *RATE,
            *args,
            "test_suite.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_profile_names() -> None:
    assert profile_name("tests/test_a.py::test_b[x-1]") == "tests_test_a.py__test_b[x-1].lead"
    long = profile_name("t.py::test_" + "x" * 400)
    assert len(long) < 160 and long.endswith(".lead")
    assert profile_name("t.py::test_" + "x" * 400) != profile_name("t.py::test_" + "x" * 401)


def test_baseline_keys_do_not_follow_pytests_rootdir(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    (tmp_path / "loose").mkdir()
    write(proj, "pyproject.toml", "[project]\nname = 'p'\n")
    f = write(proj / "tests", "test_a.py", "def test_x(): pass\n")
    for nodeid in ("test_a.py::test_x", "proj/tests/test_a.py::test_x", "tests/test_a.py::test_x"):
        assert baseline_key(f, nodeid, tmp_path) == "tests/test_a.py::test_x"
    key = baseline_key(f, "t/test_a.py::TestC::test_y[1]", proj)
    assert key == "tests/test_a.py::TestC::test_y[1]"
    # No project marker: relative to where pytest was started, else the absolute path.
    g = write(tmp_path / "loose", "test_b.py", "def test_z(): pass\n")
    assert baseline_key(g, "test_b.py::test_z", tmp_path) == "loose/test_b.py::test_z"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert baseline_key(g, "test_b.py::test_z", outside) == f"{g.resolve().as_posix()}::test_z"


def test_a_baseline_dir_outside_the_project_compares_on_the_second_run(tmp_path: Path) -> None:
    """`pytest tests --leadline-baseline DIR` with DIR outside a project that has no pytest
    configuration: once DIR exists, pytest's rootdir (the common ancestor of the command line's
    paths) moves up, and with it the node ids; the second run must still find the first run's
    baselines."""
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    write(proj / "tests", "test_suite.py", SUITE)
    cache = tmp_path / "cache"
    env = {**os.environ, "SLOW": "1", "NO_COLOR": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *RATE, "tests"]
    argv += ["--leadline-baseline", str(cache)]
    runs = [
        run(argv, cwd=proj, capture_output=True, text=True, timeout=300, env=env) for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), [r.stdout + r.stderr for r in runs]
    assert plugin_summary(runs[0].stdout)[2] == 2  # stored
    compared, regressed, stored, short = plugin_summary(runs[1].stdout)
    assert (regressed, stored) == (0, 0) and compared + short == 2 and compared >= 1, runs[1].stdout
    names = sorted(p.name for p in cache.glob("*.lead"))
    assert names == ["tests_test_suite.py__test_quick.lead", "tests_test_suite.py__test_work.lead"]


def plugin_summary(stdout: str) -> tuple[int, int, int, int]:
    """(compared, regressed, stored, too short) from the plugin's summary line."""
    m = re.search(
        r"leadline: (\d+) tests compared with their baseline \((\d+) regressed\), "
        r"(\d+) baselines stored in \S+(?:, (\d+) too short to sample)?\n",
        stdout,
    )
    assert m, stdout
    return int(m[1]), int(m[2]), int(m[3]), int(m[4] or 0)


@pytest.mark.statistical
def test_baseline_then_unchanged_then_regressed(tmp_path: Path) -> None:
    write(tmp_path, "test_suite.py", SUITE)
    # Without the option the plugin does nothing.
    r = pytest_run(tmp_path)
    assert r.returncode == 0 and "leadline:" not in r.stdout

    r = pytest_run(tmp_path, "--leadline-baseline", "base")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 tests compared with their baseline (0 regressed), 2 baselines stored" in r.stdout
    stored = sorted(p.name for p in (tmp_path / "base").glob("*.lead"))
    assert stored == ["test_suite.py__test_quick.lead", "test_suite.py__test_work.lead"]

    # test_quick takes about 20 us: on a quiet machine no sample falls in it, on a busy one one
    # can, and it is then compared too.  Either way each test is compared or too short.
    r = pytest_run(tmp_path, "--leadline-baseline", "base")
    assert r.returncode == 0, r.stdout + r.stderr
    compared, regressed, stored, short = plugin_summary(r.stdout)
    assert (regressed, stored) == (0, 0) and compared >= 1 and compared + short == 2, r.stdout
    assert (tmp_path / "base" / "latest" / "test_suite.py__test_work.lead").stat().st_size > 0

    # `helper` 5 times slower: about 11% of the test's samples become about 38%.
    r = pytest_run(tmp_path, "--leadline-baseline", "base", slow=5)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout
    assert "FAILED test_suite.py::test_work" in r.stdout
    assert "leadline: this test's profile regressed against base" in r.stdout
    reason = next(ln for ln in r.stdout.splitlines() if "cost grew" in ln)
    assert reason.strip().startswith("helper (")
    compared, regressed, stored, short = plugin_summary(r.stdout)
    assert (regressed, stored) == (1, 0) and compared >= 1 and compared + short == 2, r.stdout

    # `helper` now copies a structure 50 times a call: the new cost is in the standard library's
    # copy module, and the failure names helper as where it enters.
    r = pytest_run(tmp_path, "--leadline-baseline", "base", copies=50)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED test_suite.py::test_work" in r.stdout
    reason = next(ln for ln in r.stdout.splitlines() if "cost grew" in ln)
    assert "; most likely cause: helper (" in reason and ", now calls deepcopy (copy.py:" in reason

    # Time per run: a regression is seen in absolute cost.  Costs per run only flag more than 4
    # sigma of a 15% run-to-run floor on each side, a ratio above about 2.8, and a shared CI
    # machine's speed can differ twofold between two runs: `helper` 12 times slower leaves room.
    r = pytest_run(tmp_path, "--leadline-baseline", "base", "--leadline-per-run", slow=12)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--per 1" in r.stdout and "FAILED test_suite.py::test_work" in r.stdout

    # Accepting the new speed: --leadline-update stores it, and it then compares clean.
    r = pytest_run(tmp_path, "--leadline-baseline", "base", "--leadline-update", slow=5)
    assert r.returncode == 0 and "2 baselines stored" in r.stdout
    r = pytest_run(tmp_path, "--leadline-baseline", "base", slow=5)
    assert r.returncode == 0, r.stdout + r.stderr


def test_bad_plugin_options(tmp_path: Path) -> None:
    write(tmp_path, "test_suite.py", SUITE)
    r = pytest_run(tmp_path, "--leadline-baseline", "base", "--leadline-rate", "0")
    assert r.returncode == 4
    assert "--leadline-baseline: --rate must be between" in r.stderr
