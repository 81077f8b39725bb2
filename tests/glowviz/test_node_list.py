"""NodeList, the virtualized list of the Graph view: only visible lines are rendered, the cursor
moves with keys and the mouse, and it posts RowHighlighted / RowSelected."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ide_helpers import run_async, run_test
from textual import on
from textual.app import App, ComposeResult

from glowviz.widgets.node_list import NodeList

CSS = Path(__file__).resolve().parents[2] / "glowviz" / "widgets" / "node_list.tcss"
N = 500
HEIGHT = 12  # the list: a header line and 11 rows


def make_rows(n: int = N) -> list[tuple[str, str, str, str, str]]:
    return [
        (
            "conv" if k % 2 else "activation",
            f"node{k} (Conv)",
            "f32<1x64x56x56>",
            f"node{k - 1}, w{k}",
            f"node{k + 1}",
        )
        for k in range(n)
    ]


class RecordingList(NodeList):
    """Remembers which rows render_line drew."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.drawn: set[int] = set()

    def render_line(self, y: int):
        row = self.row_at(y)
        if row is not None:
            self.drawn.add(row)
        return super().render_line(y)


class ListApp(App):
    CSS_PATH = str(CSS)
    CSS = f"NodeList {{ height: {HEIGHT}; width: 100; }}"

    def __init__(self, rows=None) -> None:
        super().__init__()
        self.initial = make_rows() if rows is None else rows
        self.highlighted: list[str | None] = []
        self.selected: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield RecordingList(id="list", kind_styles={"conv": "bold cyan"})

    def on_mount(self) -> None:
        lst = self.query_one(NodeList)
        lst.set_rows(self.initial, keys=[f"node{k}" for k in range(len(self.initial))])
        lst.focus()

    @on(NodeList.RowHighlighted, "#list")
    def _hl(self, event: NodeList.RowHighlighted) -> None:
        self.highlighted.append(event.key)

    @on(NodeList.RowSelected, "#list")
    def _sel(self, event: NodeList.RowSelected) -> None:
        self.selected.append(event.key)


@contextlib.asynccontextmanager
async def list_app(rows=None) -> AsyncIterator[tuple[ListApp, Any, RecordingList]]:
    """A ListApp of `rows` (N by default) under Pilot, drawn once: the app, the pilot, its list."""
    app = ListApp(rows)
    async with run_test(app, (120, 30)) as pilot:
        await pilot.pause()
        yield app, pilot, app.query_one(RecordingList)


def line_text(lst: NodeList, y: int) -> str:
    return lst.render_line(y).text


@run_async
async def test_renders_only_the_visible_rows():
    async with list_app() as (app, pilot, lst):
        assert lst.row_count == N
        assert lst.virtual_size.height == N + 1  # the header line and the rows
        assert lst.drawn and max(lst.drawn) < HEIGHT  # nothing below the fold was drawn
        assert line_text(lst, 0).split()[:5] == ["kind", "name", "type", "inputs", "users"]
        assert "node0 (Conv)" in line_text(lst, 1)
        lst.drawn.clear()
        await pilot.press("end")
        await pilot.pause()
        assert lst.cursor_row == N - 1
        assert lst.scroll_y == lst.max_scroll_y > 0
        assert lst.drawn and min(lst.drawn) >= N - HEIGHT  # only the last page was drawn
        assert f"node{N - 1} (Conv)" in line_text(lst, HEIGHT - 1)
        assert line_text(lst, 0).startswith(" kind")  # the header stays on top


@run_async
async def test_columns_fit_the_longest_cell_up_to_a_cap():
    rows = make_rows(3) + [("io", "x" * 100, "f32<2>", "a, b", "")]
    async with list_app(rows) as (app, pilot, lst):
        assert lst.widths[0] == len("activation")
        assert lst.widths[1] == NodeList.MAX_WIDTHS[1]
        assert lst.widths[2] == len("f32<1x64x56x56>")
        cut = line_text(lst, 4)
        assert "x" * (NodeList.MAX_WIDTHS[1] - 1) + "…" in cut and "x" * 49 not in cut
        assert lst.virtual_size.width == sum(w + 2 for w in lst.widths)


