"""Checks shared by the tests of the HTML report pages: the page as text (self-contained,
nothing untrusted outside its JSON data), the page in Chromium (no errors, no requests), and
JavaScript snippets that act on its flame graph."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

from browser import BrowserResult, render_in_chromium
from support import leadline

# Reads the page's machine-readable state (#ll-state's data-* attributes) and its URL hash.
STATE_JS = (
    "JSON.stringify(Object.assign({}, document.getElementById('ll-state').dataset,"
    " {hash: location.hash}))"
)
# The function name of the table's first row.
FIRST_ROW_JS = "document.querySelector('#ll-table tbody tr').dataset.name"


def sort_table_js(key: str) -> str:
    """Clicks the table's header of this column."""
    return f"document.querySelector('#ll-table th[data-key={key}]').click(); true"


def click_row_js(name: str) -> str:
    """Clicks the table's row of this function."""
    return f"document.querySelector('#ll-table tbody tr[data-name={name}]').click(); true"


def embedded_json(page: str) -> str:
    match = re.search(r'<script type="application/json" id="ll-data">(.*?)</script>', page, re.S)
    assert match is not None
    return match.group(1)


def inline_scripts(page: str) -> list[str]:
    return re.findall(r"<script>(.*?)</script>", page, re.S)


def assert_only_own_scripts(page: str) -> None:
    """Only the page's own three scripts (the error hook, the data and the program) and one
    title, whatever names the data holds."""
    assert page.lower().count("<script") == 3
    assert page.lower().count("</script") == 3
    assert page.count("<title>") == 1
    for ch in ("\u2028", "\u2029"):
        assert ch not in page
    assert not set(embedded_json(page)) & set("<>&\u2028\u2029")


def assert_no_external_references(page: str) -> None:
    urls = set(re.findall(r"https?://[^\s\"'<>)]*", page, re.I))
    # The SVG namespace is a name that browsers never fetch.
    assert urls <= {"http://www.w3.org/2000/svg"}
    # Outside the data (which is text, see above), nothing refers to any resource.
    lowered = page.replace(embedded_json(page), "").lower()
    for pattern in (r"\bsrc\s*=", r"\bhref\s*=", r"@import", r"url\(\s*['\"]?(?!data:)"):
        assert not re.search(pattern, lowered), pattern
    assert "<link" not in lowered
    assert "<iframe" not in lowered


def assert_policy_allows_only_inline_code(page: str) -> None:
    match = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert match is not None
    policy = match.group(1)
    assert "default-src 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    for script in inline_scripts(page):
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert style is not None
    digest = base64.b64encode(hashlib.sha256(style.group(1).encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in policy


def assert_clean(result: BrowserResult, page_file: Path) -> dict[str, str]:
    """No errors anywhere, no request but the page itself; the page's state."""
    assert result.console_errors == []
    assert result.element_text("ll-errors").strip() == ""
    assert {r.split("#")[0] for r in result.requests} <= {page_file.resolve().as_uri()}
    state = result.state()
    assert state.get("ready") == "1", state
    return state


def report_in_chromium(
    cap: Path, cwd: Path, actions: list[str]
) -> tuple[BrowserResult, Path, dict[str, str]]:
    """`leadline report CAP --html` loaded in Chromium with `actions` run and checked clean
    (assert_clean): the browser's result, the page, and the page's state."""
    page = cwd / "report.html"
    leadline("report", cap, "--html", "-o", page, cwd=cwd, check=True)
    result = render_in_chromium(page, "", actions)
    return result, page, assert_clean(result, page)


def rendered(state: dict[str, str]) -> list[str]:
    """The distinct names drawn in the flame graph, in drawing order (root first)."""
    names = json.loads(state["rendered-names"])
    assert isinstance(names, list)
    return [str(n) for n in names]


def _each_frame(name: str, body: str) -> str:
    return (
        "(function(){var fs=document.querySelectorAll('#ll-flame .ll-frame');"
        "for (var i=0;i<fs.length;i++){var f=fs[i];"
        f"if (f.textContent === {json.dumps(name)}){{{body}}}}}"
        "return null;})()"
    )


def click_frame_js(name: str) -> str:
    """Clicks the first frame drawn with this name; true if there was one."""
    return _each_frame(name, "f.dispatchEvent(new MouseEvent('click',{bubbles:true}));return true;")


def hover_frame_js(name: str) -> str:
    """Moves the mouse over the first frame drawn with this name; the tooltip's text."""
    return _each_frame(
        name,
        "var r=f.getBoundingClientRect();var o={bubbles:true,"
        "clientX:r.left+r.width/2,clientY:r.top+5};"
        "f.dispatchEvent(new MouseEvent('mouseover',o));"
        "var t=document.getElementById('ll-tooltip');"
        "return t.hidden ? null : t.textContent;",
    )
