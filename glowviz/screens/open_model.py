"""Open-model prompt (ctrl+o): a path, with the sample models offered."""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, OptionList

from glowviz import resources
from glowviz.screens.dialog import Dialog


def sample_models() -> list[str]:
    root = resources.sample_models_dir()
    return sorted(
        str(p.relative_to(Path.cwd())) if p.is_relative_to(Path.cwd()) else str(p)
        for p in root.glob("*.onnx")
    )


class OpenModelScreen(Dialog[str]):
    DEFAULT_CSS = """
    OpenModelScreen > Vertical { max-height: 80%; }
    OpenModelScreen OptionList { height: auto; max-height: 12; }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Open model (ONNX path), Enter to open, Esc to cancel")
            yield Input(placeholder="path/to/model.onnx", id="open-path")
            yield OptionList(*sample_models(), id="open-samples")

    @on(Input.Submitted, "#open-path")
    def _submit(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    @on(OptionList.OptionSelected, "#open-samples")
    def _pick(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(str(event.option.prompt))
