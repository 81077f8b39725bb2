"""Graph and low-level IR figures that fit a column: boxes, groups, focus and sizing -> DOT.

The graph view (`dot_graph`) and the LIR view (`dot_lir`) turn their data into `Box`es -- one
per node or instruction, weights and scalars written inside the box as Netron does (Glow's DOT
dumps keep weights as ports of the node; neither draws them as nodes of their own) -- and this
module draws them:

- *detail*: `full` draws every box; `grouped` folds the structure `glowviz.exports.structure`
  finds -- a repeated block becomes one double-outlined box "N x [ops]" or, while the figure
  has room, one instance drawn inside a dashed cluster labelled "x N"; a long chain becomes one
  box "A -> B -> C"; `auto` is `full` when every box fits the budget of the width, else
  `grouped`.
- *focus*: only some boxes (`--subgraph NODE --radius K`, `--pass PASS`), the rest shown as
  small stubs naming what an edge leads to or comes from; highlighted boxes get a thick border.
- *width*: fonts are sized for the column (`--width 3.3in`, `7in`); the layout is measured with
  Graphviz and, while it is wider than the column, edge labels go, then more is grouped, so the
  page fits the column with no text under `MIN_FONT_PT` (Graphviz's `size` only ever shrinks by
  the little that is left).

Deterministic: names and positions only, never object ids.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from glowviz.exports.palette import Palette, as_palette
from glowviz.exports.structure import (
    Run,
    fold_repeats,
    runs_continue,
    segment_signature,
    segments,
)

#: The smallest text a figure may have once placed in its column (points).
MIN_FONT_PT = 5.0
COLUMN_WIDTH_IN = 3.3
WIDE_WIDTH_IN = 7.0
DETAILS = ("auto", "grouped", "full")
#: Ops that join branches (their reads do not keep a long segment whole; see `segments`).
JOINS = ("concat", "add", "inserttensor")
#: A chain of at least this many single boxes is folded into one box when grouping.
CHAIN_MIN = 3


# ---------------------------------------------------------------------------------------------
# Numbers and sizes for people
# ---------------------------------------------------------------------------------------------


def human_number(x: float | int) -> str:
    """`1e-4`, not `9.999999747378752e-05`: float32 attributes at the precision they have."""
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, int | np.integer):
        return str(int(x))
    f = float(x)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f.is_integer() and abs(f) < 1e5:
        return str(int(f))
    if abs(f) < 3.4e38:
        f = float(np.float32(f))  # the value the model holds, not its double expansion
    if 1e-3 <= abs(f) < 1e5:
        return f"{f:.5g}"
    mantissa, exp = f"{f:.3e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exp)}"


_FLOAT = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def human_text(text: str) -> str:
    """Every number in an attribute or constant text written for people; quotes dropped."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        items = [t.strip() for t in text[1:-1].split(",") if t.strip()]
        if items and all(_FLOAT.fullmatch(t) for t in items):
            nums = [human_text(t) for t in items]
            if len(set(nums)) == 1 and len(nums) > 1:
                return nums[0]  # strides [2, 2] -> 2, pads [1, 1, 1, 1] -> 1
            return "[" + ", ".join(nums) + "]"

    def one(m: re.Match[str]) -> str:
        s = m.group(0)
        if re.fullmatch(r"-?\d+", s):
            return s
        return human_number(float(s))

    return _FLOAT.sub(one, text)


def parse_width(text: str | float | None) -> float:
    """`3.3in`, `7in`, `85mm`, `8.5cm`, `240pt` or a bare number of inches -> inches."""
    if text is None:
        return COLUMN_WIDTH_IN
    if isinstance(text, int | float):
        value, unit = float(text), "in"
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(in|mm|cm|pt)?\s*", str(text))
        if m is None:
            from glowviz.exports.render import ExportError

            raise ExportError(
                f"bad width '{text}'", hint="e.g. 3.3in (one column), 7in (two columns), 85mm"
            )
        value, unit = float(m.group(1)), m.group(2) or "in"
    inches = value * {"in": 1.0, "mm": 1 / 25.4, "cm": 1 / 2.54, "pt": 1 / 72}[unit]
    if not 1.0 <= inches <= 40.0:
        from glowviz.exports.render import ExportError

        raise ExportError(f"width {text} is out of range", hint="between 1in and 40in")
    return inches


