"""What a new user stumbled over in a real terminal (tmux at 180x50 and 100x30, issue 13's
new-user pass), each driven with Pilot on the fake pipeline and failing before its fix."""

from __future__ import annotations

import pytest
from ide_helpers import ROOT, run_async, settle, until
from pilot_helpers import ide, open_debugger


@run_async
async def test_graph_header_counts_the_stage_shown():
    """The Graph view's header counted the nodes of the stage shown before: after the compile
    jumped to the last graph stage it still said the imported graph's "8 nodes"."""
    async with ide() as (app, pilot, main):
        info = main.query_one("#graph-info")
        main.goto_stage(0)
        await settle(app, pilot)
        await until(pilot, lambda: "stage 0" in str(info.render()))
        assert "8 nodes" in str(info.render())
        main.goto_stage(3)
        await settle(app, pilot)
        await until(pilot, lambda: "stage 3" in str(info.render()))
        assert "6 nodes" in str(info.render())


@run_async
async def test_debugger_slice_title_is_one_line_at_100x30():
    """The slice's title was the Rich table's title, wrapped to the width of its five value
    columns: "conv_0_bn_relu_r / es [0, 0, :, :] / rows: axis 2, / cols: axis 3" down a
    16-character column at 100x30."""
    import io

    from rich.console import Console

    async with ide(size=(100, 30)) as (app, pilot, main):
        await pilot.press("ctrl+b")
        view = await open_debugger(app, pilot)
        await pilot.press("d")  # to the fake reference's divergence: a 3-D buffer's slice
        await settle(app, pilot)
        assert view.dbg.divergence is not None and view.last_slice is not None
        side = main.query_one("#debug-operands")
        console = Console(width=side.size.width, file=io.StringIO(), record=True)
        console.print(side.render()._renderable)  # the Rich Group the Static holds
        text = console.export_text()
        name = view.last_slice["name"]
        line = next(ln for ln in text.splitlines() if ln.startswith(f"{name} ["))
        assert "rows: axis" in line and "cols: axis" in line


async def _real_sample_ide(size: tuple[int, int] = (180, 50)):
    from glowviz.app import GlowvizApp
    from glowviz.session import CompileSession

    model = str(ROOT / "sample_models" / "resnet_small.onnx")
    return ide(GlowvizApp(session=CompileSession(model)), size)


async def _last_stage_report(app, pilot, main, key: str, name: str):
    """The last stage shown in view `name` (its key `key`), once the view has its report."""
    main.goto_stage(len(app.session.stages) - 1)
    await pilot.press(key)
    await settle(app, pilot)
    view = main.view(name)
    await until(pilot, lambda: view.report is not None)
    return view


def _tabs_shown(tabs) -> list[str]:
    """The tabs `tabs` switches to from now on, in order (a list to clear and read)."""
    shown: list[str] = []
    tabs.watch(tabs, "active", lambda tab: shown.append(tab), init=False)
    return shown


@run_async
async def test_one_leaves_the_diff_view():
    """The case a user hit: "2" then "1" stayed in the Diff view (its rewrite strip focused,
    hiding its pane moved the focus to the strip's sibling, which switched the tabs back)."""
    from textual.widgets import TabbedContent

    async with await _real_sample_ide() as (app, pilot, main):
        tabs = main.query_one(TabbedContent)
        shown = _tabs_shown(tabs)
        for key, tab in (("2", "diff"), ("1", "graph")):
            shown.clear()
            await pilot.press(key)
            await settle(app, pilot)
            # what the last refresh posted is handled (a focus moved off a widget it hid)
            await pilot.pause()
            assert tabs.active == tab
            assert shown == [tab]  # and never switched back on the way (then forth again)


