"""The memory map: offsets (rows, top = 0) over instructions (columns), each buffer a coloured
block, the peak instruction and the lower bound as lines (the gap between the lower bound and
the arena's top is visible at a glance), and a cursor over (instruction, offset) that zooms and
pans with the keyboard: the buffer under it is the one the Memory view's card describes.

`draw_map` is the drawing (also used for the two maps of a comparison); `MemoryMap` is the
focusable widget around it."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from compiler.memory.report import MemoryReport, ReportBuffer
from glowviz import keymap
from glowviz.session import fmt_bytes
from glowviz.widgets.bars import colour

LABEL = 10  # the offset labels' column


def map_top(report: MemoryReport) -> int:
    """The highest byte the map of `report` shows."""
    return max([report.peak_bytes] + [b.offset + b.size for b in report.buffers] + [1])


@dataclass
class Window:
    """What part of the plan the map shows: instructions [x0, x1), bytes [y0, y1)."""

    x0: float
    x1: float
    y0: float
    y1: float


def draw_map(
    report: MemoryReport,
    width: int,
    palette: list[str],
    rows: int = 14,
    selected: str | None = None,
    top: int | None = None,
    window: Window | None = None,
    cursor: tuple[int, int] | None = None,
    peak_style: str = "red",
    bound_style: str = "dim",
) -> Text:
    """Offset (rows) x instruction index (columns); each buffer a coloured block (the theme's
    buffer colours), each alias (a concat slice, an accumulation target) hatched (╱) inside the
    buffer it shares. `top` fixes the offset scale (two maps side by side share one); `window`
    zooms; `cursor` is a (column, row) cell drawn reversed."""
    n = max(1, report.n_instructions)
    top = max(top or 0, map_top(report))
    win = window or Window(0, n, 0, top)
    per_col = max(1e-9, (win.x1 - win.x0) / width)
    per_row = max(1e-9, (win.y1 - win.y0) / rows)
    grid: list[list[str | None]] = [[None] * width for _ in range(rows)]
    hatched: set[tuple[int, int]] = set()
    for k, b in enumerate(report.buffers):
        if b.last < win.x0 or b.first >= win.x1 or b.offset + b.size <= win.y0:
            continue
        if b.offset >= win.y1:
            continue
        c0 = max(0, int((b.first - win.x0) / per_col))
        c1 = min(width - 1, max(c0, int((b.last + 1 - win.x0) / per_col - 1e-9)))
        r0 = max(0, int((b.offset - win.y0) / per_row))
        r1 = min(rows - 1, max(r0, int((b.offset + b.size - win.y0) / per_row - 1e-9)))
        st = "bold reverse" if b.name == selected else f"on {colour(k, palette)}"
        for r in range(r0, r1 + 1):
            row = grid[r]
            for c in range(c0, c1 + 1):
                if b.alias_of:  # no bytes of its own: drawn over its root's block
                    hatched.add((r, c))
                    if b.name == selected:
                        row[c] = st
                elif row[c] is None or b.name == selected:
                    row[c] = st
    peak_col = int((report.peak_instruction - win.x0) / per_col)
    bound_row = int((report.lower_bound_bytes - win.y0) / per_row)
    t = Text(no_wrap=True, overflow="crop")
    for r in range(rows):
        t.append(f"{fmt_bytes(win.y0 + r * per_row):>{LABEL - 1}} ", style="dim")
        for c in range(width):
            cell: str | None = grid[r][c]
            ch = " "
            style = cell or ""
            if cell is None and c == peak_col:
                ch, style = "┃", peak_style
            elif cell is None and r == bound_row:
                ch, style = "┄", bound_style
            elif (r, c) in hatched:
                ch = "╱"
            if cursor is not None and (c, r) == cursor:
                ch, style = "╳", (st or "") + " reverse bold"
            t.append(ch, style=style)
        t.append("\n")
    first = int(win.x0)
    last = max(first, int(win.x1) - 1)
    axis = f"{first}".ljust(max(1, width // 2)) + f"instr {last}".rjust(width - width // 2)
    t.append(" " * LABEL + axis, style="dim")
    return t


class MemoryMap(Widget, can_focus=True):
    """The map of one plan, with a keyboard cursor, zoom and pan (see the module docstring)."""

    BINDINGS = keymap.bindings("MemoryMap")

    class BufferUnderCursor(Message):
        """The cursor moved onto another buffer (None: free space)."""

        def __init__(self, name: str | None) -> None:
            super().__init__()
            self.name = name

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.report: MemoryReport | None = None
        self.palette: list[str] = ["blue"]
        self.window: Window | None = None
        self.cursor = (0.0, 0.0)  # (instruction, byte) of the cursor
        self.selected: str | None = None
        self.under: str | None = None
        self.peak_style, self.bound_style = "red", "dim"

    # -- data ---------------------------------------------------------------------------------
    def set_report(self, report: MemoryReport | None, palette: list[str]) -> None:
        same_shape = (
            report is not None
            and self.report is not None
            and report.n_instructions == self.report.n_instructions
            and map_top(report) == map_top(self.report)
        )
        self.report, self.palette = report, palette
        if not same_shape:
            self.zoom_reset()
        self._update_under()
        self.refresh()

    @property
    def rows(self) -> int:
        return max(3, self.size.height - 1)

    @property
    def columns(self) -> int:
        return max(8, self.size.width - LABEL)

    def zoom_reset(self) -> None:
        if self.report is None:
            self.window = None
            return
        self.window = Window(0, max(1, self.report.n_instructions), 0, map_top(self.report))
        self.cursor = (float(max(0, self.report.peak_instruction)), 0.0)

    def buffer_at(self, instr: float, byte: float) -> ReportBuffer | None:
        """The buffer at an instruction and offset (the smallest, if blocks overlap)."""
        if self.report is None:
            return None
        hits = [
            b
            for b in self.report.buffers
            if b.first <= instr <= b.last and b.offset <= byte < b.offset + b.size
        ]
        return min(hits, key=lambda b: b.size) if hits else None

    def focus_buffer(self, name: str) -> None:
        """Put the cursor on buffer `name` (its first instruction, its offset) and show it."""
        if self.report is None:
            return
        b = self.report.buffer(name)
        if b is None:
            return
        self.selected = name
        self.cursor = (float(b.first), float(b.offset))
        self._keep_cursor_in_window()
        self._update_under(post=False)
        self.refresh()

    # -- geometry -----------------------------------------------------------------------------
    def _cell(self) -> tuple[int, int] | None:
        w = self.window
        if w is None:
            return None
        c = int((self.cursor[0] - w.x0) / max(1e-9, (w.x1 - w.x0) / self.columns))
        r = int((self.cursor[1] - w.y0) / max(1e-9, (w.y1 - w.y0) / self.rows))
        if 0 <= c < self.columns and 0 <= r < self.rows:
            return c, r
        return None

    def _keep_cursor_in_window(self) -> None:
        """Pan so the cursor is inside the window."""
        w = self.window
        if w is None or self.report is None:
            return
        n, top = max(1, self.report.n_instructions), map_top(self.report)
        x, y = self.cursor
        dx, dy = w.x1 - w.x0, w.y1 - w.y0
        if x < w.x0:
            w.x0, w.x1 = x, x + dx
        elif x >= w.x1:
            w.x0, w.x1 = x - dx + dx / self.columns, x + dx / self.columns
        if y < w.y0:
            w.y0, w.y1 = y, y + dy
        elif y >= w.y1:
            w.y0, w.y1 = y - dy + dy / self.rows, y + dy / self.rows
        # never past the plan's edges
        shift_x = max(0.0, -w.x0) - max(0.0, w.x1 - n)
        shift_y = max(0.0, -w.y0) - max(0.0, w.y1 - top)
        w.x0, w.x1, w.y0, w.y1 = w.x0 + shift_x, w.x1 + shift_x, w.y0 + shift_y, w.y1 + shift_y

    def action_move(self, dx: int, dy: int) -> None:
        """Move the cursor by cells (one cell is a zoom-dependent span of the plan)."""
        w = self.window
        if w is None or self.report is None:
            return
        n, top = max(1, self.report.n_instructions), map_top(self.report)
        step_x = max(1.0, (w.x1 - w.x0) / self.columns)
        step_y = (w.y1 - w.y0) / self.rows
        x = min(n - 1.0, max(0.0, self.cursor[0] + dx * step_x))
        y = min(top - 1.0, max(0.0, self.cursor[1] + dy * step_y))
        self.cursor = (float(int(x)), y)
        self._keep_cursor_in_window()
        self._update_under()
        self.refresh()

    def action_zoom(self, factor: float) -> None:
        """Zoom both axes around the cursor (factor < 1: in)."""
        w = self.window
        if w is None or self.report is None:
            return
        n, top = max(1, self.report.n_instructions), map_top(self.report)
        dx = min(float(n), max(min(float(n), self.columns / 4), (w.x1 - w.x0) * factor))
        dy = min(float(top), max(min(float(top), 64.0 * self.rows), (w.y1 - w.y0) * factor))
        cx, cy = self.cursor
        w.x0, w.x1 = cx - dx / 2, cx + dx / 2
        w.y0, w.y1 = cy - dy / 2, cy + dy / 2
        self._keep_cursor_in_window()
        self.refresh()

    def action_zoom_reset(self) -> None:
        self.zoom_reset()
        self._update_under()
        self.refresh()

    def action_select(self) -> None:
        if self.under is not None:
            self.selected = self.under
            self.refresh()

    @property
    def zoom(self) -> float:
        """How many times the window is smaller than the whole plan (instructions)."""
        if self.window is None or self.report is None:
            return 1.0
        return max(1, self.report.n_instructions) / max(1e-9, self.window.x1 - self.window.x0)

    def _update_under(self, post: bool = True) -> None:
        b = self.buffer_at(*self.cursor)
        name = b.name if b is not None else None
        if name != self.under:
            self.under = name
            if post:
                self.post_message(self.BufferUnderCursor(name))

    # -- drawing ------------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self.refresh()

    def render(self) -> Text:
        if self.report is None:
            return Text("")
        cell = self._cell() if self.has_focus else None
        t = draw_map(
            self.report,
            self.columns,
            self.palette,
            rows=self.rows,
            selected=self.selected,
            window=self.window,
            cursor=cell,
            peak_style=self.peak_style,
            bound_style=self.bound_style,
        )
        return t

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