@dataclass(frozen=True)
class Fonts:
    """Point sizes of one figure width (at 3.3 in the smallest is above MIN_FONT_PT, so the
    layout may still shrink a little to fit)."""

    title: float
    head: float
    detail: float
    edge: float
    chars: int  # detail line length before wrapping

    @classmethod
    def for_width(cls, width_in: float) -> Fonts:
        if width_in < 5.0:
            return cls(title=7.5, head=6.8, detail=5.8, edge=5.6, chars=34)
        return cls(title=9.0, head=8.0, detail=6.8, edge=6.4, chars=44)

    @property
    def smallest(self) -> float:
        """The smallest size drawn: `detail` goes into HTML labels' POINT-SIZE, which Graphviz
        2.43 (the CI's) truncates to whole points: 5.8 is drawn at 5."""
        return min(self.title, self.head, math.floor(self.detail), self.edge)


# ---------------------------------------------------------------------------------------------
# What is drawn
# ---------------------------------------------------------------------------------------------

#: Attributes that say where or how big, not what: left out of the signature blocks are
#: compared by (a concat's insert offsets, a reshape's target shape).
POSITION_ATTRS = frozenset({"offsets", "shape", "starts", "ends", "sizes", "count"})


def structural_sig(op: str, attrs: dict[str, str], *extra: Hashable) -> Hashable:
    """What makes two boxes "the same" when looking for repeated blocks."""
    return (op, tuple(sorted((k, v) for k, v in attrs.items() if k not in POSITION_ATTRS)), *extra)


@dataclass
class Box:
    """One node or instruction as drawn."""

    key: str
    head: str  # bold: the op or instruction kind (LIR: "#12 conv")
    name: str  # its name ("" for none)
    category: str  # colour key (op category or value kind)
    lines: list[str] = field(default_factory=list)  # weights, scalars, attributes
    sig: Hashable = ""  # op + attributes: what makes two boxes "the same" for grouping
    reads: list[str] = field(default_factory=list)  # keys of the boxes it reads
    out_label: str = ""  # what leaves it (a shape), on its outgoing edges
    kind: str = "op"  # "op" | "input" | "output"
    index: int | None = None  # LIR instruction index
    folded: list[str] = field(default_factory=list)  # instructions drawn inside it (markers)


@dataclass
class Drawing:
    """Everything one figure needs besides the palette."""

    name: str
    title: str
    boxes: list[Box]
    detail: str = "auto"
    width_in: float = COLUMN_WIDTH_IN
    edge_labels: bool = True
    focus: set[str] | None = None  # draw only these (with stubs to the rest)
    highlight: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)  # a note box above the figure
    chars: int | None = None  # detail line length (default: the width's); narrower boxes
    bare: bool = False  # boxes without detail lines (the narrowest)


def _h(s: Any) -> str:
    """Escape text for an HTML-like label."""
    return (
        str(s)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
    )


