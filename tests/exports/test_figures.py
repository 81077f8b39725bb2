"""Figures a paper can print: sizes at column width, smallest font, legends inside the page,
grouping of repeated blocks, --subgraph / --pass, numbers for people, determinism."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from xml.etree import ElementTree

import numpy as np
import pytest
from export_helpers import MODELS, ROOT, session_for

from glowviz.exports import figures
from glowviz.exports.drawing import MIN_FONT_PT, human_number, human_text, parse_width
from glowviz.exports.render import ExportError, pdf_dates
from glowviz.exports.structure import fold_repeats, segments
from glowviz.exports.views import render_view, view_data

HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz 'dot' not installed")
COLUMN_PT = 3.3 * 72
THEMES = ("paper", "light", "dark", "high-contrast")


# ---------------------------------------------------------------------------------------------
# Numbers, widths, structure
# ---------------------------------------------------------------------------------------------


def test_human_numbers():
    assert human_number(9.999999747378752e-05) == "1e-4"
    assert human_number(9.999999747378752e-06) == "1e-5"
    assert human_number(0.1) == "0.1"
    assert human_number(0.7978845834732056) == "0.79788"
    assert human_number(6.0) == "6"
    assert human_number(3) == "3"
    assert human_text("9.999999747378752e-05") == "1e-4"
    assert human_text("[2, 2]") == "2"  # strides [2, 2] -> 2
    assert human_text("[1, 64]") == "[1, 64]"
    assert human_text('"relu"') == "relu"


def test_parse_width():
    assert parse_width("3.3in") == pytest.approx(3.3)
    assert parse_width("7in") == 7.0
    assert parse_width("84mm") == pytest.approx(84 / 25.4)
    assert parse_width(None) == pytest.approx(3.3)
    with pytest.raises(ExportError):
        parse_width("wide")
    with pytest.raises(ExportError):
        parse_width("0.1in")


def test_segments_and_repeats():
    # A chain a -> b, then two residual blocks x -> (c, d -> e) -> add.
    reads = [[], [0], [1], [2], [1, 3], [4], [5], [4, 6]]
    segs = segments(reads)
    assert [list(s) for s in segs] == [[0], [1], [2, 3, 4], [5, 6, 7]]
    runs = fold_repeats(["a", "b", "x", "x", "x", "c", "y", "z", "y", "z"])
    assert [(r.start, r.period, r.count) for r in runs] == [
        (0, 1, 1),
        (1, 1, 1),
        (2, 1, 3),
        (5, 1, 1),
        (6, 2, 2),
    ]
    # A unit that itself holds a repeat is not chosen over the inner repeat.
    runs = fold_repeats(["p", "x", "x", "p", "x", "x", "x"])
    assert (1, 1, 2) in [(r.start, r.period, r.count) for r in runs]


def _residual_stack(blocks: int):
    """A graph-IR module: `blocks` identical residual blocks (Conv, Relu, Conv, Add, Relu)."""
    from compiler.graph.ir import Module
    from compiler.graph.types import f32

    rng = np.random.default_rng(0)
    m = Module("stack")
    x = m.add_placeholder("input", f32(1, 8, 8, 8))
    out = m.add_placeholder("output", f32(1, 8, 8, 8), is_output=True)
    fn = m.create_function()
    v = x
    for i in range(blocks):
        w1 = m.add_constant(f"w{i}a", rng.standard_normal((8, 8, 3, 3)).astype(np.float32))
        w2 = m.add_constant(f"w{i}b", rng.standard_normal((8, 8, 3, 3)).astype(np.float32))
        bias = m.add_constant(f"b{i}", np.zeros(8, np.float32))
        a = fn.create("Conv", [v, w1, bias], {"pads": (1, 1, 1, 1)}).result
        a = fn.create("Relu", [a]).result
        b = fn.create("Conv", [a, w2, bias], {"pads": (1, 1, 1, 1)}).result
        v = fn.create("Relu", [fn.create("Add", [b, v]).result]).result
    fn.create("Save", [v, out])
    return m


# ---------------------------------------------------------------------------------------------
# Graph and LIR figures at column width
# ---------------------------------------------------------------------------------------------


def svg_page_and_fonts(svg: bytes) -> tuple[float, float]:
    """(page width in pt, smallest font in pt once Graphviz's scale is applied)."""
    root = ElementTree.fromstring(svg)
    width = float(root.get("width", "0").removesuffix("pt"))
    scale = 1.0
    for g in root.iter("{http://www.w3.org/2000/svg}g"):
        m = re.search(r"scale\(([\d.]+)", g.get("transform", ""))
        if m:
            scale = float(m.group(1))
            break
    sizes = [
        float(t.get("font-size"))
        for t in root.iter("{http://www.w3.org/2000/svg}text")
        if t.get("font-size")
    ]
    return width, min(sizes) * scale


def pdf_page_width(pdf: bytes) -> float:
    m = re.search(rb"/MediaBox \[\s*[\d.]+ [\d.]+ ([\d.]+) [\d.]+\s*\]", pdf)
    assert m, "no MediaBox"
    return float(m.group(1))


@needs_dot
@pytest.mark.parametrize(
    "model", ["lenet.onnx", "resnet_small.onnx", "transformer_block.onnx", "unet_small.onnx"]
)
@pytest.mark.parametrize("view", ["graph", "lir"])
def test_graph_figures_fit_a_column(model, view):
    s = session_for(model)
    width, smallest = svg_page_and_fonts(render_view(s, view, "svg", width="3.3in"))
    assert width <= COLUMN_PT + 0.5, (model, view, width)
    assert smallest >= MIN_FONT_PT - 1e-6, (model, view, smallest)
    assert pdf_page_width(render_view(s, view, "pdf", width="3.3in")) <= COLUMN_PT + 0.5


@needs_dot
def test_repeated_blocks_fold_and_fit():
    from glowviz.exports.dot_graph import graph_to_dot
    from glowviz.exports.render import render_dot

    module = _residual_stack(24)
    dot = graph_to_dot(module)
    assert "24 × [" in dot or "× 24" in dot  # one labelled group, not 120 boxes
    assert dot.count("fillcolor=") < 15
    width, smallest = svg_page_and_fonts(render_dot(dot, "svg"))
    assert width <= COLUMN_PT + 0.5 and smallest >= MIN_FONT_PT
    full = graph_to_dot(module, detail="full")
    assert full.count("fillcolor=") >= 24 * 5  # every node when asked
    # Weights and scalars are written inside the boxes, never drawn as nodes of their own.
    assert "filter 8×8×3×3" in full and "w0a" not in full.split("label=")[0]


@needs_dot
def test_wide_figures_use_the_two_column_width():
    s = session_for("resnet_small.onnx")
    width, smallest = svg_page_and_fonts(render_view(s, "graph", "svg", width="7in"))
    assert width <= 7 * 72 + 0.5 and smallest >= MIN_FONT_PT


def test_weights_inside_nodes_and_numbers_for_people():
    dot = render_view(session_for("transformer_block.onnx"), "graph", "dot", detail="full")
    text = dot.decode()
    assert "epsilon = 1e-5" in text and "9.99999" not in text
    assert "style=dashed" not in text  # no constant nodes with edges across the page


def test_subgraph_and_radius():
    s = session_for("resnet_small.onnx")
    dot = render_view(s, "graph", "dot", subgraph="add_0", radius=1).decode()
    boxes = re.findall(r'^  "([^"]+)" \[fillcolor', dot, re.M)
    assert "add_0" in boxes and len(boxes) <= 5
    assert "from " in dot or "to " in dot  # stubs name where cut edges lead
    with pytest.raises(ExportError, match="did you mean"):
        render_view(s, "graph", "dot", subgraph="add_O")


def test_pass_mode_draws_what_the_pass_changed():
    s = session_for("resnet_small.onnx")
    dot = render_view(s, "lir", "dot", pass_name="buffer-sharing").decode()
    assert "changed by this pass" in dot and "buffer-sharing" in dot
    g = render_view(s, "graph", "dot", pass_name="activation-fusion").decode()
    assert "changed by this pass" in g and "removed:" in g
    with pytest.raises(ExportError, match="low-level pass"):
        render_view(s, "graph", "dot", pass_name="buffer-sharing")
    with pytest.raises(Exception, match=r"unknown pass .* \(--pass\)"):
        render_view(s, "graph", "dot", pass_name="bufer-sharing")


# ---------------------------------------------------------------------------------------------
# Charts: width, fonts, nothing clipped, one peak
# ---------------------------------------------------------------------------------------------


def _texts(fig):
    """Every text the figure draws: titles, legends, labels, annotations, and the tick labels
    of the ticks inside the view (matplotlib keeps spare tick objects it does not draw).
    Laid out as a draw lays it out (ticks, annotations, legend), without painting pixels."""
    fig.draw_without_rendering()
    spare = set()
    drawn = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                spare.update((id(tick.label1), id(tick.label2)))
            for tick in axis._update_ticks():
                drawn.update((id(tick.label1), id(tick.label2)))
    from matplotlib.text import Text

    out = [t for t in fig.findobj(Text) if t.get_text()]
    return [t for t in out if t.get_visible() and (id(t) not in spare or id(t) in drawn)]


def check_inside_page(fig, width_in: float) -> None:
    assert fig.get_figwidth() == pytest.approx(width_in)
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    for t in _texts(fig):
        assert t.get_fontsize() >= MIN_FONT_PT, (t.get_text(), t.get_fontsize())
        box = t.get_window_extent(renderer)
        assert box.x0 >= page.x0 - 0.5 and box.x1 <= page.x1 + 0.5, t.get_text()
        assert box.y0 >= page.y0 - 0.5 and box.y1 <= page.y1 + 0.5, t.get_text()


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("model", ["transformer_block.onnx", "resnet_small.onnx"])
def test_charts_fit_the_column_and_nothing_is_clipped(model, theme):
    s = session_for(model)
    for view in ("schedule", "lifetimes", "memory"):
        data, _ = view_data(s, view)
        for width in (3.3, 7.0):
            fig = figures.FIGURES[view](data, theme=theme, width=width)
            check_inside_page(fig, width)


def test_lifetimes_name_the_largest_buffers_whatever_the_count():
    data, _ = view_data(session_for("unet_small.onnx"), "lifetimes")
    many = dict(data)
    base = data["buffers"]
    many["buffers"] = [
        {**b, "name": f"{b['name']}_{k}", "first": b["first"] + k, "last": b["last"] + k}
        for k in range(4)
        for b in base
    ]
    assert len(many["buffers"]) > figures.NAMED_ROWS
    fig = figures.lifetimes_figure(many, width=3.3)
    check_inside_page(fig, 3.3)
    texts = {t.get_text() for t in _texts(fig)}
    largest = max(many["buffers"], key=lambda b: b["size"])
    assert any(t.startswith(largest["name"] + " ") for t in texts)
    # The names never sit on one another (the largest buffers are often neighbours).
    renderer = fig.canvas.get_renderer()
    from matplotlib.text import Text

    # the text's own box (an Annotation's extent includes its leader line)
    names = [Text.get_window_extent(t, renderer) for t in fig.axes[0].texts]
    assert len(names) >= 8
    for k, a in enumerate(names):
        for b in names[k + 1 :]:
            assert not a.overlaps(b), (a, b)


def test_memory_figure_labels_the_peak_and_keeps_equal_bounds_visible():
    from compiler.memory.report import human_bytes

    s = session_for("transformer_block.onnx")
    data, _ = view_data(s, "memory")
    assert data["peak_bytes"] == data["lower_bound_bytes"]
    fig = figures.memory_figure(data, width=3.3)
    texts = [t.get_text() for t in _texts(fig)]
    # The legend says what the text report says (the same byte formatting).
    assert f"peak (arena) {human_bytes(data['peak_bytes'])}" in texts
    assert "lower bound = peak" in texts
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert (
        lines["lower bound = peak"].get_zorder()
        > lines[f"peak (arena) {human_bytes(data['peak_bytes'])}"].get_zorder()
    )
    # Every buffer live at the peak is labelled with its name and size.
    sizes = {b["name"]: b["size"] for b in data["buffers"]}
    for name in data["live_at_peak"]:
        assert f"{name} {human_bytes(sizes[name])}" in texts
    # Tiny buffers keep a visible height.
    heights = [p.get_height() for p in ax.patches]
    assert min(heights) > 0


def test_schedule_lifetimes_memory_share_one_instruction_axis():
    s = session_for("transformer_block.onnx")
    limits = set()
    for view in ("schedule", "lifetimes", "memory"):
        data, _ = view_data(s, view)
        fig = figures.FIGURES[view](data, width=3.3)
        limits.add(tuple(round(x, 6) for x in fig.axes[0].get_xlim()))
        peaks = [t for t in _texts(fig) if "peak" in t.get_text()]
        # one "peak": the arena, at the report's instruction
        assert all("most live" not in t.get_text() for t in peaks)
    assert len(limits) == 1


# ---------------------------------------------------------------------------------------------
# Deterministic files
# ---------------------------------------------------------------------------------------------

_EXPORT_ALL = """
import sys
from pathlib import Path
from compiler.pipeline import CompileOptions
from glowviz.exports.views import VIEW_FORMATS, compile_session, render_view
out = Path(sys.argv[1])
s = compile_session(sys.argv[2], CompileOptions())
for view, fmts in VIEW_FORMATS.items():
    for fmt in fmts:
        (out / f"{view}.{fmt}").write_bytes(render_view(s, view, fmt))
"""


def _export_all(tmp_path, name: str, env_extra: dict[str, str]) -> dict[str, bytes]:
    out = tmp_path / name
    out.mkdir()
    env = {**os.environ, **env_extra}
    env.pop("SOURCE_DATE_EPOCH", None) if "SOURCE_DATE_EPOCH" not in env_extra else None
    subprocess.run(
        [sys.executable, "-c", _EXPORT_ALL, str(out), str(MODELS / "lenet.onnx")],
        check=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@needs_dot
@pytest.mark.slow
def test_every_format_is_byte_identical_across_runs(tmp_path):
    a = _export_all(tmp_path, "a", {"PYTHONHASHSEED": "1"})
    b = _export_all(tmp_path, "b", {"PYTHONHASHSEED": "2"})
    assert set(a) == set(b) and len(a) >= 20
    for name in a:
        assert a[name] == b[name], name
    for name, data in a.items():
        if name.endswith(".pdf"):
            assert b"/CreationDate" not in data, name
        if name.endswith(".svg"):
            assert b"Generated by graphviz" not in data and b"<dc:date>" not in data, name


@needs_dot
def test_source_date_epoch_sets_the_pdf_date(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    s = session_for("mlp.onnx")
    for view in ("graph", "memory"):
        pdf = render_view(s, view, "pdf")
        assert b"D:20231114" in pdf, view
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    fake = b"<< /CreationDate (D:20260101120000+01'00) >>"
    assert pdf_dates(fake) == b"<< " + b" " * (len(fake) - 6) + b" >>"
