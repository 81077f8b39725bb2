"""Paper figures of the low-level views with matplotlib (Agg, never a display): the schedule's
live bytes, buffer lifetimes and the memory map (offset over instruction index).

Inputs are the dicts of `json_export` (`glowviz.export.schedule/1`, and the memory report
`glowviz.memory/1` for lifetimes and memory). The three share one x axis -- the instruction
index of the low-level program, from 0 to its length -- so they line up when stacked, and one
vocabulary: the *peak* is the arena's size (the allocator's result, reached at the report's
`peak_instruction`), the *lower bound* the most bytes live at once; sizes are written as the
text report writes them (`human_bytes`), so a legend says 9.95 MiB where the report does.

Sized for a column (`width` 3.3 in by default; 7 in for two columns) with no text under
`MIN_FONT_PT`; the legend sits above the plot, in as many rows as its entries need, and the
layout makes room for every label (a test checks every text's box lies inside the page).
Output is deterministic: fixed SVG hash salt, no dates in SVG/PDF metadata (SOURCE_DATE_EPOCH
sets the PDF's), no software stamp in PNG.
"""

from __future__ import annotations

import io
import math
from typing import Any, TypedDict, Unpack

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from compiler.graph.ops import CATEGORIES
from compiler.memory.report import human_bytes
from glowviz.exports.drawing import MIN_FONT_PT, WIDE_WIDTH_IN, parse_width
from glowviz.exports.palette import Palette, as_palette

FIGURE_FORMATS = ("svg", "pdf", "png")
PNG_DPI = 200

#: Up to this many buffers the lifetimes figure names every row (and grows taller); beyond, it
#: names the largest beside their bars.
NAMED_ROWS = 40
#: Category order in legends and of the hatch patterns: the op table's ("other" last).
_CATEGORY_ORDER = CATEGORIES


class _Style:
    """Font sizes of one figure width (all >= MIN_FONT_PT)."""

    def __init__(self, width_in: float) -> None:
        big = width_in >= 5.0
        self.tick = 6.5 if big else 5.8
        self.label = 7.5 if big else 6.5
        self.legend = 6.5 if big else 5.6
        self.note = 6.0 if big else 5.2
        self.title = 8.5 if big else 7.0
        assert min(self.tick, self.label, self.legend, self.note, self.title) >= MIN_FONT_PT


def _unit(max_bytes: float) -> tuple[float, str]:
    if max_bytes >= 1024 * 1024:
        return 1024.0 * 1024.0, "MiB"
    if max_bytes >= 1024:
        return 1024.0, "KiB"
    return 1.0, "B"


def _width(width: str | float | None, wide: bool) -> float:
    return WIDE_WIDTH_IN if width is None and wide else parse_width(width)


class FigureOptions(TypedDict, total=False):
    """What every chart figure takes: the theme (name or Palette), `wide` (two columns), a
    title, and an explicit width ('3.3in', '7in' or inches) that overrides `wide`."""

    theme: str | Palette | None
    wide: bool
    title: str | None
    width: str | float | None


def _options(o: FigureOptions) -> tuple[Palette, float, str | None]:
    """(palette, width in inches, title) of a figure's options."""
    return as_palette(o.get("theme")), _width(o.get("width"), o.get("wide", False)), o.get("title")


def _note_font(st: _Style, pal: Palette) -> dict[str, Any]:
    """The font of the figures' notes and buffer labels."""
    return {"fontsize": st.note, "color": pal.foreground, "family": pal.font}


def _leader(pal: Palette) -> dict[str, Any]:
    """The thin line from a buffer's label to its bar or rectangle."""
    return {"arrowstyle": "-", "color": pal.muted, "lw": 0.4, "shrinkA": 0, "shrinkB": 0}


def _renderer(fig: Figure) -> Any:
    """The Agg renderer every figure here is drawn with (`_new_figure` attaches the canvas)."""
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)
    return canvas.get_renderer()


def _new_figure(pal: Palette, width_in: float, height: float) -> tuple[Figure, Any, _Style]:
    st = _Style(width_in)
    fig = Figure(figsize=(width_in, height), facecolor=pal.background)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_facecolor(pal.background)
    for spine in ax.spines.values():
        spine.set_color(pal.muted)
        spine.set_linewidth(0.6)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.tick_params(colors=pal.foreground, labelsize=st.tick, width=0.6, length=2.5)
    ax.xaxis.label.set_color(pal.foreground)
    ax.yaxis.label.set_color(pal.foreground)
    return fig, ax, st


