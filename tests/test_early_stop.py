"""Recording that stops before the program ends: a capture that reaches its size limit
(`--max-size`), and one whose writes fail (a real full file system, a real file size limit).
Either way the program runs on unchanged, the capture is valid and closed by END, and every count
(the summary line, END, the reports) holds only what reached the file."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from browser import render_in_chromium
from htmlpage import assert_clean
from support import PY, leadline, log_rows, report, run, traced, write

import leadline as leadline_api
from leadline.errors import LeadlineError

KIB = 1024
END_KIND, EVENTS_KIND = 7, 5
CHUNK_HEADER = 24
EVENT_CHUNK = 64 * KIB  # the largest data chunk the tracer writes

CALLS = 300_000
DENSE = f"""
    import sys

    def f(i):
        return i + 1

    total = 0
    for i in range({CALLS}):
        total = f(total)
    print("total", total)
    print("the program's own stderr", file=sys.stderr)
    sys.exit(3)
"""
ENV = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}


def chunks(raw: bytes) -> list[tuple[int, int, int]]:
    """(offset, kind, payload length) of every chunk of a capture, which must end exactly at the
    end of its last chunk."""
    pos, out = 16, []
    while pos < len(raw):
        assert raw[pos : pos + 4] == b"LLCK", f"no chunk at {pos}"
        (length,) = struct.unpack_from("<I", raw, pos + 8)
        out.append((pos, raw[pos + 4], length))
        pos += CHUNK_HEADER + length
    assert pos == len(raw), "the capture ends inside a chunk"
    return out


def summary_line(stderr: str) -> tuple[int, int, int]:
    """(events, recorded, lost) from `leadline trace`'s summary line."""
    m = re.search(
        r"^leadline: ([\d,]+) events, ([\d,]+) recorded, (?:([\d,]+) lost, )?", stderr, re.M
    )
    assert m, stderr
    return tuple(int((g or "0").replace(",", "")) for g in m.groups())  # type: ignore[return-value]


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "recording stopped early" in line]


def check_counts(cap: Path, tmp_path: Path, stderr: str) -> dict[str, Any]:
    """What every stopped capture must satisfy; returns the report's summary."""
    s = report(cap, tmp_path)["summary"]
    assert s["complete"] is True and s["damage"] is None
    rows = log_rows(cap, tmp_path)
    # Recorded means in the file: what the log reads back, what END and the summary line say.
    assert len(rows) == s["recorded"]
    assert summary_line(stderr) == (s["events"], s["recorded"], s["lost"])
    assert s["lost"] > 0
    # No filter here: every event seen was recorded, and then either written or lost.
    assert s["recorded"] + s["lost"] == s["events"]
    # Hooks stand down when recording stops: the events after that were not even seen.
    assert s["events"] < 2 * CALLS
    stop = s["stopped_early"]
    assert 0 < stop["at_ns"] < s["duration_ns"]
    # Everything in the file happened before recording stopped.
    if rows:
        assert max(r["clock"] for r in rows) <= stop["at_ns"] / 1e9 + 1e-6
    return dict(s)


def same_as_untraced(r: subprocess.CompletedProcess[str], script: Path, cwd: Path) -> None:
    plain = run([PY, script], cwd=cwd)
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout) == (3, f"total {CALLS}\n")
    assert r.stderr.startswith(plain.stderr) and plain.stderr == "the program's own stderr\n"


# -- the size limit -------------------------------------------------------------------------


