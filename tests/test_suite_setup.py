"""The test suite's own set-up: it runs from the repository root as from tests/, a test that
needs something missing says so, and a child that hangs shows where."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from support import HOOK_KIND_ENDS, PY, ROOT, ChildTimeout, run


def collected(cwd: str, *args: str) -> set[str]:
    r = run([PY, "-m", "pytest", "--collect-only", "-q", *args], cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    ids = {line.strip() for line in r.stdout.splitlines() if "::" in line}
    return {i.removeprefix("tests/") for i in ids}


@HOOK_KIND_ENDS
def test_the_suite_collects_alike_from_the_root_and_from_tests() -> None:
    from_root = collected(str(ROOT))
    from_tests = collected(str(ROOT / "tests"))
    assert from_root == from_tests
    assert len(from_root) > 200
    assert any(i.startswith("fleet/") for i in from_root)  # collected, skipped without --fleet
    assert "test_suite_setup.py::test_the_suite_collects_alike_from_the_root_and_from_tests" in (
        from_root
    )


@HOOK_KIND_ENDS  # test_export_formats.py runs there alone
def test_a_test_needing_go_says_so_when_go_is_missing() -> None:
    # PATH without any folder that has a `go`.
    path = os.pathsep.join(
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not shutil.which("go", path=d)
    )
    r = run(
        [PY, "-m", "pytest", "-q", "-rs", "test_export_formats.py", "-k", "go_tool_pprof"],
        cwd=str(ROOT / "tests"),
        env={**os.environ, "PATH": path},
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"SKIPPED \[1\] .*needs Go .*: go is not installed", r.stdout), r.stdout
    assert "1 skipped" in r.stdout


def test_a_hung_child_shows_its_stacks() -> None:
    code = (
        "import threading, time\n"
        "def waiting_in_a_thread():\n"
        "    time.sleep(60)\n"
        "threading.Thread(target=waiting_in_a_thread, daemon=True).start()\n"
        "def stuck_in_main():\n"
        "    time.sleep(60)\n"
        "stuck_in_main()\n"
    )
    with pytest.raises(ChildTimeout) as e:
        run([sys.executable, "-c", code], timeout=3)
    message = str(e.value)
    assert "did not finish within 3 s" in message
    # faulthandler's dump of every thread: the main thread's and the other thread's frames.
    assert "in stuck_in_main" in message and "in waiting_in_a_thread" in message, message
    if shutil.which("gdb"):
        # And every thread's C stack first: both threads wait in a sleep's system call.
        native = message.split("--- C stacks (gdb) ---", 1)[1].split("--- stderr ---", 1)[0]
        assert native.count("Thread ") >= 2, message
        assert "sleep" in native or "select" in native, message


STATISTICAL_SUITE = """
import pytest
from pathlib import Path

ATTEMPTS = Path(__file__).with_name("attempts")


def attempt(name):
    # Which attempt of `name` this is (1, 2, ...), counted in a file beside the tests.
    seen = ATTEMPTS.read_text().split() if ATTEMPTS.exists() else []
    ATTEMPTS.write_text(" ".join([*seen, name]))
    return seen.count(name) + 1


@pytest.mark.statistical
def test_second_attempt_holds(tmp_path):
    assert not any(tmp_path.iterdir())  # a fresh tmp_path each attempt
    (tmp_path / "mine").touch()
    assert attempt("holds") == 2, "the first draw was off"


@pytest.mark.statistical
def test_always_off():
    attempt("off")
    assert False, "off every time"


def test_not_statistical():
    attempt("plain")
    assert False, "a plain failure"
"""


def test_a_statistical_test_fails_only_when_its_second_attempt_fails_too(tmp_path: Path) -> None:
    """The `statistical` marker (tests/statistical.py): a failed first attempt is recorded again
    with fresh fixtures, listed in the summary with its reason; a claim off on both attempts
    fails, and an unmarked test is never run twice."""
    (tmp_path / "test_claims.py").write_text(STATISTICAL_SUITE)
    r = run(
        [PY, "-m", "pytest", "-q", "-p", "statistical", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
        cwd=str(tmp_path),
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
        timeout=300,
    )  # fmt: skip
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    attempts = (tmp_path / "attempts").read_text().split()
    assert [attempts.count(n) for n in ("holds", "off", "plain")] == [2, 2, 1], out
    assert re.search(r"^RERUN .*test_second_attempt_holds.* - AssertionError: the first draw", out,
                     re.M), out  # fmt: skip
    assert re.search(r"^FAILED .*test_always_off - AssertionError: off every time", out, re.M)
    assert re.search(r"^FAILED .*test_not_statistical - AssertionError: a plain failure", out,
                     re.M)  # fmt: skip
    assert out.rstrip().splitlines()[-1].startswith("2 failed, 1 passed, 2 rerun"), out