def _instruction_axis(ax: Any, n: int) -> None:
    """The x axis every low-level figure shares: instruction index 0..n-1 (same limits)."""
    ax.set_xlim(-0.5, max(n, 1) - 0.5)
    ax.set_xlabel("instruction index")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))


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


def _sorted_categories(cats: dict[str, None]) -> list[str]:
    return sorted(
        cats,
        key=lambda c: (
            _CATEGORY_ORDER.index(c) if c in _CATEGORY_ORDER else len(_CATEGORY_ORDER),
            c,
        ),
    )


def _category_handles(pal: Palette, cats: dict[str, None]) -> list[Any]:
    return [
        Patch(edgecolor=pal.edge, linewidth=0.3, label=c, **_buffer_style(pal, c, 0))
        for c in _sorted_categories(cats)
    ]


def _finish(
    fig: Figure, ax: Any, pal: Palette, st: _Style, title: str | None, handles: list[Any]
) -> None:
    """Title and legend above the plot, laid out so nothing is clipped: the legend takes as
    many columns as fit the page's width, the plot the room below it."""
    for lab in (ax.xaxis.label, ax.yaxis.label):
        lab.set_fontsize(st.label)
        lab.set_family(pal.font)
    for t in ax.get_xticklabels() + ax.get_yticklabels():
        t.set_family(pal.font)
    renderer = _renderer(fig)
    fig_w, fig_h = fig.bbox.width, fig.bbox.height
    pad = 3.0 * fig.dpi / 72  # 3 pt
    top = fig_h - pad
    if title:
        t = fig.text(
            pad / fig_w,
            top / fig_h,
            title,
            ha="left",
            va="top",
            fontsize=st.title,
            color=pal.foreground,
            family=pal.font,
        )
        top -= t.get_window_extent(renderer).height + pad
    legend = None
    if handles:
        for ncol in range(min(len(handles), 4), 0, -1):
            if legend is not None:
                legend.remove()
            legend = fig.legend(
                handles=handles,
                loc="upper left",
                bbox_to_anchor=(pad / fig_w, top / fig_h),
                ncol=ncol,
                frameon=False,
                labelcolor=pal.foreground,
                borderaxespad=0.0,
                borderpad=0.0,
                handlelength=1.6,
                handletextpad=0.4,
                labelspacing=0.25,
                columnspacing=0.9,
                prop={"family": pal.font, "size": st.legend},
            )
            if legend.get_window_extent(renderer).width <= fig_w - 2 * pad:
                break
        assert legend is not None
        top -= legend.get_window_extent(renderer).height + pad
    fig.tight_layout(pad=0.3, rect=(0.0, 0.0, 1.0, max(0.3, top / fig_h)))
    # tight_layout leaves a placeholder layout engine behind, and with any engine set every
    # savefig first lays the whole figure out once more (a third of its time) to no effect:
    # the plot is placed for good here. (None means "as rcParams say": a user's matplotlibrc
    # with figure.autolayout would install a tight layout engine again.)
    with matplotlib.rc_context(
        {"figure.autolayout": False, "figure.constrained_layout.use": False}
    ):
        fig.set_layout_engine(None)
    _keep_inside(fig, ax, top)


def _keep_inside(fig: Figure, ax: Any, top_px: float) -> None:
    """Shrink the plot until every text of the figure (axis labels, ticks, annotations) lies
    inside the page and under the legend: tight_layout alone misses by a few points.

    Each round measures with the renderer and does not draw: `get_tightbbox` brings the ticks,
    axis labels and title up to date itself, and an annotation's box places the annotation
    first, so the boxes are the ones a draw would leave (every figure of the sample models --
    each view, theme, width, many-buffer lifetimes with their leader labels -- is byte-identical
    with or without a draw per round, which took about a third of a figure's time)."""
    renderer = _renderer(fig)
    margin = 1.5 * fig.dpi / 72
    for _ in range(4):
        boxes = [
            t.get_window_extent(renderer)
            for t in ax.texts  # annotations; ticks and labels are in the tight box
            if t.get_visible() and t.get_text()
        ]
        boxes.append(ax.get_tightbbox(renderer))
        x0 = min(b.x0 for b in boxes)
        y0 = min(b.y0 for b in boxes)
        x1 = max(b.x1 for b in boxes)
        y1 = max(b.y1 for b in boxes)
        left = max(0.0, margin - x0)
        bottom = max(0.0, margin - y0)
        right = max(0.0, x1 - (fig.bbox.width - margin))
        over = max(0.0, y1 - top_px)
        if left == bottom == right == over == 0.0:
            return
        pos = ax.get_position()
        w, h = fig.bbox.width, fig.bbox.height
        ax.set_position(
            (
                pos.x0 + left / w,
                pos.y0 + bottom / h,
                max(0.05, pos.width - (left + right) / w),
                max(0.05, pos.height - (bottom + over) / h),
            )
        )