def test_max_size_stops_recording_and_the_program_runs_on(tmp_path: Path) -> None:
    limit = 256 * KIB
    r, cap = traced(tmp_path, DENSE, "--max-size", "256K")
    same_as_untraced(r, tmp_path / "prog.py", tmp_path)
    (warning,) = warnings_of(r.stderr)
    assert "size limit (256 KiB, --max-size)" in warning
    raw = cap.read_bytes()
    layout = chunks(raw)
    # The chunks before END stay within the limit; END (a few hundred bytes) closes it.
    assert [kind for _, kind, _ in layout].count(END_KIND) == 1 and layout[-1][1] == END_KIND
    assert layout[-1][0] <= limit < layout[-1][0] + EVENT_CHUNK + CHUNK_HEADER
    assert len(raw) <= limit + EVENT_CHUNK + CHUNK_HEADER
    s = check_counts(cap, tmp_path, r.stderr)
    stop = s["stopped_early"]
    assert stop["reason"] == "size_limit"
    assert (stop["max_size"], stop["limit_from"]) == (limit, "given")
    assert stop["message"] == "the capture reached its size limit (256 KiB, --max-size)"
    # The text report and the log say so too.
    text = leadline("report", cap, cwd=tmp_path, check=True).stdout
    assert "warning: recording stopped early, at " in text and "size limit (256 KiB" in text
    log = leadline("log", cap, cwd=tmp_path, check=True).stdout.splitlines()
    assert log[-1].startswith("# recording stopped early, at ") and "size limit" in log[-1]


def test_html_header_says_when_and_why_recording_stopped(chromium: str, tmp_path: Path) -> None:
    _, cap = traced(tmp_path, DENSE, "--max-size", "256K")
    page = tmp_path / "report.html"
    leadline("report", cap, "--html", "-o", page, cwd=tmp_path, check=True)
    result = render_in_chromium(page)
    assert_clean(result, page)
    header = result.element_text("ll-header")
    assert "Recording stopped" in header
    assert "the capture reached its size limit (256 KiB, --max-size)" in header
    assert " lost)" in header  # the events line counts the lost ones


def test_python_api_max_size(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "api.py",
        """
        import json, sys
        import leadline

        def f(i):
            return i

        with leadline.trace(sys.argv[1], max_size="200K") as tracer:
            for i in range(200_000):
                f(i)
        r = tracer.stop()
        print(json.dumps({"events": r.events, "recorded": r.recorded, "lost": r.lost,
                          "bytes": r.bytes_written, "stop": r.stopped_early}))
        """,
    )
    cap = tmp_path / "api.lead"
    r = run([PY, script, cap], cwd=tmp_path, env=ENV)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["stop"]["reason"] == "size_limit" and res["stop"]["max_size"] == 200 * KIB
    assert res["bytes"] == cap.stat().st_size <= 200 * KIB + EVENT_CHUNK
    assert res["recorded"] + res["lost"] == res["events"] < 400_000
    (warning,) = warnings_of(r.stderr)
    assert "size limit (200 KiB, --max-size)" in warning
    s = report(cap, tmp_path)["summary"]
    assert (s["events"], s["recorded"], s["lost"]) == (res["events"], res["recorded"], res["lost"])


def test_max_size_values(tmp_path: Path) -> None:
    script = write(tmp_path, "p.py", "print('hi')\n")
    for bad in ("lots", "-5", "1Q"):
        r = leadline("trace", "--max-size", bad, script, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert r.stderr.strip().splitlines()[-1].startswith("leadline: error: ")
        assert "not a size" in r.stderr
    with pytest.raises(LeadlineError, match="max_size"):
        leadline_api.trace(tmp_path / "x.lead", max_size="a lot")
    # none: no limit; the default: 1 GiB, or half the free space when that is less.
    for args, expected in ((("--max-size", "none"), 0), (("--max-size", "2G"), 2 << 30)):
        _, cap = traced(tmp_path, "print('hi')\n", *args)
        assert report(cap, tmp_path)["meta"]["options"]["max_size"] == expected
    _, cap = traced(tmp_path, "print('hi')\n")
    default = report(cap, tmp_path)["meta"]["options"]["max_size"]
    fs = os.statvfs(tmp_path)
    assert default == 1 << 30 or 0.8 < default / (fs.f_bavail * fs.f_frsize / 2) < 1.25


# -- failed writes --------------------------------------------------------------------------


def on_small_filesystem(
    tmp_path: Path, size: str, *args: str | os.PathLike[str]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`leadline trace -o out.lead ARGS` run with its current directory on a tmpfs of `size`
    (`mount -t tmpfs -o size=...`) in a mount namespace of its own, so that its writes really
    fail with ENOSPC; (the result, a copy of the capture taken before the namespace ends)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) to mount a small file system")
    small = tmp_path / "small"
    small.mkdir()
    copy = tmp_path / "copy.lead"
    # Root makes a mount namespace; anyone else a user namespace where it is root.
    unshare = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "-r", "--mount"]
    script = (
        'mount -t tmpfs -o size="$1" leadline-test "$2" '
        '|| { echo "leadline-test: cannot mount" >&2; exit 97; }; '
        'cd "$2" && shift 2 && "$@"; status=$?; cp out.lead "$COPY"; exit $status'
    )
    cmd = [*unshare, "sh", "-c", script, "sh", size, str(small)]
    cmd += [PY, "-m", "leadline", "trace", "-o", "out.lead", *map(str, args)]
    r = run(cmd, cwd=tmp_path, env={**ENV, "COPY": str(copy)})
    if r.returncode == 97 and "leadline-test: cannot mount" in r.stderr:
        pytest.skip(f"cannot mount a tmpfs in a new namespace here: {r.stderr.strip()}")
    return r, copy


