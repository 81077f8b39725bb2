"""Debugger view: the final LIR's instructions with a breakpoint gutter and the current
position, stepping on a `SteppingExecutor` (the arena interpreter now, LLVM later), and the
current instruction's operands: offset, shape, min/max/mean, NaN/Inf and a 2-D slice."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from glowviz.session import CompileSession, Debugger, fmt_bytes, slice_2d


class DebuggerView(Vertical):
    BINDINGS = [Binding("s", "step", "Step", id="debug.step"),
                Binding("n", "next", "Next", id="debug.next"),
                Binding("c", "cont", "Continue", id="debug.continue"),
                Binding("b", "toggle_breakpoint", "Breakpoint", id="debug.breakpoint"),
                Binding("r", "restart", "Restart", id="debug.restart")]

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.session: CompileSession | None = None
        self.dbg: Debugger | None = None
        self.busy = False

    def compose(self) -> ComposeResult:
        yield Static("", id="debug-status")
        with Horizontal():
            yield DataTable(id="debug-table", cursor_type="row")
            with VerticalScroll(id="debug-side"):
                yield Static("", id="debug-operands")

    def on_mount(self) -> None:
        t = self.query_one("#debug-table", DataTable)
        t.add_column("", key="gutter", width=2)
        t.add_column("#", key="k", width=4)
        t.add_column("instruction", key="text")

    def show(self, session: CompileSession, index: int | None = None) -> None:
        if session is self.session and self.dbg is not None:
            return
        self.session = session
        self.dbg = session.get_debugger()
        t = self.query_one("#debug-table", DataTable)
        t.clear()
        for ins in self.dbg.instrs:
            t.add_row("", Text(str(ins["index"]), style="dim"),
                      Text(ins["text"], no_wrap=True), key=str(ins["index"]))
        self.refresh_state()

    def refresh_state(self) -> None:
        dbg = self.dbg
        status = self.query_one("#debug-status", Static)
        if dbg is None:
            return
        if not dbg.available:
            status.update(Text(f"not available: {dbg.reason_unavailable}", style="bold yellow"))
            return
        t = self.query_one("#debug-table", DataTable)
        for k in range(len(dbg.instrs)):
            g = Text("●", style="bold red") if k in dbg.breakpoints else Text(" ")
            if k == dbg.pc:
                g = Text("▶", style="bold green") if k not in dbg.breakpoints else \
                    Text("◉", style="bold yellow")
            t.update_cell(str(k), "gutter", g)
        if dbg.pc < len(dbg.instrs):
            t.move_cursor(row=dbg.pc)
        extra = []
        if dbg.op_breakpoints:
            extra.append("on ops: " + ", ".join(sorted(dbg.op_breakpoints)))
        if dbg.write_breakpoints:
            extra.append("on writes: " + ", ".join(sorted(dbg.write_breakpoints)))
        status.update(Text.assemble(
            ("debugger ", "bold"), f"[{getattr(dbg.executor, 'name', '?')}]  ",
            ("finished" if dbg.finished else f"pc {dbg.pc}/{len(dbg.instrs)}", "bold"),
            f"  {dbg.stop_reason}  ",
            (f"breakpoints: {sorted(dbg.breakpoints)} " if dbg.breakpoints else "", "red"),
            (" ".join(extra), "red"),
            ("\ns/n: step  c: continue  b: breakpoint  r: restart", "dim")))
        self.query_one("#debug-operands", Static).update(self._operands())

    def _operands(self) -> Table | Text:
        dbg = self.dbg
        assert dbg is not None
        k = dbg.pc if not dbg.finished else len(dbg.instrs) - 1
        if k < 0:
            return Text("no instructions", style="dim")
        ins = dbg.instrs[k]
        head = Text(f"#{k} {ins['kind']} {'(last)' if dbg.finished else '(next)'}\n",
                    style="bold")
        rows = dbg.operands(k)
        for r in rows:
            written = r["name"] in dbg.last_written
            head.append(f"@{r['mode']:<5} ", style="dim")
            head.append(r["name"], style="bold yellow" if written else "bold")
            off = "-" if r.get("offset") is None else str(r["offset"])
            head.append(f"  offset {off}  {r.get('shape', '-')} {r.get('dtype', '')}\n")
            if "min" in r:
                head.append(f"        min {_f(r['min'])}  max {_f(r['max'])}  "
                            f"mean {_f(r['mean'])}  ", style="")
            if "nan" in r:
                head.append(f"nan {r['nan']} inf {r['inf']}",
                            style="bold red" if r["nan"] or r["inf"] else "dim")
            if "min" in r or "nan" in r:
                head.append("\n")
        tbl = head
        out = Table.grid()
        out.add_row(tbl)
        arr_row = next((r for r in rows if "array" in r and "out" in r["mode"]), None) or \
            next((r for r in rows if "array" in r), None)
        if arr_row is not None:
            vals = slice_2d(arr_row["array"])
            s = Table(title=f"{arr_row['name']} [0, …, :8, :8]", title_justify="left",
                      show_header=False, box=None)
            for _ in range(len(vals[0]) if vals else 0):
                s.add_column(justify="right")
            for line in vals:
                s.add_row(*[_f(v) for v in line])
            out.add_row(s)
        if any("error" in r for r in rows):
            out.add_row(Text("; ".join(f"{r['name']}: {r['error']}" for r in rows
                                       if "error" in r), style="dim"))
        if rows and rows[0].get("size") is not None:
            out.add_row(Text(f"buffer size {fmt_bytes(rows[0]['size'])}", style="dim"))
        return out

    # -- actions ------------------------------------------------------------------------------
    def _ready(self) -> bool:
        if self.dbg is None or not self.dbg.available:
            self.notify("debugger not available", severity="warning")
            return False
        return not self.busy

    def action_step(self) -> None:
        if self._ready():
            self.dbg.step()
            self.refresh_state()

    def action_next(self) -> None:
        """Step, skipping the bookkeeping instructions (alloc/dealloc/tensorview)."""
        if not self._ready():
            return
        self.dbg.step()
        while not self.dbg.finished and self.dbg.instrs[self.dbg.pc]["kind"] in (
                "allocactivation", "deallocactivation", "tensorview"):
            if self.dbg.pc in self.dbg.breakpoints:
                break
            self.dbg.step()
        self.refresh_state()

    def action_cont(self) -> None:
        if self._ready():
            self.busy = True
            self._run(lambda d: d.cont())

    def action_restart(self) -> None:
        if self._ready():
            self.busy = True
            self._run(lambda d: d.restart())

    @work(thread=True, exclusive=True, group="debugger")
    def _run(self, fn) -> None:
        try:
            fn(self.dbg)
        except Exception as e:  # noqa: BLE001 - an executor fault is shown, not fatal
            self.dbg.stop_reason = f"error: {type(e).__name__}: {e}"
        self.app.call_from_thread(self._done)

    def _done(self) -> None:
        self.busy = False
        self.refresh_state()

    def action_toggle_breakpoint(self) -> None:
        if self.dbg is None or not self.dbg.instrs:
            return
        k = self.query_one("#debug-table", DataTable).cursor_row
        on = self.dbg.toggle_breakpoint(k)
        self.notify(f"breakpoint {'set' if on else 'cleared'} at #{k}")
        self.refresh_state()


def _f(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)
