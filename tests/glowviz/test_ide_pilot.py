"""The IDE driven with Pilot: every view and the main flows, on the fake pipeline (stable) and
once on the real default model."""

from __future__ import annotations

import json

import pytest
from ide_helpers import ROOT, make_fake_session, ready, run_async, settle, until
from pilot_helpers import ide, main_screen, open_debugger, show
from textual.widgets import DataTable, TabbedContent

from glowviz.app import GlowvizApp
from glowviz.screens.main import VIEWS, MainScreen
from glowviz.widgets.virtual_table import VirtualTable


@run_async
async def test_every_view_renders():
    async with ide() as (app, pilot, main):
        assert "7 stages" in app.sub_title
        for k, (tab, _title, _cls) in enumerate(VIEWS):
            await pilot.press(str(k + 1))
            await pilot.pause()
            await settle(app, pilot)
            assert main.query_one(TabbedContent).active == tab
            # keys go to the view just shown (focused after the next refresh), never to the
            # pipeline's filter box
            await until(pilot, lambda: app.focused is not None)
            assert main.view(tab) in app.focused.ancestors_with_self, (tab, app.focused)
        # the selected stage is a graph stage: the Schedule view shows its program order's
        # live bytes first, then the scheduler's order
        scheds = main.view("schedule").schedules
        # never more than two of the graph's 1 KiB activations at once in the node list's order
        assert scheds[0].kind == "program order" and scheds[0].peak_bytes == 2048
        # a low-level stage shows the schedule the compile used (the fake plan's, 2 KiB)
        await show(app, pilot, 6, "schedule")
        await until(pilot, lambda: main.view("schedule").index == 6)
        await until(pilot, lambda: main.view("schedule").schedules[0].kind != "program order")
        assert main.view("schedule").schedules[0].peak_bytes == 2048
        assert main.view("memory").report.gap_bytes == 0
        assert main.view("lifetimes").buffers
        assert main.view("debugger").dbg.available


@run_async
async def test_step_passes_with_n_and_p_and_views_follow():
    async with ide() as (app, pilot, main):
        start = main.index
        assert start == 5  # the last graph stage is selected after compiling
        await pilot.press("p")
        await pilot.pause()
        assert main.index == 4
        assert main.view("graph").index == 4
        await pilot.press("n", "n")
        await pilot.pause()
        assert main.index == 6
        await pilot.press("u")  # hide unchanged: dce, lower-cpu and cse disappear
        await pilot.pause()
        assert main.query_one("#pipeline-table", DataTable).row_count == 4
        await pilot.press("p")
        await pilot.pause()
        assert main.index == 3


@run_async
async def test_open_a_diff():
    async with ide() as (app, pilot, main):
        view = await show(app, pilot, 1, "diff")
        assert view.pair == (0, 1)
        assert "conv1 + bn1 -> conv1_bn (Conv)  [fold-batchnorm]" in view.current.provenance
        table = view.query_one("#diff-table", VirtualTable)
        assert table.row_count > 0
        await pilot.click("#diff-table")
        await pilot.press("f")  # full text
        await pilot.pause()
        assert view.full
        assert table.row_count >= len(view.current.side_by_side)


@run_async
async def test_graph_search_detail_and_neighbourhood():
    async with ide() as (app, pilot, main):
        await show(app, pilot, 0, "graph")
        await pilot.click("#graph-table")
        await pilot.press("slash", *"relu2", "enter")
        await pilot.pause()
        graph = main.view("graph")
        assert graph.selected_node == "relu2"
        await settle(app, pilot)
        await pilot.pause()
        drawn = str(graph.query_one("#graph-neigh").render())
        assert "relu2" in drawn
        await pilot.press("escape")
        await pilot.click("#graph-table")
        await pilot.press("enter")
        await pilot.pause()
        assert type(app.screen).__name__ == "NodeDetailScreen"
        assert app.screen.detail["name"] == "relu2"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


@run_async
async def test_ir_goto_definition():
    async with ide() as (app, pilot, main):
        await pilot.press("3")
        await pilot.pause()
        ir = main.view("ir")
        assert ir.goto_value("relu1")
        from textual.widgets import TextArea

        row = ir.query_one(TextArea).cursor_location[0]
        assert ir.text.splitlines()[row].strip().startswith("%relu1 = Relu")


