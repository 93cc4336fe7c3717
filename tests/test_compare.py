"""`leadline compare`: two virtual environments, one script, run interleaved and diffed, through
the real CLI; leadline reaches environments that do not have it installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import HOOK_KIND_ENDS, leadline
from test_diff_culprits import LIB_V1, LIB_V2, PROGRAM_SRC


def venv_with(root: Path, name: str, plugins_source: str) -> Path:
    """A virtual environment of this interpreter, without leadline, with `mylib` installed in its
    site-packages."""
    venv = root / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "mylib").mkdir()
    (site / "mylib" / "__init__.py").write_text("")
    (site / "mylib" / "plugins.py").write_text(textwrap.dedent(plugins_source))
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("compare")
    (d / "prog.py").write_text(textwrap.dedent(PROGRAM_SRC).replace("ROUNDS", "1500"))
    return d, venv_with(d, "old", LIB_V1), venv_with(d, "new", LIB_V2)


@HOOK_KIND_ENDS
@pytest.mark.statistical
def test_two_environments_one_script(envs: tuple[Path, Path, Path]) -> None:
    d, old, new = envs
    r = leadline(
        "compare",
        "--base",
        old,
        "--new",
        new,
        "--runs",
        "5",
        "--keep",
        d / "kept",
        "--json",
        "--",
        "prog.py",
        cwd=d,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["base"]["runs"] == doc["new"]["runs"] == 5 and doc["noise_from_runs"] is True
    assert doc["base"]["argv"] == doc["new"]["argv"] == ["prog.py"]
    assert doc["whole"]["sig"] == 1 and doc["normalization"]["by"] == "run"
    top = doc["culprits"][0]
    assert (top["name"], top["module_path"]) == ("find_plugins", "mylib/plugins.py")
    assert top["into"]["module_path"].startswith("importlib")
    # Interleaved, at one rate for every run, kept where asked.
    kept = sorted(p.relative_to(d / "kept").as_posix() for p in (d / "kept").rglob("*.lead"))
    assert kept == [f"{side}/{i:02d}.lead" for side in ("base", "new") for i in range(1, 6)]
    assert "5 runs of each side at " in r.stderr and " Hz, interleaved" in r.stderr
    rates = set()
    for p in (d / "kept").rglob("*.lead"):
        rates.add(json.loads(leadline("report", p, "--json", cwd=d, check=True).stdout)["rate_hz"])
    assert len(rates) == 1


@pytest.mark.statistical
def test_whole_command_lines_and_a_failing_fail_above(envs: tuple[Path, Path, Path]) -> None:
    """Two runs a side: the new lookups cost 30% to 45% of the program, of which at least 17%
    is beyond noise (4 sigma of the run-to-run floor taken off), so `--fail-above 10` fails
    naming find_plugins, whether BASE's sampler caught its old, cheap version (then its own
    growth fails) or not (then the culprit's cost does)."""
    d, old, new = envs
    r = leadline(
        "compare",
        "--base",
        f"{old} prog.py",
        "--new",
        f"{new} prog.py",
        "--runs",
        "2",
        "--rate",
        "2000",
        "--fail-above",
        "10",
        cwd=d,
        timeout=600,
    )
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert any(x.startswith("leadline: regression: ") and "find_plugins" in x for x in lines)
    assert "2 runs of each side at 2000 Hz, interleaved" in r.stderr
    assert r.stdout.splitlines()[0].startswith("BASE: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base", "a b", "--new", "c", "--", "prog.py"], "give only the interpreter"),
        (["--base", "python3", "--new", "python3"], "give the script too"),
        (["--base", "/nonexistent/python", "--new", "x", "--", "prog.py"], "cannot run"),
        (["--base", "python3", "--new", "python3", "--rate", "1", "--", "p.py"], "--rate"),
    ],
)
def test_bad_sides_are_one_line_errors(
    envs: tuple[Path, Path, Path], args: list[str], message: str
) -> None:
    d = envs[0]
    r = leadline("compare", *args, cwd=d)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_failing_run_stops_with_its_status(envs: tuple[Path, Path, Path]) -> None:
    d, old, _ = envs
    (d / "fails.py").write_text("raise SystemExit(3)\n")
    r = leadline("compare", "--base", old, "--new", old, "--rate", "100", "--", "fails.py", cwd=d)
    assert r.returncode == 2
    assert "base: " in r.stderr and "exited with status 3" in r.stderr
