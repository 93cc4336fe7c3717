"""`leadline run`, `leadline attach` and `leadline.profile()`, end to end through the real CLI,
asserting parsed values of the reports."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ALTERNATING, find_python, leadline, report, run, shares_with_errors, write

import leadline as ll
from leadline import _native
from leadline.capture.reader import Capture
from leadline.capture.schema import SAMPLER_COUNTERS

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


# main() works for a set amount of CPU time, not of wall-clock time, so that a busy machine
# (which leaves fewer samples fit to count, docs/run.md "Busy machines") does not leave it with
# too few to split hot from cold.
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
        t = time.thread_time()
        while time.thread_time() - t < seconds:
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


@pytest.mark.statistical
def test_run_profile_table_threads_and_behaviour(tmp_path: Path) -> None:
    """2 kHz: on a busy machine about one sample in six can stand for where the time went
    (docs/run.md, "Busy machines"); at 500 Hz that left some 25 in `cold`, too few to tell a
    ratio of 4 from 2.5 now and then (seen once in seven runs beside two CPU hogs and other
    work)."""
    r, data = run_profile(tmp_path, BUSY, "--rate", "2000")
    assert r.returncode == 3
    assert r.stdout == "out: ünïcode\n"
    assert r.stderr == "err line\n"
    assert data["kind"] == "sample" and data["mode"] == "wall"
    assert data["rate_hz"] == 2000
    assert data["samples"] > 1200
    assert data["torn"] <= data["samples"] * 0.01
    names = {t["name"] for t in data["threads"]}
    assert {"MainThread", "schläfer"} <= names
    s = shares(data)
    counters = {k: data.get(k) for k in ("ticks", "missed", "torn", "deferred", "samples")}
    assert s["leaf"] > 90.0, (s, data["threads"], counters)
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


@pytest.mark.statistical
def test_run_text_table_and_callers(tmp_path: Path) -> None:
    script = write(tmp_path, "prog.py", BUSY)
    cap = tmp_path / "out.lead"
    # At 2 kHz: hot and cold take turns every 1.5 ms, and at 500 Hz (a sample every 1.5 to
    # 2.5 ms) the samples line up with the turns for stretches: hot/cold came out 3.0 to 5.1
    # over eight runs (truth about 4), 3.6 to 4.2 at 2 kHz.
    r = leadline("run", "-o", cap, "--rate", "2000", script, cwd=tmp_path)
    assert r.returncode == 3
    # The summary after the program's own output: the table, then one line.
    assert r.stderr.startswith("err line\n")
    assert "TOTAL" in r.stderr and "SAMPLES" in r.stderr and "FRAME" in r.stderr
    assert "Mode: wall (2000 Hz)" in r.stderr
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


@pytest.mark.statistical
def test_cpu_mode_ignores_sleeping_threads(tmp_path: Path) -> None:
    # The work is a set amount of CPU time, not of wall-clock time: on a busy machine the
    # program's CPU time must still dwarf what it used before sampling began (starting Python
    # and leadline), which the profile does not hold.
    src = """
        import threading, time
        start = time.thread_time_ns()
        def leaf(n):
            s = 0
            for i in range(n):
                s += i
            return s
        def main(cpu_ns):
            while time.thread_time_ns() - start < cpu_ns:
                leaf(40000)
        done = threading.Event()
        def sleeper():
            done.wait()
        th = threading.Thread(target=sleeper)
        th.start()
        main(600_000_000)
        end = time.thread_time_ns()
        done.set()
        th.join()
        print(start, end, file=open("cpu.txt", "w"))
    """
    _, data = run_profile(tmp_path, src, "--mode", "cpu", "--rate", "500")
    assert data["mode"] == "cpu" and data["metric"] == "cpu"
    # The sleeping thread only used CPU to start: next to nothing.
    assert shares(data, "total_pct").get("sleeper", 0.0) < 1.0
    # Weights are CPU nanoseconds: the main thread's CPU time, as it measured it: the
    # program's (less what it used before the sampler first looked at it: a few ms, more on a
    # busy machine), and not what it used before sampling began.
    start, end = map(int, (tmp_path / "cpu.txt").read_text().split())
    assert 0.9 * (end - start) < data["total"] < 1.02 * (end - start) + 0.05e9
    assert shares(data)["leaf"] > 90.0


def test_a_thread_not_yet_started_is_no_thread_of_its_own(tmp_path: Path) -> None:
    """From 3.12 a thread's state is made by Thread.start() and taken by the new OS thread only
    when it runs; a tick between the two found a state with a zero ident and made it a thread
    of its own, unnamed, with idle samples (CI: "thread-1" in the Firefox Profiler export).  400
    threads started one after another at 2 kHz gave one such thread in every run.  On 3.10 the
    walk of the thread states reached states freed as it ran (an ended thread's kernel id, or
    other data): CI found two unnamed threads, with kernel ids 0 and 1953067887."""
    src = """
        import threading, time
        def w():
            time.sleep(0.001)
        for i in range(400):
            t = threading.Thread(target=w, name=f"w{i}")
            t.start()
            t.join()
    """
    script = write(tmp_path, "prog.py", src)
    cap_path = tmp_path / "out.lead"
    r = leadline("run", "-q", "--rate", "2000", "-o", cap_path, script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    from leadline.analyse.samples import sampled_threads

    with Capture(cap_path) as cap:
        threads = sampled_threads(cap)
    assert len(threads) > 10, len(threads)
    unnamed = [t for t in threads if t.name == f"thread-{t.serial}"]
    assert unnamed == [], unnamed


def test_cpu_mode_records_are_periods_of_cpu_time(tmp_path: Path) -> None:
    """In cpu mode a record stands for a period of CPU time, one at least a read (a pprof's
    and Pyroscope's sample count, which the fleet agent pushes): a read and the records given
    with it are at most its CPU time's periods, plus one that it owes or is owed, plus the one
    it takes at least.  What is left in a thread's pool as sampling stops went to up to 32
    records, one a stack, whatever the pool held: 32 records for 14 ms of CPU at 100 Hz."""
    # Beside CPU hogs most reads are no fair draws (held up, or the thread off a CPU): 24 to 94
    # reads of about 150 ticks were fair in 4 runs beside two hogs (3.15), where quiet runs
    # had all of them, and a CI stage with two workers had 16.  The checks below are of each
    # read, so a run with too few is followed by another, up to four, until 20 reads are seen.
    period_ns = 10_000_000
    reads = 0
    for attempt in range(4):
        run_profile(tmp_path, BUSY, "--mode", "cpu", "--rate", "100")
        groups: dict[tuple[int, int], list[int]] = {}
        with Capture(tmp_path / "out.lead") as cap:
            for t, serial, _flags, _stack, cpu, _drss in cap.samples():
                g = groups.setdefault((t, serial), [0, 0])
                g[0] += 1
                g[1] += cpu
        assert groups, attempt
        worst = max(groups.values(), key=lambda g: g[0] - g[1] / period_ns)
        assert worst[0] <= 2 + worst[1] / period_ns, worst
        # And so in all: no more records than the CPU time's periods but for the one a read
        # takes at least (a thread that used 0.9 of a period between two reads takes one).
        # There may be fewer: a read on a machine so busy that the thread had no fair sample
        # lately keeps what it stands for where it was found, in its one record (docs/run.md,
        # "Busy machines"; seen beside CI's hogs: 146 records for 148.2 periods).
        records = sum(g[0] for g in groups.values())
        cpu_periods = sum(g[1] for g in groups.values()) / period_ns
        assert records <= cpu_periods + len(groups) + 2, (records, cpu_periods)
        reads += len(groups)
        if reads >= 20:
            break
    assert reads >= 20, reads


@pytest.mark.statistical
def test_wall_mode_counts_a_thread_waiting_for_a_cpu_as_busy(tmp_path: Path) -> None:
    # The main thread and four CPU hogs share one CPU: the thread waits for it four fifths of
    # the time, often for whole sampling intervals, and is then off a CPU, its clock still.
    # Waiting for a CPU is not idle: its wall-clock time is `busy`'s, not left out as a sleep
    # (it was, 134 to 321 of 500 samples, before the sampler asked such a thread its state).
    src = """
        import os, subprocess, sys, time

        def busy(seconds):
            t = time.perf_counter()
            while time.perf_counter() - t < seconds:
                pass

        cpu = min(os.sched_getaffinity(0))
        hog = f"import os\\nos.sched_setaffinity(0, {{{cpu}}})\\nwhile True: pass"
        hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(4)]
        os.sched_setaffinity(0, {cpu})  # this thread only: the sampler's runs anywhere
        time.sleep(0.2)
        try:
            t = time.perf_counter()
            busy(1.0)
            print(time.perf_counter() - t, file=open("busy.txt", "w"))
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    """
    _, data = run_profile(tmp_path, src, "--rate", "500")
    seconds = float((tmp_path / "busy.txt").read_text())
    busy = {f["name"]: f for f in data["functions"]}["busy"]
    # Ticks taken and missed stand for the whole second: 500 samples, within the noise of a
    # Poisson count (sd 22: the ticks are a Poisson process), less the few the start and end
    # of `busy` share with the lines around it.
    due = seconds * 500
    assert 0.9 * due - 4 * due**0.5 < busy["total"] < due + 4 * due**0.5 + 5


PIPELINE = """
    import sys, time

    def numbers(n):
        for i in range(n):
            yield i

    def double(src):
        for x in src:
            s = 0
            for k in range(6):
                s += k
            yield x * 2

    def keep_even(src):
        for x in src:
            s = 0
            for k in range(3):
                s += k
            if x % 4 == 0:
                yield x

    def count(src):
        c = 0
        for _ in src:
            c += 1
        return c

    end = time.thread_time() + float(sys.argv[1])
    while time.thread_time() < end:
        count(keep_even(double(numbers(20000))))
