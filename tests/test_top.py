"""`leadline top` (docs/top.md): the tally it keeps, its plain output through the real CLI on a
program it starts and on a process it attaches to, and its live screen in a real terminal
(tmux runs it in an 80x24 window, send-keys types, capture-pane reads the screen)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import HOT_AND_COOL, PY, leadline, report, write
from terminal import Terminal

from leadline.analyse.live import ALL_THREADS, LiveTally, Period, Tally

# hot and cool take turns on the thread's CPU clock, 3:1, then the program exits with status 3
# (or spins until it is ended, given "forever").
SPLIT = f"""
import sys, time
{HOT_AND_COOL}
forever = sys.argv[1:] == ["forever"]
print("ready", flush=True)
start = time.thread_time()
while forever or time.thread_time() - start < float(sys.argv[1]):
    hot()
    cool()
sys.exit(3)
"""

ROW = re.compile(
    r"^\s*(?P<own>[\d.]+)\s+(?P<total>[\d.]+)\s+(?P<own_all>[\d.]+)\s+(?P<total_all>[\d.]+)"
    r"\s+(?P<own_s>[\d.]+)\s+(?P<name>\S+) \("
)


def blocks(text: str) -> list[str]:
    """The plain output's blocks, each from its `leadline top` header line."""
    return ["leadline top" + b for b in text.split("leadline top")[1:]]


def rows(block: str) -> dict[str, dict[str, float]]:
    out = {}
    for line in block.splitlines():
        m = ROW.match(line)
        if m:
            out[m["name"]] = {k: float(v) for k, v in m.groupdict().items() if k != "name"}
    return out


def since_start(block: str) -> int:
    m = re.search(r"since start: ([\d,]+)", block)
    assert m, block
    return int(m[1].replace(",", ""))


# -- the tally -------------------------------------------------------------------------------


def period(samples: int, own: dict[str, int], total: dict[str, int], thread: int = 1) -> Period:
    t = Tally(
        samples,
        {(k, "f.py", 1): v for k, v in own.items()},
        {(k, "f.py", 1): v for k, v in total.items()},
    )
    everything = Tally()
    everything.add(t)
    return {("cpu", thread): t, ("cpu", ALL_THREADS): everything}


def test_the_window_slides_and_the_start_stays() -> None:
    tally = LiveTally(window_s=5.0)
    tally.add(0.0, period(10, {"a": 10}, {"a": 10, "main": 10}))
    tally.add(3.0, period(10, {"b": 10}, {"b": 10, "main": 10}))
    tally.add(6.0, period(20, {"b": 5, "c": 15}, {"b": 5, "c": 15, "main": 20}))
    got, nw, na = tally.rows(6.0, "cpu", ALL_THREADS, "own", rate_hz=10.0)
    # The window (after 1.0 s) holds the last two periods; since the start, all three.
    assert (nw, na) == (30, 40)
    by = {r.name: r for r in got}
    assert by["a"].own == 0.0 and by["a"].own_all == pytest.approx(0.25)
    assert by["b"].own == pytest.approx(15 / 30) and by["c"].own == pytest.approx(15 / 30)
    assert by["main"].total == 1.0 and by["main"].own == 0.0
    assert by["b"].own_s == pytest.approx(1.5)  # 15 samples at 10 Hz
    # Sorted by the window's own share, ties by total then since the start, then name.
    assert [r.name for r in got] == ["b", "c", "main", "a"]
    order, _, _ = tally.rows(6.0, "cpu", ALL_THREADS, "total-all", rate_hz=10.0)
    assert [r.name for r in order] == ["main", "b", "c", "a"]
    # One thread's view; a view with nothing yet.
    one, _, _ = tally.rows(6.0, "cpu", 1, "own", rate_hz=10.0)
    assert [r.name for r in one] == ["b", "c", "main", "a"]
    assert tally.rows(6.0, "wall", 1, "own", rate_hz=10.0) == ([], 0, 0)
    assert tally.thread_serials() == [1]


# -- plain output ----------------------------------------------------------------------------


