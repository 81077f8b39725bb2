"""Debugger view: the final LIR's instructions with a breakpoint gutter and the current
position, stepping the LLVM executor (the product's) with the arena interpreter in lock-step as
the reference. Keys follow pudb/gdb: s step, n next, c continue, b breakpoint, p print (watch a
buffer), d run to the first divergence; `[` / `]` move the stage, as everywhere.

The side pane cycles (`i`) between the values -- the comparison with the reference (within
rtol/atol plus what the instruction's reduction length allows; the worst element with every
digit), the watched buffers, the just-executed instruction's operands (the buffers it wrote
highlighted, gdb TUI style) and a 2-D slice of a buffer (`v`: any two axes, any offsets; `W`:
centred on the worst element) -- and the selected instruction's LLVM IR and assembly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.message import Message
from textual.widgets import Static

from compiler.lir.instructions import MARKER_KINDS
from glowviz import keymap
from glowviz.session import (
    CompileSession,
    Debugger,
    divergence_text,
    fmt_bytes,
    full_precision,
    parse_slice,
    slice_spec,
    slice_view,
)
from glowviz.widgets.stage_view import InfoLine, StageView
from glowviz.widgets.styles import Styles, styles
from glowviz.widgets.virtual_table import Column, VirtualTable

#: The side pane's modes, in the order `i` cycles them.
MODES = ("values", "llvm", "asm")
MODE_TITLES = {"values": "values", "llvm": "LLVM IR", "asm": "assembly"}
#: Pygments lexers: LLVM IR, and the AT&T-syntax assembly LLVM prints.
LEXERS = {"llvm": "llvm", "asm": "gas"}
#: Generated code is long (unrolled kernels): show this many lines, say how many are left out.
MAX_CODE_LINES = 600
BOOKKEEPING = MARKER_KINDS
SLICE_ROWS = 8


class DebuggerView(StageView):
    CLEARED = ("debug-status", "debug-operands")
    BINDINGS = keymap.bindings("DebuggerView")

    class Prompt(Message):
        """Ask the screen for a line of text; `callback(text)` gets the answer."""

        def __init__(
            self,
            view: DebuggerView,
            title: str,
            value: str,
            hint: str,
            callback: Callable[[str], None],
        ) -> None:
            super().__init__()
            self.view, self.title, self.value, self.hint = view, title, value, hint
            self.callback = callback

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.dbg: Debugger | None = None
        self.busy = False
        self.mode = "values"
        self.code_index: tuple[str, int] | None = None  # the instruction whose code is shown
        self._marks: dict[int, str] = {}
        self._pending_ops: set[str] = set()
        self._pending_writes: set[str] = set()
        #: The 2-D slice: which buffer, which axes, the index of the other axes.
        self.slice_name: str | None = None
        self.slice_axes: tuple[int, int] | None = None
        self.slice_index: tuple[int, ...] | None = None
        self.slice_centre = False
        self.last_slice: dict[str, Any] | None = None
        self.last_code: tuple[str, int, str] | None = None

    def compose(self) -> ComposeResult:
        yield InfoLine("", id="debug-status")
        with Horizontal(id="debug-body"):
            with Vertical(id="debug-list"):
                yield VirtualTable(id="debug-table")
                # the cursor row's whole text when the table is too narrow for it
                yield Static("", id="debug-full", classes="hidden")
            with Vertical(id="debug-side"):
                yield Static("", id="debug-side-title")
                with ScrollableContainer(id="debug-side-scroll"):
                    yield Static("", id="debug-operands")
                    yield Static("", id="debug-code")

    def on_built(self) -> None:
        self.query_one("#debug-code").display = False

    def reset(self) -> None:
        super().reset()
        self.dbg, self._marks = None, {}
        self.slice_name = self.slice_axes = self.slice_index = None

    def show(self, session: CompileSession, index: int | None = None) -> None:
        if session is self.session and self.dbg is not None:
            return
        self.session, self.dbg = session, None
        self.query_one(VirtualTable).clear()
        self._show_full()
        self._marks = {}
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
                self.query_one("#debug-status", Static).update, Text(msg, style="bold")
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
        t = self.query_one(VirtualTable)
        t.set_columns(
            [
                Column("", width=2),
                Column("#", justify="right"),
                # fitted to the table (an ellipsis), the whole line under it: `_show_full`
                Column("instruction", cap=400, min=16),
            ]
        )
        self._marks = {}
        rows = [["  ", Text(str(ins["index"]), style="dim"), ins["text"]] for ins in dbg.instrs]
        t.set_rows(rows, keys=[str(ins["index"]) for ins in dbg.instrs])
        self.refresh_state()

    def goto_instruction(self, k: int) -> None:
        t = self.query_one(VirtualTable)
        t.move_cursor(k)
        t.focus()

    # -- rendering ----------------------------------------------------------------------------
    def _gutter_mark(self, k: int, st: Styles) -> Text:
        dbg = self.dbg
        assert dbg is not None
        bp = k in dbg.breakpoints
        first = Text("●", style=st.bold("removed")) if bp else Text(" ")
        if k == dbg.pc and not dbg.finished:
            second = Text("▶", style=st.bold("added"))
        elif k == dbg.last_index:
            cmp = dbg.comparison
            if cmp and any(not r.get("ok", True) for r in cmp):
                second = Text("✗", style=st.bold("removed"))
            elif cmp:
                second = Text("✓", style=st.added)
            else:
                second = Text("·", style="bold")
        else:
            second = Text(" ")
        return first + second

    @property
    def _gutter(self) -> dict[int, str]:
        """The gutter marks drawn (instruction -> its two characters); blank rows left out."""
        return dict(self._marks)

    def refresh_state(self) -> None:
        dbg = self.dbg
        status = self.query_one("#debug-status", Static)
        if dbg is None:
            return
        st = styles(self.app)
        if not dbg.available:
            status.update(Text(f"not available: {dbg.reason_unavailable}", style=st.bold("warn")))
            return
        t = self.query_one(VirtualTable)
        # Only the rows whose mark changes are touched (pc, last step, breakpoints).
        wanted = set(dbg.breakpoints) | {dbg.pc}
        if dbg.last_index is not None:
            wanted.add(dbg.last_index)
        for k in sorted(wanted | set(self._marks)):
            if not 0 <= k < len(dbg.instrs):
                continue
            g = self._gutter_mark(k, st)
            if self._marks.get(k, "  ") != g.plain or k in wanted:
                if g.plain.strip():
                    self._marks[k] = g.plain
                else:
                    self._marks.pop(k, None)
                row = t.rows[k]
                t.update_row(k, [g, row[1], row[2]])
        if dbg.instrs:
            t.move_cursor(min(dbg.pc, len(dbg.instrs) - 1))
        status.update(self._status(st))
        self._refresh_side()

    def _status(self, st: Styles) -> Text:
        dbg = self.dbg
        assert dbg is not None
        out = Text.assemble(("debugger ", "bold"))
        if dbg.fallback_error:
            out.append(
                f"[{dbg.executor_name} — FALLBACK, LLVM codegen failed: {dbg.fallback_error}]",
                style=st.bold("warn"),
            )
        else:
            out.append(f"[{dbg.executor_name}]", style=st.bold("added"))
        if dbg.reference is not None:
            out.append(f" vs {dbg.reference.name} in lock-step", style="dim")
        out.append(" │ final program", style="dim")
        out.append("  ")
        out.append("finished" if dbg.finished else f"pc {dbg.pc}/{len(dbg.instrs)}", "bold")
        reason_style = st.bold("removed") if dbg.divergence or "error" in dbg.stop_reason else ""
        out.append(f"\n{dbg.stop_reason}", style=reason_style)
        extra = []
        if dbg.breakpoints:
            extra.append(f"at {sorted(dbg.breakpoints)}")
        if dbg.op_breakpoints:
            extra.append("on ops: " + ", ".join(sorted(dbg.op_breakpoints)))
        if dbg.write_breakpoints:
            extra.append("on writes: " + ", ".join(sorted(dbg.write_breakpoints)))
        if extra:
            out.append("\nbreakpoints " + "; ".join(extra), style=st.removed)
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
        return max(0, self.query_one(VirtualTable).cursor_row)

    def _values(self) -> RenderableType:
        dbg = self.dbg
        assert dbg is not None
        st = styles(self.app)
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
                wrote = Text("wrote ", style="dim")
                for n in written:
                    wrote.append(f" {n} ", style=f"bold reverse {st.changed}")
                    wrote.append(" ")
                parts.append(wrote)
            parts.append(self._comparison())
        if dbg.watches:
            parts.append(self._watches(st))
        rows = dbg.operands(k)
        txt = Text()
        for r in rows:
            just_written = r["name"] in dbg.last_written and k == dbg.last_index
            txt.append(f"@{r['mode']:<5} ", style="dim")
            txt.append(r["name"], style=f"bold reverse {st.changed}" if just_written else "bold")
            if just_written:
                txt.append(" ◀ written", style=st.changed)
            off = "-" if r.get("offset") is None else str(r["offset"])
            txt.append(f"  offset {off}  {r.get('shape', '-')} {r.get('dtype', '')}\n")
            stats = stats_text(r, st)
            if stats.plain:
                txt.append("        ")
                txt.append_text(stats)
                txt.append("\n")
        parts.append(txt)
        parts.append(self._slice_table(rows, st))
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
                    (f"#{dbg.pc} ", st.bold("added")),
                    Text(nxt["text"][:200], style=""),
                )
            )
        return Group(*parts)

    def _watches(self, st: Styles) -> Text:
        dbg = self.dbg
        assert dbg is not None
        t = Text("watch", style="bold")
        t.append("  (p: add)\n", style="dim")
        for w in dbg.watch_rows():
            t.append(f"  {w['name']}", style="bold")
            if w.get("live") is False:
                t.append(" (not live)", style="dim")
            if "error" in w:
                t.append(f"  {w['error']}\n", style="dim")
                continue
            t.append("  ")
            t.append_text(stats_text(w, st))
            t.append("\n")
        return t

    def _comparison(self) -> Text:
        dbg = self.dbg
        assert dbg is not None
        st = styles(self.app)
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
        out = Text(f"{dbg.executor_name} vs {ref}", style="bold")
        out.append(f"  ({dbg.tolerance_text()}; T: change)\n", style="dim")
        for r in cmp:
            ok = r.get("ok", True)
            out.append("  ✓ " if ok else "  ✗ ", style=st.added if ok else st.bold("removed"))
            out.append(f"%{r['name']}", style="bold")
            if "error" in r:
                out.append(f"  {r['error']}\n", style="dim")
                continue
            out.append(
                f"  max abs err {r['abs']:.3g} │ max rel err {r['rel']:.3g}",
                style="" if ok else st.bold("removed"),
            )
            if not ok:
                out.append("\n    " + divergence_text(r, dbg.executor_name, ref), style=st.removed)
            elif r.get("allowance"):
                out.append("\n    within the accumulation allowance", style="dim")
            if r.get("allowance"):
                out.append(f"\n    allowance: {r['allowance']}", style="dim")
            rs = r.get("ref_stats", {})
            if "min" in rs:
                out.append(
                    f"\n    {ref}: min {_f(rs['min'])} │ max {_f(rs['max'])} │ "
                    f"mean {_f(rs['mean'])}",
                    style="dim",
                )
            out.append("\n")
        return out

    def _slice_table(self, rows: list[dict], st: Styles) -> RenderableType:
        """The 2-D slice of the chosen buffer (default: what the instruction wrote), the worst
        element of a failed comparison highlighted."""
        dbg = self.dbg
        assert dbg is not None
        arrays = {r["name"]: r["array"] for r in rows if "array" in r}
        name = self.slice_name if self.slice_name in arrays else None
        if name is None:
            name = next((r["name"] for r in rows if "array" in r and "out" in r["mode"]), None)
            name = name or next(iter(arrays), None)
        if name is None:
            self.last_slice = None
            return Text("")
        arr = arrays[name]
        width = self.query_one("#debug-side-scroll").size.width or 60
        cols = max(2, min(8, (width - 8) // 10))
        worst = self._worst(name)
        index = self.slice_index if self.slice_name == name else None
        axes = self.slice_axes if self.slice_name == name else None
        centre = self.slice_centre and self.slice_name == name
        if index is None and worst is not None:
            index, centre = worst, True
        view = slice_view(arr, axes, index, SLICE_ROWS, cols, centre=centre)
        self.last_slice = {"name": name, **view}
        ra, ca = view["axes"]
        spec = slice_spec(view["axes"], tuple(view["index"]))
        # The title above the table, not as its title: Rich wraps a table's title to the
        # table's width, a few value columns (a 16-character column of broken words).
        title = Text.assemble(
            (f"{name} {spec}", "bold"),
            f"  rows: axis {ra}, cols: axis {ca}",
            ("   v: pick  W: worst", "dim"),
        )
        tbl = Table(
            show_header=True,
            header_style="dim",
            box=None,
            pad_edge=False,
        )
        tbl.add_column("", style="dim", justify="right", no_wrap=True)
        for c in view["cols"]:
            tbl.add_column(str(c), justify="right", no_wrap=True)
        for i, r in zip(view["rows"], view["values"], strict=True):
            cells = []
            for c, v in zip(view["cols"], r, strict=True):
                at = list(view["index"])
                at[ra], at[ca] = i, c
                hot = worst is not None and tuple(at[: len(worst)]) == tuple(worst)
                cells.append(Text(_f(v), style=f"bold reverse {st.removed}" if hot else ""))
            tbl.add_row(str(i), *cells)
        return Group(title, tbl)

    def _worst(self, name: str) -> tuple[int, ...] | None:
        dbg = self.dbg
        for r in (dbg.comparison or []) if dbg is not None else []:
            if r["name"] == name and "worst_index" in r and not r.get("ok", True):
                return tuple(r["worst_index"])
        return None

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
        # Imported here: Rich's Syntax brings Pygments, which nothing before the first
        # LLVM IR or assembly listing needs (not at the IDE's start-up).
        from rich.syntax import Syntax

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

    @on(VirtualTable.RowHighlighted, "#debug-table")
    def _row(self, event: VirtualTable.RowHighlighted) -> None:
        event.stop()
        self._show_full()
        if self.mode != "values" and self.dbg is not None:
            self._show_code(event.cursor_row)

    def _show_full(self) -> None:
        """Under the table, the cursor row's instruction in full (wrapped) when the table cuts
        it (at 100x30 most lines are wider than the table); nothing when it fits."""
        t = self.query_one(VirtualTable)
        full = self.query_one("#debug-full", Static)
        dbg = self.dbg
        k = t.cursor_row
        cut = dbg is not None and 0 <= k < len(dbg.instrs) and t.is_cut(k, 2)
        if cut:
            assert dbg is not None
            full.update(Text(f"#{k} {dbg.instrs[k]['text']}", style="dim"))
        full.set_class(not cut, "hidden")  # the table keeps its cursor row in view

    @on(VirtualTable.Refitted, "#debug-table")
    def _table_refitted(self, event: VirtualTable.Refitted) -> None:
        event.stop()
        self._show_full()

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
                self.query_one(VirtualTable).move_cursor(last)
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
        self.slice_name = self.slice_axes = self.slice_index = None
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
        k = self.query_one(VirtualTable).cursor_row
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

    # -- prompts: watch, slice, tolerance ----------------------------------------------------
    def _prompt(self, title: str, value: str, hint: str, cb: Callable[[str], None]) -> None:
        self.post_message(self.Prompt(self, title, value, hint, cb))

    def action_watch(self) -> None:
        """gdb's print/display: watch a buffer's min/max/mean/NaN after every step."""
        if self.dbg is None:
            return
        self._prompt(
            "Watch a buffer (min/max/mean/NaN after every step)",
            self.slice_name or "",
            "a buffer or operand name, e.g. conv_0_res; an empty line clears the watches",
            self.add_watch,
        )

    def add_watch(self, name: str) -> None:
        if self.dbg is None:
            return
        if not name.strip():
            self.dbg.watches.clear()
            self.notify("watches cleared")
        else:
            try:
                added = self.dbg.add_watch(name)
                self.notify(f"watching {added}")
            except KeyError:
                self.notify(f"no buffer named {name.strip()}", severity="warning")
        self.refresh_state()

    def action_pick_slice(self) -> None:
        s = self.last_slice
        if s is None:
            self.notify("no buffer to slice yet: step first", severity="warning")
            return
        current = f"{s['name']} {slice_spec(s['axes'], tuple(s['index']))}"
        self._prompt(
            "2-D slice: buffer [index per axis; ':' marks the row and column axes]",
            current,
            "e.g. conv_0_res [0, :, 5, 10:] - rows over axis 1, columns from 10 over axis 3",
            self.set_slice,
        )

    def set_slice(self, text: str) -> None:
        s = self.last_slice
        parts = text.strip().split(None, 1)
        if not parts or s is None:
            return
        name = parts[0].lstrip("%") if not parts[0].startswith("[") else s["name"]
        spec = parts[-1] if len(parts) == 2 or parts[0].startswith("[") else None
        self.slice_name = name
        if spec is not None:
            shape = s["shape"] if name == s["name"] else self._shape_of(name)
            try:
                axes, index = parse_slice(spec, tuple(shape))
            except ValueError as e:
                self.notify(f"bad slice: {e}", severity="warning")
                return
            self.slice_axes, self.slice_index, self.slice_centre = axes, index, False
        else:
            self.slice_axes = self.slice_index = None
        self.refresh_state()

    def _shape_of(self, name: str) -> tuple[int, ...]:
        try:
            return tuple(self.dbg.executor.read(name).shape)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001
            return ()

    def action_slice_worst(self) -> None:
        """Move the slice to the worst element of the last failed comparison."""
        dbg = self.dbg
        bad = [r for r in (dbg.comparison or []) if not r.get("ok", True)] if dbg else []
        if not bad:
            self.notify("no failed comparison at this step", severity="information")
            return
        r = bad[0]
        self.slice_name, self.slice_axes = r["name"], None
        self.slice_index, self.slice_centre = tuple(r["worst_index"]), True
        self.refresh_state()

    def action_set_tolerance(self) -> None:
        dbg = self.dbg
        if dbg is None:
            return
        self._prompt(
            "Tolerance of the comparison",
            f"rtol={dbg.rtol:g} atol={dbg.atol:g} ulps={dbg.ulps:g}",
            "|diff| <= atol + rtol*|ref| + ulps * eps * sqrt(K) * sum|terms| (K: the reduction "
            "length); 'accumulated' compares without re-syncing the reference",
            self.set_tolerance,
        )

    def set_tolerance(self, text: str) -> None:
        dbg = self.dbg
        if dbg is None:
            return
        try:
            values = parse_tolerance(text)
        except ValueError as e:
            self.notify(f"bad tolerance: {e}", severity="warning")
            return
        resync = values.pop("resync", None)
        dbg.set_tolerance(**values)
        if resync is not None:
            dbg.resync = bool(resync)
        self.notify(f"tolerance: {dbg.tolerance_text()}")
        self.refresh_state()

    def toggle_resync(self) -> None:
        if self.dbg is not None:
            self.dbg.resync = not self.dbg.resync
            self.notify(f"comparison: {self.dbg.tolerance_text()}")
            self.refresh_state()


def parse_tolerance(text: str) -> dict[str, Any]:
    """`rtol=1e-4 atol=1e-5 ulps=8` (any of them; `accumulated` / `per-instruction` switch the
    re-sync) -> keyword arguments."""
    out: dict[str, Any] = {}
    for tok in text.replace(",", " ").split():
        low = tok.lower()
        if low in ("accumulated", "drift"):
            out["resync"] = False
            continue
        if low in ("per-instruction", "resync", "local"):
            out["resync"] = True
            continue
        if "=" not in tok:
            raise ValueError(f"'{tok}' is not name=value")
        k, v = tok.split("=", 1)
        k = k.strip().lower()
        if k not in ("rtol", "atol", "ulps"):
            raise ValueError(f"unknown setting '{k}' (rtol, atol, ulps)")
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"'{v}' is not a number") from None
        if x < 0:
            raise ValueError(f"{k} must not be negative")
        out[k] = x
    return out


def stats_text(r: dict[str, Any], st: Styles) -> Text:
    """min │ max │ mean │ nan │ inf of an operand or watch, clearly separated."""
    t = Text()
    if "min" in r:
        t.append(f"min {_f(r['min'])} │ max {_f(r['max'])} │ mean {_f(r['mean'])}")
    if "nan" in r:
        if t.plain:
            t.append(" │ ")
        bad = r["nan"] or r["inf"]
        t.append(f"nan {r['nan']} │ inf {r['inf']}", style=st.bold("removed") if bad else "dim")
    return t


def _f(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


__all__ = ["DebuggerView", "full_precision", "parse_tolerance", "stats_text"]
