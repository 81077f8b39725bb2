"""The IDE's second pass (issue 13), driven with Pilot on the fake pipeline: every view follows
the selected stage, the memory timeline across passes, rewrite stepping, the whole graph, the
memory map, the export dialog, the debugger's tolerance and slice, the bugs found by trying it,
and 100x30 as a first-class size. Each test failed on the IDE before the second pass."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_pipeline import fake_compile
from ide_helpers import ROOT, make_fake_session, ready, run_async, run_test, settle, until
from pilot_helpers import ide, main_screen, open_debugger, show
from textual.widgets import DataTable, Input, TabbedContent

from glowviz.app import GlowvizApp
from glowviz.session import CompileSession
from glowviz.widgets.virtual_table import Anchored

SIZE = (160, 50)


def _plain(widget) -> str:
    """The text a Static shows, whatever renderable it holds."""
    import io

    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.render()._renderable)
    return console.export_text()


# -- item 1: every view follows the selected stage ---------------------------------------------
@run_async
async def test_memory_lifetimes_and_schedule_follow_the_stage():
    async with ide() as (app, pilot, main):
        session = app.session
        mem = await show(app, pilot, 1, "memory")
        await until(pilot, lambda: mem.report is not None and mem.index == 1)
        # stage 1 (after fold-batchnorm, relu not yet fused) is planned from its own graph:
        # relu2 still has its own buffer, which the final plan does not
        names1 = {b.name for b in mem.report.buffers}
        assert mem.report == session.memory_report(1)
        assert "conv2_res" in names1 and "conv2_relu_res" not in names1
        assert "stage 1" in str(main.query_one("#memory-figures").render())
        main.goto_stage(6)
        await settle(app, pilot)
        await until(pilot, lambda: mem.index == 6 and mem.report is not None)
        assert mem.report.peak_bytes == 2048  # the compile's (fake) plan
        assert {b.name for b in mem.report.buffers} != names1
        await pilot.press("5")
        await settle(app, pilot)
        lt = main.view("lifetimes")
        assert lt.index == 6 and "stage 6" in str(main.query_one("#lifetimes-info").render())
        main.goto_stage(1)
        await settle(app, pilot)
        await until(pilot, lambda: lt.index == 1)
        assert {b.name for b in lt.buffers} == names1
        # before IRGen the Schedule view shows the graph's live bytes in program order
        await pilot.press("4")
        await settle(app, pilot)
        sv = main.view("schedule")
        await until(pilot, lambda: sv.index == 1 and sv.schedules)
        assert sv.schedules[0].kind == "program order"
        assert "before IRGen" in str(main.query_one("#schedule-info").render())


@run_async
async def test_memory_timeline_across_passes_jumps_to_a_pass():
    from glowviz.exports.per_pass import per_pass_memory

    async with ide() as (app, pilot, main):
        mem = await show(app, pilot, 6, "memory")
        await until(pilot, lambda: mem.timeline_rows is not None)
        # the same series `glowviz mem --per-pass` prints
        rows = per_pass_memory(app.session)
        assert [(r["index"], r["peak_bytes"]) for r in mem.timeline_rows] == [
            (r["index"], r["peak_bytes"]) for r in rows
        ]
        await pilot.press("t")
        await pilot.pause()
        tl = main.query_one("#memory-timeline")
        assert app.focused is tl
        await pilot.press("home", "enter")
        await settle(app, pilot)
        assert main.index == rows[0]["index"]
        await until(pilot, lambda: mem.index == rows[0]["index"])


@run_async
async def test_memory_header_and_timeline_name_their_two_measures():
    """A graph stage's plan (the whole low-level pipeline) and its timeline point (IRGen in
    topological order, as `mem --per-pass` measures it) differ: 2 KiB against 3 KiB on the fake
    pipeline. Before, the header said "peak 2.0 KiB" and the timeline "peak 3.0 KiB" for the
    same stage with nothing telling them apart."""
    async with ide() as (app, pilot, main):
        mem = await show(app, pilot, 1, "memory")
        await until(pilot, lambda: mem.timeline_rows is not None and mem.report is not None)
        await settle(app, pilot)
        session = app.session
        assert mem.report.peak_bytes == session.memory_report(1).peak_bytes == 2048
        assert mem.timeline_row()["peak_bytes"] == session.stage_memory(1).peak_bytes == 3072
        header = mem.header_text()
        assert "whole low-level pipeline" in header and "peak 2.0 KiB" in header
        assert "per-pass timeline: 3.0 KiB here (topological order + IRGen only" in header
        caption = str(main.query_one("#memory-timeline").render()).splitlines()[-1]
        assert "per-pass peak 3.0 KiB" in caption
        # where both measure the same plan, no second figure
        main.goto_stage(6)
        await settle(app, pilot)
        await until(pilot, lambda: mem.index == 6 and mem.report is not None)
        assert mem.timeline_row()["peak_bytes"] == mem.report.peak_bytes
        assert "per-pass timeline" not in mem.header_text()


# -- item 2: each rewrite is a step ------------------------------------------------------------
@run_async
async def test_rewrites_step_and_inline_changes():
    async with ide() as (app, pilot, main):
        view = await show(app, pilot, 3, "diff")  # fuse-activations
        assert view.rewrites, "the pass's rewrites are listed"
        head = str(main.query_one("#diff-rewrite").render())
        assert "consumed" in head and "conv2" in head and "conv2_relu" in head
        # the provenance summary comes before the IR lines
        assert "conv2 + relu2 -> conv2_relu" in view.current.provenance[0]
        # the attribute the pass added is inside a changed line, highlighted
        table = view.query_one("#diff-table")
        texts = [c.text if isinstance(c, Anchored) else c for row in table.rows for c in row]
        cells = [c for c in texts if 'activation = "relu"' in str(c)]
        assert cells and any(getattr(c, "spans", None) for c in cells)
        # left/right move between rewrites, up/down between passes
        n = len(view.rewrites)
        await pilot.press("right")
        assert view.rewrite == min(1, n - 1)
        await pilot.press("down")
        await settle(app, pilot)
        assert main.index == 4


# -- item 3: the whole graph -------------------------------------------------------------------
@run_async
async def test_whole_graph_pan_zoom_and_marks():
    async with ide() as (app, pilot, main):
        graph = await show(app, pilot, 1, "graph")
        await pilot.press("w")
        await settle(app, pilot)
        await until(pilot, lambda: graph.drawing is not None)
        assert graph.whole
        drawn = graph.drawing
        # fold-batchnorm created conv1_bn: it is marked; shapes are on the edges
        assert "conv1_bn" in graph._marks()
        canvas = main.query_one("GraphCanvas")
        before = graph.zoom
        await pilot.press("minus")
        await settle(app, pilot)
        await until(pilot, lambda: graph.drawing is not drawn)
        assert graph.zoom != before
        x0 = canvas.scroll_x
        await pilot.press("right", "right", "right")
        await pilot.pause()
        assert canvas.scroll_x >= x0
        assert "overview" in str(main.query_one("#graph-minimap").render())


# -- item 4: the debugger's tolerance, slice and watches ---------------------------------------


@run_async
async def test_debugger_tolerance_slice_and_watch_from_prompts():
    async with ide() as (app, pilot, main):
        view = await open_debugger(app, pilot)
        dbg = view.dbg
        # the fake reference is off by 0.5 at instruction 7: with atol 1 it is no divergence
        await pilot.press("T")
        await pilot.pause()
        inp = app.screen.query_one(Input)
        inp.value = "rtol=0 atol=1"
        await pilot.press("enter")
        await pilot.pause()
        assert (dbg.rtol, dbg.atol) == (0.0, 1.0)
        await pilot.press("d")
        await settle(app, pilot)
        assert dbg.finished and dbg.divergence is None
        await pilot.press("r")
        await settle(app, pilot)
        view.set_tolerance("rtol=1e-4 atol=1e-5")
        await pilot.press("d")
        await settle(app, pilot)
        assert dbg.divergence is not None and dbg.divergence["index"] == 7
        # the worst element at full precision
        status = str(view.query_one("#debug-status").render())
        assert "7.5" in status and "7" in status
        # a slice the user picks: any two axes, any offsets
        await pilot.press("v")
        await pilot.pause()
        name = view.last_slice["name"]
        app.screen.query_one(Input).value = f"{name} [1, :, :]"
        await pilot.press("enter")
        await pilot.pause()
        assert view.last_slice["axes"] == (1, 2) and view.last_slice["index"][0] == 1
        # a watch: statistics of a buffer after each step
        await pilot.press("p")
        await pilot.pause()
        app.screen.query_one(Input).value = name
        await pilot.press("enter")
        await pilot.pause()
        assert dbg.watches == [name]
        assert "mean" in _plain(view.query_one("#debug-operands"))


# -- item 5: the memory map ---------------------------------------------------------------------
@run_async
async def test_memory_map_zoom_pan_and_buffer_card():
    async with ide() as (app, pilot, main):
        mem = await show(app, pilot, 6, "memory")
        await until(pilot, lambda: mem.report is not None and mem.index == 6)
        await pilot.press("m")
        await pilot.pause()
        mp = main.query_one("MemoryMap")
        assert app.focused is mp
        w = mp.window
        area = (w.x1 - w.x0) * (w.y1 - w.y0)
        await pilot.press("plus")
        await pilot.pause()
        w = mp.window
        assert (w.x1 - w.x0) * (w.y1 - w.y0) < area  # 9 instructions: the byte axis zooms
        await pilot.press("right", "down")
        await pilot.pause()
        assert mp.under is not None
        card = str(main.query_one("#memory-detail").render())
        assert mp.under in card and "producer" in card and "why" in card.lower()
        # XProf's three orders of the buffers live at the peak
        orders = []
        for _ in range(3):
            orders.append(mem.sort)
            mem.action_cycle_sort()
        assert {"size", "program order", "padding waste"} <= set(orders + [mem.sort])


# -- item 6: export asks for a path, a format and a theme --------------------------------------
@run_async
async def test_export_dialog_writes_where_asked(tmp_path):
    async with ide() as (app, pilot, main):
        await show(app, pilot, 1, "graph")
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert type(app.screen).__name__ == "ExportScreen"
        assert app.screen.fmt == "svg"  # a sensible default
        out = tmp_path / "fig" / "graph.svg"
        app.screen.query_one("#export-path", Input).value = str(out)
        await pilot.press("enter")
        await settle(app, pilot)
        await until(pilot, lambda: out.exists())
        assert out.read_text().lstrip().startswith(("<?xml", "<svg"))
        assert not (Path.cwd() / "glowviz-exports").exists() or out.exists()


# -- item 7: the bugs --------------------------------------------------------------------------
def _big_counts_compile(model: Any, options: Any, observer: Any = None, **kw: Any) -> Any:
    def big(ev):
        if ev.pass_name == "fold-batchnorm":
            ev = dataclasses.replace(ev, count_before=495, count_after=2018, time_ms=5025.4)
        observer(ev)

    return fake_compile(model, options, big, **kw)


def _fits(app, table, count_width: int) -> None:
    """The count column is as wide as its widest cell and every column fits in the pane
    (cells padded by one each side, the vertical scrollbar beside them)."""
    cols = {str(c.key.value): c for c in table.columns.values()}
    assert cols["count"].width >= count_width
    pane = main_screen(app).query_one("PipelinePane")
    used = sum(c.width + 2 for c in cols.values()) + 2
    assert used <= pane.content_size.width, (used, pane.content_size.width)


@run_async
async def test_pipeline_counts_and_times_keep_all_digits():
    s = CompileSession(
        str(ROOT / "sample_models" / "resnet_small.onnx"), None, compile_fn=_big_counts_compile
    )
    async with ide(GlowvizApp(session=s), size=(100, 30)) as (app, pilot, main):
        table = main_screen(app).query_one("#pipeline-table", DataTable)
        row = " ".join(str(c) for c in table.get_row_at(1))
        assert "495→2018" in row
        _fits(app, table, len("495→2018"))
        await pilot.resize_terminal(180, 50)
        await pilot.pause()
        await settle(app, pilot)
        row = " ".join(str(c) for c in table.get_row_at(1))
        assert "495→2018" in row and "5025" in row
        _fits(app, table, len("495→2018"))


@run_async
async def test_ir_backspace_goes_back_after_a_jump():
    async with ide() as (app, pilot, main):
        ir = await show(app, pilot, 1, "ir")
        ta = ir.query_one("IRTextArea")
        ta.focus()
        lines = ir.text.splitlines()
        use = next(k for k, line in enumerate(lines) if "Relu(%conv1_bn)" in line)
        ta.cursor_location = (use, lines[use].index("%conv1_bn") + 2)
        await pilot.press("g")
        await pilot.pause()
        assert lines[ta.cursor_location[0]].strip().startswith("%conv1_bn =")
        await pilot.press("backspace")
        await pilot.pause()
        assert ta.cursor_location[0] == use


def _gated_compile(gate: threading.Event):
    def compile_fn(model: Any, options: Any, observer: Any = None, **kw: Any) -> Any:
        def held(ev):
            observer(ev)
            if ev.index == 2:
                gate.wait(60)

        return fake_compile(model, options, held, **kw)

    return compile_fn


@run_async
async def test_position_kept_when_the_compile_finishes():
    gate = threading.Event()
    model = str(ROOT / "sample_models" / "resnet_small.onnx")
    app = GlowvizApp(session=CompileSession(model, None, compile_fn=_gated_compile(gate)))
    async with run_test(app, SIZE) as pilot:
        main = main_screen(app)
        await until(pilot, lambda: len(main.query_one("PipelinePane").records) >= 3)
        main.goto_stage(1)
        await pilot.press("3")  # the IR view of stage 1, while the compile runs
        await pilot.pause()
        # the title never names a running pass (only what finished)
        assert "dce" not in app.sub_title or "last done" in app.sub_title
        gate.set()
        await ready(app, pilot)
        assert main.index == 1
        assert main.query_one(TabbedContent).active == "ir"


@run_async
async def test_graph_tab_never_keeps_an_old_drawing():
    async with ide() as (app, pilot, main):
        graph = await show(app, pilot, 1, "graph")
        assert graph.rows
        main.goto_stage(6)  # a low-level stage: no graph
        await settle(app, pilot)
        assert not graph.rows
        assert "conv1_bn" not in str(main.query_one("#graph-neigh").render())
        # a failed model: nothing of the previous one stays drawn
        main.start_compile(make_fake_session(failing=True))
        await ready(app, pilot)
        await pilot.press("1")
        await settle(app, pilot)
        assert "relu2" not in str(main.query_one("#graph-neigh").render())
        pane = str(main.query_one("#error-pane").render())
        assert "0 stages" not in pane and "1 stage before the failure" in pane


@run_async
async def test_escape_leaves_the_pass_filter():
    async with ide() as (app, pilot, main):
        await pilot.press("ctrl+f", "e")  # cse, lower-cpu, fuse-activations, ...
        await pilot.pause()
        assert main.query_one("#pipeline-filter", Input).value == "e"
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is not main.query_one("#pipeline-filter")
        start = main.index
        await pilot.press("p")  # a key for the workspace, not the filter
        await pilot.pause()
        assert main.query_one("#pipeline-filter", Input).value == "e"
        assert main.index != start


@run_async
async def test_debugger_bindings_are_consistent_and_shown():
    async with ide() as (app, pilot, main):
        view = await open_debugger(app, pilot)
        start_stage, pc = main.index, view.dbg.pc
        await pilot.press("n")  # the debugger's next instruction, not the next stage
        assert view.dbg.pc > pc and main.index == start_stage
        await pilot.press("right_square_bracket")  # the stage keys that work everywhere
        await pilot.pause()
        assert main.index == start_stage + 1
        footer = " ".join(
            b.binding.description for b in app.screen.active_bindings.values() if b.binding.show
        )
        assert "Next" in footer and "Next stage" not in footer


@run_async
async def test_theme_command_offers_only_glowviz_themes_and_user_files(tmp_path, _config_dir):
    from glowviz.screens.commands import ThemeCommands

    async with ide() as (app, pilot, main):
        provider = ThemeCommands(app.screen)
        names = [n for n, _cb in provider._commands()]
        assert set(names) == set(app.glowviz_theme_names())
        assert "textual-dark" not in names and "nord" not in names
        light = (ROOT / "themes" / "light.toml").read_text()
        mine = tmp_path / "mine.toml"
        mine.write_text(light.replace('name = "light"', 'name = "mine"'))
        app.add_theme_file(str(mine))
        await pilot.pause()
        assert app.theme == "glowviz-mine" and "mine" in app.glowviz_theme_names()
    assert GlowvizApp(session=make_fake_session()).theme == "glowviz-mine"


@run_async
async def test_help_shows_keys_as_typed():
    from glowviz.screens.help import binding_groups

    async with ide() as (app, pilot, main):
        keys = " ".join(k for _, rows in binding_groups(app) for k, _ in rows)
        for raw in ("question_mark", "slash", "plus", "minus", "left_square_bracket"):
            assert raw not in keys
        assert "?" in keys and "/" in keys and "+" in keys


@run_async
async def test_statistics_and_header_do_not_run_together():
    import numpy as np

    from glowviz.session.debugger import array_stats
    from glowviz.widgets.debugger_view import stats_text
    from glowviz.widgets.styles import styles

    async with ide(GlowvizApp(session=make_fake_session(), theme="paper")) as (app, pilot, main):
        st = styles(app)
        text = stats_text(array_stats(np.array([1.0, 1.1, np.nan], np.float32)), st).plain
        assert "nan" in text and not any(c.isdigit() for c in text.split("nan")[0][-1:])
        # the Memory view's header (drawn once shown: the views mount their widgets then)
        mem = await show(app, pilot, 6, "memory")
        await until(pilot, lambda: mem.report is not None and mem.index == 6)
        figs = str(mem.query_one("#memory-figures").render())
        assert "lower bound" in figs and "KiBlower" not in figs
        # the paper theme's styles name no ANSI yellow/cyan (unreadable on white)
        for v in dataclasses.asdict(st).values():
            assert "yellow" not in v and "cyan" not in v


# -- item 8: 100x30 ------------------------------------------------------------------------------
@run_async
async def test_100x30_is_first_class():
    async with ide(size=(100, 30)) as (app, pilot, main):
        assert main.has_class("-narrow") and main.has_class("-short")
        table = main.query_one("#pipeline-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert "count" in labels
        _fits(app, table, len("53→53"))
        mem = await show(app, pilot, 6, "memory")
        await until(pilot, lambda: mem.report is not None and mem.index == 6)
        mem.action_toggle_live()  # all three buffers
        await pilot.pause()
        t = main.query_one("#memory-table")
        assert t.size.height - 1 >= 3  # more than three rows fit under the header
        footer = main.query_one("Footer")
        assert footer.region.right <= 100 and footer.region.y == 29
        # the pipeline pane collapses: the views get the whole width
        await pilot.press("7")
        await settle(app, pilot)
        table = main.view("debugger").query_one("#debug-table")
        narrow = table.size.width
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert not main.query_one("PipelinePane").display or main.has_class("-no-pipeline")
        await until(pilot, lambda: table.size.width > narrow + 30)
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert not main.has_class("-no-pipeline")


# -- item 4 on a real CNN: no stop on rounding noise, a stop at a broken kernel ----------------
def _break_kernel(dbg, k: int) -> None:
    """A deliberately broken kernel (the test hook): after instruction `k` runs on the executor
    under test, one element of what it wrote is 5% off."""
    executor = dbg.executor
    step = executor.step

    def broken_step():
        at = executor.pc
        written = step()
        if at == k:
            for name in written or dbg._writes(k):
                a = executor.read(name).copy()
                a.flat[a.size // 2] = a.flat[a.size // 2] * 1.05 + 0.1
                executor.write(name, a)
        return written

    executor.step = broken_step


@pytest.mark.slow
@run_async
async def test_resnet50_shaped_run_to_divergence(tmp_path):
    """`d` with the default tolerance runs a ResNet-50-shaped model (32x32, 10 classes) to the
    end on LLVM against the interpreter: float32 rounding noise of long reductions is not a
    divergence. With one kernel broken on purpose it stops at exactly that instruction."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from models import write_model

    path = write_model("resnet50", tmp_path, image=32, classes=10)
    async with ide(GlowvizApp(str(path))) as (app, pilot, main):
        assert app.session.error is None, app.session.error.headline()
        view = await open_debugger(app, pilot)
        dbg = view.dbg
        assert dbg.executor_name == "llvm" and dbg.reference is not None
        await pilot.press("d")
        await settle(app, pilot)
        assert dbg.finished and dbg.divergence is None, dbg.stop_reason
        convs = [k for k, ins in enumerate(dbg.instrs) if ins["kind"] == "conv"]
        k = convs[len(convs) // 2]
        await pilot.press("r")
        await settle(app, pilot)
        _break_kernel(dbg, k)
        await pilot.press("d")
        await settle(app, pilot)
        assert dbg.divergence is not None and dbg.divergence["index"] == k, dbg.stop_reason
