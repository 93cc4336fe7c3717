"""A probe capture (`leadline probe -o`) read back: each probe's count, the ratios, and the
capture they came from (its marks, its completeness)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..capture.reader import Capture, Definitions, Progress


@dataclass
class ProbeReport:
    capture: Definitions
    data: dict[str, Any]  # the fields of ProbeResult.to_json()

    @property
    def complete(self) -> bool:
        return self.capture.end is not None


def probe_data(cap: Definitions) -> dict[str, Any]:
    """A probe capture's META and END as ProbeResult.to_json() would give them."""
    options = cap.meta.get("options", {})
    end = cap.end or {}
    counts: dict[str, int] = end.get("counts", {})
    probes = [{**p, "count": counts.get(p["name"], 0)} for p in options.get("probes", [])]
    return {
        "seconds": end.get("seconds", 0.0),
        "mechanism": options.get("mechanism", "?"),
        "counts": counts,
        "ratios": end.get("ratios", {}),
        "ratio_expressions": options.get("ratios", {}),
        "probes": probes,
    }


def probe_report(cap: Capture, progress: Progress | None = None) -> ProbeReport:
    return ProbeReport(cap, probe_data(cap))
