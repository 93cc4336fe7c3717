"""The pytest plugin, end to end: `pytest --leadline-baseline DIR` stores each test's profile,
passes unchanged tests and fails the test whose profile regressed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import HOOK_KIND_ENDS, leadline, run, write

from leadline.pytest_plugin import baseline_key, profile_name

SUITE = """
    import copy, os
    SLOW = int(os.environ.get("SLOW", "1"))
    COPIES = int(os.environ.get("COPIES", "0"))
    CALLS = int(os.environ.get("CALLS", "1"))
    DATA = {"a": [1, 2, {"b": (3, 4)}], "c": "d"}

    def tiny(x):
        return x + 1

    def many():
        out = []  # a loop, not a comprehension: that is a function of its own before 3.12
        for i in range(10 * CALLS):
            out.append(tiny(i))
        return out

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
        assert len(many()) == 10 * CALLS
"""


RATE = ("--leadline-rate", "2000")  # enough samples in a test of about half a second


def pytest_run(
    tmp_path: Path, *args: str, slow: int = 1, copies: int = 0, calls: int = 1
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLOW": str(slow), "COPIES": str(copies), "CALLS": str(calls)}
    env["NO_COLOR"] = "1"
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


@HOOK_KIND_ENDS
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
    first, second = (plugin_summary(r.stdout) for r in runs)
    assert (first.stored, first.long) == (1, 1), runs[0].stdout  # test_work: too many calls
    # The second run compares test_quick's calls and stores test_work's samples.
    assert (second.compared, second.by_calls, second.stored) == (1, 1, 1), runs[1].stdout
    names = sorted(p.name for p in cache.glob("*.lead"))
    assert names == [
        "tests_test_suite.py__test_quick.calls.lead",
        "tests_test_suite.py__test_work.lead",
    ]


TIMING = """
    import os
    FIRST = [True]

    def tiny(x):
        return x + 1

    def test_polls():
        # Once in a process, with FLAKE set, 5 times the calls (as a poll with a timeout makes
        # when the thread it waits for is late); when the function runs again, not.
        n = 50 if os.environ.get("FLAKE") and FIRST[0] else 10
        FIRST[0] = False
        assert len([tiny(i) for i in range(n)]) == n
"""


@HOOK_KIND_ENDS
def test_calls_that_change_once_are_traced_again_before_the_test_fails(tmp_path: Path) -> None:
    """A test whose calls changed against its baseline is traced again: a change of code
    changes them again and fails the test (the planted regressions of the other tests), calls
    that hung on timing need not, and the test passes, counted in the summary (seen on a busy
    3.15 CI stage: more-itertools' `callback_iter` test, whose queue poll with a 0.1 s timeout
    ran once more)."""
    write(tmp_path, "test_suite.py", TIMING)
    for _ in range(2):  # stores the calls, then compares them: the very same
        r = pytest_run(tmp_path, "--leadline-baseline", "base")
        assert r.returncode == 0, r.stdout + r.stderr
    r = run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--leadline-baseline",
         "base", "test_suite.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "FLAKE": "1", "NO_COLOR": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    summary = plugin_summary(r.stdout)
    assert (summary.compared, summary.regressed, summary.by_calls) == (1, 0, 1), r.stdout
    assert "1 whose calls changed but not when traced again (not failed)" in r.stdout, r.stdout
    assert not list((tmp_path / "base" / "latest").glob("*.again.lead"))


@dataclass
class Summary:
    compared: int
    regressed: int
    by_calls: int
    stored: int
    long: int  # too many calls to count: sampled from the next run
    short: int  # too short to sample (a long test whose samples were empty)


def plugin_summary(stdout: str) -> Summary:
    """The figures of the plugin's summary line."""
    m = re.search(
        r"leadline: (\d+) tests compared with their baseline \((\d+) regressed; (\d+) by their "
        r"calls\), (\d+) baselines stored in [^\s,]+(?:, (\d+) too long to count calls \(sampled "
        r"from the next run\))?(?:, (\d+) too short to sample)?[^\n]*\n",
        stdout,
    )
    assert m, stdout
    return Summary(*(int(g or 0) for g in m.groups()))


def line_with(stdout: str, text: str) -> str:
    """The first line of the plugin's output with `text` in it (the whole output if none, so
    that a failure shows what it said instead)."""
    found = [ln for ln in stdout.splitlines() if text in ln]
    assert found, f"no line with {text!r} in:\n{stdout}"
    return found[0]


def assert_cause(stdout: str, name: str) -> None:
    """The failure's first reason names function `name`: as the function whose cost grew, or,
    when the whole program's time per run grew more beyond noise and is said first, as its most
    likely cause (both are the regression found; a busy 3.14 CI stage said the second)."""
    reason = line_with(stdout, "regressed against base")
    lines = stdout.splitlines()
    first = lines[lines.index(reason) + 1].strip()
    assert (first.startswith(f"{name} (") and "cost grew" in first) or (
        first.startswith("the whole program's time per run grew")
        and f"; most likely cause: {name} (" in first
    ), stdout


