"""How the profiled program ends, under `leadline run` and `leadline trace`, compared with
`python` itself: its uncaught exception goes through its own sys.excepthook with the traceback
python gives (no leadline frame), sys.last_* are set, a failing or missing hook is reported as
python reports it, its output comes before its traceback, an uncaught KeyboardInterrupt ends the
process by SIGINT (after its threads, its atexit functions and the capture are finished),
os._exit and a death by SIGTERM keep their status."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from sameworld import MODES, compare, leadline_run, merged, python_run
from support import leadline, report, write

HOOK = """\
import sys, traceback

def hook(typ, value, tb):
    print("hook:", typ.__name__, value, file=sys.stderr)
    print("same traceback:", tb is value.__traceback__, file=sys.stderr)
    for frame in traceback.extract_tb(tb):
        print("  at", frame.filename, frame.lineno, frame.name, file=sys.stderr)
    print("handling:", sys.exc_info(), file=sys.stderr)

sys.excepthook = hook
print("before")

def inner():
    raise ValueError("boom")

def outer():
    inner()

outer()
"""


def test_the_programs_excepthook_gets_pythons_traceback(tmp_path: Path) -> None:
    write(tmp_path, "prog.py", HOOK)
    out = compare(["prog.py"], tmp_path)["python"]
    assert out.returncode == 1 and out.stdout == "before\n"
    assert out.stderr.splitlines()[:2] == ["hook: ValueError boom", "same traceback: True"]
    assert [line.split()[-1] for line in out.stderr.splitlines() if "  at " in line] == [
        "<module>",
        "outer",
        "inner",
    ]


def test_without_a_hook_the_traceback_is_pythons(tmp_path: Path) -> None:
    write(
        tmp_path,
        "prog.py",
        """\
        import json

        def parse():
            return json.loads("{")

        parse()
        """,
    )
    out = compare(["prog.py"], tmp_path)["python"]
    assert out.stderr.startswith("Traceback (most recent call last):\n")
    assert f'File "{tmp_path / "prog.py"}", line 6, in <module>' in out.stderr


@pytest.mark.parametrize(
    "setup",
    [
        "def hook(*a):\n    raise RuntimeError('the hook broke')\nsys.excepthook = hook",
        "sys.excepthook = None",
        "del sys.excepthook",
        "def hook(*a):\n    sys.exit(3)\nsys.excepthook = hook",
    ],
    ids=["hook-raises", "hook-none", "hook-missing", "hook-exits"],
)
def test_a_failing_or_missing_hook(tmp_path: Path, setup: str) -> None:
    write(tmp_path, "prog.py", f"import sys\n{setup}\nraise KeyError('k')\n")
    out = compare(["prog.py"], tmp_path, **merged())["python"]
    if "exit(3)" in setup:
        assert out.returncode == 3 and out.stdout == ""
    elif "del" in setup:
        assert out.stdout.startswith("sys.excepthook is missing\nTraceback")
    else:
        assert out.stdout.startswith("Error in sys.excepthook:\n")
        assert "\nOriginal exception was:\nTraceback" in out.stdout


def test_sys_last_values(tmp_path: Path) -> None:
    write(
        tmp_path,
        "prog.py",
        """\
        import atexit, sys
        def report():
            tb = sys.last_traceback
            print(sys.last_type.__name__, sys.last_value, tb.tb_frame.f_code.co_name)
            if sys.version_info >= (3, 12):
                print(sys.last_exc is sys.last_value)
        atexit.register(report)
        raise LookupError("gone")
        """,
    )
    out = compare(["prog.py"], tmp_path)["python"]
    assert out.stdout.startswith("LookupError gone <module>\n")


def test_output_comes_before_the_traceback(tmp_path: Path) -> None:
    """With stdout and stderr in one pipe (2>&1), python flushes the program's buffered
    output before it prints the traceback or a sys.exit message."""
    write(tmp_path, "raises.py", "print('first')\nraise SystemError('second')\n")
    write(tmp_path, "exits.py", "print('first')\nimport sys\nsys.exit('second')\n")
    for name in ("raises.py", "exits.py"):
        out = compare([name], tmp_path, **merged())["python"]
        assert out.returncode == 1
        assert out.stdout.startswith("first\n") and "second" in out.stdout


def test_exit_statuses(tmp_path: Path) -> None:
    for code, status in (("None", 0), ("7", 7), ("300", 300 & 0xFF), ("-2", 254), ("'x'", 1)):
        write(tmp_path, "prog.py", f"raise SystemExit({code})\n")
        assert compare(["prog.py"], tmp_path)["python"].returncode == status


KEYBOARD_INTERRUPT = """\
import atexit, sys, threading, time

