"""Pipeline pane: every stage and pass in order, changed/unchanged, counts and time; filterable.

Stages stream in while the compile runs (`add_record`); the columns grow with their widest cell
so a count like 495→2018 or a time of 5025 ms is never cut, and under a width threshold the
time column gives way to the pass name (the count column stays)."""

from __future__ import annotations

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Checkbox, DataTable, Input, Label
from textual.widgets.data_table import RowDoesNotExist

from glowviz.session import StageRecord
from glowviz.widgets.styles import styles

STAGE_ABBR = {
    "import": "imp",
    "graph-opt": "opt",
    "lower": "low",
    "post-lower-opt": "post",
    "schedule": "sched",
    "irgen": "irgen",
    "lir-opt": "lir",
    "memory": "mem",
}
#: Below this pane width the time column is left out (the count column always stays).
NARROW = 44


def fmt_ms(ms: float) -> str:
    """A pass time in a few characters: 0.4, 12.5, 317, 5025, 12.3s."""
    if ms < 100:
        return f"{ms:.1f}"
    if ms < 10_000:
        return f"{ms:.0f}"
    return f"{ms / 1000:.1f}s"


def fmt_count(rec: StageRecord) -> str:
    return f"{rec.count_before}→{rec.count_after}"


class PipelinePane(Vertical):
    """The left pane. Posts `StageSelected` when the highlighted stage changes."""

    class StageSelected(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    class FilterLeft(Message):
        """Escape in the filter box: the screen gives the keys back to the views."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.records: list[StageRecord] = []
        self.hide_unchanged = False
        self.filter_text = ""
        self.selected: int | None = None
        self._syncing = False
        self._widths: dict[str, int] = {}
        self._narrow: bool | None = None
        self._status = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="pipeline-head"):
            yield Label("Pipeline", classes="pane-title", id="pipeline-title")
            yield Checkbox("hide unchanged", id="hide-unchanged")
        yield Label("", id="pipeline-notes", classes="hidden")
        yield Input(placeholder="filter passes… (Esc: back)", id="pipeline-filter")
        yield DataTable(id="pipeline-table", cursor_type="row", zebra_stripes=False)

    def on_mount(self) -> None:
        self._columns()

    def on_resize(self, event: events.Resize) -> None:
        if self._wanted_widths() != self._widths:
            self._columns()
            self.rebuild()

    # -- columns ------------------------------------------------------------------------------
    def _wanted_widths(self) -> dict[str, int]:
        """Each column as wide as its widest cell (so nothing is cut), the pass name taking
        what is left of the pane."""
        recs = self.records
        count = max([5, *(len(fmt_count(r)) for r in recs)])
        ms = max([2, *(len(fmt_ms(r.time_ms)) for r in recs)])
        idx = max(1, len(str(max(len(recs) - 1, 0))))
        narrow = (self.size.width or 62) < NARROW
        # The pane's border is not the table's; DataTable pads every cell (the name's too) by
        # one column on each side; 2 more for the vertical scrollbar.
        avail = self.content_size.width or 61
        fixed = (idx + 2) + (1 + 2) + (count + 2) + (0 if narrow else ms + 2) + 2 + 2
        name = max(8, avail - fixed)
        return {"idx": idx, "pass": name, "count": count, "ms": 0 if narrow else ms}

    def _columns(self) -> None:
        t = self.query_one(DataTable)
        widths = self._wanted_widths()
        self._narrow = widths["ms"] == 0
        self._widths = widths
        t.clear(columns=True)
        t.add_column("#", key="idx", width=widths["idx"])
        t.add_column("stage/pass", key="pass", width=widths["pass"])
        t.add_column("", key="changed", width=1)
        t.add_column("count", key="count", width=widths["count"])
        if not self._narrow:
            t.add_column("ms", key="ms", width=widths["ms"])

    def _fit(self) -> None:
        """Widen the columns when a new record's cells would not fit (stages stream in)."""
        if self._wanted_widths() != self._widths:
            self._columns()
            self.rebuild()

    # -- data ---------------------------------------------------------------------------------
    def set_notes(self, notes: list[str]) -> None:
        """The frontend's notes on the model (opset upgrade, specialized inputs), above the
        stages; hidden when there are none."""
        label = self.query_one("#pipeline-notes", Label)
        label.update(Text("\n".join(f"note: {n}" for n in notes), style="italic"))
        label.set_class(not notes, "hidden")

    def shows(self, rec: StageRecord) -> bool:
        """Whether the filters keep `rec` in the table."""
        if self.hide_unchanged and not rec.changed and rec.index != 0:
            return False
        f = self.filter_text.lower()
        return not f or f in rec.pass_name.lower() or f in rec.stage.lower()

    def visible_indices(self) -> list[int]:
        return [i for i, r in enumerate(self.records) if self.shows(r)]

    def _row(self, i: int, rec: StageRecord) -> list:
        mark = (
            Text("●", style=styles(self.app).bold("added"))
            if rec.changed
            else Text("·", style="dim")
        )
        style = "" if rec.changed else "dim"
        label = Text(f"{STAGE_ABBR.get(rec.stage, rec.stage)}/", style="dim") + Text(
            rec.pass_name, style=style
        )
        label.truncate(self._widths.get("pass", 30), overflow="ellipsis")
        row = [
            Text(str(i), style="dim"),
            label,
            mark,
            Text(fmt_count(rec), style=style, justify="right"),
        ]
        if not self._narrow:
            row.append(Text(fmt_ms(rec.time_ms), style="dim", justify="right"))
        return row

    def add_record(self, rec: StageRecord) -> None:
        self.records.append(rec)
        i = len(self.records) - 1
        if self._wanted_widths() != self._widths:
            self._fit()
            return
        if self.shows(rec):
            self.query_one(DataTable).add_row(*self._row(i, rec), key=str(i))

    def set_records(self, records: list[StageRecord]) -> None:
        self.records = list(records)
        if self._wanted_widths() != self._widths:
            self._columns()
        self.rebuild()

    def set_status(self, text: str) -> None:
        """The pane's title line: how far the compile got."""
        self._status = text
        self._title()

    def _title(self) -> None:
        t = Text("Pipeline ", style="bold")
        shown = len(self.visible_indices()) if self.filter_text and self.records else None
        if shown == 0:
            # the table is empty: say why first (the filter's text stays after Escape)
            t.append(f"no pass matches '{self.filter_text}'", style=styles(self.app).bold("warn"))
        else:
            t.append(self._status)
            if shown is not None:
                t.append(f" · {shown} match '{self.filter_text}'", style="dim")
        if self.hide_unchanged:  # said here too: under the width threshold the box is hidden
            t.append(" · changed only", style="dim")
        self.query_one("#pipeline-title", Label).update(t)

    def rebuild(self) -> None:
        t = self.query_one(DataTable)
        self._syncing = True
        t.clear()
        for i in self.visible_indices():
            t.add_row(*self._row(i, self.records[i]), key=str(i))
        self._syncing = False
        if self.selected is not None:
            self.select(self.selected, post=False)

    def select(self, index: int, post: bool = True) -> None:
        """Highlight stage `index` (if it is visible) and tell the views."""
        t = self.query_one(DataTable)
        self.selected = index
        try:
            row = t.get_row_index(str(index))
        except RowDoesNotExist:  # the stage is filtered out
            row = None
        if row is not None and t.cursor_row != row:
            self._syncing = True
            t.move_cursor(row=row)
            self._syncing = False
        if post:
            self.post_message(self.StageSelected(index))

    def step(self, delta: int) -> None:
        vis = self.visible_indices()
        if not vis:
            return
        cur = self.selected if self.selected is not None else vis[0]
        if delta > 0:
            nxt = next((i for i in vis if i > cur), vis[-1])
        else:
            nxt = next((i for i in reversed(vis) if i < cur), vis[0])
        self.select(nxt)

    # -- events -------------------------------------------------------------------------------
    @on(DataTable.RowHighlighted, "#pipeline-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if self._syncing or event.row_key is None or event.row_key.value is None:
            return
        idx = int(event.row_key.value)
        if idx != self.selected:
            self.selected = idx
            self.post_message(self.StageSelected(idx))

    @on(Input.Changed, "#pipeline-filter")
    def _filter(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.rebuild()
        self._title()

    @on(Checkbox.Changed, "#hide-unchanged")
    def _hide(self, event: Checkbox.Changed) -> None:
        self.hide_unchanged = event.value
        self._title()
        self.rebuild()

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.app.focused is self.query_one("#pipeline-filter"):
            # Leave the filter (its text stays): the keys are the workspace's again.
            event.stop()
            self.post_message(self.FilterLeft())

    def toggle_hide_unchanged(self) -> None:
        cb = self.query_one("#hide-unchanged", Checkbox)
        cb.value = not cb.value
