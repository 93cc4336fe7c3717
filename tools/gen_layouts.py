#!/usr/bin/env python3
"""Generate src/leadline/_native/layouts.h: where CPython keeps what the sampler reads.

The sampler reads another process's (or its own) interpreter state without the GIL, so it needs
the byte offsets of a few fields of CPython's internal structs for each supported version.  They
are not a public ABI, so this script measures them: it compiles a small C program against each
interpreter's own headers (including Include/internal) and prints offsetof() of every field.

    python tools/gen_layouts.py PYTHON [PYTHON ...] > src/leadline/_native/layouts.h
    python tools/gen_layouts.py --check            # the running Python agrees with layouts.h

The test suite runs --check on every Python in CI.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "src" / "leadline" / "_native" / "layouts.h"

# (field of LLLayout, C expression, first minor version it applies to, last)
FIELDS: list[tuple[str, str, int, int]] = [
    ("runtime_interpreters_head", "offsetof(_PyRuntimeState, interpreters.head)", 10, 13),
    ("interp_next", "offsetof(PyInterpreterState, next)", 10, 13),
    ("interp_threads_head", "offsetof(PyInterpreterState, tstate_head)", 10, 10),
    ("interp_threads_head", "offsetof(PyInterpreterState, threads.head)", 11, 13),
    ("tstate_next", "offsetof(PyThreadState, next)", 10, 13),
    ("tstate_thread_id", "offsetof(PyThreadState, thread_id)", 10, 13),
    ("tstate_native_thread_id", "offsetof(PyThreadState, native_thread_id)", 11, 13),
    ("tstate_frame", "offsetof(PyThreadState, frame)", 10, 10),
    ("tstate_frame", "offsetof(PyThreadState, cframe)", 11, 12),
    ("cframe_current_frame", "offsetof(_PyCFrame, current_frame)", 11, 12),
    ("tstate_frame", "offsetof(PyThreadState, current_frame)", 13, 13),
    ("frame_previous", "offsetof(PyFrameObject, f_back)", 10, 10),
    ("frame_code", "offsetof(PyFrameObject, f_code)", 10, 10),
    ("frame_instr", "offsetof(PyFrameObject, f_lasti)", 10, 10),
    ("frame_size", "sizeof(PyFrameObject)", 10, 10),
    ("frame_refcnt", "offsetof(PyFrameObject, ob_base.ob_base.ob_refcnt)", 10, 10),
    ("frame_state", "offsetof(PyFrameObject, f_state)", 10, 10),
    ("frame_gen", "offsetof(PyFrameObject, f_gen)", 10, 10),
    ("frame_previous", "offsetof(_PyInterpreterFrame, previous)", 11, 13),
    ("frame_code", "offsetof(_PyInterpreterFrame, f_code)", 11, 12),
    ("frame_code", "offsetof(_PyInterpreterFrame, f_executable)", 13, 13),
    ("frame_instr", "offsetof(_PyInterpreterFrame, prev_instr)", 11, 12),
    ("frame_instr", "offsetof(_PyInterpreterFrame, instr_ptr)", 13, 13),
    ("frame_owner", "offsetof(_PyInterpreterFrame, owner)", 11, 13),
    ("frame_size", "offsetof(_PyInterpreterFrame, localsplus)", 11, 13),
    ("code_filename", "offsetof(PyCodeObject, co_filename)", 10, 13),
    ("code_name", "offsetof(PyCodeObject, co_name)", 10, 13),
    ("code_qualname", "offsetof(PyCodeObject, co_qualname)", 11, 13),
    ("code_firstlineno", "offsetof(PyCodeObject, co_firstlineno)", 10, 13),
    ("code_linetable", "offsetof(PyCodeObject, co_linetable)", 10, 13),
    ("code_adaptive", "offsetof(PyCodeObject, co_code_adaptive)", 11, 13),
    ("code_size", "sizeof(PyCodeObject)", 10, 13),
    ("unicode_state", "offsetof(PyASCIIObject, state)", 10, 13),
    ("unicode_length", "offsetof(PyASCIIObject, length)", 10, 13),
    ("unicode_ascii_size", "sizeof(PyASCIIObject)", 10, 13),
    ("unicode_compact_size", "sizeof(PyCompactUnicodeObject)", 10, 13),
    ("bytes_size", "offsetof(PyVarObject, ob_size)", 10, 13),
    ("bytes_sval", "offsetof(PyBytesObject, ob_sval)", 10, 13),
]
NAMES = list(dict.fromkeys(f[0] for f in FIELDS))

PROBE = """\
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_pystate.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#endif
int main(void) {
%s
    return 0;
}
"""


def measure(python: str) -> tuple[int, dict[str, int]]:
    """Compile the probe against `python`'s headers and return (minor, {field: offset})."""
    info = subprocess.run(
        [
            python,
            "-c",
            "import sys, sysconfig; print(sys.version_info[1]); "
            "print(sysconfig.get_paths()['include'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    minor, include = int(info[0]), info[1]
    lines = [
        f'    printf("{name} %zu\\n", (size_t)({expr}));'
        for name, expr, lo, hi in FIELDS
        if lo <= minor <= hi
    ]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        exe = Path(tmp) / "probe"
        src.write_text(PROBE % "\n".join(lines))
        subprocess.run(
            ["gcc", "-w", f"-I{include}", f"-I{include}/internal", str(src), "-o", str(exe)],
            check=True,
        )
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    values = {name: -1 for name in NAMES}
    for line in out.splitlines():
        name, value = line.split()
        values[name] = int(value)
    return minor, values


def render(tables: dict[int, dict[str, int]]) -> str:
    out = [
        "/* Generated by tools/gen_layouts.py from each CPython's own headers: do not edit.",
        " * Byte offsets of the interpreter-state fields the sampler reads; -1: absent. */",
        "#ifndef LEADLINE_LAYOUTS_H",
        "#define LEADLINE_LAYOUTS_H",
        "",
        "typedef struct {",
        "    int minor; /* 3.minor */",
    ]
    out += [f"    int {name};" for name in NAMES]
    out += ["} LLLayout;", "", "static const LLLayout ll_layouts[] = {"]
    for minor in sorted(tables):
        vals = ", ".join(f".{n} = {tables[minor][n]}" for n in NAMES)
        out.append(f"    {{.minor = {minor}, {vals}}},")
    out += ["};", "", "#endif"]
    # Keep lines short for the C formatter's taste.
    wrapped: list[str] = []
    for line in out:
        while len(line) > 100:
            cut = line.rfind(", ", 0, 98) + 1
            wrapped.append(line[:cut])
            line = "     " + line[cut:]
        wrapped.append(line)
    return "\n".join(wrapped) + "\n"


def parse_header() -> dict[int, dict[str, int]]:
    text = " ".join(HEADER.read_text().split())
    tables: dict[int, dict[str, int]] = {}
    for body in re.findall(r"\{\.minor = (.*?)\}", text):
        fields = dict(re.findall(r"\.?(\w+) = (-?\d+)", ".minor = " + body))
        tables[int(fields["minor"])] = {k: int(v) for k, v in fields.items() if k != "minor"}
    return tables


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        minor, values = measure(sys.executable)
        known = parse_header().get(minor)
        if known != values:
            print(f"layouts.h disagrees with this Python 3.{minor}: {known} != {values}")
            return 1
        print(f"layouts.h agrees with Python 3.{minor} ({sysconfig.get_paths()['include']})")
        return 0
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    tables = dict(measure(p) for p in argv)
    sys.stdout.write(render(tables))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
