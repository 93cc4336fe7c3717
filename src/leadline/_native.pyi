"""The native core's whole surface (src/leadline/_native/*.c)."""

from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, Final

CLOCK: Final[str]  # "tsc" or "monotonic"
MONITORING: Final[int]  # 1 when the tracer uses sys.monitoring (Python 3.12+)
COARSE_WARMUP_PERIODS: Final[int]  # a trace's first RSS periods read the counter
FORMAT_MAJOR: Final[int]
FORMAT_MINOR: Final[int]
# Name -> number of each chunk kind, event kind, tracer hook kind and mark kind (leadline.h).
CHUNK_KINDS: Final[dict[str, int]]
EVENT_KINDS: Final[dict[str, int]]
HOOK_KINDS: Final[dict[str, int]]
MARK_KINDS: Final[dict[str, int]]
FUNC_KINDS: Final[dict[str, int]]

def decode_events(payload: bytes, /) -> list[tuple[int, int, int, int, int, int, int]]:
    """Events of an EVENTS payload: (number, kind, func, t, rss_pages, heap, offset)."""

def decode_rss(payload: bytes, /) -> tuple[bytes, bytes]:
    """An RSS payload as two native uint64 arrays: tick times and RSS pages."""

def tick_ns() -> float: ...
def ticks() -> int: ...
def crc32(data: bytes, /) -> int: ...
def mark(name: object, /, **fields: object) -> None: ...
def mark_at(kind: int, name: str, file: str, line: int, fields: dict[str, Any], /) -> None: ...
def marks_active() -> bool: ...
def probe_begin(discover: Callable[[CodeType], None], disable: object, /) -> None: ...
def probe_watch(code: CodeType, line: int, start_lasti: int = -1, /) -> int: ...
def probe_counts() -> list[int]: ...
def probe_end() -> None: ...
def probe_line_event(code: CodeType, line: int, /) -> object: ...
def probe_start_event(code: CodeType, offset: int, /) -> object: ...
def probe_install_trace() -> None: ...
def probe_trace_bootstrap(frame: FrameType, event: str, arg: object, /) -> None: ...

# What a recording's close() is given for END: the payload, or a function that makes it from
# the writer's figures (called again when END had to take the place of the last chunk), which
# close() then returns: bytes_written, dropped_chunks, max_bytes, write_error (str | None),
# stopped ("size_limit" | "write_error" | None), t_stopped (ticks | None), end_written, and
# {events,samples,marks}_{written,lost}.
EndPayload = bytes | Callable[[dict[str, Any]], bytes]

class Journal:
    def __init__(self, fd: int, meta: bytes, /) -> None: ...
    def finish(self) -> dict[str, Any]:
        """Stops sampling: {ticks, samples, missed, torn, deferred, retried, truncated,
        sampler_cpu_ns, t_end, reads, tick_ns, stacks, functions, processes, exit_t}."""
    def close(self, end: EndPayload, /) -> dict[str, Any]: ...

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
        max_bytes: int = ...,
        coarse_time: bool = ...,
    ) -> None: ...
    def hook(self, kind: int, /) -> Callable[..., Any]: ...
    def install_profile(self) -> None: ...
    def fork_held(self, held: bool, /) -> None: ...
    def finish(self) -> dict[str, Any]:
        """Stops recording: {events, encoded, t_start, t_end, tick_ns, threads, functions,
        hook_replaced, coarse_from}."""
    def close(self, end: EndPayload | None = ..., /) -> dict[str, Any]: ...

class Aggregator:
    """Folds event chunks into a call tree (see reader.c)."""

    def __init__(self, times: bytes, rss_pages: bytes, /) -> None: ...
    def feed(self, stream: int, payload: bytes, /) -> int: ...
    def finish(
        self,
    ) -> tuple[
        list[tuple[int, int, int, int, int, int, int, int, int, int, int, int, int, float, float]],
        list[tuple[int, int, int, int, int, int, int]],
        list[tuple[int, int, int, int, int]],
    ]: ...

def inspect_process(pid: int, /) -> dict[str, Any]:
    """Finds the interpreter of a process: {minor, runtime, code_type, path, layout_source
    ("published": from its _Py_DebugOffsets table, 3.13+; or "compiled"), published (fields the
    table gave), warning ("" or one line), offsets, compiled (the built-in table, or None)}.
    Raises ProcessLookupError (no such process, or one that has exited: a zombie),
    PermissionError or ValueError (not Python, unsupported version or build, a damaged
    table)."""

def layout_from_debug_offsets(table: bytes, minor: int, /) -> dict[str, Any]:
    """What the sampler makes of a _Py_DebugOffsets table read from a 3.`minor` interpreter:
    {offsets, published, warning}; ValueError if it is damaged or of a free-threaded build."""

def line_table(minor: int, firstline: int, raw: bytes, /) -> list[tuple[int, int]]: ...
def native_unavailable() -> str | None:
    """None if C stacks can be unwound (elfutils' libdw loads), else why not."""

class Sampler:
    """Samples the Python stacks of process `pid` (and, with subprocesses, its descendants)
    from a native thread into a capture file (the file descriptor is taken over).  Another
    process that has ended by the time the sampler looks at it (gone, or a zombie) gives a
    sampler with nothing to sample: running() is False at once, and finish()'s "exit_t" says
    when it was found gone (as it does whenever the first process ends while sampled)."""

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
        tasks: int = ...,
        ticks: int = ...,
        locals: int = ...,
        native: bool = ...,
    ) -> None: ...
    def finish(self) -> dict[str, Any]:
        """Stops sampling: {ticks, samples, missed, torn, deferred, retried, truncated,
        sampler_cpu_ns, t_end, reads, tick_ns, stacks, functions, processes, exit_t, parked,
        held, gil_reads, locals, locals_held_ns, thread_names, native}; locals: (serial,
        frame, kind, name, type, value) each, the last three bytes (record/locals.py);
        thread_names: (pid, ident, name) of each thread another process's threading module
        knows; native: a snapshot with C frames (its held time is locals_held_ns)."""
    def close(self, end: EndPayload, /) -> dict[str, Any]: ...
    def before_fork(self) -> None: ...
    def resume(self, later: bool = ...) -> None: ...
    def running(self) -> bool: ...
    def progress(self) -> tuple[int, int]:
        """(ticks, samples) taken so far, read while the sampler runs."""
