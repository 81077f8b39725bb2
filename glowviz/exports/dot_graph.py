"""Graph IR -> DOT, in the spirit of Glow's `dumpDAG`: one box per node with input and output
ports, the op and name on top, attributes inside, result types on the output ports; edges go
port to port and carry the tensor's shape. Colours come from the op's `category` in the op table.

Deterministic: everything is derived from names and the graph's stable order, never from object
ids, so two DOT files of two passes diff cleanly. `compact=True` draws one-line nodes with their
constants folded into the label (for graphs of thousands of nodes).

The same data backs the JSON export (`graph_data`), so the JSON is what the figure shows.
"""

from __future__ import annotations

from typing import Any

from compiler.graph.ir import Constant, Module, Placeholder, Result, Value
from compiler.graph.printer import INLINE_LIMIT, format_attr, format_constant_data
from glowviz.exports.palette import Palette, load_palette

#: Attribute text longer than this is cut in node labels (the JSON keeps it whole).
ATTR_TEXT_LIMIT = 48
#: At most this many attributes are listed in a node label.
ATTR_LINES = 6


def _shape(t: Any) -> str:
    return "x".join(str(d) for d in t.shape) or "scalar"


def _value_ref(v: Value) -> dict[str, Any]:
    """Where a value comes from: a node's result port, a constant or a placeholder."""
    if isinstance(v, Result):
        return {"kind": "result", "node": v.node.name, "port": v.index, "value": v.name}
    if isinstance(v, Constant):
        return {"kind": "constant", "node": v.name, "port": 0, "value": v.name}
    if isinstance(v, Placeholder):
        return {"kind": "placeholder", "node": v.name, "port": 0, "value": v.name}
    return {"kind": "value", "node": v.name, "port": 0, "value": v.name}


def _is_default(spec: Any, value: Any) -> bool:
    from compiler.graph.ops import REQUIRED, _coerce

    if spec.default is REQUIRED:
        return False
    try:
        return _coerce(spec.kind, spec.default) == value
    except (TypeError, ValueError):
        return False


def graph_data(module: Module, *, stage: str | None = None) -> dict[str, Any]:
    """The graph view as plain data (`glowviz.export.graph/1`): placeholders, constants, nodes
    (op, category, operands with their sources, results, attributes) and edges."""
    placeholders = [
        {"name": p.name, "type": str(p.type), "role": "output" if p.is_output else "input"}
        for p in module.placeholders.values()
    ]
    constants = []
    for c in sorted(module.constants.values(), key=lambda c: c.name):
        entry: dict[str, Any] = {
            "name": c.name,
            "type": str(c.type),
            "bytes": c.type.size_bytes,
            "users": sorted({u.name for u in c.user_nodes()}),
        }
        if c.data is not None and c.type.numel <= INLINE_LIMIT:
            entry["value"] = format_constant_data(c, False)
        entry["digest"] = c.digest if c.data is not None or c._digest else None
        constants.append(entry)
    functions = []
    edges = []
    for fn in module.functions:
        nodes = []
        for n in fn.nodes:
            opdef = n.opdef
            operand_names = list(opdef.operands)
            operands = []
            for i, v in enumerate(n.operands):
                pname = operand_names[min(i, len(operand_names) - 1)] if operand_names else f"in{i}"
                if opdef.variadic and i >= len(operand_names) - 1:
                    pname = f"{operand_names[-1]}{i - len(operand_names) + 1}"
                ref = _value_ref(v)
                operands.append({"operand": pname, "type": str(v.type), **ref})
                writes = isinstance(v, Placeholder) and v.is_output
                edges.append(
                    {
                        "from": n.name if writes else ref["node"],
                        "from_port": 0 if writes else ref["port"],
                        "to": v.name if writes else n.name,
                        "to_port": i,
                        "kind": "write" if writes else ref["kind"],
                        "shape": _shape(v.type),
                        "type": str(v.type),
                    }
                )
            nodes.append(
                {
                    "name": n.name,
                    "op": n.op,
                    "category": opdef.category,
                    "operands": operands,
                    "results": [
                        {"name": r.name, "type": str(r.type), "bytes": r.type.size_bytes}
                        for r in n.results
                    ],
                    "attrs": {k: format_attr(v) for k, v in n.attrs.items()},
                    "default_attrs": sorted(
                        k
                        for k, v in n.attrs.items()
                        if k in opdef.attrs and _is_default(opdef.attrs[k], v)
                    ),
                    "origin": list(n.meta.get("origin", ())),
                }
            )
        functions.append({"name": fn.name, "nodes": nodes})
    return {
        "schema": "glowviz.export.graph/1",
        "module": module.name,
        "stage": stage,
        "placeholders": placeholders,
        "constants": constants,
        "functions": functions,
        "edges": edges,
    }


