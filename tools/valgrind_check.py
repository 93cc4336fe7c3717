"""Runs tools/valgrind_workload.py under valgrind's memcheck and fails on any invalid access,
use of uninitialised memory, or leak whose stack passes through leadline's native code
(CPython's own exit-time leaks and its interned strings are not ours)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "valgrind.log"
        cmd = [
            "valgrind",
            "--leak-check=full",
            "--show-leak-kinds=definite",
            f"--log-file={log}",
            sys.executable,
            str(HERE / "valgrind_workload.py"),
            str(Path(tmp) / "vg.lead"),
        ]
        env = {**os.environ, "PYTHONMALLOC": "malloc"}
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        text = log.read_text(errors="replace")
    if run.returncode != 0 or not run.stdout.startswith("ok"):
        print(run.stdout, run.stderr, text[-4000:], sep="\n")
        print("valgrind check: the workload failed")
        return 1
    problems = []
    for block in re.split(r"\n==\d+== \n", text):
        if re.search(r"Invalid (read|write|free)|uninitialised|Conditional jump", block):
            problems.append(block)
        elif "definitely lost" in block and "_native" in block:
            ours = [ln for ln in block.splitlines() if "src/leadline/_native" in ln]
            if any("PyInit__native" not in ln for ln in ours):
                problems.append(block)
    for p in problems:
        print(p)
    print(f"valgrind check: {len(problems)} problem(s) in leadline's native code")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
