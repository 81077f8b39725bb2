"""The memory timeline across passes: the peak and the lower bound after every pass that can
change memory -- the rows `glowviz mem --per-pass` prints (`glowviz.exports.per_pass`) -- as
bars, one point per pass. Left/right move the cursor, Enter jumps to that pass; the pass that
raised the peak the most is marked (every increase too, in a quieter colour), and the stage the
workspace shows is underlined. The memory-regression user's view."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from glowviz import keymap
from glowviz.session import fmt_bytes
from glowviz.widgets.bars import SPARKS


class MemoryTimeline(Widget, can_focus=True):
    BINDINGS = keymap.bindings("MemoryTimeline")

    class PassChosen(Message):
        """Go to the pass of a timeline point (a stage index)."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.rows: list[dict[str, Any]] = []
        self.partial: dict[int, tuple[int, int]] = {}  # stage -> (peak, bound) while computing
        self.status = ""
        self.cursor = 0
        self.current: int | None = None  # the stage the workspace shows
        self.colours: dict[str, str] = {"peak": "", "bound": "dim", "raise": "red", "up": ""}

    # -- data ---------------------------------------------------------------------------------
    def set_rows(self, rows: list[dict[str, Any]]) -> None:
        self.rows, self.partial, self.status = list(rows), {}, ""
        self.show_stage(self.current)
        self.refresh()

    def add_partial(self, index: int, peak: int, bound: int, status: str) -> None:
        self.partial[index] = (peak, bound)
        self.status = status
        self.refresh()

    def clear(self, status: str = "") -> None:
        self.rows, self.partial, self.status, self.cursor = [], {}, status, 0
        self.refresh()

    def show_stage(self, index: int | None) -> None:
        """Underline the point of stage `index` (or the last point at or before it) and put
        the cursor there."""
        self.current = index
        if self.rows and index is not None:
            at = [k for k, r in enumerate(self.rows) if r["index"] <= index]
            self.cursor = at[-1] if at else 0
        self.refresh()

    @property
    def raised_most(self) -> int | None:
        """The point whose pass raised the peak the most (None if no pass raised it)."""
        if not self.rows:
            return None
        k = max(range(len(self.rows)), key=lambda k: self.rows[k]["delta_bytes"])
        return k if self.rows[k]["delta_bytes"] > 0 else None

    # -- keys ---------------------------------------------------------------------------------
    def action_move(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))
            self.refresh()

    def action_move_to(self, k: int) -> None:
        if self.rows:
            self.cursor = k % len(self.rows)
            self.refresh()

    def action_choose(self) -> None:
        if self.rows:
            self.post_message(self.PassChosen(self.rows[self.cursor]["index"]))

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not self.rows:
            return
        per = self._per_point()
        k = offset.x // per if per else 0
        if 0 <= k < len(self.rows):
            self.cursor = k
            self.refresh()
            self.action_choose()

    # -- drawing ------------------------------------------------------------------------------
    def _per_point(self) -> int:
        return max(1, min(4, (self.size.width or 80) // max(1, len(self.rows))))

    def render(self) -> Text:
        height = max(2, self.size.height)
        bar_rows = height - 1
        if not self.rows:
            t = Text(no_wrap=True)
            if self.partial:
                top = max(p for p, _ in self.partial.values()) or 1
                for r in range(bar_rows):
                    for _i, (peak, _b) in sorted(self.partial.items()):
                        t.append(_cell(peak, top, bar_rows, r), style=self.colours["peak"])
                    t.append("\n")
            t.append(self.status or "memory timeline: not computed", style="dim")
            return t
        per = self._per_point()
        width = self.size.width or 80
        shown = self.rows[: max(1, width // per)]
        top = max(max(r["peak_bytes"] for r in shown), 1)
        most = self.raised_most
        t = Text(no_wrap=True, overflow="crop")
        for r in range(bar_rows):
            for k, row in enumerate(shown):
                peak, bound = row["peak_bytes"], row["lower_bound_bytes"]
                ch = _cell(peak, top, bar_rows, r)
                if ch == " " and _cell(bound, top, bar_rows, r) != " ":
                    ch = "·"
                if k == most:
                    style = self.colours["raise"]
                elif row["delta_bytes"] > 0:
                    style = self.colours["up"]
                else:
                    style = self.colours["peak"]
                if k == self.cursor and self.has_focus:
                    style += " reverse"
                cur = self.current is not None and row["index"] == self._current_point()
                if cur and r == bar_rows - 1:
                    style += " underline"
                t.append(ch * per, style=style)
            t.append("\n")
        t.append_text(self._caption(most))
        return t

    def _current_point(self) -> int | None:
        at = [
            r["index"] for r in self.rows if self.current is not None and r["index"] <= self.current
        ]
        return at[-1] if at else None

    def _caption(self, most: int | None) -> Text:
        row = self.rows[self.cursor]
        d = row["delta_bytes"]
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"#{row['index']} {row['stage']}/{row['pass']}", style="bold")
        t.append(f"  per-pass peak {fmt_bytes(row['peak_bytes'])}")
        t.append(f"  bound {fmt_bytes(row['lower_bound_bytes'])}", style="dim")
        if d:
            t.append(
                f"  {'+' if d > 0 else ''}{fmt_bytes(d)}",
                style=self.colours["raise"] if d > 0 else "",
            )
        if most is not None:
            m = self.rows[most]
            t.append(
                f"   ▲ peak raised most by {m['pass']} (#{m['index']})", style=self.colours["raise"]
            )
        t.append("   ←/→ Enter: go", style="dim")
        return t


def _cell(value: int, top: int, rows: int, r: int) -> str:
    """Row `r` (0 = top) of a bar of height value/top over `rows` rows, in eighths."""
    eighths = int(round(8 * rows * value / top)) if top else 0
    below = (rows - 1 - r) * 8  # eighths under this row
    fill = eighths - below
    if fill <= 0:
        return " "
    if fill >= 8:
        return "█"
    return SPARKS[fill - 1]
