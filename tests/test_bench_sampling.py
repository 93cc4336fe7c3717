"""bench/sampling.py's verdicts on a run beside CPU hogs (`--load`): each aim judged beyond the
noise of the rounds, not on point figures alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from support import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import sampling


def row(name: str, ticks: int, missed: int, rounds: dict[int, dict[str, float]]) -> Any:
    return sampling.OverheadRow(
        candidate=name,
        runs="9/9",
        **dict.fromkeys(
            (
                "wall spread cpu wall_x_base cpu_x_base all_cpu_x_base profiler_cpu "
                "profiler_pct_core samples samples_per_s missed torn_or_errors"
            ).split(),
            None,
        ),
        note="",
        rounds={str(k): v for k, v in rounds.items()},
        ticks_sum=ticks,
        missed_sum=missed,
    )


def verdicts(quiet: Any, loaded: Any) -> str:
    (line,) = sampling.load_verdicts([quiet, loaded])
    assert line.startswith("leadline-1k beside the hogs: ")
    return str(line)


def steady(per: float, wall: float, share: float) -> dict[int, dict[str, float]]:
    return {
        r: {"us_per_sample": per * (1 + d), "wall_x_base": wall + d, "share": share}
        for r, d in enumerate((-0.02, 0.01, 0.0, 0.03, -0.01, 0.02, -0.03, 0.0, 0.01))
    }


def test_missed_ticks_are_compared_as_two_poisson_counts() -> None:
    quiet = row("leadline-1k", 40_000, 6, steady(80.0, 1.0, 0.05))
    # 19 missed of 48,000 ticks is 2.6x the quiet rate, but 25 counts cannot tell that from 2x.
    line = verdicts(quiet, row("leadline-1k+load", 48_000, 19, steady(80.0, 1.0, 0.05)))
    assert "missed 0.01% -> 0.04% of ticks (6 and 19; above the aim, within noise 2x)" in line
    line = verdicts(quiet, row("leadline-1k+load", 48_000, 60, steady(80.0, 1.0, 0.05)))
    assert "(6 and 60; NOT within 2x)" in line
    line = verdicts(quiet, row("leadline-1k+load", 48_000, 10, steady(80.0, 1.0, 0.05)))
    assert "(6 and 10; within 2x)" in line


def test_cost_per_sample_and_slowdown_are_judged_from_the_rounds() -> None:
    quiet = row("leadline-1k", 40_000, 6, steady(80.0, 1.00, 0.05))
    line = verdicts(quiet, row("leadline-1k+load", 40_000, 6, steady(120.0, 1.03, 0.05)))
    assert "sampler CPU per sample 80.0 -> 120.0 µs, x1.50" in line and "within 2x)" in line
    assert "slowdown grown +3.00 points against the sampler's 5.00% of a core: -2.00" in line
    assert line.endswith("; within)")
    # Per sample 2.4x in every round: beyond 2x; a slowdown grown 15 points over a 5% share
    # in every round: beyond the share.
    line = verdicts(quiet, row("leadline-1k+load", 40_000, 6, steady(192.0, 1.15, 0.05)))
    assert "x2.40 (rounds' interval from x2.40" in line and "NOT within 2x)" in line
    assert line.endswith("; NOT within)")
    # Rounds that scatter around the aim: the point is above it, the interval is not.
    noisy = {
        r: {"us_per_sample": 80.0, "wall_x_base": 1.0 + d, "share": 0.05}
        for r, d in enumerate((0.30, -0.20, 0.10, 0.06, -0.10, 0.25, 0.07, -0.15, 0.08))
    }
    line = verdicts(quiet, row("leadline-1k+load", 40_000, 6, noisy))
    assert "above the aim, within noise)" in line


def test_the_bare_timer_keeps_the_samplers_schedule(tmp_path: Path) -> None:
    """bench/timer_floor.c builds from the sampler's own schedule.h and ticks at its rate (a
    Poisson process of mean 1 ms: 0.6 s of a child gives about 600 ticks) until its child ends,
    whose exit status it passes on."""
    exe = sampling.build_timer(tmp_path)
    out = tmp_path / "timer.json"
    code = "import time; time.sleep(0.6); raise SystemExit(3)"
    r = subprocess.run(
        [exe, "1000", "30", str(out), "--", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 3, r.stderr
    got = json.loads(out.read_text())
    assert 0.6 <= got["seconds"] < 5.0
    # Ticks over the child's life: a Poisson count of mean 1000/s (sd about 25 at 600), less
    # what a busy machine makes the timer miss, which it counts.
    expected = got["seconds"] * 1000
    assert abs(got["ticks"] + got["missed"] - expected) < 6 * expected**0.5 + 20, got
    assert got["cpu_s"] > 0 and got["late_p50_us"] <= got["late_p99_us"] <= got["late_max_us"]
