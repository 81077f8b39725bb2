"""Theme files (`themes/*.toml`) -> Textual `Theme` objects and palette dicts for figures.

One file drives both the TUI colours ([ui]) and the exported figures ([figure]). The chosen
theme is remembered in `settings.json` under `~/.config/glowviz` (or `$GLOWVIZ_CONFIG_DIR`).
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glowviz import resources

DEFAULT_THEME = "dark"
THEME_PREFIX = "glowviz-"
THEMES_DIR = resources.themes_dir()


@dataclass(frozen=True)
class ThemeSpec:
    name: str  # short name: dark, light, high-contrast, paper
    label: str
    dark: bool
    ui: dict[str, str]
    figure: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    @property
    def textual_name(self) -> str:
        return THEME_PREFIX + self.name


def themes_dir() -> Path:
    env = os.environ.get("GLOWVIZ_THEMES_DIR")
    return Path(env) if env else THEMES_DIR


def load_theme_file(path: str | Path) -> ThemeSpec:
    p = Path(path)
    with open(p, "rb") as f:
        data = tomllib.load(f)
    name = str(data.get("name", p.stem))
    return ThemeSpec(
        name=name,
        label=str(data.get("label", name)),
        dark=bool(data.get("dark", True)),
        ui=dict(data.get("ui", {})),
        figure=dict(data.get("figure", {})),
        path=str(p),
    )


def load_themes(directory: str | Path | None = None) -> dict[str, ThemeSpec]:
    """Every theme file of the directory, by short name (sorted; dark first when present)."""
    d = Path(directory) if directory else themes_dir()
    out: dict[str, ThemeSpec] = {}
    for p in sorted(d.glob("*.toml")):
        try:
            spec = load_theme_file(p)
        except (OSError, tomllib.TOMLDecodeError):
            continue
        out[spec.name] = spec
    if DEFAULT_THEME in out:
        out = {
            DEFAULT_THEME: out[DEFAULT_THEME],
            **{k: v for k, v in out.items() if k != DEFAULT_THEME},
        }
    return out


def short_name(name: str) -> str:
    return name[len(THEME_PREFIX) :] if name.startswith(THEME_PREFIX) else name


def palette(name: str = DEFAULT_THEME, directory: str | Path | None = None) -> dict[str, Any]:
    """The figure palette of a theme (for exports): background, foreground, node_fill, ...,
    buffers (a list of colours). Falls back to the default theme, then to built-in values."""
    themes = load_themes(directory)
    spec = themes.get(short_name(name)) or themes.get(DEFAULT_THEME)
    base = {
        "background": "#ffffff",
        "foreground": "#000000",
        "node_fill": "#ffffff",
        "node_border": "#000000",
        "edge": "#444444",
        "highlight": "#d95f02",
        "added": "#1b9e77",
        "removed": "#d62728",
        "changed": "#e6ab02",
        "peak": "#d62728",
        "grid": "#dddddd",
        "buffers": ["#1b9e77", "#d95f02", "#7570b3", "#e7298a"],
    }
    if spec is not None:
        base.update(spec.figure)
        base.setdefault("primary", spec.ui.get("primary"))
    return base


def to_textual_theme(spec: ThemeSpec) -> Any:
    from textual.theme import Theme

    ui = spec.ui
    keys = (
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
    return Theme(name=spec.textual_name, dark=spec.dark, **{k: ui[k] for k in keys if k in ui})


def textual_themes(directory: str | Path | None = None) -> list[Any]:
    return [to_textual_theme(s) for s in load_themes(directory).values()]


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
