"""Colours for exported figures and DOT graphs, taken from the theme files (`themes/*.toml`).

The IDE and the exports share one theme file per theme. This module turns a theme into the
`Palette` the exporters need (background, text, op-category colours, peak / lower-bound marks,
buffer fills, hatches for greyscale print). Built-in defaults cover every field, so a theme file
only needs to name what it changes; the TOML keys read are listed in `_apply_toml`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compiler.errors import CompilerError

DEFAULT_THEME = "paper"

#: Op categories of the graph op table (compiler/graph/ops.py), plus the two value kinds.
CATEGORIES = (
    "conv",
    "matmul",
    "activation",
    "elementwise",
    "norm",
    "pool",
    "tensor",
    "reduction",
    "io",
    "other",
    "constant",
    "placeholder",
)


@dataclass(frozen=True)
class Palette:
    name: str
    background: str
    foreground: str
    muted: str  # borders, grid lines, secondary text
    edge: str
    peak: str  # the peak-memory mark
    lower_bound: str  # the lower-bound mark
    categories: dict[str, str]
    series: tuple[str, ...]  # line colours (one per scheduler)
    buffers: tuple[str, ...]  # buffer fills, cycled
    hatches: tuple[str, ...] = ()  # greyscale-safe patterns cycled with `buffers` (paper)
    font: str = "DejaVu Sans"
    dot_font: str = "Helvetica"
    extra: dict[str, Any] = field(default_factory=dict)

    def category(self, name: str) -> str:
        return self.categories.get(name, self.categories.get("other", self.muted))

    def text_on(self, fill: str) -> str:
        """Black or white, whichever reads better on `fill` (WCAG relative luminance)."""
        return "#000000" if luminance(fill) > 0.35 else "#ffffff"


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


_LIGHT_CATS = {
    "conv": "#aecbfa",
    "matmul": "#d7aefb",
    "activation": "#fdd663",
    "elementwise": "#ccebc5",
    "norm": "#a8dadc",
    "pool": "#b5e3f5",
    "tensor": "#e8e8e8",
    "reduction": "#f4c7a1",
    "io": "#c9c9c9",
    "other": "#eeeeee",
    "constant": "#f5f5f5",
    "placeholder": "#fff2cc",
}
_DARK_CATS = {
    "conv": "#1f4e8c",
    "matmul": "#5b2a86",
    "activation": "#8a6d0b",
    "elementwise": "#2d6a36",
    "norm": "#1b6b70",
    "pool": "#1d5f7a",
    "tensor": "#444a52",
    "reduction": "#7a4419",
    "io": "#3a3a3a",
    "other": "#3a3f45",
    "constant": "#2a2e33",
    "placeholder": "#6b5a12",
}
# Paper: light fills whose luminances differ, so categories stay apart in greyscale print.
_PAPER_CATS = {
    "conv": "#9ecae1",
    "matmul": "#c2a5cf",
    "activation": "#fee391",
    "elementwise": "#e5f5e0",
    "norm": "#a1d99b",
    "pool": "#deebf7",
    "tensor": "#f0f0f0",
    "reduction": "#fdae6b",
    "io": "#d9d9d9",
    "other": "#ffffff",
    "constant": "#ffffff",
    "placeholder": "#fff7bc",
}
_HC_CATS = {
    "conv": "#0050ff",
    "matmul": "#b000ff",
    "activation": "#ffd000",
    "elementwise": "#00c000",
    "norm": "#00d0d0",
    "pool": "#00a0ff",
    "tensor": "#808080",
    "reduction": "#ff7000",
    "io": "#ffffff",
    "other": "#c0c0c0",
    "constant": "#000000",
    "placeholder": "#ffff00",
}

_TABLEAU = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)

BUILTIN: dict[str, Palette] = {
    "light": Palette(
        "light",
        "#ffffff",
        "#1f2328",
        "#8c959f",
        "#57606a",
        "#cf222e",
        "#0969da",
        _LIGHT_CATS,
        ("#0969da", "#bf8700", "#1a7f37"),
        _TABLEAU,
    ),
    "dark": Palette(
        "dark",
        "#0d1117",
        "#e6edf3",
        "#7d8590",
        "#8b949e",
        "#ff7b72",
        "#79c0ff",
        _DARK_CATS,
        ("#79c0ff", "#e3b341", "#56d364"),
        (
            "#388bfd",
            "#d29922",
            "#3fb950",
            "#f85149",
            "#39c5cf",
            "#e3b341",
            "#a371f7",
            "#db61a2",
            "#9e6a03",
            "#6e7681",
        ),
    ),
    "high-contrast": Palette(
        "high-contrast",
        "#000000",
        "#ffffff",
        "#ffffff",
        "#ffffff",
        "#ff3030",
        "#00ffff",
        _HC_CATS,
        ("#00ffff", "#ffff00", "#00ff00"),
        (
            "#0050ff",
            "#ffd000",
            "#00c000",
            "#ff3030",
            "#00d0d0",
            "#ff00ff",
            "#ff7000",
            "#ffffff",
            "#b000ff",
            "#808080",
        ),
    ),
    "paper": Palette(
        "paper",
        "#ffffff",
        "#000000",
        "#555555",
        "#333333",
        "#000000",
        "#555555",
        _PAPER_CATS,
        ("#000000", "#777777", "#bbbbbb"),
        ("#d9d9d9", "#969696", "#f0f0f0", "#636363", "#bdbdbd", "#ffffff"),
        ("", "//", "..", "xx", "\\\\", "++"),
        font="DejaVu Serif",
        dot_font="Times",
    ),
}


def theme_names() -> list[str]:
    from glowviz import themes

    return sorted(set(BUILTIN) | set(themes.load_themes()))


def load_palette(name: str | None = None) -> Palette:
    """The palette of theme `name` (default: paper): the theme file's [figure] table
    (read by `glowviz.themes`, shared with the IDE) over the built-in defaults here."""
    from glowviz import themes

    name = themes.short_name(name or DEFAULT_THEME)
    specs = themes.load_themes()
    if name not in BUILTIN and name not in specs:
        raise CompilerError(f"unknown theme '{name}'", hint=f"themes: {', '.join(theme_names())}")
    spec = specs.get(name)
    base = BUILTIN.get(name) or BUILTIN["dark" if spec is not None and spec.dark else "light"]
    base = replace(base, name=name)
    if spec is None:
        return base
    data: dict[str, Any] = {}
    if spec.path:
        try:
            data = tomllib.loads(Path(spec.path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise CompilerError(f"cannot read theme file {spec.path}: {e}") from None
    return _apply_toml(base, data)


def _color(v: Any) -> str | None:
    return v if isinstance(v, str) and v.startswith("#") and len(v) in (4, 7, 9) else None


def _apply_toml(p: Palette, data: dict[str, Any]) -> Palette:
    """Overlay a theme file's [figure] table: `background`, `foreground`, `edge`, `peak`,
    `grid` (-> muted), `buffers`; and the optional keys only the exports read:
    `lower_bound`, `series`, `hatches`, `font`, `dot_font`, and a [figure.categories] table
    (op category -> fill colour)."""
    fig = data.get("figure") or {}
    changes: dict[str, Any] = {}
    for key in ("background", "foreground", "edge", "peak", "lower_bound", "muted"):
        c = _color(fig.get(key))
        if c:
            changes[key] = c
    if _color(fig.get("grid")) and "muted" not in changes:
        # grid colours are too faint for text; keep the built-in muted unless it is dark
        pass
    for key in ("series", "buffers", "hatches"):
        v = fig.get(key)
        if isinstance(v, list) and v:
            changes[key] = tuple(str(x) for x in v)
    for key in ("font", "dot_font"):
        if isinstance(fig.get(key), str):
            changes[key] = fig[key]
    cats = dict(p.categories)
    for k, v in (fig.get("categories") or {}).items():
        if _color(v):
            cats[k] = v
    changes["categories"] = cats
    return replace(p, **changes)


__all__ = ["BUILTIN", "CATEGORIES", "DEFAULT_THEME", "Palette", "load_palette", "theme_names"]
