"""Schedule view: the node order with the live bytes after each step as bars, peak marked, and
the alternative scheduler (topological vs child-mem-size) side by side."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import hbar

BAR = 24


class ScheduleView(Vertical):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.data: dict | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="schedule-info")
        yield DataTable(id="schedule-table", cursor_type="row")

    def show(self, session: CompileSession, index: int | None = None) -> None:
        info = self.query_one("#schedule-info", Static)
        t = self.query_one("#schedule-table", DataTable)
        t.clear(columns=True)
        data = session.schedule_data()
        self.data = data
        if not data.get("available"):
            info.update(Text(f"not available: {data.get('reason')}", style="bold yellow"))
            return
        alts = data.get("alternatives") or {}
        alt_name, alt = next(iter(alts.items()), (None, None))
        peak = data["peak"]
        top = max([peak] + ([alt["peak"]] if alt else []))
        head = Text.assemble(
            ("schedule: ", "bold"),
            f"{data.get('scheduler')}  ",
            f"{len(data['order'])} steps  peak ",
            (fmt_bytes(peak), "bold red"),
            f" at step {data['peak_index']}",
        )
        if alt:
            diff = alt["peak"] - peak
            head.append(
                f"   |   {alt_name}: peak {fmt_bytes(alt['peak'])} "
                f"({'+' if diff >= 0 else ''}{fmt_bytes(diff)})"
            )
        elif data.get("alternatives_error"):
            head.append(f"   (no comparison: {data['alternatives_error']})", style="dim")
        info.update(head)
        t.add_column("#", key="k", width=4)
        t.add_column(f"{data.get('scheduler')}", key="node")
        t.add_column("live", key="live", width=10)
        t.add_column("", key="bar", width=BAR)
        if alt:
            t.add_column(f"{alt_name}", key="alt_node")
            t.add_column("live", key="alt_live", width=10)
            t.add_column("", key="alt_bar", width=BAR)
        n = max(len(data["order"]), len(alt["order"]) if alt else 0)
        for k in range(n):
            row: list = [Text(str(k), style="dim")]
            for d, name_key in ((data, "node"), (alt, "alt")):
                if d is None:
                    continue
                if k < len(d["order"]):
                    live = d["live_bytes"][k] if k < len(d["live_bytes"]) else 0
                    is_peak = k == d["peak_index"]
                    row += [
                        Text(d["order"][k], style="bold red" if is_peak else ""),
                        Text(
                            fmt_bytes(live) + (" ◀" if is_peak else ""),
                            style="bold red" if is_peak else "",
                        ),
                        hbar(
                            live,
                            top,
                            BAR,
                            "red" if is_peak else ("cyan" if name_key == "node" else "magenta"),
                        ),
                    ]
                else:
                    row += ["", "", ""]
            t.add_row(*row)
