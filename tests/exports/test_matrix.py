"""Every view to every format it supports, for every sample model (the slow matrix)."""

from __future__ import annotations

import json
import shutil
from xml.etree import ElementTree

import pytest
from export_helpers import SAMPLE_MODELS, session_for

from glowviz.exports.views import VIEW_FORMATS, render_view

HAVE_DOT = shutil.which("dot") is not None
MAGIC = {"svg": b"<svg", "pdf": b"%PDF", "png": b"\x89PNG"}


@pytest.mark.slow
@pytest.mark.parametrize("model", SAMPLE_MODELS)
@pytest.mark.parametrize("view", list(VIEW_FORMATS))
def test_every_view_every_format(model, view):
    s = session_for(model)
    for fmt in VIEW_FORMATS[view]:
        if fmt in MAGIC and view in ("graph", "lir") and not HAVE_DOT:
            pytest.skip("Graphviz 'dot' not installed (CI installs it)")
        data = render_view(s, view, fmt, theme="paper")
        assert data, (view, fmt)
        if fmt == "json":
            schema = json.loads(data)["schema"]
            # lifetimes and memory are the memory report itself (what mem --json writes)
            assert schema == (
                "glowviz.memory/1" if view in ("lifetimes", "memory") else f"glowviz.export.{view}/1"
            )
        elif fmt == "dot":
            assert data.startswith(b"digraph")
        elif fmt in MAGIC:
            assert MAGIC[fmt] in data[:400], (view, fmt)
            if fmt == "svg":  # a viewer must be able to open it: well-formed XML
                ElementTree.fromstring(data)


@pytest.mark.slow
@pytest.mark.parametrize("theme", ["dark", "light", "high-contrast", "paper"])
def test_themes_and_compact_and_wide(theme):
    s = session_for("lenet.onnx")
    for view, fmt in (("graph", "dot"), ("lir", "dot"), ("memory", "svg")):
        a = render_view(s, view, fmt, theme=theme, compact=True, wide=True)
        assert a


def test_figures_are_deterministic():
    s = session_for("mlp.onnx")
    for fmt in ("svg", "pdf", "png"):
        assert render_view(s, "memory", fmt) == render_view(s, "memory", fmt), fmt
