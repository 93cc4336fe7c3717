"""`leadline top [PID | [--] program ...]`: a live view of what a process is doing now.

The process (or the program, started as `python` would start it, in a process of its own) is
sampled from outside as `attach` samples it: its capture goes into a pipe, which a reader thread
folds as it arrives (capture.reader.CaptureStream) and, with `-o`, also keeps as a capture file.
Each refresh, the samples that arrived are folded into the tally (analyse/live.py) and drawn
(render/top.py): live, with keys, on a terminal; as plain text blocks otherwise."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import math
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import time
import tty
from collections.abc import Iterator
from typing import IO, Any

from ..analyse.paths import base_of
from ..errors import LeadlineError
from ..record.profiler import ProfileOptions, ProfileResult, attach
from ._sampling import add_stack_arguments
from ._target import add_target_arguments
from .attach import _pid


def register(sub: Any) -> None:
    p = sub.add_parser(
        "top",
        help="a live view of the hottest functions of a running process or of a program",
        description="Sample a running process (PID) or a program (run as python runs it, in a "
        "process of its own) and show its hottest functions live: own and total share over "
        "the last --window seconds and since the start, for all threads or one.  Keys: q "
        "quit, p pause, s sort, c cpu/wall, t thread.  When the output is not a terminal, a "
        "plain table is printed every --interval seconds.  Needs ptrace permission over a "
        "process given by PID.",
    )
    p.add_argument("-p", "--pid", type=_pid, default=None, help="the process id (or give it alone)")
    p.add_argument(
        "-r", "--rate", type=float, default=100.0, metavar="HZ", help="samples per second"
    )
    p.add_argument(
        "--window", type=float, default=5.0, metavar="S", help="seconds the window holds (5)"
    )
    p.add_argument(
        "--interval",
        type=float,
        default=None,
        metavar="S",
        help="seconds between refreshes (1 on a terminal, 5 otherwise)",
    )
    p.add_argument("--view", choices=("cpu", "wall"), default="cpu", help="the view to start in")
    p.add_argument("-n", "--limit", type=int, default=None, help="functions shown (plain output)")
    p.add_argument("-d", "--duration", type=float, default=None, metavar="S")
    p.add_argument("-o", "--output", help="on exit, keep what was sampled as this capture file")
    add_stack_arguments(p)
    add_target_arguments(p)
    p.set_defaults(func=run, top_parser=p)


def _python_args(args: argparse.Namespace) -> list[str] | None:
    """The program as python's arguments, or None for none (a process id instead)."""
    if args.module:
        return ["-m", *args.module]
    if args.code:
        return ["-c", *args.code]
    program = list(args.program or [])
    if program and program[0] == "--":
        program = program[1:]
    return program or None


