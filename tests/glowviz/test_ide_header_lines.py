"""The views' header lines (InfoLine): stepping the stages repaints them without a layout of the
screen while their text keeps its number of lines, and a text that takes more or fewer lines
still gets the height it needs."""

from __future__ import annotations

from ide_helpers import run_async, settle
from pilot_helpers import ide, show
from rich.text import Text

from glowviz.widgets.stage_view import InfoLine


@run_async
async def test_stepping_the_stages_repaints_the_header_without_a_layout():
    async with ide() as (app, pilot, main):
        view = await show(app, pilot, 1, "ir")
        info = view.query_one("#ir-info", InfoLine)
        layouts = []
        refresh_layout = main._refresh_layout

        def counted(*args, **kwargs):
            layouts.append(1)
            return refresh_layout(*args, **kwargs)

        main._refresh_layout = counted
        try:
            await pilot.click("#pipeline-table")
            for key in "nnnpp":
                await pilot.press(key)
                await settle(app, pilot)
                rec = app.session.stages[main.index]
                assert f"{main.index} {rec.label}" in str(info.render())
                lines = info.get_content_height(info.size, app.size, info.content_size.width)
                assert info.size.height == lines  # laid out when the count changed
        finally:
            main._refresh_layout = refresh_layout
        assert main.index == 2
        # five stages' headers (of one or two lines): Static.update laid out six times, one
        # per step and one for the click; now the changes of line count and the IR text's
        # own size (3 here; 4 leaves room for a frame split differently on another machine)
        assert len(layouts) <= 4, len(layouts)


@run_async
async def test_a_header_that_needs_more_lines_gets_them():
    async with ide() as (app, pilot, main):
        view = await show(app, pilot, 1, "ir")
        info = view.query_one("#ir-info", InfoLine)
        info.update(Text("short"))
        await settle(app, pilot)
        assert info.size.height == 1
        width = info.content_size.width
        info.update(Text("x" * (2 * width + 5)))  # three lines at this width (max-height: 3)
        await settle(app, pilot)
        assert info.size.height == 3
        info.update(Text("x" * (width + 5)))
        await settle(app, pilot)
        assert info.size.height == 2
        info.update(Text("short"))
        await settle(app, pilot)
        assert info.size.height == 1
