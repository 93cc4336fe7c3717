"""What the reading commands share: opening captures and outputs, progress bars."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import LeadlineError

if TYPE_CHECKING:
    from ..capture.reader import Progress as Progress_
    from ..render.base import Renderer, RenderOptions

# rich, the capture reader and the renderers load when a command reads or shows something, not
# when `leadline trace` or `run` starts a program (tens of milliseconds of imports otherwise).

BIG_CAPTURE = 32 << 20


@contextlib.contextmanager
def progress_bar(total_bytes: int, label: str) -> Iterator[Progress_ | None]:
    """A progress bar on stderr when it is a terminal and the work is big enough to wait for."""
    if total_bytes < BIG_CAPTURE or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn(label), BarColumn(), TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task(label, total=1.0)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done / max(total, 1))

        yield update


@contextlib.contextmanager
def open_output(path: str | None, binary: bool = False) -> Iterator[IO[Any]]:
    """Standard output for None or "-", else the file, text (UTF-8) or binary.  Binary output
    is not written to a terminal.

    Nothing the user already has is touched until the new content is complete: a regular file
    (or one that does not exist yet) is written to a temporary file beside it, in the directory
    of the file a symbolic link points to, and renamed over it at the end; an error removes only
    that temporary file.  Anything else (a device such as /dev/null, a FIFO) is written in place
    and never removed.

    Text is UTF-8 with lone surrogates written as \\udXXX (render/untrusted.py): whatever a
    writer lets through from the profiled program, the output is never refused for it."""
    if path in (None, "-"):
        if not binary:
            reconfigure = getattr(sys.stdout, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")
            yield sys.stdout
            return
        if sys.stdout.isatty():
            raise LeadlineError(
                "binary output is not written to a terminal: use -o FILE or redirect stdout"
            )
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    real = Path(os.path.realpath(str(path)))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise LeadlineError(f"cannot write {path}: {e.strerror}") from None
    mode = "wb" if binary else "w"
    encoding = None if binary else "utf-8"
    errors = None if binary else "backslashreplace"
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(real, mode, encoding=encoding, errors=errors) as f:
                yield f
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    except OSError as e:
        raise LeadlineError(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, mode, encoding=encoding, errors=errors) as f:
            yield f
        # The new file keeps the old one's permissions, or gets what open() would have given.
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, real)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise LeadlineError(f"cannot write {path}: {e.strerror}") from None
        raise


def add_open_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--open",
        action="store_true",
        help="open the HTML page in a web browser once written (implies --html; $BROWSER "
        "chooses the browser)",
    )


def html_for_open(args: argparse.Namespace) -> None:
    """--open: the output is the HTML page (another format cannot be opened)."""
    if not getattr(args, "open", False):
        return
    if args.format in (None, "text"):
        args.format = "html"
    elif args.format != "html":
        raise LeadlineError(f"--open opens an HTML page: leave out --{args.format} or --open")


def open_in_browser(path: str | os.PathLike[str]) -> None:
    """Open a written HTML page in the user's browser; a line on stderr if there is none."""
    import webbrowser

    uri = Path(os.path.abspath(path)).as_uri()
    try:
        opened = webbrowser.open(uri)
    except webbrowser.Error:
        opened = False
    if not opened:
        print(f"leadline: no web browser to open {path} with (set BROWSER)", file=sys.stderr)


class StatusLine:
    """One line of progress on a terminal (stderr), rewritten in place at most 4 times a second
    and cleared at the end; nothing at all when the stream is not a terminal."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.active = self.stream.isatty()
        self._shown = 0
        self._last = 0.0

    def update(self, text: str) -> None:
        now = time.monotonic()
        if not self.active or now - self._last < 0.25:
            return
        self._last = now
        width = shutil.get_terminal_size().columns - 1
        text = text[:width]
        self.stream.write("\r" + text.ljust(self._shown))
        self.stream.flush()
        self._shown = len(text)

    def clear(self) -> None:
        if self.active and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0


@contextlib.contextmanager
def run_progress(label: str, total: int) -> Iterator[Progress_ | None]:
    """A bar counting runs on stderr, when it is a terminal (sweep, overhead)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn

    with Progress(
        TextColumn(label), BarColumn(), TextColumn("{task.completed}/{task.total}"), transient=True
    ) as bar:
        task = bar.add_task(label, total=total)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done)

        yield update


def write_rendered(
    renderer: Renderer[Any],
    subject: Any,
    output: str | None,
    options: RenderOptions,
    stream: IO[str] | None = None,
) -> None:
    """Render `subject` to `output` (a path; None or "-": standard output, or `stream`)."""
    if stream is not None and output in (None, "-"):
        renderer.render(subject, stream, options)
        return
    with open_output(output, renderer.binary) as out:
        renderer.render(subject, out, options)


def render_capture(
    capture_path: str,
    fmt: str,
    output: str | None,
    options: RenderOptions,
    stream: IO[str] | None = None,
    command: str = "report",
) -> int:
    """Render a capture in format `fmt` to `output` (a path; None or "-": standard output, or
    `stream`).  The capture is read before the output is opened."""
    from ..capture.reader import Capture
    from ..render.base import capture_kind, get_renderer

    with Capture(capture_path) as cap:
        renderer = get_renderer(fmt, capture_kind(cap), capture_path, command)
        with progress_bar(cap.size, f"reading {Path(capture_path).name}") as update:
            opts = dataclasses.replace(options, progress=update)
            subject = renderer.load(cap, opts)
            write_rendered(renderer, subject, output, opts, stream)
        if cap.damage:
            print(
                f"leadline: warning: {capture_path}: {cap.damage}; "
                f"{cap.unused_bytes} bytes could not be read",
                file=sys.stderr,
            )
    return 0