@pytest.mark.slow
@run_async
async def test_number_keys_leave_the_diff_view():
    """With the Diff view's rewrite strip focused, "1" never showed the Graph: hiding the Diff
    pane made Textual move the focus to a neighbour inside it, and that focus switched the tabs
    straight back. Every view's key must reach its view from every other (real model: the Diff
    view's strip takes the keys there)."""
    from textual.widgets import TabbedContent

    from glowviz.screens.main import VIEWS

    async with await _real_sample_ide() as (app, pilot, main):
        tabs = main.query_one(TabbedContent)
        # One walk through every ordered pair of views (an Euler circuit of the complete
        # graph with loops: each view's key pressed once after each view's, itself included).
        n, edges = len(VIEWS), {v: list(range(len(VIEWS))) for v in range(len(VIEWS))}
        walk, stack = [], [0]
        while stack:
            if edges[stack[-1]]:
                stack.append(edges[stack[-1]].pop())
            else:
                walk.append(stack.pop())
        assert len(walk) == n * n + 1
        shown = _tabs_shown(tabs)
        for src, dst in zip(walk, walk[1:]):
            shown.clear()
            await pilot.press(str(dst + 1))
            await settle(app, pilot)
            # what the last refresh posted is handled (a focus moved off a widget it hid)
            await pilot.pause()
            assert tabs.active == VIEWS[dst][0], (VIEWS[src][0], VIEWS[dst][0])
            # and never switched back on the way (then forth again)
            assert shown == ([] if src == dst else [VIEWS[dst][0]]), (VIEWS[src][0], shown)


@run_async
async def test_memory_header_fits_100x30_with_the_pipeline_shown():
    """At 100x30 with the pipeline pane shown, the Memory view's header wrapped to nine lines
    on a graph stage and left the buffer table its header line alone: the header's lines are
    cut, not wrapped, and the table shows rows."""
    async with await _real_sample_ide((100, 30)) as (app, pilot, main):
        graph = [k for k, r in enumerate(app.session.stages) if r.ir_kind == "graph"]
        main.goto_stage(graph[-1])  # a graph stage: its header has the per-pass note too
        await pilot.press("6")
        await settle(app, pilot)
        await pilot.pause()
        header = main.query_one("#memory-figures")
        assert header.size.height <= 5
        # the short layout keeps the header's notes beside the buffer card
        notes = main.query_one("#memory-plan-more")
        assert notes.display and "per-pass timeline" in str(notes.render())
        table = main.query_one("#memory-table")
        assert table.size.height - 1 >= min(4, table.row_count)  # rows below its header
        assert table.size.height >= 4


@run_async
async def test_memory_table_gets_the_rows_at_100x30():
    """At 100x30 the Memory view showed three buffer rows of DenseNet-121's 245: the header's
    notes, the timeline and the map took the height, and the capped name column made the line
    a cell wider than the table (a horizontal scrollbar took one more row). Now the notes sit
    beside the card, the timeline and the map are compact until focused (t, m: the focused one
    takes the room), and the name column takes the width the numbers leave."""
    async with await _real_sample_ide((100, 30)) as (app, pilot, main):
        await _last_stage_report(app, pilot, main, "6", "memory")
        await pilot.press("l")  # every buffer
        await settle(app, pilot)
        await pilot.pause()
        table = main.query_one("#memory-table")
        assert table.row_count > 8
        assert not table.show_horizontal_scrollbar
        assert table.size.height - 1 >= 8  # rows under its header
        mp, tl = main.query_one("#memory-map"), main.query_one("#memory-timeline")
        small_map, small_tl = mp.size.height, tl.size.height
        await pilot.press("m")
        await pilot.pause()
        assert mp.has_focus and mp.size.height > small_map + 4
        await pilot.press("t")
        await pilot.pause()
        assert tl.has_focus and tl.size.height > small_tl and mp.size.height == small_map


@run_async
async def test_lifetime_bars_fit_the_table_at_100x30():
    """At 100x30 the Lifetimes view's bars began past the table's right edge (a name column
    capped at 36 plus a bar of the view's width less 50): the lifetimes, the point of the view,
    showed only after scrolling sideways. The names now take what the bar leaves."""
    async with await _real_sample_ide((100, 30)) as (app, pilot, main):
        await _last_stage_report(app, pilot, main, "5", "lifetimes")
        await pilot.pause()
        table = main.query_one("#lifetimes-table")
        assert not table.show_horizontal_scrollbar
        assert table._line_width() <= table.scrollable_content_region.width
        assert table.widths[-1] >= 10 and table.widths[0] >= 8  # a bar, and room for names
        await pilot.press("ctrl+b")  # the pipeline hidden: the bar takes the width
        await until(pilot, lambda: table.widths[-1] > 30)


