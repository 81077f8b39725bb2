"""ONNX training ops (domain ai.onnx.preview.training) at import: Gradient by reverse-mode
differentiation of the ONNX nodes between its `xs` and `y`, into ordinary graph ops.

The seed is ones shaped like `y` (the gradient of the sum of y's elements, as ONNX defines
it); each node on a path from an x to y adds its operands' terms: Add, Sub, Mul, Div, Neg,
Identity, on operands of one shape (a broadcasting operand would need a sum over its
broadcast dims: refused). Anything else on the path is refused with the op named.
"""

from __future__ import annotations

import numpy as np
import onnx

from compiler.frontend.converters_math import FLOAT_ONLY, check_elem
from compiler.frontend.onnx_importer import NodeContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Value

TRAINING_DOMAIN = "ai.onnx.preview.training"
#: Ops the differentiation knows, by their partial derivatives below.
_DIFFERENTIABLE = frozenset({"Add", "Sub", "Mul", "Div", "Neg", "Identity"})


def _producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in graph.node for o in n.output if o}


@converter("Gradient", domain=TRAINING_DOMAIN)
def convert_gradient(ctx: NodeContext) -> list[Value | None]:
    ctx.check_attrs({"xs": None, "y": None, "zs": None})
    if ctx.attr("zs"):
        raise ctx.unsupported("attribute 'zs' (constant inputs of the differentiated graph)")
    xs = [x.decode() if isinstance(x, bytes) else str(x) for x in ctx.attr("xs")]
    y_attr = ctx.attr("y")
    y_name = y_attr.decode() if isinstance(y_attr, bytes) else str(y_attr)
    made_by = _producers(ctx.imp.graph)
    # The nodes between xs and y, each once, consumers before producers (reverse order).
    order: list[onnx.NodeProto] = []
    seen: set[str] = set()
    stack = [y_name]
    while stack:
        name = stack.pop()
        node = made_by.get(name)
        if name in seen or name in xs or node is None:
            continue
        seen.add(name)
        order.append(node)
        stack.extend(i for i in node.input if i)
    index = {id(n): k for k, n in enumerate(ctx.imp.graph.node)}
    order.sort(key=lambda n: -index[id(n)])

    y = ctx.imp.lookup(y_name, ctx)
    check_elem(ctx, y, FLOAT_ONLY, "y")
    grads: dict[str, Value] = {
        y_name: ctx.constant(np.ones(y.type.shape, y.type.np_dtype), suffix="seed")
    }

    def add_grad(name: str, g: Value, tag: str) -> None:
        v = ctx.imp.lookup(name, ctx)
        if v.type.shape != g.type.shape:
            raise ctx.unsupported(
                f"'{name}' {v.type} is broadcast against {g.type} on the path to y"
            )
        grads[name] = ctx.create("Add", [grads[name], g], suffix=tag) if name in grads else g

    for k, node in enumerate(order):
        out = node.output[0]
        g = grads.get(out)
        if g is None:  # no path from this node's output to y carries a gradient
            continue
        if node.op_type not in _DIFFERENTIABLE or len(node.output) != 1:
            raise ctx.unsupported(f"cannot differentiate op {node.op_type} ('{node.name or out}')")
        ins = list(node.input)
        tag = f"d{k}"
        if node.op_type in ("Identity", "Add"):
            for j, name in enumerate(ins):
                add_grad(name, g, f"{tag}_{j}")
        elif node.op_type == "Neg":
            add_grad(ins[0], ctx.create("Neg", [g], suffix=tag), tag)
        elif node.op_type == "Sub":
            add_grad(ins[0], g, f"{tag}_0")
            add_grad(ins[1], ctx.create("Neg", [g], suffix=f"{tag}_neg"), f"{tag}_1")
        elif node.op_type == "Mul":
            p, q = (ctx.imp.lookup(n, ctx) for n in ins)
            add_grad(ins[0], ctx.create("Mul", [g, q], suffix=f"{tag}_dp"), f"{tag}_0")
            add_grad(ins[1], ctx.create("Mul", [g, p], suffix=f"{tag}_dq"), f"{tag}_1")
        else:  # Div: d(p/q) = dp / q - dq * p / q^2
            p, q = (ctx.imp.lookup(n, ctx) for n in ins)
            add_grad(ins[0], ctx.create("Div", [g, q], suffix=f"{tag}_dp"), f"{tag}_0")
            quot = ctx.create("Div", [ctx.imp.lookup(out, ctx), q], suffix=f"{tag}_pq2")
            dq = ctx.create("Neg", [ctx.create("Mul", [g, quot], suffix=f"{tag}_gq")], suffix=tag)
            add_grad(ins[1], dq, f"{tag}_1")
    outs: list[Value | None] = []
    for x_name in xs:
        x = ctx.imp.lookup(x_name, ctx)
        g = grads.get(x_name)
        if g is None:  # y does not depend on this x
            g = ctx.constant(np.zeros(x.type.shape, x.type.np_dtype), suffix=f"zero_{x_name}")
        outs.append(g)
    return outs
