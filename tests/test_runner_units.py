"""Units of record/runner.py that need no child process: the path python makes of a script,
exit statuses, and taking leadline's frames out of a traceback."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

import pytest

from leadline.record import recorder, runner


def test_script_path_as_python_makes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cwd = os.getcwd()
    assert runner._python_abspath("x.py") == f"{cwd}/x.py"
    assert runner._python_abspath("./a/../x.py") == f"{cwd}/./a/../x.py"  # not normalised
    assert runner._python_abspath("/abs/x.py") == "/abs/x.py"
    monkeypatch.chdir("/")
    assert runner._python_abspath("x.py") == "//x.py"  # cwd + "/" + path, as _Py_abspath


@pytest.mark.parametrize(
    ("code", "status"),
    [(None, 0), (0, 0), (3, 3), (256 + 7, 7), (-1, 255), (True, 1), ("message", 1), ([1], 1)],
)
def test_exit_status(code: object, status: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.exit_status(SystemExit(code)) == status
    printed = capsys.readouterr().err
    assert printed == ("" if code is None or isinstance(code, int) else f"{code}\n")


def _wrapper(fn: object) -> None:
    """Stands for one of leadline's wrappers (os._exit, Thread.start) in the program's way."""
    fn()  # type: ignore[operator]


def _program() -> None:
    def inner() -> None:
        raise ValueError("in the program")

    _wrapper(inner)


def test_wrapper_frames_are_taken_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder, "_WRAPPER_CODES", {_wrapper.__code__})
    try:
        try:
            _program()
        except ValueError as first:
            raise KeyError("while handling") from first
    except KeyError as e:
        caught = e
    names = [f.name for f in traceback.extract_tb(caught.__cause__.__traceback__)]  # type: ignore[union-attr]
    assert names == ["test_wrapper_frames_are_taken_out", "_program", "_wrapper", "inner"]
    tb = runner._clean(caught, leading=False)
    assert tb is caught.__traceback__
    cause = caught.__cause__
    assert cause is not None
    names = [f.name for f in traceback.extract_tb(cause.__traceback__)]
    assert names == ["test_wrapper_frames_are_taken_out", "_program", "inner"]


def test_leading_leadline_frames_are_taken_out() -> None:
    """The frames that called the program (runner.execute, in leadline's package) go; the
    program's own stay, starting at its outermost."""
    code = compile("def f():\n    raise OSError('x')\nf()\n", "/prog.py", "exec")
    program = runner.Prepared(code, {"__name__": "__main__", "__builtins__": __builtins__})
    shown: list[list[str]] = []

    def hook(typ: type, value: BaseException, tb: object) -> None:
        shown.append([f"{f.filename}:{f.name}" for f in traceback.extract_tb(tb)])  # type: ignore[arg-type]

    old = sys.excepthook
    sys.excepthook = hook
    try:
        assert runner.execute(program) == 1
    finally:
        sys.excepthook = old
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)
    assert shown == [["/prog.py:<module>", "/prog.py:f"]]
