"""IR view: the selected stage's IR text (graph or low-level), with jump-to-definition of the
value under the cursor (`g` or Enter) and back (`backspace`)."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static, TextArea

from glowviz.session import CompileSession

_WORD = re.compile(r"[%@]?[A-Za-z0-9_.#\-]+")


def definition_line(text: str, name: str) -> int | None:
    """The 0-based line that defines value `name` (a result, placeholder, constant or weight)."""
    name = name.lstrip("%@")
    token = re.compile(r"%" + re.escape(name) + r"(?![A-Za-z0-9_.#\-])")
    for k, line in enumerate(text.splitlines()):
        s = line.strip()
        if not token.search(s):
            continue
        if s.startswith(("placeholder ", "constant ")):
            if token.search(s.split(":", 1)[0]):
                return k
            continue
        if " = " in s and token.search(s.split(" = ", 1)[0]):
            return k
    return None


def word_at(line: str, col: int) -> str | None:
    for m in _WORD.finditer(line):
        if m.start() <= col <= m.end():
            return m.group(0)
    return None


class IRView(Vertical):
    BINDINGS = [Binding("g", "goto_definition", "Go to def", id="ir.goto"),
                Binding("enter", "goto_definition", "Go to def", show=False, id="ir.goto2"),
                Binding("backspace", "go_back", "Back", id="ir.back")]

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.text = ""
        self.history: list[tuple[int, int]] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="ir-info")
        yield TextArea("", id="ir-text", read_only=True, show_line_numbers=True,
                       soft_wrap=False)

    def show(self, session: CompileSession, index: int) -> None:
        rec = session.stages[index]
        self.text = rec.text
        ta = self.query_one(TextArea)
        ta.load_text(self.text)
        lines = self.text.count("\n")
        self.query_one("#ir-info", Static).update(
            f"[b]{rec.label}[/b]  {rec.ir_kind} IR, {lines} lines, hash {rec.ir_hash}  "
            "[dim]g/Enter: go to definition  Backspace: back[/dim]")

    def goto_value(self, name: str) -> bool:
        line = definition_line(self.text, name)
        if line is None:
            return False
        ta = self.query_one(TextArea)
        self.history.append(ta.cursor_location)
        ta.cursor_location = (line, 0)
        ta.scroll_cursor_visible(center=True)
        return True

    def action_goto_definition(self) -> None:
        ta = self.query_one(TextArea)
        row, col = ta.cursor_location
        lines = self.text.splitlines()
        if row >= len(lines):
            return
        word = word_at(lines[row], col)
        if not word or not self.goto_value(word):
            self.notify(f"no definition of {word or 'the word under the cursor'}",
                        severity="warning")

    def action_go_back(self) -> None:
        if self.history:
            ta = self.query_one(TextArea)
            ta.cursor_location = self.history.pop()
            ta.scroll_cursor_visible(center=True)
