"""A slice of CPython's own test suite gives the same result for every test with and without
leadline: `python -m test ...` against `leadline run -q -m test ...` and `leadline trace -q -m
test ...`, compared test by test (regrtest's --junit-xml).

The slice is chosen for what a profiler could disturb and for its speed (about 15 s a run
without leadline): generators, exceptions and tracebacks, context managers, scopes,
sys.settrace (which must keep working beside leadline's hooks), atexit; threads (with their
excepthook); signals sent, blocked, waited for and woken up on.  regrtest runs the tests in
its own process, the one leadline records.

The `test` package is CPython's: pyenv's builds have it; Debian's (the 3.14 and 3.15 builds
used here) ship it separately, and when it is missing these tests are skipped."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sameworld import MODES, Outcome, leadline_run, python_run

GROUPS: dict[str, list[str]] = {
    "core": [
        "test_generators",
        "test_exceptions",
        "test_contextlib",
        "test_with",
        "test_raise",
        "test_scope",
        "test_sys_settrace",
        "test_traceback",
        "test_atexit",
    ],
    "threading": [
        "test_threading",
        *("-m", "ThreadTests", "-m", "ThreadingExceptionTests", "-m", "ExceptHookTests"),
    ],
    "signal": [
        "test_signal",
        *("-m", "PendingSignalsTests", "-m", "WakeupSignalTests", "-m", "PosixTests"),
        *("-m", "RaiseSignalTest"),
    ],
}


def missing(group: str) -> list[str]:
    """The test modules of `group` that this Python does not have."""
    try:
        if importlib.util.find_spec("test.libregrtest") is None:
            return ["test.libregrtest"]
    except ImportError:
        return ["test"]
    names = [a for a in GROUPS[group] if a.startswith("test_")]
    return [n for n in names if importlib.util.find_spec(f"test.{n}") is None]


def results(xml_path: Path) -> dict[str, str]:
    """Each test's outcome: passed, or failure/error/skipped with its message."""
    out: dict[str, str] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        verdict = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                verdict = f"{child.tag}: {child.get('message') or (child.text or '').strip()}"
                break
        out[case.get("name", "?")] = verdict
    return out


def suite(mode: str | None, group: str, tmp_path: Path) -> tuple[Outcome, dict[str, str]]:
    xml = tmp_path / f"{mode or 'python'}-{group}.xml"
    xml.unlink(missing_ok=True)
    args = ["-m", "test", *GROUPS[group], "--junit-xml", str(xml)]
    if mode is None:
        r = python_run(args, tmp_path, timeout=600)
    else:
        r = leadline_run(mode, args, tmp_path, timeout=600)
    assert xml.exists(), f"{mode}: no results\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r, results(xml)


@pytest.mark.parametrize("group", list(GROUPS))
def test_same_results_with_and_without_leadline(tmp_path: Path, group: str) -> None:
    if absent := missing(group):
        pytest.skip(
            f"CPython's test suite is not installed for this Python ({', '.join(absent)} "
            "missing; Debian ships it as libpython3.X-testsuite)"
        )
    expected_run, expected = suite(None, group, tmp_path)
    assert len(expected) >= 20, expected_run.stdout[-3000:]
    for mode in MODES:
        got_run, got = suite(mode, group, tmp_path)
        if got != expected:
            # A test that depends on timing can fail once on a busy host, with or without
            # leadline: both are run once more, and that comparison decides.
            expected_run, expected = suite(None, group, tmp_path)
            got_run, got = suite(mode, group, tmp_path)
        differ = {
            name for name in expected.keys() | got.keys() if expected.get(name) != got.get(name)
        }
        assert not differ, {n: (expected.get(n), got.get(n)) for n in sorted(differ)}
        assert got_run.returncode == expected_run.returncode, got_run.stdout[-3000:]
