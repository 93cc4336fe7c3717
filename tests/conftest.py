"""Fixtures and markers for every test: a guard that no profiler state leaks from one test into
the next, Chromium for the HTML reports, and the markers of tests that need something this
machine may not have (the network, Go, a Pyroscope server), each skipped with its reason when
that is missing.  The marker of statistical tests is in `statistical.py`; shared helpers live in
`support.py`."""

from __future__ import annotations

import functools
import shutil
import signal
import socket
import sys
from collections.abc import Iterator

import pytest
from browser import ensure_chromium

# The `statistical` marker: a claim on sampled or timed evidence gets a second attempt.
pytest_plugins = ["statistical"]

MARKERS = {
    "network": "needs the package registry (PyPI) to install a package",
    "go": "needs Go (`go tool pprof` validates the pprof export)",
    "fleet": "starts a real Grafana Pyroscope server (make test-fleet, or pytest --fleet)",
    "tmux": "drives a real terminal with tmux (tools/ensure-test-tools installs it)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fleet",
        action="store_true",
        help="run the fleet tests against a real Pyroscope server (built once, minutes)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background by a non-interactive shell (`make test &`, nohup)
    # inherits SIGINT ignored, and so would every program it starts: Python then installs no
    # KeyboardInterrupt handler in them, and the tests that compare a program's signal handling
    # with and without leadline would see a world no user's terminal gives.  The children get
    # the default disposition back (a Python handler here is reset to it at their exec).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for name, why in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {why}")


@functools.cache
def _pypi_reachable() -> str | None:
    """None if PyPI answers a TCP connection, else why not."""
    try:
        socket.create_connection(("pypi.org", 443), timeout=10).close()
    except OSError as e:
        return f"pypi.org:443 is not reachable ({e.strerror or e})"
    return None


def _missing(marker: str, config: pytest.Config) -> str | None:
    if marker == "network":
        return _pypi_reachable()
    if marker == "go":
        return None if shutil.which("go") else "go is not installed"
    if marker == "tmux":
        return None if shutil.which("tmux") else "tmux is not installed"
    if marker == "fleet":
        return None if config.getoption("--fleet") else "run with --fleet (or make test-fleet)"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in MARKERS:
        if item.get_closest_marker(marker) is not None:
            why = _missing(marker, item.config)
            if why is not None:
                pytest.skip(f"{MARKERS[marker]}: {why}")


@pytest.fixture(autouse=True)
def no_profiler_leaks() -> Iterator[None]:
    yield
    assert sys.getprofile() is None
    if sys.version_info >= (3, 12):
        for tool in (2, 3, 4):
            assert sys.monitoring.get_tool(tool) is None, f"tool {tool} left registered"


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium binary for the HTML report tests (installed if missing), or a skip."""
    binary, why = ensure_chromium()
    if binary is None:
        pytest.skip(why)
    return binary
