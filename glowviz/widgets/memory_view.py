"""Memory view of the selected stage's plan: peak / lower bound / gap; the memory timeline
across passes (the `glowviz mem --per-pass` series: selecting a point jumps to that pass, the
pass that raised the peak is marked); the allocation map (offset x instruction, zoom and pan
with the keyboard, the peak and the lower bound as lines, aliases hatched inside the buffer they
share) and the plan's certificate; the buffers live at the peak sorted
by size, program order or padding waste (XProf's three orders); the card of the buffer under
the cursor (name, size, shape, producer, users, lifetime, why it sits there); and a
side-by-side comparison with a second plan: another allocator or scheduler (A/S, recompiled in
a worker) or a second report (o: a glowviz.memory/1 JSON file, a model or a mem-diff spec).

Everything drawn is the session's `MemoryReport` of the stage, the per-pass rows of
`glowviz.exports.per_pass` and the comparison data (`CompileSession.compare_memory_report`,
`glowviz.session.memcompare`); asking for a second report posts `ReportRequested`, choosing
a timeline point posts `PassChosen` (the screen answers both)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Static

from compiler.memory.allocators import allocator_names
from compiler.memory.report import MemoryReport
from compiler.scheduling import SCHEDULERS
from glowviz import keymap, themes
from glowviz.session import CompileSession, fmt_bytes
from glowviz.widgets.bars import colour
from glowviz.widgets.lifetimes_view import buffer_card, load_plan, report_label
from glowviz.widgets.memory_map import MemoryMap, draw_map, map_top
from glowviz.widgets.memory_timeline import MemoryTimeline
from glowviz.widgets.stage_view import InfoLine, StageView
from glowviz.widgets.styles import Styles, styles
from glowviz.widgets.virtual_table import Column, VirtualTable

#: The buffer list's orders (`s` cycles): XProf's three, then the offset.
SORTS = ("size", "program order", "padding waste", "offset")


def scheduler_names() -> list[str]:
    return list(SCHEDULERS)


def certificate_text(report: MemoryReport, st: Styles) -> Text:
    """The plan's certificate in one line: every schedule's lower bound, whether the schedule is
    proven optimal (else the buffers behind the gap), and the aliases it places by design."""
    c = report.certificate
    if c is None or c.all_schedules_lower_bound_bytes is None:
        return Text("")
    # The verdict first: a narrow header cuts the line's end.
    t = Text(f"\nschedule {c.scheduler_used or c.scheduler}: ")
    if c.schedule_proven_optimal:
        t.append("proven optimal", style=st.bold("added"))
    else:
        t.append("not proven optimal", style=st.bold("warn"))
    t.append(" │ all schedules need ")
    t.append(fmt_bytes(c.all_schedules_lower_bound_bytes), style="bold")
    t.append(f" ({c.all_schedules_bound_from})")
    if c.gap_buffers:
        t.append(f" │ gap held by {', '.join(c.gap_buffers[:4])}", style="dim")
    if c.aliases:
        parts = ", ".join(
            f"{n} {'sum post-op' if k == 'sum' else 'concat slices'}"
            for k, n in sorted(c.aliases.items())
        )
        t.append(f" │ aliases: {parts}", style="dim")
    return t


class MemoryView(StageView):
    CLEARED = (
        "memory-figures",
        "memory-figures-more",
        "memory-plan-more",
        "memory-detail",
        "memory-table-title",
    )
    BINDINGS = keymap.bindings("MemoryView")

    class ReportRequested(Message):
        """Ask the screen for a second report to compare with (`last`: the previous answer);
        the screen answers with `compare_report(spec)`."""

        def __init__(self, view: MemoryView, last: str) -> None:
            super().__init__()
            self.view = view
            self.last = last

    class PassChosen(Message):
        """A timeline point was chosen: go to stage `index`."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.report: MemoryReport | None = None
        self.selected: str | None = None
        self.sort = "size"
        self.live_only = True
        self.compare_text: Text | None = None
        #: The comparison shown (`CompileSession.compare_memory_with`'s data), or None.
        self.comparison: dict | None = None
        self.compare_error: str | None = None
        self._cmp_selected: tuple[str | None, str | None] = (None, None)
        self._last_spec = ""
        self._alloc_k = 0
        self._sched_k = 0
        #: The per-pass rows of the timeline, and the session they belong to.
        self.timeline_rows: list[dict[str, Any]] | None = None
        self._timeline_session: CompileSession | None = None
        #: A buffer to select once the plan being computed is drawn, and which plan is drawn.
        self._pending_select: str | None = None
        self._loaded: tuple[int, int | None, str] | None = None

    def compose(self) -> ComposeResult:
        yield InfoLine("", id="memory-figures")
        # the header's notes (per-pass figure, certificate): under the figures, or, in the
        # short layout, beside the buffer card (the rows go to the table)
        yield Static("", id="memory-figures-more")
        status = Static("", id="memory-compare-status")
        status.display = False
        yield status
        yield MemoryTimeline(id="memory-timeline")
        yield MemoryMap(id="memory-map")
        with Vertical(id="memory-compare-pane"):
            yield Static("", id="cmp-figures")
            with Horizontal(id="cmp-maps"):
                yield Static("", id="cmp-map-base")
                yield Static("", id="cmp-map-other")
            yield DataTable(id="cmp-table", cursor_type="row")
        with Horizontal(id="memory-bottom"):
            with Vertical(id="memory-list"):
                yield Static("", id="memory-table-title")
                yield VirtualTable(id="memory-table")
            with VerticalScroll(id="memory-side"):
                yield Static("", id="memory-detail")
                yield Static("", id="memory-plan-more")
                yield Static("", id="memory-compare")

    def on_built(self) -> None:
        self._apply_styles()
        self.app.theme_changed_signal.subscribe(self, lambda _t: self._apply_styles())

    def _apply_styles(self) -> None:
        st = styles(self.app)
        tl = self.query_one(MemoryTimeline)
        tl.colours = {"peak": st.info, "bound": "dim", "raise": st.bold("removed"), "up": st.warn}
        tl.refresh()
        mp = self.query_one(MemoryMap)
        mp.peak_style, mp.bound_style = st.removed, st.muted
        mp.refresh()

    def reset(self) -> None:
        super().reset()
        self.report = None
        self._pending_select, self._loaded = None, None
        if self.comparison or self.compare_error:
            self._close_compare()
        self.timeline_rows, self._timeline_session = None, None
        if not self.built:
            return
        self.query_one(MemoryTimeline).clear()
        self.query_one(MemoryMap).set_report(None, self._palette())

    def focus_target(self) -> Widget | None:
        return self.query_one("#memory-table", VirtualTable)

    # -- the stage's plan ---------------------------------------------------------------------
    def show(self, session: CompileSession, index: int) -> None:
        if session is not self.session and (self.comparison or self.compare_error):
            self._close_compare()
        self.session, self.index = session, index
        figs = self.query_one("#memory-figures", Static)
        self._set_more(Text(""))  # the notes of the stage shown before
        self.query_one(MemoryTimeline).show_stage(index)
        load_plan(self, session, index, figs, self._draw)
        self._start_timeline(session)

    def _draw(self, rep: MemoryReport | None) -> None:
        session, index = self.session, self.index
        assert session is not None and index is not None
        st = styles(self.app)
        figs = self.query_one("#memory-figures", Static)
        self.report = rep
        mp = self.query_one(MemoryMap)
        if rep is None:
            figs.update(
                self.stage_label(session, index)
                + Text(
                    f"  not available: {session.unavailable('memory plan')}", style=st.bold("warn")
                )
            )
            self._set_more(Text(""))
            mp.set_report(None, self._palette())
            self.query_one("#memory-table", VirtualTable).clear()
            self.query_one("#memory-table-title", Static).update("")
            return
        self._figures(rep)
        mp.set_report(rep, self._palette())
        self._fill_table()
        self._loaded = self._want
        pending, self._pending_select = self._pending_select, None
        if pending is not None:
            self.select(pending)

    def _figures(self, rep: MemoryReport) -> None:
        """The header: the stage, how its plan was made, peak / lower bound / gap / no reuse,
        then its notes: the timeline's own figure where it differs, the certificate. One fact
        group per line, the most telling first, so that the narrow layout (lines cut, not
        wrapped: at 100x30 a wrapped header took nine lines and left the buffer table none)
        loses only tails; the short layout moves the notes beside the buffer card."""
        session, index = self.session, self.index
        assert session is not None and index is not None
        st = styles(self.app)
        gap_style = st.bold("added") if rep.gap_bytes == 0 else st.bold("warn")
        self.query_one("#memory-figures", Static).update(
            self.stage_label(session, index)
            + Text.assemble(
                f"  {report_label(session, index)}\n",
                "peak ",
                (fmt_bytes(rep.peak_bytes), st.bold("removed")),
                " │ lower bound ",
                (fmt_bytes(rep.lower_bound_bytes), "bold"),
                " │ gap ",
                (f"{fmt_bytes(rep.gap_bytes)} ({rep.gap_pct:.1f}%)", gap_style),
                "\nno reuse ",
                fmt_bytes(rep.no_reuse_bytes),
                " │ ",
                (f"{rep.allocator}, {rep.scheduler}", "dim"),
            )
        )
        self._set_more(self._per_pass_note(rep) + certificate_text(rep, st))

    def header_text(self) -> str:
        """The header as a reader sees it: the figures, then their notes (wherever the layout
        puts them)."""
        figures = str(self.query_one("#memory-figures", Static).render())
        notes = str(self.query_one("#memory-plan-more", Static).render())
        return figures + notes

    def _set_more(self, notes: Text) -> None:
        """The header's notes (each starts with a newline) under the header and beside the
        card: the layout shows one of the two."""
        under = self.query_one("#memory-figures-more", Static)
        under.update(notes[1:] if notes.plain.startswith("\n") else notes)
        under.set_class(not notes.plain.strip(), "-empty")
        self.query_one("#memory-plan-more", Static).update(notes)

    def timeline_row(self) -> dict[str, Any] | None:
        """The timeline's point for the stage shown: its own row, or the last row before it
        (a pass that cannot change memory has none)."""
        if not self.timeline_rows or self.index is None:
            return None
        at = [r for r in self.timeline_rows if r["index"] <= self.index]
        return at[-1] if at else None

    def _per_pass_note(self, rep: MemoryReport) -> Text:
        """When the timeline measures this stage differently from the plan above (a graph
        stage: the plan runs the whole low-level pipeline, the per-pass row only IRGen in
        topological order; a low-level stage: the row tightens lifetimes first), say so with
        both figures named, so two peaks of one stage are never read as one contradicting the
        other. Nothing when they agree."""
        row = self.timeline_row()
        if row is None or row["peak_bytes"] == rep.peak_bytes:
            return Text("")
        if row["ir_kind"] != "graph":
            how = "lifetimes tightened"
        else:  # the schedule row is ordered by the compile's scheduler: its delta is the order's
            order = rep.scheduler if row["stage"] == "schedule" else "topological"
            how = f"{order} order + IRGen only"
        return Text(
            f"\nper-pass timeline: {fmt_bytes(row['peak_bytes'])} here ({how}, as mem --per-pass)",
            style="dim",
        )

    def _palette(self) -> list[str]:
        """The current theme's buffer colours (the exported figures use the same)."""
        return themes.theme(self.app.theme).buffer_colours

    def _fill_table(self) -> None:
        rep, session = self.report, self.session
        if rep is None or session is None:
            return
        t = self.query_one("#memory-table", VirtualTable)
        at_peak = set(rep.live_at_peak)
        shown = [
            (k, b) for k, b in enumerate(rep.buffers) if not self.live_only or b.name in at_peak
        ]
        pad = {b.name: session.buffer_info(self.index, b.name).get("padding", 0) for _k, b in shown}
        key = {
            "size": lambda kb: (-kb[1].size, kb[1].first),
            "program order": lambda kb: (kb[1].first, kb[1].offset),
            "padding waste": lambda kb: (-pad[kb[1].name], -kb[1].size),
            "offset": lambda kb: (kb[1].offset, kb[1].first),
        }[self.sort]
        shown.sort(key=key)
        total = sum(b.size for _k, b in shown)
        which = f"live at the peak (instr {rep.peak_instruction})" if self.live_only else "all"
        self.query_one("#memory-table-title", Static).update(
            Text.assemble(
                (f"{len(shown)} buffers {which}", "bold"),
                f", {fmt_bytes(total)}, by ",
                (self.sort, "bold"),
                ("   s: sort  l: peak/all", "dim"),
            )
        )
        palette = self._palette()
        t.set_columns(
            [
                # the width the numbers leave (a long name is cut: at 100x30 a capped column
                # made the line a cell wider than the table, and a scrollbar took a row)
                Column("buffer", flex=True),
                Column("size", width=10, justify="right"),
                Column("live", cap=11),
                Column("offset", cap=10, justify="right"),
                Column("pad", cap=9, justify="right"),
            ]
        )
        rows: list[list[str | Text]] = [
            [
                (
                    Text("╱ ", style="dim") + Text(b.name, style="italic")
                    if b.alias_of
                    else Text("■ ", style=colour(k, palette)) + Text(b.name)
                ),
                fmt_bytes(b.size),
                f"{b.first}–{b.last}",
                str(b.offset),
                fmt_bytes(pad[b.name]) if pad[b.name] else "-",
            ]
            for k, b in shown
        ]
        names = [b.name for _k, b in shown]
        cursor = names.index(self.selected) if self.selected in names else 0
        t.set_rows(rows, keys=names, cursor=cursor)
        if t.cursor_key is not None:
            self._card(t.cursor_key)

    def select(self, name: str) -> bool:
        """Select buffer `name` in the table, the card and the map. While the stage's plan is
        still being computed, the selection waits for it (a jump from another view)."""
        if self.report is None or self._want != self._loaded:
            self._pending_select = name
            return False
        t = self.query_one("#memory-table", VirtualTable)
        k = t.get_row_index(name)
        if k is None and self.live_only and self.report is not None and self.report.buffer(name):
            self.live_only = False  # a buffer not live at the peak: list them all
            self._fill_table()
            k = t.get_row_index(name)
        if k is None:  # not in this stage's plan
            return False
        t.move_cursor(k)
        self.selected = name
        self._card(name)
        self.query_one(MemoryMap).focus_buffer(name)
        return True

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self._fill_table()

    def action_toggle_live(self) -> None:
        self.live_only = not self.live_only
        self._fill_table()

    def action_focus_timeline(self) -> None:
        self.query_one(MemoryTimeline).focus()

    def action_focus_map(self) -> None:
        self.query_one(MemoryMap).focus()

    @on(VirtualTable.RowHighlighted, "#memory-table")
    def _highlight(self, event: VirtualTable.RowHighlighted) -> None:
        event.stop()
        if event.key is None or self.report is None:
            return
        self.selected = event.key
        self._card(event.key)
        self.query_one(MemoryMap).focus_buffer(event.key)

    @on(MemoryMap.BufferUnderCursor)
    def _under_cursor(self, event: MemoryMap.BufferUnderCursor) -> None:
        event.stop()
        if event.name is None:
            self.query_one("#memory-detail", Static).update(
                Text("free space under the cursor", style="dim")
            )
            return
        self.selected = event.name
        self._card(event.name)

    def _card(self, name: str) -> None:
        b = self.report.buffer(name) if self.report is not None else None
        if b is None or self.session is None:
            return
        card = buffer_card(b, self.session.buffer_info(self.index, name))
        if self.report is not None and name in self.report.live_at_peak:
            card.append("\nlive at the peak", style=styles(self.app).bold("removed"))
        self.query_one("#memory-detail", Static).update(card)

    # -- the timeline across passes -----------------------------------------------------------
    def _start_timeline(self, session: CompileSession) -> None:
        tl = self.query_one(MemoryTimeline)
        if self._timeline_session is session:
            return
        if not session.done:
            tl.clear("memory timeline: after the compile")
            return
        if session.error is not None or session.result is None or session.result.plan is None:
            tl.clear(f"memory timeline: not available ({session.unavailable('memory plan')})")
            self._timeline_session = session
            return
        self._timeline_session = session
        tl.clear("memory timeline: planning every pass…")
        self._timeline_worker(session)

    @work(thread=True, exclusive=True, group="memory-timeline")
    def _timeline_worker(self, session: CompileSession) -> None:
        from glowviz.exports.per_pass import per_pass_memory

        n = len(session.stages)

        def listener(key: Any, value: Any) -> None:
            if isinstance(value, MemoryReport) and isinstance(key[1], int):
                self.app.call_from_thread(
                    self._timeline_partial,
                    session,
                    key[1],
                    value.peak_bytes,
                    value.lower_bound_bytes,
                    f"memory timeline: planned stage {key[1]} of {n}…",
                )

        session.view_data_listener = listener
        try:
            # background work: the stage's own plan (what the user looks at) goes first, and
            # any view's data asked for meanwhile
            rows, err = per_pass_memory(session, session.wait_for_foreground), None
        except Exception as e:  # noqa: BLE001 - the timeline says so; the view keeps working
            rows, err = [], f"{type(e).__name__}: {e}"
        finally:
            session.view_data_listener = None
        self.app.call_from_thread(self._timeline_done, session, rows, err)

    def _timeline_partial(
        self, session: CompileSession, index: int, peak: int, bound: int, status: str
    ) -> None:
        if session is self._timeline_session and self.timeline_rows is None:
            self.query_one(MemoryTimeline).add_partial(index, peak, bound, status)

    def _timeline_done(self, session: CompileSession, rows: list, err: str | None) -> None:
        if session is not self._timeline_session:
            return
        tl = self.query_one(MemoryTimeline)
        if err is not None:
            tl.clear(f"memory timeline failed: {err}")
            return
        self.timeline_rows = rows
        tl.set_rows(rows)
        if self.report is not None and self._loaded == self._want:
            self._figures(self.report)  # names the timeline's figure if it differs

    @on(MemoryTimeline.PassChosen)
    def _pass_chosen(self, event: MemoryTimeline.PassChosen) -> None:
        event.stop()
        self.post_message(self.PassChosen(event.index))

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
            text = compare_text(res, styles(self.app))
            cmp = res.get("comparison")
            if cmp is None:
                error = (
                    res.get("error")
                    or res["other"].get("reason")
                    or res["base"].get("reason")
                    or "no memory plan to compare"
                )
        except Exception as e:  # noqa: BLE001
            text = Text(f"comparison failed: {type(e).__name__}: {e}", style="bold")
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
        st = styles(self.app)
        if error is not None or cmp is None:
            self._close_compare()
            self.compare_error = " ".join(str(error or "no comparison").split())
            self._set_status(
                Text("cannot compare: ", style=st.bold("removed"))
                + Text(self.compare_error, style=st.removed)
            )
            if self.app.focused is None or self.app.focused.id == "cmp-table":
                self.query_one("#memory-table", VirtualTable).focus()
            return
        self.compare_error = None
        self.comparison = cmp
        self._cmp_selected = (None, None)
        self.add_class("comparing")
        self._set_status(
            Text.assemble(
                ("comparing with ", "bold"),
                (cmp["other"]["label"], st.bold("info")),
                ("   x: close   o: another report", "dim"),
            )
        )
        self.query_one("#cmp-figures", Static).update(compare_figures(cmp, st))
        self._fill_compare_table(cmp)
        self._draw_compare_maps()
        self.query_one("#cmp-table", DataTable).focus()

    def action_close_compare(self) -> None:
        self._close_compare()
        self.query_one("#memory-table", VirtualTable).focus()

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
        st = styles(self.app)
        for k, r in enumerate(cmp["rows"]):
            t.add_row(*compare_row_cells(r, st), key=str(k))

    @on(DataTable.RowHighlighted, "#cmp-table")
    def _cmp_highlight(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if self.comparison is None or event.row_key is None or event.row_key.value is None:
            return
        r = self.comparison["rows"][int(event.row_key.value)]
        self._cmp_selected = (r["old"], r["new"])
        self._draw_compare_maps()

    def on_resize(self) -> None:
        if self.comparison is not None:
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
        rows = 10 if (self.app.size.height or 50) >= 40 else 5
        old, new = self._cmp_selected
        palette = self._palette()
        st = styles(self.app)
        for w, side, label, report, sel in (
            (left, "base", "this", base, old),
            (right, "other", "other", other, new),
        ):
            t = Text(f"{label}: {cmp[side]['label']}\n", style="bold")
            t.append_text(
                draw_map(report, width, palette, rows, selected=sel, top=top, peak_style=st.removed)
            )
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


def _delta_style(d: int, st: Any) -> str:
    return st.bold("removed") if d > 0 else st.bold("added") if d < 0 else "dim"


def _signed(d: int) -> str:
    return ("+" if d > 0 else "") + fmt_bytes(d)


def compare_figures(cmp: dict, st: Any) -> Text:
    """Both sides' peak, lower bound, no-reuse and regions with deltas (growth red, shrink
    green), and the buffer match summary."""
    d = cmp["diff"]
    t = Text(no_wrap=True)
    t.append(f"{'figure':<20}{'this':>12}  {'other':>12}  delta\n", style="bold")

    def line(label: str, x: dict) -> None:
        t.append(f"{label:<20}{fmt_bytes(x['old']):>12}  {fmt_bytes(x['new']):>12}  ")
        pct = "" if x["pct"] is None or x["delta"] == 0 else f" ({x['pct']:+.1f}%)"
        t.append(
            f"{_signed(x['delta']) if x['delta'] else '='}{pct}",
            style=_delta_style(x["delta"], st),
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
        ("grew", st.removed),
        ("shrank", st.added),
        ("appeared", st.removed),
        ("vanished", st.added),
        ("longer", st.changed),
        ("shorter", st.added),
        ("moved", st.accent),
    ):
        t.append(f"{key} {len(b[key])}", style=style if b[key] else "dim")
        t.append("  ")
    return t


def compare_row_cells(r: dict, st: Any) -> list[Text]:
    """The cells of one changed buffer; the changed cells highlighted."""
    tags = r["tags"]
    tag_style = {
        "grew": st.bold("removed"),
        "appeared": st.bold("removed"),
        "longer": st.bold("changed"),
        "shrank": st.bold("added"),
        "vanished": st.bold("added"),
        "shorter": st.added,
        "moved": st.accent,
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
        (st.bold("removed") if (r["size_delta"] or 0) > 0 else st.bold("added"))
        if "size" in r["changed"]
        else ""
    )
    live_style = (
        (st.bold("changed") if "longer" in tags or "appeared" in tags else st.bold("added"))
        if "live" in r["changed"]
        else ""
    )
    off_style = st.bold("accent") if "offset" in r["changed"] else ""

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


def compare_text(res: dict, st: Any) -> Text:
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
            t.append(f"not available: {r.get('reason')}\n", style=st.warn)
    b, o = res["base"], res["other"]
    if b.get("available") and o.get("available"):
        d = o["peak_bytes"] - b["peak_bytes"]
        pct = 100.0 * d / b["peak_bytes"] if b["peak_bytes"] else 0.0
        t.append(
            f"difference: {'+' if d >= 0 else ''}{fmt_bytes(d)} ({pct:+.1f}%)",
            style=st.removed if d > 0 else st.added,
        )
    if res.get("error"):
        t.append(f"\n{res['error']}", style=st.removed)
    return t
