"""The trace HTML report: escaping and self-containment, then the page itself in Chromium."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from browser import BrowserResult, render_in_chromium
from htmlpage import (
    FIRST_ROW_JS,
    STATE_JS,
    assert_clean,
    assert_no_external_references,
    assert_only_own_scripts,
    assert_policy_allows_only_inline_code,
    click_frame_js,
    click_row_js,
    embedded_json,
    hover_frame_js,
    rendered,
    sort_table_js,
)
from support import HOOK_KIND_ENDS

from leadline.render.trace_html import render_trace_html

# What these test is version-independent logic (support.HOOK_KIND_ENDS).
pytestmark = HOOK_KIND_ENDS

HOSTILE = "</script><img src=x onerror=alert(1)>"
UNICODE = "計算_ß"
RECURSION_DEPTH = 5000
MAIN_THREAD = 1
WORKER_THREAD = 2

MIB = 1 << 20


class TraceBuilder:
    """Builds a trace document the way the report does: a flat call tree whose inclusive
    numbers are the sums of its subtrees."""

    def __init__(self) -> None:
        self.functions: list[dict[str, Any]] = []
        self.nodes: list[dict[str, Any]] = []
        self._self: list[dict[str, int]] = []

    def function(self, name: str, file: str, line: int, kind: str = "py") -> int:
        fid = len(self.functions) + 1
        self.functions.append({"id": fid, "kind": kind, "file": file, "name": name, "line": line})
        return fid

    def call(
        self,
        func: int,
        parent: int,
        thread: int,
        *,
        ns: int,
        heap: int = 0,
        rss: int = 0,
        calls: int = 1,
    ) -> int:
        """A call-tree node with these self costs; its id (ids go up from parent to child)."""
        nid = len(self.nodes) + 100
        self.nodes.append(
            {"id": nid, "parent": parent, "func": func, "thread": thread, "calls": calls}
        )
        self._self.append({"ns": ns, "heap": heap, "rss": rss})
        return nid

    def build(self) -> dict[str, Any]:
        index = {n["id"]: i for i, n in enumerate(self.nodes)}
        incl = [dict(s) for s in self._self]
        peak = [max(s["rss"], 0) for s in self._self]
        # Children come after their parents, so one backwards pass sums every subtree.
        for i in range(len(self.nodes) - 1, -1, -1):
            parent = self.nodes[i]["parent"]
            if parent >= 0:
                p = index[parent]
                for key in ("ns", "heap", "rss"):
                    incl[p][key] += incl[i][key]
                peak[p] = max(peak[p], self._self[p]["rss"] + peak[i])
        for i, node in enumerate(self.nodes):
            node.update(
                incl_ns=incl[i]["ns"],
                self_ns=self._self[i]["ns"],
                incl_heap=incl[i]["heap"],
                self_heap=self._self[i]["heap"],
                incl_rss=incl[i]["rss"],
                self_rss=self._self[i]["rss"],
                peak_growth=peak[i],
            )
        for f in self.functions:
            mine = [n for n in self.nodes if n["func"] == f["id"]]
            f.update(
                calls=sum(n["calls"] for n in mine),
                incl_ns=sum(n["incl_ns"] for n in _outermost(mine, self.nodes, f["id"])),
                self_ns=sum(n["self_ns"] for n in mine),
                incl_rss=sum(n["incl_rss"] for n in _outermost(mine, self.nodes, f["id"])),
                self_rss=sum(n["self_rss"] for n in mine),
                incl_heap=sum(n["incl_heap"] for n in _outermost(mine, self.nodes, f["id"])),
                self_heap=sum(n["self_heap"] for n in mine),
                peak_rss=0,
                peak_growth=max((n["peak_growth"] for n in mine), default=0),
            )
        return {"functions": self.functions, "nodes": self.nodes}


def _outermost(
    mine: list[dict[str, Any]], nodes: list[dict[str, Any]], fid: int
) -> list[dict[str, Any]]:
    """The calls of a function that are not inside another call of it (recursion)."""
    by_id = {n["id"]: n for n in nodes}
    out = []
    for n in mine:
        p = n["parent"]
        inside = False
        while p >= 0:
            above = by_id[p]
            if above["func"] == fid:
                inside = True
                break
            p = above["parent"]
        if not inside:
            out.append(n)
    return out


def make_trace(*, complete: bool = True, threads: int = 2) -> dict[str, Any]:
    b = TraceBuilder()
    main = b.function("main", "/srv/app/main.py", 10)
    load = b.function("load_data", "/srv/app/io.py", 20)
    parse = b.function("parse_row", "/srv/app/io.py", 45)
    loads = b.function("loads", "", 0, kind="c")
    compute = b.function(UNICODE, "/srv/app/計算.py", 7)
    hostile = b.function(HOSTILE, "/srv/app/<b>evil</b>.py", 666)
    recurse = b.function("recurse", "/srv/app/rec.py", 3)
    sleep = b.function("sleep_wait", "/srv/app/main.py", 30)
    free = b.function("free_cache", "/srv/app/cache.py", 12)
    worker = b.function("worker_run", "/usr/lib/python3.11/threading.py", 1000)
    fetch = b.function("fetch_batch", "/srv/app/net.py", 88)
    helpers = [b.function(f"helper_{i}", "/srv/app/util.py", 100 + i) for i in range(300)]

    m = b.call(main, -1, MAIN_THREAD, ns=50_000_000, heap=1 * MIB, rss=2 * MIB)
    ld = b.call(load, m, MAIN_THREAD, ns=300_000_000, heap=40 * MIB, rss=30 * MIB)
    pr = b.call(parse, ld, MAIN_THREAD, ns=400_000_000, heap=60 * MIB, rss=20 * MIB, calls=50_000)
    b.call(loads, pr, MAIN_THREAD, ns=150_000_000, heap=25 * MIB, rss=5 * MIB, calls=50_000)
    b.call(compute, m, MAIN_THREAD, ns=600_000_000, heap=120 * MIB, rss=64 * MIB)
    b.call(hostile, m, MAIN_THREAD, ns=120_000_000, heap=8 * MIB, rss=3 * MIB)
    b.call(sleep, m, MAIN_THREAD, ns=250_000_000)
    b.call(free, m, MAIN_THREAD, ns=30_000_000, heap=0, rss=-48 * MIB)
    # A recursive descent whose work is done at the bottom: every level is wide enough to draw.
    parent = m
    for level in range(RECURSION_DEPTH):
        last = level == RECURSION_DEPTH - 1
        parent = b.call(
            recurse, parent, MAIN_THREAD, ns=80_000_000 if last else 1_000, heap=64, rss=0
        )
    for h in helpers:
        b.call(h, m, MAIN_THREAD, ns=20_000, heap=16)
    if threads > 1:
        w = b.call(worker, -1, WORKER_THREAD, ns=10_000_000, heap=MIB, rss=MIB)
        f = b.call(fetch, w, WORKER_THREAD, ns=500_000_000, heap=10 * MIB, rss=4 * MIB)
        b.call(parse, f, WORKER_THREAD, ns=90_000_000, heap=6 * MIB, rss=MIB, calls=700)
    doc = b.build()
    duration = 2_600_000_000
    timeline = []
    for i in range(600):
        t = duration * i // 599
        rss = 40 * MIB + int(90 * MIB * math.sin(math.pi * i / 700)) + (i % 7) * 64 * 1024
        timeline.append([t, rss])
    movers = [
        {
            "func": compute,
            "thread": MAIN_THREAD,
            "start_ns": 900_000_000,
            "end_ns": 1_500_000_000,
            "rss_delta": 64 * MIB,
        },
        {
            "func": load,
            "thread": MAIN_THREAD,
            "start_ns": 50_000_000,
            "end_ns": 900_000_000,
            "rss_delta": 55 * MIB,
        },
        {
            "func": free,
            "thread": MAIN_THREAD,
            "start_ns": 2_300_000_000,
            "end_ns": 2_330_000_000,
            "rss_delta": -48 * MIB,
        },
        {
            "func": hostile,
            "thread": MAIN_THREAD,
            "start_ns": 1_600_000_000,
            "end_ns": 1_720_000_000,
            "rss_delta": 3 * MIB,
        },
        {
            "func": fetch,
            "thread": WORKER_THREAD,
            "start_ns": 1_000_000_000,
            "end_ns": 1_500_000_000,
            "rss_delta": 4 * MIB,
        },
    ]
    thread_list = [{"serial": MAIN_THREAD, "name": "MainThread"}]
    if threads > 1:
        thread_list.append({"serial": WORKER_THREAD, "name": "worker-1"})
    doc.update(
        meta={
            "argv": ["app.py", "--input", "data 1.csv", "</title><script>alert(2)</script>"],
            "python_version": "3.11.7",
            "pid": 4242,
            "host": "build-box",
            "start_unix_ns": 1_717_000_000_123_456_789,
            "mode": "trace",
            "options": {"label": "nightly\u2028run\u2029<!-- x -->", "interval_ms": 5},
        },
        summary={
            "duration_ns": duration,
            "events": 1_234_567,
            "recorded": 1_234_000,
            "threads": len(thread_list),
            "complete": complete,
            "peak_rss": max(r for _, r in timeline),
            "start_rss": timeline[0][1],
            "end_rss": timeline[-1][1],
        },
        threads=thread_list,
        timeline=timeline,
        movers=movers,
    )
    return doc


def names_of(data: dict[str, Any]) -> dict[int, str]:
    return {f["id"]: f["name"] for f in data["functions"]}


def count_nodes(data: dict[str, Any], needle: str) -> int:
    names = names_of(data)
    return sum(1 for n in data["nodes"] if needle.lower() in names[n["func"]].lower())


def node_id(data: dict[str, Any], name: str) -> int:
    names = names_of(data)
    return int(next(n["id"] for n in data["nodes"] if names[n["func"]] == name))


# ---------------------------------------------------------------------------------------------
# The page as text


@pytest.fixture(scope="module")
def trace() -> dict[str, Any]:
    return make_trace()


@pytest.fixture(scope="module")
def page(trace: dict[str, Any]) -> str:
    return render_trace_html(trace)


def test_untrusted_text_is_not_markup(page: str) -> None:
    assert HOSTILE not in page
    assert "<img" not in page.lower()
    assert "</title><script>" not in page
    assert "<!-- x -->" not in page
    assert_only_own_scripts(page)


def test_embedded_data_round_trips(page: str, trace: dict[str, Any]) -> None:
    text = embedded_json(page)
    assert not set(text) & set("<>&\u2028\u2029")
    assert json.loads(text) == trace
    assert UNICODE in text  # kept as itself, not \\u-escaped


def test_no_external_references(page: str) -> None:
    assert_no_external_references(page)


def test_content_security_policy_allows_only_the_inline_code(page: str) -> None:
    assert_policy_allows_only_inline_code(page)


def test_odd_values() -> None:
    page = render_trace_html({"meta": {"argv": ["x"], "options": {"out": Path("/tmp/o")}}})
    assert json.loads(embedded_json(page))["meta"]["options"]["out"] == "/tmp/o"
    with pytest.raises(ValueError):
        render_trace_html({"summary": {"duration_ns": float("nan")}})


def test_deep_tree_renders_without_recursion() -> None:
    nodes = [
        {"id": i, "parent": i - 1, "func": 1, "thread": 1, "calls": 1, "incl_ns": 50_000 - i}
        for i in range(50_000)
    ]
    page = render_trace_html({"functions": [{"id": 1, "name": "r"}], "nodes": nodes})
    assert len(json.loads(embedded_json(page))["nodes"]) == 50_000


# ---------------------------------------------------------------------------------------------
# The page in Chromium


@pytest.fixture(scope="module")
def page_file(page: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "trace.html"
    path.write_text(page, encoding="utf-8")
    return path


def write_page(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "trace.html"
    path.write_text(render_trace_html(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def default_view(chromium: str, page_file: Path) -> BrowserResult:
    return render_in_chromium(page_file)


def test_page_renders_without_errors(default_view: BrowserResult, page_file: Path) -> None:
    state = assert_clean(default_view, page_file)
    assert state["metric"] == "time"
    names = rendered(state)
    for expected in (
        "all",
        "MainThread",
        "worker-1",
        "main",
        "load_data",
        "parse_row",
        UNICODE,
        HOSTILE,
        "recurse",
        "fetch_batch",
    ):
        assert expected in names
    # all, thread, main and the whole recursion chain, one level each.
    assert int(state["depth"]) >= RECURSION_DEPTH + 3
    assert int(state["frames"]) >= RECURSION_DEPTH + 10
    assert state["search-matches"] == "0"
    assert state["zoom"] == "all"


def test_hostile_name_is_text(default_view: BrowserResult) -> None:
    assert default_view.tags("img") == 0
    assert default_view.tags("script") == 3
    text = default_view.body_text()
    assert HOSTILE in text
    assert UNICODE in text
    # argv is shown as given, quoted like a shell would need it.
    assert "app.py --input 'data 1.csv' '</title><script>alert(2)</script>'" in text


def test_header(default_view: BrowserResult) -> None:
    text = default_view.element_text("ll-header")
    assert "3.11.7" in text
    assert "2.600 s" in text  # duration
    assert "1,234,567" in text  # events
    assert "MiB" in text  # peak RSS
    assert default_view.element_attrs("ll-warning").get("hidden") is not None


def test_timeline(default_view: BrowserResult, trace: dict[str, Any]) -> None:
    state = default_view.state()
    assert state["timeline-points"] == str(len(trace["timeline"]))
    assert state["movers"] == str(len(trace["movers"]))
    labels = json.loads(state["mover-labels"])
    assert UNICODE in labels and "load_data" in labels
    chart = default_view.element_text("ll-timeline-chart")
    assert "RSS (MiB)" in chart and "time (s)" in chart
    assert default_view.tags("svg") >= 1


def test_table(default_view: BrowserResult, trace: dict[str, Any]) -> None:
    state = default_view.state()
    assert state["table-sort"] == "incl_ns"
    assert state["table-rows"] == "50"
    table = default_view.element_text("ll-table")
    assert "main" in table and HOSTILE in table and UNICODE in table


def test_search_from_hash(chromium: str, page_file: Path, trace: dict[str, Any]) -> None:
    result = render_in_chromium(page_file, "search=parse_row")
    state = assert_clean(result, page_file)
    assert state["search"] == "parse_row"
    assert int(state["search-matches"]) == count_nodes(trace, "parse_row") == 2
    assert int(state["search-highlighted"]) >= 1
    assert 0 < float(state["search-share"]) < 1
    assert "2 matching frames" in result.element_text("ll-search-info")


def test_search_unicode_and_hostile(chromium: str, page_file: Path, trace: dict[str, Any]) -> None:
    result = render_in_chromium(page_file, "search=" + quote("計算") + "&metric=heap")
    state = assert_clean(result, page_file)
    assert state["search"] == "計算" and state["metric"] == "heap"
    assert int(state["search-matches"]) == 1
    assert int(state["search-highlighted"]) == 1
    result = render_in_chromium(page_file, "search=" + quote("<IMG src"))
    state = assert_clean(result, page_file)
    assert int(state["search-matches"]) == count_nodes(trace, "<img src") == 1
    assert result.tags("img") == 0


def test_search_without_matches(chromium: str, page_file: Path) -> None:
    state = assert_clean(render_in_chromium(page_file, "search=no_such_fn"), page_file)
    assert state["search-matches"] == "0"
    assert state["search-highlighted"] == "0"


@pytest.mark.parametrize(
    ("metric", "absent"),
    [("heap", "sleep_wait"), ("rss", "free_cache"), ("peak", "sleep_wait")],
)
def test_metric_from_hash(
    chromium: str, page_file: Path, trace: dict[str, Any], metric: str, absent: str
) -> None:
    state = assert_clean(render_in_chromium(page_file, f"metric={metric}"), page_file)
    assert state["metric"] == metric
    names = rendered(state)
    assert absent not in names
    assert "main" in names and UNICODE in names
    roots = [n for n in trace["nodes"] if n["parent"] < 0]
    key = {"heap": "incl_heap", "rss": "incl_rss", "peak": "peak_growth"}[metric]
    assert float(state["total"]) == sum(max(n[key], 0) for n in roots)
    assert state["table-sort"] == key


def test_wall_time_shows_what_other_metrics_drop(default_view: BrowserResult) -> None:
    names = rendered(default_view.state())
    assert "sleep_wait" in names and "free_cache" in names


def test_zoom_from_hash(chromium: str, page_file: Path, trace: dict[str, Any]) -> None:
    target = node_id(trace, "load_data")
    state = assert_clean(render_in_chromium(page_file, f"zoom={target}"), page_file)
    assert state["zoom"] == str(target)
    assert state["zoom-name"] == "load_data"
    names = rendered(state)
    # The path down to it, then its subtree; nothing beside it.
    assert names[:4] == ["all", "MainThread", "main", "load_data"]
    assert "parse_row" in names and "loads" in names
    assert UNICODE not in names and "worker-1" not in names and "recurse" not in names


def test_interactions(chromium: str, page_file: Path, trace: dict[str, Any]) -> None:
    actions = [
        # 0: zoom into load_data by clicking it
        click_frame_js("load_data"),
        STATE_JS,
        # 2: tooltip of parse_row
        hover_frame_js("parse_row"),
        # 3: zoom out with the reset button
        "document.getElementById('ll-reset').click(); true",
        STATE_JS,
        # 5: type into the search box
        "(function(){var s=document.getElementById('ll-search'); s.value='RECURSE';"
        "s.dispatchEvent(new Event('input',{bubbles:true})); return true;})()",
        STATE_JS,
        # 7: switch the metric with the select
        "(function(){var s=document.getElementById('ll-metric'); s.value='rss';"
        "s.dispatchEvent(new Event('change',{bubbles:true})); return true;})()",
        STATE_JS,
        # 9: sort the table by calls
        sort_table_js("calls"),
        FIRST_ROW_JS,
        STATE_JS,
        # 12: hover the memory chart over the biggest mover
        "(function(){var svg=document.querySelector('#ll-timeline-chart svg');"
        "var rs=svg.querySelectorAll('rect'); var ov=rs[rs.length-1];"
        "var r=ov.getBoundingClientRect(); var x=r.left+r.width*1200/2600;"
        "ov.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:x,clientY:r.top+20}));"
        "var t=document.getElementById('ll-tooltip'); return t.hidden ? null : t.textContent;})()",
        # 13: show every function
        "document.getElementById('ll-table-more').click(); true",
        STATE_JS,
        # 15: a table row searches for its function
        click_row_js("fetch_batch"),
        STATE_JS,
    ]
    result = render_in_chromium(page_file, "", actions)
    assert_clean(result, page_file)
    r = result.results
    assert r[0] is True
    zoomed = json.loads(r[1])
    assert zoomed["zoomName"] == "load_data"
    assert zoomed["hash"] == f"#zoom={node_id(trace, 'load_data')}"
    assert UNICODE not in json.loads(zoomed["renderedNames"])
    tip = r[2]
    assert isinstance(tip, str)
    assert "parse_row" in tip and "/srv/app/io.py:45" in tip
    assert "% of total" in tip and "calls: 50,000" in tip
    reset = json.loads(r[4])
    assert reset["zoom"] == "all" and reset["hash"] == ""
    searched = json.loads(r[6])
    assert searched["search"] == "RECURSE"
    assert int(searched["searchMatches"]) == RECURSION_DEPTH
    assert int(searched["searchHighlighted"]) >= 1
    assert searched["hash"] == "#search=RECURSE"
    switched = json.loads(r[8])
    assert switched["metric"] == "rss"
    assert "free_cache" not in json.loads(switched["renderedNames"])
    assert switched["hash"] == "#search=RECURSE&metric=rss"
    assert r[10] == "parse_row"  # the most called function
    assert json.loads(r[11])["tableSort"] == "calls"
    chart_tip = r[12]
    assert isinstance(chart_tip, str)
    assert UNICODE in chart_tip and "/srv/app/計算.py:7" in chart_tip
    assert "ΔRSS +64.0 MiB" in chart_tip and "duration 600" in chart_tip
    assert json.loads(r[14])["tableRows"] == str(len(trace["functions"]))
    row_search = json.loads(r[16])
    assert row_search["search"] == "fetch_batch" and row_search["searchMatches"] == "1"


def test_narrow_frames_are_merged(default_view: BrowserResult) -> None:
    # 300 helpers of 20 µs each under a 2.6 s run: each far below a pixel, drawn as one block.
    assert 'class="ll-frame ll-merged"' in default_view.dom
    assert "helper_0" not in rendered(default_view.state())


def test_incomplete_capture_warns(chromium: str, tmp_path: Path) -> None:
    path = write_page(tmp_path, make_trace(complete=False))
    result = render_in_chromium(path)
    assert_clean(result, path)
    attrs = result.element_attrs("ll-warning")
    assert "hidden" not in attrs
    assert "capture was not stopped cleanly" in result.element_text("ll-warning")


def test_header_says_when_times_came_from_the_coarse_clock(chromium: str, tmp_path: Path) -> None:
    data = make_trace()
    data["summary"]["coarse_clock"] = {"period_ns": 2_000_000, "from_ns": 0}
    path = write_page(tmp_path, data)
    result = render_in_chromium(path)
    assert_clean(result, path)
    header = result.element_text("ll-header")
    assert "one that moves every 2.00 ms on average (the RSS sampler's)" in header, header
    assert "counter" not in header, header
    data["summary"]["coarse_clock"] = {"period_ns": 1_000_000, "from_ns": 20_300_000}
    header = render_in_chromium(write_page(tmp_path, data)).element_text("ll-header")
    assert "the CPU's counter for the first 20.3 ms, then one that moves every 1.00 ms" in header
    assert "Clock" not in render_in_chromium(write_page(tmp_path, make_trace())).element_text(
        "ll-header"
    )


def test_single_thread_has_no_thread_level(chromium: str, tmp_path: Path) -> None:
    path = write_page(tmp_path, make_trace(threads=1))
    state = assert_clean(render_in_chromium(path), path)
    names = rendered(state)
    assert names[:2] == ["all", "main"]
    assert "MainThread" not in names


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"meta": {}, "summary": {}, "functions": [], "nodes": [], "timeline": [], "movers": []},
        {
            # Dangling references and a parent cycle: shown as far as they make sense.
            "functions": [{"id": 1, "name": "f"}],
            "nodes": [
                {"id": 1, "parent": -1, "func": 1, "thread": 0, "incl_ns": 10},
                {"id": 2, "parent": 1, "func": 99, "thread": 0, "incl_ns": 5},
                {"id": 3, "parent": 4, "func": 1, "thread": 0, "incl_ns": 5},
                {"id": 4, "parent": 3, "func": 1, "thread": 0, "incl_ns": 5},
            ],
            "timeline": [[0, 100]],
            "movers": [{"func": 42, "start_ns": 0, "end_ns": 0, "rss_delta": -5}],
        },
    ],
    ids=["nothing", "empty", "malformed"],
)
def test_sparse_documents(chromium: str, tmp_path: Path, data: dict[str, Any]) -> None:
    path = write_page(tmp_path, data)
    state = assert_clean(render_in_chromium(path), path)
    assert int(state["frames"]) >= 1


def test_screenshot(chromium: str, page_file: Path, tmp_path: Path) -> None:
    shot = tmp_path / "trace.png"
    render_in_chromium(page_file, "search=parse_row", screenshot=shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_marks_only_the_notable_movers(chromium: str, tmp_path: Path) -> None:
    """A document that says which movers are notable (the report's, analyse/trace.py) has only
    those shaded and labelled; the others nest around them and shaded the whole chart."""
    doc = make_trace()
    for m in doc["movers"]:
        m["notable"] = m["rss_delta"] in (64 * MIB, -48 * MIB)
    state = render_in_chromium(write_page(tmp_path, doc)).state()
    assert state["movers"] == "2"
    labels = json.loads(state["mover-labels"])
    assert len(labels) == 2 and "load_data" not in labels, labels
