"""Fixtures of the fleet tests (`make test-fleet`): a real Grafana Pyroscope server on
127.0.0.1, built and started by tools/pyroscope_server.py."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from pyroscope_server import PyroscopeServer  # noqa: E402


@pytest.fixture(scope="session")
def server() -> Iterator[PyroscopeServer]:
    s = PyroscopeServer()
    s.start()
    try:
        yield s
    finally:
        s.cleanup()
