"""Lifetimes view of the selected stage's plan: one bar per buffer over instruction indices; sort
by start/size/name; the selected buffer's card (size, shape, producer, users, lifetime, why
it sits where it does)."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static

from compiler.memory.report import MemoryReport, ReportBuffer
from glowviz import keymap, themes
from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import colour, span_bar
from glowviz.widgets.stage_view import InfoLine, StageView
from glowviz.widgets.virtual_table import Column, VirtualTable

SORTS = ("start", "size", "name")


def report_label(session: CompileSession, index: int) -> str:
    """How the plan of stage `index` was made (what the Memory and Lifetimes views show)."""
    rec = session.stages[index]
    if rec.stage == "memory" or (session.done and index == len(session.stages) - 1):
        return "the compile's plan"
    if rec.ir_kind == "lir":
        return "this stage's LIR planned as it is"
    return "this graph through the whole low-level pipeline"


def load_plan(
    view: StageView,
    session: CompileSession,
    index: int,
    header: Static,
    draw: Callable[[MemoryReport | None], None],
    clear: Callable[[], None] | None = None,
) -> None:
    """Draw stage `index`'s memory plan with `draw`, saying in `header` that it is being planned
    while a worker computes it (a graph stage's plan runs the low-level pipeline)."""

    def waiting() -> None:
        header.update(
            view.stage_label(session, index)
            + Text(f"  planning: {report_label(session, index)}…", style="dim")
        )
        if clear is not None:
            clear()

    def failed(msg: str) -> None:
        header.update(view.stage_label(session, index) + Text(f"  planning failed: {msg}"))

    view.load(
        session, index, "memory_report", lambda: session.memory_report(index), draw, waiting, failed
    )


def lifetime_bar_width(view_width: int) -> int:
    """The lifetime bar's columns in a view `view_width` wide: what the size and live columns,
    the padding and the scrollbar leave, less room for the names (36 columns, or half of it
    when that would squeeze the bar under 24)."""
    avail = view_width - 2 * 4 - 10 - 11 - 2
    return max(10, avail - 36 if avail - 36 >= 24 else avail // 2)


class LifetimesView(StageView):
    CLEARED = ("lifetimes-info", "lifetimes-detail")
    BINDINGS = keymap.bindings("LifetimesView")

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.sort = "start"
        self.report: MemoryReport | None = None
        self.buffers: tuple[ReportBuffer, ...] = ()
        self.n = 0
        self.selected: str | None = None
        self._bar_width = 0  # the lifetime bar's width in the rows drawn

    def compose(self) -> ComposeResult:
        yield InfoLine("", id="lifetimes-info")
        yield VirtualTable(id="lifetimes-table")
        yield Static("", id="lifetimes-detail")

    def reset(self) -> None:
        super().reset()
        self.report, self.buffers, self.n = None, (), 0

    def show(self, session: CompileSession, index: int) -> None:
        self.session, self.index = session, index
        load_plan(
            self,
            session,
            index,
            self.query_one("#lifetimes-info", Static),
            self._draw,
            lambda: self.query_one(VirtualTable).clear(),
        )

    def on_resize(self) -> None:
        # the bar follows the width (the pipeline pane shown or hidden)
        if (
            self.report is not None
            and self.session is not None
            and self.index is not None
            and lifetime_bar_width(self.size.width or 100) != self._bar_width
        ):
            self._draw(self.report)

    def _draw(self, report: MemoryReport | None) -> None:
        session, index = self.session, self.index
        assert session is not None and index is not None
        from glowviz.widgets.styles import styles

        info = self.query_one("#lifetimes-info", Static)
        t = self.query_one(VirtualTable)
        self.report = report
        if report is None:
            self.buffers = ()
            t.clear()
            reason = session.unavailable("memory plan")
            info.update(
                self.stage_label(session, index)
                + Text(f"  not available: {reason}", style=styles(self.app).bold("warn"))
            )
            return
        self.buffers, self.n = report.buffers, report.n_instructions
        info.update(
            self.stage_label(session, index)
            + Text.assemble(
                f"  {report_label(session, index)}\n",
                f"{len(self.buffers)} buffers over {self.n} instructions, sorted by ",
                (self.sort, "bold"),
                ("   o: sort", "dim"),
            )
        )
        width = self._bar_width = lifetime_bar_width(self.layout_width() or 100)
        t.set_columns(
            [
                # the width the bar leaves: at 100x30 a capped name column pushed the bar past
                # the table's edge, where only a horizontal scroll showed it
                Column("buffer", flex=True),
                Column("size", width=10, justify="right"),
                Column("live", cap=11),
                Column(f"0 … {max(self.n - 1, 0)}", width=width),
            ]
        )
        key = {
            "start": lambda b: (b.first, b.last, b.name),
            "size": lambda b: (-b.size, b.first),
            "name": lambda b: b.name,
        }[self.sort]
        order = sorted(range(len(self.buffers)), key=lambda k: key(self.buffers[k]))
        palette = themes.theme(self.app.theme).buffer_colours
        rows: list[list[str | Text]] = []
        for k in order:
            b = self.buffers[k]
            rows.append(
                [
                    b.name,
                    fmt_bytes(b.size),
                    f"{b.first}–{b.last}",
                    span_bar(b.first, b.last, self.n, width, colour(k, palette)),
                ]
            )
        names = [self.buffers[k].name for k in order]
        cursor = names.index(self.selected) if self.selected in names else 0
        t.set_rows(rows, keys=names, cursor=cursor)
        self._card(t.cursor_key)

    def select(self, name: str) -> bool:
        t = self.query_one(VirtualTable)
        k = t.get_row_index(name)
        if k is None:  # not in this table (e.g. another stage's buffer)
            return False
        t.move_cursor(k)
        return True

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        if self.report is not None:
            self._draw(self.report)

    @on(VirtualTable.RowHighlighted, "#lifetimes-table")
    def _highlight(self, event: VirtualTable.RowHighlighted) -> None:
        event.stop()
        if event.key is None:
            return
        self.selected = event.key
        self._card(event.key)

    def _card(self, name: str | None) -> None:
        b = self.report.buffer(name) if self.report is not None and name else None
        detail = self.query_one("#lifetimes-detail", Static)
        if b is None or self.session is None:
            detail.update("")
            return
        detail.update(buffer_card(b, self.session.buffer_info(self.index, b.name)))


def buffer_card(b: ReportBuffer, info: dict | None = None) -> Text:
    """Name, size, shape, offset, lifetime, producer, users and why the buffer sits there."""
    info = info or {}
    t = Text()
    t.append(f"{b.name}", style="bold")
    t.append(f"  {fmt_bytes(b.size)}")
    if "shape" in info:
        shape = "x".join(str(d) for d in info["shape"])
        t.append(f"  {info['dtype']}<{shape}>")
    if info.get("padding"):
        t.append(f"  ({fmt_bytes(info['padding'])} alignment padding)", style="dim")
    t.append(f"\nat offset {b.offset} ({b.region})  live {b.first}–{b.last}")
    t.append(f" ({b.last - b.first + 1} instructions)\n", style="dim")
    if b.alias_of:
        t.append("alias of: ", style="dim")
        t.append(f"%{b.alias_of}", style="bold")
        t.append("  (shares its bytes by design; no memory of its own)\n", style="dim")
    t.append("producer: ", style="dim")
    t.append(f"{b.producer or b.instruction or '?'}")
    if b.instruction and b.instruction != b.producer:
        t.append(f" (instruction {b.instruction})", style="dim")
    t.append("   users: ", style="dim")
    users = ", ".join(b.users[:8]) + (f" … +{len(b.users) - 8}" if len(b.users) > 8 else "")
    t.append(users or "-")
    if b.reason:
        t.append("\nwhy here: ", style="dim")
        t.append(b.reason, style="italic")
    return t
