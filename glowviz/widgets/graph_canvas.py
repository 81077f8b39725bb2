"""GraphCanvas: a laid-out graph (`graph_layout.Drawing`) in a scrollable viewport that draws only
the lines in view; the Graph view's whole-graph mode pans it with the keyboard (arrows, page
keys; the view zooms by drawing the layout again at another scale) and centres a box in it.
`minimap` draws the overview: the boxes as dots, the viewport as a frame."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from glowviz.widgets.graph_layout import Drawing


class GraphCanvas(ScrollView, can_focus=True):
    class Scrolled(Message):
        """The view moved (the minimap follows)."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.drawing: Drawing | None = None
        self.placeholder = Text("")

    def set_drawing(self, drawing: Drawing | None, placeholder: Text | None = None) -> None:
        self.drawing = drawing
        self.placeholder = placeholder or Text("")
        self.virtual_size = Size(drawing.width, drawing.height) if drawing else Size(0, 0)
        self.refresh()

    def centre_on(self, name: str) -> bool:
        """Scroll so that box `name` is in the middle of the view."""
        d = self.drawing
        if d is None or name not in d.boxes:
            return False
        x0, y0, x1, y1 = d.boxes[name]
        w, h = self.scrollable_content_region.size
        self.scroll_to(
            x=max(0, (x0 + x1) // 2 - w // 2),
            y=max(0, (y0 + y1) // 2 - h // 2),
            animate=False,
            immediate=True,
        )
        return True

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_x(old_value, new_value)
        self.post_message(self.Scrolled())

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.post_message(self.Scrolled())

    def viewport(self) -> tuple[int, int, int, int]:
        """(x0, y0, x1, y1) of the drawing in view (cells, exclusive ends)."""
        w, h = self.scrollable_content_region.size
        x, y = round(self.scroll_x), round(self.scroll_y)
        return x, y, x + w, y + h

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        d = self.drawing
        if d is None:
            if y == 0 and self.placeholder.plain:
                segs = list(self.placeholder.render(self.app.console, end=""))
                return Strip(segs).crop_extend(0, width, base)
            return Strip.blank(width, base)
        row = round(self.scroll_y) + y
        if not 0 <= row < len(d.lines):
            return Strip.blank(width, base)
        x = round(self.scroll_x)
        line = d.lines[row]
        segs = [
            Segment(s.text, base + s.style if s.style else base)
            for s in line.render(self.app.console, end="")
        ]
        return Strip(segs).crop_extend(x, x + width, base)


def minimap(
    d: Drawing,
    view: tuple[int, int, int, int],
    width: int,
    height: int,
    marks: dict[str, str] | None = None,
    selected: str | None = None,
) -> Text:
    """The whole drawing in `width` x `height` cells: a dot per box (its mark's style, the
    selected box reversed), the viewport as a frame."""
    sx = max(1e-9, d.width / width)
    sy = max(1e-9, d.height / height)
    cells: list[list[tuple[str, str]]] = [[(" ", "")] * width for _ in range(height)]
    for name, (x0, y0, x1, y1) in d.boxes.items():
        c = min(width - 1, int(((x0 + x1) / 2) / sx))
        r = min(height - 1, int(((y0 + y1) / 2) / sy))
        style = (marks or {}).get(name, "")
        if name == selected:
            cells[r][c] = ("●", "bold reverse")
        elif cells[r][c][0] == " " or style:
            cells[r][c] = ("•", style or "")
    vx0, vy0, vx1, vy1 = view
    c0, c1 = int(vx0 / sx), min(width - 1, max(int(vx0 / sx), int((vx1 - 1) / sx)))
    r0, r1 = int(vy0 / sy), min(height - 1, max(int(vy0 / sy), int((vy1 - 1) / sy)))
    for r in range(max(0, r0), min(height, r1 + 1)):
        for c in range(max(0, c0), min(width, c1 + 1)):
            ch, st = cells[r][c]
            edge = r in (r0, r1) or c in (c0, c1)
            if edge and ch == " ":
                ch = "·"
            cells[r][c] = (ch, (st + " " if st else "") + ("bold" if edge else ""))
    t = Text(no_wrap=True, overflow="crop")
    for r, row in enumerate(cells):
        if r:
            t.append("\n")
        for ch, st in row:
            t.append(ch, style=st)
    return t
