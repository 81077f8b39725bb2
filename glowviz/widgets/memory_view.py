"""Memory view: the allocation map (offset × instruction index, one coloured block per buffer),
peak / lower bound / gap, the buffers live at the peak, why the selected buffer sits where it
does, and a comparison with another allocator or scheduler (recompiled in a worker)."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import colour
from glowviz.widgets.lifetimes_view import buffer_card

MAP_ROWS = 14


def allocator_names() -> list[str]:
    try:
        from compiler.memory.allocators import allocator_names as names

        return list(names())
    except Exception:  # noqa: BLE001
        return ["lower-bound", "first-fit"]


def scheduler_names() -> list[str]:
    try:
        from compiler.scheduling import SCHEDULERS

        return list(SCHEDULERS)
    except Exception:  # noqa: BLE001
        return ["child-mem-size", "topological"]


def draw_map(data: dict, width: int, rows: int = MAP_ROWS, selected: str | None = None) -> Text:
    """Offset (rows, top = 0) × instruction index (columns); each buffer a coloured block."""
    bufs = data["buffers"]
    n = max(1, data["n_instructions"])
    top = max([data["peak_bytes"]] + [b["offset"] + b["size"] for b in bufs] + [1])
    per_row = top / rows
    grid: list[list[str | None]] = [[None] * width for _ in range(rows)]
    for k, b in enumerate(bufs):
        c0 = int(b["first"] * width / n)
        c1 = max(c0, int((b["last"] + 1) * width / n) - 1)
        r0 = int(b["offset"] / per_row)
        r1 = max(r0, int((b["offset"] + b["size"] - 1) / per_row))
        st = "bold white on red" if b["name"] == selected else f"on {colour(k)}"
        for r in range(r0, min(r1 + 1, rows)):
            for c in range(c0, min(c1 + 1, width)):
                if grid[r][c] is None or b["name"] == selected:
                    grid[r][c] = st
    peak_col = int(data["peak_instruction"] * width / n)
    t = Text(no_wrap=True)
    for r in range(rows):
        t.append(f"{fmt_bytes(r * per_row):>9} ", style="dim")
        for c in range(width):
            st = grid[r][c]
            ch = "┃" if c == peak_col and st is None else " "
            t.append(ch, style=st or ("red" if c == peak_col else ""))
        t.append("\n")
    t.append(" " * 10 + "0".ljust(max(1, peak_col)) + "▲peak" + f"  (instr {n - 1} at right)",
             style="dim")
    return t


class MemoryView(Vertical):
    BINDINGS = [Binding("A", "cycle_allocator", "Compare allocator", id="memory.allocator"),
                Binding("S", "cycle_scheduler", "Compare scheduler", id="memory.scheduler")]

    class BufferSelected(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.session: CompileSession | None = None
        self.data: dict | None = None
        self.selected: str | None = None
        self.compare_text: Text | None = None
        self._alloc_k = 0
        self._sched_k = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="memory-figures")
        yield Static("", id="memory-map")
        with Horizontal(id="memory-bottom"):
            yield DataTable(id="memory-table", cursor_type="row")
            with VerticalScroll(id="memory-side"):
                yield Static("", id="memory-detail")
                yield Static("", id="memory-compare")

    def show(self, session: CompileSession, index: int | None = None) -> None:
        self.session = session
        data = session.memory_map()
        self.data = data
        figs = self.query_one("#memory-figures", Static)
        t = self.query_one("#memory-table", DataTable)
        t.clear(columns=True)
        if not data.get("available"):
            figs.update(Text(f"not available: {data.get('reason')}", style="bold yellow"))
            self.query_one("#memory-map", Static).update("")
            return
        figs.update(Text.assemble(
            ("memory: ", "bold"), f"allocator {data['allocator']}, scheduler {data['scheduler']}  ",
            "peak ", (fmt_bytes(data["peak_bytes"]), "bold red"),
            "  lower bound ", (fmt_bytes(data["lower_bound_bytes"]), "bold"),
            "  gap ", (f"{fmt_bytes(data['gap_bytes'])} ({data['gap_pct']:.1f}%)",
                       "bold green" if data["gap_bytes"] == 0 else "bold yellow"),
            "  no reuse ", fmt_bytes(data["no_reuse_bytes"]),
            (f"   peak at instr {data['peak_instruction']}: "
             f"{', '.join(data['live_at_peak'][:6])}"
             f"{'…' if len(data['live_at_peak']) > 6 else ''}", "dim"),
            ("\nA/S: compare with another allocator/scheduler", "dim")))
        self._redraw_map()
        t.add_column("buffer", key="name")
        t.add_column("offset", key="offset")
        t.add_column("size", key="size")
        t.add_column("live", key="live")
        t.add_column("peak", key="peak", width=4)
        at_peak = set(data["live_at_peak"])
        for b in (sorted(data["buffers"], key=lambda b: (b["offset"], b["first"]))):
            t.add_row(Text("■ ", style=colour(data["buffers"].index(b))) + Text(b["name"]),
                      str(b["offset"]), fmt_bytes(b["size"]), f"{b['first']}–{b['last']}",
                      Text("●", style="red") if b["name"] in at_peak else "", key=b["name"])
        if self.selected:
            self.select(self.selected)

    def _redraw_map(self) -> None:
        if self.data and self.data.get("available"):
            width = max(20, (self.size.width or 110) - 12)
            self.query_one("#memory-map", Static).update(
                draw_map(self.data, width, selected=self.selected))

    def select(self, name: str) -> bool:
        t = self.query_one("#memory-table", DataTable)
        try:
            t.move_cursor(row=t.get_row_index(name))
        except Exception:  # noqa: BLE001
            return False
        return True

    @on(DataTable.RowHighlighted, "#memory-table")
    def _highlight(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key is None or event.row_key.value is None or not self.data:
            return
        name = event.row_key.value
        self.selected = name
        b = next((x for x in self.data["buffers"] if x["name"] == name), None)
        if b is not None:
            self.query_one("#memory-detail", Static).update(buffer_card(b))
            self._redraw_map()
            self.post_message(self.BufferSelected(name))

    # -- comparison ---------------------------------------------------------------------------
    def action_cycle_allocator(self) -> None:
        names = allocator_names()
        cur = getattr(self.session.options, "allocator", None) if self.session else None
        others = [n for n in names if n != cur] or names
        self._alloc_k = (self._alloc_k + 1) % len(others)
        self.compare(allocator=others[self._alloc_k - 1])

    def action_cycle_scheduler(self) -> None:
        names = scheduler_names()
        cur = getattr(self.session.options, "scheduler", None) if self.session else None
        others = [n for n in names if n != cur] or names
        self._sched_k = (self._sched_k + 1) % len(others)
        self.compare(scheduler=others[self._sched_k - 1])

    def compare(self, allocator: str | None = None, scheduler: str | None = None) -> None:
        if self.session is None:
            return
        self.query_one("#memory-compare", Static).update(
            Text(f"compiling with {allocator or ''}{scheduler or ''}…", style="dim"))
        self._compare_worker(self.session, allocator, scheduler)

    @work(thread=True, exclusive=True, group="memory-compare")
    def _compare_worker(self, session: CompileSession, allocator: str | None,
                        scheduler: str | None) -> None:
        try:
            res = session.compare_memory(allocator, scheduler)
            text = compare_text(res)
        except Exception as e:  # noqa: BLE001
            text = Text(f"comparison failed: {type(e).__name__}: {e}", style="red")
        self.app.call_from_thread(self._set_compare, text)

    def _set_compare(self, text: Text) -> None:
        self.compare_text = text
        self.query_one("#memory-compare", Static).update(text)


def compare_text(res: dict) -> Text:
    t = Text("\ncomparison\n", style="bold")
    for key in ("base", "other"):
        r = res[key]
        t.append(f"{r['allocator']} / {r['scheduler']}: ", style="bold" if key == "base" else "")
        if r.get("available"):
            t.append(f"peak {fmt_bytes(r['peak_bytes'])}, lower bound "
                     f"{fmt_bytes(r['lower_bound_bytes'])}\n")
        else:
            t.append(f"not available: {r.get('reason')}\n", style="yellow")
    b, o = res["base"], res["other"]
    if b.get("available") and o.get("available"):
        d = o["peak_bytes"] - b["peak_bytes"]
        pct = 100.0 * d / b["peak_bytes"] if b["peak_bytes"] else 0.0
        t.append(f"difference: {'+' if d >= 0 else ''}{fmt_bytes(d)} ({pct:+.1f}%)",
                 style="red" if d > 0 else "green")
    if res.get("error"):
        t.append(f"\n{res['error']}", style="red")
    return t
