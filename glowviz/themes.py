"""Theme files (`themes/*.toml`): the one source of every colour glowviz draws (core layer).

One file per theme drives the IDE ([ui]: the Textual theme; [ui.categories]: the graph view's
node styles) and the exported figures ([figure]: `glowviz.exports.palette` makes its Palette;
[figure.categories]: node and buffer fills). Category keys are the op table's categories
(`compiler.graph.ops.CATEGORIES`) and the value kinds below; a key that is neither is an error,
so a typo cannot silently leave a category uncoloured. The chosen IDE theme is remembered in
`settings.json` under `~/.config/glowviz` (or `$GLOWVIZ_CONFIG_DIR`).
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compiler.errors import CompilerError
from compiler.graph.ops import CATEGORIES as OP_CATEGORIES
from glowviz import resources

DEFAULT_THEME = "dark"
THEME_PREFIX = "glowviz-"
THEMES_DIR = resources.themes_dir()


#: What the graph views colour besides op categories: graph inputs and outputs (the IDE's node
#: list), placeholders and constants (exported graphs).
VALUE_KINDS = ("input", "output", "placeholder", "constant")
#: Every key a [ui.categories] or [figure.categories] table may have.
CATEGORY_KEYS = (*OP_CATEGORIES, *VALUE_KINDS)


class ThemeError(CompilerError):
    """A theme file that cannot be read, or names an unknown category."""


@dataclass(frozen=True)
class ThemeSpec:
    name: str  # short name: dark, light, high-contrast, paper
    label: str
    dark: bool
    ui: dict[str, str]  # Textual theme colours
    figure: dict[str, Any] = field(default_factory=dict)  # [figure] without its categories
    ui_categories: dict[str, str] = field(default_factory=dict)  # Rich styles
    figure_categories: dict[str, str] = field(default_factory=dict)  # fill colours
    path: str = ""

    @property
    def textual_name(self) -> str:
        return THEME_PREFIX + self.name

    @property
    def buffer_colours(self) -> list[str]:
        """Buffer colours, cycled: the IDE's memory and lifetime bars and the figures'."""
        return [str(c) for c in self.figure.get("buffers", ())]


def themes_dir() -> Path:
    env = os.environ.get("GLOWVIZ_THEMES_DIR")
    return Path(env) if env else THEMES_DIR


def _categories(table: Any, path: Path, where: str) -> dict[str, str]:
    if not isinstance(table, dict):
        raise ThemeError(f"theme file {path}: [{where}] must be a table")
    unknown = sorted(set(table) - set(CATEGORY_KEYS))
    if unknown:
        raise ThemeError(
            f"theme file {path}: unknown categor{'ies' if len(unknown) > 1 else 'y'} "
            f"{', '.join(unknown)} in [{where}]",
            hint=f"categories (the op table's, then value kinds): {', '.join(CATEGORY_KEYS)}",
        )
    return {k: str(v) for k, v in table.items()}


def load_theme_file(path: str | Path) -> ThemeSpec:
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ThemeError(f"cannot read theme file {p}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ThemeError(f"theme file {p} is not valid TOML: {e}") from None
    name = str(data.get("name", p.stem))
    ui = dict(data.get("ui", {}))
    figure = dict(data.get("figure", {}))
    return ThemeSpec(
        name=name,
        label=str(data.get("label", name)),
        dark=bool(data.get("dark", True)),
        ui_categories=_categories(ui.pop("categories", {}), p, "ui.categories"),
        ui=ui,
        figure_categories=_categories(figure.pop("categories", {}), p, "figure.categories"),
        figure=figure,
        path=str(p),
    )


_loaded: dict[str, dict[str, ThemeSpec]] = {}


def user_themes_dir() -> Path:
    """Where a user's own theme files live (`<config dir>/themes/*.toml`): they join the
    bundled ones (a file with a bundled theme's name replaces it)."""
    return config_dir() / "themes"


def load_themes(directory: str | Path | None = None) -> dict[str, ThemeSpec]:
    """Every theme file of the directory, by short name (sorted; dark first when present);
    without a directory, the bundled themes and then the user's (`user_themes_dir`).
    Read once per directory: the IDE asks on every redraw."""
    if directory is None:
        out = _load_dir(themes_dir())
        user = user_themes_dir()
        if user.is_dir():
            try:
                out.update(_load_dir(user))
            except ThemeError:  # a broken user file must not stop the IDE: the rest load
                for f in sorted(user.glob("*.toml")):
                    try:
                        spec = load_theme_file(f)
                    except ThemeError:
                        continue
                    out[spec.name] = spec
        return out
    return _load_dir(Path(directory))


def install_theme(path: str | Path) -> ThemeSpec:
    """Check a theme file and copy it into the user's theme directory; returns its spec.
    Raises ThemeError for a file that cannot be read or names an unknown category."""
    spec = load_theme_file(path)
    d = user_themes_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{spec.name}.toml").write_bytes(Path(path).read_bytes())
    except OSError as e:
        raise ThemeError(f"cannot install theme {path}: {e.strerror or e}") from None
    _loaded.pop(str(d.resolve()), None)
    return load_theme_file(d / f"{spec.name}.toml")


def _load_dir(d: Path) -> dict[str, ThemeSpec]:
    key = str(d.resolve())
    if key not in _loaded:
        out = {spec.name: spec for spec in map(load_theme_file, sorted(d.glob("*.toml")))}
        if DEFAULT_THEME in out:
            out = {
                DEFAULT_THEME: out[DEFAULT_THEME],
                **{k: v for k, v in out.items() if k != DEFAULT_THEME},
            }
        _loaded[key] = out
    return dict(_loaded[key])


def theme(name: str) -> ThemeSpec:
    """The theme called `name` (a short or a Textual name); the default theme when unknown."""
    specs = load_themes()
    spec = specs.get(short_name(name)) or specs.get(DEFAULT_THEME)
    if spec is None:
        raise ThemeError(f"no theme '{name}' and no default theme in {themes_dir()}")
    return spec


def short_name(name: str) -> str:
    return name[len(THEME_PREFIX) :] if name.startswith(THEME_PREFIX) else name


# -- settings ---------------------------------------------------------------------------------


def config_dir() -> Path:
    env = os.environ.get("GLOWVIZ_CONFIG_DIR")
    return Path(env) if env else Path.home() / ".config" / "glowviz"


def load_settings() -> dict[str, Any]:
    try:
        return json.loads((config_dir() / "settings.json").read_text())
    except (OSError, ValueError):
        return {}


def save_settings(settings: dict[str, Any]) -> None:
    d = config_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / "settings.json").write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only home must not stop the IDE


def remembered_theme() -> str:
    return short_name(str(load_settings().get("theme", DEFAULT_THEME)))


def remember_theme(name: str) -> None:
    s = load_settings()
    s["theme"] = short_name(name)
    save_settings(s)
