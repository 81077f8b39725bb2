"""Help screen (`?`): every key binding of the app, the workspace and each view, from the
bindings themselves (so it cannot drift)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from glowviz import keymap


def key_display(app, key: str, binding: Binding) -> str:
    """How the footer shows a key (`?`, `/`, `+`, `ctrl+o`), never its name (`question_mark`)."""
    if binding.key_display:
        return binding.key_display
    import dataclasses

    return app.get_key_display(dataclasses.replace(binding, key=key.strip(), key_display=None))


def binding_groups(app) -> list[tuple[str, list[tuple[str, str]]]]:
    from glowviz.screens.main import MainScreen
    from glowviz.widgets.debugger_view import DebuggerView
    from glowviz.widgets.diff_view import DiffView
    from glowviz.widgets.graph_view import GraphView
    from glowviz.widgets.ir_view import IRView
    from glowviz.widgets.lifetimes_view import LifetimesView
    from glowviz.widgets.memory_map import MemoryMap
    from glowviz.widgets.memory_timeline import MemoryTimeline
    from glowviz.widgets.memory_view import MemoryView
    from glowviz.widgets.quant_view import QuantView
    from glowviz.widgets.schedule_view import ScheduleView

    groups = []
    for title, cls in (
        ("Application", type(app)),
        ("Workspace", MainScreen),
        ("Graph view", GraphView),
        ("Diff view", DiffView),
        ("IR view", IRView),
        ("Schedule view", ScheduleView),
        ("Lifetimes view", LifetimesView),
        ("Memory view", MemoryView),
        ("Memory timeline (t)", MemoryTimeline),
        ("Memory map (m)", MemoryMap),
        ("Debugger view", DebuggerView),
        ("Quant view (with --quantize)", QuantView),
    ):
        rows: list[tuple[str, str]] = []
        for b in cls.BINDINGS:
            if not isinstance(b, Binding):
                b = Binding(*b)
            keys = b.key_display or ", ".join(key_display(app, k, b) for k in b.key.split(","))
            desc = b.description or b.action
            if rows and rows[-1][1] == desc:  # two keys for one action: one line
                rows[-1] = (f"{rows[-1][0]}, {keys}", desc)
            else:
                rows.append((keys, desc))
        groups.append((title, rows))
    groups.append(
        (
            "Everywhere",
            [
                (
                    "ctrl+p",
                    "command palette: every action, go to pass / node "
                    "/ buffer / instruction, themes, export, open model",
                ),
                ("tab / shift+tab", "move focus"),
                ("esc", "leave the pass filter, a search box or a dialog"),
            ],
        )
    )
    return groups


class HelpScreen(ModalScreen[None]):
    BINDINGS = keymap.bindings("HelpScreen")
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90; height: 90%; border: thick $primary;
                                  background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        tbl = Table(show_header=False, box=None, expand=True)
        tbl.add_column("key", style="bold", width=22)
        tbl.add_column("action")
        for title, rows in binding_groups(self.app):
            tbl.add_row(Text(title, style="bold underline"), "")
            for key, desc in rows:
                tbl.add_row(key, desc)
            tbl.add_row("", "")
        with VerticalScroll():
            yield Static(Text("glowviz — keys (Esc to close)", style="bold"))
            yield Static(tbl, id="help-table")
