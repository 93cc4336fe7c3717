"""`leadline probe`: count how often chosen lines run and chosen functions are entered, in an
unmodified program, and the ratios between those counts (a cache's hit rate, say).

A probe is `NAME=FILE:LINE` (a line) or `NAME=module:qualname` (a function's entries).  Both
are checked before the program starts: the file must exist and the line must hold code; the
module must be found (without importing it) and define the function.  At run time the probe
finds the code objects of that line or function (those already loaded, and each new one that
`exec` runs: imports, the program itself) and registers them with the native counters
(`_native/probe.c`).  3.12+ counts through `sys.monitoring` events enabled on those code
objects only; 3.10/3.11 through a C trace function that turns line events off in every other
frame.
"""

from __future__ import annotations

import ast
import gc
import importlib.machinery
import json
import os
import sys
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _native
from ..errors import LeadlineError
from .recorder import Recorder

ENTRY = -1


@dataclass
class ProbeSpec:
    """One `--count NAME=SPEC`, resolved to a source file and a line or a function."""

    name: str
    spec: str
    file: str  # real path of the source file
    line: int = 0  # a line probe's line
    qualname: str = ""  # a function probe's qualified name
    def_line: int = 0  # and the first line of its code object
    counters: list[int] = field(default_factory=list)  # native counters (one per code object)

    @property
    def where(self) -> str:
        return (
            f"{self.file}:{self.line}"
            if self.qualname == ""
            else f"{self.qualname} ({self.file}:{self.def_line})"
        )


@dataclass
class Ratio:
    name: str
    expr: str
    tree: ast.expr


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_objects(c)


def _lines(code: types.CodeType) -> set[int]:
    return {line for _s, _e, line in code.co_lines() if line is not None}


def _qualnames(code: types.CodeType, prefix: str = "") -> Iterator[tuple[str, types.CodeType]]:
    """(qualified name, code) of every function and class body under a module's code."""
    for c in code.co_consts:
        if not isinstance(c, types.CodeType):
            continue
        qual = getattr(c, "co_qualname", None) or (prefix + c.co_name)
        yield qual, c
        # A function's inner names go through <locals>; a class body's do not.
        is_function = bool(c.co_flags & 0x02)  # CO_NEWLOCALS: functions, not class bodies
        yield from _qualnames(c, qual + (".<locals>." if is_function else "."))


def _compile_file(path: str) -> types.CodeType:
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise LeadlineError(f"{path}: cannot read ({e.strerror})") from None
    try:
        return compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        raise LeadlineError(f"{path}: cannot compile ({e})") from None


def _find_module_file(module: str) -> str:
    """The source file of a module, found the way import would, without importing anything."""
    path: list[str] | None = [os.getcwd(), *sys.path]
    origin = None
    parts = module.split(".")
    for i, part in enumerate(parts):
        spec = importlib.machinery.PathFinder.find_spec(part, path)
        if spec is None:
            raise LeadlineError(f"{module}: no module named {'.'.join(parts[: i + 1])!r}")
        origin = spec.origin
        path = list(spec.submodule_search_locations or [])
        if i < len(parts) - 1 and not path:
            raise LeadlineError(f"{module}: {'.'.join(parts[: i + 1])} is not a package")
    if not origin or not origin.endswith(".py"):
        raise LeadlineError(f"{module}: has no Python source to probe ({origin or 'built in'})")
    return origin


