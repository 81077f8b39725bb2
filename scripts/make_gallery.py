#!/usr/bin/env python3
"""Regenerate docs/gallery/: one PNG per view per theme (and the README that embeds them).

    python scripts/make_gallery.py [--model sample_models/resnet_small.onnx]

PNGs are kept small (graph views in compact mode at a modest DPI) so the gallery stays well
under 5 MB; the script reports each file's size and fails if one passes 200 KB.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VIEWS = ("graph", "lir", "schedule", "lifetimes", "memory")
THEMES = ("paper", "light", "dark", "high-contrast")
LIMIT = 200 * 1024
GRAPH_DPI = 60


def _graph_png(dot: str) -> bytes:
    """Render DOT at a gallery DPI (Graphviz's default 96 makes big files)."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "g.dot"
        src.write_text(dot)
        out = subprocess.run(
            ["dot", "-Tpng", f"-Gdpi={GRAPH_DPI}", str(src)], check=True, capture_output=True
        )
        return out.stdout


def main() -> int:
    from compiler.pipeline import CompileOptions
    from glowviz.exports import figures
    from glowviz.exports.dot_graph import graph_data, graph_to_dot
    from glowviz.exports.dot_lir import lir_data, lir_to_dot
    from glowviz.exports.palette import load_palette
    from glowviz.exports.render import atomic_write
    from glowviz.exports.views import compile_session, view_data

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=str(ROOT / "sample_models" / "lenet.onnx"))
    ap.add_argument(
        "--figure-model", default=str(ROOT / "sample_models" / "transformer_block.onnx")
    )
    ap.add_argument("--out", default=str(ROOT / "docs" / "gallery"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    graph_session = compile_session(args.model, CompileOptions())
    fig_session = compile_session(args.figure_model, CompileOptions())
    total, rows = 0, []
    for theme in THEMES:
        pal = load_palette(theme)
        for view in VIEWS:
            if view == "graph":
                module, st = view_data(graph_session, "graph", "final")
                png = _graph_png(graph_to_dot(graph_data(module, stage=st.label), theme=pal))
            elif view == "lir":
                fn, st = view_data(graph_session, "lir", "final")
                png = _graph_png(lir_to_dot(lir_data(fn, stage=st.label), theme=pal, compact=True))
            else:
                data, _ = view_data(fig_session, view, "final")
                fig = figures.FIGURES[view](data, theme=pal)
                png = figures.figure_bytes(fig, "png", dpi=150)
            name = f"{view}-{theme}.png"
            atomic_write(out / name, png)
            total += len(png)
            rows.append((name, len(png)))
            print(f"{name:28} {len(png) / 1024:7.1f} KiB")
    print(f"total {total / 1024:.0f} KiB")
    big = [n for n, s in rows if s > LIMIT]
    if big:
        print("too large (> 200 KB): " + ", ".join(big), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
