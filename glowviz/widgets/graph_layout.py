"""Neighbourhood layout for the Graph view: Graphviz `dot -Tplain`, drawn with box characters.

Textual-free (returns a Rich Text). Layouts are cached by (IR hash, node, radius), and the
caller runs `render_neighbourhood` in a worker thread, never on the UI thread.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from typing import Any

from rich.text import Text

X_PER_INCH = 10.0  # one character column = 0.1 inch
Y_PER_INCH = 5.0  # one row = 0.2 inch


class LayoutError(Exception):
    pass


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot_source(nodes: list[dict[str, Any]], edges: list[tuple[str, str]]) -> str:
    lines = [
        "digraph g {",
        "rankdir=TB; nodesep=0.3; ranksep=0.4;",
        "node [shape=box fixedsize=true height=0.6 fontsize=10];",
    ]
    for n in nodes:
        w = (len(n["name"]) + len(n["op"]) + 5) / X_PER_INCH
        lines.append(f"{_q(n['name'])} [width={w:.2f}];")
    for a, b in edges:
        lines.append(f"{_q(a)} -> {_q(b)};")
    lines.append("}")
    return "\n".join(lines)


def run_dot(src: str, timeout: float = 10.0) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise LayoutError(
            "Graphviz `dot` not found: install Graphviz (apt install graphviz, "
            "brew install graphviz) to see the neighbourhood layout"
        )
    proc = subprocess.run(
        [exe, "-Tplain"], input=src, capture_output=True, text=True, timeout=timeout
    )
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


def parse_plain(
    text: str,
) -> tuple[
    float,
    float,
    dict[str, tuple[float, float, float, float]],
    list[tuple[str, str, list[tuple[float, float]]]],
]:
    width = height = 0.0
    nodes: dict[str, tuple[float, float, float, float]] = {}
    edges: list[tuple[str, str, list[tuple[float, float]]]] = []
    for line in text.splitlines():
        t = _tokens(line)
        if not t:
            continue
        if t[0] == "graph":
            width, height = float(t[2]), float(t[3])
        elif t[0] == "node":
            nodes[t[1]] = (float(t[2]), float(t[3]), float(t[4]), float(t[5]))
        elif t[0] == "edge":
            n = int(t[3])
            pts = [(float(t[4 + 2 * k]), float(t[5 + 2 * k])) for k in range(n)]
            edges.append((t[1], t[2], pts))
    return width, height, nodes, edges


def draw(nodes: list[dict[str, Any]], plain: str, selected: str, styles: dict[str, str]) -> Text:
    """The laid-out nodes as box characters; `styles` by node kind (a theme's [ui.categories])."""
    width, height, pos, edges = parse_plain(plain)
    cols = int(width * X_PER_INCH) + 4
    rows = int(height * Y_PER_INCH) + 3
    grid = [[" "] * cols for _ in range(rows)]
    style: list[list[str | None]] = [[None] * cols for _ in range(rows)]

    def cell(x: float, y: float) -> tuple[int, int]:
        return int(round(x * X_PER_INCH)) + 1, int(round((height - y) * Y_PER_INCH)) + 1

    boxes: dict[str, tuple[int, int, int, int]] = {}
    for name, (x, y, w, _h) in pos.items():
        cx, cy = cell(x, y)
        bw = int(round(w * X_PER_INCH))
        x0 = max(0, cx - bw // 2)
        boxes[name] = (x0, cy - 1, min(cols - 1, x0 + bw - 1), cy + 1)
    occupied = set()
    for x0, y0, x1, y1 in boxes.values():
        for yy in range(y0, y1 + 1):
            for xx in range(x0, x1 + 1):
                occupied.add((xx, yy))
    owner: dict[tuple[int, int], int] = {}
    for e_k, (_a, _b, pts) in enumerate(edges):
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
    by_name = {n["name"]: n for n in nodes}
    for name, (x0, y0, x1, y1) in boxes.items():
        n = by_name.get(name, {"name": name, "op": "?", "kind": ""})
        st = "bold reverse" if name == selected else styles.get(n.get("kind", ""), "")
        if y0 < 0 or y1 >= rows:
            continue
        grid[y0][x0], grid[y0][x1], grid[y1][x0], grid[y1][x1] = "┌", "┐", "└", "┘"
        for xx in range(x0 + 1, x1):
            grid[y0][xx] = grid[y1][xx] = "─"
        grid[y0 + 1][x0] = grid[y0 + 1][x1] = "│"
        label = f"{n['op']} {name}" if len(n["op"]) + len(name) + 1 <= x1 - x0 - 1 else name
        label = label[: x1 - x0 - 1].center(x1 - x0 - 1)
        for k, ch in enumerate(label):
            grid[y0 + 1][x0 + 1 + k] = ch
        for yy in range(y0, y1 + 1):
            for xx in range(x0, x1 + 1):
                style[yy][xx] = st or None
    text = Text(no_wrap=True, overflow="crop")
    for yy in range(rows):
        line = grid[yy]
        k = 0
        while k < cols:
            run = style[yy][k]
            j = k
            while j < cols and style[yy][j] == run:
                j += 1
            text.append("".join(line[k:j]), style=run or "")
            k = j
        text.append("\n")
    text.rstrip()
    return text


@lru_cache(maxsize=256)
def _cached(key: tuple[str, str, int], src: str) -> str:
    return run_dot(src)


def render_neighbourhood(
    ir_hash: str,
    selected: str,
    nodes: list[dict[str, Any]],
    edges: list[tuple[str, str]],
    styles: dict[str, str],
    radius: int = 2,
) -> Text:
    """The neighbourhood drawn as text (raises LayoutError when `dot` is missing or fails)."""
    if not nodes:
        return Text("(no node selected)", style="dim")
    plain = _cached((ir_hash, selected, radius), dot_source(nodes, edges))
    return draw(nodes, plain, selected, styles)