@HOOK_KIND_ENDS
@pytest.mark.statistical
def test_baseline_then_unchanged_then_regressed(tmp_path: Path) -> None:
    write(tmp_path, "test_suite.py", SUITE)
    base = tmp_path / "base"
    # Without the option the plugin does nothing.
    r = pytest_run(tmp_path)
    assert r.returncode == 0 and "leadline:" not in r.stdout

    # The first run records each test's calls: test_quick's are its baseline, test_work makes
    # millions (a generator's every step), too many to count, and is sampled from then on.
    r = pytest_run(tmp_path, "--leadline-baseline", "base")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = plugin_summary(r.stdout)
    assert (summary.compared, summary.stored, summary.long) == (0, 1, 1), r.stdout
    assert sorted(p.name for p in base.iterdir() if p.is_file()) == [
        "test_suite.py__test_quick.calls.lead",
        "test_suite.py__test_quick.calls.sig",
        "test_suite.py__test_work.long",
    ]
    # The second compares test_quick's calls (about 20 us: no sample would fall in it) and
    # stores test_work's samples; the third compares both, and flags nothing.
    r = pytest_run(tmp_path, "--leadline-baseline", "base")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = plugin_summary(r.stdout)
    assert (summary.compared, summary.by_calls, summary.stored) == (1, 1, 1), r.stdout
    r = pytest_run(tmp_path, "--leadline-baseline", "base")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = plugin_summary(r.stdout)
    assert (summary.compared, summary.regressed, summary.by_calls) == (2, 0, 1), r.stdout
    assert (base / "latest" / "test_suite.py__test_work.lead").stat().st_size > 0

    # `helper` 5 times slower: about 11% of the test's samples become about 38%.
    r = pytest_run(tmp_path, "--leadline-baseline", "base", slow=5)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout
    assert "FAILED test_suite.py::test_work" in r.stdout
    assert "leadline: this test's profile regressed against base" in r.stdout
    assert_cause(r.stdout, "helper")
    summary = plugin_summary(r.stdout)
    assert (summary.compared, summary.regressed) == (2, 1), r.stdout

    # `helper` now copies a structure 50 times a call: the new cost is in the standard library's
    # copy module, and the failure names helper as where it enters.
    r = pytest_run(tmp_path, "--leadline-baseline", "base", copies=50)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED test_suite.py::test_work" in r.stdout
    # Said after the first reason, whichever comes first (the whole program's time per run
    # can have grown more beyond noise than helper's cost).
    reason = line_with(r.stdout, "; most likely cause: ")
    assert "; most likely cause: helper (" in reason and ", now calls deepcopy (copy.py:" in reason

    # `tiny` called 5 times as often in test_quick, far too short to sample: its calls say so,
    # whatever the machine's load, and name `many` as the code that makes them.
    r = pytest_run(tmp_path, "--leadline-baseline", "base", calls=5)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout and "FAILED test_suite.py::test_quick" in r.stdout
    reason = line_with(r.stdout, "calls grew").strip()
    assert reason.startswith("tiny (") and "calls grew 400% (10 -> 50)" in reason, reason
    assert "; most likely cause: many (" in reason and ", now calls tiny (" in reason, reason
    assert "see: leadline diff --calls base/test_suite.py__test_quick.calls.lead" in r.stdout
    shown = leadline(
        "diff",
        "--calls",
        *(f"{d}/test_suite.py__test_quick.calls.lead" for d in ("base", "base/latest")),
        "--json",
        cwd=tmp_path,
        check=True,
    )
    data = json.loads(shown.stdout)
    assert data["normalization"]["unit"] == "calls"
    assert (data["culprits"][0]["name"], data["culprits"][0]["into"]["name"]) == ("many", "tiny")
    assert (data["culprits"][0]["base"], data["culprits"][0]["new"]) == (10, 50)

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


# A real suite: more-itertools 10.5.0's own tests (664, as its sdist ships them), nearly all far
# too short for a sample.
REAL_SUITE = "more-itertools==10.5.0"
# The plant: one test's predicate called 5 times as often (range(10) -> range(50)), lines kept.
PLANT = (
    "        q = range(10)\n        self.assertEqual(mi.quantify(q, lambda x: x % 2 == 0), 5)\n",
    "        q = range(50)\n        self.assertEqual(mi.quantify(q, lambda x: x % 2 == 0), 25)\n",
)


def real_suite(tmp_path: Path) -> Path:
    """The sdist of REAL_SUITE from PyPI, unpacked: its package and its tests."""
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    r = run(
        [*pip, "--no-deps", "--no-binary", ":all:", "-d", str(tmp_path), REAL_SUITE],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    with tarfile.open(next(tmp_path.glob("more*itertools-10.5.0.tar.gz"))) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp_path, filter="data")
        else:  # pragma: no cover - Pythons without extraction filters
            tar.extractall(tmp_path)
    return tmp_path / "more-itertools-10.5.0"


