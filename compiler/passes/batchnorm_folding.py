"""BatchNorm folding: BatchNorm(Conv(x, w, b)) with constant filter, bias and BN parameters and a
single use of the Conv becomes one Conv with scaled weights:
w' = w * s[k], b' = (b - mean) * s + beta, where s = gamma / sqrt(var + eps).
The folded Conv is named `<conv>_bn` with both nodes as origin.
"""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Node, Value
from compiler.passes.rewriter import (
    PatternPass,
    Rewriter,
    const_data,
    graph_patterns,
    producer,
    single_use,
)


def foldable_conv(x: Value) -> Node | None:
    """The Conv producing float `x` when a per-channel affine map of `x` can be folded into its
    weights: no fused activation, and `x` has no other use."""
    conv = producer(x)
    if (
        conv is None
        or conv.op != "Conv"
        or conv.attrs["activation"] != "none"
        or not single_use(x)
        or not x.type.elem.is_float
    ):
        return None
    return conv


def replace_by_conv(rw: Rewriter, node: Node, conv: Node, w: Value, b: Value, suffix: str) -> bool:
    """Replace `node` (an affine map of `conv`'s result) by `conv` with weights `w` and bias
    `b`, named `<conv>_<suffix>`, both nodes its origin."""
    new = rw.create(
        "Conv",
        [conv.operands[0], w, b],
        dict(conv.attrs),
        name=f"{conv.name}_{suffix}",
        origin=[conv, node],
    )
    rw.replace_node(node, new)
    return True


def fold_batchnorm(bn: Node, rw: Rewriter) -> bool:
    conv = foldable_conv(bn.operands[0])
    if conv is None:
        return False
    w, b = const_data(conv.operands[1]), const_data(conv.operands[2])
    params = [const_data(v) for v in bn.operands[1:]]
    if w is None or b is None or any(p is None for p in params):
        return False
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
    s = gamma / np.sqrt(var + bn.attrs["epsilon"])
    new_w = w.astype(np.float64) * s.reshape(-1, 1, 1, 1)
    new_b = (b.astype(np.float64) - mean) * s + beta
    wt, bt = conv.operands[1].type, conv.operands[2].type
    cw = rw.constant(f"{conv.operands[1].name}_bn", new_w, like=wt)
    cb = rw.constant(f"{conv.operands[2].name}_bn", new_b, like=bt)
    return replace_by_conv(rw, bn, conv, cw, cb, "bn")


PATTERNS = graph_patterns({"BatchNorm": [fold_batchnorm]})


class BatchNormFolding(PatternPass):
    name = "batchnorm-folding"
    patterns = PATTERNS
