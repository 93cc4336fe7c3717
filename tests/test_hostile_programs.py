"""Programs that do what a profiler would rather they did not behave under `leadline run -q`
and `leadline trace -q` exactly as under `python`: the same stdout, stderr and exit status.

They profile or trace themselves (sys.setprofile, sys.settrace, threading.setprofile,
cProfile, sys.monitoring), start processes with multiprocessing's spawn method, handle, block
and wait for signals, read piped standard input, run 300 threads and write bytes that are not
text to standard output."""

from __future__ import annotations

import platform
import signal
import sys
from pathlib import Path

import pytest
from sameworld import MODES, assert_same, child_env, compare, leadline_run, python_run
from support import funcs, report, write

from leadline import _native
from leadline.capture.reader import Capture

# On 3.10 and 3.11 leadline traces through the profile function of each thread: a program
# that sets its own replaces it (the program's keeps working), and `trace` says so at the end.
# From 3.12 on it uses a sys.monitoring tool of its own and sees everything.
REPLACED_WARNING = (
    "leadline: warning: the program removed or replaced leadline's profile hook "
    "(sys.setprofile) on {n} thread(s); events there after that are missing\n"
)


def compare_with_own_hooks(tmp_path: Path, name: str, replaced_threads: int) -> str:
    """Like sameworld.compare, except that `trace` before 3.12 adds its one warning line."""
    expected = python_run([name], tmp_path)
    assert_same(expected, leadline_run("run", [name], tmp_path), "leadline run")
    traced = leadline_run("trace", [name], tmp_path)
    if sys.version_info < (3, 12) and replaced_threads:
        expected.stderr += REPLACED_WARNING.format(n=replaced_threads)
    assert_same(expected, traced, "leadline trace")
    return str(expected.stdout)


SELF_PROFILING = """\
import atexit, sys, threading

def target():
    return 1

def target2():
    a = 1
    b = 2
    return a + b

calls = []
def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "target":
        calls.append(event)
sys.setprofile(prof)
for _ in range(5):
    target()
sys.setprofile(None)
print("setprofile saw", len(calls), "calls")

lines = []
def tracer(frame, event, arg):
    if frame.f_code.co_name != "target2":
        return None
    if event == "line":
        lines.append(frame.f_lineno - target2.__code__.co_firstlineno)
    return tracer
sys.settrace(tracer)
target2()
sys.settrace(None)
print("settrace saw lines", lines)

# Its own function stays set to the end, for this thread and for new ones: leadline must not
# take it away when it stops.
def keep(frame, event, arg):
    pass
sys.setprofile(keep)
threading.setprofile(keep)
t = threading.Thread(target=lambda: print("a new thread has it:", sys.getprofile() is keep))
t.start()
t.join()
atexit.register(lambda: print("at exit:", sys.getprofile() is keep, threading.getprofile() is keep))
"""


def test_a_program_with_its_own_profile_and_trace_functions(tmp_path: Path) -> None:
    write(tmp_path, "prog.py", SELF_PROFILING)
    out = compare_with_own_hooks(tmp_path, "prog.py", replaced_threads=1)
    assert out == (
        "setprofile saw 5 calls\n"
        "settrace saw lines [1, 2, 3]\n"
        "a new thread has it: True\n"
        "at exit: True True\n"
    )


CPROFILE = """\
import cProfile, io, pstats

def target(n):
    return sum(range(n))

p = cProfile.Profile()
p.enable()
for i in range(7):
    target(i)
p.disable()
out = io.StringIO()
pstats.Stats(p, stream=out).print_stats("target")
row = next(line for line in out.getvalue().splitlines() if "(target)" in line)
print("cProfile counted", row.split()[0], "calls")
"""


