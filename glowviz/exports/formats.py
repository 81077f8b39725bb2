"""The views `glowviz export` writes and the file formats each one supports.

A module of its own, without imports, so the CLI's parser can list the choices without
loading the views (and through them the compile session) that `render_view` needs.
"""

from __future__ import annotations

VIEWS = ("graph", "lir", "schedule", "lifetimes", "memory")
FORMATS = ("dot", "svg", "pdf", "png", "json", "txt")

#: Which formats each view supports.
VIEW_FORMATS: dict[str, tuple[str, ...]] = {
    "graph": ("dot", "svg", "pdf", "png", "json"),
    "lir": ("dot", "svg", "pdf", "png", "json", "txt"),
    "schedule": ("svg", "pdf", "png", "json"),
    "lifetimes": ("svg", "pdf", "png", "json"),
    "memory": ("svg", "pdf", "png", "json"),
}

__all__ = ["FORMATS", "VIEWS", "VIEW_FORMATS"]
