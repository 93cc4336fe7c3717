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
- ``capture``: a whole capture file through every reading command, in-process through
  ``leadline.cli.main``: ``report`` (text, JSON, HTML), ``log`` (text, JSON), ``export`` (pprof,
  speedscope, collapsed, chrome) and ``diff`` of the capture with itself.
- ``pprof``: a pprof profile (gzip or raw protobuf) as ``leadline diff`` reads it, compared
  (text and JSON) with a fixed good profile.
- ``collapsed``: folded stacks as ``leadline diff`` reads them, likewise.
- ``pyroscope``: the answers of a Pyroscope server to ``leadline diff pyroscope://...``: the
  merged profile and the companion sample-count profile, parsed by ``fleet_side``.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

# Imported by run.py inside atheris.instrument_imports(), so leadline's modules are imported
# (and instrumented) only when this module is.
from leadline import _native, cli
from leadline.analyse import diff
from leadline.capture.foreign import read_collapsed, read_pprof
from leadline.errors import LeadlineError
from leadline.fleet.pyroscope import FleetQuery, parse_fleet_url

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
            raise OracleViolation(f"{argv}: exit status 2 without one error line: {err.getvalue()!r}")
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


def pprof(data: bytes) -> None:
    """A pprof profile: read directly, then through ``leadline diff`` against good stacks."""
    with oracle():
        read_pprof("input.pb", data)
    base = scratch().file("base.txt", GOOD_COLLAPSED)
    path = scratch().file("input.pb", data)
    _cli(["diff", base, path, "--json"])
    _cli(["diff", path, base, "--html", "-o", os.devnull])
    _cli(["diff", path, path, "--sample-type", "cpu", "--per", "3,4"])


def collapsed(data: bytes) -> None:
    """Folded stacks: read directly (as text), then through ``leadline diff``."""
    with oracle():
        read_collapsed("input.txt", data.decode("utf-8", "replace"))
    base = scratch().file("base.txt", GOOD_COLLAPSED)
    path = scratch().file("input.txt", data)
    _cli(["diff", base, path, "--json"])
    _cli(["diff", path, base, "--html", "-o", os.devnull])
    _cli(["diff", path, path, "--per", "2"])


# -- Pyroscope answers -----------------------------------------------------------------------
_QUERY: FleetQuery | None = None


def _query() -> FleetQuery:
    global _QUERY
    if _QUERY is None:
        _QUERY = parse_fleet_url("pyroscope://127.0.0.1:4040/fuzz?from=1700000000&until=1700000600")
    return _QUERY


def pyroscope(data: bytes) -> None:
    """``u32 n, n bytes: the merged profile; the rest: the sample-count profile``: the two
    answers of a server to ``leadline diff pyroscope://...`` (CPU time), parsed and compared."""
    n = struct.unpack("<I", data[:4])[0] if len(data) >= 4 else 0
    merged, counts = data[4 : 4 + n], data[4 + n :]
    answers = {"merged": merged, "counts": counts}

    def answer(q: FleetQuery) -> bytes:
        return answers["counts" if ":samples:count:" in q.profile_type else "merged"]

    q = _query()
    with oracle():
        base = diff.fleet_side(q, answer)
        other = diff.load_side(scratch().file("base.txt", GOOD_COLLAPSED))
        result = diff.compare(other, base)
        diff.to_json(result)
        diff.compare(base, base, diff.Settings(per=(1.0, 2.0)))


TARGETS: dict[str, Target] = {
    "decoder": decoder,
    "capture": capture,
    "report": report,
    "pprof": pprof,
    "collapsed": collapsed,
    "pyroscope": pyroscope,
}
