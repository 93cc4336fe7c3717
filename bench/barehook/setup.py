"""Builds the bench-only empty hook (barehook.c), held to the warnings leadline's C code is."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

# The version carries a digest of the C source, so that bench/setup_env.py sees a stale build.
DIGEST = hashlib.sha256(Path(__file__).with_name("barehook.c").read_bytes()).hexdigest()[:12]

setup(
    version=f"1.0+{DIGEST}",
    ext_modules=[
        Extension(
            "barehook", ["barehook.c"], extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror"]
        )
    ],
)
