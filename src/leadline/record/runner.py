"""Running the profiled program in this process, exactly as `python` would."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
import types
from dataclasses import dataclass
from types import TracebackType

from ..errors import LeadlineError


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


def parse_target(
    program: list[str] | None, module: list[str] | None, code: list[str] | None
) -> Target:
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
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(here):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _main_namespace(**attrs: object) -> dict[str, object]:
    """A fresh __main__ module, installed in sys.modules, as the interpreter makes for a script."""
    import builtins

    module = types.ModuleType("__main__")
    module.__dict__.update({"__builtins__": builtins, **attrs})
    sys.modules["__main__"] = module
    return module.__dict__


def _load(target: Target) -> tuple[types.CodeType, dict[str, object]]:
    if target.kind == "script":
        path = os.path.abspath(target.value)
        sys.path.insert(0, os.path.dirname(path))
        with open(path, "rb") as f:
            source = f.read()
        code = compile(source, target.value, "exec", dont_inherit=True)
        return code, _main_namespace(
            __file__=target.value, __cached__=None, __package__=None, __loader__=None, __spec__=None
        )
    if target.kind == "module":
        sys.path.insert(0, os.getcwd())
        try:
            _mod_name, spec, code = runpy._get_module_details(target.value)  # type: ignore[attr-defined]
        except ImportError as e:
            raise LeadlineError(f"-m {target.value}: {e}") from None
        sys.argv[0] = spec.origin or target.value
        return code, _main_namespace(
            __file__=spec.origin,
            __cached__=spec.cached,
            __package__=spec.parent,
            __loader__=spec.loader,
            __spec__=spec,
        )
    sys.path.insert(0, "")
    return compile(target.value, "<string>", "exec", dont_inherit=True), _main_namespace()


def prepare(target: Target) -> tuple[types.CodeType, dict[str, object]]:
    """Everything before the program's first line: argv, sys.path, its code and __main__.
    Done before recording starts, so the trace begins at the program's own <module>."""
    sys.argv = target.argv
    try:
        return _load(target)
    except SyntaxError as e:
        raise LeadlineError(f"{e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except OSError as e:
        raise LeadlineError(f"{target.value}: cannot read ({e.strerror})") from None


def execute(code: types.CodeType, namespace: dict[str, object]) -> int:
    """Run prepared code as __main__; return the exit status `python` would have given."""
    try:
        exec(code, namespace)
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
