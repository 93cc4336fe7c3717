"""Sampling profiles: `leadline.profile()`, `leadline run` and `leadline attach`.

The native Sampler reads the stacks of every thread of a process at a set rate from its own
thread, without the GIL (``_native/sampler.c``).  In-process (``profile()``, ``run``) it reads
its own process; ``attach`` points it at another one.  Either way the capture has the same
SAMPLES records (docs/format.md), read by ``sampling.load_profile``.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import _native
from ..capture.schema import SAMPLER_COUNTERS
from ..errors import LeadlineError
from .locals import local_reprs
from .recorder import (
    CaptureFile,
    Recorder,
    capture_end,
    capture_meta,
    default_output,
    early_stop,
    open_capture,
    stop_warning,
)

MAX_RATE = 20_000
MAX_DEPTH = 1_000_000
# What a sample stands for: wall (every thread at every tick), cpu (threads that ran, weighted
# by the CPU time they used), gil (every thread at every tick, kept only while it held the GIL),
# exception (the same, kept only while it raised or handled an exception).
SAMPLE_MODES = ("wall", "cpu", "gil", "exception")
# What a thread running an asyncio task shows: the task's stack, its name at the root and the
# event loop's frames below it left out (running); the same, and each tick the stacks of the
# tasks waiting on its loop (all: 3.14+, wall mode); or the frames as they are (off).
ASYNC_MODES = ("running", "all", "off")
# The first version whose tasks waiting can be read (--async all).
ASYNC_ALL_MINOR = 14


def async_warning(minor: int, o: ProfileOptions) -> str | None:
    """The one line that says what --async all cannot do for this target, if anything."""
    if o.async_tasks != "all":
        return None
    if minor < ASYNC_ALL_MINOR:
        shown = "no task stacks" if minor < 11 else "running tasks only"
        return (
            f"leadline: warning: --async all reads waiting tasks on Python 3.{ASYNC_ALL_MINOR}+; "
            f"3.{minor} shows {shown}"
        )
    if o.mode == "cpu":
        return "leadline: warning: --async all: waiting tasks use no CPU: --mode cpu has none"
    return None


@dataclass(frozen=True)
class ProfileOptions:
    rate_hz: float = 100.0
    mode: str = "wall"  # one of SAMPLE_MODES
    memory: bool = False
    subprocesses: bool = False
    max_depth: int = 8192
    async_tasks: str = "running"  # one of ASYNC_MODES
    ticks: int = 0  # ticks to take, each read written as read (a snapshot); 0: until stopped
    locals: int = 0  # a snapshot: the innermost frames of each thread whose variables are read
    native: bool = False  # each thread's C frames too (dump, attach, run --native)

    def validate(self) -> None:
        if not 1 <= self.rate_hz <= MAX_RATE:
            raise LeadlineError(f"--rate must be between 1 and {MAX_RATE} Hz")
        if self.mode not in SAMPLE_MODES:
            raise LeadlineError(f"--mode must be one of {', '.join(SAMPLE_MODES)}")
        if self.async_tasks not in ASYNC_MODES:
            raise LeadlineError(f"--async must be one of {', '.join(ASYNC_MODES)}")
        if not 1 <= self.max_depth <= MAX_DEPTH:
            raise LeadlineError(f"--max-depth must be between 1 and {MAX_DEPTH:,}")
        if self.native:
            # libdw would ask a debuginfod server over the network for each library's debug
            # file where this names one: a sampler must never wait on the network (nor a
            # thread stay stopped for it).  Local debug files are still read.
            os.environ.pop("DEBUGINFOD_URLS", None)
            why = _native.native_unavailable()
            if why is not None:
                raise LeadlineError(f"--native cannot unwind C stacks: {why}")


@dataclass
class ProfileResult:
    path: Path
    ticks: int
    samples: int
    missed: int
    torn: int
    bytes_written: int
    write_error: str | None
    seconds: float
    sampler_cpu_ns: int
    deferred: int = 0
    pid: int | None = None  # attach: the process sampled
    exited_after_s: float | None = None  # attach: when it was found gone, from the start
    samples_lost: int = 0  # samples taken that never reached the file (a failed write)
    # Why and when recording stopped before the program ended (END's stopped_early), or None.
    stopped_early: dict[str, Any] | None = None


def _sampler(fd: int, meta: bytes, pid: int, o: ProfileOptions) -> Any:
    return _native.Sampler(
        fd,
        meta,
        pid,
        float(o.rate_hz),
        cpu=o.mode == "cpu",
        memory=o.memory,
        subprocesses=o.subprocesses,
        max_depth=o.max_depth,
        tasks={"off": 0, "running": 1, "all": 2}[o.async_tasks],
        ticks=o.ticks,
        locals=o.locals,
        native=o.native,
    )


def _end_fields(counters: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
    # samples: those that reached the file; samples_lost: those that did not.
    fields = {
        **{k: counters[k] for k in SAMPLER_COUNTERS},
        "samples": written["samples_written"],
        "samples_lost": written["samples_lost"],
    }
    if counters.get("exit_t"):  # attach: when the process was found gone
        fields["exit_t"] = counters["exit_t"]
    if counters.get("gil_reads"):
        fields["gil_reads"] = counters["gil_reads"]
    if counters.get("locals"):  # a snapshot taken with dump --locals
        fields["locals"] = local_reprs(counters["locals"])
        fields["locals_held_ns"] = counters["locals_held_ns"]
    if counters.get("native"):  # --native: threads stopped (or parked) to unwind
        fields["native_held_ns"] = counters["locals_held_ns"]
        fields["native_stops"] = counters["native_stops"]
        fields["native_unread"] = counters["native_unread"]
        fields["native_unanswered"] = counters["native_unanswered"]  # run --native (1.10)
    return fields


def _result(
    path: Path,
    counters: dict[str, Any],
    written: dict[str, Any],
    stop: dict[str, Any] | None,
    secs: float,
) -> ProfileResult:
    return ProfileResult(
        path=path,
        ticks=counters["ticks"],
        samples=written["samples_written"],
        missed=counters["missed"],
        torn=counters["torn"],
        bytes_written=written["bytes_written"],
        write_error=written["write_error"],
        seconds=secs,
        sampler_cpu_ns=counters["sampler_cpu_ns"],
        deferred=counters["deferred"],
        samples_lost=written["samples_lost"],
        stopped_early=stop,
    )


class Profiler(Recorder):
    """Samples this process's threads.  Use `leadline.profile(...)` or `leadline run`."""

    mode = "sample"
    noun = "samples"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        options: ProfileOptions | None = None,
        argv: list[str] | None = None,
    ) -> None:
        super().__init__(path, argv)
        self.options = options or ProfileOptions()
        self.options.validate()
        self.result: ProfileResult | None = None

    def _options(self) -> dict[str, Any]:
        return asdict(self.options)

    def _begin(self, fd: int, meta: bytes) -> Any:
        warning = async_warning(sys.version_info[1], self.options)
        if warning:
            print(warning, file=sys.stderr)
        return _sampler(fd, meta, os.getpid(), self.options)

    def _end_fields(self, counters: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
        return _end_fields(counters, written)

    def _before_fork(self) -> None:
        self._native.before_fork()

    def _after_fork_in_parent(self) -> None:
        if sys.version_info < (3, 13):
            self._native.resume()
        elif not self._in_fork:
            # 3.13 counts the process's threads for its multi-threaded-fork warning after
            # this hook: a fork that did not come through the os.fork wrapper (Recorder._fork)
            # restarts the sampler from a pending call of the main thread, 1 ms later.
            self._native.resume(later=True)

    def _fork_returned(self) -> None:
        self._native.resume()

    def stop(self) -> ProfileResult:
        if self.result is None:
            rec = self._stop()
            self.result = _result(
                self.path, rec.counters, rec.written, rec.stopped_early, rec.seconds
            )
        return self.result


def profile(
    path: str | os.PathLike[str] | None = None,
    *,
    rate: float = 100.0,
    mode: str = "wall",
    memory: bool = False,
) -> Profiler:
    """Sample every thread's stack inside a ``with`` block::

    with leadline.profile("run.lead", rate=1000):
        work()
    """
    return Profiler(path, ProfileOptions(rate_hz=rate, mode=mode, memory=memory))


def inspect_process(pid: int) -> dict[str, Any]:
    """The interpreter of another process (`_native.inspect_process`); a LeadlineError with its
    one-line reason when it cannot be read or is not one leadline supports."""
    try:
        return _native.inspect_process(pid)
    except (ProcessLookupError, PermissionError, ValueError) as e:
        raise LeadlineError(str(e)) from None


def attach(
    pid: int,
    path: str | os.PathLike[str] | None,
    options: ProfileOptions,
    duration: float | None,
    *,
    fd: int | None = None,
    until: threading.Event | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> ProfileResult:
    """Sample another, running process until it exits, `duration` passes, `until` is set, or
    Ctrl-C.  The capture goes to `path`, or into `fd` (a pipe, which attach closes in every
    case; `path` then only names it in messages).  `progress(ticks, samples, seconds)` is
    called as it samples, every 50 ms.

    A process that ends while it is sampled (however busy it was, and however starved of CPU
    the sampler) ends the capture cleanly: the samples taken until then are kept, and the
    result says when it was found gone.  Only a process that cannot be read when attach first
    looks at it is an error."""
    try:
        options.validate()
        info = inspect_process(pid)
    except LeadlineError:
        if fd is not None:
            os.close(fd)
        raise
    if info["warning"]:
        print(f"leadline: warning: {info['warning']}", file=sys.stderr)
    warning = async_warning(int(info["minor"]), options)
    if warning:
        print(warning, file=sys.stderr)
    argv = _cmdline(pid)
    out = Path(path) if path is not None else default_output(Path(argv[0]).name or "pid", "attach")
    output = open_capture(out) if fd is None else CaptureFile(fd)
    fd = output.fd
    meta = capture_meta(
        "sample",
        argv,
        asdict(options),
        python_version=f"3.{info['minor']}",
        implementation="cpython",
        pid=pid,
        attached=True,
        cwd=_target_cwd(pid),
    )
    try:
        sampler = _sampler(fd, json.dumps(meta).encode(), pid, options)
    except (ProcessLookupError, PermissionError, ValueError, RuntimeError) as e:
        # It was there a moment ago, and now cannot be read (another program now runs in it,
        # say; one that has ended gives a sampler with nothing to sample): no capture.
        output.discard()
        _remove_if_empty(out)
        raise LeadlineError(str(e)) from None
    output.place()
    out = output.path or out
    started = time.perf_counter()
    deadline = started + duration if duration else None
    try:
        while sampler.running() and (deadline is None or time.perf_counter() < deadline):
            if until is not None and until.wait(0.05):
                break
            if until is None:
                time.sleep(0.05)
            if progress is not None:
                ticks, samples = sampler.progress()
                progress(ticks, samples, time.perf_counter() - started)
    except KeyboardInterrupt:
        pass
    counters = sampler.finish()

    # The names the program gave its threads, read from threading._active once sampling
    # stopped (none if the process has ended): before 3.14 the system has none of them, from
    # 3.14 on their first 15 bytes.
    names = {str(ident): name for p, ident, name in counters["thread_names"] if p == pid}

    def make_end(written: dict[str, Any]) -> bytes:
        stop = early_stop(written)
        fields = _end_fields(counters, written)
        if names:
            fields["threads"] = names
        return capture_end(counters, written, stop, **fields)

    written = sampler.close(make_end)
    secs = time.perf_counter() - started
    stop = early_stop(written)
    tick_s = counters["tick_ns"] / 1e9
    at = (stop["t"] - meta["t_start"]) * tick_s if stop else 0.0
    total = (counters["t_end"] - meta["t_start"]) * tick_s
    warning = stop_warning(out, written, stop, max(at, 0.0), total, "samples")
    if warning:
        print(warning, file=sys.stderr)
    result = _result(out, counters, written, stop, secs)
    result.pid = pid
    if counters["exit_t"]:
        result.exited_after_s = max(counters["exit_t"] - meta["t_start"], 0) * tick_s
    return result


def _remove_if_empty(path: Path) -> None:
    """Remove a capture file that was created and never written (not a device or a pipe)."""
    with contextlib.suppress(OSError):
        st = path.stat()
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            path.unlink()


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return [str(pid)]
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a] or [str(pid)]


def _target_cwd(pid: int) -> str | None:
    """The folder process `pid` runs in (None if it cannot be read: reports then show its own
    files whole)."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
