"""`leadline.MarkHandler`: log records as marks (docs/marks.md).  Its own module, loaded on
first use, so that `import leadline` does not import `logging` for programs that do not log."""

from __future__ import annotations

import logging

from .. import _native
from .marks import MARK


class MarkHandler(logging.Handler):
    """A logging handler that records each log record as a mark named `log.LEVEL`, at the
    record's own file:line, with the logger's name and the formatted message as fields.
    `logging.getLogger().addHandler(leadline.MarkHandler())`."""

    def emit(self, record: logging.LogRecord) -> None:
        if not _native.marks_active():
            return
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not break the program
            message = str(record.msg)
        _native.mark_at(
            MARK,
            f"log.{record.levelname.lower()}",
            record.pathname,
            record.lineno,
            {"logger": record.name, "message": message},
        )