@run_async
async def test_select_a_buffer():
    async with ide() as (app, pilot, main):
        main.goto_stage(6)  # the final plan (the fake one); graph stages are planned for real
        main.goto_buffer("relu1_res")
        await settle(app, pilot)
        mem = main.view("memory")
        await until(pilot, lambda: mem.selected == "relu1_res")
        assert mem.selected == "relu1_res"
        detail = str(mem.query_one("#memory-detail").render())
        assert "conv1_bn still live" in detail
        await pilot.press("5")
        await pilot.pause()
        lt = main.view("lifetimes")
        await pilot.click("#lifetimes-table")
        await pilot.press("o")  # sort by size
        await pilot.pause()
        assert lt.sort == "size"


@run_async
async def test_breakpoint_and_continue():
    async with ide() as (app, pilot, main):
        await pilot.press("7")
        await pilot.pause()
        await pilot.click("#debug-table")
        dbg = main.view("debugger").dbg
        table = main.view("debugger").query_one("#debug-table", VirtualTable)
        table.move_cursor(6)
        await pilot.press("b")
        assert 6 in dbg.breakpoints
        await pilot.press("c")
        await settle(app, pilot)
        await pilot.pause()
        assert dbg.pc == 6
        await pilot.press("s")
        assert dbg.pc == 7
        await pilot.press("r")
        await settle(app, pilot)
        await pilot.pause()
        assert dbg.pc == 0
        app.break_on_op("globalavgpool")
        await pilot.press("c")
        await settle(app, pilot)
        await pilot.pause()
        assert dbg.pc == 6  # the index breakpoint comes first
        await pilot.press("c")
        await settle(app, pilot)
        await pilot.pause()
        assert dbg.pc == 8 and "globalavgpool" in dbg.stop_reason


@run_async
async def test_switch_theme_is_remembered(_config_dir):
    async with ide() as (app, pilot, main):
        assert app.theme == "glowviz-dark"
        app.set_glowviz_theme("paper")
        await pilot.pause()
        assert app.theme == "glowviz-paper"
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme != "glowviz-paper"
    saved = json.loads((_config_dir / "settings.json").read_text())
    assert saved["theme"] in ("dark", "light", "high-contrast", "paper")
    app2 = GlowvizApp(session=make_fake_session())
    assert app2.theme == "glowviz-" + saved["theme"]


@run_async
async def test_palette_and_help():
    from glowviz.screens.commands import entries

    async with ide() as (app, pilot, main):
        texts = [e[0] for e in entries(app)]
        for prefix in (
            "Go to pass:",
            "Go to node:",
            "Go to buffer:",
            "Go to instruction:",
            "Theme:",
            "Break on op:",
            "Break on write to buffer:",
            "Open model",
            "View: Memory",
        ):
            assert any(t.startswith(prefix) for t in texts), prefix
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"go to node conv2_relu")
        await settle(app, pilot)  # the palette's search (a worker) has listed what it found
        await pilot.press("enter")
        await pilot.pause()
        main = main_screen(app)
        assert main.query_one(TabbedContent).active == "graph"
        assert main.view("graph").selected_node == "conv2_relu"
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
        from glowviz.screens.help import binding_groups

        help_text = " ".join(d for _, rows in binding_groups(app) for _, d in rows)
        for key in ("Next stage", "Breakpoint", "Continue", "Search"):
            assert key in help_text
        await pilot.press("escape")


@run_async
async def test_error_pane_on_failing_compile():
    async with ide(failing=True) as (app, pilot, main):
        pane = main.query_one("#error-pane")
        assert not pane.has_class("hidden")
        text = str(pane.render())
        assert "fold-batchnorm" in text and "bn1" in text
        assert "FAILED" in app.sub_title
        await pilot.press("6")  # the views still work and say why
        await pilot.pause()
        assert "not available" in str(main.view("memory").query_one("#memory-figures").render())


@run_async
async def test_bad_model_file_opens_with_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"garbage")
    async with ide(GlowvizApp(str(bad))) as (app, pilot, main):
        assert not main.query_one("#error-pane").has_class("hidden")
        app.open_model(str(ROOT / "sample_models" / "mlp.onnx"))  # and it keeps working
        assert (await ready(app, pilot)).session.model_name == "mlp.onnx"


@run_async
async def test_real_default_model():
    async with ide(GlowvizApp(None)) as (app, pilot, main):
        assert app.session.model_name == "resnet_small.onnx"
        assert app.session.error is None, app.session.error.headline()
        for k in range(len(VIEWS)):
            await pilot.press(str(k + 1))
            await pilot.pause()
        await settle(app, pilot)
        # back to the debugger's tab (the loop ends on the last view) and step it
        await pilot.press(str([tab for tab, _, _ in VIEWS].index("debugger") + 1))
        await pilot.pause()
        await pilot.click("#debug-table")
        await pilot.press("s", "s")
        dbg = main.view("debugger").dbg
        assert dbg.available and dbg.pc == 2


