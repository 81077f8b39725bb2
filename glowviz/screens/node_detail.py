"""Node detail (Enter on a graph node): op doc, attributes, operand and result types, where it
came from (provenance) and every pass that touched it."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from glowviz import keymap


def detail_renderable(d: dict) -> Table:
    t = Table(show_header=False, box=None, expand=True)
    t.add_column("field", style="bold", width=14)
    t.add_column("value")
    t.add_row("name", Text(d["name"], style="bold"))
    t.add_row("op", f"{d['op']}  ({d['kind']})")
    if d.get("doc"):
        t.add_row("doc", d["doc"])
    if d.get("traits"):
        t.add_row("traits", ", ".join(d["traits"]))
    t.add_row("result", d["type"])
    names = d.get("operand_names") or []
    for k, (v, ty) in enumerate(zip(d.get("inputs", []), d.get("input_types", []))):
        label = names[k] if k < len(names) else f"operand {k}"
        t.add_row(f"  {label}", f"%{v} : {ty}")
    for k, v in d.get("attrs", {}).items():
        t.add_row(f"  {k}", v)
    t.add_row("users", ", ".join(d.get("users", [])) or "-")
    if d.get("origin"):
        t.add_row("made from", " + ".join(d["origin"]))
    for k, h in enumerate(d.get("history", [])):
        t.add_row("history" if k == 0 else "", h)
    return t


class NodeDetailScreen(ModalScreen[None]):
    BINDINGS = keymap.bindings("NodeDetailScreen")
    DEFAULT_CSS = """
    NodeDetailScreen { align: center middle; }
    NodeDetailScreen > VerticalScroll { width: 100; max-height: 80%; height: auto;
                                        border: thick $accent; background: $surface;
                                        padding: 0 1; }
    """

    def __init__(self, detail: dict) -> None:
        super().__init__()
        self.detail = detail

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(detail_renderable(self.detail), id="node-detail")
