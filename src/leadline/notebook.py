"""Jupyter and IPython: ``%load_ext leadline``, then

- ``%leadline_run STATEMENT`` or a cell starting with ``%%leadline``: the code is sampled and its
  flame graph shown in the output (the page of ``report --html``, in a frame of its own);
- ``%leadline_trace STATEMENT`` or ``%%leadline_trace``: every call is traced, and a table of its
  functions with their calls, time and memory is shown.

The code runs in the notebook's namespace, on the kernel's thread, as the cell would.  What is
shown is the code's own work: each stack of the cell's thread is cut above the cell's first
frame (IPython's machinery is not the program), the kernel's own threads are left out, and the
threads the code starts are kept.  ``-o FILE`` keeps the capture for ``leadline report``."""

from __future__ import annotations

import dataclasses
import re
import shlex
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, line_magic, magics_class
from IPython.display import HTML, display

from .analyse.model import SampleProfile
from .analyse.samples import load_profile
from .analyse.trace import analyse, subtree_functions
from .capture.reader import Capture
from .record.profiler import SAMPLE_MODES, ProfileOptions, Profiler
from .record.tracer import TraceOptions, Tracer
from .render.notebook import page_in_frame, trace_table
from .render.sample_html import render_sample_html


@dataclass(frozen=True)
class MagicOptions:
    rate: float = 1000.0  # -r/--rate HZ
    mode: str = "wall"  # --mode M
    output: str | None = None  # -o/--output FILE
    limit: int = 25  # -n/--limit N
    statement: str = ""  # the line magic's code: the rest of the line, as written


_OPTION = re.compile(r"\s*(-r|--rate|--mode|-o|--output|-n|--limit)(?:=|\s+)(\S+)")
_NAMES = {"-r": "rate", "--rate": "rate", "--mode": "mode", "-o": "output", "--output": "output",
          "-n": "limit", "--limit": "limit"}  # fmt: skip


def parse_options(line: str, allowed: tuple[str, ...]) -> MagicOptions:
    """The options at the start of a magic's line (each takes a value: `-o FILE`, `--rate=500`),
    then the statement, kept exactly as written (quotes and spaces included)."""
    values: dict[str, Any] = {}
    pos = 0
    while m := _OPTION.match(line, pos):
        name = _NAMES[m[1]]
        if name not in allowed:
            raise UsageError(f"{m[1]} is not an option of this magic")
        try:  # a quoted value loses its quotes, as in a shell
            (values[name],) = shlex.split(m[2])
        except ValueError:
            values[name] = m[2]
        pos = m.end()
    rest = line[pos:].strip()
    if rest.startswith("-") and not rest.startswith("-("):
        raise UsageError(f"unknown option {rest.split()[0]!r}")
    try:
        rate = float(values.get("rate", 1000.0))
        limit = int(values.get("limit", 25))
    except ValueError as e:
        raise UsageError(f"not a number: {e}") from None
    mode = str(values.get("mode", "wall"))
    if mode not in SAMPLE_MODES:
        raise UsageError(f"--mode must be one of {', '.join(SAMPLE_MODES)}")
    if limit < 1:
        raise UsageError("--limit must be at least 1")
    return MagicOptions(rate, mode, values.get("output"), limit, rest)


def cell_profile(
    p: SampleProfile, cell_file: str, cell_tid: int, before: set[int]
) -> SampleProfile:
    """The profile of the cell's code: the cell's thread's stacks from the cell's first frame
    down (stacks without one, IPython's own work around the cell, left out), the threads the
    cell started whole, and the threads that ran before it (the kernel's) left out."""
    serial_tid = {t.serial: t.tid for t in p.threads}
    stacks = []
    for s in p.stacks:
        tid = serial_tid.get(s.thread, 0)
        if tid == cell_tid:
            frames = list(s.frames)
            first = next((i for i, f in enumerate(frames) if p.frames[f].file == cell_file), -1)
            if first < 0:
                continue
            stacks.append(dataclasses.replace(s, frames=tuple(frames[first:])))
        elif tid not in before:
            stacks.append(s)
    # Only the frames those stacks use, renumbered.
    index: dict[int, int] = {}
    for s in stacks:
        for f in s.frames:
            index.setdefault(f, len(index))
    stacks = [dataclasses.replace(s, frames=tuple(index[f] for f in s.frames)) for s in stacks]
    used = [p.frames[f] for f in index]
    kept = {s.thread for s in stacks}
    threads = [t for t in p.threads if t.serial in kept]
    return dataclasses.replace(p, frames=used, stacks=stacks, threads=threads, lanes={})


