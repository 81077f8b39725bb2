"""Graph IR -> DOT, in the spirit of Glow's `dumpDAG` and Netron: one box per node, the op and
name on top, its weights and scalars inside (`filter 64×3×7×7`, `alpha = 0.2`: Glow keeps
weights as ports of the node, Netron inside it; neither draws a constant as a node, which sent
dashed edges across whole pages), then the attributes that differ from their defaults, numbers
written for people (`epsilon = 1e-5`); edges carry the tensor's shape. Colours come from the
op's `category` in the op table. Big graphs fold repeated blocks and chains, and the figure is
sized for a column: see `glowviz.exports.drawing`.

Deterministic: everything is derived from names and the graph's stable order, never from object
ids, so two DOT files of two passes diff cleanly. `compact=True` leaves weights and attributes
out of the boxes.

The same data backs the JSON export (`graph_data`), so the JSON is what the figure shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Unpack

from compiler.graph.ir import Constant, Module, Placeholder, Result, Value
from compiler.graph.printer import INLINE_LIMIT, format_attr, format_constant_data
from glowviz.exports.drawing import Box, DotOptions, drawing_dot, human_text, structural_sig


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
# DOT: boxes for glowviz.exports.drawing
# ---------------------------------------------------------------------------------------------

_TYPE = re.compile(r"^(?P<elem>[a-z0-9]+)<(?P<dims>[^>:]*)(?P<q>:[^>]*)?>$")


def dims_text(type_text: str) -> str:
    """`f32<64x3x7x7>` -> `64×3×7×7` (other element kinds keep their name: `i8 64×3`)."""
    m = _TYPE.match(type_text)
    if m is None:
        return type_text
    dims = m.group("dims").replace("x", "×") or "scalar"
    return dims if m.group("elem") == "f32" else f"{m.group('elem')} {dims}"


def constant_line(operand: str, const: dict[str, Any]) -> str:
    """How a weight or scalar reads inside its user's box: `bias 64`, `alpha = 0.2`."""
    value = const.get("value")
    if value and const.get("bytes", 0) <= 4 * 4:
        inner = value[value.find("[") + 1 : value.rfind("]")] if "[" in value else value
        nums = [human_text(x) for x in inner.split(",") if x.strip()]
        shown = nums[0] if len(set(nums)) == 1 else ", ".join(nums)
        if len(nums) > 1 and len(set(nums)) > 1:
            shown = f"[{shown}]"
        return f"{operand} = {shown}"
    return f"{operand} {dims_text(const['type'])}"


def attr_lines(attrs: dict[str, str], hidden: Sequence[str] = ()) -> list[str]:
    """`k = v` for every attribute not at its default, numbers for people."""
    shown = [f"{k} = {human_text(v)}" for k, v in attrs.items() if k not in hidden]
    return [", ".join(shown)] if shown else []


def io_box(name: str, type_text: str, role: str, details: bool, src: str | None = None) -> Box:
    """The box of a model input or output (`src`: the box an output's value comes from),
    drawn the same in the graph and the LIR figures."""
    dims = dims_text(type_text)
    lines = [dims] if details else []
    if role == "input":
        return Box(
            name, "input", name, "input", lines, sig=("input",), out_label=dims, kind="input"
        )
    return Box(
        name,
        "output",
        name,
        "output",
        lines,
        sig=("output",),
        reads=[src] if src else [],
        kind="output",
    )


def graph_boxes(data: dict[str, Any], *, details: bool = True) -> list[Box]:
    """The boxes of `graph_data`: inputs, nodes (weights and scalars inside), outputs. A Save
    node is drawn as the output it writes."""
    consts = {c["name"]: c for c in data["constants"]}
    boxes: list[Box] = []
    for p in data["placeholders"]:
        if p["role"] == "input":
            boxes.append(io_box(p["name"], p["type"], "input", details))
    writes: dict[str, str] = {}  # output placeholder -> the value its Save stores
    for fn in data["functions"]:
        for n in fn["nodes"]:
            reads = [o["node"] for o in n["operands"] if o["kind"] != "constant"]
            if n["op"] == "Save" and len(n["operands"]) >= 2:
                writes[n["operands"][-1]["node"]] = n["operands"][0]["node"]
                continue
            lines: list[str] = []
            if details:
                lines += [
                    constant_line(o["operand"], consts[o["node"]])
                    for o in n["operands"]
                    if o["kind"] == "constant" and o["node"] in consts
                ]
                lines += attr_lines(n["attrs"], n.get("default_attrs", ()))
            boxes.append(
                Box(
                    n["name"],
                    n["op"],
                    n["name"],
                    n["category"],
                    lines,
                    sig=structural_sig(n["op"], n["attrs"]),
                    reads=reads,
                    out_label=", ".join(dims_text(r["type"]) for r in n["results"]),
                )
            )
    for p in data["placeholders"]:
        if p["role"] == "output":
            src = writes.get(p["name"])
            boxes.append(io_box(p["name"], p["type"], "output", details, src))
    return boxes


def graph_to_dot(
    module: Module | dict[str, Any], *, compact: bool = False, **options: Unpack[DotOptions]
) -> str:
    """DOT text of a graph-IR module (or of `graph_data(module)`); `compact` leaves weights and
    attributes out of the boxes."""
    data = module if isinstance(module, dict) else graph_data(module)
    boxes = graph_boxes(data, details=not compact)
    return drawing_dot(data["module"], data.get("stage"), boxes, compact=compact, **options)


__all__ = [
    "attr_lines",
    "constant_line",
    "dims_text",
    "io_box",
    "graph_boxes",
    "graph_data",
    "graph_to_dot",
]
