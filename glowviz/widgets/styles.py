"""Semantic text styles of the views, from the current theme's [ui] colours (the theme files are
the only source of colours): added/removed/changed, the peak, warnings, links. Named ANSI
colours (yellow, cyan, white) are not used: they vanish on the light and paper themes."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import App


@dataclass(frozen=True)
class Styles:
    added: str  # green: created, produced, agreeing
    removed: str  # red: erased, consumed, diverging, the peak
    changed: str  # a field or line changed in place
    info: str  # provenance, links, the selected thing's name
    accent: str
    warn: str  # not available, a gap, a fallback
    muted: str
    on_added: str  # backgrounds of the changed characters inside a line
    on_removed: str
    cursor: str

    def bold(self, role: str) -> str:
        return f"bold {getattr(self, role)}"


def _mix(a: str, b: str, t: float) -> str:
    """`t` of the way from colour `a` to colour `b` (hex)."""

    def rgb(c: str) -> tuple[int, int, int]:
        c = c.lstrip("#")
        return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)

    try:
        ra, rb = rgb(a), rgb(b)
    except (ValueError, IndexError):
        return b
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(ra, rb, strict=True))


def styles(app: App) -> Styles:
    """The current theme's semantic styles (falls back to safe colours for non-glowviz
    themes, whose colours may be unset)."""
    t = app.current_theme
    dark = t.dark
    fg = t.foreground or ("#e0e0e0" if dark else "#202020")
    bg = t.background or ("#101010" if dark else "#ffffff")
    success = t.success or ("#5fd75f" if dark else "#1a7f37")
    error = t.error or ("#ff6b6b" if dark else "#b42318")
    warning = t.warning or ("#ffd75f" if dark else "#8a5a00")
    primary = t.primary or ("#5fafff" if dark else "#0b5cad")
    accent = t.accent or primary
    return Styles(
        added=success,
        removed=error,
        changed=warning,
        info=primary,
        accent=accent,
        warn=warning,
        muted=_mix(fg, bg, 0.45),
        on_added=f"{fg} on {_mix(bg, success, 0.35)}",
        on_removed=f"{fg} on {_mix(bg, error, 0.35)}",
        cursor=f"{bg} on {primary}",
    )
