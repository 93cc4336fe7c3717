"""Reading a capture file (docs/format.md): header, chunks, definitions, salvage.

The reader makes one pass over chunk headers to load the small parts (metadata, strings,
functions, threads, the RSS timeline) and to index the event chunks, then streams event
payloads on demand, so memory stays bounded whatever the capture's size.
"""

from __future__ import annotations

import bisect
import heapq
import struct
import zlib
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .. import _native
from ..errors import LeadlineError
from .schema import END_FIELDS, META_FIELDS, Malformed, load_json, load_object

MAGIC = b"LEADLINE"
CHUNK_MAGIC = b"LLCK"
HEADER = struct.Struct("<8sHHI")
CHUNK = struct.Struct("<4sBBHIIQ")

# The chunk, event and mark kinds are the native core's (leadline.h), exported by name.
_CHUNK = _native.CHUNK_KINDS
META, STRINGS, FUNCS, THREADS, EVENTS, RSS, END, SAMPLES, STACKS, TASKS, MARKS = (
    _CHUNK[name]
    for name in (
        "META", "STRINGS", "FUNCS", "THREADS", "EVENTS", "RSS", "END", "SAMPLES", "STACKS",
        "TASKS", "MARKS",
    )
)  # fmt: skip
EVENT = _native.EVENT_KINDS  # name -> number: EVENT["CALL"] ...
MARK = _native.MARK_KINDS
# A function's kind as the reader names it: Python code, a C function, an asyncio task.
FUNC_KINDS = {number: name.lower() for name, number in _native.FUNC_KINDS.items()}
MARK_KINDS = {number: name for name, number in MARK.items()}
KIND_NAMES = {number: name for name, number in EVENT.items()}
CHUNK_NAMES = {number: name for name, number in _CHUNK.items()}

Progress = Callable[[int, int], None]
Event = tuple[int, int, int, int, int, int, int]  # number, kind, func, t, rss_pages, heap, offset
# A sample: t (ticks), thread serial, flags, stack id, CPU ns since the thread's last sample,
# RSS change in pages attributed to it.
Sample = tuple[int, int, int, int, int, int]
SAMPLE_IDLE, SAMPLE_RSS, SAMPLE_TRUNCATED, SAMPLE_GIVEN = 1, 2, 4, 8
# Bits 4-5 of a sample's flags: the thread and the GIL when it was read (format 1.3).
SAMPLE_GIL_SHIFT = 4
GIL_UNKNOWN, GIL_HELD, GIL_WAIT, GIL_NONE = 0, 1, 2, 3
GIL_STATES = {GIL_HELD: "held", GIL_WAIT: "wait", GIL_NONE: "none"}


# Bit 6: the thread was raising an exception or handling one (format 1.3).
SAMPLE_EXCEPTION = 64
SAMPLE_TASK_WAITING = 128  # --async all: a waiting asyncio task's stack, not the thread's


def gil_state(flags: int) -> int:
    """The GIL_* state of a sample's flags."""
    return (flags >> SAMPLE_GIL_SHIFT) & 3


@dataclass(frozen=True)
class Task:
    """A sampled thread: its process, kernel thread id, Python ident and name (if known)."""

    pid: int
    tid: int
    ident: int
    name: str


@dataclass(frozen=True)
class Mark:
    """A `leadline.mark()` (kind 0), or the begin (1) or end (2) of a `leadline.span`."""

    t: int  # clock ticks
    tid: int  # native thread id
    kind: int
    name: str
    file: str
    line: int
    fields: dict[str, Any]

    @property
    def kind_name(self) -> str:
        return MARK_KINDS.get(self.kind, "MARK")

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "?"


