"""Runs pytest (arguments after --) against a leadline whose native core was built with
AddressSanitizer and UndefinedBehaviorSanitizer (LEADLINE_SANITIZE=1, `make sanitize`), and
fails on any sanitizer report from any process of the run.

CPython is not built with ASan, so the ASan runtime is preloaded (LD_PRELOAD, which the CLI
processes the tests start inherit, as they inherit the rest of this environment), Python's own
allocator is bypassed (PYTHONMALLOC=malloc) so that ASan sees every object, and leak detection is
off (CPython leaks at exit by design).  Each report stops its process at once (halt_on_error,
abort_on_error; the extension is built with -fno-sanitize-recover=undefined) and leaves a report
in a log directory (for UBSan, through ASan's handler of the abort that follows its message): a
report from a child process whose output a test swallows, or whose exit status it does not
check, still fails the run."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"


def runtime() -> str:
    """The ASan runtime of the compiler that built the extension."""
    cc = os.environ.get("CC", "gcc")
    r = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True)
    path = r.stdout.strip()
    if r.returncode != 0 or not os.path.isabs(path) or not os.path.exists(path):
        sys.exit(f"sanitize: {cc} has no libasan.so ({path or r.stderr.strip()})")
    return path


def extension() -> Path:
    """The installed leadline._native, found without importing it (that needs the runtime)."""
    spec = importlib.util.find_spec("leadline")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("sanitize: leadline is not installed in this environment")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("_native.*.so"))
    if not found:
        sys.exit("sanitize: leadline._native is not built")
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs (in tests/)")
    args = parser.parse_args()
    so = extension()
    data = so.read_bytes()
    if b"__asan_report" not in data or b"__ubsan_handle" not in data:
        sys.exit(f"sanitize: {so} is not built with the sanitizers (LEADLINE_SANITIZE=1)")
    with tempfile.TemporaryDirectory(prefix="leadline-sanitize-") as logs:
        asan = [
            "detect_leaks=0",  # CPython leaks at exit by design
            "halt_on_error=1",
            "abort_on_error=1",
            # gcc's libubsan prints its reports on stderr whatever its log_path says, then aborts
            # (abort_on_error below): ASan's handler for that SIGABRT writes a report, with the
            # UBSan handler and our frame on its stack, to the log.  No test aborts on purpose.
            "handle_abort=1",
            "detect_stack_use_after_return=1",
            "check_initialization_order=1",
            "strict_string_checks=1",
            f"log_path={logs}/asan",
        ]
        ubsan = [
            "halt_on_error=1",
            "abort_on_error=1",
            "print_stacktrace=1",
            f"log_path={logs}/ubsan",
        ]
        preload = os.environ.get("LD_PRELOAD", "")
        env = {
            **os.environ,
            "LD_PRELOAD": runtime() + (f":{preload}" if preload else ""),
            "PYTHONMALLOC": "malloc",
            "ASAN_OPTIONS": ":".join(asan),
            "UBSAN_OPTIONS": ":".join(ubsan),
        }
        # First, that the setup works in a process like the tests': a heap overflow made on
        # purpose (ctypes) must be reported, and an abort (what a UBSan report ends in) logged.
        for code, sign in (
            (
                "import ctypes, leadline._native; b = ctypes.create_string_buffer(64); "
                "ctypes.memset(ctypes.addressof(b), 0, 65)",
                "heap-buffer-overflow",
            ),
            ("import os, leadline._native; os.abort()", "ABRT"),
        ):
            probe = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True
            )
            caught = [p for p in Path(logs).iterdir() if sign in p.read_text()]
            if probe.returncode == 0 or not caught:
                print(probe.stdout, probe.stderr, sep="\n")
                sys.exit(
                    f"sanitize: no {sign} report from a process failing on purpose: setup broken"
                )
            for p in Path(logs).iterdir():
                p.unlink()
        print(f"sanitize: {so.name} with {env['LD_PRELOAD']}", flush=True)
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", *args.pytest_args],
            cwd=TESTS,
            env=env,
        )
        # The valgrind workload too: it drives every C file, and asserts that each part ran
        # (damaged payloads for the decoders, a fork while sampling, a child process attached).
        with tempfile.TemporaryDirectory(prefix="leadline-sanitize-workload-") as out:
            work = subprocess.run(
                [sys.executable, str(HERE / "valgrind_workload.py"), out],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
        workload_ok = work.returncode == 0 and work.stdout.startswith("ok ")
        print(f"sanitize: tools/valgrind_workload.py: {work.stdout.strip() or 'no output'}")
        if not workload_ok:
            print(work.stderr)
        reports = sorted(Path(logs).iterdir())
        for p in reports:
            print(f"---- {p.name}\n{p.read_text(errors='replace')}")
        if reports:
            print(f"sanitize: {len(reports)} sanitizer report(s) (above)")
            return 1
        print(f"sanitize: no sanitizer report; pytest exit status {r.returncode}")
        return r.returncode or (0 if workload_ok else 1)


if __name__ == "__main__":
    sys.exit(main())