# ---------------------------------------------------------------------------------------------
# DOT
# ---------------------------------------------------------------------------------------------


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


def _cut(s: str, limit: int = ATTR_TEXT_LIMIT) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _node_id(name: str) -> str:
    return _q(name)


def _node_html(n: dict[str, Any], fill: str, pal: Palette) -> str:
    ports_in = "".join(
        f'<TD PORT="i{i}" BGCOLOR="{fill}"><FONT POINT-SIZE="9">{_h(o["operand"])}</FONT></TD>'
        for i, o in enumerate(n["operands"])
    )
    ports_out = "".join(
        f'<TD PORT="o{i}" BGCOLOR="{fill}"><FONT POINT-SIZE="9">{_h(r["type"])}</FONT></TD>'
        for i, r in enumerate(n["results"])
    )
    rows = []
    if ports_in:
        rows.append(
            f'<TR><TD BORDER="0" CELLPADDING="0"><TABLE BORDER="0" CELLBORDER="1" '
            f'CELLSPACING="0" CELLPADDING="2"><TR>{ports_in}</TR></TABLE></TD></TR>'
        )
    title = f'<B>{_h(n["op"])}</B><BR/><FONT POINT-SIZE="10">{_h(n["name"])}</FONT>'
    rows.append(f'<TR><TD BGCOLOR="{fill}" CELLPADDING="4">{title}</TD></TR>')
    hidden = set(n.get("default_attrs", ()))
    attrs = [(k, v) for k, v in n["attrs"].items() if k not in hidden]
    if attrs:
        shown = attrs[:ATTR_LINES]
        lines = "<BR/>".join(f"{_h(k)} = {_h(_cut(v))}" for k, v in shown)
        if len(attrs) > ATTR_LINES:
            lines += f"<BR/>… {len(attrs) - ATTR_LINES} more"
        rows.append(
            f'<TR><TD BGCOLOR="{fill}" ALIGN="LEFT" BALIGN="LEFT">'
            f'<FONT POINT-SIZE="9">{lines}</FONT></TD></TR>'
        )
    if ports_out:
        rows.append(
            f'<TR><TD BORDER="0" CELLPADDING="0"><TABLE BORDER="0" CELLBORDER="1" '
            f'CELLSPACING="0" CELLPADDING="2"><TR>{ports_out}</TR></TABLE></TD></TR>'
        )
    return (
        '<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0" '
        f'COLOR="{pal.foreground}">' + "".join(rows) + "</TABLE>>"
    )


