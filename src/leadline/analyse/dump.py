"""A snapshot of a process (`leadline dump`): each thread's stack as one tick of the sampler read
it, with what the thread was doing then.  The capture is an ordinary sampling capture of one
tick whose every read was written as read (docs/dump.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..capture.reader import (
    GIL_STATES,
    SAMPLE_EXCEPTION,
    SAMPLE_IDLE,
    SAMPLE_TASK_WAITING,
    SAMPLE_TRUNCATED,
    Capture,
    gil_state,
)
from .model import Frame
from .paths import base_of
from .samples import sampled_threads

# What a thread was doing when it was read: on a CPU or waiting for one (running), off one
# (idle: blocked, asleep, waiting for the GIL), or its stack could not be read (it changed
# under every attempt of the tick).
THREAD_STATES = ("running", "idle", "unread")


@dataclass
class Local:
    """A local variable of a frame, as `dump --locals` read it (record/locals.py)."""

    name: str
    type: str
    repr: str


@dataclass
class ThreadDump:
    serial: int
    tid: int
    name: str
    state: str  # one of THREAD_STATES
    gil: str | None = None  # "held", "wait" or "none" (GIL_STATES); None: not known
    exception: bool = False  # raising or handling an exception
    truncated: bool = False  # deeper than --max-depth: the outermost frames are left out
    frames: list[Frame] = field(default_factory=list)  # innermost first
    # --async all: the asyncio tasks waiting on its loop, each innermost first (its task last)
    waiting: list[list[Frame]] = field(default_factory=list)
    # --locals: the variables of frames[i] (i innermost first), for the frames that were read
    locals: dict[int, list[Local]] = field(default_factory=dict)

    def to_json(self, with_locals: bool = False) -> dict[str, Any]:
        frames = [_frame_json(f) for f in self.frames]
        if with_locals:
            for i, f in enumerate(frames):
                f["locals"] = [vars(v) for v in self.locals.get(i, [])]
        return {
            "serial": self.serial,
            "tid": self.tid,
            "name": self.name,
            "state": self.state,
            "gil": self.gil,
            "exception": self.exception,
            "truncated": self.truncated,
            "frames": frames,
            "waiting_tasks": [[_frame_json(f) for f in task] for task in self.waiting],
        }


def _frame_json(f: Frame) -> dict[str, Any]:
    return {"name": f.name, "file": f.file, "line": f.line, "func_line": f.func_line}


def _frames(cap: Capture, stack: int, python: list[int] | None = None) -> list[Frame]:
    """The frames of a stack id, innermost first (and into `python` the indexes of those that
    are Python functions: the frames the sampler walked, which --locals numbers)."""
    out: list[Frame] = []
    seen = 0
    while stack and seen <= len(cap.stacks):
        parent, func, off = cap.stacks.get(stack, (0, 0, 0))
        f = cap.function(func)
        if python is not None and f.kind == "py":
            python.append(len(out))
        out.append(Frame(f.name, f.file, f.line_at(off), f.line))
        stack, seen = parent, seen + 1
    return out


@dataclass
class Snapshot:
    """What `leadline dump` shows: the process and each of its threads."""

    pid: int
    argv: list[str]
    python_version: str
    threads: list[ThreadDump]
    cwd: str | None = None  # the folder it runs in (the text shows its files relative to it)
    with_locals: bool = False  # taken with --locals


def snapshot(cap: Capture) -> Snapshot:
    """The snapshot a one-tick capture holds (its META names the process)."""
    return Snapshot(
        int(cap.meta.get("pid", 0)),
        [str(a) for a in cap.meta.get("argv") or []],
        str(cap.meta.get("python_version", "?")),
        thread_dumps(cap),
        base_of(cap.meta),
        _asked_locals(cap.meta),
    )


def _asked_locals(meta: dict[str, Any]) -> bool:
    options = meta.get("options")
    wanted = options.get("locals") if isinstance(options, dict) else None
    return isinstance(wanted, int) and wanted > 0


def thread_dumps(cap: Capture) -> list[ThreadDump]:
    """Every thread the snapshot found, in the order it found them, with its last read."""
    read: dict[int, tuple[int, int]] = {}
    waiting: dict[int, list[int]] = {}
    for _t, serial, flags, stack, _cpu, _drss in cap.samples():
        if flags & SAMPLE_TASK_WAITING:
            waiting.setdefault(serial, []).append(stack)
        else:
            read[serial] = (flags, stack)
    variables: dict[int, dict[int, list[Local]]] = {}
    for v in (cap.end or {}).get("locals") or []:
        by_frame = variables.setdefault(v["serial"], {})
        by_frame.setdefault(v["frame"], []).append(Local(v["name"], v["type"], v["repr"]))
    out = []
    for thread in sampled_threads(cap):
        dump = ThreadDump(thread.serial, thread.tid, thread.name, "unread")
        if thread.serial in read:
            flags, stack = read[thread.serial]
            dump.state = "idle" if flags & SAMPLE_IDLE else "running"
            dump.gil = GIL_STATES.get(gil_state(flags))
            dump.exception = bool(flags & SAMPLE_EXCEPTION)
            dump.truncated = bool(flags & SAMPLE_TRUNCATED)
            python: list[int] = []
            dump.frames = _frames(cap, stack, python)
            found = variables.get(thread.serial, {})
            dump.locals = {at: found[i] for i, at in enumerate(python) if i in found}
        dump.waiting = [_frames(cap, s) for s in waiting.get(thread.serial, [])]
        out.append(dump)
    return out
