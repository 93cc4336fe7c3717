"""Names from a hostile program, through every report and export of a real trace and a real
sampling profile: markup, quotes, U+2028/U+2029, a 10,000-character name, lone surrogates (in a
file name, a function name, a thread name, a mark, argv), terminal control characters and rich
markup.  HTML pages show them as text (checked in Chromium: no element or script comes from
them); every other output is valid (UTF-8, JSON, protobuf) and holds the name, or the one
clearly replaced form leadline uses everywhere: a lone surrogate as the text \\udXXX
(render/untrusted.py), a name cut by the sampler ending with an ellipsis."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from browser import BrowserResult, render_in_chromium
from sameworld import leadline_run
from support import leadline, pprof_strings, write

from leadline.render.untrusted import escape_surrogates, json_text, terminal_text

EVIL = "<script>alert(1)</script>\u2028\u2029\"'&\ud800"
SHOWN = escape_surrogates(EVIL)  # ...&\\ud800: the form every output holds
# A file name with a lone surrogate, markup, a terminal control sequence and rich markup.
EVIL_FILE = "\ud800<img src=x onerror=alert(2)>\x1b[2J[bold red].py"
SHOWN_FILE = escape_surrogates(EVIL_FILE)
CLASS = "<script>[bold red]"
ARGV = ["</title><script>alert(3)</script>", "arg\udcff"]
SHOWN_ARGV = ["</title><script>alert(3)</script>", "arg\\udcff"]

PROGRAM = f"""\
import sys, threading, time
import leadline

EVIL = {EVIL!r}
LONG = "L" * 10000


# On the thread's CPU clock: however busy the machine, each function runs 0.4 s on a CPU, which
# a CPU profile sees (a wall-clock spin on a starved process could run a few milliseconds).
def spin(seconds):
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass


# A function compiled from a file whose name holds a lone surrogate and markup.
exec(compile("def from_evil_file():\\n    spin(0.4)\\nfrom_evil_file()\\n", {EVIL_FILE!r}, "exec"),
     {{"spin": spin}})


# A function renamed: 10,000 characters after the markup.
def renamed():
    spin(0.4)


names = {{"co_name": EVIL + LONG}}
if sys.version_info >= (3, 11):
    names["co_qualname"] = EVIL + LONG
renamed.__code__ = renamed.__code__.replace(**names)
renamed.__qualname__ = EVIL + LONG
renamed()

# A class named with markup and terminal control characters, and its method.
Script = type({CLASS!r}, (), {{}})


def method(self):
    spin(0.4)


names = {{"co_name": "m"}}
if sys.version_info >= (3, 11):
    names["co_qualname"] = Script.__name__ + ".m"
method.__code__ = method.__code__.replace(**names)
Script.m = method
Script().m()

leadline.mark(EVIL, label=EVIL)
worker = threading.Thread(target=spin, args=(0.4,), name=EVIL)
worker.start()
worker.join()
print("done")
"""


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The program traced and profiled: {"trace": capture, "run": capture}."""
    folder = tmp_path_factory.mktemp("names")
    write(folder, "prog.py", PROGRAM)
    out = {}
    for mode in ("trace", "run"):
        args = ["--rate", "500", "prog.py"] if mode == "run" else ["prog.py"]
        r = leadline_run(mode, [*args, *ARGV], folder)
        assert (r.returncode, r.stdout, r.stderr) == (0, "done\n", ""), r.stderr
        out[mode] = folder / f"{mode}.lead"
    return out


def output(*args: str | Path, cwd: Path) -> bytes:
    """A leadline command's output file (-o), as bytes."""
    target = cwd / "out.bin"
    r = leadline(*args, "-o", target, cwd=cwd)
    assert r.returncode == 0, r.stderr
    data = target.read_bytes()
    target.unlink()
    return data


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*strings_in(k), *strings_in(v)]]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


def strict_json(data: bytes) -> Any:
    """JSON that any parser takes: UTF-8, and no string with a lone surrogate."""
    value = json.loads(data.decode("utf-8"))
    for s in strings_in(value):
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in s), s[:80]
    return value


def renamed_name(mode: str) -> str:
    """The renamed function as a capture names it: whole in a trace; in a sampling profile
    cut after 4,096 characters, with an ellipsis."""
    whole = EVIL + "L" * 10000
    return escape_surrogates(whole if mode == "trace" else whole[:4096]) + (
        "" if mode == "trace" else "\u2026"
    )


def profile_facts(report: dict[str, Any]) -> str:
    """What a report says of its capture, for a failure's message: its counts (ticks, missed,
    torn, idle...) and each function's samples (names cut to 40 characters)."""
    counts = {k: v for k, v in report.items() if isinstance(v, (int, float)) and k != "pid"}
    funcs = [(f["name"][:40], f.get("total"), f.get("self")) for f in report.get("functions", [])]
    return f"counts {counts}; functions (name, total, self) {funcs}"


def method_name() -> str:
    shown = escape_surrogates(CLASS) + ".m"
    return shown if sys.version_info >= (3, 11) else "m"


@pytest.mark.parametrize("mode", ["trace", "run"])
def test_report_json_holds_the_names(captures: dict[str, Path], mode: str) -> None:
    cwd = captures[mode].parent
    data = strict_json(output("report", captures[mode], "--json", cwd=cwd))
    names = {f["name"] for f in data["functions"]}
    files = {f["file"] for f in data["functions"]}
    assert renamed_name(mode) in names, profile_facts(data)
    assert method_name() in names and "from_evil_file" in names
    assert str(cwd / SHOWN_FILE) in files or SHOWN_FILE in files
    marks = data["marks"]["events"]
    assert [(m["name"], m["fields"]) for m in marks] == [(SHOWN, {"label": SHOWN})]