def test_a_program_that_runs_cprofile(tmp_path: Path) -> None:
    """cProfile takes sys.monitoring's profiler id on 3.12+: leadline must leave it free."""
    write(tmp_path, "prog.py", CPROFILE)
    assert compare_with_own_hooks(tmp_path, "prog.py", 1) == "cProfile counted 7 calls\n"


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
def test_a_program_with_its_own_monitoring_tool(tmp_path: Path) -> None:
    write(
        tmp_path,
        "prog.py",
        """\
        import sys
        mon = sys.monitoring

        def target():
            return 1

        starts = []
        for tool, name in ((mon.PROFILER_ID, "mine"), (mon.COVERAGE_ID, "cov")):
            mon.use_tool_id(tool, name)
            mon.register_callback(tool, mon.events.PY_START, lambda code, off: starts.append(
                code.co_name) if code.co_name == "target" else None)
            mon.set_events(tool, mon.events.PY_START)
        for _ in range(3):
            target()
        for tool in (mon.PROFILER_ID, mon.COVERAGE_ID):
            mon.set_events(tool, 0)
            mon.free_tool_id(tool)
        print("monitoring saw", len(starts), "starts")
        """,
    )
    assert compare(["prog.py"], tmp_path)["python"].stdout == "monitoring saw 6 starts\n"


def test_multiprocessing_spawn(tmp_path: Path) -> None:
    """A spawned child runs the parent's __main__ file again (as __mp_main__): it gets the
    path python gave the parent."""
    write(
        tmp_path,
        "prog.py",
        """\
        import multiprocessing as mp, os, sys

        def square(x):
            main = sys.modules["__mp_main__"]
            return x * x, main.__file__

        if __name__ == "__main__":
            with mp.get_context("spawn").Pool(2) as pool:
                results = pool.map(square, range(6))
            print([r[0] for r in results])
            print(sorted({r[1] for r in results}) == [__file__], os.path.isabs(__file__))
        """,
    )
    out = compare(["prog.py"], tmp_path, timeout=240)["python"]
    assert out.stdout == "[0, 1, 4, 9, 16, 25]\nTrue True\n"


SIGNALS = """\
import os, signal, sys, threading, time

got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append("USR1"))
signal.signal(signal.SIGTERM, lambda s, f: got.append("TERM"))
os.kill(os.getpid(), signal.SIGUSR1)
os.kill(os.getpid(), signal.SIGTERM)
print(got)

# A signal blocked and waited for: it must reach this thread, not kill the process.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
os.kill(os.getpid(), signal.SIGUSR2)
print("sigwait:", signal.sigwait({signal.SIGUSR2}) == signal.SIGUSR2)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR2})

# A signal sent from another thread must interrupt the main thread's sleep at once.
class Woken(Exception):
    pass

def wake(signum, frame):
    raise Woken

signal.signal(signal.SIGALRM, wake)
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGALRM)).start()
started = time.monotonic()
try:
    time.sleep(30)
except Woken:
    print("woken early:", time.monotonic() - started < 20)

try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
except KeyboardInterrupt:
    print("KeyboardInterrupt caught")
print("default handler:", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
sys.stdout.flush()
signal.signal(signal.SIGTERM, signal.SIG_DFL)
os.kill(os.getpid(), signal.SIGTERM)
"""


def test_signals(tmp_path: Path) -> None:
    write(tmp_path, "prog.py", SIGNALS)
    out = compare(["prog.py"], tmp_path)["python"]
    assert out.returncode == -signal.SIGTERM
    assert out.stdout == (
        "['USR1', 'TERM']\nsigwait: True\nwoken early: True\nKeyboardInterrupt caught\n"
        "default handler: True\n"
    )


def test_signal_after_a_fork(tmp_path: Path) -> None:
    """leadline's threads stop for a fork and start again in the parent: they still take no
    signal meant for the program."""
    write(
        tmp_path,
        "prog.py",
        """\
        import os, signal
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        for _ in range(20):
            os.kill(os.getpid(), signal.SIGUSR1)
            assert signal.sigwait({signal.SIGUSR1}) == signal.SIGUSR1
        print("20 waited for")
        """,
    )
    assert compare(["prog.py"], tmp_path)["python"].stdout == "20 waited for\n"