@run_async
async def test_memory_and_schedule_views_show_aliases_certificate_and_every_scheduler():
    """The default model's residual convs accumulate in place: the Memory view lists those
    aliases (hatched in the map), says why ("accumulates into ...") and shows the certificate;
    the Schedule view puts optimal, child-mem-size and topological side by side."""
    async with ide(GlowvizApp(None)) as (app, pilot, main):
        rep = app.session.memory_report()
        alias = next(b for b in rep.buffers if b.alias_of)
        main.goto_stage(len(app.session.stages) - 1)  # the views follow the stage: the final plan
        main.goto_buffer(alias.name)
        await pilot.pause()
        await settle(app, pilot)
        mem = main.view("memory")
        await until(pilot, lambda: mem.selected == alias.name)
        detail = str(mem.query_one("#memory-detail").render())
        assert f"alias of: %{alias.alias_of}" in detail and "accumulates into" in detail
        figures = mem.header_text()
        assert "proven optimal" in figures and "sum post-op" in figures
        assert "╱" in str(mem.query_one("#memory-map").render())
        await pilot.press(str(next(k for k, v in enumerate(VIEWS) if v[0] == "schedule") + 1))
        await pilot.pause()
        await settle(app, pilot)
        sched = main.view("schedule")
        assert [s.kind for s in sched.schedules] == ["optimal", "child-mem-size", "topological"]
        heading = str(sched.query_one("#schedule-info").render())
        assert "proven optimal" in heading and "child-mem-size: peak" in heading
        assert "topological: peak" in heading


# -- the debugger: LLVM, the interpreter in lock-step, code views, divergence -----------------


@run_async
async def test_run_to_first_divergence_fake():
    async with ide() as (app, pilot, main):
        view = await open_debugger(app, pilot)
        dbg = view.dbg
        await pilot.press("n")  # the allocactivation, then the conv that writes its buffer
        assert dbg.last_index == 1
        assert dbg.comparison and all(r["ok"] for r in dbg.comparison)
        await pilot.press("d")
        await settle(app, pilot)
        await pilot.pause()
        assert dbg.divergence is not None and dbg.divergence["index"] == 7
        assert dbg.last_index == 7 and dbg.pc == 8
        assert dbg.divergence["abs"] == pytest.approx(0.5)
        assert "diverged at #7" in dbg.stop_reason
        side = view._comparison().plain
        assert "✗" in side and "max abs err 0.5" in side
        assert "✗" in view._gutter[7]
        await pilot.press("r")
        await settle(app, pilot)
        await pilot.pause()
        assert dbg.pc == 0 and dbg.divergence is None


@run_async
async def test_code_views_cycle_fake():
    async with ide() as (app, pilot, main):
        view = await open_debugger(app, pilot)
        view.query_one("#debug-table", VirtualTable).move_cursor(1)
        await pilot.press("i")
        await settle(app, pilot)
        await pilot.pause()
        assert view.mode == "llvm"
        assert "define void @instr_1" in view.last_code[2]
        assert not view.query_one("#debug-operands").display
        await pilot.press("i")
        await settle(app, pilot)
        await pilot.pause()
        assert view.mode == "asm" and "instr_1:" in view.last_code[2]
        await pilot.press("i")
        assert view.mode == "values" and view.query_one("#debug-operands").display


