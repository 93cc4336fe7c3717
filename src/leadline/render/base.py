"""The one interface every report and export implements.

A renderer reads a capture and writes one output.  Adding a format is one new module with one
class decorated by @register; the CLI's --format choices and help come from the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import IO, Any, ClassVar

from ..analyse.model import Metric
from ..capture.reader import Capture, Progress
from ..errors import LeadlineError


@dataclass(frozen=True)
class RenderOptions:
    sort: str = "incl"
    limit: int | None = None
    color: bool | None = None  # None: decide from the terminal and NO_COLOR
    width: int | None = None
    progress: Progress | None = None
    # sampling profiles
    callers: str | None = None
    callees: str | None = None
    idle: bool = False
    metric: Metric | None = None


def is_sampling(cap: Capture) -> bool:
    return cap.meta.get("mode") == "sample"


class Renderer(ABC):
    name: ClassVar[str]
    extension: ClassVar[str]
    description: ClassVar[str]
    binary: ClassVar[bool] = False  # writes bytes: `out` is a binary stream, never a terminal

    @abstractmethod
    def render(self, cap: Capture, out: IO[Any], options: RenderOptions) -> None:
        """Write the whole output for `cap` to `out` (IO[str], or IO[bytes] when `binary`)."""


REGISTRY: dict[str, type[Renderer]] = {}


def register(cls: type[Renderer]) -> type[Renderer]:
    REGISTRY[cls.name] = cls
    return cls


def get_renderer(name: str) -> Renderer:
    from . import (  # noqa: F401 - they register themselves
        chrome,
        collapsed,
        html,
        json_report,
        log,
        pprof,
        speedscope,
        text,
    )

    cls = REGISTRY.get(name)
    if cls is None:
        raise LeadlineError(f"unknown format {name!r} (one of: {', '.join(sorted(REGISTRY))})")
    return cls()


def all_renderers() -> dict[str, type[Renderer]]:
    get_renderer("text")
    return dict(REGISTRY)
