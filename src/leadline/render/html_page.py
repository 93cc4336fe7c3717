"""What every self-contained HTML report page shares.

A page is one file: inline CSS and JavaScript, its data embedded as JSON, no request of any
kind when it is opened (from ``file://``, offline).  ``html_page.css`` and ``html_page.js``
(the header, tooltip, sortable table and interactive flame graph) come first; each report adds
its own stylesheet and script after them.

Everything in the data that comes from the profiled program (function and file names, argv,
thread names, labels) is untrusted.  It goes into the page only as JSON inside a
``<script type="application/json">`` element, with ``<``, ``>``, ``&``, U+2028 and U+2029
escaped so that nothing in it can end the element or be read as markup (and lone surrogates
as the text ``\\udXXX``, which UTF-8 can hold), and the page's script shows it only through
``textContent``.  A Content-Security-Policy that allows exactly the
page's own inline script and style (by hash) and nothing else backs this up.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from .untrusted import json_text

__all__ = ["flame_panel", "header", "json_for_script", "render_page", "table_panel"]

_HERE = Path(__file__).resolve().parent

# Installed first, so that even an error while the main script is parsed is shown on the page.
_ERROR_HOOK = """(function () {
  'use strict';
  var reported = 0;
  function report(text) {
    var box = document.getElementById('ll-errors');
    if (!box || reported >= 50) return;
    reported += 1;
    box.appendChild(document.createTextNode(String(text) + '\\n'));
  }
  window.llReportError = report;
  window.onerror = function (message, source, line, column, error) {
    var where = line ? ' (line ' + line + (column ? ':' + column : '') + ')' : '';
    report(String(message) + where + (error && error.stack ? '\\n' + error.stack : ''));
    return false;
  };
  window.addEventListener('unhandledrejection', function (event) {
    report('Unhandled promise rejection: ' + String(event.reason));
  });
})();
"""

_JSON_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


@cache
def _asset(name: str) -> str:
    text = (_HERE / name).read_text(encoding="utf-8")
    lowered = text.lower()
    if "</script" in lowered or "</style" in lowered:
        raise RuntimeError(f"{name} must not contain a closing script or style tag")
    return text


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def json_for_script(data: Mapping[str, Any]) -> str:
    """``data`` as JSON that is safe as the text of a ``<script type="application/json">``.

    Values that JSON cannot hold are written with ``str()``; NaN and infinities are refused
    with ValueError; a lone surrogate in a string is the text ``\\udXXX`` (untrusted.py).
    """
    text = json_text(data, allow_nan=False, separators=(",", ":"), default=str)
    return text.translate(_JSON_ESCAPES)


def header(title: str) -> str:
    """The page's header: title, the command line, a list of facts and a warning line (all
    filled in by the script)."""
    return (
        '<pre id="ll-errors" role="alert"></pre>\n'
        '<header id="ll-header">\n'
        f"<h1>{title}</h1>\n"
        '<div id="ll-argv" title="Command line">&#8203;</div>\n'
        '<dl id="ll-facts"></dl>\n'
        '<div id="ll-warning" role="alert" hidden></div>\n'
        "</header>\n"
        '<noscript><p class="ll-empty">This report needs JavaScript to draw its charts.</p>'
        "</noscript>\n"
    )


def flame_panel(title: str, controls: str, notes: str) -> str:
    """The flame graph's panel: a weight selector, ``controls`` (more of the page's own), the
    search box, zoom reset and breadcrumbs; ``notes`` under the graph."""
    return f"""<section class="ll-panel" id="ll-flame-panel">
<div class="ll-panel-head"><h2>{title}</h2>
<label class="ll-control">Weight <select id="ll-metric"></select></label>
{controls}<label class="ll-control">Search <input type="search" id="ll-search"
 placeholder="function or file" autocomplete="off" spellcheck="false"></label>
<button type="button" id="ll-reset" disabled>Reset zoom</button>
<span class="ll-grow"></span>
<span id="ll-search-info"></span>
<span id="ll-total" class="ll-note"></span></div>
<div class="ll-panel-body">
<nav id="ll-crumbs" aria-label="Zoomed frame and its callers"></nav>
<div id="ll-flame-scroll"><div id="ll-flame"></div></div>
<div id="ll-flame-note" class="ll-note"></div>
<div class="ll-note">{notes}</div>
</div>
</section>
"""


def table_panel(title: str) -> str:
    """A panel with the sortable table (#ll-table) and its "show all" button."""
    return f"""<section class="ll-panel" id="ll-functions">
<div class="ll-panel-head"><h2>{title}</h2>
<span id="ll-table-note" class="ll-note ll-grow"></span>
<button type="button" id="ll-table-more" hidden></button></div>
<div class="ll-panel-body"><div id="ll-table-wrap"><table id="ll-table"></table></div></div>
</section>
"""


def source_panel(notes: str) -> str:
    """The source view's panel (#ll-source-panel, drawn by html_page.js's renderSource): a file
    chooser and the file's lines with their shares; ``notes`` say what the shares are."""
    return f"""<section class="ll-panel" id="ll-source-panel" hidden>
<div class="ll-panel-head"><h2>Source</h2>
<label class="ll-control">File <select id="ll-source-file"></select></label>
<span class="ll-grow"></span><span id="ll-source-note" class="ll-note"></span></div>
<div class="ll-panel-body"><div id="ll-source-warning" role="alert" hidden></div>
<div id="ll-source-wrap"><table id="ll-source"></table></div>
<div class="ll-note">{notes} The files are read when the report is made.</div></div>
</section>
"""


def render_page(*, title: str, body: str, data: Mapping[str, Any], assets: str) -> str:
    """One self-contained page: ``body`` (trusted markup), ``data`` embedded as
    ``#ll-data``, and the shared stylesheet and script followed by ``assets``.css/.js."""
    payload = json_for_script(data)
    css = _asset("html_page.css") + _asset(f"{assets}.css")
    script = _asset("html_page.js") + _asset(f"{assets}.js")
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_csp_hash(_ERROR_HOOK)} {_csp_hash(script)}",
            f"style-src {_csp_hash(css)}",
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    return "".join(
        [
            "<!DOCTYPE html>\n",
            '<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n',
            '<meta name="referrer" content="no-referrer">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>{title}</title>\n",
            f"<style>{css}</style>\n",
            "</head>\n<body>\n",
            f"<script>{_ERROR_HOOK}</script>\n",
            body,
            '<div id="ll-state" hidden></div>\n',
            '<div id="ll-tooltip" role="tooltip" hidden></div>\n',
            f'<script type="application/json" id="ll-data">{payload}</script>\n',
            f"<script>{script}</script>\n",
            "</body>\n</html>\n",
        ]
    )
