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


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(
    values: list[int] | list[float],
    width: int,
    style: str = "",
    mark: int | None = None,
    mark_style: str = "",
) -> Text:
    """`values` as one line of eighth-height blocks over `width` columns (each column the
    largest value it covers, so a peak is never averaged away); the column holding index
    `mark` drawn in `mark_style`."""
    n = len(values)
    if n == 0 or width <= 0:
        return Text("")
    top = max(values) or 1
    cols = min(width, n)
    t = Text(no_wrap=True)
    for c in range(cols):
        a, b = c * n // cols, max(c * n // cols + 1, (c + 1) * n // cols)
        v = max(values[a:b])
        ch = SPARKS[min(7, int(7 * v / top + 0.5))] if v > 0 else " "
        t.append(ch, style=mark_style if mark is not None and a <= mark < b else style)
    return t
