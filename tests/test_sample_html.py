"""The sampling profile's HTML flame graph: escaping and self-containment, then the page
itself in Chromium, on profiles built by hand."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import htmlpage
import pytest
from browser import BrowserResult, render_in_chromium
from htmlpage import STATE_JS, assert_clean, rendered
from support import HOOK_KIND_ENDS

from leadline.analyse.model import Frame, SampleProfile, Stack, Thread
from leadline.render.sample_html import render_sample_html

# What these test is version-independent logic (support.HOOK_KIND_ENDS).
pytestmark = HOOK_KIND_ENDS

HOSTILE = "<img src=x onerror=alert(1)>"
SCRIPT_END = "</script><script>alert(2)</script>"
UNICODE = "計算_ß"
THREAD_NAME = "<b>worker</b> ü"
RECURSION_DEPTH = 5000
MAIN, WORKER = 1, 2
MIB = 1 << 20
SECOND = 1_000_000_000


def make_profile(*, complete: bool = True, memory: bool = True) -> SampleProfile:
    """Two threads; `main` runs two lines; a hostile name, a `</script>` name, a unicode name
    and a 5000-deep recursion; the worker is mostly idle in `fetch_batch`."""
    frames = [
        Frame("main", "/srv/app/main.py", 12, 10),  # 0
        Frame("main", "/srv/app/main.py", 14, 10),  # 1: the same function, another line
        Frame("load_data", "/srv/app/io.py", 22, 20),  # 2
        Frame("parse_row", "/srv/app/io.py", 47, 45),  # 3
        Frame(UNICODE, "/srv/app/計算.py", 9, 7),  # 4
        Frame(HOSTILE, "/srv/app/<b>evil</b>.py", 667, 666),  # 5
        Frame(SCRIPT_END, "/srv/app/x.py", 2, 1),  # 6
        Frame("recurse", "/srv/app/rec.py", 4, 3),  # 7
        Frame("sleep_wait", "/srv/app/main.py", 31, 30),  # 8
        Frame("worker_run", "/usr/lib/python3.12/threading.py", 1012, 1000),  # 9
        Frame("fetch_batch", "/srv/app/net.py", 90, 88),  # 10
    ]
    stacks = [
        Stack((0, 2, 3), MAIN, samples=300, cpu_ns=3 * SECOND, rss_bytes=20 * MIB),
        Stack((0, 2), MAIN, samples=100, cpu_ns=1 * SECOND, rss_bytes=30 * MIB),
        Stack((1, 4), MAIN, samples=200, cpu_ns=2 * SECOND, rss_bytes=64 * MIB),
        Stack((1, 5), MAIN, samples=50, cpu_ns=SECOND // 2, rss_bytes=3 * MIB),
        Stack((0, 6), MAIN, samples=40, cpu_ns=SECOND // 4, rss_bytes=MIB),
        Stack((0, 8), MAIN, samples=250, idle=250),
        Stack(
            (0,) + (7,) * RECURSION_DEPTH, MAIN, samples=80, cpu_ns=8 * SECOND // 10, rss_bytes=-MIB
        ),
        Stack((9, 10), WORKER, samples=420, idle=320, cpu_ns=SECOND, rss_bytes=4 * MIB),
        Stack((9, 10, 3), WORKER, samples=100, cpu_ns=SECOND, rss_bytes=MIB),
    ]
    return SampleProfile(
        mode="wall",
        rate_hz=100.0,
        duration_ns=7_700_000_000,
        start_unix_ns=1_717_000_000_123_456_789,
        samples=sum(s.samples for s in stacks),
        ticks=770,
        missed=3,
        torn=2,
        memory=memory,
        frames=frames,
        threads=[Thread(MAIN, 4242, 4242, "MainThread"), Thread(WORKER, 4242, 4250, THREAD_NAME)],
        stacks=stacks,
        meta={
            "argv": ["app.py", "--input", "data 1.csv", "</title><script>alert(3)</script>"],
            "python_version": "3.12.4",
            "pid": 4242,
        },
        complete=complete,
    )


def total(profile: SampleProfile, *, thread: int | None = None, idle: bool = True) -> int:
    return sum(
        s.samples - (0 if idle else s.idle)
        for s in profile.stacks
        if thread is None or s.thread == thread
    )


def weight_of(profile: SampleProfile, name: str, metric: str = "samples") -> int:
    """The weight of the stacks that have a frame named `name` (each stack once)."""
    out = 0
    for s in profile.stacks:
        if any(profile.frames[f].name == name for f in s.frames):
            out += max(s.weight(metric), 0)  # type: ignore[arg-type]
    return out


def pct(part: float, whole: float) -> str:
    """A share the way the page writes it: one decimal from 10%, two below."""
    p = 100 * part / whole
    return f"{p:.1f}%" if p >= 10 else f"{p:.2f}%"


# ---------------------------------------------------------------------------------------------
# The page as text


@pytest.fixture(scope="module")
def profile() -> SampleProfile:
    return make_profile()


@pytest.fixture(scope="module")
def page(profile: SampleProfile) -> str:
    return render_sample_html(profile)


def test_untrusted_text_is_not_markup(page: str) -> None:
    for text in (HOSTILE, SCRIPT_END, THREAD_NAME, "</title><script>", "<b>evil</b>"):
        assert text not in page
    assert "<img" not in page.lower()
    htmlpage.assert_only_own_scripts(page)


def test_self_contained(page: str) -> None:
    htmlpage.assert_no_external_references(page)
    htmlpage.assert_policy_allows_only_inline_code(page)


def test_embedded_data(page: str, profile: SampleProfile) -> None:
    data = json.loads(htmlpage.embedded_json(page))
    assert UNICODE in htmlpage.embedded_json(page)  # kept as itself, not \\u-escaped
    assert data["frames"][5] == [HOSTILE, "/srv/app/<b>evil</b>.py", 667, 666, 0]  # 0: not C
    assert data["threads"] == [
        [MAIN, 4242, 4242, "MainThread"],
        [WORKER, 4242, 4250, THREAD_NAME],
    ]
    assert data["profile"]["samples"] == total(profile)
    # Stacks are sent as a prefix tree: the 5000-deep recursion once, shared prefixes once.
    nodes = data["nodes"]
    assert len(nodes["parent"]) == len(nodes["frame"]) == RECURSION_DEPTH + 11
    stacks = data["stacks"]
    assert stacks["samples"] == [s.samples for s in profile.stacks]
    for i, s in enumerate(profile.stacks):
        path, at = [], stacks["node"][i]
        while at >= 0:
            path.append(nodes["frame"][at])
            at = nodes["parent"][at]
        assert tuple(reversed(path)) == s.frames


def test_odd_values() -> None:
    p = make_profile()
    p.meta = {"argv": ["x"], "out": Path("/tmp/o")}
    p.rate_hz = float("nan")
    data = json.loads(htmlpage.embedded_json(render_sample_html(p)))
    assert data["meta"]["out"] == "/tmp/o"
    assert data["profile"]["rate_hz"] is None
    p.meta = {"ratio": float("inf")}
    with pytest.raises(ValueError):
        render_sample_html(p)


# ---------------------------------------------------------------------------------------------
# The page in Chromium


def write_page(tmp_path: Path, profile: SampleProfile, name: str = "profile.html") -> Path:
    path = tmp_path / name
    path.write_text(render_sample_html(profile), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def page_file(page: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "profile.html"
    path.write_text(page, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def default_view(chromium: str, page_file: Path) -> BrowserResult:
    return render_in_chromium(page_file)


def test_page_renders_without_errors(
    default_view: BrowserResult, page_file: Path, profile: SampleProfile
) -> None:
    state = assert_clean(default_view, page_file)
    assert state["metric"] == "samples" and state["thread"] == "all" and state["idle"] == "1"
    assert int(state["total"]) == total(profile)
    names = rendered(state)
    for expected in (
        "all",
        "main",
        "load_data",
        "parse_row",
        UNICODE,
        HOSTILE,
        SCRIPT_END,
        "recurse",
        "sleep_wait",
        "worker_run",
        "fetch_batch",
    ):
        assert expected in names
    # Both lines of `main` are one frame; the recursion is drawn level by level.
    assert names.count("main") == 1
    assert int(state["depth"]) == RECURSION_DEPTH + 2
    assert int(state["frames"]) >= RECURSION_DEPTH + 10
    assert state["search-matches"] == "0" and state["zoom"] == "all"
    # Frames wide enough carry their name as text.
    assert "main" in default_view.element_text("ll-flame")
    assert "fetch_batch" in default_view.element_text("ll-flame")


def test_hostile_names_are_text(default_view: BrowserResult) -> None:
    assert default_view.tags("img") == 0
    assert default_view.tags("script") == 3
    assert default_view.tags("b") == 0
    text = default_view.body_text()
    for name in (HOSTILE, SCRIPT_END, UNICODE, THREAD_NAME, "/srv/app/<b>evil</b>.py:666"):
        assert name in text
    # argv is shown as given, quoted like a shell would need it.
    assert "app.py --input 'data 1.csv' '</title><script>alert(3)</script>'" in text


def test_header(default_view: BrowserResult, profile: SampleProfile) -> None:
    text = default_view.element_text("ll-header")
    for fact in ("wall clock", "100 Hz", "7.700 s", "1,540", "3.12.4", "RSS per sample"):
        assert fact in text
    assert "Missed3 (0.39%)" in text and "Torn2" in text and "Idle570 samples" in text
    assert default_view.element_attrs("ll-warning").get("hidden") is not None


def test_incomplete_capture_warns(chromium: str, tmp_path: Path) -> None:
    path = write_page(tmp_path, make_profile(complete=False, memory=False))
    result = render_in_chromium(
        path,
        "",
        [
            "[...document.querySelectorAll('#ll-metric option')]"
            ".map(function (o) { return o.value; })"
        ],
    )
    assert_clean(result, path)
    assert "hidden" not in result.element_attrs("ll-warning")
    assert "capture was not stopped cleanly" in result.element_text("ll-warning")
    # Without RSS per sample there is no RSS weight to choose.
    assert result.results[0] == ["samples", "cpu"]


def test_table(default_view: BrowserResult) -> None:
    state = default_view.state()
    assert (
        state["table-sort"] == "total" and state["table-rows"] == "10"
    )  # main's two lines are one function
    table = default_view.element_text("ll-table")
    assert HOSTILE in table and UNICODE in table and "/srv/app/io.py:45" in table


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("parse_row", ["parse_row"]),
        ("PARSE", ["parse_row"]),
        ("io.py", ["load_data"]),  # by file: parse_row is inside load_data, counted once
        ("recurse", ["recurse"]),  # 5000 frames, one share
        (UNICODE[:2], [UNICODE]),
        ("<IMG src", [HOSTILE]),
        ("no_such_function", []),
    ],
)
def test_search_from_hash(
    chromium: str, page_file: Path, profile: SampleProfile, query: str, names: list[str]
) -> None:
    result = render_in_chromium(page_file, "search=" + quote(query))
    state = assert_clean(result, page_file)
    assert state["search"] == query
    share = sum(weight_of(profile, n) for n in names) / total(profile)
    if query == "io.py":
        share = (weight_of(profile, "load_data") + 100) / total(profile)  # + worker's parse_row
    assert float(state["search-share"]) == pytest.approx(share)
    expected_matches = {"parse_row": 2, "PARSE": 2, "io.py": 3, "recurse": RECURSION_DEPTH}
    assert int(state["search-matches"]) == expected_matches.get(query, len(names))
    info = result.element_text("ll-search-info")
    if names:
        assert int(state["search-highlighted"]) >= 1
        assert f"matched {pct(share, 1)}" in info
    else:
        assert state["search-highlighted"] == "0" and info == "no matching frames"
    assert result.tags("img") == 0


FRAME_WIDTH_JS = (
    "(function(name){var fs=document.querySelectorAll('#ll-flame .ll-frame');"
    "for (var i=0;i<fs.length;i++){if (fs[i].textContent===name)"
    "return fs[i].getBoundingClientRect().width;}return null;})"
)
FLAME_WIDTH_JS = "document.getElementById('ll-flame').getBoundingClientRect().width"
MATCHED_JS = (
    "[...document.querySelectorAll('#ll-flame .ll-frame.ll-match')]"
    ".map(function (f) { return f.textContent; })"
)


def select_js(element_id: str, value: str) -> str:
    return (
        f"(function(){{var s=document.getElementById({json.dumps(element_id)});"
        f"s.value={json.dumps(value)};"
        "s.dispatchEvent(new Event('change',{bubbles:true}));return s.value;})()"
    )


def key_js(key: str) -> str:
    return (
        f"document.body.dispatchEvent(new KeyboardEvent('keydown',{{key:{json.dumps(key)},"
        "bubbles:true}));true"
    )


def width_js(name: str) -> str:
    return f"{FRAME_WIDTH_JS}({json.dumps(name)})"


def test_zoom_search_and_tooltip(chromium: str, page_file: Path, profile: SampleProfile) -> None:
    actions = [
        FLAME_WIDTH_JS,  # 0
        width_js("load_data"),
        htmlpage.click_frame_js("load_data"),
        STATE_JS,
        width_js("load_data"),
        width_js(UNICODE),  # 5: beside the zoomed frame: not drawn
        "document.getElementById('ll-crumbs').textContent",
        key_js("Escape"),
        STATE_JS,
        width_js("load_data"),
        # 10: hover `main`: its two lines, percentages of total and of parent
        htmlpage.hover_frame_js("main"),
        htmlpage.hover_frame_js("load_data"),
        # 12: type a search
        "(function(){var s=document.getElementById('ll-search'); s.value='fetch';"
        "s.dispatchEvent(new Event('input',{bubbles:true})); return true;})()",
        MATCHED_JS,
        "document.getElementById('ll-search-info').textContent",
        STATE_JS,
        # 16: zoom into parse_row (main's), then reset with the button
        htmlpage.click_frame_js("parse_row"),
        "document.getElementById('ll-crumbs').textContent",
        "document.getElementById('ll-reset').click(); true",
        STATE_JS,
    ]
    result = render_in_chromium(page_file, "", actions)
    assert_clean(result, page_file)
    r = result.results
    full = r[0]
    assert 0 < r[1] < full * 0.5
    assert r[2] is True
    zoomed = json.loads(r[3])
    assert zoomed["zoomName"] == "load_data" and zoomed["hash"].startswith("#zoom=")
    assert r[4] == pytest.approx(full, abs=1)  # the zoomed frame is now the full width
    assert r[5] is None
    assert "all" in r[6] and "main" in r[6] and r[6].rstrip().endswith("load_data")
    reset = json.loads(r[8])
    assert reset["zoom"] == "all" and reset["hash"] == ""
    assert r[9] == pytest.approx(r[1], abs=0.5)

    main_tip = r[10]
    assert isinstance(main_tip, str)
    main_weight = total(profile, thread=MAIN)
    share = pct(main_weight, total(profile))
    assert f"Samples: {main_weight:,} ({share} of total, {share} of parent)" in main_tip
    assert "/srv/app/main.py:10" in main_tip
    assert "line 12" in main_tip and "line 14" in main_tip
    load_tip = r[11]
    assert isinstance(load_tip, str)
    load = weight_of(profile, "load_data")
    assert f"Samples: {load}" in load_tip
    assert f"{pct(load, total(profile))} of total" in load_tip
    assert f"{pct(load, main_weight)} of parent" in load_tip
    assert "/srv/app/io.py:20" in load_tip and "line 22 100" in load_tip
    assert "self: 100" in load_tip

    assert r[13] == ["fetch_batch"]
    fetch = weight_of(profile, "fetch_batch")
    assert f"matched {pct(fetch, total(profile))}" in r[14]
    searched = json.loads(r[15])
    assert searched["search"] == "fetch" and searched["hash"] == "#search=fetch"
    assert r[16] is True
    assert r[17].rstrip().endswith("parse_row") and "load_data" in r[17]
    assert json.loads(r[19])["zoom"] == "all"


def test_zoom_deep_in_the_recursion(chromium: str, page_file: Path) -> None:
    # Node 4000 is a level of the 5000-deep recursion (nodes are numbered callers first).
    zoomed_frame = (
        "(function(){var box=document.getElementById('ll-flame-scroll').getBoundingClientRect();"
        "var fs=document.querySelectorAll('#ll-flame .ll-frame:not(.ll-ancestor)');"
        "var r=fs[0].getBoundingClientRect();"
        "return [fs[0].textContent, r.top >= box.top && r.bottom <= box.bottom, r.width];})()"
    )
    actions = [zoomed_frame, FLAME_WIDTH_JS, "document.getElementById('ll-crumbs').textContent"]
    result = render_in_chromium(page_file, "zoom=4000", actions)
    state = assert_clean(result, page_file)
    assert state["zoom"] == "4000" and state["zoom-name"] == "recurse"
    name, visible, width = result.results[0]
    assert name == "recurse" and visible is True
    assert width == pytest.approx(result.results[1], abs=1)
    crumbs = result.results[2]
    sep = "\u203a"  # the breadcrumbs' separator
    assert crumbs.startswith(f"all{sep}main{sep}…") and "more" in crumbs
    assert crumbs.endswith(f"{sep}recurse")


def test_metric_switch_changes_widths(
    chromium: str, page_file: Path, profile: SampleProfile
) -> None:
    actions = [
        width_js("load_data"),
        select_js("ll-metric", "cpu"),
        STATE_JS,
        width_js("load_data"),
        "document.getElementById('ll-idle').disabled",
        select_js("ll-metric", "memory"),
        STATE_JS,
        width_js("load_data"),
        htmlpage.hover_frame_js(UNICODE),
    ]
    result = render_in_chromium(page_file, "", actions)
    assert_clean(result, page_file)
    r = result.results
    cpu = json.loads(r[2])
    assert cpu["metric"] == "cpu" and cpu["hash"] == "#metric=cpu"
    assert int(cpu["total"]) == profile.total("cpu")
    assert "sleep_wait" not in rendered({"rendered-names": cpu["renderedNames"]})
    assert r[3] > r[0] * 1.2  # load_data: 26% of samples, 42% of CPU time
    assert r[4] is True  # the idle toggle is about sample counts only
    memory = json.loads(r[6])
    assert memory["metric"] == "memory"
    assert int(memory["total"]) == sum(max(s.rss_bytes, 0) for s in profile.stacks)
    assert "recurse" not in rendered({"rendered-names": memory["renderedNames"]})
    assert r[7] != pytest.approx(r[3], abs=1)
    tip = r[8]
    assert isinstance(tip, str) and "RSS growth: 64.0 MiB" in tip


def test_thread_selector_and_idle(chromium: str, page_file: Path, profile: SampleProfile) -> None:
    actions = [
        "[...document.querySelectorAll('#ll-thread option')].map(function(o){return o.text;})",
        select_js("ll-thread", str(WORKER)),
        STATE_JS,
        select_js("ll-thread", str(MAIN)),
        STATE_JS,
        select_js("ll-thread", "all"),
        "(function(){var c=document.getElementById('ll-idle'); c.click(); return c.checked;})()",
        STATE_JS,
    ]
    result = render_in_chromium(page_file, "", actions)
    assert_clean(result, page_file)
    r = result.results
    assert r[0] == [
        "All threads",
        "MainThread (tid 4242) — 1,020 samples",
        f"{THREAD_NAME} (tid 4250) — 520 samples",
    ]
    worker = json.loads(r[2])
    assert worker["thread"] == str(WORKER) and worker["hash"] == f"#thread={WORKER}"
    assert int(worker["total"]) == total(profile, thread=WORKER)
    names = rendered({"rendered-names": worker["renderedNames"]})
    assert "fetch_batch" in names and "parse_row" in names and "main" not in names
    main = json.loads(r[4])
    assert int(main["total"]) == total(profile, thread=MAIN)
    assert "fetch_batch" not in rendered({"rendered-names": main["renderedNames"]})
    assert r[6] is False
    busy = json.loads(r[7])
    assert busy["idle"] == "0" and busy["hash"] == "#idle=0"
    assert int(busy["total"]) == total(profile, idle=False)
    assert "sleep_wait" not in rendered({"rendered-names": busy["renderedNames"]})


def test_view_from_hash(chromium: str, page_file: Path, profile: SampleProfile) -> None:
    result = render_in_chromium(page_file, f"thread={WORKER}&idle=0&metric=samples&sort=self")
    state = assert_clean(result, page_file)
    assert state["thread"] == str(WORKER) and state["idle"] == "0"
    assert int(state["total"]) == total(profile, thread=WORKER, idle=False)
    assert state["table-sort"] == "self"
    assert "fetch_batch" in result.element_text("ll-table")


def test_table_sorts_and_searches(chromium: str, page_file: Path) -> None:
    first_row = htmlpage.FIRST_ROW_JS
    actions = [
        first_row,
        htmlpage.sort_table_js("self"),
        first_row,
        htmlpage.click_row_js("parse_row"),
        STATE_JS,
    ]
    result = render_in_chromium(page_file, "", actions)
    assert_clean(result, page_file)
    r = result.results
    assert r[0] == "main"  # the most samples in total
    assert r[2] == "fetch_batch"  # the most samples on top of the stack (idle included)
    searched = json.loads(r[4])
    assert searched["search"] == "parse_row" and searched["searchMatches"] == "2"
    assert searched["tableSort"] == "self"


@pytest.mark.parametrize(
    "profile_",
    [
        SampleProfile("cpu", 0.0, 0, 0, 0, 0, 0, 0, False, [], [], []),
        # A frame index out of range and an empty stack: shown as far as they make sense.
        SampleProfile(
            "cpu",
            1000.0,
            10,
            0,
            3,
            3,
            0,
            0,
            False,
            [Frame("", "", 0, 0)],
            [],
            [Stack((0, 99), 7, samples=2, cpu_ns=5), Stack((), 7, samples=1, cpu_ns=1)],
        ),
    ],
    ids=["empty", "malformed"],
)
def test_sparse_profiles(chromium: str, tmp_path: Path, profile_: SampleProfile) -> None:
    path = write_page(tmp_path, profile_)
    result = render_in_chromium(path)
    state = assert_clean(result, path)
    assert int(state["frames"]) >= 1
    # A CPU-mode capture's page opens on CPU time, as the text report weighs it.
    assert state["metric"] == "cpu" and int(state["total"]) == profile_.total("cpu")
    if profile_.stacks:
        assert rendered(state) == ["all", "<unknown>"]
    else:
        assert "No samples were recorded" in result.element_text("ll-flame")


def large_profile(stacks: int = 50_000) -> SampleProfile:
    """50,000 distinct stacks over 2,000 functions, 3 threads, and a 5000-deep recursion."""
    rng = random.Random(7)
    frames = [
        Frame(f"mod{i % 40}.func_{i}", f"/srv/big/mod{i % 40}.py", 10 + i % 90, 5 + i % 90)
        for i in range(2000)
    ]
    out = []
    seen: set[tuple[int, ...]] = set()
    while len(out) < stacks:
        depth = rng.randint(3, 40)
        # Callers come from a narrower set near the root, as in real programs.
        frames_ = tuple(rng.randrange(min(2000, 20 * (d + 1))) for d in range(depth))
        if frames_ in seen:
            continue
        seen.add(frames_)
        n = rng.randint(1, 30)
        out.append(
            Stack(
                frames_,
                1 + len(out) % 3,
                samples=n,
                idle=n // 3,
                cpu_ns=n * 9_000_000,
                rss_bytes=rng.randint(-4096, 65536),
            )
        )
    frames.append(Frame("deep", "/srv/big/deep.py", 2, 1))
    out.append(Stack((len(frames) - 1,) * RECURSION_DEPTH, 1, samples=5000, cpu_ns=1))
    return SampleProfile(
        "wall",
        1000.0,
        60 * SECOND,
        0,
        sum(s.samples for s in out),
        60_000,
        0,
        0,
        True,
        frames,
        [Thread(t, 1, 100 + t, f"t{t}") for t in (1, 2, 3)],
        out,
    )


def test_large_profile_stays_responsive(chromium: str, tmp_path: Path) -> None:
    profile = large_profile()
    started = time.monotonic()
    path = write_page(tmp_path, profile)
    assert time.monotonic() - started < 20
    timed = (
        "(function(){var t=performance.now();"
        "var s=document.getElementById('ll-metric'); s.value='cpu';"
        "s.dispatchEvent(new Event('change',{bubbles:true}));"
        "var q=document.getElementById('ll-search'); q.value='func_1';"
        "q.dispatchEvent(new Event('input',{bubbles:true}));"
        "return performance.now()-t;})()"
    )
    actions = ["performance.now()", STATE_JS, timed]
    result = render_in_chromium(path, "", actions, timeout=120)
    state = assert_clean(result, path)
    loaded_ms, before, switch_ms = result.results
    # Bounds far above what this takes (about a second to load, a fraction to redraw), far
    # below a frozen page.
    assert loaded_ms < 30_000
    assert switch_ms < 10_000
    first = json.loads(before)
    assert int(first["total"]) == profile.total("samples")
    assert int(first["depth"]) == RECURSION_DEPTH + 1
    assert int(first["frames"]) < 60_000
    assert int(state["total"]) == profile.total("cpu")
    # Frames narrower than half a pixel are not drawn one by one.
    assert int(state["frames"]) < 60_000
    assert state["metric"] == "cpu" and int(state["search-matches"]) > 100
    print(f"large profile: loaded in {loaded_ms:.0f} ms, switched in {switch_ms:.0f} ms")


def test_screenshot(chromium: str, page_file: Path, tmp_path: Path) -> None:
    shot = tmp_path / "profile.png"
    render_in_chromium(page_file, "search=parse_row", screenshot=shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_sample_html_is_the_api() -> None:
    import leadline.render.sample_html as module

    assert module.__all__ == ["render_sample_html"]
    doc: dict[str, Any] = json.loads(htmlpage.embedded_json(render_sample_html(make_profile())))
    assert set(doc) == {
        "meta",
        "profile",
        "frames",
        "shown_files",
        "threads",
        "nodes",
        "stacks",
        "lanes",
        "gil",
        "sources",
    }
    # A profile without GIL states has no lanes, and the page hides their panel.
    assert doc["lanes"]["threads"] == [] and doc["gil"] == {}
