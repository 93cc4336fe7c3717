"""How often `leadline diff` judges the whole program's time per run changed, from five or ten
runs a side recorded interleaved: a simulation of runs whose times spread by a multiple of the
assumed floor (5%), some of them slowed by a busy host, through the diff's own judge.

Two rules, both `analyse.diff._RunJudge`:

* `switch` (before): the floor, unless the runs' measured spread exceeds it beyond chance (the
  99th percentile of a chi-square), then that spread alone at its degrees of freedom;
* `prior` (now): the floor as a prior worth PRIOR_DOF (4) degrees of freedom that the
  measured spread updates (never below the floor), at the t quantile of their summed freedom.

Each cell is the percentage of trials judged changed: at ratio 1.0 a false claim (3 sigma is
0.27%), above it the power.  No timing: nothing here depends on the machine.

    python bench/whole_judge.py [--trials 3000] [--name whole-judge]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
from pathlib import Path

from leadline.analyse.diff import MIN_RUNS, WHOLE_FLOOR, WHOLE_SIGMA, _RunJudge

RESULTS = Path(__file__).resolve().parent / "results"
RATIOS = (1.0, 1.15, 1.3, 1.5)
SPREADS = (1, 2, 3, 5)  # each run's time spreads by this many floors (standard deviation)
SLOWED = 0.15  # the chance that a busy host slows a run by a further 1.2x to 1.6x
RULES = {
    "switch": lambda: _RunJudge(WHOLE_SIGMA, 0.0, phi=1.0, paired=True),
    "prior": lambda: _RunJudge(WHOLE_SIGMA, 0.0, paired=True, counting_is_prior=True),
}


def side(rng: random.Random, mean: float, spread: float, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        x = mean * (1 + rng.gauss(0, spread * WHOLE_FLOOR))
        if rng.random() < SLOWED:
            x *= rng.uniform(1.2, 1.6)
        out.append(max(x, 1e-3))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3000)
    ap.add_argument("--name", default="whole-judge")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    judges = {name: make() for name, make in RULES.items()}
    rows = []
    for runs in (MIN_RUNS, 2 * MIN_RUNS):
        for ratio in RATIOS:
            for spread in SPREADS:
                hits = dict.fromkeys(judges, 0)
                for _ in range(args.trials):
                    b, n = side(rng, 1.0, spread, runs), side(rng, ratio, spread, runs)
                    mb, mn = sum(b) / runs, sum(n) / runs
                    floor = sum((WHOLE_FLOOR * m) ** 2 / runs for m in (mb, mn))
                    for name, judge in judges.items():
                        hits[name] += judge(mb, mn, b, n, floor).sig != 0
                row = {"runs": runs, "ratio": ratio, "spread": spread}
                row.update({k: 100.0 * v / args.trials for k, v in hits.items()})
                rows.append(row)
                print(row, file=sys.stderr)
    today = datetime.date.today().isoformat()
    stem = RESULTS / f"{args.name}-{today}"
    meta = {"trials": args.trials, "seed": args.seed, "slowed": SLOWED, "floor": WHOLE_FLOOR}
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        f"# The whole program's verdict from runs ({args.trials} trials a cell, {today})",
        "",
        f"Runs spread by SPREAD x {WHOLE_FLOOR:.0%} (standard deviation); each is slowed a further"
        f" 1.2x-1.6x with chance {SLOWED}.  Cells: % of trials judged changed (at ratio 1.0,"
        f" false claims; 3 sigma is 0.27%).  `switch`: before; `prior`: now.",
        "",
        "| runs a side | ratio | spread | switch | prior |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['runs']} | {r['ratio']:.2f} | {r['spread']} | {r['switch']:.1f}% |"
            f" {r['prior']:.1f}% |"
        )
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(stem.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
