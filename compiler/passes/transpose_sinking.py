"""Transpose sinking and cancellation.

Transposes are moved below element-wise unary ops, and below element-wise binary ops when both
operands are transposed by the same perm or the other operand is a constant (permuted at compile
time) or a one-element value. Transpose(Transpose(x)) becomes one Transpose (or none), identity
perms vanish, a Transpose of a constant is folded and one of a one-element value broadcast
(ONNX's ConstantOfShape, too large to fold) broadcasts it to the permuted shape instead. Sinking
brings transposes together so they cancel.
"""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Constant, Function, Node, Value
from compiler.passes.rewriter import (
    PatternPass,
    PatternTable,
    Rewriter,
    const_data,
    graph_patterns,
    producer,
    same_op_producer,
    single_use,
)


def inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def compose(inner: tuple[int, ...], outer: tuple[int, ...]) -> tuple[int, ...]:
    """The perm of Transpose(Transpose(x, inner), outer)."""
    return tuple(inner[p] for p in outer)


def is_identity(perm: tuple[int, ...]) -> bool:
    return all(i == p for i, p in enumerate(perm))


def remove_identity(node: Node, rw: Rewriter) -> bool:
    if not is_identity(node.attrs["perm"]):
        return False
    rw.replace_node(node, node.operands[0])
    return True


def merge_transposes(node: Node, rw: Rewriter) -> bool:
    inner = same_op_producer(node)
    if inner is None:
        return False
    perm = compose(inner.attrs["perm"], node.attrs["perm"])
    x = inner.operands[0]
    if is_identity(perm):
        rw.replace_node(node, x)
        return True
    new = rw.create("Transpose", [x], {"perm": perm}, name=node.name, origin=[inner, node])
    rw.replace_node(node, new)
    return True


def fold_constant_transpose(node: Node, rw: Rewriter) -> bool:
    data = const_data(node.operands[0])
    if data is None:
        return False
    c = rw.constant(f"{node.operands[0].name}_t", np.transpose(data, node.attrs["perm"]))
    rw.replace_node(node, c)
    return True


def transpose_splat(node: Node, rw: Rewriter) -> bool:
    """Transpose(Broadcast(x)) with one element in x: every element is x's either way, so the
    Broadcast makes the permuted shape directly. (onnx's light models make their Gemm weights
    with ConstantOfShape: VGG-19's 411 MB first FC weight was filled, then transposed, on
    every run.)"""
    b = producer(node.operands[0])
    if b is None or b.op != "Broadcast" or b.operands[0].type.numel != 1:
        return False
    new = rw.create(
        "Broadcast",
        [b.operands[0]],
        {"shape": node.result.type.shape},
        name=node.name,
        origin=[b, node],
    )
    rw.replace_node(node, new)
    return True


def _transposed(v: Value) -> Node | None:
    n = producer(v)
    return n if n is not None and n.op == "Transpose" else None


def sink_unary(node: Node, rw: Rewriter) -> bool:
    t = _transposed(node.operands[0])
    if t is None or not single_use(t.result):
        return False
    moved = rw.create(node.op, [t.operands[0]], dict(node.attrs), name=node.name, origin=[node, t])
    new_t = rw.create("Transpose", [moved.result], dict(t.attrs), name=t.name, origin=[t])
    rw.replace_node(node, new_t)
    return True


def _permute_other(other: Value, perm: tuple[int, ...], rank: int, rw: Rewriter) -> Value | None:
    """`other` as an operand on the un-transposed side, or None if that is not possible."""
    if other.type.numel == 1 and other.type.rank <= rank:
        return other
    data = const_data(other)
    if data is None or data.ndim > rank:
        return None
    full = data.reshape((1,) * (rank - data.ndim) + data.shape)
    return rw.constant(f"{other.name}_t", np.transpose(full, inverse(perm)))


def sink_binary(node: Node, rw: Rewriter) -> bool:
    lhs, rhs = node.operands
    tl, tr = _transposed(lhs), _transposed(rhs)
    t: Node | None
    if tl is not None and tr is not None:
        if tl.attrs["perm"] != tr.attrs["perm"]:
            return False
        if tl is not tr and not (single_use(lhs) and single_use(rhs)):
            return False
        if tl.operands[0].type.rank != tr.operands[0].type.rank:
            return False
        operands = [tl.operands[0], tr.operands[0]]
        t, origin = tl, [node, tl, tr]
    elif (t := tl or tr) is not None:
        if not single_use(t.result):
            return False
        perm = t.attrs["perm"]
        other_idx = 1 if t is tl else 0
        other = node.operands[other_idx]
        if not isinstance(other, Constant) and other.type.numel != 1:
            return False
        new_other = _permute_other(other, perm, len(perm), rw)
        if new_other is None:
            return False
        operands = [t.operands[0], new_other]
        if other_idx == 0:
            operands.reverse()
        origin = [node, t]
    else:
        return False
    assert t is not None
    # Operand ranks never exceed the perm's, so the result keeps the perm's rank.
    moved = rw.create(node.op, operands, dict(node.attrs), name=node.name, origin=origin)
    new_t = rw.create("Transpose", [moved.result], dict(t.attrs), name=t.name, origin=[t])
    rw.replace_node(node, new_t)
    return True


def _table() -> PatternTable:
    """Built per run from the op table's traits (an op registered later is covered too)."""
    from compiler.graph.ops import all_ops

    table: dict[str, list] = {
        "Transpose": [remove_identity, fold_constant_transpose, merge_transposes, transpose_splat]
    }
    for name, op in all_ops().items():
        if "elementwise" not in op.traits or "pure" not in op.traits:
            continue
        if "unary" in op.traits or name == "Cast":
            table[name] = [sink_unary]
        elif "binary" in op.traits:
            table[name] = [sink_binary]
    return graph_patterns(table)


class TransposeSinking(PatternPass):
    name = "transpose-sinking"

    def table(self, fn: Function) -> PatternTable:
        return _table()
