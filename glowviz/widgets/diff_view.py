"""Diff view: what the selected pass changed, rewrite by rewrite (tinygrad VIZ's model).

First the provenance summary (the rules that fired and how often, the nodes added, removed and
changed); then the current rewrite of the pass -- its rule, the nodes it consumed and produced,
and a red/green diff of just the lines it touched -- moved with left/right (up/down move
between passes); then the IR text side by side with the changes marked, inside a line too
(an attribute `activation = "relu"` shows which word changed), scrolled with the keyboard
(page up/down, j/k, home/end; shift+left/right shifts long lines; Tab enters the table)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from glowviz import keymap
from glowviz.diff import GraphDiff, Rewrite, SideBySideRow, inline_changes
from glowviz.session import CompileSession
from glowviz.widgets.stage_view import InfoLine, StageView
from glowviz.widgets.styles import Styles, styles
from glowviz.widgets.virtual_table import Anchored, Column, VirtualTable

CONTEXT = 3
#: How many lines of one rewrite's red/green diff are shown (the rest are counted).
REWRITE_LINES = 12


class RewriteStrip(Static, can_focus=True):
    """The current rewrite (focusable: the Diff view's keys act while it has the focus)."""


class DiffView(StageView):
    CLEARED = ("diff-summary", "diff-rewrite")
    BINDINGS = keymap.bindings("DiffView")

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.full = False
        self.base: int | None = None  # a pinned stage to diff against; None: the previous one
        self.current: GraphDiff | None = None
        self.pair: tuple[int, int] | None = None
        self.rewrites: list[Rewrite] = []
        self.rewrite = 0  # position in `rewrites`
        self.shift = 0  # columns the side-by-side text is shifted left

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="diff-summary-scroll"):
            yield InfoLine("", id="diff-summary")
        yield RewriteStrip("", id="diff-rewrite")
        yield VirtualTable(id="diff-table")

    def reset(self) -> None:
        super().reset()
        self.current, self.pair, self.rewrites, self.rewrite = None, None, [], 0

    def focus_target(self) -> Widget | None:
        return self.query_one(RewriteStrip)

    # -- data ---------------------------------------------------------------------------------
    def show(self, session: CompileSession, index: int) -> None:
        moved = (session, index) != (self.session, self.index)
        self.session, self.index = session, index
        base = self.base if self.base is not None and self.base != index else None
        prev = base if base is not None else session.started_from(index)
        if moved:
            self.rewrite, self.shift = 0, 0

        def compute() -> tuple[GraphDiff | None, list[Rewrite]]:
            # everything the first frame draws: the diff, the rewrites, the first one's lines
            d = session.diff(prev, index) if prev is not None else None
            rewrites = session.rewrites(index)
            if rewrites:
                session.rewrite_diff(index, min(self.rewrite, len(rewrites) - 1))
            return d, rewrites

        ready = (prev is None or session.has_diff(prev, index)) and all(
            session.is_cached(what, i)
            for what, i in (("rewrites", index), ("text_index", index), ("text_index", prev))
            if i is not None
        )
        summary = self.query_one("#diff-summary", Static)

        def waiting() -> None:
            summary.update(
                self.stage_label(session, index) + Text("  computing the diff…", style="dim")
            )
            self.query_one(VirtualTable).clear()
            self.query_one(RewriteStrip).update("")

        def failed(msg: str) -> None:
            summary.update(self.stage_label(session, index) + Text(f"  diff failed: {msg}"))

        self.load(
            session,
            index,
            f"diff-{prev}",
            compute,
            lambda data: self._draw(session, index, prev, *data),
            waiting,
            failed,
            cached=ready,
        )

    def _draw(
        self,
        session: CompileSession,
        index: int,
        prev: int | None,
        d: GraphDiff | None,
        rewrites: list[Rewrite],
    ) -> None:
        summary = self.query_one("#diff-summary", Static)
        rec = session.stages[index]
        self.rewrites = rewrites
        if d is None or prev is None:
            self.current, self.pair = None, None
            summary.update(
                self.stage_label(session, index)
                + Text(
                    f": the first {rec.ir_kind} stage, nothing before it to compare with",
                    style="dim",
                )
            )
            self.query_one(VirtualTable).clear()
            self._show_rewrite()
            return
        self.current, self.pair = d, (prev, index)
        summary.update(self._summary(session, prev, index, d))
        self._fill(d)
        self._show_rewrite()

    def _summary(self, session: CompileSession, a: int, b: int, d: GraphDiff) -> Text:
        st = styles(self.app)
        ra, rb = session.stages[a], session.stages[b]
        t = self.stage_label(session, b)
        t.append(f"  against {a} {ra.label}", style="dim")
        if self.base is not None:
            t.append("  (pinned base; a: unpin)", style="dim")
        t.append("\n")
        # The provenance summary first: which rules fired, how often.
        rules: dict[str, int] = {}
        for rw in self.rewrites:
            rules[rw.rule or "(outside a rewrite)"] = (
                rules.get(rw.rule or "(outside a rewrite)", 0) + 1
            )
        if rules:
            t.append(f"{len(self.rewrites)} rewrite{'s' if len(self.rewrites) != 1 else ''}: ")
            t.append(
                ", ".join(f"{r} ×{n}" for r, n in sorted(rules.items(), key=lambda x: -x[1])),
                style=st.info,
            )
            t.append("\n")
        elif rb.changed:
            t.append("no provenance recorded by this pass\n", style="dim")
        else:
            t.append(f"{rb.pass_name} changed nothing\n", style="dim")
        if ra.ir_kind == rb.ir_kind == "graph":
            t.append(d.summary(), style="bold" if not d.empty else "dim")
            changed = [c.name for c in d.changed]
            if changed:
                t.append("  changed: ", style="dim")
                t.append(", ".join(changed[:6]) + (" …" if len(changed) > 6 else ""))
        elif ra.ir_kind != rb.ir_kind:
            t.append(
                f"{ra.ir_kind} text beside the {rb.ir_kind} text {rb.pass_name} made from it",
                style="bold",
            )
        else:
            n = sum(1 for r in d.side_by_side if r.tag != "equal")
            t.append(f"{n} changed lines of {rb.ir_kind} text")
        return t

    # -- one rewrite --------------------------------------------------------------------------
    def _show_rewrite(self) -> None:
        strip = self.query_one(RewriteStrip)
        session, index = self.session, self.index
        if session is None or index is None:
            strip.update("")
            return
        st = styles(self.app)
        if not self.rewrites:
            strip.update(
                Text("no rewrites in this pass", style="dim") + Text("   ↑/↓ passes", style="dim")
            )
            return
        self.rewrite = max(0, min(len(self.rewrites) - 1, self.rewrite))
        rw = self.rewrites[self.rewrite]
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"rewrite {self.rewrite + 1}/{len(self.rewrites)} ", style="bold")
        t.append(rw.rule or "(outside a rewrite)", style=st.bold("info"))
        t.append("   ←/→ rewrites  ↑/↓ passes", style="dim")
        t.append("\n")
        cons, prod = rw.consumed, rw.produced
        if cons:
            t.append("consumed ", style="dim")
            t.append(", ".join(cons[:6]) + (" …" if len(cons) > 6 else ""), style=st.removed)
            t.append("  ")
        if prod:
            t.append("produced ", style="dim")
            t.append(", ".join(prod[:6]) + (" …" if len(prod) > 6 else ""), style=st.added)
        if rw.moved:
            t.append("moved ", style="dim")
            t.append(", ".join(rw.moved[:6]), style=st.changed)
        rd = session.rewrite_diff(index, self.rewrite)
        lines = rd.lines
        for k, (tag, no, text) in enumerate(lines[:REWRITE_LINES]):
            t.append("\n")
            pair = _partner(lines, k)
            t.append_text(_diff_line(tag, no, text, pair, st))
        if len(lines) > REWRITE_LINES:
            t.append(f"\n… {len(lines) - REWRITE_LINES} more lines", style="dim")
        for note in rd.notes:
            t.append(f"\n{note}", style="dim italic")
        strip.update(t)

    def action_rewrite_next(self) -> None:
        self.action_rewrite(1)

    def action_rewrite_prev(self) -> None:
        self.action_rewrite(-1)

    def action_rewrite(self, delta: int) -> None:
        if self.rewrites:
            self.rewrite = max(0, min(len(self.rewrites) - 1, self.rewrite + delta))
            self._show_rewrite()

    # -- the side-by-side text ----------------------------------------------------------------
    def _fill(self, d: GraphDiff) -> None:
        t = self.query_one(VirtualTable)
        st = styles(self.app)
        rows = d.side_by_side
        keep = set(range(len(rows)))
        if not self.full:
            keep = set()
            for k, r in enumerate(rows):
                if r.tag != "equal":
                    keep.update(range(max(0, k - CONTEXT), min(len(rows), k + CONTEXT + 1)))
        # The text columns share the table's width when it is laid out (the rows do not depend
        # on it: a diff drawn before layout used to keep a guessed width and run off the edge).
        t.set_columns(
            [
                Column("#", cap=5, justify="right"),
                Column("before", width=20, flex=True),
                Column("#", cap=5, justify="right"),
                Column("after", width=20, flex=True),
            ]
        )
        out: list[list] = []
        last = -1
        for k, r in enumerate(rows):
            if k not in keep:
                continue
            if last >= 0 and k != last + 1:
                gap = Text("⋯", style="dim")
                out.append([Text("…", style="dim"), gap, Text("…", style="dim"), gap])
            last = k
            out.append(side_cells(r, self.shift, st))
        if not out:
            out.append(["", Text("(IR text identical)", style="dim"), "", ""])
        t.set_rows(out, keys=[str(k) for k in range(len(out))])

    def action_scroll_ir(self, pages: int) -> None:
        t = self.query_one(VirtualTable)
        t.move_cursor(t.cursor_row + pages * max(1, t.size.height - 2))

    def action_shift_ir(self, cols: int) -> None:
        self.shift = max(0, self.shift + cols)
        if self.current is not None:
            self._fill(self.current)

    def action_toggle_full(self) -> None:
        self.full = not self.full
        if self.current is not None:
            self._fill(self.current)

    def action_pin_base(self) -> None:
        """Pin the current stage as the base of later diffs (again: unpin)."""
        if self.base is not None:
            self.base = None
            self.notify("diff base unpinned: diffs against the previous stage")
        elif self.index is not None:
            self.base = self.index
            self.notify(f"diff base pinned at stage {self.index}")
        if self.session is not None and self.index is not None:
            self.show(self.session, self.index)


