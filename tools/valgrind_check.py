"""Runs tools/valgrind_workload.py under valgrind's memcheck and fails on any error (invalid
access or free, use of uninitialised memory, a bad system call argument...) or definite leak
whose stack passes through leadline's native code, src/leadline/_native.  CPython's own reports
(buffers filled by getrandom, which valgrind does not model; exit-time leaks; the interned
strings of module init) are not ours and are not counted.

"Ours" is every source file of that directory, listed when the check runs: a new C file is
covered without editing this script.  The check also fails if the code of some C file never ran
under valgrind: besides its log, valgrind writes the stack of every allocation made during the
run (--xtree-memory=full), and each C file must be on one of them.  Together with the workload's
own assertions (each part checks that its mechanism recorded, sampled or counted something),
that is the evidence that every file was exercised; the check prints both."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NATIVE = HERE.parent / "src" / "leadline" / "_native"
C_FILES = sorted(p.name for p in NATIVE.glob("*.c"))
SOURCES = sorted(p.name for p in NATIVE.iterdir() if p.suffix in (".c", ".h"))
# A stack frame in leadline's native code: one of its sources with debug info (the extension is
# built with -g, see setup.py), else its shared object.
OUR_FRAME = re.compile(
    r"\((" + "|".join(re.escape(s) for s in SOURCES) + r"):\d+\)|_native\.cpython"
)
# A file named in an --xtree-memory file (callgrind format): fl=, fi=, fe=, cfi= or cfl= lines.
XTREE_FILE = re.compile(r"^c?f[lie]=\(\d+\) (.+)$", re.M)
# An uninitialised value made by CPython's int allocator: an int equal to 0 (int.from_bytes,
# int(str), json numbers) has a digit that is never written, and CPython reads it as
# size x digit, which is 0 but which memcheck cannot tell from its operands; every value
# computed from such an int, in leadline's code too, is then reported as uninitialised.
CPYTHON_ZERO_INT = re.compile(
    r"Uninitialised value was created by a heap allocation\n"
    # the allocators (malloc, leadline's hook of the tracer's memory mode, CPython's own)...
    r"(?:==\d+==\s+(?:at|by) 0x\w+: \w*(?:alloc|Alloc)\w* \([^)]*\)\n)*"
    # ...called by CPython's int allocation
    r"==\d+==\s+by 0x\w+: _PyLong_New \("
)
LEAK = re.compile(r"are (definitely|indirectly|possibly) lost|are still reachable")


def summed_up(block: str) -> str:
    """A report in a line: what it is, and the first of leadline's frames on its stack."""
    lines = [ln.split("== ", 1)[-1].strip() for ln in block.strip().splitlines()]
    ours = [ln for ln in lines if OUR_FRAME.search(ln)]
    return f"{lines[0]}; first of ours: {ours[0] if ours else '?'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIR", help="keep valgrind's logs and xtree files")
    args = parser.parse_args()
    if not C_FILES:
        print(f"valgrind check: no C files in {NATIVE}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--leak-check=full",
            "--show-leak-kinds=definite,reachable",
            "--num-callers=40",
            # Where each uninitialised value was made, to tell CPython's own from ours (below).
            "--track-origins=yes",
            # One log per process: fork() children of the workload are checked too (they run
            # the atfork handlers of tracer.c and sampler.c).
            f"--log-file={tmp}/valgrind.%p.log",
            "--xtree-memory=full",
            f"--xtree-memory-file={tmp}/xtree.%p.kcg",
            sys.executable,
            str(HERE / "valgrind_workload.py"),
            str(Path(tmp) / "out"),
        ]
        env = {**os.environ, "PYTHONMALLOC": "malloc"}
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
        logs = {p.name: p.read_text(errors="replace") for p in sorted(Path(tmp).glob("*.log"))}
        allocated = dict.fromkeys(C_FILES, 0)  # processes in which each file's code allocated
        for p in Path(tmp).glob("xtree.*.kcg"):
            paths = {Path(m) for m in XTREE_FILE.findall(p.read_text(errors="replace"))}
            for c in {f.name for f in paths if f.parent.name == NATIVE.name} & set(C_FILES):
                allocated[c] += 1
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            for p in Path(tmp).glob("*.*"):
                shutil.copy(p, args.keep)
    last = run.stdout.strip().splitlines()[-1:] or [""]
    if run.returncode != 0 or not last[0].startswith("ok "):
        main_log = next(iter(logs.values()), "")
        print(run.stdout, run.stderr, main_log[-6000:], sep="\n")
        print("valgrind check: the workload failed")
        return 1
    ran = json.loads(last[0][3:])
    problems = []
    seen_ours = 0
    cpython_ints: list[str] = []
    for text in logs.values():
        for block in re.split(r"\n==\d+== \n", text):
            ours = [ln for ln in block.splitlines() if OUR_FRAME.search(ln)]
            if not ours:
                continue  # CPython's own reports (getrandom-filled buffers, exit-time leaks)
            seen_ours += 1
            if CPYTHON_ZERO_INT.search(block):
                cpython_ints.append(block)
            elif not LEAK.search(block):
                problems.append(block)  # an error, not a leak record
            elif "definitely lost" in block and any("PyInit__native" not in ln for ln in ours):
                problems.append(block)
    for p in problems:
        print(p.strip(), end="\n\n")
    print(f"valgrind check: the workload ran: {json.dumps(ran)}")
    print(
        f"valgrind check: {len(logs)} process(es) checked; C files exercised (on the stack of "
        "an allocation in N processes): " + ", ".join(f"{c} ({n})" for c, n in allocated.items())
    )
    unseen = [c for c, n in allocated.items() if not n]
    if unseen:
        print(
            f"valgrind check: {', '.join(unseen)} never ran under valgrind (on no allocation's "
            "stack): tools/valgrind_workload.py does not exercise it, or the extension lacks "
            "debug info"
        )
        return 1
    if not seen_ours:
        # The workload leaves a native block reachable on purpose; not seeing it means this
        # filter no longer recognises leadline's frames and would let real errors through.
        print("valgrind check: no report names leadline's native code at all; the filter is broken")
        return 1
    # Each report again in a line, last: a log cut to its tail still says what and where.
    for block in cpython_ints:
        print(f"valgrind check: of CPython's int: {summed_up(block)}")
    print(
        f"valgrind check: {len(cpython_ints)} report(s) through leadline's code of a value made "
        "from one of CPython's ints equal to 0 (its unwritten digit; CPython's, not counted)"
    )
    for i, block in enumerate(problems, 1):
        print(f"valgrind check: problem {i}: {summed_up(block)}")
    print(f"valgrind check: {len(problems)} problem(s) in leadline's native code")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