"""


PIPELINE_STAGES = ("numbers", "double", "keep_even", "count")


def pipeline_shares(runs: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each kind of run's mean self share of each pipeline stage over its runs so far (runs of
    the same length and rate: their samples weigh alike)."""
    return {
        kind: {n: sum(r.get(n, 0.0) for r in rs) / len(rs) for n in PIPELINE_STAGES}
        for kind, rs in runs.items()
    }


def pipeline_gap(runs: dict[str, list[dict[str, float]]]) -> float:
    """The largest difference, in points, between the free and the one-CPU runs' mean shares."""
    got = pipeline_shares(runs)
    return max(abs(got["free"][n] - got["one CPU"][n]) for n in PIPELINE_STAGES)


def pipeline_error(errors: dict[str, list[dict[str, float]]]) -> float:
    """The largest standard error, in points, of a stage's difference between the two kinds'
    mean shares, from each run's standard errors (the mean of k runs: their variances' sum over
    k squared)."""
    return max(
        sum(sum(e[n] ** 2 for e in es) / len(es) ** 2 for es in errors.values()) ** 0.5
        for n in PIPELINE_STAGES
    )


# Pairs of runs the pipeline test records at most, and the standard error of a stage's
# difference it waits for (its docstring).
PIPELINE_PAIRS = 6
PIPELINE_ERROR = 1.0


