"""Schedule view of the selected stage: the node order with the live bytes after each step (a
curve above, bars per step below), the peak marked, and the other orders side by side.

Before IRGen a graph stage has no schedule yet: the view shows the graph's live-bytes curve in
program order (the function's node list) beside the order the compile's scheduler would give
that graph. From the schedule stage on, it shows the schedule IRGen used (whether it fell back,
whether it is proven optimal) beside every other scheduler's order of the same graph (the low-level stages' own plans are in the Memory and
Lifetimes views)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from compiler.scheduling import Schedule
from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import hbar, sparkline
from glowviz.widgets.stage_view import InfoLine, StageView
from glowviz.widgets.styles import styles
from glowviz.widgets.virtual_table import Column, VirtualTable


class ScheduleView(StageView):
    CLEARED = ("schedule-info", "schedule-curve")

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        #: What is drawn: the primary order first, then the one beside it.
        self.schedules: list[Schedule] = []
        #: The last draw's arguments and the width it laid the columns out for.
        self._drawn: tuple | None = None
        self._drawn_width = 0

    def compose(self) -> ComposeResult:
        yield InfoLine("", id="schedule-info")
        yield Static("", id="schedule-curve")
        yield VirtualTable(id="schedule-table")

    def reset(self) -> None:
        super().reset()
        self.schedules = []
        self._drawn = None

    def on_resize(self) -> None:
        """The columns follow the width (a first draw can come before the view is laid out,
        and the terminal can be resized): 100x30 gets the narrow layout either way."""
        if self._drawn is not None and self.size.width != self._drawn_width:
            self._draw(*self._drawn)

    def show(self, session: CompileSession, index: int) -> None:
        self.session, self.index = session, index
        rec = session.stages[index]
        info = self.query_one("#schedule-info", Static)
        graph_stage = rec.ir_kind == "graph" and rec.stage != "schedule"

        def compute() -> list[Schedule]:
            scheds = session.schedules(index)
            if graph_stage:
                po = session.program_order(index)
                return [po, *scheds[:1]] if po is not None else list(scheds[:1])
            return list(scheds)

        def waiting() -> None:
            info.update(
                self.stage_label(session, index)
                + Text("  scheduling this stage's graph…", style="dim")
            )
            self.query_one("#schedule-curve", Static).update("")
            self.query_one(VirtualTable).clear()

        def failed(msg: str) -> None:
            info.update(self.stage_label(session, index) + Text(f"  failed: {msg}"))

        self.load(
            session,
            index,
            "schedules",
            compute,
            lambda data: self._draw(session, index, data, graph_stage),
            waiting,
            failed,
        )

    def _draw(
        self, session: CompileSession, index: int, scheds: list[Schedule], graph_stage: bool
    ) -> None:
        st = styles(self.app)
        info = self.query_one("#schedule-info", Static)
        t = self.query_one(VirtualTable)
        self.schedules = scheds
        self._drawn, self._drawn_width = (session, index, scheds, graph_stage), self.layout_width()
        if not scheds:
            reason = session.unavailable("schedule")
            info.update(
                self.stage_label(session, index)
                + Text(f"  not available: {reason}", style=st.bold("warn"))
            )
            t.clear()
            return
        used, others = scheds[0], scheds[1:]
        head = self.stage_label(session, index) + Text("  ")
        if graph_stage:
            head.append("before IRGen: ", style="bold")
            head.append("live bytes in program order (the node list)")
        else:
            j = session.stage_index("schedule")
            at = f" (stage {j})" if j is not None else ""
            head.append("schedule IRGen used: ", style="bold")
            head.append(f"{used.kind}{at}")
            if used.used and used.used != used.kind:
                head.append(f" (fell back to {used.used})", style=st.warn)
        head.append(f"  {len(used.order)} steps  peak ")
        head.append(fmt_bytes(used.peak_bytes), style=st.bold("removed"))
        head.append(f" at step {used.peak_step}")
        if not graph_stage:
            head.append("  ")
            if used.proven_optimal:
                head.append("proven optimal", style=st.bold("added"))
            else:
                head.append("not proven optimal", style="dim")
        for alt in others:
            diff = alt.peak_bytes - used.peak_bytes
            head.append(
                f"\n{alt.kind}{' on this graph' if graph_stage else ''}: peak "
                f"{fmt_bytes(alt.peak_bytes)} ({'+' if diff >= 0 else ''}{fmt_bytes(diff)})",
                style="dim",
            )
        info.update(head)
        width = max(20, (self._drawn_width or 100) - 4)
        curve = Text("live ", style="dim") + sparkline(
            used.live_bytes, width - 5, st.info, used.peak_step, st.removed
        )
        self.query_one("#schedule-curve", Static).update(curve)
        top = max(s.peak_bytes for s in scheds)
        # each schedule: its node, the live bytes and a bar, side by side in what is left; too
        # narrow for that (100x30 with the pipeline shown), the schedule IRGen used keeps its
        # live bytes and the others show their order only (their peaks are in the header)
        narrow = (width - 6) // len(scheds) < 34
        bar = 0 if narrow else max(6, min(24, (width - 6) // len(scheds) - 34))
        cols = [Column("#", justify="right")]
        for j, sched in enumerate(scheds):
            if narrow:
                cols.append(Column(sched.kind, flex=True))
                if j == 0:
                    cols.append(Column("live", width=11, justify="right"))
                continue
            cols += [
                Column(sched.kind, cap=36 if len(scheds) <= 2 else 24),
                Column("live", width=10, justify="right"),
                Column("", width=bar),
            ]
        t.set_columns(cols)
        palette = (st.info, st.accent, st.changed, st.added)
        rows = []
        n = max(len(s.order) for s in scheds)
        for k in range(n):
            row: list = [str(k)]
            for j, sched in enumerate(scheds):
                cells = 1 if narrow and j > 0 else 2 if narrow else 3
                if k < len(sched.order):
                    live = sched.live_bytes[k] if k < len(sched.live_bytes) else 0
                    peak = k == sched.peak_step
                    hot = st.bold("removed") if peak else ""
                    row += [
                        Text(sched.order[k].name, style=hot),
                        Text(fmt_bytes(live) + (" ◀" if peak else ""), style=hot),
                        hbar(live, top, bar, st.removed if peak else palette[j % len(palette)]),
                    ][:cells]
                else:
                    row += [""] * cells
            rows.append(row)
        t.set_rows(rows, keys=[str(k) for k in range(n)], cursor=max(0, used.peak_step))
