"""The native core's whole surface (src/leadline/_native/*.c)."""

from collections.abc import Callable
from typing import Any, Final

CLOCK: Final[str]  # "tsc" or "monotonic"
MONITORING: Final[int]  # 1 when the tracer uses sys.monitoring (Python 3.12+)
FORMAT_MAJOR: Final[int]
FORMAT_MINOR: Final[int]

def decode_events(payload: bytes, /) -> list[tuple[int, int, int, int, int, int, int]]:
    """Events of an EVENTS payload: (number, kind, func, t, rss_pages, heap, offset)."""

def decode_rss(payload: bytes, /) -> tuple[bytes, bytes]:
    """An RSS payload as two native uint64 arrays: tick times and RSS pages."""

def tick_ns() -> float: ...
def ticks() -> int: ...

class Session:
    """One recording into one capture file (the file descriptor is taken over)."""

    def __init__(
        self,
        fd: int,
        meta: bytes,
        hook_only: bool = ...,
        c_calls: bool = ...,
        rss_trigger_pages: int = ...,
        previous: bool = ...,
        max_depth: int = ...,
        exact_rss: bool = ...,
        heap: bool = ...,
        rss_period_us: int = ...,
        filter: Callable[[str, str], bool] | None = ...,
        exclude_prefix: str | None = ...,
        disable: object = ...,
    ) -> None: ...
    def hook(self, kind: int, /) -> Callable[..., Any]: ...
    def install_profile(self) -> None: ...
    def finish(self) -> dict[str, Any]: ...
    def close(self, end: bytes = ..., /) -> dict[str, Any]: ...

class Aggregator:
    """Folds event chunks into a call tree (see reader.c)."""

    def __init__(self, times: bytes, rss_pages: bytes, /) -> None: ...
    def feed(self, stream: int, payload: bytes, /) -> int: ...
    def finish(
        self,
    ) -> tuple[
        list[tuple[int, int, int, int, int, int, int, int, int, int, int, int, int, float, float]],
        list[tuple[int, int, int, int, int]],
        list[tuple[int, int, int, int, int]],
    ]: ...

def inspect_process(pid: int, /) -> dict[str, Any]:
    """Finds the interpreter of a process: {minor, runtime, code_type, path}.  Raises
    ProcessLookupError, PermissionError or ValueError (not Python, unsupported version)."""

def line_table(minor: int, firstline: int, raw: bytes, /) -> list[tuple[int, int]]: ...
def pthread_tid_offset() -> int: ...

class Sampler:
    """Samples the Python stacks of process `pid` (and, with subprocesses, its descendants)
    from a native thread into a capture file (the file descriptor is taken over)."""

    def __init__(
        self,
        fd: int,
        meta: bytes,
        pid: int,
        rate_hz: float,
        cpu: bool = ...,
        memory: bool = ...,
        subprocesses: bool = ...,
        max_depth: int = ...,
    ) -> None: ...
    def finish(self) -> dict[str, Any]: ...
    def close(self, end: bytes, /) -> dict[str, Any]: ...
    def before_fork(self) -> None: ...
    def resume(self, later: bool = ...) -> None: ...
    def running(self) -> bool: ...
