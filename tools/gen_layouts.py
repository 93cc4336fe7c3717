#!/usr/bin/env python3
"""Generate src/leadline/_native/layouts.h: where CPython keeps what the sampler reads.

The sampler reads another process's (or its own) interpreter state without the GIL, so it needs
the byte offsets of a few fields of CPython's internal structs for each supported version.  They
are not a public ABI, so this script measures them: it compiles a small C program against each
interpreter's own headers (including Include/internal) and prints offsetof() of every field.

    python tools/gen_layouts.py PYTHON [PYTHON ...] > src/leadline/_native/layouts.h
    python tools/gen_layouts.py --update PYTHON    # add or refresh one version in place
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
    ("runtime_interpreters_head", "offsetof(_PyRuntimeState, interpreters.head)", 10, 15),
    ("interp_next", "offsetof(PyInterpreterState, next)", 10, 15),
    ("interp_threads_head", "offsetof(PyInterpreterState, tstate_head)", 10, 10),
    ("interp_threads_head", "offsetof(PyInterpreterState, threads.head)", 11, 15),
    ("tstate_next", "offsetof(PyThreadState, next)", 10, 15),
    ("tstate_thread_id", "offsetof(PyThreadState, thread_id)", 10, 15),
    ("tstate_native_thread_id", "offsetof(PyThreadState, native_thread_id)", 11, 15),
    ("tstate_frame", "offsetof(PyThreadState, frame)", 10, 10),
    ("tstate_frame", "offsetof(PyThreadState, cframe)", 11, 12),
    ("cframe_current_frame", "offsetof(_PyCFrame, current_frame)", 11, 12),
    ("tstate_frame", "offsetof(PyThreadState, current_frame)", 13, 15),
    ("frame_previous", "offsetof(PyFrameObject, f_back)", 10, 10),
    ("frame_code", "offsetof(PyFrameObject, f_code)", 10, 10),
    ("frame_instr", "offsetof(PyFrameObject, f_lasti)", 10, 10),
    ("frame_size", "sizeof(PyFrameObject)", 10, 10),
    ("frame_refcnt", "offsetof(PyFrameObject, ob_base.ob_base.ob_refcnt)", 10, 10),
    ("frame_state", "offsetof(PyFrameObject, f_state)", 10, 10),
    ("frame_gen", "offsetof(PyFrameObject, f_gen)", 10, 10),
    ("frame_previous", "offsetof(_PyInterpreterFrame, previous)", 11, 15),
    ("frame_code", "offsetof(_PyInterpreterFrame, f_code)", 11, 12),
    ("frame_code", "offsetof(_PyInterpreterFrame, f_executable)", 13, 15),
    ("frame_instr", "offsetof(_PyInterpreterFrame, prev_instr)", 11, 12),
    ("frame_instr", "offsetof(_PyInterpreterFrame, instr_ptr)", 13, 15),
    ("frame_owner", "offsetof(_PyInterpreterFrame, owner)", 11, 15),
    # The tracer's profile hook (3.11): a frame object's interpreter frame, read directly
    # rather than through PyFrame_GetCode and PyFrame_GetLasti (two calls an event).
    ("frameobj_iframe", "offsetof(PyFrameObject, f_frame)", 11, 11),
    # --native: 3.11 marks the frame each call of the eval loop began with (3.12+ put an entry
    # frame owned by the C stack under it instead).
    ("frame_is_entry", "offsetof(_PyInterpreterFrame, is_entry)", 11, 11),
    ("frame_size", "offsetof(_PyInterpreterFrame, localsplus)", 11, 15),
    ("code_filename", "offsetof(PyCodeObject, co_filename)", 10, 15),
    ("code_name", "offsetof(PyCodeObject, co_name)", 10, 15),
    ("code_qualname", "offsetof(PyCodeObject, co_qualname)", 11, 15),
    ("code_firstlineno", "offsetof(PyCodeObject, co_firstlineno)", 10, 15),
    ("code_linetable", "offsetof(PyCodeObject, co_linetable)", 10, 15),
    ("code_adaptive", "offsetof(PyCodeObject, co_code_adaptive)", 11, 15),
    ("code_size", "sizeof(PyCodeObject)", 10, 15),
    ("unicode_state", "offsetof(PyASCIIObject, state)", 10, 15),
    ("unicode_length", "offsetof(PyASCIIObject, length)", 10, 15),
    ("unicode_ascii_size", "sizeof(PyASCIIObject)", 10, 15),
    ("unicode_compact_size", "sizeof(PyCompactUnicodeObject)", 10, 15),
    ("bytes_size", "offsetof(PyVarObject, ob_size)", 10, 15),
    ("bytes_sval", "offsetof(PyBytesObject, ob_sval)", 10, 15),
    # The GIL: in the runtime up to 3.11, behind the interpreter's pointer from 3.12 on; who
    # took it last, whether it is held, and the condition variable its waiters sleep on.
    ("runtime_gil", "offsetof(_PyRuntimeState, ceval.gil)", 10, 11),
    ("interp_gil", "offsetof(PyInterpreterState, ceval.gil)", 12, 15),
    ("gil_locked", "offsetof(struct _gil_runtime_state, locked)", 10, 15),
    ("gil_holder", "offsetof(struct _gil_runtime_state, last_holder)", 10, 15),
    ("gil_cond", "offsetof(struct _gil_runtime_state, cond)", 10, 15),
    ("gil_cond_size", "sizeof(PyCOND_T)", 10, 15),
    # A garbage collection is running (set for the whole collection, callbacks included).
    ("interp_gc_collecting", "offsetof(PyInterpreterState, gc.collecting)", 10, 15),
    # An exception being raised (set from the raise until a handler takes it), and the stack of
    # those being handled (the top item: the thread's own, or a running generator's).
    ("tstate_curexc", "offsetof(PyThreadState, curexc_type)", 10, 11),
    ("tstate_curexc", "offsetof(PyThreadState, current_exception)", 12, 15),
    ("tstate_exc_info", "offsetof(PyThreadState, exc_info)", 10, 15),
    ("stackitem_exc_value", "offsetof(_PyErr_StackItem, exc_value)", 10, 15),
    ("stackitem_previous", "offsetof(_PyErr_StackItem, previous_item)", 10, 15),
    # asyncio: the frame a coroutine (or generator) object holds, and the running task, which
    # 3.14+ keep in the thread state; before, the _asyncio module's dict of running tasks, found
    # through sys.modules and the module's dict, read as CPython lays out a dict.
    ("gen_iframe", "offsetof(PyGenObject, gi_iframe)", 11, 15),
    ("tstate_asyncio_task", "offsetof(_PyThreadStateImpl, asyncio_running_task)", 14, 15),
    # --async all (3.14+): each thread's list of its tasks (linked through the task's node), and
    # what a suspended coroutine awaits: the top of its frame's stack when its state says it
    # is in an await (yield from).
    ("tstate_asyncio_tasks", "offsetof(_PyThreadStateImpl, asyncio_tasks_head)", 14, 15),
    ("frame_stackpointer", "offsetof(_PyInterpreterFrame, stackpointer)", 14, 15),
    ("gen_frame_state", "offsetof(PyGenObject, gi_frame_state)", 14, 15),
    # The states that mean "in an await", as a mask of bits (state + 8): 3.14 has one (-1),
    # 3.15 two (2, and 3 while another thread looks at it).
    ("gen_yield_from_states", "1 << (FRAME_SUSPENDED_YIELD_FROM + 8)", 14, 14),
    (
        "gen_yield_from_states",
        "(1 << (FRAME_SUSPENDED_YIELD_FROM + 8)) | (1 << (FRAME_SUSPENDED_YIELD_FROM_LOCKED + 8))",
        15,
        15,
    ),
    # 3.10 keeps the module object and the dict's keys in no header (Objects/moduleobject.c,
    # Objects/dict-common.h): their fields as those files declare them, the keys' index width
    # following from dk_size, every entry general (hash, key, value).
    ("interp_modules", "offsetof(PyInterpreterState, modules)", 10, 11),
    ("interp_modules", "offsetof(PyInterpreterState, imports.modules)", 12, 15),
    ("module_dict", "sizeof(PyObject)", 10, 10),
    ("module_dict", "offsetof(PyModuleObject, md_dict)", 11, 15),
    ("dict_keys", "offsetof(PyDictObject, ma_keys)", 10, 15),
    ("dict_values", "offsetof(PyDictObject, ma_values)", 10, 15),
    ("dictkeys_size", "sizeof(Py_ssize_t)", 10, 10),
    ("dictkeys_log2_index_bytes", "offsetof(PyDictKeysObject, dk_log2_index_bytes)", 11, 15),
    ("dictkeys_kind", "offsetof(PyDictKeysObject, dk_kind)", 11, 15),
    ("dictkeys_nentries", "4 * sizeof(Py_ssize_t)", 10, 10),
    ("dictkeys_nentries", "offsetof(PyDictKeysObject, dk_nentries)", 11, 15),
    ("dictkeys_indices", "5 * sizeof(Py_ssize_t)", 10, 10),
    ("dictkeys_indices", "offsetof(PyDictKeysObject, dk_indices)", 11, 15),
    ("dict_entry_size", "3 * sizeof(PyObject *)", 10, 10),
    ("dict_entry_size", "sizeof(PyDictKeyEntry)", 11, 15),
    ("dict_unicode_entry_size", "sizeof(PyDictUnicodeEntry)", 11, 15),
    # An instance's attributes (the names threads were given: threading._active's Thread
    # objects' _name): 3.10 a dict at tp_dictoffset; 3.11 values (keys: the type's cached
    # keys) or a dict before the object; 3.12 one word there, values when tagged; 3.13+ values
    # inline after the object (at tp_basicsize) while valid, else the dict before it.
    ("type_dictoffset", "offsetof(PyTypeObject, tp_dictoffset)", 10, 10),
    ("heaptype_cached_keys", "offsetof(PyHeapTypeObject, ht_cached_keys)", 10, 15),
    ("tpflags_managed_dict", "Py_TPFLAGS_MANAGED_DICT", 11, 15),
    ("managed_values", "-4 * (int)sizeof(PyObject *)", 11, 11),  # _PyObject_ValuesPointer
    ("managed_dict", "MANAGED_DICT_OFFSET", 11, 11),
    ("managed_dict", "-3 * (int)sizeof(PyObject *)", 12, 12),  # _PyObject_DictOrValuesPointer
    ("managed_dict", "MANAGED_DICT_OFFSET", 13, 15),
    ("managed_values_tag", "1", 12, 12),  # _PyDictOrValues_IsValues, _GetValues: word + 1
    ("tpflags_inline_values", "Py_TPFLAGS_INLINE_VALUES", 13, 15),
    ("type_basicsize", "offsetof(PyTypeObject, tp_basicsize)", 13, 15),  # _PyObject_InlineValues
    ("dictvalues_valid", "offsetof(PyDictValues, valid)", 13, 15),
    ("dictvalues_values", "0", 10, 10),  # ma_values: the array itself
    ("dictvalues_values", "offsetof(PyDictValues, values)", 11, 15),
    # A task's name may be an int (3.13+ number unnamed tasks lazily): its type's flags say
    # which, and its digits are read as CPython stores them.
    ("type_flags", "offsetof(PyTypeObject, tp_flags)", 10, 15),
    ("long_size", "offsetof(PyVarObject, ob_size)", 10, 11),
    ("long_size", "offsetof(PyLongObject, long_value.lv_tag)", 12, 15),
    ("long_digits", "offsetof(PyLongObject, ob_digit)", 10, 11),
    ("long_digits", "offsetof(PyLongObject, long_value.ob_digit)", 12, 15),
    # dump --locals: a frame's local variables (3.10: the code's plain locals, co_varnames;
    # 3.11+: every fast local, cells and free variables with their kinds), 3.14+ as tagged
    # stack references, and the few objects whose values are shown rather than named.
    ("frame_localsplus", "offsetof(PyFrameObject, f_localsplus)", 10, 10),
    ("frame_localsplus", "offsetof(_PyInterpreterFrame, localsplus)", 11, 15),
    ("code_localsplusnames", "offsetof(PyCodeObject, co_varnames)", 10, 10),
    ("code_localsplusnames", "offsetof(PyCodeObject, co_localsplusnames)", 11, 15),
    ("code_localspluskinds", "offsetof(PyCodeObject, co_localspluskinds)", 11, 15),
    ("code_cellvars", "offsetof(PyCodeObject, co_cellvars)", 10, 10),
    ("code_freevars", "offsetof(PyCodeObject, co_freevars)", 10, 10),
    ("code_nlocalsplus", "offsetof(PyCodeObject, co_nlocals)", 10, 10),
    ("code_nlocalsplus", "offsetof(PyCodeObject, co_nlocalsplus)", 11, 15),
    ("stackref_tag_bits", "Py_TAG_BITS", 14, 15),
    ("type_name", "offsetof(PyTypeObject, tp_name)", 10, 15),
    ("tuple_items", "offsetof(PyTupleObject, ob_item)", 10, 15),
    ("float_value", "offsetof(PyFloatObject, ob_fval)", 10, 15),
    ("cell_ref", "offsetof(PyCellObject, ob_ref)", 10, 15),
    ("dict_used", "offsetof(PyDictObject, ma_used)", 10, 15),
]
# Fields of objects whose structs are in no header (the C Task of _asyncio): measured by
# running the interpreter, which finds a task's own name and coroutine objects in its bytes.
OBJECT_PROBE = """\
import asyncio, ctypes, struct, sys
async def probe(): pass
loop = asyncio.new_event_loop()
coro, name = probe(), "probe-" + str(id(loop))
task = loop.create_task(coro, name=name)
raw = ctypes.string_at(id(task), type(task).__basicsize__)
words = [struct.unpack_from("<Q", raw, i)[0] for i in range(0, len(raw) - 7, 8)]
for field, obj in (("task_name", name), ("task_coro", coro)):
    at = [8 * i for i, w in enumerate(words) if w == id(obj)]
    print(field, at[0] if len(at) == 1 else -1)