@pytest.mark.slow  # 8-11 s in CI: started first, not at the end
@run_async
async def test_llvm_debugger_on_the_default_model():
    """The product's executor under the debugger: stepping, LLVM IR and assembly of the
    selected instruction, run to first divergence, a breakpoint on an op kind."""
    from glowviz.screens.commands import entries

    async with ide(GlowvizApp(None)) as (app, pilot, main):
        assert app.session.error is None, app.session.error.headline()
        view = await open_debugger(app, pilot)
        dbg = view.dbg
        assert dbg.executor_name == "llvm" and dbg.fallback_error is None
        assert dbg.reference is not None and dbg.reference.name == "interpreter"
        status = str(view.query_one("#debug-status").render())
        assert "[llvm]" in status and "lock-step" in status
        for _ in range(20):
            await pilot.press("s")
        assert dbg.pc == 20
        await pilot.press("n")  # executes the next real instruction, compared with the reference
        k = dbg.last_index
        assert dbg.instrs[k]["kind"] not in ("allocactivation", "deallocactivation", "tensorview")
        assert dbg.comparison and all(r["ok"] for r in dbg.comparison)
        assert dbg.written_buffers()
        # LLVM IR and assembly of the selected (a compute) instruction
        view.query_one("#debug-table", VirtualTable).move_cursor(k)
        await pilot.press("i")
        await settle(app, pilot)
        await pilot.pause()
        assert view.last_code[:2] == ("llvm", k) and f"@instr_{k}" in view.last_code[2]
        await pilot.press("i")
        await settle(app, pilot)
        await pilot.pause()
        assert view.last_code[:2] == ("asm", k) and f"instr_{k}:" in view.last_code[2]
        await pilot.press("i")
        # run to first divergence: LLVM agrees with the interpreter on the sample model
        await pilot.press("r")
        await settle(app, pilot)
        await pilot.press("d")
        await settle(app, pilot)
        await pilot.pause()
        assert dbg.finished and dbg.divergence is None
        assert dbg.stop_reason.startswith(f"no divergence, {len(dbg.instrs)} instructions")
        # a breakpoint on an op kind (the palette entry), then continue
        await pilot.press("r")
        await settle(app, pilot)
        kinds = [ins["kind"] for ins in dbg.instrs]
        kind = "relu" if "relu" in kinds else kinds[-1]
        cb = next(cb for text, cb, _ in entries(app) if text == f"Break on op: {kind}")
        cb()
        await pilot.pause()
        await pilot.click("#debug-table")
        await pilot.press("c")
        await settle(app, pilot)
        await pilot.pause()
        assert dbg.instrs[dbg.pc]["kind"] == kind and kind in dbg.stop_reason
        first = dbg.pc
        await pilot.press("c")
        await settle(app, pilot)
        assert dbg.finished or (dbg.pc > first and dbg.instrs[dbg.pc]["kind"] == kind)
        # a breakpoint on a write to a buffer
        await pilot.press("r")
        await settle(app, pilot)
        buf = dbg.written_buffers(dbg._writes(first))[0]
        app.break_on_write(buf)
        app.break_on_op(kind)  # off again
        await pilot.click("#debug-table")
        await pilot.press("c")
        await settle(app, pilot)
        assert buf in dbg.stop_reason and buf in dbg.written_buffers(dbg._writes(dbg.pc))


@pytest.mark.slow
@run_async
async def test_resnet50_shaped_model_stage_switching(tmp_path):
    """A ResNet-50-shaped model (generated at 64x64, 10 classes): the pipeline shows, stages
    switch in every view, the debugger gets ready. No timing assert (see the report numbers)."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from models import write_model

    path = write_model("resnet50", tmp_path, image=64, classes=10)
    async with ide(GlowvizApp(str(path))) as (app, pilot, main):
        assert app.session.error is None, app.session.error.headline()
        assert len(app.session.stages) > 10
        assert sum(r["op"] == "Conv" for r in app.session.graph_nodes(0)) == 53
        await pilot.click("#pipeline-table")
        for k, (tab, _title, _cls) in enumerate(VIEWS):
            await pilot.press(str(k + 1))
            await pilot.pause()
            await settle(app, pilot)
            await pilot.click("#pipeline-table")
            before = main.index
            await pilot.press("p", "p", "n")
            await pilot.pause()
            assert main.index == before - 1, tab
        graph = main.view("graph")
        await show(app, pilot, 0, "graph")
        assert graph.index == 0 and len(graph.rows) > 300
        assert main.view("debugger").dbg is not None


@run_async
async def test_specialized_model_shows_its_notes(tmp_path):
    """A model compiled with a const input (what `--const-input` gives the IDE): the graph is
    the specialized one and the pipeline pane lists the frontend's note above the stages."""
    import numpy as np
    from textual.widgets import Label

    from compiler.pipeline import CompileOptions
    from tests.frontend.frontend_helpers import reshape_by_input_model

    path = reshape_by_input_model(tmp_path / "reshape.onnx")
    options = CompileOptions(const_inputs={"shape": np.array([3, 4])})
    async with ide(GlowvizApp(str(path), options)) as (app, pilot, main):
        assert app.session.error is None, app.session.error.headline()
        assert app.session.notes == ["input 'shape' specialized to [3, 4]"]
        label = main.query_one("#pipeline-notes", Label)
        assert label.display and "specialized to [3, 4]" in str(label.render())
        assert any(r["op"] == "Reshape" for r in app.session.graph_nodes(0))