def _partner(lines: list[tuple[str, int, str]], k: int) -> str | None:
    """The other side of a changed line (a '-' followed by its '+', or the reverse)."""
    tag = lines[k][0]
    other = "+" if tag == "-" else "-"
    for j in (k + 1, k - 1):
        if 0 <= j < len(lines) and lines[j][0] == other:
            a, b = lines[k][2], lines[j][2]
            if a.split("=", 1)[0].strip() == b.split("=", 1)[0].strip():
                return b
    return None


def _diff_line(tag: str, no: int, text: str, pair: str | None, st: Styles) -> Text:
    colour = st.removed if tag == "-" else st.added
    t = Text(f"{tag}{no:>5} ", style=colour)
    body = Text(text.strip(), style=colour)
    if pair is not None:
        ra, rb = inline_changes(text.strip(), pair.strip())
        for a, b in ra:
            body.stylize(st.on_removed if tag == "-" else st.on_added, a, b)
    t.append_text(body)
    return t


def side_cells(r: SideBySideRow, shift: int, st: Styles) -> list:
    """The four cells of one side-by-side row; a changed line's differing words highlighted,
    and a long changed line shown from just before its first change when its column is too
    narrow to reach it (unless the user shifted the text)."""
    lst = st.removed if r.tag in ("delete", "replace") else ""
    rst = st.added if r.tag in ("insert", "replace") else ""
    left, right = Text(r.left, style=lst or "dim"), Text(r.right, style=rst or "dim")
    if r.tag == "equal":
        left.stylize("dim")
        right.stylize("dim")
    first = 0
    if r.tag == "replace":
        ra, rb = inline_changes(r.left, r.right)
        for a, b in ra:
            left.stylize(st.on_removed, a, b)
        for a, b in rb:
            right.stylize(st.on_added, a, b)
        first = min([a for a, _ in ra + rb] or [0])
    cells: list[Text | Anchored] = [left, right]
    if shift:
        cells = [
            Text("…", style="dim") + text[shift:] if len(text) > shift else Text("")
            for text in (left, right)
        ]
    elif first:
        cells = [Anchored(left, first), Anchored(right, first)]
    return [
        Text(str(r.left_no or ""), style="dim"),
        cells[0],
        Text(str(r.right_no or ""), style="dim"),
        cells[1],
    ]
