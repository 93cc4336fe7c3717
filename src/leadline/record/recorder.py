"""What every in-process recording shares (a trace, a sampling profile, a probe capture): the
capture file, its META and END chunks, thread names, os._exit and fork."""

from __future__ import annotations

import contextlib
import errno
import json
import operator
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any, TypeVar

from .. import __version__, _native
from ..capture.stop import (
    LIMIT_DEFAULT,
    LIMIT_FREE_SPACE,
    LIMIT_GIVEN,
    SIZE_LIMIT,
    describe,
)
from ..errors import LeadlineError
from .sources import source_hashes

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
# The package's own folder: frames there are leadline's, not the program's.
PACKAGE_DIR = str(Path(__file__).resolve().parent.parent) + os.sep


def default_output(program: str, mode: str = "trace") -> Path:
    """`<program>-<mode>-<date>-<pid>.lead` in the current directory, as other profilers do."""
    stem = Path(program).stem or "python"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(f"{stem}-{mode}-{stamp}-{os.getpid()}.lead")


def thread_names() -> dict[str, str]:
    return {str(t.ident): t.name for t in threading.enumerate() if t.ident is not None}


def thread_tids() -> dict[str, str]:
    """Native thread id -> name: marks carry the native id."""
    return {str(t.native_id): t.name for t in threading.enumerate() if t.native_id is not None}


_recording: list[Recorder] = []  # what records in this process, for the fork handlers
# The code of the functions leadline puts in the program's way (os._exit, Thread.start): their
# frames are left out of the traceback the program's sys.excepthook receives.
_WRAPPER_CODES: set[CodeType] = set()


def wrapper_codes() -> frozenset[CodeType]:
    return frozenset(_WRAPPER_CODES)


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Every signal blocked in this thread while it starts a Python thread of leadline's own,
    which inherits the mask: a signal sent to the process must reach one of the program's
    threads (the native ones block them all: ll_thread_start in _native/capture.c).  A signal
    that comes meanwhile waits, and is delivered when the mask is restored."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


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
    """The META chunk of a capture recorded now (docs/format.md); `extra` overrides (`cwd=None`:
    the folder the program runs in is not known)."""
    meta = {
        "format": _native.FORMAT_MAJOR,
        "mode": mode,
        "leadline_version": __version__,
        "argv": argv,
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "implementation": sys.implementation.name,
        "pid": os.getpid(),
        "host": os.uname().nodename,  # what socket.gethostname() gives, without loading sockets
        "start_unix_ns": time.time_ns(),
        "t_start": _native.ticks(),
        "tick_ns": _native.tick_ns(),
        "clock": _native.CLOCK,
        "page_size": PAGE_SIZE,
        "package_dir": PACKAGE_DIR,
        "cwd": _cwd(),
        "options": options,
        **extra,
    }
    if meta["cwd"] is None:
        del meta["cwd"]
    return meta


def _cwd() -> str | None:
    """This process's working folder (reports show the program's files relative to it)."""
    try:
        return os.getcwd()
    except OSError:  # removed since
        return None


class CaptureFile:
    """The file a recording writes its capture to, as the native writer takes it over (`fd`).

    A new path, or an earlier capture at the path (a plain file of this user's, with no other
    name, no extended attributes such as an ACL, and a group the new file can be given), is not
    written in place: the recording writes a new file beside it, with the earlier capture's
    permissions and group, which takes its name once the recording has started (place()), and
    is removed if it did not start (discard()), so that a recording that cannot start leaves
    the path as it was.  A file emptied by truncation and written again is written out to disk
    when it is closed (ext4's guard for programs that rewrite a file without fsync), which held
    the end of a traced program for 60-80 ms per 180 MB of capture; and a report still reading
    the earlier capture reads it whole.  Anything else (a symbolic link, a file with hard
    links, a device, a pipe) is written in place, as `open(path, "w")` would."""

    def __init__(self, fd: int, path: Path | None = None, new: str | None = None) -> None:
        self.fd = fd
        self.path = path
        self._new = new  # the new file's name until it takes the path's place

    def place(self) -> None:
        """The recording has started: its file takes the path's name (a no-op when it has)."""
        new, self._new = self._new, None
        if new is None or self.path is None:
            return
        try:
            os.replace(new, self.path)
        except OSError as e:
            # Made a folder meanwhile, say: the capture keeps the name it has.
            print(
                f"leadline: warning: cannot put the capture in place of {self.path} "
                f"({e.strerror}); it is {new}",
                file=sys.stderr,
            )
            self.path = Path(new)

    def discard(self) -> None:
        """The recording did not start: the descriptor is closed (the native side may have
        closed it already), a new file goes, the earlier capture stays."""
        with contextlib.suppress(OSError):
            os.close(self.fd)
        new, self._new = self._new, None
        if new is not None:
            with contextlib.suppress(OSError):
                os.unlink(new)


