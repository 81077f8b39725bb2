"""Exports: the IDE's views as files for papers and CI (`glowviz export`, `glowviz mem-diff`,
the per-pass memory report). Graph and LIR views go through DOT and Graphviz; schedule,
lifetimes and memory map are matplotlib figures; every view also exports its data as JSON.
"""

from __future__ import annotations

from glowviz.exports.render import ExportError, atomic_write, have_dot, render_dot
from glowviz.exports.views import (
    FORMATS,
    VIEW_FORMATS,
    VIEWS,
    compile_session,
    render_view,
    resolve_stage,
)

__all__ = [
    "FORMATS",
    "VIEWS",
    "VIEW_FORMATS",
    "ExportError",
    "atomic_write",
    "compile_session",
    "have_dot",
    "render_dot",
    "render_view",
    "resolve_stage",
]
