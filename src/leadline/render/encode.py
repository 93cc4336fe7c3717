"""Exports of a sampling profile for the tools people already use.

Pure functions over a :class:`SampleProfile`, so each format is tested on profiles built by hand
and checked by its real consumer (``go tool pprof``, speedscope's JSON schema, a folded-stack
parser):

- :func:`to_pprof`: gzip-compressed ``perftools.profiles.Profile`` protobuf, written by the small
  encoder below (the format needs only varints and length-delimited fields, not a dependency).
- :func:`to_speedscope`: speedscope's file format, one sampled profile per thread.
- :func:`to_collapsed`: Brendan Gregg's folded stacks, ``outer;...;leaf weight`` per line.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from .. import __version__
from ..analyse.model import SPREAD_UNIT, Metric, SampleProfile, Stack, Thread, row_spread
from ..errors import LeadlineError
from .untrusted import escape_surrogates

PprofMetric = Literal["samples", "cpu", "wall", "memory", "cpu_spread"]
PPROF_METRICS: tuple[PprofMetric, ...] = ("samples", "cpu", "wall", "memory", "cpu_spread")
# What to_pprof writes unless asked: cpu_spread is for the fleet agent (and so for `diff` of a
# fleet aggregate), not for people's pprof tools.
PPROF_DEFAULT_METRICS = frozenset(PPROF_METRICS) - {"cpu_spread"}

# pprof's (type, unit) for each metric; "wall" is samples x the sampling period; "cpu_spread"
# is the sum of the squared CPU times of the reads behind a stack's CPU time (row_spread), in
# square microseconds (so that a fleet's merged sums stay far inside an int64), which tells a
# merged aggregate how many fair reads its CPU time rests on: samples/count does not (cpu mode
# writes a record per period of CPU time whatever the reads were).
PPROF_SAMPLE_TYPES: dict[PprofMetric, tuple[str, str]] = {
    "samples": ("samples", "count"),
    "cpu": ("cpu", "nanoseconds"),
    "wall": ("wall", "nanoseconds"),
    "memory": ("rss", "bytes"),
    "cpu_spread": ("cpu_spread", "square_microseconds"),
}

NO_FRAMES = "(no Python frames)"  # the folded line of a sample whose stack was empty
SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
SPEEDSCOPE_UNITS: dict[Metric, str] = {"samples": "none", "cpu": "nanoseconds", "memory": "bytes"}


def _require_memory(profile: SampleProfile) -> None:
    if not profile.memory:
        raise LeadlineError("this profile has no memory weights (RSS was not recorded per sample)")


def period_ns(profile: SampleProfile) -> int:
    """The sampling period in nanoseconds (0 when the rate is unknown)."""
    return round(1e9 / profile.rate_hz) if profile.rate_hz > 0 else 0


def _thread_stacks(profile: SampleProfile) -> Iterator[tuple[Thread, list[Stack]]]:
    """Each thread that has stacks, with its stacks: the profile's thread order first, then any
    thread the stacks name but the thread table misses."""
    by_thread: dict[int, list[Stack]] = {}
    for stack in profile.stacks:
        by_thread.setdefault(stack.thread, []).append(stack)
    order = [t.serial for t in profile.threads if t.serial in by_thread]
    known = set(order)
    order += [s for s in by_thread if s not in known]
    for serial in order:
        yield profile.thread(serial), by_thread[serial]


# -- pprof ----------------------------------------------------------------------------------
# Field numbers of perftools.profiles (github.com/google/pprof, proto/profile.proto).
_PROFILE_SAMPLE_TYPE, _PROFILE_SAMPLE, _PROFILE_MAPPING, _PROFILE_LOCATION = 1, 2, 3, 4
_PROFILE_FUNCTION, _PROFILE_STRING_TABLE, _PROFILE_TIME_NANOS, _PROFILE_DURATION = 5, 6, 9, 10
_PROFILE_PERIOD_TYPE, _PROFILE_PERIOD, _PROFILE_COMMENT, _PROFILE_DEFAULT_TYPE = 11, 12, 13, 14
_VALUE_TYPE_TYPE, _VALUE_TYPE_UNIT = 1, 2
_SAMPLE_LOCATION_ID, _SAMPLE_VALUE, _SAMPLE_LABEL = 1, 2, 3
_LABEL_KEY, _LABEL_STR, _LABEL_NUM = 1, 2, 3
_MAPPING_ID, _MAPPING_FILENAME = 1, 5
_MAPPING_HAS_FUNCTIONS, _MAPPING_HAS_FILENAMES, _MAPPING_HAS_LINE_NUMBERS = 7, 8, 9
_LOCATION_ID, _LOCATION_MAPPING_ID, _LOCATION_LINE = 1, 2, 4
_LINE_FUNCTION_ID, _LINE_LINE = 1, 2
_FUNCTION_ID, _FUNCTION_NAME, _FUNCTION_FILENAME, _FUNCTION_START_LINE = 1, 2, 4, 5

_WIRE_VARINT, _WIRE_LEN = 0, 2
_U64 = (1 << 64) - 1


def _varint(value: int) -> bytes:
    """Base-128 varint; a negative int64 is its 64-bit two's complement (ten bytes)."""
    value &= _U64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class ProtoMessage:
    """A protobuf message being written, field after field.  Scalars equal to zero are left
    out, as proto3 does; repeated integers are packed."""

    def __init__(self) -> None:
        self.data = bytearray()

    def scalar(self, field: int, value: int) -> ProtoMessage:
        if value:
            self.data += _varint(field << 3 | _WIRE_VARINT)
            self.data += _varint(value)
        return self

    def raw(self, field: int, payload: bytes | bytearray) -> ProtoMessage:
        self.data += _varint(field << 3 | _WIRE_LEN)
        self.data += _varint(len(payload))
        self.data += payload
        return self

    def text(self, field: int, value: str) -> ProtoMessage:
        return self.raw(field, value.encode("utf-8")) if value else self

    def message(self, field: int, message: ProtoMessage) -> ProtoMessage:
        return self.raw(field, message.data)

    def packed(self, field: int, values: Iterable[int]) -> ProtoMessage:
        payload = b"".join(map(_varint, values))
        return self.raw(field, payload) if payload else self


