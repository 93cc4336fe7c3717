"""`leadline dump PID` (docs/dump.md) through the real CLI, on the programs people run it on: one
blocked in C, one whose thread holds the GIL forever, one deadlocked; text and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support import PY, leadline, report, write

from leadline.capture.reader import Capture

# The main thread asleep in C; a worker blocked on an empty queue.
BLOCKED = """
import queue, threading, time

def consume(q):
    q.get()

def wait_forever():
    time.sleep(600)

threading.Thread(target=consume, args=(queue.Queue(),), name="consumer", daemon=True).start()
print("ready", flush=True)
wait_forever()
"""

# A thread in a regular expression that backtracks for ever, holding the GIL (the engine never
# lets it go); the main thread runs Python code beside it, and once the regular expression has
# the GIL, waits for it for ever.
GIL_FOREVER = """
import re, threading

def backtrack():
    re.match(r"(a+)+$", "a" * 64 + "b")

def keep_busy():
    n = 0
    while True:
        n += 1

print("ready", flush=True)
threading.Thread(target=backtrack, name="regex", daemon=True).start()
keep_busy()
"""

# A thread that hashes in C without the GIL (hashlib lets it go for a large input) while the
# main thread sleeps: running, but neither holding the GIL nor waiting for it.
HASHING = """
import hashlib, threading, time

def hash_forever(data):
    while True:
        hashlib.sha256(data).digest()

threading.Thread(target=hash_forever, args=(bytes(32 << 20),), name="hasher", daemon=True).start()
print("ready", flush=True)
time.sleep(600)
"""

# Threads named as people name them: longer than the system keeps (15 bytes), a subclass of
# Thread, one whose attributes were made a dict (vars()), one renamed once running, and one left
# unnamed ("Thread-N (target)").  3.10 to 3.13 give the system none of these names.
NAMED = """
import threading, time

class Worker(threading.Thread):
    pass

def wait():
    time.sleep(600)

threads = [
    threading.Thread(target=wait, name="fetcher-with-a-long-name", daemon=True),
    Worker(target=wait, name="worker-7", daemon=True),
    threading.Thread(target=wait, name="with-a-dict", daemon=True),
    threading.Thread(target=wait, name="before", daemon=True),
    threading.Thread(target=wait, daemon=True),
]
for t in threads:
    t.start()
threads[2].note = "x"
vars(threads[2])
threads[3].name = "renamed-when-running"
print("ready", flush=True)
wait()
"""

# Local variables of every kind dump --locals shows, in a function asleep, its caller (a cell
# and a closure), and a worker thread.
LOCALS = """
import threading, time

def inner(count, label, ratio, data, items, table, flag, nothing, big, huge, neg, obj, text):
    total = count * 2
    empty = []
    time.sleep(600)

def outer():
    shared = "captured"
    def closure():
        return shared
    inner(42, "hello\\nworld", 0.1, b"\\x00ab", [1, 2, 3], {"a": 1}, True, None, 2**100,
          2**200, -7, object(), "x" * 500)

def worker(started):
    mine = "worker's"
    started.set()
    time.sleep(600)

def spin(started):
    total = 0
    started.set()
    while True:
        total += sum(range(100))

for f in (worker, spin):
    started = threading.Event()
    threading.Thread(target=f, args=(started,), daemon=True).start()
    started.wait()
print("ready", flush=True)
outer()
"""

# Two threads that each hold one lock and wait for the other's; the main thread joins them.
DEADLOCK = """
import threading

a, b = threading.Lock(), threading.Lock()
both = threading.Barrier(3)

def first():
    with a:
        both.wait()
        with b:  # first waits here
            pass

def second():
    with b:
        both.wait()
        with a:  # second waits here
            pass

workers = [threading.Thread(target=f, name=f.__name__) for f in (first, second)]
for w in workers:
    w.start()
both.wait()
print("ready", flush=True)
for w in workers:
    w.join()