if sys.version_info >= (3, 14):
    # The node that links a task into its thread's list: a second task's node follows the
    # first's, so the first's node points into the second at the node's own offset.
    second = loop.create_task(probe(), name=name + "-2")
    size = type(task).__basicsize__
    raw = ctypes.string_at(id(task), size)
    words = [struct.unpack_from("<Q", raw, i)[0] for i in range(0, len(raw) - 7, 8)]
    at = [8 * i for i, w in enumerate(words) if w - id(second) == 8 * i]
    print("task_node", at[0] if len(at) == 1 else -1)
    tasks = [task, second]
else:
    tasks = [task]
for t in tasks:
    t.cancel()
loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
loop.close()
"""
OBJECT_FIELDS: list[tuple[str, int, int]] = [
    ("task_name", 11, 15),
    ("task_coro", 11, 15),
    ("task_node", 14, 15),
]
NAMES = list(dict.fromkeys([f[0] for f in FIELDS] + [f[0] for f in OBJECT_FIELDS]))

# Where 3.13+ publish the same offsets in the interpreter's own _Py_DebugOffsets table (the
# first member of _PyRuntime, cookie "xdebugpy"): field of LLLayout -> member of the table.
# The sampler reads the table in the target and takes every offset it publishes from there;
# what is not published (or a constant) comes from the compiled table above.
DEBUG_SLOTS: list[tuple[str, str, int, int]] = [
    ("runtime_interpreters_head", "runtime_state.interpreters_head", 13, 15),
    ("interp_next", "interpreter_state.next", 13, 15),
    ("interp_threads_head", "interpreter_state.threads_head", 13, 15),
    ("tstate_next", "thread_state.next", 13, 15),
    ("tstate_thread_id", "thread_state.thread_id", 13, 15),
    ("tstate_native_thread_id", "thread_state.native_thread_id", 13, 15),
    ("tstate_frame", "thread_state.current_frame", 13, 15),
    ("frame_previous", "interpreter_frame.previous", 13, 15),
    ("frame_code", "interpreter_frame.executable", 13, 15),
    ("frame_instr", "interpreter_frame.instr_ptr", 13, 15),
    ("frame_owner", "interpreter_frame.owner", 13, 15),
    ("frame_size", "interpreter_frame.localsplus", 13, 15),
    ("code_filename", "code_object.filename", 13, 15),
    ("code_name", "code_object.name", 13, 15),
    ("code_qualname", "code_object.qualname", 13, 15),
    ("code_firstlineno", "code_object.firstlineno", 13, 15),
    ("code_linetable", "code_object.linetable", 13, 15),
    ("code_adaptive", "code_object.co_code_adaptive", 13, 15),
    ("code_size", "code_object.size", 13, 15),
    ("unicode_state", "unicode_object.state", 13, 15),
    ("unicode_length", "unicode_object.length", 13, 15),
    ("unicode_ascii_size", "unicode_object.asciiobject_size", 13, 15),
    ("unicode_compact_size", "unicode_object.compactunicodeobject_size", 15, 15),
    ("bytes_size", "bytes_object.ob_size", 13, 15),
    ("bytes_sval", "bytes_object.ob_sval", 13, 15),
]
# The table's own header: its size, and where the version and the free-threading flag are.
# Each section of the table also states the size of its struct, which bounds its offsets.
DEBUG_HEADER: list[tuple[str, str]] = [
    ("table_size", "sizeof(_Py_DebugOffsets)"),
    ("version", "offsetof(_Py_DebugOffsets, version)"),
    ("free_threaded", "offsetof(_Py_DebugOffsets, free_threaded)"),
]
FIRST_DEBUG_MINOR = 13

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
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_dict.h"
#include "internal/pycore_moduleobject.h"
#include "internal/pycore_object.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_genobject.h"
#include "internal/pycore_tstate.h"
#endif
#if PY_VERSION_HEX >= 0x030E0000
#include "internal/pycore_debug_offsets.h"
#include "internal/pycore_interpframe_structs.h"
#include "internal/pycore_stackref.h"
#endif
int main(void) {
%s
    return 0;
}
"""