@pytest.mark.statistical
def test_a_pipeline_of_generators_is_read_as_it_runs(tmp_path: Path) -> None:
    """Generators that hand values on every microsecond or so change the stack faster than the
    sampler reads it.  Read while the program runs on another CPU, most walks race; before a
    thread whose walks race was read parked (docs/run.md, "Stacks that change under the
    sampler"), the walks that succeeded were those that fell on a frame that lasts: `double` had
    20-28% of the samples and `numbers` none, where a run with the program and the sampler on
    one CPU (every read made while the program is stopped) gives them 50% and 4.5%, quiet or
    beside two CPU hogs.  That run is the reference: the shares must be within 4 points of it
    (over 21 pairs of 8,000-sample runs on 3.10 to 3.13, quiet and beside two or four CPU hogs,
    they differed by 1 point in a standard deviation, 3.5 at most).

    The evidence a run gives is its fair reads', fewer the busier the machine: a pair is
    recorded, then more, until the standard error of every stage's difference between the
    means, by `leadline diff`'s statistics (each run's reads' squared weights), is at most
    PIPELINE_ERROR, 1 point, or PIPELINE_PAIRS pairs are in.  Quiet, a run's error is 0.2-0.9
    points (two pairs); with the sampler built with AddressSanitizer (2 to 3 times slower per
    read) and a second copy of the test beside it, 1.4-1.5, five pairs, and the shares of
    identical runs spread by 2-3 points (one pair of runs there, in CI, was 5.2 points off, and
    its free runs gave `keep_even` 28 and 47%).  Between runs the shares spread up to 1.8 times
    as much as those errors say, so the 4 points are still over two deviations of the gap."""
    script = write(tmp_path, "pipe.py", PIPELINE)
    cpu = min(os.sched_getaffinity(0))
    runs: dict[str, list[dict[str, float]]] = {"free": [], "one CPU": []}
    errors: dict[str, list[dict[str, float]]] = {"free": [], "one CPU": []}
    counts: dict[str, list[dict[str, Any]]] = {"free": [], "one CPU": []}
    for pair, kind in itertools.product(range(PIPELINE_PAIRS), ("free", "one CPU")):
        if pair and kind == "free" and pipeline_error(errors) <= PIPELINE_ERROR:
            break
        cap = tmp_path / f"{kind}.lead"
        pin = (lambda: os.sched_setaffinity(0, {cpu})) if kind == "one CPU" else None
        r = run(
            [PY, "-m", "leadline", "run", "-q", "--mode", "cpu", "--rate", "2000", "-o", cap,
             script, "4"],
            cwd=tmp_path, preexec_fn=pin, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        data = report(cap, tmp_path)
        # On 3.10 a generator's frame reads as suspended (or just made) for a few instructions
        # at each yield and resume while it is still, or already, the thread's frame; a thread
        # stopped there stays there for every read of the sample, and such samples were torn:
        # 0.5-1.1% of this program's, in both runs, quiet or loaded; none since.  3.11 and 3.12
        # have windows whose stack cannot be told (docs/run.md): 3.11 a frame whose memory was
        # just freed, 0.1-0.2%; 3.12 a generator at a yield or resume, already (or still)
        # unlinked from its caller while it is the thread's frame: every torn walk of the
        # one-CPU run is one, and 0.65-1.92% of the samples in 22 runs (both runs, quiet or
        # beside two CPU hogs, this sampler or the one of 7b3987a alike; mean 1.1, deviation
        # 0.3), so its bound is 3%: a sampler blind to anything more than that window fails it.
        limit = {(3, 10): 0.001, (3, 12): 0.03}.get(sys.version_info[:2], 0.01)
        assert data["samples"] > 4000 and data["torn"] <= limit * data["samples"], data
        runs[kind].append(shares(data))
        weighed = shares_with_errors(cap, PIPELINE_STAGES, own=True)
        errors[kind].append({n: error for n, (_, error) in weighed.items()})
        with contextlib.closing(Capture(cap)) as c:
            end = c.end or {}
        counts[kind].append({k: end.get(k) for k in (*SAMPLER_COUNTERS, "samples")})
    got = pipeline_shares(runs)
    evidence = (got, pipeline_error(errors), runs, counts)
    assert pipeline_gap(runs) <= 4.0, evidence
    assert got["one CPU"]["double"] > 40.0 and got["one CPU"]["numbers"] > 2.0, evidence


@pytest.mark.statistical
def test_the_thread_start_wrapper_is_not_in_the_programs_stacks(tmp_path: Path) -> None:
    """leadline wraps Thread.start to remember thread names; a sample of a program starting a
    thread shows the program's call of Thread.start, not the wrapper (seen under load: the
    wrapper's frame, in leadline's recorder.py, in the report of the busy-program test)."""
    src = """
        import threading

        def nothing():
            pass

        for _ in range(3000):
            t = threading.Thread(target=nothing)
            t.start()
            t.join()
    """
    _, data = run_profile(tmp_path, src, "--rate", "2000")
    files = {f["file"] for f in data["functions"]}
    assert not any("leadline" in f for f in files), files
    start = [
        f for f in data["functions"] if f["name"].endswith("start") and "threading" in f["file"]
    ]
    assert start and start[0]["total"] > 10, data["functions"][:8]


def test_the_interpreters_init_frame_is_not_in_the_programs_stacks(tmp_path: Path) -> None:
    """From 3.13 a class's call runs its ``__init__`` under a frame of the interpreter's own
    (code named ``__init__`` in a file ``__init__``), which the sampler reads like any Python
    frame.  It is not the program's: ``Point.__init__`` is shown under ``main``, which called
    it (a diff took that frame, found at line 0 on one side, for a change of the program)."""
    src = """
        class Point:
            def __init__(self, x):
                self.x = sum(range(x))

        def main():
            for i in range(60000):
                Point(200)

        main()
    """
    _, data = run_profile(tmp_path, src, "--rate", "2000")
    files = {f["file"] for f in data["functions"]}
    assert "__init__" not in files, files
    frames = data["frames"]
    callers: dict[str, int] = {}
    for s in data["stacks"]:
        for k, i in enumerate(s["frames"]):
            if k > 0 and frames[i]["name"] in ("Point.__init__", "__init__"):  # 3.10: no class
                caller = frames[s["frames"][k - 1]]["name"]
                callers[caller] = callers.get(caller, 0) + s["samples"]
    assert set(callers) == {"main"} and callers["main"] > 20, callers


@pytest.mark.statistical
def test_a_tick_reads_the_programs_memory_in_two_calls(tmp_path: Path) -> None:
    """A tick reads at once the pages the previous one read before its first walk (the
    interpreter, the thread states), and a thread's walk the pages its previous walks read (its
    frames), after its clock (docs/run.md, "What a tick costs"): a busy thread's tick makes 2
    reads of the program's memory on every version (one page at a time: 3 on 3.12, 5 on 3.11,
    11 on 3.10), beside a sleeping thread that cpu mode does not read.  A read again because
    the stack changed may add one."""
    r, _ = run_profile(tmp_path, BUSY, "--mode", "cpu", "--rate", "1000")
    assert r.returncode == 3, r.stderr
    with Capture(tmp_path / "out.lead") as cap:
        end = cap.end or {}
    assert end["ticks"] > 500, end
    assert end["reads"] <= 3 * end["ticks"], end


@pytest.mark.statistical
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


@pytest.mark.statistical
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


@pytest.mark.statistical
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


def rss_growth(data: dict[str, Any]) -> dict[str, int]:
    """Each function's RSS growth (bytes) over the stacks it is on, from a report's JSON."""
    assert data["memory"] is True
    growth: dict[str, int] = {}
    for s in data["stacks"]:
        for i in set(s["frames"]):
            name = data["frames"][i]["name"]
            growth[name] = growth.get(name, 0) + s["rss_bytes"]
    return growth


@pytest.mark.statistical
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
    r, data = run_profile(tmp_path, src, "--memory", "--rate", "500")
    assert r.returncode == 0, r.stderr
    growth = rss_growth(data)
    assert growth["grow"] >= 0.9 * 64 * (1 << 20)
    assert abs(growth.get("idle", 0)) < 0.1 * 64 * (1 << 20)
    cap = tmp_path / "out.lead"
    text = leadline("report", cap, "--metric", "memory", cwd=tmp_path, check=True).stdout
    assert "RSS growth" in text and "grow (" in text


@pytest.mark.statistical
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_memory_growth_between_sleeps_goes_to_the_allocator(tmp_path: Path, mode: str) -> None:
    """A thread that allocates and then sleeps (a cache filled between waits) used a tenth of a
    millisecond or so in each tick it grew the RSS, and is off a CPU when read: idle by the rule
    for time.  The growth must still go to it, not wait for the next busy sample: in cpu mode it
    went to `after`, the work that followed (the fleet agent samples in cpu mode)."""
    src = """
        import time
        keep = []
        def grow():  # 48 MB of touched pages, a megabyte every 40 ms
            for _ in range(48):
                keep.append(b"x" * (1 << 20))
                time.sleep(0.04)
        def after():
            t = time.thread_time()
            while time.thread_time() - t < 0.5:
                pass
        grow()
        after()
    """
    r, data = run_profile(tmp_path, src, "--memory", "--mode", mode)
    assert r.returncode == 0, r.stderr
    growth = rss_growth(data)
    assert growth.get("grow", 0) >= 0.9 * 48 * (1 << 20), growth
    assert abs(growth.get("after", 0)) < 0.1 * 48 * (1 << 20), growth


@pytest.mark.statistical
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


@pytest.mark.statistical
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


@pytest.mark.statistical
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((f"--duration={d}",), "--duration must be a positive number of seconds")
        for d in ("0", "-1", "nan", "inf", "-inf")
    ]
    + [
        ((f"--rate={r}",), "--rate must be between 1 and 20000 Hz")
        for r in ("0", "nan", "inf", "-inf", "20001")
    ]
    + [
        ((f"--max-depth={d}",), "--max-depth must be between 1 and 1,000,000")
        for d in ("0", "2000000")
    ],
)
def test_attach_rejects_bad_numbers(tmp_path: Path, args: tuple[str], message: str) -> None:
    """Every numeric option of attach (and the sampling ones of run): a number that is not
    finite, or out of range, is a one-line error before anything starts."""
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    with started(PY, str(script), "60") as proc:
        msg = error_of(leadline("attach", str(proc.pid), *args, "-o", "x.lead", cwd=tmp_path))
        assert msg == f"leadline: error: {message}"
    if not args[0].startswith("--duration"):
        msg = error_of(leadline("run", *args, "-o", "y.lead", "-c", "pass", cwd=tmp_path))
        assert msg == f"leadline: error: {message}"
    assert not (tmp_path / "x.lead").exists() and not (tmp_path / "y.lead").exists()


