"""Builds the bench-only empty hook (barehook.c), held to the warnings leadline's C code is."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "barehook", ["barehook.c"], extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror"]
        )
    ]
)
