"""Every input the fuzzers found a defect with (tests/fuzz/crashers/TARGET/), replayed through
the fuzzing oracle and through the real CLI: success, or exit status 2 with one line.

An input kept here once made a reader raise something other than LeadlineError, hang, or
fail a sanitizer; ``make fuzz`` also replays them under AddressSanitizer and
UndefinedBehaviorSanitizer (tests/fuzz/run.py --replay --sanitize)."""

from __future__ import annotations

import http.server
import json
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support import HOOK_KIND_ENDS, ROOT, leadline

sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

import run as fuzz_run
import targets

# What these test is version-independent logic (support.HOOK_KIND_ENDS).
pytestmark = HOOK_KIND_ENDS

CRASHERS = ROOT / "tests" / "fuzz" / "crashers"


def crashers(*names: str) -> list[Path]:
    return sorted(p for name in names for p in (CRASHERS / name).glob("*") if p.is_file())


def ids(paths: list[Path]) -> list[str]:
    return [f"{p.parent.name}/{p.name}" for p in paths]


ALL = crashers(*fuzz_run.NAMES)


def test_the_driver_knows_every_target() -> None:
    assert set(fuzz_run.NAMES) == set(targets.TARGETS)
    assert {p.name for p in CRASHERS.iterdir() if p.is_dir()} <= set(targets.TARGETS)
    assert len(ALL) >= 10
    # Each kept input says where it came from and what it broke.
    listed = (CRASHERS / "README.md").read_text(encoding="utf-8")
    assert all(f"`{p.parent.name}/{p.name}`" in listed for p in ALL)


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_crasher_passes_the_oracle(path: Path) -> None:
    """In-process, through the very target function the fuzzer found it with."""
    targets.TARGETS[path.parent.name](path.read_bytes())


def outcome(r: Any) -> str:
    """'ok' or 'error' for an acceptable run of the CLI; fails the test otherwise."""
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 2:
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("leadline: error: "), r.stderr
        return "error"
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert all(ln.startswith("leadline: ") for ln in r.stderr.splitlines()), r.stderr
    return "ok"


CAPTURES = crashers(*fuzz_run.CAPTURES)


@pytest.mark.parametrize("path", CAPTURES, ids=ids(CAPTURES))
def test_capture_crasher_through_the_cli(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for args in (
        ["report", path, "--json"],
        ["report", path],
        ["log", path],
        ["export", path, "--format", "speedscope", "-o", out],
        ["export", path, "--format", "chrome", "-o", out],
        ["diff", path, path, "--json"],
    ):
        r = leadline(*args, cwd=tmp_path, timeout=60)
        if outcome(r) == "ok" and args[:2] == ["report", path] and "--json" in args:
            data = json.loads(r.stdout)
            summary = data.get("summary", data)
            # A capture that was read past damage says so.
            if summary.get("damage"):
                assert summary["complete"] is False


PROFILES = crashers("pprof", "collapsed")


@pytest.mark.parametrize("path", PROFILES, ids=ids(PROFILES))
def test_profile_crasher_through_the_cli(path: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_bytes(targets.GOOD_COLLAPSED)
    suffix = ".pb" if path.parent.name == "pprof" else ".txt"
    bad = tmp_path / f"input{suffix}"
    bad.write_bytes(path.read_bytes())
    for args in (["diff", good, bad, "--json"], ["diff", bad, good], ["diff", bad, bad, "--html"]):
        outcome(leadline(*args, cwd=tmp_path, timeout=60))


class _Pyroscope(http.server.BaseHTTPRequestHandler):
    """A server that answers SelectMergeProfile with the crasher's two profiles."""

    answers: ClassVar[dict[str, bytes]] = {}

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        which = "counts" if b":samples:count:" in body else "merged"
        data = self.answers[which]
        self.send_response(200)
        self.send_header("Content-Type", "application/proto")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pyroscope() -> Iterator[tuple[str, type[_Pyroscope]]]:
    handler = type("Handler", (_Pyroscope,), {"answers": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


FLEET = crashers("pyroscope")


@pytest.mark.parametrize("path", FLEET, ids=ids(FLEET))
def test_pyroscope_crasher_through_the_cli(
    path: Path, tmp_path: Path, pyroscope: tuple[str, type[_Pyroscope]]
) -> None:
    """The real `leadline diff pyroscope://...` against a server answering with the input."""
    host, handler = pyroscope
    data = path.read_bytes()
    n = struct.unpack("<I", data[:4])[0] if len(data) >= 4 else 0
    handler.answers.update(merged=data[4 : 4 + n], counts=data[4 + n :])
    good = tmp_path / "good.txt"
    good.write_bytes(targets.GOOD_COLLAPSED)
    url = f"pyroscope://{host}/svc?from=1700000000&until=1700000600"
    outcome(leadline("diff", good, url, "--json", cwd=tmp_path, timeout=60))
