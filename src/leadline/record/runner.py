"""Running the profiled program in this process, exactly as `python` would.

The program must see the world `python` gives it: the same `sys.argv`, `sys.path[0]`,
`__main__` namespace (`__file__`, `__spec__`, `__loader__`, `__cached__`...), code filenames,
and, when it ends, the same handling of its exception (`sys.excepthook`), of `SystemExit`, and of
an unhandled `KeyboardInterrupt` (death by SIGINT).  Each rule below names the CPython code it
follows (Python/pythonrun.c, Modules/main.c, Lib/runpy.py), and the tests compare every one with
the running interpreter's own behaviour on each version.
"""

from __future__ import annotations

import atexit
import builtins
import importlib.machinery
import importlib.util
import itertools
import marshal
import os
import pkgutil
import runpy
import signal
import sys
import threading
import types
from dataclasses import dataclass
from types import CodeType, TracebackType
from typing import Any, NoReturn

from ..errors import LeadlineError
from .recorder import PACKAGE_DIR, wrapper_codes

# The interpreter's own display of an exception (PyErr_Display), kept from before the program
# runs: the program may replace sys.__excepthook__ as well as sys.excepthook.
_display = sys.__excepthook__
_exit = os._exit
# __main__ of 3.10 to 3.13 starts with an empty __annotations__ (3.14 annotates lazily), and
# 3.15 no longer sets __cached__ in it.
_MAIN_HAS_ANNOTATIONS = sys.version_info < (3, 14)
_MAIN_HAS_CACHED = sys.version_info < (3, 15)
# After an uncaught KeyboardInterrupt python dies by SIGINT: for KeyboardInterrupt itself until
# 3.13 (pythonrun.c compares the raised type), for its subclasses too from 3.14 on.
_SIGINT_FOR_SUBCLASSES = sys.version_info >= (3, 14)
_MISSING: Any = object()  # sys.excepthook deleted (not set to None)


@dataclass
class Target:
    """What to run: a script path, a module (-m) or code (-c), and its arguments."""

    kind: str  # "script", "module" or "code"
    value: str
    args: list[str]

    @property
    def argv0(self) -> str:
        """The program's name for leadline (capture names, labels): the script, the module."""
        return {"script": self.value, "module": self.value, "code": "-c"}[self.kind]

    @property
    def argv(self) -> list[str]:
        return [self.argv0, *self.args]


@dataclass
class Prepared:
    """A program ready to run: its code and its __main__ namespace.  `error` is an exception
    the program raised before its own code (a package of `-m pkg.mod` failing to import); it
    is reported as the program's when the program runs."""

    code: CodeType | None
    namespace: dict[str, object]
    # A script's __main__ loses __file__ and __cached__ once it has run (pythonrun.c).
    forget_file: bool = False
    error: BaseException | None = None


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
    if not os.path.exists(target.value):
        raise LeadlineError(f"{target.value}: no such file")
    if not os.access(target.value, os.R_OK):
        raise LeadlineError(f"{target.value}: cannot read (permission denied)")
    return target


def _python_abspath(path: str) -> str:
    """The script's path as `python` makes it absolute (Python/fileutils.c `_Py_abspath`): the
    current directory, a separator and the path as typed, not normalised ("/d/./x.py")."""
    if os.path.isabs(path):
        return path
    try:
        return os.getcwd() + os.sep + path
    except OSError:  # the current directory is gone: python keeps the path as typed
        return path


def _set_path0(entry: str | None, always: bool = False) -> None:
    """Give the program the sys.path[0] that `python` would.  The interpreter running leadline
    put its own entry there (`python -m leadline`: the current directory; the `leadline`
    script: its bin folder), which the program must not see: it is replaced.  Under -P or
    PYTHONSAFEPATH (3.11+) there is none, and python adds one only for a directory or zip file
    (`always`).  None: python would add no entry (its current directory is gone)."""
    if not getattr(sys.flags, "safe_path", False) and sys.path:
        if entry is None:
            del sys.path[0]
        else:
            sys.path[0] = entry
    elif always and entry is not None:
        sys.path.insert(0, entry)


def _main_namespace(**attrs: object) -> dict[str, object]:
    """A fresh __main__ module, installed in sys.modules, as the interpreter makes it
    (pylifecycle.c add_main_module), then given `attrs`."""
    module = types.ModuleType("__main__")
    ns = module.__dict__
    ns["__loader__"] = importlib.machinery.BuiltinImporter
    if _MAIN_HAS_ANNOTATIONS:
        ns["__annotations__"] = {}
    ns["__builtins__"] = builtins
    ns.update(attrs)
    sys.modules["__main__"] = module
    return ns


