"""Bad input: a one-line error, a non-zero status, no traceback, and salvage of what is readable."""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path

import pytest
from support import funcs, leadline, report, traced

PROGRAM = """
    def work(i):
        return [i] * 100
    for i in range(30000):
        work(i)
"""


def one_line_error(r: object) -> str:
    stderr = r.stderr  # type: ignore[attr-defined]
    assert r.returncode == 2, (r.returncode, stderr)  # type: ignore[attr-defined]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("leadline: error: ")
    assert "Traceback" not in stderr
    return str(lines[0])


def test_missing_script_and_unknown_option(tmp_path: Path) -> None:
    assert "no such file" in one_line_error(leadline("trace", "nope.py", cwd=tmp_path))
    msg = one_line_error(leadline("trace", "--bogus", "x.py", cwd=tmp_path))
    assert "--bogus" in msg
    one_line_error(leadline("trace", cwd=tmp_path))
    assert "not a size" in one_line_error(
        leadline("trace", "--rss-trigger", "lots", "x.py", cwd=tmp_path)
    )


def test_missing_and_non_capture_files(tmp_path: Path) -> None:
    assert "no such file" in one_line_error(leadline("report", "missing.lead", cwd=tmp_path))
    (tmp_path / "text.lead").write_text("hello")
    assert "not a leadline capture" in one_line_error(leadline("report", "text.lead", cwd=tmp_path))
    assert "is a directory" in one_line_error(leadline("log", ".", cwd=tmp_path))


def test_newer_format_is_refused(tmp_path: Path) -> None:
    _, cap = traced(tmp_path, PROGRAM)
    raw = bytearray(cap.read_bytes())
    struct.pack_into("<H", raw, 8, 99)
    cap.write_bytes(bytes(raw))
    assert "newer leadline" in one_line_error(leadline("report", cap, cwd=tmp_path))


def _event_chunk_offsets(raw: bytes) -> list[int]:
    pos, out = 16, []
    while pos + 24 <= len(raw):
        kind = raw[pos + 4]
        (length,) = struct.unpack_from("<I", raw, pos + 8)
        if kind == 5:
            out.append(pos)
        pos += 24 + length
    return out


def test_truncated_capture_salvages_complete_chunks(tmp_path: Path) -> None:
    _, cap = traced(tmp_path, PROGRAM)
    full = funcs(report(cap, tmp_path))["work"]["calls"]
    assert full == 30000
    raw = cap.read_bytes()
    offsets = _event_chunk_offsets(raw)
    assert len(offsets) >= 3
    cut = offsets[-1] + 100  # in the middle of the last event chunk
    cap.write_bytes(raw[:cut])
    r = leadline("report", cap, "--json", cwd=tmp_path)
    assert r.returncode == 0
    assert "leadline: warning:" in r.stderr and "cut short" in r.stderr
    data = json.loads(r.stdout)
    assert data["summary"]["complete"] is False
    salvaged = funcs(data)["work"]["calls"]
    assert 0 < salvaged < full


def test_corrupt_chunk_is_detected_by_checksum(tmp_path: Path) -> None:
    _, cap = traced(tmp_path, PROGRAM)
    raw = bytearray(cap.read_bytes())
    offsets = _event_chunk_offsets(bytes(raw))
    raw[offsets[1] + 24 + 50] ^= 0xFF  # flip a byte inside the second event chunk's payload
    cap.write_bytes(bytes(raw))
    r = leadline("report", cap, "--json", cwd=tmp_path)
    assert r.returncode == 0
    assert "checksum" in r.stderr
    data = json.loads(r.stdout)
    assert data["summary"]["damage"] and data["summary"]["complete"] is False
    assert 0 < funcs(data)["work"]["calls"] < 30000
    # the log reads up to the damage too
    log = leadline("log", cap, cwd=tmp_path)
    assert log.returncode == 0 and "incomplete capture" in log.stdout


def test_unwritable_output(tmp_path: Path) -> None:
    script = tmp_path / "p.py"
    script.write_text("print(1)\n")
    msg = one_line_error(
        leadline("trace", "-o", tmp_path / "no" / "dir" / "x.lead", script, cwd=tmp_path)
    )
    assert "cannot write" in msg


def test_bad_option_values(tmp_path: Path) -> None:
    script = tmp_path / "p.py"
    script.write_text("print(1)\n")
    assert "--previous" in one_line_error(leadline("trace", "--previous", script, cwd=tmp_path))
    assert "max-depth" in one_line_error(
        leadline("trace", "--max-depth", "-3", script, cwd=tmp_path)
    )
    _, cap = traced(tmp_path, "print(2)\n")
    one_line_error(leadline("report", cap, "--sort", "nonsense", cwd=tmp_path))


def test_full_disk_keeps_program_running(tmp_path: Path) -> None:
    """Writing to /dev/full fails with ENOSPC: recording stops, the program does not."""
    script = tmp_path / "p.py"
    script.write_text("def f(i): return i\nfor i in range(200000): f(i)\nprint('finished')\n")
    r = leadline("trace", "-o", "/dev/full", script, cwd=tmp_path)
    assert r.stdout == "finished\n"
    assert r.returncode == 0
    assert "No space left on device" in r.stderr


# -- -o never harms what the user already had ------------------------------------------------


def _trace(tmp_path: Path) -> Path:
    r, cap = traced(tmp_path, PROGRAM)
    assert r.returncode == 0, r.stderr
    return cap


def test_failed_render_keeps_an_existing_output_file(tmp_path: Path) -> None:
    cap = _trace(tmp_path)
    keep = tmp_path / "keep.txt"
    keep.write_text("mine\n")
    keep.chmod(0o640)
    # pprof needs a sampling capture: a usage error, found while rendering.
    r = leadline("export", cap, "--format", "pprof", "-o", keep, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert keep.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".keep")) == []
    # A good render replaces it whole, keeping its permissions.
    r = leadline("report", cap, "--json", "-o", keep, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(keep.read_text())["meta"]["mode"] == "trace"
    assert keep.stat().st_mode & 0o777 == 0o640


def test_output_through_a_symlink_writes_the_file_it_points_to(tmp_path: Path) -> None:
    cap = _trace(tmp_path)
    real = tmp_path / "real.json"
    real.write_text("mine\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    r = leadline("export", cap, "--format", "pprof", "-o", link, cwd=tmp_path)
    assert r.returncode == 2
    assert link.is_symlink() and real.read_text() == "mine\n"
    r = leadline("report", cap, "--json", "-o", link, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and json.loads(real.read_text())["meta"]["mode"] == "trace"


def test_output_to_a_device_is_written_in_place_and_never_removed(tmp_path: Path) -> None:
    cap = _trace(tmp_path)
    # A node of the null device of the test's own (a leadline that removed its output on an
    # error removed the machine's /dev/null when given -o /dev/null).
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    for args in (["export", cap, "--format", "pprof"], ["report", cap, "--json"]):
        leadline(*args, "-o", null, cwd=tmp_path)
        assert null.is_char_device()
