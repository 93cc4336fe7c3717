"""A small program with a memory story, for `make demo`.

It generates well-log-like text, parses it into columns (memory that is kept), builds a
temporary index (memory that comes and goes), and summarises each curve on a worker thread.
"""

from __future__ import annotations

import math
import random
import statistics
import threading


def generate(rows: int, curves: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    lines = ["~A  DEPTH " + " ".join(f"C{i}" for i in range(curves))]
    for r in range(rows):
        values = (f"{math.sin(r / 50 + i) * 100 + rng.random():.4f}" for i in range(curves))
        lines.append(f"{1000 + r * 0.5:.1f} " + " ".join(values))
    return "\n".join(lines)


def parse(text: str) -> list[list[float]]:
    body = text.splitlines()[1:]
    columns: list[list[float]] = []
    for line in body:
        fields = [float(v) for v in line.split()]
        if not columns:
            columns = [[] for _ in fields]
        for col, value in zip(columns, fields):
            col.append(value)
    return columns


def build_index(columns: list[list[float]]) -> int:
    """A large temporary structure: allocated, used, then freed."""
    index = {(c, i): v for c, col in enumerate(columns) for i, v in enumerate(col)}
    return len(index)


def summarise(name: str, values: list[float], out: dict[str, tuple[float, float]]) -> None:
    out[name] = (statistics.fmean(values), statistics.pstdev(values))


def main() -> None:
    columns = parse(generate(rows=20000, curves=8))
    entries = build_index(columns)
    results: dict[str, tuple[float, float]] = {}
    workers = [
        threading.Thread(target=summarise, args=(f"C{i}", col, results), name=f"summary-{i}")
        for i, col in enumerate(columns[1:])
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(f"{len(columns[0])} rows, {entries} index entries, {len(results)} curves summarised")


if __name__ == "__main__":
    main()
