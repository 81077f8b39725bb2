"""Channel splitting for memory (graph IR, the last post-lowering pass, right before scheduling):
a Conv whose large result is read only by a per-channel downsampling node (MaxPool, AvgPool, a
depthwise Conv) is computed in two channel halves, each reduced straight into its slice of a
Concat:

    %c = Conv(%x, %w, %b)  : f32<1x64x112x112>        %c0 = Conv(%x, %w[:32], %b[:32])
    %p = MaxPool(%c)       : f32<1x64x56x56>    ->    %p0 = MaxPool(%c0)
                                                       %c1 = Conv(%x, %w[32:], %b[32:])
                                                       %p1 = MaxPool(%c1)
                                                       %p = Concat(%p0, %p1, axis=1)

The low-level zero-copy-concat pass then lets each half write its slice of %p, so the widest
step (the Conv's whole result beside the pool's) becomes half the Conv's result beside the pool's:
on Inception-v1 the stem (64x112x112 -> 64x56x56, 4.0 MB) is the largest single operator of
every schedule, and no aliasing of the memory planner can go below it; split, it is 2.4 MB.

The pass only splits where it lowers the bound that matters: the node at the memory model's
operator bound (compiler.scheduling.memory_model, the largest bytes one node needs live, a lower
bound of every schedule's peak), when the split's two steps need less than that node did. It
repeats on the new bound's node, so a pair may be split again (quarters, through nested concats).
Batch 1 only (the slices of a batch>1 concat are not contiguous), and only halves whose slices
start on the planner's alignment.
"""

from __future__ import annotations

import math

from compiler.graph.ir import Function, Node, Result, Value
from compiler.passes.manager import GraphPass
from compiler.passes.rewriter import Rewriter, const_data, producer, single_use
from compiler.scheduling.memory_model import MemoryModel

#: Splits per function at most (each one halves one pair: 4 rounds give sixteenths at most).
MAX_SPLITS = 4
#: Fewest output channels a half keeps (narrower convolutions waste the kernels' vector lanes).
MIN_CHANNELS = 8


def _is_depthwise(node: Node) -> bool:
    if node.op != "Conv":
        return False
    x = node.operands[0].type
    w = node.operands[1].type
    return x.rank == 4 and node.attrs["group"] == x.shape[1] == w.shape[0] and w.shape[1] == 1


def _splittable(reducer: Node, alignment: int) -> Node | None:
    """The Conv feeding `reducer` when the pair can be split in channel halves."""
    if reducer.op not in ("MaxPool", "AvgPool") and not _is_depthwise(reducer):
        return None
    conv = producer(reducer.operands[0])
    if conv is None or conv.op != "Conv" or conv.attrs["group"] != 1:
        return None
    if not single_use(conv.result) or len(reducer.results) != 1:
        return None
    if any(u.op == "Save" for u, _ in reducer.result.users):
        return None  # a graph output is written whole by its copy: no slices to write into
    out = reducer.result.type
    k = conv.result.type.shape[1]
    if out.rank != 4 or out.shape[0] != 1 or out.shape[1] != k or k % 2 or k // 2 < MIN_CHANNELS:
        return None
    if (k // 2) * math.prod(out.shape[2:]) * out.elem.itemsize % alignment:
        return None  # the second half's slice would not start on the planner's alignment
    weights = [conv.operands[1], conv.operands[2]]
    if reducer.op == "Conv":
        weights += [reducer.operands[1], reducer.operands[2]]
    if any(const_data(w) is None for w in weights):
        return None
    return conv


def _bytes(v: Value, alignment: int) -> int:
    return -(-v.type.size_bytes // alignment) * alignment if isinstance(v, Result) else 0


def _split_need(conv: Node, reducer: Node, alignment: int) -> int:
    """The larger of the two steps of a half: its Conv (input and half the result) and its
    reducer (half the result and the whole destination, live from the first slice on)."""
    half = _bytes(conv.result, alignment) // 2
    return max(_bytes(conv.operands[0], alignment) + half, half + _bytes(reducer.result, alignment))


def _halve(rw: Rewriter, conv: Node, reducer: Node) -> None:
    k = conv.result.type.shape[1]
    parts: list[Value] = []
    for lo, hi in ((0, k // 2), (k // 2, k)):

        def piece(v: Value, lo: int = lo, hi: int = hi) -> Value:
            data = const_data(v)
            assert data is not None
            return rw.constant(f"{v.name}_c{lo}", data[lo:hi], like=v.type)

        c = rw.create(
            "Conv",
            [conv.operands[0], piece(conv.operands[1]), piece(conv.operands[2])],
            dict(conv.attrs),
            name=f"{conv.name}_c{lo}",
            origin=[conv],
        )
        if reducer.op == "Conv":
            attrs = dict(reducer.attrs, group=hi - lo)
            operands = [c.result, piece(reducer.operands[1]), piece(reducer.operands[2])]
        else:
            attrs, operands = dict(reducer.attrs), [c.result]
        r = rw.create(reducer.op, operands, attrs, name=f"{reducer.name}_c{lo}", origin=[reducer])
        parts.append(r.result)
    cat = rw.create(
        "Concat", parts, {"axis": 1}, name=f"{reducer.name}_cat", origin=[conv, reducer]
    )
    rw.replace_node(reducer, cat)
    rw.erase(conv)  # its only reader is gone


class ChannelSplit(GraphPass):
    name = "channel-split"

    def run(self, fn: Function) -> bool:
        rw = Rewriter(fn, rule="split-channels-for-memory")
        for _ in range(MAX_SPLITS):
            model = MemoryModel(fn)
            bound, where = model.operator_bound()
            node = fn.find(where) if where else None
            conv = _splittable(node, model.alignment) if node is not None else None
            if node is None or conv is None or _split_need(conv, node, model.alignment) >= bound:
                break
            _halve(rw, conv, node)
        if rw.changed:
            fn.module.remove_unused_constants()
        return rw.changed
