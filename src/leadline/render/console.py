"""The terminal: colour and width from the terminal and NO_COLOR, plain text when piped, and text
from the profiled program shown as text."""

from __future__ import annotations

import os
import shutil
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from .base import RenderOptions
from .untrusted import terminal_text


class _Console(Console):
    """A console for text from the profiled program: no rich markup ("[red]" or "[/]" in a
    function name is text, never a style or a MarkupError), and control characters and lone
    surrogates shown as escapes."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(terminal_text(text), **kwargs)


def make_console(out: IO[str], options: RenderOptions) -> Console:
    is_tty = out.isatty()
    no_color = bool(os.environ.get("NO_COLOR")) or options.color is False or not is_tty
    width = options.width or (None if is_tty else max(140, shutil.get_terminal_size().columns))
    return _Console(
        file=out,
        no_color=no_color,
        highlight=False,
        markup=False,
        width=width,
        soft_wrap=False,
        force_terminal=is_tty and options.color is not False,
        emoji=False,
    )