def test_full_disk_counts_only_written_events(tmp_path: Path) -> None:
    """A real full disk (ENOSPC): the old summary said all 600,006 events were recorded while
    the capture, cut inside a chunk and without END, held fewer than a tenth of them."""
    script = write(tmp_path, "prog.py", DENSE)
    r, cap = on_small_filesystem(tmp_path, "256k", "--max-size", "0", script)
    same_as_untraced(r, script, tmp_path)
    (warning,) = warnings_of(r.stderr)
    assert "writing the capture failed (No space left on device)" in warning
    layout = chunks(cap.read_bytes())  # cut back to its last complete chunk, then END
    assert layout[-1][1] == END_KIND and any(kind == EVENTS_KIND for _, kind, _ in layout)
    s = check_counts(cap, tmp_path, r.stderr)
    assert s["recorded"] > 0
    stop = s["stopped_early"]
    assert (stop["reason"], stop["error"]) == ("write_error", "No space left on device")


def test_default_limit_leaves_half_the_free_space(tmp_path: Path) -> None:
    """Without --max-size, a trace takes at most half of what its file system had free."""
    script = write(tmp_path, "prog.py", DENSE)
    r, cap = on_small_filesystem(tmp_path, "512k", script)
    same_as_untraced(r, script, tmp_path)
    (warning,) = warnings_of(r.stderr)
    assert "half the free space of its file system; --max-size changes it" in warning
    s = check_counts(cap, tmp_path, r.stderr)
    stop = s["stopped_early"]
    assert (stop["reason"], stop["limit_from"]) == ("size_limit", "free_space")
    assert 200 * KIB < stop["max_size"] <= 256 * KIB
    assert cap.stat().st_size <= stop["max_size"] + EVENT_CHUNK


def with_file_size_limit(limit: int) -> dict[str, Any]:
    """Popen arguments that run a child under RLIMIT_FSIZE: a write past `limit` bytes fails
    with EFBIG (Python ignores SIGXFSZ)."""

    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return {"preexec_fn": set_limit}


def test_file_size_limit_counts_only_written_events(tmp_path: Path) -> None:
    script = write(tmp_path, "prog.py", DENSE)
    cap = tmp_path / "out.lead"
    cmd = [PY, "-m", "leadline", "trace", "--max-size", "0", "-o", cap, script]
    r = run(cmd, cwd=tmp_path, env=ENV, **with_file_size_limit(150 * KIB))
    same_as_untraced(r, script, tmp_path)
    (warning,) = warnings_of(r.stderr)
    assert "writing the capture failed (File too large)" in warning
    assert cap.stat().st_size <= 150 * KIB
    s = check_counts(cap, tmp_path, r.stderr)
    assert s["recorded"] > 0
    assert (s["stopped_early"]["reason"], s["stopped_early"]["error"]) == (
        "write_error",
        "File too large",
    )