def test_a_slow_after_fork_hook(tmp_path: Path) -> None:
    """leadline's threads, stopped for a fork, start again once os.fork has returned: 3.13
    counts the parent's threads after its after-fork hooks, and warns about forking a
    multi-threaded process if it finds ours.  A hook of the program's that takes 30 ms and
    calls functions (traced events) ran past the tracer's 1 ms fallback, which CI's busy
    machine also did with none (`trace` warned in test_signal_after_a_fork).  The hook's time
    is its own (the coarse clock, whose sampler is stopped meanwhile, moves with its events),
    and a child that forks again through the wrapper it kept (`from os import fork`, a daemon's
    double fork) gets a plain fork: its recording stopped at its own fork."""
    write(
        tmp_path,
        "prog.py",
        """\
        import os, time
        from os import fork
        def step(i):
            return i * 2
        def slow():
            end = time.monotonic() + 0.03
            while time.monotonic() < end:
                step(1)
        os.register_at_fork(after_in_parent=slow)
        for _ in range(3):
            pid = fork()
            if pid == 0:
                grandchild = fork()
                if grandchild == 0:
                    os._exit(0)
                os._exit(os.waitstatus_to_exitcode(os.waitpid(grandchild, 0)[1]))
            print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        print("forked 3 times")
        """,
    )
    out = compare(["prog.py"], tmp_path)["python"]
    assert out.stdout == "0\n0\n0\nforked 3 times\n"
    capture = tmp_path / "t.lead"
    traced = leadline_run("trace", ["prog.py"], tmp_path, capture=capture)
    assert_same(out, traced, "leadline trace")
    slow = funcs(report(capture, tmp_path))["slow"]
    assert slow["calls"] == 3 and slow["incl_ns"] >= 3 * 28e6, slow


# A pipeline of generators: its stack changes every microsecond or so, so the sampler reads
# its threads parked (docs/run.md, "Stacks that change under the sampler").
PIPELINE = """\
import time

def numbers(n):
    for i in range(n):
        yield i

def double(src):
    for x in src:
        yield x * 2

def count(src):
    return sum(1 for x in src if x % 4 == 0)

def pipeline(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        count(double(numbers(20000)))
"""


def test_a_program_that_takes_the_parking_signal(tmp_path: Path) -> None:
    """The program's own handler for the signal that parks a thread is never called by
    leadline, whether the program took the signal before sampling began (`profile()`) or
    after (`run`, whose sampler starts first)."""
    write(
        tmp_path,
        "prog.py",
        PIPELINE
        + """\
import os, signal, sys
calls = []
signal.signal(signal.SIGRTMAX - 3, lambda s, f: calls.append(s))
pipeline(0.6)
if os.environ.get("WITH_PROFILE"):
    import leadline
    with leadline.profile("api.lead", rate=2000):
        pipeline(0.6)
print("handler calls:", len(calls))
""",
    )
    assert compare(["prog.py"], tmp_path)["python"].stdout == "handler calls: 0\n"
    out = python_run(["prog.py"], tmp_path, env={**child_env(), "WITH_PROFILE": "1"})
    assert (out.returncode, out.stdout) == (0, "handler calls: 0\n"), out
    with Capture(tmp_path / "api.lead") as cap:
        assert cap.end is not None and cap.end["parked"] == 0 and cap.end["samples"] > 100


