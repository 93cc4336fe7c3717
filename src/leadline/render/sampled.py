"""What the exports of sampling captures share: the capture's SampleProfile, or a one-line
refusal when the capture holds a trace instead."""

from __future__ import annotations

from ..analyse.model import Metric, SampleProfile
from ..analyse.samples import default_metric, load_profile
from ..capture.reader import Capture
from ..errors import LeadlineError
from .base import Renderer, RenderOptions


class SampledExport(Renderer):
    """A renderer of the profile folded from a sampling capture (`leadline run`)."""

    def profile(self, cap: Capture) -> SampleProfile:
        mode = cap.meta.get("mode")
        if mode != "sample":
            raise LeadlineError(
                f"{self.name} export needs a sampling capture (leadline run); "
                f"{cap.path} is a {mode or 'unknown'} capture"
            )
        return load_profile(cap)

    @staticmethod
    def metric(profile: SampleProfile, options: RenderOptions) -> Metric:
        """The weight asked for, else the profile's own (CPU time in cpu mode)."""
        return options.metric or default_metric(profile)