def _q(s: str) -> str:
    """A quoted DOT ID or string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def wrap(text: str, width: int) -> list[str]:
    """Break a detail line at ', ' or spaces to at most `width` characters (long words kept)."""
    if len(text) <= width:
        return [text]
    out, line = [], ""
    for word in re.split(r"(?<=,) |(?<= ) ", text):
        if line and len(line) + len(word) > width:
            out.append(line.rstrip())
            line = "  " + word
        else:
            line += word if not line or line.endswith(" ") else " " + word
    if line:
        out.append(line.rstrip())
    return out


# ---------------------------------------------------------------------------------------------
# Units: boxes or groups of them, as the figure shows them
# ---------------------------------------------------------------------------------------------


@dataclass
class Unit:
    """A stretch of boxes drawn one way: `box` (each box itself), `summary` (one box for the
    stretch) or `cluster` (one repetition drawn in a cluster labelled with the count)."""

    items: range  # box positions covered (all repetitions)
    mode: str  # "box" | "summary" | "cluster"
    count: int = 1  # repetitions (cluster / summary of a repeat)
    reps: list[range] = field(default_factory=list)  # box positions of each repetition
    sig: Hashable = ""
    kind: str = "chain"  # "repeat" | "chain" | "block"

    def shown(self) -> range:
        """The box positions drawn as boxes (the first repetition of a cluster)."""
        if self.mode == "cluster":
            return self.reps[0]
        return self.items if self.mode == "box" else range(0)

    def cost(self) -> int:
        return len(self.shown()) if self.mode != "summary" else 1


def _units(boxes: Sequence[Box], grouped: bool) -> list[Unit]:
    """The boxes cut into segments, repeats folded, chains joined -- all collapsed at first."""
    if not grouped:
        return [Unit(range(0, len(boxes)), "box")]
    pos = {b.key: i for i, b in enumerate(boxes)}
    reads = [[pos[r] for r in b.reads if r in pos] for b in boxes]
    runs = runs_continue([b.sig for b in boxes], reads)
    segs = segments(
        reads,
        [r or (b.category == "activation" and len(b.reads) == 1) for r, b in zip(runs, boxes)],
        [b.head.split(" ")[-1].lower() in JOINS for b in boxes],
    )
    sigs = [segment_signature(s, [b.sig for b in boxes], reads) for s in segs]
    units: list[Unit] = []
    for run in fold_repeats(sigs):
        first = segs[run.start]
        last = segs[run.stop - 1]
        span = range(first.start, last.stop)
        if run.count > 1:
            reps = [
                range(
                    segs[run.start + r * run.period].start,
                    segs[run.start + (r + 1) * run.period - 1].stop,
                )
                for r in range(run.count)
            ]
            units.append(
                Unit(
                    span,
                    "summary",
                    run.count,
                    reps,
                    tuple(sigs[run.start : run.start + run.period]),
                    "repeat",
                )
            )
        else:
            units.append(
                Unit(
                    span, "box" if len(span) == 1 else "summary", sig=sigs[run.start], kind="block"
                )
            )
    # Runs of single boxes (chains) are joined, and folded when long enough.
    out: list[Unit] = []
    for u in units:
        single = u.mode == "box" and boxes[u.items.start].kind == "op"
        prev = out[-1] if out else None
        if single and prev is not None and prev.kind == "chain" and prev.mode != "summary":
            prev.items = range(prev.items.start, u.items.stop)
            continue
        if single:
            u.kind = "chain"
        out.append(u)
    for u in out:
        if u.kind == "chain" and len(u.items) >= CHAIN_MIN:
            u.mode = "summary"
    return out


def _merge_between_repeats(units: list[Unit], boxes: Sequence[Box]) -> list[Unit]:
    """The shortest form: everything between two repeated blocks (and inputs/outputs) is one
    chain box ("BatchNorm → Relu → Conv → AvgPool")."""
    out: list[Unit] = []
    for u in units:
        terminal = boxes[u.items.start].kind != "op"
        prev = out[-1] if out else None
        if (
            not terminal
            and u.kind != "repeat"
            and prev is not None
            and prev.kind != "repeat"
            and boxes[prev.items.start].kind == "op"
        ):
            out[-1] = Unit(range(prev.items.start, u.items.stop), "summary", kind="chain")
            continue
        if not terminal and u.kind != "repeat" and len(u.items) > 1:
            u = Unit(u.items, "summary", kind="chain")
        out.append(u)
    return out


def _expand(units: list[Unit], budget: int) -> None:
    """Draw collapsed units as boxes (or one repetition as a cluster) while the budget lasts:
    the first occurrence of each repeated block first, then other blocks, in order."""
    total = sum(u.cost() for u in units)
    seen: set[Hashable] = set()
    order = [u for u in units if u.kind == "repeat"] + [u for u in units if u.kind == "block"]
    order += [u for u in units if u.kind == "chain" and u.mode == "summary"]
    for u in order:
        if u.mode != "summary":
            continue
        if u.kind == "repeat":
            if u.sig in seen:
                continue
            extra = len(u.reps[0]) - 1
            if total + extra <= budget:
                u.mode = "cluster"
                total += extra
                seen.add(u.sig)
        else:
            extra = len(u.items) - 1
            if total + extra <= budget:
                u.mode = "box"
                total += extra


def budget_for(width_in: float) -> int:
    """How many boxes a figure of this width holds before it groups (about one column tall)."""
    return 28 if width_in < 5.0 else 56


# ---------------------------------------------------------------------------------------------
# DOT
# ---------------------------------------------------------------------------------------------


def _box_label(
    b: Box, fonts: Fonts, text: str, highlight: bool, chars: int | None = None, bare: bool = False
) -> str:
    width = chars or fonts.chars
    heads = wrap(b.head, width)
    head = "<BR/>".join(f"<B>{_h(x)}</B>" for x in heads)
    if b.name and b.name != b.head:
        sep = "<BR/>" if chars is not None and chars < fonts.chars else " "
        head += f'{sep}<FONT POINT-SIZE="{fonts.detail}">{_h(b.name)}</FONT>'
    rows = [head]
    lines = [] if bare else [w for line in b.lines for w in wrap(line, width)]
    if highlight:
        lines = ["changed by this pass", *lines]
    if lines:
        rows.append(
            f'<FONT POINT-SIZE="{fonts.detail}">'
            + '<BR ALIGN="LEFT"/>'.join(_h(x) for x in lines)
            + '<BR ALIGN="LEFT"/></FONT>'
        )
    return f'<<FONT COLOR="{text}">' + "<BR/>".join(rows) + "</FONT>>"


def _summary_text(boxes: Sequence[Box], u: Unit, fonts: Fonts) -> tuple[str, list[str]]:
    """(bold head, detail lines) of a collapsed unit."""
    one = [boxes[i] for i in (u.reps[0] if u.reps else u.items)]
    ops = [b.head.split(" ")[-1] for b in one if b.kind == "op"]
    if u.kind == "chain":
        head = (
            " → ".join(ops) if len(ops) <= 4 else f"{len(ops)} ops: " + " → ".join(ops[:3]) + " → …"
        )
    else:
        counts = Counter(ops)
        listed = ", ".join(f"{k}×{v}" if v > 1 else k for k, v in counts.items())
        head = (f"{u.count} × " if u.kind == "repeat" else "") + f"[{listed}]"
    first, last = boxes[u.items.start], boxes[u.items.stop - 1]
    lines = []
    if first.index is not None and last.index is not None:
        lines.append(f"#{first.index}–#{last.index}")
    names = f"{first.name} … {last.name}" if first.name != last.name else first.name
    lines.append(names)
    if u.kind == "repeat":
        sizes = sorted({len(r) for r in u.reps})
        each = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
        lines.append(f"{each} {'instructions' if first.index is not None else 'ops'} each")
    return head, [x for x in lines if x]


def to_dot(d: Drawing, pal: Palette, *, budget: int | None = None) -> str:
    """The DOT text of a drawing at its detail, focus and width."""
    fonts = Fonts.for_width(d.width_in)
    boxes = d.boxes
    if d.focus is not None:
        units = [Unit(range(0, len(boxes)), "box")]
        visible = {b.key for b in boxes if b.key in d.focus}
    else:
        limit = budget_for(d.width_in) if budget is None else budget
        grouped = d.detail == "grouped" or (d.detail == "auto" and len(boxes) > limit)
        units = _units(boxes, grouped)
        if grouped and limit < CHAIN_MIN:
            units = _merge_between_repeats(units, boxes)
        if grouped and d.detail != "full":
            _expand(units, limit)
        visible = {boxes[i].key for u in units for i in u.shown()}
    # Where each box is drawn: itself, its unit's summary, or its twin in the first repetition.
    where: dict[str, str] = {}
    rep: dict[str, tuple[int, int]] = {}  # key -> (cluster unit, repetition)
    for k, u in enumerate(units):
        for i in u.items:
            key = boxes[i].key
            if u.mode == "summary":
                where[key] = f"unit{k}"
            elif u.mode == "cluster":
                nth = next(n for n, x in enumerate(u.reps) if i in x)
                offset = min(i - u.reps[nth].start, len(u.reps[0]) - 1)
                if i == u.reps[nth].stop - 1:
                    offset = len(u.reps[0]) - 1  # a repetition's exit is the first one's exit
                where[key] = boxes[u.reps[0].start + offset].key
                rep[key] = (k, nth)
            else:
                where[key] = key
    out = [f"digraph {_q(d.name)} {{"]
    title = d.title
    out.append(
        f'  graph [rankdir=TB, bgcolor="{pal.background}", fontcolor="{pal.foreground}", '
        f'fontname="{pal.dot_font}", fontsize={fonts.title}, labelloc=t, labeljust=l, '
        f"label={_q(title)}, nodesep=0.12, ranksep=0.16, margin=0, pad={PAD_IN:g}, "
        f'size="{d.width_in:g},200", newrank=true, searchsize=50, mclimit=0.5];'
    )
    out.append(
        f'  node [fontname="{pal.dot_font}", fontsize={fonts.head}, fontcolor="{pal.foreground}", '
        f'color="{pal.foreground}", penwidth=0.6, shape=box, style="filled,rounded", '
        f'margin="0.05,0.025", height=0.2, width=0.3];'
    )
    out.append(
        f'  edge [fontname="{pal.dot_font}", fontsize={fonts.edge}, color="{pal.edge}", '
        f'fontcolor="{pal.muted}", arrowsize=0.45, penwidth=0.6];'
    )
    if d.notes:
        text = '<BR ALIGN="LEFT"/>'.join(_h(n) for n in d.notes)
        out.append(
            f'  "__notes" [shape=plain, style="", fontsize={fonts.detail}, '
            f'label=<{text}<BR ALIGN="LEFT"/>>];'
        )
    for k, u in enumerate(units):
        if u.mode == "summary":
            first = boxes[u.items.start]
            cats = Counter(
                b.category for b in boxes[u.items.start : u.items.stop] if b.kind == "op"
            )
            cat = cats.most_common(1)[0][0] if cats else first.category
            fill = pal.category(cat)
            head, lines = _summary_text(boxes, u, fonts)
            sb = Box(f"unit{k}", head, "", cat, lines)
            extra = ", peripheries=2" if u.kind == "repeat" else ""
            out.append(
                f'  "unit{k}" [fillcolor="{fill}"{extra}, '
                f"label={_box_label(sb, fonts, pal.text_on(fill), False, d.chars)}];"
            )
            continue
        shown = [i for i in u.shown() if boxes[i].key in visible]
        indent = "  "
        if u.mode == "cluster":
            out.append(f"  subgraph {_q(f'cluster_{k}')} {{")
            out.append(
                f'    label=<<B>× {u.count}</B>  <FONT POINT-SIZE="{fonts.detail}">repeated block'
                f"</FONT>>; labeljust=r; fontsize={fonts.head}; "
                f'style="dashed,rounded"; color="{pal.muted}"; fontcolor="{pal.foreground}"; margin=4;'
            )
            indent = "    "
        for i in shown:
            b = boxes[i]
            out.append(indent + _box_node(b, pal, fonts, b.key in d.highlight, d))
        if u.mode == "cluster":
            out.append("  }")
    if d.focus is not None:
        # The parts of a focus view in program order, one under the other (Graphviz would put
        # unconnected parts side by side, far wider than a column).
        order = [b.key for b in boxes if b.key in visible]
        for a, b2 in zip(order, order[1:]):
            out.append(f"  {_q(a)} -> {_q(b2)} [style=invis, weight=0];")
    # Edges, once per (drawn source, drawn target), labelled with what really flows.
    label_of = {b.key: b.out_label for b in boxes} if d.edge_labels else {}
    drawn = visible | {f"unit{k}" for k, u in enumerate(units) if u.mode == "summary"}
    seen: set[tuple[str, str]] = set()
    stubs: dict[str, str] = {}

    def stub(text: str) -> str:
        if text not in stubs:
            stubs[text] = f"__stub{len(stubs)}"
            out.append(_stub(stubs[text], text, pal, fonts))
        return stubs[text]

    for b in boxes:
        dst = where.get(b.key, b.key)
        for r in b.reads:
            src = where.get(r, r)
            if src == dst:
                continue  # inside one summary box
            if b.key in rep and rep[b.key][1] > 0 and r in rep and rep[r][0] == rep[b.key][0]:
                continue  # inside a repetition the first one shows; the count says the rest
            attrs = []
            if src not in drawn and dst not in drawn:
                continue
            if src not in drawn:
                src, attrs = stub(f"from {r}"), ["style=dashed"]
            elif dst not in drawn:
                dst, attrs = stub(f"to {b.key}"), ["style=dashed"]
            elif label_of.get(r):
                attrs = [f"label={_q(' ' + label_of[r])}"]
            if (src, dst) in seen:
                continue
            seen.add((src, dst))
            out.append(
                f"  {_q(src)} -> {_q(dst)}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";"
            )
    out.append("}")
    return "\n".join(out) + "\n"


def _stub(key: str, text: str, pal: Palette, fonts: Fonts) -> str:
    return (
        f'  {_q(key)} [shape=plain, style="", fontsize={fonts.detail}, fontcolor="{pal.muted}", '
        f"label={_q(text)}];"
    )


def _box_node(b: Box, pal: Palette, fonts: Fonts, highlight: bool, d: Drawing) -> str:
    fill = pal.category(b.kind if b.kind in ("input", "output") else b.category)
    shape = {"input": ", shape=invhouse", "output": ", shape=house"}.get(b.kind, "")
    border = f', penwidth=1.8, color="{pal.peak}"' if highlight else ""
    label = _box_label(b, fonts, pal.text_on(fill), highlight, d.chars, d.bare)
    return f'{_q(b.key)} [fillcolor="{fill}"{shape}{border}, label={label}];'


# ---------------------------------------------------------------------------------------------
# Fitting the column
# ---------------------------------------------------------------------------------------------


#: The tallest figure the fitting aims for (a page less its caption), inches.
MAX_HEIGHT_IN = 8.5


def layout_size_in(dot: str) -> tuple[float, float]:
    """The natural (width, height) of a DOT drawing in inches, measured by Graphviz."""
    from glowviz.exports.render import dot_program

    src = re.sub(r'size="[^"]*", ', "", dot, count=1)
    return _measured_size(dot_program(), src)


@functools.lru_cache(maxsize=32)
def _measured_size(program: str | None, src: str) -> tuple[float, float]:
    """Graphviz's layout of `src` is a function of the text (and of the `dot` found on PATH,
    part of the key): one process that exports a figure in several formats, or again (the
    IDE, a script), measures each trial layout once instead of once per export. The sources
    are the keys -- a DenseNet-size one is megabytes in a long-lived IDE -- so the cache holds
    a few figures' trials, not more."""
    from glowviz.exports.render import run_graphviz

    first = run_graphviz(["dot", "-Tplain"], src).split(b"\n", 1)[0].split()
    return (float(first[2]), float(first[3])) if len(first) >= 4 else (0.0, 0.0)


