"""Quant view: how much precision int8 quantization kept, node by node (issue item 5).

A table of the quantized nodes in graph order with their local SQNR (the node alone, fed the
float model's values) and propagated SQNR (the quantized model as it runs), coloured by band;
the first node under the threshold marked; the selected node's neighbourhood in the quantized
graph coloured by the same bands; the histogram of its float value from the profile with the
range its scale and offset cover; and a what-if: `f` marks the node float and the end-to-end
SQNR with that choice is computed (in a worker) without leaving the view or recompiling.
Data: glowviz.session.quant (the session's `quant()`).
"""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static

from glowviz import keymap, themes
from glowviz.session import CompileSession
from glowviz.session.quant import FLOAT_BAND, Histogram, QuantAnalysis, band
from glowviz.widgets.graph_layout import LayoutError, render_neighbourhood
from glowviz.widgets.stage_view import InfoLine, StageView

#: Histogram drawing size (cells).
HIST_WIDTH, HIST_HEIGHT = 56, 6
_BLOCKS = " ▁▂▃▄▅▆▇█"


def _db(x: float) -> str:
    if math.isnan(x):
        return "n/a"
    return f"{x:.1f}" if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def histogram_text(h: Histogram, colour: str, width: int = HIST_WIDTH) -> Text:
    """The profile histogram as block characters (square-root heights, so thin tails show),
    the int8 grid's range marked under it, and the numbers."""
    lo, hi = min(h.lo, h.qlo), max(h.hi, h.qhi)
    if not hi > lo:
        hi = lo + 1.0
    edges = np.linspace(h.lo, h.hi, h.counts.size + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    cols = np.clip(((mids - lo) / (hi - lo) * width).astype(int), 0, width - 1)
    folded = np.bincount(cols, weights=h.counts, minlength=width)
    heights = np.sqrt(folded / folded.max()) if folded.max() > 0 else folded
    levels = np.round(heights * HIST_HEIGHT * (len(_BLOCKS) - 1)).astype(int)
    out = Text()
    for row in range(HIST_HEIGHT - 1, -1, -1):
        for lv in levels:
            k = int(np.clip(lv - row * (len(_BLOCKS) - 1), 0, len(_BLOCKS) - 1))
            out.append(_BLOCKS[k], style=colour)
        out.append("\n")
    q0 = int(np.clip((h.qlo - lo) / (hi - lo) * width, 0, width - 1))
    q1 = int(np.clip((h.qhi - lo) / (hi - lo) * width, 0, width - 1))
    axis = ["─"] * width
    for k in range(q0, q1 + 1):
        axis[k] = "━"
    axis[q0], axis[q1] = "┣", "┫"
    out.append("".join(axis) + "\n", style="bold")
    left, right = f"{lo:.4g}", f"{hi:.4g}"
    out.append(left + " " * max(1, width - len(left) - len(right)) + right + "\n", style="dim")
    out.append_text(
        Text.assemble(
            ("values ", "dim"),
            f"[{h.vmin:.4g}, {h.vmax:.4g}]\n",
            ("int8 range ", "dim"),
            (f"[{h.qlo:.4g}, {h.qhi:.4g}]", "bold"),
            ("  clipped ", "dim"),
            f"{100 * h.clipped:.2f}%\n",
            ("scale ", "dim"),
            f"{h.scale:.4g}",
            ("  offset ", "dim"),
            str(h.offset),
        )
    )
    return out


class QuantView(StageView):
    BINDINGS = keymap.bindings("QuantView")

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.analysis: QuantAnalysis | None = None
        #: Float-graph values marked float in the what-if (NodeSQNR.value).
        self.what_if: frozenset[str] = frozenset()
        self.what_if_sqnr: float | None = None
        self.selected: str | None = None

    def reset(self) -> None:
        """A new compile starts: the analysis, the what-if and the table belong to the old one
        (the view measures the whole quantized model, whichever stage is selected)."""
        super().reset()
        self.analysis, self.what_if, self.what_if_sqnr, self.selected = (
            None,
            frozenset(),
            None,
            None,
        )
        if self.built:
            self.query_one("#quant-table", DataTable).clear(columns=True)
            for wid in ("#quant-info", "#quant-whatif", "#quant-hist", "#quant-graph"):
                self.query_one(wid, Static).update("")

    def focus_target(self) -> Widget | None:
        return self.query_one("#quant-table", DataTable)

    def compose(self) -> ComposeResult:
        yield InfoLine("", id="quant-info")
        yield Static("", id="quant-whatif")
        with Horizontal():
            yield DataTable(id="quant-table", cursor_type="row")
            with Vertical(id="quant-side"):
                yield Static("", id="quant-hist")
                with VerticalScroll(id="quant-graph-scroll"):
                    yield Static("", id="quant-graph")

    # -- colours ------------------------------------------------------------------------------
    def band_styles(self) -> dict[str, str]:
        """Styles of the SQNR bands from the theme's semantic colours."""
        t = self.app.current_theme
        return {
            "sqnr-good": t.success or "green",
            "sqnr-fair": t.warning or "yellow",
            "sqnr-poor": t.error or "red",
            "sqnr-bad": f"bold {t.error or 'red'}",
            FLOAT_BAND: t.accent or "cyan",
        }

    # -- showing ------------------------------------------------------------------------------
    def show(self, session: CompileSession, index: int | None = None) -> None:
        info = self.query_one("#quant-info", Static)
        if session is not self.session:
            self.session, self.what_if, self.what_if_sqnr = session, frozenset(), None
            self.analysis = None
            self.query_one("#quant-table", DataTable).clear(columns=True)
        if not session.quantized:
            info.update(
                Text(
                    "not quantized: open the model with --quantize PROFILE.json "
                    "(from `glowviz profile MODEL --random 32 -o PROFILE.json`) to see the "
                    "SQNR of every quantized node",
                    style="bold yellow",
                )
            )
            return
        if session.error is not None or session.result is None:
            info.update(Text("the model did not compile: see the error pane", style="bold red"))
            return
        if self.analysis is not None and self.analysis.has_report:
            return
        info.update(Text("measuring SQNR against the float model…", style="dim"))
        self._analyse(session)

    @work(thread=True, exclusive=True, group="quant-report")
    def _analyse(self, session: CompileSession) -> None:
        try:
            analysis = session.quant()
            assert analysis is not None
            analysis.report()
        except Exception as e:  # noqa: BLE001 - the view shows the failure, the IDE keeps going
            msg = Text(f"quantization report failed: {type(e).__name__}: {e}", style="bold red")
            self.app.call_from_thread(self.query_one("#quant-info", Static).update, msg)
            return
        self.app.call_from_thread(self._fill, session, analysis)

    def _fill(self, session: CompileSession, analysis: QuantAnalysis) -> None:
        if session is not self.session:
            return
        self.analysis = analysis
        report = analysis.report()
        styles = self.band_styles()
        bands = analysis.node_bands(self.what_if)
        t = self.query_one("#quant-table", DataTable)
        t.clear(columns=True)
        # The SQNR columns first after the name: they are what the view is for.
        for key, label in (
            ("node", "node"),
            ("local", "local dB"),
            ("prop", "propag. dB"),
            ("mark", ""),
            ("op", "op"),
            ("params", "scale / offset"),
            ("value", "float value"),
        ):
            t.add_column(label, key=key)
        first = report.first_below
        for n in report.nodes:
            style = styles[bands[n.node]]
            mark = "float?" if n.value in self.what_if else ""
            if first is not None and n.node == first.node:
                mark = (mark + " ◀ first < threshold").strip()
            t.add_row(
                Text(n.node, style=style),
                Text(_db(n.local), style=styles[band(n.local, analysis.threshold)]),
                Text(_db(n.propagated), style=style),
                Text(mark, style="bold"),
                n.op,
                f"{n.scale:.4g} / {n.offset}",
                n.value,
                key=n.node,
            )
        self._info()
        if report.nodes:
            names = [n.node for n in report.nodes]
            row = names.index(self.selected) if self.selected in names else 0
            t.move_cursor(row=row)
            self._select(names[row])

    def _info(self) -> None:
        if self.analysis is None:
            return
        report = self.analysis.report()
        first = report.first_below
        outs = ", ".join(f"{k} {_db(v)} dB" for k, v in report.outputs.items())
        self.query_one("#quant-info", Static).update(
            Text.assemble(
                ("int8 SQNR ", "bold"),
                f"outputs: {outs}",
                f" │ {len(report.nodes)} quantized nodes, {report.samples} samples",
                f" │ threshold {report.threshold:g} dB, first under: ",
                (first.node if first else "none", "bold red" if first else "bold"),
                " │ ",
                ("f: mark float  r: reset  j: first under  +/-: threshold", "dim"),
            )
        )
        w = self.query_one("#quant-whatif", Static)
        if not self.what_if:
            w.update(Text("what-if: no node marked float", style="dim"))
        elif self.what_if_sqnr is None:
            w.update(Text(f"what-if: {len(self.what_if)} marked float… computing", style="dim"))
        else:
            w.update(
                Text.assemble(
                    ("what-if: ", "bold"),
                    f"{', '.join(sorted(self.what_if))} in float -> output ",
                    (f"{_db(self.what_if_sqnr)} dB", "bold"),
                    f" (all quantized: {_db(report.output_sqnr)} dB)",
                )
            )

    # -- selection, histogram, neighbourhood --------------------------------------------------
    @on(DataTable.RowHighlighted, "#quant-table")
    def _highlight(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        key = event.row_key.value if event.row_key is not None else None
        if key and key != self.selected:
            self._select(key)

    def _select(self, name: str) -> None:
        self.selected = name
        if self.analysis is None or self.session is None:
            return
        n = self.analysis.node(name)
        hist = self.query_one("#quant-hist", Static)
        h = self.analysis.histogram(n) if n is not None else None
        if n is None or h is None:
            hist.update(Text(f"{name}: no profile of its float value", style="dim"))
        else:
            colour = self.band_styles()[self.analysis.node_bands(self.what_if)[name]]
            head = Text.assemble(
                (f"{n.value}", "bold"), f"  ({n.float_op} -> {n.op})  ", ("profile:", "dim"), "\n"
            )
            width = max(24, min(HIST_WIDTH, (hist.size.width or HIST_WIDTH) - 2))
            hist.update(head + histogram_text(h, colour, width))
        self._layout(name)

    def quant_stage(self) -> int | None:
        """The session's last graph stage of the quantize stage (the quantized graph)."""
        if self.session is None:
            return None
        idx = [i for i, r in enumerate(self.session.stages) if r.stage == "quantize"]
        return idx[-1] if idx else None

    def _layout(self, name: str) -> None:
        i = self.quant_stage()
        if i is None or self.session is None or self.analysis is None:
            return
        styles = {**themes.theme(self.app.theme).ui_categories, **self.band_styles()}
        self._layout_worker(self.session, i, name, self.analysis.node_bands(self.what_if), styles)

    @work(thread=True, exclusive=True, group="quant-layout")
    def _layout_worker(
        self,
        session: CompileSession,
        index: int,
        name: str,
        bands: dict[str, str],
        styles: dict[str, str],
    ) -> None:
        nodes, edges = session.neighbourhood(index, name, 2)
        nodes = [{**n, "kind": bands.get(n["name"], n["kind"])} for n in nodes]
        try:
            text = render_neighbourhood(name, nodes, edges, styles)
        except LayoutError as e:
            text = Text(str(e), style="bold red")
        except Exception as e:  # noqa: BLE001 - layout trouble must not kill the view
            text = Text(f"layout failed: {type(e).__name__}: {e}", style="red")
        self.app.call_from_thread(self._set_layout, name, text)

    def _set_layout(self, name: str, text: Text) -> None:
        if name == self.selected:
            text.no_wrap = True
            text.overflow = "crop"
            self.query_one("#quant-graph", Static).update(text)

    # -- what-if ------------------------------------------------------------------------------
    def action_toggle_float(self) -> None:
        if self.analysis is None or self.selected is None:
            return
        n = self.analysis.node(self.selected)
        if n is None:
            return
        self.set_what_if(self.what_if ^ {n.value})

    def action_reset_float(self) -> None:
        self.set_what_if(frozenset())

    def set_what_if(self, marked: frozenset[str]) -> None:
        if self.analysis is None or self.session is None:
            return
        self.what_if, self.what_if_sqnr = marked, None
        self._fill(self.session, self.analysis)
        if marked:
            self._what_if_worker(self.analysis, marked)

    @work(thread=True, exclusive=True, group="quant-what-if")
    def _what_if_worker(self, analysis: QuantAnalysis, marked: frozenset[str]) -> None:
        db = analysis.what_if(marked)
        self.app.call_from_thread(self._what_if_done, marked, db)

    def _what_if_done(self, marked: frozenset[str], db: float) -> None:
        if marked == self.what_if:
            self.what_if_sqnr = db
            self._info()

    def action_threshold(self, delta: float) -> None:
        if self.analysis is None or self.session is None:
            return
        self.analysis.set_threshold(self.analysis.threshold + delta)
        self._fill(self.session, self.analysis)

    def action_first_below(self) -> None:
        if self.analysis is None:
            return
        first = self.analysis.report().first_below
        if first is None:
            self.notify("every node is above the threshold")
            return
        names = [n.node for n in self.analysis.report().nodes]
        t = self.query_one("#quant-table", DataTable)
        t.move_cursor(row=names.index(first.node))
        t.focus()


__all__ = ["QuantView", "histogram_text"]
