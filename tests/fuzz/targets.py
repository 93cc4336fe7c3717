"""The fuzz targets: one function per reader, each taking the fuzzer's bytes.

The oracle is the same for every target: reading any input either succeeds or raises
:class:`LeadlineError` with a one-line message (what the CLI prints as ``leadline: error: ...``
with exit status 2).  Any other exception escapes the target and is a finding; a signal (the C
decoder), a hang or unbounded memory is caught by the fuzzer driving the target (run.py: a
per-input time limit and an RSS limit).

The targets are plain functions so that the regression tests (tests/test_fuzz_crashers.py)
replay every kept crasher through exactly this oracle, without the fuzzer.

- ``decoder``: the C chunk decoder alone: ``_native.decode_events``, ``_native.decode_rss`` and
  the ``_native.Aggregator`` fed with several event payloads over an RSS timeline.
- ``reader``: a capture file through the reader and the analyses, in-process without the
  commands' parsing and output: many more inputs a second than ``capture``.
- ``capture``: a whole capture file through every reading command, in-process through
  ``leadline.cli.main``: ``report`` (JSON, HTML), ``log`` (text, JSON), ``export`` (pprof,
  speedscope, collapsed, chrome) and ``diff`` of the capture with itself (JSON, HTML).
- ``report``: the same files through the terminal reports (rich tables, slow).
- ``pprof``: a pprof profile (gzip or raw protobuf) as ``leadline diff`` reads it, compared
  with a fixed good profile both ways and per unit of work (JSON and HTML).
- ``collapsed``: folded stacks as ``leadline diff`` reads them, likewise.
- ``pyroscope``: the answers of a Pyroscope server to ``leadline diff pyroscope://...``: the
  merged profile and the companion sample-count (and spread) profile, parsed by ``fleet_side``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

# Imported by run.py inside atheris.instrument_imports(), so leadline's modules are imported
# (and instrumented) only when this module is.
from leadline import _native, cli
from leadline.analyse import diff, samples, trace
from leadline.analyse.model import Metric
from leadline.analyse.probes import probe_data
from leadline.analyse.samples import load_profile
from leadline.capture.foreign import read_collapsed, read_pprof
from leadline.capture.reader import Capture
from leadline.errors import LeadlineError
from leadline.fleet.pyroscope import FleetQuery, parse_fleet_url
from leadline.render import encode
from leadline.render.diff_html import render_diff_html
from leadline.render.marks_table import marks_json

Target = Callable[[bytes], None]


class OracleViolation(AssertionError):
    """A reader answered with something other than success or a one-line LeadlineError."""


def _one_line(e: LeadlineError) -> None:
    msg = str(e)
    if len(msg.splitlines()) != 1:
        raise OracleViolation(f"a LeadlineError that is not one line: {msg!r}")


@contextlib.contextmanager
def oracle() -> Iterator[None]:
    """Success, or a LeadlineError of one line; any other exception goes through."""
    try:
        yield
    except LeadlineError as e:
        _one_line(e)


class _Captured(io.StringIO):
    """What a command prints, kept in memory; its file descriptor is the real one, so that
    faulthandler (the fuzzer's timeout report) still writes to the terminal."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


def _cli(argv: list[str]) -> None:
    """One command in-process: 0 (or 1, --fail-above) on success, 2 with one line on stderr
    for bad input; an exception other than LeadlineError escapes cli.main and is a finding."""
    err = _Captured(2)
    with contextlib.redirect_stdout(_Captured(1)), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    if status == 2:
        lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("leadline: error:")]
        if len(lines) != 1:
            raise OracleViolation(
                f"{argv}: exit status 2 without one error line: {err.getvalue()!r}"
            )
    elif status not in (0, 1):
        raise OracleViolation(f"{argv}: exit status {status}")


# -- the C decoder ---------------------------------------------------------------------------
SEPARATOR = b"\xffSEP\xff"  # splits a decoder input into its parts (seeds.py writes them so)


def decoder(data: bytes) -> None:
    """``RSS payload SEP events payload SEP events payload ...``: each payload decoded alone,
    then the event payloads fed to one Aggregator (streams 1, 2, 3, 1, ...) over the timeline."""
    parts = data.split(SEPARATOR)
    rss, events = parts[0], parts[1:]
    try:
        times, values = _native.decode_rss(rss)
    except ValueError:
        times = values = b""
    for payload in events:
        with contextlib.suppress(ValueError):
            _native.decode_events(payload)
    agg = _native.Aggregator(times, values)
    for i, payload in enumerate(events):
        with contextlib.suppress(ValueError):
            agg.feed(i % 3 + 1, payload)
    agg.finish()
    # The arrays' length need not be a multiple of 8 for a hostile caller either.
    _native.Aggregator(rss[:13], rss[:7]).finish()


