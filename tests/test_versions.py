"""Where the sampler's offsets come from, per Python version, and what it refuses.

3.13+ publish the offsets an out-of-process reader needs in a `_Py_DebugOffsets` table at the
start of `_PyRuntime`; the sampler reads them from the target and takes from its compiled table
(tools/gen_layouts.py) only what is not published.  These tests compare both on a live process
of the running version, damage copies of a real table, and attach to fake targets (tiny C
programs named like a Python) that a real interpreter cannot stand in for: a free-threaded
build and a damaged table."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import leadline, report, run

from leadline import _native

PY = sys.executable
MINOR = sys.version_info[1]
HAS_TABLE = MINOR >= 13
COOKIE = b"xdebugpy"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A live interpreter of the running version, busy in `spin`."""
    code = "import sys\ndef spin():\n    while True: sum(range(100))\nprint(flush=True)\nspin()\n"
    p = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE)
    assert p.stdout is not None
    p.stdout.readline()  # running
    yield p
    p.kill()
    p.wait()


def busy(exe: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    """`exe` running busy.py, calling `hot` for 30 s; returned once it runs."""
    script = tmp_path / "busy.py"
    script.write_text(
        "import time\ndef hot():\n    s = 0\n    for i in range(10**5): s += i\n    return s\n"
        "print(flush=True)\nend = time.time() + 30\nwhile time.time() < end: hot()\n"
    )
    p = subprocess.Popen([exe, str(script)], stdout=subprocess.PIPE)
    assert p.stdout is not None
    p.stdout.readline()
    return p


def read_table(pid: int, runtime: int, size: int = 4096) -> bytes:
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(runtime)
        return mem.read(size)


def test_layout_of_a_live_process_is_the_published_one_and_equals_the_compiled(
    child: subprocess.Popen[bytes],
) -> None:
    info = _native.inspect_process(child.pid)
    assert info["minor"] == MINOR
    assert info["warning"] == ""
    assert info["compiled"] is not None
    if HAS_TABLE:
        assert info["layout_source"] == "published"
        # Every field the table has for this version: 24 on 3.13/3.14, 25 on 3.15.
        assert info["published"] >= 24
    else:
        assert info["layout_source"] == "compiled"
        assert info["published"] == 0
    assert info["offsets"] == info["compiled"]
    # The same in the profiler's own process.
    assert _native.inspect_process(os.getpid())["offsets"] == info["compiled"]


@pytest.mark.skipif(not HAS_TABLE, reason="_Py_DebugOffsets exists from 3.13 on")
def test_a_damaged_table_is_refused_in_one_line() -> None:
    info = _native.inspect_process(os.getpid())
    table = read_table(os.getpid(), info["runtime"])
    assert table[:8] == COOKIE
    ok = _native.layout_from_debug_offsets(table, MINOR)
    assert ok["offsets"] == info["compiled"] and ok["warning"] == ""

    def refused(t: bytes, minor: int = MINOR) -> str:
        with pytest.raises(ValueError) as e:
            _native.layout_from_debug_offsets(t, minor)
        msg = str(e.value)
        assert "\n" not in msg
        return msg

    assert "damaged" in refused(b"xdebugPY" + table[8:])
    # The version the table states (offset 8) is not the interpreter's.
    other = struct.pack("<Q", (3 << 24) | ((MINOR - 1) << 16))
    assert "damaged" in refused(table[:8] + other + table[16:])
    # An offset no struct of the interpreter has (runtime_state.interpreters_head is at 40).
    assert "damaged" in refused(table[:40] + struct.pack("<Q", 1 << 40) + table[48:])
    # free_threaded (offset 16) set: refused, never read with the default build's layout.
    assert "free-threaded" in refused(table[:16] + struct.pack("<Q", 1) + table[24:])
    # Too short to be a table of this version.
    refused(table[:64])


@pytest.mark.skipif(not HAS_TABLE, reason="_Py_DebugOffsets exists from 3.13 on")
def test_an_offset_beyond_its_structs_stated_size_is_refused() -> None:
    info = _native.inspect_process(os.getpid())
    table = bytearray(read_table(os.getpid(), info["runtime"]))
    # runtime_state: size at 24, interpreters_head at 40; the head is past a 16-byte struct.
    table[24:32] = struct.pack("<Q", 16)
    with pytest.raises(ValueError, match=r"damaged.*in a struct of 16"):
        _native.layout_from_debug_offsets(bytes(table), MINOR)


@pytest.mark.skipif(MINOR != 15, reason="the newest table layout leadline knows is 3.15's")
def test_a_newer_minor_is_read_with_its_published_offsets_and_a_warning() -> None:
    info = _native.inspect_process(os.getpid())
    table = bytearray(read_table(os.getpid(), info["runtime"]))
    newer = MINOR + 10
    table[8:16] = struct.pack("<Q", (3 << 24) | (newer << 16) | 0xF0)
    # A field that moved in the newer version: the table says where it is now.
    moved = int.from_bytes(table[40:48], "little") + 8
    table[40:48] = struct.pack("<Q", moved)
    got = _native.layout_from_debug_offsets(bytes(table), newer)
    assert "newer than any leadline knows" in got["warning"]
    assert f"3.{newer}" in got["warning"]
    assert got["offsets"]["runtime_interpreters_head"] == moved
    assert got["offsets"]["code_filename"] == info["compiled"]["code_filename"]


def test_import_under_a_free_threaded_interpreter_is_refused_in_one_line() -> None:
    # A free-threaded build says so in sys.abiflags ("t"); none is installed here, so the
    # running interpreter is made to look like one before leadline is imported.
    code = "import sys; sys.abiflags = 't' + sys.abiflags; import leadline"
    r = run([PY, "-c", code], capture_output=True, text=True)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: leadline does not support free-threaded CPython builds")


def test_attach_reads_a_debug_build(tmp_path: Path) -> None:
    """A debug build (Py_DEBUG) of the running version, where one is installed (Debian's
    python3.X-dbg): from 3.13 on it is read with the offsets it publishes, before refused."""
    exe = shutil.which(f"python3.{MINOR}d")
    if exe is None:
        pytest.skip(f"no debug build python3.{MINOR}d here")
    p = busy(exe, tmp_path)
    try:
        out = tmp_path / "dbg.lead"
        r = leadline("attach", str(p.pid), "--duration", "2", "-o", out, cwd=tmp_path)
        info = _native.inspect_process(p.pid) if HAS_TABLE else None
    finally:
        p.kill()
        p.wait()
    if not HAS_TABLE:
        assert r.returncode == 2 and "debug build" in r.stderr, r.stderr
        return
    assert r.returncode == 0, r.stderr
    assert info is not None and info["layout_source"] == "published"
    hot = [f for f in report(out, tmp_path)["functions"] if f["name"] == "hot"]
    assert hot and hot[0]["total_pct"] > 50


def fake_python(
    tmp_path: Path, name: str, runtime: bytes, version_hex: int, extra: str = ""
) -> Path:
    """A C program named like a Python executable, exporting the three symbols the sampler
    looks for, `_PyRuntime` holding `runtime` (and `extra` C); it waits until killed."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is needed to build the fake target")
    body = ", ".join(str(b) for b in runtime)
    src = tmp_path / "fake.c"
    src.write_text(
        textwrap.dedent(
            f"""\
            #include <stdio.h>
            #include <unistd.h>
            __attribute__((used, aligned(64)))
            unsigned char _PyRuntime[{len(runtime)}] = {{{body}}};
            __attribute__((used)) unsigned char PyCode_Type[256];
            __attribute__((used)) const unsigned long Py_Version = {version_hex:#x}UL;
            {extra}
            int main(void) {{
                puts("ready");
                fflush(stdout);
                for (;;) pause();
            }}
            """
        )
    )
    exe = tmp_path / name
    subprocess.run([gcc, "-O0", "-o", str(exe), str(src)], check=True)
    return exe


def attach_refused(exe: Path, tmp_path: Path) -> str:
    p = subprocess.Popen([str(exe)], stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        assert p.stdout.readline() == b"ready\n"
        r = leadline(
            "attach", str(p.pid), "--duration", "1", "-o", tmp_path / "x.lead", cwd=tmp_path
        )
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert not (tmp_path / "x.lead").exists()
    return lines[0]


def table_for(minor: int, free_threaded: int = 0, cookie: bytes = COOKIE) -> bytes:
    head = cookie + struct.pack("<QQ", (3 << 24) | (minor << 16) | 0xF0, free_threaded)
    return head + bytes(2048 - len(head))


def test_attach_refuses_a_free_threaded_build_by_its_name(tmp_path: Path) -> None:
    exe = fake_python(tmp_path, "python3.14t", table_for(14), 0x030E00F0)
    line = attach_refused(exe, tmp_path)
    assert "free-threaded" in line and "3.14" in line


def test_attach_refuses_a_free_threaded_build_by_its_table(tmp_path: Path) -> None:
    exe = fake_python(tmp_path, "python3.15", table_for(15, free_threaded=1), 0x030F00F0)
    line = attach_refused(exe, tmp_path)
    assert "free-threaded" in line and "Py_GIL_DISABLED" in line


def test_attach_refuses_a_damaged_table(tmp_path: Path) -> None:
    exe = fake_python(tmp_path, "python3.14", table_for(14, cookie=b"notdebug"), 0x030E00F0)
    line = attach_refused(exe, tmp_path)
    assert "damaged" in line and "_Py_DebugOffsets" in line


def test_attach_refuses_a_debug_build_before_3_13(tmp_path: Path) -> None:
    # Only Py_REF_DEBUG builds define _Py_NegativeRefcount; 3.12 publishes no offsets.
    extra = "__attribute__((used)) void _Py_NegativeRefcount(void) {}"
    exe = fake_python(tmp_path, "python3.12", bytes(64), 0x030C00F0, extra)
    line = attach_refused(exe, tmp_path)
    assert "debug build of Python 3.12" in line


def test_attach_refuses_an_old_unsupported_version(tmp_path: Path) -> None:
    exe = fake_python(tmp_path, "python3.9", bytes(64), 0x030900F0)
    line = attach_refused(exe, tmp_path)
    assert "3.9" in line and "does not support" in line


@pytest.mark.skipif(MINOR != 15, reason="needs the newest version leadline knows (3.15)")
def test_attach_samples_a_newer_minor_with_its_published_offsets(tmp_path: Path) -> None:
    """A real 3.15 whose version (Py_Version and the table's) is rewritten in place to 3.16,
    as a 3.16 with the same layout would look: attach warns once and samples it right."""
    p = busy(PY, tmp_path)
    try:
        info = _native.inspect_process(p.pid)
        newer = struct.pack("<Q", (3 << 24) | (16 << 16) | 0xF0)
        version_at = info["runtime"] + 8
        py_version = _py_version_address(p.pid, info["path"])
        try:
            with open(f"/proc/{p.pid}/mem", "r+b", buffering=0) as mem:
                mem.seek(version_at)
                mem.write(newer)
                mem.seek(py_version)
                mem.write(newer[:4])
        except OSError as e:
            pytest.skip(f"cannot write the target's memory here: {e}")
        assert _native.inspect_process(p.pid)["minor"] == 16
        out = tmp_path / "newer.lead"
        r = leadline("attach", str(p.pid), "--duration", "2", "-o", out, cwd=tmp_path)
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "3.16 is newer than any leadline knows" in warnings[0]
    data = report(out, tmp_path)
    hot = [f for f in data["functions"] if f["name"] == "hot"]
    assert hot and hot[0]["total_pct"] > 50


def _py_version_address(pid: int, path: str) -> int:
    """Where Py_Version is in the running process: its symbol value plus the load bias."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm is needed to find Py_Version")
    syms = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True)
    value = next(
        (
            int(line.split()[0], 16)
            for line in syms.stdout.splitlines()
            if line.endswith(" Py_Version")
        ),
        None,
    )
    if value is None:
        pytest.skip(f"no Py_Version in {path}")
    base = None
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == path and int(fields[2], 16) == 0:
                base = int(fields[0].split("-")[0], 16)
                break
    assert base is not None
    with open(path, "rb") as f:
        e_type = struct.unpack("<H", f.read(18)[16:18])[0]
    return value if e_type == 2 else base + value  # ET_EXEC: absolute; else load bias
