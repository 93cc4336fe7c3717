"""`leadline sweep`: the cache-size table of seed 000 from the real CLI, with probe counts that
reproduce the known hit rate of each size, a chart, JSON, and one-line errors."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from support import PY, leadline
from test_probe import app, expected


def test_sweep_reproduces_the_hit_rate_of_each_cache_size(tmp_path: Path) -> None:
    app(tmp_path)
    sizes = [4, 16, 23]
    r = leadline(
        "sweep",
        "--env",
        "CACHE_SIZE=" + ",".join(map(str, sizes)),
        "--repeat",
        "2",
        "--count",
        "hit=lrucache.py:11",
        "--count",
        "miss=lrucache.py:13",
        "--ratio",
        "hit_rate=hit/(hit+miss)",
        "--json",
        "--html",
        tmp_path / "s.html",
        "--",
        PY,
        "app.py",
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["variable"] == "CACHE_SIZE"
    assert [row["value"] for row in data["rows"]] == ["4", "16", "23"]
    for size, row in zip(sizes, data["rows"], strict=True):
        hits, misses = expected(size)
        assert (row["hit"], row["miss"]) == (hits, misses)
        assert row["hit_rate"] == pytest.approx(hits / (hits + misses))
        assert len(row["runs"]) == 2
        assert all(run["status"] == 0 and run["counts"]["hit"] == hits for run in row["runs"])
        assert row["wall"] > 0 and row["cpu"] > 0 and row["peak_rss"] > 1 << 20
    page = (tmp_path / "s.html").read_text()
    assert 'data-points="3"' in page and 'data-column="hit_rate"' in page
    assert len(re.findall(r'<circle class="pt"', page)) == 3


def test_sweep_table_and_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    app(tmp_path)
    png = tmp_path / "s.png"
    r = leadline(
        "sweep",
        "--env",
        "CACHE_SIZE=4,23",
        "--count",
        "hit=lrucache.py:11",
        "--count",
        "miss=lrucache.py:13",
        "--chart",
        "miss",
        "--png",
        png,
        "--",
        PY,
        "app.py",
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split()[:4] == ["CACHE_SIZE", "wall", "cpu", "peak_rss"]
    _hits, m4 = expected(4)
    assert lines[2].split()[0] == "4" and f"{m4:,}" in lines[2].split()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_reports_a_failing_value(tmp_path: Path) -> None:
    script = tmp_path / "f.py"
    script.write_text("import os, sys\nsys.exit(3 if os.environ['V'] == 'b' else 0)\n")
    r = leadline("sweep", "--env", "V=a,b", "--json", "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 1
    assert "V=b: the command exited with status 3" in r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert rows[0]["wall"] > 0 and rows[1]["wall"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "SIZE"], "expected NAME=VALUE1,VALUE2"),
        (["--env", "SIZE=1,,2"], "no empty values"),
        (["--env", "SIZE=1,1"], "a value is repeated"),
        (["--env", "SIZE=1", "--chart", "nope"], "not a column of this sweep"),
        (["--env", "SIZE=1", "--count", "x=f.py:1"], "--count needs a Python command"),
        (["--env", "SIZE=1", "--repeat", "0"], "--repeat must be at least 1"),
    ],
)
def test_sweep_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "f.py").write_text("x = 1\n")
    r = leadline("sweep", *args, "--", "true", cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
