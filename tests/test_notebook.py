"""Jupyter (docs/notebook.md): a real notebook executed by a real kernel (nbclient, ipykernel)
with `%load_ext leadline` and its magics; the outputs are parsed, the captures kept with -o
are read back, and the inline HTML is loaded in Chromium."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from browser import render_in_chromium
from support import HOT_AND_COOL, report

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need nbformat (dev deps)")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need nbclient (dev deps)")
pytest.importorskip("ipykernel", reason="the notebook tests need ipykernel (dev deps)")

CELLS = [
    "%load_ext leadline",
    f"import threading, time\n{HOT_AND_COOL}",
    # 2: a cell sampled, which also starts a thread of its own
    "%%leadline -o cell.lead\n"
    "helper = threading.Thread(target=cool, name='helper')\n"
    "helper.start()\n"
    "for _ in range(15):\n"
    "    hot()\n"
    "    cool()\n"
    "helper.join()\n",
    # 3: a statement sampled
    "%leadline_run -o line.lead --mode cpu [hot() for _ in range(8)]",
    # 4: a cell traced
    "%%leadline_trace -o trace.lead\n"
    "big = [list(range(1000)) for _ in range(300)]\n"
    "for _ in range(4):\n"
    "    hot()\n",
    # 5: the cell's names are the notebook's
    "print(len(big), helper.name)",
    # 6: an error inside a sampled cell is the cell's error
    "%%leadline\nraise ValueError('from the cell')",
    # 7: a bad option is one line
    "%leadline_run --mode fast 1 + 1",
    # 8: the statement as written, quotes and spaces kept
    "%leadline_trace -n 5 print('a  b', len('x y'))",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    folder = tmp_path_factory.mktemp("notebook")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute()
    nbformat.write(nb, folder / "executed.ipynb")
    return nb, folder


def outputs(nb: Any, index: int) -> list[dict[str, Any]]:
    return [dict(o) for o in nb.cells[index].outputs]


def html_of(nb: Any, index: int) -> str:
    found = [o["data"]["text/html"] for o in outputs(nb, index) if "text/html" in o.get("data", {})]
    assert len(found) == 1, outputs(nb, index)
    text = found[0]
    return "".join(text) if isinstance(text, list) else str(text)


def framed_page(fragment: str) -> str:
    m = re.search(r'srcdoc="([^"]*)"', fragment)
    assert m, fragment[:300]
    return html.unescape(m[1])


def page_data(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="ll-data">(.*?)</script>', page, re.S)
    assert m
    data: dict[str, Any] = json.loads(m[1])
    return data


def test_a_sampled_cell_shows_its_own_flame_graph(executed: tuple[Any, Path]) -> None:
    nb, folder = executed
    assert not [o for o in outputs(nb, 0) if o["output_type"] == "error"], outputs(nb, 0)
    fragment = html_of(nb, 2)
    assert "leadline: " in fragment and "samples at 1000 Hz (wall mode)" in fragment
    data = page_data(framed_page(fragment))
    names = {f[0] for f in data["frames"]}
    files = {f[1] for f in data["frames"]}
    assert {"hot", "cool", "<module>"} <= names, names
    # The cell's code only: no IPython or kernel frame, and every stack of the cell's thread
    # starts at the cell's <module>; the thread the cell started is there, whole.
    assert not [f for f in files if "/IPython/" in f or "-packages/ipykernel/" in f], files
    threads = {t[0]: t[3] for t in data["threads"]}
    assert sorted(threads.values()) == ["MainThread", "helper"], threads
    roots = {
        data["frames"][data["nodes"]["frame"][_root(data, node)]][0]
        for node, serial in zip(data["stacks"]["node"], data["stacks"]["thread"], strict=True)
        if threads[serial] == "MainThread" and node >= 0
    }
    assert roots == {"<module>"}, roots
    # -o kept the whole capture, which leadline reads like any other.
    kept = report(folder / "cell.lead", folder)
    assert {f["name"] for f in kept["functions"]} >= {"hot", "cool"}


def _root(data: dict[str, Any], node: int) -> int:
    parent = data["nodes"]["parent"]
    while parent[node] >= 0:
        node = parent[node]
    return node


def test_a_sampled_statement(executed: tuple[Any, Path]) -> None:
    nb, folder = executed
    fragment = html_of(nb, 3)
    assert "(cpu mode)" in fragment
    data = page_data(framed_page(fragment))
    assert "hot" in {f[0] for f in data["frames"]}
    assert report(folder / "line.lead", folder)["mode"] == "cpu"


def test_a_traced_cell_shows_calls_time_and_memory(executed: tuple[Any, Path]) -> None:
    nb, folder = executed
    fragment = html_of(nb, 4)
    rows = re.findall(r"<tr><td>([\d,]+)</td><td>([^<]+)</td>.*?<code>([^<]+)</code>", fragment)
    by_name = {
        html.unescape(code).split(" (")[0]: (int(calls.replace(",", "")), total)
        for calls, total, code in rows
    }
    assert by_name["hot"][0] == 4 and by_name["<module>"][0] == 1, by_name
    assert by_name["hot"][1].endswith("ms")  # 4 x 30 ms of CPU
    assert "RSS KEPT" in fragment and "HEAP ALLOC" in fragment
    assert (folder / "trace.lead").stat().st_size > 0
    # A cell runs for milliseconds: each call is timed by the counter, not the sampler's clock.
    assert report(folder / "trace.lead", folder)["meta"]["options"]["coarse_time"] is False
    # The cell ran in the notebook's namespace, as it would have without the magic.
    assert "".join(outputs(nb, 5)[0]["text"]) == "300 helper\n"


def test_an_error_in_the_cell_is_the_cells(executed: tuple[Any, Path]) -> None:
    nb, _ = executed
    errors = [o for o in outputs(nb, 6) if o["output_type"] == "error"]
    assert [(e["ename"], e["evalue"]) for e in errors] == [("ValueError", "from the cell")]


def test_the_output_loads_in_chromium(chromium: str, executed: tuple[Any, Path]) -> None:
    nb, folder = executed
    fragment = html_of(nb, 2)
    # The page in the frame: drawn, without an error.
    page = folder / "framed.html"
    page.write_text(framed_page(fragment), encoding="utf-8")
    drawn = render_in_chromium(
        page, actions=["document.querySelectorAll('#ll-flame .ll-frame').length"]
    )
    assert drawn.console_errors == [] and drawn.results[0] > 3
    assert "hot" in drawn.body_text()
    # The output as a notebook shows it: the fragment in a page, without an error.
    outer = folder / "output.html"
    outer.write_text(f"<!DOCTYPE html><html><body>{fragment}</body></html>", encoding="utf-8")
    shown = render_in_chromium(outer)
    assert shown.console_errors == [] and shown.tags("iframe") == 1


def test_options_and_the_statement_as_written(executed: tuple[Any, Path]) -> None:
    nb, _ = executed
    bad = "".join(o.get("text", "") for o in outputs(nb, 7))
    assert "UsageError: --mode must be one of wall, cpu, gil, exception" in bad, outputs(nb, 7)
    printed = [o for o in outputs(nb, 8) if o["output_type"] == "stream"]
    assert "".join(printed[0]["text"]) == "a  b 3\n"


def test_parse_options() -> None:
    from IPython.core.error import UsageError

    from leadline.notebook import parse_options

    o = parse_options("-r 500 --mode=cpu -o 'x.lead' f('-o', 2)", ("rate", "mode", "output"))
    assert (o.rate, o.mode, o.output, o.statement) == (500.0, "cpu", "x.lead", "f('-o', 2)")
    assert parse_options("  x = -1", ("rate",)).statement == "x = -1"
    for line, allowed in (("-n 3 x", ("rate",)), ("--bogus 1", ("rate",)), ("-r fast", ("rate",))):
        with pytest.raises(UsageError):
            parse_options(line, allowed)