def parse_count(text: str, main_file: str | None = None) -> ProbeSpec:
    """`NAME=FILE:LINE` or `NAME=module:qualname`, checked against the source."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name or not spec:
        raise LeadlineError(f"--count {text!r}: expected NAME=FILE:LINE or NAME=module:qualname")
    if not name.isidentifier():
        raise LeadlineError(f"--count {text!r}: the name must be an identifier (used in --ratio)")
    target, colon, rest = spec.rpartition(":")
    if not colon or not target or not rest:
        raise LeadlineError(f"--count {text!r}: expected NAME=FILE:LINE or NAME=module:qualname")
    if rest.isdigit():
        path = os.path.realpath(target)
        if not os.path.isfile(path):
            raise LeadlineError(f"--count {name}: {target}: no such file")
        line = int(rest)
        code = _compile_file(path)
        lines = set().union(*(_lines(c) for c in _code_objects(code)))
        if line not in lines:
            after = [n for n in sorted(lines) if n > line]
            hint = f" (the next one is line {after[0]})" if after else ""
            raise LeadlineError(f"--count {name}: {target}:{line} is not an executable line{hint}")
        return ProbeSpec(name, spec, path, line=line)
    module, qualname = target, rest
    if module == "__main__" and main_file:
        path = os.path.realpath(main_file)
    else:
        path = os.path.realpath(_find_module_file(module))
    code = _compile_file(path)
    for qual, c in _qualnames(code):
        if qual == qualname and c.co_flags & 0x02:
            return ProbeSpec(name, spec, path, qualname=qualname, def_line=c.co_firstlineno)
    raise LeadlineError(f"--count {name}: {module} ({path}) defines no function {qualname!r}")


_RATIO_NODES = (ast.Expression, ast.BinOp, ast.Name, ast.Load, ast.Constant, ast.UnaryOp)
_RATIO_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.UAdd)


def parse_ratio(text: str, names: set[str]) -> Ratio:
    """`[NAME=]expression` of probe names, numbers, + - * / and parentheses."""
    label, sep, expr = text.partition("=")
    if not sep:
        label, expr = text, text
    label, expr = label.strip(), expr.strip()
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise LeadlineError(f"--ratio {text!r}: not an arithmetic expression") from None
    for node in ast.walk(tree):
        if isinstance(node, _RATIO_OPS):
            continue
        if not isinstance(node, _RATIO_NODES) or (
            isinstance(node, ast.Constant) and not isinstance(node.value, int | float)
        ):
            raise LeadlineError(f"--ratio {text!r}: only probe names, numbers and + - * / ( )")
        if isinstance(node, ast.Name) and node.id not in names:
            raise LeadlineError(f"--ratio {text!r}: no probe named {node.id!r}")
    return Ratio(label, expr, tree.body)


def evaluate(node: ast.expr, counts: dict[str, int]) -> float | None:
    """The ratio's value, or None where it divides by zero."""
    if isinstance(node, ast.Constant):
        return float(node.value) if isinstance(node.value, int | float) else None
    if isinstance(node, ast.Name):
        return float(counts[node.id])
    if isinstance(node, ast.UnaryOp):
        v = evaluate(node.operand, counts)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = evaluate(node.left, counts), evaluate(node.right, counts)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return None if b == 0 else a / b
    raise LeadlineError("bad ratio")  # parse_ratio admits nothing else


@dataclass
class ProbeResult:
    seconds: float
    counts: dict[str, int]
    ratios: dict[str, float | None]
    probes: list[ProbeSpec]
    ratio_exprs: dict[str, str]
    mechanism: str

    def to_json(self) -> dict[str, Any]:
        per = self.seconds or 1.0
        return {
            "seconds": round(self.seconds, 6),
            "mechanism": self.mechanism,
            "counts": self.counts,
            "ratios": self.ratios,
            "probes": [
                {
                    "name": p.name,
                    "spec": p.spec,
                    "where": p.where,
                    "count": self.counts[p.name],
                    "per_second": self.counts[p.name] / per,
                    "code_objects": len(p.counters),
                }
                for p in self.probes
            ],
            "ratio_expressions": self.ratio_exprs,
        }


MECHANISM = (
    "sys.monitoring local events" if _native.MONITORING else "C trace function (probed frames)"
)

_TOOL_IDS = (4, 3, 2)