@run_async
async def test_cursor_keys_scroll_and_highlight_messages():
    async with list_app() as (app, pilot, lst):
        page = HEIGHT - 1
        assert lst.cursor_row == 0
        app.highlighted.clear()
        await pilot.press("down", "down", "up")
        await pilot.pause()
        assert lst.cursor_row == 1
        assert app.highlighted == ["node1", "node2", "node1"]
        await pilot.press("pagedown")
        await pilot.pause()
        assert lst.cursor_row == 1 + page
        assert lst.scroll_y == 2  # just enough to show the cursor row under the header
        await pilot.press("pageup")
        await pilot.pause()
        assert lst.cursor_row == 1 and lst.scroll_y == 1
        await pilot.press("home")
        await pilot.pause()
        assert lst.cursor_row == 0 and lst.scroll_y == 0
        await pilot.press("up")  # already at the top: nothing moves, nothing is posted
        await pilot.pause()
        assert lst.cursor_row == 0 and app.highlighted[-1] == "node0"
        n = len(app.highlighted)
        await pilot.press("end", "down")
        await pilot.pause()
        assert lst.cursor_row == N - 1 and app.highlighted[n:] == [f"node{N - 1}"]
        lst.move_cursor(250)
        await pilot.pause()
        assert lst.cursor_key == "node250" and app.highlighted[-1] == "node250"
        assert lst.row_at(250 - round(lst.scroll_y) + 1) == 250  # the cursor row is in view
        await pilot.press("enter")
        await pilot.pause()
        assert app.selected == ["node250"]


@run_async
async def test_mouse_moves_the_cursor_then_selects():
    async with list_app() as (app, pilot, lst):
        await pilot.click(NodeList, offset=(5, 3))  # line 3: the third row
        await pilot.pause()
        assert lst.cursor_row == 2 and app.highlighted[-1] == "node2" and not app.selected
        await pilot.click(NodeList, offset=(5, 3))  # a click on the cursor row selects it
        await pilot.pause()
        assert app.selected == ["node2"]
        await pilot.click(NodeList, offset=(5, 0))  # the header: no move, no selection
        await pilot.pause()
        assert lst.cursor_row == 2 and app.selected == ["node2"]


@run_async
async def test_set_rows_keeps_or_resets_the_cursor():
    async with list_app() as (app, pilot, lst):
        lst.move_cursor(300)
        await pilot.pause()
        app.highlighted.clear()
        rows = make_rows(400)
        lst.set_rows(rows, keys=[f"node{k}" for k in range(400)], cursor=300)
        await pilot.pause()
        assert lst.cursor_row == 300 and app.highlighted == []  # same row: no news
        lst.set_rows(rows[:10], keys=[f"node{k}" for k in range(10)], cursor=50)
        await pilot.pause()
        assert lst.cursor_row == 9 and app.highlighted == ["node9"]  # clamped
        assert lst.scroll_y == 0
        lst.clear()
        await pilot.pause()
        assert lst.row_count == 0 and lst.cursor_key is None
        assert line_text(lst, 1).strip() == ""
        await pilot.press("down", "enter")  # an empty list ignores keys
        await pilot.pause()
        assert app.selected == []


@run_async
async def test_a_narrow_list_drops_columns_then_shrinks_to_fit():
    """At 100x30 the list is ~30 cells wide and its line was ~150: names ran off the pane's
    edge mid-word and the other columns needed a sideways scroll. The line now fits: users
    go first, then inputs, then the type (each shrinks to its minimum before it goes), and
    only then is the name cut, with an ellipsis; widening the list brings them back."""
    rows = [
        (
            "conv",
            f"block{k}_conv_with_a_long_name (Conv)",
            "f32<1x64x56x56>",
            f"block{k - 1}_out, weight_{k}",
            f"block{k + 1}_in",
        )
        for k in range(20)
    ]
    async with list_app(rows) as (app, pilot, lst):
        full = list(lst.widths)
        assert not lst.hidden and lst.widths[1] == max(len(r[1]) for r in rows)
        for width, hidden, name_cut in (
            (94, set(), False),  # the type and inputs a little cut: all five fit
            (72, {4}, False),
            (62, {3, 4}, False),
            (50, {2, 3, 4}, False),
            (32, {2, 3, 4}, True),
        ):
            lst.styles.width = width
            await pilot.pause()
            await pilot.pause()
            assert lst.hidden == hidden, width
            assert lst._line_width() <= lst.scrollable_content_region.width, width
            assert not lst.show_horizontal_scrollbar, width
            names = [c for k, c in enumerate(NodeList.COLUMNS) if k not in hidden]
            assert line_text(lst, 0).split() == names, width
            assert all(lst.is_cut(0, k) for k in hidden)
            assert all(  # a column shown is at least its minimum (or its content, if less)
                lst.widths[k] >= min(m, full[k])
                for k, m in enumerate(NodeList.MIN_WIDTHS)
                if k not in hidden
            )
            name = line_text(lst, 1)[lst.widths[0] + 2 :].split("  ")[0].strip()
            assert lst.is_cut(0, 1) == name_cut, width
            if name_cut:
                assert name.endswith("…") and rows[0][1].startswith(name[:-1]), (width, name)
                assert lst.widths[1] >= NodeList.MIN_WIDTHS[1]
            else:
                assert name == rows[0][1], width
        lst.styles.width = 200
        await pilot.pause()
        await pilot.pause()
        assert not lst.hidden and lst.widths == full
        assert not lst.is_cut(0, 1)
