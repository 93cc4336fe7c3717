"""File names the way people read them (docs/paths.md): a package's file from the package, the
standard library's from the library, the program's own relative to where it ran; the whole
name on hover in HTML and in JSON."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest
from browser import render_in_chromium
from support import leadline, write

from leadline.analyse.paths import PathNamer, base_of, short_path
from leadline.capture.reader import Capture


@pytest.mark.parametrize(
    ("file", "base", "shown"),
    [
        ("/usr/lib/python3.11/threading.py", None, "threading.py"),
        (
            "/root/.pyenv/versions/3.12.1/lib/python3.12/asyncio/events.py",
            "/root",
            "asyncio/events.py",
        ),
        ("/usr/lib64/python3.9/json/decoder.py", None, "json/decoder.py"),
        ("/opt/py/lib/python3.13t/queue.py", None, "queue.py"),
        (
            "/app/.venv/lib/python3.12/site-packages/requests/sessions.py",
            "/app",
            "requests/sessions.py",
        ),
        ("/usr/lib/python3/dist-packages/yaml/loader.py", None, "yaml/loader.py"),
        # A package vendored inside another: from the innermost packages folder.
        ("/v/site-packages/pip/_vendor/site-packages/rich/text.py", None, "rich/text.py"),
        ("/home/me/app/main.py", "/home/me/app", "main.py"),
        ("/home/me/app/pkg/util.py", "/home/me/app/", "pkg/util.py"),
        # Not under the folder (a sibling whose name starts the same), none, or the root.
        ("/home/me/application/x.py", "/home/me/app", "/home/me/application/x.py"),
        ("/srv/tool.py", None, "/srv/tool.py"),
        ("/srv/tool.py", "/", "/srv/tool.py"),
        # Names that are not paths, and folders that end the name.
        ("<frozen importlib._bootstrap>", "/", "<frozen importlib._bootstrap>"),
        ("<string>", None, "<string>"),
        ("gc", None, "gc"),
        ("/usr/lib/python3.11/", None, "/usr/lib/python3.11/"),
        ("/x/site-packages/", None, "/x/site-packages/"),
        ("", None, ""),
    ],
)
def test_short_path(file: str, base: str | None, shown: str) -> None:
    assert short_path(file, base) == shown


def test_this_pythons_own_library_and_packages() -> None:
    stdlib = sysconfig.get_paths()["stdlib"]
    assert short_path(f"{stdlib}/threading.py") == "threading.py"
    assert short_path(f"{sysconfig.get_paths()['purelib']}/pytest/__init__.py") == (
        "pytest/__init__.py"
    )
    namer = PathNamer(base_of({"cwd": "/home/me/app"}))
    assert namer("/home/me/app/a.py") == "a.py" and namer("/home/me/app/a.py") == "a.py"
    assert base_of({"cwd": 7}) is None and base_of({}) is None and PathNamer().base is None


PROGRAM = """
    import json, time
    from helpers.work import busy
    text = json.dumps([{"k": list(range(50))}] * 200)
    end = time.thread_time() + 0.6
    while time.thread_time() < end:
        busy(text)
"""

HELPER = """
    import json
    def busy(text):
        return json.loads(text)
"""


def test_reports_show_short_names_and_keep_whole_ones(chromium: str, tmp_path: Path) -> None:
    """Through the real CLI: the text table names the program's files relative to the folder
    it ran in and the standard library's from the library; the JSON report keeps every name
    whole, and so does the HTML page's data, with the short names beside them."""
    write(tmp_path, "prog.py", PROGRAM)
    (tmp_path / "helpers").mkdir()
    write(tmp_path / "helpers", "work.py", HELPER)
    write(tmp_path / "helpers", "__init__.py", "")
    cap = tmp_path / "out.lead"
    r = leadline("run", "-q", "--mode", "cpu", "-o", cap, "prog.py", cwd=tmp_path, check=True)
    with Capture(cap) as c:
        assert c.meta["cwd"] == str(tmp_path)
    text = leadline("report", cap, "--limit", "40", cwd=tmp_path, check=True).stdout
    assert "busy (helpers/work.py:3)" in text, text  # the helper's source starts with a newline
    assert " (json/decoder.py:" in text, text
    assert str(tmp_path) not in text and sysconfig.get_paths()["stdlib"] not in text, text
    data = json.loads(leadline("report", cap, "--json", cwd=tmp_path, check=True).stdout)
    files = {f["name"]: f["file"] for f in data["functions"]}
    assert files["busy"] == str(tmp_path / "helpers" / "work.py"), files
    decoder = [f for f in files.values() if f.endswith("/json/decoder.py")]
    assert decoder and all(Path(f).is_absolute() for f in decoder), files
    html = tmp_path / "out.html"
    leadline("report", cap, "--html", "-o", html, cwd=tmp_path, check=True)
    page = html.read_text(encoding="utf-8")
    whole = json.dumps(str(tmp_path / "helpers" / "work.py"))
    assert f'{whole}: "helpers/work.py"' in page or f'{whole}:"helpers/work.py"' in page, r
    # In a browser: the table's cell shows the short name, its hover the whole one.
    shown = render_in_chromium(html)
    table = shown.element_text("ll-table")
    assert "helpers/work.py:3" in table and str(tmp_path) not in table, table
    assert f'title="{tmp_path}/helpers/work.py:3"' in shown.dom, shown.dom[-3000:]


def test_trace_and_dump_text_use_short_names(tmp_path: Path) -> None:
    write(tmp_path, "prog.py", PROGRAM.replace("0.6", "0.05"))
    (tmp_path / "helpers").mkdir()
    write(tmp_path / "helpers", "work.py", HELPER)
    write(tmp_path / "helpers", "__init__.py", "")
    cap = tmp_path / "t.lead"
    leadline("trace", "-q", "-o", cap, "prog.py", cwd=tmp_path, check=True)
    text = leadline("report", cap, "--limit", "60", cwd=tmp_path, check=True).stdout
    assert "helpers/work.py:3" in text and str(tmp_path) not in text, text
