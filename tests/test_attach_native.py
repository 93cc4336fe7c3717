"""`attach --native`: each sample's C frames (the interpreter's, extensions', libraries'), the
Python frames in place of the eval loop's, sampled as the program runs (issue 16, native
frames): in a C library through an extension (zlib), in numpy's matrix product, and in an
extension imported after sampling began."""

from __future__ import annotations

import collections
import textwrap
from pathlib import Path

import pytest
from htmlpage import rendered, report_in_chromium
from support import leadline, pprof_strings
from test_dump import COMPRESSING, build_spinmod, line_of, target

from leadline.capture.reader import Capture

Frame = tuple[str, str, str, int]  # kind, file, name, line
EVAL = "_PyEval_EvalFrameDefault"


def sampled(path: Path) -> tuple[list[tuple[Frame, ...]], dict[str, object]]:
    """Each sample's stack, innermost first, and END."""
    out = []
    with Capture(path) as cap:
        for _, _, _, stack, _, _ in cap.samples():
            frames = []
            while stack:
                stack, fid, offset = cap.stacks[stack]
                f = cap.functions[fid]
                frames.append((f.kind, f.file, f.name, f.line_at(offset)))
            out.append(tuple(frames))
        end = dict(cap.end or {})
    return out, end


def attach(pid: int, tmp_path: Path, name: str, *more: str, seconds: float = 1.5) -> Path:
    out = tmp_path / name
    leadline(
        "attach",
        str(pid),
        "-d",
        str(seconds),
        "-r",
        "200",
        "-q",
        "-o",
        out,
        *more,
        cwd=tmp_path,
        check=True,
    )
    return out


def caller(stack: tuple[Frame, ...], c_function: str) -> tuple[Frame, Frame] | None:
    """The C frame `c_function` and the first Python frame outward of it, if the stack has it."""
    at = next((i for i, f in enumerate(stack) if f[0] == "c" and f[2] == c_function), None)
    if at is None:
        return None
    py = next((f for f in stack[at + 1 :] if f[0] == "py"), None)
    return None if py is None else (stack[at], py)


def test_attach_native_samples_c_frames_under_the_line_that_called_them(tmp_path: Path) -> None:
    with target(tmp_path, COMPRESSING, settle=0.3) as proc:
        plain, _ = sampled(attach(proc.pid, tmp_path, "plain.lead"))
        native, end = sampled(attach(proc.pid, tmp_path, "native.lead", "--native"))
    line = line_of(COMPRESSING, "zlib.compress(data, 9)")
    # Without --native: Python frames only, as before.
    assert len(plain) > 100 and all(f[0] == "py" for s in plain for f in s), plain[:3]
    assert all(s[0][2:] == ("compress_forever", line) for s in plain), collections.Counter(
        s[0] for s in plain
    )
    # With it: zlib_compress (in the zlib extension, or in the interpreter, which builds it in
    # on Debian's 3.14+) under that line in nearly every sample (others: the loop freeing the
    # result, seen in libc's free), libz's code inside it in most (the rest: copying the input
    # in and the output out), and never the eval loop itself.
    assert len(native) > 100, len(native)
    found = [caller(s, "zlib_compress") for s in native]
    assert sum(map(bool, found)) > 0.8 * len(native), collections.Counter(s[0] for s in native)
    assert {(py[2], py[3]) for _, py in filter(None, found)} == {("compress_forever", line)}
    in_libz = sum(any(f[0] == "c" and f[1].startswith("libz.so") for f in s) for s in native)
    assert in_libz > 0.5 * len(native), (in_libz, len(native))
    assert not any(f[2] == EVAL for s in native for f in s)
    # libz's static functions have no symbol (its symbol table is stripped): sampling names
    # them by their file, one function a file, not one an instruction (dump's snapshot gives
    # the offset).
    names = {(f[1].split(".so")[0], f[2]) for s in native for f in s if f[0] == "c"}
    assert ("libz", "[unknown]") in names and not any(n.startswith("0x") for _, n in names), names
    # The Python frames of each sample are the plain walk's, in order.
    assert {tuple(f[2] for f in s if f[0] == "py") for s in native} == {
        ("compress_forever", "<module>")
    }
    # It runs all the time: stopped at each sample while its C stack was read (END: how many
    # times, and for how long in all), but for one found waiting for a CPU that it has not had
    # since it was let go, whose stack is the one read then (a busy machine: 260 stops for 295
    # samples once beside a two-worker suite).
    held, stops = end["native_held_ns"], end["native_stops"]
    assert isinstance(held, int) and 0 < held < 1.5e9, end
    assert isinstance(stops, int) and 0.5 * len(native) <= stops <= len(native) + 2, end


NUMPY = """
import os
os.environ["OPENBLAS_NUM_THREADS"] = "1"  # the product in this thread, not BLAS's own
import numpy

def products(a):
    while True:
        a @ a

print("ready", flush=True)
products(numpy.random.default_rng(1).random((300, 300)))
"""