@pytest.mark.statistical
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


def attach_stopped_while_target_ends(
    tmp_path: Path, *, reap: bool, after_samples: bool
) -> tuple[subprocess.CompletedProcess[str], int, Path]:
    """Attach to a busy target, stop the attacher (SIGSTOP: a process the scheduler starves,
    taken to the extreme) at a chosen point, end the target, let the attacher go on.  The
    target is waited for (gone) or left a zombie.  (attach's result, the target's pid, the
    capture)."""
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    cap = tmp_path / "att.lead"
    cap.unlink(missing_ok=True)
    target = subprocess.Popen([PY, str(script), "120"], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None and target.stdout.readline() == "ready\n"
        env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
        cmd = [PY, "-m", "leadline", "attach", str(target.pid), "--rate", "200", "-o", str(cap)]
        att = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        try:
            deadline = time.time() + 60
            if after_samples:  # once a chunk of samples is in the file (within 1 s)
                while (not cap.exists() or cap.stat().st_size < 2048) and time.time() < deadline:
                    time.sleep(0.01)
            else:  # the moment it has made the file: it has looked at the target once
                while not cap.exists() and time.time() < deadline:
                    pass
            att.send_signal(signal.SIGSTOP)
            target.kill()
            if reap:
                target.wait()
            else:  # its exit is not collected: a zombie (it has no memory left to read)
                while open(f"/proc/{target.pid}/stat").read().rsplit(")", 1)[1][1] != "Z":
                    time.sleep(0.01)
            att.send_signal(signal.SIGCONT)
            out, err = att.communicate(timeout=120)
        finally:
            att.kill()
            att.wait()
        return subprocess.CompletedProcess(cmd, att.returncode, out, err), target.pid, cap
    finally:
        target.kill()
        target.wait()


@pytest.mark.parametrize("reap", [True, False], ids=["gone", "zombie"])
def test_attach_target_ends_before_the_first_tick(tmp_path: Path, reap: bool) -> None:
    """A target seen alive, which ends before the sampler first reads it, ends the capture
    cleanly, empty.  It used to make attach fail with "no such process" (or "not a Python
    process" for a zombie) and leave an empty file: the sampler looked at the process a second
    time before it started, and a busy or low-priority attach can take seconds between the two.
    Each run stops the attacher right after its first look; three runs each."""
    for _ in range(3):
        r, pid, cap = attach_stopped_while_target_ends(tmp_path, reap=reap, after_samples=False)
        assert r.returncode == 0, r.stderr
        lines = r.stderr.strip().splitlines()
        assert re.fullmatch(
            rf"leadline: process {pid} exited \d+\.\d\d s after sampling began; the capture "
            r"holds the samples taken until then",
            lines[-2],
        ), lines
        data = report(cap, tmp_path)
        assert data["complete"] is True and data["pid"] == pid
        assert data["exited_ns"] is not None and data["exited_ns"] >= 0
        assert data["torn"] == 0


@pytest.mark.statistical
@pytest.mark.parametrize("reap", [True, False], ids=["gone", "zombie"])
def test_attach_keeps_its_samples_when_the_target_ends(tmp_path: Path, reap: bool) -> None:
    """The target ends while attach is starved, after it took samples: they are all kept, the
    capture ends cleanly, and the summary says when the process exited."""
    r, pid, cap = attach_stopped_while_target_ends(tmp_path, reap=reap, after_samples=True)
    assert r.returncode == 0, r.stderr
    m = re.search(rf"leadline: process {pid} exited (\d+\.\d\d) s after sampling began", r.stderr)
    assert m, r.stderr
    data = report(cap, tmp_path)
    assert data["complete"] is True
    assert data["samples"] > 20 and data["torn"] == 0
    assert shares(data, "total_pct")["target_loop"] > 95.0
    # When it was found gone: after the samples, within the capture, as the summary says.
    assert 0 < data["exited_ns"] <= data["duration_ns"]
    assert abs(data["exited_ns"] / 1e9 - float(m.group(1))) < 0.01


def test_attach_to_a_zombie(tmp_path: Path) -> None:
    gone = subprocess.Popen([PY, "-c", "pass"])
    try:
        while open(f"/proc/{gone.pid}/stat").read().rsplit(")", 1)[1][1] != "Z":
            time.sleep(0.01)
        msg = error_of(leadline("attach", str(gone.pid), "-o", "z.lead", cwd=tmp_path))
        assert msg == (
            f"leadline: error: process {gone.pid} has exited (a zombie: its parent has not "
            "waited for it yet)"
        )
        assert not (tmp_path / "z.lead").exists()
    finally:
        gone.wait()


PHASES = """
import sys, time
def spin(until):
    while time.time() < until:
        pass
def phase_a(until):
    spin(until)
def phase_b(until):
    spin(until)
print("ready", flush=True)
sys.stdin.readline()
t = time.time()
phase_a(t + 3.0)
phase_b(t + 6.0)
"""


@pytest.mark.statistical
def test_a_late_tick_stands_for_the_ticks_it_missed(tmp_path: Path) -> None:
    """The target spends 3 s in phase_a, then 3 s in phase_b.  For 2 s of phase_a the attacher
    is stopped (a sampler starved of CPU): its first tick after that comes 400 ticks late.  That
    sample stands for the ticks it missed, so phase_a still gets half of the time; counted once,
    it got a quarter."""
    script = tmp_path / "phases.py"
    script.write_text(PHASES)
    cap = tmp_path / "att.lead"
    target = subprocess.Popen(
        [PY, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert target.stdout is not None and target.stdout.readline() == "ready\n"
        cmd = [PY, "-m", "leadline", "attach", str(target.pid), "-q", "-r", "200", "-o", str(cap)]
        att = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while (not cap.exists() or cap.stat().st_size < 512) and time.time() < deadline:
            time.sleep(0.01)  # sampling (META is written as it starts)
        assert target.stdin is not None
        target.stdin.write("go\n")
        target.stdin.flush()
        time.sleep(0.5)
        att.send_signal(signal.SIGSTOP)
        time.sleep(2.0)
        att.send_signal(signal.SIGCONT)
        _, err = att.communicate(timeout=120)
        assert att.returncode == 0, err
    finally:
        target.kill()
        target.wait()
    data = report(cap, tmp_path)
    counts = {k: data[k] for k in ("ticks", "missed", "samples", "deferred", "total")}
    assert data["missed"] >= 300, counts
    # One thread: a record for every tick due, taken or missed (less the tick that found the
    # process gone).
    assert abs(data["samples"] - (data["ticks"] + data["missed"])) <= 3, counts
    total = shares(data, "total_pct")
    assert 40.0 <= total["phase_a"] <= 60.0, (total, counts)
    assert 40.0 <= total["phase_b"] <= 60.0, (total, counts)


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


@pytest.mark.statistical
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_accuracy_on_a_known_split(tmp_path: Path, mode: str) -> None:
    """bench/workloads/split.py splits its CPU time 50/30/20 between three functions in small
    shuffled units and measures the truth itself; every share must be within 2 points of it
    (in wall mode, their shares of the three's time), on a quiet machine and on a busy one.
    Only fair samples are draws (docs/run.md "Busy machines"), and while a tick late by its timer
    counted as held up, this project's CI host, even quiet, set 20-76% of the ticks aside, so the
    evidence was what was left (beside two CPU hogs it still is, those ticks at which the program
    was off its CPU): at 1 kHz for 24 s the error's measured standard deviation over 27 quiet
    wall-mode runs was 0.6-0.7 points (binomial from the fair samples, a little more for their
    uneven weights), and a CI run was 2.04 points off. 24 s at 2 kHz gives twice the samples: over
    14 runs at 2 and 4 kHz, quiet and beside two CPU hogs, a deviation of 0.43-0.47 (it shrinks less
    than the samples grow: some of it is the run's, not the draw's), so the bound is more than 4 of
    them. Not 4 kHz: quiet, it missed 0.4-1.1% of its ticks.

    The program reads its CPU clock between units, so on a busy machine the kernel stops it
    there far more often than it spends time there: before samples of stopped threads were
    set aside, "heavy" lost 4 points beside two CPU hogs, and 16 on a busier host.

    The counts must be honest however busy the machine: every tick due was taken or counted
    as missed (within the noise of a Poisson count), and what the samples stand for adds up to
    the run (the program's CPU time in cpu mode; a record per tick due in wall mode, missed ones
    included).  Missing under 1% of
    the ticks is a promise for a quiet machine only: one where other processes used less than
    a tenth of a core meanwhile (from /proc/stat, less what the run itself used); the program
    having a CPU to itself says nothing of the sampler's thread, which needs another."""
    truth_file = tmp_path / "truth.json"
    cap = tmp_path / "split.lead"
    workload = ROOT / "bench" / "workloads" / "split.py"
    before = _machine_busy_ns(), _children_cpu_ns()
    r = leadline(
        "run", "-q", "--mode", mode, "--rate", "2000", "-o", cap,
        workload, "--seconds", "24", "--truth", truth_file,
        cwd=tmp_path, timeout=900,
    )  # fmt: skip
    others_ns = (_machine_busy_ns() - before[0]) - (_children_cpu_ns() - before[1])
    assert r.returncode == 0, r.stderr
    data = report(cap, tmp_path)
    truth = json.loads(truth_file.read_text())
    counts = {k: data[k] for k in ("ticks", "missed", "torn", "deferred", "samples", "total")}
    got = shares(data, "total_pct")
    if mode == "wall":
        # Wall-clock time: on a machine whose load comes and goes, the program's phases took
        # more or less of it per CPU second (its start-up, say, took 8% of a run's wall-clock
        # time for 2% of its CPU time), but the three functions, whose units are shuffled
        # together, always got the same wall-clock time per CPU second as one another.
        three = sum(got[name] for name in truth["functions"])
        got = {name: 100.0 * got[name] / three for name in truth["functions"]}
    key = "of_thread_pct" if mode == "cpu" else "share_pct"
    for name, t in truth["functions"].items():
        assert abs(got[name] - t[key]) <= 2.0, (name, got[name], t, counts)
    # The ticks are a Poisson process (test_ticks_are_a_poisson_process): how many are due in a
    # run is a Poisson count, its standard deviation the root of its mean (0.6% of 28,000).
    due = data["duration_ns"] / 1e9 * 2000
    assert abs(data["ticks"] + data["missed"] - due) <= 4 * due**0.5, (due, counts)
    if mode == "cpu":
        assert abs(data["total"] - truth["thread_cpu_ns"]) <= 0.02 * truth["thread_cpu_ns"]
    else:
        assert abs(data["samples"] - (data["ticks"] + data["missed"])) <= 0.01 * due, counts
    assert data["torn"] <= 0.01 * data["ticks"], counts
    if others_ns < 0.1 * data["duration_ns"]:  # a quiet machine
        assert data["missed"] < 0.01 * data["ticks"], (counts, others_ns)


def test_ticks_are_a_poisson_process(tmp_path: Path) -> None:
    """The time from one tick to the next is exponential, its mean the period (sampler.c,
    next_interval; bench/tick_model.py says why: with a period and a little jitter, the next tick
    comes at about the same point of the turns that the ticks themselves give the threads on a
    busy CPU).  A sleeping program is read at every tick in wall mode, so its samples' times are
    the ticks': of 1,000 gaps, an exponential law puts 39% under half the period and 14% over
    twice it (a period with 25% jitter: none), and their spread is about their mean."""
    src = """
        import time
        time.sleep(2.0)
    """
    r, _ = run_profile(tmp_path, src, "--mode", "wall", "--rate", "500")
    assert r.returncode == 0, r.stderr
    with Capture(tmp_path / "out.lead") as cap:
        times = sorted({cap.ns(t) for t, *_ in cap.samples()})
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) > 600, len(gaps)
    period = 2_000_000
    short = sum(g < period / 2 for g in gaps) / len(gaps)
    long = sum(g > 2 * period for g in gaps) / len(gaps)
    mean = sum(gaps) / len(gaps)
    sd = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    summary = (len(gaps), round(short, 3), round(long, 3), round(mean), round(sd))
    assert 0.25 < short < 0.5 and 0.07 < long < 0.22, summary
    assert 0.75 < sd / mean < 1.3, summary


@pytest.mark.statistical
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_a_late_timer_is_no_held_up_sampler(tmp_path: Path, mode: str) -> None:
    """A tick is on time when the sampler, woken by its timer, did not wait for a CPU: how late
    the timer fires owes nothing to the program.  On this project's virtual machines it fires 25
    to 700 us late, 85 median, in phases of the host; when "on time" meant within 10 us of the
    earliest lately, a quiet run took 50 to 97% of its ticks for late in such a phase and set
    their samples aside, and support.ALTERNATING's 70% function (SLOW=3, a turn every 4 ms) came
    out anywhere from 43 to 84% from what was left (a fleet test ranked the 30% one first).  Now
    the ticks at which the sampler waited for a CPU are counted as `held`: 20 to 27 of 2,000
    quiet, and 4 to 7% of the ticks beside two CPU hogs.  Each function's share must be within 4
    standard errors (binomial, from the fair samples) and a point of what the program measured.
    Beside two CPU hogs the 70% function still came out 78-80% in wall mode (CI's loaded stage
    failed it twice in a row): ticks a period apart, give or take 25%, lined up with the turns
    the scheduler gives the program, which begin at the ticks (test_ticks_are_a_poisson_process);
    interleaved, six runs each way, the fair samples' error went from +2.3 to -0.4 points (wall)
    and +3.2 to +0.8 (cpu), and pinned to one CPU beside one hog, from +15 to +0.4."""
    prog = write(tmp_path, "alternating.py", ALTERNATING)
    truth_file = tmp_path / "truth.json"
    cap = tmp_path / "alt.lead"
    r = run(
        [PY, "-m", "leadline", "run", "-q", "--mode", mode, "--rate", "500", "-o", cap, prog,
         truth_file],
        cwd=tmp_path, timeout=300, env={**os.environ, "SLOW": "3", "SECONDS": "4"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    data = report(cap, tmp_path)
    truth = json.loads(truth_file.read_text())
    counts = {k: data[k] for k in ("ticks", "missed", "held", "deferred", "samples")}
    assert data["held"] < 0.25 * data["ticks"], counts
    got = shares(data)
    both = got["slow_part"] + got["fast_part"]
    fair = max(data["ticks"] - data["deferred"], 1)
    for name in ("slow_part", "fast_part"):
        t = 100.0 * truth[name] / (truth["slow_part"] + truth["fast_part"])
        se = 100.0 * (t / 100 * (1 - t / 100) / fair) ** 0.5
        share = 100.0 * got[name] / both
        assert abs(share - t) <= 4 * se + 1.0, (name, share, t, se, counts)


def _machine_busy_ns() -> int:
    """CPU time every CPU of the machine has spent busy (or stolen by the host), from
    /proc/stat: user, nice, system, irq, softirq and steal."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (
        (user + nice + system + irq + softirq + steal) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    )


def _children_cpu_ns() -> int:
    """CPU time of this process's children that have been waited for (the run's, after it)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((ru.ru_utime + ru.ru_stime) * 1e9)


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


@pytest.mark.parametrize("mode", ["wall", "cpu"])
def test_a_thread_list_that_loops_ends_the_tick(tmp_path: Path, mode: str) -> None:
    """The interpreter's list of thread states is read while threads come and go: a state freed
    and reused under the sampler can link back into itself, and every walk from such states is
    torn.  Seen once in ~100 runs of CPython's threading tests beside two CPU hogs: the tick
    went round the loop for ever, and the run never ended.  Here the program makes that loop
    itself for 0.5 s of CPU time (its thread state's `next`, at offset 8 on every version, points
    to a state of garbage whose `next` points to itself), then puts the list back: the run ends,
    with the program's samples before, during and after, and the loop's reads counted torn."""
    src = """
        import ctypes, time
        def spin(seconds):
            end = time.thread_time() + seconds
            while time.thread_time() < end:
                pass
        def before():
            spin(0.4)
        def during():
            spin(0.5)
        def after():
            spin(0.4)
        before()
        get = ctypes.pythonapi.PyThreadState_Get
        get.restype = ctypes.c_void_p
        me = get()
        nxt = ctypes.c_void_p.from_address(me + 8)
        assert nxt.value is None, "the only thread has no next"
        garbage = (ctypes.c_uint64 * 64)(*[408] * 64)  # pointers into the unmapped first page
        garbage[1] = ctypes.addressof(garbage)  # its next: itself
        nxt.value = ctypes.addressof(garbage)
        try:
            during()
        finally:
            nxt.value = None
        after()
        print("done")
    """
    # At 1 kHz each phase is longer than the 256 ticks within which a phase with no fair read
    # gives its weight to the phases around it (docs/run.md): at 200 Hz, beside a busy CI
    # stage's other worker, `after` and once `during` (317 ticks, 301 of them deferred) went
    # missing so.
    r, data = run_profile(tmp_path, src, "--mode", mode, "--rate", "1000")
    assert r.returncode == 0 and r.stdout == "done\n", r
    names = shares(data)
    counts = {k: data[k] for k in ("ticks", "missed", "held", "deferred", "torn", "samples")}
    assert {"before", "during", "after"} <= names.keys(), (names, counts)
    assert data["torn"] > 0, data["torn"]
