"""The terminal: colour and width from the terminal and NO_COLOR, plain text when piped."""

from __future__ import annotations

import os
import shutil
from typing import IO

from rich.console import Console

from .base import RenderOptions


def make_console(out: IO[str], options: RenderOptions) -> Console:
    is_tty = out.isatty()
    no_color = bool(os.environ.get("NO_COLOR")) or options.color is False or not is_tty
    width = options.width or (None if is_tty else max(140, shutil.get_terminal_size().columns))
    return Console(
        file=out,
        no_color=no_color,
        highlight=False,
        width=width,
        soft_wrap=False,
        force_terminal=is_tty and options.color is not False,
        emoji=False,
        # Names, paths and labels come from the profiled program: "[/]" in one is text, not a
        # closing tag (rich raised MarkupError on it) nor a style.
        markup=False,
    )
