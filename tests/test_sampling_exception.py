"""`--mode exception` (docs/run.md, "Modes"): samples kept only while their thread raised an
exception or handled one, through the real CLI on every supported Python."""

from __future__ import annotations

from pathlib import Path

from support import funcs, leadline, report, write

from leadline.capture.reader import SAMPLE_EXCEPTION, SAMPLE_GIVEN, Capture

# Half the time in a handler (`handle`, 2 ms in its except block), half in plain code
# (`plain`, 2 ms); a handler inside a generator too (`gen_handle`), whose handled exception is
# the generator's own.
PROGRAM = """
    import time

    def spin(seconds):
        t = time.time()
        while time.time() - t < seconds:
            pass

    def fail():
        raise ValueError("x")

    def handle():
        try:
            fail()
        except ValueError:
            spin(0.002)

    def gen_handle():
        try:
            fail()
        except ValueError:
            spin(0.002)
            yield 1

    def plain():
        spin(0.002)

    end = time.time() + 2.5
    while time.time() < end:
        handle()
        plain()
        for _ in gen_handle():
            plain()
"""


def test_exception_mode_keeps_what_handlers_did(tmp_path: Path) -> None:
    script = write(tmp_path, "prog.py", PROGRAM)
    cap = tmp_path / "out.lead"
    leadline("run", "-q", "--rate", "500", "-o", cap, script, cwd=tmp_path, check=True)
    # Recorded as wall mode: every read says whether the thread was in an exception, and half
    # the program's time is in handlers, so about half the fair reads (those written with their
    # own flags) are.  A busy machine leaves few reads fair (145 of 750 ticks of a 1.5 s run, in
    # a CI stage of two workers): 2.5 s for at least 100, whose share of reads in an exception
    # has a standard error of at most 5 points.
    flagged = {True: 0, False: 0}
    for _t, _serial, flags, _stack, _cpu, _drss in Capture(cap).samples():
        if not flags & SAMPLE_GIVEN:
            flagged[bool(flags & SAMPLE_EXCEPTION)] += 1
    total = flagged[True] + flagged[False]
    assert total >= 100 and 0.3 <= flagged[True] / total <= 0.7, flagged

    cap = tmp_path / "exc.lead"
    leadline(
        "run",
        "-q",
        "--rate",
        "500",
        "--mode",
        "exception",
        "-o",
        cap,
        script,
        cwd=tmp_path,
        check=True,
    )
    data = report(cap, tmp_path)
    assert data["mode"] == "exception"
    names = funcs(data)
    # The handlers' loops, in a function and in a generator; the plain code outside them is
    # left out (a read can find `plain` just after a handler ended: a few).
    assert names["handle"]["total_pct"] >= 25, data["functions"][:6]
    assert names["gen_handle"]["total_pct"] >= 25, data["functions"][:6]
    plain = names.get("plain", {"self_pct": 0.0})["self_pct"]
    assert plain <= 5, data["functions"][:6]
