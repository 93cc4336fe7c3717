"""The differential flame graph of `leadline diff --html`: the page as text (escaping,
self-contained), then in headless Chromium, on a diff built by hand and through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import htmlpage
import pytest
from browser import render_in_chromium
from diffsides import named, side_of
from htmlpage import FIRST_ROW_JS, STATE_JS, assert_clean, hover_frame_js, rendered
from support import HOOK_KIND_ENDS, leadline, run, write
from test_diff_deep import deep_side

from leadline.analyse.diff import Settings, Side, compare, to_json
from leadline.render.diff_html import render_diff_html

# What these test is version-independent logic (support.HOOK_KIND_ENDS).
pytestmark = HOOK_KIND_ENDS

HOSTILE = "<img src=x onerror=alert(1)>"
SCRIPT_END = "</script><script>alert(2)</script>"
UNICODE = "計算_ß"
DEPTH = 2000
TIMES = "\u00d7"  # the multiplication sign the page writes ratios with


def side(stacks: dict[tuple[str, ...], float], path: str) -> Side:
    return side_of(
        named(stacks, lambda n: f"/srv/app/{'evil' if n == HOSTILE else 'mod'}.py"),
        path=path,
        meta={"argv": ["app.py", "</title><script>alert(3)</script>"]},
    )


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    """`slow` 3x, `fast` halved, `added` only in NEW, `removed` only in BASE, a 2000-deep
    recursion, hostile and unicode names, everything else unchanged."""
    base = {
        ("main", "slow"): 1000.0,
        ("main", "fast"): 2000.0,
        ("main", "steady"): 3000.0,
        ("main", "removed"): 500.0,
        ("main", HOSTILE): 400.0,
        ("main", SCRIPT_END): 300.0,
        ("main", UNICODE): 600.0,
        ("main",) + ("recurse",) * DEPTH: 800.0,
    }
    new = dict(base)
    new[("main", "slow")] = 3000.0
    new[("main", "fast")] = 1000.0
    del new[("main", "removed")]
    new[("main", "added")] = 700.0
    result = compare(side(base, "before.lead"), side(new, "after.lead"), Settings())
    return to_json(result)


@pytest.fixture(scope="module")
def page(doc: dict[str, Any]) -> str:
    return render_diff_html(doc)


def test_untrusted_text_is_not_markup(page: str) -> None:
    for text in (HOSTILE, SCRIPT_END, "</title><script>"):
        assert text not in page
    assert "<img" not in page.lower()
    htmlpage.assert_only_own_scripts(page)
    htmlpage.assert_no_external_references(page)
    htmlpage.assert_policy_allows_only_inline_code(page)
    data = json.loads(htmlpage.embedded_json(page))
    assert {f["name"] for f in data["functions"]} >= {HOSTILE, SCRIPT_END, UNICODE}


def test_ranked_and_coloured(doc: dict[str, Any]) -> None:
    names = [f["name"] for f in doc["functions"]]
    assert names[0] == "slow"  # own cost x3, the largest growth
    funcs = {f["name"]: f for f in doc["functions"]}
    assert funcs["added"]["status"] == "new" and funcs["removed"]["status"] == "gone"
    assert funcs["fast"]["sig_self"] == -1 and funcs["slow"]["sig_self"] == 1


def frame_counts(doc: dict[str, Any], side: str) -> dict[str, int]:
    """How many tree nodes, drawn on `side`, grew, shrank or stayed (recursion nodes merge
    into 'small' blocks when too narrow, so only frames at least a pixel wide are counted)."""
    tree = doc["tree"]
    out = {"red": 0, "blue": 0, "neutral": 0}
    for n in range(1, len(tree["parent"])):
        if tree[side][n] > 0:
            key = {1: "red", -1: "blue", 0: "neutral"}[tree["sig"][n]]
            out[key] += 1
    return out


def test_in_chromium(doc: dict[str, Any], page: str, tmp_path: Path) -> None:
    out = tmp_path / "diff.html"
    out.write_text(page, encoding="utf-8")
    result = render_in_chromium(
        out,
        actions=[
            FIRST_ROW_JS,
            hover_frame_js("slow"),
            hover_frame_js("fast"),
            "document.getElementById('ll-callers').textContent",
        ],
    )
    state = assert_clean(result, out)
    assert state["tree"] == "new"
    names = rendered(state)
    assert {"main", "slow", "fast", "added", HOSTILE, SCRIPT_END, UNICODE, "recurse"} <= set(names)
    assert "removed" not in names  # gone from NEW: drawn only on the Base tree
    expected = frame_counts(doc, "new")
    assert int(state["red"]) == expected["red"] >= 2  # slow, added
    assert int(state["blue"]) == expected["blue"] >= 1  # fast
    # The recursion's 2000 frames are drawn (one pixel each at least) and within noise.
    assert int(state["neutral"]) == expected["neutral"] >= DEPTH
    first_row, slow_tip, fast_tip, callers = result.results
    assert first_row == "slow"
    funcs = {f["name"]: f for f in doc["functions"]}
    # Shares: 3000 of 9800 samples against 1000 of 8600, 1000 of 9800 against 2000 of 8600.
    assert round(funcs["slow"]["ratio_total"], 2) == 2.63
    assert TIMES + "2.63" in slow_tip and "beyond noise: grew" in slow_tip
    assert round(funcs["fast"]["ratio_total"], 2) == 0.44
    assert TIMES + "0.44" in fast_tip
    assert "beyond noise: shrank" in fast_tip
    assert "#1 slow" in callers and "main" in callers

    base = render_in_chromium(out, "tree=base&search=removed", actions=[STATE_JS])
    state = assert_clean(base, out)
    assert state["tree"] == "base"
    assert "removed" in rendered(state) and "added" not in rendered(state)
    assert int(state["search-matches"]) == 1
    assert int(state["blue"]) == frame_counts(doc, "base")["blue"]


@pytest.mark.statistical
def test_cli_diff_html_in_chromium(tmp_path: Path) -> None:
    """Two real runs, one with `hot` five times slower: `leadline diff --html`.  `hot` is a
    quarter of BASE and most of NEW, well beyond the 4-sigma-plus-floor threshold even for a
    short run (a 3x slowdown of half the program, 50% -> 75%, sat on the threshold).  A claim
    on two sampled runs, recorded anew at a second attempt: in CI (3.12, two tests at a time)
    `hot` was once not flagged, as test_diff's x3 claim was on a loaded host (the whole-program
    verdict under load, open).  The diff's 15% run-to-run floor flags `hot` when it grew more
    than about 2.5x; the two runs' estimate of its growth is what needs the evidence: with
    1000 rounds (about 90 records of `hot` in BASE) it was 4.4x to 7.8x beside two CPU hogs,
    and CI's loaded stage missed it twice in a row (BASE 175 and 260 ms); with 4000 rounds,
    4.6x to 5.8x."""
    write(
        tmp_path,
        "prog.py",
        """
        import os
        SLOW = int(os.environ.get("SLOW", "1"))
        def hot(n):
            s = 0
            for i in range(n * SLOW):
                s += i * i
            return s
        def cold(n):
            s = 0
            for i in range(n):
                s += i * i
            return s
        for _ in range(4000):
            hot(1000)
            cold(3000)
    """,
    )
    for name, slow in (("a", "1"), ("b", "5")):
        import os
        import sys

        run(
            [
                sys.executable,
                "-m",
                "leadline",
                "run",
                "-q",
                "--mode",
                "cpu",
                "--rate",
                "2000",
                "-o",
                f"{name}.lead",
                "prog.py",
            ],
            cwd=tmp_path,
            check=True,
            capture_output=True,
            env={**os.environ, "SLOW": slow},
        )
    r = leadline("diff", "a.lead", "b.lead", "--html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "leadline: wrote b.diff.html"
    out = tmp_path / "b.diff.html"
    result = render_in_chromium(out, "", actions=[FIRST_ROW_JS, hover_frame_js("hot")])
    state = assert_clean(result, out)
    assert {"hot", "cold", "<module>"} <= set(rendered(state))
    why = leadline("diff", "a.lead", "b.lead", cwd=tmp_path).stdout[:1500]
    # What the page was sent: the verdict of each tree node (a red frame is one with sig 1).
    sent = json.loads(htmlpage.embedded_json(out.read_text(encoding="utf-8")))
    expected = frame_counts(sent, "new")
    assert expected["red"] >= 1, (expected, why)
    assert int(state["red"]) >= 1, (state, expected, why)
    first, tip = result.results
    assert first == "hot"
    assert "beyond noise: grew" in tip


def test_deep_recursion_in_chromium(tmp_path: Path) -> None:
    """A 50,000-deep recursion on both sides, one sample at every level, and one more level's
    worth at the bottom in NEW: the diff sends one tree node per level and the page draws the
    whole chain, without recursion, the deepest paths red (they grew) and the rest neutral."""
    depth = 50_000
    doc = to_json(
        compare(deep_side(depth, "deep.lead"), deep_side(depth, "deep.lead", 20_000.0), Settings())
    )
    assert len(doc["tree"]["parent"]) == depth + 2
    out = tmp_path / "deep.diff.html"
    out.write_text(render_diff_html(doc), encoding="utf-8")
    result = render_in_chromium(out, "", actions=[STATE_JS], timeout=120)
    state = assert_clean(result, out)
    assert int(state["depth"]) >= depth * 9 // 10
    expected = frame_counts(doc, "new")
    assert expected["red"] > 0 and expected["neutral"] > 0 and expected["blue"] == 0
    assert int(state["red"]) > 0 and int(state["blue"]) == 0
    assert int(state["red"]) + int(state["neutral"]) >= depth * 9 // 10