class _Strings:
    """pprof's string table: every string once, referred to by index; "" is index 0."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        return self.index.setdefault(text, len(self.index))


def _value_type(strings: _Strings, kind: str, unit: str) -> ProtoMessage:
    return (
        ProtoMessage()
        .scalar(_VALUE_TYPE_TYPE, strings(kind))
        .scalar(_VALUE_TYPE_UNIT, strings(unit))
    )


def _label(key: int, text: int = 0, num: int = 0) -> ProtoMessage:
    return ProtoMessage().scalar(_LABEL_KEY, key).scalar(_LABEL_STR, text).scalar(_LABEL_NUM, num)


def protobuf_message() -> ProtoMessage:
    """An empty protobuf message to write fields into (the Pyroscope query uses it too)."""
    return ProtoMessage()


def to_pprof(
    profile: SampleProfile,
    metric_set: Iterable[PprofMetric] | None = None,
    sample_labels: Iterable[str] = ("thread", "pid"),
) -> bytes:
    """The profile as a gzip-compressed pprof protobuf (``go tool pprof FILE`` reads it).

    `metric_set` chooses the sample types; by default samples/count, cpu/nanoseconds,
    wall/nanoseconds (samples x period) and, when the profile recorded RSS, rss/bytes.  One pprof
    Sample per Stack, leaf first, labelled with its thread's name and pid (`sample_labels`
    chooses which; Pyroscope makes each a series label); one Location per (function, line).
    """
    metrics = _pprof_metrics(profile, metric_set)
    tables = _PprofTables(profile)
    out = ProtoMessage()
    for metric in metrics:
        out.message(_PROFILE_SAMPLE_TYPE, _value_type(tables.strings, *PPROF_SAMPLE_TYPES[metric]))
    _pprof_samples(out, profile, metrics, set(sample_labels), tables)
    # One mapping for the interpreter: it has functions, files and lines already, so pprof
    # does not try to symbolize addresses.
    out.message(
        _PROFILE_MAPPING,
        ProtoMessage()
        .scalar(_MAPPING_ID, 1)
        .scalar(_MAPPING_FILENAME, tables.strings("python"))
        .scalar(_MAPPING_HAS_FUNCTIONS, 1)
        .scalar(_MAPPING_HAS_FILENAMES, 1)
        .scalar(_MAPPING_HAS_LINE_NUMBERS, 1),
    )
    out.data += tables.body.data
    _pprof_header(out, profile, metrics, tables.strings)
    return gzip.compress(bytes(out.data), mtime=0)


def _pprof_metrics(
    profile: SampleProfile, metric_set: Iterable[PprofMetric] | None
) -> list[PprofMetric]:
    """The sample types asked for (or the default ones), in PPROF_METRICS order."""
    wanted = set(metric_set) if metric_set is not None else set(PPROF_DEFAULT_METRICS)
    if metric_set is None and not profile.memory:
        wanted.discard("memory")
    if "memory" in wanted:
        _require_memory(profile)
    unknown = wanted - set(PPROF_METRICS)
    if unknown or not wanted:
        raise LeadlineError(f"pprof sample types are chosen among {', '.join(PPROF_METRICS)}")
    return [m for m in PPROF_METRICS if m in wanted]


class _PprofTables:
    """The string table, and the Functions and Locations of the frames samples use, made as
    they are first needed (`body`: their messages, which follow the samples)."""

    def __init__(self, profile: SampleProfile) -> None:
        self.profile = profile
        self.strings = _Strings()
        self.body = ProtoMessage()
        self.functions: dict[tuple[str, str, int], int] = {}
        self.locations: dict[tuple[int, int], int] = {}
        # Each frame's location id, already varint-encoded: a stack is the join of its frames'.
        self.location_of_frame: list[bytes] = [b""] * len(profile.frames)

    def location(self, frame_index: int) -> bytes:
        """The varint-encoded location id of a frame of the profile."""
        encoded = self.location_of_frame[frame_index]
        if not encoded:
            frame = self.profile.frames[frame_index]
            encoded = self._location(frame.name, frame.file, frame.func_line, frame.line)
            self.location_of_frame[frame_index] = encoded
        return encoded

    def no_frames(self) -> bytes:
        """The location of a sample whose stack was empty (the interpreter ran no Python code
        of that thread: start-up, shutdown): a pprof Sample without locations is dropped by
        Pyroscope's ingest, and its time with it."""
        return self._location(NO_FRAMES, "", 0, 0)

    def _location(self, name: str, file: str, func_line: int, line: int) -> bytes:
        fkey = (name, file, func_line)
        fid = self.functions.get(fkey)
        if fid is None:
            fid = self.functions[fkey] = len(self.functions) + 1
            # No system_name: pprof "demangles" a function whose system name equals its name,
            # as C++, which turns Python's "<module>" into "" and strips "[...]" and "(...)".
            self.body.message(
                _PROFILE_FUNCTION,
                ProtoMessage()
                .scalar(_FUNCTION_ID, fid)
                .scalar(_FUNCTION_NAME, self.strings(name))
                .scalar(_FUNCTION_FILENAME, self.strings(file))
                .scalar(_FUNCTION_START_LINE, func_line),
            )
        lkey = (fid, line)
        loc = self.locations.get(lkey)
        if loc is None:
            loc = self.locations[lkey] = len(self.locations) + 1
            entry = ProtoMessage().scalar(_LINE_FUNCTION_ID, fid).scalar(_LINE_LINE, line)
            self.body.message(
                _PROFILE_LOCATION,
                ProtoMessage()
                .scalar(_LOCATION_ID, loc)
                .scalar(_LOCATION_MAPPING_ID, 1)
                .message(_LOCATION_LINE, entry),
            )
        return _varint(loc)


