"""Pipeline pane: every stage and pass in order, changed/unchanged, counts and time; filterable."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Checkbox, DataTable, Input, Label
from textual.widgets.data_table import RowDoesNotExist

from glowviz.session import StageRecord

PASS_WIDTH = 30
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


class PipelinePane(Vertical):
    """The left pane. Posts `StageSelected` when the highlighted stage changes."""

    class StageSelected(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.records: list[StageRecord] = []
        self.hide_unchanged = False
        self.filter_text = ""
        self.selected: int | None = None
        self._syncing = False

    def compose(self) -> ComposeResult:
        yield Label("Pipeline", classes="pane-title")
        yield Label("", id="pipeline-notes", classes="hidden")
        yield Input(placeholder="filter passes…", id="pipeline-filter")
        with Horizontal(id="pipeline-options"):
            yield Checkbox("hide unchanged", id="hide-unchanged")
        yield DataTable(id="pipeline-table", cursor_type="row", zebra_stripes=False)

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        t.add_column("#", key="idx", width=3)
        t.add_column("stage/pass", key="pass", width=PASS_WIDTH)
        t.add_column("", key="changed", width=1)
        t.add_column("count", key="count", width=7)
        t.add_column("ms", key="ms", width=5)

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
        mark = Text("●", style="bold green") if rec.changed else Text("·", style="dim")
        style = "" if rec.changed else "dim"
        label = Text(f"{STAGE_ABBR.get(rec.stage, rec.stage)}/", style="dim") + Text(
            rec.pass_name, style=style
        )
        label.truncate(PASS_WIDTH, overflow="ellipsis")
        return [
            Text(str(i), style="dim"),
            label,
            mark,
            Text(f"{rec.count_before}→{rec.count_after}", style=style),
            Text(f"{rec.time_ms:.1f}", style="dim"),
        ]

    def add_record(self, rec: StageRecord) -> None:
        self.records.append(rec)
        i = len(self.records) - 1
        if self.shows(rec):
            self.query_one(DataTable).add_row(*self._row(i, rec), key=str(i))

    def set_records(self, records: list[StageRecord]) -> None:
        self.records = list(records)
        self.rebuild()

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

    @on(Checkbox.Changed, "#hide-unchanged")
    def _hide(self, event: Checkbox.Changed) -> None:
        self.hide_unchanged = event.value
        self.rebuild()

    def toggle_hide_unchanged(self) -> None:
        cb = self.query_one("#hide-unchanged", Checkbox)
        cb.value = not cb.value
