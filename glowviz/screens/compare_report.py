"""The Memory view's "compare with report" prompt (key o): a path to a second memory report."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label

from glowviz.screens.dialog import Dialog


class CompareReportScreen(Dialog[str]):
    """Asks for a glowviz.memory/1 JSON file, an .onnx model or a mem-diff spec
    (`model.onnx:scheduler=...,allocator=...,disable=PASS+PASS`); dismisses with it (or None)."""

    DEFAULT_CSS = "CompareReportScreen > Vertical { width: 90; }"

    def __init__(self, value: str = "") -> None:
        super().__init__()
        self._value = value

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(
                "Compare the memory plan with a second report; Enter to load, Esc to cancel"
            )
            yield Label(
                "a glowviz.memory/1 JSON file (glowviz mem --json), an .onnx model, or "
                "model.onnx:scheduler=…,allocator=…,disable=PASS+PASS",
                classes="hint",
            )
            yield Input(
                value=self._value,
                placeholder="report.json | model.onnx[:key=value,...]",
                id="compare-path",
            )

    @on(Input.Submitted, "#compare-path")
    def _submit(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())
