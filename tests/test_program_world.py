"""What the profiled program sees of the world, under `leadline run` and `leadline trace`, is
what `python` shows it: sys.argv, the whole of sys.path, its __main__ namespace (keys in order,
__file__, __cached__, __loader__, __spec__, __package__, __annotations__), the filename of its
code, and __main__ losing __file__ once a script has run.  Each way of naming a program that
python takes is compared with the running interpreter itself: a script (relative, with "..",
through a symbolic link, absolute), a .pyc file, a directory, a zip file, -m (a module in a
package, a package), -c; and the `leadline` console script, and -P (3.11+)."""

from __future__ import annotations

import json
import os
import py_compile
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from sameworld import MODES, child_env, compare, leadline_run, python_run
from support import PY, report, run, write

# Prints what the program sees, as one JSON line, and at exit whether __main__ still has
# __file__ (python takes it away from a script's __main__ once the script has run).
WORLD = """\
import atexit, json, sys
g = globals()


def loader(obj):
    if obj is None or isinstance(obj, type):
        return getattr(obj, "__name__", None)
    return [type(obj).__name__, getattr(obj, "name", None), getattr(obj, "path", None)]


spec = g.get("__spec__")
print("world", json.dumps({
    "argv": sys.argv,
    "path": sys.path,
    "keys": list(g),
    "name": g["__name__"],
    "file": g.get("__file__", "<absent>"),
    "cached": g.get("__cached__", "<absent>"),
    "package": g.get("__package__", "<absent>"),
    "doc": g.get("__doc__", "<absent>"),
    "annotations": repr(g.get("__annotations__", "<absent>")),
    "builtins": type(g["__builtins__"]).__name__,
    "loader": loader(g.get("__loader__")),
    "spec": spec and [spec.name, spec.origin, spec.cached, spec.parent, loader(spec.loader)],
    "co_filename": sys._getframe().f_code.co_filename,
    "is_main": sys.modules["__main__"].__dict__ is g,
}))
atexit.register(lambda: print("at exit, __main__ has __file__:",
                              hasattr(sys.modules["__main__"], "__file__")))
"""

INIT = """\
import sys
print("importing pkg, argv:", sys.argv)
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A folder with the program in every form python runs."""
    write(tmp_path, "prog.py", WORLD)
    (tmp_path / "sub").mkdir()
    write(tmp_path, "sub/inner.py", WORLD)
    (tmp_path / "link.py").symlink_to(tmp_path / "sub" / "inner.py")
    (tmp_path / "pkg").mkdir()
    write(tmp_path, "pkg/__init__.py", INIT)
    write(tmp_path, "pkg/mod.py", WORLD)
    write(tmp_path, "pkg/__main__.py", WORLD)
    (tmp_path / "appdir").mkdir()
    write(tmp_path, "appdir/__main__.py", WORLD)
    with zipfile.ZipFile(tmp_path / "app.zip", "w") as z:
        z.writestr("__main__.py", WORLD)
    py_compile.compile(str(tmp_path / "prog.py"), cfile=str(tmp_path / "compiled.pyc"))
    return tmp_path


def world(stdout: str) -> dict[str, Any]:
    line = next(x for x in stdout.splitlines() if x.startswith("world "))
    seen: dict[str, Any] = json.loads(line[len("world ") :])
    return seen


CASES = {
    "script": ["prog.py", "a", "--b"],
    "dot-dot": ["./sub/../prog.py"],
    "symlink": ["link.py", "x"],
    "pyc": ["compiled.pyc", "x"],
    "directory": ["appdir", "x"],
    "zip": ["app.zip", "x"],
    "module": ["-m", "pkg.mod", "a", "--b"],
    "package": ["-m", "pkg", "x"],
    "code": ["-c", WORLD, "a", "--b"],
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_program_sees_what_python_shows(tree: Path, case: str) -> None:
    args = CASES[case]
    outcomes = compare(args, tree)
    seen = world(outcomes["python"].stdout)
    # What python shows, stated, so that the comparison cannot pass on a broken baseline.
    if case in ("script", "dot-dot", "symlink", "pyc"):
        assert os.path.isabs(seen["file"]) and seen["spec"] is None
        assert seen["argv"][0] == args[0]
        # A .pyc holds the name its source was compiled with.
        source = str(tree / "prog.py") if case == "pyc" else seen["file"]
        assert seen["co_filename"] == source
        assert outcomes["python"].stdout.endswith("at exit, __main__ has __file__: False\n")
    if case == "symlink":
        assert seen["path"][0] == str(tree / "sub") and seen["file"] == str(tree / "link.py")
    if case == "dot-dot":
        assert seen["file"] == f"{tree}/./sub/../prog.py" and seen["path"][0] == str(tree)
    if case == "module":
        assert "importing pkg, argv: ['-m', 'a', '--b']" in outcomes["python"].stdout
        assert seen["argv"][0] == str(tree / "pkg" / "mod.py") and seen["path"][0] == str(tree)
        assert seen["spec"][0] == "pkg.mod" and seen["package"] == "pkg"
    if case == "code":
        assert seen["argv"][0] == "-c" and seen["path"][0] == "" and seen["file"] == "<absent>"
    if case in ("directory", "zip"):
        assert seen["path"][0] == str(tree / args[0]) and seen["argv"][0] == args[0]


def test_absolute_script_path(tree: Path) -> None:
    compare([tree / "prog.py"], tree / "sub")


def test_from_the_leadline_script(tree: Path) -> None:
    """The `leadline` console script puts its own folder first in sys.path; the program must
    see its own folder there instead."""
    script = Path(PY).parent / "leadline"
    if not script.exists():
        pytest.skip(f"no console script beside {PY}")
    expected = python_run(["prog.py", "x"], tree)
    for mode, opts in MODES.items():
        r = run([script, *opts, "-o", tree / f"{mode}.lead", "prog.py", "x"], cwd=tree)
        assert (r.returncode, r.stdout, r.stderr) == (0, expected.stdout, expected.stderr)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="-P (safe_path) is new in 3.11")
