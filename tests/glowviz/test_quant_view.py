"""The IDE's Quant view driven with Pilot on a quantized LeNet: per-node SQNR table coloured by
band, first node under the threshold, the histogram with range/scale/offset, the neighbourhood
coloured by SQNR, and the what-if (mark a node float, the output SQNR is recomputed); and the
session data it draws (glowviz.session.quant) against compiler.quantize's own report."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from ide_helpers import ROOT, make_fake_session, run_async, settle, until
from pilot_helpers import ide
from textual.widgets import DataTable, Static

from compiler.graph.types import ElemKind
from compiler.pipeline import CompileOptions
from compiler.quantization import QuantizeOptions
from compiler.quantize import model_input_types, output_sqnr, profile_model, random_samples
from glowviz.app import GlowvizApp
from glowviz.screens.commands import entries
from glowviz.screens.main import MainScreen
from glowviz.session import CompileSession
from glowviz.session.quant import FLOAT_BAND, band
from glowviz.widgets.quant_view import histogram_text

LENET = str(ROOT / "sample_models" / "lenet.onnx")
SIZE = (180, 50)


@pytest.fixture(scope="module")
def lenet_options() -> CompileOptions:
    samples = random_samples(model_input_types(LENET), 4, seed=3)
    profile = profile_model(LENET, samples, executor="graph")
    return CompileOptions(quantize=QuantizeOptions(profile))


@contextlib.asynccontextmanager
async def _quant_ide(
    session: CompileSession, analysed: bool = True, size: tuple[int, int] = SIZE
) -> AsyncIterator[tuple[GlowvizApp, Any, MainScreen, Any]]:
    """The IDE on `session` with the Quant view shown (and, if `analysed`, its analysis drawn):
    yields the app, the pilot, the main screen and the view."""
    async with ide(GlowvizApp(session=session), size) as (app, pilot, main):
        view = main.view("quant")
        await pilot.press("8")
        await pilot.pause()
        await settle(app, pilot)
        if analysed:
            await until(pilot, lambda: view.analysis is not None)
            await settle(app, pilot)
        yield app, pilot, main, view


def _plain(w: Static) -> str:
    return str(w.render())


@run_async
async def test_quant_view_table_histogram_graph_and_what_if(lenet_options) -> None:
    session = CompileSession(LENET, lenet_options)
    async with _quant_ide(session) as (app, pilot, main, view):
        report = session.quant().report()
        table = view.query_one("#quant-table", DataTable)
        assert table.row_count == len(report.nodes) > 3
        # every quantized node of the report is in the table, in graph order, with its SQNRs
        for k, n in enumerate(report.nodes):
            row = table.get_row_at(k)
            assert str(row[0]) == n.node and row[4] == n.op and row[6] == n.value
            assert str(row[2]) == (f"{n.propagated:.1f}" if math.isfinite(n.propagated) else "inf")
            # coloured by its band
            assert row[0].style == view.band_styles()[band(n.propagated, report.threshold)]
        info = _plain(view.query_one("#quant-info", Static))
        out_db = f"{report.output_sqnr:.1f} dB"
        assert out_db in info and "first under" in info
        # the selected (first) node's histogram: its value's range, scale and offset
        first = report.nodes[0]
        hist = _plain(view.query_one("#quant-hist", Static))
        assert first.value in hist and f"scale {first.scale:.4g}" in hist
        assert f"offset {first.offset}" in hist
        # its neighbourhood in the quantized graph, drawn (graphviz)
        await until(pilot, lambda: first.node in _plain(view.query_one("#quant-graph", Static)))

        # what-if: mark the selected node float; the output SQNR is recomputed in a worker
        table.focus()
        await pilot.press("f")
        await pilot.pause()
        await settle(app, pilot)
        await until(pilot, lambda: view.what_if_sqnr is not None)
        assert view.what_if == frozenset({first.value})
        expected = output_sqnr(
            LENET,
            QuantizeOptions(lenet_options.quantize.profile, keep_float=frozenset({first.value})),
            session.quant().samples,
        )
        assert view.what_if_sqnr == pytest.approx(expected)
        assert f"{expected:.1f} dB" in _plain(view.query_one("#quant-whatif", Static))
        assert session.quant().node_bands(view.what_if)[first.node] == FLOAT_BAND
        assert "float?" in str(table.get_row_at(0)[3])
        # the palette offers the view's actions; r resets
        palette = {text for text, _, _ in entries(app)}
        assert "Quant: mark the selected node float (what-if)" in palette
        await pilot.press("r")
        await settle(app, pilot)
        assert view.what_if == frozenset()
        assert "no node marked float" in _plain(view.query_one("#quant-whatif", Static))

        # The Memory view of the int8 model: int8 buffers at their real size (1 byte an element)
        await pilot.press("6")
        await settle(app, pilot)
        shown = main.view("memory").report
        assert shown is not None
        allocs = {i.name: i.type for i in session.result.lir.code if i.is_alloc}
        int8 = [b for b in shown.buffers if b.name in allocs and allocs[b.name].elem is ElemKind.I8]
        assert len(int8) >= len(shown.buffers) // 2
        for b in int8:
            assert b.size == -(-allocs[b.name].numel // 64) * 64, b.name
        float_session = CompileSession(LENET)
        float_session.compile()
        float_report = float_session.memory_report()
        assert float_report is not None and shown.peak_bytes * 3 <= float_report.peak_bytes


@run_async
async def test_quant_view_jumps_to_the_first_node_under_the_threshold(lenet_options) -> None:
    session = CompileSession(LENET, lenet_options)
    async with _quant_ide(session) as (app, pilot, main, view):
        report = session.quant().report()
        # "+" raises the threshold by 5 dB: past the best node, every node is under it
        best = max(n.propagated for n in report.nodes if math.isfinite(n.propagated))
        view.query_one("#quant-table", DataTable).focus()
        while report.threshold <= best:
            await pilot.press("plus")
        await settle(app, pilot)
        assert f"threshold {report.threshold:g} dB" in _plain(view.query_one("#quant-info", Static))
        await pilot.press("end", "j")
        await pilot.pause()
        table = view.query_one("#quant-table", DataTable)
        assert table.cursor_row == 0
        assert "first < threshold" in str(table.get_row_at(0)[3])


@run_async
async def test_quant_view_without_quantize_says_how() -> None:
    async with _quant_ide(make_fake_session(), analysed=False) as (_, _, _, view):
        assert "--quantize PROFILE.json" in _plain(view.query_one("#quant-info", Static))


def test_histogram_text_marks_the_int8_range() -> None:
    from glowviz.session.quant import Histogram

    counts = np.zeros(64)
    counts[10:50] = 5.0
    h = Histogram("x", counts, -2.0, 2.0, -1.4, 1.1, 1.0 / 64, -10)
    text = histogram_text(h, "green", width=40).plain
    lines = text.splitlines()
    assert all(len(line) <= 40 for line in lines[:-3])  # the drawing fits the width
    axis = lines[-5]
    assert axis.count("┣") == 1 and axis.count("┫") == 1
    assert "scale 0.01562" in lines[-1] and "offset -10" in lines[-1]
    assert f"int8 range [{h.qlo:.4g}, {h.qhi:.4g}]" in lines[-2]
    assert h.clipped == pytest.approx(0.0)


@run_async
async def test_quant_view_at_100x30_shows_the_sqnr_and_an_unbroken_drawing(lenet_options):
    """At 100x30 the side panel's fixed 44 columns left the node table 16: the names were cut
    and no SQNR column was in sight; and the neighbourhood drawing wrapped, its boxes broken
    across lines."""
    session = CompileSession(LENET, lenet_options)
    async with _quant_ide(session, size=(100, 30)) as (app, pilot, main, view):
        table = view.query_one("#quant-table", DataTable)
        cols = list(table.columns.values())
        # the node and local-dB columns fit in the table
        assert sum(c.get_render_width(table) for c in cols[:2]) <= table.size.width
        await until(pilot, lambda: "Conv" in _plain(view.query_one("#quant-graph", Static)))
        graph = view.query_one("#quant-graph", Static)
        drawing = _plain(graph).splitlines()
        assert graph.size.width >= max(len(line.rstrip()) for line in drawing)  # not wrapped
