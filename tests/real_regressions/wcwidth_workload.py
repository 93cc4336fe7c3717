"""Workload: measure terminal cell widths of many table cells (wcwidth.wcswidth).

wcswidth() dominates the run.  From wcwidth 0.2.9 on, its per-character loop
was rewritten (index-based while loop with zero-width-joiner and VS-16
handling), making its own code slower; the cached wcwidth() per character is
unchanged.
"""

import importlib.metadata

from wcwidth import wcswidth

ROWS = 400
PASSES = 800


def make_cells():
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "caf\u00e9",
        "na\u00efve",
        "\u4e2d\u6587",
        "\u65e5\u672c\u8a9e",
        "r\u00e9sum\u00e9",
        "epsilon",
    ]
    cells = []
    for i in range(ROWS):
        w = words[i % len(words)]
        other = words[(i * 7) % len(words)]
        status = "ok" if i % 3 else "fail"
        cells.append(f"{w}-{i:04d} {w.upper()} | {other} status={status}")
    return cells


def main():
    cells = make_cells()
    total = 0
    widest = 0
    for _ in range(PASSES):
        for c in cells:
            w = wcswidth(c)
            total += w
            if w > widest:
                widest = w
    print("total", total, "widest", widest)


if __name__ == "__main__":
    main()
    print(importlib.metadata.version("wcwidth"))
