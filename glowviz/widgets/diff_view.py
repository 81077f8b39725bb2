"""Diff view: what the selected pass changed (nodes added/removed/changed, provenance lines),
and the IR text side by side with the changes marked (context only, or the whole text)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from glowviz.diff import GraphDiff
from glowviz.session import CompileSession

CONTEXT = 3
TAG_STYLE = {"delete": "red", "insert": "green", "replace": "yellow"}


class DiffView(Vertical):
    BINDINGS = [
        Binding("f", "toggle_full", "Full/context", id="diff.full"),
        Binding("a", "pin_base", "Pin base", id="diff.pin"),
    ]

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.full = False
        self.base: int | None = None  # a pinned stage to diff against; None: the previous one
        self.session: CompileSession | None = None
        self.index: int | None = None
        self.current: GraphDiff | None = None
        self.pair: tuple[int, int] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="diff-summary-scroll"):
            yield Static("", id="diff-summary")
        yield DataTable(id="diff-table", cursor_type="row", show_header=True)

    def on_mount(self) -> None:
        self._columns()

    def _columns(self) -> None:
        t = self.query_one("#diff-table", DataTable)
        t.clear(columns=True)
        half = max(30, (self.size.width - 14) // 2) if self.size.width else 60
        t.add_column("#", key="ln", width=4)
        t.add_column("before", key="left", width=half)
        t.add_column("#", key="rn", width=4)
        t.add_column("after", key="right", width=half)

    def show(self, session: CompileSession, index: int) -> None:
        self.session, self.index = session, index
        summary = self.query_one("#diff-summary", Static)
        rec = session.stages[index]
        base = self.base if self.base is not None and self.base != index else None
        if base is None:
            d = session.diff_prev(index)
            prev = next(
                (j for j in range(index - 1, -1, -1) if session.stages[j].ir_kind == rec.ir_kind),
                None,
            )
        else:
            d, prev = session.diff(base, index), base
        self._columns()
        if d is None or prev is None:
            self.current, self.pair = None, None
            summary.update(
                Text(
                    f"{rec.label}: the first {rec.ir_kind} stage, nothing before it "
                    "to compare with",
                    style="dim",
                )
            )
            return
        self.current, self.pair = d, (prev, index)
        summary.update(self._summary(session, prev, index, d))
        self._fill(d)

    def _summary(self, session: CompileSession, a: int, b: int, d: GraphDiff) -> Text:
        ra, rb = session.stages[a], session.stages[b]
        t = Text()
        t.append(f"{ra.label}", style="bold")
        t.append("  →  ")
        t.append(f"{rb.label}", style="bold")
        if self.base is not None:
            t.append("  (pinned base; a: unpin)", style="dim")
        t.append("\n")
        if ra.ir_kind == rb.ir_kind == "graph":
            t.append(d.summary() + "\n", style="bold" if not d.empty else "dim")
            for n in d.added:
                t.append(f"  + {n.name} ({n.op}) : {', '.join(n.types)}\n", style="green")
            for n in d.removed:
                t.append(f"  - {n.name} ({n.op})\n", style="red")
            for c in d.changed:
                t.append(f"  ~ {c.describe()}\n", style="yellow")
            if d.provenance:
                t.append("provenance:\n", style="bold")
                for line in d.provenance:
                    t.append(f"  {line}\n", style="cyan")
            elif not d.empty:
                t.append("(no provenance recorded by these passes)\n", style="dim")
        else:
            changed = sum(1 for r in d.side_by_side if r.tag != "equal")
            t.append(f"{changed} changed lines (text diff)\n")
        t.rstrip()
        return t

    def _fill(self, d: GraphDiff) -> None:
        t = self.query_one("#diff-table", DataTable)
        rows = d.side_by_side
        keep = set(range(len(rows)))
        if not self.full:
            keep = set()
            for k, r in enumerate(rows):
                if r.tag != "equal":
                    keep.update(range(max(0, k - CONTEXT), min(len(rows), k + CONTEXT + 1)))
        last = -1
        for k, r in enumerate(rows):
            if k not in keep:
                continue
            if last >= 0 and k != last + 1:
                t.add_row(
                    Text("…", style="dim"),
                    Text("⋯", style="dim"),
                    Text("…", style="dim"),
                    Text("⋯", style="dim"),
                )
            last = k
            st = TAG_STYLE.get(r.tag, "")
            lst = "red" if r.tag in ("delete", "replace") else ""
            rst = "green" if r.tag in ("insert", "replace") else ""
            t.add_row(
                Text(str(r.left_no or ""), style="dim"),
                Text(r.left, style=lst or ("" if st else "dim"), no_wrap=True),
                Text(str(r.right_no or ""), style="dim"),
                Text(r.right, style=rst or ("" if st else "dim"), no_wrap=True),
            )
        if not rows or (not keep and not self.full):
            t.add_row("", Text("(IR text identical)", style="dim"), "", "")

    def action_toggle_full(self) -> None:
        self.full = not self.full
        if self.session is not None and self.index is not None:
            self.show(self.session, self.index)

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
