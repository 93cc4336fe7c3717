"""Starting and stopping a trace: the Python API over the native Session."""

from __future__ import annotations

import fnmatch
import functools
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from .. import _native
from ..errors import LeadlineError
from .recorder import PACKAGE_DIR, PAGE_SIZE, Recorder, default_output, size_limit

HOOK = _native.HOOK_KINDS  # the kinds of hook Session.hook() makes (tracer.c)

_SIZE_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: int | str | None) -> int | None:
    """A capture size limit as `--max-size` and `trace(max_size=...)` take it: bytes, or a
    number with a binary unit ("500M", "2G", "1.5g", "64KiB"); 0, "0" or "none": no limit;
    None: the default.  ValueError for anything else."""
    if value is None or isinstance(value, int):
        if isinstance(value, int) and (isinstance(value, bool) or value < 0):
            raise ValueError(f"not a size: {value!r}")
        return value
    text = value.strip().lower()
    if text in ("none", "unlimited", "0"):
        return 0
    number = text.removesuffix("b").removesuffix("i")
    unit = 1
    if number and number[-1] in _SIZE_UNITS:
        unit = _SIZE_UNITS[number[-1]]
        number = number[:-1]
    try:
        size = float(number)
    except ValueError:
        raise ValueError(f"not a size: {value!r}") from None
    if not size >= 0 or size == float("inf"):
        raise ValueError(f"not a size: {value!r}")
    return int(size * unit)


# The longest RSS sampling period whose clock times events by default: a clock that moves every
# few seconds would time no call, and hold the chunks that a deadline in it hands over.
COARSE_MAX_PERIOD_US = 10_000


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
    max_size: int | None = None  # bytes the capture may reach; None: the default; 0: no limit
    memory: bool = True  # read the process's RSS (False: calls and their time alone)
    # Time events by the clock the RSS sampler publishes each period (True) or by the CPU's
    # time-stamp counter (False).  None, the default: the sampler's clock when there is one
    # (memory), else the counter.  With it a function's total is an unbiased estimate and one
    # call's time is to within a period; the counter's read costs more than the rest of the
    # hook on some hosts (docs/trace.md, "Time").
    coarse_time: bool | None = None

    @property
    def coarse(self) -> bool:
        """Whether events take the RSS sampler's clock: by default when there is a sampler and
        it wakes at least every COARSE_MAX_PERIOD_US."""
        if self.coarse_time is None:
            return self.memory and self.rss_period_us <= COARSE_MAX_PERIOD_US
        return self.coarse_time

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
        if not self.memory and (self.rss_trigger or self.exact_rss or self.heap):
            raise LeadlineError("a trace without memory has no RSS trigger, exact RSS or heap")
        if self.coarse_time and not self.memory:
            raise LeadlineError(
                "coarse time is the RSS sampler's clock: a trace without memory has none"
            )
        if self.coarse_time and self.rss_period_us > COARSE_MAX_PERIOD_US:
            raise LeadlineError(
                "coarse time is the RSS sampler's clock, which moves every --rss-period: at most "
                f"{COARSE_MAX_PERIOD_US // 1000} ms for it"
            )
        if self.previous and not self.rss_trigger:
            raise LeadlineError("--previous only makes sense with --rss-trigger")
        if self.max_size is not None and self.max_size < 0:
            raise LeadlineError("--max-size must be 0 (no limit) or a size such as 500M or 2G")


@dataclass
class TraceResult:
    path: Path
    events: int
    recorded: int
    bytes_written: int
    write_error: str | None
    dropped_chunks: int
    seconds: float
    lost: int = 0  # recorded events that never reached the file (size limit, failed write)
    # Why and when recording stopped before the program ended (END's stopped_early), or None.
    stopped_early: dict[str, Any] | None = None


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


