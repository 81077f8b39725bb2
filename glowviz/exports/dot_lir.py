"""Low-level IR -> DOT (or text): instructions top to bottom in program order, each box with its
index, kind and name, the buffer it writes and the weights it reads written inside (not drawn
as nodes of their own), and the allocactivation / deallocactivation markers folded into the
instructions they frame; an edge from the instruction that last wrote a buffer to each one
reading it. Colours follow the category of the graph op an instruction computes. Big programs
fold repeated blocks of instructions (`glowviz.exports.drawing`). `lir_data` is the JSON of the
view.
"""

from __future__ import annotations

from typing import Any, Unpack

from compiler.lir.instructions import Kind
from glowviz.exports.dot_graph import attr_lines, dims_text, io_box
from glowviz.exports.drawing import Box, DotOptions, drawing_dot, structural_sig


def _default_attrs(ins: Any) -> list[str]:
    """Attributes an instruction holds at its graph op's default (left out of figures)."""
    from compiler.graph.ops import all_ops
    from glowviz.exports.dot_graph import _is_default

    op = all_ops().get(ins.idef.graph_op) if ins.idef.graph_op else None
    if op is None:
        return []
    return sorted(k for k, v in ins.attrs.items() if k in op.attrs and _is_default(op.attrs[k], v))


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
                "default_attrs": _default_attrs(ins),
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


def lir_text(fn: Any) -> str:
    from compiler.lir.printer import print_lir

    return print_lir(fn)


_MARKERS = (Kind.ALLOC, Kind.DEALLOC)


def lir_boxes(data: dict[str, Any], *, details: bool = True) -> list[Box]:
    """The boxes of `lir_data`: the inputs, every instruction but the markers (folded into the
    next or previous instruction's box), the outputs."""
    weights = {w["name"]: w for w in data["weights"]}
    instrs = data["instructions"]
    root: dict[str, str] = {}  # value -> the buffer (alloc or weight) it addresses
    types: dict[str, str] = {w["name"]: w["type"] for w in data["weights"]}
    for ins in instrs:
        if ins["kind"] == Kind.ALLOC:
            root[ins["name"]] = ins["name"]
            types[ins["name"]] = ins["type"] or ""
        elif ins["kind"] == Kind.VIEW and ins["operands"]:
            src = ins["operands"][0]["value"]
            root[ins["name"]] = root.get(src, src)
            types[ins["name"]] = ins["type"] or ""
    boxes: list[Box] = []
    for w in data["weights"]:
        if w["mutability"] != "constant" and w["role"] == "input":
            boxes.append(io_box(w["name"], w["type"], "input", details))
    writer: dict[str, str] = {}  # buffer -> key of the box that last wrote it
    pending: list[tuple[str, str]] = []  # (marker, line) waiting for the next instruction
    for ins in instrs:
        kind = ins["kind"]
        if kind in _MARKERS:
            buf = ins["name"] if kind == Kind.ALLOC else ins["operands"][0]["value"]
            text = ("alloc %" if kind == Kind.ALLOC else "dealloc %") + buf
            if kind == Kind.ALLOC or not boxes or boxes[-1].kind != "op":
                pending.append((ins["name"], text))
            else:
                boxes[-1].folded.append(ins["name"])
                if details:
                    boxes[-1].lines.append(text)
            continue
        reads, outs = [], []
        lines = [text for _, text in pending] if details else []
        folded = [name for name, _ in pending]
        pending = []
        for o in ins["operands"]:
            v, mode = o["value"], o["mode"]
            buf = root.get(v, v)
            w = weights.get(buf)
            if w is not None and w["mutability"] == "constant":
                if details:
                    lines.append(f"%{v} {dims_text(w['type'])}")
                continue
            if mode in ("in", "inout") and buf in writer:
                reads.append(writer[buf])
            elif mode in ("in", "inout") and w is not None:
                reads.append(buf)  # an input weight
            if mode in ("out", "inout"):
                outs.append(v)
        if details:
            lines += [f"@out %{v}" for v in outs]
            lines += attr_lines(ins["attrs"], ins.get("default_attrs", ()))
        key = ins["name"]
        boxes.append(
            Box(
                key,
                f"#{ins['index']} {kind}",
                ins["name"],
                ins["category"],
                lines,
                sig=structural_sig(kind, ins["attrs"], tuple(o["mode"] for o in ins["operands"])),
                reads=list(dict.fromkeys(reads)),
                out_label=", ".join(
                    dims_text(types.get(root.get(v, v), ""))
                    for v in outs
                    if types.get(root.get(v, v))
                ),
                index=ins["index"],
                folded=folded,
            )
        )
        for v in outs:
            writer[root.get(v, v)] = key
    for w in data["weights"]:
        if w["mutability"] != "constant" and w["role"] == "output":
            src = writer.get(w["name"])
            boxes.append(io_box(w["name"], w["type"], "output", details, src))
    return boxes


def lir_to_dot(fn: Any, *, compact: bool = False, **options: Unpack[DotOptions]) -> str:
    """DOT text of a low-level function (or of `lir_data(fn)`); `compact` leaves operand
    details out of the boxes."""
    data = fn if isinstance(fn, dict) else lir_data(fn)
    boxes = lir_boxes(data, details=not compact)
    return drawing_dot("@" + data["function"], data.get("stage"), boxes, compact=compact, **options)


__all__ = ["lir_boxes", "lir_data", "lir_text", "lir_to_dot"]
