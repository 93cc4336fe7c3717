"""`leadline run`, `leadline attach` and `leadline.profile()`, end to end through the real CLI,
asserting parsed values of the reports."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import find_python, leadline, report, run, write

import leadline as ll
from leadline import _native

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent


def run_profile(
    tmp_path: Path, source: str, *opts: str, name: str = "prog.py"
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    script = write(tmp_path, name, source)
    cap = tmp_path / "out.lead"
    r = leadline("run", "-q", "-o", cap, *opts, script, cwd=tmp_path)
    assert cap.exists(), r.stderr
    return r, report(cap, tmp_path)


def shares(data: dict[str, Any], key: str = "self_pct") -> dict[str, float]:
    out: dict[str, float] = {}
    for f in data["functions"]:
        out[f["name"].rsplit(".", 1)[-1]] = out.get(f["name"].rsplit(".", 1)[-1], 0.0) + f[key]
    return out


BUSY = """
    import os, sys, threading, time

    def leaf(n):
        s = 0
        for i in range(n):
            s += i
        return s

    def hot():
        return leaf(40000)

    def cold():
        return leaf(10000)

    def main(seconds):
        t = time.time()
        while time.time() - t < seconds:
            hot()
            cold()

    def sleeper():
        time.sleep(1.5)

    th = threading.Thread(target=sleeper, name="schläfer")
    th.start()
    main(1.5)
    th.join()
    print("out: ünïcode")
    print("err line", file=sys.stderr)
    sys.exit(3)
