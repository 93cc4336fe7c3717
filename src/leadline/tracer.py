"""Starting and stopping a trace: the Python API over the native Session."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from . import __version__, _native
from .errors import LeadlineError

# Hook kinds understood by Session.hook(); see tracer.c.
HK_ENTER_LOCAL, HK_ENTER, HK_EXIT_LOCAL, HK_EXIT, HK_CALL, HK_C_RETURN, HK_C_RAISE = range(7)
HK_BOOTSTRAP = 7

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_PACKAGE_DIR = str(Path(__file__).resolve().parent) + os.sep


@dataclass(frozen=True)
class TraceOptions:
    """What a trace records.  Filters decide before any work is done for an event."""

    c_calls: bool = False
    rss_trigger: int = 0  # bytes; -1 means one page; 0 records every event
    previous: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_depth: int = 0
    exact_rss: bool = False
    heap: bool = True
    hook_only: bool = False
    rss_period_us: int = 1000

    def trigger_pages(self) -> int:
        if self.rss_trigger < 0:
            return 1
        return (self.rss_trigger + PAGE_SIZE - 1) // PAGE_SIZE

    def validate(self) -> None:
        if self.rss_trigger < -1:
            raise LeadlineError("--rss-trigger must be -1 (one page), 0 or a number of bytes")
        if self.max_depth < 0:
            raise LeadlineError("--max-depth must be 0 (no limit) or positive")
        if not 100 <= self.rss_period_us <= 10_000_000:
            raise LeadlineError("the RSS sampling period must be between 100 us and 10 s")
        if self.previous and not self.rss_trigger:
            raise LeadlineError("--previous only makes sense with --rss-trigger")


@dataclass
class TraceResult:
    path: Path
    events: int
    recorded: int
    bytes_written: int
    write_error: str | None
    dropped_chunks: int
    seconds: float


def default_output(program: str, mode: str = "trace") -> Path:
    """`<program>-<mode>-<date>-<pid>.lead` in the current directory, as other profilers do."""
    stem = Path(program).stem or "python"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(f"{stem}-{mode}-{stamp}-{os.getpid()}.lead")


def _module_of(filename: str) -> str:
    """The dotted module name a file is imported as, from the longest sys.path entry."""
    path = os.path.abspath(filename)
    best = ""
    for entry in sys.path:
        root = os.path.abspath(entry or ".") + os.sep
        if path.startswith(root) and len(root) > len(best):
            best = root
    rel = path[len(best) :] if best else os.path.basename(path)
    rel = rel.removesuffix(".py")
    parts = [p for p in rel.split(os.sep) if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _matches(pattern: str, filename: str) -> bool:
    if "/" in pattern or pattern.endswith(".py") or pattern.startswith("*"):
        return fnmatch.fnmatchcase(filename, pattern) or fnmatch.fnmatchcase(
            os.path.abspath(filename), pattern
        )
    module = _module_of(filename)
    return fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*")


def make_filter(
    include: tuple[str, ...], exclude: tuple[str, ...]
) -> Callable[[str, str], bool] | None:
    """A predicate over (filename, qualname), evaluated once per function, never per event."""
    if not include and not exclude:
        return None

    def decide(filename: str, qualname: str) -> bool:
        if include and not any(_matches(p, filename) for p in include):
            return False
        return not any(_matches(p, filename) for p in exclude)

    return decide


def _thread_names() -> dict[str, str]:
    return {str(t.ident): t.name for t in threading.enumerate() if t.ident is not None}


def _thread_tids() -> dict[str, str]:
    """Native thread id -> name: marks carry the native id."""
    return {str(t.native_id): t.name for t in threading.enumerate() if t.native_id is not None}


_monitoring_used_before = False
_recording: list[Recorder] = []  # what records in this process, for the fork handlers


def _before_fork() -> None:
    for r in _recording:
        r._before_fork()


def _after_fork_in_parent() -> None:
    for r in _recording:
        r._after_fork_in_parent()


def _after_fork_in_child() -> None:
    """A forked child records nothing (its parent's capture is not its to write): stop every
    recording, so that the child runs at full speed.  The native side already closed the file."""
    for r in list(_recording):
        try:
            r.stop()
        except Exception:  # never disturb the child
            pass


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)


def capture_meta(
    mode: str, argv: list[str], options: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """The META chunk of a capture recorded now (docs/format.md); `extra` overrides."""
    return {
        "format": _native.FORMAT_MAJOR,
        "mode": mode,
        "leadline_version": __version__,
        "argv": argv,
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "implementation": sys.implementation.name,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "start_unix_ns": time.time_ns(),
        "t_start": _native.ticks(),
        "tick_ns": _native.tick_ns(),
        "clock": _native.CLOCK,
        "page_size": PAGE_SIZE,
        "package_dir": _PACKAGE_DIR,
        "options": options,
        **extra,
    }


def open_capture(path: Path) -> int:
    """The capture file, created or emptied, as a descriptor the native writer takes over."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise LeadlineError(f"cannot write {path}: {e.strerror}") from None


def capture_end(counters: dict[str, Any], **fields: Any) -> bytes:
    """The END chunk (docs/format.md) of a recording whose native side returned `counters`."""
    end = {"t_end": counters["t_end"], "tick_ns": counters["tick_ns"], **fields}
    end["stop_unix_ns"] = time.time_ns()
    return json.dumps(end).encode()


@dataclass
class RecordResult:
    path: Path
    bytes_written: int
    write_error: str | None
    dropped_chunks: int
    seconds: float
    counters: dict[str, Any]


RecorderT = TypeVar("RecorderT", bound="Recorder")


class Recorder:
    """What every in-process recording shares: the capture file, META and END, thread names,
    os._exit, fork.  Subclasses create the native recorder and turn its counters into a result."""

    mode: str = "trace"

    def __init__(self, path: str | os.PathLike[str] | None, argv: list[str] | None) -> None:
        self.argv = list(sys.argv if argv is None else argv)
        self.path = (
            Path(path) if path is not None else default_output(self.argv[0] or "python", self.mode)
        )
        self._native: Any = None
        self._started = 0.0
        self._thread_names: dict[str, str] = {}
        self._thread_tids: dict[str, str] = {}
        self._real_exit: Callable[[int], Any] | None = None  # os._exit while we wrap it
        self._real_thread_start: Callable[[threading.Thread], None] | None = None
        self.record: RecordResult | None = None
        self.pid = 0  # the process that records (a forked child does not)

    # -- what subclasses provide ------------------------------------------------
    def _options(self) -> dict[str, Any]:
        raise NotImplementedError

    def _begin(self, fd: int, meta: bytes) -> Any:
        """Create and start the native recorder (it owns `fd` from then on)."""
        raise NotImplementedError

    def _end_fields(self, counters: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _open_output(self) -> int:
        """The descriptor the native recorder writes the capture to."""
        return open_capture(self.path)

    def _before_fork(self) -> None:
        pass

    def _after_fork_in_parent(self) -> None:
        pass

    def _finished(self) -> None:
        """Called after the capture is closed, in the recording process."""

    # -- lifecycle ------------------------------------------------------------
    def _start(self) -> None:
        if self._native is not None:
            raise LeadlineError(f"this {self.mode} is already running")
        fd = self._open_output()
        meta = capture_meta(self.mode, self.argv, self._options())
        self._thread_names = _thread_names()  # before the hooks, so that it is not traced
        self._thread_tids = _thread_tids()
        try:
            self._native = self._begin(fd, json.dumps(meta).encode())
        except (RuntimeError, OSError, ValueError) as e:
            with contextlib.suppress(OSError):  # the native side may already have closed it
                os.close(fd)
            raise LeadlineError(str(e)) from None
        self._started = time.perf_counter()
        self._real_exit = os._exit
        os._exit = self._exit_wrapper  # type: ignore[assignment]
        self._watch_thread_names()
        self.pid = os.getpid()
        _recording.append(self)

    def _watch_thread_names(self) -> None:
        """Remember each thread's name when it starts: a thread that ends before the recording
        stops is no longer listed by threading.enumerate()."""
        real_start = threading.Thread.start
        names, tids = self._thread_names, self._thread_tids

        def start(thread: threading.Thread) -> None:
            real_start(thread)
            if thread.ident is not None:
                names[str(thread.ident)] = thread.name
            if thread.native_id is not None:
                tids[str(thread.native_id)] = thread.name

        self._real_thread_start = real_start
        threading.Thread.start = start  # type: ignore[method-assign,assignment]

    def _uninstall(self) -> None:
        pass

    def _stop(self) -> RecordResult:
        if self.record is not None:
            return self.record
        if self._native is None:
            raise LeadlineError(f"this {self.mode} was not started")
        if self in _recording:
            _recording.remove(self)
        if self._real_exit is not None and os._exit == self._exit_wrapper:
            os._exit = self._real_exit  # type: ignore[assignment]
        if self._real_thread_start is not None:
            threading.Thread.start = self._real_thread_start  # type: ignore[method-assign,assignment]
            self._real_thread_start = None
        self._uninstall()
        counters = self._native.finish()
        names = {**self._thread_names, **_thread_names()}
        tids = {**self._thread_tids, **_thread_tids()}
        end = capture_end(counters, **self._end_fields(counters), threads=names, thread_tids=tids)
        written = self._native.close(end)
        self.record = RecordResult(
            path=self.path,
            bytes_written=written["bytes_written"],
            write_error=written["write_error"],
            dropped_chunks=written["dropped_chunks"],
            seconds=time.perf_counter() - self._started,
            counters=counters,
        )
        if os.getpid() == self.pid:
            self._finished()
            if self.record.write_error:
                print(
                    f"leadline: warning: writing {self.path} failed ({self.record.write_error}); "
                    "the capture holds what was written before",
                    file=sys.stderr,
                )
        return self.record

    def stop(self) -> Any:
        return self._stop()

    def start(self: RecorderT) -> RecorderT:
        self._start()
        return self

    def __enter__(self: RecorderT) -> RecorderT:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _exit_wrapper(self, status: int) -> None:
        """os._exit skips every cleanup: finish the capture first, then exit as asked."""
        real = self._real_exit
        try:
            self.stop()
        except BaseException:  # the program asked to exit now; nothing may stop that
            pass
        assert real is not None
        real(status)


class Tracer(Recorder):
    """One recording.  Use `leadline.trace(...)` or the CLI rather than this class directly."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        options: TraceOptions | None = None,
        argv: list[str] | None = None,
        mode: str = "trace",
    ) -> None:
        self.mode = mode
        super().__init__(path, argv)
        self.options = options or TraceOptions()
        self.options.validate()
        self._tool: int | None = None
        self._events: list[int] = []
        self.result: TraceResult | None = None

    def _options(self) -> dict[str, Any]:
        return asdict(self.options)

    def _begin(self, fd: int, meta: bytes) -> Any:
        o = self.options
        disable = sys.monitoring.DISABLE if _native.MONITORING else None
        session = _native.Session(
            fd,
            meta,
            hook_only=o.hook_only,
            c_calls=o.c_calls,
            rss_trigger_pages=o.trigger_pages() if o.rss_trigger else 0,
            previous=o.previous,
            max_depth=o.max_depth,
            exact_rss=o.exact_rss,
            heap=o.heap,
            rss_period_us=o.rss_period_us,
            filter=make_filter(o.include, o.exclude),
            exclude_prefix=_PACKAGE_DIR,
            disable=disable,
        )
        try:
            self._install(session)
        except BaseException:
            session.close()
            raise
        return session

    def _install(self, s: Any) -> None:
        if _native.MONITORING:
            global _monitoring_used_before
            mon = sys.monitoring
            tool = next((t for t in (mon.PROFILER_ID, 3, 4) if mon.get_tool(t) is None), None)
            if tool is None:
                used = ", ".join(f"{t}: {mon.get_tool(t)}" for t in (2, 3, 4))
                raise LeadlineError(f"no free sys.monitoring tool id for leadline ({used})")
            mon.use_tool_id(tool, "leadline")
            ev = mon.events
            hooks = {
                ev.PY_START: HK_ENTER_LOCAL,
                ev.PY_RESUME: HK_ENTER_LOCAL,
                ev.PY_THROW: HK_ENTER,
                ev.PY_RETURN: HK_EXIT_LOCAL,
                ev.PY_YIELD: HK_EXIT_LOCAL,
                ev.PY_UNWIND: HK_EXIT,
            }
            if self.options.c_calls:
                hooks.update({ev.CALL: HK_CALL, ev.C_RETURN: HK_C_RETURN, ev.C_RAISE: HK_C_RAISE})
            for event, kind in hooks.items():
                mon.register_callback(tool, event, s.hook(kind))
            if _monitoring_used_before:
                # Locations disabled for filters of an earlier trace in this process.
                mon.restart_events()
            _monitoring_used_before = True
            mask = 0
            for event in hooks:
                mask |= event
            mon.set_events(tool, mask)
            self._tool = tool
            self._events = list(hooks)
        else:
            try:
                s.install_profile()
            except RuntimeError as e:
                raise LeadlineError(str(e)) from None
            threading.setprofile(s.hook(HK_BOOTSTRAP))

    def _uninstall(self) -> None:
        if _native.MONITORING and self._tool is not None:
            mon = sys.monitoring
            mon.set_events(self._tool, 0)
            for event in self._events:
                mon.register_callback(self._tool, event, None)
            mon.free_tool_id(self._tool)
            self._tool = None
        elif not _native.MONITORING:
            threading.setprofile(None)

    def _end_fields(self, counters: dict[str, Any]) -> dict[str, Any]:
        return {"events": counters["events"], "recorded": counters["recorded"]}

    def _finished(self) -> None:
        assert self.record is not None
        if self.record.counters.get("hook_replaced"):
            print(
                "leadline: warning: the program removed or replaced leadline's profile hook "
                f"(sys.setprofile) on {self.record.counters['hook_replaced']} thread(s); events "
                "there after that are missing",
                file=sys.stderr,
            )

    def stop(self) -> TraceResult:
        if self.result is not None:
            return self.result
        rec = self._stop()
        self.result = TraceResult(
            path=self.path,
            events=rec.counters["events"],
            recorded=rec.counters["recorded"],
            bytes_written=rec.bytes_written,
            write_error=rec.write_error,
            dropped_chunks=rec.dropped_chunks,
            seconds=rec.seconds,
        )
        return self.result


def trace(
    path: str | os.PathLike[str] | None = None,
    *,
    rss_trigger: int = 0,
    previous: bool = False,
    c_calls: bool = False,
    include: tuple[str, ...] | list[str] = (),
    exclude: tuple[str, ...] | list[str] = (),
    max_depth: int = 0,
    exact_rss: bool = False,
    heap: bool = True,
) -> Tracer:
    """Trace every call (and its memory) inside a ``with`` block::

    with leadline.trace("run.lead", rss_trigger=4096):
        work()
    """
    opts = TraceOptions(
        c_calls=c_calls,
        rss_trigger=rss_trigger,
        previous=previous,
        include=tuple(include),
        exclude=tuple(exclude),
        max_depth=max_depth,
        exact_rss=exact_rss,
        heap=heap,
    )
    return Tracer(path, opts)


P = ParamSpec("P")
R = TypeVar("R")


def traced(
    path: str | os.PathLike[str] | None = None, **options: Any
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: trace each call of the function into `path` (overwritten per call)."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            target = path if path is not None else default_output(fn.__name__)
            with trace(target, **options):
                return fn(*args, **kwargs)

        return inner

    return wrap