def test_end_takes_the_place_of_the_last_chunk_when_nothing_else_fits(tmp_path: Path) -> None:
    """When END itself does not fit, the newest data chunk is cut off to make room for it, and
    the counts are made again: a capture without END could not say what was lost."""
    child = write(
        tmp_path,
        "journal.py",
        """
        import json, os, sys
        from leadline import _native

        path, end_size = sys.argv[1], int(sys.argv[2])
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        journal = _native.Journal(fd, json.dumps({"format": 1, "mode": "probe"}).encode())
        for i in range(40):  # one MARKS chunk of about 40 KiB
            _native.mark("m", pad="x" * 1000, i=i)
        journal.finish()
        seen = []

        def make_end(written):
            seen.append(dict(written))
            return json.dumps({"marks_lost": written["marks_lost"], "pad": "y" * end_size}).encode()

        print(json.dumps({"final": journal.close(make_end), "seen": seen}))
        """,
    )
    reference = tmp_path / "reference.lead"
    r = run([PY, child, reference, "100"], cwd=tmp_path, check=True)
    layout = chunks(reference.read_bytes())
    marks_end = layout[-1][0]  # where END starts: after the header, META and the marks
    assert [kind for _, kind, _ in layout][-2] == 11 and layout[-2][2] > 30 * KIB

    # Room for the marks, and 1 KiB more: not enough for a 4 KiB END.
    cap = tmp_path / "out.lead"
    r = run([PY, child, cap, "4000"], cwd=tmp_path, **with_file_size_limit(marks_end + KIB))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    first, second = out["seen"]
    assert (first["marks_written"], first["marks_lost"], first["stopped"]) == (40, 0, None)
    assert (second["marks_written"], second["marks_lost"]) == (0, 40)
    assert (second["stopped"], second["write_error"]) == ("write_error", "File too large")
    final = out["final"]
    assert final["end_written"] is True and final["marks_lost"] == 40
    raw = cap.read_bytes()
    kinds = [kind for _, kind, _ in chunks(raw)]
    assert kinds == [1, END_KIND] and final["bytes_written"] == len(raw)
    assert json.loads(raw[chunks(raw)[-1][0] + CHUNK_HEADER :])["marks_lost"] == 40


SPIN = """
    import time

    def spin():
        t = time.perf_counter() + 2.5
        while time.perf_counter() < t:
            pass

    spin()
    print("done")
"""


def sample_on_a_failing_write(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`leadline run` whose capture may not grow past 3 KiB: the first chunk of samples fails."""
    script = write(tmp_path, "busy.py", SPIN)
    cap = tmp_path / "out.lead"
    cmd = [PY, "-m", "leadline", "run", "--rate", "1000", "-o", cap, script]
    r = run(cmd, cwd=tmp_path, env=ENV, **with_file_size_limit(3 * KIB))
    assert (r.returncode, r.stdout) == (0, "done\n"), r.stderr
    return r, cap


def test_sampling_capture_on_a_failing_write(tmp_path: Path) -> None:
    """`leadline run`: the same mechanism; the summary counts only samples in the file."""
    r, cap = sample_on_a_failing_write(tmp_path)
    (warning,) = warnings_of(r.stderr)
    assert "writing the capture failed (File too large)" in warning
    m = re.search(r"leadline: ([\d,]+) samples in [\d,]+ ticks \(.*, ([\d,]+) lost\)", r.stderr)
    assert m, r.stderr
    samples, lost = (int(g.replace(",", "")) for g in m.groups())
    data = report(cap, tmp_path)
    assert data["complete"] is True
    assert data["samples"] == samples and data["samples_lost"] == lost > 0
    assert data["stopped_early"]["reason"] == "write_error"
    text = leadline("report", cap, cwd=tmp_path, check=True).stdout
    assert "warning: recording stopped early, at " in text and "File too large" in text


def test_sampling_html_header_says_recording_stopped(chromium: str, tmp_path: Path) -> None:
    _, cap = sample_on_a_failing_write(tmp_path)
    page = tmp_path / "profile.html"
    leadline("report", cap, "--html", "-o", page, cwd=tmp_path, check=True)
    result = render_in_chromium(page)
    assert_clean(result, page)
    header = result.element_text("ll-header")
    assert "Recording stopped" in header and "writing the capture failed (File too large)" in header
