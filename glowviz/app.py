"""The glowviz IDE application: themes, the workspace screen, global keys, the palette.

The top of the IDE's layers (app -> screens -> widgets -> exports -> session -> core): screens
push screens, widgets post messages, only the app and the screens reach down into widgets."""

from __future__ import annotations

import time
from collections.abc import Iterable
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from textual import events
from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.theme import Theme

from glowviz import keymap, themes
from glowviz.screens.commands import GlowvizCommands
from glowviz.screens.main import MainScreen
from glowviz.session import CompileSession

#: After SIGHUP/SIGTERM, how long the orderly shutdown may take before the process just ends.
HANGUP_GRACE_S = 3.0


def _unpin_styles_caches() -> None:
    """Textual's `StylesCache.get_inner_outer` is an `lru_cache` on an instance method, so its
    keys hold the StylesCache: up to 1,024 caches of widgets long gone stay alive with every
    line they rendered (Textualize/textual#6665, open). The IDE makes and drops widgets all
    the time (the footer's keys at each view switch, dialogs, the palette): ~75,000 objects
    pinned per workspace's worth, which each full collection then scans (a test process
    opening a hundred workspaces spent more time collecting than drawing). The method never
    reads its instance: cache by the two colours alone. Left alone if Textual changed it."""
    from textual._styles_cache import StylesCache

    pinned = StylesCache.__dict__.get("get_inner_outer")
    inner = getattr(pinned, "__wrapped__", None)
    if inner is None or not hasattr(pinned, "cache_info"):
        return

    @lru_cache(1024)
    def by_colours(base_background, background):
        return inner(None, base_background, background)

    def get_inner_outer(self, base_background, background):
        return by_colours(base_background, background)

    setattr(StylesCache, "get_inner_outer", get_inner_outer)  # noqa: B010


_unpin_styles_caches()

#: What Textual's `Strip([])` holds besides its caches (the attributes `_lazy_strip_caches`
#: sets itself).
_STRIP_PLAIN: dict[str, Any] = {
    "_segments": [],
    "_cell_length": None,
    "_render_cache": None,
    "_link_ids": None,
    "_cell_count": None,
}


def _lazy_strip_caches() -> None:
    """Textual's `Strip` (one line of a widget's rendering) makes seven FIFOCaches in its
    `__init__` (for crops, divides, styles...), and most strips use one or two of them, if
    any: seven objects more per line the IDE renders, tracked by the cycle collector. They
    were 51,000 of the 117,000 objects a workspace left to collect when it closed (the
    fake-pipeline workspace after one visit of every view), and made each strip slower to
    create. Create each cache on its first use instead (the same size, the same caching,
    as Textual's own `Content._divide_cache` does). Left alone if Textual's Strip is not the
    one this was written for (its attributes and their initial values are checked)."""
    import inspect

    from textual.cache import FIFOCache
    from textual.strip import Strip

    try:
        probe = Strip([])
        sizes = {
            name: getattr(probe, name)._maxsize
            for name in Strip.__slots__
            if isinstance(getattr(probe, name, None), FIFOCache)
        }
        plain = {name: getattr(probe, name) for name in Strip.__slots__ if name not in sizes}
        params = list(inspect.signature(Strip.__init__).parameters)
    except Exception:  # noqa: BLE001 - another Textual: keep its Strip as it is
        return
    if (
        not sizes
        or plain != _STRIP_PLAIN
        or params != ["self", "segments", "cell_length"]
        or "__getattr__" in Strip.__dict__
    ):
        return

    def __init__(self, segments, cell_length=None):  # noqa: N807 - Strip's own
        self._segments = list(segments)
        self._cell_length = cell_length
        self._render_cache = None
        self._link_ids = None
        self._cell_count = None

    def __getattr__(self, name):  # noqa: N807 - only called for an attribute not set yet
        size = sizes.get(name)
        if size is None:
            raise AttributeError(f"'Strip' object has no attribute '{name}'", name=name, obj=self)
        cache: FIFOCache[Any, Any] = FIFOCache(size)
        setattr(self, name, cache)
        return cache

    setattr(Strip, "__init__", __init__)  # noqa: B010
    setattr(Strip, "__getattr__", __getattr__)  # noqa: B010


_lazy_strip_caches()

#: How many sets of CSS variables (themes) `_share_parsed_css` keeps the parsed rules of.
PARSED_THEMES = 4


def _share_parsed_css() -> None:
    """Textual parses a style sheet's sources into rule sets per Stylesheet, caching them only
    in that Stylesheet, and a change of theme parses every source again into a fresh one: the
    IDE's ~45 sources, ~30-40 ms of CPU per app started (a tenth of the workspace's start, paid
    again by every app a process makes) and per theme chosen (ctrl+t). The rule sets depend
    only on the source, where it was read from, its flags and the CSS variables (the theme's
    colours), and Textual never changes them once parsed (its own cache already hands the same
    ones out again): keep them per process, for the last PARSED_THEMES sets of variables.
    Sources whose rules have errors are not kept (Textual reports those as it did). Left alone
    if Textual's `_parse_rules` is not the one this was written for."""
    import inspect

    from textual.css.stylesheet import Stylesheet

    parse_rules = Stylesheet.__dict__.get("_parse_rules")
    if not callable(parse_rules):
        return
    try:
        params = list(inspect.signature(parse_rules).parameters)
    except (TypeError, ValueError):
        return
    if params != ["self", "css", "read_from", "is_default_rules", "tie_breaker", "scope"]:
        return
    themes: dict[tuple, dict[tuple, list]] = {}

    def shared_parse_rules(self, css, read_from, is_default_rules=False, tie_breaker=0, scope=""):
        variables = self._variables
        key = getattr(self, "_glowviz_variables_key", None)
        if key is None or key[0] is not variables:
            key = (variables, tuple(sorted(variables.items())))
            self._glowviz_variables_key = key
        parsed = themes.pop(key[1], None)
        if parsed is None:
            parsed = {}
            while len(themes) >= PARSED_THEMES:
                del themes[next(iter(themes))]
        themes[key[1]] = parsed  # the most recent last
        source = (css, read_from, is_default_rules, tie_breaker, scope)
        rules = parsed.get(source)
        if rules is None:
            rules = parse_rules(self, css, read_from, is_default_rules, tie_breaker, scope)
            if not any(rule.errors for rule in rules):
                parsed[source] = rules
        return rules

    setattr(Stylesheet, "_parse_rules", shared_parse_rules)  # noqa: B010


_share_parsed_css()


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
