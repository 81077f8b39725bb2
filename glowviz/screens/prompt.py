"""A one-line prompt (a watch expression, a slice, the tolerance): Enter answers, Esc cancels."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from glowviz import keymap


class PromptScreen(ModalScreen[str | None]):
    BINDINGS = keymap.bindings("PromptScreen")
    DEFAULT_CSS = """
    PromptScreen { align: center middle; }
    PromptScreen > Vertical { width: 80; max-width: 95%; height: auto;
                              border: thick $primary; background: $surface; padding: 0 1; }
    PromptScreen .hint { color: $text-muted; }
    """

    def __init__(self, title: str, value: str = "", hint: str = "") -> None:
        super().__init__()
        self.title_text, self.value, self.hint = title, value, hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{self.title_text}  (Enter: OK, Esc: cancel)")
            yield Input(value=self.value, id="prompt-input")
            if self.hint:
                yield Label(self.hint, classes="hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted, "#prompt-input")
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
