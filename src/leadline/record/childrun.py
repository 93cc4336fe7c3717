"""Running a command as a measured child process: wall time, CPU time and peak RSS, from
`os.wait4`'s resource usage of that child alone (`sweep`, `overhead`)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import LeadlineError


@dataclass(frozen=True)
class ChildResult:
    wall: float  # seconds
    cpu: float  # user + system seconds
    maxrss_kib: int  # peak resident set size
    status: int  # exit status; -N for a signal N; 124 for a timeout


def run_child(
    cmd: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    quiet: bool = True,
) -> ChildResult:
    """Run `cmd` to its end (stdout and stderr discarded when `quiet`) and measure it."""
    out = subprocess.DEVNULL if quiet else None
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            list(cmd), env=dict(env) if env is not None else None, stdout=out, stderr=out
        )
    except OSError as e:
        raise LeadlineError(f"cannot run {cmd[0]}: {e.strerror}") from None
    deadline = None if timeout is None else t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if deadline else 0)
        if pid:
            break
        if deadline and time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            status = 124 << 8
            break
        time.sleep(0.002)
    wall = time.perf_counter() - t0
    proc.returncode = 0  # reaped here; keep Popen from waiting again
    code = os.waitstatus_to_exitcode(status)
    return ChildResult(wall, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss), code)
