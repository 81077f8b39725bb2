"""Graph view: the stage's values and nodes in a virtualized list (NodeList: only the rows in
view are drawn, so a ResNet-50 stage shows as fast as a small one), and the selected node's
neighbourhood laid out by Graphviz (in a worker, cached by IR hash) and drawn with box
characters."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Static

from glowviz import themes
from glowviz.session import CompileSession
from glowviz.widgets.graph_layout import LayoutError, render_neighbourhood
from glowviz.widgets.node_list import NodeList


class GraphView(Vertical):
    BINDINGS = [
        Binding("slash", "search", "Search", id="graph.search"),
        Binding("plus", "radius(1)", "Wider", show=False, id="graph.wider"),
        Binding("minus", "radius(-1)", "Narrower", show=False, id="graph.narrower"),
    ]

    class NodeOpened(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.session: CompileSession | None = None
        self.index: int | None = None
        self.rows: list[dict] = []
        self._shown_session: CompileSession | None = None
        self.selected_node: str | None = None
        self.radius = 2

    def compose(self) -> ComposeResult:
        yield Input(
            placeholder="search nodes (name or op), Enter: next match, Esc: close",
            id="graph-search",
            classes="hidden",
        )
        yield Static("", id="graph-info")
        with Horizontal():
            yield NodeList(id="graph-table")
            with VerticalScroll(id="graph-neigh-scroll"):
                yield Static("", id="graph-neigh")

    def on_mount(self) -> None:
        self._apply_theme()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._apply_theme())

    def _styles(self) -> dict[str, str]:
        """Node styles by category: the current theme's [ui.categories]."""
        return themes.theme(self.app.theme).ui_categories

    def _apply_theme(self) -> None:
        self.query_one("#graph-table", NodeList).set_kind_styles(self._styles())
        self._layout()

    def show(self, session: CompileSession, index: int) -> None:
        self.session, self.index = session, index
        rec = session.stages[index]
        t = self.query_one("#graph-table", NodeList)
        if rec.ir_kind != "graph":
            t.clear()
            self.rows = []
            self.query_one("#graph-info", Static).update(
                Text(
                    f"{rec.label} is a low-level IR stage: see the IR and Debugger views",
                    style="dim",
                )
            )
            self.query_one("#graph-neigh", Static).update("")
            return
        rows = session.graph_nodes(index)
        n_nodes = sum(1 for r in rows if r["kind"] not in ("input", "output", "constant"))
        self.query_one("#graph-info", Static).update(
            Text.assemble(
                (rec.label, "bold"),
                " │ ",
                f"{n_nodes} nodes, {len(rows)} values",
                " │ ",
                ("Enter: details  /: search  +/-: radius", "dim"),
            )
        )
        if rows == self.rows and t.row_count == len(rows) and self._shown_session is session:
            # An unchanged pass: the same graph; keep the table, the cursor and the layout.
            self.rows = rows
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

    def select_node(self, name: str) -> bool:
        names = [r["name"] for r in self.rows]
        if name not in names:
            return False
        t = self.query_one("#graph-table", NodeList)
        t.move_cursor(row=names.index(name))
        t.focus()
        return True

    @on(NodeList.RowHighlighted, "#graph-table")
    def _highlight(self, event: NodeList.RowHighlighted) -> None:
        event.stop()
        if event.key and event.key != self.selected_node:
            self.selected_node = event.key
            self._layout()

    @on(NodeList.RowSelected, "#graph-table")
    def _selected(self, event: NodeList.RowSelected) -> None:
        event.stop()
        if event.key:
            self.post_message(self.NodeOpened(event.key))

    def _layout(self) -> None:
        if self.session is None or self.index is None or not self.selected_node:
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
            row = next((r for r in self.rows if r["name"] == name), None)
            users = ", ".join(row["users"]) if row else ""
            text = Text(
                f"{name}: a weight or placeholder; used by {users or 'nothing'}", style="dim"
            )
        else:
            try:
                text = render_neighbourhood(
                    session.stages[index].ir_hash, name, nodes, edges, styles, radius
                )
            except LayoutError as e:
                text = Text(str(e), style="bold red")
            except Exception as e:  # noqa: BLE001 - layout trouble must not kill the view
                text = Text(f"layout failed: {type(e).__name__}: {e}", style="red")
        self.app.call_from_thread(self._set_layout, name, text)

    def _set_layout(self, name: str, text: Text) -> None:
        if name == self.selected_node:
            # The drawing is a picture: never wrap it; the container scrolls both ways.
            text.no_wrap = True
            text.overflow = "crop"
            self.query_one("#graph-neigh", Static).update(text)

    # -- search -------------------------------------------------------------------------------
    def action_search(self) -> None:
        inp = self.query_one("#graph-search", Input)
        inp.remove_class("hidden")
        inp.focus()

    def action_radius(self, delta: int) -> None:
        self.radius = max(1, min(6, self.radius + delta))
        self._layout()

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
                t.move_cursor(row=(start + k) % n)
                return True
        self.notify(f"no node matches '{query}'", severity="warning")
        return False

    def on_key(self, event) -> None:
        if event.key == "escape":
            inp = self.query_one("#graph-search", Input)
            if not inp.has_class("hidden"):
                inp.add_class("hidden")
                self.query_one("#graph-table", NodeList).focus()
                event.stop()