@HOOK_KIND_ENDS
@pytest.mark.network
def test_a_real_suite_is_compared_by_its_calls(tmp_path: Path) -> None:
    """Every test of a real suite of short tests is compared (by its calls; the two that make
    too many are sampled), two unchanged runs flag nothing, and a planted regression, one
    function called 5 times as often in one test, fails that test alone and names it."""
    src = real_suite(tmp_path)
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PYTEST_ADDOPTS", None)

    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    argv += ["--leadline-baseline", str(tmp_path / "base")]

    def suite() -> tuple[subprocess.CompletedProcess[str], Summary]:
        r = run(
            argv,
            cwd=src,
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
        return r, plugin_summary(r.stdout)

    r, first = suite()
    assert r.returncode == 0, r.stdout[-3000:]
    tests = first.stored + first.long
    assert tests == 664 and first.long <= 10, r.stdout[-500:]
    r, second = suite()  # compares the calls, stores the long tests' samples
    assert r.returncode == 0, r.stdout[-3000:]
    assert (second.by_calls, second.stored) == (first.stored, first.long), r.stdout[-500:]
    r, third = suite()
    assert r.returncode == 0, r.stdout[-3000:]
    assert third.compared >= 0.9 * tests and third.regressed == 0, r.stdout[-500:]

    recipes = src / "tests" / "test_recipes.py"
    text = recipes.read_text()
    assert text.count(PLANT[0]) == 1
    recipes.write_text(text.replace(*PLANT))
    r, planted = suite()
    assert r.returncode == 1 and planted.regressed == 1, r.stdout[-3000:]
    assert "FAILED tests/test_recipes.py::QuantifyTests::test_custom_predicate" in r.stdout
    reason = line_with(r.stdout, "calls grew").strip()
    # The predicate (named by its qualified name from 3.11 on, `<lambda>` before).
    assert reason.split(" (")[0].endswith("<lambda>") and "tests/test_recipes.py)" in reason
    assert "calls grew 400% (10 -> 50)" in reason, reason


@HOOK_KIND_ENDS
@pytest.mark.statistical
def test_more_runs_a_side_measure_the_noise(tmp_path: Path) -> None:
    """`--leadline-runs 5`: a sampled test runs five times into a folder a side, compared as
    `leadline diff` compares five runs a side (the noise measured from their spread); a test
    compared by its calls runs once."""
    write(tmp_path, "test_suite.py", SUITE)
    runs = ("--leadline-baseline", "base", "--leadline-runs", "5")
    r = pytest_run(tmp_path, *runs)  # the calls recorded; test_work is marked long
    assert r.returncode == 0 and plugin_summary(r.stdout).long == 1, r.stdout + r.stderr
    r = pytest_run(tmp_path, *runs)  # test_quick compared by its calls, test_work's runs stored
    summary = plugin_summary(r.stdout)
    assert (summary.compared, summary.by_calls, summary.stored) == (1, 1, 1), r.stdout
    folder = "test_suite.py__test_work.runs"
    stored = sorted(p.name for p in (tmp_path / "base" / folder).iterdir())
    assert stored == [f"{i:02d}.lead" for i in range(1, 6)]

    r = pytest_run(tmp_path, *runs)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = plugin_summary(r.stdout)
    assert (summary.compared, summary.regressed) == (2, 0), r.stdout
    assert len(list((tmp_path / "base" / "latest" / folder).glob("*.lead"))) == 5

    # `helper` 5 times slower: about 11% of the test's samples become about 38%.
    r = pytest_run(tmp_path, *runs, slow=5)
    assert r.returncode == 1 and "FAILED test_suite.py::test_work" in r.stdout, r.stdout
    assert_cause(r.stdout, "helper")
    assert f"see: leadline diff base/{folder} base/latest/{folder}" in r.stdout
    shown = leadline("diff", f"base/{folder}", f"base/latest/{folder}", "--json", cwd=tmp_path)
    data = json.loads(shown.stdout)
    assert data["base"]["runs"] == data["new"]["runs"] == 5 and data["noise_from_runs"] is True


ONCE = """
    SEEN = []

    def test_once():
        SEEN.append(1)
        assert len(SEEN) == 1  # fails when its function is called again
        assert sum(i for i in range(4_000_000)) > 0  # a generator's every step: too many calls
"""


@HOOK_KIND_ENDS
def test_a_test_that_cannot_run_twice_is_compared_with_fewer_runs(tmp_path: Path) -> None:
    write(tmp_path, "test_suite.py", ONCE)
    runs = ("--leadline-baseline", "base", "--leadline-runs", "3")
    r = pytest_run(tmp_path, *runs)
    assert r.returncode == 0 and plugin_summary(r.stdout).long == 1, r.stdout + r.stderr
    r = pytest_run(tmp_path, *runs)  # its first run passes: the test passes, one run stored
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert "1 run fewer times than asked (failed when run again)" in r.stdout
    stored = sorted(p.name for p in (tmp_path / "base" / "test_suite.py__test_once.runs").iterdir())
    assert stored == ["01.lead"]
    r = pytest_run(tmp_path, "--leadline-baseline", "base", "--leadline-runs", "0")
    assert r.returncode == 4 and "--leadline-runs must be between 1 and 100" in r.stderr