@run_async
async def test_memory_comparison_lists_buffers_at_100x30():
    """Comparing plans at 100x30 (A: another allocator), the figures and the two allocation
    maps took the view's height and the changed buffers' table showed its header alone."""
    async with await _real_sample_ide((100, 30)) as (app, pilot, main):
        view = await _last_stage_report(app, pilot, main, "6", "memory")
        await pilot.press("A")
        await settle(app, pilot)
        await until(pilot, lambda: view.comparison is not None)
        await pilot.pause()
        table = main.query_one("#cmp-table")
        assert table.size.height - 1 >= 5  # rows under its header


@run_async
async def test_a_filter_that_matches_no_pass_says_so():
    """Typing a filter that matches no pass (a node name, say) and leaving it with Escape left
    an empty pipeline list under an unchanged title: nothing said why the stages were gone."""
    async with ide(size=(100, 30)) as (app, pilot, main):
        await pilot.press("ctrl+f", "z", "z", "q")
        await pilot.press("escape")
        await pilot.pause()
        title = str(main.query_one("#pipeline-title").render())
        assert "no pass matches 'zzq'" in title
        await pilot.press("ctrl+f", "backspace", "backspace", "backspace", "f", "o", "l", "d")
        await pilot.pause()
        title = str(main.query_one("#pipeline-title").render())
        assert "match 'fold'" in title and "no pass" not in title


@run_async
async def test_irgen_diff_shows_the_graph_beside_the_instructions():
    """The Diff view of IRGen's stage (the first low-level one) had nothing of its kind before
    it and showed empty before/after columns; it now sets the scheduled graph's text beside the
    instructions generated from it."""
    from glowviz.widgets.virtual_table import VirtualTable

    async with await _real_sample_ide() as (app, pilot, main):
        irgen = next(k for k, r in enumerate(app.session.stages) if r.stage == "irgen")
        assert app.session.stages[irgen - 1].ir_kind == "graph"
        main.goto_stage(irgen)
        await pilot.press("2")
        await settle(app, pilot)
        view = main.view("diff")
        await until(pilot, lambda: "beside" in str(view.query_one("#diff-summary").render()))
        summary = str(view.query_one("#diff-summary").render())
        assert "graph text beside the lir text irgen made from it" in summary
        assert view.pair == (irgen - 1, irgen)
        assert view.query_one(VirtualTable).row_count > 10


@run_async
async def test_schedule_view_fits_every_schedule_at_100x30():
    """At 100x30 with the pipeline shown, the Schedule view's three schedules (node, live bytes
    and bar each) ran off to the right: the second and third were only reached by scrolling.
    Narrow, the schedule IRGen used keeps its live bytes and the others show their order."""
    from glowviz.widgets.virtual_table import VirtualTable

    async with await _real_sample_ide((100, 30)) as (app, pilot, main):
        await pilot.press("4")
        await settle(app, pilot)
        view = main.view("schedule")
        await until(pilot, lambda: len(view.schedules) == 3)
        table = view.query_one(VirtualTable)
        await until(pilot, lambda: table.row_count > 0)
        titles = [c.title for c in table.columns]
        assert [s.kind for s in view.schedules] == [t for t in titles if t not in ("#", "live")]
        assert sum(w + 2 * table.PADDING for w in table.widths) <= table.size.width
        assert table.virtual_size.width <= table.size.width


