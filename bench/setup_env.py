"""Install what the benchmarks need into a Python environment (a virtual environment).

Usage::

    python bench/setup_env.py [--python PATH] [--check] [--only pyperformance,pymemtrace,py-spy]

* ``pyperformance`` (pinned, so the ``calls`` workload does not change under our feet) provides
  the benchmark sources of ``bench/workloads/calls.py`` and brings the real ``pyperf`` they
  import.
* ``pymemtrace`` 0.6.3, the comparison profiler, is built from source; its C code only builds
  here with ``CFLAGS="-O2 -Wno-error=unused-variable -Wno-error=use-after-free"``.
* ``py-spy`` (pinned), the comparison sampling profiler of ``bench/sampling.py``: a native
  program shipped in a wheel, installed as ``bin/py-spy`` of the environment.
* ``barehook`` (``bench/barehook``, built here): an empty C hook of the kind ``trace`` installs,
  the floor ``bench/run.py`` measures the tracer against.

``bench/run.py`` and ``bench/sampling.py`` call this automatically for what a run needs.  It
refuses to install into a Python that is not a virtual environment unless given
``--allow-system``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

BENCH = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Requirement:
    name: str  # distribution name
    version: str
    module: str | None  # imported to check that it works
    env: dict[str, str] = field(default_factory=dict)
    script: str | None = None  # a program it installs into the environment's scripts folder
    source: str | None = None  # a folder of this repository it is built from, not PyPI

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def install_arg(self) -> str:
        """What pip installs: the pinned release, or the local folder."""
        return os.path.join(BENCH, self.source) if self.source else self.spec


REQUIREMENTS = {
    "pyperformance": Requirement("pyperformance", "1.14.0", "pyperf"),
    "pymemtrace": Requirement(
        "pymemtrace",
        "0.6.3",
        "pymemtrace.cPyMemTrace",
        {"CFLAGS": "-O2 -Wno-error=unused-variable -Wno-error=use-after-free"},
    ),
    "py-spy": Requirement("py-spy", "0.4.3", None, script="py-spy"),
    "barehook": Requirement(
        "leadline-bench-barehook",
        # as bench/barehook/setup.py versions it: a build of another source is stale
        "1.0+"
        + hashlib.sha256(Path(BENCH, "barehook", "barehook.c").read_bytes()).hexdigest()[:12],
        "barehook",
        source="barehook",
    ),
}

_PROBE = """
import importlib, importlib.metadata as md, json, os, sys, sysconfig
out = {"venv": sys.prefix != sys.base_prefix, "found": {}}
for name, (dist, module, script) in json.loads(sys.argv[1]).items():
    try:
        version = md.version(dist)
        if module:
            importlib.import_module(module)
        if script and not os.access(os.path.join(sysconfig.get_path("scripts"), script), os.X_OK):
            version = None
    except Exception:
        version = None
    out["found"][name] = version
print(json.dumps(out))
"""


def probe(python: str, names: list[str]) -> tuple[bool, dict[str, str | None]]:
    """(is a venv, installed and importable version or None for each name)."""
    modules = {
        n: (REQUIREMENTS[n].name, REQUIREMENTS[n].module, REQUIREMENTS[n].script) for n in names
    }
    proc = subprocess.run(
        [python, "-c", _PROBE, json.dumps(modules)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cannot run {python}: {proc.stderr.strip()[-500:]}")
    data = json.loads(proc.stdout)
    return bool(data["venv"]), dict(data["found"])


def script_path(python: str, script: str) -> str | None:
    """Where `script` (a program a requirement installs) is in `python`'s environment."""
    code = "import sysconfig; print(sysconfig.get_path('scripts'))"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    path = os.path.join(proc.stdout.strip(), script)
    return path if proc.returncode == 0 and os.access(path, os.X_OK) else None


def missing(python: str, names: list[str]) -> list[Requirement]:
    _, found = probe(python, names)
    return [REQUIREMENTS[n] for n in names if found.get(n) != REQUIREMENTS[n].version]


def ensure(python: str, names: list[str], allow_system: bool = False) -> list[str]:
    """Install the named requirements that are missing; return the problems left (empty: ok)."""
    is_venv, found = probe(python, names)
    todo = [REQUIREMENTS[n] for n in names if found.get(n) != REQUIREMENTS[n].version]
    if not todo:
        return []
    if not is_venv and not allow_system:
        return [
            f"{r.spec} is missing and {python} is not a virtual environment "
            "(create one, or pass --allow-system)"
            for r in todo
        ]
    problems = []
    for req in todo:
        print(f"setup_env: installing {req.spec} into {python}", flush=True)
        env = {**os.environ, **req.env}
        cmd = [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", req.install_arg]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            problems.append(f"pip install {req.spec} failed:\n{tail}")
    if not problems:
        problems = [f"{r.spec} still not importable" for r in missing(python, names)]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="default: this Python")
    parser.add_argument("--only", default=",".join(REQUIREMENTS), help="comma-separated names")
    parser.add_argument("--check", action="store_true", help="only report what is missing")
    parser.add_argument("--allow-system", action="store_true", help="install into a non-venv")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - set(REQUIREMENTS)
    if unknown:
        parser.error(f"unknown: {', '.join(sorted(unknown))}")
    if args.check:
        todo = missing(args.python, names)
        for req in todo:
            print(f"missing: {req.spec}")
        return 1 if todo else 0
    problems = ensure(args.python, names, args.allow_system)
    for problem in problems:
        print(f"setup_env: {problem}", file=sys.stderr)
    if not problems:
        print(f"setup_env: {', '.join(REQUIREMENTS[n].spec for n in names)} ready in {args.python}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
