"""Arithmetic simplification: identities (x*1, x+0, x-0, x/1, x**1) removed when broadcasting does
not change x's type; chains of Mul/Add by constants combined ((x*c1)*c2 -> x*(c1*c2)); float
x - c canonicalised to x + (-c) (exact) so chains combine; a per-output-channel Mul or Add by a
constant after a Conv folded into its filter and bias.
"""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Constant, Node, Value
from compiler.passes.batchnorm_folding import foldable_conv, replace_by_conv
from compiler.passes.rewriter import (
    PatternPass,
    Rewriter,
    const_data,
    graph_patterns,
    is_splat,
    producer,
    single_use,
)

#: op -> (identity element, operand positions where the identity may stand)
IDENTITIES = {
    "Mul": (1, (0, 1)),
    "Add": (0, (0, 1)),
    "Sub": (0, (1,)),
    "Div": (1, (1,)),
    "Pow": (1, (1,)),
}


def remove_identity(node: Node, rw: Rewriter) -> bool:
    ident, positions = IDENTITIES[node.op]
    for pos in positions:
        other = node.operands[1 - pos]
        if is_splat(node.operands[pos], ident) and other.type == node.result.type:
            rw.replace_node(node, other)
            return True
    return False


def _const_side(node: Node) -> tuple[Value, Constant] | None:
    lhs, rhs = node.operands
    if const_data(rhs) is not None and const_data(lhs) is None:
        return lhs, rhs  # type: ignore[return-value]
    if const_data(lhs) is not None and const_data(rhs) is None:
        return rhs, lhs  # type: ignore[return-value]
    return None


def combine_chain(node: Node, rw: Rewriter) -> bool:
    """(x op c1) op c2 -> x op (c1 op c2) for op in Mul, Add."""
    outer = _const_side(node)
    if outer is None:
        return False
    inner_v, c2 = outer
    inner = producer(inner_v)
    if inner is None or inner.op != node.op or not single_use(inner_v):
        return False
    pair = _const_side(inner)
    if pair is None:
        return False
    x, c1 = pair
    assert c1.data is not None and c2.data is not None  # _const_side checked both
    f = np.multiply if node.op == "Mul" else np.add
    data = f(c1.data, c2.data).astype(node.result.type.np_dtype)
    if data.ndim == 0:
        data = data.reshape(1)  # Constant() cannot hold 0-d data
        if node.result.type.rank == 0:
            return False
    c = rw.constant(f"{c1.name}_{node.op.lower()}", data)
    new = rw.create(node.op, [x, c], name=node.name, origin=[inner, node])
    rw.replace_node(node, new)
    return True


def sub_to_add(node: Node, rw: Rewriter) -> bool:
    lhs, rhs = node.operands
    data = const_data(rhs)
    if (
        data is None
        or const_data(lhs) is not None
        or not node.result.type.elem.is_float
        or node.result.type.rank == 0
    ):
        return False
    c = rw.constant(f"{rhs.name}_neg", -data)
    new = rw.create("Add", [lhs, c], name=node.name)
    rw.replace_node(node, new)
    return True


def _channel_vector(c: Constant, out_shape: tuple[int, ...]) -> np.ndarray | None:
    """The constant as a per-channel vector [K] if it broadcasts as [1, K, 1, 1] onto out_shape."""
    assert c.data is not None
    if c.data.ndim > 4:
        return None
    full = c.data.reshape((1,) * (4 - c.data.ndim) + c.data.shape)
    if full.shape[0] != 1 or full.shape[2] != 1 or full.shape[3] != 1:
        return None
    if full.shape[1] not in (1, out_shape[1]):
        return None
    return np.broadcast_to(full.reshape(-1), (out_shape[1],)).astype(np.float64)


def fold_into_conv(node: Node, rw: Rewriter) -> bool:
    pair = _const_side(node)
    if pair is None:
        return False
    x, c = pair
    conv = foldable_conv(x)
    if conv is None or node.result.type != x.type:
        return False
    w, b = const_data(conv.operands[1]), const_data(conv.operands[2])
    vec = _channel_vector(c, x.type.shape)
    if w is None or b is None or vec is None:
        return False
    wv, bv = conv.operands[1], conv.operands[2]
    new_w: Value
    if node.op == "Mul":
        new_w = rw.constant(f"{wv.name}_scaled", w * vec.reshape(-1, 1, 1, 1), like=wv.type)
        new_b = rw.constant(f"{bv.name}_scaled", b * vec, like=bv.type)
        suffix = "mul"
    else:
        new_w = wv
        new_b = rw.constant(f"{bv.name}_shifted", b + vec, like=bv.type)
        suffix = "add"
    return replace_by_conv(rw, node, conv, new_w, new_b, suffix)


PATTERNS = graph_patterns(
    {
        "Mul": [remove_identity, combine_chain, fold_into_conv],
        "Add": [remove_identity, combine_chain, fold_into_conv],
        "Sub": [remove_identity, sub_to_add],
        "Div": [remove_identity],
        "Pow": [remove_identity],
    }
)


class ArithmeticSimplification(PatternPass):
    name = "arithmetic-simplification"
    patterns = PATTERNS
