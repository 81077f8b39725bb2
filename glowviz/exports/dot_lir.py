"""Low-level IR -> DOT (or text): instructions top to bottom in program order, each with its
index, kind, name and operands (`@in` / `@out` / `@inout`); weights as small boxes; an edge from
every value an instruction reads, and to every buffer it writes. Colours follow the category of
the graph op an instruction computes. `lir_data` is the JSON of the view.
"""

from __future__ import annotations

from typing import Any

from compiler.lir.instructions import Kind
from glowviz.exports.dot_graph import _cut, _h, _q
from glowviz.exports.palette import Palette, load_palette


def lir_data(fn: Any, *, stage: str | None = None) -> dict[str, Any]:
    """`glowviz.export.lir/1`: the function's weights and instructions as plain data."""
    from compiler.graph.printer import format_attr
    from compiler.lir.printer import format_instruction

    weights = [
        {"name": w.name, "type": str(w.type), "mutability": w.mutability, "role": w.role}
        for w in fn.weights.values()
    ]
    instrs = []
    for i, ins in enumerate(fn.code):
        instrs.append(
            {
                "index": i,
                "name": ins.name,
                "kind": ins.kind,
                "category": ins.idef.category,
                "operands": [{"value": v.name, "mode": m} for v, m in ins.operands],
                "attrs": {k: format_attr(v) for k, v in ins.attrs.items()},
                "type": str(ins.type) if ins.type is not None else None,
                "node": ins.meta.get("node"),
                "text": format_instruction(ins),
            }
        )
    return {
        "schema": "glowviz.export.lir/1",
        "function": fn.name,
        "stage": stage,
        "weights": weights,
        "instructions": instrs,
    }


def _weight_label(w: dict[str, Any], kind: str) -> str:
    return f"%{w['name']}\n{kind} {w['type']}"


def lir_text(fn: Any) -> str:
    from compiler.lir.printer import print_lir

    return print_lir(fn)


def lir_to_dot(
    fn: Any, *, theme: str | Palette | None = None, compact: bool = False, title: str | None = None
) -> str:
    data = fn if isinstance(fn, dict) else lir_data(fn)
    pal = theme if isinstance(theme, Palette) else load_palette(theme)
    out = [f"digraph {_q('@' + data['function'])} {{"]
    label = (
        title
        if title is not None
        else ("@" + data["function"] + (f" — after {data['stage']}" if data.get("stage") else ""))
    )
    out.append(
        f'  graph [rankdir=TB, bgcolor="{pal.background}", fontcolor="{pal.foreground}", '
        f'fontname="{pal.dot_font}", fontsize=14, labelloc=t, label={_q(label)}, '
        f"nodesep=0.2, ranksep={0.15 if compact else 0.3}];"
    )
    out.append(
        f'  node [fontname="{pal.dot_font}", fontcolor="{pal.foreground}", '
        f'color="{pal.foreground}", penwidth=1];'
    )
    out.append(
        f'  edge [fontname="{pal.dot_font}", fontsize=7, color="{pal.edge}", '
        f'fontcolor="{pal.muted}", arrowsize=0.5];'
    )
    defined = {w["name"] for w in data["weights"]}
    if not compact:
        for w in data["weights"]:
            kind = "const" if w["mutability"] == "constant" else (w["role"] or "mutable")
            fill = pal.category("constant" if kind == "const" else "placeholder")
            out.append(
                f'  {_q(w["name"])} [shape=box, style="filled,rounded", '
                f'fillcolor="{fill}", fontcolor="{pal.text_on(fill)}", '
                f'color="{pal.muted}", fontsize=8, height=0.3, '
                f"label={_q(_weight_label(w, kind))}];"
            )
    for ins in data["instructions"]:
        fill = pal.category(ins["category"])
        nid = _q(ins["name"])
        if compact:
            text = f"{ins['index']} {ins['kind']} %{ins['name']}"
            if ins["type"]:
                text += f" : {ins['type']}"
            out.append(
                f'  {nid} [shape=box, style=filled, fillcolor="{fill}", '
                f'fontcolor="{pal.text_on(fill)}", fontsize=9, '
                f'height=0.22, margin="0.06,0.02", label={_q(text)}];'
            )
        else:
            ops = "<BR/>".join(
                f"@{_h(o['mode'])} %{_h(_cut(o['value'], 40))}" for o in ins["operands"]
            )
            head = (
                f'<FONT POINT-SIZE="9">{ins["index"]}</FONT>  <B>{_h(ins["kind"])}</B> '
                f"%{_h(ins['name'])}"
            )
            rows = [f'<TR><TD BGCOLOR="{fill}">{head}</TD></TR>']
            if ops:
                rows.append(
                    f'<TR><TD BGCOLOR="{fill}" ALIGN="LEFT" BALIGN="LEFT">'
                    f'<FONT POINT-SIZE="8">{ops}</FONT></TD></TR>'
                )
            if ins["type"]:
                rows.append(
                    f'<TR><TD BGCOLOR="{fill}"><FONT POINT-SIZE="8">{_h(ins["type"])}'
                    f"</FONT></TD></TR>"
                )
            out.append(
                f'  {nid} [shape=plain, fontcolor="{pal.text_on(fill)}", label=<<TABLE BORDER="1" CELLBORDER="0" '
                f'CELLSPACING="0" CELLPADDING="3" COLOR="{pal.foreground}">'
                + "".join(rows)
                + "</TABLE>>];"
            )
        defined.add(ins["name"])
    # Program order: a heavy invisible chain keeps instructions top to bottom.
    names = [ins["name"] for ins in data["instructions"]]
    for a, b in zip(names, names[1:]):
        out.append(f"  {_q(a)} -> {_q(b)} [style=invis, weight=100];")
    weights = {w["name"] for w in data["weights"]}
    for ins in data["instructions"]:
        if ins["kind"] == Kind.DEALLOC:
            continue
        for o in ins["operands"]:
            v = o["value"]
            if v not in defined or (compact and v in weights):
                continue
            if o["mode"] == "in":
                out.append(f"  {_q(v)} -> {_q(ins['name'])} [constraint=false];")
            else:
                colour = pal.peak
                out.append(
                    f'  {_q(ins["name"])} -> {_q(v)} [constraint=false, color="{colour}", '
                    f"style={'bold' if o['mode'] == 'inout' else 'solid'}];"
                )
    out.append("}")
    return "\n".join(out) + "\n"


__all__ = ["lir_data", "lir_text", "lir_to_dot"]