def _pprof_samples(
    out: ProtoMessage,
    profile: SampleProfile,
    metrics: list[PprofMetric],
    label_set: set[str],
    tables: _PprofTables,
) -> None:
    """One Sample per stack with a weight, leaf first, with its thread's labels."""
    period = period_ns(profile)
    strings = tables.strings
    for thread, stacks in _thread_stacks(profile):
        labels = ProtoMessage()
        if "thread" in label_set:
            labels.message(_SAMPLE_LABEL, _label(strings("thread"), text=strings(thread.name)))
        if "pid" in label_set:
            labels.message(_SAMPLE_LABEL, _label(strings("pid"), num=thread.pid))
        for stack in stacks:
            weights = {
                "samples": stack.samples,
                "cpu": stack.cpu_ns,
                "wall": stack.samples * period,
                "memory": stack.rss_bytes,
            }
            if "cpu_spread" in metrics:
                spread = row_spread(stack, stack.cpu_ns, stack.cpu_sq, idle=False)
                weights["cpu_spread"] = round(spread / SPREAD_UNIT) if stack.cpu_ns > 0 else 0
            values = [weights[m] for m in metrics]
            if not any(values):
                continue
            sample = ProtoMessage()
            ids = [tables.location(i) for i in reversed(stack.frames)] or [tables.no_frames()]
            sample.raw(_SAMPLE_LOCATION_ID, b"".join(ids))
            sample.packed(_SAMPLE_VALUE, values)
            sample.data += labels.data
            out.message(_PROFILE_SAMPLE, sample)


