"""`run --native`: the C frames of the program's own threads, read by the sampler in the same
process (each thread held in a signal handler while its registers and stack are taken, then
unwound from the copy), the Python frames in place of the eval loop's (issue 16, native
frames): zlib, numpy's matrix product, `re` on a large text, a C extension built here, a second
thread, and a thread that sleeps."""

from __future__ import annotations

import collections
import json
import platform
import re
import textwrap
from pathlib import Path

import pytest
from support import leadline
from test_attach_native import EVAL, Frame, caller, sampled
from test_dump import build_extension, line_of

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="run --native reads C stacks on x86-64 only"
)

HANDLER = "on_park"  # the sampler's handler: never in a sample


Sampled = tuple[list[tuple[Frame, ...]], dict[str, object]]


def run_native(tmp_path: Path, source: str, *more: str) -> Sampled:
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    out = tmp_path / "prog.lead"
    leadline("run", "-r", "200", "-q", "-o", out, *more, script, cwd=tmp_path, check=True)
    return sampled(out)


def native_counts(native: list[tuple[Frame, ...]], end: dict[str, object]) -> str:
    """What a failed bound on unread samples needs to be told apart: a park refused or not
    answered in time, or a stack that could not be unwound."""
    keys = ("ticks", "missed", "native_stops", "native_unread", "native_unanswered")
    return f"{len(native)} samples; " + ", ".join(f"{k} {end.get(k)}" for k in keys)


def python_frames(s: tuple[Frame, ...]) -> tuple[tuple[str, int], ...]:
    return tuple((f[2], f[3]) for f in s if f[0] == "py")


COMPRESS = """
import os, time, zlib
data = os.urandom(1 << 15) * 16

def compress_all():
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        zlib.compress(data, 9)

compress_all()
"""


def test_run_native_shows_zlib_under_the_line_that_called_it(tmp_path: Path) -> None:
    plain, _ = run_native(tmp_path, COMPRESS)
    native, end = run_native(tmp_path, COMPRESS, "--native")
    line = line_of(textwrap.dedent(COMPRESS), "zlib.compress(data, 9)")
    # Without --native: Python frames only.
    assert len(plain) > 100 and all(f[0] == "py" for s in plain for f in s), plain[:3]
    # With it: zlib_compress under that line in nearly every sample whose C stack was read
    # (the rest: the loop around it), libz inside it, and neither the eval loop's frames nor the
    # sampler's handler.  A thread that did not answer its park in time (kept off a CPU on a
    # busy machine) has its Python frames alone, and END counts it: 0-2 of 356-405 samples
    # beside two CPU hogs, about 100 of 407 once beside a two-worker suite.
    assert len(native) > 100, len(native)
    unread = end["native_unread"]
    assert isinstance(unread, int) and unread < 0.5 * len(native), native_counts(native, end)
    # (A sample with Python frames alone can also be one whose unwind ended at the eval loop.)
    assert unread <= sum(all(f[0] == "py" or f[2] == "<GC>" for f in s) for s in native)
    found = [caller(s, "zlib_compress") for s in native]
    assert sum(map(bool, found)) > 0.8 * (len(native) - unread), collections.Counter(
        s[0] for s in native
    )
    assert {(py[2], py[3]) for _, py in filter(None, found)} == {("compress_all", line)}
    in_libz = sum(any(f[0] == "c" and f[1].startswith("libz.so") for f in s) for s in native)
    assert in_libz > 0.5 * (len(native) - unread), (in_libz, len(native))
    assert not any(f[2] in (EVAL, HANDLER) for s in native for f in s)
    # The Python frames are the program's (compress_all; the rest: the module making the data
    # before it), under leadline's own runner.
    inside = sum(python_frames(s)[0][0] == "compress_all" for s in native)
    assert inside > 0.9 * len(native), collections.Counter(python_frames(s)[0] for s in native)
    # A tick held the thread for its registers and stack, unless it had not run since the
    # last (kept off a CPU by others: its stack is the one read then): END says how often and
    # for how long in all.
    held, stops, ticks = end["native_held_ns"], end["native_stops"], end["ticks"]
    assert isinstance(stops, int) and isinstance(ticks, int) and 0 < stops <= ticks + 2, end
    assert isinstance(held, int) and 0 < held < stops * 2_000_000, end
    # report --json says which functions and frames are C ones.
    data = json.loads(leadline("report", "prog.lead", "--json", cwd=tmp_path, check=True).stdout)
    kinds = {f["name"]: f["native"] for f in data["functions"]}
    assert kinds["zlib_compress"] is True and kinds["compress_all"] is False, kinds
    assert {f["native"] for f in data["frames"] if f["name"] == "zlib_compress"} == {True}


NUMPY = """
import os
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import time
import numpy

def products(a):
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        a @ a

products(numpy.random.default_rng(1).random((300, 300)))
"""


