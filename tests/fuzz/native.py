"""leadline's C core built for fuzzing, beside the installed one.

atheris sees Python branches by instrumenting bytecode; C code is only seen if it was compiled
with clang's coverage instrumentation.  :func:`build` compiles the same sources as setup.py
with ``-fsanitize=fuzzer-no-link`` (edge counters and comparison tracing for libFuzzer), linked
against the libFuzzer that atheris ships so that the counters register with it, into a folder of
the fuzzing work area; :func:`load` makes that build the ``leadline._native`` that everything
imports.  With ``sanitize=True`` the build is instead checked by AddressSanitizer and
UndefinedBehaviorSanitizer (for replaying a corpus, see run.py --sanitize): no coverage, but
an out-of-bounds read or a signed overflow aborts with a report instead of passing unseen.

Without clang (``tools/ensure-clang`` installs it) the fuzzers run on the installed core: its
crashes are still caught (libFuzzer reports the signal) but its branches do not guide them.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "src" / "leadline" / "_native"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
# setup.py's flags, but -Werror: clang's warnings differ slightly from gcc's, and this build is
# not the product's, so they are shown, not fatal.
FLAGS = ["-std=c11", "-O1", "-g", "-fno-omit-frame-pointer", "-fvisibility=hidden",
         "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers",
         "-Wno-cast-function-type"]  # fmt: skip


def clang() -> str | None:
    return shutil.which("clang")


def _atheris_core() -> Path:
    import atheris

    found = sorted(Path(atheris.__file__).parent.glob("core_with_libfuzzer*.so"))
    if not found:
        raise RuntimeError("atheris has no core_with_libfuzzer library")
    return found[0]


def runtime(name: str) -> str:
    """The path of one of clang's sanitizer runtimes (e.g. "asan")."""
    cc = clang() or "clang"
    out = subprocess.run(
        [cc, f"--print-file-name=libclang_rt.{name}-x86_64.so"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def build(work: Path, sanitize: bool = False) -> Path | None:
    """The instrumented extension (built if missing or older than a source); None without
    clang."""
    cc = clang()
    if cc is None:
        return None
    kind = "sanitize" if sanitize else "coverage"
    out_dir = work / f"native-{kind}-{sys.implementation.cache_tag}"
    target = out_dir / f"_native{SUFFIX}"
    sources = sorted(SOURCES.glob("*.c"))
    newest = max(p.stat().st_mtime for p in [*sources, *SOURCES.glob("*.h")])
    if target.exists() and target.stat().st_mtime > newest:
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    include = sysconfig.get_paths()["include"]
    cmd = [cc, "-shared", "-fPIC", *FLAGS, f"-I{include}", f"-I{SOURCES}"]
    if sanitize:
        cmd += ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                "-shared-libsan"]  # fmt: skip
    else:
        core = _atheris_core()
        cmd += ["-fsanitize=fuzzer-no-link", str(core), f"-Wl,-rpath,{core.parent}"]
    cmd += [*map(str, sources), "-lz", "-lpthread", "-o", str(target)]
    subprocess.run(cmd, check=True)
    return target


def load(path: Path) -> None:
    """Make `path` the ``leadline._native`` module, before anything imports leadline."""
    if "leadline._native" in sys.modules:
        raise RuntimeError("leadline._native is already imported")
    loader = importlib.machinery.ExtensionFileLoader("leadline._native", str(path))
    spec = importlib.util.spec_from_file_location("leadline._native", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["leadline._native"] = module
    loader.exec_module(module)


def sanitizer_env() -> dict[str, str]:
    """The environment of a process that loads the sanitized build: ASan's runtime must come
    first (CPython itself is not built with it); CPython's allocations at exit are not leaks."""
    return {
        **os.environ,
        "LD_PRELOAD": runtime("asan"),
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:allocator_may_return_null=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    }