def _pprof_header(
    out: ProtoMessage, profile: SampleProfile, metrics: list[PprofMetric], strings: _Strings
) -> None:
    """The comments, the string table (complete once every other field has its ids), times,
    period and default sample type."""
    comments = [f"leadline {__version__}: {profile.mode} mode at {profile.rate_hz:g} Hz"]
    comments.append(f"{profile.ticks} ticks, {profile.missed} missed, {profile.torn} torn")
    if not profile.complete:
        comments.append("the capture was not stopped cleanly; samples up to its end")
    comment_ids = [strings(c) for c in comments]
    kind = "cpu" if profile.mode == "cpu" else "wall"
    default: PprofMetric = kind if kind in metrics else metrics[0]
    period_type = _value_type(strings, kind, "nanoseconds")
    default_id = strings(PPROF_SAMPLE_TYPES[default][0])

    for text in strings.index:  # dicts keep insertion order: the table's order
        out.raw(_PROFILE_STRING_TABLE, text.encode("utf-8", "backslashreplace"))
    out.scalar(_PROFILE_TIME_NANOS, profile.start_unix_ns)
    out.scalar(_PROFILE_DURATION, profile.duration_ns)
    out.message(_PROFILE_PERIOD_TYPE, period_type)
    out.scalar(_PROFILE_PERIOD, period_ns(profile))
    out.packed(_PROFILE_COMMENT, comment_ids)
    out.scalar(_PROFILE_DEFAULT_TYPE, default_id)


# -- speedscope -----------------------------------------------------------------------------
def _positive(stacks: list[Stack], metric: Metric) -> Iterator[tuple[Stack, int]]:
    """Stacks with a positive weight: flame graphs show time and memory growth, and a negative
    RSS change (memory given back) has no width to draw."""
    for stack in stacks:
        weight = stack.weight(metric)
        if weight > 0:
            yield stack, weight