def test_run_native_in_numpys_matrix_product(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    native, end = run_native(tmp_path, NUMPY, "--native")
    line = line_of(textwrap.dedent(NUMPY), "a @ a")
    in_products = [s for s in native if ("products", line) in python_frames(s)]
    assert len(in_products) > 100, len(native)
    numpy_c = 0
    for s in in_products:
        py = next(i for i, f in enumerate(s) if f[0] == "py")
        assert s[py][2:] == ("products", line) or py == 0, s  # C frames: of that line
        numpy_c += any("_multiarray_umath" in f[1] or "blas" in f[1].lower() for f in s[:py])
    # Of the samples whose C stack was read, as in the zlib test: a thread kept off a CPU on a
    # busy machine does not answer its park in time (beside two CPU hogs, 311 of 406 samples
    # had numpy's frames).
    unread = end["native_unread"]
    assert isinstance(unread, int) and unread < 0.5 * len(native), native_counts(native, end)
    assert numpy_c > 0.8 * (len(in_products) - unread), (numpy_c, len(in_products), unread)


RE = """
import re, time
text = ("lorem ipsum dolor sit amet " * 20000) + "needle"

def search_all():
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        re.search(r"(\\w+)\\s+needle", text)

search_all()
"""


def test_run_native_in_a_regular_expression(tmp_path: Path) -> None:
    native, _ = run_native(tmp_path, RE, "--native")
    line = line_of(textwrap.dedent(RE), "re.search(")
    # The regular expression engine's C functions (sre_*), under re.search, under the line.
    in_sre = [s for s in native if any(f[0] == "c" and "sre" in f[2] for f in s)]
    assert len(in_sre) > 0.7 * len(native), collections.Counter(s[0] for s in native)
    for s in in_sre:
        py = python_frames(s)
        assert py[0][0] == "search" and py[1] == ("search_all", line), s


EXTENSION = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static volatile unsigned long spun;

static PyObject *spin_for(PyObject *self, PyObject *arg) {
    unsigned long n = PyLong_AsUnsignedLong(arg);
    for (unsigned long i = 0; i < n; i++) spun++;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"spin_for", spin_for, METH_O, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "spinfor", NULL, -1, methods};
PyMODINIT_FUNC PyInit_spinfor(void) { return PyModule_Create(&module); }
"""

THREADS = """
import sys, threading, time, zlib, os
sys.path.insert(0, ".")
import spinfor

def spin():
    spinfor.spin_for(1_500_000_000)

def sleeper():
    time.sleep(1.0)

data = os.urandom(1 << 15) * 16
def compress():
    for _ in range(120):
        zlib.compress(data, 9)

threads = [threading.Thread(target=f, name=f.__name__) for f in (spin, sleeper)]
for t in threads:
    t.start()
start = time.monotonic()
compress()
for t in threads:
    t.join()
print("slept", threads[1].name, time.monotonic() - start > 1.0)
"""


def test_run_native_samples_every_thread_of_the_program(tmp_path: Path) -> None:
    build_extension(tmp_path, "spinfor", EXTENSION)
    native, end = run_native(tmp_path, THREADS, "--native")
    source = textwrap.dedent(THREADS)
    # The extension's C function under the line that called it, in its own thread.
    spun = [c for c in map(lambda s: caller(s, "spin_for"), native) if c]
    assert len(spun) > 50, collections.Counter(s[0] for s in native)
    assert {c[1].split(".")[0] for c, _ in spun} == {"spinfor"}
    assert {(py[2], py[3]) for _, py in spun} == {("spin", line_of(source, "spinfor.spin_for("))}
    # zlib in the main thread, at the same time.
    zipped = [c for c in map(lambda s: caller(s, "zlib_compress"), native) if c]
    assert len(zipped) > 50 and {py[2] for _, py in zipped} == {"compress"}
    # The sleeping thread: in its sleep's C function in libc, under time.sleep's line; it was
    # held once, not at every sample (its stack is the one read then while it has not run).
    # Its samples in time order: those whose C stack was read have that function innermost
    # all through the sleep, and others only as it starts or wakes (the eval loop running the
    # line itself, or looking up `time.sleep`, before the call, and after it returns: seen
    # beside two CPU hogs and in a two-worker run, a new thread kept off a CPU there).  A
    # thread that does not answer its park in time (waiting for a CPU) is sampled with its
    # Python frames alone, as documented; it sleeps, so that is rare.
    sleep_line = ("sleeper", line_of(source, "time.sleep"))
    slept = [s for s in native if sleep_line in python_frames(s)]
    read = [s for s in slept if any(f[0] == "c" for f in s)]
    asleep = collections.Counter(s[0] for s in read).most_common(1)[0][0]
    assert asleep[0] == "c" and asleep[1].startswith("libc.so"), asleep
    kinds = "".join("s" if s[0] == asleep else "o" for s in read)
    assert re.fullmatch("o*s+o*", kinds), (kinds, [s[:2] for s in read if s[0] != asleep])
    assert len(slept) - len(read) <= len(slept) // 10, (len(slept), len(read))
    stops = end["native_stops"]
    assert isinstance(stops, int) and stops < len(native) - len(slept) / 2, (
        stops,
        len(native),
        len(slept),
    )


def test_run_native_keeps_the_programs_own_behaviour(tmp_path: Path) -> None:
    """A thread held while it sleeps or waits goes back to its wait: the program's sleeps,
    waits and output are as without leadline."""
    prog = """
    import threading, time, queue, select, os
    q = queue.Queue()
    r, w = os.pipe()
    def producer():
        time.sleep(0.6)
        q.put("item")
        os.write(w, b"x")
    threading.Thread(target=producer).start()
    t0 = time.monotonic()
    ready, _, _ = select.select([r], [], [], 5.0)
    item = q.get(timeout=5.0)
    waited = time.monotonic() - t0
    time.sleep(0.3)
    print(item, bool(ready), 0.55 < waited < 2.0)
    """
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(prog))
    out = tmp_path / "b.lead"
    r = leadline("run", "--native", "-r", "500", "-q", "-o", out, script, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "item True True\n", (r.stdout, r.stderr)


def test_run_native_errors_are_one_line(tmp_path: Path) -> None:
    script = tmp_path / "p.py"
    script.write_text("pass\n")
    r = leadline("run", "--native", "--push", "http://127.0.0.1:9", script, cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--push" in r.stderr