def _spec_namespace(spec: importlib.machinery.ModuleSpec) -> dict[str, object]:
    """__main__ for code found by runpy (`-m`, a directory or zip file), as runpy._run_code
    fills it in."""
    attrs: dict[str, object] = {"__file__": spec.origin}
    if _MAIN_HAS_CACHED:
        attrs["__cached__"] = spec.cached
    attrs.update(__doc__=None, __loader__=spec.loader, __package__=spec.parent, __spec__=spec)
    return _main_namespace(**attrs)


class _NotFound(ImportError):
    """runpy could not find the module itself (as opposed to an import error inside it)."""


def _load_module(target: Target) -> Prepared:
    # python sets argv[0] to "-m" while it finds (and imports the packages of) the module,
    # then to the module's file (runpy._run_module_as_main).
    sys.argv = ["-m", *target.args]
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    _set_path0(cwd)
    try:
        _name, spec, code = runpy._get_module_details(target.value, _NotFound)  # type: ignore[attr-defined]
    except _NotFound as e:
        raise LeadlineError(f"-m {target.value}: {e}") from None
    except SyntaxError:
        raise
    except BaseException as e:  # the program's own packages raised
        return Prepared(None, _main_namespace(), error=e)
    sys.argv[0] = spec.origin
    return Prepared(code, _spec_namespace(spec))


def _load_main_importer(target: Target, path: str) -> Prepared:
    """A directory or zip file: python runs the `__main__` module it holds, found through
    sys.path[0] = that path (Modules/main.c pymain_run_python, runpy._run_module_as_main with
    alter_argv false: sys.argv[0] stays as typed)."""
    _set_path0(path, always=True)
    try:
        _name, spec, code = runpy._get_main_module_details(_NotFound)  # type: ignore[attr-defined]
    except _NotFound as e:
        raise LeadlineError(f"{target.value}: {e}") from None
    except SyntaxError:
        raise
    except BaseException as e:  # the program's own packages raised
        return Prepared(None, _main_namespace(), error=e)
    return Prepared(code, _spec_namespace(spec))


def _is_pyc(path: str, head: bytes) -> bool:
    """pythonrun.c maybe_pyc_file: a .pyc name, or a file starting with the magic number."""
    return path.endswith(".pyc") or head[:2] == importlib.util.MAGIC_NUMBER[:2]


def _load_script(target: Target) -> Prepared:
    path = _python_abspath(target.value)
    if pkgutil.get_importer(path) is not None:
        return _load_main_importer(target, path)
    # sys.path[0] is the folder of the script with every symbolic link resolved
    # (Python/pathconfig.c _PyPathConfig_ComputeSysPath0), while __file__ keeps the link.
    _set_path0(os.path.dirname(os.path.realpath(target.value)))
    with open(path, "rb") as f:
        data = f.read()
    attrs: dict[str, object] = {"__file__": path}
    if _MAIN_HAS_CACHED:
        attrs["__cached__"] = None
    code: CodeType
    if _is_pyc(path, data):
        if data[:4] != importlib.util.MAGIC_NUMBER:
            raise LeadlineError(f"{target.value}: bad magic number in .pyc file")
        code = marshal.loads(data[16:])
        attrs["__loader__"] = importlib.machinery.SourcelessFileLoader("__main__", path)
    else:
        code = compile(data, path, "exec", dont_inherit=True)
        attrs["__loader__"] = importlib.machinery.SourceFileLoader("__main__", path)
    return Prepared(code, _main_namespace(**attrs), forget_file=True)


