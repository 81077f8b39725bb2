"""Schedule view: the node order with the live bytes while each step runs as bars, peak marked,
beside every other scheduler's order on the same graph (optimal, child-mem-size, topological):
which one was used, whether it is proven optimal, and how much each other one needs more."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from compiler.scheduling import Schedule
from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import hbar

BAR = 24
COLOURS = ("cyan", "magenta", "green", "yellow")


def schedule_heading(schedules: list[Schedule]) -> Text:
    """The schedule used (and the one its order comes from when optimal fell back), its peak,
    whether no order can do better, then each other scheduler's peak and difference."""
    used = schedules[0]
    head = Text.assemble(
        ("schedule: ", "bold"),
        f"{used.kind}",
        (f" (fell back to {used.used})", "yellow") if used.used and used.used != used.kind else "",
        f"  {len(used.order)} steps  peak ",
        (fmt_bytes(used.peak_bytes), "bold red"),
        f" at step {used.peak_step}  ",
        ("proven optimal", "bold green") if used.proven_optimal else ("not proven optimal", "dim"),
    )
    for alt in schedules[1:]:
        diff = alt.peak_bytes - used.peak_bytes
        head.append(
            f"   |   {alt.kind}: peak {fmt_bytes(alt.peak_bytes)} "
            f"({'+' if diff >= 0 else ''}{fmt_bytes(diff)})"
        )
    return head


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
        info.update(schedule_heading(self.schedules))
        top = max(s.peak_bytes for s in self.schedules)
        bar = BAR if len(self.schedules) <= 2 else BAR // 2
        t.add_column("#", key="k", width=4)
        for j, sched in enumerate(self.schedules):
            t.add_column(f"{sched.kind}", key=f"node{j}")
            t.add_column("live", key=f"live{j}", width=10)
            t.add_column("", key=f"bar{j}", width=bar)
        n = max(len(s.order) for s in self.schedules)
        for k in range(n):
            row: list = [Text(str(k), style="dim")]
            for j, sched in enumerate(self.schedules):
                if k < len(sched.order):
                    live = sched.live_bytes[k] if k < len(sched.live_bytes) else 0
                    is_peak = k == sched.peak_step
                    row += [
                        Text(sched.order[k].name, style="bold red" if is_peak else ""),
                        Text(
                            fmt_bytes(live) + (" ◀" if is_peak else ""),
                            style="bold red" if is_peak else "",
                        ),
                        hbar(live, top, bar, "red" if is_peak else COLOURS[j % len(COLOURS)]),
                    ]
                else:
                    row += ["", "", ""]
            t.add_row(*row)