def open_capture(path: Path) -> CaptureFile:
    """The capture file for a recording into `path` (see CaptureFile)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    replacing = _replacement(path, flags)
    if replacing is not None:
        return replacing
    try:
        return CaptureFile(os.open(path, flags | os.O_TRUNC, 0o644), path)
    except OSError as e:
        raise LeadlineError(f"cannot write {path}: {e.strerror}") from None


def _replacement(path: Path, flags: int) -> CaptureFile | None:
    """A new file to take the name `path` (with the permissions of the earlier capture there,
    if any) once the recording has started; None to write in place (see CaptureFile)."""
    new = str(path.parent / f".{path.name}.{os.getpid()}.new")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:  # nothing there yet: the new file gets the name only if the recording starts
            return CaptureFile(os.open(new, flags | os.O_EXCL, 0o644), path, new)
        except OSError:
            return None
    except OSError:
        return None
    try:
        if os.listxattr(path, follow_symlinks=False):
            return None  # an ACL, a security label: what a new file would not have
    except OSError as e:
        if e.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):  # (a file system without them)
            return None
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
        return None
    if os.geteuid() != 0 and st.st_gid not in (os.getegid(), *os.getgroups()):
        return None  # a group the new file could not be given
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CLOEXEC))  # writable, as emptying it needs
        fd = os.open(new, flags | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        os.fchown(fd, -1, st.st_gid)
        os.fchmod(fd, stat.S_IMODE(st.st_mode))  # after fchown, which clears set-group-id
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(new)
        return None
    return CaptureFile(fd, path, new)


# The default size limit of a capture: at 5-8 bytes an event, 130-200 million events, past the
# 100 million that a report summarises in a minute; a call-dense program writes it in about 25 s.
DEFAULT_MAX_SIZE = 1 << 30


def size_limit(fd: int, requested: int | None) -> tuple[int, str]:
    """The size limit in bytes (0: none) of a capture written to `fd`, and where it comes from
    (capture.stop.LIMIT_*).  `requested`: None for the default, 0 for none, else bytes.

    The default is DEFAULT_MAX_SIZE, or half the free space of the file's file system when that
    is less, so that a trace never takes the last of a disk the program needs.  A pipe or a
    device (/dev/null) stores nothing, and gets no default limit."""
    if requested is not None:
        return requested, LIMIT_GIVEN
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0, LIMIT_DEFAULT
        fs = os.fstatvfs(fd)
    except OSError:
        return DEFAULT_MAX_SIZE, LIMIT_DEFAULT
    half_free = fs.f_bavail * fs.f_frsize // 2
    if half_free < DEFAULT_MAX_SIZE:
        return max(half_free, 1), LIMIT_FREE_SPACE
    return DEFAULT_MAX_SIZE, LIMIT_DEFAULT


def early_stop(written: dict[str, Any], limit_from: str = LIMIT_GIVEN) -> dict[str, Any] | None:
    """END's ``stopped_early`` (docs/format.md) from the native writer's figures, or None when
    recording ran to the end."""
    reason = written.get("stopped")
    if reason is None:
        return None
    stop: dict[str, Any] = {"reason": reason, "t": written["t_stopped"]}
    if reason == SIZE_LIMIT:
        stop.update(max_size=written["max_bytes"], limit_from=limit_from)
    if written.get("write_error"):
        stop["error"] = written["write_error"]
    return stop


def capture_end(
    counters: dict[str, Any],
    written: dict[str, Any],
    stop: dict[str, Any] | None,
    **fields: Any,
) -> bytes:
    """The END chunk (docs/format.md) of a recording whose native side returned `counters`
    (when it stopped) and `written` (what its writer wrote: see ll_writer_close_py)."""
    end = {"t_end": counters["t_end"], "tick_ns": counters["tick_ns"], **fields}
    end["stopped_early"] = stop
    end["write_error"] = written["write_error"]
    end["dropped_chunks"] = written["dropped_chunks"]
    end["stop_unix_ns"] = time.time_ns()
    return json.dumps(end).encode()


def stop_warning(
    path: Path,
    written: dict[str, Any],
    stop: dict[str, Any] | None,
    seconds_in: float,
    seconds: float,
    noun: str,
) -> str | None:
    """The one line printed on stderr when the program ends, if recording stopped early or a
    write failed; None otherwise."""
    if stop is None:
        if not written["write_error"]:
            return None
        return (
            f"leadline: warning: writing {path} failed ({written['write_error']}); "
            "the capture holds what was written before"
        )
    kept = int(written.get(f"{noun}_written", 0))
    lost = int(written.get(f"{noun}_lost", 0))
    text = (
        f"leadline: warning: recording stopped early, at {seconds_in:.2f} s of {seconds:.2f} s: "
        f"{describe(stop)}; {path} holds the {kept:,} {noun} written before"
    )
    if lost:
        text += f", {lost:,} more never reached it"
    if not written["end_written"]:
        text += " (nor did its END chunk)"
    return text


@dataclass
class RecordResult:
    path: Path
    bytes_written: int
    write_error: str | None
    dropped_chunks: int
    seconds: float
    counters: dict[str, Any]
    written: dict[str, Any]  # the writer's figures: what reached the file, what was lost
    stopped_early: dict[str, Any] | None  # END's stopped_early


RecorderT = TypeVar("RecorderT", bound="Recorder")


class Recorder:
    """What every in-process recording shares: the capture file, META and END, thread names,
    os._exit, fork.  Subclasses create the native recorder and turn its counters into a result."""

    mode: str = "trace"
    noun: str = "events"  # what the recording's data chunks hold (the writer counts them)
    # Say on stderr when recording stopped early (a caller that handles a capture cut short
    # itself, the pytest plugin's work record, turns it off).
    warn: bool = True
    # END keeps a hash of each source file (record/sources.py), for reports that show source
    keep_sources: bool = True

    def __init__(self, path: str | os.PathLike[str] | None, argv: list[str] | None) -> None:
        self.argv = list(sys.argv if argv is None else argv)
        self.path = (
            Path(path) if path is not None else default_output(self.argv[0] or "python", self.mode)
        )
        self._native: Any = None
        self._main_file: str | None = None
        self._started = 0.0
        self._thread_names: dict[str, str] = {}
        self._thread_tids: dict[str, str] = {}
        self._real_exit: Callable[[int], Any] | None = None  # os._exit while we wrap it
        self._real_thread_start: Callable[[threading.Thread], None] | None = None
        self._real_fork: Callable[[], int] | None = None  # os.fork once we wrapped it (3.13+)
        self._in_fork = 0  # forks under way through the wrapper (threads, after-fork hooks)
        self.record: RecordResult | None = None
        self.pid = 0  # the process that records (a forked child does not)
        self.max_bytes = 0  # the capture's size limit (0: none), set when it starts
        self._limit_from = LIMIT_GIVEN
        self._t_start = 0

    # -- what subclasses provide ------------------------------------------------
    def _options(self) -> dict[str, Any]:
        raise NotImplementedError

    def _begin(self, fd: int, meta: bytes) -> Any:
        """Create and start the native recorder (it owns `fd` from then on)."""
        raise NotImplementedError

    def _end_fields(self, counters: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
        """END's own fields of this kind of recording; `written` is the writer's figures."""
        return {}

    def _size_limit(self, fd: int) -> tuple[int, str]:
        """The capture's size limit (see size_limit); none unless a subclass has one."""
        return 0, LIMIT_GIVEN

    def _open_output(self) -> CaptureFile:
        """The file the native recorder writes the capture to."""
        return open_capture(self.path)

    def _before_fork(self) -> None:
        pass

    def _after_fork_in_parent(self) -> None:
        pass

    def _fork_begins(self) -> None:
        """os.fork is about to run, called through the wrapper (_fork)."""

    def _fork_returned(self) -> None:
        """os.fork has returned in the parent (or failed), through the wrapper: Python has
        counted the process's threads, and the recorder's own may start again."""

    def _finished(self) -> None:
        """Called after the capture is closed, in the recording process."""

    # -- lifecycle ------------------------------------------------------------
    def _start(self) -> None:
        if self._native is not None:
            raise LeadlineError(f"this {self.mode} is already running")
        output = self._open_output()
        try:
            self._native = self._begin_recording(output.fd)
        except BaseException as e:
            output.discard()
            if isinstance(e, (RuntimeError, OSError, ValueError)):
                raise LeadlineError(str(e)) from None
            raise
        output.place()
        if output.path is not None:
            self.path = output.path
        self._started = time.perf_counter()
        self._real_exit = os._exit
        os._exit = self._exit_wrapper  # type: ignore[assignment]
        self._watch_thread_names()
        if sys.version_info >= (3, 13):
            self._real_fork = os.fork
            os.fork = self._fork
        self.pid = os.getpid()
        _recording.append(self)

    def _begin_recording(self, fd: int) -> Any:
        self.max_bytes, self._limit_from = self._size_limit(fd)
        # The program's file, while __main__ still names it (a script's loses __file__ once it
        # has run, as python's does): its hash goes to END with the modules'.
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        self._main_file = main_file if isinstance(main_file, str) else None
        meta = capture_meta(self.mode, self.argv, self._options())
        self._t_start = meta["t_start"]
        self._thread_names = thread_names()  # before the hooks, so that it is not traced
        self._thread_tids = thread_tids()
        return self._begin(fd, json.dumps(meta).encode())

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
        _WRAPPER_CODES.add(start.__code__)
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
        if self._real_fork is not None and os.fork == self._fork:
            os.fork = self._real_fork  # (kept: the wrapper may be held elsewhere, and forks)
        self._uninstall()
        counters = self._native.finish()
        names = {**self._thread_names, **thread_names()}
        tids = {**self._thread_tids, **thread_tids()}
        main = [self._main_file] if self._main_file else []
        sources = source_hashes(main) if self.keep_sources else {}

        def make_end(written: dict[str, Any]) -> bytes:
            # Called again if END had to take the place of the last chunk (a full disk).
            stop = early_stop(written, self._limit_from)
            fields = self._end_fields(counters, written)
            # A capture cut short (a size limit, a failed write) must fit END where the last
            # chunk was: the hashes, tens of KiB for a large program, are left out.
            kept = sources if stop is None and not written["write_error"] else {}
            return capture_end(
                counters, written, stop, **fields, threads=names, thread_tids=tids, sources=kept
            )

        written = self._native.close(make_end)
        stop = early_stop(written, self._limit_from)
        self.record = RecordResult(
            path=self.path,
            bytes_written=written["bytes_written"],
            write_error=written["write_error"],
            dropped_chunks=written["dropped_chunks"],
            seconds=time.perf_counter() - self._started,
            counters=counters,
            written=written,
            stopped_early=stop,
        )
        if os.getpid() == self.pid:
            self._finished()
            tick_s = counters["tick_ns"] / 1e9
            at = (stop["t"] - self._t_start) * tick_s if stop else 0.0
            total = (counters["t_end"] - self._t_start) * tick_s
            warning = stop_warning(self.path, written, stop, max(at, 0.0), total, self.noun)
            if warning and self.warn:
                print(warning, file=sys.stderr)
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

    def _fork(self) -> int:
        """os.fork while recording (3.13+).  The recorder's threads are stopped for a fork and
        started again in the parent; 3.13 counts the process's threads for its multi-threaded
        fork warning after the after-fork hooks have run (their events among them), so they
        start again here, once os.fork has returned (a fork that does not come through here,
        an extension's, restarts them 1 ms after it: the native recorders' fallback).  Forks
        under way at once (two threads', or one from an after-fork hook) hold them until the
        last has returned.  Once the recorder has stopped (a program that kept the wrapper:
        `from os import fork`, a forked child's second fork), it is os.fork."""
        real = self._real_fork
        assert real is not None
        if self not in _recording:
            return real()
        pid = -1
        self._in_fork += 1
        try:
            if self._in_fork == 1:
                self._fork_begins()
            pid = real()
        finally:
            self._in_fork -= 1
            if pid != 0 and not self._in_fork and self._native is not None:
                self._fork_returned()
        return pid

    def _exit_wrapper(self, status: int) -> None:
        """os._exit skips every cleanup: finish the capture first, then exit as asked.  A
        status os._exit refuses (not an integer) raises its TypeError with the recording still
        running, since the program goes on."""
        real = self._real_exit
        assert real is not None
        try:
            operator.index(status)
        except TypeError:
            real(status)
        try:
            self.stop()
        except BaseException:  # the program asked to exit now; nothing may stop that
            pass
        real(status)


_WRAPPER_CODES.add(Recorder._exit_wrapper.__code__)
_WRAPPER_CODES.add(Recorder._fork.__code__)
