"""The machine form of ``leadline diff`` (its schema in docs/diff.md), as `--json` prints it."""

from __future__ import annotations

import json
from typing import IO

from ..analyse.diff import DiffResult, to_json
from .base import Renderer, RenderOptions, register


@register
class DiffJson(Renderer[DiffResult]):
    name = "json"
    kinds = ("diff",)
    extension = "json"
    description = "the diff as JSON (docs/diff.md)"

    def render(self, r: DiffResult, out: IO[str], options: RenderOptions) -> None:
        # The first `limit` ranked functions; the tree and the callers whole.
        json.dump(to_json(r, options.limit), out, indent=1, allow_nan=False)
        out.write("\n")