"""


def test_run_profile_table_threads_and_behaviour(tmp_path: Path) -> None:
    r, data = run_profile(tmp_path, BUSY, "--rate", "500")
    assert r.returncode == 3
    assert r.stdout == "out: ünïcode\n"
    assert r.stderr == "err line\n"
    assert data["kind"] == "sample" and data["mode"] == "wall"
    assert data["rate_hz"] == 500
    assert data["samples"] > 300
    assert data["torn"] <= data["samples"] * 0.01
    names = {t["name"] for t in data["threads"]}
    assert {"MainThread", "schläfer"} <= names
    s = shares(data)
    assert s["leaf"] > 90.0
    total = shares(data, "total_pct")
    # hot does 4x cold's work.
    assert 2.5 < total["hot"] / total["cold"] < 6.5
    assert total["main"] > 95.0
    # leadline's own launcher frames are cut from the stacks.
    assert not any("leadline" in f["file"] for f in data["functions"]), data["functions"]
    leaf = next(f for f in data["functions"] if f["name"] == "leaf")
    lines = {int(k): v for k, v in leaf["lines"].items()}
    # The body's lines, not the def: but a sample that lands on the function's first
    # instruction (RESUME, 3.11+) is on the def line in CPython's own line table.
    assert set(lines) <= {4, 5, 6, 7, 8}, lines
    assert sum(v for k, v in lines.items() if k != 4) >= 0.99 * sum(lines.values()), lines
    assert leaf["lines"].get("6", 0) + leaf["lines"].get("7", 0) > 0.8 * leaf["self"]


def call_tree_rows(out: str, title: str) -> list[tuple[int, int, str]]:
    """(weight, depth, function name) of each line of a --callers/--callees tree."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 1 :]:
        m = re.match(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)  ( *)(\S+) \(", line)
        if not m:
            break
        rows.append((int(m.group(1).replace(",", "")), len(m.group(2)) // 2, m.group(3)))
    return rows


def test_run_text_table_and_callers(tmp_path: Path) -> None:
    script = write(tmp_path, "prog.py", BUSY)
    cap = tmp_path / "out.lead"
    r = leadline("run", "-o", cap, "--rate", "500", script, cwd=tmp_path)
    assert r.returncode == 3
    # The summary after the program's own output: the table, then one line.
    assert r.stderr.startswith("err line\n")
    assert "TOTAL" in r.stderr and "SAMPLES" in r.stderr and "FRAME" in r.stderr
    assert "Mode: wall (500 Hz)" in r.stderr
    assert r.stderr.rstrip().splitlines()[-1].startswith("leadline: ")
    out = leadline("report", cap, "--callers", "leaf", cwd=tmp_path, check=True).stdout
    tree = call_tree_rows(out, "Callers of leaf")
    assert tree[0][1:] == (0, "leaf")
    callers = {name: weight for weight, depth, name in tree if depth == 1}
    assert set(callers) == {"hot", "cold"}
    assert 2.5 * callers["cold"] < callers["hot"] < 6.5 * callers["cold"]
    assert tree[0][0] == callers["hot"] + callers["cold"]
    out = leadline("report", cap, "--callees", "main", cwd=tmp_path, check=True).stdout
    tree = call_tree_rows(out, "Callees of main")
    assert tree[0][1:] == (0, "main")
    assert {name for _, depth, name in tree if depth == 1} >= {"hot", "cold"}
    assert {name for _, depth, name in tree if depth == 2} == {"leaf"}
    bad = leadline("report", cap, "--callers", "nope_nothing", cwd=tmp_path)
    assert bad.returncode == 2
    assert (
        bad.stderr.strip() == "leadline: error: no function matching 'nope_nothing' in this profile"
    )


def test_cpu_mode_ignores_sleeping_threads(tmp_path: Path) -> None:
    src = BUSY.replace(
        'print("out: ünïcode")', 'print(time.thread_time_ns(), file=open("cpu.txt", "w"))'
    )
    _, data = run_profile(tmp_path, src, "--mode", "cpu", "--rate", "500")
    assert data["mode"] == "cpu" and data["metric"] == "cpu"
    # The sleeping thread only used CPU to start: next to nothing.
    assert shares(data, "total_pct").get("sleeper", 0.0) < 1.0
    # Weights are CPU nanoseconds: the main thread's CPU time, as it measured it.
    cpu = int((tmp_path / "cpu.txt").read_text())
    assert 0.85 * cpu < data["total"] < 1.1 * cpu
    assert shares(data)["leaf"] > 90.0


def test_deep_recursion_5000_frames(tmp_path: Path) -> None:
    src = """
        import sys, time
        sys.setrecursionlimit(20000)
        def down(n):
            if n == 0:
                t = time.time()
                while time.time() - t < 0.5:
                    pass
                return 0
            return down(n - 1) + 1
        print(down(5000))
    """
    r, data = run_profile(tmp_path, src, "--rate", "200")
    assert r.returncode == 0 and r.stdout == "5000\n"
    depths = [len(s["frames"]) for s in data["stacks"]]
    assert max(depths) >= 5001
    down = next(f for f in data["functions"] if f["name"] == "down")
    assert down["total_pct"] > 90.0


def test_os_exit_keeps_the_capture(tmp_path: Path) -> None:
    src = """
        import os, time
        def spin():
            t = time.time()
            while time.time() - t < 0.4:
                pass
        spin()
        print("bye", flush=True)
        os._exit(7)
    """
    r, data = run_profile(tmp_path, src, "--rate", "300")
    assert r.returncode == 7 and r.stdout == "bye\n"
    assert data["complete"] is True
    assert shares(data, "total_pct")["spin"] > 80.0


def test_fork_child_unchanged_and_parent_keeps_sampling(tmp_path: Path) -> None:
    src = """
        import os, time
        def spin(s):
            t = time.time()
            while time.time() - t < s:
                pass
        spin(0.2)
        pid = os.fork()
        if pid == 0:
            print("child")
            os._exit(0)
        os.waitpid(pid, 0)
        spin(0.3)
        print("parent")
    """
    r, data = run_profile(tmp_path, src, "--rate", "300")
    assert r.returncode == 0
    assert sorted(r.stdout.split()) == ["child", "parent"]
    assert r.stderr == ""  # no multi-threaded fork warning on 3.12+
    assert data["samples"] > 100  # sampling went on after the fork


def test_subprocesses_are_followed(tmp_path: Path) -> None:
    child = write(
        tmp_path,
        "child.py",
        """
        import time
        def child_work():
            t = time.time()
            while time.time() - t < 0.8:
                pass
        child_work()
        """,
    )
    src = f"""
        import subprocess, sys, multiprocessing as mp, time
        def mp_work():
            t = time.time()
            while time.time() - t < 0.8:
                pass
        if __name__ == "__main__":
            subprocess.run([sys.executable, {str(child)!r}], check=True)
            ctx = mp.get_context("fork")
            p = ctx.Process(target=mp_work)
            p.start()
            p.join()
            print("ok", p.exitcode)
    """
    r, data = run_profile(tmp_path, src, "--subprocesses", "--rate", "200")
    assert r.stdout == "ok 0\n", r.stderr
    pids = {t["pid"] for t in data["threads"]}
    assert len(pids) >= 3
    names = {f["name"] for f in data["functions"]}
    assert {"child_work", "mp_work"} <= names


def test_memory_mode_attributes_growth(tmp_path: Path) -> None:
    src = """
        import time
        keep = []
        def grow():
            for _ in range(64):
                keep.append(bytearray(1 << 20))
                t = time.time()
                while time.time() - t < 0.005:
                    pass
        def idle():
            t = time.time()
            while time.time() - t < 0.3:
                pass
        idle()
        grow()
        idle()
    """
    script = write(tmp_path, "prog.py", src)
    cap = tmp_path / "out.lead"
    leadline("run", "-q", "--memory", "--rate", "500", "-o", cap, script, cwd=tmp_path, check=True)
    r = leadline("report", cap, "--json", cwd=tmp_path, check=True)
    data = json.loads(r.stdout)
    assert data["memory"] is True
    growth: dict[str, int] = {}
    for s in data["stacks"]:
        for i in set(s["frames"]):
            name = data["frames"][i]["name"]
            growth[name] = growth.get(name, 0) + s["rss_bytes"]
    assert growth["grow"] >= 0.9 * 64 * (1 << 20)
    assert abs(growth.get("idle", 0)) < 0.1 * 64 * (1 << 20)
    text = leadline("report", cap, "--metric", "memory", cwd=tmp_path, check=True).stdout
    assert "RSS growth" in text and "grow (" in text


def test_profile_api_context_manager(tmp_path: Path) -> None:
    def work() -> int:
        s = 0
        t = time.time()
        while time.time() - t < 0.3:
            s += 1
        return s

    with ll.profile(tmp_path / "api.lead", rate=500) as p:
        work()
    assert p.result is not None and p.result.samples > 50
    data = report(tmp_path / "api.lead", tmp_path)
    assert shares(data, "total_pct")["work"] > 80.0


DROPPED = """
import os, sys, time
import leadline
from leadline import _native
from leadline.capture.reader import Capture

def fds():
    return len(os.listdir("/proc/self/fd"))

def threads():
    return len(os.listdir("/proc/self/task"))

before = fds(), threads()
for name, finish in (("unfinished", False), ("finished", True)):
    path = sys.argv[1] + "." + name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    s = _native.Sampler(fd, b'{"mode": "sample"}', os.getpid(), 200.0)
    time.sleep(0.1)
    if finish:
        s.finish()
    del s
    leadline.mark("after", name=name)  # nothing listens any more
    with Capture(path) as cap:
        print(name, cap.meta.get("mode"), flush=True)
print("fds and threads back", (fds(), threads()) == before)
"""


def test_sampler_dropped_without_close_stops_and_closes(tmp_path: Path) -> None:
    """A native Sampler freed without close() (never finished, or finished and then an
    exception before close): its threads are joined, its capture closed with what it sampled,
    and mark() no longer writes into it (it wrote into freed memory, and the writer thread of
    a finished one kept waiting inside the freed object)."""
    prog = write(tmp_path, "dropped.py", DROPPED)
    r = subprocess.run(
        [PY, str(prog), str(tmp_path / "d.lead")], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "unfinished sample",
        "finished sample",
        "fds and threads back True",
    ], r.stderr


# -- attach ---------------------------------------------------------------------


def interpreter(version: str) -> str:
    exe = find_python(version)
    if exe is None:
        pytest.skip(f"python{version} is not installed")
    return exe


TARGET = """
import sys, threading, time
def target_leaf():
    s = 0
    for i in range(2000):
        s += i
    return s
def target_loop(stop):
    while time.time() < stop:
        target_leaf()
stop = time.time() + float(sys.argv[1])
print("ready", flush=True)
target_loop(stop)
"""


@contextlib.contextmanager
def started(*cmd: str, ready: bool = True) -> Iterator[subprocess.Popen[str]]:
    """A target process, once it has printed "ready" (if `ready`); killed afterwards."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        if ready:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("minor", [10, 11, 12, 13, 14, 15])
def test_attach_to_independent_process(tmp_path: Path, minor: int) -> None:
    exe = interpreter(f"3.{minor}")
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    with started(exe, str(script), "30") as proc:
        cap = tmp_path / "att.lead"
        r = leadline(
            "attach", str(proc.pid), "--duration", "1.5", "--rate", "300", "-o", cap, cwd=tmp_path
        )
        assert r.returncode == 0, r.stderr
        assert proc.poll() is None  # the target runs on
        data = report(cap, tmp_path)
        assert data["python_version"] == f"3.{minor}"
        assert data["samples"] > 50
        total = shares(data, "total_pct")
        assert total["target_loop"] > 95.0 and total["target_leaf"] > 50.0
        assert data["threads"][0]["name"] == "MainThread"


def test_attach_ends_when_the_target_exits(tmp_path: Path) -> None:
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    proc = subprocess.Popen([PY, str(script), "3"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    cap = tmp_path / "att.lead"
    t = time.time()
    r = leadline("attach", str(proc.pid), "-o", cap, "-q", cwd=tmp_path)
    proc.wait()
    assert r.returncode == 0 and time.time() - t < 15
    data = report(cap, tmp_path)
    assert data["samples"] > 20 and data["complete"]


def error_of(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_attach_errors(tmp_path: Path) -> None:
    # No such process: a child that has been reaped.
    gone = subprocess.Popen(["true"])
    gone.wait()
    msg = error_of(leadline("attach", str(gone.pid), cwd=tmp_path))
    assert msg == f"leadline: error: no such process: {gone.pid}"
    msg = error_of(leadline("attach", "abc", cwd=tmp_path))
    assert "not a process id: 'abc'" in msg
    # Not Python.
    with started("sleep", "30", ready=False) as sleeper:
        msg = error_of(leadline("attach", str(sleeper.pid), cwd=tmp_path))
        assert msg == (
            f"leadline: error: process {sleeper.pid} is not a Python process "
            "(no libpython or python executable with _PyRuntime is mapped)"
        )


@pytest.mark.parametrize("version", ["3.9", "2.7"])
def test_attach_unsupported_python(tmp_path: Path, version: str) -> None:
    exe = interpreter(version)
    code = "import time, sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(30)"
    with started(exe, "-c", code) as proc:
        msg = error_of(leadline("attach", str(proc.pid), cwd=tmp_path))
        assert msg == (
            f"leadline: error: process {proc.pid} runs Python {version}, which leadline does "
            "not support (3.10 to 3.15)"
        )


def test_attach_not_permitted(tmp_path: Path) -> None:
    """Without ptrace access (here: a non-dumpable target, and an attaching process without
    CAP_SYS_PTRACE) attach says what is missing."""
    code = (
        "import ctypes, sys, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "
        "print('ready', flush=True); time.sleep(30)"
    )
    with started(PY, "-c", code) as target:
        cmd = [PY, "-m", "leadline", "attach", str(target.pid), "-o", str(tmp_path / "x.lead")]
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("needs setpriv to drop CAP_SYS_PTRACE")
            cmd = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *cmd]
        env = {**os.environ, "NO_COLOR": "1"}
        r = run(cmd, capture_output=True, text=True, env=env, timeout=60)
        msg = error_of(r)
        assert msg.startswith(f"leadline: error: not permitted to read process {target.pid}:")
        assert "ptrace" in msg and "CAP_SYS_PTRACE" in msg
        assert not (tmp_path / "x.lead").exists()


def test_attach_needs_positive_duration(tmp_path: Path) -> None:
    msg = error_of(leadline("attach", str(os.getpid()), "--duration", "0", cwd=tmp_path))
    assert msg == "leadline: error: --duration must be positive"


def test_interrupted_attach_keeps_samples(tmp_path: Path) -> None:
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    with started(PY, str(script), "30") as proc:
        cap = tmp_path / "att.lead"
        att = subprocess.Popen(
            [PY, "-m", "leadline", "attach", str(proc.pid), "-q", "-o", str(cap)],
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.time() + 60
        while (not cap.exists() or cap.stat().st_size < 1024) and time.time() < deadline:
            time.sleep(0.1)  # until the sampler has written its first chunk
        att.send_signal(signal.SIGINT)
        att.wait(timeout=30)
        assert att.returncode == 0
        assert report(cap, tmp_path)["samples"] > 20


# -- internals, checked against CPython itself ----------------------------------------


def test_layouts_match_this_python() -> None:
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    r = run([PY, str(ROOT / "tools" / "gen_layouts.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _all_code_objects() -> list[Any]:
    import email.message
    import json.decoder
    import pathlib
    import typing

    todo = [m.__dict__ for m in (json.decoder, pathlib, typing, email.message, subprocess)]
    seen: set[int] = set()
    out = []
    stack: list[Any] = []
    for ns in todo:
        for v in ns.values():
            stack.append(getattr(v, "__code__", None))
            for w in getattr(v, "__dict__", {}).values():
                stack.append(getattr(w, "__code__", None))
    while stack:
        c = stack.pop()
        if c is None or not hasattr(c, "co_lines") or id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_lines"))
    return out


def test_line_tables_decode_like_co_lines() -> None:
    codes = _all_code_objects()
    assert len(codes) > 500
    minor = sys.version_info[1]
    for c in codes:
        expect = []
        prev_line = c.co_firstlineno
        for start, _end, line in c.co_lines():
            if line is None or line == prev_line:
                continue
            off = start // 2
            if expect and expect[-1][0] == off:
                expect[-1] = (off, line)
            else:
                expect.append((off, line))
            prev_line = line
        got = _native.line_table(minor, c.co_firstlineno, c.co_linetable)
        assert got == expect, c


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_accuracy_on_a_known_split(tmp_path: Path, mode: str) -> None:
    """bench/workloads/split.py splits its CPU time 50/30/20 between three functions in small
    shuffled units and measures the truth itself; every share must be within 2 points of it,
    with under 1% of the samples missed or torn.  14 s at 1 kHz: a share of about half has a
    binomial standard error of 0.42 points, so the bound is more than 4.5 of them (at 8 s it
    was 3.6, and a run now and then missed by a tenth of a point).

    The host this runs on is shared: when it takes the CPUs away, the sampler wakes late and
    says so (missed ticks).  Such a run, by leadline's own count, is run again, at most three
    times in all; the bounds are asserted on the first run that was not held up."""
    truth_file = tmp_path / "truth.json"
    cap = tmp_path / "split.lead"
    workload = ROOT / "bench" / "workloads" / "split.py"
    disturbed = []
    for _ in range(3):
        r = leadline(
            "run", "-q", "--mode", mode, "--rate", "1000", "-o", cap,
            workload, "--seconds", "14", "--truth", truth_file,
            cwd=tmp_path, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        data = report(cap, tmp_path)
        if data["missed"] < 0.01 * data["ticks"]:
            break
        disturbed.append((data["missed"], data["ticks"]))
    truth = json.loads(truth_file.read_text())
    assert data["samples"] >= 8400  # 14 s at 1 kHz, less what a loaded machine delays
    assert data["missed"] + data["torn"] < 0.01 * data["ticks"], (disturbed, data)
    got = shares(data, "total_pct")
    for name, t in truth["functions"].items():
        assert abs(got[name] - t["of_thread_pct"]) <= 2.0, (name, got[name], t, disturbed)


def test_churning_stacks_and_threads_at_5khz(tmp_path: Path) -> None:
    """Stacks that change under the reader (deep recursion going up and down, generators,
    threads starting and ending) at a high rate: no crash, no hang, the output is right, and
    what could not be read consistently is counted as torn, not shown."""
    src = """
        import threading
        def down(n):
            return 0 if n == 0 else down(n - 1) + 1
        def gen(n):
            for i in range(n):
                yield down(i % 50)
        def churn():
            total = 0
            for k in range(300):
                total += sum(gen(60))
            return total
        threads = []
        for _ in range(6):
            t = threading.Thread(target=churn)
            t.start()
            threads.append(t)
        print(churn())
        for t in threads:
            t.join()
    """
    r, data = run_profile(tmp_path, src, "--rate", "5000")
    assert r.returncode == 0 and r.stdout == f"{300 * sum(i % 50 for i in range(60))}\n", r
    counts = (data["samples"], data["torn"])
    assert data["samples"] > 100, counts
    # The running thread recurses 50 deep and back in microseconds, faster than a walk reads
    # it (3.10 most: its frames are scattered over the heap), so some of its samples are torn;
    # seen up to 9% of all on a busy 2-core host.
    assert data["torn"] < 0.15 * (data["samples"] + data["torn"]), counts
    names = {f["name"] for f in data["functions"]}
    assert {"down", "gen", "churn"} <= names
    frames = data["frames"]
    wrong: list[list[str]] = []
    for s in data["stacks"]:
        chain = [frames[i]["name"] for i in s["frames"]]
        # A consistent stack: from the thread's first frame (the program's or the thread's
        # bootstrap), every `down` called by `down` or `gen`, and at most 50 deep (torn reads
        # once joined dead frames into stacks of 127 `down`s, or with nothing under them:
        # 1-3% of samples on 3.10).  A stack read while it runs can still, very rarely, join
        # two moments whose frames all check out (seen: 2 samples in 222,000).
        if (
            (chain and chain[0].rsplit(".", 1)[-1] not in ("<module>", "_bootstrap"))
            or chain.count("down") > 50
            or any(b == "down" and a not in ("down", "gen") for a, b in itertools.pairwise(chain))
        ):
            wrong += [chain] * s["samples"]
    assert len(wrong) <= data["samples"] // 1000, wrong[:3]