# ---------------------------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------------------------


def schedule_figure(data: dict[str, Any], **options: Unpack[FigureOptions]) -> Figure:
    """Live activation bytes at every instruction, one line per scheduler (each planned through
    the same low-level pipeline), with the planned arena (the peak) and the lower bound."""
    pal, width_in, title = _options(options)
    fig, ax, st = _new_figure(pal, width_in, 2.4 if width_in < 5 else 2.8)
    series = data["series"]
    curves = [s.get("instruction_live_bytes") or [] for s in series]
    planned = data.get("planned_peak_bytes") or 0
    lb = data.get("lower_bound_bytes") or 0
    top = max([max(c, default=0) for c in curves] + [planned, lb, 1])
    div, unit = _byte_axis(ax.yaxis, top)
    styles = ("-", "--", ":", "-.")
    handles: list[Any] = []
    for k, (s, curve) in enumerate(zip(series, curves)):
        if not curve:
            continue
        color = pal.series[k % len(pal.series)]
        used = " (used)" if k == 0 else ""
        (line,) = ax.step(
            range(len(curve)),
            [v / div for v in curve],
            where="mid",
            color=color,
            lw=1.1 if k == 0 else 0.9,
            ls=styles[k % len(styles)],
            label=f"{s['scheduler']}{used}: most live {human_bytes(max(curve))}",
            zorder=3 - k * 0.1,
        )
        handles.append(line)
    _peak_lines(ax, pal, planned, lb, div, handles)
    n = max(data.get("n_instructions") or 0, max((len(c) for c in curves), default=1))
    _instruction_axis(ax, n)
    at = data.get("peak_instruction", -1)
    if at is not None and at >= 0:
        handles.append(
            ax.axvline(at, color=pal.peak, lw=0.6, ls=(0, (3, 2)), label=f"peak at #{at}")
        )
    ax.set_ylabel(f"live activations ({unit})")
    ax.set_ylim(0, top / div * 1.06)
    ax.grid(True, axis="y", color=pal.muted, alpha=0.25, lw=0.4)
    _finish(fig, ax, pal, st, title, handles)
    return fig


def _peak_lines(ax: Any, pal: Palette, peak: int, lb: int, div: float, handles: list[Any]) -> None:
    """The arena (solid) and the lower bound (dashed, drawn over it, so it shows even when the
    two are equal: then the line alternates both colours and the legend says so)."""
    if peak:
        handles.append(
            ax.axhline(
                peak / div,
                color=pal.peak,
                lw=1.0,
                ls="-",
                zorder=4,
                label=f"peak (arena) {human_bytes(peak)}",
            )
        )
    if lb:
        equal = lb == peak
        handles.append(
            ax.axhline(
                lb / div,
                color=pal.lower_bound,
                lw=1.1,
                ls=(0, (2.0, 2.0)),
                zorder=5,
                label=("lower bound = peak" if equal else f"lower bound {human_bytes(lb)}"),
            )
        )


