"""NodeList: a virtualized table of graph values and nodes (kind, name, type, inputs, users).

A line-API ScrollView: it draws only the rows in view, so showing a ResNet-50 stage (~500 rows)
costs the same as showing ten. Column widths are computed once per row list from the longest
cell of each column, capped; longer cells end with an ellipsis. One cursor row, moved with the
keyboard (up/down/page up/page down/home/end) or the mouse; like DataTable it posts
RowHighlighted when the cursor moves to another row and RowSelected on Enter or on a click on
the cursor row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

#: A row: (kind, name, type, inputs, users), all already formatted as strings.
Row = tuple[str, str, str, str, str]


class NodeList(ScrollView, can_focus=True):
    """A header line, then one line per row; only the visible lines are ever rendered."""

    COLUMNS: tuple[str, ...] = ("kind", "name", "type", "inputs", "users")
    #: The widest each column may get (cells, without the padding); longer cells are cut.
    MAX_WIDTHS: tuple[int, ...] = (12, 48, 32, 40, 40)
    PADDING = 1  # cells each side of a column, as in DataTable

    COMPONENT_CLASSES = {"node-list--header", "node-list--cursor"}

    BINDINGS = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
    ]

    class RowHighlighted(Message):
        """The cursor moved to another row (or the rows under it changed)."""

        def __init__(self, node_list: NodeList, cursor_row: int, key: str | None) -> None:
            super().__init__()
            self.node_list = node_list
            self.cursor_row = cursor_row
            self.key = key

        @property
        def control(self) -> NodeList:
            return self.node_list

    class RowSelected(Message):
        """Enter on the cursor row, or a click on it."""

        def __init__(self, node_list: NodeList, cursor_row: int, key: str | None) -> None:
            super().__init__()
            self.node_list = node_list
            self.cursor_row = cursor_row
            self.key = key

        @property
        def control(self) -> NodeList:
            return self.node_list

    def __init__(
        self,
        *,
        kind_styles: Mapping[str, str] | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.rows: list[Row] = []
        self.keys: list[str] = []
        self.cursor_row = 0
        self.widths: list[int] = [cell_len(c) for c in self.COLUMNS]
        self._kind_styles = {k: Style.parse(v) for k, v in (kind_styles or {}).items()}
        #: How many rows render_line drew since the last reset (for tests and profiling).
        self.rendered_rows = 0

    def set_kind_styles(self, kind_styles: Mapping[str, str]) -> None:
        """Rich styles of the first column by kind (a theme's [ui.categories])."""
        self._kind_styles = {k: Style.parse(v) for k, v in kind_styles.items()}
        self.refresh()

    # -- data ---------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def cursor_key(self) -> str | None:
        return self.keys[self.cursor_row] if 0 <= self.cursor_row < len(self.keys) else None

    def set_rows(
        self, rows: Sequence[Row], keys: Sequence[str] | None = None, cursor: int = 0
    ) -> None:
        """Replace the rows (keys default to the name column) and put the cursor on `cursor`.

        Posts RowHighlighted if the row under the cursor is not the one it was before."""
        old_key = self.cursor_key
        self.rows = [tuple(r) for r in rows]  # type: ignore[misc]
        self.keys = list(keys) if keys is not None else [r[1] for r in self.rows]
        if len(self.keys) != len(self.rows):
            raise ValueError("one key per row")
        self.widths = self._measure(self.rows)
        self.virtual_size = Size(self._line_width(), len(self.rows) + 1)
        self.cursor_row = -1  # so that move_cursor sees a move
        self.move_cursor(cursor, post=False)
        if self.rows and self.cursor_key != old_key:
            self._post_highlighted()
        self.refresh()

    def clear(self) -> None:
        self.set_rows([])

    def _measure(self, rows: list[Row]) -> list[int]:
        widths = []
        for col, (title, cap) in enumerate(zip(self.COLUMNS, self.MAX_WIDTHS, strict=True)):
            # len() rather than cell_len(): names are ASCII and this runs over every row.
            longest = max((len(r[col]) for r in rows), default=0)
            widths.append(max(cell_len(title), min(cap, longest)))
        return widths

    def _line_width(self) -> int:
        return sum(w + 2 * self.PADDING for w in self.widths)

    # -- cursor -------------------------------------------------------------------------------
    def move_cursor(self, row: int, *, post: bool = True, scroll: bool = True) -> None:
        """Put the cursor on `row` (clamped), scroll it into view, post RowHighlighted."""
        if not self.rows:
            self.cursor_row = 0
            return
        row = max(0, min(len(self.rows) - 1, row))
        old = self.cursor_row
        self.cursor_row = row
        if old != row:
            if 0 <= old < len(self.rows):
                self.refresh_line(old + 1)
            self.refresh_line(row + 1)
        if scroll:
            self.scroll_to_cursor()
        if post and old != row:
            self._post_highlighted()

    def _post_highlighted(self) -> None:
        self.post_message(self.RowHighlighted(self, self.cursor_row, self.cursor_key))

    @property
    def _page(self) -> int:
        """Rows in view (the header line excluded)."""
        return max(1, self.scrollable_content_region.height - 1)

    def scroll_to_cursor(self) -> None:
        if not self.size.height:
            # Not laid out yet: scroll once it is.
            self.call_after_refresh(self._scroll_to_cursor_now)
            return
        self._scroll_to_cursor_now()

    def _scroll_to_cursor_now(self) -> None:
        page = self._page
        top = round(self.scroll_y)
        if self.cursor_row < top:
            top = self.cursor_row
        elif self.cursor_row >= top + page:
            top = self.cursor_row - page + 1
        if top != round(self.scroll_y):
            self.scroll_to(y=top, animate=False, immediate=True)

    def action_cursor_up(self) -> None:
        self.move_cursor(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(self.cursor_row + 1)

    def action_page_up(self) -> None:
        self.move_cursor(self.cursor_row - self._page)

    def action_page_down(self) -> None:
        self.move_cursor(self.cursor_row + self._page)

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(len(self.rows) - 1)

    def action_select_cursor(self) -> None:
        if self.rows:
            self.post_message(self.RowSelected(self, self.cursor_row, self.cursor_key))

    def row_at(self, y: int) -> int | None:
        """The row drawn on content line `y` of the widget, if any."""
        if y < 1:
            return None
        row = round(self.scroll_y) + y - 1
        return row if 0 <= row < len(self.rows) else None

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        row = self.row_at(offset.y)
        if row is None:
            return
        event.stop()
        if row == self.cursor_row:
            self.action_select_cursor()
        else:
            self.move_cursor(row)

    def _on_focus(self, event: events.Focus) -> None:
        self.refresh()  # the cursor's style depends on the focus

    def _on_blur(self, event: events.Blur) -> None:
        self.refresh()

    # -- drawing ------------------------------------------------------------------------------
    def _cells(
        self, values: Sequence[str], style: Style, kind_style: Style | None
    ) -> list[Segment]:
        pad = " " * self.PADDING
        segments = []
        for col, (value, width) in enumerate(zip(values, self.widths, strict=False)):
            text = value if len(value) <= width else set_cell_size(value, width - 1) + "…"
            text = pad + set_cell_size(text, width) + pad
            cell_style = style + kind_style if col == 0 and kind_style is not None else style
            segments.append(Segment(text, cell_style))
        return segments

    def render_line(self, y: int) -> Strip:
        base = self.rich_style
        width = self.scrollable_content_region.width
        scroll_x = round(self.scroll_x)
        if y == 0:
            style = base + self.get_component_rich_style("node-list--header")
            segments = self._cells(self.COLUMNS, style, None)
        else:
            row = self.row_at(y)
            if row is None:
                return Strip.blank(width, base)
            self.rendered_rows += 1
            style = base
            if row == self.cursor_row:
                style = base + self.get_component_rich_style("node-list--cursor")
            values = self.rows[row]
            kind_style = None if row == self.cursor_row else self._kind_styles.get(values[0])
            segments = self._cells(values, style, kind_style)
        line_width = self._line_width()
        strip = Strip(segments, line_width)
        if line_width < scroll_x + width:
            strip = strip.extend_cell_length(scroll_x + width, style)
        return strip.crop(scroll_x, scroll_x + width)
