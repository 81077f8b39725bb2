"""Exports: the IDE's views as files for papers and CI (`glowviz export`, `glowviz mem-diff`,
the per-pass memory report). Graph and LIR views go through DOT and Graphviz; schedule,
lifetimes and memory map are matplotlib figures; every view also exports its data as JSON.

The names below are resolved on first use: importing one submodule (`glowviz run` and
`glowviz mem` only need `render`'s atomic writes) does not import the views and, through them,
the IDE's compile session.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from glowviz.exports.formats import FORMATS, VIEW_FORMATS, VIEWS
    from glowviz.exports.render import ExportError, atomic_write, have_dot, render_dot
    from glowviz.exports.views import compile_session, render_view, resolve_stage

#: Each public name and the submodule that defines it.
_HOME = {
    "ExportError": "render",
    "atomic_write": "render",
    "have_dot": "render",
    "render_dot": "render",
    "FORMATS": "formats",
    "VIEWS": "formats",
    "VIEW_FORMATS": "formats",
    "compile_session": "views",
    "render_view": "views",
    "resolve_stage": "views",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_HOME)
