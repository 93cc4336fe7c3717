"""Build of the native core, leadline._native (C11; everything else is pure Python), and of the
start-up hook that starts the fleet agent in any Python process with LEADLINE_PUSH set."""

import os
import sys
import sysconfig

from setuptools import Extension, setup

if sysconfig.get_config_var("Py_GIL_DISABLED"):
    # The native core reads object headers, thread states and frames laid out for the GIL build.
    sys.exit(
        "leadline does not support free-threaded CPython builds (Py_GIL_DISABLED): "
        "use the default build of this Python version"
    )
from setuptools.command.build_py import build_py

PTH = "leadline-agent.pth"


class build_py_with_hook(build_py):
    """Puts leadline-agent.pth at the top of site-packages: one line, run at interpreter
    start-up, that does nothing unless LEADLINE_PUSH is set."""

    def run(self) -> None:
        super().run()
        self.copy_file(os.path.join("src", PTH), os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]

# LEADLINE_SANITIZE=1 (make sanitize): AddressSanitizer and UndefinedBehaviorSanitizer, for the
# tests only.  Unoptimised: at -O1 gcc 12 drops ASan checks it deems redundant, among them the
# read after free that probe_watch() made (a check before a call that freed the block covered the
# read after it).  The objects go to their own build directory: pip builds in the source tree,
# and setuptools would otherwise reuse the plain build's objects.
SANITIZE = os.environ.get("LEADLINE_SANITIZE", "") not in ("", "0")
SANITIZE_FLAGS = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
    # CPython's own flags, which extensions inherit, include -fwrapv: signed overflow wraps, and
    # UBSan does not look for it.  The C must not depend on that (another build need not pass it).
    "-fno-wrapv",
]

native = Extension(
    "leadline._native",
    sources=[
        "src/leadline/_native/module.c",
        "src/leadline/_native/capture.c",
        "src/leadline/_native/memory.c",
        "src/leadline/_native/tracer.c",
        "src/leadline/_native/reader.c",
        "src/leadline/_native/procmem.c",
        "src/leadline/_native/sampler.c",
        "src/leadline/_native/stackwalk.c",
        "src/leadline/_native/tasks.c",
        "src/leadline/_native/pyobjects.c",
        "src/leadline/_native/native.c",
        "src/leadline/_native/locals.c",
        "src/leadline/_native/marks.c",
        "src/leadline/_native/probe.c",
    ],
    depends=[
        "src/leadline/_native/leadline.h",
        "src/leadline/_native/schedule.h",
        "src/leadline/_native/compat.h",
        "src/leadline/_native/procmem.h",
        "src/leadline/_native/stackwalk.h",
        "src/leadline/_native/layouts.h",
    ],
    extra_compile_args=[
        "-std=c11",
        *(["-O0", *SANITIZE_FLAGS] if SANITIZE else ["-O2"]),
        "-g",  # file:line in valgrind's and the sanitizers' stacks, and in gdb
        "-Wall",
        "-Wextra",
        "-Werror",
        "-Wno-unused-parameter",
        "-Wno-missing-field-initializers",
        "-Wno-cast-function-type",
        "-fvisibility=hidden",
    ],
    extra_link_args=SANITIZE_FLAGS if SANITIZE else [],
    libraries=["z", "pthread", "m"],
)

setup(
    ext_modules=[native],
    cmdclass={"build_py": build_py_with_hook},
    # Always compiled afresh: setuptools compares the sources' times with the built module's,
    # not the flags above.
    options={"build": {"build_base": "build-sanitize", "force": True}} if SANITIZE else {},
)
