"""Pad merging: a constant-mode Pad that only pads H and W (NCHW, non-negative amounts) and has a
single use is merged into the pads of the Conv / pooling node that reads it:

- Conv: pad value 0.
- AvgPool: pad value 0, ceil_mode 0, and either count_include_pad=1 already or no pads of its own
  (then count_include_pad becomes 1: explicit zeros are counted, as they were before).
- MaxPool (ceil_mode 0): pad value -inf (MaxPool's own padding semantics); or 0 when the input
  is known to be non-negative (Relu, or a Conv/FC with fused relu), the pool has no pads of its
  own and every window still covers a real element (pad < kernel, dilation 1): the max of
  non-negative values is then unchanged by the zeros.
"""

from __future__ import annotations

import math

from compiler.graph.ir import Node, Value
from compiler.passes.rewriter import (
    PatternPass,
    Rewriter,
    graph_patterns,
    producer,
    single_use,
)


def _hw_pads(pad: Node) -> tuple[int, int, int, int] | None:
    """(top, left, bottom, right) if the Pad is constant-mode, rank 4 and pads only H/W."""
    p = pad.attrs["pads"]
    if pad.attrs["mode"] != "constant" or len(p) != 8 or any(x < 0 for x in p):
        return None
    if p[0] or p[1] or p[4] or p[5]:
        return None
    return p[2], p[3], p[6], p[7]


def _non_negative(v: Value) -> bool:
    src = producer(v)
    if src is None:
        return False
    if src.op == "Relu":
        return True
    return src.op in ("Conv", "FullyConnected") and src.attrs["activation"] == "relu"


def merge_pad(node: Node, rw: Rewriter) -> bool:
    pad = producer(node.operands[0])
    if pad is None or pad.op != "Pad" or not single_use(pad.result):
        return False
    hw = _hw_pads(pad)
    if hw is None:
        return False
    value = pad.attrs["value"]
    attrs = dict(node.attrs)
    if node.op == "Conv":
        if value != 0.0:
            return False
    elif node.op == "AvgPool":
        if value != 0.0 or attrs["ceil_mode"]:
            return False
        if not attrs["count_include_pad"]:
            if any(attrs["pads"]):
                return False
            attrs["count_include_pad"] = 1
    elif node.op == "MaxPool":
        if attrs["ceil_mode"]:
            return False
        if value == -math.inf:
            pass
        elif value == 0.0 and _non_negative(pad.operands[0]):
            kh, kw = attrs["kernel"]
            old = attrs["pads"]
            total = [a + b for a, b in zip(old, hw)]
            if (
                tuple(attrs["dilations"]) != (1, 1)
                or any(old)
                or max(total[0], total[2]) >= kh
                or max(total[1], total[3]) >= kw
            ):
                return False
        else:
            return False
    else:
        return False
    attrs["pads"] = tuple(a + b for a, b in zip(attrs["pads"], hw))
    new = rw.create(
        node.op, [pad.operands[0], *node.operands[1:]], attrs, name=node.name, origin=[pad, node]
    )
    rw.replace_node(node, new)
    return True


PATTERNS = graph_patterns({op: [merge_pad] for op in ("Conv", "AvgPool", "MaxPool")})


class PadMerging(PatternPass):
    name = "pad-merging"
    patterns = PATTERNS
    prune_constants = False
