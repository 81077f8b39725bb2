"""Colours for exported figures and DOT graphs: a theme file's [figure] tables as a `Palette`.

The theme files (`themes/*.toml`, read by `glowviz.themes`, shared with the IDE) are the only
source of colours; this module only checks the [figure] table and gives the exporters typed
access (background, text, op-category fills, peak / lower-bound marks, buffer fills, hatches for
greyscale print). Exports default to the print-friendly `paper` theme, the IDE to `dark`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from glowviz import themes

DEFAULT_THEME = "paper"

#: [figure] keys every theme file must set (colours, then colour lists, then fonts);
#: `hatches` is optional (greyscale-safe patterns, the paper theme's).
_COLOURS = ("background", "foreground", "muted", "edge", "peak", "lower_bound")
_LISTS = ("series", "buffers")
_FONTS = ("font", "dot_font")


@dataclass(frozen=True)
class Palette:
    name: str
    background: str
    foreground: str
    muted: str  # borders, grid lines, secondary text
    edge: str
    peak: str  # the peak-memory mark
    lower_bound: str  # the lower-bound mark
    categories: dict[str, str]  # op category or value kind -> fill
    series: tuple[str, ...]  # line colours (one per scheduler)
    buffers: tuple[str, ...]  # buffer fills, cycled
    hatches: tuple[str, ...] = ()  # greyscale-safe patterns cycled with `buffers` (paper)
    font: str = ""
    dot_font: str = ""

    def category(self, name: str) -> str:
        return self.categories.get(name, self.categories.get("other", self.muted))

    def text_on(self, fill: str) -> str:
        """Black or white, whichever contrasts more with `fill` (WCAG 2: at least 4.58:1 on
        any colour; a fixed luminance threshold put white on #00a0ff at 2.8:1)."""
        black, white = contrast_ratio("#000000", fill), contrast_ratio("#ffffff", fill)
        return "#000000" if black >= white else "#ffffff"


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours (1 to 21; text wants >= 4.5)."""
    la, lb = luminance(a), luminance(b)
    hi, lo = max(la, lb), min(la, lb)
    return (hi + 0.05) / (lo + 0.05)


def luminance(colour: str) -> float:
    c = colour.lstrip("#")
    if len(c) == 3:
        c = "".join(ch * 2 for ch in c)
    try:
        rgb = [int(c[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    except ValueError:
        return 1.0
    lin = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def theme_names() -> list[str]:
    return sorted(themes.load_themes())


def as_palette(theme: str | Palette | None) -> Palette:
    """`theme` itself when it is a Palette, else the palette of the theme it names."""
    return theme if isinstance(theme, Palette) else load_palette(theme)


def load_palette(name: str | None = None) -> Palette:
    """The palette of theme `name` (default: paper), from its theme file."""
    name = themes.short_name(name or DEFAULT_THEME)
    spec = themes.load_themes().get(name)
    if spec is None:
        raise themes.ThemeError(
            f"unknown theme '{name}'", hint=f"themes: {', '.join(theme_names())}"
        )
    return palette_of(spec)


def _is_colour(v: Any) -> bool:
    return isinstance(v, str) and v.startswith("#") and len(v) in (4, 7, 9)


def palette_of(spec: themes.ThemeSpec) -> Palette:
    """A theme's [figure] and [figure.categories] tables, checked (a missing key or a value that
    is not a #rgb colour is an error naming the theme file)."""
    fig = spec.figure

    def bad(key: str, what: str) -> themes.ThemeError:
        return themes.ThemeError(f"theme file {spec.path}: [figure] {key} {what}")

    values: dict[str, Any] = {}
    for key in _COLOURS:
        if not _is_colour(fig.get(key)):
            raise bad(key, 'must be a colour like "#1f2328"')
        values[key] = fig[key]
    for key in _LISTS:
        v = fig.get(key)
        if not isinstance(v, list) or not v or not all(_is_colour(c) for c in v):
            raise bad(key, "must be a non-empty list of colours")
        values[key] = tuple(v)
    for key in _FONTS:
        if not isinstance(fig.get(key), str):
            raise bad(key, "must be a font name")
        values[key] = fig[key]
    hatches = fig.get("hatches", [])
    if not isinstance(hatches, list) or not all(isinstance(h, str) for h in hatches):
        raise bad("hatches", "must be a list of matplotlib hatch patterns")
    for key, colour in spec.figure_categories.items():
        if not _is_colour(colour):
            raise bad(f"categories.{key}", "must be a colour")
    return Palette(
        name=spec.name,
        categories=dict(spec.figure_categories),
        hatches=tuple(hatches),
        **values,
    )


__all__ = [
    "DEFAULT_THEME",
    "Palette",
    "as_palette",
    "contrast_ratio",
    "load_palette",
    "luminance",
    "palette_of",
    "theme_names",
]
