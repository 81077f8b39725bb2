"""Schedule view: the node order with the live bytes after each step as bars, peak marked, and
the alternative scheduler (topological vs child-mem-size) side by side."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from compiler.scheduling import Schedule
from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import hbar

BAR = 24


class ScheduleView(Vertical):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        #: The session's schedules: the one used, then the alternatives.
        self.schedules: list[Schedule] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="schedule-info")
        yield DataTable(id="schedule-table", cursor_type="row")

    def show(self, session: CompileSession, index: int | None = None) -> None:
        info = self.query_one("#schedule-info", Static)
        t = self.query_one("#schedule-table", DataTable)
        t.clear(columns=True)
        self.schedules = session.schedules()
        if not self.schedules:
            reason = session.unavailable("schedule")
            info.update(Text(f"not available: {reason}", style="bold yellow"))
            return
        used, alt = self.schedules[0], next(iter(self.schedules[1:]), None)
        top = max([used.peak_bytes] + ([alt.peak_bytes] if alt else []))
        head = Text.assemble(
            ("schedule: ", "bold"),
            f"{used.kind}  ",
            f"{len(used.order)} steps  peak ",
            (fmt_bytes(used.peak_bytes), "bold red"),
            f" at step {used.peak_step}",
        )
        if alt:
            diff = alt.peak_bytes - used.peak_bytes
            head.append(
                f"   |   {alt.kind}: peak {fmt_bytes(alt.peak_bytes)} "
                f"({'+' if diff >= 0 else ''}{fmt_bytes(diff)})"
            )
        info.update(head)
        t.add_column("#", key="k", width=4)
        t.add_column(f"{used.kind}", key="node")
        t.add_column("live", key="live", width=10)
        t.add_column("", key="bar", width=BAR)
        if alt:
            t.add_column(f"{alt.kind}", key="alt_node")
            t.add_column("live", key="alt_live", width=10)
            t.add_column("", key="alt_bar", width=BAR)
        n = max(len(used.order), len(alt.order) if alt else 0)
        for k in range(n):
            row: list = [Text(str(k), style="dim")]
            for sched, colour in ((used, "cyan"), (alt, "magenta")):
                if sched is None:
                    continue
                if k < len(sched.order):
                    live = sched.live_bytes[k] if k < len(sched.live_bytes) else 0
                    is_peak = k == sched.peak_step
                    row += [
                        Text(sched.order[k].name, style="bold red" if is_peak else ""),
                        Text(
                            fmt_bytes(live) + (" ◀" if is_peak else ""),
                            style="bold red" if is_peak else "",
                        ),
                        hbar(live, top, BAR, "red" if is_peak else colour),
                    ]
                else:
                    row += ["", "", ""]
            t.add_row(*row)
