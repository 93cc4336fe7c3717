"""What the tests share: running the real CLI and other Python children (dumping their stacks if
they hang), reading its JSON, finding other Python versions.  Imported as `support` (the tests'
folder is on the path, from the repository root as from tests/)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent
# How long a hung child gets to print its stacks after SIGABRT (faulthandler) before it is killed.
DUMP_GRACE_S = 10.0


# A program that runs two functions in turn, each call a few milliseconds, and measures the
# CPU time each took (bench/workloads/alternating.py says how).
ALTERNATING = (
    Path(__file__).resolve().parent.parent / "bench" / "workloads" / "alternating.py"
).read_text(encoding="utf-8")


class ChildTimeout(AssertionError):
    """A child that did not finish in time; its message holds the child's Python stacks."""


def run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[str]:
    """subprocess.run(cmd, capture_output=True, text=True) for a Python child; if it runs past
    `timeout`, its Python stacks (every thread's, from faulthandler on SIGABRT) are dumped and
    the test fails with them, instead of a bare TimeoutExpired."""
    child_env = {**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"}
    check = kwargs.pop("check", False)
    kwargs.pop("capture_output", None)  # always captured
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    kwargs.setdefault("text", True)
    with subprocess.Popen([str(c) for c in cmd], env=child_env, **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            out, err = dump_and_kill(proc)
            raise ChildTimeout(
                f"{' '.join(map(str, cmd))} did not finish within {timeout:g} s; "
                f"its stacks and output:\n{err}\n--- stdout ---\n{out}"
            ) from None
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def dump_and_kill(proc: subprocess.Popen[Any]) -> tuple[Any, Any]:
    """Make a hung Python child print its stacks (faulthandler, enabled by PYTHONFAULTHANDLER
    in its environment, dumps every thread on SIGABRT), then kill it; (stdout, stderr).  Where
    gdb is installed, every thread's C stack comes first (threads that Python does not list,
    such as leadline's sampler and writer, and where each Python thread waits in C)."""
    native = native_stacks(proc.pid) if proc.poll() is None else ""
    if proc.poll() is None:
        proc.send_signal(signal.SIGABRT)
    try:
        out, err = proc.communicate(timeout=DUMP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    if native and isinstance(err, str):
        err = f"--- C stacks (gdb) ---\n{native}\n--- stderr ---\n{err}"
    return out, err


def native_stacks(pid: int) -> str:
    """Every thread's C stack of process `pid`, from gdb in batch mode; "" without gdb."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return ""
    try:
        r = subprocess.run(
            [gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"(gdb failed: {e})"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("#", "Thread "))]
    return "\n".join(lines)[-20000:]


def write(tmp_path: Path, name: str, source: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(source), encoding="utf-8")
    return p


def leadline(
    *args: str | os.PathLike[str],
    cwd: Path,
    timeout: float = 120,
    check: bool = False,
    env_extra: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8", **(env_extra or {})}
    r = run([PY, "-m", "leadline", *map(str, args)], cwd=cwd, timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"leadline {args} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def report(capture: Path, cwd: Path) -> dict[str, Any]:
    r = leadline("report", capture, "--json", cwd=cwd, check=True)
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def log_rows(capture: Path, cwd: Path) -> list[dict[str, Any]]:
    r = leadline("log", capture, "--json", cwd=cwd, check=True)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def funcs(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Functions of a report by name (the first of each name)."""
    out: dict[str, dict[str, Any]] = {}
    for f in data["functions"]:
        out.setdefault(f["name"], f)
    return out


def share_with_error(capture: Path, name: str, own: bool = False) -> tuple[float, float]:
    """The inclusive share (percent; with `own`, the self share) of a sampling capture that
    the function `name` has, as `leadline diff` weighs it, and its standard error in points,
    from the reads behind each stack (their squared weights, row_spread): on a busy machine a
    few fair reads carry the weight of many that were set aside, so the evidence is far less
    than the count of records (beside CPU hogs, 35 effective reads of 150 in a 2.5 s run at
    500 Hz)."""
    return shares_with_errors(capture, [name], own)[name]


def shares_with_errors(
    capture: Path, names: Sequence[str], own: bool = False
) -> dict[str, tuple[float, float]]:
    """share_with_error for each of `names`, the capture loaded and weighed once."""
    from leadline.analyse.diff import _costs, load_side

    side = load_side(str(capture))
    costs = _costs(side, list(range(len(side.funcs))), 1.0)
    total = costs.total
    cost, spreads = (costs.self_, costs.self_var) if own else (costs.incl, costs.incl_var)
    spread = sum(side.node_var)
    out = {}
    for name in names:
        ids = [i for i, f in enumerate(side.funcs) if f.name == name]
        if not ids or total <= 0:
            out[name] = (0.0, 100.0)
            continue
        w = sum(cost.get(i, 0.0) for i in ids)
        spread_in = sum(spreads.get(i, 0.0) for i in ids)
        p = w / total
        var = ((1 - p) ** 2 * spread_in + p**2 * max(spread - spread_in, 0.0)) / total**2
        out[name] = (100.0 * p, 100.0 * var**0.5)
    return out


def traced(
    tmp_path: Path, source: str, *opts: str, name: str = "prog.py"
) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = write(tmp_path, name, source)
    cap = tmp_path / "out.lead"
    r = leadline("trace", "-o", cap, *opts, script, cwd=tmp_path)
    return r, cap


def find_python(version: str) -> str | None:
    """The path of an installed `python<version>` (e.g. "3.12", "2.7"), or None."""
    if version == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return sys.executable
    candidates = []
    try:
        bare = subprocess.run(
            ["pyenv", "versions", "--bare"], capture_output=True, text=True, timeout=30
        ).stdout.split()
        for v in bare:
            if v == version or v.startswith(version + "."):
                prefix = subprocess.run(
                    ["pyenv", "prefix", v], capture_output=True, text=True, timeout=30
                ).stdout.strip()
                candidates.append(os.path.join(prefix, "bin", f"python{version}"))
    except (OSError, subprocess.SubprocessError):
        pass
    found = shutil.which(f"python{version}")
    if found:
        candidates.append(found)
    for exe in candidates:
        try:
            ok = subprocess.run(
                [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if ok.returncode == 0 and ok.stdout.strip() == version:
            return exe
    return None


def burn_cpu(seconds: float) -> None:
    """Work for `seconds` of this thread's CPU time: a cpu-mode capture of it has about
    seconds * rate samples however busy the machine is (queueing for a CPU adds none)."""
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        sum(i * i for i in range(1000))


DIFF_KEYS = ("base_self", "new_self", "noise_self", "base_total", "new_total", "noise_total")


def diff_row(f: dict[str, Any]) -> str:
    """A `leadline diff --json` row as a failure message needs it: where the function is, both
    sides' self and total shares, their noise, whether it is beyond it."""
    shares = " ".join(f"{k}={f[k]:.4f}" for k in DIFF_KEYS)
    return f"{f['name']} ({f['module_path']}) {shares} sig={f['sig_self']},{f['sig_total']}"


def flagged_rows(data: dict[str, Any]) -> list[str]:
    """The rows of a `leadline diff --json` beyond noise, as diff_row gives them."""
    return [diff_row(f) for f in data["functions"] if f["sig_self"] or f["sig_total"]]


# -- protobuf (pprof): a small decoder -------------------------------------------------------
Fields = dict[int, list[Any]]


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def decode(data: bytes) -> Fields:
    """Fields of one message: varints as ints, length-delimited fields as bytes."""
    fields: Fields = defaultdict(list)
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
            fields[field].append(value)
        elif wire == 2:
            length, pos = read_varint(data, pos)
            fields[field].append(data[pos : pos + length])
            pos += length
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    assert pos == len(data)
    return fields


def pprof_strings(data: bytes) -> list[str]:
    """The string table (field 6) of a gzipped pprof Profile, each entry as strict UTF-8."""
    return [s.decode("utf-8") for s in decode(gzip.decompress(data))[6]]


# A test whose subject is Python-level logic over recordings that other tests cover on every
# version (diff's statistics and rankings, the pytest plugin's comparison of a real suite, the
# bounds on deep captures, the fleet agent's spool and exit, the suite's own collection; the
# HTML pages in Chromium, the exports checked by their consumers, the readers given hostile
# input and the fuzzers' crashers, `top`'s screen and `--open`) runs on the two ends of the
# recorder's hook kinds: 3.11 (profile functions; CI runs it beside two CPU hogs) and 3.15
# (sys.monitoring, the newest).  Each takes 5-60 s a version; CI's budget is an hour, and on
# 3.10, 3.12, 3.13 and 3.14 they were a third of a stage (the pages and exports, a further
# quarter: CI took 66 minutes).  What depends on the version (the recorder, the sampler's reads,
# dump, the program's world) runs on every one.
HOOK_KIND_ENDS = pytest.mark.skipif(
    sys.version_info[:2] not in ((3, 11), (3, 15)),
    reason="version-independent logic: run on 3.11 and 3.15, the ends of the hook kinds",
)


def at_hook_kind_ends() -> None:
    """HOOK_KIND_ENDS for a module fixture that records what only such tests use."""
    if sys.version_info[:2] not in ((3, 11), (3, 15)):
        pytest.skip(HOOK_KIND_ENDS.kwargs["reason"])


# Two functions that split a thread's CPU 3:1, each spinning on the thread's CPU clock (so the
# split holds however busy the machine is): source for the test programs that need a known
# split of named functions.
HOT_AND_COOL = """
def hot():
    t = time.thread_time()
    while time.thread_time() - t < 0.03:
        pass

def cool():
    t = time.thread_time()
    while time.thread_time() - t < 0.01:
        pass
"""