def test_attach_native_in_numpys_matrix_product(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    with target(tmp_path, NUMPY, settle=0.3) as proc:
        native, _ = sampled(attach(proc.pid, tmp_path, "numpy.lead", "--native"))
    line = line_of(NUMPY, "a @ a")
    assert len(native) > 100, len(native)
    # Innermost: numpy's own C code or the BLAS library it ships, then up to the line; or,
    # rarely, the loop's own bytecode (no C frame above it: the eval loop itself, at either
    # line).  Its Python and C frames are read from the thread stopped at one moment: a
    # thread found without the GIL once ran on to the next product before its stop.
    inner = []
    for s in native:
        py = next(i for i, f in enumerate(s) if f[0] == "py")
        assert s[py][2] == "products" and (py == 0 or s[py][3] == line), s
        inner.append(s[:py])
    numpy_c = sum(
        any("_multiarray_umath" in f[1] or "blas" in f[1].lower() for f in c) for c in inner
    )
    assert numpy_c > 0.8 * len(native), (numpy_c, collections.Counter(c[0] for c in inner))


LATE = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, ".")
    print("ready", flush=True)
    time.sleep(0.8)
    import spinmod  # mapped after sampling began

    def spin():
        spinmod.spin_in_c()

    spin()
    """
)


def test_attach_native_names_a_module_loaded_while_sampling(tmp_path: Path) -> None:
    build_spinmod(tmp_path)
    with target(tmp_path, LATE) as proc:
        native, _ = sampled(attach(proc.pid, tmp_path, "late.lead", "--native", seconds=2.5))
    found = [f for f in map(lambda s: caller(s, "spin_in_c"), native) if f]
    # Its last 1.7 s or so (sampled at 200 Hz), named from the extension's symbols.
    assert len(found) > 100, collections.Counter(s[0] for s in native)
    assert {c[1].split(".")[0] for c, _ in found} == {"spinmod"}, found[:3]
    assert {(py[2], py[3]) for _, py in found} == {("spin", line_of(LATE, "spinmod.spin_in_c()"))}


def test_attach_native_errors_are_one_line(tmp_path: Path) -> None:
    r = leadline("attach", "1" * 7, "--native", "-d", "1", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


SLEEPER = """
import time
print("ready", flush=True)
time.sleep(600)
"""


def test_attach_native_stops_a_sleeping_thread_once(tmp_path: Path) -> None:
    """A thread that has not run since its C stack was read has that stack still: it is not
    stopped again (a stop ends the system call it sleeps in, which the kernel restarts)."""
    with target(tmp_path, SLEEPER, settle=0.2) as proc:
        native, end = sampled(attach(proc.pid, tmp_path, "sleep.lead", "--native"))
    line = line_of(SLEEPER, "time.sleep(600)")
    assert len(native) > 100, len(native)
    for s in native:
        py = next(i for i, f in enumerate(s) if f[0] == "py")
        # Asleep in libc (clock_nanosleep; 3.10: select) under time.sleep's line.
        assert s[py][2:] == ("<module>", line) and s[0][1].startswith("libc.so"), s
    assert len(set(native)) == 1, collections.Counter(native).most_common(3)
    assert end["native_stops"] == 1, end


def test_reports_and_exports_carry_c_frames(chromium: str, tmp_path: Path) -> None:
    """pprof, speedscope and collapsed stacks carry --native's C functions (named, their module
    as their file), and the HTML report draws them marked as such (class ll-native-frame, in
    greens; the tooltip says "C function in" its module), Python frames as before."""
    with target(tmp_path, COMPRESSING, settle=0.3) as proc:
        cap = attach(proc.pid, tmp_path, "n.lead", "--native", seconds=1.0)
    for fmt in ("pprof", "speedscope", "collapsed"):
        out = tmp_path / f"n.{fmt}"
        leadline("export", cap, "--format", fmt, "-o", out, cwd=tmp_path, check=True)
        data = out.read_bytes()
        text = " ".join(pprof_strings(data)) if fmt == "pprof" else data.decode()
        assert "zlib_compress" in text and "compress_forever" in text, (fmt, text[:300])
        assert "libz.so" in text, (fmt, text[:300])
    result, _, state = report_in_chromium(
        cap,
        tmp_path,
        [
            "[...document.querySelectorAll('#ll-flame .ll-native-frame')]"
            ".map(function (e) { return e.textContent; })",
            "[...document.querySelectorAll('#ll-flame .ll-frame:not(.ll-native-frame)')]"
            ".map(function (e) { return e.textContent; })",
        ],
    )
    native, others = result.results
    assert any(t.startswith("zlib_compress") for t in native), native
    assert any(t.startswith("deflate") for t in native), native
    assert not any(t.startswith(("compress_forever", "<module>")) for t in native), native
    assert any(t.startswith("compress_forever") for t in others), others
    assert "zlib_compress" in " ".join(rendered(state))
