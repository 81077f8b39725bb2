"""The Memory view compares the plan with a second report side by side (key o / the palette):
a glowviz.memory/1 JSON written by `glowviz mem`'s functions, the two plans' figures with deltas
and the changed buffers; bad paths show one error line and the IDE keeps working."""

from __future__ import annotations

from pathlib import Path

from ide_helpers import paste, ready, run_async, run_test, settle
from rich.style import Style
from textual.widgets import DataTable, TabbedContent

from glowviz.app import GlowvizApp
from glowviz.screens.main import MainScreen
from glowviz.session import CompileSession
from glowviz.widgets.styles import styles

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "sample_models" / "transformer_block.onnx"
SIZE = (160, 50)


def _write_report_without_buffer_sharing(path: Path) -> dict:
    from compiler.memory.report import MemoryReport
    from compiler.pipeline import CompileOptions, compile_model
    from glowviz.cli.mem_cmd import write_json

    opts = CompileOptions(disabled_passes=frozenset({"buffer-sharing"}))
    result = compile_model(str(MODEL), opts)
    report = MemoryReport.from_plan(
        result.plan, result.lir, str(MODEL), opts.scheduler, opts.allocator
    ).to_json()
    write_json(path, report)
    return report


async def _ready(app, pilot) -> MainScreen:
    main = await ready(app, pilot)
    await pilot.press("6")  # the Memory view (focuses its table)
    await pilot.pause()
    await settle(app, pilot)
    assert main.query_one(TabbedContent).active == "memory"
    return main


async def _compare_with(app, pilot, spec: str) -> None:
    await pilot.press("o")
    await pilot.pause()
    assert type(app.screen).__name__ == "CompareReportScreen"
    await paste(app, pilot, spec)
    assert app.focused.value == spec
    await pilot.press("enter")
    await pilot.pause()
    await settle(app, pilot)
    await pilot.pause()


def _rgb(style):
    c = Style.parse(str(style)).color
    return c.get_truecolor() if c is not None else None


def _status(view) -> str:
    return str(view.query_one("#memory-compare-status").render())


@run_async
async def test_compare_with_a_report_without_buffer_sharing(tmp_path):
    path = tmp_path / "no_sharing.json"
    other = _write_report_without_buffer_sharing(path)
    app = GlowvizApp(session=CompileSession(str(MODEL)))
    async with run_test(app, SIZE) as pilot:
        main = await _ready(app, pilot)
        view = main.view("memory")
        base_peak = view.report.peak_bytes
        assert other["peak_bytes"] > base_peak  # without buffer sharing the peak grows
        await _compare_with(app, pilot, str(path))
        assert isinstance(app.screen, MainScreen)
        cmp = view.comparison
        assert cmp is not None and view.compare_error is None
        assert view.has_class("comparing")
        assert "comparing with no_sharing.json" in _status(view)
        # the figures: peak growth, shown in red
        peak = cmp["diff"]["peak"]
        assert (peak["old"], peak["new"]) == (base_peak, other["peak_bytes"])
        assert peak["delta"] > 0
        figs = view.query_one("#cmp-figures").render()
        assert "peak" in str(figs) and "+" in str(figs)
        red = Style.parse(
            styles(app).removed
        ).color.get_truecolor()  # the theme's colour for growth
        assert any(
            _rgb(span.style) == red and "+" in str(figs)[span.start : span.end]
            for span in figs.spans
        )
        # the buffer table: at least one changed buffer, its change highlighted
        table = view.query_one("#cmp-table", DataTable)
        assert table.row_count == len(cmp["rows"]) >= 1
        tags = {t for r in cmp["rows"] for t in r["tags"]}
        assert tags & {"grew", "appeared", "longer", "moved"}
        first = table.get_row_at(0)
        assert any(cell.style for cell in first[2:])  # a changed cell is styled
        # both allocation maps side by side, one scale
        assert "this:" in str(view.query_one("#cmp-map-base").render())
        assert "other: no_sharing.json" in str(view.query_one("#cmp-map-other").render())
        # moving in the table highlights the buffer on the maps; x closes the comparison
        await pilot.press("down")
        await pilot.pause()
        assert view._cmp_selected != (None, None)
        await pilot.press("x")
        await pilot.pause()
        assert view.comparison is None and not view.has_class("comparing")


@run_async
async def test_bad_paths_show_one_error_line_and_the_app_keeps_working(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"schema": "something/else"}')
    app = GlowvizApp(session=CompileSession(str(MODEL)))
    async with run_test(app, SIZE) as pilot:
        main = await _ready(app, pilot)
        view = main.view("memory")
        missing = tmp_path / "missing.json"
        await _compare_with(app, pilot, str(missing))
        line = _status(view)
        assert line.startswith("cannot compare: ") and "file not found" in line
        assert str(missing) in line and "\n" not in line.strip()
        assert view.comparison is None and not view.has_class("comparing")
        await _compare_with(app, pilot, str(bad_json))
        assert "not JSON" in _status(view)
        await _compare_with(app, pilot, str(wrong))
        assert "schema is 'something/else'" in _status(view)
        # the app keeps working: A (compare allocator) uses the same side-by-side display
        await pilot.press("A")
        await pilot.pause()
        await settle(app, pilot)
        await pilot.pause()
        assert view.comparison is not None and view.has_class("comparing")
        assert "comparing with" in _status(view)
        assert view.comparison["other"]["report"].buffers


@run_async
async def test_palette_entry_opens_the_prompt():
    from glowviz.screens.commands import entries

    app = GlowvizApp(session=CompileSession(str(MODEL)))
    async with run_test(app, SIZE) as pilot:
        await _ready(app, pilot)
        entry = next(e for e in entries(app) if e[0] == "Memory: compare with report…")
        entry[1]()
        await pilot.pause()
        assert type(app.screen).__name__ == "CompareReportScreen"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
