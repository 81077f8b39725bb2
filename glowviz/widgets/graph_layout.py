"""Graph layout for the Graph view: Graphviz `dot -Tplain`, drawn with box characters.

One drawing routine serves the neighbourhood of the selected node and the whole graph (at any
zoom, with the tensor shapes on the edges and the boxes a pass created or changed marked).
Textual-free (returns Rich Text). Layouts are cached by the Graphviz source laid out (what
`dot` gets is all its answer depends on), and the callers run them in worker threads, never
on the UI thread.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rich.text import Text

X_PER_INCH = 10.0  # one character column = 0.1 inch
Y_PER_INCH = 5.0  # one row = 0.2 inch


class LayoutError(Exception):
    pass


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def box_label(n: Mapping[str, Any]) -> str:
    """What a box says: its own label, else `op name`."""
    return str(n.get("label") or f"{n['op']} {n['name']}")


def dot_source(
    nodes: list[dict[str, Any]],
    edges: list[tuple[str, str]],
    edge_labels: Mapping[tuple[str, str], str] | None = None,
) -> str:
    lines = [
        "digraph g {",
        "rankdir=TB; nodesep=0.3; ranksep=0.4;",
        "node [shape=box fixedsize=true height=0.6 fontsize=10];",
        "edge [fontsize=8];",
    ]
    for n in nodes:
        w = (len(box_label(n)) + 4) / X_PER_INCH
        lines.append(f"{_q(n['name'])} [width={w:.2f}];")
    for a, b in edges:
        label = (edge_labels or {}).get((a, b))
        extra = f" [label={_q(label)}]" if label else ""
        lines.append(f"{_q(a)} -> {_q(b)}{extra};")
    lines.append("}")
    return "\n".join(lines)


def run_dot(src: str, timeout: float = 60.0) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise LayoutError(
            "Graphviz `dot` not found: install Graphviz (apt install graphviz, "
            "brew install graphviz) to see the graph layout"
        )
    try:
        proc = subprocess.run(
            [exe, "-Tplain"], input=src, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise LayoutError(f"dot took more than {timeout:.0f} s: fold more of the graph") from None
    if proc.returncode != 0:
        raise LayoutError(f"dot failed: {proc.stderr.strip()[:200]}")
    return proc.stdout


def _tokens(line: str) -> list[str]:
    out, cur, quoted = [], "", False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        elif ch == " " and not quoted:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


@dataclass
class Plain:
    """A `dot -Tplain` layout: sizes in inches, y up."""

    width: float
    height: float
    nodes: dict[str, tuple[float, float, float, float]]  # name -> (x, y, w, h)
    edges: list[tuple[str, str, list[tuple[float, float]]]]
    labels: list[tuple[str, float, float]] = field(default_factory=list)  # edge label, x, y


def parse_plain(text: str) -> Plain:
    p = Plain(0.0, 0.0, {}, [])
    for line in text.splitlines():
        t = _tokens(line)
        if not t:
            continue
        if t[0] == "graph":
            p.width, p.height = float(t[2]), float(t[3])
        elif t[0] == "node":
            p.nodes[t[1]] = (float(t[2]), float(t[3]), float(t[4]), float(t[5]))
        elif t[0] == "edge":
            n = int(t[3])
            pts = [(float(t[4 + 2 * k]), float(t[5 + 2 * k])) for k in range(n)]
            p.edges.append((t[1], t[2], pts))
            rest = t[4 + 2 * n :]
            if len(rest) >= 5:  # label x y style color
                p.labels.append((rest[0], float(rest[1]), float(rest[2])))
    return p


@dataclass
class Drawing:
    """A laid-out graph as lines of styled text, and where each box landed (cells)."""

    lines: list[Text]
    width: int
    height: int
    boxes: dict[str, tuple[int, int, int, int]]  # name -> (x0, y0, x1, y1), inclusive


def draw_layout(
    nodes: list[dict[str, Any]],
    plain: Plain,
    selected: str | None,
    styles: Mapping[str, str],
    *,
    scale: float = 1.0,
    marks: Mapping[str, str] | None = None,
    edge_labels: bool = False,
) -> Drawing:
    """The laid-out nodes as box characters; `styles` by node kind (a theme's
    [ui.categories]), `marks` a style per node that wins over its kind's (created / changed
    by the selected pass). Below scale 0.6 a box is one row; below 0.3 a single block."""
    xs, ys = X_PER_INCH * scale, Y_PER_INCH * scale
    cols = int(plain.width * xs) + 4
    rows = int(plain.height * ys) + 3
    grid = [[" "] * cols for _ in range(rows)]
    style: list[list[str | None]] = [[None] * cols for _ in range(rows)]
    tall = scale >= 0.6

    def cell(x: float, y: float) -> tuple[int, int]:
        return int(round(x * xs)) + 1, int(round((plain.height - y) * ys)) + 1

    boxes: dict[str, tuple[int, int, int, int]] = {}
    for name, (x, y, w, _h) in plain.nodes.items():
        cx, cy = cell(x, y)
        bw = max(1, int(round(w * xs)))
        x0 = max(0, cx - bw // 2)
        x1 = min(cols - 1, x0 + bw - 1)
        boxes[name] = (x0, cy - 1, x1, cy + 1) if tall else (x0, cy, x1, cy)
    occupied = set()
    for x0, y0, x1, y1 in boxes.values():
        for yy in range(y0, y1 + 1):
            for xx in range(x0, x1 + 1):
                occupied.add((xx, yy))
    owner: dict[tuple[int, int], int] = {}
    for e_k, (_a, _b, pts) in enumerate(plain.edges):
        samples: list[tuple[int, int]] = []
        for (xa, ya), (xb, yb) in zip(pts, pts[1:]):
            ca, cb = cell(xa, ya), cell(xb, yb)
            steps = max(abs(cb[0] - ca[0]), abs(cb[1] - ca[1]), 1)
            for k in range(steps + 1):
                p = (
                    ca[0] + round((cb[0] - ca[0]) * k / steps),
                    ca[1] + round((cb[1] - ca[1]) * k / steps),
                )
                if not samples or samples[-1] != p:
                    samples.append(p)
        last = None
        for k, (xx, yy) in enumerate(samples):
            if not (0 <= yy < rows and 0 <= xx < cols) or (xx, yy) in occupied:
                continue
            nx = samples[k + 1][0] if k + 1 < len(samples) else xx
            px = samples[k - 1][0] if k else xx
            dx = nx - px
            ch = "│" if dx == 0 else ("╲" if dx > 0 else "╱")
            if owner.get((xx, yy), e_k) != e_k and grid[yy][xx] != ch:
                ch = "┼"
            owner[(xx, yy)] = e_k
            grid[yy][xx] = ch
            style[yy][xx] = "dim"
            last = (xx, yy)
        if last is not None:
            grid[last[1]][last[0]] = "▼"
    if edge_labels:
        for label, lx, ly in plain.labels:
            cx, cy = cell(lx, ly)
            x0 = max(0, cx - len(label) // 2)
            if not 0 <= cy < rows:
                continue
            if any((xx, cy) in occupied for xx in range(x0, min(cols, x0 + len(label)))):
                continue
            for k, ch in enumerate(label[: cols - x0]):
                grid[cy][x0 + k] = ch
                style[cy][x0 + k] = "italic dim"
    by_name = {n["name"]: n for n in nodes}
    for name, (x0, y0, x1, y1) in boxes.items():
        n = by_name.get(name, {"name": name, "op": "?", "kind": ""})
        st = (marks or {}).get(name) or styles.get(n.get("kind", ""), "")
        if name == selected:
            st = "bold reverse"
        if y0 < 0 or y1 >= rows:
            continue
        inner = x1 - x0 - 1
        label = box_label(n)
        if not tall:
            text = label if x1 - x0 + 1 >= 3 else "■"
            text = text[: x1 - x0 + 1].ljust(x1 - x0 + 1)
            for k, ch in enumerate(text):
                grid[y0][x0 + k] = ch
                style[y0][x0 + k] = (st or "") + " reverse" if name != selected else st
            continue
        grid[y0][x0], grid[y0][x1], grid[y1][x0], grid[y1][x1] = "┌", "┐", "└", "┘"
        for xx in range(x0 + 1, x1):
            grid[y0][xx] = grid[y1][xx] = "─"
        grid[y0 + 1][x0] = grid[y0 + 1][x1] = "│"
        if len(label) > inner:
            label = name if len(name) <= inner else label[: max(0, inner - 1)] + "…"
        label = label[:inner].center(inner)
        for k, ch in enumerate(label):
            grid[y0 + 1][x0 + 1 + k] = ch
        for yy in range(y0, y1 + 1):
            for xx in range(x0, x1 + 1):
                style[yy][xx] = st or None
    lines: list[Text] = []
    for yy in range(rows):
        line = grid[yy]
        row_text = Text(no_wrap=True, overflow="crop")
        k = 0
        while k < cols:
            run = style[yy][k]
            j = k
            while j < cols and style[yy][j] == run:
                j += 1
            row_text.append("".join(line[k:j]), style=run or "")
            k = j
        lines.append(row_text)
    while lines and not lines[-1].plain.strip():
        lines.pop()
    return Drawing(lines, cols, len(lines), boxes)


def draw(nodes: list[dict[str, Any]], plain: str, selected: str, styles: dict[str, str]) -> Text:
    """The neighbourhood as one Text (see `draw_layout`)."""
    d = draw_layout(nodes, parse_plain(plain), selected, styles)
    return Text("\n", no_wrap=True, overflow="crop").join(d.lines)


@lru_cache(maxsize=256)
def cached_layout(src: str) -> str:
    """`dot -Tplain` of `src`, cached by the source itself: the layout depends on nothing else,
    so no hash of the whole IR is needed (printing and hashing a DenseNet-121 stage to key a
    20-node neighbourhood cost more than the layout)."""
    return run_dot(src)


def render_neighbourhood(
    selected: str,
    nodes: list[dict[str, Any]],
    edges: list[tuple[str, str]],
    styles: dict[str, str],
) -> Text:
    """The neighbourhood (`nodes`, `edges`: `CompileSession.neighbourhood`) drawn as text
    (raises LayoutError when `dot` is missing or fails)."""
    if not nodes:
        return Text("(no node selected)", style="dim")
    plain = cached_layout(dot_source(nodes, edges))
    return draw(nodes, plain, selected, styles)
