"""Graph view of the selected stage, two ways (`w` switches):

- the node list (NodeList: only the rows in view are drawn, so a ResNet-50 stage shows as fast
  as a small one) beside the selected node's neighbourhood laid out by Graphviz;
- the whole graph, laid out by Graphviz once per stage and fold level (cached, in a worker),
  panned with the arrows and zoomed with +/-, the selected node centred, the tensor shapes on
  the edges, the nodes the selected pass created (green) or changed (yellow) marked, repeated
  blocks and long chains folded into one box each (`f`: fold on/off, `e`: open the group of
  the selected node) and a minimap of where the view is.

A low-level stage has no graph: the view says so and shows nothing of an earlier stage."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Static

from glowviz import keymap, themes
from glowviz.session import CompileSession
from glowviz.widgets.graph_canvas import GraphCanvas, minimap
from glowviz.widgets.graph_fold import LEVELS, Folded, fold_graph
from glowviz.widgets.graph_layout import (
    Drawing,
    LayoutError,
    cached_layout,
    dot_source,
    draw_layout,
    parse_plain,
    render_neighbourhood,
)
from glowviz.widgets.node_list import NodeList
from glowviz.widgets.stage_view import InfoLine, StageView
from glowviz.widgets.styles import styles

ZOOMS = (1.0, 0.7, 0.5, 0.35, 0.2)
#: Above this many nodes the whole graph starts folded.
FOLD_ABOVE = 80


class GraphView(StageView):
    CLEARED = ("graph-info", "graph-neigh", "graph-minimap")
    BINDINGS = keymap.bindings("GraphView")

    class NodeOpened(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rows: list[dict] = []
        self._shown_session: CompileSession | None = None
        self.selected_node: str | None = None
        self.radius = 2
        self.whole = False
        self.zoom = 0
        self.fold: int | None = None  # None: by the graph's size
        self.expanded: set[str] = set()
        self.folded: Folded | None = None
        self.drawing: Drawing | None = None
        self._layout_key: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Input(
            placeholder="search nodes (name or op), Enter: next match, Esc: close",
            id="graph-search",
            classes="hidden",
        )
        yield InfoLine("", id="graph-info")
        with Horizontal(id="graph-list-mode"):
            yield NodeList(id="graph-table")
            with VerticalScroll(id="graph-neigh-scroll"):
                yield Static("", id="graph-neigh")
        with Vertical(id="graph-whole-mode"):
            yield GraphCanvas(id="graph-canvas")
            yield Static("", id="graph-minimap")

    def on_built(self) -> None:
        self._apply_theme()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._apply_theme())
        self.set_class(self.whole, "-whole")

    def _styles(self) -> dict[str, str]:
        """Node styles by category: the current theme's [ui.categories]."""
        return themes.theme(self.app.theme).ui_categories

    def _apply_theme(self) -> None:
        self.query_one("#graph-table", NodeList).set_kind_styles(self._styles())
        self._layout_key = None
        self._refresh_drawing()

    def reset(self) -> None:
        super().reset()
        self.rows, self._shown_session, self.selected_node = [], None, None
        self.folded, self.drawing, self._layout_key = None, None, None
        self.expanded = set()
        if self.built:
            self.query_one(GraphCanvas).set_drawing(None)

    def focus_target(self) -> Widget | None:
        return self.query_one(GraphCanvas) if self.whole else self.query_one(NodeList)

    # -- the stage ----------------------------------------------------------------------------
    def show(self, session: CompileSession, index: int) -> None:
        new_session = session is not self.session
        self.session, self.index = session, index
        rec = session.stages[index]
        t = self.query_one("#graph-table", NodeList)
        if new_session:
            self.expanded = set()
        if rec.ir_kind != "graph":
            # Nothing of an earlier stage may stay drawn (a pending layout is dropped too).
            t.clear()
            self.rows, self._shown_session = [], session
            self.folded, self.drawing, self._layout_key = None, None, None
            self.query_one("#graph-info", Static).update(
                self.stage_label(session, index)
                + Text(": a low-level IR stage; see the IR and Debugger views", style="dim")
            )
            self.query_one("#graph-neigh", Static).update("")
            self.query_one(GraphCanvas).set_drawing(None)
            self.query_one("#graph-minimap", Static).update("")
            return
        rows = session.graph_nodes(index)
        self._info()
        if rows == self.rows and t.row_count == len(rows) and self._shown_session is session:
            # An unchanged pass: the same graph; keep the table, the cursor and the layout,
            # but mark what this pass did.
            self._refresh_drawing()
            return
        self.rows, self._shown_session = rows, session
        keep = self.selected_node
        names = [r["name"] for r in self.rows]
        if keep in names:
            cursor = names.index(keep)
        else:
            cursor = next(
                (
                    k
                    for k, r in enumerate(self.rows)
                    if r["kind"] not in ("input", "output", "constant")
                ),
                0,
            )
        if self.rows:
            # Set before the rows so that the RowHighlighted from set_rows is not news and
            # the neighbourhood is laid out once, below.
            self.selected_node = names[cursor]
        t.set_rows(
            [
                (
                    r["kind"],
                    r["name"] + ("" if r["op"] in ("Placeholder", "Constant") else f" ({r['op']})"),
                    str(r["type"]),
                    ", ".join(r["inputs"]),
                    ", ".join(r["users"]),
                )
                for r in self.rows
            ],
            keys=names,
            cursor=cursor,
        )
        self._layout()
        self._layout_key = None
        self._refresh_drawing()

    def _info(self) -> None:
        session, index = self.session, self.index
        if session is None or index is None:
            return
        rows = session.graph_nodes(index)  # this stage's (self.rows may be the last one's)
        n_nodes = sum(1 for r in rows if r["kind"] not in ("input", "output", "constant"))
        t = self.stage_label(session, index) + Text(f" │ {n_nodes} nodes, {len(rows)} values │ ")
        if self.whole:
            f = self.folded
            boxes = f"{len(f.boxes)} boxes, " if f is not None else ""
            t.append(
                f"{boxes}{LEVELS[self._fold_level()]}, zoom {ZOOMS[self.zoom]:g}",
                style="dim",
            )
            t.append("\narrows: pan  +/-: zoom  j/k: node  f: fold  e: open group  w: list", "dim")
        else:
            t.append("Enter: details  /: search  +/-: radius  w: whole graph", style="dim")
        self.query_one("#graph-info", Static).update(t)

    def select_node(self, name: str) -> bool:
        names = [r["name"] for r in self.rows]
        if name not in names:
            return False
        t = self.query_one("#graph-table", NodeList)
        t.move_cursor(names.index(name))
        if self.whole:
            self.selected_node = name
            self._refresh_drawing()
            self.query_one(GraphCanvas).focus()
        else:
            t.focus()
        return True

    @on(NodeList.RowHighlighted, "#graph-table")
    def _highlight(self, event: NodeList.RowHighlighted) -> None:
        event.stop()
        if event.key and event.key != self.selected_node:
            self.selected_node = event.key
            self._layout()
            if self.whole:
                self._refresh_drawing()

    @on(NodeList.RowSelected, "#graph-table")
    def _selected(self, event: NodeList.RowSelected) -> None:
        event.stop()
        if event.key:
            self.post_message(self.NodeOpened(event.key))

    # -- the neighbourhood --------------------------------------------------------------------
    def _layout(self) -> None:
        if self.whole or self.session is None or self.index is None or not self.selected_node:
            return
        self.query_one("#graph-neigh", Static).update(Text("laying out…", style="dim"))
        self._layout_worker(
            self.session, self.index, self.selected_node, self.radius, self._styles()
        )

    @work(thread=True, exclusive=True, group="graph-layout")
    def _layout_worker(
        self, session: CompileSession, index: int, name: str, radius: int, styles: dict[str, str]
    ) -> None:
        nodes, edges = session.neighbourhood(index, name, radius)
        if not nodes:
            row = next((r for r in session.graph_nodes(index) if r["name"] == name), None)
            users = ", ".join(row["users"]) if row else ""
            text = Text(
                f"{name}: a weight or placeholder; used by {users or 'nothing'}", style="dim"
            )
        else:
            try:
                text = render_neighbourhood(name, nodes, edges, styles)
            except LayoutError as e:
                text = Text(str(e), style="bold")
            except Exception as e:  # noqa: BLE001 - layout trouble must not kill the view
                text = Text(f"layout failed: {type(e).__name__}: {e}")
        self.app.call_from_thread(self._set_layout, session, index, name, text)

    def _set_layout(self, session: CompileSession, index: int, name: str, text: Text) -> None:
        # Only the layout asked for last: the stage or the model may have changed meanwhile.
        if (session, index, name) != (self.session, self.index, self.selected_node):
            return
        if self.whole:
            return
        # The drawing is a picture: never wrap it; the container scrolls both ways.
        text.no_wrap = True
        text.overflow = "crop"
        try:
            neigh = self.query_one("#graph-neigh", Static)
        except NoMatches:  # the app is closing: the view's children are already gone
            return
        neigh.update(text)

    # -- the whole graph ----------------------------------------------------------------------
    def _fold_level(self) -> int:
        if self.fold is not None:
            return self.fold
        n = sum(1 for r in self.rows if r["kind"] not in ("input", "output", "constant"))
        return 1 if n > FOLD_ABOVE else 0

    def _marks(self) -> dict[str, str]:
        """Box styles of what the selected pass created (added) or changed in place."""
        session, index = self.session, self.index
        if session is None or index is None:
            return {}
        st = styles(self.app)
        marks: dict[str, str] = {}
        d = session.diff_prev(index)
        for c in d.changed if d is not None else ():
            marks[c.name] = f"bold {st.changed}"
        for r in session.stages[index].provenance:
            if r.kind == "create":
                marks[r.node] = f"bold {st.added}"
        f = self.folded
        if f is not None:  # a folded group shows the strongest mark of its members
            for b in f.boxes:
                if b.is_group:
                    inside = [marks[m] for m in b.members if m in marks]
                    if inside:
                        marks[b.name] = inside[-1]
        return marks

    def _refresh_drawing(self) -> None:
        """(Re)draw the whole graph: lay it out in a worker if this stage and fold level were
        never laid out, else draw the cached layout at the current zoom."""
        if not self.whole or self.session is None or self.index is None or not self.rows:
            return
        session, index = self.session, self.index
        level = self._fold_level()
        self.folded = fold_graph(self.rows, level, sorted(self.expanded))
        self._info()
        key = ("whole", session.stages[index].ir_hash, level, tuple(sorted(self.expanded)))
        canvas = self.query_one(GraphCanvas)
        if key == self._layout_key and self.drawing is not None:
            self._draw_whole(key)
            return
        self._layout_key = key
        canvas.set_drawing(
            None,
            Text(f"laying out {len(self.folded.boxes)} boxes with Graphviz…", style="dim"),
        )
        self._whole_worker(key, self.folded)

    @work(thread=True, exclusive=True, group="graph-whole")
    def _whole_worker(self, key: tuple, folded: Folded) -> None:
        nodes = [{"name": b.name, "op": "", "label": b.label, "kind": b.kind} for b in folded.boxes]
        try:
            src = dot_source(nodes, folded.edges, folded.labels)
            plain, err = cached_layout(src), None
        except LayoutError as e:
            plain, err = None, str(e)
        except Exception as e:  # noqa: BLE001 - shown in the view
            plain, err = None, f"layout failed: {type(e).__name__}: {e}"
        self.app.call_from_thread(self._whole_ready, key, plain, err)

    def _whole_ready(self, key: tuple, plain: str | None, err: str | None) -> None:
        if key != self._layout_key:
            return
        if err is not None or plain is None:
            self.query_one(GraphCanvas).set_drawing(None, Text(err or "no layout", style="bold"))
            return
        self._plain = parse_plain(plain)
        self._draw_whole(key)

    def _draw_whole(self, key: tuple) -> None:
        f = self.folded
        plain = getattr(self, "_plain", None)
        if f is None or plain is None:
            return
        nodes = [{"name": b.name, "op": "", "label": b.label, "kind": b.kind} for b in f.boxes]
        sel = f.owner.get(self.selected_node or "", None)
        marks = self._marks()
        scale = ZOOMS[self.zoom]
        self.drawing = draw_layout(
            nodes,
            plain,
            sel,
            self._styles(),
            scale=scale,
            marks=marks,
            edge_labels=scale >= 0.7,
        )
        canvas = self.query_one(GraphCanvas)
        canvas.set_drawing(self.drawing)
        if sel is not None:
            self.call_after_refresh(self._centre_and_minimap, sel)
        else:
            self.call_after_refresh(self._update_minimap)

    def _centre_and_minimap(self, name: str) -> None:
        self.query_one(GraphCanvas).centre_on(name)
        self._update_minimap()

    def _update_minimap(self) -> None:
        d, f = self.drawing, self.folded
        mm = self.query_one("#graph-minimap", Static)
        if d is None or f is None:
            mm.update("")
            return
        canvas = self.query_one(GraphCanvas)
        sel = f.owner.get(self.selected_node or "", None)
        text = minimap(d, canvas.viewport(), 22, 8, self._marks(), sel)
        where = ""
        if sel is not None and f.box(sel) is not None and f.box(sel).is_group:  # type: ignore[union-attr]
            where = f"\n{self.selected_node} is folded in {sel} (e: open)"
        mm.update(Text("overview\n", style="dim") + text + Text(where, style="dim"))

    @on(GraphCanvas.Scrolled)
    def _scrolled(self) -> None:
        self._update_minimap()

    def action_toggle_whole(self) -> None:
        self.whole = not self.whole
        self.set_class(self.whole, "-whole")
        self._info()
        if self.whole:
            self._refresh_drawing()
            self.query_one(GraphCanvas).focus()
        else:
            self._layout()
            self.query_one(NodeList).focus()

    def action_zoom(self, delta: int) -> None:
        if not self.whole:
            self.radius = max(1, min(6, self.radius + delta))
            self._layout()
            return
        self.zoom = max(0, min(len(ZOOMS) - 1, self.zoom - delta))
        if self._layout_key is not None:
            self._draw_whole(self._layout_key)
        self._info()

    def action_toggle_fold(self) -> None:
        if self.whole:
            self.fold = 0 if self._fold_level() else 1
            self._refresh_drawing()

    def action_expand_group(self) -> None:
        """Open the folded group holding the selected node (again: fold it back)."""
        f = self.folded
        if not self.whole or f is None or self.selected_node is None:
            return
        owner = f.owner.get(self.selected_node)
        box = f.box(owner) if owner else None
        if box is not None and box.is_group:
            self.expanded.add(owner)  # type: ignore[arg-type]
        elif self.expanded:
            self.expanded.clear()
        self._refresh_drawing()

    def action_walk(self, delta: int) -> None:
        """Select the next / previous node in program order (centred in the whole graph)."""
        t = self.query_one("#graph-table", NodeList)
        t.move_cursor(t.cursor_row + delta)

    def action_centre(self) -> None:
        f = self.folded
        if self.whole and f is not None and self.selected_node:
            owner = f.owner.get(self.selected_node)
            if owner:
                self.query_one(GraphCanvas).centre_on(owner)
                self._update_minimap()

    # -- search -------------------------------------------------------------------------------
    def action_search(self) -> None:
        inp = self.query_one("#graph-search", Input)
        inp.remove_class("hidden")
        inp.focus()

    @on(Input.Submitted, "#graph-search")
    def _search(self, event: Input.Submitted) -> None:
        event.stop()
        self.find_next(event.value)

    def find_next(self, query: str) -> bool:
        q = query.strip().lower()
        if not q or not self.rows:
            return False
        t = self.query_one("#graph-table", NodeList)
        n = len(self.rows)
        start = t.cursor_row
        for k in range(1, n + 1):
            r = self.rows[(start + k) % n]
            if q in r["name"].lower() or q in r["op"].lower():
                t.move_cursor((start + k) % n)
                return True
        self.notify(f"no node matches '{query}'", severity="warning")
        return False

    def on_key(self, event) -> None:
        if event.key == "escape":
            inp = self.query_one("#graph-search", Input)
            if not inp.has_class("hidden"):
                inp.add_class("hidden")
                self.focus_target().focus()  # type: ignore[union-attr]
                event.stop()
        elif event.key == "enter" and self.whole and self.selected_node:
            event.stop()
            self.post_message(self.NodeOpened(self.selected_node))