def graph_to_dot(
    module: Module | dict[str, Any],
    *,
    theme: str | Palette | None = None,
    compact: bool = False,
    edge_labels: bool = True,
    title: str | None = None,
) -> str:
    """DOT text of a graph-IR module (or of `graph_data(module)`)."""
    data = module if isinstance(module, dict) else graph_data(module)
    pal = theme if isinstance(theme, Palette) else load_palette(theme)
    if compact:
        edge_labels = False
    out: list[str] = [f"digraph {_q(data['module'])} {{"]
    label = (
        title
        if title is not None
        else (data["module"] + (f" — after {data['stage']}" if data.get("stage") else ""))
    )
    out.append(
        f'  graph [rankdir=TB, bgcolor="{pal.background}", fontcolor="{pal.foreground}", '
        f'fontname="{pal.dot_font}", fontsize=14, labelloc=t, label={_q(label)}, '
        f"nodesep={0.15 if compact else 0.3}, ranksep={0.25 if compact else 0.45}];"
    )
    out.append(
        f'  node [fontname="{pal.dot_font}", fontcolor="{pal.foreground}", '
        f'color="{pal.foreground}", penwidth=1];'
    )
    out.append(
        f'  edge [fontname="{pal.dot_font}", fontsize=8, color="{pal.edge}", '
        f'fontcolor="{pal.muted}", arrowsize=0.6];'
    )

    folded: set[str] = set()
    consts = {c["name"]: c for c in data["constants"]}
    if compact:
        folded = set(consts)

    # Placeholders: inputs on top, outputs at the bottom.
    ph_fill = pal.category("placeholder")
    for p in data["placeholders"]:
        shape = "invhouse" if p["role"] == "input" else "house"
        text = f"{p['role']} %{p['name']}\n{p['type']}"
        if compact:
            text = f"{p['role']} %{p['name']} : {p['type']}"
        out.append(
            f"  {_node_id(p['name'])} [shape={shape}, style=filled, "
            f'fillcolor="{ph_fill}", fontcolor="{pal.text_on(ph_fill)}", fontsize={9 if compact else 11}, '
            f"label={_q(text)}];"
        )
    c_fill = pal.category("constant")
    for c in data["constants"]:
        if c["name"] in folded:
            continue
        detail = c.get("value") or (f"#{c['digest']}" if c.get("digest") else "")
        text = f"%{c['name']}\n{c['type']}" + (f"\n{_cut(detail, 32)}" if detail else "")
        out.append(
            f'  {_node_id(c["name"])} [shape=box, style="filled,rounded", '
            f'fillcolor="{c_fill}", fontcolor="{pal.text_on(c_fill)}", '
            f'color="{pal.muted}", fontsize=8, height=0.3, '
            f'margin="0.05,0.02", label={_q(text)}];'
        )

    for fi, fn in enumerate(data["functions"]):
        indent = "  "
        if len(data["functions"]) > 1:
            out.append(f"  subgraph {_q('cluster_' + fn['name'])} {{")
            out.append(f'    label={_q("@" + fn["name"])}; color="{pal.muted}";')
            indent = "    "
        for n in fn["nodes"]:
            fill = pal.category(n["category"])
            if compact:
                consts_here = [o["node"] for o in n["operands"] if o["kind"] == "constant"]
                types = ", ".join(r["type"] for r in n["results"])
                text = f"{n['op']} %{n['name']}" + (f" : {types}" if types else "")
                if consts_here:
                    text += " [" + ", ".join(consts_here) + "]"
                out.append(
                    f"{indent}{_node_id(n['name'])} [shape=box, style=filled, "
                    f'fillcolor="{fill}", fontcolor="{pal.text_on(fill)}", fontsize=9, height=0.25, '
                    f'margin="0.06,0.02", label={_q(text)}];'
                )
            else:
                out.append(
                    f"{indent}{_node_id(n['name'])} [shape=plain, "
                    f'fontcolor="{pal.text_on(fill)}", '
                    f"label={_node_html(n, fill, pal)}];"
                )
        if len(data["functions"]) > 1:
            out.append("  }")
        del fi

    ports = not compact
    for e in data["edges"]:
        if e["from"] in folded:
            continue
        src = _node_id(e["from"])
        dst = _node_id(e["to"])
        if ports:
            if e["kind"] == "result":
                src += f":o{e['from_port']}:s"
            if e["kind"] != "write":
                dst += f":i{e['to_port']}:n"
            else:
                src += ":s"
        attrs = []
        if edge_labels and e["kind"] != "write":
            attrs.append(f"label={_q(' ' + e['shape'])}")
        if e["kind"] == "constant":
            attrs.append(f'color="{pal.muted}"')
            attrs.append("style=dashed")
        out.append(f"  {src} -> {dst}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    out.append("}")
    return "\n".join(out) + "\n"


__all__ = ["graph_data", "graph_to_dot"]