def _check(args: argparse.Namespace) -> tuple[int | None, list[str] | None]:
    program = args.program or []
    if not (args.module or args.code) and program and program[0].isdigit():
        # A process id, then top's own options (the program's place takes what follows it).
        args.top_parser.parse_args(program[1:], namespace=args)
        if args.program or args.module or args.code:
            raise LeadlineError("give a process id or a program to run, not both")
        if args.pid is not None:
            raise LeadlineError("give one process id")
        args.pid = int(program[0])
    python_args = _python_args(args)
    pid = args.pid
    if (pid is None) == (python_args is None):
        raise LeadlineError(
            "give a process id or a program to run, not both"
            if pid
            else "give a process id (leadline top PID) or a program to run"
        )
    if pid is not None and (pid <= 0 or pid == os.getpid()):
        raise LeadlineError(f"cannot sample process {pid}")
    for flag, value in (
        ("--window", args.window),
        ("--interval", args.interval),
        ("--duration", args.duration),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise LeadlineError(f"{flag} must be a positive number of seconds")
    if args.limit is not None and args.limit < 1:
        raise LeadlineError("--limit must be at least 1")
    return pid, python_args


class _Session:
    """The sampler (a thread running attach), the reader of its pipe, and the tally."""

    def __init__(
        self,
        pid: int,
        options: ProfileOptions,
        duration: float | None,
        window: float,
        save: IO[bytes] | None,
    ) -> None:
        from ..analyse.live import LiveTally
        from ..capture.reader import CaptureStream

        self.pid = pid
        self.rate = options.rate_hz
        self.stream = CaptureStream("<top>")
        self.tally = LiveTally(window)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.save = save
        self.save_error: str | None = None
        self.result: ProfileResult | None = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        r, w = os.pipe()
        with contextlib.suppress(OSError):  # a bigger pipe rides out a slow refresh
            fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        self._r = r
        self.sampler = threading.Thread(
            target=self._sample,
            args=(w, options, duration),
            name="leadline-top-sampler",
            daemon=True,
        )
        self.reader = threading.Thread(target=self._read, name="leadline-top-reader", daemon=True)
        self.sampler.start()
        self.reader.start()

    def _sample(self, fd: int, options: ProfileOptions, duration: float | None) -> None:
        try:
            self.result = attach(self.pid, "<top>", options, duration, fd=fd, until=self.stop)
        except BaseException as e:  # shown by the main thread
            self.error = e

    def _read(self) -> None:
        try:
            while True:
                data = os.read(self._r, 1 << 16)
                if not data:
                    return
                with self.lock:
                    self.stream.feed(data)
                if self.save is not None and self.save_error is None:
                    try:
                        self.save.write(data)
                    except OSError as e:
                        self.save_error = e.strerror or str(e)
        finally:
            os.close(self._r)

    @property
    def done(self) -> bool:
        return not self.sampler.is_alive() and not self.reader.is_alive()

    def fold(self) -> None:
        """Fold the samples that arrived into the tally."""
        from ..analyse.live import fold_period
        from ..analyse.samples import load_profile

        with self.lock:
            if not self.stream.meta or not self.stream.take():
                return
            profile = load_profile(self.stream)
        names = {t.serial: f"{t.name} ({t.tid})" for t in profile.threads}
        self.tally.add(time.monotonic(), fold_period(profile), names)

    def finish(self) -> None:
        self.stop.set()
        self.sampler.join()
        self.reader.join()
        self.fold()


class _Screen:
    """What is shown: view, sort, thread, paused; changed by keys."""

    def __init__(self, view: str) -> None:
        self.view = view
        self.sort = "own"
        self.thread = 0
        self.paused = False
        self.frozen: Any = None

    def key(self, ch: str, session: _Session) -> bool:
        """Apply a key; False to quit."""
        from ..analyse.live import SORTS, VIEWS

        if ch in ("q", "Q"):
            return False
        if ch == "p":
            self.paused = not self.paused
        elif ch == "s":
            self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        elif ch == "c":
            self.view = VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)]
        elif ch == "t":
            serials = [0, *session.tally.thread_serials()]
            at = serials.index(self.thread) if self.thread in serials else 0
            self.thread = serials[(at + 1) % len(serials)]
        return True

    def view_of(self, session: _Session, argv: list[str], ended: str | None) -> Any:
        from ..analyse.live import TopView

        tally = session.tally
        now = time.monotonic()
        rows, nw, na = tally.rows(now, self.view, self.thread, self.sort, session.rate)
        meta = session.stream.meta or {}
        return TopView(
            pid=session.pid,
            argv=argv,
            python=str(meta.get("python_version", "?")),
            elapsed_s=now - session.started,
            rate_hz=session.rate,
            window_s=tally.window_s,
            view=self.view,
            sort=self.sort,
            thread=tally.thread_names.get(self.thread, "all threads"),
            samples_window=nw,
            samples_all=na,
            threads=len(tally.thread_serials()),
            paused=self.paused,
            ended=ended,
            cwd=base_of(meta),
            rows=rows,
        )


@contextlib.contextmanager
def _keys() -> Iterator[int | None]:
    """Standard input in cbreak mode (keys arrive one by one, unechoed; Ctrl-C still
    interrupts), or None when it is not a terminal."""
    if not sys.stdin.isatty():
        yield None
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield fd
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _read_key(fd: int | None, timeout: float) -> str | None:
    if fd is None:
        time.sleep(max(timeout, 0.0))
        return None
    ready, _, _ = select.select([fd], [], [], max(timeout, 0.0))
    if not ready:
        return None
    data = os.read(fd, 32)
    return data.decode(errors="replace")[-1:] if data else None


