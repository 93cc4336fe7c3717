"""Build of the native core, leadline._native (C11; everything else is pure Python)."""

from setuptools import Extension, setup

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
        "src/leadline/_native/marks.c",
        "src/leadline/_native/probe.c",
    ],
    depends=[
        "src/leadline/_native/leadline.h",
        "src/leadline/_native/compat.h",
        "src/leadline/_native/procmem.h",
        "src/leadline/_native/layouts.h",
    ],
    extra_compile_args=[
        "-std=c11",
        "-O2",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-Wno-unused-parameter",
        "-Wno-missing-field-initializers",
        "-Wno-cast-function-type",
        "-fvisibility=hidden",
    ],
    libraries=["z", "pthread"],
)

setup(ext_modules=[native])