@pytest.mark.parametrize("case", ["script", "module", "directory"])
def test_safe_path(tree: Path, case: str) -> None:
    """Under -P python adds no entry for a script or -m (a directory or zip still gets its
    own): the program under `python -P -m leadline` sees the same.  (The package is found
    through PYTHONPATH, since the current directory is not searched.)"""
    args = CASES[case]
    env = {**child_env(), "PYTHONPATH": str(tree)}
    expected = python_run(args, tree, python=(PY, "-P"), env=env)
    for mode in MODES:
        got = leadline_run(mode, args, tree, python=(PY, "-P"), env=env)
        assert (got.returncode, got.stdout, got.stderr) == (
            expected.returncode,
            expected.stdout,
            expected.stderr,
        )
    first = world(expected.stdout)["path"][0]
    assert first == (str(tree / "appdir") if case == "directory" else str(tree))


def test_code_filenames_in_the_capture_are_absolute(tree: Path) -> None:
    """The trace and the profile name the script's functions by the absolute path python
    compiles them with, wherever the script was named from."""
    write(
        tree,
        "work.py",
        """\
        import time
        def busy():
            t = time.perf_counter()
            while time.perf_counter() - t < 0.3:
                pass
        busy()
        """,
    )
    for mode in MODES:
        r = leadline_run(mode, ["work.py"], tree)
        assert r.returncode == 0, r.stderr
        files = {f["name"]: f["file"] for f in report(tree / f"{mode}.lead", tree)["functions"]}
        assert files["busy"] == str(tree / "work.py"), (mode, files)


def test_a_missing_module_is_a_one_line_error(tree: Path) -> None:
    for mode in MODES:
        r = leadline_run(mode, ["-m", "no_such_module_here"], tree)
        assert r.returncode == 2
        assert r.stderr.strip().splitlines() == [
            "leadline: error: -m no_such_module_here: No module named no_such_module_here"
        ]


def test_an_empty_directory_is_a_one_line_error(tree: Path) -> None:
    (tree / "empty").mkdir()
    for mode in MODES:
        r = leadline_run(mode, ["empty"], tree)
        assert r.returncode == 2
        assert len(r.stderr.strip().splitlines()) == 1
        assert "can't find '__main__' module" in r.stderr


def test_a_package_that_fails_to_import_is_the_programs_error(tree: Path) -> None:
    """`-m pkg.mod` whose package raises: python shows the program's traceback, exit 1."""
    (tree / "bad").mkdir()
    write(tree, "bad/__init__.py", "raise ValueError('the package is broken')\n")
    write(tree, "bad/mod.py", "print('never')\n")
    expected = python_run(["-m", "bad.mod"], tree)
    assert expected.returncode == 1
    for mode in MODES:
        got = leadline_run(mode, ["-m", "bad.mod"], tree)
        assert got.returncode == 1 and got.stdout == ""
        assert got.stderr.splitlines()[-1] == "ValueError: the package is broken"
        assert "leadline" not in got.stderr
        assert f'File "{tree / "bad" / "__init__.py"}", line 1, in <module>' in got.stderr


def test_source_with_a_coding_cookie(tree: Path) -> None:
    (tree / "latin.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nprint('caf\xe9', __file__.endswith('latin.py'))\n"
    )
    compare(["latin.py"], tree)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_recording_loads_no_reader_renderer_or_terminal_library(tmp_path: Path, mode: str) -> None:
    """`leadline trace` and `run` start the program without importing what only reading and
    showing a capture need (rich, the renderers, the analysis, the capture reader): the program
    starts sooner (about 45 ms on 3.12) and finds fewer foreign modules in sys.modules."""
    script = write(
        tmp_path,
        "mods.py",
        "import json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'rich' or m.startswith(("
        "'rich.', 'leadline.render', 'leadline.analyse', 'leadline.capture.reader')))))\n",
    )
    cmd = [PY, "-m", "leadline", *MODES[mode], "-o", str(tmp_path / "x.lead"), str(script)]
    r = run(cmd, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