class Probes:
    """The counting session: one at a time per process."""

    def __init__(self, probes: list[ProbeSpec], ratios: list[Ratio] | None = None) -> None:
        self.probes = probes
        self.ratios = ratios or []
        self._by_file: dict[str, list[ProbeSpec]] = {}
        for p in probes:
            self._by_file.setdefault(p.file, []).append(p)
        self._real: dict[str, str] = {}  # co_filename -> real path
        self._seen: set[int] = set()  # ids of code objects already looked at (kept alive)
        self._keep: list[types.CodeType] = []
        self._events: dict[int, int] = {}  # id(code) -> local events set (3.12+)
        self._tool: int | None = None
        self._started = 0.0
        self._stopped: float | None = None
        self._lock = threading.Lock()
        self.active = False

    # -- finding code objects ---------------------------------------------------
    def _realpath(self, filename: str) -> str:
        r = self._real.get(filename)
        if r is None:
            r = self._real[filename] = os.path.realpath(filename) if filename[:1] != "<" else ""
        return r

    def discover(self, code: types.CodeType) -> None:
        """Register every probed line or function under `code` (called for each exec)."""
        try:
            for c in _code_objects(code):
                if id(c) in self._seen:
                    continue
                probes = self._by_file.get(self._realpath(c.co_filename))
                if not probes:
                    continue
                self._seen.add(id(c))
                self._keep.append(c)
                lines: set[int] | None = None
                for p in probes:
                    if p.qualname:
                        if (
                            c.co_firstlineno == p.def_line
                            and c.co_name == p.qualname.split(".")[-1]
                        ):
                            self._watch(p, c, ENTRY)
                    else:
                        lines = _lines(c) if lines is None else lines
                        if p.line in lines:
                            self._watch(p, c, p.line)
        except Exception:  # never disturb the program's import
            pass

    def _watch(self, p: ProbeSpec, code: types.CodeType, line: int) -> None:
        start = -1
        if line == ENTRY and sys.version_info[:2] == (3, 11):
            import dis

            start = next(
                (
                    i.offset
                    for i in dis.get_instructions(code)
                    if i.opname == "RESUME" and i.arg == 0
                ),
                0,
            )
        counter = _native.probe_watch(code, line, start)
        if counter not in p.counters:
            p.counters.append(counter)
        if self._tool is not None:
            ev = sys.monitoring.events
            mask = self._events.get(id(code), 0) | (ev.PY_START if line == ENTRY else ev.LINE)
            self._events[id(code)] = mask
            sys.monitoring.set_local_events(self._tool, code, mask)

    def _scan_loaded(self) -> None:
        """Code objects that exist already: functions of modules imported before the start."""
        loaded = {
            os.path.realpath(f)
            for m in list(sys.modules.values())
            if isinstance(f := getattr(m, "__file__", None), str)
        }
        if not loaded.intersection(self._by_file):
            return
        for obj in gc.get_objects():
            if isinstance(obj, types.FunctionType):
                self.discover(obj.__code__)

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> Probes:
        disable = sys.monitoring.DISABLE if _native.MONITORING else None
        try:
            _native.probe_begin(self.discover, disable)
        except RuntimeError as e:
            raise LeadlineError(str(e)) from None
        if _native.MONITORING:
            mon = sys.monitoring
            tool = next((t for t in _TOOL_IDS if mon.get_tool(t) is None), None)
            if tool is None:
                _native.probe_end()
                raise LeadlineError("no free sys.monitoring tool id for leadline probe")
            mon.use_tool_id(tool, "leadline probe")
            mon.register_callback(tool, mon.events.LINE, _native.probe_line_event)
            mon.register_callback(tool, mon.events.PY_START, _native.probe_start_event)
            self._tool = tool
        self._scan_loaded()
        if not _native.MONITORING:
            threading.settrace(_native.probe_trace_bootstrap)
            _native.probe_install_trace()
        self.active = True
        self._started = time.perf_counter()
        return self

    def stop(self) -> ProbeResult:
        with self._lock:
            if self.active:
                self.active = False
                self._stopped = time.perf_counter()
                _native.probe_end()
                if self._tool is not None:
                    mon = sys.monitoring
                    for c in self._keep:
                        if id(c) in self._events:
                            mon.set_local_events(self._tool, c, 0)
                    mon.register_callback(self._tool, mon.events.LINE, None)
                    mon.register_callback(self._tool, mon.events.PY_START, None)
                    mon.free_tool_id(self._tool)
                    self._tool = None
                else:
                    threading.settrace(None)
            return self.result()

    def result(self) -> ProbeResult:
        values = _native.probe_counts()
        counts = {p.name: sum(values[i] for i in p.counters) for p in self.probes}
        end = self._stopped if self._stopped is not None else time.perf_counter()
        ratios = {r.name: evaluate(r.tree, counts) for r in self.ratios}
        return ProbeResult(
            end - self._started,
            counts,
            ratios,
            self.probes,
            {r.name: r.expr for r in self.ratios},
            MECHANISM,
        )


