"""The glowviz IDE application: themes, the workspace screen, global keys, the palette.

The top of the IDE's layers (app -> screens -> widgets -> exports -> session -> core): screens
push screens, widgets post messages, only the app and the screens reach down into widgets."""

from __future__ import annotations

import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual import events
from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.theme import Theme

from glowviz import keymap, textual_fixes, themes
from glowviz.screens.commands import GlowvizCommands
from glowviz.screens.main import MainScreen
from glowviz.session import CompileSession

#: After SIGHUP/SIGTERM, how long the orderly shutdown may take before the process just ends.
HANGUP_GRACE_S = 3.0

textual_fixes.apply()


class GlowvizApp(App):
    TITLE = "glowviz"
    COMMANDS = App.COMMANDS | {GlowvizCommands}
    BINDINGS = keymap.bindings("GlowvizApp")

    def __init__(
        self,
        model_path: str | None = None,
        options=None,
        *,
        session: CompileSession | None = None,
        theme: str | None = None,
    ) -> None:
        super().__init__()
        self.session = session or CompileSession(model_path, options)
        self.last_input = 0.0  # time.monotonic() of the last key press or click
        self._specs: dict[str, themes.ThemeSpec] = {}
        self._load_themes()
        self.set_glowviz_theme(theme or themes.remembered_theme(), remember=False)

    def _load_themes(self) -> None:
        self._specs = themes.load_themes()
        for spec in self._specs.values():
            self.register_theme(textual_theme(spec))

    async def on_event(self, event: events.Event) -> None:
        user = isinstance(
            event, (events.Key, events.MouseDown, events.MouseScrollDown, events.MouseScrollUp)
        )
        if user:
            self.last_input = time.monotonic()  # the workspace collects garbage in pauses
        await super().on_event(event)
        if user:  # a pause starts when the input is handled (a view's first show builds it)
            self.last_input = time.monotonic()

    def on_mount(self) -> None:
        self.exit_on_hangup()
        rebound, warnings = keymap.user_keymap()
        if rebound:
            self.set_keymap(rebound)
        for w in warnings:
            self.notify(w, title="keymap", severity="warning")
        self.theme_changed_signal.subscribe(self, self._theme_changed)

    def get_default_screen(self) -> MainScreen:
        # The workspace is the app's first screen: it was pushed over Textual's empty default
        # screen, which was mounted, laid out and drawn first for nothing. Its style sheets
        # are read here (Textual reads a screen's CSS_PATH only when it is pushed), not as the
        # app's CSS_PATH: those are read before the theme set in __init__ refreshes the CSS,
        # which parsed them into a throwaway copy of the stylesheet and emptied its parse
        # cache, so the first widget mounted parsed them all again (a third of the parsing at
        # start). Read now, they are parsed once. The rules are the same: user CSS, in the
        # same order, outranking every widget's DEFAULT_CSS whatever the sources' order.
        paths = MainScreen.CSS_PATH
        for path in paths:
            if not self.stylesheet.has_source(str(path), ""):
                self.stylesheet.read(path)
        if self.css_monitor is not None:  # `textual run --dev` reloads them when edited
            self.css_monitor.add_paths([Path(p) for p in paths])
        return MainScreen(self.session)

    def exit_on_hangup(self, loop=None) -> None:
        """SIGHUP (the terminal went away: a closed window, `tmux kill-session`) and SIGTERM
        quit the IDE like `q`. Without this the process outlived its terminal, spinning on the
        dead tty at ~20% CPU: the CLI's handler raises from inside Textual's loop, which
        swallows it. `open_ide` installs it on its loop before the app runs (a hang-up while
        Textual starts, before the app is mounted, was swallowed too: under load, a window of
        seconds); the app again when mounted (on the running loop, e.g. under Pilot)."""
        import asyncio
        import signal

        loop = loop or asyncio.get_running_loop()
        for name in ("SIGHUP", "SIGTERM"):
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                loop.add_signal_handler(sig, partial(self._terminated, 128 + int(sig)))
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                pass

    def _terminated(self, code: int) -> None:
        """Quit; and since the terminal may be gone and a worker stuck, make sure the process
        ends within HANGUP_GRACE_S even if the orderly shutdown blocks."""
        import os
        import threading

        watchdog = threading.Timer(HANGUP_GRACE_S, os._exit, (code,))
        watchdog.daemon = True
        watchdog.start()
        self.exit(return_code=code)

    # -- themes -------------------------------------------------------------------------------
    def search_themes(self) -> None:
        """Textual's Theme command: only glowviz's themes (the theme files, the user's too),
        remembered; Textual's own would draw colours the theme files do not define."""
        from textual.command import CommandPalette

        from glowviz.screens.commands import ThemeCommands

        self.push_screen(
            CommandPalette(providers=[ThemeCommands], placeholder="Search for themes…")
        )

    def _theme_changed(self, theme: Theme) -> None:
        """Remember a theme however it was chosen (palette, Textual's Theme command, ctrl+t)."""
        short = themes.short_name(theme.name)
        if short in self._specs and short != themes.remembered_theme():
            themes.remember_theme(short)

    def glowviz_theme_names(self) -> list[str]:
        return list(self._specs)

    def set_glowviz_theme(self, name: str, remember: bool = True) -> None:
        short: str | None = themes.short_name(name)
        if short not in self._specs:
            short = themes.DEFAULT_THEME if themes.DEFAULT_THEME in self._specs else None
        if short is None:
            return
        self.theme = self._specs[short].textual_name
        if remember:
            themes.remember_theme(short)

    def add_theme_file(self, path: str) -> None:
        """Install a user theme file (checked, copied into the config dir) and switch to it."""
        try:
            spec = themes.install_theme(path.strip())
        except themes.ThemeError as e:
            self.notify(str(e), severity="error")
            return
        self._load_themes()
        self.set_glowviz_theme(spec.name)
        self.notify(f"theme {spec.name} added from {path.strip()}")

    def action_cycle_theme(self) -> None:
        names = self.glowviz_theme_names()
        cur = themes.short_name(self.theme)
        nxt = names[(names.index(cur) + 1) % len(names)] if cur in names else names[0]
        self.set_glowviz_theme(nxt)
        self.notify(f"theme: {nxt}")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for cmd in super().get_system_commands(screen):
            if cmd.title == "Theme":
                yield SystemCommand(
                    "Theme", "Change the theme (glowviz's themes; remembered)", cmd.callback
                )
            else:
                yield cmd

    # -- actions used by the palette -----------------------------------------------------------
    def action_help(self) -> None:
        from glowviz.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def open_model(self, path: str) -> None:
        self.session = CompileSession(path, self.session.options)
        main = next(s for s in self.screen_stack if isinstance(s, MainScreen))
        main.start_compile(self.session)

    def _in_debugger(self, fn) -> None:
        """Show the debugger view, then call `fn(view)` (once the view is built)."""
        main = next(s for s in self.screen_stack if isinstance(s, MainScreen))
        main.show_view("debugger", fn)

    def break_on_op(self, kind: str) -> None:
        def toggle(view) -> None:
            on = view.toggle_op_breakpoint(kind)
            self.notify(f"breakpoint on op {kind} {'set' if on else 'cleared'}")

        self._in_debugger(toggle)

    def break_on_write(self, buffer: str) -> None:
        def toggle(view) -> None:
            on = view.toggle_write_breakpoint(buffer)
            self.notify(f"breakpoint on writes to {buffer} {'set' if on else 'cleared'}")

        self._in_debugger(toggle)

    def action_export_view(self) -> None:
        from glowviz.screens.export import export_current_view

        export_current_view(self)


#: The [ui] keys of a theme file that become Textual theme colours.
_UI_KEYS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
)


def textual_theme(spec: themes.ThemeSpec) -> Theme:
    """A theme file's [ui] table as a Textual theme (named `glowviz-<name>`)."""
    ui = spec.ui
    colours: dict[str, Any] = {k: ui[k] for k in _UI_KEYS if k in ui}  # Theme's str keywords
    return Theme(name=spec.textual_name, dark=spec.dark, **colours)
