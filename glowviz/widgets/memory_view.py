"""Memory view: the allocation map (offset × instruction index, one coloured block per buffer,
aliases — concat slices, accumulation targets — hatched inside the buffer they share), peak /
lower bound / gap and the plan's certificate, the buffers live at the peak, why the selected
buffer sits where it does, and a side-by-side comparison with a second plan: another allocator or scheduler (A/S,
recompiled in a worker) or a second report (o: a glowviz.memory/1 JSON file, a model or a
mem-diff spec, loaded in a worker). Everything drawn is the session's `MemoryReport` and its
comparison data (`CompileSession.compare_memory_report`, `glowviz.session.memcompare`); asking
for a second report posts `ReportRequested` (the screen shows the prompt)."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.widgets.data_table import RowDoesNotExist

from compiler.memory.allocators import allocator_names
from compiler.memory.report import MemoryReport
from compiler.scheduling import SCHEDULERS
from glowviz import themes
from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import colour
from glowviz.widgets.lifetimes_view import buffer_card

MAP_ROWS = 14


def scheduler_names() -> list[str]:
    return list(SCHEDULERS)


def map_top(report: MemoryReport) -> int:
    """The highest byte the map of `report` shows."""
    return max([report.peak_bytes] + [b.offset + b.size for b in report.buffers] + [1])


def draw_map(
    report: MemoryReport,
    width: int,
    palette: list[str],
    rows: int = MAP_ROWS,
    selected: str | None = None,
    top: int | None = None,
) -> Text:
    """Offset (rows, top = 0) × instruction index (columns); each buffer a coloured block (the
    theme's buffer colours), each alias hatched (╱) over the buffer it shares. `top` fixes the
    offset scale (two maps side by side share one)."""
    n = max(1, report.n_instructions)
    top = max(top or 0, map_top(report))
    per_row = top / rows
    grid: list[list[str | None]] = [[None] * width for _ in range(rows)]
    hatched: set[tuple[int, int]] = set()
    for k, b in enumerate(report.buffers):
        c0 = int(b.first * width / n)
        c1 = max(c0, int((b.last + 1) * width / n) - 1)
        r0 = int(b.offset / per_row)
        r1 = max(r0, int((b.offset + b.size - 1) / per_row))
        st: str | None = "bold white on red" if b.name == selected else f"on {colour(k, palette)}"
        for r in range(r0, min(r1 + 1, rows)):
            for c in range(c0, min(c1 + 1, width)):
                if b.alias_of:
                    hatched.add((r, c))
                    if b.name == selected:
                        grid[r][c] = st
                elif grid[r][c] is None or b.name == selected:
                    grid[r][c] = st
    peak_col = int(report.peak_instruction * width / n)
    t = Text(no_wrap=True)
    for r in range(rows):
        t.append(f"{fmt_bytes(r * per_row):>9} ", style="dim")
        for c in range(width):
            st = grid[r][c]
            ch = "┃" if c == peak_col and st is None else "╱" if (r, c) in hatched else " "
            t.append(ch, style=st or ("red" if c == peak_col else ""))
        t.append("\n")
    t.append(
        " " * 10 + "0".ljust(max(1, peak_col)) + "▲peak" + f"  (instr {n - 1} at right)",
        style="dim",
    )
    return t


def certificate_text(report: MemoryReport) -> Text:
    """The certificate in one line: every schedule's lower bound, and whether the schedule is
    proven optimal (else the buffers behind the gap)."""
    c = report.certificate
    if c is None or c.all_schedules_lower_bound_bytes is None:
        return Text("")
    t = Text("\nall schedules need ")
    t.append(fmt_bytes(c.all_schedules_lower_bound_bytes), style="bold")
    t.append(f" ({c.all_schedules_bound_from})  schedule {c.scheduler_used or c.scheduler}: ")
    if c.schedule_proven_optimal:
        t.append("proven optimal", style="bold green")
    else:
        t.append("not proven optimal", style="bold yellow")
    if c.gap_buffers:
        t.append(f"  gap held by {', '.join(c.gap_buffers[:4])}", style="dim")
    if c.aliases:
        parts = ", ".join(
            f"{n} {'sum post-op' if k == 'sum' else 'concat slices'}"
            for k, n in sorted(c.aliases.items())
        )
        t.append(f"  aliases: {parts}", style="dim")
    return t


class MemoryView(Vertical):
    BINDINGS = [
        Binding("A", "cycle_allocator", "Compare allocator", id="memory.allocator"),
        Binding("S", "cycle_scheduler", "Compare scheduler", id="memory.scheduler"),
        Binding("o", "open_report", "Compare with report", id="memory.open_report"),
        Binding("x", "close_compare", "Close comparison", id="memory.close_compare"),
    ]

    class BufferSelected(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    class ReportRequested(Message):
        """Ask the screen for a second report to compare with (`last`: the previous answer);
        the screen answers with `compare_report(spec)`."""

        def __init__(self, view: MemoryView, last: str) -> None:
            super().__init__()
            self.view = view
            self.last = last

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.session: CompileSession | None = None
        self.report: MemoryReport | None = None
        self.selected: str | None = None
        self.compare_text: Text | None = None
        #: The comparison shown (`CompileSession.compare_memory_with`'s data), or None.
        self.comparison: dict | None = None
        self.compare_error: str | None = None
        self._cmp_selected: tuple[str | None, str | None] = (None, None)
        self._last_spec = ""
        self._alloc_k = 0
        self._sched_k = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="memory-figures")
        status = Static("", id="memory-compare-status")
        status.display = False
        yield status
        yield Static("", id="memory-map")
        with Vertical(id="memory-compare-pane"):
            yield Static("", id="cmp-figures")
            with Horizontal(id="cmp-maps"):
                yield Static("", id="cmp-map-base")
                yield Static("", id="cmp-map-other")
            yield DataTable(id="cmp-table", cursor_type="row")
        with Horizontal(id="memory-bottom"):
            yield DataTable(id="memory-table", cursor_type="row")
            with VerticalScroll(id="memory-side"):
                yield Static("", id="memory-detail")
                yield Static("", id="memory-compare")

    def show(self, session: CompileSession, index: int | None = None) -> None:
        if session is not self.session and (self.comparison or self.compare_error):
            self._close_compare()
        self.session = session
        rep = self.report = session.memory_report()
        figs = self.query_one("#memory-figures", Static)
        t = self.query_one("#memory-table", DataTable)
        t.clear(columns=True)
        if rep is None:
            figs.update(
                Text(f"not available: {session.unavailable('memory plan')}", style="bold yellow")
            )
            self.query_one("#memory-map", Static).update("")
            return
        figs.update(
            Text.assemble(
                ("memory: ", "bold"),
                f"allocator {rep.allocator}, scheduler {rep.scheduler}  ",
                "peak ",
                (fmt_bytes(rep.peak_bytes), "bold red"),
                "  lower bound ",
                (fmt_bytes(rep.lower_bound_bytes), "bold"),
                "  gap ",
                (
                    f"{fmt_bytes(rep.gap_bytes)} ({rep.gap_pct:.1f}%)",
                    "bold green" if rep.gap_bytes == 0 else "bold yellow",
                ),
                "  no reuse ",
                fmt_bytes(rep.no_reuse_bytes),
                certificate_text(rep),
                (
                    f"   peak at instr {rep.peak_instruction}: "
                    f"{', '.join(rep.live_at_peak[:6])}"
                    f"{'…' if len(rep.live_at_peak) > 6 else ''}",
                    "dim",
                ),
                (
                    "\nA/S: compare with another allocator/scheduler   o: compare with a report "
                    "(JSON, model or mem-diff spec)",
                    "dim",
                ),
            )
        )
        self._redraw_map()
        t.add_column("buffer", key="name")
        t.add_column("offset", key="offset")
        t.add_column("size", key="size")
        t.add_column("live", key="live")
        t.add_column("peak", key="peak", width=4)
        at_peak = set(rep.live_at_peak)
        palette = self._palette()
        for k, b in sorted(enumerate(rep.buffers), key=lambda kb: (kb[1].offset, kb[1].first)):
            mark = Text("╱ ", style="dim") if b.alias_of else Text("■ ", style=colour(k, palette))
            t.add_row(
                mark + Text(b.name, style="italic" if b.alias_of else ""),
                str(b.offset),
                fmt_bytes(b.size),
                f"{b.first}–{b.last}",
                Text("●", style="red") if b.name in at_peak else "",
                key=b.name,
            )
        if self.selected:
            self.select(self.selected)

    def _palette(self) -> list[str]:
        """The current theme's buffer colours (the exported figures use the same)."""
        return themes.theme(self.app.theme).buffer_colours

    def _redraw_map(self) -> None:
        if self.report is not None:
            width = max(20, (self.size.width or 110) - 12)
            text = draw_map(self.report, width, self._palette(), selected=self.selected)
            self.query_one("#memory-map", Static).update(crop_lines(text, width + 10))
        if self.comparison is not None:
            self._draw_compare_maps()

    def on_resize(self) -> None:
        self._redraw_map()

    def select(self, name: str) -> bool:
        t = self.query_one("#memory-table", DataTable)
        try:
            t.move_cursor(row=t.get_row_index(name))
        except RowDoesNotExist:  # not in this table (e.g. another stage's buffer)
            return False
        return True

    @on(DataTable.RowHighlighted, "#memory-table")
    def _highlight(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key is None or event.row_key.value is None or self.report is None:
            return
        name = event.row_key.value
        self.selected = name
        b = self.report.buffer(name)
        if b is not None:
            self.query_one("#memory-detail", Static).update(buffer_card(b))
            self._redraw_map()
            self.post_message(self.BufferSelected(name))

    # -- comparison with another allocator / scheduler ----------------------------------------
    def action_cycle_allocator(self) -> None:
        names = allocator_names()
        cur = self.session.options.allocator if self.session and self.session.options else None
        others = [n for n in names if n != cur] or names
        self._alloc_k = (self._alloc_k + 1) % len(others)
        self.compare(allocator=others[self._alloc_k - 1])

    def action_cycle_scheduler(self) -> None:
        names = scheduler_names()
        cur = self.session.options.scheduler if self.session and self.session.options else None
        others = [n for n in names if n != cur] or names
        self._sched_k = (self._sched_k + 1) % len(others)
        self.compare(scheduler=others[self._sched_k - 1])

    def compare(self, allocator: str | None = None, scheduler: str | None = None) -> None:
        if self.session is None:
            return
        what = " ".join(
            x
            for x in (
                f"allocator {allocator}" if allocator else "",
                f"scheduler {scheduler}" if scheduler else "",
            )
            if x
        )
        self._set_status(Text(f"compiling with {what}…", style="dim"))
        self.query_one("#memory-compare", Static).update(
            Text(f"compiling with {allocator or ''}{scheduler or ''}…", style="dim")
        )
        self._compare_worker(self.session, allocator, scheduler)

    @work(thread=True, exclusive=True, group="memory-compare")
    def _compare_worker(
        self, session: CompileSession, allocator: str | None, scheduler: str | None
    ) -> None:
        cmp, error = None, None
        try:
            res = session.compare_memory(allocator, scheduler)
            text = compare_text(res)
            cmp = res.get("comparison")
            if cmp is None:
                error = (
                    res.get("error")
                    or res["other"].get("reason")
                    or res["base"].get("reason")
                    or "no memory plan to compare"
                )
        except Exception as e:  # noqa: BLE001
            text = Text(f"comparison failed: {type(e).__name__}: {e}", style="red")
            error = f"{type(e).__name__}: {e}"
        self.app.call_from_thread(self._set_compare, text)
        self.app.call_from_thread(self._compare_done, session, cmp, error)

    def _set_compare(self, text: Text) -> None:
        self.compare_text = text
        self.query_one("#memory-compare", Static).update(text)

    # -- comparison with a second report ------------------------------------------------------
    def action_open_report(self) -> None:
        """Ask (through the screen) for a second report: JSON, model or mem-diff spec."""
        self.post_message(self.ReportRequested(self, self._last_spec))

    def compare_report(self, spec: str) -> None:
        if self.session is None:
            return
        self._last_spec = spec
        self._set_status(Text(f"loading {spec}…", style="dim"))
        self._report_worker(self.session, spec)

    @work(thread=True, exclusive=True, group="memory-compare")
    def _report_worker(self, session: CompileSession, spec: str) -> None:
        cmp, error = None, None
        try:
            cmp = session.compare_memory_report(spec)
        except Exception as e:  # noqa: BLE001 - shown as one line; the IDE keeps working
            from compiler.errors import CompilerError

            error = str(e) if isinstance(e, CompilerError) else f"{type(e).__name__}: {e}"
        self.app.call_from_thread(self._compare_done, session, cmp, error)

    def _compare_done(self, session: CompileSession, cmp: dict | None, error: str | None) -> None:
        if session is not self.session:
            return
        if error is not None or cmp is None:
            self._close_compare()
            self.compare_error = " ".join(str(error or "no comparison").split())
            self._set_status(
                Text("cannot compare: ", style="bold red") + Text(self.compare_error, style="red")
            )
            if self.app.focused is None or self.app.focused.id == "cmp-table":
                self.query_one("#memory-table", DataTable).focus()
            return
        self.compare_error = None
        self.comparison = cmp
        self._cmp_selected = (None, None)
        self.add_class("comparing")
        self._set_status(
            Text.assemble(
                ("comparing with ", "bold"),
                (cmp["other"]["label"], "bold cyan"),
                ("   x: close   o: another report", "dim"),
            )
        )
        self.query_one("#cmp-figures", Static).update(compare_figures(cmp))
        self._fill_compare_table(cmp)
        self._draw_compare_maps()
        self.query_one("#cmp-table", DataTable).focus()

    def action_close_compare(self) -> None:
        self._close_compare()
        t = self.query_one("#memory-table", DataTable)
        t.focus()

    def _close_compare(self) -> None:
        self.comparison, self.compare_error = None, None
        self.remove_class("comparing")
        self._set_status(Text(""))

    def _set_status(self, text: Text) -> None:
        status = self.query_one("#memory-compare-status", Static)
        status.update(text)
        status.display = bool(text.plain)

    def _fill_compare_table(self, cmp: dict) -> None:
        t = self.query_one("#cmp-table", DataTable)
        t.clear(columns=True)
        for label, key in (
            ("change", "change"),
            ("buffer", "buffer"),
            ("size this", "old_size"),
            ("size other", "new_size"),
            ("live this", "old_live"),
            ("live other", "new_live"),
            ("@ this", "old_offset"),
            ("@ other", "new_offset"),
        ):
            t.add_column(label, key=key)
        for k, r in enumerate(cmp["rows"]):
            t.add_row(*compare_row_cells(r), key=str(k))

    @on(DataTable.RowHighlighted, "#cmp-table")
    def _cmp_highlight(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if self.comparison is None or event.row_key is None or event.row_key.value is None:
            return
        r = self.comparison["rows"][int(event.row_key.value)]
        self._cmp_selected = (r["old"], r["new"])
        self._draw_compare_maps()

    def _draw_compare_maps(self) -> None:
        cmp = self.comparison
        if cmp is None:
            return
        base, other = cmp["base"]["report"], cmp["other"]["report"]
        avail = (self.size.width or 110) - 4
        width = avail // 2 - 11
        left = self.query_one("#cmp-map-base", Static)
        right = self.query_one("#cmp-map-other", Static)
        if width < 16:
            left.update(Text("(too narrow for the two allocation maps)", style="dim"))
            right.update("")
            return
        top = max(map_top(base), map_top(other))
        rows = 10
        old, new = self._cmp_selected
        palette = self._palette()
        for w, side, label, report, sel in (
            (left, "base", "this", base, old),
            (right, "other", "other", other, new),
        ):
            t = Text(f"{label}: {cmp[side]['label']}\n", style="bold")
            t.append_text(draw_map(report, width, palette, rows, selected=sel, top=top))
            w.update(crop_lines(t, width + 10))


def crop_lines(text: Text, width: int) -> Text:
    """`text` with every line cut to `width` cells (the maps must not wrap)."""
    out = Text()
    for k, line in enumerate(text.split("\n", include_separator=False)):
        line.truncate(width, overflow="ellipsis")
        if k:
            out.append("\n")
        out.append_text(line)
    return out


def _delta_style(d: int) -> str:
    return "bold red" if d > 0 else "bold green" if d < 0 else "dim"


def _signed(d: int) -> str:
    return ("+" if d > 0 else "") + fmt_bytes(d)


def compare_figures(cmp: dict) -> Text:
    """Both sides' peak, lower bound, no-reuse and regions with deltas (growth red, shrink
    green), and the buffer match summary."""
    d = cmp["diff"]
    t = Text(no_wrap=True)
    t.append(f"{'figure':<20}{'this':>12}  {'other':>12}  delta\n", style="bold")

    def line(label: str, x: dict) -> None:
        t.append(f"{label:<20}{fmt_bytes(x['old']):>12}  {fmt_bytes(x['new']):>12}  ")
        pct = "" if x["pct"] is None or x["delta"] == 0 else f" ({x['pct']:+.1f}%)"
        t.append(
            f"{_signed(x['delta']) if x['delta'] else '='}{pct}", style=_delta_style(x["delta"])
        )
        t.append("\n")

    line("peak", d["peak"])
    line("lower bound", d["lower_bound"])
    line("no reuse", d["no_reuse"])
    for k, x in d["regions"].items():
        line(f"region {k}", x)
    b = d["buffers"]
    t.append(f"buffers: {d['old']['buffers']} -> {d['new']['buffers']}, matched {b['matched']}; ")
    for key, style in (
        ("grew", "red"),
        ("shrank", "green"),
        ("appeared", "red"),
        ("vanished", "green"),
        ("longer", "yellow"),
        ("shorter", "green"),
        ("moved", "magenta"),
    ):
        t.append(f"{key} {len(b[key])}", style=style if b[key] else "dim")
        t.append("  ")
    return t


def compare_row_cells(r: dict) -> list[Text]:
    """The cells of one changed buffer; the changed cells highlighted."""
    tags = r["tags"]
    tag_style = {
        "grew": "bold red",
        "appeared": "bold red",
        "longer": "bold yellow",
        "shrank": "bold green",
        "vanished": "bold green",
        "shorter": "green",
        "moved": "magenta",
    }
    change = Text()
    for k, tag in enumerate(tags):
        change.append(("," if k else "") + tag, style=tag_style[tag])
    name = (
        r["new"]
        if r["old"] in (None, r["new"])
        else (r["old"] if r["new"] is None else f"{r['old']} → {r['new']}")
    )
    size_style = (
        ("bold red" if (r["size_delta"] or 0) > 0 else "bold green")
        if "size" in r["changed"]
        else ""
    )
    live_style = (
        ("bold yellow" if "longer" in tags or "appeared" in tags else "bold green")
        if "live" in r["changed"]
        else ""
    )
    off_style = "bold magenta" if "offset" in r["changed"] else ""

    def cell(v: object, style: str, fmt=str) -> Text:
        return Text("—", style="dim") if v is None else Text(fmt(v), style=style)

    def live(side: str) -> object:
        f = r.get(f"{side}_first")
        return None if f is None else f"{f}–{r[f'{side}_last']}"

    return [
        change,
        Text(name),
        cell(r["old_size"], size_style, fmt_bytes),
        cell(r["new_size"], size_style, fmt_bytes),
        cell(live("old"), live_style),
        cell(live("new"), live_style),
        cell(r["old_offset"], off_style),
        cell(r["new_offset"], off_style),
    ]


def compare_text(res: dict) -> Text:
    t = Text("\ncomparison\n", style="bold")
    for key in ("base", "other"):
        r = res[key]
        t.append(f"{r['allocator']} / {r['scheduler']}: ", style="bold" if key == "base" else "")
        if r.get("available"):
            t.append(
                f"peak {fmt_bytes(r['peak_bytes'])}, lower bound "
                f"{fmt_bytes(r['lower_bound_bytes'])}\n"
            )
        else:
            t.append(f"not available: {r.get('reason')}\n", style="yellow")
    b, o = res["base"], res["other"]
    if b.get("available") and o.get("available"):
        d = o["peak_bytes"] - b["peak_bytes"]
        pct = 100.0 * d / b["peak_bytes"] if b["peak_bytes"] else 0.0
        t.append(
            f"difference: {'+' if d >= 0 else ''}{fmt_bytes(d)} ({pct:+.1f}%)",
            style="red" if d > 0 else "green",
        )
    if res.get("error"):
        t.append(f"\n{res['error']}", style="red")
    return t
