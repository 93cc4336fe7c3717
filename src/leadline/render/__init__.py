"""Renderers and exporters: one interface (base.Renderer), one registry that drives the CLI."""

from .base import REGISTRY, Renderer, RenderOptions, get_renderer, renderers

__all__ = ["REGISTRY", "RenderOptions", "Renderer", "get_renderer", "renderers"]
