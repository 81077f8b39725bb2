"""VirtualTable: a table that draws only the rows in view (Textual's line API), so a list of
1,300 instructions or buffers shows as fast as ten. DataTable measures and renders every row
up front (about 2 s for 1,300 rows on a loaded machine); this one costs the rows on screen.

Columns have a title, a width (fixed, measured once per row list from the longest cell and
capped, or a share of the table's width: `flex`, sized when the table is laid out, so rows set
before layout need no guess of the width) and a justification; cells are plain strings (the
fast path), Rich `Text` (styled, e.g. a bar) or `Anchored` text (a long line whose change must
stay in view however wide its column turns out). One cursor row, moved with the keyboard
(up/down/page up/page down/home/end) or the mouse; like DataTable it posts RowHighlighted when
the cursor moves to another row and RowSelected on Enter or a click on the cursor row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from glowviz import keymap


@dataclass(frozen=True)
class Anchored:
    """Text whose column `at` must stay in view: when the column is too narrow to show it, the
    cell starts a little before it (after an ellipsis) instead of cutting it off."""

    text: Text
    at: int

    def fit(self, width: int) -> Text:
        if self.at <= width - 8:
            return self.text
        start = max(0, self.at - 12)
        if len(self.text) <= start:
            return Text("")
        return Text("…", style="dim") + self.text[start:]


Cell = str | Text | Anchored


@dataclass
class Column:
    title: str
    width: int | None = None  # None: the longest cell (at least the title), up to `cap`
    cap: int = 60
    justify: str = "left"  # or "right"
    #: A share of the width the other columns leave (flex columns split it evenly), at least
    #: `width` (or the title) cells: sized from the laid-out table, not from the rows.
    flex: bool = False
    #: When the line is wider than the table, the column gives up width down to `min` cells
    #: (its cells then end with an ellipsis); None: it keeps its width.
    min: int | None = None
    #: When the line is wider than the table, the columns with a `drop` shrink first and then
    #: are hidden one by one, the highest `drop` first, before any column without one (0)
    #: shrinks: the table keeps its main columns whole as long as it can.
    drop: int = 0


class VirtualTable(ScrollView, can_focus=True):
    """A header line, then one line per row; only the visible lines are ever rendered."""

    PADDING = 1  # cells each side of a column, as in DataTable
    HEADER_CLASS = "virtual-table--header"
    CURSOR_CLASS = "virtual-table--cursor"
    COMPONENT_CLASSES = {"virtual-table--header", "virtual-table--cursor"}

    BINDINGS = keymap.bindings("VirtualTable")

    class _RowMessage(Message):
        def __init__(self, table: VirtualTable, cursor_row: int, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row
            self.key = key

        @property
        def control(self) -> VirtualTable:
            return self.table

    class RowHighlighted(_RowMessage):
        """The cursor moved to another row (or the rows under it changed)."""

    class RowSelected(_RowMessage):
        """Enter on the cursor row, or a click on it."""

    class Refitted(Message):
        """The table's width changed its column widths (cells may be cut or whole now)."""

        def __init__(self, table: VirtualTable) -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> VirtualTable:
            return self.table

    def __init__(
        self,
        columns: Sequence[Column] = (),
        *,
        show_header: bool = True,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.columns: list[Column] = list(columns)
        self.show_header = show_header
        self.rows: list[list[Cell]] = []
        self.keys: list[str] = []
        self._index: dict[str, int] = {}
        self.cursor_row = 0
        self.widths: list[int] = [cell_len(c.title) for c in self.columns]
        #: Columns hidden because the table is too narrow for them (`Column.drop`).
        self.hidden: set[int] = set()
        self._last_height = 0
        self._content_widths: list[int] = list(self.widths)  # before the flex share
        #: How many rows render_line drew since the last reset (for tests and profiling).
        self.rendered_rows = 0

    # -- data ---------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def cursor_key(self) -> str | None:
        return self.keys[self.cursor_row] if 0 <= self.cursor_row < len(self.keys) else None

    @property
    def _top(self) -> int:
        """Lines above the first row (the header)."""
        return 1 if self.show_header else 0

    def get_row_index(self, key: str) -> int | None:
        return self._index.get(key)

    def set_columns(self, columns: Sequence[Column]) -> None:
        self.columns = list(columns)
        self.widths = self._measure(self.rows)
        self._resize_virtual()

    def set_rows(
        self, rows: Sequence[Sequence[Cell]], keys: Sequence[str] | None = None, cursor: int = 0
    ) -> None:
        """Replace the rows (keys default to the second column, else the first) and put the
        cursor on `cursor`. Posts RowHighlighted if the row under the cursor is not the one it
        was before."""
        old_key = self.cursor_key
        self.rows = [list(r) for r in rows]
        if keys is None:
            col = 1 if self.columns and len(self.columns) > 1 else 0
            keys = [_plain(r[col]) if r else str(k) for k, r in enumerate(self.rows)]
        self.keys = list(keys)
        if len(self.keys) != len(self.rows):
            raise ValueError("one key per row")
        self._index = {k: i for i, k in enumerate(self.keys)}
        self.widths = self._measure(self.rows)
        self._resize_virtual()
        self.cursor_row = -1  # so that move_cursor sees a move
        self.move_cursor(cursor, post=False)
        if self.rows and self.cursor_key != old_key:
            self._post_highlighted()
        self.refresh()

    def update_row(self, k: int, row: Sequence[Cell]) -> None:
        """Replace row `k`'s cells (same widths: a longer cell is cut)."""
        if 0 <= k < len(self.rows):
            self.rows[k] = list(row)
            self.refresh_line(k + self._top)

    def clear(self) -> None:
        self.set_rows([])

    def _measure(self, rows: list[list[Cell]]) -> list[int]:
        widths = []
        for col, c in enumerate(self.columns):
            if c.flex:
                widths.append(max(c.width or 0, cell_len(c.title)))
            elif c.width is not None:
                widths.append(c.width)
            else:
                # len() rather than cell_len(): names are ASCII and this runs over every row.
                longest = max((len(_plain(r[col])) for r in rows if col < len(r)), default=0)
                widths.append(max(cell_len(c.title), min(c.cap, longest)))
        self._content_widths = widths
        return self._share_flex()

    def _share_flex(self) -> list[int]:
        """The measured widths fitted to the table's width: the flex columns given what the
        others leave (their minimum before the table is laid out); when the line is wider
        than the table, the columns that may be hidden (`drop`) shrink to their `min` first,
        then go one by one (the highest `drop` first, the others back to their widths), and
        only when none is left do the kept columns shrink (the widest first): a narrow table
        shows its main columns whole rather than every column cut."""
        widths = list(self._content_widths)
        self.hidden = set()
        avail = self._room()
        if avail <= 0:
            return widths
        flex = [k for k, c in enumerate(self.columns) if c.flex and k < len(widths)]
        if flex:
            fixed = sum(w for k, w in enumerate(widths) if k not in flex)
            share = (avail - fixed - 2 * self.PADDING * len(widths)) // len(flex)
            for k in flex:
                widths[k] = max(widths[k], share)
        if self._fit_width(widths) <= avail:
            return widths
        cols = self.columns[: len(widths)]
        droppable = sorted((c.drop, k) for k, c in enumerate(cols) if c.drop > 0)
        while droppable:
            self._shrink(widths, avail, [k for _d, k in droppable])
            if self._fit_width(widths) <= avail:
                return widths
            _prio, k = droppable.pop()
            self.hidden.add(k)
            widths = [0 if j in self.hidden else w for j, w in enumerate(self._content_widths)]
            if self._fit_width(widths) <= avail:
                return widths
        self._shrink(widths, avail, [k for k in range(len(widths)) if k not in self.hidden])
        return widths

    def _fit_width(self, widths: list[int]) -> int:
        return sum(w + 2 * self.PADDING for k, w in enumerate(widths) if k not in self.hidden)

    def _shrink(self, widths: list[int], avail: int, among: list[int]) -> None:
        """Take the excess from the columns `among` that have a `min`, the widest first, none
        below its min (in place)."""
        excess = self._fit_width(widths) - avail
        while excess > 0:
            shrinkable = [k for k in among if widths[k] > (self.columns[k].min or widths[k])]
            if not shrinkable:
                return
            k = max(shrinkable, key=lambda j: (widths[j], -j))
            floor = max(
                [self.columns[k].min or 0]
                + [widths[j] for j in shrinkable if widths[j] < widths[k]]
            )
            step = min(excess, widths[k] - floor)
            widths[k] -= step
            excess -= step

    def is_cut(self, row: int, col: int) -> bool:
        """Whether the cell is shown shorter than it is (ellipsis or hidden column)."""
        if not 0 <= row < len(self.rows) or col >= len(self.rows[row]):
            return False
        if col in self.hidden:
            return bool(_plain(self.rows[row][col]))
        return col < len(self.widths) and cell_len(_plain(self.rows[row][col])) > self.widths[col]

    def _room(self) -> int:
        """The width the columns may take: the table's, less the vertical scrollbar the rows
        will need (counted from the rows, not from the scrollbar shown now, which only appears
        after the rows are set)."""
        if not self.size.width:
            return 0
        gutter = self.styles.gutter
        room = self.size.width - gutter.width
        if len(self.rows) + self._top > self.size.height - gutter.height:
            room -= self.styles.scrollbar_size_vertical
        return room

    def _on_resize(self, event: events.Resize) -> None:
        # Only the flex columns follow the width: no rows are measured or posted again, and the
        # line never gets wider than the table, so this cannot start a resize loop.
        widths = self._share_flex()
        if widths != self.widths:
            self.widths = widths
            self._resize_virtual()
            self.refresh()
            self.post_message(self.Refitted(self))
        if self.rows and event.size.height < self._last_height:
            # Shorter (a line under the table appeared, the terminal shrank): the cursor row
            # must not end up below the view.
            self.call_after_refresh(self._scroll_to_cursor_now)
        self._last_height = event.size.height

    def _line_width(self) -> int:
        return self._fit_width(self.widths)

    def _resize_virtual(self) -> None:
        size = Size(self._line_width(), len(self.rows) + self._top)
        if self.styles.auto_dimensions:
            self.virtual_size = size  # the table's size follows its content: a layout
        elif size != self.virtual_size:
            # A table sized by its CSS keeps its region whatever its content: a new virtual
            # size changes only the lines drawn and the scrollbars (which ask for a layout
            # themselves when one appears or goes). Textual's reactive would lay the whole
            # screen out again, and redraw every widget that layout touches: on a view's first
            # frame, a second pass for the columns refitted to the table's first width.
            self.set_reactive(VirtualTable.virtual_size, size)
            self.refresh()
        if self.container_size:
            # Textual decides on the scrollbars when the table's size changes, not its virtual
            # size: a line that shrank to the table's width (the flex columns shared out after
            # the layout) kept a horizontal scrollbar over the last row
            self._scroll_update(self.virtual_size)

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
                self.refresh_line(old + self._top)
            self.refresh_line(row + self._top)
        if scroll:
            self.scroll_to_cursor()
        if post and old != row:
            self._post_highlighted()

    def _post_highlighted(self) -> None:
        self.post_message(self.RowHighlighted(self, self.cursor_row, self.cursor_key))

    @property
    def _page(self) -> int:
        """Rows in view (the header line excluded)."""
        return max(1, self.scrollable_content_region.height - self._top)

    def scroll_to_cursor(self, center: bool = False) -> None:
        if not self.size.height:
            # Not laid out yet: scroll once it is.
            self.call_after_refresh(self._scroll_to_cursor_now, center)
            return
        self._scroll_to_cursor_now(center)

    def _scroll_to_cursor_now(self, center: bool = False) -> None:
        page = self._page
        top = round(self.scroll_y)
        if center:
            top = max(0, self.cursor_row - page // 2)
        elif self.cursor_row < top:
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
        if y < self._top:
            return None
        row = round(self.scroll_y) + y - self._top
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
    def cell_style(self, row: int, col: int) -> Style | None:
        """An extra style for one cell (subclasses: e.g. the kind column's colour)."""
        return None

    def _cells(self, values: Sequence[Cell], style: Style, row: int | None) -> list[Segment]:
        pad = " " * self.PADDING
        segments: list[Segment] = []
        console = self.app.console
        for col, width in enumerate(self.widths):
            if col in self.hidden:
                continue
            value = values[col] if col < len(values) else ""
            justify = self.columns[col].justify if col < len(self.columns) else "left"
            extra = self.cell_style(row, col) if row is not None else None
            cell_style = style + extra if extra is not None else style
            if isinstance(value, Anchored):
                value = value.fit(width)
            if isinstance(value, str):
                plain = value if len(value) <= width else set_cell_size(value, width - 1) + "…"
                cut = set_cell_size(plain, width)
                if justify == "right":
                    cut = cut.rstrip().rjust(width)
                segments.append(Segment(pad + cut + pad, cell_style))
                continue
            text = value.copy()
            if text.cell_len > width:
                text.truncate(width, overflow="ellipsis")
            gap = width - text.cell_len
            segments.append(Segment(pad + (" " * gap if justify == "right" else ""), cell_style))
            for seg in text.render(console, end=""):
                st = cell_style + seg.style if seg.style is not None else cell_style
                if row is not None and row == self.cursor_row:
                    st = (seg.style or Style()) + style  # the cursor wins over cell colours
                segments.append(Segment(seg.text, st))
            segments.append(Segment((" " * gap if justify != "right" else "") + pad, cell_style))
        return segments

    def render_line(self, y: int) -> Strip:
        base = self.rich_style
        width = self.scrollable_content_region.width
        scroll_x = round(self.scroll_x)
        if y == 0 and self.show_header:
            style = base + self.get_component_rich_style(self.HEADER_CLASS)
            segments = self._cells([c.title for c in self.columns], style, None)
        else:
            row = self.row_at(y)
            if row is None:
                return Strip.blank(width, base)
            self.rendered_rows += 1
            style = base
            if row == self.cursor_row:
                style = base + self.get_component_rich_style(self.CURSOR_CLASS)
            segments = self._cells(self.rows[row], style, row)
        line_width = self._line_width()
        strip = Strip(segments, line_width)
        if line_width < scroll_x + width:
            strip = strip.extend_cell_length(scroll_x + width, style)
        return strip.crop(scroll_x, scroll_x + width)


def _plain(cell: Cell) -> str:
    if isinstance(cell, Anchored):
        return cell.text.plain
    return cell if isinstance(cell, str) else cell.plain
