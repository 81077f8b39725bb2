"""The IDE on hostile models (issue 11 item 7): each refused model opens with its one-line
error in the error pane and the IDE keeps working (the next model opens and compiles); a plan
over the memory limit says so; an integer division by zero met while debugging (`c`, `s`)
stops the debugger with the reason shown, and the IDE goes on."""

from __future__ import annotations

from pathlib import Path

from ide_helpers import ROOT, ready, run_async, settle
from pilot_helpers import ide, main_screen

from glowviz.app import GlowvizApp

REGRESSIONS = Path(__file__).resolve().parents[1] / "fuzz" / "regressions"

#: A few of each refused class (bad data, bad attribute, bad dim, memory, integer semantics),
#: with what the pane must say.
HOSTILE = {
    "raw_data_short": "raw_data holds 60 bytes",
    "conv_dilation_0": "dilations=[0, 0]",
    "input_dim_int64_max": "dim 1 is 9223372036854775807",
    "tile_huge": "above the memory limit of 8.0 GiB",
    "constant_of_shape_huge": "above the memory limit of 8.0 GiB",
    "int_div_by_const_zero": "integer division by zero",
    "external_data_dev_zero": "is outside",
}


@run_async
async def test_hostile_models_open_with_their_error_and_the_ide_goes_on():
    async with ide(GlowvizApp(str(REGRESSIONS / "raw_data_short.onnx"))) as (app, pilot, main):
        for name, says in HOSTILE.items():
            app.open_model(str(REGRESSIONS / f"{name}.onnx"))
            await ready(app, pilot)
            pane = main_screen(app).query_one("#error-pane")
            assert not pane.has_class("hidden"), name
            assert says in str(pane.render()), (name, str(pane.render()))
            assert app.session.error is not None and "\n" not in app.session.error.headline()
        app.open_model(str(ROOT / "sample_models" / "mlp.onnx"))
        await ready(app, pilot)
        assert app.session.error is None and main_screen(app).query_one("#error-pane").has_class(
            "hidden"
        )


@run_async
async def test_integer_division_by_zero_while_debugging_stops_the_debugger_only():
    model = str(REGRESSIONS / "int_div_by_runtime_zero.onnx")
    async with ide(GlowvizApp(model)) as (app, pilot, main):
        assert app.session.error is None, app.session.error.headline()
        await pilot.press("7")
        await settle(app, pilot)
        await pilot.click("#debug-table")
        view = main.view("debugger")
        dbg = view.dbg
        assert dbg is not None and dbg.available
        await pilot.press("c")  # used to kill the IDE with SIGFPE
        await settle(app, pilot)
        await pilot.pause()
        assert "integer division by zero" in dbg.stop_reason and not dbg.finished
        stuck = dbg.pc
        await pilot.press("s")  # stepping onto it again: shown again, not raised
        await pilot.press("n")
        assert "integer division by zero" in dbg.stop_reason and dbg.pc == stuck
        await pilot.press("r")  # restart works, and the rest of the IDE too
        await settle(app, pilot)
        assert dbg.pc == 0
        await pilot.press("1")
        await pilot.pause()
        assert app.is_running