def to_speedscope(profile: SampleProfile, metric: Metric = "samples") -> dict[str, Any]:
    """The profile in speedscope's file format: one sampled profile per thread, frames shared.

    Weights are the metric's (samples: unit "none"; cpu: nanoseconds; memory: bytes of RSS
    growth, where stacks that gave memory back are left out).
    """
    if metric == "memory":
        _require_memory(profile)
    frames: list[dict[str, Any]] = []
    for f in profile.frames:
        entry: dict[str, Any] = {"name": f.name, "file": f.file}
        if f.line > 0:
            entry["line"] = f.line
        frames.append(entry)
    profiles: list[dict[str, Any]] = []
    for thread, stacks in _thread_stacks(profile):
        chosen = list(_positive(stacks, metric))
        total = sum(w for _, w in chosen)
        profiles.append(
            {
                "type": "sampled",
                "name": f"{thread.name} (tid {thread.tid})" if thread.tid else thread.name,
                "unit": SPEEDSCOPE_UNITS[metric],
                "startValue": 0,
                "endValue": total,
                "samples": [list(s.frames) for s, _ in chosen],
                "weights": [w for _, w in chosen],
            }
        )
    heaviest = max(range(len(profiles)), key=lambda i: profiles[i]["endValue"], default=0)
    argv = profile.meta.get("argv")
    program = " ".join(map(str, argv)) if isinstance(argv, list) and argv else "python"
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": f"{program} ({metric})",
        "activeProfileIndex": heaviest,
        "exporter": f"leadline {__version__}",
    }


# -- collapsed stacks -----------------------------------------------------------------------
# The characters that end a folded line for the tools that read them (flamegraph.pl, inferno,
# speedscope and leadline split at "\n", and a "\r" before it is dropped).  Other characters
# that str.splitlines() would split at (U+2028, U+2029, U+0085, form feeds) stay in the name.
_LINE_BREAKS = str.maketrans(dict.fromkeys("\n\r", " "))


def _folded(text: str) -> str:
    """One frame of a folded line: ';' separates frames and a line break ends the stack, so
    neither may appear inside a frame (names and paths come from the profiled program, as do
    lone surrogates, written as \\udXXX: untrusted.py)."""
    return escape_surrogates(text).replace(";", ":").translate(_LINE_BREAKS)


def to_collapsed(profile: SampleProfile, metric: Metric = "samples", threads: bool = False) -> str:
    """Folded stacks (flamegraph.pl, speedscope, inferno): one ``outer;...;leaf weight`` line per
    distinct stack, frames as ``name (file:line)`` like py-spy.

    With `threads`, each stack starts with a ``thread (NAME)`` frame.  Zero weights and negative
    memory weights (RSS given back) are left out; identical lines are merged.
    """
    return "".join(iter_collapsed(profile, metric, threads))


def iter_collapsed(
    profile: SampleProfile, metric: Metric = "samples", threads: bool = False
) -> Iterator[str]:
    """:func:`to_collapsed`'s lines, one at a time.  The lines are merged by the labels of
    their frames (numbers: two frames can have one label), and each is made only as it is
    written: a capture of hundreds of 10,000-deep stacks holds hundreds of megabytes of text."""
    if metric == "memory":
        _require_memory(profile)
    labels = [_folded(f.label) for f in profile.frames]
    label_ids: dict[str, int] = {}
    ids = [label_ids.setdefault(label, len(label_ids)) for label in labels]
    texts = list(label_ids)
    thread_ids: dict[str, int] = {}
    lines: dict[tuple[int, ...], int] = {}
    for thread, stacks in _thread_stacks(profile):
        # With threads, a stack's first number is its thread's (negative: not a label).
        prefix = (-1 - thread_ids.setdefault(thread.name, len(thread_ids)),) if threads else ()
        for stack, weight in _positive(stacks, metric):
            key = prefix + tuple(ids[i] for i in stack.frames)
            lines[key] = lines.get(key, 0) + weight
    names = [_folded(f"thread ({name})") for name in thread_ids]
    for key, weight in lines.items():
        parts = [names[-1 - k] if k < 0 else texts[k] for k in key]
        yield f"{';'.join(parts) or NO_FRAMES} {weight}\n"
