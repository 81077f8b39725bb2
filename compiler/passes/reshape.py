"""Reshape merging: Reshape(Reshape(x)) becomes one Reshape, reshapes to the input's own shape
vanish, and a Reshape of a constant is folded into a new constant.
"""

from __future__ import annotations

from compiler.graph.ir import Node
from compiler.passes.rewriter import (
    PatternPass,
    Rewriter,
    const_data,
    graph_patterns,
    same_op_producer,
)


def remove_identity_reshape(node: Node, rw: Rewriter) -> bool:
    if node.operands[0].type != node.result.type:
        return False
    rw.replace_node(node, node.operands[0])
    return True


def merge_reshapes(node: Node, rw: Rewriter) -> bool:
    inner = same_op_producer(node)
    if inner is None:
        return False
    new = rw.create(
        "Reshape", [inner.operands[0]], dict(node.attrs), name=node.name, origin=[inner, node]
    )
    rw.replace_node(node, new)
    return True


def fold_constant_reshape(node: Node, rw: Rewriter) -> bool:
    data = const_data(node.operands[0])
    if data is None or node.result.type.rank == 0:  # Constant() cannot hold 0-d data
        return False
    c = rw.constant(f"{node.operands[0].name}_r", data.reshape(node.attrs["shape"]))
    rw.replace_node(node, c)
    return True


PATTERNS = graph_patterns(
    {"Reshape": [remove_identity_reshape, fold_constant_reshape, merge_reshapes]}
)


class ReshapeMerging(PatternPass):
    name = "reshape-merging"
    patterns = PATTERNS
