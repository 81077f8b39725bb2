"""Error pane: a compile failure (message, failing pass and node) shown in place; the app runs on."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from glowviz.session import SessionError


class ErrorPane(Static):
    def show_error(self, err: SessionError | None, n_stages: int = 0) -> None:
        if err is None:
            self.add_class("hidden")
            self.update("")
            return
        self.remove_class("hidden")
        t = Text()
        t.append("compile failed: ", style="bold")
        t.append(err.kind, style="bold")
        t.append("\n")
        t.append(err.message + "\n")
        if err.pass_name:
            t.append("pass: ", style="dim")
            t.append(err.pass_name + "   ", style="bold")
        if err.node:
            t.append("node: ", style="dim")
            t.append(err.node, style="bold")
        if n_stages == 0:
            kept = "nothing was compiled before the failure."
        elif n_stages == 1:
            kept = "the 1 stage before the failure is kept: it is on the left."
        else:
            kept = f"the {n_stages} stages before the failure are kept: step through them."
        t.append(f"\n{kept}  ctrl+o: open another model", style="dim")
        if err.internal and err.traceback:
            t.append("\n" + "\n".join(err.traceback.strip().splitlines()[-6:]), style="dim")
        self.update(t)