# -- captures --------------------------------------------------------------------------------
class _Scratch:
    """One private directory per process for the input files the commands read."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="leadline-fuzz-"))

    def file(self, name: str, data: bytes) -> str:
        path = self.dir / name
        path.write_bytes(data)
        return str(path)


_scratch: _Scratch | None = None


def scratch() -> _Scratch:
    global _scratch
    if _scratch is None:
        _scratch = _Scratch()
    return _scratch


CAPTURE_COMMANDS: list[list[str]] = [
    ["report", "{cap}", "--json"],
    ["report", "{cap}", "--html", "-o", os.devnull],
    ["log", "{cap}"],
    ["log", "{cap}", "--json"],
    ["export", "{cap}", "--format", "pprof", "-o", os.devnull],
    ["export", "{cap}", "--format", "speedscope", "-o", os.devnull],
    ["export", "{cap}", "--format", "collapsed", "-o", os.devnull],
    ["export", "{cap}", "--format", "chrome", "-o", os.devnull],
    ["diff", "{cap}", "{cap}", "--json"],
    ["diff", "{cap}", "{cap}", "--html", "-o", os.devnull],
]
# The terminal reports, a target of their own: rich's tables take ten times as long as all the
# commands above together, which would slow the fuzzing of everything else as much.
REPORT_COMMANDS: list[list[str]] = [
    ["report", "{cap}"],
    ["report", "{cap}", "--callers", "*", "--callees", "*"],
    ["report", "{cap}", "--metric", "memory", "--idle", "--sort", "peak"],
    ["diff", "{cap}", "{cap}"],
]


def reader(data: bytes) -> None:
    """A capture file through the reader and the analyses under every command, in-process and
    without the commands' parsing and output (so ten times as many inputs a second as
    ``capture``): events in file and time order, samples, the trace analysis or the sampling
    profile with its views, probe data, marks, and the machine forms of each."""
    path = scratch().file("input.lead", data)
    with oracle(), Capture(path) as cap:
        for _ in cap.events_by_time():
            pass
        mode = cap.meta.get("mode")
        if mode == "sample":
            p = load_profile(cap)
            metrics: tuple[Metric, ...] = ("samples", "cpu", "memory")
            for metric in metrics:
                weighted = samples.selected(p, True, metric)
                samples.function_rows(p, weighted)
                keys = {samples.func_key(f) for f in p.frames[:3]}
                samples.call_tree(p, weighted, keys, "callers")
                samples.call_tree(p, weighted, keys, "callees")
            json.dumps(samples.to_json(p))
            encode.to_pprof(p)
            encode.to_collapsed(p, threads=True)
            json.dumps(encode.to_speedscope(p))
        elif mode == "probe":
            json.dumps(probe_data(cap))
        else:
            json.dumps(trace.to_json(trace.analyse(cap)))
        json.dumps(marks_json(cap))
        for serial in list(cap.threads) + list(cap.tasks):
            cap.thread_name(serial)


def capture(data: bytes) -> None:
    """A capture file through every reading command but the terminal reports."""
    path = scratch().file("input.lead", data)
    for argv in CAPTURE_COMMANDS:
        _cli([a.format(cap=path) for a in argv])


def report(data: bytes) -> None:
    """A capture file through the terminal reports (text tables)."""
    path = scratch().file("input.lead", data)
    for argv in REPORT_COMMANDS:
        _cli([a.format(cap=path) for a in argv])


# -- profiles of other tools -----------------------------------------------------------------
# A small good profile to compare each input with, so that the comparison runs too.
GOOD_COLLAPSED = b"main;work;leaf 30\nmain;work 10\nmain;other 5\n"


def _compare(side: diff.Side) -> None:
    """What ``leadline diff`` does with a side once read: compare it both ways with a good one
    and with itself per unit of work, and write the JSON document (finite numbers only, as the
    command writes it) and the HTML page."""
    good = diff.load_side(scratch().file("good.txt", GOOD_COLLAPSED))
    for result in (diff.compare(good, side), diff.compare(side, good)):
        json.dumps(diff.to_json(result), allow_nan=False)
    json.dumps(
        diff.to_json(diff.compare(side, side, diff.Settings(per=(3.0, 4.0)))), allow_nan=False
    )
    render_diff_html(diff.to_json(diff.compare(good, side, diff.Settings(tree=True))))


def pprof(data: bytes) -> None:
    """A pprof profile: read as ``leadline diff`` reads it and compared; once in ten inputs
    (chosen by content, so a finding replays alike) through the command itself."""
    path = scratch().file("input.pb", data)
    with oracle():
        _compare(diff.load_side(path))
    with oracle():
        read_pprof(path, data, "cpu")
    if zlib.crc32(data) % 10 == 0:
        _cli(["diff", scratch().file("good.txt", GOOD_COLLAPSED), path, "--json"])


def collapsed(data: bytes) -> None:
    """Folded stacks: read as ``leadline diff`` reads them (and directly, as text) and compared;
    once in ten inputs through the command itself."""
    path = scratch().file("input.txt", data)
    with oracle():
        read_collapsed(path, data.decode("utf-8", "replace"))
    with oracle():
        _compare(diff.load_side(path))
    if zlib.crc32(data) % 10 == 0:
        _cli(["diff", path, scratch().file("good.txt", GOOD_COLLAPSED), "--json"])


# -- Pyroscope answers -----------------------------------------------------------------------
_QUERY: FleetQuery | None = None


def _query() -> FleetQuery:
    global _QUERY
    if _QUERY is None:
        _QUERY = parse_fleet_url("pyroscope://127.0.0.1:4040/fuzz?from=1700000000&until=1700000600")
    return _QUERY


def pyroscope(data: bytes) -> None:
    """``u32 n, n bytes: the merged profile; the rest: the sample-count profile``: the
    answers of a server to ``leadline diff pyroscope://...`` (CPU time), parsed and compared.
    The spread query (cpu_spread) gets the sample-count answer too: the same hostile bytes
    through the path that turns a spread into each stack's variance."""
    n = struct.unpack("<I", data[:4])[0] if len(data) >= 4 else 0
    merged, counts = data[4 : 4 + n], data[4 + n :]
    answers = {"merged": merged, "counts": counts}

    def answer(q: FleetQuery) -> bytes:
        companion = ":cpu:nanoseconds:" not in q.profile_type
        return answers["counts" if companion else "merged"]

    with oracle():
        _compare(diff.fleet_side(_query(), answer))


TARGETS: dict[str, Target] = {
    "decoder": decoder,
    "reader": reader,
    "capture": capture,
    "report": report,
    "pprof": pprof,
    "collapsed": collapsed,
    "pyroscope": pyroscope,
}