def _check_page(result: BrowserResult, texts: list[str]) -> None:
    assert result.console_errors == []
    assert result.tags("img") == 0  # nothing from the names became an element
    assert result.tags("script") == 3  # the page's own three
    assert result.tags("b") == 0
    body = result.body_text()
    for text in texts:
        assert text in body, text[:80]


@pytest.mark.parametrize("mode", ["trace", "run"])
def test_html_report_shows_the_names_as_text(
    chromium: str, captures: dict[str, Path], mode: str
) -> None:
    cwd = captures[mode].parent
    page = cwd / f"{mode}.html"
    r = leadline("report", captures[mode], "--html", "-o", page, cwd=cwd)
    assert r.returncode == 0, r.stderr
    page.read_bytes().decode("utf-8")  # strict UTF-8
    # Everything but the long name fits the table's cells; search finds that one.
    result = render_in_chromium(page)
    texts = [SHOWN_ARGV[0], SHOWN_ARGV[1], "from_evil_file"]
    _check_page(result, texts)
    assert SHOWN[:25] in result.body_text()


def test_diff_html_shows_the_names_as_text(chromium: str, captures: dict[str, Path]) -> None:
    cwd = captures["run"].parent
    page = cwd / "diff.html"
    r = leadline("diff", captures["run"], captures["run"], "--html", "-o", page, cwd=cwd)
    assert r.returncode == 0, r.stderr
    page.read_bytes().decode("utf-8")
    _check_page(render_in_chromium(page), ["from_evil_file"])


def test_exports_of_the_profile(captures: dict[str, Path]) -> None:
    cap = captures["run"]
    cwd = cap.parent
    # speedscope: strict JSON, the frames' names and files as the capture holds them.
    doc = strict_json(output("export", cap, "--format", "speedscope", cwd=cwd))
    frames = doc["shared"]["frames"]
    report = strict_json(output("report", cap, "--json", cwd=cwd))
    assert renamed_name("run") in {f["name"] for f in frames}, profile_facts(report)
    assert any(f["file"].endswith(SHOWN_FILE) for f in frames)
    assert SHOWN in {p["name"].split(" (tid")[0] for p in doc["profiles"]}  # the thread
    # pprof: a protobuf whose string table is UTF-8 and holds the same names.
    table = pprof_strings(output("export", cap, "--format", "pprof", cwd=cwd))
    assert renamed_name("run") in table and method_name() in table
    assert any(s.endswith(SHOWN_FILE) for s in table) and SHOWN in table
    # collapsed: one stack per "\n"-terminated line; U+2028/U+2029 stay in the name (the tools
    # that read folded stacks end a line at "\n" only).
    text = output("export", cap, "--format", "collapsed", cwd=cwd).decode("utf-8")
    lines = text.removesuffix("\n").split("\n")
    assert all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
    assert any(SHOWN in line for line in lines)
    # ...and leadline reads it back.
    (cwd / "p.collapsed").write_text(text, encoding="utf-8")
    r = leadline("diff", cwd / "p.collapsed", cwd / "p.collapsed", "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr


def test_exports_of_the_trace(captures: dict[str, Path]) -> None:
    cap = captures["trace"]
    cwd = cap.parent
    chrome = strict_json(output("export", cap, "--format", "chrome", cwd=cwd))
    events = chrome["traceEvents"]
    assert renamed_name("trace") in {e.get("name") for e in events}
    assert SHOWN in {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    marks = [e for e in events if e.get("cat") == "mark"]
    assert [(m["name"], m["args"]["label"]) for m in marks] == [(SHOWN, SHOWN)]
    rows = [strict_json(line) for line in output("log", cap, "--json", cwd=cwd).splitlines()]
    assert SHOWN in {row.get("mark") for row in rows}
    assert any(str(row.get("file", "")).endswith(SHOWN_FILE) for row in rows)
    log = output("log", cap, cwd=cwd).decode("utf-8")
    assert terminal_text(EVIL_FILE) in log and "\x1b" not in log


@pytest.mark.parametrize("mode", ["trace", "run"])
def test_text_report_shows_escapes(captures: dict[str, Path], mode: str) -> None:
    """On a terminal a name can neither run rich markup nor send control characters."""
    cwd = captures[mode].parent
    text = output("report", captures[mode], "--limit", "100", cwd=cwd).decode("utf-8")
    assert "\x1b" not in text
    # "[bold red]" kept as text, ESC as \x1b (the table may fold the name: spaces aside).
    assert "".join(terminal_text(EVIL_FILE).split()) in "".join(text.split())
    assert "arg\\udcff" in text  # the header's argv


def test_the_one_rule_for_lone_surrogates() -> None:
    """escape_surrogates is python's backslashreplace; json_text's strings decode to it."""
    for text in (EVIL, EVIL_FILE, "\udcff\ud83d\ude00", "plain \u00e9\U0001f600"):
        escaped = escape_surrogates(text)
        assert escaped == text.encode("utf-8", "backslashreplace").decode("utf-8")
        assert json.loads(json_text({text: [text]})) == {escaped: [escaped]}
    assert terminal_text("a\x1b[2J\tb\nc\x07\x9b") == "a\\x1b[2J\tb\nc\\x07\\x9b"