"""


@contextmanager
def target(tmp_path: Path, source: str, settle: float = 0.0) -> Iterator[subprocess.Popen[str]]:
    script = write(tmp_path, "target.py", source)
    proc = subprocess.Popen([PY, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(settle)  # what it does next, begun
        yield proc
    finally:
        proc.kill()
        proc.wait()


def dump_json(proc: subprocess.Popen[str], tmp_path: Path, *more: str) -> dict[str, Any]:
    r = leadline("dump", proc.pid, "--json", *more, cwd=tmp_path, check=True)
    data: dict[str, Any] = json.loads(r.stdout)
    assert data["pid"] == proc.pid and data["python_version"] == f"3.{sys.version_info[1]}"
    return data


def names(thread: dict[str, Any]) -> list[str]:
    return [f["name"] for f in thread["frames"]]


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_a_program_blocked_in_c(tmp_path: Path) -> None:
    with target(tmp_path, BLOCKED) as proc:
        data = dump_json(proc, tmp_path)
        kept = tmp_path / "snap.lead"
        text = leadline("dump", proc.pid, "-o", kept, cwd=tmp_path, check=True).stdout
    # -o keeps the snapshot: a sampling capture of one tick, a read a thread.
    snap = report(kept, tmp_path)
    assert (snap["ticks"], len(snap["threads"]), snap["samples"]) == (1, 2, 2), snap["threads"]
    threads = {t["tid"]: t for t in data["threads"]}
    main = threads[proc.pid]
    assert main["name"] == "MainThread" and main["state"] == "idle", main
    # Innermost first: the function asleep in C, then the module.
    assert names(main) == ["wait_forever", "<module>"], main
    assert main["frames"][0]["line"] == line_of(BLOCKED, "time.sleep(600)")
    assert main["gil"] == "none"  # asleep: it let the GIL go and does not want it
    (worker,) = [t for t in data["threads"] if t["tid"] != proc.pid]
    assert worker["state"] == "idle" and "consume" in names(worker), worker
    assert names(worker)[-1].endswith("_bootstrap")  # Thread._bootstrap (3.10: bare names)
    # The text says the same.
    assert f"Thread {proc.pid} (MainThread): idle" in text
    # Its file relative to the folder it runs in (docs/paths.md), whole in the JSON.
    assert f"    wait_forever (target.py:{line_of(BLOCKED, 'time.sleep(600)')})" in text, text
    assert data["cwd"] == str(tmp_path), data["cwd"]
    assert str(tmp_path) not in text.split("\n", 1)[1], text  # but in the argv line
    assert main["frames"][0]["file"] == str(tmp_path / "target.py")


def test_threads_are_named_as_the_program_named_them(tmp_path: Path) -> None:
    """Read from threading._active's Thread objects in the target's memory, on every version:
    whole (the system keeps 15 bytes of a name on 3.14+, and none before), whatever the
    version keeps a Thread's attributes in (values, a dict); as the text, and as a capture kept
    with -o, which reports name the same way."""
    want = {
        "MainThread",
        "fetcher-with-a-long-name",
        "worker-7",
        "with-a-dict",
        "renamed-when-running",
        "Thread-1 (wait)",
    }
    with target(tmp_path, NAMED) as proc:
        data = dump_json(proc, tmp_path)
        kept = tmp_path / "snap.lead"
        text = leadline("dump", proc.pid, "-o", kept, cwd=tmp_path, check=True).stdout
    assert {t["name"] for t in data["threads"]} == want, data["threads"]
    main = next(t for t in data["threads"] if t["tid"] == proc.pid)
    assert main["name"] == "MainThread"
    assert all(names(t)[0] == "wait" for t in data["threads"]), data["threads"]
    assert "(fetcher-with-a-long-name): idle" in text and "(Thread-1 (wait)): idle" in text, text
    assert {t["name"] for t in report(kept, tmp_path)["threads"]} == want


# A program that has made threading._active what no Thread left it: an entry that is no
# Thread, one under a key that is no int, a Thread whose _name is no str, and one whose
# attributes dict was replaced by a subclass of dict.
ODD_ACTIVE = """
import threading, time

class Odd(dict):
    pass

def wait():
    time.sleep(600)

threads = [threading.Thread(target=wait, name=n, daemon=True) for n in ("plain", "int", "odd")]
for t in threads:
    t.start()
