"""Lifetimes view: one bar per buffer over instruction indices; sort by start/size/name;
the selected buffer's producer, users, size and offset."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.widgets.data_table import RowDoesNotExist

from compiler.memory.report import ReportBuffer
from glowviz import themes
from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import colour, span_bar

SORTS = ("start", "size", "name")


class LifetimesView(Vertical):
    BINDINGS = [Binding("o", "cycle_sort", "Sort", id="lifetimes.sort")]

    class BufferSelected(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.sort = "start"
        self.buffers: tuple[ReportBuffer, ...] = ()
        self.n = 0
        self.session: CompileSession | None = None
        self.selected: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="lifetimes-info")
        yield DataTable(id="lifetimes-table", cursor_type="row")
        yield Static("", id="lifetimes-detail")

    def show(self, session: CompileSession, index: int | None = None) -> None:
        self.session = session
        report = session.memory_report()
        info = self.query_one("#lifetimes-info", Static)
        t = self.query_one("#lifetimes-table", DataTable)
        t.clear(columns=True)
        if report is None:
            self.buffers = ()
            reason = session.unavailable("memory plan")
            info.update(Text(f"not available: {reason}", style="bold yellow"))
            return
        self.buffers, self.n = report.buffers, report.n_instructions
        info.update(
            Text.assemble(
                ("lifetimes: ", "bold"),
                f"{len(self.buffers)} buffers over {self.n} instructions  sorted by ",
                (self.sort, "bold"),
                ("   o: change sort", "dim"),
            )
        )
        width = max(20, (self.size.width or 100) - 50)
        t.add_column("buffer", key="name")
        t.add_column("size", key="size", width=9)
        t.add_column("live", key="live", width=9)
        t.add_column(f"0 … {self.n - 1}", key="bar", width=width)
        key = {
            "start": lambda b: (b.first, b.last, b.name),
            "size": lambda b: (-b.size, b.first),
            "name": lambda b: b.name,
        }[self.sort]
        order = sorted(range(len(self.buffers)), key=lambda k: key(self.buffers[k]))
        palette = themes.theme(self.app.theme).buffer_colours
        for k in order:
            b = self.buffers[k]
            t.add_row(
                b.name,
                fmt_bytes(b.size),
                f"{b.first}–{b.last}",
                span_bar(b.first, b.last, self.n, width, colour(k, palette)),
                key=b.name,
            )
        if self.selected:
            self.select(self.selected)

    def select(self, name: str) -> bool:
        t = self.query_one("#lifetimes-table", DataTable)
        try:
            t.move_cursor(row=t.get_row_index(name))
        except RowDoesNotExist:  # not in this table (e.g. another stage's buffer)
            return False
        return True

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        if self.session is not None:
            self.show(self.session)

    @on(DataTable.RowHighlighted, "#lifetimes-table")
    def _highlight(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key is None or event.row_key.value is None:
            return
        name = event.row_key.value
        self.selected = name
        b = next((x for x in self.buffers if x.name == name), None)
        if b is None:
            return
        self.query_one("#lifetimes-detail", Static).update(buffer_card(b))
        self.post_message(self.BufferSelected(name))


def buffer_card(b: ReportBuffer) -> Text:
    t = Text()
    t.append(f"{b.name}", style="bold")
    t.append(f"  {fmt_bytes(b.size)} at offset {b.offset} ({b.region})  live {b.first}–{b.last}\n")
    if b.alias_of:
        t.append("alias of: ", style="dim")
        t.append(f"%{b.alias_of}", style="bold")
        t.append("  (shares its bytes by design; no memory of its own)\n", style="dim")
    t.append("producer: ", style="dim")
    t.append(f"{b.instruction or '?'}   ")
    t.append("users: ", style="dim")
    t.append(", ".join(b.users) or "-")
    if b.reason:
        t.append("\nwhy here: ", style="dim")
        t.append(b.reason, style="italic")
    return t