_monitoring_used_before = False
# sys.monitoring tool ids leadline takes, in order: 3 and 4 have no assigned role, while the
# program's own tools ask for theirs by role: debuggers 0, coverage 1, profilers 2 (cProfile
# on 3.12+ refuses to start when 2 is taken), the optimizer 5.
TOOL_IDS = (4, 3, 2)


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
        self._bootstrap: Any = None  # 3.10/3.11: what new threads get (threading.setprofile)
        self.result: TraceResult | None = None

    def _options(self) -> dict[str, Any]:
        return {
            **asdict(self.options),
            "max_size": self.max_bytes,
            "coarse_time": self.options.coarse,
        }

    def _size_limit(self, fd: int) -> tuple[int, str]:
        return size_limit(fd, self.options.max_size)

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
            rss_period_us=o.rss_period_us if o.memory else 0,
            filter=make_filter(o.include, o.exclude),
            exclude_prefix=PACKAGE_DIR,
            disable=disable,
            max_bytes=self.max_bytes,
            coarse_time=o.coarse,
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
            tool = next((t for t in TOOL_IDS if mon.get_tool(t) is None), None)
            if tool is None:
                used = ", ".join(f"{t}: {mon.get_tool(t)}" for t in sorted(TOOL_IDS))
                raise LeadlineError(f"no free sys.monitoring tool id for leadline ({used})")
            mon.use_tool_id(tool, "leadline")
            ev = mon.events
            hooks = {
                ev.PY_START: HOOK["ENTER_LOCAL"],
                ev.PY_RESUME: HOOK["ENTER_LOCAL"],
                ev.PY_THROW: HOOK["ENTER"],
                ev.PY_RETURN: HOOK["EXIT_LOCAL"],
                ev.PY_YIELD: HOOK["EXIT_LOCAL"],
                ev.PY_UNWIND: HOOK["EXIT"],
            }
            if self.options.c_calls:
                hooks.update(
                    {
                        ev.CALL: HOOK["CALL"],
                        ev.C_RETURN: HOOK["C_RETURN"],
                        ev.C_RAISE: HOOK["C_RAISE"],
                    }
                )
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
            other = threading.getprofile()
            if other is not None:
                # Threads started later would get the program's function, or lose it.
                raise LeadlineError(
                    f"another profiler is active for new threads ({other!r}, set with "
                    "threading.setprofile); stop it before starting leadline"
                )
            try:
                s.install_profile()
            except RuntimeError as e:
                raise LeadlineError(str(e)) from None
            self._bootstrap = s.hook(HOOK["BOOTSTRAP"])
            threading.setprofile(self._bootstrap)

    def _fork_begins(self) -> None:
        self._native.fork_held(True)

    def _fork_returned(self) -> None:
        self._native.fork_held(False)

    def _uninstall(self) -> None:
        if _native.MONITORING and self._tool is not None:
            mon = sys.monitoring
            mon.set_events(self._tool, 0)
            for event in self._events:
                mon.register_callback(self._tool, event, None)
            mon.free_tool_id(self._tool)
            self._tool = None
        elif not _native.MONITORING:
            # Only leadline's own: a function the program set since stays for its threads.  Read
            # as a module attribute: a call of threading.getprofile() would be traced.
            if vars(threading).get("_profile_hook") is self._bootstrap:
                threading.setprofile(None)
            self._bootstrap = None

    def _end_fields(self, counters: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
        # recorded: the events in chunks that reached the file; lost: those in chunks that
        # did not (a size limit or a failed write stopped the writer before them).
        return {
            "events": counters["events"],
            "recorded": written["events_written"],
            "lost": written["events_lost"],
            # when the events began to read the RSS sampler's clock (None: they never did)
            "coarse_from": counters["coarse_from"] or None,
        }

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
            recorded=rec.written["events_written"],
            bytes_written=rec.bytes_written,
            write_error=rec.write_error,
            dropped_chunks=rec.dropped_chunks,
            seconds=rec.seconds,
            lost=rec.written["events_lost"],
            stopped_early=rec.stopped_early,
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
    max_size: int | str | None = None,
    coarse_time: bool | None = None,
    exact_time: bool = False,
) -> Tracer:
    """Trace every call (and its memory) inside a ``with`` block::

    with leadline.trace("run.lead", rss_trigger=4096, max_size="500M"):
        work()

    `max_size`: bytes or a size such as "500M" at which recording stops (the block runs on);
    None for the default (1 GiB, or half the free disk space when less), 0 for no limit.
    Events are timed by the 1 ms clock of the RSS sampler: a function's total is an unbiased
    estimate, one call is timed to within a millisecond.  `exact_time=True` times each event by
    the CPU's time-stamp counter instead, at its cost (docs/trace.md, "Time"); `coarse_time` is
    the same choice the other way round (True: the sampler's clock).
    """
    if exact_time and coarse_time:
        raise LeadlineError("exact_time and coarse_time are the two clocks: choose one")
    try:
        limit = parse_size(max_size)
    except ValueError as e:
        raise LeadlineError(f"max_size: {e}") from None
    opts = TraceOptions(
        c_calls=c_calls,
        rss_trigger=rss_trigger,
        previous=previous,
        include=tuple(include),
        exclude=tuple(exclude),
        max_depth=max_depth,
        exact_rss=exact_rss,
        heap=heap,
        max_size=limit,
        coarse_time=False if exact_time else coarse_time,
    )
    return Tracer(path, opts)


P = ParamSpec("P")
R = TypeVar("R")


def traced(
    path: str | os.PathLike[str] | None = None, **options: Any
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: trace each call of the function into `path` (overwritten per call).  The
    options are `trace()`'s; for a function that runs for milliseconds, `exact_time=True` times
    each call inside it (the default clock moves once a millisecond)."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            target = path if path is not None else default_output(fn.__name__)
            with trace(target, **options):
                return fn(*args, **kwargs)

        return inner

    return wrap
