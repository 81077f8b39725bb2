"""The IDE's modal dialogs share one frame: a box centred over the workspace (80 columns unless
a dialog says otherwise), muted `.hint` lines, and Escape to cancel (dismissed with None)."""

from __future__ import annotations

from typing import TypeVar

from textual.screen import ModalScreen

from glowviz import keymap

T = TypeVar("T")


class Dialog(ModalScreen[T | None]):
    BINDINGS = keymap.bindings("Dialog")
    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > Vertical { width: 80; max-width: 95%; height: auto; border: thick $primary;
                        background: $surface; padding: 0 1; }
    Dialog .hint { color: $text-muted; }
    """

    def action_cancel(self) -> None:
        self.dismiss(None)


__all__ = ["Dialog"]
