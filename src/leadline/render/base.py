"""The one interface every report and export implements, and the registry the CLI is built from.

A renderer writes one output (a format: text, json, html, pprof...) of one *kind* of subject.
The kinds are listed once, in KINDS: what a capture holds (a trace, a sampling profile, probe
counts; the capture's own META says which, read in one place, `capture_kind`) and the results
of `leadline diff`, `sweep` and `overhead`.  For a capture, a renderer's `load` makes its
subject from the capture: by default the kind's profile (KIND_LOADERS); the event log and the
Chrome trace stream the capture's events themselves.

Adding a format is one new module in this package with a class decorated by @register: every
module here is imported by `renderers()`, so the CLI's --format choices and help, and the
refusal of a format that has nothing for a kind, come from the registry.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, ClassVar, Generic, TypeVar

from ..analyse.model import Metric
from ..analyse.probes import probe_report
from ..analyse.samples import load_profile
from ..analyse.trace import analyse
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
    # the event log: one JSON object per line
    json_lines: bool = False
    # sweeps: the column charted
    column: str | None = None


@dataclass(frozen=True)
class Kind:
    name: str
    what: str  # for messages: "a trace capture (leadline trace)"


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("trace", "a trace capture (leadline trace)"),
        Kind("sample", "a sampling capture (leadline run)"),
        Kind("probe", "a probe capture (leadline probe)"),
        Kind("diff", "a diff (leadline diff)"),
        Kind("sweep", "a sweep (leadline sweep)"),
        Kind("overhead", "a cost table (leadline overhead)"),
        Kind("dump", "a snapshot of a process's threads (leadline dump)"),
        Kind("top", "a live view of a process's hottest functions (leadline top)"),
    )
}
# What a capture of each kind is read into before it is rendered.
KIND_LOADERS: dict[str, Callable[[Capture, Progress | None], Any]] = {
    "trace": analyse,
    "sample": load_profile,
    "probe": probe_report,
}
CAPTURE_KINDS = tuple(KIND_LOADERS)


def capture_kind(cap: Capture) -> str:
    """The kind of what `cap` holds, from its META: the one place that decides."""
    mode = cap.meta.get("mode")
    if not isinstance(mode, str) or mode not in CAPTURE_KINDS:
        raise LeadlineError(f"{cap.path}: a capture of an unknown kind ({mode!r})")
    return mode


S = TypeVar("S")


class Renderer(ABC, Generic[S]):
    name: ClassVar[str]  # the format
    kinds: ClassVar[tuple[str, ...]]  # what it renders: keys of KINDS
    extension: ClassVar[str]
    description: ClassVar[str]
    binary: ClassVar[bool] = False  # writes bytes: `out` is a binary stream, never a terminal

    def load(self, cap: Capture, options: RenderOptions) -> S:
        """The subject this renderer writes, made from a capture of one of its kinds."""
        subject: S = KIND_LOADERS[capture_kind(cap)](cap, options.progress)
        return subject

    @abstractmethod
    def render(self, subject: S, out: IO[Any], options: RenderOptions) -> None:
        """Write the whole output for `subject` to `out` (IO[str], or IO[bytes] when
        `binary`)."""


REGISTRY: dict[tuple[str, str], type[Renderer[Any]]] = {}  # (format, kind) -> renderer


def register(cls: type[Renderer[S]]) -> type[Renderer[S]]:
    for kind in cls.kinds:
        key = (cls.name, kind)
        if kind not in KINDS:
            raise TypeError(f"{cls.__name__}: unknown kind {kind!r}")
        if key in REGISTRY and REGISTRY[key] is not cls:
            raise TypeError(f"two renderers of {cls.name} for {kind}")
        REGISTRY[key] = cls
    return cls


def renderers() -> dict[tuple[str, str], type[Renderer[Any]]]:
    """Every renderer: the modules of this package are imported (once), registering theirs."""
    if not _imported:
        for module in pkgutil.iter_modules([os.path.dirname(__file__)]):
            importlib.import_module(f"{__package__}.{module.name}")
        _imported.append(True)
    return REGISTRY


_imported: list[bool] = []


def _own_module(fmt: str, kind: str) -> type[Renderer[Any]] | None:
    """The renderer of (`fmt`, `kind`) if the module named after the kind (render/dump.py for
    dumps) has it: found without importing every renderer, which took `leadline dump`, a
    hung program's first aid, 0.22 s of its 0.3 s of CPU (the diff's and the HTML pages')."""
    if not (
        kind.isidentifier()
        and os.path.exists(os.path.join(os.path.dirname(__file__), f"{kind}.py"))
    ):
        return None
    importlib.import_module(f"{__package__}.{kind}")
    return REGISTRY.get((fmt, kind))


def formats(kinds: tuple[str, ...] | None = None) -> dict[str, str]:
    """Format name -> description, of the renderers of `kinds` (every kind if None)."""
    out: dict[str, str] = {}
    for (fmt, kind), cls in sorted(renderers().items()):
        if kinds is None or kind in kinds:
            out.setdefault(fmt, cls.description)
    return out


def get_renderer(fmt: str, kind: str, source: str = "", command: str = "") -> Renderer[Any]:
    """The renderer of format `fmt` for `kind`; a one-line LeadlineError if there is none
    (`source` names what was given and `command` what was asked, for the message)."""
    cls = REGISTRY.get((fmt, kind)) or _own_module(fmt, kind) or renderers().get((fmt, kind))
    if cls is not None:
        return cls()
    found = renderers()
    if not any(f == fmt for f, _ in found):
        names = ", ".join(sorted({f for f, _ in found}))
        raise LeadlineError(f"unknown format {fmt!r} (one of: {names})")
    kinds = [k for f, k in sorted(found) if f == fmt]
    if kind in CAPTURE_KINDS:
        # A capture can only be what captures hold, never a diff or a sweep: name those.
        kinds = [k for k in kinds if k in CAPTURE_KINDS] or kinds
    takes = " or ".join(KINDS[k].what for k in kinds)
    asked = fmt if command in ("", fmt) else f"{fmt} {command}"
    given = f"{source} is" if source else "this is"
    raise LeadlineError(f"{asked} needs {takes}; {given} {KINDS[kind].what.split(' (')[0]}")
