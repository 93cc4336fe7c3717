"""`leadline diff --calls`: two traces compared by their calls (work the machine's speed and load
do not change), through the real CLI on a tiny program, and the signature that tells an unchanged
test's calls without a diff (the pytest plugin's)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from browser import render_in_chromium
from htmlpage import assert_clean
from support import leadline, run, write

from leadline.analyse.diff import load_side, work_side, work_signature

PROG = """
    import json, os
    N = int(os.environ.get("N", "10"))

    def f(x):
        return x + 1

    def g(n):
        total = 0
        for i in range(n):
            total += f(i)
        return total

    def caller():
        for _ in range(N):
            f(1)
        return g(20)

    def main():
        caller()
        json.dumps({"a": [1, 2, 3]})

    main()
"""


WIDE = {"COLUMNS": "400"}  # long temporary paths on one line


def trace(tmp_path: Path, name: str, n: int) -> Path:
    write(tmp_path, "prog.py", PROG)
    out = tmp_path / f"{name}.lead"
    r = leadline("trace", "-o", out, "prog.py", cwd=tmp_path, env_extra={"N": str(n)})
    assert r.returncode == 0, r.stderr
    return out


def diff_calls(tmp_path: Path, a: Path, b: Path, *more: str) -> dict[str, Any]:
    r = leadline("diff", "--calls", a, b, "--json", *more, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def test_calls_name_the_caller_of_the_new_calls(tmp_path: Path) -> None:
    base, again, more = (trace(tmp_path, name, n) for name, n in (("a", 10), ("b", 10), ("c", 50)))
    data = diff_calls(tmp_path, base, more)
    assert data["normalization"] == {"by": "per", "unit": "calls"}
    rows = {f["name"]: f for f in data["functions"]}
    # f: 10 calls from caller and 20 from g, then 50 from caller: exact, no noise.
    assert (rows["f"]["base_self"], rows["f"]["new_self"], rows["f"]["sig_self"]) == (30, 70, 1)
    assert rows["f"]["noise_self"] == 0
    assert (
        rows["g"]["sig_total"] == 0 and rows["g"]["base_total"] == rows["g"]["new_total"] == 21
    )  # itself and f
    top = data["culprits"][0]
    assert (top["name"], top["into"]["name"], top["base"], top["new"]) == ("caller", "f", 10, 50)
    assert len(data["culprits"]) == 1
    # The same program twice: the same calls, nothing flagged, no culprit.
    same = diff_calls(tmp_path, base, again)
    assert same["summary"]["grew"] == same["summary"]["shrank"] == 0 and same["culprits"] == []
    # An explicit --min-delta or --noise-floor is honoured: f's 40 more calls are less than 41
    # (43 on 3.11) as a percentage of BASE's calls, and than 4 sigma of a 20% floor on 70.
    assert data["summary"]["grew"] > 0
    least = f"{100 * 41 / data['base']['total']:.2f}"
    for option in (["--min-delta", least], ["--noise-floor", "20"]):
        judged = diff_calls(tmp_path, base, more, *option)
        rows = {f["name"]: f for f in judged["functions"]}
        assert rows["f"]["sig_self"] == 0, option

    # The text says so, and --fail-above fails on calls that grew.
    r = leadline("diff", "--calls", base, more, "--fail-above", "25", cwd=tmp_path, env_extra=WIDE)
    assert r.returncode == 1
    assert "Compared by calls per run, which are exact (no noise)" in r.stdout
    assert "Most likely cause: caller (" in r.stdout and "now calls f (" in r.stdout
    assert "leadline: regression: f (" in r.stderr and "calls grew 133% (30 -> 70)" in r.stderr

    # The signature: equal for the same calls, different when they changed.
    sigs = [work_signature(work_side(load_side(str(p)))) for p in (base, again, more)]
    assert sigs[0] == sigs[1] != sigs[2]


def test_calls_in_html(tmp_path: Path) -> None:
    """The HTML report of a work diff renders clean and outlines the culprit in the flame
    graph."""
    base, more = trace(tmp_path, "a", 10), trace(tmp_path, "c", 50)
    page = tmp_path / "calls.html"
    leadline("diff", "--calls", base, more, "--html", "-o", page, cwd=tmp_path, check=True)
    result = render_in_chromium(page, actions=[])
    state = assert_clean(result, page)
    assert int(state["culprit-frames"]) >= 1
    assert "Most likely cause: caller (" in result.element_text("ll-culprits")


def test_calls_need_traces(tmp_path: Path) -> None:
    trace(tmp_path, "a", 10)
    sampled = tmp_path / "s.lead"
    r = leadline("run", "-o", sampled, "prog.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = leadline("diff", "--calls", sampled, tmp_path / "a.lead", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "calls are counted by traces: " in r.stderr and "sampling capture" in r.stderr
    r = leadline(
        "diff", "--calls", "--per", "2", tmp_path / "a.lead", tmp_path / "a.lead", cwd=tmp_path
    )
    assert r.returncode == 2 and "--calls compares calls per run" in r.stderr
    assert os.path.getsize(tmp_path / "a.lead") > 0


def test_a_trace_without_memory_counts_the_same_calls(tmp_path: Path) -> None:
    """`TraceOptions(memory=False)` (the pytest plugin's work record) reads no RSS and starts no
    thread for it, and records the same calls as a trace with memory."""
    write(tmp_path, "prog.py", PROG)
    script = write(
        tmp_path,
        "both.py",
        """
        import runpy, sys, threading
        from leadline import TraceOptions, Tracer
        for name, memory in (("mem", True), ("nomem", False)):
            t = Tracer(f"{name}.lead", TraceOptions(heap=False, memory=memory), argv=["prog.py"])
            t.start()
            threads = threading.active_count()
            runpy.run_path("prog.py", run_name="__main__")
            t.stop()
            print(name, threads)
        try:
            TraceOptions(memory=False, rss_trigger=4096).validate()
        except Exception as e:
            print(type(e).__name__, e)
        """,
    )
    r = run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert "LeadlineError a trace without memory has no RSS trigger" in r.stdout
    sides = [work_side(load_side(str(tmp_path / f"{n}.lead"))) for n in ("mem", "nomem")]
    # The first run also imports json (the second finds it imported): compare the program's own.
    calls = [{s.funcs[f].name: n for f, n in s.calls.items()} for s in sides]
    assert calls[0]["f"] == calls[1]["f"] == 30 and calls[0]["g"] == calls[1]["g"] == 1
    assert all(side.complete for side in sides)
    report = json.loads(
        leadline("report", tmp_path / "nomem.lead", "--json", cwd=tmp_path, check=True).stdout
    )
    assert report["summary"]["peak_rss"] in (0, None), report["summary"]  # nothing read