def _marks(payload: bytes) -> Iterator[Mark]:
    pos = 0
    while pos < len(payload):
        t, pos = _varint(payload, pos)
        tid, pos = _varint(payload, pos)
        kind, pos = _byte(payload, pos)
        line, pos = _varint(payload, pos)
        name, pos = _text(payload, pos)
        file, pos = _text(payload, pos)
        raw, pos = _bytes(payload, pos)
        # Fields the writer could not keep are `{}`; so are fields no reader could use.
        try:
            fields = load_json(raw, "a mark's fields")
        except Malformed:
            fields = {}
        yield Mark(t, tid, kind, name, file, line, fields if isinstance(fields, dict) else {})


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 64 bits (ten bytes), as the writer makes them."""
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise Malformed("cut short")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value >= 1 << 64:
                raise Malformed("a number is longer than 64 bits")
            return value, pos
        shift += 7
        if shift > 63:
            raise Malformed("a number is longer than 64 bits")


def _byte(buf: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(buf):
        raise Malformed("cut short")
    return buf[pos], pos + 1


def _bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    """``varint n, n bytes``."""
    n, pos = _varint(buf, pos)
    if n > len(buf) - pos:
        raise Malformed("cut short")
    return buf[pos : pos + n], pos + n


def _text(buf: bytes, pos: int) -> tuple[str, int]:
    """``varint n, n bytes`` of UTF-8 (undecodable bytes replaced)."""
    raw, pos = _bytes(buf, pos)
    return raw.decode("utf-8", "replace"), pos


def _records(payload: bytes, fields: int) -> Iterator[list[int]]:
    """The records of a definition chunk made of `fields` varints each."""
    pos = 0
    while pos < len(payload):
        record = []
        for _ in range(fields):
            value, pos = _varint(payload, pos)
            record.append(value)
        yield record


def _unzigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def decode_samples(payload: bytes) -> Iterator[Sample]:
    """The samples of one SAMPLES chunk; Malformed (a ValueError) if it is corrupt."""
    t, pos = _varint(payload, 0)
    end = len(payload)
    while pos < end:
        dt, pos = _varint(payload, pos)
        serial, pos = _varint(payload, pos)
        flags, pos = _byte(payload, pos)
        stack, pos = _varint(payload, pos)
        cpu, pos = _varint(payload, pos)
        drss = 0
        if flags & SAMPLE_RSS:
            z, pos = _varint(payload, pos)
            drss = _unzigzag(z)
        t += dt
        yield t, serial, flags, stack, cpu, drss


@dataclass
class Function:
    id: int
    kind: str  # "py", "c" or "task" (FUNC_KINDS)
    file: str
    name: str
    line: int
    offsets: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    def line_at(self, offset: int) -> int:
        """Source line of an instruction offset (code units), from the recorded line table."""
        if offset < 0 or not self.offsets:
            return self.line
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.lines[i] if i >= 0 else self.line

    @property
    def label(self) -> str:
        if self.kind == "c":
            return f"{self.name} [{self.file}]" if self.file not in ("", "builtins") else self.name
        return self.name

    @property
    def location(self) -> str:
        return self.located()

    def located(self, shown: Callable[[str], str] | None = None) -> str:
        """`file:line`, the file through `shown` (analyse.paths: a report's short names)."""
        if self.kind == "task":
            return "<asyncio task>"
        if self.kind != "py":
            return f"<{self.file or 'builtin'}>"
        return f"{shown(self.file) if shown else self.file}:{self.line}"


@dataclass
class EventChunk:
    offset: int
    length: int
    stream: int
    crc: int


def _undecodable(kind: int, e: ValueError) -> str:
    """The damage of a definition chunk that passed its checksum but cannot be decoded."""
    name = CHUNK_NAMES.get(kind, f"kind {kind}")
    return f"a chunk ({name}) cannot be decoded: {e}"


class Definitions:
    """The small parts of a capture, loaded from its definition chunks: metadata, strings,
    functions, threads, stacks, marks, the RSS timeline.  A file (:class:`Capture`) and a live
    stream (:class:`CaptureStream`) load them alike."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}
        self.end: dict[str, Any] | None = None
        self.strings: dict[int, str] = {0: ""}
        self.functions: dict[int, Function] = {}
        self.threads: dict[int, tuple[int, int]] = {}  # serial -> (native tid, python ident)
        self.stacks: dict[int, tuple[int, int, int]] = {}  # id -> (parent, func, offset)
        self.tasks: dict[int, Task] = {}  # serial -> sampled thread
        self.marks: list[Mark] = []  # in time order
        self.timeline_t = array("Q")
        self.timeline_rss = array("Q")
        self.damage: str | None = None  # why reading stopped early, if it did
        # The capture format (major, minor) its file header gives.
        self.format: tuple[int, int] = (_native.FORMAT_MAJOR, _native.FORMAT_MINOR)

    def _load(self, kind: int, payload: bytes) -> None:
        """Loads one definition chunk; Malformed (a ValueError) if its content is not what
        docs/format.md says: a META or END is then not used at all, the records of other
        chunks before the bad one are kept."""
        if kind == META:
            self.meta = load_object(payload, "META", META_FIELDS)
        elif kind == END:
            self.end = load_object(payload, "END", END_FIELDS)
        elif kind == STRINGS:
            pos = 0
            while pos < len(payload):
                sid, pos = _varint(payload, pos)
                self.strings[sid], pos = _text(payload, pos)
        elif kind == FUNCS:
            pos = 0
            while pos < len(payload):
                fid, pos = _varint(payload, pos)
                fkind, pos = _byte(payload, pos)
                file_id, pos = _varint(payload, pos)
                name_id, pos = _varint(payload, pos)
                first, pos = _varint(payload, pos)
                n, pos = _varint(payload, pos)
                offsets, lines = [], []
                off, line = 0, first
                for _ in range(n):
                    d_off, pos = _varint(payload, pos)
                    d_line, pos = _varint(payload, pos)
                    off += d_off
                    line += _unzigzag(d_line)
                    offsets.append(off)
                    lines.append(line)
                self.functions[fid] = Function(
                    fid,
                    FUNC_KINDS.get(fkind, "py"),
                    self.strings.get(file_id, "?"),
                    self.strings.get(name_id, "?"),
                    first,
                    offsets,
                    lines,
                )
        elif kind == THREADS:
            for serial, tid, ident in _records(payload, 3):
                self.threads[serial] = (tid, ident)
        elif kind == STACKS:
            for sid, parent, func, off in _records(payload, 4):
                # A stack is written after its parent, with a larger id: so chains end.
                if parent >= sid:
                    raise Malformed(f"stack {sid} has parent {parent}, not an earlier stack")
                self.stacks[sid] = (parent, func, off)
        elif kind == TASKS:
            for serial, pid, tid, ident, name_id in _records(payload, 5):
                self.tasks[serial] = Task(pid, tid, ident, self.strings.get(name_id, ""))
        elif kind == MARKS:
            self.marks.extend(_marks(payload))
        elif kind == RSS:
            times, values = _native.decode_rss(payload)
            self.timeline_t.frombytes(times)
            self.timeline_rss.frombytes(values)

    # -- conveniences ---------------------------------------------------------
    @property
    def complete(self) -> bool:
        return self.end is not None and self.damage is None

    @property
    def tick_ns(self) -> float:
        src = self.end or self.meta
        return float(src.get("tick_ns", 1.0))

    @property
    def t_start(self) -> int:
        return int(self.meta.get("t_start", 0))

    @property
    def page_size(self) -> int:
        return int(self.meta.get("page_size", 4096))

    def ns(self, ticks: int) -> int:
        """Nanoseconds since the start of recording."""
        return int((ticks - self.t_start) * self.tick_ns)

    def thread_name(self, serial: int) -> str:
        _tid, ident = self.threads.get(serial, (0, 0))
        names: dict[str, str] = (self.end or {}).get("threads", {})
        return names.get(str(ident)) or f"thread-{serial}"

    def tid_name(self, tid: int) -> str:
        """A thread's name from its native id (marks carry that id)."""
        by_tid: dict[str, str] = (self.end or {}).get("thread_tids", {})
        if str(tid) in by_tid:
            return by_tid[str(tid)]
        names: dict[str, str] = (self.end or {}).get("threads", {})
        for tid_, ident in self.threads.values():
            if tid_ == tid:
                return names.get(str(ident)) or f"tid {tid}"
        for task in self.tasks.values():
            if task.tid == tid:
                return task.name or names.get(str(task.ident)) or f"tid {tid}"
        return f"tid {tid}"

    def function(self, fid: int) -> Function:
        f = self.functions.get(fid)
        if f is None:
            f = Function(fid, "py", "?", f"<unknown #{fid}>", 0)
            self.functions[fid] = f
        return f


class Capture(Definitions):
    """An open capture.  Raises LeadlineError (one line) for anything it cannot read."""

    def __init__(self, path: str | Path, progress: Progress | None = None) -> None:
        super().__init__()
        self.path = Path(path)
        try:
            self._f: BinaryIO = open(self.path, "rb")
        except FileNotFoundError:
            raise LeadlineError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise LeadlineError(f"{self.path}: is a directory, not a capture") from None
        except OSError as e:
            raise LeadlineError(f"{self.path}: cannot read ({e.strerror})") from None
        self.size = self.path.stat().st_size
        self.event_chunks: list[EventChunk] = []
        self.sample_chunks: list[EventChunk] = []
        self.unused_bytes = 0
        try:
            self._scan(progress)
        except BaseException:
            self._f.close()
            raise

    # -- structure ------------------------------------------------------------
    def _scan(self, progress: Progress | None) -> None:
        head = self._f.read(HEADER.size)
        if len(head) < HEADER.size or head[:8] != MAGIC:
            raise LeadlineError(f"{self.path}: not a leadline capture")
        _, major, minor, _ = HEADER.unpack(head)
        self.format = (major, minor)
        if major > _native.FORMAT_MAJOR:
            raise LeadlineError(
                f"{self.path}: written by a newer leadline (capture format {major}.{minor}; "
                f"this leadline reads {_native.FORMAT_MAJOR}.x)"
            )
        pos = HEADER.size
        last_report = 0
        while pos < self.size:
            self._f.seek(pos)
            raw = self._f.read(CHUNK.size)
            if len(raw) < CHUNK.size:
                self._damaged(pos, "the last chunk header is cut short")
                break
            magic, kind, _flags, _res, length, crc, stream = CHUNK.unpack(raw)
            if magic != CHUNK_MAGIC:
                self._damaged(pos, "a chunk header is corrupt")
                break
            start = pos + CHUNK.size
            if start + length > self.size:
                self._damaged(pos, "the last chunk is cut short (the writer was stopped)")
                break
            if kind in (EVENTS, SAMPLES):
                # Verified when streamed; an index entry is all the scan keeps.
                chunks = self.event_chunks if kind == EVENTS else self.sample_chunks
                chunks.append(EventChunk(start, length, stream, crc))
            else:
                payload = self._f.read(length)
                if zlib.crc32(payload) != crc:
                    self._damaged(pos, "a chunk's checksum does not match")
                    break
                try:
                    self._load(kind, payload)
                except ValueError as e:  # Malformed, or the native RSS decoder's
                    if kind == META:
                        # Nothing before it, and nothing after it means anything without it.
                        raise LeadlineError(f"{self.path}: not a readable capture ({e})") from None
                    self._damaged(pos, _undecodable(kind, e))
                    break
            pos = start + length
            if progress and pos - last_report > (1 << 24):
                progress(pos, self.size)
                last_report = pos
        if not self.meta:
            raise LeadlineError(f"{self.path}: capture has no metadata (nothing was recorded)")
        self.marks.sort(key=lambda m: m.t)

    def _damaged(self, pos: int, why: str) -> None:
        self.damage = why
        self.unused_bytes = self.size - pos

    # -- streaming ------------------------------------------------------------
    def event_payloads(
        self, progress: Progress | None = None, stream: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """(thread serial, payload) of every readable event chunk (of one thread, if `stream`
        is given), in file order; stops at the first damaged chunk."""
        yield from self._payloads(self.event_chunks, progress, stream)

    def _payloads(
        self, chunks: list[EventChunk], progress: Progress | None, stream: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        total = sum(c.length for c in chunks) or 1
        done = 0
        for chunk in chunks:
            if stream is not None and chunk.stream != stream:
                continue
            self._f.seek(chunk.offset)
            payload = self._f.read(chunk.length)
            if zlib.crc32(payload) != chunk.crc:
                self.damage = "a chunk's checksum does not match"
                self.unused_bytes = max(self.unused_bytes, self.size - chunk.offset)
                return
            yield chunk.stream, payload
            done += chunk.length
            if progress:
                progress(done, total)

    def samples(self, progress: Progress | None = None) -> Iterator[Sample]:
        """Every readable sample, in file order (docs/format.md, SAMPLES)."""
        for _, payload in self._payloads(self.sample_chunks, progress):
            try:
                yield from decode_samples(payload)
            except ValueError as e:
                self.damage = f"a chunk (SAMPLES) cannot be decoded: {e}"
                return

    def _decoded(self, payloads: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, Event]]:
        for stream, payload in payloads:
            try:
                decoded = _native.decode_events(payload)
            except ValueError:
                self.damage = "an event chunk cannot be decoded"
                return
            for ev in decoded:
                yield stream, ev

    def events(self) -> Iterator[tuple[int, Event]]:
        """(thread serial, (number, kind, func, t, rss_pages, heap, offset)) in file order."""
        return self._decoded(self.event_payloads())

    def events_by_time(self) -> Iterator[tuple[int, Event]]:
        """Like events(), merged across threads by time, holding one chunk per thread."""
        streams = sorted({c.stream for c in self.event_chunks})
        if len(streams) <= 1:
            yield from self.events()
            return
        per_thread = (
            ((ev[3], stream, ev) for stream, ev in self._decoded(self.event_payloads(stream=s)))
            for s in streams
        )
        for _t, stream, ev in heapq.merge(*per_thread):
            yield stream, ev

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CaptureStream(Definitions):
    """A capture read while it is written (a pipe from a live sampler): :meth:`feed` takes bytes
    as they arrive, loads definition chunks at once and keeps the samples until :meth:`take`
    hands them over.  `samples()` yields what was taken last, so ``sampling.load_profile`` folds
    one period of a live capture as it folds a file."""

    def __init__(self, path: str = "<stream>") -> None:
        super().__init__()
        self.path = Path(path)
        self._buf = bytearray()
        self._header = False
        self._pending: list[Sample] = []
        self._taken: list[Sample] = []
        self.bytes_read = 0

    def feed(self, data: bytes) -> None:
        """Consume `data`; a corrupt stream sets `damage` and ignores what follows."""
        if self.damage is not None:
            return
        self._buf += data
        self.bytes_read += len(data)
        pos = 0
        buf = self._buf
        if not self._header:
            if len(buf) < HEADER.size:
                return
            if buf[:8] != MAGIC:
                self.damage = "not a leadline capture"
                return
            _, major, minor, _ = HEADER.unpack_from(buf, 0)
            self.format = (major, minor)
            self._header = True
            pos = HEADER.size
        while len(buf) - pos >= CHUNK.size:
            magic, kind, _flags, _res, length, crc, _stream = CHUNK.unpack_from(buf, pos)
            if magic != CHUNK_MAGIC:
                self.damage = "a chunk header is corrupt"
                return
            start = pos + CHUNK.size
            if len(buf) - start < length:
                break
            payload = bytes(buf[start : start + length])
            if zlib.crc32(payload) != crc:
                self.damage = "a chunk's checksum does not match"
                return
            try:
                if kind == SAMPLES:
                    self._pending.extend(decode_samples(payload))
                elif kind != EVENTS:
                    self._load(kind, payload)
            except ValueError as e:
                self.damage = _undecodable(kind, e)
                return
            pos = start + length
        del buf[:pos]

    def take(self, before: int | None = None) -> int:
        """Make the samples taken before tick `before` (all of them if None) what `samples()`
        yields, and forget them; the rest wait for the next call.  Returns how many."""
        if before is None:
            self._taken, self._pending = self._pending, []
        else:
            self._taken = [s for s in self._pending if s[0] < before]
            self._pending = [s for s in self._pending if s[0] >= before]
        return len(self._taken)

    def samples(self, progress: Progress | None = None) -> Iterator[Sample]:
        return iter(self._taken)
