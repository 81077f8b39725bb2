"""A one-line prompt (a watch expression, a slice, the tolerance): Enter answers, Esc cancels."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label

from glowviz.screens.dialog import Dialog


class PromptScreen(Dialog[str]):
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
