"""`leadline.mark()`, spans and MarkHandler: nothing when nothing records; when a trace or a
profile records, each mark with its caller's file:line, fields and thread, in report, log, the
Chrome trace and the HTML timeline."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from browser import render_in_chromium
from support import PY, run, traced, write
from support import leadline as cli

import leadline
from leadline import _native

PROGRAM = """\
import logging
import threading

import leadline

log = logging.getLogger("app")
log.addHandler(leadline.MarkHandler())
log.setLevel(logging.INFO)


@leadline.span()
def load(n):
    rows = []
    for i in range(n):
        rows.append(bytes(1000))
        if i % 100 == 0:
            leadline.mark("batch", i=i, ratio=i / 2, tag="x\\"y", obj=[1, 2])
    log.info("loaded %d rows", n)
    return rows


def worker():
    leadline.mark("in worker")


t = threading.Thread(target=worker, name="loader")
t.start()
t.join()
rows = load(300)
"""


def test_import_leadline_loads_only_what_marks_need(tmp_path: Path) -> None:
    """A program that marks its code pays `import leadline` at every start: it loads the marks
    and nothing of the recorders (dataclasses, sockets, the capture format), which come with
    the first use of their names, `from leadline import ...` too: 14 ms over the interpreter's
    own start on 3.12 here, against 48 ms when it loaded everything."""
    script = write(
        tmp_path,
        "imports.py",
        "import json, sys\n"
        "import leadline\n"
        "before = sorted(m for m in sys.modules if m.startswith('leadline'))\n"
        "listed = {'trace', 'profile', 'start_agent'} <= set(dir(leadline))\n"
        "from leadline import TraceOptions, profile\n"
        "print(json.dumps([before, listed, leadline.trace.__module__, profile.__module__,\n"
        "                  TraceOptions.__name__, 'socket' in sys.modules]))\n",
    )
    # (without LEADLINE_PUSH, whose start-up hook would load the agent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEADLINE_PUSH")}
    r = run([PY, str(script)], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    before, listed, trace_from, profile_from, options, sockets = json.loads(r.stdout)
    assert before == [
        "leadline",
        "leadline._native",
        "leadline.errors",
        "leadline.record",
        "leadline.record.marks",
    ]
    assert listed and options == "TraceOptions"
    assert (trace_from, profile_from) == ("leadline.record.tracer", "leadline.record.profiler")
    assert not sockets  # the recorders name the host without the socket module
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        leadline.nothing  # type: ignore[attr-defined]  # noqa: B018


def test_mark_with_nothing_recording_does_nothing() -> None:
    assert not _native.marks_active()
    assert leadline.mark("x", a=1) is None
    assert leadline.mark() is None  # type: ignore[call-arg]  # wrong calls are ignored too
    assert leadline.mark(object(), bad=object()) is None

    @leadline.span("s")
    def f(x: int) -> int:
        return x + 1

    assert f(1) == 2
    handler = leadline.MarkHandler()
    handler.emit(logging.LogRecord("n", logging.INFO, "f.py", 1, "m %s", ("a",), None))


def test_marks_in_trace_report_log_and_chrome(tmp_path: Path) -> None:
    r, cap = traced(tmp_path, PROGRAM)
    assert r.returncode == 0, r.stderr
    data = json.loads(cli("report", cap, "--json", cwd=tmp_path, check=True).stdout)
    marks = data["marks"]
    events = marks["events"]
    batches = [e for e in events if e["name"] == "batch"]
    assert [e["fields"]["i"] for e in batches] == [0, 100, 200]
    assert batches[1]["fields"] == {"i": 100, "ratio": 50.0, "tag": 'x"y', "obj": "[1, 2]"}
    assert {(Path(e["file"]).name, e["line"], e["thread"]) for e in batches} == {
        ("prog.py", 17, "MainThread")
    }
    worker = [e for e in events if e["name"] == "in worker"]
    assert [(e["line"], e["thread"]) for e in worker] == [(23, "loader")]
    logged = [e for e in events if e["name"] == "log.info"]
    assert [(e["line"], e["fields"]["message"]) for e in logged] == [(18, "loaded 300 rows")]
    span = [(e["kind"], e["line"]) for e in events if e["name"] == "load"]
    assert span == [("begin", 11), ("end", 11)]
    begin, end = (e["t_ns"] for e in events if e["name"] == "load")
    assert all(begin <= e["t_ns"] <= end for e in batches)
    summary = {row["name"]: row for row in marks["summary"]}
    assert summary["batch"]["count"] == 3
    assert summary["load"]["count"] == 1
    assert abs(summary["load"]["span_total_ns"] - (end - begin)) <= 2  # each rounded to ns

    text = cli("report", cap, cwd=tmp_path, check=True).stdout
    assert "Marks: 7" in text and "batch" in text

    log = cli("log", cap, "--json", cwd=tmp_path, check=True).stdout.splitlines()
    rows = [json.loads(line) for line in log]
    mark_rows = [row for row in rows if row.get("mark") == "batch"]
    assert [row["line"] for row in mark_rows] == [17, 17, 17]
    clocks = [row["clock"] for row in rows]
    assert clocks == sorted(clocks)  # marks interleaved with the events by time

    out = tmp_path / "trace.json"
    cli("export", cap, "--format", "chrome", "-o", out, cwd=tmp_path, check=True)
    trace = json.loads(out.read_text())["traceEvents"]
    instants = [e for e in trace if e.get("cat") == "mark" and e["ph"] == "i"]
    assert len(instants) == 5
    # a span is a nestable async slice on its thread's own track, whatever the calls' clock
    load = [e for e in trace if e.get("name") == "load" and e.get("cat") == "mark"]
    assert [e["ph"] for e in load] == ["b", "e"] and load[0]["id"] == load[1]["id"], load


def test_marks_in_a_sampling_profile(tmp_path: Path) -> None:
    script = write(tmp_path, "prog.py", PROGRAM)
    cap = tmp_path / "s.lead"
    r = cli("run", "-q", "-o", cap, script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(cli("report", cap, "--json", cwd=tmp_path, check=True).stdout)
    names = [e["name"] for e in data["marks"]["events"]]
    assert names.count("batch") == 3 and "in worker" in names


def test_marks_on_the_html_timeline(tmp_path: Path) -> None:
    r, cap = traced(tmp_path, PROGRAM)
    assert r.returncode == 0, r.stderr
    page = tmp_path / "r.html"
    cli("report", cap, "--html", "-o", page, cwd=tmp_path, check=True)
    result = render_in_chromium(page)
    assert result.console_errors == []
    assert result.element_text("ll-errors").strip() == ""
    assert result.state()["marks"] == "7"