def test_a_thread_that_blocks_the_parking_signal(tmp_path: Path) -> None:
    """A thread that blocks the signal is never sent it (it would wait there, pending, where
    the program can see it), while another thread beside it is parked as usual; threads that
    sleep, wait in select() or read a pipe are never interrupted.  The feeder's write reaches
    the waiter 1.2 s after it starts plus the time the feeder waits for the GIL beside the two
    busy threads (13-140 ms in 40 runs on 3.14, with or without leadline, quiet or beside two
    hogs; once over 300 ms in a CI stage, under `run`: select, then given 1.5 s, said False):
    select is given 30 s, and returns as soon as the write arrives."""
    write(
        tmp_path,
        "prog.py",
        PIPELINE
        + """\
import os, select, signal, threading, time
worker = threading.Thread(target=pipeline, args=(1.0,))
worker.start()  # before the mask, which new threads inherit
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMAX - 3})
r, w = os.pipe()
def waiter():
    print("select:", select.select([r], [], [], 30)[0] == [r], flush=True)
    print("read:", os.read(r, 5), flush=True)
def feeder():
    time.sleep(1.2)
    os.write(w, b"hello")
threads = [threading.Thread(target=waiter), threading.Thread(target=feeder)]
for t in threads:
    t.start()
pipeline(1.0)
for t in [worker, *threads]:
    t.join()
print("pending:", sorted(signal.sigpending()))
""",
    )
    out = compare(["prog.py"], tmp_path)
    assert out["python"].stdout == "select: True\nread: b'hello'\npending: []\n"
    # A thread is parked when its walk raced, which a short run on a busy machine may never
    # need (a loaded run of the suite: 0-4 raced walks a run, nothing parked, six runs in a
    # row); with --native every tick parks each thread that ran, for its registers and stack.
    # So: recorded with --native, the worker, which took the signal, is parked and its samples
    # have C frames; the threads that block it (main, waiter, feeder) are never sent it, and
    # theirs have none.
    if platform.machine() != "x86_64" or _native.native_unavailable():
        pytest.skip("run --native needs x86-64 and libdw")
    capture = tmp_path / "native.lead"
    native = leadline_run("run", ["--native", "prog.py"], tmp_path, capture=capture)
    assert_same(out["python"], native, "leadline run --native")
    # The main thread blocks the signal from its mask's line on: its samples have C frames
    # only before that line (one taken as the worker starts may: seen in a two-worker run).
    prog = (tmp_path / "prog.py").read_text().splitlines()
    mask_line = next(i for i, text in enumerate(prog, 1) if "signal.pthread_sigmask(" in text)
    with_c: dict[int, list[bool]] = {}
    with Capture(capture) as cap:
        assert cap.end is not None and cap.end["native_stops"] > 0, cap.end
        end = cap.end
        pid = cap.meta["pid"]
        for _, serial, _, stack, _, _ in cap.samples():
            kinds, module_line = [], 0
            while stack:
                stack, fid, off = cap.stacks[stack]
                f = cap.functions[fid]
                kinds.append(f.kind)
                if f.kind == "py" and f.name == "<module>" and not module_line:
                    module_line = f.line_at(off)  # the program's (the innermost)
            if "py" in kinds and not (cap.tasks[serial].tid == pid and module_line < mask_line):
                with_c.setdefault(serial, []).append("c" in kinds)
        tids = {serial: cap.tasks[serial].tid for serial in with_c}
    summary = {tids[s]: (sum(c), len(c)) for s, c in with_c.items()}  # tid: (with C, all)
    mains = [s for s, tid in tids.items() if tid == pid]
    assert mains, f"no sample of the main thread after its mask: {summary}, {end}"
    main = mains[0]
    assert not any(with_c[main]), "the main thread blocks the signal: no C frames"
    parked = [s for s in with_c if any(with_c[s])]
    assert len(parked) == 1 and sum(with_c[parked[0]]) > 10, with_c
    # END counts the parks refused (the main thread's, at each tick it ran: its samples after
    # the mask, but for those it had not run since the last) among the samples without C frames.
    refused, unread, ticks = end["native_unanswered"], end["native_unread"], end["ticks"]
    assert isinstance(refused, int) and isinstance(unread, int) and isinstance(ticks, int), end
    assert 0 < refused and 0 < unread, end
    assert len(with_c[main]) > 10 and refused <= ticks * len(with_c), end


def test_piped_standard_input(tmp_path: Path) -> None:
    write(
        tmp_path,
        "prog.py",
        """\
        import hashlib, sys
        first = sys.stdin.readline()
        rest = sys.stdin.read()
        print(repr(first), len(rest), hashlib.sha256(rest.encode()).hexdigest()[:16])
        """,
    )
    text = "first line\n" + "".join(f"line {i}\n" for i in range(5000))
    (tmp_path / "input.txt").write_text(text)
    out = compare(["prog.py"], tmp_path, stdin_path=tmp_path / "input.txt")["python"]
    assert out.stdout.startswith("'first line\\n' ")


