"""Small text-drawing helpers shared by the Schedule, Lifetimes and Memory views."""

from __future__ import annotations

from rich.text import Text

BLOCKS = " ▏▎▍▌▋▊▉█"


def hbar(value: float, maximum: float, width: int, style: str = "") -> Text:
    """A horizontal bar with eighth-block resolution."""
    if maximum <= 0 or width <= 0:
        return Text("")
    eighths = int(round(8 * width * max(0.0, value) / maximum))
    full, rest = divmod(eighths, 8)
    s = "█" * min(full, width) + (BLOCKS[rest] if rest and full < width else "")
    return Text(s.ljust(width), style=style)


def span_bar(
    first: int, last: int, total: int, width: int, style: str = "", marker: int | None = None
) -> Text:
    """A bar over [first, last] of `total` slots, scaled to `width` columns."""
    total = max(total, 1)
    cells = [" "] * width
    a = int(first * width / total)
    b = max(a, int((last + 1) * width / total) - 1)
    for k in range(a, min(b + 1, width)):
        cells[k] = "█"
    t = Text("".join(cells), style=style)
    if marker is not None:
        m = min(width - 1, int(marker * width / total))
        t.stylize("reverse", m, m + 1)
    return t


def colour(k: int, palette: list[str]) -> str:
    """The `k`-th colour of a theme's buffer colours (`ThemeSpec.buffer_colours`), cycled."""
    return palette[k % len(palette)]