def late():
    time.sleep(0.3)
    print("the thread finished", flush=True)

threading.Thread(target=late).start()
atexit.register(lambda: print("atexit ran"))
print("before", flush=True)
sys.stdout.write("buffered, no newline")

def work():
    raise KeyboardInterrupt

work()
"""


def test_keyboard_interrupt_ends_by_sigint(tmp_path: Path) -> None:
    """python re-raises SIGINT after an uncaught KeyboardInterrupt, once its threads were
    waited for, its atexit functions ran and its output was flushed; leadline finishes the
    capture (and its summary) first."""
    write(tmp_path, "prog.py", KEYBOARD_INTERRUPT)
    out = compare(["prog.py"], tmp_path)["python"]
    assert out.returncode == -signal.SIGINT
    assert out.stdout == "before\nbuffered, no newlinethe thread finished\natexit ran\n"
    assert out.stderr.endswith("KeyboardInterrupt\n")
    for mode in MODES:
        functions = {f["name"] for f in report(tmp_path / f"{mode}.lead", tmp_path)["functions"]}
        assert "work" in functions or mode == "run", functions
        assert "<module>" in functions or mode == "run", functions
    # Without -q the summary is printed before the process dies.
    for mode in MODES:
        r = leadline_run(mode, ["prog.py"], tmp_path)
        assert r.returncode == -signal.SIGINT
    r = leadline("trace", "-o", tmp_path / "loud.lead", "prog.py", cwd=tmp_path)
    assert r.returncode == -signal.SIGINT
    assert "leadline: " in r.stderr.splitlines()[-1] and "-> " in r.stderr


def test_keyboard_interrupt_subclass_and_handled(tmp_path: Path) -> None:
    """Until 3.13 only KeyboardInterrupt itself makes python die by SIGINT, from 3.14 on its
    subclasses too; a hook that exits decides."""
    write(tmp_path, "sub.py", "class Stop(KeyboardInterrupt): pass\nraise Stop\n")
    status = -signal.SIGINT if sys.version_info >= (3, 14) else 1
    assert compare(["sub.py"], tmp_path)["python"].returncode == status
    write(
        tmp_path,
        "hooked.py",
        "import sys\nsys.excepthook = lambda *a: sys.exit(0)\nraise KeyboardInterrupt\n",
    )
    assert compare(["hooked.py"], tmp_path)["python"].returncode == 0


def test_os_exit_and_sigterm(tmp_path: Path) -> None:
    write(
        tmp_path,
        "osexit.py",
        """\
        import os, sys
        def bye():
            print("leaving", flush=True)
            os._exit(7)
        bye()
        """,
    )
    assert compare(["osexit.py"], tmp_path)["python"].returncode == 7
    for mode in MODES:
        names = {f["name"] for f in report(tmp_path / f"{mode}.lead", tmp_path)["functions"]}
        assert mode == "run" or "bye" in names
    # Long enough for the first chunks to be written: a thread's events are handed to the
    # writer at least once a second, and the sampler's too.
    write(
        tmp_path,
        "term.py",
        """\
        import os, signal, time
        def tick():
            pass
        def busy():
            t = time.monotonic()
            while time.monotonic() - t < 2.5:
                tick()
        busy()
        print("going", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        """,
    )
    assert compare(["term.py"], tmp_path)["python"].returncode == -signal.SIGTERM
    # Killed while recording: readable up to its last complete chunk, which holds calls of
    # tick (the trace) and samples in busy (the profile).
    for mode, name in (("trace", "tick"), ("run", "busy")):
        r = leadline("report", tmp_path / f"{mode}.lead", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert name in {f["name"] for f in json.loads(r.stdout)["functions"]}, mode


def test_os_exit_refusing_its_argument_keeps_recording(tmp_path: Path) -> None:
    """os._exit('x') raises TypeError and the program goes on: leadline's wrapper of os._exit
    must not stop the recording then.  (Its frame is in that TypeError's traceback: a
    difference from python that only a program catching it can see.)"""
    write(
        tmp_path,
        "prog.py",
        """\
        import os
        def after():
            return 1
        try:
            os._exit("x")
        except TypeError as e:
            print(e)
        after()
        """,
    )
    compare(["prog.py"], tmp_path)
    names = {f["name"] for f in report(tmp_path / "trace.lead", tmp_path)["functions"]}
    assert "after" in names


def test_leadline_wrappers_stay_out_of_tracebacks(tmp_path: Path) -> None:
    """leadline watches Thread.start: a thread started twice fails with python's traceback."""
    write(
        tmp_path,
        "prog.py",
        """\
        import threading
        t = threading.Thread(target=print)
        t.start()
        t.join()
        t.start()
        """,
    )
    out = compare(["prog.py"], tmp_path)["python"]
    assert out.stderr.splitlines()[-1] == "RuntimeError: threads can only be started once"


def test_module_traceback_lacks_only_runpys_frames(tmp_path: Path) -> None:
    """For -m, python's traceback starts with two frames of runpy (which runs the module);
    leadline runs the module's code itself, so those two are the only difference."""
    write(
        tmp_path,
        "mod.py",
        """\
        import json, sys, traceback
        def hook(typ, value, tb):
            print(json.dumps([(f.filename, f.name) for f in traceback.extract_tb(tb)]))
        sys.excepthook = hook
        def f():
            raise ValueError
        f()
        """,
    )
    expected = python_run(["-m", "mod"], tmp_path)
    frames = [f for f in json.loads(expected.stdout) if "runpy" not in f[0]]
    assert [f[1] for f in json.loads(expected.stdout)][:2] == ["_run_module_as_main", "_run_code"]
    for mode in MODES:
        got = leadline_run(mode, ["-m", "mod"], tmp_path)
        assert got.returncode == expected.returncode == 1
        assert (
            json.loads(got.stdout)
            == frames
            == [[str(tmp_path / "mod.py"), n] for n in ("<module>", "f")]
        )


@pytest.mark.parametrize("action", ["report", "ValueError", "RuntimeError"])
def test_excepthook_audit_event(tmp_path: Path, action: str) -> None:
    """The "sys.excepthook" audit event is raised; an audit hook that fails is shown as
    unraisable, one that raises RuntimeError vetoes the report (python prints nothing)."""
    act = (
        'print("audit:", args[0] is sys.excepthook, args[1].__name__, args[2], flush=True)'
        if action == "report"
        else f'raise {action}("audit says no")'
    )
    write(
        tmp_path,
        "prog.py",
        f"""\
        import sys
        def audit(event, args):
            if event == "sys.excepthook":
                {act}
        sys.addaudithook(audit)
        raise OSError("disk")
        """,
    )
    out = compare(["prog.py"], tmp_path, **merged())["python"]
    assert out.returncode == 1
    if action == "report":
        assert out.stdout.startswith("audit: True OSError disk\nTraceback")
    elif action == "ValueError":
        assert out.stdout.startswith("Exception ignored in audit hook:\nTraceback")
        assert out.stdout.endswith("OSError: disk\n")
    else:
        assert out.stdout == ""