def test_three_hundred_threads(tmp_path: Path) -> None:
    write(
        tmp_path,
        "prog.py",
        """\
        import threading
        results = [0] * 300
        def work(i):
            results[i] = sum(range(i * 100))
        threads = [threading.Thread(target=work, args=(i,), name=f"w{i}") for i in range(300)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(sum(results), threading.active_count())
        """,
    )
    out = compare(["prog.py"], tmp_path, timeout=240)["python"]
    assert out.stdout == f"{sum(sum(range(i * 100)) for i in range(300))} 1\n"


def test_binary_standard_output(tmp_path: Path) -> None:
    write(
        tmp_path,
        "prog.py",
        """\
        import sys
        sys.stdout.buffer.write(bytes(range(256)) * 64)
        sys.stdout.write("text after\\n")
        sys.stdout.buffer.write(b"\\xff\\xfe\\x00\\r\\n")
        """,
    )
    out = compare(["prog.py"], tmp_path, text=False)["python"]
    assert out.stdout == bytes(range(256)) * 64 + b"text after\n\xff\xfe\x00\r\n"


def test_the_modes_print_nothing_with_q(tmp_path: Path) -> None:
    """-q keeps each mode's own summary off stderr: the comparisons above rely on it."""
    write(tmp_path, "prog.py", "print('hello')\n")
    for mode in MODES:
        r = leadline_run(mode, ["prog.py"], tmp_path)
        assert (r.returncode, r.stdout, r.stderr) == (0, "hello\n", "")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="profile functions: 3.10 and 3.11")
def test_trace_refuses_over_a_profile_function_for_new_threads(tmp_path: Path) -> None:
    """A function the program set for new threads (threading.setprofile) would be replaced for
    the threads started while tracing, then lost: leadline refuses, and leaves it set."""
    write(
        tmp_path,
        "prog.py",
        f"""\
        import threading, leadline
        def mine(frame, event, arg):
            pass
        threading.setprofile(mine)
        try:
            with leadline.trace({str(tmp_path / "x.lead")!r}):
                pass
        except Exception as e:
            print(type(e).__name__, e)
        print("still set:", threading.getprofile() is mine)
        """,
    )
    out = python_run(["prog.py"], tmp_path)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("LeadlineError another profiler is active for new threads")
    assert lines[1:] == ["still set: True"]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
def test_trace_takes_a_free_tool_id_or_refuses(tmp_path: Path) -> None:
    """leadline takes 4, else 3, else 2; with all three held by the program it refuses in one
    line and leaves the program's tools as they are."""
    write(
        tmp_path,
        "prog.py",
        f"""\
        import sys, leadline
        mon = sys.monitoring
        def traced_tool(taken):
            for tool in taken:
                mon.use_tool_id(tool, f"mine{{tool}}")
            try:
                with leadline.trace({str(tmp_path / "x.lead")!r}):
                    print("leadline took", [t for t in (2, 3, 4) if mon.get_tool(t) == "leadline"])
            except Exception as e:
                print(type(e).__name__, e)
            print("mine:", [mon.get_tool(t) for t in taken])
            for tool in taken:
                mon.free_tool_id(tool)
        traced_tool([])
        traced_tool([4])
        traced_tool([3, 4])
        traced_tool([2, 3, 4])
        """,
    )
    out = python_run(["prog.py"], tmp_path)
    assert out.stdout.splitlines() == [
        "leadline took [4]",
        "mine: []",
        "leadline took [3]",
        "mine: ['mine4']",
        "leadline took [2]",
        "mine: ['mine3', 'mine4']",
        "LeadlineError no free sys.monitoring tool id for leadline (2: mine2, 3: mine3, 4: mine4)",
        "mine: ['mine2', 'mine3', 'mine4']",
    ], out.stderr
