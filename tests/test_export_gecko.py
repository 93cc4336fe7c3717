"""The Firefox Profiler export (`export --format gecko`, docs/export.md), checked by the Firefox
Profiler's own code: its command line (`@firefox-devtools/profiler-cli`, the profiler's import
and processing code bundled for node) loads the file, and what it says of threads, functions,
idle samples, CPU time and markers is compared with leadline's own report of the capture."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import HOT_AND_COOL, leadline, report, write

import leadline as leadline_package
from leadline.analyse.model import Frame
from leadline.render.gecko import CATEGORY, frame_category

REPO = Path(__file__).resolve().parent.parent

# Two threads: the main one splits its CPU 3:1 between hot and cool inside a span, after a
# mark; "sleepy" sleeps (idle in every sample).
PROGRAM = f"""
import threading, time
import leadline
{HOT_AND_COOL}
@leadline.span("work", size=3)
def work():
    for _ in range(25):
        hot()
        cool()

sleepy = threading.Thread(target=time.sleep, args=(1.2,), name="sleepy")
sleepy.start()
leadline.mark("start", phase=1)
work()
sleepy.join()
"""


@pytest.fixture(scope="session")
def profiler_cli() -> str:
    """The Firefox Profiler's command line (tools/ensure-firefox-profiler fetches it from the
    npm registry, pinned by version and checksum, and caches it outside the repository)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (the Firefox Profiler's code runs under node)")
    r = subprocess.run(
        [str(REPO / "tools" / "ensure-firefox-profiler")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"the Firefox Profiler's command line is not available: {r.stderr.strip()}")
    return r.stdout.strip()


class Profiler:
    """profiler-cli sessions kept in a folder of the test's own."""

    def __init__(self, cli: str, folder: Path) -> None:
        self.cli = cli
        self.env = {**os.environ, "PROFILER_CLI_SESSION_DIR": str(folder)}

    def __call__(self, *args: str) -> str:
        r = subprocess.run(
            ["node", self.cli, *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=self.env,
            check=False,
        )
        assert r.returncode == 0, f"profiler-cli {args}: {r.stdout}\n{r.stderr}"
        return r.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json"))

    def load(self, profile: Path, attempts: int = 5) -> None:
        """`load`, which starts the profiler's daemon and gives it 500 ms to be ready: on a
        loaded machine node can take longer to start (seen in a suite beside two CPU hogs),
        and the command then says so, names the daemon still starting, and that retrying
        often works.  That daemon is stopped and the load tried again."""
        for attempt in range(attempts):
            try:
                self("load", str(profile))
                return
            except AssertionError as e:
                late = re.search(r'run "kill (\d+)"', str(e))
                if late is None or attempt == attempts - 1:
                    raise
                with contextlib.suppress(OSError):
                    os.kill(int(late.group(1)), signal.SIGKILL)


@pytest.fixture
def loaded(profiler_cli: str, tmp_path: Path) -> Iterator[tuple[Profiler, dict[str, Any], Path]]:
    """The program sampled, exported, and loaded into the Firefox Profiler; with leadline's
    report of the capture."""
    write(tmp_path, "prog.py", PROGRAM)
    leadline("run", "-q", "--rate", "500", "-o", "p.lead", "prog.py", cwd=tmp_path, check=True)
    leadline("export", "p.lead", "--format", "gecko", "-o", "p.json", cwd=tmp_path, check=True)
    cli = Profiler(profiler_cli, tmp_path / "sessions")
    cli.load(tmp_path / "p.json")
    try:
        yield cli, report(tmp_path / "p.lead", tmp_path), tmp_path / "p.json"
    finally:
        subprocess.run(
            ["node", profiler_cli, "stop", "--all"], env=cli.env, capture_output=True, timeout=60
        )


def test_the_file_is_well_formed(loaded: tuple[Profiler, dict[str, Any], Path]) -> None:
    _, _, path = loaded
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["meta"]["version"] >= 24 and doc["meta"]["interval"] == 2.0  # 500 Hz
    for th in doc["threads"]:
        stacks, frames = th["stackTable"]["data"], th["frameTable"]["data"]
        for i, (prefix, frame) in enumerate(stacks):
            assert prefix is None or 0 <= prefix < i  # a prefix comes before its stack
            assert 0 <= frame < len(frames)
        times = [s[1] for s in th["samples"]["data"]]
        assert times == sorted(times) and all(
            s[0] is None or s[0] < len(stacks) for s in th["samples"]["data"]
        )


def test_the_firefox_profiler_reads_what_leadline_measured(
    loaded: tuple[Profiler, dict[str, Any], Path],
) -> None:
    cli, rep, _ = loaded
    threads = {t["name"]: t for t in cli.json("thread", "list")["threads"]}
    assert set(threads) == {"MainThread", "sleepy"}, threads
    main, sleepy = threads["MainThread"], threads["sleepy"]
    # CPU time: the samples' CPU deltas, as leadline measured them (25 x 40 ms of CPU).
    assert 900 < main["cpuMs"] < 2000 and sleepy["cpuMs"] < 50, threads
    # Its functions, sample for sample: the same totals and self counts as leadline's report
    # (which leaves idle samples out, as the profiler does by default).
    samples = cli.json("thread", "samples", "--thread", main["threadHandle"])
    got = {f["name"].split("!", 1)[1]: f for f in samples["topFunctionsByTotal"]}
    ours = {f["name"]: f for f in rep["functions"] if f["file"].endswith("prog.py")}
    for name in ("hot", "cool", "work"):
        assert got[name]["totalSamples"] == ours[name]["total"], (name, got[name], ours[name])
        assert got[name]["selfSamples"] == ours[name]["self"], name
    assert got["hot"]["selfSamples"] > 2 * got["cool"]["selfSamples"]
    # @leadline.span's wrapper is leadline's, not the program's: work runs under <module>.
    package = str(Path(leadline_package.__file__).parent)
    assert not [f["name"] for f in rep["functions"] if f["file"].startswith(package)]
    assert {c["name"] for c in samples["categoryBreakdown"]["categories"]} == {"Python"}
    # The sleeping thread's samples are all idle: none unless idle ones are asked for.
    idle = cli.json("thread", "samples", "--thread", sleepy["threadHandle"], "--include-idle")
    active = cli.json("thread", "samples", "--thread", sleepy["threadHandle"])
    assert idle["categoryBreakdown"]["totalSamples"] > 100
    assert active["categoryBreakdown"]["totalSamples"] <= 2
    assert "Idle" in {c["name"] for c in idle["categoryBreakdown"]["categories"]}


def test_marks_and_spans_are_markers(loaded: tuple[Profiler, dict[str, Any], Path]) -> None:
    cli, rep, _ = loaded
    threads = {t["name"]: t["threadHandle"] for t in cli.json("thread", "list")["threads"]}
    markers = cli.json("thread", "markers", "--list", "--thread", threads["MainThread"])
    markers = markers["flatMarkers"]
    by_name = {m["name"]: m for m in markers}
    assert set(by_name) == {"start", "work"}, markers
    assert by_name["start"].get("duration") is None
    assert by_name["start"]["label"] == 'start {"phase": 1}'
    # The span: an interval as long as leadline measured it.
    span = next(r for r in rep["marks"]["summary"] if r["name"] == "work")
    assert by_name["work"]["duration"] == pytest.approx(span["span_total_ns"] / 1e6, abs=0.01)
    assert by_name["work"]["label"] == 'work {"size": 3}'


def test_frame_categories() -> None:
    assert frame_category(Frame("<GC>", "gc", 0, 0)) == CATEGORY["GC"]
    assert frame_category(Frame("fetch-1", "asyncio", 0, 0)) == CATEGORY["Task"]
    assert frame_category(Frame("fetch", "app.py", 3, 1)) == CATEGORY["Python"]


def test_a_trace_is_refused_in_one_line(tmp_path: Path) -> None:
    write(tmp_path, "t.py", "print('hi')\n")
    leadline("trace", "-q", "-o", "t.lead", "t.py", cwd=tmp_path, check=True)
    r = leadline("export", "t.lead", "--format", "gecko", "-o", "t.json", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "gecko export needs a sampling capture (leadline run); t.lead is a trace" in r.stderr
    assert not (tmp_path / "t.json").exists()