#: The margin Graphviz adds around a drawing (`pad`), in inches: part of the page's width.
PAD_IN = 0.04


def fitted_dot(d: Drawing, pal: Palette) -> str:
    """DOT text that fits the drawing's width with no text under MIN_FONT_PT and, where it can,
    `MAX_HEIGHT_IN`: measured with Graphviz; narrowed step by step (no edge labels, narrower
    boxes, boxes without details) and shortened by grouping more (a smaller budget)."""
    from glowviz.exports.render import have_dot

    if not have_dot() or d.detail == "full":
        return to_dot(d, pal)
    fonts = Fonts.for_width(d.width_in)
    max_width = d.width_in * fonts.smallest / MIN_FONT_PT  # Graphviz may shrink this much
    narrow = max(16, fonts.chars // 2)
    styles = [
        (d.edge_labels, d.chars, d.bare),
        (False, d.chars, d.bare),
        (False, narrow, d.bare),
        (False, narrow, True),
    ]
    b = budget_for(d.width_in)
    levels: list[int | None] = [None] if d.focus is not None else [None, b // 2, b // 4, 4, 1]
    sizes: dict[str, tuple[float, float]] = {}
    fallback: str | None = None
    dot = ""
    for budget in levels:
        for labels, chars, bare in styles:
            trial = Drawing(**{**d.__dict__, "edge_labels": labels, "chars": chars, "bare": bare})
            if budget is not None:
                trial.detail = "grouped"
            dot = to_dot(trial, pal, budget=budget)
            if dot not in sizes:
                sizes[dot] = layout_size_in(dot)
            width, height = sizes[dot]
            width += 2 * PAD_IN  # -Tplain measures the drawing without its pad
            if width <= max_width:
                if height <= MAX_HEIGHT_IN * max_width / d.width_in:
                    return dot
                fallback = fallback or dot
                break  # as narrow as needed; shorter takes grouping more
    return fallback or dot


class DotOptions(TypedDict, total=False):
    """The options every graph and LIR export takes (see `drawing_dot`)."""

    theme: str | Palette | None
    title: str | None
    edge_labels: bool
    width: str | float | None
    detail: str
    focus: set[str] | None
    highlight: set[str] | None
    notes: Sequence[str]
    fit: bool


def drawing_dot(
    name: str,
    stage: str | None,
    boxes: list[Box],
    *,
    compact: bool = False,
    theme: str | Palette | None = None,
    title: str | None = None,
    edge_labels: bool = True,
    width: str | float | None = None,
    detail: str = "auto",
    focus: set[str] | None = None,
    highlight: set[str] | None = None,
    notes: Sequence[str] = (),
    fit: bool = True,
) -> str:
    """DOT text of `boxes` (the IR `name` after `stage`), titled `title` or "NAME — after
    STAGE", sized for `width` (default one column, 3.3 in); `compact` draws no edge labels;
    `fit`: shrink the detail until the figure fits `width`, see `fitted_dot`."""

    pal = as_palette(theme)
    label = title if title is not None else name + (f" — after {stage}" if stage else "")
    drawing = Drawing(
        name,
        label,
        boxes,
        detail=detail,
        width_in=parse_width(width),
        edge_labels=edge_labels and not compact,
        focus=focus,
        highlight=set(highlight or ()),
        notes=list(notes),
    )
    return fitted_dot(drawing, pal) if fit else to_dot(drawing, pal)


__all__ = [
    "drawing_dot",
    "DotOptions",
    "COLUMN_WIDTH_IN",
    "DETAILS",
    "MIN_FONT_PT",
    "WIDE_WIDTH_IN",
    "Box",
    "Drawing",
    "Fonts",
    "Run",
    "fitted_dot",
    "human_number",
    "human_text",
    "layout_size_in",
    "parse_width",
    "structural_sig",
    "to_dot",
]
