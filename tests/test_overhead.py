"""`leadline overhead`: the cost table from the real CLI on a small program, the table's maths
on made-up runs, and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import leadline, write

from leadline.analyse.overhead import MODES, Measured, ModeRuns, summarise
from leadline.record.childrun import ChildResult

LOOP = """\
def f(i):
    return i + 1


def main():
    total = 0
    for i in range(30000):
        total = f(total)
    return total


print(main())
"""


def test_overhead_table_from_the_cli(tmp_path: Path) -> None:
    write(tmp_path, "loop.py", LOOP)
    r = leadline(
        "overhead",
        "--rounds",
        "2",
        "--count",
        "calls=__main__:f",
        "--json",
        "loop.py",
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rows = {row["mode"]: row for row in doc["modes"]}
    assert list(rows) == [m.name for m in MODES]
    assert rows["baseline"]["ratio"] == 1.0 and rows["baseline"]["events"] == 0
    assert all(len(row["runs"]) == 2 and row["failed_runs"] == 0 for row in rows.values())
    # f is called 30000 times: a CALL and a RETURN each, plus main and the module
    assert rows["trace"]["events"] >= 60000
    assert rows["trace"]["bytes"] > 60000 and rows["trace"]["us_per_event"] is not None
    assert rows["hook"]["events"] == 0 and rows["hook"]["bytes"] > 0
    assert rows["trace-rss4096"]["events"] == rows["trace"]["events"]  # seen, not all recorded
    assert rows["trace-exact"]["events"] == rows["trace"]["events"]
    assert rows["probe"]["events"] == 30000
    assert all(row["ratio"] > 0.5 for row in rows.values())


def test_overhead_text_table(tmp_path: Path) -> None:
    write(tmp_path, "loop.py", LOOP)
    r = leadline("overhead", "--rounds", "1", "--modes", "trace", "loop.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split()[:3] == ["Mode", "Median", "time"]
    assert [ln.split()[0] for ln in lines[2:4]] == ["baseline", "trace"]


@pytest.mark.parametrize("how", [["-c", "import loop"], ["-m", "loop"]])
def test_overhead_of_a_module_or_code(tmp_path: Path, how: list[str]) -> None:
    write(tmp_path, "loop.py", LOOP)
    r = leadline(
        "overhead", "--rounds", "1", "--modes", "trace,probe", "--count", "calls=loop:f",
        "--json", *how, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["notes"] == []
    rows = {row["mode"]: row for row in doc["modes"]}
    assert rows["trace"]["failed_runs"] == 0 and rows["trace"]["events"] >= 60000
    assert rows["probe"]["events"] == 30000


def _mr(name: str, walls: list[float], events: int) -> ModeRuns:
    mode = next(m for m in MODES if m.name == name)
    runs = [Measured(ChildResult(w, w * 0.9, 1000, 0), events, 100) for w in walls]
    return ModeRuns(mode, ["cmd"], runs)


def test_summarise_maths() -> None:
    rows = summarise([_mr("baseline", [1.0, 2.0, 1.5], 0), _mr("trace", [2.0, 3.0, 3.0], 1000)])
    base, trace = rows
    assert base["ratio"] == 1.0 and base["us_per_event"] is None
    assert trace["median_wall"] == 3.0
    # per-round ratios 2.0, 1.5, 2.0
    assert (trace["ratio"], trace["ratio_min"], trace["ratio_max"]) == (2.0, 1.5, 2.0)
    assert trace["events_per_s"] == pytest.approx(1000 / 3.0)
    assert trace["us_per_event"] == pytest.approx((3.0 - 1.5) / 1000 * 1e6)
    assert trace["median_cpu"] == pytest.approx(2.7)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "missing.py: no such file"),
        (["--rounds", "0", "loop.py"], "--rounds must be at least 1"),
        (["--modes", "nope", "loop.py"], "no mode 'nope'"),
        (["-c", "raise SystemExit(4)"], "the program failed on its own (exit status 4)"),
    ],
)
def test_overhead_errors(tmp_path: Path, args: list[str], message: str) -> None:
    write(tmp_path, "loop.py", LOOP)
    r = leadline("overhead", "--modes", "hook", *args, cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