threading._active[1] = object()
threading._active["not an int"] = threads[0]
threads[1]._name = 42
threads[2].__dict__ = Odd(threads[2].__dict__)
print("ready", flush=True)
wait()
"""


def test_threads_whose_names_cannot_be_read_keep_the_systems(tmp_path: Path) -> None:
    """What cannot be read as a Thread's name is left out: that thread keeps the name the
    system gives it, every other is named, and dump says nothing else has changed."""
    with target(tmp_path, ODD_ACTIVE) as proc:
        data = dump_json(proc, tmp_path)
    shown = {t["name"] for t in data["threads"]}
    assert len(data["threads"]) == 4 and {"MainThread", "plain", "odd"} <= shown, shown
    assert "42" not in shown and all(names(t)[0] == "wait" for t in data["threads"]), shown


def test_attach_names_the_threads_too(tmp_path: Path) -> None:
    """attach reads the names once it has stopped sampling, as dump does: its capture's report
    names each thread as the program did."""
    with target(tmp_path, NAMED) as proc:
        cap = tmp_path / "att.lead"
        leadline("attach", proc.pid, "--duration", "0.5", "-q", "-o", cap, cwd=tmp_path, check=True)
    shown = {t["name"] for t in report(cap, tmp_path)["threads"]}
    assert {"MainThread", "fetcher-with-a-long-name", "renamed-when-running"} <= shown, shown


def test_a_thread_that_holds_the_gil_forever(tmp_path: Path) -> None:
    with target(tmp_path, GIL_FOREVER, settle=0.5) as proc:
        data = dump_json(proc, tmp_path)
    (regex,) = [t for t in data["threads"] if t["tid"] != proc.pid]
    assert regex["state"] == "running" and regex["gil"] == "held", regex
    # re.match (3.15: its prefixmatch) called from backtrack.
    assert names(regex)[0] in ("match", "prefixmatch") and names(regex)[1] == "backtrack", regex
    # The main thread, which runs Python code (keep_busy, or still in Thread.start if the other
    # thread took the GIL first), waits for it.
    main = next(t for t in data["threads"] if t["tid"] == proc.pid)
    assert main["state"] == "idle" and main["gil"] == "wait", main
    assert names(main)[-1] == "<module>", main


def test_locals_of_a_thread_that_holds_the_gil(tmp_path: Path) -> None:
    # The thread holding the GIL is stopped while it is read; the one waiting for the GIL is
    # not (its frames cannot change), and is still found waiting.
    with target(tmp_path, GIL_FOREVER, settle=0.5) as proc:
        data = dump_json(proc, tmp_path, "--locals")
    (regex,) = [t for t in data["threads"] if t["tid"] != proc.pid]
    assert regex["state"] == "running" and regex["gil"] == "held", regex
    # re.match(pattern, string, flags=0), in C: its arguments as passed.
    got = variables(regex["frames"][0])
    assert got["pattern"] == repr(r"(a+)+$") and got["string"] == repr("a" * 64 + "b"), got
    assert got["flags"] == "0" and variables(regex["frames"][1]) == {}, regex
    main = next(t for t in data["threads"] if t["tid"] == proc.pid)
    assert main["state"] == "idle" and main["gil"] == "wait", main
    for frame in main["frames"]:
        if frame["name"] == "keep_busy":  # (or still in Thread.start)
            assert variables(frame)["n"].isdigit(), main


def test_a_thread_in_c_without_the_gil(tmp_path: Path) -> None:
    # A runnable thread that does not hold the GIL is watched for a while (a thread woken from
    # its wait on the GIL goes back to it): one in C without the GIL is still found running.
    with target(tmp_path, HASHING, settle=0.3) as proc:
        data = dump_json(proc, tmp_path)
    (hasher,) = [t for t in data["threads"] if t["tid"] != proc.pid]
    assert names(hasher)[0] == "hash_forever", hasher
    assert hasher["state"] == "running" and hasher["gil"] == "none", hasher
    main = next(t for t in data["threads"] if t["tid"] == proc.pid)
    assert main["state"] == "idle" and main["gil"] == "none", main


def variables(frame: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["repr"] for v in frame["locals"]}


def test_locals_of_every_frame(tmp_path: Path) -> None:
    with target(tmp_path, LOCALS, settle=0.3) as proc:
        data = dump_json(proc, tmp_path, "--locals")
        one = dump_json(proc, tmp_path, "--locals-frames", "1")
        plain = dump_json(proc, tmp_path)
        text = leadline("dump", proc.pid, "--locals", cwd=tmp_path, check=True).stdout
    main = next(t for t in data["threads"] if t["tid"] == proc.pid)
    assert names(main) == ["inner", "outer", "<module>"], main
    inner, outer, module = main["frames"]
    got = variables(inner)
    obj = got.pop("obj")
    assert obj.startswith("<object object at 0x"), obj
    assert got == {
        "count": "42",
        "label": repr("hello\nworld"),
        "ratio": "0.1",
        "data": repr(b"\x00ab"),
        "items": "<list of 3 items>",
        "table": "<dict of 1 item>",
        "flag": "True",
        "nothing": "None",
        "big": str(2**100),
        "huge": "<int of 210 bits>",  # 201 bits, in seven 30-bit digits: not read
        "neg": "-7",
        "text": repr("x" * 200) + "…",  # cut at 200 characters, and said
        "total": "84",
        "empty": "[]",
    }, got
    assert {v["name"]: v["type"] for v in inner["locals"]}["obj"] == "object"
    # The caller's own cell (read through it) and its closure; the module's frame has none.
    closure = variables(outer).pop("closure")
    assert variables(outer)["shared"] == "'captured'" and "function" in closure, outer
    assert module["locals"] == []
    # Every thread's frames: the worker's, whose string needs double quotes.
    threads = {names(t)[0]: t for t in data["threads"] if t["tid"] != proc.pid}
    assert variables(threads["worker"]["frames"][0])["mine"] == '"worker\'s"', threads
    # A thread running a loop is stopped while its variables are read (an int that changes
    # at every turn, whose memory the loop's range objects reuse), and goes on afterwards.
    totals = []
    for snap in (data, one):
        spinner = next(t for t in snap["threads"] if t["frames"] and names(t)[0] == "spin")
        (total,) = [v for v in spinner["frames"][0]["locals"] if v["name"] == "total"]
        assert total["type"] == "int" and total["repr"].isdigit(), spinner
        totals.append(int(total["repr"]))
    assert totals[1] > totals[0], totals
    # --locals-frames 1: the innermost frame only; without --locals, no locals at all.
    main_one = next(t for t in one["threads"] if t["tid"] == proc.pid)
    assert variables(main_one["frames"][0]) == {**got, "obj": obj}
    assert all(f["locals"] == [] for f in main_one["frames"][1:]), main_one
    assert all("locals" not in f for t in plain["threads"] for f in t["frames"]), plain
    # The text shows each variable under its frame.
    assert "    inner (target.py:" in text and "        count = 42\n" in text, text
    assert "        shared = 'captured'\n" in text, text


def test_locals_bad_count_is_one_line(tmp_path: Path) -> None:
    for bad in ("0", "1001", "x"):
        r = leadline("dump", "1", "--locals-frames", bad, cwd=tmp_path)
        assert r.returncode == 2 and "--locals-frames" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2, r.stderr


def test_a_deadlocked_program(tmp_path: Path) -> None:
    with target(tmp_path, DEADLOCK, settle=0.2) as proc:
        data = dump_json(proc, tmp_path)
    by_name = {names(t)[0]: t for t in data["threads"] if t["frames"]}
    # Each worker waits at its second lock, off a CPU, not for the GIL.
    for func in ("first", "second"):
        t = by_name[func]
        assert t["state"] == "idle" and t["gil"] == "none", t
        assert t["frames"][0]["line"] == line_of(DEADLOCK, f"# {func} waits here"), t
    main = next(t for t in data["threads"] if t["tid"] == proc.pid)
    assert {"Thread.join", "join"} & set(names(main)) and names(main)[-1] == "<module>", main


# Two tasks asleep through two coroutines, and the main task asleep, on the main thread's loop.
TASKS = """
import asyncio