@pytest.mark.statistical
def test_a_program_it_starts(tmp_path: Path) -> None:
    """Plain blocks while it runs, the final one when the program ends; the program's status;
    the shares of the known split; -o keeps exactly what was shown."""
    write(tmp_path, "split.py", SPLIT)
    r = leadline(
        "top",
        "--rate",
        "200",
        "--interval",
        "0.5",
        "-o",
        "cap.lead",
        "--",
        "split.py",
        "2.5",
        cwd=tmp_path,
    )
    assert r.returncode == 3, r.stderr
    assert r.stdout.count("ready") == 1  # the program's own output goes where it would
    shown = blocks(r.stdout)
    assert len(shown) >= 3, r.stdout  # refreshes, then the final block
    final = shown[-1]
    assert "ended: the program exited with status 3" in final and "cpu view" in final
    got = rows(final)
    assert list(got)[:2] == ["hot", "cool"], final
    # 2.5 s of CPU at 200 Hz: at least about 500 samples in which the thread ran, more on a
    # busy machine, where a thread waiting for a CPU is busy too (wall mode's rule), at most
    # one a tick of the program's life, whose count is a Poisson count (docs/run.md: 520 +- 23
    # in 2.6 s; the elapsed time is shown to a tenth of a second); hot's share 75% (sd 2
    # points at 500 samples).
    n = since_start(final)
    elapsed = float(re.search(r"  ([\d.]+) s  ended", final)[1])  # type: ignore[index]
    due = 200 * (elapsed + 0.05)
    assert 400 <= n <= due + 4 * due**0.5, final
    assert abs(got["hot"]["own_all"] - 75.0) < 8.0, final
    assert abs(got["hot"]["own_all"] + got["cool"]["own_all"] - 100.0) < 1.0, final
    assert got["<module>"]["total_all"] > 99.0
    # What was saved is what was shown: the same samples, the same split.
    data = report(tmp_path / "cap.lead", tmp_path)
    assert data["total"] == n
    hot = next(f for f in data["functions"] if f["name"] == "hot")
    assert hot["self_pct"] == pytest.approx(got["hot"]["own_all"], abs=0.06)
    assert "capture -> cap.lead" in r.stderr


@contextmanager
def target(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    script = write(tmp_path, "split.py", SPLIT)
    proc = subprocess.Popen([PY, str(script), "forever"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_running_process(tmp_path: Path) -> None:
    with target(tmp_path) as proc:
        r = leadline("top", proc.pid, "--duration", "1.5", "--interval", "0.5", cwd=tmp_path)
        assert proc.poll() is None  # top never ends a process it did not start
    assert r.returncode == 0, r.stderr
    final = blocks(r.stdout)[-1]
    assert f"pid {proc.pid}" in final and "ended: sampling stopped" in final
    assert next(iter(rows(final))) == "hot", final


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "give a process id (leadline top PID) or a program to run"),
        (("--pid", "1", "x.py"), "give a process id or a program to run, not both"),
        (("--window", "0", "x.py"), "--window must be a positive number of seconds"),
        (("--interval", "nan", "x.py"), "--interval must be a positive number of seconds"),
        (("999999999",), "999999999"),
        (("--pid", "-3"), "argument -p/--pid: not a process id: '-3'"),
        (("--pid", "x"), "argument -p/--pid: not a process id: 'x'"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    r = leadline("top", *args, cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


# -- the live screen ---------------------------------------------------------------------------


@pytest.mark.tmux
def test_the_live_screen_in_a_real_terminal(tmp_path: Path) -> None:
    write(tmp_path, "split.py", SPLIT)
    term = Terminal(tmp_path, f"{PY} -m leadline top -- split.py forever")
    try:
        screen = term.wait_for(r"(?m)^\s*[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+hot \(")
        lines = screen.splitlines()
        assert lines[0].startswith("leadline top  pid ") and "sampling" in lines[0], screen
        assert "cpu view, all threads" in screen and "sorted by OWN%" in screen
        assert "q quit  p pause  s sort  c cpu/wall  t thread" in screen
        pid = int(re.search(r"pid (\d+)", lines[0])[1])  # type: ignore[index]
        # The hottest function first.
        first = next(line for line in lines if ROW.match(line))
        assert ROW.match(first)["name"] == "hot", screen  # type: ignore[index]
        term.keys("c")
        term.wait_for("wall view, all threads")
        term.keys("s")
        term.wait_for("sorted by TOTAL%")
        term.keys("t")
        screen = term.wait_for(r"wall view, (?!all threads)\S")
        term.keys("p")
        term.wait_for(r"PAUSED")
        term.keys("p")
        term.wait_for(r"s  sampling")
        term.keys("q")
        # Back on the normal screen: the final table, and the program ended with top.
        screen = term.wait_for(r"EXIT=0")
        assert "ended: top ended the program" in screen and "hot (" in screen, screen
        assert not Path(f"/proc/{pid}").exists()
    finally:
        term.close()
