"""The real CLI's HTML report of a real trace, opened in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import htmlpage
from browser import render_in_chromium
from support import leadline, traced


def test_cli_html_report_in_chromium(tmp_path: Path) -> None:
    r, cap = traced(
        tmp_path,
        """
        def allocate_rows():
            rows = []
            for _ in range(3000):
                rows.append(list(range(200)))
            return rows
        def 解析(rows):
            total = 0
            for r in rows:
                total += len(r)
            return total
        rows = allocate_rows()
        print(解析(rows))
    """,
        "--exact-time",  # 解析 takes under a millisecond: no time, no box, by the default clock
    )
    assert r.returncode == 0, r.stderr
    out = tmp_path / "report.html"
    h = leadline("report", cap, "--html", "-o", out, cwd=tmp_path)
    assert h.returncode == 0, h.stderr
    page = out.read_text(encoding="utf-8")
    # No address outside the embedded data (the source view quotes the files of the functions
    # traced, the standard library's too, whose comments may name any address: text).
    outside = page.replace(htmlpage.embedded_json(page), "")
    assert "http://" not in outside.replace("http://www.w3.org/2000/svg", "")
    result = render_in_chromium(out, "search=allocate_rows")
    assert result.console_errors == []
    assert result.element_text("ll-errors").strip() == ""
    state = result.state()
    names = json.loads(state["rendered-names"])
    assert "allocate_rows" in names and "解析" in names
    assert int(state["search-matches"]) == 1
    assert all(req.startswith("file://") for req in result.requests)
    # weighted by heap bytes, the allocating function keeps nearly all of the graph
    heap = render_in_chromium(out, "search=allocate_rows&metric=heap")
    assert heap.console_errors == []
    assert heap.state()["metric"] == "heap"
    assert float(heap.state()["search-share"]) > 0.9


def test_cli_sampling_html_report_in_chromium(tmp_path: Path) -> None:
    """`leadline run` then `leadline report --html`: the flame graph of a real profile."""
    script = tmp_path / "prog.py"
    script.write_text(
        "import time\n"
        "def spin(s):\n"
        "    t = time.time()\n"
        "    while time.time() - t < s:\n"
        "        pass\n"
        "def 計算_hot():\n"
        "    spin(0.6)\n"
        "def cold():\n"
        "    spin(0.2)\n"
        "計算_hot()\n"
        "cold()\n",
        encoding="utf-8",
    )
    cap = tmp_path / "run.lead"
    r = leadline("run", "-q", "--rate", "2000", "-o", cap, script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "flame.html"
    h = leadline("report", cap, "--html", "-o", out, cwd=tmp_path)
    assert h.returncode == 0, h.stderr
    result = render_in_chromium(out, "search=" + quote("計算_hot"))
    assert result.console_errors == []
    assert result.element_text("ll-errors").strip() == ""
    assert all(req.startswith("file://") for req in result.requests)
    state = result.state()
    names = json.loads(state["rendered-names"])
    assert {"計算_hot", "cold", "spin"} <= set(names)
    assert int(state["search-highlighted"]) >= 1
    # The page's share of the search is the report's share of the function, idle samples
    # included as the page includes them by default (a thread a busy machine kept waiting is
    # idle in wall mode).  How much of the run each function takes depends on how long start-up
    # took, which a busy machine stretches; their ratio does not: each spins for a fixed wall
    # time, 0.6 s against 0.2 s.  At 2 kHz: on a busy machine a sample that cannot stand for
    # where the time went gives its weight to fair samples a few ticks away (docs/run.md, "Busy
    # machines"), which at 500 Hz moved enough of one phase into the other to put the ratio
    # at 4.7 now and then.
    j = leadline("report", cap, "--json", "--idle", cwd=tmp_path)
    shares = {f["name"]: f["total_pct"] for f in json.loads(j.stdout)["functions"]}
    assert abs(float(state["search-share"]) - shares["計算_hot"] / 100) < 0.005
    assert 2.0 < shares["計算_hot"] / shares["cold"] < 4.5, shares
