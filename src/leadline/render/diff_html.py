"""The HTML report of ``leadline diff``: a differential flame graph.

:func:`render_diff_html` turns the diff's machine form (:func:`leadline.analyse.diff.to_json`, with
its merged call-path tree) into one self-contained page (see :mod:`.html_page` for what every report
page shares and how untrusted names are kept out of the markup): a header with both inputs and the
normalisation, the call tree of NEW (or, switched, of BASE) with each frame coloured by how its cost
changed (red grew, blue shrank, neutral within noise; deeper for a larger ratio), the ranked table
of functions, and the callers of the top regressions.  :class:`DiffHtml` renders a diff (compared
with its merged tree, ``Settings(tree=True)``) as that page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from ..analyse.diff import DiffResult, to_json
from .base import Renderer, RenderOptions, register
from .html_page import flame_panel, header, render_page, table_panel

__all__ = ["DiffHtml", "render_diff_html"]

_CONTROLS = """<label class="ll-control">Tree <select id="ll-tree">
<option value="new">New</option><option value="base">Base</option></select></label>
<span class="ll-legend" aria-label="Colours"><span class="ll-swatch ll-grew"></span>grew
<span class="ll-swatch ll-shrank"></span>shrank
<span class="ll-swatch ll-same"></span>within noise
<span class="ll-swatch ll-culprit-swatch"></span>culprit (new cost enters)</span>
"""

_CULPRITS = """<section class="ll-panel" id="ll-culprits-panel">
<div class="ll-panel-head"><h2>Where the new cost enters</h2></div>
<div class="ll-panel-body" id="ll-culprits"></div>
</section>
"""

_CALLERS = """<section class="ll-panel" id="ll-callers-panel">
<div class="ll-panel-head"><h2>Callers of the top regressions</h2></div>
<div class="ll-panel-body" id="ll-callers"></div>
</section>
"""

_BODY = (
    header("leadline diff")
    + _CULPRITS
    + flame_panel(
        "Differential flame graph",
        _CONTROLS,
        "Callers above callees; width is the cost on the side drawn (NEW unless switched). "
        "Red: the cost of that call path grew beyond noise, blue: it shrank, the deeper the "
        "larger the ratio; neutral: within noise; outlined: where a culprit's new cost enters. "
        "Click a frame to zoom in, Escape to zoom out.",
    )
    + table_panel("Functions, ranked")
    + _CALLERS
)


def render_diff_html(doc: Mapping[str, Any]) -> str:
    """The differential flame graph page of a diff document, self-contained."""
    return render_page(title="leadline diff", body=_BODY, data=doc, assets="diff_html")


@register
class DiffHtml(Renderer[DiffResult]):
    name = "html"
    kinds = ("diff",)
    extension = "html"
    description = "a self-contained differential flame graph (red grew, blue shrank)"

    def render(self, r: DiffResult, out: IO[str], options: RenderOptions) -> None:
        # Every function, whatever --limit says: the page ranks and searches them itself.
        out.write(render_diff_html(to_json(r)))
