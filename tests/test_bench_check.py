"""`make bench-check`, the regression gate for leadline's own cost (bench/check.py): its verdict
on interleaved ratios against stored figures, and a real short run through its command line."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

from support import PY, ROOT, run, write

sys.path.insert(0, str(ROOT / "bench"))
import check


def test_the_interval_of_the_median_comes_from_order_statistics() -> None:
    assert check.median_interval(range(1, 10)) == (2, 8)  # 9 rounds: 96% coverage
    assert check.median_interval(range(1, 12)) == (3, 9)  # 11: 93%
    assert check.median_interval(range(1, 8)) == (1, 7)  # 7: (2, 6) would cover only 87.5%
    assert check.median_interval([5.0, 1.0, 3.0]) == (1.0, 5.0)


def test_worse_only_when_the_whole_interval_is_above_the_figure() -> None:
    ratios = [1.20, 1.22, 1.25, 1.21, 1.30, 1.19, 1.23, 1.24, 1.26]  # interval 1.20-1.26
    assert not check.judge("trace", ratios, 1.21).worse  # inside the noise
    assert not check.judge("trace", ratios, 1.30).worse  # better
    v = check.judge("trace", ratios, 1.15)
    assert v.worse and v.median == 1.23 and (v.low, v.high) == (1.20, 1.26)
    assert "WORSE than the stored 1.150" in v.line()
    assert not check.judge("trace", ratios, None).worse
    assert "no stored figure" in check.judge("trace", ratios, None).line()


def test_a_short_gate_stores_then_judges(tmp_path: Path) -> None:
    program = write(tmp_path, "busy.py", "sum(i * i for i in range(300_000))\n")
    figures = tmp_path / "figures.json"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    gate = [PY, str(ROOT / "bench" / "check.py"), "--only", "run-1k", "--rounds", "3"]
    gate += ["--script", str(program), "--figures", str(figures)]

    r = run([*gate, "--update"], timeout=300)
    assert r.returncode == 0, r.stderr
    stored = json.loads(figures.read_text())[version]["run-1k"]
    rounds = [float(m) for m in re.findall(r"run-1k round [123]: ([0-9.]+)", r.stdout)]
    assert len(rounds) == 3, r.stdout  # round 0 warms up and is not counted
    assert abs(stored - statistics.median(rounds)) < 0.0011  # the median of the counted rounds
    assert stored > 0.8  # the candidate's CPU over the program's, not the other way round

    figures.write_text(json.dumps({version: {"run-1k": 0.5}}))  # far better than possible
    r = run(gate, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "run-1k:" in r.stdout and "WORSE than the stored 0.500" in r.stdout

    figures.write_text(json.dumps({version: {"run-1k": 50.0}}))
    r = run(gate, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "holds against the stored 50.000" in r.stdout


def test_another_build_runs_in_the_same_rounds(tmp_path: Path) -> None:
    """--other-build DIR: that build's candidate runs in each round too (here the same build,
    from the directory it is installed in), and the two builds' ratio is told with its
    interval."""
    import leadline

    program = write(tmp_path, "busy.py", "sum(i * i for i in range(300_000))\n")
    build = Path(leadline.__file__).parent.parent
    gate = [PY, str(ROOT / "bench" / "check.py"), "--only", "run-1k", "--rounds", "3"]
    gate += ["--script", str(program), "--figures", str(tmp_path / "none.json")]
    r = run([*gate, "--other-build", str(build)], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    pairs = re.findall(r"run-1k round [123]: ([0-9.]+) \(the other build ([0-9.]+)\)", r.stdout)
    assert len(pairs) == 3, r.stdout
    assert all(float(a) > 0.5 and float(b) > 0.5 for a, b in pairs), pairs
    line = re.search(r"run-1k: the other build / this one: ([0-9.]+) \(interval", r.stdout)
    assert line and 0.5 < float(line.group(1)) < 2.0, r.stdout
