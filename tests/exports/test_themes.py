"""Every theme's figure colours are readable and colour-blind safe: text reaches WCAG's 4.5:1
on the background and on every fill it is written on, and the op categories (and the peak
against the lower bound, and the scheduler curves) stay apart under simulated protanopia,
deuteranopia and tritanopia.

The simulation is the Machado, Oliveira and Fernandes (2009) model at full severity, applied in
linear RGB; distances are CIE76 Delta E in CIELAB (D65). 10 is a difference anyone sees at a
glance on a figure; 2.3 is the just-noticeable one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.graph.ops import CATEGORIES
from glowviz.exports.palette import contrast_ratio, load_palette, theme_names

# Machado et al. 2009, severity 1.0 (linear RGB in, linear RGB out).
CVD = {
    "normal": np.eye(3),
    "protanopia": np.array(
        [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ]
    ),
    "deuteranopia": np.array(
        [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.011820, 0.042940, 0.968881],
        ]
    ),
    "tritanopia": np.array(
        [
            [1.255528, -0.076749, -0.178779],
            [-0.078411, 0.930809, 0.147602],
            [0.004733, 0.691367, 0.303900],
        ]
    ),
}
SRGB_TO_XYZ = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ]
)
WHITE = SRGB_TO_XYZ @ np.ones(3)
MIN_TEXT = 4.5
MIN_DELTA_E = 10.0
#: Every op category (compiler/graph/ops.py) a figure colours a box or a bar by.
OP_CATEGORIES = CATEGORIES


def linear(colour: str) -> np.ndarray:
    c = colour.lstrip("#")
    rgb = np.array([int(c[i : i + 2], 16) / 255 for i in (0, 2, 4)])
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def lab(lin: np.ndarray) -> np.ndarray:
    xyz = SRGB_TO_XYZ @ np.clip(lin, 0.0, 1.0) / WHITE
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str, vision: str) -> float:
    m = CVD[vision]
    return float(np.linalg.norm(lab(m @ linear(a)) - lab(m @ linear(b))))


def test_reference_values():
    # WCAG's own examples and the issue's: white on #00a0ff is 2.8:1.
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#ffffff", "#00a0ff") == pytest.approx(2.8, abs=0.05)
    assert delta_e("#ff0000", "#ff0000", "deuteranopia") == 0.0
    # Red and green are far apart to a trichromat and close to a deuteranope.
    assert delta_e("#d62728", "#2ca02c", "normal") > 50
    assert delta_e("#d62728", "#2ca02c", "deuteranopia") < 0.5 * delta_e(
        "#d62728", "#2ca02c", "normal"
    )


@pytest.mark.parametrize("theme", theme_names())
def test_text_contrast(theme):
    pal = load_palette(theme)
    for what, colour in (("foreground", pal.foreground), ("muted", pal.muted)):
        ratio = contrast_ratio(colour, pal.background)
        assert ratio >= MIN_TEXT, (theme, what, round(ratio, 2))
    # Labels on filled boxes and bars take `text_on(fill)`.
    for name, fill in [*pal.categories.items(), *(("buffer", b) for b in pal.buffers)]:
        ratio = contrast_ratio(pal.text_on(fill), fill)
        assert ratio >= MIN_TEXT, (theme, name, fill, round(ratio, 2))


@pytest.mark.parametrize("theme", theme_names())
@pytest.mark.parametrize("vision", ["normal", "protanopia", "deuteranopia", "tritanopia"])
def test_colours_stay_apart_under_colour_blindness(theme, vision):
    pal = load_palette(theme)
    cats = {c: pal.category(c) for c in OP_CATEGORIES}
    for (a, ca), (b, cb) in itertools.combinations(cats.items(), 2):
        d = delta_e(ca, cb, vision)
        assert d >= MIN_DELTA_E, (theme, vision, a, b, round(d, 1))
    # The two marks of the memory figure, each against the other and the background.
    for a, b in (
        (pal.peak, pal.lower_bound),
        (pal.peak, pal.background),
        (pal.lower_bound, pal.background),
    ):
        assert delta_e(a, b, vision) >= MIN_DELTA_E, (theme, vision, a, b)
    # The scheduler curves of the schedule figure, against each other and the two marks
    # drawn over them.
    for a, b in itertools.combinations(pal.series, 2):
        assert delta_e(a, b, vision) >= MIN_DELTA_E, (theme, vision, a, b)
    for a, b in itertools.product(pal.series, (pal.peak, pal.lower_bound)):
        assert delta_e(a, b, vision) >= MIN_DELTA_E, (theme, vision, a, b)