@run_async
async def test_schedule_view_first_shown_after_a_resize_to_100x30():
    """tmux, 180x50 resized to 100x30, then "4" on a graph stage (two schedules): the view drew
    its columns for a width it did not have yet (its first draw comes before its layout) and
    kept them, the second schedule cut at the edge. The columns follow the width now."""
    from glowviz.widgets.virtual_table import VirtualTable

    async with await _real_sample_ide() as (app, pilot, main):
        graph = [k for k, r in enumerate(app.session.stages) if r.ir_kind == "graph"]
        main.goto_stage(graph[len(graph) // 2])
        await pilot.press("2")
        await settle(app, pilot)
        await pilot.resize_terminal(100, 30)
        await settle(app, pilot)
        await pilot.press("4")
        await settle(app, pilot)
        view = main.view("schedule")
        table = view.query_one(VirtualTable)
        await until(pilot, lambda: len(view.schedules) == 2 and table.row_count > 0)
        await pilot.pause()
        await settle(app, pilot)
        assert len(table.columns) == 4  # narrow: '#', name and live, then the other's name
        assert sum(w + 2 * table.PADDING for w in table.widths) <= table.size.width


@run_async
async def test_graph_node_list_fits_100x30_and_enter_shows_what_it_cuts():
    """At 100x30 the Graph view's node list ran off the pane's edge: "conv_2_bn (Con" cut
    mid-word, the type, inputs and users only after a sideways scroll. The list now fits its
    pane (cut cells end with an ellipsis, the least useful columns go) and Enter on a row shows
    the node in full; hiding the pipeline gives the columns back their room."""
    from glowviz.screens.node_detail import NodeDetailScreen
    from glowviz.widgets.node_list import NodeList

    async with await _real_sample_ide((100, 30)) as (app, pilot, main):
        await pilot.press("1")
        await settle(app, pilot)
        view = main.view("graph")
        lst = view.query_one(NodeList)
        await until(pilot, lambda: lst.row_count > 0)
        await pilot.pause()
        assert lst._line_width() <= lst.scrollable_content_region.width
        assert not lst.show_horizontal_scrollbar
        assert lst.hidden  # a ~30-cell pane holds the kind and the name only
        cut = next(k for k in range(lst.row_count) if lst.is_cut(k, 1))
        lst.move_cursor(cut)
        await pilot.pause()
        line = lst.render_line(lst._top + cut - round(lst.scroll_y)).text.rstrip()
        assert line.endswith("…")
        full = view.rows[cut]["name"]
        assert full not in line
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, NodeDetailScreen)
        assert app.screen.detail["name"] == full
        await pilot.press("escape")
        await settle(app, pilot)
        await pilot.press("ctrl+b")  # the pipeline hidden: the list gets more room
        await until(pilot, lambda: not lst.is_cut(cut, 1))  # the name whole again
        assert lst._line_width() <= lst.scrollable_content_region.width


@run_async
async def test_debugger_instructions_fit_100x30_with_the_cursor_line_in_full():
    """At 100x30 the debugger's instruction lines ran off the table's edge (a sideways scroll
    to read an operand list). They now end with an ellipsis at the edge, and the cursor's
    instruction is written out in full under the table -- only when it is cut."""
    async with await _real_sample_ide((100, 30)) as (app, pilot, main):
        view = await open_debugger(app, pilot)
        table = view.query_one("#debug-table")
        full = view.query_one("#debug-full")
        await pilot.pause()
        assert table._line_width() <= table.scrollable_content_region.width
        assert not table.show_horizontal_scrollbar
        dbg = view.dbg
        long = max(range(len(dbg.instrs)), key=lambda k: len(dbg.instrs[k]["text"]))
        table.move_cursor(long)
        await settle(app, pilot)
        assert table.is_cut(long, 2)
        assert full.display
        assert str(full.render()) == f"#{long} {dbg.instrs[long]['text']}"
        # the line under the table took rows from it: the cursor row is still in view
        await pilot.pause()
        top = round(table.scroll_y)
        assert top <= long < top + table._page, (top, long, table._page)
        await pilot.press("end")  # the last row too
        await settle(app, pilot)
        await pilot.pause()
        last, top = len(dbg.instrs) - 1, round(table.scroll_y)
        assert table.cursor_row == last and top <= last < top + table._page
        await pilot.press("ctrl+b")  # wider: a short instruction fits, nothing is repeated
        await pilot.pause()
        short = min(range(len(dbg.instrs)), key=lambda k: len(dbg.instrs[k]["text"]))
        table.move_cursor(short)
        await settle(app, pilot)
        await until(pilot, lambda: not table.is_cut(short, 2))
        assert not full.display