def lifetimes_figure(data: dict[str, Any], **options: Unpack[FigureOptions]) -> Figure:
    """One horizontal bar per activation buffer over [first, last]: colour by the category of
    the op that produced it, thickness by size; the largest buffers named whatever the count;
    the peak instruction marked and the buffers live there outlined."""
    pal, width_in, title = _options(options)
    bufs = sorted(data["buffers"], key=lambda b: (b["first"], b["last"], b["name"]))
    n_rows = len(bufs)
    named = n_rows <= NAMED_ROWS
    row_pt = _Style(width_in).tick + 1.6
    height = max(2.3, 1.5 + n_rows * row_pt / 72) if named else 4.2
    fig, ax, st = _new_figure(pal, width_in, height)
    live = set(data.get("live_at_peak", []))
    biggest = max((b["size"] for b in bufs), default=1) or 1
    cats: dict[str, None] = {}
    for row, b in enumerate(bufs):
        cat = b.get("category", "other")
        cats.setdefault(cat, None)
        h = 0.25 + 0.65 * math.sqrt(b["size"] / biggest)  # area-honest: sqrt of the size
        ax.add_patch(
            Rectangle(
                (b["first"] - 0.4, row - h / 2),
                b["last"] - b["first"] + 0.8,
                h,
                edgecolor=pal.peak if b["name"] in live else pal.edge,
                linewidth=0.9 if b["name"] in live else 0.3,
                **_buffer_style(pal, cat, row),
            )
        )
    n = max(data.get("n_instructions", 0), max((b["last"] + 1 for b in bufs), default=1))
    _instruction_axis(ax, n)
    ax.set_ylim(n_rows - 0.5 + 0.3, -0.5 - 0.3)
    handles: list[Any] = []
    peak_at = data.get("peak_instruction", -1)
    if peak_at is not None and peak_at >= 0:
        handles.append(
            ax.axvline(
                peak_at,
                color=pal.peak,
                lw=0.8,
                ls=(0, (3, 2)),
                label=f"peak at #{peak_at}: {human_bytes(data['peak_bytes'])} "
                f"(lower bound {human_bytes(data['lower_bound_bytes'])})",
            )
        )
    # Names: every row when they fit at a readable size, else the largest buffers beside
    # their bars (and the y axis counts rows).
    if named:
        ax.set_yticks(range(n_rows))
        ax.set_yticklabels([b["name"] for b in bufs], fontsize=st.tick)
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.set_ylabel("buffer (by first use)")
        top_k = 8 if width_in < 5 else 14
        order = sorted(range(n_rows), key=lambda r: (-bufs[r]["size"], r))[:top_k]
        # The largest buffers are often neighbours (a block's big outputs): labels on one side
        # are spread at least a text line apart, each tied to its bar by a leader line.
        # One line in rows, against a low estimate of the plot's height (the legend and the
        # axis take the rest): an overestimate only spreads them more.
        gap = (st.note + 1.5) * n_rows / (height * 72 * 0.55)
        for right in (True, False):
            rows = [r for r in sorted(order) if (bufs[r]["last"] < n * 0.62) == right]
            ys: list[float] = []
            for r in rows:
                ys.append(max(float(r), ys[-1] + gap) if ys else float(r))
            over = ys[-1] - (n_rows - 1) if ys else 0.0
            ys = [y - max(0.0, over) for y in ys]  # pushed past the last row: all move up
            for r, y in zip(rows, ys):
                b = bufs[r]
                x = b["last"] + 0.5 if right else b["first"] - 0.5
                ax.annotate(
                    f"{b['name']} {human_bytes(b['size'])}",
                    xy=(x, r),
                    xytext=(x + (1 if right else -1) * 0.03 * n, y),
                    textcoords="data",
                    ha="left" if right else "right",
                    va="center",
                    **_note_font(st, pal),
                    annotation_clip=False,
                    # legible where a label crosses other buffers' bars
                    bbox={"boxstyle": "square,pad=0.05", "fc": pal.background, "ec": "none"},
                    arrowprops=_leader(pal),
                )
        handles.append(
            Line2D([], [], color="none", label=f"{n_rows} buffers; the {len(order)} largest named")
        )
    ax.grid(True, axis="x", color=pal.muted, alpha=0.2, lw=0.4)
    handles.append(Patch(facecolor="none", edgecolor=pal.edge, lw=0.3, label="bar thickness: size"))
    handles += _category_handles(pal, cats)
    _finish(fig, ax, pal, st, title, handles)
    return fig


