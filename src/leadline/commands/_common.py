"""What the reading commands share: opening captures and outputs, progress bars."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from .. import runner
from ..capture import Capture
from ..capture import Progress as Progress_
from ..errors import LeadlineError
from ..render import RenderOptions
from ..render.base import Renderer
from ..tracer import Recorder

BIG_CAPTURE = 32 << 20


@contextlib.contextmanager
def progress_bar(total_bytes: int, label: str) -> Iterator[Progress_ | None]:
    """A progress bar on stderr when it is a terminal and the work is big enough to wait for."""
    if total_bytes < BIG_CAPTURE or not sys.stderr.isatty():
        yield None
        return
    with Progress(TextColumn(label), BarColumn(), TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task(label, total=1.0)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done / max(total, 1))

        yield update


@contextlib.contextmanager
def open_output(path: str | None, binary: bool = False) -> Iterator[IO[Any]]:
    """Standard output for None or "-", else the file, text (UTF-8) or binary.  Binary output
    is not written to a terminal; a file left half-written by an error is removed."""
    if path in (None, "-"):
        if not binary:
            yield sys.stdout
            return
        if sys.stdout.isatty():
            raise LeadlineError(
                "binary output is not written to a terminal: use -o FILE or redirect stdout"
            )
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(str(path))
    try:
        with open(target, "wb") if binary else open(target, "w", encoding="utf-8") as f:
            try:
                yield f
            except BaseException:
                f.close()
                target.unlink(missing_ok=True)
                raise
    except OSError as e:
        raise LeadlineError(f"cannot write {path}: {e.strerror}") from None


def render_capture(
    capture_path: str,
    renderer: Renderer,
    output: str | None,
    options: RenderOptions,
    stream: IO[str] | None = None,
) -> int:
    """Render a capture to `output` (a path; None or "-": standard output, or `stream`)."""
    with Capture(capture_path) as cap:
        with progress_bar(cap.size, f"reading {Path(capture_path).name}") as update:
            opts = dataclasses.replace(options, progress=update)
            if stream is not None and output in (None, "-"):
                renderer.render(cap, stream, opts)
            else:
                with open_output(output, renderer.binary) as out:
                    renderer.render(cap, out, opts)
        if cap.damage:
            print(
                f"leadline: warning: {capture_path}: {cap.damage}; "
                f"{cap.unused_bytes} bytes could not be read",
                file=sys.stderr,
            )
    return 0


def run_recorded(target: runner.Target, recorder: Recorder) -> tuple[int, Any]:
    """Run the program as `python` would, recording it; (its exit status, the recording's
    result).  The recording stops however the program ends."""
    code, namespace = runner.prepare(target)
    recorder.start()
    try:
        status = runner.execute(code, namespace)
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        result = recorder.stop()
    return status, result