async def fetch(delay):
    await asyncio.sleep(delay)

async def client(done):
    for _ in range(3):  # a few rounds run before the dump
        await fetch(0.01)
    done.set()
    while True:
        await fetch(600)

async def main():
    done = [asyncio.Event() for _ in range(2)]
    tasks = [asyncio.create_task(client(d), name=f"client-{i}") for i, d in enumerate(done)]
    for d in done:
        await d.wait()
    print("ready", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_async_all_lists_the_tasks_that_wait(tmp_path: Path) -> None:
    # Once ready, the loop waits for nothing but a timer 600 s away.  Between the print and that
    # wait it still runs, for a moment that a busy machine can make long (CI's loaded stage found
    # it running when the clients woke every 50 ms): a dump that found it on its way is taken again.
    with target(tmp_path, TASKS, settle=0.2) as proc:
        for _ in range(5):
            r = leadline("dump", proc.pid, "--json", "--async", "all", cwd=tmp_path, check=True)
            (main,) = json.loads(r.stdout)["threads"]
            if main["state"] == "idle":
                break
            time.sleep(0.5)
    assert main["state"] == "idle" and {"BaseEventLoop._run_once", "_run_once"} & {*names(main)}, (
        main
    )
    waiting = {tuple(f["name"] for f in task) for task in main["waiting_tasks"]}
    if sys.version_info < (3, 14):  # said in one line; no waiting task read
        assert waiting == set() and "reads waiting tasks on Python 3.14+" in r.stderr
        return
    # Each task innermost first: where it waits, the coroutines awaiting each other, the task.
    assert waiting == {
        ("sleep", "fetch", "client", "client-0"),
        ("sleep", "fetch", "client", "client-1"),
        ("sleep", "main", "Task-1"),
    }, waiting


def test_dump_errors(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    r = leadline("dump", gone.pid, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"leadline: error: no such process: {gone.pid}"
    ], r.stderr
    r = leadline("dump", "abc", cwd=tmp_path)
    assert r.returncode == 2 and "not a process id: 'abc'" in r.stderr


def test_a_dump_imports_only_its_own_renderers(tmp_path: Path) -> None:
    """A hung program's first aid starts fast: the dump's renderers are found in
    render/dump.py, without importing the diff's and the HTML pages' (0.22 s of a dump's 0.3 s
    of CPU when every renderer was imported); any other pair still finds every renderer."""
    probe = (
        "import sys\n"
        "from leadline.render.base import get_renderer\n"
        "print(type(get_renderer('json', 'dump')).__name__)\n"
        "print(sorted(m for m in sys.modules if m.startswith('leadline.render.')))\n"
        "print(type(get_renderer('html', 'diff')).__name__)\n"
    )
    r = subprocess.run([PY, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    first, modules, last = r.stdout.splitlines()
    assert first == "DumpJson", first
    assert "leadline.render.dump" in modules and "diff_html" not in modules, modules
    assert "leadline.render.sample_html" not in modules, modules
    assert "diff" in last.lower(), last


# --native: C code under the Python line that called it, in a C library through an extension
# (zlib), in the interpreter itself (re), and in an extension built here that holds the GIL.
COMPRESSING = """
import os, zlib

def compress_forever(data):
    while True:
        zlib.compress(data, 9)

print("ready", flush=True)
compress_forever(os.urandom(1 << 20) * 4)
"""

SEARCHING = """
import re, threading, time

def search_forever(text):
    while True:
        re.search(r"(\\w+)\\s+needle", text)

text = "abc " * 1000000 + "needle"
threading.Thread(target=search_forever, args=(text,), name="searcher", daemon=True).start()
print("ready", flush=True)
time.sleep(600)
"""

SPINNING = """
import sys, time
sys.path.insert(0, ".")
import spinmod

def spin():
    spinmod.spin_in_c()

print("ready", flush=True)
spin()
"""

SPINMOD = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static volatile unsigned long spun;

static PyObject *spin_in_c(PyObject *self, PyObject *unused) {
    for (;;) spun++;  /* holding the GIL */
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"spin_in_c", spin_in_c, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "spinmod", NULL, -1, methods};
PyMODINIT_FUNC PyInit_spinmod(void) { return PyModule_Create(&module); }
"""


def build_extension(tmp_path: Path, name: str, source: str) -> None:
    """A C extension module `name`, built in tmp_path with the compiler and the headers of the
    Python under test."""
    (tmp_path / f"{name}.c").write_text(source)
    out = tmp_path / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    cmd = ["gcc", "-shared", "-fPIC", "-O1", "-g", f"-I{include}", f"{name}.c", "-o", str(out)]
    subprocess.run(cmd, cwd=tmp_path, check=True)


def build_spinmod(tmp_path: Path) -> None:
    build_extension(tmp_path, "spinmod", SPINMOD)


def is_python(frame: dict[str, Any]) -> bool:
    return str(frame["file"]).endswith(".py")


def under(thread: dict[str, Any], c_function: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The C frame named `c_function`, and the first Python frame outward of it: the line that
    called it."""
    frames = thread["frames"]
    at = next(i for i, f in enumerate(frames) if f["name"] == c_function)
    caller = next(f for f in frames[at + 1 :] if is_python(f))
    return frames[at], caller


def assert_interleaved(native: dict[str, Any], plain: dict[str, Any]) -> None:
    """--native's Python frames are the plain dump's, in order; no eval-loop frame is left."""
    assert [f["name"] for f in native["frames"] if is_python(f)] == names(plain), (native, plain)
    assert not any(f["name"] == "_PyEval_EvalFrameDefault" for f in native["frames"]), native


def test_native_frames_of_a_c_library_through_an_extension(tmp_path: Path) -> None:
    with target(tmp_path, COMPRESSING, settle=0.3) as proc:
        # Nearly all its time is in libz's deflate, not all: a dump found it in zlib_compress's
        # own code once (CI, 3.14), and one in freeing the last result (munmap under
        # object_dealloc, CI, 3.15).  Up to five dumps for one inside deflate, each way.
        for _ in range(5):
            data = dump_json(proc, tmp_path, "--native")
            frames = data["threads"][0]["frames"]
            if any(f["name"] == "deflate" and f["file"].startswith("libz.so") for f in frames):
                break
        kept = tmp_path / "snap.lead"
        for _ in range(5):
            text = leadline(
                "dump", proc.pid, "--native", "-o", kept, cwd=tmp_path, check=True
            ).stdout
            if "    deflate (libz.so" in text:
                break
    (main,) = data["threads"]
    c, caller = under(main, "zlib_compress")
    # (In the zlib extension, or in the interpreter, which builds it in on Debian's 3.14+.)
    assert c["file"].startswith(("zlib.cpython-", "python3", "libpython3")) and c["line"] == 0, c
    assert (caller["name"], caller["line"]) == (
        "compress_forever",
        line_of(COMPRESSING, "zlib.compress(data, 9)"),
    ), main
    assert any(f["name"] == "deflate" and f["file"].startswith("libz.so") for f in main["frames"])
    assert [f["name"] for f in main["frames"] if is_python(f)] == ["compress_forever", "<module>"]
    assert "    zlib_compress (" in text, text
    # The thread was stopped while its C stack was read (running C code without the GIL, it
    # is not held for the Python read): END says how long.
    with Capture(kept) as cap:
        assert cap.end is not None and 0 < cap.end["native_held_ns"] < 10**9, cap.end


def test_native_frames_of_the_interpreter_under_a_thread(tmp_path: Path) -> None:
    with target(tmp_path, SEARCHING, settle=0.3) as proc:
        data = dump_json(proc, tmp_path, "--native")
    (searcher,) = [t for t in data["threads"] if t["name"] == "searcher"]
    frames = searcher["frames"]
    py = [i for i, f in enumerate(frames) if is_python(f)]
    # re.search (re/__init__.py; 3.10: re.py) called from search_forever, the regular
    # expression engine's C functions inside it, and the thread's own start in C (libc's
    # start_thread) outermost.
    assert [frames[i]["name"] for i in py[:2]] == ["search", "search_forever"], frames
    assert frames[py[0]]["file"].endswith(("/re.py", "/re/__init__.py")) and py[0] > 0, frames
    assert any("sre" in f["name"] for f in frames[: py[0]]), frames
    assert frames[-1]["file"].startswith("libc.so"), frames  # the thread's start (clone3)
    main = next(t for t in data["threads"] if t["tid"] == proc.pid)
    # Asleep in libc (clock_nanosleep; 3.10: select), under time.sleep's line.
    caller = next(f for f in main["frames"] if is_python(f))
    c_part = main["frames"][: main["frames"].index(caller)]
    assert c_part[0]["file"].startswith("libc.so"), main
    assert any(w in f["name"] for f in c_part for w in ("sleep", "select")), main
    assert (caller["name"], caller["line"]) == ("<module>", line_of(SEARCHING, "time.sleep(600)"))


def test_native_frames_of_an_extension_that_holds_the_gil(tmp_path: Path) -> None:
    build_spinmod(tmp_path)
    with target(tmp_path, SPINNING, settle=0.3) as proc:
        plain = dump_json(proc, tmp_path)
        data = dump_json(proc, tmp_path, "--native")
    (main,) = data["threads"]
    assert main["state"] == "running" and main["gil"] == "held", main
    c, caller = under(main, "spin_in_c")
    assert c["file"].startswith("spinmod.cpython-"), c
    assert (caller["name"], caller["line"]) == ("spin", line_of(SPINNING, "spinmod.spin_in_c()"))
    assert main["frames"][0] == c  # innermost: the loop itself
    assert_interleaved(main, plain["threads"][0])


def test_native_is_refused_without_a_process_to_read(tmp_path: Path) -> None:
    r = leadline("dump", "1" * 7, "--native", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
