"""Profiles written by other tools, read back as weighted stacks: pprof and collapsed stacks.

``leadline diff`` compares any two profiles, not only captures: a pprof file (from
``leadline export``, Go's or any other pprof writer) or Brendan Gregg's folded stacks (from
``leadline export --format collapsed``, py-spy, perf + stackcollapse, ...).  Each is read into a
:class:`ForeignProfile`: distinct stacks of frames, outermost first, with a weight.

The pprof reader is the decoder half of the small protobuf codec in :mod:`export_formats`: the
format needs only varints and length-delimited fields.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..analyse.model import Frame
from ..errors import LeadlineError


@dataclass
class ForeignProfile:
    kind: str  # "pprof" or "collapsed"
    sample_type: str  # pprof: the chosen sample type ("samples", "cpu", ...); collapsed: "samples"
    unit: str  # "count", "nanoseconds", ... ("count" for collapsed stacks)
    period: int  # pprof's sampling period (0 when unknown)
    period_type: str  # pprof's period type ("cpu", "wall", ...; "" when unknown)
    stacks: list[tuple[tuple[Frame, ...], float]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    duration_ns: int = 0


# -- protobuf decoding ----------------------------------------------------------------------
class _Corrupt(Exception):
    pass


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise _Corrupt("a varint runs past its message")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field: an int for varints and fixed-size fields, bytes for
    length-delimited ones."""
    i = 0
    n = len(buf)
    while i < n:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(buf, i)
            if i + size > n:
                raise _Corrupt("a field runs past its message")
            yield number, buf[i : i + size]
            i += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if i + width > n:
                raise _Corrupt("a field runs past its message")
            yield number, int.from_bytes(buf[i : i + width], "little")
            i += width
        else:
            raise _Corrupt(f"unknown wire type {wire}")


def _ints(value: int | bytes) -> list[int]:
    """A repeated integer field's values: one varint, or a packed run of them."""
    if isinstance(value, int):
        return [value]
    out = []
    i = 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _message(value: int | bytes) -> bytes:
    if isinstance(value, int):
        raise _Corrupt("a message field holds a number")
    return value


# Field numbers of perftools.profiles.Profile and its messages (profile.proto).
_P_SAMPLE_TYPE, _P_SAMPLE, _P_LOCATION, _P_FUNCTION, _P_STRINGS = 1, 2, 4, 5, 6
_P_DURATION, _P_PERIOD_TYPE, _P_PERIOD, _P_COMMENT, _P_DEFAULT_TYPE = 10, 11, 12, 13, 14


MAX_STACK_DEPTH = 8192
# Frames of all samples together, per byte of the (uncompressed) profile: a real profile spends
# at least a byte on each frame of each sample (a location id) and rarely inlines more than a
# few functions in one location; more is an input made to expand.
FRAMES_PER_BYTE = 64


@dataclass
class _Pprof:
    """The tables of a pprof Profile message, as read (ids and string indexes, unresolved)."""

    strings: list[str] = field(default_factory=list)
    types: list[tuple[int, int]] = field(default_factory=list)  # (type, unit) string indexes
    samples: list[tuple[list[int], list[int]]] = field(default_factory=list)  # locations, values
    locations: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # id -> (fid, line)
    functions: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # name, file, start
    period: int = 0
    period_type: tuple[int, int] = (0, 0)
    duration: int = 0
    default_type: int = 0
    comments: list[int] = field(default_factory=list)

    def s(self, i: int) -> str:
        return self.strings[i] if 0 <= i < len(self.strings) else ""


def _value_type(buf: bytes) -> tuple[int, int]:
    t = u = 0
    for k, v in _fields(buf):
        if k == 1 and isinstance(v, int):
            t = v
        elif k == 2 and isinstance(v, int):
            u = v
    return t, u


def _sample(buf: bytes) -> tuple[list[int], list[int]]:
    locs: list[int] = []
    values: list[int] = []
    for k, v in _fields(buf):
        if k == 1:
            locs += _ints(v)
        elif k == 2:
            values += [_signed(x) for x in _ints(v)]
    return locs, values