Tables = tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]


def measure(python: str) -> tuple[int, dict[str, int], dict[str, int] | None]:
    """Compile the probe against `python`'s headers: (minor, {field: offset}, and from 3.13 on
    {field: where the debug-offsets table publishes it, and the table's header})."""
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
        f'    printf("{name} %lld\\n", (long long)({expr}));'
        for name, expr, lo, hi in FIELDS
        if lo <= minor <= hi
    ]
    if minor >= FIRST_DEBUG_MINOR:
        lines += [
            f'    printf("dbg.{name} %zu\\n", (size_t)({expr}));' for name, expr in DEBUG_HEADER
        ]
        lines += [
            f'    printf("dbg.{name} %zu\\n", offsetof(_Py_DebugOffsets, {member}));'
            for name, member, lo, hi in DEBUG_SLOTS
            if lo <= minor <= hi
        ]
        lines += [
            f'    printf("bound.{name} %zu\\n", offsetof(_Py_DebugOffsets, '
            f"{member.split('.')[0]}.size));"
            for name, member, lo, hi in DEBUG_SLOTS
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
    if any(lo <= minor <= hi for _, lo, hi in OBJECT_FIELDS):
        out += subprocess.run(
            [python, "-c", OBJECT_PROBE], capture_output=True, text=True, check=True
        ).stdout
    values = {name: -1 for name in NAMES}
    dbg: dict[str, int] | None = None
    if minor >= FIRST_DEBUG_MINOR:
        dbg = {name: -1 for name in [h[0] for h in DEBUG_HEADER] + NAMES}
        dbg.update({f"bound.{name}": -1 for name in NAMES})
    for line in out.splitlines():
        name, value = line.split()
        if name.startswith("bound.") and dbg is not None:
            dbg[name] = int(value)
        elif name.startswith("dbg.") and dbg is not None:
            dbg[name[4:]] = int(value)
        else:
            values[name] = int(value)
    return minor, values, dbg


def render(tables: Tables) -> str:
    layouts, debug = tables
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
    out += ["} LLLayout;", "", "/* The fields' names, in order (minor first). */"]
    out += ["static const char *const ll_layout_names[] = {"]
    out += [f'    "{name}",' for name in ["minor", *NAMES]]
    out += ["};", "", "static const LLLayout ll_layouts[] = {"]
    for minor in sorted(layouts):
        # A field added since a version was last measured reads -1 until it is measured again.
        vals = ", ".join(f".{n} = {layouts[minor].get(n, -1)}" for n in NAMES)
        out.append(f"    {{.minor = {minor}, {vals}}},")
    out += [
        "};",
        "",
        "/* Where each version's _Py_DebugOffsets table (3.13+) publishes those offsets: byte",
        " * offsets into the table, -1: not published there (the compiled value is used). */",
        "typedef struct {",
        "    int minor;",
    ]
    out += [f"    int {name};" for name, _ in DEBUG_HEADER]
    out += [
        "    LLLayout at;",
        "    LLLayout bound; /* where the table states the size of the field's struct */",
        "} LLDebugSlots;",
        "",
        "static const LLDebugSlots ll_debug_slots[] = {",
    ]
    for minor in sorted(debug):
        head = ", ".join(f".{n} = {debug[minor][n]}" for n, _ in DEBUG_HEADER)
        vals = ", ".join(f".{n} = {debug[minor].get(n, -1)}" for n in NAMES)
        bounds = ", ".join(f".{n} = {debug[minor].get('bound.' + n, -1)}" for n in NAMES)
        out.append(
            f"    {{.minor = {minor}, {head}, .at = {{.minor = {minor}, {vals}}}, "
            f".bound = {{.minor = {minor}, {bounds}}}}},"
        )
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


def parse_header() -> Tables:
    text = " ".join(HEADER.read_text().split())
    layouts_part, _, debug_part = text.partition("ll_debug_slots[]")
    layouts: dict[int, dict[str, int]] = {}
    for body in re.findall(r"\{\.minor = (.*?)\}", layouts_part):
        fields = dict(re.findall(r"\.?(\w+) = (-?\d+)", ".minor = " + body))
        layouts[int(fields["minor"])] = {k: int(v) for k, v in fields.items() if k != "minor"}
    debug: dict[int, dict[str, int]] = {}
    for minor, head, at, bound in re.findall(
        r"\{\.minor = (\d+), (.*?), \.at = \{(.*?)\}, \.bound = \{(.*?)\}\}", debug_part
    ):
        fields = {k: int(v) for k, v in re.findall(r"\.?(\w+) = (-?\d+)", head + ", " + at)}
        fields.update({f"bound.{k}": int(v) for k, v in re.findall(r"\.?(\w+) = (-?\d+)", bound)})
        fields.pop("minor", None)
        fields.pop("bound.minor", None)
        debug[int(minor)] = fields
    return layouts, debug


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        minor, values, dbg = measure(sys.executable)
        layouts, debug = parse_header()
        if layouts.get(minor) != values:
            print(
                f"layouts.h disagrees with this Python 3.{minor}: {layouts.get(minor)} != {values}"
            )
            return 1
        if debug.get(minor) != dbg:
            print(
                f"layouts.h's debug slots disagree with Python 3.{minor}: "
                f"{debug.get(minor)} != {dbg}"
            )
            return 1
        print(f"layouts.h agrees with Python 3.{minor} ({sysconfig.get_paths()['include']})")
        return 0
    update = argv[:1] == ["--update"]
    pythons = argv[1:] if update else argv
    if not pythons:
        print(__doc__, file=sys.stderr)
        return 2
    layouts, debug = parse_header() if update else ({}, {})
    for python in pythons:
        minor, values, dbg = measure(python)
        layouts[minor] = values
        if dbg is not None:
            debug[minor] = dbg
    text = render((layouts, debug))
    if update:
        HEADER.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
