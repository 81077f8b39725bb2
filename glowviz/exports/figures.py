"""Paper figures of the low-level views with matplotlib (Agg, never a display): the schedule's
live bytes, buffer lifetimes and the memory map (offset over instruction index).

Inputs are the dicts of `json_export` (`glowviz.export.schedule/1`, `glowviz.export.memory/1`).
Sized for one column (3.5 in) by default, two columns with `wide=True`. Output is deterministic:
fixed SVG hash salt, no dates in SVG/PDF metadata, no software stamp in PNG.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from compiler.graph.ops import CATEGORIES
from glowviz.exports.palette import Palette, load_palette

COLUMN_IN = 3.5
WIDE_IN = 7.16
FIGURE_FORMATS = ("svg", "pdf", "png")
PNG_DPI = 200

#: Category order in legends and of the hatch patterns: the op table's ("other" last).
_CATEGORY_ORDER = CATEGORIES


def _unit(max_bytes: float) -> tuple[float, str]:
    if max_bytes >= 1024 * 1024:
        return 1024.0 * 1024.0, "MiB"
    if max_bytes >= 1024:
        return 1024.0, "KiB"
    return 1.0, "B"


def _fmt_bytes(n: float) -> str:
    div, unit = _unit(abs(n))
    return f"{n / div:.1f} {unit}" if unit != "B" else f"{int(n)} B"


def _new_figure(pal: Palette, wide: bool, height: float | None = None) -> tuple[Figure, Any]:
    w = WIDE_IN if wide else COLUMN_IN
    h = height or (2.8 if wide else 2.5)
    fig = Figure(figsize=(w, h), facecolor=pal.background)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_facecolor(pal.background)
    for spine in ax.spines.values():
        spine.set_color(pal.muted)
        spine.set_linewidth(0.6)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.tick_params(colors=pal.foreground, labelsize=6.5, width=0.6, length=2.5)
    ax.xaxis.label.set_color(pal.foreground)
    ax.yaxis.label.set_color(pal.foreground)
    ax.title.set_color(pal.foreground)
    return fig, ax


def _style_text(pal: Palette) -> dict[str, Any]:
    return {"color": pal.foreground, "fontsize": 7, "family": pal.font}


def _finish(fig: Figure, ax: Any, pal: Palette, title: str | None) -> None:
    for lab in (ax.xaxis.label, ax.yaxis.label):
        lab.set_fontsize(7)
        lab.set_family(pal.font)
    for t in ax.get_xticklabels() + ax.get_yticklabels():
        t.set_family(pal.font)
    if title:
        ax.set_title(title, fontsize=7.5, color=pal.foreground, family=pal.font, loc="left")
    fig.tight_layout(pad=0.3)


def _legend(ax: Any, pal: Palette, handles: list[Any], ncol: int = 2) -> None:
    """The legend above the plot area, so it never hides data."""
    if not handles:
        return
    ax.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0.0, 1.01),
        ncol=ncol,
        frameon=False,
        labelcolor=pal.foreground,
        borderaxespad=0.0,
        borderpad=0.2,
        handlelength=1.6,
        handletextpad=0.4,
        labelspacing=0.25,
        columnspacing=1.0,
        prop={"family": pal.font, "size": 5.5},
    )


def _byte_axis(axis: Any, max_bytes: float) -> tuple[float, str]:
    """Data are plotted in the unit (KiB/MiB) so ticks fall on round numbers of it."""
    div, unit = _unit(max_bytes)
    axis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    return div, unit


def _buffer_style(pal: Palette, category: str, index: int) -> dict[str, Any]:
    """Buffers are coloured by the category of the op that produced them (as graph nodes are);
    themes with hatches (paper) add a pattern per category so greyscale print keeps them apart."""
    face = pal.categories.get(category) or pal.buffers[index % len(pal.buffers)]
    if pal.hatches:
        k = _CATEGORY_ORDER.index(category) if category in _CATEGORY_ORDER else len(_CATEGORY_ORDER)
        return {"facecolor": face, "hatch": pal.hatches[k % len(pal.hatches)]}
    return {"facecolor": face}


def _category_color(pal: Palette, category: str) -> dict[str, Any]:
    return _buffer_style(pal, category, 0)


# ---------------------------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------------------------


def schedule_figure(
    data: dict[str, Any],
    *,
    theme: str | Palette | None = None,
    wide: bool = False,
    title: str | None = None,
) -> Figure:
    """Live activation bytes after every schedule step, one line per scheduler, peaks marked."""
    pal = theme if isinstance(theme, Palette) else load_palette(theme)
    fig, ax = _new_figure(pal, wide)
    series = data["series"]
    top = max(
        [s["peak_bytes"] for s in series]
        + [data.get("planned_peak_bytes") or 0, data.get("lower_bound_bytes") or 0, 1]
    )
    div, unit = _byte_axis(ax.yaxis, top)
    styles = ("-", "--", ":", "-.")
    handles = []
    for k, s in enumerate(series):
        xs = list(range(len(s["live_bytes"])))
        color = pal.series[k % len(pal.series)]
        used = " (used)" if s["scheduler"] == data.get("scheduler") else ""
        (line,) = ax.step(
            xs,
            [v / div for v in s["live_bytes"]],
            where="post",
            color=color,
            lw=1.0,
            ls=styles[k % len(styles)],
            label=f"{s['scheduler']}{used}: peak {_fmt_bytes(s['peak_bytes'])}",
        )
        handles.append(line)
        if s["peak_step"] >= 0:
            ax.plot(
                [s["peak_step"]], [s["peak_bytes"] / div], marker="v", ms=3.5, color=color, zorder=5
            )
    lb = data.get("lower_bound_bytes")
    planned = data.get("planned_peak_bytes")
    if planned:
        handles.append(
            ax.axhline(
                planned / div,
                color=pal.peak,
                lw=0.8,
                ls="-",
                alpha=0.9,
                label=f"planned arena {_fmt_bytes(planned)}",
            )
        )
    if lb:
        handles.append(
            ax.axhline(
                lb / div,
                color=pal.lower_bound,
                lw=0.8,
                ls=(0, (1, 1.5)),
                label=f"lower bound (LIR) {_fmt_bytes(lb)}",
            )
        )
    ax.set_xlabel("schedule step (node index)")
    ax.set_ylabel(f"live activations ({unit})")
    ax.set_ylim(0, top / div * 1.05)
    ax.set_xlim(0, max((len(s["live_bytes"]) for s in series), default=1))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
    ax.grid(True, axis="y", color=pal.muted, alpha=0.25, lw=0.4)
    _legend(ax, pal, handles, ncol=2)
    _finish(fig, ax, pal, title)
    return fig


def lifetimes_figure(
    data: dict[str, Any],
    *,
    theme: str | Palette | None = None,
    wide: bool = False,
    title: str | None = None,
) -> Figure:
    """One horizontal bar per activation buffer over [first, last], coloured by the category of
    the op that produced it; the peak instruction marked; buffers live there outlined."""
    pal = theme if isinstance(theme, Palette) else load_palette(theme)
    bufs = sorted(data["buffers"], key=lambda b: (b["first"], b["last"], b["name"]))
    n_rows = len(bufs)
    height = (
        min(6.0, max(2.2, 0.9 + 0.06 * n_rows))
        if not wide
        else min(6.0, max(2.6, 0.9 + 0.05 * n_rows))
    )
    fig, ax = _new_figure(pal, wide, height)
    live = set(data.get("live_at_peak", []))
    cats: dict[str, None] = {}
    bar_h = 0.8
    for row, b in enumerate(bufs):
        style = _buffer_style(pal, b.get("category", "other"), row)
        cats.setdefault(b.get("category", "other"), None)
        ax.add_patch(
            Rectangle(
                (b["first"] - 0.4, row - bar_h / 2),
                b["last"] - b["first"] + 0.8,
                bar_h,
                edgecolor=pal.peak if b["name"] in live else pal.edge,
                linewidth=0.9 if b["name"] in live else 0.3,
                **style,
            )
        )
    peak_at = data.get("peak_instruction", -1)
    handles: list[Any] = []
    if peak_at is not None and peak_at >= 0:
        handles.append(
            ax.axvline(
                peak_at,
                color=pal.peak,
                lw=0.8,
                ls="--",
                label=f"peak at #{peak_at}: {_fmt_bytes(data['peak_bytes'])}"
                f" (lower bound {_fmt_bytes(data['lower_bound_bytes'])})",
            )
        )
    n = max(data.get("n_instructions", 0), max((b["last"] + 1 for b in bufs), default=1))
    ax.set_xlim(-1, n)
    ax.set_ylim(n_rows - 0.5 + 0.5, -0.5 - 0.5)
    if n_rows <= 32:
        ax.set_yticks(range(n_rows))
        ax.set_yticklabels([b["name"] for b in bufs], fontsize=4.5 if n_rows > 16 else 5.5)
        ax.set_ylabel("")
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.set_ylabel("buffer (by first use)")
    ax.set_xlabel("instruction index")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
    ax.grid(True, axis="x", color=pal.muted, alpha=0.2, lw=0.4)
    handles += [
        Patch(edgecolor=pal.edge, linewidth=0.3, label=c, **_category_color(pal, c))
        for c in _sorted_categories(cats)
    ]
    _legend(ax, pal, handles, ncol=3 if wide else 2)
    _finish(fig, ax, pal, title)
    return fig


def _sorted_categories(cats: dict[str, None]) -> list[str]:
    return sorted(
        cats,
        key=lambda c: (
            _CATEGORY_ORDER.index(c) if c in _CATEGORY_ORDER else len(_CATEGORY_ORDER),
            c,
        ),
    )


def memory_figure(
    data: dict[str, Any],
    *,
    theme: str | Palette | None = None,
    wide: bool = False,
    title: str | None = None,
) -> Figure:
    """The memory map: each buffer a rectangle [first, last] x [offset, offset + size]; the arena
    size (peak) and the lower bound as horizontal lines; the peak instruction as a vertical one.
    Aliases (concat slices, accumulation targets: `alias_of`) are hatched outlines inside the
    buffer whose bytes they share."""
    pal = theme if isinstance(theme, Palette) else load_palette(theme)
    fig, ax = _new_figure(pal, wide, 2.8 if not wide else 3.0)
    every = sorted(data["buffers"], key=lambda b: (b["first"], b["offset"], b["name"]))
    bufs = [b for b in every if not b.get("alias_of")]
    aliases = [b for b in every if b.get("alias_of")]
    peak, lb = data["peak_bytes"], data["lower_bound_bytes"]
    top = max([peak, lb, 1] + [b["offset"] + b["size"] for b in bufs])
    div, unit = _byte_axis(ax.yaxis, top)
    cats: dict[str, None] = {}
    live = set(data.get("live_at_peak", []))
    for k, b in enumerate(bufs):
        cat = b.get("category", "other")
        cats.setdefault(cat, None)
        ax.add_patch(
            Rectangle(
                (b["first"] - 0.45, b["offset"] / div),
                b["last"] - b["first"] + 0.9,
                b["size"] / div,
                linewidth=0.7 if b["name"] in live else 0.3,
                edgecolor=pal.peak if b["name"] in live else pal.edge,
                **_buffer_style(pal, cat, k),
            )
        )
    for b in aliases:
        ax.add_patch(
            Rectangle(
                (b["first"] - 0.45, b["offset"] / div),
                b["last"] - b["first"] + 0.9,
                b["size"] / div,
                fill=False,
                hatch="////",
                linewidth=0.3,
                edgecolor=pal.edge,
            )
        )
    handles: list[Any] = [
        ax.axhline(
            peak / div, color=pal.peak, lw=0.9, ls="-", label=f"peak (arena) {_fmt_bytes(peak)}"
        ),
        ax.axhline(
            lb / div,
            color=pal.lower_bound,
            lw=0.9,
            ls=(0, (1, 1.2)),
            label=f"lower bound {_fmt_bytes(lb)}",
        ),
    ]
    peak_at = data.get("peak_instruction", -1)
    if peak_at is not None and peak_at >= 0:
        handles.append(
            ax.axvline(
                peak_at, color=pal.peak, lw=0.6, ls="--", label=f"peak instruction #{peak_at}"
            )
        )
    n = max(data.get("n_instructions", 0), max((b["last"] + 1 for b in bufs), default=1))
    ax.set_xlim(-1, n)
    ax.set_ylim(0, top / div * 1.04)
    ax.set_xlabel("instruction index")
    ax.set_ylabel(f"offset in activations ({unit})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
    handles += [
        Patch(edgecolor=pal.edge, linewidth=0.3, label=c, **_category_color(pal, c))
        for c in _sorted_categories(cats)
    ]
    if aliases:
        handles.append(
            Patch(fill=False, hatch="////", edgecolor=pal.edge, linewidth=0.3, label="alias")
        )
    _legend(ax, pal, handles, ncol=3 if wide else 2)
    _finish(fig, ax, pal, title)
    return fig


FIGURES = {"schedule": schedule_figure, "lifetimes": lifetimes_figure, "memory": memory_figure}


def figure_bytes(fig: Figure, fmt: str, *, dpi: int = PNG_DPI) -> bytes:
    """Render a figure to svg/pdf/png bytes, deterministically."""
    import matplotlib

    if fmt not in FIGURE_FORMATS:
        raise ValueError(fmt)
    metadata: dict[str, Any] = {
        "svg": {"Date": None, "Creator": None},
        "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
        "png": {"Software": None},
    }[fmt]
    buf = io.BytesIO()
    with matplotlib.rc_context(
        {"svg.hashsalt": "glowviz", "svg.fonttype": "path", "pdf.fonttype": 42}
    ):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=metadata, facecolor=fig.get_facecolor())
    return buf.getvalue()


__all__ = [
    "FIGURES",
    "FIGURE_FORMATS",
    "figure_bytes",
    "lifetimes_figure",
    "memory_figure",
    "schedule_figure",
]
