"""`--open` (report, diff, sweep: the HTML page in the user's browser, $BROWSER chooses it) and
the progress line of `attach` on a terminal (silent when stderr is not one)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support import HOOK_KIND_ENDS, HOT_AND_COOL, PY, leadline, write
from terminal import Terminal

# What these test is version-independent logic (support.HOOK_KIND_ENDS).
pytestmark = HOOK_KIND_ENDS

PROGRAM = f"""
import sys, time
{HOT_AND_COOL}
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    hot()
    cool()
"""


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    write(tmp_path, "prog.py", PROGRAM)
    leadline("run", "-q", "-o", "p.lead", "prog.py", "0.3", cwd=tmp_path, check=True)
    return tmp_path / "p.lead"


def browser(tmp_path: Path) -> dict[str, str]:
    """$BROWSER: a program that writes down what it was asked to open."""
    script = write(tmp_path, "browser.sh", f'#!/bin/sh\necho "$1" >> {tmp_path}/opened.txt\n')
    script.chmod(0o755)
    return {"BROWSER": f"{script} %s"}


def opened(tmp_path: Path) -> list[str]:
    path = tmp_path / "opened.txt"
    return path.read_text().split() if path.exists() else []


def test_report_open_writes_and_opens_the_page(tmp_path: Path, capture: Path) -> None:
    r = leadline("report", capture, "--open", cwd=tmp_path, env_extra=browser(tmp_path))
    assert r.returncode == 0, r.stderr
    page = tmp_path / "p.html"  # --open implies --html, written beside the capture
    assert page.exists() and opened(tmp_path) == [page.as_uri()]


def test_diff_open(tmp_path: Path, capture: Path) -> None:
    r = leadline(
        "diff", capture, capture, "--open", "-o", "d.html", cwd=tmp_path,
        env_extra=browser(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert opened(tmp_path) == [(tmp_path / "d.html").as_uri()]


def test_open_needs_html(tmp_path: Path, capture: Path) -> None:
    r = leadline("report", capture, "--open", "--json", cwd=tmp_path)
    assert r.returncode == 2 and "--open opens an HTML page" in r.stderr
    assert r.stderr.count("\n") == 1
    r = leadline("sweep", "--env", "X=1", "--open", "--", PY, "-c", "pass", cwd=tmp_path)
    assert r.returncode == 2 and "give --html FILE" in r.stderr, r.stderr


def test_no_browser_is_one_line(tmp_path: Path, capture: Path) -> None:
    env = {"BROWSER": str(tmp_path / "no-such-browser") + " %s"}
    r = leadline("report", capture, "--open", cwd=tmp_path, env_extra=env)
    assert r.returncode == 0, r.stderr
    assert "leadline: no web browser to open" in r.stderr and (tmp_path / "p.html").exists()


@pytest.mark.tmux
def test_attach_shows_its_progress_on_a_terminal(tmp_path: Path) -> None:
    script = write(tmp_path, "prog.py", PROGRAM)
    proc = subprocess.Popen([PY, str(script), "60"], stdout=subprocess.PIPE, text=True)
    term = None
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        term = Terminal(tmp_path, f"{PY} -m leadline attach {proc.pid} -d 4 -o a.lead")
        term.wait_for(rf"leadline: sampling {proc.pid}: [\d,]+ samples in [\d.]+ s, \d+ s left")
        screen = term.wait_for(r"EXIT=0")
        # The line is gone once sampling ends; the summary follows.
        assert "Ctrl-C stops" not in screen and " s left" not in screen, screen
        assert re.search(r"leadline: [\d,]+ samples in [\d,]+ ticks", screen), screen
    finally:
        if term is not None:
            term.close()
        proc.kill()
        proc.wait()


def test_attach_is_silent_when_not_a_terminal(tmp_path: Path) -> None:
    script = write(tmp_path, "prog.py", PROGRAM)
    proc = subprocess.Popen([PY, str(script), "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        r = leadline("attach", proc.pid, "-d", "1", "-o", "a.lead", cwd=tmp_path)
    finally:
        proc.kill()
        proc.wait()
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "Ctrl-C stops" not in r.stderr