def memory_figure(data: dict[str, Any], **options: Unpack[FigureOptions]) -> Figure:
    """The memory map: each buffer a rectangle [first, last] x [offset, offset + size] (tiny
    ones drawn at a minimum height); the arena (peak) and the lower bound as horizontal lines;
    the instruction where the arena's top is reached as a vertical one; the buffers live there
    outlined and labelled with name and size. Aliases (concat slices, accumulation targets:
    `alias_of`) are hatched outlines inside the buffer whose bytes they share."""
    pal, width_in, title = _options(options)
    fig, ax, st = _new_figure(pal, width_in, 2.8 if width_in < 5 else 3.2)
    every = sorted(data["buffers"], key=lambda b: (b["first"], b["offset"], b["name"]))
    bufs = [b for b in every if not b.get("alias_of")]
    aliases = [b for b in every if b.get("alias_of")]
    peak, lb = data["peak_bytes"], data["lower_bound_bytes"]
    top = max([peak, lb, 1] + [b["offset"] + b["size"] for b in bufs])
    div, unit = _byte_axis(ax.yaxis, top)
    min_h = top / div * 0.008  # a tiny buffer stays visible (about a point at column size)
    cats: dict[str, None] = {}
    live = set(data.get("live_at_peak", []))
    for k, b in enumerate(bufs):
        cat = b.get("category", "other")
        cats.setdefault(cat, None)
        ax.add_patch(
            Rectangle(
                (b["first"] - 0.45, b["offset"] / div),
                b["last"] - b["first"] + 0.9,
                max(b["size"] / div, min_h),
                linewidth=0.8 if b["name"] in live else 0.3,
                edgecolor=pal.peak if b["name"] in live else pal.edge,
                zorder=2 if b["name"] in live else 1,
                **_buffer_style(pal, cat, k),
            )
        )
    for b in aliases:
        ax.add_patch(
            Rectangle(
                (b["first"] - 0.45, b["offset"] / div),
                b["last"] - b["first"] + 0.9,
                max(b["size"] / div, min_h),
                fill=False,
                hatch="////",
                linewidth=0.3,
                edgecolor=pal.edge,
            )
        )
    handles: list[Any] = []
    _peak_lines(ax, pal, peak, lb, div, handles)
    peak_at = data.get("peak_instruction", -1)
    n = max(data.get("n_instructions", 0), max((b["last"] + 1 for b in bufs), default=1))
    _instruction_axis(ax, n)
    if peak_at is not None and peak_at >= 0:
        handles.append(
            ax.axvline(peak_at, color=pal.peak, lw=0.6, ls=(0, (3, 2)), label=f"peak at #{peak_at}")
        )
        _label_live(ax, pal, st, data, bufs, live, peak_at, div, top, width_in)
    ax.set_ylim(0, top / div * 1.04)
    ax.set_ylabel(f"offset in activations ({unit})")
    handles += _category_handles(pal, cats)
    if aliases:
        handles.append(
            Patch(fill=False, hatch="////", edgecolor=pal.edge, linewidth=0.3, label="alias")
        )
    _finish(fig, ax, pal, st, title, handles)
    return fig


def _label_live(
    ax: Any,
    pal: Palette,
    st: _Style,
    data: dict[str, Any],
    bufs: list[dict[str, Any]],
    live: set[str],
    at: int,
    div: float,
    top: float,
    width_in: float,
) -> None:
    """Name and size of the buffers live at the peak, in a column right of the plot, each
    joined to its block; labels are spread so they never overlap."""
    here = sorted(
        (b for b in bufs if b["name"] in live), key=lambda b: -(b["offset"] + b["size"] / 2)
    )
    limit = 7 if width_in < 5 else 12
    shown = sorted(here, key=lambda b: -b["size"])[:limit]
    shown.sort(key=lambda b: -(b["offset"] + b["size"] / 2))
    if not shown:
        return
    ymax = top / div * 1.04
    # Label positions in data units: at the block's middle, pushed apart to one line each.
    gap = ymax * (st.note + 1.5) / 72 / max(0.8, ax.get_position().height * 2.4)
    ys = [(b["offset"] + b["size"] / 2) / div for b in shown]
    placed: list[float] = []
    for y in ys:
        y = min(y, ymax - gap / 2) if not placed else min(y, placed[-1] - gap)
        placed.append(y)
    low = gap / 2
    if placed[-1] < low:  # pushed below the axis: shift the column up
        shift = low - placed[-1]
        placed = [p + shift for p in placed]
    more = len(here) - len(shown)
    for b, y in zip(shown, placed):
        ax.annotate(
            f"{b['name']} {human_bytes(b['size'])}",
            xy=(at, (b["offset"] + b["size"] / 2) / div),
            xycoords="data",
            xytext=(1.02, y / ymax),
            textcoords="axes fraction",
            ha="left",
            va="center",
            **_note_font(st, pal),
            annotation_clip=False,
            arrowprops=_leader(pal),
        )
    if more > 0:
        ax.annotate(
            f"+{more} more live",
            xy=(1.02, 0.0),
            xycoords="axes fraction",
            ha="left",
            va="bottom",
            **_note_font(st, pal),
        )


FIGURES = {"schedule": schedule_figure, "lifetimes": lifetimes_figure, "memory": memory_figure}


def figure_bytes(fig: Figure, fmt: str, *, dpi: int = PNG_DPI) -> bytes:
    """Render a figure to svg/pdf/png bytes, deterministically."""
    from glowviz.exports.render import source_date

    if fmt not in FIGURE_FORMATS:
        raise ValueError(fmt)
    pdf_date: Any = None
    date = source_date()
    if date is not None:
        import datetime
        import os

        pdf_date = datetime.datetime.fromtimestamp(
            int(os.environ["SOURCE_DATE_EPOCH"]), tz=datetime.UTC
        )
    metadata: dict[str, Any] = {
        "svg": {"Date": None, "Creator": None},
        "pdf": {"CreationDate": pdf_date, "ModDate": None, "Creator": None, "Producer": None},
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
