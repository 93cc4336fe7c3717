"""The GIL and the garbage collector in sampled stacks (docs/run.md, "The GIL and garbage
collection"), through the real CLI on every supported Python: each read's GIL state, the
per-thread summary, `--mode gil`, and the `<GC>` frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from htmlpage import assert_clean, rendered, report_in_chromium
from support import funcs, leadline, report, write

from leadline.analyse.model import SampleProfile, Stack, Thread
from leadline.analyse.samples import gil_by_thread, gil_lines
from leadline.capture.reader import (
    GIL_HELD,
    GIL_NONE,
    GIL_WAIT,
    SAMPLE_GIVEN,
    Capture,
    gil_state,
)

# Two threads that run Python for SECONDS each, so that one holds the GIL while the other waits
# for it; the main thread waits in join() meanwhile.
CONTENDED = """
    import threading, time

    start = threading.Barrier(2)

    def spin(seconds):
        s = 0
        start.wait()  # both run the whole time: one thread alone would hold the GIL throughout
        end = time.time() + seconds
        while time.time() < end:
            for i in range(1000):
                s += i
        return s

    workers = [threading.Thread(target=spin, args=(1.5,), name=f"w{i}") for i in range(2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
"""

# A program that spends most of its time in the garbage collector: gc.collect() over 300,000
# objects in reference cycles, for 1.5 s.
COLLECTING = """
    import gc, time

    class Node:
        def __init__(self):
            self.me = self

    keep = [Node() for _ in range(300_000)]
    end = time.time() + 1.5
    while time.time() < end:
        gc.collect()
"""


def record(tmp_path: Path, source: str, *opts: str) -> Path:
    script = write(tmp_path, "prog.py", source)
    cap = tmp_path / "out.lead"
    leadline("run", "-q", "-o", cap, *opts, script, cwd=tmp_path, check=True)
    return cap


def test_each_read_says_who_holds_the_gil_and_who_waits(tmp_path: Path) -> None:
    cap = record(tmp_path, CONTENDED, "--rate", "500")
    data = report(cap, tmp_path)
    gil = {t["name"]: t["gil"] for t in data["threads"]}
    w0, w1, main = gil["w0"], gil["w1"], gil["MainThread"]
    # One thread holds the GIL at a time: the workers share it, about half each (the holder
    # keeps it while the system runs something else), and each waits for it much of the rest
    # (a share of a thread's own reads: a thread that ran alone for a while would hold more).
    for w in (w0, w1):
        assert 20 <= w["held_pct"] <= 80, gil
        assert w["wait_pct"] >= 5, gil
        assert w["held"] + w["wait"] + w["none"] >= 200
    assert main["held_pct"] <= 10, gil
    # One holder a tick: the reads of a tick (records not given weight) name one at most.
    held_at: dict[int, int] = {}
    states = {GIL_HELD: 0, GIL_WAIT: 0, GIL_NONE: 0}
    for t, _serial, flags, _stack, _cpu, _drss in Capture(cap).samples():
        state = gil_state(flags)
        if state and not flags & SAMPLE_GIVEN:
            states[state] += 1
            held_at[t] = held_at.get(t, 0) + (state == GIL_HELD)
    assert states[GIL_HELD] > 0 and states[GIL_WAIT] > 0
    assert max(held_at.values()) == 1
    # END's counts are every read's, those whose weight went elsewhere included.
    end_reads = Capture(cap).end["gil_reads"]
    assert sum(sum(c) for c in end_reads.values()) >= sum(states.values())
    # The text report has a line a thread that held or waited for it.
    text = leadline("report", cap, cwd=tmp_path, check=True).stdout
    lines = [line for line in text.splitlines() if line.startswith("GIL: ")]
    assert any("(w0): " in line and "% holding the GIL, " in line for line in lines), text
    assert any("(w1): " in line and "% waiting for it" in line for line in lines), text


def test_gil_mode_keeps_what_the_threads_did_holding_it(tmp_path: Path) -> None:
    cap = record(tmp_path, CONTENDED, "--rate", "500", "--mode", "gil")
    data = report(cap, tmp_path)
    assert data["mode"] == "gil"
    names = funcs(data)
    # The workers' loop held it; the main thread, waiting in join(), only when it woke up
    # (starting the threads, and taking the GIL back as they ended).
    assert names["spin"]["total_pct"] >= 90, data["functions"][:6]
    assert names.get("Thread.join", {"total_pct": 0})["total_pct"] <= 5, data["functions"][:6]
    assert data["samples"] >= 300
    text = leadline("report", cap, cwd=tmp_path, check=True).stdout
    assert "Mode: gil" in text and "GIL: " not in text


def test_a_garbage_collection_is_a_gc_frame_under_what_started_it(tmp_path: Path) -> None:
    cap = record(tmp_path, COLLECTING, "--rate", "200")
    data = report(cap, tmp_path)
    gc_frame = funcs(data)["<GC>"]
    assert gc_frame["file"] == "gc" and gc_frame["self_pct"] >= 60, data["functions"][:4]
    # Every <GC> stack has the program's code below it: the module's gc.collect() loop.
    frames = data["frames"]
    for s in data["stacks"]:
        names = [frames[i]["name"] for i in s["frames"]]
        if "<GC>" in names:
            assert names[-1] == "<GC>" and "<module>" in names[:-1], names
    # One thread: no GIL line.
    text = leadline("report", cap, cwd=tmp_path, check=True).stdout
    assert "GIL: " not in text
    # Exports carry it.
    out = tmp_path / "out.collapsed"
    leadline("export", cap, "--format", "collapsed", "-o", out, cwd=tmp_path, check=True)
    stacks = [line.rsplit(" ", 1)[0] for line in out.read_text().splitlines()]
    assert any(stack.endswith(";<GC> (gc:0)") for stack in stacks), stacks


def test_a_profile_without_gil_states_has_no_gil_lines() -> None:
    """Captures before format 1.3 (no GIL bits, no gil_reads) and versions whose GIL cannot
    be read: no thread has a GIL state, and the report says nothing of it."""
    p = SampleProfile(
        mode="wall",
        rate_hz=100.0,
        duration_ns=1,
        start_unix_ns=0,
        samples=2,
        ticks=1,
        missed=0,
        torn=0,
        memory=False,
        frames=[],
        threads=[Thread(1, 1, 1, "a"), Thread(2, 1, 2, "b")],
        stacks=[Stack((), 1, samples=1), Stack((), 2, samples=1)],
    )
    assert gil_by_thread(p) == {} and gil_lines(p) == []
    p.stacks[0].gil_held, p.stacks[1].gil_wait = 3, 2
    assert gil_lines(p) == [
        "T1 (a): 100% holding the GIL, 0% waiting for it",
        "T2 (b): 0% holding the GIL, 100% waiting for it",
    ]
    p.gil_reads = {1: (1, 1, 2)}  # END's counts win; one thread alone has no line
    assert gil_by_thread(p)[1].held == 1 and gil_lines(p) == []


def html_view(tmp_path: Path, source: str, rate: str, actions: list[str]) -> tuple[Any, Path]:
    """The HTML report of a recording of `source`, loaded in Chromium with `actions` run."""
    result, page, _ = report_in_chromium(
        record(tmp_path, source, "--rate", rate), tmp_path, actions
    )
    return result, page


def test_the_html_shows_each_threads_lane_and_the_gc_frame(chromium: str, tmp_path: Path) -> None:
    result, page = html_view(
        tmp_path,
        CONTENDED,
        "500",
        [
            "[...document.querySelectorAll('#ll-lanes .ll-lane-label')]"
            ".map(function (e) { return e.textContent; })",
            "[...new Set([...document.querySelectorAll('#ll-lanes rect')]"
            ".map(function (r) { return r.getAttribute('data-state'); }))].sort()",
        ],
    )
    state = assert_clean(result, page)
    labels, drawn = result.results
    # A lane a thread, the workers' labelled with their shares; both workers held and waited.
    assert int(state["lanes"]) == len(labels) >= 3, labels
    assert any(label.startswith("w0") and "% holding the GIL, " in label for label in labels)
    assert {"held", "wait"} <= set(drawn), drawn
    assert "hidden" not in result.element_attrs("ll-lanes-panel")

    result, page = html_view(
        tmp_path,
        COLLECTING,
        "200",
        [
            "[...document.querySelectorAll('#ll-flame .ll-gc-frame')]"
            ".map(function (e) { return getComputedStyle(e).backgroundColor; })"
        ],
    )
    state = assert_clean(result, page)
    assert "<GC>" in rendered(state)
    # Marked as the collector's, in its own colour.
    assert result.results[0] and set(result.results[0]) == {"rgb(142, 124, 195)"}, result.results