def _location(buf: bytes) -> tuple[int, list[tuple[int, int]]]:
    loc_id = 0
    lines: list[tuple[int, int]] = []
    for k, v in _fields(buf):
        if k == 1 and isinstance(v, int):
            loc_id = v
        elif k == 4:
            fid = line = 0
            for k2, v2 in _fields(_message(v)):
                if k2 == 1 and isinstance(v2, int):
                    fid = v2
                elif k2 == 2 and isinstance(v2, int):
                    line = _signed(v2)
            lines.append((fid, line))
    return loc_id, lines


def _function(buf: bytes) -> tuple[int, tuple[int, int, int]]:
    fid = name = filename = start = 0
    for k, v in _fields(buf):
        if not isinstance(v, int):
            continue
        if k == 1:
            fid = v
        elif k == 2:
            name = v
        elif k == 4:
            filename = v
        elif k == 5:
            start = _signed(v)
    return fid, (name, filename, start)


def _parse_pprof(raw: bytes) -> _Pprof:
    p = _Pprof()
    for number, value in _fields(raw):
        if number == _P_SAMPLE_TYPE:
            p.types.append(_value_type(_message(value)))
        elif number == _P_SAMPLE:
            p.samples.append(_sample(_message(value)))
        elif number == _P_LOCATION:
            loc_id, lines = _location(_message(value))
            p.locations[loc_id] = lines
        elif number == _P_FUNCTION:
            fid, function = _function(_message(value))
            p.functions[fid] = function
        elif number == _P_STRINGS:
            p.strings.append(_message(value).decode("utf-8", "replace"))
        elif number == _P_DURATION and isinstance(value, int):
            p.duration = value
        elif number == _P_PERIOD_TYPE:
            p.period_type = _value_type(_message(value))
        elif number == _P_PERIOD and isinstance(value, int):
            p.period = _signed(value)
        elif number == _P_COMMENT:
            p.comments += _ints(value)
        elif number == _P_DEFAULT_TYPE and isinstance(value, int):
            p.default_type = value
    return p


def _type_index(p: _Pprof, path: str, sample_type: str | None) -> int:
    """The sample type read: the one asked for, else samples (counts: their noise is known
    exactly), else the profile's default type, else pprof's own default, the last."""
    if not p.types:
        raise _Corrupt("it has no sample types")
    names = [p.s(t) for t, _ in p.types]
    if sample_type is not None:
        if sample_type not in names:
            raise LeadlineError(
                f"{path}: no sample type {sample_type!r} in this pprof profile "
                f"(it has: {', '.join(names)})"
            )
        return names.index(sample_type)
    if "samples" in names:
        return names.index("samples")
    if p.default_type and p.s(p.default_type) in names:
        return names.index(p.s(p.default_type))
    return len(names) - 1


def _stacks(p: _Pprof, index: int, path: str, size: int) -> list[tuple[tuple[Frame, ...], float]]:
    """The samples' stacks (outermost first) with their weights of sample type `index`, the
    same stack merged; a file of `size` bytes may expand to a bounded number of frames."""
    frame_cache: dict[tuple[int, int], Frame] = {}

    def frame(fid: int, line: int) -> Frame:
        fr = frame_cache.get((fid, line))
        if fr is None:
            name, filename, start = p.functions.get(fid, (0, 0, 0))
            fr = frame_cache[(fid, line)] = Frame(
                p.s(name) or f"<function {fid}>", p.s(filename), line, start
            )
        return fr

    merged: dict[tuple[Frame, ...], float] = {}
    budget = FRAMES_PER_BYTE * size + MAX_STACK_DEPTH
    for locs, values in p.samples:
        if index >= len(values) or values[index] == 0:
            continue
        if values[index] < 0:
            # What `pprof -diff_base` writes: a difference of two profiles, not a profile.
            raise LeadlineError(
                f"{path}: sample type {p.s(p.types[index][0])!r} has negative values (a "
                "difference of two profiles?), which cannot be compared"
            )
        frames: list[Frame] = []
        # Locations are leaf first; within one, inlined functions come before their caller.
        for loc in reversed(locs):
            for fid, line in reversed(p.locations.get(loc, [])):
                frames.append(frame(fid, line))
        # A sample names each location in a byte or two, and a location may hold many lines:
        # a small file can describe stacks far deeper, and far more frames, than it is long.
        if len(frames) > MAX_STACK_DEPTH:
            raise LeadlineError(
                f"{path}: a sample's stack is {len(frames):,} frames deep (more than "
                f"{MAX_STACK_DEPTH:,}, the deepest leadline's own sampler keeps by default)"
            )
        budget -= len(frames)
        if budget < 0:
            raise LeadlineError(f"{path}: its samples expand to more frames than its size allows")
        key = tuple(frames)
        merged[key] = merged.get(key, 0.0) + values[index]
    return list(merged.items())