def _ended(
    session: _Session, child: subprocess.Popen[bytes] | None, ended_by_top: bool = False
) -> str | None:
    if not session.done:
        return None
    r = session.result
    if ended_by_top:
        return "top ended the program"
    if child is not None and child.poll() is not None:
        code = child.returncode
        return (
            f"the program exited with status {code}"
            if code >= 0
            else (f"the program was killed by signal {-code}")
        )
    if r is not None and r.exited_after_s is not None:
        return f"process {session.pid} exited"
    return "sampling stopped"


def _live(session: _Session, screen: _Screen, argv: list[str], interval: float) -> None:
    """The live screen on a terminal, until q, Ctrl-C, or the process ends."""
    from rich.live import Live

    from ..render.base import RenderOptions
    from ..render.console import make_console
    from ..render.top import top_screen

    console = make_console(sys.stdout, RenderOptions())
    with _keys() as fd, Live(console=console, screen=True, auto_refresh=False) as live:
        next_fold = 0.0
        while True:
            now = time.monotonic()
            if now >= next_fold:
                session.fold()
                next_fold = now + interval
            if not screen.paused or screen.frozen is None:
                screen.frozen = screen.view_of(session, argv, _ended(session, None))
            live.update(top_screen(screen.frozen, console.size.height), refresh=True)
            if session.done:
                return
            key = _read_key(fd, min(next_fold - time.monotonic(), 0.25))
            if key is not None:
                if not screen.key(key, session):
                    return
                screen.frozen = None


def _plain(
    session: _Session, screen: _Screen, argv: list[str], interval: float, limit: int | None
) -> None:
    """A plain table on standard output every `interval` seconds, until the process ends."""
    from ..render.base import RenderOptions, get_renderer

    renderer = get_renderer("text", "top")
    options = RenderOptions(limit=limit or 20)
    while session.sampler.is_alive():
        session.sampler.join(interval)
        if not session.sampler.is_alive():
            break  # the last block is the final one
        session.fold()
        renderer.render(screen.view_of(session, argv, None), sys.stdout, options)
        sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    from ._common import open_output

    pid, python_args = _check(args)
    options = ProfileOptions(
        rate_hz=args.rate, max_depth=args.max_depth, async_tasks=args.async_tasks
    )
    options.validate()
    child = None
    if python_args is not None:
        try:
            child = subprocess.Popen([sys.executable, *python_args])
        except OSError as e:
            raise LeadlineError(f"cannot start {sys.executable}: {e.strerror}") from None
        pid = child.pid
        argv = python_args
    assert pid is not None
    live = sys.stdout.isatty()
    interval = args.interval or (1.0 if live else 5.0)
    screen = _Screen(args.view)
    status = 0
    ended_by_top = False
    save_cm = open_output(args.output, binary=True) if args.output else contextlib.nullcontext()
    with save_cm as save:
        session = _Session(pid, options, args.duration, args.window, save)
        if child is None:
            from ..record.profiler import _cmdline

            argv = _cmdline(pid)
        try:
            if live:
                _live(session, screen, argv, interval)
            else:
                _plain(session, screen, argv, interval, args.limit)
        except KeyboardInterrupt:
            pass
        finally:
            ended_by_top = _end_child(child)
            session.finish()
        if session.error is not None:
            if isinstance(session.error, LeadlineError):
                raise session.error
            raise LeadlineError(f"sampling failed: {session.error}")
        final = screen.view_of(session, argv, _ended(session, child, ended_by_top) or "stopped")
        from ..render.base import RenderOptions, get_renderer

        renderer = get_renderer("text", "top")
        renderer.render(final, sys.stdout, RenderOptions(limit=args.limit or 20))
        if session.save_error is not None:
            raise LeadlineError(f"cannot write {args.output}: {session.save_error}")
    if child is not None and not ended_by_top:
        status = _child_status(child.returncode)
    if args.output:
        print(f"leadline: capture -> {args.output}", file=sys.stderr)
    return status


def _end_child(child: subprocess.Popen[bytes] | None) -> bool:
    """The program top started ends with top: asked to terminate, then killed.  Whether it was
    still running."""
    if child is None or child.poll() is not None:
        return False
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signal.SIGTERM)
    try:
        child.wait(5.0)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    return True


def _child_status(code: int) -> int:
    """The program's exit status as top's (a death by signal N as 128 + N, as a shell says)."""
    return 128 - code if code < 0 else code
