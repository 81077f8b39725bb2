"""The quantization figure for papers (matplotlib, Agg): per-node SQNR bars (local and
propagated, with the threshold) over the histograms of the least precise tensors, each with
the range its scale and offset cover. Data: `compiler.quantize.quant_report` and the profile.
Deterministic output, as glowviz/exports/figures.py.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from compiler.graph.ops_quant import QMAX, QMIN
from compiler.quantization.profile import Profile
from compiler.quantize import QuantReport
from glowviz.exports.drawing import MIN_FONT_PT, WIDE_WIDTH_IN
from glowviz.exports.figures import figure_bytes
from glowviz.exports.palette import load_palette

#: Histograms shown under the bars: the tensors with the lowest propagated SQNR.
HISTOGRAMS = 4
#: Bins a histogram is drawn with (the profile's are merged in groups).
DISPLAY_BINS = 128


def _finite(x: float, cap: float) -> float:
    return cap if math.isinf(x) and x > 0 else (0.0 if not math.isfinite(x) else min(x, cap))


def quant_figure(report: QuantReport, profile: Profile, theme: str = "paper") -> Figure:
    pal = load_palette(theme)
    fig = Figure(figsize=(WIDE_WIDTH_IN, 5.6), facecolor=pal.background)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(
        2, HISTOGRAMS, height_ratios=(1.4, 1.0), hspace=1.1, wspace=0.35, bottom=0.07, top=0.94
    )
    ax = fig.add_subplot(grid[0, :])
    nodes = report.nodes
    cap = max([_finite(n.local, 80) for n in nodes] + [report.threshold + 10])
    x = np.arange(len(nodes))
    colours = pal.buffers or [pal.foreground]
    ax.bar(x - 0.2, [_finite(n.local, cap) for n in nodes], 0.4, label="local", color=colours[0])
    ax.bar(
        x + 0.2,
        [_finite(n.propagated, cap) for n in nodes],
        0.4,
        label="propagated",
        color=colours[1 % len(colours)],
    )
    ax.axhline(report.threshold, color=pal.muted, linewidth=0.8, linestyle="--")
    ax.set_ylabel("SQNR (dB)", fontsize=7)
    ax.set_xticks(x, [n.node for n in nodes], rotation=90, fontsize=MIN_FONT_PT)
    ax.tick_params(colors=pal.foreground, labelsize=6)
    ax.set_facecolor(pal.background)
    outs = ", ".join(f"{k} {v:.1f} dB" for k, v in report.outputs.items())
    ax.set_title(f"int8 SQNR per node (output: {outs})", fontsize=8, color=pal.foreground)
    ax.legend(fontsize=6, frameon=False, labelcolor=pal.foreground)
    worst = sorted((n for n in nodes if n.value in profile), key=lambda n: n.propagated)
    for i, n in enumerate(worst[:HISTOGRAMS]):
        h = fig.add_subplot(grid[1, i])
        tp = profile[n.value]
        group = max(1, tp.hist.size // DISPLAY_BINS)
        counts = tp.hist[: tp.hist.size // group * group].reshape(-1, group).sum(axis=1)
        edges = tp.bin_edges()[::group][: counts.size + 1]
        h.stairs(np.maximum(counts, 0.5), edges, fill=True, color=colours[2 % len(colours)])
        h.set_yscale("log")
        lo, hi = n.scale * (QMIN - n.offset), n.scale * (QMAX - n.offset)
        for v in (lo, hi):
            h.axvline(v, color=pal.foreground, linewidth=0.7)
        h.set_title(f"{n.value[:22]}\n{n.propagated:.1f} dB", fontsize=5.5, color=pal.foreground)
        h.tick_params(colors=pal.foreground, labelsize=4.5)
        h.set_facecolor(pal.background)
    return fig


def quant_figure_bytes(
    report: QuantReport, profile: Profile, options: Any, fmt: str, theme: str = "paper"
) -> bytes:
    """The figure as SVG, PDF or PNG bytes."""
    return figure_bytes(quant_figure(report, profile, theme), fmt)


__all__ = ["HISTOGRAMS", "quant_figure", "quant_figure_bytes"]
