"""Command palette providers: every action, plus go to pass / node / buffer / instruction,
breakpoints on op kinds and buffer writes, themes, export and open model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.actions import parse as parse_action
from textual.command import DiscoveryHit, Hit, Hits, Provider

from glowviz import keymap

if TYPE_CHECKING:  # the app imports this module; only its type is needed here
    from glowviz.app import GlowvizApp

Entry = tuple[str, Callable[[], object], str]


def _main(app):
    from glowviz.screens.main import MainScreen

    for s in reversed(app.screen_stack):
        if isinstance(s, MainScreen):
            return s
    return None


def _debug_mode(screen, mode: str) -> None:
    screen.show_view("debugger", lambda view: view.set_mode(mode))


def _view_action(screen, tab: str, action: str) -> None:
    """Show a view, then run one of its actions as its key would (`action` as keymap.toml
    writes it, `rewrite(1)`, or a method name)."""
    _, name, params = parse_action(action)

    def run(view) -> None:
        method = getattr(view, f"action_{name}", None) or getattr(view, name)
        method(*params)

    screen.show_view(tab, run)


def _memory_compare(screen, **with_: str) -> None:
    """Show the Memory view, then compare its plan with another allocator or scheduler."""
    screen.show_view("memory", lambda view: view.compare(**with_))


def _add_theme_file(app) -> None:
    from glowviz.screens.prompt import PromptScreen

    def answered(path: str | None) -> None:
        if path:
            app.add_theme_file(path)

    app.push_screen(
        PromptScreen(
            "Add a theme file (TOML, with the bundled themes' keys)",
            "",
            "it is checked, copied into the glowviz config directory and selected",
        ),
        answered,
    )


def entries(app) -> Iterator[Entry]:
    """(text, callback, help) for every palette command of the current state."""
    screen = _main(app)
    if screen is None:
        return
    session = screen.session
    from glowviz.screens.main import VIEWS

    for tab_id, title, _ in VIEWS:
        yield (f"View: {title}", partial(screen.show_view, tab_id), f"show the {title} view")
    yield ("Next stage", partial(screen.action_step_stage, 1), "n or ]")
    yield ("Previous stage", partial(screen.action_step_stage, -1), "p or [")
    yield ("Toggle hide unchanged passes", screen.action_toggle_unchanged, "u")
    yield ("Hide/show the pipeline pane", screen.action_toggle_pipeline, "ctrl+b (more room)")
    yield ("Open model…", screen.action_open_model, "ctrl+o")
    yield ("Recompile", partial(screen.start_compile, None), "compile the model again")
    yield ("Help: key bindings", app.action_help, "?")
    for name in app.glowviz_theme_names():
        yield (f"Theme: {name}", partial(app.set_glowviz_theme, name), "switch theme (remembered)")
    yield ("Theme: add a theme file…", partial(_add_theme_file, app), "your own colours")
    yield (
        "Export current view…",
        app.action_export_view,
        "ctrl+e: choose format, theme and path (glowviz.exports)",
    )
    # Every view binding that has a palette entry in keymap.toml, under the view's title.
    for tab_id, title, cls in VIEWS:
        for text, action, key in keymap.palette_rows(cls.__name__):
            yield (f"{title}: {text}", partial(_view_action, screen, tab_id, action), key)
    for label, act in (
        (
            "compare per instruction / accumulated (toggle)",
            partial(_view_action, screen, "debugger", "toggle_resync"),
        ),
        ("show values (LLVM vs interpreter)", partial(_debug_mode, screen, "values")),
        ("show LLVM IR of the selected instruction", partial(_debug_mode, screen, "llvm")),
        ("show assembly of the selected instruction", partial(_debug_mode, screen, "asm")),
    ):
        yield (f"Debugger: {label}", act, "")
    from compiler.memory.allocators import allocator_names
    from compiler.scheduling import SCHEDULERS

    for a in allocator_names():
        yield (
            f"Memory: compare with allocator {a}",
            partial(_memory_compare, screen, allocator=a),
            "",
        )
    for s in SCHEDULERS:
        yield (
            f"Memory: compare with scheduler {s}",
            partial(_memory_compare, screen, scheduler=s),
            "",
        )
    for i, rec in enumerate(session.stages):
        yield (
            f"Go to pass: {i} {rec.label}",
            partial(screen.goto_stage, i),
            f"{'changed' if rec.changed else 'unchanged'} {rec.count_before}→{rec.count_after}",
        )
    if screen.index is not None and screen.index < len(session.stages):
        for row in session.graph_nodes(screen.index):
            yield (
                f"Go to node: {row['name']} ({row['op']})",
                partial(screen.goto_node, row["name"]),
                row["type"],
            )
    if session.done:
        report = session.memory_report()
        for b in report.buffers if report is not None else ():
            yield (
                f"Go to buffer: {b.name}",
                partial(screen.goto_buffer, b.name),
                f"{b.size} B at {b.offset}",
            )
            yield (
                f"Break on write to buffer: {b.name}",
                partial(app.break_on_write, b.name),
                "debugger breakpoint",
            )
        instrs = session.instructions()
        for ins in instrs:
            yield (
                f"Go to instruction: #{ins['index']} {ins['text'][:70]}",
                partial(screen.goto_instruction, ins["index"]),
                "",
            )
        for kind in sorted({ins["kind"] for ins in instrs}):
            yield (f"Break on op: {kind}", partial(app.break_on_op, kind), "debugger breakpoint")
    yield ("Quit", app.exit, "q")


class ThemeCommands(Provider):
    """The themes the IDE offers (Textual's Theme command shows these, not Textual's own)."""

    def _commands(self) -> list[tuple[str, Callable[[], object]]]:
        app = cast("GlowvizApp", self.app)
        return [(name, partial(app.set_glowviz_theme, name)) for name in app.glowviz_theme_names()]

    async def discover(self) -> Hits:
        for name, cb in self._commands():
            yield DiscoveryHit(name, cb, text=name)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, cb in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, text=name)


class GlowvizCommands(Provider):
    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, cb, help_ in entries(self.app):
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, text=text, help=help_ or None)

    async def discover(self) -> Hits:
        for text, cb, help_ in entries(self.app):
            if text.startswith(
                (
                    "View:",
                    "Next",
                    "Previous",
                    "Theme:",
                    "Open",
                    "Help",
                    "Export",
                    "Debugger:",
                    "Graph:",
                    "Memory:",
                )
            ):
                yield DiscoveryHit(text, cb, text=text, help=help_ or None)
