"""`--mode exception` (docs/run.md, "Modes"): samples kept only while their thread raised an
exception or handled one, through the real CLI on every supported Python."""

from __future__ import annotations

from pathlib import Path

from support import funcs, leadline, report, share_with_error, write

from leadline.capture.reader import SAMPLE_EXCEPTION, SAMPLE_GIVEN, Capture

# Half the time in a handler (`handle`, 2 ms in its except block), half in plain code
# (`plain`, 2 ms); a handler inside a generator too (`gen_handle`), whose handled exception is
# the generator's own.
PROGRAM = """
    import sys
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

    end = time.time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 2.5)
    while time.time() < end:
        handle()
        plain()
        for _ in gen_handle():
            plain()
"""


def test_exception_mode_keeps_what_handlers_did(tmp_path: Path) -> None:
    script = write(tmp_path, "prog.py", PROGRAM)
    # Recorded as wall mode: every read says whether the thread was in an exception, and half
    # the program's time is in handlers, so about half the fair reads (those written with their
    # own flags) are.  A busy machine leaves few reads fair (145 of 750 ticks of a 1.5 s run, in
    # a CI stage of two workers; fewer than 100 in 2.5 s beside three CPU hogs): the run is made
    # longer until it has at least 100, whose share of reads in an exception has a standard
    # error of at most 5 points.
    for seconds in (2.5, 5.0, 10.0, 20.0):
        cap = tmp_path / f"out-{seconds:g}.lead"
        leadline(
            "run", "-q", "--rate", "500", "-o", cap, script, str(seconds),
            cwd=tmp_path, check=True,
        )  # fmt: skip
        flagged = {True: 0, False: 0}
        for _t, _serial, flags, _stack, _cpu, _drss in Capture(cap).samples():
            if not flags & SAMPLE_GIVEN:
                flagged[bool(flags & SAMPLE_EXCEPTION)] += 1
        total = flagged[True] + flagged[False]
        if total >= 100:
            break
    assert total >= 100 and 0.3 <= flagged[True] / total <= 0.7, flagged

    # In exception mode the handlers' loops have half the kept time each.  Beside a busy
    # machine's other work a few fair reads carry the weight of many set aside, so a run holds
    # less evidence than its records say (seen: 35 reads' worth of 150, a share's standard error
    # 8.5 points): the run is made longer until the bound below is 4 standard errors away.
    for seconds in (2.5, 5.0, 10.0, 20.0):
        cap = tmp_path / f"exc-{seconds:g}.lead"
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
            str(seconds),
            cwd=tmp_path,
            check=True,
        )
        share, error = share_with_error(cap, "gen_handle")
        if error <= 6.0:
            break
    assert error <= 6.0, (share, error)
    data = report(cap, tmp_path)
    assert data["mode"] == "exception"
    names = funcs(data)
    # The handlers' loops, in a function and in a generator; the plain code outside them is
    # left out (a read can find `plain` just after a handler ended: a few).
    assert names["handle"]["total_pct"] >= 25, data["functions"][:6]
    assert names["gen_handle"]["total_pct"] >= 25, data["functions"][:6]
    plain = names.get("plain", {"self_pct": 0.0})["self_pct"]
    assert plain <= 5, data["functions"][:6]
