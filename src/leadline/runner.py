"""Running the profiled program in this process, exactly as `python` would."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from types import TracebackType

from .errors import LeadlineError


@dataclass
class Target:
    """What to run: a script path, a module (-m) or code (-c), and its arguments."""

    kind: str  # "script", "module" or "code"
    value: str
    args: list[str]

    @property
    def argv0(self) -> str:
        return {"script": self.value, "module": self.value, "code": "-c"}[self.kind]

    @property
    def argv(self) -> list[str]:
        return [self.argv0, *self.args]


def parse_target(program: list[str] | None, module: list[str] | None,
                 code: list[str] | None) -> Target:
    if module:
        return Target("module", module[0], module[1:])
    if code:
        return Target("code", code[0], code[1:])
    program = list(program or [])
    if program and program[0] == "--":
        program = program[1:]
    if not program:
        raise LeadlineError("nothing to run: give script.py, -m module or -c code")
    target = Target("script", program[0], program[1:])
    if not os.path.isfile(target.value):
        raise LeadlineError(f"{target.value}: no such file")
    if not os.access(target.value, os.R_OK):
        raise LeadlineError(f"{target.value}: cannot read (permission denied)")
    return target


def _print_exception(exc: BaseException) -> None:
    """Print a traceback the way the interpreter would, without leadline's own frames."""
    tb: TracebackType | None = exc.__traceback__
    here = os.path.dirname(os.path.abspath(__file__))
    runpy_file = os.path.abspath(runpy.__file__)
    while tb is not None:
        fname = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not fname.startswith(here) and fname != runpy_file:
            break
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def run(target: Target) -> int:
    """Run the target as __main__ and return the exit status `python` would have given."""
    sys.argv = target.argv
    try:
        if target.kind == "script":
            sys.path.insert(0, os.path.dirname(os.path.abspath(target.value)))
            runpy.run_path(target.value, run_name="__main__")
        elif target.kind == "module":
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target.value, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, "")
            code = compile(target.value, "<string>", "exec")
            import __main__

            exec(code, __main__.__dict__)
    except SystemExit as e:
        return exit_status(e)
    except KeyboardInterrupt as e:
        _print_exception(e)
        return 130
    except BaseException as e:
        _print_exception(e)
        return 1
    return 0


def exit_status(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code
    print(code, file=sys.stderr)
    return 1
