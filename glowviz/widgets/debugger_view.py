"""Debugger view: the final LIR's instructions with a breakpoint gutter and the current
position, stepping the LLVM executor (the product's) with the arena interpreter in lock-step as
the reference. The side pane cycles (`i`) between the values — the just-executed instruction's
operands, the buffers it wrote highlighted (gdb TUI style), LLVM against the interpreter with
the largest absolute/relative error — and the selected instruction's LLVM IR and assembly."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.widgets import DataTable, Static

from compiler.lir.instructions import MARKER_KINDS
from glowviz.session import CompileSession, Debugger, fmt_bytes, slice_2d

#: The side pane's modes, in the order `i` cycles them.
MODES = ("values", "llvm", "asm")
MODE_TITLES = {"values": "values", "llvm": "LLVM IR", "asm": "assembly"}
#: Pygments lexers: LLVM IR, and the AT&T-syntax assembly LLVM prints.
LEXERS = {"llvm": "llvm", "asm": "gas"}
#: Generated code is long (unrolled kernels): show this many lines, say how many are left out.
MAX_CODE_LINES = 600
BOOKKEEPING = MARKER_KINDS


class DebuggerView(Vertical):
    BINDINGS = [
        Binding("s", "step", "Step", id="debug.step"),
        Binding("n", "next", "Next", id="debug.next"),
        Binding("c", "cont", "Continue", id="debug.continue"),
        Binding("b", "toggle_breakpoint", "Breakpoint", id="debug.breakpoint"),
        Binding("d", "divergence", "Run to divergence", id="debug.divergence"),
        Binding("i", "cycle_mode", "Values/IR/asm", id="debug.code"),
        Binding("r", "restart", "Restart", id="debug.restart"),
    ]

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.session: CompileSession | None = None
        self.dbg: Debugger | None = None
        self.busy = False
        self.mode = "values"
        self.code_index: tuple[str, int] | None = None  # (mode, instruction) of the code shown
        self._gutter: dict[int, str] = {}
        self._pending_ops: set[str] = set()
        self._pending_writes: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static("", id="debug-status")
        with Horizontal():
            yield DataTable(id="debug-table", cursor_type="row")
            with Vertical(id="debug-side"):
                yield Static("", id="debug-side-title")
                with ScrollableContainer(id="debug-side-scroll"):
                    yield Static("", id="debug-operands")
                    yield Static("", id="debug-code")

    def on_mount(self) -> None:
        t = self.query_one("#debug-table", DataTable)
        t.add_column("", key="gutter", width=2)
        t.add_column("#", key="k", width=4)
        t.add_column("instruction", key="text")
        self.query_one("#debug-code").display = False

    def show(self, session: CompileSession, index: int | None = None) -> None:
        if session is self.session and self.dbg is not None:
            return
        self.session, self.dbg = session, None
        self.query_one("#debug-table", DataTable).clear()
        self._gutter = {}
        if session.debugger is not None:
            self._attach_debugger(session, session.debugger)
            return
        self.query_one("#debug-status", Static).update(
            Text("preparing the debugger: JIT-compiling the LLVM kernels…", style="bold")
        )
        self._build(session)

    @work(thread=True, exclusive=True, group="debugger-build")
    def _build(self, session: CompileSession) -> None:
        try:
            dbg = session.get_debugger()
        except Exception as e:  # noqa: BLE001 - shown, not fatal
            msg = f"debugger failed: {type(e).__name__}: {e}"
            self.app.call_from_thread(
                self.query_one("#debug-status", Static).update, Text(msg, style="bold red")
            )
            return
        self.app.call_from_thread(self._attach_debugger, session, dbg)

    def _attach_debugger(self, session: CompileSession, dbg: Debugger) -> None:
        if session is not self.session:
            return
        self.dbg = dbg
        dbg.op_breakpoints |= self._pending_ops
        dbg.write_breakpoints |= self._pending_writes
        self._pending_ops, self._pending_writes = set(), set()
        t = self.query_one("#debug-table", DataTable)
        t.clear()
        self._gutter = {}
        for ins in dbg.instrs:
            t.add_row(
                "  ",
                Text(str(ins["index"]), style="dim"),
                Text(ins["text"], no_wrap=True),
                key=str(ins["index"]),
            )
        self.refresh_state()

    # -- rendering ----------------------------------------------------------------------------
    def _gutter_mark(self, k: int) -> Text:
        dbg = self.dbg
        assert dbg is not None
        bp = k in dbg.breakpoints
        first = Text("●", style="bold red") if bp else Text(" ")
        if k == dbg.pc and not dbg.finished:
            second = Text("▶", style="bold green")
        elif k == dbg.last_index:
            cmp = dbg.comparison
            if cmp and any(not r.get("ok", True) for r in cmp):
                second = Text("✗", style="bold red")
            elif cmp:
                second = Text("✓", style="green")
            else:
                second = Text("·", style="bold")
        else:
            second = Text(" ")
        return first + second

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
            g = self._gutter_mark(k)
            if self._gutter.get(k) != g.markup:
                self._gutter[k] = g.markup
                t.update_cell(str(k), "gutter", g)
        if dbg.instrs:
            t.move_cursor(row=min(dbg.pc, len(dbg.instrs) - 1))
        status.update(self._status())
        self._refresh_side()

    def _status(self) -> Text:
        dbg = self.dbg
        assert dbg is not None
        out = Text.assemble(("debugger ", "bold"))
        if dbg.fallback_error:
            out.append(
                f"[{dbg.executor_name} — FALLBACK, LLVM codegen failed: {dbg.fallback_error}]",
                style="bold yellow",
            )
        else:
            out.append(f"[{dbg.executor_name}]", style="bold green")
        if dbg.reference is not None:
            out.append(f" vs {dbg.reference.name} in lock-step", style="dim")
        out.append("  ")
        out.append("finished" if dbg.finished else f"pc {dbg.pc}/{len(dbg.instrs)}", "bold")
        reason_style = "bold red" if dbg.divergence or "error" in dbg.stop_reason else ""
        out.append(f"  {dbg.stop_reason}", style=reason_style)
        extra = []
        if dbg.breakpoints:
            extra.append(f"at {sorted(dbg.breakpoints)}")
        if dbg.op_breakpoints:
            extra.append("on ops: " + ", ".join(sorted(dbg.op_breakpoints)))
        if dbg.write_breakpoints:
            extra.append("on writes: " + ", ".join(sorted(dbg.write_breakpoints)))
        if extra:
            out.append("\nbreakpoints " + "; ".join(extra), style="red")
        out.append(
            "\ns/n step  c continue  b breakpoint  d run to divergence  "
            "i values/LLVM IR/asm  r restart",
            style="dim",
        )
        return out

    def _refresh_side(self) -> None:
        title = Text()
        for m in MODES:
            title.append(f" {MODE_TITLES[m]} ", style="reverse bold" if m == self.mode else "dim")
        title.append("  i: cycle", style="dim")
        self.query_one("#debug-side-title", Static).update(title)
        ops, code = self.query_one("#debug-operands", Static), self.query_one("#debug-code", Static)
        ops.display = self.mode == "values"
        code.display = self.mode != "values"
        self.set_class(self.mode != "values" and self.app.size.width >= 140, "-code")
        if self.mode == "values":
            ops.update(self._values())
        else:
            self._show_code(self._selected())

    def _selected(self) -> int:
        t = self.query_one("#debug-table", DataTable)
        return max(0, t.cursor_row)

    def _values(self) -> RenderableType:
        dbg = self.dbg
        assert dbg is not None
        if not dbg.instrs:
            return Text("no instructions", style="dim")
        parts: list[RenderableType] = []
        k = dbg.last_index
        if k is None:
            k = min(dbg.pc, len(dbg.instrs) - 1)
            parts.append(
                Text(f"#{k} {dbg.instrs[k]['kind']} (next, not yet executed)", style="bold")
            )
        else:
            head = Text(f"#{k} {dbg.instrs[k]['kind']} (just executed)", style="bold")
            strat = dbg.strategy(k)
            if strat:
                head.append(f"  kernel: {strat}", style="dim")
            parts.append(head)
            written = dbg.written_buffers()
            if written:
                parts.append(
                    Text.assemble(
                        ("wrote ", "dim"), *[(f" {n} ", "bold reverse yellow") for n in written]
                    )
                )
            parts.append(self._comparison())
        rows = dbg.operands(k)
        txt = Text()
        for r in rows:
            was_written = r["name"] in dbg.last_written and k == dbg.last_index
            txt.append(f"@{r['mode']:<5} ", style="dim")
            txt.append(r["name"], style="bold reverse yellow" if was_written else "bold")
            if was_written:
                txt.append(" ◀ written", style="yellow")
            off = "-" if r.get("offset") is None else str(r["offset"])
            txt.append(f"  offset {off}  {r.get('shape', '-')} {r.get('dtype', '')}\n")
            if "min" in r:
                txt.append(
                    f"        min {_f(r['min'])}  max {_f(r['max'])}  mean {_f(r['mean'])}  "
                )
            if "nan" in r:
                txt.append(
                    f"nan {r['nan']} inf {r['inf']}",
                    style="bold red" if r["nan"] or r["inf"] else "dim",
                )
            if "min" in r or "nan" in r:
                txt.append("\n")
        parts.append(txt)
        arr_row = next((r for r in rows if "array" in r and "out" in r["mode"]), None) or next(
            (r for r in rows if "array" in r), None
        )
        if arr_row is not None:
            width = self.query_one("#debug-side-scroll").size.width or 60
            vals = slice_2d(arr_row["array"], max_cols=max(2, min(8, (width - 2) // 8)))
            s = Table(
                title=f"{arr_row['name']} [0, …, :8, :{len(vals[0]) if vals else 0}]",
                title_justify="left",
                show_header=False,
                box=None,
            )
            for _ in range(len(vals[0]) if vals and vals[0] else 0):
                s.add_column(justify="right", no_wrap=True)
            for line in vals:
                s.add_row(*[_f(v) for v in line])
            parts.append(s)
        errs = [r for r in rows if "error" in r]
        if errs:
            parts.append(Text("; ".join(f"{r['name']}: {r['error']}" for r in errs), style="dim"))
        if rows and rows[0].get("size") is not None:
            parts.append(Text(f"buffer size {fmt_bytes(rows[0]['size'])}", style="dim"))
        if not dbg.finished and dbg.last_index is not None:
            nxt = dbg.instrs[dbg.pc]
            parts.append(
                Text.assemble(
                    ("next ", "dim"),
                    (f"#{dbg.pc} ", "bold green"),
                    Text(nxt["text"][:200], style=""),
                )
            )
        return Group(*parts)

    def _comparison(self) -> Text:
        dbg = self.dbg
        assert dbg is not None
        ref = dbg.reference.name if dbg.reference is not None else None
        if ref is None:
            why = "no reference executor" + (
                " (the interpreter is the primary)" if dbg.fallback_error else ""
            )
            return Text(why, style="dim")
        cmp = dbg.comparison
        if cmp is None:
            return Text(
                f"{dbg.executor_name} vs {ref}: not compared (step with s/n/d)", style="dim"
            )
        if not cmp:
            return Text(f"{dbg.executor_name} vs {ref}: wrote nothing", style="dim")
        out = Text(
            f"{dbg.executor_name} vs {ref}  (rtol {dbg.rtol:g}, atol {dbg.atol:g})\n", style="bold"
        )
        for r in cmp:
            ok = r.get("ok", True)
            out.append("  ✓ " if ok else "  ✗ ", style="green" if ok else "bold red")
            out.append(f"%{r['name']}", style="bold")
            if "error" in r:
                out.append(f"  {r['error']}\n", style="dim")
                continue
            out.append(
                f"  max abs err {r['abs']:.3g}  max rel err {r['rel']:.3g}",
                style="" if ok else "bold red",
            )
            if not ok:
                out.append(
                    f"\n    {r.get('n_bad', '?')}/{r.get('size', '?')} elements off; "
                    f"worst at {r.get('worst_index')}: {dbg.executor_name} "
                    f"{_f(r.get('got'))}, {ref} {_f(r.get('want'))}",
                    style="red",
                )
                if r.get("why"):
                    out.append(f" ({r['why']})", style="red")
            rs = r.get("ref_stats", {})
            if "min" in rs:
                out.append(
                    f"\n    {ref}: min {_f(rs['min'])} max {_f(rs['max'])} mean {_f(rs['mean'])}",
                    style="dim",
                )
            out.append("\n")
        return out

    # -- generated code -----------------------------------------------------------------------
    def _show_code(self, k: int) -> None:
        dbg = self.dbg
        if dbg is None or not dbg.instrs:
            return
        k = min(k, len(dbg.instrs) - 1)
        key = (self.mode, k)
        if self.code_index == key:
            return
        self.code_index = key
        code = self.query_one("#debug-code", Static)
        code.update(Text(f"generating {MODE_TITLES[self.mode]} of #{k}…", style="dim"))
        self._load_code(self.mode, k)

    @work(thread=True, exclusive=True, group="debugger-code")
    def _load_code(self, mode: str, k: int) -> None:
        dbg = self.dbg
        if dbg is None:
            return
        try:
            text = dbg.code(mode, k)
        except Exception as e:  # noqa: BLE001
            text = f"; could not get the code: {type(e).__name__}: {e}\n"
        self.app.call_from_thread(self._code_ready, mode, k, text)

    def _code_ready(self, mode: str, k: int, text: str) -> None:
        if self.code_index != (mode, k) or self.dbg is None:
            return
        self.query_one("#debug-code", Static).update(self.code_renderable(mode, k, text))
        self.query_one("#debug-side-scroll", ScrollableContainer).scroll_home(animate=False)

    def code_renderable(self, mode: str, k: int, text: str) -> RenderableType:
        dbg = self.dbg
        assert dbg is not None
        lines = text.splitlines()
        more = len(lines) - MAX_CODE_LINES
        shown = "\n".join(lines[:MAX_CODE_LINES])
        dark = self.app.current_theme.dark
        head = Text(f"#{k} {dbg.instrs[k]['kind']}", style="bold")
        strat = dbg.strategy(k)
        if strat:
            head.append(f"  kernel: {strat}", style="dim")
        head.append(f"  {len(lines)} lines", style="dim")
        syn = Syntax(
            shown,
            LEXERS[mode],
            theme="monokai" if dark else "friendly",
            line_numbers=False,
            word_wrap=False,
            background_color="default",
        )
        parts: list[RenderableType] = [head, syn]
        if more > 0:
            parts.append(Text(f"… {more} more lines", style="dim"))
        self.last_code = (mode, k, shown)
        return Group(*parts)

    @on(DataTable.RowHighlighted, "#debug-table")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if self.mode != "values" and self.dbg is not None:
            self._show_code(event.cursor_row)

    # -- actions ------------------------------------------------------------------------------
    def _ready(self) -> Debugger | None:
        """The debugger if it takes a command now; else None and a notice why not."""
        if self.dbg is None or not self.dbg.available:
            self.notify(
                "debugger not available"
                if self.dbg is not None
                else "debugger still being prepared",
                severity="warning",
            )
            return None
        return None if self.busy else self.dbg

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self.code_index = None
        dbg = self.dbg
        if mode != "values" and dbg is not None and dbg.instrs:
            # On a bookkeeping instruction (no code), show the one just executed instead.
            k, last = self._selected(), dbg.last_index
            if (
                k < len(dbg.instrs)
                and dbg.instrs[k]["kind"] in BOOKKEEPING
                and last is not None
                and dbg.instrs[last]["kind"] not in BOOKKEEPING
            ):
                self.query_one("#debug-table", DataTable).move_cursor(row=last)
        if self.dbg is not None and self.dbg.available:
            self._refresh_side()

    def action_cycle_mode(self) -> None:
        self.set_mode(MODES[(MODES.index(self.mode) + 1) % len(MODES)])

    def _guarded(self, dbg: Debugger, fn: Callable[[Debugger], object]) -> None:
        """Run a stepping command here, on the UI thread: an executor fault (an integer
        division by zero, ...) stops the debugger with the reason shown, never the IDE."""
        try:
            fn(dbg)
        except Exception as e:  # noqa: BLE001 - shown, as in `_run`
            dbg.stop_reason = f"error: {type(e).__name__}: {e}"
            self.notify(dbg.stop_reason, severity="error")
        self.refresh_state()

    def action_step(self) -> None:
        if (dbg := self._ready()) is not None:
            self._guarded(dbg, lambda d: d.step())

    def action_next(self) -> None:
        if (dbg := self._ready()) is not None:
            self._guarded(dbg, self._next)

    def _next(self, dbg: Debugger) -> None:
        """Execute the next real instruction: the bookkeeping ones before it (alloc, dealloc,
        tensorview) run silently, unless a breakpoint stands on one of them."""
        first = True
        while not dbg.finished and dbg.instrs[dbg.pc]["kind"] in BOOKKEEPING:
            if not first and dbg.pc in dbg.breakpoints:
                return
            dbg.step(compare=False)
            first = False
        if not dbg.finished and (first or dbg.pc not in dbg.breakpoints):
            dbg.step()

    def action_cont(self) -> None:
        if self._ready():
            self.busy = True
            self._run(lambda d: d.cont())

    def action_divergence(self) -> None:
        """Step LLVM and the interpreter together until an output differs beyond tolerance."""
        dbg = self._ready()
        if dbg is None:
            return
        if dbg.reference is None:
            self.notify("no reference executor to compare with", severity="warning")
            return
        self.busy = True
        self.query_one("#debug-status", Static).update(
            Text("running to the first divergence…", style="bold")
        )
        self._run(lambda d: d.run_to_divergence(), notify=True)

    def action_restart(self) -> None:
        if self._ready():
            self.busy = True
            self._run(lambda d: d.restart())

    @work(thread=True, exclusive=True, group="debugger")
    def _run(self, fn: Callable[[Debugger], object], notify: bool = False) -> None:
        dbg = self.dbg
        assert dbg is not None  # commands run only once `_ready` gave the debugger
        try:
            fn(dbg)
        except Exception as e:  # noqa: BLE001 - an executor fault is shown, not fatal
            dbg.stop_reason = f"error: {type(e).__name__}: {e}"
        self.app.call_from_thread(self._done, notify)

    def _done(self, notify: bool = False) -> None:
        self.busy = False
        self.refresh_state()
        if notify and self.dbg is not None:
            self.notify(
                self.dbg.stop_reason, severity="warning" if self.dbg.divergence else "information"
            )

    def action_toggle_breakpoint(self) -> None:
        if self.dbg is None or not self.dbg.instrs:
            return
        k = self.query_one("#debug-table", DataTable).cursor_row
        on = self.dbg.toggle_breakpoint(k)
        self.notify(f"breakpoint {'set' if on else 'cleared'} at #{k}")
        self.refresh_state()

    def toggle_op_breakpoint(self, kind: str) -> bool:
        """Break before every instruction of op `kind` (works before the debugger is ready)."""
        target = self.dbg.op_breakpoints if self.dbg is not None else self._pending_ops
        target ^= {kind}
        self.refresh_state()
        return kind in target

    def toggle_write_breakpoint(self, buffer: str) -> bool:
        """Break before every instruction that writes `buffer` (or a view of it)."""
        target = self.dbg.write_breakpoints if self.dbg is not None else self._pending_writes
        target ^= {buffer}
        self.refresh_state()
        return buffer in target


def _f(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)