def _show(fragment: str) -> None:
    display(HTML(fragment))  # type: ignore[no-untyped-call]


@magics_class
class LeadlineMagics(Magics):
    """The magics; registered by ``%load_ext leadline``."""

    def _run(self, source: str, recorder: Profiler | Tracer) -> str:
        """Run the code as IPython runs a cell (compiled as it compiles cells, whose file name
        is the one tracebacks show the cell's source with), in the notebook's namespace, while
        `recorder` records; the code's file name."""
        shell = self.shell
        if shell is None:
            raise UsageError("leadline's magics need an IPython shell")
        if not source.strip():
            raise UsageError("nothing to run: give a statement or a cell")
        src = shell.transform_cell(source)  # type: ignore[no-untyped-call]
        filename = shell.compile.cache(src)
        code = shell.compile(src, filename, "exec")
        with recorder:
            exec(code, shell.user_ns)
        return str(filename)

    @line_magic
    def leadline_run(self, line: str) -> None:
        """Sample a statement and show its flame graph:
        %leadline_run [-r HZ] [--mode M] [-o FILE] STATEMENT"""
        o = parse_options(line, ("rate", "mode", "output"))
        self._sample(o.statement, o)

    @cell_magic
    def leadline(self, line: str, cell: str) -> None:
        """Sample the cell and show its flame graph: %%leadline [-r HZ] [--mode M] [-o FILE]"""
        o = parse_options(line, ("rate", "mode", "output"))
        if o.statement:
            raise UsageError(f"%%leadline takes options only, not {o.statement!r}")
        self._sample(cell, o)

    def _sample(self, source: str, o: MagicOptions) -> None:
        before = {t.native_id for t in threading.enumerate() if t.native_id}
        me = threading.get_native_id()
        with tempfile.TemporaryDirectory(prefix="leadline-cell-") as tmp:
            path = Path(o.output) if o.output else Path(tmp) / "cell.lead"
            profiler = Profiler(path, ProfileOptions(rate_hz=o.rate, mode=o.mode))
            filename = self._run(source, profiler)
            with Capture(path) as cap:
                p = cell_profile(load_profile(cap), filename, me, before - {me})
                page = render_sample_html(p)
        n = sum(s.samples - s.idle for s in p.stacks)
        _show(page_in_frame(page, f"leadline: {n:,} samples at {o.rate:g} Hz ({p.mode} mode)"))

    @line_cell_magic
    def leadline_trace(self, line: str, cell: str | None = None) -> None:
        """Trace every call of a statement or the cell and show each function's calls, time
        and memory: %leadline_trace [-o FILE] [-n N] STATEMENT, or %%leadline_trace"""
        o = parse_options(line, ("output", "limit"))
        if cell is not None and o.statement:
            raise UsageError(f"%%leadline_trace takes options only, not {o.statement!r}")
        with tempfile.TemporaryDirectory(prefix="leadline-cell-") as tmp:
            path = Path(o.output) if o.output else Path(tmp) / "cell.lead"
            # Each call timed by the CPU's counter: a cell runs for milliseconds, where the
            # sampler's clock, which moves once a millisecond, would give most calls no time.
            tracer = Tracer(path, TraceOptions(coarse_time=False))
            filename = self._run(cell if cell is not None else o.statement, tracer)
            with Capture(path) as cap:
                profile = analyse(cap)
                rows = subtree_functions(profile, lambda n: cap.function(n.func).file == filename)
        wall = max((r.incl_ns for r in rows), default=0)
        title = f"leadline: {len(rows):,} functions traced, {wall / 1e6:.1f} ms in the cell"
        _show(trace_table(rows, title, o.limit))


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(LeadlineMagics)
