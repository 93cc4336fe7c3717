"""The `statistical` marker (a pytest plugin, loaded by conftest.py).

A statistical claim (shares of samples, a ranking beyond noise, a count of samples in a time) is
judged as a sequential test: when its first attempt fails it is recorded again from scratch (a
fresh tmp_path and fresh function-scoped fixtures) and the test fails only if that attempt fails
too.  A claim whose bound a correct product misses with probability p on a busy host then fails
one run in 1/p^2, while a product off by more than the bound fails both attempts.  Every first
failure is printed in the run's summary, under "statistical claims judged twice" with its
assertion, so a claim that often needs its second attempt is seen and traced, not hidden.

Only tests whose evidence the test makes itself are marked: a test that judges module-scoped
captures would see the same evidence twice, and a correctness property (a wrong stack, an exit
status) is no statistical claim.
"""

from __future__ import annotations

import pytest

NAME = "statistical"
WHY = (
    "a statistical claim on sampled or timed evidence: a failed attempt is recorded once more and"
    " the test fails only if both fail"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{NAME}: {WHY}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pytest-rerunfailures' `flaky` marker runs the test's whole protocol again (setup, call,
    # teardown), so function-scoped fixtures are made anew.
    for item in items:
        if item.get_closest_marker(NAME) is not None:
            item.add_marker(pytest.mark.flaky(reruns=1))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Each first attempt that failed, with the line that says why."""
    reports = terminalreporter.stats.get("rerun", [])
    if not reports:
        return
    terminalreporter.section("statistical claims judged twice", sep="=")
    for report in reports:
        crash = getattr(report.longrepr, "reprcrash", None)
        why = crash.message.splitlines()[0] if crash is not None and crash.message else "?"
        terminalreporter.line(f"RERUN {report.nodeid} - {why}")
