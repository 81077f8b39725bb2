"""IR view: the selected stage's IR text (graph or low-level), syntax-highlighted, with
jump-to-definition of the value under the cursor (`g` or Enter) and back (`backspace`)."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static, TextArea
from textual.widgets.text_area import TextAreaTheme

from glowviz import keymap
from glowviz.session import CompileSession
from glowviz.widgets.stage_view import InfoLine, StageView

#: (highlight name, pattern) in the order they are applied: later ones win where they overlap.
_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("gv.number", re.compile(r"(?<![\w.%@#])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")),
    ("gv.lineno", re.compile(r"^\s*(\d+)(?= )")),
    ("gv.attr", re.compile(r"(?:(?<=\{)|(?<=, ))([A-Za-z_]\w*)(?= = )")),
    ("gv.op", re.compile(r"(?<== )([A-Za-z_]\w*)(?=[( ]|$)|^\s*(?:\d+\s+)?([A-Z]\w*)(?=\()")),
    (
        "gv.keyword",
        re.compile(
            r"^\s*(module|function|declare|placeholder|constant)\b"
            r"|\b(weight|const|mutable|input|output|dense|elided)\b"
        ),
    ),
    ("gv.string", re.compile(r'"[^"]*"')),
    ("gv.symbol", re.compile(r"@[A-Za-z_][\w.\-]*")),
    ("gv.mode", re.compile(r"@(?:inout|in|out)\b")),
    ("gv.value", re.compile(r"%[A-Za-z0-9_.#\-]+")),
    ("gv.type", re.compile(r"\b(?:[fiu](?:8|16|32|64)|bf16|bool|q[iu]?\d+)<[^>]*>")),
]


def highlight_line(line: str) -> list[tuple[int, int, str]]:
    """(start, end, name) spans of one line of graph IR or LIR text (byte offsets)."""
    spans = []
    for name, rx in _RULES:
        for m in rx.finditer(line):
            g = next((k for k in range(1, (rx.groups or 0) + 1) if m.group(k) is not None), 0)
            spans.append((m.start(g), m.end(g), name))
    if not line.isascii():
        pos = [len(line[:k].encode()) for k in range(len(line) + 1)]
        spans = [(pos[a], pos[b], n) for a, b, n in spans]
    return spans


class _LazyHighlights(defaultdict):
    """TextArea's per-line highlight map, computed for a line only when it is drawn."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(list)
        self.lines = lines

    def __missing__(self, k: int) -> list[tuple[int, int, str]]:
        val = self[k] = highlight_line(self.lines[k]) if 0 <= k < len(self.lines) else []
        return val

    def __bool__(self) -> bool:
        return bool(self.lines)