def prepare(target: Target) -> Prepared:
    """Everything before the program's first line: argv, sys.path, its code and __main__.
    Done before recording starts, so the trace begins at the program's own <module>."""
    try:
        if target.kind == "module":
            return _load_module(target)
        if target.kind == "code":
            sys.argv = ["-c", *target.args]
            _set_path0("")
            return Prepared(
                compile(target.value, "<string>", "exec", dont_inherit=True), _main_namespace()
            )
        sys.argv = [target.value, *target.args]
        return _load_script(target)
    except SyntaxError as e:
        raise LeadlineError(f"{e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except (OSError, ValueError, EOFError) as e:  # unreadable, a damaged .pyc, a NUL in -c
        why = e.strerror if isinstance(e, OSError) else str(e)
        name = "-c" if target.kind == "code" else target.value
        raise LeadlineError(f"{name}: cannot read ({why})") from None


def execute(program: Prepared) -> int:
    """Run prepared code as __main__; return the exit status `python` would have given, or -N
    when python would have ended by re-raising signal N (see `exit_by_signal`)."""
    ended: BaseException | None = None
    try:
        if program.error is not None:
            raise program.error
        assert program.code is not None
        exec(program.code, program.namespace)
    except BaseException as e:
        ended = e
    # What follows runs outside the except clause, as python's does: the program's hook sees
    # no exception being handled (sys.exc_info()), and one it raises has no __context__.
    try:
        if ended is None:
            return 0
        _flush_io()
        if isinstance(ended, SystemExit):
            return exit_status(ended)
        status = _uncaught(ended)
        if status is not None:  # the program's excepthook raised SystemExit
            return status
        interrupted = (
            isinstance(ended, KeyboardInterrupt)
            if _SIGINT_FOR_SUBCLASSES
            else type(ended) is KeyboardInterrupt
        )
        return -signal.SIGINT if interrupted else 1
    finally:
        if program.forget_file:
            program.namespace.pop("__file__", None)
            program.namespace.pop("__cached__", None)


def exit_status(e: SystemExit) -> int:
    """The exit status of `raise SystemExit(code)` (pythonrun.c _Py_HandleSystemExit): None is
    0, an int is itself (the system keeps its low 8 bits), anything else is printed on stderr
    and gives 1."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:  # python ignores a stderr that cannot take it
        pass
    return 1


def _flush_io() -> None:
    """pythonrun.c flush_io: stderr, then stdout, before anything about the end is printed
    (so that the program's buffered output comes before its traceback, as with python)."""
    for name in ("stderr", "stdout"):
        try:
            getattr(sys, name).flush()
        except Exception:  # a closed or replaced stream is not our concern
            pass


def _write_stderr(text: str) -> None:
    try:
        sys.stderr.write(text)
    except Exception:  # PySys_WriteStderr ignores errors too
        pass


def _without_leadline(tb: TracebackType | None, leading: bool) -> TracebackType | None:
    """A traceback without leadline's frames: the ones that called the program (`leading`:
    python's traceback starts at the program's <module>) and leadline's wrappers of
    os._exit and Thread.start wherever they are.  A frame of leadline's API that the program
    itself called (leadline.mark...) stays: python's traceback would have it too."""
    entries: list[TracebackType] = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    start = 0
    if leading:
        while start < len(entries) and entries[start].tb_frame.f_code.co_filename.startswith(
            PACKAGE_DIR
        ):
            start += 1
    wrappers = wrapper_codes()
    kept = [e for e in entries[start:] if e.tb_frame.f_code not in wrappers]
    for before, after in itertools.pairwise(kept):
        before.tb_next = after
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


def _clean(exc: BaseException, leading: bool) -> TracebackType | None:
    """Take leadline's frames out of `exc`'s traceback, and out of those of the exceptions
    chained to it or grouped in it."""
    seen: set[int] = set()
    todo: list[tuple[BaseException, bool]] = [(exc, leading)]
    while todo:
        e, lead = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        e.__traceback__ = _without_leadline(e.__traceback__, lead)
        todo += [(c, False) for c in (e.__cause__, e.__context__) if c is not None]
        todo += [(c, False) for c in getattr(e, "exceptions", ()) if isinstance(c, BaseException)]
    return exc.__traceback__


def _uncaught(exc: BaseException) -> int | None:
    """What python does with the exception that ends the program (pythonrun.c _PyErr_PrintEx):
    sys.last_* are set, the "sys.excepthook" audit event is raised, and sys.excepthook is
    called with the traceback python would give it.  Returns the exit status of a SystemExit
    that the hook raised, else None (python's status is then 1)."""
    tb = _clean(exc, leading=True)
    typ = type(exc)
    sys.last_type, sys.last_value, sys.last_traceback = typ, exc, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = exc
    hook = getattr(sys, "excepthook", _MISSING)
    try:
        sys.audit("sys.excepthook", None if hook is _MISSING else hook, typ, exc, tb)
    except RuntimeError:  # an audit hook vetoed the report: python prints nothing
        return None
    except Exception as e:  # python shows it as unraisable, and goes on
        _clean(e, leading=True)
        _write_stderr("Exception ignored in audit hook:\n")
        _display(type(e), e, e.__traceback__)
    if hook is _MISSING:
        _write_stderr("sys.excepthook is missing\n")
        _display(typ, exc, tb)
        return None
    try:
        hook(typ, exc, tb)
    except SystemExit as e:
        return exit_status(e)
    except BaseException as e:  # the hook failed: python shows both
        _clean(e, leading=True)
        _write_stderr("Error in sys.excepthook:\n")
        _display(type(e), e, e.__traceback__)
        _write_stderr("\nOriginal exception was:\n")
        _display(typ, exc, tb)
    return None


def exit_by_signal(signum: int) -> NoReturn:
    """End the process by `signum`, as python does after an uncaught KeyboardInterrupt
    (Modules/main.c exit_sigint), so that the parent sees a death by that signal (a shell
    stops a script's loop on it).  What python's finalisation does first is done first: the
    program's threads are waited for, its atexit functions run, its output is flushed."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        try:
            shutdown()
        except BaseException:  # a second Ctrl-C while waiting: die now
            pass
    atexit._run_exitfuncs()
    _flush_io()
    try:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    except OSError:
        pass
    # Still alive: the signal is blocked.  python then exits with 128 + N.
    _exit(128 + signum)