class ProbeRecorder(Recorder):
    """A probe session that also writes a capture: META with the probes, every mark made while
    it runs, END with the counts (`leadline probe -o`)."""

    mode = "probe"
    noun = "marks"

    def __init__(
        self, path: str | os.PathLike[str] | None, probes: Probes, argv: list[str] | None = None
    ) -> None:
        super().__init__(path, argv)
        self.probes = probes
        self.result: ProbeResult | None = None

    def _options(self) -> dict[str, Any]:
        return {
            "probes": [
                {"name": p.name, "spec": p.spec, "where": p.where} for p in self.probes.probes
            ],
            "ratios": {r.name: r.expr for r in self.probes.ratios},
            "mechanism": MECHANISM,
        }

    def _begin(self, fd: int, meta: bytes) -> Any:
        journal = _native.Journal(fd, meta)
        try:
            self.probes.start()
        except BaseException:
            journal.close(b"{}")
            raise
        return journal

    def _uninstall(self) -> None:
        self.result = self.probes.stop()

    def _end_fields(self, counters: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
        r = self.result or self.probes.result()
        return {
            "counts": r.counts,
            "ratios": r.ratios,
            "seconds": r.seconds,
            "marks": counters.get("marks", 0),
            "marks_dropped": counters.get("marks_dropped", 0),
        }

    def stop(self) -> ProbeResult:
        self._stop()
        assert self.result is not None
        return self.result


def write_json(result: ProbeResult, path: str) -> None:
    try:
        Path(path).write_text(json.dumps(result.to_json(), indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        raise LeadlineError(f"cannot write {path}: {e.strerror}") from None


# -- counting in a running process (3.14+: sys.remote_exec) -----------------------------------
#
# `leadline probe --pid PID` runs two tiny scripts in the target with sys.remote_exec (PEP 768):
# the first starts a Probes session there (the code objects already loaded are found as for a
# program started under leadline), the second stops it and writes the counts.  Both are run by
# the target's main thread at its next safe point; they talk to the controller only through
# files in a private directory, and never raise into the program.

REMOTE_START = "started.json"
REMOTE_RESULT = "result.json"
REMOTE_ERROR = "error.txt"
REMOTE_CANCELLED = "cancelled"  # a script that runs after the controller gave up does nothing
_REMOTE_SESSION: Probes | None = None


def remote_begin(session: str) -> None:
    """In the target: start counting the probes of `session`/probes.json."""
    global _REMOTE_SESSION
    folder = Path(session)
    try:
        specs = json.loads((folder / "probes.json").read_text(encoding="utf-8"))
        probes = Probes([ProbeSpec(**s) for s in specs])
        probes.start()
        _REMOTE_SESSION = probes
        import atexit

        atexit.register(remote_end, session)  # the counts, if the program ends first
        _write_atomic(folder / REMOTE_START, {"pid": os.getpid(), "mechanism": MECHANISM})
    except BaseException as e:  # the program must not see it
        _write_error(folder, e)


def remote_end(session: str) -> None:
    """In the target: stop counting and write the counts."""
    global _REMOTE_SESSION
    folder = Path(session)
    try:
        probes, _REMOTE_SESSION = _REMOTE_SESSION, None
        import atexit

        atexit.unregister(remote_end)
        if probes is None:
            raise RuntimeError("no probe session is running in this process")
        r = probes.stop()
        out = {"seconds": r.seconds, "counts": r.counts, "mechanism": r.mechanism}
        out["code_objects"] = {p.name: len(p.counters) for p in r.probes}
        _write_atomic(folder / REMOTE_RESULT, out)
    except BaseException as e:
        _write_error(folder, e)


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def _write_error(folder: Path, e: BaseException) -> None:
    try:
        (folder / REMOTE_ERROR).write_text(f"{type(e).__name__}: {e}", encoding="utf-8")
    except BaseException:
        pass


class RemoteProbes:
    """The controller's side of `probe --pid`: start, wait, stop, read the counts."""

    def __init__(
        self, pid: int, probes: list[ProbeSpec], ratios: list[Ratio], timeout: float = 10.0
    ) -> None:
        self.pid = pid
        self.probes = probes
        self.ratios = ratios
        self.timeout = timeout
        import tempfile

        self._dir = Path(tempfile.mkdtemp(prefix="leadline-probe-"))
        self._pending = False  # a script was sent that the target has not run yet
        if os.geteuid() == 0:  # root may probe another user's process: the folder is its
            uid = _process_uid(pid)
            if uid is not None and uid != 0:
                os.chown(self._dir, uid, -1)

    def _script(self, name: str, call: str) -> str:
        """A script for the target: import this leadline (its folder appended to sys.path only
        while importing) and call `call`(session)."""
        pkg_parent = str(Path(__file__).resolve().parents[2])
        path = self._dir / name
        path.write_text(
            "def _leadline_probe():\n"
            "    import os, sys\n"
            f"    if os.path.exists({str(self._dir / REMOTE_CANCELLED)!r}): return\n"
            f"    extra = {pkg_parent!r} not in sys.path\n"
            f"    if extra: sys.path.append({pkg_parent!r})\n"
            "    try:\n"
            "        from leadline.record import probe\n"
            "    except BaseException as e:\n"
            f"        with open({str(self._dir / REMOTE_ERROR)!r}, 'w') as f:\n"
            "            f.write(f'{type(e).__name__}: {e}')\n"
            "        return\n"
            "    finally:\n"
            f"        if extra: sys.path.remove({pkg_parent!r})\n"
            f"    probe.{call}({str(self._dir)!r})\n"
            "_leadline_probe()\n"
            "del _leadline_probe\n",
            encoding="utf-8",
        )
        os.chmod(path, 0o644)
        return str(path)

    def _run(self, name: str, call: str, wait_for: str) -> dict[str, Any]:
        try:
            sys.remote_exec(self.pid, self._script(name, call))  # type: ignore[attr-defined]
        except ProcessLookupError:
            raise LeadlineError(f"no such process: {self.pid}") from None
        except PermissionError:
            raise LeadlineError(
                f"not permitted to run code in process {self.pid}: sys.remote_exec needs ptrace "
                "access to it (the same user, kernel.yama.ptrace_scope 0, or root)"
            ) from None
        except (OSError, RuntimeError, ValueError) as e:
            raise LeadlineError(f"cannot run code in process {self.pid}: {e}") from None
        self._pending = True
        deadline = time.monotonic() + self.timeout
        done = self._dir / wait_for
        while time.monotonic() < deadline:
            if done.exists():
                self._pending = False
                data: dict[str, Any] = json.loads(done.read_text(encoding="utf-8"))
                return data
            err = self._dir / REMOTE_ERROR
            if err.exists():
                self._pending = False
                why = err.read_text(encoding="utf-8").strip().splitlines()
                raise LeadlineError(f"process {self.pid}: {why[-1] if why else 'failed'}")
            if not _alive(self.pid):
                if done.exists():  # written at its exit
                    continue
                raise LeadlineError(f"process {self.pid} exited")
            time.sleep(0.02)
        raise LeadlineError(
            f"process {self.pid} did not run leadline's code within {self.timeout:g} s: "
            "sys.remote_exec runs it when the main thread next runs Python code (a main "
            "thread blocked in C, or remote debugging disabled by -X disable_remote_debug or "
            "PYTHON_DISABLE_REMOTE_DEBUG, never does)"
        )

    def start(self) -> str:
        from dataclasses import asdict

        specs = [{**asdict(p), "counters": []} for p in self.probes]
        (self._dir / "probes.json").write_text(json.dumps(specs), encoding="utf-8")
        started = self._run("begin.py", "remote_begin", REMOTE_START)
        return str(started.get("mechanism", MECHANISM))

    def stop(self) -> ProbeResult:
        done = self._dir / REMOTE_RESULT
        if not _alive(self.pid) and done.exists():  # it ended: the counts it wrote at exit
            data: dict[str, Any] = json.loads(done.read_text(encoding="utf-8"))
        else:
            data = self._run("end.py", "remote_end", REMOTE_RESULT)
        counts = {p.name: int(data["counts"].get(p.name, 0)) for p in self.probes}
        for p in self.probes:  # the counters live in the target: their number is what is shown
            p.counters = list(range(int(data.get("code_objects", {}).get(p.name, 0))))
        return ProbeResult(
            float(data["seconds"]),
            counts,
            {r.name: evaluate(r.tree, counts) for r in self.ratios},
            self.probes,
            {r.name: r.expr for r in self.ratios},
            str(data.get("mechanism", MECHANISM)),
        )

    def ended(self) -> bool:
        """The process has ended (its counts, written at exit, are there if it could)."""
        return not _alive(self.pid)

    def close(self) -> None:
        """Remove the session's folder, unless the target may still run a script from it
        later (its main thread was busy in C): then the script is told to do nothing, and the
        folder stays for it to read."""
        if self._pending and _alive(self.pid):
            (self._dir / REMOTE_CANCELLED).touch()
            return
        import shutil

        shutil.rmtree(self._dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _process_uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None