class IRTextArea(TextArea):
    """A read-only TextArea with the glowviz IR highlighter (no tree-sitter grammar needed);
    its colours follow the app theme. Jump to the definition of the value under the cursor
    (`g` or Enter) and back (Backspace): its own bindings, because TextArea's own Backspace
    (delete left) would otherwise swallow the key even when read-only."""

    BINDINGS = keymap.bindings("IRTextArea")

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        #: Cursor positions to go back to (not `history`: TextArea's own undo history).
        self.jumps: list[tuple[int, int]] = []

    def goto_value(self, name: str) -> bool:
        line = definition_line(self.text, name)
        if line is None:
            return False
        self.jumps.append(self.cursor_location)
        self.cursor_location = (line, 0)
        self.scroll_cursor_visible(center=True)
        return True

    def action_goto_definition(self) -> None:
        row, col = self.cursor_location
        lines = self.text.splitlines()
        if row >= len(lines):
            return
        word = word_at(lines[row], col)
        if not word or not self.goto_value(word):
            self.notify(
                f"no definition of {word or 'the word under the cursor'}", severity="warning"
            )

    def action_go_back(self) -> None:
        if self.jumps:
            self.cursor_location = self.jumps.pop()
            self.scroll_cursor_visible(center=True)
        else:
            self.notify("nothing to go back to", severity="information")

    def on_mount(self) -> None:
        self._apply_ir_theme()

    def _ir_styles(self) -> dict[str, Style]:
        t = self.app.current_theme
        dark = t.dark

        def c(name: str, fallback: str) -> str:
            # Textual's own themes may leave a colour unset; glowviz's theme files set them all.
            return getattr(t, name) or fallback

        return {
            "gv.value": Style(color=c("primary", "#5fafff")),
            "gv.op": Style(color=c("accent", "#ffaf5f"), bold=True),
            "gv.type": Style(color=c("secondary", "#87d7af")),
            "gv.attr": Style(color=c("warning", "#ffd75f"), italic=True),
            "gv.number": Style(color="#d787d7" if dark else "#875fd7"),
            "gv.string": Style(color=c("success", "#87d787")),
            "gv.mode": Style(color=c("error", "#ff6b6b"), bold=True),
            "gv.symbol": Style(color=c("primary", "#5fafff"), bold=True),
            "gv.keyword": Style(color="#87afd7" if dark else "#005f87", bold=True),
            "gv.lineno": Style(dim=True),
        }

    def _apply_ir_theme(self) -> None:
        base = TextAreaTheme.get_builtin_theme("css")
        assert base is not None
        theme = dataclasses.replace(base, name="glowviz-ir", syntax_styles=self._ir_styles())
        self.register_theme(theme)
        self.theme = "glowviz-ir"

    def _app_theme_changed(self) -> None:
        self._apply_ir_theme()
        super()._app_theme_changed()

    def _build_highlight_map(self) -> None:
        self._line_cache.clear()
        self._highlights = _LazyHighlights(self.text.split("\n"))


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


class IRView(StageView):
    CLEARED = ("ir-info",)
    BINDINGS = keymap.bindings("IRView")

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.text = ""

    def compose(self) -> ComposeResult:
        yield InfoLine("", id="ir-info")
        yield IRTextArea("", id="ir-text", read_only=True, show_line_numbers=True, soft_wrap=False)

    def reset(self) -> None:
        super().reset()
        self.text = ""
        if self.built:
            self.query_one(IRTextArea).load_text("")

    def focus_target(self) -> Widget | None:
        return self.query_one(IRTextArea)

    @property
    def jumps(self) -> list[tuple[int, int]]:
        return self.query_one(IRTextArea).jumps

    def show(self, session: CompileSession, index: int) -> None:
        self.session, self.index = session, index
        rec = session.stages[index]
        info = self.query_one("#ir-info", Static)

        def draw(_hash: str) -> None:
            ta = self.query_one(IRTextArea)
            if rec.text != self.text:  # an unchanged pass keeps the text, cursor and scroll
                self.text = rec.text
                ta.load_text(self.text)
                ta.jumps.clear()
            lines = self.text.count("\n")
            info.update(
                self.stage_label(session, index)
                + Text(f"  {rec.ir_kind} IR, {lines} lines, hash {rec.ir_hash}  ")
                + Text("g/Enter: go to definition  Backspace: back", style="dim")
            )

        # Printing a big stage's IR takes a while: a worker does it (the warm-up may have)
        self.load(
            session,
            index,
            "ir_text",
            lambda: rec.ir_hash,
            draw,
            lambda: info.update(self.stage_label(session, index) + Text("  printing…", "dim")),
            lambda msg: info.update(self.stage_label(session, index) + Text(f"  failed: {msg}")),
            cached=rec.has_text,
        )

    def goto_value(self, name: str) -> bool:
        return self.query_one(IRTextArea).goto_value(name)

    def action_goto_definition(self) -> None:
        self.query_one(IRTextArea).action_goto_definition()

    def action_go_back(self) -> None:
        self.query_one(IRTextArea).action_go_back()