def _decode_pprof(path: str, raw: bytes, sample_type: str | None) -> ForeignProfile:
    p = _parse_pprof(raw)
    index = _type_index(p, path, sample_type)
    out = ForeignProfile(
        kind="pprof",
        sample_type=p.s(p.types[index][0]),
        unit=p.s(p.types[index][1]),
        period=max(p.period, 0),
        period_type=p.s(p.period_type[0]),
        comments=[p.s(c) for c in p.comments],
        duration_ns=p.duration,
    )
    out.stacks = _stacks(p, index, path, len(raw))
    return out


def read_pprof(path: str, data: bytes, sample_type: str | None = None) -> ForeignProfile:
    """A pprof profile (gzip-compressed or not) as weighted stacks of `sample_type` (default:
    samples when there is such a type, else the profile's default type)."""
    try:
        raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        return _decode_pprof(path, raw, sample_type)
    except (_Corrupt, OSError, EOFError, zlib.error) as e:
        raise LeadlineError(f"{path}: not a readable pprof profile ({e})") from None


# -- collapsed stacks -----------------------------------------------------------------------
# One stack per line, and a line ends at "\n" only: names may hold any other character,
# including those str.splitlines() would break at (U+2028, U+0085, form feeds...), and only
# ASCII blanks separate the stack from its count.
_FOLDED_LINE = re.compile(r"^(.*[^ \t])[ \t]+(\d+(?:\.\d+)?)$", re.DOTALL)
MAX_WEIGHT = float(1 << 63)  # pprof's int64: larger counts are not counts of anything


def folded_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of each line of folded stacks that is neither blank nor a comment."""
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r").strip(" \t")
        if line and not line.startswith("#"):
            yield lineno, line


def looks_folded(line: str) -> bool:
    """Whether a line (from folded_lines) has the shape of a folded stack."""
    return _FOLDED_LINE.match(line) is not None


# A line number of at most 18 digits (int() refuses more than 4,300, with ValueError); a longer
# run of digits is part of the file's name.
_FRAME_LABEL = re.compile(r"^(.*) \(([^()]*?)(?::(\d{1,18}))?\)$")


def parse_frame_label(label: str) -> Frame:
    """``name (file:line)`` (leadline, py-spy), ``name (file)`` or a bare ``name``."""
    m = _FRAME_LABEL.match(label)
    if m is None:
        return Frame(label, "", 0, 0)
    line = int(m.group(3) or 0)
    return Frame(m.group(1), m.group(2), line, 0)


def read_collapsed(path: str, text: str) -> ForeignProfile:
    """Folded stacks, ``outer;...;leaf COUNT`` per line; blank lines and ``#`` comments are
    skipped.  Any other line is an error that names it."""
    merged: dict[tuple[Frame, ...], float] = {}
    labels: dict[str, Frame] = {}
    for lineno, line in folded_lines(text):
        m = _FOLDED_LINE.match(line)
        if m is None:
            raise LeadlineError(
                f"{path}: line {lineno} is not a folded stack ('frame;frame;... COUNT')"
            )
        weight = float(m.group(2))
        if weight > MAX_WEIGHT:
            raise LeadlineError(f"{path}: line {lineno}: the count is too large ({weight:g})")
        frames = []
        for label in m.group(1).split(";"):
            fr = labels.get(label)
            if fr is None:
                fr = labels[label] = parse_frame_label(label)
            frames.append(fr)
        key = tuple(frames)
        merged[key] = merged.get(key, 0.0) + weight
    if not merged:
        raise LeadlineError(f"{path}: no folded stacks in it")
    return ForeignProfile(
        kind="collapsed",
        sample_type="samples",
        unit="count",
        period=0,
        period_type="",
        stacks=list(merged.items()),
    )
